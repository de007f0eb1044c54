//! Reading a snapshot back: metadata, and any page, byte-exact, from its compacted file
//! or, before compaction, from its raw file.
//!
//! [`Slots`] turns a slot of a snapshot file into its page, following patches to their
//! bases; the writer reads previous versions of pages through it too. Files are read
//! with `pread`, never mapped: a file truncated while it is read is an error, not a
//! `SIGBUS`.
//!
//! A raw snapshot's pages are those it copied, plus those write tracking saw unwritten,
//! which are as in the snapshot before it. Opening one resolves that into a page table
//! like a compacted snapshot's index: walking back over the raw snapshots before it to
//! the last compacted one (or to one with nothing unchanged), then forward, each taking
//! its unchanged pages from the table of the one before. A run keeps the table it resolved
//! last ([`RawTables`]), so opening its raw snapshots one after another walks back one
//! snapshot each. A raw file that compaction removed after the table named it is read
//! through the compacted file that replaced it, which holds the same pages; so a reader
//! keeps only a few files open, however long the chain.

use std::cell::{OnceCell, RefCell};
use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::fs::File;
use std::io::ErrorKind;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use zstd::bulk::Decompressor;

use crate::dir::{Form, file_name, io_error, snapshot_name};
use crate::fileref::{self, Reopen, Trust};
use crate::format::{self, FileBytes, ReadAt};
use crate::fs::Dir;
use crate::index::{BlockTable, Index, MAX_PATCH_DEPTH, SlotRun, find_run};
use crate::kept;
use crate::model::{Content, Credentials, FileRef, Mapping, PAGE_SIZE, SnapshotMeta};
use crate::raw::{self, PageSpan};
use crate::source::SnapshotSource;
use crate::trust::{BeyondOwner, CredentialsRefused, OwnerRights};
use crate::{Error, Result};

/// Decoded blocks a snapshot keeps, so that a sequential read decodes each block once even
/// when its pages are patches on pages in other blocks.
const CACHED_BLOCKS: usize = 16;
/// Snapshot files a snapshot keeps open for its reads.
const OPEN_FILES: usize = 64;
const PAGE: usize = PAGE_SIZE as usize;

/// The page table of the raw snapshot of a run resolved last, shared by the run's
/// readers: the next one resolves from there.
#[derive(Debug, Default)]
pub(crate) struct RawTables(Mutex<Option<(u32, Vec<SlotRun>)>>);

impl RawTables {
    /// The table of snapshot `seq`, if it is the one kept.
    fn get(&self, seq: u32) -> Option<Vec<SlotRun>> {
        let kept = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        kept.as_ref().filter(|(at, _)| *at == seq).map(|(_, table)| table.clone())
    }

    fn keep(&self, seq: u32, table: &[SlotRun]) {
        *self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some((seq, table.to_vec()));
    }
}

/// An open snapshot. Reads pages from its own file and from the earlier files its index
/// and their patch chains name, opening each at most once.
pub struct Snapshot {
    name: String,
    meta: SnapshotMeta,
    /// Every stored page: where its bytes are.
    runs: Vec<SlotRun>,
    file_bytes: u64,
    raw: bool,
    state: RefCell<State>,
    /// What the store's owners have, looked up once, when a thread's credentials are first
    /// asked for.
    rights: OnceCell<OwnerRights>,
}

/// What reading opens and caches as it goes.
struct State {
    slots: Slots,
    /// Files that mappings refer to, checked to be the captured version, and where each
    /// lies: at its path, or kept with the run.
    refs: HashMap<FileRef, (File, PathBuf)>,
    /// Whose reading rights those files must also satisfy.
    trust: Trust,
}

/// Snapshot files opened for their slots, a cache of decoded blocks, and the last page
/// put together: reads the page a slot holds, following its chain of patches.
pub(crate) struct Slots {
    files: Files,
    /// Most recently used last.
    blocks: Vec<CachedBlock>,
    max_blocks: usize,
    dctx: Decompressor<'static>,
    /// Compressed bytes of the block being decoded.
    scratch: Vec<u8>,
    /// The page at `page_at`, `(seq, raw, slot)`, put together.
    page: Vec<u8>,
    page_at: Option<(u32, bool, u32)>,
    /// The page tables of compacted files read in place of raw files that compaction
    /// removed, by seq.
    replaced: HashMap<u32, Vec<SlotRun>>,
}

