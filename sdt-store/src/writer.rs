//! Compaction: each snapshot written as the pages that changed since the previous one,
//! diffed and compressed (`S<seq>.snap`), from its raw file (`S<seq>.raw`, then removed)
//! or from pages handed over directly.
//!
//! The writer remembers, for every page of the previous snapshot that has content, where
//! its bytes are stored, an `xxh3_128` hash of them and how many patches its slot's chain
//! holds; never the bytes themselves. A page whose hash did not change is stored nowhere
//! new: the index points at the old slot. A changed page is stored as a patch (the page
//! XOR its previous version) when the previous version's chain holds fewer than
//! [`MAX_PATCH_DEPTH`] patches, the previous version reads back from the store with the
//! remembered hash, and the patch has few nonzero bytes (at most [`MAX_PATCH_BYTES`], and
//! fewer than the page) or belongs with patches that compress better than their pages
//! (below); else whole.
//!
//! Encodings are chosen by trying them on samples, at zstd's fastest usual level:
//!
//! - Large patches (many nonzero bytes: every word of a page of doubles changed a little)
//!   are decided per group of 64 changed pages: [`SAMPLE_PAGES`] of them, shuffled, must
//!   compress to at most [`LARGE_PATCH_EIGHTHS`]/8 of their pages; then all are stored,
//!   in chains of at most [`MAX_LARGE_PATCH_DEPTH`] patches.
//! - Each block of 64 stored pages is one zstd frame of its bytes, or of its bytes
//!   byte-shuffled (`shuffle.rs`), whichever shrinks a sample of its pages more; or its
//!   bytes as they are, uncompressed, when neither shrinks the sample by 1/32 or the
//!   frame would not be smaller (random data: no time spent compressing it, nor reading
//!   it back).
//!
//! Previous versions are read back through the reader's [`Slots`], one per worker
//! thread, each keeping [`WORKER_BLOCKS`] decoded blocks. The changed pages are shared
//! among the threads in address order, so a run of them decodes each old block about
//! once.

use std::fs::File;
use std::io::{self, ErrorKind};
use std::num::NonZero;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use xxhash_rust::xxh3::xxh3_128;
use zstd::bulk::Compressor;

use crate::dir::{Form, RunId, RunInfo, RunLog, SnapshotFile, file_name, io_error, write_run_info};
use crate::format::{self, Encoding, Footer, MAX_BLOCK_PAGES, ZSTD_LEVEL};
use crate::fs::Dir;
use crate::index::{BlockEntry, BlockTable, Index, MAX_PAGES, MAX_PATCH_DEPTH, SlotRun, push_run};
use crate::model::{PAGE_SIZE, SnapshotMeta, check_meta};
use crate::raw::{self, PageSpan};
use crate::reader::{self, Slots, xor_into};
use crate::shuffle::shuffle;
use crate::{Error, Result, RunStatus, Store};

/// Most worker threads (compression, patches).
const MAX_THREADS: usize = 8;
/// Blocks each thread compresses per batch; a batch is held in memory before writing.
const BLOCKS_PER_THREAD: usize = 8;
/// Fewest changed pages worth a thread of their own when making patches.
const PATCHES_PER_THREAD: usize = 256;
const BLOCK_PAGES: usize = MAX_BLOCK_PAGES as usize;
const PAGE: usize = PAGE_SIZE as usize;
/// A patch with at most this many nonzero bytes (and fewer than its page) is stored.
const MAX_PATCH_BYTES: usize = PAGE / 4;
/// Larger patches are stored when, shuffled and compressed, they take at most this share
/// (in eighths) of what their pages take: words that changed a little (doubles of a
/// simulation stepping on) leave their high bytes zero in the patch, which shuffling
/// gathers into runs, where their pages hold noise. The rest of a share pays for the
/// longer chain reading goes through.
const LARGE_PATCH_EIGHTHS: usize = 7;
/// Nor are they stored on a previous version whose chain holds this many patches or more:
/// a page whose every word changes would otherwise be read, and read back by the next
/// compaction, through as many pages as [`MAX_PATCH_DEPTH`] allows, each from a block of
/// its own, for a small part of a page's saving each time.
const MAX_LARGE_PATCH_DEPTH: u32 = 4;
/// Nor are they stored unless they save at least 1/this of their pages' uncompressed
/// bytes: a few bytes saved on pages that compress to almost nothing are not worth a
/// chain link.
const LARGE_PATCH_MIN_SAVING: usize = 64;
/// Pages of a block compressed both plainly and shuffled to choose its encoding.
const SAMPLE_PAGES: usize = 8;
/// A sample that zstd shrinks by less than 1/this is incompressible: its block is stored
/// as is, without compressing it.
const STORED_BELOW: usize = 32;
/// Decoded blocks of earlier files each worker keeps (4 MiB): more than a chain of
/// patches spans, so that neighbouring pages share them.
const WORKER_BLOCKS: usize = 16;
/// Earlier snapshot files each worker keeps mapped.
const WORKER_FILES: usize = 64;

/// Pages a diff goes through between two looks at whether compaction was cancelled.
const CANCEL_CHECK_PAGES: usize = 4096;

/// Where a page's bytes come from when handed to [`RunWriter::write_snapshot`].
#[derive(Clone, Copy, Debug)]
pub enum PageSource<'a> {
    /// The page's bytes as captured (exactly `PAGE_SIZE` of them).
    Data(&'a [u8]),
    /// This page and the next `n - 1` are known to be as in the previous snapshot (dirty
    /// tracking said they were not written); the writer reuses the previous snapshot's
    /// entries for them, if it had any.
    Unchanged(u64),
}

