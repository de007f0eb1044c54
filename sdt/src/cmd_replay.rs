//! `sdt replay`: an MPI job re-executed from its start, its message races going the way
//! they went.
//!
//! ```text
//! history + clocks ─ races::record ─> mpi-replay (rank 0's run directory, once)
//! mpirun -np N sdt run --replay mpi-replay -- PROG ARGS      (a new job in the store)
//!   each rank's library: recorded sends and receives on a shadow communicator
//! --until G: the replay's ranks capture G's arrival, and stop at their next MPI call
//!   (--stop-after, G's event counts); --check compares G, rank by rank
//! sdt rollback: --stop-after the cut's counts --stop-capture: the ranks' snapshots
//!   where they stop form the replay's global snapshot at the cut
//! ```
//!
//! The replay runs with Open MPI's `mpirun` (or the launcher `--mpirun` names, for
//! hosts), in the original's working directory.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, ExitStatus};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use sdt_daemon::human;
use sdt_gdb::arrivals::Arrival;
use sdt_gdb::vars::{Program, Tolerance};
use sdt_history::races::{self, Record};
use sdt_history::replay::{self as record_file, REPLAY_FILE};
use sdt_store::{Run, Store};

use crate::cli::{LauncherArgs, ReplayOpt};
use crate::cmd_compare::{differences, for_gdb};
use crate::cmd_diff::change_text;
use crate::cmd_gdb::ServerParts;
use crate::cmd_refine::split_exprs;
use crate::job::{self, GlobalSnapshot, Job};
use crate::select;

/// Largest replay record read back.
const MAX_RECORD_BYTES: u64 = 1 << 30;

