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
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use sdt_procfs::MapsFile;
use sdt_store::{Content, FileRef, Mapping, PAGE_SIZE, PageSpan, SpillFile};
use sdt_sys::Tid;
use sdt_sys::backing;
use sdt_sys::memory::{self, RemoteRange};
use sdt_sys::pagemap::{PM_FILE, PM_PRESENT, PM_SWAPPED, Pagemap, ScanQuery};
use sdt_sys::uapi::{PAGE_IS_FILE, PAGE_IS_PRESENT, PAGE_IS_SWAPPED, PageRegion};
use sdt_sys::uffd::Userfaultfd;

use crate::density::{CHUNK, Density, Sample, Tally, Treatment};
use crate::freeze::FreezeError;
use crate::headroom;
use crate::tracking::VdsoError;

/// Mappings whose pages cannot be read through `process_vm_readv`.
const SPECIAL_UNREADABLE: [&str; 3] = ["[vvar]", "[vvar_vclock]", "[vsyscall]"];

/// Bytes of a mapping one capture thread finds the pages of at a time: the stretches
/// are shared out among the threads, and the pages found in one can be copied while
/// later ones are scanned.
const SCAN_STRETCH: u64 = 32 << 20;

/// Found pages handed to the copy in batches of at least this many bytes…
const MIN_BATCH: usize = 256 << 10;

/// …cut into copy tasks of at most this many, so that every copy thread gets a share.
const COPY_PIECE: usize = 2 << 20;

/// The least capture buffer a capture larger than the memory the machine can spare goes
/// through, a window at a time.
const MIN_WINDOW: usize = 16 << 20;

/// A spare past this size is held, as a capture starts, to the memory free then (reading
/// how much is free costs about 0.1 ms).
const LARGE_WINDOW: usize = 256 << 20;

/// Written regions closer than this are looked up for residency in one scan: a scan
/// costs about what walking 1 MiB of page table does.
const RESIDENCY_GAP: u64 = 1 << 20;

/// Mappings larger than this may be reservations (a sanitizer's terabytes of shadow
/// memory, or the parts the program splits them into): write-protected only where they
/// hold pages when tracking starts (protecting their holes would fill page tables with
/// markers: 2 GB of them for 1 TiB), and probed for how sparse they are.
const LARGE_MAPPING_BYTES: u64 = 1 << 30;

/// A large mapping whose first [`PROBE_PAGES`] populated pages spread over more than
/// [`SPARSE_REACH`] bytes is sparse: cut into stretches only where it holds pages, found
/// by one scan first. Cut whole into 32 MiB stretches, ASan's shadow took half a second
/// of scans in every pause, TSan's a second. (The probe of a dense mapping walks 32 MiB
/// of it.)
const PROBE_PAGES: u64 = SCAN_STRETCH / PAGE_SIZE;
const SPARSE_REACH: u64 = 16 * SCAN_STRETCH;

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
    /// `Tracked`, in huge pages of 2 MiB (`MAP_HUGETLB`): a write marks its page written
    /// whole, so how much of a chunk reads as written says nothing of how densely the
    /// program writes it, and it is always protected again.
    TrackedHuge,
    /// A mapping of shared memory or of a deleted file: what its file holds (read whole)
    /// and present or swapped pages elsewhere (a private mapping's own). [`Capturer::plan`]
    /// makes `All` and `Present` tasks of it.
    Backed,
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

    fn remote(&self) -> RemoteRange {
        RemoteRange { addr: self.addr, len: self.bytes() }
    }

    /// The run as the store's page numbers.
    pub(crate) fn span(&self) -> PageSpan {
        PageSpan { first: self.addr / PAGE_SIZE, pages: self.pages }
    }
}

/// What a capture read, apart from registers.
pub(crate) struct Collected {
    /// Every mapping, ascending.
    pub mappings: Vec<Mapping>,
    /// Pages copied, ascending, back to back at the start of the spare handed to
    /// [`Capturer::collect`].
    pub copied: Vec<PageRun>,
    /// Pages of tracked mappings not written since the previous snapshot, ascending.
    pub unchanged: Vec<PageRun>,
    /// Nanoseconds the copy took.
    pub copy_ns: u64,
    /// Bytes copied from mappings the tracker met for the first time (read whole, once).
    pub first_sight_bytes: u64,
    /// Pages that could not be read (stored as zeros), ascending.
    pub unreadable: Vec<u64>,
    /// With `verify`: every readable mapping's bytes as read live, to compare with the
    /// store's copy once written.
    pub live: Option<Vec<(u64, Vec<u8>)>>,
    /// How long its parts took, for the debug log.
    pub phases: Phases,
}

/// How long the parts of a collection took, in nanoseconds from its start.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Phases {
    /// `/proc/PID/maps` read and classified.
    maps_ns: u64,
    /// The pages found (scans done).
    found_ns: u64,
    /// The copy, from its first piece's start to its last piece's end.
    copy_ns: u64,
    /// The registers, open files and signal sets (on the calling thread meanwhile).
    meanwhile_ns: u64,
    /// Everything, new mappings registered for tracking included.
    total_ns: u64,
    /// Tracked chunks the next capture leaves writable ([`Density`]).
    left_chunks: usize,
}

impl std::fmt::Display for Phases {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "maps {} µs, pages found at {} µs, copy {} µs, registers and files {} µs, all {} µs; {} MiB left writable",
            self.maps_ns / 1000,
            self.found_ns / 1000,
            self.copy_ns / 1000,
            self.meanwhile_ns / 1000,
            self.total_ns / 1000,
            (self.left_chunks as u64 * CHUNK) >> 20
        )
    }
}

/// A mapping (index into the capture's mappings) and which of its pages to take.
#[derive(Clone, Copy, Debug)]
struct Task {
    mapping: usize,
    start: u64,
    end: u64,
    pages: Pages,
}

