//! Launching a program that is traced from its first instruction.
//!
//! ```text
//! parent (tracer)                         child
//! fork() ───────────────────────────────▶ unblock signals, SIGPIPE default; read(sync) …
//! PTRACE_SEIZE(child, options)
//! close(sync) ──────────────────────────▶ read returns 0; execve(program)
//! waitpid: PTRACE_EVENT_EXEC stop ◀────── (or: write errno to err pipe; _exit(127))
//! ```
//!
//! Seizing before `execve` means no instruction of the program runs untraced, and the
//! `errno` pipe (closed by a successful `execve`) tells a failed launch apart from a
//! program that exits with 127.
//!
//! # Safety
//!
//! Between `fork` and `execve` the child runs only async-signal-safe calls (`sigprocmask`,
//! `signal`, `close`, `fcntl`, `read`, `execve`, `write`, `_exit`) on memory prepared before
//! the fork.

#![allow(unsafe_code)]

use std::ffi::CString;
use std::os::fd::{AsRawFd, OwnedFd};

use crate::ptrace::{self, event, options};
use crate::wait::{self, Stop};
use crate::{Error, Result, Tid, pipe};

/// Why a launch failed.
#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    /// `execve` refused the program.
    #[error("cannot execute {program}")]
    Exec {
        /// The program's path.
        program: String,
        /// The errno of `execve`.
        #[source]
        source: std::io::Error,
    },
    /// A system call of the launch itself failed.
    #[error(transparent)]
    Sys(#[from] Error),
}

/// What to launch.
#[derive(Debug)]
pub struct Command {
    /// Path of the program (already looked up in `PATH`).
    pub program: CString,
    /// `argv`, the program's name first.
    pub args: Vec<CString>,
    /// The whole environment, `NAME=value`.
    pub env: Vec<CString>,
    /// `PTRACE_O_*` options for the seize; [`options::TRACEEXEC`] is always added.
    pub ptrace_options: u32,
    /// Descriptors, close-on-exec in the caller, that the program inherits (under the
    /// same numbers).
    pub keep: Vec<i32>,
}

/// Forks, seizes the child, and lets it `execve` the program. Returns the pid once the
/// child has stopped at `PTRACE_EVENT_EXEC`; the caller resumes it.
pub fn spawn_seized(cmd: &Command) -> Result<Tid, SpawnError> {
    let argv = null_terminated(&cmd.args);
    let envp = null_terminated(&cmd.env);
    let (sync_read, sync_write) = pipe()?;
    let (err_read, err_write) = pipe()?;

    // SAFETY: the child only makes async-signal-safe calls before execve (module note).
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(Error::last("fork", 0).into());
    }
    if pid == 0 {
        // Child.
        // SAFETY: async-signal-safe calls on memory prepared before fork.
        unsafe {
            let mut empty: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut empty);
            libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
            // Rust's runtime ignores SIGPIPE, and ignored signals survive execve.
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
            libc::close(sync_write.as_raw_fd());
            libc::close(err_read.as_raw_fd());
            for &fd in &cmd.keep {
                libc::fcntl(fd, libc::F_SETFD, 0);
            }
            let mut byte = 0u8;
            while libc::read(sync_read.as_raw_fd(), (&raw mut byte).cast(), 1) < 0 {}
            libc::execve(cmd.program.as_ptr(), argv.as_ptr(), envp.as_ptr());
            let errno = *libc::__errno_location();
            libc::write(err_write.as_raw_fd(), (&raw const errno).cast(), 4);
            libc::_exit(127);
        }
    }
    let pid = Tid::new(pid).expect("fork returned a positive pid");
    drop(sync_read);
    drop(err_write);
    if let Err(e) = ptrace::seize(pid, cmd.ptrace_options | options::TRACEEXEC) {
        crate::kill_process(pid, libc::SIGKILL).ok();
        wait::wait_for(pid).ok();
        return Err(e.into());
    }
    drop(sync_write);
    loop {
        match wait::wait_for(pid)?.1 {
            Stop::Event(e, _) if e == event::EXEC => break,
            Stop::Exited(_) | Stop::Killed(..) => {
                let mut errno = [0u8; 4];
                let n = read_fd(&err_read, &mut errno);
                let program = cmd.program.to_string_lossy().into_owned();
                let source = if n == 4 {
                    std::io::Error::from_raw_os_error(i32::from_ne_bytes(errno))
                } else {
                    std::io::Error::other("the program died before it started")
                };
                return Err(SpawnError::Exec { program, source });
            }
            // Signals that arrive before the exec are the program's: deliver them.
            Stop::Signal(sig) => ptrace::resume(pid, sig)?,
            Stop::Event(..) => ptrace::resume(pid, 0)?,
        }
    }
    Ok(pid)
}

fn null_terminated(strings: &[CString]) -> Vec<*const libc::c_char> {
    strings.iter().map(|s| s.as_ptr()).chain(std::iter::once(std::ptr::null())).collect()
}

fn read_fd(fd: &OwnedFd, buf: &mut [u8]) -> usize {
    nix::unistd::read(fd, buf).unwrap_or(0)
}

/// `memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING)`, filled with `bytes` and sealed
/// against every change: a file that exists nowhere on disk, for a program to map (a
/// library to preload as `/proc/self/fd/N`) without trusting any directory.
#[doc(alias = "memfd_create")]
pub fn sealed_memfd(name: &std::ffi::CStr, bytes: &[u8]) -> Result<OwnedFd> {
    use std::io::Write;
    use std::os::fd::FromRawFd;
    // SAFETY: `name` is a valid C string; the call returns a new descriptor or -1.
    let fd = unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING) };
    if fd < 0 {
        return Err(Error::last("memfd_create", 0));
    }
    // SAFETY: `fd` was just returned to us, open, and is owned by nothing else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut file = std::fs::File::from(fd);
    file.write_all(bytes).map_err(|source| Error { call: "write", tid: 0, source })?;
    let seals = libc::F_SEAL_SEAL | libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_WRITE;
    // SAFETY: fcntl on a descriptor we own, with an integer argument.
    if unsafe { libc::fcntl(file.as_raw_fd(), libc::F_ADD_SEALS, seals) } != 0 {
        return Err(Error::last("fcntl(F_ADD_SEALS)", 0));
    }
    Ok(OwnedFd::from(file))
}
