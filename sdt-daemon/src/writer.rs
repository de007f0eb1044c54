//! The store side of the daemon: spares made ready for the next capture, the commit that
//! makes a capture a snapshot, and a compactor thread that diffs and compresses the
//! committed snapshots on CPU time the program leaves idle.
//!
//! ```text
//!  daemon loop                                   helper threads
//!  take_spare() ◀─────────── ready spare ◀─────── spare thread: file allocated, the
//!  freeze, copy pages into the spare              capture buffer grown and touched
//!  resume every thread but the breaking one       (holds still until the resume)
//!  commit: handed to a writer child ───────────▶ settle thread: waits for S<seq>.raw,
//!  prepare(n) ────────────────────────────────▶   then compactor (SCHED_IDLE): S<seq>.snap
//!  resume the breaking thread: its number          spare thread (once the buffer is back)
//! ```
//!
//! A capture hardly waits for the spare thread: the spare is offered as soon as its file
//! is made and its buffer grown, then faulted in a piece at a time; a capture that comes
//! meanwhile takes it as it is (its copy faults in the rest), and the spare thread holds
//! still until the program runs again, so that it takes no CPU or memory-map lock from
//! the copy. Spares share one capture buffer, kept for the whole run (`SpillFile`): after
//! the first capture, copies go into memory already in place.
//!
//! Captures go to disk raw, in one copy, whatever compaction is doing. A snapshot whose
//! commit returned is in the store even if `sdt` dies the next instant: the commit hands
//! the writes (pages, record, rename to `S<seq>.raw`) to a child process that shares
//! sdt's memory and finishes them whatever becomes of sdt (`sdt_sys::detached`), so the
//! breaking thread gets its number without waiting for the disk. The next capture, and
//! the spare thread, wait for that write to settle: it holds the capture buffer. A timed
//! snapshot, which no thread waits for, is written by the tracer itself. What the raw log
//! may hold before compaction catches up is bounded (`sdt run --disk-budget`): past it, a
//! breakpoint's capture waits for the compactor (which then runs at normal priority),
//! and a timed snapshot is skipped.
//!
//! When the program ends, compaction stops between two blocks (unless asked to finish
//! first): what it has not reached stays raw and readable, for a background
//! `sdt compact` to take over, so that `sdt run` returns with the program.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

use sdt_store::{
    HandedCommit, PageSpan, RunLog, RunStatus, RunWriter, SnapshotMeta, Spares, SpillFile, Store,
};

use sdt_sys::Tid;

use crate::headroom;
use crate::idle::{self, IdleMeter};
use crate::keeper::Keeper;
use crate::{human, procfs};

/// What the store did over the whole run.
#[derive(Clone, Debug, Default)]
pub struct WriteTotals {
    /// Snapshots committed.
    pub snapshots: u32,
    /// Snapshots the store could not take (the program's breakpoint returned
    /// `SDT_DECLINED`), with why.
    pub lost: Vec<String>,
    /// Bytes of compacted snapshot files.
    pub stored_bytes: u64,
    /// Bytes the compacted snapshots would take stored whole.
    pub full_bytes: u64,
    /// Snapshots left raw (compaction stopped at the program's end, or after an error),
    /// for `sdt compact`.
    pub raw_left: u32,
    /// Timed snapshots skipped because the raw log was at its budget.
    pub timed_skipped: u32,
    /// Snapshots that `--verify` found different from the live process.
    pub verify_failures: u32,
    /// The files the snapshots map that could not be kept with the run, each with why.
    pub not_kept: Vec<String>,
}

/// A committed snapshot, for the compactor, with the live bytes to compare it with
/// (`--verify`).
struct Note {
    seq: u32,
    name: String,
    live: Option<Vec<(u64, Vec<u8>)>>,
    /// What it adds to the raw log (and, with `live`, to memory) until compacted.
    bytes: u64,
}

/// What the raw log holds that compaction has not taken yet, shared with the compactor.
#[derive(Default)]
struct Backlog {
    bytes: u64,
    /// The compactor stopped (after an error): the backlog will not shrink.
    stopped: bool,
    /// The program has ended: compaction no longer waits for spare CPU time.
    ended: bool,
    /// The compactor thread, to run it at normal priority while a capture waits for it.
    compactor: Option<sdt_sys::Tid>,
    /// Raw bytes compacted so far, and the nanoseconds it took: the compactor's pace.
    compacted_bytes: u64,
    compacting_ns: u64,
}

