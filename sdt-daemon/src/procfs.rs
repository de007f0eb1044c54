//! Reading a stopped process's facts from `/proc`: mappings, identity, credentials, auxv,
//! command line, open files, signal dispositions, memory layout.

use std::os::unix::fs::FileTypeExt;
use std::path::PathBuf;

use sdt_store::{
    Credentials, FileKind, FileRef, Mapping, MemoryLayout, OpenFile, ProcessInfo, ThreadCredentials,
};
use sdt_sys::Tid;

/// Parses `/proc/PID/maps`; lines that do not parse are skipped with a warning. The
/// mappings' `content` is left [`Content::Unreadable`] for the capture to decide.
pub(crate) fn parse_maps(text: &str) -> Vec<Mapping> {
    text.lines()
        .filter_map(|line| {
            let entry = Mapping::parse_maps_line(line);
            if entry.is_none() && !line.is_empty() {
                log::warn!("unparsable line in maps: {line:?}");
            }
            entry
        })
        .collect()
}

/// `/proc/TID/<name>` as bytes (`TID` may be any thread of a process).
pub(crate) fn read(pid: Tid, name: &str) -> std::io::Result<Vec<u8>> {
    std::fs::read(format!("/proc/{pid}/{name}"))
}

/// `/proc/TID/<name>` as text.
pub(crate) fn read_text(pid: Tid, name: &str) -> std::io::Result<String> {
    std::fs::read_to_string(format!("/proc/{pid}/{name}"))
}

/// Bytes of process `pid`'s memory resident now (`/proc/PID/statm`), if it can be read.
pub(crate) fn resident_bytes(pid: Tid) -> Option<u64> {
    let statm = read_text(pid, "statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * sdt_store::PAGE_SIZE)
}

/// The name of thread `tid` of `pid`.
pub(crate) fn thread_name(pid: Tid, tid: Tid) -> String {
    read_text(pid, &format!("task/{tid}/comm")).map(|s| s.trim_end().to_owned()).unwrap_or_default()
}

/// The process's identity, from `stat`, `status`, `cmdline`, `exe` and `cwd` read through
/// `live_thread`, a thread that has not exited (a leader that exited first has no memory
/// left to show), and the leader's `comm`; its credentials, `live_thread`'s and those of
/// each thread whose own differ.
pub(crate) fn process_info(pid: Tid, live_thread: Tid) -> std::io::Result<ProcessInfo> {
    let stat = read_text(live_thread, "stat")?;
    let (ppid, pgrp, sid) = parse_stat_ids(&stat).unwrap_or_default();
    let status_bytes = read(live_thread, "status")?;
    let status = String::from_utf8_lossy(&status_bytes);
    let creds = Credentials::parse_status(&status_bytes);
    if creds.is_none() {
        log::warn!("process {pid}: no credentials in /proc/{live_thread}/status");
    }
    let first_id = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
    };
    let link = |name: &str| {
        std::fs::read_link(format!("/proc/{live_thread}/{name}"))
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
        cmdline: parse_cmdline(&read(live_thread, "cmdline")?),
        cwd: link("cwd"),
        thread_creds: creds.as_ref().map(|c| differing_credentials(pid, c)).unwrap_or_default(),
        dumpable: creds.as_ref().and_then(|c| dumpable(live_thread, c)),
        creds,
    })
}

/// The threads of `pid` whose credentials are not `common`, by their ids in the
/// process's own pid namespace. Threads that exit meanwhile are left out.
fn differing_credentials(pid: Tid, common: &Credentials) -> Vec<ThreadCredentials> {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return Vec::new() };
    let mut out = Vec::new();
    for entry in dir.flatten() {
        let Ok(status) = std::fs::read(entry.path().join("status")) else { continue };
        let tid = || ns_tid_in(&status).or_else(|| entry.file_name().to_str()?.parse().ok());
        match (Credentials::parse_status(&status), tid()) {
            (Some(own), Some(tid)) if own != *common => out.push(ThreadCredentials { tid, creds: own }),
            (Some(_), Some(_)) => {}
            _ => log::warn!("thread {:?} of process {pid}: no credentials in its status", entry.file_name()),
        }
    }
    out.sort_unstable_by_key(|t| t.tid);
    out
}

/// Whether the process is dumpable, told by the owner of its `/proc/TID` directory: the
/// kernel makes it the thread's effective user when the process is dumpable, root
/// otherwise. `None` for a thread whose effective user is root, where both look alike.
fn dumpable(live_thread: Tid, creds: &Credentials) -> Option<bool> {
    use std::os::unix::fs::MetadataExt;
    let euid = creds.uids.effective;
    if euid == 0 {
        return None;
    }
    Some(std::fs::metadata(format!("/proc/{live_thread}")).ok()?.uid() == euid)
}

