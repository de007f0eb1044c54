//! The images of a snapshot, written to an [`ImageSink`]: no file system here.

use std::collections::BTreeMap;
use std::io::Write;

use sdt_store::{PAGE_SIZE, SnapshotSource};

use crate::Error;
use crate::image::{Image, ImageKind};
use crate::images::{
    PAGES_ID, gen_core, gen_fdinfo, gen_files, gen_fs, gen_ids, gen_inventory, gen_memfd_inodes, gen_mm,
    gen_pagemap, gen_pstree, gen_shmem_pagemap,
};
use sdt_target::Patch;

use crate::plan::{PageRun, Plan, Shmem};

/// Where [`write_images`] puts the images: a directory, or memory.
pub trait ImageSink {
    /// Creates the image file `name`; what is written to the returned writer is its
    /// contents.
    fn create(&mut self, name: &str) -> std::io::Result<Box<dyn Write + '_>>;
}

/// Images kept in memory, by file name.
#[derive(Debug, Default)]
pub struct MemorySink {
    /// Each image's bytes.
    pub images: BTreeMap<String, Vec<u8>>,
}

impl ImageSink for MemorySink {
    fn create(&mut self, name: &str) -> std::io::Result<Box<dyn Write + '_>> {
        let image = self.images.entry(name.to_owned()).or_default();
        image.clear();
        Ok(Box::new(image))
    }
}

/// What [`write_images`] wrote.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// Each image's file name and size in bytes, in the order written.
    pub images: Vec<(String, u64)>,
    /// Threads restored (exiting threads are left out).
    pub threads: usize,
    /// Mappings, one vma each.
    pub vmas: usize,
    /// Descriptors, one `fdinfo` entry each.
    pub fds: usize,
    /// Pages written: the private mappings' (`pages-1.img`) and shared memory's.
    pub pages: u64,
    /// Whether `criu restore` needs `--shell-job` (the process was not a session leader).
    pub shell_job: bool,
    /// What the user should know about the images, one line each.
    pub notes: Vec<String>,
}

impl Report {
    /// Bytes written in all.
    pub fn bytes(&self) -> u64 {
        self.images.iter().map(|(_, n)| n).sum()
    }
}

/// Pages read from the source and written at a time.
const CHUNK_PAGES: u64 = 64;

/// Writes the CRIU images of `source` to `sink`. `state_word` is where the SDT library's
/// state word lies, if the caller found it: the restored program runs untraced, so its
/// breakpoints are switched off there (a breakpoint snapshot's own record names it too).
/// Pages are read and written 256 KiB at a time.
pub fn write_images(
    source: &impl SnapshotSource,
    state_word: Option<u64>,
    sink: &mut dyn ImageSink,
) -> Result<Report, Error> {
    let plan = Plan::new(source, state_word)?;
    let mut report = Report {
        threads: plan.threads.len(),
        vmas: plan.vmas.len(),
        fds: plan.fds.len(),
        pages: plan.runs.iter().map(|r| r.pages).sum::<u64>()
            + plan.shmems.iter().flat_map(|s| s.pieces()).map(|(_, pages)| pages).sum::<u64>(),
        shell_job: plan.shell_job(),
        notes: plan.notes.clone(),
        ..Report::default()
    };
    let mut images = vec![gen_inventory(), gen_pstree(&plan), gen_ids(&plan)];
    images.extend(plan.threads.iter().map(|t| gen_core(&plan, t)));
    images.extend([gen_mm(&plan), gen_pagemap(&plan), gen_files(&plan), gen_fdinfo(&plan), gen_fs(&plan)]);
    for image in &images {
        put(sink, image, &mut report)?;
    }
    put_pages(sink, source, PAGES_ID, &plan.runs, &plan.patches, &mut report)?;
    if !plan.memfds.is_empty() {
        put(sink, &gen_memfd_inodes(&plan), &mut report)?;
    }
    for shmem in &plan.shmems {
        put(sink, &gen_shmem_pagemap(shmem), &mut report)?;
        if shmem.parts.is_empty() {
            let runs: Vec<PageRun> = shmem.runs.iter().map(|r| r.run).collect();
            put_pages(sink, source, shmem.pages_id, &runs, &[], &mut report)?;
        } else {
            put_parts(sink, shmem, &mut report)?;
        }
    }
    Ok(report)
}

