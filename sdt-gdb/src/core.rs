//! An ELF core file from a snapshot, laid out as Linux (`fs/binfmt_elf.c`) and gdb's
//! `gcore` lay out theirs, so that gdb opens it like a crash dump.
//!
//! ```text
//! offset 0         ELF header          ELFCLASS64 ELFDATA2LSB ELFOSABI_NONE ET_CORE EM_X86_64
//! offset 64        program headers     PT_NOTE, then the PT_LOADs of each mapping, by address
//! after them       PT_NOTE contents:
//!                    note                name   desc bytes           written by
//!   first thread     NT_PRSTATUS         CORE   336                  gen_prstatus
//!   process          NT_PRPSINFO         CORE   136                  gen_prpsinfo
//!                    NT_SIGINFO          CORE   128                  gen_siginfo
//!                    NT_AUXV             CORE   as captured          gen_auxv
//!                    NT_FILE             CORE   16 + 24 n + paths    gen_files
//!   first thread     NT_PRFPREG          CORE   512                  gen_fpregset
//!                    NT_X86_XSTATE       LINUX  576 … 2696           gen_x86_xstate
//!   other threads    NT_PRSTATUS, NT_PRFPREG, NT_X86_XSTATE, each
//! page-aligned     PT_LOAD contents, back to back: p_filesz bytes per PT_LOAD
//! at the end       section header 0, only with PN_XNUM (65535) or more program headers:
//!                  its sh_info holds their count (ELF extended numbering, as Linux does)
//! ```
//!
//! A mapping's PT_LOADs cover it from start to end. The pages whose bytes are known (the
//! store holds them, or a file provides them that [`SnapshotSource::check_file`] lets us
//! read) are in the file; the others only in `p_memsz` (`p_filesz < p_memsz`, or a
//! PT_LOAD with `p_filesz` 0 before the first known page): gdb reads them as zeros, as
//! it does the pages a kernel core dump leaves out. Gaps of up to `MAX_ZERO_GAP` (4) pages
//! between known pages are written as zeros rather than split. So a core is as large as
//! the memory the store holds plus what files provide, whatever the size of the mappings
//! (a 64 TiB reservation with one page written costs one page).
//!
//! Each note is a 12-byte header (`n_namesz` counting the NUL, `n_descsz`, `n_type`), the
//! name padded to 4 bytes, and the descriptor padded to 4 bytes. The first thread is the
//! one that triggered the snapshot: gdb selects the thread of the first `NT_PRSTATUS`.

use std::io::Write;
use std::ops::Range;

use object::elf::{self, FileHeader64, NoteHeader32, NoteType, ProgramHeader64, SectionHeader64};
use object::endian::{LittleEndian, U16, U32, U64};
use object::pod::bytes_of;
use sdt_store::{
    Content, FileRef, Mapping, PAGE_SIZE, ProcessInfo, SnapshotMeta, SnapshotSource, ThreadState, Trigger,
    XSAVE_HEADER_END, XsaveHead,
};

use crate::Error;

/// What [`write_core`] wrote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CoreReport {
    /// Threads, one `NT_PRSTATUS` each.
    pub threads: usize,
    /// Mappings, one or more `PT_LOAD`s each.
    pub mappings: usize,
    /// Size of the core file in bytes.
    pub bytes: u64,
    /// What the user should know about the core, one line each: the files whose pages
    /// were left out, and why.
    pub notes: Vec<String>,
}

/// Bytes of memory read from the source and written at a time.
const CHUNK: usize = 1 << 20;
/// Most pages without known contents between two known ones that are written as zeros
/// instead of starting another `PT_LOAD`.
const MAX_ZERO_GAP: u64 = 4;

const LE: LittleEndian = LittleEndian;
const EHDR_SIZE: u64 = size_of::<FileHeader64<LittleEndian>>() as u64;
const PHDR_SIZE: u64 = size_of::<ProgramHeader64<LittleEndian>>() as u64;
const SHDR_SIZE: u64 = size_of::<SectionHeader64<LittleEndian>>() as u64;

