//! What a snapshot holds, apart from page contents: the process, its threads, its mappings
//! and how the capture went. Stored as JSON inside each snapshot file, so it is readable
//! with `sdt show --raw`.

use serde::{Deserialize, Serialize};

mod creds;
pub use creds::{ALL_CAPS, Capabilities, Credentials, Ids, SeccompMode, ThreadCredentials};
pub use sdt_abi::regs::{
    FPREGS_SIZE, GPREG_NAMES, GPREGS_SIZE, UserFpregs, UserRegs, XSAVE_HEADER_END, XsaveHead, XsaveHeader,
};

/// Page size of every supported target (x86_64 Linux).
pub const PAGE_SIZE: u64 = 4096;

/// Everything about one snapshot except page contents.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SnapshotMeta {
    /// The snapshot's name in its run: `S0`, `S1`, … (refinement: `S1.0`, `S2.new`).
    pub name: String,
    /// Position in the run, from 0; snapshot files are ordered by it.
    pub seq: u32,
    /// What took the snapshot.
    pub trigger: Trigger,
    /// When it was taken.
    pub time: SnapshotTime,
    /// The process as a whole.
    pub process: ProcessInfo,
    /// Every thread, the triggering thread first.
    pub threads: Vec<ThreadState>,
    /// Every mapping, sorted by start address, not overlapping.
    pub mappings: Vec<Mapping>,
    /// The process's auxiliary vector (`/proc/PID/auxv`), as raw bytes.
    #[serde(with = "hex_bytes")]
    pub auxv: Vec<u8>,
    /// How the capture went.
    pub stats: CaptureStats,
    /// The open file descriptors, ascending (empty in snapshots from before they were
    /// recorded).
    #[serde(default)]
    pub files: Vec<OpenFile>,
    /// Signals whose disposition is not the default, ascending.
    #[serde(default)]
    pub signals: Vec<SignalAction>,
    /// Signals the program caught whose handlers were not read, so are missing from
    /// `signals` (bit `n-1` for signal `n`): the program ran under seccomp, which sdt
    /// could not suspend to ask. A resume would lose them.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub unread_handlers: u64,
    /// Where the kernel's memory descriptor says the program's parts are (all zero when
    /// unknown).
    #[serde(default)]
    pub layout: MemoryLayout,
    /// For a rank of an MPI job: how many events its message history held when the
    /// snapshot was taken (the header count of its `mpi-events`); its last event is
    /// `mpi_events - 1`. `None` for other programs.
    #[serde(default)]
    pub mpi_events: Option<u64>,
    /// The program's timers that were running.
    #[serde(default, skip_serializing_if = "Timers::is_empty")]
    pub timers: Timers,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

impl SnapshotMeta {
    /// The names of the [`unread_handlers`](SnapshotMeta::unread_handlers) signals,
    /// comma-separated (`SIGUSR1, SIGTERM`); empty if there are none.
    pub fn unread_handler_names(&self) -> String {
        let unread = (1..=64).filter(|signo| self.unread_handlers & (1u64 << (signo - 1)) != 0);
        unread.map(signal_name).collect::<Vec<_>>().join(", ")
    }
}

/// One open file descriptor, as `/proc/PID/fd` and `/proc/PID/fdinfo` tell it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpenFile {
    /// The descriptor number. Must be >= 0.
    pub fd: i32,
    /// What the descriptor's link says: a path, `pipe:[N]`, `socket:[N]`,
    /// `anon_inode:[eventfd]`, …
    pub target: String,
    /// What kind of object it is.
    pub kind: FileKind,
    /// `open(2)` flags (`O_ACCMODE`, `O_APPEND`, `O_NONBLOCK`, …; `O_CLOEXEC` for the
    /// descriptor's close-on-exec flag).
    pub flags: u32,
    /// The file position.
    pub pos: u64,
    /// For a regular file: which file, with what identifies its version.
    pub file: Option<FileRef>,
    /// The program did not open it: it was open in `sdt run` itself when the program
    /// started (a pipe or socket its caller leaked), so the program got it at launch.
    #[serde(default)]
    pub inherited: bool,
    /// What a restore needs to make the object again, for the kinds it can.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<FileState>,
}

/// One descriptor an epoll instance watches.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EpollWatch {
    /// The watched descriptor.
    pub fd: i32,
    /// `EPOLLIN`, `EPOLLET`, … as registered.
    pub events: u32,
    /// The user data returned with its events.
    pub data: u64,
}

