//! The capture's side of the raw log: files that a capture copies pages into, committed
//! as `S<seq>.raw` the moment the snapshot exists.
//!
//! ```text
//!  (program runs)     Spares::make, grow → .spare-P-K.raw: header page + n bytes, allocated,
//!                     fault_in             mapped, every page touched (no fault in the copy)
//!  (pause)            capture copies pages into SpillFile::data() (process_vm_readv)
//!  (breaking thread   RunLog::commit     → record + commit written, renamed to S<seq>.raw:
//!   still held)                            the snapshot survives sdt's death from here on
//!  (program runs)     compaction         → S<seq>.snap written, S<seq>.raw removed
//! ```
//!
//! Space is allocated (`fallocate`) when a spare is made, so a full disk shows there, as
//! an error, never as a `SIGBUS` in the middle of a copy.
//!
//! A raw file compacted while no reader holds it (readers hold a shared `flock` on the
//! raw files they read) is not removed but [`Recycled`]: renamed to a spare name under an
//! exclusive lock and made the next spare, its pages still in memory and on disk, so that
//! a run does not allocate fresh memory and disk for every capture. The lock is let
//! go at the commit, before the rename to its new name: a reader that opened the file
//! under its old name sees that name gone.

use std::fs::File;
use std::io::{self, ErrorKind};
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use memmap2::MmapMut;
use nix::fcntl::{FallocateFlags, fallocate};
use xxhash_rust::xxh3::xxh3_64;

use crate::dir::{Form, RunLog, file_name, io_error};
use crate::fs::Dir;
use crate::model::{PAGE_SIZE, SnapshotMeta};
use crate::raw::{self, Commit, PageSpan};
use crate::{Error, Result};

/// A raw snapshot file being filled by a capture: a spare, until [`RunLog::commit`].
/// Dropped uncommitted, it is removed.
pub struct SpillFile {
    dir: Arc<Dir>,
    name: String,
    file: File,
    /// The header page and `capacity` bytes of data area.
    map: MmapMut,
    capacity: usize,
}

/// A compacted raw file, taken under an exclusive lock and renamed to a spare name, to
/// become a spare again ([`Spares::reuse`]). Dropped, it is removed.
pub struct Recycled {
    dir: Arc<Dir>,
    /// The spare name and the file; taken when it becomes a spare.
    taken: Option<(String, File)>,
}

impl std::fmt::Debug for Recycled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recycled").field("name", &self.taken.as_ref().map(|t| &t.0)).finish()
    }
}

impl Drop for Recycled {
    fn drop(&mut self) {
        if let Some((name, _)) = &self.taken {
            self.dir.remove_file(name).ok();
        }
    }
}

impl Recycled {
    /// Takes raw file `name` of `dir`, if no reader holds it: its commit cleared and its
    /// name changed to a spare's. `None` (the file untouched) if a reader holds it.
    pub(crate) fn take(dir: &Arc<Dir>, name: &str) -> Result<Option<Recycled>> {
        let file = dir.open_file_rw(name).map_err(|e| io_error(&dir.join(name), e))?;
        match file.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => return Ok(None),
            Err(std::fs::TryLockError::Error(e)) => return Err(io_error(&dir.join(name), e)),
        }
        let spare = spare_name();
        file.write_all_at(&[0; 64], raw::commit_offset()).map_err(|e| io_error(&dir.join(name), e))?;
        dir.rename_new(name, &spare).map_err(|e| io_error(&dir.join(&spare), e))?;
        Ok(Some(Recycled { dir: Arc::clone(dir), taken: Some((spare, file)) }))
    }
}

/// A spare's name, unique in this process: `.spare-PID-K.raw`.
fn spare_name() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!(".spare-{}-{}.raw", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed))
}

/// Makes spares for a run; a clone can work on another thread.
#[derive(Clone, Debug)]
pub struct Spares {
    dir: Arc<Dir>,
}

/// What committing a snapshot wrote.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Committed {
    /// Size of the committed file's used part: header page, pages, record.
    pub file_bytes: u64,
}

impl std::fmt::Debug for SpillFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SpillFile").field("name", &self.name).field("capacity", &self.capacity).finish()
    }
}

