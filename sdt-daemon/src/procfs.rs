//! Reading a stopped process's facts from `/proc`: identity, credentials, open files,
//! signal sets, memory layout. The files are parsed by `sdt-procfs`; what is read when,
//! and what a missing file means, is decided here.

use std::collections::HashMap;
use std::fs::File;
use std::ops::Range;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::PathBuf;

use sdt_procfs::{FdDirs, Stat, read, read_text};
use sdt_store::{
    Credentials, DELETED_FILES_KEPT, EpollWatch, FileKind, FilePart, FileRef, FileState, Mapping,
    MemoryLayout, OpenFile, PosixTimer, ProcessInfo, SeccompMode, ThreadCredentials,
};
use sdt_sys::{Tid, backing, fds};

/// Bytes of process `pid`'s memory resident now (`/proc/PID/statm`), if it can be read.
pub(crate) fn resident_bytes(pid: Tid) -> Option<u64> {
    Some(sdt_procfs::parse_statm_resident(&read(pid, "statm").ok()?)? * sdt_store::PAGE_SIZE)
}

/// Whether thread `tid`, which sdt holds stopped, is being killed or gone: only `SIGKILL`
/// makes a stopped thread run, into its exit (where it may stop for its tracer once more,
/// exiting).
pub(crate) fn killed_while_stopped(tid: Tid) -> bool {
    let Ok(stat) = read(tid, "stat") else { return true };
    let Some(stat) = Stat::parse(&stat) else { return true };
    stat.is_exiting() != Some(false) || !matches!(stat.state(), Some('t' | 'T'))
}

/// The name of thread `tid` of `pid`.
pub(crate) fn thread_name(pid: Tid, tid: Tid) -> String {
    read_text(pid, &format!("task/{tid}/comm")).map(|s| s.trim_end().to_owned()).unwrap_or_default()
}

/// The process's identity, limits, umask and personality, from `stat`, `status`,
/// `cmdline`, `exe`, `cwd`, `limits` and `personality` read through `live_thread`, a thread that has not exited (a leader that
/// exited first has no memory left to show), and the leader's `comm`; its credentials,
/// `live_thread`'s and those of each thread whose own differ.
pub(crate) fn process_info(pid: Tid, live_thread: Tid) -> std::io::Result<ProcessInfo> {
    let stat = read(live_thread, "stat")?;
    let (ppid, pgrp, sid) = Stat::parse(&stat).and_then(|s| s.ids()).unwrap_or_default();
    let status = read(live_thread, "status")?;
    let creds = sdt_procfs::parse_credentials(&status);
    if creds.is_none() {
        log::warn!("process {pid}: no credentials in /proc/{live_thread}/status");
    }
    let (uid, gid) = sdt_procfs::parse_real_ids(&status);
    let link = |name: &str| {
        std::fs::read_link(format!("/proc/{live_thread}/{name}"))
            .map(|p: PathBuf| p.display().to_string())
            .unwrap_or_default()
    };
    let exe = link("exe");
    Ok(ProcessInfo {
        pid: pid.raw(),
        ppid,
        pgrp,
        sid,
        uid,
        gid,
        comm: read_text(pid, "comm")?.trim_end().to_owned(),
        deleted_program: deleted_program(live_thread, &exe),
        exe,
        cmdline: sdt_procfs::parse_cmdline(&read(live_thread, "cmdline")?),
        cwd: link("cwd"),
        thread_creds: creds.as_ref().map(|c| differing_credentials(pid, c)).unwrap_or_default(),
        dumpable: creds.as_ref().and_then(|c| dumpable(live_thread, c)),
        creds,
        limits: read(live_thread, "limits").map(|l| sdt_procfs::parse_limits(&l)).unwrap_or_default(),
        umask: sdt_procfs::parse_umask(&status),
        personality: read(live_thread, "personality").ok().and_then(|p| sdt_procfs::parse_personality(&p)),
        // Read with the threads' names.
        scheduling: Vec::new(),
    })
}

/// The program's file, `exe` (the `/proc/PID/exe` link of thread `live_thread`), where it
/// was deleted while the process runs: as it is now, under the path it had.
fn deleted_program(live_thread: Tid, exe: &str) -> Option<FileRef> {
    let path = exe.strip_suffix(" (deleted)")?;
    // The link reaches the file, deleted or not.
    let meta = std::fs::metadata(format!("/proc/{live_thread}/exe")).ok()?;
    meta.is_file().then(|| FileRef::of(path, &meta))
}

