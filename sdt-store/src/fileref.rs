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
//!   it ([`Trust`]). Root reading a user's store so never copies out a file only root
//!   could read.
//!
//! Otherwise the file's pages are unavailable: reading them is an error naming the file
//! and why ([`Error::FileChanged`], [`Error::FileRefused`]); where the file changed, the
//! reader takes the version the run kept instead, if it kept it (`kept`).
//!
//! Files a restore opens again by path ([`Reopen`]: a descriptor's, a mapping's that the
//! snapshot has no pages of) pass the same checks, for what they must be (a regular file,
//! a directory or a character device), their device and inode where recorded, and the
//! access they are opened with; they are opened `O_PATH`, which never blocks or reaches
//! a driver, so that the caller opens the very file checked (`/proc/self/fd/N`).

use std::fs::{File, Metadata, OpenOptions};
use std::io::ErrorKind;
use std::os::unix::fs::{FileExt, FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::Path;

use nix::fcntl::OFlag;

use crate::dir::io_error;
use crate::model::{Content, FileKind, FileRef, Mapping, SnapshotMeta};
use crate::trust::Access;
pub(crate) use crate::trust::Trust;
use crate::{Error, Result};

impl SnapshotMeta {
    /// Whether the file `f` is mapped, and only by shared writable mappings: the program
    /// writes its pages in place, and the snapshot holds those it had (not the file's
    /// version at the capture, which no copy kept later would be either).
    pub fn written_in_place(&self, f: &FileRef) -> bool {
        let mut views =
            self.mappings.iter().filter(|m| matches!(&m.content, Content::File(g) if g == f)).peekable();
        views.peek().is_some() && views.all(|m| m.perms.shared && m.perms.write && m.perms.read)
    }

    /// The program's file: the one a mapping of the executable takes its pages from, or
    /// the one deleted before the capture ([`ProcessInfo::deleted_program`]).
    ///
    /// [`ProcessInfo::deleted_program`]: crate::ProcessInfo::deleted_program
    pub fn program_file(&self) -> Option<&FileRef> {
        self.mapped_file(&self.process.exe).or(self.process.deleted_program.as_ref())
    }

    /// What was recorded of the file at `path`, if a mapping takes its pages from it.
    pub fn mapped_file(&self, path: &str) -> Option<&FileRef> {
        self.mappings.iter().find_map(|m| match &m.content {
            Content::File(f) if f.path == path => Some(f),
            _ => None,
        })
    }

    /// The mapping of file `f`'s start (offset 0), where it was loaded: one that takes
    /// its pages from `f`, or, for the program deleted before the capture, whose pages
    /// are held, the executable's mapping of `f`'s inode.
    pub fn mapping_of_start(&self, f: &FileRef) -> Option<&Mapping> {
        let deleted = self.process.deleted_program.as_ref() == Some(f);
        self.mappings.iter().find(|m| {
            m.offset == 0
                && match &m.content {
                    Content::File(g) => g == f,
                    _ => deleted && m.inode == f.inode && m.path == self.process.exe,
                }
        })
    }
}

/// Whether the file `f` names is one `meta` maps shared and that no longer exists: its
/// path is gone, and only shared writable mappings map it, so the snapshot holds the
/// pages the program had of it (a JVM's `hsperfdata` file, removed as the JVM exits;
/// POSIX shared memory after `shm_unlink`). A restore makes it again from them.
pub fn gone_shared_file(meta: &SnapshotMeta, f: &FileRef) -> bool {
    meta.written_in_place(f)
        && std::fs::symlink_metadata(&f.path).is_err_and(|e| e.kind() == ErrorKind::NotFound)
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
            return Err(changed(&f.path, snapshot, "it no longer exists".into()));
        }
        Err(e) => return Err(io_error(path, e)),
    }
    let flags = OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_NOCTTY;
    let file = match OpenOptions::new().read(true).custom_flags(flags.bits()).open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == ErrorKind::NotFound => {
            return Err(changed(&f.path, snapshot, "it no longer exists".into()));
        }
        // ELOOP: it became a symbolic link since the check.
        Err(e) if e.raw_os_error() == Some(nix::libc::ELOOP) => {
            return Err(refused("it is a symbolic link".into()));
        }
        Err(e) => return Err(io_error(path, e)),
    };
    // Again on what was opened: the path may have been replaced in between.
    check_opened(f, file, trust, snapshot)
}

