//! The index of a snapshot file: the blocks the file holds, where every page of the
//! snapshot lives (in this file or an earlier one), and which of this file's slots are
//! patches on an earlier slot. Encoded and decoded on byte slices.
//!
//! # Encoding (the bytes inside the index's zstd frame; little-endian)
//!
//! ```text
//! field                                      readers check
//! block_count u32
//! block_count × BlockEntry (13 bytes; 12 before version 3)
//!   file_offset u64                          # of its BlockHeader; the first is 32, each
//!                                            #   next >= this + 17, the last + 17 <= index_offset;
//!                                            #   none: index_offset = 32
//!   page_count u32                           # 1..=64
//!   encoding u8                              # version 3 on (before: 0); 0 zstd, 1 shuffled
//!                                            #   zstd, 2 stored as is (`format.rs`)
//! run_count u32
//! run_count × SlotRun (20 bytes): page runs
//!   first u64 = first page (address / 4096)  # >= the previous run's end; the run is not
//!                                            #   maximal if it continues the previous one
//!   count u32                                # >= 1; first + count <= 2^52
//!   seq u32 = the file holding the pages     # <= this file's seq
//!   first_slot u32                           # first_slot + count <= 2^32; seq = this
//!                                            #   file: first_slot + count <= slot count
//! patch_run_count u32                        # version 2 on; a version-1 index ends above
//! patch_run_count × SlotRun (20 bytes): patch runs
//!   first u64 = first slot of this file      # >= the previous run's end; maximal likewise
//!   count u32                                # >= 1; first + count <= slot count
//!   seq u32 = the file holding the bases     # < this file's seq
//!   first_slot u32 = the first base's slot   # first_slot + count <= 2^32; from each
//!                                            #   slot, a whole slot within 8 patches
//!                                            #   (checked as the chain is read)
//! (nothing after the last run)
//! ```
//!
//! Slots number the pages a file stores, 0.. across its blocks in order. A page run maps
//! `count` consecutive pages to consecutive slots of file `seq`; pages in no run are not
//! stored: their mapping's `Content` says what they hold. A patch run says that
//! `count` consecutive slots of this file hold patches (the page XOR its previous version)
//! on consecutive slots of file `seq`, their *bases*; slots in no patch run hold pages
//! whole. A base may itself be a patch: reading follows at most 8 ([`MAX_PATCH_DEPTH`])
//! patches to a whole page, and refuses a longer chain. Bases lie in earlier files, so a
//! chain cannot loop. Both tables are sorted, their runs do not overlap and are maximal:
//! a run never continues the previous one (same `seq`, next key, next slot).

use crate::format::{BLOCK_HEADER_LEN, Encoding, HEADER_LEN, MAX_BLOCK_PAGES};
use crate::model::PAGE_SIZE;

/// Most patches in the chain from a slot to the whole page it ends at. The writer stores a
/// page whole rather than exceed it; reading one page decodes at most this + 1 slots.
pub(crate) const MAX_PATCH_DEPTH: u32 = 8;
/// Number of pages in the 64-bit address space: page numbers are below this.
pub(crate) const MAX_PAGES: u64 = 1 << (64 - PAGE_SIZE.trailing_zeros());
/// Smallest block: its header and a non-empty frame.
const MIN_BLOCK_LEN: u64 = BLOCK_HEADER_LEN + 1;
/// A block entry's bytes, from format version 3 on (with its encoding).
const BLOCK_ENTRY_LEN: usize = 13;
/// A block entry's bytes in versions 1 and 2.
const BLOCK_ENTRY_LEN_V2: usize = 12;
const RUN_LEN: usize = 20;

/// One block of a snapshot file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct BlockEntry {
    /// Where its `BlockHeader` starts in the file.
    pub offset: u64,
    /// Pages it holds, 1..=64.
    pub page_count: u32,
    /// How its bytes encode them.
    pub encoding: Encoding,
}

