//! Replacing the new process's memory with the snapshot's, through calls made in it.
//!
//! ```text
//!  1. map the scratch area where neither the stub nor the snapshot has anything
//!  2. unregister the stub's rseq area, switch its signal stack off (both point into
//!     memory about to go)
//!  3. unmap everything of the stub but the scratch area and the kernel's mappings
//!  4. move [vvar]/[vdso] to where the snapshot had them (same kernel: same contents)
//!  5. map each of the snapshot's mappings, files again from their files, the views of
//!     a deleted file from one file made again
//!  6. write the snapshot's stored pages (process_vm_writev), then set each mapping's
//!     final protection
//!  7. tell the kernel the program's layout, auxv and executable (PR_SET_MM_MAP)
//! ```
//!
//! The scratch area is unmapped last, by the caller, once the threads are made. Files are
//! opened in the new process (with the program's file identity) `O_NONBLOCK |
//! O_NOFOLLOW | O_NOCTTY`: checked beforehand (`files`), a path replaced since by a
//! FIFO, a link or a terminal blocks nothing and is not mapped.

use sdt_store::{MemoryLayout, PAGE_SIZE, Snapshot};
use sdt_sys::memory::{self, RemoteRange};
use sdt_sys::ptrace;

use crate::plan::{MapKind, MapPlan, SPECIAL};
use crate::remote::{Remote, SCRATCH_LEN};
use crate::{Error, maps_of};

/// Lowest address the restore picks for areas of its own.
const LOWEST_FREE: u64 = 0x1000_0000;
/// Highest user address on x86_64 with 4-level page tables.
const USER_END: u64 = 0x7fff_ffff_f000;
/// Bytes of pages written to the process per `process_vm_writev`.
const WRITE_CHUNK: usize = 4 << 20;
/// How the new process opens the files it maps (with `O_RDONLY` or `O_RDWR`).
const OPEN_FLAGS: i32 = libc::O_CLOEXEC | libc::O_NONBLOCK | libc::O_NOFOLLOW | libc::O_NOCTTY;

/// `rseq(2)` flag: unregister.
const RSEQ_FLAG_UNREGISTER: u64 = 1;

/// An address range `[start, end)` in the process.
type Range = (u64, u64);

/// The first gap of `len` bytes at or above [`LOWEST_FREE`], with a page of room on both
/// sides, that overlaps none of `taken`.
pub(crate) fn find_gap(taken: &[Range], len: u64) -> Option<u64> {
    let mut taken: Vec<Range> = taken.to_vec();
    taken.sort_unstable();
    let mut at = LOWEST_FREE;
    for &(start, end) in &taken {
        if end <= at {
            continue;
        }
        if start >= at + len + 2 * PAGE_SIZE {
            break;
        }
        at = at.max(end);
    }
    (at + len + 2 * PAGE_SIZE <= USER_END).then_some(at + PAGE_SIZE)
}

/// Maps the scratch area and makes `remote` use it. Returns the area's range.
pub(crate) fn map_scratch(remote: &mut Remote, stub: &[Range], plans: &[MapPlan]) -> Result<Range, Error> {
    let taken: Vec<Range> = stub.iter().copied().chain(plans.iter().map(|p| (p.start, p.end))).collect();
    let at = find_gap(&taken, SCRATCH_LEN).ok_or_else(|| Error::Unsupported {
        what: "an address space with no room for the restore's scratch page".into(),
    })?;
    let got = remote.call(
        "mapping the scratch area",
        libc::SYS_mmap,
        &[
            at,
            SCRATCH_LEN,
            (libc::PROT_READ | libc::PROT_WRITE | libc::PROT_EXEC) as u64,
            (libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED_NOREPLACE) as u64,
            u64::MAX,
            0,
        ],
    )?;
    remote.set_scratch(got)?;
    Ok((got, got + SCRATCH_LEN))
}

/// Clears what the stub inherited that points into memory about to be unmapped: its
/// rseq registration and its signal stack.
pub(crate) fn detach_stub_state(remote: &mut Remote) -> Result<(), Error> {
    if let Some(rseq) = ptrace::rseq_config(remote.leader).map_err(Error::Sys)? {
        remote.call(
            "unregistering the stub's rseq area",
            libc::SYS_rseq,
            &[rseq.addr, u64::from(rseq.len), RSEQ_FLAG_UNREGISTER, u64::from(rseq.sig)],
        )?;
    }
    // stack_t { ss_sp, ss_flags, ss_size }
    let mut disable = [0u8; 24];
    disable[8..12].copy_from_slice(&libc::SS_DISABLE.to_le_bytes());
    let at = remote.put(0, &disable)?;
    remote.call("switching the stub's signal stack off", libc::SYS_sigaltstack, &[at, 0])?;
    Ok(())
}

