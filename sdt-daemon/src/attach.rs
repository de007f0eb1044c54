//! Taking over a process sdt did not start (`sdt attach`): every thread seized, none
//! stopped until the first capture, and, with [`Tracer::let_go`], the process let go
//! again, untraced and running as before.
//!
//! Threads come and go while they are seized one by one: the task list is read again
//! until a pass finds no thread that is not seized. A thread that a seized thread
//! creates meanwhile is traced already (`PTRACE_O_TRACECLONE`), so the passes end.
//!
//! Nothing is killed on the way: the process is not sdt's, and without
//! `PTRACE_O_EXITKILL` sdt's own death lets it go too.

use std::collections::BTreeSet;
use std::os::unix::fs::MetadataExt;

use sdt_procfs::Stat;
use sdt_sys::Tid;
use sdt_sys::ptrace::{self, options};

use crate::capture::Capturer;
use crate::ptrace::Tracer;
use crate::{Error, RunOptions, Started, run_info, wall_ns};

/// The options an attached process's threads are traced with: no `EXITKILL`.
const ATTACH_OPTIONS: u32 = options::TRACECLONE | options::TRACEEXIT | options::TRACEEXEC;

/// Why a running process cannot be taken over.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AttachError {
    /// No process has that id (or it ended while sdt attached).
    #[error("there is no process {pid}")]
    NoProcess {
        /// The id asked for.
        pid: i32,
    },
    /// The id is sdt's own.
    #[error("process {pid} is this sdt")]
    Itself {
        /// The id asked for.
        pid: i32,
    },
    /// A kernel thread: nothing to capture.
    #[error("process {pid} ({name}) is a kernel thread: it has no memory of its own to capture")]
    KernelThread {
        /// The id asked for.
        pid: i32,
        /// Its name.
        name: String,
    },
    /// Its main thread has exited: its memory cannot be read through it.
    #[error(
        "the main thread of process {pid} ({name}) has exited (it is a zombie{}): sdt reads a process's \
         memory through its main thread",
        if *.threads_left > 0 { format!(", {} thread(s) left", .threads_left) } else { String::new() }
    )]
    Zombie {
        /// The id asked for.
        pid: i32,
        /// Its name.
        name: String,
        /// Its threads still running.
        threads_left: usize,
    },
    /// Another tracer has it.
    #[error(
        "process {pid} ({name}) is traced already, by process {tracer} ({tracer_name}): a process has one \
         tracer at a time; let it go there first (gdb: `detach`; strace: Ctrl-C)"
    )]
    Traced {
        /// The id asked for.
        pid: i32,
        /// Its name.
        name: String,
        /// The tracer's id.
        tracer: i32,
        /// The tracer's name.
        tracer_name: String,
    },
    /// The kernel refuses sdt the trace.
    #[error("sdt may not trace process {pid} ({name}): {why}")]
    NotPermitted {
        /// The id asked for.
        pid: i32,
        /// Its name.
        name: String,
        /// The likely reason, and what to do.
        why: String,
    },
    /// `--break` asks for int3s placed before a program runs.
    #[error("--break places its breakpoints as the program starts: sdt attach cannot (use sdt run)")]
    Breaks,
    /// The kernel module registers a program at its start.
    #[error("the kernel module captures only programs sdt starts: sdt attach uses ptrace")]
    Kmod,
    /// Seizing a thread failed otherwise.
    #[error("seizing thread {tid} of process {pid}")]
    Seize {
        /// The process.
        pid: i32,
        /// The thread.
        tid: i32,
        /// What `PTRACE_SEIZE` said.
        #[source]
        source: sdt_sys::Error,
    },
}

/// Seizes every thread of the running process `pid`, and describes the run that
/// captures it.
pub(crate) fn start(pid: Tid, opts: &RunOptions) -> Result<Started, Error> {
    let threads = seize_all(pid)?;
    let mut tracer = Tracer::seized(pid, ATTACH_OPTIONS, threads);
    if opts.signal_snapshots {
        tracer.hold_fatal_signals();
    }
    let capturer = Capturer::new(pid).inspect_err(|_| {
        if let Err(e) = tracer.let_go() {
            log::warn!("letting process {pid} go: {e}");
        }
    })?;
    let cmdline =
        sdt_procfs::read(pid, "cmdline").map(|raw| sdt_procfs::parse_cmdline(&raw)).unwrap_or_default();
    let link =
        |name: &str| std::fs::read_link(format!("/proc/{pid}/{name}")).map(|p| p.display().to_string());
    let command = match cmdline {
        // A process that cleared its arguments: its file.
        c if c.is_empty() => vec![link("exe").unwrap_or_else(|_| name_of(pid))],
        c => c,
    };
    Ok(Started {
        pid,
        tracer,
        capturer,
        info: run_info(command, link("cwd").unwrap_or_default(), wall_ns(), opts),
        init: None,
        inherited: Vec::new(),
        mpi: None,
    })
}