/// `ppid`, `pgrp` and `session` from `/proc/PID/stat`, whose second field (the command,
/// in parentheses) may itself hold spaces and parentheses.
fn parse_stat_ids(stat: &str) -> Option<(i32, i32, i32)> {
    let after = &stat[stat.rfind(')')? + 1..];
    let mut fields = after.split_whitespace().skip(1);
    let mut next = || fields.next()?.parse().ok();
    Some((next()?, next()?, next()?))
}

/// The id of thread `tid` in its own (innermost) pid namespace: the last `NSpid` entry.
pub(crate) fn ns_tid(tid: Tid) -> Option<i32> {
    ns_tid_in(&read(tid, "status").ok()?)
}

/// The last `NSpid` entry of a `status` file.
fn ns_tid_in(status: &[u8]) -> Option<i32> {
    let line = status.split(|&b| b == b'\n').find_map(|l| l.strip_prefix(b"NSpid:"))?;
    std::str::from_utf8(line).ok()?.split_whitespace().last()?.parse().ok()
}

/// The process's open file descriptors, ascending. A descriptor closed while the
/// directory is read is left out.
pub(crate) fn open_files(pid: Tid) -> std::io::Result<Vec<OpenFile>> {
    let dir = format!("/proc/{pid}/fd");
    let mut files = Vec::new();
    for entry in std::fs::read_dir(&dir)? {
        let Some(fd) = entry?.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else { continue };
        let link = format!("{dir}/{fd}");
        let (Ok(target), Ok(info)) = (std::fs::read_link(&link), read_text(pid, &format!("fdinfo/{fd}")))
        else {
            continue;
        };
        let target = target.display().to_string();
        let meta = std::fs::metadata(&link).ok();
        let kind = file_kind(&target, meta.as_ref());
        let file = match (&meta, kind) {
            (Some(m), FileKind::Regular) => Some(FileRef::of(&target, m)),
            _ => None,
        };
        let (pos, flags) = parse_fdinfo(&info);
        files.push(OpenFile { fd, target, kind, flags, pos, file, inherited: false });
    }
    files.sort_unstable_by_key(|f| f.fd);
    Ok(files)
}

/// What a descriptor refers to, from its link text and the file's type.
fn file_kind(target: &str, meta: Option<&std::fs::Metadata>) -> FileKind {
    if target.starts_with("anon_inode:") {
        return FileKind::AnonInode;
    }
    if target.starts_with("socket:[") {
        return FileKind::Socket;
    }
    if target.starts_with("pipe:[") {
        return FileKind::Pipe;
    }
    let Some(t) = meta.map(|m| m.file_type()) else { return FileKind::Other };
    if t.is_file() {
        FileKind::Regular
    } else if t.is_dir() {
        FileKind::Directory
    } else if t.is_char_device() {
        FileKind::CharDevice
    } else if t.is_block_device() {
        FileKind::BlockDevice
    } else if t.is_fifo() {
        FileKind::Pipe
    } else if t.is_socket() {
        FileKind::Socket
    } else {
        FileKind::Other
    }
}

/// `pos` (decimal) and `flags` (octal) of an fdinfo file.
fn parse_fdinfo(info: &str) -> (u64, u32) {
    let field = |key: &str| info.lines().find_map(|l| l.strip_prefix(key)).map(str::trim);
    let pos = field("pos:").and_then(|v| v.parse().ok()).unwrap_or(0);
    let flags = field("flags:").and_then(|v| u32::from_str_radix(v, 8).ok()).unwrap_or(0);
    (pos, flags)
}

/// The caught and the ignored signals (`SigCgt`, `SigIgn` of `status`), bit `n-1` for
/// signal `n`.
pub(crate) fn signal_sets(pid: Tid) -> std::io::Result<(u64, u64)> {
    let status = read_text(pid, "status")?;
    let mask = |key: &str| {
        status.lines().find_map(|l| l.strip_prefix(key)).and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
    };
    Ok((mask("SigCgt:").unwrap_or(0), mask("SigIgn:").unwrap_or(0)))
}

/// The memory descriptor's fields from `/proc/PID/stat`; `brk` is the end of the heap
/// mapping among `mappings` (or `start_brk` without one).
pub(crate) fn memory_layout(pid: Tid, mappings: &[Mapping]) -> std::io::Result<MemoryLayout> {
    let stat = read_text(pid, "stat")?;
    let bad = || std::io::Error::new(std::io::ErrorKind::InvalidData, "unexpected /proc/PID/stat");
    let layout = parse_stat_layout(&stat).ok_or_else(bad)?;
    let brk = mappings.iter().find(|m| m.path == "[heap]").map_or(layout.start_brk, |m| m.end);
    Ok(MemoryLayout { brk, ..layout })
}