impl Backlog {
    /// Whether what is left could be compacted within `within` at the compactor's pace
    /// so far (or [`ASSUMED_PACE`] before it has compacted anything).
    fn could_finish_within(&self, within: std::time::Duration) -> bool {
        let within_ns = within.as_nanos() as u64;
        if self.compacted_bytes == 0 || self.compacting_ns == 0 {
            return self.bytes <= ASSUMED_PACE * within_ns / 1_000_000_000;
        }
        (self.bytes as u128 * self.compacting_ns as u128) / (self.compacted_bytes as u128)
            <= within_ns as u128
    }
}

/// Raw bytes a second the compactor is taken to compact before it has shown its pace: a
/// cautious figure for one CPU diffing and compressing, so that a run's end does not wait
/// in vain for a backlog it cannot finish.
const ASSUMED_PACE: u64 = 200 << 20;

/// The spare made ready for the next capture.
#[derive(Default)]
struct Ready {
    spare: Option<SpillFile>,
    /// The spare thread has the spare out, making or growing it, or faulting a piece of
    /// it in.
    out: bool,
    /// A capture is under way: the spare thread waits until it ends.
    capturing: bool,
    /// The spare thread is growing the spare to the program's resident size, for the
    /// first capture, which waits for it: faulting the rest in itself, on every capture
    /// thread at once, would take it longer.
    growing: bool,
    /// A capture has taken a spare: spares are sized by what captures copy from now on.
    taken: bool,
    /// The program may be captured soon: until the first capture, keep a spare as large
    /// as it ready ([`StoreWriter::expect_captures`]).
    expected: bool,
    /// The program has ended: the spare thread leaves what it is making.
    closing: bool,
    /// Commits handed to a writer child and not settled yet: they hold the capture
    /// buffer.
    writing: u32,
    /// Why the last spare could not be made, once.
    failed: Option<String>,
}

/// The ready spare, shared by the daemon loop and the spare thread, and the signal of
/// its changes (the spare put back, a capture ended).
#[derive(Default)]
struct Shared {
    ready: Mutex<Ready>,
    changed: Condvar,
}

impl Shared {
    fn lock(&self) -> std::sync::LockResult<std::sync::MutexGuard<'_, Ready>> {
        self.ready.lock()
    }
}

/// Keeps the spare thread still while a capture is under way; dropped once the program
/// runs again.
pub(crate) struct CaptureUnderWay(Arc<Shared>);

impl Drop for CaptureUnderWay {
    fn drop(&mut self) {
        self.0.ready.lock().unwrap().capturing = false;
        self.0.changed.notify_all();
    }
}

/// Handle on the store side of a run.
pub(crate) struct StoreWriter {
    log: RunLog,
    spares: Spares,
    ready: Arc<Shared>,
    /// Sizes of spares to make ready.
    prepare: Option<Sender<usize>>,
    /// A size was asked for since the run started.
    prepared: bool,
    spare_maker: Option<JoinHandle<()>>,
    committed: Option<Sender<Note>>,
    /// Commits handed over, to the settle thread.
    handed: Option<Sender<(HandedCommit, Note)>>,
    settler: Option<JoinHandle<()>>,
    /// Snapshots whose handed-over writes failed after their number was given.
    failed_after: Arc<Mutex<Vec<String>>>,
    compactor: Option<JoinHandle<(WriteTotals, Option<String>)>>,
    /// Keeps the files each snapshot maps with the run.
    keeper: Option<Keeper>,
    /// Set at the program's end to stop compaction between two blocks.
    stop_compaction: Arc<AtomicBool>,
    backlog: Arc<(Mutex<Backlog>, Condvar)>,
    /// Bytes the backlog may reach before captures wait or are skipped.
    budget: u64,
    quiet: bool,
    totals: WriteTotals,
}

/// Whether a capture may go ahead.
pub(crate) enum Room {
    /// Yes, after waiting this many nanoseconds for the compactor.
    Ready(u64),
    /// No: why.
    Skipped(String),
}

