//! Recreates a running process from an SDT snapshot: the same memory layout and contents,
//! the same threads with the same ids, registers, FPU state, TLS and signal masks, the
//! same signal handlers, working directory and open files. The process is left with
//! every thread stopped under the caller's ptrace, ready to be resumed (or captured).
//!
//! ```no_run
//! use sdt_store::Store;
//!
//! let store = Store::open(".sdt".as_ref())?;
//! let run = store.open_run(&store.latest_run()?)?;
//! let snap = run.open_snapshot("S1")?;
//! let trust = sdt_store::Trust::of_run(&run);
//! let restored = sdt_restore::restore(&snap, &trust, &sdt_restore::Options::default())?;
//! println!("pid {} (in its namespace: {})", restored.pid, restored.threads[0].tid);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # How
//!
//! A new PID namespace gets an init, which starts the stub under the snapshot's pid
//! (`clone3` with `set_tid`): thread ids the program cached (glibc does) stay valid.
//! The stub lays out the snapshot's descriptors, signal dispositions, umask,
//! personality and working directory itself, then waits; the caller's thread seizes it
//! and, through system calls injected into it, replaces its memory (`memory`), then
//! creates the other threads with their ids and sets every thread's state (`threads`)
//! and scheduling: CPUs, policy, nice value (`sched`). Extra environment variables go
//! into a new `environ` array (`environ`). The interval timers that were running are
//! set again with the time they had left (`timers`), the resource limits as they were,
//! never above the restorer's hard limits (`limits`). Last, every thread takes the
//! credentials it had (`creds`): the stub opened the program's files as the program's
//! user already.
//!
//! # Design constraints
//!
//! - Everything the restore cannot recreate (sockets, pipes another process held an end
//!   of, System V shared memory, epoll, …) is refused before anything starts, with an
//!   error naming the object (`plan`). The program's own pipes, its eventfds and the
//!   deleted files whose bytes the snapshot kept (as memfds) are made again with what
//!   they held, and handed to the stub (`files`).
//! - Files the snapshot maps by reference must be the version that was mapped. Every
//!   file opened by path (descriptors, mappings) must be what the snapshot says it is,
//!   never a link, FIFO or socket, and one the store's owners could open so (`files`);
//!   descriptors are opened through the very file checked.
//! - The snapshot must come from this machine's kernel (the vDSO is moved, not copied).
//! - Needs the rights to create a PID namespace and choose pids in it: root, or
//!   `CAP_SYS_ADMIN`. Without it, the PID namespace belongs to a user namespace of its
//!   own ([`Restored::user_namespace`]), which maps only the restorer's user and group:
//!   a snapshot whose threads had other ids or supplementary groups is refused.
//! - The restored process gets the user and group ids, supplementary groups,
//!   capabilities (never more than the restorer's), `no_new_privs`, seccomp strict mode
//!   and dumpable flag its snapshot recorded, thread by thread; a snapshot from before
//!   they were recorded resumes as its real user and group, with no supplementary groups
//!   and no capabilities unless that user is root. [`Privileges::Restorer`] opts out,
//!   for a store root owns only.
//! - Recorded credentials are trusted only as far as the store's owners have them
//!   ([`sdt_store::OwnerRights`]): a store of uid 1001 that claims uid 0 or a
//!   capability is refused, or lowered to uid 1001's ([`Options::beyond_owner`]).
//! - A thread that had a seccomp filter is refused (the snapshot does not hold the
//!   filter), unless [`Privileges::RecordedWithoutSeccompFilter`] says to go on without;
//!   so is a program that held POSIX timers, unless [`Options::without_posix_timers`].
//!
//! It does not restore: pending signals, POSIX timers, interval timers whose signal did
//! not reach the program (left at their default action), alternate signal stacks, child
//! processes, or the parent link (the restored process is the child of
//! its namespace's init).

#![deny(missing_docs)]
#![deny(unsafe_code)]

mod creds;
mod environ;
mod files;
mod limits;
mod memory;
mod plan;
mod remote;
mod sched;
mod threads;
mod timers;

use std::path::Path;

