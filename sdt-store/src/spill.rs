//! The capture's side of the raw log: a file per capture, and the memory its pages are
//! copied into, written to the file when the snapshot is committed as `S<seq>.raw`.
//!
//! ```text
//!  (program runs)     Spares::make, grow → .spare-P-K.raw: header page + n bytes allocated;
//!                     fault_in             the run's capture buffer grown to n, touched
//!  (pause)            capture copies pages into SpillFile::data() (process_vm_readv)
//!  (breaking thread   RunLog::hand_over_commit → a child sharing this process's memory
//!   held till here)     writes the pages from the buffer (O_DIRECT: no copy), record +
//!                       commit, renames the file S<seq>.raw, whatever becomes of sdt
//!  (program runs)     HandedCommit::settle → done: the buffer goes back to the spares
//!                     (RunLog::commit does the same writes itself, before it returns)
//!  (program runs)     compaction         → S<seq>.snap written, S<seq>.raw removed
//! ```
//!
//! The capture buffer is anonymous memory kept for the whole run and handed from spare
//! to spare ([`Spares`]), so that a capture copies into memory already in place: memory
//! new to the process costs a page fault and a page of zeros per page, several times the
//! copy itself (on virtual machines that hand freed memory back to their host, more
//! still). Its pages go to disk by direct I/O, which the device does, not the CPU; where
//! the file system refuses direct I/O, by an ordinary write.
//!
//! The buffer grows only as far as the caller allows (the memory the machine can spare):
//! a capture larger than that goes through the buffer a window at a time, each written
//! to the file at once ([`SpillFile::write_through`]), slower, not made to exhaust
//! memory.
//!
//! Space is allocated (`fallocate`) when a spare grows, so a full disk shows there, as an
//! error, before the capture that would need it.

use std::ffi::CString;
use std::fs::File;
use std::io::{self, ErrorKind};
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use memmap2::{Advice, MmapMut, UncheckedAdvice};
use nix::fcntl::{FallocateFlags, FcntlArg, OFlag, fallocate, fcntl};
use xxhash_rust::xxh3::xxh3_64;

use crate::dir::{Form, RunLog, file_name, io_error};
use crate::fs::Dir;
use crate::model::{PAGE_SIZE, SnapshotMeta};
use crate::raw::{self, Commit, PageSpan};
use crate::{Error, Result};

const PAGE: usize = PAGE_SIZE as usize;

/// A raw snapshot file being filled by a capture: a spare, until [`RunLog::commit`].
/// Dropped uncommitted, it is removed. Either way its buffer goes back to its [`Spares`].
pub struct SpillFile {
    dir: Arc<Dir>,
    name: String,
    file: File,
    /// Where the capture copies pages; `None` until the spare first grows.
    buffer: Option<Buffer>,
    /// Where the buffer goes when the spare is done with.
    pool: Pool,
    /// Bytes of data area allocated in the file.
    capacity: usize,
    /// Bytes of the buffer the data area may use: all of it, or a window that parts of
    /// it go through ([`SpillFile::write_through`]).
    in_buffer: usize,
    /// The data area was written to the file as it was copied: the commit writes none of
    /// it.
    written_through: bool,
}

/// Memory a capture copies pages into: anonymous, on huge pages where the kernel gives
/// them, kept from one capture to the next.
struct Buffer {
    map: MmapMut,
    /// Bytes at its start written to since it was mapped: in this process's page tables.
    touched: usize,
    /// Bytes at its start that captures may have written to since it was mapped, or left
    /// to the kernel ([`SpillFile::release_past`]): what it may hold in memory.
    held: usize,
}

impl Buffer {
    /// See [`SpillFile::release_past`].
    fn release_past(&mut self, bytes: usize) {
        let bytes = bytes.next_multiple_of(PAGE);
        if self.held > bytes && self.lend(bytes, self.held) {
            self.held = bytes;
            self.touched = self.touched.min(bytes);
        }
    }