/// The state of a descriptor's object that its link and flags do not tell.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum FileState {
    /// An eventfd (`fdinfo`'s `eventfd-count` and `eventfd-semaphore`).
    Eventfd {
        /// Its counter.
        count: u64,
        /// Created with `EFD_SEMAPHORE`.
        semaphore: bool,
        /// Its `eventfd-id`, the same for every descriptor of it (none before Linux 6.6).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<u32>,
    },
    /// An epoll instance: what it watches (`fdinfo`'s `tfd:` lines), each watched
    /// descriptor checked at the capture to still be the file registered.
    Epoll {
        /// The watches, as `epoll_ctl(EPOLL_CTL_ADD)` made them.
        watches: Vec<EpollWatch>,
    },
    /// A timerfd (`fdinfo`'s `clockid`, `ticks`, `it_value`, `it_interval`).
    Timerfd {
        /// Its clock (`CLOCK_REALTIME`, `CLOCK_MONOTONIC`, …).
        clockid: i32,
        /// Expirations not read yet.
        ticks: u64,
        /// Nanoseconds to its next expiration; 0: disarmed.
        value_ns: u64,
        /// Nanoseconds between expirations; 0: once.
        interval_ns: u64,
    },
    /// A signalfd: the signals it reads (bit `n-1` for signal `n`).
    Signalfd {
        /// Its mask.
        mask: u64,
    },
    /// A pipe both of whose ends the process held, on the lowest of its read ends: its
    /// capacity (`F_GETPIPE_SZ`) and the bytes in it, read without taking them.
    PipeBuffer {
        /// Bytes it can hold.
        capacity: u32,
        /// The bytes written to it and not read yet.
        #[serde(with = "hex_bytes")]
        data: Vec<u8>,
    },
    /// A regular file deleted while open (`tmpfile`, `O_TMPFILE`, a memfd): its bytes,
    /// where all the snapshot's deleted files together hold at most
    /// [`DELETED_FILES_KEPT`] bytes.
    DeletedFile {
        /// Its bytes.
        #[serde(with = "hex_bytes")]
        data: Vec<u8>,
    },
    /// A regular file deleted while open that holds data in parts of its size, holes
    /// between (a large memfd holding little): its size and those parts, whose bytes
    /// count against [`DELETED_FILES_KEPT`].
    SparseDeletedFile {
        /// Its size in bytes.
        size: u64,
        /// The parts holding data, ascending and apart, inside its size.
        parts: Vec<FilePart>,
    },
}

impl FileState {
    /// A kept deleted file's size and its parts holding data, `(offset, bytes)`, the rest
    /// holes; `None` for other states, and where the parts are out of order, overlap or
    /// pass the size (a store edited by hand).
    pub fn deleted_file_parts(&self) -> Option<(u64, DataParts<'_>)> {
        match self {
            FileState::DeletedFile { data } => Some((data.len() as u64, vec![(0, data.as_slice())])),
            FileState::SparseDeletedFile { size, parts } => {
                let mut end = 0;
                let mut out = Vec::with_capacity(parts.len());
                for part in parts {
                    let part_end = part.offset.checked_add(part.data.len() as u64)?;
                    if part.offset < end || part_end > *size {
                        return None;
                    }
                    end = part_end;
                    out.push((part.offset, part.data.as_slice()));
                }
                Some((*size, out))
            }
            _ => None,
        }
    }
}

/// The parts of a file holding data, `(offset, bytes)`, ascending and apart.
pub type DataParts<'a> = Vec<(u64, &'a [u8])>;

/// One part of a [`FileState::SparseDeletedFile`] that holds data.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FilePart {
    /// Where it starts in the file.
    pub offset: u64,
    /// Its bytes.
    #[serde(with = "hex_bytes")]
    pub data: Vec<u8>,
}

/// The most bytes of deleted files a snapshot keeps, in all ([`FileState::DeletedFile`]).
pub const DELETED_FILES_KEPT: u64 = 1 << 20;

impl OpenFile {
    /// What a resume does with an [`inherited`](OpenFile::inherited) descriptor it cannot
    /// open again (a pipe, a socket), said for the user: it becomes `/dev/null`, and
    /// whether anything must be done.
    pub fn inherited_note(&self) -> String {
        format!(
            "file descriptor {fd} ({}) was not opened by the program: whatever started `sdt run` \
             (a shell, an IDE, a build tool) had it open and passed it on. The resumed program \
             gets /dev/null there. Nothing to do unless the program uses descriptor {fd}; \
             to leave it out, start `sdt run` with it closed (`sdt run … {fd}>&-` in a shell)",
            self.target.escape_debug(),
            fd = self.fd,
        )
    }
}

/// The kind of object an open file descriptor refers to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FileKind {
    /// A regular file.
    Regular,
    /// A directory.
    Directory,
    /// A character device (a terminal, `/dev/null`, …).
    CharDevice,
    /// A block device.
    BlockDevice,
    /// A pipe or FIFO.
    Pipe,
    /// A socket.
    Socket,
    /// An anonymous inode: eventfd, epoll, timerfd, signalfd, userfaultfd, pidfd, …
    AnonInode,
    /// Anything else.
    Other,
}

/// A signal's disposition (`struct kernel_sigaction`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SignalAction {
    /// The signal number, 1..=64.
    pub signo: i32,
    /// The handler's address, or `SIG_IGN` (1).
    pub handler: u64,
    /// `SA_*` flags.
    pub flags: u64,
    /// `sa_restorer` (with `SA_RESTORER`).
    pub restorer: u64,
    /// Signals blocked while the handler runs, bit `n-1` for signal `n`.
    pub mask: u64,
}

/// `SIG_IGN` as a [`SignalAction::handler`].
pub const SIG_IGN: u64 = 1;

/// The program's timers at the snapshot.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Timers {
    /// Its interval timers (`setitimer`) that were running, each read where its signal
    /// reaches the program (caught, blocked in every thread, or read by a signalfd): a
    /// resume sets them again. `None`: not read (captures by the kernel module, or of a
    /// program under a seccomp filter sdt could not suspend).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub itimers: Option<Vec<Itimer>>,
    /// Its POSIX timers (`timer_create`), from `/proc/PID/timers`: a resume cannot make
    /// them again.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub posix: Vec<PosixTimer>,
}

