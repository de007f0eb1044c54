//! File header, blocks, footer: encoding and checking a compacted snapshot file, read
//! through [`ReadAt`] (a file read with `pread`, or a byte slice). No other I/O here
//! (`dir` writes the files).
//!
//! # `S<seq>.snap`, format version 3 (all integers little-endian)
//!
//! ```text
//! offset          size      field                                  readers check
//! 0               32        FileHeader
//!   +0            8           magic = b"SDTSNAP\0"                 # must match
//!   +8            4           version u32 = 3                      # checked after the checksum:
//!                                                                  #   1..=3 read, other
//!                                                                  #   → UnsupportedVersion
//!   +12           4           seq u32                              # = <seq> of the file name
//!   +16           8           reserved u64                         # = 0
//!   +24           8           checksum u64 = xxh3_64(bytes 0..24)  # must match
//! 32              …         Block*, back to back, slots in order   # first at 32; each ends where
//!                                                                  #   the next (or the index) starts
//!   +0            4           compressed_len u32                   # = that distance - 16
//!   +4            4           page_count u32                       # = the index's count, 1..=64
//!   +8            8           checksum u64 = xxh3_64(frame)        # must match
//!   +16           comp_len    the pages, as the index's encoding   # → page_count * 4096 bytes:
//!                                  for the block says:             #   each slot's page, whole or
//!                                  0: one zstd frame of them       #   as a patch (`index.rs`)
//!                                  1: one zstd frame of them
//!                                     byte-shuffled (`shuffle.rs`)
//!                                  2: the bytes themselves         # comp_len = page_count * 4096
//! index_offset    index_len   zstd frame of the index (`index.rs`) # checksum in the footer;
//!                                                                  #   frame records its size
//! meta_offset     meta_len    zstd frame of serde_json(SnapshotMeta) # likewise; meta.seq = seq
//! len - 64        64        Footer
//!   +0            8           magic = b"SDTFOOT\0"                 # must match
//!   +8            4           version u32                          # = header's version
//!   +12           4           seq u32                              # = header's seq
//!   +16           8           index_offset u64                     # >= 32 (= 32: no blocks)
//!   +24           8           index_len u64                        # index_offset + index_len
//!                                                                  #   = meta_offset
//!   +32           8           index_checksum u64 = xxh3_64(index frame)
//!   +40           8           meta_offset u64                      # meta_offset + meta_len
//!                                                                  #   = len - 64
//!   +48           4           meta_len u32
//!   +52           4           meta_checksum u32 = low 32 bits of xxh3_64(meta frame)
//!   +56           8           checksum u64 = xxh3_64(bytes 0..56)  # must match
//! ```
//!
//! Every byte is covered by a checksum or pinned by a structural check, so any change to
//! one byte is caught when the data it belongs to is read: the header, footer and index
//! when the file is opened, the metadata when it is opened as the snapshot being read
//! (not when a later snapshot only borrows its pages), a block when one of its pages is
//! read. A zstd frame decodes to at most [`MAX_ZSTD_RATIO`] times its length, which caps
//! what a frame's recorded size may claim.
//!
//! Every version keeps the header's 32 bytes as above (magic, version, checksum at 24),
//! so a reader tells a newer file from a damaged one. Changed the layout? Bump
//! [`VERSION`]. Versions 1 and 2 differ only in their index: it records no encoding per
//! block (every block is one zstd frame), and in version 1 it has no patch table either
//! (every slot holds its page whole). This build reads all three and writes version 3.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

use xxhash_rust::xxh3::xxh3_64;
use zstd::bulk::Decompressor;

use crate::Error;
use crate::index::{BlockTable, Index};
use crate::model::{PAGE_SIZE, SnapshotMeta, check_meta};
use crate::shuffle;

/// First bytes of every snapshot file.
pub(crate) const MAGIC: [u8; 8] = *b"SDTSNAP\0";
/// First bytes of every footer.
pub(crate) const FOOTER_MAGIC: [u8; 8] = *b"SDTFOOT\0";
/// The format version this build writes, and the newest it reads. Not the crate version.
pub const VERSION: u32 = 3;
/// The oldest format version this build reads.
pub const OLDEST_VERSION: u32 = 1;
/// Size of the file header.
pub(crate) const HEADER_LEN: u64 = 32;
/// Size of a block header.
pub(crate) const BLOCK_HEADER_LEN: u64 = 16;
/// Size of the footer.
pub(crate) const FOOTER_LEN: u64 = 64;
/// Most pages in one block (256 KiB uncompressed).
pub(crate) const MAX_BLOCK_PAGES: u32 = 64;
/// zstd's best case is an RLE block: 4 bytes for 128 KiB. No frame decodes to more than
/// this many times its own length.
pub(crate) const MAX_ZSTD_RATIO: u64 = 32 * 1024;
/// zstd level for blocks, index and metadata.
pub(crate) const ZSTD_LEVEL: i32 = 1;

