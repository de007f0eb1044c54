//! Whether this machine lets SDT track writes and restore programs: each checked by
//! doing it once, in this process, the way a capture does it in the program or a restore
//! in its namespace (`sdt doctor`, `sdt --version`).

use std::os::fd::{FromRawFd, OwnedFd};

use crate::pagemap::{Pagemap, ScanQuery};
use crate::uapi::UFFD_USER_MODE_ONLY;
use crate::uffd::Userfaultfd;
use crate::{Error, Result, Tid};

/// A userfaultfd for user-mode faults (what an unprivileged program may create) with
/// asynchronous write-protect (Linux 6.7).
pub fn userfaultfd_wp_async() -> Result<()> {
    let flags = libc::O_CLOEXEC | libc::O_NONBLOCK | UFFD_USER_MODE_ONLY;
    #[allow(unsafe_code)]
    // SAFETY: userfaultfd(2) takes one integer and returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_userfaultfd, flags) };
    if fd < 0 {
        return Err(Error::last("userfaultfd", 0));
    }
    #[allow(unsafe_code)]
    // SAFETY: `fd` was just returned by the kernel and is owned by nothing else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
    Userfaultfd::enable_wp_async(fd).map(drop)
}

/// `PAGEMAP_SCAN` on this process's pagemap (Linux 6.7).
pub fn pagemap_scan() -> Result<()> {
    let pid = Tid::new(std::process::id() as i32).expect("a pid is positive");
    let pagemap = Pagemap::open(pid)?;
    pagemap.scan(0, 4096, ScanQuery::RESIDENT, &mut Vec::new(), &mut Vec::new())
}

/// A PID namespace, as a restore creates one: with `user`, inside a new user namespace
/// (a caller without `CAP_SYS_ADMIN`). Tried with a child that exits at once.
pub fn pid_namespace(user: bool) -> Result<()> {
    let user = if user { libc::CLONE_NEWUSER } else { 0 };
    #[allow(unsafe_code)]
    // SAFETY: a fork-like clone (no new stack, no shared memory); the child only exits.
    let pid =
        unsafe { libc::syscall(libc::SYS_clone, libc::CLONE_NEWPID | user | libc::SIGCHLD, 0, 0, 0, 0) };
    if pid < 0 {
        return Err(Error::last("clone", 0));
    }
    if pid == 0 {
        #[allow(unsafe_code)]
        // SAFETY: _exit ends the child without running anything of the parent's.
        unsafe {
            libc::_exit(0)
        }
    }
    crate::reap(Tid::new(pid as i32).expect("clone returned a positive pid"));
    Ok(())
}