    /// Leaves bytes `from..to` to the kernel should memory run short (`MADV_FREE`): in
    /// place until then, and as cheap to write as before. Whether it took the advice.
    fn lend(&mut self, from: usize, to: usize) -> bool {
        if to <= from {
            return true;
        }
        #[allow(unsafe_code)]
        // SAFETY: the buffer's bytes mean nothing between captures (a capture writes every
        // byte it commits), and none of them is borrowed: `self` is, mutably.
        unsafe { self.map.unchecked_advise_range(UncheckedAdvice::Free, from, to - from) }.is_ok()
    }
}

/// The buffer no spare holds at the moment (the largest one, should two have been made).
type Pool = Arc<Mutex<Option<Buffer>>>;

/// A spare's name, unique in this process: `.spare-PID-K.raw`.
fn spare_name() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!(".spare-{}-{}.raw", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed))
}

/// Makes spares for a run; a clone can work on another thread. The spares one `Spares`
/// and its clones make share one capture buffer: each takes it while it lives.
#[derive(Clone)]
pub struct Spares {
    dir: Arc<Dir>,
    pool: Pool,
}

impl std::fmt::Debug for Spares {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Spares").field("dir", &self.dir.path()).finish()
    }
}

/// What committing a snapshot wrote.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Committed {
    /// Size of the committed file: header page, pages, record.
    pub file_bytes: u64,
}

impl std::fmt::Debug for SpillFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SpillFile").field("name", &self.name).field("capacity", &self.capacity).finish()
    }
}

impl Spares {
    /// Bytes of the capture buffer that may be in memory while no spare holds it (0 when
    /// one does).
    pub fn idle_buffer_held(&self) -> usize {
        self.pool.lock().unwrap().as_ref().map_or(0, |b| b.held)
    }

    /// [`SpillFile::release_past`] for the capture buffer while no spare holds it.
    pub fn release_idle_buffer_past(&self, bytes: usize) {
        if let Some(buffer) = self.pool.lock().unwrap().as_mut() {
            buffer.release_past(bytes);
        }
    }

    /// A spare with no room for pages yet ([`SpillFile::grow`]), its header written, and
    /// the capture buffer if no other spare holds it.
    pub fn make(&self) -> Result<SpillFile> {
        let name = spare_name();
        let path = self.dir.join(&name);
        let file = self.dir.create_file(&name).map_err(|e| io_error(&path, e))?;
        let spill = SpillFile {
            dir: Arc::clone(&self.dir),
            name,
            file,
            buffer: self.pool.lock().unwrap().take(),
            pool: Arc::clone(&self.pool),
            capacity: 0,
            in_buffer: 0,
            written_through: false,
        };
        // Dropped on error, it removes the file.
        spill.file.write_all_at(&raw::encode_header(), 0).map_err(|e| io_error(&path, e))?;
        Ok(spill)
    }
}

impl SpillFile {
    /// The data area, in the buffer: pages go here back to back, in the order of the
    /// copied runs. Where the buffer holds less than the data area
    /// ([`SpillFile::past_buffer`]), a window that its parts go through.
    pub fn data(&mut self) -> &mut [u8] {
        match &mut self.buffer {
            Some(buffer) => &mut buffer.map[..self.in_buffer],
            None => &mut [],
        }
    }

    /// Bytes the data area holds.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Holds the part of the buffer the data area uses to at most `limit` bytes (a page at
    /// least), the rest of it going through that window ([`SpillFile::write_through`]):
    /// for a capture about to start, where the memory free has shrunk since the spare was
    /// made.
    pub fn hold_window_to(&mut self, limit: usize) {
        self.in_buffer = self.in_buffer.min((limit / PAGE * PAGE).max(PAGE));
    }

    /// Bytes of the data area past what the buffer holds: they go through it a window at
    /// a time ([`SpillFile::write_through`]).
    pub fn past_buffer(&self) -> usize {
        self.capacity - self.in_buffer
    }

