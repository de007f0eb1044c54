//! SDT's capture service: runs a program under ptrace (or registered with SDT's kernel
//! module) and, at every breakpoint that passes the capture config (and every timer
//! tick), freezes all of its threads, reads their registers and copies the pages that
//! hold content straight into the store's raw log, resumes them, and commits the
//! snapshot; a compactor thread stores it incrementally later (and, once the program
//! has ended, a background `sdt compact`). A stored snapshot's process, recreated by a
//! [`Restorer`] the caller hands in (`sdt-restore`, which the capture does not link), is
//! taken over and captured the same way, or let run to its end ([`resume_detached`]). A
//! running process sdt did not start is seized and captured the same way too
//! ([`Target::Attach`]), and let go again, untraced.
//!
//! ```no_run
//! use sdt_daemon::{CaptureConfig, RunOptions};
//!
//! let outcome = sdt_daemon::run(&RunOptions {
//!     target: sdt_daemon::Target::Launch(vec!["./prog".into(), "--size".into(), "4".into()]),
//!     store: ".sdt".into(),
//!     config: CaptureConfig::parse("max_level = 2", "inline").unwrap(),
//!     verify: false,
//!     wait_for_compaction: false,
//!     quiet: false,
//!     tracking: Default::default(),
//!     disk_budget: None,
//!     backend: sdt_daemon::Backend::Ptrace,
//!     breaks: Vec::new(),
//!     job: None,
//!     mpi_history: true,
//!     mpi_replay: None,
//!     mpi_stop: None,
//!     signal_snapshots: true,
//!     time_limit: None,
//! })?;
//! println!("run {} took {} snapshots", outcome.run, outcome.totals.snapshots);
//! # Ok::<(), sdt_daemon::Error>(())
//! ```
//!
//! # Design constraints
//!
//! - The pause holds only what must happen with every thread stopped: the freeze,
//!   registers, the mappings, and the copy of the pages, straight into the store's raw
//!   file for the snapshot. Diffing and compression (compaction) happen on a thread of
//!   their own, on CPU time the program leaves idle.
//! - A breakpoint's snapshot number is a promise: its thread gets it only once the
//!   snapshot is committed to the store, where it survives `sdt`'s death.
//! - The freeze sits behind `freeze::Freezer` and the program's events behind
//!   `freeze::EventSource`, so the kernel module ([`Backend::Kmod`]) replaces ptrace
//!   without touching the capture.
//! - The program behaves as without SDT: its stdio, signals and exit status are its own,
//!   and `sdt` forwards signals sent to it.

#![deny(missing_docs)]
#![deny(unsafe_code)]

mod adopt;
mod attach;
mod body;
mod capture;
pub mod config;
mod density;
mod freeze;
mod headroom;
pub mod human;
mod idle;
mod keeper;
mod kmod;
pub mod launch;
mod libraries;
mod mpi;
mod procfs;
mod ptrace;
mod resume;
mod sanitizer;
mod session;
mod signals;
mod symbols;
mod tracking;
mod writer;

use std::collections::HashMap;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use sdt_abi::RESULT_DECLINED;
use sdt_store::{JobMember, PendingFile, ProcessInfo, RunId, RunInfo, RunStatus, Store};
use sdt_sys::events::Events;
use sdt_sys::ptrace::options;
use sdt_sys::{Tid, monotonic_ns};

pub use adopt::AdoptError;
pub use attach::AttachError;
pub use config::{CaptureConfig, ConfigError};
pub use freeze::ProgramExit;
pub use headroom::MemoryRoom;
pub use kmod::{KmodError, available as kmod_available};
pub use launch::LaunchError;
pub use mpi::{MpiError, MpiStop, mpi_of};
pub use resume::{RestoredProcess, Restorer, Resumed, resume_detached};
pub use symbols::{BreakError, SymbolBreak};
pub use tracking::{Tracking, TrackingError, VdsoError};
pub use writer::WriteTotals;

use capture::Capturer;
use freeze::{BreakpointHit, EventSource, Held};
use kmod::Kmod;
use ptrace::Tracer;
use session::{Image, Recorder, Session};
use writer::StoreWriter;

