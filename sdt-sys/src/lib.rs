//! The system calls SDT makes, and nothing else.
//!
//! ```no_run
//! use sdt_sys::{ptrace, Tid};
//!
//! let tid = Tid::new(1234).unwrap();
//! ptrace::interrupt(tid)?;
//! # Ok::<(), sdt_sys::Error>(())
//! ```
//!
//! Each module wraps one topic: [`ptrace`] (seize, interrupt, resume, register sets),
//! [`wait`] (ptrace stops and exits, decoded without losing real-time signals),
//! [`memory`] (`process_vm_readv`/`writev`), [`pagemap`] (`/proc/PID/pagemap`), [`backing`]
//! (the data and holes of the file behind a mapping),
//! [`events`] (signalfd + timerfd + poll for the tracer's loop), [`spawn`] (launch a program
//! already seized by the caller), [`uffd`] (userfaultfd write-protect, pidfds), [`kmod_ioctl`]
//! (`/dev/sdt`, SDT's kernel module), with the kernel definitions Debian's headers lack in
//! [`uapi`].
//!
//! # Design constraints
//!
//! - Wrappers are thin: one system call each, named for what it does, with the C call on
//!   the first doc line. Policy (which threads to stop, what to read) lives in
//!   `sdt-daemon`.
//! - Failures carry the call and the thread: [`Error`] and its source print as
//!   `PTRACE_INTERRUPT on thread 1234: No such process`.
//! - Signals are raw numbers: programs use real-time signals (glibc's own `SIGCANCEL` is
//!   33), which an enum of named signals cannot carry.
//!
//! # Safety
//!
//! This is the only crate of SDT that calls `unsafe` system-call functions. Each module
//! opts in with `#![allow(unsafe_code)]` and explains there what its calls rely on.

#![deny(missing_docs)]
#![deny(unsafe_code)]
#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

pub mod backing;
pub mod detached;
pub mod events;
pub mod fds;
pub mod kmod_ioctl;
pub mod memory;
pub mod pagemap;
pub mod probe;
pub mod ptrace;
pub mod respawn;
pub mod sched;
pub mod spawn;
pub mod uapi;
pub mod uffd;
pub mod wait;

use std::fmt;
use std::num::NonZeroI32;

/// A kernel thread id (a pid is the id of a process's first thread).
///
/// Like any pid, it could disappear at any time and be replaced by an unrelated thread:
/// ours stay valid because the tracer is told of every exit of a traced thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Tid(NonZeroI32);

impl Tid {
    /// `Some` for a positive id.
    pub fn new(raw: i32) -> Option<Tid> {
        (raw > 0).then(|| Tid(NonZeroI32::new(raw).unwrap()))
    }

    /// The raw id.
    pub fn raw(self) -> i32 {
        self.0.get()
    }
}

impl fmt::Display for Tid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A failed system call: which call, on which thread, and the errno.
#[derive(Debug, thiserror::Error)]
#[error("{call}{}", if *tid > 0 { format!(" on thread {tid}") } else { String::new() })]
pub struct Error {
    /// The call, as the man page names it (`PTRACE_SEIZE`, `process_vm_readv`).
    pub call: &'static str,
    /// The thread or process it was made on (0: none).
    pub tid: i32,
    /// The errno.
    #[source]
    pub source: std::io::Error,
}

impl Error {
    /// The error of the call just made (from `errno`).
    pub(crate) fn last(call: &'static str, tid: i32) -> Error {
        Error { call, tid, source: std::io::Error::last_os_error() }
    }

    /// The errno number.
    pub fn errno(&self) -> i32 {
        self.source.raw_os_error().unwrap_or(0)
    }

    /// `EPERM`: the kernel refused (ptrace restrictions, another tracer, credentials).
    pub fn is_permission_denied(&self) -> bool {
        self.errno() == libc::EPERM
    }

    /// `ESRCH`: the thread is gone, or not in a ptrace-stop. An ordinary outcome for a
    /// thread that exits while being stopped.
    pub fn is_gone(&self) -> bool {
        self.errno() == libc::ESRCH
    }
}

/// Result type of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// `open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_NOFOLLOW)`, of a regular file only:
/// for the mappings of a live process, which its kernel names. `None` if `path` is not a
/// regular file (a FIFO or device is never opened) or cannot be opened.
#[doc(alias = "open")]
pub fn open_regular(path: &str) -> Option<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    // Checked before opening, so that a FIFO or device is never opened, and after.
    if !std::fs::symlink_metadata(path).ok()?.is_file() {
        return None;
    }
    let flags = libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_NOFOLLOW;
    let file = std::fs::OpenOptions::new().read(true).custom_flags(flags).open(path).ok()?;
    file.metadata().ok()?.is_file().then_some(file)
}

