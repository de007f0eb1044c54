//! Files kept with a run (`runs/<id>/files/`): the program, its libraries and the other
//! files its mappings take pages from, as they were when captured, so that its snapshots
//! keep their symbols and file-backed pages after a rebuild or an upgrade changes the
//! files in place.
//!
//! A file is kept under a name made of the identity its [`FileRef`] records (device,
//! inode, size, mtime) and its file name, made safe ([`kept_name`]). It is kept by a hard
//! link where the file system allows one (same file system, a file we own or may write),
//! which costs nothing and keeps the captured inode when the build replaces the file;
//! else copied, up to [`COPY_LIMIT`] bytes, with its mtime set to the original's; or
//! linked from another run of the store that kept the same version. A copy is made under
//! a temporary name and renamed into place once whole and still the version mapped.
//!
//! Reading, a kept file is used only where the file at the recorded path is no longer the
//! version mapped ([`Error::FileChanged`]): it must be a regular file in the run's
//! `files/` folder (reached without following a link), of the recorded size and mtime (a
//! linked file that was then rewritten in place is not), and pass the same [`Trust`]
//! check as the original would.

use std::collections::HashSet;
use std::fs::File;
use std::io::ErrorKind;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use nix::libc::{EACCES, EMLINK, ENOENT, EPERM, EXDEV};

use crate::dir::{RunId, Store, io_error};
use crate::fileref;
use crate::fs::Dir;
use crate::model::FileRef;
use crate::trust::{Access, Trust};
use crate::{Error, Result};

/// The folder of a run that holds its kept files.
pub(crate) const FILES_DIR: &str = "files";

/// Largest file copied where it cannot be linked: a program with its debug
/// information, a library; not a data set mapped whole.
pub const COPY_LIMIT: u64 = 256 << 20;

/// Most bytes one run copies in all ([`FileKeeper::with_copy_budget`] sets another): a
/// program mapping many large files on another file system does not fill the store.
pub const COPY_BUDGET: u64 = 1 << 30;

/// How many of the store's latest runs are looked in for a version kept already.
const RUNS_LOOKED_IN: usize = 32;

/// Longest file name kept in a kept file's name.
const MAX_NAME: usize = 96;

/// How a file came to be kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kept {
    /// It was kept already (by this run, or linked from another run's copy).
    Already,
    /// Hard-linked: no bytes of disk.
    Linked,
    /// Copied: this many bytes.
    Copied(u64),
}

/// Keeps the files a run's mappings refer to (see the module doc), each version once.
#[derive(Debug)]
pub struct FileKeeper {
    store: Store,
    id: RunId,
    run_dir: Arc<Dir>,
    /// The store's owners: a file they could not read is not kept (root capturing into a
    /// user's store would give them a copy).
    trust: Trust,
    /// `files/`, once made.
    files: Option<Dir>,
    done: HashSet<FileRef>,
    /// Bytes the run may still copy.
    budget: u64,
}

impl FileKeeper {
    /// A keeper for run `id` of `store`.
    pub fn new(store: &Store, id: RunId) -> Result<FileKeeper> {
        let run_dir = Arc::clone(store.open_run(&id)?.dir_handle());
        let trust = Trust::of_run_dir(run_dir.path());
        let done = HashSet::new();
        Ok(FileKeeper { store: store.clone(), id, run_dir, trust, files: None, done, budget: COPY_BUDGET })
    }

    /// The same keeper, copying at most `bytes` in all.
    pub fn with_copy_budget(self, bytes: u64) -> FileKeeper {
        FileKeeper { budget: bytes, ..self }
    }

    /// The `files/` folders of the store's latest other runs, newest first: looked at
    /// anew for each file, as the other ranks of a job keep theirs at the same time.
    fn others(&self) -> Vec<Dir> {
        let mut ids = self.store.run_ids().unwrap_or_default();
        ids.retain(|&other| other != self.id);
        ids.iter()
            .rev()
            .take(RUNS_LOOKED_IN)
            .filter_map(|other| self.store.open_run(other).ok()?.dir_handle().open_dir(FILES_DIR).ok())
            .collect()
    }