impl StoreWriter {
    /// Starts the spare and compactor threads for the run `log` records of the program
    /// `pid`, whose raw log may hold `budget` bytes not compacted yet. `store_root` is
    /// where `--verify` reads snapshots back from.
    pub(crate) fn start(
        log: RunLog,
        pid: Tid,
        store_root: PathBuf,
        budget: u64,
        quiet: bool,
    ) -> Result<StoreWriter, sdt_store::Error> {
        let spares = log.spares();
        let mut compactor = log.compactor()?;
        let stop_compaction = Arc::new(AtomicBool::new(false));
        compactor.cancel_on(Arc::clone(&stop_compaction));
        let (committed_tx, committed_rx) = channel::<Note>();
        let run = log.run().id();
        let keeper = Keeper::start(&store_root, run, pid);
        let backlog = Arc::new((Mutex::new(Backlog::default()), Condvar::new()));
        let shared = Arc::clone(&backlog);
        let compactor = std::thread::Builder::new()
            .name("sdt-compact".into())
            .spawn(move || compact_loop(&mut compactor, &store_root, run, &committed_rx, &shared, budget / 2))
            .expect("spawning the compactor thread");
        let ready = Arc::new(Shared::default());
        let failed_after = Arc::new(Mutex::new(Vec::new()));
        let (handed_tx, handed_rx) = channel::<(HandedCommit, Note)>();
        let (to_compactor, shared, failed) =
            (committed_tx.clone(), Arc::clone(&ready), Arc::clone(&failed_after));
        let settler = std::thread::Builder::new()
            .name("sdt-settle".into())
            .spawn(move || settle_loop(&handed_rx, &to_compactor, &shared, &failed))
            .expect("spawning the settle thread");
        let (prepare_tx, prepare_rx) = channel::<usize>();
        let (spare_maker, shared) = (spares.clone(), Arc::clone(&ready));
        let spare_maker = std::thread::Builder::new()
            .name("sdt-spare".into())
            .spawn(move || spare_loop(&spare_maker, &prepare_rx, &shared, pid))
            .expect("spawning the spare thread");
        Ok(StoreWriter {
            log,
            spares,
            ready,
            prepare: Some(prepare_tx),
            prepared: false,
            spare_maker: Some(spare_maker),
            committed: Some(committed_tx),
            handed: Some(handed_tx),
            settler: Some(settler),
            failed_after,
            compactor: Some(compactor),
            keeper: Some(keeper),
            stop_compaction,
            backlog,
            budget,
            quiet,
            totals: WriteTotals::default(),
        })
    }

    /// Whether the raw log has room for another capture: below its budget, yes; above
    /// it, a breakpoint's capture waits for the compactor, and a timed one (`timed`) is
    /// skipped, as is any once compaction has stopped.
    pub(crate) fn room(&mut self, timed: bool) -> Room {
        let (lock, cond) = &*self.backlog;
        let mut backlog = lock.lock().unwrap();
        if backlog.bytes < self.budget {
            return Room::Ready(0);
        }
        let full = |b: &Backlog| {
            format!(
                "the raw log holds {} not compacted yet, at its budget of {} (sdt run --disk-budget)",
                human::bytes(b.bytes),
                human::bytes(self.budget)
            )
        };
        if timed || backlog.stopped {
            if timed {
                self.totals.timed_skipped += 1;
            }
            return Room::Skipped(full(&backlog));
        }
        if let Some(compactor) = backlog.compactor {
            sdt_sys::set_thread_urgency(Some(compactor), sdt_sys::Urgency::Normal).ok();
        }
        let start = sdt_sys::monotonic_ns();
        backlog = cond.wait_while(backlog, |b| b.bytes >= self.budget && !b.stopped).unwrap();
        if backlog.bytes >= self.budget {
            return Room::Skipped(full(&backlog));
        }
        Room::Ready(sdt_sys::monotonic_ns() - start)
    }

    /// Says whether a capture may come soon (see [`spare_loop`]): the program may reach a
    /// breakpoint, or timed snapshots are asked for.
    pub(crate) fn expect_captures(&self, expected: bool) {
        self.ready.lock().unwrap().expected = expected;
    }

    /// A spare for the capture about to start: the one made ready if there is one (taken
    /// as it is, should the spare thread be faulting it in), else a new one with no room
    /// yet (the capture grows it); the nanoseconds waited for it, and of them those waited
    /// for the last commit's writes to give the capture buffer back; and what keeps the
    /// spare thread still until the capture's program runs again.
    pub(crate) fn take_spare(&self) -> Result<(SpillFile, u64, u64, CaptureUnderWay), sdt_store::Error> {
        let start = sdt_sys::monotonic_ns();
        let ready = self.ready.changed.wait_while(self.ready.lock().unwrap(), |r| r.growing).unwrap();
        // The last commit's writes hold the capture buffer until they settle.
        let settling = sdt_sys::monotonic_ns();
        let (mut ready, waited) =
            self.ready.changed.wait_timeout_while(ready, SETTLE_WAIT, |r| r.writing > 0).unwrap();
        let settle_ns = sdt_sys::monotonic_ns() - settling;
        if waited.timed_out() {
            log::warn!(
                "the last snapshot's writes have not settled in {SETTLE_WAIT:?}: this capture takes a buffer of its own"
            );
        }
        ready.capturing = true;
        ready.taken = true;
        let under_way = CaptureUnderWay(Arc::clone(&self.ready));
        if let Some(why) = ready.failed.take() {
            log::debug!("no spare was made ready: {why}");
        }
        // The spare thread puts it back within one piece, unless making its file waits for
        // the file system (its journal): then the capture makes its own (with a buffer of
        // its own, should the spare thread's still hold the run's).
        ready = self.ready.changed.wait_timeout_while(ready, OUT_WAIT, |r| r.out).unwrap().0;
        let taken = ready.spare.take();
        drop(ready);
        let spare = match taken {
            Some(spare) => spare,
            None => self.spares.make()?,
        };
        Ok((spare, sdt_sys::monotonic_ns() - start, settle_ns, under_way))
    }

