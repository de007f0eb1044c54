//! The replay record of a job, `mpi-replay` in its rank 0's run directory: the matches a
//! replay enforces ([`races::record`](crate::races::record)), written once the job's
//! history is complete. A replay's daemon reads it and hands every rank the same entries
//! in the fixed layout ([`write_fixed`]) as an inherited descriptor
//! (`SDT_MPI_REPLAY_FD`): the interposition library takes its own rank's entries (as
//! receiver and as sender) from it.
//!
//! Two layouts share the magic and the first header fields; [`read`] takes both:
//!
//! ```text
//! version 2 (stored):  header, 48 bytes │ zstd frame: the entries' columns
//! version 1 (fixed):   header, 40 bytes │ entries, 24 bytes each
//! ```
//!
//! Version 2 header (little-endian):
//!
//! ```text
//!  0  [u8; 8]  magic "SDTMPIRP"
//!  8  u32      version (VERSION)
//! 12  u32      ranks of the job
//! 16  u64      receives and wildcard probes the job made (what recording every match takes)
//! 24  u64      entries
//! 32  u64      bytes of a record of every match in this layout (0: not known)
//! 40  u64      bytes of the columns, decoded; at most MAX_COLUMNS_BYTES
//! 48  a zstd frame, with its checksum, to the end of the file
//! ```
//!
//! The frame holds the entries as columns of LEB128 varints, in `(rank, seq)` order,
//! each column a value per entry (groups: one per receiving rank):
//!
//! ```text
//! groups    count; then per group: its rank − (the previous group's rank + 1) (the
//!           first: its rank), its entries (≥ 1)
//! seq       seq − (the previous entry's seq + 1) in the group (the first: seq)
//! post      0: none; else seq − post (≥ 1)
//! source    the sender's rank
//! send      0: none (a probe); else 1 + zigzag(send − the group's previous send from
//!           the same source, 0 at first)
//! tag       zigzag(tag)
//! ```
//!
//! A sender's sends are numbered in its own order, and the messages one rank takes from
//! another mostly come in that order, so a send is stored as a small step from the last
//! one taken from the same source; columns keep alike values together for zstd. The
//! columns end where the frame ends.
//!
//! Version 1 header (little-endian), then the entries:
//!
//! ```text
//!  0  [u8; 8]  magic "SDTMPIRP"
//!  8  u32      version (FIXED_VERSION)
//! 12  u32      entry size (ENTRY_SIZE)
//! 16  u32      ranks of the job
//! 20  u32      0
//! 24  u64      receives and wildcard probes the job made (what recording every match takes)
//! 32  u64      entries
//! ```
//!
//! Entry (little-endian, 24 bytes):
//!
//! ```text
//!  0  u32  rank: the receiver
//!  4  u32  seq: the receive's event (RecvDone for a posted receive, Probe for a probe)
//!  8  u32  post: the Irecv of a posted receive (NONE otherwise)
//! 12  u32  source: the sender's rank
//! 16  u32  send: the sender's send event (NONE for a probe)
//! 20  i32  tag
//! ```
//!
//! Constraints a reader checks, in both layouts: `rank` and `source` below the job's
//! ranks; entries in strictly increasing `(rank, seq)` order; `post` below `seq`; `send`
//! not NONE when present; the file holds exactly the entries the header counts.

use std::collections::HashMap;

use crate::columns::{self, Varints, put, unzigzag, zigzag};
use crate::format::NONE;
use crate::races::{Enforced, Record};

/// The record's name in rank 0's run directory.
pub const REPLAY_FILE: &str = "mpi-replay";
/// The file's magic number.
pub const MAGIC: [u8; 8] = *b"SDTMPIRP";
/// The stored format version (not the crate's).
pub const VERSION: u32 = 2;
/// The fixed layout's version: the first stored format, and what the interposition
/// library reads.
pub const FIXED_VERSION: u32 = 1;
/// Bytes of the stored header.
pub const HEADER_SIZE: usize = 48;
/// Bytes of the fixed layout's header.
pub const FIXED_HEADER_SIZE: usize = 40;
/// Bytes of one entry in the fixed layout.
pub const ENTRY_SIZE: u32 = 24;
/// Largest decoded columns read: no file the writer makes comes near.
pub const MAX_COLUMNS_BYTES: u64 = 1 << 30;
/// Fewest bytes one entry takes in the columns (a varint in each of five).
const MIN_ENTRY_BYTES: u64 = 5;
/// The zstd level of the columns: the record is written once, and small is its point.
const ZSTD_LEVEL: i32 = 19;

