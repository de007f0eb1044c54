//! The ptrace backend: the program runs seized from its first instruction; breakpoints
//! arrive as `int3` stops; a freeze is `PTRACE_INTERRUPT` on every thread.
//!
//! ```text
//!  thread state        how it got there                    how thaw resumes it
//!  running             resumed by us
//!  stopped             interrupt / event / signal stop     PTRACE_CONT (+ held signal)
//!  stopped, group      group-stop (SIGSTOP, SIGTSTP, …)     PTRACE_LISTEN
//!  stopped, exiting    PTRACE_EVENT_EXIT                    PTRACE_CONT (it dies)
//!  at breakpoint       int3 with TRAP_MAGIC                 after its capture, PTRACE_CONT 0
//! ```
//!
//! A machine busy with other programs would make a freeze wait for every interrupted
//! thread to get a CPU: where sdt may (`CAP_SYS_NICE`), each thread it interrupts runs
//! as a real-time thread until it has stopped, as does a thread running an injected
//! system call until it is done, and gets its own scheduling back before it resumes
//! ([`Hurried`]).
//!
//! Signals the program receives are held while it is frozen and delivered when it
//! resumes; outside captures they are delivered at once, but for a signal about to end
//! the program (its disposition the default, and the default to terminate): its thread
//! is held at the delivery for a snapshot ([`TargetEvent::FatalSignal`]), and the thaw
//! delivers it. One that arrives during a capture is delivered at the thaw, unseen.
//!
//! A thread under seccomp (a sandboxed program's filter, or strict mode) runs injected
//! system calls only with its seccomp suspended (`PTRACE_O_SUSPEND_SECCOMP`, which needs
//! `CAP_SYS_ADMIN`): its filter could kill the program for a call the program never makes.
//! Where sdt may not suspend it, nothing is injected ([`InjectionRefused`]).
//!
//! Every wait has a way out. During a capture the tracer waits for any thread (never
//! for one alone: a first thread that has exited is reported only after every other
//! thread, and those may be waiting for the tracer at their exit stops), and for at most
//! [`STOP_TIMEOUT`]. A program killed with `SIGKILL` meanwhile (its threads report
//! `PTRACE_EVENT_EXIT` with signal 9) is let go at once: every thread is resumed into its
//! death and the capture ends with the program's exit.

use std::collections::{BTreeMap, VecDeque};
use std::ops::ControlFlow;
use std::os::fd::BorrowedFd;
use std::time::{Duration, Instant};

use sdt_abi::{TRAP_MAGIC, TRAP_RECORD_SIZE, TrapRecord, declined_state};
use sdt_store::{RobustList, Rseq, SeccompMode, SignalAction, ThreadRunState, ThreadState};
use sdt_sys::ptrace::{self, Regset, event, options};
use sdt_sys::wait::{self, Stop};
use sdt_sys::{Tid, memory, monotonic_ns};

use crate::capture::CaptureError;
use crate::freeze::{
    BreakpointHit, EventSource, FatalSignal, FreezeError, Freezer, ProgramExit, Stopped, TargetEvent,
};
use crate::symbols::{Arrival, SymbolBreak, SymbolTraps};

/// `si_code` of a `SIGTRAP` raised by `int3`.
const SI_KERNEL: i32 = 0x80;
/// Room for the largest XSAVE area (AMX tiles included).
const XSTATE_MAX: usize = 16 * 1024;
/// How long a freeze waits for the threads it interrupted. A thread stops within
/// microseconds, or as soon as it leaves an uninterruptible wait; one that stays longer is
/// in a wait nothing but a fatal signal ends (a `vfork` parent whose child does not exec,
/// a hung device), and the capture is given up.
const STOP_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a freeze waits for one thread's report before taking any thread's.
const STOP_SLICE: Duration = Duration::from_millis(20);

/// How long the threads of a killed program may take to finish dying.
const DEATH_TIMEOUT: Duration = Duration::from_secs(30);

/// Why sdt runs no system call in a thread of the program.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InjectionRefused {
    /// The thread is under seccomp, and sdt may not suspend it.
    #[error(
        "thread {tid} runs under a seccomp {mode}, which could kill the program for a system call sdt \
         makes in it; suspending it for those calls needs CAP_SYS_ADMIN"
    )]
    Seccomp {
        /// The thread.
        tid: i32,
        /// `filter` or `strict mode`.
        mode: &'static str,
        /// Why `PTRACE_O_SUSPEND_SECCOMP` was refused.
        #[source]
        source: sdt_sys::Error,
    },
    /// The thread's seccomp mode could not be read.
    #[error("reading the seccomp mode of thread {tid}")]
    Status {
        /// The thread.
        tid: i32,
        /// What reading `/proc/TID/status` gave.
        #[source]
        source: std::io::Error,
    },
}

#[derive(Debug, Default)]
struct Thread {
    /// In a ptrace-stop we have not resumed.
    stopped: bool,
    /// Signal to deliver when resumed.
    signal: i32,
    /// In group-stop: resumed with `PTRACE_LISTEN`.
    group_stop: bool,
    /// Reached `PTRACE_EVENT_EXIT`: once resumed it never runs user code again (a leader
    /// that exits first lingers as a zombie until the last thread is gone).
    exiting: bool,
    /// Stopped at this breakpoint, whose capture is queued or under way.
    at_breakpoint: Option<BreakpointHit>,
    /// Stopped at its `clone` (or `fork`) event: the call has not returned yet (`rax`
    /// still holds `-ENOSYS`, not the new thread's id).
    at_clone: bool,
}

/// A program under ptrace.
pub(crate) struct Tracer {
    pid: Tid,
    threads: BTreeMap<Tid, Thread>,
    /// Breakpoints reached while other work was under way.
    queued: VecDeque<TargetEvent>,
    /// Signals that arrived for a thread already holding one, sent again at the thaw.
    resend: Vec<(Tid, i32)>,
    /// Breakpoints at function entries (`--break`).
    symbols: SymbolTraps,
    /// Interrupted threads may be made real-time until they stop (no `EPERM` yet).
    may_hurry: bool,
    /// Signals about to end the program are held for a snapshot.
    signal_snapshots: bool,
    /// The program's `stat`, for its signal dispositions (opened at the first signal).
    stat: Option<sdt_procfs::StatFile>,
    /// The `PTRACE_O_*` options every thread is traced with.
    options: u32,
    /// Told that the program's memory is closed to sdt.
    told_closed: bool,
}