/// The snapshot files of a run opened so far, by seq and form (raw or not).
struct Files {
    dir: Arc<Dir>,
    open: HashMap<(u32, bool), SourceFile>,
    /// Beyond this many, opening one closes the least recently used.
    max: usize,
    /// Counts uses, to find the least recently used.
    clock: u64,
}

/// An open snapshot file whose header, footer and index (or raw commit) passed.
struct SourceFile {
    bytes: FileBytes,
    kind: SourceKind,
    used: u64,
}

enum SourceKind {
    /// A compacted file: its blocks and which slots are patches.
    Compact { blocks: BlockTable, patches: Vec<SlotRun> },
    /// A raw file: `slot_count` whole pages after its header page.
    Raw { slot_count: u64 },
}

struct CachedBlock {
    seq: u32,
    block: usize,
    pages: Vec<u8>,
}

/// A snapshot file as opened by [`open_form`], before its metadata is kept or dropped.
enum Opened {
    Compact { file: SourceFile, runs: Vec<SlotRun>, meta: Option<SnapshotMeta> },
    Raw { file: SourceFile, record: raw::Record },
}

impl Snapshot {
    /// Opens snapshot `seq` of the run in `dir`, compacted if it is, else raw (resolved
    /// from the run's `tables` where it can); named `name` in errors.
    /// [`Error::NoSuchSnapshot`] if neither file exists.
    pub(crate) fn open(dir: Arc<Dir>, seq: u32, name: String, tables: &RawTables) -> Result<Snapshot> {
        let mut files = Files { dir, open: HashMap::new(), max: OPEN_FILES, clock: 0 };
        let (opened, raw) = open_either(&files.dir, seq, &name, true)?;
        let (file, runs, meta) = match opened {
            Opened::Compact { file, runs, meta } => (file, runs, meta.expect("metadata was asked for")),
            Opened::Raw { file, record } => {
                let runs = resolve(&files.dir, seq, &record, &name, tables)?;
                (file, runs, record.meta.expect("metadata was asked for"))
            }
        };
        crate::names::check_meta_name(&meta.name, &name)
            .map_err(|detail| Error::Corrupt { snapshot: name.clone(), detail })?;
        let file_bytes = file.bytes.len;
        let trust = Trust::of_run_dir(files.dir.path());
        files.open.insert((seq, raw), file);
        let slots = Slots::with_files(files, CACHED_BLOCKS).map_err(|e| io_error(Path::new(&name), e))?;
        Ok(Snapshot {
            name,
            meta,
            runs,
            file_bytes,
            raw,
            state: RefCell::new(State { slots, refs: HashMap::new(), trust }),
            rights: OnceCell::new(),
        })
    }

    /// The snapshot's name in its run: `S3`, `S1.0`, `S2.new`. Errors use it.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Everything about the snapshot except page contents.
    pub fn meta(&self) -> &SnapshotMeta {
        &self.meta
    }

    /// Size of this snapshot's own file in bytes.
    pub fn file_bytes(&self) -> u64 {
        self.file_bytes
    }

    /// Whether it is read from its raw file (not compacted yet).
    pub fn is_raw(&self) -> bool {
        self.raw
    }

    /// Fills `buf` with the target's memory at `addr` as it was in the snapshot. The range
    /// may span pages and adjacent mappings; [`Error::Unmapped`](crate::Error::Unmapped)
    /// or [`Error::Unreadable`](crate::Error::Unreadable) if part of it has no contents.
    pub fn read(&self, addr: u64, buf: &mut [u8]) -> Result<()> {
        let mut state = self.state.borrow_mut();
        let mut done = 0;
        while done < buf.len() {
            let pos = addr.checked_add(done as u64).ok_or_else(|| self.unmapped(u64::MAX))?;
            let m = self.mapping_at(pos).ok_or_else(|| self.unmapped(pos))?;
            let page_start = pos - pos % PAGE_SIZE;
            let end = pos.saturating_add((buf.len() - done) as u64).min(page_start + PAGE_SIZE).min(m.end);
            let out = &mut buf[done..done + (end - pos) as usize];
            let stored = match (&m.content, find_run(&self.runs, pos / PAGE_SIZE)) {
                (Content::Unreadable, _) => {
                    return Err(Error::Unreadable { addr: pos, snapshot: self.name.clone() });
                }
                (_, Some((source, raw, slot))) => {
                    state.slots.stored_page(source, raw, slot, pos / PAGE_SIZE, &self.name)?
                }
                (_, None) => None,
            };
            match (stored, &m.content) {
                (Some(page), _) => {
                    let from = (pos - page_start) as usize;
                    out.copy_from_slice(&page[from..from + out.len()]);
                }
                (None, Content::File(f)) => {
                    let (file, _) = state.file_ref(f, &self.name)?;
                    // `check_meta` made sure that `offset + len` does not overflow.
                    fileref::read_at(file, m.offset + (pos - m.start), out, &f.path)?;
                }
                // A zero mapping's page that is not stored (an unreadable one returned
                // above).
                (None, _) => out.fill(0),
            }
            done += out.len();
        }
        Ok(())
    }