impl Timers {
    /// Whether nothing is known of them: nothing running, or not read.
    pub fn is_empty(&self) -> bool {
        self.itimers.as_ref().is_none_or(Vec::is_empty) && self.posix.is_empty()
    }
}

/// Which of a process's three interval timers (`ITIMER_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ItimerKind {
    /// `ITIMER_REAL`: wall-clock time, `SIGALRM`.
    Real,
    /// `ITIMER_VIRTUAL`: the process's user CPU time, `SIGVTALRM`.
    Virtual,
    /// `ITIMER_PROF`: its user and system CPU time, `SIGPROF`.
    Prof,
}

impl ItimerKind {
    /// All three, in `ITIMER_*` order.
    pub const ALL: [ItimerKind; 3] = [ItimerKind::Real, ItimerKind::Virtual, ItimerKind::Prof];

    /// Its `ITIMER_*` number, for `getitimer` and `setitimer`.
    pub fn which(self) -> i32 {
        match self {
            ItimerKind::Real => nix::libc::ITIMER_REAL,
            ItimerKind::Virtual => nix::libc::ITIMER_VIRTUAL,
            ItimerKind::Prof => nix::libc::ITIMER_PROF,
        }
    }

    /// The signal it sends when it expires.
    pub fn signal(self) -> i32 {
        match self {
            ItimerKind::Real => nix::libc::SIGALRM,
            ItimerKind::Virtual => nix::libc::SIGVTALRM,
            ItimerKind::Prof => nix::libc::SIGPROF,
        }
    }

    /// Its name, as the user sets it.
    pub fn name(self) -> &'static str {
        match self {
            ItimerKind::Real => "ITIMER_REAL",
            ItimerKind::Virtual => "ITIMER_VIRTUAL",
            ItimerKind::Prof => "ITIMER_PROF",
        }
    }
}

/// An interval timer that was running (`struct itimerval`, in microseconds).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Itimer {
    /// Which timer.
    pub kind: ItimerKind,
    /// Time to its next expiration.
    pub value_us: u64,
    /// Time between expirations after that; 0: once.
    pub interval_us: u64,
}

/// A POSIX timer, as `/proc/PID/timers` shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PosixTimer {
    /// Its id (`timer_t`).
    pub id: i32,
    /// The signal it sends.
    pub signo: i32,
    /// How it notifies: `signal/pid.N`, `thread/tid.N`, `none/…`.
    pub notify: String,
    /// Its clock (`CLOCK_*`).
    pub clock: i32,
}

impl PosixTimer {
    /// It said for the user: `timer 1: SIGUSR1 to thread 42`.
    pub fn describe(&self) -> String {
        let (how, to) = self.notify.split_once('/').unwrap_or((self.notify.as_str(), ""));
        let to = match to.split_once('.') {
            Some(("tid", tid)) => format!(" to thread {tid}"),
            _ => String::new(),
        };
        match how {
            "none" => format!("timer {}: no signal", self.id),
            _ => format!("timer {}: {}{to}", self.id, crate::signal_name(self.signo)),
        }
    }
}

/// The program's parts as the kernel's memory descriptor records them (`/proc/PID/stat`
/// fields 26–28 and 45–51; `brk` is the end of the heap mapping). `prctl(PR_SET_MM_MAP)`
/// takes the same fields.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct MemoryLayout {
    /// Start of the program's text.
    pub start_code: u64,
    /// End of the program's text.
    pub end_code: u64,
    /// Start of the program's initialised data.
    pub start_data: u64,
    /// End of the program's initialised data.
    pub end_data: u64,
    /// Start of the heap (`brk` area).
    pub start_brk: u64,
    /// The program break, page-aligned up.
    pub brk: u64,
    /// Bottom of the main thread's stack (where argv and the environment lie).
    pub start_stack: u64,
    /// Start of the command-line arguments.
    pub arg_start: u64,
    /// End of the command-line arguments.
    pub arg_end: u64,
    /// Start of the environment.
    pub env_start: u64,
    /// End of the environment.
    pub env_end: u64,
}

impl MemoryLayout {
    /// Whether the layout was recorded.
    pub fn is_known(&self) -> bool {
        self.start_code != 0 || self.start_stack != 0
    }
}

/// What took a snapshot.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Trigger {
    /// A `SetBreakpoint` call that passed the capture config.
    Breakpoint {
        /// The breakpoint's level.
        level: i32,
        /// The breakpoint's class.
        class: i32,
        /// The breakpoint's id.
        id: i32,
        /// 0: only the first arrival captures; 1: every arrival may.
        multiple_mark: i32,
        /// The attribute string, `key=value,…` (lossy UTF-8).
        attrs: String,
        /// Which arrival at this breakpoint it was, from 1 (0: not counted).
        hit: u64,
        /// The thread that reached it.
        tid: i32,
    },
    /// A timed snapshot (`every_ms`).
    Timer,
    /// A signal about to end the program (`SIGSEGV`, `SIGABRT`, `SIGTERM`, …), caught at
    /// its delivery: the program as it was when it died.
    Signal {
        /// The signal's number.
        signo: i32,
        /// Its `si_code` (`SEGV_MAPERR`, `SI_USER`, …).
        code: i32,
        /// The faulting address (`si_addr`) of a fault (`SIGSEGV`, `SIGBUS`, `SIGILL`,
        /// `SIGFPE`), else 0.
        addr: u64,
        /// The thread it was delivered to.
        tid: i32,
    },
}

