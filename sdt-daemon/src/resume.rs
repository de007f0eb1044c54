//! Resuming a stored snapshot's process: restored (`sdt-restore`), taken over by the
//! tracer with the run's capture filter, or let go untraced. Either way it resumes with
//! the credentials its snapshot recorded, as far as the owner of its store has them,
//! unless a detached resume is told otherwise.

use sdt_store::{BeyondOwner, Refinement, Run, RunId, RunInfo, RunStatus, Snapshot, Store, Trust};
use sdt_sys::monotonic_ns;
use sdt_sys::ptrace::options;

use crate::adopt::{self, AdoptError};
use sdt_abi::RESULT_DECLINED;
use sdt_restore::Privileges;
use sdt_target::{Library, checked_files};

use crate::freeze::{Held, TargetEvent};
use crate::ptrace::Tracer;
use crate::{Error, ProgramExit, RestoreFrom, RunOptions, Started, TRACE_OPTIONS, wall_ns};

/// Restores `from`'s process for a run that captures it, and describes that run.
pub(crate) fn start(store: &Store, from: &RestoreFrom, opts: &RunOptions) -> Result<Started, Error> {
    let parent = store.open_run(&from.run)?;
    let snap = parent.open_snapshot(&from.snapshot)?;
    let started_wall_ns = wall_ns();
    let resume =
        Resume { env: &from.env, privileges: Privileges::Recorded, beyond_owner: BeyondOwner::Refuse };
    let restored = timed_restore(&parent, &snap, &resume)?;
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
    Ok(Started {
        pid,
        tracer: Tracer::adopt(pid, restored.threads.iter().map(|t| t.host)),
        capturer: crate::capture::Capturer::new(pid)?,
        info: RunInfo {
            id: RunId(0),
            command: info.command.clone(),
            cwd: info.cwd.clone(),
            started_wall_ns,
            sdt_pid: std::process::id(),
            config: opts.config.text.clone(),
            status: RunStatus::Running,
            parent: Some(Refinement {
                run: from.run,
                from: snap.name().to_owned(),
                to: from.until.as_ref().map(|u| u.name.clone()),
                reached: None,
            }),
        },
        init: Some(restored.init),
        inherited: Vec::new(),
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
}

/// How a stored snapshot resumes: extra environment variables and whose credentials.
#[derive(Clone, Copy, Debug)]
struct Resume<'a> {
    /// Environment variables (name, value) to add to or replace in the program's.
    env: &'a [(String, String)],
    /// Whose credentials the program resumes with.
    privileges: Privileges,
    /// What becomes of recorded credentials beyond what the store's owner has.
    beyond_owner: BeyondOwner,
}

/// Restores snapshot `name` of run `run` in the store at `store`, with the variables of
/// `env` in its environment and the credentials `privileges` says (those recorded beyond
/// what the store's owner has refused or lowered, as `beyond_owner` says), switches its
/// breakpoints off and waits for it to end.
///
/// It stays traced, though nothing is captured: a thread the snapshot caught between its
/// breakpoint's filter check and the trap still traps, and gets "declined" for an answer
/// instead of dying of `SIGTRAP`. Signals reach the program as usual.
pub fn resume_detached(
    store: &std::path::Path,
    run: RunId,
    name: &str,
    env: &[(String, String)],
    privileges: Privileges,
    beyond_owner: BeyondOwner,
) -> Result<Resumed, Error> {
    let store = Store::open(store)?;
    let run = store.open_run(&run)?;
    let snap = run.open_snapshot(name)?;
    let start = monotonic_ns();
    let restored = timed_restore(&run, &snap, &Resume { env, privileges, beyond_owner })?;
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
    let mut tracer = Tracer::adopt(pid, restored.threads.iter().map(|t| t.host));
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
    Ok(Resumed { exit, restore_ns, bytes_written: restored.bytes_written })
}

/// Runs the program to its end, declining every breakpoint that still traps.
fn run_declining(tracer: &mut Tracer) -> Result<ProgramExit, Error> {
    // The restored threads are all stopped: they go now.
    Held::new(tracer, None).release(RESULT_DECLINED, true)?;
    loop {
        match tracer.next_event()? {
            TargetEvent::Breakpoint(hit) => Held::new(tracer, Some(&hit)).release(RESULT_DECLINED, true)?,
            TargetEvent::Exec => {}
            TargetEvent::Exited(exit) => return Ok(exit),
        }
    }
}

/// The program's SDT library, found in `snap`'s memory and in the files the store checks.
fn find_library(snap: &Snapshot) -> Option<Library> {
    Library::find(snap.meta(), &|addr, buf| snap.read(addr, buf).is_ok(), &checked_files(snap))
}

/// [`sdt_restore::restore`] of `snap` of `run`, traced, logging how long it took.
fn timed_restore(run: &Run, snap: &Snapshot, resume: &Resume) -> Result<sdt_restore::Restored, Error> {
    let start = monotonic_ns();
    let options = sdt_restore::Options {
        ptrace_options: TRACE_OPTIONS | options::TRACEEXEC,
        env: resume.env,
        privileges: resume.privileges,
        beyond_owner: resume.beyond_owner,
    };
    let restored = sdt_restore::restore(snap, &Trust::of_run(run), &options)?;
    log::info!(
        "restored {} as pid {} in {:.1} ms ({} bytes of pages)",
        snap.name(),
        restored.pid,
        (monotonic_ns() - start) as f64 / 1e6,
        restored.bytes_written
    );
    Ok(restored)
}
