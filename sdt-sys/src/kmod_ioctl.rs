//! `/dev/sdt`, SDT's kernel module: the daemon's side of its ioctls (the interface is
//! `kmod/include/uapi/linux/sdt_kmod.h`, mirrored in [`sdt_abi::kmod`]).
//!
//! ```text
//!  Device::open  →  register(pid, filter)  →  poll the fd  →  get  →  release  → …
//!                                              freeze → get(wait) → release (timed)
//! ```
//!
//! # Safety
//!
//! Every ioctl gets a pointer to a `#[repr(C)]` struct of the size its request number
//! encodes (checked against the C header in `sdt-abi`), or to a buffer whose length the
//! struct tells the module.

#![allow(unsafe_code)]

use std::ffi::CString;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use sdt_abi::kmod::{
    DEVICE, GET_WAIT, IOC_FREEZE, IOC_GET, IOC_REGISTER, IOC_RELEASE, IOC_VERSION, KMOD_VERSION,
    RELEASE_TURN_OFF, Register, Release, Snapshot, Version,
};

use crate::{Error, Result, Tid};

/// An open `/dev/sdt`.
#[derive(Debug)]
pub struct Device {
    fd: OwnedFd,
}

fn ioctl<T>(fd: &OwnedFd, call: &'static str, tid: i32, request: u64, arg: *mut T) -> Result<()> {
    // SAFETY: `arg` is null for IOC_FREEZE or points to the struct `request` encodes (module
    // note); the module reads and writes nothing else but the buffers the struct names.
    let rc = unsafe { libc::ioctl(fd.as_raw_fd(), request as _, arg) };
    if rc < 0 { Err(Error::last(call, tid)) } else { Ok(()) }
}

impl Device {
    /// `open("/dev/sdt", O_RDWR | O_CLOEXEC)`. Fails with `ENOENT` where the module is
    /// not loaded.
    pub fn open() -> Result<Device> {
        let path = CString::new(DEVICE).expect("no NUL in the device path");
        // SAFETY: a valid NUL-terminated path.
        let fd = unsafe { libc::open(path.as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) };
        if fd < 0 {
            return Err(Error::last("open /dev/sdt", 0));
        }
        // SAFETY: a fresh descriptor we own.
        Ok(Device { fd: unsafe { OwnedFd::from_raw_fd(fd) } })
    }

    /// `SDT_IOC_VERSION`: the interface the module speaks.
    #[doc(alias = "SDT_IOC_VERSION")]
    pub fn version(&self) -> Result<Version> {
        let mut version = Version::default();
        ioctl(&self.fd, "SDT_IOC_VERSION", 0, IOC_VERSION, &raw mut version)?;
        Ok(version)
    }

    /// `SDT_IOC_REGISTER`: captures program `pid` with `filter` (from
    /// [`sdt_abi::kmod::encode_filter`]). The caller must be `pid`'s ptrace tracer.
    #[doc(alias = "SDT_IOC_REGISTER")]
    pub fn register(&self, pid: Tid, filter: &[u8]) -> Result<()> {
        let mut reg = Register {
            version: KMOD_VERSION,
            size: size_of::<Register>() as u32,
            pid: pid.raw(),
            filter_len: filter.len() as u32,
            filter: filter.as_ptr() as u64,
        };
        ioctl(&self.fd, "SDT_IOC_REGISTER", pid.raw(), IOC_REGISTER, &raw mut reg)
    }

    /// `SDT_IOC_FREEZE`: holds every thread of the program (a timed snapshot); `EBUSY`
    /// while a breakpoint's capture is under way.
    #[doc(alias = "SDT_IOC_FREEZE")]
    pub fn freeze(&self) -> Result<()> {
        ioctl(&self.fd, "SDT_IOC_FREEZE", 0, IOC_FREEZE, std::ptr::null_mut::<u8>())
    }

    /// `SDT_IOC_GET`: the capture every thread is held for, its thread records at the
    /// start of `threads` (grown as needed; `nr_threads` records of `thread_size` bytes).
    /// `None` if none is ready (without `wait`).
    #[doc(alias = "SDT_IOC_GET")]
    pub fn get(&self, threads: &mut Vec<u8>, wait: bool) -> Result<Option<Snapshot>> {
        loop {
            let len = u32::try_from(threads.len()).unwrap_or(u32::MAX);
            let mut snap =
                Snapshot::request(threads.as_mut_ptr() as u64, len, if wait { GET_WAIT } else { 0 });
            match ioctl(&self.fd, "SDT_IOC_GET", 0, IOC_GET, &raw mut snap) {
                Ok(()) => return Ok(Some(snap)),
                Err(e) if e.errno() == libc::EAGAIN => return Ok(None),
                // Grow to what it said it needs, with room for a few more threads.
                Err(e) if e.errno() == libc::ENOSPC && snap.thread_size > 0 => {
                    threads.resize((snap.nr_threads as usize + 8) * snap.thread_size as usize, 0);
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// `SDT_IOC_RELEASE`: lets every held thread go; the breaking thread's call returns
    /// `result`, and with `turn_off` the program's breakpoints are off from now on.
    #[doc(alias = "SDT_IOC_RELEASE")]
    pub fn release(&self, result: i64, turn_off: bool) -> Result<()> {
        let mut rel = Release { result, flags: if turn_off { RELEASE_TURN_OFF } else { 0 }, reserved: 0 };
        ioctl(&self.fd, "SDT_IOC_RELEASE", 0, IOC_RELEASE, &raw mut rel)
    }
}

impl AsFd for Device {
    /// Readable (`poll`) when a capture is ready for [`Device::get`].
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}