/// How a block's bytes encode its pages (`page_count * 4096` bytes, each slot's page whole
/// or as a patch): recorded in the index (format version 3 on; before, every block is
/// [`Zstd`](Encoding::Zstd)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Encoding {
    /// One zstd frame of the pages.
    Zstd = 0,
    /// One zstd frame of the pages byte-shuffled as 64-bit words (`shuffle.rs`).
    ShuffledZstd = 1,
    /// The pages themselves: they did not compress.
    Stored = 2,
}

impl Encoding {
    /// The encoding numbered `n` in an index, if there is one.
    pub(crate) fn from_u8(n: u8) -> Option<Encoding> {
        [Encoding::Zstd, Encoding::ShuffledZstd, Encoding::Stored].into_iter().find(|e| *e as u8 == n)
    }
}

/// Why a snapshot file cannot be read, before the caller names the snapshot.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Bad {
    /// Damaged: what is wrong, got vs expected.
    Corrupt(String),
    /// Written in another format version.
    Version(u32),
}

impl Bad {
    /// The crate error for snapshot `snapshot` (`S3`).
    pub(crate) fn named(self, snapshot: &str) -> Error {
        match self {
            Bad::Corrupt(detail) => Error::Corrupt { snapshot: snapshot.to_owned(), detail },
            Bad::Version(found) => {
                Error::UnsupportedVersion { snapshot: snapshot.to_owned(), found, supported: VERSION }
            }
        }
    }
}

impl From<String> for Bad {
    fn from(detail: String) -> Bad {
        Bad::Corrupt(detail)
    }
}

/// The footer's fields (see the module doc).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Footer {
    pub seq: u32,
    pub index_offset: u64,
    pub index_len: u64,
    pub index_checksum: u64,
    pub meta_offset: u64,
    pub meta_len: u32,
    pub meta_checksum: u32,
}

/// A snapshot file that passed [`open`]: its footer and index.
#[derive(Debug)]
pub(crate) struct Opened {
    pub footer: Footer,
    pub index: Index,
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    let mut word = [0; 4];
    if let Some(src) = bytes.get(at..at + 4) {
        word.copy_from_slice(src);
    }
    u32::from_le_bytes(word)
}

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    let mut word = [0; 8];
    if let Some(src) = bytes.get(at..at + 8) {
        word.copy_from_slice(src);
    }
    u64::from_le_bytes(word)
}

/// Bytes that can be read at any offset: a snapshot file, read with `pread` (a file
/// truncated while it is read gives an error, never a `SIGBUS` as a mapping would), or a
/// byte slice.
pub(crate) trait ReadAt {
    /// The length the bytes had when they were opened.
    fn len(&self) -> u64;
    /// Fills `buf` from `offset`; an error if fewer bytes are there.
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()>;
}

impl ReadAt for [u8] {
    fn len(&self) -> u64 {
        <[u8]>::len(self) as u64
    }

    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let src = usize::try_from(offset)
            .ok()
            .and_then(|at| self.get(at..at.checked_add(buf.len())?))
            .ok_or(io::ErrorKind::UnexpectedEof)?;
        buf.copy_from_slice(src);
        Ok(())
    }
}

/// An open file and the length it had when opened.
#[derive(Debug)]
pub(crate) struct FileBytes {
    pub file: File,
    pub len: u64,
}

impl FileBytes {
    pub(crate) fn new(file: File) -> io::Result<FileBytes> {
        let len = file.metadata()?.len();
        Ok(FileBytes { file, len })
    }
}

impl ReadAt for FileBytes {
    fn len(&self) -> u64 {
        self.len
    }

    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        FileExt::read_exact_at(&self.file, buf, offset)
    }
}

/// `len` bytes at `start`, or what is wrong with that range.
pub(crate) fn range(src: &(impl ReadAt + ?Sized), start: u64, len: u64, what: &str) -> Result<Vec<u8>, Bad> {
    let mut out = Vec::new();
    range_into(src, start, len, what, &mut out)?;
    Ok(out)
}

