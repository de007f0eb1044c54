//! `/proc/PID/pagemap`: which pages of a process are present, swapped, or file pages.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;

use crate::uapi::{
    PAGE_IS_FILE, PAGE_IS_PFNZERO, PAGE_IS_PRESENT, PAGE_IS_SWAPPED, PAGE_IS_WRITTEN, PAGEMAP_SCAN,
    PM_SCAN_CHECK_WPASYNC, PM_SCAN_WP_MATCHING, PageRegion, PmScanArg,
};
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
        let bytes: &mut [u8] = bytemuck::cast_slice_mut(out);
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

/// What a [`Pagemap::scan`] asks for: `PAGE_IS_*` categories and `PM_SCAN_*` flags.
#[derive(Clone, Copy, Debug, Default)]
pub struct ScanQuery {
    /// `PM_SCAN_*` flags.
    pub flags: u64,
    /// Pages must have every one of these.
    pub all_of: u64,
    /// Pages must have at least one of these (0: no condition).
    pub any_of: u64,
    /// Categories that count as present when clear.
    pub inverted: u64,
    /// Categories to report in each region.
    pub report: u64,
}

impl ScanQuery {
    /// Pages written since they were last write-protected, protected again in the same
    /// pass, reporting which are resident (the others were dropped, and read as zero);
    /// fails with `EPERM` on a mapping not registered for async write-protect.
    pub const TAKE_WRITTEN: ScanQuery = ScanQuery {
        flags: PM_SCAN_WP_MATCHING | PM_SCAN_CHECK_WPASYNC,
        all_of: PAGE_IS_WRITTEN,
        any_of: 0,
        inverted: 0,
        report: PAGE_IS_WRITTEN | PAGE_IS_PRESENT | PAGE_IS_SWAPPED,
    };

    /// [`ScanQuery::TAKE_WRITTEN`] without protecting them again: they stay writable,
    /// and count as written until a scan that protects them.
    pub const WRITTEN: ScanQuery = ScanQuery { flags: PM_SCAN_CHECK_WPASYNC, ..ScanQuery::TAKE_WRITTEN };

    /// [`ScanQuery::WRITTEN`] reporting nothing but that the pages were written: the
    /// kernel then takes its fast path, half the time per page. Written pages dropped
    /// since are reported too; [`ScanQuery::POPULATED`] tells them apart, as long as
    /// they are not protected yet (a dropped page protected holds a marker that reads as
    /// swapped). [`Pagemap::protect_written`] protects them after.
    pub const WRITTEN_BARE: ScanQuery = ScanQuery { report: PAGE_IS_WRITTEN, ..ScanQuery::WRITTEN };

    /// Pages present or swapped out, reporting which are file pages. The shared zero
    /// page is left out: it holds nothing, and where a program only read its memory
    /// (or `gcore` read it all) it is mapped over gigabytes.
    pub const RESIDENT: ScanQuery = ScanQuery {
        flags: 0,
        // With `inverted`: the zero page's category must be clear.
        all_of: PAGE_IS_PFNZERO,
        any_of: PAGE_IS_PRESENT | PAGE_IS_SWAPPED,
        inverted: PAGE_IS_PFNZERO,
        report: PAGE_IS_PRESENT | PAGE_IS_SWAPPED | PAGE_IS_FILE,
    };

    /// Pages present or swapped out, reporting which; cheaper than
    /// [`ScanQuery::RESIDENT`], which looks each page up to tell file pages.
    pub const POPULATED: ScanQuery =
        ScanQuery { report: PAGE_IS_PRESENT | PAGE_IS_SWAPPED, ..ScanQuery::RESIDENT };
}

impl Pagemap {
    /// `ioctl(PAGEMAP_SCAN)`: appends to `out` the regions of `[start, end)` that match
    /// `query`, merged where neighbours share their reported categories. With
    /// [`ScanQuery::TAKE_WRITTEN`], pages dropped since (`MADV_DONTNEED`) count as
    /// written. Fails with `ENOTTY` before Linux 6.7.
    ///
    /// `regions` is scratch space; its capacity bounds the regions one call returns.
    #[doc(alias = "PAGEMAP_SCAN")]
    pub fn scan(
        &self,
        start: u64,
        end: u64,
        query: ScanQuery,
        regions: &mut Vec<PageRegion>,
        out: &mut Vec<PageRegion>,
    ) -> Result<()> {
        let mut from = start;
        while from < end {
            let walk_end = self.scan_once(from, end, query, 0, regions)?;
            for r in regions.iter() {
                match out.last_mut() {
                    Some(last) if last.end == r.start && last.categories == r.categories => last.end = r.end,
                    _ => out.push(*r),
                }
            }
            // The walk can stop short of `end` after reporting (and protecting) pages
            // beyond `walk_end`: go on after whichever reaches further.
            let reached = regions.last().map_or(walk_end, |r| r.end.max(walk_end));
            if reached <= from {
                break;
            }
            from = reached;
        }
        Ok(())
    }

    /// How far from `start` the first `pages` populated (present or swapped) pages of
    /// `[start, end)` reach: where a walk that found them stops, at the next populated
    /// page (`end` if there is none). A walk costs what the page tables it crosses hold.
    pub fn populated_reach(&self, start: u64, end: u64, pages: u64) -> Result<u64> {
        let mut regions = Vec::new();
        let walk_end = self.scan_once(start, end, ScanQuery::POPULATED, pages, &mut regions)?;
        Ok(regions.last().map_or(walk_end, |r| r.end.max(walk_end)))
    }

