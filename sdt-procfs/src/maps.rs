//! `/proc/PID/maps`: one mapping a line.

use sdt_store::{Content, Mapping, Perms};

/// Parses `/proc/PID/maps`; lines that do not parse are left out with a warning. The
/// mappings' `content` is left [`Content::Unreadable`] for the capture to decide.
pub fn parse_maps(text: &str) -> Vec<Mapping> {
    text.lines()
        .filter_map(|line| {
            let entry = parse_maps_line(line);
            if entry.is_none() && !line.is_empty() {
                log::warn!("unparsable line in maps: {line:?}");
            }
            entry
        })
        .collect()
}

/// Parses one line of `/proc/PID/maps`; `None` if it does not parse. The path is the
/// rest of the line as the kernel wrote it, spaces and a `(deleted)` suffix included;
/// the mapping's `content` is left [`Content::Unreadable`] for the capture to decide.
pub fn parse_maps_line(line: &str) -> Option<Mapping> {
    // 7f3c5a000000-7f3c5a021000 rw-p 00000000 00:00 0                          [heap]
    let mut rest = line;
    let mut field = || {
        let trimmed = rest.trim_start();
        let end = trimmed.find(' ').unwrap_or(trimmed.len());
        let (f, r) = trimmed.split_at(end);
        rest = r;
        f
    };
    let (start, end) = field().split_once('-')?;
    let perms = field().as_bytes();
    let offset = field();
    let dev = field().to_owned();
    let inode = field().parse().ok()?;
    if perms.len() != 4 {
        return None;
    }
    Some(Mapping {
        start: u64::from_str_radix(start, 16).ok()?,
        end: u64::from_str_radix(end, 16).ok()?,
        perms: Perms {
            read: perms[0] == b'r',
            write: perms[1] == b'w',
            exec: perms[2] == b'x',
            shared: perms[3] == b's',
        },
        offset: u64::from_str_radix(offset, 16).ok()?,
        dev,
        inode,
        path: rest.trim_start().to_owned(),
        content: Content::Unreadable,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_lines() {
        let text = "55d0c1a00000-55d0c1a01000 r--p 00000000 fd:01 1311 /tmp/a b/prog (deleted)\n\
                    7ffd1c5e3000-7ffd1c604000 rw-p 00000000 00:00 0                          [stack]\n\
                    7f00-7f01 ---s 00001000 00:05 77 /SYSV00000000 (deleted)\n\
                    ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]\n\
                    garbage\n";
        let maps = parse_maps(text);
        assert_eq!(maps.len(), 4);
        assert_eq!(maps[0].path, "/tmp/a b/prog (deleted)");
        assert_eq!(maps[0].inode, 1311);
        assert_eq!(maps[0].dev, "fd:01");
        assert!(maps[0].perms.read && !maps[0].perms.write && !maps[0].perms.shared);
        assert_eq!(maps[0].content, Content::Unreadable);
        assert_eq!(maps[1].path, "[stack]");
        assert_eq!(maps[1].end - maps[1].start, 0x21000);
        assert!(maps[2].perms.shared && !maps[2].perms.read);
        assert_eq!(maps[2].offset, 0x1000);
        assert_eq!(maps[3].start, 0xffffffffff600000);
        assert!(maps[3].perms.exec);
    }

    #[test]
    fn anonymous_and_odd_paths() {
        let anon = parse_maps_line("7f0000000000-7f0000001000 rw-p 00000000 00:00 0 ").unwrap();
        assert_eq!((anon.path.as_str(), anon.inode), ("", 0));
        let bare = parse_maps_line("1000-2000 rw-p 00000000 00:00 0").unwrap();
        assert_eq!(bare.path, "");
        // Spaces inside and at the end of a path are the path's.
        let spaced = parse_maps_line("1000-2000 r-xp 00000000 08:01 9   /a  b (deleted) ").unwrap();
        assert_eq!(spaced.path, "/a  b (deleted) ");
        let named = parse_maps_line("1000-2000 rw-p 00000000 00:00 0 [anon:my pool]").unwrap();
        assert_eq!(named.path, "[anon:my pool]");
    }

    #[test]
    fn what_does_not_parse() {
        for line in [
            "",
            "garbage",
            "1000 rw-p 00000000 00:00 0",
            "1000-2000 rw-p 00000000 00:00",
            "1000-2000 rw-p 00000000 00:00 x /a",
            "1000-2000 rw- 00000000 00:00 0 /a",
            "1000-2000 rw-pp 00000000 00:00 0 /a",
            "1000-g000 rw-p 00000000 00:00 0 /a",
            "1000-2000 rw-p 0000000z 00:00 0 /a",
            "1000-10000000000000000 rw-p 00000000 00:00 0",
            // Four characters, five bytes.
            "1000-2000 r\u{e9}-p 00000000 00:00 0",
        ] {
            assert_eq!(parse_maps_line(line), None, "{line:?}");
        }
    }
}