/// Threads of the program made real-time until they stop; dropped, each gets its own
/// scheduling back (a thread that has exited meanwhile is skipped).
#[derive(Default)]
pub(crate) struct Hurried(Vec<(Tid, sdt_sys::Scheduling)>);

impl Hurried {
    /// Makes `tid` real-time if it shares the CPUs by fairness; false if sdt may not.
    /// A thread already hurried stays so.
    fn hurry(&mut self, tid: Tid) -> bool {
        if self.0.iter().any(|(t, _)| *t == tid) {
            return true;
        }
        let Ok(own) = sdt_sys::scheduling(tid) else { return true };
        if !own.is_fair() {
            return true;
        }
        let urgent = sdt_sys::Scheduling {
            policy: libc::SCHED_FIFO | (own.policy & libc::SCHED_RESET_ON_FORK),
            priority: 1,
        };
        match sdt_sys::set_scheduling(tid, urgent) {
            Ok(()) => {
                self.0.push((tid, own));
                true
            }
            Err(e) if e.errno() == libc::EPERM => {
                log::debug!("threads are stopped at their own priority: {e}");
                false
            }
            Err(_) => true,
        }
    }
}

impl Drop for Hurried {
    fn drop(&mut self) {
        for (tid, own) in self.0.drain(..) {
            if let Err(e) = sdt_sys::set_scheduling(tid, own)
                && !e.is_gone()
            {
                log::warn!("thread {tid} keeps a real-time priority: {e}");
            }
        }
    }
}

impl Tracer {
    /// Traces `pid`, which [`sdt_sys::spawn::spawn_seized`] left stopped at its exec,
    /// places its symbol breakpoints, and lets it run; with `signal_snapshots`, signals
    /// about to end it are held for a snapshot.
    /// `options` are those it was seized with.
    pub(crate) fn start(
        pid: Tid,
        options: u32,
        breaks: &[SymbolBreak],
        signal_snapshots: bool,
    ) -> Result<Tracer, crate::Error> {
        let symbols = SymbolTraps::place(pid, breaks).map_err(crate::Error::Break)?;
        ptrace::resume(pid, 0)?;
        let mut threads = BTreeMap::new();
        threads.insert(pid, Thread::default());
        Ok(Tracer {
            pid,
            threads,
            queued: VecDeque::new(),
            resend: Vec::new(),
            symbols,
            may_hurry: true,
            signal_snapshots,
            stat: None,
            options,
            told_closed: false,
        })
    }

    /// Traces `pid`, restored with every thread in `threads` seized (with `options`) and
    /// stopped.
    pub(crate) fn adopt(pid: Tid, options: u32, threads: impl IntoIterator<Item = Tid>) -> Tracer {
        Tracer::with_threads(pid, options, threads, true)
    }

    /// Traces `pid`, a running process sdt attached to: every thread in `threads` seized
    /// (with `options`), none stopped.
    pub(crate) fn seized(pid: Tid, options: u32, threads: impl IntoIterator<Item = Tid>) -> Tracer {
        Tracer::with_threads(pid, options, threads, false)
    }

    fn with_threads(pid: Tid, options: u32, threads: impl IntoIterator<Item = Tid>, stopped: bool) -> Tracer {
        let threads = threads.into_iter().map(|tid| (tid, Thread { stopped, ..Thread::default() })).collect();
        Tracer {
            pid,
            threads,
            queued: VecDeque::new(),
            resend: Vec::new(),
            symbols: SymbolTraps::default(),
            may_hurry: true,
            signal_snapshots: false,
            stat: None,
            options,
            told_closed: false,
        }
    }

    /// Holds signals about to end the program for a snapshot from now on.
    pub(crate) fn hold_fatal_signals(&mut self) {
        self.signal_snapshots = true;
    }

    /// The next breakpoint or the program's end, if one is ready; handles (and resumes
    /// from) every other stop on the way. Never blocks.
    pub(crate) fn poll(&mut self) -> Result<Option<TargetEvent>, sdt_sys::Error> {
        if let Some(event) = self.queued.pop_front() {
            return Ok(Some(event));
        }
        while let Some((tid, stop)) = wait::poll_any()? {
            if let Some(event) = self.on_stop(tid, stop, false)? {
                return Ok(Some(event));
            }
        }
        Ok(None)
    }

    /// Like [`Tracer::poll`], but waits for the breakpoint or the end.
    pub(crate) fn next_event(&mut self) -> Result<TargetEvent, sdt_sys::Error> {
        loop {
            if let Some(event) = self.queued.pop_front() {
                return Ok(event);
            }
            let (tid, stop) = wait::wait_any()?;
            if let Some(event) = self.on_stop(tid, stop, false)? {
                return Ok(event);
            }
        }
    }

    /// Sends `signal` to the program, as `kill` would.
    pub(crate) fn signal(&self, signal: i32) -> Result<(), sdt_sys::Error> {
        sdt_sys::kill_process(self.pid, signal)
    }

    /// Stops tracing the program, which runs on as if it had never been traced: every
    /// thread is stopped (threads it creates meanwhile are traced with it), then detached
    /// with the signal it was to get (the freeze took any `--break` int3s out). `TargetGone`
    /// if it ended first.
    pub(crate) fn let_go(&mut self) -> Result<(), FreezeError> {
        self.stop_every_thread(None)?;
        let mut first_error = None;
        for (tid, thread) in std::mem::take(&mut self.threads) {
            // A main thread that has exited waits, a zombie, for the others; so does a
            // thread past its exit stop.
            if !thread.stopped {
                continue;
            }
            if let Err(e) = ptrace::detach(tid, thread.signal)
                && !e.is_gone()
            {
                first_error.get_or_insert(e);
            }
        }
        for (tid, signal) in self.resend.drain(..) {
            sdt_sys::kill_thread(self.pid, tid, signal).ok();
        }
        self.queued.clear();
        first_error.map_or(Ok(()), |e| Err(e.into()))
    }

