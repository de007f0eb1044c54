//! The trap: stopping the breaking thread for the tracer, or for the kernel module.
//!
//! Runs on the user's thread inside the user's program. Rules for this file:
//! no allocation, no locks, no system calls other than the `int3` itself or the
//! module's trigger (the clock is read through the vDSO).

#![allow(unsafe_code)]

use std::sync::atomic::{AtomicI32, Ordering};

use sdt_abi::kmod::IOC_TRIGGER;
use sdt_abi::{PROTOCOL_VERSION, RESULT_DECLINED, Site, TRAP_MAGIC, TRAP_RECORD_SIZE, TrapRecord};

use crate::kmod_fd::sdt_kmod_fd;
use crate::sdt_state;

/// Longest attribute string the tracer reads.
const MAX_ATTRS: usize = 4096;

/// Fills `record` for a breakpoint that passed the filter.
pub(crate) fn arm(record: &mut TrapRecord, site: &Site<'_>, multiple_mark: i32, hit: u64) {
    *record = TrapRecord {
        version: PROTOCOL_VERSION,
        size: TRAP_RECORD_SIZE as u32,
        level: site.level,
        class: site.class,
        id: site.id,
        multiple_mark,
        hit,
        attrs_ptr: site.attrs.as_ptr() as u64,
        attrs_len: site.attrs.len().min(MAX_ATTRS) as u64,
        trigger_ns: monotonic_ns(),
        state_ptr: &sdt_state as *const AtomicI32 as u64,
        // What the call returns unless `sdt run` answers (it cannot read the record).
        result: RESULT_DECLINED,
    };
}

/// Stops the thread for the capture and returns the result written into the record:
/// under ptrace, `int3` with `rax = TRAP_MAGIC`, `rdi = record`; under the kernel
/// module, `ioctl(sdt_kmod_fd, SDT_IOC_TRIGGER, record)`, which returns once every
/// thread was held and released. Inlined into the caller, so the stopped thread's top
/// frame is the caller's either way.
#[inline(always)]
pub(crate) fn stop(record: &mut TrapRecord) -> i64 {
    let fd = sdt_kmod_fd.load(Ordering::Acquire);
    let record: *mut TrapRecord = record;
    if fd >= 0 {
        // SAFETY: a plain ioctl system call on the module's device with the record's
        // address; the module reads the record and writes `result` (and maybe the state
        // word) before it returns. `syscall` clobbers rcx and r11; the asm may read and
        // write memory (no `nomem`), so the record stays in memory across it. The answer
        // is `result` whatever the call returns (`RESULT_DECLINED` if nobody answered): a
        // snapshot resumed at this instruction has rax as it was inside the call.
        unsafe {
            std::arch::asm!(
                "syscall",
                inlateout("rax") libc::SYS_ioctl => _,
                in("rdi") fd as i64,
                in("rsi") IOC_TRIGGER,
                in("rdx") record,
                lateout("rcx") _,
                lateout("r11") _,
                options(nostack),
            );
        }
    } else {
        // SAFETY: `int3` only raises SIGTRAP; the library arms a trap only when `sdt run`
        // traces this process (capture.rs), and the tracer reads the record and writes
        // `result` while this thread is stopped. The asm may read and write memory (no
        // `nomem`), so the compiler keeps the record in memory across it.
        unsafe {
            std::arch::asm!("int3", in("rax") TRAP_MAGIC, in("rdi") record, options(nostack));
        }
    }
    // SAFETY: `record` points to the caller's live record.
    unsafe { std::ptr::read_volatile(&raw const (*record).result) }
}

fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec; clock_gettime goes through the vDSO.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}
