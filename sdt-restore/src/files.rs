//! Every file the restore opens by path is checked first, as the store checks the files
//! that mappings refer to ([`Trust::reopen`]): it must be what the snapshot says (a
//! regular file, a directory, a character device; never a symbolic link, FIFO or
//! socket), with the device and inode recorded where they were, and one the store's
//! owners could open the way it is opened. A store can name any path, and the restore
//! runs as root.
//!
//! - Descriptors: the stub opens `/proc/self/fd/N` of the `O_PATH` descriptor the check
//!   left open (the stub inherits it), so a path changed since the check opens nothing
//!   else and a FIFO put in its place blocks nothing; the kernel checks the stub's file
//!   identity (the program's) against that very file.
//! - Mappings made from files: the store checks those whose pages it reads
//!   ([`substitutes`]); all of them, a library's `PROT_NONE` gap too, are checked here
//!   for how they are mapped ([`mappings`]). The new
//!   process opens them without blocking.
//! - A file changed since the snapshot (the program rebuilt) is mapped from the copy the
//!   run kept of it, if it kept one ([`KeptCopy`]), by private mappings, and is the
//!   executable if it was; its identity is the copy's. A shared mapping's file must be
//!   unchanged at its path: the process writes to it and sees others' writes. One that no
//!   longer exists (a JVM's `hsperfdata` file, removed as it exits) and that only shared
//!   writable mappings mapped, whose pages the snapshot holds, is made again from them
//!   ([`Substitutes::gone`]).

use std::ffi::CString;
use std::fs::File;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use sdt_store::{Access, Content, FileKind, FileState, OpenFile, Reopen, Snapshot, SnapshotMeta, Trust};
use sdt_sys::fds;
use sdt_sys::respawn::{FdSource, StubFd};

use crate::Error;
use crate::plan::{self, MapKind, MapPlan, Remade};

/// The stub's descriptors, with what they were checked to be.
pub(crate) struct Descriptors {
    /// Where each comes from.
    pub fds: Vec<StubFd>,
    /// What each one opened by path is, by descriptor: the path the snapshot names.
    pub names: Vec<(i32, String)>,
    /// The checked files the stub opens through `/proc/self/fd/N`: open until it has.
    _checked: Vec<File>,
    /// The objects made for it (pipes, eventfds, …), which it takes copies of.
    _made: Vec<OwnedFd>,
}

/// The stub's descriptors ([`plan::descriptors`]), each file it opens checked, each
/// object it holds that has no path made again.
pub(crate) fn descriptors(meta: &SnapshotMeta, trust: &Trust) -> Result<Descriptors, Error> {
    let mut sources = Sources { meta, trust, checked: Vec::new(), names: Vec::new(), made: Vec::new() };
    let fds = plan::descriptors(meta, &mut sources)?;
    let Sources { checked, mut names, made, .. } = sources;
    for f in &fds {
        if let FdSource::Open { path, .. } = &f.source
            && !names.iter().any(|(fd, _)| *fd == f.fd)
        {
            names.push((f.fd, path.to_string_lossy().into_owned()));
        }
    }
    Ok(Descriptors { fds, names, _checked: checked, _made: made.into_iter().map(|(_, fd)| fd).collect() })
}

/// What [`descriptors`] opens and makes.
struct Sources<'a> {
    meta: &'a SnapshotMeta,
    trust: &'a Trust,
    checked: Vec<File>,
    names: Vec<(i32, String)>,
    /// Each object made, by what makes it the same object for another descriptor.
    made: Vec<(MadeKey, OwnedFd)>,
}

/// One object made again: a pipe's end by the pipe's name, an eventfd by its id (or by
/// the descriptor, where the kernel did not tell the id), the rest by the descriptor (the
/// kernel tells nothing that would match an epoll instance's, a timerfd's or a
/// signalfd's dups).
#[derive(Clone, PartialEq, Eq)]
enum MadeKey {
    PipeEnd(String, bool),
    Eventfd(u32),
    Alone(i32),
    /// The memfd of a deleted file, by its device and inode (else the first descriptor
    /// of it).
    Deleted((u64, u64)),
}

