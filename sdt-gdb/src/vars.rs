//! A snapshot's variables by name, read from the program's DWARF: the globals (file-scope
//! `DW_TAG_variable`s located by `DW_OP_addr`) and the thread-locals (`DW_OP_const*u`
//! then `DW_OP_form_tls_address`) of the executable, with their types, so that two
//! snapshots' values can be told apart and printed.
//!
//! ```no_run
//! use sdt_gdb::vars::{Program, Tolerance};
//! use sdt_store::Store;
//!
//! let store = Store::open(".sdt".as_ref())?;
//! let run = store.open_run(&store.latest_run()?)?;
//! let (a, b) = (run.open_snapshot("S1")?, run.open_snapshot("S2")?);
//! let program = Program::load(&a)?;
//! for change in program.changes(&a, &b, None, &Tolerance::EXACT)? {
//!     println!("{}: {} -> {}", change.name, change.old, change.new);
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! The program's file is opened only through the store's checks
//! ([`SnapshotSource::open_file`]): the version mapped, a regular file. Its DWARF is
//! untrusted too: type chains are followed to a fixed depth, and a variable whose type
//! cannot be read is compared as bytes.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::io::{Read, Seek};

use gimli::{AttributeValue, EndianSlice, LittleEndian, Operation, constants as dw};
use object::{Object, ObjectSection, ObjectSegment, ObjectSymbol, SymbolKind};
use sdt_store::{Content, FileRef, Mapping, SnapshotMeta, SnapshotSource};

/// How deep type references are followed (typedefs, arrays, members): DWARF from the
/// store may loop.
const MAX_TYPE_DEPTH: u32 = 16;
/// Variables larger than this are not read (a 1 GiB array is memory, not a value).
const MAX_VALUE_BYTES: u64 = 64 << 20;
/// Changed elements listed per array; the rest are counted.
pub const MAX_ELEMENTS: usize = 16;

/// Why a snapshot's variables cannot be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum VarsError {
    /// The snapshot does not map its program's file, so there is no DWARF to read.
    #[error("the program {0:?} is not among the files the snapshot maps")]
    NotMapped(String),
    /// The store refused the program's file (changed since, not a regular file, …).
    #[error("cannot open the program {path:?}")]
    Open {
        /// The program's path.
        path: String,
        /// What the store said.
        #[source]
        source: sdt_store::Error,
    },
    /// Reading the program's file failed.
    #[error("cannot read the program {path:?}")]
    Read {
        /// The program's path.
        path: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The program's ELF or DWARF is malformed.
    #[error("cannot parse the debug information of {path:?}: {detail}")]
    Parse {
        /// The program's path.
        path: String,
        /// What the parser said.
        detail: String,
    },
    /// The program has no DWARF (built without `-g`).
    #[error("the program {0:?} has no debug information for its variables (build it with -g)")]
    NoDebugInfo(String),
}

/// Where a variable lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Place {
    /// At this link-time address (add the load bias).
    Static(u64),
    /// At this offset in each thread's block of the program's TLS segment.
    ThreadLocal(u64),
}

/// A variable's type, as far as values are concerned.
#[derive(Clone, Debug, PartialEq)]
pub enum Type {
    /// An integer (`DW_ATE_signed`, `unsigned`, enumerations).
    Int {
        /// Bytes: 1, 2, 4 or 8.
        size: u64,
        /// Whether it is signed.
        signed: bool,
    },
    /// A character type (`DW_ATE_signed_char`, `unsigned_char`), one byte.
    Char,
    /// `DW_ATE_boolean`.
    Bool {
        /// Bytes.
        size: u64,
    },
    /// `float` (4) or `double` (8).
    Float {
        /// Bytes.
        size: u64,
    },
    /// A pointer (printed as hex).
    Pointer,
    /// `len` elements of `elem`.
    Array {
        /// The element type.
        elem: Box<Type>,
        /// How many elements.
        len: u64,
    },
    /// A struct: members at offsets.
    Struct {
        /// Bytes.
        size: u64,
        /// Named members, by offset.
        members: Vec<(String, u64, Type)>,
    },
    /// Anything else: compared and printed as bytes.
    Bytes {
        /// Bytes.
        size: u64,
    },
}

impl Type {
    /// Size in bytes.
    pub fn size(&self) -> u64 {
        match self {
            Type::Int { size, .. } | Type::Bool { size } | Type::Float { size } => *size,
            Type::Struct { size, .. } | Type::Bytes { size } => *size,
            Type::Char => 1,
            Type::Pointer => 8,
            Type::Array { elem, len } => elem.size().saturating_mul(*len),
        }
    }
}

/// A global or thread-local variable of the program.
#[derive(Clone, Debug, PartialEq)]
pub struct Variable {
    /// Its name in the source.
    pub name: String,
    /// Where it lives.
    pub place: Place,
    /// Its type.
    pub ty: Type,
}

/// A scalar value, decoded from its bytes by its type.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// A signed integer.
    Int(i64),
    /// An unsigned integer.
    UInt(u64),
    /// A float or double.
    Float(f64),
    /// A boolean.
    Bool(bool),
    /// A character.
    Char(u8),
    /// A pointer.
    Pointer(u64),
    /// Bytes of a type without a decoding.
    Bytes(Vec<u8>),
}