/// [`range`] into `out`, reusing its allocation.
fn range_into(
    src: &(impl ReadAt + ?Sized),
    start: u64,
    len: u64,
    what: &str,
    out: &mut Vec<u8>,
) -> Result<(), Bad> {
    let outside = || {
        Bad::Corrupt(format!(
            "{what} at offset {start} ({len} bytes) lies outside the file ({} bytes)",
            src.len()
        ))
    };
    if start.checked_add(len).is_none_or(|end| end > src.len()) {
        return Err(outside());
    }
    out.clear();
    out.resize(usize::try_from(len).map_err(|_| outside())?, 0);
    src.read_exact_at(out, start).map_err(|e| match e.kind() {
        io::ErrorKind::UnexpectedEof => Bad::Corrupt(format!(
            "truncated: {what} at offset {start} ({len} bytes) is no longer in the file (it shrank while being read)"
        )),
        _ => Bad::Corrupt(format!("{what} at offset {start}: cannot be read: {e}")),
    })
}

/// The 32-byte header of snapshot `seq`.
pub(crate) fn encode_header(seq: u32) -> [u8; 32] {
    let mut h = [0; 32];
    h[0..8].copy_from_slice(&MAGIC);
    h[8..12].copy_from_slice(&VERSION.to_le_bytes());
    h[12..16].copy_from_slice(&seq.to_le_bytes());
    let sum = xxh3_64(&h[..24]);
    h[24..32].copy_from_slice(&sum.to_le_bytes());
    h
}

/// The 16-byte header of a block holding `page_count` pages as `frame`.
pub(crate) fn encode_block_header(frame: &[u8], page_count: u32) -> [u8; 16] {
    let mut h = [0; 16];
    // A block's frame is at most a few hundred KiB (64 pages); the writer never exceeds u32.
    let len = u32::try_from(frame.len()).unwrap_or(u32::MAX);
    h[0..4].copy_from_slice(&len.to_le_bytes());
    h[4..8].copy_from_slice(&page_count.to_le_bytes());
    h[8..16].copy_from_slice(&xxh3_64(frame).to_le_bytes());
    h
}

impl Footer {
    /// The 64 bytes of the footer.
    pub(crate) fn encode(&self) -> [u8; 64] {
        let mut f = [0; 64];
        f[0..8].copy_from_slice(&FOOTER_MAGIC);
        f[8..12].copy_from_slice(&VERSION.to_le_bytes());
        f[12..16].copy_from_slice(&self.seq.to_le_bytes());
        f[16..24].copy_from_slice(&self.index_offset.to_le_bytes());
        f[24..32].copy_from_slice(&self.index_len.to_le_bytes());
        f[32..40].copy_from_slice(&self.index_checksum.to_le_bytes());
        f[40..48].copy_from_slice(&self.meta_offset.to_le_bytes());
        f[48..52].copy_from_slice(&self.meta_len.to_le_bytes());
        f[52..56].copy_from_slice(&self.meta_checksum.to_le_bytes());
        let sum = xxh3_64(&f[..56]);
        f[56..64].copy_from_slice(&sum.to_le_bytes());
        f
    }
}

/// The checksum the footer keeps for the metadata frame.
pub(crate) fn meta_checksum(frame: &[u8]) -> u32 {
    xxh3_64(frame) as u32
}

/// Checks the header of snapshot file `seq`; returns its format version.
fn check_header(file: &[u8], seq: u32) -> Result<u32, Bad> {
    let Some(h) = file.get(..HEADER_LEN as usize) else {
        return Err(Bad::Corrupt(format!(
            "truncated: file is {} bytes, header needs {HEADER_LEN}",
            file.len()
        )));
    };
    if h[0..8] != MAGIC {
        return Err(Bad::Corrupt(format!(
            "header magic b\"{}\", expected b\"{}\" (not a snapshot file?)",
            h[0..8].escape_ascii(),
            MAGIC.escape_ascii()
        )));
    }
    let (got, expected) = (xxh3_64(&h[..24]), u64_at(h, 24));
    if got != expected {
        return Err(Bad::Corrupt(format!("header checksum {got:#018x}, expected {expected:#018x}")));
    }
    let version = u32_at(h, 8);
    if !(OLDEST_VERSION..=VERSION).contains(&version) {
        return Err(Bad::Version(version));
    }
    let file_seq = u32_at(h, 12);
    if file_seq != seq {
        return Err(Bad::Corrupt(format!("header says seq {file_seq}, the file name says {seq}")));
    }
    let reserved = u64_at(h, 16);
    if reserved != 0 {
        return Err(Bad::Corrupt(format!("header reserved field {reserved:#x}, expected 0")));
    }
    Ok(version)
}

