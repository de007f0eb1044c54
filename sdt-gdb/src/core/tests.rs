use object::elf::{FileHeader64, ProgramHeader64};
use object::read::elf::{ElfFile64, FileHeader, ProgramHeader};

use super::*;
use crate::fake::{self, FakeSource};

struct Note {
    name: Vec<u8>,
    n_type: u32,
    desc: Vec<u8>,
}

fn core_of(source: &FakeSource) -> Vec<u8> {
    let mut core = Vec::new();
    let report = write_core(source, &mut core).unwrap();
    assert_eq!(report.bytes, core.len() as u64);
    core
}

fn program_headers(core: &[u8]) -> &[ProgramHeader64<LittleEndian>] {
    // Not `ElfFile64`: it refuses section headers without a string table, which the kernel
    // writes for extended numbering.
    FileHeader64::<LittleEndian>::parse(core).unwrap().program_headers(LE, core).unwrap()
}

fn notes(core: &[u8]) -> Vec<Note> {
    let phdrs = program_headers(core);
    assert_eq!(phdrs[0].p_type(LE), elf::PT_NOTE);
    let mut it = phdrs[0].notes(LE, core).unwrap().unwrap();
    let mut notes = Vec::new();
    while let Some(note) = it.next().unwrap() {
        notes.push(Note {
            name: note.name().to_vec(),
            n_type: note.n_type(LE).0,
            desc: note.desc().to_vec(),
        });
    }
    notes
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap())
}

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap())
}

#[test]
fn elf_header() {
    let core = core_of(&fake::sample());
    ElfFile64::<LittleEndian>::parse(&*core).unwrap();
    let header = FileHeader64::<LittleEndian>::parse(&*core).unwrap();
    assert_eq!(header.e_ident.class, elf::ELFCLASS64);
    assert_eq!(header.e_ident.data, elf::ELFDATA2LSB);
    assert_eq!(header.e_ident.os_abi, elf::ELFOSABI_NONE);
    assert_eq!(header.e_type(LE), elf::ET_CORE);
    assert_eq!(header.e_machine(LE), elf::EM_X86_64);
    assert_eq!(header.e_version(LE), 1);
    assert_eq!(header.e_phoff(LE), 64);
    assert_eq!(header.e_phnum(LE), 5);
    assert_eq!(header.e_shoff(LE), 0);
    assert_eq!(header.e_shnum(LE), 0);
}

#[test]
fn notes_in_order_with_kernel_sizes() {
    let core = core_of(&fake::sample());
    let got: Vec<_> = notes(&core)
        .iter()
        .map(|n| (String::from_utf8(n.name.clone()).unwrap(), n.n_type, n.desc.len()))
        .collect();
    let files_size = 16 + 24 + fake::EXE.len() + 1;
    let expected = [
        ("CORE", elf::NT_PRSTATUS.0, 336),
        ("CORE", elf::NT_PRPSINFO.0, 136),
        ("CORE", elf::NT_SIGINFO.0, 128),
        ("CORE", elf::NT_AUXV.0, 48),
        ("CORE", elf::NT_FILE.0, files_size),
        ("CORE", elf::NT_PRFPREG.0, 512),
        ("LINUX", elf::NT_X86_XSTATE.0, 2696),
        ("CORE", elf::NT_PRSTATUS.0, 336),
        ("CORE", elf::NT_PRFPREG.0, 512),
        ("LINUX", elf::NT_X86_XSTATE.0, 2696),
    ];
    let expected: Vec<_> = expected.iter().map(|&(name, t, len)| (name.to_owned(), t, len)).collect();
    assert_eq!(got, expected);
    // NT_FILE's paths end unaligned; the segment is padded to 4.
    assert_eq!(program_headers(&core)[0].p_filesz(LE) % 4, 0);
}

