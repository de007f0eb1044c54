//! The trap: stopping the breaking thread for the tracer.
//!
//! Runs on the user's thread inside the user's program. Rules for this file:
//! no allocation, no locks, no system calls other than the `int3` itself (the clock is
//! read through the vDSO).

#![allow(unsafe_code)]

use std::sync::atomic::AtomicI32;

use sdt_abi::{PROTOCOL_VERSION, RESULT_PENDING, Site, TRAP_MAGIC, TRAP_RECORD_SIZE, TrapRecord};

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
        result: RESULT_PENDING,
    };
}

/// Executes `int3` with `rax = TRAP_MAGIC`, `rdi = record`, and returns the result the
/// tracer wrote. Inlined into the caller, so the stopped thread's top frame is the
/// caller's.
#[inline(always)]
pub(crate) fn stop(record: &mut TrapRecord) -> i64 {
    let record: *mut TrapRecord = record;
    // SAFETY: `int3` only raises SIGTRAP; the library arms a trap only when `sdt run`
    // traces this process (session.rs), and the tracer reads the record and writes
    // `result` while this thread is stopped. The asm may read and write memory (no
    // `nomem`), so the compiler keeps the record in memory across it.
    unsafe {
        std::arch::asm!("int3", in("rax") TRAP_MAGIC, in("rdi") record, options(nostack));
        std::ptr::read_volatile(&raw const (*record).result)
    }
}

fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec; clock_gettime goes through the vDSO.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}