impl Value {
    /// `bytes` (exactly `ty`'s size) decoded as the scalar `ty`; bytes for a compound.
    fn decode(ty: &Type, bytes: &[u8]) -> Value {
        let word = || {
            let mut b = [0u8; 8];
            b[..bytes.len().min(8)].copy_from_slice(&bytes[..bytes.len().min(8)]);
            u64::from_le_bytes(b)
        };
        match *ty {
            Type::Int { size: size @ (1 | 2 | 4 | 8), signed } => {
                if signed {
                    let shift = 64 - 8 * size as u32;
                    Value::Int(((word() << shift) as i64) >> shift)
                } else {
                    Value::UInt(word())
                }
            }
            Type::Char => Value::Char(bytes[0]),
            Type::Bool { size: 1..=8 } => Value::Bool(word() != 0),
            Type::Float { size: 4 } => {
                Value::Float(f32::from_le_bytes(bytes.try_into().unwrap_or([0; 4])).into())
            }
            Type::Float { size: 8 } => Value::Float(f64::from_bits(word())),
            Type::Pointer => Value::Pointer(word()),
            _ => Value::Bytes(bytes.to_vec()),
        }
    }

    /// The value as a number, if it is one.
    pub fn number(&self) -> Option<f64> {
        match *self {
            Value::Int(v) => Some(v as f64),
            Value::UInt(v) => Some(v as f64),
            Value::Float(v) => Some(v),
            _ => None,
        }
    }
}

impl fmt::Display for Value {
    /// As gdb prints it: decimal, `65 'A'`, `true`, `0x7f…`; bytes in hex.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Int(v) => write!(f, "{v}"),
            Value::UInt(v) => write!(f, "{v}"),
            Value::Float(v) => write!(f, "{v}"),
            Value::Bool(v) => write!(f, "{v}"),
            Value::Char(c) if c.is_ascii_graphic() || *c == b' ' => write!(f, "{c} '{}'", *c as char),
            Value::Char(c) => write!(f, "{c} '\\{c:03o}'"),
            Value::Pointer(p) => write!(f, "{p:#x}"),
            Value::Bytes(b) => {
                f.write_str("0x")?;
                b.iter().try_for_each(|byte| write!(f, "{byte:02x}"))
            }
        }
    }
}

/// When two values count as the same: numbers within `atol + rtol * |reference|`, the
/// rest when equal.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Tolerance {
    /// Relative tolerance.
    pub rtol: f64,
    /// Absolute tolerance.
    pub atol: f64,
}

impl Tolerance {
    /// Equal values only.
    pub const EXACT: Tolerance = Tolerance { rtol: 0.0, atol: 0.0 };

    /// Whether `other` is `reference` within the tolerance.
    pub fn same(&self, reference: &Value, other: &Value) -> bool {
        match (reference.number(), other.number()) {
            (Some(r), Some(o)) => self.close(r, o),
            _ => reference == other,
        }
    }

    /// Whether `other` is `reference` within the tolerance, both as printed (by gdb):
    /// numbers compared as numbers, the rest as text.
    pub fn same_text(&self, reference: &str, other: &str) -> bool {
        match (reference.trim().parse::<f64>(), other.trim().parse::<f64>()) {
            (Ok(r), Ok(o)) => self.close(r, o),
            _ => reference == other,
        }
    }

    fn close(&self, reference: f64, other: f64) -> bool {
        reference == other || (reference - other).abs() <= self.atol + self.rtol * reference.abs()
    }
}

/// A value that differs between two snapshots.
#[derive(Clone, Debug, PartialEq)]
pub struct Change {
    /// The variable, member or element: `counter`, `origin.y`, `grid[3][4]`.
    pub name: String,
    /// For a thread-local, the thread (in the second snapshot).
    pub thread: Option<i32>,
    /// The value in the first snapshot.
    pub old: String,
    /// The value in the second snapshot.
    pub new: String,
    /// On an array's last listed change: how many more of its elements differ.
    pub more: u64,
}

/// The program of a snapshot, as its DWARF describes its variables.
#[derive(Debug)]
pub struct Program {
    path: String,
    variables: Vec<Variable>,
    /// The lowest `PT_LOAD` address, page-aligned: the load bias is where the mapping at
    /// file offset 0 starts minus this.
    link_base: u64,
    /// Offset of the TLS block below the thread pointer (x86_64, the executable's block):
    /// `PT_TLS`'s size rounded up to its alignment.
    tls_offset: Option<u64>,
}

impl Program {
    /// Reads the DWARF of `snap`'s executable, opened through the store's checks.
    pub fn load(snap: &impl SnapshotSource) -> Result<Program, VarsError> {
        let meta = snap.meta();
        let exe = &meta.process.exe;
        let file = meta.program_file().ok_or_else(|| VarsError::NotMapped(exe.clone()))?;
        let data = read_checked(snap, file)?;
        Program::parse(exe, &data)
    }