#[test]
fn prstatus_per_thread() {
    let source = fake::sample();
    let core = core_of(&source);
    let prstatus: Vec<_> = notes(&core).into_iter().filter(|n| n.n_type == elf::NT_PRSTATUS.0).collect();
    assert_eq!(prstatus.len(), 2);
    for (note, thread) in prstatus.iter().zip(&source.meta.threads) {
        let d = &note.desc;
        assert_eq!(u32_at(d, 0), 5, "si_signo of {}", thread.tid);
        assert_eq!(u32_at(d, 4), 0, "si_code");
        assert_eq!(u16::from_le_bytes([d[12], d[13]]), 5, "pr_cursig of {}", thread.tid);
        assert_eq!(u64_at(d, 16), 0, "pr_sigpend");
        assert_eq!(u64_at(d, 24), thread.sigmask, "pr_sighold");
        assert_eq!(u32_at(d, 32), thread.tid as u32, "pr_pid");
        assert_eq!([u32_at(d, 36), u32_at(d, 40), u32_at(d, 44)], [999, 998, 997]);
        assert!(d[48..112].iter().all(|&b| b == 0), "times");
        assert_eq!(&d[112..328], &thread.gpregs[..], "pr_reg");
        assert_eq!(u32_at(d, 328), 1, "pr_fpvalid");
    }
}

#[test]
fn prpsinfo_siginfo_auxv_fpregset() {
    let source = fake::sample();
    let notes = notes(&core_of(&source));
    let psinfo = &notes[1].desc;
    assert_eq!(&psinfo[..4], b"\0R\0\0");
    assert_eq!(u64_at(psinfo, 8), 0, "pr_flag");
    let ids: Vec<_> = (16..40).step_by(4).map(|at| u32_at(psinfo, at)).collect();
    assert_eq!(ids, [1234, 5678, 1000, 999, 998, 997]);
    assert_eq!(&psinfo[40..56], b"prog\0\0\0\0\0\0\0\0\0\0\0\0");
    let args = b"/usr/bin/prog --size 3";
    assert_eq!(&psinfo[56..56 + args.len()], args);
    assert!(psinfo[56 + args.len()..].iter().all(|&b| b == 0));

    let siginfo = &notes[2].desc;
    assert_eq!([u32_at(siginfo, 0), u32_at(siginfo, 4), u32_at(siginfo, 8)], [5, 0, 0x80]);
    assert!(siginfo[12..].iter().all(|&b| b == 0));

    assert_eq!(notes[3].desc, source.meta.auxv);
    assert_eq!(notes[5].desc, source.meta.threads[0].fpregs);
    assert_eq!(notes[8].desc, source.meta.threads[1].fpregs);
}

#[test]
fn long_comm_and_cmdline_are_truncated_with_a_nul() {
    let mut source = fake::sample();
    source.meta.process.comm = "a-very-long-command-name".into();
    source.meta.process.cmdline = vec!["x".repeat(50), "y".repeat(50)];
    let psinfo = &notes(&core_of(&source))[1].desc;
    assert_eq!(&psinfo[40..56], b"a-very-long-com\0");
    let expected = format!("{} {}", "x".repeat(50), "y".repeat(28));
    assert_eq!(&psinfo[56..135], expected.as_bytes());
    assert_eq!(psinfo[135], 0);
}

#[test]
fn timer_snapshot_reports_no_signal() {
    let mut source = fake::sample();
    source.meta.trigger = Trigger::Timer;
    let notes = notes(&core_of(&source));
    for note in notes.iter().filter(|n| n.n_type == elf::NT_PRSTATUS.0) {
        assert_eq!(u32_at(&note.desc, 0), 0);
        assert_eq!(u16::from_le_bytes([note.desc[12], note.desc[13]]), 0);
    }
    assert!(notes[2].desc.iter().all(|&b| b == 0), "siginfo");
}

#[test]
fn a_snapshot_at_a_signal_reports_the_signal_its_code_and_address() {
    let mut source = fake::sample();
    let tid = source.meta.threads[0].tid;
    source.meta.trigger = Trigger::Signal { signo: 11, code: 2, addr: 0xdead_b000, tid };
    let notes = notes(&core_of(&source));
    for note in notes.iter().filter(|n| n.n_type == elf::NT_PRSTATUS.0) {
        assert_eq!(u32_at(&note.desc, 0), 11, "si_signo");
        assert_eq!(u16::from_le_bytes([note.desc[12], note.desc[13]]), 11, "pr_cursig");
    }
    let siginfo = &notes[2].desc;
    assert_eq!([u32_at(siginfo, 0), u32_at(siginfo, 4), u32_at(siginfo, 8)], [11, 0, 2]);
    assert_eq!(u64_at(siginfo, 16), 0xdead_b000, "si_addr");
    assert!(siginfo[24..].iter().all(|&b| b == 0));
}

