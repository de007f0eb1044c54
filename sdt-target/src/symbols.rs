//! An ELF file's symbol tables, read a table at a time.
//!
//! `object`'s generic symbol iterator over a [`ReadCache`] reads each symbol's name with
//! system calls of its own (a seek and a read or more), which over the 100,000 symbols of
//! a large program takes half a second. Here each table and its string table are read in
//! one piece and the names taken from memory.

use std::fs::File;

use object::ReadCache;
use object::elf::{FileHeader64, SHN_UNDEF, STT_FUNC, STT_GNU_IFUNC, SectionType, Sym64};
use object::read::elf::{FileHeader, SectionHeader, Sym};

/// The symbol table of a program or library (`SHT_SYMTAB`, which `strip` removes).
pub const STATIC: SectionType = object::elf::SHT_SYMTAB;
/// The dynamic symbol table (`SHT_DYNSYM`), which the dynamic loader uses.
pub const DYNAMIC: SectionType = object::elf::SHT_DYNSYM;

/// A symbol as an ELF symbol table gives it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ElfSymbol<'a> {
    /// Its name, as the string table holds it (mangled).
    pub name: &'a [u8],
    /// `st_value`: the address it was linked at.
    pub address: u64,
    /// Whether the file defines it (else it names another file's).
    pub defined: bool,
    /// Whether it is a function (`STT_FUNC`, `STT_GNU_IFUNC`).
    pub function: bool,
}

/// The first `Some` that `each` gives for a symbol of the 64-bit ELF file read through
/// `data`, going through its tables of `kinds` ([`STATIC`], [`DYNAMIC`]) in that order;
/// `None` if it gives none, or the file is not such a file.
pub fn find_symbol<T>(
    data: &ReadCache<File>,
    kinds: &[SectionType],
    each: impl FnMut(ElfSymbol<'_>) -> Option<T>,
) -> Option<T> {
    walk(data, kinds, None, each)
}

/// [`find_symbol`] over the symbols named `name` alone, which are told from the others
/// without reading their names whole.
pub fn find_named<T>(
    data: &ReadCache<File>,
    kinds: &[SectionType],
    name: &str,
    each: impl FnMut(ElfSymbol<'_>) -> Option<T>,
) -> Option<T> {
    walk(data, kinds, Some(name.as_bytes()), each)
}

fn walk<T>(
    data: &ReadCache<File>,
    kinds: &[SectionType],
    wanted: Option<&[u8]>,
    mut each: impl FnMut(ElfSymbol<'_>) -> Option<T>,
) -> Option<T> {
    let header = FileHeader64::<object::Endianness>::parse(data).ok()?;
    let endian = header.endian().ok()?;
    let sections = header.sections(endian, data).ok()?;
    for &kind in kinds {
        let Some(table) = sections.iter().find(|s| s.sh_type(endian) == kind) else { continue };
        let Ok(symbols) = table.data_as_array::<Sym64<_>, _>(endian, data) else { continue };
        let link = object::SectionIndex(table.sh_link(endian) as usize);
        let Ok(bytes) = sections.section(link).and_then(|s| s.data(endian, data)) else { continue };
        let names = object::StringTable::new(bytes, 0, bytes.len() as u64);
        // The first entry is the null symbol.
        for symbol in symbols.iter().skip(1) {
            let name = match wanted {
                // The name, then its NUL.
                Some(wanted) => {
                    let at = symbol.st_name(endian) as usize;
                    let there = bytes.get(at..at + wanted.len() + 1);
                    if there.is_none_or(|b| b[wanted.len()] != 0 || &b[..wanted.len()] != wanted) {
                        continue;
                    }
                    wanted
                }
                None => match symbol.name(endian, names) {
                    Ok(name) => name,
                    Err(_) => continue,
                },
            };
            let found = each(ElfSymbol {
                name,
                address: symbol.st_value(endian),
                defined: symbol.st_shndx(endian) != SHN_UNDEF,
                function: matches!(symbol.st_type(), STT_FUNC | STT_GNU_IFUNC),
            });
            if found.is_some() {
                return found;
            }
        }
    }
    None
}

/// Whether the 64-bit ELF file read through `data` has a table of `kind` ([`STATIC`],
/// [`DYNAMIC`]); a stripped program has no [`STATIC`] one.
pub fn has_table(data: &ReadCache<File>, kind: SectionType) -> bool {
    let Ok(header) = FileHeader64::<object::Endianness>::parse(data) else { return false };
    let Ok(endian) = header.endian() else { return false };
    header.sections(endian, data).is_ok_and(|sections| sections.iter().any(|s| s.sh_type(endian) == kind))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn own_exe() -> ReadCache<File> {
        ReadCache::new(File::open("/proc/self/exe").unwrap())
    }

    #[test]
    fn finds_what_objects_own_iterator_finds_in_both_tables() {
        use object::{Object, ObjectSymbol};
        let cache = own_exe();
        let elf = object::File::parse(&cache).unwrap();
        let expected: Vec<(Vec<u8>, u64, bool, bool)> = elf
            .symbols()
            .chain(elf.dynamic_symbols())
            .map(|s| {
                let function = s.kind() == object::SymbolKind::Text;
                (s.name_bytes().unwrap().to_vec(), s.address(), !s.is_undefined(), function)
            })
            .collect();
        let mut seen = Vec::new();
        let none: Option<()> = find_symbol(&own_exe(), &[STATIC, DYNAMIC], |s| {
            seen.push((s.name.to_vec(), s.address, s.defined, s.function));
            None
        });
        assert_eq!(none, None);
        assert!(seen.len() > 1000, "{} symbols", seen.len());
        assert_eq!(seen, expected);
    }

    #[test]
    fn finds_a_symbol_by_name_as_the_whole_walk_does() {
        for name in ["main", "malloc", "getpid", "no_such_symbol_anywhere", "mai"] {
            let mut named = Vec::new();
            let none: Option<()> = find_named(&own_exe(), &[STATIC, DYNAMIC], name, |s| {
                named.push((s.address, s.defined, s.function));
                None
            });
            assert_eq!(none, None);
            let mut all = Vec::new();
            let _: Option<()> = find_symbol(&own_exe(), &[STATIC, DYNAMIC], |s| {
                if s.name == name.as_bytes() {
                    all.push((s.address, s.defined, s.function));
                }
                None
            });
            assert_eq!(named, all, "{name}");
            assert_eq!(named.is_empty(), name == "no_such_symbol_anywhere" || name == "mai", "{name}");
        }
    }

    #[test]
    fn stops_at_the_first_symbol_asked_for_and_says_none_for_what_is_not_elf() {
        let main =
            find_symbol(&own_exe(), &[STATIC], |s| (s.name == b"main" && s.defined).then_some(s.address));
        assert!(main.is_some_and(|a| a != 0));
        let mut calls = 0;
        let first = find_symbol(&own_exe(), &[STATIC, DYNAMIC], |s| {
            calls += 1;
            Some(s.name.len())
        });
        assert!(first.is_some());
        assert_eq!(calls, 1);
        let text = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(text.path(), b"#!/bin/sh\necho not an ELF file\n").unwrap();
        let script = ReadCache::new(File::open(text.path()).unwrap());
        assert_eq!(find_symbol(&script, &[STATIC, DYNAMIC], |_| Some(())), None);
        assert!(!has_table(&script, DYNAMIC));
        assert!(has_table(&own_exe(), STATIC));
    }
}
