//! The store directory: runs, their `run.json` and lock, the snapshot files, the
//! `latest` link. Files are reached through [`crate::fs`], never by following a link;
//! `fileref` opens the files that mappings refer to.

use std::collections::HashMap;
use std::fmt;
use std::fs::File;
use std::io::{self, BufWriter, ErrorKind, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use crate::fs::{self, Dir};
use crate::model::SnapshotMeta;
use crate::reader::{RawTables, Snapshot};
use crate::{Error, Result};

/// The directory of runs inside the store.
const RUNS_DIR: &str = "runs";
/// A run's description inside its directory.
const RUN_INFO: &str = "run.json";
/// The symlink to the newest run.
const LATEST: &str = "latest";
/// Suffix of a compacted snapshot file.
const SNAP_SUFFIX: &str = ".snap";
/// Suffix of a snapshot file as captured, before compaction.
const RAW_SUFFIX: &str = ".raw";
/// Suffix added to a compacted snapshot file while it is written.
const INCOMPLETE_SUFFIX: &str = ".incomplete";
/// The file whose lock says that an `sdt` process is capturing or compacting the run.
pub(crate) const LOCK: &str = "lock";
/// In `runs/`: the highest run id given so far, written when a run is removed, so that
/// no later run gets a removed run's id (and what named it then, a refinement or a note,
/// never names another run).
const LAST_ID: &str = ".last-id";
/// Prefix of a removed run's directory in `runs/` while its files are removed.
const REMOVING_PREFIX: &str = ".removing-";
/// Largest `run.json` read: it holds the command line and the capture config.
const MAX_RUN_INFO_BYTES: u64 = 16 << 20;

/// A directory of runs (`./.sdt` by default).
#[derive(Debug, Clone)]
pub struct Store {
    root: Arc<Dir>,
    /// Each run's [`RawTables`], shared by every [`Run`] opened here: going from one raw
    /// snapshot to the next resolves one step, whichever `Run` opens it.
    raw_tables: Arc<Mutex<HashMap<RunId, Arc<RawTables>>>>,
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
    /// For a rank of a message-passing job (`mpirun … sdt run -- ./prog`): which job and
    /// which rank, as the launcher told it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job: Option<JobMember>,
}

/// A run's place in a job: every rank of a job runs under its own `sdt run`, and the runs
/// that share `id` are the job's ranks.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobMember {
    /// The launcher's job id. Must match `[A-Za-z0-9._-]{1,64}` (see
    /// [`is_job_id`](crate::is_job_id)).
    pub id: String,
    /// The rank in the job's world. Must be < `size`.
    pub rank: u32,
    /// How many ranks the job has.
    pub size: u32,
    /// The host the rank ran on (its host name; shown, never used as a path).
    pub host: String,
}

/// Where a refinement run comes from: the process of snapshot `from` of run `run`,
/// resumed (until it reached the breakpoint of snapshot `to`, if there is one); or, for
/// an edit, snapshot `from` with values changed in gdb.
///
/// Its snapshots are named after `from`: `S1.0`, `S1.1`, …; the one taken at `to`'s
/// breakpoint is `S2.new`. A refinement of a refinement nests: `S1.0.0`, `S1.1.new`. An
/// edit's one snapshot is `S3.e1` (`S3.e2` for the next edit of `S3`).
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
    /// For an edit of `from`: its number among the edits of `from` (1, 2, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub edit: Option<u32>,
}

impl RunInfo {
    /// The name of snapshot `seq` of this run: `S3`; in a refinement `S1.3`, or `S2.new`
    /// for the one at its end; in an edit `S3.e1`.
    pub fn snapshot_name(&self, seq: u32) -> String {
        match &self.parent {
            None => snapshot_name(seq),
            Some(Refinement { edit: Some(n), from, .. }) if seq == 0 => format!("{from}.e{n}"),
            Some(Refinement { to: Some(to), reached: Some(end), .. }) if *end == seq => format!("{to}.new"),
            Some(p) => format!("{}.{seq}", p.from),
        }
    }