/// `file`, opened as the file `f` names (by its path, or through a process's link to
/// it), if it is a regular file, the version that was mapped, and readable by whoever
/// owns the store (see the module doc). `snapshot` names the snapshot for errors.
pub(crate) fn check_opened(f: &FileRef, file: File, trust: &Trust, snapshot: &str) -> Result<File> {
    let refused =
        |why: String| Error::FileRefused { path: f.path.clone(), snapshot: snapshot.to_owned(), why };
    let meta = file.metadata().map_err(|e| io_error(Path::new(&f.path), e))?;
    check_kind(&meta).map_err(refused)?;
    let diffs = identity_diffs(f, &meta);
    if !diffs.is_empty() {
        return Err(changed(&f.path, snapshot, diffs.join("; ")));
    }
    if let Some(why) = trust.refuses(&meta, Access::READ) {
        return Err(refused(why));
    }
    Ok(file)
}

/// A file a restore opens again by path, and what it must be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reopen<'a> {
    /// Its path.
    pub path: &'a str,
    /// What it must be: [`FileKind::Regular`], [`FileKind::Directory`] or
    /// [`FileKind::CharDevice`].
    pub kind: FileKind,
    /// Its device and inode (as `stat` gives them), where the snapshot recorded them.
    pub identity: Option<(u64, u64)>,
    /// How it is opened.
    pub access: Access,
}

/// Opens `r.path` `O_PATH` and checks that it is what `r` says, and that the store's
/// owners could open it so (see the module doc). `snapshot` names the snapshot for errors.
pub(crate) fn reopen(r: &Reopen, trust: &Trust, snapshot: &str) -> Result<File> {
    let refused =
        |why: String| Error::FileRefused { path: r.path.to_owned(), snapshot: snapshot.to_owned(), why };
    let path = Path::new(r.path);
    if !path.is_absolute() {
        return Err(refused("not an absolute path".into()));
    }
    // O_PATH opens a symbolic link itself (O_NOFOLLOW), a FIFO or device without opening it.
    let flags = OFlag::O_PATH | OFlag::O_NOFOLLOW;
    let file = match OpenOptions::new().read(true).custom_flags(flags.bits()).open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == ErrorKind::NotFound => {
            return Err(changed(r.path, snapshot, "it no longer exists".into()));
        }
        Err(e) => return Err(io_error(path, e)),
    };
    let meta = file.metadata().map_err(|e| io_error(path, e))?;
    let t = meta.file_type();
    let is = match r.kind {
        FileKind::Regular => t.is_file(),
        FileKind::Directory => t.is_dir(),
        FileKind::CharDevice => t.is_char_device(),
        _ => false,
    };
    if !is {
        return Err(refused(format!("it is {}, not {}", kind_of(&meta), kind_name(r.kind))));
    }
    if let Some((dev, inode)) = r.identity {
        let diffs = differences([("device", meta.dev(), dev), ("inode", meta.ino(), inode)]);
        if !diffs.is_empty() {
            return Err(changed(r.path, snapshot, diffs.join("; ")));
        }
    }
    if let Some(why) = trust.refuses(&meta, r.access) {
        return Err(refused(why));
    }
    Ok(file)
}

fn changed(path: &str, snapshot: &str, detail: String) -> Error {
    Error::FileChanged { path: path.to_owned(), snapshot: snapshot.to_owned(), detail }
}

/// A regular file, or what else it is.
fn check_kind(meta: &Metadata) -> Result<(), String> {
    if meta.file_type().is_file() {
        return Ok(());
    }
    Err(format!("it is {}, not a regular file", kind_of(meta)))
}

/// What kind of file `meta` describes, with its article.
fn kind_of(meta: &Metadata) -> &'static str {
    let t = meta.file_type();
    match () {
        _ if t.is_file() => "a regular file",
        _ if t.is_symlink() => "a symbolic link",
        _ if t.is_dir() => "a directory",
        _ if t.is_fifo() => "a FIFO",
        _ if t.is_char_device() => "a character device",
        _ if t.is_block_device() => "a block device",
        _ if t.is_socket() => "a socket",
        _ => "a file of unknown kind",
    }
}

/// What a reopened file of `kind` must be, with its article.
fn kind_name(kind: FileKind) -> &'static str {
    match kind {
        FileKind::Regular => "a regular file",
        FileKind::Directory => "a directory",
        FileKind::CharDevice => "a character device",
        _ => "a file a restore opens again",
    }
}

/// How the file `meta` describes differs from the version `f` recorded, got vs expected.
fn identity_diffs(f: &FileRef, meta: &Metadata) -> Vec<String> {
    let now = FileRef::of(&f.path, meta);
    let mut diffs =
        differences([("device", now.dev, f.dev), ("inode", now.inode, f.inode), ("size", now.size, f.size)]);
    if now.mtime_ns != f.mtime_ns {
        diffs.push(format!("mtime {} ns, expected {} ns", now.mtime_ns, f.mtime_ns));
    }
    diffs
}