impl Trigger {
    /// The thread that triggered the snapshot, if a thread did.
    pub fn tid(&self) -> Option<i32> {
        match self {
            Trigger::Breakpoint { tid, .. } | Trigger::Signal { tid, .. } => Some(*tid),
            Trigger::Timer => None,
        }
    }

    /// The faulting address of a snapshot taken at a fault the kernel raised
    /// ([`sdt_sys::ptrace::is_fault`]).
    pub fn fault_addr(&self) -> Option<u64> {
        match *self {
            Trigger::Signal { signo, code, addr, .. } if sdt_sys::ptrace::is_fault(signo, code) => Some(addr),
            _ => None,
        }
    }
}

/// A signal's name (`SIGSEGV`, `SIGRTMIN+3`), or `signal N` for a number Linux does not
/// use.
pub fn signal_name(signo: i32) -> String {
    const NAMES: [&str; 31] = [
        "SIGHUP",
        "SIGINT",
        "SIGQUIT",
        "SIGILL",
        "SIGTRAP",
        "SIGABRT",
        "SIGBUS",
        "SIGFPE",
        "SIGKILL",
        "SIGUSR1",
        "SIGSEGV",
        "SIGUSR2",
        "SIGPIPE",
        "SIGALRM",
        "SIGTERM",
        "SIGSTKFLT",
        "SIGCHLD",
        "SIGCONT",
        "SIGSTOP",
        "SIGTSTP",
        "SIGTTIN",
        "SIGTTOU",
        "SIGURG",
        "SIGXCPU",
        "SIGXFSZ",
        "SIGVTALRM",
        "SIGPROF",
        "SIGWINCH",
        "SIGIO",
        "SIGPWR",
        "SIGSYS",
    ];
    match signo {
        1..=31 => NAMES[signo as usize - 1].to_owned(),
        32 => "SIGRTMIN".to_owned(),
        33..=64 => format!("SIGRTMIN+{}", signo - 32),
        _ => format!("signal {signo}"),
    }
}

/// When a snapshot was taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotTime {
    /// Wall-clock time of the trigger, nanoseconds since the Unix epoch.
    pub wall_ns: i64,
    /// Nanoseconds from the start of the run to the trigger.
    pub since_start_ns: u64,
}

/// The process as a whole, as the ELF core's `NT_PRPSINFO` and gdb want it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessInfo {
    /// Thread-group id. Must be > 0.
    pub pid: i32,
    /// Parent's pid.
    pub ppid: i32,
    /// Process group.
    pub pgrp: i32,
    /// Session id (`getsid`).
    pub sid: i32,
    /// Real user id.
    pub uid: u32,
    /// Real group id.
    pub gid: u32,
    /// `/proc/PID/comm`.
    pub comm: String,
    /// Path of the executable (`/proc/PID/exe`).
    pub exe: String,
    /// Command line, one string per argument.
    pub cmdline: Vec<String>,
    /// Working directory.
    pub cwd: String,
    /// The credentials of the thread they were read through, which every thread not in
    /// `thread_creds` shares (read as the threads resume from the capture); `None` in
    /// snapshots from before they were recorded.
    #[serde(default)]
    pub creds: Option<Credentials>,
    /// The threads whose credentials differ from `creds`.
    #[serde(default)]
    pub thread_creds: Vec<ThreadCredentials>,
    /// Whether the process was dumpable (`PR_GET_DUMPABLE` = 1: its user may trace it and
    /// it dumps core); `None` when unknown (a process of effective uid 0, or a snapshot
    /// from before it was recorded).
    #[serde(default)]
    pub dumpable: Option<bool>,
    /// Its resource limits (`/proc/PID/limits`), by resource; empty in snapshots from
    /// before they were recorded.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub limits: Vec<ResourceLimit>,
    /// Its file mode creation mask (`Umask:` of `/proc/PID/status`); `None` in snapshots
    /// from before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub umask: Option<u32>,
    /// Its execution domain and flags (`/proc/PID/personality`: `ADDR_NO_RANDOMIZE` for
    /// a program run under `setarch -R`); `None` in snapshots from before it was
    /// recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub personality: Option<u32>,
    /// Each thread's scheduling, by its id in the process's pid namespace; empty in
    /// snapshots from before it was recorded.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scheduling: Vec<ThreadScheduling>,
    /// The program's file where it had been deleted before the capture (`exe` ends in
    /// ` (deleted)`: an upgrade replaced it under the running process), recorded under
    /// the path it had; no mapping refers to it, its pages being held as memory. The
    /// capture keeps it with the run, read from the process, for its symbols.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deleted_program: Option<FileRef>,
}

/// A thread's scheduling: `sched_getscheduler(2)`, `sched_getparam(2)`, `getpriority(2)`
/// and `sched_getaffinity(2)`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadScheduling {
    /// The thread, by its id in the process's pid namespace.
    pub tid: i32,
    /// `SCHED_*` (0 other, 1 FIFO, 2 RR, 3 batch, 5 idle, 6 deadline), with
    /// [`SCHED_RESET_ON_FORK`] where set.
    pub policy: i32,
    /// Its static priority (1–99 for FIFO and RR, else 0).
    pub priority: i32,
    /// Its nice value, -20 to 19.
    pub nice: i32,
    /// The CPUs it may run on, as a list of ranges: `0-3,6`.
    pub cpus: String,
}

/// `SCHED_RESET_ON_FORK`, a flag of [`ThreadScheduling::policy`].
pub const SCHED_RESET_ON_FORK: i32 = 0x4000_0000;

