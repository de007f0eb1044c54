//! What SDT knows of a target program's insides, for whoever reads or resumes its
//! snapshots (the daemon, the restorer, the exporters): where the breaking thread's trap
//! record is (its registers at the stop), where glibc keeps a thread's id, and where the
//! program's SDT library is (its ELF symbols). A resumed program's memory needs, beyond
//! its snapshot:
//!
//! - The thread stopped at the snapshot's breakpoint waits for an answer in its trap
//!   record, which the capture wrote after copying the memory: it gets the snapshot's
//!   number, as the original did (what its `SetBreakpoint` returns).
//! - Threads that were exiting are not resumed; the id word the kernel clears on a
//!   thread's way out (glibc's `pthread_join` waits for it) is cleared instead.
//! - The program's SDT library keeps a state word and a reconfiguration buffer, found by
//!   their ELF symbols, through which the resumer switches breakpoints off or hands over
//!   a new filter.
//!
//! Memory is read through a closure, `read(addr, buf) -> bool`, and the mapped files
//! whose symbols say where the library is are opened through another, `open(path)`, so
//! that any snapshot source serves. A snapshot's files are opened as the store checks
//! them ([`checked_files`]): a path the store names is never opened, let alone read to
//! its end, unless it is the regular file the program mapped. Of each file only its ELF
//! headers and symbol tables are read, within the file's size.
//!
//! # Design constraints
//!
//! This crate makes no system call of its own and links no ptrace code: the exporters use
//! it as well as the daemon and the restorer. What it reads comes through the closures.

#![deny(missing_docs)]
#![deny(unsafe_code)]

use std::fs::File;

mod activity;
pub use activity::{Activity, SYSCALLS, syscall_name};
pub mod symbols;
pub mod waits;

#[cfg(test)]
mod test_threads;

use object::{Object, ObjectSegment, ReadCache};
use sdt_abi::{SYMBOL_RECONFIG, SYMBOL_STATE, TRAP_RECORD_SIZE, TrapRecord};
use sdt_store::{Mapping, Snapshot, SnapshotMeta, ThreadRunState, Trigger};

/// Reads the snapshot's memory at an address into a buffer; false if it cannot.
pub type Read<'a> = &'a dyn Fn(u64, &mut [u8]) -> bool;

/// Opens the file at a path a process maps, for its symbols; `None` if it may not be read.
pub type Open<'a> = &'a dyn Fn(&str) -> Option<File>;

/// Opens the files `snap`'s mappings refer to as the store checks them
/// ([`Snapshot::open_file`]: the version mapped, a regular file, readable by the store's
/// owner); any other path, `None`.
pub fn checked_files(snap: &Snapshot) -> impl Fn(&str) -> Option<File> + '_ {
    move |path| snap.open_file(snap.meta().mapped_file(path)?).ok()
}

/// The kernel's system call restart codes (`include/linux/errno.h`): a thread stopped
/// inside a system call that the kernel restarts has `rax` = minus one of these.
pub const ERESTARTSYS: i64 = 512;
/// See [`ERESTARTSYS`].
pub const ERESTARTNOINTR: i64 = 513;
/// See [`ERESTARTSYS`].
pub const ERESTARTNOHAND: i64 = 514;
/// See [`ERESTARTSYS`]: restarted through `restart_syscall(2)` (sleeps with a timeout).
pub const ERESTART_RESTARTBLOCK: i64 = 516;

/// Where glibc keeps a thread's id in its `struct pthread` (x86_64, glibc 2.26 and
/// later), as an offset from the thread pointer (`fs_base`); tried first.
const GLIBC_TID_OFFSET: u64 = 0x2d0;
/// How far into a thread block the search for the id goes.
const TID_SEARCH: u64 = 0x1000;

/// Bytes to write into the resumed program's memory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Patch {
    /// The address in the program's memory the bytes go to.
    pub addr: u64,
    /// The bytes written there.
    pub bytes: Vec<u8>,
}

