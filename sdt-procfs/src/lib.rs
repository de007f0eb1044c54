//! The `/proc` files SDT reads, parsed in one place: a process's `maps`, `stat`, `statm`,
//! `status`, `fdinfo/N`, `cmdline` and `cgroup`, the system's `/proc/stat`, `/proc/locks`
//! and `/proc/meminfo`, and a cgroup's memory limit and usage.
//!
//! ```no_run
//! use sdt_sys::Tid;
//!
//! let pid = Tid::new(1234).unwrap();
//! let mappings = sdt_procfs::maps(pid)?;
//! let creds = sdt_procfs::parse_credentials(&sdt_procfs::read(pid, "status")?);
//! let zombie = sdt_procfs::Stat::parse(&sdt_procfs::read(pid, "stat")?).and_then(|s| s.state()) == Some('Z');
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! Parsers take the file's bytes (text, for `maps`, whose paths the store keeps as
//! strings) and return the store's types where it has one ([`Mapping`],
//! [`Credentials`](sdt_store::Credentials), [`MemoryLayout`](sdt_store::MemoryLayout))
//! and plain numbers otherwise. Readers are thin:
//! [`read`], [`read_text`] and [`maps`] open `/proc/PID/<name>` and nothing else;
//! [`MapsFile`] keeps a process's `maps` open for reading again.
//!
//! # Design constraints
//!
//! - Parsers never panic: a file's bytes come from the kernel, but thread names, paths
//!   and command lines in them come from the program. What does not parse is `None` (or
//!   a line left out, for `maps`), never a guess; the fuzz target `procfs` checks it.
//! - The command in `stat` (field 2) is the thread's name in parentheses and may itself
//!   hold spaces, parentheses and bytes that are not UTF-8: the fields after it start at
//!   the file's *last* `)`.
//! - This crate decides nothing about a process: which files to read, and what to do
//!   when one is missing (the process is gone), is for the daemon and the restorer.
//!
//! # References
//!
//! - [proc_pid_maps(5)](https://man7.org/linux/man-pages/man5/proc_pid_maps.5.html),
//!   [proc_pid_stat(5)](https://man7.org/linux/man-pages/man5/proc_pid_stat.5.html),
//!   [proc_pid_status(5)](https://man7.org/linux/man-pages/man5/proc_pid_status.5.html),
//!   [proc_pid_fdinfo(5)](https://man7.org/linux/man-pages/man5/proc_pid_fdinfo.5.html),
//!   [proc_stat(5)](https://man7.org/linux/man-pages/man5/proc_stat.5.html)

#![deny(missing_docs)]
#![deny(unsafe_code)]

mod locks;
mod maps;
mod memory;
mod stat;
mod status;

pub use locks::{HeldFlock, parse_flocks};
pub use maps::{parse_maps, parse_maps_line};
pub use memory::{
    MemoryCgroup, parse_cgroup_bytes, parse_meminfo_bytes, parse_memory_cgroup, parse_memory_stat,
};
pub use stat::{Stat, parse_cpu_idle_ticks, parse_statm_resident};
pub use status::{
    parse_credentials, parse_epoll, parse_eventfd, parse_fdinfo, parse_fdinfo_identity, parse_limits,
    parse_ns_tid, parse_personality, parse_real_ids, parse_seccomp, parse_signal_sets, parse_signalfd,
    parse_tgid, parse_timerfd, parse_timers, parse_tracer_pid, parse_umask,
};

use std::fs::File;
use std::os::unix::fs::FileExt;

use sdt_store::Mapping;
use sdt_sys::Tid;

/// A thread's descriptor directories, `/proc/TID/fd` and `/proc/TID/fdinfo`, opened
/// once: each descriptor is looked up relative to them, which costs half of a walk from
/// `/` (a program with thousands of descriptors has them all read in a pause).
#[derive(Debug)]
pub struct FdDirs {
    tid: Tid,
    fd: File,
    fdinfo: File,
}

impl FdDirs {
    /// Opens thread `tid`'s descriptor directories.
    pub fn open(tid: Tid) -> std::io::Result<FdDirs> {
        Ok(FdDirs {
            tid,
            fd: File::open(format!("/proc/{tid}/fd"))?,
            fdinfo: File::open(format!("/proc/{tid}/fdinfo"))?,
        })
    }

    /// The thread they were opened for.
    pub fn tid(&self) -> Tid {
        self.tid
    }

    /// The descriptors open now, in no order.
    pub fn list(&self) -> std::io::Result<Vec<i32>> {
        let mut fds = Vec::new();
        for entry in std::fs::read_dir(format!("/proc/{}/fd", self.tid))? {
            if let Some(fd) = entry?.file_name().to_str().and_then(|n| n.parse().ok()) {
                fds.push(fd);
            }
        }
        Ok(fds)
    }

