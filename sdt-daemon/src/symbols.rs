//! Symbol breakpoints (`sdt run --break FUNC[@HIT,…]`): breakpoints in programs that do
//! not call `SetBreakpoint`, placed by the tracer at function entries.
//!
//! ```text
//!  program start (exec stop)   FUNC's address from the program's ELF symbols; its first
//!                              byte becomes int3 (0xcc), written through /proc/PID/mem
//!  a thread reaches FUNC       SIGTRAP with rip = FUNC + 1: rip goes back to FUNC, and the
//!                              arrival becomes a breakpoint (level 1, class 0, id N for the
//!                              N-th --break, attrs "symbol=FUNC")
//!  freeze                      every int3 is taken out: the snapshot holds the program's
//!                              own bytes, and a thread stopped at FUNC shows at FUNC
//!  thaw                        the thread at FUNC runs FUNC's first instruction (stepped
//!                              while every other thread is stopped, or emulated), then the
//!                              int3s go back and everyone resumes
//! ```
//!
//! An arrival that does not capture (another hit than the ones asked for, a filtered one)
//! is stepped over the same way: by emulating the first instruction where it is one of
//! the usual prologues (`endbr64`, `push` of a register), else by stopping every thread
//! for the step, so that no thread passes FUNC's entry while its int3 is out.
//!
//! FUNC is a symbol as the program's ELF symbol table has it (`solve`, `_ZN5Klass6methodEv`)
//! or a C++ or Rust function as its source names it: the symbols are demangled and FUNC
//! matched against the name without parameters (`Klass::method`, `ns::f`, `crate::m::f`)
//! or, where FUNC has parameters, with them (`Foo::bar(int)`). A name that several
//! functions have (overloads) is an error that lists them.
//!
//! Only the program's own functions can be named (its libraries are not loaded yet at its
//! start), and only in the image `sdt run` started: after `execve` the breakpoints are
//! gone. A child the program forks inherits the int3s untraced, and dies of `SIGTRAP`
//! if it calls FUNC.

use sdt_abi::regs::UserRegs;
use sdt_abi::{PROTOCOL_VERSION, Span, SpanError, TRAP_RECORD_SIZE, TrapRecord};
use sdt_store::Mapping;
use sdt_sys::ptrace;
use sdt_sys::{Tid, memory, monotonic_ns};

use crate::freeze::BreakpointHit;

/// The `int3` instruction.
const INT3: u8 = 0xcc;

/// A function to break at, as `--break FUNC[@HIT,…]` names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SymbolBreak {
    /// The function's symbol.
    pub name: String,
    /// Which arrivals capture (from 1); empty: every one.
    pub hits: Vec<Span>,
}

/// Why a `--break` cannot be placed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BreakError {
    /// A hit is not a number or a range.
    #[error("--break {text}")]
    BadHits {
        /// The `--break` value.
        text: String,
        /// What is wrong with the hit.
        #[source]
        source: SpanError,
    },
    /// A hit below 1.
    #[error("--break {text}: `{span}`: hits count from 1 (the first call)")]
    HitZero {
        /// The `--break` value.
        text: String,
        /// The hit.
        span: Span,
    },
    /// No function is named.
    #[error("--break {text}: no function named (use --break FUNC or FUNC@HITS)")]
    NoFunction {
        /// The `--break` value.
        text: String,
    },
    /// A function is named twice.
    #[error("--break {name} is given twice: name its hits in one (--break {name}@1,5-7)")]
    Twice {
        /// The function.
        name: String,
    },
    /// The program's mappings could not be read.
    #[error("reading maps")]
    Maps(#[source] std::io::Error),
    /// The program's file could not be opened.
    #[error("--break: cannot open {exe}")]
    Open {
        /// The program.
        exe: String,
    },
    /// The program's symbols could not be read.
    #[error("--break: reading {exe}'s symbols")]
    Symbols {
        /// The program.
        exe: String,
        /// What the ELF reader said.
        #[source]
        source: object::Error,
    },
    /// The program has no such function.
    #[error(
        "--break {name}: the program {exe} defines no such symbol (stripped, or in a library?){suggestion}"
    )]
    NoSuchSymbol {
        /// The function.
        name: String,
        /// The program.
        exe: String,
        /// Functions whose names end in `::name`, as `(did you mean …?)`, or nothing.
        suggestion: String,
    },
    /// Several functions have the name.
    #[error(
        "--break {name} is ambiguous: the program has {} functions of that name: {}; give the parameters, e.g. --break '{}'",
        functions.len(),
        functions.join(", "),
        functions[0]
    )]
    Ambiguous {
        /// The name.
        name: String,
        /// The functions, demangled with their parameters, sorted.
        functions: Vec<String>,
    },
    /// The function's first byte could not be read.
    #[error("--break {name}")]
    Unreadable {
        /// The function.
        name: String,
        /// The read.
        #[source]
        source: sdt_sys::Error,
    },
    /// An int3 could not be written.
    #[error("placing the breakpoints")]
    Place(#[source] sdt_sys::Error),
    /// The program is a restored one.
    #[error("--break applies to a program sdt run launches, not a restored one")]
    Restored,
    /// The backend is the kernel module.
    #[error("--break needs the ptrace backend: the kernel module places no breakpoints")]
    Kmod,
}

