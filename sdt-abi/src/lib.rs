//! The contract between the SDT library linked into a program (`sdt-lib`) and the capture
//! side (`sdt-daemon`).
//!
//! ```no_run
//! use sdt_abi::{Filter, Site};
//!
//! let filter = Filter::decode("sdt1;L2;C1,3;I10-19").unwrap();
//! let site = Site { level: 1, class: 3, id: 12, attrs: b"phase=solve" };
//! assert!(filter.matches_site(&site));
//! ```
//!
//! Three things cross that line, and all three live here so that both sides agree:
//!
//! - the [`Filter`]: which breakpoints capture (level, class, ids, attributes, hit numbers),
//!   checked inside the program so that a filtered-out breakpoint makes no system call;
//! - its wire form ([`Filter::encode`] / [`Filter::decode`]), handed to the program in the
//!   [`ENV_CAPTURE`] environment variable;
//! - the [`TrapRecord`], which the breaking thread fills in before it stops for the tracer.
//!
//! Where the kernel module captures instead of ptrace, [`kmod`] mirrors its interface
//! (`kmod/include/uapi/linux/sdt_kmod.h`): the library triggers captures through it, the
//! daemon registers, reads and releases them. The x86_64 register layouts that its
//! records, ptrace and snapshots carry are typed in [`regs`].
//!
//! # Design constraints
//!
//! Matching runs on the breaking thread inside the user's program: [`Filter::matches_site`]
//! and [`Filter::matches_hit`] never allocate, lock or make system calls. Decoding allocates,
//! once, when the library starts.
//!
//! This crate does no I/O and knows nothing of TOML; the capture config file is parsed on the
//! capture side and lowered to a [`Filter`].

#![deny(missing_docs)]
#![deny(unsafe_code)]

mod filter;
mod glob;
pub mod kmod;
pub mod regs;
mod trap;
mod wire;

pub use filter::{Filter, Site, Span, SpanError};
pub use glob::{GlobError, check_glob, glob_match};
pub use trap::{
    ENV_CAPTURE, ENV_TRACER, ID_MASK_WORDS, PROTOCOL_VERSION, RECONFIG_SIZE, RESULT_DECLINED,
    RESULT_FILTERED, RESULT_OFF, STATE_OFF, STATE_ON, STATE_UNINIT, SYMBOL_RECONFIG, SYMBOL_STATE,
    TRAP_MAGIC, TRAP_RECORD_SIZE, TrapRecord, checked_state, class_mask_for, class_may_pass, declined_state,
    id_mask_for, id_may_pass, level_may_pass, state_for,
};
pub use wire::WireError;
