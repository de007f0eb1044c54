//! Errors of the exporter.

use std::path::PathBuf;

/// Everything that can go wrong exporting a snapshot as CRIU images.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The snapshot holds no running thread whose id is the process id: CRIU restores a
    /// process around its leader.
    #[error("the snapshot has no running main thread (pid {pid}): CRIU cannot restore a process without it")]
    NoLeader {
        /// The process id.
        pid: i32,
    },
    /// A thread's register set has the wrong size (the snapshot breaks its own contract).
    #[error(transparent)]
    BadRegisters(#[from] sdt_store::RegsetSizeError),
    /// The snapshot does not record where the program's parts lie (start of code, data,
    /// heap, stack, arguments, environment), which CRIU's memory image needs.
    #[error(
        "snapshot {snapshot} has no memory layout (taken by an older sdt): it cannot be exported for CRIU"
    )]
    NoLayout {
        /// The snapshot's name.
        snapshot: String,
    },
    /// The snapshot holds an object CRIU images written here cannot express.
    #[error("{object}: {why}")]
    Unsupported {
        /// The object: `fd 3 (socket:[1234])`, `mapping 7f..-7f.. /SYSV00000000 (deleted)`.
        object: String,
        /// Why it cannot be exported.
        why: &'static str,
    },
    /// A thread's recorded credentials are more than the owner of its store has: the
    /// images would give them to whoever `criu restore` (as root) restores.
    #[error(transparent)]
    Credentials(#[from] sdt_store::CredentialsRefused),
    /// A file `criu restore`, as root, would open by path is not what the snapshot says,
    /// or not one the store's owners could open so.
    #[error("{object} is refused: `criu restore` would open it as root")]
    Refused {
        /// The descriptor or mapping, and its path: `fd 3 (/etc/shadow)`.
        object: String,
        /// Why it is refused.
        #[source]
        source: sdt_store::Error,
    },
    /// Reading the snapshot's memory, or checking a file it refers to, failed (the file
    /// changed since the capture, a damaged snapshot file, …).
    #[error("cannot read {what} from the snapshot")]
    Store {
        /// What was being read.
        what: String,
        /// What the store said.
        #[source]
        source: sdt_store::Error,
    },
    /// Writing an image to the sink failed.
    #[error("cannot write image {image}")]
    Write {
        /// The image's file name.
        image: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The output directory already holds files.
    #[error("{} is not empty: CRIU images go into a new or empty directory", path.display())]
    NotEmpty {
        /// The directory.
        path: PathBuf,
    },
    /// Creating, filling or renaming the image directory failed.
    #[error("cannot write image directory {}", path.display())]
    Dir {
        /// The directory (or the temporary one beside it).
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

impl From<sdt_store::OutputError> for Error {
    fn from(e: sdt_store::OutputError) -> Error {
        Error::Dir { path: e.path, source: e.source }
    }
}
