//! Descriptors of another process, and the objects a restore makes again: copies taken
//! through a pidfd, the bytes in a pipe read without taking them, and pipes, eventfds,
//! epoll instances, timerfds, signalfds and deleted files (as memfds) made with a given
//! state.
//!
//! # Safety
//!
//! Each call passes descriptors it owns or borrows and buffers whose length it passes
//! with them; a descriptor the kernel returns is owned at once.

#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

use crate::{Error, Result, Tid};

/// `pidfd_open(pid, 0)`: a file descriptor for a process (`pid` its first thread).
pub fn pidfd_open(pid: Tid) -> Result<OwnedFd> {
    open_pidfd(pid, 0)
}

/// `PIDFD_THREAD` of `uapi/linux/pidfd.h`.
const PIDFD_THREAD: libc::c_uint = libc::O_EXCL as libc::c_uint;

/// `pidfd_open(tid, PIDFD_THREAD)`: a file descriptor for one thread, any of its process's
/// (Linux 6.9; `EINVAL` before, for any thread but the first).
pub fn pidfd_open_thread(tid: Tid) -> Result<OwnedFd> {
    open_pidfd(tid, PIDFD_THREAD)
}

fn open_pidfd(pid: Tid, flags: libc::c_uint) -> Result<OwnedFd> {
    // SAFETY: no pointers; the result is a new descriptor we own.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid.raw(), flags) };
    if fd < 0 {
        return Err(Error::last("pidfd_open", pid.raw()));
    }
    // SAFETY: the kernel returned a fresh descriptor.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// `pidfd_getfd(pidfd, targetfd, 0)`: a copy of another process's descriptor (needs
/// ptrace access to it).
pub fn pidfd_getfd(pidfd: &OwnedFd, pid: Tid, target_fd: i32) -> Result<OwnedFd> {
    // SAFETY: no pointers; the result is a new descriptor we own.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), target_fd, 0) };
    if fd < 0 {
        return Err(Error::last("pidfd_getfd", pid.raw()));
    }
    // SAFETY: the kernel returned a fresh descriptor.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// `Ok(n)` for a non-negative result, the `errno` as an error otherwise.
fn check(rc: libc::c_long) -> io::Result<usize> {
    if rc < 0 { Err(io::Error::last_os_error()) } else { Ok(rc as usize) }
}

/// The capacity of the pipe `fd` reads or writes (`F_GETPIPE_SZ`).
fn pipe_capacity(fd: BorrowedFd<'_>) -> io::Result<u32> {
    // SAFETY: no pointers.
    check(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETPIPE_SZ) }.into()).map(|n| n as u32)
}

/// A pipe of ours (`O_CLOEXEC | O_NONBLOCK`) that holds at least `capacity` bytes:
/// (read end, write end).
fn new_pipe(capacity: u32) -> io::Result<(OwnedFd, OwnedFd)> {
    let mut ends = [0 as RawFd; 2];
    // SAFETY: `ends` has room for the two descriptors pipe2 writes.
    check(unsafe { libc::pipe2(ends.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) }.into())?;
    // SAFETY: the kernel returned two fresh descriptors.
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(ends[0]), OwnedFd::from_raw_fd(ends[1])) };
    if pipe_capacity(write.as_fd())? < capacity {
        // SAFETY: no pointers.
        check(unsafe { libc::fcntl(write.as_raw_fd(), libc::F_SETPIPE_SZ, capacity as libc::c_int) }.into())?;
    }
    Ok((read, write))
}

/// The capacity of the pipe whose read end `fd` is, and the bytes in it, which stay there:
/// `tee(2)` copies them into a pipe of ours, from which they are read.
pub fn peek_pipe(fd: BorrowedFd<'_>) -> io::Result<(u32, Vec<u8>)> {
    let capacity = pipe_capacity(fd)?;
    let (read, write) = new_pipe(capacity)?;
    // SAFETY: no pointers; both are pipes.
    let copied =
        unsafe { libc::tee(fd.as_raw_fd(), write.as_raw_fd(), capacity as usize, libc::SPLICE_F_NONBLOCK) };
    let copied = match check(copied as libc::c_long) {
        Ok(n) => n,
        Err(e) if e.raw_os_error() == Some(libc::EAGAIN) => 0, // empty
        Err(e) => return Err(e),
    };
    let mut data = vec![0u8; copied];
    let mut got = 0;
    while got < copied {
        // SAFETY: the buffer has `copied - got` bytes of room past `got`.
        let rc = unsafe { libc::read(read.as_raw_fd(), data[got..].as_mut_ptr().cast(), copied - got) };
        got += check(rc as libc::c_long)?;
    }
    Ok((capacity, data))
}