/// Unmaps every mapping of the stub except the kernel's and the scratch area.
pub(crate) fn unmap_stub(remote: &mut Remote, scratch: Range) -> Result<(), Error> {
    for m in maps_of(remote.leader)? {
        let keep =
            SPECIAL.contains(&m.path.as_str()) || m.path == "[vsyscall]" || (m.start, m.end) == scratch;
        if !keep {
            remote.call(
                &format!("unmapping the stub's {:#x}-{:#x}", m.start, m.end),
                libc::SYS_munmap,
                &[m.start, m.end - m.start],
            )?;
        }
    }
    Ok(())
}

/// Moves the kernel's `[vvar]`/`[vdso]` mappings to where the snapshot had them. They
/// are the same kernel's, so their contents and sizes match; a snapshot from another
/// kernel is refused. Returns where the vDSO now starts.
pub(crate) fn move_specials(
    remote: &mut Remote,
    plans: &[MapPlan],
    scratch: Range,
) -> Result<Option<u64>, Error> {
    let ours = maps_of(remote.leader)?;
    let mut moves = Vec::new();
    for name in SPECIAL {
        let have = ours.iter().find(|m| m.path == name);
        let want = plans.iter().find(|p| p.kind == MapKind::Special && p.name == name);
        match (have, want) {
            (Some(h), Some(w)) if h.end - h.start == w.end - w.start => {
                moves.push((h.start, w.start, w.end - w.start))
            }
            (None, None) => {}
            _ => {
                return Err(Error::Unsupported {
                    what: format!(
                        "a snapshot whose {name} differs from this kernel's (taken on another kernel?)"
                    ),
                });
            }
        }
    }
    // Through free space first, so that no move lands on a mapping still to be moved.
    let mut taken: Vec<Range> = plans.iter().map(|p| (p.start, p.end)).collect();
    taken.extend(ours.iter().map(|m| (m.start, m.end)));
    taken.push(scratch);
    let mut staged = Vec::new();
    for &(from, to, len) in &moves {
        let via = find_gap(&taken, len).ok_or_else(|| Error::Unsupported {
            what: "an address space with no room to move the vDSO through".into(),
        })?;
        taken.push((via, via + len));
        move_mapping(remote, from, via, len)?;
        staged.push((via, to, len));
    }
    for &(via, to, len) in &staged {
        move_mapping(remote, via, to, len)?;
    }
    Ok(plans.iter().find(|p| p.kind == MapKind::Special && p.name == "[vdso]").map(|p| p.start))
}

/// `mremap(from, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, to)` in the process.
fn move_mapping(remote: &mut Remote, from: u64, to: u64, len: u64) -> Result<(), Error> {
    let what = format!("moving the kernel's mapping {from:#x}-{:#x} to {to:#x}", from + len);
    remote.call(
        &what,
        libc::SYS_mremap,
        &[from, len, len, (libc::MREMAP_MAYMOVE | libc::MREMAP_FIXED) as u64, to],
    )?;
    Ok(())
}

/// Maps every one of the snapshot's mappings (kernel ones aside), writable where pages
/// will be written.
pub(crate) fn map_all(remote: &mut Remote, plans: &[MapPlan]) -> Result<(), Error> {
    // The deleted files shown by several views, each opened once: (file, descriptor).
    let mut shared: Vec<(usize, u64)> = Vec::new();
    let mapped = map_each(remote, plans, &mut shared);
    for (_, fd) in shared {
        remote.call("closing a deleted file's views' descriptor", libc::SYS_close, &[fd])?;
    }
    mapped
}

