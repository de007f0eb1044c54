//! SDT's snapshot store: a directory of runs, each a sequence of snapshots, written raw
//! by the capture and compacted into incremental page diffs.
//!
//! ```no_run
//! use sdt_store::Store;
//!
//! let store = Store::open(".sdt".as_ref())?;
//! let run = store.open_run(&store.latest_run()?)?;
//! let snap = run.open_snapshot("S3")?;
//! let mut word = [0u8; 8];
//! snap.read(0x7fff_0000_1000, &mut word)?;
//! # Ok::<(), sdt_store::Error>(())
//! ```
//!
//! # Layout on disk
//!
//! ```text
//! .sdt/                       0700, like every directory here; files are 0600
//!   latest -> runs/3          symlink to the newest run (never followed by sdt)
//!   runs/3/run.json           RunInfo: command, start, status (rewritten at the end)
//!   runs/3/lock               flock'd by the sdt capturing or compacting the run
//!   runs/3/S0.snap            snapshot 0, compacted: every page with content
//!   runs/3/S1.snap            snapshot 1: pages changed since S0 (whole or as patches),
//!                             plus a full page index
//!   runs/3/S2.snap.incomplete being compacted (or the compactor died): ignored by readers
//!   runs/3/S2.raw             snapshot 2 as captured: its copied pages, then a record
//!   runs/3/.spare-P-K.raw     a spare a capture will copy into: ignored by readers
//!   runs/3/files/             the program, libraries and mapped files as captured, linked
//!                             or copied (`kept`): read where the originals changed
//! ```
//!
//! Run ids are allocated by creating `runs/<n>`, so concurrent runs never share one. The
//! bytes of a compacted snapshot file (header, blocks of up to 64 pages, each zstd,
//! byte-shuffled zstd or stored as is, index,
//! metadata, footer), with the checks readers make beside each field, are laid out at the
//! top of `src/format.rs`; the index (page runs, patch runs) at the top of `src/index.rs`;
//! a raw file at the top of `src/raw.rs`.
//!
//! # Raw log and compaction
//!
//! A capture copies its pages into a spare of the run (`spill`): one copy, into memory
//! the run keeps from capture to capture, for a file allocated ahead. [`RunLog::commit`]
//! writes them to the file by direct I/O, appends the snapshot's record and renames it
//! `S<n>.raw`; from then on it reads back, and survives the death of the process that
//! captured it. [`RunWriter::compact`] later writes `S<n>.snap` from
//! it and removes it. Readers take whichever form is there: a raw snapshot's unchanged
//! pages resolve through the snapshots before it.
//!
//! # Incremental chain (the paper's Algorithm 1: a patch per modified page, random access)
//!
//! ```text
//!   page:      A          B          C       D
//!   S0.snap   [a0]       [b0]       [c0]     .        stores a0 b0 c0 whole (D zero: nothing)
//!   S1.snap   ->S0       [b1^b0]    ->S0    [d1]      stores b1 as a patch on S0's b0; d1 whole
//!   S2.snap   [a2^a0]    [b2^b1]    ->S0    ->S1      stores patches on S0's a0 and S1's b1
//!
//!   reading B in S2:  b2 = (b2^b1) ^ (b1^b0) ^ b0     S2 -> S1 -> S0, then a whole page
//! ```
//!
//! Each snapshot file holds the pages that changed since the previous snapshot and an
//! index of *every* page of its snapshot, naming the file and slot that holds its bytes
//! (`->S0`). A changed page whose previous version is stored goes in as a *patch*
//! (`^`): the page XOR its previous version, mostly zero bytes that zstd shrinks to
//! almost nothing, and the index names the previous version's slot as its *base*. A page
//! goes in whole when it is new, when its patch would have many nonzero bytes that do not
//! compress better than the page (the XOR of doubles that changed a little keeps their
//! high bytes zero; byte-shuffled, those compress, and such patches form chains of at
//! most 4), or when
//! its previous version already heads a chain of 8 patches: reading a page of any
//! snapshot follows at most 8 bases, so it XORs at most 9 stored pages from at most 9
//! files, and never replays the run. Pages that are zero, or that a read-only file mapping provides
//! unchanged, are stored nowhere.
//!
//! # Design constraints
//!
//! - Every file starts with a magic number and a format version that is not the crate
//!   version (3; version-2 files, whose blocks are all plain zstd, and version-1 files,
//!   which hold no patches either, still read); every block, the
//!   index, the metadata and the footer carry a checksum.
//! - A snapshot is committed before its number is given out, and a compacted file is
//!   written as `S<n>.snap.incomplete` and renamed when complete (its raw form removed
//!   only after), so a process killed at any point leaves every committed snapshot
//!   readable.
//! - Files are reached through directory descriptors, one name at a time, without
//!   following a link (`fs`), and read with `pread`: a store is untrusted input, and a
//!   file cut short under a reader is an error, not a `SIGBUS`.
//! - Damage to one file is reported naming that snapshot, also when a later snapshot
//!   reaches it as a patch's base; snapshots that do not refer to the damaged file still
//!   read.
//! - File I/O lives in `dir` and in `fileref` (files that mappings refer to, opened only
//!   when provably the file mapped and readable by the store's owner, and files a restore
//!   opens again, checked the same way); `trust` says what the store's owners may do,
//!   and so what credentials its snapshots may claim; the exporters write through
//!   [`OutputDir`] (`output`): a temporary name, then a rename, the one way both do it.
//!   Encoding and decoding (`format`, `index`) work on byte slices.
//! - The writer keeps no page contents between snapshots: only, per page, where its bytes
//!   are stored, their `xxh3_128` hash, which decides whether a page changed, and the
//!   length of its patch chain. It reads a changed page's previous version back from the
//!   store, through the reader's code and a small cache of decoded blocks.
//!
//! It does not share pages between addresses with equal contents.

#![deny(missing_docs)]
#![deny(unsafe_code)]

mod dir;
mod error;
mod fileref;
mod format;
mod fs;
mod index;
mod kept;
pub mod model;
mod names;
mod output;
mod raw;
mod reader;
mod shuffle;
mod source;
mod spill;
mod trust;
mod writer;

pub use dir::{
    JobMember, PendingFile, Refinement, Run, RunId, RunInfo, RunLog, RunStatus, SnapshotEntry, Snapshots,
    Store,
};
pub use error::Error;
pub use fileref::{Reopen, gone_shared_file};
pub use format::{OLDEST_VERSION as OLDEST_FORMAT_VERSION, VERSION as FORMAT_VERSION};
pub use kept::{COPY_BUDGET, COPY_LIMIT, FileKeeper, Kept, kept_name};
pub use model::*;
pub use names::{is_job_id, is_snapshot_name, job_id};
pub use output::{OutputDir, OutputError};
pub use raw::PageSpan;
pub use reader::Snapshot;
pub use source::SnapshotSource;
pub use spill::{Committed, HandedCommit, Spares, SpillFile};
pub use trust::{Access, BeyondOwner, CredentialsRefused, Owner, OwnerRights, Trust};
pub use writer::{HeldRun, PageSource, RunWriter, WriteReport};

/// Result type of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