/// What [`pipe_holding`] makes a pipe hold at most, unless its data needs more: Linux's
/// default `pipe-max-size` (a recorded capacity comes from a store, which may lie).
const PIPE_CAPACITY_MAX: u32 = 1 << 20;

/// A pipe of ours (`O_CLOEXEC`, blocking) of at least `capacity` bytes (at most 1 MiB)
/// that holds `data`: (read end, write end). An error, not a wait, if `data` does not fit.
pub fn pipe_holding(capacity: u32, data: &[u8]) -> io::Result<(OwnedFd, OwnedFd)> {
    let capacity = capacity.min(PIPE_CAPACITY_MAX).max(u32::try_from(data.len()).unwrap_or(u32::MAX));
    let (read, write) = new_pipe(capacity)?;
    let mut put = 0;
    while put < data.len() {
        // SAFETY: `data[put..]` is valid for its length.
        let rc = unsafe { libc::write(write.as_raw_fd(), data[put..].as_ptr().cast(), data.len() - put) };
        put += check(rc as libc::c_long)?;
    }
    for end in [&read, &write] {
        set_nonblocking(end.as_fd(), false)?;
    }
    Ok((read, write))
}

/// A memfd of ours (`MFD_CLOEXEC`) named `name` (made safe: no NUL, at most 200 bytes)
/// of `size` bytes that holds `parts` (`(offset, bytes)`), holes elsewhere: a deleted
/// file made again.
pub fn memfd_holding(name: &str, size: u64, parts: &[(u64, &[u8])]) -> io::Result<OwnedFd> {
    let name: String = name.chars().filter(|&c| c != '\0').take(200).collect();
    let name = std::ffi::CString::new(name).expect("NUL bytes were left out");
    // SAFETY: `name` is a NUL-terminated string that outlives the call.
    let fd = check(unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC) }.into())?;
    // SAFETY: the kernel returned a fresh descriptor.
    let file = std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd as RawFd) });
    file.set_len(size)?;
    for &(offset, data) in parts {
        std::os::unix::fs::FileExt::write_all_at(&file, data, offset)?;
    }
    Ok(file.into())
}

/// A new open file (`O_CLOEXEC`) of what `fd` is, opened again through
/// `/proc/self/fd`, with the access mode, `O_APPEND` and `O_NONBLOCK` of `flags`, at
/// offset `pos`.
pub fn reopen_at(fd: BorrowedFd<'_>, flags: u32, pos: u64) -> io::Result<OwnedFd> {
    use std::io::Seek;
    use std::os::unix::fs::OpenOptionsExt;
    let flags = flags as i32;
    let mut options = std::fs::OpenOptions::new();
    match flags & libc::O_ACCMODE {
        libc::O_RDONLY => options.read(true),
        libc::O_WRONLY => options.write(true),
        _ => options.read(true).write(true),
    };
    options.custom_flags(flags & (libc::O_APPEND | libc::O_NONBLOCK) | libc::O_CLOEXEC);
    let mut file = options.open(format!("/proc/self/fd/{}", fd.as_raw_fd()))?;
    file.seek(io::SeekFrom::Start(pos))?;
    Ok(file.into())
}

/// An eventfd of ours (`EFD_CLOEXEC`, blocking) whose counter is `count`.
pub fn eventfd_with(count: u64, semaphore: bool) -> io::Result<OwnedFd> {
    let flags = libc::EFD_CLOEXEC | if semaphore { libc::EFD_SEMAPHORE } else { 0 };
    // SAFETY: no pointers.
    let fd = check(unsafe { libc::eventfd(0, flags) }.into())?;
    // SAFETY: the kernel returned a fresh descriptor.
    let fd = unsafe { OwnedFd::from_raw_fd(fd as RawFd) };
    if count > 0 {
        // A counter starts at 0: adding `count` (at most 2^64 - 2) does not wait.
        // SAFETY: the 8 bytes of `count`.
        let rc = unsafe { libc::write(fd.as_raw_fd(), (&raw const count).cast(), 8) };
        check(rc as libc::c_long)?;
    }
    Ok(fd)
}

/// A new epoll instance of ours (`EPOLL_CLOEXEC`), watching nothing.
pub fn epoll_new() -> io::Result<OwnedFd> {
    // SAFETY: no pointers.
    let fd = check(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) }.into())?;
    // SAFETY: the kernel returned a fresh descriptor.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// `TFD_IOC_SET_TICKS` (`_IOW('T', 0, u64)`): sets a timerfd's unread expirations.
const TFD_IOC_SET_TICKS: libc::c_ulong = 0x4008_5400;

