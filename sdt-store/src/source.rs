//! A snapshot as those who export it read it: the ELF core writer (`sdt-gdb`) and the
//! CRIU image writer (`criu-export`) take any [`SnapshotSource`], so that their tests
//! give them snapshots built in memory.

use std::fs::File;
use std::ops::Range;
use std::path::PathBuf;

use crate::fileref::Reopen;
use crate::model::{Credentials, FileRef, SnapshotMeta};
use crate::trust::CredentialsRefused;

/// A snapshot to export: its metadata, its memory, which pages the store holds, the files
/// it maps, and what its store's owners may be trusted with. [`Snapshot`](crate::Snapshot)
/// is one.
pub trait SnapshotSource {
    /// Everything about the snapshot except page contents.
    fn meta(&self) -> &SnapshotMeta;
    /// Fills `buf` with the snapshot's memory at `addr`.
    fn read(&self, addr: u64, buf: &mut [u8]) -> crate::Result<()>;
    /// Page-aligned addresses of the pages whose contents the store holds, ascending.
    fn stored_ranges(&self) -> Vec<Range<u64>>;
    /// The file `f` names, if the store checks it to be the version mapped, a regular
    /// file and readable by the store's owner; else why not.
    fn open_file(&self, f: &FileRef) -> crate::Result<File>;
    /// Whether the pages the file `f` provides can be read ([`open_file`](Self::open_file)
    /// succeeds), or why not.
    fn check_file(&self, f: &FileRef) -> crate::Result<()> {
        self.open_file(f).map(drop)
    }
    /// Where the file `f` names lies if [`check_file`](Self::check_file) passes, for tools
    /// that open it by path: the recorded path, or a copy the store kept of that version.
    fn file_path(&self, f: &FileRef) -> crate::Result<PathBuf> {
        self.check_file(f).map(|()| PathBuf::from(&f.path))
    }
    /// Whether the file `f` is one the snapshot maps shared and that no longer exists, to
    /// be made again from the snapshot's pages of it
    /// ([`gone_shared_file`](crate::gone_shared_file)).
    fn shared_file_gone(&self, f: &FileRef) -> bool {
        crate::gone_shared_file(self.meta(), f)
    }
    /// Checks a file that will be opened by path, with root's rights (`criu restore`): that
    /// it is what `r` says and that the store's owners could open it so
    /// ([`Trust::reopen`](crate::Trust::reopen)); else why not.
    fn check_reopen(&self, r: &Reopen) -> crate::Result<()>;
    /// The credentials thread `tid` may be given: those recorded, if the store's owners
    /// have them ([`OwnerRights::credentials_of`](crate::OwnerRights::credentials_of));
    /// else why not.
    fn credentials_of(&self, tid: i32) -> Result<Credentials, CredentialsRefused>;
}