    /// Reads the variables from an ELF file's bytes; `path` names it in errors.
    pub fn parse(path: &str, data: &[u8]) -> Result<Program, VarsError> {
        let parse_error = |detail: String| VarsError::Parse { path: path.to_owned(), detail };
        let elf = object::File::parse(data).map_err(|e| parse_error(e.to_string()))?;
        let page = sdt_store::PAGE_SIZE;
        let link_base = elf.segments().map(|s| s.address()).min().unwrap_or(0) / page * page;
        let tls_offset = elf.elf_program_headers_tls();
        let sections = gimli::DwarfSections::load(|id| -> Result<Cow<[u8]>, object::Error> {
            match elf.section_by_name(id.name()) {
                Some(section) => section.uncompressed_data(),
                None => Ok(Cow::Borrowed(&[])),
            }
        })
        .map_err(|e| parse_error(e.to_string()))?;
        let dwarf = sections.borrow(|s| EndianSlice::new(s, LittleEndian));
        let variables = read_variables(&dwarf).map_err(|e| parse_error(e.to_string()))?;
        // Without globals, a program built with -g still has its locals, for gdb.
        if variables.is_empty() && dwarf.units().next().ok().flatten().is_none() {
            return Err(VarsError::NoDebugInfo(path.to_owned()));
        }
        Ok(Program { path: path.to_owned(), variables, link_base, tls_offset })
    }

    /// The program's path, as the snapshot names it.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The globals and thread-locals, sorted by name.
    pub fn variables(&self) -> &[Variable] {
        &self.variables
    }

    /// The variable named `name`.
    pub fn variable(&self, name: &str) -> Option<&Variable> {
        self.variables.iter().find(|v| v.name == name)
    }

    /// The address ranges of `var` in `snap`: one for a global, one per thread (with its
    /// id) for a thread-local; none where it cannot be placed.
    pub fn addresses(&self, snap: &impl SnapshotSource, var: &Variable) -> Vec<(Option<i32>, u64)> {
        let meta = snap.meta();
        match var.place {
            Place::Static(addr) => match load_bias(meta, self.link_base) {
                Some(bias) => vec![(None, addr.wrapping_add(bias))],
                None => Vec::new(),
            },
            Place::ThreadLocal(off) => {
                let Some(block) = self.tls_offset else { return Vec::new() };
                let fs_base =
                    |t: &sdt_store::ThreadState| t.regs().ok().map(|r| r.fs_base).filter(|&b| b != 0);
                meta.threads
                    .iter()
                    .filter_map(|t| Some((Some(t.tid), fs_base(t)?.wrapping_sub(block).wrapping_add(off))))
                    .collect()
            }
        }
    }

    /// The global that holds `addr` in `snap`, down to its innermost member or element
    /// (`accounts[3].lock`); `None` when no global of the program's own does.
    pub fn name_at(&self, snap: &impl SnapshotSource, addr: u64) -> Option<String> {
        let bias = load_bias(snap.meta(), self.link_base)?;
        let at = addr.wrapping_sub(bias);
        self.variables.iter().find_map(|var| {
            let Place::Static(start) = var.place else { return None };
            let offset = at.checked_sub(start).filter(|&off| off < var.ty.size())?;
            Some(leaf_name(&var.name, &var.ty, offset, 0))
        })
    }

    /// What differs between snapshots `a` and `b` (`a`'s program: this one), by leaf
    /// (member, element), for the variables named in `only` (all when `None`); values
    /// within `tol` of `a`'s are the same. A thread-local is compared thread by thread:
    /// by id when both snapshots are of one process, else by position in the thread list.
    /// Values that cannot be read in both are left out.
    pub fn changes(
        &self,
        a: &impl SnapshotSource,
        b: &impl SnapshotSource,
        only: Option<&[&str]>,
        tol: &Tolerance,
    ) -> Result<Vec<Change>, VarsError> {
        let other = if a.meta().process.exe == b.meta().process.exe && same_file(a.meta(), b.meta()) {
            None
        } else {
            Some(Program::load(b)?)
        };
        let same_process = a.meta().process.pid == b.meta().process.pid;
        let mut out = Vec::new();
        for var in &self.variables {
            if only.is_some_and(|names| !names.contains(&var.name.as_str())) {
                continue;
            }
            let var_b = match &other {
                None => var,
                Some(p) => match p.variable(&var.name) {
                    Some(v) if v.ty == var.ty => v,
                    _ => continue,
                },
            };
            let places_b = other.as_ref().unwrap_or(self).addresses(b, var_b);
            for (i, (tid_a, addr_a)) in self.addresses(a, var).into_iter().enumerate() {
                let paired = match tid_a {
                    Some(tid) if same_process => places_b.iter().find(|(t, _)| *t == Some(tid)),
                    _ => places_b.get(i),
                };
                let Some(&(tid_b, addr_b)) = paired else { continue };
                let (Some(old), Some(new)) = (read_value(a, addr_a, &var.ty), read_value(b, addr_b, &var.ty))
                else {
                    continue;
                };
                if old == new {
                    continue;
                }
                let mut found = Vec::new();
                leaf_changes(&var.name, &var.ty, &old, &new, tol, 0, &mut found);
                out.extend(found.into_iter().map(|c| Change { thread: tid_b, ..c }));
            }
        }
        Ok(out)
    }
}

