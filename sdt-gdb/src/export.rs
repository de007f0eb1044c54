//! Writing a core file into a directory: the only module of this crate that does file I/O.
//!
//! The directory is held open ([`OutputDir`]) and every name is resolved in it, so that
//! whoever can rename or replace entries on the way (a store's owner, when root reads
//! the store) cannot redirect a write: the core goes into a new temporary file, created
//! with `O_EXCL | O_NOFOLLOW` and mode 0600, renamed over the final name when complete,
//! and removed on failure. A file or symbolic link found at a temporary name is never
//! followed or truncated.

use std::ffi::OsStr;
use std::fs::File;
use std::io::BufWriter;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag, openat, renameat};
use nix::sys::stat::{Mode, SFlag, fstatat, mkdirat};
use nix::unistd::{UnlinkatFlags, unlinkat};
use sdt_store::SnapshotSource;

use crate::Error;
use crate::core::{CoreReport, write_core};

/// Temporary names tried before giving up (each taken one is left alone).
const TEMP_ATTEMPTS: u32 = 100;

/// An open directory that files are created in.
#[derive(Debug)]
pub struct OutputDir {
    fd: OwnedFd,
    path: PathBuf,
}

impl OutputDir {
    /// Opens the directory `path`. Symbolic links in `path` are followed: the caller
    /// chose it.
    pub fn open(path: &Path) -> Result<OutputDir, Error> {
        let fd =
            nix::fcntl::open(path, OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC, Mode::empty())
                .map_err(|e| file_error(path, e))?;
        Ok(OutputDir { fd, path: path.to_owned() })
    }

    /// Opens the directory `name` inside this one, creating it (mode 0700) if `create`
    /// says so and it does not exist. A symbolic link, or anything but a directory, at
    /// `name` is an error.
    pub fn subdir(&self, name: &str, create: bool) -> Result<OutputDir, Error> {
        let path = self.path.join(name);
        if create {
            match mkdirat(&self.fd, name, Mode::S_IRWXU) {
                Ok(()) | Err(Errno::EEXIST) => {}
                Err(e) => return Err(file_error(&path, e)),
            }
        }
        let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        let fd = openat(&self.fd, name, flags, Mode::empty()).map_err(|e| file_error(&path, e))?;
        Ok(OutputDir { fd, path })
    }

    /// The directory's path, as opened.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// When the regular file `name` in this directory was last modified; `None` if there
    /// is none (a symbolic link there is not followed, and counts as none).
    pub fn modified(&self, name: &str) -> Option<SystemTime> {
        let st = fstatat(&self.fd, name, AtFlags::AT_SYMLINK_NOFOLLOW).ok()?;
        if SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT != SFlag::S_IFREG {
            return None;
        }
        let since_epoch =
            std::time::Duration::new(st.st_mtime.try_into().ok()?, st.st_mtime_nsec.try_into().ok()?);
        SystemTime::UNIX_EPOCH.checked_add(since_epoch)
    }
}

/// Writes the core file of `source` (usually an [`sdt_store::Snapshot`]) to `path`,
/// through a temporary file beside it (see the module doc), so `path` never holds a
/// partial core.
pub fn export_core(source: &impl SnapshotSource, path: &Path) -> Result<CoreReport, Error> {
    let Some(name) = path.file_name() else {
        return Err(file_error(path, Errno::EISDIR));
    };
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    export_core_in(source, &OutputDir::open(parent)?, name)
}

/// Writes the core file of `source` as `name` in `dir`, as [`export_core`] does.
pub fn export_core_in(
    source: &impl SnapshotSource,
    dir: &OutputDir,
    name: &OsStr,
) -> Result<CoreReport, Error> {
    let path = dir.path.join(name);
    let (file, tmp) = create_temp(dir, name)?;
    let result = write_file(source, file, &dir.path.join(&tmp)).and_then(|report| {
        renameat(&dir.fd, tmp.as_os_str(), &dir.fd, name).map_err(|e| file_error(&path, e))?;
        Ok(report)
    });
    if result.is_err() {
        // Best effort: the error being returned says what went wrong.
        let _ = unlinkat(&dir.fd, tmp.as_os_str(), UnlinkatFlags::NoRemoveDir);
    }
    result
}

