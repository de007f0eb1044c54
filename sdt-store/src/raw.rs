//! A snapshot as captured: the pages copied in the pause, one after another, and a record
//! of what they are. Encoding and checking on byte slices; no I/O here (`spill` writes
//! the files, `reader` reads them).
//!
//! The capture copies a snapshot's pages into the run's capture buffer
//! (`process_vm_readv`, one copy), which goes to its raw file by direct I/O (`spill`),
//! then the record and the commit follow, and the file is renamed from its spare name to
//! `S<seq>.raw`: from then on the snapshot survives the death of `sdt`. Compaction (`writer`) later turns it into
//! `S<seq>.snap` and removes it.
//!
//! # `S<seq>.raw`, raw format version 1 (all integers little-endian)
//!
//! ```text
//! offset          size      field                                  readers check
//! 0               4096      header page
//!   +0            8           magic = b"SDTRAW\0\0"                # must match
//!   +8            4           version u32 = 1                      # checked after the checksum
//!   +12           4           reserved u32                         # = 0
//!   +16           8           reserved u64                         # = 0
//!   +24           8           checksum u64 = xxh3_64(bytes 0..24)  # must match
//!   +32           …           zero
//!   +4032         64          Commit
//!     +0          8             magic = b"SDTRAWC\0"               # must match
//!     +8          4             seq u32                            # = <seq> of the file name
//!     +12         4             reserved u32                       # = 0
//!     +16         8             slot_count u64                     # pages in the data area
//!     +24         8             record_offset u64                  # = 4096 + slot_count * 4096
//!     +32         8             record_len u64                     # the record lies inside the file
//!     +40         8             record_checksum u64 = xxh3_64(record) # must match
//!     +48         8             reserved u64                       # = 0
//!     +56         8             checksum u64 = xxh3_64(commit 0..56) # must match
//! 4096            slot_count × 4096   data: slot k at 4096 + k × 4096
//! record_offset   record_len  Record
//!   copied_count u32, then that many (first_page u64, pages u64)   # ascending, not touching,
//!                                                                  #   pages sum to slot_count
//!   unchanged_count u32, then that many (first_page u64, pages u64) # ascending, none overlaps
//!                                                                  #   a copied run
//!   the rest: serde_json(SnapshotMeta)                             # meta.seq = seq
//! (the file may continue past the record: space allocated for the capture and not used)
//! ```
//!
//! Copied runs map their pages, in order, to consecutive slots. Unchanged runs are pages
//! that write tracking saw unwritten since the previous snapshot: they hold what they
//! held in snapshot `seq - 1`, in whichever form that one is stored. Pages in neither are
//! not stored (zero, or the file a mapping names). The data area has no checksum: the
//! capture does not read the pages it copies. Compaction checksums them as it stores them.

use xxhash_rust::xxh3::xxh3_64;

use crate::format::Bad;
use crate::index::MAX_PAGES;
use crate::model::{PAGE_SIZE, SnapshotMeta, check_meta};

/// First bytes of every raw snapshot file.
const MAGIC: [u8; 8] = *b"SDTRAW\0\0";
/// First bytes of the commit.
const COMMIT_MAGIC: [u8; 8] = *b"SDTRAWC\0";
/// The raw format version this build writes and reads. Not the crate version.
pub(crate) const VERSION: u32 = 1;
/// The header page; the data area starts after it.
pub(crate) const HEADER_PAGE: u64 = PAGE_SIZE;
/// Where the commit lies in the header page.
const COMMIT_AT: usize = 4032;
const COMMIT_LEN: usize = 64;

/// Consecutive pages: `pages` of them from page number `first` (address / 4096).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PageSpan {
    /// The first page's number.
    pub first: u64,
    /// How many pages, >= 1.
    pub pages: u64,
}

impl PageSpan {
    /// One past the last page's number.
    pub fn end(&self) -> u64 {
        self.first + self.pages
    }
}

/// A raw snapshot's record, decoded.
#[derive(Debug)]
pub(crate) struct Record {
    /// Pages stored in the data area, in slot order.
    pub copied: Vec<PageSpan>,
    /// Pages as in the previous snapshot.
    pub unchanged: Vec<PageSpan>,
    /// The snapshot's metadata, if it was asked for: walking a chain of raw snapshots
    /// needs only their spans.
    pub meta: Option<SnapshotMeta>,
}

