//! Writes that outlive this process: a child that shares its memory (`clone(CLONE_VM)`,
//! a process of its own, not a thread) makes them, so that what was handed over is
//! written even if this process is killed the next instant.
//!
//! ```text
//!  hand_over(job) ── clone(CLONE_VM) ──▶ child: blocks every signal; O_DIRECT on;
//!    returns at once                      the data, each write; renameat2; reports its
//!  Handed::wait() ◀── 4 bytes: 0, or errno ── result on the pipe; exits
//! ```
//!
//! The child runs on a stack of its own, on memory the caller keeps unchanged until
//! [`Handed::wait`] returns (the job owns its bytes; the data it points to is the
//! caller's to keep). Having no thread-local storage of its own (it shares the calling
//! thread's), it makes raw system calls that set no `errno`, allocates nothing and takes
//! no lock. Killing this process leaves the child running, and the memory with it, until
//! it is done. Its result comes through the pipe, not its exit status: the tracer's
//! `waitpid(-1, __WALL)` may reap it before [`Handed::wait`] does.

#![allow(unsafe_code)]

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

/// Bytes the child hands the kernel in one direct write.
const CHUNK: usize = 64 << 20;

/// Stack of the child: its calls are a few frames deep.
const STACK_BYTES: usize = 64 << 10;

/// What the child writes, in order.
#[derive(Debug)]
pub struct Job {
    /// The file written.
    pub file: RawFd,
    /// `data_len` bytes at `data`, written at `data_offset` by direct I/O where the file
    /// system takes it (the caller keeps them unchanged until the job is done).
    pub data: *const u8,
    /// See `data`.
    pub data_len: usize,
    /// See `data`.
    pub data_offset: u64,
    /// Then each of these at its offset, by ordinary writes.
    pub writes: Vec<(Vec<u8>, u64)>,
    /// Last, `renameat2(dir, from, dir, to, RENAME_NOREPLACE)`.
    pub rename: (RawFd, CString, CString),
}

// SAFETY: `data` is only read, by the child, while the caller keeps it (the contract of
// `hand_over`); the rest is owned.
unsafe impl Send for Job {}

/// A job handed to its child, until the child says how it went.
#[derive(Debug)]
pub struct Handed {
    done: OwnedFd,
    pid: libc::pid_t,
    /// What the child reads and runs on: freed only once it has reported.
    _job: Box<Job>,
    _stack: Vec<u8>,
}

impl Handed {
    /// Waits for the child's report: `Ok` once everything was written and renamed.
    pub fn wait(self) -> io::Result<()> {
        let mut word = [0u8; 4];
        let mut got = 0;
        while got < word.len() {
            match nix::unistd::read(&self.done, &mut word[got..]) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(nix::errno::Errno::EINTR) => {}
                Err(e) => return Err(e.into()),
            }
        }
        // Reaped here, unless a `waitpid(-1)` of the tracer's took it already (ECHILD):
        // it ends right after its report.
        // SAFETY: waits for our own child; no status is read.
        unsafe { libc::waitpid(self.pid, std::ptr::null_mut(), libc::__WALL) };
        match (got, i32::from_ne_bytes(word)) {
            (4, 0) => Ok(()),
            (4, errno) => Err(io::Error::from_raw_os_error(errno)),
            _ => Err(io::Error::other("the detached writer ended without a report")),
        }
    }
}

/// What the child gets: the job and where it reports.
#[repr(C)]
struct ChildArgs {
    job: *const Job,
    report: RawFd,
}

/// Starts a child that carries out `job`. The bytes `job.data` points to must stay as
/// they are until [`Handed::wait`] has returned (or for good, if this process dies).
pub fn hand_over(job: Job) -> io::Result<Handed> {
    let (done, report) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
    let job = Box::new(job);
    let mut stack = vec![0u8; STACK_BYTES];
    // The arguments sit at the stack's base: the child's frames grow down from its top.
    let args = ChildArgs { job: &*job, report: report.as_raw_fd() };
    let args_at = stack.as_mut_ptr().cast::<ChildArgs>();
    // SAFETY: the buffer is larger than `ChildArgs` and `Vec<u8>` is suitably aligned for
    // it by the allocator (16 bytes).
    unsafe { args_at.write(args) };
    // SAFETY: 16-byte aligned top of the stack the child runs on.
    let top = unsafe { stack.as_mut_ptr().add(STACK_BYTES) } as usize & !15;
    // SAFETY: the child runs `child` on its own stack, reading the job and arguments the
    // returned `Handed` keeps alive; it makes only raw system calls (module note). Exit
    // signal 0: nobody is told of its end, its pipe says how it went.
    let pid = unsafe { libc::clone(child, top as *mut libc::c_void, libc::CLONE_VM, args_at.cast()) };
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    // The child has its own copy of the descriptor table: ours goes, so that its end
    // closes the pipe.
    drop(report);
    Ok(Handed { done, pid, _job: job, _stack: stack })
}

/// A system call that leaves `errno` alone: the child shares the calling thread's.
///
/// # Safety
///
/// The call's arguments must be valid for it.
#[inline(always)]
unsafe fn raw(nr: libc::c_long, args: [usize; 5]) -> isize {
    let ret: isize;
    // SAFETY: the Linux x86-64 system-call convention; the caller vouches for the call.
    unsafe {
        std::arch::asm!(
            "syscall",
            inlateout("rax") nr as isize => ret,
            in("rdi") args[0],
            in("rsi") args[1],
            in("rdx") args[2],
            in("r10") args[3],
            in("r8") args[4],
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack),
        );
    }
    ret
}