impl SymbolBreak {
    /// Parses `FUNC` or `FUNC@HIT,HIT-HIT,…`.
    pub fn parse(text: &str) -> Result<SymbolBreak, BreakError> {
        let (name, hits) = match text.split_once('@') {
            Some((name, hits)) => {
                let hit = |h: &str| match Span::parse(h) {
                    Ok(span) if span.first >= 1 => Ok(span),
                    Ok(span) => Err(BreakError::HitZero { text: text.to_owned(), span }),
                    Err(source) => Err(BreakError::BadHits { text: text.to_owned(), source }),
                };
                let hits = hits.split(',').map(hit).collect::<Result<Vec<_>, _>>()?;
                (name, hits)
            }
            None => (text, Vec::new()),
        };
        if name.is_empty() {
            return Err(BreakError::NoFunction { text: text.to_owned() });
        }
        Ok(SymbolBreak { name: name.to_owned(), hits })
    }
}

/// One placed breakpoint.
#[derive(Debug)]
struct Trap {
    name: String,
    hits: Vec<Span>,
    addr: u64,
    /// The byte the int3 replaces.
    original: u8,
    /// Arrivals so far.
    count: u64,
}

/// What a thread's `SIGTRAP` was, to the symbol breakpoints.
#[derive(Debug)]
pub(crate) enum Arrival {
    /// Not at one of their int3s.
    NotOurs,
    /// At one, during a freeze: moved back to the entry, to trap again once resumed.
    Later,
    /// An arrival that does not capture: to be stepped over.
    Pass,
    /// An arrival asked for: a breakpoint.
    Hit(BreakpointHit),
}

/// The symbol breakpoints of a program.
#[derive(Debug, Default)]
pub(crate) struct SymbolTraps {
    traps: Vec<Trap>,
    /// Whether the int3s are in the program's memory now.
    armed: bool,
}

impl SymbolTraps {
    /// Finds every function of `breaks` in the program `pid` (stopped at its exec) and
    /// places its int3. An unknown function is an error naming it.
    pub(crate) fn place(pid: Tid, breaks: &[SymbolBreak]) -> Result<SymbolTraps, BreakError> {
        if breaks.is_empty() {
            return Ok(SymbolTraps::default());
        }
        let mappings = sdt_procfs::maps(pid).map_err(BreakError::Maps)?;
        let exe = std::fs::read_link(format!("/proc/{pid}/exe"))
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        let mut traps: Vec<Trap> = Vec::new();
        for b in breaks {
            if traps.iter().any(|t| t.name == b.name) {
                return Err(BreakError::Twice { name: b.name.clone() });
            }
            let addr = function_entry(&mappings, &exe, &b.name)?;
            let mut original = [0u8];
            memory::read_exact(pid, addr, &mut original)
                .map_err(|source| BreakError::Unreadable { name: b.name.clone(), source })?;
            traps.push(Trap {
                name: b.name.clone(),
                hits: b.hits.clone(),
                addr,
                original: original[0],
                count: 0,
            });
        }
        let mut placed = SymbolTraps { traps, armed: false };
        placed.arm(pid).map_err(BreakError::Place)?;
        Ok(placed)
    }

