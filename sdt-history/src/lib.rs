//! The message history of an MPI job: what each rank's interposition library
//! (`sdt-mpi/`, on MPI's profiling interface) recorded, read back and analysed.
//!
//! - [`model`]: the events of every rank, as the rest of SDT sees them.
//! - [`format`]: the per-rank event file the interposition library writes, and its reader.
//! - [`run`]: a rank's history read from its run in the store.
//!
//! The history is untrusted input like the rest of a store: a rank's library runs inside
//! the program and can write anything. Readers check every field and never panic.

pub mod format;
pub mod model;
pub mod run;

pub use model::{Blocked, CollectiveKind, Comm, Event, EventKind, History, RankHistory, Site};
pub use run::{HistoryError, read_run};
