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

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;

use sdt_store::{Content, FileRef, Mapping, PAGE_SIZE};
use sdt_sys::Tid;
use sdt_sys::memory::{self, RemoteRange};
use sdt_sys::pagemap::{PM_FILE, PM_PRESENT, PM_SWAPPED, Pagemap, ScanQuery};
use sdt_sys::uapi::{PAGE_IS_FILE, PAGE_IS_SWAPPED, PageRegion};
use sdt_sys::uffd::Userfaultfd;

use crate::procfs;

/// Mappings whose pages cannot be read through `process_vm_readv`.
const SPECIAL_UNREADABLE: [&str; 3] = ["[vvar]", "[vvar_vclock]", "[vsyscall]"];

/// Largest mapping registered for write tracking: protecting a huge sparse reservation
/// (a sanitizer's shadow memory) would fill page tables with markers.
const MAX_TRACKED_BYTES: u64 = 64 << 30;

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

/// `pages` consecutive pages from `addr`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PageRun {
    pub addr: u64,
    pub pages: u64,
}

impl PageRun {
    fn end(&self) -> u64 {
        self.addr + self.pages * PAGE_SIZE
    }
}

/// What a capture read, apart from registers.
pub(crate) struct Collected {
    /// Every mapping, ascending.
    pub mappings: Vec<Mapping>,
    /// Pages copied, ascending, back to back at the start of the buffer handed to
    /// [`Capturer::collect`].
    pub copied: Vec<PageRun>,
    /// Pages of tracked mappings not written since the previous snapshot, ascending.
    pub unchanged: Vec<PageRun>,
    /// Nanoseconds the copy took.
    pub copy_ns: u64,
    /// With `verify`: every readable mapping's bytes as read live, to compare with the
    /// store's copy once written.
    pub live: Option<Vec<(u64, Vec<u8>)>>,
}

/// Reads mappings and pages of one stopped process.
pub(crate) struct Capturer {
    pagemap: Pagemap,
    /// Write tracking, when the run has it.
    tracker: Option<Userfaultfd>,
    /// `PAGEMAP_SCAN` works (Linux 6.7): residency comes by region, not page by page.
    scan: bool,
    /// Threads that copy pages (the program is stopped: its CPUs are free).
    copy_threads: usize,
    entries: Vec<u64>,
    regions: Vec<PageRegion>,
    found: Vec<PageRegion>,
}

impl Capturer {
    pub(crate) fn new(pid: Tid) -> Result<Capturer, sdt_sys::Error> {
        let pagemap = Pagemap::open(pid)?;
        let mut regions = Vec::new();
        let scan = pagemap.scan(0, PAGE_SIZE, ScanQuery::RESIDENT, &mut regions, &mut Vec::new()).is_ok();
        let copy_threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(8);
        Ok(Capturer {
            pagemap,
            tracker: None,
            scan,
            copy_threads,
            entries: Vec::new(),
            regions,
            found: Vec::new(),
        })
    }

    /// The pagemap, for setting tracking up.
    pub(crate) fn pagemap(&self) -> &Pagemap {
        &self.pagemap
    }

    /// Turns write tracking on: from the next capture, tracked mappings copy only the
    /// pages written since the capture before.
    pub(crate) fn track_with(&mut self, tracker: Userfaultfd) {
        self.tracker = Some(tracker);
    }