/// The member or element of a `ty` named `name` that byte `offset` lies in, `depth`
/// levels in.
fn leaf_name(name: &str, ty: &Type, offset: u64, depth: u32) -> String {
    if depth > MAX_TYPE_DEPTH {
        return name.to_owned();
    }
    match ty {
        Type::Array { elem, .. } if elem.size() > 0 => {
            let size = elem.size();
            leaf_name(&format!("{name}[{}]", offset / size), elem, offset % size, depth + 1)
        }
        Type::Struct { members, .. } => {
            match members.iter().find(|(_, at, ty)| (*at..at.saturating_add(ty.size())).contains(&offset)) {
                Some((member, at, ty)) => leaf_name(&format!("{name}.{member}"), ty, offset - at, depth + 1),
                None => name.to_owned(),
            }
        }
        _ => name.to_owned(),
    }
}

/// The `PT_TLS` offset below the thread pointer, as [`Program::tls_offset`] says.
trait TlsSegment {
    fn elf_program_headers_tls(&self) -> Option<u64>;
}

impl TlsSegment for object::File<'_> {
    fn elf_program_headers_tls(&self) -> Option<u64> {
        use object::read::elf::ProgramHeader;
        let object::File::Elf64(elf) = self else { return None };
        let endian = elf.endian();
        let tls = elf.elf_program_headers().iter().find(|p| p.p_type(endian) == object::elf::PT_TLS)?;
        let align = tls.p_align(endian).max(1);
        tls.p_memsz(endian).checked_next_multiple_of(align)
    }
}

/// Whether `a` and `b` map the same version of their program.
fn same_file(a: &SnapshotMeta, b: &SnapshotMeta) -> bool {
    match (a.program_file(), b.program_file()) {
        (Some(fa), Some(fb)) => fa == fb,
        _ => false,
    }
}

/// The whole file `f`, opened through the store's checks. From its start: the store hands
/// out clones of one open file, which share its offset, and an earlier read left it at
/// the end (`sdt diff` named no function of the program, read for its variables first).
fn read_checked(snap: &impl SnapshotSource, f: &FileRef) -> Result<Vec<u8>, VarsError> {
    let mut file = snap.open_file(f).map_err(|source| VarsError::Open { path: f.path.clone(), source })?;
    let mut data = Vec::new();
    file.rewind()
        .and_then(|()| file.read_to_end(&mut data))
        .map_err(|source| VarsError::Read { path: f.path.clone(), source })?;
    Ok(data)
}

/// Where the executable was loaded, relative to its link-time addresses.
fn load_bias(meta: &SnapshotMeta, link_base: u64) -> Option<u64> {
    let first = meta.mapping_of_start(meta.program_file()?)?;
    Some(first.start.wrapping_sub(link_base))
}

/// `ty`'s bytes at `addr` in `snap`, if they can be read.
fn read_value(snap: &impl SnapshotSource, addr: u64, ty: &Type) -> Option<Vec<u8>> {
    let size = ty.size();
    if size == 0 || size > MAX_VALUE_BYTES {
        return None;
    }
    let mut buf = vec![0; size as usize];
    snap.read(addr, &mut buf).ok()?;
    Some(buf)
}

/// The leaves of `ty` named from `name` whose values differ between `old` and `new`
/// (both `ty`'s size), into `out`. A struct whose differing bytes lie outside its
/// members (padding, bit-fields) is listed whole, as bytes.
fn leaf_changes(
    name: &str,
    ty: &Type,
    old: &[u8],
    new: &[u8],
    tol: &Tolerance,
    depth: u32,
    out: &mut Vec<Change>,
) {
    if old == new {
        return;
    }
    match ty {
        Type::Array { elem, .. } if depth < MAX_TYPE_DEPTH && elem.size() > 0 => {
            let size = elem.size() as usize;
            let (mut listed, mut more) = (0, 0);
            for (i, (o, n)) in old.chunks_exact(size).zip(new.chunks_exact(size)).enumerate() {
                if o == n {
                    continue;
                }
                if listed < MAX_ELEMENTS {
                    let before = out.len();
                    leaf_changes(&format!("{name}[{i}]"), elem, o, n, tol, depth + 1, out);
                    listed += usize::from(out.len() > before);
                } else if !same_leaves(elem, o, n, tol) {
                    more += 1;
                }
            }
            if let Some(last) = out.last_mut().filter(|_| more > 0) {
                last.more = more;
            }
        }
        Type::Struct { members, .. } if depth < MAX_TYPE_DEPTH => {
            let before = out.len();
            let mut covered = vec![false; old.len()];
            for (member, offset, mty) in members {
                // Members from the store's DWARF may lie anywhere: only those inside count.
                let Some(end) = offset.checked_add(mty.size()).filter(|&end| end <= old.len() as u64) else {
                    continue;
                };
                let range = *offset as usize..end as usize;
                covered[range.clone()].fill(true);
                leaf_changes(
                    &format!("{name}.{member}"),
                    mty,
                    &old[range.clone()],
                    &new[range],
                    tol,
                    depth + 1,
                    out,
                );
            }
            let uncovered_differs = (0..old.len()).any(|i| !covered[i] && old[i] != new[i]);
            if out.len() == before && uncovered_differs {
                out.push(change(name, &Type::Bytes { size: old.len() as u64 }, old, new));
            }
        }
        _ => {
            if !tol.same(&Value::decode(ty, old), &Value::decode(ty, new)) {
                out.push(change(name, ty, old, new));
            }
        }
    }
}

