//! The packed form of `mpi-events`: what a rank's `sdt run` leaves in place of the
//! library's fixed 32-byte records once the rank has ended (the file keeps its name, and
//! is replaced whole by a rename). Readers take either form: [`unpack`] gives back the
//! library's file, byte for byte.
//!
//! ```text
//!  0  [u8; 8]  magic "SDTMPIPK"
//!  8  u32      version (VERSION)
//! 12  u32      records per block (BLOCK_RECORDS)
//! 16  [u8; 64] the first 64 bytes of the library's header (the rest of its page is zero)
//! 80  blocks of the header's count of records, BLOCK_RECORDS each (the last: the rest):
//!       u32 bytes of the frame, u32 bytes of the columns it decodes to, a zstd frame
//!       with its checksum
//! ```
//!
//! A block's frame holds its records as columns, a value per record in each, in record
//! order (LEB128 varints but the first two):
//!
//! ```text
//! kind      a byte
//! flags     a byte
//! comm      the communicator
//! peer      zigzag(peer)
//! tag       zigzag(tag)
//! bytes     the bytes
//! matched   0: none; else 1 + zigzag(matched − the block's last matched of that peer, 0 at first)
//! post      0: none; else 1 + zigzag(seq − post)
//! site      0: none; else 1 + site
//! time      zigzag(time − the block's previous time, 0 at first)
//! ```
//!
//! A message history is mostly the same few calls in a loop: the columns shrink to a
//! byte or two a record, against 32. Blocks keep the memory packing and unpacking take
//! to one block's, and a damaged file to the block it damages.

use crate::columns::{self, Varints, put, unzigzag, zigzag};
use crate::format::{
    FormatError, HEADER_SIZE, MAGIC as RAW_MAGIC, NONE, RECORD_SIZE, VERSION as RAW_VERSION,
};

/// The packed file's magic number.
pub const MAGIC: [u8; 8] = *b"SDTMPIPK";
/// The packed layout's version.
pub const VERSION: u32 = 1;
/// Records in a block.
pub const BLOCK_RECORDS: u32 = 1 << 16;
/// Bytes before the first block.
const HEADER_LEN: usize = 80;
/// Bytes of the library's header kept: every field it writes.
const RAW_HEADER_KEPT: usize = 64;
/// Most bytes one record takes in the columns: two bytes and eight varints, none wider
/// than five bytes (a u32, or 1 + zigzag of a step between two of them).
const MAX_RECORD_COLUMN_BYTES: u64 = 2 + 8 * 5;
/// zstd's level: packing runs once, as the rank ends, on a few megabytes.
const ZSTD_LEVEL: i32 = 3;

/// Whether `events` is an events file in the packed form.
pub fn is_packed(events: &[u8]) -> bool {
    events.starts_with(&MAGIC)
}

/// The records an events file of either form counts, from its header, unchecked; `None`
/// when it holds no header (the rank has not called `MPI_Init`).
pub fn recorded(events: &[u8]) -> Option<u64> {
    match is_packed(events) {
        true => crate::format::count(events.get(16..)?),
        false => crate::format::count(events),
    }
}

/// The packed form of a library's events file, which `read_at(buffer, offset)` reads
/// (filling the whole buffer or failing): its header page and the records the header
/// counts, at most `max_records`. `Ok(None)` when the file is not one this packs whole
/// (another magic, version or record size, bytes in the header page past the fields,
/// too many records): it is then left as it is.
pub fn pack(
    read_at: impl Fn(&mut [u8], u64) -> std::io::Result<()>,
    max_records: u64,
) -> std::io::Result<Option<Vec<u8>>> {
    pack_blocks(read_at, max_records, BLOCK_RECORDS)
}

