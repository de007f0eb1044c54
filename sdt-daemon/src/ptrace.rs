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
//! Signals the program receives are held while it is frozen and delivered when it
//! resumes; outside captures they are delivered at once.

use std::collections::{BTreeMap, VecDeque};
use std::os::fd::BorrowedFd;

use sdt_abi::{STATE_OFF, TRAP_MAGIC, TRAP_RECORD_SIZE, TrapRecord};
use sdt_store::{RobustList, Rseq, SignalAction, ThreadRunState, ThreadState, gpreg};
use sdt_sys::ptrace::{self, Regset, event};
use sdt_sys::wait::{self, Stop};
use sdt_sys::{Tid, memory, monotonic_ns};

use crate::freeze::{BreakpointHit, EventSource, FreezeError, Freezer, Frozen, ProgramExit, TargetEvent};
use crate::symbols::{Arrival, SymbolBreak, SymbolTraps};

/// `si_code` of a `SIGTRAP` raised by `int3`.
const SI_KERNEL: i32 = 0x80;
/// Room for the largest XSAVE area (AMX tiles included).
const XSTATE_MAX: usize = 16 * 1024;

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
    /// Stopped at a breakpoint whose capture is queued.
    at_breakpoint: bool,
    /// Stopped at its `clone` event: the call has not returned yet (`rax` still holds
    /// `-ENOSYS`, not the new thread's id).
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
}

impl Tracer {
    /// Traces `pid`, which [`sdt_sys::spawn::spawn_seized`] left stopped at its exec,
    /// places its symbol breakpoints, and lets it run.
    pub(crate) fn start(pid: Tid, breaks: &[SymbolBreak]) -> Result<Tracer, crate::Error> {
        let symbols = SymbolTraps::place(pid, breaks).map_err(crate::Error::Break)?;
        ptrace::resume(pid, 0)?;
        let mut threads = BTreeMap::new();
        threads.insert(pid, Thread::default());
        Ok(Tracer { pid, threads, queued: VecDeque::new(), resend: Vec::new(), symbols })
    }