use sdt_store::{BeyondOwner, Mapping, Snapshot, Trust};
use sdt_sys::respawn::{self, IdMap, RespawnError, Stub};
use sdt_sys::wait::{self, Stop};
use sdt_sys::{Tid, ptrace};

use remote::Remote;

/// A restored process, every thread stopped in a ptrace-stop of the calling thread.
#[derive(Debug)]
pub struct Restored {
    /// The process, in the caller's pid namespace.
    pub pid: Tid,
    /// Its namespace's init, the caller's child: it exits with the process's status.
    pub init: Tid,
    /// Every thread, the main thread first.
    pub threads: Vec<RestoredThread>,
    /// Bytes of pages written into the process.
    pub bytes_written: u64,
    /// The restorer lacked `CAP_SYS_ADMIN`: the process runs in a user namespace of its
    /// own that maps only the restorer's user and group (files of other users show as
    /// `nobody`'s there, and it cannot change its groups).
    pub user_namespace: bool,
}

/// One restored thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RestoredThread {
    /// Its id in the caller's pid namespace.
    pub host: Tid,
    /// Its id inside the restored process's namespace: the snapshot's.
    pub tid: i32,
}

/// What a restore does besides recreating the process.
#[derive(Clone, Copy, Debug, Default)]
pub struct Options<'a> {
    /// `PTRACE_O_*` options the process is seized with (clone tracing is always added).
    pub ptrace_options: u32,
    /// Environment variables (name, value) to add to or replace in the program's.
    pub env: &'a [(String, String)],
    /// Whose credentials the program resumes with.
    pub privileges: Privileges,
    /// What becomes of recorded credentials beyond what the store's owner has.
    pub beyond_owner: BeyondOwner,
    /// Resume a program that held POSIX timers without them (else refused).
    pub without_posix_timers: bool,
}

/// Whose credentials a restored program resumes with.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Privileges {
    /// Those its snapshot recorded, thread by thread; a seccomp filter is refused.
    #[default]
    Recorded,
    /// Those its snapshot recorded, without the seccomp filter a thread had.
    RecordedWithoutSeccompFilter,
    /// The restorer's own (root's): files are opened and the program runs with them.
    /// Only for a store that root owns: another owner's could make root run anything.
    Restorer,
}