/// Whether every leaf of `ty` is the same in `old` and `new` within `tol`.
fn same_leaves(ty: &Type, old: &[u8], new: &[u8], tol: &Tolerance) -> bool {
    let mut found = Vec::new();
    leaf_changes("", ty, old, new, tol, 0, &mut found);
    found.is_empty()
}

fn change(name: &str, ty: &Type, old: &[u8], new: &[u8]) -> Change {
    Change {
        name: name.to_owned(),
        thread: None,
        old: Value::decode(ty, old).to_string(),
        new: Value::decode(ty, new).to_string(),
        more: 0,
    }
}

type Reader<'a> = EndianSlice<'a, LittleEndian>;

/// Every file-scope variable with a location the units of `dwarf` define, sorted by
/// name; the first definition of a name wins (a `static` of that name in another file
/// is left out).
fn read_variables(dwarf: &gimli::Dwarf<Reader<'_>>) -> gimli::Result<Vec<Variable>> {
    let mut found = BTreeMap::new();
    let mut units = dwarf.units();
    while let Some(header) = units.next()? {
        let unit = dwarf.unit(header)?;
        let mut entries = unit.entries();
        // The namespaces around the entry (C++'s, Rust's modules), with their depths.
        let mut namespaces: Vec<(isize, String)> = Vec::new();
        while let Some(entry) = entries.next_dfs()? {
            let depth = entry.depth();
            namespaces.retain(|(d, _)| *d < depth);
            if entry.tag() == dw::DW_TAG_namespace && depth == namespaces.len() as isize + 1 {
                let name = match entry.attr_value(dw::DW_AT_name) {
                    Some(n) => dwarf.attr_string(&unit, n)?.to_string_lossy().into_owned(),
                    None => "(anonymous namespace)".to_owned(),
                };
                namespaces.push((depth, name));
                continue;
            }
            // Children of the unit or of its namespaces only: a function's statics are
            // not globals.
            if depth != namespaces.len() as isize + 1 || entry.tag() != dw::DW_TAG_variable {
                continue;
            }
            let Some(place) = entry.attr_value(dw::DW_AT_location).and_then(|v| place(&unit, v)) else {
                continue;
            };
            // A definition after a declaration names the declaration by DW_AT_specification.
            let decl = match entry.attr_value(dw::DW_AT_specification) {
                Some(AttributeValue::UnitRef(offset)) => unit.entry(offset)?,
                _ => entry.clone(),
            };
            let Some(name) = decl.attr_value(dw::DW_AT_name) else { continue };
            let name = dwarf.attr_string(&unit, name)?.to_string_lossy().into_owned();
            let name = namespaces
                .iter()
                .map(|(_, n)| n.as_str())
                .chain([name.as_str()])
                .collect::<Vec<_>>()
                .join("::");
            let ty = entry
                .attr_value(dw::DW_AT_type)
                .or_else(|| decl.attr_value(dw::DW_AT_type))
                .and_then(|t| read_type(&unit, dwarf, t, 0));
            if let Some(ty) = ty {
                found.entry(name.clone()).or_insert(Variable { name, place, ty });
            }
        }
    }
    Ok(found.into_values().collect())
}

/// A location expression that is `DW_OP_addr A` (a global) or a constant then
/// `DW_OP_form_tls_address` (a thread-local).
fn place(unit: &gimli::Unit<Reader<'_>>, value: AttributeValue<Reader<'_>>) -> Option<Place> {
    let AttributeValue::Exprloc(expr) = value else { return None };
    let mut ops = expr.operations(unit.encoding());
    let first = ops.next().ok()??;
    let second = ops.next().ok()?;
    match (first, second) {
        (Operation::Address { address }, None) => Some(Place::Static(address)),
        (Operation::UnsignedConstant { value }, Some(Operation::TLS)) if ops.next().ok()?.is_none() => {
            Some(Place::ThreadLocal(value))
        }
        _ => None,
    }
}

