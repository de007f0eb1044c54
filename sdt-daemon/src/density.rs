//! Where write tracking costs more than it saves: chunks of tracked memory that the
//! program rewrites between every two captures are left unprotected, but for a sample.
//!
//! A protected page costs the program a fault at its first write after a capture
//! (0.9–1.5 µs on a virtual machine: `benches/workloads/wp_fault.c`); copying a page
//! costs the pause about 0.4 µs. A program that rewrites hundreds of MiB between
//! snapshots (an FFT, a grid solver) pays for a fault on every page it writes, only for
//! the capture to copy nearly all of them anyway.
//! So a [`CHUNK`] found mostly written is scanned without protecting it again: its
//! written pages stay writable and are copied at each capture, whether written again or
//! not. One slice of [`SAMPLE_PAGES`] pages of it is protected at each capture and
//! measured at the next, the slice moving through the chunk from capture to capture:
//! the program faults on a sixteenth of the chunk's pages, and a chunk it stops
//! rewriting is caught at the next capture and protected whole again (re-armed); the
//! capture after that measures it as any protected chunk.
//!
//! ```text
//! capture:   measure ─ left, sampled ×n ─ sample sparse: re-arm ─ measure ─ …
//! interval:  faults    faults on the sample   faults                faults
//! ```
//!
//! A re-arming scan reports every page left writable as written: it copies them (as a
//! capture must) but is no measurement.

use std::collections::HashMap;
use std::ops::Range;

use sdt_store::PAGE_SIZE;

/// Bytes of tracked memory judged together (a huge page's worth).
pub(crate) const CHUNK: u64 = 2 << 20;

/// Pages of a left chunk protected at a capture and measured at the next.
const SAMPLE_PAGES: u64 = 32;

/// Slices of a chunk the sample moves through.
const SLICES: u64 = CHUNK / PAGE_SIZE / SAMPLE_PAGES;

/// Fewer pages scanned in a protected chunk than this (a mapping's edge) are no
/// measurement…
const MIN_MEASURED_PAGES: u32 = 64;

/// …nor fewer than this of a sample.
const MIN_SAMPLED_PAGES: u32 = 16;

/// The chunks that are left or being re-armed; the others are protected as usual.
#[derive(Debug, Default)]
pub(crate) struct Density {
    chunks: HashMap<u64, State>,
    /// Captures taken in since the last reset: picks the sample's slice.
    captures: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Left writable but for the sample.
    Left,
    /// Its sample found it quiet: protected whole at the next capture.
    Rearm,
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
        f(chunk, ((to - at) / PAGE_SIZE) as u32);
        at = to;
    }
}

/// How a capture scans a chunk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Treatment {
    /// Protected, and not dense lately: few of its pages are expected written.
    Sparse,
    /// Protected again after being left: every page left writable is reported written.
    Rearm,
    /// Scanned without protecting it, but for its sample ([`Density::sample`]).
    Left,
}

/// The sample of a left chunk in one capture.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Sample {
    /// Protected by the capture before: what was written of it is a measurement.
    pub measure: Range<u64>,
    /// To protect now, for the next capture to measure.
    pub protect: Range<u64>,
}