/// Checks the footer of snapshot file `seq`, whose header says format `version`.
fn check_footer(file: &(impl ReadAt + ?Sized), seq: u32, version: u32) -> Result<Footer, Bad> {
    let len = file.len();
    if len < HEADER_LEN + FOOTER_LEN {
        return Err(Bad::Corrupt(format!(
            "truncated: file is {len} bytes, footer needs {FOOTER_LEN} after the {HEADER_LEN}-byte header"
        )));
    }
    let f = range(file, len - FOOTER_LEN, FOOTER_LEN, "footer")?;
    let f = f.as_slice();
    if f[0..8] != FOOTER_MAGIC {
        return Err(Bad::Corrupt(format!(
            "footer magic b\"{}\", expected b\"{}\" (truncated?)",
            f[0..8].escape_ascii(),
            FOOTER_MAGIC.escape_ascii()
        )));
    }
    let (got, expected) = (xxh3_64(&f[..56]), u64_at(f, 56));
    if got != expected {
        return Err(Bad::Corrupt(format!("footer checksum {got:#018x}, expected {expected:#018x}")));
    }
    let footer_version = u32_at(f, 8);
    if footer_version != version {
        return Err(Bad::Corrupt(format!("footer version {footer_version}, header says {version}")));
    }
    let footer = Footer {
        seq: u32_at(f, 12),
        index_offset: u64_at(f, 16),
        index_len: u64_at(f, 24),
        index_checksum: u64_at(f, 32),
        meta_offset: u64_at(f, 40),
        meta_len: u32_at(f, 48),
        meta_checksum: u32_at(f, 52),
    };
    if footer.seq != seq {
        return Err(Bad::Corrupt(format!("footer says seq {}, header says {seq}", footer.seq)));
    }
    if footer.index_offset < HEADER_LEN {
        return Err(Bad::Corrupt(format!(
            "footer: index at offset {}, inside the header",
            footer.index_offset
        )));
    }
    if footer.index_offset.checked_add(footer.index_len) != Some(footer.meta_offset) {
        return Err(Bad::Corrupt(format!(
            "footer: index at {} + {} bytes does not end at the metadata ({})",
            footer.index_offset, footer.index_len, footer.meta_offset
        )));
    }
    let meta_end = footer.meta_offset.checked_add(u64::from(footer.meta_len));
    if meta_end != Some(len - FOOTER_LEN) {
        return Err(Bad::Corrupt(format!(
            "footer: metadata at {} + {} bytes does not end at the footer ({})",
            footer.meta_offset,
            footer.meta_len,
            len - FOOTER_LEN
        )));
    }
    Ok(footer)
}

/// Decodes a zstd frame that records its decompressed size.
fn decompress_frame(frame: &[u8], what: &str) -> Result<Vec<u8>, Bad> {
    let size = match zstd::zstd_safe::get_frame_content_size(frame) {
        Ok(Some(size)) => size,
        Ok(None) => {
            return Err(Bad::Corrupt(format!("{what}: zstd frame does not record its size")));
        }
        Err(e) => return Err(Bad::Corrupt(format!("{what}: not a zstd frame ({e:?})"))),
    };
    let cap = (frame.len() as u64).saturating_mul(MAX_ZSTD_RATIO);
    if size > cap {
        return Err(Bad::Corrupt(format!(
            "{what}: zstd frame of {} bytes claims {size} bytes, more than {cap} possible",
            frame.len()
        )));
    }
    let size = usize::try_from(size).map_err(|_| format!("{what}: {size} bytes do not fit in memory"))?;
    // One decompression context a thread: making one asks the CPU for its features
    // (`cpuid`), which a virtual machine's hypervisor answers in about 20 µs, a tenth of
    // what `sdt ls` spent on each snapshot.
    thread_local! {
        static DCTX: std::cell::RefCell<Option<Decompressor<'static>>> = const { std::cell::RefCell::new(None) };
    }
    let out = DCTX
        .with_borrow_mut(|dctx| {
            let dctx = match dctx {
                Some(dctx) => dctx,
                None => dctx.insert(Decompressor::new()?),
            };
            dctx.decompress(frame, size)
        })
        .map_err(|e| format!("{what}: zstd: {e}"))?;
    if out.len() != size {
        return Err(Bad::Corrupt(format!(
            "{what}: zstd frame decodes to {} bytes, its header says {size}",
            out.len()
        )));
    }
    Ok(out)
}

