//! The per-rank event file, `mpi-events` in the rank's run directory.
//!
//! `sdt run` creates it (0600, inside the store) and hands it to the program's
//! interposition library as an inherited descriptor (`SDT_MPI_EVENTS_FD`); the library
//! maps it shared and grows it with `ftruncate`, so what it recorded is in the file even
//! when the rank is killed, and a capture (all threads stopped) reads an exact
//! [`Header::count`] as the last event of the snapshot.
//!
//! ```text
//! offset 0      header, 4096 bytes (one page)
//! offset 4096   records, 32 bytes each: record i is the event with seq i
//! ```
//!
//! Header (little-endian):
//!
//! ```text
//!  0  [u8; 8]  magic  "SDTMPIEV"
//!  8  u32      version (VERSION)
//! 12  u32      record size (RECORD_SIZE)
//! 16  u32      rank in MPI_COMM_WORLD
//! 20  u32      size of MPI_COMM_WORLD
//! 24  u64      count: records written; a record is complete before count passes it
//! 32  u32      blocked.kind: KIND_NONE when the rank is not inside a blocking call
//! 36  u16      blocked.comm
//! 38  u16      0
//! 40  i32      blocked.peer (world rank; -1 for any source or none)
//! 44  i32      blocked.tag (-1 for any tag or none)
//! 48  u32      blocked.site (NONE for none)
//! 52  u32      blocked.since_us
//! 56  u64      CLOCK_REALTIME at MPI_Init, nanoseconds since the Unix epoch (0: unknown)
//! ```
//!
//! Record (little-endian, 32 bytes):
//!
//! ```text
//!  0  u8   kind (KIND_*)
//!  1  u8   flags (FLAG_*)
//!  2  u16  comm
//!  4  i32  peer (world rank; -1 for none or MPI_ANY_SOURCE)
//!  8  i32  tag (-1 for none or MPI_ANY_TAG)
//! 12  u32  bytes (saturating at u32::MAX)
//! 16  u32  matched: seq of the send a receive took (NONE otherwise)
//! 20  u32  post: seq of the posting event of a completion (NONE otherwise)
//! 24  u32  site (NONE for unknown)
//! 28  u32  time_us since MPI_Init (saturating)
//! ```
//!
//! Constraints a reader checks: `peer < size` or -1; `matched`, `post` and `site` name
//! entries that exist (a `post` names an earlier `Irecv`/`Isend` of the same rank);
//! `comm` names a communicator of the table; flags outside `FLAG_*` are an error.
//! The communicator and site tables are written by the library as text lines in two
//! small side files, `mpi-comms` (`COMM_ID WORLD_RANK,WORLD_RANK,…`) and `mpi-sites`
//! (`SITE_ID 0xOFFSET MODULE_PATH`), appended before any record names them.

/// The file's magic number.
pub const MAGIC: [u8; 8] = *b"SDTMPIEV";
/// The format version (not the crate's).
pub const VERSION: u32 = 1;
/// Bytes of the header.
pub const HEADER_SIZE: u64 = 4096;
/// Bytes of one record.
pub const RECORD_SIZE: u32 = 32;
/// "No such index" in `matched`, `post` and `site`.
pub const NONE: u32 = u32::MAX;

/// Not inside a blocking call (header `blocked.kind`).
pub const KIND_NONE: u8 = 0;
/// [`EventKind::Init`](crate::EventKind::Init).
pub const KIND_INIT: u8 = 1;
/// [`EventKind::Finalize`](crate::EventKind::Finalize).
pub const KIND_FINALIZE: u8 = 2;
/// [`EventKind::Send`](crate::EventKind::Send).
pub const KIND_SEND: u8 = 3;
/// [`EventKind::Isend`](crate::EventKind::Isend).
pub const KIND_ISEND: u8 = 4;
/// [`EventKind::Recv`](crate::EventKind::Recv).
pub const KIND_RECV: u8 = 5;
/// [`EventKind::Irecv`](crate::EventKind::Irecv).
pub const KIND_IRECV: u8 = 6;
/// [`EventKind::RecvDone`](crate::EventKind::RecvDone).
pub const KIND_RECV_DONE: u8 = 7;
/// [`EventKind::SendDone`](crate::EventKind::SendDone).
pub const KIND_SEND_DONE: u8 = 8;
/// [`EventKind::Probe`](crate::EventKind::Probe).
pub const KIND_PROBE: u8 = 9;
/// Collectives: `KIND_COLLECTIVE + n`, n in the order of
/// [`CollectiveKind`](crate::CollectiveKind)'s variants (Barrier = 0 … Other = 10).
pub const KIND_COLLECTIVE: u8 = 32;

/// The receive was posted with `MPI_ANY_SOURCE`.
pub const FLAG_ANY_SOURCE: u8 = 1;
/// The receive was posted with `MPI_ANY_TAG`.
pub const FLAG_ANY_TAG: u8 = 2;
/// The message was truncated (`MPI_ERR_TRUNCATE`).
pub const FLAG_TRUNCATED: u8 = 4;
