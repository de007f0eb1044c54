//! The store side of the daemon: a thread that diffs, compresses and writes each capture
//! while the program runs on.
//!
//! ```text
//!  daemon loop                           writer thread (SCHED_IDLE)
//!  take_buffer() ◀── recycled buffers ◀── (buffer back after writing)
//!  freeze, copy pages into buffer, thaw
//!  submit(job) ──────── queue ──────────▶ write_snapshot → verify → report line
//! ```
//!
//! The writer runs on CPU time the program leaves idle, so it never slows the program or
//! the tracer. Captures may queue up behind it, up to a budget of copied pages
//! (`sdt run --queue-mb`); beyond that, the next capture waits for the writer (back-pressure, recorded in
//! `stats.wait_ns`), so a fast-writing program cannot make the daemon's memory grow
//! without limit. Written-out buffers are kept for reuse (up to the same budget), and one
//! is made ready, faulted in, after each capture, so the copy never page-faults.

use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

use sdt_store::{PAGE_SIZE, PageSource, RunStatus, RunWriter, SnapshotMeta, Store, Trigger};

use crate::capture::PageRun;
use crate::human;

/// One capture on its way to the store.
pub(crate) struct Job {
    pub meta: SnapshotMeta,
    /// Pages copied, ascending, back to back at the start of `data`.
    pub copied: Vec<PageRun>,
    /// Pages unchanged since the previous snapshot, ascending.
    pub unchanged: Vec<PageRun>,
    pub data: Vec<u8>,
    /// Live bytes to compare with the stored snapshot (`--verify`).
    pub live: Option<Vec<(u64, Vec<u8>)>>,
}

impl Job {
    /// Memory the job holds until it is written.
    fn bytes(&self) -> usize {
        self.data.len() + self.live.iter().flatten().map(|(_, bytes)| bytes.len()).sum::<usize>()
    }
}

/// What the writer did over the whole run.
#[derive(Clone, Debug, Default)]
pub struct WriteTotals {
    /// Snapshots written.
    pub snapshots: u32,
    /// Bytes of snapshot files.
    pub stored_bytes: u64,
    /// Bytes the snapshots would take stored whole.
    pub full_bytes: u64,
    /// Snapshots that `--verify` found different from the live process.
    pub verify_failures: u32,
}

/// The writer thread stopped (after reporting why).
#[derive(Debug, thiserror::Error)]
#[error("the store writer stopped: {0}")]
pub struct WriterStopped(pub String);

/// Buffers shared by the daemon loop and the writer thread.
#[derive(Default)]
struct Pool {
    /// Buffers written out, for the next captures.
    free: Vec<Vec<u8>>,
    /// Bytes of buffers queued for the writer.
    queued: usize,
    /// Why the writer stopped, once it has.
    stopped: Option<String>,
    /// The writer thread, once it has started.
    writer: Option<sdt_sys::Tid>,
}

/// Handle on the writer thread.
pub(crate) struct StoreWriter {
    jobs: Option<Sender<Job>>,
    /// Sizes of buffers to fault in ahead of the next capture.
    prefault: Option<Sender<usize>>,
    /// Bytes of queued captures beyond which the next capture waits.
    budget: usize,
    pool: Arc<(Mutex<Pool>, Condvar)>,
    thread: Option<JoinHandle<(RunWriter, WriteTotals)>>,
}

impl StoreWriter {
    /// Starts the thread. `store_root` is where `--verify` reads snapshots back from.
    pub(crate) fn start(run: RunWriter, store_root: PathBuf, quiet: bool, budget: usize) -> StoreWriter {
        let (jobs_tx, jobs_rx) = channel::<Job>();
        let pool = Arc::new((Mutex::new(Pool::default()), Condvar::new()));
        let shared = Arc::clone(&pool);
        let thread = std::thread::Builder::new()
            .name("sdt-writer".into())
            .spawn(move || write_loop(run, &store_root, quiet, budget, &jobs_rx, &shared))
            .expect("spawning the writer thread");
        let (prefault_tx, prefault_rx) = channel::<usize>();
        let shared = Arc::clone(&pool);
        std::thread::Builder::new()
            .name("sdt-prefault".into())
            .spawn(move || prefault_loop(&prefault_rx, &shared))
            .expect("spawning the prefault thread");
        StoreWriter { jobs: Some(jobs_tx), prefault: Some(prefault_tx), budget, pool, thread: Some(thread) }
    }