/// `task` cut into stretches of at most [`SCAN_STRETCH`] bytes, appended to `out`.
fn cut_into_stretches(task: Task, out: &mut Vec<Task>) {
    let mut start = task.start;
    while start < task.end {
        let end = task.end.min(start + SCAN_STRETCH);
        out.push(Task { start, end, ..task });
        start = end;
    }
}

/// The parts of `task` that hold the pages of `populated` (ascending, inside it), parts
/// less than [`SCAN_STRETCH`] apart taken as one.
fn populated_parts(task: &Task, populated: &[PageRegion]) -> Vec<Task> {
    let mut parts: Vec<Task> = Vec::new();
    for r in populated {
        let (start, end) = (r.start.max(task.start), r.end.min(task.end));
        match parts.last_mut() {
            Some(last) if start < last.end + SCAN_STRETCH => last.end = last.end.max(end),
            _ if start < end => parts.push(Task { start, end, ..*task }),
            _ => {}
        }
    }
    parts
}

/// The pages a capture takes.
#[derive(Default)]
struct Found {
    /// Pages to copy.
    copy: CopyList,
    unchanged: Vec<PageRun>,
    /// Mappings the tracker does not know yet: registered after the copy.
    unregistered: Vec<usize>,
    /// Bytes to copy from those.
    first_sight_bytes: u64,
    /// What the protecting scans found, for [`Density`].
    tally: Tally,
}

impl Found {
    /// Appends what was found in the stretch after those already in.
    fn append(&mut self, next: Found) {
        for r in &next.copy.runs {
            self.copy.push(r.addr, r.end());
        }
        for r in &next.unchanged {
            push_run(&mut self.unchanged, r.addr, r.end());
        }
        for m in next.unregistered {
            if self.unregistered.last() != Some(&m) {
                self.unregistered.push(m);
            }
        }
        self.first_sight_bytes += next.first_sight_bytes;
        self.tally.merge(next.tally);
    }
}

/// Pages to copy, ascending. The first `handed` runs have gone to copy tasks already: a
/// run found later never merges into them.
#[derive(Default)]
struct CopyList {
    runs: Vec<PageRun>,
    handed: usize,
    /// Bytes of the runs not handed yet.
    waiting: usize,
    /// The copy tasks took no more: the buffer is full, the rest is copied after finding.
    closed: bool,
}

impl CopyList {
    fn push(&mut self, start: u64, end: u64) {
        if end <= start {
            return;
        }
        self.waiting += (end - start) as usize;
        let open = self.runs.len() > self.handed;
        match self.runs.last_mut() {
            Some(last) if open && last.end() == start => last.pages += (end - start) / PAGE_SIZE,
            _ => self.runs.push(PageRun { addr: start, pages: (end - start) / PAGE_SIZE }),
        }
    }

    /// Offers the runs not handed yet to `hand`, if there are at least `min` bytes of them;
    /// `hand` answers whether it took them (it refuses once the buffer is full).
    fn hand_over(&mut self, min: usize, hand: &mut impl FnMut(&[PageRun]) -> bool) {
        if self.closed || self.waiting == 0 || self.waiting < min {
            return;
        }
        if hand(&self.runs[self.handed..]) {
            self.handed = self.runs.len();
            self.waiting = 0;
        } else {
            self.closed = true;
        }
    }
}

/// What [`Capturer::find_and_copy`] leaves.
struct Finding<T> {
    /// The pages to take.
    found: Result<Found, sdt_sys::Error>,
    /// Bytes at the start of the spare the copies have taken so far.
    handed_bytes: usize,
    report: Mutex<CopyReport>,
    /// What ran on the calling thread meanwhile returned.
    extra: T,
}

/// The stretches found so far, put together in address order, and the part of the
/// spare not handed to copies yet.
struct InOrder<'a> {
    /// What each stretch past `next` held, once found.
    ahead: Vec<Option<Result<Found, sdt_sys::Error>>>,
    /// The first stretch not put together yet.
    next: usize,
    found: Result<Found, sdt_sys::Error>,
    free: &'a mut [u8],
    /// Bytes at the start of the spare handed to copies.
    handed_bytes: usize,
    /// When the last stretch was put together, from the capture's start.
    done_ns: u64,
}

impl<'a> InOrder<'a> {
    /// Takes in what stretch `i` held and puts together the stretches that now follow
    /// in order, handing their pages, while the spare holds them, to `copy` with the
    /// part of the spare they go to. Answers whether the last stretch was put together.
    fn take_in(
        &mut self,
        i: usize,
        found: Result<Found, sdt_sys::Error>,
        copy: &mut impl FnMut(&[PageRun], &'a mut [u8]),
    ) -> bool {
        self.ahead[i] = Some(found);
        let InOrder { ahead, next, found: all, free, handed_bytes, .. } = self;
        let waiting = *next < ahead.len();
        while let Some(found) = ahead.get_mut(*next).and_then(Option::take) {
            *next += 1;
            match (&mut *all, found) {
                (Ok(all), Ok(found)) => {
                    all.append(found);
                    let min = if *next == ahead.len() { 0 } else { MIN_BATCH };
                    all.copy.hand_over(min, &mut |runs| {
                        let bytes: usize = runs.iter().map(PageRun::bytes).sum();
                        if bytes > free.len() {
                            return false;
                        }
                        let (part, rest) = std::mem::take(free).split_at_mut(bytes);
                        *free = rest;
                        *handed_bytes += bytes;
                        copy(runs, part);
                        true
                    });
                }
                (Ok(_), Err(e)) => *all = Err(e),
                (Err(_), _) => {}
            }
        }
        waiting && *next == ahead.len()
    }
}

/// What the copy tasks of one capture report.
#[derive(Default)]
struct CopyReport {
    /// Pages that could not be read.
    failed: Vec<u64>,
    error: Option<sdt_sys::Error>,
    /// When the first copy started and the last ended.
    first_start_ns: Option<u64>,
    last_end_ns: u64,
}

impl CopyReport {
    /// Copies `ranges` into `dst` and reports how it went.
    fn copy(report: &Mutex<CopyReport>, pid: Tid, ranges: &[RemoteRange], dst: &mut [u8]) {
        let start = sdt_sys::monotonic_ns();
        // Pages of a spare not faulted in yet (grown for this capture) would fault one by
        // one inside the copy, 3–5 times slower than a byte written to each first; pages
        // already in place cost a store each.
        for page in dst.chunks_mut(PAGE_SIZE as usize) {
            page[0] = 0;
        }
        let result = memory::read_ranges(pid, std::hint::black_box(ranges), dst);
        let end = sdt_sys::monotonic_ns();
        let mut report = report.lock().unwrap();
        report.first_start_ns = Some(report.first_start_ns.map_or(start, |s| s.min(start)));
        report.last_end_ns = report.last_end_ns.max(end);
        match result {
            Ok(failed) => report.failed.extend(failed),
            Err(e) => {
                report.error.get_or_insert(e);
            }
        }
    }