/// What writing one snapshot added.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WriteReport {
    /// Pages with content in the snapshot.
    pub pages: u64,
    /// Pages stored in this snapshot's file, whole or as patches.
    pub pages_stored: u64,
    /// Of those, pages stored as a patch on their previous version.
    pub pages_patched: u64,
    /// Blocks the pages are stored in (up to 64 pages each).
    pub blocks: u64,
    /// Of those, blocks compressed byte-shuffled (as 64-bit words).
    pub blocks_shuffled: u64,
    /// Of those, blocks stored as they are: they did not compress.
    pub blocks_stored: u64,
    /// Bytes the snapshot would take stored whole.
    pub full_bytes: u64,
    /// Size of the snapshot's file.
    pub file_bytes: u64,
}

/// Writes the compacted snapshots of one run, in order.
pub struct RunWriter {
    id: RunId,
    dir: Arc<Dir>,
    info: RunInfo,
    next_seq: u32,
    /// The previous snapshot's pages with content, ascending.
    prev: Vec<PageEntry>,
    /// One per thread, at least one.
    workers: Vec<Worker>,
    /// The run's lock, when this writer took it (compacting a run no `sdt` holds).
    _lock: Option<File>,
    /// Set by the caller to stop compaction between blocks.
    cancel: Option<Arc<AtomicBool>>,
}

/// A page with content: where its bytes are stored, their hash, and the patches in its
/// slot's chain (0: stored whole).
#[derive(Clone, Copy, Debug)]
struct PageEntry {
    page: u64,
    source_seq: u32,
    slot: u32,
    hash: u128,
    depth: u32,
}

/// A snapshot compared with the previous one.
struct Diff<'a> {
    /// Every page with content.
    entries: Vec<PageEntry>,
    /// The changed pages, whole, in slot order.
    changed: Vec<&'a [u8]>,
    /// The changed pages that may be stored as patches, in slot order.
    candidates: Vec<Candidate<'a>>,
}

/// A changed page whose previous version may serve as its base.
#[derive(Clone, Copy, Debug)]
struct Candidate<'a> {
    /// Its slot in this snapshot's file.
    slot: u32,
    /// Its place in [`Diff::entries`].
    entry: usize,
    bytes: &'a [u8],
    /// The previous version.
    base: PageEntry,
}

/// What a snapshot's file is written from.
struct Changes<'p, 'a> {
    /// The snapshot's name, for errors.
    name: &'p str,
    /// The changed pages, whole, in slot order.
    pages: &'p [&'a [u8]],
    /// Those that may be stored as patches, in slot order.
    candidates: &'p [Candidate<'a>],
    /// The mapped raw file the pages are read from, if they are.
    raw: Option<&'p RawMap>,
}

/// What writing a snapshot's file did.
#[derive(Default)]
struct Written {
    /// Blocks encoded each way, by [`Encoding`] number.
    encoded: [u64; 3],
    /// Pages stored as patches.
    pages_patched: u64,
}

/// How many bytes of a patch are nonzero.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Patch {
    /// At most [`MAX_PATCH_BYTES`], and fewer than in its page: stored.
    Small,
    /// More: stored if such patches compress better than their pages.
    Large,
}

/// A thread's contexts: a compressor, the buffers a block is gathered, sampled and
/// shuffled in, the patches of a group of changed pages, and a reader of earlier files.
struct Worker {
    cctx: Compressor<'static>,
    block: Vec<u8>,
    sample: Vec<u8>,
    shuffled: Vec<u8>,
    patches: Vec<u8>,
    slots: Slots,
}

impl Worker {
    /// A worker for the run in `dir`.
    fn new(dir: &Arc<Dir>) -> io::Result<Worker> {
        Ok(Worker {
            cctx: Compressor::new(ZSTD_LEVEL)?,
            block: Vec::with_capacity(BLOCK_PAGES * PAGE),
            sample: Vec::with_capacity(SAMPLE_PAGES * PAGE),
            shuffled: Vec::with_capacity(BLOCK_PAGES * PAGE),
            patches: Vec::with_capacity(BLOCK_PAGES * PAGE),
            slots: Slots::new(Arc::clone(dir), WORKER_BLOCKS, WORKER_FILES)?,
        })
    }

    /// The block of `pages`, encoded as [`Worker::choose`] finds best, and its encoding.
    fn encode(&mut self, pages: &[&[u8]]) -> io::Result<(Encoding, Vec<u8>)> {
        self.block.clear();
        for page in pages {
            self.block.extend_from_slice(page);
        }
        let frame = match self.choose(pages)? {
            Encoding::Stored => None,
            Encoding::Zstd => Some((Encoding::Zstd, self.cctx.compress(&self.block)?)),
            Encoding::ShuffledZstd => {
                self.shuffled.resize(self.block.len(), 0);
                shuffle(&self.block, &mut self.shuffled);
                Some((Encoding::ShuffledZstd, self.cctx.compress(&self.shuffled)?))
            }
        };
        Ok(frame.filter(|(_, frame)| frame.len() < self.block.len()).unwrap_or_else(|| {
            let block = std::mem::replace(&mut self.block, Vec::with_capacity(BLOCK_PAGES * PAGE));
            (Encoding::Stored, block)
        }))
    }

    /// The encoding for the block of `pages`: zstd, plain or shuffled, whichever shrinks
    /// [`SAMPLE_PAGES`] of them, spread over the block, more; stored as is if neither
    /// shrinks them by 1/[`STORED_BELOW`].
    fn choose(&mut self, pages: &[&[u8]]) -> io::Result<Encoding> {
        self.sample.clear();
        for page in pages.iter().step_by(pages.len().div_ceil(SAMPLE_PAGES)) {
            self.sample.extend_from_slice(page);
        }
        let (plain, shuffled) = self.sample_sizes()?;
        let best = plain.min(shuffled);
        Ok(if best > self.sample.len() - self.sample.len() / STORED_BELOW {
            Encoding::Stored
        } else if shuffled < plain {
            Encoding::ShuffledZstd
        } else {
            Encoding::Zstd
        })
    }

