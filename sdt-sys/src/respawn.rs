//! Starting the shell of a restored process: a new PID namespace whose first process
//! (its init) starts a second one under the pid the snapshot had, with the snapshot's
//! working directory, open files and signal dispositions. The caller then seizes that
//! process and replaces its memory and threads.
//!
//! ```text
//! sdt ──clone(CLONE_NEWPID)──▶ init (pid 1 in the namespace)
//!                               │ [its user namespace's maps: setgroups deny, uid_map, gid_map]
//!                               │ clone3(set_tid = [pid])
//!                               ▼
//!                              stub (pid = the snapshot's pid): block signals, set
//!                              dispositions, umask, personality, chdir, take the
//!                              program's file identity, lay out descriptors, add
//!                              epoll watches, close the report pipe, pause()
//! init: close every descriptor, reap children until the stub ends, then exit with its
//! status
//! ```
//!
//! The stub opens the snapshot's files as the program's user ([`FileIdentity`]): a
//! descriptor is a capability, and one opened with root's rights would hand the program
//! files it could not open itself. The working directory is not one (every lookup from
//! it is checked again), so the stub enters it with the caller's rights. Init holds
//! nothing the program could reach.
//!
//! A caller without `CAP_SYS_ADMIN` cannot create a PID namespace, nor choose pids, in
//! its own user namespace; it can in one of its own ([`Stub::user_namespace`]): init is
//! cloned into a new user namespace as well, which maps only the caller's user and group
//! onto themselves (all an unprivileged caller may map), and owns the PID namespace.
//! Init and the stub hold every capability in it until the restore lowers the threads'
//! credentials; `setgroups` is denied there, so the stub keeps the caller's groups.
//!
//! A step of the stub that fails writes `(step, errno)` to the report pipe and exits; a
//! report pipe closed with nothing in it means the stub is ready.
//!
//! # Safety
//!
//! After `clone`, both children run only raw system calls (`rt_sigprocmask`,
//! `rt_sigaction`, `umask`, `personality`, `chdir`, `setgroups`, `setfsgid`,
//! `setfsuid`, `openat`, `fcntl`, `dup2`, `lseek`, `epoll_ctl`, `close_range`, `open`,
//! `write`, `clone3`, `wait4`, `pause`, `exit_group`) on memory prepared before the
//! clone: no allocation, no locks, as after any `fork` of a multithreaded process
//! (glibc's `setgroups` would signal the caller's other threads, which the child does
//! not have).

#![allow(unsafe_code)]

use std::ffi::CString;
use std::os::fd::{AsRawFd, OwnedFd};

use crate::{Error, Result, Tid, pipe, reap};

/// Where a descriptor of the stub comes from.
#[derive(Clone, Debug)]
pub enum FdSource {
    /// `open(path, flags)`, then `lseek(pos)`.
    Open {
        /// The path.
        path: CString,
        /// `open(2)` flags.
        flags: i32,
        /// The position to seek to.
        pos: u64,
    },
    /// This process's own descriptor (a terminal or pipe on stdio, a pipe or eventfd
    /// made for the restore).
    Inherit(i32),
}

/// One descriptor of the stub.
#[derive(Clone, Debug)]
pub struct StubFd {
    /// Its number in the stub.
    pub fd: i32,
    /// What it refers to.
    pub source: FdSource,
    /// Close-on-exec.
    pub cloexec: bool,
    /// For an epoll instance: the stub's descriptors it watches, added once every
    /// descriptor is in place.
    pub watches: Vec<Watch>,
}

/// A descriptor an epoll instance watches: `epoll_ctl(EPOLL_CTL_ADD, fd, {events, data})`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Watch {
    /// The watched descriptor.
    pub fd: i32,
    /// Its events.
    pub events: u32,
    /// Its user data.
    pub data: u64,
}

