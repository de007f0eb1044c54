//! The page index of a snapshot file: the blocks the file holds, and where every page of
//! the snapshot lives (in this file or an earlier one). Encoded and decoded on byte slices.
//!
//! # Encoding (the bytes inside the index's zstd frame; little-endian)
//!
//! ```text
//! field                                      readers check
//! block_count u32
//! block_count × BlockEntry (12 bytes)
//!   file_offset u64                          # of its BlockHeader; the first is 32, each
//!                                            #   next >= this + 17, the last + 17 <= index_offset;
//!                                            #   none: index_offset = 32
//!   page_count u32                           # 1..=64
//! run_count u32
//! run_count × PageRun (20 bytes)
//!   first_page u64                           # address / 4096; >= the previous run's end
//!   page_count u32                           # >= 1; first_page + page_count <= 2^52
//!   source_seq u32                           # <= this file's seq
//!   first_slot u32                           # source = this file: first_slot + page_count
//!                                            #   <= this file's slot count
//! (nothing after the last run)
//! ```
//!
//! Slots number the pages a file stores, 0.. across its blocks in order. A run maps
//! `page_count` consecutive pages to consecutive slots of file `source_seq`. Runs are
//! sorted, do not overlap, and are maximal: a run never continues the previous one (same
//! source, next page, next slot). Pages in no run are not stored: their mapping's
//! `Content` says what they hold.

use crate::format::{BLOCK_HEADER_LEN, HEADER_LEN, MAX_BLOCK_PAGES};
use crate::model::PAGE_SIZE;

/// Number of pages in the 64-bit address space: page numbers are below this.
const MAX_PAGES: u64 = 1 << (64 - PAGE_SIZE.trailing_zeros());
/// Smallest block: its header and a non-empty frame.
const MIN_BLOCK_LEN: u64 = BLOCK_HEADER_LEN + 1;
const BLOCK_ENTRY_LEN: usize = 12;
const RUN_LEN: usize = 20;

/// One block of a snapshot file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct BlockEntry {
    /// Where its `BlockHeader` starts in the file.
    pub offset: u64,
    /// Pages it holds, 1..=64.
    pub page_count: u32,
}

/// Consecutive pages stored at consecutive slots of one file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PageRun {
    /// Address of the first page / 4096.
    pub first_page: u64,
    /// Pages in the run, >= 1.
    pub page_count: u32,
    /// The snapshot whose file holds the bytes.
    pub source_seq: u32,
    /// That file's slot of the first page.
    pub first_slot: u32,
}

impl PageRun {
    fn end_page(&self) -> u64 {
        self.first_page + u64::from(self.page_count)
    }

    /// Whether a page at `page`, stored at `slot` of `source_seq`, would extend this run.
    fn continues_at(&self, page: u64, source_seq: u32, slot: u32) -> bool {
        self.end_page() == page
            && self.page_count < u32::MAX
            && self.source_seq == source_seq
            && u64::from(self.first_slot) + u64::from(self.page_count) == u64::from(slot)
    }
}

/// The blocks of one file, with the slot each starts at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct BlockTable {
    blocks: Vec<BlockEntry>,
    /// `first_slots[i]`: slot of block `i`'s first page; one more entry: the slot count.
    first_slots: Vec<u64>,
    /// Where the blocks end (the index's offset).
    end: u64,
}

impl BlockTable {
    /// The table for `blocks`, which end at `end`.
    pub(crate) fn new(blocks: Vec<BlockEntry>, end: u64) -> BlockTable {
        let mut first_slots = Vec::with_capacity(blocks.len() + 1);
        let mut slot = 0;
        first_slots.push(0);
        for b in &blocks {
            slot += u64::from(b.page_count);
            first_slots.push(slot);
        }
        BlockTable { blocks, first_slots, end }
    }

    /// Pages the file stores.
    pub(crate) fn slot_count(&self) -> u64 {
        self.first_slots.last().copied().unwrap_or(0)
    }

    /// The block holding `slot`, and the slot's page within it.
    pub(crate) fn locate(&self, slot: u32) -> Option<(usize, usize)> {
        let slot = u64::from(slot);
        if slot >= self.slot_count() {
            return None;
        }
        let block = self.first_slots.partition_point(|&first| first <= slot) - 1;
        Some((block, (slot - self.first_slots[block]) as usize))
    }

    /// Block `block`'s start, end (the next block's start or the index's) and page count.
    pub(crate) fn extent(&self, block: usize) -> Option<(u64, u64, u32)> {
        let b = self.blocks.get(block)?;
        let end = self.blocks.get(block + 1).map_or(self.end, |next| next.offset);
        Some((b.offset, end, b.page_count))
    }
}