    /// The address ranges whose bytes the store holds for this snapshot (in this file or
    /// earlier ones): ascending, page-aligned, neither overlapping nor touching. Zero pages
    /// and pages a file provides are not among them. There are as many as the index has
    /// runs, however much they claim to cover: reading is what checks a claim.
    pub fn stored_ranges(&self) -> Vec<Range<u64>> {
        let mut ranges: Vec<Range<u64>> = Vec::with_capacity(self.runs.len());
        for r in &self.runs {
            // The top page's end is 2^64: it saturates to the last address.
            let (start, end) = (r.first * PAGE_SIZE, r.end().saturating_mul(PAGE_SIZE));
            match ranges.last_mut() {
                Some(last) if last.end == start => last.end = end,
                _ => ranges.push(start..end),
            }
        }
        ranges
    }

    /// Checks that every file the snapshot's mappings refer to is still the version that
    /// was mapped; [`Error::FileChanged`](crate::Error::FileChanged) names the first that
    /// is not.
    pub fn check_files(&self) -> Result<()> {
        for m in &self.meta.mappings {
            if let Content::File(f) = &m.content {
                self.check_file(f)?;
            }
        }
        Ok(())
    }

    /// Checks that the file `f` is, at its recorded path, still the version that was
    /// mapped, whatever copy the run kept: for a shared mapping, which a restore makes of
    /// the file at that path ([`Error::FileChanged`](crate::Error::FileChanged),
    /// [`Error::FileRefused`](crate::Error::FileRefused)).
    pub fn check_file_in_place(&self, f: &FileRef) -> Result<()> {
        fileref::open(f, &self.state.borrow().trust, &self.name).map(drop)
    }

    /// Checks that the pages the file `f` provides can be read: it is the version that was
    /// mapped, a regular file, and readable by the store's owner
    /// ([`Error::FileChanged`](crate::Error::FileChanged),
    /// [`Error::FileRefused`](crate::Error::FileRefused)).
    pub fn check_file(&self, f: &FileRef) -> Result<()> {
        self.open_file(f).map(drop)
    }

    /// The file `f` names, opened and checked as [`check_file`](Self::check_file) does:
    /// for reading more of it than its pages (a program's symbols).
    pub fn open_file(&self, f: &FileRef) -> Result<File> {
        let mut state = self.state.borrow_mut();
        let (file, _) = state.file_ref(f, &self.name)?;
        file.try_clone().map_err(|e| io_error(Path::new(&f.path), e))
    }

    /// Where the file `f` names lies, checked as [`check_file`](Self::check_file) does: its
    /// recorded path, or the copy kept with the run where the file there changed since.
    /// For tools that open files by path (gdb).
    pub fn file_path(&self, f: &FileRef) -> Result<PathBuf> {
        let mut state = self.state.borrow_mut();
        state.file_ref(f, &self.name).map(|(_, path)| path.clone())
    }

    fn mapping_at(&self, addr: u64) -> Option<&Mapping> {
        let mappings = &self.meta.mappings;
        let m = mappings.get(mappings.partition_point(|m| m.end <= addr))?;
        m.contains(addr).then_some(m)
    }

    fn unmapped(&self, addr: u64) -> Error {
        Error::Unmapped { addr, snapshot: self.name.clone() }
    }
}

impl SnapshotSource for Snapshot {
    fn meta(&self) -> &SnapshotMeta {
        Snapshot::meta(self)
    }

    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<()> {
        Snapshot::read(self, addr, buf)
    }

    fn stored_ranges(&self) -> Vec<Range<u64>> {
        Snapshot::stored_ranges(self)
    }