    /// The patches worth storing for `candidates`, back to back, and which candidates got
    /// one. `needed_by` names the snapshot being written.
    fn patch(&mut self, candidates: &[Candidate<'_>], needed_by: &str) -> (Vec<u8>, Vec<bool>) {
        let mut patches = Vec::new();
        let mut made = Vec::with_capacity(candidates.len());
        for group in candidates.chunks(BLOCK_PAGES) {
            self.patch_group(group, needed_by, &mut patches, &mut made);
        }
        (patches, made)
    }

    /// Appends to `patches` the patches worth storing of `group`, and to `made` whether
    /// each candidate got one. A patch with few nonzero bytes is stored; the large ones
    /// are stored, all of them, when a sample of them compresses better than their pages.
    fn patch_group(
        &mut self,
        group: &[Candidate<'_>],
        needed_by: &str,
        patches: &mut Vec<u8>,
        made: &mut Vec<bool>,
    ) {
        self.patches.clear();
        let kinds: Vec<Option<Patch>> = group.iter().map(|c| self.make_patch(c, needed_by)).collect();
        // Each large patch's candidate, and where the patch is in `self.patches`.
        let mut large = Vec::new();
        let mut at = 0;
        for (i, kind) in kinds.iter().enumerate() {
            if *kind == Some(Patch::Large) {
                large.push((i, at));
            }
            at += PAGE * usize::from(kind.is_some());
        }
        let keep_large = !large.is_empty() && self.large_patches_pay(group, &large);
        let mut at = 0;
        for kind in kinds {
            let keep = match kind {
                None => false,
                Some(Patch::Small) => true,
                Some(Patch::Large) => keep_large,
            };
            if keep {
                patches.extend_from_slice(&self.patches[at..at + PAGE]);
            }
            at += PAGE * usize::from(kind.is_some());
            made.push(keep);
        }
    }

    /// Appends the patch of `c` on its base to the worker's `patches` and says how large
    /// it is; `None` (nothing appended) if the base does not read back as remembered (its
    /// file damaged or gone since), or the patch is large and its base's chain holds
    /// [`MAX_LARGE_PATCH_DEPTH`] patches: the page is stored whole.
    fn make_patch(&mut self, c: &Candidate<'_>, needed_by: &str) -> Option<Patch> {
        let base = &c.base;
        let old = self.slots.page(base.source_seq, base.slot, base.page, needed_by).ok()?;
        if xxh3_128(old) != base.hash {
            return None;
        }
        let at = self.patches.len();
        self.patches.extend_from_slice(c.bytes);
        xor_into(&mut self.patches[at..], old);
        let changed = nonzero_bytes(&self.patches[at..]);
        if changed <= MAX_PATCH_BYTES && changed < nonzero_bytes(c.bytes) {
            return Some(Patch::Small);
        }
        if base.depth >= MAX_LARGE_PATCH_DEPTH {
            self.patches.truncate(at);
            return None;
        }
        Some(Patch::Large)
    }

    /// Whether the large patches `large` (each its candidate in `group` and its place in
    /// the worker's `patches`) are worth storing: [`SAMPLE_PAGES`] of them, shuffled and
    /// compressed, take at most [`LARGE_PATCH_EIGHTHS`] eighths of what their pages take,
    /// compressed as they are or shuffled, whichever is less, and save at least
    /// 1/[`LARGE_PATCH_MIN_SAVING`] of the pages' bytes.
    fn large_patches_pay(&mut self, group: &[Candidate<'_>], large: &[(usize, usize)]) -> bool {
        let mut sampled_patches = Vec::with_capacity(SAMPLE_PAGES * PAGE);
        self.sample.clear();
        for &(i, at) in large.iter().step_by(large.len().div_ceil(SAMPLE_PAGES)) {
            sampled_patches.extend_from_slice(&self.patches[at..at + PAGE]);
            self.sample.extend_from_slice(group[i].bytes);
        }
        let sizes = (|| {
            let patched = self.shuffled_size(&sampled_patches)?;
            let (plain, shuffled) = self.sample_sizes()?;
            let pages = plain.min(shuffled);
            io::Result::Ok((patched, pages))
        })();
        let min_saving = sampled_patches.len() / LARGE_PATCH_MIN_SAVING;
        sizes.is_ok_and(|(patched, pages)| {
            patched * 8 <= pages * LARGE_PATCH_EIGHTHS && patched + min_saving <= pages
        })
    }

    /// Compressed size of `bytes` shuffled.
    fn shuffled_size(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.shuffled.resize(bytes.len(), 0);
        shuffle(bytes, &mut self.shuffled);
        Ok(self.cctx.compress(&self.shuffled)?.len())
    }

    /// Compressed sizes of the worker's `sample` as it is and shuffled.
    fn sample_sizes(&mut self) -> io::Result<(usize, usize)> {
        let plain = self.cctx.compress(&self.sample)?.len();
        self.shuffled.resize(self.sample.len(), 0);
        shuffle(&self.sample, &mut self.shuffled);
        Ok((plain, self.cctx.compress(&self.shuffled)?.len()))
    }
}

impl std::fmt::Debug for RunWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunWriter")
            .field("id", &self.id)
            .field("dir", &self.dir)
            .field("next_seq", &self.next_seq)
            .field("pages", &self.prev.len())
            .finish_non_exhaustive()
    }
}

impl RunLog {
    /// The compactor of this run, which is being captured: it starts at S0.
    pub fn compactor(&self) -> Result<RunWriter> {
        RunWriter::new(Arc::clone(self.run().dir_handle()), self.run().info().clone(), None)
    }
}

impl Store {
    /// The compactor of run `id`, which no `sdt` holds (its capture ended, or its `sdt`
    /// died): [`Store::hold_run`], then [`HeldRun::compactor`].
    pub fn compactor(&self, id: RunId) -> Result<RunWriter> {
        self.hold_run(id)?.compactor()
    }