    /// Bytes at the start of the data area already in this process's page tables: a
    /// capture copies into them without a fault.
    pub fn faulted(&self) -> usize {
        self.buffer.as_ref().map_or(0, |b| b.touched.min(self.in_buffer))
    }

    /// Makes the data area at least `bytes` long (whole pages), allocating the space on
    /// disk first: a full disk is an error here, not at the commit. The buffer grows to
    /// hold at most `buffer_limit` bytes of it (or what it holds already; a page at
    /// least): what is past that goes through it ([`SpillFile::write_through`]).
    /// Memory the buffer gains is not faulted in: `process_vm_readv` into
    /// pages not yet mapped takes a fault per page inside the copy, 3–5 times slower than
    /// writing a byte to each first, so a copy into them should do that first
    /// ([`SpillFile::fault_in`]).
    pub fn grow(&mut self, bytes: usize, buffer_limit: usize) -> Result<()> {
        let bytes = bytes.next_multiple_of(PAGE);
        if bytes <= self.capacity {
            return Ok(());
        }
        let path = self.path();
        allocate(&self.file, raw::HEADER_PAGE + bytes as u64).map_err(|e| io_error(&path, e))?;
        let in_buffer = bytes.min(self.in_buffer.max(buffer_limit / PAGE * PAGE).max(PAGE));
        let grown = match &mut self.buffer {
            Some(buffer) if buffer.map.len() >= in_buffer => Ok(()),
            Some(buffer) => remap(&mut buffer.map, in_buffer),
            None => MmapMut::map_anon(in_buffer)
                .map(|map| self.buffer = Some(Buffer { map, touched: 0, held: 0 })),
        };
        if let Err(e) = grown {
            let why = format!("cannot grow the capture buffer to {in_buffer} bytes: {e}");
            return Err(io_error(&path, io::Error::new(e.kind(), why)));
        }
        if let Some(buffer) = &mut self.buffer {
            // Huge pages, where the kernel has them: fewer faults, and pinned cheaply by
            // the direct write. Only a hint.
            buffer.map.advise(Advice::HugePage).ok();
            buffer.held = buffer.held.max(in_buffer);
        }
        self.in_buffer = in_buffer;
        self.capacity = bytes;
        Ok(())
    }

    /// Writes to the data area's pages after those already faulted in, up to `bytes` more,
    /// so that each is in this process's page tables before a capture copies into it: for
    /// a spare made ready ahead of a capture. Returns whether the whole data area is.
    ///
    /// The pages are left to the kernel until a capture writes them (`MADV_FREE`): in
    /// place, they cost a capture nothing more, and should the program grow meanwhile (the
    /// spare is made ahead, from its size at the time), the kernel takes them back for it
    /// rather than killing it for want of memory.
    pub fn fault_in(&mut self, bytes: usize) -> bool {
        let (from, capacity) = (self.faulted(), self.in_buffer);
        let to = capacity.min(from + bytes.next_multiple_of(PAGE));
        if let Some(buffer) = &mut self.buffer {
            for page in buffer.map[from..to].chunks_mut(PAGE) {
                // A non-zero byte: a store of the zero already there could be left out.
                // The data area's bytes mean nothing until a capture copies pages over them.
                page[0] = 1;
            }
            buffer.touched = buffer.touched.max(to);
            buffer.lend(from, to);
        }
        to >= capacity
    }

    /// Bytes of the capture buffer that may be in memory, however few of them this
    /// spare's data area takes.
    pub fn buffer_held(&self) -> usize {
        self.buffer.as_ref().map_or(0, |b| b.held)
    }

    /// Lets the kernel take back the buffer's pages past its first `bytes`, should memory
    /// run short (`MADV_FREE`): until it does, they stay in place and cost no more than
    /// before to copy into (a write keeps a page); then they read as zeros, to be faulted
    /// in again. For a buffer grown for a capture much larger than those that follow (the
    /// first, which copies everything): held whole, it kept that much memory from the
    /// program for the rest of the run.
    pub fn release_past(&mut self, bytes: usize) {
        if let Some(buffer) = &mut self.buffer {
            buffer.release_past(bytes);
        }
    }

