//! The kernel-module backend (`sdt run --backend kmod`): `/dev/sdt` holds the program's
//! threads with IPIs (`kmod/`); no tracer watches the program.
//!
//! ```text
//!  launch: fork, PTRACE_SEIZE, execve ─ stop at exec ─ SDT_IOC_REGISTER ─ PTRACE_DETACH
//!  breakpoint: the program's SDT_IOC_TRIGGER holds every thread; /dev/sdt turns readable;
//!              poll() reads the capture (SDT_IOC_GET) and reports the breakpoint
//!  timer:      freeze_all() = SDT_IOC_FREEZE + SDT_IOC_GET (waiting)
//!  thaw:       SDT_IOC_RELEASE with the breakpoint's result
//!  end:        SIGCHLD, waitpid(pid)
//! ```
//!
//! Registering needs the program's ptrace rights, which the seize proves to the module;
//! after the detach, the module alone stops the program. Registers, signal masks, rseq
//! and robust-list registrations and the signal dispositions come with the capture;
//! pages are read with `process_vm_readv` as under ptrace. What needs a system call
//! injected into the program (userfaultfd write tracking) is not available: changed
//! pages are found by hashing.

use std::collections::VecDeque;
use std::os::fd::{AsFd, BorrowedFd};
use std::time::{Duration, Instant};

use sdt_abi::kmod::{CAPTURE_TRIGGER, NSIG, Snapshot, Thread};
use sdt_abi::{Filter, RESULT_DECLINED};
use sdt_store::{AltStack, RobustList, Rseq, SIG_IGN, SignalAction, ThreadRunState, ThreadState};
use sdt_sys::kmod_ioctl::Device;
use sdt_sys::wait;
use sdt_sys::{Tid, ptrace};

use crate::capture::CaptureError;
use crate::freeze::{BreakpointHit, EventSource, FreezeError, Freezer, ProgramExit, Stopped, TargetEvent};
use crate::ptrace::Tracer;

/// Why the kernel module cannot capture a program.
#[derive(Debug, thiserror::Error)]
pub enum KmodError {
    /// `/dev/sdt` is missing: the module is not loaded.
    #[error(
        "the SDT kernel module is not loaded (no /dev/sdt): build and load it (make -C kmod && \
         sudo insmod kmod/sdt.ko, or kmod/install.sh), or use --backend ptrace"
    )]
    NotLoaded(#[source] sdt_sys::Error),
    /// The device could not be opened or asked.
    #[error("/dev/sdt: {0}")]
    Device(#[source] sdt_sys::Error),
    /// The module speaks another version of the interface.
    #[error(
        "the SDT kernel module speaks interface version {found}, this sdt {expected}: rebuild and reload it"
    )]
    Version {
        /// What this `sdt` speaks.
        expected: u32,
        /// What the loaded module speaks.
        found: u32,
    },
    /// The capture config does not fit the module's limits.
    #[error(transparent)]
    Filter(#[from] sdt_abi::kmod::FilterTooLarge),
    /// The module refused the registration.
    #[error("registering the program with /dev/sdt: {0}")]
    Register(#[source] sdt_sys::Error),
    /// A restored process is taken over by the ptrace backend only.
    #[error(
        "the kernel module backend captures programs that sdt run launches; a restored process is \
         captured with ptrace (use --backend ptrace, the default)"
    )]
    Restore,
    /// Write tracking needs a system call injected into the program.
    #[error(
        "--tracking uffd-wp needs a system call injected into the program, which only the ptrace \
         backend can do; use --tracking page-hash (or auto) with --backend kmod"
    )]
    Tracking,
}

/// Opens `/dev/sdt` and checks that the module speaks this interface.
pub(crate) fn open() -> Result<Device, KmodError> {
    let device = Device::open().map_err(|e| {
        if e.errno() == libc::ENOENT { KmodError::NotLoaded(e) } else { KmodError::Device(e) }
    })?;
    let version = device.version().map_err(KmodError::Device)?;
    if version.version != sdt_abi::kmod::KMOD_VERSION {
        return Err(KmodError::Version { expected: sdt_abi::kmod::KMOD_VERSION, found: version.version });
    }
    Ok(device)
}

/// Whether `/dev/sdt` is there (for `--backend auto`).
pub fn available() -> bool {
    std::path::Path::new(sdt_abi::kmod::DEVICE).exists()
}

/// What the module handed over for the capture under way.
struct Held {
    /// The capture's header.
    snap: Snapshot,
    /// Every held thread, the breaking one first.
    threads: Vec<ThreadState>,
}

/// A program captured by the kernel module.
pub(crate) struct Kmod {
    pid: Tid,
    device: Device,
    /// Buffer for `SDT_IOC_GET`'s thread records.
    records: Vec<u8>,
    /// The capture the threads are held for.
    held: Option<Held>,
    /// The program image of the last capture (`exec_id`).
    image: Option<u64>,
    /// Events found while doing something else.
    queued: VecDeque<TargetEvent>,
}

