//! Where write tracking costs more than it saves: chunks of tracked memory that the
//! program rewrites between every two captures are left unprotected for a few captures.
//!
//! A protected page costs the program a fault at its first write after a capture
//! (0.9–1.5 µs on a virtual machine: `benches/workloads/wp_fault.c`); copying a page
//! costs the pause about 0.4 µs. A program that rewrites hundreds of MiB between
//! snapshots (an FFT, a grid solver) pays for a fault on every page it writes, only for
//! the capture to copy nearly all of them anyway.
//! So a [`CHUNK`] found mostly written is scanned without protecting it again: its
//! written pages stay writable and are copied at each capture, whether written again or
//! not; after 1, 2, then 4 captures (while it stays dense) it is protected once more,
//! and the capture after that measures it again.
//!
//! ```text
//! capture:   measure ─ leave ×k ─ re-arm ─ measure ─ …    (k = 1, 2, 4, 4, …)
//! interval:  faults    none       faults   faults
//! ```
//!
//! A re-arming scan reports every page left writable as written: it copies them (as a
//! capture must) but is no measurement.

use std::collections::HashMap;

/// Bytes of tracked memory judged together (a huge page's worth).
pub(crate) const CHUNK: u64 = 2 << 20;

/// Captures a dense chunk is left unprotected for, at most.
const MAX_LEAVE: u8 = 4;

/// Fewer pages scanned in a chunk than this (a mapping's edge) are no measurement.
const MIN_MEASURED_PAGES: u32 = 64;

/// The state of the chunks that are or were dense; the others are protected as usual.
#[derive(Debug, Default)]
pub(crate) struct Density {
    chunks: HashMap<u64, Chunk>,
}

#[derive(Clone, Copy, Debug, Default)]
struct Chunk {
    /// Consecutive measurements that found it dense.
    streak: u8,
    /// Captures left that scan it without protecting it.
    leave: u8,
    /// Its next protected scan re-arms it (after being left): no measurement.
    rearm: bool,
}

/// Pages scanned with protection and found written, per chunk, in one capture.
#[derive(Debug, Default)]
pub(crate) struct Tally {
    chunks: HashMap<u64, (u32, u32)>,
}

impl Tally {
    /// `pages` pages of `chunk` were scanned with protection, `written` of them written.
    pub(crate) fn add(&mut self, chunk: u64, pages: u32, written: u32) {
        let entry = self.chunks.entry(chunk).or_default();
        entry.0 += pages;
        entry.1 += written;
    }

    /// Adds what `other` counted.
    pub(crate) fn merge(&mut self, other: Tally) {
        for (chunk, (pages, written)) in other.chunks {
            self.add(chunk, pages, written);
        }
    }

    /// Counts `[start, end)` as written, chunk by chunk.
    pub(crate) fn add_written(&mut self, start: u64, end: u64) {
        for_each_chunk(start, end, |chunk, pages| self.add(chunk, 0, pages));
    }

    /// Counts `[start, end)` as scanned with protection, chunk by chunk.
    pub(crate) fn add_scanned(&mut self, start: u64, end: u64) {
        for_each_chunk(start, end, |chunk, pages| self.add(chunk, pages, 0));
    }
}

/// Calls `f(chunk, pages)` for each chunk `[start, end)` overlaps, with the number of its
/// pages inside.
fn for_each_chunk(start: u64, end: u64, mut f: impl FnMut(u64, u32)) {
    let mut at = start;
    while at < end {
        let chunk = at / CHUNK;
        let to = end.min((chunk + 1) * CHUNK);
        f(chunk, ((to - at) / sdt_store::PAGE_SIZE) as u32);
        at = to;
    }
}

/// How a capture scans a chunk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Treatment {
    /// Protected, and not dense lately: few of its pages are expected written.
    Sparse,
    /// Protected, and dense lately (measured, or re-armed after being left).
    Dense,
    /// Scanned without protecting it.
    Left,
}

impl Density {
    /// How this capture scans `chunk`.
    pub(crate) fn treatment(&self, chunk: u64) -> Treatment {
        match self.chunks.get(&chunk) {
            None => Treatment::Sparse,
            Some(c) if c.leave > 0 => Treatment::Left,
            Some(_) => Treatment::Dense,
        }
    }

    /// The end of the run of chunks from the one holding `addr` that this capture treats
    /// alike, at most `end`.
    pub(crate) fn same_until(&self, addr: u64, end: u64) -> u64 {
        let treatment = self.treatment(addr / CHUNK);
        let mut to = (addr / CHUNK + 1) * CHUNK;
        while to < end && self.treatment(to / CHUNK) == treatment {
            to += CHUNK;
        }
        to.min(end)
    }

