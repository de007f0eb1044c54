//! What a capture reads while every thread is stopped: the mappings, and the pages that
//! have content of their own.
//!
//! | mapping                                   | stored pages                  | other pages read as |
//! |-------------------------------------------|-------------------------------|---------------------|
//! | not readable, `[vvar]`, `[vsyscall]`      | none                          | unreadable          |
//! | anonymous (heap, stacks, …)               | present or swapped            | zero                |
//! | kernel-provided (`[vdso]`, …)             | every page                    | zero                |
//! | private mapping of a regular file         | written (no longer file pages)| the file            |
//! | shared writable mapping of a regular file | present                       | the file            |
//! | shared read-only mapping of a regular file| none                          | the file            |
//! | anything else (deleted file, shm, memfd)  | every page                    | zero                |
//!
//! A file is referred to only if it is still the one mapped (same inode); its size and
//! mtime are recorded so that a later change is caught when the snapshot is read.

use std::os::unix::fs::MetadataExt;

use sdt_store::{Content, FileRef, Mapping, PAGE_SIZE, ProcessInfo};
use sdt_sys::Tid;
use sdt_sys::memory::{self, RemoteRange};
use sdt_sys::pagemap::{PM_FILE, PM_PRESENT, PM_SWAPPED, Pagemap};

use crate::procfs;

/// Mappings whose pages cannot be read through `process_vm_readv`.
const SPECIAL_UNREADABLE: [&str; 3] = ["[vvar]", "[vvar_vclock]", "[vsyscall]"];

/// Which pages of a mapping the capture reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pages {
    None,
    /// Present or swapped.
    Present,
    /// Present and no longer the file's page, or swapped.
    Written,
    All,
}

/// What a capture read, apart from registers.
pub(crate) struct Collected {
    /// Every mapping, ascending.
    pub mappings: Vec<Mapping>,
    /// Addresses of the pages read, ascending; page `i` is at `i * PAGE_SIZE` in the
    /// buffer handed to [`Capturer::collect`].
    pub pages: Vec<u64>,
    /// The auxiliary vector.
    pub auxv: Vec<u8>,
    /// The process's identity.
    pub process: ProcessInfo,
    /// With `verify`: every readable mapping's bytes as read live, to compare with the
    /// store's copy once written.
    pub live: Option<Vec<(u64, Vec<u8>)>>,
}

/// Reads mappings and pages of one stopped process.
pub(crate) struct Capturer {
    pid: Tid,
    pagemap: Pagemap,
    entries: Vec<u64>,
}

impl Capturer {
    pub(crate) fn new(pid: Tid) -> Result<Capturer, sdt_sys::Error> {
        Ok(Capturer { pid, pagemap: Pagemap::open(pid)?, entries: Vec::new() })
    }

    /// Reads everything the snapshot stores into `buf` (grown if needed, never shrunk, so
    /// a reused buffer costs no page faults). Every thread must be stopped; `via` is one of
    /// them that has not exited, through which the memory is read.
    pub(crate) fn collect(
        &mut self,
        via: Tid,
        buf: &mut Vec<u8>,
        verify: bool,
    ) -> Result<Collected, CaptureError> {
        let mut mappings =
            procfs::parse_maps(&procfs::read_text(via, "maps").map_err(CaptureError::proc("maps"))?);
        let mut pages = Vec::new();
        for mapping in &mut mappings {
            let (content, which) = classify(mapping);
            mapping.content = content;
            self.select_pages(mapping, which, &mut pages)?;
        }

        let need = pages.len() * PAGE_SIZE as usize;
        if buf.len() < need {
            // A fresh zeroed allocation is calloc'd pages the kernel zeroes on first touch:
            // no memset of memory that the copy overwrites anyway.
            *buf = vec![0; need + need / 4];
        }
        let ranges = merge_into_ranges(&pages);
        let failed = memory::read_ranges(via, &ranges, &mut buf[..need])?;
        if !failed.is_empty() {
            log::warn!(
                "{} page(s) could not be read and are stored as zero, first at {:#x}",
                failed.len(),
                failed[0]
            );
        }

        let live = verify.then(|| read_live(via, &mappings)).transpose()?;
        Ok(Collected {
            mappings,
            pages,
            auxv: procfs::read(via, "auxv").map_err(CaptureError::proc("auxv"))?,
            process: procfs::process_info(self.pid, via).map_err(CaptureError::proc("stat"))?,
            live,
        })
    }

    fn select_pages(
        &mut self,
        entry: &Mapping,
        which: Pages,
        out: &mut Vec<u64>,
    ) -> Result<(), sdt_sys::Error> {
        let npages = ((entry.end - entry.start) / PAGE_SIZE) as usize;
        let page_addr = |i: usize| entry.start + i as u64 * PAGE_SIZE;
        match which {
            Pages::None => {}
            Pages::All => out.extend((0..npages).map(page_addr)),
            Pages::Present | Pages::Written => {
                self.pagemap.read(entry.start, npages, &mut self.entries)?;
                let keep = |e: u64| match which {
                    Pages::Present => e & (PM_PRESENT | PM_SWAPPED) != 0,
                    _ => (e & PM_PRESENT != 0 && e & PM_FILE == 0) || e & PM_SWAPPED != 0,
                };
                out.extend(
                    self.entries.iter().enumerate().filter(|&(_, &e)| keep(e)).map(|(i, _)| page_addr(i)),
                );
            }
        }
        Ok(())
    }
}