/// Consecutive keys mapped to consecutive slots of one file: pages to the slots holding
/// them (a page run), or slots of this file to the slots of their bases (a patch run).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SlotRun {
    /// The first key: a page number (address / 4096), or a slot of this file.
    pub first: u64,
    /// Keys in the run, >= 1.
    pub count: u32,
    /// The snapshot whose file holds the slots.
    pub seq: u32,
    /// That file's slot for the first key.
    pub first_slot: u32,
    /// The slots are in the raw file of `seq` (a snapshot not compacted yet). Only in
    /// page tables that readers resolve for raw snapshots: never encoded, never decoded.
    pub raw: bool,
}

impl SlotRun {
    /// One past the last key.
    pub(crate) fn end(&self) -> u64 {
        self.first + u64::from(self.count)
    }

    /// Whether key `key`, mapped to `slot` of compacted file `seq`, would extend this run.
    fn continues_at(&self, key: u64, seq: u32, slot: u32) -> bool {
        self.end() == key
            && self.count < u32::MAX
            && self.seq == seq
            && !self.raw
            && u64::from(self.first_slot) + u64::from(self.count) == u64::from(slot)
    }
}

/// Adds key `key`, mapped to `slot` of compacted file `seq`, after the keys already in
/// `runs` (which must all be below it), merging it into the last run where it continues it.
pub(crate) fn push_run(runs: &mut Vec<SlotRun>, key: u64, seq: u32, slot: u32) {
    if let Some(last) = runs.last_mut()
        && last.continues_at(key, seq, slot)
    {
        last.count += 1;
        return;
    }
    runs.push(SlotRun { first: key, count: 1, seq, first_slot: slot, raw: false });
}

/// Where key `key` maps: `(seq, raw, slot)`, or `None` if it is in no run.
pub(crate) fn find_run(runs: &[SlotRun], key: u64) -> Option<(u32, bool, u32)> {
    let i = runs.partition_point(|r| r.end() <= key);
    let run = runs.get(i)?;
    if run.first > key {
        return None;
    }
    // Inside the run, so the difference is below count (a u32).
    Some((run.seq, run.raw, run.first_slot + (key - run.first) as u32))
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

    /// Block `block`'s start, end (the next block's start or the index's), page count and
    /// encoding.
    pub(crate) fn extent(&self, block: usize) -> Option<(u64, u64, u32, Encoding)> {
        let b = self.blocks.get(block)?;
        let end = self.blocks.get(block + 1).map_or(self.end, |next| next.offset);
        Some((b.offset, end, b.page_count, b.encoding))
    }
}

/// A decoded index.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Index {
    /// This file's blocks.
    pub blocks: BlockTable,
    /// Page runs: every stored page of the snapshot.
    pub pages: Vec<SlotRun>,
    /// Patch runs: the slots of this file that are patches, and their bases.
    pub patches: Vec<SlotRun>,
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

/// Which table of runs is being decoded.
#[derive(Clone, Copy)]
enum Table {
    Pages,
    Patches,
}

impl Table {
    /// `page 0x12` or `slot 18`.
    fn key(self, key: u64) -> String {
        match self {
            Table::Pages => format!("page {key:#x}"),
            Table::Patches => format!("slot {key}"),
        }
    }

    /// `run 3 (page 0x12)` or `patch run 3 (slot 18)`.
    fn name(self, i: usize, first: u64) -> String {
        match self {
            Table::Pages => format!("run {i} ({})", self.key(first)),
            Table::Patches => format!("patch run {i} ({})", self.key(first)),
        }
    }
}

fn encode_runs(out: &mut Vec<u8>, runs: &[SlotRun]) {
    out.extend_from_slice(&(runs.len() as u32).to_le_bytes());
    for r in runs {
        out.extend_from_slice(&r.first.to_le_bytes());
        out.extend_from_slice(&r.count.to_le_bytes());
        out.extend_from_slice(&r.seq.to_le_bytes());
        out.extend_from_slice(&r.first_slot.to_le_bytes());
    }
}

