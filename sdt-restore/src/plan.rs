//! What a restore will do, decided from the snapshot's metadata alone: how each mapping is
//! made again, where each descriptor comes from, and which objects cannot be restored.
//! No system calls here, so every decision is unit-tested.

use std::ffi::CString;

use sdt_store::{
    Access, Content, FileKind, FileState, Mapping, OpenFile, Reopen, SnapshotMeta, ThreadRunState,
};
use sdt_sys::respawn::{FdSource, StubFd, Watch};

use crate::Error;

/// Kernel-provided mappings the restore moves from the new process rather than maps.
pub(crate) const SPECIAL: [&str; 3] = ["[vvar]", "[vvar_vclock]", "[vdso]"];
/// Mappings the kernel puts at a fixed place in every process.
const FIXED: [&str; 1] = ["[vsyscall]"];

/// How one mapping is made again.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum MapKind {
    /// `mmap` of the file at the mapping's offset.
    File {
        /// The file.
        path: String,
        /// Shared (`MAP_SHARED`): the file's contents are used as they are now, and the
        /// snapshot's copies of its pages are not written back.
        shared: bool,
    },
    /// Anonymous memory (`MAP_SHARED` for shared ones).
    Anonymous {
        /// `MAP_SHARED | MAP_ANONYMOUS`.
        shared: bool,
        /// The main stack: `MAP_GROWSDOWN`.
        stack: bool,
    },
    /// A shared view of a deleted file that another view, or one of the program's
    /// descriptors, also shows (a memfd mapped twice, or mapped and held open): `mmap` of
    /// one file made again for all of them, so that a write to one shows in the others.
    SharedDeleted {
        /// Which deleted file: the same number for all of its views.
        file: usize,
        /// The program's descriptor of it (made again by the restore), through which it is
        /// opened; none: a memfd is made for the views.
        fd: Option<i32>,
        /// Bytes the memfd made for the views needs: to the end of the furthest view.
        size: u64,
    },
    /// `[vdso]`, `[vvar]`: moved into place from the new process.
    Special,
    /// `[vsyscall]`: already there.
    Fixed,
}

/// One mapping to make.
#[derive(Clone, Debug)]
pub(crate) struct MapPlan {
    /// The path or pseudo-path, as in maps.
    pub name: String,
    pub start: u64,
    pub end: u64,
    pub offset: u64,
    pub kind: MapKind,
    /// `PROT_*` the mapping ends with.
    pub prot: i32,
    /// Whether the snapshot's stored pages are written into it.
    pub write_pages: bool,
}

impl MapPlan {
    /// The protection it is first mapped with: writable while pages are written.
    pub(crate) fn initial_prot(&self) -> i32 {
        if self.write_pages { self.prot | libc::PROT_READ | libc::PROT_WRITE } else { self.prot }
    }
}

/// How each of the snapshot's mappings is made again; an error names the first mapping
/// that cannot be.
pub(crate) fn mappings(meta: &SnapshotMeta) -> Result<Vec<MapPlan>, Error> {
    let mut plans = meta.mappings.iter().map(mapping).collect::<Result<Vec<_>, _>>()?;
    share_deleted_files(meta, &mut plans);
    Ok(plans)
}

/// Makes the shared views of each deleted file that has more than one view, or a
/// descriptor the program holds, views of one file again ([`MapKind::SharedDeleted`]).
/// Each alone would be anonymous memory of its own: the program would write to one view
/// and read stale bytes from another, or from the descriptor.
fn share_deleted_files(meta: &SnapshotMeta, plans: &mut [MapPlan]) {
    let deleted_view = |m: &Mapping| m.perms.shared && m.inode != 0 && m.path.ends_with(" (deleted)");
    let mut files: Vec<(&str, u64)> = Vec::new();
    for m in meta.mappings.iter().filter(|m| deleted_view(m)) {
        if !files.contains(&(m.dev.as_str(), m.inode)) {
            files.push((m.dev.as_str(), m.inode));
        }
    }
    for (file, &(dev, inode)) in files.iter().enumerate() {
        let views: Vec<usize> = (0..plans.len())
            .filter(|&i| {
                let m = &meta.mappings[i];
                deleted_view(m) && (m.dev.as_str(), m.inode) == (dev, inode)
            })
            .collect();
        let path = &meta.mappings[views[0]].path;
        let fd = meta
            .files
            .iter()
            .find(|f| &f.target == path && f.file.as_ref().is_some_and(|r| r.inode == inode))
            .map(|f| f.fd);
        if views.len() < 2 && fd.is_none() {
            continue;
        }
        let size = views.iter().map(|&i| plans[i].offset.saturating_add(plans[i].end - plans[i].start)).max();
        for &i in &views {
            plans[i].kind = MapKind::SharedDeleted { file, fd, size: size.unwrap_or(0) };
        }
    }
}