/// Fields 26–28 and 45–51 of `stat` (1-based, as proc(5) numbers them).
fn parse_stat_layout(stat: &str) -> Option<MemoryLayout> {
    // Field 3 (state) is the first after the command's closing parenthesis.
    let fields: Vec<u64> =
        stat[stat.rfind(')')? + 1..].split_whitespace().map(|f| f.parse().unwrap_or(0)).collect();
    let field = |n: usize| fields.get(n - 3).copied();
    Some(MemoryLayout {
        start_code: field(26)?,
        end_code: field(27)?,
        start_stack: field(28)?,
        start_data: field(45)?,
        end_data: field(46)?,
        start_brk: field(47)?,
        brk: 0,
        arg_start: field(48)?,
        arg_end: field(49)?,
        env_start: field(50)?,
        env_end: field(51)?,
    })
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
    fn stat_layout_fields() {
        // A real line: `cat` at rest (fields past 51 cut).
        let stat = "4242 (c a)t) S 1 4242 4242 0 -1 4194304 100 0 0 0 0 0 0 0 20 0 1 0 \
                    5 2273280 200 18446744073709551615 94000000000000 94000000016000 \
                    140730000000000 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0 94000000030000 \
                    94000000031000 94000001000000 140730000001000 140730000001100 \
                    140730000001100 140730000002000 0";
        let layout = parse_stat_layout(stat).unwrap();
        assert_eq!(layout.start_code, 94000000000000);
        assert_eq!(layout.end_code, 94000000016000);
        assert_eq!(layout.start_stack, 140730000000000);
        assert_eq!(layout.start_data, 94000000030000);
        assert_eq!(layout.end_data, 94000000031000);
        assert_eq!(layout.start_brk, 94000001000000);
        assert_eq!((layout.arg_start, layout.arg_end), (140730000001000, 140730000001100));
        assert_eq!((layout.env_start, layout.env_end), (140730000001100, 140730000002000));
        assert_eq!(parse_stat_layout("1 (x) S 1 2 3"), None);
    }

    #[test]
    fn fdinfo_fields() {
        assert_eq!(parse_fdinfo("pos:\t4096\nflags:\t02100002\nmnt_id:\t25\nino:\t7\n"), (4096, 0o2100002));
        assert_eq!(parse_fdinfo("garbage"), (0, 0));
    }

    #[test]
    fn own_files_and_signals() {
        let me = Tid::new(std::process::id() as i32).unwrap();
        let file = tempfile::tempfile().unwrap();
        use std::io::Write;
        (&file).write_all(b"hello").unwrap();
        let files = open_files(me).unwrap();
        let ours =
            files.iter().find(|f| f.target.contains("(deleted)") && f.pos == 5).expect("the temp file");
        assert_eq!(ours.kind, FileKind::Regular);
        assert_eq!(ours.flags & libc::O_ACCMODE as u32, libc::O_RDWR as u32);
        assert!(files.windows(2).all(|w| w[0].fd < w[1].fd));
        let (_caught, ignored) = signal_sets(me).unwrap();
        // Rust's runtime ignores SIGPIPE.
        assert_ne!(ignored & (1 << (libc::SIGPIPE - 1)), 0);
    }

    #[test]
    fn namespace_tid_and_own_credentials() {
        assert_eq!(ns_tid_in(b"Name:\t\xff\nNSpid:\t4242\t17\t3\nNSpgid:\t1\n"), Some(3));
        assert_eq!(ns_tid_in(b"NSpid:\t4242\n"), Some(4242));
        assert_eq!(ns_tid_in(b"NSpid:\n"), None);
        let me = Tid::new(std::process::id() as i32).unwrap();
        let info = process_info(me, me).unwrap();
        let creds = info.creds.expect("this kernel writes every credential line");
        // The ids as `status` lists them.
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let uid_line = status.lines().find(|l| l.starts_with("Uid:")).unwrap();
        assert_eq!(creds.uids.as_array().map(|u| u.to_string()).join("\t"), uid_line[4..].trim());
        // The test's threads all share the process's credentials.
        assert_eq!(info.thread_creds, []);
        assert_eq!(info.dumpable.is_none(), creds.uids.effective == 0);
    }

    #[test]
    fn cmdline_args() {
        assert_eq!(parse_cmdline(b"./prog\0-n\0\xff\0"), vec!["./prog", "-n", "\u{fffd}"]);
        assert_eq!(parse_cmdline(b""), Vec::<String>::new());
    }
}