/// `sizeof(struct elf_prstatus)` on x86_64.
const PRSTATUS_SIZE: usize = 336;
/// `sizeof(struct elf_prpsinfo)` on x86_64.
const PRPSINFO_SIZE: usize = 136;
/// `sizeof(siginfo_t)`.
const SIGINFO_SIZE: usize = 128;
/// `ELF_PRARGSZ`: size of `pr_psargs`.
const PRARGSZ: usize = 80;
/// Size of `pr_fname` (`TASK_COMM_LEN`).
const FNAME_SIZE: usize = 16;

const SIGTRAP: i32 = 5;
/// `si_code` of the `SIGTRAP` that `int3` raises.
const SI_KERNEL: i32 = 0x80;

/// Writes the core file of `source` to `out`, front to back, holding at most 1 MiB of
/// memory contents at a time. `out` should be buffered: headers and notes are written in
/// small pieces.
pub fn write_core<W: Write>(source: &impl SnapshotSource, out: W) -> Result<CoreReport, Error> {
    let meta = source.meta();
    let contents = Contents::of(source);
    let notes = gen_notes(meta, &contents.file_names)?;
    let layout = Layout::new(&meta.mappings, &contents, notes.len() as u64);
    let mut out = Counting { inner: out, written: 0 };

    out.write(bytes_of(&layout.file_header()))?;
    out.write(bytes_of(&layout.note_header()))?;
    for load in &layout.loads {
        out.write(bytes_of(&load.program_header()))?;
    }
    out.write(&notes)?;
    out.pad_until(layout.data_offset)?;

    let largest = layout.loads.iter().map(|l| l.filesz).max().unwrap_or(0);
    let mut buf = vec![0; largest.min(CHUNK as u64) as usize];
    for load in &layout.loads {
        let m = load.mapping;
        let end = load.start + load.filesz;
        let mut addr = load.start;
        while addr < end {
            let chunk = &mut buf[..(end - addr).min(CHUNK as u64) as usize];
            source.read(addr, chunk).map_err(|source| Error::Store {
                path: m.path.clone(),
                start: m.start,
                end: m.end,
                source,
            })?;
            out.write(chunk)?;
            addr += chunk.len() as u64;
        }
    }
    if let Some(shdr) = layout.extended_numbering() {
        out.write(bytes_of(&shdr))?;
    }
    out.inner.flush().map_err(Error::Write)?;
    Ok(CoreReport {
        threads: meta.threads.len(),
        mappings: meta.mappings.len(),
        bytes: out.written,
        notes: contents.notes,
    })
}

/// Which bytes of the snapshot go into the core.
struct Contents<'a> {
    /// The address ranges the store holds, ascending.
    stored: Vec<Range<u64>>,
    /// The files whose pages may be read.
    readable_files: Vec<&'a FileRef>,
    /// Where each of them lies, for `NT_FILE`: its path, or that of the copy kept with the
    /// run where it changed since.
    file_names: Vec<(&'a FileRef, String)>,
    /// The files whose pages may not, and why, for the report.
    notes: Vec<String>,
}

