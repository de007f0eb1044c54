//! The shared libraries a program loads at its start, found as the dynamic loader finds
//! them, without running anything: what tells an MPI program whose MPI comes in through
//! another library (a Fortran program's `libmpi_mpifh.so`, Boost.MPI, a solver library
//! of the user's own).
//!
//! ```text
//! program ─ DT_NEEDED ─► name ─ search ─► file ─ DT_NEEDED ─► …   (breadth first)
//! search:  DT_RPATH (without DT_RUNPATH) · LD_LIBRARY_PATH · DT_RUNPATH
//!          · /etc/ld.so.cache · the default directories
//! ```
//!
//! Approximate where the loader's rules are not worth following here (hardware
//! capability subdirectories, the executable's `DT_RPATH` inherited by its libraries,
//! `DT_NEEDED` entries with a `/`): a library not found is left out, never guessed.

use std::collections::{HashSet, VecDeque};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// Libraries looked at, at most: a program with more is cut off there.
const MAX_LIBRARIES: usize = 512;

/// The C and C++ runtimes, named but not followed: they link nothing a caller asks about,
/// and most programs need only them (a C program is then looked at without a search).
const RUNTIMES: [&str; 9] = [
    "libc.so.6",
    "libm.so.6",
    "libpthread.so.0",
    "libdl.so.2",
    "librt.so.1",
    "libstdc++.so.6",
    "libgcc_s.so.1",
    "libgfortran.so.5",
    "ld-linux-x86-64.so.2",
];

/// Largest `/etc/ld.so.cache` read.
const MAX_CACHE_BYTES: u64 = 64 << 20;

/// Where the loader looks after its cache, on x86-64 Debian and elsewhere.
const DEFAULT_DIRS: [&str; 6] =
    ["/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64", "/lib", "/usr/lib"];

/// What an ELF file's dynamic section says about loading it.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Dynamic {
    /// Its `DT_NEEDED` entries.
    pub needed: Vec<String>,
    /// `DT_RPATH`, split at `:`.
    pub rpath: Vec<String>,
    /// `DT_RUNPATH`, split at `:`.
    pub runpath: Vec<String>,
}

impl Dynamic {
    /// The dynamic section of the 64-bit ELF file at `path`; `None` for anything else
    /// (a script, a static program, a file that does not read).
    pub(crate) fn of(path: &Path) -> Option<Dynamic> {
        use object::read::elf::{Dyn, FileHeader};
        let file = std::fs::File::open(path).ok()?;
        let data = &object::ReadCache::new(file);
        let header = object::elf::FileHeader64::<object::Endianness>::parse(data).ok()?;
        let endian = header.endian().ok()?;
        let sections = header.sections(endian, data).ok()?;
        let (dynamic, link) = sections.dynamic(endian, data).ok()??;
        let strings = sections.strings(endian, data, link).ok()?;
        let mut out = Dynamic::default();
        for entry in dynamic {
            let Ok(value) = entry.string(endian, strings) else { continue };
            let value = String::from_utf8_lossy(value).into_owned();
            match entry.d_tag(endian) {
                object::elf::DT_NEEDED => out.needed.push(value),
                object::elf::DT_RPATH => out.rpath.extend(value.split(':').map(str::to_owned)),
                object::elf::DT_RUNPATH => out.runpath.extend(value.split(':').map(str::to_owned)),
                _ => {}
            }
        }
        Some(out)
    }
}

/// The names of every library `program` loads at its start, its own `DT_NEEDED` first,
/// then theirs, breadth first, each once; `library_path` is the `LD_LIBRARY_PATH` it
/// runs with.
pub(crate) fn loaded(program: &Path, library_path: Option<&OsStr>) -> Vec<String> {
    let Some(top) = Dynamic::of(program) else { return Vec::new() };
    let env_dirs: Vec<PathBuf> = library_path
        .map(|p| p.as_bytes().split(|&b| b == b':').filter(|d| !d.is_empty()))
        .into_iter()
        .flatten()
        .map(|d| PathBuf::from(OsStr::from_bytes(d)))
        .collect();
    let cache = std::cell::OnceCell::new();
    let mut names = Vec::new();
    let mut seen = HashSet::new();
    let mut queue = VecDeque::from([(program.to_path_buf(), top)]);
    while let Some((object, dynamic)) = queue.pop_front() {
        for name in &dynamic.needed {
            if names.len() == MAX_LIBRARIES {
                return names;
            }
            if !seen.insert(name.clone()) {
                continue;
            }
            names.push(name.clone());
            if RUNTIMES.contains(&name.as_str()) {
                continue;
            }
            let found = search(name, &object, &dynamic, &env_dirs, &cache);
            if let Some((path, theirs)) = found {
                queue.push_back((path, theirs));
            }
        }
    }
    names
}

