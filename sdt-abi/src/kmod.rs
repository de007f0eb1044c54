//! The interface of SDT's kernel module, `/dev/sdt`: a mirror of
//! `kmod/include/uapi/linux/sdt_kmod.h`, whose comment describes the operations.
//!
//! ```text
//!  daemon                                  program (libsdt)
//!  PTRACE_SEIZE, IOC_REGISTER, DETACH      IOC_QUERY: registered by SDT_TRACER's pid?
//!  poll(/dev/sdt)                          IOC_TRIGGER(&record): held until released
//!  IOC_GET: every held thread's registers
//!  IOC_RELEASE(result)                     record.result = result
//! ```
//!
//! The structures are `#[repr(C)]` so that `sdt-sys` can hand them to `ioctl`; a test
//! compiles the C header and compares every size, offset and request number. The
//! variable part of `IOC_GET` (one [`Thread`] record per held thread, each followed by
//! its XSAVE area) is decoded from bytes by [`Thread::from_bytes`], length-checked.
//!
//! Bump [`KMOD_VERSION`] (and `SDT_KMOD_VERSION` in the header) whenever either changes.

use std::fmt;

use crate::filter::Filter;
use crate::regs::{FPREGS_SIZE, GPREGS_SIZE};
use crate::trap::TrapRecord;

/// `SDT_KMOD_VERSION`: the version of this interface.
pub const KMOD_VERSION: u32 = 2;

/// Where the module's device appears.
pub const DEVICE: &str = "/dev/sdt";

/// `SDT_ATTRS_MAX`: the longest attribute string the module reads.
pub const ATTRS_MAX: u64 = 4096;

/// `SDT_FILTER_*`: which conditions a [`FilterHeader`] has.
pub mod filter_flags {
    /// `max_level` applies.
    pub const MAX_LEVEL: u32 = 1 << 0;
    /// Only classes in a [`super::RULE_CLASS`] rule pass.
    pub const CLASSES: u32 = 1 << 1;
    /// Only ids in a [`super::RULE_ID`] span pass.
    pub const IDS: u32 = 1 << 2;
    /// Only hits in a [`super::RULE_HIT`] span pass.
    pub const HITS: u32 = 1 << 3;
}

/// `SDT_FILTER_MAX_RULES`.
pub const FILTER_MAX_RULES: usize = 4096;
/// `SDT_FILTER_MAX_STRINGS`.
pub const FILTER_MAX_STRINGS: usize = 65536;

/// `SDT_RULE_CLASS`: a span of classes.
pub const RULE_CLASS: u32 = 1;
/// `SDT_RULE_ID`: a span of ids.
pub const RULE_ID: u32 = 2;
/// `SDT_RULE_HIT`: a span of hit numbers.
pub const RULE_HIT: u32 = 3;
/// `SDT_RULE_ATTR`: an attribute key and its glob.
pub const RULE_ATTR: u32 = 4;
/// `SDT_RULE_ALWAYS`: a breakpoint that passes regardless.
pub const RULE_ALWAYS: u32 = 5;

/// `struct sdt_filter`: the head of a registered filter, followed by its rules and
/// strings.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FilterHeader {
    /// [`filter_flags`].
    pub flags: u32,
    /// With [`filter_flags::MAX_LEVEL`]: the deepest level that passes.
    pub max_level: i32,
    /// Rules that follow.
    pub nr_rules: u32,
    /// Bytes of keys and globs after the rules.
    pub strings_len: u32,
}

/// `struct sdt_rule`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Rule {
    /// `RULE_*`.
    pub kind: u32,
    /// [`RULE_ALWAYS`]: the breakpoint's level.
    pub level: i32,
    /// [`RULE_ALWAYS`]: its class.
    pub class: i32,
    /// [`RULE_ALWAYS`]: its id.
    pub id: i32,
    /// Spans: the first number.
    pub first: i64,
    /// Spans: the last number, `>= first`.
    pub last: i64,
    /// [`RULE_ATTR`]: where the key starts in the strings.
    pub key_off: u32,
    /// Its length.
    pub key_len: u32,
    /// Where the glob starts in the strings.
    pub glob_off: u32,
    /// Its length.
    pub glob_len: u32,
}

