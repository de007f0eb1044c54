//! The replay record of a job, `mpi-replay` in its rank 0's run directory: the matches a
//! replay enforces ([`races::record`](crate::races::record)), written once the job's
//! history is complete, and handed to every rank of a replay as an inherited descriptor
//! (`SDT_MPI_REPLAY_FD`): the interposition library takes its own rank's entries (as
//! receiver and as sender) from it.
//!
//! ```text
//! offset 0    header, 40 bytes
//! offset 40   entries, 24 bytes each, in (rank, seq) order
//! ```
//!
//! Header (little-endian):
//!
//! ```text
//!  0  [u8; 8]  magic "SDTMPIRP"
//!  8  u32      version (VERSION)
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
//! Constraints a reader checks: `rank` and `source` below the job's ranks; entries in
//! strictly increasing `(rank, seq)` order; `post` below `seq`; the file holds exactly
//! the entries the header counts.

use crate::format::NONE;
use crate::races::{Enforced, Record};

/// The record's name in rank 0's run directory.
pub const REPLAY_FILE: &str = "mpi-replay";
/// The file's magic number.
pub const MAGIC: [u8; 8] = *b"SDTMPIRP";
/// The format version (not the crate's).
pub const VERSION: u32 = 1;
/// Bytes of the header.
pub const HEADER_SIZE: usize = 40;
/// Bytes of one entry.
pub const ENTRY_SIZE: u32 = 24;

/// Why a replay record cannot be read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum RecordError {
    /// The file is shorter than its header.
    #[error("the replay record has {0} bytes, less than its {HEADER_SIZE}-byte header")]
    FileTooSmallForHeader(usize),
    /// The file does not start with [`MAGIC`].
    #[error("the replay record starts with {0:02x?}, not the magic {MAGIC:02x?}")]
    WrongMagicBytes([u8; 8]),
    /// Another format version than this reader's.
    #[error("the replay record has format version {0}, this sdt reads {VERSION}")]
    Version(u32),
    /// The header's entry size is not [`ENTRY_SIZE`].
    #[error("the replay record's entry size is {0}, expected {ENTRY_SIZE}")]
    EntrySize(u32),
    /// The file does not hold the entries the header counts.
    #[error("the replay record counts {count} entries in {bytes} bytes")]
    Length {
        /// The header's count.
        count: u64,
        /// The file's size.
        bytes: usize,
    },
    /// An entry does not hold.
    #[error("replay record entry {index}: {detail}")]
    Entry {
        /// The entry's index.
        index: usize,
        /// What is wrong.
        detail: String,
    },
}

/// The file's bytes for `record` of a job of `ranks` ranks.
pub fn write(record: &Record, ranks: u32) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_SIZE + record.enforced.len() * ENTRY_SIZE as usize);
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
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

/// Reads a record back, with the job's ranks it was written for.
pub fn read(bytes: &[u8]) -> Result<(Record, u32), RecordError> {
    let u32_at = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
    let u64_at = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
    if bytes.len() < HEADER_SIZE {
        return Err(RecordError::FileTooSmallForHeader(bytes.len()));
    }
    let magic: [u8; 8] = bytes[..8].try_into().expect("8 bytes");
    if magic != MAGIC {
        return Err(RecordError::WrongMagicBytes(magic));
    }
    match (u32_at(8), u32_at(12)) {
        (VERSION, ENTRY_SIZE) => {}
        (VERSION, size) => return Err(RecordError::EntrySize(size)),
        (version, _) => return Err(RecordError::Version(version)),
    }
    let ranks = u32_at(16);
    let count = u64_at(32);
    let body = bytes.len() - HEADER_SIZE;
    if count.checked_mul(u64::from(ENTRY_SIZE)) != Some(body as u64) {
        return Err(RecordError::Length { count, bytes: bytes.len() });
    }
    let mut record = Record { enforced: Vec::with_capacity(count as usize), receives: u64_at(24) };
    for index in 0..count as usize {
        let at = HEADER_SIZE + index * ENTRY_SIZE as usize;
        let optional = |v: u32| (v != NONE).then_some(v);
        let e = Enforced {
            rank: u32_at(at),
            seq: u32_at(at + 4),
            post: optional(u32_at(at + 8)),
            source: u32_at(at + 12),
            send: optional(u32_at(at + 16)),
            tag: u32_at(at + 20) as i32,
        };
        let bad = |detail: String| RecordError::Entry { index, detail };
        if e.rank >= ranks || e.source >= ranks {
            return Err(bad(format!("rank {} or source {} not below {ranks}", e.rank, e.source)));
        }
        if e.post.is_some_and(|p| p >= e.seq) {
            return Err(bad(format!("post {:?} is not before event {}", e.post, e.seq)));
        }
        if let Some(last) = record.enforced.last()
            && (last.rank, last.seq) >= (e.rank, e.seq)
        {
            return Err(bad(format!("({}, {}) out of order", e.rank, e.seq)));
        }
        record.enforced.push(e);
    }
    Ok((record, ranks))
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
        }
    }

    #[test]
    fn a_record_reads_back() {
        let bytes = write(&sample(), 3);
        assert_eq!(bytes.len(), HEADER_SIZE + 3 * ENTRY_SIZE as usize);
        assert_eq!(read(&bytes), Ok((sample(), 3)));
    }

    #[test]
    fn damaged_records_are_refused() {
        let bytes = write(&sample(), 3);
        assert_eq!(read(&bytes[..10]), Err(RecordError::FileTooSmallForHeader(10)));
        assert!(matches!(read(&bytes[..bytes.len() - 1]), Err(RecordError::Length { .. })));
        let mut wrong = bytes.clone();
        wrong[8] = 9;
        assert_eq!(read(&wrong), Err(RecordError::Version(9)));
        assert!(matches!(read(&write(&sample(), 2)), Err(RecordError::Entry { index: 0, .. })));
        let mut swapped = sample();
        swapped.enforced.swap(0, 1);
        assert!(matches!(read(&write(&swapped, 3)), Err(RecordError::Entry { index: 1, .. })));
    }
}
