//! What gdb asks of one snapshot, worked out once when the server moves to it: the
//! threads, the target description, the program and the shared libraries gdb may open.

use sdt_store::{Content, FileRef, SnapshotSource, Trigger};

use crate::regs::Registers;

/// `auxv` keys (`<elf.h>`).
const AT_PHDR: u64 = 3;
const AT_PHNUM: u64 = 5;
/// Program header types and dynamic tags.
const PT_DYNAMIC: u32 = 2;
const PT_PHDR: u32 = 6;
const DT_NULL: u64 = 0;
const DT_DEBUG: u64 = 21;
/// Most link map entries followed (a damaged or hostile list may loop).
const MAX_LINK_MAPS: usize = 4096;

/// One snapshot as the server presents it.
pub struct View {
    /// Registers described and sent.
    pub regs: Registers,
    /// `qXfer:threads:read`.
    pub threads_xml: String,
    /// `qXfer:features:read:target.xml`.
    pub target_xml: String,
    /// `qXfer:libraries-svr4:read`.
    pub libraries_xml: String,
    /// The main program's `struct link_map`, if the dynamic linker's list was found.
    pub main_lm: Option<u64>,
    /// `qXfer:exec-file:read`: the program, if the store checks it; else empty.
    pub exec_file: String,
    /// The stop reply (`?`): the breakpoint's `SIGTRAP` in the thread that reached it.
    pub stop_reply: String,
}

impl View {
    /// The view of `snap`.
    pub fn of(snap: &impl SnapshotSource) -> View {
        let meta = snap.meta();
        let regs = Registers::of(&meta.threads);
        let mut threads_xml = String::from("<?xml version=\"1.0\"?>\n<threads>\n");
        for t in &meta.threads {
            threads_xml.push_str(&format!("<thread id=\"{:x}\" name=\"{}\"/>\n", t.tid, xml_text(&t.name)));
        }
        threads_xml.push_str("</threads>\n");
        let (readable, _) = sdt_gdb::core::checked_files(snap);
        let exe = &meta.process.exe;
        // Or the program deleted before the capture, kept with the run.
        let exec_file = readable
            .iter()
            .find(|f| f.path == *exe)
            .copied()
            .or(meta.process.deleted_program.as_ref())
            .and_then(|f| snap.file_path(f).ok())
            .map_or_else(String::new, |path| path.to_string_lossy().into_owned());
        let maps = link_maps(snap).unwrap_or_default();
        let libraries_xml = libraries_xml(snap, &maps, &readable);
        let tid = meta.threads.first().map_or(0, |t| t.tid);
        let stop_reply = match meta.trigger {
            Trigger::Breakpoint { .. } => format!("T05thread:{tid:x};swbreak:;"),
            Trigger::Timer => format!("T00thread:{tid:x};"),
            Trigger::Signal { signo, .. } => format!("T{signo:02x}thread:{tid:x};"),
        };
        let main_lm = maps.first().map(|m| m.lm);
        View {
            regs,
            threads_xml,
            target_xml: regs.target_xml(),
            libraries_xml,
            main_lm,
            exec_file,
            stop_reply,
        }
    }
}

/// The dynamic linker's list of loaded objects (`r_debug.r_map`), as
/// `<library-list-svr4>`: found as gdb finds it in a core, from the program's
/// `PT_DYNAMIC` (through `AT_PHDR`) to `DT_DEBUG`. Each library is named by the file
/// mapped where its dynamic section (`l_ld`) or its start (`l_addr`) lies, and listed
/// only if the store checks that file: gdb opens no path the snapshot merely names, and
/// gets the path the kernel resolved (`/usr/lib/…` where the loader says `/lib/…`), or
/// that of the copy kept with the run where the file changed since. The
/// main program (the first entry) is `main-lm`. SDT's own MPI interposition library, which
/// `sdt run` loads from a memfd, is named by its file name (`sdtmpi-openmpi.so`) when its
/// first segment is byte for byte that of the library this sdt carries: `sdt gdb` writes
/// the library there for gdb (`solib-search-path`), which unwinds through it. A program
/// without the list (static, or a damaged snapshot) has no libraries.
fn libraries_xml(snap: &impl SnapshotSource, maps: &[LinkMap], readable: &[&FileRef]) -> String {
    let mut xml = String::from("<library-list-svr4 version=\"1.0\"");
    if let Some(main) = maps.first() {
        xml.push_str(&format!(" main-lm=\"{:#x}\"", main.lm));
    }
    xml.push('>');
    let mapped_at = |addr: u64, start_only: bool| {
        snap.meta().mappings.iter().find_map(|m| match &m.content {
            Content::File(f)
                if readable.contains(&f)
                    && if start_only {
                        m.start == addr && m.offset == 0
                    } else {
                        m.start <= addr && addr < m.end
                    } =>
            {
                Some(f)
            }
            _ => None,
        })
    };
    for m in maps.iter().skip(1) {
        let path = mapped_at(m.l_ld, false)
            .or_else(|| mapped_at(m.l_addr, true))
            .and_then(|f| snap.file_path(f).ok())
            .map(|path| path.to_string_lossy().into_owned())
            .or_else(|| sdt_library(snap, m.l_addr).map(str::to_owned));
        let Some(path) = path else { continue };
        xml.push_str(&format!(
            "<library name=\"{}\" lm=\"{:#x}\" l_addr=\"{:#x}\" l_ld=\"{:#x}\" lmid=\"0x0\"/>",
            xml_text(&path),
            m.lm,
            m.l_addr,
            m.l_ld
        ));
    }
    xml.push_str("</library-list-svr4>");
    xml
}