/// The file `name` loads from, for `object` with its dynamic section, and that file's
/// dynamic section.
fn search(
    name: &str,
    object: &Path,
    dynamic: &Dynamic,
    env_dirs: &[PathBuf],
    cache: &std::cell::OnceCell<LoaderCache>,
) -> Option<(PathBuf, Dynamic)> {
    if name.contains('/') {
        return None;
    }
    let origin = object.parent().unwrap_or(Path::new("/"));
    let expand = |dir: &String| {
        PathBuf::from(dir.replace("${ORIGIN}", "$ORIGIN").replace("$ORIGIN", &origin.to_string_lossy()))
    };
    let rpath = dynamic.runpath.is_empty().then_some(&dynamic.rpath).into_iter().flatten().map(expand);
    let runpath = dynamic.runpath.iter().map(expand);
    let dirs = rpath
        .chain(env_dirs.iter().cloned())
        .chain(runpath)
        .map(|dir| dir.join(name))
        // The cache is read only when a search gets this far.
        .chain(std::iter::once(()).flat_map(|()| {
            cache.get_or_init(|| LoaderCache::read(Path::new("/etc/ld.so.cache"))).paths_of(name)
        }))
        .chain(DEFAULT_DIRS.iter().map(|dir| Path::new(dir).join(name)));
    dirs.filter(|path| path.is_file()).find_map(|path| Dynamic::of(&path).map(|d| (path, d)))
}

/// `/etc/ld.so.cache` in glibc's format 1.1: library names and their paths.
#[derive(Default)]
struct LoaderCache {
    entries: Vec<(Vec<u8>, PathBuf)>,
}

impl LoaderCache {
    const MAGIC: &'static [u8] = b"glibc-ld.so.cache1.1";
    const HEADER: usize = 48;
    const ENTRY: usize = 24;

    /// The cache at `path`; empty where it is missing or not in that format.
    fn read(path: &Path) -> LoaderCache {
        use std::io::Read;
        let mut bytes = Vec::new();
        let read = std::fs::File::open(path).and_then(|f| f.take(MAX_CACHE_BYTES).read_to_end(&mut bytes));
        match read {
            Ok(_) => LoaderCache::parse(&bytes).unwrap_or_default(),
            Err(_) => LoaderCache::default(),
        }
    }

    fn parse(bytes: &[u8]) -> Option<LoaderCache> {
        if !bytes.starts_with(Self::MAGIC) {
            return None;
        }
        let u32_at = |at: usize| Some(u32::from_le_bytes(bytes.get(at..at + 4)?.try_into().ok()?));
        let string_at = |at: u32| {
            let rest = bytes.get(at as usize..)?;
            Some(&rest[..rest.iter().position(|&b| b == 0)?])
        };
        let count = u32_at(20)? as usize;
        let mut entries = Vec::with_capacity(count.min(bytes.len() / Self::ENTRY));
        for i in 0..count {
            let at = Self::HEADER + i * Self::ENTRY;
            let (key, value) = (string_at(u32_at(at + 4)?)?, string_at(u32_at(at + 8)?)?);
            entries.push((key.to_vec(), PathBuf::from(OsStr::from_bytes(value))));
        }
        Some(LoaderCache { entries })
    }

    /// The paths the cache gives for `name`, in its order.
    fn paths_of<'a>(&'a self, name: &'a str) -> impl Iterator<Item = PathBuf> + 'a {
        self.entries.iter().filter(move |(key, _)| key == name.as_bytes()).map(|(_, path)| path.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_loader_cache_reads_its_names_and_paths_and_a_damaged_one_reads_as_none() {
        let mut bytes = LoaderCache::MAGIC.to_vec();
        bytes.extend(2u32.to_le_bytes());
        bytes.resize(LoaderCache::HEADER, 0);
        let strings = LoaderCache::HEADER + 2 * LoaderCache::ENTRY;
        let texts = [&b"liba.so.1\0"[..], b"/x/liba.so.1\0", b"libb.so\0", b"/y/libb.so\0"];
        let mut offsets = Vec::new();
        let mut at = strings;
        for text in texts {
            offsets.push(at as u32);
            at += text.len();
        }
        for pair in offsets.chunks(2) {
            bytes.extend(0x303u32.to_le_bytes());
            bytes.extend(pair[0].to_le_bytes());
            bytes.extend(pair[1].to_le_bytes());
            bytes.extend([0u8; 12]);
        }
        texts.iter().for_each(|t| bytes.extend(*t));
        let cache = LoaderCache::parse(&bytes).unwrap();
        assert_eq!(cache.paths_of("libb.so").collect::<Vec<_>>(), [PathBuf::from("/y/libb.so")]);
        assert_eq!(cache.paths_of("libc.so").count(), 0);
        assert!(LoaderCache::parse(&bytes[..strings + 5]).is_none(), "a string runs past the end");
        assert!(LoaderCache::parse(b"ld.so-1.7.0").is_none());
    }

    #[test]
    fn a_library_in_ld_library_path_comes_before_the_loader_cache() {
        // This test's program needs libc: named once; a copy of the program named libc in
        // an LD_LIBRARY_PATH folder is what the search finds, without reading the cache.
        let me = std::env::current_exe().unwrap();
        let names = loaded(&me, None);
        assert_eq!(names.iter().filter(|n| *n == "libc.so.6").count(), 1, "{names:?}");
        let dir = tempfile::tempdir().unwrap();
        std::fs::copy(&me, dir.path().join("libc.so.6")).unwrap();
        let dynamic = Dynamic::of(&me).unwrap();
        let cache = std::cell::OnceCell::new();
        let found = search("libc.so.6", &me, &dynamic, &[dir.path().to_path_buf()], &cache);
        assert_eq!(found.map(|(path, _)| path), Some(dir.path().join("libc.so.6")));
        assert!(cache.get().is_none(), "found before the cache was needed");
        let found = search("libc.so.6", &me, &dynamic, &[], &cache).unwrap();
        assert!(found.1.needed.iter().any(|n| n.starts_with("ld-linux")), "{found:?}");
    }
}