    /// Descriptor `fd`'s `fdinfo` file, into `bytes` (whose room is used again).
    pub fn info(&self, fd: i32, bytes: &mut Vec<u8>) -> std::io::Result<()> {
        use nix::fcntl::{OFlag, openat};
        let flags = OFlag::O_RDONLY | OFlag::O_CLOEXEC;
        let file = openat(&self.fdinfo, fd.to_string().as_str(), flags, nix::sys::stat::Mode::empty())?;
        read_from_start(&File::from(file), bytes)
    }

    /// What descriptor `fd`'s link says: a path, `pipe:[N]`, `socket:[N]`, ….
    pub fn link(&self, fd: i32) -> std::io::Result<std::ffi::OsString> {
        Ok(nix::fcntl::readlinkat(&self.fd, fd.to_string().as_str())?)
    }

    /// The `stat` of the file descriptor `fd` refers to.
    pub fn stat(&self, fd: i32) -> std::io::Result<nix::sys::stat::FileStat> {
        Ok(nix::sys::stat::fstatat(&self.fd, fd.to_string().as_str(), nix::fcntl::AtFlags::empty())?)
    }
}

/// `/proc/TID/<name>` as bytes (`TID` may be any thread of a process).
pub fn read(pid: Tid, name: &str) -> std::io::Result<Vec<u8>> {
    read_whole(&format!("/proc/{pid}/{name}"))
}

/// `/proc/TID/<name>` as text; an error if it is not UTF-8.
pub fn read_text(pid: Tid, name: &str) -> std::io::Result<String> {
    String::from_utf8(read(pid, name)?).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
}

/// A `/proc` file's bytes.
fn read_whole(path: &str) -> std::io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    read_from_start(&File::open(path)?, &mut bytes)?;
    Ok(bytes)
}

/// Reads `file` from its start into `bytes` (replacing what they held). A `/proc` file's
/// size shows as 0, so `std::fs::read` would ask for it and then read 32 bytes, 32 more,
/// 64, … (a dozen calls for `maps`); a read into a page takes a small file whole, or a
/// page of a large one.
fn read_from_start(file: &File, bytes: &mut Vec<u8>) -> std::io::Result<()> {
    const PAGE: usize = 4096;
    bytes.resize(bytes.capacity().max(PAGE), 0);
    let mut len = 0;
    loop {
        if bytes.len() - len < PAGE {
            bytes.resize(bytes.len() * 2, 0);
        }
        match file.read_at(&mut bytes[len..], len as u64) {
            Ok(0) => break,
            Ok(n) => len += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => {
                bytes.clear();
                return Err(e);
            }
        }
    }
    bytes.truncate(len);
    Ok(())
}

/// The mappings of `pid`'s process, read from its `maps` and parsed by [`parse_maps`].
pub fn maps(pid: Tid) -> std::io::Result<Vec<Mapping>> {
    Ok(parse_maps(&read_text(pid, "maps")?))
}

/// A process's `maps`, kept open to be read again: on a virtual machine, opening
/// `/proc/PID/maps` 100 ms after the last look costs 50–120 µs (the lookup of
/// `/proc/PID` made again), reading it again 20–100. The file answers for the address
/// space it was opened on, whichever of the process's threads opened it and whether or
/// not that thread has ended since; after an `execve`, open it again.
pub struct MapsFile {
    file: File,
    text: Vec<u8>,
}

impl MapsFile {
    /// Opens `/proc/TID/maps`.
    pub fn open(pid: Tid) -> std::io::Result<MapsFile> {
        Ok(MapsFile { file: File::open(format!("/proc/{pid}/maps"))?, text: Vec::new() })
    }

    /// The mappings now, parsed by [`parse_maps`]; none once the address space is gone.
    pub fn read(&mut self) -> std::io::Result<Vec<Mapping>> {
        read_from_start(&self.file, &mut self.text)?;
        let text = std::str::from_utf8(&self.text)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
        Ok(parse_maps(text))
    }
}

/// A process's `stat`, kept open for its signal dispositions, which every thread shares:
/// read again, it answers in about 2 µs, where opening and reading `status` takes 9.
/// After an `execve`, open it again.
pub struct StatFile {
    file: File,
    text: Vec<u8>,
}

impl StatFile {
    /// Opens `/proc/PID/stat`.
    pub fn open(pid: Tid) -> std::io::Result<StatFile> {
        Ok(StatFile { file: File::open(format!("/proc/{pid}/stat"))?, text: Vec::new() })
    }

    /// The caught and the ignored signals among 1–31 now (see [`Stat::signal_sets`]).
    pub fn signal_sets(&mut self) -> std::io::Result<(u64, u64)> {
        read_from_start(&self.file, &mut self.text)?;
        Stat::parse(&self.text).and_then(|stat| stat.signal_sets()).ok_or_else(|| {
            std::io::Error::new(std::io::ErrorKind::InvalidData, "no signal sets in /proc/PID/stat")
        })
    }
}

