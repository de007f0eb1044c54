//! Signal dispositions of a frozen program, for a restore to set again.
//!
//! `/proc/PID/status` tells which signals are caught (`SigCgt`) and ignored (`SigIgn`),
//! but not the handlers. For each caught signal, one held thread runs an injected
//! `rt_sigaction(sig, NULL, &old)` whose answer lands below its stack's red zone, in
//! memory the program does not use; programs catch few signals, so this costs a few
//! injected calls per capture, and none for a program that catches nothing.

use sdt_store::{SIG_IGN, SignalAction};
use sdt_sys::ptrace::{self, Regset};
use sdt_sys::{Tid, memory};

use crate::ptrace::Tracer;

/// `struct kernel_sigaction`: handler, flags, restorer, mask.
const KERNEL_SIGACTION_SIZE: usize = 32;
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
        let mut raw = [0u8; KERNEL_SIGACTION_SIZE];
        memory::read_exact(tid, at, &mut raw)?;
        let word = |i: usize| u64::from_le_bytes(raw[i * 8..i * 8 + 8].try_into().unwrap());
        actions.push(SignalAction {
            signo,
            handler: word(0),
            flags: word(1),
            restorer: word(2),
            mask: word(3),
        });
    }
    Ok(actions)
}

/// Room for one `struct kernel_sigaction` below the thread's red zone, 16-aligned.
fn below_red_zone(tid: Tid) -> Result<u64, sdt_sys::Error> {
    let mut regs = [0u8; sdt_store::GPREGS_SIZE];
    ptrace::get_regset(tid, Regset::General, &mut regs)?;
    let rsp = sdt_store::gpreg(&regs, "rsp").unwrap_or(0);
    Ok((rsp - RED_ZONE - 2 * KERNEL_SIGACTION_SIZE as u64) & !15)
}
