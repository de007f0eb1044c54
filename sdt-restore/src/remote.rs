//! System calls made inside the process being restored: its threads are stopped under
//! ptrace, and each call is an injected `syscall` instruction (see
//! [`sdt_sys::ptrace::inject_syscall`]). Arguments that are memory (paths, structs) are
//! written first into a scratch area of the process, which the restore maps where the
//! snapshot has nothing and unmaps at the end.

use sdt_sys::Tid;
use sdt_sys::memory;
use sdt_sys::ptrace::{self, event};
use sdt_sys::wait::Stop;

use crate::Error;

/// Size of the scratch area: a `syscall` instruction, then room for a path and the
/// largest struct a call takes.
pub(crate) const SCRATCH_LEN: u64 = 3 * 4096;
/// Where arguments start inside the scratch area.
const ARGS_OFFSET: u64 = 64;
/// Bytes of arguments the scratch area holds.
pub(crate) const ARGS_ROOM: u64 = SCRATCH_LEN - ARGS_OFFSET;

/// A process whose threads are all stopped, and the way to make system calls in it.
pub(crate) struct Remote {
    /// The thread that makes the calls.
    pub leader: Tid,
    /// A `syscall` instruction (`0f 05`) in the process.
    syscall_at: u64,
    /// Start of the scratch area, once mapped.
    scratch: Option<u64>,
    /// Threads created by injected `clone3` calls, as the clone events named them.
    pub cloned: Vec<Tid>,
}

impl Remote {
    /// Calls go through `leader`, using the `syscall` instruction at `syscall_at`.
    pub(crate) fn new(leader: Tid, syscall_at: u64) -> Remote {
        Remote { leader, syscall_at, scratch: None, cloned: Vec::new() }
    }

    /// Makes later calls use the `syscall` instruction at `at`.
    pub(crate) fn use_syscall_at(&mut self, at: u64) {
        self.syscall_at = at;
    }

    /// The scratch area has been mapped at `at`: its first bytes become a `syscall`
    /// instruction (followed by `int3`), which later calls use.
    pub(crate) fn set_scratch(&mut self, at: u64) -> Result<(), Error> {
        memory::write(self.leader, at, &[0x0f, 0x05, 0xcc]).map_err(Error::Sys)?;
        self.scratch = Some(at);
        self.syscall_at = at;
        Ok(())
    }

    /// The scratch area is gone.
    pub(crate) fn drop_scratch(&mut self) {
        self.scratch = None;
    }

    /// Runs system call `nr` on thread `tid` of the process; returns the raw result.
    pub(crate) fn raw_on(&mut self, tid: Tid, nr: i64, args: &[u64]) -> Result<i64, Error> {
        let cloned = &mut self.cloned;
        let mut failed = None;
        let rc = ptrace::inject_syscall(tid, self.syscall_at, nr as u64, args, |stop| {
            if let Stop::Event(event::CLONE, _) = stop {
                match ptrace::event_message(tid) {
                    Ok(child) => cloned.extend(Tid::new(child as i32)),
                    Err(e) => failed = Some(e),
                }
            }
            // Signals are blocked in the new process, and it is not anyone's to signal
            // yet: other stops are dropped.
        })
        .map_err(Error::Sys)?;
        match failed {
            Some(e) => Err(Error::Sys(e)),
            None => Ok(rc),
        }
    }

    /// Runs system call `nr` on thread `tid`; a failure is an error saying `what` was
    /// being done.
    pub(crate) fn call_on(&mut self, tid: Tid, what: &str, nr: i64, args: &[u64]) -> Result<u64, Error> {
        let rc = self.raw_on(tid, nr, args)?;
        if rc < 0 && rc > -4096 {
            return Err(Error::Call {
                what: what.to_owned(),
                source: std::io::Error::from_raw_os_error(-rc as i32),
            });
        }
        Ok(rc as u64)
    }

    /// [`Remote::call_on`] the leader.
    pub(crate) fn call(&mut self, what: &str, nr: i64, args: &[u64]) -> Result<u64, Error> {
        self.call_on(self.leader, what, nr, args)
    }

    /// Writes `bytes` into the scratch area at argument slot `offset` and returns their
    /// address in the process.
    pub(crate) fn put(&self, offset: u64, bytes: &[u8]) -> Result<u64, Error> {
        let scratch = self.scratch.expect("the scratch area is mapped before arguments are written");
        assert!(
            ARGS_OFFSET + offset + bytes.len() as u64 <= SCRATCH_LEN,
            "{} bytes at {offset} overflow the scratch area",
            bytes.len()
        );
        let at = scratch + ARGS_OFFSET + offset;
        memory::write(self.leader, at, bytes).map_err(Error::Sys)?;
        Ok(at)
    }

    /// Writes a NUL-terminated path into the scratch area.
    pub(crate) fn put_path(&self, path: &str) -> Result<u64, Error> {
        let mut bytes = path.as_bytes().to_vec();
        bytes.push(0);
        if bytes.len() as u64 > SCRATCH_LEN - ARGS_OFFSET - 1024 {
            return Err(Error::Unsupported {
                what: format!("a path longer than the restore handles: {path}"),
            });
        }
        self.put(1024, &bytes)
    }
}
