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

use sdt_abi::TrapRecord;
use sdt_store::{SignalAction, ThreadState};
use sdt_sys::Tid;
use sdt_sys::wait::Stop;

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

/// How the program ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProgramExit {
    /// Exited with this code.
    Code(i32),
    /// Killed by this signal (and dumped core if the flag is set).
    Signal(i32, bool),
    /// Ended by `sdt` itself: a refinement that reached the breakpoint it was for.
    Stopped,
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
    /// A breakpoint passed; its thread is stopped until [`Freezer::thaw`].
    Breakpoint(BreakpointHit),
    /// The program called `execve`: a new image, the same pid.
    Exec,
    /// The program ended.
    Exited(ProgramExit),
}

/// Every thread stopped.
#[derive(Debug)]
pub(crate) struct Frozen {
    /// `CLOCK_MONOTONIC` when the last thread stopped.
    pub all_stopped_ns: u64,
    /// A stopped thread that has not exited, through which memory can be read (the
    /// leader may have exited); `None` if every thread is exiting.
    pub via: Option<Tid>,
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
    /// Stops every thread, including ones blocked in system calls, just created or
    /// exiting. A thread already stopped at a breakpoint stays stopped.
    fn freeze(&mut self, breaking: Option<Tid>) -> Result<Frozen, FreezeError>;

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

    /// The dispositions of the `caught` and `ignored` signals (bit `n - 1` for signal
    /// `n`), where the freeze read them; `None`: read them by injection.
    fn signal_actions(&self, caught: u64, ignored: u64) -> Option<Result<Vec<SignalAction>, String>>;
}
