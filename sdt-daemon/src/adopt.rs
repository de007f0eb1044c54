//! Taking over a restored process: its library learns the new capture filter, and a
//! thread restored at a breakpoint gets the answer its call was waiting for.
//!
//! The library's state word and reconfiguration buffer are found by their ELF symbols
//! ([`SYMBOL_STATE`], [`SYMBOL_RECONFIG`]) in the program or its `libsdt.so`, placed at
//! the address the snapshot's mapping of that file gives them.

use sdt_abi::{
    Filter, RECONFIG_SIZE, STATE_OFF, STATE_UNINIT, SYMBOL_RECONFIG, SYMBOL_STATE, TRAP_RECORD_SIZE, TrapRecord,
};
use sdt_store::{Content, Mapping, Snapshot, Trigger};
use sdt_sys::{Tid, memory};

use object::{Object, ObjectSegment, ObjectSymbol};

/// Where the restored program's library keeps its state.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Library {
    /// `sdt_state`.
    state: u64,
    /// `sdt_reconfig`.
    reconfig: u64,
}

impl Library {
    /// Finds the library's symbols in the files the snapshot maps; `None` if the program
    /// does not use libsdt (or its symbols were stripped).
    pub(crate) fn find(snap: &Snapshot) -> Option<Library> {
        let meta = snap.meta();
        let mut files: Vec<&str> = Vec::new();
        for m in &meta.mappings {
            if let Content::File(f) = &m.content {
                if !files.contains(&f.path.as_str()) {
                    files.push(&f.path);
                }
            }
        }
        // The program itself and libsdt first: the symbols are almost always there.
        files.sort_by_key(|f| (*f != meta.process.exe, !f.contains("libsdt")));
        files.into_iter().find_map(|path| {
            let data = std::fs::read(path).ok()?;
            let elf = object::File::parse(&*data).ok()?;
            let symbol = |name: &str| {
                elf.symbols().chain(elf.dynamic_symbols()).find(|s| s.name() == Ok(name)).map(|s| s.address())
            };
            let (state, reconfig) = (symbol(SYMBOL_STATE)?, symbol(SYMBOL_RECONFIG)?);
            let bias = load_bias(&elf, &meta.mappings, path)?;
            Some(Library { state: state.wrapping_add(bias), reconfig: reconfig.wrapping_add(bias) })
        })
    }

    /// Hands `filter` to the library: its next breakpoint adopts it.
    pub(crate) fn install(&self, pid: Tid, filter: &Filter) -> Result<(), String> {
        let wire = filter.encode();
        if wire.len() + 4 > RECONFIG_SIZE {
            return Err(format!("the capture config is too large to hand over ({} bytes)", wire.len()));
        }
        let mut buf = (wire.len() as u32).to_le_bytes().to_vec();
        buf.extend_from_slice(wire.as_bytes());
        memory::write(pid, self.reconfig, &buf).map_err(|e| format!("writing the new filter: {e}"))?;
        self.set_state(pid, STATE_UNINIT)
    }

    /// Switches every breakpoint off: they return at once, and never trap.
    pub(crate) fn switch_off(&self, pid: Tid) -> Result<(), String> {
        self.set_state(pid, STATE_OFF)
    }

    fn set_state(&self, pid: Tid, state: i32) -> Result<(), String> {
        memory::write(pid, self.state, &state.to_le_bytes()).map_err(|e| format!("writing the library's state: {e}"))
    }
}

/// Where the file at `path` was loaded: its first mapping at file offset 0, less the
/// first loadable segment's page.
fn load_bias(elf: &object::File<'_>, mappings: &[Mapping], path: &str) -> Option<u64> {
    let first = elf.segments().map(|s| s.address()).min()? & !0xfff;
    let start = mappings.iter().find(|m| m.offset == 0 && m.path == path)?.start;
    Some(start.wrapping_sub(first))
}

/// If `snap` was taken at a breakpoint, gives the breaking thread (`host`, restored) the
/// answer its call awaits: `result`, written into its trap record.
pub(crate) fn answer_breakpoint(snap: &Snapshot, host: Tid, result: i64) -> Result<(), String> {
    let meta = snap.meta();
    let Trigger::Breakpoint { tid, .. } = meta.trigger else { return Ok(()) };
    let Some(thread) = meta.threads.iter().find(|t| t.tid == tid) else { return Ok(()) };
    let record_at = thread.reg("rdi").unwrap_or(0);
    let mut bytes = [0u8; TRAP_RECORD_SIZE];
    if snap.read(record_at, &mut bytes).ok().and_then(|()| TrapRecord::from_bytes(&bytes)).is_none() {
        return Err(format!("thread {tid} holds no readable trap record at {record_at:#x}"));
    }
    memory::write(host, record_at + TrapRecord::RESULT_OFFSET as u64, &result.to_le_bytes())
        .map_err(|e| format!("answering the breakpoint of thread {tid}: {e}"))
}