impl Sources<'_> {
    /// Descriptor `f` of a deleted file that held `data`: the file a memfd (made once for
    /// every descriptor of it), the descriptor that memfd opened again with `f`'s flags
    /// and position.
    fn make_deleted(&mut self, f: &OpenFile, contents: &FileState) -> Result<i32, Error> {
        let failed = |call, source| Error::Sys(sdt_sys::Error { call, tid: 0, source });
        let file = MadeKey::Deleted(f.file.as_ref().map_or((u64::MAX, f.fd as u64), |r| (r.dev, r.inode)));
        if !self.made.iter().any(|(k, _)| *k == file) {
            let name = f.target.trim_end_matches(" (deleted)").rsplit('/').next().unwrap_or_default();
            let (size, parts) = contents.deleted_file_parts().ok_or_else(|| Error::Unsupported {
                what: format!(
                    "file descriptor {} ({}): its kept parts overlap or pass its size",
                    f.fd, f.target
                ),
            })?;
            let memfd = fds::memfd_holding(name, size, &parts)
                .map_err(|e| failed("making a deleted file again", e))?;
            self.made.push((file.clone(), memfd));
        }
        let (_, memfd) = self.made.iter().find(|(k, _)| *k == file).expect("made above");
        let opened = fds::reopen_at(memfd.as_fd(), f.flags, f.pos)
            .map_err(|e| failed("opening a deleted file made again", e))?;
        let raw = opened.as_raw_fd();
        self.made.push((MadeKey::Alone(f.fd), opened));
        Ok(raw)
    }
}

impl plan::Sources for Sources<'_> {
    fn reopen(&mut self, f: &OpenFile, reopen: &Reopen) -> Result<CString, Error> {
        let file = self.trust.reopen(reopen, &self.meta.name).map_err(|source| Error::Refused {
            what: format!("file descriptor {} ({})", f.fd, f.target),
            source,
        })?;
        let via = format!("/proc/self/fd/{}", file.as_raw_fd());
        self.checked.push(file);
        self.names.push((f.fd, f.target.clone()));
        Ok(CString::new(via).expect("no NUL in a number"))
    }

    fn make(&mut self, f: &OpenFile, object: &Remade<'_>) -> Result<i32, Error> {
        let failed = |call, source| Error::Sys(sdt_sys::Error { call, tid: 0, source });
        let key = match *object {
            Remade::PipeEnd { pipe, write, .. } => MadeKey::PipeEnd(pipe.to_owned(), write),
            Remade::Object(&FileState::Eventfd { id: Some(id), .. }) => MadeKey::Eventfd(id),
            Remade::Object(_) => MadeKey::Alone(f.fd),
            Remade::DeletedFile { contents } => return self.make_deleted(f, contents),
        };
        if !self.made.iter().any(|(k, _)| *k == key) {
            let (call, made) = match *object {
                Remade::PipeEnd { pipe, capacity, data, .. } => {
                    let ends = fds::pipe_holding(capacity, data).map(|(read, write)| {
                        self.made.push((MadeKey::PipeEnd(pipe.to_owned(), false), read));
                        write
                    });
                    ("making a pipe again", ends)
                }
                Remade::Object(&FileState::Eventfd { count, semaphore, .. }) => {
                    ("making an eventfd again", fds::eventfd_with(count, semaphore))
                }
                Remade::Object(FileState::Epoll { .. }) => ("epoll_create1", fds::epoll_new()),
                Remade::Object(&FileState::Timerfd { clockid, ticks, value_ns, interval_ns }) => {
                    ("making a timerfd again", fds::timerfd_with(clockid, ticks, value_ns, interval_ns))
                }
                Remade::Object(&FileState::Signalfd { mask }) => ("signalfd4", fds::signalfd_with(mask)),
                Remade::Object(
                    FileState::PipeBuffer { .. }
                    | FileState::DeletedFile { .. }
                    | FileState::SparseDeletedFile { .. },
                ) => (
                    "a pipe's or a deleted file's bytes",
                    Err(std::io::Error::other("made by their descriptors, not their bytes")),
                ),
                Remade::DeletedFile { .. } => unreachable!("made above"),
            };
            let made = made.map_err(|e| failed(call, e))?;
            let last = match *object {
                Remade::PipeEnd { pipe, .. } => MadeKey::PipeEnd(pipe.to_owned(), true),
                Remade::Object(_) | Remade::DeletedFile { .. } => key.clone(),
            };
            self.made.push((last, made));
        }
        let (_, fd) = self.made.iter().find(|(k, _)| *k == key).expect("made above");
        // O_NONBLOCK belongs to the open file, which the program's descriptors of this
        // object (dups) share here: each sets it, the same way.
        let nonblocking = f.flags & libc::O_NONBLOCK as u32 != 0;
        fds::set_nonblocking(fd.as_fd(), nonblocking).map_err(|e| failed("fcntl(F_SETFL)", e))?;
        Ok(fd.as_raw_fd())
    }
}

/// A file changed since the snapshot that private mappings map from the copy the run
/// kept of its version.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct KeptCopy {
    /// The path the snapshot records.
    pub from: String,
    /// The copy's path.
    pub to: String,
    /// The copy's device and inode.
    pub identity: (u64, u64),
}