/// The type `value` (a `DW_AT_type`) refers to, `depth` references deep.
fn read_type(
    unit: &gimli::Unit<Reader<'_>>,
    dwarf: &gimli::Dwarf<Reader<'_>>,
    value: AttributeValue<Reader<'_>>,
    depth: u32,
) -> Option<Type> {
    let AttributeValue::UnitRef(offset) = value else { return None };
    if depth > MAX_TYPE_DEPTH {
        return None;
    }
    let entry = unit.entry(offset).ok()?;
    let size = entry.attr_value(dw::DW_AT_byte_size).and_then(|v| v.udata_value());
    let inner = |e: &gimli::DebuggingInformationEntry<Reader<'_>>| {
        read_type(unit, dwarf, e.attr_value(dw::DW_AT_type)?, depth + 1)
    };
    match entry.tag() {
        dw::DW_TAG_typedef | dw::DW_TAG_const_type | dw::DW_TAG_volatile_type | dw::DW_TAG_atomic_type => {
            inner(&entry)
        }
        dw::DW_TAG_pointer_type | dw::DW_TAG_reference_type => Some(Type::Pointer),
        dw::DW_TAG_base_type => {
            let size = size?;
            let Some(AttributeValue::Encoding(encoding)) = entry.attr_value(dw::DW_AT_encoding) else {
                return Some(Type::Bytes { size });
            };
            Some(match encoding {
                dw::DW_ATE_signed_char | dw::DW_ATE_unsigned_char if size == 1 => Type::Char,
                dw::DW_ATE_signed | dw::DW_ATE_signed_char => Type::Int { size, signed: true },
                dw::DW_ATE_unsigned | dw::DW_ATE_unsigned_char => Type::Int { size, signed: false },
                dw::DW_ATE_boolean => Type::Bool { size },
                dw::DW_ATE_float if size == 4 || size == 8 => Type::Float { size },
                _ => Type::Bytes { size },
            })
        }
        dw::DW_TAG_enumeration_type => {
            let signed = matches!(inner(&entry), Some(Type::Int { signed: true, .. }));
            Some(Type::Int { size: size?, signed })
        }
        dw::DW_TAG_array_type => {
            let elem = inner(&entry)?;
            let mut lens = Vec::new();
            let mut tree = unit.entries_tree(Some(offset)).ok()?;
            let mut children = tree.root().ok()?.children();
            while let Some(child) = children.next().ok()? {
                let e = child.entry();
                if e.tag() != dw::DW_TAG_subrange_type {
                    continue;
                }
                let count = e.attr_value(dw::DW_AT_count).and_then(|v| v.udata_value());
                let upper = e.attr_value(dw::DW_AT_upper_bound).and_then(|v| v.udata_value());
                lens.push(count.or(upper.map(|u| u.saturating_add(1)))?);
            }
            // `int grid[3][4]`: an array of 3 arrays of 4.
            let ty = lens.iter().rev().fold(elem, |elem, &len| Type::Array { elem: Box::new(elem), len });
            (!lens.is_empty()).then_some(ty)
        }
        dw::DW_TAG_structure_type | dw::DW_TAG_class_type => {
            let size = size?;
            let mut members = Vec::new();
            let mut tree = unit.entries_tree(Some(offset)).ok()?;
            let mut children = tree.root().ok()?.children();
            while let Some(child) = children.next().ok()? {
                let e = child.entry();
                let bitfield =
                    e.attr(dw::DW_AT_bit_size).is_some() || e.attr(dw::DW_AT_data_bit_offset).is_some();
                if e.tag() != dw::DW_TAG_member || bitfield {
                    continue;
                }
                let at = e.attr_value(dw::DW_AT_data_member_location).and_then(|v| v.udata_value());
                let name = e.attr_value(dw::DW_AT_name).and_then(|n| dwarf.attr_string(unit, n).ok());
                if let (Some(at), Some(name), Some(ty)) = (at, name, inner(e)) {
                    members.push((name.to_string_lossy().into_owned(), at, ty));
                }
            }
            Some(Type::Struct { size, members })
        }
        _ => size.map(|size| Type::Bytes { size }),
    }
}

/// Symbols of a file: start (link-time address), size, name; sorted by start.
type Symbols = Vec<(u64, u64, String)>;

/// What a [`Symbolizer`] keeps of a file.
struct FileSymbols {
    /// Where the file is loaded, relative to its link-time addresses.
    bias: u64,
    /// Its functions.
    functions: Symbols,
    /// Its data objects (variables).
    objects: Symbols,
}

/// The functions and variables that contain given addresses of a snapshot, from the
/// symbol tables of its executable and libraries (each file read once, through the
/// store's checks).
#[derive(Default)]
pub struct Symbolizer {
    /// Per file path: its symbols, or none when the file could not be read.
    files: HashMap<String, Option<FileSymbols>>,
}

impl Symbolizer {
    /// The function `pc` lies in, `name+0xOFF`, in `snap`; `None` if no symbol covers it.
    pub fn function_at(&mut self, snap: &impl SnapshotSource, pc: u64) -> Option<String> {
        self.symbol_at(snap, pc, |file| &file.functions)
    }

    /// The variable `addr` lies in, `name+0xOFF` (`_PyRuntime+0x1d0`; at its start,
    /// `name`), in `snap`, by the symbols of the file mapped there; `None` if no symbol
    /// covers it.
    pub fn variable_at(&mut self, snap: &impl SnapshotSource, addr: u64) -> Option<String> {
        let found = self.symbol_at(snap, addr, |file| &file.objects)?;
        Some(found.strip_suffix("+0x0").map_or(found.clone(), str::to_owned))
    }