/// `ns` nanoseconds as a `timespec`.
fn timespec(ns: u64) -> libc::timespec {
    libc::timespec {
        tv_sec: (ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (ns % 1_000_000_000) as libc::c_long,
    }
}

/// A timerfd of ours (`TFD_CLOEXEC`) on `clockid`, next expiring in `value_ns` (never, if
/// 0) and then every `interval_ns`, with `ticks` expirations unread.
pub fn timerfd_with(clockid: i32, ticks: u64, value_ns: u64, interval_ns: u64) -> io::Result<OwnedFd> {
    // SAFETY: no pointers.
    let fd = check(unsafe { libc::timerfd_create(clockid, libc::TFD_CLOEXEC) }.into())?;
    // SAFETY: the kernel returned a fresh descriptor.
    let fd = unsafe { OwnedFd::from_raw_fd(fd as RawFd) };
    let timer = libc::itimerspec { it_interval: timespec(interval_ns), it_value: timespec(value_ns) };
    // SAFETY: `timer` is a valid itimerspec; no old value is asked for.
    check(unsafe { libc::timerfd_settime(fd.as_raw_fd(), 0, &timer, std::ptr::null_mut()) }.into())?;
    if ticks > 0 {
        // SAFETY: the ioctl reads the 8 bytes of `ticks`.
        check(unsafe { libc::ioctl(fd.as_raw_fd(), TFD_IOC_SET_TICKS, &raw const ticks) }.into())?;
    }
    Ok(fd)
}

/// A signalfd of ours (`SFD_CLOEXEC`) reading the signals of `mask` (bit `n-1` for
/// signal `n`).
pub fn signalfd_with(mask: u64) -> io::Result<OwnedFd> {
    // The kernel's sigset is 8 bytes; glibc's sigset_t is larger, and the call passes 8.
    // SAFETY: `mask` is 8 readable bytes, the size passed.
    let fd = unsafe { libc::syscall(libc::SYS_signalfd4, -1, &raw const mask, 8usize, libc::SFD_CLOEXEC) };
    let fd = check(fd)?;
    // SAFETY: the kernel returned a fresh descriptor.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// Sets or clears `O_NONBLOCK` on the open file `fd` refers to.
pub fn set_nonblocking(fd: BorrowedFd<'_>, nonblocking: bool) -> io::Result<()> {
    // SAFETY: no pointers.
    let flags = check(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) }.into())? as libc::c_int;
    let flags = if nonblocking { flags | libc::O_NONBLOCK } else { flags & !libc::O_NONBLOCK };
    // SAFETY: no pointers.
    check(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, flags) }.into()).map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_peeked_pipe_keeps_its_bytes() {
        let (read, write) = pipe_holding(1 << 16, b"wake").unwrap();
        assert_eq!(peek_pipe(read.as_fd()).unwrap(), (1 << 16, b"wake".to_vec()));
        assert!(peek_pipe(write.as_fd()).is_err(), "tee reads from a read end only");
        let mut buf = [0u8; 8];
        // SAFETY: `buf` has room for 8 bytes.
        let n = unsafe { libc::read(read.as_raw_fd(), buf.as_mut_ptr().cast(), 8) };
        assert_eq!(&buf[..n as usize], b"wake");
        set_nonblocking(read.as_fd(), true).unwrap();
        assert_eq!(peek_pipe(read.as_fd()).unwrap().1, b"");
    }

    #[test]
    fn a_pipe_holds_more_than_its_default_capacity() {
        let data = vec![7u8; 200_000];
        let (read, _write) = pipe_holding(0, &data).unwrap();
        let (capacity, got) = peek_pipe(read.as_fd()).unwrap();
        assert!(capacity >= 200_000 && got == data, "{capacity}");
    }

    #[test]
    fn an_eventfd_starts_at_its_count() {
        let fd = eventfd_with(5, true).unwrap();
        let mut v = 0u64;
        // SAFETY: 8 bytes into `v`.
        assert_eq!(unsafe { libc::read(fd.as_raw_fd(), (&raw mut v).cast(), 8) }, 8);
        assert_eq!(v, 1, "a semaphore gives one at a time");
    }

    #[test]
    fn a_timerfd_keeps_its_timer_and_ticks() {
        let fd = timerfd_with(libc::CLOCK_MONOTONIC, 2, 3_600_000_000_000, 60_000_000_000).unwrap();
        let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{}", fd.as_raw_fd())).unwrap();
        assert!(info.contains("ticks: 2\n") && info.contains("it_interval: (60, 0)"), "{info}");
        assert!(info.contains("it_value: (3599,"), "{info}");
        let fd = signalfd_with(1 << 9).unwrap();
        let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{}", fd.as_raw_fd())).unwrap();
        assert!(info.contains("sigmask:\t0000000000000200"), "{info}");
    }
}
