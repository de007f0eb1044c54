//! Signal dispositions of a frozen program, for a restore to set again.
//!
//! `/proc/PID/status` tells which signals are caught (`SigCgt`) and ignored (`SigIgn`),
//! but not the handlers. For each caught signal, one held thread runs an injected
//! `rt_sigaction(sig, NULL, &old)` whose answer lands below its stack's red zone, in
//! memory the program does not use; programs catch few signals, so this costs a few
//! injected calls per capture, and none for a program that catches nothing.

use bytemuck::{Pod, Zeroable};
use sdt_store::{SIG_IGN, SignalAction};
use sdt_sys::ptrace;
use sdt_sys::{Tid, memory};

use crate::ptrace::Tracer;

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

/// The dispositions of the `caught` and `ignored` signals (bit `n-1` for signal `n`),
/// ascending, read through `tid`, a held thread, with the `syscall` instruction at
/// `syscall_at`.
pub(crate) fn read_actions(
    tracer: &mut Tracer,
    tid: Tid,
    syscall_at: u64,
    caught: u64,
    ignored: u64,
) -> Result<Vec<SignalAction>, sdt_sys::Error> {
    let mut actions = Vec::new();
    let mut answer_at = None;
    for signo in 1..=64i32 {
        let bit = 1u64 << (signo - 1);
        if ignored & bit != 0 {
            actions.push(SignalAction { signo, handler: SIG_IGN, flags: 0, restorer: 0, mask: 0 });
        }
        if caught & bit == 0 {
            continue;
        }
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