/// `WHAT GOT, expected EXPECTED` for each field whose values differ.
fn differences<'a>(fields: impl IntoIterator<Item = (&'a str, u64, u64)>) -> Vec<String> {
    fields
        .into_iter()
        .filter(|(_, got, expected)| got != expected)
        .map(|(what, got, expected)| format!("{what} {got}, expected {expected}"))
        .collect()
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
        let other = Trust::owned_by(me.wrapping_add(1), 0);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        let err = open(&file_ref(&path), &other, "S1").unwrap_err();
        assert!(
            err.to_string().contains(&format!("the store belongs to uid {}, who could not read it", me + 1)),
            "{err}"
        );
        // Readable by everyone: fine; the reader's own store: fine.
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o604)).unwrap();
        open(&file_ref(&path), &other, "S1").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o400)).unwrap();
        open(&file_ref(&path), &Trust::owned_by(me, 0), "S1").unwrap();
        // Nobody's: only world-readable files.
        let nobody = Trust::owned_by(u32::MAX, u32::MAX);
        let err = open(&file_ref(&path), &nobody, "S1").unwrap_err();
        assert!(err.to_string().contains("the store's owner is unknown"), "{err}");
    }

    fn reopen_of(path: &Path, kind: FileKind, access: Access) -> Reopen<'_> {
        Reopen { path: path.to_str().unwrap(), kind, identity: None, access }
    }

    #[test]
    fn a_reopened_file_must_be_of_its_kind_and_never_blocks() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o666)).unwrap();
        let err =
            reopen(&reopen_of(&fifo, FileKind::Regular, Access::READ), &Trust::default(), "S1").unwrap_err();
        assert!(err.to_string().ends_with("it is a FIFO, not a regular file"), "{err}");
        let file = dir.path().join("file");
        std::fs::write(&file, b"x").unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        let err =
            reopen(&reopen_of(&link, FileKind::Regular, Access::READ), &Trust::default(), "S1").unwrap_err();
        assert!(err.to_string().ends_with("it is a symbolic link, not a regular file"), "{err}");
        let dev = reopen_of(Path::new("/dev/null"), FileKind::CharDevice, Access { read: true, write: true });
        reopen(&dev, &Trust::default(), "S1").unwrap();
        let err = reopen(&reopen_of(dir.path(), FileKind::CharDevice, Access::READ), &Trust::default(), "S1")
            .unwrap_err();
        assert!(err.to_string().ends_with("it is a directory, not a character device"), "{err}");
        reopen(&reopen_of(dir.path(), FileKind::Directory, Access::READ), &Trust::default(), "S1").unwrap();
    }

    #[test]
    fn a_reopened_file_is_the_one_recorded_and_the_owner_could_open_it_so() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        std::fs::write(&path, b"x").unwrap();
        let st = std::fs::metadata(&path).unwrap();
        let mut r = reopen_of(&path, FileKind::Regular, Access::READ);
        r.identity = Some((st.dev(), st.ino()));
        let file = reopen(&r, &Trust::default(), "S1").unwrap();
        assert_eq!(file.metadata().unwrap().ino(), st.ino());
        // Another file at the path: changed. Its contents changing is no matter.
        std::fs::write(&path, b"longer now").unwrap();
        reopen(&r, &Trust::default(), "S1").unwrap();
        r.identity = Some((st.dev(), st.ino() + 1));
        let err = reopen(&r, &Trust::default(), "S1").unwrap_err();
        assert!(matches!(&err, Error::FileChanged { detail, .. } if detail.starts_with("inode")), "{err}");
        // World-readable, not world-writable: a store of someone else may read it only.
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let other = Trust::owned_by(nix::unistd::geteuid().as_raw().wrapping_add(1), 0);
        r.identity = None;
        reopen(&r, &other, "S1").unwrap();
        r.access = Access { read: false, write: true };
        let err = reopen(&r, &other, "S1").unwrap_err();
        assert!(err.to_string().contains("who could not write it"), "{err}");
        let gone = dir.path().join("gone");
        let gone = reopen_of(&gone, FileKind::Regular, Access::READ);
        assert!(matches!(reopen(&gone, &other, "S1"), Err(Error::FileChanged { .. })));
        let relative = Reopen { path: "log", ..gone };
        assert!(reopen(&relative, &other, "S1").unwrap_err().to_string().ends_with("not an absolute path"));
    }
}
