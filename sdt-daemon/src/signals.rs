//! Signal dispositions of a frozen program, for a restore to set again.
//!
//! `/proc/PID/status` tells which signals are caught (`SigCgt`) and ignored (`SigIgn`),
//! but not the handlers. For each caught signal, one held thread runs an injected
//! `rt_sigaction(sig, NULL, &old)` whose answer lands below its stack's red zone, in
//! memory the program does not use; programs catch few signals, so this costs a few
//! injected calls per capture, and none for a program that catches nothing.

use bytemuck::{Pod, Zeroable};
use sdt_store::{SIG_IGN, SeccompMode, SignalAction};
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
/// The x86_64 System V red zone below the stack pointer.
const RED_ZONE: u64 = 128;

/// What a capture learns of the program's signal dispositions.
pub(crate) struct Dispositions {
    /// The dispositions read, ascending.
    pub actions: Vec<SignalAction>,
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
/// read through `tid`, a held thread under `seccomp`, with the `syscall` instruction at
/// `syscall_at`. Where sdt may not run calls in `tid` (its seccomp), the caught ones are
/// left unread.
pub(crate) fn read_actions(
    tracer: &mut Tracer,
    tid: Tid,
    seccomp: SeccompMode,
    syscall_at: u64,
    (caught, ignored): (u64, u64),
) -> Result<Dispositions, sdt_sys::Error> {
    let read = match caught {
        0 => Ok(Vec::new()),
        _ => tracer.with_seccomp_suspended(tid, seccomp, |tracer| handlers(tracer, tid, syscall_at, caught)),
    };
    let (mut actions, unread, refused) = match read {
        Ok(handlers) => (handlers, 0, None),
        Err(Unread::Refused(e)) => (Vec::new(), caught, Some(e)),
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
    Ok(Dispositions { actions, unread, refused })
}

/// The handlers of the `caught` signals, each read by an injected `rt_sigaction`.
fn handlers(
    tracer: &mut Tracer,
    tid: Tid,
    syscall_at: u64,
    caught: u64,
) -> Result<Vec<SignalAction>, Unread> {
    let mut actions = Vec::new();
    let mut answer_at = None;
    for signo in (1..=64i32).filter(|signo| caught & (1u64 << (signo - 1)) != 0) {
        let at = match answer_at {
            Some(at) => at,
            None => *answer_at.insert(below_red_zone(tid)?),
        };
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

/// Room for one `struct kernel_sigaction` below the thread's red zone, 16-aligned.
fn below_red_zone(tid: Tid) -> Result<u64, sdt_sys::Error> {
    let rsp = ptrace::regs(tid)?.rsp;
    Ok((rsp - RED_ZONE - 2 * size_of::<KernelSigaction>() as u64) & !15)
}
