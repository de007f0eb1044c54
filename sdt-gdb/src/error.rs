//! Errors of the exporter.

use std::path::PathBuf;

/// Everything that can go wrong writing a core file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The snapshot lists no threads, so there is no `NT_PRSTATUS` to write first.
    #[error("the snapshot has no threads")]
    NoThreads,
    /// A thread's register set has the wrong size (the snapshot breaks its own contract).
    #[error(transparent)]
    BadRegisters(#[from] sdt_store::RegsetSizeError),
    /// Reading a mapping's contents from the snapshot failed (a file it maps changed, a
    /// damaged snapshot file, …).
    #[error("cannot read mapping {start:#x}-{end:#x} {path} from the snapshot")]
    Store {
        /// The mapping's path as in maps (may be empty or a pseudo-path).
        path: String,
        /// First address of the mapping.
        start: u64,
        /// One past its last address.
        end: u64,
        /// What the store said.
        #[source]
        source: sdt_store::Error,
    },
    /// Writing to the output of [`write_core`](crate::core::write_core) failed.
    #[error("cannot write the core file")]
    Write(#[source] std::io::Error),
    /// Creating, writing or renaming the core file at a path failed.
    #[error("cannot write core file {}", path.display())]
    File {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

impl From<sdt_store::OutputError> for Error {
    fn from(e: sdt_store::OutputError) -> Error {
        Error::File { path: e.path, source: e.source }
    }
}
