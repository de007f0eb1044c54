//! Resuming a stored snapshot's process: recreated by the caller's [`Restorer`]
//! (`sdt-restore`), then taken over by the tracer with the run's capture filter, or let
//! go untraced. Whose credentials it resumes with is the restorer's business.

use std::error::Error as StdError;

use sdt_store::{Refinement, Run, RunId, RunInfo, Snapshot, Store};
use sdt_sys::monotonic_ns;

use crate::adopt::{self, AdoptError};
use sdt_abi::RESULT_DECLINED;
use sdt_sys::Tid;
use sdt_target::{Library, checked_files};

use crate::freeze::{Held, TargetEvent};
use crate::ptrace::Tracer;
use crate::{Error, ProgramExit, RestoreFrom, RunOptions, SEIZED_OPTIONS, Started, run_info, wall_ns};

/// Recreates a stored snapshot's process for the capture to take over. `sdt-restore`
/// does it, handed in by the caller: the capture does not link the restorer.
pub trait Restorer: std::fmt::Debug + Send + Sync {
    /// Recreates the process of `snap`, a snapshot of `run`, with every thread in a
    /// ptrace-stop of the calling thread, seized with the `PTRACE_O_*` `ptrace_options`.
    fn restore(
        &self,
        run: &Run,
        snap: &Snapshot,
        ptrace_options: u32,
    ) -> Result<RestoredProcess, Box<dyn StdError + Send + Sync>>;
}

/// A process a [`Restorer`] recreated, every thread stopped under the caller's ptrace.
#[derive(Clone, Debug)]
pub struct RestoredProcess {
    /// The process, in the caller's pid namespace.
    pub pid: Tid,
    /// Its namespace's init, the caller's child: it exits with the process's status.
    pub init: Tid,
    /// Every thread's id in the caller's pid namespace, the main thread first.
    pub threads: Vec<Tid>,
    /// Bytes of pages written into the process.
    pub bytes_written: u64,
    /// It runs in a user namespace of its own, mapping only the restorer's user and
    /// group (a restorer without `CAP_SYS_ADMIN`).
    pub user_namespace: bool,
}

/// Restores `from`'s process for a run that captures it, and describes that run.
pub(crate) fn start(store: &Store, from: &RestoreFrom, opts: &RunOptions) -> Result<Started, Error> {
    let parent = store.open_run(&from.run)?;
    let snap = parent.open_snapshot(&from.snapshot)?;
    let started_wall_ns = wall_ns();
    let restored = timed_restore(&parent, &snap, &*from.restorer)?;
    let pid = restored.pid;
    let kill = |e: Error| {
        sdt_sys::kill_namespace(restored.init);
        e
    };
    let mut filter = opts.config.filter.clone();
    if let Some(u) = &from.until {
        filter.always.push((u.level, u.class, u.id));
    }
    match find_library(&snap) {
        Some(library) => adopt::install(&library, pid, &filter).map_err(|e| kill(e.into()))?,
        None if from.until.is_some() => return Err(kill(AdoptError::NoLibrary.into())),
        None => log::warn!("the program's libsdt symbols were not found: only timed snapshots will be taken"),
    }
    let info = parent.info();
    let mut tracer = Tracer::adopt(pid, SEIZED_OPTIONS, restored.threads.iter().copied());
    if opts.signal_snapshots {
        tracer.hold_fatal_signals();
    }
    Ok(Started {
        pid,
        tracer,
        capturer: crate::capture::Capturer::new(pid)?,
        info: RunInfo {
            parent: Some(Refinement {
                run: from.run,
                from: snap.name().to_owned(),
                to: from.until.as_ref().map(|u| u.name.clone()),
                reached: None,
                edit: None,
            }),
            ..run_info(info.command.clone(), info.cwd.clone(), started_wall_ns, opts)
        },
        init: Some(restored.init),
        inherited: Vec::new(),
        mpi: None,
    })
}

