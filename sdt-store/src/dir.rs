//! The store directory: runs, their `run.json`, the snapshot files, the `latest` link.
//! This module and `fileref` (the files that mappings refer to) are the only places that
//! touch files.

use std::fmt;
use std::fs::{self, File};
use std::io::{self, BufWriter, ErrorKind, Write};
use std::path::{Path, PathBuf};

use memmap2::Mmap;
use serde::{Deserialize, Serialize};

use crate::reader::Snapshot;
use crate::writer::RunWriter;
use crate::{Error, Result};

/// The directory of runs inside the store.
const RUNS_DIR: &str = "runs";
/// A run's description inside its directory.
const RUN_INFO: &str = "run.json";
/// The symlink to the newest run.
const LATEST: &str = "latest";
/// Suffix of a snapshot file.
const SNAP_SUFFIX: &str = ".snap";
/// Suffix added to a snapshot file while it is written.
const INCOMPLETE_SUFFIX: &str = ".incomplete";

/// A directory of runs (`./.sdt` by default).
#[derive(Debug, Clone)]
pub struct Store {
    root: PathBuf,
}

/// A run's id: its number in the store, from 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct RunId(pub u32);

impl fmt::Display for RunId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// What a run was, kept in its `run.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunInfo {
    /// The run's id (set by [`Store::create_run`]).
    pub id: RunId,
    /// The program and its arguments.
    pub command: Vec<String>,
    /// Working directory of the program.
    pub cwd: String,
    /// Wall-clock start, nanoseconds since the Unix epoch.
    pub started_wall_ns: i64,
    /// Pid of the `sdt` process that captured it.
    pub sdt_pid: u32,
    /// The capture config as given (TOML text; empty for none).
    pub config: String,
    /// How the run ended, or that it is still running.
    pub status: RunStatus,
    /// For a refinement: the run and the two snapshots it refines between.
    #[serde(default)]
    pub parent: Option<Refinement>,
}

/// Where a refinement run comes from: the process of snapshot `from` of run `run`,
/// resumed (until it reached the breakpoint of snapshot `to`, if there is one).
///
/// Its snapshots are named after `from`: `S1.0`, `S1.1`, …; the one taken at `to`'s
/// breakpoint is `S2.new`. A refinement of a refinement nests: `S1.0.0`, `S1.1.new`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Refinement {
    /// The run refined.
    pub run: RunId,
    /// The snapshot resumed.
    pub from: String,
    /// The snapshot whose breakpoint ends the refinement.
    pub to: Option<String>,
    /// The seq of the snapshot taken at `to`'s breakpoint, once it was.
    #[serde(default)]
    pub reached: Option<u32>,
}

impl RunInfo {
    /// The name of snapshot `seq` of this run: `S3`; in a refinement `S1.3`, or `S2.new`
    /// for the one at its end.
    pub fn snapshot_name(&self, seq: u32) -> String {
        match &self.parent {
            None => snapshot_name(seq),
            Some(Refinement { to: Some(to), reached: Some(end), .. }) if *end == seq => format!("{to}.new"),
            Some(p) => format!("{}.{seq}", p.from),
        }
    }

    /// The seq of the snapshot called `name` in this run, if the name fits the run.
    pub fn snapshot_seq(&self, name: &str) -> Option<u32> {
        match &self.parent {
            None => parse_snapshot_name(name),
            Some(p) if p.to.is_some() && name.strip_suffix(".new") == p.to.as_deref() => p.reached,
            Some(p) => parse_number(name.strip_prefix(p.from.as_str())?.strip_prefix('.')?),
        }
    }
}

/// How a run ended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum RunStatus {
    /// Still capturing — or `sdt` died without saying (check `sdt_pid`).
    Running,
    /// The program exited with this code.
    Exited {
        /// Exit code.
        code: i32,
    },
    /// The program was killed by this signal.
    Signaled {
        /// Signal number.
        signal: i32,
    },
    /// `sdt` ended the program once the run had what it was for (a refinement that
    /// reached its end).
    Stopped {
        /// Why.
        reason: String,
    },
    /// Capture stopped early for this reason.
    Failed {
        /// Why.
        message: String,
    },
}