    /// Whether writes are tracked.
    pub(crate) fn tracking(&self) -> bool {
        self.tracker.is_some()
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
        let mut files = HashMap::new();
        let mut copied = Vec::new();
        let mut unchanged = Vec::new();
        for mapping in &mut mappings {
            let (content, which) = classify(mapping, &mut files);
            mapping.content = content;
            if which == Pages::Present && self.tracker.is_some() && trackable(mapping) {
                self.tracked_pages(mapping, &mut copied, &mut unchanged)?;
            } else {
                self.select_pages(mapping, which, &mut copied)?;
            }
        }

        let need = copied.iter().map(|r| r.pages).sum::<u64>() as usize * PAGE_SIZE as usize;
        if buf.len() < need {
            // A fresh zeroed allocation is calloc'd pages the kernel zeroes on first touch:
            // no memset of memory that the copy overwrites anyway.
            *buf = vec![0; need];
        }
        let ranges: Vec<RemoteRange> = copied
            .iter()
            .map(|r| RemoteRange { addr: r.addr, len: (r.pages * PAGE_SIZE) as usize })
            .collect();
        let copy_start = sdt_sys::monotonic_ns();
        let failed = memory::read_ranges_parallel(via, &ranges, &mut buf[..need], self.copy_threads)?;
        let copy_ns = sdt_sys::monotonic_ns() - copy_start;
        if !failed.is_empty() {
            log::warn!(
                "{} page(s) could not be read and are stored as zero, first at {:#x}",
                failed.len(),
                failed[0]
            );
        }
        let live = verify.then(|| read_live(via, &mappings)).transpose()?;
        Ok(Collected { mappings, copied, unchanged, copy_ns, live })
    }

