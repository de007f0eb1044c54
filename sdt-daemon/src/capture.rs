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

use sdt_store::{Content, FileRef, Mapping, PAGE_SIZE};
use sdt_sys::Tid;
use sdt_sys::memory::{self, RemoteRange};
use sdt_sys::pagemap::{PM_FILE, PM_PRESENT, PM_SWAPPED, Pagemap, ScanQuery};
use sdt_sys::uapi::{PAGE_IS_FILE, PAGE_IS_PRESENT, PAGE_IS_SWAPPED, PageRegion};
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
    /// Written since the previous capture, by the tracker's account.
    Tracked,
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

    /// Length in bytes.
    pub(crate) fn bytes(&self) -> usize {
        (self.pages * PAGE_SIZE) as usize
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
    /// Bytes copied from mappings the tracker met for the first time (read whole, once).
    pub first_sight_bytes: u64,
    /// With `verify`: every readable mapping's bytes as read live, to compare with the
    /// store's copy once written.
    pub live: Option<Vec<(u64, Vec<u8>)>>,
}

/// A mapping (index into the capture's mappings) and which of its pages to take.
#[derive(Clone, Copy, Debug)]
struct Task {
    mapping: usize,
    start: u64,
    end: u64,
    pages: Pages,
}

/// The pages a capture takes.
#[derive(Default)]
struct Found {
    /// Pages to copy.
    copy: Vec<PageRun>,
    unchanged: Vec<PageRun>,
    /// Mappings the tracker does not know yet: registered after the copy.
    unregistered: Vec<usize>,
    /// Bytes to copy from those.
    first_sight_bytes: u64,
}

/// Reads mappings and pages of one stopped process.
pub(crate) struct Capturer {
    pagemap: Pagemap,
    /// Write tracking, when the run has it.
    tracker: Option<Userfaultfd>,
    /// `PAGEMAP_SCAN` works (Linux 6.7): residency comes by region, not page by page.
    scan: bool,
    /// Threads that copy (the program is stopped: its CPUs are free).
    copiers: usize,
}