/// A decoded index.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Index {
    /// This file's blocks.
    pub blocks: BlockTable,
    /// Every stored page of the snapshot.
    pub runs: Vec<PageRun>,
}

/// Adds page `page`, stored at `slot` of file `source`, after the pages already in `runs`
/// (which must all be below it), merging it into the last run where it continues it.
pub(crate) fn push_page(runs: &mut Vec<PageRun>, page: u64, source_seq: u32, slot: u32) {
    if let Some(last) = runs.last_mut() {
        if last.continues_at(page, source_seq, slot) {
            last.page_count += 1;
            return;
        }
    }
    runs.push(PageRun { first_page: page, page_count: 1, source_seq, first_slot: slot });
}

/// Where page `page` is stored: `(source_seq, slot)`, or `None` if it is in no run.
pub(crate) fn find_page(runs: &[PageRun], page: u64) -> Option<(u32, u32)> {
    let i = runs.partition_point(|r| r.end_page() <= page);
    let run = runs.get(i)?;
    if run.first_page > page {
        return None;
    }
    // Inside the run, so the difference is below page_count (a u32).
    Some((run.source_seq, run.first_slot + (page - run.first_page) as u32))
}

/// A cursor over untrusted bytes.
struct Bytes<'a> {
    rest: &'a [u8],
}

impl Bytes<'_> {
    fn take<const N: usize>(&mut self, what: &str) -> Result<[u8; N], String> {
        let (head, rest) =
            self.rest.split_first_chunk::<N>().ok_or_else(|| format!("index: truncated in {what}"))?;
        self.rest = rest;
        Ok(*head)
    }

    fn u32(&mut self, what: &str) -> Result<u32, String> {
        self.take(what).map(u32::from_le_bytes)
    }

    fn u64(&mut self, what: &str) -> Result<u64, String> {
        self.take(what).map(u64::from_le_bytes)
    }

    /// Reads a count of `item_len`-byte items, refusing one the remaining bytes cannot hold.
    fn count(&mut self, what: &str, item_len: usize) -> Result<usize, String> {
        let n = self.u32(what)? as usize;
        let room = self.rest.len() / item_len;
        if n > room {
            return Err(format!("index: {n} {what} need {} bytes, {} left", n * item_len, self.rest.len()));
        }
        Ok(n)
    }
}

impl Index {
    /// The index's bytes (before compression).
    pub(crate) fn encode(&self) -> Vec<u8> {
        let blocks = &self.blocks.blocks;
        let mut out = Vec::with_capacity(8 + blocks.len() * BLOCK_ENTRY_LEN + self.runs.len() * RUN_LEN);
        out.extend_from_slice(&(blocks.len() as u32).to_le_bytes());
        for b in blocks {
            out.extend_from_slice(&b.offset.to_le_bytes());
            out.extend_from_slice(&b.page_count.to_le_bytes());
        }
        out.extend_from_slice(&(self.runs.len() as u32).to_le_bytes());
        for r in &self.runs {
            out.extend_from_slice(&r.first_page.to_le_bytes());
            out.extend_from_slice(&r.page_count.to_le_bytes());
            out.extend_from_slice(&r.source_seq.to_le_bytes());
            out.extend_from_slice(&r.first_slot.to_le_bytes());
        }
        out
    }