    /// A page buffer for the next capture, and the nanoseconds spent waiting for it: it
    /// blocks while the queue is over its budget.
    pub(crate) fn take_buffer(&self) -> Result<(Vec<u8>, u64), WriterStopped> {
        let (lock, cond) = &*self.pool;
        let full = |p: &mut Pool| p.queued >= self.budget && p.stopped.is_none();
        let mut pool = lock.lock().unwrap();
        let mut waited = 0;
        if full(&mut pool) {
            // The program is stopped now: the writer must not wait for idle CPU time. It
            // goes back to idle time itself once the queue is empty.
            if let Some(writer) = pool.writer {
                sdt_sys::set_thread_urgency(Some(writer), sdt_sys::Urgency::Normal).ok();
            }
            let start = sdt_sys::monotonic_ns();
            pool = cond.wait_while(pool, full).unwrap();
            waited = sdt_sys::monotonic_ns() - start;
        }
        if let Some(why) = &pool.stopped {
            return Err(WriterStopped(why.clone()));
        }
        // The largest: it is the most likely to hold the next capture without growing.
        let largest = pool.free.iter().enumerate().max_by_key(|(_, b)| b.len()).map(|(i, _)| i);
        Ok((largest.map(|i| pool.free.swap_remove(i)).unwrap_or_default(), waited))
    }

    /// Makes sure a recycled buffer of at least `bytes` will wait for the next capture, its
    /// pages already faulted in, so that the copy in the pause does not fault. The
    /// faulting happens on a helper thread while the program runs.
    pub(crate) fn prepare(&self, bytes: usize) {
        let pool = self.pool.0.lock().unwrap();
        let pooled: usize = pool.free.iter().map(Vec::len).sum();
        if bytes == 0 || pool.free.iter().any(|b| b.len() >= bytes) || pooled + bytes > self.budget {
            return;
        }
        drop(pool);
        if let Some(prefault) = &self.prefault {
            prefault.send(bytes).ok();
        }
    }

    /// Gives back a buffer whose capture was abandoned.
    pub(crate) fn return_buffer(&self, buffer: Vec<u8>) {
        self.pool.0.lock().unwrap().free.push(buffer);
    }

    /// Queues a capture for writing.
    pub(crate) fn submit(&self, job: Job) -> Result<(), WriterStopped> {
        let mut pool = self.pool.0.lock().unwrap();
        if let Some(why) = &pool.stopped {
            return Err(WriterStopped(why.clone()));
        }
        pool.queued += job.bytes();
        drop(pool);
        self.jobs
            .as_ref()
            .expect("submit after finish")
            .send(job)
            .map_err(|_| WriterStopped("the writer thread is gone".into()))
    }

    /// Waits for every queued capture to be written and records how the run ended.
    pub(crate) fn finish(mut self, status: RunStatus) -> (WriteTotals, Option<String>) {
        drop(self.jobs.take());
        drop(self.prefault.take());
        let (run, totals) = self.thread.take().expect("finish once").join().expect("writer thread panicked");
        let error = self.pool.0.lock().unwrap().stopped.clone();
        let status = match &error {
            Some(message) => RunStatus::Failed { message: message.clone() },
            None => status,
        };
        let error = match run.finish(status) {
            Ok(()) => error,
            Err(e) => error.or(Some(format!("could not record the run's end: {}", human::error_chain(&e)))),
        };
        (totals, error)
    }
}

/// The prefault thread: makes buffers of the sizes asked for, faulted in, for the pool.
/// It runs at normal priority: the faults cost the program CPU time now rather than in
/// the next pause, where they would stop every thread.
fn prefault_loop(sizes: &Receiver<usize>, pool: &(Mutex<Pool>, Condvar)) {
    for bytes in sizes {
        let mut buffer = vec![0u8; bytes];
        // calloc'd memory is mapped on first write: write to every page now (a non-zero
        // byte, which the compiler cannot drop as a no-op on zeroed memory).
        for page in buffer.chunks_mut(PAGE_SIZE as usize) {
            page[0] = 1;
        }
        pool.0.lock().unwrap().free.push(std::hint::black_box(buffer));
    }
}

/// The writer thread: writes each job, hands its buffer back, stops at the first error.
fn write_loop(
    mut run: RunWriter,
    store_root: &Path,
    quiet: bool,
    budget: usize,
    jobs: &Receiver<Job>,
    pool: &(Mutex<Pool>, Condvar),
) -> (RunWriter, WriteTotals) {
    let background = || {
        if let Err(e) = sdt_sys::set_thread_urgency(None, sdt_sys::Urgency::Background) {
            log::debug!("writer stays at normal priority: {e}");
        }
    };
    background();
    let (lock, cond) = pool;
    lock.lock().unwrap().writer = Some(sdt_sys::current_tid());
    let mut totals = WriteTotals::default();
    for job in jobs {
        let name = job.meta.name.clone();
        let len = job.bytes();
        let result = write_one(&mut run, store_root, job, quiet, &mut totals);
        let mut pool = lock.lock().unwrap();
        pool.queued -= len;
        if pool.queued == 0 {
            background();
        }
        match result {
            Ok(buffer) => {
                if pool.free.iter().map(Vec::len).sum::<usize>() + buffer.len() <= budget {
                    pool.free.push(buffer);
                }
            }
            Err(e) => pool.stopped = Some(format!("could not store {name}: {}", human::error_chain(&e))),
        }
        let stop = pool.stopped.is_some();
        drop(pool);
        cond.notify_all();
        if stop {
            break;
        }
    }
    (run, totals)
}