    /// The seq of the snapshot called `name` in this run, if the name fits the run.
    pub fn snapshot_seq(&self, name: &str) -> Option<u32> {
        match &self.parent {
            None => parse_snapshot_name(name),
            Some(p @ Refinement { edit: Some(n), .. }) => {
                (name.strip_prefix(p.from.as_str())?.strip_prefix(".e")? == n.to_string()).then_some(0)
            }
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
        /// Why `sdt` ended it, for the user.
        reason: String,
    },
    /// sdt attached to the running process (`sdt attach`) and let it go again: it ran on.
    Detached {
        /// Its process id.
        pid: i32,
    },
    /// Capture stopped early for this reason.
    Failed {
        /// What went wrong, for the user.
        message: String,
    },
}

/// A snapshot in a run's listing, readable or not.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnapshotEntry {
    /// Its name (see [`RunInfo::snapshot_name`]).
    pub name: String,
    /// Position in the run.
    pub seq: u32,
    /// The file that holds it.
    pub path: PathBuf,
    /// False for a snapshot whose capture or compaction did not finish, and that has no
    /// other form to read.
    pub complete: bool,
    /// True while it is stored as captured, before compaction (`S3.raw`).
    pub raw: bool,
    /// Size of the file in bytes.
    pub file_bytes: u64,
}

/// An open run, for reading.
#[derive(Clone, Debug)]
pub struct Run {
    dir: Arc<Dir>,
    info: RunInfo,
    /// The raw snapshot table resolved last, for opening the next one.
    raw_tables: Arc<RawTables>,
}

impl Store {
    /// Opens an existing store; [`Error::NoStore`] if `root` does not exist. A path that
    /// exists but holds no runs is an empty store.
    pub fn open(root: &Path) -> Result<Store> {
        match Dir::open(root) {
            Ok(dir) => Ok(Store { root: Arc::new(dir), raw_tables: Arc::default() }),
            Err(e) if e.kind() == ErrorKind::NotFound => Err(Error::NoStore { path: root.to_owned() }),
            Err(e) => Err(io_error(root, e)),
        }
    }

    /// Opens the store at `root`, creating the directory (0700) if needed.
    pub fn open_or_create(root: &Path) -> Result<Store> {
        let dir = Dir::open_or_create(root).map_err(|e| io_error(root, e))?;
        Ok(Store { root: Arc::new(dir), raw_tables: Arc::default() })
    }

    /// The store's directory.
    pub fn root(&self) -> &Path {
        self.root.path()
    }

    /// The permission bits of the store's directory if users other than its owner may
    /// read or enter it: snapshots hold the programs' memory, so a store should be 0700.
    pub fn exposed_mode(&self) -> Result<Option<u32>> {
        let mode = self.root.mode().map_err(|e| io_error(self.root(), e))?;
        Ok(fs::others_can_read(mode).then_some(mode))
    }

    /// Bytes free for an unprivileged user on the store's filesystem, if it says.
    pub fn free_bytes(&self) -> Option<u64> {
        self.root.free_bytes().ok().filter(|&free| free > 0)
    }

