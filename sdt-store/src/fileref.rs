//! The files that mappings refer to ([`FileRef`]): opened, checked and read for the pages
//! the store does not hold.
//!
//! A store is untrusted input, and so are the paths and identities it records: a store
//! can name `/etc/shadow`, a FIFO or a device, and copy their `stat`. A file's bytes are
//! used only when all of this holds:
//!
//! - the path's last component is a regular file, not a symbolic link (checked before
//!   opening, so that a FIFO or device is never opened, and again on the open file);
//! - it is opened without blocking and without becoming a controlling terminal
//!   (`O_NONBLOCK | O_NOCTTY | O_NOFOLLOW`);
//! - its device, inode, size and mtime are those recorded at capture;
//! - when the store belongs to someone else than the reader (the owner of the store or of
//!   the run's directory is not this process's effective uid), that owner could have read
//!   it: it owns the file and the file is owner-readable, or the file is world-readable.
//!   Root reading a user's store so never copies out a file only root could read.
//!
//! Otherwise the file's pages are unavailable: reading them is an error naming the file
//! and why ([`Error::FileChanged`], [`Error::FileRefused`]).

use std::fs::{File, Metadata, OpenOptions};
use std::io::ErrorKind;
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::path::Path;

use nix::fcntl::OFlag;

use crate::dir::io_error;
use crate::model::FileRef;
use crate::{Error, Result};

/// `S_IRUSR` and `S_IROTH`.
const OWNER_READ: u32 = 0o400;
const WORLD_READ: u32 = 0o004;

/// Whose reading rights a referenced file must also satisfy: the owners of a run's store
/// other than the reader.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Trust {
    /// Owners of the store directory and of the run directory that are not this process's
    /// effective uid.
    others: Vec<u32>,
}

impl Trust {
    /// For the run in `run_dir` (`<store>/runs/<id>`): the owners of that directory and of
    /// the store's. A directory that cannot be read for its owner counts as someone
    /// else's, nobody's (uid `u32::MAX`), so that only world-readable files are used.
    pub(crate) fn of_run_dir(run_dir: &Path) -> Trust {
        let store = run_dir.parent().and_then(Path::parent).unwrap_or(run_dir);
        let me = nix::unistd::geteuid().as_raw();
        let mut others = Vec::new();
        for dir in [store, run_dir] {
            let owner = std::fs::metadata(dir).map_or(u32::MAX, |m| m.uid());
            if owner != me && !others.contains(&owner) {
                others.push(owner);
            }
        }
        Trust { others }
    }

    /// Why the file `meta` describes may not be used, if it may not.
    fn refuses(&self, meta: &Metadata) -> Option<String> {
        let mode = meta.mode();
        let readable_by = |uid: u32| mode & WORLD_READ != 0 || (meta.uid() == uid && mode & OWNER_READ != 0);
        let who = self.others.iter().find(|&&uid| !readable_by(uid))?;
        Some(match *who {
            u32::MAX => "it is not world-readable, and the store's owner is unknown".to_owned(),
            uid => format!(
                "the store belongs to uid {uid}, who could not read it (owner {}, mode {:o})",
                meta.uid(),
                mode & 0o7777
            ),
        })
    }
}

/// Opens the file `f` names and checks that it is the version that was mapped, a regular
/// file, and readable by whoever owns the store (see the module doc). `snapshot` names
/// the snapshot for errors.
pub(crate) fn open(f: &FileRef, trust: &Trust, snapshot: &str) -> Result<File> {
    let refused =
        |why: String| Error::FileRefused { path: f.path.clone(), snapshot: snapshot.to_owned(), why };
    let path = Path::new(&f.path);
    if !path.is_absolute() {
        return Err(refused("not an absolute path".into()));
    }
    // Before opening: opening a FIFO or a device can block or have effects of its own.
    match std::fs::symlink_metadata(path) {
        Ok(meta) => check_kind(&meta).map_err(refused)?,
        Err(e) if e.kind() == ErrorKind::NotFound => {
            return Err(changed(f, snapshot, "it no longer exists".into()));
        }
        Err(e) => return Err(io_error(path, e)),
    }
    let flags = OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_NOCTTY;
    let file = match OpenOptions::new().read(true).custom_flags(flags.bits()).open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == ErrorKind::NotFound => {
            return Err(changed(f, snapshot, "it no longer exists".into()));
        }
        // ELOOP: it became a symbolic link since the check.
        Err(e) if e.raw_os_error() == Some(nix::libc::ELOOP) => {
            return Err(refused("it is a symbolic link".into()));
        }
        Err(e) => return Err(io_error(path, e)),
    };
    // Again on what was opened: the path may have been replaced in between.
    let meta = file.metadata().map_err(|e| io_error(path, e))?;
    check_kind(&meta).map_err(refused)?;
    let diffs = identity_diffs(f, &meta);
    if !diffs.is_empty() {
        return Err(changed(f, snapshot, diffs.join("; ")));
    }
    if let Some(why) = trust.refuses(&meta) {
        return Err(refused(why));
    }
    Ok(file)
}

fn changed(f: &FileRef, snapshot: &str, detail: String) -> Error {
    Error::FileChanged { path: f.path.clone(), snapshot: snapshot.to_owned(), detail }
}