/// The writes every resumed program of `meta` needs: the breakpoint's answer and the
/// cleared id words of exiting threads.
pub fn patches(meta: &SnapshotMeta, read: Read) -> Vec<Patch> {
    let mut out = Vec::new();
    if let Some((addr, _)) = trap_record(meta, read) {
        out.push(Patch {
            addr: addr + TrapRecord::RESULT_OFFSET as u64,
            bytes: i64::from(meta.seq).to_le_bytes().to_vec(),
        });
    }
    if let Some(offset) = tid_word_offset(meta, read) {
        for t in meta.threads.iter().filter(|t| t.state == ThreadRunState::Exiting) {
            // A thread pointer so high that the word would wrap (a crafted snapshot) is no
            // glibc thread's: nothing to patch.
            if let Some(addr) =
                t.regs().ok().map(|r| r.fs_base).filter(|&b| b != 0).and_then(|b| b.checked_add(offset))
            {
                out.push(Patch { addr, bytes: 0u32.to_le_bytes().to_vec() });
            }
        }
    }
    out
}

/// The address and contents of the trap record of a breakpoint snapshot's breaking
/// thread, if it reads as one for that breakpoint: its `rdi` at the `int3` (ptrace), or
/// the argument of its trigger call, `rdx` (the kernel module's `ioctl`).
pub fn trap_record(meta: &SnapshotMeta, read: Read) -> Option<(u64, TrapRecord)> {
    let Trigger::Breakpoint { tid, level, class, id, .. } = meta.trigger else { return None };
    let thread = meta.threads.iter().find(|t| t.tid == tid)?;
    let regs = thread.regs().ok()?;
    [regs.rdi, regs.rdx].into_iter().find_map(|addr| {
        let mut bytes = [0u8; TRAP_RECORD_SIZE];
        if !read(addr, &mut bytes) {
            return None;
        }
        let record = TrapRecord::from_bytes(&bytes)?;
        ((record.level, record.class, record.id) == (level, class, id)).then_some((addr, record))
    })
}

/// The offset from `fs_base` (glibc's thread pointer, its `struct pthread`) of the word
/// holding each thread's id: glibc's usual one if it holds every thread's id, else the
/// first that does. Its address is what the thread gave `set_tid_address(2)`.
pub fn tid_word_offset(meta: &SnapshotMeta, read: Read) -> Option<u64> {
    let blocks: Vec<(i32, Vec<u8>)> = meta
        .threads
        .iter()
        .filter_map(|t| {
            let base = t.regs().ok().map(|r| r.fs_base).filter(|&b| b != 0)?;
            let mut block = vec![0u8; TID_SEARCH as usize];
            read(base, &mut block).then_some((t.tid, block))
        })
        .collect();
    if blocks.is_empty() {
        return None;
    }
    let holds = |off: u64| {
        blocks.iter().all(|(tid, block)| block[off as usize..off as usize + 4] == tid.to_le_bytes())
    };
    if holds(GLIBC_TID_OFFSET) {
        return Some(GLIBC_TID_OFFSET);
    }
    (0..TID_SEARCH - 4).step_by(4).find(|&off| holds(off))
}

/// Where the program's SDT library keeps its state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Library {
    /// `sdt_state`: the state word.
    pub state: u64,
    /// `sdt_reconfig`: the buffer a new filter goes into, if its symbol was found.
    pub reconfig: Option<u64>,
}

impl Library {
    /// Finds the library: the state word from the breakpoint's trap record or by symbol,
    /// the reconfiguration buffer by symbol, in the files `open` opens. `None` if the
    /// program does not use libsdt or its symbols were stripped (and the snapshot is not
    /// a breakpoint's).
    pub fn find(meta: &SnapshotMeta, read: Read, open: Open) -> Option<Library> {
        let state =
            trap_record(meta, read).map(|(_, r)| r.state_ptr).or_else(|| symbol(meta, SYMBOL_STATE, open))?;
        Some(Library { state, reconfig: symbol(meta, SYMBOL_RECONFIG, open) })
    }
}

/// The address of symbol `name` in the snapshot's memory: see [`symbol_in`].
pub fn symbol(meta: &SnapshotMeta, name: &str, open: Open) -> Option<u64> {
    symbol_in(&meta.mappings, &meta.process.exe, name, open)
}