/// Why a replay record cannot be read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum RecordError {
    /// The file is shorter than its header.
    #[error("the replay record has {bytes} bytes, less than its {header}-byte header")]
    FileTooSmallForHeader {
        /// The file's size.
        bytes: usize,
        /// The header's size.
        header: usize,
    },
    /// The file does not start with [`MAGIC`].
    #[error("the replay record starts with {0:02x?}, not the magic {MAGIC:02x?}")]
    WrongMagicBytes([u8; 8]),
    /// A format version before the first.
    #[error("the replay record has format version {0}, older than any sdt wrote")]
    VersionTooOld(u32),
    /// A format version newer than this reader's.
    #[error("the replay record has format version {0}, this sdt reads up to {VERSION}")]
    VersionTooNew(u32),
    /// The fixed header's entry size is not [`ENTRY_SIZE`].
    #[error("the replay record's entry size is {0}, expected {ENTRY_SIZE}")]
    EntrySize(u32),
    /// The file does not hold the entries the header counts.
    #[error("the replay record counts {count} entries in {bytes} bytes")]
    Length {
        /// The header's count.
        count: u64,
        /// The bytes that hold them (the file's, or the decoded columns').
        bytes: u64,
    },
    /// The compressed columns do not decode to what the header says.
    #[error("the replay record's entries: {0}")]
    Columns(String),
    /// An entry does not hold.
    #[error("replay record entry {index}: {detail}")]
    Entry {
        /// The entry's index.
        index: usize,
        /// What is wrong.
        detail: String,
    },
}

/// The stored file's bytes (version 2) for `record` of a job of `ranks` ranks.
pub fn write(record: &Record, ranks: u32) -> Vec<u8> {
    let columns = columns(&record.enforced);
    let frame = columns::compress(&columns, ZSTD_LEVEL);
    let mut out = Vec::with_capacity(HEADER_SIZE + frame.len());
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.extend_from_slice(&ranks.to_le_bytes());
    out.extend_from_slice(&record.receives.to_le_bytes());
    out.extend_from_slice(&(record.enforced.len() as u64).to_le_bytes());
    out.extend_from_slice(&record.every_match_bytes.unwrap_or(0).to_le_bytes());
    out.extend_from_slice(&(columns.len() as u64).to_le_bytes());
    out.extend_from_slice(&frame);
    out
}

/// The fixed layout's bytes (version 1) for `record` of a job of `ranks` ranks: what the
/// interposition library reads.
pub fn write_fixed(record: &Record, ranks: u32) -> Vec<u8> {
    let mut out = Vec::with_capacity(FIXED_HEADER_SIZE + record.enforced.len() * ENTRY_SIZE as usize);
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&FIXED_VERSION.to_le_bytes());
    out.extend_from_slice(&ENTRY_SIZE.to_le_bytes());
    out.extend_from_slice(&ranks.to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    out.extend_from_slice(&record.receives.to_le_bytes());
    out.extend_from_slice(&(record.enforced.len() as u64).to_le_bytes());
    for e in &record.enforced {
        for field in [e.rank, e.seq, e.post.unwrap_or(NONE), e.source, e.send.unwrap_or(NONE)] {
            out.extend_from_slice(&field.to_le_bytes());
        }
        out.extend_from_slice(&e.tag.to_le_bytes());
    }
    out
}

/// Reads a record back (either layout), with the job's ranks it was written for.
pub fn read(bytes: &[u8]) -> Result<(Record, u32), RecordError> {
    let header = |size: usize| {
        bytes.get(..size).ok_or(RecordError::FileTooSmallForHeader { bytes: bytes.len(), header: size })
    };
    let magic: [u8; 8] = header(12)?[..8].try_into().expect("8 bytes");
    if magic != MAGIC {
        return Err(RecordError::WrongMagicBytes(magic));
    }
    let (record, ranks) = match u32_at(bytes, 8) {
        FIXED_VERSION => read_fixed(header(FIXED_HEADER_SIZE)?, &bytes[FIXED_HEADER_SIZE..])?,
        VERSION => read_stored(header(HEADER_SIZE)?, &bytes[HEADER_SIZE..])?,
        v if v < FIXED_VERSION => return Err(RecordError::VersionTooOld(v)),
        v => return Err(RecordError::VersionTooNew(v)),
    };
    let mut previous: Option<&Enforced> = None;
    for (index, e) in record.enforced.iter().enumerate() {
        if e.rank >= ranks || e.source >= ranks {
            return Err(bad(index, format!("rank {} or source {} not below {ranks}", e.rank, e.source)));
        }
        if e.post.is_some_and(|p| p >= e.seq) {
            return Err(bad(index, format!("post {:?} is not before event {}", e.post, e.seq)));
        }
        if previous.is_some_and(|p| (p.rank, p.seq) >= (e.rank, e.seq)) {
            return Err(bad(index, format!("({}, {}) out of order", e.rank, e.seq)));
        }
        previous = Some(e);
    }
    Ok((record, ranks))
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"))
}

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"))
}

