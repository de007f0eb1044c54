//! MPI programs: `sdt run` loads SDT's interposition library (`sdt-mpi`) into a program
//! that links an MPI, and hands it the rank's three history files
//! (`sdt_history::format`).
//!
//! ```text
//! launch:  DT_NEEDED → Mpi ─ library bytes → sealed memfd (LD_PRELOAD=/proc/self/fd/N)
//!          three files created in the store under temporary names (no run yet),
//!          their descriptors inherited (SDT_MPI_EVENTS_FD, …; in a replay, the
//!          replay record's too, decoded into a sealed memfd: SDT_MPI_REPLAY_FD)
//! drive:   the run exists → the files move into its directory (`mpi-events`, …)
//! capture: every thread stopped → the events header's count → SnapshotMeta::mpi_events
//! end:     the program has ended → `mpi-events` replaced by its packed form
//! ```
//!
//! The library never comes from a file in the store (which is untrusted) or any other
//! directory: its bytes are built into `sdt`.

use std::ffi::CString;
use std::fs::File;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;

use sdt_history::format::{self, COMMS_FILE, EVENTS_FILE, SITES_FILE};
use sdt_history::packed;
use sdt_history::replay::{self, RecordError};
use sdt_history::run::MAX_RECORDS;
use sdt_mpi::{
    ENV_COMMS_FD, ENV_END_CAPTURE, ENV_EVENTS_FD, ENV_REPLAY_FD, ENV_SITES_FD, ENV_STOP_AFTER,
    ENV_STOP_CAPTURE, Mpi,
};
use sdt_store::{PendingFile, Run, RunLog, Store};

use crate::launch::Linking;
use crate::libraries;

/// Why an MPI program cannot get its history library.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MpiError {
    /// The program's MPI has no library in this `sdt`.
    #[error(
        "{program} uses {name}, and this sdt was built without the message-history library for it: \
         install {package} (its mpicc builds the library) and rebuild sdt, or run with --no-mpi-history",
        name = .mpi.name(), package = .mpi.package()
    )]
    NoLibrary {
        /// The program.
        program: String,
        /// Its MPI.
        mpi: Mpi,
    },
    /// The library's memfd could not be made.
    #[error("loading the message-history library")]
    Memfd(#[source] sdt_sys::Error),
    /// The replay record cannot be opened.
    #[error("opening the replay record {path}")]
    Replay {
        /// The record.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The replay record does not read: it is damaged, or not a replay record.
    #[error("the replay record {path} cannot be used")]
    ReplayRecord {
        /// The record.
        path: String,
        /// What is wrong with it.
        #[source]
        source: RecordError,
    },
}

/// The MPI `program` links, by its `DT_NEEDED` entries and those of the libraries it
/// loads (a Fortran program links MPI's Fortran library, which links MPI), found with
/// the `LD_LIBRARY_PATH` it would run with (sdt's own); `None` for a program that links
/// none, or that is not a 64-bit ELF file (a script).
pub fn mpi_of(program: &Path) -> Option<Mpi> {
    let direct = Linking::of(program, &[]).needed;
    Mpi::of_needed(&direct).or_else(|| {
        Mpi::of_needed(&libraries::loaded(program, std::env::var_os("LD_LIBRARY_PATH").as_deref()))
    })
}

/// What an MPI program is launched with: the library and the history files, made before
/// its run exists.
pub(crate) struct MpiLaunch {
    library: OwnedFd,
    /// `mpi-events`, `mpi-comms`, `mpi-sites`.
    files: [PendingFile; 3],
    /// The replay record, in a replay.
    replay: Option<OwnedFd>,
    /// Where a replayed rank stops.
    stop: Option<MpiStop>,
}

/// Where a replayed rank stops: before its first MPI call once it has recorded
/// `after_events` events (at least 1: its `MPI_Init`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MpiStop {
    /// The rank's events before the stop.
    pub after_events: u64,
    /// Whether the rank traps for a snapshot where it stops (else the cut is one the
    /// capture config takes, a global snapshot's breakpoint).
    pub capture: bool,
}

