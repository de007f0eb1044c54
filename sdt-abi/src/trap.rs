//! The trap: how a breaking thread hands its breakpoint to the tracer.
//!
//! When a breakpoint passes the filter, the library fills a [`TrapRecord`] on the breaking
//! thread's stack, loads [`TRAP_MAGIC`] into `rax` and the record's address into `rdi`, and
//! executes `int3`. The tracer (`sdt run`) sees the `SIGTRAP` stop, recognises the magic,
//! reads the record with `process_vm_readv`, freezes every other thread, captures, writes
//! the record back answered ([`TrapRecord::answered`]: the result in, the version out),
//! and resumes the thread without delivering the signal. An `int3` of the program's own
//! that comes later with the registers still as the trap left them (the compiler need not
//! reload `rax` and `rdi`) finds an answered record there, and gets its `SIGTRAP`.
//!
//! Bump [`PROTOCOL_VERSION`] whenever the record, the magic, the state values or the wire
//! form of the filter change.

/// Version of this protocol; carried in the record and in the [`ENV_CAPTURE`] value.
pub const PROTOCOL_VERSION: u32 = 1;

/// Value of `rax` at the `int3` of an SDT trap: `"SDTTRAP"` followed by the protocol version.
pub const TRAP_MAGIC: u64 = u64::from_le_bytes(*b"SDTTRAP\x01");

/// Environment variable holding the tracer's pid. The library turns itself on only when
/// `/proc/self/status` names that pid as its tracer, so a child that inherits the
/// environment but is not traced never traps.
pub const ENV_TRACER: &str = "SDT_TRACER";

/// Environment variable holding the [`Filter`](crate::Filter) in its wire form.
pub const ENV_CAPTURE: &str = "SDT_CAPTURE";

/// Symbol of the library's state word (an `int`), which the tracer finds in the program's
/// ELF symbols to switch breakpoints off or make the library look for a new filter.
pub const SYMBOL_STATE: &str = "sdt_state";

/// Symbol of the library's reconfiguration buffer ([`RECONFIG_SIZE`] bytes): a tracer
/// that takes over a program (a restored one) writes a new filter there, little-endian
/// `u32` length then the wire form, and sets the state word to [`STATE_UNINIT`]; the
/// next breakpoint adopts it.
pub const SYMBOL_RECONFIG: &str = "sdt_reconfig";

/// Size of the reconfiguration buffer.
pub const RECONFIG_SIZE: usize = 4096;

/// Library state word: breakpoints cost one predictable branch and do nothing.
pub const STATE_OFF: i32 = 0;
/// Library state word: not yet looked at the environment; the next breakpoint does.
pub const STATE_UNINIT: i32 = 1;
/// Library state word, at least this: running under `sdt run`; breakpoints are checked
/// against the filter. The word is `STATE_ON + max_level` (`i32::MAX` without a
/// `max_level`), so that `SetBreakpoint` drops too-deep breakpoints inline, without a
/// call: see [`state_for`].
///
/// Negated (at most `-STATE_ON`, see [`declined_state`]): running under `sdt run`, which
/// takes no more snapshots (`max_snapshots` reached, or the store failed). Breakpoints
/// are checked as under the positive word, and one that passes returns
/// [`RESULT_DECLINED`] at once, without stopping. (A library from before the negative
/// words skips the inline checks and traps; the tracer declines it the same.)
pub const STATE_ON: i32 = 2;

/// The state word for a session with `filter`: breakpoints deeper than it lets through
/// are filtered where `SetBreakpoint` is inlined. A negative level is left to the full
/// check.
pub fn state_for(filter: &crate::Filter) -> i32 {
    match filter.deepest_level() {
        Some(level) => STATE_ON.saturating_add(level.max(0)),
        None => i32::MAX,
    }
}

/// The state word that ends capturing under state word `state`: the negated word, which
/// keeps its inline checks; any other word (off, not set up, already declining) stays.
pub fn declined_state(state: i32) -> i32 {
    if state >= STATE_ON { -state } else { state }
}