impl<'a> Contents<'a> {
    fn of(source: &'a impl SnapshotSource) -> Contents<'a> {
        let (readable_files, refused) = checked_files(source);
        let notes = refused
            .into_iter()
            .map(|e| {
                format!("{e}: the core holds only the pages the store has of it (the rest reads as zeros)")
            })
            .collect();
        let file_names = readable_files
            .iter()
            .filter_map(|&f| Some((f, source.file_path(f).ok()?.to_str()?.to_owned())))
            .collect();
        Contents { stored: source.stored_ranges(), readable_files, file_names, notes }
    }

    /// The pages of mapping `m` whose bytes go into the core, as page-aligned
    /// `[start, end)` runs, ascending; gaps of up to [`MAX_ZERO_GAP`] pages that read as
    /// zero are filled.
    fn runs(&self, m: &Mapping) -> Vec<(u64, u64)> {
        if !m.perms.read {
            return Vec::new();
        }
        let (from_file, gaps_read) = match &m.content {
            Content::Unreadable => return Vec::new(),
            Content::Zero => (None, true),
            Content::File(f) if self.readable_files.contains(&f) => {
                // Pages past the file's end read as zeros: only the pages it covers count.
                let covered = f.size.saturating_sub(m.offset).next_multiple_of(PAGE_SIZE);
                (Some((m.start, m.start.saturating_add(covered).min(m.end))), true)
            }
            Content::File(_) => (None, false),
        };
        let from = self.stored.partition_point(|r| r.end <= m.start);
        let stored = self.stored[from..]
            .iter()
            .take_while(|r| r.start < m.end)
            .map(|r| (r.start.max(m.start), r.end.min(m.end)));
        // The file's range starts at the mapping's start, before every stored page.
        let pieces = from_file.filter(|(start, end)| start < end).into_iter().chain(stored);
        let mut runs: Vec<(u64, u64)> = Vec::new();
        for (start, end) in pieces {
            match runs.last_mut() {
                Some(last)
                    if start <= last.1 || (gaps_read && start - last.1 <= MAX_ZERO_GAP * PAGE_SIZE) =>
                {
                    last.1 = last.1.max(end)
                }
                _ => runs.push((start, end)),
            }
        }
        runs
    }
}

/// The files `source`'s mappings map, each once: those whose pages may be read (the store
/// checks each to be the file mapped, regular and readable by the store's owner), and
/// why each of the others may not. Only the first may reach gdb, by path.
pub fn checked_files(source: &impl SnapshotSource) -> (Vec<&FileRef>, Vec<sdt_store::Error>) {
    let mut readable: Vec<&FileRef> = Vec::new();
    let mut refused: Vec<(&str, sdt_store::Error)> = Vec::new();
    for m in &source.meta().mappings {
        let Content::File(f) = &m.content else { continue };
        if readable.contains(&f) || refused.iter().any(|(path, _)| *path == f.path) {
            continue;
        }
        match source.check_file(f) {
            Ok(()) => readable.push(f),
            Err(e) => refused.push((&f.path, e)),
        }
    }
    (readable, refused.into_iter().map(|(_, e)| e).collect())
}

/// File offsets of everything in the core.
struct Layout<'a> {
    /// Program headers: the `PT_NOTE` and the `PT_LOAD`s.
    phnum: u64,
    notes_offset: u64,
    notes_size: u64,
    /// Where the first `PT_LOAD`'s contents start (page-aligned).
    data_offset: u64,
    loads: Vec<Load<'a>>,
    /// One past the last `PT_LOAD`'s contents.
    data_end: u64,
}

/// One `PT_LOAD`: `[start, start + memsz)` of a mapping, its first `filesz` bytes in the
/// file at `offset`.
struct Load<'a> {
    mapping: &'a Mapping,
    start: u64,
    memsz: u64,
    offset: u64,
    filesz: u64,
}

impl<'a> Layout<'a> {
    fn new(mappings: &'a [Mapping], contents: &Contents, notes_size: u64) -> Self {
        // `(start, memsz, filesz)` of each PT_LOAD.
        let mut segments: Vec<(&Mapping, u64, u64, u64)> = Vec::new();
        for m in mappings {
            let runs = contents.runs(m);
            match runs.first() {
                Some(&(first, _)) if first > m.start => segments.push((m, m.start, first - m.start, 0)),
                None => segments.push((m, m.start, m.len(), 0)),
                Some(_) => {}
            }
            for (i, &(start, end)) in runs.iter().enumerate() {
                let next = runs.get(i + 1).map_or(m.end, |r| r.0);
                segments.push((m, start, next - start, end - start));
            }
        }
        let phnum = 1 + segments.len() as u64;
        let notes_offset = EHDR_SIZE + phnum * PHDR_SIZE;
        let data_offset = (notes_offset + notes_size).next_multiple_of(PAGE_SIZE);
        let mut offset = data_offset;
        let loads = segments
            .into_iter()
            .map(|(mapping, start, memsz, filesz)| {
                let load = Load { mapping, start, memsz, offset, filesz };
                offset += filesz;
                load
            })
            .collect();
        Layout { phnum, notes_offset, notes_size, data_offset, loads, data_end: offset }
    }