impl Kmod {
    /// Registers `pid`, which [`sdt_sys::spawn::spawn_seized`] left stopped at its exec,
    /// with the module and lets it run, untraced.
    pub(crate) fn start(pid: Tid, device: Device, filter: &Filter) -> Result<Kmod, crate::Error> {
        let encoded = sdt_abi::kmod::encode_filter(filter).map_err(KmodError::from)?;
        device.register(pid, &encoded).map_err(KmodError::Register)?;
        ptrace::detach(pid, 0)?;
        Ok(Kmod { pid, device, records: Vec::new(), held: None, image: None, queued: VecDeque::new() })
    }

    /// The capture the module has ready, if any: `Ok(None)` when none is (or the program
    /// ended, which `waitpid` reports).
    fn fetch(&mut self, wait: bool) -> Result<Option<Held>, FreezeError> {
        let snap = match self.device.get(&mut self.records, wait) {
            Ok(Some(snap)) => snap,
            Ok(None) => return Ok(None),
            Err(e) => {
                // Whatever it was, the threads must go on (or finish dying); a program
                // the module no longer lets us read gets its breakpoints switched off.
                self.device.release(RESULT_DECLINED, e.errno() == libc::EPERM).ok();
                return match e.errno() {
                    libc::ESRCH => Err(FreezeError::TargetGone(self.wait_exit()?)),
                    libc::ESTALE => {
                        self.queued.push_back(TargetEvent::Exec);
                        Err(FreezeError::Skip("the program called execve during the capture"))
                    }
                    libc::ENOMEM => {
                        log::warn!(
                            "no snapshot: the kernel module could not hold every thread (out of memory)"
                        );
                        Err(FreezeError::Skip("the kernel module ran out of memory"))
                    }
                    libc::EPERM => {
                        log::warn!(
                            "no more snapshots: the program changed credentials (a set-user-ID execve?) and the \
                             kernel module no longer lets sdt read it"
                        );
                        Err(FreezeError::Skip("the program changed credentials"))
                    }
                    _ => Err(e.into()),
                };
            }
        };
        let size = snap.thread_size as usize;
        let threads = (0..snap.nr_threads as usize)
            .map(|i| {
                let bytes = self.records.get(i * size..(i + 1) * size).unwrap_or_default();
                Thread::from_bytes(bytes).map(|(t, xstate)| thread_state(&t, xstate))
            })
            .collect::<Option<Vec<_>>>();
        let Some(threads) = threads else {
            self.device.release(RESULT_DECLINED, false).ok();
            return Err(sdt_sys::Error {
                call: "SDT_IOC_GET",
                tid: self.pid.raw(),
                source: std::io::Error::new(std::io::ErrorKind::InvalidData, "a thread record is malformed"),
            }
            .into());
        };
        if self.image.replace(snap.exec_id).is_some_and(|image| image != snap.exec_id) {
            self.queued.push_back(TargetEvent::Exec);
        }
        Ok(Some(Held { snap, threads }))
    }

    /// Waits for the program's end (it is exiting), for at most [`EXIT_TIMEOUT`].
    fn wait_exit(&mut self) -> Result<ProgramExit, sdt_sys::Error> {
        let deadline = Instant::now() + EXIT_TIMEOUT;
        loop {
            let Some((_, stop)) = wait::wait_for_until(self.pid, deadline)? else {
                return Err(sdt_sys::Error {
                    call: "waitpid",
                    tid: self.pid.raw(),
                    source: std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        format!("the exiting program did not end within {} s", EXIT_TIMEOUT.as_secs()),
                    ),
                });
            };
            if let Some(exit) = ProgramExit::from_stop(stop) {
                return Ok(exit);
            }
        }
    }
}

/// How long a program the module reports exiting may take to end.
const EXIT_TIMEOUT: Duration = Duration::from_secs(30);

/// A held thread as the store keeps it (its name is read after the thaw).
fn thread_state(t: &Thread, xstate: &[u8]) -> ThreadState {
    ThreadState {
        tid: t.tid,
        name: String::new(),
        state: ThreadRunState::Running,
        gpregs: t.gpregs_bytes(),
        fpregs: t.fpregs[..t.fpregs_size as usize].to_vec(),
        xstate: xstate.to_vec(),
        sigmask: t.sigmask,
        rseq: (t.rseq != 0).then_some(Rseq { addr: t.rseq, len: t.rseq_len, sig: t.rseq_sig }),
        robust_list: (t.robust_list != 0)
            .then_some(RobustList { head: t.robust_list, len: t.robust_list_len }),
        altstack: (t.altstack_size != 0).then_some(AltStack {
            sp: t.altstack,
            size: t.altstack_size,
            flags: t.altstack_flags,
        }),
    }
}

impl Freezer for Kmod {
    fn stops_all_at_trigger(&self) -> bool {
        true
    }

