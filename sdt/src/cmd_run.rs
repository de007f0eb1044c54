//! `sdt run`: capture a program's snapshots.

use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use sdt_daemon::{
    CaptureConfig, MpiStop, ProgramExit, RunOptions, RunOutcome, SymbolBreak, Target, Tracking, human,
};
use sdt_gdb::blocked::Blocked;
use sdt_store::JobMember;

use crate::cli::{RunOpt, TrackingArg};
use crate::job::Job;
use crate::{cmd_compact, cmd_replay, launcher};

pub fn run(opt: RunOpt) -> Result<ExitCode> {
    let job = launcher::job(&opt.job)?;
    // The last rank of a job (not a replay's) to end says what its replay record pins.
    let says_record = job.is_some() && opt.replay.is_none() && !opt.quiet;
    let mpi_stop = mpi_stop(&opt.stop_after, opt.stop_capture, job.as_ref())?;
    if opt.stop_capture && !matches!(opt.backend, crate::cli::BackendArg::Ptrace) {
        // The rank traps with int3 for the capture, which only a tracer catches.
        bail!("--stop-capture needs --backend ptrace");
    }
    let mut config = capture_config(opt.config.as_deref(), opt.every)?;
    if mpi_stop.is_some_and(|s| s.capture) && opt.config.is_none() {
        // Only the cut: the program's own breakpoints pass nothing.
        config.filter.classes = Some(Vec::new());
    }
    let outcome = sdt_daemon::run(&RunOptions {
        target: Target::Launch(opt.command),
        store: opt.store.store.clone(),
        config,
        verify: opt.verify,
        wait_for_compaction: opt.wait_compaction,
        quiet: opt.quiet,
        tracking: match opt.tracking {
            TrackingArg::Auto => Tracking::Auto,
            TrackingArg::UffdWp => Tracking::UffdWp,
            TrackingArg::PageHash => Tracking::PageHash,
        },
        disk_budget: opt.disk_budget.map(|mb| mb << 20),
        backend: opt.backend.into(),
        breaks: opt.breaks.iter().map(|b| SymbolBreak::parse(b)).collect::<Result<_, _>>()?,
        job,
        mpi_history: !opt.no_mpi_history,
        mpi_replay: opt.replay,
        mpi_stop,
        signal_snapshots: !opt.no_signal_snapshot,
        time_limit: opt.timeout.filter(|t| !t.is_zero()),
    })?;
    conclude(&outcome, &opt.store.store, opt.quiet);
    if let Some(name) = outcome.at_signal.as_deref().filter(|_| !opt.quiet) {
        eprintln!("sdt: {name} is the program as the signal found it: `sdt gdb {name}`");
        say_why_it_hangs(&opt.store.store, outcome.run, name);
    }
    if let (ProgramExit::TimedOut, Some(limit)) = (outcome.exit, opt.timeout) {
        let then = outcome
            .at_deadline
            .as_deref()
            .map_or_else(String::new, |name| format!("; {name} is where it was then: `sdt gdb {name}`"));
        eprintln!(
            "sdt: the program was still running after {} (--timeout): it was stopped{then}",
            human::duration_ns(limit.as_nanos() as u64)
        );
        if let Some(name) = outcome.at_deadline.as_deref() {
            say_why_it_hangs(&opt.store.store, outcome.run, name);
        }
    }
    if says_record {
        say_job_record(&opt.store.store, outcome.run);
    }
    if !outcome.totals.lost.is_empty() {
        return Ok(ExitCode::from(LOST_SNAPSHOTS));
    }
    Ok(exit_code(outcome.exit, opt.quiet))
}

/// Says which threads of snapshot `name` (taken where a signal or `--timeout` stopped the
/// program) wait for each other, if any do, or that every thread waits for ever.
pub fn say_why_it_hangs(store: &Path, run: sdt_store::RunId, name: &str) {
    let findings = || -> Result<_> {
        let store = sdt_store::Store::open(store)?;
        let snap = store.open_run(&run)?.open_snapshot(name)?;
        Ok(Blocked::findings_of(&snap))
    };
    match findings() {
        Ok(findings) => {
            for (kind, finding) in findings {
                eprintln!("sdt: {kind} in {name}: {finding} (`sdt show {name}`)");
            }
        }
        Err(e) => log::warn!("cannot read what the threads of {name} wait for: {e:#}"),
    }
}