    /// Puts the int3s (back) into the program.
    pub(crate) fn arm(&mut self, pid: Tid) -> Result<(), sdt_sys::Error> {
        if !self.armed && !self.traps.is_empty() {
            for t in &self.traps {
                memory::poke(pid, t.addr, &[INT3])?;
            }
            self.armed = true;
        }
        Ok(())
    }

    /// Takes the int3s out: the program's memory is its own again.
    pub(crate) fn disarm(&mut self, pid: Tid) -> Result<(), sdt_sys::Error> {
        if self.armed {
            for t in &self.traps {
                memory::poke(pid, t.addr, &[t.original])?;
            }
            self.armed = false;
        }
        Ok(())
    }

    /// Whether the int3s are in place.
    pub(crate) fn armed(&self) -> bool {
        self.armed
    }

    /// Forgets every breakpoint (the program's image was replaced, or capturing ended
    /// and they were taken out).
    pub(crate) fn clear(&mut self) {
        self.traps.clear();
        self.armed = false;
    }

    /// What thread `tid`'s `SIGTRAP` is. If it stopped at one of the int3s (`rip` just
    /// past it), it is moved back to the function's entry; the arrival is counted only if
    /// `count` (during a freeze it is not: the thread traps again once resumed).
    pub(crate) fn arrival(&mut self, tid: Tid, count: bool) -> Result<Arrival, sdt_sys::Error> {
        if !self.armed {
            return Ok(Arrival::NotOurs);
        }
        let mut regs = ptrace::regs(tid)?;
        let Some(index) = self.traps.iter().position(|t| t.addr + 1 == regs.rip) else {
            return Ok(Arrival::NotOurs);
        };
        regs.rip -= 1;
        ptrace::set_regs(tid, &regs)?;
        if !count {
            return Ok(Arrival::Later);
        }
        let trap = &mut self.traps[index];
        trap.count += 1;
        let hit = trap.count;
        if !trap.hits.is_empty() && !trap.hits.iter().any(|s| s.contains(hit as i64)) {
            return Ok(Arrival::Pass);
        }
        let record = TrapRecord {
            version: PROTOCOL_VERSION,
            size: TRAP_RECORD_SIZE as u32,
            level: 1,
            class: 0,
            id: index as i32 + 1,
            multiple_mark: 1,
            hit,
            attrs_ptr: 0,
            attrs_len: 0,
            trigger_ns: monotonic_ns(),
            state_ptr: 0,
            result: 0,
        };
        Ok(Arrival::Hit(BreakpointHit {
            tid,
            record,
            record_addr: 0,
            attrs: format!("symbol={}", trap.name),
        }))
    }

    /// Runs the first instruction of the function thread `tid` stands at without the
    /// int3 being taken out, if it is a usual prologue: `endbr64`, or `push` of a
    /// register. False if it is something else.
    pub(crate) fn emulate_entry(&self, tid: Tid) -> Result<bool, sdt_sys::Error> {
        let mut regs = ptrace::regs(tid)?;
        let rip = regs.rip;
        let Some(trap) = self.traps.iter().find(|t| t.addr == rip) else { return Ok(false) };
        let mut code = [0u8; 4];
        memory::read_exact(tid, rip, &mut code)?;
        code[0] = trap.original;
        let Some(step) = Prologue::decode(&code) else { return Ok(false) };
        match step {
            Prologue::Endbr64 => regs.rip = rip + 4,
            Prologue::Push { reg, len } => {
                let value = pushed(&regs, reg);
                let rsp = regs.rsp.wrapping_sub(8);
                memory::write(tid, rsp, &value.to_le_bytes())?;
                regs.rsp = rsp;
                regs.rip = rip + len;
            }
        }
        ptrace::set_regs(tid, &regs)?;
        Ok(true)
    }
}