    /// The symbol of `addr`'s file that `which` lists and that covers `addr`.
    fn symbol_at(
        &mut self,
        snap: &impl SnapshotSource,
        addr: u64,
        which: impl Fn(&FileSymbols) -> &Symbols,
    ) -> Option<String> {
        let meta = snap.meta();
        let m = meta.mappings.iter().find(|m| m.contains(addr))?;
        let Content::File(f) = &m.content else { return None };
        let entry = self.files.entry(f.path.clone()).or_insert_with(|| file_symbols(snap, meta, f));
        let file = entry.as_ref()?;
        let symbols = which(file);
        let at = addr.wrapping_sub(file.bias);
        let i = symbols.partition_point(|(start, _, _)| *start <= at).checked_sub(1)?;
        let (start, size, name) = &symbols[i];
        (at < start + (*size).max(1)).then(|| format!("{name}+{:#x}", at - start))
    }
}

/// The load bias of file `f` in `meta` and its symbols.
fn file_symbols(snap: &impl SnapshotSource, meta: &SnapshotMeta, f: &FileRef) -> Option<FileSymbols> {
    let data = read_checked(snap, f).ok()?;
    let elf = object::File::parse(&*data).ok()?;
    let page = sdt_store::PAGE_SIZE;
    let link_base = elf.segments().map(|s| s.address()).min().unwrap_or(0) / page * page;
    let first: &Mapping = meta.mapping_of_start(f)?;
    let of_kind = |kind: SymbolKind| {
        by_address(
            elf.symbols()
                .chain(elf.dynamic_symbols())
                .filter(|s| s.kind() == kind && s.address() != 0)
                .filter_map(|s| Some((s.address(), s.size(), s.name().ok()?.to_owned())))
                .collect(),
        )
    };
    Some(FileSymbols {
        bias: first.start.wrapping_sub(link_base),
        functions: of_kind(SymbolKind::Text),
        objects: of_kind(SymbolKind::Data),
    })
}