/// A filter the module cannot take.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FilterTooLarge {
    /// Rules it would need.
    pub rules: usize,
    /// Bytes of attribute keys and globs.
    pub strings: usize,
}

impl fmt::Display for FilterTooLarge {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the capture config is too large for the kernel module: {} rules and {} bytes of \
             attributes (at most {FILTER_MAX_RULES} and {FILTER_MAX_STRINGS})",
            self.rules, self.strings
        )
    }
}

impl std::error::Error for FilterTooLarge {}

/// The filter as `IOC_REGISTER` takes it: a [`FilterHeader`], the rules, the strings.
pub fn encode_filter(filter: &Filter) -> Result<Vec<u8>, FilterTooLarge> {
    let mut header = FilterHeader::default();
    let mut rules = Vec::new();
    let mut strings = Vec::new();
    if let Some(max) = filter.max_level {
        header.flags |= filter_flags::MAX_LEVEL;
        header.max_level = max;
    }
    let span = |kind, first, last| Rule { kind, first, last, ..Rule::default() };
    if let Some(classes) = &filter.classes {
        header.flags |= filter_flags::CLASSES;
        rules.extend(classes.iter().map(|&c| span(RULE_CLASS, i64::from(c), i64::from(c))));
    }
    if let Some(ids) = &filter.ids {
        header.flags |= filter_flags::IDS;
        rules.extend(ids.iter().map(|s| span(RULE_ID, s.first, s.last)));
    }
    if let Some(hits) = &filter.hits {
        header.flags |= filter_flags::HITS;
        rules.extend(hits.iter().map(|s| span(RULE_HIT, s.first, s.last)));
    }
    for (key, glob) in &filter.attrs {
        let mut rule = Rule { kind: RULE_ATTR, ..Rule::default() };
        (rule.key_off, rule.key_len) = (strings.len() as u32, key.len() as u32);
        strings.extend_from_slice(key.as_bytes());
        (rule.glob_off, rule.glob_len) = (strings.len() as u32, glob.len() as u32);
        strings.extend_from_slice(glob.as_bytes());
        rules.push(rule);
    }
    for &(level, class, id) in &filter.always {
        rules.push(Rule { kind: RULE_ALWAYS, level, class, id, ..Rule::default() });
    }
    if rules.len() > FILTER_MAX_RULES || strings.len() > FILTER_MAX_STRINGS {
        return Err(FilterTooLarge { rules: rules.len(), strings: strings.len() });
    }
    header.nr_rules = rules.len() as u32;
    header.strings_len = strings.len() as u32;

    let mut out = Vec::with_capacity(16 + rules.len() * 48 + strings.len());
    for v in [header.flags, header.max_level as u32, header.nr_rules, header.strings_len] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    for r in &rules {
        for v in [r.kind, r.level as u32, r.class as u32, r.id as u32] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out.extend_from_slice(&r.first.to_le_bytes());
        out.extend_from_slice(&r.last.to_le_bytes());
        for v in [r.key_off, r.key_len, r.glob_off, r.glob_len] {
            out.extend_from_slice(&v.to_le_bytes());
        }
    }
    out.extend_from_slice(&strings);
    Ok(out)
}

/// `struct sdt_version`: what `IOC_VERSION` says of the module.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Version {
    /// The module's [`KMOD_VERSION`].
    pub version: u32,
    /// Bytes per thread record in `IOC_GET`.
    pub thread_size: u32,
    /// Bytes of XSAVE area per thread (0: the CPU has none).
    pub xstate_size: u32,
    /// Zero.
    pub reserved: u32,
}

/// `struct sdt_register`: `IOC_REGISTER`'s argument.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Register {
    /// [`KMOD_VERSION`].
    pub version: u32,
    /// `size_of::<Register>()`.
    pub size: u32,
    /// The program's pid; the caller must be its ptrace tracer.
    pub pid: i32,
    /// Bytes at `filter`.
    pub filter_len: u32,
    /// Address of the [`encode_filter`] bytes.
    pub filter: u64,
}

