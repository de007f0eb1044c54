//! `/proc/PID/pagemap`: which pages of a process are present, swapped, or file pages.

use std::fs::File;
use std::os::unix::fs::FileExt;

use crate::{Error, Result, Tid};

/// Page is present in RAM.
pub const PM_PRESENT: u64 = 1 << 63;
/// Page is swapped out.
pub const PM_SWAPPED: u64 = 1 << 62;
/// Page is a file page or shared anonymous memory (a private mapping's page that was
/// written has this bit clear).
pub const PM_FILE: u64 = 1 << 61;

/// An open `/proc/PID/pagemap`.
#[derive(Debug)]
pub struct Pagemap {
    file: File,
    pid: Tid,
}

impl Pagemap {
    /// Opens the pagemap of `pid`.
    pub fn open(pid: Tid) -> Result<Pagemap> {
        let file = File::open(format!("/proc/{pid}/pagemap")).map_err(|source| Error {
            call: "open /proc/PID/pagemap",
            tid: pid.raw(),
            source,
        })?;
        Ok(Pagemap { file, pid })
    }

    /// `pread`s the entries of `npages` pages from `start` (page-aligned) into `out`,
    /// replacing its contents.
    #[doc(alias = "pread")]
    pub fn read(&self, start: u64, npages: usize, out: &mut Vec<u64>) -> Result<()> {
        out.clear();
        out.resize(npages, 0);
        let bytes: &mut [u8] = bytemuck_u64s(out);
        self.file.read_exact_at(bytes, start / 4096 * 8).map_err(|source| Error {
            call: "pread /proc/PID/pagemap",
            tid: self.pid.raw(),
            source,
        })?;
        for entry in out.iter_mut() {
            *entry = u64::from_le(*entry);
        }
        Ok(())
    }
}

fn bytemuck_u64s(words: &mut [u64]) -> &mut [u8] {
    #[allow(unsafe_code)]
    // SAFETY: u8 has no alignment or validity requirements, and the byte slice covers
    // exactly the words' memory, borrowed mutably for its lifetime.
    unsafe {
        std::slice::from_raw_parts_mut(words.as_mut_ptr().cast::<u8>(), words.len() * 8)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sees_a_written_page_present() {
        let mut page = vec![0u8; 3 * 4096];
        let addr = (page.as_mut_ptr() as u64 + 4095) & !4095;
        let i = (addr - page.as_ptr() as u64) as usize;
        page[i] = 1;
        let pm = Pagemap::open(Tid::new(std::process::id() as i32).unwrap()).unwrap();
        let mut out = Vec::new();
        pm.read(addr, 1, &mut out).unwrap();
        assert_eq!(out.len(), 1);
        assert_ne!(out[0] & PM_PRESENT, 0);
        assert_eq!(out[0] & PM_FILE, 0);
    }
}
