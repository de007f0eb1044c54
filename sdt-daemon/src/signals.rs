//! Signal dispositions of a frozen program, and its threads' alternate signal stacks,
//! for a restore to set again.
//!
//! `/proc/PID/status` tells which signals are caught (`SigCgt`) and ignored (`SigIgn`),
//! but not the handlers. For each caught signal, a held thread runs an injected
//! `rt_sigaction(sig, NULL, &old)` whose answer lands below a stack's red zone, in
//! memory the program does not use (see [`Injectors`] for whose). Most of an injected
//! call is the wait for its thread to run it and report, so a program that catches many
//! signals (Go's runtime catches nearly all) has them read by several held threads at
//! once; one that catches nothing costs nothing.
//!
//! Nothing in `/proc` shows a thread's alternate signal stack either. Where a handler
//! runs on one (`SA_ONSTACK`: Go's runtime, Rust's standard library, the sanitizers),
//! every running thread reads its own with an injected `sigaltstack(NULL, &old)`, sixteen
//! at once: Go's runtime dies of a signal taken without one.
//!
//! Nor the interval timers (`setitimer`, `alarm`): each one whose signal the program
//! handles (caught, or read by a signalfd; for `SIGALRM`, also blocked in every thread,
//! for a `sigwait`) is read by an injected `getitimer`, so that a program waiting for its
//! alarm gets it after a resume too. A timer whose signal keeps its default action is not
//! read: the program would only die of it.

use bytemuck::{Pod, Zeroable};
use sdt_store::{
    AltStack, Itimer, ItimerKind, SIG_IGN, SeccompMode, SignalAction, ThreadRunState, ThreadState,
};
use sdt_sys::{Tid, memory};

use crate::procfs;
use crate::ptrace::{Hurried, InjectionRefused, Tracer};

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

/// `stack_t` of x86_64, as `sigaltstack` writes it.
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct StackT {
    sp: u64,
    flags: u32,
    pad: u32,
    size: u64,
}

/// The x86_64 System V red zone below the stack pointer.
const RED_ZONE: u64 = 128;
/// `SA_ONSTACK`: the handler runs on the thread's alternate signal stack.
const SA_ONSTACK: u64 = 0x0800_0000;
/// `SS_DISABLE` in `stack_t.ss_flags`: no alternate signal stack.
const SS_DISABLE: u32 = 2;
/// `SS_AUTODISARM` in `stack_t.ss_flags`: the stack is off while a handler runs on it.
const SS_AUTODISARM: u32 = 1 << 31;
/// glibc's `SIGCANCEL` and `SIGSETXID`, which it handles on the signal stack.
const GLIBC_SIGNALS: [i32; 2] = [32, 33];
/// Calls in one round at most: each answer takes [`ANSWER_STRIDE`] bytes below one
/// thread's red zone.
const ROUND_CALLS: usize = 16;
/// Bytes an answer takes: the largest, `struct kernel_sigaction` and `struct itimerval`.
const ANSWER_STRIDE: u64 = 32;
/// Caught signals per held thread that reads handlers: a thread more costs a read of
/// its `status` file (its seccomp mode), a tenth of a round of calls.
const HANDLERS_PER_THREAD: usize = 4;

/// What a capture learns of the program's signal dispositions, interval timers and
/// signal stacks.
pub(crate) struct Dispositions {
    /// The dispositions read, ascending.
    pub actions: Vec<SignalAction>,
    /// The interval timers running of those asked for; `None` if they were not read
    /// (refused, as `refused` says).
    pub itimers: Option<Vec<Itimer>>,
    /// Caught signals whose handlers were not read, or run on signal stacks that were
    /// not (bit `n-1` for signal `n`).
    pub unread: u64,
    /// Why they were not.
    pub refused: Option<InjectionRefused>,
}