/// `struct sdt_query`: what `IOC_QUERY` tells the calling process.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Query {
    /// The module's [`KMOD_VERSION`].
    pub version: u32,
    /// 1 if the caller's process is registered.
    pub registered: u32,
    /// The process that registered it (0 if it cannot be seen).
    pub daemon_pid: i32,
    /// Zero.
    pub reserved: u32,
}

/// `SDT_RELEASE_TURN_OFF`: no more snapshots; the module negates the program's state word
/// ([`crate::declined_state`]), so that its breakpoints that pass are declined in the
/// program.
pub const RELEASE_TURN_OFF: u32 = 1;

/// `struct sdt_release`: `IOC_RELEASE`'s argument.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Release {
    /// The breaking thread's result: a snapshot number or `RESULT_*`.
    pub result: i64,
    /// [`RELEASE_TURN_OFF`].
    pub flags: u32,
    /// Zero.
    pub reserved: u32,
}

/// `struct sdt_sigaction`: a signal's disposition.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SigAction {
    /// Handler address, `SIG_DFL` (0) or `SIG_IGN` (1).
    pub handler: u64,
    /// `SA_*` flags.
    pub flags: u64,
    /// `sa_restorer`.
    pub restorer: u64,
    /// Signals blocked while the handler runs.
    pub mask: u64,
}

/// `SDT_NSIG`: dispositions in a [`Snapshot`].
pub const NSIG: usize = 64;

/// `SDT_GET_WAIT`: `IOC_GET` blocks until a capture is ready.
pub const GET_WAIT: u32 = 1;
/// `SDT_CAPTURE_TRIGGER`: the capture is for a breakpoint.
pub const CAPTURE_TRIGGER: u32 = 1;
/// `SDT_CAPTURE_FREEZE`: the capture is for `IOC_FREEZE`.
pub const CAPTURE_FREEZE: u32 = 2;

/// `struct sdt_snapshot`: `IOC_GET`'s argument and answer.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct Snapshot {
    /// In: address of the buffer for the thread records.
    pub threads: u64,
    /// In: its length.
    pub threads_len: u32,
    /// In: [`GET_WAIT`].
    pub flags: u32,
    /// Captures of this registration so far, this one included.
    pub seq: u64,
    /// [`CAPTURE_TRIGGER`] or [`CAPTURE_FREEZE`].
    pub kind: u32,
    /// Held threads (records in the buffer), the breaking thread first.
    pub nr_threads: u32,
    /// Bytes per record.
    pub thread_size: u32,
    /// The breaking thread (0 for a freeze).
    pub trigger_tid: i32,
    /// `CLOCK_MONOTONIC` when the trigger or freeze began.
    pub start_ns: u64,
    /// `CLOCK_MONOTONIC` when the last thread was held.
    pub held_ns: u64,
    /// Changes whenever the program calls `execve`.
    pub exec_id: u64,
    /// Where the breaking thread's trap record lies.
    pub record_addr: u64,
    /// The record as the module read it.
    pub record: TrapRecord,
    /// [`NSIG`], or 0 if the dispositions are unknown.
    pub nr_actions: u32,
    /// Zero.
    pub reserved: u32,
    /// Signal `n`'s disposition at `[n - 1]`.
    pub actions: [SigAction; NSIG],
}

impl Snapshot {
    /// An `IOC_GET` request for `len` bytes of thread records at `threads`.
    pub fn request(threads: u64, len: u32, flags: u32) -> Snapshot {
        Snapshot {
            threads,
            threads_len: len,
            flags,
            seq: 0,
            kind: 0,
            nr_threads: 0,
            thread_size: 0,
            trigger_tid: 0,
            start_ns: 0,
            held_ns: 0,
            exec_id: 0,
            record_addr: 0,
            record: TrapRecord::default(),
            nr_actions: 0,
            reserved: 0,
            actions: [SigAction::default(); NSIG],
        }
    }
}

/// `SDT_THREAD_TRIGGER`: the breaking thread.
pub const THREAD_TRIGGER: u32 = 1;