/// The capturing state word whose checks state word `state` makes: itself, or the
/// positive word of a declining one.
#[inline(always)]
pub fn checked_state(state: i32) -> i32 {
    state.saturating_abs()
}

/// Whether a breakpoint at `level` gets past the inline check of state word `state`
/// (which must be at least [`STATE_ON`]: see [`checked_state`]).
#[inline(always)]
pub fn level_may_pass(state: i32, level: i32) -> bool {
    level <= state - STATE_ON
}

/// The library's class mask (`sdt_classes` in `sdt.h`) for a session with `filter`: bit
/// `c` is clear when no breakpoint of class `c` (0 to 63) can capture, so that
/// `SetBreakpoint` drops it inline, without a call. Classes outside 0–63 are left to the
/// full check.
pub fn class_mask_for(filter: &crate::Filter) -> u64 {
    let Some(classes) = &filter.classes else { return u64::MAX };
    let forced = filter.always.iter().map(|&(_, class, _)| class);
    classes.iter().copied().chain(forced).filter(|c| (0..64).contains(c)).fold(0, |mask, c| mask | 1 << c)
}

/// Whether a breakpoint of `class` gets past the inline check of class mask `mask`.
#[inline(always)]
pub fn class_may_pass(mask: u64, class: i32) -> bool {
    !(0..64).contains(&class) || mask >> class & 1 != 0
}

/// Words of the library's id mask (`sdt_ids` in `sdt.h`): one bit for each id from 0 to
/// `64 * ID_MASK_WORDS - 1`.
pub const ID_MASK_WORDS: usize = 64;

/// The library's id mask for a session with `filter`: bit `id % 64` of word `id / 64` is
/// clear when no breakpoint with that id can capture, so that `SetBreakpoint` drops it
/// inline. Ids outside the mask are left to the full check.
pub fn id_mask_for(filter: &crate::Filter) -> [u64; ID_MASK_WORDS] {
    let Some(spans) = &filter.ids else { return [u64::MAX; ID_MASK_WORDS] };
    let bits = (64 * ID_MASK_WORDS) as i64;
    let mut mask = [0u64; ID_MASK_WORDS];
    let forced = filter.always.iter().map(|&(_, _, id)| crate::Span::single(i64::from(id)));
    for span in spans.iter().copied().chain(forced) {
        for id in span.first.max(0)..=span.last.min(bits - 1) {
            mask[id as usize / 64] |= 1 << (id % 64);
        }
    }
    mask
}

/// Whether a breakpoint with `id` gets past the inline check of the id mask, whose
/// word `id / 64` is `word(id / 64)`.
#[inline(always)]
pub fn id_may_pass(word: impl FnOnce(usize) -> u64, id: i32) -> bool {
    !(0..(64 * ID_MASK_WORDS) as i32).contains(&id) || word(id as usize / 64) >> (id % 64) & 1 != 0
}

/// Breakpoint result: the program is not running under `sdt run`.
pub const RESULT_OFF: i64 = -1;
/// Breakpoint result: the capture config filtered this breakpoint out.
pub const RESULT_FILTERED: i64 = -2;
/// Breakpoint result: passed the filter, but the capture side took no snapshot
/// (`max_snapshots` reached, or the capture failed).
pub const RESULT_DECLINED: i64 = -3;