/// A regular file, or what else it is.
fn check_kind(meta: &Metadata) -> Result<(), String> {
    let t = meta.file_type();
    if t.is_file() {
        return Ok(());
    }
    let what = if t.is_symlink() {
        "a symbolic link"
    } else if t.is_dir() {
        "a directory"
    } else {
        use std::os::unix::fs::FileTypeExt;
        match () {
            _ if t.is_fifo() => "a FIFO",
            _ if t.is_char_device() => "a character device",
            _ if t.is_block_device() => "a block device",
            _ if t.is_socket() => "a socket",
            _ => "not a regular file",
        }
    };
    Err(format!("it is {what}, not a regular file"))
}

/// How the file `meta` describes differs from the version `f` recorded, got vs expected.
fn identity_diffs(f: &FileRef, meta: &Metadata) -> Vec<String> {
    let now = FileRef::of(&f.path, meta);
    let mut diffs = Vec::new();
    for (what, got, expected) in
        [("device", now.dev, f.dev), ("inode", now.inode, f.inode), ("size", now.size, f.size)]
    {
        if got != expected {
            diffs.push(format!("{what} {got}, expected {expected}"));
        }
    }
    if now.mtime_ns != f.mtime_ns {
        diffs.push(format!("mtime {} ns, expected {} ns", now.mtime_ns, f.mtime_ns));
    }
    diffs
}

/// Fills `out` from `file` at `offset`; bytes past the end of the file are zero.
pub(crate) fn read_at(file: &File, mut offset: u64, mut out: &mut [u8], path: &str) -> Result<()> {
    while !out.is_empty() {
        match file.read_at(out, offset) {
            Ok(0) => {
                out.fill(0);
                break;
            }
            Ok(n) => {
                out = &mut out[n..];
                offset += n as u64;
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(io_error(Path::new(path), e)),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn file_ref(path: &Path) -> FileRef {
        FileRef::of(path.to_str().unwrap(), &std::fs::metadata(path).unwrap())
    }

    fn is_root() -> bool {
        nix::unistd::geteuid().is_root()
    }

    #[test]
    fn the_mapped_file_opens_and_reads() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lib.so");
        std::fs::write(&path, b"0123456789").unwrap();
        let file = open(&file_ref(&path), &Trust::default(), "S1").unwrap();
        let mut buf = [0xff; 8];
        read_at(&file, 6, &mut buf, "lib.so").unwrap();
        assert_eq!(&buf, b"6789\0\0\0\0");
    }

    #[test]
    fn a_fifo_is_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("fifo");
        nix::unistd::mkfifo(&path, nix::sys::stat::Mode::from_bits_truncate(0o644)).unwrap();
        let err = open(&file_ref(&path), &Trust::default(), "S1").unwrap_err();
        assert!(err.to_string().ends_with("it is a FIFO, not a regular file"), "{err}");
        assert!(matches!(err, Error::FileRefused { .. }));
        let dev = open(&file_ref(Path::new("/dev/zero")), &Trust::default(), "S1").unwrap_err();
        assert!(dev.to_string().ends_with("it is a character device, not a regular file"), "{dev}");
    }

    #[test]
    fn a_symlink_is_refused_even_to_the_right_file() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("real");
        std::fs::write(&target, b"x").unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let f = FileRef { path: link.to_str().unwrap().into(), ..file_ref(&target) };
        let err = open(&f, &Trust::default(), "S1").unwrap_err();
        assert!(err.to_string().contains("it is a symbolic link"), "{err}");
    }

    #[test]
    fn another_version_is_changed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lib.so");
        std::fs::write(&path, b"abc").unwrap();
        let f = FileRef { size: 4, ..file_ref(&path) };
        let err = open(&f, &Trust::default(), "S1").unwrap_err();
        assert!(matches!(&err, Error::FileChanged { detail, .. } if detail == "size 3, expected 4"), "{err}");
        let gone = FileRef { path: dir.path().join("gone").to_str().unwrap().into(), ..f };
        assert!(matches!(open(&gone, &Trust::default(), "S1"), Err(Error::FileChanged { .. })));
    }

    #[test]
    fn a_file_the_stores_owner_could_not_read_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("secret");
        std::fs::write(&path, b"secret").unwrap();
        let me = nix::unistd::geteuid().as_raw();
        let other = Trust { others: vec![me.wrapping_add(1)] };
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        let err = open(&file_ref(&path), &other, "S1").unwrap_err();
        assert!(
            err.to_string().contains(&format!("the store belongs to uid {}, who could not read it", me + 1)),
            "{err}"
        );
        // Readable by everyone: fine; by its owner, when the owner is the store's: fine.
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o604)).unwrap();
        open(&file_ref(&path), &other, "S1").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o400)).unwrap();
        open(&file_ref(&path), &Trust { others: vec![me] }, "S1").unwrap();
        // Nobody's: only world-readable files.
        let nobody = Trust { others: vec![u32::MAX] };
        assert!(open(&file_ref(&path), &nobody, "S1").is_err());
    }

    #[test]
    fn trust_comes_from_the_owners_of_the_store_and_the_run() {
        let store = tempfile::tempdir().unwrap();
        let run = store.path().join("runs").join("1");
        std::fs::create_dir_all(&run).unwrap();
        assert_eq!(Trust::of_run_dir(&run), Trust::default());
        if !is_root() {
            return;
        }
        std::os::unix::fs::chown(store.path(), Some(1001), None).unwrap();
        assert_eq!(Trust::of_run_dir(&run).others, [1001]);
        std::os::unix::fs::chown(&run, Some(1002), None).unwrap();
        assert_eq!(Trust::of_run_dir(&run).others, [1001, 1002]);
    }
}
