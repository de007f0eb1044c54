//! SDT's capture service: runs a program under ptrace (or registered with SDT's kernel
//! module) and, at every breakpoint that passes the capture config (and every timer
//! tick), freezes all of its threads, reads their registers and copies the pages that
//! hold content straight into the store's raw log, resumes them, and commits the
//! snapshot; a compactor thread stores it incrementally later (and, once the program
//! has ended, a background `sdt compact`).
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
mod capture;
pub mod config;
mod freeze;
pub mod human;
mod idle;
mod kmod;
pub mod launch;
mod procfs;
mod ptrace;
mod resume;
mod signals;
mod symbols;
mod tracking;
mod writer;

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

use sdt_abi::{RESULT_DECLINED, RESULT_FILTERED};
use sdt_store::{
    CaptureStats, MemoryLayout, OpenFile, PageSpan, ProcessInfo, RunId, RunInfo, RunStatus, SignalAction,
    SnapshotMeta, SnapshotTime, SpillFile, Store, ThreadState, Trigger,
};
use sdt_sys::events::{Event, Events};
use sdt_sys::ptrace::options;
use sdt_sys::{Tid, monotonic_ns};

pub use adopt::AdoptError;
pub use config::{CaptureConfig, ConfigError};
pub use freeze::ProgramExit;
pub use kmod::{KmodError, available as kmod_available};
pub use launch::LaunchError;
pub use resume::{Resumed, resume_detached};
pub use symbols::{BreakError, SymbolBreak};
pub use tracking::{Tracking, TrackingError, VdsoError};
pub use writer::WriteTotals;

use capture::{Capturer, Collected, PageRun};
use freeze::{BreakpointHit, EventSource, FreezeError, Frozen, TargetEvent};
use kmod::Kmod;
use ptrace::Tracer;
use tracking::Vdso;
use writer::{Room, StoreWriter};

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
}