/// The entries of a fixed layout (`header`, then `body`), unchecked.
fn read_fixed(header: &[u8], body: &[u8]) -> Result<(Record, u32), RecordError> {
    let size = u32_at(header, 12);
    if size != ENTRY_SIZE {
        return Err(RecordError::EntrySize(size));
    }
    let count = u64_at(header, 32);
    if count.checked_mul(u64::from(ENTRY_SIZE)) != Some(body.len() as u64) {
        return Err(RecordError::Length { count, bytes: (header.len() + body.len()) as u64 });
    }
    let optional = |v: u32| (v != NONE).then_some(v);
    let enforced = body
        .chunks_exact(ENTRY_SIZE as usize)
        .map(|at| Enforced {
            rank: u32_at(at, 0),
            seq: u32_at(at, 4),
            post: optional(u32_at(at, 8)),
            source: u32_at(at, 12),
            send: optional(u32_at(at, 16)),
            tag: u32_at(at, 20) as i32,
        })
        .collect();
    Ok((Record { enforced, receives: u64_at(header, 24), every_match_bytes: None }, u32_at(header, 16)))
}

/// The entries of a stored record (`header`, then the zstd frame), unchecked.
fn read_stored(header: &[u8], frame: &[u8]) -> Result<(Record, u32), RecordError> {
    let (ranks, count, size) = (u32_at(header, 12), u64_at(header, 24), u64_at(header, 40));
    if size > MAX_COLUMNS_BYTES {
        return Err(RecordError::Columns(format!(
            "{size} bytes decoded, more than the {MAX_COLUMNS_BYTES} a record may hold"
        )));
    }
    if count.checked_mul(MIN_ENTRY_BYTES).is_none_or(|least| least > size) {
        return Err(RecordError::Length { count, bytes: size });
    }
    let columns = columns::decompress(frame, size).map_err(RecordError::Columns)?;
    let record = Record {
        enforced: entries(&columns, count, ranks)?,
        receives: u64_at(header, 16),
        every_match_bytes: Some(u64_at(header, 32)).filter(|&b| b != 0),
    };
    Ok((record, ranks))
}

/// The columns of `enforced`, as the module doc lays them out. `enforced` holds the
/// constraints a reader checks, as [`races::record`](crate::races::record) makes it.
fn columns(enforced: &[Enforced]) -> Vec<u8> {
    let (mut groups, mut count) = (Vec::new(), 0);
    let [mut seqs, mut posts, mut sources, mut sends, mut tags] = Default::default();
    let mut next_rank = 0;
    for group in enforced.chunk_by(|a, b| a.rank == b.rank) {
        put(&mut groups, u64::from(group[0].rank - next_rank));
        put(&mut groups, group.len() as u64);
        (next_rank, count) = (group[0].rank + 1, count + 1);
        let mut next_seq = 0;
        let mut last_send = HashMap::new();
        for e in group {
            put(&mut seqs, u64::from(e.seq) - next_seq);
            next_seq = u64::from(e.seq) + 1;
            put(&mut posts, e.post.map_or(0, |post| u64::from(e.seq - post)));
            put(&mut sources, u64::from(e.source));
            let step = e.send.map_or(0, |send| {
                let last = last_send.insert(e.source, send).unwrap_or(0);
                1 + zigzag(i64::from(send) - i64::from(last))
            });
            put(&mut sends, step);
            put(&mut tags, zigzag(i64::from(e.tag)));
        }
    }
    let mut out = Vec::new();
    put(&mut out, count);
    for column in [groups, seqs, posts, sources, sends, tags] {
        out.extend_from_slice(&column);
    }
    out
}

