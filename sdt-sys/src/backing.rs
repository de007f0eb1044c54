//! What the file behind another process's mapping holds: where it has data and where
//! holes.
//!
//! Shared memory (`MAP_SHARED | MAP_ANONYMOUS`, memfds, System V segments) and mappings of
//! deleted files have no path to read their pages by, and the pages a process has not
//! touched are absent from its page tables while another process may have written them.
//! Reading such a mapping whole is correct but gives every hole of shared memory a page
//! of its own (a 1 GiB segment holding 1 MiB of data becomes 1 GiB of the machine's
//! memory). The file's extents, found with `lseek(SEEK_DATA/SEEK_HOLE)` on
//! `/proc/PID/map_files/START-END`, tell which parts hold data. Opening that link needs
//! `CAP_CHECKPOINT_RESTORE` (or `CAP_SYS_ADMIN`); without it the extents are unknown.
//! A deleted file the process holds open is kept with its snapshot by its extents too.

use std::fs::File;
use std::ops::Range;

use nix::errno::Errno;
use nix::unistd::{Whence, lseek};

use crate::Tid;

/// More extents than this and the rest of the window counts as data: each extent costs
/// two system calls, and data is read whole anyway.
const MAX_EXTENTS: usize = 4096;

const PAGE_SIZE: u64 = 4096;

/// The parts of the file that process `pid` maps at `[start, end)` where it holds data,
/// as ascending byte ranges of the whole file. `None` when they cannot be told: the
/// mapping's file cannot be opened through `/proc/PID/map_files` (it takes
/// `CAP_CHECKPOINT_RESTORE`) or is not a regular file. A file system without holes
/// reports its whole size as data, so the answer may hold holes, never miss data.
pub fn mapped_file_extents(pid: Tid, start: u64, end: u64) -> Option<Vec<Range<u64>>> {
    let link = format!("/proc/{pid}/map_files/{start:x}-{end:x}");
    // The link's target, looked at before it is opened: a device file has an `open` of its
    // own, with effects.
    let meta = std::fs::metadata(&link).ok()?;
    if !meta.is_file() {
        return None;
    }
    file_extents(&File::open(&link).ok()?, 0..meta.len())
}

/// The parts of a mapping `[start, end)` of a file from `offset` that hold the file's
/// `extents` (ascending byte ranges of the file), as ascending, page-aligned address
/// ranges inside the mapping.
pub fn extents_in_mapping(extents: &[Range<u64>], start: u64, end: u64, offset: u64) -> Vec<Range<u64>> {
    let window = offset..offset.saturating_add(end - start);
    let mut out: Vec<Range<u64>> = Vec::new();
    let first = extents.partition_point(|data| data.end <= window.start);
    for data in extents[first..].iter().take_while(|data| data.start < window.end) {
        let from = (data.start / PAGE_SIZE * PAGE_SIZE).max(window.start) - offset + start;
        let to = (data.end.div_ceil(PAGE_SIZE) * PAGE_SIZE).min(window.end) - offset + start;
        match out.last_mut() {
            Some(last) if last.end >= from => last.end = last.end.max(to),
            _ => out.push(from..to),
        }
    }
    out
}

/// The parts of `window` (byte offsets) of `file` where it holds data, ascending and
/// apart (`lseek(SEEK_DATA)`, `lseek(SEEK_HOLE)`, which move the file's offset: `file`
/// must be an open file of its own, not a copy of another process's descriptor). `None`
/// when the file cannot tell. The answer may hold holes, never miss data.
#[doc(alias = "SEEK_DATA")]
pub fn file_extents(file: &File, window: Range<u64>) -> Option<Vec<Range<u64>>> {
    let mut extents = Vec::new();
    let mut at = window.start;
    while at < window.end {
        let data = match lseek(file, i64::try_from(at).ok()?, Whence::SeekData) {
            Ok(data) => data as u64,
            // No data from `at` on.
            Err(Errno::ENXIO) => break,
            Err(_) => return None,
        };
        if data >= window.end {
            break;
        }
        let hole = match extents.len() + 1 >= MAX_EXTENTS {
            true => window.end,
            false => (lseek(file, data as i64, Whence::SeekHole).ok()? as u64).min(window.end),
        };
        extents.push(data..hole);
        at = hole.max(data + 1);
    }
    Some(extents)
}