/// Checks the header and footer of snapshot file `seq` and decodes its index.
pub(crate) fn open(file: &(impl ReadAt + ?Sized), seq: u32) -> Result<Opened, Bad> {
    let header = range(file, 0, HEADER_LEN.min(file.len()), "header")?;
    let version = check_header(&header, seq)?;
    let footer = check_footer(file, seq, version)?;
    let frame = range(file, footer.index_offset, footer.index_len, "index")?;
    let got = xxh3_64(&frame);
    if got != footer.index_checksum {
        return Err(Bad::Corrupt(format!(
            "index at offset {}: checksum {got:#018x}, expected {:#018x}",
            footer.index_offset, footer.index_checksum
        )));
    }
    let bytes = decompress_frame(&frame, "index")?;
    let index = Index::decode(&bytes, seq, footer.index_offset, version)?;
    Ok(Opened { footer, index })
}

/// Decodes and checks the metadata of a file that passed [`open`].
pub(crate) fn decode_meta(file: &(impl ReadAt + ?Sized), opened: &Opened) -> Result<SnapshotMeta, Bad> {
    let footer = &opened.footer;
    let frame = range(file, footer.meta_offset, footer.meta_len.into(), "metadata")?;
    let got = meta_checksum(&frame);
    if got != footer.meta_checksum {
        return Err(Bad::Corrupt(format!(
            "metadata at offset {}: checksum {got:#010x}, expected {:#010x}",
            footer.meta_offset, footer.meta_checksum
        )));
    }
    let json = decompress_frame(&frame, "metadata")?;
    let meta: SnapshotMeta = serde_json::from_slice(&json).map_err(|e| format!("metadata: {e}"))?;
    if meta.seq != footer.seq {
        return Err(Bad::Corrupt(format!("metadata says seq {}, the file {}", meta.seq, footer.seq)));
    }
    check_meta(&meta).map_err(|e| format!("metadata: {e}"))?;
    Ok(meta)
}

