//! Where the exporters write: a directory outside the store (or its `cores/` cache),
//! held open ([`OutputDir`]), every name resolved in it, so that whoever can rename or
//! replace entries on the way (a store's owner, when root reads the store) cannot
//! redirect a write.
//!
//! A file ([`OutputDir::write_file`]) or a directory of files
//! ([`OutputDir::write_dir`]) is written under a new temporary name beside its own,
//! `.NAME.PID.N.tmp`, created `O_EXCL | O_NOFOLLOW` (files 0600, directories 0700: they
//! hold the process's memory), renamed over its name once complete, and removed on
//! failure; so the name never holds a partial export. A file or link found at a
//! temporary name is never followed, truncated or removed: the next name is tried.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag, openat, renameat};
use nix::sys::stat::{Mode, SFlag, fstatat, mkdirat};
use nix::unistd::{UnlinkatFlags, unlinkat};

/// Temporary names tried before giving up (each taken one is left alone).
const TEMP_ATTEMPTS: u32 = 100;

/// An open directory that exports are written into.
#[derive(Debug)]
pub struct OutputDir {
    fd: OwnedFd,
    path: PathBuf,
}

/// A file or directory of an export could not be made.
#[derive(Debug, thiserror::Error)]
#[error("cannot write {}", path.display())]
pub struct OutputError {
    /// The file or directory, or the temporary one beside it.
    pub path: PathBuf,
    /// The cause.
    #[source]
    pub source: io::Error,
}

impl OutputDir {
    /// Opens the directory `path`. Symbolic links in `path` are followed: the caller
    /// chose it.
    pub fn open(path: &Path) -> Result<OutputDir, OutputError> {
        let fd =
            nix::fcntl::open(path, OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC, Mode::empty())
                .map_err(|e| output_error(path, e))?;
        Ok(OutputDir { fd, path: path.to_owned() })
    }