    /// Whether the program headers need ELF extended numbering (`e_phnum = PN_XNUM`).
    fn is_extended(&self) -> bool {
        self.phnum >= u64::from(elf::PN_XNUM)
    }

    fn file_header(&self) -> FileHeader64<LittleEndian> {
        let extended = self.is_extended();
        FileHeader64 {
            e_ident: elf::Ident {
                magic: elf::ELFMAG,
                class: elf::ELFCLASS64,
                data: elf::ELFDATA2LSB,
                version: elf::EV_CURRENT,
                os_abi: elf::ELFOSABI_NONE,
                abi_version: 0,
                padding: [0; 7],
            },
            e_type: U16::new(LE, elf::ET_CORE),
            e_machine: U16::new(LE, elf::EM_X86_64),
            e_version: U32::new(LE, u32::from(elf::EV_CURRENT.0)),
            e_entry: U64::new(LE, 0),
            e_phoff: U64::new(LE, EHDR_SIZE),
            e_shoff: U64::new(LE, if extended { self.data_end } else { 0 }),
            e_flags: U32::new(LE, elf::FileFlags(0)),
            e_ehsize: U16::new(LE, EHDR_SIZE as u16),
            e_phentsize: U16::new(LE, PHDR_SIZE as u16),
            e_phnum: U16::new(LE, if extended { elf::PN_XNUM } else { self.phnum as u16 }),
            e_shentsize: U16::new(LE, if extended { SHDR_SIZE as u16 } else { 0 }),
            e_shnum: U16::new(LE, u16::from(extended)),
            e_shstrndx: U16::new(LE, elf::SHN_UNDEF),
        }
    }

    fn note_header(&self) -> ProgramHeader64<LittleEndian> {
        ProgramHeader64 {
            p_type: U32::new(LE, elf::PT_NOTE),
            p_flags: U32::new(LE, elf::ProgramFlags(0)),
            p_offset: U64::new(LE, self.notes_offset),
            p_vaddr: U64::new(LE, 0),
            p_paddr: U64::new(LE, 0),
            p_filesz: U64::new(LE, self.notes_size),
            p_memsz: U64::new(LE, 0),
            p_align: U64::new(LE, 4),
        }
    }

    /// Section header 0 carrying the program header count, when `e_phnum` cannot.
    fn extended_numbering(&self) -> Option<SectionHeader64<LittleEndian>> {
        self.is_extended().then(|| SectionHeader64 {
            sh_name: U32::new(LE, 0),
            sh_type: U32::new(LE, elf::SHT_NULL),
            sh_flags: U64::new(LE, elf::SectionFlags(0)),
            sh_addr: U64::new(LE, 0),
            sh_offset: U64::new(LE, 0),
            sh_size: U64::new(LE, 1), // e_shnum
            sh_link: U32::new(LE, 0), // e_shstrndx
            // The kernel caps a process's mappings far below 2^32.
            sh_info: U32::new(LE, self.phnum as u32),
            sh_addralign: U64::new(LE, 0),
            sh_entsize: U64::new(LE, 0),
        })
    }
}

impl Load<'_> {
    fn program_header(&self) -> ProgramHeader64<LittleEndian> {
        let perms = self.mapping.perms;
        let flag = |on: bool, f: elf::ProgramFlags| if on { f.0 } else { 0 };
        let flags = flag(perms.read, elf::PF_R) | flag(perms.write, elf::PF_W) | flag(perms.exec, elf::PF_X);
        ProgramHeader64 {
            p_type: U32::new(LE, elf::PT_LOAD),
            p_flags: U32::new(LE, elf::ProgramFlags(flags)),
            p_offset: U64::new(LE, self.offset),
            p_vaddr: U64::new(LE, self.start),
            p_paddr: U64::new(LE, 0),
            p_filesz: U64::new(LE, self.filesz),
            p_memsz: U64::new(LE, self.memsz),
            p_align: U64::new(LE, PAGE_SIZE),
        }
    }
}

/// A writer that counts what went through it.
struct Counting<W> {
    inner: W,
    written: u64,
}