impl MpiLaunch {
    /// The library and files for `program`, if it links an MPI.
    pub(crate) fn prepare(
        program: &Path,
        store: &Store,
        replay: Option<&Path>,
        stop: Option<MpiStop>,
    ) -> Result<Option<MpiLaunch>, crate::Error> {
        let Some(mpi) = mpi_of(program) else { return Ok(None) };
        let bytes = mpi
            .library()
            .ok_or_else(|| MpiError::NoLibrary { program: program.display().to_string(), mpi })?;
        let name = CString::new("sdt-mpi").expect("no NUL in a literal");
        let library = sdt_sys::spawn::sealed_memfd(&name, bytes).map_err(MpiError::Memfd)?;
        let files = [
            store.create_pending(EVENTS_FILE)?,
            store.create_pending(COMMS_FILE)?,
            store.create_pending(SITES_FILE)?,
        ];
        let replay = replay.map(replay_copy).transpose()?;
        Ok(Some(MpiLaunch { library, files, replay, stop }))
    }

    /// The descriptors the program inherits.
    pub(crate) fn fds(&self) -> Vec<i32> {
        let mut fds = vec![self.library.as_raw_fd()];
        fds.extend(self.files.iter().map(|f| f.file().as_raw_fd()));
        fds.extend(self.replay.as_ref().map(OwnedFd::as_raw_fd));
        fds
    }

    /// The environment variables that load the library (LD_PRELOAD, before what
    /// `preload` already holds) and name its files; with `end_capture`, the rank traps
    /// for a snapshot as it ends the job ([`ENV_END_CAPTURE`]).
    pub(crate) fn env(&self, preload: Option<&[u8]>, end_capture: bool) -> Vec<(String, Vec<u8>)> {
        let mut ld_preload = format!("/proc/self/fd/{}", self.library.as_raw_fd()).into_bytes();
        if let Some(rest) = preload.filter(|p| !p.is_empty()) {
            ld_preload.push(b':');
            ld_preload.extend_from_slice(rest);
        }
        let [events, comms, sites] = &self.files;
        let mut env = vec![
            ("LD_PRELOAD".into(), ld_preload),
            (ENV_EVENTS_FD.into(), events.file().as_raw_fd().to_string().into_bytes()),
            (ENV_COMMS_FD.into(), comms.file().as_raw_fd().to_string().into_bytes()),
            (ENV_SITES_FD.into(), sites.file().as_raw_fd().to_string().into_bytes()),
        ];
        if let Some(replay) = &self.replay {
            env.push((ENV_REPLAY_FD.into(), replay.as_raw_fd().to_string().into_bytes()));
        }
        if let Some(stop) = self.stop {
            env.push((ENV_STOP_AFTER.into(), stop.after_events.to_string().into_bytes()));
            if stop.capture {
                env.push((ENV_STOP_CAPTURE.into(), b"1".to_vec()));
            }
        }
        if end_capture {
            env.push((ENV_END_CAPTURE.into(), b"1".to_vec()));
        }
        env
    }

    /// Once the program runs: the files, to move into its run.
    pub(crate) fn into_files(self) -> [PendingFile; 3] {
        self.files
    }
}

/// Largest replay record read.
const MAX_REPLAY_BYTES: u64 = 1 << 30;

