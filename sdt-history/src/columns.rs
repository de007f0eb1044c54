//! Columns of LEB128 varints in a zstd frame: how the replay record and a packed events
//! file store their values, alike values side by side for zstd to find.

use std::io::Read;

/// Appends `v` as a LEB128 varint.
pub(crate) fn put(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Small magnitudes of either sign as small unsigned values: 0, −1, 1, −2 … → 0, 1, 2, 3 …
pub(crate) fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

/// The inverse of [`zigzag`].
pub(crate) fn unzigzag(v: u64) -> i64 {
    (v >> 1) as i64 ^ -((v & 1) as i64)
}

/// A reader of LEB128 varints.
pub(crate) struct Varints<'a> {
    bytes: &'a [u8],
    read: usize,
}

impl<'a> Varints<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        Varints { bytes, read: 0 }
    }

    /// Bytes not read yet.
    pub(crate) fn left(&self) -> usize {
        self.bytes.len() - self.read
    }

    /// The next byte, as it is.
    pub(crate) fn byte(&mut self) -> Result<u8, &'static str> {
        let byte = *self.bytes.get(self.read).ok_or("the columns end before it")?;
        self.read += 1;
        Ok(byte)
    }

    /// The next varint.
    pub(crate) fn next(&mut self) -> Result<u64, &'static str> {
        let mut v: u64 = 0;
        for shift in (0..64).step_by(7) {
            let Some(&byte) = self.bytes.get(self.read) else { return Err("the columns end inside it") };
            self.read += 1;
            let bits = u64::from(byte & 0x7f);
            if bits << shift >> shift != bits {
                return Err("more than 64 bits");
            }
            v |= bits << shift;
            if byte & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err("more than 64 bits")
    }
}

/// `columns` in one zstd frame at `level`, with its checksum.
pub(crate) fn compress(columns: &[u8], level: i32) -> Vec<u8> {
    let mut zstd = zstd::bulk::Compressor::new(level).expect("a valid zstd level");
    zstd.set_parameter(zstd::zstd_safe::CParameter::ChecksumFlag(true)).expect("zstd takes a checksum flag");
    zstd.compress(columns).expect("zstd compresses into a growing buffer")
}

/// The one zstd frame `frame`, which must decode to `size` bytes. The output grows only
/// as the frame yields it: a header that claims much allocates nothing.
pub(crate) fn decompress(frame: &[u8], size: u64) -> Result<Vec<u8>, String> {
    let zstd_error = |e: std::io::Error| format!("zstd: {e}");
    let mut decoder = zstd::stream::read::Decoder::with_buffer(frame).map_err(zstd_error)?.single_frame();
    let mut columns = Vec::new();
    (&mut decoder).take(size + 1).read_to_end(&mut columns).map_err(zstd_error)?;
    if columns.len() as u64 != size {
        return Err(format!("{} bytes decoded, the header says {size}", columns.len()));
    }
    if !decoder.finish().is_empty() {
        return Err("bytes after the zstd frame".into());
    }
    Ok(columns)
}