    /// A tracked mapping: the pages written since the last capture, or, the first time,
    /// every resident page after registering and protecting the mapping.
    fn tracked_pages(
        &mut self,
        m: &Mapping,
        copied: &mut Vec<PageRun>,
        unchanged: &mut Vec<PageRun>,
    ) -> Result<(), sdt_sys::Error> {
        self.found.clear();
        match self.pagemap.scan(m.start, m.end, ScanQuery::TAKE_WRITTEN, &mut self.regions, &mut self.found) {
            Ok(()) => {
                let mut at = m.start;
                for r in &self.found {
                    push_run(unchanged, at, r.start);
                    push_run(copied, r.start, r.end);
                    at = r.end;
                }
                push_run(unchanged, at, m.end);
                Ok(())
            }
            // Not registered: new since the last capture, or moved. Read it whole this
            // once, then register and protect it; from then on the scan answers for it.
            // (In that order: protected unpopulated pages hold markers that residency
            // scans count as swapped.)
            Err(e) if e.errno() == libc::EPERM => {
                self.select_pages(m, Pages::Present, copied)?;
                let tracker = self.tracker.as_ref().expect("tracked_pages without a tracker");
                let len = m.end - m.start;
                if let Err(e) =
                    tracker.register_wp(m.start, len).and_then(|()| tracker.write_protect(m.start, len))
                {
                    log::debug!("{:#x}-{:#x} {}: not tracked ({e})", m.start, m.end, m.path);
                }
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    /// Appends the runs of pages of `m` that `which` asks for.
    fn select_pages(
        &mut self,
        m: &Mapping,
        which: Pages,
        out: &mut Vec<PageRun>,
    ) -> Result<(), sdt_sys::Error> {
        match which {
            Pages::None => {}
            Pages::All => push_run(out, m.start, m.end),
            Pages::Present | Pages::Written if self.scan => {
                self.found.clear();
                self.pagemap.scan(m.start, m.end, ScanQuery::RESIDENT, &mut self.regions, &mut self.found)?;
                for r in &self.found {
                    // A private file mapping's pages still shared with the file are the
                    // file's: stored by reference.
                    let file_page = r.categories & PAGE_IS_FILE != 0 && r.categories & PAGE_IS_SWAPPED == 0;
                    if which == Pages::Present || !file_page {
                        push_run(out, r.start, r.end);
                    }
                }
            }
            Pages::Present | Pages::Written => {
                let npages = ((m.end - m.start) / PAGE_SIZE) as usize;
                self.pagemap.read(m.start, npages, &mut self.entries)?;
                for (i, &e) in self.entries.iter().enumerate() {
                    let keep = match which {
                        Pages::Present => e & (PM_PRESENT | PM_SWAPPED) != 0,
                        _ => (e & PM_PRESENT != 0 && e & PM_FILE == 0) || e & PM_SWAPPED != 0,
                    };
                    if keep {
                        let addr = m.start + i as u64 * PAGE_SIZE;
                        push_run(out, addr, addr + PAGE_SIZE);
                    }
                }
            }
        }
        Ok(())
    }
}

/// Appends `[start, end)` to `runs`, merging with the last run if they touch.
fn push_run(runs: &mut Vec<PageRun>, start: u64, end: u64) {
    if end <= start {
        return;
    }
    match runs.last_mut() {
        Some(last) if last.end() == start => last.pages += (end - start) / PAGE_SIZE,
        _ => runs.push(PageRun { addr: start, pages: (end - start) / PAGE_SIZE }),
    }
}

/// Private, writable, anonymous memory of a sane size: what write tracking covers.
fn trackable(m: &Mapping) -> bool {
    m.inode == 0 && m.perms.read && m.perms.write && !m.perms.shared && m.len() <= MAX_TRACKED_BYTES
}

/// What a mapping's unstored pages read as, and which pages to store. `files` caches the
/// mapped files looked at in this capture.
fn classify(entry: &Mapping, files: &mut HashMap<String, Option<FileRef>>) -> (Content, Pages) {
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
    let file = files.entry(entry.path.clone()).or_insert_with(|| file_ref(&entry.path)).clone();
    match file.filter(|f| f.inode == entry.inode) {
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

/// The regular file at `path` (a mapping's path in maps), with what identifies its
/// version; the caller checks that it is still the mapped inode.
fn file_ref(path: &str) -> Option<FileRef> {
    if !path.starts_with('/') || path.ends_with(" (deleted)") {
        return None;
    }
    let meta = std::fs::metadata(path).ok()?;
    if !meta.is_file() {
        return None;
    }
    Some(FileRef {
        path: path.to_owned(),
        dev: meta.dev(),
        inode: meta.ino(),
        size: meta.size(),
        mtime_ns: meta.mtime() * 1_000_000_000 + meta.mtime_nsec(),
    })
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
        assert_eq!(classify(&entry("---p", 0, ""), &mut HashMap::new()).0, Content::Unreadable);
        assert_eq!(classify(&entry("r--p", 0, "[vvar]"), &mut HashMap::new()).0, Content::Unreadable);
        assert_eq!(
            classify(&entry("rw-p", 0, "[heap]"), &mut HashMap::new()),
            (Content::Zero, Pages::Present)
        );
        assert_eq!(
            classify(&entry("rw-p", 0, "[anon:glibc]"), &mut HashMap::new()),
            (Content::Zero, Pages::Present)
        );
        assert_eq!(classify(&entry("r-xp", 0, "[vdso]"), &mut HashMap::new()), (Content::Zero, Pages::All));
        assert_eq!(
            classify(&entry("rw-s", 4, "/dev/zero (deleted)"), &mut HashMap::new()),
            (Content::Zero, Pages::All)
        );
        let exe = std::env::current_exe().unwrap();
        let ino = std::fs::metadata(&exe).unwrap().ino();
        let path = exe.to_str().unwrap();
        let (content, pages) = classify(&entry("r-xp", ino, path), &mut HashMap::new());
        assert!(matches!(content, Content::File(ref f) if f.inode == ino && f.path == path));
        assert_eq!(pages, Pages::Written);
        assert_eq!(classify(&entry("r--s", ino, path), &mut HashMap::new()).1, Pages::None);
        assert_eq!(classify(&entry("rw-s", ino, path), &mut HashMap::new()).1, Pages::Present);
        assert_eq!(
            classify(&entry("r--p", ino + 1, path), &mut HashMap::new()),
            (Content::Zero, Pages::All),
            "replaced file"
        );
    }

    #[test]
    fn runs_merge_when_they_touch() {
        let mut runs = Vec::new();
        push_run(&mut runs, 0x1000, 0x3000);
        push_run(&mut runs, 0x3000, 0x4000);
        push_run(&mut runs, 0x5000, 0x5000);
        push_run(&mut runs, 0x6000, 0x8000);
        assert_eq!(runs, vec![PageRun { addr: 0x1000, pages: 3 }, PageRun { addr: 0x6000, pages: 2 }]);
    }
}
