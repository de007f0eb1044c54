//! The freeze interface: how the capture stops and resumes every thread of the target.
//!
//! The capture needs three things of a backend: tell it when a breakpoint passes, stop
//! every thread with its registers, and resume them together. ptrace provides them here
//! ([`crate::ptrace::Tracer`]); the kernel module provides them where it is loaded.

use sdt_abi::TrapRecord;
use sdt_store::ThreadState;
use sdt_sys::Tid;

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

    /// Resumes every thread `freeze` stopped, the breaking thread last. If a breakpoint
    /// caused the capture, its thread's call returns `result`; with `turn_off`, the
    /// program's breakpoints stop trapping from now on.
    fn thaw(&mut self, breakpoint: Option<(&BreakpointHit, i64)>, turn_off: bool) -> Result<(), FreezeError>;
}
