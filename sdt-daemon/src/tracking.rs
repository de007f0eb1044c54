//! Dirty-page tracking: userfaultfd write-protect in async mode plus `PAGEMAP_SCAN`.
//!
//! ```text
//!  first capture of a mapping          every later capture
//!  ───────────────────────────         ──────────────────────────────────────────────
//!  UFFDIO_REGISTER (WP)                PAGEMAP_SCAN(WRITTEN, WP_MATCHING): the pages
//!  UFFDIO_WRITEPROTECT whole range     written since the last scan, protected again
//!  copy every resident page            copy those; every other page is unchanged
//! ```
//!
//! The kernel clears a page's write-protect bit on the first write after a scan, itself,
//! without a fault message (async mode: about half a microsecond per page), so the
//! program never waits for SDT between captures. A page dropped with `MADV_DONTNEED`
//! counts as written. A mapping the scan refuses (`EPERM`: created, moved or replaced
//! since the last capture) is registered and read whole, once.
//!
//! The userfaultfd must belong to the target: one thread of the frozen target runs an
//! injected `userfaultfd(2)`, SDT takes the descriptor with `pidfd_getfd(2)` and closes
//! the target's copy with an injected `close(2)`, so the program's descriptor table is
//! as it was.

use sdt_sys::Tid;
use sdt_sys::pagemap::{Pagemap, ScanQuery};
use sdt_sys::uapi::UFFD_USER_MODE_ONLY;
use sdt_sys::uffd::Userfaultfd;
use sdt_sys::{fds, memory};

use crate::ptrace::{InjectionRefused, Tracer};

/// How a run finds the pages that changed since the previous snapshot.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Tracking {
    /// userfaultfd write-protect where the kernel has it (Linux 6.7), else page hashes.
    #[default]
    Auto,
    /// userfaultfd write-protect, or fail.
    UffdWp,
    /// Copy every resident page at every capture and compare page hashes afterwards.
    PageHash,
}

impl Tracking {
    /// The name `sdt ls` and `sdt show` use for a snapshot's mode.
    pub fn mode_name(tracked: bool) -> &'static str {
        if tracked { "uffd-wp" } else { "page-hash" }
    }
}

/// The program's vDSO, and a `syscall` instruction in it for injected system calls.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Vdso {
    pub start: u64,
    pub end: u64,
    /// Address of a `syscall` instruction (`0f 05`).
    pub syscall_at: u64,
}

/// Why the program's vDSO, where injected system calls run, cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum VdsoError {
    /// `/proc/PID/maps` could not be read.
    #[error("reading maps")]
    Maps(#[source] std::io::Error),
    /// The program has no `[vdso]` mapping.
    #[error("the program has no vDSO")]
    Missing,
    /// Its bytes could not be read.
    #[error("reading the vDSO")]
    Read(#[source] sdt_sys::Error),
    /// It holds no `syscall` instruction.
    #[error("no syscall instruction in the vDSO")]
    NoSyscall,
}

/// Why write tracking cannot be set up for a program.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TrackingError {
    /// The vDSO, where the injected calls run, cannot be used.
    #[error(transparent)]
    Vdso(#[from] VdsoError),
    /// The kernel has no `PAGEMAP_SCAN` (before Linux 6.7).
    #[error("the kernel lacks PAGEMAP_SCAN (Linux 6.7)")]
    NoPagemapScan(#[source] sdt_sys::Error),
    /// A system call injected into the program, or taking the descriptor from it, failed.
    #[error(transparent)]
    Sys(#[from] sdt_sys::Error),
    /// sdt may not run system calls in the program.
    #[error(transparent)]
    Refused(#[from] InjectionRefused),
    /// `userfaultfd(2)` in the program failed.
    #[error("userfaultfd(2) in the program failed")]
    Userfaultfd(#[source] std::io::Error),
    /// The kernel has no asynchronous write-protect (before Linux 6.7).
    #[error("the kernel lacks async write-protect (Linux 6.7)")]
    NoAsyncWp(#[source] sdt_sys::Error),
}

impl Vdso {
    /// Finds the vDSO of the frozen program through its held thread `live_thread`.
    pub(crate) fn find(live_thread: Tid) -> Result<Vdso, VdsoError> {
        let maps = sdt_procfs::maps(live_thread).map_err(VdsoError::Maps)?;
        let vdso = maps.iter().find(|m| m.path == "[vdso]").ok_or(VdsoError::Missing)?;
        let mut bytes = vec![0u8; (vdso.end - vdso.start) as usize];
        memory::read_exact(live_thread, vdso.start, &mut bytes).map_err(VdsoError::Read)?;
        let at = bytes.windows(2).position(|w| w == [0x0f, 0x05]).ok_or(VdsoError::NoSyscall)?;
        Ok(Vdso { start: vdso.start, end: vdso.end, syscall_at: vdso.start + at as u64 })
    }
}

/// Sets tracking up on a frozen target through its held thread `live_thread`. `Err` says
/// why the kernel or the target cannot have it.
pub(crate) fn start(
    tracer: &mut Tracer,
    pid: Tid,
    live_thread: Tid,
    vdso: Vdso,
    pagemap: &Pagemap,
) -> Result<Userfaultfd, TrackingError> {
    // PAGEMAP_SCAN came with async write-protect; a kernel without it fails here.
    pagemap
        .scan(vdso.start, vdso.end, ScanQuery::RESIDENT, &mut Vec::new(), &mut Vec::new())
        .map_err(TrackingError::NoPagemapScan)?;
    let syscall_at = vdso.syscall_at;

    let flags = (libc::O_CLOEXEC | libc::O_NONBLOCK | UFFD_USER_MODE_ONLY) as u64;
    let seccomp = crate::procfs::seccomp_mode(live_thread)
        .map_err(|source| InjectionRefused::Status { tid: live_thread.raw(), source })?;
    let taken = tracer.with_seccomp_suspended(live_thread, seccomp, |tracer| {
        let fd = tracer.inject_syscall(live_thread, syscall_at, libc::SYS_userfaultfd as u64, &[flags])?;
        if fd < 0 {
            return Err(TrackingError::Userfaultfd(std::io::Error::from_raw_os_error(-fd as i32)));
        }
        let taken = fds::pidfd_open(pid).and_then(|pidfd| fds::pidfd_getfd(&pidfd, pid, fd as i32));
        // The program's descriptor table goes back to what it was, whatever happened above.
        match tracer.inject_syscall(live_thread, syscall_at, libc::SYS_close as u64, &[fd as u64])? {
            0 => {}
            rc => log::warn!("closing the program's copy of the userfaultfd (fd {fd}) failed: errno {}", -rc),
        }
        Ok(taken)
    })?;
    Userfaultfd::enable_wp_async(taken?).map_err(TrackingError::NoAsyncWp)
}