/// The replay record at `path`, decoded and handed to the program in a sealed memfd, in
/// the fixed layout its library reads (`replay::write_fixed`): the record is a file of
/// the store, untrusted, and neither a descriptor of it (a link could point anywhere
/// `sdt` can read) nor its bytes reach the program. Only a regular file is read, without
/// following a link and without waiting on a FIFO.
fn replay_copy(path: &Path) -> Result<OwnedFd, MpiError> {
    let fail = |source| MpiError::Replay { path: path.display().to_string(), source };
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .map_err(fail)?;
    let meta = file.metadata().map_err(fail)?;
    if !meta.is_file() || meta.len() > MAX_REPLAY_BYTES {
        return Err(fail(std::io::Error::other("not a regular file of at most 1 GiB")));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    std::io::Read::read_to_end(&mut std::io::Read::take(&mut file, MAX_REPLAY_BYTES), &mut bytes)
        .map_err(fail)?;
    let (record, ranks) = replay::read(&bytes)
        .map_err(|source| MpiError::ReplayRecord { path: path.display().to_string(), source })?;
    let name = CString::new("sdt-mpi-replay").expect("no NUL in a literal");
    sdt_sys::spawn::sealed_memfd(&name, &replay::write_fixed(&record, ranks)).map_err(MpiError::Memfd)
}

/// Moves the files into the run's directory; returns the events file and the
/// descriptors (number, target) the program inherited them as.
pub(crate) fn adopt(
    log: &RunLog,
    files: [PendingFile; 3],
) -> Result<(RankEvents, Vec<(i32, String)>), crate::Error> {
    let mut inherited = Vec::new();
    let mut events = None;
    for (pending, name) in files.into_iter().zip([EVENTS_FILE, COMMS_FILE, SITES_FILE]) {
        let fd = pending.file().as_raw_fd();
        let file = log.adopt(pending, name)?;
        // The program's descriptor has the number of ours and names the same file.
        if let Ok(target) = std::fs::read_link(format!("/proc/self/fd/{fd}")) {
            inherited.push((fd, target.display().to_string()));
        }
        events.get_or_insert(file);
    }
    let events = RankEvents { file: events.expect("three files"), run: log.run().clone() };
    Ok((events, inherited))
}

/// The rank's `mpi-events`, which the program's library writes, in its run.
pub(crate) struct RankEvents {
    file: File,
    run: Run,
}

impl RankEvents {
    /// The number of events the rank has recorded (the header's count; 0 before its
    /// `MPI_Init` writes the header); `None` if the file holds something else.
    pub(crate) fn recorded(&self) -> Option<u64> {
        let mut prefix = [0; format::COUNT_PREFIX];
        match self.file.read_at(&mut prefix, 0).ok()? {
            0 => Some(0),
            _ => self.file.read_exact_at(&mut prefix, 0).ok().and_then(|()| format::count(&prefix)),
        }
    }

    /// Once the program has ended, puts the packed form of the events (`sdt_history::packed`)
    /// in the file's place: a few bytes an event instead of 32. Where it cannot (the file
    /// is not one it packs whole, or writing fails), cuts the file down to its records
    /// instead (the library grows it a chunk at a time): what is after the last one is
    /// disk taken for nothing. Never while the program runs: it writes the file through
    /// its mapping.
    pub(crate) fn pack(&self) {
        let start = sdt_sys::monotonic_ns();
        let packed = packed::pack(|buffer, at| self.file.read_exact_at(buffer, at), MAX_RECORDS);
        let placed = match packed {
            Ok(Some(bytes)) => self.run.replace_small_file(EVENTS_FILE, &bytes).map(|()| Some(bytes.len())),
            Ok(None) => Ok(None),
            Err(e) => Err(sdt_store::Error::Io { path: self.run.dir().join(EVENTS_FILE), source: e }),
        };
        match placed {
            Ok(Some(bytes)) => log::debug!(
                "message history packed: {:?} events in {bytes} bytes, {} µs",
                self.recorded(),
                (sdt_sys::monotonic_ns() - start) / 1000
            ),
            Ok(None) => self.trim(),
            Err(e) => {
                log::debug!("packing the message history: {e}");
                self.trim();
            }
        }
    }

    fn trim(&self) {
        let Some(count) = self.recorded() else { return };
        let end = format::HEADER_SIZE + count * u64::from(format::RECORD_SIZE);
        if count > 0
            && self.file.metadata().is_ok_and(|m| m.len() > end)
            && let Err(e) = self.file.set_len(end)
        {
            log::debug!("trimming the message history: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::FileExt;

    use sdt_history::races::{Enforced, Record};

    use super::*;

    fn record() -> Record {
        let entry = |seq, source| Enforced { rank: 0, seq, post: None, source, send: Some(seq), tag: 1 };
        Record { enforced: vec![entry(4, 1), entry(9, 2)], receives: 6, every_match_bytes: Some(80) }
    }

    /// What the program's descriptor holds.
    fn contents(fd: OwnedFd) -> Vec<u8> {
        let file = File::from(fd);
        let mut bytes = vec![0; file.metadata().unwrap().len() as usize];
        file.read_exact_at(&mut bytes, 0).unwrap();
        bytes
    }

    #[test]
    fn the_program_gets_the_record_in_the_fixed_layout() {
        let dir = tempfile::tempdir().unwrap();
        let fixed = replay::write_fixed(&record(), 3);
        for stored in [replay::write(&record(), 3), fixed.clone()] {
            let path = dir.path().join("mpi-replay");
            std::fs::write(&path, &stored).unwrap();
            assert_eq!(contents(replay_copy(&path).unwrap()), fixed);
        }
    }

    #[test]
    fn a_damaged_record_is_an_error_that_names_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("mpi-replay");
        let stored = replay::write(&record(), 3);
        for damaged in [&stored[..stored.len() - 3], &stored[..20], b"not a record at all"] {
            std::fs::write(&path, damaged).unwrap();
            let err = replay_copy(&path).unwrap_err();
            assert!(matches!(err, MpiError::ReplayRecord { .. }), "{err:?}");
            assert!(err.to_string().contains(&path.display().to_string()), "{err}");
        }
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&path, &link).unwrap();
        assert!(matches!(replay_copy(&link), Err(MpiError::Replay { .. })));
    }
}
