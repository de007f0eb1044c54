//! ptrace requests on seized threads.
//!
//! # Safety
//!
//! Every request passes either no pointer or a pointer to a buffer whose length the
//! kernel is told (`iovec` for register sets), so the kernel never reads or writes past
//! it.

#![allow(unsafe_code)]

use std::time::{Duration, Instant};

use bytemuck::{Pod, Zeroable};
use sdt_abi::regs::UserRegs;

use crate::wait::{self, Stop};
use crate::{Error, Result, Tid};

/// `PTRACE_O_*` options SDT sets when seizing.
pub mod options {
    /// Stop at `clone` and attach the new thread automatically.
    pub const TRACECLONE: u32 = libc::PTRACE_O_TRACECLONE as u32;
    /// Stop at `fork` and attach the child process automatically (with its own copy of
    /// the memory, breakpoints and all).
    pub const TRACEFORK: u32 = libc::PTRACE_O_TRACEFORK as u32;
    /// Stop after `execve` succeeds.
    pub const TRACEEXEC: u32 = libc::PTRACE_O_TRACEEXEC as u32;
    /// Stop a thread as it starts to exit, before the kernel clears its tid word.
    pub const TRACEEXIT: u32 = libc::PTRACE_O_TRACEEXIT as u32;
    /// Kill every tracee if the tracer dies: a tracee that runs on alone would die of
    /// its next breakpoint's `SIGTRAP` anyway.
    pub const EXITKILL: u32 = libc::PTRACE_O_EXITKILL as u32;
    /// Suspend the thread's seccomp filters (and strict mode) while this option is set:
    /// a system call injected into a sandboxed program must not be the one that kills it.
    /// Needs `CAP_SYS_ADMIN` and a tracer that is not itself under seccomp.
    pub const SUSPEND_SECCOMP: u32 = libc::PTRACE_O_SUSPEND_SECCOMP as u32;
}

/// `PTRACE_EVENT_*` values reported in stops.
pub mod event {
    /// A traced thread called `fork`; the child's pid is the event message.
    pub const FORK: i32 = libc::PTRACE_EVENT_FORK;
    /// A traced thread called `clone`; the new thread's id is the event message.
    pub const CLONE: i32 = libc::PTRACE_EVENT_CLONE;
    /// `execve` succeeded; the old thread id is the event message.
    pub const EXEC: i32 = libc::PTRACE_EVENT_EXEC;
    /// The thread is exiting; its exit status is the event message.
    pub const EXIT: i32 = libc::PTRACE_EVENT_EXIT;
    /// A group-stop or a `PTRACE_INTERRUPT` stop.
    pub const STOP: i32 = libc::PTRACE_EVENT_STOP;
}

/// A register set, by its `NT_*` note type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum Regset {
    /// `NT_PRSTATUS`: `struct user_regs_struct`.
    General = 1,
    /// `NT_PRFPREG`: `struct user_fpregs_struct` (FXSAVE area).
    Fp = 2,
    /// `NT_X86_XSTATE`: the XSAVE area.
    Xstate = 0x202,
}

fn request(call: &'static str, req: libc::c_uint, tid: Tid, addr: usize, data: usize) -> Result<i64> {
    // SAFETY: callers pass addr/data that are integers or point to buffers valid for the
    // request (see the module's safety note).
    let rc = unsafe { libc::ptrace(req, tid.raw(), addr, data) };
    if rc == -1 { Err(Error::last(call, tid.raw())) } else { Ok(rc) }
}

/// `ptrace(PTRACE_SEIZE, tid, 0, options)`: traces a thread without stopping it.
#[doc(alias = "PTRACE_SEIZE")]
pub fn seize(tid: Tid, options: u32) -> Result<()> {
    request("PTRACE_SEIZE", libc::PTRACE_SEIZE, tid, 0, options as usize).map(drop)
}