    /// Takes run `id`'s lock, which no `sdt` may hold (its capture ended, or its `sdt`
    /// died), for compacting it. [`Error::RunHeld`] if one does.
    pub fn hold_run(&self, id: RunId) -> Result<HeldRun> {
        let run = self.open_run(&id)?;
        let dir = Arc::clone(run.dir_handle());
        let lock = dir.open_file(crate::dir::LOCK).map_err(|e| io_error(&dir.join(crate::dir::LOCK), e))?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => return Err(Error::RunHeld { id: id.to_string() }),
            Err(std::fs::TryLockError::Error(e)) => return Err(io_error(&dir.join(crate::dir::LOCK), e)),
        }
        Ok(HeldRun { run, lock })
    }
}

impl Store {
    /// Stores snapshot `meta.name` of run `parent`, as edited, as the one snapshot of a
    /// new run of `parent`'s tree: an edit ([`Refinement::edit`](crate::Refinement::edit)),
    /// its snapshot named `S3.e1` (`S3.e2` if `S3` has an edit already). `pages` are the
    /// edited snapshot's pages with content, ascending, as [`RunWriter::write_snapshot`]
    /// takes them. Returns the new snapshot's name.
    pub fn commit_edit<'a>(
        &self,
        parent: RunId,
        mut meta: SnapshotMeta,
        pages: impl IntoIterator<Item = (u64, PageSource<'a>)>,
    ) -> Result<String> {
        let from = meta.name.clone();
        let of_parent = self.open_run(&parent)?;
        let edits = self
            .tree(parent)?
            .iter()
            .filter_map(|r| r.info().parent.as_ref())
            .filter(|p| p.run == parent && p.from == from)
            .filter_map(|p| p.edit)
            .max()
            .unwrap_or(0);
        let wall_ns = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX));
        let info = RunInfo {
            id: RunId(0),
            command: of_parent.info().command.clone(),
            cwd: of_parent.info().cwd.clone(),
            started_wall_ns: wall_ns,
            sdt_pid: std::process::id(),
            config: String::new(),
            status: RunStatus::Running,
            parent: Some(crate::Refinement {
                run: parent,
                from: from.clone(),
                to: None,
                reached: None,
                edit: Some(edits.saturating_add(1)),
            }),
            job: None,
        };
        let log = self.create_run(info)?;
        let name = log.run().info().snapshot_name(0);
        (meta.seq, meta.name) = (0, name.clone());
        match log.compactor().and_then(|mut writer| writer.write_snapshot(meta, pages)) {
            Ok(_) => {
                log.finish(RunStatus::Stopped { reason: "edited in gdb".to_owned() })?;
                Ok(name)
            }
            Err(e) => {
                log.finish(RunStatus::Failed { message: e.to_string() })?;
                Err(e)
            }
        }
    }
}

/// A run whose lock this process holds ([`Store::hold_run`]): others see it as being
/// compacted from the moment it is taken, before the compactor is ready.
#[derive(Debug)]
pub struct HeldRun {
    run: crate::Run,
    lock: File,
}

impl HeldRun {
    /// Its compactor: removes what a dead capture or compaction left half-made (spares,
    /// `.snap.incomplete` files), and goes on after the last compacted snapshot.
    pub fn compactor(self) -> Result<RunWriter> {
        let HeldRun { run, lock } = self;
        let dir = Arc::clone(run.dir_handle());
        let mut compacted = None;
        let mut raw = Vec::new();
        for entry in dir.entries().map_err(|e| io_error(run.dir(), e))? {
            let (name, _) = entry.map_err(|e| io_error(run.dir(), e))?;
            if name.starts_with(".spare-") || name.ends_with(".snap.incomplete") {
                dir.remove_file(&name).map_err(|e| io_error(&dir.join(&name), e))?;
            } else if let Some(seq) = name.strip_prefix('S').and_then(|n| n.strip_suffix(".raw")) {
                raw.extend(seq.parse::<u32>());
            }
        }
        for entry in run.snapshots()? {
            let entry = entry?;
            if entry.raw || !entry.complete || compacted.map_or(0, |c: u32| c + 1) != entry.seq {
                break;
            }
            compacted = Some(entry.seq);
        }
        // A raw file whose compaction finished but was not removed yet.
        for seq in raw.into_iter().filter(|&seq| compacted.is_some_and(|c| seq <= c)) {
            let name = file_name(seq, Form::Raw);
            dir.remove_file(&name).map_err(|e| io_error(&dir.join(&name), e))?;
        }
        let mut writer = RunWriter::new(dir, run.info().clone(), Some(lock))?;
        if let Some(last) = compacted {
            writer.prev = reader::page_entries(&writer.dir, last)?
                .into_iter()
                .map(|p| PageEntry {
                    page: p.page,
                    source_seq: p.seq,
                    slot: p.slot,
                    hash: p.hash,
                    // How long its chain is was not kept: as long as allowed, so that the
                    // next change of the page is stored whole.
                    depth: if p.patched { MAX_PATCH_DEPTH } else { 0 },
                })
                .collect();
            writer.next_seq = last + 1;
        }
        Ok(writer)
    }
}

impl RunWriter {
    /// A writer for the run in `dir`, whose `run.json` says `info`.
    fn new(dir: Arc<Dir>, info: RunInfo, lock: Option<File>) -> Result<RunWriter> {
        let threads = std::thread::available_parallelism().map_or(1, NonZero::get).clamp(1, MAX_THREADS);
        let workers = (0..threads)
            .map(|_| Worker::new(&dir))
            .collect::<io::Result<_>>()
            .map_err(|e| io_error(dir.path(), e))?;
        Ok(RunWriter {
            id: info.id,
            dir,
            info,
            next_seq: 0,
            prev: Vec::new(),
            workers,
            _lock: lock,
            cancel: None,
        })
    }