/// Decodes and checks one table of runs of file `seq`, which holds `slot_count` slots.
fn decode_runs(
    input: &mut Bytes<'_>,
    table: Table,
    seq: u32,
    slot_count: u64,
) -> Result<Vec<SlotRun>, String> {
    let what = match table {
        Table::Pages => "runs",
        Table::Patches => "patch runs",
    };
    let run_count = input.count(what, RUN_LEN)?;
    let mut runs: Vec<SlotRun> = Vec::with_capacity(run_count);
    for i in 0..run_count {
        let run = SlotRun {
            first: input.u64(what)?,
            count: input.u32(what)?,
            seq: input.u32(what)?,
            first_slot: input.u32(what)?,
            raw: false,
        };
        check_run(&run, runs.last(), table, seq, slot_count)
            .map_err(|problem| format!("index: {} {problem}", table.name(i, run.first)))?;
        runs.push(run);
    }
    Ok(runs)
}

/// What is wrong with `run`, which follows `prev` in `table` of file `seq`.
fn check_run(
    run: &SlotRun,
    prev: Option<&SlotRun>,
    table: Table,
    seq: u32,
    slot_count: u64,
) -> Result<(), String> {
    if run.count == 0 {
        return Err("is empty".into());
    }
    let end = run.first.checked_add(run.count.into());
    match table {
        Table::Pages if end.is_none_or(|end| end > MAX_PAGES) => {
            return Err(format!("has {} pages and ends past the address space", run.count));
        }
        Table::Patches if end.is_none_or(|end| end > slot_count) => {
            return Err(format!("has {} slots and ends past the {slot_count} of this file", run.count));
        }
        _ => {}
    }
    if let Some(prev) = prev {
        if run.first < prev.end() {
            return Err(format!("starts before the previous run ends ({})", table.key(prev.end())));
        }
        if prev.continues_at(run.first, run.seq, run.first_slot) {
            return Err("continues the previous run and should be part of it".into());
        }
    }
    match table {
        Table::Pages if run.seq > seq => {
            return Err(format!("refers to S{}, later than this snapshot S{seq}", run.seq));
        }
        Table::Patches if run.seq >= seq => {
            return Err(format!("has bases in S{}, not before this snapshot S{seq}", run.seq));
        }
        _ => {}
    }
    let slot_end = u64::from(run.first_slot) + u64::from(run.count);
    if run.seq == seq && slot_end > slot_count {
        return Err(format!("uses slots {}..{slot_end}, the file holds {slot_count}", run.first_slot));
    }
    if slot_end > 1 << 32 {
        return Err("ends past slot 2^32".into());
    }
    Ok(())
}

impl Index {
    /// The index's bytes (before compression), in the current format version.
    pub(crate) fn encode(&self) -> Vec<u8> {
        let blocks = &self.blocks.blocks;
        let runs = self.pages.len() + self.patches.len();
        let mut out = Vec::with_capacity(12 + blocks.len() * BLOCK_ENTRY_LEN + runs * RUN_LEN);
        out.extend_from_slice(&(blocks.len() as u32).to_le_bytes());
        for b in blocks {
            out.extend_from_slice(&b.offset.to_le_bytes());
            out.extend_from_slice(&b.page_count.to_le_bytes());
            out.push(b.encoding as u8);
        }
        encode_runs(&mut out, &self.pages);
        encode_runs(&mut out, &self.patches);
        out
    }