/// `kill(pid, sig)`: sends a signal to a process.
#[doc(alias = "kill")]
pub fn kill_process(pid: Tid, signal: i32) -> Result<()> {
    #[allow(unsafe_code)]
    // SAFETY: kill has no memory-safety preconditions.
    let rc = unsafe { libc::kill(pid.raw(), signal) };
    if rc == 0 { Ok(()) } else { Err(Error::last("kill", pid.raw())) }
}

/// How urgently the calling thread runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Urgency {
    /// `SCHED_IDLE`: only on CPU time nothing else wants (anyone may ask for it).
    Background,
    /// `SCHED_OTHER`: shares the CPUs with everything else.
    Normal,
    /// `SCHED_FIFO` priority 1: runs as soon as it wakes, ahead of every normal thread
    /// (needs `CAP_SYS_NICE`). Threads and processes it creates start as normal ones
    /// (`SCHED_RESET_ON_FORK`).
    Immediate,
}

/// `sched_setscheduler(tid, policy, …)`: how urgently thread `tid` of this process runs
/// (`None`: the calling thread).
#[doc(alias = "sched_setscheduler")]
pub fn set_thread_urgency(tid: Option<Tid>, urgency: Urgency) -> Result<()> {
    let (policy, priority) = match urgency {
        Urgency::Background => (libc::SCHED_IDLE, 0),
        Urgency::Normal => (libc::SCHED_OTHER, 0),
        Urgency::Immediate => (libc::SCHED_FIFO | libc::SCHED_RESET_ON_FORK, 1),
    };
    let param = libc::sched_param { sched_priority: priority };
    #[allow(unsafe_code)]
    // SAFETY: `param` is a valid sched_param; pid 0 is the calling thread.
    let rc = unsafe { libc::sched_setscheduler(tid.map_or(0, Tid::raw), policy, &param) };
    if rc == 0 { Ok(()) } else { Err(Error::last("sched_setscheduler", tid.map_or(0, Tid::raw))) }
}

/// A thread's scheduling policy (with `SCHED_RESET_ON_FORK` if set) and static priority.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Scheduling {
    /// `SCHED_OTHER`, `SCHED_FIFO`, …, or'ed with `SCHED_RESET_ON_FORK`.
    pub policy: i32,
    /// The static priority (0 for the policies that are not real-time).
    pub priority: i32,
}

impl Scheduling {
    /// Whether the policy shares the CPUs by fairness (`SCHED_OTHER`, `SCHED_BATCH`,
    /// `SCHED_IDLE`), as opposed to real-time or deadline scheduling.
    pub fn is_fair(&self) -> bool {
        matches!(
            self.policy & !libc::SCHED_RESET_ON_FORK,
            libc::SCHED_OTHER | libc::SCHED_BATCH | libc::SCHED_IDLE
        )
    }
}

/// `sched_getscheduler(tid)` and `sched_getparam(tid)`: how any thread is scheduled.
#[doc(alias = "sched_getscheduler")]
pub fn scheduling(tid: Tid) -> Result<Scheduling> {
    let mut param = libc::sched_param { sched_priority: 0 };
    #[allow(unsafe_code)]
    // SAFETY: `param` is a valid, writable sched_param.
    let (policy, rc) =
        unsafe { (libc::sched_getscheduler(tid.raw()), libc::sched_getparam(tid.raw(), &mut param)) };
    if policy < 0 || rc != 0 {
        return Err(Error::last("sched_getscheduler", tid.raw()));
    }
    Ok(Scheduling { policy, priority: param.sched_priority })
}

/// `sched_setscheduler(tid, policy, {priority})`: schedules any thread so (raising its
/// priority needs `CAP_SYS_NICE`). A fair policy keeps the thread's nice value.
#[doc(alias = "sched_setscheduler")]
pub fn set_scheduling(tid: Tid, scheduling: Scheduling) -> Result<()> {
    let param = libc::sched_param { sched_priority: scheduling.priority };
    #[allow(unsafe_code)]
    // SAFETY: `param` is a valid sched_param.
    let rc = unsafe { libc::sched_setscheduler(tid.raw(), scheduling.policy, &param) };
    if rc == 0 { Ok(()) } else { Err(Error::last("sched_setscheduler", tid.raw())) }
}

/// `gettid()`: the calling thread's id.
pub fn current_tid() -> Tid {
    #[allow(unsafe_code)]
    // SAFETY: gettid has no preconditions.
    let tid = unsafe { libc::gettid() };
    Tid::new(tid).expect("gettid returns a positive id")
}

/// `tgkill(pid, tid, sig)`: sends a signal to one thread of a process.
#[doc(alias = "tgkill")]
pub fn kill_thread(pid: Tid, tid: Tid, signal: i32) -> Result<()> {
    #[allow(unsafe_code)]
    // SAFETY: tgkill has no memory-safety preconditions.
    let rc = unsafe { libc::syscall(libc::SYS_tgkill, pid.raw(), tid.raw(), signal) };
    if rc == 0 { Ok(()) } else { Err(Error::last("tgkill", tid.raw())) }
}