impl<W: Write> Counting<W> {
    fn write(&mut self, bytes: &[u8]) -> Result<(), Error> {
        self.inner.write_all(bytes).map_err(Error::Write)?;
        self.written += bytes.len() as u64;
        Ok(())
    }

    /// Writes zeros up to file offset `offset`.
    fn pad_until(&mut self, offset: u64) -> Result<(), Error> {
        const ZEROS: [u8; PAGE_SIZE as usize] = [0; PAGE_SIZE as usize];
        while self.written < offset {
            let n = (offset - self.written).min(PAGE_SIZE) as usize;
            self.write(&ZEROS[..n])?;
        }
        Ok(())
    }
}

/// The contents of the `PT_NOTE` segment, in the order of the table at the top.
/// `file_names` are the files `NT_FILE` may name, and their names.
fn gen_notes(meta: &SnapshotMeta, file_names: &[(&FileRef, String)]) -> Result<Vec<u8>, Error> {
    if meta.threads.is_empty() {
        return Err(Error::NoThreads);
    }
    let mut notes = Vec::new();
    for (i, thread) in meta.threads.iter().enumerate() {
        thread.check_regsets()?;
        push_note(&mut notes, elf::ELF_NOTE_CORE, elf::NT_PRSTATUS, &gen_prstatus(meta, thread));
        if i == 0 {
            push_note(&mut notes, elf::ELF_NOTE_CORE, elf::NT_PRPSINFO, &gen_prpsinfo(&meta.process));
            push_note(&mut notes, elf::ELF_NOTE_CORE, elf::NT_SIGINFO, &gen_siginfo(meta));
            push_note(&mut notes, elf::ELF_NOTE_CORE, elf::NT_AUXV, gen_auxv(meta));
            push_note(&mut notes, elf::ELF_NOTE_CORE, elf::NT_FILE, &gen_files(&meta.mappings, file_names));
        }
        push_note(&mut notes, elf::ELF_NOTE_CORE, elf::NT_PRFPREG, gen_fpregset(thread));
        if let Some(xstate) = gen_x86_xstate(&thread.xstate) {
            push_note(&mut notes, elf::ELF_NOTE_LINUX, elf::NT_X86_XSTATE, &xstate);
        }
    }
    Ok(notes)
}

/// Appends one note: header, name with its NUL, descriptor, each padded to 4 bytes.
fn push_note(notes: &mut Vec<u8>, name: &[u8], n_type: NoteType, desc: &[u8]) {
    let header = NoteHeader32 {
        n_namesz: U32::new(LE, name.len() as u32 + 1),
        // Descriptors are a few KiB; NT_FILE grows by ~100 bytes per mapping.
        n_descsz: U32::new(LE, desc.len() as u32),
        n_type: U32::new(LE, n_type),
    };
    notes.extend_from_slice(bytes_of(&header));
    notes.extend_from_slice(name);
    notes.push(0);
    pad4(notes);
    notes.extend_from_slice(desc);
    pad4(notes);
}

fn pad4(bytes: &mut Vec<u8>) {
    bytes.resize(bytes.len().next_multiple_of(4), 0);
}

/// The signal the snapshot reports, as a crash dump reports the signal that killed the
/// process: `SIGTRAP` for a breakpoint (the trap of `int3`), the signal for one taken at
/// a fatal signal, none for a timer.
fn snapshot_signal(meta: &SnapshotMeta) -> i32 {
    match meta.trigger {
        Trigger::Breakpoint { .. } => SIGTRAP,
        Trigger::Signal { signo, .. } => signo,
        Trigger::Timer => 0,
    }
}

/// Copies `bytes` into `desc` at `offset`. Offsets are constants inside `desc`.
fn put(desc: &mut [u8], offset: usize, bytes: &[u8]) {
    desc[offset..offset + bytes.len()].copy_from_slice(bytes);
}