impl Spares {
    /// An empty spare: its header written, no room for pages yet ([`SpillFile::grow`]).
    pub fn make(&self) -> Result<SpillFile> {
        let name = spare_name();
        let path = self.dir.join(&name);
        let file = self.dir.create_file(&name).map_err(|e| io_error(&path, e))?;
        let header = raw::encode_header();
        let made = file.write_all_at(&header, 0).map_err(|e| io_error(&path, e)).and_then(|()| {
            Ok(SpillFile {
                dir: Arc::clone(&self.dir),
                name: name.clone(),
                map: map(&file, &path, raw::HEADER_PAGE as usize)?,
                file,
                capacity: 0,
            })
        });
        if made.is_err() {
            self.dir.remove_file(&name).ok();
        }
        made
    }
}

impl Spares {
    /// `recycled` as a spare with room for `bytes` of pages, its pages mostly in memory
    /// already but not faulted into this process: write to each before a capture copies
    /// into it (see [`SpillFile::grow`]). A file much larger than asked for is cut down
    /// first.
    pub fn reuse(&self, mut recycled: Recycled, bytes: usize) -> Result<SpillFile> {
        let bytes = bytes.next_multiple_of(PAGE_SIZE as usize);
        // Until it is a spare, `recycled` removes the file if anything fails.
        let (name, file) = recycled.taken.as_ref().expect("a recycled file is taken only here");
        let path = recycled.dir.join(name);
        let len = file.metadata().map_err(|e| io_error(&path, e))?.len();
        let have = len.saturating_sub(raw::HEADER_PAGE) as usize;
        let keep = if have > 2 * bytes { bytes } else { have };
        if keep < have {
            file.set_len(raw::HEADER_PAGE + keep as u64).map_err(|e| io_error(&path, e))?;
        }
        let map = map(file, &path, raw::HEADER_PAGE as usize + keep)?;
        let (name, file) = recycled.taken.take().expect("checked above");
        let mut spill = SpillFile { dir: Arc::clone(&recycled.dir), name, file, map, capacity: keep };
        spill.grow(bytes)?;
        Ok(spill)
    }
}

impl SpillFile {
    /// The data area: pages go here back to back, in the order of the copied runs.
    pub fn data(&mut self) -> &mut [u8] {
        &mut self.map[raw::HEADER_PAGE as usize..]
    }

    /// Bytes the data area holds.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Makes the data area at least `bytes` long (whole pages), allocating the space on
    /// disk first: a full disk is an error here, not a fault later. The new pages are not
    /// faulted in: `process_vm_readv` into file pages not yet mapped takes a fault per
    /// page inside the copy, 3–5 times slower than writing a byte to each first, so a
    /// copy into them should do that first.
    pub fn grow(&mut self, bytes: usize) -> Result<()> {
        let bytes = bytes.next_multiple_of(PAGE_SIZE as usize);
        if bytes <= self.capacity {
            return Ok(());
        }
        let path = self.path();
        let len = raw::HEADER_PAGE as usize + bytes;
        allocate(&self.file, len as u64).map_err(|e| io_error(&path, e))?;
        remap(&mut self.map, len).map_err(|e| io_error(&path, e))?;
        self.capacity = bytes;
        Ok(())
    }

    /// Writes to every page of `range` of the data area, so that each is in this
    /// process's page tables and in the page cache before a capture copies into it: for
    /// a spare made ready ahead of a capture.
    pub fn fault_in(&mut self, range: std::ops::Range<usize>) {
        for page in self.data()[range].chunks_mut(PAGE_SIZE as usize) {
            // A non-zero byte: a store of the zero already there could be left out. The
            // data area's bytes mean nothing until a capture copies pages over them.
            page[0] = 1;
        }
    }

    fn path(&self) -> PathBuf {
        self.dir.join(&self.name)
    }
}

impl Drop for SpillFile {
    fn drop(&mut self) {
        // Committed files were renamed: this finds nothing then.
        self.dir.remove_file(&self.name).ok();
    }
}

impl RunLog {
    /// What makes spares for this run, on any thread.
    pub fn spares(&self) -> Spares {
        Spares { dir: Arc::clone(self.run().dir_handle()) }
    }