/// Seizes every thread of `pid`, refusing with the reason where it cannot be traced.
fn seize_all(pid: Tid) -> Result<Vec<Tid>, AttachError> {
    let raw = pid.raw();
    if raw as u32 == std::process::id() {
        return Err(AttachError::Itself { pid: raw });
    }
    let stat = sdt_procfs::read(pid, "stat").map_err(|_| AttachError::NoProcess { pid: raw })?;
    let stat = Stat::parse(&stat);
    let name = name_of(pid);
    if stat.as_ref().and_then(Stat::is_kernel_thread) == Some(true) {
        return Err(AttachError::KernelThread { pid: raw, name });
    }
    if stat.as_ref().and_then(Stat::state) == Some('Z') {
        let threads_left = tasks(pid).len().saturating_sub(1);
        return Err(AttachError::Zombie { pid: raw, name, threads_left });
    }
    let mut seized = BTreeSet::new();
    loop {
        let unseized: Vec<Tid> = tasks(pid).into_iter().filter(|tid| !seized.contains(tid)).collect();
        if unseized.is_empty() {
            break;
        }
        for tid in unseized {
            match ptrace::seize(tid, ATTACH_OPTIONS) {
                Ok(()) => {}
                // Ended meanwhile (a thread that has exited refuses with EPERM).
                Err(e) if e.is_gone() || ended(pid, tid) => continue,
                // Created by a thread seized already: traced with it.
                Err(e)
                    if e.errno() == libc::EPERM && tracer_of(pid, tid) == Some(std::process::id() as i32) => {
                }
                Err(e) => {
                    let refused = refusal(pid, tid, &name, e);
                    if !seized.is_empty() {
                        let mut tracer = Tracer::seized(pid, ATTACH_OPTIONS, seized);
                        if let Err(e) = tracer.let_go() {
                            log::warn!("letting process {pid} go: {e}");
                        }
                    }
                    return Err(refused);
                }
            }
            seized.insert(tid);
        }
    }
    if seized.is_empty() {
        return Err(AttachError::NoProcess { pid: raw });
    }
    Ok(seized.into_iter().collect())
}

/// The error for `PTRACE_SEIZE` of thread `tid` of `pid` failing with `e`.
fn refusal(pid: Tid, tid: Tid, name: &str, e: sdt_sys::Error) -> AttachError {
    let (pid_raw, name) = (pid.raw(), name.to_owned());
    if e.errno() != libc::EPERM {
        return AttachError::Seize { pid: pid_raw, tid: tid.raw(), source: e };
    }
    if let Some(tracer) = tracer_of(pid, tid) {
        let tracer_name = Tid::new(tracer).map_or_else(String::new, name_of);
        return AttachError::Traced { pid: pid_raw, name, tracer, tracer_name };
    }
    // `/proc/self` belongs to sdt's effective user.
    let me = std::fs::metadata("/proc/self").map_or(u32::MAX, |m| m.uid());
    let owner = sdt_procfs::read(pid, "status").map(|s| sdt_procfs::parse_real_ids(&s).0).ok();
    let scope = std::fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope")
        .ok()
        .and_then(|s| s.trim().parse::<u32>().ok())
        .unwrap_or(0);
    let why = match owner {
        Some(owner) if owner != me && me != 0 => {
            format!("it runs as user {owner} and sdt as user {me}: run sdt as root (or with CAP_SYS_PTRACE)")
        }
        _ if scope == 3 => {
            "kernel.yama.ptrace_scope is 3: no process may trace another until the next boot".into()
        }
        _ if scope >= 1 && me != 0 => format!(
            "kernel.yama.ptrace_scope is {scope}: only its parent may trace it: run sdt as root (or with \
             CAP_SYS_PTRACE), or allow it with `sudo sysctl kernel.yama.ptrace_scope=0`"
        ),
        _ => "it changed its user or group, or made itself non-dumpable (prctl(PR_SET_DUMPABLE, 0)): only \
              root (CAP_SYS_PTRACE) may trace it"
            .into(),
    };
    AttachError::NotPermitted { pid: pid_raw, name, why }
}

/// The threads of `pid` now (none once it has ended).
fn tasks(pid: Tid) -> Vec<Tid> {
    let Ok(entries) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return Vec::new() };
    entries.filter_map(|entry| entry.ok()?.file_name().to_str()?.parse().ok()).filter_map(Tid::new).collect()
}

/// Whether thread `tid` of `pid` has exited (or is gone).
fn ended(pid: Tid, tid: Tid) -> bool {
    let Ok(stat) = sdt_procfs::read(pid, &format!("task/{tid}/stat")) else { return true };
    matches!(Stat::parse(&stat).and_then(|s| s.state()), Some('Z' | 'X'))
}

/// The process tracing thread `tid` of `pid`, if one does.
fn tracer_of(pid: Tid, tid: Tid) -> Option<i32> {
    let status = sdt_procfs::read(pid, &format!("task/{tid}/status")).ok()?;
    sdt_procfs::parse_tracer_pid(&status)
}

/// The name (`comm`) of process `pid`, or `?`.
fn name_of(pid: Tid) -> String {
    sdt_procfs::read_text(pid, "comm").map_or_else(|_| "?".to_owned(), |s| s.trim_end().to_owned())
}