/// The child: carries out the job, reports 0 or the errno that stopped it.
extern "C" fn child(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `hand_over` placed the arguments there, alive until the report is read.
    let args = unsafe { &*arg.cast::<ChildArgs>() };
    // SAFETY: as above.
    let job = unsafe { &*args.job };
    // SAFETY: raw system calls on the job's memory (module note).
    let errno = unsafe {
        let all: u64 = u64::MAX;
        raw(libc::SYS_rt_sigprocmask, [libc::SIG_SETMASK as usize, &all as *const u64 as usize, 0, 8, 0]);
        run(job)
    };
    let word = errno.to_ne_bytes();
    // SAFETY: a write of 4 bytes from the stack to our end of the pipe.
    unsafe { raw(libc::SYS_write, [args.report as usize, word.as_ptr() as usize, 4, 0, 0]) };
    0
}

/// The job's writes; 0, or the errno of the call that failed.
///
/// # Safety
///
/// `job.data` must be readable for `job.data_len` bytes.
unsafe fn run(job: &Job) -> i32 {
    // SAFETY: the caller's contract for `data`; the job's own buffers otherwise.
    unsafe {
        let fd = job.file as usize;
        let flags = raw(libc::SYS_fcntl, [fd, libc::F_GETFL as usize, 0, 0, 0]);
        let mut direct = flags >= 0
            && raw(
                libc::SYS_fcntl,
                [fd, libc::F_SETFL as usize, flags as usize | libc::O_DIRECT as usize, 0, 0],
            ) == 0;
        let mut written = 0usize;
        while written < job.data_len {
            let n = CHUNK.min(job.data_len - written);
            let at = job.data_offset + written as u64;
            let rc = raw(libc::SYS_pwrite64, [fd, job.data.add(written) as usize, n, at as usize, 0]);
            match rc {
                n if n > 0 => written += n as usize,
                0 => return libc::EIO,
                e if -e == libc::EINTR as isize => {}
                // Alignment the device wants and we do not meet: ordinary writes.
                e if -e == libc::EINVAL as isize && direct => {
                    raw(libc::SYS_fcntl, [fd, libc::F_SETFL as usize, flags as usize, 0, 0]);
                    direct = false;
                }
                e => return -e as i32,
            }
        }
        if direct {
            raw(libc::SYS_fcntl, [fd, libc::F_SETFL as usize, flags as usize, 0, 0]);
        }
        for (bytes, offset) in &job.writes {
            let mut done = 0usize;
            while done < bytes.len() {
                let rc = raw(
                    libc::SYS_pwrite64,
                    [fd, bytes.as_ptr().add(done) as usize, bytes.len() - done, (*offset as usize) + done, 0],
                );
                match rc {
                    n if n > 0 => done += n as usize,
                    0 => return libc::EIO,
                    e if -e == libc::EINTR as isize => {}
                    e => return -e as i32,
                }
            }
        }
        let (dir, from, to) = &job.rename;
        let rc = raw(
            libc::SYS_renameat2,
            [
                *dir as usize,
                from.as_ptr() as usize,
                *dir as usize,
                to.as_ptr() as usize,
                libc::RENAME_NOREPLACE as usize,
            ],
        );
        if rc < 0 { -rc as i32 } else { 0 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::FileExt;

    fn job(dir: &std::fs::File, file: &std::fs::File, data: &[u8]) -> Job {
        Job {
            file: file.as_raw_fd(),
            data: data.as_ptr(),
            data_len: data.len(),
            data_offset: 4096,
            writes: vec![(b"record".to_vec(), 4096 + data.len() as u64), (b"head".to_vec(), 0)],
            rename: (dir.as_raw_fd(), CString::new("spare").unwrap(), CString::new("S0.raw").unwrap()),
        }
    }

    #[test]
    fn the_child_writes_everything_and_renames() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = std::fs::File::open(tmp.path()).unwrap();
        let file = std::fs::File::create(tmp.path().join("spare")).unwrap();
        let data = vec![7u8; 3 << 20];
        let handed = hand_over(job(&dir, &file, &data)).unwrap();
        handed.wait().unwrap();
        let file = std::fs::File::open(tmp.path().join("S0.raw")).unwrap();
        let mut head = [0u8; 4];
        file.read_exact_at(&mut head, 0).unwrap();
        assert_eq!(&head, b"head");
        let mut back = vec![0u8; data.len()];
        file.read_exact_at(&mut back, 4096).unwrap();
        assert_eq!(back, data);
        let mut record = [0u8; 6];
        file.read_exact_at(&mut record, 4096 + data.len() as u64).unwrap();
        assert_eq!(&record, b"record");
        assert!(!tmp.path().join("spare").exists());
    }

    #[test]
    fn a_name_taken_already_is_an_error_and_nothing_is_replaced() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = std::fs::File::open(tmp.path()).unwrap();
        let file = std::fs::File::create(tmp.path().join("spare")).unwrap();
        std::fs::write(tmp.path().join("S0.raw"), "kept").unwrap();
        let err = hand_over(job(&dir, &file, &[1u8; 4096])).unwrap().wait().unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EEXIST));
        assert_eq!(std::fs::read_to_string(tmp.path().join("S0.raw")).unwrap(), "kept");
    }

    #[test]
    fn a_bad_descriptor_is_reported() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = std::fs::File::open(tmp.path()).unwrap();
        let file = std::fs::File::create(tmp.path().join("spare")).unwrap();
        let mut bad = job(&dir, &file, &[1u8; 4096]);
        bad.file = 9999;
        let err = hand_over(bad).unwrap().wait().unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EBADF));
    }
}