    /// Decodes and checks the index of snapshot file `seq` in format `version`, whose index
    /// frame starts at `index_offset`. Returns what is wrong otherwise.
    pub(crate) fn decode(bytes: &[u8], seq: u32, index_offset: u64, version: u32) -> Result<Index, String> {
        let mut input = Bytes { rest: bytes };
        let entry_len = if version >= 3 { BLOCK_ENTRY_LEN } else { BLOCK_ENTRY_LEN_V2 };
        let block_count = input.count("blocks", entry_len)?;
        let mut blocks = Vec::with_capacity(block_count);
        let mut next_min = HEADER_LEN;
        for i in 0..block_count {
            let offset = input.u64("blocks")?;
            let page_count = input.u32("blocks")?;
            let encoding = if version >= 3 {
                let [n] = input.take::<1>("blocks")?;
                Encoding::from_u8(n).ok_or_else(|| {
                    format!("index: block {i} at offset {offset}: encoding {n}, expected 0..=2")
                })?
            } else {
                Encoding::Zstd
            };
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
            blocks.push(BlockEntry { offset, page_count, encoding });
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
        let pages = decode_runs(&mut input, Table::Pages, seq, slot_count)?;
        let patches =
            if version >= 2 { decode_runs(&mut input, Table::Patches, seq, slot_count)? } else { Vec::new() };
        if !input.rest.is_empty() {
            return Err(format!("index: {} bytes after the last run", input.rest.len()));
        }
        Ok(Index { blocks, pages, patches })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(first: u64, count: u32, seq: u32, first_slot: u32) -> SlotRun {
        SlotRun { first, count, seq, first_slot, raw: false }
    }

    /// Index of snapshot 2: two blocks (64 + 3 pages) ending at 2000, three page runs, two
    /// patch runs.
    fn sample() -> Index {
        Index {
            blocks: BlockTable::new(
                vec![
                    BlockEntry { offset: 32, page_count: 64, encoding: Encoding::ShuffledZstd },
                    BlockEntry { offset: 1000, page_count: 3, encoding: Encoding::Stored },
                ],
                2000,
            ),
            pages: vec![run(0x10, 2, 0, 5), run(0x12, 67, 2, 0), run(0x100, 1, 1, 0)],
            patches: vec![run(0, 3, 1, 7), run(66, 1, 0, 0)],
        }
    }

    fn decode(bytes: &[u8], seq: u32, index_offset: u64) -> Result<Index, String> {
        Index::decode(bytes, seq, index_offset, 3)
    }

    #[test]
    fn round_trip() {
        let index = sample();
        let bytes = index.encode();
        assert_eq!(bytes.len(), 4 + 2 * 13 + 4 + 3 * 20 + 4 + 2 * 20);
        assert_eq!(decode(&bytes, 2, 2000), Ok(index));
    }

    #[test]
    fn byte_literal() {
        #[rustfmt::skip]
        let bytes: &[u8] = &[
            1, 0, 0, 0,                                      // block_count
            32, 0, 0, 0, 0, 0, 0, 0,  2, 0, 0, 0,            // block 0: offset 32, 2 pages,
            1,                                               //   shuffled zstd
            1, 0, 0, 0,                                      // run_count
            0x34, 0x12, 0, 0, 0, 0, 0, 0,  2, 0, 0, 0,       // run 0: page 0x1234, 2 pages
            1, 0, 0, 0,  0, 0, 0, 0,                         //   in S1, from slot 0
            1, 0, 0, 0,                                      // patch_run_count
            1, 0, 0, 0, 0, 0, 0, 0,  1, 0, 0, 0,             // patch run 0: slot 1, 1 slot
            0, 0, 0, 0,  9, 0, 0, 0,                         //   on S0, from slot 9
        ];
        let index = decode(bytes, 1, 100).unwrap();
        assert_eq!(index.pages, [run(0x1234, 2, 1, 0)]);
        assert_eq!(index.patches, [run(1, 1, 0, 9)]);
        assert_eq!(index.blocks.slot_count(), 2);
        assert_eq!(index.encode(), bytes);
        // Every truncation fails cleanly.
        for len in 0..bytes.len() {
            assert!(decode(&bytes[..len], 1, 100).is_err(), "{len}");
        }
        let mut longer = bytes.to_vec();
        longer.push(0);
        assert_eq!(decode(&longer, 1, 100), Err("index: 1 bytes after the last run".into()));
        // Versions 1 and 2 record no encoding (all blocks plain zstd): the same bytes without it.
        let v2_bytes = [&bytes[..16], &bytes[17..]].concat();
        let v2 = Index::decode(&v2_bytes, 1, 100, 2).unwrap();
        assert_eq!(v2.blocks.extent(0), Some((32, 100, 2, Encoding::Zstd)));
        assert_eq!((&v2.pages, &v2.patches), (&index.pages, &index.patches));
        // Version 1 has no patch table either: the same bytes up to it.
        let v1 = Index::decode(&v2_bytes[..40], 1, 100, 1).unwrap();
        assert_eq!((v1.pages, v1.patches), (index.pages, vec![]));
        assert_eq!(Index::decode(&v2_bytes, 1, 100, 1), Err("index: 24 bytes after the last run".into()));
        // An encoding this build does not know is damage.
        let mut unknown = bytes.to_vec();
        unknown[16] = 3;
        assert_eq!(
            decode(&unknown, 1, 100),
            Err("index: block 0 at offset 32: encoding 3, expected 0..=2".into())
        );
    }

    fn decode_err(index: &Index, seq: u32, index_offset: u64) -> String {
        decode(&index.encode(), seq, index_offset).unwrap_err()
    }

    #[test]
    fn bad_page_runs() {
        let mut i = sample();
        i.pages[1].first = 0x11;
        assert!(
            decode_err(&i, 2, 2000)
                .contains("run 1 (page 0x11) starts before the previous run ends (page 0x12)")
        );
        let mut i = sample();
        i.pages[0] = run(0x10, 2, 2, 66);
        assert!(decode_err(&i, 2, 2000).contains("uses slots 66..68, the file holds 67"));
        let mut i = sample();
        i.pages[0] = run(0x10, 2, 0, 0xffff_ffff);
        assert!(decode_err(&i, 2, 2000).contains("past slot 2^32"));
        let mut i = sample();
        i.pages[1] = run(0x12, 2, 0, 7);
        assert!(decode_err(&i, 2, 2000).contains("should be part of it"));
        let mut i = sample();
        i.pages[2].seq = 3;
        assert!(decode_err(&i, 2, 2000).contains("refers to S3, later than this snapshot S2"));
        let mut i = sample();
        i.pages[2].count = 0;
        assert!(decode_err(&i, 2, 2000).contains("is empty"));
        let mut i = sample();
        i.pages[2] = run(MAX_PAGES - 1, 2, 1, 0);
        assert!(decode_err(&i, 2, 2000).contains("past the address space"));
        i.pages[2] = run(MAX_PAGES - 1, 1, 1, 0);
        assert!(decode(&i.encode(), 2, 2000).is_ok());
    }

    #[test]
    fn bad_patch_runs() {
        let mut i = sample();
        i.patches[1] = run(2, 1, 0, 0);
        assert!(
            decode_err(&i, 2, 2000)
                .contains("patch run 1 (slot 2) starts before the previous run ends (slot 3)")
        );
        let mut i = sample();
        i.patches[1] = run(3, 1, 1, 10);
        assert!(decode_err(&i, 2, 2000).contains("patch run 1 (slot 3) continues the previous run"));
        // Bases lie in earlier files only: no chain can loop.
        let mut i = sample();
        i.patches[0].seq = 2;
        assert!(decode_err(&i, 2, 2000).contains("has bases in S2, not before this snapshot S2"));
        i.pages.clear();
        i.patches[0].seq = 3;
        assert!(decode_err(&i, 2, 2000).contains("has bases in S3, not before this snapshot S2"));
        let mut i = sample();
        i.patches[1] = run(66, 2, 0, 0);
        assert!(
            decode_err(&i, 2, 2000)
                .contains("patch run 1 (slot 66) has 2 slots and ends past the 67 of this file")
        );
        let mut i = sample();
        i.patches[1] = run(u64::MAX, 1, 0, 0);
        assert!(decode_err(&i, 2, 2000).contains("ends past the 67 of this file"));
        let mut i = sample();
        i.patches[1] = run(65, 2, 0, u32::MAX);
        assert!(decode_err(&i, 2, 2000).contains("patch run 1 (slot 65) ends past slot 2^32"));
        let mut i = sample();
        i.patches[0].count = 0;
        assert!(decode_err(&i, 2, 2000).contains("patch run 0 (slot 0) is empty"));
    }

    #[test]
    fn bad_blocks() {
        let i = sample();
        assert!(decode_err(&i, 2, 1016).contains("past the index"));
        assert!(decode(&i.encode(), 2, 1017).is_ok());
        let blocks =
            |b: Vec<BlockEntry>| Index { blocks: BlockTable::new(b, 2000), pages: vec![], patches: vec![] };
        let e = |offset, page_count| BlockEntry { offset, page_count, encoding: Encoding::Zstd };
        assert!(decode_err(&blocks(vec![e(33, 1)]), 0, 2000).contains("block 0 at offset 33, expected 32"));
        assert!(decode_err(&blocks(vec![e(32, 0)]), 0, 2000).contains("page count 0"));
        assert!(decode_err(&blocks(vec![e(32, 65)]), 0, 2000).contains("page count 65"));
        assert!(decode_err(&blocks(vec![e(32, 1), e(48, 1)]), 0, 2000).contains("expected at least 49"));
        assert!(decode_err(&blocks(vec![e(32, 1), e(u64::MAX, 1)]), 0, 2000).contains("overflows"));
        assert!(decode_err(&blocks(vec![]), 0, 2000).contains("no blocks"));
        assert!(decode(&blocks(vec![]).encode(), 0, 32).is_ok());
        // A count the bytes cannot hold is refused before anything is allocated.
        assert!(decode(&[0xff, 0xff, 0xff, 0xff], 0, 32).unwrap_err().contains("4294967295 blocks"));
    }

    #[test]
    fn lookups() {
        let i = sample();
        assert_eq!(find_run(&i.pages, 0xf), None);
        assert_eq!(find_run(&i.pages, 0x10), Some((0, false, 5)));
        assert_eq!(find_run(&i.pages, 0x11), Some((0, false, 6)));
        assert_eq!(find_run(&i.pages, 0x12 + 66), Some((2, false, 66)));
        assert_eq!(find_run(&i.pages, 0x12 + 67), None);
        assert_eq!(find_run(&i.pages, 0x100), Some((1, false, 0)));
        assert_eq!(find_run(&i.pages, 0x101), None);
        assert_eq!(find_run(&i.patches, 2), Some((1, false, 9)));
        assert_eq!(find_run(&i.patches, 3), None);
        assert_eq!(i.blocks.locate(0), Some((0, 0)));
        assert_eq!(i.blocks.locate(63), Some((0, 63)));
        assert_eq!(i.blocks.locate(64), Some((1, 0)));
        assert_eq!(i.blocks.locate(66), Some((1, 2)));
        assert_eq!(i.blocks.locate(67), None);
        assert_eq!(i.blocks.extent(0), Some((32, 1000, 64, Encoding::ShuffledZstd)));
        assert_eq!(i.blocks.extent(1), Some((1000, 2000, 3, Encoding::Stored)));
        assert_eq!(i.blocks.extent(2), None);
    }

    #[test]
    fn push_merges() {
        let mut runs = Vec::new();
        for (page, source, slot) in [(1, 0, 0), (2, 0, 1), (3, 1, 2), (4, 1, 3), (6, 1, 4), (7, 1, 4)] {
            push_run(&mut runs, page, source, slot);
        }
        assert_eq!(runs, [run(1, 2, 0, 0), run(3, 2, 1, 2), run(6, 1, 1, 4), run(7, 1, 1, 4)]);
    }
}
