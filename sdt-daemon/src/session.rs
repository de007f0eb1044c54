//! One run in progress: the daemon loop, and the snapshot a breakpoint or a timer tick
//! asks for, in steps.
//!
//! ```text
//!  step        what                                           the program's threads
//!  decide      does it capture? (filter, max_snapshots,       a breakpoint's stopped (Held)
//!              the store's room); if not, release
//!  freeze      stop every thread                              all stopped (Frozen)
//!  capture     pages into the spare; registers, open files,   all stopped
//!              signal dispositions
//!  resume      all but a breakpoint's thread                  a breakpoint's waits
//!  describe    the snapshot's metadata (thread names and      running
//!              the process read now, then put together)
//!  commit      into the store; the breakpoint's thread gets   all running
//!              the snapshot's number
//! ```
//!
//! Stopped threads are a value ([`Held`], [`Frozen`]): each step that ends the capture
//! resumes them with its outcome, and one that fails (`?`) drops the value, which
//! resumes them all, the breakpoint's call returning `SDT_DECLINED`.

use std::collections::HashMap;
use std::time::Duration;

use sdt_abi::{RESULT_DECLINED, RESULT_FILTERED};
use sdt_store::{
    CaptureStats, FileState, ItimerKind, MemoryLayout, OpenFile, PageSpan, ProcessInfo, RunInfo,
    SignalAction, SnapshotMeta, SnapshotTime, SpillFile, ThreadScheduling, ThreadState, Timers, Trigger,
};
use sdt_sys::events::{Event, Events};
use sdt_sys::{Tid, monotonic_ns};

use crate::capture::{CaptureError, Capturer, Collected, PageRun, Phases};
use crate::freeze::{
    BreakpointHit, EventSource, FatalSignal, FreezeError, Freezer, Frozen, Held, TargetEvent,
};
use crate::tracking::{self, Tracking, Vdso};
use crate::writer::{CaptureUnderWay, Room, StoreWriter};
use crate::{Error, ProgramExit, RunOptions, Target, Until, human, mpi, procfs, signals, wall_ns};

/// One run in progress: the backend that stops the program, and the rest.
pub(crate) struct Session<'a, B> {
    /// What stops the program's threads: ptrace, or the kernel module.
    pub tracer: B,
    pub rec: Recorder<'a>,
}

/// What a run keeps besides its backend: the program's image as captures know it, the
/// store writer, the snapshots so far.
pub(crate) struct Recorder<'a> {
    pub pid: Tid,
    pub image: Image,
    /// The process as last read.
    pub process: ProcessInfo,
    pub writer: StoreWriter,
    pub opts: &'a RunOptions,
    /// The run, as created.
    pub info: RunInfo,
    /// For a restored process: its namespace's init.
    pub init: Option<Tid>,
    /// For a restored process: thread ids in its namespace, by ids in ours.
    pub ns_tids: Option<HashMap<Tid, i32>>,
    /// Descriptors (number, target) the program got from `sdt run` at launch.
    pub inherited: Vec<(i32, String)>,
    /// An MPI program's `mpi-events`, whose count each snapshot records.
    pub mpi_events: Option<mpi::RankEvents>,
    pub started_ns: u64,
    /// When the last capture let the program run again.
    pub resumed_ns: u64,
    pub next_seq: u32,
    /// False once `max_snapshots` is reached.
    pub capturing: bool,
    /// The user was told that without a config every breakpoint captures.
    pub told_unfiltered: bool,
    /// The user was told that the program's signal handlers go unrecorded.
    pub told_handlers_unread: bool,
    pub problems: Vec<String>,
    /// The snapshot stored at a fatal signal (its name).
    pub at_signal: Option<String>,
    /// The snapshot stored as the time limit ran out (its name).
    pub at_deadline: Option<String>,
    /// The file the program runs (after its last `execve`); `None` for a restored one.
    pub exe: Option<String>,
    /// That file shows libsdt ([`launch::links_libsdt`]): the program may break.
    pub shows_libsdt: bool,
    /// A breakpoint trapped (captured or not).
    pub reached_breakpoint: bool,
}

/// What captures know of the program's current image: `execve` starts a new one.
pub(crate) struct Image {
    pub capturer: Capturer,
    /// Tracking could not be set up for it.
    tracking_failed: bool,
    /// Its auxiliary vector.
    auxv: Vec<u8>,
    /// Its memory layout (its `brk` aside).
    layout: Option<MemoryLayout>,
    /// Its vDSO, for injected system calls.
    vdso: Option<Vdso>,
    /// Its descriptors, as the last capture read them.
    fds: procfs::FdTable,
}

