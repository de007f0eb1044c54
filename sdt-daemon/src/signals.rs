//! Signal dispositions of a frozen program, for a restore to set again.
//!
//! `/proc/PID/status` tells which signals are caught (`SigCgt`) and ignored (`SigIgn`),
//! but not the handlers. For each caught signal, one held thread runs an injected
//! `rt_sigaction(sig, NULL, &old)` whose answer lands below its stack's red zone, in
//! memory the program does not use; programs catch few signals, so this costs a few
//! injected calls per capture, and none for a program that catches nothing.
//!
//! Nothing in `/proc` shows the interval timers (`setitimer`, `alarm`) either: each
//! one whose signal the program handles (caught, or read by a signalfd; for `SIGALRM`,
//! also blocked in every thread, for a `sigwait`) is read by an injected `getitimer`, so
//! that a program waiting for its alarm gets it after a resume too. A timer whose
//! signal keeps its default action is not read: the program would only die of it.

use bytemuck::{Pod, Zeroable};
use sdt_store::{Itimer, ItimerKind, SIG_IGN, SeccompMode, SignalAction};
use sdt_sys::ptrace;
use sdt_sys::{Tid, memory};

use crate::ptrace::{InjectionRefused, Tracer};

/// `struct kernel_sigaction` of x86_64, as `rt_sigaction` writes it.
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct KernelSigaction {
    handler: u64,
    flags: u64,
    restorer: u64,
    /// The kernel's `sigset_t`: 8 bytes on x86_64.
    mask: u64,
}

/// `struct itimerval` of x86_64, as `getitimer` writes it: seconds and microseconds.
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct Itimerval {
    interval: [i64; 2],
    value: [i64; 2],
}

/// The x86_64 System V red zone below the stack pointer.
const RED_ZONE: u64 = 128;

/// What a capture learns of the program's signal dispositions and interval timers.
pub(crate) struct Dispositions {
    /// The dispositions read, ascending.
    pub actions: Vec<SignalAction>,
    /// The interval timers running of those asked for; `None` if they were not read
    /// (refused, as `refused` says).
    pub itimers: Option<Vec<Itimer>>,
    /// Caught signals whose handlers were not read (bit `n-1` for signal `n`).
    pub unread: u64,
    /// Why they were not.
    pub refused: Option<InjectionRefused>,
}

/// Why handlers were not read.
enum Unread {
    Refused(InjectionRefused),
    Sys(sdt_sys::Error),
}

impl From<InjectionRefused> for Unread {
    fn from(e: InjectionRefused) -> Unread {
        Unread::Refused(e)
    }
}

impl From<sdt_sys::Error> for Unread {
    fn from(e: sdt_sys::Error) -> Unread {
        Unread::Sys(e)
    }
}

/// The dispositions of the `caught` and `ignored` signals (bit `n-1` for signal `n`),
/// and the interval timers of `timers`, read through `tid`, a held thread under
/// `seccomp`, with the `syscall` instruction at `syscall_at`. Where sdt may not run calls
/// in `tid` (its seccomp), the caught ones and the timers are left unread.
pub(crate) fn read_actions(
    tracer: &mut Tracer,
    tid: Tid,
    seccomp: SeccompMode,
    syscall_at: u64,
    (caught, ignored): (u64, u64),
    timers: &[ItimerKind],
) -> Result<Dispositions, sdt_sys::Error> {
    let read = match (caught, timers) {
        (0, []) => Ok((Vec::new(), Vec::new())),
        _ => tracer.with_seccomp_suspended(tid, seccomp, |tracer| {
            let answer_at = below_red_zone(tid)?;
            let handlers = handlers(tracer, tid, syscall_at, answer_at, caught)?;
            Ok((handlers, itimers(tracer, tid, syscall_at, answer_at, timers)?))
        }),
    };
    let (mut actions, itimers, unread, refused) = match read {
        Ok((handlers, itimers)) => (handlers, Some(itimers), 0, None),
        Err(Unread::Refused(e)) => (Vec::new(), None, caught, Some(e)),
        Err(Unread::Sys(e)) => return Err(e),
    };
    let signals = (1..=64i32).filter(|signo| ignored & (1u64 << (signo - 1)) != 0);
    actions.extend(signals.map(|signo| SignalAction {
        signo,
        handler: SIG_IGN,
        flags: 0,
        restorer: 0,
        mask: 0,
    }));
    actions.sort_by_key(|a| a.signo);
    Ok(Dispositions { actions, itimers, unread, refused })
}