/// The program's deleted file ([`deleted_program`]) opened through `pid`'s `exe` link, if
/// it is still the version `f` records: for the keeper, which cannot reach it by its path.
pub(crate) fn open_deleted_program(pid: Tid, f: &FileRef) -> Option<std::fs::File> {
    let file = std::fs::File::open(format!("/proc/{pid}/exe")).ok()?;
    let meta = file.metadata().ok()?;
    (FileRef::of(&f.path, &meta) == *f).then_some(file)
}

/// The threads of `pid` whose credentials are not `common`, by their ids in the
/// process's own pid namespace. Threads that exit meanwhile are left out.
fn differing_credentials(pid: Tid, common: &Credentials) -> Vec<ThreadCredentials> {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return Vec::new() };
    let mut out = Vec::new();
    for entry in dir.flatten() {
        let Ok(status) = std::fs::read(entry.path().join("status")) else { continue };
        let tid = || sdt_procfs::parse_ns_tid(&status).or_else(|| entry.file_name().to_str()?.parse().ok());
        match (sdt_procfs::parse_credentials(&status), tid()) {
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

/// The POSIX timers of the process of thread `tid` (`/proc/TID/timers`): none where the
/// kernel has no such file (built without `CONFIG_CHECKPOINT_RESTORE`).
pub(crate) fn posix_timers(tid: Tid) -> Vec<PosixTimer> {
    read(tid, "timers").map(|t| sdt_procfs::parse_timers(&t)).unwrap_or_default()
}

/// The id of thread `tid` in its own (innermost) pid namespace: the last `NSpid` entry.
pub(crate) fn ns_tid(tid: Tid) -> Option<i32> {
    sdt_procfs::parse_ns_tid(&read(tid, "status").ok()?)
}

/// A program's open descriptors, as each capture reads them, with what a restore needs to
/// make their objects again: an eventfd's counter, an epoll instance's watches, a
/// timerfd's timer, a signalfd's mask, and the bytes in a pipe whose two ends the program
/// holds (read, through a copy of its descriptor, without taking them).
///
/// A server holds thousands of descriptors, all read in the pause. What is the same file
/// on the same mount as at the capture before (its `fdinfo` says) is not looked up again,
/// unless it is a regular file (whose size and time the snapshot records) or an
/// anonymous inode (they all share one inode): its `fdinfo` alone is read.
#[derive(Default)]
pub(crate) struct FdTable {
    /// The descriptor directories of the thread they are read through.
    dirs: Option<FdDirs>,
    /// What each descriptor was at the last read, where that can be taken again.
    known: HashMap<i32, Known>,
}

/// A descriptor as last read.
#[derive(Clone)]
struct Known {
    /// Its file's mount and inode.
    identity: (u64, u64),
    target: String,
    kind: FileKind,
}

impl FdTable {
    /// The open descriptors of process `pid`, ascending, read through `live_thread`, one
    /// of its threads that has not exited. A descriptor closed while they are read is
    /// left out. Thousands are read on the capture threads, which are idle while the
    /// program's pages are few.
    pub(crate) fn read(&mut self, pid: Tid, live_thread: Tid) -> std::io::Result<Vec<OpenFile>> {
        use rayon::prelude::*;
        if self.dirs.as_ref().map(FdDirs::tid) != Some(live_thread) {
            self.dirs = Some(FdDirs::open(live_thread)?);
        }
        let dirs = self.dirs.as_ref().expect("opened above");
        let fds = dirs.list()?;
        let each = |&fd: &i32| read_descriptor(dirs, &self.known, live_thread, fd);
        let pool = crate::capture::capture_threads().ok().filter(|_| fds.len() >= PARALLEL_DESCRIPTORS);
        let read: Vec<(OpenFile, Option<Known>)> = match pool {
            Some(pool) => pool.install(|| fds.par_iter().filter_map(each).collect()),
            None => fds.iter().filter_map(each).collect(),
        };
        let mut files = Vec::with_capacity(read.len());
        let mut known = HashMap::new();
        for (file, k) in read {
            if let Some(k) = k {
                known.insert(file.fd, k);
            }
            files.push(file);
        }
        self.known = known;
        files.sort_unstable_by_key(|f| f.fd);
        // One pidfd for every pipe and deleted file of this capture. Without it, or
        // without a pipe's or a deleted file's bytes, the snapshot cannot be resumed; the
        // capture goes on.
        let whole = pipes_held_whole(&files);
        let deleted: Vec<usize> = (0..files.len()).filter(|&i| is_deleted_file(&files[i])).collect();
        if !whole.is_empty() || !deleted.is_empty() {
            match program_pidfd(pid, live_thread) {
                Ok(pidfd) => {
                    for i in whole {
                        let f = &mut files[i];
                        match peek_pipe(&pidfd, live_thread, f.fd) {
                            Ok((capacity, data)) => f.state = Some(FileState::PipeBuffer { capacity, data }),
                            Err(e) => log::warn!("reading what pipe {} (fd {}) holds: {e}", f.target, f.fd),
                        }
                    }
                    keep_deleted_files(&pidfd, live_thread, &mut files, &deleted);
                }
                Err(e) => log::warn!("reading what the program's pipes and deleted files hold: {e}"),
            }
        }
        Ok(files)
    }
}

/// A pidfd through which `pidfd_getfd` copies the descriptors of process `pid`: of
/// `live_thread`, which may be any of its threads (the first may have exited, and its
/// pidfd reaches no descriptor then), or, on kernels before thread pidfds, of the process.
fn program_pidfd(pid: Tid, live_thread: Tid) -> sdt_sys::Result<OwnedFd> {
    if live_thread == pid {
        return fds::pidfd_open(pid);
    }
    fds::pidfd_open_thread(live_thread).or_else(|_| fds::pidfd_open(pid))
}

/// How many descriptors a program holds before they are read on the capture threads.
const PARALLEL_DESCRIPTORS: usize = 256;

/// Descriptor `fd` read through `dirs` (of `live_thread`), and what to know of it at the
/// next capture; `None` if it was closed meanwhile. What `known` holds under the same
/// identity is not looked up again (see [`FdTable`]).
fn read_descriptor(
    dirs: &FdDirs,
    known: &HashMap<i32, Known>,
    live_thread: Tid,
    fd: i32,
) -> Option<(OpenFile, Option<Known>)> {
    let mut info = Vec::new();
    dirs.info(fd, &mut info).ok()?;
    let identity = sdt_procfs::parse_fdinfo_identity(&info);
    let (target, kind, file) = match known.get(&fd) {
        Some(k) if Some(k.identity) == identity => (k.target.clone(), k.kind, None),
        _ => {
            let target = PathBuf::from(dirs.link(fd).ok()?).display().to_string();
            let stat = dirs.stat(fd).ok();
            let kind = file_kind(&target, stat.as_ref().map(|s| s.st_mode));
            let file = match (&stat, kind) {
                (Some(s), FileKind::Regular) => Some(FileRef {
                    path: target.clone(),
                    dev: s.st_dev,
                    inode: s.st_ino,
                    size: s.st_size as u64,
                    mtime_ns: s.st_mtime.saturating_mul(1_000_000_000).saturating_add(s.st_mtime_nsec),
                }),
                _ => None,
            };
            (target, kind, file)
        }
    };
    let next = identity
        .filter(|_| kind != FileKind::Regular && !target.starts_with("anon_inode:"))
        .map(|identity| Known { identity, target: target.clone(), kind });
    let (pos, flags) = sdt_procfs::parse_fdinfo(&info);
    let state = match target.as_str() {
        "anon_inode:[eventfd]" => sdt_procfs::parse_eventfd(&info)
            .map(|(count, semaphore, id)| FileState::Eventfd { count, semaphore, id }),
        "anon_inode:[eventpoll]" => epoll_state(live_thread, &info),
        "anon_inode:[timerfd]" => {
            sdt_procfs::parse_timerfd(&info).map(|(clockid, ticks, value_ns, interval_ns)| {
                FileState::Timerfd { clockid, ticks, value_ns, interval_ns }
            })
        }
        "anon_inode:[signalfd]" => sdt_procfs::parse_signalfd(&info).map(|mask| FileState::Signalfd { mask }),
        _ => None,
    };
    Some((OpenFile { fd, target, kind, flags, pos, file, inherited: false, state }, next))
}

/// What an epoll instance watches, from its `fdinfo`, if every watched descriptor (of
/// thread `tid`'s process) is still the file registered: a watch outlives its
/// descriptor's close while a `dup` of the file is open, and then could not be made again.
fn epoll_state(tid: Tid, info: &[u8]) -> Option<FileState> {
    let mut watches = Vec::new();
    for (fd, events, data, ino) in sdt_procfs::parse_epoll(info)? {
        let held = std::fs::metadata(format!("/proc/{tid}/fd/{fd}")).ok()?;
        if held.ino() != ino {
            log::debug!("an epoll instance watches fd {fd} as inode {ino}, which it no longer is");
            return None;
        }
        watches.push(EpollWatch { fd, events, data });
    }
    Some(FileState::Epoll { watches })
}

/// The capacity of the pipe whose read end is `fd` of `pid` (whose pidfd is `pidfd`),
/// and the bytes in it (left there).
fn peek_pipe(pidfd: &OwnedFd, pid: Tid, fd: i32) -> Result<(u32, Vec<u8>), sdt_sys::Error> {
    let theirs = fds::pidfd_getfd(pidfd, pid, fd)?;
    fds::peek_pipe(theirs.as_fd()).map_err(|source| sdt_sys::Error {
        call: "tee (a copy of the pipe's bytes)",
        tid: pid.raw(),
        source,
    })
}

/// Whether `f` is a regular file deleted while open.
fn is_deleted_file(f: &OpenFile) -> bool {
    f.kind == FileKind::Regular && f.target.ends_with(" (deleted)")
}

/// Keeps the contents of the deleted files of `files` at `indices` (of `pid`, whose pidfd
/// is `pidfd`) in their state, descriptors of one file once, while their data fits in
/// [`DELETED_FILES_KEPT`] in all; the others are left without (a resume refuses them).
fn keep_deleted_files(pidfd: &OwnedFd, pid: Tid, files: &mut [OpenFile], indices: &[usize]) {
    let mut kept = 0u64;
    let mut read: Vec<((u64, u64), FileState)> = Vec::new();
    for &i in indices {
        let f = &mut files[i];
        let identity = f.file.as_ref().map(|r| (r.dev, r.inode));
        if let Some((_, state)) = read.iter().find(|(id, _)| Some(*id) == identity) {
            f.state = Some(state.clone());
            continue;
        }
        let state = fds::pidfd_getfd(pidfd, pid, f.fd)
            .map_err(|e| e.source)
            .and_then(|theirs| deleted_file_contents(theirs.into(), DELETED_FILES_KEPT - kept));
        match state {
            Ok((state, bytes)) => {
                kept += bytes;
                if let Some(id) = identity {
                    read.push((id, state.clone()));
                }
                f.state = Some(state);
            }
            Err(e) => log::debug!("deleted file {} (fd {}) not kept: {e}", f.target, f.fd),
        }
    }
}

/// What the deleted file `theirs` (a copy of the program's descriptor) holds, and how
/// many bytes of data that is, if no more than `room`: its bytes, or its parts holding
/// data where it has holes.
fn deleted_file_contents(theirs: File, room: u64) -> std::io::Result<(FileState, u64)> {
    // What a file system counts in a file's blocks besides its data (extent trees).
    const BLOCKS_BESIDES_DATA: u64 = 64 << 10;
    let too_much = |bytes: u64| {
        std::io::Error::other(format!(
            "{bytes} bytes of data, past the {DELETED_FILES_KEPT} a snapshot keeps of deleted files"
        ))
    };
    let meta = theirs.metadata()?;
    let len = meta.len();
    // A file of sdt's own to read and to look for holes in: seeking through the
    // program's descriptor would move its offset, and it may be open for writing only.
    let own = File::open(format!("/proc/self/fd/{}", theirs.as_raw_fd())).ok();
    let file = own.as_ref().unwrap_or(&theirs);
    let whole = || std::iter::once(0..len).collect::<Vec<_>>();
    // A file that fits is kept whole, one whose blocks plainly do not is refused: only
    // the others are looked through for holes (two system calls an extent, in the pause).
    let allocated = meta.blocks().saturating_mul(512);
    let extents = if len <= room {
        whole()
    } else if allocated > room.saturating_add(BLOCKS_BESIDES_DATA) {
        return Err(too_much(allocated));
    } else {
        own.as_ref().and_then(|own| backing::file_extents(own, 0..len)).unwrap_or_else(whole)
    };
    let bytes: u64 = extents.iter().map(|r| r.end - r.start).sum();
    if bytes > room {
        return Err(too_much(bytes));
    }
    let read = |r: &Range<u64>| -> std::io::Result<Vec<u8>> {
        let mut data = vec![0u8; (r.end - r.start) as usize];
        file.read_exact_at(&mut data, r.start)?;
        Ok(data)
    };
    let state = match extents.as_slice() {
        [whole] if *whole == (0..len) => FileState::DeletedFile { data: read(whole)? },
        parts => FileState::SparseDeletedFile {
            size: len,
            parts: parts
                .iter()
                .map(|r| Ok(FilePart { offset: r.start, data: read(r)? }))
                .collect::<std::io::Result<_>>()?,
        },
    };
    Ok((state, bytes))
}

/// The lowest read end of each pipe whose write end is among `files` (ascending) too, by
/// index.
fn pipes_held_whole(files: &[OpenFile]) -> Vec<usize> {
    let access = |f: &OpenFile| f.flags & libc::O_ACCMODE as u32;
    // Each pipe's lowest read end, and whether a write end was seen.
    let mut ends: HashMap<&str, (Option<usize>, bool)> = HashMap::new();
    for (i, f) in files.iter().enumerate() {
        if f.kind != FileKind::Pipe || !f.target.starts_with("pipe:[") {
            continue;
        }
        let (read, written) = ends.entry(&f.target).or_default();
        if access(f) != libc::O_WRONLY as u32 {
            read.get_or_insert(i);
        }
        *written |= access(f) != libc::O_RDONLY as u32;
    }
    let mut whole: Vec<usize> =
        ends.into_values().filter_map(|(read, written)| read.filter(|_| written)).collect();
    whole.sort_unstable();
    whole
}

/// What a descriptor refers to, from its link text and the file's `st_mode`.
fn file_kind(target: &str, mode: Option<u32>) -> FileKind {
    if target.starts_with("anon_inode:") {
        return FileKind::AnonInode;
    }
    if target.starts_with("socket:[") {
        return FileKind::Socket;
    }
    if target.starts_with("pipe:[") {
        return FileKind::Pipe;
    }
    match mode.map(|m| m & libc::S_IFMT) {
        Some(libc::S_IFREG) => FileKind::Regular,
        Some(libc::S_IFDIR) => FileKind::Directory,
        Some(libc::S_IFCHR) => FileKind::CharDevice,
        Some(libc::S_IFBLK) => FileKind::BlockDevice,
        Some(libc::S_IFIFO) => FileKind::Pipe,
        Some(libc::S_IFSOCK) => FileKind::Socket,
        _ => FileKind::Other,
    }
}

/// The caught and the ignored signals (`SigCgt`, `SigIgn` of `status`), bit `n-1` for
/// signal `n`.
pub(crate) fn signal_sets(pid: Tid) -> std::io::Result<(u64, u64)> {
    Ok(sdt_procfs::parse_signal_sets(&read(pid, "status")?))
}

/// The caught and the ignored signals (the process's), and thread `tid`'s seccomp mode,
/// from one read of its `status`.
pub(crate) fn signals_and_seccomp(tid: Tid) -> std::io::Result<((u64, u64), SeccompMode)> {
    let status = read(tid, "status")?;
    Ok((sdt_procfs::parse_signal_sets(&status), seccomp_of(&status)))
}

/// Thread `tid`'s seccomp mode.
pub(crate) fn seccomp_mode(tid: Tid) -> std::io::Result<SeccompMode> {
    Ok(seccomp_of(&read(tid, "status")?))
}

/// The seccomp mode a `status` file says; a filter where its line does not parse (the
/// worst case, as far as injected calls go).
fn seccomp_of(status: &[u8]) -> SeccompMode {
    sdt_procfs::parse_seccomp(status).unwrap_or(SeccompMode::Filter)
}

/// The memory descriptor's fields from `/proc/PID/stat`; `brk` is the end of the heap
/// mapping among `mappings` (or `start_brk` without one).
pub(crate) fn memory_layout(pid: Tid, mappings: &[Mapping]) -> std::io::Result<MemoryLayout> {
    let stat = read(pid, "stat")?;
    let bad = || std::io::Error::new(std::io::ErrorKind::InvalidData, "unexpected /proc/PID/stat");
    let layout = Stat::parse(&stat).and_then(|s| s.memory_layout()).ok_or_else(bad)?;
    let brk = mappings.iter().find(|m| m.path == "[heap]").map_or(layout.start_brk, |m| m.end);
    Ok(MemoryLayout { brk, ..layout })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deleted_file_is_kept_whole_in_parts_or_not_at_all() {
        let file = |len: u64, writes: &[(u64, &[u8])]| {
            let f = tempfile::tempfile_in("/dev/shm").unwrap();
            f.set_len(len).unwrap();
            for &(at, data) in writes {
                f.write_all_at(data, at).unwrap();
            }
            f
        };
        // Small: whole, holes and all.
        let (state, bytes) = deleted_file_contents(file(10, &[(2, b"ab")]), 100).unwrap();
        assert_eq!((state, bytes), (FileState::DeletedFile { data: b"\0\0ab\0\0\0\0\0\0".to_vec() }, 10));
        // Large and sparse: its pages of data.
        let (state, bytes) = deleted_file_contents(file(64 << 20, &[(5 << 20, b"cd")]), 1 << 20).unwrap();
        let FileState::SparseDeletedFile { size, parts } = state else { panic!("{state:?}") };
        assert_eq!((size, bytes, parts.len(), parts[0].offset), (64 << 20, 4096, 1, 5 << 20));
        assert_eq!(&parts[0].data[..3], b"cd\0");
        // Large and full: refused.
        let full = file(0, &[(0, &vec![1; 2 << 20])]);
        assert!(deleted_file_contents(full, 1 << 20).unwrap_err().to_string().contains("past the"));
    }

    #[test]
    fn own_files_and_signals() {
        let me = Tid::new(std::process::id() as i32).unwrap();
        let file = tempfile::tempfile().unwrap();
        use std::io::Write;
        (&file).write_all(b"hello").unwrap();
        let files = FdTable::default().read(me, me).unwrap();
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
    fn descriptors_are_looked_up_again_only_when_their_file_changed() {
        use std::os::fd::AsRawFd;
        let me = Tid::new(std::process::id() as i32).unwrap();
        let (read, _write) = std::io::pipe().unwrap();
        let fd = read.as_raw_fd();
        let mut table = FdTable::default();
        let at = |files: Vec<OpenFile>| files.into_iter().find(|f| f.fd == fd).unwrap();
        let first = at(table.read(me, me).unwrap());
        assert_eq!(first.kind, FileKind::Pipe);
        assert!(matches!(first.state, Some(FileState::PipeBuffer { .. })), "both ends are ours");
        // The same file as last time: what was known is taken again.
        table.known.get_mut(&fd).unwrap().target = "pipe:[as known]".into();
        assert_eq!(at(table.read(me, me).unwrap()).target, "pipe:[as known]");
        // Another file under the same number: looked up again.
        let known = table.known.get_mut(&fd).unwrap();
        (known.identity, known.target) = ((0, 0), "pipe:[stale]".into());
        assert_eq!(at(table.read(me, me).unwrap()).target, first.target);
    }

    #[test]
    fn a_pipe_is_read_through_any_thread_of_the_process() {
        let me = Tid::new(std::process::id() as i32).unwrap();
        let (read, mut write) = std::io::pipe().unwrap();
        std::io::Write::write_all(&mut write, b"queued").unwrap();
        // A thread other than the first: a breakpoint's thread, as a capture reads through.
        let files = std::thread::spawn(move || FdTable::default().read(me, sdt_sys::current_tid()).unwrap())
            .join()
            .unwrap();
        let fd = std::os::fd::AsRawFd::as_raw_fd(&read);
        let pipe = files.iter().find(|f| f.fd == fd).unwrap();
        assert!(
            matches!(&pipe.state, Some(FileState::PipeBuffer { data, .. }) if data == b"queued"),
            "{:?}",
            pipe.state
        );
    }

    #[test]
    fn namespace_tid_and_own_credentials() {
        let me = Tid::new(std::process::id() as i32).unwrap();
        // This process's own pid namespace is the one its /proc shows.
        assert_eq!(ns_tid(me), Some(me.raw()));
        let info = process_info(me, me).unwrap();
        assert_eq!(info.ppid, std::os::unix::process::parent_id() as i32);
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
    fn a_thread_name_that_is_not_utf8() {
        // Names are bytes: `stat` and `status` show them raw.
        std::thread::spawn(|| {
            std::fs::write("/proc/thread-self/comm", b"w\xff) (x").unwrap();
            let me = sdt_sys::current_tid();
            let (_caught, ignored) = signal_sets(me).unwrap();
            assert_ne!(ignored & (1 << (libc::SIGPIPE - 1)), 0);
            let layout = memory_layout(me, &[]).unwrap();
            assert_ne!(layout.start_code, 0);
            let pid = Tid::new(std::process::id() as i32).unwrap();
            let info = process_info(pid, me).unwrap();
            assert_eq!(info.ppid, std::os::unix::process::parent_id() as i32);
        })
        .join()
        .unwrap();
    }
}
