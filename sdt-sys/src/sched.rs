//! A thread's scheduling: its policy and priority, its nice value and the CPUs it may
//! run on, read and set from outside it (by thread id), as `sched_setaffinity(2)`,
//! `setpriority(2)` and `sched_setscheduler(2)` allow a caller of the same user or with
//! `CAP_SYS_NICE`.

use nix::sched::CpuSet;
use nix::unistd::Pid;

use crate::{Error, Result, Tid};

/// What a thread's scheduling is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Scheduling {
    /// `SCHED_*`, with `SCHED_RESET_ON_FORK` where set.
    pub policy: i32,
    /// Its static priority (1–99 for `SCHED_FIFO` and `SCHED_RR`, else 0).
    pub priority: i32,
    /// Its nice value, -20 to 19.
    pub nice: i32,
    /// The CPUs it may run on, ascending.
    pub cpus: Vec<usize>,
}

/// Thread `tid`'s scheduling.
pub fn of(tid: Tid) -> Result<Scheduling> {
    let raw = tid.raw();
    let set = nix::sched::sched_getaffinity(Pid::from_raw(raw)).map_err(|e| Error {
        call: "sched_getaffinity",
        tid: raw,
        source: e.into(),
    })?;
    let cpus = (0..CpuSet::count()).filter(|&cpu| set.is_set(cpu).unwrap_or(false)).collect();
    #[allow(unsafe_code)]
    // SAFETY: sched_getscheduler(2) takes a thread id and returns an integer.
    let policy = unsafe { libc::sched_getscheduler(raw) };
    if policy < 0 {
        return Err(Error::last("sched_getscheduler", raw));
    }
    let mut param = libc::sched_param { sched_priority: 0 };
    #[allow(unsafe_code)]
    // SAFETY: `param` is a valid sched_param for the kernel to fill.
    if unsafe { libc::sched_getparam(raw, &mut param) } < 0 {
        return Err(Error::last("sched_getparam", raw));
    }
    // getpriority(2) returns the nice value, -1 included: errno tells an error apart.
    nix::errno::Errno::clear();
    #[allow(unsafe_code)]
    // SAFETY: getpriority(2) takes integers and returns one.
    let nice = unsafe { libc::getpriority(libc::PRIO_PROCESS, raw as libc::id_t) };
    if nice == -1 && nix::errno::Errno::last_raw() != 0 {
        return Err(Error::last("getpriority", raw));
    }
    Ok(Scheduling { policy, priority: param.sched_priority, nice, cpus })
}

/// Lets thread `tid` run on `cpus` only.
pub fn set_cpus(tid: Tid, cpus: &[usize]) -> Result<()> {
    let error = |e: nix::errno::Errno| Error { call: "sched_setaffinity", tid: tid.raw(), source: e.into() };
    let mut set = CpuSet::new();
    for &cpu in cpus {
        set.set(cpu).map_err(error)?;
    }
    nix::sched::sched_setaffinity(Pid::from_raw(tid.raw()), &set).map_err(error)
}

/// Gives thread `tid` the nice value `nice`.
pub fn set_nice(tid: Tid, nice: i32) -> Result<()> {
    #[allow(unsafe_code)]
    // SAFETY: setpriority(2) takes integers.
    if unsafe { libc::setpriority(libc::PRIO_PROCESS, tid.raw() as libc::id_t, nice) } < 0 {
        return Err(Error::last("setpriority", tid.raw()));
    }
    Ok(())
}

/// Gives thread `tid` the policy `policy` (`SCHED_RESET_ON_FORK` included) at static
/// priority `priority`.
pub fn set_policy(tid: Tid, policy: i32, priority: i32) -> Result<()> {
    let param = libc::sched_param { sched_priority: priority };
    #[allow(unsafe_code)]
    // SAFETY: `param` is a valid sched_param the kernel reads.
    if unsafe { libc::sched_setscheduler(tid.raw(), policy, &param) } < 0 {
        return Err(Error::last("sched_setscheduler", tid.raw()));
    }
    Ok(())
}