/// The `NT_FILE` entries of a core: (start, end, offset in pages, path).
fn nt_file(core: &[u8]) -> Vec<(u64, u64, u64, Vec<u8>)> {
    let notes = notes(core);
    let d = &notes.iter().find(|n| n.n_type == elf::NT_FILE.0).unwrap().desc;
    assert_eq!(u64_at(d, 8), 4096);
    let count = u64_at(d, 0) as usize;
    let paths = d[16 + 24 * count..].split(|&b| b == 0);
    (0..count)
        .zip(paths)
        .map(|(i, p)| (u64_at(d, 16 + 24 * i), u64_at(d, 24 + 24 * i), u64_at(d, 32 + 24 * i), p.to_vec()))
        .collect()
}

#[test]
fn nt_file_lists_the_files_pages_come_from() {
    // Not libc's: its data was captured whole, and gdb would open whatever path the store
    // names there.
    let source = fake::sample();
    assert_eq!(nt_file(&core_of(&source)), [(0x40_0000, 0x40_2000, 1, fake::EXE.as_bytes().to_vec())]);
}

#[test]
fn loads_hold_every_readable_mapping() {
    let source = fake::sample();
    let core = core_of(&source);
    let phdrs = &program_headers(&core)[1..];
    assert_eq!(phdrs.len(), source.meta.mappings.len());
    for (ph, m) in phdrs.iter().zip(&source.meta.mappings) {
        assert_eq!(ph.p_type(LE), elf::PT_LOAD);
        assert_eq!(ph.p_vaddr(LE), m.start);
        assert_eq!(ph.p_paddr(LE), 0);
        assert_eq!(ph.p_memsz(LE), m.len());
        assert_eq!(ph.p_align(LE), 4096);
        assert_eq!(ph.p_offset(LE) % 4096, 0, "{} at a page boundary", m.path);
        let data = ph.data(LE, &*core).unwrap();
        if m.perms.read {
            assert_eq!(ph.p_filesz(LE), m.len());
            let expected: Vec<u8> = (m.start..m.end).map(|a| source.memory[&a]).collect();
            assert!(data == expected, "contents of {:#x}", m.start);
        } else {
            assert_eq!(ph.p_filesz(LE), 0);
        }
    }
    let flags: Vec<_> = phdrs.iter().map(|ph| ph.p_flags(LE).0).collect();
    let (r, w, x) = (elf::PF_R.0, elf::PF_W.0, elf::PF_X.0);
    assert_eq!(flags, [r | x, r | w, r | w, 0]);
    // Contents follow each other; the last one ends the file.
    let last = &phdrs[2];
    assert_eq!(last.p_offset(LE) + last.p_filesz(LE), core.len() as u64);
    assert_eq!(phdrs[3].p_offset(LE), core.len() as u64);
}

#[test]
fn large_mapping_is_written_in_chunks() {
    let mut source = fake::sample();
    let start = 0x1000_0000;
    let len = CHUNK as u64 * 2 + PAGE_SIZE;
    source.meta.mappings.insert(0, Mapping { start, end: start + len, ..source.meta.mappings[2].clone() });
    source.stored.extend(fake::pages(&source.meta.mappings[0]));
    for addr in [start, start + CHUNK as u64 - 1, start + CHUNK as u64, start + len - 1] {
        source.memory.insert(addr, 0xab);
    }
    let core = core_of(&source);
    let ph = &program_headers(&core)[1];
    let data = ph.data(LE, &*core).unwrap();
    assert_eq!(data.len() as u64, len);
    let marked: Vec<_> =
        data.iter().enumerate().filter(|&(_, &b)| b == 0xab).map(|(i, _)| i as u64).collect();
    assert_eq!(marked, [0, CHUNK as u64 - 1, CHUNK as u64, len - 1]);
}

