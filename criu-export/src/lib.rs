//! CRIU image directories from SDT snapshots, so that `criu restore` resumes the program
//! where the snapshot caught it.
//!
//! ```no_run
//! use sdt_store::Store;
//!
//! let store = Store::open(".sdt".as_ref())?;
//! let run = store.open_run(&store.latest_run()?)?;
//! let snap = run.open_snapshot("S3")?;
//! let report = criu_export::export_criu(&snap, "img".as_ref())?;
//! println!("{} threads, {} pages; --shell-job: {}", report.threads, report.pages, report.shell_job);
//! // then: criu restore -D img --shell-job
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Design constraints
//!
//! - The images are CRIU 3.17's: entries are CRIU's protobuf messages, encoded with
//!   prost from `proto/*.proto`, which hold only the fields written here with CRIU's
//!   field numbers and types. [`image`] lays out the file format; `src/images.rs` has one
//!   `gen_*` function per image kind. `crit decode` reads every image, and `criu restore`
//!   resumes them (tested in the QEMU guest, `scripts/guest/`).
//! - Registers are presented as CRIU's own dump would: a thread stopped inside a system
//!   call the kernel restarts is set to run the call again; one in a sleep that restarts
//!   through `restart_syscall(2)` gets `EINTR`, as after `criu dump`.
//! - The restored program runs untraced, so its memory is patched: the breakpoint that
//!   took the snapshot returns the snapshot's number, as it did in the original run, and
//!   the SDT library's state word is set to off, so later breakpoints cost nothing
//!   instead of stopping it with `SIGTRAP`.
//! - [`write_images`] does no I/O of its own: it reads through a
//!   [`SnapshotSource`](sdt_store::SnapshotSource) and writes to an [`ImageSink`], pages
//!   256 KiB at a time. Only [`export_criu`] touches the file
//!   system, writing into a temporary directory (0700, images 0600, never through a
//!   symbolic link) renamed when complete.
//! - A snapshot's metadata is untrusted, and `criu restore` runs as root: every file a
//!   mapping names, which `criu restore` maps again, must be the version mapped, a
//!   regular file and readable by the store's owner; every file it opens by path (a
//!   descriptor's, a `PROT_NONE` mapping's, the executable, the working directory) must
//!   be of its recorded kind (never a link, FIFO or socket), with its recorded device
//!   and inode, and one the store's owners could open as it is opened (for writing too,
//!   where it is), or the export is refused, naming it. The program's symbols are read
//!   only from checked files. The creds images carry each thread's recorded credentials
//!   only as far as the store's owners have them ([`sdt_store::OwnerRights`]): a store of
//!   uid 1001 that claims uid 0, a group 1001 is not in or a capability is refused.
//!
//! # What it does not do
//!
//! - x86_64 processes only, one process (no children), restored into the restoring
//!   criu's namespaces and cgroups.
//! - Descriptors: regular files and directories (reopened by path at their offsets, a
//!   regular file's size checked by `criu restore`), memory devices such as `/dev/null`,
//!   terminals (reopened by path) and pipes (new ones, or the caller's with
//!   `--inherit-fd`). Sockets, FIFOs, eventfd/epoll/timerfd/signalfd and other
//!   anonymous-inode files, deleted files and block devices are refused, naming the
//!   descriptor; so are shared anonymous memory and SysV shared memory.
//! - Interval timers the snapshot recorded running are armed with the time they had
//!   left; the resource limits, umask, personality, and each thread's nice value,
//!   scheduling policy and alternate signal stack are the program's (umask 022 for a snapshot from before it was
//!   recorded). What the snapshot does not record, or CRIU's images cannot hold, is not
//!   restored: POSIX timers (said in a note), pending signals, CPU affinity,
//!   real-time policies, securebits, ambient capabilities. The clear-child-tid address and the robust futex list are glibc's,
//!   found from each thread's `fs_base`.

#![deny(missing_docs)]
#![deny(unsafe_code)]

mod encode;
mod error;
mod export;
#[cfg(test)]
mod fake;
pub mod image;
mod images;
mod plan;

/// CRIU's protobuf messages (prost, from `proto/*.proto`).
#[allow(missing_docs, clippy::all)]
mod pb {
    include!(concat!(env!("OUT_DIR"), "/criu.rs"));
}

pub use encode::{ImageSink, MemorySink, Report, write_images};
pub use error::Error;
pub use export::export_criu;