/// Once the last rank of a job ends: writes the job's replay record and says how many
/// of its receives it pins (the other ranks' runs have ended when this one's did last;
/// of ranks ending together, the one that writes the record says it).
fn say_job_record(store: &Path, run: sdt_store::RunId) {
    let summary = || -> Result<Option<String>> {
        let store = sdt_store::Store::open(store)?;
        let Some(job) = Job::of(&store, run)? else { return Ok(None) };
        let ended = |r: &sdt_store::Run| !matches!(r.info().status, sdt_store::RunStatus::Running);
        if job.ranks.len() != job.size as usize || !job.ranks.iter().all(|(_, r)| ended(r)) {
            return Ok(None);
        }
        let written = cmd_replay::write_new_record(&job)?;
        Ok(written.map(|(path, record)| cmd_replay::record_summary(&job, &path, &record)))
    };
    match summary() {
        Ok(Some(line)) => eprintln!("sdt: {line}"),
        Ok(None) => {}
        Err(e) => log::warn!("no replay record for the job: {e:#}"),
    }
}

/// This rank's stop from `--stop-after` (a count per rank) and `--stop-capture`.
fn mpi_stop(after: &[u64], capture: bool, job: Option<&JobMember>) -> Result<Option<MpiStop>> {
    if after.is_empty() {
        return Ok(None);
    }
    let job = job.context("--stop-after needs the rank from an MPI launcher's environment (mpirun)")?;
    if after.len() != job.size as usize {
        bail!("--stop-after gives {} counts for a job of {} ranks", after.len(), job.size);
    }
    // Every rank's MPI_Init is its first event: no rank stops before it.
    let after_events = after[job.rank as usize].max(1);
    Ok(Some(MpiStop { after_events, capture }))
}

/// `sdt run`'s exit code when the store could not take every snapshot the config asked
/// for, whatever the program's own (which the last line before it says).
pub const LOST_SNAPSHOTS: u8 = 125;

/// `sdt run`'s exit code when `--timeout` stopped the program (as timeout(1)'s).
const TIMED_OUT: u8 = 124;

/// The capture config from `path` (or the default), with `--every` on top.
pub fn capture_config(path: Option<&Path>, every: Option<u64>) -> Result<CaptureConfig> {
    let mut config = match path {
        Some(path) => CaptureConfig::load(path)?,
        None => CaptureConfig::default(),
    };
    if every.is_some() {
        config.every_ms = every;
    }
    Ok(config)
}

/// Where to find `libsdt.so.0` for a program that needs it: the `lib` folder beside the
/// `bin` this `sdt` runs from, where it holds the library (an install in a prefix; under
/// `/usr`, the loader's cache is out of date), or how to point the loader at one.
fn libsdt_so_hint() -> String {
    let exe = std::env::current_exe().ok();
    let prefix = exe.as_deref().and_then(|e| e.parent()?.parent());
    match prefix.map(|p| p.join("lib")).filter(|lib| lib.join("libsdt.so.0").exists()) {
        // A system folder the loader's cache should know: it was not brought up to date.
        Some(lib) if lib.starts_with("/usr") => format!(
            "Run `sudo ldconfig` (the loader's cache lacks {}), or run it with LD_LIBRARY_PATH={}",
            lib.join("libsdt.so.0").display(),
            lib.display()
        ),
        Some(lib) => format!(
            "Run it with LD_LIBRARY_PATH={0} (this sdt's own), or link it with -Wl,-rpath,{0}",
            lib.display()
        ),
        None => "Point LD_LIBRARY_PATH at the lib folder of the prefix SDT is installed in, or link the \
                 program with -Wl,-rpath there"
            .into(),
    }
}