/// The snapshot a run resumes, and where it ends.
#[derive(Clone, Debug)]
pub struct RestoreFrom {
    /// The run the snapshot is in.
    pub run: RunId,
    /// The snapshot's name in it.
    pub snapshot: String,
    /// The breakpoint that ends the run, if any.
    pub until: Option<Until>,
    /// Environment variables (name, value) to add to or replace in the program's.
    pub env: Vec<(String, String)>,
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
    /// The snapshot's process cannot be restored.
    #[error(transparent)]
    Restore(#[from] sdt_restore::Error),
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
    /// The kernel module cannot capture the program.
    #[error(transparent)]
    Kmod(#[from] KmodError),
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
            let started = launch(command, opts, options::EXITKILL, |pid| Kmod::start(pid, device, filter))?;
            drive(started, events, &store, started_ns, opts)
        }
        Target::Launch(command) => {
            let started = launch(command, opts, TRACE_OPTIONS, |pid| Tracer::start(pid, &opts.breaks))?;
            drive(started, events, &store, started_ns, opts)
        }
        Target::Restore(from) => drive(resume::start(&store, from, opts)?, events, &store, started_ns, opts),
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
    let Started { pid, tracer, capturer, info, init, inherited } = started;
    let run = match store.create_run(info) {
        Ok(run) => run,
        Err(e) => {
            sdt_sys::kill_process(init.unwrap_or(pid), libc::SIGKILL).ok();
            return Err(e.into());
        }
    };
    let run_id = run.run().id();
    let info = run.run().info().clone();
    let budget = opts.disk_budget.unwrap_or_else(|| default_budget(store));
    let writer = match StoreWriter::start(run, pid, store.root().to_owned(), budget, opts.quiet) {
        Ok(writer) => writer,
        Err(e) => {
            sdt_sys::kill_process(init.unwrap_or(pid), libc::SIGKILL).ok();
            return Err(e.into());
        }
    };
    // The tracer handles a breakpoint the moment it traps, and program threads it resumes
    // do not preempt it mid-thaw. (Started after the program, which must not inherit it.)
    if let Err(e) = sdt_sys::set_thread_urgency(None, sdt_sys::Urgency::Immediate) {
        log::debug!("tracer stays at normal priority: {e}");
    }
    let mut session = Session {
        pid,
        tracer,
        capturer,
        tracking_failed: false,
        process: ProcessInfo::default(),
        auxv: Vec::new(),
        layout: None,
        vdso: None,
        writer,
        opts,
        info,
        init,
        ns_tids: init.map(|_| HashMap::new()),
        inherited,
        started_ns,
        next_seq: 0,
        capturing: opts.config.max_snapshots != Some(0),
        told_unfiltered: false,
        problems: Vec::new(),
    };
    // A restored program's threads are all stopped: they go now.
    session.thaw(None, false)?;
    events.set_interval(opts.config.every_ms.map(Duration::from_millis))?;
    let exit = session.run_to_end(&mut events);
    let Session { writer, mut problems, init, .. } = session;
    if let Some(init) = init {
        // A restored program's namespace ends with it; after an error it may still run.
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
    };
    let (totals, error) = writer.finish(status, opts.wait_for_compaction || opts.verify);
    problems.extend(error);
    Ok(RunOutcome { run: run_id, exit, totals, problems })
}

/// Launches `command` seized with `ptrace_options`, and hands it, stopped at its
/// `execve`, to `start` for the backend that will watch it.
fn launch<B>(
    command: &[String],
    opts: &RunOptions,
    ptrace_options: u32,
    start: impl FnOnce(Tid) -> Result<B, Error>,
) -> Result<Started<B>, Error> {
    let program = command.first().ok_or(LaunchError::Empty)?;
    let path = launch::resolve(program)?;
    let spawn = launch::command(&path, command, &opts.config.filter, ptrace_options)?;
    // What the program inherits besides stdio is not its own: a restore need not
    // recreate it (see `OpenFile::inherited`).
    let me = sdt_sys::current_tid();
    let inherited = procfs::open_files(me)
        .unwrap_or_default()
        .into_iter()
        .filter(|f| f.fd > 2 && f.flags & libc::O_CLOEXEC as u32 == 0)
        .map(|f| (f.fd, f.target))
        .collect();
    let started_wall_ns = wall_ns();
    let pid = sdt_sys::spawn::spawn_seized(&spawn)?;
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
            id: RunId(0),
            command: command.to_vec(),
            cwd: std::env::current_dir().map(|d| d.display().to_string()).unwrap_or_default(),
            started_wall_ns,
            sdt_pid: std::process::id(),
            config: opts.config.text.clone(),
            status: RunStatus::Running,
            parent: None,
        },
        init: None,
        inherited,
    })
}

/// What the raw log may hold by default: half the store's free space, at least 64 MiB
/// (1 GiB where the free space is unknown).
fn default_budget(store: &Store) -> u64 {
    store.free_bytes().map_or(1 << 30, |free| (free / 2).max(64 << 20))
}

/// The ptrace options every traced program gets.
const TRACE_OPTIONS: u32 = options::TRACECLONE | options::TRACEEXIT | options::EXITKILL;

/// Whether a breakpoint passes the capture filter by its own numbers, attributes and hit
/// (a forced one traps whatever the filter says).
fn passes(filter: &sdt_abi::Filter, hit: &BreakpointHit) -> bool {
    let r = &hit.record;
    filter.matches_numbers(r.level, r.class, r.id)
        && filter.matches_attrs(hit.attrs.as_bytes())
        && filter.matches_hit(r.hit)
}

/// Wall-clock time in nanoseconds since the Unix epoch.
fn wall_ns() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as i64)
}

/// What a capture read with every thread stopped.
struct Captured {
    /// The thread memory was read through.
    via: Tid,
    collected: Collected,
    threads: Vec<ThreadState>,
    files: Vec<OpenFile>,
    signals: Vec<SignalAction>,
}

/// Why a capture failed.
struct CaptureFailed {
    why: String,
    /// The store had no room for its pages.
    no_room: bool,
}