/// Why a snapshot could not be restored.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The snapshot holds something the restore cannot recreate.
    #[error("cannot restore {what}")]
    Unsupported {
        /// What, named.
        what: String,
    },
    /// Creating the PID namespace was refused.
    #[error(
        "restoring needs the right to create a PID namespace and choose its pids (run as root, or \
         with CAP_SYS_ADMIN)"
    )]
    NoNamespace(#[source] sdt_sys::Error),
    /// Without `CAP_SYS_ADMIN`, creating a user namespace to own the PID namespace was
    /// refused.
    #[error(
        "restoring without root needs a user namespace of its own, which this system refused (`sysctl \
         user.max_user_namespaces`, `kernel.unprivileged_userns_clone`, an AppArmor policy or a \
         container's seccomp profile decide it): run as root, or with CAP_SYS_ADMIN"
    )]
    NoUserNamespace(#[source] sdt_sys::Error),
    /// Without `CAP_SYS_ADMIN`, a thread's recorded ids are not the restorer's own.
    #[error(
        "thread {tid}'s {what} are {recorded}: restoring without root gives a program only the restorer's \
         own ({own}); restore it as root"
    )]
    NotOwnIds {
        /// The thread, by its snapshot id.
        tid: i32,
        /// Which ids.
        what: &'static str,
        /// What the snapshot recorded.
        recorded: String,
        /// What the restorer has.
        own: String,
    },
    /// Starting the new process failed at one of its steps.
    #[error("starting the restored process: {what}")]
    Stub {
        /// The step, and the descriptor or signal it concerned.
        what: String,
        /// The errno.
        #[source]
        source: std::io::Error,
    },
    /// A system call made inside the new process failed.
    #[error("{what}")]
    Call {
        /// What the call was for.
        what: String,
        /// The errno.
        #[source]
        source: std::io::Error,
    },
    /// A thread had a seccomp filter, which the snapshot does not hold.
    #[error(
        "cannot restore thread {tid}'s seccomp filter: snapshots do not hold the filter, and without it \
         the program would be allowed system calls it was not"
    )]
    SeccompFilter {
        /// The thread, by its snapshot id.
        tid: i32,
    },
    /// A thread's register set has the wrong size (a damaged or crafted snapshot).
    #[error(transparent)]
    Regset(#[from] sdt_store::RegsetSizeError),
    /// A thread's recorded credentials are more than the owner of its store has.
    #[error(transparent)]
    BeyondOwner(#[from] sdt_store::CredentialsRefused),
    /// The restorer's own credentials were asked for a store root does not own.
    #[error(
        "the store belongs to uid {owner}, who can write any code into its snapshots: they are not resumed \
         with the restorer's own credentials"
    )]
    NotRootsStore {
        /// The store's owner.
        owner: u32,
    },
    /// A file the restore would open by path is not what the snapshot says, or not one
    /// the store's owners could open so.
    #[error("cannot restore {what}")]
    Refused {
        /// The descriptor or mapping, and its path.
        what: String,
        /// Why not.
        #[source]
        source: sdt_store::Error,
    },
    /// A thread's credentials did not come out as set.
    #[error("thread {tid} did not take its recorded credentials: its {what} are {got}, not {want}")]
    Credentials {
        /// The thread, by its snapshot id.
        tid: i32,
        /// Which credential.
        what: &'static str,
        /// What it has.
        got: String,
        /// What it should have.
        want: String,
    },
    /// The program held POSIX timers, which a restore cannot make again.
    #[error(
        "cannot restore the program's POSIX timers ({names}): a restore does not make timer_create's \
         timers again (the snapshot holds neither their ids' order nor the time they had left)"
    )]
    PosixTimers {
        /// Each timer, with its signal and how it notifies.
        names: String,
    },
    /// Reading the snapshot failed.
    #[error(transparent)]
    Store(#[from] sdt_store::Error),
    /// A system call of the restore itself failed.
    #[error(transparent)]
    Sys(sdt_sys::Error),
}

