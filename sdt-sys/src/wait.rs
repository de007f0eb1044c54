//! `waitpid` on traced threads, decoded by hand so that real-time signals survive.
//!
//! # Safety
//!
//! `waitpid` writes one `int` into a local.

#![allow(unsafe_code)]

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
/// child, or `None` if there is none right now.
#[doc(alias = "waitpid")]
pub fn poll_any() -> Result<Option<(Tid, Stop)>> {
    wait(-1, libc::__WALL | libc::WNOHANG)
}

/// `waitpid(-1, &status, __WALL)`: blocks for the next report from any traced thread.
#[doc(alias = "waitpid")]
pub fn wait_any() -> Result<(Tid, Stop)> {
    wait(-1, libc::__WALL)?.ok_or_else(|| Error {
        call: "waitpid",
        tid: -1,
        source: std::io::Error::from_raw_os_error(libc::ECHILD),
    })
}

/// `waitpid(tid, &status, __WALL | WNOHANG)`: the next report from one thread or child,
/// or `None` if there is none right now.
#[doc(alias = "waitpid")]
pub fn poll_for(tid: Tid) -> Result<Option<(Tid, Stop)>> {
    wait(tid.raw(), libc::__WALL | libc::WNOHANG)
}

/// `waitpid(tid, &status, __WALL)`: blocks for the next report from one thread.
#[doc(alias = "waitpid")]
pub fn wait_for(tid: Tid) -> Result<(Tid, Stop)> {
    Ok(wait(tid.raw(), libc::__WALL)?.expect("blocking waitpid returned no child"))
}

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
        let err = Error::last("waitpid", pid);
        return if err.errno() == libc::ECHILD { Ok(None) } else { Err(err) };
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