/// What `sdt run` (or `sdt restore`, `sdt refine`) was asked to do.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// Where the program comes from.
    pub target: Target,
    /// The store directory.
    pub store: PathBuf,
    /// Which breakpoints capture, timed snapshots, limits.
    pub config: CaptureConfig,
    /// Compare every stored snapshot with the live process's memory (slow; for tests).
    /// The run then returns once every snapshot is compacted.
    pub verify: bool,
    /// Return once every snapshot is compacted, rather than when the program ends
    /// (leaving [`WriteTotals::raw_left`] for a background `sdt compact`).
    pub wait_for_compaction: bool,
    /// No line per snapshot.
    pub quiet: bool,
    /// How changed pages are found.
    pub tracking: Tracking,
    /// Bytes of captures the raw log may hold before compaction catches up (`None`: half
    /// the store's free space when the run starts).
    pub disk_budget: Option<u64>,
    /// How the program's threads are stopped.
    pub backend: Backend,
    /// Breakpoints at function entries of a launched program (`--break`; ptrace only).
    pub breaks: Vec<SymbolBreak>,
    /// The job this run is a rank of (a launched program under an MPI launcher).
    pub job: Option<JobMember>,
    /// Record the message history of a launched program that links MPI (the
    /// interposition library of `sdt-mpi`, loaded into it).
    pub mpi_history: bool,
    /// With `mpi_history`: the replay record (`sdt_history::replay`) whose matches the
    /// library enforces (`sdt replay`).
    pub mpi_replay: Option<PathBuf>,
    /// With `mpi_replay`: where the rank stops (`sdt replay --until`, `sdt rollback`).
    pub mpi_stop: Option<MpiStop>,
    /// Take a snapshot when a signal is about to end the program (ptrace backend): at the
    /// delivery of a signal whose disposition is the default and whose default ends the
    /// process (`SIGSEGV`, `SIGABRT`, `SIGTERM`, …), before it is delivered.
    pub signal_snapshots: bool,
    /// How long the program may run, from when it first runs under `sdt`: past that,
    /// `sdt` takes a snapshot of where it is (a hang shows there) and ends it
    /// ([`ProgramExit::TimedOut`]). `None`: no limit.
    pub time_limit: Option<Duration>,
}

/// How a run stops the program's threads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Backend {
    /// The kernel module where `/dev/sdt` is present, else ptrace (always ptrace for a
    /// restored process).
    Auto,
    /// ptrace: the program runs traced; breakpoints are `int3` stops.
    #[default]
    Ptrace,
    /// The kernel module (`kmod/`): IPIs hold the threads; no tracer.
    Kmod,
}

/// Where a run's program comes from.
#[derive(Clone, Debug)]
pub enum Target {
    /// Launch this program with these arguments.
    Launch(Vec<String>),
    /// Resume the process of a stored snapshot; the run is a refinement of the
    /// snapshot's run.
    Restore(RestoreFrom),
    /// Take over a running process sdt did not start (`sdt attach`): a snapshot at once,
    /// then, unless `watch`, let it go; with `watch`, timed snapshots and one at a fatal
    /// signal until it ends, `time_limit` runs out or sdt gets `SIGINT`, `SIGTERM`,
    /// `SIGHUP` or `SIGQUIT` (then it is let go: [`ProgramExit::Detached`]). Its
    /// breakpoints stay off: the program started without sdt.
    Attach {
        /// The process.
        pid: Tid,
        /// Stay attached after the first snapshot.
        watch: bool,
    },
}

/// The snapshot a run resumes, what recreates its process, and where the run ends.
#[derive(Clone, Debug)]
pub struct RestoreFrom {
    /// The run the snapshot is in.
    pub run: RunId,
    /// The snapshot's name in it.
    pub snapshot: String,
    /// The breakpoint that ends the run, if any.
    pub until: Option<Until>,
    /// What recreates the snapshot's process.
    pub restorer: Arc<dyn Restorer>,
}

/// A breakpoint arrival that ends a refinement: that of snapshot `name`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Until {
    /// The snapshot whose breakpoint it is (`S2`); the new one is named `S2.new`.
    pub name: String,
    /// Its level.
    pub level: i32,
    /// Its class.
    pub class: i32,
    /// Its id.
    pub id: i32,
    /// Which arrival at it, from 1.
    pub hit: u64,
}