    fn open_file(&self, f: &FileRef) -> Result<File> {
        Snapshot::open_file(self, f)
    }

    fn file_path(&self, f: &FileRef) -> Result<PathBuf> {
        Snapshot::file_path(self, f)
    }

    fn check_reopen(&self, r: &Reopen) -> Result<()> {
        self.state.borrow().trust.reopen(r, &self.name).map(drop)
    }

    fn credentials_of(&self, tid: i32) -> std::result::Result<Credentials, CredentialsRefused> {
        let rights = self.rights.get_or_init(|| self.state.borrow().trust.rights());
        rights.credentials_of(&self.meta.process, tid, BeyondOwner::Refuse)
    }
}

impl std::fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Snapshot")
            .field("name", &self.name)
            .field("raw", &self.raw)
            .field("file_bytes", &self.file_bytes)
            .field("runs", &self.runs.len())
            .finish_non_exhaustive()
    }
}

/// Only the metadata of snapshot `seq` of the run in `dir`, and whether it is raw: what a
/// listing needs, without a page table or caches.
pub(crate) fn read_meta(dir: &Dir, seq: u32, name: &str) -> Result<(SnapshotMeta, bool)> {
    let (meta, raw) = match open_either(dir, seq, name, true)?.0 {
        Opened::Compact { meta, .. } => (meta.expect("metadata was asked for"), false),
        Opened::Raw { record, .. } => (record.meta.expect("metadata was asked for"), true),
    };
    crate::names::check_meta_name(&meta.name, name)
        .map_err(|detail| Error::Corrupt { snapshot: name.to_owned(), detail })?;
    Ok((meta, raw))
}

/// The raw file of snapshot `seq` (named `name` in errors), checked, and its record with
/// its metadata.
pub(crate) fn read_raw(dir: &Dir, seq: u32, name: &str) -> Result<(FileBytes, raw::Record)> {
    match open_form(dir, seq, true, name, true)? {
        Opened::Raw { file, record } => Ok((file.bytes, record)),
        Opened::Compact { .. } => unreachable!("opened raw"),
    }
}

/// A stored page of a compacted snapshot, as a writer going on after it needs it.
pub(crate) struct StoredPage {
    /// The page's number (address / 4096).
    pub page: u64,
    /// The file and slot holding its bytes.
    pub seq: u32,
    pub slot: u32,
    /// `xxh3_128` of its bytes.
    pub hash: u128,
    /// Whether that slot holds a patch (not the whole page).
    pub patched: bool,
}

/// Every stored page of compacted snapshot `seq`.
pub(crate) fn page_entries(dir: &Arc<Dir>, seq: u32) -> Result<Vec<StoredPage>> {
    let name = snapshot_name(seq);
    let Opened::Compact { file, runs, .. } = open_form(dir, seq, false, &name, false)? else {
        unreachable!("opened compacted")
    };
    let mut slots = Slots::new(Arc::clone(dir), CACHED_BLOCKS, 64).map_err(|e| io_error(dir.path(), e))?;
    slots.files.open.insert((seq, false), file);
    let mut entries = Vec::new();
    for run in &runs {
        for k in 0..run.count {
            let (page, slot) = (run.first + u64::from(k), run.first_slot + k);
            let hash = xxhash_rust::xxh3::xxh3_128(slots.page(run.seq, slot, page, &name)?);
            let file = slots.files.get(run.seq, false, &name)?;
            let SourceKind::Compact { patches, .. } = &file.kind else { unreachable!("compacted") };
            entries.push(StoredPage {
                page,
                seq: run.seq,
                slot,
                hash,
                patched: find_run(patches, slot.into()).is_some(),
            });
        }
    }
    Ok(entries)
}