/// `ptrace(PTRACE_SETOPTIONS, tid, 0, options)`: replaces the `PTRACE_O_*` options a
/// seized thread was traced with (the kernel keeps no others).
#[doc(alias = "PTRACE_SETOPTIONS")]
pub fn set_options(tid: Tid, options: u32) -> Result<()> {
    request("PTRACE_SETOPTIONS", libc::PTRACE_SETOPTIONS, tid, 0, options as usize).map(drop)
}

/// `ptrace(PTRACE_INTERRUPT, tid)`: makes a running seized thread stop
/// (reported as a [`event::STOP`] stop; the kernel kicks it off its CPU with an IPI).
#[doc(alias = "PTRACE_INTERRUPT")]
pub fn interrupt(tid: Tid) -> Result<()> {
    request("PTRACE_INTERRUPT", libc::PTRACE_INTERRUPT, tid, 0, 0).map(drop)
}

/// `ptrace(PTRACE_CONT, tid, 0, signal)`: resumes a stopped thread, delivering `signal`
/// (0: none).
#[doc(alias = "PTRACE_CONT")]
pub fn resume(tid: Tid, signal: i32) -> Result<()> {
    request("PTRACE_CONT", libc::PTRACE_CONT, tid, 0, signal as usize).map(drop)
}

/// `ptrace(PTRACE_DETACH, tid, 0, signal)`: stops tracing a stopped thread, which
/// resumes, delivering `signal` (0: none).
#[doc(alias = "PTRACE_DETACH")]
pub fn detach(tid: Tid, signal: i32) -> Result<()> {
    request("PTRACE_DETACH", libc::PTRACE_DETACH, tid, 0, signal as usize).map(drop)
}

/// `ptrace(PTRACE_LISTEN, tid)`: lets a thread in group-stop wait for `SIGCONT` while
/// staying traced.
#[doc(alias = "PTRACE_LISTEN")]
pub fn listen(tid: Tid) -> Result<()> {
    request("PTRACE_LISTEN", libc::PTRACE_LISTEN, tid, 0, 0).map(drop)
}

/// `ptrace(PTRACE_GETEVENTMSG, tid)`: the message of the last `PTRACE_EVENT_*` stop.
#[doc(alias = "PTRACE_GETEVENTMSG")]
pub fn event_message(tid: Tid) -> Result<u64> {
    let mut msg: libc::c_ulong = 0;
    request("PTRACE_GETEVENTMSG", libc::PTRACE_GETEVENTMSG, tid, 0, &raw mut msg as usize)?;
    Ok(msg)
}

/// What `PTRACE_GETSIGINFO` tells of a signal-delivery-stop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SigInfo {
    /// Signal number.
    pub signo: i32,
    /// `si_code` (`SI_KERNEL` for an `int3`, `SI_USER` for `kill`, …).
    pub code: i32,
    /// `si_errno`.
    pub errno: i32,
    /// The raw 128-byte `siginfo_t`.
    pub raw: [u8; 128],
}

impl SigInfo {
    /// The faulting address (`si_addr`) of a fault the kernel raised ([`is_fault`]).
    pub fn fault_addr(&self) -> Option<u64> {
        // x86_64: si_addr follows signo, errno, code and 4 bytes of padding.
        is_fault(self.signo, self.code)
            .then(|| u64::from_le_bytes(self.raw[16..24].try_into().expect("8 bytes")))
    }
}

/// Whether signal `signo` with `si_code` `code` is a fault the kernel raised, whose
/// `siginfo_t` holds the faulting address: `SIGSEGV`, `SIGBUS`, `SIGILL` or `SIGFPE` with
/// a positive code (not one sent by `kill` or `raise`).
pub fn is_fault(signo: i32, code: i32) -> bool {
    matches!(signo, libc::SIGSEGV | libc::SIGBUS | libc::SIGILL | libc::SIGFPE) && code > 0
}