/// The `count` entries of `columns` (the module doc's layout) for a job of `ranks` ranks,
/// checked as far as decoding needs.
fn entries(columns: &[u8], count: u64, ranks: u32) -> Result<Vec<Enforced>, RecordError> {
    let mut at = Varints::new(columns);
    let groups = take(&mut at, "the number of groups")?;
    if groups > count {
        return Err(RecordError::Columns(format!("{groups} groups of {count} entries")));
    }
    // `count` is at most a fifth of the columns' bytes, which are all decoded.
    let mut enforced = Vec::with_capacity(count as usize);
    let mut next_rank = 0;
    for _ in 0..groups {
        let rank = take(&mut at, "a group's rank")?.saturating_add(next_rank);
        let len = take(&mut at, "a group's length")?;
        let left = count - enforced.len() as u64;
        if rank >= u64::from(ranks) || len == 0 || len > left {
            return Err(RecordError::Columns(format!(
                "a group of {len} entries of rank {rank} ({ranks} ranks, {left} entries left)"
            )));
        }
        let blank = Enforced { rank: rank as u32, seq: 0, post: None, source: 0, send: None, tag: 0 };
        enforced.extend(std::iter::repeat_n(blank, len as usize));
        next_rank = rank + 1;
    }
    if enforced.len() as u64 != count {
        return Err(RecordError::Columns(format!("groups of {} entries, {count} counted", enforced.len())));
    }
    let starts_group = |e: &[Enforced], i: usize| i == 0 || e[i - 1].rank != e[i].rank;
    let mut next_seq = 0;
    for i in 0..enforced.len() {
        if starts_group(&enforced, i) {
            next_seq = 0;
        }
        let seq = field(&mut at, i, "seq")?.saturating_add(next_seq);
        enforced[i].seq = u32::try_from(seq).map_err(|_| bad(i, format!("seq {seq} is not a u32")))?;
        next_seq = seq + 1;
    }
    for (i, e) in enforced.iter_mut().enumerate() {
        let back = field(&mut at, i, "post")?;
        e.post = match u32::try_from(back) {
            Ok(0) => None,
            Ok(back) if back <= e.seq => Some(e.seq - back),
            _ => return Err(bad(i, format!("post {back} events before seq {} is before the first", e.seq))),
        };
    }
    for (i, e) in enforced.iter_mut().enumerate() {
        let source = field(&mut at, i, "source")?;
        e.source = u32::try_from(source).map_err(|_| bad(i, format!("source {source} is not a u32")))?;
    }
    let mut last_send = HashMap::new();
    for i in 0..enforced.len() {
        if starts_group(&enforced, i) {
            last_send.clear();
        }
        let e = &mut enforced[i];
        let step = field(&mut at, i, "send")?;
        if step == 0 {
            continue;
        }
        let last: &mut u32 = last_send.entry(e.source).or_default();
        let send = i64::from(*last).saturating_add(unzigzag(step - 1));
        let send = u32::try_from(send)
            .ok()
            .filter(|&s| s != NONE)
            .ok_or_else(|| bad(i, format!("send {send} is not below {NONE}")))?;
        (*last, e.send) = (send, Some(send));
    }
    for (i, e) in enforced.iter_mut().enumerate() {
        let tag = unzigzag(field(&mut at, i, "tag")?);
        e.tag = i32::try_from(tag).map_err(|_| bad(i, format!("tag {tag} is not an i32")))?;
    }
    match at.left() {
        0 => Ok(enforced),
        left => Err(RecordError::Columns(format!("{left} bytes after the last column"))),
    }
}

/// Entry `index` does not hold: `detail`.
fn bad(index: usize, detail: String) -> RecordError {
    RecordError::Entry { index, detail }
}

/// The next varint of `at`: `what` names it when the columns end inside it or it
/// overflows.
fn take(at: &mut Varints, what: &str) -> Result<u64, RecordError> {
    at.next().map_err(|why| RecordError::Columns(format!("{what}: {why}")))
}