/// Hands the snapshots the run left raw to a background `sdt compact`; says what went
/// wrong during the run, and unless `quiet` what it stored.
pub fn conclude(outcome: &RunOutcome, store: &Path, quiet: bool) {
    for problem in &outcome.problems {
        eprintln!("sdt: warning: {problem}");
    }
    let t = &outcome.totals;
    // A background compactor would find no more room than this run's did.
    let disk_full = outcome.problems.iter().any(|p| crate::says_disk_full(p));
    let compacting = match t.raw_left {
        0 => String::new(),
        n if disk_full => format!(
            "; {n} left raw, the disk being full (readable; `sdt compact --run {}` compacts them once there is room)",
            outcome.run
        ),
        n => match cmd_compact::start_in_background(store, outcome.run) {
            Ok(pid) => format!(
                "; {n} more being compacted in the background (pid {pid}; readable meanwhile, `sdt compact` finishes them at once)"
            ),
            Err(e) => {
                format!("; {n} left raw (readable; `sdt compact --run {}` compacts them: {e})", outcome.run)
            }
        },
    };
    if !quiet {
        let ratio = if t.full_bytes > 0 {
            format!(", {:.1}%", 100.0 * t.stored_bytes as f64 / t.full_bytes as f64)
        } else {
            String::new()
        };
        eprintln!(
            "sdt: run {} in {}: {} snapshot{}, {} compacted to {} (full {}{ratio}){compacting}; `sdt ls` lists them",
            outcome.run,
            store.display(),
            t.snapshots,
            if t.snapshots == 1 { "" } else { "s" },
            t.snapshots.saturating_sub(t.raw_left),
            human::bytes(t.stored_bytes),
            human::bytes(t.full_bytes),
        );
    }
    if let (false, Some(exe)) = (quiet, &outcome.unmarked) {
        eprintln!(
            "sdt: note: no breakpoint was reached, and {exe} shows no sign of libsdt: nothing in it calls \
             SetBreakpoint. sdt run traces the process it starts (through its execve calls), not the \
             processes that one starts: run the program that calls SetBreakpoint under sdt run itself, \
             or name functions to break at with --break FUNC"
        );
    }
    if let (false, Some(exe)) = (quiet, &outcome.libsdt_not_found) {
        eprintln!(
            "sdt: note: {exe} exited 127 before its first breakpoint, which is what the dynamic loader does \
             when it cannot find a library: it needs libsdt.so.0 (the loader's message is above). {}",
            libsdt_so_hint()
        );
    }
    if !quiet && !t.not_kept.is_empty() {
        let n = t.not_kept.len();
        eprintln!(
            "sdt: note: {n} file{} the snapshots map could not be kept with the run: their pages and symbols need {} unchanged; first: {}",
            if n == 1 { "" } else { "s" },
            if n == 1 { "it" } else { "them" },
            t.not_kept[0]
        );
    }
    if t.timed_skipped > 0 {
        eprintln!(
            "sdt: warning: {} timed snapshot{} skipped: the raw log was at its disk budget while compaction caught up",
            t.timed_skipped,
            if t.timed_skipped == 1 { " was" } else { "s were" }
        );
    }
    if t.verify_failures > 0 {
        eprintln!("sdt: error: {} snapshot(s) differ from the live process", t.verify_failures);
    }
    if !t.lost.is_empty() {
        eprintln!(
            "sdt: error: {} snapshot{} lost: the store could not take {} (the breakpoint{} returned SDT_DECLINED); first: {}",
            t.lost.len(),
            if t.lost.len() == 1 { "" } else { "s" },
            if t.lost.len() == 1 { "it" } else { "them" },
            if t.lost.len() == 1 { "" } else { "s" },
            t.lost[0]
        );
        let code = match outcome.exit {
            ProgramExit::Code(code) => format!("exited {code}"),
            ProgramExit::Signal(signal, _) => format!("was killed by signal {signal}"),
            ProgramExit::Stopped => "was stopped at the refinement's end".into(),
            ProgramExit::TimedOut => "was stopped when the refinement's time ran out".into(),
            ProgramExit::Detached => "was let go, and runs on".into(),
        };
        eprintln!("sdt: the program {code}; sdt exits {LOST_SNAPSHOTS} for the lost snapshots");
    }
    if disk_full || t.lost.iter().any(|why| crate::says_disk_full(why)) {
        eprintln!("sdt: hint: {}", crate::DISK_FULL_HINT);
    }
}

/// The program's exit as ours: its code, or death by its signal.
pub fn exit_code(exit: ProgramExit, quiet: bool) -> ExitCode {
    match exit {
        ProgramExit::Code(code) => ExitCode::from(code as u8),
        ProgramExit::Stopped | ProgramExit::Detached => ExitCode::SUCCESS,
        ProgramExit::TimedOut => ExitCode::from(TIMED_OUT),
        ProgramExit::Signal(signal, _) => {
            if !quiet {
                eprintln!("sdt: the program was killed by signal {signal}");
            }
            sdt_sys::exit_like_signal(signal)
        }
    }
}