pub fn replay(opt: ReplayOpt) -> Result<ExitCode> {
    let store = select::open_store(&opt.store)?;
    let original = Job::open(&store, &opt.run)?;
    let (path, record) = replay_record(&original)?;
    eprintln!("sdt: {}", record_summary(&original, &path, &record));
    if let Ok(history) = original.history() {
        let fixed = history.ranks.iter().flat_map(|rh| &rh.events).filter(|e| e.fixed_route).count();
        if fixed > 0 {
            eprintln!(
                "sdt: warning: {fixed} events of persistent requests or matched probes: what they took is not \
                 enforced in a replay (a recorded receive that goes another way is flagged diverged)"
            );
        }
    }
    if opt.dry_run {
        return Ok(ExitCode::SUCCESS);
    }
    let target = match &opt.until {
        Some(name) => Some(global_snapshot(&original, name)?),
        None => None,
    };
    // The ranks stop where G was taken: at their first MPI call after it. A G of the
    // replay's own stops (`sdt rollback`) is taken again the same way. Only a consistent
    // G can be stopped at: at another, a rank would wait for a message sent after it.
    let stop = target.as_ref().and_then(|g| {
        let after = g.counts()?;
        g.verdict.as_ref().is_some_and(|v| v.consistent).then(|| Stop { after, capture: is_cut(g.arrival) })
    });
    if let (Some(g), None) = (&target, &stop) {
        eprintln!(
            "sdt: {} is not a consistent cut ({}): the ranks capture it and run on to their end",
            g.name,
            job::verdict_text(g.verdict.as_ref())
        );
    }
    let generated;
    let config = match (&opt.config, &target) {
        (Some(config), _) => Some(config.as_path()),
        (None, Some(g)) if !is_cut(g.arrival) => {
            generated = arrival_config(g.arrival)?;
            Some(generated.path())
        }
        _ => None,
    };
    let replayed = run_again(&store, &original, &path, config, stop.as_ref(), &opt.launcher)?;
    let Some(g) = target else { return Ok(ExitCode::SUCCESS) };
    let Some(again) = replayed.global_snapshots(None)?.into_iter().find(|r| r.arrival == g.arrival) else {
        bail!("the replay did not reach {} ({}) in every rank", g.name, g.arrival);
    };
    eprintln!("sdt: every rank reached {} again: the replay's {}", g.name, again.name);
    if let Some(stop) = &stop {
        say_stops(&replayed, &stop.after);
    }
    if opt.check.is_empty() {
        return Ok(ExitCode::SUCCESS);
    }
    let gdb = ServerParts::new(&opt.store)?;
    let same = check(&original, &replayed, (&g, &again), &split_exprs(&opt.check), &gdb)?;
    Ok(if same { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

/// `job J: N of M receives recorded for replay (X bytes; every match: Y bytes in this
/// encoding, Z bytes as fixed entries)`.
pub fn record_summary(job: &Job, path: &Path, record: &Record) -> String {
    let every = record.receives * u64::from(record_file::ENTRY_SIZE);
    format!(
        "job {}: {} of {} receives recorded for replay{} ({} bytes; every match: {}{every} bytes as fixed entries)",
        job.id,
        record.receives_enforced(),
        record.receives,
        match record.enforced.len() - record.receives_enforced() {
            0 => String::new(),
            probes => format!(", and {probes} wildcard probes"),
        },
        std::fs::metadata(path).map(|m| m.len()).unwrap_or_default(),
        record.every_match_bytes.map_or(String::new(), |b| format!("{b} bytes in this encoding, ")),
    )
}

/// The job's replay record, read from rank 0's run directory, or computed from the
/// history and written there when it is missing.
pub fn replay_record(job: &Job) -> Result<(PathBuf, Record)> {
    let Some((0, run)) = job.ranks.first() else { bail!("job {} has no rank 0 in the store", job.id) };
    let path = run.dir().join(REPLAY_FILE);
    if let Some(bytes) = run.read_small_file(REPLAY_FILE, MAX_RECORD_BYTES)? {
        match record_file::read(&bytes) {
            Ok((record, ranks)) if ranks == job.size => return Ok((path, record)),
            Ok((_, ranks)) => log::warn!("{}: written for {ranks} ranks; written again", path.display()),
            Err(e) => log::warn!("{}: {e}; written again", path.display()),
        }
    }
    let record = computed_record(job)?;
    run.replace_small_file(REPLAY_FILE, &record_file::write(&record, job.size))
        .with_context(|| format!("writing the replay record {}", path.display()))?;
    Ok((path, record))
}

/// Writes the job's replay record into rank 0's run directory unless it has one: the
/// record, if this call wrote it (of ranks ending together, one does).
pub fn write_new_record(job: &Job) -> Result<Option<(PathBuf, Record)>> {
    let Some((0, run)) = job.ranks.first() else { bail!("job {} has no rank 0 in the store", job.id) };
    let path = run.dir().join(REPLAY_FILE);
    if std::fs::symlink_metadata(&path).is_ok() {
        return Ok(None);
    }
    let record = computed_record(job)?;
    let written = run
        .create_small_file(REPLAY_FILE, &record_file::write(&record, job.size))
        .with_context(|| format!("writing the replay record {}", path.display()))?;
    Ok(written.then_some((path, record)))
}

/// The replay record of `job`, computed from its history.
fn computed_record(job: &Job) -> Result<Record> {
    let (history, clocks) = job::history_with_clocks(job)?;
    if let Some((rank, e)) =
        history.ranks.iter().find_map(|rh| rh.blocked.as_ref().map(|b| (rh.rank, b.kind)))
    {
        log::warn!("rank {rank} ended inside {}: the replay record covers what it recorded", e.name());
    }
    Ok(races::record(&history, &clocks))
}

/// The global snapshot `name` of `job`, checked against its history where it reads.
fn global_snapshot(job: &Job, name: &str) -> Result<GlobalSnapshot> {
    let checked = job::history_with_clocks(job).ok();
    let all = job.global_snapshots(checked.as_ref().map(|(h, c)| (h, c)))?;
    let known: Vec<&str> = all.iter().map(|g| g.name.as_str()).collect();
    let listed = known.join(", ");
    all.into_iter()
        .find(|g| g.name.eq_ignore_ascii_case(name))
        .with_context(|| format!("job {} has no global snapshot {name} (it has: {listed})", job.id))
}

/// Where every rank of a replay stops: after `after[rank]` events; with `capture`, each
/// takes a snapshot there.
pub struct Stop {
    /// Each rank's events before its stop.
    pub after: Vec<u64>,
    /// Whether the ranks trap for a snapshot where they stop.
    pub capture: bool,
}

/// Whether `arrival` is the breakpoint of SDT's own that ranks stopped at a cut trap with.
pub fn is_cut(arrival: Arrival) -> bool {
    (arrival.class, arrival.id) == (sdt_mpi::CUT_CLASS, sdt_mpi::CUT_ID)
}

/// Replays `job` with every rank stopping at `cut` (each rank's events before it) and
/// taking a snapshot there; the replay's job and the global snapshot of those stops.
pub fn replay_to_cut(
    store: &Store,
    job: &Job,
    cut: &[u64],
    launcher: &LauncherArgs,
) -> Result<(Job, GlobalSnapshot)> {
    let (path, _) = replay_record(job)?;
    let stop = Stop { after: cut.to_vec(), capture: true };
    let replayed = run_again(store, job, &path, None, Some(&stop), launcher)?;
    let (history, clocks) = job::history_with_clocks(&replayed)?;
    let found = replayed.global_snapshots(Some((&history, &clocks)))?.into_iter().find(|g| is_cut(g.arrival));
    let Some(g) = found else {
        bail!("the replay's ranks did not all stop at the cut (`sdt ls --run {}`)", replayed.ranks[0].1.id());
    };
    say_stops(&replayed, cut);
    Ok((replayed, g))
}

/// Says where each rank of `replayed` stopped against where it was to stop (`after`):
/// a call that records several events at once (`MPI_Waitall`) is not split.
fn say_stops(replayed: &Job, after: &[u64]) {
    let Ok(history) = replayed.history() else { return };
    for (rank, rh) in history.ranks.iter().enumerate() {
        let (stopped, wanted) = (rh.events.len() as u64, after.get(rank).copied().unwrap_or(0).max(1));
        if stopped > wanted {
            eprintln!(
                "sdt: rank {rank} stopped after {stopped} events, not {wanted}: its call at event {rank}:{} \
                 records several at once, and a rank stops only between calls",
                wanted.saturating_sub(1)
            );
        }
    }
}

/// A capture config (a temporary file) that captures only `arrival`.
fn arrival_config(Arrival { level, class, id, hit }: Arrival) -> Result<tempfile::NamedTempFile> {
    let mut file = tempfile::Builder::new().prefix("sdt-replay-").suffix(".toml").tempfile()?;
    let text = format!("max_level = {level}\nclasses = [{class}]\nids = [{id}]\nhits = [{hit}]\n");
    std::io::Write::write_all(&mut file, text.as_bytes())?;
    Ok(file)
}

/// Warns when the program of `run` (the first rank's) is no longer the one it ran, as its
/// first snapshot recorded it: a replay runs the program as it is now.
fn warn_if_changed(run: &Run) {
    let Ok(snap) = run.open_snapshot_seq(0) else { return };
    let exe = &snap.meta().process.exe;
    let Some(f) = snap.meta().mapped_file(exe) else { return };
    if let Err(e) = snap.check_file_in_place(f) {
        eprintln!(
            "sdt: warning: {}: the replay runs the program as it is now, whose races may not go the recorded way",
            human::error_chain(&e)
        );
    }
}

/// Runs the job again under `mpirun`, each rank under `sdt run --replay` (stopping at
/// `stop`); the replay's job.
fn run_again(
    store: &Store,
    job: &Job,
    record: &Path,
    config: Option<&Path>,
    stop: Option<&Stop>,
    launcher: &LauncherArgs,
) -> Result<Job> {
    let (mpirun, mpirun_args) = (launcher.mpirun.as_path(), &launcher.mpirun_args);
    let info = job.ranks[0].1.info();
    let sdt = std::env::current_exe().context("finding this sdt")?;
    // A launcher named by a path runs from the job's working directory: made absolute here.
    let mpirun = match mpirun.components().count() > 1 {
        true => std::fs::canonicalize(mpirun).with_context(|| format!("--mpirun {}", mpirun.display()))?,
        false => mpirun.to_owned(),
    };
    warn_if_changed(&job.ranks[0].1);
    let mut cmd = Command::new(&mpirun);
    // Open MPI refuses root without these, and one host may have fewer cores than ranks.
    cmd.env("OMPI_ALLOW_RUN_AS_ROOT", "1").env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
    cmd.arg("--oversubscribe").args(mpirun_args).args(["-np", &job.size.to_string()]);
    cmd.arg(&sdt).args(["run", "-q", "--store"]).arg(store.root()).arg("--replay").arg(record);
    if let Some(config) = config {
        cmd.arg("--config").arg(config);
    }
    if let Some(stop) = stop {
        let after: Vec<String> = stop.after.iter().map(u64::to_string).collect();
        cmd.arg("--stop-after").arg(after.join(","));
        if stop.capture {
            cmd.arg("--stop-capture");
        }
    }
    cmd.arg("--").args(&info.command).current_dir(&info.cwd).env("SDT_STORE", store.root());
    let allowed = time_allowed(job, launcher);
    let mut child = cmd.spawn().with_context(|| {
        format!("running {} (is Open MPI installed? apt-get install openmpi-bin)", mpirun.display())
    })?;
    let Some(status) = wait_within(&mut child, allowed)? else {
        // mpirun ends its ranks with SIGTERM, at which each `sdt run` takes a snapshot.
        log::info!("the replay is past its time: sending mpirun SIGTERM");
        kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM).ok();
        if wait_within(&mut child, Some(LAUNCHER_GRACE))?.is_none() {
            child.kill().ok();
            child.wait().ok();
        }
        let allowed = human::duration_ns(allowed.map_or(0, |a| a.as_nanos() as u64));
        let job = replayed_job(store, job).ok();
        let after = job.map_or_else(String::new, |j| {
            let run = j.ranks[0].1.id();
            format!(
                ": each rank's snapshot at the SIGTERM shows where it was (`sdt ls --run {run}`), and \
                 `sdt check --run {run}` what it waited for"
            )
        });
        bail!("the replay had not ended after {allowed} (--timeout sets the time) and was stopped{after}");
    };
    if !status.success() {
        log::warn!("the replayed job ended with {status}");
    }
    let replayed = replayed_job(store, job)?;
    eprintln!("sdt: the replay is job {} (`sdt ls --run {}`)", replayed.id, replayed.ranks[0].1.id());
    Ok(replayed)
}

/// How long mpirun has to end its ranks once told to.
const LAUNCHER_GRACE: Duration = Duration::from_secs(30);

/// How long a replay of `job` may run (`None`: no limit), as [`sdt_refine::time_limit`]
/// gives it for the recorded job's time from `MPI_Init` to its last event.
fn time_allowed(job: &Job, launcher: &LauncherArgs) -> Option<Duration> {
    let last = |h: &sdt_history::History| {
        h.ranks.iter().filter_map(|r| r.events.last()).map(|e| u64::from(e.time_us)).max()
    };
    let took_us = match launcher.timeout {
        Some(_) => 0, // --timeout given: the history is not read
        None => job.history().ok().as_ref().and_then(last).unwrap_or(0),
    };
    sdt_refine::time_limit(launcher.timeout, Duration::from_micros(took_us))
}

/// Waits for `child` to end, at most `limit` (`None`: for good); its status, or `None`
/// if it is still running.
fn wait_within(child: &mut Child, limit: Option<Duration>) -> Result<Option<ExitStatus>> {
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().context("waiting for the launcher")? {
            return Ok(Some(status));
        }
        if limit.is_some_and(|limit| started.elapsed() >= limit) {
            return Ok(None);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The job a replay of `original` left in `store`: the latest, if it is another.
fn replayed_job(store: &Store, original: &Job) -> Result<Job> {
    match store.latest_job()? {
        Some(member) if member.id != original.id => {
            Job::of(store, store.rank_run(&member.id, 0)?)?.context("the replay's runs are not a job")
        }
        _ => bail!("the replay left no new job in the store"),
    }
}

/// The run of `rank` in `job`.
fn rank_run(job: &Job, rank: u32) -> Result<&sdt_store::Run> {
    let found = job.ranks.iter().find(|(r, _)| *r == rank);
    found.map(|(_, run)| run).with_context(|| format!("rank {rank} of job {} has no run", job.id))
}

/// Compares `exprs` at `g` of `original` and `again` of `replayed`, rank by rank (gdb's
/// through `gdb`); true when they are equal everywhere.
fn check(
    original: &Job,
    replayed: &Job,
    (g, again): (&GlobalSnapshot, &GlobalSnapshot),
    exprs: &[String],
    gdb: &ServerParts,
) -> Result<bool> {
    let tol = Tolerance { rtol: 0.0, atol: 0.0 };
    let mut program = None;
    let mut same = true;
    for (before, after) in g.members.iter().zip(&again.members) {
        let rank = before.0;
        let (a_run, b_run) = (rank_run(original, rank)?, rank_run(replayed, rank)?);
        let (a, b) = (a_run.open_snapshot(&before.1)?, b_run.open_snapshot(&after.1)?);
        let program = match &mut program {
            Some(p) => p,
            None => program.insert(Program::load(&a).context("reading the program's variables")?),
        };
        let gdb_exprs = for_gdb(program, exprs);
        let (old, new) = match gdb_exprs.is_empty() {
            true => (Vec::new(), Vec::new()),
            false => (gdb.evaluate(a_run, &a, &gdb_exprs)?, gdb.evaluate(b_run, &b, &gdb_exprs)?),
        };
        let changes = differences(program, (&a, &b), exprs, &tol, (&old, &new))?;
        if changes.is_empty() {
            println!("rank {rank}: {} equal at {} ({} and {})", exprs.join(", "), g.name, before.1, after.1);
        } else {
            same = false;
            println!(
                "rank {rank}: differs at {} ({} and {}); old: original, new: replay",
                g.name, before.1, after.1
            );
            for c in &changes {
                println!("  {}", change_text(c));
            }
        }
    }
    Ok(same)
}
