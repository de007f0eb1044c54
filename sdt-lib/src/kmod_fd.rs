//! Finding the kernel module that captures this process (`sdt run --backend kmod`).
//!
//! Under the module, no tracer watches the program: `sdt run` registered it with
//! `/dev/sdt` and let it go. The library opens the device once, asks whether this
//! process is registered by the `sdt` that `SDT_TRACER` names, and keeps the descriptor
//! for the breakpoints' `SDT_IOC_TRIGGER` calls (`trap.rs`).

#![allow(unsafe_code)]

use std::ffi::CString;
use std::sync::atomic::{AtomicI32, Ordering};

use sdt_abi::kmod::{DEVICE, IOC_QUERY, KMOD_VERSION, Query};

/// `sdt_kmod_fd` of `sdt.h`: the open `/dev/sdt` when the kernel module captures this
/// process, else -1 (breakpoints stop with `int3` for a ptrace tracer).
#[unsafe(no_mangle)]
#[allow(non_upper_case_globals)]
pub static sdt_kmod_fd: AtomicI32 = AtomicI32::new(-1);

/// Opens `/dev/sdt` if the module has this process registered by `daemon`; the
/// descriptor (close-on-exec) is returned and never closed.
pub(crate) fn open_registered(daemon: i32) -> Option<i32> {
    let path = CString::new(DEVICE).ok()?;
    // SAFETY: a valid NUL-terminated path; no pointer is kept.
    let fd = unsafe { libc::open(path.as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) };
    if fd < 0 {
        return None;
    }
    let mut query = Query::default();
    // SAFETY: IOC_QUERY writes one `struct sdt_query`, which `query` is (layout checked
    // in sdt-abi against the module's header).
    let rc = unsafe { libc::ioctl(fd, IOC_QUERY as _, &raw mut query) };
    if rc == 0 && query.version == KMOD_VERSION && query.registered == 1 && query.daemon_pid == daemon {
        return Some(fd);
    }
    close(fd);
    None
}

/// Closes a descriptor from [`open_registered`] that will not be used (-1: none).
pub(crate) fn close(fd: i32) {
    if fd >= 0 {
        // SAFETY: the descriptor came from `open_registered` and nothing else holds it.
        unsafe { libc::close(fd) };
    }
}

/// Switches breakpoints to the module (`fd`) or, with -1, to `int3` for a tracer.
pub(crate) fn use_device(fd: i32) {
    sdt_kmod_fd.store(fd, Ordering::Release);
}