    /// Stops compaction soon after `flag` is set: the snapshot being written is abandoned
    /// (it stays raw, readable) and it and every later call fail with [`Error::Cancelled`].
    pub fn cancel_on(&mut self, flag: Arc<AtomicBool>) {
        self.cancel = Some(flag);
    }

    /// [`Error::Cancelled`] once the caller has asked to stop.
    fn check_cancelled(&self) -> Result<()> {
        match &self.cancel {
            Some(flag) if flag.load(Ordering::Relaxed) => Err(Error::Cancelled),
            _ => Ok(()),
        }
    }

    /// The seq of the next snapshot to compact or write.
    pub fn next_seq(&self) -> u32 {
        self.next_seq
    }

    /// Compacts the next snapshot if it is raw: writes `S<seq>.snap` from `S<seq>.raw`,
    /// then removes the raw file. `Ok(None)` if there is no raw file for it (not captured
    /// yet, or none will be).
    pub fn compact(&mut self) -> Result<Option<WriteReport>> {
        self.check_cancelled()?;
        let seq = self.next_seq;
        let name = self.info.snapshot_name(seq);
        let (bytes, record) = match reader::read_raw(&self.dir, seq, &name) {
            Ok(raw) => raw,
            Err(Error::Io { source, .. }) if source.kind() == ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        let slots: u64 = record.copied.iter().map(|s| s.pages).sum();
        let data_len = usize::try_from(slots * PAGE_SIZE).map_err(|_| Error::Corrupt {
            snapshot: name.clone(),
            detail: "raw data area too large".into(),
        })?;
        let map = RawMap::new(&bytes.file, data_len)
            .map_err(|e| io_error(&self.dir.join(&file_name(seq, Form::Raw)), e))?;
        let data = map.as_ref().map_or(&[][..], RawMap::data);
        let pages = raw_pages(&record.copied, &record.unchanged, data);
        let meta = record.meta.expect("read_raw decodes the metadata");
        let report = self.write_pages(meta, pages, map.as_ref())?;
        drop((map, bytes));
        let raw_name = file_name(seq, Form::Raw);
        self.dir.remove_file(&raw_name).map_err(|e| io_error(&self.dir.join(&raw_name), e))?;
        Ok(Some(report))
    }

    /// Records in `run.json` that the `sdt` capturing this run died before the run ended,
    /// if the run still says it is running.
    pub fn record_interrupted(&mut self) -> Result<bool> {
        if self.info.status != RunStatus::Running {
            return Ok(false);
        }
        self.info.status = RunStatus::Failed {
            message: format!(
                "sdt (pid {}) ended before the program did (killed?): how the program ended is unknown",
                self.info.sdt_pid
            ),
        };
        write_run_info(&self.dir, &self.info)?;
        Ok(true)
    }

    /// The run's id.
    pub fn id(&self) -> RunId {
        self.id
    }

    /// The run, as its `run.json` says.
    pub fn info(&self) -> &RunInfo {
        &self.info
    }

    /// Writes the next snapshot, compacted. `pages` lists, in ascending address order, every page of
    /// the snapshot that has content of its own (not zero-by-absence, not provided by a
    /// file reference); all-zero pages may be passed and cost nothing. `meta.seq` must be
    /// the next sequence number. Fills in `meta.stats.pages`, `pages_stored` and
    /// `full_bytes`.
    ///
    /// If it fails, the run stays as it was before the call (a `.incomplete` file may be
    /// left) and the same seq may be written again.
    pub fn write_snapshot<'a>(
        &mut self,
        meta: SnapshotMeta,
        pages: impl IntoIterator<Item = (u64, PageSource<'a>)>,
    ) -> Result<WriteReport> {
        self.write_pages(meta, pages, None)
    }

    /// [`RunWriter::write_snapshot`], handing the pages of `raw` (the mapped file they
    /// come from, if any) back to the page cache as each pass over them goes past.
    fn write_pages<'a>(
        &mut self,
        mut meta: SnapshotMeta,
        pages: impl IntoIterator<Item = (u64, PageSource<'a>)>,
        raw: Option<&RawMap>,
    ) -> Result<WriteReport> {
        let seq = meta.seq;
        if seq != self.next_seq {
            return Err(Error::BadInput(format!(
                "snapshot {} has seq {seq}, expected {}",
                meta.name, self.next_seq
            )));
        }
        check_meta(&meta).map_err(|e| Error::BadInput(format!("snapshot {}: {e}", meta.name)))?;
        let Diff { mut entries, changed, candidates } = self.diff(seq, pages, raw)?;
        self.check_cancelled()?;
        if u32::try_from(entries.len()).is_err() {
            return Err(Error::BadInput(format!("snapshot {}: more than 2^32 pages", meta.name)));
        }
        let page_count = entries.len() as u64;
        meta.stats.pages = page_count;
        meta.stats.pages_stored = changed.len() as u64;
        meta.stats.full_bytes = page_count * PAGE_SIZE;
        let mut runs = Vec::new();
        for e in &entries {
            push_run(&mut runs, e.page, e.source_seq, e.slot);
        }
        let compress_error = |e| io_error(&self.dir.join(&file_name(seq, Form::Compact)), e);
        let json =
            serde_json::to_vec(&meta).map_err(|e| Error::BadInput(format!("snapshot {}: {e}", meta.name)))?;
        let meta_frame = zstd::bulk::compress(&json, ZSTD_LEVEL).map_err(compress_error)?;
        if u32::try_from(meta_frame.len()).is_err() {
            return Err(Error::BadInput(format!("snapshot {}: metadata over 4 GiB", meta.name)));
        }

        let mut file = SnapshotFile::create(&self.dir, seq)?;
        let changes = Changes { name: &meta.name, pages: &changed, candidates: &candidates, raw };
        let written = self.write_file(&mut file, seq, changes, &mut entries, runs, &meta_frame);
        let (Written { encoded: blocks, pages_patched }, file_bytes) = match written {
            Ok(written) => (written, file.finish()?),
            Err(e) => {
                file.abandon();
                return Err(e);
            }
        };
        let report = WriteReport {
            pages: page_count,
            pages_stored: changed.len() as u64,
            pages_patched,
            blocks: blocks.iter().sum(),
            blocks_shuffled: blocks[Encoding::ShuffledZstd as usize],
            blocks_stored: blocks[Encoding::Stored as usize],
            full_bytes: page_count * PAGE_SIZE,
            file_bytes,
        };
        self.prev = entries;
        self.next_seq += 1;
        Ok(report)
    }

    /// Writes the body of snapshot file `seq`: header, blocks, index, metadata, footer.
    /// The changed pages go in batches, each made into patches where they pay (their
    /// entries' depths updated), compressed and written before the next is made, so that
    /// no more than a batch of patches is held at once. `runs`: the pages' slot runs.
    fn write_file(
        &mut self,
        file: &mut SnapshotFile,
        seq: u32,
        changes: Changes<'_, '_>,
        entries: &mut [PageEntry],
        runs: Vec<SlotRun>,
        meta_frame: &[u8],
    ) -> Result<Written> {
        let compress_error = |e| io_error(&self.dir.join(&file_name(seq, Form::Compact)), e);
        file.write(&format::encode_header(seq))?;
        let mut blocks = Vec::with_capacity(changes.pages.len().div_ceil(BLOCK_PAGES));
        let mut written = Written::default();
        let mut patch_runs = Vec::new();
        let mut candidates = changes.candidates;
        let batch_pages = BLOCK_PAGES * BLOCKS_PER_THREAD * self.workers.len();
        for (first_slot, batch) in (0..).step_by(batch_pages).zip(changes.pages.chunks(batch_pages)) {
            self.check_cancelled()?;
            let (batch_candidates, rest) = candidates
                .split_at(candidates.partition_point(|c| (c.slot as usize) < first_slot + batch.len()));
            candidates = rest;
            let patched = on_threads(&mut self.workers, batch_candidates, PATCHES_PER_THREAD, |w, chunk| {
                w.patch(chunk, changes.name)
            });
            // What the file stores: the changed pages, some replaced by their patches.
            let mut pages = batch.to_vec();
            let mut batch_candidates = batch_candidates.iter();
            for (patches, made) in &patched {
                let mut at = 0;
                // `made` first: `zip` stops at its end without taking one more candidate.
                for (_, c) in made.iter().zip(batch_candidates.by_ref()).filter(|(made, _)| **made) {
                    pages[c.slot as usize - first_slot] = &patches[at..at + PAGE];
                    at += PAGE;
                    push_run(&mut patch_runs, c.slot.into(), c.base.source_seq, c.base.slot);
                    entries[c.entry].depth = c.base.depth + 1;
                }
                written.pages_patched += (patches.len() / PAGE) as u64;
            }
            let frames = compress_batch(&mut self.workers, &pages).map_err(compress_error)?;
            if let Some(raw) = changes.raw {
                raw.release(batch);
            }
            for ((encoding, frame), pages) in frames.iter().zip(pages.chunks(BLOCK_PAGES)) {
                let page_count = pages.len() as u32;
                blocks.push(BlockEntry { offset: file.len(), page_count, encoding: *encoding });
                written.encoded[*encoding as usize] += 1;
                file.write(&format::encode_block_header(frame, page_count))?;
                file.write(frame)?;
            }
        }
        let index_offset = file.len();
        let index = Index { blocks: BlockTable::new(blocks, index_offset), pages: runs, patches: patch_runs }
            .encode();
        let index_frame = zstd::bulk::compress(&index, ZSTD_LEVEL).map_err(compress_error)?;
        file.write(&index_frame)?;
        let meta_offset = file.len();
        file.write(meta_frame)?;
        let footer = Footer {
            seq,
            index_offset,
            index_len: index_frame.len() as u64,
            index_checksum: xxhash_rust::xxh3::xxh3_64(&index_frame),
            meta_offset,
            // Checked by the caller.
            meta_len: meta_frame.len() as u32,
            meta_checksum: format::meta_checksum(meta_frame),
        };
        file.write(&footer.encode())?;
        Ok(written)
    }

    /// Compares `pages`, snapshot `seq`, with the previous snapshot.
    /// Hands the pages of `raw` it has read back to the page cache as it goes.
    fn diff<'a>(
        &self,
        seq: u32,
        pages: impl IntoIterator<Item = (u64, PageSource<'a>)>,
        raw: Option<&RawMap>,
    ) -> Result<Diff<'a>> {
        let mut entries = Vec::with_capacity(self.prev.len());
        let mut changed = Vec::new();
        let mut candidates = Vec::new();
        let mut prev = self.prev.iter().peekable();
        let mut last_addr = None;
        // The first and last pages read since pages were last handed back.
        let mut read: Option<[&[u8]; 2]> = None;
        for (n, (addr, source)) in pages.into_iter().enumerate() {
            // A large snapshot's diff takes a tenth of a second or more: a run's end
            // need not wait for it.
            if n % CANCEL_CHECK_PAGES == 0 {
                self.check_cancelled()?;
                if let (Some(raw), Some(span)) = (raw, read.take()) {
                    raw.release(&span);
                }
            }
            if addr % PAGE_SIZE != 0 {
                return Err(Error::BadInput(format!("page address {addr:#x} is not page-aligned")));
            }
            if let Some(last) = last_addr.filter(|&last| addr <= last) {
                return Err(Error::BadInput(format!(
                    "page {addr:#x} comes after page {last:#x}: pages must ascend without repeats"
                )));
            }
            let page = addr / PAGE_SIZE;
            while prev.next_if(|e| e.page < page).is_some() {}
            let bytes = match source {
                PageSource::Unchanged(count) => {
                    // Inside the address space, or its last page's address overflows.
                    let end =
                        page.checked_add(count).filter(|&end| count > 0 && end <= MAX_PAGES).ok_or_else(
                            || Error::BadInput(format!("unchanged run of {count} pages at {addr:#x}")),
                        )?;
                    while let Some(e) = prev.next_if(|e| e.page < end) {
                        entries.push(*e);
                    }
                    last_addr = Some((end - 1) * PAGE_SIZE);
                    continue;
                }
                PageSource::Data(bytes) => bytes,
            };
            last_addr = Some(addr);
            read = Some([read.map_or(bytes, |[first, _]| first), bytes]);
            let before = prev.next_if(|e| e.page == page);
            if bytes.len() as u64 != PAGE_SIZE {
                return Err(Error::BadInput(format!(
                    "page {addr:#x} has {} bytes, expected {PAGE_SIZE}",
                    bytes.len()
                )));
            }
            if is_zero(bytes) {
                continue;
            }
            let hash = xxh3_128(bytes);
            if let Some(e) = before.filter(|e| e.hash == hash) {
                entries.push(*e);
                continue;
            }
            let slot = u32::try_from(changed.len())
                .map_err(|_| Error::BadInput("more than 2^32 changed pages".into()))?;
            if let Some(&base) = before.filter(|e| e.depth < MAX_PATCH_DEPTH) {
                candidates.push(Candidate { slot, entry: entries.len(), bytes, base });
            }
            changed.push(bytes);
            entries.push(PageEntry { page, source_seq: seq, slot, hash, depth: 0 });
        }
        Ok(Diff { entries, changed, candidates })
    }
}