/// The process a restore starts from.
#[derive(Clone, Debug)]
pub struct Stub {
    /// Its pid inside the new namespace (the snapshot's pid).
    pub pid: i32,
    /// Working directory.
    pub cwd: CString,
    /// Descriptors, each number once.
    pub fds: Vec<StubFd>,
    /// `struct kernel_sigaction` (handler, flags, restorer, mask) for signals 1..=64;
    /// `None`: the default action.
    pub actions: [Option<[u64; 4]>; 64],
    /// Whose rights the descriptors are opened with; `None`: the caller's.
    pub identity: Option<FileIdentity>,
    /// A user namespace of its own for the PID namespace (a caller without
    /// `CAP_SYS_ADMIN`); `None`: the caller's.
    pub user_namespace: Option<IdMap>,
    /// The file mode creation mask; `None`: the caller's.
    pub umask: Option<u32>,
    /// The personality (`personality(2)`); `None`: the caller's.
    pub personality: Option<u32>,
}

/// The one user and one group a new user namespace maps onto themselves: the caller's
/// effective ones, as an unprivileged caller may map them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IdMap {
    /// The user id, inside and outside.
    pub uid: u32,
    /// The group id, inside and outside.
    pub gid: u32,
}

impl IdMap {
    /// The caller's effective user and group.
    pub fn own() -> IdMap {
        IdMap { uid: nix::unistd::geteuid().as_raw(), gid: nix::unistd::getegid().as_raw() }
    }

    /// What init writes to its own `/proc` files, in order: `setgroups` first, which an
    /// unprivileged `gid_map` needs denied.
    fn files(&self) -> [(CString, CString); 3] {
        let file = |path: &str, text: String| (CString::new(path).unwrap(), CString::new(text).unwrap());
        [
            file("/proc/self/setgroups", "deny".into()),
            file("/proc/self/uid_map", format!("{0} {0} 1\n", self.uid)),
            file("/proc/self/gid_map", format!("{0} {0} 1\n", self.gid)),
        ]
    }
}

/// What file access is checked against: the filesystem user and group, and the
/// supplementary groups.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileIdentity {
    /// `setfsuid(2)`.
    pub fsuid: u32,
    /// `setfsgid(2)`.
    pub fsgid: u32,
    /// `setgroups(2)`.
    pub groups: Vec<u32>,
}

/// The started stub.
#[derive(Debug)]
pub struct Spawned {
    /// The namespace's init, this process's child.
    pub init: Tid,
    /// The stub, in this process's pid namespace, waiting in `pause()`.
    pub stub: Tid,
}

/// What the stub was doing when it failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum StubStep {
    /// `clone3` with the snapshot's pid (in init).
    Clone = 1,
    /// `rt_sigaction` of a signal.
    Signal,
    /// `chdir` to the working directory.
    Chdir,
    /// Opening or placing a descriptor.
    Open,
    /// `lseek` to a file position.
    Seek,
    /// Taking the program's file identity (`setgroups`, `setfsgid`, `setfsuid`).
    Identity,
    /// An epoll instance's watch of a descriptor (`epoll_ctl`).
    Watch,
    /// Writing the user namespace's maps (in init; the item is the file: 0 `setgroups`,
    /// 1 `uid_map`, 2 `gid_map`).
    UserNamespace,
}