/// [`pack`] in blocks of `per_block` records.
fn pack_blocks(
    read_at: impl Fn(&mut [u8], u64) -> std::io::Result<()>,
    max_records: u64,
    per_block: u32,
) -> std::io::Result<Option<Vec<u8>>> {
    let mut page = vec![0; HEADER_SIZE as usize];
    read_at(&mut page, 0)?;
    let u32_at = |at: usize| u32::from_le_bytes(page[at..at + 4].try_into().expect("4 bytes"));
    let Some(count) = crate::format::count(&page) else { return Ok(None) };
    if u32_at(8) != RAW_VERSION
        || u32_at(12) != RECORD_SIZE
        || count > max_records
        || page[RAW_HEADER_KEPT..].iter().any(|&b| b != 0)
    {
        return Ok(None);
    }
    let mut out = Vec::with_capacity(HEADER_LEN);
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.extend_from_slice(&per_block.to_le_bytes());
    out.extend_from_slice(&page[..RAW_HEADER_KEPT]);
    let mut records = Vec::new();
    let mut first = 0;
    while first < count {
        let n = (count - first).min(u64::from(per_block));
        records.resize(n as usize * RECORD_SIZE as usize, 0);
        read_at(&mut records, HEADER_SIZE + first * u64::from(RECORD_SIZE))?;
        let columns = block_columns(&records, first);
        let frame = columns::compress(&columns, ZSTD_LEVEL);
        out.extend_from_slice(&(frame.len() as u32).to_le_bytes());
        out.extend_from_slice(&(columns.len() as u32).to_le_bytes());
        out.extend_from_slice(&frame);
        first += n;
    }
    Ok(Some(out))
}

/// The fields of a record (32 bytes).
struct Raw<'a>(&'a [u8]);

impl Raw<'_> {
    fn u32(&self, at: usize) -> u32 {
        u32::from_le_bytes(self.0[at..at + 4].try_into().expect("4 bytes"))
    }
}

/// The columns of one block of records (`records`, whole records, the first being
/// record `first`).
fn block_columns(records: &[u8], first: u64) -> Vec<u8> {
    let records: Vec<Raw> = records.chunks_exact(RECORD_SIZE as usize).map(Raw).collect();
    let mut out = Vec::with_capacity(records.len() * 16);
    out.extend(records.iter().map(|r| r.0[0]));
    out.extend(records.iter().map(|r| r.0[1]));
    for r in &records {
        put(&mut out, u64::from(u16::from_le_bytes([r.0[2], r.0[3]])));
    }
    for at in [4, 8] {
        for r in &records {
            put(&mut out, zigzag(i64::from(r.u32(at) as i32)));
        }
    }
    for r in &records {
        put(&mut out, u64::from(r.u32(12)));
    }
    let mut last_matched = std::collections::HashMap::new();
    for r in &records {
        let matched = r.u32(16);
        let step = match matched {
            NONE => 0,
            m => 1 + zigzag(i64::from(m) - i64::from(last_matched.insert(r.u32(4), m).unwrap_or(0))),
        };
        put(&mut out, step);
    }
    for (seq, r) in (first..).zip(&records) {
        let back = match r.u32(20) {
            NONE => 0,
            post => 1 + zigzag(seq as i64 - i64::from(post)),
        };
        put(&mut out, back);
    }
    for r in &records {
        put(
            &mut out,
            match r.u32(24) {
                NONE => 0,
                site => 1 + u64::from(site),
            },
        );
    }
    let mut previous = 0;
    for r in &records {
        let time = r.u32(28);
        put(&mut out, zigzag(i64::from(time) - i64::from(previous)));
        previous = time;
    }
    out
}