/// `ptrace(PTRACE_GETSIGINFO, tid)`: the signal a thread stopped for.
#[doc(alias = "PTRACE_GETSIGINFO")]
pub fn siginfo(tid: Tid) -> Result<SigInfo> {
    /// The fields every `siginfo_t` starts with.
    #[repr(C)]
    #[derive(Clone, Copy, Pod, Zeroable)]
    struct Head {
        signo: i32,
        errno: i32,
        code: i32,
    }
    let mut raw = [0u8; 128];
    request("PTRACE_GETSIGINFO", libc::PTRACE_GETSIGINFO, tid, 0, raw.as_mut_ptr() as usize)?;
    let head: Head = bytemuck::pod_read_unaligned(&raw[..size_of::<Head>()]);
    Ok(SigInfo { signo: head.signo, errno: head.errno, code: head.code, raw })
}

/// `ptrace(PTRACE_GETREGSET, tid, kind, iov)`: copies a register set into `buf` and
/// returns its length (at most `buf.len()`).
#[doc(alias = "PTRACE_GETREGSET")]
pub fn get_regset(tid: Tid, kind: Regset, buf: &mut [u8]) -> Result<usize> {
    let mut iov = libc::iovec { iov_base: buf.as_mut_ptr().cast(), iov_len: buf.len() };
    request("PTRACE_GETREGSET", libc::PTRACE_GETREGSET, tid, kind as usize, &raw mut iov as usize)?;
    Ok(iov.iov_len)
}

/// [`get_regset`] of the general registers (`NT_PRSTATUS`), typed.
#[doc(alias = "PTRACE_GETREGSET")]
pub fn regs(tid: Tid) -> Result<UserRegs> {
    let mut regs = UserRegs::zeroed();
    get_regset(tid, Regset::General, bytemuck::bytes_of_mut(&mut regs))?;
    Ok(regs)
}

/// [`set_regset`] of the general registers (`NT_PRSTATUS`).
#[doc(alias = "PTRACE_SETREGSET")]
pub fn set_regs(tid: Tid, regs: &UserRegs) -> Result<()> {
    set_regset(tid, Regset::General, bytemuck::bytes_of(regs))
}

/// `ptrace(PTRACE_SETREGSET, tid, kind, iov)`: replaces a register set.
#[doc(alias = "PTRACE_SETREGSET")]
pub fn set_regset(tid: Tid, kind: Regset, regs: &[u8]) -> Result<()> {
    let mut iov = libc::iovec { iov_base: regs.as_ptr() as *mut libc::c_void, iov_len: regs.len() };
    request("PTRACE_SETREGSET", libc::PTRACE_SETREGSET, tid, kind as usize, &raw mut iov as usize).map(drop)
}

/// `ptrace(PTRACE_SINGLESTEP, tid, 0, 0)`: runs one instruction, then stops with
/// `SIGTRAP`.
#[doc(alias = "PTRACE_SINGLESTEP")]
pub fn single_step(tid: Tid) -> Result<()> {
    request("PTRACE_SINGLESTEP", libc::PTRACE_SINGLESTEP, tid, 0, 0).map(drop)
}

/// `ptrace(PTRACE_GETSIGMASK, tid, 8, &mask)`: the thread's blocked signals, bit `n-1`
/// for signal `n`.
#[doc(alias = "PTRACE_GETSIGMASK")]
pub fn sigmask(tid: Tid) -> Result<u64> {
    let mut mask = 0u64;
    request("PTRACE_GETSIGMASK", libc::PTRACE_GETSIGMASK, tid, 8, &raw mut mask as usize)?;
    Ok(mask)
}

/// `ptrace(PTRACE_SETSIGMASK, tid, 8, &mask)`: replaces the thread's blocked signals.
#[doc(alias = "PTRACE_SETSIGMASK")]
pub fn set_sigmask(tid: Tid, mask: u64) -> Result<()> {
    request("PTRACE_SETSIGMASK", libc::PTRACE_SETSIGMASK, tid, 8, &raw const mask as usize).map(drop)
}