    /// Opens the directory `name` inside this one, creating it (mode 0700) if `create`
    /// says so and it does not exist. A symbolic link, or anything but a directory, at
    /// `name` is an error.
    pub fn subdir(&self, name: &str, create: bool) -> Result<OutputDir, OutputError> {
        let path = self.path.join(name);
        if create {
            match mkdirat(&self.fd, name, Mode::S_IRWXU) {
                Ok(()) | Err(Errno::EEXIST) => {}
                Err(e) => return Err(output_error(&path, e)),
            }
        }
        let fd = openat(&self.fd, name, DIR_FLAGS, Mode::empty()).map_err(|e| output_error(&path, e))?;
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

    /// Creates the file `name` (mode 0600) in this directory, for writing; an error if
    /// anything, a link included, has that name.
    pub fn create_file(&self, name: &str) -> io::Result<File> {
        Ok(File::from(openat(&self.fd, name, FILE_FLAGS, Mode::S_IRUSR | Mode::S_IWUSR)?))
    }

    /// Writes the file `name` through a temporary file (see the module doc): `write`
    /// fills it, given its path for messages.
    pub fn write_file<T, E: From<OutputError>>(
        &self,
        name: &OsStr,
        write: impl FnOnce(File, &Path) -> Result<T, E>,
    ) -> Result<T, E> {
        let (tmp, fd) =
            self.create_temp(name, |tmp| openat(&self.fd, tmp, FILE_FLAGS, Mode::S_IRUSR | Mode::S_IWUSR))?;
        let written = write(File::from(fd), &self.path.join(&tmp));
        self.put_in_place(written, &tmp, name, || {
            // Best effort: the error being returned says what went wrong.
            let _ = unlinkat(&self.fd, tmp.as_os_str(), UnlinkatFlags::NoRemoveDir);
        })
    }

    /// Writes the directory `name` through a temporary one (see the module doc): `fill`
    /// creates its files ([`OutputDir::create_file`]). The directory replaces an empty
    /// one at `name`.
    pub fn write_dir<T, E: From<OutputError>>(
        &self,
        name: &OsStr,
        fill: impl FnOnce(&OutputDir) -> Result<T, E>,
    ) -> Result<T, E> {
        let (tmp, dir) = self.create_temp(name, |tmp| {
            mkdirat(&self.fd, tmp, Mode::S_IRWXU)?;
            openat(&self.fd, tmp, DIR_FLAGS, Mode::empty()).inspect_err(|_| {
                let _ = unlinkat(&self.fd, tmp, UnlinkatFlags::RemoveDir);
            })
        })?;
        let dir = OutputDir { fd: dir, path: self.path.join(&tmp) };
        let filled = fill(&dir);
        self.put_in_place(filled, &tmp, name, || {
            // Best effort, as for a file.
            dir.remove_files();
            let _ = unlinkat(&self.fd, tmp.as_os_str(), UnlinkatFlags::RemoveDir);
        })
    }

    /// Makes something new under the first free temporary name for `name`, with `make`.
    fn create_temp<R>(
        &self,
        name: &OsStr,
        make: impl Fn(&OsStr) -> nix::Result<R>,
    ) -> Result<(OsString, R), OutputError> {
        for n in 0..TEMP_ATTEMPTS {
            let mut tmp = OsString::from(".");
            tmp.push(name);
            tmp.push(format!(".{}.{n}.tmp", std::process::id()));
            match make(&tmp) {
                Ok(made) => return Ok((tmp, made)),
                Err(Errno::EEXIST) => {}
                Err(e) => return Err(output_error(&self.path.join(tmp), e)),
            }
        }
        Err(output_error(&self.path.join(name), Errno::EEXIST))
    }

    /// Renames the temporary `tmp` to `name` if it was `written`; otherwise, or if the
    /// rename fails, `remove`s it.
    fn put_in_place<T, E: From<OutputError>>(
        &self,
        written: Result<T, E>,
        tmp: &OsStr,
        name: &OsStr,
        remove: impl FnOnce(),
    ) -> Result<T, E> {
        let placed = written.and_then(|done| {
            renameat(&self.fd, tmp, &self.fd, name).map_err(|e| output_error(&self.path.join(name), e))?;
            Ok(done)
        });
        if placed.is_err() {
            remove();
        }
        placed
    }

    /// Removes the files in this directory, as far as it can.
    fn remove_files(&self) {
        let Ok(entries) = nix::dir::Dir::openat(&self.fd, ".", DIR_FLAGS, Mode::empty()) else { return };
        for entry in entries.into_iter().flatten() {
            let name = entry.file_name();
            if name != c"." && name != c".." {
                let _ = unlinkat(&self.fd, name, UnlinkatFlags::NoRemoveDir);
            }
        }
    }
}

/// How directories are opened below the one the caller chose: never through a link.
const DIR_FLAGS: OFlag =
    OFlag::O_RDONLY.union(OFlag::O_DIRECTORY).union(OFlag::O_NOFOLLOW).union(OFlag::O_CLOEXEC);
/// How files are created: new, never through a link.
const FILE_FLAGS: OFlag = OFlag::O_WRONLY
    .union(OFlag::O_CREAT)
    .union(OFlag::O_EXCL)
    .union(OFlag::O_NOFOLLOW)
    .union(OFlag::O_CLOEXEC);

fn output_error(path: &Path, errno: Errno) -> OutputError {
    OutputError { path: path.to_owned(), source: errno.into() }
}

#[cfg(test)]
mod tests {
    use std::fs;
    use std::io::Write;
    use std::os::unix::fs::{PermissionsExt, symlink};

    use super::*;

    /// How many entries the directory `dir` holds.
    fn count(dir: &Path) -> usize {
        fs::read_dir(dir).unwrap().count()
    }

    fn mode(path: &Path) -> u32 {
        fs::symlink_metadata(path).unwrap().permissions().mode() & 0o7777
    }