#[cfg(test)]
mod tests {
    use std::io::{Seek, SeekFrom, Write};
    use std::os::fd::AsRawFd;

    use super::*;

    #[test]
    fn a_file_s_extents_are_its_data_and_end_at_its_size() {
        let mut file = tempfile::tempfile_in("/dev/shm").expect("a file in /dev/shm");
        file.set_len(40 * PAGE_SIZE).unwrap();
        file.seek(SeekFrom::Start(5 * PAGE_SIZE + 7)).unwrap();
        file.write_all(b"data").unwrap();
        file.seek(SeekFrom::Start(39 * PAGE_SIZE)).unwrap();
        file.write_all(&[1; 10]).unwrap();
        let page = |n: u64| n * PAGE_SIZE;
        assert_eq!(file_extents(&file, 0..page(40)), Some(vec![page(5)..page(6), page(39)..page(40)]));
        // A window cuts them; past the file's end there is nothing.
        assert_eq!(
            file_extents(&file, page(5) + 100..page(39) + 1),
            Some(vec![page(5) + 100..page(6), page(39)..page(39) + 1])
        );
        assert_eq!(file_extents(&file, page(41)..page(50)), Some(vec![]));
    }

    #[test]
    #[allow(unsafe_code)]
    fn the_extents_of_a_sparse_shared_file_are_its_written_pages() {
        // A tmpfs file of 64 pages with data in pages 3 and 10–11, mapped from its page 2.
        let mut file = tempfile::tempfile_in("/dev/shm").expect("a file in /dev/shm");
        file.set_len(64 * PAGE_SIZE).unwrap();
        for (page, len) in [(3, 1), (10, 2 * PAGE_SIZE as usize)] {
            file.seek(SeekFrom::Start(page * PAGE_SIZE)).unwrap();
            file.write_all(&vec![7; len]).unwrap();
        }
        let len = 60 * PAGE_SIZE as usize;
        // SAFETY: a fresh shared mapping of a file this test owns, unmapped below.
        let addr = unsafe {
            libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ, libc::MAP_SHARED, file.as_raw_fd(), 8192)
        };
        assert_ne!(addr, libc::MAP_FAILED);
        let start = addr as u64;
        let me = Tid::new(std::process::id() as i32).unwrap();
        let extents = mapped_file_extents(me, start, start + len as u64)
            .map(|extents| extents_in_mapping(&extents, start, start + len as u64, 2 * PAGE_SIZE));
        // SAFETY: the mapping made above, no longer used.
        unsafe { libc::munmap(addr, len) };
        let page = |n: u64| start + (n - 2) * PAGE_SIZE;
        match nix::unistd::geteuid().is_root() {
            true => assert_eq!(extents, Some(vec![page(3)..page(4), page(10)..page(12)])),
            // The link cannot be opened without CAP_CHECKPOINT_RESTORE: not known.
            false => assert_eq!(extents, None),
        }
        // A window of the file: what it holds of the extents, page-aligned.
        let file = [100..200, 5 * PAGE_SIZE..7 * PAGE_SIZE + 1, 9 * PAGE_SIZE..10 * PAGE_SIZE];
        let at = 0x10_0000;
        let in_window = |len, offset| extents_in_mapping(&file, at, at + len, offset);
        assert_eq!(in_window(4 * PAGE_SIZE, 4 * PAGE_SIZE), vec![at + PAGE_SIZE..at + 4 * PAGE_SIZE]);
        assert_eq!(in_window(PAGE_SIZE, 0), vec![at..at + PAGE_SIZE]);
        assert_eq!(in_window(PAGE_SIZE, 20 * PAGE_SIZE), vec![]);
    }
}