    /// Decodes and checks the index of snapshot file `seq`, whose index frame starts at
    /// `index_offset`. Returns what is wrong otherwise.
    pub(crate) fn decode(bytes: &[u8], seq: u32, index_offset: u64) -> Result<Index, String> {
        let mut input = Bytes { rest: bytes };
        let block_count = input.count("blocks", BLOCK_ENTRY_LEN)?;
        let mut blocks = Vec::with_capacity(block_count);
        let mut next_min = HEADER_LEN;
        for i in 0..block_count {
            let offset = input.u64("blocks")?;
            let page_count = input.u32("blocks")?;
            if !(1..=MAX_BLOCK_PAGES).contains(&page_count) {
                return Err(format!(
                    "index: block {i} at offset {offset}: page count {page_count}, expected 1..={MAX_BLOCK_PAGES}"
                ));
            }
            if i == 0 && offset != HEADER_LEN {
                return Err(format!("index: block 0 at offset {offset}, expected {HEADER_LEN}"));
            }
            if offset < next_min {
                return Err(format!(
                    "index: block {i} at offset {offset}, expected at least {next_min} (after block {})",
                    i.saturating_sub(1)
                ));
            }
            next_min = offset
                .checked_add(MIN_BLOCK_LEN)
                .ok_or_else(|| format!("index: block {i} at offset {offset} overflows"))?;
            blocks.push(BlockEntry { offset, page_count });
        }
        if next_min > index_offset {
            return Err(format!("index: blocks reach offset {next_min}, past the index at {index_offset}"));
        }
        if block_count == 0 && index_offset != HEADER_LEN {
            return Err(format!(
                "index: no blocks, but the index is at offset {index_offset}, expected {HEADER_LEN}"
            ));
        }
        let blocks = BlockTable::new(blocks, index_offset);
        let slot_count = blocks.slot_count();
        if slot_count > 1 << 32 {
            return Err(format!("index: {slot_count} slots, more than 2^32"));
        }

        let run_count = input.count("runs", RUN_LEN)?;
        let mut runs: Vec<PageRun> = Vec::with_capacity(run_count);
        for i in 0..run_count {
            let run = PageRun {
                first_page: input.u64("runs")?,
                page_count: input.u32("runs")?,
                source_seq: input.u32("runs")?,
                first_slot: input.u32("runs")?,
            };
            let at = run.first_page;
            if run.page_count == 0 {
                return Err(format!("index: run {i} (page {at:#x}) is empty"));
            }
            if at.checked_add(run.page_count.into()).is_none_or(|end| end > MAX_PAGES) {
                return Err(format!(
                    "index: run {i} (page {at:#x}, {} pages) ends past the address space",
                    run.page_count
                ));
            }
            if let Some(prev) = runs.last() {
                if at < prev.end_page() {
                    return Err(format!(
                        "index: run {i} (page {at:#x}) starts before run {} ends (page {:#x})",
                        i - 1,
                        prev.end_page()
                    ));
                }
                if prev.continues_at(at, run.source_seq, run.first_slot) {
                    return Err(format!(
                        "index: run {i} (page {at:#x}) continues run {} and should be part of it",
                        i - 1
                    ));
                }
            }
            if run.source_seq > seq {
                return Err(format!(
                    "index: run {i} (page {at:#x}) refers to S{}, later than this snapshot S{seq}",
                    run.source_seq
                ));
            }
            let slot_end = u64::from(run.first_slot) + u64::from(run.page_count);
            if run.source_seq == seq && slot_end > slot_count {
                return Err(format!(
                    "index: run {i} (page {at:#x}) uses slots {}..{slot_end}, the file holds {slot_count}",
                    run.first_slot
                ));
            }
            if slot_end > 1 << 32 {
                return Err(format!("index: run {i} (page {at:#x}) ends past slot 2^32"));
            }
            runs.push(run);
        }
        if !input.rest.is_empty() {
            return Err(format!("index: {} bytes after the last run", input.rest.len()));
        }
        Ok(Index { blocks, runs })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(first_page: u64, page_count: u32, source_seq: u32, first_slot: u32) -> PageRun {
        PageRun { first_page, page_count, source_seq, first_slot }
    }

    /// Index of snapshot 2: two blocks (64 + 3 pages) ending at 2000, three runs.
    fn sample() -> Index {
        Index {
            blocks: BlockTable::new(
                vec![BlockEntry { offset: 32, page_count: 64 }, BlockEntry { offset: 1000, page_count: 3 }],
                2000,
            ),
            runs: vec![run(0x10, 2, 0, 5), run(0x12, 67, 2, 0), run(0x100, 1, 1, 0)],
        }
    }

    #[test]
    fn round_trip() {
        let index = sample();
        let bytes = index.encode();
        assert_eq!(bytes.len(), 4 + 2 * 12 + 4 + 3 * 20);
        assert_eq!(Index::decode(&bytes, 2, 2000), Ok(index));
    }

    #[test]
    fn byte_literal() {
        #[rustfmt::skip]
        let bytes: &[u8] = &[
            1, 0, 0, 0,                                      // block_count
            32, 0, 0, 0, 0, 0, 0, 0,  2, 0, 0, 0,            // block 0: offset 32, 2 pages
            1, 0, 0, 0,                                      // run_count
            0x34, 0x12, 0, 0, 0, 0, 0, 0,  2, 0, 0, 0,       // run 0: page 0x1234, 2 pages
            0, 0, 0, 0,  0, 0, 0, 0,                         //   source S0, slot 0
        ];
        let index = Index::decode(bytes, 0, 100).unwrap();
        assert_eq!(index.runs, [run(0x1234, 2, 0, 0)]);
        assert_eq!(index.blocks.slot_count(), 2);
        assert_eq!(index.encode(), bytes);
        // Every truncation fails cleanly.
        for len in 0..bytes.len() {
            assert!(Index::decode(&bytes[..len], 0, 100).is_err(), "{len}");
        }
        let mut longer = bytes.to_vec();
        longer.push(0);
        assert_eq!(Index::decode(&longer, 0, 100), Err("index: 1 bytes after the last run".into()));
    }

    fn decode_err(index: &Index, seq: u32, index_offset: u64) -> String {
        Index::decode(&index.encode(), seq, index_offset).unwrap_err()
    }

    #[test]
    fn bad_runs() {
        let mut i = sample();
        i.runs[1].first_page = 0x11;
        assert!(decode_err(&i, 2, 2000).contains("starts before run 0 ends"));
        let mut i = sample();
        i.runs[0] = run(0x10, 2, 2, 66);
        assert!(decode_err(&i, 2, 2000).contains("uses slots 66..68, the file holds 67"));
        let mut i = sample();
        i.runs[0] = run(0x10, 2, 0, 0xffff_ffff);
        assert!(decode_err(&i, 2, 2000).contains("past slot 2^32"));
        let mut i = sample();
        i.runs[1] = run(0x12, 2, 0, 7);
        assert!(decode_err(&i, 2, 2000).contains("should be part of it"));
        let mut i = sample();
        i.runs[2].source_seq = 3;
        assert!(decode_err(&i, 2, 2000).contains("refers to S3, later than this snapshot S2"));
        let mut i = sample();
        i.runs[2].page_count = 0;
        assert!(decode_err(&i, 2, 2000).contains("is empty"));
        let mut i = sample();
        i.runs[2] = run(MAX_PAGES - 1, 2, 1, 0);
        assert!(decode_err(&i, 2, 2000).contains("past the address space"));
        i.runs[2] = run(MAX_PAGES - 1, 1, 1, 0);
        assert!(Index::decode(&i.encode(), 2, 2000).is_ok());
    }

    #[test]
    fn bad_blocks() {
        let i = sample();
        assert!(decode_err(&i, 2, 1016).contains("past the index"));
        assert!(Index::decode(&i.encode(), 2, 1017).is_ok());
        let blocks = |b: Vec<BlockEntry>| Index { blocks: BlockTable::new(b, 2000), runs: vec![] };
        let e = |offset, page_count| BlockEntry { offset, page_count };
        assert!(decode_err(&blocks(vec![e(33, 1)]), 0, 2000).contains("block 0 at offset 33, expected 32"));
        assert!(decode_err(&blocks(vec![e(32, 0)]), 0, 2000).contains("page count 0"));
        assert!(decode_err(&blocks(vec![e(32, 65)]), 0, 2000).contains("page count 65"));
        assert!(decode_err(&blocks(vec![e(32, 1), e(48, 1)]), 0, 2000).contains("expected at least 49"));
        assert!(decode_err(&blocks(vec![e(32, 1), e(u64::MAX, 1)]), 0, 2000).contains("overflows"));
        assert!(decode_err(&blocks(vec![]), 0, 2000).contains("no blocks"));
        assert!(Index::decode(&blocks(vec![]).encode(), 0, 32).is_ok());
        // A count the bytes cannot hold is refused before anything is allocated.
        assert!(Index::decode(&[0xff, 0xff, 0xff, 0xff], 0, 32).unwrap_err().contains("4294967295 blocks"));
    }

    #[test]
    fn lookups() {
        let i = sample();
        assert_eq!(find_page(&i.runs, 0xf), None);
        assert_eq!(find_page(&i.runs, 0x10), Some((0, 5)));
        assert_eq!(find_page(&i.runs, 0x11), Some((0, 6)));
        assert_eq!(find_page(&i.runs, 0x12 + 66), Some((2, 66)));
        assert_eq!(find_page(&i.runs, 0x12 + 67), None);
        assert_eq!(find_page(&i.runs, 0x100), Some((1, 0)));
        assert_eq!(find_page(&i.runs, 0x101), None);
        assert_eq!(i.blocks.locate(0), Some((0, 0)));
        assert_eq!(i.blocks.locate(63), Some((0, 63)));
        assert_eq!(i.blocks.locate(64), Some((1, 0)));
        assert_eq!(i.blocks.locate(66), Some((1, 2)));
        assert_eq!(i.blocks.locate(67), None);
        assert_eq!(i.blocks.extent(0), Some((32, 1000, 64)));
        assert_eq!(i.blocks.extent(1), Some((1000, 2000, 3)));
        assert_eq!(i.blocks.extent(2), None);
    }

    #[test]
    fn push_merges() {
        let mut runs = Vec::new();
        for (page, source, slot) in [(1, 0, 0), (2, 0, 1), (3, 1, 2), (4, 1, 3), (6, 1, 4), (7, 1, 4)] {
            push_page(&mut runs, page, source, slot);
        }
        assert_eq!(runs, [run(1, 2, 0, 0), run(3, 2, 1, 2), run(6, 1, 1, 4), run(7, 1, 1, 4)]);
    }
}