    /// Acts on one report. Outside a freeze, every thread but a breaking one is resumed;
    /// during a freeze, every thread that stops stays stopped.
    fn on_stop(
        &mut self,
        tid: Tid,
        stop: Stop,
        freezing: bool,
    ) -> Result<Option<TargetEvent>, sdt_sys::Error> {
        if let Some(exit) = ProgramExit::from_stop(stop) {
            self.threads.remove(&tid);
            return Ok((tid == self.pid).then(|| self.program_ended(exit, freezing)));
        }
        // SIGKILL does not wait for the capture: the program is gone, let it go.
        if freezing && matches!(stop, Stop::Event(event::EXIT, _)) && killed(tid) {
            self.threads.entry(tid).or_default().stopped = true;
            let exit = self.let_die()?;
            return Ok(Some(self.program_ended(exit, freezing)));
        }
        match stop {
            Stop::Event(event::EXEC, _) => return self.on_exec(freezing),
            Stop::Event(event::CLONE, _) => {
                if let Some(child) = Tid::new(ptrace::event_message(tid)? as i32) {
                    // Its first stop is still to come (unless it came first).
                    self.threads.entry(child).or_default();
                }
                self.threads.entry(tid).or_default().at_clone = freezing;
            }
            Stop::Event(event::FORK, _) => self.threads.entry(tid).or_default().at_clone = freezing,
            _ => {}
        }
        if self.options & options::TRACEFORK != 0 && !self.threads.contains_key(&tid) && !self.owns(tid) {
            self.let_child_go(tid);
            return Ok(None);
        }
        // A stop from a thread we have not heard of is a new thread's first stop, which
        // can arrive before its parent's clone event.
        self.threads.entry(tid).or_default().stopped = true;
        if stop == Stop::Signal(libc::SIGTRAP)
            && let ControlFlow::Break(event) = self.on_sigtrap(tid, freezing)?
        {
            return Ok(event);
        }
        let thread = self.threads.get_mut(&tid).expect("entered above");
        match stop {
            // Not a breakpoint: resumed, with the signal if it is the program's own.
            Stop::Signal(libc::SIGTRAP) => {}
            Stop::Signal(sig) if thread.signal == 0 => thread.signal = sig,
            Stop::Signal(sig) => self.resend.push((tid, sig)),
            Stop::Event(event::EXIT, _) => thread.exiting = true,
            Stop::Event(event::STOP, sig) => {
                if sig != libc::SIGTRAP {
                    thread.group_stop = true;
                } else if !freezing {
                    thread.group_stop = false;
                }
            }
            Stop::Event(..) | Stop::Exited(_) | Stop::Killed(..) => {}
        }
        if freezing {
            return Ok(None);
        }
        let held = thread.signal;
        if let Stop::Signal(signo) = stop
            && self.signal_snapshots
            && held == signo
            && let Some(fatal) = self.fatal_signal(tid, signo)
        {
            // Held, its signal with it, until the snapshot's thaw.
            return Ok(Some(TargetEvent::FatalSignal(fatal)));
        }
        resume_thread(tid, self.threads.get_mut(&tid).expect("entered above"))?;
        Ok(None)
    }

    /// Whether `tid` is a thread of the program (not a process it forked).
    fn owns(&self, tid: Tid) -> bool {
        std::path::Path::new(&format!("/proc/{}/task/{tid}", self.pid)).exists()
    }

    /// `child`, a process the program forked, is traced (`PTRACE_O_TRACEFORK`, set while
    /// there are symbol breakpoints) only so that it starts without their int3s, which
    /// would kill it: its copy of the memory gets the program's own bytes back, and it is
    /// let go. A child that shares the program's memory (`clone(CLONE_VM)` without
    /// `CLONE_THREAD`) keeps them.
    fn let_child_go(&mut self, child: Tid) {
        match memory::same_address_space(child, self.pid) {
            Ok(false) => {
                if let Err(e) = self.symbols.restore_bytes(child) {
                    log::warn!("process {child}, forked by the program, keeps the --break int3s: {e}");
                }
            }
            Ok(true) => log::debug!("process {child} shares the program's memory, int3s and all"),
            Err(e) => log::debug!("process {child}: {e}"),
        }
        if let Err(e) = ptrace::detach(child, 0)
            && !e.is_gone()
        {
            log::warn!("letting process {child}, forked by the program, go: {e}");
        }
    }

    /// The signal `signo` thread `tid` is stopped at the delivery of, if it is about to
    /// end the program: its default action terminates (with a core dump or without), and
    /// the program neither catches nor ignores it. (A fault the thread cannot take, say a
    /// `SIGSEGV` while `SIGSEGV` is blocked, has had its action reset to the default by
    /// the kernel before this stop.)
    fn fatal_signal(&mut self, tid: Tid, signo: i32) -> Option<FatalSignal> {
        let harmless_by_default = [
            libc::SIGKILL,
            libc::SIGCHLD,
            libc::SIGCONT,
            libc::SIGSTOP,
            libc::SIGTSTP,
            libc::SIGTTIN,
            libc::SIGTTOU,
            libc::SIGURG,
            libc::SIGWINCH,
        ];
        if !(1..=64).contains(&signo) || harmless_by_default.contains(&signo) {
            return None;
        }
        // `stat` tells the first 31 quickly; `status` all 64.
        let sets = if signo < 32 {
            if self.stat.is_none() {
                self.stat = sdt_procfs::StatFile::open(self.pid).ok();
            }
            self.stat.as_mut()?.signal_sets()
        } else {
            crate::procfs::signal_sets(tid)
        };
        let (caught, ignored) = sets.ok()?;
        if (caught | ignored) & (1 << (signo - 1)) != 0 {
            return None;
        }
        let info = ptrace::siginfo(tid).ok()?;
        Some(FatalSignal { tid, signo, code: info.code, addr: info.fault_addr().unwrap_or(0) })
    }

    /// The program's end, as the event to report. During a freeze, whoever waited may not
    /// be the one to pass the end on (a thaw does not): it is the next event too.
    fn program_ended(&mut self, exit: ProgramExit, freezing: bool) -> TargetEvent {
        self.symbols.tell_never_loaded();
        if freezing {
            self.queued.push_back(TargetEvent::Exited(exit));
        }
        TargetEvent::Exited(exit)
    }

    /// The program called `execve`: it ended every other thread, and the caller's id is
    /// now the pid. The new image has none of the old one's breakpoints.
    fn on_exec(&mut self, freezing: bool) -> Result<Option<TargetEvent>, sdt_sys::Error> {
        let pid = self.pid;
        self.threads.clear();
        self.symbols.clear();
        self.stat = None;
        let leader = self.threads.entry(pid).or_default();
        leader.stopped = true;
        if freezing {
            self.queued.push_back(TargetEvent::Exec);
            return Ok(None);
        }
        resume_thread(pid, leader)?;
        Ok(Some(TargetEvent::Exec))
    }

