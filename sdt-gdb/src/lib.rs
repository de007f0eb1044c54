//! ELF core files from SDT snapshots, so that gdb can look at any snapshot as it looks at a
//! crash dump: every thread, its registers and backtrace, and the memory the program had.
//!
//! ```no_run
//! use sdt_store::Store;
//!
//! let store = Store::open(".sdt".as_ref())?;
//! let run = store.open_run(&store.latest_run()?)?;
//! let snap = run.open_snapshot("S3")?;
//! let report = sdt_gdb::export_core(&snap, "S3.core".as_ref())?;
//! println!("{} threads, {} mappings, {} bytes", report.threads, report.mappings, report.bytes);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Design constraints
//!
//! - The layout follows Linux's `fs/binfmt_elf.c` and gdb's `gcore`; [`core`] lists it,
//!   and each note has its own `gen_*` function. gdb itself is the test of the output.
//! - [`core::write_core`] does no I/O of its own: it reads through a
//!   [`SnapshotSource`](sdt_store::SnapshotSource) and writes to a [`std::io::Write`], front
//!   to back, holding at most 1 MiB of memory contents at a time, so cores of multi-GiB processes stream. Only [`export_core`] and
//!   [`export_core_in`] touch the file system: a new 0600 file, never through a
//!   symbolic link, renamed into place when complete.
//! - A snapshot's metadata is untrusted: only the pages the store holds and those of
//!   files the store checks (the file mapped, regular, readable by the store's owner)
//!   are written, and `NT_FILE` names only those files. gdb gets paths from the store
//!   as option values (`--se=PATH`), never as options of their own.
//! - The `NT_X86_XSTATE` note is cut to what gdb 13 understands (up to PKRU), since gdb
//!   rejects a size it does not expect.
//!
//! # What it does not do
//!
//! - x86_64 only; no 32-bit or x32 processes.
//! - No `coredump_filter`: every page with known contents is written, file-backed text
//!   included; pages the store does not hold and no file provides take no room (they
//!   read as zeros), so a core is as large as that memory, not as the mappings.
//! - No pending signals, CPU times or `NT_PRPSINFO` scheduling fields: the snapshot does
//!   not capture them, so they are zero.
//! - It does not start gdb on its cores: [`frontend`] starts gdb on `sdt gdbserver`,
//!   which opens only the files the store checks, where a core would have gdb open the
//!   paths in the snapshot's memory (the dynamic linker's list).

#![deny(missing_docs)]
#![deny(unsafe_code)]

pub mod arrivals;
pub mod blocked;
pub mod core;
pub mod diff;
mod error;
mod export;
#[cfg(test)]
mod fake;
pub mod frontend;
pub mod vars;

pub use error::Error;
pub use export::{export_core, export_core_in};