/// The interval timers a capture reads (bit `n-1` of each set for signal `n`): those
/// whose signal the program `handles` (caught, or read by a signalfd), and
/// `ITIMER_REAL` where every thread `blocked` `SIGALRM` too (a thread `sigwait`s for
/// it). A program that blocks every signal everywhere pays one call for it, not three.
pub(crate) fn timers_to_read(handles: u64, blocked: u64) -> Vec<ItimerKind> {
    let bit = |k: ItimerKind| 1u64 << (k.signal() - 1);
    ItimerKind::ALL
        .into_iter()
        .filter(|&k| handles & bit(k) != 0 || (k == ItimerKind::Real && blocked & bit(k) != 0))
        .collect()
}

/// Those of the `kinds` of interval timer that are running, each read by an injected
/// `getitimer` whose answer lands at `answer_at`.
fn itimers(
    tracer: &mut Tracer,
    tid: Tid,
    syscall_at: u64,
    answer_at: u64,
    kinds: &[ItimerKind],
) -> Result<Vec<Itimer>, Unread> {
    let mut running = Vec::new();
    for &kind in kinds {
        let rc = tracer.inject_syscall(
            tid,
            syscall_at,
            libc::SYS_getitimer as u64,
            &[kind.which() as u64, answer_at],
        )?;
        if rc < 0 {
            log::warn!(
                "getitimer({}) in thread {tid} failed: errno {}; it is not recorded",
                kind.name(),
                -rc
            );
            continue;
        }
        let mut val = Itimerval::zeroed();
        memory::read_exact(tid, answer_at, bytemuck::bytes_of_mut(&mut val))?;
        let micros = |[secs, usecs]: [i64; 2]| {
            (secs.max(0) as u64).saturating_mul(1_000_000).saturating_add(usecs.max(0) as u64)
        };
        if micros(val.value) != 0 {
            running.push(Itimer { kind, value_us: micros(val.value), interval_us: micros(val.interval) });
        }
    }
    Ok(running)
}

/// The handlers of the `caught` signals, each read by an injected `rt_sigaction`.
fn handlers(
    tracer: &mut Tracer,
    tid: Tid,
    syscall_at: u64,
    at: u64,
    caught: u64,
) -> Result<Vec<SignalAction>, Unread> {
    let mut actions = Vec::new();
    for signo in (1..=64i32).filter(|signo| caught & (1u64 << (signo - 1)) != 0) {
        let rc = tracer.inject_syscall(
            tid,
            syscall_at,
            libc::SYS_rt_sigaction as u64,
            &[signo as u64, 0, at, 8],
        )?;
        if rc < 0 {
            log::warn!(
                "rt_sigaction({signo}) in thread {tid} failed: errno {}; its handler is not recorded",
                -rc
            );
            continue;
        }
        let mut action = KernelSigaction::zeroed();
        memory::read_exact(tid, at, bytemuck::bytes_of_mut(&mut action))?;
        let KernelSigaction { handler, flags, restorer, mask } = action;
        actions.push(SignalAction { signo, handler, flags, restorer, mask });
    }
    Ok(actions)
}

/// Room for one `struct kernel_sigaction` (or `struct itimerval`) below the thread's red
/// zone, 16-aligned.
fn below_red_zone(tid: Tid) -> Result<u64, sdt_sys::Error> {
    let rsp = ptrace::regs(tid)?.rsp;
    Ok((rsp - RED_ZONE - 2 * size_of::<KernelSigaction>() as u64) & !15)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_timers_read_are_those_whose_signal_the_program_takes() {
        let bit = |sig: i32| 1u64 << (sig - 1);
        assert!(timers_to_read(0, 0).is_empty());
        assert!(timers_to_read(bit(libc::SIGUSR1), 0).is_empty());
        assert_eq!(timers_to_read(bit(libc::SIGALRM), 0), [ItimerKind::Real]);
        assert_eq!(
            timers_to_read(bit(libc::SIGPROF) | bit(libc::SIGVTALRM), 0),
            [ItimerKind::Virtual, ItimerKind::Prof]
        );
        // Blocked everywhere: a sigwait for SIGALRM; the profiling timers only if handled.
        assert_eq!(timers_to_read(0, u64::MAX), [ItimerKind::Real]);
    }
}
