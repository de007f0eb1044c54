//! The freeze interface: how the capture stops and resumes every thread of the target.
//!
//! The capture needs three things of a backend: tell it when a breakpoint passes, stop
//! every thread with its registers, and resume them together ([`Freezer`]), plus the
//! program's events for the daemon loop ([`EventSource`]). ptrace provides them
//! ([`crate::ptrace::Tracer`]: breakpoints are `int3` stops, the freeze is
//! `PTRACE_INTERRUPT`); so does the kernel module where it is loaded
//! ([`crate::kmod::Kmod`]: breakpoints arrive already frozen through `/dev/sdt`, the
//! program's end through `SIGCHLD`).
//!
//! ```text
//!                       ptrace (Tracer)                     kernel module (Kmod)
//!  breakpoint           int3 stop seen by waitpid           /dev/sdt readable, every
//!                                                           thread already held
//!  freeze (timer)       PTRACE_INTERRUPT each thread        SDT_IOC_FREEZE + SDT_IOC_GET
//!  registers            PTRACE_GETREGSET per thread         from SDT_IOC_GET
//!  signal handlers      injected rt_sigaction               from SDT_IOC_GET
//!  write tracking       injected userfaultfd                none: page hashes
//!  thaw                 PTRACE_CONT each thread             SDT_IOC_RELEASE
//!  program's end        waitpid                             SIGCHLD, waitpid
//! ```

use std::os::fd::BorrowedFd;

use sdt_abi::{RESULT_DECLINED, TrapRecord};
use sdt_store::{SignalAction, ThreadState};
use sdt_sys::Tid;
use sdt_sys::wait::Stop;

use crate::capture::CaptureError;
use crate::human::error_chain;
use crate::ptrace::Tracer;

/// A thread stopped at a breakpoint that passed the program's filter.
#[derive(Clone, Debug)]
pub(crate) struct BreakpointHit {
    /// The breaking thread.
    pub tid: Tid,
    /// What it reported.
    pub record: TrapRecord,
    /// Where the record lies in the target, for writing the result back.
    pub record_addr: u64,
    /// The attribute string (lossy UTF-8).
    pub attrs: String,
}

impl BreakpointHit {
    /// The hit of thread `tid`, stopped with `record` (at `record_addr`); its attribute
    /// string is read from the program.
    pub(crate) fn read(tid: Tid, record: TrapRecord, record_addr: u64) -> BreakpointHit {
        let mut attrs = vec![0u8; record.attrs_len.min(sdt_abi::kmod::ATTRS_MAX) as usize];
        if let Err(e) = sdt_sys::memory::read_exact(tid, record.attrs_ptr, &mut attrs) {
            log::warn!("thread {tid}: breakpoint attributes unreadable ({e}); recorded as empty");
            attrs.clear();
        }
        BreakpointHit { tid, record, record_addr, attrs: String::from_utf8_lossy(&attrs).into_owned() }
    }
}

/// A signal about to end the program, held at its delivery: its thread stays stopped
/// until the thaw, which delivers it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FatalSignal {
    /// The thread it is delivered to.
    pub tid: Tid,
    /// The signal.
    pub signo: i32,
    /// Its `si_code`.
    pub code: i32,
    /// A fault's address (`si_addr`), else 0.
    pub addr: u64,
}

/// How the program ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProgramExit {
    /// Exited with this code.
    Code(i32),
    /// Killed by this signal (and dumped core if the flag is set).
    Signal(i32, bool),
    /// Ended by `sdt` itself: a refinement that reached the breakpoint it was for.
    Stopped,
    /// Ended by `sdt` itself: its time limit ran out
    /// ([`RunOptions::time_limit`](crate::RunOptions::time_limit)), after a snapshot of
    /// where it was.
    TimedOut,
    /// Not ended: sdt let it go, and it runs on ([`Target::Attach`](crate::Target::Attach)).
    Detached,
}

impl ProgramExit {
    /// The end a wait status reports, if it reports one.
    pub(crate) fn from_stop(stop: Stop) -> Option<ProgramExit> {
        match stop {
            Stop::Exited(code) => Some(ProgramExit::Code(code)),
            Stop::Killed(signal, core) => Some(ProgramExit::Signal(signal, core)),
            Stop::Signal(_) | Stop::Event(..) => None,
        }
    }
}

