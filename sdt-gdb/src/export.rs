//! Writing a core file into a directory: the only module of this crate that does file I/O.
//!
//! The directory is held open ([`OutputDir`]) and the core goes into a new temporary file
//! beside its name, renamed over it when complete, removed on failure (see
//! [`sdt_store::OutputDir`]).

use std::ffi::OsStr;
use std::fs::File;
use std::io::BufWriter;
use std::path::Path;

use nix::errno::Errno;
use sdt_store::{OutputDir, SnapshotSource};

use crate::Error;
use crate::core::{CoreReport, write_core};

/// Writes the core file of `source` (usually an [`sdt_store::Snapshot`]) to `path`,
/// through a temporary file beside it (see the module doc), so `path` never holds a
/// partial core.
pub fn export_core(source: &impl SnapshotSource, path: &Path) -> Result<CoreReport, Error> {
    let Some(name) = path.file_name() else {
        return Err(Error::File { path: path.to_owned(), source: Errno::EISDIR.into() });
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
    dir.write_file(name, |file, path| write_file(source, file, path))
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
}