    /// Handles thread `tid`'s `SIGTRAP` stop if it is a breakpoint's (`Break` with what
    /// to report: a breakpoint, or nothing when it is queued during a freeze or stepped
    /// over); `Continue` if the thread is to be resumed as after any stop (with the
    /// signal, if the trap is the program's own).
    fn on_sigtrap(
        &mut self,
        tid: Tid,
        freezing: bool,
    ) -> Result<ControlFlow<Option<TargetEvent>>, sdt_sys::Error> {
        match self.symbols.arrival(tid, !freezing)? {
            Arrival::NotOurs => {}
            Arrival::Later => return Ok(ControlFlow::Break(None)),
            Arrival::Pass => {
                match self.step_over(tid).and_then(|()| self.thaw(None, false)) {
                    // Its exit report was taken on the way: it is queued.
                    Ok(()) | Err(FreezeError::Skip(_) | FreezeError::TargetGone(_)) => {}
                    Err(FreezeError::Sys(e)) => return Err(e),
                }
                return Ok(ControlFlow::Break(None));
            }
            // Counted: not during a freeze.
            Arrival::Hit(hit) => return Ok(ControlFlow::Break(self.at_breakpoint(tid, hit, freezing))),
        }
        match trap_at(tid) {
            Ok(Trap::Sdt(hit)) => Ok(ControlFlow::Break(self.at_breakpoint(tid, hit, freezing))),
            // Resumed without the signal, the record unanswered: SetBreakpoint returns
            // SDT_DECLINED.
            Ok(Trap::Unreadable) => Ok(ControlFlow::Continue(())),
            Ok(Trap::Closed) => {
                if !std::mem::replace(&mut self.told_closed, true) {
                    log::warn!(
                        "thread {tid} reached a breakpoint, but the program's memory is closed to sdt: it made \
                         itself non-dumpable (prctl(PR_SET_DUMPABLE, 0), or a change of its user or group), \
                         and only a tracer with CAP_SYS_PTRACE may read it now; no snapshot from here on (run \
                         sdt as root, or give it CAP_SYS_PTRACE)"
                    );
                }
                Ok(ControlFlow::Continue(()))
            }
            Ok(Trap::Foreign) => {
                self.threads.entry(tid).or_default().signal = libc::SIGTRAP;
                Ok(ControlFlow::Continue(()))
            }
            // Killed since it stopped: its exit report follows.
            Err(e) if e.is_gone() => Ok(ControlFlow::Continue(())),
            Err(e) => Err(e),
        }
    }

    /// Thread `tid` stopped at breakpoint `hit`, and is held until its capture: the event
    /// to report now (during a freeze, it is queued instead).
    fn at_breakpoint(&mut self, tid: Tid, hit: BreakpointHit, freezing: bool) -> Option<TargetEvent> {
        self.threads.entry(tid).or_default().at_breakpoint = Some(hit.clone());
        let event = TargetEvent::Breakpoint(hit);
        if freezing {
            self.queued.push_back(event);
            return None;
        }
        Some(event)
    }
}

/// Sets the library's state word at `state_ptr` (read through thread `tid`) to its
/// [`declined_state`]: from now on its breakpoints that pass return `SDT_DECLINED`
/// without stopping. A word that is off stays off.
fn decline_from_now_on(tid: Tid, state_ptr: u64) -> Result<(), sdt_sys::Error> {
    let mut word = [0u8; 4];
    memory::read_exact(tid, state_ptr, &mut word)?;
    let state = i32::from_le_bytes(word);
    let declined = declined_state(state);
    if declined != state {
        memory::write(tid, state_ptr, &declined.to_le_bytes())?;
    }
    Ok(())
}

/// Whether thread `tid`, at its `PTRACE_EVENT_EXIT` stop, is dying of `SIGKILL` (and
/// with it every thread of its process).
fn killed(tid: Tid) -> bool {
    let status = ptrace::event_message(tid).unwrap_or(0);
    matches!(wait::decode(status as i32), Stop::Killed(libc::SIGKILL, _))
}

/// The error of a wait that the kernel did not answer in time.
fn timed_out(tid: Tid, what: String) -> sdt_sys::Error {
    sdt_sys::Error {
        call: "waitpid",
        tid: tid.raw(),
        source: std::io::Error::new(std::io::ErrorKind::TimedOut, what),
    }
}

/// Where a thread waits in the kernel (`/proc/TID/wchan`), for messages.
fn wait_channel(tid: Tid) -> String {
    match std::fs::read_to_string(format!("/proc/{tid}/wchan")) {
        Ok(wchan) if !wchan.is_empty() && wchan != "0" => wchan,
        _ => "an unknown place".to_owned(),
    }
}

/// Waits, briefly, until a leader resumed from its exit stop has finished exiting (its
/// state in `/proc/PID/stat` is `Z`): until then the kernel may still write its memory.
fn wait_until_zombie(pid: Tid) {
    for _ in 0..1000 {
        let Ok(stat) = sdt_procfs::read(pid, "stat") else { return };
        if sdt_procfs::Stat::parse(&stat).and_then(|s| s.state()) == Some('Z') {
            return;
        }
        std::thread::sleep(std::time::Duration::from_micros(50));
    }
    log::warn!("the exiting main thread {pid} is taking long to exit; capturing anyway");
}

/// Resumes one stopped thread the way its state asks.
fn resume_thread(tid: Tid, thread: &mut Thread) -> Result<(), sdt_sys::Error> {
    let result = if thread.group_stop && !thread.exiting {
        match ptrace::listen(tid) {
            // Its last stop is not its group-stop's: a step or an injected call ran since.
            // Interrupted and resumed, it goes back into the group-stop, whose report is
            // listened on in turn.
            Err(e) if e.errno() == libc::EIO => ptrace::interrupt(tid).and_then(|()| ptrace::resume(tid, 0)),
            other => other,
        }
    } else {
        ptrace::resume(tid, std::mem::take(&mut thread.signal))
    };
    thread.stopped = false;
    match result {
        // Killed meanwhile: its exit report follows.
        Err(e) if e.is_gone() => Ok(()),
        other => other,
    }
}

/// What a `SIGTRAP` stop is.
enum Trap {
    /// An SDT breakpoint.
    Sdt(BreakpointHit),
    /// An SDT trap whose record cannot be read (another protocol version, a bad pointer).
    Unreadable,
    /// An SDT trap in a program whose memory sdt may no longer read (non-dumpable).
    Closed,
    /// The program's own (a debugger's breakpoint, `raise(SIGTRAP)`, an `int3` where an
    /// answered record is left): delivered as is.
    Foreign,
}