/// Something the daemon loop must act on.
#[derive(Clone, Debug)]
pub(crate) enum TargetEvent {
    /// A breakpoint passed; its thread is stopped until [`Freezer::thaw`] (see [`Held`]).
    Breakpoint(BreakpointHit),
    /// A signal is about to end the program; its thread is stopped until the thaw
    /// delivers it.
    FatalSignal(FatalSignal),
    /// The program called `execve`: a new image, the same pid.
    Exec,
    /// The program ended.
    Exited(ProgramExit),
}

/// Every thread stopped, as a backend reports it (see [`Held::freeze`]).
#[derive(Debug)]
pub(crate) struct Stopped {
    /// `CLOCK_MONOTONIC` when the last thread stopped.
    pub all_stopped_ns: u64,
    /// A stopped thread that has not exited, through which memory can be read (the
    /// leader may have exited); `None` if every thread is exiting.
    pub live_thread: Option<Tid>,
}

/// Why a capture could not be made.
#[derive(Debug, thiserror::Error)]
pub(crate) enum FreezeError {
    /// The program ended while its threads were being stopped or read.
    #[error("the program ended during the capture ({0:?})")]
    TargetGone(ProgramExit),
    /// No capture now, and nothing wrong (a timed snapshot while a breakpoint's capture
    /// is under way).
    #[error("capture skipped: {0}")]
    Skip(&'static str),
    /// A system call failed.
    #[error(transparent)]
    Sys(#[from] sdt_sys::Error),
}

/// Stops and resumes every thread of the target.
pub(crate) trait Freezer {
    /// Whether a breakpoint stops every thread at once (the kernel module does), not its
    /// own thread alone: then a wait before the freeze pauses the whole program.
    fn stops_all_at_trigger(&self) -> bool {
        false
    }

    /// Stops every thread, including ones blocked in system calls, just created or
    /// exiting. A thread already stopped at a breakpoint stays stopped. On failure the
    /// threads that stopped stay stopped (but for `TargetGone`: there are none left):
    /// [`Held::freeze`] resumes them.
    fn freeze_all(&mut self, breaking: Option<Tid>) -> Result<Stopped, FreezeError>;

    /// Every stopped thread's registers and signal mask, the breaking thread first.
    fn read_threads(&mut self, breaking: Option<Tid>) -> Result<Vec<ThreadState>, FreezeError>;

    /// Resumes every thread `freeze` stopped but `held`, a breakpoint's thread that waits
    /// for its result (its snapshot is committed first). A backend that can only release
    /// every thread together keeps them all until [`Freezer::thaw`].
    fn resume_others(&mut self, held: Tid) -> Result<(), FreezeError>;

    /// Resumes every thread `freeze` stopped, the breaking thread last. If a breakpoint
    /// caused the capture, its thread's call returns `result`; with `turn_off` (no more
    /// snapshots), the program's breakpoints stop trapping from now on: the library's
    /// state word becomes its [`sdt_abi::declined_state`], under which a breakpoint that
    /// passes the filter returns `SDT_DECLINED` at once (a word that is off stays off).
    fn thaw(&mut self, breakpoint: Option<(&BreakpointHit, i64)>, turn_off: bool) -> Result<(), FreezeError>;

    /// Whether thread `tid`, which `freeze` stopped, runs again without being resumed:
    /// its process is being killed. `false` where the backend cannot tell.
    fn killed_since_freeze(&self, tid: Tid) -> bool {
        let _ = tid;
        false
    }
}

/// The program's events, for the daemon loop, and what a capture reads through the
/// backend besides registers.
pub(crate) trait EventSource: Freezer {
    /// The next breakpoint or the program's end, if one is ready; handles every other
    /// report on the way. Never blocks.
    fn poll(&mut self) -> Result<Option<TargetEvent>, sdt_sys::Error>;

    /// A descriptor that becomes readable when [`EventSource::poll`] has something that
    /// no `SIGCHLD` announces.
    fn wake_fd(&self) -> Option<BorrowedFd<'_>>;

    /// Sends `signal` to the program, as `kill` would.
    fn signal(&self, signal: i32) -> Result<(), sdt_sys::Error>;

    /// The ptrace tracer holding the program, to inject system calls into a held
    /// thread; `None` where the backend cannot.
    fn injector(&mut self) -> Option<&mut Tracer>;

    /// Stops watching the program, which runs on untraced (one sdt attached to);
    /// `TargetGone` if it ended first.
    fn let_go(&mut self) -> Result<(), FreezeError>;

    /// The dispositions of the `caught` and `ignored` signals (bit `n - 1` for signal
    /// `n`), where the freeze read them; `None`: read them by injection.
    fn signal_actions(&self, caught: u64, ignored: u64) -> Option<Result<Vec<SignalAction>, CaptureError>>;
}

/// Threads of the program held stopped for a capture: a breakpoint's thread at its trap
/// (with the kernel module, every thread), a thread at the delivery of a fatal signal,
/// or, without either, those a restore left stopped (none otherwise). The value owns the
/// stopped state, as remoteprocess's `ThreadLock` does: [`Held::release`] resumes the
/// threads with the outcome the capture chose, [`Held::freeze`] stops every other thread
/// too; dropped, it resumes every thread (the breakpoint's call returns `SDT_DECLINED`,
/// the signal is delivered) and says so.
pub(crate) struct Held<'a, B: Freezer> {
    backend: &'a mut B,
    hit: Option<&'a BreakpointHit>,
    /// The signal whose delivery a thread is held at, which the thaw delivers.
    signal: Option<&'a FatalSignal>,
    /// Something is stopped that nothing has resumed yet: a drop resumes it.
    pending: bool,
}

impl<'a, B: Freezer> Held<'a, B> {
    /// The threads `backend` holds stopped for `hit` (or, without one, for a restore).
    pub(crate) fn new(backend: &'a mut B, hit: Option<&'a BreakpointHit>) -> Held<'a, B> {
        Held { backend, hit, signal: None, pending: hit.is_some() }
    }