/// The pages of a raw snapshot in address order: each copied page with its bytes from
/// `data` (the data area, slots in order), each unchanged run as one item.
fn raw_pages<'a>(
    copied: &'a [PageSpan],
    unchanged: &'a [PageSpan],
    data: &'a [u8],
) -> impl Iterator<Item = (u64, PageSource<'a>)> + 'a {
    let pages = data.chunks_exact(PAGE);
    let addrs = copied.iter().flat_map(|s| (s.first..s.end()).map(|page| page * PAGE_SIZE));
    let copied = addrs.zip(pages).map(|(addr, bytes)| (addr, PageSource::Data(bytes)));
    let unchanged = unchanged.iter().map(|s| (s.first * PAGE_SIZE, PageSource::Unchanged(s.pages)));
    let (mut a, mut b) = (copied.peekable(), unchanged.peekable());
    std::iter::from_fn(move || match (a.peek(), b.peek()) {
        (Some(x), Some(y)) if x.0 <= y.0 => a.next(),
        (Some(_), Some(_)) => b.next(),
        (Some(_), None) => a.next(),
        (None, _) => b.next(),
    })
}

/// A committed raw file's header page and data, mapped read-only while it is compacted.
///
/// The diff, and then each batch of patches and blocks, read the pages in slot order and
/// hand back what they have read ([`RawMap::release`]): the kernel keeps them in its page
/// cache for the next pass, but they stop counting in `sdt`'s resident memory, which
/// would otherwise grow by the whole snapshot (512 MiB for a program of that size).
struct RawMap {
    map: memmap2::Mmap,
}

impl RawMap {
    /// Maps the first `data_len` bytes of data of `file`; `None` for a snapshot that
    /// copied no page.
    #[allow(unsafe_code)]
    fn new(file: &File, data_len: usize) -> io::Result<Option<RawMap>> {
        if data_len == 0 {
            return Ok(None);
        }
        let len = raw::HEADER_PAGE as usize + data_len;
        if file.metadata()?.len() < len as u64 {
            return Err(io::Error::new(ErrorKind::UnexpectedEof, "raw file is shorter than its commit says"));
        }
        // SAFETY: a committed raw file is never written again, and this compactor holds
        // the run's lock (directly, or through the capture that owns it), so no other
        // `sdt` removes or truncates it; the length was checked against the file just now.
        let map = unsafe { memmap2::MmapOptions::new().len(len).map(file) }?;
        Ok(Some(RawMap { map }))
    }

    /// The data area: the copied pages, in slot order.
    fn data(&self) -> &[u8] {
        &self.map[raw::HEADER_PAGE as usize..]
    }

    /// Unmaps from the process the mapped pages from the lowest to the highest of
    /// `pages` (slices of [`RawMap::data`]; any other slice is passed over). The slices
    /// stay valid: a later read faults the page back in from the page cache.
    #[allow(unsafe_code)]
    fn release(&self, pages: &[&[u8]]) {
        let base = self.map.as_ptr() as usize;
        let offsets = pages
            .iter()
            .map(|page| (page.as_ptr() as usize).wrapping_sub(base))
            .filter(|&offset| offset < self.map.len());
        let (Some(first), Some(last)) = (offsets.clone().min(), offsets.max()) else {
            return;
        };
        let first = first / PAGE * PAGE;
        let end = (last / PAGE * PAGE + PAGE).min(self.map.len());
        // SAFETY: the map is a shared read-only mapping of a file nothing writes, so
        // MADV_DONTNEED only drops the process's page-table entries: a later read of the
        // range maps the same bytes again from the file. Failure leaves them resident,
        // which costs memory only.
        let _ = unsafe {
            self.map.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, first, end - first)
        };
    }
}