fn mapping(m: &Mapping) -> Result<MapPlan, Error> {
    let prot = (if m.perms.read { libc::PROT_READ } else { 0 })
        | (if m.perms.write { libc::PROT_WRITE } else { 0 })
        | (if m.perms.exec { libc::PROT_EXEC } else { 0 });
    let unsupported = |why: &str| Error::Unsupported {
        what: format!("the mapping {:#x}-{:#x} {} ({why})", m.start, m.end, m.path),
    };
    let kind = if SPECIAL.contains(&m.path.as_str()) {
        MapKind::Special
    } else if FIXED.contains(&m.path.as_str()) {
        MapKind::Fixed
    } else if m.path.starts_with("/SYSV") {
        return Err(unsupported("System V shared memory"));
    } else if let Content::File(file) = &m.content {
        // POSIX shared memory (`shm_open`) is a file on the tmpfs at /dev/shm; every
        // file mapped is checked to be a regular file ([`crate::files::mappings`]).
        if m.path.starts_with("/dev/") && !m.path.starts_with("/dev/shm/") {
            return Err(unsupported("a device's memory"));
        }
        MapKind::File { path: file.path.clone(), shared: m.perms.shared }
    } else if m.path.starts_with('/') && m.inode != 0 && !m.path.ends_with(" (deleted)") && !m.perms.read {
        // An inaccessible part of a file mapping (a library's gap): the file again, so
        // that the maps read the same.
        MapKind::File { path: m.path.clone(), shared: m.perms.shared }
    } else if m.path.starts_with('/') && m.inode != 0 && m.perms.shared && !m.path.ends_with(" (deleted)") {
        return Err(unsupported("a shared mapping of a file the snapshot did not keep a reference to"));
    } else if m.path.starts_with('[')
        && m.path != "[heap]"
        && m.path != "[stack]"
        && !m.path.starts_with("[anon")
    {
        return Err(unsupported("a kernel mapping this restore does not know"));
    } else {
        // Anonymous memory, or a copy of a deleted file or memfd: every page that held data
        // was stored, the rest read as zero.
        MapKind::Anonymous { shared: m.perms.shared, stack: m.path == "[stack]" }
    };
    let write_pages = match &kind {
        MapKind::File { shared, .. } => !shared && m.perms.read,
        MapKind::Anonymous { .. } | MapKind::SharedDeleted { .. } => m.perms.read,
        MapKind::Special | MapKind::Fixed => false,
    };
    Ok(MapPlan {
        name: m.path.clone(),
        start: m.start,
        end: m.end,
        offset: m.offset,
        kind,
        prot,
        write_pages,
    })
}

