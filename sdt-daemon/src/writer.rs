//! The store side of the daemon: a thread that diffs, compresses and writes each capture
//! while the program runs on.
//!
//! ```text
//!  daemon loop                          writer thread
//!  take_buffer() ◀── free buffers ◀──── (buffer back after writing)
//!  freeze, read pages into buffer, thaw
//!  submit(job) ─────── jobs (1) ──────▶ write_snapshot → verify → report line
//! ```
//!
//! Two buffers circulate, so memory stays bounded: when the writer falls behind, the
//! next capture waits for a buffer (and records how long in `stats.wait_ns`).

use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::thread::JoinHandle;

use sdt_store::{PAGE_SIZE, PageSource, RunStatus, RunWriter, SnapshotMeta, Store, Trigger};

use crate::human;

/// Page buffers in circulation.
const BUFFERS: usize = 2;

/// One capture on its way to the store.
pub(crate) struct Job {
    pub meta: SnapshotMeta,
    /// Page addresses, ascending; page `i` is at `i * PAGE_SIZE` in `data`.
    pub pages: Vec<u64>,
    pub data: Vec<u8>,
    /// Live bytes to compare with the stored snapshot (`--verify`).
    pub live: Option<Vec<(u64, Vec<u8>)>>,
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

/// Handle on the writer thread.
pub(crate) struct StoreWriter {
    jobs: Option<SyncSender<Job>>,
    free: Receiver<Vec<u8>>,
    /// For buffers whose capture failed.
    free_tx: SyncSender<Vec<u8>>,
    thread: Option<JoinHandle<(RunWriter, WriteTotals, Option<String>)>>,
}

impl StoreWriter {
    /// Starts the thread. `store_root` is where `--verify` reads snapshots back from.
    pub(crate) fn start(run: RunWriter, store_root: PathBuf, quiet: bool) -> StoreWriter {
        let (jobs_tx, jobs_rx) = sync_channel::<Job>(1);
        let (free_tx, free_rx) = sync_channel::<Vec<u8>>(BUFFERS);
        for _ in 0..BUFFERS {
            free_tx.send(Vec::new()).expect("room for every buffer");
        }
        let returns = free_tx.clone();
        let thread = std::thread::Builder::new()
            .name("sdt-writer".into())
            .spawn(move || {
                let mut run = run;
                let mut totals = WriteTotals::default();
                for job in jobs_rx {
                    let name = job.meta.name.clone();
                    match write_one(&mut run, &store_root, job, quiet, &mut totals) {
                        Ok(data) => {
                            // The loop may have stopped waiting for buffers; that's fine.
                            free_tx.send(data).ok();
                        }
                        Err(e) => {
                            return (
                                run,
                                totals,
                                Some(format!("could not store {name}: {}", human::error_chain(&e))),
                            );
                        }
                    }
                }
                (run, totals, None)
            })
            .expect("spawning the writer thread");
        StoreWriter { jobs: Some(jobs_tx), free: free_rx, free_tx: returns, thread: Some(thread) }
    }

    /// A page buffer for the next capture; blocks while the writer holds them all.
    pub(crate) fn take_buffer(&self) -> Result<Vec<u8>, WriterStopped> {
        self.free.recv().map_err(|_| WriterStopped("see the message above".into()))
    }

    /// Gives back a buffer whose capture was abandoned.
    pub(crate) fn return_buffer(&self, buffer: Vec<u8>) {
        // Room is guaranteed: there are never more buffers than the channel holds.
        self.free_tx.try_send(buffer).ok();
    }

    /// Queues a capture for writing.
    pub(crate) fn submit(&self, job: Job) -> Result<(), WriterStopped> {
        let jobs = self.jobs.as_ref().expect("submit after finish");
        jobs.send(job).map_err(|_| WriterStopped("see the message above".into()))
    }

    /// Waits for every queued capture to be written and records how the run ended.
    pub(crate) fn finish(mut self, status: RunStatus) -> (WriteTotals, Option<String>) {
        drop(self.jobs.take());
        let (run, totals, error) =
            self.thread.take().expect("finish once").join().expect("writer thread panicked");
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

fn write_one(
    run: &mut RunWriter,
    store_root: &Path,
    job: Job,
    quiet: bool,
    totals: &mut WriteTotals,
) -> Result<Vec<u8>, sdt_store::Error> {
    let Job { meta, pages, data, live } = job;
    let summary = describe(&meta);
    let pause = meta.stats.pause_ns;
    let name = meta.name.clone();
    let page_bytes = PAGE_SIZE as usize;
    let report = run.write_snapshot(
        meta,
        pages
            .iter()
            .enumerate()
            .map(|(i, &addr)| (addr, PageSource::Data(&data[i * page_bytes..(i + 1) * page_bytes]))),
    )?;
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