#[test]
fn xstate_is_cut_to_what_gdb_knows() {
    // AMX (XCR0 bits 17, 18) on: 11008 bytes from the kernel, 2696 for gdb.
    let x = gen_x86_xstate(&fake::xsave(11008, 0x602e7, 0x602e3)).unwrap();
    assert_eq!(x.len(), 2696);
    assert_eq!(u64_at(&x, 464), 0x2e7);
    assert_eq!(u64_at(&x, 512), 0x2e3);
    assert_eq!(x[..464], fake::xsave(11008, 0, 0)[..464]);
    assert_eq!(x[520..], fake::xsave(11008, 0, 0)[520..2696]);

    for (xcr0, size) in
        [(0x2ff, 2696), (0xff, 2688), (0xe7, 2688), (0x1f, 1088), (0x7, 832), (0x3, 576), (0x1, 576)]
    {
        let x = gen_x86_xstate(&fake::xsave(2696, xcr0, 0x3)).unwrap();
        assert_eq!(x.len(), size, "xcr0 {xcr0:#x}");
        assert_eq!(u64_at(&x, 464), xcr0);
    }
    // Shorter than gdb expects: zero-padded.
    let x = gen_x86_xstate(&fake::xsave(832, 0x207, 0x7)).unwrap();
    assert_eq!(x.len(), 2696);
    assert!(x[832..].iter().all(|&b| b == 0));
    // Too short to hold XCR0: taken as x87/SSE only.
    let x = gen_x86_xstate(&[0xff; 100]).unwrap();
    assert_eq!(x.len(), 576);
    assert_eq!(u64_at(&x, 464), 0);
    assert!(gen_x86_xstate(&[]).is_none());
}

#[test]
fn thread_without_xstate_has_no_xstate_note() {
    let mut source = fake::sample();
    source.meta.threads[1].xstate.clear();
    let types: Vec<_> = notes(&core_of(&source)).iter().map(|n| n.n_type).collect();
    assert_eq!(types[7..], [elf::NT_PRSTATUS.0, elf::NT_PRFPREG.0]);
}

#[test]
fn failed_read_names_the_mapping() {
    let mut source = fake::sample();
    source.corrupt_page = Some(0x7f10_1000);
    let err = write_core(&source, Vec::new()).unwrap_err();
    assert!(matches!(err, Error::Store { source: sdt_store::Error::Corrupt { .. }, .. }), "{err:?}");
    assert_eq!(err.to_string(), "cannot read mapping 0x7f100000-0x7f103000 [heap] from the snapshot");
}

/// `(vaddr, memsz, filesz)` of each PT_LOAD.
fn loads(core: &[u8]) -> Vec<(u64, u64, u64)> {
    program_headers(core)[1..].iter().map(|ph| (ph.p_vaddr(LE), ph.p_memsz(LE), ph.p_filesz(LE))).collect()
}

#[test]
fn pages_the_store_does_not_hold_take_no_room() {
    let mut source = fake::sample();
    // A 64 TiB reservation the program wrote one page of, near its end.
    let (start, len) = (0x1000_0000_0000, 64 << 40);
    source.meta.mappings.push(Mapping { start, end: start + len, ..source.meta.mappings[2].clone() });
    source.stored.insert(start + len - 2 * PAGE_SIZE);
    source.memory.insert(start + len - 2 * PAGE_SIZE + 5, 0xcd);
    let core = core_of(&source);
    assert!(core.len() < 64 << 10, "{} bytes", core.len());
    assert_eq!(
        loads(&core)[4..],
        [(start, len - 2 * PAGE_SIZE, 0), (start + len - 2 * PAGE_SIZE, 2 * PAGE_SIZE, PAGE_SIZE)]
    );
    let ph = program_headers(&core).last().unwrap();
    assert_eq!(ph.data(LE, &*core).unwrap()[5], 0xcd);
}

