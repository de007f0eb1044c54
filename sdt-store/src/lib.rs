//! SDT's snapshot store: a directory of runs, each a sequence of snapshots stored as
//! incremental page diffs.
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
//! .sdt/
//!   latest -> runs/3          symlink to the newest run
//!   runs/3/run.json           RunInfo: command, start, status (rewritten at the end)
//!   runs/3/S0.snap            snapshot 0: every page with content
//!   runs/3/S1.snap            snapshot 1: pages changed since S0, plus a full page index
//!   runs/3/S2.snap.incomplete being written (or the writer died): ignored by readers
//! ```
//!
//! Run ids are allocated by creating `runs/<n>`, so concurrent runs never share one. The
//! bytes of a snapshot file (header, zstd blocks of up to 64 pages, index, metadata,
//! footer), with the checks readers make beside each field, are laid out at the top of
//! `src/format.rs`; the page index at the top of `src/index.rs`.
//!
//! # Incremental chain (the paper's Algorithm 1, with random access)
//!
//! ```text
//!   page:      A    B    C    D    E
//!   S0.snap   [a0] [b0] [c0]  .    .      stores a0 b0 c0  (D, E zero: nothing stored)
//!   S1.snap    ^S0 [b1]  ^S0 [d1]  .      stores b1 d1; index points A, C at S0
//!   S2.snap   [a2]  ^S1  ^S0  ^S1  .      stores a2; index points B, D at S1 and C at S0
//! ```
//!
//! Each snapshot file holds the pages that changed since the previous snapshot and an
//! index of *every* page of its snapshot, naming the file that holds the bytes. Reading
//! snapshot k therefore opens at most the files its index names and never replays a chain
//! of patches. Pages that are zero, or that a read-only file mapping provides unchanged,
//! are stored nowhere.
//!
//! # Design constraints
//!
//! - Every file starts with a magic number and a format version that is not the crate
//!   version; every block, the index, the metadata and the footer carry a checksum.
//! - A snapshot file is written as `S<n>.snap.incomplete` and renamed when complete, so a
//!   writer killed mid-write leaves every earlier snapshot readable.
//! - Damage to one file is reported naming that snapshot; snapshots that do not refer to
//!   the damaged file still read.
//! - File I/O lives in `dir` (and the reader's reads of files that mappings refer to);
//!   encoding and decoding (`format`, `index`) work on byte slices.
//! - The writer keeps no page contents between snapshots: only, per page, where its bytes
//!   are stored and their `xxh3_128` hash, which decides whether a page changed.
//!
//! It does not: lock a run against a second writer, delete or compact runs, or share
//! pages between addresses with equal contents.

#![deny(missing_docs)]
#![deny(unsafe_code)]

mod dir;
mod error;
mod format;
mod index;
pub mod model;
mod reader;
mod writer;

pub use dir::{Run, RunId, RunInfo, RunStatus, SnapshotEntry, Store};
pub use error::Error;
pub use model::*;
pub use reader::Snapshot;
pub use writer::{PageSource, RunWriter, WriteReport};

/// Result type of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