    /// Makes sure a spare of at least `bytes` faulted in, and room for a quarter more,
    /// waits for the next capture, made on a helper thread while the program runs.
    ///
    /// The first call always reaches the spare thread: it stops sizing the spare by the
    /// program's resident memory then.
    pub(crate) fn prepare(&mut self, bytes: usize) {
        let first = !std::mem::replace(&mut self.prepared, true);
        let ready = self.ready.lock().unwrap();
        let room = ready.spare.as_ref().is_some_and(|s| s.capacity() >= bytes);
        if !first && (bytes == 0 || room) {
            return;
        }
        drop(ready);
        if let Some(prepare) = &self.prepare {
            prepare.send(bytes).ok();
        }
    }

    /// Commits `spill` as the snapshot `meta` describes (see [`RunLog::commit`]): its
    /// writes handed to a writer child, which the settle thread waits for before the
    /// compactor gets the snapshot; with `now` (a timed snapshot, the end of a
    /// refinement), written before this returns. Says so on stderr unless quiet.
    pub(crate) fn commit(
        &mut self,
        spill: SpillFile,
        copied: &[PageSpan],
        unchanged: &[PageSpan],
        meta: &SnapshotMeta,
        live: Option<Vec<(u64, Vec<u8>)>>,
        now: bool,
    ) -> Result<(), sdt_store::Error> {
        let handed = match now {
            true => {
                self.log.commit(spill, copied, unchanged, meta)?;
                None
            }
            false => Some(self.log.hand_over_commit(spill, copied, unchanged, meta)?),
        };
        self.totals.snapshots += 1;
        if let Some(keeper) = &mut self.keeper {
            keeper.offer(meta);
        }
        let bytes = meta.stats.copied_bytes + live.iter().flatten().map(|(_, b)| b.len() as u64).sum::<u64>();
        self.backlog.0.lock().unwrap().bytes += bytes;
        if !self.quiet {
            eprintln!(
                "sdt: {} {}: paused {}, copied {}",
                meta.name,
                describe(meta),
                human::duration_ns(meta.stats.pause_ns),
                human::bytes(meta.stats.copied_bytes)
            );
        }
        let note = Note { seq: meta.seq, name: meta.name.clone(), live, bytes };
        match (handed, &self.handed) {
            (Some(handed), Some(settler)) => {
                self.ready.lock().unwrap().writing += 1;
                settler.send((handed, note)).ok();
            }
            _ => {
                if let Some(compactor) = &self.committed {
                    compactor.send(note).ok();
                }
            }
        }
        Ok(())
    }

    /// Counts a capture the store could not take.
    pub(crate) fn lost(&mut self, why: String) {
        self.totals.lost.push(why);
    }