fn write_one(
    run: &mut RunWriter,
    store_root: &Path,
    job: Job,
    quiet: bool,
    totals: &mut WriteTotals,
) -> Result<Vec<u8>, sdt_store::Error> {
    let Job { meta, copied, unchanged, data, live } = job;
    let summary = describe(&meta);
    let pause = meta.stats.pause_ns;
    let name = meta.name.clone();
    let report = run.write_snapshot(meta, page_sources(&copied, &unchanged, &data))?;
    totals.snapshots += 1;
    totals.stored_bytes += report.file_bytes;
    totals.full_bytes += report.full_bytes;
    if !quiet {
        eprintln!(
            "sdt: {name} {summary}: paused {}, stored {} (full {})",
            human::duration_ns(pause),
            human::bytes(report.file_bytes),
            human::bytes(report.full_bytes)
        );
    }
    if let Some(live) = live {
        match verify(store_root, run, &name, &live) {
            Ok(compared) => {
                eprintln!("sdt: verify {name}: matches the live process ({compared} bytes compared)")
            }
            Err(problem) => {
                totals.verify_failures += 1;
                eprintln!("sdt: verify {name}: MISMATCH: {problem}");
            }
        }
    }
    Ok(data)
}

/// The pages of a capture in address order: each copied page with its bytes from `data`,
/// each unchanged run as one item.
fn page_sources<'a>(
    copied: &'a [PageRun],
    unchanged: &'a [PageRun],
    data: &'a [u8],
) -> impl Iterator<Item = (u64, PageSource<'a>)> + 'a {
    let page = PAGE_SIZE as usize;
    let pages = data.chunks_exact(page);
    let addrs = copied.iter().flat_map(|run| (0..run.pages).map(move |i| run.addr + i * PAGE_SIZE));
    let copied = addrs.zip(pages).map(|(addr, bytes)| (addr, PageSource::Data(bytes)));
    let unchanged = unchanged.iter().map(|run| (run.addr, PageSource::Unchanged(run.pages)));
    merge_by_address(copied, unchanged)
}

/// Merges two address-ordered sequences into one.
fn merge_by_address<'a>(
    a: impl Iterator<Item = (u64, PageSource<'a>)>,
    b: impl Iterator<Item = (u64, PageSource<'a>)>,
) -> impl Iterator<Item = (u64, PageSource<'a>)> {
    let (mut a, mut b) = (a.peekable(), b.peekable());
    std::iter::from_fn(move || match (a.peek(), b.peek()) {
        (Some(x), Some(y)) if x.0 <= y.0 => a.next(),
        (Some(_), Some(_)) => b.next(),
        (Some(_), None) => a.next(),
        (None, _) => b.next(),
    })
}

/// `breakpoint 1/2/10 hit 3 on thread 1234` or `timer`.
fn describe(meta: &SnapshotMeta) -> String {
    match &meta.trigger {
        Trigger::Breakpoint { level, class, id, hit, tid, .. } => {
            format!("breakpoint {level}/{class}/{id} hit {hit} on thread {tid}")
        }
        Trigger::Timer => "timer".to_owned(),
    }
}

/// Reads the snapshot back from the store and compares it with the live bytes.
fn verify(store_root: &Path, run: &RunWriter, name: &str, live: &[(u64, Vec<u8>)]) -> Result<u64, String> {
    let store = Store::open(store_root).map_err(|e| human::error_chain(&e))?;
    let snapshot =
        store.open_run(&run.id()).and_then(|r| r.open_snapshot(name)).map_err(|e| human::error_chain(&e))?;
    let mut compared = 0;
    for (start, bytes) in live {
        let mut stored = vec![0u8; bytes.len()];
        snapshot.read(*start, &mut stored).map_err(|e| human::error_chain(&e))?;
        if let Some(i) = stored.iter().zip(bytes).position(|(a, b)| a != b) {
            return Err(format!(
                "byte at {:#x} is {:#04x} in the store, {:#04x} in the process",
                start + i as u64,
                stored[i],
                bytes[i]
            ));
        }
        compared += bytes.len() as u64;
    }
    Ok(compared)
}