/// `struct sdt_thread`: one held thread in `IOC_GET`'s buffer, followed by
/// `xstate_size` bytes of XSAVE area.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct Thread {
    /// Its id, in the caller's pid namespace.
    pub tid: i32,
    /// [`THREAD_TRIGGER`].
    pub flags: u32,
    /// Blocked signals.
    pub sigmask: u64,
    /// Its rseq area (0: none).
    pub rseq: u64,
    /// The area's length.
    pub rseq_len: u32,
    /// The rseq signature.
    pub rseq_sig: u32,
    /// Its robust-futex list head (0: none).
    pub robust_list: u64,
    /// The head's length.
    pub robust_list_len: u64,
    /// Its alternate signal stack's base (0: none).
    pub altstack: u64,
    /// The stack's size.
    pub altstack_size: u64,
    /// Bytes of `gpregs` filled.
    pub gpregs_size: u32,
    /// Bytes of `fpregs` filled.
    pub fpregs_size: u32,
    /// Bytes of XSAVE area after the record.
    pub xstate_size: u32,
    /// The stack's `SS_AUTODISARM`, or 0.
    pub altstack_flags: u32,
    /// `struct user_regs_struct`.
    pub gpregs: [u64; 27],
    /// The FXSAVE area.
    pub fpregs: [u8; 512],
}

impl Thread {
    /// Decodes a record and its XSAVE area from `bytes` (one record's stride); `None` if
    /// the bytes are too short for what the record says it holds.
    pub fn from_bytes(bytes: &[u8]) -> Option<(Thread, &[u8])> {
        let size = size_of::<Thread>();
        let thread: Thread = bytemuck::try_pod_read_unaligned(bytes.get(..size)?).ok()?;
        if thread.gpregs_size as usize > GPREGS_SIZE || thread.fpregs_size as usize > FPREGS_SIZE {
            return None;
        }
        let xstate = bytes.get(size..size + thread.xstate_size as usize)?;
        Some((thread, xstate))
    }

    /// The filled part of the general registers, as `PTRACE_GETREGSET` gives them.
    pub fn gpregs_bytes(&self) -> Vec<u8> {
        bytemuck::bytes_of(&self.gpregs)[..self.gpregs_size as usize].to_vec()
    }
}

/// `_IOC(dir, type, nr, size)` of `<asm-generic/ioctl.h>`.
const fn ioc(dir: u64, nr: u64, size: usize) -> u64 {
    dir << 30 | (size as u64) << 16 | (IOC_MAGIC as u64) << 8 | nr
}
const IOC_NONE: u64 = 0;
const IOC_WRITE: u64 = 1;
const IOC_READ: u64 = 2;

/// `SDT_IOC_MAGIC`.
pub const IOC_MAGIC: u8 = 0xDB;
/// `SDT_IOC_VERSION`.
pub const IOC_VERSION: u64 = ioc(IOC_READ, 0, size_of::<Version>());
/// `SDT_IOC_REGISTER`.
pub const IOC_REGISTER: u64 = ioc(IOC_WRITE, 1, size_of::<Register>());
/// `SDT_IOC_QUERY`.
pub const IOC_QUERY: u64 = ioc(IOC_READ, 2, size_of::<Query>());
/// `SDT_IOC_TRIGGER`: its argument is the [`TrapRecord`].
pub const IOC_TRIGGER: u64 = ioc(IOC_READ | IOC_WRITE, 3, size_of::<TrapRecord>());
/// `SDT_IOC_FREEZE`.
pub const IOC_FREEZE: u64 = ioc(IOC_NONE, 4, 0);
/// `SDT_IOC_GET`.
pub const IOC_GET: u64 = ioc(IOC_READ | IOC_WRITE, 5, size_of::<Snapshot>());
/// `SDT_IOC_RELEASE`.
pub const IOC_RELEASE: u64 = ioc(IOC_WRITE, 6, size_of::<Release>());

const _: () = assert!(size_of::<FilterHeader>() == 16);
const _: () = assert!(size_of::<Rule>() == 48);
const _: () = assert!(size_of::<Version>() == 16);
const _: () = assert!(size_of::<Register>() == 24);
const _: () = assert!(size_of::<Query>() == 16);
const _: () = assert!(size_of::<Release>() == 16);
const _: () = assert!(size_of::<SigAction>() == 32);
const _: () = assert!(size_of::<Snapshot>() == 2200);
const _: () = assert!(size_of::<Thread>() == 808);

#[cfg(test)]
mod tests;