/// What becomes of the files the snapshot's mappings map from, where not the files
/// themselves.
#[derive(Debug, Default)]
pub(crate) struct Substitutes {
    /// Files changed since, mapped from the copies the run kept.
    pub kept: Vec<KeptCopy>,
    /// Paths of files that only shared writable mappings map and that no longer exist
    /// ([`sdt_store::gone_shared_file`]): their views are made again as views of one
    /// new file holding the snapshot's pages of them ([`MapKind::SharedDeleted`]).
    pub gone: Vec<String>,
}

/// Checks the file of every one of `snap`'s mappings that takes pages from one, and says
/// which to map from the copies its run kept (see the module doc) and which shared ones
/// are gone; an error for a file that changed with no copy kept, or that a shared mapping
/// maps.
pub(crate) fn substitutes(snap: &Snapshot) -> Result<Substitutes, Error> {
    let meta = snap.meta();
    let mut out = Substitutes::default();
    for m in &meta.mappings {
        let Content::File(f) = &m.content else { continue };
        if out.kept.iter().any(|k| k.from == f.path) || out.gone.contains(&f.path) {
            continue;
        }
        if meta.mappings.iter().any(|o| o.perms.shared && o.content == m.content) {
            if sdt_store::gone_shared_file(meta, f) {
                out.gone.push(f.path.clone());
            } else {
                snap.check_file_in_place(f)?;
            }
            continue;
        }
        let path = snap.file_path(f)?;
        if path == Path::new(&f.path) {
            continue;
        }
        let copy = snap
            .open_file(f)?
            .metadata()
            .map_err(|e| Error::Store(sdt_store::Error::Io { path: path.clone(), source: e }))?;
        let to = path.to_str().ok_or_else(|| Error::Unsupported {
            what: format!("a store whose path is not UTF-8 ({})", path.display()),
        })?;
        out.kept.push(KeptCopy {
            from: f.path.clone(),
            to: to.to_owned(),
            identity: (copy.dev(), copy.ino()),
        });
    }
    Ok(out)
}

/// Makes the views of each file in `gone` views of one new file that the snapshot's
/// pages of them are written into, with a warning.
pub(crate) fn map_gone(plans: &mut [MapPlan], gone: &[String]) {
    let first = plans
        .iter()
        .filter_map(|p| match p.kind {
            MapKind::SharedDeleted { file, .. } => Some(file + 1),
            _ => None,
        })
        .max()
        .unwrap_or(0);
    for (file, path) in (first..).zip(gone) {
        let is_view =
            |p: &MapPlan| matches!(&p.kind, MapKind::File { path: mapped, shared: true } if mapped == path);
        let size =
            plans.iter().filter(|p| is_view(p)).map(|p| p.offset.saturating_add(p.end - p.start)).max();
        let mut views = 0;
        for p in plans.iter_mut().filter(|p| is_view(p)) {
            p.kind = MapKind::SharedDeleted { file, fd: None, size: size.unwrap_or(0) };
            p.write_pages = true;
            views += 1;
        }
        log::warn!(
            "{}, which the program mapped shared, no longer exists: {} made again from the \
             snapshot's pages of it, as memory the program alone shares (pages it had not \
             touched read as zeros, and no other process sees its writes)",
            path.escape_debug(),
            if views == 1 { "its mapping is".to_owned() } else { format!("its {views} mappings are") }
        );
    }
}

/// Makes the private mappings of the files `kept` names map the copies instead.
pub(crate) fn map_kept(plans: &mut [MapPlan], kept: &[KeptCopy]) {
    for p in plans {
        if let MapKind::File { path, shared: false } = &mut p.kind
            && let Some(k) = kept.iter().find(|k| k.from == *path)
        {
            path.clone_from(&k.to);
        }
    }
}

/// Checks the file of every mapping `plans` makes from one, for how it is mapped:
/// reading, and writing for a shared writable mapping. A copy in `kept` has the copy's
/// identity.
pub(crate) fn mappings(
    meta: &SnapshotMeta,
    plans: &[MapPlan],
    kept: &[KeptCopy],
    trust: &Trust,
) -> Result<(), Error> {
    let mut done: Vec<(&str, Access)> = Vec::new();
    for p in plans {
        let MapKind::File { path, shared } = &p.kind else { continue };
        let access = Access { read: true, write: *shared && p.prot & libc::PROT_WRITE != 0 };
        if done.contains(&(path.as_str(), access)) {
            continue;
        }
        done.push((path, access));
        // The identity a mapping of the same file recorded, if one did.
        let identity = match kept.iter().find(|k| k.to == *path) {
            Some(k) => Some(k.identity),
            None => meta.mapped_file(path).map(|f| (f.dev, f.inode)),
        };
        let reopen = Reopen { path, kind: FileKind::Regular, identity, access };
        trust.reopen(&reopen, &meta.name).map_err(|source| Error::Refused {
            what: format!("the mapping {:#x}-{:#x} {}", p.start, p.end, p.name),
            source,
        })?;
    }
    Ok(())
}
