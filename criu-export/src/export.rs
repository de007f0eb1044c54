//! Writing the images to a directory, and finding the SDT library's state word in the
//! program's files: the only module of this crate that does file I/O.
//!
//! The images go into a new temporary directory (mode 0700) beside the output, held open
//! so that each image is created in it by name, `O_EXCL | O_NOFOLLOW`, mode 0600, as
//! `criu dump` creates its own: renaming or replacing the directory's path meanwhile
//! redirects nothing, and the images, which hold the process's memory, are readable by
//! the exporter only ([`sdt_store::OutputDir::write_dir`]).

use std::fs;
use std::io::{BufWriter, Write};
use std::path::Path;

use sdt_store::{OutputDir, SnapshotSource};

use crate::Error;
use crate::encode::{ImageSink, Report, write_images};

/// Writes the CRIU images of `source` (usually an [`sdt_store::Snapshot`]) into the
/// directory `dir`, which must not exist or be empty. They are written into a temporary
/// directory beside it, renamed to `dir` when complete, so `dir` never holds a partial
/// set; on failure nothing is left behind.
pub fn export_criu(source: &impl SnapshotSource, dir: &Path) -> Result<Report, Error> {
    let dir_error = |source| Error::Dir { path: dir.to_owned(), source };
    match fs::read_dir(dir) {
        Ok(mut entries) => {
            if entries.next().is_some() {
                return Err(Error::NotEmpty { path: dir.to_owned() });
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(dir_error(e)),
    }
    let Some(name) = dir.file_name() else {
        return Err(dir_error(std::io::ErrorKind::InvalidInput.into()));
    };
    let parent = match dir.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let state_word = state_word(source);
    OutputDir::open(parent)?
        .write_dir(name, |images| write_images(source, state_word, &mut DirSink { images }))
}

/// The address of the SDT library's state word, found by symbol in the files the
/// program mapped ([`sdt_target::symbol_in`]). Only the files the store
/// checks are read ([`SnapshotSource::open_file`]); one it refuses is not (and the plan refuses
/// the export, naming it).
fn state_word(source: &impl SnapshotSource) -> Option<u64> {
    let meta = source.meta();
    let open = |path: &str| source.open_file(meta.mapped_file(path)?).ok();
    sdt_target::symbol_in(&meta.mappings, &meta.process.exe, sdt_abi::SYMBOL_STATE, &open)
}

/// Image files in an open directory.
struct DirSink<'d> {
    images: &'d OutputDir,
}

impl ImageSink for DirSink<'_> {
    fn create(&mut self, name: &str) -> std::io::Result<Box<dyn Write + '_>> {
        Ok(Box::new(BufWriter::with_capacity(1 << 20, self.images.create_file(name)?)))
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;
    use crate::fake;

    #[test]
    fn writes_through_a_temporary_directory() {
        let parent = tempfile::tempdir().unwrap();
        let dir = parent.path().join("img");
        let report = export_criu(&fake::sample(), &dir).unwrap();
        let mut names: Vec<_> =
            fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
        names.sort();
        let mut expected: Vec<_> = report.images.iter().map(|(n, _)| n.clone()).collect();
        expected.sort();
        assert_eq!(names, expected);
        for (name, bytes) in &report.images {
            assert_eq!(fs::metadata(dir.join(name)).unwrap().len(), *bytes, "{name}");
        }
        let left: Vec<_> = fs::read_dir(parent.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(left, ["img"]);
        // The process's memory: for the exporter's eyes only, as `criu dump` leaves it.
        let mode = |p: &Path| fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode(&dir), 0o700);
        for (name, _) in &report.images {
            assert_eq!(mode(&dir.join(name)), 0o600, "{name}");
        }
    }

    #[test]
    fn failure_leaves_nothing() {
        let parent = tempfile::tempdir().unwrap();
        let dir = parent.path().join("img");
        let mut source = fake::sample();
        source.meta.files[0].kind = sdt_store::FileKind::Socket;
        source.meta.files[0].target = "socket:[77]".into();
        let err = export_criu(&source, &dir).unwrap_err();
        assert_eq!(err.to_string(), "fd 0 (socket:[77]): a socket, which CRIU images here cannot express");
        assert_eq!(fs::read_dir(parent.path()).unwrap().count(), 0);
    }

    #[test]
    fn refuses_a_directory_with_files() {
        let parent = tempfile::tempdir().unwrap();
        fs::write(parent.path().join("old.img"), b"x").unwrap();
        let err = export_criu(&fake::sample(), parent.path()).unwrap_err();
        assert!(matches!(err, Error::NotEmpty { .. }), "{err}");
        // An empty directory is fine: it is replaced.
        let empty = parent.path().join("empty");
        fs::create_dir(&empty).unwrap();
        export_criu(&fake::sample(), &empty).unwrap();
        assert!(empty.join("inventory.img").exists());
    }
}