impl Image {
    /// An image of which only its pagemap (`capturer`) is known yet.
    pub(crate) fn new(capturer: Capturer) -> Image {
        let fds = procfs::FdTable::default();
        Image { capturer, tracking_failed: false, auxv: Vec::new(), layout: None, vdso: None, fds }
    }

    /// The vDSO, found on first use.
    fn vdso(&mut self, live_thread: Tid) -> Result<Vdso, tracking::VdsoError> {
        match self.vdso {
            Some(vdso) => Ok(vdso),
            None => Ok(*self.vdso.insert(Vdso::find(live_thread)?)),
        }
    }
}

/// What a snapshot is taken for.
enum Cause {
    /// A breakpoint that passed the program's filter.
    Breakpoint(BreakpointHit),
    /// A timer tick (`every_ms`).
    Timer,
    /// A signal about to end the program.
    Signal(FatalSignal),
}

impl Cause {
    /// The breakpoint, if a breakpoint is the cause.
    fn hit(&self) -> Option<&BreakpointHit> {
        match self {
            Cause::Breakpoint(hit) => Some(hit),
            Cause::Timer | Cause::Signal(_) => None,
        }
    }

    /// The signal, if a fatal signal is the cause.
    fn signal(&self) -> Option<&FatalSignal> {
        match self {
            Cause::Signal(signal) => Some(signal),
            Cause::Breakpoint(_) | Cause::Timer => None,
        }
    }
}

/// Whether a breakpoint or tick is captured.
enum Decision {
    /// Yes; `ends`: it is the breakpoint that ends the refinement.
    Capture { ends: bool },
    /// No: the threads go on, the breakpoint's call returning `result`; with `turn_off`,
    /// the program's breakpoints stop trapping.
    Release { result: i64, turn_off: bool },
}

/// When the steps of one snapshot happened (`CLOCK_MONOTONIC`), for its statistics and
/// the debug log.
#[derive(Default)]
struct Timing {
    trigger_ns: u64,
    seen_ns: u64,
    /// Waited for the store's room and the spare.
    wait_ns: u64,
    /// Of `wait_ns`, waited for the last snapshot's writes to give the capture buffer
    /// back: only the breakpoint's own thread is held meanwhile (as it used to be for its
    /// own commit), so it is left out of the pause and the deviation. (Not with the kernel
    /// module, which holds every thread from the trigger: 0 there.)
    settle_ns: u64,
    freeze_ns: u64,
    capture_ns: u64,
    captured_ns: u64,
    resumed_ns: u64,
}

impl Timing {
    fn log(&self, seq: u32, phases: &Phases) {
        log::debug!(
            "S{seq} pause {} µs: seen {} µs after the trap, store room and spare {} µs, freeze {} µs, \
             capture {} µs ({phases}), resume {} µs",
            (self.resumed_ns - self.trigger_ns) / 1000,
            self.seen_ns.saturating_sub(self.trigger_ns) / 1000,
            (self.freeze_ns - self.seen_ns) / 1000,
            (self.capture_ns - self.freeze_ns) / 1000,
            (self.captured_ns - self.capture_ns) / 1000,
            (self.resumed_ns - self.captured_ns) / 1000,
        );
    }
}

/// What a capture read with every thread stopped.
struct Captured {
    /// The thread memory was read through.
    live_thread: Tid,
    collected: Collected,
    threads: Vec<ThreadState>,
    files: Vec<OpenFile>,
    signals: Vec<SignalAction>,
    /// Caught signals whose handlers were not read.
    unread_handlers: u64,
    timers: Timers,
    /// When the last thread stopped.
    all_stopped_ns: u64,
    /// An MPI program's events recorded so far.
    mpi_events: Option<u64>,
}