/// The library's events file that `packed` holds (its header page, then the header's
/// count of records, at most `max_records`), checked as far as decoding needs: the
/// records' own constraints are [`read_rank`](crate::format::read_rank)'s to check.
pub fn unpack(packed: &[u8], max_records: u64) -> Result<Vec<u8>, FormatError> {
    let damaged = |why: String| FormatError::Packed(why);
    let header = packed
        .get(..HEADER_LEN)
        .ok_or_else(|| damaged(format!("{} bytes, less than the {HEADER_LEN}-byte header", packed.len())))?;
    let u32_at = |bytes: &[u8], at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
    if header[..8] != MAGIC {
        return Err(damaged(format!("it starts with {:02x?}, not {MAGIC:02x?}", &header[..8])));
    }
    match u32_at(header, 8) {
        VERSION => {}
        v => return Err(damaged(format!("version {v}; this sdt reads version {VERSION}"))),
    }
    let per_block = u32_at(header, 12);
    if per_block == 0 || per_block > BLOCK_RECORDS {
        return Err(damaged(format!("{per_block} records a block")));
    }
    let raw_header = &header[16..16 + RAW_HEADER_KEPT];
    if raw_header[..8] != RAW_MAGIC
        || u32_at(raw_header, 8) != RAW_VERSION
        || u32_at(raw_header, 12) != RECORD_SIZE
    {
        return Err(damaged(format!("the library's header it keeps is not one of version {RAW_VERSION}")));
    }
    let count = crate::format::count(raw_header).expect("a header with the magic");
    if count > max_records {
        return Err(damaged(format!("{count} records, more than the {max_records} read")));
    }
    // The output grows only as blocks decode: a count the blocks do not back allocates
    // no more than they do.
    let mut out = vec![0; HEADER_SIZE as usize];
    out[..RAW_HEADER_KEPT].copy_from_slice(raw_header);
    let mut at = HEADER_LEN;
    let mut first = 0;
    while first < count {
        let n = (count - first).min(u64::from(per_block));
        let block = |why: String| damaged(format!("the block of records {first}..{}: {why}", first + n));
        let sizes = packed.get(at..at + 8).ok_or_else(|| block("the file ends before it".into()))?;
        let (frame_len, size) = (u32_at(sizes, 0) as usize, u64::from(u32_at(sizes, 4)));
        if size > n * MAX_RECORD_COLUMN_BYTES {
            return Err(block(format!("{size} bytes of columns for {n} records")));
        }
        let frame =
            packed.get(at + 8..at + 8 + frame_len).ok_or_else(|| block("the file ends inside it".into()))?;
        let columns = columns::decompress(frame, size).map_err(block)?;
        records_of(&columns, first, n, &mut out).map_err(block)?;
        at += 8 + frame_len;
        first += n;
    }
    if at != packed.len() {
        return Err(damaged(format!("{} bytes after the last block", packed.len() - at)));
    }
    Ok(out)
}