/// Writes `pages-<id>.img` of a memfd from the parts of it the capture kept, each padded
/// to whole pages.
fn put_parts(sink: &mut dyn ImageSink, shmem: &Shmem, report: &mut Report) -> Result<(), Error> {
    let name = ImageKind::Pages(shmem.pages_id).file_name();
    let write_error = |source| Error::Write { image: name.clone(), source };
    let mut out = sink.create(&name).map_err(write_error)?;
    let mut bytes = 0;
    for ((first, pages), (offset, data)) in shmem.pieces().into_iter().zip(&shmem.parts) {
        let before = (offset - first) as usize;
        let after = (pages * PAGE_SIZE) as usize - before - data.len();
        for piece in [&vec![0; before][..], data, &vec![0; after][..]] {
            out.write_all(piece).map_err(write_error)?;
        }
        bytes += pages * PAGE_SIZE;
    }
    out.flush().map_err(write_error)?;
    report.images.push((name, bytes));
    Ok(())
}

/// Writes `pages-<id>.img`: the pages of `runs`, with `patches` applied.
fn put_pages(
    sink: &mut dyn ImageSink,
    source: &impl SnapshotSource,
    id: u32,
    runs: &[PageRun],
    patches: &[Patch],
    report: &mut Report,
) -> Result<(), Error> {
    let name = ImageKind::Pages(id).file_name();
    let write_error = |source| Error::Write { image: name.clone(), source };
    let mut out = sink.create(&name).map_err(write_error)?;
    let bytes = write_pages(source, runs, patches, &mut out, &name)?;
    out.flush().map_err(write_error)?;
    report.images.push((name, bytes));
    Ok(())
}

fn put(sink: &mut dyn ImageSink, image: &Image, report: &mut Report) -> Result<(), Error> {
    let name = image.file_name();
    let write_error = |source| Error::Write { image: name.clone(), source };
    let mut out = sink.create(&name).map_err(write_error)?;
    out.write_all(&image.bytes).map_err(write_error)?;
    out.flush().map_err(write_error)?;
    report.images.push((name, image.bytes.len() as u64));
    Ok(())
}

/// The pages of `runs`, in order, with `patches` applied; returns the bytes written.
fn write_pages(
    source: &impl SnapshotSource,
    runs: &[PageRun],
    patches: &[Patch],
    out: &mut dyn Write,
    name: &str,
) -> Result<u64, Error> {
    let largest = runs.iter().map(|r| r.pages).max().unwrap_or(0).min(CHUNK_PAGES);
    let mut buf = vec![0u8; (largest * PAGE_SIZE) as usize];
    let mut written = 0;
    for run in runs {
        let end = run.start + run.pages * PAGE_SIZE;
        let mut addr = run.start;
        while addr < end {
            let chunk = &mut buf[..(end - addr).min(CHUNK_PAGES * PAGE_SIZE) as usize];
            source
                .read(addr, chunk)
                .map_err(|source| Error::Store { what: format!("pages at {addr:#x}"), source })?;
            apply(patches, addr, chunk);
            out.write_all(chunk).map_err(|source| Error::Write { image: name.to_owned(), source })?;
            addr += chunk.len() as u64;
            written += chunk.len() as u64;
        }
    }
    Ok(written)
}

/// Puts the bytes of `patches` that fall in `[addr, addr + buf.len())` into `buf`.
fn apply(patches: &[Patch], addr: u64, buf: &mut [u8]) {
    let end = addr + buf.len() as u64;
    for p in patches {
        let p_end = p.addr + p.bytes.len() as u64;
        if p.addr >= end || p_end <= addr {
            continue;
        }
        let from = p.addr.max(addr);
        let to = p_end.min(end);
        buf[(from - addr) as usize..(to - addr) as usize]
            .copy_from_slice(&p.bytes[(from - p.addr) as usize..(to - p.addr) as usize]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patches_apply_across_chunk_edges() {
        let patches = [Patch { addr: 0x1ffe, bytes: vec![1, 2, 3, 4] }];
        let mut first = vec![0u8; 0x1000];
        apply(&patches, 0x1000, &mut first);
        assert_eq!(&first[0xffe..], &[1, 2]);
        let mut second = vec![0u8; 0x1000];
        apply(&patches, 0x2000, &mut second);
        assert_eq!(&second[..3], &[3, 4, 0]);
        let mut other = vec![9u8; 16];
        apply(&patches, 0x5000, &mut other);
        assert_eq!(other, vec![9u8; 16]);
    }
}
