//! Where a function's body starts, past the prologue that stores its arguments: from the
//! DWARF of the file that defines it, the way gdb places a breakpoint on a function.
//!
//! A `--break` int3 sits on the function's first instruction, so that every arrival is
//! seen however the function is entered. There, a function compiled without optimisation
//! has not yet stored its arguments where its DWARF says they are (`DW_OP_fbreg`, in the
//! frame its prologue builds): gdb would show the previous call's values. A capture
//! therefore takes the breaking thread on to the start of the body, and this says where
//! that is:
//!
//! - GCC's unoptimised code: the first line-table row after the function's first line
//!   (gdb steps over the frame setup, then on to the next line);
//! - LLVM's code (clang, rustc, flang): the row marked `prologue_end`, else the same;
//! - GCC's optimised code describes its arguments at the entry itself (location lists),
//!   where gdb stops too: no move.
//!
//! Only the file's own DWARF is read (not a separate debug file), only the sections this
//! needs, and only up to [`MAX_DWARF_BYTES`] of them: beyond, the entry stays the place.

use std::borrow::Cow;

use gimli::{EndianSlice, RunTimeEndian, constants as dw};
use object::{Object, ObjectSection};
use sdt_store::Mapping;

/// The most bytes of DWARF sections read for one function (they are held in memory
/// while it is looked for).
const MAX_DWARF_BYTES: u64 = 256 << 20;

/// The sections a function's line rows and extent are found in; the others (location
/// lists, macros, type units) are not read.
const NEEDED: [gimli::SectionId; 10] = [
    gimli::SectionId::DebugAbbrev,
    gimli::SectionId::DebugAddr,
    gimli::SectionId::DebugAranges,
    gimli::SectionId::DebugInfo,
    gimli::SectionId::DebugLine,
    gimli::SectionId::DebugLineStr,
    gimli::SectionId::DebugRanges,
    gimli::SectionId::DebugRngLists,
    gimli::SectionId::DebugStr,
    gimli::SectionId::DebugStrOffsets,
];

type Reader<'a> = EndianSlice<'a, RunTimeEndian>;

/// Where the body of the function whose first instruction is at `entry` starts, in a
/// process with `mappings` where `file` (the program or a library) defines it; `None`
/// where the entry is the place to stop, or where the file's DWARF does not say.
pub(crate) fn body_start(mappings: &[Mapping], file: &str, entry: u64) -> Option<u64> {
    let cache = object::ReadCache::new(sdt_sys::open_regular(file)?);
    let elf = object::File::parse(&cache).ok()?;
    let bias = sdt_target::load_bias(mappings, file, &elf)?;
    let endian = if elf.is_little_endian() { RunTimeEndian::Little } else { RunTimeEndian::Big };
    let needed = |id: &gimli::SectionId| elf.section_by_name(id.name()).filter(|_| NEEDED.contains(id));
    let bytes: u64 = NEEDED.iter().filter_map(&needed).map(|s| s.size()).sum();
    if bytes > MAX_DWARF_BYTES {
        log::debug!(
            "{file}: {bytes} bytes of DWARF, more than is read to find where a function's body starts"
        );
        return None;
    }
    let sections = gimli::DwarfSections::load(|id| -> Result<Cow<[u8]>, ()> {
        match needed(&id) {
            Some(section) => section.uncompressed_data().map_err(|_| ()),
            None => Ok(Cow::Borrowed(&[])),
        }
    })
    .ok()?;
    let dwarf = sections.borrow(|s| EndianSlice::new(s, endian));
    let body = linked_body_start(&dwarf, entry.wrapping_sub(bias));
    if let Err(e) = &body {
        log::debug!("{file}: reading the DWARF of the function at {entry:#x}: {e}");
    }
    Some(body.ok()??.wrapping_add(bias))
}

/// [`body_start`] in the file's own addresses.
fn linked_body_start(dwarf: &gimli::Dwarf<Reader<'_>>, entry: u64) -> gimli::Result<Option<u64>> {
    let Some(unit) = unit_holding(dwarf, entry)? else { return Ok(None) };
    let Some(end) = function_end(dwarf, &unit, entry)? else { return Ok(None) };
    let producer = match unit.entries().next_dfs()?.and_then(|root| root.attr_value(dw::DW_AT_producer)) {
        Some(value) => dwarf.attr_string(&unit, value)?.to_string_lossy().into_owned(),
        None => String::new(),
    };
    let llvm = is_llvm(&producer);
    if !llvm && is_optimised(&producer) {
        return Ok(None);
    }
    let Some(program) = unit.line_program.clone() else { return Ok(None) };
    first_row_after(program, entry, end, llvm)
}