/// What the breaking thread tells the tracer. Lives on the thread's stack for the duration
/// of the trap.
///
/// Constraints the tracer checks: `version == PROTOCOL_VERSION`,
/// `size == size_of::<TrapRecord>()`, `attrs_len <= 4096`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct TrapRecord {
    /// [`PROTOCOL_VERSION`].
    pub version: u32,
    /// `size_of::<TrapRecord>()`, so that a newer tracer can tell an older record.
    pub size: u32,
    /// The breakpoint's level.
    pub level: i32,
    /// The breakpoint's class.
    pub class: i32,
    /// The breakpoint's id.
    pub id: i32,
    /// 0: only the first arrival captures; 1: every arrival may.
    pub multiple_mark: i32,
    /// Which arrival at this breakpoint this is, counting from 1 (0: not counted).
    pub hit: u64,
    /// Address of the attribute string in the target (not NUL-terminated here).
    pub attrs_ptr: u64,
    /// Length in bytes of the attribute string.
    pub attrs_len: u64,
    /// `CLOCK_MONOTONIC` in nanoseconds when the breakpoint was reached.
    pub trigger_ns: u64,
    /// Address of the library's state word, which the tracer sets to its
    /// [`declined_state`] once no more snapshots will be taken.
    pub state_ptr: u64,
    /// Written by the tracer: the snapshot number taken, or [`RESULT_DECLINED`].
    pub result: i64,
}

/// Size of [`TrapRecord`] in bytes; part of the protocol.
pub const TRAP_RECORD_SIZE: usize = 72;
const _: () = assert!(size_of::<TrapRecord>() == TRAP_RECORD_SIZE);

impl TrapRecord {
    /// Byte offset of [`TrapRecord::result`], which the tracer writes.
    pub const RESULT_OFFSET: usize = 64;

    /// Decodes a record read from the target; `None` if the bytes are too short or the
    /// version or size do not match.
    pub fn from_bytes(bytes: &[u8]) -> Option<TrapRecord> {
        let record: TrapRecord = bytemuck::try_pod_read_unaligned(bytes.get(..TRAP_RECORD_SIZE)?).ok()?;
        (record.version == PROTOCOL_VERSION && record.size as usize == TRAP_RECORD_SIZE).then_some(record)
    }

    /// The record as the tracer writes it back: `result` in, and the version
    /// [`ANSWERED`], so that it is not taken for a new breakpoint again.
    pub fn answered(self, result: i64) -> TrapRecord {
        TrapRecord { version: ANSWERED, result, ..self }
    }

    /// Whether `bytes` hold a record the tracer has answered already.
    pub fn is_answered(bytes: &[u8]) -> bool {
        let record: Option<TrapRecord> =
            bytes.get(..TRAP_RECORD_SIZE).and_then(|b| bytemuck::try_pod_read_unaligned(b).ok());
        record.is_some_and(|r| r.version == ANSWERED && r.size as usize == TRAP_RECORD_SIZE)
    }
}

