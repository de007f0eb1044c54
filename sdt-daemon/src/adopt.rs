//! Taking over a restored process: its SDT library (found by
//! [`sdt_target::Library`]) learns the new capture filter, or is switched off.

use sdt_abi::{Filter, RECONFIG_SIZE, STATE_OFF, STATE_UNINIT};
use sdt_sys::{Tid, memory};
use sdt_target::Library;

/// Hands `filter` to the library: its next breakpoint adopts it.
pub(crate) fn install(library: &Library, pid: Tid, filter: &Filter) -> Result<(), String> {
    let reconfig = library.reconfig.ok_or(
        "the program's libsdt has no sdt_reconfig symbol (stripped, or an older libsdt): it cannot take a new filter",
    )?;
    let wire = filter.encode();
    if wire.len() + 4 > RECONFIG_SIZE {
        return Err(format!("the capture config is too large to hand over ({} bytes)", wire.len()));
    }
    let mut buf = (wire.len() as u32).to_le_bytes().to_vec();
    buf.extend_from_slice(wire.as_bytes());
    memory::write(pid, reconfig, &buf).map_err(|e| format!("writing the new filter: {e}"))?;
    set_state(library, pid, STATE_UNINIT)
}

/// Switches every breakpoint off: they return at once, and never trap.
pub(crate) fn switch_off(library: &Library, pid: Tid) -> Result<(), String> {
    set_state(library, pid, STATE_OFF)
}

fn set_state(library: &Library, pid: Tid, state: i32) -> Result<(), String> {
    memory::write(pid, library.state, &state.to_le_bytes())
        .map_err(|e| format!("writing the library's state: {e}"))
}