/// The address of symbol `name` in a process with `mappings` whose executable is `exe`:
/// its value in the first mapped file whose symbols define it (the program, then
/// `libsdt.so`, then the others), moved by where that file is mapped. Files are opened
/// with `open`, and only their headers and symbol tables read. `None` if no file
/// defines it or a file cannot be opened or parsed.
pub fn symbol_in(mappings: &[Mapping], exe: &str, name: &str, open: Open) -> Option<u64> {
    let mut files: Vec<&str> = Vec::new();
    for m in mappings {
        let path = m.path.as_str();
        if path.starts_with('/') && !path.ends_with(" (deleted)") && m.inode != 0 && !files.contains(&path) {
            files.push(path);
        }
    }
    // Loaded objects have code mapped: a file the program maps to read (a library's
    // separate debug file, which a backtrace maps) defines the same names, at addresses
    // that mean nothing where it is mapped.
    files.retain(|f| mappings.iter().any(|m| m.path == *f && m.perms.exec));
    // The program itself and libsdt first: the symbols are almost always there.
    files.sort_by_key(|f| (*f != exe, !f.contains("libsdt")));
    files.into_iter().find_map(|path| {
        let file = ReadCache::new(open(path)?);
        let value = symbols::find_named(&file, &[symbols::STATIC, symbols::DYNAMIC], name, |s| {
            s.defined.then_some(s.address)
        })?;
        let elf = object::File::parse(&file).ok()?;
        Some(value.wrapping_add(load_bias(mappings, path, &elf)?))
    })
}

/// How far the ELF file `elf`, mapped at `path` in a process with `mappings`, was moved
/// from the addresses it was linked at: a linked address plus this is where it is.
pub fn load_bias<'data, R: object::ReadRef<'data>>(
    mappings: &[Mapping],
    path: &str,
    elf: &object::File<'data, R>,
) -> Option<u64> {
    // The file's first mapping maps file offset `offset` at `start`; the segment that
    // holds that offset says at which address it was linked.
    let first = mappings.iter().find(|m| m.path == path)?;
    let segment = elf.segments().find(|s| {
        let (offset, size) = s.file_range();
        offset <= first.offset && first.offset < offset + size.max(1)
    })?;
    let linked = segment.address() + (first.offset - segment.file_range().0);
    Some(first.start.wrapping_sub(linked))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn own_mappings() -> Vec<Mapping> {
        sdt_procfs::parse_maps(&std::fs::read_to_string("/proc/self/maps").unwrap())
    }

    #[test]
    fn a_symbol_is_found_where_the_process_has_it() {
        let exe = std::fs::read_link("/proc/self/exe").unwrap().display().to_string();
        // Defined by libc, which is mapped wherever the loader put it.
        let at = symbol_in(&own_mappings(), &exe, "getpid", &sdt_sys::open_regular);
        assert_eq!(at, Some(libc::getpid as unsafe extern "C" fn() -> libc::pid_t as usize as u64));
        assert_eq!(symbol_in(&own_mappings(), &exe, "no_such_symbol_anywhere", &sdt_sys::open_regular), None);
    }

    #[test]
    fn a_file_mapped_only_to_be_read_is_not_where_symbols_are_looked_up() {
        // A copy of libc mapped as a debug file is, read-only, below everything else.
        let dir = tempfile::tempdir().unwrap();
        let copy = dir.path().join("libc.debug");
        let libc_path = own_mappings().into_iter().find(|m| m.path.contains("/libc.so")).unwrap().path;
        std::fs::copy(&libc_path, &copy).unwrap();
        let line = format!("1000-2000 r--p 00000000 00:05 7 {}", copy.display());
        let mut mappings = vec![sdt_procfs::parse_maps_line(&line).unwrap()];
        mappings.extend(own_mappings());
        let exe = std::fs::read_link("/proc/self/exe").unwrap().display().to_string();
        let at = symbol_in(&mappings, &exe, "getpid", &sdt_sys::open_regular);
        assert_eq!(at, Some(libc::getpid as unsafe extern "C" fn() -> libc::pid_t as usize as u64));
    }

    #[test]
    fn a_fifo_or_device_among_the_mappings_is_never_read() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o666)).unwrap();
        let line =
            |p: &str| sdt_procfs::parse_maps_line(&format!("1000-2000 r--p 00000000 00:05 7 {p}")).unwrap();
        let mappings = [line(fifo.to_str().unwrap()), line("/dev/zero")];
        // Found nowhere, and promptly: neither is opened for reading.
        assert_eq!(symbol_in(&mappings, "", "main", &sdt_sys::open_regular), None);
        assert!(sdt_sys::open_regular(fifo.to_str().unwrap()).is_none());
        assert!(sdt_sys::open_regular("/dev/zero").is_none());
    }
}