    fn path(&self) -> PathBuf {
        self.dir.join(&self.name)
    }

    /// Writes the buffer's first `len` bytes to the file now, as the data area's bytes
    /// from `at`, by direct I/O where the file system takes it: for a data area larger
    /// than the buffer, which goes through it a window at a time. Once called, the data
    /// area is the file's: the caller writes all of it this way, and the commit none.
    pub fn write_through(&mut self, len: usize, at: usize) -> Result<()> {
        self.written_through = true;
        let data = self.buffer.as_ref().map_or(&[][..], |b| &b.map[..len.min(self.in_buffer)]);
        self.write_at(data, at).map_err(|e| io_error(&self.path(), e))
    }

    /// Writes the first `bytes` of the data area to the file (unless they were written
    /// through already).
    fn write_data(&self, bytes: usize) -> io::Result<()> {
        if self.written_through {
            return Ok(());
        }
        self.write_at(self.buffer.as_ref().map_or(&[][..], |b| &b.map[..bytes]), 0)
    }

    /// Writes `data` to the file as the data area's bytes from `at`, by direct I/O where
    /// the file system takes it.
    fn write_at(&self, data: &[u8], at: usize) -> io::Result<()> {
        let at = raw::HEADER_PAGE + at as u64;
        let direct = set_direct(&self.file, true).is_ok();
        let mut written = 0;
        while written < data.len() {
            let chunk = &data[written..data.len().min(written + WRITE_CHUNK)];
            match self.file.write_at(chunk, at + written as u64) {
                Ok(0) => return Err(ErrorKind::WriteZero.into()),
                Ok(n) => written += n,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                // Alignment the device wants and we do not meet: an ordinary write.
                Err(e) if direct && e.raw_os_error() == Some(nix::errno::Errno::EINVAL as i32) => {
                    set_direct(&self.file, false)?;
                    return self.file.write_all_at(&data[written..], at + written as u64);
                }
                Err(e) => return Err(e),
            }
        }
        if direct {
            set_direct(&self.file, false)?;
        }
        Ok(())
    }
}

/// Bytes a direct write hands the kernel at a time.
const WRITE_CHUNK: usize = 64 << 20;

/// Turns direct I/O on `file` on or off.
fn set_direct(file: &File, on: bool) -> io::Result<()> {
    let flags = OFlag::from_bits_truncate(fcntl(file, FcntlArg::F_GETFL)?);
    let flags = if on { flags | OFlag::O_DIRECT } else { flags - OFlag::O_DIRECT };
    fcntl(file, FcntlArg::F_SETFL(flags))?;
    Ok(())
}

impl Drop for SpillFile {
    fn drop(&mut self) {
        // Committed files were renamed: this finds nothing then.
        self.dir.remove_file(&self.name).ok();
        if let Some(buffer) = self.buffer.take() {
            let mut pool = self.pool.lock().unwrap();
            if pool.as_ref().is_none_or(|kept| kept.map.len() < buffer.map.len()) {
                *pool = Some(buffer);
            }
        }
    }
}

impl RunLog {
    /// What makes spares for this run, on any thread.
    pub fn spares(&self) -> Spares {
        Spares { dir: Arc::clone(self.run().dir_handle()), pool: Pool::default() }
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
        let (commit, record) = prepare(&spill, copied, unchanged, meta)?;
        let path = spill.path();
        spill.write_data((commit.slot_count * PAGE_SIZE) as usize).map_err(|e| io_error(&path, e))?;
        spill.file.write_all_at(&record, commit.record_offset).map_err(|e| io_error(&path, e))?;
        spill
            .file
            .write_all_at(&raw::encode_commit(seq, &commit), raw::commit_offset())
            .map_err(|e| io_error(&path, e))?;
        let dir = Arc::clone(self.run().dir_handle());
        let name = file_name(seq, Form::Raw);
        dir.rename_new(&spill.name, &name).map_err(|e| io_error(&dir.join(&name), e))?;
        if let Some(parent) = &self.run().info().parent
            && parent.to.as_ref().is_some_and(|to| meta.name == format!("{to}.new"))
        {
            self.mark_reached(seq)?;
        }
        Ok(Committed { file_bytes: commit.record_offset + commit.record_len })
    }