/// What a mapping's unstored pages read as, and which pages to store.
fn classify(entry: &Mapping) -> (Content, Pages) {
    if !entry.perms.read || SPECIAL_UNREADABLE.contains(&entry.path.as_str()) {
        return (Content::Unreadable, Pages::None);
    }
    if entry.inode == 0 {
        // Kernel-provided mappings ([vdso], [uprobes]) are not always in the page tables:
        // read them whole. Heap, stacks and named anonymous memory are ordinary.
        let special = entry.path.starts_with('[')
            && !(entry.path == "[heap]"
                || entry.path.starts_with("[stack")
                || entry.path.starts_with("[anon"));
        return (Content::Zero, if special { Pages::All } else { Pages::Present });
    }
    match file_ref(entry) {
        Some(file) => {
            let which = match (entry.perms.shared, entry.perms.write) {
                (false, _) => Pages::Written,
                (true, true) => Pages::Present,
                (true, false) => Pages::None,
            };
            (Content::File(file), which)
        }
        None => (Content::Zero, Pages::All),
    }
}

/// The mapped file, if it is a regular file still at its path.
fn file_ref(entry: &Mapping) -> Option<FileRef> {
    if !entry.path.starts_with('/') || entry.path.ends_with(" (deleted)") {
        return None;
    }
    let meta = std::fs::metadata(&entry.path).ok()?;
    if !meta.is_file() || meta.ino() != entry.inode {
        log::debug!("{} is not the mapped file any more; storing its pages", entry.path);
        return None;
    }
    Some(FileRef {
        path: entry.path.clone(),
        dev: meta.dev(),
        inode: meta.ino(),
        size: meta.size(),
        mtime_ns: meta.mtime() * 1_000_000_000 + meta.mtime_nsec(),
    })
}

/// Runs of consecutive pages as remote ranges.
fn merge_into_ranges(pages: &[u64]) -> Vec<RemoteRange> {
    let mut ranges: Vec<RemoteRange> = Vec::new();
    for &addr in pages {
        match ranges.last_mut() {
            Some(r) if r.addr + r.len as u64 == addr => r.len += PAGE_SIZE as usize,
            _ => ranges.push(RemoteRange { addr, len: PAGE_SIZE as usize }),
        }
    }
    ranges
}

/// Every byte of every readable mapping, as the process has it now.
fn read_live(pid: Tid, mappings: &[Mapping]) -> Result<Vec<(u64, Vec<u8>)>, sdt_sys::Error> {
    mappings
        .iter()
        .filter(|m| m.content != Content::Unreadable)
        .map(|m| {
            let mut bytes = vec![0u8; m.len() as usize];
            memory::read_ranges(pid, &[RemoteRange { addr: m.start, len: bytes.len() }], &mut bytes)?;
            Ok((m.start, bytes))
        })
        .collect()
}

/// Why a capture failed after the freeze.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CaptureError {
    /// A `/proc` file could not be read (the process is likely gone).
    #[error("reading /proc/PID/{file}")]
    Proc {
        file: &'static str,
        #[source]
        source: std::io::Error,
    },
    /// A system call failed.
    #[error(transparent)]
    Sys(#[from] sdt_sys::Error),
}

impl CaptureError {
    fn proc(file: &'static str) -> impl Fn(std::io::Error) -> CaptureError {
        move |source| CaptureError::Proc { file, source }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sdt_store::Perms;

    fn entry(perms: &str, inode: u64, path: &str) -> Mapping {
        let p = perms.as_bytes();
        Mapping {
            start: 0x1000,
            end: 0x3000,
            perms: Perms {
                read: p[0] == b'r',
                write: p[1] == b'w',
                exec: p[2] == b'x',
                shared: p[3] == b's',
            },
            offset: 0,
            dev: "00:00".into(),
            inode,
            path: path.into(),
            content: Content::Unreadable,
        }
    }

    #[test]
    fn classification() {
        assert_eq!(classify(&entry("---p", 0, "")).0, Content::Unreadable);
        assert_eq!(classify(&entry("r--p", 0, "[vvar]")).0, Content::Unreadable);
        assert_eq!(classify(&entry("rw-p", 0, "[heap]")), (Content::Zero, Pages::Present));
        assert_eq!(classify(&entry("rw-p", 0, "[anon:glibc]")), (Content::Zero, Pages::Present));
        assert_eq!(classify(&entry("r-xp", 0, "[vdso]")), (Content::Zero, Pages::All));
        assert_eq!(classify(&entry("rw-s", 4, "/dev/zero (deleted)")), (Content::Zero, Pages::All));
        let exe = std::env::current_exe().unwrap();
        let ino = std::fs::metadata(&exe).unwrap().ino();
        let path = exe.to_str().unwrap();
        let (content, pages) = classify(&entry("r-xp", ino, path));
        assert!(matches!(content, Content::File(ref f) if f.inode == ino && f.path == path));
        assert_eq!(pages, Pages::Written);
        assert_eq!(classify(&entry("r--s", ino, path)).1, Pages::None);
        assert_eq!(classify(&entry("rw-s", ino, path)).1, Pages::Present);
        assert_eq!(classify(&entry("r--p", ino + 1, path)), (Content::Zero, Pages::All), "replaced file");
    }

    #[test]
    fn ranges_merge_consecutive_pages() {
        let r = merge_into_ranges(&[0x1000, 0x2000, 0x4000, 0x5000, 0x6000, 0x9000]);
        assert_eq!(
            r,
            vec![
                RemoteRange { addr: 0x1000, len: 0x2000 },
                RemoteRange { addr: 0x4000, len: 0x3000 },
                RemoteRange { addr: 0x9000, len: 0x1000 },
            ]
        );
    }
}