impl ThreadScheduling {
    /// The policy's name: `other`, `FIFO`, `RR`, `batch`, `idle`, `deadline`, or its
    /// number.
    pub fn policy_name(&self) -> String {
        match self.policy & !SCHED_RESET_ON_FORK {
            0 => "other".into(),
            1 => "FIFO".into(),
            2 => "RR".into(),
            3 => "batch".into(),
            5 => "idle".into(),
            6 => "deadline".into(),
            n => format!("policy {n}"),
        }
    }

    /// Whether the policy is a real-time one (FIFO, RR, deadline): one only privileged
    /// threads may take.
    pub fn is_realtime(&self) -> bool {
        matches!(self.policy & !SCHED_RESET_ON_FORK, 1 | 2 | 6)
    }

    /// What differs from a thread started by a plain user (other, nice 0): `FIFO 10,
    /// nice -5`; empty for such a thread.
    pub fn unusual(&self) -> String {
        let mut parts = Vec::new();
        if self.policy & !SCHED_RESET_ON_FORK != 0 {
            parts.push(if self.priority != 0 {
                format!("{} {}", self.policy_name(), self.priority)
            } else {
                self.policy_name()
            });
        }
        if self.nice != 0 {
            parts.push(format!("nice {}", self.nice));
        }
        parts.join(", ")
    }

    /// `cpus` in order, or `None` if it is not a list of ranges.
    pub fn cpu_numbers(&self) -> Option<Vec<usize>> {
        let mut cpus = Vec::new();
        for range in self.cpus.split(',').filter(|r| !r.is_empty()) {
            let (first, last) = range.split_once('-').unwrap_or((range, range));
            let (first, last): (usize, usize) = (first.parse().ok()?, last.parse().ok()?);
            if last < first || last >= 1 << 16 {
                return None;
            }
            cpus.extend(first..=last);
        }
        Some(cpus)
    }

    /// `cpus` (ascending) as a list of ranges: `0-3,6`.
    pub fn cpu_list(cpus: &[usize]) -> String {
        let mut ranges: Vec<(usize, usize)> = Vec::new();
        for &cpu in cpus {
            match ranges.last_mut() {
                Some((_, last)) if *last + 1 == cpu => *last = cpu,
                _ => ranges.push((cpu, cpu)),
            }
        }
        let text: Vec<String> =
            ranges.iter().map(|&(a, b)| if a == b { a.to_string() } else { format!("{a}-{b}") }).collect();
        text.join(",")
    }
}

/// One resource limit of a process (`struct rlimit64`), as `prlimit` takes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourceLimit {
    /// The resource, `RLIMIT_*` (0 `RLIMIT_CPU` … 15 `RLIMIT_RTTIME`).
    pub resource: u32,
    /// The soft limit; [`RLIM_INFINITY`]: unlimited.
    pub soft: u64,
    /// The hard limit; [`RLIM_INFINITY`]: unlimited.
    pub hard: u64,
}

/// No limit, as a [`ResourceLimit`] holds it.
pub const RLIM_INFINITY: u64 = u64::MAX;

impl ResourceLimit {
    /// Its resource's name: `RLIMIT_NOFILE`.
    pub fn name(&self) -> String {
        const NAMES: [&str; 16] = [
            "CPU",
            "FSIZE",
            "DATA",
            "STACK",
            "CORE",
            "RSS",
            "NPROC",
            "NOFILE",
            "MEMLOCK",
            "AS",
            "LOCKS",
            "SIGPENDING",
            "MSGQUEUE",
            "NICE",
            "RTPRIO",
            "RTTIME",
        ];
        match NAMES.get(self.resource as usize) {
            Some(name) => format!("RLIMIT_{name}"),
            None => format!("resource {}", self.resource),
        }
    }
}

impl ProcessInfo {
    /// The credentials thread `tid` had: its own if they differed from the process's,
    /// else the process's; for a snapshot that recorded none, what its real user and
    /// group imply ([`Credentials::implied`]).
    pub fn credentials_of(&self, tid: i32) -> Credentials {
        match self.thread_creds.iter().find(|t| t.tid == tid) {
            Some(t) => t.creds.clone(),
            None => self.creds.clone().unwrap_or_else(|| Credentials::implied(self.uid, self.gid)),
        }
    }
}

/// One thread, stopped.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadState {
    /// Kernel thread id. Must be > 0.
    pub tid: i32,
    /// `/proc/PID/task/TID/comm`.
    pub name: String,
    /// Where the thread was when it stopped.
    pub state: ThreadRunState,
    /// `struct user_regs_struct` (`NT_PRSTATUS` regset, 27 × u64, includes `fs_base` and
    /// `gs_base`), as `PTRACE_GETREGSET` returned it. Must be [`GPREGS_SIZE`] bytes.
    #[serde(with = "hex_bytes")]
    pub gpregs: Vec<u8>,
    /// `struct user_fpregs_struct` (`NT_PRFPREG`, the FXSAVE area). Must be
    /// [`FPREGS_SIZE`] bytes.
    #[serde(with = "hex_bytes")]
    pub fpregs: Vec<u8>,
    /// The XSAVE area (`NT_X86_XSTATE`) in standard (non-compacted) format, as long as the
    /// kernel returned it.
    #[serde(with = "hex_bytes")]
    pub xstate: Vec<u8>,
    /// Blocked signals, bit `n-1` for signal `n`.
    pub sigmask: u64,
    /// The thread's restartable-sequences area, if it registered one (glibc does).
    #[serde(default)]
    pub rseq: Option<Rseq>,
    /// The thread's robust-futex list (`get_robust_list(2)`): the head's address and
    /// length, if it registered one (glibc does).
    #[serde(default)]
    pub robust_list: Option<RobustList>,
    /// The thread's alternate signal stack (`sigaltstack(2)`), if it set one. Read where
    /// a handler runs on it (`SA_ONSTACK`: Go's runtime, Rust's standard library).
    #[serde(default)]
    pub altstack: Option<AltStack>,
}

