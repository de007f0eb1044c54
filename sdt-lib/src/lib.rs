//! Offline breakpoints for SDT: what a program links so that `sdt run` can snapshot it.
//!
//! ```no_run
//! // level 1, class 2, id 10, only the first thread to arrive captures, attributes
//! sdt::breakpoint!(1, 2, 10, 0, "phase=solve,iter=3");
//! ```
//!
//! C and C++ programs use `include/sdt.h` and `libsdt.a` / `libsdt.so` (same functions,
//! C ABI); Rust programs use [`breakpoint!`].
//!
//! # Design constraints
//!
//! Everything here runs inside the user's program, on the user's threads:
//!
//! - Not under `sdt run`, a breakpoint is one relaxed load and one predictable branch.
//! - Under `sdt run`, the capture config is checked here, in the program, against a copy
//!   the tracer passed in the environment: a breakpoint the config filters out makes no
//!   system call.
//! - After the first call (which reads the environment), the breakpoint path allocates
//!   nothing and takes no locks.
//! - A breakpoint that passes stops its thread with `int3` for the tracer, or with the
//!   kernel module's trigger call where `sdt run --backend kmod` registered the process
//!   (see `trap`), inlined into the caller (`SetBreakpoint` in `sdt.h`,
//!   [`set_breakpoint`] here), so the snapshot's top frame is the user's own code.
//!   The library turns itself on only if `/proc/self/status` shows the tracer named in the
//!   environment, or `/dev/sdt` says that `sdt` registered this process, and off in a
//!   forked child, so a process `sdt run` does not watch never stops.
//!
//! The library does not take snapshots itself and knows nothing of the store; that is the
//! capture side's job (`sdt-daemon`).

#![deny(missing_docs)]
#![deny(unsafe_code)]

mod capture;
mod kmod_fd;

pub use capture::sdt_reconfig;
pub use kmod_fd::sdt_kmod_fd;
mod sites;
mod trap;

use std::ffi::{CStr, c_char, c_int, c_uint};
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};

use sdt_abi::{
    ID_MASK_WORDS, RESULT_FILTERED, RESULT_OFF, STATE_OFF, STATE_ON, STATE_UNINIT, TrapRecord, checked_state,
    class_may_pass, id_may_pass, level_may_pass,
};

/// The library's state word (`sdt_state` in `sdt.h`): [`sdt_abi::STATE_OFF`] means every
/// breakpoint returns at once; from [`sdt_abi::STATE_ON`] up it also carries the
/// config's `max_level`; negated, the tracer takes no more snapshots and a breakpoint
/// that passes returns `SDT_DECLINED` without stopping. Starts as
/// [`sdt_abi::STATE_UNINIT`] so that the first breakpoint looks at the environment.
#[allow(unsafe_code)]
#[unsafe(no_mangle)]
#[allow(non_upper_case_globals)]
pub static sdt_state: AtomicI32 = AtomicI32::new(STATE_UNINIT);

/// The library's class mask (`sdt_classes` in `sdt.h`): while the state word is at least
/// [`sdt_abi::STATE_ON`], a breakpoint of class `c` in 0–63 whose bit is clear is
/// filtered inline (see [`sdt_abi::class_mask_for`]). Written before the state word that
/// it goes with, which is stored with release ordering and loaded with acquire.
#[allow(unsafe_code)]
#[unsafe(no_mangle)]
#[allow(non_upper_case_globals)]
pub static sdt_classes: AtomicU64 = AtomicU64::new(u64::MAX);

/// The library's id mask (`sdt_ids` in `sdt.h`), like [`sdt_classes`] for ids 0 to
/// 4095 (see [`sdt_abi::id_mask_for`]).
#[allow(unsafe_code)]
#[unsafe(no_mangle)]
#[allow(non_upper_case_globals)]
pub static sdt_ids: [AtomicU64; ID_MASK_WORDS] = [const { AtomicU64::new(u64::MAX) }; ID_MASK_WORDS];

/// What a breakpoint did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Snapshot `S<n>` was taken here.
    Captured(u32),
    /// Not running under `sdt run`.
    Off,
    /// The capture config filtered the breakpoint out.
    Filtered,
    /// Passed the config, but no snapshot was taken (`max_snapshots` reached, or the
    /// capture failed).
    Declined,
}

impl Outcome {
    fn from_raw(raw: i64) -> Outcome {
        match raw {
            n if n >= 0 => Outcome::Captured(n as u32),
            RESULT_OFF => Outcome::Off,
            RESULT_FILTERED => Outcome::Filtered,
            _ => Outcome::Declined,
        }
    }
}