/// The held threads a capture's injected calls start from: the `first` to run them
/// (under `seccomp`), and the `breaking` one, if any, below whose red zone their answers
/// go (see [`Injectors`]).
#[derive(Clone, Copy)]
pub(crate) struct Callers {
    pub first: Tid,
    pub seccomp: SeccompMode,
    pub breaking: Option<Tid>,
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
/// the interval timers of `timers`, and, where a handler runs on one, the signal stack of
/// each running one of `threads` (set in place), read by calls injected into held
/// threads: the first of `callers` for all but the handlers, which others read too. The
/// `syscall` instruction is at `syscall_at`. Where sdt may not run calls in the first
/// (its seccomp), the caught ones and the timers are left unread; where it may not in
/// another thread, that thread reads no handlers, and, if a handler needs its signal
/// stack, the handlers that run on one count as unread.
pub(crate) fn read_actions(
    tracer: &mut Tracer,
    callers: Callers,
    threads: &mut [ThreadState],
    syscall_at: u64,
    (caught, ignored): (u64, u64),
    timers: &[ItimerKind],
) -> Result<Dispositions, sdt_sys::Error> {
    let read = match (caught, timers) {
        (0, []) => Ok(Injected::default()),
        _ => Injectors::new(tracer, callers, threads).and_then(|mut injectors| {
            let read = read_injected(tracer, &mut injectors, threads, syscall_at, caught, timers);
            injectors.finish(tracer);
            read
        }),
    };
    let (mut actions, itimers, unread, refused) = match read {
        Ok(Injected { handlers, itimers, stacks_refused: None }) => (handlers, Some(itimers), 0, None),
        // Those handlers would run without their stacks: as good as not read.
        Ok(Injected { mut handlers, itimers, stacks_refused: Some(refused) }) => {
            let unread = on_altstack(&handlers);
            handlers.retain(|a| unread & (1u64 << (a.signo - 1)) == 0);
            (handlers, Some(itimers), unread, Some(refused))
        }
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

/// What [`read_injected`] read.
#[derive(Default)]
struct Injected {
    handlers: Vec<SignalAction>,
    itimers: Vec<Itimer>,
    /// Why the threads' signal stacks, which a handler needs, were not read.
    stacks_refused: Option<InjectionRefused>,
}

/// [`read_actions`]' injected calls: the handlers, the timers, and the signal stacks if a
/// handler runs on one.
fn read_injected(
    tracer: &mut Tracer,
    injectors: &mut Injectors,
    threads: &mut [ThreadState],
    syscall_at: u64,
    caught: u64,
    timers: &[ItimerKind],
) -> Result<Injected, Unread> {
    let helpers = (caught.count_ones() as usize).div_ceil(HANDLERS_PER_THREAD).clamp(1, ROUND_CALLS) - 1;
    injectors.take_others(tracer, threads, helpers, false)?;
    let handlers = handlers(tracer, injectors, syscall_at, caught)?;
    let itimers = itimers(tracer, injectors, syscall_at, timers)?;
    let stacks_refused = match on_altstack(&handlers) {
        0 => None,
        _ => match injectors.take_others(tracer, threads, usize::MAX, true) {
            Ok(()) => {
                altstacks(tracer, injectors, threads, syscall_at)?;
                None
            }
            Err(refused) => Some(refused),
        },
    };
    Ok(Injected { handlers, itimers, stacks_refused })
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

/// The caught signals (bit `n-1` for signal `n`) whose handlers run on the alternate
/// signal stack, but for glibc's own: every threaded glibc program has its thread
/// cancellation and `set*id` broadcast (signals 32 and 33) handled there, whether any
/// thread has a signal stack or not, and those alone are not worth a call per thread at
/// every capture.
fn on_altstack(actions: &[SignalAction]) -> u64 {
    actions
        .iter()
        .filter(|a| a.flags & SA_ONSTACK != 0 && !GLIBC_SIGNALS.contains(&a.signo))
        .fold(0, |bits, a| bits | 1u64 << (a.signo - 1))
}

/// The held threads a capture runs injected calls in, the injection thread first, their
/// seccomp suspended meanwhile where they have one; [`Injectors::finish`] puts it back.
/// Every call's answer lands below one thread's red zone, at its own place in its round:
/// the breaking thread's (stopped in its call of the library, on a C stack), else one
/// stopped in a system call; so no thread stopped in a stack without room below it (a
/// goroutine's, which Go grows on demand) is written to.
struct Injectors {
    tids: Vec<Tid>,
    /// Where the first call of a round writes its answer; the j-th, [`ANSWER_STRIDE`]
    /// × j below.
    answers_at: u64,
    /// What [`Tracer::restore_seccomp`] takes, for each thread whose seccomp was suspended.
    suspended: Vec<(Tid, &'static str)>,
    /// The threads made real-time for the calls, for all of them.
    hurried: Hurried,
}

impl Injectors {
    /// Takes the first of `callers`, with the answers below the red zone of the breaking
    /// thread where there is one, else of one of `threads` in a system call, else of the
    /// first; refused where sdt may not suspend the first's seccomp.
    fn new(
        tracer: &mut Tracer,
        Callers { first, seccomp, breaking }: Callers,
        threads: &[ThreadState],
    ) -> Result<Injectors, Unread> {
        let rsp =
            |tid: Tid| threads.iter().find(|t| t.tid == tid.raw()).and_then(|t| t.regs().ok()).map(|r| r.rsp);
        let in_syscall = threads
            .iter()
            .filter(|t| t.state == ThreadRunState::Running)
            .filter_map(|t| t.regs().ok())
            .find(|r| r.orig_rax as i64 >= 0)
            .map(|r| r.rsp);
        let rsp = match breaking.and_then(rsp).or(in_syscall).or_else(|| rsp(first)) {
            Some(rsp) => rsp,
            None => sdt_sys::ptrace::regs(first)?.rsp,
        };
        let suspended = tracer.suspend_seccomp(first, seccomp)?.into_iter().collect();
        Ok(Injectors {
            tids: vec![first],
            answers_at: below_red_zone(rsp),
            suspended,
            hurried: Hurried::default(),
        })
    }

    /// Takes up to `more` of the running `threads` not taken yet. Where sdt may not
    /// suspend a thread's seccomp, it is left out, or, with `every`, all are refused.
    fn take_others(
        &mut self,
        tracer: &mut Tracer,
        threads: &[ThreadState],
        more: usize,
        every: bool,
    ) -> Result<(), InjectionRefused> {
        let running = threads.iter().filter(|t| t.state == ThreadRunState::Running);
        let mut taken = 0;
        for t in running {
            if taken == more {
                break;
            }
            let Some(tid) = Tid::new(t.tid) else { continue };
            if self.tids.contains(&tid) {
                continue;
            }
            // Suspended as if it had a filter where sdt may (as root): cheaper than reading
            // its mode.
            let suspended = tracer.suspend_seccomp(tid, SeccompMode::Filter).or_else(|_| {
                procfs::seccomp_mode(tid)
                    .map_err(|source| InjectionRefused::Status { tid: t.tid, source })
                    .and_then(|mode| tracer.suspend_seccomp(tid, mode))
            });
            match suspended {
                Ok(s) => self.suspended.extend(s),
                Err(e) if every => return Err(e),
                Err(e) => {
                    log::debug!("thread {tid} runs no injected calls: {e}");
                    continue;
                }
            }
            self.tids.push(tid);
            taken += 1;
        }
        Ok(())
    }

    /// Runs system call `nr` at the `syscall` instruction at `syscall_at` in each of
    /// `tids` at once (at most [`ROUND_CALLS`]), each with the arguments `args` gives for
    /// its index and answer's place, and reads each one's answer; a call that fails is
    /// said (`what` of its index names it) and gives `None`.
    fn call_each<T: Pod>(
        &mut self,
        tracer: &mut Tracer,
        (syscall_at, nr): (u64, i64),
        tids: &[Tid],
        args: impl Fn(usize, u64) -> [u64; 4],
        what: impl Fn(usize) -> String,
    ) -> Result<Vec<Option<T>>, Unread> {
        assert!(tids.len() <= ROUND_CALLS, "{} calls in one round", tids.len());
        let at = |j: usize| self.answers_at - j as u64 * ANSWER_STRIDE;
        let args: Vec<[u64; 4]> = (0..tids.len()).map(|j| args(j, at(j))).collect();
        let calls: Vec<(Tid, u64, &[u64])> =
            tids.iter().zip(&args).map(|(&tid, args)| (tid, nr as u64, &args[..])).collect();
        let results = tracer.inject_syscalls(syscall_at, &calls, &mut self.hurried)?;
        // The round's answers in one read: the last call's lowest.
        let mut room = vec![0u8; tids.len() * ANSWER_STRIDE as usize];
        memory::read_exact(tids[0], at(tids.len() - 1), &mut room)?;
        let mut answers = Vec::with_capacity(tids.len());
        for (j, (tid, rc)) in tids.iter().zip(results).enumerate() {
            if rc < 0 {
                log::warn!("{} in thread {tid} failed: errno {}; it is not recorded", what(j), -rc);
                answers.push(None);
                continue;
            }
            let offset = (tids.len() - 1 - j) * ANSWER_STRIDE as usize;
            answers.push(Some(bytemuck::pod_read_unaligned(&room[offset..offset + size_of::<T>()])));
        }
        Ok(answers)
    }

    /// Puts back the seccomp of every thread whose seccomp was suspended, and the
    /// scheduling of every thread made real-time.
    fn finish(self, tracer: &mut Tracer) {
        for s in self.suspended {
            tracer.restore_seccomp(Some(s));
        }
    }
}

/// The handlers of the `caught` signals, each read by an injected `rt_sigaction`, as
/// many at once as there are `injectors`.
fn handlers(
    tracer: &mut Tracer,
    injectors: &mut Injectors,
    syscall_at: u64,
    caught: u64,
) -> Result<Vec<SignalAction>, Unread> {
    let signals: Vec<i32> = (1..=64i32).filter(|signo| caught & (1u64 << (signo - 1)) != 0).collect();
    let tids: Vec<Tid> = injectors.tids.iter().copied().take(ROUND_CALLS).collect();
    let mut actions = Vec::with_capacity(signals.len());
    for round in signals.chunks(tids.len()) {
        let read: Vec<Option<KernelSigaction>> = injectors.call_each(
            tracer,
            (syscall_at, libc::SYS_rt_sigaction),
            &tids[..round.len()],
            |j, at| [round[j] as u64, 0, at, 8],
            |j| format!("rt_sigaction({}) (its handler)", round[j]),
        )?;
        for (&signo, action) in round.iter().zip(read) {
            let Some(KernelSigaction { handler, flags, restorer, mask }) = action else { continue };
            actions.push(SignalAction { signo, handler, flags, restorer, mask });
        }
    }
    Ok(actions)
}

/// Those of the `kinds` of interval timer that are running, each read by an injected
/// `getitimer` in the injection thread.
fn itimers(
    tracer: &mut Tracer,
    injectors: &mut Injectors,
    syscall_at: u64,
    kinds: &[ItimerKind],
) -> Result<Vec<Itimer>, Unread> {
    let first = &injectors.tids[..1].to_vec();
    let mut running = Vec::new();
    for &kind in kinds {
        let read: Vec<Option<Itimerval>> = injectors.call_each(
            tracer,
            (syscall_at, libc::SYS_getitimer),
            first,
            |_, at| [kind.which() as u64, at, 0, 0],
            |_| format!("getitimer({}) (the timer)", kind.name()),
        )?;
        let Some(Some(val)) = read.into_iter().next() else { continue };
        let micros = |[secs, usecs]: [i64; 2]| {
            (secs.max(0) as u64).saturating_mul(1_000_000).saturating_add(usecs.max(0) as u64)
        };
        if micros(val.value) != 0 {
            running.push(Itimer { kind, value_us: micros(val.value), interval_us: micros(val.interval) });
        }
    }
    Ok(running)
}

/// The signal stack of each of the `threads` that runs (every one of which is among the
/// `injectors`), by a `sigaltstack(NULL, &old)` injected into each, [`ROUND_CALLS`] at
/// once.
fn altstacks(
    tracer: &mut Tracer,
    injectors: &mut Injectors,
    threads: &mut [ThreadState],
    syscall_at: u64,
) -> Result<(), Unread> {
    let tids = injectors.tids.clone();
    for round in tids.chunks(ROUND_CALLS) {
        let read: Vec<Option<StackT>> = injectors.call_each(
            tracer,
            (syscall_at, libc::SYS_sigaltstack),
            round,
            |_, at| [0, at, 0, 0],
            |_| "sigaltstack (its signal stack)".to_owned(),
        )?;
        for (tid, stack) in round.iter().zip(read) {
            let Some(t) = threads.iter_mut().find(|t| t.tid == tid.raw()) else { continue };
            t.altstack = stack.filter(|s| s.flags & SS_DISABLE == 0 && s.size != 0).map(|s| AltStack {
                sp: s.sp,
                size: s.size,
                flags: s.flags & SS_AUTODISARM,
            });
        }
    }
    Ok(())
}

/// Room for the answers of a round of calls below the red zone of a stack at `rsp`,
/// 16-aligned: the first at the address returned, the others [`ANSWER_STRIDE`] apart
/// below it.
fn below_red_zone(rsp: u64) -> u64 {
    (rsp - RED_ZONE - ANSWER_STRIDE) & !15
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