    /// Records how the run ended, once the compactor has stopped (at normal priority now:
    /// the program has ended): after at most [`END_GRACE`], between two blocks, leaving
    /// what it has not compacted raw ([`WriteTotals::raw_left`]); or, with
    /// `wait_for_compaction`, once it has compacted everything.
    pub(crate) fn finish(
        mut self,
        status: RunStatus,
        wait_for_compaction: bool,
    ) -> (WriteTotals, Option<String>) {
        let start = sdt_sys::monotonic_ns();
        let since = |t: u64| (sdt_sys::monotonic_ns() - t) / 1000;
        // Every handed-over commit settles, and reaches the compactor, first.
        drop(self.handed.take());
        if let Some(settler) = self.settler.take() {
            settler.join().ok();
        }
        self.totals.lost.append(&mut self.failed_after.lock().unwrap());
        drop(self.prepare.take());
        drop(self.committed.take());
        // The spare it may be making is removed with the one made ready: no spare outlives
        // the run. It stops at its next piece.
        self.ready.lock().unwrap().closing = true;
        if let Some(maker) = self.spare_maker.take() {
            maker.join().ok();
        }
        self.ready.lock().unwrap().spare = None;
        let spare_stopped = since(start);
        // The program has ended: the compactor may have the CPUs now.
        let mut backlog = self.backlog.0.lock().unwrap();
        backlog.ended = true;
        if let Some(compactor) = backlog.compactor {
            sdt_sys::set_thread_urgency(Some(compactor), sdt_sys::Urgency::Normal).ok();
        }
        drop(backlog);
        self.backlog.1.notify_all();
        if !wait_for_compaction {
            // A short run's few snapshots are compacted before sdt returns; a long
            // backlog is left for the background at once.
            let (backlog, caught_up) = &*self.backlog;
            let held = backlog.lock().unwrap();
            if held.could_finish_within(END_GRACE) {
                drop(caught_up.wait_timeout_while(held, END_GRACE, |b| b.bytes > 0 && !b.stopped).unwrap());
            }
            self.stop_compaction.store(true, Ordering::Relaxed);
        }
        let grace_over = since(start);
        let (compacted, compact_error) =
            self.compactor.take().expect("finish once").join().expect("compactor thread panicked");
        let compactor_stopped = since(start);
        let not_kept = self.keeper.take().map(Keeper::finish).unwrap_or_default();
        let totals = WriteTotals {
            not_kept,
            timed_skipped: self.totals.timed_skipped,
            stored_bytes: compacted.stored_bytes,
            full_bytes: compacted.full_bytes,
            raw_left: compacted.raw_left,
            verify_failures: compacted.verify_failures,
            ..std::mem::take(&mut self.totals)
        };
        let error = match self.log.finish(status) {
            Ok(()) => compact_error,
            Err(e) => Some(format!("could not record the run's end: {}", human::error_chain(&e))),
        };
        log::debug!(
            "run's end: spare thread stopped at {spare_stopped} µs, compaction told to stop at {grace_over} µs, \
             stopped at {compactor_stopped} µs, end recorded at {} µs",
            since(start)
        );
        (totals, error)
    }
}

/// How long the end of a run waits for compaction to catch up before leaving the rest to
/// a background `sdt compact`.
const END_GRACE: std::time::Duration = std::time::Duration::from_millis(200);

/// The spare thread: makes spares of the sizes asked for, allocated and faulted in, one
/// at a time. It holds still while a capture is under way.
///
/// Until the first capture asks for a size, it keeps a spare as large as the program's
/// resident memory ready (checked every [`WATCH_EVERY`]) while a capture is expected: the
/// first snapshot copies every page, and faulting a spare in during that pause would
/// double it. Where none is (a program without breakpoints, run without timed snapshots),
/// that memory would only take CPU time from the program: a JVM growing to 220 MB, its
/// threads busy on both CPUs here, took 1.9 times as long under `sdt run` as alone.
///
/// From its first piece of work it runs as urgently as the tracer where it may: the
/// faults cost the program CPU time now rather than in the next pause, where they would
/// stop every thread. At normal priority, a program whose threads kept both CPUs busy
/// held the growth for the first snapshot of the paper's FFT (70 MB) off for 130–220 ms
/// instead of 4–11, and that snapshot waited 45–65 ms of its pause for it (memory the
/// process had before; memory new to a virtual machine costs more either way).
fn spare_loop(spares: &Spares, sizes: &Receiver<usize>, shared: &Shared, pid: Tid) {
    let mut watching = true;
    // Made as urgent as the tracer.
    let mut urgent = false;
    loop {
        let wanted = sizes.recv_timeout(WATCH_EVERY);
        let made = match wanted {
            // Only the latest request matters.
            Ok(bytes) => {
                watching = false;
                make_urgent(&mut urgent);
                // Asked for nothing (the first capture, which met every page for the first
                // time), a spare is made all the same: it leaves the buffer that capture
                // grew to the kernel.
                let bytes = sizes.try_iter().last().unwrap_or(bytes);
                let start = sdt_sys::monotonic_ns();
                let made = make_ready(spares, shared, bytes);
                log::debug!("spare of {bytes} bytes made in {} µs", (sdt_sys::monotonic_ns() - start) / 1000);
                made
            }
            Err(RecvTimeoutError::Timeout) if watching => {
                let held = shared.lock().unwrap();
                watching = !held.taken;
                let (expected, capacity) =
                    (held.expected, held.spare.as_ref().map_or(0, SpillFile::capacity));
                drop(held);
                if !watching || !expected {
                    continue;
                }
                let Some(resident) = procfs::resident_bytes(pid) else { continue };
                if capacity as u64 >= resident {
                    continue;
                }
                shared.lock().unwrap().growing = true;
                make_urgent(&mut urgent);
                let start = sdt_sys::monotonic_ns();
                let grown = make_ready(spares, shared, resident as usize);
                log::debug!(
                    "spare grown to the program's {resident} resident bytes in {} µs",
                    (sdt_sys::monotonic_ns() - start) / 1000
                );
                shared.lock().unwrap().growing = false;
                shared.changed.notify_all();
                grown
            }
            Err(RecvTimeoutError::Timeout) => continue,
            Err(RecvTimeoutError::Disconnected) => return,
        };
        if let Err(e) = made {
            shared.lock().unwrap().failed = Some(human::error_chain(&e));
        }
    }
}

