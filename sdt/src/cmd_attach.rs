//! `sdt attach`: capture a running process sdt did not start, and let it go.

use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result};
use sdt_daemon::{Backend, ProgramExit, RunOptions, Target, Tracking};
use sdt_store::RunId;
use sdt_sys::Tid;

use crate::cli::{AttachOpt, TrackingArg};
use crate::cmd_run::{self, LOST_SNAPSHOTS};

pub fn attach(opt: AttachOpt) -> Result<ExitCode> {
    let given = Tid::new(opt.pid).with_context(|| format!("{} is not a process id", opt.pid))?;
    let pid = process_of(given);
    if pid != given && !opt.quiet {
        eprintln!("sdt: {given} is a thread of process {pid}: attaching to the process");
    }
    let watch = opt.watch || opt.every.is_some() || opt.duration.is_some();
    let store = &opt.store.store;
    let outcome = sdt_daemon::run(&RunOptions {
        target: Target::Attach { pid, watch },
        store: store.clone(),
        config: cmd_run::capture_config(None, opt.every)?,
        verify: false,
        wait_for_compaction: false,
        quiet: opt.quiet,
        tracking: match opt.tracking {
            // One snapshot copies every page whatever tracks them.
            TrackingArg::Auto if !watch => Tracking::PageHash,
            TrackingArg::Auto => Tracking::Auto,
            TrackingArg::UffdWp => Tracking::UffdWp,
            TrackingArg::PageHash => Tracking::PageHash,
        },
        disk_budget: opt.disk_budget.map(|mb| mb << 20),
        backend: Backend::Ptrace,
        breaks: Vec::new(),
        job: None,
        mpi_history: false,
        mpi_replay: None,
        mpi_stop: None,
        signal_snapshots: !opt.no_signal_snapshot,
        time_limit: opt.duration.filter(|d| !d.is_zero()),
    })?;
    cmd_run::conclude(&outcome, store, opt.quiet);
    if outcome.totals.snapshots == 0 {
        // What stood in the way was said above (a thread that would not stop, a store
        // without room).
        eprintln!("sdt: error: no snapshot of process {pid} was taken");
        return Ok(ExitCode::FAILURE);
    }
    if !opt.quiet {
        match outcome.exit {
            ProgramExit::Detached => eprintln!("sdt: process {pid} was let go: it runs on, untraced"),
            ProgramExit::Code(code) => eprintln!("sdt: process {pid} exited {code} while sdt watched it"),
            ProgramExit::Signal(signal, _) => {
                eprintln!("sdt: process {pid} was killed by signal {signal} while sdt watched it")
            }
            ProgramExit::Stopped | ProgramExit::TimedOut => {}
        }
        match (outcome.at_signal.as_deref(), outcome.exit) {
            (Some(name), _) => {
                eprintln!("sdt: {name} is the process as the signal found it: `sdt gdb {name}`");
                cmd_run::say_why_it_hangs(store, outcome.run, name);
            }
            // Where its threads were when sdt let go: what they wait for, if they do.
            (None, ProgramExit::Detached) => {
                if let Some(name) = last_snapshot(store, outcome.run) {
                    cmd_run::say_why_it_hangs(store, outcome.run, &name);
                }
            }
            _ => {}
        }
    }
    if !outcome.totals.lost.is_empty() {
        return Ok(ExitCode::from(LOST_SNAPSHOTS));
    }
    Ok(ExitCode::SUCCESS)
}

/// The name of the last snapshot of `run`, if it has one.
fn last_snapshot(store: &Path, run: RunId) -> Option<String> {
    let store = sdt_store::Store::open(store).ok()?;
    let run = store.open_run(&run).ok()?;
    let last = run.snapshots().ok()?.last()?.ok()?;
    Some(last.name)
}

/// The process thread `tid` belongs to: itself for a process's id, or where that cannot
/// be read.
fn process_of(tid: Tid) -> Tid {
    let status = sdt_procfs::read(tid, "status").unwrap_or_default();
    sdt_procfs::parse_tgid(&status).and_then(Tid::new).unwrap_or(tid)
}
