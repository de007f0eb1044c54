//! Reading and writing another process's memory.
//!
//! # Safety
//!
//! `process_vm_readv`/`writev` are given local iovecs that lie inside the slices passed
//! in; remote addresses are the target's and cannot harm this process. `kcmp` compares
//! two processes' address spaces by identity and touches no memory.

#![allow(unsafe_code)]

use crate::{Error, Result, Tid};

const PAGE: usize = 4096;
/// Most iovecs one `process_vm_readv` takes (`IOV_MAX`).
const IOV_MAX: usize = 1024;

/// Whether threads `a` and `b` share one address space (`kcmp(KCMP_VM)`): threads of one
/// process do, as do a `vfork` child and its parent until the child execs.
#[doc(alias = "kcmp")]
pub fn same_address_space(a: Tid, b: Tid) -> Result<bool> {
    /// `KCMP_VM` of `enum kcmp_type`.
    const KCMP_VM: libc::c_long = 1;
    let (a_raw, b_raw) = (libc::c_long::from(a.raw()), libc::c_long::from(b.raw()));
    // SAFETY: kcmp takes two pids, a type and two unused indices; it reads and writes no
    // memory of this process.
    let order =
        unsafe { libc::syscall(libc::SYS_kcmp, a_raw, b_raw, KCMP_VM, 0 as libc::c_long, 0 as libc::c_long) };
    if order < 0 { Err(Error::last("kcmp", a.raw())) } else { Ok(order == 0) }
}

/// A range of the target's address space.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RemoteRange {
    /// First address.
    pub addr: u64,
    /// Length in bytes.
    pub len: usize,
}

/// `process_vm_readv(pid, …)` over many ranges: reads `ranges`, in order, into `dst` back
/// to back (`dst` must hold their total length), in as few calls as `IOV_MAX` allows.
///
/// A page that cannot be read (the kernel refuses it) is zero-filled and its address
/// returned, so one odd page does not cost the rest. Fails only if the process is gone or
/// the call itself is refused.
#[doc(alias = "process_vm_readv")]
pub fn read_ranges(pid: Tid, ranges: &[RemoteRange], dst: &mut [u8]) -> Result<Vec<u64>> {
    let total: usize = ranges.iter().map(|r| r.len).sum();
    assert!(dst.len() >= total, "read_ranges: destination of {} bytes for {total}", dst.len());
    let mut failed = Vec::new();
    let (mut i, mut pos) = (0, 0);
    while i < ranges.len() {
        let batch = &ranges[i..ranges.len().min(i + IOV_MAX)];
        let want: usize = batch.iter().map(|r| r.len).sum();
        let got = match readv(pid, batch, &mut dst[pos..pos + want]) {
            Ok(n) => n,
            Err(e) if e.errno() == libc::EFAULT || e.errno() == libc::EIO => 0,
            Err(e) => return Err(e),
        };
        // Transfers stop at an iovec boundary: whole ranges were read up to `got`.
        let mut done = 0;
        while i < ranges.len() && done + ranges[i].len <= got {
            done += ranges[i].len;
            i += 1;
        }
        pos += done;
        if got < want {
            // ranges[i] failed somewhere: read it page by page.
            let range = ranges[i];
            read_by_page(pid, range, &mut dst[pos..pos + range.len], &mut failed)?;
            pos += range.len;
            i += 1;
        }
    }
    Ok(failed)
}

/// `ranges` cut into pieces of `piece` bytes (a multiple of the page size), in order; the
/// last piece may be shorter.
pub fn split_ranges(ranges: &[RemoteRange], piece: usize) -> Vec<Vec<RemoteRange>> {
    let mut pieces: Vec<Vec<RemoteRange>> = vec![Vec::new()];
    let mut filled = 0;
    for &range in ranges {
        let mut rest = range;
        while rest.len > 0 {
            if filled == piece {
                pieces.push(Vec::new());
                filled = 0;
            }
            let take = rest.len.min(piece - filled);
            pieces.last_mut().unwrap().push(RemoteRange { addr: rest.addr, len: take });
            filled += take;
            rest = RemoteRange { addr: rest.addr + take as u64, len: rest.len - take };
        }
    }
    pieces
}