/// Opens snapshot `seq`: its compacted file if there is one, else its raw file (looking
/// for the compacted one again if compaction removed the raw one meanwhile). With
/// `meta`, its metadata is decoded and checked too. Returns whether it is
/// raw. [`Error::NoSuchSnapshot`] (with `name` and nothing else) if neither exists.
fn open_either(dir: &Dir, seq: u32, name: &str, meta: bool) -> Result<(Opened, bool)> {
    for raw in [false, true, false] {
        match open_form(dir, seq, raw, name, meta) {
            Ok(opened) => return Ok((opened, raw)),
            Err(Error::Io { source, .. }) if source.kind() == ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    Err(Error::NoSuchSnapshot { name: name.to_owned(), run: String::new(), available: String::new() })
}

/// Opens the compacted (or, with `raw`, the raw) file of snapshot `seq`, named `name` in
/// errors.
fn open_form(dir: &Dir, seq: u32, raw: bool, name: &str, meta: bool) -> Result<Opened> {
    let file_name = file_name(seq, if raw { Form::Raw } else { Form::Compact });
    let path = dir.join(&file_name);
    let bytes = dir.open_file(&file_name).and_then(FileBytes::new).map_err(|e| io_error(&path, e))?;
    if raw {
        let header = format::range(&bytes, 0, raw::HEADER_PAGE.min(bytes.len), "raw header page")
            .map_err(|bad| bad.named(name))?;
        let commit = raw::check_header_page(&header, seq, bytes.len).map_err(|bad| bad.named(name))?;
        let record_bytes = format::range(&bytes, commit.record_offset, commit.record_len, "raw record")
            .map_err(|bad| bad.named(name))?;
        let record = raw::decode_record(&record_bytes, seq, &commit, meta).map_err(|bad| bad.named(name))?;
        let kind = SourceKind::Raw { slot_count: commit.slot_count };
        return Ok(Opened::Raw { file: SourceFile { bytes, kind, used: 0 }, record });
    }
    let opened = format::open(&bytes, seq).map_err(|bad| bad.named(name))?;
    let meta =
        meta.then(|| format::decode_meta(&bytes, &opened)).transpose().map_err(|bad| bad.named(name))?;
    let Index { blocks, pages, patches } = opened.index;
    let kind = SourceKind::Compact { blocks, patches };
    Ok(Opened::Compact { file: SourceFile { bytes, kind, used: 0 }, runs: pages, meta })
}

/// The page table of raw snapshot `seq` (whose record is `record`) of the run in `dir`,
/// resolved through the snapshots before it, back to the table `tables` keeps if it is on
/// the way; kept there in turn.
fn resolve(
    dir: &Dir,
    seq: u32,
    record: &raw::Record,
    needed_by: &str,
    tables: &RawTables,
) -> Result<Vec<SlotRun>> {
    if let Some(table) = tables.get(seq) {
        return Ok(table);
    }
    // Newest first: (seq, copied, unchanged) of each raw snapshot the table depends on.
    let mut chain: Vec<(u32, Vec<PageSpan>, Vec<PageSpan>)> =
        vec![(seq, record.copied.clone(), record.unchanged.clone())];
    let mut table = Vec::new();
    loop {
        let (at, _, unchanged) = chain.last().expect("the chain starts with the snapshot itself");
        if unchanged.is_empty() {
            break;
        }
        let Some(before) = at.checked_sub(1) else {
            return Err(Error::Corrupt {
                snapshot: needed_by.to_owned(),
                detail: "S0 has pages unchanged since a snapshot before it".into(),
            });
        };
        let gone = |e: Error| match e {
            Error::NoSuchSnapshot { .. } => Error::Corrupt {
                snapshot: snapshot_name(before),
                detail: format!("its file is missing ({needed_by} keeps pages there)"),
            },
            e => e,
        };
        if let Some(kept) = tables.get(before) {
            table = kept;
            break;
        }
        match open_either(dir, before, &snapshot_name(before), false).map_err(gone)? {
            (Opened::Compact { runs, .. }, _) => {
                table = runs;
                break;
            }
            (Opened::Raw { record, .. }, _) => chain.push((before, record.copied, record.unchanged)),
        }
    }
    for (at, copied, unchanged) in chain.into_iter().rev() {
        let mut own = Vec::new();
        let mut slot: u64 = 0;
        for span in &copied {
            push_span(&mut own, span.first, span.pages, at, true, slot)
                .map_err(|detail| Error::Corrupt { snapshot: snapshot_name(at), detail })?;
            slot += span.pages;
        }
        table = merge(own, restrict(&table, &unchanged));
    }
    tables.keep(seq, &table);
    Ok(table)
}

/// Appends the page run `first..first + pages`, stored from `slot` on in file `seq`, as
/// runs of at most `u32::MAX` pages.
fn push_span(
    runs: &mut Vec<SlotRun>,
    first: u64,
    pages: u64,
    seq: u32,
    raw: bool,
    slot: u64,
) -> Result<(), String> {
    let mut done = 0;
    while done < pages {
        let count = (pages - done).min(u64::from(u32::MAX));
        let first_slot = u32::try_from(slot + done)
            .ok()
            .filter(|s| u64::from(*s) + count <= 1 << 32)
            .ok_or_else(|| format!("raw file holds more than 2^32 pages (slot {})", slot + done))?;
        runs.push(SlotRun { first: first + done, count: count as u32, seq, raw, first_slot });
        done += count;
    }
    Ok(())
}

/// The parts of `table`'s runs that lie in `spans` (both ascending).
fn restrict(table: &[SlotRun], spans: &[PageSpan]) -> Vec<SlotRun> {
    let mut out = Vec::new();
    let mut i = 0;
    for span in spans {
        while i < table.len() && table[i].end() <= span.first {
            i += 1;
        }
        let mut j = i;
        while j < table.len() && table[j].first < span.end() {
            let r = table[j];
            let first = r.first.max(span.first);
            let end = r.end().min(span.end());
            // Inside the run: the offset and the length fit its u32 count.
            out.push(SlotRun {
                first,
                count: (end - first) as u32,
                first_slot: r.first_slot + (first - r.first) as u32,
                ..r
            });
            j += 1;
        }
    }
    out
}

/// Two ascending lists of runs over disjoint pages, as one.
fn merge(a: Vec<SlotRun>, b: Vec<SlotRun>) -> Vec<SlotRun> {
    let mut out = Vec::with_capacity(a.len() + b.len());
    let (mut a, mut b) = (a.into_iter().peekable(), b.into_iter().peekable());
    loop {
        let next = match (a.peek(), b.peek()) {
            (Some(x), Some(y)) if x.first <= y.first => a.next(),
            (Some(_), Some(_)) => b.next(),
            (Some(_), None) => a.next(),
            (None, _) => b.next(),
        };
        match next {
            Some(run) => out.push(run),
            None => return out,
        }
    }
}

impl Slots {
    /// Reads the snapshot files of the run in `dir`, keeping up to `max_blocks` decoded
    /// blocks and `max_files` files open.
    pub(crate) fn new(dir: Arc<Dir>, max_blocks: usize, max_files: usize) -> std::io::Result<Slots> {
        Slots::with_files(Files { dir, open: HashMap::new(), max: max_files, clock: 0 }, max_blocks)
    }

    fn with_files(files: Files, max_blocks: usize) -> std::io::Result<Slots> {
        Ok(Slots {
            files,
            blocks: Vec::new(),
            max_blocks,
            dctx: Decompressor::new()?,
            scratch: Vec::new(),
            page: vec![0; PAGE],
            page_at: None,
            replaced: HashMap::new(),
        })
    }

    /// The page that slot `slot` of compacted file `seq` holds: its bytes if whole, else
    /// XOR-ed with its base's page, recursively, through at most [`MAX_PATCH_DEPTH`]
    /// patches. `page` (its number) and `needed_by` (the snapshot whose index names the
    /// slot) are for errors. Damage is reported naming the file it is in.
    pub(crate) fn page(&mut self, seq: u32, slot: u32, page: u64, needed_by: &str) -> Result<&[u8]> {
        if self.page_at != Some((seq, false, slot)) {
            self.page_at = None;
            self.put_together(seq, slot, page, needed_by)?;
            self.page_at = Some((seq, false, slot));
        }
        Ok(&self.page)
    }

    /// Page `page` from slot `slot` of file `seq`, raw or compacted, as a snapshot's page
    /// table names it. `None` where compaction replaced the raw file by one that does not
    /// store the page (a zero page, or one equal to its file): it reads as its mapping's
    /// content.
    fn stored_page(
        &mut self,
        seq: u32,
        raw: bool,
        slot: u32,
        page: u64,
        needed_by: &str,
    ) -> Result<Option<&[u8]>> {
        if !raw {
            return self.page(seq, slot, page, needed_by).map(Some);
        }
        if self.page_at != Some((seq, true, slot)) {
            self.page_at = None;
            if !self.raw_page(seq, slot, page, needed_by)? {
                return Ok(None);
            }
            self.page_at = Some((seq, true, slot));
        }
        Ok(Some(&self.page))
    }

    /// Reads page `page`, at slot `slot` of raw file `seq`, into `self.page`; `false` if
    /// the file's replacement does not store it.
    fn raw_page(&mut self, seq: u32, slot: u32, page: u64, needed_by: &str) -> Result<bool> {
        if self.files.try_get(seq, true)?.is_none() {
            return self.replaced_page(seq, page, needed_by);
        }
        let file = self.files.get(seq, true, needed_by)?;
        let SourceKind::Raw { slot_count } = file.kind else { unreachable!("raw files are opened raw") };
        if u64::from(slot) >= slot_count {
            return Err(Error::Corrupt {
                snapshot: needed_by.to_owned(),
                detail: format!(
                    "page {:#x} is at slot {slot} of raw S{seq}, which holds {slot_count} pages",
                    page * PAGE_SIZE
                ),
            });
        }
        let offset = raw::HEADER_PAGE + u64::from(slot) * PAGE_SIZE;
        file.bytes.read_exact_at(&mut self.page, offset).map_err(|e| Error::Corrupt {
            snapshot: snapshot_name(seq),
            detail: format!("slot {slot} of its raw file cannot be read: {e}"),
        })?;
        Ok(true)
    }

    /// Page `page` as raw snapshot `seq` held it, from the compacted file that replaced
    /// the raw one after a page table named it; `false` if that file does not store it.
    fn replaced_page(&mut self, seq: u32, page: u64, needed_by: &str) -> Result<bool> {
        if !self.replaced.contains_key(&seq) {
            let name = snapshot_name(seq);
            let Opened::Compact { runs, .. } = open_form(&self.files.dir, seq, false, &name, false)
                .map_err(|e| missing(e, seq, needed_by))?
            else {
                unreachable!("opened compacted")
            };
            self.replaced.insert(seq, runs);
        }
        let Some((at, _, slot)) = find_run(&self.replaced[&seq], page) else { return Ok(false) };
        self.put_together(at, slot, page, needed_by)?;
        Ok(true)
    }

    fn put_together(&mut self, mut seq: u32, mut slot: u32, page: u64, needed_by: &str) -> Result<()> {
        let first_seq = seq;
        // The patch whose base `(seq, slot)` is; none for the slot a page index named.
        let mut patch: Option<(u32, u32)> = None;
        let mut depth = 0;
        loop {
            let file = self.files.get(seq, false, needed_by)?;
            let SourceKind::Compact { blocks, patches } = &file.kind else {
                unreachable!("compacted files are opened compacted")
            };
            let Some((block, in_block)) = blocks.locate(slot) else {
                let holds = blocks.slot_count();
                let (snapshot, detail) = match patch {
                    None => (
                        needed_by.to_owned(),
                        format!(
                            "index: page {:#x} is at slot {slot} of S{seq}, which holds {holds} pages",
                            page * PAGE_SIZE
                        ),
                    ),
                    Some((p_seq, p_slot)) => (
                        snapshot_name(p_seq),
                        format!(
                            "index: slot {p_slot} is a patch on slot {slot} of S{seq}, which holds {holds} pages"
                        ),
                    ),
                };
                return Err(Error::Corrupt { snapshot, detail });
            };
            let base = find_run(patches, slot.into()).map(|(seq, _, slot)| (seq, slot));
            let stored = block_pages(
                &mut self.blocks,
                self.max_blocks,
                &mut self.dctx,
                &mut self.scratch,
                seq,
                file,
                block,
            )?
            .get(in_block * PAGE..(in_block + 1) * PAGE)
            // `decode_block` made the block `page_count` pages and `locate` put
            // `in_block` below `page_count`, so this always finds the page.
            .ok_or_else(|| Error::Corrupt {
                snapshot: snapshot_name(seq),
                detail: format!("block {block} holds no page {in_block}"),
            })?;
            if depth == 0 {
                self.page.copy_from_slice(stored);
            } else {
                xor_into(&mut self.page, stored);
            }
            match base {
                None => return Ok(()),
                Some(_) if depth == MAX_PATCH_DEPTH => {
                    // No file alone is wrong; the chain's start is where it grew too long.
                    return Err(Error::Corrupt {
                        snapshot: snapshot_name(first_seq),
                        detail: format!(
                            "index: page {:#x} is stored as a chain of more than {MAX_PATCH_DEPTH} patches, S{first_seq} back to S{seq}",
                            page * PAGE_SIZE
                        ),
                    });
                }
                Some(next) => {
                    patch = Some((seq, slot));
                    (seq, slot) = next;
                    depth += 1;
                }
            }
        }
    }
}

/// The decoded pages of block `block` of compacted file `seq`, from `cache` (most recently
/// used last, at most `max` blocks) or decoded into it.
fn block_pages<'a>(
    cache: &'a mut Vec<CachedBlock>,
    max: usize,
    dctx: &mut Decompressor<'_>,
    scratch: &mut Vec<u8>,
    seq: u32,
    file: &SourceFile,
    block: usize,
) -> Result<&'a [u8]> {
    let SourceKind::Compact { blocks, .. } = &file.kind else {
        unreachable!("only compacted files have blocks")
    };
    match cache.iter().position(|c| c.seq == seq && c.block == block) {
        Some(i) => {
            let hit = cache.remove(i);
            cache.push(hit);
        }
        None => {
            let mut pages = match cache.len() {
                n if n >= max => cache.remove(0).pages,
                _ => Vec::new(),
            };
            format::decode_block(&file.bytes, blocks, block, dctx, scratch, &mut pages)
                .map_err(|bad| bad.named(&snapshot_name(seq)))?;
            cache.push(CachedBlock { seq, block, pages });
        }
    }
    Ok(cache.last().map_or(&[], |c| &c.pages))
}