/// What a snapshot's metadata takes besides the capture, read once the program runs
/// again.
struct Details {
    process: ProcessInfo,
    layout: MemoryLayout,
    /// The breaking thread's id in the program's namespace.
    trigger_tid: Option<i32>,
    /// The wall-clock time of the trigger.
    trigger_wall_ns: i64,
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

impl<B: EventSource> Session<'_, B> {
    /// The daemon loop: breakpoints and program exit from the tracer; timer ticks and
    /// signals from `events`.
    pub(crate) fn run_to_end(&mut self, events: &mut Events) -> Result<ProgramExit, Error> {
        let mut deadline = self.rec.opts.time_limit.map(|limit| (limit, monotonic_ns()));
        // The time limit ran out, and the program was killed: its end is `TimedOut`.
        let mut stopping = false;
        let attached = match self.rec.opts.target {
            Target::Attach { watch, .. } => Some(watch),
            _ => None,
        };
        if let Some(watch) = attached {
            // Where it is now: what the user attached for.
            if self.rec.capturing
                && let Some(exit) = self.snapshot(Cause::Timer)?
            {
                return Ok(exit);
            }
            if !watch {
                return self.let_go();
            }
        }
        loop {
            while let Some(event) = self.tracer.poll()? {
                let exit = match event {
                    TargetEvent::Breakpoint(hit) => {
                        self.rec.reached_breakpoint = true;
                        self.snapshot(Cause::Breakpoint(hit))?
                    }
                    // Taken before the signal is delivered: the thaw delivers it.
                    TargetEvent::FatalSignal(signal) => self.snapshot(Cause::Signal(signal))?,
                    TargetEvent::Exec => {
                        // A new image: new pagemap, new tracking, new auxv.
                        self.rec.image = Image::new(Capturer::new(self.rec.pid)?);
                        if self.rec.exe.is_some() {
                            self.rec.exe = crate::program_file(self.rec.pid);
                            self.rec.shows_libsdt = shows_libsdt(self.rec.exe.as_deref());
                            self.rec.expect_captures();
                        }
                        None
                    }
                    TargetEvent::Exited(exit) => Some(exit),
                };
                if let Some(exit) = exit {
                    log::debug!("the program has ended: {exit:?}");
                    return Ok(if stopping { ProgramExit::TimedOut } else { exit });
                }
            }
            let left = match deadline {
                Some((limit, from)) => {
                    let spent = Duration::from_nanos(monotonic_ns().saturating_sub(from));
                    match limit.checked_sub(spent) {
                        Some(left) if !left.is_zero() => Some(left),
                        _ => {
                            if let Some(exit) = self.overdue(limit)? {
                                return Ok(exit);
                            }
                            (deadline, stopping) = (None, true);
                            None
                        }
                    }
                }
                None => None,
            };
            for event in events.wait_with(self.tracer.wake_fd(), left)? {
                match event {
                    // The backend has something: the loop's next poll takes it.
                    Event::Ready => {}
                    Event::Signal { signo: libc::SIGCHLD, .. } => {}
                    // The program is not sdt's: the user is done watching it.
                    Event::Signal { signo, .. } if attached.is_some() => {
                        log::info!("signal {signo}: letting the program go");
                        return self.let_go();
                    }
                    // Sent to sdt by another process (`kill`): pass it on. Signals from
                    // the terminal (SI_KERNEL) reached the program's group already.
                    Event::Signal { signo, code, .. } if code <= 0 => {
                        log::info!("forwarding signal {signo} to the program");
                        self.tracer.signal(signo).ok();
                    }
                    Event::Signal { .. } => {}
                    Event::Timer if self.rec.capturing => {
                        let resumed_before = self.rec.resumed_ns;
                        if let Some(exit) = self.snapshot(Cause::Timer)? {
                            return Ok(exit);
                        }
                        // No snapshot (a failed or skipped capture): the program ran on
                        // from now, and the next try waits a whole interval too.
                        if self.rec.resumed_ns == resumed_before {
                            self.rec.resumed_ns = monotonic_ns();
                        }
                        // The next one comes a whole interval after the program resumed,
                        // however long this capture took: slow captures do not pile up
                        // and leave the program no time to run. Its commit, which the
                        // program does not wait for, counts in the interval.
                        if let Some(every) = self.rec.opts.config.every_ms.map(Duration::from_millis) {
                            let since =
                                Duration::from_nanos(monotonic_ns().saturating_sub(self.rec.resumed_ns));
                            events.set_interval_after(every.saturating_sub(since), every)?;
                        }
                    }
                    Event::Timer => {}
                }
            }
        }
    }

    /// A program still running when its time limit, `limit`, ran out: a snapshot of where
    /// it is (unless `max_snapshots` was reached), then it is ended. A restored one is
    /// gone on return (`TimedOut`); a launched one is killed, and the loop sees it end
    /// (`None`): its tracer takes its threads through their exit stops.
    fn overdue(&mut self, limit: Duration) -> Result<Option<ProgramExit>, Error> {
        if let Target::Attach { .. } = self.rec.opts.target {
            log::info!("watched the program for {limit:?}: letting it go");
            return self.let_go().map(Some);
        }
        log::info!("the program is still running after its time limit of {limit:?}: ending it");
        let seq = self.rec.next_seq;
        if self.rec.capturing {
            if let Some(exit) = self.snapshot(Cause::Timer)? {
                return Ok(Some(exit));
            }
            if self.rec.next_seq > seq {
                self.rec.at_deadline = Some(self.rec.info.snapshot_name(seq));
            }
        }
        self.rec.capturing = false;
        if self.rec.init.is_some() {
            self.rec.stop_program();
            return Ok(Some(ProgramExit::TimedOut));
        }
        sdt_sys::kill_process(self.rec.pid, libc::SIGKILL).ok();
        Ok(None)
    }