/// Tells an SDT trap from the program's own `SIGTRAP`s, and reads its record.
fn trap_at(tid: Tid) -> Result<Trap, sdt_sys::Error> {
    if ptrace::siginfo(tid)?.code != SI_KERNEL {
        return Ok(Trap::Foreign);
    }
    let regs = ptrace::regs(tid)?;
    if regs.rax != TRAP_MAGIC {
        return Ok(Trap::Foreign);
    }
    let record_addr = regs.rdi;
    let mut bytes = [0u8; TRAP_RECORD_SIZE];
    let read = memory::read_exact(tid, record_addr, &mut bytes);
    if read.as_ref().is_err_and(|e| e.errno() == libc::EPERM) {
        return Ok(Trap::Closed);
    }
    if read.is_ok() && TrapRecord::is_answered(&bytes) {
        return Ok(Trap::Foreign);
    }
    let record = read.ok().and_then(|()| TrapRecord::from_bytes(&bytes));
    let Some(record) = record else {
        log::warn!(
            "thread {tid} trapped with an unreadable breakpoint record (another protocol \
             version? rebuild the program against this sdt's libsdt); no snapshot"
        );
        return Ok(Trap::Unreadable);
    };
    Ok(Trap::Sdt(BreakpointHit::read(tid, record, record_addr)))
}

/// How long [`Tracer::inject_syscalls`] looks for the reports of the threads it stepped
/// before it sleeps until they come: a call sdt injects takes microseconds.
const INJECTION_SPIN: Duration = Duration::from_micros(200);

/// The most instructions [`Tracer::run_to`] steps through a prologue.
const PROLOGUE_STEPS: u32 = 64;

impl Freezer for Tracer {
    fn freeze_all(&mut self, breaking: Option<Tid>) -> Result<Stopped, FreezeError> {
        let stopped = match self.stop_every_thread(breaking) {
            // Everyone that stopped goes on ([`crate::freeze::Held::freeze`]); the
            // breakpoint's call returns SDT_DECLINED.
            Err(FreezeError::Sys(e)) if e.source.kind() == std::io::ErrorKind::TimedOut => {
                log::warn!("no snapshot: {}", e.source);
                return Err(FreezeError::Skip("a thread did not stop"));
            }
            other => other?,
        };
        // A symbol breakpoint's thread is captured where its function's body starts, its
        // arguments stored where the DWARF says they are.
        if let Some(tid) = breaking
            && let Some(body) = self.symbols.body_ahead(tid)?
        {
            self.run_to(tid, body)?;
        }
        Ok(stopped)
    }

    fn read_threads(&mut self, breaking: Option<Tid>) -> Result<Vec<ThreadState>, FreezeError> {
        let mut threads = Vec::with_capacity(self.threads.len());
        let held = self.threads.iter().filter(|(_, t)| t.stopped).map(|(&tid, t)| (tid, t.exiting));
        let (first, rest): (Vec<_>, Vec<_>) = held.partition(|&(tid, _)| Some(tid) == breaking);
        for (tid, exiting) in first.into_iter().chain(rest) {
            // A held thread goes only with its process (SIGKILL): no snapshot of that.
            threads.push(read_thread(tid, exiting)?);
        }
        Ok(threads)
    }

    fn resume_others(&mut self, held: Tid) -> Result<(), FreezeError> {
        // Back in before anyone runs.
        self.symbols.arm(held)?;
        for (&tid, thread) in self.threads.iter_mut() {
            if thread.stopped && thread.at_breakpoint.is_none() && tid != held {
                resume_thread(tid, thread)?;
            }
        }
        Ok(())
    }

    fn thaw(&mut self, breakpoint: Option<(&BreakpointHit, i64)>, turn_off: bool) -> Result<(), FreezeError> {
        // Every stopped thread is resumed whatever fails on the way (a thread stopped at
        // its exit, never resumed, would keep its process from ending); the first
        // failure is reported afterwards.
        let mut first_error: Option<FreezeError> = None;
        let mut note = |result: Result<(), FreezeError>| {
            if let Err(e) = result {
                first_error.get_or_insert(e);
            }
        };
        match breakpoint {
            // A symbol breakpoint has no record: its thread goes past the function's
            // first instruction instead, unless the capture took it to the body.
            Some((hit, _)) if hit.record_addr == 0 => {
                let at_entry = self.symbols.at_trap(hit.tid).map_err(FreezeError::from);
                note(at_entry.and_then(|at| if at { self.step_over(hit.tid) } else { Ok(()) }));
            }
            Some((hit, result)) => {
                let answered = hit.record.answered(result);
                note(
                    memory::write(hit.tid, hit.record_addr, bytemuck::bytes_of(&answered))
                        .map_err(Into::into),
                );
                if turn_off {
                    note(decline_from_now_on(hit.tid, hit.record.state_ptr).map_err(Into::into));
                }
            }
            None => {}
        }
        if turn_off {
            if let Some(tid) = breakpoint.map(|(hit, _)| hit.tid) {
                note(self.symbols.disarm(tid).map_err(Into::into));
            }
            self.symbols.clear();
        } else if let Some(live_thread) =
            self.threads.iter().find(|(_, t)| t.stopped && !t.exiting).map(|(&tid, _)| tid)
        {
            // Back in before anyone runs.
            note(self.symbols.arm(live_thread).map_err(Into::into));
        }
        let breaking = breakpoint.map(|(hit, _)| hit.tid);
        for (&tid, thread) in self.threads.iter_mut() {
            if thread.stopped && thread.at_breakpoint.is_none() && Some(tid) != breaking {
                note(resume_thread(tid, thread).map_err(Into::into));
            }
        }
        if let Some(tid) = breaking
            && let Some(thread) = self.threads.get_mut(&tid)
        {
            thread.at_breakpoint = None;
            thread.signal = 0;
            note(resume_thread(tid, thread).map_err(Into::into));
        }
        for (tid, signal) in self.resend.drain(..) {
            sdt_sys::kill_thread(self.pid, tid, signal).ok();
        }
        first_error.map_or(Ok(()), Err)
    }

    fn killed_since_freeze(&self, tid: Tid) -> bool {
        crate::procfs::killed_while_stopped(tid)
    }
}