    /// Keeps the version of the file that `f` records, which snapshot `snapshot` maps:
    /// how, or why not ([`Error::FileChanged`] when the file is no longer that version,
    /// [`Error::FileRefused`] for one the store's owners could not read, [`Error::Io`],
    /// or too large to copy).
    pub fn keep(&mut self, f: &FileRef, snapshot: &str) -> Result<Kept> {
        self.keep_from(f, snapshot, |trust| fileref::open(f, trust, snapshot))
    }

    /// [`FileKeeper::keep`] of a file opened already, `source`, that its path no longer
    /// reaches (a program deleted under its running process, opened through the
    /// process's `exe` link): it must be the version `f` records, and a regular file the
    /// store's owners could read. It cannot be linked: it is copied.
    pub fn keep_opened(&mut self, f: &FileRef, source: File, snapshot: &str) -> Result<Kept> {
        self.keep_from(f, snapshot, |trust| fileref::check_opened(f, source, trust, snapshot))
    }

    fn keep_from(
        &mut self,
        f: &FileRef,
        snapshot: &str,
        open: impl FnOnce(&Trust) -> Result<File>,
    ) -> Result<Kept> {
        if self.done.contains(f) {
            return Ok(Kept::Already);
        }
        let kept = self.keep_new(f, snapshot, open)?;
        self.done.insert(f.clone());
        Ok(kept)
    }

    fn keep_new(
        &mut self,
        f: &FileRef,
        snapshot: &str,
        open: impl FnOnce(&Trust) -> Result<File>,
    ) -> Result<Kept> {
        let name = kept_name(f);
        let files = self.files()?;
        let path = files.join(&name);
        if files.open_file(&name).is_ok_and(|kept| is_version(&kept, f)) {
            return Ok(Kept::Already);
        }
        let source = open(&self.trust)?;
        let others = self.others();
        let files = self.files.as_ref().expect("made above");
        for other in &others {
            if let Ok(copy) = other.open_file(&name)
                && is_version(&copy, f)
                && linked(files.link_file(&copy, &name), &path)?
            {
                return Ok(Kept::Already);
            }
        }
        if linked(files.link_file(&source, &name), &path)? {
            return Ok(Kept::Linked);
        }
        let too_large = if f.size > COPY_LIMIT {
            Some(format!("more than the {COPY_LIMIT} bytes a file is copied up to"))
        } else if f.size > self.budget {
            Some(format!("more than the {} bytes the run may still copy", self.budget))
        } else {
            None
        };
        if let Some(why) = too_large {
            let why = format!("{} cannot be linked, and its {} bytes are {why}", f.path, f.size);
            return Err(io_error(&path, std::io::Error::other(why)));
        }
        let kept = copy(files, &source, f, &name, snapshot)?;
        if let Kept::Copied(bytes) = kept {
            self.budget = self.budget.saturating_sub(bytes);
        }
        Ok(kept)
    }

    /// `files/`, made on first use.
    fn files(&mut self) -> Result<&Dir> {
        if self.files.is_none() {
            let made = match self.run_dir.create_dir(FILES_DIR) {
                Err(e) if e.kind() == ErrorKind::AlreadyExists => self.run_dir.open_dir(FILES_DIR),
                made => made,
            };
            self.files = Some(made.map_err(|e| io_error(&self.run_dir.join(FILES_DIR), e))?);
        }
        Ok(self.files.as_ref().expect("made above"))
    }
}

impl Store {
    /// Bytes of disk the files kept with the store's runs take that are the store's own:
    /// copies, each counted once however many runs link it; a link to a file outside the
    /// store (a program on the same file system) takes none.
    pub fn kept_bytes(&self) -> Result<u64> {
        use std::collections::HashMap;
        // Per inode: its links found in the store, its links in all, its blocks.
        let mut inodes: HashMap<(u64, u64), (u64, u64, u64)> = HashMap::new();
        for id in self.run_ids()? {
            let Ok(files) = self.open_run(&id).and_then(|run| {
                run.dir_handle().open_dir(FILES_DIR).map_err(|e| io_error(&run.dir().join(FILES_DIR), e))
            }) else {
                continue;
            };
            let entries = files.entries().map_err(|e| io_error(files.path(), e))?;
            for (name, is_dir) in entries.flatten() {
                let Ok(meta) =
                    (if is_dir { continue } else { files.open_file(&name).and_then(|f| f.metadata()) })
                else {
                    continue;
                };
                let seen =
                    inodes.entry((meta.dev(), meta.ino())).or_insert((0, meta.nlink(), meta.blocks() * 512));
                seen.0 += 1;
            }
        }
        Ok(inodes.values().filter(|(found, links, _)| found >= links).map(|(_, _, bytes)| bytes).sum())
    }
}