/// Marks an offline breakpoint: `breakpoint!(level, class, id, multiple_mark, attrs)`, or
/// `breakpoint!(level, class, id)` for `multiple_mark = 1` and no attributes. Returns an
/// [`Outcome`].
#[macro_export]
macro_rules! breakpoint {
    ($level:expr, $class:expr, $id:expr, $multiple_mark:expr, $attrs:expr $(,)?) => {
        $crate::set_breakpoint($level, $class, $id, $multiple_mark, $attrs)
    };
    ($level:expr, $class:expr, $id:expr $(,)?) => {
        $crate::set_breakpoint($level, $class, $id, 1, "")
    };
}

/// The function behind [`breakpoint!`]: one branch when SDT is off. When a snapshot is
/// taken, the thread stops here, inlined into the caller.
#[inline(always)]
pub fn set_breakpoint(level: i32, class: i32, id: i32, multiple_mark: i32, attrs: &str) -> Outcome {
    let state = sdt_state.load(Ordering::Acquire);
    if state == STATE_OFF {
        return Outcome::Off;
    }
    // A declining word (no more snapshots) filters as the capturing one did.
    let state = checked_state(state);
    if state >= STATE_ON
        && (!level_may_pass(state, level)
            || !class_may_pass(sdt_classes.load(Ordering::Relaxed), class)
            || !id_may_pass(|w| sdt_ids[w].load(Ordering::Relaxed), id))
    {
        return Outcome::Filtered;
    }
    let mut record = TrapRecord::default();
    let result = match capture::arm(&mut record, level, class, id, multiple_mark, || attrs.as_bytes()) {
        Some(result) => result,
        None => trap::stop(&mut record),
    };
    Outcome::from_raw(result)
}

/// The bytes of a C attribute string (empty for NULL).
///
/// # Safety
///
/// `attrs` is NULL or points to a NUL-terminated string that outlives the returned slice.
#[allow(unsafe_code)]
unsafe fn attr_bytes<'a>(attrs: *const c_char) -> &'a [u8] {
    if attrs.is_null() {
        &[]
    } else {
        // SAFETY: the caller promises a NUL-terminated string.
        unsafe { CStr::from_ptr(attrs) }.to_bytes()
    }
}

/// `sdt_arm()` of `sdt.h`: checks a breakpoint against the capture config. Returns 0 when
/// it passed and `trap` is filled for the caller's `int3`, else `SDT_OFF`,
/// `SDT_FILTERED` or `SDT_DECLINED`.
///
/// # Safety
///
/// `trap` points to writable memory for a `struct sdt_trap`; `attrs` is NULL or a
/// NUL-terminated string that stays valid until the trap returns.
#[allow(unsafe_code)]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sdt_arm(
    trap: *mut TrapRecord,
    level: c_int,
    class: c_int,
    id: c_int,
    multiple_mark: c_int,
    attrs: *const c_char,
) -> c_int {
    // SAFETY: per this function's contract.
    let record = unsafe { &mut *trap };
    // SAFETY: per this function's contract.
    match capture::arm(record, level, class, id, multiple_mark, || unsafe { attr_bytes(attrs) }) {
        None => 0,
        Some(result) => result as c_int,
    }
}

/// `sdt_breakpoint()` of `sdt.h`: the whole breakpoint in one call, stopping inside the
/// library. Returns the snapshot number taken, or `SDT_OFF`, `SDT_FILTERED`,
/// `SDT_DECLINED`.
///
/// # Safety
///
/// `attrs` is NULL or points to a NUL-terminated string.
#[allow(unsafe_code)]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sdt_breakpoint(
    level: c_int,
    class: c_int,
    id: c_int,
    multiple_mark: c_int,
    attrs: *const c_char,
) -> c_int {
    if sdt_state.load(Ordering::Relaxed) == STATE_OFF {
        return RESULT_OFF as c_int;
    }
    let mut record = TrapRecord::default();
    // SAFETY: the caller promises a NUL-terminated string.
    let result =
        match capture::arm(&mut record, level, class, id, multiple_mark, || unsafe { attr_bytes(attrs) }) {
            Some(result) => result,
            None => trap::stop(&mut record),
        };
    c_int::try_from(result).unwrap_or(c_int::MAX)
}

/// `sdt_version()` of `sdt.h`: `MAJOR << 16 | MINOR << 8 | PATCH`.
#[allow(unsafe_code)]
#[unsafe(no_mangle)]
pub extern "C" fn sdt_version() -> c_uint {
    let part = |s: &str| s.parse::<c_uint>().unwrap_or(0);
    part(env!("CARGO_PKG_VERSION_MAJOR")) << 16
        | part(env!("CARGO_PKG_VERSION_MINOR")) << 8
        | part(env!("CARGO_PKG_VERSION_PATCH"))
}
