//! Taking over a restored process: its SDT library (found by
//! [`sdt_target::Library`]) learns the new capture filter, or is switched off.

use sdt_abi::{Filter, RECONFIG_SIZE, STATE_OFF, STATE_UNINIT};
use sdt_sys::{Tid, memory};
use sdt_target::Library;

/// Why a restored process cannot be taken over.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AdoptError {
    /// The program's library is not found: its breakpoints cannot be reached.
    #[error(
        "the program's libsdt state word was not found: its breakpoints cannot be reached (was it stripped?)"
    )]
    NoLibrary,
    /// The library cannot take a new filter.
    #[error(
        "the program's libsdt has no sdt_reconfig symbol (stripped, or an older libsdt): it cannot take a new filter"
    )]
    NoReconfig,
    /// The filter does not fit where the library takes it.
    #[error("the capture config is too large to hand over ({bytes} bytes, at most {max})")]
    FilterTooLarge {
        /// Its encoded size.
        bytes: usize,
        /// What the library has room for.
        max: usize,
    },
    /// The new filter could not be written into the program.
    #[error("writing the new filter")]
    WriteFilter(#[source] sdt_sys::Error),
    /// The library's state word could not be written.
    #[error("writing the library's state")]
    WriteState(#[source] sdt_sys::Error),
}

/// Hands `filter` to the library: its next breakpoint adopts it.
pub(crate) fn install(library: &Library, pid: Tid, filter: &Filter) -> Result<(), AdoptError> {
    let reconfig = library.reconfig.ok_or(AdoptError::NoReconfig)?;
    let wire = filter.encode();
    // The length word comes first.
    let max = RECONFIG_SIZE - 4;
    if wire.len() > max {
        return Err(AdoptError::FilterTooLarge { bytes: wire.len(), max });
    }
    let mut buf = (wire.len() as u32).to_le_bytes().to_vec();
    buf.extend_from_slice(wire.as_bytes());
    memory::write(pid, reconfig, &buf).map_err(AdoptError::WriteFilter)?;
    set_state(library, pid, STATE_UNINIT)
}

/// Switches every breakpoint off: they return at once, and never trap.
pub(crate) fn switch_off(library: &Library, pid: Tid) -> Result<(), AdoptError> {
    set_state(library, pid, STATE_OFF)
}

fn set_state(library: &Library, pid: Tid, state: i32) -> Result<(), AdoptError> {
    memory::write(pid, library.state, &state.to_le_bytes()).map_err(AdoptError::WriteState)
}