/// `symbols` sorted by address, one per address: the largest (`_PyRuntime`, not a marker
/// of size 0 at its start).
fn by_address(mut symbols: Symbols) -> Symbols {
    symbols.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)).then(a.2.cmp(&b.2)));
    symbols.dedup_by_key(|(addr, _, _)| *addr);
    symbols
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn of_symbols_at_one_address_the_largest_is_kept() {
        let symbols = vec![
            (0x540, 0x28b20, "_PyRuntime".to_owned()),
            (0x538, 8, "_PyImport_FrozenBootstrap".to_owned()),
            (0x540, 0, "__TMC_END__".to_owned()),
        ];
        let kept: Vec<String> = by_address(symbols).into_iter().map(|(_, _, n)| n).collect();
        assert_eq!(kept, ["_PyImport_FrozenBootstrap", "_PyRuntime"]);
    }

    #[test]
    fn a_program_without_globals_has_none_and_one_without_dwarf_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let source = dir.path().join("p.c");
        std::fs::write(&source, "int main(void) { int total = 3; return total - 3; }\n").unwrap();
        let build = |flags: &[&str]| {
            let out = dir.path().join("p");
            let built =
                std::process::Command::new("gcc").args(flags).arg(&source).arg("-o").arg(&out).status();
            assert!(built.unwrap().success());
            std::fs::read(out).unwrap()
        };
        let program = Program::parse("p", &build(&["-g"])).unwrap();
        assert!(program.variables().is_empty());
        let err = Program::parse("p", &build(&[])).err().unwrap();
        assert!(matches!(err, VarsError::NoDebugInfo(_)), "{err}");
    }

    #[test]
    fn globals_in_modules_and_namespaces_go_by_their_qualified_names() {
        let dir = tempfile::tempdir().unwrap();
        let source = dir.path().join("p.rs");
        let text = "pub mod bank { pub static TOTAL: std::sync::atomic::AtomicI64 = \
                    std::sync::atomic::AtomicI64::new(5); }\n\
                    fn main() { bank::TOTAL.fetch_add(1, std::sync::atomic::Ordering::Relaxed); }\n";
        std::fs::write(&source, text).unwrap();
        let out = dir.path().join("p");
        let built = std::process::Command::new("rustc").args(["-g", "-o"]).arg(&out).arg(&source).status();
        assert!(built.unwrap().success());
        let program = Program::parse("p", &std::fs::read(out).unwrap()).unwrap();
        let total = program.variable("p::bank::TOTAL").expect("p::bank::TOTAL");
        assert!(matches!(total.place, Place::Static(_)), "{total:?}");
        let mut left = Vec::new();
        leaf_changes(
            "p::bank::TOTAL",
            &total.ty,
            &5i64.to_le_bytes(),
            &6i64.to_le_bytes(),
            &Tolerance::EXACT,
            0,
            &mut left,
        );
        assert_eq!(left.len(), 1, "an AtomicI64's value is its one leaf: {:?}", total.ty);
    }

    #[test]
    fn values_decode_by_type() {
        let int = |size, signed| Type::Int { size, signed };
        assert_eq!(Value::decode(&int(1, true), &[0xff]), Value::Int(-1));
        assert_eq!(Value::decode(&int(2, true), &[0x00, 0x80]), Value::Int(-32768));
        assert_eq!(Value::decode(&int(4, false), &[0xff; 4]), Value::UInt(u32::MAX.into()));
        assert_eq!(Value::decode(&int(8, true), &(-5i64).to_le_bytes()).to_string(), "-5");
        assert_eq!(Value::decode(&Type::Float { size: 8 }, &2.5f64.to_le_bytes()).to_string(), "2.5");
        assert_eq!(Value::decode(&Type::Float { size: 4 }, &0.5f32.to_le_bytes()).to_string(), "0.5");
        assert_eq!(Value::decode(&Type::Char, b"A").to_string(), "65 'A'");
        assert_eq!(Value::decode(&Type::Char, b"\n").to_string(), "10 '\\012'");
        assert_eq!(Value::decode(&Type::Bool { size: 1 }, &[1]).to_string(), "true");
        assert_eq!(Value::decode(&Type::Pointer, &0x1000u64.to_le_bytes()).to_string(), "0x1000");
        assert_eq!(Value::decode(&Type::Bytes { size: 3 }, &[1, 0xab, 0]).to_string(), "0x01ab00");
    }

    #[test]
    fn changes_name_members_and_elements() {
        let int = Type::Int { size: 4, signed: true };
        let point = Type::Struct {
            size: 8,
            members: vec![("x".into(), 0, int.clone()), ("y".into(), 4, int.clone())],
        };
        let ty = Type::Array { elem: Box::new(point), len: 2 };
        let words = |w: [i32; 4]| w.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>();
        let mut out = Vec::new();
        leaf_changes("pts", &ty, &words([1, 2, 3, 4]), &words([1, 5, 3, 4]), &Tolerance::EXACT, 0, &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!((out[0].name.as_str(), out[0].old.as_str(), out[0].new.as_str()), ("pts[0].y", "2", "5"));
    }

    #[test]
    fn an_address_is_named_by_the_member_or_element_it_lies_in() {
        let int = Type::Int { size: 4, signed: true };
        let lock = Type::Bytes { size: 40 };
        let account = Type::Struct {
            size: 48,
            members: vec![("balance".into(), 0, Type::Int { size: 8, signed: true }), ("m".into(), 8, lock)],
        };
        let accounts = Type::Array { elem: Box::new(account), len: 4 };
        assert_eq!(leaf_name("accounts", &accounts, 2 * 48 + 8, 0), "accounts[2].m");
        assert_eq!(leaf_name("accounts", &accounts, 2 * 48 + 20, 0), "accounts[2].m");
        assert_eq!(leaf_name("accounts", &accounts, 48 + 3, 0), "accounts[1].balance");
        let grid = Type::Array { elem: Box::new(Type::Array { elem: Box::new(int), len: 4 }), len: 3 };
        assert_eq!(leaf_name("grid", &grid, (4 + 2) * 4, 0), "grid[1][2]");
    }

    #[test]
    fn long_arrays_list_some_elements_and_count_the_rest() {
        let ty = Type::Array { elem: Box::new(Type::Int { size: 1, signed: false }), len: 40 };
        let mut out = Vec::new();
        leaf_changes("a", &ty, &[0; 40], &[1; 40], &Tolerance::EXACT, 0, &mut out);
        assert_eq!(out.len(), MAX_ELEMENTS);
        assert_eq!(out.last().unwrap().more, 40 - MAX_ELEMENTS as u64);
    }

    #[test]
    fn tolerances_compare_numbers() {
        let tol = Tolerance { rtol: 1e-6, atol: 0.0 };
        assert!(tol.same(&Value::Float(1.0), &Value::Float(1.0 + 1e-9)));
        assert!(!tol.same(&Value::Float(1.0), &Value::Float(1.001)));
        assert!(Tolerance { rtol: 0.0, atol: 2.0 }.same(&Value::Int(10), &Value::UInt(12)));
        assert!(!Tolerance::EXACT.same(&Value::Pointer(1), &Value::Pointer(2)));
        assert!(tol.same_text("3.0000000001", "3"));
        assert!(!tol.same_text("{x = 1}", "{x = 2}"));
    }

    #[test]
    fn members_outside_their_struct_are_ignored() {
        let int = Type::Int { size: 4, signed: true };
        let ty = Type::Struct {
            size: 4,
            members: vec![("far".into(), u64::MAX - 1, int.clone()), ("x".into(), 2, int)],
        };
        let mut out = Vec::new();
        leaf_changes("s", &ty, &[0; 4], &[1; 4], &Tolerance::EXACT, 0, &mut out);
        assert_eq!((out.len(), out[0].name.as_str()), (1, "s"));
    }

    #[test]
    fn a_struct_differing_only_in_padding_is_listed_as_bytes() {
        let ty = Type::Struct { size: 8, members: vec![("c".into(), 0, Type::Char)] };
        let mut out = Vec::new();
        leaf_changes(
            "s",
            &ty,
            &[1, 0, 0, 0, 0, 0, 0, 0],
            &[1, 0, 0, 0, 9, 0, 0, 0],
            &Tolerance::EXACT,
            0,
            &mut out,
        );
        assert_eq!(out.len(), 1);
        assert_eq!((out[0].name.as_str(), out[0].new.as_str()), ("s", "0x0100000009000000"));
    }
}