impl Tracer {
    /// [`Freezer::freeze_all`], short of giving up: a thread that does not stop within
    /// [`STOP_TIMEOUT`] is a `TimedOut` error, with every thread left as it is.
    fn stop_every_thread(&mut self, breaking: Option<Tid>) -> Result<Stopped, FreezeError> {
        // Every thread must stop, or finish dying: a thread resumed from its exit stop
        // still writes its tid word (CLONE_CHILD_CLEARTID) on the way out, so the capture
        // waits for its exit report. The leader is the exception: once past its exit stop
        // it lingers as a zombie, reported only when the whole process ends.
        let pid = self.pid;
        if self.threads.get(&pid).is_some_and(|t| t.exiting && !t.stopped) {
            wait_until_zombie(pid);
        }
        let must_stop = |(&tid, t): (&Tid, &Thread)| {
            let zombie_leader = t.exiting && tid == pid;
            !t.stopped && !zombie_leader
        };
        // Until every thread has stopped.
        let mut hurried = Hurried::default();
        for (&tid, thread) in &self.threads {
            if must_stop((&tid, thread)) && !thread.exiting {
                if self.may_hurry {
                    self.may_hurry = hurried.hurry(tid);
                }
                match ptrace::interrupt(tid) {
                    // Dying: its report is on its way.
                    Err(e) if e.is_gone() => {}
                    other => other?,
                }
            }
        }
        let deadline = Instant::now() + STOP_TIMEOUT;
        self.stop_all(&must_stop, deadline)?;
        // A thread held at its clone event is inside the call, whose result is not in its
        // registers yet: a restore would see `clone` fail. It finishes the call and stops
        // again before its next instruction (the interrupt is pending when it resumes).
        let in_clone: Vec<Tid> =
            self.threads.iter().filter(|(_, t)| t.at_clone && t.stopped).map(|(&tid, _)| tid).collect();
        for tid in in_clone {
            let thread = self.threads.get_mut(&tid).expect("listed above");
            thread.at_clone = false;
            match ptrace::interrupt(tid).and_then(|()| resume_thread(tid, thread)) {
                Err(e) if e.is_gone() => {}
                other => other?,
            }
        }
        self.stop_all(&must_stop, deadline)?;
        let all_stopped_ns = monotonic_ns();
        drop(hurried);
        let live_thread = self.threads.iter().find(|(_, t)| t.stopped && !t.exiting).map(|(&tid, _)| tid);
        // The snapshot holds the program's own bytes, not the symbol breakpoints' int3s.
        if let Some(live_thread) = breaking.or(live_thread) {
            self.symbols.disarm(live_thread)?;
        }
        Ok(Stopped { all_stopped_ns, live_thread: breaking.or(live_thread) })
    }

    /// Moves thread `tid`, stopped at a symbol breakpoint's function entry, past the
    /// function's first instruction: emulated if it is a usual prologue; else run for real
    /// with the int3s out, while every other thread is stopped, so none passes the entry
    /// unseen. The int3s stay out (the thaw puts them back).
    fn step_over(&mut self, tid: Tid) -> Result<(), FreezeError> {
        if self.symbols.armed() && self.symbols.emulate_prologue(tid)? {
            return Ok(());
        }
        if self.symbols.armed() {
            self.stop_every_thread(Some(tid))?;
        }
        self.single_step(tid).map(drop)
    }

    /// Runs thread `tid` one instruction on; whether it is still there to run on (not
    /// exiting or gone).
    fn single_step(&mut self, tid: Tid) -> Result<bool, FreezeError> {
        loop {
            ptrace::single_step(tid)?;
            match self.next_report_of(tid)? {
                Stop::Signal(libc::SIGTRAP) => return Ok(true),
                // Held for the thaw.
                Stop::Signal(_) => {}
                // Exiting (held at its exit stop until the thaw), or gone.
                Stop::Event(event::EXIT, _) | Stop::Exited(_) | Stop::Killed(..) => return Ok(false),
                Stop::Event(..) => {}
            }
        }
    }

    /// Steps thread `tid`, every other thread stopped and the int3s out, from its
    /// function's entry to `body`, where the function's body starts: a prologue is a few
    /// instructions in a straight line, the usual first ones emulated. Stops where it is
    /// if the way leaves that line (a call, a jump) or takes more than [`PROLOGUE_STEPS`]
    /// steps.
    fn run_to(&mut self, tid: Tid, body: u64) -> Result<(), FreezeError> {
        let entry = ptrace::regs(tid)?.rip;
        for _ in 0..PROLOGUE_STEPS {
            if !self.symbols.emulate_prologue(tid)? && !self.single_step(tid)? {
                return Ok(());
            }
            let rip = ptrace::regs(tid)?.rip;
            if rip == body {
                return Ok(());
            }
            if rip <= entry || rip > body {
                break;
            }
        }
        log::debug!("thread {tid} did not reach the body at {body:#x} from the entry at {entry:#x}");
        Ok(())
    }

    /// Waits until every thread `must_stop` names has stopped (or died), handling what
    /// the others report on the way; a `TimedOut` error naming the threads still running
    /// at `deadline`.
    ///
    /// Each thread is waited for by its tid: the kernel finds it at once, where
    /// `waitpid(-1)` looks through every traced thread for each report, which made the
    /// freeze of a program of 4,000 threads take half a second. A thread that does not
    /// report within [`STOP_SLICE`] lets one report from any thread in first (a `vfork`
    /// parent comes back only once its child, traced too, is let go).
    fn stop_all(
        &mut self,
        must_stop: &impl Fn((&Tid, &Thread)) -> bool,
        deadline: Instant,
    ) -> Result<(), FreezeError> {
        loop {
            let waiting: Vec<Tid> =
                self.threads.iter().filter(|t| must_stop(*t)).map(|(&tid, _)| tid).collect();
            if waiting.is_empty() {
                return Ok(());
            }
            for tid in waiting {
                // It may have stopped or gone while another's report was handled.
                if !self.threads.get_key_value(&tid).is_some_and(must_stop) {
                    continue;
                }
                let slice = deadline.min(Instant::now() + STOP_SLICE);
                let report = match wait::wait_for_until(tid, slice) {
                    Ok(Some(report)) => Some(report),
                    // Gone without a report of its own (the old tid of a thread that
                    // ran `execve`), or slow: whoever reports next.
                    Ok(None) => wait::wait_any_until(slice)?,
                    Err(e) if e.errno() == libc::ECHILD => wait::wait_any_until(slice)?,
                    Err(e) => return Err(e.into()),
                };
                let Some((from, stop)) = report else {
                    if Instant::now() >= deadline {
                        return Err(self.not_stopped(must_stop).into());
                    }
                    continue;
                };
                if let Some(TargetEvent::Exited(exit)) = self.on_stop(from, stop, true)? {
                    return Err(FreezeError::TargetGone(exit));
                }
            }
        }
    }

