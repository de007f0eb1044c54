//! Files and directories inside the store, reached without following links.
//!
//! A store is untrusted input that root often reads in someone else's directory, so
//! inside it nothing follows a symbolic link or leaves the directory it names: every name
//! is one path component, opened relative to its directory's descriptor with
//! `O_NOFOLLOW`; files are created with `O_EXCL`, directories 0700 and files 0600
//! whatever the umask (snapshots hold a process's memory, secrets included). A file the
//! store reads must be a regular file: a FIFO or device planted under a snapshot's name
//! is refused, never waited on.
//!
//! When root creates something in a store directory that another user owns (a
//! refinement run, a finished run's `run.json`), the new file or directory is given to
//! that user, so that the store stays theirs to read.

use std::ffi::OsStr;
use std::fs::File;
use std::io::{self, ErrorKind, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use nix::fcntl::{AtFlags, OFlag, RenameFlags, openat, renameat, renameat2};
use nix::sys::stat::{Mode, fchmod, mkdirat};
use nix::unistd::{Gid, Uid, UnlinkatFlags, fchown, symlinkat, unlinkat};

/// Permissions of every directory the store creates.
pub(crate) const DIR_MODE: u32 = 0o700;
/// Permissions of every file the store creates.
pub(crate) const FILE_MODE: u32 = 0o600;

/// An open directory of the store.
#[derive(Debug)]
pub(crate) struct Dir {
    fd: OwnedFd,
    path: PathBuf,
    /// The user that things created here are given to (root creating in another user's
    /// directory); `None`: they stay the creator's.
    owner: Option<(Uid, Gid)>,
}

impl Dir {
    /// Its descriptor, for a system call made elsewhere ([`sdt_sys::detached`]).
    pub(crate) fn raw_fd(&self) -> std::os::fd::RawFd {
        std::os::fd::AsRawFd::as_raw_fd(&self.fd)
    }

    /// Opens the directory at `path` (the store's root: the user's own path, which may
    /// pass through links).
    pub(crate) fn open(path: &Path) -> io::Result<Dir> {
        let fd =
            nix::fcntl::open(path, OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC, Mode::empty())?;
        Dir::from_fd(fd, path.to_owned())
    }

    /// Opens the directory at `path`, creating it (0700) and its parents if needed.
    pub(crate) fn open_or_create(path: &Path) -> io::Result<Dir> {
        match Dir::open(path) {
            Err(e) if e.kind() == ErrorKind::NotFound => {}
            other => return other,
        }
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent)?;
        }
        match std::fs::DirBuilder::new().mode(DIR_MODE).create(path) {
            Ok(()) => {
                let dir = Dir::open(path)?;
                fchmod(dir.fd.as_fd(), Mode::from_bits_truncate(DIR_MODE))?;
                Ok(dir)
            }
            // Created by a concurrent `sdt` meanwhile: theirs is as good.
            Err(e) if e.kind() == ErrorKind::AlreadyExists => Dir::open(path),
            Err(e) => Err(e),
        }
    }

    fn from_fd(fd: OwnedFd, path: PathBuf) -> io::Result<Dir> {
        let meta = nix::sys::stat::fstat(fd.as_fd())?;
        let owner = (Uid::effective().is_root() && meta.st_uid != 0)
            .then(|| (Uid::from_raw(meta.st_uid), Gid::from_raw(meta.st_gid)));
        Ok(Dir { fd, path, owner })
    }

    /// The directory's path, for messages.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The path of `name` in this directory, for messages.
    pub(crate) fn join(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }

    /// The directory's permission bits.
    pub(crate) fn mode(&self) -> io::Result<u32> {
        Ok(nix::sys::stat::fstat(self.fd.as_fd())?.st_mode & 0o7777)
    }

    /// Bytes free for unprivileged users on the directory's filesystem.
    pub(crate) fn free_bytes(&self) -> io::Result<u64> {
        let st = nix::sys::statvfs::fstatvfs(self.fd.as_fd())?;
        Ok(st.blocks_available().saturating_mul(st.fragment_size()))
    }

    /// Opens the subdirectory `name`; a link there is refused.
    pub(crate) fn open_dir(&self, name: &str) -> io::Result<Dir> {
        let fd = openat(
            self.fd.as_fd(),
            component(name)?,
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| refused_link(e, name))?;
        Dir::from_fd(fd, self.join(name))
    }

    /// Creates the subdirectory `name` (0700); [`ErrorKind::AlreadyExists`] if anything
    /// has that name.
    pub(crate) fn create_dir(&self, name: &str) -> io::Result<Dir> {
        mkdirat(self.fd.as_fd(), component(name)?, Mode::from_bits_truncate(DIR_MODE))?;
        let dir = self.open_dir(name)?;
        fchmod(dir.fd.as_fd(), Mode::from_bits_truncate(DIR_MODE))?;
        self.give(&dir.fd)?;
        Ok(Dir { owner: self.owner, ..dir })
    }

    /// Opens the regular file `name` for reading; a link, FIFO, device or directory there
    /// is refused without waiting on it.
    pub(crate) fn open_file(&self, name: &str) -> io::Result<File> {
        self.open_regular(name, OFlag::O_RDONLY)
    }

    fn open_regular(&self, name: &str, access: OFlag) -> io::Result<File> {
        let fd = openat(
            self.fd.as_fd(),
            component(name)?,
            access | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_NOCTTY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| refused_link(e, name))?;
        let file = File::from(fd);
        if !file.metadata()?.is_file() {
            return Err(io::Error::new(ErrorKind::InvalidData, format!("{name} is not a regular file")));
        }
        Ok(file)
    }

    /// Creates the file `name` (0600) for reading and writing; [`ErrorKind::AlreadyExists`]
    /// if anything, a link included, has that name.
    pub(crate) fn create_file(&self, name: &str) -> io::Result<File> {
        let fd = openat(
            self.fd.as_fd(),
            component(name)?,
            OFlag::O_RDWR | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::from_bits_truncate(FILE_MODE),
        )?;
        fchmod(fd.as_fd(), Mode::from_bits_truncate(FILE_MODE))?;
        self.give(&fd)?;
        Ok(File::from(fd))
    }

    /// Creates a file under a temporary name unique to this process, for [`Dir::rename`]
    /// into place once written; returns the name too. `stem` prefixes the name.
    pub(crate) fn create_temp(&self, stem: &str) -> io::Result<(String, File)> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        loop {
            let name = format!(".{stem}.{}.{}.tmp", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed));
            match self.create_file(&name) {
                // Left by a process that had this pid before: never opened, only replaced.
                Err(e) if e.kind() == ErrorKind::AlreadyExists => self.remove_file(&name)?,
                other => return other.map(|file| (name, file)),
            }
        }
    }

    /// Writes `bytes` as file `name`, replacing it whole: a temporary file, synced, renamed
    /// over it.
    pub(crate) fn replace_file(&self, name: &str, bytes: &[u8]) -> io::Result<()> {
        let (tmp, mut file) = self.create_temp(name)?;
        let written = file.write_all(bytes).and_then(|()| file.sync_data());
        match written.and_then(|()| self.rename(&tmp, name)) {
            Ok(()) => Ok(()),
            Err(e) => {
                self.remove_file(&tmp).ok();
                Err(e)
            }
        }
    }

    /// Makes `name` in this directory a hard link to the open file `file`, the very inode
    /// opened (through `/proc/self/fd`); [`ErrorKind::AlreadyExists`] if anything has that
    /// name. `EXDEV` or `EPERM` where the file system or its rules refuse the link.
    pub(crate) fn link_file(&self, file: &File, name: &str) -> io::Result<()> {
        let fd = format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(file));
        Ok(nix::unistd::linkat(
            nix::fcntl::AT_FDCWD,
            fd.as_str(),
            self.fd.as_fd(),
            component(name)?,
            AtFlags::AT_SYMLINK_FOLLOW,
        )?)
    }

    /// Renames `from` to `to` in this directory, replacing what `to` names (a link
    /// included: it is replaced, not followed).
    pub(crate) fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        Ok(renameat(self.fd.as_fd(), component(from)?, self.fd.as_fd(), component(to)?)?)
    }

    /// Renames `from` to `to` in this directory; [`ErrorKind::AlreadyExists`] if `to`
    /// exists.
    pub(crate) fn rename_new(&self, from: &str, to: &str) -> io::Result<()> {
        Ok(renameat2(
            self.fd.as_fd(),
            component(from)?,
            self.fd.as_fd(),
            component(to)?,
            RenameFlags::RENAME_NOREPLACE,
        )?)
    }

    /// Moves `from` in this directory to `to` in `dir`; [`ErrorKind::AlreadyExists`] if
    /// `to` exists.
    pub(crate) fn move_new(&self, from: &str, dir: &Dir, to: &str) -> io::Result<()> {
        Ok(renameat2(
            self.fd.as_fd(),
            component(from)?,
            dir.fd.as_fd(),
            component(to)?,
            RenameFlags::RENAME_NOREPLACE,
        )?)
    }

    /// Removes the file (or link) `name`.
    pub(crate) fn remove_file(&self, name: &str) -> io::Result<()> {
        Ok(unlinkat(self.fd.as_fd(), component(name)?, UnlinkatFlags::NoRemoveDir)?)
    }

    /// Removes the empty directory `name`.
    pub(crate) fn remove_dir(&self, name: &str) -> io::Result<()> {
        Ok(unlinkat(self.fd.as_fd(), component(name)?, UnlinkatFlags::RemoveDir)?)
    }

    /// Removes the directory `name` and everything below it, links as links (none is
    /// followed) and names that are not UTF-8 included; at most [`MAX_TREE_DEPTH`] deep.
    /// What another process removes meanwhile is no error. Returns the bytes of disk the
    /// files it removed took.
    pub(crate) fn remove_tree(&self, name: &str) -> io::Result<u64> {
        self.remove_tree_at(component(name)?, MAX_TREE_DEPTH)
    }

    fn remove_tree_at(&self, name: &OsStr, depth: u32) -> io::Result<u64> {
        use nix::errno::Errno;
        let fd = match openat(
            self.fd.as_fd(),
            name,
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::empty(),
        ) {
            Err(Errno::ENOENT) => return Ok(0),
            fd => fd?,
        };
        let sub = Dir { fd, path: self.path.join(name), owner: None };
        // Read whole before removing: removing while reading may skip entries.
        let names: Vec<Vec<u8>> = nix::dir::Dir::openat(
            sub.fd.as_fd(),
            ".",
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )?
        .into_iter()
        .map(|entry| entry.map(|e| e.file_name().to_bytes().to_vec()))
        .filter(|name| !matches!(name.as_deref(), Ok(b".") | Ok(b"..")))
        .collect::<Result<_, _>>()?;
        let mut freed = 0;
        for entry in &names {
            let entry = OsStr::from_bytes(entry);
            // A file linked elsewhere too (a program a run keeps) frees nothing.
            let blocks = match nix::sys::stat::fstatat(sub.fd.as_fd(), entry, AtFlags::AT_SYMLINK_NOFOLLOW) {
                Ok(stat) if stat.st_nlink > 1 && stat.st_mode & nix::libc::S_IFMT == nix::libc::S_IFREG => 0,
                Ok(stat) => stat.st_blocks as u64,
                Err(Errno::ENOENT) => continue,
                Err(e) => return Err(e.into()),
            };
            match unlinkat(sub.fd.as_fd(), entry, UnlinkatFlags::NoRemoveDir) {
                Ok(()) => freed += blocks * 512,
                Err(Errno::EISDIR) if depth > 0 => freed += sub.remove_tree_at(entry, depth - 1)?,
                Err(Errno::ENOENT) => {}
                Err(e) => return Err(e.into()),
            }
        }
        match unlinkat(self.fd.as_fd(), name, UnlinkatFlags::RemoveDir) {
            Ok(()) | Err(Errno::ENOENT) => Ok(freed),
            Err(e) => Err(e.into()),
        }
    }

    /// Makes `name` a symbolic link to `target`, replacing what was there.
    pub(crate) fn point_link(&self, name: &str, target: &Path) -> io::Result<()> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let tmp = format!(".{name}.{}.{}.tmp", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed));
        match symlinkat(target, self.fd.as_fd(), tmp.as_str()) {
            Err(nix::errno::Errno::EEXIST) => {
                self.remove_file(&tmp)?;
                symlinkat(target, self.fd.as_fd(), tmp.as_str())?;
            }
            other => other?,
        }
        if let Some((uid, gid)) = self.owner {
            nix::unistd::fchownat(
                self.fd.as_fd(),
                tmp.as_str(),
                Some(uid),
                Some(gid),
                AtFlags::AT_SYMLINK_NOFOLLOW,
            )?;
        }
        self.rename(&tmp, name).inspect_err(|_| {
            self.remove_file(&tmp).ok();
        })
    }

    /// The names in this directory with whether each is a directory (not following
    /// links), in no particular order; names that are not UTF-8 are left out.
    pub(crate) fn entries(&self) -> io::Result<impl Iterator<Item = io::Result<(String, bool)>>> {
        // A descriptor of its own: reading entries moves its offset.
        let dir = nix::dir::Dir::openat(
            self.fd.as_fd(),
            ".",
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )?;
        Ok(dir.into_iter().filter_map(|entry| match entry {
            Err(e) => Some(Err(io::Error::from(e))),
            Ok(entry) => {
                let name = std::str::from_utf8(entry.file_name().to_bytes()).ok()?;
                if name == "." || name == ".." {
                    return None;
                }
                let is_dir = entry.file_type() == Some(nix::dir::Type::Directory);
                Some(Ok((name.to_owned(), is_dir)))
            }
        }))
    }

    /// Gives `fd`, just created here, to the directory's owner if root created it.
    fn give(&self, fd: &OwnedFd) -> io::Result<()> {
        if let Some((uid, gid)) = self.owner {
            fchown(fd.as_fd(), Some(uid), Some(gid))?;
        }
        Ok(())
    }
}

/// How deep [`Dir::remove_tree`] goes: a store's runs hold files only, a level or two of
/// folders at most; a deeper tree is not one sdt made.
const MAX_TREE_DEPTH: u32 = 8;

/// Whether group or others may read or enter the directory at `path` with mode `mode`.
pub(crate) fn others_can_read(mode: u32) -> bool {
    mode & 0o055 != 0
}

/// `name` as one path component; anything else (empty, `.`, `..`, a `/`, a NUL) is an
/// error: the store never reaches outside a directory it opened.
fn component(name: &str) -> io::Result<&OsStr> {
    if name.is_empty() || name == "." || name == ".." || name.contains('/') || name.contains('\0') {
        return Err(io::Error::new(ErrorKind::InvalidInput, format!("{name:?} is not a file name")));
    }
    Ok(OsStr::from_bytes(name.as_bytes()))
}

/// `ELOOP` from `O_NOFOLLOW` as an error that says a link was refused.
fn refused_link(e: nix::errno::Errno, name: &str) -> io::Error {
    match e {
        nix::errno::Errno::ELOOP => io::Error::new(
            ErrorKind::InvalidData,
            format!("{name} is a symbolic link: a store holds none, and sdt does not follow one there"),
        ),
        e => e.into(),
    }
}