    fn copy_ns(&self) -> u64 {
        self.first_start_ns.map_or(0, |start| self.last_end_ns - start)
    }
}

/// Copies `ranges` into `dst` (their total length) on the scope's threads, in pieces.
fn spawn_copies<'scope>(
    scope: &rayon::Scope<'scope>,
    report: &'scope Mutex<CopyReport>,
    pid: Tid,
    ranges: &[RemoteRange],
    mut dst: &'scope mut [u8],
) {
    for piece in memory::split_ranges(ranges, COPY_PIECE) {
        let (part, rest) = dst.split_at_mut(piece.iter().map(|r| r.len).sum());
        dst = rest;
        scope.spawn(move |_| CopyReport::copy(report, pid, &piece, part));
    }
}

/// Says, once a run, that a capture of `bytes` went through the capture buffer a window
/// at a time, `past_buffer` of them more than it holds, the machine having too little
/// memory free to grow it.
fn warn_past_buffer(bytes: usize, past_buffer: usize) {
    static SAID: AtomicBool = AtomicBool::new(false);
    let (bytes, past) = (crate::human::bytes(bytes as u64), crate::human::bytes(past_buffer as u64));
    if SAID.swap(true, Ordering::Relaxed) {
        log::debug!("a capture of {bytes} went to disk as it was copied, {past} more than the buffer holds");
    } else {
        log::warn!(
            "this capture copies {bytes}, and the machine has too little memory free for that much more: \
             it goes to disk as it is copied, {past} more than the capture buffer holds, slower (the pause \
             is longer), so that the program is not killed for want of memory"
        );
    }
}

/// The threads that find and copy pages while the program is stopped (its CPUs are free
/// then), one per CPU up to eight, started once: a thread woken costs a tenth of one
/// started. They run as urgently as the tracer where they may (`SCHED_FIFO`), so that
/// other programs busy on the machine do not stretch the pause.
pub(crate) fn capture_threads() -> Result<&'static rayon::ThreadPool, sdt_sys::Error> {
    static POOL: OnceLock<rayon::ThreadPool> = OnceLock::new();
    if let Some(pool) = POOL.get() {
        return Ok(pool);
    }
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(8);
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .thread_name(|i| format!("sdt-capture-{i}"))
        .start_handler(|_| {
            if let Err(e) = sdt_sys::set_thread_urgency(None, sdt_sys::Urgency::Immediate) {
                log::debug!("capture threads stay at normal priority: {e}");
            }
        })
        .build()
        .map_err(|e| sdt_sys::Error {
            call: "starting the capture threads",
            tid: 0,
            source: std::io::Error::other(e),
        })?;
    Ok(POOL.get_or_init(|| pool))
}

/// Reads mappings and pages of one stopped process.
pub(crate) struct Capturer {
    pagemap: Pagemap,
    /// `/proc/PID/maps`, kept open: opening it again at each capture cost 50–120 µs of
    /// the pause on a virtual machine.
    maps: MapsFile,
    /// Set while the capture threads are kept awake for a capture about to start.
    awake: Arc<AtomicBool>,
    /// Write tracking, when the run has it.
    tracker: Option<Userfaultfd>,
    /// A capture failed after its scans had taken (and cleared) the written-page bits:
    /// the next capture cannot tell what changed since the last snapshot, and copies the
    /// tracked mappings whole.
    lost_track: bool,
    /// `PAGEMAP_SCAN` works (Linux 6.7): residency comes by region, not page by page.
    scan: bool,
    /// Chunks of tracked memory written so densely that protecting them costs more than
    /// it saves.
    density: Density,
    threads: &'static rayon::ThreadPool,
}

impl Capturer {
    pub(crate) fn new(pid: Tid) -> Result<Capturer, sdt_sys::Error> {
        let pagemap = Pagemap::open(pid)?;
        let scan = pagemap.scan(0, PAGE_SIZE, ScanQuery::RESIDENT, &mut Vec::new(), &mut Vec::new()).is_ok();
        let maps = MapsFile::open(pid).map_err(|source| sdt_sys::Error {
            call: "open /proc/PID/maps",
            tid: pid.raw(),
            source,
        })?;
        Ok(Capturer {
            pagemap,
            maps,
            awake: Arc::default(),
            tracker: None,
            lost_track: false,
            scan,
            density: Density::default(),
            threads: capture_threads()?,
        })
    }