/// Recreates the process of `snap`, seized and stopped, as `options` say. `trust` is its
/// store's ([`Trust::of_run`]): what its owners may open, and the most credentials the
/// snapshot may claim.
pub fn restore(snap: &Snapshot, trust: &Trust, options: &Options) -> Result<Restored, Error> {
    let meta = snap.meta();
    plan::threads(meta)?;
    if meta.unread_handlers != 0 {
        return Err(Error::Unsupported {
            what: format!(
                "a program whose handlers of {} were not recorded (it ran under seccomp, which sdt \
                 could not suspend to read them): it would resume without them",
                meta.unread_handler_names()
            ),
        });
    }
    timers::check(meta, options.without_posix_timers)?;
    let mut plans = plan::mappings(meta)?;
    let rights = trust.rights();
    let restorer = creds::own()?;
    let user_namespace = (!creds::may_choose_pids(&restorer)).then(IdMap::own);
    let tids = meta.threads.iter().map(|t| t.tid);
    let targets = match options.privileges {
        Privileges::Restorer => match rights.owners().first() {
            Some(owner) => return Err(Error::NotRootsStore { owner: owner.uid }),
            // In a user namespace of its own, the stub holds every capability there.
            None if user_namespace.is_some() => Some(creds::Targets::all(tids, &restorer)),
            None => None,
        },
        privileges => {
            Some(creds::targets(&meta.process, tids, &restorer, privileges, &rights, options.beyond_owner)?)
        }
    };
    if let (Some(targets), Some(_)) = (&targets, user_namespace) {
        creds::check_own(targets, &restorer)?;
    }
    let files::Substitutes { kept, gone } = files::substitutes(snap)?;
    files::map_kept(&mut plans, &kept);
    files::map_gone(&mut plans, &gone);
    files::mappings(meta, &plans, &kept, trust)?;
    let descriptors = files::descriptors(meta, trust)?;
    let stub = Stub {
        pid: meta.process.pid,
        cwd: std::ffi::CString::new(meta.process.cwd.as_bytes())
            .map_err(|_| Error::Unsupported { what: "a working directory with a NUL byte".into() })?,
        fds: descriptors.fds.clone(),
        actions: threads::actions(&meta.signals),
        identity: targets.as_ref().map(|t| creds::file_identity(t.of(meta.process.pid))),
        user_namespace,
        umask: meta.process.umask,
        personality: meta.process.personality,
    };
    let spawned = respawn::spawn_stub(&stub)
        .map_err(|e| stub_error(e, &descriptors.names, user_namespace.is_some()))?;
    drop(descriptors);
    // Until the restore succeeds, a failure takes the whole namespace down with it.
    let mut guard = KillOnDrop(Some(spawned.init));
    let pid = spawned.stub;
    ptrace::seize(pid, options.ptrace_options | ptrace::options::TRACECLONE).map_err(Error::Sys)?;
    ptrace::interrupt(pid).map_err(Error::Sys)?;
    wait_stopped(pid)?;

    let stub_maps = maps_of(pid)?;
    let vdso = stub_maps
        .iter()
        .find(|m| m.path == "[vdso]")
        .ok_or_else(|| Error::Unsupported { what: "on a kernel that gives processes no vDSO".into() })?;
    let syscall_at =
        sdt_sys::memory::find(pid, vdso.start, vdso.end, &[0x0f, 0x05]).map_err(Error::Sys)?.ok_or_else(
            || Error::Unsupported { what: "on a kernel whose vDSO has no syscall instruction".into() },
        )?;
    let mut remote = Remote::new(pid, syscall_at);
    let stub_ranges: Vec<(u64, u64)> = stub_maps.iter().map(|m| (m.start, m.end)).collect();
    let scratch = memory::map_scratch(&mut remote, &stub_ranges, &plans)?;
    memory::detach_stub_state(&mut remote)?;
    memory::unmap_stub(&mut remote, scratch)?;
    // The vDSO's syscall instruction, at the same offset once the vDSO has moved.
    let vdso_syscall =
        memory::move_specials(&mut remote, &plans, scratch)?.map(|at| at + (syscall_at - vdso.start));
    memory::map_all(&mut remote, &plans)?;
    let bytes_written = memory::write_pages(&mut remote, snap, &plans)?;
    for patch in sdt_target::patches(meta, &|addr, buf| snap.read(addr, buf).is_ok()) {
        sdt_sys::memory::write(pid, patch.addr, &patch.bytes).map_err(Error::Sys)?;
    }
    environ::set(&mut remote, snap, options.env)?;
    // The copy kept with the run where the program changed since, or was deleted before
    // the capture.
    let deleted = meta.process.deleted_program.as_ref().and_then(|f| snap.file_path(f).ok());
    let exe = kept
        .iter()
        .find(|k| k.from == meta.process.exe)
        .map(|k| k.to.as_str())
        .or_else(|| deleted.as_deref().and_then(Path::to_str))
        .unwrap_or(&meta.process.exe);
    memory::set_layout(&mut remote, &meta.layout, &meta.auxv, exe)?;

    let threads = threads::create(&mut remote, meta)?;
    threads::set_up(&mut remote, snap, &threads)?;
    let restored: Vec<RestoredThread> = threads.iter().map(|(t, _)| *t).collect();
    sched::set(&restored, &meta.process.scheduling, &rights);
    // The stub's credentials, every thread's until they take their own.
    let stub_creds = targets.as_ref().map(|_| creds::current(pid)).transpose()?;
    if let (Some(targets), Some(now)) = (&targets, &stub_creds) {
        // Unknown for a root process: dumpable, as every program starts.
        creds::set(&mut remote, &restored, targets, now, meta.process.dumpable.unwrap_or(true))?;
    }
    timers::set(&mut remote, &meta.timers)?;
    limits::set(&mut remote, pid, &meta.process.limits)?;
    // The scratch area goes last, through the vDSO's own syscall instruction.
    if let Some(at) = vdso_syscall {
        remote.use_syscall_at(at);
        remote.drop_scratch();
        remote.call("unmapping the scratch area", libc::SYS_munmap, &[scratch.0, scratch.1 - scratch.0])?;
    }
    if let (Some(targets), Some(now)) = (&targets, &stub_creds) {
        creds::confine(&mut remote, &restored, targets, now)?;
        creds::verify(&restored, targets)?;
    }
    threads::set_registers(&threads)?;
    guard.0 = None;
    Ok(Restored {
        pid,
        init: spawned.init,
        threads: restored,
        bytes_written,
        user_namespace: user_namespace.is_some(),
    })
}

