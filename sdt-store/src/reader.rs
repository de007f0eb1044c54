//! Reading a snapshot back: metadata, and any page, byte-exact.
//!
//! [`Slots`] turns a slot of a snapshot file into its page, following patches to their
//! bases; the writer reads previous versions of pages through it too.

use std::cell::RefCell;
use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::fs::File;
use std::io::{self, ErrorKind};
use std::path::{Path, PathBuf};

use memmap2::Mmap;
use zstd::bulk::Decompressor;

use crate::dir::{io_error, map_file, snapshot_name, snapshot_path};
use crate::fileref::{self, Trust};
use crate::format;
use crate::index::{BlockTable, Index, MAX_PATCH_DEPTH, SlotRun, find_run};
use crate::model::{Content, FileRef, Mapping, PAGE_SIZE, SnapshotMeta};
use crate::{Error, Result};

/// Decoded blocks a snapshot keeps, so that a sequential read decodes each block once even
/// when its pages are patches on pages in other blocks.
const CACHED_BLOCKS: usize = 16;
const PAGE: usize = PAGE_SIZE as usize;

/// An open snapshot. Reads pages from its own file and from the earlier files its index
/// and their patch chains name, opening each at most once.
pub struct Snapshot {
    name: String,
    dir: PathBuf,
    meta: SnapshotMeta,
    runs: Vec<SlotRun>,
    file_bytes: u64,
    state: RefCell<State>,
}

/// What reading opens and caches as it goes.
struct State {
    slots: Slots,
    /// Files that mappings refer to, checked to be the captured version.
    refs: HashMap<FileRef, File>,
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
    /// The page at `page_at`, `(seq, slot)`, put together.
    page: Vec<u8>,
    page_at: Option<(u32, u32)>,
}

/// The snapshot files of a run opened so far, by seq.
struct Files {
    dir: PathBuf,
    open: HashMap<u32, SnapFile>,
    /// Beyond this many, opening one closes the least recently used.
    max: usize,
    /// Counts uses, to find the least recently used.
    clock: u64,
}

/// A mapped snapshot file whose header, footer and index passed.
struct SnapFile {
    map: Mmap,
    blocks: BlockTable,
    patches: Vec<SlotRun>,
    used: u64,
}

struct CachedBlock {
    seq: u32,
    block: usize,
    pages: Vec<u8>,
}

impl Snapshot {
    /// Checks and decodes snapshot `seq` of the run in `dir`, mapped as `map`.
    pub(crate) fn open(dir: PathBuf, seq: u32, name: String, map: Mmap) -> Result<Snapshot> {
        let opened = format::open(&map, seq).map_err(|bad| bad.named(&name))?;
        let meta = format::decode_meta(&map, &opened).map_err(|bad| bad.named(&name))?;
        crate::names::check_meta_name(&meta.name, &name)
            .map_err(|detail| Error::Corrupt { snapshot: name.clone(), detail })?;
        let Index { blocks, pages: runs, patches } = opened.index;
        let mut slots = Slots::new(dir.clone(), CACHED_BLOCKS, usize::MAX)
            .map_err(|e| io_error(&snapshot_path(&dir, seq), e))?;
        let file_bytes = map.len() as u64;
        let trust = Trust::of_run_dir(&dir);
        slots.files.open.insert(seq, SnapFile { map, blocks, patches, used: 0 });
        Ok(Snapshot {
            name,
            dir,
            meta,
            runs,
            file_bytes,
            state: RefCell::new(State { slots, refs: HashMap::new(), trust }),
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
            match (&m.content, find_run(&self.runs, pos / PAGE_SIZE)) {
                (Content::Unreadable, _) => {
                    return Err(Error::Unreadable { addr: pos, snapshot: self.name.clone() });
                }
                (_, Some((source, slot))) => {
                    let page = state.slots.page(source, slot, pos / PAGE_SIZE, &self.name)?;
                    let from = (pos - page_start) as usize;
                    out.copy_from_slice(&page[from..from + out.len()]);
                }
                (Content::Zero, None) => out.fill(0),
                (Content::File(f), None) => {
                    let file = state.file_ref(f, &self.name)?;
                    // `check_mappings` made sure that `offset + len` does not overflow.
                    fileref::read_at(file, m.offset + (pos - m.start), out, &f.path)?;
                }
            }
            done += out.len();
        }
        Ok(())
    }

    /// Page-aligned addresses of the pages whose bytes the store holds for this snapshot
    /// (in this file or earlier ones), ascending. Zero pages and pages a file provides are
    /// not among them.
    pub fn stored_pages(&self) -> Vec<u64> {
        self.runs.iter().flat_map(|r| r.first..r.end()).map(|page| page * PAGE_SIZE).collect()
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
        let file = state.file_ref(f, &self.name)?;
        file.try_clone().map_err(|e| io_error(Path::new(&f.path), e))
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

impl std::fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Snapshot")
            .field("name", &self.name)
            .field("dir", &self.dir)
            .field("file_bytes", &self.file_bytes)
            .field("runs", &self.runs.len())
            .finish_non_exhaustive()
    }
}

impl Slots {
    /// Reads the snapshot files of the run in `dir`, keeping up to `max_blocks` decoded
    /// blocks and `max_files` files open.
    pub(crate) fn new(dir: PathBuf, max_blocks: usize, max_files: usize) -> io::Result<Slots> {
        Ok(Slots {
            files: Files { dir, open: HashMap::new(), max: max_files, clock: 0 },
            blocks: Vec::new(),
            max_blocks,
            dctx: Decompressor::new()?,
            page: vec![0; PAGE],
            page_at: None,
        })
    }

