//! The framing of gdb's remote serial protocol: `$DATA#CS` packets, each acknowledged
//! with `+` until both sides agree to stop (`QStartNoAckMode`), binary data escaped with
//! `}` (XOR 0x20), and the hex encodings most packets use.
//!
//! ```text
//! gdb → server   $qSupported:multiprocess+;swbreak+#xx     checksum: sum of DATA mod 256
//! server → gdb   +$PacketSize=4000;qXfer:…#xx               `+` acknowledges gdb's packet
//! gdb → server   +                                          and gdb acknowledges ours
//! ```

use std::io::{self, BufRead, Write};

/// What gdb sent: a packet, or the interrupt byte (Ctrl-C).
#[derive(Debug, PartialEq, Eq)]
pub enum Incoming {
    /// The contents of a `$…#CS` packet whose checksum matched.
    Packet(Vec<u8>),
    /// `\x03`: gdb asks the target to stop.
    Interrupt,
}

/// One end of a connection to gdb.
pub struct Connection<R, W> {
    input: R,
    output: W,
    /// Whether packets are still acknowledged (`+`/`-`).
    acks: bool,
}

impl<R: BufRead, W: Write> Connection<R, W> {
    /// A connection reading gdb's packets from `input` and writing ours to `output`.
    pub fn new(input: R, output: W) -> Self {
        Connection { input, output, acks: true }
    }

    /// Stops acknowledging packets, after the reply to `QStartNoAckMode`.
    pub fn stop_acks(&mut self) {
        self.acks = false;
    }

    /// The next packet or interrupt; `None` when gdb closed the connection. A packet
    /// whose checksum does not match is answered `-` (gdb sends it again) and skipped.
    pub fn receive(&mut self) -> io::Result<Option<Incoming>> {
        loop {
            let Some(byte) = self.byte()? else { return Ok(None) };
            match byte {
                b'$' => {}
                0x03 => return Ok(Some(Incoming::Interrupt)),
                // Acknowledgements of our packets, and noise between packets.
                _ => continue,
            }
            let mut data = Vec::new();
            if self.input.read_until(b'#', &mut data)? == 0 || data.pop() != Some(b'#') {
                return Ok(None);
            }
            let mut sum = [0; 2];
            if self.input.read_exact(&mut sum).is_err() {
                return Ok(None);
            }
            let good = std::str::from_utf8(&sum).ok().and_then(|s| u8::from_str_radix(s, 16).ok())
                == Some(checksum(&data));
            if self.acks {
                self.output.write_all(if good { b"+" } else { b"-" })?;
                self.output.flush()?;
            }
            if good {
                return Ok(Some(Incoming::Packet(data)));
            }
        }
    }

    /// Sends one packet (already escaped where it holds binary data).
    pub fn send(&mut self, data: &[u8]) -> io::Result<()> {
        let mut framed = Vec::with_capacity(data.len() + 4);
        framed.push(b'$');
        framed.extend_from_slice(data);
        framed.extend_from_slice(format!("#{:02x}", checksum(data)).as_bytes());
        self.output.write_all(&framed)?;
        self.output.flush()
    }

    fn byte(&mut self) -> io::Result<Option<u8>> {
        let mut b = [0];
        match self.input.read(&mut b) {
            Ok(0) => Ok(None),
            Ok(_) => Ok(Some(b[0])),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => self.byte(),
            Err(e) => Err(e),
        }
    }
}

/// The packet checksum: the sum of its bytes, modulo 256.
fn checksum(data: &[u8]) -> u8 {
    data.iter().fold(0u8, |sum, &b| sum.wrapping_add(b))
}

/// `data` escaped for a binary reply: `#`, `$`, `}` and `*` become `}` and the byte XOR
/// 0x20.
pub fn escape_binary(data: &[u8], out: &mut Vec<u8>) {
    for &b in data {
        if matches!(b, b'#' | b'$' | b'}' | b'*') {
            out.extend_from_slice(&[b'}', b ^ 0x20]);
        } else {
            out.push(b);
        }
    }
}

/// `data` as lower-case hex, two digits a byte.
pub fn to_hex(data: &[u8]) -> String {
    data.iter().map(|b| format!("{b:02x}")).collect()
}

/// Hex digits as bytes; `None` for an odd count or a character that is not a digit.
pub fn from_hex(text: &[u8]) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    text.chunks(2).map(|pair| u8::from_str_radix(std::str::from_utf8(pair).ok()?, 16).ok()).collect()
}

/// A hex number as gdb writes addresses, lengths and thread ids.
pub fn hex_number(text: &[u8]) -> Option<u64> {
    u64::from_str_radix(std::str::from_utf8(text).ok()?, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packets_are_acknowledged_and_checked() {
        let input: &[u8] = b"+$qSupported:swbreak+#8b$g#00$g#67\x03";
        let mut out = Vec::new();
        let mut conn = Connection::new(input, &mut out);
        assert_eq!(conn.receive().unwrap(), Some(Incoming::Packet(b"qSupported:swbreak+".to_vec())));
        // The bad checksum is refused, the good copy taken.
        assert_eq!(conn.receive().unwrap(), Some(Incoming::Packet(b"g".to_vec())));
        assert_eq!(conn.receive().unwrap(), Some(Incoming::Interrupt));
        assert_eq!(conn.receive().unwrap(), None);
        conn.stop_acks();
        conn.send(b"OK").unwrap();
        assert_eq!(out, b"+-+$OK#9a");
    }

    #[test]
    fn a_packet_cut_short_ends_the_connection() {
        let mut out = Vec::new();
        let mut conn = Connection::new(&b"$qC#1"[..], &mut out);
        assert_eq!(conn.receive().unwrap(), None);
        let mut conn = Connection::new(&b"$qC"[..], &mut out);
        assert_eq!(conn.receive().unwrap(), None);
    }

    #[test]
    fn binary_and_hex() {
        let mut out = Vec::new();
        escape_binary(b"a#$}*z", &mut out);
        assert_eq!(out, b"a}\x03}\x04}]}\x0az");
        assert_eq!(to_hex(b"\x00\xffA"), "00ff41");
        assert_eq!(from_hex(b"00ff41"), Some(b"\x00\xffA".to_vec()));
        assert_eq!(from_hex(b"0"), None);
        assert_eq!(from_hex(b"zz"), None);
        assert_eq!(hex_number(b"7ffc1000"), Some(0x7ffc_1000));
        assert_eq!(hex_number(b""), None);
    }
}