/// Kills and reaps the namespace's init (and so every process in it) unless disarmed.
struct KillOnDrop(Option<Tid>);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if let Some(init) = self.0 {
            sdt_sys::kill_namespace(init);
        }
    }
}

/// Waits for `tid`'s next ptrace-stop (an event stop, or a signal stop: signals are
/// blocked in the new process, and any stop will do).
fn wait_stopped(tid: Tid) -> Result<(), Error> {
    let died = |how: String| Error::Call {
        what: format!("the new process {tid} {how} before it was restored"),
        source: std::io::Error::from_raw_os_error(libc::ESRCH),
    };
    match wait::wait_for(tid).map_err(Error::Sys)?.1 {
        Stop::Event(..) | Stop::Signal(_) => Ok(()),
        Stop::Exited(code) => Err(died(format!("exited with status {code}"))),
        Stop::Killed(sig, _) => Err(died(format!("was killed by signal {sig}"))),
    }
}

/// The mappings of thread `tid`'s process.
fn maps_of(tid: Tid) -> Result<Vec<Mapping>, Error> {
    sdt_procfs::maps(tid)
        .map_err(|e| Error::Sys(sdt_sys::Error { call: "reading /proc/PID/maps", tid: tid.raw(), source: e }))
}

/// Words the stub's failure in the snapshot's terms; `names` says what each descriptor
/// it opened is; `user_namespace`: the stub was to have one of its own.
fn stub_error(e: RespawnError, names: &[(i32, String)], user_namespace: bool) -> Error {
    use sdt_sys::respawn::StubStep;
    let refused =
        |e: sdt_sys::Error| if user_namespace { Error::NoUserNamespace(e) } else { Error::NoNamespace(e) };
    match e {
        // A user namespace is refused with EPERM, EACCES, ENOSPC (none left) or EUSERS.
        RespawnError::Sys(e)
            if e.is_permission_denied()
                || (user_namespace && [libc::EACCES, libc::ENOSPC, libc::EUSERS].contains(&e.errno())) =>
        {
            refused(e)
        }
        RespawnError::Sys(e) => Error::Sys(e),
        RespawnError::Step { step, index, source } => {
            let file = || {
                names
                    .iter()
                    .find(|(fd, _)| *fd == index)
                    .map_or_else(|| format!("sdt's own descriptor {index}"), |(_, name)| name.clone())
            };
            let what = match step {
                StubStep::Clone => "creating the process with its pid".to_owned(),
                StubStep::Signal => format!("setting the handler of signal {index}"),
                StubStep::Chdir => "changing to the working directory".to_owned(),
                StubStep::Open => format!("opening file descriptor {index} ({})", file()),
                StubStep::Seek => format!("seeking file descriptor {index} ({})", file()),
                StubStep::Identity => "taking the program's user and groups for opening its files".to_owned(),
                StubStep::Watch => {
                    format!("adding file descriptor {index} ({}) to an epoll instance", file())
                }
                StubStep::UserNamespace => {
                    let file = ["setgroups", "uid_map", "gid_map"].get(index as usize).unwrap_or(&"maps");
                    return refused(sdt_sys::Error { call: file, tid: 0, source });
                }
            };
            if step == StubStep::Clone && source.raw_os_error() == Some(libc::EPERM) {
                return refused(sdt_sys::Error { call: "clone3", tid: 0, source });
            }
            let what = match source.raw_os_error() {
                Some(libc::EMFILE) => {
                    let highest = names.iter().map(|(fd, _)| *fd).max().unwrap_or(index);
                    format!(
                        "{what}; the program holds descriptors up to {highest}, and laying them out \
                         needs more than the open-files limit (`ulimit -n`) allows, which sdt cannot \
                         raise without CAP_SYS_RESOURCE"
                    )
                }
                _ => what,
            };
            Error::Stub { what, source }
        }
    }
}