    /// Lets an attached program go: it runs on ([`ProgramExit::Detached`]), or it had
    /// ended (its exit).
    fn let_go(&mut self) -> Result<ProgramExit, Error> {
        match self.tracer.let_go() {
            Ok(()) => Ok(ProgramExit::Detached),
            Err(FreezeError::TargetGone(exit)) => Ok(exit),
            Err(FreezeError::Skip(why)) => Err(Error::LetGo(why)),
            Err(FreezeError::Sys(e)) => Err(e.into()),
        }
    }

    /// Takes one snapshot, for a breakpoint, a timer tick or a fatal signal. Returns the
    /// program's exit if it ended meanwhile.
    fn snapshot(&mut self, cause: Cause) -> Result<Option<ProgramExit>, Error> {
        let hit = cause.hit();
        let trigger_ns = hit.map_or_else(monotonic_ns, |h| h.record.trigger_ns);
        let mut timing = Timing { trigger_ns, seen_ns: monotonic_ns(), ..Timing::default() };
        let Session { tracer, rec } = self;
        let all_stopped_at_trigger = hit.is_some() && tracer.stops_all_at_trigger();
        let held = match cause.signal() {
            Some(signal) => Held::at_signal(tracer, signal),
            None => Held::new(tracer, hit),
        };
        let ends = match rec.decide(&cause, &mut timing) {
            Decision::Capture { ends } => ends,
            Decision::Release { result, turn_off } => {
                return Ok(held.release(result, turn_off).map(|()| None)?);
            }
        };
        // The spare thread holds still until the program runs again.
        let Some((mut spill, under_way)) = rec.take_spare(&mut timing) else {
            return Ok(held.release(RESULT_DECLINED, false).map(|()| None)?);
        };
        // Every thread waited too: the wait is part of the pause.
        if all_stopped_at_trigger {
            timing.settle_ns = 0;
        }
        timing.freeze_ns = monotonic_ns();
        let mut frozen = match held.freeze() {
            Ok(frozen) => frozen,
            Err(FreezeError::TargetGone(exit)) => return Ok(Some(exit)),
            Err(FreezeError::Skip(why)) => {
                log::debug!("no snapshot now: {why}");
                return Ok(None);
            }
            Err(FreezeError::Sys(e)) => return Err(e.into()),
        };
        // The program is about to die of a fatal signal: nothing to track from now on.
        if cause.signal().is_none() {
            rec.start_tracking(&mut frozen)?;
        }
        timing.capture_ns = monotonic_ns();
        let captured = match rec.capture(&mut frozen, &mut spill) {
            Ok(captured) => captured,
            Err(e) => {
                rec.capture_failed(&e, !matches!(cause, Cause::Timer));
                return Ok(frozen.release(RESULT_DECLINED, false).map(|()| None)?);
            }
        };
        timing.captured_ns = monotonic_ns();
        rec.store(frozen, captured, spill, under_way, ends, timing)
    }
}

/// Whether the program file `exe` shows libsdt, as far as can be told.
pub(crate) fn shows_libsdt(exe: Option<&str>) -> bool {
    exe.is_some_and(|exe| crate::launch::links_libsdt(std::path::Path::new(exe)))
}