    /// The error for threads `must_stop` names that did not stop within [`STOP_TIMEOUT`].
    fn not_stopped(&self, must_stop: &impl Fn((&Tid, &Thread)) -> bool) -> sdt_sys::Error {
        let late: Vec<Tid> = self.threads.iter().filter(|t| must_stop(*t)).map(|(&tid, _)| tid).collect();
        let names: Vec<String> =
            late.iter().map(|tid| format!("{tid} (waiting in {})", wait_channel(*tid))).collect();
        let what = format!(
            "thread{} {} did not stop within {} s of PTRACE_INTERRUPT: a wait that signals do not \
             interrupt (a vfork parent, a hung device)",
            if late.len() > 1 { "s" } else { "" },
            names.join(", "),
            STOP_TIMEOUT.as_secs()
        );
        timed_out(late.first().copied().unwrap_or(self.pid), what)
    }

    /// Waits for thread `tid`'s next report while the program is held (during a step or
    /// an injected call), handling every other thread's meanwhile as a freeze does, and
    /// `tid`'s too, but for its `SIGTRAP`s: a signal is held for the thaw, an exit
    /// recorded. `TargetGone` once the program has ended; `TimedOut` after
    /// [`ptrace::STEP_TIMEOUT`].
    fn next_report_of(&mut self, tid: Tid) -> Result<Stop, FreezeError> {
        let deadline = Instant::now() + ptrace::STEP_TIMEOUT;
        loop {
            let Some((from, stop)) = wait::wait_any_until(deadline)? else {
                // It was stepped and has not stopped since.
                if let Some(thread) = self.threads.get_mut(&tid) {
                    thread.stopped = false;
                }
                let what = format!(
                    "thread {tid} did not come back from a single step within {} s (it is in {})",
                    ptrace::STEP_TIMEOUT.as_secs(),
                    wait_channel(tid)
                );
                return Err(timed_out(tid, what).into());
            };
            if from == tid && stop == Stop::Signal(libc::SIGTRAP) {
                return Ok(stop);
            }
            if let Some(TargetEvent::Exited(exit)) = self.on_stop(from, stop, true)? {
                return Err(FreezeError::TargetGone(exit));
            }
            if from == tid {
                return Ok(stop);
            }
        }
    }

    /// The program was killed (its threads report `SIGKILL` at their exit stops): every
    /// thread is resumed into its death, and its end is waited for (at most
    /// [`DEATH_TIMEOUT`]).
    fn let_die(&mut self) -> Result<ProgramExit, sdt_sys::Error> {
        log::info!("the program was killed (SIGKILL) during a capture");
        // Breakpoints queued meanwhile are of threads that are gone.
        self.queued.clear();
        for (&tid, thread) in &mut self.threads {
            if thread.stopped {
                ptrace::resume(tid, 0).ok();
                thread.stopped = false;
            }
        }
        let deadline = Instant::now() + DEATH_TIMEOUT;
        loop {
            let Some((tid, stop)) = wait::wait_any_until(deadline)? else {
                let what = format!("the killed program did not end within {} s", DEATH_TIMEOUT.as_secs());
                return Err(timed_out(self.pid, what));
            };
            let exit = match stop {
                Stop::Exited(code) => ProgramExit::Code(code),
                Stop::Killed(sig, core) => ProgramExit::Signal(sig, core),
                // An exit stop (or any other) on the way out.
                Stop::Signal(_) | Stop::Event(..) => {
                    ptrace::resume(tid, 0).ok();
                    continue;
                }
            };
            self.threads.remove(&tid);
            if tid == self.pid {
                self.threads.clear();
                return Ok(exit);
            }
        }
    }

    /// A held thread to run injected system calls on: the breaking thread if there is
    /// one (it stopped in user code), else any held thread that is not exiting.
    pub(crate) fn injection_thread(&self, breaking: Option<Tid>) -> Option<Tid> {
        let usable = |t: &Thread| t.stopped && !t.exiting;
        breaking
            .filter(|tid| self.threads.get(tid).is_some_and(usable))
            .or_else(|| self.threads.iter().find(|(_, t)| usable(t)).map(|(&tid, _)| tid))
    }

    /// Runs `calls`, which inject system calls into `tid` (a held thread whose seccomp
    /// mode is `mode`), with its seccomp suspended if it has one, and put back after
    /// them; refused, without running `calls`, where sdt may not suspend it.
    pub(crate) fn with_seccomp_suspended<T, E: From<InjectionRefused>>(
        &mut self,
        tid: Tid,
        mode: SeccompMode,
        calls: impl FnOnce(&mut Tracer) -> Result<T, E>,
    ) -> Result<T, E> {
        let suspended = self.suspend_seccomp(tid, mode)?;
        let result = calls(self);
        self.restore_seccomp(suspended);
        result
    }

    /// Suspends the seccomp of `tid`, a held thread whose mode is `mode`, for injected
    /// calls: what [`Tracer::restore_seccomp`] takes to put it back (`None`: it has
    /// none). Refused where sdt may not.
    pub(crate) fn suspend_seccomp(
        &mut self,
        tid: Tid,
        mode: SeccompMode,
    ) -> Result<Option<(Tid, &'static str)>, InjectionRefused> {
        let mode = match mode {
            SeccompMode::Disabled => return Ok(None),
            SeccompMode::Strict => "strict mode",
            SeccompMode::Filter => "filter",
        };
        ptrace::set_options(tid, self.options | options::SUSPEND_SECCOMP)
            .map_err(|source| InjectionRefused::Seccomp { tid: tid.raw(), mode, source })?;
        Ok(Some((tid, mode)))
    }

