//! The tracer's wake-ups: signals (`SIGCHLD` when a tracee stops, `SIGINT`, …) through a
//! signalfd, and timed snapshots through a timerfd, waited on together with `poll`.

use std::os::fd::{AsFd, BorrowedFd};
use std::time::Duration;

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::signal::{SigSet, SigmaskHow, Signal, pthread_sigmask};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use nix::sys::time::TimeSpec;
use nix::sys::timer::Expiration;
use nix::sys::timerfd::{ClockId, TimerFd, TimerFlags, TimerSetTimeFlags};

use crate::{Error, Result};

/// Something that woke the tracer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// A signal arrived for this process.
    Signal {
        /// Signal number.
        signo: i32,
        /// `si_code`: `SI_USER` (0) when another process sent it with `kill`,
        /// `SI_KERNEL` (0x80) for the terminal's keys.
        code: i32,
        /// Sender's pid for `SI_USER`.
        pid: i32,
    },
    /// The interval timer expired (once or more since the last wait).
    Timer,
    /// The descriptor given to [`Events::wait_with`] is readable.
    Ready,
}

/// A signalfd for a set of signals, which are blocked for normal delivery, plus an
/// optional interval timer.
#[derive(Debug)]
pub struct Events {
    signals: SignalFd,
    timer: TimerFd,
}

/// `pthread_sigmask(SIG_SETMASK, {})`: the calling thread blocks no signal. For a process
/// started by one that had blocked signals for its [`Events`] (the mask is inherited
/// across `execve`): call it before starting any thread.
pub fn unblock_all_signals() -> Result<()> {
    pthread_sigmask(SigmaskHow::SIG_SETMASK, Some(&SigSet::empty()), None)
        .map_err(|e| nix_err("pthread_sigmask", e))
}

fn nix_err(call: &'static str, e: nix::errno::Errno) -> Error {
    Error { call, tid: 0, source: std::io::Error::from_raw_os_error(e as i32) }
}

impl Events {
    /// `pthread_sigmask(SIG_BLOCK, signals)` + `signalfd(signals)` + `timerfd_create`.
    ///
    /// Threads inherit the blocked mask, so call this before starting any, and unblock
    /// in a child before `execve` (as [`crate::spawn`] does).
    pub fn new(signals: &[i32]) -> Result<Events> {
        let mut set = SigSet::empty();
        for &s in signals {
            set.add(Signal::try_from(s).map_err(|e| nix_err("sigaddset", e))?);
        }
        pthread_sigmask(SigmaskHow::SIG_BLOCK, Some(&set), None)
            .map_err(|e| nix_err("pthread_sigmask", e))?;
        let signals = SignalFd::with_flags(&set, SfdFlags::SFD_NONBLOCK | SfdFlags::SFD_CLOEXEC)
            .map_err(|e| nix_err("signalfd", e))?;
        let timer =
            TimerFd::new(ClockId::CLOCK_MONOTONIC, TimerFlags::TFD_NONBLOCK | TimerFlags::TFD_CLOEXEC)
                .map_err(|e| nix_err("timerfd_create", e))?;
        Ok(Events { signals, timer })
    }

    /// `timerfd_settime`: expire every `interval` from now on, or never (`None`).
    pub fn set_interval(&mut self, interval: Option<Duration>) -> Result<()> {
        match interval {
            Some(every) => self
                .timer
                .set(Expiration::Interval(TimeSpec::from_duration(every)), TimerSetTimeFlags::empty()),
            None => self.timer.unset(),
        }
        .map_err(|e| nix_err("timerfd_settime", e))
    }

    /// `timerfd_settime`: expire after `first` (at once if zero), then every `every`.
    pub fn set_interval_after(&mut self, first: Duration, every: Duration) -> Result<()> {
        // A zero first expiration would disarm the timer.
        let first = first.max(Duration::from_nanos(1));
        self.timer
            .set(
                Expiration::IntervalDelayed(TimeSpec::from_duration(first), TimeSpec::from_duration(every)),
                TimerSetTimeFlags::empty(),
            )
            .map_err(|e| nix_err("timerfd_settime", e))
    }

    /// `poll` on the signalfd and the timerfd: blocks until something happens (or
    /// `timeout` passes), then returns everything that did, signals first.
    pub fn wait(&mut self, timeout: Option<Duration>) -> Result<Vec<Event>> {
        self.wait_with(None, timeout)
    }

    /// [`Events::wait`], also woken when `also` becomes readable ([`Event::Ready`], last).
    pub fn wait_with(
        &mut self,
        also: Option<BorrowedFd<'_>>,
        timeout: Option<Duration>,
    ) -> Result<Vec<Event>> {
        let timeout = match timeout {
            None => PollTimeout::NONE,
            Some(d) => PollTimeout::try_from(d).unwrap_or(PollTimeout::MAX),
        };
        let mut fds = vec![
            PollFd::new(self.signals.as_fd(), PollFlags::POLLIN),
            PollFd::new(self.timer.as_fd(), PollFlags::POLLIN),
        ];
        fds.extend(also.map(|fd| PollFd::new(fd, PollFlags::POLLIN)));
        match poll(&mut fds, timeout) {
            Ok(_) | Err(nix::errno::Errno::EINTR) => {}
            Err(e) => return Err(nix_err("poll", e)),
        }
        let ready = fds.get(2).and_then(PollFd::revents).is_some_and(|r| r.contains(PollFlags::POLLIN));
        let mut events = Vec::new();
        while let Some(info) = self.signals.read_signal().map_err(|e| nix_err("read signalfd", e))? {
            events.push(Event::Signal {
                signo: info.ssi_signo as i32,
                code: info.ssi_code,
                pid: info.ssi_pid as i32,
            });
        }
        let mut expirations = [0u8; 8];
        if nix::unistd::read(&self.timer, &mut expirations).is_ok() {
            events.push(Event::Timer);
        }
        if ready {
            events.push(Event::Ready);
        }
        Ok(events)
    }
}

/// Waits up to `timeout` for `fd` to become readable or reach its end (a pipe whose
/// writer has gone); `false` when the time ran out first.
pub fn wait_readable(fd: BorrowedFd<'_>, timeout: Duration) -> Result<bool> {
    let timeout = PollTimeout::try_from(timeout).unwrap_or(PollTimeout::MAX);
    let mut fds = [PollFd::new(fd, PollFlags::POLLIN)];
    loop {
        match poll(&mut fds, timeout) {
            Ok(n) => return Ok(n > 0),
            // A signal's handler ran: the wait is short, start it again.
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(nix_err("poll", e)),
        }
    }
}