/// One function of the program: its symbol, address and source names.
#[derive(Debug)]
struct Function {
    symbol: String,
    addr: u64,
    /// Demangled with parameters (`Foo::bar(int) const`); the symbol where it is not mangled.
    full: String,
    /// Demangled without parameters or return type (`Foo::bar`).
    bare: String,
}

impl Function {
    fn new(symbol: &str, addr: u64) -> Function {
        // Rust first: its legacy mangling also reads as C++, with the hash as a name.
        if let Ok(rust) = rustc_demangle::try_demangle(symbol) {
            let name = format!("{rust:#}");
            return Function { symbol: symbol.to_owned(), addr, full: name.clone(), bare: name };
        }
        let cpp = cpp_demangle::Symbol::new(symbol).ok();
        let demangle = |options: cpp_demangle::DemangleOptions| {
            cpp.as_ref().and_then(|s| s.demangle_with_options(&options).ok())
        };
        let full = demangle(cpp_demangle::DemangleOptions::new()).unwrap_or_else(|| symbol.to_owned());
        let bare = demangle(cpp_demangle::DemangleOptions::new().no_params().no_return_type())
            .unwrap_or_else(|| symbol.to_owned());
        Function { symbol: symbol.to_owned(), addr, full, bare }
    }

    /// Whether `--break name` names this function: by its name without parameters, or,
    /// where `name` has parameters, with them (spaces aside, ` const` optional).
    fn is_named(&self, name: &str) -> bool {
        let squeeze = |s: &str| s.split_whitespace().collect::<String>();
        if name.contains('(') {
            let (want, full) = (squeeze(name), squeeze(&self.full));
            full == want || full.strip_suffix("const") == Some(want.as_str())
        } else {
            squeeze(&self.bare) == squeeze(name)
        }
    }
}

/// The identifier every symbol that can demangle to `name` holds as it is (`bar` of
/// `ns::Foo::bar(int)`), where there is one: only those symbols need demangling.
fn last_identifier(name: &str) -> Option<&str> {
    let base = name.split('(').next()?;
    let last = base.split('<').next()?.rsplit("::").next()?.trim();
    let plain = !last.is_empty() && last.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    (plain && !last.starts_with("operator")).then_some(last)
}

/// The address of function `name` of the program `exe` (mapped as `mappings` say): a
/// symbol of that name, else the one function whose demangled name it is.
fn function_entry(mappings: &[Mapping], exe: &str, name: &str) -> Result<u64, BreakError> {
    let open = &sdt_sys::open_regular;
    if let Some(addr) = sdt_target::symbol_in(mappings, exe, name, open) {
        return Ok(addr);
    }
    let functions = program_functions(exe, name)?;
    let symbol = match_function(name, &functions)?;
    symbol.and_then(|s| sdt_target::symbol_in(mappings, exe, s, open)).ok_or_else(|| {
        BreakError::NoSuchSymbol {
            name: name.to_owned(),
            exe: exe.to_owned(),
            suggestion: suggestion(name, &functions),
        }
    })
}

/// The functions the program `exe` defines that could be `name`, from its symbol tables.
fn program_functions(exe: &str, name: &str) -> Result<Vec<Function>, BreakError> {
    use object::{Object, ObjectSymbol, SymbolKind};
    let must_hold = last_identifier(name).unwrap_or("");
    let file = sdt_sys::open_regular(exe).ok_or_else(|| BreakError::Open { exe: exe.to_owned() })?;
    let cache = object::ReadCache::new(file);
    let elf =
        object::File::parse(&cache).map_err(|source| BreakError::Symbols { exe: exe.to_owned(), source })?;
    Ok(elf
        .symbols()
        .chain(elf.dynamic_symbols())
        .filter(|s| s.kind() == SymbolKind::Text && !s.is_undefined())
        .filter_map(|s| Some((s.name().ok()?, s.address())))
        .filter(|(symbol, _)| symbol.contains(must_hold))
        .map(|(symbol, addr)| Function::new(symbol, addr))
        .collect())
}