/// Makes the calling spare thread as urgent as the tracer, once (`urgent` says whether
/// it is).
fn make_urgent(urgent: &mut bool) {
    if !std::mem::replace(urgent, true)
        && let Err(e) = sdt_sys::set_thread_urgency(None, sdt_sys::Urgency::Immediate)
    {
        log::debug!("the spare thread stays at normal priority: {e}");
    }
}

/// Makes a spare ready (the ready one grown, or a new one) with room for `bytes` and a
/// quarter more, then faults its first `bytes` in: memory new to the process costs more
/// than the copy into it, so room that a capture may not need is left to the capture
/// that does.
fn make_ready(spares: &Spares, shared: &Shared, bytes: usize) -> Result<(), sdt_store::Error> {
    let Some(out) = take_out(shared) else { return Ok(()) };
    // No further than the memory the machine can spare: a capture that needs more goes
    // through the buffer a window at a time.
    let limit = headroom::buffer_limit(out.as_ref().map_or(0, SpillFile::capacity));
    let room = (bytes + bytes / 4).min(limit);
    if room < bytes {
        log::debug!("the spare is held to {room} bytes of the {bytes} asked for by the memory free");
    }
    let grown = match out {
        Some(mut spare) => spare.grow(room, limit).map(|()| spare),
        None => spares.make().and_then(|mut spare| spare.grow(room, limit).map(|()| spare)),
    };
    match grown {
        Ok(mut spare) => {
            // A buffer faulted in for a much larger capture (the first) is left to the
            // kernel past what the next is likely to copy, should memory run short.
            // (A capture may hold the buffer, or have given it back meanwhile: then the
            // spare has one of its own.)
            let keep = 2 * room + RELEASE_SLACK;
            let (held, idle) = (spare.buffer_held(), spares.idle_buffer_held());
            if held > keep {
                spare.release_past(room);
            }
            if idle > keep {
                spares.release_idle_buffer_past(room);
            }
            if held.max(idle) > keep {
                log::debug!("capture buffer of {} bytes left to the kernel past {room}", held.max(idle));
            }
            put_back(shared, Some(spare))
        }
        Err(e) => {
            put_back(shared, None);
            return Err(e);
        }
    }
    fault_in(shared, bytes);
    Ok(())
}

/// How much more than twice what the next capture is likely to copy the capture buffer
/// keeps whole before the rest is left to the kernel ([`SpillFile::release_past`]).
const RELEASE_SLACK: usize = 64 << 20;

/// Bytes the spare thread faults in at a time: a capture that wants the spare meanwhile
/// waits for one piece (about 100 µs)…
const FAULT_PIECE: usize = 256 << 10;

/// …or for the file system while the spare thread makes a file, this long at most.
const OUT_WAIT: std::time::Duration = std::time::Duration::from_millis(20);

/// Faults the ready spare's first `bytes` in, a piece at a time, holding still while a
/// capture is under way, until they are or a capture took it.
fn fault_in(shared: &Shared, bytes: usize) {
    while let Some(Some(mut spare)) = take_out(shared) {
        let whole = spare.fault_in(FAULT_PIECE);
        let done = whole || spare.faulted() >= bytes;
        put_back(shared, Some(spare));
        if done {
            return;
        }
    }
    // Taken by a capture, or the run is closing.
    put_back(shared, None);
}