    /// Takes in a capture's scans: chunks left count down, chunks measured dense are
    /// left for the next captures, sparse ones are forgotten.
    pub(crate) fn update(&mut self, tally: Tally) {
        self.chunks.retain(|chunk, c| {
            if c.leave > 0 {
                c.leave -= 1;
                c.rearm = c.leave == 0;
                return true;
            }
            // Protected in this capture, judged by its tally below; gone if not scanned.
            tally.chunks.contains_key(chunk)
        });
        for (chunk, (scanned, written)) in tally.chunks {
            let c = self.chunks.entry(chunk).or_default();
            if c.leave > 0 {
                continue;
            }
            if c.rearm {
                c.rearm = false;
                continue;
            }
            if scanned >= MIN_MEASURED_PAGES && written * 2 >= scanned {
                c.streak = (c.streak + 1).min(3);
                c.leave = (1 << (c.streak - 1)).min(MAX_LEAVE);
            } else {
                self.chunks.remove(&chunk);
            }
        }
    }

    /// Forgets everything: a capture read the tracked memory whole, without scanning.
    pub(crate) fn reset(&mut self) {
        self.chunks.clear();
    }

    /// Chunks currently left unprotected.
    pub(crate) fn left(&self) -> usize {
        self.chunks.values().filter(|c| c.leave > 0).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGES: u32 = (CHUNK / sdt_store::PAGE_SIZE) as u32;

    fn tally(entries: &[(u64, u32, u32)]) -> Tally {
        let mut t = Tally::default();
        for &(chunk, scanned, written) in entries {
            t.add(chunk, scanned, written);
        }
        t
    }

    /// The chunk's treatment at each of `captures` captures when the program writes
    /// all of it (`dense`) or one page of it between every two.
    fn pattern(captures: usize, dense: impl Fn(usize) -> bool) -> String {
        let mut d = Density::default();
        let mut out = String::new();
        for n in 0..captures {
            if d.treatment(0) == Treatment::Left {
                out.push('L');
                d.update(Tally::default());
            } else {
                out.push('P');
                d.update(tally(&[(0, PAGES, if dense(n) { PAGES } else { 1 })]));
            }
        }
        out
    }

    #[test]
    fn a_chunk_always_rewritten_is_left_longer_each_time() {
        // measure, leave 1; re-arm, measure, leave 2; re-arm, measure, leave 4; …
        assert_eq!(pattern(16, |_| true), "PLPPLLPPLLLLPPLL");
    }

    #[test]
    fn a_sparse_chunk_stays_protected() {
        assert_eq!(pattern(6, |_| false), "PPPPPP");
    }

    #[test]
    fn a_chunk_that_goes_quiet_is_protected_again() {
        // Dense for the first two captures, then one page per interval.
        assert_eq!(pattern(8, |n| n < 2), "PLPPPPPP");
    }

    #[test]
    fn edges_and_partial_scans_are_no_measurement() {
        let mut d = Density::default();
        d.update(tally(&[(0, MIN_MEASURED_PAGES - 1, MIN_MEASURED_PAGES - 1)]));
        assert_eq!(d.treatment(0), Treatment::Sparse);
        d.update(tally(&[(0, PAGES, PAGES / 2)]));
        assert_eq!(d.treatment(0), Treatment::Left);
    }

    #[test]
    fn a_chunk_protected_again_is_dense_until_measured_sparse() {
        let mut d = Density::default();
        d.update(tally(&[(1, PAGES, PAGES)]));
        assert_eq!(d.treatment(1), Treatment::Left);
        d.update(Tally::default());
        assert_eq!(d.treatment(1), Treatment::Dense);
        assert_eq!(d.same_until(CHUNK, 4 * CHUNK), 2 * CHUNK);
        // The re-arming scan is no measurement; the one after is.
        d.update(tally(&[(1, PAGES, 1)]));
        assert_eq!(d.treatment(1), Treatment::Dense);
        d.update(tally(&[(1, PAGES, 1)]));
        assert_eq!(d.treatment(1), Treatment::Sparse);
    }

    #[test]
    fn ranges_split_by_chunk() {
        let mut t = Tally::default();
        t.add_scanned(CHUNK - 4096, CHUNK + 8192);
        t.add_written(CHUNK, CHUNK + 4096);
        assert_eq!(t.chunks[&0], (1, 0));
        assert_eq!(t.chunks[&1], (2, 1));
        let mut d = Density::default();
        d.update(tally(&[(1, PAGES, PAGES)]));
        assert_eq!(d.same_until(0, 4 * CHUNK), CHUNK);
        assert_eq!(d.same_until(CHUNK, 4 * CHUNK), 2 * CHUNK);
        assert_eq!(d.same_until(CHUNK + 4096, CHUNK + 8192), CHUNK + 8192);
        assert_eq!(d.left(), 1);
        d.reset();
        assert_eq!(d.left(), 0);
    }
}
