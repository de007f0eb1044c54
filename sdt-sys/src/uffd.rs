//! userfaultfd in asynchronous write-protect mode, driven from outside the process it
//! belongs to.
//!
//! A userfaultfd acts on the memory of the process that created it. SDT has the target
//! create one (an injected `userfaultfd(2)`), takes a copy with `pidfd_getfd(2)`, and from
//! then on registers and protects the target's mappings from the tracer.
//!
//! # Safety
//!
//! Every ioctl gets a pointer to a local struct of the size its number encodes.

#![allow(unsafe_code)]

use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use crate::uapi::{
    UFFD_API, UFFD_FEATURE_WP_ASYNC, UFFD_FEATURE_WP_UNPOPULATED, UFFDIO_API, UFFDIO_REGISTER,
    UFFDIO_REGISTER_MODE_WP, UFFDIO_WRITEPROTECT, UFFDIO_WRITEPROTECT_MODE_WP, UffdioApi, UffdioRange,
    UffdioRegister, UffdioWriteprotect,
};
use crate::{Error, Result};

/// A userfaultfd set up for asynchronous write-protect tracking.
#[derive(Debug)]
pub struct Userfaultfd {
    fd: OwnedFd,
}

fn ioctl<T>(fd: RawFd, call: &'static str, request: u64, arg: &mut T) -> Result<()> {
    // SAFETY: `arg` is a valid, writable struct of the size `request` encodes (module note).
    let rc = unsafe { libc::ioctl(fd, request as _, arg as *mut T) };
    if rc < 0 { Err(Error::last(call, 0)) } else { Ok(()) }
}

impl Userfaultfd {
    /// `ioctl(UFFDIO_API)` on a fresh userfaultfd: asks for async write-protect of
    /// populated and unpopulated pages. Fails with `EINVAL` where the kernel lacks them
    /// (before Linux 6.7).
    #[doc(alias = "UFFDIO_API")]
    pub fn enable_wp_async(fd: OwnedFd) -> Result<Userfaultfd> {
        let mut api = UffdioApi {
            api: UFFD_API,
            features: UFFD_FEATURE_WP_ASYNC | UFFD_FEATURE_WP_UNPOPULATED,
            ioctls: 0,
        };
        ioctl(fd.as_raw_fd(), "UFFDIO_API", UFFDIO_API, &mut api)?;
        Ok(Userfaultfd { fd })
    }

    /// `ioctl(UFFDIO_REGISTER, MODE_WP)`: tracks writes to `[start, start + len)`, which
    /// must be whole mappings of the target's anonymous memory.
    #[doc(alias = "UFFDIO_REGISTER")]
    pub fn register_wp(&self, start: u64, len: u64) -> Result<()> {
        let mut reg =
            UffdioRegister { range: UffdioRange { start, len }, mode: UFFDIO_REGISTER_MODE_WP, ioctls: 0 };
        ioctl(self.fd.as_raw_fd(), "UFFDIO_REGISTER", UFFDIO_REGISTER, &mut reg)
    }

    /// `ioctl(UFFDIO_WRITEPROTECT, MODE_WP)`: write-protects `[start, start + len)`, so
    /// that the next write to each page marks it written.
    #[doc(alias = "UFFDIO_WRITEPROTECT")]
    pub fn write_protect(&self, start: u64, len: u64) -> Result<()> {
        let mut wp =
            UffdioWriteprotect { range: UffdioRange { start, len }, mode: UFFDIO_WRITEPROTECT_MODE_WP };
        ioctl(self.fd.as_raw_fd(), "UFFDIO_WRITEPROTECT", UFFDIO_WRITEPROTECT, &mut wp)
    }
}