/// A thread's `rseq(2)` registration: the area's address, its length and the abort
/// signature.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RseqConfig {
    /// Address of the registered `struct rseq`.
    pub addr: u64,
    /// Its registered length.
    pub len: u32,
    /// The signature abort handlers carry.
    pub sig: u32,
}

/// `ptrace(PTRACE_GET_RSEQ_CONFIGURATION, tid, sizeof, &conf)`: the thread's `rseq`
/// registration, `None` if it has none (or the kernel predates Linux 5.13).
#[doc(alias = "PTRACE_GET_RSEQ_CONFIGURATION")]
pub fn rseq_config(tid: Tid) -> Result<Option<RseqConfig>> {
    const PTRACE_GET_RSEQ_CONFIGURATION: libc::c_uint = 0x420f;
    /// `struct ptrace_rseq_configuration`.
    #[repr(C)]
    #[derive(Default)]
    struct Configuration {
        rseq_abi_pointer: u64,
        rseq_abi_size: u32,
        signature: u32,
        flags: u32,
        pad: u32,
    }
    let mut conf = Configuration::default();
    match request(
        "PTRACE_GET_RSEQ_CONFIGURATION",
        PTRACE_GET_RSEQ_CONFIGURATION,
        tid,
        size_of::<Configuration>(),
        &raw mut conf as usize,
    ) {
        Ok(_) => {}
        Err(e) if e.errno() == libc::EIO => return Ok(None),
        Err(e) => return Err(e),
    }
    let Configuration { rseq_abi_pointer: addr, rseq_abi_size: len, signature: sig, .. } = conf;
    Ok((addr != 0).then_some(RseqConfig { addr, len, sig }))
}

/// Single steps an injected system call may take before it counts as failed.
const MAX_INJECTION_STEPS: u32 = 64;

/// How long one single step of an injected system call may take before the thread counts
/// as lost: the calls SDT injects do not block, so only a thread the kernel holds
/// elsewhere (a stopped or frozen cgroup, a hung device) takes this long.
pub const STEP_TIMEOUT: Duration = Duration::from_secs(10);

/// Runs one system call on `tid`, a thread in a ptrace-stop: points it at a `syscall`
/// instruction (`0f 05`) at `syscall_at` with `nr` and `args` in place and single-steps
/// it. Returns the raw result (`-errno` on failure). The thread's registers are put back
/// afterwards, so a system call it was stopped in restarts as before.
///
/// Other stops of `tid` that arrive on the way (a signal about to be delivered, a `clone`
/// event of the call itself) go to `on_stop`; the caller decides what becomes of them. A
/// thread that exits or starts to (its `PTRACE_EVENT_EXIT` stop, where it is left) gives
/// `ESRCH`; one that does not report within [`STEP_TIMEOUT`] of a step, `ETIMEDOUT`.
///
/// Only `tid`'s reports are waited for. Where another thread may hold up `tid`'s report
/// (a first thread that exits is reported only after the others, which may be waiting for
/// their tracer at exit stops), wait for every thread and hand `tid`'s reports to an
/// [`Injection`].
pub fn inject_syscall(
    tid: Tid,
    syscall_at: u64,
    nr: u64,
    args: &[u64],
    mut on_stop: impl FnMut(Stop),
) -> Result<i64> {
    let mut call = Injection::start(tid, syscall_at, nr, args)?;
    loop {
        let deadline = Instant::now() + STEP_TIMEOUT;
        let stop = match wait::wait_for_until(tid, deadline) {
            Ok(Some((_, stop))) => stop,
            Ok(None) => {
                call.abandon();
                return Err(no_report(tid));
            }
            Err(e) => {
                call.abandon();
                return Err(e);
            }
        };
        if stop != Stop::Signal(libc::SIGTRAP) {
            on_stop(stop);
        }
        if let Some(result) = call.reported(stop)? {
            return Ok(result);
        }
    }
}