/// The ready spare (`Some(None)` if there is none), taken out for the spare thread to
/// work on once no capture is under way, until [`put_back`]; `None` if the run is closing.
fn take_out(shared: &Shared) -> Option<Option<SpillFile>> {
    // A commit's writes hold the capture buffer until they settle: a spare made meanwhile
    // would get a new one.
    let ready = shared.changed.wait_while(shared.lock().unwrap(), |r| r.capturing).unwrap();
    let mut ready =
        shared.changed.wait_timeout_while(ready, SETTLE_WAIT, |r| r.writing > 0 || r.capturing).unwrap().0;
    if ready.closing {
        return None;
    }
    ready.out = true;
    Some(ready.spare.take())
}

/// Ends [`take_out`], with the spare it took (or made) ready again.
fn put_back(shared: &Shared, spare: Option<SpillFile>) {
    let mut ready = shared.lock().unwrap();
    if spare.is_some() {
        ready.spare = spare;
    }
    ready.out = false;
    drop(ready);
    shared.changed.notify_all();
}

/// The longest a capture or the spare thread waits for the last commit's writes to
/// settle before going on without the capture buffer they hold.
const SETTLE_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// The settle thread: waits for each handed-over commit's writes, gives its capture
/// buffer back, and hands the snapshot to the compactor; one whose writes failed (after
/// its number was given) is said on stderr and counted lost.
fn settle_loop(
    handed: &Receiver<(HandedCommit, Note)>,
    compactor: &Sender<Note>,
    shared: &Shared,
    failed: &Mutex<Vec<String>>,
) {
    for (commit, note) in handed {
        let settled = commit.settle();
        shared.lock().unwrap().writing -= 1;
        shared.changed.notify_all();
        match settled {
            Ok(_) => {
                compactor.send(note).ok();
            }
            Err(e) => {
                let why = format!(
                    "{}: its writes failed after its number was given: {}",
                    note.name,
                    human::error_chain(&e)
                );
                eprintln!("sdt: error: {why}");
                failed.lock().unwrap().push(why);
            }
        }
    }
}

/// How often the spare thread checks the program's size before its first capture (a read
/// of `statm`, some 10 µs). At 50 ms, a program that fills 96 MiB in its first 30 ms and
/// has its first snapshot at 44 ms (the grid solver of `scripts/bench large`, `--every
/// 44`) met a spare grown for part of it: S0 paused 32–50 ms (median 34 of 8 runs), 17–30
/// (median 18) at 10 ms, the runs by turns.
const WATCH_EVERY: std::time::Duration = std::time::Duration::from_millis(10);

/// The compactor thread: compacts each committed snapshot in order while the program
/// runs when the machine has CPU time to spare or the raw log holds `eager_from` bytes
/// (at idle priority, [`wait_for_spare_cpu`]); at the end, at normal priority, whatever
/// is left, unless told to stop. Stops at the first error: what is not compacted stays
/// readable, raw.
fn compact_loop(
    writer: &mut RunWriter,
    store_root: &std::path::Path,
    run: sdt_store::RunId,
    committed: &Receiver<Note>,
    backlog: &(Mutex<Backlog>, Condvar),
    eager_from: u64,
) -> (WriteTotals, Option<String>) {
    let background = || {
        if let Err(e) = sdt_sys::set_thread_urgency(None, sdt_sys::Urgency::Background) {
            log::debug!("compactor stays at normal priority: {e}");
        }
    };
    background();
    backlog.0.lock().unwrap().compactor = Some(sdt_sys::current_tid());
    let mut totals = WriteTotals::default();
    let mut error = None;
    let mut last_seq = None;
    for note in committed {
        last_seq = Some(note.seq);
        if error.is_some() {
            continue;
        }
        wait_for_spare_cpu(backlog, eager_from);
        let started = sdt_sys::monotonic_ns();
        let done = |stopped: bool| {
            let mut b = backlog.0.lock().unwrap();
            b.bytes = b.bytes.saturating_sub(note.bytes);
            if !stopped {
                b.compacted_bytes += note.bytes;
                b.compacting_ns += sdt_sys::monotonic_ns() - started;
            }
            b.stopped |= stopped;
            if b.bytes == 0 {
                background();
            }
            drop(b);
            backlog.1.notify_all();
        };
        let verified = note.live.as_ref().map(|live| verify(store_root, run, &note.name, live));
        match compact_through(writer, note.seq, &mut totals) {
            Ok(()) => {}
            Err(sdt_store::Error::Cancelled) => {
                done(true);
                continue;
            }
            Err(e) => {
                error = Some(format!("compaction stopped at {}: {}", note.name, human::error_chain(&e)));
                done(true);
                continue;
            }
        }
        if let Some(raw) = verified {
            let compacted = verify(store_root, run, &note.name, note.live.as_deref().unwrap_or_default());
            match raw.and_then(|n| compacted.map(|m| n.min(m))) {
                Ok(compared) => eprintln!(
                    "sdt: verify {}: raw and compacted, matches the live process ({compared} bytes compared)",
                    note.name
                ),
                Err(problem) => {
                    totals.verify_failures += 1;
                    eprintln!("sdt: verify {}: MISMATCH: {problem}", note.name);
                }
            }
        }
        done(false);
    }
    if let Some(last) = last_seq {
        totals.raw_left = last + 1 - writer.next_seq();
    }
    let error = error.map(|e| {
        format!("{e}; {} snapshot(s) stay raw (readable; `sdt compact` finishes them)", totals.raw_left)
    });
    (totals, error)
}