/// The symbol of the one function `name` names, if any; an error listing them if several
/// (at different addresses) do.
fn match_function<'f>(name: &str, functions: &'f [Function]) -> Result<Option<&'f str>, BreakError> {
    let mut named: Vec<&Function> = functions.iter().filter(|f| f.is_named(name)).collect();
    named.sort_by_key(|f| f.addr);
    named.dedup_by_key(|f| f.addr);
    match named[..] {
        [] => Ok(None),
        [one] => Ok(Some(&one.symbol)),
        _ => {
            let mut functions: Vec<String> = named.iter().map(|f| f.full.clone()).collect();
            functions.sort();
            Err(BreakError::Ambiguous { name: name.to_owned(), functions })
        }
    }
}

/// ` (did you mean …?)`: functions whose name ends in `::name`, for an unknown name.
fn suggestion(name: &str, functions: &[Function]) -> String {
    let tail = format!("::{name}");
    let mut near: Vec<&str> =
        functions.iter().map(|f| f.bare.as_str()).filter(|b| b.ends_with(&tail)).collect();
    near.sort();
    near.dedup();
    near.truncate(5);
    if near.is_empty() { String::new() } else { format!(" (did you mean {}?)", near.join(", ")) }
}

/// A function's first instruction, where it is one [`SymbolTraps::emulate_entry`] runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Prologue {
    /// `f3 0f 1e fa`: a no-op outside CET.
    Endbr64,
    /// `push %reg` (`50+r`, or `41 50+r` for r8–r15): `reg` is the register's number
    /// in the instruction set's encoding (0 `rax`, … 7 `rdi`, 8 `r8`, … 15 `r15`).
    Push { reg: u8, len: u64 },
}

/// The general register numbered `reg` in the instruction set's encoding.
fn pushed(regs: &UserRegs, reg: u8) -> u64 {
    match reg {
        0 => regs.rax,
        1 => regs.rcx,
        2 => regs.rdx,
        3 => regs.rbx,
        4 => regs.rsp,
        5 => regs.rbp,
        6 => regs.rsi,
        7 => regs.rdi,
        8 => regs.r8,
        9 => regs.r9,
        10 => regs.r10,
        11 => regs.r11,
        12 => regs.r12,
        13 => regs.r13,
        14 => regs.r14,
        _ => regs.r15,
    }
}