/// Where the planned descriptors come from, for [`descriptors`].
pub(crate) trait Sources {
    /// Checks a file that a descriptor is opened from again (what it must be, and how it
    /// is opened), and says which path to open it by; an error names why not.
    fn reopen(&mut self, f: &OpenFile, reopen: &Reopen) -> Result<CString, Error>;
    /// Our descriptor for the object of `f`, made again as `object` says.
    fn make(&mut self, f: &OpenFile, object: &Remade<'_>) -> Result<i32, Error>;
}

/// An object the restore makes again for a descriptor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Remade<'a> {
    /// An end of the pipe named `pipe` (`pipe:[N]`), which holds `data`.
    PipeEnd {
        /// The pipe's link text: its ends share it.
        pipe: &'a str,
        /// Its capacity.
        capacity: u32,
        /// The bytes in it.
        data: &'a [u8],
        /// The write end (else the read end).
        write: bool,
    },
    /// An eventfd (descriptors with the same id share one), an epoll instance (empty:
    /// the stub adds its watches), a timerfd (its timer running from the restore on) or a
    /// signalfd, as the snapshot recorded it.
    Object(&'a FileState),
    /// A regular file deleted while open, which held `contents` (a
    /// [`FileState::DeletedFile`] or [`FileState::SparseDeletedFile`] whose parts are in
    /// order): a memfd (descriptors of one file share it), opened again with the
    /// descriptor's flags at its position.
    DeletedFile {
        /// What it held.
        contents: &'a FileState,
    },
}

/// Where each of the snapshot's descriptors comes from, one per descriptor in order.
/// Stdin, stdout and stderr are this process's own, whatever they were (the restored
/// program talks to whoever restored it, like a shell job); other regular files,
/// directories and devices are opened again at their positions, by the path `sources`
/// gives once it has checked them; pipes whose two ends the program held, eventfds,
/// epoll instances, timerfds, signalfds and deleted files (up to what the snapshot kept)
/// are made again with what they held (the stub adds the watches); a pipe or socket the program got from
/// `sdt run`'s caller becomes `/dev/null` (with a warning); anything else is an error
/// naming it.
pub(crate) fn descriptors(meta: &SnapshotMeta, sources: &mut dyn Sources) -> Result<Vec<StubFd>, Error> {
    let mut fds = Vec::new();
    for f in &meta.files {
        let unsupported = |why: &str| Error::Unsupported {
            what: format!("file descriptor {} ({}): {why}", f.fd, f.target),
        };
        let stdio = (0..=2).contains(&f.fd);
        let mut open = |flags: u32| -> Result<FdSource, Error> {
            if f.target.contains('\0') {
                return Err(unsupported("a path with a NUL byte"));
            }
            let reopen = Reopen {
                path: &f.target,
                kind: f.kind,
                identity: f.file.as_ref().map(|r| (r.dev, r.inode)),
                access: Access::of_flags(flags),
            };
            Ok(FdSource::Open { path: sources.reopen(f, &reopen)?, flags: flags as i32, pos: f.pos })
        };
        let flags = f.flags & !(libc::O_CLOEXEC as u32);
        let restorable = matches!(f.kind, FileKind::Regular | FileKind::Directory | FileKind::CharDevice);
        let mut watches = Vec::new();
        let source = match f.kind {
            _ if stdio => FdSource::Inherit(f.fd),
            _ if f.inherited && !restorable => {
                log::warn!("{}", f.inherited_note());
                FdSource::Open { path: c"/dev/null".to_owned(), flags: libc::O_RDWR, pos: 0 }
            }
            _ if f.target.ends_with(" (deleted)") => match &f.state {
                Some(contents @ (FileState::DeletedFile { .. } | FileState::SparseDeletedFile { .. }))
                    if f.kind == FileKind::Regular =>
                {
                    if contents.deleted_file_parts().is_none() {
                        return Err(unsupported(
                            "the snapshot's record of the deleted file is damaged: its parts overlap or pass \
                             its size",
                        ));
                    }
                    FdSource::Inherit(sources.make(f, &Remade::DeletedFile { contents })?)
                }
                _ => {
                    let why = format!(
                        "the file was deleted, and the snapshot did not keep its bytes (it keeps those of \
                         deleted files up to {} KiB in all)",
                        sdt_store::DELETED_FILES_KEPT >> 10
                    );
                    return Err(unsupported(&why));
                }
            },
            FileKind::Regular | FileKind::Directory | FileKind::CharDevice => open(flags)?,
            FileKind::Pipe => {
                let access = flags & libc::O_ACCMODE as u32;
                let Some((capacity, data)) = pipe_buffer(meta, &f.target) else {
                    let ends = meta.files.iter().filter(|o| o.target == f.target).count();
                    return Err(unsupported(if ends > 1 {
                        "the snapshot did not record what the pipe held"
                    } else {
                        "a pipe is restored only where the program held both its ends, and this one's \
                         other end was elsewhere"
                    }));
                };
                if access == libc::O_RDWR as u32 {
                    return Err(unsupported("a pipe opened for reading and writing cannot be restored"));
                }
                let write = access == libc::O_WRONLY as u32;
                FdSource::Inherit(
                    sources.make(f, &Remade::PipeEnd { pipe: &f.target, capacity, data, write })?,
                )
            }
            FileKind::Socket => return Err(unsupported("sockets cannot be restored")),
            FileKind::AnonInode => match &f.state {
                // An alarm clock's timer wakes the machine: creating one takes
                // CAP_WAKE_ALARM, which the restore has and the program may not have had.
                Some(FileState::Timerfd {
                    clockid: libc::CLOCK_REALTIME_ALARM | libc::CLOCK_BOOTTIME_ALARM,
                    ..
                }) => {
                    return Err(unsupported("a timerfd on an alarm clock cannot be restored"));
                }
                Some(
                    state @ (FileState::Eventfd { .. }
                    | FileState::Timerfd { .. }
                    | FileState::Signalfd { .. }),
                ) => FdSource::Inherit(sources.make(f, &Remade::Object(state))?),
                Some(state @ FileState::Epoll { watches: w }) => {
                    if let Some(lost) = w.iter().find(|w| !meta.files.iter().any(|o| o.fd == w.fd)) {
                        let why = format!("it watches descriptor {}, which is not there", lost.fd);
                        return Err(unsupported(&why));
                    }
                    // EPOLLWAKEUP holds the machine awake, which takes CAP_BLOCK_SUSPEND: the
                    // stub has it, the program may not have had it.
                    let events = |e: u32| e & !(libc::EPOLLWAKEUP as u32);
                    watches = w
                        .iter()
                        .map(|w| Watch { fd: w.fd, events: events(w.events), data: w.data })
                        .collect();
                    FdSource::Inherit(sources.make(f, &Remade::Object(state))?)
                }
                _ => {
                    return Err(unsupported(
                        "epoll instances watching a descriptor since closed, inotify and other anonymous \
                         inodes cannot be restored",
                    ));
                }
            },
            FileKind::BlockDevice | FileKind::Other => {
                return Err(unsupported("this kind of file cannot be restored"));
            }
        };
        fds.push(StubFd { fd: f.fd, source, cloexec: f.flags & libc::O_CLOEXEC as u32 != 0, watches });
    }
    Ok(fds)
}

/// The capacity and bytes of the pipe named `pipe`, recorded on one of its read ends
/// where the program held both.
fn pipe_buffer<'a>(meta: &'a SnapshotMeta, pipe: &str) -> Option<(u32, &'a [u8])> {
    meta.files.iter().filter(|o| o.target == pipe).find_map(|o| match &o.state {
        Some(FileState::PipeBuffer { capacity, data }) => Some((*capacity, data.as_slice())),
        _ => None,
    })
}