/// `NT_PRSTATUS`: `struct elf_prstatus`. Every thread carries the snapshot's signal, as
/// in Linux's `fill_thread_core_info` and gdb's `gcore`: BFD takes the signal gdb reports
/// from the *last* `NT_PRSTATUS` it reads.
fn gen_prstatus(meta: &SnapshotMeta, thread: &ThreadState) -> [u8; PRSTATUS_SIZE] {
    let signal = snapshot_signal(meta);
    let p = &meta.process;
    let mut d = [0; PRSTATUS_SIZE];
    put(&mut d, 0, &signal.to_le_bytes()); // pr_info.si_signo; si_code @4, si_errno @8: 0
    put(&mut d, 12, &(signal as i16).to_le_bytes()); // pr_cursig
    // pr_sigpend @16: pending signals are not captured.
    put(&mut d, 24, &thread.sigmask.to_le_bytes()); // pr_sighold
    put(&mut d, 32, &thread.tid.to_le_bytes()); // pr_pid
    put(&mut d, 36, &p.ppid.to_le_bytes()); // pr_ppid
    put(&mut d, 40, &p.pgrp.to_le_bytes()); // pr_pgrp
    put(&mut d, 44, &p.sid.to_le_bytes()); // pr_sid
    // pr_utime, pr_stime, pr_cutime, pr_cstime @48..112: not captured.
    put(&mut d, 112, &thread.gpregs); // pr_reg: user_regs_struct, checked to be 216 bytes
    put(&mut d, 328, &1i32.to_le_bytes()); // pr_fpvalid
    d
}

/// `NT_PRPSINFO`: `struct elf_prpsinfo`.
fn gen_prpsinfo(p: &ProcessInfo) -> [u8; PRPSINFO_SIZE] {
    let mut d = [0; PRPSINFO_SIZE];
    // pr_state @0: 0, running.
    d[1] = b'R'; // pr_sname; pr_zomb @2, pr_nice @3, pr_flag @8: 0
    put(&mut d, 16, &p.uid.to_le_bytes()); // pr_uid
    put(&mut d, 20, &p.gid.to_le_bytes()); // pr_gid
    put(&mut d, 24, &p.pid.to_le_bytes()); // pr_pid
    put(&mut d, 28, &p.ppid.to_le_bytes()); // pr_ppid
    put(&mut d, 32, &p.pgrp.to_le_bytes()); // pr_pgrp
    put(&mut d, 36, &p.sid.to_le_bytes()); // pr_sid
    put_cstr(&mut d[40..40 + FNAME_SIZE], p.comm.as_bytes()); // pr_fname
    put_cstr(&mut d[56..56 + PRARGSZ], p.cmdline.join(" ").as_bytes()); // pr_psargs
    d
}

/// Copies `s` into `field`, truncated so that a NUL always follows.
fn put_cstr(field: &mut [u8], s: &[u8]) {
    let n = s.len().min(field.len() - 1);
    field[..n].copy_from_slice(&s[..n]);
}

/// `NT_SIGINFO`: the `siginfo_t` of the signal the snapshot reports (`si_code` `SI_KERNEL`
/// for a breakpoint's trap; a fatal signal's own code, and a fault's address), all zero
/// for a timer.
pub fn gen_siginfo(meta: &SnapshotMeta) -> [u8; SIGINFO_SIZE] {
    let signal = snapshot_signal(meta);
    let mut d = [0; SIGINFO_SIZE];
    if signal != 0 {
        let (code, addr) = match meta.trigger {
            Trigger::Signal { code, addr, .. } => (code, addr),
            _ => (SI_KERNEL, 0),
        };
        put(&mut d, 0, &signal.to_le_bytes()); // si_signo; si_errno @4: 0
        put(&mut d, 8, &code.to_le_bytes()); // si_code
        put(&mut d, 16, &addr.to_le_bytes()); // si_addr
    }
    d
}

/// `NT_AUXV`: the auxiliary vector as captured.
fn gen_auxv(meta: &SnapshotMeta) -> &[u8] {
    &meta.auxv
}