impl Recorder<'_> {
    /// Tells the store writer whether a capture may come soon: one of a program sdt did
    /// not launch (attached to, restored) may; of one it launched, where it shows libsdt,
    /// or `--break`, `--every` or the MPI history asks for one. Otherwise only a fatal
    /// signal or the time limit would capture it.
    pub(crate) fn expect_captures(&self) {
        let opts = self.opts;
        let launched = matches!(opts.target, Target::Launch(_));
        let asked = !opts.breaks.is_empty() || opts.config.every_ms.is_some() || self.mpi_events.is_some();
        self.writer.expect_captures(self.capturing && (!launched || asked || self.shows_libsdt));
    }

    /// Whether a snapshot is taken for `cause`. One for a fatal signal is, unless the
    /// store has no room: it is the program's last.
    fn decide(&mut self, cause: &Cause, timing: &mut Timing) -> Decision {
        if let Cause::Signal(_) = cause {
            return self.room_for(false, timing);
        }
        let hit = cause.hit();
        let until = self.until();
        let ends = matches!((until, hit), (Some(u), Some(h)) if u.reached_by(h));
        if let (Some(u), Some(h)) = (until, hit)
            && !ends
            && u.same_breakpoint(h)
            && !passes(&self.opts.config.filter, h)
        {
            // It trapped only because the refinement forces the breakpoint it ends at.
            return Decision::Release { result: RESULT_FILTERED, turn_off: false };
        }
        if !self.capturing {
            return Decision::Release { result: RESULT_DECLINED, turn_off: true };
        }
        if !self.told_unfiltered && self.opts.config.text.is_empty() && hit.is_some() && !self.opts.quiet {
            self.told_unfiltered = true;
            eprintln!(
                "sdt: no --config: every breakpoint captures (a snapshot per arrival); to capture fewer, \
                 pass --config FILE with max_level, classes, ids, hits or max_snapshots (see `sdt run --help`)"
            );
        }
        match self.room_for(hit.is_none(), timing) {
            Decision::Capture { .. } => Decision::Capture { ends },
            release => release,
        }
    }

    /// Whether the store has room for a snapshot (`timed`: a timer's, skipped rather than
    /// waited for); one it has none for is counted as lost, unless timed.
    fn room_for(&mut self, timed: bool, timing: &mut Timing) -> Decision {
        match self.writer.room(timed) {
            Room::Ready(waited) => {
                timing.wait_ns = waited;
                Decision::Capture { ends: false }
            }
            Room::Skipped(why) => {
                log::info!("no snapshot S{}: {why}", self.next_seq);
                if !timed {
                    self.writer.lost(format!("S{}: {why}", self.next_seq));
                }
                Decision::Release { result: RESULT_DECLINED, turn_off: false }
            }
        }
    }

    /// A spare for the capture, and what keeps the spare thread still until the program
    /// runs again; `None` (counted as lost) if the store has no room for one.
    fn take_spare(&mut self, timing: &mut Timing) -> Option<(SpillFile, CaptureUnderWay)> {
        match self.writer.take_spare() {
            Ok((spill, made_ns, settle_ns, under_way)) => {
                timing.wait_ns += made_ns;
                timing.settle_ns = settle_ns;
                Some((spill, under_way))
            }
            Err(e) => {
                let why = human::error_chain(&e);
                self.writer.lost(format!("S{}: the store has no room: {why}", self.next_seq));
                None
            }
        }
    }

    /// The breakpoint that ends a refinement, if this run is one.
    fn until(&self) -> Option<&Until> {
        match &self.opts.target {
            Target::Restore(from) => from.until.as_ref(),
            Target::Launch(_) | Target::Attach { .. } => None,
        }
    }

    /// Sets write tracking up on the first capture of a program image, if the run wants
    /// it and the kernel has it.
    fn start_tracking<B: EventSource>(&mut self, frozen: &mut Frozen<'_, B>) -> Result<(), Error> {
        let image = &mut self.image;
        if image.capturer.tracking() || image.tracking_failed || self.opts.tracking == Tracking::PageHash {
            return Ok(());
        }
        let Some(live_thread) = frozen.live_thread else { return Ok(()) };
        if frozen.injector().is_none() {
            // The kernel module: nothing can make the program create a userfaultfd.
            log::info!(
                "changed pages are found by comparing page hashes (the kmod backend cannot inject system calls)"
            );
            image.tracking_failed = true;
            return Ok(());
        }
        let breaking = frozen.breaking();
        let vdso = image.vdso(live_thread).map_err(tracking::TrackingError::from);
        let tracer = frozen.injector().expect("checked above");
        let thread = tracer.injection_thread(breaking).unwrap_or(live_thread);
        let started =
            vdso.and_then(|vdso| tracking::start(tracer, self.pid, thread, vdso, image.capturer.pagemap()));
        match started {
            Ok(uffd) => {
                image.capturer.track_with(uffd);
                Ok(())
            }
            // Killed meanwhile, its memory perhaps gone already: the capture finds that
            // and is dropped.
            Err(_) if frozen.killed() => Ok(()),
            Err(e) if self.opts.tracking == Tracking::UffdWp => Err(Error::Tracking(e)),
            Err(e) => {
                image.tracking_failed = true;
                log::warn!(
                    "dirty-page tracking is off ({}); comparing page hashes instead",
                    human::error_chain(&e)
                );
                Ok(())
            }
        }
    }

    /// What must be read with every thread stopped: the pages (into `spill`), and, while
    /// the capture threads copy them, the registers, open files and signal dispositions.
    fn capture<B: EventSource>(
        &mut self,
        frozen: &mut Frozen<'_, B>,
        spill: &mut SpillFile,
    ) -> Result<Captured, CaptureError> {
        let live_thread = frozen.live_thread.ok_or(CaptureError::Exiting)?;
        let mpi_events = self.mpi_events.as_ref().and_then(mpi::RankEvents::recorded);
        // Where injected calls would read the signal handlers: its seccomp mode is read with
        // the signal sets, while the pages are copied.
        let breaking = frozen.breaking();
        let injection_thread =
            frozen.injector().and_then(|t| t.injection_thread(breaking)).unwrap_or(live_thread);
        let (pid, fds) = (self.pid, &mut self.image.fds);
        let (collected, (threads, files, signal_state, posix_timers)) =
            self.image.capturer.collect(live_thread, spill, self.opts.verify, || {
                let signal_state = procfs::signals_and_seccomp(injection_thread);
                (
                    frozen.read_threads(),
                    fds.read(pid, live_thread),
                    signal_state,
                    procfs::posix_timers(live_thread),
                )
            })?;
        let mut threads = threads?;
        let mut files = files.map_err(CaptureError::OpenFiles)?;
        for f in &mut files {
            f.inherited = self.inherited.iter().any(|(fd, target)| *fd == f.fd && *target == f.target);
        }
        // The kernel may have taken a killed process's memory while it was copied: the
        // pages that failed would read as zeros in a snapshot of nothing real. (Read whole,
        // the snapshot stands: a killed thread's registers are still those of its stop.)
        if !collected.unreadable.is_empty() && frozen.killed() {
            return Err(CaptureError::Killed);
        }
        if let Some(first) = collected.unreadable.first() {
            let pages = collected.unreadable.len();
            log::warn!("{pages} page(s) could not be read and are stored as zero, first at {first:#x}");
        }
        let (sets, seccomp) = signal_state.map_err(CaptureError::SignalSets)?;
        let timers = signals::timers_to_read(sets.0 | read_by_signalfd(&files), blocked_everywhere(&threads));
        let signals = self.signal_actions(
            frozen,
            live_thread,
            signals::Callers { first: injection_thread, seccomp, breaking },
            &mut threads,
            sets,
            &timers,
        )?;
        Ok(Captured {
            live_thread,
            collected,
            threads,
            files,
            signals: signals.actions,
            unread_handlers: signals.unread,
            timers: Timers { itimers: signals.itimers, posix: posix_timers },
            all_stopped_ns: frozen.all_stopped_ns,
            mpi_events,
        })
    }

    /// The dispositions of the caught and ignored signals (`sets`), the interval `timers`
    /// asked for and, where a handler runs on one, the signal stacks of `threads`: as the
    /// backend read them (no timers; the stacks with the registers), or read by calls
    /// injected into held threads, the `callers` first (see [`signals::read_actions`]).
    /// Only caught signals and timers cost a call.
    fn signal_actions<B: EventSource>(
        &mut self,
        frozen: &mut Frozen<'_, B>,
        live_thread: Tid,
        callers: signals::Callers,
        threads: &mut [ThreadState],
        sets: (u64, u64),
        timers: &[ItimerKind],
    ) -> Result<signals::Dispositions, CaptureError> {
        let (caught, ignored) = sets;
        if let Some(read) = frozen.signal_actions(caught, ignored) {
            return Ok(signals::Dispositions { actions: read?, itimers: None, unread: 0, refused: None });
        }
        let syscall_at =
            if caught == 0 && timers.is_empty() { 0 } else { self.image.vdso(live_thread)?.syscall_at };
        let tracer = frozen.injector().ok_or(CaptureError::SignalHandlersUnread(
            "the backend can neither read them nor inject calls",
        ))?;
        let read = signals::read_actions(tracer, callers, threads, syscall_at, sets, timers)
            .map_err(CaptureError::SignalHandlers)?;
        if let Some(refused) = &read.refused
            && !std::mem::replace(&mut self.told_handlers_unread, true)
        {
            log::warn!(
                "the program's signal handlers go unrecorded ({}): its snapshots cannot be resumed",
                human::error_chain(refused)
            );
        }
        Ok(read)
    }

    /// Records a failed capture: a breakpoint's (or a fatal signal's) that the store had
    /// no room for is lost; a timed one that came as the program was exiting is no
    /// problem (it ended first); any other is said once, with the run's end.
    fn capture_failed(&mut self, e: &CaptureError, untimed: bool) {
        let mut message = format!("capture of S{} failed: {}", self.next_seq, human::error_chain(e));
        if e.refused() {
            message.push_str(
                " (the program made itself non-dumpable, with prctl(PR_SET_DUMPABLE, 0) or a change of its \
                 user or group: only a tracer with CAP_SYS_PTRACE may read it; run sdt as root, or give it \
                 CAP_SYS_PTRACE)",
            );
        }
        if e.no_room() && untimed {
            self.writer.lost(message);
        } else if !untimed && matches!(e, CaptureError::Exiting) {
            log::debug!("{message}");
        } else {
            log::debug!("{message}");
            // The same failure again (the next timed capture's, say) is said once.
            if !self.problems.contains(&message) {
                self.problems.push(message);
            }
        }
    }

    /// Resumes the program as the capture's kind asks, commits the snapshot, and gives a
    /// breakpoint's waiting thread its number. A refinement that has reached its end
    /// stops the program instead.
    fn store<B: Freezer>(
        &mut self,
        mut frozen: Frozen<'_, B>,
        mut captured: Captured,
        spill: SpillFile,
        under_way: CaptureUnderWay,
        ends: bool,
        mut timing: Timing,
    ) -> Result<Option<ProgramExit>, Error> {
        let seq = self.next_seq;
        let last = self.opts.config.max_snapshots.is_some_and(|max| seq + 1 >= max);
        let (hit, signal, trigger_thread) = (frozen.hit(), frozen.signal(), frozen.breaking());
        // The thread that waits for its number, while the others run on. A symbol
        // breakpoint's thread gets no number (it is moved past the function's entry); the
        // end of a refinement stays stopped until the program is ended.
        let waiting = match hit {
            _ if ends => Some(frozen),
            Some(h) if h.record_addr != 0 => {
                frozen.resume_others()?;
                Some(frozen)
            }
            _ => {
                frozen.release(i64::from(seq), last)?;
                None
            }
        };
        timing.resumed_ns = monotonic_ns();
        self.resumed_ns = timing.resumed_ns;
        drop(under_way);
        timing.log(seq, &captured.collected.phases);
        let details = self.details(&mut captured, trigger_thread, timing.trigger_ns);
        let end_of = self.until().filter(|_| ends);
        let trigger = trigger(hit, signal, details.trigger_tid);
        let (meta, spans) = self.describe(seq, trigger, end_of, captured, details, &timing);
        let copied = (meta.stats.copied_bytes - spans.first_sight_bytes) as usize;
        // Only a breakpoint's thread waits for its number: its writes go to a writer
        // child. A timed snapshot's are written here, while the program runs (so that the
        // next one, which needs the capture buffer, does not wait for them in its pause),
        // and so is the end of a refinement, before the program is ended.
        let now = ends || waiting.is_none();
        let result = self.commit(spill, &meta, spans, now);
        // The next capture likely copies about as much: have a spare ready for it, in the
        // capture buffer the commit gave back.
        if !ends {
            self.writer.prepare(copied);
        }
        let stored = result >= 0;
        if signal.is_some() && stored {
            self.at_signal = Some(meta.name.clone());
        }
        if last && stored {
            self.capturing = false;
            log::info!("max_snapshots reached: no more snapshots");
        }
        match waiting {
            Some(frozen) if ends => {
                frozen.keep_stopped();
                self.stop_program();
                return Ok(Some(ProgramExit::Stopped));
            }
            Some(frozen) => frozen.release(result, last && stored)?,
            None => {}
        }
        Ok(None)
    }

    /// Commits the snapshot (`now`: written before this returns, else handed to a writer
    /// child); its number, or `SDT_DECLINED` (counted as lost) if the store could not
    /// take it.
    fn commit(&mut self, spill: SpillFile, meta: &SnapshotMeta, spans: Spans, now: bool) -> i64 {
        match self.writer.commit(spill, &spans.copied, &spans.unchanged, meta, spans.live, now) {
            Ok(_) => {
                self.next_seq += 1;
                i64::from(meta.seq)
            }
            Err(e) => {
                let why = human::error_chain(&e);
                self.writer.lost(format!("{}: the store could not take it: {why}", meta.name));
                // Its pages' written bits were taken by the scan: the next capture copies all.
                self.image.capturer.capture_lost();
                RESULT_DECLINED
            }
        }
    }

    /// What need not be read with the program stopped, read now: the threads' names,
    /// scheduling and ids in the program's namespace (set in `captured`), the process,
    /// and, once per image, its auxiliary vector and memory layout.
    fn details(&mut self, captured: &mut Captured, trigger_tid: Option<Tid>, trigger_ns: u64) -> Details {
        let live_thread = captured.live_thread;
        let mut scheduling = Vec::with_capacity(captured.threads.len());
        for t in &mut captured.threads {
            let ns_tid = self.ns_tid(t.tid);
            if let Some(tid) = Tid::new(t.tid) {
                t.name = procfs::thread_name(self.pid, tid);
                // A thread that exits meanwhile has none to read.
                if let Ok(s) = sdt_sys::sched::of(tid) {
                    let cpus = ThreadScheduling::cpu_list(&s.cpus);
                    let (policy, priority, nice) = (s.policy, s.priority, s.nice);
                    scheduling.push(ThreadScheduling { tid: ns_tid, policy, priority, nice, cpus });
                }
            }
            t.tid = ns_tid;
        }
        if let Ok(process) =
            procfs::process_info(self.pid, live_thread).or_else(|_| procfs::process_info(self.pid, self.pid))
        {
            self.process = process;
        }
        let image = &mut self.image;
        if image.auxv.is_empty() {
            image.auxv = sdt_procfs::read(live_thread, "auxv").unwrap_or_default();
        }
        if image.layout.is_none() {
            image.layout = procfs::memory_layout(live_thread, &captured.collected.mappings)
                .inspect_err(|e| log::warn!("reading the memory layout: {e}"))
                .ok();
        }
        // Only the break moves during an image's life: it is the heap mapping's end.
        let heap_end = captured.collected.mappings.iter().find(|m| m.path == "[heap]").map(|m| m.end);
        let layout = image.layout.map(|l| MemoryLayout { brk: heap_end.unwrap_or(l.start_brk), ..l });
        let mut process = self.process.clone();
        process.pid = self.ns_tid(process.pid);
        process.scheduling = scheduling;
        Details {
            process,
            layout: layout.unwrap_or_default(),
            trigger_tid: trigger_tid.map(|tid| self.ns_tid(tid.raw())),
            trigger_wall_ns: wall_ns() - (monotonic_ns() - trigger_ns) as i64,
        }
    }

    /// The snapshot's metadata, and its pages as the store takes them: what the capture
    /// and [`Recorder::details`] read, put together.
    fn describe(
        &self,
        seq: u32,
        trigger: Trigger,
        end_of: Option<&Until>,
        captured: Captured,
        details: Details,
        timing: &Timing,
    ) -> (SnapshotMeta, Spans) {
        let Captured { collected, threads, files, signals, unread_handlers, timers, all_stopped_ns, .. } =
            captured;
        let stats = CaptureStats {
            mode: Tracking::mode_name(self.image.capturer.tracking()).into(),
            pause_ns: timing.resumed_ns.saturating_sub(timing.trigger_ns + timing.settle_ns),
            deviation_ns: all_stopped_ns.saturating_sub(timing.trigger_ns + timing.settle_ns),
            wait_ns: timing.wait_ns,
            copied_bytes: collected.copied.iter().map(|r| r.bytes() as u64).sum(),
            copy_ns: collected.copy_ns,
            ..CaptureStats::default()
        };
        let meta = SnapshotMeta {
            name: end_of.map_or_else(|| self.info.snapshot_name(seq), |u| format!("{}.new", u.name)),
            seq,
            trigger,
            time: SnapshotTime {
                wall_ns: details.trigger_wall_ns,
                since_start_ns: timing.trigger_ns.saturating_sub(self.started_ns),
            },
            process: details.process,
            threads,
            mappings: collected.mappings,
            auxv: self.image.auxv.clone(),
            stats,
            files,
            signals,
            unread_handlers,
            layout: details.layout,
            mpi_events: captured.mpi_events,
            timers,
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
}

/// The signals some signalfd of `files` reads (bit `n-1` for signal `n`).
fn read_by_signalfd(files: &[OpenFile]) -> u64 {
    files
        .iter()
        .filter_map(|f| match f.state {
            Some(FileState::Signalfd { mask }) => Some(mask),
            _ => None,
        })
        .fold(0, |all, mask| all | mask)
}

/// The signals every one of `threads` blocks, as a `sigwait` wants them.
fn blocked_everywhere(threads: &[ThreadState]) -> u64 {
    if threads.is_empty() {
        return 0;
    }
    threads.iter().fold(u64::MAX, |all, t| all & t.sigmask)
}

/// What took the snapshot, as the store keeps it: the breakpoint `hit`, the fatal
/// `signal`, or (with neither) the timer; `tid` is the thread's id in the program's
/// namespace.
fn trigger(hit: Option<&BreakpointHit>, signal: Option<&FatalSignal>, tid: Option<i32>) -> Trigger {
    match (hit, signal, tid) {
        (Some(h), _, Some(tid)) => Trigger::Breakpoint {
            level: h.record.level,
            class: h.record.class,
            id: h.record.id,
            multiple_mark: h.record.multiple_mark,
            attrs: h.attrs.clone(),
            hit: h.record.hit,
            tid,
        },
        (None, Some(s), Some(tid)) => Trigger::Signal { signo: s.signo, code: s.code, addr: s.addr, tid },
        _ => Trigger::Timer,
    }
}

/// Whether a breakpoint passes the capture filter by its own numbers, attributes and hit
/// (a forced one traps whatever the filter says).
fn passes(filter: &sdt_abi::Filter, hit: &BreakpointHit) -> bool {
    let r = &hit.record;
    filter.matches_numbers(r.level, r.class, r.id)
        && filter.matches_attrs(hit.attrs.as_bytes())
        && filter.matches_hit(r.hit)
}