fn map_each(remote: &mut Remote, plans: &[MapPlan], shared: &mut Vec<(usize, u64)>) -> Result<(), Error> {
    for p in plans {
        let len = p.end - p.start;
        let what = format!("mapping {:#x}-{:#x} {}", p.start, p.end, p.name);
        match &p.kind {
            MapKind::File { path, shared } => {
                let access =
                    if *shared && p.prot & libc::PROT_WRITE != 0 { libc::O_RDWR } else { libc::O_RDONLY };
                let path_at = remote.put_path(path)?;
                let fd = remote.call(
                    &format!("opening {path}"),
                    libc::SYS_open,
                    &[path_at, (access | OPEN_FLAGS) as u64, 0],
                )?;
                let flags = if *shared { libc::MAP_SHARED } else { libc::MAP_PRIVATE };
                let mapped = remote.call(
                    &what,
                    libc::SYS_mmap,
                    &[p.start, len, p.initial_prot() as u64, (flags | libc::MAP_FIXED) as u64, fd, p.offset],
                );
                remote.call(&format!("closing {path}"), libc::SYS_close, &[fd])?;
                mapped?;
            }
            MapKind::Anonymous { shared, stack } => {
                let sharing = if *shared { libc::MAP_SHARED } else { libc::MAP_PRIVATE };
                let grows = if *stack { libc::MAP_GROWSDOWN } else { 0 };
                let mut map = |reserve: i32| {
                    let flags = sharing | libc::MAP_ANONYMOUS | libc::MAP_FIXED | grows | reserve;
                    remote.call(
                        &what,
                        libc::SYS_mmap,
                        &[p.start, len, p.initial_prot() as u64, flags as u64, u64::MAX, 0],
                    )
                };
                // A reservation larger than the machine's memory (a sanitizer's shadow)
                // was mapped without reserving swap, which the maps file does not say.
                match map(0) {
                    Err(Error::Call { source, .. })
                        if source.raw_os_error() == Some(libc::ENOMEM) && !*shared =>
                    {
                        map(libc::MAP_NORESERVE)?
                    }
                    mapped => mapped?,
                };
            }
            &MapKind::SharedDeleted { file, fd, size } => {
                let opened = match shared.iter().find(|(f, _)| *f == file) {
                    Some(&(_, opened)) => opened,
                    None => {
                        let opened = open_deleted_file(remote, &p.name, fd, size)?;
                        shared.push((file, opened));
                        opened
                    }
                };
                let flags = (libc::MAP_SHARED | libc::MAP_FIXED) as u64;
                remote.call(
                    &what,
                    libc::SYS_mmap,
                    &[p.start, len, p.initial_prot() as u64, flags, opened, p.offset],
                )?;
            }
            MapKind::Special | MapKind::Fixed => {}
        }
    }
    Ok(())
}

/// A descriptor in the process, open for reading and writing, of the deleted file
/// `name` (as maps shows it) whose views are made again: the program's descriptor `fd`
/// of it opened again, or, where the program held none, a memfd of `size` bytes.
fn open_deleted_file(remote: &mut Remote, name: &str, fd: Option<i32>, size: u64) -> Result<u64, Error> {
    let flags = (libc::O_RDWR | libc::O_CLOEXEC) as u64;
    if let Some(fd) = fd {
        let path_at = remote.put_path(&format!("/proc/self/fd/{fd}"))?;
        return remote.call(
            &format!("opening {name} again (descriptor {fd})"),
            libc::SYS_open,
            &[path_at, flags, 0],
        );
    }
    let base = name.trim_end_matches(" (deleted)").rsplit('/').next().unwrap_or_default();
    let name_at = remote.put_path(base.strip_prefix("memfd:").unwrap_or(base))?;
    let memfd = remote.call(
        &format!("making {name} again"),
        libc::SYS_memfd_create,
        &[name_at, libc::MFD_CLOEXEC as u64],
    )?;
    remote.call(&format!("sizing {name} made again"), libc::SYS_ftruncate, &[memfd, size])?;
    Ok(memfd)
}

/// Writes every page the snapshot stores into the mappings that take them, then gives
/// each mapping its final protection. Returns the bytes written.
pub(crate) fn write_pages(remote: &mut Remote, snap: &Snapshot, plans: &[MapPlan]) -> Result<u64, Error> {
    // Page by page, from ranges: as many as the store claims, read (and refused) in turn.
    let mut pages = snap.stored_ranges().into_iter().flat_map(|r| r.step_by(PAGE_SIZE as usize)).peekable();
    let mut buf = Vec::with_capacity(WRITE_CHUNK);
    let mut ranges: Vec<RemoteRange> = Vec::new();
    let mut written = 0u64;
    let pid = remote.leader;
    let mut flush = |buf: &mut Vec<u8>, ranges: &mut Vec<RemoteRange>| -> Result<(), Error> {
        if !ranges.is_empty() {
            memory::write_ranges(pid, ranges, buf).map_err(Error::Sys)?;
            written += buf.len() as u64;
        }
        buf.clear();
        ranges.clear();
        Ok(())
    };
    for p in plans.iter().filter(|p| p.write_pages) {
        // Pages before this mapping belong to ones that take none.
        while pages.next_if(|&a| a < p.start).is_some() {}
        while let Some(addr) = pages.next_if(|&a| a < p.end) {
            // Consecutive pages read and write as one range.
            let mut end = addr + PAGE_SIZE;
            while buf.len() + ((end - addr) as usize) < WRITE_CHUNK
                && pages.next_if(|&a| a == end && a < p.end).is_some()
            {
                end += PAGE_SIZE;
            }
            let at = buf.len();
            buf.resize(at + (end - addr) as usize, 0);
            snap.read(addr, &mut buf[at..]).map_err(Error::Store)?;
            ranges.push(RemoteRange { addr, len: (end - addr) as usize });
            if buf.len() >= WRITE_CHUNK {
                flush(&mut buf, &mut ranges)?;
            }
        }
    }
    flush(&mut buf, &mut ranges)?;
    for p in plans.iter().filter(|p| p.initial_prot() != p.prot) {
        remote.call(
            &format!("protecting {:#x}-{:#x} {}", p.start, p.end, p.name),
            libc::SYS_mprotect,
            &[p.start, p.end - p.start, p.prot as u64],
        )?;
    }
    Ok(written)
}

