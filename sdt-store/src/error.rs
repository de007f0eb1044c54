//! Errors of the store.

use std::path::PathBuf;

/// Everything that can go wrong opening, reading or writing a store.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The store directory does not exist.
    #[error("no SDT store at {path} (run `sdt run` first, or pass --store)")]
    NoStore {
        /// The directory looked for.
        path: PathBuf,
    },
    /// The store holds no runs.
    #[error("the SDT store at {path} holds no runs yet (run `sdt run` first)")]
    EmptyStore {
        /// The store directory.
        path: PathBuf,
    },
    /// No run with that id.
    #[error("no run {id} in {store} (runs: {available})")]
    NoSuchRun {
        /// The id asked for.
        id: String,
        /// The store directory.
        store: PathBuf,
        /// The runs there are, for the message.
        available: String,
    },
    /// No run of that rank in the job.
    #[error("job {job} has no rank {rank} in this store (ranks: {available})")]
    NoSuchRank {
        /// The job.
        job: String,
        /// The rank asked for.
        rank: u32,
        /// The ranks the store holds, for the message.
        available: String,
    },
    /// No snapshot with that name in the run.
    #[error("no snapshot {name} in run {run} (snapshots: {available})")]
    NoSuchSnapshot {
        /// The name asked for.
        name: String,
        /// The run.
        run: String,
        /// The snapshots there are, for the message.
        available: String,
    },
    /// The snapshot's file was never finished (the capture or the writer was interrupted).
    #[error("snapshot {snapshot} is incomplete: its capture did not finish")]
    Incomplete {
        /// The snapshot's name.
        snapshot: String,
    },
    /// A snapshot file is damaged: truncated, wrong magic, a checksum or a structure that
    /// does not hold.
    #[error("snapshot {snapshot} is corrupt: {detail}")]
    Corrupt {
        /// The damaged snapshot's name.
        snapshot: String,
        /// What is wrong, with got and expected values where there are any.
        detail: String,
    },
    /// A snapshot file written by a newer or older, incompatible format version.
    #[error("snapshot {snapshot} has format version {found}; this sdt reads versions 1 to {supported}")]
    UnsupportedVersion {
        /// The snapshot's name.
        snapshot: String,
        /// The version in the file.
        found: u32,
        /// The newest version this build reads (it reads every one from 1 up).
        supported: u32,
    },
    /// An address outside every mapping of the snapshot.
    #[error("address {addr:#x} is not mapped in snapshot {snapshot}")]
    Unmapped {
        /// The address.
        addr: u64,
        /// The snapshot's name.
        snapshot: String,
    },
    /// An address in a mapping whose contents were not captured (`PROT_NONE`, `[vvar]`).
    #[error("address {addr:#x} is in an unreadable mapping of snapshot {snapshot}")]
    Unreadable {
        /// The address.
        addr: u64,
        /// The snapshot's name.
        snapshot: String,
    },
    /// A file that a mapping refers to changed since the capture.
    #[error("{path} changed since snapshot {snapshot} was taken ({detail})")]
    FileChanged {
        /// The file.
        path: String,
        /// The snapshot's name.
        snapshot: String,
        /// What differs, got vs expected.
        detail: String,
    },
    /// A file that a mapping refers to is not used for its pages: it is not a regular
    /// file, or the store's owner could not have read it.
    #[error("{path} is not read for snapshot {snapshot}: {why}")]
    FileRefused {
        /// The file.
        path: String,
        /// The snapshot's name.
        snapshot: String,
        /// Why not.
        why: String,
    },
    /// A run's `run.json` cannot be parsed.
    #[error("{path}: not a valid run description: {detail}")]
    BadRunInfo {
        /// The `run.json` file.
        path: PathBuf,
        /// What the JSON parser said.
        detail: String,
    },
    /// An `sdt` process is capturing or compacting the run.
    #[error("run {id} is being captured or compacted by another sdt process")]
    RunHeld {
        /// The run.
        id: String,
    },
    /// Compaction stopped because its caller asked it to ([`RunWriter::cancel_on`]); the
    /// snapshot stays raw.
    ///
    /// [`RunWriter::cancel_on`]: crate::RunWriter::cancel_on
    #[error("compaction was cancelled")]
    Cancelled,
    /// The writer was handed something that breaks its contract (a bug in the caller).
    #[error("store writer misuse: {0}")]
    BadInput(String),
    /// A system-level I/O error on a path.
    #[error("{path}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}