    /// The thread `backend` holds at the delivery of a fatal signal.
    pub(crate) fn at_signal(backend: &'a mut B, signal: &'a FatalSignal) -> Held<'a, B> {
        Held { backend, hit: None, signal: Some(signal), pending: true }
    }

    /// The thread the capture is for: a breakpoint's, or a fatal signal's.
    fn trigger_thread(&self) -> Option<Tid> {
        self.hit.map(|h| h.tid).or(self.signal.map(|s| s.tid))
    }

    /// Resumes every thread: a breakpoint's call returns `result`; with `turn_off`, the
    /// program's breakpoints stop trapping (see [`Freezer::thaw`]).
    pub(crate) fn release(mut self, result: i64, turn_off: bool) -> Result<(), sdt_sys::Error> {
        self.resume(result, turn_off)
    }

    /// Stops every other thread too. When that fails, the threads go on (the
    /// breakpoint's call returns `SDT_DECLINED`), unless the program has ended.
    pub(crate) fn freeze(mut self) -> Result<Frozen<'a, B>, FreezeError> {
        match self.backend.freeze_all(self.trigger_thread()) {
            Ok(stopped) => {
                self.pending = true;
                Ok(Frozen {
                    held: self,
                    all_stopped_ns: stopped.all_stopped_ns,
                    live_thread: stopped.live_thread,
                })
            }
            Err(FreezeError::TargetGone(exit)) => {
                self.pending = false;
                Err(FreezeError::TargetGone(exit))
            }
            Err(FreezeError::Skip(why)) => {
                self.resume(RESULT_DECLINED, false)?;
                Err(FreezeError::Skip(why))
            }
            // Dropped: what stopped goes on.
            Err(e) => Err(e),
        }
    }

    /// [`Freezer::thaw`], once. A program that ends meanwhile is no error: its end is
    /// the backend's next event.
    fn resume(&mut self, result: i64, turn_off: bool) -> Result<(), sdt_sys::Error> {
        self.pending = false;
        let thawed = self.backend.thaw(self.hit.map(|h| (h, result)), turn_off);
        unless_ended(thawed, &*self.backend, "resuming the program's threads")
    }
}

impl<B: Freezer> Drop for Held<'_, B> {
    fn drop(&mut self) {
        if !self.pending {
            return;
        }
        match (self.hit, self.signal.map(|s| s.tid)) {
            (Some(hit), _) => log::warn!(
                "a capture was abandoned: every thread resumes, thread {}'s breakpoint returns SDT_DECLINED",
                hit.tid
            ),
            (None, Some(tid)) => {
                log::warn!("a capture was abandoned: every thread resumes, thread {tid} with its signal")
            }
            (None, None) => log::warn!("a capture was abandoned: every thread resumes"),
        }
        if let Err(e) = self.resume(RESULT_DECLINED, false) {
            log::warn!("threads of the program may stay stopped: {}", error_chain(&e));
        }
    }
}

