//! Reading a stopped process's facts from `/proc`: mappings, identity, auxv, command line.

use std::path::PathBuf;

use sdt_store::{Content, Mapping, Perms, ProcessInfo};
use sdt_sys::Tid;

/// Parses `/proc/PID/maps`; lines that do not parse are skipped with a warning. The
/// mappings' `content` is left [`Content::Unreadable`] for the capture to decide.
pub(crate) fn parse_maps(text: &str) -> Vec<Mapping> {
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

fn parse_maps_line(line: &str) -> Option<Mapping> {
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

/// `/proc/TID/<name>` as bytes (`TID` may be any thread of a process).
pub(crate) fn read(pid: Tid, name: &str) -> std::io::Result<Vec<u8>> {
    std::fs::read(format!("/proc/{pid}/{name}"))
}

/// `/proc/TID/<name>` as text.
pub(crate) fn read_text(pid: Tid, name: &str) -> std::io::Result<String> {
    std::fs::read_to_string(format!("/proc/{pid}/{name}"))
}

/// The name of thread `tid` of `pid`.
pub(crate) fn thread_name(pid: Tid, tid: Tid) -> String {
    read_text(pid, &format!("task/{tid}/comm")).map(|s| s.trim_end().to_owned()).unwrap_or_default()
}

/// The process's identity, from `stat`, `status`, `cmdline`, `exe` and `cwd` read through
/// `via`, a live thread (a leader that exited first has no memory left to show), and the
/// leader's `comm`.
pub(crate) fn process_info(pid: Tid, via: Tid) -> std::io::Result<ProcessInfo> {
    let stat = read_text(via, "stat")?;
    let (ppid, pgrp, sid) = parse_stat_ids(&stat).unwrap_or_default();
    let status = read_text(via, "status")?;
    let first_id = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
    };
    let link = |name: &str| {
        std::fs::read_link(format!("/proc/{via}/{name}"))
            .map(|p: PathBuf| p.display().to_string())
            .unwrap_or_default()
    };
    Ok(ProcessInfo {
        pid: pid.raw(),
        ppid,
        pgrp,
        sid,
        uid: first_id("Uid:").unwrap_or(0),
        gid: first_id("Gid:").unwrap_or(0),
        comm: read_text(pid, "comm")?.trim_end().to_owned(),
        exe: link("exe"),
        cmdline: parse_cmdline(&read(via, "cmdline")?),
        cwd: link("cwd"),
    })
}

/// `ppid`, `pgrp` and `session` from `/proc/PID/stat`, whose second field (the command,
/// in parentheses) may itself hold spaces and parentheses.
fn parse_stat_ids(stat: &str) -> Option<(i32, i32, i32)> {
    let after = &stat[stat.rfind(')')? + 1..];
    let mut fields = after.split_whitespace().skip(1);
    let mut next = || fields.next()?.parse().ok();
    Some((next()?, next()?, next()?))
}

fn parse_cmdline(raw: &[u8]) -> Vec<String> {
    let raw = raw.strip_suffix(&[0]).unwrap_or(raw);
    if raw.is_empty() {
        return Vec::new();
    }
    raw.split(|&b| b == 0).map(|a| String::from_utf8_lossy(a).into_owned()).collect()
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
        assert_eq!(maps[1].path, "[stack]");
        assert_eq!(maps[1].end - maps[1].start, 0x21000);
        assert!(maps[2].perms.shared && !maps[2].perms.read);
        assert_eq!(maps[2].offset, 0x1000);
        assert_eq!(maps[3].start, 0xffffffffff600000);
        assert!(maps[3].perms.exec);
    }

    #[test]
    fn stat_with_parentheses_in_comm() {
        assert_eq!(parse_stat_ids("83 (Thread.(<lambda>)) S 1 19 19 0 -1"), Some((1, 19, 19)));
        assert_eq!(parse_stat_ids("83 (a) b) R 7 8 9"), Some((7, 8, 9)));
        assert_eq!(parse_stat_ids("83 (a"), None);
    }

    #[test]
    fn cmdline_args() {
        assert_eq!(parse_cmdline(b"./prog\0-n\0\xff\0"), vec!["./prog", "-n", "\u{fffd}"]);
        assert_eq!(parse_cmdline(b""), Vec::<String>::new());
    }
}