    fn write(mut file: File, bytes: &[u8]) -> Result<(), OutputError> {
        file.write_all(bytes).map_err(|source| OutputError { path: "the file".into(), source })
    }

    #[test]
    fn subdirs_are_created_private_and_never_through_a_symlink() {
        let dir = tempfile::tempdir().unwrap();
        let top = OutputDir::open(dir.path()).unwrap();
        let cores = top.subdir("cores", true).unwrap();
        assert_eq!(mode(cores.path()), 0o700);
        top.subdir("cores", true).unwrap();
        symlink(dir.path(), dir.path().join("link")).unwrap();
        assert!(top.subdir("link", true).is_err());
        assert!(top.subdir("link", false).is_err());
        cores.write_file("S1.core".as_ref(), |file, _| write(file, b"core")).unwrap();
        assert!(cores.modified("S1.core").is_some());
        assert!(cores.modified("S2.core").is_none());
        symlink(cores.path().join("S1.core"), cores.path().join("S3.core")).unwrap();
        assert!(cores.modified("S3.core").is_none(), "a symlink is not a cached core");
    }

    #[test]
    fn a_file_is_private_and_replaces_its_name_whole_or_not_at_all() {
        let dir = tempfile::tempdir().unwrap();
        let out = OutputDir::open(dir.path()).unwrap();
        fs::write(dir.path().join("S1.core"), b"old").unwrap();
        let failed: Result<(), OutputError> = out.write_file("S1.core".as_ref(), |file, path| {
            write(file, b"half")?;
            Err(OutputError { path: path.to_owned(), source: io::ErrorKind::Other.into() })
        });
        let Err(OutputError { path, .. }) = failed else { panic!("the writer failed") };
        assert_eq!(path, dir.path().join(format!(".S1.core.{}.0.tmp", std::process::id())));
        assert_eq!(fs::read(dir.path().join("S1.core")).unwrap(), b"old");
        assert_eq!(count(dir.path()), 1, "the temporary file is gone");
        out.write_file("S1.core".as_ref(), |file, _| write(file, b"new")).unwrap();
        assert_eq!(fs::read(dir.path().join("S1.core")).unwrap(), b"new");
        assert_eq!(mode(&dir.path().join("S1.core")), 0o600);
        assert_eq!(count(dir.path()), 1);
    }

    #[test]
    fn a_directory_is_private_and_a_link_at_its_temporary_name_is_left_alone() {
        let parent = tempfile::tempdir().unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        let taken = format!(".img.{}.0.tmp", std::process::id());
        symlink(elsewhere.path(), parent.path().join(&taken)).unwrap();
        fs::create_dir(parent.path().join("img")).unwrap();
        let out = OutputDir::open(parent.path()).unwrap();
        out.write_dir("img".as_ref(), |images| write(images.create_file("a.img").unwrap(), b"a")).unwrap();
        assert_eq!(count(parent.path()), 2, "the empty img is replaced");
        assert!(fs::symlink_metadata(parent.path().join(&taken)).unwrap().is_symlink());
        assert_eq!(fs::read(parent.path().join("img/a.img")).unwrap(), b"a");
        assert_eq!(count(&parent.path().join("img")), 1);
        assert_eq!(
            (mode(&parent.path().join("img")), mode(&parent.path().join("img/a.img"))),
            (0o700, 0o600)
        );
        assert_eq!(fs::read_dir(elsewhere.path()).unwrap().count(), 0);
        // A file that exists already is not opened again.
        let again = out.write_dir("img2".as_ref(), |images| {
            write(images.create_file("a.img").unwrap(), b"a")?;
            images
                .create_file("a.img")
                .map(drop)
                .map_err(|source| OutputError { path: "a.img".into(), source })
        });
        assert!(again.is_err());
        assert_eq!(count(parent.path()), 2, "a failed directory leaves nothing");
    }
}
