//! Reading a snapshot back: metadata, and any page, byte-exact.

use std::cell::RefCell;
use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::ErrorKind;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};

use memmap2::Mmap;
use zstd::bulk::Decompressor;

use crate::dir::{io_error, map_file, snapshot_name, snapshot_path};
use crate::format;
use crate::index::{BlockTable, Index, PageRun, find_page};
use crate::model::{Content, FileRef, Mapping, PAGE_SIZE, SnapshotMeta};
use crate::{Error, Result};

/// Decompressed blocks kept, so that a sequential read decompresses each block once.
const CACHED_BLOCKS: usize = 4;

/// An open snapshot. Reads pages from its own file and from the earlier files its index
/// names, opening each at most once.
pub struct Snapshot {
    name: String,
    dir: PathBuf,
    meta: SnapshotMeta,
    runs: Vec<PageRun>,
    file_bytes: u64,
    state: RefCell<State>,
}

/// What reading opens and caches as it goes.
struct State {
    /// Snapshot files by seq: this snapshot's, and the earlier ones opened so far.
    files: BTreeMap<u32, SnapFile>,
    /// Most recently used last.
    blocks: Vec<CachedBlock>,
    dctx: Decompressor<'static>,
    /// Files that mappings refer to, checked to be the captured version.
    refs: HashMap<FileRef, File>,
}

/// A mapped snapshot file whose header, footer and index passed.
struct SnapFile {
    map: Mmap,
    blocks: BlockTable,
}

struct CachedBlock {
    seq: u32,
    block: usize,
    pages: Vec<u8>,
}

impl Snapshot {
    /// Checks and decodes snapshot `seq` of the run in `dir`, mapped as `map`.
    pub(crate) fn open(dir: PathBuf, seq: u32, map: Mmap) -> Result<Snapshot> {
        let name = snapshot_name(seq);
        let opened = format::open(&map, seq).map_err(|bad| bad.named(&name))?;
        let meta = format::decode_meta(&map, &opened).map_err(|bad| bad.named(&name))?;
        let Index { blocks, runs } = opened.index;
        let dctx = Decompressor::new().map_err(|e| io_error(&snapshot_path(&dir, seq), e))?;
        let file_bytes = map.len() as u64;
        let files = BTreeMap::from([(seq, SnapFile { map, blocks })]);
        Ok(Snapshot {
            name,
            dir,
            meta,
            runs,
            file_bytes,
            state: RefCell::new(State { files, blocks: Vec::new(), dctx, refs: HashMap::new() }),
        })
    }

    /// The snapshot's name in its run, from its file: `S3`. Errors use it.
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
            match (&m.content, find_page(&self.runs, pos / PAGE_SIZE)) {
                (Content::Unreadable, _) => {
                    return Err(Error::Unreadable { addr: pos, snapshot: self.name.clone() });
                }
                (_, Some((source, slot))) => {
                    let page = state.page(self, pos / PAGE_SIZE, source, slot)?;
                    let from = (pos - page_start) as usize;
                    out.copy_from_slice(&page[from..from + out.len()]);
                }
                (Content::Zero, None) => out.fill(0),
                (Content::File(f), None) => {
                    let file = state.file_ref(f, &self.name)?;
                    // `check_mappings` made sure that `offset + len` does not overflow.
                    read_file(file, m.offset + (pos - m.start), out, &f.path)?;
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
        self.runs
            .iter()
            .flat_map(|r| r.first_page..r.first_page + u64::from(r.page_count))
            .map(|page| page * PAGE_SIZE)
            .collect()
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

impl State {
    /// The bytes of page `page` of snapshot `snap`, which its index puts at slot `slot`
    /// of file `source`.
    fn page(&mut self, snap: &Snapshot, page: u64, source: u32, slot: u32) -> Result<&[u8]> {
        let file = match self.files.entry(source) {
            Entry::Occupied(file) => file.into_mut(),
            Entry::Vacant(slot) => slot.insert(open_source(&snap.dir, source, &snap.name)?),
        };
        let Some((block, in_block)) = file.blocks.locate(slot) else {
            return Err(Error::Corrupt {
                snapshot: snap.name.clone(),
                detail: format!(
                    "index: page {:#x} is at slot {slot} of S{source}, which holds {} pages",
                    page * PAGE_SIZE,
                    file.blocks.slot_count()
                ),
            });
        };
        match self.blocks.iter().position(|c| c.seq == source && c.block == block) {
            Some(i) => {
                let hit = self.blocks.remove(i);
                self.blocks.push(hit);
            }
            None => {
                let mut pages = match self.blocks.len() {
                    n if n >= CACHED_BLOCKS => self.blocks.remove(0).pages,
                    _ => Vec::new(),
                };
                format::decode_block(&file.map, &file.blocks, block, &mut self.dctx, &mut pages)
                    .map_err(|bad| bad.named(&snapshot_name(source)))?;
                self.blocks.push(CachedBlock { seq: source, block, pages });
            }
        }
        // `decode_block` made the block `page_count` pages and `locate` put `in_block`
        // below `page_count`, so this always finds the page.
        let start = in_block * PAGE_SIZE as usize;
        self.blocks.last().and_then(|c| c.pages.get(start..start + PAGE_SIZE as usize)).ok_or_else(|| {
            Error::Corrupt {
                snapshot: snapshot_name(source),
                detail: format!("block {block} holds no page {in_block}"),
            }
        })
    }

    /// The file `f` names, opened and checked on first use.
    fn file_ref(&mut self, f: &FileRef, snapshot: &str) -> Result<&File> {
        if !self.refs.contains_key(f) {
            let file = open_file_ref(f, snapshot)?;
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
    Ok(SnapFile { map, blocks: opened.index.blocks })
}

/// Opens the file `f` names and checks that it is the version that was mapped.
fn open_file_ref(f: &FileRef, snapshot: &str) -> Result<File> {
    let changed =
        |detail: String| Error::FileChanged { path: f.path.clone(), snapshot: snapshot.to_owned(), detail };
    let path = Path::new(&f.path);
    let file = match File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == ErrorKind::NotFound => {
            return Err(changed("it no longer exists".into()));
        }
        Err(e) => return Err(io_error(path, e)),
    };
    let st = file.metadata().map_err(|e| io_error(path, e))?;
    let mtime_ns = st.mtime().saturating_mul(1_000_000_000).saturating_add(st.mtime_nsec());
    let mut diffs = Vec::new();
    for (what, got, expected) in
        [("device", st.dev(), f.dev), ("inode", st.ino(), f.inode), ("size", st.size(), f.size)]
    {
        if got != expected {
            diffs.push(format!("{what} {got}, expected {expected}"));
        }
    }
    if mtime_ns != f.mtime_ns {
        diffs.push(format!("mtime {mtime_ns} ns, expected {} ns", f.mtime_ns));
    }
    if diffs.is_empty() { Ok(file) } else { Err(changed(diffs.join("; "))) }
}

/// Fills `out` from `file` at `offset`; bytes past the end of the file are zero.
fn read_file(file: &File, mut offset: u64, mut out: &mut [u8], path: &str) -> Result<()> {
    while !out.is_empty() {
        match file.read_at(out, offset) {
            Ok(0) => {
                out.fill(0);
                break;
            }
            Ok(n) => {
                out = &mut out[n..];
                offset += n as u64;
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(io_error(Path::new(path), e)),
        }
    }
    Ok(())
}