fn read_by_page(pid: Tid, range: RemoteRange, dst: &mut [u8], failed: &mut Vec<u64>) -> Result<()> {
    for (k, chunk) in dst.chunks_mut(PAGE).enumerate() {
        let addr = range.addr + (k * PAGE) as u64;
        let page = RemoteRange { addr, len: chunk.len() };
        match readv(pid, &[page], chunk) {
            Ok(n) if n == chunk.len() => {}
            Ok(_) => {
                chunk.fill(0);
                failed.push(addr);
            }
            Err(e) if e.errno() == libc::EFAULT || e.errno() == libc::EIO => {
                chunk.fill(0);
                failed.push(addr);
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

fn readv(pid: Tid, remote: &[RemoteRange], dst: &mut [u8]) -> Result<usize> {
    let local = libc::iovec { iov_base: dst.as_mut_ptr().cast(), iov_len: dst.len() };
    let remote: Vec<libc::iovec> = remote
        .iter()
        .map(|r| libc::iovec { iov_base: r.addr as *mut libc::c_void, iov_len: r.len })
        .collect();
    // SAFETY: `local` covers exactly `dst`; see the module's safety note.
    let n = unsafe { libc::process_vm_readv(pid.raw(), &local, 1, remote.as_ptr(), remote.len() as u64, 0) };
    if n < 0 { Err(Error::last("process_vm_readv", pid.raw())) } else { Ok(n as usize) }
}

/// `process_vm_readv(pid, …)` of one range: exactly `dst.len()` bytes at `addr`, or an
/// error.
#[doc(alias = "process_vm_readv")]
pub fn read_exact(pid: Tid, addr: u64, dst: &mut [u8]) -> Result<()> {
    let n = readv(pid, &[RemoteRange { addr, len: dst.len() }], dst)?;
    if n == dst.len() {
        Ok(())
    } else {
        Err(Error {
            call: "process_vm_readv",
            tid: pid.raw(),
            source: std::io::ErrorKind::UnexpectedEof.into(),
        })
    }
}

/// `process_vm_writev(pid, …)`: writes `data` at `addr` in the target.
#[doc(alias = "process_vm_writev")]
pub fn write(pid: Tid, addr: u64, data: &[u8]) -> Result<()> {
    let local = libc::iovec { iov_base: data.as_ptr() as *mut libc::c_void, iov_len: data.len() };
    let remote = libc::iovec { iov_base: addr as *mut libc::c_void, iov_len: data.len() };
    // SAFETY: `local` covers exactly `data`, which the kernel only reads.
    let n = unsafe { libc::process_vm_writev(pid.raw(), &local, 1, &remote, 1, 0) };
    if n < 0 {
        Err(Error::last("process_vm_writev", pid.raw()))
    } else if n as usize != data.len() {
        Err(Error { call: "process_vm_writev", tid: pid.raw(), source: std::io::ErrorKind::WriteZero.into() })
    } else {
        Ok(())
    }
}

/// `process_vm_writev(pid, …)` of many ranges: `data` holds their bytes back to back.
/// Writes all of them, or fails.
#[doc(alias = "process_vm_writev")]
pub fn write_ranges(pid: Tid, ranges: &[RemoteRange], data: &[u8]) -> Result<()> {
    assert_eq!(ranges.iter().map(|r| r.len).sum::<usize>(), data.len(), "ranges and data differ in length");
    let mut at = 0;
    for batch in ranges.chunks(IOV_MAX) {
        let len: usize = batch.iter().map(|r| r.len).sum();
        let local = libc::iovec { iov_base: data[at..].as_ptr() as *mut libc::c_void, iov_len: len };
        let remote: Vec<libc::iovec> = batch
            .iter()
            .map(|r| libc::iovec { iov_base: r.addr as *mut libc::c_void, iov_len: r.len })
            .collect();
        // SAFETY: `local` covers `data[at..at + len]`, which the kernel only reads.
        let n =
            unsafe { libc::process_vm_writev(pid.raw(), &local, 1, remote.as_ptr(), remote.len() as u64, 0) };
        if n < 0 {
            return Err(Error::last("process_vm_writev", pid.raw()));
        }
        if n as usize != len {
            return Err(Error {
                call: "process_vm_writev",
                tid: pid.raw(),
                source: std::io::ErrorKind::WriteZero.into(),
            });
        }
        at += len;
    }
    Ok(())
}

/// `pwrite(/proc/PID/mem, …)`: writes `data` at `addr` in a process this one traces,
/// even where the mapping is not writable (program text), as a debugger does.
pub fn poke(pid: Tid, addr: u64, data: &[u8]) -> Result<()> {
    use std::os::unix::fs::FileExt;
    let err = |source| Error { call: "writing /proc/PID/mem", tid: pid.raw(), source };
    let mem = std::fs::OpenOptions::new().write(true).open(format!("/proc/{pid}/mem")).map_err(err)?;
    mem.write_all_at(data, addr).map_err(err)
}

/// The address of the first occurrence of `needle` in the target's `[start, end)`, which
/// must be readable.
pub fn find(pid: Tid, start: u64, end: u64, needle: &[u8]) -> Result<Option<u64>> {
    let mut bytes = vec![0u8; (end - start) as usize];
    read_exact(pid, start, &mut bytes)?;
    Ok(bytes.windows(needle.len()).position(|w| w == needle).map(|i| start + i as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_own_memory_and_skips_holes() {
        // Three pages, the middle one made unreadable.
        let len = 3 * PAGE;
        // SAFETY: a fresh anonymous mapping owned by this test.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(base, libc::MAP_FAILED);
        // SAFETY: inside the mapping just made.
        unsafe {
            std::ptr::write_bytes(base.cast::<u8>(), 0xab, len);
            assert_eq!(libc::mprotect(base.cast::<u8>().add(PAGE).cast(), PAGE, libc::PROT_NONE), 0);
        }
        let me = Tid::new(std::process::id() as i32).unwrap();
        let addr = base as u64;
        let mut dst = vec![0x11u8; len + 8];
        let ranges = [RemoteRange { addr, len }, RemoteRange { addr, len: 8 }];
        let failed = read_ranges(me, &ranges, &mut dst).unwrap();
        assert_eq!(failed, vec![addr + PAGE as u64]);
        assert!(dst[..PAGE].iter().all(|&b| b == 0xab));
        assert!(dst[PAGE..2 * PAGE].iter().all(|&b| b == 0));
        assert!(dst[2 * PAGE..].iter().all(|&b| b == 0xab));

        // Pieces cut inside ranges read back to back as the whole.
        let big = 3 << 20;
        let mut src = vec![0u8; big];
        for (i, b) in src.iter_mut().enumerate() {
            *b = (i / PAGE) as u8;
        }
        let base2 = src.as_ptr() as u64;
        let ranges = [
            RemoteRange { addr: base2, len: big - PAGE },
            RemoteRange { addr: base2 + (big - PAGE) as u64, len: PAGE },
        ];
        let pieces = split_ranges(&ranges, 1 << 20);
        assert_eq!(pieces.len(), 3);
        assert_eq!(pieces[2].len(), 2, "the last piece ends with the second range");
        let mut out = vec![0u8; big];
        let mut rest = &mut out[..];
        for piece in &pieces {
            let (part, tail) = rest.split_at_mut(piece.iter().map(|r| r.len).sum());
            assert!(read_ranges(me, piece, part).unwrap().is_empty());
            rest = tail;
        }
        assert!(out == src);

        write(me, addr, &[1, 2, 3]).unwrap();
        let mut back = [0u8; 3];
        read_exact(me, addr, &mut back).unwrap();
        assert_eq!(back, [1, 2, 3]);
        // SAFETY: unmapping the test's own mapping.
        unsafe { libc::munmap(base, len) };
    }
}