/// Where a committed file's record lies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Commit {
    pub slot_count: u64,
    pub record_offset: u64,
    pub record_len: u64,
    pub record_checksum: u64,
}

/// The header page of a raw file, before its commit is written.
pub(crate) fn encode_header() -> Vec<u8> {
    let mut page = vec![0; HEADER_PAGE as usize];
    page[0..8].copy_from_slice(&MAGIC);
    page[8..12].copy_from_slice(&VERSION.to_le_bytes());
    let sum = xxh3_64(&page[..24]);
    page[24..32].copy_from_slice(&sum.to_le_bytes());
    page
}

/// The record of a snapshot whose pages `copied` fill the data area in order.
pub(crate) fn encode_record(copied: &[PageSpan], unchanged: &[PageSpan], meta: &SnapshotMeta) -> Vec<u8> {
    let mut out = Vec::with_capacity(8 + 16 * (copied.len() + unchanged.len()) + 4096);
    for spans in [copied, unchanged] {
        out.extend_from_slice(&(spans.len() as u32).to_le_bytes());
        for s in spans {
            out.extend_from_slice(&s.first.to_le_bytes());
            out.extend_from_slice(&s.pages.to_le_bytes());
        }
    }
    // Serialising plain data into a Vec cannot fail.
    serde_json::to_writer(&mut out, meta).expect("snapshot metadata serialises");
    out
}

/// The 64-byte commit of snapshot `seq`, written at [`commit_offset`] once the data and
/// the record are in the file.
pub(crate) fn encode_commit(seq: u32, commit: &Commit) -> [u8; COMMIT_LEN] {
    let mut c = [0; COMMIT_LEN];
    c[0..8].copy_from_slice(&COMMIT_MAGIC);
    c[8..12].copy_from_slice(&seq.to_le_bytes());
    c[16..24].copy_from_slice(&commit.slot_count.to_le_bytes());
    c[24..32].copy_from_slice(&commit.record_offset.to_le_bytes());
    c[32..40].copy_from_slice(&commit.record_len.to_le_bytes());
    c[40..48].copy_from_slice(&commit.record_checksum.to_le_bytes());
    let sum = xxh3_64(&c[..56]);
    c[56..64].copy_from_slice(&sum.to_le_bytes());
    c
}

/// Where the commit goes in the file.
pub(crate) const fn commit_offset() -> u64 {
    COMMIT_AT as u64
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"))
}

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"))
}

/// Checks the header page of raw file `seq`, `file_len` bytes long, and returns where its
/// record lies.
pub(crate) fn check_header_page(page: &[u8], seq: u32, file_len: u64) -> Result<Commit, Bad> {
    if page.len() < HEADER_PAGE as usize {
        return Err(Bad::Corrupt(format!(
            "truncated: raw file is {} bytes, its header page needs {HEADER_PAGE}",
            page.len()
        )));
    }
    if page[0..8] != MAGIC {
        return Err(Bad::Corrupt(format!(
            "raw header magic b\"{}\", expected b\"{}\"",
            page[0..8].escape_ascii(),
            MAGIC.escape_ascii()
        )));
    }
    let (got, expected) = (xxh3_64(&page[..24]), u64_at(page, 24));
    if got != expected {
        return Err(Bad::Corrupt(format!("raw header checksum {got:#018x}, expected {expected:#018x}")));
    }
    let version = u32_at(page, 8);
    if version != VERSION {
        return Err(Bad::Version(version));
    }
    if u32_at(page, 12) != 0 || u64_at(page, 16) != 0 {
        return Err(Bad::Corrupt("raw header: reserved fields are not zero".into()));
    }
    let c = &page[COMMIT_AT..COMMIT_AT + COMMIT_LEN];
    if c[0..8] != COMMIT_MAGIC {
        return Err(Bad::Corrupt("raw file was never committed (its capture did not finish)".into()));
    }
    let (got, expected) = (xxh3_64(&c[..56]), u64_at(c, 56));
    if got != expected {
        return Err(Bad::Corrupt(format!("raw commit checksum {got:#018x}, expected {expected:#018x}")));
    }
    let commit_seq = u32_at(c, 8);
    if commit_seq != seq {
        return Err(Bad::Corrupt(format!("raw commit says seq {commit_seq}, the file name says {seq}")));
    }
    if u32_at(c, 12) != 0 || u64_at(c, 48) != 0 {
        return Err(Bad::Corrupt("raw commit: reserved fields are not zero".into()));
    }
    let commit = Commit {
        slot_count: u64_at(c, 16),
        record_offset: u64_at(c, 24),
        record_len: u64_at(c, 32),
        record_checksum: u64_at(c, 40),
    };
    let data_end = commit.slot_count.checked_mul(PAGE_SIZE).and_then(|n| n.checked_add(HEADER_PAGE));
    if data_end != Some(commit.record_offset) {
        return Err(Bad::Corrupt(format!(
            "raw commit: record at {}, expected after {} slots",
            commit.record_offset, commit.slot_count
        )));
    }
    if commit.record_offset.checked_add(commit.record_len).is_none_or(|end| end > file_len) {
        return Err(Bad::Corrupt(format!(
            "truncated: raw file is {file_len} bytes, its record ends at {} + {}",
            commit.record_offset, commit.record_len
        )));
    }
    Ok(commit)
}