/// Appends to `out` the `n` records (from record `first`) that `columns` holds.
fn records_of(columns: &[u8], first: u64, n: u64, out: &mut Vec<u8>) -> Result<(), String> {
    let mut at = Varints::new(columns);
    // One column: a value per record, from `value(record's index in the block, at)`.
    let mut column = |what: &str, value: &mut dyn FnMut(usize, &mut Varints) -> Result<u32, String>| {
        (0..n as usize)
            .map(|i| value(i, &mut at).map_err(|why| format!("record {}, {what}: {why}", first + i as u64)))
            .collect::<Result<Vec<u32>, String>>()
    };
    let fit = |v: i64| u32::try_from(v).map_err(|_| format!("{v} is not a u32"));
    let below_none = |v: u32| if v == NONE { Err(format!("{v} is not below {NONE}")) } else { Ok(v) };
    let signed = |v: u64| {
        let v = unzigzag(v);
        i32::try_from(v).map(|v| v as u32).map_err(|_| format!("{v} is not an i32"))
    };
    let kinds = column("kind", &mut |_, at| Ok(at.byte()?.into()))?;
    let flags = column("flags", &mut |_, at| Ok(at.byte()?.into()))?;
    let comms = column("comm", &mut |_, at| {
        let comm = at.next()?;
        u16::try_from(comm).map(u32::from).map_err(|_| format!("{comm} is not a u16"))
    })?;
    let peers = column("peer", &mut |_, at| signed(at.next()?))?;
    let tags = column("tag", &mut |_, at| signed(at.next()?))?;
    let bytes = column("bytes", &mut |_, at| fit(at.next()?.try_into().unwrap_or(i64::MAX)))?;
    let mut last_matched = std::collections::HashMap::new();
    let matched = column("matched", &mut |i, at| match at.next()? {
        0 => Ok(NONE),
        step => {
            let last = last_matched.entry(peers[i]).or_insert(0);
            *last = below_none(fit(i64::from(*last).saturating_add(unzigzag(step - 1)))?)?;
            Ok(*last)
        }
    })?;
    let posts = column("post", &mut |i, at| match at.next()? {
        0 => Ok(NONE),
        back => below_none(fit((first as i64 + i as i64).saturating_sub(unzigzag(back - 1)))?),
    })?;
    let sites = column("site", &mut |_, at| match at.next()? {
        0 => Ok(NONE),
        v => below_none(fit((v - 1).try_into().unwrap_or(i64::MAX))?),
    })?;
    let mut previous: u32 = 0;
    let times = column("time", &mut |_, at| {
        previous = fit(i64::from(previous).saturating_add(unzigzag(at.next()?)))?;
        Ok(previous)
    })?;
    if at.left() > 0 {
        return Err(format!("{} bytes after the last column", at.left()));
    }
    for i in 0..n as usize {
        out.extend_from_slice(&[kinds[i] as u8, flags[i] as u8]);
        out.extend_from_slice(&(comms[i] as u16).to_le_bytes());
        for field in [peers[i], tags[i], bytes[i], matched[i], posts[i], sites[i], times[i]] {
            out.extend_from_slice(&field.to_le_bytes());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::format::{read_rank, write_rank};
    use crate::model::{Event, EventKind, RankHistory};

    /// Reads `raw` as `pack` reads a file.
    fn read_from(raw: &[u8]) -> impl Fn(&mut [u8], u64) -> std::io::Result<()> + '_ {
        move |buffer, at| {
            let bytes =
                raw.get(at as usize..at as usize + buffer.len()).ok_or(std::io::ErrorKind::UnexpectedEof)?;
            buffer.copy_from_slice(bytes);
            Ok(())
        }
    }

    /// `pack_blocks` over `raw` in memory.
    fn pack_raw(raw: &[u8], per_block: u32) -> Option<Vec<u8>> {
        pack_blocks(read_from(raw), 1 << 25, per_block).unwrap()
    }

    /// Rank 1 of 2 passing messages around a ring of two: `n` sends and receives.
    fn ring(n: u32) -> RankHistory {
        let mut events = vec![crate::testing::event(1, 0, EventKind::Init)];
        for i in 0..n {
            let seq = events.len() as u32;
            let base = crate::testing::event(1, seq, EventKind::Send);
            events.push(Event {
                peer: Some(0),
                tag: Some(0),
                bytes: 8,
                site: Some(0),
                time_us: 3 * seq,
                ..base
            });
            let base = crate::testing::event(1, seq + 1, EventKind::Recv);
            events.push(Event {
                peer: Some(0),
                tag: Some(0),
                bytes: 8,
                matched: Some(2 * i + 1),
                site: Some(1),
                time_us: 3 * seq + 2,
                ..base
            });
        }
        RankHistory {
            rank: 1,
            size: 2,
            events,
            comms: vec![crate::Comm { id: 0, ranks: vec![0, 1] }],
            sites: vec![
                crate::Site { id: 0, module: "/bin/ring".into(), offset: 0x10 },
                crate::Site { id: 1, module: "/bin/ring".into(), offset: 0x20 },
            ],
            blocked: None,
            init_realtime_ns: 7,
        }
    }

    #[test]
    fn a_packed_history_unpacks_to_the_same_bytes_and_reads_the_same() {
        let files = write_rank(&ring(1000));
        for per_block in [BLOCK_RECORDS, 7, 1] {
            let packed = pack_raw(&files.events, per_block).expect("packable");
            assert!(is_packed(&packed));
            assert_eq!(recorded(&packed), Some(2001));
            assert_eq!(recorded(&files.events), Some(2001));
            let raw = unpack(&packed, 1 << 25).unwrap();
            assert_eq!(raw, files.events, "{per_block} records a block");
            assert_eq!(read_rank(&raw, &files.comms, &files.sites).unwrap(), ring(1000));
        }
    }

    #[test]
    fn a_loop_of_calls_packs_to_a_few_bytes_a_record() {
        let files = write_rank(&ring(100_000));
        let packed = pack_raw(&files.events, BLOCK_RECORDS).unwrap();
        let per_record = packed.len() as f64 / 200_001.0;
        assert!(per_record < 1.0, "{per_record} bytes a record ({} in all)", packed.len());
    }

    #[test]
    fn files_it_cannot_keep_whole_are_left_as_they_are() {
        let mut files = write_rank(&ring(3));
        files.events[100] = 1;
        assert_eq!(pack_raw(&files.events, 4), None, "a byte past the header's fields");
        assert_eq!(pack_raw(&[7; HEADER_SIZE as usize], 4), None, "not an events file");
        let mut files = write_rank(&ring(3));
        files.events[8] = 2;
        assert_eq!(pack_raw(&files.events, 4), None, "another version");
        let files = write_rank(&ring(3));
        let short = &files.events[..files.events.len() - 1];
        assert!(pack_blocks(read_from(short), 1 << 25, 4).is_err(), "fewer records than counted");
        assert_eq!(pack_blocks(read_from(&files.events), 6, 4).unwrap(), None, "more records than allowed");
    }

    #[test]
    fn damaged_files_are_refused_by_name() {
        let files = write_rank(&ring(20));
        let packed = pack_raw(&files.events, 16).unwrap();
        let error = |bytes: &[u8], max| unpack(bytes, max).unwrap_err().to_string();
        assert!(error(&packed[..79], 1 << 25).contains("less than the 80-byte header"));
        assert!(error(&packed, 40).contains("41 records, more than the 40 read"));
        assert!(
            error(&packed[..packed.len() - 1], 1 << 25)
                .contains("the block of records 32..41: the file ends inside it")
        );
        let mut longer = packed.clone();
        longer.push(0);
        assert!(error(&longer, 1 << 25).contains("1 bytes after the last block"));
        let mut bad_version = packed.clone();
        bad_version[8] = 9;
        assert!(error(&bad_version, 1 << 25).contains("version 9"));
    }

    #[test]
    fn every_cut_and_every_flipped_byte_is_an_error_or_a_file_that_packs_back() {
        let files = write_rank(&ring(12));
        let packed = pack_raw(&files.events, 8).unwrap();
        let check = |bytes: &[u8]| {
            if let Ok(raw) = unpack(bytes, 1 << 25) {
                assert_eq!(pack_raw(&raw, 8).as_deref(), Some(bytes), "what unpacks packs back the same");
            }
        };
        for len in 0..packed.len() {
            check(&packed[..len]);
        }
        for i in 0..packed.len() {
            let mut flipped = packed.clone();
            flipped[i] ^= 0x5a;
            check(&flipped);
        }
    }

    proptest! {
        #[test]
        fn any_records_pack_and_unpack_to_themselves(
            records in proptest::collection::vec(proptest::array::uniform32(any::<u8>()), 0..40),
            per_block in 1u32..9,
        ) {
            let mut raw = write_rank(&ring(0)).events;
            raw[24..32].copy_from_slice(&(records.len() as u64).to_le_bytes());
            raw.truncate(HEADER_SIZE as usize);
            records.iter().for_each(|r| raw.extend_from_slice(r));
            let packed = pack_raw(&raw, per_block).unwrap();
            prop_assert_eq!(unpack(&packed, 1 << 25).unwrap(), raw);
        }
    }
}
