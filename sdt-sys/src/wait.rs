//! `waitpid` on traced threads, decoded by hand so that real-time signals survive.
//!
//! # Safety
//!
//! `waitpid` writes one `int` into a local; `sigtimedwait` reads a local signal set and
//! timeout.

#![allow(unsafe_code)]

use std::time::{Duration, Instant};

use crate::{Error, Result, Tid};

/// What a traced thread reported.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    /// The thread exited (for a process's first thread: the process did) with this code.
    Exited(i32),
    /// The thread was killed by this signal (with a core dump if the flag is set).
    Killed(i32, bool),
    /// Signal-delivery-stop: the signal is about to be delivered; resume with it to
    /// deliver it, with 0 to suppress it.
    Signal(i32),
    /// A `PTRACE_EVENT_*` stop ([`crate::ptrace::event`]); the signal is what
    /// `WSTOPSIG` says (`SIGTRAP` for interrupts, the stop signal for group-stops).
    Event(i32, i32),
}

/// `waitpid(-1, &status, __WALL | WNOHANG)`: the next report from any traced thread or
/// child, or `None` if there is none right now (or no child at all).
#[doc(alias = "waitpid")]
pub fn poll_any() -> Result<Option<(Tid, Stop)>> {
    match wait(-1, libc::__WALL | libc::WNOHANG) {
        Err(e) if e.errno() == libc::ECHILD => Ok(None),
        other => other,
    }
}

/// `waitpid(-1, &status, __WALL)`: blocks for the next report from any traced thread.
#[doc(alias = "waitpid")]
pub fn wait_any() -> Result<(Tid, Stop)> {
    Ok(wait(-1, libc::__WALL)?.expect("waitpid without WNOHANG returned 0"))
}

/// `waitpid(tid, &status, __WALL | WNOHANG)`: the next report from one thread or child,
/// or `None` if there is none right now.
#[doc(alias = "waitpid")]
pub fn poll_for(tid: Tid) -> Result<Option<(Tid, Stop)>> {
    wait(tid.raw(), libc::__WALL | libc::WNOHANG)
}

/// `waitpid(tid, &status, __WALL)`: blocks for the next report from one thread.
///
/// A process's first thread that has exited is reported only once every other thread is
/// gone: while another thread waits for its tracer (at an exit stop), this never returns.
/// Where that can happen, use [`wait_for_until`].
#[doc(alias = "waitpid")]
pub fn wait_for(tid: Tid) -> Result<(Tid, Stop)> {
    Ok(wait(tid.raw(), libc::__WALL)?.expect("waitpid without WNOHANG returned 0"))
}

/// [`wait_any`] that gives up at `deadline`: `None` if no thread reported by then.
///
/// Sleeps in `sigtimedwait` for `SIGCHLD` between polls, so the calling thread should have
/// `SIGCHLD` blocked, as [`crate::events::Events::new`] leaves every thread; where it is
/// not, a report is noticed within a millisecond anyway.
#[doc(alias = "waitpid")]
pub fn wait_any_until(deadline: Instant) -> Result<Option<(Tid, Stop)>> {
    wait_until(-1, deadline)
}

/// [`wait_for`] that gives up at `deadline`: `None` if `tid` did not report by then.
/// Sleeps as [`wait_any_until`] does.
#[doc(alias = "waitpid")]
pub fn wait_for_until(tid: Tid, deadline: Instant) -> Result<Option<(Tid, Stop)>> {
    wait_until(tid.raw(), deadline)
}

/// The longest sleep between two polls: how late a report may be noticed when its
/// `SIGCHLD` went to another thread.
const POLL_SLICE: Duration = Duration::from_millis(1);

fn wait_until(pid: i32, deadline: Instant) -> Result<Option<(Tid, Stop)>> {
    loop {
        if let Some(report) = wait(pid, libc::__WALL | libc::WNOHANG)? {
            return Ok(Some(report));
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(None);
        }
        await_sigchld(left.min(POLL_SLICE));
    }
}

/// `sigtimedwait({SIGCHLD}, NULL, timeout)`: sleeps until a `SIGCHLD` is pending (and
/// takes it) or `timeout` passes.
#[doc(alias = "sigtimedwait")]
fn await_sigchld(timeout: Duration) {
    let timeout =
        libc::timespec { tv_sec: timeout.as_secs() as libc::time_t, tv_nsec: timeout.subsec_nanos().into() };
    // SAFETY: `set` is initialised by sigemptyset before use; sigtimedwait reads `set` and
    // `timeout` and writes nothing (no siginfo pointer).
    unsafe {
        let mut set = std::mem::zeroed::<libc::sigset_t>();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGCHLD);
        // EAGAIN (timed out) and EINTR are both "poll again".
        libc::sigtimedwait(&set, std::ptr::null_mut(), &timeout);
    }
}

/// One `waitpid`, retried on `EINTR`: `None` when `WNOHANG` found nothing to report.
fn wait(pid: i32, flags: i32) -> Result<Option<(Tid, Stop)>> {
    let mut status = 0;
    let rc = loop {
        // SAFETY: `status` is a valid, writable int.
        let rc = unsafe { libc::waitpid(pid, &mut status, flags) };
        if rc == -1 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
            continue;
        }
        break rc;
    };
    if rc == -1 {
        return Err(Error::last("waitpid", pid));
    }
    let Some(tid) = Tid::new(rc) else { return Ok(None) };
    Ok(Some((tid, decode(status))))
}

/// Decodes a wait status.
pub fn decode(status: i32) -> Stop {
    if libc::WIFEXITED(status) {
        Stop::Exited(libc::WEXITSTATUS(status))
    } else if libc::WIFSIGNALED(status) {
        Stop::Killed(libc::WTERMSIG(status), libc::WCOREDUMP(status))
    } else {
        let signal = libc::WSTOPSIG(status);
        match status >> 16 {
            0 => Stop::Signal(signal),
            event => Stop::Event(event, signal),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_statuses() {
        assert_eq!(decode(3 << 8), Stop::Exited(3));
        assert_eq!(decode(9), Stop::Killed(9, false));
        assert_eq!(decode(11 | 0x80), Stop::Killed(11, true));
        // Stopped by signal 34 (SIGRTMIN+2): 0x7f | sig << 8.
        assert_eq!(decode(0x7f | 34 << 8), Stop::Signal(34));
        // PTRACE_EVENT_STOP with SIGTRAP.
        assert_eq!(decode(0x7f | 5 << 8 | 128 << 16), Stop::Event(128, 5));
    }
}
