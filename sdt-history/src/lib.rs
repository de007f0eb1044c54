//! The message history of an MPI job: what each rank's interposition library
//! (`sdt-mpi/`, on MPI's profiling interface) recorded, read back and analysed.
//!
//! - [`model`]: the events of every rank, as the rest of SDT sees them.
//! - [`clock`]: every event's vector clock, recomputed exactly from the history.
//! - [`causal`]: the messages a rank's state depends on, back along the flow of messages.
//! - [`check`]: the errors a finished job's history shows (deadlocks, lost messages, …).
//! - [`cut`]: whether a global cut is consistent, and the messages in flight across it.
//! - [`races`]: the message races of a run, and the matches a replay must enforce.
//! - [`replay`]: the replay record, the file that hands a replay what it enforces.
//! - [`sites`]: the source lines of the places that called MPI.
//! - [`trace`]: the history as a Chrome/Perfetto trace, messages as flow arrows.
//! - [`format`]: the per-rank event file the interposition library writes, and its reader.
//! - [`packed`]: the events file as a rank's `sdt run` leaves it once the rank has ended.
//! - [`run`]: a rank's history read from its run in the store.
//!
//! The history is untrusted input like the rest of a store: a rank's library runs inside
//! the program and can write anything. Readers check every field and never panic.

pub mod causal;
pub mod check;
pub mod clock;
mod columns;
pub mod cut;
pub mod format;
pub mod model;
pub mod packed;
pub mod races;
pub mod replay;
pub mod run;
pub mod sites;
#[cfg(test)]
mod testing;
pub mod trace;

pub use model::{Blocked, CollectiveKind, Comm, Event, EventKind, History, RankHistory, Site};
pub use run::{HistoryError, read_run};