/// Whether a link was made: yes, or one of that name was there already; no, where the
/// file system or its rules refuse one (another file system, a file we may not link).
fn linked(result: std::io::Result<()>, path: &Path) -> Result<bool> {
    match result {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == ErrorKind::AlreadyExists => Ok(true),
        // ENOENT: a file deleted since it was opened has no link left to make another.
        Err(e) if matches!(e.raw_os_error(), Some(EXDEV | EPERM | EACCES | EMLINK | ENOENT)) => Ok(false),
        Err(e) => Err(io_error(path, e)),
    }
}

/// Copies `source`, the version `f` records, as `name` in `files`: under a temporary
/// name, then renamed into place if it did not change meanwhile.
fn copy(files: &Dir, source: &File, f: &FileRef, name: &str, snapshot: &str) -> Result<Kept> {
    let path = files.join(name);
    let (tmp, mut out) = files.create_temp("keep").map_err(|e| io_error(&path, e))?;
    let copied = (|| {
        let bytes = std::io::copy(&mut &*source, &mut out)?;
        let mtime = u64::try_from(f.mtime_ns).map(|ns| UNIX_EPOCH + Duration::from_nanos(ns));
        out.set_modified(mtime.map_err(|_| std::io::Error::other("an mtime before 1970"))?)?;
        // A program stays one, for its owner alone: a restore makes it the process's
        // executable, which the kernel takes only from an executable file.
        if source.metadata()?.mode() & 0o111 != 0 {
            out.set_permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700))?;
        }
        Ok(bytes)
    })();
    let outcome = match copied {
        Err(e) => Err(io_error(&path, e)),
        Ok(_) if !is_version(source, f) => Err(Error::FileChanged {
            path: f.path.clone(),
            snapshot: snapshot.to_owned(),
            detail: "it changed while it was copied".into(),
        }),
        Ok(bytes) => match files.rename_new(&tmp, name) {
            Ok(()) => return Ok(Kept::Copied(bytes)),
            Err(e) if e.kind() == ErrorKind::AlreadyExists => Ok(Kept::Already),
            Err(e) => Err(io_error(&path, e)),
        },
    };
    files.remove_file(&tmp).ok();
    outcome
}

/// Whether `file` has the size and mtime `f` records.
fn is_version(file: &File, f: &FileRef) -> bool {
    file.metadata().is_ok_and(|m| m.size() == f.size && mtime_ns(&m) == f.mtime_ns)
}

fn mtime_ns(m: &std::fs::Metadata) -> i64 {
    m.mtime().saturating_mul(1_000_000_000).saturating_add(m.mtime_nsec())
}

/// The name the version of the file `f` records is kept under: its identity in hex,
/// then its file name with anything but letters, digits and `._+-` made `_`, so that it
/// is always one path component whatever the store records.
pub fn kept_name(f: &FileRef) -> String {
    let base = f.path.rsplit('/').next().unwrap_or_default();
    let safe: String = base
        .chars()
        .take(MAX_NAME)
        .map(|c| if c.is_ascii_alphanumeric() || "._+-".contains(c) { c } else { '_' })
        .collect();
    format!("{:x}-{:x}-{:x}-{:x}-{safe}", f.dev, f.inode, f.size, f.mtime_ns as u64)
}

/// The kept version of the file `f` records in the run whose directory is `run_dir`, and
/// its path, if it is there and may be used (see the module doc).
pub(crate) fn open(run_dir: &Dir, f: &FileRef, trust: &Trust) -> Option<(File, PathBuf)> {
    let files = run_dir.open_dir(FILES_DIR).ok()?;
    let name = kept_name(f);
    let file = files.open_file(&name).ok()?;
    let meta = file.metadata().ok()?;
    if !is_version(&file, f) || trust.refuses(&meta, Access::READ).is_some() {
        return None;
    }
    let path = files.join(&name);
    Some((file, std::path::absolute(&path).unwrap_or(path)))
}