    /// Commits `spill` as snapshot `meta.seq`: writes its record (the `copied` runs, whose
    /// pages fill the start of the data area in order, the `unchanged` runs and `meta`)
    /// and commit, and renames it `S<seq>.raw`. From then on the snapshot reads back, and
    /// survives this process. In a refinement, a snapshot named `<to>.new` is recorded in
    /// `run.json` as the one its end breakpoint took.
    ///
    /// On error nothing is committed and the spare is removed.
    pub fn commit(
        &mut self,
        spill: SpillFile,
        copied: &[PageSpan],
        unchanged: &[PageSpan],
        meta: &SnapshotMeta,
    ) -> Result<Committed> {
        let seq = meta.seq;
        let slot_count: u64 = copied.iter().map(|s| s.pages).sum();
        if slot_count.saturating_mul(PAGE_SIZE) > spill.capacity as u64 {
            return Err(Error::BadInput(format!(
                "{}: {slot_count} copied pages, the spare holds {} bytes",
                meta.name, spill.capacity
            )));
        }
        let record = raw::encode_record(copied, unchanged, meta);
        let commit = Commit {
            slot_count,
            record_offset: raw::HEADER_PAGE + slot_count * PAGE_SIZE,
            record_len: record.len() as u64,
            record_checksum: xxh3_64(&record),
        };
        let path = spill.path();
        let end = commit.record_offset + commit.record_len;
        // The record may run past the space allocated for pages: allocate it first.
        allocate(&spill.file, end).map_err(|e| io_error(&path, e))?;
        spill.file.write_all_at(&record, commit.record_offset).map_err(|e| io_error(&path, e))?;
        spill
            .file
            .write_all_at(&raw::encode_commit(seq, &commit), raw::commit_offset())
            .map_err(|e| io_error(&path, e))?;
        // A recycled spare's lock goes before its new name comes: a reader that opened it
        // under its old name, and gets the lock now, finds that name gone.
        spill.file.unlock().map_err(|e| io_error(&path, e))?;
        let dir = Arc::clone(self.run().dir_handle());
        let name = file_name(seq, Form::Raw);
        dir.rename_new(&spill.name, &name).map_err(|e| io_error(&dir.join(&name), e))?;
        if let Some(parent) = &self.run().info().parent
            && parent.to.as_ref().is_some_and(|to| meta.name == format!("{to}.new"))
        {
            self.mark_reached(seq)?;
        }
        Ok(Committed { file_bytes: end })
    }
}

/// Allocates the first `len` bytes of `file` on disk (extending it if shorter). Where the
/// filesystem cannot, zeros are written over the holes instead: either way a full disk
/// is an error now.
fn allocate(file: &File, len: u64) -> io::Result<()> {
    let have = file.metadata()?.len();
    match fallocate(file, FallocateFlags::empty(), 0, len as i64) {
        Ok(()) => Ok(()),
        Err(nix::errno::Errno::EOPNOTSUPP) if len > have => {
            const CHUNK: usize = 1 << 20;
            let zeros = vec![0u8; CHUNK];
            let mut at = have;
            while at < len {
                let n = CHUNK.min((len - at) as usize);
                file.write_all_at(&zeros[..n], at)?;
                at += n as u64;
            }
            Ok(())
        }
        Err(nix::errno::Errno::EOPNOTSUPP) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Extends `map` (of a spare's file) to `len` bytes, in place or moved, keeping the pages
/// already mapped.
#[allow(unsafe_code)]
fn remap(map: &mut MmapMut, len: usize) -> io::Result<()> {
    // SAFETY: the file behind `map` was allocated to at least `len` bytes just before (and
    // is never truncated, see `map`); no reference into the old mapping outlives this
    // call, since `map` is borrowed mutably.
    unsafe { map.remap(len, memmap2::RemapOptions::new().may_move(true)) }
}

/// Maps the first `len` bytes of `file`, shared and writable.
#[allow(unsafe_code)]
fn map(file: &File, path: &std::path::Path, len: usize) -> Result<MmapMut> {
    // SAFETY: `file` is a spare this process created with O_EXCL, mode 0600, in a 0700
    // directory of the store, and allocated to at least `len` bytes before mapping; it is
    // written only through this mapping and `write_all_at` past the mapped pages, and
    // never truncated, so the mapped bytes stay backed for as long as the map lives.
    unsafe { memmap2::MmapOptions::new().len(len).map_mut(file) }.map_err(|e| {
        io_error(
            path,
            match e.kind() {
                ErrorKind::OutOfMemory => io::Error::new(ErrorKind::OutOfMemory, "cannot map the spare"),
                _ => e,
            },
        )
    })
}