    /// One `ioctl(PAGEMAP_SCAN)` over `[from, end)`, stopping after `max_pages` pages (0:
    /// no limit) or as many regions as `regions` has room for (at least 4096), which it
    /// holds afterwards. Returns where the walk ended.
    fn scan_once(
        &self,
        from: u64,
        end: u64,
        query: ScanQuery,
        max_pages: u64,
        regions: &mut Vec<PageRegion>,
    ) -> Result<u64> {
        if regions.capacity() == 0 {
            regions.reserve(4096);
        }
        regions.clear();
        let mut arg = PmScanArg {
            size: size_of::<PmScanArg>() as u64,
            flags: query.flags,
            start: from,
            end,
            vec: regions.as_mut_ptr() as u64,
            vec_len: regions.capacity() as u64,
            max_pages,
            category_inverted: query.inverted,
            category_mask: query.all_of,
            category_anyof_mask: query.any_of,
            return_mask: query.report,
            ..PmScanArg::default()
        };
        #[allow(unsafe_code)]
        // SAFETY: `arg` is a valid pm_scan_arg and `vec` points to `vec_len` writable
        // page_regions (the Vec's spare capacity); the kernel writes at most that many.
        let n = unsafe { libc::ioctl(self.file.as_raw_fd(), PAGEMAP_SCAN as _, &raw mut arg) };
        if n < 0 {
            return Err(Error::last("PAGEMAP_SCAN", self.pid.raw()));
        }
        #[allow(unsafe_code)]
        // SAFETY: the kernel initialised the first `n` regions.
        unsafe {
            regions.set_len(n as usize)
        };
        Ok(arg.walk_end)
    }
}

impl Pagemap {
    /// `ioctl(PAGEMAP_SCAN)` with nowhere to report: write-protects the pages of
    /// `[start, end)` written since they were last protected, as
    /// [`ScanQuery::TAKE_WRITTEN`] does, in the kernel's quickest walk. Fails with
    /// `EPERM` on a mapping not registered for async write-protect.
    #[doc(alias = "PAGEMAP_SCAN")]
    pub fn protect_written(&self, start: u64, end: u64) -> Result<()> {
        let mut arg = PmScanArg {
            size: size_of::<PmScanArg>() as u64,
            flags: PM_SCAN_WP_MATCHING | PM_SCAN_CHECK_WPASYNC,
            start,
            end,
            category_mask: PAGE_IS_WRITTEN,
            return_mask: PAGE_IS_WRITTEN,
            ..PmScanArg::default()
        };
        #[allow(unsafe_code)]
        // SAFETY: `arg` is a valid pm_scan_arg with no output vector (`vec` 0, `vec_len`
        // 0): the kernel writes nothing but `arg` itself.
        let n = unsafe { libc::ioctl(self.file.as_raw_fd(), PAGEMAP_SCAN as _, &raw mut arg) };
        if n < 0 { Err(Error::last("PAGEMAP_SCAN", self.pid.raw())) } else { Ok(()) }
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

    #[test]
    fn pages_only_read_hold_nothing() {
        const LEN: usize = 3 * 4096;
        let map = Anonymous::new(LEN);
        let start = map.base as u64;
        // SAFETY: both pages lie inside the mapping, which is readable and writable.
        #[allow(unsafe_code)]
        let read = unsafe {
            std::ptr::write_volatile(map.base as *mut u8, 1);
            std::ptr::read_volatile((start + 4096) as *const u8)
        };
        assert_eq!(read, 0);
        let pm = Pagemap::open(Tid::new(std::process::id() as i32).unwrap()).unwrap();
        let mut pages = Vec::new();
        pm.read(start, 3, &mut pages).unwrap();
        // The page read maps the zero page: present, for the pagemap file.
        assert_ne!(pages[1] & PM_PRESENT, 0);
        for query in [ScanQuery::RESIDENT, ScanQuery::POPULATED] {
            let mut found = Vec::new();
            pm.scan(start, start + LEN as u64, query, &mut Vec::new(), &mut found).unwrap();
            let spans: Vec<(u64, u64)> = found.iter().map(|r| (r.start, r.end)).collect();
            assert_eq!(spans, [(start, start + 4096)]);
        }
    }

    /// A private anonymous mapping of its own (no memory reserved), unmapped when dropped.
    struct Anonymous {
        base: *mut libc::c_void,
        len: usize,
    }

    impl Anonymous {
        fn new(len: usize) -> Anonymous {
            // SAFETY: a fresh private mapping, unmapped by `drop` and not used otherwise.
            #[allow(unsafe_code)]
            let base = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                    -1,
                    0,
                )
            };
            assert_ne!(base, libc::MAP_FAILED);
            Anonymous { base, len }
        }
    }

    impl Drop for Anonymous {
        fn drop(&mut self) {
            // SAFETY: the mapping `new` made, no longer used.
            #[allow(unsafe_code)]
            unsafe {
                libc::munmap(self.base, self.len)
            };
        }
    }

    #[test]
    fn the_reach_of_populated_pages_spans_the_holes_between_them() {
        const LEN: usize = 1 << 30;
        let map = Anonymous::new(LEN);
        let start = map.base as u64;
        let far = start + (LEN as u64) / 2;
        for at in [start, far] {
            // SAFETY: both addresses lie inside the mapping, which is writable.
            #[allow(unsafe_code)]
            unsafe {
                std::ptr::write_volatile(at as *mut u8, 1)
            };
        }
        let pm = Pagemap::open(Tid::new(std::process::id() as i32).unwrap()).unwrap();
        let end = start + LEN as u64;
        assert_eq!(pm.populated_reach(start, end, 1).unwrap(), far);
        assert_eq!(pm.populated_reach(start, end, 2).unwrap(), end);
        assert_eq!(pm.populated_reach(start + 4096, end, 1).unwrap(), end);
    }
}