impl Capturer {
    pub(crate) fn new(pid: Tid) -> Result<Capturer, sdt_sys::Error> {
        let pagemap = Pagemap::open(pid)?;
        let scan = pagemap.scan(0, PAGE_SIZE, ScanQuery::RESIDENT, &mut Vec::new(), &mut Vec::new()).is_ok();
        let copiers = std::thread::available_parallelism().map_or(1, |n| n.get()).min(8);
        Ok(Capturer { pagemap, tracker: None, scan, copiers })
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

    /// Reads everything the snapshot stores into `buffer` (grown if needed, never shrunk,
    /// so a reused buffer costs no page faults). Every thread must be stopped; `via` is
    /// one of them that has not exited, through which memory is read. While a worker
    /// finds the pages to copy, `meanwhile` runs on this thread (the tracer's: it reads
    /// the registers) and its result is returned too. The copy is then spread over one
    /// thread per CPU.
    ///
    /// (Finding is one thread's work: the scans write-protect as they go and contend
    /// when run side by side.)
    pub(crate) fn collect<T>(
        &mut self,
        via: Tid,
        buffer: &mut Vec<u8>,
        verify: bool,
        meanwhile: impl FnOnce() -> T,
    ) -> Result<(Collected, T), CaptureError> {
        let mut mappings =
            procfs::parse_maps(&procfs::read_text(via, "maps").map_err(CaptureError::proc("maps"))?);
        let tasks = self.plan(&mut mappings);
        let (found, extra) = std::thread::scope(|scope| {
            let this = &*self;
            let worker = scope.spawn(|| this.find(&tasks));
            let extra = meanwhile();
            (worker.join().expect("capture worker panicked"), extra)
        });
        let Found { copy: copied, unchanged, unregistered, first_sight_bytes } = found?;

        let need: usize = copied.iter().map(PageRun::bytes).sum();
        if buffer.len() < need {
            // A fresh zeroed allocation is calloc'd pages the kernel zeroes on first touch:
            // no memset of memory that the copy overwrites anyway.
            *buffer = vec![0; need];
        }
        let ranges: Vec<RemoteRange> =
            copied.iter().map(|r| RemoteRange { addr: r.addr, len: r.bytes() }).collect();
        let copy_start = sdt_sys::monotonic_ns();
        let failed = memory::read_ranges_parallel(via, &ranges, &mut buffer[..need], self.copiers)?;
        let copy_ns = sdt_sys::monotonic_ns() - copy_start;
        if !failed.is_empty() {
            log::warn!(
                "{} page(s) could not be read and are stored as zero, first at {:#x}",
                failed.len(),
                failed[0]
            );
        }
        // Mappings new to the tracker were read whole above; from now on it answers for
        // them. (Protecting after reading: protected unpopulated pages hold markers that
        // residency scans would count as swapped.)
        if let Some(tracker) = &self.tracker {
            for m in unregistered.iter().map(|&i| &mappings[i]) {
                let len = m.end - m.start;
                if let Err(e) =
                    tracker.register_wp(m.start, len).and_then(|()| tracker.write_protect(m.start, len))
                {
                    log::debug!("{:#x}-{:#x} {}: not tracked ({e})", m.start, m.end, m.path);
                }
            }
        }
        let live = verify.then(|| read_live(via, &mappings)).transpose()?;
        Ok((Collected { mappings, copied, unchanged, copy_ns, first_sight_bytes, live }, extra))
    }

    /// Classifies the mappings: a task for each whose pages the snapshot takes.
    fn plan(&self, mappings: &mut [Mapping]) -> Vec<Task> {
        let mut files = HashMap::new();
        let mut tasks = Vec::new();
        for (i, m) in mappings.iter_mut().enumerate() {
            let (content, mut pages) = classify(m, &mut files);
            m.content = content;
            if pages == Pages::Present && self.tracker.is_some() && trackable(m) {
                pages = Pages::Tracked;
            }
            if pages != Pages::None {
                tasks.push(Task { mapping: i, start: m.start, end: m.end, pages });
            }
        }
        tasks
    }

    /// Finds the pages of every task.
    fn find(&self, tasks: &[Task]) -> Result<Found, sdt_sys::Error> {
        let mut out = Found::default();
        let mut scratch = Scratch::default();
        for task in tasks {
            match task.pages {
                Pages::Tracked => match self.written(task, &mut scratch) {
                    Ok(()) => {
                        let mut at = task.start;
                        for r in &scratch.found {
                            push_run(&mut out.unchanged, at, r.start);
                            // Written pages no longer resident were dropped (MADV_DONTNEED,
                            // a freed thread stack): they read as zero, nothing to copy.
                            if r.categories & (PAGE_IS_PRESENT | PAGE_IS_SWAPPED) != 0 {
                                push_run(&mut out.copy, r.start, r.end);
                            }
                            at = r.end;
                        }
                        push_run(&mut out.unchanged, at, task.end);
                    }
                    // Not registered: new since the last capture, or moved. Read it all.
                    Err(e) if e.errno() == libc::EPERM => {
                        out.unregistered.push(task.mapping);
                        let before: u64 = out.copy.iter().map(|r| r.bytes() as u64).sum();
                        self.select(task, Pages::Present, &mut scratch, &mut out.copy)?;
                        out.first_sight_bytes +=
                            out.copy.iter().map(|r| r.bytes() as u64).sum::<u64>() - before;
                    }
                    Err(e) => return Err(e),
                },
                which => self.select(task, which, &mut scratch, &mut out.copy)?,
            }
        }
        Ok(out)
    }

    /// The written pages of a tracked task's range, protected again, into `scratch.found`.
    fn written(&self, task: &Task, scratch: &mut Scratch) -> Result<(), sdt_sys::Error> {
        scratch.found.clear();
        self.pagemap.scan(
            task.start,
            task.end,
            ScanQuery::TAKE_WRITTEN,
            &mut scratch.regions,
            &mut scratch.found,
        )
    }

    /// Appends the runs of pages of the task's range that `which` asks for.
    fn select(
        &self,
        task: &Task,
        which: Pages,
        scratch: &mut Scratch,
        out: &mut Vec<PageRun>,
    ) -> Result<(), sdt_sys::Error> {
        match which {
            Pages::None | Pages::Tracked => {}
            Pages::All => push_run(out, task.start, task.end),
            Pages::Present | Pages::Written if self.scan => {
                scratch.found.clear();
                self.pagemap.scan(
                    task.start,
                    task.end,
                    ScanQuery::RESIDENT,
                    &mut scratch.regions,
                    &mut scratch.found,
                )?;
                for r in &scratch.found {
                    // A private file mapping's pages still shared with the file are the
                    // file's: stored by reference.
                    let file_page = r.categories & PAGE_IS_FILE != 0 && r.categories & PAGE_IS_SWAPPED == 0;
                    if which == Pages::Present || !file_page {
                        push_run(out, r.start, r.end);
                    }
                }
            }
            Pages::Present | Pages::Written => {
                let npages = ((task.end - task.start) / PAGE_SIZE) as usize;
                self.pagemap.read(task.start, npages, &mut scratch.entries)?;
                for (i, &e) in scratch.entries.iter().enumerate() {
                    let keep = match which {
                        Pages::Present => e & (PM_PRESENT | PM_SWAPPED) != 0,
                        _ => (e & PM_PRESENT != 0 && e & PM_FILE == 0) || e & PM_SWAPPED != 0,
                    };
                    if keep {
                        let addr = task.start + i as u64 * PAGE_SIZE;
                        push_run(out, addr, addr + PAGE_SIZE);
                    }
                }
            }
        }
        Ok(())
    }
}

/// A worker's reusable space for pagemap answers.
#[derive(Default)]
struct Scratch {
    entries: Vec<u64>,
    regions: Vec<PageRegion>,
    found: Vec<PageRegion>,
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
    Some(FileRef::of(path, &meta))
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
        let ino = std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&exe).unwrap());
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