impl ThreadState {
    /// Checks that the register sets have the sizes this type promises
    /// ([`GPREGS_SIZE`], [`FPREGS_SIZE`]), which exporters rely on.
    pub fn check_regsets(&self) -> Result<(), RegsetSizeError> {
        self.regs()?;
        self.fp_regs()?;
        Ok(())
    }
}

/// A thread's register set has the wrong size (the snapshot breaks its own contract).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("thread {tid}: {regset} is {found} bytes, expected {expected}")]
pub struct RegsetSizeError {
    /// The thread.
    pub tid: i32,
    /// Which set: `gpregs` or `fpregs`.
    pub regset: &'static str,
    /// Its size in the snapshot.
    pub found: usize,
    /// The size it must have.
    pub expected: usize,
}

/// A thread's robust-futex list registration.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RobustList {
    /// Address of the `struct robust_list_head`.
    pub head: u64,
    /// Its registered length.
    pub len: u64,
}

/// A thread's alternate signal stack, as `sigaltstack(2)` sets it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AltStack {
    /// Its lowest address (`ss_sp`).
    pub sp: u64,
    /// Its size (`ss_size`).
    pub size: u64,
    /// `ss_flags` as set: `SS_AUTODISARM` or 0 (not whether the thread was on it).
    pub flags: u32,
}

/// A thread's `rseq(2)` registration (`PTRACE_GET_RSEQ_CONFIGURATION`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rseq {
    /// Address of the `struct rseq` area.
    pub addr: u64,
    /// Its registered length.
    pub len: u32,
    /// The signature that abort handlers carry.
    pub sig: u32,
}

/// Where a thread was when it stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ThreadRunState {
    /// In user code, or in a system call that resumes transparently.
    Running,
    /// Already in `exit`: it will not run user code again.
    Exiting,
}

impl ThreadState {
    /// The general registers, typed; an error if [`ThreadState::gpregs`] is not
    /// [`GPREGS_SIZE`] bytes.
    pub fn regs(&self) -> Result<UserRegs, RegsetSizeError> {
        self.regset("gpregs", &self.gpregs)
    }

    /// The FXSAVE area, typed; an error if [`ThreadState::fpregs`] is not
    /// [`FPREGS_SIZE`] bytes.
    pub fn fp_regs(&self) -> Result<UserFpregs, RegsetSizeError> {
        self.regset("fpregs", &self.fpregs)
    }

    /// The register set `bytes`, named `name`, as a `T`; an error if its size is not `T`'s.
    fn regset<T: bytemuck::AnyBitPattern>(
        &self,
        name: &'static str,
        bytes: &[u8],
    ) -> Result<T, RegsetSizeError> {
        bytemuck::try_pod_read_unaligned(bytes).map_err(|_| RegsetSizeError {
            tid: self.tid,
            regset: name,
            found: bytes.len(),
            expected: size_of::<T>(),
        })
    }

    /// The instruction pointer.
    pub fn pc(&self) -> u64 {
        self.regs().map_or(0, |r| r.rip)
    }

    /// The stack pointer.
    pub fn sp(&self) -> u64 {
        self.regs().map_or(0, |r| r.rsp)
    }
}

/// Sets a register by name in a `user_regs_struct` as bytes: for building snapshots in
/// tests and fuzzing, where registers are data.
///
/// # Panics
///
/// On a name not in [`GPREG_NAMES`] or bytes shorter than [`GPREGS_SIZE`]: a caller bug.
pub fn set_gpreg(gpregs: &mut [u8], name: &str, value: u64) {
    let i = GPREG_NAMES.iter().position(|&n| n == name).unwrap_or_else(|| panic!("no register {name}"));
    gpregs[i * 8..i * 8 + 8].copy_from_slice(&value.to_le_bytes());
}

/// One line of `/proc/PID/maps`, and how its pages are kept.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mapping {
    /// First address. Page-aligned.
    pub start: u64,
    /// One past the last address. Page-aligned, > `start`.
    pub end: u64,
    /// Protection and sharing.
    pub perms: Perms,
    /// Offset into the mapped file (0 for anonymous mappings).
    pub offset: u64,
    /// Device of the mapped file, `major:minor` as in maps.
    pub dev: String,
    /// Inode of the mapped file (0 for anonymous mappings).
    pub inode: u64,
    /// Path or pseudo-path as in maps (`/usr/lib/…`, `[heap]`, `[stack]`, empty).
    pub path: String,
    /// Where the pages the snapshot did not store come from.
    pub content: Content,
}

impl Mapping {
    /// Size in bytes.
    pub fn len(&self) -> u64 {
        self.end - self.start
    }

    /// Whether the mapping is empty (never true for a valid mapping).
    pub fn is_empty(&self) -> bool {
        self.end == self.start
    }

