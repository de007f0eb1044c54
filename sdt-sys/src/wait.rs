//! `waitpid` on traced threads, decoded by hand so that real-time signals survive.
//!
//! # Safety
//!
//! `waitpid` writes one `int` into a local. A bounded wait's timer and its signal's
//! do-nothing handler are set up with zeroed, then filled, structs (see
//! `WakeTimer::of_this_thread`).

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
/// Blocks in `waitpid` as [`wait_any`] does (a stopping tracee hands its CPU straight to
/// the tracer), with a timer of the calling thread armed to interrupt it at `deadline`.
#[doc(alias = "waitpid")]
pub fn wait_any_until(deadline: Instant) -> Result<Option<(Tid, Stop)>> {
    wait_until(-1, deadline)
}

/// The next report of one of `tids`, threads just single-stepped, whose reports are due
/// within microseconds: looks at each with `WNOHANG` for up to `spin`, yielding the CPU
/// between looks, so that a report is taken as it comes rather than once this thread is
/// woken for it (tens of microseconds on a virtual machine); then blocks for the first of
/// them until `deadline`. Each is waited for by its tid: `waitpid(-1)` looks through every
/// traced thread for each report, tens of microseconds in a program of a thousand.
#[doc(alias = "waitpid")]
pub fn wait_some_soon(tids: &[Tid], spin: Duration, deadline: Instant) -> Result<Option<(Tid, Stop)>> {
    let spin_until = (Instant::now() + spin).min(deadline);
    loop {
        for &tid in tids {
            if let Some(report) = poll_for(tid)? {
                return Ok(Some(report));
            }
        }
        match tids.first() {
            Some(&tid) if Instant::now() >= spin_until => return wait_for_until(tid, deadline),
            Some(_) => std::thread::yield_now(),
            None => return Ok(None),
        }
    }
}

/// [`wait_for`] that gives up at `deadline`: `None` if `tid` did not report by then.
#[doc(alias = "waitpid")]
pub fn wait_for_until(tid: Tid, deadline: Instant) -> Result<Option<(Tid, Stop)>> {
    wait_until(tid.raw(), deadline)
}

fn wait_until(pid: i32, deadline: Instant) -> Result<Option<(Tid, Stop)>> {
    WakeTimer::with(|timer| {
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                // A last look: what came meanwhile still counts.
                return wait(pid, libc::__WALL | libc::WNOHANG);
            }
            timer.set(left)?;
            let report = waitpid_once(pid, libc::__WALL);
            timer.set(Duration::ZERO)?;
            match report {
                Err(e) if e.errno() == libc::EINTR => continue,
                other => return other,
            }
        }
    })
}

/// The signal that interrupts a blocked `waitpid` of a thread in [`wait_until`]: a
/// real-time signal whose handler does nothing, installed without `SA_RESTART`.
fn wake_signal() -> i32 {
    libc::SIGRTMAX()
}

/// How often the wake timer fires again once due, in case a signal came just before the
/// `waitpid` it was meant to interrupt.
const WAKE_REPEAT: Duration = Duration::from_millis(5);

/// A `CLOCK_MONOTONIC` timer that sends [`wake_signal`] to the thread that made it.
struct WakeTimer(libc::timer_t);

thread_local! {
    static WAKE_TIMER: std::cell::OnceCell<WakeTimer> = const { std::cell::OnceCell::new() };
}

impl WakeTimer {
    /// Runs `f` with this thread's timer, made on first use (the process's first also
    /// installs the signal's handler).
    fn with<R>(f: impl FnOnce(&WakeTimer) -> Result<R>) -> Result<R> {
        static HANDLER: std::sync::Once = std::sync::Once::new();
        HANDLER.call_once(|| {
            extern "C" fn interrupt(_: libc::c_int) {}
            // SAFETY: a handler that does nothing, for a signal nothing else uses; the
            // struct is zeroed (an empty mask, no flags: no SA_RESTART) before use.
            unsafe {
                let mut action = std::mem::zeroed::<libc::sigaction>();
                action.sa_sigaction = interrupt as extern "C" fn(libc::c_int) as usize;
                libc::sigaction(wake_signal(), &action, std::ptr::null_mut());
            }
        });
        WAKE_TIMER.with(|cell| {
            if cell.get().is_none() {
                cell.set(WakeTimer::create()?).ok();
            }
            f(cell.get().expect("set above"))
        })
    }