/// A system call injected into one thread in a ptrace-stop, under way: the thread was
/// pointed at a `syscall` instruction with the call's number and arguments and stepped.
/// Each of its reports goes to [`Injection::reported`] until that gives the result, so
/// that a caller may have calls under way in several threads at once.
#[derive(Debug)]
pub struct Injection {
    tid: Tid,
    /// Its registers before the call, put back after it.
    saved: UserRegs,
    syscall_at: u64,
    steps: u32,
}

impl Injection {
    /// Points `tid` at the `syscall` instruction (`0f 05`) at `syscall_at` with `nr` and
    /// `args` in place, and single-steps it.
    pub fn start(tid: Tid, syscall_at: u64, nr: u64, args: &[u64]) -> Result<Injection> {
        let saved = regs(tid)?;
        let mut call = saved;
        call.rax = nr;
        // The system-call arguments, in order.
        let mut slots =
            [&mut call.rdi, &mut call.rsi, &mut call.rdx, &mut call.r10, &mut call.r8, &mut call.r9];
        for (slot, &value) in slots.iter_mut().zip(args) {
            **slot = value;
        }
        call.rip = syscall_at;
        // Not "inside a system call": no restart logic may touch the injected one.
        call.orig_rax = u64::MAX;
        set_regs(tid, &call)?;
        let mut injection = Injection { tid, saved, syscall_at, steps: 0 };
        if let Err(e) = injection.step() {
            injection.abandon();
            return Err(e);
        }
        Ok(injection)
    }

    /// The thread the call runs in.
    pub fn tid(&self) -> Tid {
        self.tid
    }

    /// Takes the thread's report `stop`: the call's raw result (`-errno` on failure) once
    /// it ran, the registers put back; `None` while it has not (a pending interrupt or a
    /// signal stopped the step first), stepped again. A thread that exits or starts to
    /// (its `PTRACE_EVENT_EXIT` stop, where it is left) gives `ESRCH`.
    pub fn reported(&mut self, stop: Stop) -> Result<Option<i64>> {
        match stop {
            Stop::Signal(libc::SIGTRAP) => {
                let after = regs(self.tid)?;
                // A trap before the instruction ran (a pending interrupt) steps again.
                if after.rip == self.syscall_at + 2 {
                    set_regs(self.tid, &self.saved)?;
                    return Ok(Some(after.rax as i64));
                }
            }
            // Killed (SIGKILL needs no delivery): it never runs user code again.
            Stop::Event(event::EXIT, _) | Stop::Exited(_) | Stop::Killed(..) => {
                return Err(Error {
                    call: "injected system call",
                    tid: self.tid.raw(),
                    source: std::io::Error::from_raw_os_error(libc::ESRCH),
                });
            }
            Stop::Signal(_) | Stop::Event(..) => {}
        }
        self.step()?;
        Ok(None)
    }

    /// Gives up on the call of a thread that is still stopped (its wait failed for
    /// another reason): its registers as they were.
    pub fn abandon(self) {
        set_regs(self.tid, &self.saved).ok();
    }

    /// Single-steps the thread, at most [`MAX_INJECTION_STEPS`] times in all.
    fn step(&mut self) -> Result<()> {
        self.steps += 1;
        if self.steps > MAX_INJECTION_STEPS {
            set_regs(self.tid, &self.saved)?;
            return Err(Error {
                call: "injected system call",
                tid: self.tid.raw(),
                source: std::io::Error::other(format!(
                    "the instruction at {:#x} did not run a system call",
                    self.syscall_at
                )),
            });
        }
        single_step(self.tid)
    }
}

/// The error of a thread that did not report within [`STEP_TIMEOUT`] of a step.
fn no_report(tid: Tid) -> Error {
    Error {
        call: "waitpid",
        tid: tid.raw(),
        source: std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            format!("no report {} s after a single step", STEP_TIMEOUT.as_secs()),
        ),
    }
}
