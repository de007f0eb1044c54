//! `/proc/locks`: which process holds a lock on which file.

/// A `flock(2)` lock `/proc/locks` lists as held (a waiter's `->` line is not one).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeldFlock {
    /// The holder, as this reader's pid namespace numbers it (0 when outside it).
    pub pid: i32,
    /// The locked file's inode number.
    pub inode: u64,
}

/// The `flock(2)` locks held, from the text of `/proc/locks`: lines such as
/// `1: FLOCK  ADVISORY  WRITE 1234 00:2a:5678 0 EOF`. A line that does not parse is left
/// out.
pub fn parse_flocks(locks: &[u8]) -> Vec<HeldFlock> {
    locks.split(|&b| b == b'\n').filter_map(parse_line).collect()
}

fn parse_line(line: &[u8]) -> Option<HeldFlock> {
    let line = std::str::from_utf8(line).ok()?;
    let mut fields = line.split_ascii_whitespace();
    fields.next()?.strip_suffix(':')?;
    if fields.next()? != "FLOCK" {
        return None;
    }
    let _mandatory = fields.next()?;
    let _access = fields.next()?;
    let pid = fields.next()?.parse().ok()?;
    // MAJOR:MINOR:INODE, the device numbers in hexadecimal.
    let inode = fields.next()?.rsplit(':').next()?.parse().ok()?;
    Some(HeldFlock { pid, inode })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn held_flocks_without_waiters_or_other_kinds() {
        let text = b"1: FLOCK  ADVISORY  WRITE 4242 00:2a:917 0 EOF\n\
                     1: -> FLOCK  ADVISORY  WRITE 4343 00:2a:917 0 EOF\n\
                     2: POSIX  ADVISORY  WRITE 500 08:01:77 0 EOF\n\
                     3: OFDLCK ADVISORY  READ -1 00:05:12 0 EOF\n\
                     4: FLOCK  ADVISORY  READ 600 fd:00:123456789012 0 EOF\n\
                     5: FLOCK  ADVISORY  WRITE x 00:2a:1 0 EOF\n";
        assert_eq!(
            parse_flocks(text),
            [HeldFlock { pid: 4242, inode: 917 }, HeldFlock { pid: 600, inode: 123456789012 }]
        );
        assert_eq!(parse_flocks(b""), []);
    }
}