/// How a resume without capture went.
#[derive(Clone, Copy, Debug)]
pub struct Resumed {
    /// How the program ended.
    pub exit: ProgramExit,
    /// Nanoseconds the restore took, from reading the snapshot to every thread ready.
    pub restore_ns: u64,
    /// Bytes of pages written into the new process.
    pub bytes_written: u64,
    /// It ran in a user namespace of its own ([`RestoredProcess::user_namespace`]).
    pub user_namespace: bool,
}

/// Restores snapshot `name` of run `run` in the store at `store` with `restorer`,
/// switches its breakpoints off and waits for it to end.
///
/// It stays traced, though nothing is captured: a thread the snapshot caught between its
/// breakpoint's filter check and the trap still traps, and gets "declined" for an answer
/// instead of dying of `SIGTRAP`. Signals reach the program as usual.
pub fn resume_detached(
    store: &std::path::Path,
    run: RunId,
    name: &str,
    restorer: &dyn Restorer,
) -> Result<Resumed, Error> {
    let store = Store::open(store)?;
    let run = store.open_run(&run)?;
    let snap = run.open_snapshot(name)?;
    let start = monotonic_ns();
    let restored = timed_restore(&run, &snap, restorer)?;
    let restore_ns = monotonic_ns() - start;
    let pid = restored.pid;
    let prepared = match find_library(&snap) {
        Some(library) => adopt::switch_off(&library, pid).map_err(Error::from),
        None => Ok(()),
    };
    if let Err(e) = prepared {
        sdt_sys::kill_namespace(restored.init);
        return Err(e);
    }
    // Terminal signals reach the program (it is in our process group); sdt waits.
    sdt_sys::ignore_terminal_signals();
    let mut tracer = Tracer::adopt(pid, SEIZED_OPTIONS, restored.threads.iter().copied());
    let exit = run_declining(&mut tracer);
    let exit = match exit {
        Ok(exit) => {
            sdt_sys::reap(restored.init);
            exit
        }
        Err(e) => {
            sdt_sys::kill_namespace(restored.init);
            return Err(e);
        }
    };
    Ok(Resumed {
        exit,
        restore_ns,
        bytes_written: restored.bytes_written,
        user_namespace: restored.user_namespace,
    })
}

/// Runs the program to its end, declining every breakpoint that still traps.
fn run_declining(tracer: &mut Tracer) -> Result<ProgramExit, Error> {
    // The restored threads are all stopped: they go now.
    Held::new(tracer, None).release(RESULT_DECLINED, true)?;
    loop {
        match tracer.next_event()? {
            TargetEvent::Breakpoint(hit) => Held::new(tracer, Some(&hit)).release(RESULT_DECLINED, true)?,
            TargetEvent::FatalSignal(signal) => {
                Held::at_signal(tracer, &signal).release(RESULT_DECLINED, false)?
            }
            TargetEvent::Exec => {}
            TargetEvent::Exited(exit) => return Ok(exit),
        }
    }
}

/// The program's SDT library, found in `snap`'s memory and in the files the store checks.
fn find_library(snap: &Snapshot) -> Option<Library> {
    Library::find(snap.meta(), &|addr, buf| snap.read(addr, buf).is_ok(), &checked_files(snap))
}

/// `restorer`'s restore of `snap` of `run`, traced, logging how long it took.
fn timed_restore(run: &Run, snap: &Snapshot, restorer: &dyn Restorer) -> Result<RestoredProcess, Error> {
    let start = monotonic_ns();
    let restored = restorer.restore(run, snap, SEIZED_OPTIONS).map_err(Error::Restore)?;
    log::info!(
        "restored {} as pid {} in {:.1} ms ({} bytes of pages)",
        snap.name(),
        restored.pid,
        (monotonic_ns() - start) as f64 / 1e6,
        restored.bytes_written
    );
    Ok(restored)
}
