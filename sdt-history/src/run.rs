//! A rank's history as its run in the store holds it.

use sdt_store::Run;

use crate::format::{self, COMMS_FILE, EVENTS_FILE, FormatError, SITES_FILE};
use crate::{RankHistory, packed};

/// Most records of a rank read: 2^25 (a rank that recorded more is refused rather than
/// read into memory).
pub const MAX_RECORDS: u64 = 1 << 25;
/// Largest `mpi-events` read, in either form: the header and [`MAX_RECORDS`] records
/// (the packed form takes less).
pub const MAX_EVENTS_BYTES: u64 = format::HEADER_SIZE + (format::RECORD_SIZE as u64) * MAX_RECORDS;
/// Largest `mpi-comms` or `mpi-sites` read.
pub const MAX_TABLE_BYTES: u64 = 64 << 20;

/// Why a run's history cannot be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HistoryError {
    /// A file of the run cannot be read (or is too large).
    #[error(transparent)]
    Store(#[from] sdt_store::Error),
    /// The files do not hold a history.
    #[error("the MPI history of run {run} is damaged: {source}")]
    Format {
        /// The run.
        run: String,
        /// What does not hold.
        #[source]
        source: FormatError,
    },
}

/// The history of the rank that `run` captured; `None` when it recorded none (not an
/// MPI program, `--no-mpi-history`, or a rank that never reached `MPI_Init`).
pub fn read_run(run: &Run) -> Result<Option<RankHistory>, HistoryError> {
    let Some(events) = run.read_small_file(EVENTS_FILE, MAX_EVENTS_BYTES)? else { return Ok(None) };
    if packed::recorded(&events).is_none() {
        return Ok(None);
    }
    let damaged = |source| HistoryError::Format { run: run.id().to_string(), source };
    let events = match packed::is_packed(&events) {
        true => packed::unpack(&events, MAX_RECORDS).map_err(damaged)?,
        false => events,
    };
    let text = |name| -> Result<String, HistoryError> {
        let bytes = run.read_small_file(name, MAX_TABLE_BYTES)?.unwrap_or_default();
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    };
    let (comms, sites) = (text(COMMS_FILE)?, text(SITES_FILE)?);
    format::read_rank(&events, &comms, &sites).map(Some).map_err(damaged)
}