impl Density {
    /// How this capture scans `chunk`.
    pub(crate) fn treatment(&self, chunk: u64) -> Treatment {
        match self.chunks.get(&chunk) {
            None => Treatment::Sparse,
            Some(State::Left) => Treatment::Left,
            Some(State::Rearm) => Treatment::Rearm,
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

    /// The sample of left chunk `chunk` in this capture: the slice the capture before
    /// protected, and the next one.
    pub(crate) fn sample(&self, chunk: u64) -> Sample {
        let slice = |n: u64| {
            let start = chunk * CHUNK + (n % SLICES) * SAMPLE_PAGES * PAGE_SIZE;
            start..start + SAMPLE_PAGES * PAGE_SIZE
        };
        Sample { measure: slice(self.captures), protect: slice(self.captures + 1) }
    }

    /// Takes in a capture's scans: chunks measured dense are left, left chunks whose
    /// sample was quiet are re-armed, re-armed ones are protected as usual from now on,
    /// and chunks not scanned (their mapping gone) are forgotten.
    pub(crate) fn update(&mut self, tally: Tally) {
        self.captures += 1;
        self.chunks.retain(|chunk, _| tally.chunks.contains_key(chunk));
        for (chunk, (scanned, written)) in tally.chunks {
            let dense = written * 2 >= scanned;
            match self.chunks.get(&chunk) {
                // The re-arming scan is no measurement; the next one is.
                Some(State::Rearm) => {
                    self.chunks.remove(&chunk);
                }
                // A slice outside the mapping measures nothing: left as it is.
                Some(State::Left) if scanned < MIN_SAMPLED_PAGES => {}
                Some(State::Left) if !dense => {
                    self.chunks.insert(chunk, State::Rearm);
                }
                Some(State::Left) => {}
                None if scanned >= MIN_MEASURED_PAGES && dense => {
                    self.chunks.insert(chunk, State::Left);
                }
                None => {}
            }
        }
    }

    /// Forgets everything: a capture read the tracked memory whole, without scanning.
    pub(crate) fn reset(&mut self) {
        self.chunks.clear();
        self.captures = 0;
    }

    /// Chunks currently left unprotected.
    pub(crate) fn left(&self) -> usize {
        self.chunks.values().filter(|s| **s == State::Left).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGES: u32 = (CHUNK / PAGE_SIZE) as u32;

    fn tally(entries: &[(u64, u32, u32)]) -> Tally {
        let mut t = Tally::default();
        for &(chunk, scanned, written) in entries {
            t.add(chunk, scanned, written);
        }
        t
    }

    /// The chunk's treatment at each of `captures` captures when the program writes all
    /// of it (`dense`) or one page of it between every two.
    fn pattern(captures: usize, dense: impl Fn(usize) -> bool) -> String {
        let mut d = Density::default();
        let mut out = String::new();
        for n in 0..captures {
            let written = |pages: u32| if dense(n) { pages } else { 1 };
            match d.treatment(0) {
                Treatment::Left => {
                    out.push('L');
                    d.update(tally(&[(0, SAMPLE_PAGES as u32, written(SAMPLE_PAGES as u32))]));
                }
                Treatment::Rearm => {
                    out.push('R');
                    d.update(tally(&[(0, PAGES, PAGES)]));
                }
                Treatment::Sparse => {
                    out.push('P');
                    d.update(tally(&[(0, PAGES, written(PAGES))]));
                }
            }
        }
        out
    }

    #[test]
    fn a_chunk_always_rewritten_stays_left() {
        assert_eq!(pattern(8, |_| true), "PLLLLLLL");
    }

    #[test]
    fn a_sparse_chunk_stays_protected() {
        assert_eq!(pattern(6, |_| false), "PPPPPP");
    }

    #[test]
    fn a_chunk_that_goes_quiet_is_protected_again_at_the_next_capture() {
        // Dense for the first three captures' intervals, then one page per interval: the
        // sample sees it at once, the chunk is re-armed, then measured sparse.
        assert_eq!(pattern(8, |n| n < 3), "PLLLRPPP");
    }

    #[test]
    fn a_chunk_dense_again_after_re_arming_is_left_again() {
        assert_eq!(pattern(8, |n| n != 2), "PLLRPLLL");
    }

    #[test]
    fn edges_and_partial_scans_are_no_measurement() {
        let mut d = Density::default();
        d.update(tally(&[(0, MIN_MEASURED_PAGES - 1, MIN_MEASURED_PAGES - 1)]));
        assert_eq!(d.treatment(0), Treatment::Sparse);
        d.update(tally(&[(0, PAGES, PAGES / 2)]));
        assert_eq!(d.treatment(0), Treatment::Left);
        // A sample mostly outside the mapping: still left, whatever it found.
        d.update(tally(&[(0, MIN_SAMPLED_PAGES - 1, 0)]));
        assert_eq!(d.treatment(0), Treatment::Left);
        // A chunk not scanned at all (its mapping gone) is forgotten.
        d.update(Tally::default());
        assert_eq!(d.treatment(0), Treatment::Sparse);
    }

    #[test]
    fn the_sample_moves_through_the_chunk_and_is_measured_where_it_was_protected() {
        let mut d = Density::default();
        d.update(tally(&[(3, PAGES, PAGES)]));
        let mut seen = Vec::new();
        for _ in 0..SLICES {
            let s = d.sample(3);
            assert_eq!(s.measure.end - s.measure.start, SAMPLE_PAGES * PAGE_SIZE);
            assert!(s.measure.start >= 3 * CHUNK && s.protect.end <= 4 * CHUNK);
            seen.push(s.measure.start);
            d.update(tally(&[(3, SAMPLE_PAGES as u32, SAMPLE_PAGES as u32)]));
            // What this capture protects, the next one measures.
            assert_eq!(d.sample(3).measure, s.protect);
        }
        seen.sort();
        seen.dedup();
        assert_eq!(seen.len() as u64, SLICES, "every slice of the chunk is sampled in turn");
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