/// [`TrapRecord::version`] of a record the tracer has answered.
pub const ANSWERED: u32 = 0;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Filter, Span};

    #[test]
    fn an_answered_record_is_no_breakpoint() {
        let record =
            TrapRecord { version: PROTOCOL_VERSION, size: TRAP_RECORD_SIZE as u32, ..TrapRecord::default() };
        let bytes = bytemuck::bytes_of(&record);
        assert_eq!(TrapRecord::from_bytes(bytes), Some(record));
        assert!(!TrapRecord::is_answered(bytes));
        let answered = record.answered(4);
        let bytes = bytemuck::bytes_of(&answered);
        assert_eq!(TrapRecord::from_bytes(bytes), None);
        assert!(TrapRecord::is_answered(bytes));
        assert_eq!(answered.result, 4);
        assert!(!TrapRecord::is_answered(&bytes[..10]));
    }

    #[test]
    fn class_mask_drops_only_classes_that_cannot_capture() {
        assert_eq!(class_mask_for(&Filter::default()), u64::MAX, "no classes key: every class may");
        let filter =
            Filter { classes: Some(vec![1, 5, 70, -2]), always: vec![(3, 9, 1)], ..Filter::default() };
        let mask = class_mask_for(&filter);
        assert_eq!(mask, 1 << 1 | 1 << 5 | 1 << 9, "listed and forced classes in 0-63");
        for class in [1, 5, 9, 64, 70, -1, -2, i32::MAX] {
            assert!(class_may_pass(mask, class), "class {class}");
        }
        for class in [0, 2, 6, 63] {
            assert!(!class_may_pass(mask, class), "class {class}");
        }
        assert!(!class_may_pass(class_mask_for(&Filter { classes: Some(vec![]), ..Filter::default() }), 0));
    }

    #[test]
    fn id_mask_drops_only_ids_that_cannot_capture() {
        assert_eq!(id_mask_for(&Filter::default()), [u64::MAX; ID_MASK_WORDS], "no ids key: every id may");
        let spans =
            vec![Span { first: -5, last: 2 }, Span { first: 63, last: 65 }, Span { first: 4095, last: 9000 }];
        let filter = Filter { ids: Some(spans), always: vec![(1, 1, 700)], ..Filter::default() };
        let mask = id_mask_for(&filter);
        let word = |i: usize| mask[i];
        for id in [0, 1, 2, 63, 64, 65, 700, 4095, 4096, 5000, -1, i32::MIN, i32::MAX] {
            assert!(id_may_pass(word, id), "id {id}");
        }
        for id in [3, 62, 66, 699, 701, 4094] {
            assert!(!id_may_pass(word, id), "id {id}");
        }
    }

    #[test]
    fn declining_keeps_the_inline_checks() {
        for state in [STATE_ON, STATE_ON + 3, i32::MAX] {
            let declined = declined_state(state);
            assert!(declined <= -STATE_ON, "{state}");
            assert_eq!(checked_state(declined), state);
            assert_eq!(declined_state(declined), declined, "declining twice");
        }
        for state in [STATE_OFF, STATE_UNINIT] {
            assert_eq!(declined_state(state), state, "off and not set up stay");
        }
        assert!(level_may_pass(checked_state(declined_state(STATE_ON + 2)), 2));
        assert!(!level_may_pass(checked_state(declined_state(STATE_ON + 2)), 3));
    }

    #[test]
    fn layout_matches_from_bytes() {
        let record = TrapRecord {
            version: PROTOCOL_VERSION,
            size: TRAP_RECORD_SIZE as u32,
            level: -1,
            class: 2,
            id: 3,
            multiple_mark: 1,
            hit: 5,
            attrs_ptr: 0x7fff_0000,
            attrs_len: 11,
            trigger_ns: 123_456,
            state_ptr: 0x5555_0000,
            result: RESULT_DECLINED,
        };
        // The record as the library lays it out in memory, field by field.
        let mut bytes = Vec::new();
        for v in [record.version, record.size] {
            bytes.extend_from_slice(&v.to_le_bytes());
        }
        for v in [record.level, record.class, record.id, record.multiple_mark] {
            bytes.extend_from_slice(&v.to_le_bytes());
        }
        for v in [record.hit, record.attrs_ptr, record.attrs_len, record.trigger_ns, record.state_ptr] {
            bytes.extend_from_slice(&v.to_le_bytes());
        }
        bytes.extend_from_slice(&record.result.to_le_bytes());
        assert_eq!(bytes.len(), TRAP_RECORD_SIZE);
        assert_eq!(TrapRecord::from_bytes(&bytes), Some(record));
        assert_eq!(std::mem::offset_of!(TrapRecord, result), TrapRecord::RESULT_OFFSET);
    }

    #[test]
    fn rejects_other_versions_and_short_input() {
        let mut bytes = vec![0u8; TRAP_RECORD_SIZE];
        bytes[4..8].copy_from_slice(&(TRAP_RECORD_SIZE as u32).to_le_bytes());
        assert_eq!(TrapRecord::from_bytes(&bytes), None, "version 0");
        bytes[0..4].copy_from_slice(&PROTOCOL_VERSION.to_le_bytes());
        assert!(TrapRecord::from_bytes(&bytes).is_some());
        assert_eq!(TrapRecord::from_bytes(&bytes[..TRAP_RECORD_SIZE - 1]), None);
    }
}