    /// [`RunLog::commit`], with the writes handed to a child process that finishes them
    /// even if this one is killed ([`sdt_sys::detached`]): returns once they are handed
    /// over, and the snapshot is as good as committed from then on; [`HandedCommit::settle`]
    /// says when it is. Not for the end of a refinement, which [`RunLog::commit`] records.
    pub fn hand_over_commit(
        &self,
        spill: SpillFile,
        copied: &[PageSpan],
        unchanged: &[PageSpan],
        meta: &SnapshotMeta,
    ) -> Result<HandedCommit> {
        let seq = meta.seq;
        let (commit, record) = prepare(&spill, copied, unchanged, meta)?;
        let dir = self.run().dir_handle();
        let name = file_name(seq, Form::Raw);
        let c_name =
            |n: &str| CString::new(n).map_err(|_| Error::BadInput(format!("{n:?}: a NUL in a file name")));
        let data_len = (commit.slot_count * PAGE_SIZE) as usize;
        let job = sdt_sys::detached::Job {
            file: spill.file.as_raw_fd(),
            data: spill.buffer.as_ref().map_or(std::ptr::null(), |b| b.map.as_ptr()),
            // Written through as it was copied, it is in the file already.
            data_len: if spill.buffer.is_some() && !spill.written_through { data_len } else { 0 },
            data_offset: raw::HEADER_PAGE,
            writes: vec![
                (record, commit.record_offset),
                (raw::encode_commit(seq, &commit).to_vec(), raw::commit_offset()),
            ],
            rename: (dir.raw_fd(), c_name(&spill.name)?, c_name(&name)?),
        };
        let handed = sdt_sys::detached::hand_over(job).map_err(|e| io_error(&spill.path(), e))?;
        let path = dir.join(&name);
        Ok(HandedCommit {
            spill,
            handed,
            path,
            committed: Committed { file_bytes: commit.record_offset + commit.record_len },
        })
    }
}

/// A snapshot whose commit was handed to a child process ([`RunLog::hand_over_commit`]).
/// Its capture buffer goes back to the run's spares once it is settled.
#[derive(Debug)]
pub struct HandedCommit {
    spill: SpillFile,
    handed: sdt_sys::detached::Handed,
    path: PathBuf,
    committed: Committed,
}

impl HandedCommit {
    /// Waits until the snapshot is written and renamed `S<seq>.raw`; an error says why it
    /// is not (the spare is then removed).
    pub fn settle(self) -> Result<Committed> {
        let HandedCommit { spill, handed, path, committed } = self;
        let done = handed.wait().map_err(|e| io_error(&path, e));
        drop(spill);
        done.map(|()| committed)
    }
}

/// The record and commit of `spill` as snapshot `meta.seq`, its file allocated and sized
/// for them.
fn prepare(
    spill: &SpillFile,
    copied: &[PageSpan],
    unchanged: &[PageSpan],
    meta: &SnapshotMeta,
) -> Result<(Commit, Vec<u8>)> {
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
    // The record may run past the space allocated for pages (allocate it first), or
    // end before it: what is past it is given back.
    allocate(&spill.file, end).map_err(|e| io_error(&path, e))?;
    spill.file.set_len(end).map_err(|e| io_error(&path, e))?;
    Ok((commit, record))
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

/// Extends the capture buffer `map` to `len` bytes, in place or moved, keeping the pages
/// already mapped.
#[allow(unsafe_code)]
fn remap(map: &mut MmapMut, len: usize) -> io::Result<()> {
    // SAFETY: `map` is anonymous memory of this process, borrowed mutably here, so no
    // reference into the old mapping outlives the call.
    unsafe { map.remap(len, memmap2::RemapOptions::new().may_move(true)) }
}