/// A snapshot file in a run, complete or not.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnapshotEntry {
    /// Its name (see [`RunInfo::snapshot_name`]).
    pub name: String,
    /// Position in the run.
    pub seq: u32,
    /// The file.
    pub path: PathBuf,
    /// False for a `.incomplete` file.
    pub complete: bool,
    /// Size of the file in bytes.
    pub file_bytes: u64,
}

/// An open run, for reading.
#[derive(Debug)]
pub struct Run {
    dir: PathBuf,
    info: RunInfo,
}

impl Store {
    /// Opens an existing store; [`Error::NoStore`] if `root` does not exist. A path that
    /// exists but holds no runs is an empty store.
    pub fn open(root: &Path) -> Result<Store> {
        match root.try_exists() {
            Ok(true) => Ok(Store { root: root.to_owned() }),
            Ok(false) => Err(Error::NoStore { path: root.to_owned() }),
            Err(e) => Err(io_error(root, e)),
        }
    }

    /// Opens the store at `root`, creating the directory if needed.
    pub fn open_or_create(root: &Path) -> Result<Store> {
        fs::create_dir_all(root).map_err(|e| io_error(root, e))?;
        Ok(Store { root: root.to_owned() })
    }

    /// The store's directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    fn run_dir(&self, id: RunId) -> PathBuf {
        self.root.join(RUNS_DIR).join(id.to_string())
    }

    /// The runs in the store, oldest first: the numbered directories under `runs/`.
    pub fn run_ids(&self) -> Result<Vec<RunId>> {
        let dir = self.root.join(RUNS_DIR);
        let entries = match fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::NotADirectory) => {
                return Ok(Vec::new());
            }
            Err(e) => return Err(io_error(&dir, e)),
        };
        let mut ids = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| io_error(&dir, e))?;
            let Some(id) = entry.file_name().to_str().and_then(parse_number) else {
                continue;
            };
            if entry.file_type().map_err(|e| io_error(&entry.path(), e))?.is_dir() {
                ids.push(RunId(id));
            }
        }
        ids.sort_unstable();
        Ok(ids)
    }

    /// The newest run (the highest id; the `latest` link is only for people and
    /// shells); [`Error::EmptyStore`] if there is none.
    pub fn latest_run(&self) -> Result<RunId> {
        self.run_ids()?.last().copied().ok_or_else(|| Error::EmptyStore { path: self.root.clone() })
    }

    /// Opens a run; [`Error::NoSuchRun`] if it does not exist.
    pub fn open_run(&self, id: &RunId) -> Result<Run> {
        let dir = self.run_dir(*id);
        if !dir.is_dir() {
            return Err(Error::NoSuchRun {
                id: id.to_string(),
                store: self.root.clone(),
                available: list_or_none(self.run_ids()?.iter().map(RunId::to_string)),
            });
        }
        let path = dir.join(RUN_INFO);
        let json = fs::read(&path).map_err(|e| io_error(&path, e))?;
        let mut info: RunInfo = serde_json::from_slice(&json)
            .map_err(|e| Error::BadRunInfo { path: path.clone(), detail: e.to_string() })?;
        crate::names::check_run_info(&info)
            .map_err(|detail| Error::BadRunInfo { path: path.clone(), detail })?;
        // The directory's name is the id; a copied or renamed run keeps working.
        info.id = *id;
        Ok(Run { dir, info })
    }

    /// Starts a new run: allocates the next id (overriding `info.id`), writes its
    /// `run.json` and points `latest` at it. Concurrent callers get distinct ids.
    pub fn create_run(&self, info: RunInfo) -> Result<RunWriter> {
        let runs = self.root.join(RUNS_DIR);
        fs::create_dir_all(&runs).map_err(|e| io_error(&runs, e))?;
        let mut id = self.run_ids()?.last().map_or(1, |last| last.0.saturating_add(1));
        // `create_dir` is the lock: whoever creates `runs/<id>` owns the id.
        let dir = loop {
            let dir = runs.join(id.to_string());
            match fs::create_dir(&dir) {
                Ok(()) => break dir,
                Err(e) if e.kind() == ErrorKind::AlreadyExists && id < u32::MAX => id += 1,
                Err(e) => return Err(io_error(&dir, e)),
            }
        };
        let info = RunInfo { id: RunId(id), ..info };
        write_run_info(&dir, &info)?;
        self.point_latest(info.id)?;
        RunWriter::new(dir, info)
    }

    /// The runs of the refinement tree that `id` belongs to: its root first, then every
    /// refinement below it, oldest first.
    pub fn tree(&self, id: RunId) -> Result<Vec<Run>> {
        let mut runs = Vec::new();
        for rid in self.run_ids()? {
            match self.open_run(&rid) {
                Ok(run) => runs.push(run),
                // A run being created has no run.json yet; a damaged one is reported
                // when it is opened by itself.
                Err(Error::Io { .. } | Error::BadRunInfo { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        let parent_of = |rid: RunId| runs.iter().find(|r| r.id() == rid)?.info.parent.as_ref().map(|p| p.run);
        let mut root = id;
        // Bounded: a hand-edited store could hold a cycle.
        for _ in 0..runs.len() {
            match parent_of(root) {
                Some(parent) if runs.iter().any(|r| r.id() == parent) => root = parent,
                _ => break,
            }
        }
        let mut in_tree = vec![root];
        for run in &runs {
            let mut at = run.id();
            for _ in 0..runs.len() {
                if in_tree.contains(&at) {
                    break;
                }
                match parent_of(at) {
                    Some(parent) => at = parent,
                    None => break,
                }
            }
            if in_tree.contains(&at) && !in_tree.contains(&run.id()) {
                in_tree.push(run.id());
            }
        }
        Ok(runs.into_iter().filter(|r| in_tree.contains(&r.id())).collect())
    }

    /// Opens snapshot `name` of run `id`, or of another run of its refinement tree (the
    /// newest refinement that has it): `S3` of a refinement's root, `S1.0` of a
    /// refinement, from wherever in the tree. Returns the run that holds it too.
    pub fn find_snapshot(&self, id: RunId, name: &str) -> Result<(Run, Snapshot)> {
        let here = self.open_run(&id)?;
        if here.info.snapshot_seq(name).is_some() {
            let snap = here.open_snapshot(name)?;
            return Ok((here, snap));
        }
        let tree = self.tree(id)?;
        match tree.into_iter().rev().find(|r| r.info.snapshot_seq(name).is_some()) {
            Some(run) => {
                let snap = run.open_snapshot(name)?;
                Ok((run, snap))
            }
            None => Err(here.no_such_snapshot(name)),
        }
    }

    /// Points the `latest` symlink at run `id`: a new link renamed over the old one.
    fn point_latest(&self, id: RunId) -> Result<()> {
        let tmp = self.root.join(format!(".{LATEST}.{id}.tmp"));
        // A link left by a crashed writer of the same id; absent almost always.
        let _ = fs::remove_file(&tmp);
        let target = Path::new(RUNS_DIR).join(id.to_string());
        std::os::unix::fs::symlink(&target, &tmp).map_err(|e| io_error(&tmp, e))?;
        let latest = self.root.join(LATEST);
        fs::rename(&tmp, &latest).map_err(|e| io_error(&latest, e))
    }
}

impl Run {
    /// The run's id.
    pub fn id(&self) -> RunId {
        self.info.id
    }

    /// What the run was.
    pub fn info(&self) -> &RunInfo {
        &self.info
    }

    /// The run's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The run's snapshot files, complete or not, in order (a complete file before an
    /// incomplete one of the same seq).
    pub fn snapshots(&self) -> Result<Vec<SnapshotEntry>> {
        let entries = fs::read_dir(&self.dir).map_err(|e| io_error(&self.dir, e))?;
        let mut snapshots = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| io_error(&self.dir, e))?;
            let Some((seq, complete)) = entry.file_name().to_str().and_then(parse_file_name) else {
                continue;
            };
            let path = entry.path();
            let file_bytes = match entry.metadata() {
                Ok(m) => m.len(),
                // Renamed from `.incomplete` by a writer since the listing: skip it.
                Err(e) if e.kind() == ErrorKind::NotFound => continue,
                Err(e) => return Err(io_error(&path, e)),
            };
            snapshots.push(SnapshotEntry {
                name: self.info.snapshot_name(seq),
                seq,
                path,
                complete,
                file_bytes,
            });
        }
        snapshots.sort_unstable_by_key(|s| (s.seq, !s.complete));
        Ok(snapshots)
    }

    /// Opens a snapshot by name (`S3`); [`Error::NoSuchSnapshot`] naming the snapshots
    /// that exist, [`Error::Incomplete`] for an unfinished one.
    pub fn open_snapshot(&self, name: &str) -> Result<Snapshot> {
        match self.info.snapshot_seq(name) {
            Some(seq) => self.open_snapshot_seq(seq),
            None => Err(self.no_such_snapshot(name)),
        }
    }

    /// Opens the snapshot at position `seq` of the run, as [`Run::open_snapshot`] does.
    pub fn open_snapshot_seq(&self, seq: u32) -> Result<Snapshot> {
        let path = snapshot_path(&self.dir, seq);
        match map_file(&path) {
            Ok(map) => Snapshot::open(self.dir.clone(), seq, self.info.snapshot_name(seq), map),
            Err(e) if e.kind() == ErrorKind::NotFound => {
                if incomplete_path(&self.dir, seq).exists() {
                    Err(Error::Incomplete { snapshot: self.info.snapshot_name(seq) })
                } else {
                    Err(self.no_such_snapshot(&self.info.snapshot_name(seq)))
                }
            }
            Err(e) => Err(io_error(&path, e)),
        }
    }

    fn no_such_snapshot(&self, name: &str) -> Error {
        let snapshots = match self.snapshots() {
            Ok(s) => s,
            Err(e) => return e,
        };
        Error::NoSuchSnapshot {
            name: name.to_owned(),
            run: self.info.id.to_string(),
            available: list_or_none(snapshots.into_iter().filter(|s| s.complete).map(|s| s.name)),
        }
    }
}

/// A snapshot file being written: `S<seq>.snap.incomplete` until [`finish`](Self::finish)
/// renames it.
pub(crate) struct SnapshotFile {
    out: BufWriter<File>,
    incomplete: PathBuf,
    path: PathBuf,
    len: u64,
}

impl SnapshotFile {
    /// Creates (or truncates, after a failed attempt) the `.incomplete` file of `seq`.
    pub(crate) fn create(dir: &Path, seq: u32) -> Result<SnapshotFile> {
        let incomplete = incomplete_path(dir, seq);
        let file = File::create(&incomplete).map_err(|e| io_error(&incomplete, e))?;
        Ok(SnapshotFile {
            out: BufWriter::with_capacity(256 * 1024, file),
            incomplete,
            path: snapshot_path(dir, seq),
            len: 0,
        })
    }

    /// Bytes written so far: the offset of the next write.
    pub(crate) fn len(&self) -> u64 {
        self.len
    }

    /// Appends `bytes`.
    pub(crate) fn write(&mut self, bytes: &[u8]) -> Result<()> {
        self.out.write_all(bytes).map_err(|e| io_error(&self.incomplete, e))?;
        self.len += bytes.len() as u64;
        Ok(())
    }

    /// Flushes and renames the file to its final name; returns its size.
    ///
    /// No `fsync`: a writer killed at any point leaves every renamed file whole (the
    /// kernel has the bytes), and waiting for the disk would make a fast-writing program
    /// wait too. After a power loss, a file whose blocks never reached the disk fails its
    /// checksums and reads as corrupt, never as wrong data.
    pub(crate) fn finish(self) -> Result<u64> {
        let incomplete = self.incomplete;
        self.out.into_inner().map_err(|e| io_error(&incomplete, e.into_error()))?;
        fs::rename(&incomplete, &self.path).map_err(|e| io_error(&self.path, e))?;
        Ok(self.len)
    }
}

/// Maps a snapshot file read-only.
#[allow(unsafe_code)]
pub(crate) fn map_file(path: &Path) -> io::Result<Mmap> {
    let file = File::open(path)?;
    // SAFETY: snapshot files are written under their `.incomplete` name and renamed into
    // place when complete; nothing writes to or truncates a file after that (a new
    // version would be a new file renamed over it), so the mapped bytes do not change
    // while the map lives.
    unsafe { Mmap::map(&file) }
}

/// Writes `run.json` of the run in `dir`: a temporary file renamed over the old one.
pub(crate) fn write_run_info(dir: &Path, info: &RunInfo) -> Result<()> {
    let path = dir.join(RUN_INFO);
    let tmp = dir.join(format!("{RUN_INFO}.tmp"));
    let mut json = serde_json::to_vec_pretty(info)
        .map_err(|e| Error::BadRunInfo { path: path.clone(), detail: e.to_string() })?;
    json.push(b'\n');
    let write = || -> io::Result<()> {
        let mut file = File::create(&tmp)?;
        file.write_all(&json)?;
        file.sync_data()
    };
    write().map_err(|e| io_error(&tmp, e))?;
    fs::rename(&tmp, &path).map_err(|e| io_error(&path, e))
}

/// The [`Error::Io`] for `path`.
pub(crate) fn io_error(path: &Path, source: io::Error) -> Error {
    Error::Io { path: path.to_owned(), source }
}

/// `S<seq>`.
pub(crate) fn snapshot_name(seq: u32) -> String {
    format!("S{seq}")
}

/// The complete file of snapshot `seq` in run directory `dir`.
pub(crate) fn snapshot_path(dir: &Path, seq: u32) -> PathBuf {
    dir.join(format!("S{seq}{SNAP_SUFFIX}"))
}

fn incomplete_path(dir: &Path, seq: u32) -> PathBuf {
    dir.join(format!("S{seq}{SNAP_SUFFIX}{INCOMPLETE_SUFFIX}"))
}

/// A decimal number written the way `to_string` writes it (no sign, no leading zeros).
fn parse_number(text: &str) -> Option<u32> {
    let n: u32 = text.parse().ok()?;
    (n.to_string() == text).then_some(n)
}

/// `S3` → 3.
fn parse_snapshot_name(name: &str) -> Option<u32> {
    parse_number(name.strip_prefix('S')?)
}

/// `S3.snap` → (3, complete), `S3.snap.incomplete` → (3, incomplete).
fn parse_file_name(file: &str) -> Option<(u32, bool)> {
    let (stem, complete) = match file.strip_suffix(INCOMPLETE_SUFFIX) {
        Some(stem) => (stem, false),
        None => (file, true),
    };
    Some((parse_snapshot_name(stem.strip_suffix(SNAP_SUFFIX)?)?, complete))
}

/// `a, b, c`, or `none`.
fn list_or_none(items: impl Iterator<Item = String>) -> String {
    let list = items.collect::<Vec<_>>().join(", ");
    if list.is_empty() { "none".to_owned() } else { list }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(parse_file_name("S0.snap"), Some((0, true)));
        assert_eq!(parse_file_name("S12.snap.incomplete"), Some((12, false)));
        for bad in [
            "S.snap",
            "S01.snap",
            "S1.snapx",
            "s1.snap",
            "S-1.snap",
            "S+1.snap",
            "S1",
            "run.json",
            "S1.snap.tmp",
        ] {
            assert_eq!(parse_file_name(bad), None, "{bad}");
        }
        assert_eq!(parse_snapshot_name("S4294967295"), Some(u32::MAX));
        assert_eq!(parse_snapshot_name("S4294967296"), None);
        assert_eq!(list_or_none(std::iter::empty()), "none");
        assert_eq!(list_or_none(["S0".to_owned(), "S1".to_owned()].into_iter()), "S0, S1");
    }
}