/// The arguments of a `cmdline` file: NUL-terminated, each made UTF-8 (bytes that are
/// not become U+FFFD).
pub fn parse_cmdline(raw: &[u8]) -> Vec<String> {
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
    fn cmdline_args() {
        assert_eq!(parse_cmdline(b"./prog\0-n\0\xff\0"), vec!["./prog", "-n", "\u{fffd}"]);
        assert_eq!(parse_cmdline(b"a b\0\0"), vec!["a b", ""]);
        // A program that rewrote its arguments may leave the last unterminated.
        assert_eq!(parse_cmdline(b"x"), vec!["x"]);
        assert_eq!(parse_cmdline(b""), Vec::<String>::new());
        assert_eq!(parse_cmdline(b"\0"), Vec::<String>::new());
    }

    #[test]
    fn a_kept_maps_file_sees_mappings_made_after_it_was_opened() {
        let me = Tid::new(std::process::id() as i32).unwrap();
        let mut kept = MapsFile::open(me).unwrap();
        let covers = |maps: &[Mapping], at: u64| maps.iter().any(|m| m.start <= at && at < m.end);
        assert!(!kept.read().unwrap().is_empty());
        // Large enough for malloc to map it on its own, and unmap it when freed.
        let region = vec![7u8; 64 << 20];
        let at = region.as_ptr() as u64 + (32 << 20);
        let now = kept.read().unwrap();
        assert!(covers(&now, at), "{at:#x} not in {now:?}");
        drop(region);
        assert!(!covers(&kept.read().unwrap(), at), "{at:#x} still mapped");
    }

    #[test]
    fn a_kept_stat_file_tells_the_dispositions_status_tells() {
        // A shell that ignores SIGUSR2 (12), then becomes `sleep`, which keeps it ignored.
        let mut child =
            std::process::Command::new("sh").args(["-c", "trap '' USR2; exec sleep 30"]).spawn().unwrap();
        let pid = Tid::new(child.id() as i32).unwrap();
        let mut kept = StatFile::open(pid).unwrap();
        let low = (1u64 << 31) - 1;
        let mut sets = (0, 0);
        for _ in 0..500 {
            sets = kept.signal_sets().unwrap();
            let (caught, ignored) = parse_signal_sets(&read(pid, "status").unwrap());
            if read_text(pid, "comm").unwrap().trim() == "sleep" && sets == (caught & low, ignored & low) {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        child.kill().unwrap();
        child.wait().unwrap();
        assert_ne!(sets.1 & (1 << (12 - 1)), 0, "{sets:x?}");
        assert_eq!(sets.0, 0, "sleep catches nothing: {sets:x?}");
    }

    #[test]
    fn files_longer_than_a_page_are_read_whole() {
        let bytes: Vec<u8> = (0..10_000u32).map(|i| i as u8).collect();
        let path = std::env::temp_dir().join(format!("sdt-procfs-{}", std::process::id()));
        std::fs::write(&path, &bytes).unwrap();
        let read_back = read_whole(path.to_str().unwrap());
        std::fs::remove_file(&path).unwrap();
        assert_eq!(read_back.unwrap(), bytes);
        // A /proc file hands over at most a page per read: every mapping's last line.
        let me = Tid::new(std::process::id() as i32).unwrap();
        let smaps = read_text(me, "smaps").unwrap();
        assert!(smaps.len() > 4096 && smaps.ends_with('\n'));
        assert_eq!(smaps.matches("VmFlags:").count(), smaps.matches("\nSize:").count());
    }

    #[test]
    fn own_files() {
        let me = Tid::new(std::process::id() as i32).unwrap();
        let mappings = maps(me).unwrap();
        let here = cmdline_args as fn() as usize as u64;
        let text = mappings.iter().find(|m| m.contains(here)).expect("the mapping of this code");
        assert!(text.perms.exec && !text.perms.write);
        assert!(parse_credentials(&read(me, "status").unwrap()).is_some());
        let stat = read(me, "stat").unwrap();
        assert_eq!(
            Stat::parse(&stat).and_then(|s| s.ids()).map(|(ppid, ..)| ppid),
            Some(std::os::unix::process::parent_id() as i32)
        );
        // This thread reads its own state while it runs.
        let own = std::fs::read("/proc/thread-self/stat").unwrap();
        assert_eq!(Stat::parse(&own).and_then(|s| s.state()), Some('R'));
        assert!(parse_statm_resident(&read(me, "statm").unwrap()).unwrap() > 0);
        assert!(!parse_cmdline(&read(me, "cmdline").unwrap()).is_empty());
    }
}