    /// Whether `addr` lies inside the mapping.
    pub fn contains(&self, addr: u64) -> bool {
        self.start <= addr && addr < self.end
    }
}

/// Checks what [`SnapshotMeta`] promises beyond its types: its mappings as
/// [`check_mappings`] does, and each thread's id > 0 and listed once (exporters write a
/// file per thread, named by its id). Returns what is wrong.
pub(crate) fn check_meta(meta: &SnapshotMeta) -> Result<(), String> {
    check_mappings(&meta.mappings)?;
    let mut tids = std::collections::BTreeSet::new();
    for t in &meta.threads {
        if t.tid <= 0 {
            return Err(format!("thread id {} is not > 0", t.tid));
        }
        if !tids.insert(t.tid) {
            return Err(format!("thread {} is listed twice", t.tid));
        }
    }
    Ok(())
}

/// Checks what [`SnapshotMeta::mappings`] promises: each mapping page-aligned and
/// non-empty, its file range not overflowing, all sorted by start and not overlapping.
/// Returns what is wrong, naming the mapping.
fn check_mappings(mappings: &[Mapping]) -> Result<(), String> {
    let mut prev_end = 0;
    for (i, m) in mappings.iter().enumerate() {
        if m.start % PAGE_SIZE != 0 || m.end % PAGE_SIZE != 0 || m.end <= m.start {
            return Err(format!("mapping {i} ({:#x}-{:#x}) is empty or not page-aligned", m.start, m.end));
        }
        if m.start < prev_end {
            return Err(format!(
                "mapping {i} ({:#x}-{:#x}) starts before the previous one ends ({prev_end:#x})",
                m.start, m.end
            ));
        }
        if m.offset.checked_add(m.len()).is_none() {
            return Err(format!(
                "mapping {i} ({:#x}-{:#x}): file offset {:#x} overflows",
                m.start, m.end, m.offset
            ));
        }
        prev_end = m.end;
    }
    Ok(())
}

/// Protection and sharing of a mapping.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Perms {
    /// PROT_READ.
    pub read: bool,
    /// PROT_WRITE.
    pub write: bool,
    /// PROT_EXEC.
    pub exec: bool,
    /// MAP_SHARED (else private).
    pub shared: bool,
}

impl std::fmt::Display for Perms {
    /// `rw-p` as in `/proc/PID/maps`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let c = |on: bool, ch: char| if on { ch } else { '-' };
        write!(
            f,
            "{}{}{}{}",
            c(self.read, 'r'),
            c(self.write, 'w'),
            c(self.exec, 'x'),
            if self.shared { 's' } else { 'p' }
        )
    }
}

/// Where the pages of a mapping that the snapshot did not store come from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Content {
    /// Pages not stored are zero (anonymous memory, or a whole-captured mapping).
    Zero,
    /// Pages not stored are the file's bytes at `offset + (addr - start)`; the file must
    /// still be the one that was mapped.
    File(FileRef),
    /// The mapping could not be read (`PROT_NONE`, `[vvar]`): it has no contents.
    Unreadable,
}

/// A file a mapping refers to, with what identifies its version.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct FileRef {
    /// Path of the file.
    pub path: String,
    /// Device number (`st_dev`).
    pub dev: u64,
    /// Inode number.
    pub inode: u64,
    /// Size in bytes when captured.
    pub size: u64,
    /// Modification time in nanoseconds since the Unix epoch when captured.
    pub mtime_ns: i64,
}

impl FileRef {
    /// The file at `path` as `meta` (its `stat`) describes it.
    pub fn of(path: &str, meta: &std::fs::Metadata) -> FileRef {
        use std::os::unix::fs::MetadataExt;
        FileRef {
            path: path.to_owned(),
            dev: meta.dev(),
            inode: meta.ino(),
            size: meta.size(),
            mtime_ns: meta.mtime().saturating_mul(1_000_000_000).saturating_add(meta.mtime_nsec()),
        }
    }
}

/// How a capture went.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct CaptureStats {
    /// How changed pages were found: `"uffd-wp"` (written pages tracked by the kernel, only
    /// those copied) or `"page-hash"` (every resident page copied, compared by hash).
    pub mode: String,
    /// Trigger to the last thread resumed, in nanoseconds, less the time the breakpoint's
    /// own thread alone waited for the last snapshot's writes (in `wait_ns`).
    pub pause_ns: u64,
    /// Trigger to the last thread stopped (the capture deviation), in nanoseconds, less
    /// the same wait.
    pub deviation_ns: u64,
    /// Pages with content in the snapshot (not counting zero and by-reference pages).
    pub pages: u64,
    /// Of those, pages stored in this snapshot's file (new or changed).
    pub pages_stored: u64,
    /// Bytes the snapshot would take stored whole: `pages * PAGE_SIZE`.
    pub full_bytes: u64,
    /// Nanoseconds the capture waited for room in the store before it could start: for
    /// compaction to catch up with the raw log's budget, for a spare to be made when none
    /// was ready, or for the last snapshot's writes to give the capture buffer back.
    pub wait_ns: u64,
    /// Bytes copied from the program while it was stopped.
    pub copied_bytes: u64,
    /// Nanoseconds that copy took.
    pub copy_ns: u64,
}

/// Serde helper: `Vec<u8>` as a lowercase hex string.
pub(crate) mod hex_bytes {
    use serde::{Deserializer, Serializer, de::Error};