    fn freeze_all(&mut self, breaking: Option<Tid>) -> Result<Stopped, FreezeError> {
        if breaking.is_none() {
            match self.device.freeze() {
                Ok(()) => {}
                Err(e) if e.errno() == libc::EBUSY => {
                    return Err(FreezeError::Skip("a breakpoint's capture is under way"));
                }
                Err(e) if e.errno() == libc::ESRCH => return Err(FreezeError::TargetGone(self.wait_exit()?)),
                Err(e) => return Err(e.into()),
            }
            self.held = self.fetch(true)?;
            if self.held.is_none() {
                return Err(FreezeError::Skip("the kernel module had no capture to hand over"));
            }
        }
        let held = self.held.as_ref().expect("a breakpoint comes with its capture");
        let live_thread = breaking.or_else(|| held.threads.first().and_then(|t| Tid::new(t.tid)));
        Ok(Stopped { all_stopped_ns: held.snap.held_ns, live_thread })
    }

    fn read_threads(&mut self, _breaking: Option<Tid>) -> Result<Vec<ThreadState>, FreezeError> {
        Ok(self.held.as_ref().map(|h| h.threads.clone()).unwrap_or_default())
    }

    /// The module releases a capture's threads together: all stay held until `thaw`.
    fn resume_others(&mut self, _held: Tid) -> Result<(), FreezeError> {
        Ok(())
    }

    fn thaw(&mut self, breakpoint: Option<(&BreakpointHit, i64)>, turn_off: bool) -> Result<(), FreezeError> {
        if self.held.take().is_none() {
            return Ok(());
        }
        let result = breakpoint.map_or(RESULT_DECLINED, |(_, result)| result);
        match self.device.release(result, turn_off) {
            // Nothing held: the device was closed, or the capture already let go.
            Err(e) if e.errno() == libc::EINVAL => Ok(()),
            other => Ok(other?),
        }
    }
}

impl EventSource for Kmod {
    fn poll(&mut self) -> Result<Option<TargetEvent>, sdt_sys::Error> {
        if let Some(event) = self.queued.pop_front() {
            return Ok(Some(event));
        }
        if self.held.is_none() {
            match self.fetch(false) {
                Ok(Some(held)) => {
                    match Tid::new(held.snap.trigger_tid).filter(|_| held.snap.kind == CAPTURE_TRIGGER) {
                        Some(tid) => {
                            let hit = BreakpointHit::read(tid, held.snap.record, held.snap.record_addr);
                            self.held = Some(held);
                            self.queued.push_back(TargetEvent::Breakpoint(hit));
                            return Ok(self.queued.pop_front());
                        }
                        // A freeze nobody waits for, or a breakpoint whose thread is not in
                        // our namespace: let it go.
                        None => self.device.release(RESULT_DECLINED, false)?,
                    }
                }
                Ok(None) => {}
                Err(FreezeError::TargetGone(exit)) => return Ok(Some(TargetEvent::Exited(exit))),
                Err(FreezeError::Skip(why)) => log::debug!("no snapshot: {why}"),
                Err(FreezeError::Sys(e)) => return Err(e),
            }
            if let Some(event) = self.queued.pop_front() {
                return Ok(Some(event));
            }
        }
        Ok(wait::poll_for(self.pid)?
            .and_then(|(_, stop)| ProgramExit::from_stop(stop))
            .map(TargetEvent::Exited))
    }

    fn wake_fd(&self) -> Option<BorrowedFd<'_>> {
        Some(self.device.as_fd())
    }

    fn signal(&self, signal: i32) -> Result<(), sdt_sys::Error> {
        sdt_sys::kill_process(self.pid, signal)
    }

    fn injector(&mut self) -> Option<&mut Tracer> {
        None
    }

    /// The module registers a program for its whole life.
    fn let_go(&mut self) -> Result<(), FreezeError> {
        Err(FreezeError::Skip("the kernel module holds a program until it ends"))
    }

    fn signal_actions(&self, caught: u64, ignored: u64) -> Option<Result<Vec<SignalAction>, CaptureError>> {
        let snap = &self.held.as_ref()?.snap;
        if snap.nr_actions as usize != NSIG {
            return Some(Err(CaptureError::SignalHandlersUnread("the kernel module did not read them")));
        }
        let mut actions = Vec::new();
        for signo in 1..=NSIG as i32 {
            let bit = 1u64 << (signo - 1);
            if ignored & bit != 0 {
                actions.push(SignalAction { signo, handler: SIG_IGN, flags: 0, restorer: 0, mask: 0 });
            }
            if caught & bit != 0 {
                let a = &snap.actions[signo as usize - 1];
                actions.push(SignalAction {
                    signo,
                    handler: a.handler,
                    flags: a.flags,
                    restorer: a.restorer,
                    mask: a.mask,
                });
            }
        }
        Some(Ok(actions))
    }
}