fn nonzero_bytes(bytes: &[u8]) -> usize {
    // Counting into a u8 per 255 bytes vectorizes; counting into a usize would not.
    bytes.chunks(255).map(|c| usize::from(c.iter().fold(0u8, |n, &b| n + u8::from(b != 0)))).sum()
}

fn is_zero(page: &[u8]) -> bool {
    // OR-ing fixed chunks vectorizes; `iter().all()` would not.
    page.chunks(64).all(|chunk| chunk.iter().fold(0, |acc, &b| acc | b) == 0)
}

/// Encodes `pages` as blocks of up to 64 pages, spread over the workers' threads.
fn compress_batch(workers: &mut [Worker], pages: &[&[u8]]) -> io::Result<Vec<(Encoding, Vec<u8>)>> {
    let blocks: Vec<&[&[u8]]> = pages.chunks(BLOCK_PAGES).collect();
    let mut frames = Vec::with_capacity(blocks.len());
    for chunk in on_threads(workers, &blocks, 1, |worker, blocks| {
        blocks.iter().map(|block| worker.encode(block)).collect::<io::Result<Vec<_>>>()
    }) {
        frames.extend(chunk?);
    }
    Ok(frames)
}

/// Splits `items` into contiguous chunks of at least `min_chunk` items, at most one per
/// worker, and runs `work` on each chunk with its own worker, on its own thread when
/// there is more than one chunk. Returns the chunks' results in order.
fn on_threads<T: Sync, R: Send>(
    workers: &mut [Worker],
    items: &[T],
    min_chunk: usize,
    work: impl Fn(&mut Worker, &[T]) -> R + Sync,
) -> Vec<R> {
    let threads = workers.len().min(items.len().div_ceil(min_chunk.max(1)));
    if threads <= 1 {
        return workers.first_mut().map(|worker| work(worker, items)).into_iter().collect();
    }
    let per_thread = items.len().div_ceil(threads);
    let work = &work;
    std::thread::scope(|scope| {
        let handles: Vec<_> = workers
            .iter_mut()
            .zip(items.chunks(per_thread))
            .map(|(worker, chunk)| scope.spawn(move || work(worker, chunk)))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_pages() {
        let mut page = vec![0u8; PAGE_SIZE as usize];
        assert!(is_zero(&page));
        page[4095] = 1;
        assert!(!is_zero(&page));
    }

    #[test]
    fn batch_keeps_block_order() {
        let pages: Vec<Vec<u8>> = (0..200u32).map(|i| vec![i as u8; PAGE_SIZE as usize]).collect();
        let refs: Vec<&[u8]> = pages.iter().map(Vec::as_slice).collect();
        let dir = tempfile::tempdir().unwrap();
        let dir = Arc::new(Dir::open(dir.path()).unwrap());
        let mut workers: Vec<Worker> = (0..3).map(|_| Worker::new(&dir).unwrap()).collect();
        let frames = compress_batch(&mut workers, &refs).unwrap();
        assert_eq!(frames.len(), 4);
        for ((encoding, frame), chunk) in frames.iter().zip(refs.chunks(BLOCK_PAGES)) {
            let pages = match encoding {
                Encoding::Stored => frame.clone(),
                Encoding::Zstd => zstd::bulk::decompress(frame, 1 << 20).unwrap(),
                Encoding::ShuffledZstd => {
                    let shuffled = zstd::bulk::decompress(frame, 1 << 20).unwrap();
                    let mut pages = vec![0; shuffled.len()];
                    crate::shuffle::unshuffle(&shuffled, &mut pages);
                    pages
                }
            };
            assert_eq!(pages, chunk.concat());
        }
        assert!(compress_batch(&mut workers, &[]).unwrap().is_empty());
    }

    /// Kilobytes of the mapping at `addr` resident in this process, from /proc/self/smaps.
    fn resident_kib(addr: usize) -> u64 {
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let mut lines = smaps.lines().skip_while(|l| !l.starts_with(&format!("{addr:x}-")));
        assert!(lines.next().is_some(), "no mapping at {addr:#x}");
        let rss = lines.find(|l| l.starts_with("Rss:")).unwrap();
        rss.split_whitespace().nth(1).unwrap().parse().unwrap()
    }

    #[test]
    fn released_raw_pages_leave_the_process_and_read_back_the_same() {
        const PAGES: usize = 64;
        let mut contents = vec![0u8; raw::HEADER_PAGE as usize + PAGES * PAGE];
        for (i, b) in contents.iter_mut().enumerate() {
            *b = (i / PAGE * 7 + i % 251) as u8;
        }
        let mut file = tempfile::tempfile().unwrap();
        std::io::Write::write_all(&mut file, &contents).unwrap();
        let map = RawMap::new(&file, PAGES * PAGE).unwrap().unwrap();
        let data = map.data();
        assert!(data == &contents[raw::HEADER_PAGE as usize..]);
        let addr = map.map.as_ptr() as usize;
        let resident = resident_kib(addr);
        assert!(resident >= (PAGES * PAGE / 1024) as u64);

        // Pages 10 to 19 named by their ends, and a page that is not in the map.
        let elsewhere = vec![0u8; PAGE];
        let pages: Vec<&[u8]> = data.chunks(PAGE).collect();
        map.release(&[pages[19], &elsewhere, pages[10]]);
        assert_eq!(resident_kib(addr), resident - (10 * PAGE / 1024) as u64, "ten pages left");
        map.release(&pages);
        assert!(resident_kib(addr) <= 4, "the header page at most");
        assert!(data == &contents[raw::HEADER_PAGE as usize..], "read back from the page cache");
        assert!(RawMap::new(&file, 0).unwrap().is_none());
        assert!(RawMap::new(&file, (PAGES + 1) * PAGE).is_err(), "longer than the file");
    }

    #[test]
    fn send() {
        fn is_send<T: Send>() {}
        is_send::<RunWriter>();
        is_send::<crate::Snapshot>();
    }
}