/// A new file `.NAME.PID.N.tmp` in `dir`, mode 0600: the first `N` whose name is free.
fn create_temp(dir: &OutputDir, name: &OsStr) -> Result<(File, PathBuf), Error> {
    let flags = OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let mut last = Errno::EEXIST;
    for n in 0..TEMP_ATTEMPTS {
        let mut tmp = std::ffi::OsString::from(".");
        tmp.push(name);
        tmp.push(format!(".{}.{n}.tmp", std::process::id()));
        match openat(dir.fd.as_fd(), tmp.as_os_str(), flags, Mode::S_IRUSR | Mode::S_IWUSR) {
            Ok(fd) => return Ok((File::from(fd), PathBuf::from(tmp))),
            Err(Errno::EEXIST) => last = Errno::EEXIST,
            Err(e) => return Err(file_error(&dir.path.join(tmp), e)),
        }
    }
    Err(file_error(&dir.path.join(name), last))
}

fn write_file(source: &impl SnapshotSource, file: File, path: &Path) -> Result<CoreReport, Error> {
    let file_error = |source| Error::File { path: path.to_owned(), source };
    let mut out = BufWriter::with_capacity(1 << 20, file);
    let report = write_core(source, &mut out).map_err(|e| match e {
        Error::Write(source) => file_error(source),
        e => e,
    })?;
    out.into_inner().map_err(|e| file_error(e.into_error()))?;
    Ok(report)
}

fn file_error(path: &Path, errno: Errno) -> Error {
    Error::File { path: path.to_owned(), source: errno.into() }
}

#[cfg(test)]
mod tests {
    use std::fs;
    use std::os::unix::fs::PermissionsExt;

    use super::*;
    use crate::fake;

    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<_> =
            fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
        names.sort();
        names
    }

    #[test]
    fn writes_through_a_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("S1.core");
        let report = export_core(&fake::sample(), &path).unwrap();
        assert_eq!(report.threads, 2);
        assert_eq!(report.mappings, 4);
        let meta = fs::metadata(&path).unwrap();
        assert_eq!(meta.len(), report.bytes);
        assert_eq!(meta.permissions().mode() & 0o777, 0o600, "a core holds the process's secrets");
        assert_eq!(names(dir.path()), ["S1.core"]);
    }

    #[test]
    fn failure_leaves_no_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("S1.core");
        let mut source = fake::sample();
        source.corrupt_page = Some(0x7f10_0000);
        assert!(matches!(export_core(&source, &path), Err(Error::Store { .. })));
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn unwritable_path_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("missing").join("S1.core");
        let err = export_core(&fake::sample(), &path).unwrap_err();
        let Error::File { path: named, .. } = &err else { panic!("{err:?}") };
        assert_eq!(*named, dir.path().join("missing"));
    }

    #[test]
    fn a_symlink_at_the_temporary_name_is_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        fs::write(&victim, b"keep").unwrap();
        let taken = format!(".S1.core.{}.0.tmp", std::process::id());
        std::os::unix::fs::symlink(&victim, dir.path().join(&taken)).unwrap();
        export_core(&fake::sample(), &dir.path().join("S1.core")).unwrap();
        assert_eq!(fs::read(&victim).unwrap(), b"keep");
        assert_eq!(names(dir.path()), [taken.as_str(), "S1.core", "victim"]);
    }

    #[test]
    fn subdirs_are_created_private_and_never_through_a_symlink() {
        let dir = tempfile::tempdir().unwrap();
        let top = OutputDir::open(dir.path()).unwrap();
        let cores = top.subdir("cores", true).unwrap();
        assert_eq!(fs::metadata(cores.path()).unwrap().permissions().mode() & 0o777, 0o700);
        top.subdir("cores", true).unwrap();
        std::os::unix::fs::symlink(dir.path(), dir.path().join("link")).unwrap();
        assert!(top.subdir("link", true).is_err());
        assert!(top.subdir("link", false).is_err());
        export_core_in(&fake::sample(), &cores, "S1.core".as_ref()).unwrap();
        assert!(cores.modified("S1.core").is_some());
        assert!(cores.modified("S2.core").is_none());
        std::os::unix::fs::symlink(cores.path().join("S1.core"), cores.path().join("S3.core")).unwrap();
        assert!(cores.modified("S3.core").is_none(), "a symlink is not a cached core");
    }
}