    /// Puts back a seccomp that [`Tracer::suspend_seccomp`] suspended.
    pub(crate) fn restore_seccomp(&mut self, suspended: Option<(Tid, &'static str)>) {
        let Some((tid, mode)) = suspended else { return };
        match ptrace::set_options(tid, self.options) {
            Ok(()) => {}
            Err(e) if e.errno() == libc::ESRCH => {} // gone, or going: it runs nothing more
            Err(e) => log::error!("thread {tid} may run on with its seccomp {mode} suspended: {e}"),
        }
    }

    /// Runs one system call on `tid`, a thread the current freeze holds (see
    /// [`Tracer::inject_syscalls`]).
    pub(crate) fn inject_syscall(
        &mut self,
        tid: Tid,
        syscall_at: u64,
        nr: u64,
        args: &[u64],
    ) -> Result<i64, sdt_sys::Error> {
        Ok(self.inject_syscalls(syscall_at, &[(tid, nr, args)], &mut Hurried::default())?[0])
    }

    /// The next report of a thread whose injected call is `under_way` (a stepped thread
    /// that does not report within [`STOP_SLICE`] lets one report from any thread in
    /// first, as a freeze does), or `None` at `deadline`.
    fn injection_report(
        &mut self,
        under_way: &[(usize, ptrace::Injection)],
        deadline: Instant,
    ) -> Result<Option<(Tid, Stop)>, sdt_sys::Error> {
        let tids: Vec<Tid> = under_way.iter().map(|(_, call)| call.tid()).collect();
        loop {
            let slice = deadline.min(Instant::now() + STOP_SLICE);
            let report = match wait::wait_some_soon(&tids, INJECTION_SPIN, slice) {
                Ok(None) => wait::wait_any_until(slice)?,
                Err(e) if e.errno() == libc::ECHILD => wait::wait_any_until(slice)?,
                other => other?,
            };
            if report.is_some() || Instant::now() >= deadline {
                return Ok(report);
            }
        }
    }

    /// Runs one system call in each of several threads the current freeze holds, all at
    /// once (most of a call is the wait for its thread to be scheduled and for its
    /// report): `calls` names each thread with its call's number and arguments, and
    /// `syscall_at` is a `syscall` instruction (see [`ptrace::Injection`]). The threads
    /// are real-time where sdt may, until `hurried` is dropped (a caller that makes
    /// several rounds of calls keeps them so). A signal that arrives for one meanwhile is
    /// held for the thaw. Returns the raw results in the order of `calls`, or, once every
    /// thread's registers are back, the first failure. If the program ends meanwhile,
    /// its end is the next event and the calls fail.
    pub(crate) fn inject_syscalls(
        &mut self,
        syscall_at: u64,
        calls: &[(Tid, u64, &[u64])],
        hurried: &mut Hurried,
    ) -> Result<Vec<i64>, sdt_sys::Error> {
        let mut results = vec![0; calls.len()];
        let mut first_error = None;
        let mut under_way = Vec::with_capacity(calls.len());
        for (i, &(tid, nr, args)) in calls.iter().enumerate() {
            if self.may_hurry {
                self.may_hurry = hurried.hurry(tid);
            }
            match ptrace::Injection::start(tid, syscall_at, nr, args) {
                Ok(call) => under_way.push((i, call)),
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        while !under_way.is_empty() {
            let deadline = Instant::now() + ptrace::STEP_TIMEOUT;
            let Some((from, stop)) = self.injection_report(&under_way, deadline)? else {
                // They were stepped and have not stopped since.
                for (_, call) in &under_way {
                    if let Some(thread) = self.threads.get_mut(&call.tid()) {
                        thread.stopped = false;
                    }
                }
                let tid = under_way[0].1.tid();
                let what = format!(
                    "thread {tid} did not come back from a single step within {} s (it is in {})",
                    ptrace::STEP_TIMEOUT.as_secs(),
                    wait_channel(tid)
                );
                return Err(timed_out(tid, what));
            };
            let at = under_way.iter().position(|(_, call)| call.tid() == from);
            // Every report but an injected call's trap, as a freeze takes it.
            if (at.is_none() || stop != Stop::Signal(libc::SIGTRAP))
                && let Some(TargetEvent::Exited(exit)) = self.on_stop(from, stop, true)?
            {
                // The end is queued.
                return Err(sdt_sys::Error {
                    call: "injected system call",
                    tid: from.raw(),
                    source: std::io::Error::new(
                        std::io::ErrorKind::NotFound,
                        FreezeError::TargetGone(exit).to_string(),
                    ),
                });
            }
            let Some(at) = at else { continue };
            match under_way[at].1.reported(stop) {
                Ok(None) => {}
                Ok(Some(result)) => results[under_way.swap_remove(at).0] = result,
                Err(e) => {
                    first_error.get_or_insert(e);
                    under_way.swap_remove(at);
                }
            }
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok(results),
        }
    }
}

/// Registers and signal mask of a stopped thread (its name is read after the thaw).
fn read_thread(tid: Tid, exiting: bool) -> Result<ThreadState, sdt_sys::Error> {
    let mut gpregs = vec![0u8; sdt_store::GPREGS_SIZE];
    let n = ptrace::get_regset(tid, Regset::General, &mut gpregs)?;
    gpregs.truncate(n);
    let mut fpregs = vec![0u8; sdt_store::FPREGS_SIZE];
    let n = ptrace::get_regset(tid, Regset::Fp, &mut fpregs)?;
    fpregs.truncate(n);
    let mut xstate = vec![0u8; XSTATE_MAX];
    let n = ptrace::get_regset(tid, Regset::Xstate, &mut xstate).unwrap_or(0);
    xstate.truncate(n);
    Ok(ThreadState {
        tid: tid.raw(),
        name: String::new(),
        state: if exiting { ThreadRunState::Exiting } else { ThreadRunState::Running },
        gpregs,
        fpregs,
        xstate,
        sigmask: ptrace::sigmask(tid)?,
        rseq: ptrace::rseq_config(tid)?.map(|c| Rseq { addr: c.addr, len: c.len, sig: c.sig }),
        robust_list: sdt_sys::robust_list(tid)?.map(|(head, len)| RobustList { head, len }),
        // Read where a handler needs it, after the dispositions.
        altstack: None,
    })
}

impl EventSource for Tracer {
    fn poll(&mut self) -> Result<Option<TargetEvent>, sdt_sys::Error> {
        Tracer::poll(self)
    }

    /// Every stop of a traced thread comes with a `SIGCHLD`.
    fn wake_fd(&self) -> Option<BorrowedFd<'_>> {
        None
    }

    fn signal(&self, signal: i32) -> Result<(), sdt_sys::Error> {
        Tracer::signal(self, signal)
    }

    fn injector(&mut self) -> Option<&mut Tracer> {
        Some(self)
    }

    fn let_go(&mut self) -> Result<(), FreezeError> {
        Tracer::let_go(self)
    }

    fn signal_actions(&self, _caught: u64, _ignored: u64) -> Option<Result<Vec<SignalAction>, CaptureError>> {
        None
    }
}