/// Every thread of the program stopped ([`Held::freeze`]): what a capture reads. Its
/// methods resume the threads; dropped, it resumes every one as a [`Held`] does.
pub(crate) struct Frozen<'a, B: Freezer> {
    held: Held<'a, B>,
    /// `CLOCK_MONOTONIC` when the last thread stopped.
    pub all_stopped_ns: u64,
    /// A stopped thread that has not exited, through which memory can be read (the
    /// leader may have exited); `None` if every thread is exiting.
    pub live_thread: Option<Tid>,
}

impl<'a, B: Freezer> Frozen<'a, B> {
    /// The breakpoint the capture is for, if any.
    pub(crate) fn hit(&self) -> Option<&'a BreakpointHit> {
        self.held.hit
    }

    /// The fatal signal the capture is for, if any.
    pub(crate) fn signal(&self) -> Option<&'a FatalSignal> {
        self.held.signal
    }

    /// The thread the capture is for: a breakpoint's, or a fatal signal's.
    pub(crate) fn breaking(&self) -> Option<Tid> {
        self.held.trigger_thread()
    }

    /// Every stopped thread's registers and signal mask, the breaking thread first.
    pub(crate) fn read_threads(&mut self) -> Result<Vec<ThreadState>, FreezeError> {
        let breaking = self.breaking();
        self.held.backend.read_threads(breaking)
    }

    /// Resumes every thread but the breakpoint's, which waits for its result (see
    /// [`Freezer::resume_others`]).
    pub(crate) fn resume_others(&mut self) -> Result<(), sdt_sys::Error> {
        let Some(held) = self.held.hit.map(|h| h.tid) else { return Ok(()) };
        let resumed = self.held.backend.resume_others(held);
        unless_ended(resumed, &*self.held.backend, "resuming the other threads")
    }

    /// Resumes every thread (see [`Held::release`]).
    pub(crate) fn release(self, result: i64, turn_off: bool) -> Result<(), sdt_sys::Error> {
        self.held.release(result, turn_off)
    }

    /// Leaves every thread stopped, for good: the program is ended next (a refinement
    /// that reached its end), and nothing resumes them.
    pub(crate) fn keep_stopped(mut self) {
        self.held.pending = false;
    }
}

impl<B: EventSource> Frozen<'_, B> {
    /// The ptrace tracer holding the program, to inject system calls into a held thread
    /// (see [`EventSource::injector`]).
    pub(crate) fn injector(&mut self) -> Option<&mut Tracer> {
        self.held.backend.injector()
    }

    /// See [`EventSource::signal_actions`].
    pub(crate) fn signal_actions(
        &self,
        caught: u64,
        ignored: u64,
    ) -> Option<Result<Vec<SignalAction>, CaptureError>> {
        self.held.backend.signal_actions(caught, ignored)
    }

    /// Whether the program was killed since the freeze (see [`Freezer::killed_since_freeze`]),
    /// as `live_thread` shows.
    pub(crate) fn killed(&self) -> bool {
        self.live_thread.is_some_and(|tid| self.held.backend.killed_since_freeze(tid))
    }
}

/// The outcome of resuming `backend`'s threads (`what`): the program ending meanwhile is
/// an ordinary outcome, not an error (its end is the backend's next event), logged as
/// what was dropped; any other failure is returned.
fn unless_ended(
    result: Result<(), FreezeError>,
    backend: &impl Freezer,
    what: &str,
) -> Result<(), sdt_sys::Error> {
    match result {
        Ok(()) => Ok(()),
        Err(FreezeError::TargetGone(exit)) => {
            log::debug!("{what}: the program ended meanwhile ({exit:?}); its end is reported next");
            Ok(())
        }
        // A killed process's memory may be gone before its threads: writing the result
        // faults then.
        Err(FreezeError::Sys(e))
            if e.is_gone() || Tid::new(e.tid).is_some_and(|t| backend.killed_since_freeze(t)) =>
        {
            log::debug!("{what}: {}; the thread is gone, its exit report follows", error_chain(&e));
            Ok(())
        }
        Err(FreezeError::Skip(why)) => {
            log::warn!("{what}: {why}");
            Ok(())
        }
        Err(FreezeError::Sys(e)) => Err(e),
    }
}