    pub fn serialize<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        let mut out = String::with_capacity(bytes.len() * 2);
        for &b in bytes {
            out.push(DIGITS[usize::from(b >> 4)] as char);
            out.push(DIGITS[usize::from(b & 15)] as char);
        }
        s.serialize_str(&out)
    }

    /// (Decoded from the text the deserializer holds, without a copy: a snapshot's
    /// registers are most of what `sdt ls` decodes.)
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        d.deserialize_str(HexVisitor)
    }

    struct HexVisitor;

    impl serde::de::Visitor<'_> for HexVisitor {
        type Value = Vec<u8>;

        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a string of hexadecimal digits")
        }

        fn visit_str<E: Error>(self, text: &str) -> Result<Vec<u8>, E> {
            let (pairs, odd) = text.as_bytes().as_chunks::<2>();
            if !odd.is_empty() {
                return Err(E::custom("hex string of odd length"));
            }
            let digit = |c: u8| match c {
                b'0'..=b'9' => Some(c - b'0'),
                b'a'..=b'f' => Some(c - b'a' + 10),
                b'A'..=b'F' => Some(c - b'A' + 10),
                _ => None,
            };
            let mut out = Vec::with_capacity(pairs.len());
            for &[high, low] in pairs {
                match (digit(high), digit(low)) {
                    (Some(high), Some(low)) => out.push(high << 4 | low),
                    _ => return Err(E::custom("bad hex digit")),
                }
            }
            Ok(out)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sparse_deleted_file_s_parts_must_lie_in_order_inside_it() {
        let part = |offset, data: &[u8]| FilePart { offset, data: data.to_vec() };
        let sparse = |size, parts| FileState::SparseDeletedFile { size, parts };
        let good = sparse(100, vec![part(0, b"ab"), part(50, b"cd"), part(98, b"ef")]);
        assert_eq!(good.deleted_file_parts(), Some((100, vec![(0, &b"ab"[..]), (50, b"cd"), (98, b"ef")])));
        let whole = FileState::DeletedFile { data: b"xyz".to_vec() };
        assert_eq!(whole.deleted_file_parts(), Some((3, vec![(0, &b"xyz"[..])])));
        for bad in [
            sparse(100, vec![part(50, b"cd"), part(0, b"ab")]),
            sparse(100, vec![part(0, b"abc"), part(2, b"cd")]),
            sparse(100, vec![part(99, b"ef")]),
            sparse(u64::MAX, vec![part(u64::MAX - 1, b"ef")]),
        ] {
            assert_eq!(bad.deleted_file_parts(), None, "{bad:?}");
        }
        assert_eq!(FileState::Signalfd { mask: 1 }.deleted_file_parts(), None);
    }

    #[test]
    fn register_bytes_read_back_as_written_and_bad_hex_is_refused() {
        #[derive(Debug, PartialEq, Serialize, Deserialize)]
        struct Bytes(#[serde(with = "hex_bytes")] Vec<u8>);
        let all: Vec<u8> = (0..=255).collect();
        let text = serde_json::to_string(&Bytes(all.clone())).unwrap();
        assert_eq!(serde_json::from_str::<Bytes>(&text).unwrap(), Bytes(all));
        assert_eq!(serde_json::from_str::<Bytes>("\"0A0b\"").unwrap(), Bytes(vec![10, 11]));
        // An escaped string is decoded too (the text is then no slice of the input).
        assert_eq!(serde_json::from_str::<Bytes>("\"\\u0030f\"").unwrap(), Bytes(vec![15]));
        for (bad, why) in [("\"abc\"", "odd length"), ("\"0g\"", "bad hex digit"), ("17", "hexadecimal")] {
            let e = serde_json::from_str::<Bytes>(bad).unwrap_err().to_string();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }

    #[test]
    fn signals_are_named_as_linux_numbers_them() {
        for (signo, name) in [(11, "SIGSEGV"), (6, "SIGABRT"), (31, "SIGSYS")] {
            assert_eq!(signal_name(signo), name);
        }
        assert_eq!(signal_name(34), "SIGRTMIN+2");
        assert_eq!(signal_name(0), "signal 0");
        assert_eq!(signal_name(65), "signal 65");
    }

    #[test]
    fn cpu_lists_read_back_as_written_and_bad_ones_are_none() {
        let list = ThreadScheduling::cpu_list(&[0, 1, 2, 3, 6, 8, 9]);
        assert_eq!(list, "0-3,6,8-9");
        let s = ThreadScheduling { cpus: list, ..ThreadScheduling::default() };
        assert_eq!(s.cpu_numbers(), Some(vec![0, 1, 2, 3, 6, 8, 9]));
        for bad in ["3-1", "x", "0-", "0-70000"] {
            assert_eq!(ThreadScheduling { cpus: bad.into(), ..s.clone() }.cpu_numbers(), None, "{bad}");
        }
    }

    #[test]
    fn unusual_scheduling_is_named() {
        let plain = ThreadScheduling { cpus: "0-1".into(), ..ThreadScheduling::default() };
        assert_eq!(plain.unusual(), "");
        let fifo =
            ThreadScheduling { policy: 1 | SCHED_RESET_ON_FORK, priority: 10, nice: -5, ..plain.clone() };
        assert_eq!(fifo.unusual(), "FIFO 10, nice -5");
        assert!(fifo.is_realtime());
        let batch = ThreadScheduling { policy: 3, nice: 7, ..plain };
        assert_eq!((batch.unusual().as_str(), batch.is_realtime()), ("batch, nice 7", false));
    }
}