/// Waits until the machine has at least [`SPARE_CPUS`] idle (over [`idle::WINDOW`]), the
/// raw log holds `eager_from` bytes, or the program has ended.
fn wait_for_spare_cpu(backlog: &(Mutex<Backlog>, Condvar), eager_from: u64) {
    let mut meter = IdleMeter::new();
    let (lock, changed) = backlog;
    let due = |b: &Backlog| b.ended || b.bytes >= eager_from;
    loop {
        let held = lock.lock().unwrap();
        if due(&held) || due(&changed.wait_timeout(held, idle::WINDOW).unwrap().0) {
            return;
        }
        if meter.spare_cpus().is_none_or(|spare| spare >= SPARE_CPUS) {
            return;
        }
    }
}

/// Idle CPU time (in CPUs) that lets compaction run while the program does: about a
/// CPU the program does not use. Less (half a CPU) took the gaps of threads waiting on
/// each other at a barrier, and a snapshot's compaction, once begun, ran on through the
/// program's busy spells: 4% more time for a fluid simulation on two CPUs.
const SPARE_CPUS: f64 = 0.9;

/// Compacts every snapshot up to and including `seq`.
fn compact_through(
    writer: &mut RunWriter,
    seq: u32,
    totals: &mut WriteTotals,
) -> Result<(), sdt_store::Error> {
    while writer.next_seq() <= seq {
        match writer.compact()? {
            Some(report) => {
                totals.stored_bytes += report.file_bytes;
                totals.full_bytes += report.full_bytes;
            }
            None => break,
        }
    }
    Ok(())
}

/// `breakpoint 1/2/10 hit 3 on thread 1234`, `timer` or `SIGSEGV on thread 1234, …`.
fn describe(meta: &SnapshotMeta) -> String {
    match &meta.trigger {
        sdt_store::Trigger::Breakpoint { level, class, id, hit, tid, .. } => {
            format!("breakpoint {level}/{class}/{id} hit {hit} on thread {tid}")
        }
        sdt_store::Trigger::Timer => "timer".to_owned(),
        sdt_store::Trigger::Signal { signo, tid, .. } => {
            format!("{} on thread {tid}, which it ends next", sdt_store::signal_name(*signo))
        }
    }
}

/// Why `--verify` found a snapshot not as the process had it.
#[derive(Debug, thiserror::Error)]
enum VerifyError {
    /// The snapshot could not be read back.
    #[error("{}", human::error_chain(.0))]
    Unreadable(#[from] sdt_store::Error),
    /// A byte differs.
    #[error("byte at {addr:#x} is {stored:#04x} in the store ({form}), {live:#04x} in the process")]
    Differs { addr: u64, stored: u8, live: u8, form: &'static str },
}

/// Reads snapshot `name` of run `run` back from the store, in whatever form it is in now,
/// and compares it with the live bytes; returns how many it compared.
fn verify(
    store_root: &std::path::Path,
    run: sdt_store::RunId,
    name: &str,
    live: &[(u64, Vec<u8>)],
) -> Result<u64, VerifyError> {
    let snapshot = Store::open(store_root)?.open_run(&run)?.open_snapshot(name)?;
    let mut compared = 0;
    for (start, bytes) in live {
        let mut stored = vec![0u8; bytes.len()];
        snapshot.read(*start, &mut stored)?;
        if let Some(i) = stored.iter().zip(bytes).position(|(a, b)| a != b) {
            return Err(VerifyError::Differs {
                addr: start + i as u64,
                stored: stored[i],
                live: bytes[i],
                form: if snapshot.is_raw() { "raw" } else { "compacted" },
            });
        }
        compared += bytes.len() as u64;
    }
    Ok(compared)
}