impl Until {
    /// Whether `hit` is the arrival the run waits for.
    fn reached_by(&self, hit: &BreakpointHit) -> bool {
        let r = &hit.record;
        (r.level, r.class, r.id, r.hit) == (self.level, self.class, self.id, self.hit)
    }

    /// Whether `hit` is at the breakpoint waited for (at any arrival).
    fn same_breakpoint(&self, hit: &BreakpointHit) -> bool {
        let r = &hit.record;
        (r.level, r.class, r.id) == (self.level, self.class, self.id)
    }
}

/// How a run went.
#[derive(Clone, Debug)]
pub struct RunOutcome {
    /// The run's id in the store.
    pub run: RunId,
    /// How the program ended.
    pub exit: ProgramExit,
    /// What was stored.
    pub totals: WriteTotals,
    /// Captures that failed or were refused, with why.
    pub problems: Vec<String>,
    /// The snapshot taken at the signal that ended the program, if one was (its name).
    pub at_signal: Option<String>,
    /// The snapshot taken where the program was when its time limit ran out, if one was
    /// (its name).
    pub at_deadline: Option<String>,
    /// The program's file, where the run was for breakpoints (no `--break`, `--every` or
    /// MPI history), reached none, took no snapshot, and the program shows no sign of
    /// libsdt (`sdt run -- sh -c …`, a script, a program left unlinked): the user is told.
    pub unmarked: Option<String>,
    /// The program's file, where the run was for breakpoints, reached none, and the
    /// program, which needs `libsdt.so`, exited 127 before it: what the dynamic loader
    /// does when it cannot find a library (`LD_LIBRARY_PATH` unset for a prefix install).
    pub libsdt_not_found: Option<String>,
}