#[test]
fn short_gaps_are_zeros_and_long_ones_split() {
    let mut source = fake::sample();
    let heap = source.meta.mappings[2].clone();
    let start = 0x2000_0000;
    source.meta.mappings.push(Mapping { start, end: start + 32 * PAGE_SIZE, ..heap });
    // Pages 1, 1 + MAX_ZERO_GAP + 1 (a gap written as zeros), then page 20 (a split).
    for page in [1, 2 + MAX_ZERO_GAP, 20] {
        source.stored.insert(start + page * PAGE_SIZE);
    }
    let p = |n: u64| n * PAGE_SIZE;
    assert_eq!(
        loads(&core_of(&source))[4..],
        [(start, p(1), 0), (start + p(1), p(19), p(2 + MAX_ZERO_GAP)), (start + p(20), p(12), p(1))]
    );
}

#[test]
fn a_file_that_cannot_be_read_leaves_its_pages_out_and_says_why() {
    let mut source = fake::sample();
    source.changed_file = Some(fake::EXE.into());
    // The program wrote the second page of the executable's mapping: that page stays.
    source.stored.insert(0x40_1000);
    let mut core = Vec::new();
    let report = write_core(&source, &mut core).unwrap();
    assert_eq!(loads(&core)[..2], [(0x40_0000, PAGE_SIZE, 0), (0x40_1000, PAGE_SIZE, PAGE_SIZE)]);
    assert_eq!(nt_file(&core), []);
    assert_eq!(
        report.notes,
        [format!(
            "{} changed since snapshot S1 was taken (size 1, expected 2): the core holds only the pages the \
             store has of it (the rest reads as zeros)",
            fake::EXE
        )]
    );
}

#[test]
fn pages_past_a_files_end_take_no_room() {
    let mut source = fake::sample();
    let Content::File(f) = &mut source.meta.mappings[0].content else { panic!() };
    // The file ends 100 bytes into the mapping's second page.
    f.size = 0x2000 + 100;
    assert_eq!(loads(&core_of(&source))[0], (0x40_0000, 2 * PAGE_SIZE, 2 * PAGE_SIZE));
    f_size(&mut source, 0x1000 + 100);
    assert_eq!(loads(&core_of(&source))[0], (0x40_0000, 2 * PAGE_SIZE, PAGE_SIZE));
    f_size(&mut source, 0x800);
    assert_eq!(loads(&core_of(&source))[0], (0x40_0000, 2 * PAGE_SIZE, 0));
}

fn f_size(source: &mut fake::FakeSource, size: u64) {
    let Content::File(f) = &mut source.meta.mappings[0].content else { panic!() };
    f.size = size;
}

#[test]
fn bad_snapshots_are_refused() {
    let mut source = fake::sample();
    source.meta.threads[1].gpregs.pop();
    let err = write_core(&source, Vec::new()).unwrap_err();
    assert_eq!(err.to_string(), "thread 1002: gpregs is 215 bytes, expected 216");

    source.meta.threads.clear();
    assert!(matches!(write_core(&source, Vec::new()), Err(Error::NoThreads)));
}

#[test]
fn write_errors_are_reported() {
    struct Full;
    impl Write for Full {
        fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
            Err(std::io::ErrorKind::StorageFull.into())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let err = write_core(&fake::sample(), Full).unwrap_err();
    assert!(matches!(err, Error::Write(e) if e.kind() == std::io::ErrorKind::StorageFull));
}

#[test]
fn many_mappings_use_extended_numbering() {
    let mut source = fake::sample();
    let guard = source.meta.mappings.pop().unwrap();
    let count = usize::from(elf::PN_XNUM);
    source.meta.mappings = (0..count as u64)
        .map(|i| Mapping {
            start: 0x1_0000_0000 + i * 0x2000,
            end: 0x1_0000_1000 + i * 0x2000,
            ..guard.clone()
        })
        .collect();
    let core = core_of(&source);
    let header = FileHeader64::<LittleEndian>::parse(&*core).unwrap();
    assert_eq!(header.e_phnum(LE), elf::PN_XNUM);
    assert_eq!(header.e_shnum(LE), 1);
    assert_eq!(header.e_shoff(LE) as usize, core.len() - 64);
    assert_eq!(header.phnum(LE, &*core).unwrap() as usize, count + 1);
    let phdrs = program_headers(&core);
    assert_eq!(phdrs.len(), count + 1);
    assert_eq!(phdrs[count].p_vaddr(LE), 0x1_0000_0000 + (count as u64 - 1) * 0x2000);
}
