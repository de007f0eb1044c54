//! Source lines of the places that called MPI, from the modules' DWARF line tables.
//!
//! A [`Site`] is a module path and a return address's offset from where the module was
//! loaded. The module is read from the file system as it is now: when it was rebuilt
//! since the run, lines can be wrong (the run's snapshots hold what was mapped then).
//! Only regular files are opened (never a FIFO or a device, which could block), and none
//! larger than [`MAX_MODULE_BYTES`].

use std::collections::HashMap;
use std::fs::File;
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use object::{Object, ObjectSection, ObjectSegment};

use crate::model::Site;

/// Largest module read for its line table.
pub const MAX_MODULE_BYTES: u64 = 1 << 30;

/// `file:line` of each site (in order), where the module has line information for it.
/// Relative module paths are taken from `cwd` (the rank's working directory).
pub fn source_lines(sites: &[Site], cwd: &Path) -> Vec<Option<String>> {
    let mut modules: HashMap<&str, Option<Module>> = HashMap::new();
    sites
        .iter()
        .map(|site| {
            let module =
                modules.entry(site.module.as_str()).or_insert_with(|| Module::load(&cwd.join(&site.module)));
            module.as_ref().and_then(|m| m.line(site.offset))
        })
        .collect()
}

/// A module's line table, and where its image starts in its own addresses.
struct Module {
    context: addr2line::Context<gimli::EndianRcSlice<gimli::RunTimeEndian>>,
    /// The lowest segment address, page-aligned: what the module's load address maps to.
    base: u64,
}

impl Module {
    fn load(path: &PathBuf) -> Option<Module> {
        let mut file =
            std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(path).ok()?;
        let meta = file.metadata().ok()?;
        if !meta.is_file() || meta.len() > MAX_MODULE_BYTES {
            return None;
        }
        let mut bytes = Vec::with_capacity(meta.len() as usize);
        (&mut file as &mut File).take(MAX_MODULE_BYTES).read_to_end(&mut bytes).ok()?;
        let elf = object::File::parse(&*bytes).ok()?;
        let base = elf.segments().map(|s| s.address()).min().unwrap_or(0) & !0xfff;
        let endian =
            if elf.is_little_endian() { gimli::RunTimeEndian::Little } else { gimli::RunTimeEndian::Big };
        let section = |id: gimli::SectionId| -> Result<_, gimli::Error> {
            let data =
                elf.section_by_name(id.name()).and_then(|s| s.uncompressed_data().ok()).unwrap_or_default();
            Ok(gimli::EndianRcSlice::new(std::rc::Rc::from(&*data), endian))
        };
        let dwarf = gimli::Dwarf::load(section).ok()?;
        let context = addr2line::Context::from_dwarf(dwarf).ok()?;
        Some(Module { context, base })
    }

    fn line(&self, offset: u64) -> Option<String> {
        // A return address: the call is the instruction before it.
        let address = self.base.checked_add(offset)?.checked_sub(1)?;
        let location = self.context.find_location(address).ok()??;
        let file = location.file?;
        let name = Path::new(file).file_name().map_or(file.into(), |n| n.to_string_lossy());
        Some(format!("{name}:{}", location.line?))
    }
}