/// The file a mapping maps, for `NT_FILE`: where the one the store reads its pages from
/// lies, if it is among `file_names`. gdb opens the files `NT_FILE` names and reads from
/// them what the core lacks, so it names only those checked to be the files mapped (or
/// the copies of them the run kept), regular and readable by the store's owner; never a
/// path the store merely mentions.
fn mapped_file<'a>(m: &Mapping, file_names: &'a [(&FileRef, String)]) -> Option<&'a str> {
    match &m.content {
        Content::File(f) => file_names.iter().find(|(named, _)| *named == f).map(|(_, name)| name.as_str()),
        _ => None,
    }
}

/// `NT_FILE`: count, page size, then (start, end, offset in pages) per file mapping, then
/// their paths, each NUL-terminated.
fn gen_files<'a>(mappings: &'a [Mapping], file_names: &'a [(&FileRef, String)]) -> Vec<u8> {
    let files: Vec<(&Mapping, &str)> =
        mappings.iter().filter_map(|m| Some((m, mapped_file(m, file_names)?))).collect();
    let mut d = Vec::new();
    d.extend_from_slice(&(files.len() as u64).to_le_bytes());
    d.extend_from_slice(&PAGE_SIZE.to_le_bytes());
    for (m, _) in &files {
        for word in [m.start, m.end, m.offset / PAGE_SIZE] {
            d.extend_from_slice(&word.to_le_bytes());
        }
    }
    for (_, path) in &files {
        d.extend_from_slice(path.as_bytes());
        d.push(0);
    }
    d
}

/// `NT_PRFPREG`: the FXSAVE area, checked to be 512 bytes.
fn gen_fpregset(thread: &ThreadState) -> &[u8] {
    &thread.fpregs
}

/// XCR0 bits of the components gdb 13 knows (`X86_XSTATE_ALL_MASK`).
mod xfeature {
    pub const X87: u64 = 1 << 0;
    pub const SSE: u64 = 1 << 1;
    pub const AVX: u64 = 1 << 2;
    /// BNDREGS and BNDCSR.
    pub const MPX: u64 = 0b11 << 3;
    /// Opmask, ZMM_Hi256, Hi16_ZMM.
    pub const AVX512: u64 = 0b111 << 5;
    pub const PKRU: u64 = 1 << 9;
    pub const GDB_KNOWN: u64 = X87 | SSE | AVX | MPX | AVX512 | PKRU;
}

/// gdb's `X86_XSTATE_SIZE(xcr0)`: the size it requires of `.reg-xstate`, up to the end of
/// the last component it knows that `xcr0` enables.
fn gdb_xstate_size(xcr0: u64) -> usize {
    if xcr0 & xfeature::PKRU != 0 {
        2696
    } else if xcr0 & xfeature::AVX512 != 0 {
        2688
    } else if xcr0 & xfeature::MPX != 0 {
        1088
    } else if xcr0 & xfeature::AVX != 0 {
        832
    } else {
        XSAVE_HEADER_END
    }
}

/// `NT_X86_XSTATE`, in the shape gdb 13 accepts without "Unexpected size of section
/// `.reg-xstate'": XCR0 and XSTATE_BV masked to the components it knows (newer ones such
/// as AMX lie past them), the area truncated or zero-padded to the size it computes from
/// that XCR0. `None` if the snapshot holds no XSAVE area; one too short for its header
/// (a damaged snapshot) counts as enabling nothing.
fn gen_x86_xstate(xstate: &[u8]) -> Option<Vec<u8>> {
    if xstate.is_empty() {
        return None;
    }
    let known = |head: XsaveHead| {
        (head.legacy.xcr0() & xfeature::GDB_KNOWN, head.header.xstate_bv & xfeature::GDB_KNOWN)
    };
    let (xcr0, xstate_bv) = XsaveHead::read(xstate).map_or((0, 0), known);
    let size = gdb_xstate_size(xcr0);
    let mut d = xstate[..xstate.len().min(size)].to_vec();
    d.resize(size, 0);
    let mut head = XsaveHead::read(&d)?;
    head.legacy.set_xcr0(xcr0);
    head.header.xstate_bv = xstate_bv;
    d[..XSAVE_HEADER_END].copy_from_slice(head.as_bytes());
    Some(d)
}

#[cfg(test)]
mod tests;