impl From<String> for CaptureFailed {
    fn from(why: String) -> CaptureFailed {
        CaptureFailed { why, no_room: false }
    }
}

/// A capture's pages as the store takes them.
struct Spans {
    copied: Vec<PageSpan>,
    unchanged: Vec<PageSpan>,
    /// Bytes copied from mappings write tracking met for the first time.
    first_sight_bytes: u64,
    /// With `--verify`: the live bytes to compare the stored snapshot with.
    live: Option<Vec<(u64, Vec<u8>)>>,
}

/// One run in progress.
struct Session<'a, B> {
    pid: Tid,
    /// What stops the program's threads: ptrace, or the kernel module.
    tracer: B,
    capturer: Capturer,
    /// Tracking could not be set up for this program image.
    tracking_failed: bool,
    /// The process as last read.
    process: ProcessInfo,
    /// The auxiliary vector of the current program image.
    auxv: Vec<u8>,
    /// The memory layout of the current program image (its `brk` aside).
    layout: Option<MemoryLayout>,
    /// The vDSO of the current program image, for injected system calls.
    vdso: Option<Vdso>,
    writer: StoreWriter,
    opts: &'a RunOptions,
    /// The run, as created.
    info: RunInfo,
    /// For a restored process: its namespace's init.
    init: Option<Tid>,
    /// For a restored process: thread ids in its namespace, by ids in ours.
    ns_tids: Option<HashMap<Tid, i32>>,
    /// Descriptors (number, target) the program got from `sdt run` at launch.
    inherited: Vec<(i32, String)>,
    started_ns: u64,
    next_seq: u32,
    /// False once `max_snapshots` is reached.
    capturing: bool,
    /// The user was told that without a config every breakpoint captures.
    told_unfiltered: bool,
    problems: Vec<String>,
}