/// `struct prctl_mm_map` (`include/uapi/linux/prctl.h`): eleven addresses, the auxv
/// pointer, its size and the executable's descriptor (two `u32`).
const PRCTL_MM_MAP_SIZE: usize = 12 * 8 + 2 * 4;

/// Tells the kernel the program's layout, auxiliary vector and executable, so that the
/// heap grows from the right place and `/proc` shows what it showed. Without the rights
/// to change the executable it keeps the stub's, with a warning.
pub(crate) fn set_layout(
    remote: &mut Remote,
    layout: &MemoryLayout,
    auxv: &[u8],
    exe: &str,
) -> Result<(), Error> {
    if !layout.is_known() {
        log::warn!("the snapshot does not record its memory layout: the heap may not grow after the restore");
        return Ok(());
    }
    // The auxv after the struct, the executable's path after that (by `put_path`).
    let auxv_at = remote.put(PRCTL_MM_MAP_SIZE as u64, auxv)?;
    let exe_fd = match remote.put_path(exe).and_then(|at| {
        remote.call(&format!("opening {exe}"), libc::SYS_open, &[at, (libc::O_RDONLY | OPEN_FLAGS) as u64, 0])
    }) {
        Ok(fd) => Some(fd),
        Err(e) => {
            log::warn!("the restored process keeps sdt as its executable: {e}");
            None
        }
    };
    let map = |exe_fd: Option<u64>| {
        let mut bytes = Vec::with_capacity(PRCTL_MM_MAP_SIZE);
        for v in [
            layout.start_code,
            layout.end_code,
            layout.start_data,
            layout.end_data,
            layout.start_brk,
            layout.brk,
            layout.start_stack,
            layout.arg_start,
            layout.arg_end,
            layout.env_start,
            layout.env_end,
            auxv_at,
        ] {
            bytes.extend_from_slice(&v.to_le_bytes());
        }
        bytes.extend_from_slice(&(auxv.len() as u32).to_le_bytes());
        bytes.extend_from_slice(&exe_fd.map_or(u32::MAX, |fd| fd as u32).to_le_bytes());
        bytes
    };
    let set = |remote: &mut Remote, exe_fd: Option<u64>| -> Result<i64, Error> {
        let at = remote.put(0, &map(exe_fd))?;
        remote.raw_on(
            remote.leader,
            libc::SYS_prctl,
            &[libc::PR_SET_MM as u64, libc::PR_SET_MM_MAP as u64, at, PRCTL_MM_MAP_SIZE as u64, 0],
        )
    };
    let mut rc = set(remote, exe_fd)?;
    if rc < 0 && exe_fd.is_some() {
        log::warn!(
            "the kernel refused to make {exe} the restored process's executable ({}); it keeps sdt's",
            std::io::Error::from_raw_os_error(-rc as i32)
        );
        rc = set(remote, None)?;
    }
    if let Some(fd) = exe_fd {
        remote.call("closing the executable", libc::SYS_close, &[fd])?;
    }
    if rc < 0 {
        return Err(Error::Call {
            what: "setting the memory layout (prctl PR_SET_MM_MAP)".into(),
            source: std::io::Error::from_raw_os_error(-rc as i32),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gaps_avoid_every_range() {
        let page = PAGE_SIZE;
        assert_eq!(find_gap(&[], page), Some(LOWEST_FREE + page));
        let taken =
            [(LOWEST_FREE, LOWEST_FREE + 10 * page), (LOWEST_FREE + 12 * page, LOWEST_FREE + 20 * page)];
        // Two pages between them: too tight for one page with a page on each side.
        assert_eq!(find_gap(&taken, page), Some(LOWEST_FREE + 21 * page));
        // Unsorted input, and ranges below the floor, are fine.
        let taken = [(LOWEST_FREE + 5 * page, LOWEST_FREE + 6 * page), (0x1000, 0x2000)];
        assert_eq!(find_gap(&taken, page), Some(LOWEST_FREE + page));
        assert_eq!(find_gap(&taken, 5 * page), Some(LOWEST_FREE + 7 * page));
        assert_eq!(find_gap(&[(LOWEST_FREE, USER_END)], page), None);
    }
}