    /// Wakes the capture threads while the mappings are read: they wait, yielding their
    /// CPU to anything else that runs, until the capture hands them work, or for 2 ms.
    /// (A sleeping thread takes 30–250 µs to wake here: longer than reading the maps.)
    fn wake(&self) {
        const AT_MOST_NS: u64 = 2_000_000;
        self.awake.store(true, Ordering::Relaxed);
        for _ in 0..self.threads.current_num_threads() {
            let awake = Arc::clone(&self.awake);
            let until = sdt_sys::monotonic_ns() + AT_MOST_NS;
            self.threads.spawn(move || {
                while awake.load(Ordering::Relaxed) && sdt_sys::monotonic_ns() < until {
                    std::thread::yield_now();
                }
            });
        }
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

    /// The last capture's snapshot was not stored: the next capture copies the tracked
    /// mappings whole, since the last one took their written-page bits.
    pub(crate) fn capture_lost(&mut self) {
        self.lost_track = self.tracker.is_some();
    }

    /// Whether writes are tracked.
    pub(crate) fn tracking(&self) -> bool {
        self.tracker.is_some()
    }

    /// Reads everything the snapshot stores into `spill`'s data area (grown if needed).
    /// Every thread must be stopped; `live_thread` is one of them that has not exited,
    /// through which memory is read. While the capture threads find the pages and copy them,
    /// `meanwhile` runs on this thread (the tracer's: it reads the registers) and its
    /// result is returned too.
    ///
    /// If it fails, the snapshot it was for must not be committed: the next capture
    /// copies the tracked mappings whole, since this one may have taken their written-page
    /// bits.
    ///
    /// The capture threads take the mappings in stretches and find their pages; as the
    /// stretches found line up in address order, their pages are handed, while the
    /// buffer holds them, to copies on the same threads; what does not fit is copied
    /// after, into the grown buffer.
    pub(crate) fn collect<T>(
        &mut self,
        live_thread: Tid,
        spill: &mut SpillFile,
        verify: bool,
        meanwhile: impl FnOnce() -> T,
    ) -> Result<(Collected, T), CaptureError> {
        let start = sdt_sys::monotonic_ns();
        self.wake();
        let mut mappings = self.read_maps(live_thread).map_err(CaptureError::proc("maps"))?;
        let tasks = self.plan(live_thread, &mut mappings);
        let stretches = self.stretches(&tasks)?;
        let mut phases = Phases { maps_ns: sdt_sys::monotonic_ns() - start, ..Phases::default() };
        // A large spare was sized ahead, from the memory free then: the program may have
        // grown since. (Its pages wait for the capture as the kernel's to take back, so the
        // memory free counts them.)
        if spill.data().len() > LARGE_WINDOW {
            spill.hold_window_to(headroom::buffer_limit(0).max(MIN_WINDOW));
        }
        let read_whole = self.lost_track;
        self.lost_track = self.tracker.is_some();
        let Finding { found, handed_bytes, report, extra } =
            self.find_and_copy(live_thread, &stretches, spill, start, &mut phases, meanwhile);
        let Found { copy, unchanged, unregistered, first_sight_bytes, tally } = found?;
        if read_whole {
            // Tracked memory was read whole, without the scans that re-arm it.
            self.density.reset();
        } else {
            self.density.update(tally);
        }
        self.copy_rest(live_thread, &copy, spill, handed_bytes, &report)?;
        let mut report = report.into_inner().unwrap();
        if let Some(e) = report.error {
            return Err(e.into());
        }
        let mut unreadable = std::mem::take(&mut report.failed);
        unreadable.sort_unstable();
        self.track_new(&mappings, &unregistered, &copy.runs);
        let live = verify.then(|| self.read_live(live_thread, &mappings)).transpose()?;
        self.lost_track = false;
        phases.copy_ns = report.copy_ns();
        phases.total_ns = sdt_sys::monotonic_ns() - start;
        phases.left_chunks = self.density.left();
        let collected = Collected {
            mappings,
            copied: copy.runs,
            unchanged,
            copy_ns: report.copy_ns(),
            first_sight_bytes,
            unreadable,
            live,
            phases,
        };
        Ok((collected, extra))
    }

    /// The mappings now. A kept `maps` file that shows none was opened on a thread group
    /// leader that had already ended, which holds no address space: it is opened again
    /// through `live_thread`.
    fn read_maps(&mut self, live_thread: Tid) -> std::io::Result<Vec<Mapping>> {
        let mappings = self.maps.read()?;
        if !mappings.is_empty() {
            return Ok(mappings);
        }
        self.maps = MapsFile::open(live_thread)?;
        self.maps.read()
    }

    /// Every byte of every readable mapping, as the process has it now; of a large one,
    /// its pages (reading the rest would populate it).
    fn read_live(&self, pid: Tid, mappings: &[Mapping]) -> Result<Vec<(u64, Vec<u8>)>, sdt_sys::Error> {
        let mut ranges = Vec::new();
        for m in mappings.iter().filter(|m| m.content != Content::Unreadable) {
            if m.len() > LARGE_MAPPING_BYTES && self.scan {
                let mut populated = Vec::new();
                self.pagemap.scan(m.start, m.end, ScanQuery::POPULATED, &mut Vec::new(), &mut populated)?;
                ranges.extend(populated.iter().map(|r| (r.start, r.end)));
            } else {
                ranges.push((m.start, m.end));
            }
        }
        ranges
            .into_iter()
            .map(|(start, end)| {
                let mut bytes = vec![0u8; (end - start) as usize];
                memory::read_ranges(pid, &[RemoteRange { addr: start, len: bytes.len() }], &mut bytes)?;
                Ok((start, bytes))
            })
            .collect()
    }

    /// `tasks` cut into stretches for the capture threads, ascending: of at most
    /// [`SCAN_STRETCH`] bytes, and in a sparse mapping only where it holds pages.
    fn stretches(&self, tasks: &[Task]) -> Result<Vec<Task>, sdt_sys::Error> {
        let mut out = Vec::with_capacity(tasks.len());
        let (mut regions, mut populated) = (Vec::new(), Vec::new());
        for task in tasks {
            if !self.sparse(task)? {
                cut_into_stretches(*task, &mut out);
                continue;
            }
            populated.clear();
            self.pagemap.scan(task.start, task.end, ScanQuery::POPULATED, &mut regions, &mut populated)?;
            for part in populated_parts(task, &populated) {
                cut_into_stretches(part, &mut out);
            }
        }
        Ok(out)
    }

    /// Whether `task` covers a large mapping that holds few pages for its size, of
    /// which the capture reads only populated ones.
    fn sparse(&self, task: &Task) -> Result<bool, sdt_sys::Error> {
        let candidate = self.scan
            && task.end - task.start > LARGE_MAPPING_BYTES
            && matches!(task.pages, Pages::Present | Pages::Written | Pages::Tracked | Pages::TrackedHuge);
        Ok(candidate
            && self.pagemap.populated_reach(task.start, task.end, PROBE_PAGES)? - task.start > SPARSE_REACH)
    }

    /// Finds the pages of `stretches` on the capture threads, handing what the spare
    /// holds to copies as the stretches found line up in address order, while
    /// `meanwhile` runs on this thread; notes in `phases` when the finding and
    /// `meanwhile` ended (from `start`).
    fn find_and_copy<T>(
        &self,
        live_thread: Tid,
        stretches: &[Task],
        spill: &mut SpillFile,
        start: u64,
        phases: &mut Phases,
        meanwhile: impl FnOnce() -> T,
    ) -> Finding<T> {
        let since_start = || sdt_sys::monotonic_ns() - start;
        let report = Mutex::new(CopyReport::default());
        let in_order = Mutex::new(InOrder {
            ahead: (0..stretches.len()).map(|_| None).collect(),
            next: 0,
            found: Ok(Found::default()),
            free: spill.data(),
            handed_bytes: 0,
            done_ns: 0,
        });
        let taken = AtomicUsize::new(0);
        let finders = self.threads.current_num_threads().min(stretches.len());
        let extra = self.threads.in_place_scope(|scope| {
            let (report, in_order, taken) = (&report, &in_order, &taken);
            for _ in 0..finders {
                scope.spawn(move |scope| {
                    let mut scratch = Scratch::default();
                    loop {
                        let i = taken.fetch_add(1, Ordering::Relaxed);
                        let Some(stretch) = stretches.get(i) else { break };
                        let found = self.find(stretch, &mut scratch);
                        let mut in_order = in_order.lock().unwrap();
                        let last = in_order.take_in(i, found, &mut |runs, part| {
                            let ranges: Vec<RemoteRange> = runs.iter().map(PageRun::remote).collect();
                            spawn_copies(scope, report, live_thread, &ranges, part);
                        });
                        if last {
                            in_order.done_ns = since_start();
                        }
                        drop(in_order);
                        // Copy what this thread handed before finding more: the copy,
                        // not the finding, is what takes long when much was written.
                        while rayon::yield_local() == Some(rayon::Yield::Executed) {}
                    }
                });
            }
            // The woken threads stop waiting; they take the finding.
            self.awake.store(false, Ordering::Relaxed);
            let extra = meanwhile();
            phases.meanwhile_ns = since_start() - phases.maps_ns;
            extra
        });
        let InOrder { found, handed_bytes, done_ns, .. } = in_order.into_inner().unwrap();
        phases.found_ns = done_ns;
        Finding { found, handed_bytes, report, extra }
    }

    /// Copies what the spare could not hold during the finding into the spare, grown,
    /// after the `handed_bytes` already copied.
    fn copy_rest(
        &self,
        live_thread: Tid,
        copy: &CopyList,
        spill: &mut SpillFile,
        handed_bytes: usize,
        report: &Mutex<CopyReport>,
    ) -> Result<(), sdt_store::Error> {
        let need: usize = copy.runs.iter().map(PageRun::bytes).sum();
        if need > spill.capacity() {
            // The memory free counts the buffer's pages waiting for a capture (see
            // `SpillFile::fault_in`): the buffer may hold that much in all.
            spill.grow(need, headroom::buffer_limit(0).max(MIN_WINDOW))?;
        }
        let rest: Vec<RemoteRange> = copy.runs[copy.handed..].iter().map(PageRun::remote).collect();
        if rest.is_empty() {
            return Ok(());
        }
        if spill.past_buffer() == 0 {
            let dst = &mut spill.data()[handed_bytes..need];
            self.threads.in_place_scope(|scope| spawn_copies(scope, report, live_thread, &rest, dst));
            return Ok(());
        }
        // More than the machine has memory for: what the buffer holds goes to the file
        // now, and the rest through the buffer a window at a time, each written at once.
        warn_past_buffer(need, spill.past_buffer());
        spill.write_through(handed_bytes, 0)?;
        let window = spill.data().len();
        let mut at = handed_bytes;
        for part in memory::split_ranges(&rest, window) {
            let len: usize = part.iter().map(|r| r.len).sum();
            let dst = &mut spill.data()[..len];
            self.threads.in_place_scope(|scope| spawn_copies(scope, report, live_thread, &part, dst));
            spill.write_through(len, at)?;
            at += len;
        }
        Ok(())
    }

    /// Registers the mappings new to the tracker (`unregistered`, read whole by this
    /// capture): from now on it answers for them. (Protecting after reading: protected
    /// unpopulated pages hold markers that residency scans would count as swapped.) A
    /// large mapping is protected where this capture copied its pages (`copied`,
    /// ascending): a page populated later reads as written, one never populated is found
    /// in no stretch of a sparse mapping and reads as zero. (Protecting it whole, even by
    /// a scan that protects written pages, puts markers in its holes.)
    fn track_new(&self, mappings: &[Mapping], unregistered: &[usize], copied: &[PageRun]) {
        let Some(tracker) = &self.tracker else { return };
        for m in unregistered.iter().map(|&i| &mappings[i]) {
            let len = m.end - m.start;
            let protect = || match len > LARGE_MAPPING_BYTES {
                true => {
                    let first = copied.partition_point(|r| r.end() <= m.start);
                    copied[first..].iter().take_while(|r| r.addr < m.end).try_for_each(|r| {
                        let (start, end) = (r.addr.max(m.start), r.end().min(m.end));
                        tracker.write_protect(start, end - start)
                    })
                }
                false => tracker.write_protect(m.start, len),
            };
            if let Err(e) = tracker.register_wp(m.start, len).and_then(|()| protect()) {
                log::debug!("{:#x}-{:#x} {}: not tracked ({e})", m.start, m.end, m.path);
            }
        }
    }

    /// Classifies the mappings: a task for each whose pages the snapshot takes.
    /// (`live_thread`: a thread of the program, through which mapped files are looked at.)
    fn plan(&self, live_thread: Tid, mappings: &mut [Mapping]) -> Vec<Task> {
        let mut files = HashMap::new();
        let mut backed = HashMap::new();
        let mut tasks = Vec::new();
        for (i, m) in mappings.iter_mut().enumerate() {
            let (content, mut pages) = classify(m, &mut files);
            m.content = content;
            if pages == Pages::Present && self.tracker.is_some() && !self.lost_track {
                pages = match trackable(m) {
                    Some(Paging::Base) => Pages::Tracked,
                    Some(Paging::Huge) => Pages::TrackedHuge,
                    None => pages,
                };
            }
            match pages {
                Pages::None => {}
                Pages::Backed => {
                    // One look at a file mapped many times (a sanitizer maps its own dozens).
                    let extents = backed
                        .entry((m.dev.clone(), m.inode))
                        .or_insert_with(|| backing::mapped_file_extents(live_thread, m.start, m.end));
                    plan_backed(i, m, extents.as_deref(), &mut tasks)
                }
                _ => tasks.push(Task { mapping: i, start: m.start, end: m.end, pages }),
            }
        }
        tasks
    }

    /// Finds the pages of one stretch.
    fn find(&self, stretch: &Task, scratch: &mut Scratch) -> Result<Found, sdt_sys::Error> {
        let mut out = Found::default();
        match stretch.pages {
            Pages::Tracked | Pages::TrackedHuge => self.find_written(stretch, scratch, &mut out)?,
            which => self.select(stretch.start, stretch.end, which, scratch, &mut out.copy)?,
        }
        Ok(out)
    }

    /// The written pages of (a stretch of) a tracked task, protected again as they are
    /// found; all its present pages if it is new to the tracker.
    fn find_written(
        &self,
        task: &Task,
        scratch: &mut Scratch,
        out: &mut Found,
    ) -> Result<(), sdt_sys::Error> {
        let (from, to) = (task.start, task.end);
        let huge = task.pages == Pages::TrackedHuge;
        scratch.found.clear();
        let mut part = from;
        while part < to {
            let part_end = self.density.same_until(part, to);
            let treatment = match huge {
                true => Treatment::Sparse,
                false => self.density.treatment(part / CHUNK),
            };
            // Where few pages were written, the kernel's fast path finds them and a second
            // look tells which are resident; where most were, one slower pass tells both.
            let query = match treatment {
                Treatment::Sparse => ScanQuery::WRITTEN_BARE,
                Treatment::Rearm => ScanQuery::TAKE_WRITTEN,
                Treatment::Left => ScanQuery::WRITTEN,
            };
            scratch.written.clear();
            match self.pagemap.scan(part, part_end, query, &mut scratch.regions, &mut scratch.written) {
                Ok(()) => {}
                // Not registered: new since the last capture, or moved. Read it all.
                Err(e) if e.errno() == libc::EPERM => {
                    out.unregistered.push(task.mapping);
                    let before = out.copy.waiting;
                    self.select(from, to, Pages::Present, scratch, &mut out.copy)?;
                    out.first_sight_bytes += (out.copy.waiting - before) as u64;
                    return Ok(());
                }
                Err(e) => return Err(e),
            }
            if huge {
                // No measure of density: left to the tracker, a page at a time.
            } else if treatment == Treatment::Left {
                self.sample_left(part, part_end, &scratch.written, &mut out.tally)?;
            } else {
                out.tally.add_scanned(part, part_end);
                for r in &scratch.written {
                    out.tally.add_written(r.start.max(part), r.end.min(part_end));
                }
            }
            if treatment == Treatment::Sparse {
                self.add_residency(scratch)?;
            } else {
                scratch.found.extend_from_slice(&scratch.written);
            }
            part = part_end;
        }
        let mut at = from;
        for r in &scratch.found {
            push_run(&mut out.unchanged, at, r.start);
            // Written pages no longer resident were dropped (MADV_DONTNEED, a freed
            // thread stack): they read as zero, nothing to copy.
            if r.categories & (PAGE_IS_PRESENT | PAGE_IS_SWAPPED) != 0 {
                out.copy.push(r.start, r.end);
            }
            at = r.end;
        }
        push_run(&mut out.unchanged, at, to);
        Ok(())
    }

    /// Counts what was written of the sample of each left chunk in `[start, end)`
    /// (`written`: the regions the scan reported, ascending) into `tally`, and protects
    /// the next sample.
    fn sample_left(
        &self,
        start: u64,
        end: u64,
        written: &[PageRegion],
        tally: &mut Tally,
    ) -> Result<(), sdt_sys::Error> {
        let mut regions = written.iter().peekable();
        for chunk in start / CHUNK..end.div_ceil(CHUNK) {
            let Sample { measure, protect } = self.density.sample(chunk);
            let (from, to) = (measure.start.max(start), measure.end.min(end));
            let mut written_bytes = 0;
            if from < to {
                while regions.next_if(|r| r.end <= from).is_some() {}
                for r in regions.clone().take_while(|r| r.start < to) {
                    written_bytes += r.end.min(to) - r.start.max(from);
                }
            }
            let sampled = to.saturating_sub(from) / PAGE_SIZE;
            tally.add(chunk, sampled as u32, (written_bytes / PAGE_SIZE) as u32);
            let (from, to) = (protect.start.max(start), protect.end.min(end));
            if from < to {
                self.pagemap.protect_written(from, to)?;
            }
        }
        Ok(())
    }

    /// Appends `scratch.written` (regions reported written and nothing else, not
    /// protected yet) to `scratch.found`, each split into its resident pages, reported
    /// present or swapped, and the rest, dropped since; then protects them. Regions less
    /// than [`RESIDENCY_GAP`] apart are looked up and protected together.
    fn add_residency(&self, scratch: &mut Scratch) -> Result<(), sdt_sys::Error> {
        let Scratch { regions, written, resident, found, .. } = scratch;
        let mut rest = &written[..];
        while let Some(first) = rest.first() {
            let n = 1 + rest.windows(2).take_while(|w| w[1].start - w[0].end < RESIDENCY_GAP).count();
            let (near, far) = rest.split_at(n);
            let end = near[n - 1].end;
            resident.clear();
            self.pagemap.scan(first.start, end, ScanQuery::POPULATED, regions, resident)?;
            split_by_residency(near, resident, found);
            self.pagemap.protect_written(first.start, end)?;
            rest = far;
        }
        Ok(())
    }

    /// Appends the runs of pages in `[start, end)` that `which` asks for.
    fn select(
        &self,
        start: u64,
        end: u64,
        which: Pages,
        scratch: &mut Scratch,
        out: &mut CopyList,
    ) -> Result<(), sdt_sys::Error> {
        match which {
            Pages::None | Pages::Tracked | Pages::TrackedHuge => {}
            // (`Backed` tasks are planned as `All` and `Present` ones.)
            Pages::All | Pages::Backed => out.push(start, end),
            Pages::Present | Pages::Written if self.scan => {
                scratch.found.clear();
                self.pagemap.scan(
                    start,
                    end,
                    ScanQuery::RESIDENT,
                    &mut scratch.regions,
                    &mut scratch.found,
                )?;
                for r in &scratch.found {
                    // A private file mapping's pages still shared with the file are the
                    // file's: stored by reference.
                    let file_page = r.categories & PAGE_IS_FILE != 0 && r.categories & PAGE_IS_SWAPPED == 0;
                    if which == Pages::Present || !file_page {
                        out.push(r.start, r.end);
                    }
                }
            }
            Pages::Present | Pages::Written => {
                let npages = ((end - start) / PAGE_SIZE) as usize;
                self.pagemap.read(start, npages, &mut scratch.entries)?;
                for (i, &e) in scratch.entries.iter().enumerate() {
                    let keep = match which {
                        Pages::Present => e & (PM_PRESENT | PM_SWAPPED) != 0,
                        _ => (e & PM_PRESENT != 0 && e & PM_FILE == 0) || e & PM_SWAPPED != 0,
                    };
                    if keep {
                        let addr = start + i as u64 * PAGE_SIZE;
                        out.push(addr, addr + PAGE_SIZE);
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
    /// Written pages, as one scan reported them.
    written: Vec<PageRegion>,
    /// Resident pages among them.
    resident: Vec<PageRegion>,
    found: Vec<PageRegion>,
}

/// Appends `written` to `out`, each region cut where the regions of `resident`
/// (ascending, from a scan covering them) start and end: the parts inside add their
/// categories, the others keep their own.
fn split_by_residency(written: &[PageRegion], resident: &[PageRegion], out: &mut Vec<PageRegion>) {
    let mut resident = resident.iter().peekable();
    for w in written {
        let mut at = w.start;
        while at < w.end {
            while resident.next_if(|r| r.end <= at).is_some() {}
            let (end, categories) = match resident.peek() {
                Some(r) if r.start <= at => (r.end.min(w.end), w.categories | r.categories),
                Some(r) => (r.start.min(w.end), w.categories),
                None => (w.end, w.categories),
            };
            out.push(PageRegion { start: at, end, categories });
            at = end;
        }
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

/// The pages of a mapping write tracking covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Paging {
    Base,
    /// 2 MiB huge pages.
    Huge,
}

/// Private, writable, anonymous memory, which write tracking covers, and its pages. Huge
/// pages (`MAP_HUGETLB`) are protected and scanned a page at a time: the capture's
/// stretches and chunks fall on 2 MiB boundaries, but not on those of 1 GiB pages, so
/// a mapping that may hold them (a multiple of 1 GiB long) is not tracked.
fn trackable(m: &Mapping) -> Option<Paging> {
    if !(m.perms.read && m.perms.write && !m.perms.shared) {
        return None;
    }
    match (m.inode, m.path.as_str()) {
        (0, _) => Some(Paging::Base),
        (_, "/anon_hugepage (deleted)") if !m.len().is_multiple_of(1 << 30) => Some(Paging::Huge),
        _ => None,
    }
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
        // Private huge pages (`MAP_HUGETLB`) are anonymous memory of a larger page.
        None if entry.path == "/anon_hugepage (deleted)" && !entry.perms.shared => {
            (Content::Zero, Pages::Present)
        }
        None if entry.path.ends_with(" (deleted)") => (Content::Zero, Pages::Backed),
        None => (Content::Zero, Pages::All),
    }
}

/// The tasks of mapping `mapping` (`m`), of shared memory or of a deleted file whose
/// data lies at `extents` (byte ranges of the file): the parts where its file holds data
/// read whole, the holes where they hold pages (a private mapping's written ones).
/// Reading a hole of shared memory would give it a page; where the file's extents cannot
/// be had (sdt without `CAP_CHECKPOINT_RESTORE`), the mapping is read whole all the same.
fn plan_backed(mapping: usize, m: &Mapping, extents: Option<&[Range<u64>]>, tasks: &mut Vec<Task>) {
    let task = |start, end, pages| Task { mapping, start, end, pages };
    let Some(extents) = extents else {
        tasks.push(task(m.start, m.end, Pages::All));
        return;
    };
    let mut at = m.start;
    for data in backing::extents_in_mapping(extents, m.start, m.end, m.offset) {
        if at < data.start {
            tasks.push(task(at, data.start, Pages::Present));
        }
        tasks.push(task(data.start, data.end, Pages::All));
        at = data.end;
    }
    if at < m.end {
        tasks.push(task(at, m.end, Pages::Present));
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

/// Why a capture failed after the freeze.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CaptureError {
    /// Every thread is exiting: none to read memory through.
    #[error("every thread is exiting")]
    Exiting,
    /// The program was killed while it was read: what was read may be missing pages.
    #[error(
        "the program was killed during the capture (SIGKILL: by a user, or by the kernel for want of memory)"
    )]
    Killed,
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
    /// The spare could not take the pages (the disk is full).
    #[error(transparent)]
    Store(#[from] sdt_store::Error),
    /// The registers could not be read.
    #[error(transparent)]
    Threads(#[from] FreezeError),
    /// The open files could not be read.
    #[error("reading open files")]
    OpenFiles(#[source] std::io::Error),
    /// The caught and ignored signal sets could not be read.
    #[error("reading signal sets")]
    SignalSets(#[source] std::io::Error),
    /// The vDSO, where injected calls run, cannot be found.
    #[error(transparent)]
    Vdso(#[from] VdsoError),
    /// The injected calls that read the signal handlers failed.
    #[error("reading signal handlers")]
    SignalHandlers(#[source] sdt_sys::Error),
    /// Neither the backend nor an injected call can read the signal handlers: why.
    #[error("the signal handlers were not read: {0}")]
    SignalHandlersUnread(&'static str),
}

impl CaptureError {
    /// The store had no room for the pages.
    pub(crate) fn no_room(&self) -> bool {
        matches!(self, CaptureError::Store(_))
    }

    /// Whether the kernel refused sdt the program's memory or `/proc` files (`EPERM`,
    /// `EACCES`): the program made itself non-dumpable, and sdt lacks `CAP_SYS_PTRACE`.
    pub(crate) fn refused(&self) -> bool {
        let refusal = |errno: Option<i32>| matches!(errno, Some(libc::EPERM | libc::EACCES));
        let mut next: Option<&(dyn std::error::Error + 'static)> = Some(self);
        while let Some(e) = next {
            if e.downcast_ref::<sdt_sys::Error>().is_some_and(|s| refusal(Some(s.errno())))
                || e.downcast_ref::<std::io::Error>().is_some_and(|io| refusal(io.raw_os_error()))
            {
                return true;
            }
            next = e.source();
        }
        false
    }

    fn proc(file: &'static str) -> impl Fn(std::io::Error) -> CaptureError {
        move |source| CaptureError::Proc { file, source }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(perms: &str, inode: u64, path: &str) -> Mapping {
        sdt_procfs::parse_maps_line(&format!("1000-3000 {perms} 00000000 00:00 {inode} {path}")).unwrap()
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
        // Shared memory and deleted files: read where the file holds data.
        assert_eq!(
            classify(&entry("rw-s", 4, "/dev/zero (deleted)"), &mut HashMap::new()),
            (Content::Zero, Pages::Backed)
        );
        assert_eq!(
            classify(&entry("rw-s", 5, "/anon_hugepage (deleted)"), &mut HashMap::new()),
            (Content::Zero, Pages::Backed)
        );
        // Private huge pages: anonymous memory.
        let huge = entry("rw-p", 5, "/anon_hugepage (deleted)");
        assert_eq!(classify(&huge, &mut HashMap::new()), (Content::Zero, Pages::Present));
        assert_eq!(trackable(&huge), Some(Paging::Huge));
        assert_eq!(trackable(&entry("rw-p", 0, "[heap]")), Some(Paging::Base));
        assert_eq!(trackable(&entry("rw-s", 4, "/dev/zero (deleted)")), None);
        let gib =
            sdt_procfs::parse_maps_line("40000000-80000000 rw-p 00000000 00:0f 5 /anon_hugepage (deleted)");
        assert_eq!(trackable(&gib.unwrap()), None, "may hold 1 GiB pages");
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
    fn written_regions_split_by_residency() {
        use sdt_sys::uapi::PAGE_IS_WRITTEN as W;
        let region = |start: u64, end: u64, categories: u64| PageRegion { start, end, categories };
        let written = [region(0x1000, 0x5000, W), region(0x8000, 0x9000, W), region(0xa000, 0xc000, W)];
        let resident = [
            region(0x0000, 0x2000, PAGE_IS_PRESENT),
            region(0x3000, 0x4000, PAGE_IS_SWAPPED),
            region(0x6000, 0xb000, PAGE_IS_PRESENT),
        ];
        let mut out = Vec::new();
        split_by_residency(&written, &resident, &mut out);
        assert_eq!(
            out,
            [
                region(0x1000, 0x2000, W | PAGE_IS_PRESENT),
                region(0x2000, 0x3000, W),
                region(0x3000, 0x4000, W | PAGE_IS_SWAPPED),
                region(0x4000, 0x5000, W),
                region(0x8000, 0x9000, W | PAGE_IS_PRESENT),
                region(0xa000, 0xb000, W | PAGE_IS_PRESENT),
                region(0xb000, 0xc000, W),
            ]
        );
        out.clear();
        split_by_residency(&written[..1], &[], &mut out);
        assert_eq!(out, written[..1]);
    }

    #[test]
    fn a_sparse_mapping_is_scanned_where_it_holds_pages() {
        let region = |start: u64, end: u64| PageRegion { start, end, categories: PAGE_IS_PRESENT };
        let task = Task { mapping: 3, start: 1 << 30, end: 1 << 44, pages: Pages::Tracked };
        let far = (1 << 40) + 0x1000;
        let populated = [
            region(task.start, task.start + 0x2000),
            // Less than a stretch on: one part with the first.
            region(task.start + SCAN_STRETCH, task.start + SCAN_STRETCH + 0x1000),
            region(far, far + 0x3000),
        ];
        let parts: Vec<(u64, u64)> =
            populated_parts(&task, &populated).iter().map(|t| (t.start, t.end)).collect();
        assert_eq!(parts, [(task.start, task.start + SCAN_STRETCH + 0x1000), (far, far + 0x3000)]);
        let mut stretches = Vec::new();
        for part in populated_parts(&task, &populated) {
            cut_into_stretches(part, &mut stretches);
        }
        assert_eq!(stretches.len(), 3);
        assert!(stretches.iter().all(|s| s.mapping == 3 && s.pages == Pages::Tracked));
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