/// Checks and decodes the record of raw file `seq`, its metadata only `with_meta`.
pub(crate) fn decode_record(bytes: &[u8], seq: u32, commit: &Commit, with_meta: bool) -> Result<Record, Bad> {
    let got = xxh3_64(bytes);
    if got != commit.record_checksum {
        return Err(Bad::Corrupt(format!(
            "raw record checksum {got:#018x}, expected {:#018x}",
            commit.record_checksum
        )));
    }
    let mut rest = bytes;
    let copied = decode_spans(&mut rest, "copied")?;
    let unchanged = decode_spans(&mut rest, "unchanged")?;
    let slots: u64 = copied.iter().map(|s| s.pages).sum();
    if slots != commit.slot_count {
        return Err(Bad::Corrupt(format!(
            "raw record: copied runs hold {slots} pages, the data area {}",
            commit.slot_count
        )));
    }
    // Both lists ascend; merged, no page may be in both.
    let (mut i, mut j) = (0, 0);
    while i < copied.len() && j < unchanged.len() {
        let (c, u) = (copied[i], unchanged[j]);
        if c.first < u.end() && u.first < c.end() {
            return Err(Bad::Corrupt(format!(
                "raw record: page {:#x} is both copied and unchanged",
                c.first.max(u.first) * PAGE_SIZE
            )));
        }
        if c.end() <= u.first { i += 1 } else { j += 1 }
    }
    if !with_meta {
        return Ok(Record { copied, unchanged, meta: None });
    }
    let meta: SnapshotMeta = serde_json::from_slice(rest).map_err(|e| format!("raw record metadata: {e}"))?;
    if meta.seq != seq {
        return Err(Bad::Corrupt(format!("metadata says seq {}, the file {seq}", meta.seq)));
    }
    check_meta(&meta).map_err(|e| format!("metadata: {e}"))?;
    Ok(Record { copied, unchanged, meta: Some(meta) })
}