/// The unit whose code holds `address`: named at once by `.debug_aranges` where the
/// compiler wrote it, else found by each unit's ranges.
fn unit_holding<'a>(
    dwarf: &gimli::Dwarf<Reader<'a>>,
    address: u64,
) -> gimli::Result<Option<gimli::Unit<Reader<'a>>>> {
    let mut aranges = dwarf.debug_aranges.headers();
    while let Some(header) = aranges.next()? {
        let mut entries = header.entries();
        while let Some(arange) = entries.next()? {
            let range = arange.range();
            if range.begin <= address && address < range.end {
                return Ok(Some(
                    dwarf.unit(dwarf.debug_info.header_from_offset(header.debug_info_offset())?)?,
                ));
            }
        }
    }
    let mut units = dwarf.units();
    while let Some(header) = units.next()? {
        let unit = dwarf.unit(header)?;
        if holds(dwarf.unit_ranges(&unit)?, address)? {
            return Ok(Some(unit));
        }
    }
    Ok(None)
}

/// Whether one of `ranges` holds `address`.
fn holds(mut ranges: gimli::RangeIter<Reader<'_>>, address: u64) -> gimli::Result<bool> {
    while let Some(range) = ranges.next()? {
        if range.begin <= address && address < range.end {
            return Ok(true);
        }
    }
    Ok(false)
}

/// The end of the range that starts at `entry` of the function `unit` has there.
fn function_end(
    dwarf: &gimli::Dwarf<Reader<'_>>,
    unit: &gimli::Unit<Reader<'_>>,
    entry: u64,
) -> gimli::Result<Option<u64>> {
    let mut entries = unit.entries();
    while let Some(die) = entries.next_dfs()? {
        if die.tag() != dw::DW_TAG_subprogram {
            continue;
        }
        let mut ranges = dwarf.die_ranges(unit, die)?;
        while let Some(range) = ranges.next()? {
            if range.begin == entry {
                return Ok(Some(range.end));
            }
        }
    }
    Ok(None)
}

/// Whether a compiler whose `DW_AT_producer` is `producer` is LLVM's.
fn is_llvm(producer: &str) -> bool {
    ["clang", "rustc", "flang", "LLVM"].iter().any(|name| producer.contains(name))
}

/// Whether GCC's `producer` (which records its options) says the unit was optimised.
fn is_optimised(producer: &str) -> bool {
    // The last -O counts.
    producer
        .split_whitespace()
        .rev()
        .find_map(|word| word.strip_prefix("-O"))
        .is_some_and(|level| level != "0")
}

/// The address of the first statement row of the line table in `(entry, end)` that starts
/// the function's body: with `prologue_end`, the row marked so if there is one; else the
/// first row of another line than the entry's, else the first row after the entry.
fn first_row_after(
    program: gimli::IncompleteLineProgram<Reader<'_>>,
    entry: u64,
    end: u64,
    prologue_end: bool,
) -> gimli::Result<Option<u64>> {
    let mut rows = program.rows();
    let (mut entry_line, mut marked, mut other_line, mut next) = (None, None, None, None);
    while let Some((_, row)) = rows.next_row()? {
        let address = row.address();
        if row.end_sequence() || !row.is_stmt() || address < entry || address >= end {
            continue;
        }
        if address == entry {
            entry_line = entry_line.or(row.line());
            continue;
        }
        if prologue_end && row.prologue_end() {
            marked = Some(marked.map_or(address, |m: u64| m.min(address)));
        }
        if entry_line.is_some() && row.line() != entry_line {
            other_line = Some(other_line.map_or(address, |o: u64| o.min(address)));
        }
        next = Some(next.map_or(address, |n: u64| n.min(address)));
    }
    if entry_line.is_none() {
        return Ok(None);
    }
    Ok(marked.or(other_line).or(next))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_producer_says_how_the_unit_was_built() {
        assert!(is_optimised("GNU C17 12.2.0 -mtune=generic -march=x86-64 -g -O2"));
        assert!(is_optimised("GNU C17 12.2.0 -O0 -g -Og"));
        assert!(!is_optimised("GNU C17 12.2.0 -mtune=generic -march=x86-64 -g -O0"));
        assert!(!is_optimised("GNU C17 12.2.0 -mtune=generic -march=x86-64 -g"));
        assert!(!is_optimised("GNU C17 12.2.0 -O2 -g -O0"));
        assert!(is_llvm("clang version 14.0.6"));
        assert!(is_llvm("clang LLVM (rustc version 1.95.0)"));
        assert!(!is_llvm("GNU Fortran2008 12.2.0 -mtune=generic -g"));
    }
}