/// Refuses what the restore cannot recreate about the threads, and register sets of the
/// wrong size (a damaged or crafted snapshot).
pub(crate) fn threads(meta: &SnapshotMeta) -> Result<(), Error> {
    for t in &meta.threads {
        t.check_regsets()?;
    }
    let leader = meta.threads.iter().find(|t| t.tid == meta.process.pid);
    match leader {
        None => Err(Error::Unsupported {
            what: format!("the main thread ({}) is not in the snapshot: it had exited", meta.process.pid),
        }),
        Some(t) if t.state == ThreadRunState::Exiting => {
            Err(Error::Unsupported { what: format!("the main thread ({}) was exiting", meta.process.pid) })
        }
        Some(_) => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use sdt_store::{EpollWatch, FileRef, OpenFile, ThreadState};

    use super::*;

    fn map(path: &str, perms: &str, content: Content) -> Mapping {
        let inode = if path.starts_with('/') { 7 } else { 0 };
        let line = format!("1000-3000 {perms} 00000000 08:01 {inode} {path}");
        Mapping { content, ..sdt_procfs::parse_maps_line(&line).unwrap() }
    }

    fn file_ref(path: &str) -> Content {
        Content::File(FileRef { path: path.into(), dev: 1, inode: 7, size: 100, mtime_ns: 1 })
    }

    #[test]
    fn the_shared_views_of_a_deleted_file_are_made_from_one_file() {
        let view = |start: u64, perms: &str, offset: u64, inode: u64| {
            let line = format!(
                "{start:x}-{:x} {perms} {offset:08x} 00:01 {inode} /memfd:jit (deleted)",
                start + 0x2000
            );
            Mapping { content: Content::Zero, ..sdt_procfs::parse_maps_line(&line).unwrap() }
        };
        let plan = |maps: Vec<Mapping>, files: Vec<OpenFile>| {
            let meta = SnapshotMeta { mappings: maps, ..meta_with(files) };
            mappings(&meta).unwrap().into_iter().map(|p| p.kind).collect::<Vec<_>>()
        };
        let anonymous = MapKind::Anonymous { shared: true, stack: false };
        // A writable and an executable view of one file, and a view of another file: the
        // two are made from one memfd, as long as the furthest view needs.
        let kinds = plan(
            vec![view(0x10000, "rw-s", 0, 9), view(0x20000, "r-xs", 0x1000, 9), view(0x30000, "rw-s", 0, 10)],
            Vec::new(),
        );
        let jit = MapKind::SharedDeleted { file: 0, fd: None, size: 0x3000 };
        assert_eq!(kinds, [jit.clone(), jit, anonymous.clone()]);
        // A view of a file the program holds open: made from its descriptor.
        let held = OpenFile {
            file: Some(FileRef { path: "/memfd:jit".into(), dev: 1, inode: 9, size: 0x2000, mtime_ns: 0 }),
            state: Some(FileState::DeletedFile { data: vec![0; 0x2000] }),
            ..open_file(5, "/memfd:jit (deleted)", FileKind::Regular)
        };
        let kinds = plan(vec![view(0x10000, "rw-s", 0, 9)], vec![held]);
        assert_eq!(kinds, [MapKind::SharedDeleted { file: 0, fd: Some(5), size: 0x2000 }]);
        // A private copy is anonymous memory.
        assert_eq!(
            plan(vec![view(0x10000, "rw-p", 0, 9)], Vec::new()),
            [MapKind::Anonymous { shared: false, stack: false }]
        );
    }

    #[test]
    fn mappings_are_classified() {
        let libc_text = mapping(&map("/lib/libc.so.6", "r-xp", file_ref("/lib/libc.so.6"))).unwrap();
        assert_eq!(libc_text.kind, MapKind::File { path: "/lib/libc.so.6".into(), shared: false });
        assert!(libc_text.write_pages);
        assert_eq!(libc_text.initial_prot(), libc::PROT_READ | libc::PROT_WRITE | libc::PROT_EXEC);
        assert_eq!(libc_text.prot, libc::PROT_READ | libc::PROT_EXEC);

        let gap = mapping(&map("/lib/libc.so.6", "---p", Content::Unreadable)).unwrap();
        assert_eq!(gap.kind, MapKind::File { path: "/lib/libc.so.6".into(), shared: false });
        assert!(!gap.write_pages);
        assert_eq!(gap.initial_prot(), libc::PROT_NONE);

        let shared = mapping(&map("/data/db", "rw-s", file_ref("/data/db"))).unwrap();
        assert_eq!(shared.kind, MapKind::File { path: "/data/db".into(), shared: true });
        assert!(!shared.write_pages);

        let stack = mapping(&map("[stack]", "rw-p", Content::Zero)).unwrap();
        assert_eq!(stack.kind, MapKind::Anonymous { shared: false, stack: true });
        let heap = mapping(&map("[heap]", "rw-p", Content::Zero)).unwrap();
        assert_eq!(heap.kind, MapKind::Anonymous { shared: false, stack: false });
        let memfd = mapping(&map("/memfd:buf (deleted)", "rw-s", Content::Zero)).unwrap();
        assert_eq!(memfd.kind, MapKind::Anonymous { shared: true, stack: false });
        assert_eq!(mapping(&map("[vdso]", "r-xp", Content::Zero)).unwrap().kind, MapKind::Special);
        assert_eq!(mapping(&map("[vsyscall]", "--xp", Content::Unreadable)).unwrap().kind, MapKind::Fixed);

        let sysv = mapping(&map("/SYSV00000000 (deleted)", "rw-s", Content::Zero)).unwrap_err();
        assert!(sysv.to_string().contains("System V shared memory"), "{sysv}");
        let posix = mapping(&map("/dev/shm/queue", "rw-s", file_ref("/dev/shm/queue"))).unwrap();
        assert_eq!(posix.kind, MapKind::File { path: "/dev/shm/queue".into(), shared: true });
        let dev = mapping(&map("/dev/dri/card0", "rw-s", file_ref("/dev/dri/card0"))).unwrap_err();
        assert!(dev.to_string().contains("/dev/dri/card0"), "{dev}");
    }

    fn open_file(fd: i32, target: &str, kind: FileKind) -> OpenFile {
        OpenFile {
            fd,
            target: target.into(),
            kind,
            flags: libc::O_RDWR as u32,
            pos: 42,
            file: None,
            inherited: false,
            state: None,
        }
    }

    fn meta_with(files: Vec<OpenFile>) -> SnapshotMeta {
        let json = r#"{"name":"S0","seq":0,"trigger":{"kind":"timer"},
            "time":{"wall_ns":0,"since_start_ns":0},"process":{"pid":1,"ppid":0,"pgrp":0,"sid":0,
            "uid":0,"gid":0,"comm":"","exe":"","cmdline":[],"cwd":"/"},"threads":[],"mappings":[],
            "auxv":"","stats":{}}"#;
        let mut meta: SnapshotMeta = serde_json::from_str(json).unwrap();
        meta.files = files;
        meta
    }

    #[test]
    fn a_short_register_set_is_refused_by_name() {
        let thread = |gpregs: usize| ThreadState {
            tid: 1,
            name: String::new(),
            state: ThreadRunState::Running,
            gpregs: vec![0; gpregs],
            fpregs: vec![0; sdt_store::FPREGS_SIZE],
            xstate: Vec::new(),
            sigmask: 0,
            rseq: None,
            robust_list: None,
            altstack: None,
        };
        let mut meta = meta_with(Vec::new());
        meta.threads = vec![thread(sdt_store::GPREGS_SIZE)];
        assert!(threads(&meta).is_ok());
        meta.threads = vec![thread(8)];
        let err = threads(&meta).unwrap_err();
        assert!(matches!(err, Error::Regset(_)), "{err:?}");
        assert_eq!(err.to_string(), "thread 1: gpregs is 8 bytes, expected 216");
    }

    /// A check of a file opened by path: descriptor, path, kind, identity, access.
    type Checked = (i32, String, FileKind, Option<(u64, u64)>, Access);

    /// Checks nothing and opens by the recorded path, or refuses every path; makes each
    /// object as descriptor 100 + its number. Keeps what it was asked.
    #[derive(Default)]
    struct Recorded {
        refuse: bool,
        checked: Vec<Checked>,
        made: Vec<(i32, String)>,
    }

    impl Sources for Recorded {
        fn reopen(&mut self, f: &OpenFile, r: &Reopen) -> Result<CString, Error> {
            if self.refuse {
                return Err(Error::Unsupported { what: format!("{} is refused", r.path) });
            }
            self.checked.push((f.fd, r.path.to_owned(), r.kind, r.identity, r.access));
            Ok(CString::new(r.path).unwrap())
        }

        fn make(&mut self, f: &OpenFile, object: &Remade<'_>) -> Result<i32, Error> {
            self.made.push((f.fd, format!("{object:?}")));
            Ok(100 + f.fd)
        }
    }

    #[test]
    fn descriptors_are_planned_or_refused_by_name() {
        let fds = descriptors(
            &meta_with(vec![
                open_file(0, "/dev/pts/3", FileKind::CharDevice),
                open_file(1, "pipe:[77]", FileKind::Pipe),
                open_file(2, "/tmp/err.log", FileKind::Regular),
                open_file(3, "/tmp/log", FileKind::Regular),
                open_file(4, "/dev/null", FileKind::CharDevice),
            ]),
            &mut Recorded::default(),
        )
        .unwrap();
        assert!(matches!(fds[0].source, FdSource::Inherit(0)));
        assert!(matches!(fds[1].source, FdSource::Inherit(1)));
        assert!(matches!(fds[2].source, FdSource::Inherit(2)));
        assert!(matches!(&fds[3].source, FdSource::Open { pos: 42, flags, .. } if *flags == libc::O_RDWR));
        assert!(matches!(&fds[4].source, FdSource::Open { path, .. } if path.to_str() == Ok("/dev/null")));

        let mut leaked = open_file(251, "pipe:[9]\x1b[2J", FileKind::Pipe);
        leaked.inherited = true;
        let note = leaked.inherited_note();
        assert!(
            note.starts_with("file descriptor 251 (pipe:[9]\\u{1b}[2J) was not opened by the program"),
            "{note}"
        );
        assert!(
            note.contains("Nothing to do unless the program uses descriptor 251") && note.contains("251>&-")
        );
        let fds = descriptors(&meta_with(vec![leaked]), &mut Recorded::default()).unwrap();
        assert!(matches!(&fds[0].source, FdSource::Open { path, .. } if path.to_str() == Ok("/dev/null")));

        for (file, words) in [
            (open_file(4, "socket:[9]", FileKind::Socket), "socket"),
            (open_file(5, "pipe:[8]", FileKind::Pipe), "other end was elsewhere"),
            (
                open_file(6, "anon_inode:[eventfd]", FileKind::AnonInode),
                "anonymous inodes cannot be restored",
            ),
            (
                open_file(6, "anon_inode:[inotify]", FileKind::AnonInode),
                "anonymous inodes cannot be restored",
            ),
            (open_file(7, "/tmp/x (deleted)", FileKind::Regular), "did not keep its bytes"),
        ] {
            let err = descriptors(&meta_with(vec![file]), &mut Recorded::default()).unwrap_err().to_string();
            assert!(err.contains(words) && err.contains("file descriptor"), "{err}");
        }
    }

    #[test]
    fn a_deleted_file_whose_bytes_were_kept_is_made_again() {
        let deleted = OpenFile {
            state: Some(FileState::DeletedFile { data: b"scratch".to_vec() }),
            ..open_file(3, "/memfd:buf (deleted)", FileKind::Regular)
        };
        let mut made = Recorded::default();
        let fds = descriptors(&meta_with(vec![deleted.clone()]), &mut made).unwrap();
        assert!(matches!(fds[0].source, FdSource::Inherit(103)), "{:?}", fds[0].source);
        assert_eq!(
            made.made,
            [(
                3,
                "DeletedFile { contents: DeletedFile { data: [115, 99, 114, 97, 116, 99, 104] } }".to_owned()
            )]
        );

        // Mapped shared as well: the mapping is made from the descriptor made again.
        let mut shared = meta_with(vec![deleted]);
        shared.mappings = vec![map("/memfd:buf (deleted)", "rw-s", Content::Zero)];
        assert!(descriptors(&shared, &mut Recorded::default()).is_ok());
    }

    #[test]
    fn a_programs_own_pipes_eventfds_and_epolls_are_made_again() {
        let end = |fd, pipe: &str, access: i32| OpenFile {
            flags: (access | libc::O_CLOEXEC) as u32,
            ..open_file(fd, pipe, FileKind::Pipe)
        };
        let mut read = end(3, "pipe:[7]", libc::O_RDONLY);
        read.state = Some(FileState::PipeBuffer { capacity: 4096, data: b"x".to_vec() });
        let eventfd = |fd, count| OpenFile {
            state: Some(FileState::Eventfd { count, semaphore: false, id: Some(2) }),
            ..open_file(fd, "anon_inode:[eventfd]", FileKind::AnonInode)
        };
        let meta = meta_with(vec![read, end(4, "pipe:[7]", libc::O_WRONLY), eventfd(5, 3)]);
        let mut sources = Recorded::default();
        let fds = descriptors(&meta, &mut sources).unwrap();
        assert!(matches!(fds[0].source, FdSource::Inherit(103)) && fds[0].cloexec);
        assert!(matches!(fds[1].source, FdSource::Inherit(104)));
        assert!(matches!(fds[2].source, FdSource::Inherit(105)));
        assert_eq!(
            sources.made,
            [
                (3, r#"PipeEnd { pipe: "pipe:[7]", capacity: 4096, data: [120], write: false }"#.into()),
                (4, r#"PipeEnd { pipe: "pipe:[7]", capacity: 4096, data: [120], write: true }"#.into()),
                (5, "Object(Eventfd { count: 3, semaphore: false, id: Some(2) })".into()),
            ]
        );
        assert!(sources.checked.is_empty(), "nothing of them is opened by path");

        // An epoll instance gets its watches added by the stub, once every descriptor is in
        // place; one watching a descriptor that is not there is refused.
        let watch = EpollWatch { fd: 3, events: libc::EPOLLIN as u32, data: 10 };
        let epoll = |watches| OpenFile {
            state: Some(FileState::Epoll { watches }),
            ..open_file(6, "anon_inode:[eventpoll]", FileKind::AnonInode)
        };
        let mut files = meta.files.clone();
        files.push(epoll(vec![watch]));
        let fds = descriptors(&meta_with(files.clone()), &mut Recorded::default()).unwrap();
        assert_eq!(fds[3].watches, [Watch { fd: 3, events: libc::EPOLLIN as u32, data: 10 }]);
        assert!(matches!(fds[3].source, FdSource::Inherit(106)));
        let awake = EpollWatch { events: (libc::EPOLLIN | libc::EPOLLWAKEUP) as u32, ..watch };
        files[3] = epoll(vec![awake]);
        let fds = descriptors(&meta_with(files.clone()), &mut Recorded::default()).unwrap();
        assert_eq!(
            fds[3].watches[0].events,
            libc::EPOLLIN as u32,
            "no wakeup source the program may not have had"
        );
        let alarm =
            FileState::Timerfd { clockid: libc::CLOCK_BOOTTIME_ALARM, ticks: 0, value_ns: 1, interval_ns: 0 };
        let timer =
            OpenFile { state: Some(alarm), ..open_file(7, "anon_inode:[timerfd]", FileKind::AnonInode) };
        let err = descriptors(&meta_with(vec![timer]), &mut Recorded::default()).unwrap_err().to_string();
        assert!(err.contains("alarm clock"), "{err}");
        files[3] = epoll(vec![EpollWatch { fd: 9, ..watch }]);
        let err = descriptors(&meta_with(files), &mut Recorded::default()).unwrap_err().to_string();
        assert!(err.contains("it watches descriptor 9, which is not there"), "{err}");

        // Both ends held, but what the pipe held is not known: refused.
        let meta = meta_with(vec![end(3, "pipe:[7]", libc::O_RDONLY), end(4, "pipe:[7]", libc::O_WRONLY)]);
        let err = descriptors(&meta, &mut Recorded::default()).unwrap_err().to_string();
        assert!(err.contains("did not record what the pipe held"), "{err}");
    }

    #[test]
    fn every_descriptor_opened_by_path_is_checked_for_how_it_is_opened() {
        let mut log = open_file(3, "/var/log/app.log", FileKind::Regular);
        log.flags = (libc::O_WRONLY | libc::O_APPEND | libc::O_CLOEXEC) as u32;
        log.file = Some(FileRef { path: log.target.clone(), dev: 5, inode: 9, size: 1, mtime_ns: 1 });
        let dir = open_file(4, "/srv", FileKind::Directory);
        let mut leaked = open_file(9, "socket:[1]", FileKind::Socket);
        leaked.inherited = true;
        let meta = meta_with(vec![open_file(0, "/dev/pts/1", FileKind::CharDevice), log, dir, leaked]);
        let mut sources = Recorded::default();
        let fds = descriptors(&meta, &mut sources).unwrap();
        let write_only = Access { read: false, write: true };
        assert_eq!(
            sources.checked,
            [
                (3, "/var/log/app.log".to_owned(), FileKind::Regular, Some((5, 9)), write_only),
                (4, "/srv".to_owned(), FileKind::Directory, None, Access { read: true, write: true }),
            ],
            "stdio is inherited and a leaked socket is /dev/null: neither is opened from the store"
        );
        assert!(
            matches!(&fds[1].source, FdSource::Open { path, .. } if path.to_str() == Ok("/var/log/app.log"))
        );
        let refused = descriptors(&meta, &mut Recorded { refuse: true, ..Recorded::default() });
        assert_eq!(refused.unwrap_err().to_string(), "cannot restore /var/log/app.log is refused");
    }
}
