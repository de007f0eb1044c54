//! Writing a core file to a path: the only module of this crate that does file I/O.

use std::fs::{self, File};
use std::io::BufWriter;
use std::path::{Path, PathBuf};

use crate::Error;
use crate::core::{CoreReport, CoreSource, write_core};

/// Writes the core file of `source` (usually an [`sdt_store::Snapshot`]) to `path`. It is
/// written as `path.tmp` and renamed when complete, so `path` never holds a partial core;
/// on failure `path.tmp` is removed.
pub fn export_core(source: &impl CoreSource, path: &Path) -> Result<CoreReport, Error> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    let result = write_file(source, &tmp).and_then(|report| {
        fs::rename(&tmp, path).map_err(|source| Error::File { path: path.to_owned(), source })?;
        Ok(report)
    });
    if result.is_err() {
        // Best effort: the error being returned says what went wrong.
        let _ = fs::remove_file(&tmp);
    }
    result
}

fn write_file(source: &impl CoreSource, path: &Path) -> Result<CoreReport, Error> {
    let file_error = |source| Error::File { path: path.to_owned(), source };
    let file = File::create(path).map_err(file_error)?;
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
    use super::*;
    use crate::fake;

    #[test]
    fn writes_through_a_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("S1.core");
        let report = export_core(&fake::sample(), &path).unwrap();
        assert_eq!(report.threads, 2);
        assert_eq!(report.mappings, 4);
        assert_eq!(fs::metadata(&path).unwrap().len(), report.bytes);
        let names: Vec<_> = fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, ["S1.core"]);
    }

    #[test]
    fn failure_leaves_no_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("S1.core");
        let mut source = fake::sample();
        source.changed_file = Some(fake::EXE.into());
        assert!(matches!(export_core(&source, &path), Err(Error::Store { .. })));
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn unwritable_path_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("missing").join("S1.core");
        let err = export_core(&fake::sample(), &path).unwrap_err();
        let Error::File { path: named, .. } = &err else { panic!("{err:?}") };
        assert_eq!(*named, dir.path().join("missing").join("S1.core.tmp"));
    }
}