/// `dst ^= src`, byte by byte.
pub(crate) fn xor_into(dst: &mut [u8], src: &[u8]) {
    for (d, s) in dst.iter_mut().zip(src) {
        *d ^= s;
    }
}

impl Files {
    /// Snapshot file `seq` (raw or compacted), opened on first use (closing the least
    /// recently used file if `max` are open); `needed_by` names the snapshot that takes
    /// pages from it, for errors.
    fn get(&mut self, seq: u32, raw: bool, needed_by: &str) -> Result<&SourceFile> {
        let dir = Arc::clone(&self.dir);
        match self.try_get(seq, raw)? {
            Some(file) => Ok(file),
            None => {
                let path = dir.join(&file_name(seq, if raw { Form::Raw } else { Form::Compact }));
                Err(missing(io_error(&path, ErrorKind::NotFound.into()), seq, needed_by))
            }
        }
    }

    /// As [`Files::get`], but `None` if the file is not there.
    fn try_get(&mut self, seq: u32, raw: bool) -> Result<Option<&SourceFile>> {
        let key = (seq, raw);
        if self.open.len() >= self.max
            && !self.open.contains_key(&key)
            && let Some(&oldest) = self.open.iter().min_by_key(|(_, f)| f.used).map(|(key, _)| key)
        {
            self.open.remove(&oldest);
        }
        let file = match self.open.entry(key) {
            Entry::Occupied(file) => file.into_mut(),
            Entry::Vacant(entry) => match open_form(&self.dir, seq, raw, &snapshot_name(seq), false) {
                Ok(Opened::Compact { file, .. } | Opened::Raw { file, .. }) => entry.insert(file),
                Err(Error::Io { source, .. }) if source.kind() == ErrorKind::NotFound => return Ok(None),
                Err(e) => return Err(e),
            },
        };
        self.clock += 1;
        file.used = self.clock;
        Ok(Some(file))
    }
}

/// `e`, or, for a missing file of snapshot `seq`, that `needed_by` keeps pages there.
fn missing(e: Error, seq: u32, needed_by: &str) -> Error {
    match e {
        Error::Io { path, source } if source.kind() == ErrorKind::NotFound => Error::Corrupt {
            snapshot: snapshot_name(seq),
            detail: format!("{} is missing ({needed_by} keeps pages there)", path.display()),
        },
        e => e,
    }
}

impl State {
    /// The file `f` names, opened and checked on first use.
    /// Where the file at the recorded path is no longer the version mapped, the version
    /// the run kept, if it kept it.
    fn file_ref(&mut self, f: &FileRef, snapshot: &str) -> Result<&(File, PathBuf)> {
        if !self.refs.contains_key(f) {
            let opened = match fileref::open(f, &self.trust, snapshot) {
                Ok(file) => (file, PathBuf::from(&f.path)),
                Err(e @ Error::FileChanged { .. }) => {
                    kept::open(&self.slots.files.dir, f, &self.trust).ok_or(e)?
                }
                Err(e) => return Err(e),
            };
            self.refs.insert(f.clone(), opened);
        }
        Ok(&self.refs[f])
    }
}