/// Why the stub could not be started.
#[derive(Debug, thiserror::Error)]
pub enum RespawnError {
    /// A step in the stub failed; `index` is the descriptor or signal it was working on.
    #[error("restoring the process: {step:?} step failed (item {index})")]
    Step {
        /// The step.
        step: StubStep,
        /// The descriptor number or signal number concerned (0 if none).
        index: i32,
        /// The errno.
        #[source]
        source: std::io::Error,
    },
    /// A system call of this process failed.
    #[error(transparent)]
    Sys(#[from] Error),
}

/// Starts init and the stub (see the module doc). Needs the rights to create a PID
/// namespace and choose pids in it: `CAP_SYS_ADMIN`, or a user namespace of its own
/// ([`Stub::user_namespace`]) where the kernel lets users create them.
pub fn spawn_stub(stub: &Stub) -> Result<Spawned, RespawnError> {
    let (report_read, report_write) = pipe()?;
    let id_files = stub.user_namespace.map(|map| map.files());
    let new_user = if id_files.is_some() { libc::CLONE_NEWUSER } else { 0 };
    // Prepared before the clone: the children must not allocate.
    let mut placed = vec![-1i32; stub.fds.len()];
    let base = stub.fds.iter().map(|f| f.fd).chain(open_fds_max()).max().unwrap_or(2) + 1;
    room_for_descriptors(base, stub.fds.len())?;
    let set_tid = [stub.pid];
    let args = libc::clone_args {
        flags: 0,
        pidfd: 0,
        child_tid: 0,
        parent_tid: 0,
        exit_signal: libc::SIGCHLD as u64,
        stack: 0,
        stack_size: 0,
        tls: 0,
        set_tid: set_tid.as_ptr() as u64,
        set_tid_size: 1,
        cgroup: 0,
    };

    // SAFETY: a fork-like clone (no new stack, no shared memory); the child runs only
    // raw system calls on memory prepared above (module note).
    let init =
        unsafe { libc::syscall(libc::SYS_clone, libc::CLONE_NEWPID | new_user | libc::SIGCHLD, 0, 0, 0, 0) };
    if init < 0 {
        let call = if new_user != 0 { "clone(CLONE_NEWUSER | CLONE_NEWPID)" } else { "clone(CLONE_NEWPID)" };
        return Err(Error::last(call, 0).into());
    }
    if init == 0 {
        let pipes = (report_write.as_raw_fd(), report_read.as_raw_fd());
        // SAFETY: see above.
        unsafe { run_init(&args, id_files.as_ref(), stub, pipes, base, &mut placed) }
    }
    let init = Tid::new(init as i32).expect("clone returned a positive pid");
    drop(report_write);
    let mut report = [0u8; 12];
    let n = read_full(&report_read, &mut report);
    if n == report.len() {
        let word = |i: usize| u32::from_ne_bytes(report[i * 4..i * 4 + 4].try_into().unwrap());
        crate::kill_process(init, libc::SIGKILL).ok();
        reap(init);
        let step = match word(0) {
            1 => StubStep::Clone,
            2 => StubStep::Signal,
            3 => StubStep::Chdir,
            4 => StubStep::Open,
            5 => StubStep::Seek,
            6 => StubStep::Identity,
            7 => StubStep::Watch,
            _ => StubStep::UserNamespace,
        };
        return Err(RespawnError::Step {
            step,
            index: word(1) as i32,
            source: std::io::Error::from_raw_os_error(word(2) as i32),
        });
    }
    let children = std::fs::read_to_string(format!("/proc/{init}/task/{init}/children")).unwrap_or_default();
    match children.split_whitespace().next().and_then(|p| p.parse().ok()).and_then(Tid::new) {
        Some(stub) => Ok(Spawned { init, stub }),
        None => {
            crate::kill_process(init, libc::SIGKILL).ok();
            reap(init);
            Err(Error {
                call: "clone3",
                tid: 0,
                source: std::io::Error::other("the restored process did not start"),
            }
            .into())
        }
    }
}

/// The namespace's init: writes its user namespace's maps if it has one of its own
/// (`id_files`: each path and what it gets), starts the stub, then reaps children until
/// the stub ends and exits as it did. `pipes`: the report pipe's write and read ends.
unsafe fn run_init(
    args: &libc::clone_args,
    id_files: Option<&[(CString, CString); 3]>,
    stub: &Stub,
    (report, report_read): (i32, i32),
    base: i32,
    placed: &mut [i32],
) -> ! {
    // SAFETY: raw system calls on memory prepared before the clone (module note).
    unsafe {
        libc::close(report_read);
        block_all_signals();
        for (i, (path, text)) in id_files.into_iter().flatten().enumerate() {
            let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
            let len = text.as_bytes().len();
            if fd < 0 || libc::write(fd, text.as_ptr().cast(), len) != len as isize {
                fail(report, StubStep::UserNamespace, i as i32);
            }
            libc::close(fd);
        }
        let child =
            libc::syscall(libc::SYS_clone3, args as *const libc::clone_args, size_of::<libc::clone_args>());
        if child < 0 {
            fail(report, StubStep::Clone, 0);
        }
        if child == 0 {
            run_stub(stub, report, base, placed);
        }
        // Init needs no descriptor from here on, and keeps none of the caller's.
        libc::close_range(0, u32::MAX, 0);
        loop {
            let mut status = 0;
            let pid = libc::wait4(-1, &mut status, libc::__WALL, std::ptr::null_mut());
            if pid == child as i32 || (pid < 0 && *libc::__errno_location() == libc::ECHILD) {
                let code =
                    if libc::WIFEXITED(status) { libc::WEXITSTATUS(status) } else { 128 + (status & 0x7f) };
                libc::syscall(libc::SYS_exit_group, code);
            }
        }
    }
}

/// The stub: dispositions, umask, personality, working directory, descriptors, then
/// wait to be seized.
unsafe fn run_stub(stub: &Stub, report: i32, base: i32, placed: &mut [i32]) -> ! {
    // SAFETY: raw system calls on memory prepared before the clone (module note).
    unsafe {
        for (i, action) in stub.actions.iter().enumerate() {
            let signo = i as i32 + 1;
            if signo == libc::SIGKILL || signo == libc::SIGSTOP {
                continue;
            }
            let act = action.unwrap_or([0; 4]);
            let rc = libc::syscall(libc::SYS_rt_sigaction, signo, act.as_ptr(), 0usize, 8usize);
            if rc < 0 {
                fail(report, StubStep::Signal, signo);
            }
        }
        if let Some(mask) = stub.umask {
            libc::umask(mask);
        }
        if let Some(persona) = stub.personality {
            libc::personality(persona as libc::c_ulong);
        }
        if libc::chdir(stub.cwd.as_ptr()) < 0 {
            fail(report, StubStep::Chdir, 0);
        }
        if let Some(id) = &stub.identity {
            take_identity(id, stub.user_namespace.is_none(), report);
        }
        // Everything the stub keeps goes above `base` first, so that placing a descriptor
        // never closes another one still to be placed.
        let report = libc::fcntl(report, libc::F_DUPFD_CLOEXEC, base);
        if report < 0 {
            libc::_exit(126);
        }
        for (slot, f) in placed.iter_mut().zip(&stub.fds) {
            let high = match &f.source {
                FdSource::Open { path, flags, .. } => {
                    let fd =
                        libc::open(path.as_ptr(), flags & !(libc::O_CREAT | libc::O_TRUNC | libc::O_EXCL));
                    if fd < 0 {
                        fail(report, StubStep::Open, f.fd);
                    }
                    let high = libc::fcntl(fd, libc::F_DUPFD, base);
                    libc::close(fd);
                    high
                }
                FdSource::Inherit(ours) => libc::fcntl(*ours, libc::F_DUPFD, base),
            };
            if high < 0 {
                fail(report, StubStep::Open, f.fd);
            }
            *slot = high;
        }
        libc::close_range(0, (base - 1) as u32, 0);
        for (&high, f) in placed.iter().zip(&stub.fds) {
            if libc::dup2(high, f.fd) < 0 {
                fail(report, StubStep::Open, f.fd);
            }
            if f.cloexec {
                libc::fcntl(f.fd, libc::F_SETFD, libc::FD_CLOEXEC);
            }
            if let FdSource::Open { pos, .. } = f.source
                && pos != 0
                && libc::lseek(f.fd, pos as i64, libc::SEEK_SET) < 0
            {
                fail(report, StubStep::Seek, f.fd);
            }
        }
        for f in &stub.fds {
            for w in &f.watches {
                let mut event = libc::epoll_event { events: w.events, u64: w.data };
                if libc::epoll_ctl(f.fd, libc::EPOLL_CTL_ADD, w.fd, &mut event) < 0 {
                    fail(report, StubStep::Watch, w.fd);
                }
            }
        }
        // Closes the report pipe too: the parent reads end-of-file, the stub is ready.
        libc::close_range(base as u32, u32::MAX, 0);
        loop {
            libc::pause();
        }
    }
}

/// Makes file access check `id`, its groups too if `groups` (a user namespace of the
/// stub's own denies `setgroups`: it keeps the caller's, which the restore checked are
/// the program's). `setfsuid` and `setfsgid` return the previous id whether or not they
/// succeeded, so each is asked again with an invalid id (which changes nothing) to check.
unsafe fn take_identity(id: &FileIdentity, groups: bool, report: i32) {
    // SAFETY: raw system calls on memory prepared before the clone (module note).
    unsafe {
        if groups && libc::syscall(libc::SYS_setgroups, id.groups.len(), id.groups.as_ptr()) < 0 {
            fail(report, StubStep::Identity, 0);
        }
        libc::syscall(libc::SYS_setfsgid, id.fsgid);
        if libc::syscall(libc::SYS_setfsgid, u32::MAX) as u32 != id.fsgid {
            *libc::__errno_location() = libc::EPERM;
            fail(report, StubStep::Identity, 0);
        }
        libc::syscall(libc::SYS_setfsuid, id.fsuid);
        if libc::syscall(libc::SYS_setfsuid, u32::MAX) as u32 != id.fsuid {
            *libc::__errno_location() = libc::EPERM;
            fail(report, StubStep::Identity, 0);
        }
    }
}

/// Reports a failed step and exits.
unsafe fn fail(report: i32, step: StubStep, index: i32) -> ! {
    // SAFETY: raw system calls on local values.
    unsafe {
        let errno = *libc::__errno_location();
        let words = [step as u32, index as u32, errno as u32];
        libc::write(report, words.as_ptr().cast(), 12);
        libc::_exit(127)
    }
}

unsafe fn block_all_signals() {
    // SAFETY: a full set on the stack.
    unsafe {
        let all = [u64::MAX];
        libc::syscall(libc::SYS_rt_sigprocmask, libc::SIG_SETMASK, all.as_ptr(), 0usize, 8usize);
    }
}

/// The highest descriptor this process has open.
/// Raises this process's limit on open descriptors so that the stub can hold `count`
/// descriptors at `base` and above while it lays them out: a program may hold
/// descriptors numbered near the limit of whoever restores it. The hard limit is raised
/// too where this process may (`CAP_SYS_RESOURCE`), else the soft one up to it. The stub,
/// and the program, keep the raised limit, as the program had one that let it hold them.
fn room_for_descriptors(base: i32, count: usize) -> Result<(), RespawnError> {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let need = u64::try_from(base).unwrap_or(0) + count as u64 + 2;
    let call = |e: nix::errno::Errno| Error { call: "setrlimit(RLIMIT_NOFILE)", tid: 0, source: e.into() };
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).map_err(call)?;
    if soft < need && setrlimit(Resource::RLIMIT_NOFILE, need, hard.max(need)).is_err() {
        setrlimit(Resource::RLIMIT_NOFILE, need.min(hard), hard).map_err(call)?;
    }
    Ok(())
}

fn open_fds_max() -> Option<i32> {
    std::fs::read_dir("/proc/self/fd").ok()?.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok()).max()
}

/// Reads until `buf` is full or end-of-file; returns the bytes read.
fn read_full(fd: &OwnedFd, buf: &mut [u8]) -> usize {
    let mut done = 0;
    while done < buf.len() {
        match nix::unistd::read(fd, &mut buf[done..]) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(nix::errno::Errno::EINTR) => {}
            Err(_) => break,
        }
    }
    done
}