    fn runs_dir(&self) -> Result<Option<Dir>> {
        match self.root.open_dir(RUNS_DIR) {
            Ok(dir) => Ok(Some(dir)),
            Err(e) if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::NotADirectory) => Ok(None),
            Err(e) => Err(io_error(&self.root.join(RUNS_DIR), e)),
        }
    }

    /// The runs in the store, oldest first: the numbered directories under `runs/`.
    pub fn run_ids(&self) -> Result<Vec<RunId>> {
        let Some(runs) = self.runs_dir()? else { return Ok(Vec::new()) };
        let mut ids = Vec::new();
        for entry in runs.entries().map_err(|e| io_error(runs.path(), e))? {
            let (name, is_dir) = entry.map_err(|e| io_error(runs.path(), e))?;
            if let Some(id) = parse_number(&name).filter(|_| is_dir) {
                ids.push(RunId(id));
            }
        }
        ids.sort_unstable();
        Ok(ids)
    }

    /// The newest run that has a readable `run.json` (the highest such id; the `latest`
    /// link is only for people and shells): a run that failed to start, or that is being
    /// created, does not hide the ones before it. [`Error::EmptyStore`] if there is none.
    pub fn latest_run(&self) -> Result<RunId> {
        for id in self.run_ids()?.into_iter().rev() {
            match self.open_run(&id) {
                Ok(_) => return Ok(id),
                Err(Error::Io { .. } | Error::BadRunInfo { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        Err(Error::EmptyStore { path: self.root().to_owned() })
    }

    /// Opens a run; [`Error::NoSuchRun`] if it does not exist.
    pub fn open_run(&self, id: &RunId) -> Result<Run> {
        let runs = self.runs_dir()?;
        let dir = match runs.as_ref().map(|runs| runs.open_dir(&id.to_string())) {
            Some(Ok(dir)) => dir,
            Some(Err(e)) if !matches!(e.kind(), ErrorKind::NotFound | ErrorKind::NotADirectory) => {
                return Err(io_error(&self.root.join(RUNS_DIR).join(id.to_string()), e));
            }
            _ => {
                return Err(Error::NoSuchRun {
                    id: id.to_string(),
                    store: self.root().to_owned(),
                    available: list_or_none(self.run_ids()?.iter().map(RunId::to_string)),
                });
            }
        };
        let path = dir.join(RUN_INFO);
        let json = read_small(&dir, RUN_INFO, MAX_RUN_INFO_BYTES)?;
        let mut info: RunInfo = serde_json::from_slice(&json)
            .map_err(|e| Error::BadRunInfo { path: path.clone(), detail: e.to_string() })?;
        crate::names::check_run_info(&info)
            .map_err(|detail| Error::BadRunInfo { path: path.clone(), detail })?;
        // The directory's name is the id; a copied or renamed run keeps working.
        info.id = *id;
        let raw_tables = Arc::clone(
            self.raw_tables.lock().unwrap_or_else(std::sync::PoisonError::into_inner).entry(*id).or_default(),
        );
        Ok(Run { dir: Arc::new(dir), info, raw_tables })
    }

    /// Starts a new run: allocates the next id (overriding `info.id`), takes the run's
    /// lock, writes its `run.json` and points `latest` at the newest run. Concurrent
    /// callers get distinct ids.
    pub fn create_run(&self, info: RunInfo) -> Result<RunLog> {
        let runs = match self.runs_dir()? {
            Some(runs) => runs,
            None => match self.root.create_dir(RUNS_DIR) {
                Ok(runs) => runs,
                // Created by a concurrent `sdt run` meanwhile.
                Err(e) if e.kind() == ErrorKind::AlreadyExists => {
                    self.runs_dir()?.ok_or_else(|| io_error(&self.root.join(RUNS_DIR), e))?
                }
                Err(e) => return Err(io_error(&self.root.join(RUNS_DIR), e)),
            },
        };
        let highest = self.run_ids()?.last().map_or(0, |last| last.0).max(last_id(&runs));
        let mut id = highest.saturating_add(1);
        // `mkdir` is the lock on the id: whoever creates `runs/<id>` owns it.
        let dir = loop {
            match runs.create_dir(&id.to_string()) {
                Ok(dir) => break dir,
                Err(e) if e.kind() == ErrorKind::AlreadyExists && id < u32::MAX => id += 1,
                Err(e) => return Err(io_error(&runs.join(&id.to_string()), e)),
            }
        };
        let dir = Arc::new(dir);
        let info = RunInfo { id: RunId(id), ..info };
        let started = (|| {
            let lock = dir.create_file(LOCK).map_err(|e| io_error(&dir.join(LOCK), e))?;
            lock.try_lock().map_err(|e| io_error(&dir.join(LOCK), e.into()))?;
            write_run_info(&dir, &info)?;
            Ok(lock)
        })();
        let lock = match started {
            Ok(lock) => lock,
            Err(e) => {
                // A run that cannot start leaves nothing that looks like a run.
                for name in [RUN_INFO, LOCK] {
                    dir.remove_file(name).ok();
                }
                runs.remove_dir(&id.to_string()).ok();
                return Err(e);
            }
        };
        self.point_latest()?;
        Ok(RunLog::new(dir, info, lock))
    }

    /// The runs of the refinement tree that `id` belongs to: its root first, then every
    /// refinement below it, oldest first.
    pub fn tree(&self, id: RunId) -> Result<Vec<Run>> {
        let runs = self.readable_runs()?;
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

    /// The runs of job `job`, by rank: `(rank, run)` in rank order, the newest run of a
    /// rank where it appears more than once (a job id the launcher used again). Empty if
    /// no run belongs to it.
    pub fn job_ranks(&self, job: &str) -> Result<Vec<(u32, RunId)>> {
        let mut ranks: Vec<(u32, RunId)> = Vec::new();
        for run in self.readable_runs()? {
            if let Some(member) = run.info.job.as_ref().filter(|m| m.id == job) {
                // Runs come oldest first: a later one of the same rank replaces it.
                ranks.retain(|(rank, _)| *rank != member.rank);
                ranks.push((member.rank, run.id()));
            }
        }
        ranks.sort_unstable();
        Ok(ranks)
    }

    /// The job that run `id` belongs to: its own, or that of the run its refinement tree
    /// grew from (a refinement or an edit of a rank's snapshot is not a rank itself).
    pub fn job_of(&self, id: RunId) -> Result<Option<JobMember>> {
        let here = self.open_run(&id)?;
        if here.info.job.is_some() || here.info.parent.is_none() {
            return Ok(here.info.job);
        }
        Ok(self.tree(id)?.into_iter().next().and_then(|root| root.info.job))
    }

    /// The job of the newest run (see [`Store::job_of`]); `None` when that run is not part
    /// of one, or the store is empty.
    pub fn latest_job(&self) -> Result<Option<JobMember>> {
        match self.latest_run() {
            Ok(id) => self.job_of(id),
            Err(Error::EmptyStore { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The run of rank `rank` of job `job` (the newest, see [`Store::job_ranks`]);
    /// [`Error::NoSuchRank`] naming the ranks there are.
    pub fn rank_run(&self, job: &str, rank: u32) -> Result<RunId> {
        let ranks = self.job_ranks(job)?;
        match ranks.iter().find(|(r, _)| *r == rank) {
            Some((_, id)) => Ok(*id),
            None => Err(Error::NoSuchRank {
                job: job.to_owned(),
                rank,
                available: list_or_none(ranks.iter().map(|(r, _)| r.to_string())),
            }),
        }
    }

    /// Every run whose `run.json` reads, oldest first: a run being created has none yet,
    /// and a damaged one is reported when it is opened by itself.
    fn readable_runs(&self) -> Result<Vec<Run>> {
        let mut runs = Vec::new();
        for rid in self.run_ids()? {
            match self.open_run(&rid) {
                Ok(run) => runs.push(run),
                Err(Error::Io { .. } | Error::BadRunInfo { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(runs)
    }

    /// Removes run `id`, a run whose `run.json` cannot be read included; [`Error::RunHeld`]
    /// while an `sdt` process captures or compacts it. Its directory leaves `runs/` at once
    /// (renamed out of sight, so no reader finds half a run), then its files go; `latest`
    /// points at the newest run left. Its id is not given again. What an interrupted
    /// removal left is removed as well. Returns the bytes of disk freed.
    pub fn remove_run(&self, id: RunId) -> Result<u64> {
        let runs_path = self.root.join(RUNS_DIR);
        let no_such_run = || -> Result<Error> {
            Ok(Error::NoSuchRun {
                id: id.to_string(),
                store: self.root().to_owned(),
                available: list_or_none(self.run_ids()?.iter().map(RunId::to_string)),
            })
        };
        let Some(runs) = self.runs_dir()? else { return Err(no_such_run()?) };
        let dir = match runs.open_dir(&id.to_string()) {
            Ok(dir) => dir,
            Err(e) if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::NotADirectory) => {
                return Err(no_such_run()?);
            }
            Err(e) => return Err(io_error(&runs_path.join(id.to_string()), e)),
        };
        // Held until the run is gone: no `sdt compact` takes it meanwhile. A run whose
        // start failed may have no lock file.
        let _lock = match dir.open_file(LOCK) {
            Ok(lock) => match lock.try_lock() {
                Ok(()) => Some(lock),
                Err(std::fs::TryLockError::WouldBlock) => return Err(Error::RunHeld { id: id.to_string() }),
                Err(std::fs::TryLockError::Error(e)) => return Err(io_error(&dir.join(LOCK), e)),
            },
            Err(e) if e.kind() == ErrorKind::NotFound => None,
            Err(e) => return Err(io_error(&dir.join(LOCK), e)),
        };
        let highest = self.run_ids()?.last().map_or(0, |last| last.0).max(last_id(&runs)).max(id.0);
        let note_highest = || runs.replace_file(LAST_ID, highest.to_string().as_bytes());
        // First, so that no later run can get the id whatever becomes of this removal; on
        // a full disk, once the run's files have made room.
        let noted = note_highest();
        let hidden = format!("{REMOVING_PREFIX}{id}-{}", std::process::id());
        runs.rename_new(&id.to_string(), &hidden)
            .map_err(|e| io_error(&runs_path.join(id.to_string()), e))?;
        let mut freed = runs.remove_tree(&hidden).map_err(|e| io_error(&runs_path.join(&hidden), e))?;
        if noted.is_err() {
            note_highest().map_err(|e| io_error(&runs.join(LAST_ID), e))?;
        }
        // What an interrupted removal left (or one under way beside this one: whichever
        // removes a file first, removes it).
        for entry in runs.entries().map_err(|e| io_error(&runs_path, e))? {
            let (name, is_dir) = entry.map_err(|e| io_error(&runs_path, e))?;
            if is_dir && name.starts_with(REMOVING_PREFIX) {
                // One that cannot be removed now is left for the next removal.
                freed += runs.remove_tree(&name).unwrap_or(0);
            }
        }
        self.point_latest()?;
        Ok(freed)
    }

    /// Points the `latest` link at the newest run (or removes it when there is none):
    /// each `sdt run` does so after creating its own, so whichever of several concurrent
    /// ones finishes last leaves it right.
    fn point_latest(&self) -> Result<()> {
        // Another `sdt run` may point it at an older run it listed before ours existed:
        // whoever points last checks the newest run again afterwards. (Bounded: runs could
        // keep appearing.)
        let mut newest = self.run_ids()?.last().copied();
        for _ in 0..100 {
            let Some(id) = newest else {
                return match self.root.remove_file(LATEST) {
                    Err(e) if e.kind() != ErrorKind::NotFound => Err(io_error(&self.root.join(LATEST), e)),
                    _ => Ok(()),
                };
            };
            let target = Path::new(RUNS_DIR).join(id.to_string());
            self.root.point_link(LATEST, &target).map_err(|e| io_error(&self.root.join(LATEST), e))?;
            let now = self.run_ids()?.last().copied();
            if now == newest {
                break;
            }
            newest = now;
        }
        Ok(())
    }
}

/// A file made in the store before its run exists (the program that writes it is
/// launched first), under a temporary name in the store's directory, until
/// [`RunLog::adopt`] moves it into the run; dropped unadopted, it is removed.
#[derive(Debug)]
pub struct PendingFile {
    root: Arc<Dir>,
    name: String,
    file: File,
}

impl PendingFile {
    /// The open file.
    pub fn file(&self) -> &File {
        &self.file
    }
}

impl Drop for PendingFile {
    fn drop(&mut self) {
        if !self.name.is_empty() {
            self.root.remove_file(&self.name).ok();
        }
    }
}

impl Store {
    /// Creates an empty file (0600) for a run that does not exist yet: see [`PendingFile`].
    pub fn create_pending(&self, stem: &str) -> Result<PendingFile> {
        let (name, file) = self.root.create_temp(stem).map_err(|e| io_error(&self.root.join(stem), e))?;
        Ok(PendingFile { root: Arc::clone(&self.root), name, file })
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
        self.dir.path()
    }

    pub(crate) fn dir_handle(&self) -> &Arc<Dir> {
        &self.dir
    }

    /// The file `name` of the run's directory, whole, if it exists and holds at most
    /// `max_bytes` (more is an error: the run's files are untrusted).
    pub fn read_small_file(&self, name: &str, max_bytes: u64) -> Result<Option<Vec<u8>>> {
        match read_small(&self.dir, name, max_bytes) {
            Err(Error::Io { source, .. }) if source.kind() == ErrorKind::NotFound => Ok(None),
            other => other.map(Some),
        }
    }

    /// Writes `bytes` as the run's file `name`, replacing it whole (a file of its own,
    /// 0600, renamed over the old one: a link planted there is replaced, never followed).
    pub fn replace_small_file(&self, name: &str, bytes: &[u8]) -> Result<()> {
        self.dir.replace_file(name, bytes).map_err(|e| io_error(&self.dir.join(name), e))
    }

    /// Writes `bytes` as the run's new file `name` (0600) unless the run has one by that
    /// name already (a link included): whether this call wrote it. Of several processes
    /// writing the same file at once, exactly one does.
    pub fn create_small_file(&self, name: &str, bytes: &[u8]) -> Result<bool> {
        let error = |e| io_error(&self.dir.join(name), e);
        let (tmp, mut file) = self.dir.create_temp(name).map_err(error)?;
        let placed = file
            .write_all(bytes)
            .and_then(|()| file.sync_data())
            .and_then(|()| self.dir.rename_new(&tmp, name));
        match placed {
            Ok(()) => Ok(true),
            Err(e) => {
                self.dir.remove_file(&tmp).ok();
                match e.kind() {
                    ErrorKind::AlreadyExists => Ok(false),
                    _ => Err(error(e)),
                }
            }
        }
    }

    /// Only the metadata of snapshot `seq`, and whether it is still raw: what a listing
    /// needs, without the page table or caches that opening it builds.
    pub fn read_meta(&self, seq: u32) -> Result<(SnapshotMeta, bool)> {
        crate::reader::read_meta(&self.dir, seq, &self.info.snapshot_name(seq))
    }

    /// Whether an `sdt` process is capturing or compacting the run now. A run whose
    /// `run.json` still says `running` while nothing holds it was left by an `sdt` that
    /// died: its snapshots read as they are, every one whose number the program received
    /// included.
    pub fn is_held(&self) -> bool {
        match self.dir.open_file(LOCK) {
            Ok(lock) => matches!(lock.try_lock_shared(), Err(std::fs::TryLockError::WouldBlock)),
            // A run of an older sdt, without a lock: held if its sdt still runs.
            Err(_) => Path::new(&format!("/proc/{}", self.info.sdt_pid)).exists(),
        }
    }

    /// The device and inode of the run's lock file: how `/proc/locks` and a holder's
    /// `/proc/PID/fd` name it, to tell who holds the run.
    pub fn lock_file_id(&self) -> Result<(u64, u64)> {
        use std::os::unix::fs::MetadataExt;
        let lock = self.dir.open_file(LOCK).and_then(|f| f.metadata());
        let meta = lock.map_err(|e| io_error(&self.dir.join(LOCK), e))?;
        Ok((meta.dev(), meta.ino()))
    }

    /// The run's snapshots in order, each in the form readers take (compacted if it is,
    /// else as captured), without opening them. Listing costs a few bytes per snapshot;
    /// each entry is made as the iterator reaches it.
    pub fn snapshots(&self) -> Result<Snapshots<'_>> {
        let mut found: Vec<(u32, u8)> = Vec::new();
        for entry in self.dir.entries().map_err(|e| io_error(self.dir(), e))? {
            let (name, _) = entry.map_err(|e| io_error(self.dir(), e))?;
            if let Some((seq, form)) = parse_file_name(&name) {
                found.push((seq, form.bit()));
            }
        }
        found.sort_unstable();
        found.dedup_by(|later, first| {
            let same = later.0 == first.0;
            if same {
                first.1 |= later.1;
            }
            same
        });
        Ok(Snapshots { run: self, found: found.into_iter() })
    }

    /// Opens a snapshot by name (`S3`); [`Error::NoSuchSnapshot`] naming the snapshots
    /// that exist, [`Error::Incomplete`] for an unfinished one.
    pub fn open_snapshot(&self, name: &str) -> Result<Snapshot> {
        match self.info.snapshot_seq(name) {
            Some(seq) => self.open_snapshot_seq(seq),
            None => Err(self.no_such_snapshot(name)),
        }
    }

    /// Opens the snapshot at position `seq` of the run, as [`Run::open_snapshot`] does:
    /// compacted if it is, else as captured.
    pub fn open_snapshot_seq(&self, seq: u32) -> Result<Snapshot> {
        let name = self.info.snapshot_name(seq);
        match Snapshot::open(Arc::clone(&self.dir), seq, name.clone(), &self.raw_tables) {
            Err(Error::NoSuchSnapshot { .. }) => {
                if self.dir.open_file(&file_name(seq, Form::Incomplete)).is_ok() {
                    Err(Error::Incomplete { snapshot: name })
                } else {
                    Err(self.no_such_snapshot(&name))
                }
            }
            other => other,
        }
    }

    fn no_such_snapshot(&self, name: &str) -> Error {
        let snapshots = match self.snapshots() {
            Ok(s) => s,
            Err(e) => return e,
        };
        let names = snapshots.filter_map(|s| s.ok().filter(|s| s.complete).map(|s| s.name));
        Error::NoSuchSnapshot {
            name: name.to_owned(),
            run: self.info.id.to_string(),
            available: list_or_none(names.take(MAX_NAMES_LISTED)),
        }
    }
}

/// Most snapshot names an error lists.
const MAX_NAMES_LISTED: usize = 50;

/// The snapshots of a run, in order (from [`Run::snapshots`]).
#[derive(Debug)]
pub struct Snapshots<'a> {
    run: &'a Run,
    /// Each seq with the forms found for it ([`Form::bit`]s).
    found: std::vec::IntoIter<(u32, u8)>,
}

impl Snapshots<'_> {
    /// Snapshots not yet reached.
    pub fn len(&self) -> usize {
        self.found.len()
    }

    /// Whether every snapshot has been reached (or the run has none).
    pub fn is_empty(&self) -> bool {
        self.found.len() == 0
    }
}

impl Iterator for Snapshots<'_> {
    type Item = Result<SnapshotEntry>;

    fn next(&mut self) -> Option<Result<SnapshotEntry>> {
        let (seq, forms) = self.found.next()?;
        let dir = &self.run.dir;
        // Compaction may replace the raw file by the compacted one meanwhile: the
        // compacted form is looked for again after the raw one.
        let order = [Form::Compact, Form::Raw, Form::Compact, Form::Incomplete];
        for form in order.into_iter().filter(|f| forms & f.bit() != 0 || *f == Form::Compact) {
            let name = file_name(seq, form);
            match dir.open_file(&name).and_then(|f| f.metadata()) {
                Ok(meta) => {
                    return Some(Ok(SnapshotEntry {
                        name: self.run.info.snapshot_name(seq),
                        seq,
                        path: dir.join(&name),
                        complete: form != Form::Incomplete,
                        raw: form == Form::Raw,
                        file_bytes: meta.len(),
                    }));
                }
                Err(e) if e.kind() == ErrorKind::NotFound => {}
                Err(e) => return Some(Err(io_error(&dir.join(&name), e))),
            }
        }
        // Gone since the listing (a torn raw file removed): skip it.
        self.next()
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (0, Some(self.found.len()))
    }
}

/// The forms a snapshot's file takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Form {
    /// `S3.snap`: compacted (diffed and compressed).
    Compact,
    /// `S3.raw`: as captured, before compaction.
    Raw,
    /// `S3.snap.incomplete`: compaction under way, or interrupted.
    Incomplete,
}

impl Form {
    fn bit(self) -> u8 {
        match self {
            Form::Compact => 1,
            Form::Raw => 2,
            Form::Incomplete => 4,
        }
    }
}

/// The file name of snapshot `seq` in form `form`: `S3.snap`, `S3.raw`,
/// `S3.snap.incomplete`.
pub(crate) fn file_name(seq: u32, form: Form) -> String {
    match form {
        Form::Compact => format!("S{seq}{SNAP_SUFFIX}"),
        Form::Raw => format!("S{seq}{RAW_SUFFIX}"),
        Form::Incomplete => format!("S{seq}{SNAP_SUFFIX}{INCOMPLETE_SUFFIX}"),
    }
}

/// The capture side of a run being written: its directory, held under the run's lock
/// for as long as this lives, and its `run.json`.
#[derive(Debug)]
pub struct RunLog {
    run: Run,
    /// Held (`flock`) while this lives: readers see the run as being captured.
    _lock: File,
}

impl RunLog {
    fn new(dir: Arc<Dir>, info: RunInfo, lock: File) -> RunLog {
        RunLog { run: Run { dir, info, raw_tables: Arc::default() }, _lock: lock }
    }

    /// The run, as its `run.json` says.
    pub fn run(&self) -> &Run {
        &self.run
    }

    /// Records that the snapshot at the refinement's end breakpoint is `seq` (named
    /// `<to>.new` from now on).
    pub(crate) fn mark_reached(&mut self, seq: u32) -> Result<()> {
        if let Some(parent) = &mut self.run.info.parent {
            parent.reached = Some(seq);
            write_run_info(&self.run.dir, &self.run.info)?;
        }
        Ok(())
    }

    /// Moves `pending` into the run's directory as `name` (which must not exist), and
    /// returns its file.
    pub fn adopt(&self, mut pending: PendingFile, name: &str) -> Result<File> {
        let path = self.run.dir.join(name);
        pending.root.move_new(&pending.name, &self.run.dir, name).map_err(|e| io_error(&path, e))?;
        pending.name.clear();
        pending.file.try_clone().map_err(|e| io_error(&path, e))
    }

    /// Records how the run ended in its `run.json`, and lets go of the run.
    pub fn finish(mut self, status: RunStatus) -> Result<()> {
        self.run.info.status = status;
        write_run_info(&self.run.dir, &self.run.info)
    }
}

/// A compacted snapshot file being written: `S<seq>.snap.incomplete` until
/// [`finish`](Self::finish) renames it.
pub(crate) struct SnapshotFile {
    out: BufWriter<File>,
    dir: Arc<Dir>,
    seq: u32,
    len: u64,
}

impl SnapshotFile {
    /// Creates the `.incomplete` file of `seq`, replacing one a failed attempt left.
    pub(crate) fn create(dir: &Arc<Dir>, seq: u32) -> Result<SnapshotFile> {
        let name = file_name(seq, Form::Incomplete);
        let file = match dir.create_file(&name) {
            Err(e) if e.kind() == ErrorKind::AlreadyExists => {
                dir.remove_file(&name).and_then(|()| dir.create_file(&name))
            }
            other => other,
        }
        .map_err(|e| io_error(&dir.join(&name), e))?;
        Ok(SnapshotFile {
            out: BufWriter::with_capacity(256 * 1024, file),
            dir: Arc::clone(dir),
            seq,
            len: 0,
        })
    }

    fn path(&self) -> PathBuf {
        self.dir.join(&file_name(self.seq, Form::Incomplete))
    }

    /// Bytes written so far: the offset of the next write.
    pub(crate) fn len(&self) -> u64 {
        self.len
    }

    /// Appends `bytes`.
    pub(crate) fn write(&mut self, bytes: &[u8]) -> Result<()> {
        self.out.write_all(bytes).map_err(|e| io_error(&self.path(), e))?;
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
        let path = self.path();
        let SnapshotFile { out, dir, seq, len } = self;
        out.into_inner().map_err(|e| io_error(&path, e.into_error()))?;
        dir.rename(&file_name(seq, Form::Incomplete), &file_name(seq, Form::Compact))
            .map_err(|e| io_error(&path, e))?;
        Ok(len)
    }

    /// Removes the unfinished file (after an error).
    pub(crate) fn abandon(self) {
        self.dir.remove_file(&file_name(self.seq, Form::Incomplete)).ok();
    }
}

/// Reads the whole of the small file `name` in `dir`, refusing one over `max` bytes.
pub(crate) fn read_small(dir: &Dir, name: &str, max: u64) -> Result<Vec<u8>> {
    let path = dir.join(name);
    let file = dir.open_file(name).map_err(|e| io_error(&path, e))?;
    let len = file.metadata().map_err(|e| io_error(&path, e))?.len();
    if len > max {
        return Err(io_error(
            &path,
            io::Error::new(
                ErrorKind::InvalidData,
                format!("{len} bytes, more than the {max} such a file can hold"),
            ),
        ));
    }
    let mut bytes = Vec::with_capacity(len as usize);
    io::Read::read_to_end(&mut io::Read::take(&file, max + 1), &mut bytes).map_err(|e| io_error(&path, e))?;
    Ok(bytes)
}

/// Writes `run.json` of the run in `dir`: a temporary file renamed over the old one.
pub(crate) fn write_run_info(dir: &Dir, info: &RunInfo) -> Result<()> {
    let path = dir.join(RUN_INFO);
    let mut json = serde_json::to_vec_pretty(info)
        .map_err(|e| Error::BadRunInfo { path: path.clone(), detail: e.to_string() })?;
    json.push(b'\n');
    dir.replace_file(RUN_INFO, &json).map_err(|e| io_error(&path, e))
}

/// The [`Error::Io`] for `path`.
pub(crate) fn io_error(path: &Path, source: io::Error) -> Error {
    Error::Io { path: path.to_owned(), source }
}

/// `S<seq>`.
pub(crate) fn snapshot_name(seq: u32) -> String {
    format!("S{seq}")
}

/// The id in `runs/.last-id`, 0 where there is none (or it is not a number).
fn last_id(runs: &Dir) -> u32 {
    read_small(runs, LAST_ID, 16)
        .ok()
        .and_then(|b| parse_number(std::str::from_utf8(&b).ok()?.trim()))
        .unwrap_or(0)
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

/// `S3.snap`, `S3.raw`, `S3.snap.incomplete` → (3, its form).
fn parse_file_name(file: &str) -> Option<(u32, Form)> {
    let (stem, form) = if let Some(stem) = file.strip_suffix(INCOMPLETE_SUFFIX) {
        (stem.strip_suffix(SNAP_SUFFIX)?, Form::Incomplete)
    } else if let Some(stem) = file.strip_suffix(SNAP_SUFFIX) {
        (stem, Form::Compact)
    } else {
        (file.strip_suffix(RAW_SUFFIX)?, Form::Raw)
    };
    Some((parse_snapshot_name(stem)?, form))
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
        assert_eq!(parse_file_name("S0.snap"), Some((0, Form::Compact)));
        assert_eq!(parse_file_name("S12.snap.incomplete"), Some((12, Form::Incomplete)));
        assert_eq!(parse_file_name("S7.raw"), Some((7, Form::Raw)));
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
            "S1.raw.incomplete",
            ".spare-1.raw",
        ] {
            assert_eq!(parse_file_name(bad), None, "{bad}");
        }
        assert_eq!(parse_snapshot_name("S4294967295"), Some(u32::MAX));
        assert_eq!(parse_snapshot_name("S4294967296"), None);
        assert_eq!(list_or_none(std::iter::empty()), "none");
        assert_eq!(list_or_none(["S0".to_owned(), "S1".to_owned()].into_iter()), "S0, S1");
    }
}
