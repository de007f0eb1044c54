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

use sdt_abi::{STATE_OFF, TRAP_MAGIC, TRAP_RECORD_SIZE, TrapRecord};
use sdt_store::{ThreadRunState, ThreadState};
use sdt_sys::ptrace::{self, Regset, event};
use sdt_sys::wait::{self, Stop};
use sdt_sys::{Tid, memory, monotonic_ns};

use crate::freeze::{BreakpointHit, FreezeError, Freezer, Frozen, ProgramExit, TargetEvent};
use crate::procfs;

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
    /// Stopped at `PTRACE_EVENT_EXIT`.
    exiting: bool,
    /// Stopped at a breakpoint whose capture is queued.
    at_breakpoint: bool,
}

/// A program under ptrace.
pub(crate) struct Tracer {
    pid: Tid,
    threads: BTreeMap<Tid, Thread>,
    /// Breakpoints reached while other work was under way.
    queued: VecDeque<TargetEvent>,
}

impl Tracer {
    /// Traces `pid`, which [`sdt_sys::spawn::spawn_seized`] left stopped at its exec, and
    /// lets it run.
    pub(crate) fn start(pid: Tid) -> Result<Tracer, sdt_sys::Error> {
        ptrace::resume(pid, 0)?;
        let mut threads = BTreeMap::new();
        threads.insert(pid, Thread::default());
        Ok(Tracer { pid, threads, queued: VecDeque::new() })
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
                // execve ended every other thread; the caller's id is now the pid.
                let pid = self.pid;
                self.threads.retain(|&t, _| t == pid);
                let leader = self.threads.entry(pid).or_default();
                leader.stopped = true;
                if !freezing {
                    resume_thread(pid, leader)?;
                }
                return Ok(None);
            }
            Stop::Event(event::CLONE, _) => {
                if let Some(child) = Tid::new(ptrace::event_message(tid)? as i32) {
                    // Its first stop is still to come (unless it came first).
                    self.threads.entry(child).or_default();
                }
            }
            _ => {}
        }
        // A stop from a thread we have not heard of is a new thread's first stop, which
        // can arrive before its parent's clone event.
        let thread = self.threads.entry(tid).or_default();
        thread.stopped = true;
        match stop {
            Stop::Signal(libc::SIGTRAP) => {
                if let Some(hit) = breakpoint_at(tid)? {
                    thread.at_breakpoint = true;
                    let event = TargetEvent::Breakpoint(hit);
                    if freezing {
                        self.queued.push_back(event);
                        return Ok(None);
                    }
                    return Ok(Some(event));
                }
                thread.signal = libc::SIGTRAP;
            }
            Stop::Signal(sig) => thread.signal = sig,
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

/// If `tid`'s `SIGTRAP` is an SDT trap, the breakpoint it reports.
fn breakpoint_at(tid: Tid) -> Result<Option<BreakpointHit>, sdt_sys::Error> {
    if ptrace::siginfo(tid)?.code != SI_KERNEL {
        return Ok(None);
    }
    let mut regs = [0u8; sdt_store::GPREGS_SIZE];
    ptrace::get_regset(tid, Regset::General, &mut regs)?;
    let reg = |name: &str| {
        let i = sdt_store::GPREG_NAMES.iter().position(|&n| n == name).unwrap();
        u64::from_le_bytes(regs[i * 8..i * 8 + 8].try_into().unwrap())
    };
    if reg("rax") != TRAP_MAGIC {
        return Ok(None);
    }
    let record_addr = reg("rdi");
    let mut bytes = [0u8; TRAP_RECORD_SIZE];
    memory::read_exact(tid, record_addr, &mut bytes)?;
    let Some(record) = TrapRecord::from_bytes(&bytes) else {
        log::warn!(
            "thread {tid} trapped with a breakpoint record of another protocol version; \
             rebuild the program against this sdt's libsdt"
        );
        return Ok(None);
    };
    let mut attrs = vec![0u8; record.attrs_len.min(4096) as usize];
    memory::read_exact(tid, record.attrs_ptr, &mut attrs)?;
    Ok(Some(BreakpointHit { tid, record, record_addr, attrs: String::from_utf8_lossy(&attrs).into_owned() }))
}

impl Freezer for Tracer {
    fn freeze(&mut self, breaking: Option<Tid>) -> Result<Frozen, FreezeError> {
        for (&tid, thread) in &self.threads {
            if !thread.stopped {
                match ptrace::interrupt(tid) {
                    // Exiting or dead: its report is on its way.
                    Err(e) if e.is_gone() => {}
                    other => other?,
                }
            }
        }
        while self.threads.values().any(|t| !t.stopped) {
            let (tid, stop) = wait::wait_any()?;
            if let Some(TargetEvent::Exited(exit)) = self.on_stop(tid, stop, true)? {
                return Err(FreezeError::TargetGone(exit));
            }
        }
        let all_stopped_ns = monotonic_ns();
        let mut threads = Vec::with_capacity(self.threads.len());
        let order = breaking.into_iter().chain(self.threads.keys().copied().filter(|&t| Some(t) != breaking));
        for tid in order.collect::<Vec<_>>() {
            let exiting = self.threads.get(&tid).is_some_and(|t| t.exiting);
            match read_thread(self.pid, tid, exiting) {
                Ok(state) => threads.push(state),
                Err(e) if e.is_gone() => log::warn!("thread {tid} vanished while stopped"),
                Err(e) => return Err(e.into()),
            }
        }
        Ok(Frozen { threads, all_stopped_ns })
    }

    fn thaw(&mut self, breakpoint: Option<(&BreakpointHit, i64)>, turn_off: bool) -> Result<(), FreezeError> {
        if let Some((hit, result)) = breakpoint {
            memory::write(
                hit.tid,
                hit.record_addr + TrapRecord::RESULT_OFFSET as u64,
                &result.to_le_bytes(),
            )?;
            if turn_off {
                memory::write(hit.tid, hit.record.state_ptr, &STATE_OFF.to_le_bytes())?;
            }
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
        Ok(())
    }
}

/// Registers, signal mask and name of a stopped thread.
fn read_thread(pid: Tid, tid: Tid, exiting: bool) -> Result<ThreadState, sdt_sys::Error> {
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
        name: procfs::thread_name(pid, tid),
        state: if exiting { ThreadRunState::Exiting } else { ThreadRunState::Running },
        gpregs,
        fpregs,
        xstate,
        sigmask: ptrace::sigmask(tid)?,
    })
}