/// Why a run could not be made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The program cannot be launched.
    #[error(transparent)]
    Launch(#[from] LaunchError),
    /// `execve` failed, or launching it did.
    #[error(transparent)]
    Spawn(#[from] sdt_sys::spawn::SpawnError),
    /// The snapshot's process cannot be restored: the [`Restorer`]'s error.
    #[error(transparent)]
    Restore(Box<dyn std::error::Error + Send + Sync>),
    /// The store cannot be opened or written.
    #[error(transparent)]
    Store(#[from] sdt_store::Error),
    /// A system call failed.
    #[error(transparent)]
    Sys(#[from] sdt_sys::Error),
    /// Write tracking was asked for and cannot be had.
    #[error("userfaultfd write tracking is unavailable")]
    Tracking(#[source] TrackingError),
    /// A restored process could not be taken over.
    #[error("taking over the restored process")]
    Adopt(#[from] AdoptError),
    /// A `--break` cannot be placed.
    #[error(transparent)]
    Break(#[from] BreakError),
    /// A running process cannot be taken over.
    #[error(transparent)]
    Attach(#[from] AttachError),
    /// An attached process could not be let go: sdt's exit lets it go.
    #[error("letting the program go: {0}")]
    LetGo(&'static str),
    /// The kernel module cannot capture the program.
    #[error(transparent)]
    Kmod(#[from] KmodError),
    /// An MPI program's history library cannot be loaded.
    #[error(transparent)]
    Mpi(#[from] MpiError),
}

/// The program, started and stopped, and the run it goes into.
struct Started<B = Tracer> {
    pid: Tid,
    /// What stops its threads: ptrace, or the kernel module.
    tracer: B,
    /// Opened while the program was still stopped: its `/proc/PID/pagemap` must be opened
    /// before its main thread can exit (a zombie leader's has no memory to show).
    capturer: Capturer,
    info: RunInfo,
    /// For a restored process: its namespace's init.
    init: Option<Tid>,
    /// Descriptors (number, target) the program got from `sdt run` at launch.
    inherited: Vec<(i32, String)>,
    /// An MPI program's history files, made before the run.
    mpi: Option<[PendingFile; 3]>,
}

/// Runs the program to its end, capturing snapshots into a new run of the store.
pub fn run(opts: &RunOptions) -> Result<RunOutcome, Error> {
    // Signals are blocked from here on: before any thread exists, so every thread
    // inherits the mask; the program's child unblocks them before execve.
    let events = Events::new(&[libc::SIGCHLD, libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT])?;
    let store = Store::open_or_create(&opts.store)?;
    let started_ns = monotonic_ns();
    let breaks = !opts.breaks.is_empty();
    if breaks && matches!(opts.target, Target::Restore(_)) {
        return Err(BreakError::Restored.into());
    }
    if let Target::Attach { .. } = opts.target {
        if breaks {
            return Err(AttachError::Breaks.into());
        }
        if opts.backend == Backend::Kmod {
            return Err(AttachError::Kmod.into());
        }
    }
    let kmod = match (opts.backend, &opts.target) {
        (Backend::Kmod, Target::Restore(_)) => return Err(KmodError::Restore.into()),
        (Backend::Kmod, _) if breaks => return Err(BreakError::Kmod.into()),
        (Backend::Kmod, _) => true,
        (Backend::Auto, Target::Launch(_)) => !breaks && kmod::available(),
        _ => false,
    };
    if kmod && opts.tracking == Tracking::UffdWp {
        return Err(KmodError::Tracking.into());
    }
    match &opts.target {
        Target::Launch(command) if kmod => {
            let device = kmod::open()?;
            let filter = &opts.config.filter;
            let started = launch(command, opts, &store, options::EXITKILL, false, |pid| {
                Kmod::start(pid, device, filter)
            })?;
            drive(started, events, &store, started_ns, opts)
        }
        Target::Launch(command) => {
            // Processes the program forks start with the --break int3s: they are traced
            // until those are taken out.
            let forks = if breaks { options::TRACEFORK } else { 0 };
            let started = launch(command, opts, &store, TRACE_OPTIONS | forks, true, |pid| {
                Tracer::start(pid, SEIZED_OPTIONS | forks, &opts.breaks, opts.signal_snapshots)
            })?;
            drive(started, events, &store, started_ns, opts)
        }
        Target::Restore(from) => drive(resume::start(&store, from, opts)?, events, &store, started_ns, opts),
        Target::Attach { pid, .. } => drive(attach::start(*pid, opts)?, events, &store, started_ns, opts),
    }
}

/// Runs the started program to its end, capturing snapshots into a new run of `store`.
fn drive<B: EventSource>(
    started: Started<B>,
    mut events: Events,
    store: &Store,
    started_ns: u64,
    opts: &RunOptions,
) -> Result<RunOutcome, Error> {
    let Started { pid, mut tracer, capturer, info, init, mut inherited, mpi } = started;
    let budget = opts.disk_budget.unwrap_or_else(|| default_budget(store));
    let created = store.create_run(info).map_err(Error::from).and_then(|log| {
        let info = log.run().info().clone();
        let mpi = mpi.map(|files| mpi::adopt(&log, files)).transpose()?;
        Ok((info, StoreWriter::start(log, pid, store.root().to_owned(), budget, opts.quiet)?, mpi))
    });
    let (info, writer, mpi) = created.inspect_err(|_| match opts.target {
        // Not sdt's to end.
        Target::Attach { .. } => {
            if let Err(e) = tracer.let_go() {
                log::warn!("letting process {pid} go: {e}");
            }
        }
        _ => {
            sdt_sys::kill_process(init.unwrap_or(pid), libc::SIGKILL).ok();
        }
    })?;
    let mpi_events = mpi.map(|(events, fds)| {
        inherited.extend(fds);
        events
    });
    // The tracer handles a breakpoint the moment it traps, and program threads it resumes
    // do not preempt it mid-thaw. (Started after the program, which must not inherit it.)
    if let Err(e) = sdt_sys::set_thread_urgency(None, sdt_sys::Urgency::Immediate) {
        log::debug!("tracer stays at normal priority: {e}");
    }
    // A restored program's threads are all stopped: they go now (no breakpoint answered).
    Held::new(&mut tracer, None).release(RESULT_DECLINED, false)?;
    let exe = matches!(opts.target, Target::Launch(_)).then(|| program_file(pid)).flatten();
    let rec = Recorder {
        pid,
        image: Image::new(capturer),
        process: ProcessInfo::default(),
        info,
        writer,
        opts,
        init,
        ns_tids: init.map(|_| HashMap::new()),
        inherited,
        mpi_events,
        started_ns,
        resumed_ns: started_ns,
        next_seq: 0,
        capturing: opts.config.max_snapshots != Some(0),
        told_unfiltered: false,
        told_handlers_unread: false,
        shows_libsdt: session::shows_libsdt(exe.as_deref()),
        exe,
        reached_breakpoint: false,
        problems: Vec::new(),
        at_signal: None,
        at_deadline: None,
    };
    rec.expect_captures();
    let mut session = Session { tracer, rec };
    events.set_interval(opts.config.every_ms.map(Duration::from_millis))?;
    let exit = session.run_to_end(&mut events);
    if exit.is_err()
        && let Target::Attach { .. } = opts.target
    {
        // Threads stopped where the error came are let go too, not left to sdt's exit
        // (which would deliver the SIGTRAP of a step they are stopped at).
        if let Err(e) = session.tracer.let_go() {
            log::warn!("letting process {pid} go: {e}");
        }
    }
    finish(session.rec, exit, opts)
}

/// Records how the run ended, with what went wrong on the way; a restored program's
/// namespace ends with it (after an error, it is killed).
fn finish(rec: Recorder, exit: Result<ProgramExit, Error>, opts: &RunOptions) -> Result<RunOutcome, Error> {
    let Recorder {
        pid,
        writer,
        mut problems,
        init,
        info,
        mpi_events,
        at_signal,
        at_deadline,
        exe,
        shows_libsdt,
        reached_breakpoint,
        ..
    } = rec;
    if let (Ok(_), Some(events)) = (&exit, &mpi_events) {
        events.pack();
    }
    if let Some(init) = init {
        // After an error, the program may still run.
        if exit.is_ok() {
            sdt_sys::reap(init);
        } else {
            sdt_sys::kill_namespace(init);
        }
    }
    let exit = match exit {
        Ok(exit) => exit,
        Err(e) => {
            let (_, error) = writer.finish(RunStatus::Failed { message: human::error_chain(&e) }, false);
            problems.extend(error);
            return Err(e);
        }
    };
    let status = match exit {
        ProgramExit::Code(code) => RunStatus::Exited { code },
        ProgramExit::Signal(signal, _) => RunStatus::Signaled { signal },
        ProgramExit::Stopped => RunStatus::Stopped { reason: "the refinement reached its end".into() },
        ProgramExit::TimedOut => RunStatus::Stopped { reason: "its time limit ran out".into() },
        ProgramExit::Detached => RunStatus::Detached { pid: pid.raw() },
    };
    let (totals, error) = writer.finish(status, opts.wait_for_compaction || opts.verify);
    problems.extend(error);
    // Runs for their timed snapshots, their crash or their message history need no
    // breakpoint.
    let for_breakpoints = !reached_breakpoint
        && totals.snapshots == 0
        && opts.breaks.is_empty()
        && opts.config.every_ms.is_none()
        && mpi_events.is_none();
    let exe = exe.filter(|_| for_breakpoints);
    let (unmarked, libsdt_not_found) = match exe {
        Some(exe) if !shows_libsdt => (Some(exe), None),
        Some(exe) if exit == ProgramExit::Code(127) && launch::needs_libsdt_so(Path::new(&exe)) => {
            (None, Some(exe))
        }
        _ => (None, None),
    };
    Ok(RunOutcome {
        run: info.id,
        exit,
        totals,
        problems,
        at_signal,
        at_deadline,
        unmarked,
        libsdt_not_found,
    })
}

/// Launches `command` seized with `ptrace_options`, and hands it, stopped at its
/// `execve`, to `start` for the backend that will watch it (`traced`: ptrace, which
/// takes the program's own traps).
fn launch<B>(
    command: &[String],
    opts: &RunOptions,
    store: &Store,
    ptrace_options: u32,
    traced: bool,
    start: impl FnOnce(Tid) -> Result<B, Error>,
) -> Result<Started<B>, Error> {
    let program = command.first().ok_or(LaunchError::Empty)?;
    let path = launch::resolve(program)?;
    let mpi = if opts.mpi_history {
        mpi::MpiLaunch::prepare(&path, store, opts.mpi_replay.as_deref(), opts.mpi_stop)?
    } else {
        None
    };
    let preload = std::env::var_os("LD_PRELOAD");
    // A rank ending the job traps for its last snapshot, as a fatal signal would give.
    let end_capture = traced && opts.signal_snapshots;
    let mut env = mpi
        .as_ref()
        .map(|m| m.env(preload.as_deref().map(OsStrExt::as_bytes), end_capture))
        .unwrap_or_default();
    if let Some(var) =
        sanitizer::leak_check_off(&launch::Linking::of(&path, &sanitizer::ENTRY_POINTS), |var| {
            std::env::var_os(var)
        })
    {
        if !opts.quiet {
            eprintln!(
                "sdt: {program} has LeakSanitizer, whose leak check cannot run under a tracer: it runs with \
                 {}={} (set detect_leaks in LSAN_OPTIONS or ASAN_OPTIONS to choose)",
                var.0,
                String::from_utf8_lossy(&var.1)
            );
        }
        env.push(var);
    }
    let keep = mpi.as_ref().map(mpi::MpiLaunch::fds).unwrap_or_default();
    let spawn = launch::command(&path, command, &opts.config.filter, ptrace_options, &env, keep)?;
    // What the program inherits besides stdio is not its own: a restore need not
    // recreate it (see `OpenFile::inherited`).
    let me = Tid::new(std::process::id() as i32).expect("a process id is positive");
    let inherited = procfs::FdTable::default()
        .read(me, me)
        .unwrap_or_default()
        .into_iter()
        .filter(|f| f.fd > 2 && f.flags & libc::O_CLOEXEC as u32 == 0)
        .map(|f| (f.fd, f.target))
        .collect();
    let started_wall_ns = wall_ns();
    let pid = sdt_sys::spawn::spawn_seized(&spawn).map_err(|e| match e {
        sdt_sys::spawn::SpawnError::Exec { program, source } => match launch::why_exec_failed(&path, &source)
        {
            Some(why) => Error::Launch(LaunchError::Exec { program, errno: source, why }),
            None => sdt_sys::spawn::SpawnError::Exec { program, source }.into(),
        },
        e => e.into(),
    })?;
    let started = Capturer::new(pid).map_err(Error::from).and_then(|capturer| Ok((capturer, start(pid)?)));
    let (capturer, tracer) = started.inspect_err(|_| {
        sdt_sys::kill_process(pid, libc::SIGKILL).ok();
        sdt_sys::reap(pid);
    })?;
    Ok(Started {
        pid,
        tracer,
        capturer,
        info: RunInfo {
            job: opts.job.clone(),
            ..run_info(
                command.to_vec(),
                std::env::current_dir().map(|d| d.display().to_string()).unwrap_or_default(),
                started_wall_ns,
                opts,
            )
        },
        init: None,
        inherited,
        mpi: mpi.map(mpi::MpiLaunch::into_files),
    })
}

/// A new run of `command`, started in `cwd` at `started_wall_ns` and captured with `opts`'
/// config, as the store first records it: running, of no job, refining nothing.
pub(crate) fn run_info(
    command: Vec<String>,
    cwd: String,
    started_wall_ns: i64,
    opts: &RunOptions,
) -> RunInfo {
    RunInfo {
        id: RunId(0),
        command,
        cwd,
        started_wall_ns,
        sdt_pid: std::process::id(),
        config: opts.config.text.clone(),
        status: RunStatus::Running,
        parent: None,
        job: None,
    }
}

/// The file the program `pid` runs (`/proc/PID/exe`).
pub(crate) fn program_file(pid: Tid) -> Option<String> {
    std::fs::read_link(format!("/proc/{pid}/exe")).ok().map(|p| p.display().to_string())
}

/// What the raw log may hold by default: half the store's free space, at least 64 MiB
/// (1 GiB where the free space is unknown).
fn default_budget(store: &Store) -> u64 {
    store.free_bytes().map_or(1 << 30, |free| (free / 2).max(64 << 20))
}

/// The ptrace options every traced program gets.
const TRACE_OPTIONS: u32 = options::TRACECLONE | options::TRACEEXIT | options::EXITKILL;
/// The options its threads then have: the launch and the restore add `TRACEEXEC`.
const SEIZED_OPTIONS: u32 = TRACE_OPTIONS | options::TRACEEXEC;

/// Wall-clock time in nanoseconds since the Unix epoch.
pub(crate) fn wall_ns() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as i64)
}