impl Prologue {
    fn decode(code: &[u8; 4]) -> Option<Prologue> {
        match *code {
            [0xf3, 0x0f, 0x1e, 0xfa] => Some(Prologue::Endbr64),
            // push %rsp pushes the value before the decrement: left to a real step.
            [op @ 0x50..=0x57, ..] if op != 0x54 => Some(Prologue::Push { reg: op - 0x50, len: 1 }),
            [0x41, op @ 0x50..=0x57, ..] => Some(Prologue::Push { reg: 8 + op - 0x50, len: 2 }),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn breaks_parse() {
        assert_eq!(SymbolBreak::parse("solve").unwrap(), SymbolBreak { name: "solve".into(), hits: vec![] });
        let b = SymbolBreak::parse("step@1,5-7").unwrap();
        assert_eq!(b.name, "step");
        assert_eq!(b.hits, vec![Span::single(1), Span { first: 5, last: 7 }]);
        let refused = |text: &str| crate::human::error_chain(&SymbolBreak::parse(text).unwrap_err());
        assert!(matches!(SymbolBreak::parse("@3"), Err(BreakError::NoFunction { .. })));
        assert!(refused("@3").contains("no function"));
        assert!(matches!(SymbolBreak::parse("f@x"), Err(BreakError::BadHits { .. })));
        assert_eq!(refused("f@x"), "--break f@x: `x` is not a number or an `a-b` range with a <= b");
        assert!(matches!(SymbolBreak::parse("main@0"), Err(BreakError::HitZero { .. })));
        assert_eq!(refused("main@0"), "--break main@0: `0`: hits count from 1 (the first call)");
        assert!(refused("main@2,-3--1").contains("`-3--1`: hits count from 1"));
        assert!(refused("main@").contains("is not a number"));
    }

    /// Symbols as g++ and rustc write them, named as their sources do.
    #[test]
    fn demangled_names_match() {
        let functions: Vec<Function> = [
            ("_Z9bs_threadPv", 0x1000),
            ("_ZN21ParticleFilterPthread4ExecEv", 0x1100),
            ("_ZN3Foo3barEi", 0x1200),
            ("_ZN3Foo3barEd", 0x1300),
            ("_ZNK3Foo3bazEv", 0x1400),
            // A constructor's complete and base objects at one address: one function.
            ("_ZN5KlassC1Ev", 0x1500),
            ("_ZN5KlassC2Ev", 0x1500),
            ("_ZN4core3fmt5write17h0123456789abcdefE", 0x1600),
            ("step", 0x1700),
        ]
        .into_iter()
        .map(|(s, a)| Function::new(s, a))
        .collect();
        let found = |name: &str| match_function(name, &functions).unwrap();
        assert_eq!(found("bs_thread"), Some("_Z9bs_threadPv"));
        assert_eq!(found("ParticleFilterPthread::Exec"), Some("_ZN21ParticleFilterPthread4ExecEv"));
        assert_eq!(found("Foo::bar(int)"), Some("_ZN3Foo3barEi"));
        assert_eq!(found("Foo::bar( double )"), Some("_ZN3Foo3barEd"));
        assert_eq!(found("Foo::baz"), Some("_ZNK3Foo3bazEv"));
        assert_eq!(found("Foo::baz()"), Some("_ZNK3Foo3bazEv"));
        assert_eq!(found("Klass::Klass"), Some("_ZN5KlassC1Ev"));
        assert_eq!(found("core::fmt::write"), Some("_ZN4core3fmt5write17h0123456789abcdefE"));
        assert_eq!(found("step"), Some("step"));
        assert_eq!(found("bar"), None);
        assert_eq!(found("Foo::bar(long)"), None);
        assert_eq!(
            match_function("Foo::bar", &functions).unwrap_err().to_string(),
            "--break Foo::bar is ambiguous: the program has 2 functions of that name: Foo::bar(double), \
             Foo::bar(int); give the parameters, e.g. --break 'Foo::bar(double)'"
        );
        assert_eq!(suggestion("bar", &functions), " (did you mean Foo::bar?)");
        assert_eq!(suggestion("nothing", &functions), "");

        assert_eq!(last_identifier("ns::Foo::bar(int)"), Some("bar"));
        assert_eq!(last_identifier("bs_thread"), Some("bs_thread"));
        assert_eq!(last_identifier("max<int>(int, int)"), Some("max"));
        assert_eq!(last_identifier("Foo::operator+(Foo const&)"), None);
        assert_eq!(last_identifier("Klass::~Klass"), None);
    }

    #[test]
    fn prologues_decode() {
        assert_eq!(Prologue::decode(&[0xf3, 0x0f, 0x1e, 0xfa]), Some(Prologue::Endbr64));
        assert_eq!(Prologue::decode(&[0x55, 0x48, 0x89, 0xe5]), Some(Prologue::Push { reg: 5, len: 1 }));
        assert_eq!(Prologue::decode(&[0x41, 0x57, 0, 0]), Some(Prologue::Push { reg: 15, len: 2 }));
        assert_eq!(Prologue::decode(&[0x54, 0, 0, 0]), None, "push %rsp");
        let regs = UserRegs { rax: 1, rbp: 2, rdi: 3, r8: 4, r15: 5, ..bytemuck::Zeroable::zeroed() };
        let values: Vec<u64> = [0, 5, 7, 8, 15].into_iter().map(|r| pushed(&regs, r)).collect();
        assert_eq!(values, [1, 2, 3, 4, 5]);
        assert_eq!(Prologue::decode(&[0x48, 0x83, 0xec, 0x08]), None, "sub $8, %rsp");
    }
}