/// `clock_gettime(CLOCK_MONOTONIC)` in nanoseconds: the clock the target's library stamps
/// its breakpoints with, so that the two can be subtracted.
pub fn monotonic_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    #[allow(unsafe_code)]
    // SAFETY: `ts` is a valid, writable timespec.
    unsafe {
        libc::clock_gettime(clock, &mut ts);
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Ends this process the way a program killed by `signal` ends, so that a shell sees the
/// same status: default action restored, no core file, `raise(signal)`; exits with
/// `128 + signal` if the signal does not kill.
pub fn exit_like_signal(signal: i32) -> ! {
    #[allow(unsafe_code)]
    // SAFETY: plain system calls on local, initialised values.
    unsafe {
        let no_core = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        libc::setrlimit(libc::RLIMIT_CORE, &no_core);
        libc::signal(signal, libc::SIG_DFL);
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, signal);
        libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
        libc::raise(signal);
    }
    std::process::exit(128 + signal)
}

/// `signal(SIGINT, SIG_IGN)` and `signal(SIGQUIT, SIG_IGN)`: while a program in our
/// process group runs in the foreground, the terminal's Ctrl-C and Ctrl-\\ are its to
/// act on, not ours (what `system(3)` does).
pub fn ignore_terminal_signals() {
    #[allow(unsafe_code)]
    // SAFETY: sets two signals' dispositions to ignore; no handler is involved.
    unsafe {
        libc::signal(libc::SIGINT, libc::SIG_IGN);
        libc::signal(libc::SIGQUIT, libc::SIG_IGN);
    }
}

/// `signal(SIGPIPE, SIG_DFL)`: a command-line tool whose output pipe closes (`sdt ls |
/// head`) ends quietly, as Unix tools do, instead of failing its next write.
pub fn default_sigpipe() {
    #[allow(unsafe_code)]
    // SAFETY: resets one signal's disposition; no handler is involved.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// `pipe2(O_CLOEXEC)`: a pipe whose ends a launched program does not inherit.
pub(crate) fn pipe() -> Result<(std::os::fd::OwnedFd, std::os::fd::OwnedFd)> {
    nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(|e| Error {
        call: "pipe2",
        tid: 0,
        source: std::io::Error::from_raw_os_error(e as i32),
    })
}

/// Kills a PID namespace by its init (our child) and waits until the init is gone. On
/// the way, traced threads of the namespace that stop (at their exit event) are let go
/// and reaped: its init cannot finish exiting while one of them waits for its tracer.
pub fn kill_namespace(init: Tid) {
    kill_process(init, libc::SIGKILL).ok();
    loop {
        match wait::wait_any() {
            Ok((pid, wait::Stop::Exited(_) | wait::Stop::Killed(..))) if pid == init => break,
            Ok((_, wait::Stop::Exited(_) | wait::Stop::Killed(..))) => {}
            Ok((tid, wait::Stop::Signal(_) | wait::Stop::Event(..))) => {
                ptrace::resume(tid, 0).ok();
            }
            Err(_) => break,
        }
    }
}

/// `waitpid(pid, &status, __WALL)`: waits for a child to end and returns its status (0
/// if it was reaped already).
#[doc(alias = "waitpid")]
pub fn reap(pid: Tid) -> i32 {
    let mut status = 0;
    #[allow(unsafe_code)]
    // SAFETY: `status` is a valid, writable int.
    unsafe {
        libc::waitpid(pid.raw(), &mut status, libc::__WALL)
    };
    status
}

/// `get_robust_list(tid, &head, &len)`: thread `tid`'s robust-futex list, `None` if it
/// registered none.
#[doc(alias = "get_robust_list")]
pub fn robust_list(tid: Tid) -> Result<Option<(u64, u64)>> {
    let (mut head, mut len) = (0u64, 0usize);
    #[allow(unsafe_code)]
    // SAFETY: the kernel writes one pointer and one size_t into the two locals.
    let rc = unsafe { libc::syscall(libc::SYS_get_robust_list, tid.raw(), &raw mut head, &raw mut len) };
    if rc != 0 {
        return Err(Error::last("get_robust_list", tid.raw()));
    }
    Ok((head != 0).then_some((head, len as u64)))
}

/// Whether a process with this pid exists (`kill(pid, 0)`).
pub fn process_exists(pid: u32) -> bool {
    let Some(pid) = i32::try_from(pid).ok().and_then(Tid::new) else { return false };
    match kill_process(pid, 0) {
        Ok(()) => true,
        Err(e) => e.errno() == libc::EPERM,
    }
}
