//! What a thread was doing when a snapshot stopped it, read from its registers: at the
//! breakpoint, running its own code, asleep in a system call (which resumes when the
//! thread does), or on its way out.
//!
//! A thread the freeze interrupted in user code has `orig_rax` = -1. One interrupted
//! inside a blocking system call has the call's number in `orig_rax` and, in `rax`, minus
//! one of the kernel's restart codes: resumed, it makes the call again.

use std::fmt;

use sdt_store::{ThreadRunState, ThreadState};

use crate::{ERESTART_RESTARTBLOCK, ERESTARTNOHAND, ERESTARTNOINTR, ERESTARTSYS};

/// What a thread was doing when the snapshot stopped it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Activity {
    /// The thread whose breakpoint took the snapshot.
    AtBreakpoint,
    /// In its own code (or stopped where it cannot be told apart from it).
    Running,
    /// Asleep in system call `nr`, which it makes again when resumed.
    Waiting {
        /// The system call's number (x86_64).
        nr: u64,
    },
    /// Just back from system call `nr`, whose result is in `rax`.
    Returning {
        /// The system call's number (x86_64).
        nr: u64,
    },
    /// Already in `exit`.
    Exiting,
}

impl Activity {
    /// What `thread` was doing; `breaking` if its breakpoint took the snapshot.
    pub fn of(thread: &ThreadState, breaking: bool) -> Activity {
        if breaking {
            return Activity::AtBreakpoint;
        }
        if thread.state == ThreadRunState::Exiting {
            return Activity::Exiting;
        }
        let Ok(regs) = thread.regs() else { return Activity::Running };
        if regs.orig_rax as i64 == -1 {
            return Activity::Running;
        }
        let nr = regs.orig_rax;
        match -(regs.rax as i64) {
            ERESTARTSYS | ERESTARTNOINTR | ERESTARTNOHAND | ERESTART_RESTARTBLOCK => Activity::Waiting { nr },
            _ => Activity::Returning { nr },
        }
    }
}

impl fmt::Display for Activity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Activity::AtBreakpoint => f.write_str("at the breakpoint"),
            Activity::Running => f.write_str("running"),
            Activity::Waiting { nr } => write!(f, "waiting in {}", SyscallName(nr)),
            Activity::Returning { nr } => write!(f, "back from {}", SyscallName(nr)),
            Activity::Exiting => f.write_str("exiting"),
        }
    }
}

/// A system call by name where [`SYSCALLS`] knows it, else by number.
struct SyscallName(u64);

impl fmt::Display for SyscallName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match syscall_name(self.0) {
            Some(name) => f.write_str(name),
            None => write!(f, "system call {}", self.0),
        }
    }
}

/// The x86_64 system calls a thread is commonly found asleep in (or, new, just back
/// from: `clone`, `clone3`), by number
/// (`asm/unistd_64.h`, checked by a test).
pub const SYSCALLS: [(u64, &str); 40] = [
    (0, "read"),
    (1, "write"),
    (3, "close"),
    (7, "poll"),
    (16, "ioctl"),
    (17, "pread64"),
    (18, "pwrite64"),
    (19, "readv"),
    (20, "writev"),
    (23, "select"),
    (24, "sched_yield"),
    (34, "pause"),
    (35, "nanosleep"),
    (42, "connect"),
    (43, "accept"),
    (44, "sendto"),
    (45, "recvfrom"),
    (46, "sendmsg"),
    (47, "recvmsg"),
    (56, "clone"),
    (61, "wait4"),
    (70, "msgrcv"),
    (73, "flock"),
    (74, "fsync"),
    (128, "rt_sigtimedwait"),
    (130, "rt_sigsuspend"),
    (202, "futex"),
    (208, "io_getevents"),
    (220, "semtimedop"),
    (230, "clock_nanosleep"),
    (232, "epoll_wait"),
    (247, "waitid"),
    (257, "openat"),
    (270, "pselect6"),
    (271, "ppoll"),
    (281, "epoll_pwait"),
    (288, "accept4"),
    (435, "clone3"),
    (441, "epoll_pwait2"),
    (449, "futex_waitv"),
];

/// The name of x86_64 system call `nr`, if [`SYSCALLS`] has it.
pub fn syscall_name(nr: u64) -> Option<&'static str> {
    SYSCALLS.iter().find(|&&(n, _)| n == nr).map(|&(_, name)| name)
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::process::{Command, Stdio};

    use sdt_abi::regs::UserRegs;

    use super::*;
    use crate::test_threads::thread_with;

    fn thread(orig_rax: i64, rax: i64, state: ThreadRunState) -> ThreadState {
        let regs = UserRegs { orig_rax: orig_rax as u64, rax: rax as u64, ..bytemuck::Zeroable::zeroed() };
        thread_with(1, regs, state)
    }

    #[test]
    fn states_read_from_the_registers() {
        let said = |orig_rax, rax, state, breaking| {
            Activity::of(&thread(orig_rax, rax, state), breaking).to_string()
        };
        assert_eq!(said(-1, 0, ThreadRunState::Running, true), "at the breakpoint");
        assert_eq!(said(-1, 5, ThreadRunState::Running, false), "running");
        assert_eq!(said(202, -ERESTARTSYS, ThreadRunState::Running, false), "waiting in futex");
        assert_eq!(
            said(230, -ERESTART_RESTARTBLOCK, ThreadRunState::Running, false),
            "waiting in clock_nanosleep"
        );
        assert_eq!(said(0, 12, ThreadRunState::Running, false), "back from read");
        assert_eq!(said(999, -ERESTARTNOHAND, ThreadRunState::Running, false), "waiting in system call 999");
        assert_eq!(said(202, -ERESTARTSYS, ThreadRunState::Exiting, false), "exiting");
        let short = ThreadState { gpregs: vec![0; 8], ..thread(202, -ERESTARTSYS, ThreadRunState::Running) };
        assert_eq!(Activity::of(&short, false), Activity::Running);
    }

    #[test]
    fn syscall_numbers_match_the_kernel_header() {
        let mut source = String::from("#include <stdio.h>\n#include <asm/unistd_64.h>\nint main(void) {\n");
        for (_, name) in SYSCALLS {
            source.push_str(&format!("printf(\"%d\\n\", __NR_{name});\n"));
        }
        source.push_str("return 0;\n}\n");
        let dir = std::env::temp_dir().join(format!("sdt-syscalls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let exe = dir.join("numbers");
        let mut gcc = Command::new("gcc")
            .args(["-x", "c", "-", "-o"])
            .arg(&exe)
            .stdin(Stdio::piped())
            .spawn()
            .expect("running gcc (the tests need it)");
        gcc.stdin.take().unwrap().write_all(source.as_bytes()).unwrap();
        assert!(gcc.wait().unwrap().success(), "gcc failed on:\n{source}");
        let out = Command::new(&exe).output().unwrap();
        std::fs::remove_dir_all(&dir).ok();
        let numbers: Vec<u64> =
            String::from_utf8(out.stdout).unwrap().lines().map(|l| l.parse().unwrap()).collect();
        let ours: Vec<u64> = SYSCALLS.iter().map(|&(n, _)| n).collect();
        assert_eq!(numbers, ours);
    }
}