/// Decodes one list of spans from the front of `rest`: ascending, not overlapping,
/// inside the address space.
fn decode_spans(rest: &mut &[u8], what: &str) -> Result<Vec<PageSpan>, Bad> {
    let truncated = || Bad::Corrupt(format!("raw record: truncated in the {what} runs"));
    let (count, tail) = rest.split_first_chunk::<4>().ok_or_else(truncated)?;
    let count = u32::from_le_bytes(*count) as usize;
    if count > tail.len() / 16 {
        return Err(truncated());
    }
    let mut spans: Vec<PageSpan> = Vec::with_capacity(count);
    for k in 0..count {
        let at = k * 16;
        let span = PageSpan { first: u64_at(tail, at), pages: u64_at(tail, at + 8) };
        if span.pages == 0 || span.first.checked_add(span.pages).is_none_or(|end| end > MAX_PAGES) {
            return Err(Bad::Corrupt(format!(
                "raw record: {what} run {k} is empty or leaves the address space"
            )));
        }
        if spans.last().is_some_and(|prev| span.first < prev.end()) {
            return Err(Bad::Corrupt(format!(
                "raw record: {what} run {k} starts before the previous one ends"
            )));
        }
        spans.push(span);
    }
    *rest = &tail[count * 16..];
    Ok(spans)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(seq: u32) -> SnapshotMeta {
        let json = format!(
            r#"{{"name":"S{seq}","seq":{seq},"trigger":{{"kind":"timer"}},"time":{{"wall_ns":1,"since_start_ns":2}},
               "process":{{"pid":1,"ppid":0,"pgrp":1,"sid":1,"uid":0,"gid":0,"comm":"p","exe":"/p","cmdline":[],"cwd":"/"}},
               "threads":[],"mappings":[],"auxv":"","stats":{{}}}}"#
        );
        serde_json::from_str(&json).unwrap()
    }

    fn commit_for(record: &[u8], slot_count: u64) -> Commit {
        Commit {
            slot_count,
            record_offset: HEADER_PAGE + slot_count * PAGE_SIZE,
            record_len: record.len() as u64,
            record_checksum: xxh3_64(record),
        }
    }

    #[test]
    fn header_and_commit_round_trip() {
        let mut page = encode_header();
        let commit = Commit { slot_count: 2, record_offset: 3 * 4096, record_len: 10, record_checksum: 7 };
        assert!(
            matches!(check_header_page(&page, 5, 1 << 20), Err(Bad::Corrupt(d)) if d.contains("never committed"))
        );
        page[COMMIT_AT..].copy_from_slice(&encode_commit(5, &commit));
        assert_eq!(check_header_page(&page, 5, 3 * 4096 + 10), Ok(commit));
        assert!(matches!(check_header_page(&page, 6, 1 << 20), Err(Bad::Corrupt(d)) if d.contains("seq 5")));
        assert!(
            matches!(check_header_page(&page, 5, 3 * 4096 + 9), Err(Bad::Corrupt(d)) if d.starts_with("truncated"))
        );
        assert!(matches!(check_header_page(&page[..100], 5, 1 << 20), Err(Bad::Corrupt(_))));
        let mut bad = page.clone();
        bad[COMMIT_AT + 20] ^= 1;
        assert!(
            matches!(check_header_page(&bad, 5, 1 << 20), Err(Bad::Corrupt(d)) if d.contains("commit checksum"))
        );
    }

    #[test]
    fn record_spans_are_checked() {
        let meta = meta(3);
        let copied = [PageSpan { first: 0x10, pages: 2 }, PageSpan { first: 0x20, pages: 1 }];
        let unchanged = [PageSpan { first: 0x12, pages: 4 }];
        let record = encode_record(&copied, &unchanged, &meta);
        let decoded = decode_record(&record, 3, &commit_for(&record, 3), true).unwrap();
        assert_eq!(decoded.copied, copied);
        assert_eq!(decoded.unchanged, unchanged);
        assert_eq!(decoded.meta, Some(meta.clone()));
        let spans = decode_record(&record, 3, &commit_for(&record, 3), false).unwrap();
        assert_eq!((spans.copied, spans.unchanged, spans.meta), (copied.to_vec(), unchanged.to_vec(), None));
        assert!(
            matches!(decode_record(&record, 3, &commit_for(&record, 4), true), Err(Bad::Corrupt(d)) if d.contains("hold 3 pages"))
        );
        let overlap = encode_record(&copied, &[PageSpan { first: 0x11, pages: 1 }], &meta);
        assert!(
            matches!(decode_record(&overlap, 3, &commit_for(&overlap, 3), true), Err(Bad::Corrupt(d)) if d.contains("both"))
        );
        let backwards = encode_record(&[copied[1], copied[0]], &[], &meta);
        assert!(decode_record(&backwards, 3, &commit_for(&backwards, 3), true).is_err());
        let huge = encode_record(&[PageSpan { first: MAX_PAGES - 1, pages: 2 }], &[], &meta);
        assert!(decode_record(&huge, 3, &commit_for(&huge, 2), true).is_err());
        assert!(decode_record(&record[..5], 3, &commit_for(&record[..5], 3), true).is_err());
    }
}