/// The file name of SDT's MPI library if the memory mapping at `base` (its first, from
/// offset 0) holds it.
fn sdt_library(snap: &impl SnapshotSource, base: u64) -> Option<&'static str> {
    let first = snap.meta().mappings.iter().find(|m| m.start == base && m.offset == 0)?;
    if first.content != Content::Zero {
        return None;
    }
    // A first segment is a few pages: the ELF header, the dynamic symbols.
    let mut image = vec![0; (first.end - first.start).min(1 << 20) as usize];
    snap.read(base, &mut image).ok()?;
    sdt_mpi::Mpi::of_image(&image).map(sdt_mpi::Mpi::file_name)
}

/// One `struct link_map`.
struct LinkMap {
    lm: u64,
    l_addr: u64,
    l_ld: u64,
}

fn link_maps(snap: &impl SnapshotSource) -> Option<Vec<LinkMap>> {
    let word = |addr: u64| {
        let mut b = [0; 8];
        snap.read(addr, &mut b).ok().map(|()| u64::from_le_bytes(b))
    };
    let auxv: Vec<(u64, u64)> = snap
        .meta()
        .auxv
        .chunks_exact(16)
        .map(|p| {
            (u64::from_le_bytes(p[..8].try_into().unwrap()), u64::from_le_bytes(p[8..].try_into().unwrap()))
        })
        .collect();
    let aux = |key| auxv.iter().find(|(k, _)| *k == key).map(|(_, v)| *v);
    let (phdr, phnum) = (aux(AT_PHDR)?, aux(AT_PHNUM)?);
    // Elf64_Phdr: p_type @0 (u32), p_vaddr @16, p_memsz @40; 56 bytes each.
    let mut phdrs = vec![0; 56 * phnum.min(256) as usize];
    snap.read(phdr, &mut phdrs).ok()?;
    let field = |p: &[u8], at: usize| u64::from_le_bytes(p[at..at + 8].try_into().unwrap());
    let kind = |p: &[u8]| u32::from_le_bytes(p[..4].try_into().unwrap());
    let bias =
        phdrs.chunks_exact(56).find(|p| kind(p) == PT_PHDR).map_or(0, |p| phdr.wrapping_sub(field(p, 16)));
    let dynamic = phdrs.chunks_exact(56).find(|p| kind(p) == PT_DYNAMIC)?;
    let (start, size) = (bias.wrapping_add(field(dynamic, 16)), field(dynamic, 40));
    let mut r_debug = 0;
    for at in (0..size.min(1 << 16)).step_by(16) {
        match word(start.wrapping_add(at))? {
            DT_NULL => break,
            DT_DEBUG => r_debug = word(start.wrapping_add(at + 8))?,
            _ => {}
        }
    }
    // struct r_debug: r_version @0, r_map @8. struct link_map: l_addr @0, l_name @8,
    // l_ld @16, l_next @24.
    let mut lm = word(r_debug.checked_add(8)?)?;
    let mut maps = Vec::new();
    while lm != 0 && maps.len() < MAX_LINK_MAPS {
        maps.push(LinkMap { lm, l_addr: word(lm)?, l_ld: word(lm + 16)? });
        lm = word(lm + 24)?;
    }
    Some(maps)
}

/// `text` for an XML attribute: markup escaped, control characters as `?`.
fn xml_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c if c.is_control() => out.push('?'),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_cannot_break_the_markup() {
        assert_eq!(xml_text("a\"/><x y='1'>&\n"), "a&quot;/&gt;&lt;x y=&apos;1&apos;&gt;&amp;?");
    }
}