    /// `timer_create(CLOCK_MONOTONIC, SIGEV_THREAD_ID)` for this thread, with the signal
    /// unblocked for this thread.
    fn create() -> Result<WakeTimer> {
        // SAFETY: `set` and `event` are zeroed, then filled; the kernel writes the new
        // timer's id into `timer`.
        unsafe {
            let mut set = std::mem::zeroed::<libc::sigset_t>();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, wake_signal());
            libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
            let mut event = std::mem::zeroed::<libc::sigevent>();
            event.sigev_notify = libc::SIGEV_THREAD_ID;
            event.sigev_signo = wake_signal();
            event.sigev_notify_thread_id = crate::current_tid().raw();
            let mut timer: libc::timer_t = std::ptr::null_mut();
            if libc::timer_create(libc::CLOCK_MONOTONIC, &mut event, &mut timer) != 0 {
                return Err(Error::last("timer_create", 0));
            }
            Ok(WakeTimer(timer))
        }
    }

    /// `timer_settime`: fires after `after`, then every [`WAKE_REPEAT`]; never for zero.
    fn set(&self, after: Duration) -> Result<()> {
        let spec = |d: Duration| libc::timespec {
            tv_sec: d.as_secs() as libc::time_t,
            tv_nsec: d.subsec_nanos().into(),
        };
        let repeat = if after.is_zero() { Duration::ZERO } else { WAKE_REPEAT };
        let value = libc::itimerspec { it_value: spec(after), it_interval: spec(repeat) };
        // SAFETY: `value` is a valid itimerspec; no old value is asked for.
        if unsafe { libc::timer_settime(self.0, 0, &value, std::ptr::null_mut()) } != 0 {
            return Err(Error::last("timer_settime", 0));
        }
        Ok(())
    }
}

impl Drop for WakeTimer {
    fn drop(&mut self) {
        // SAFETY: the timer was made by timer_create and is deleted once.
        unsafe { libc::timer_delete(self.0) };
    }
}

/// One `waitpid`, retried on `EINTR`: `None` when `WNOHANG` found nothing to report.
fn wait(pid: i32, flags: i32) -> Result<Option<(Tid, Stop)>> {
    loop {
        match waitpid_once(pid, flags) {
            Err(e) if e.errno() == libc::EINTR => continue,
            other => return other,
        }
    }
}

/// `waitpid(pid, &status, flags)`, once: `EINTR` is an error.
fn waitpid_once(pid: i32, flags: i32) -> Result<Option<(Tid, Stop)>> {
    let mut status = 0;
    // SAFETY: `status` is a valid, writable int.
    let rc = unsafe { libc::waitpid(pid, &mut status, flags) };
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
    #[allow(clippy::zombie_processes, reason = "reaped by wait_for_until")]
    fn a_bounded_wait_ends_at_its_deadline_and_sees_what_comes_before() {
        let mut child = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        let tid = Tid::new(child.id() as i32).unwrap();
        let start = Instant::now();
        // For this child only: another test's children are not taken.
        assert_eq!(wait_for_until(tid, start + Duration::from_millis(50)).unwrap(), None);
        let waited = start.elapsed();
        assert!(waited >= Duration::from_millis(50) && waited < Duration::from_secs(5), "{waited:?}");
        child.kill().unwrap();
        let report = wait_for_until(tid, Instant::now() + Duration::from_secs(10)).unwrap();
        assert_eq!(report, Some((tid, Stop::Killed(libc::SIGKILL, false))));
    }

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