    /// The page that slot `slot` of file `seq` holds: its bytes if whole, else XOR-ed with
    /// its base's page, recursively, through at most [`MAX_PATCH_DEPTH`] patches.
    /// `page` (its number) and `needed_by` (the snapshot whose index names the slot) are
    /// for errors. Damage is reported naming the file it is in.
    pub(crate) fn page(&mut self, seq: u32, slot: u32, page: u64, needed_by: &str) -> Result<&[u8]> {
        if self.page_at != Some((seq, slot)) {
            self.page_at = None;
            self.put_together(seq, slot, page, needed_by)?;
            self.page_at = Some((seq, slot));
        }
        Ok(&self.page)
    }

    fn put_together(&mut self, mut seq: u32, mut slot: u32, page: u64, needed_by: &str) -> Result<()> {
        let first_seq = seq;
        // The patch whose base `(seq, slot)` is; none for the slot a page index named.
        let mut patch: Option<(u32, u32)> = None;
        let mut depth = 0;
        loop {
            let file = self.files.get(seq, needed_by)?;
            let Some((block, in_block)) = file.blocks.locate(slot) else {
                let holds = file.blocks.slot_count();
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
            let base = find_run(&file.patches, slot.into());
            let stored = block_pages(&mut self.blocks, self.max_blocks, &mut self.dctx, seq, file, block)?
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

/// The decoded pages of block `block` of file `seq`, from `cache` (most recently used
/// last, at most `max` blocks) or decoded into it.
fn block_pages<'a>(
    cache: &'a mut Vec<CachedBlock>,
    max: usize,
    dctx: &mut Decompressor<'_>,
    seq: u32,
    file: &SnapFile,
    block: usize,
) -> Result<&'a [u8]> {
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
            format::decode_block(&file.map, &file.blocks, block, dctx, &mut pages)
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
    /// Snapshot file `seq`, opened on first use (closing the least recently used file if
    /// `max` are open); `needed_by` names the snapshot that takes pages from it, for errors.
    fn get(&mut self, seq: u32, needed_by: &str) -> Result<&SnapFile> {
        if self.open.len() >= self.max && !self.open.contains_key(&seq) {
            if let Some(&oldest) = self.open.iter().min_by_key(|(_, f)| f.used).map(|(seq, _)| seq) {
                self.open.remove(&oldest);
            }
        }
        let file = match self.open.entry(seq) {
            Entry::Occupied(file) => file.into_mut(),
            Entry::Vacant(entry) => entry.insert(open_source(&self.dir, seq, needed_by)?),
        };
        self.clock += 1;
        file.used = self.clock;
        Ok(file)
    }
}

impl State {
    /// The file `f` names, opened and checked on first use.
    fn file_ref(&mut self, f: &FileRef, snapshot: &str) -> Result<&File> {
        if !self.refs.contains_key(f) {
            let file = fileref::open(f, &self.trust, snapshot)?;
            self.refs.insert(f.clone(), file);
        }
        Ok(&self.refs[f])
    }
}

/// Opens the earlier snapshot file `seq`, which snapshot `needed_by` takes pages from.
fn open_source(dir: &Path, seq: u32, needed_by: &str) -> Result<SnapFile> {
    let path = snapshot_path(dir, seq);
    let name = snapshot_name(seq);
    let map = match map_file(&path) {
        Ok(map) => map,
        Err(e) if e.kind() == ErrorKind::NotFound => {
            return Err(Error::Corrupt {
                snapshot: name,
                detail: format!("{} is missing ({needed_by} keeps pages there)", path.display()),
            });
        }
        Err(e) => return Err(io_error(&path, e)),
    };
    let opened = format::open(&map, seq).map_err(|bad| bad.named(&name))?;
    let Index { blocks, patches, .. } = opened.index;
    Ok(SnapFile { map, blocks, patches, used: 0 })
}