    /// Traces `pid`, restored with every thread in `threads` seized and stopped.
    pub(crate) fn adopt(pid: Tid, threads: impl IntoIterator<Item = Tid>) -> Tracer {
        let threads =
            threads.into_iter().map(|tid| (tid, Thread { stopped: true, ..Thread::default() })).collect();
        Tracer { pid, threads, queued: VecDeque::new(), resend: Vec::new(), symbols: SymbolTraps::default() }
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

    /// Acts on one report. Outside a freeze, every thread but a breaking one is resumed;
    /// during a freeze, every thread that stops stays stopped.
    fn on_stop(
        &mut self,
        tid: Tid,
        stop: Stop,
        freezing: bool,
    ) -> Result<Option<TargetEvent>, sdt_sys::Error> {
        let exit = match stop {
            Stop::Exited(code) => Some(ProgramExit::Code(code)),
            Stop::Killed(sig, core) => Some(ProgramExit::Signal(sig, core)),
            _ => None,
        };
        if let Some(exit) = exit {
            self.threads.remove(&tid);
            return Ok((tid == self.pid).then_some(TargetEvent::Exited(exit)));
        }
        match stop {
            Stop::Event(event::EXEC, _) => {
                // execve ended every other thread; the caller's id is now the pid. The
                // new image has none of the old one's breakpoints.
                let pid = self.pid;
                self.threads.clear();
                self.symbols.clear();
                let leader = self.threads.entry(pid).or_default();
                leader.stopped = true;
                if freezing {
                    self.queued.push_back(TargetEvent::Exec);
                    return Ok(None);
                }
                resume_thread(pid, leader)?;
                return Ok(Some(TargetEvent::Exec));
            }
            Stop::Event(event::CLONE, _) => {
                if let Some(child) = Tid::new(ptrace::event_message(tid)? as i32) {
                    // Its first stop is still to come (unless it came first).
                    self.threads.entry(child).or_default();
                }
                self.threads.entry(tid).or_default().at_clone = freezing;
            }
            _ => {}
        }
        // A stop from a thread we have not heard of is a new thread's first stop, which
        // can arrive before its parent's clone event.
        let thread = self.threads.entry(tid).or_default();
        thread.stopped = true;
        if stop == Stop::Signal(libc::SIGTRAP) {
            match self.symbols.arrival(tid, !freezing)? {
                Arrival::NotOurs => {}
                Arrival::Later => return Ok(None),
                Arrival::Pass => {
                    match self.step_over(tid).and_then(|()| self.thaw(None, false)) {
                        Ok(()) | Err(FreezeError::Skip(_)) => {}
                        // Its exit report was taken on the way: it comes next.
                        Err(FreezeError::TargetGone(exit)) => {
                            self.queued.push_back(TargetEvent::Exited(exit))
                        }
                        Err(FreezeError::Sys(e)) => return Err(e),
                    }
                    return Ok(None);
                }
                Arrival::Hit(hit) => {
                    thread.at_breakpoint = true;
                    return Ok(Some(TargetEvent::Breakpoint(hit)));
                }
            }
        }
        match stop {
            Stop::Signal(libc::SIGTRAP) => match trap_at(tid)? {
                Trap::Sdt(hit) => {
                    thread.at_breakpoint = true;
                    let event = TargetEvent::Breakpoint(hit);
                    if freezing {
                        self.queued.push_back(event);
                        return Ok(None);
                    }
                    return Ok(Some(event));
                }
                // Resumed without the signal: the call returns RESULT_PENDING.
                Trap::Unreadable => {}
                Trap::Foreign => thread.signal = libc::SIGTRAP,
            },
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
        if !freezing {
            resume_thread(tid, thread)?;
        }
        Ok(None)
    }
}

/// Waits, briefly, until a leader resumed from its exit stop has finished exiting (its
/// state in `/proc/PID/stat` is `Z`): until then the kernel may still write its memory.
fn wait_until_zombie(pid: Tid) {
    for _ in 0..1000 {
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { return };
        if stat.rfind(')').and_then(|i| stat.get(i + 2..i + 3)) == Some("Z") {
            return;
        }
        std::thread::sleep(std::time::Duration::from_micros(50));
    }
    log::warn!("the exiting main thread {pid} is taking long to exit; capturing anyway");
}

/// Resumes one stopped thread the way its state asks.
fn resume_thread(tid: Tid, thread: &mut Thread) -> Result<(), sdt_sys::Error> {
    let result = if thread.group_stop && !thread.exiting {
        ptrace::listen(tid)
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
    /// The program's own (a debugger's breakpoint, `raise(SIGTRAP)`): delivered as is.
    Foreign,
}

/// Tells an SDT trap from the program's own `SIGTRAP`s, and reads its record.
fn trap_at(tid: Tid) -> Result<Trap, sdt_sys::Error> {
    if ptrace::siginfo(tid)?.code != SI_KERNEL {
        return Ok(Trap::Foreign);
    }
    let mut regs = [0u8; sdt_store::GPREGS_SIZE];
    ptrace::get_regset(tid, Regset::General, &mut regs)?;
    let reg = |name: &str| gpreg(&regs, name).unwrap_or(0);
    if reg("rax") != TRAP_MAGIC {
        return Ok(Trap::Foreign);
    }
    let record_addr = reg("rdi");
    let mut bytes = [0u8; TRAP_RECORD_SIZE];
    let record =
        memory::read_exact(tid, record_addr, &mut bytes).ok().and_then(|()| TrapRecord::from_bytes(&bytes));
    let Some(record) = record else {
        log::warn!(
            "thread {tid} trapped with an unreadable breakpoint record (another protocol \
             version? rebuild the program against this sdt's libsdt); no snapshot"
        );
        return Ok(Trap::Unreadable);
    };
    Ok(Trap::Sdt(BreakpointHit::read(tid, record, record_addr)))
}

impl Freezer for Tracer {
    fn freeze(&mut self, breaking: Option<Tid>) -> Result<Frozen, FreezeError> {
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
        for (&tid, thread) in &self.threads {
            if must_stop((&tid, thread)) && !thread.exiting {
                match ptrace::interrupt(tid) {
                    // Dying: its report is on its way.
                    Err(e) if e.is_gone() => {}
                    other => other?,
                }
            }
        }
        self.stop_all(&must_stop)?;
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
        self.stop_all(&must_stop)?;
        let all_stopped_ns = monotonic_ns();
        let via = self.threads.iter().find(|(_, t)| t.stopped && !t.exiting).map(|(&tid, _)| tid);
        // The snapshot holds the program's own bytes, not the symbol breakpoints' int3s.
        if let Some(via) = breaking.or(via) {
            self.symbols.disarm(via)?;
        }
        Ok(Frozen { all_stopped_ns, via: breaking.or(via) })
    }

    fn read_threads(&mut self, breaking: Option<Tid>) -> Result<Vec<ThreadState>, FreezeError> {
        let mut threads = Vec::with_capacity(self.threads.len());
        let held = self.threads.iter().filter(|(_, t)| t.stopped).map(|(&tid, t)| (tid, t.exiting));
        let (first, rest): (Vec<_>, Vec<_>) = held.partition(|&(tid, _)| Some(tid) == breaking);
        for (tid, exiting) in first.into_iter().chain(rest) {
            match read_thread(tid, exiting) {
                Ok(state) => threads.push(state),
                Err(e) if e.is_gone() => log::warn!("thread {tid} vanished while stopped"),
                Err(e) => return Err(e.into()),
            }
        }
        Ok(threads)
    }

    fn resume_others(&mut self, held: Tid) -> Result<(), FreezeError> {
        // Back in before anyone runs.
        self.symbols.arm(held)?;
        for (&tid, thread) in self.threads.iter_mut() {
            if thread.stopped && !thread.at_breakpoint && tid != held {
                resume_thread(tid, thread)?;
            }
        }
        Ok(())
    }

    fn thaw(&mut self, breakpoint: Option<(&BreakpointHit, i64)>, turn_off: bool) -> Result<(), FreezeError> {
        match breakpoint {
            // A symbol breakpoint has no record: its thread goes past the function's
            // first instruction instead.
            Some((hit, _)) if hit.record_addr == 0 => self.step_over(hit.tid)?,
            Some((hit, result)) => {
                memory::write(
                    hit.tid,
                    hit.record_addr + TrapRecord::RESULT_OFFSET as u64,
                    &result.to_le_bytes(),
                )?;
                if turn_off {
                    memory::write(hit.tid, hit.record.state_ptr, &STATE_OFF.to_le_bytes())?;
                }
            }
            None => {}
        }
        if turn_off {
            if let Some(tid) = breakpoint.map(|(hit, _)| hit.tid) {
                self.symbols.disarm(tid)?;
            }
            self.symbols.clear();
        } else if let Some(via) =
            self.threads.iter().find(|(_, t)| t.stopped && !t.exiting).map(|(&tid, _)| tid)
        {
            // Back in before anyone runs.
            self.symbols.arm(via)?;
        }
        let breaking = breakpoint.map(|(hit, _)| hit.tid);
        for (&tid, thread) in self.threads.iter_mut() {
            if thread.stopped && !thread.at_breakpoint && Some(tid) != breaking {
                resume_thread(tid, thread)?;
            }
        }
        if let Some(tid) = breaking {
            if let Some(thread) = self.threads.get_mut(&tid) {
                thread.at_breakpoint = false;
                thread.signal = 0;
                resume_thread(tid, thread)?;
            }
        }
        for (tid, signal) in self.resend.drain(..) {
            sdt_sys::kill_thread(self.pid, tid, signal).ok();
        }
        Ok(())
    }
}

impl Tracer {
    /// Moves thread `tid`, stopped at a symbol breakpoint's function entry, past the
    /// function's first instruction: emulated if it is a usual prologue; else run for real
    /// with the int3s out, while every other thread is stopped, so none passes the entry
    /// unseen. The int3s stay out (the thaw puts them back).
    fn step_over(&mut self, tid: Tid) -> Result<(), FreezeError> {
        if self.symbols.armed() && self.symbols.emulate_entry(tid)? {
            return Ok(());
        }
        if self.symbols.armed() {
            self.freeze(Some(tid))?;
        }
        loop {
            ptrace::single_step(tid)?;
            match wait::wait_for(tid)?.1 {
                Stop::Signal(libc::SIGTRAP) => return Ok(()),
                Stop::Signal(sig) => {
                    let thread = self.threads.entry(tid).or_default();
                    if thread.signal == 0 {
                        thread.signal = sig;
                    } else {
                        self.resend.push((tid, sig));
                    }
                }
                Stop::Event(..) => {}
                Stop::Exited(_) | Stop::Killed(..) => {
                    self.threads.remove(&tid);
                    return Ok(());
                }
            }
        }
    }

    /// Waits until every thread `must_stop` names has stopped (or died), handling what
    /// the others report on the way.
    fn stop_all(&mut self, must_stop: &impl Fn((&Tid, &Thread)) -> bool) -> Result<(), FreezeError> {
        while self.threads.iter().any(must_stop) {
            let (tid, stop) = wait::wait_any()?;
            if let Some(TargetEvent::Exited(exit)) = self.on_stop(tid, stop, true)? {
                return Err(FreezeError::TargetGone(exit));
            }
        }
        Ok(())
    }

    /// A held thread to run injected system calls on: the breaking thread if there is
    /// one (it stopped in user code), else any held thread that is not exiting.
    pub(crate) fn injection_thread(&self, breaking: Option<Tid>) -> Option<Tid> {
        let usable = |t: &Thread| t.stopped && !t.exiting;
        breaking
            .filter(|tid| self.threads.get(tid).is_some_and(usable))
            .or_else(|| self.threads.iter().find(|(_, t)| usable(t)).map(|(&tid, _)| tid))
    }

    /// Runs one system call on `tid`, a thread the current freeze holds (see
    /// [`ptrace::inject_syscall`]). A signal that arrives for it meanwhile is held for
    /// the thaw.
    pub(crate) fn inject_syscall(
        &mut self,
        tid: Tid,
        syscall_at: u64,
        nr: u64,
        args: &[u64],
    ) -> Result<i64, sdt_sys::Error> {
        let (threads, resend) = (&mut self.threads, &mut self.resend);
        ptrace::inject_syscall(tid, syscall_at, nr, args, |stop| match stop {
            // The program's signal, about to be delivered: hold it for the thaw.
            Stop::Signal(sig) => {
                let thread = threads.entry(tid).or_default();
                if thread.signal == 0 {
                    thread.signal = sig;
                } else {
                    resend.push((tid, sig));
                }
            }
            Stop::Exited(_) | Stop::Killed(..) => {
                threads.remove(&tid);
            }
            Stop::Event(..) => {}
        })
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

    fn signal_actions(&self, _caught: u64, _ignored: u64) -> Option<Result<Vec<SignalAction>, String>> {
        None
    }
}
