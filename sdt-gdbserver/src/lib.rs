//! gdb's remote serial protocol over SDT snapshots, read straight from the store: gdb
//! (or an IDE that speaks to gdbserver) connects, sees a stopped process (every thread
//! with its name and registers, the memory, the program and its shared libraries), and
//! moves between the run's snapshots in the same session with `monitor goto S3`. Values
//! written in gdb (`set var`, registers) stay in the server, over the snapshot, until
//! `monitor commit` stores the snapshot with them as a new one (`S3.e1`), or gdb moves
//! on (they are dropped, and gdb told so).
//!
//! ```no_run
//! use sdt_gdbserver::{StoreTimeline, serve};
//! use sdt_store::Store;
//!
//! let store = Store::open(".sdt".as_ref())?;
//! let id = store.latest_run()?;
//! let snap = store.open_run(&id)?.open_snapshot("S3")?;
//! let mut timeline = StoreTimeline::new(store, id, id, snap);
//! // gdb: target remote | this program
//! serve(&mut timeline, std::io::stdin().lock(), std::io::stdout().lock())?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Design constraints
//!
//! - Nothing is exported: registers come from the snapshot's register sets, memory from
//!   [`SnapshotSource::read`](sdt_store::SnapshotSource::read), one request at a time.
//! - A snapshot's metadata is untrusted. gdb learns the paths of the program and the
//!   libraries only for files the store checks to be the ones mapped
//!   ([`sdt_gdb::core::checked_files`]), as `NT_FILE` of an exported core names them;
//!   names from the store are escaped in the XML documents.
//! - The stop is the snapshot's: `SIGTRAP` at a software breakpoint in the thread that
//!   reached it, no signal for a timed snapshot.
//! - Every wait ends when gdb closes the connection.
//!
//! # What it does not do
//!
//! - The target does not run: `continue`, `step` and `next` end at once on the same stop,
//!   reported as the end of the execution history (gdb: "No more reverse-execution
//!   history"), in the thread gdb resumed. A function call (`print f()`) gets a
//!   signal instead, on which gdb (`set unwindonsignal on`) puts back what it set for
//!   the call; the server forgets what gdb wrote below the stack for it. A stored
//!   snapshot never changes: writes go to the server's copy (`edits`), and only to
//!   memory the snapshot can read.
//! - No file transfer (`vFile`): gdb opens the program and libraries itself, so its
//!   `sysroot` should be the local one (`set sysroot`), as `sdt gdb` sets it.
//! - x86_64 only; AVX-512 and newer register sets are not described.

#![deny(missing_docs)]
#![deny(unsafe_code)]

mod edits;
pub mod packet;
pub mod regs;
mod server;
mod timeline;
mod view;

pub use server::serve;
pub use timeline::{Entry, StoreTimeline, Timeline, entries};