impl<B: EventSource> Session<'_, B> {
    /// The daemon loop: breakpoints and program exit from the tracer; timer ticks and
    /// signals from `events`.
    fn run_to_end(&mut self, events: &mut Events) -> Result<ProgramExit, Error> {
        loop {
            while let Some(event) = self.tracer.poll()? {
                let exit = match event {
                    TargetEvent::Breakpoint(hit) => self.snapshot(Some(hit))?,
                    TargetEvent::Exec => {
                        // A new image: new pagemap, new tracking, new auxv.
                        self.capturer = Capturer::new(self.pid)?;
                        self.tracking_failed = false;
                        self.auxv.clear();
                        self.layout = None;
                        self.vdso = None;
                        None
                    }
                    TargetEvent::Exited(exit) => Some(exit),
                };
                if let Some(exit) = exit {
                    return Ok(exit);
                }
            }
            for event in events.wait_with(self.tracer.wake_fd(), None)? {
                match event {
                    // The backend has something: the loop's next poll takes it.
                    Event::Ready => {}
                    Event::Signal { signo: libc::SIGCHLD, .. } => {}
                    // Sent to sdt by another process (`kill`): pass it on. Signals from
                    // the terminal (SI_KERNEL) reached the program's group already.
                    Event::Signal { signo, code, .. } if code <= 0 => {
                        log::info!("forwarding signal {signo} to the program");
                        self.tracer.signal(signo).ok();
                    }
                    Event::Signal { .. } => {}
                    Event::Timer if self.capturing => {
                        if let Some(exit) = self.snapshot(None)? {
                            return Ok(exit);
                        }
                        // The next one comes a whole interval after the program resumed,
                        // however long this one took: slow captures do not pile up and
                        // leave the program no time to run.
                        events.set_interval(self.opts.config.every_ms.map(Duration::from_millis))?;
                    }
                    Event::Timer => {}
                }
            }
        }
    }

    /// Takes one snapshot: for a breakpoint, or (with `None`) for a timer tick. Returns
    /// the program's exit if it ended meanwhile.
    ///
    /// A breakpoint's thread learns its snapshot's number only once the snapshot is
    /// committed to the store: the other threads resume as soon as the pages are copied,
    /// the breaking one after the commit (`SDT_DECLINED` if the store could not take it).
    fn snapshot(&mut self, hit: Option<BreakpointHit>) -> Result<Option<ProgramExit>, Error> {
        let trigger_ns = hit.as_ref().map_or_else(monotonic_ns, |h| h.record.trigger_ns);
        let seen_ns = monotonic_ns();
        let declined = hit.as_ref().map(|h| (h, RESULT_DECLINED));
        let until = self.until().cloned();
        let ends = matches!((&until, &hit), (Some(u), Some(h)) if u.reached_by(h));
        if let (Some(u), Some(h)) = (&until, &hit)
            && !ends
            && u.same_breakpoint(h)
            && !passes(&self.opts.config.filter, h)
        {
            // It trapped only because the refinement forces the breakpoint it ends at.
            return self.thaw(Some((h, RESULT_FILTERED)), false).map(|()| None);
        }
        if !self.capturing {
            return self.thaw(declined, true).map(|()| None);
        }
        if !self.told_unfiltered && self.opts.config.text.is_empty() && hit.is_some() && !self.opts.quiet {
            self.told_unfiltered = true;
            eprintln!(
                "sdt: no --config: every breakpoint captures (a snapshot per arrival); to capture fewer, \
                 pass --config FILE with max_level, classes, ids, hits or max_snapshots (see `sdt run --help`)"
            );
        }
        let mut wait_ns = match self.writer.room(hit.is_none()) {
            Room::Ready(waited) => waited,
            Room::Skipped(why) => {
                log::info!("no snapshot S{}: {why}", self.next_seq);
                if hit.is_some() {
                    self.writer.lost(format!("S{}: {why}", self.next_seq));
                }
                return self.thaw(declined, false).map(|()| None);
            }
        };
        // The spare thread holds still until the program runs again.
        let (mut spill, under_way) = match self.writer.take_spare() {
            Ok((spill, made_ns, under_way)) => {
                wait_ns += made_ns;
                (spill, under_way)
            }
            Err(e) => {
                self.writer.lost(format!(
                    "S{}: the store has no room: {}",
                    self.next_seq,
                    human::error_chain(&e)
                ));
                return self.thaw(declined, false).map(|()| None);
            }
        };
        let breaking = hit.as_ref().map(|h| h.tid);
        let freeze_ns = monotonic_ns();
        let frozen = match self.tracer.freeze(breaking) {
            Ok(frozen) => frozen,
            Err(FreezeError::TargetGone(exit)) => return Ok(Some(exit)),
            Err(FreezeError::Skip(why)) => {
                log::debug!("no snapshot now: {why}");
                return Ok(None);
            }
            Err(FreezeError::Sys(e)) => return Err(e.into()),
        };
        if let Some(via) = frozen.via {
            self.start_tracking(via, breaking)?;
        }
        let seq = self.next_seq;
        let capture_ns = monotonic_ns();
        let captured = match self.capture(&frozen, breaking, &mut spill) {
            Ok(captured) => captured,
            Err(CaptureFailed { why, no_room }) => {
                let message = format!("capture of S{seq} failed: {why}");
                if no_room && hit.is_some() {
                    self.writer.lost(message);
                } else {
                    // Said once, with the run's end.
                    log::debug!("{message}");
                    self.problems.push(message);
                }
                return self.thaw(declined, false).map(|()| None);
            }
        };
        let captured_ns = monotonic_ns();
        let last = self.opts.config.max_snapshots.is_some_and(|max| seq + 1 >= max);
        // The thread that waits for its number, while the others run on. A symbol
        // breakpoint's thread gets no number; the end of a refinement stays stopped until
        // the program is ended.
        let held = hit.as_ref().filter(|h| h.record_addr != 0 && !ends);
        match (held, &hit) {
            (Some(h), _) => self.resume_others(h.tid)?,
            (None, _) if ends => {}
            // A symbol breakpoint's thread is moved past the function's entry.
            (None, hit) => self.thaw(hit.as_ref().map(|h| (h, i64::from(seq))), last)?,
        }
        let resumed_ns = monotonic_ns();
        drop(under_way);
        log::debug!(
            "S{seq} pause {} µs: seen {} µs after the trap, store room and spare {} µs, freeze {} µs, \
             capture {} µs ({}), resume {} µs",
            (resumed_ns - trigger_ns) / 1000,
            seen_ns.saturating_sub(trigger_ns) / 1000,
            (freeze_ns - seen_ns) / 1000,
            (capture_ns - freeze_ns) / 1000,
            (captured_ns - capture_ns) / 1000,
            captured.collected.phases,
            (resumed_ns - captured_ns) / 1000,
        );
        let stats = CaptureStats {
            pause_ns: resumed_ns.saturating_sub(trigger_ns),
            deviation_ns: frozen.all_stopped_ns.saturating_sub(trigger_ns),
            wait_ns,
            ..CaptureStats::default()
        };
        let (meta, spans) =
            self.describe(seq, &hit, until.as_ref().filter(|_| ends), captured, stats, trigger_ns);
        // The next capture likely copies about as much: have a spare ready for it, made
        // while this one is committed.
        let copied = (meta.stats.copied_bytes - spans.first_sight_bytes) as usize;
        if !ends {
            self.writer.prepare(copied + copied / 4);
        }
        let committed = self.writer.commit(spill, &spans.copied, &spans.unchanged, &meta, spans.live);
        let result = match committed {
            Ok(_) => {
                self.next_seq += 1;
                i64::from(seq)
            }
            Err(e) => {
                self.writer.lost(format!(
                    "{}: the store could not take it: {}",
                    meta.name,
                    human::error_chain(&e)
                ));
                // Its pages' written bits were taken by the scan: the next capture copies all.
                self.capturer.capture_lost();
                RESULT_DECLINED
            }
        };
        if let Some(h) = held {
            self.thaw(Some((h, result)), last && result >= 0)?;
        }
        if last && result >= 0 {
            self.capturing = false;
            log::info!("max_snapshots reached: no more snapshots");
        }
        if ends {
            self.stop_program();
            return Ok(Some(ProgramExit::Stopped));
        }
        Ok(None)
    }

    /// The breakpoint that ends a refinement, if this run is one.
    fn until(&self) -> Option<&Until> {
        match &self.opts.target {
            Target::Restore(from) => from.until.as_ref(),
            Target::Launch(_) => None,
        }
    }

    /// What must be read with every thread stopped: the pages (into `spill`), and, while
    /// the capture threads copy them, the registers, open files and signal dispositions.
    fn capture(
        &mut self,
        frozen: &Frozen,
        breaking: Option<Tid>,
        spill: &mut SpillFile,
    ) -> Result<Captured, CaptureFailed> {
        let via = frozen.via.ok_or_else(|| CaptureFailed::from("every thread is exiting".to_owned()))?;
        let (capturer, tracer) = (&mut self.capturer, &mut self.tracer);
        let (collected, (threads, files, signal_sets)) = capturer
            .collect(via, spill, self.opts.verify, || {
                (tracer.read_threads(breaking), procfs::open_files(via), procfs::signal_sets(via))
            })
            .map_err(|e| CaptureFailed {
                no_room: matches!(e, capture::CaptureError::Store(_)),
                why: human::error_chain(&e),
            })?;
        let threads = threads.map_err(|e| human::error_chain(&e))?;
        let mut files = files.map_err(|e| format!("reading open files: {e}"))?;
        for f in &mut files {
            f.inherited = self.inherited.iter().any(|(fd, target)| *fd == f.fd && *target == f.target);
        }
        let (caught, ignored) = signal_sets.map_err(|e| format!("reading signal sets: {e}"))?;
        let signals = self.signal_actions(via, breaking, caught, ignored)?;
        Ok(Captured { via, collected, threads, files, signals })
    }

    /// The snapshot's metadata, from what the capture read and what need not be read with
    /// the program stopped (read now); and its pages as the store takes them.
    fn describe(
        &mut self,
        seq: u32,
        hit: &Option<BreakpointHit>,
        end_of: Option<&Until>,
        captured: Captured,
        stats: CaptureStats,
        trigger_ns: u64,
    ) -> (SnapshotMeta, Spans) {
        let Captured { via, collected, mut threads, files, signals } = captured;
        for t in &mut threads {
            if let Some(tid) = Tid::new(t.tid) {
                t.name = procfs::thread_name(self.pid, tid);
            }
        }
        if let Ok(process) =
            procfs::process_info(self.pid, via).or_else(|_| procfs::process_info(self.pid, self.pid))
        {
            self.process = process;
        }
        if self.auxv.is_empty() {
            self.auxv = procfs::read(via, "auxv").unwrap_or_default();
        }
        if self.layout.is_none() {
            self.layout = procfs::memory_layout(via, &collected.mappings)
                .inspect_err(|e| log::warn!("reading the memory layout: {e}"))
                .ok();
        }
        // Only the break moves during an image's life: it is the heap mapping's end.
        let layout = self.layout.map(|l| MemoryLayout {
            brk: collected.mappings.iter().find(|m| m.path == "[heap]").map_or(l.start_brk, |m| m.end),
            ..l
        });
        // A restored program's threads are known by their ids in its namespace.
        for t in &mut threads {
            t.tid = self.ns_tid(t.tid);
        }
        let mut process = self.process.clone();
        process.pid = self.ns_tid(process.pid);
        let now_ns = monotonic_ns();
        let meta = SnapshotMeta {
            name: match end_of {
                Some(u) => format!("{}.new", u.name),
                None => self.info.snapshot_name(seq),
            },
            seq,
            trigger: match hit {
                Some(h) => Trigger::Breakpoint {
                    level: h.record.level,
                    class: h.record.class,
                    id: h.record.id,
                    multiple_mark: h.record.multiple_mark,
                    attrs: h.attrs.clone(),
                    hit: h.record.hit,
                    tid: self.ns_tid(h.tid.raw()),
                },
                None => Trigger::Timer,
            },
            time: SnapshotTime {
                wall_ns: wall_ns() - (now_ns - trigger_ns) as i64,
                since_start_ns: trigger_ns.saturating_sub(self.started_ns),
            },
            process,
            threads,
            mappings: collected.mappings,
            auxv: self.auxv.clone(),
            stats: CaptureStats {
                mode: Tracking::mode_name(self.capturer.tracking()).into(),
                copied_bytes: collected.copied.iter().map(|r| r.bytes() as u64).sum(),
                copy_ns: collected.copy_ns,
                ..stats
            },
            files,
            signals,
            layout: layout.unwrap_or_default(),
        };
        let spans = Spans {
            copied: collected.copied.iter().map(PageRun::span).collect(),
            unchanged: collected.unchanged.iter().map(PageRun::span).collect(),
            first_sight_bytes: collected.first_sight_bytes,
            live: collected.live,
        };
        (meta, spans)
    }

    /// Ends the program (a refinement that has what it was for): kills it, every
    /// process of its namespace with it, and waits until it is gone.
    fn stop_program(&mut self) {
        match self.init.take() {
            Some(init) => sdt_sys::kill_namespace(init),
            None => {
                sdt_sys::kill_process(self.pid, libc::SIGKILL).ok();
                while let Ok((tid, stop)) = sdt_sys::wait::wait_any() {
                    if tid == self.pid
                        && matches!(stop, sdt_sys::wait::Stop::Exited(_) | sdt_sys::wait::Stop::Killed(..))
                    {
                        break;
                    }
                }
            }
        }
    }

    /// The id thread `host` (an id in our namespace) has in the program's namespace.
    fn ns_tid(&mut self, host: i32) -> i32 {
        let (Some(map), Some(tid)) = (&mut self.ns_tids, Tid::new(host)) else { return host };
        *map.entry(tid).or_insert_with(|| procfs::ns_tid(tid).unwrap_or(host))
    }

    /// The program image's vDSO, found on first use.
    fn vdso(&mut self, via: Tid) -> Result<Vdso, VdsoError> {
        match self.vdso {
            Some(vdso) => Ok(vdso),
            None => Ok(*self.vdso.insert(Vdso::find(via)?)),
        }
    }

    /// The dispositions of the caught and ignored signals, read by injected calls on a
    /// held thread. Only caught signals cost a call.
    fn signal_actions(
        &mut self,
        via: Tid,
        breaking: Option<Tid>,
        caught: u64,
        ignored: u64,
    ) -> Result<Vec<sdt_store::SignalAction>, String> {
        if let Some(read) = self.tracer.signal_actions(caught, ignored) {
            return read;
        }
        let syscall_at =
            if caught == 0 { 0 } else { self.vdso(via).map_err(|e| human::error_chain(&e))?.syscall_at };
        let tracer = self.tracer.injector().ok_or("no way to read the signal handlers")?;
        let thread = tracer.injection_thread(breaking).unwrap_or(via);
        signals::read_actions(tracer, thread, syscall_at, caught, ignored)
            .map_err(|e| format!("reading signal handlers: {}", human::error_chain(&e)))
    }

    /// Sets write tracking up on the first capture of a program image, if the run wants
    /// it and the kernel has it.
    fn start_tracking(&mut self, via: Tid, breaking: Option<Tid>) -> Result<(), Error> {
        if self.capturer.tracking() || self.tracking_failed || self.opts.tracking == Tracking::PageHash {
            return Ok(());
        }
        if self.tracer.injector().is_none() {
            // The kernel module: nothing can make the program create a userfaultfd.
            log::info!(
                "changed pages are found by comparing page hashes (the kmod backend cannot inject system calls)"
            );
            self.tracking_failed = true;
            return Ok(());
        }
        let vdso = self.vdso(via).map_err(TrackingError::from);
        let tracer = self.tracer.injector().expect("checked above");
        let thread = tracer.injection_thread(breaking).unwrap_or(via);
        let started =
            vdso.and_then(|vdso| tracking::start(tracer, self.pid, thread, vdso, self.capturer.pagemap()));
        match started {
            Ok(uffd) => {
                self.capturer.track_with(uffd);
                Ok(())
            }
            Err(e) if self.opts.tracking == Tracking::UffdWp => Err(Error::Tracking(e)),
            Err(e) => {
                self.tracking_failed = true;
                log::warn!(
                    "dirty-page tracking is off ({}); comparing page hashes instead",
                    human::error_chain(&e)
                );
                Ok(())
            }
        }
    }

    /// Resumes every thread but `held`, which waits for its breakpoint's result.
    fn resume_others(&mut self, held: Tid) -> Result<(), Error> {
        match self.tracer.resume_others(held) {
            Ok(()) => Ok(()),
            // The program is ending; its exit report comes next.
            Err(FreezeError::TargetGone(_) | FreezeError::Skip(_)) => Ok(()),
            Err(FreezeError::Sys(e)) if e.is_gone() => Ok(()),
            Err(FreezeError::Sys(e)) => Err(e.into()),
        }
    }

    fn thaw(&mut self, breakpoint: Option<(&BreakpointHit, i64)>, turn_off: bool) -> Result<(), Error> {
        match self.tracer.thaw(breakpoint, turn_off) {
            Ok(()) => Ok(()),
            // The program is ending; its exit report comes next.
            Err(FreezeError::TargetGone(_) | FreezeError::Skip(_)) => Ok(()),
            Err(FreezeError::Sys(e)) if e.is_gone() => Ok(()),
            Err(FreezeError::Sys(e)) => Err(e.into()),
        }
    }
}