/// The next varint of `at`, a field of entry `index`.
fn field(at: &mut Varints, index: usize, what: &str) -> Result<u64, RecordError> {
    at.next().map_err(|why| bad(index, format!("{what}: {why}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Record {
        Record {
            enforced: vec![
                Enforced { rank: 0, seq: 3, post: None, source: 2, send: Some(1), tag: 0 },
                Enforced { rank: 0, seq: 7, post: Some(5), source: 1, send: Some(4), tag: -1 },
                Enforced { rank: 1, seq: 2, post: None, source: 0, send: None, tag: 9 },
            ],
            receives: 12,
            every_match_bytes: Some(100),
        }
    }

    #[test]
    fn a_record_reads_back() {
        assert_eq!(read(&write(&sample(), 3)), Ok((sample(), 3)));
        let fixed = write_fixed(&sample(), 3);
        assert_eq!(fixed.len(), FIXED_HEADER_SIZE + 3 * ENTRY_SIZE as usize);
        let unsized_sample = Record { every_match_bytes: None, ..sample() };
        assert_eq!(read(&fixed), Ok((unsized_sample.clone(), 3)));
        assert_eq!(read(&write(&unsized_sample, 3)), Ok((unsized_sample, 3)));
        let empty = Record::default();
        assert_eq!(read(&write(&empty, 1)), Ok((empty, 1)));
    }

    #[test]
    fn the_columns_are_laid_out_as_documented() {
        #[rustfmt::skip]
        let expected = [
            2, 0, 2, 0, 1,  // groups: rank 0 (2 entries), rank 1 (1)
            3, 3, 2,        // seq: 3, 7 = 3 + 1 + 3, 2
            0, 2, 0,        // post: none, 7 − 2, none
            2, 1, 0,        // source
            3, 9, 0,        // send: 1 + zigzag(1 − 0), 1 + zigzag(4 − 0), none
            0, 1, 18,       // tag: zigzag(0), zigzag(−1), zigzag(9)
        ];
        assert_eq!(columns(&sample().enforced), expected);
    }

    #[test]
    fn sends_are_steps_from_the_last_send_of_their_source() {
        let entry = |seq, source, send| Enforced { rank: 0, seq, post: None, source, send, tag: 0 };
        let enforced =
            [entry(1, 1, Some(10)), entry(2, 2, Some(3)), entry(3, 1, Some(12)), entry(4, 1, Some(11))];
        let sends = &columns(&enforced)[1 + 2 + 3 * 4..][..4];
        // 10 − 0, 3 − 0, 12 − 10, 11 − 12.
        assert_eq!(sends, [1 + 20, 1 + 6, 1 + 4, 1 + 1]);
        let record = Record { enforced: enforced.to_vec(), receives: 4, every_match_bytes: None };
        assert_eq!(read(&write(&record, 3)).unwrap().0, record);
    }

    #[test]
    fn a_version_1_file_reads() {
        #[rustfmt::skip]
        let file = [
            b'S', b'D', b'T', b'M', b'P', b'I', b'R', b'P',
            1, 0, 0, 0,  24, 0, 0, 0,  2, 0, 0, 0,  0, 0, 0, 0,  // version, entry size, ranks
            5, 0, 0, 0, 0, 0, 0, 0,  1, 0, 0, 0, 0, 0, 0, 0,     // receives, entries
            1, 0, 0, 0,  9, 0, 0, 0,  4, 0, 0, 0,                // rank, seq, post
            0, 0, 0, 0,  0xff, 0xff, 0xff, 0xff,  7, 0, 0, 0,    // source, send (NONE), tag
        ];
        let entry = Enforced { rank: 1, seq: 9, post: Some(4), source: 0, send: None, tag: 7 };
        let record = Record { enforced: vec![entry], receives: 5, every_match_bytes: None };
        assert_eq!(read(&file), Ok((record.clone(), 2)));
        assert_eq!(write_fixed(&record, 2), file);
    }

    #[test]
    fn damaged_records_are_refused() {
        let bytes = write(&sample(), 3);
        assert_eq!(read(&bytes[..10]), Err(RecordError::FileTooSmallForHeader { bytes: 10, header: 12 }));
        assert_eq!(read(&bytes[..40]), Err(RecordError::FileTooSmallForHeader { bytes: 40, header: 48 }));
        let mut wrong = bytes.clone();
        wrong[8] = 9;
        assert_eq!(read(&wrong), Err(RecordError::VersionTooNew(9)));
        wrong[8] = 0;
        assert_eq!(read(&wrong), Err(RecordError::VersionTooOld(0)));
        wrong[..8].copy_from_slice(b"SDTMPIEV");
        assert_eq!(read(&wrong), Err(RecordError::WrongMagicBytes(*b"SDTMPIEV")));
        assert!(matches!(read(&write(&sample(), 2)), Err(RecordError::Entry { index: 0, .. })));
        let mut swapped = sample();
        swapped.enforced.swap(0, 1);
        assert!(matches!(read(&write(&swapped, 3)), Err(RecordError::Entry { index: 1, .. })));
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(matches!(read(&longer), Err(RecordError::Columns(_))));
        let fixed = write_fixed(&sample(), 3);
        assert!(matches!(read(&fixed[..fixed.len() - 1]), Err(RecordError::Length { .. })));
    }

    /// `bytes` with the header's u64 at `at` set to `v`.
    fn with_u64(bytes: &[u8], at: usize, v: u64) -> Vec<u8> {
        let mut out = bytes.to_vec();
        out[at..at + 8].copy_from_slice(&v.to_le_bytes());
        out
    }

    #[test]
    fn header_counts_are_bounded_before_anything_is_allocated() {
        let bytes = write(&sample(), 3);
        let huge = read(&with_u64(&bytes, 40, u64::MAX));
        assert!(matches!(huge, Err(RecordError::Columns(ref m)) if m.contains("more than")), "{huge:?}");
        let claimed = read(&with_u64(&bytes, 40, MAX_COLUMNS_BYTES));
        assert!(
            matches!(claimed, Err(RecordError::Columns(ref m)) if m.contains("the header says")),
            "{claimed:?}"
        );
        assert!(matches!(read(&with_u64(&bytes, 24, u64::MAX)), Err(RecordError::Length { .. })));
        assert!(matches!(read(&with_u64(&bytes, 24, 2)), Err(RecordError::Columns(_))));
        assert!(matches!(
            read(&with_u64(&write_fixed(&sample(), 3), 32, u64::MAX)),
            Err(RecordError::Length { .. })
        ));
    }

    #[test]
    fn every_cut_and_every_flipped_byte_is_an_error_or_a_valid_record() {
        let record = Record {
            enforced: (0..40)
                .map(|i| Enforced {
                    rank: i / 10,
                    seq: 3 * i,
                    post: None,
                    source: 3 - i / 10,
                    send: Some(i),
                    tag: 2,
                })
                .collect(),
            receives: 90,
            every_match_bytes: Some(1000),
        };
        for bytes in [write(&record, 4), write_fixed(&record, 4)] {
            for len in 0..bytes.len() {
                assert!(read(&bytes[..len]).is_err(), "cut at {len}");
            }
            for at in 0..bytes.len() {
                for bit in 0..8 {
                    let mut flipped = bytes.clone();
                    flipped[at] ^= 1 << bit;
                    // The frame's checksum catches a flip in the columns.
                    if let Ok((again, ranks)) = read(&flipped) {
                        assert_eq!(read(&write(&again, ranks)), Ok((again, ranks)));
                    }
                }
            }
        }
    }

    /// Records that hold the constraints a reader checks, and the job's ranks.
    fn records() -> impl proptest::strategy::Strategy<Value = (Record, u32)> {
        use proptest::prelude::*;
        let entry = (0..6u32, 0..40u32, any::<bool>(), 0..6u32, any::<Option<u32>>(), any::<i32>());
        (1..7u32, proptest::collection::vec(entry, 0..60), any::<u64>(), any::<Option<u64>>()).prop_map(
            |(ranks, entries, receives, every)| {
                let mut enforced: Vec<Enforced> = entries
                    .into_iter()
                    .map(|(rank, seq, posted, source, send, tag)| Enforced {
                        rank: rank % ranks,
                        // Spread over the whole u32 range too.
                        seq: if seq % 7 == 0 { u32::MAX - seq } else { seq * 1000 },
                        post: (posted && seq > 0).then_some(seq / 2),
                        source: source % ranks,
                        send: send.map(|s| s.min(NONE - 1)),
                        tag,
                    })
                    .collect();
                enforced.sort();
                enforced.dedup_by_key(|e| (e.rank, e.seq));
                let every_match_bytes = every.filter(|&b| b != 0);
                (Record { enforced, receives, every_match_bytes }, ranks)
            },
        )
    }

    proptest::proptest! {
        #[test]
        fn any_record_reads_back((record, ranks) in records()) {
            proptest::prop_assert_eq!(read(&write(&record, ranks)), Ok((record.clone(), ranks)));
            let fixed = Record { every_match_bytes: None, ..record.clone() };
            proptest::prop_assert_eq!(read(&write_fixed(&record, ranks)), Ok((fixed, ranks)));
        }
    }
}