/// Checks block `block` of a file that passed [`open`] and decodes its pages into `out`
/// (replacing what was there) as the index's encoding says; `scratch` holds the encoded
/// bytes (and, after, anything).
pub(crate) fn decode_block(
    file: &(impl ReadAt + ?Sized),
    table: &BlockTable,
    block: usize,
    dctx: &mut Decompressor<'_>,
    scratch: &mut Vec<u8>,
    out: &mut Vec<u8>,
) -> Result<(), Bad> {
    let Some((offset, end, page_count, encoding)) = table.extent(block) else {
        return Err(Bad::Corrupt(format!("block {block} is not in the index")));
    };
    // Header and frame in one read: the index says where the block ends.
    range_into(file, offset, end.saturating_sub(offset).max(BLOCK_HEADER_LEN), "block", scratch)?;
    let header = &scratch[..BLOCK_HEADER_LEN as usize];
    let (comp_len, stored_pages) = (u64::from(u32_at(header, 0)), u32_at(header, 4));
    if stored_pages != page_count {
        return Err(Bad::Corrupt(format!(
            "block {block} at offset {offset}: page count {stored_pages}, the index says {page_count}"
        )));
    }
    let expected_len = end.saturating_sub(offset + BLOCK_HEADER_LEN);
    if comp_len != expected_len {
        return Err(Bad::Corrupt(format!(
            "block {block} at offset {offset}: length {comp_len}, expected {expected_len} (next item at {end})"
        )));
    }
    let frame = &scratch[BLOCK_HEADER_LEN as usize..];
    let (got, expected) = (xxh3_64(frame), u64_at(header, 8));
    if got != expected {
        return Err(Bad::Corrupt(format!(
            "block {block} at offset {offset}: checksum {got:#018x}, expected {expected:#018x}"
        )));
    }
    let want = page_count as usize * PAGE_SIZE as usize;
    out.clear();
    if encoding == Encoding::Stored {
        if frame.len() != want {
            return Err(Bad::Corrupt(format!(
                "block {block} at offset {offset}: stored as is in {} bytes, expected {want}",
                frame.len()
            )));
        }
        out.extend_from_slice(frame);
        return Ok(());
    }
    out.reserve_exact(want);
    let n = dctx
        .decompress_to_buffer(frame, out)
        .map_err(|e| format!("block {block} at offset {offset}: zstd: {e}"))?;
    if n != want {
        return Err(Bad::Corrupt(format!(
            "block {block} at offset {offset}: decodes to {n} bytes, expected {want}"
        )));
    }
    if encoding == Encoding::ShuffledZstd {
        // The compressed bytes are no longer needed: their buffer takes the pages.
        scratch.clear();
        scratch.resize(want, 0);
        shuffle::unshuffle(out, scratch);
        std::mem::swap(out, scratch);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_bytes() {
        let h = encode_header(7);
        assert_eq!(&h[..16], b"SDTSNAP\0\x03\0\0\0\x07\0\0\0");
        assert_eq!(&h[16..24], &[0; 8]);
        assert_eq!(check_header(&h, 7), Ok(3));
        assert_eq!(check_header(&h, 8), Err(Bad::Corrupt("header says seq 7, the file name says 8".into())));
        assert!(
            matches!(check_header(&h[..31], 7), Err(Bad::Corrupt(d)) if d.starts_with("truncated: file is 31 bytes"))
        );
    }

    #[test]
    fn header_other_version() {
        let with_version = |version: u8| {
            let mut h = encode_header(0);
            h[8] = version;
            let sum = xxh3_64(&h[..24]);
            h[24..].copy_from_slice(&sum.to_le_bytes());
            h
        };
        assert_eq!(check_header(&with_version(1), 0), Ok(1));
        assert_eq!(check_header(&with_version(2), 0), Ok(2));
        assert_eq!(check_header(&with_version(4), 0), Err(Bad::Version(4)));
        assert_eq!(check_header(&with_version(0), 0), Err(Bad::Version(0)));
        // The same change without a matching checksum is damage, not a version.
        let mut h = encode_header(0);
        h[8] = 4;
        assert!(matches!(check_header(&h, 0), Err(Bad::Corrupt(d)) if d.starts_with("header checksum")));
    }

    #[test]
    fn header_wrong_magic() {
        let mut h = encode_header(0);
        h[0] = b'X';
        assert_eq!(
            check_header(&h, 0),
            Err(Bad::Corrupt(
                "header magic b\"XDTSNAP\\x00\", expected b\"SDTSNAP\\x00\" (not a snapshot file?)".into()
            ))
        );
    }

    fn file_with_footer(footer: &Footer, body: &[u8]) -> Vec<u8> {
        let mut f = encode_header(footer.seq).to_vec();
        f.extend_from_slice(body);
        f.extend_from_slice(&footer.encode());
        f
    }

    #[test]
    fn footer_round_trip_and_layout() {
        let footer = Footer {
            seq: 3,
            index_offset: 32,
            index_len: 5,
            index_checksum: 1,
            meta_offset: 37,
            meta_len: 2,
            meta_checksum: 9,
        };
        let file = file_with_footer(&footer, &[0; 7]);
        assert_eq!(check_footer(file.as_slice(), 3, VERSION), Ok(footer));
        assert!(
            matches!(check_footer(file.as_slice(), 3, 1), Err(Bad::Corrupt(d)) if d == "footer version 3, header says 1")
        );
        let short = file_with_footer(&footer, &[0; 6]);
        assert!(
            matches!(check_footer(short.as_slice(), 3, VERSION), Err(Bad::Corrupt(d)) if d.contains("does not end at the footer"))
        );
        let gap = Footer { meta_offset: 38, ..footer };
        let file = file_with_footer(&gap, &[0; 8]);
        assert!(
            matches!(check_footer(file.as_slice(), 3, VERSION), Err(Bad::Corrupt(d)) if d.contains("does not end at the metadata"))
        );
        let huge = Footer { index_len: u64::MAX, ..footer };
        assert!(check_footer(file_with_footer(&huge, &[0; 7]).as_slice(), 3, VERSION).is_err());
        assert!(
            matches!(check_footer(&[0u8; 95][..], 3, VERSION), Err(Bad::Corrupt(d)) if d.starts_with("truncated: file is 95 bytes"))
        );
    }

    #[test]
    fn frame_size_is_capped() {
        let frame = zstd::bulk::compress(&[0; 100_000], 3).unwrap();
        assert_eq!(decompress_frame(&frame, "x").unwrap().len(), 100_000);
        // A frame that does not record its size is refused.
        let mut enc = zstd::stream::Encoder::new(Vec::new(), 3).unwrap();
        std::io::Write::write_all(&mut enc, b"hello").unwrap();
        let unsized_frame = enc.finish().unwrap();
        assert!(decompress_frame(&unsized_frame, "x").is_err());
        assert!(decompress_frame(b"not zstd", "x").is_err());
        assert!(decompress_frame(&[], "x").is_err());
    }
}
