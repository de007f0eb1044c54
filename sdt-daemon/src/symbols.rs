//! Symbol breakpoints (`sdt run --break FUNC[@HIT,…]`): breakpoints in programs that do
//! not call `SetBreakpoint`, placed by the tracer at function entries.
//!
//! ```text
//!  program start (exec stop)   FUNC's address from the ELF symbols of the program (or,
//!                              once the loader has mapped them, of its libraries); its
//!                              first byte becomes int3 (0xcc), written through /proc/PID/mem
//!  a thread reaches FUNC       SIGTRAP with rip = FUNC + 1: rip goes back to FUNC, and the
//!                              arrival becomes a breakpoint (level 1, class 0, id N for the
//!                              N-th --break, attrs "symbol=FUNC")
//!  freeze                      every int3 is taken out: the snapshot holds the program's
//!                              own bytes; a capture's thread is stepped on to where FUNC's
//!                              body starts, its arguments stored ([`crate::body`])
//!  thaw                        a thread still at FUNC runs FUNC's first instruction
//!                              (stepped while every other thread is stopped, or emulated),
//!                              then the int3s go back and everyone resumes
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
//! or, where FUNC has parameters, with them (`Foo::bar(int)`). A Fortran procedure is
//! named as its source names it, in any case: `report` (gfortran's `report_`) and a
//! module procedure as `solver::relax` or `relax` (`__solver_MOD_relax`). A name that
//! several functions have (overloads) is an error that lists them.
//!
//! Functions are looked for in the program first. Those it lacks are looked for in the
//! libraries it loads at its start: the program is run until its dynamic loader says they
//! are loaded (an int3 at the loader's `_dl_debug_state`, which it calls before and after
//! each change, `_r_debug.r_state` telling which), before any of the program's own code
//! runs; a function found nowhere then is an error. `--break LIB:FUNC` looks in library
//! LIB only, whenever the program loads it (`dlopen`): the loader's int3 stays for those,
//! and a library unloaded takes its int3s with it (placed again if it comes back, its
//! arrivals counted on).
//!
//! The breakpoints hold in the image `sdt run` started: after `execve` they are gone. A
//! process the program forks is traced until its copy of the memory has the program's
//! own bytes back, then let go. A `vfork` child (`posix_spawn`, `system`) shares the
//! int3s until it execs, and dies of `SIGTRAP` if it calls FUNC before.

use std::time::{Duration, Instant};

use sdt_abi::regs::UserRegs;
use sdt_abi::{PROTOCOL_VERSION, Span, SpanError, TRAP_RECORD_SIZE, TrapRecord};
use sdt_store::Mapping;
use sdt_sys::ptrace::{self, event};
use sdt_sys::wait::{self, Stop};
use sdt_sys::{Tid, memory, monotonic_ns};

use crate::freeze::BreakpointHit;

/// The `int3` instruction.
const INT3: u8 = 0xcc;

/// A function to break at, as `--break [LIB:]FUNC[@HIT,…]` names it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SymbolBreak {
    /// The function's symbol, or its name as its source writes it.
    pub name: String,
    /// The library to find it in, whenever the program loads it (`libz`, `libz.so.1`, a
    /// path); `None`: the program, else the libraries it loads at its start.
    pub library: Option<String>,
    /// Which arrivals capture (from 1); empty: every one.
    pub hits: Vec<Span>,
}

impl std::fmt::Display for SymbolBreak {
    /// `LIB:FUNC` or `FUNC`, as `--break` named it (hits aside).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.library {
            Some(lib) => write!(f, "{lib}:{}", self.name),
            None => f.write_str(&self.name),
        }
    }
}

/// Where a function was looked for, for [`BreakError::NoSuchSymbol`].
fn searched(exe: &str, libraries: usize, name: &str) -> String {
    match libraries {
        0 => format!("the program {exe} defines no such symbol (stripped?)"),
        n => format!(
            "neither the program {exe} nor the {n} librar{} it loads at its start define{} it (stripped? a \
             library it loads later is named as --break LIB:{name})",
            if n == 1 { "y" } else { "ies" },
            if n == 1 { "s" } else { "" },
        ),
    }
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
    /// Neither the program nor the libraries it starts with have such a function.
    #[error("--break {name}: {}{suggestion}", searched(exe, *libraries, name))]
    NoSuchSymbol {
        /// The function.
        name: String,
        /// The program.
        exe: String,
        /// How many libraries were searched besides it (0: it loads none).
        libraries: usize,
        /// Functions whose names end in `::name`, as `(did you mean …?)`, or nothing.
        suggestion: String,
    },
    /// `LIB:FUNC` for a program that loads no libraries.
    #[error("--break {text}: the program {exe} is statically linked: it loads no libraries")]
    Static {
        /// The `--break` value.
        text: String,
        /// The program.
        exe: String,
    },
    /// `:FUNC`.
    #[error("--break {text}: no library before the `:` (use --break LIB:FUNC, e.g. libz:deflate)")]
    NoLibrary {
        /// The `--break` value.
        text: String,
    },
    /// The program ended while its libraries were being loaded.
    #[error(
        "--break: the program ended before its libraries were loaded (a library missing? the loader's \
         message is above)"
    )]
    EndedAtStart,
    /// The loader took too long.
    #[error("--break: the program's dynamic loader did not finish loading its libraries within {seconds} s")]
    LoaderTimeout {
        /// The limit.
        seconds: u64,
    },
    /// Several functions have the name.
    #[error(
        "--break {name} is ambiguous: the program has {} functions of that name: {}; name one as listed, e.g. --break '{}'",
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
        let (library, name) = split_library(name);
        if name.is_empty() {
            return Err(BreakError::NoFunction { text: text.to_owned() });
        }
        if library == Some("") {
            return Err(BreakError::NoLibrary { text: text.to_owned() });
        }
        Ok(SymbolBreak { name: name.to_owned(), library: library.map(str::to_owned), hits })
    }
}

/// A `--break` and its arrivals.
#[derive(Debug)]
struct Wanted {
    /// The N-th `--break` (from 0): its breakpoint id is N + 1.
    index: usize,
    what: SymbolBreak,
    /// Arrivals so far (across a library's unload and reload).
    count: u64,
    /// Warned that its library was loaded without defining it.
    told_missing: bool,
    /// Placed at some time.
    ever_placed: bool,
}

/// What an int3 is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum At {
    /// A `--break` function's entry: the index of its [`Wanted`].
    Function(usize),
    /// The dynamic loader's `_dl_debug_state`, which it calls before and after it loads or
    /// unloads libraries.
    Loader,
}

/// One placed int3.
#[derive(Debug)]
struct Trap {
    at: At,
    addr: u64,
    /// The byte the int3 replaces.
    original: u8,
    /// The file it is in (the program, a library, the loader).
    file: String,
    /// Where the function's body starts, past the prologue that stores its arguments,
    /// where that is not the entry ([`crate::body`]): a capture is taken there.
    body: Option<u64>,
}

/// What a thread's `SIGTRAP` was, to the symbol breakpoints.
#[derive(Debug)]
pub(crate) enum Arrival {
    /// Not at one of their int3s.
    NotOurs,
    /// At one, during a freeze: moved back to the entry, to trap again once resumed.
    Later,
    /// An arrival that does not capture (or the loader's, now followed): to be stepped
    /// over.
    Pass,
    /// An arrival asked for: a breakpoint.
    Hit(BreakpointHit),
}

/// The symbol breakpoints of a program.
#[derive(Debug, Default)]
pub(crate) struct SymbolTraps {
    wanted: Vec<Wanted>,
    traps: Vec<Trap>,
    /// Whether the int3s are in the program's memory now.
    armed: bool,
    /// The program's file.
    exe: String,
    /// Where the loader says what it is doing (`_r_debug.r_state`), if it says.
    loader_state: Option<u64>,
}

/// How long the dynamic loader may take to load a program's libraries at its start.
const LOADER_TIMEOUT: Duration = Duration::from_secs(60);
/// `r_state` within glibc's and musl's `struct r_debug` (after `r_version`, `r_map` and
/// `r_brk`).
const R_STATE_OFFSET: u64 = 24;
/// `RT_CONSISTENT`: no library is being loaded or unloaded.
const RT_CONSISTENT: i32 = 0;

impl SymbolTraps {
    /// Finds every function of `breaks` in the program `pid` (stopped at its exec) and
    /// places its int3. Functions the program does not define are looked for in the
    /// libraries it loads at its start: it is run until its dynamic loader has loaded
    /// them, before any of its own code runs. A function found nowhere is an error naming
    /// it; a `LIB:FUNC` waits for LIB, whenever the program loads it.
    pub(crate) fn place(pid: Tid, breaks: &[SymbolBreak]) -> Result<SymbolTraps, BreakError> {
        if breaks.is_empty() {
            return Ok(SymbolTraps::default());
        }
        let mut wanted: Vec<Wanted> = Vec::new();
        for (index, b) in breaks.iter().enumerate() {
            if wanted.iter().any(|w| w.what.name == b.name && w.what.library == b.library) {
                return Err(BreakError::Twice { name: b.to_string() });
            }
            wanted.push(Wanted { index, what: b.clone(), count: 0, told_missing: false, ever_placed: false });
        }
        let mappings = sdt_procfs::maps(pid).map_err(BreakError::Maps)?;
        let exe = crate::program_file(pid).unwrap_or_default();
        let mut placed = SymbolTraps { wanted, exe, ..SymbolTraps::default() };
        for i in 0..placed.wanted.len() {
            if placed.wanted[i].what.library.is_none() {
                let name = placed.wanted[i].what.name.clone();
                if let Some(addr) = function_entry(&only_of(&mappings, &placed.exe), &placed.exe, &name)? {
                    let body = crate::body::body_start(&mappings, &placed.exe, addr);
                    placed.add(pid, At::Function(i), addr, placed.exe.clone(), body)?;
                }
            }
        }
        if placed.wanted.iter().any(|w| !placed.has_trap(w)) {
            placed.wait_for_libraries(pid, &mappings)?;
        }
        placed.arm(pid).map_err(BreakError::Place)?;
        Ok(placed)
    }

    /// Runs the program `pid` until its dynamic loader has loaded the libraries it starts
    /// with, places the functions found there, and keeps an int3 at the loader's
    /// `_dl_debug_state` if libraries it loads later may matter. An error if the program
    /// has no loader, or a function without `LIB:` is still found nowhere.
    fn wait_for_libraries(&mut self, pid: Tid, mappings: &[Mapping]) -> Result<(), BreakError> {
        // At the exec stop only the program and its loader are mapped.
        let loader = mappings.iter().filter(|m| is_library(m) && m.path != self.exe).find_map(|m| {
            let own = only_of(mappings, &m.path);
            Some((m.path.clone(), sdt_target::symbol_in(&own, &m.path, "_dl_debug_state", &open)?, own))
        });
        let Some((loader, entry, own)) = loader else {
            let unplaced = self.wanted.iter().find(|w| !self.has_trap(w)).map(|w| w.what.clone());
            return Err(self.not_found(&unplaced.unwrap_or_default(), 0));
        };
        self.loader_state =
            sdt_target::symbol_in(&own, &loader, "_r_debug", &open).map(|a| a + R_STATE_OFFSET);
        // Only the loader's int3 while it works: the program's functions wait.
        let in_program = std::mem::take(&mut self.traps);
        self.add(pid, At::Loader, entry, loader, None)?;
        self.arm(pid).map_err(BreakError::Place)?;
        let deadline = Instant::now() + LOADER_TIMEOUT;
        let mut signal = 0;
        loop {
            ptrace::resume(pid, signal).map_err(BreakError::Place)?;
            signal = 0;
            let Some((_, stop)) = wait::wait_for_until(pid, deadline).map_err(BreakError::Place)? else {
                return Err(BreakError::LoaderTimeout { seconds: LOADER_TIMEOUT.as_secs() });
            };
            match stop {
                // At the loader's int3 (the only one in yet), moved back to its entry.
                Stop::Signal(libc::SIGTRAP)
                    if matches!(self.arrival(pid, false).map_err(BreakError::Place)?, Arrival::Later) =>
                {
                    let done = self.loader_consistent(pid);
                    self.step_alone(pid).map_err(BreakError::Place)?;
                    if done {
                        break;
                    }
                }
                Stop::Signal(s) => signal = s,
                Stop::Event(event::EXIT, _) | Stop::Exited(_) | Stop::Killed(..) => {
                    return Err(BreakError::EndedAtStart);
                }
                Stop::Event(..) => {}
            }
        }
        self.disarm(pid).map_err(BreakError::Place)?;
        self.traps.extend(in_program);
        self.follow_libraries(pid, true)?;
        // Only a LIB:FUNC can be in a library loaded later (those it starts with stay).
        if self.wanted.iter().all(|w| w.what.library.is_none()) {
            self.traps.retain(|t| t.at != At::Loader);
        }
        Ok(())
    }

    /// Looks for the functions not placed yet in the libraries mapped now, and forgets
    /// those placed in libraries no longer mapped (their int3s went with them). At the
    /// program's start (`startup`), a function without `LIB:` found nowhere is an error.
    fn follow_libraries(&mut self, pid: Tid, startup: bool) -> Result<(), BreakError> {
        let mappings = sdt_procfs::maps(pid).map_err(BreakError::Maps)?;
        self.traps.retain(|t| {
            t.file == self.exe
                || mappings.iter().any(|m| m.path == t.file && m.start <= t.addr && t.addr < m.end)
        });
        let loader = self.traps.iter().find(|t| t.at == At::Loader).map(|t| t.file.clone());
        let libraries = library_files(&mappings, &self.exe, loader.as_deref());
        for i in 0..self.wanted.len() {
            if self.has_trap(&self.wanted[i]) {
                continue;
            }
            let what = self.wanted[i].what.clone();
            let candidates: Vec<&str> = match &what.library {
                Some(lib) => libraries.iter().copied().filter(|f| names_library(f, lib)).take(1).collect(),
                None if startup => libraries.clone(),
                None => Vec::new(),
            };
            let mut found = None;
            for file in &candidates {
                match function_entry(&only_of(&mappings, file), file, &what.name) {
                    Ok(Some(addr)) => {
                        found = Some((addr, file.to_string()));
                        break;
                    }
                    Ok(None) => {}
                    // Not an ELF file the loader mapped (or gone since): nothing to find.
                    Err(e @ (BreakError::Open { .. } | BreakError::Symbols { .. })) => {
                        log::debug!("{}", crate::human::error_chain(&e));
                    }
                    Err(e) if startup => return Err(e),
                    Err(e) => log::warn!("{}", crate::human::error_chain(&e)),
                }
            }
            match (found, &what.library) {
                (Some((addr, file)), _) => {
                    let body = crate::body::body_start(&mappings, &file, addr);
                    self.add(pid, At::Function(i), addr, file, body)?;
                }
                (None, None) if startup => return Err(self.not_found(&what, libraries.len())),
                (None, Some(_)) if !candidates.is_empty() && !self.wanted[i].told_missing => {
                    self.wanted[i].told_missing = true;
                    log::warn!("--break {what}: {} was loaded but defines no such function", candidates[0]);
                }
                (None, _) => {}
            }
        }
        Ok(())
    }

    /// The error for `what`, found nowhere: in the program and the `libraries` it
    /// starts with (0: it loads none).
    fn not_found(&self, what: &SymbolBreak, libraries: usize) -> BreakError {
        if what.library.is_some() {
            return BreakError::Static { text: what.to_string(), exe: self.exe.clone() };
        }
        let functions = program_functions(&self.exe, &what.name).unwrap_or_default();
        BreakError::NoSuchSymbol {
            name: what.name.clone(),
            exe: self.exe.clone(),
            libraries,
            suggestion: suggestion(&what.name, &functions),
        }
    }

    fn has_trap(&self, wanted: &Wanted) -> bool {
        self.traps.iter().any(|t| t.at == At::Function(wanted.index))
    }

    /// Records an int3 at `addr` in `file`, its function's body starting at `body` (placed
    /// at once if the int3s are in).
    fn add(
        &mut self,
        pid: Tid,
        at: At,
        addr: u64,
        file: String,
        body: Option<u64>,
    ) -> Result<(), BreakError> {
        let name = || match at {
            At::Function(i) => self.wanted[i].what.to_string(),
            At::Loader => "_dl_debug_state".to_owned(),
        };
        let mut original = [0u8];
        memory::read_exact(pid, addr, &mut original)
            .map_err(|source| BreakError::Unreadable { name: name(), source })?;
        if self.armed {
            memory::poke(pid, addr, &[INT3]).map_err(BreakError::Place)?;
        }
        if let At::Function(i) = at {
            let body = body.map_or("its entry".to_owned(), |b| format!("{b:#x}"));
            log::debug!("--break {}: {file} at {addr:#x}, its body at {body}", name());
            self.wanted[i].ever_placed = true;
        }
        self.traps.push(Trap { at, addr, original: original[0], file, body });
        Ok(())
    }

    /// Puts the int3s (back) into the program.
    pub(crate) fn arm(&mut self, pid: Tid) -> Result<(), sdt_sys::Error> {
        if !self.armed && !self.traps.is_empty() {
            self.poke_all(pid, |_| INT3)?;
            self.armed = true;
        }
        Ok(())
    }

    /// Takes the int3s out: the program's memory is its own again.
    pub(crate) fn disarm(&mut self, pid: Tid) -> Result<(), sdt_sys::Error> {
        if self.armed {
            self.poke_all(pid, |t| t.original)?;
            self.armed = false;
        }
        Ok(())
    }

    /// Writes each trap's `byte`. A library's trap that cannot be written is forgotten:
    /// the program unloaded the library (its loader reports that only afterwards).
    fn poke_all(&mut self, pid: Tid, byte: impl Fn(&Trap) -> u8) -> Result<(), sdt_sys::Error> {
        let mut failed = None;
        self.traps.retain(|t| match memory::poke(pid, t.addr, &[byte(t)]) {
            Ok(()) => true,
            Err(e) if t.file != self.exe && !e.is_gone() => {
                log::debug!("{} is no longer mapped at {:#x}: {e}", t.file, t.addr);
                false
            }
            Err(e) => {
                failed.get_or_insert(e);
                true
            }
        });
        failed.map_or(Ok(()), Err)
    }

    /// Writes the program's own bytes over every int3 in the memory of `child`, a process
    /// the program forked (with its own copy of the memory).
    pub(crate) fn restore_bytes(&self, child: Tid) -> Result<(), sdt_sys::Error> {
        self.traps.iter().try_for_each(|t| memory::poke(child, t.addr, &[t.original]))
    }

    /// Says which `--break LIB:FUNC` never found LIB loaded, as the program ends.
    pub(crate) fn tell_never_loaded(&self) {
        for w in self.wanted.iter().filter(|w| !w.ever_placed && !w.told_missing) {
            if let Some(lib) = &w.what.library {
                log::warn!("--break {}: the program never loaded a library {lib}", w.what);
            }
        }
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
    /// `count` (during a freeze it is not: the thread traps again once resumed). The
    /// loader's arrival is followed here (functions of libraries just loaded are placed)
    /// and is then to be stepped over.
    pub(crate) fn arrival(&mut self, tid: Tid, count: bool) -> Result<Arrival, sdt_sys::Error> {
        if !self.armed {
            return Ok(Arrival::NotOurs);
        }
        let mut regs = ptrace::regs(tid)?;
        let Some(trap) = self.traps.iter().find(|t| t.addr + 1 == regs.rip) else {
            return Ok(Arrival::NotOurs);
        };
        let at = trap.at;
        regs.rip -= 1;
        ptrace::set_regs(tid, &regs)?;
        if !count {
            return Ok(Arrival::Later);
        }
        let index = match at {
            At::Function(index) => index,
            At::Loader => {
                if self.loader_consistent(tid)
                    && let Err(e) = self.follow_libraries(tid, false)
                {
                    log::warn!(
                        "following the libraries the program loads: {}",
                        crate::human::error_chain(&e)
                    );
                }
                return Ok(Arrival::Pass);
            }
        };
        let wanted = &mut self.wanted[index];
        wanted.count += 1;
        let hit = wanted.count;
        if !wanted.what.hits.is_empty() && !wanted.what.hits.iter().any(|s| s.contains(hit as i64)) {
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
            attrs: format!("symbol={}", wanted.what.name),
        }))
    }

    /// Whether the loader has finished loading or unloading (it calls `_dl_debug_state`
    /// before and after): as its `r_state` says, or, where it has none, whether a library
    /// is mapped yet.
    fn loader_consistent(&self, tid: Tid) -> bool {
        match self.loader_state {
            Some(addr) => {
                let mut state = [0u8; 4];
                memory::read_exact(tid, addr, &mut state)
                    .is_ok_and(|()| i32::from_le_bytes(state) == RT_CONSISTENT)
            }
            None => sdt_procfs::maps(tid).is_ok_and(|m| {
                let loader = self.traps.iter().find(|t| t.at == At::Loader).map(|t| t.file.as_str());
                !library_files(&m, &self.exe, loader).is_empty()
            }),
        }
    }

    /// Moves `tid`, the program's only thread, past the first instruction of the
    /// function it stands at: emulated, or stepped with the int3s out.
    fn step_alone(&mut self, tid: Tid) -> Result<(), sdt_sys::Error> {
        if self.emulate_prologue(tid)? {
            return Ok(());
        }
        self.disarm(tid)?;
        ptrace::single_step(tid)?;
        let deadline = Instant::now() + ptrace::STEP_TIMEOUT;
        match wait::wait_for_until(tid, deadline)? {
            Some((_, Stop::Signal(libc::SIGTRAP))) => self.arm(tid),
            other => Err(sdt_sys::Error {
                call: "PTRACE_SINGLESTEP",
                tid: tid.raw(),
                source: std::io::Error::other(format!(
                    "the step over the loader's entry ended with {other:?}"
                )),
            }),
        }
    }

    /// Whether thread `tid` stands at one of the int3s' addresses.
    pub(crate) fn at_trap(&self, tid: Tid) -> Result<bool, sdt_sys::Error> {
        let rip = ptrace::regs(tid)?.rip;
        Ok(self.traps.iter().any(|t| t.addr == rip))
    }

    /// Where the body of the function thread `tid` stands at the entry of starts, if a
    /// capture is to be taken there rather than at the entry.
    pub(crate) fn body_ahead(&self, tid: Tid) -> Result<Option<u64>, sdt_sys::Error> {
        // Not a register read more for every other capture.
        if self.traps.iter().all(|t| t.body.is_none()) {
            return Ok(None);
        }
        let rip = ptrace::regs(tid)?.rip;
        Ok(self.traps.iter().find(|t| t.addr == rip).and_then(|t| t.body))
    }

    /// Runs the instruction thread `tid` stands at (at an int3, the one it replaced,
    /// without taking it out) if it is one of a prologue's usual ones: `endbr64`, `push`
    /// of a register, `mov %rsp,%rbp`, or `ret` (the loader's `_dl_debug_state`). False
    /// if it is something else.
    pub(crate) fn emulate_prologue(&self, tid: Tid) -> Result<bool, sdt_sys::Error> {
        let mut regs = ptrace::regs(tid)?;
        let rip = regs.rip;
        let mut code = [0u8; 4];
        memory::read_exact(tid, rip, &mut code)?;
        if let Some(trap) = self.traps.iter().find(|t| t.addr == rip) {
            code[0] = trap.original;
        }
        let Some(step) = Prologue::decode(&code) else { return Ok(false) };
        match step {
            Prologue::Endbr64 => regs.rip = rip + 4,
            Prologue::FramePointer => {
                regs.rbp = regs.rsp;
                regs.rip = rip + 3;
            }
            Prologue::Push { reg, len } => {
                let value = pushed(&regs, reg);
                let rsp = regs.rsp.wrapping_sub(8);
                memory::write(tid, rsp, &value.to_le_bytes())?;
                regs.rsp = rsp;
                regs.rip = rip + len;
            }
            Prologue::Ret => {
                let mut to = [0u8; 8];
                memory::read_exact(tid, regs.rsp, &mut to)?;
                regs.rip = u64::from_le_bytes(to);
                regs.rsp = regs.rsp.wrapping_add(8);
            }
        }
        ptrace::set_regs(tid, &regs)?;
        Ok(true)
    }
}

/// Opens a mapped file to read its symbols (regular files only).
fn open(path: &str) -> Option<std::fs::File> {
    sdt_sys::open_regular(path)
}

/// Whether mapping `m` maps code of a file (the program, a library, the loader).
fn is_library(m: &Mapping) -> bool {
    m.perms.exec && m.path.starts_with('/') && m.inode != 0 && !m.path.ends_with(" (deleted)")
}

/// The mappings of `file`.
fn only_of(mappings: &[Mapping], file: &str) -> Vec<Mapping> {
    mappings.iter().filter(|m| m.path == file).cloned().collect()
}

/// The libraries mapped, besides the program `exe`, in the order the loader loaded them
/// (it maps each below the last), the loader itself last.
fn library_files<'m>(mappings: &'m [Mapping], exe: &str, loader: Option<&str>) -> Vec<&'m str> {
    let mut files: Vec<(&str, u64)> = Vec::new();
    for m in mappings.iter().filter(|m| is_library(m) && m.path != exe) {
        match files.iter_mut().find(|(f, _)| *f == m.path) {
            Some((_, start)) => *start = (*start).min(m.start),
            None => files.push((&m.path, m.start)),
        }
    }
    files.sort_by_key(|&(f, start)| (Some(f) == loader, std::cmp::Reverse(start)));
    files.into_iter().map(|(f, _)| f).collect()
}

/// Whether `--break LIB:…` names the library at `path`: its full path, or its file name
/// or the start of it up to a `.` or `-` (`libz` and `libz.so` name `libz.so.1.3`).
fn names_library(path: &str, lib: &str) -> bool {
    if lib.contains('/') {
        return path == lib;
    }
    let file = path.rsplit('/').next().unwrap_or(path);
    file.strip_prefix(lib).is_some_and(|rest| rest.is_empty() || rest.starts_with(['.', '-']))
}

/// `LIB:FUNC` split at its `:` (one that is not half of a `::`, as in `Klass::method`).
fn split_library(text: &str) -> (Option<&str>, &str) {
    let bytes = text.as_bytes();
    let single = (0..bytes.len())
        .find(|&i| bytes[i] == b':' && bytes.get(i + 1) != Some(&b':') && (i == 0 || bytes[i - 1] != b':'));
    match single {
        Some(i) => (Some(&text[..i]), &text[i + 1..]),
        None => (None, text),
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
    /// Whether the name is a Fortran procedure's (`solver::relax`), which any case names.
    fortran: bool,
}

impl Function {
    fn new(symbol: &str, addr: u64) -> Function {
        // Rust first: its legacy mangling also reads as C++, with the hash as a name.
        if let Ok(rust) = rustc_demangle::try_demangle(symbol) {
            let name = format!("{rust:#}");
            return Function {
                symbol: symbol.to_owned(),
                addr,
                full: name.clone(),
                bare: name,
                fortran: false,
            };
        }
        if let Some(name) = fortran_name(symbol) {
            return Function {
                symbol: symbol.to_owned(),
                addr,
                full: name.clone(),
                bare: name,
                fortran: true,
            };
        }
        let cpp = cpp_demangle::Symbol::new(symbol).ok();
        let demangle = |options: cpp_demangle::DemangleOptions| {
            cpp.as_ref().and_then(|s| s.demangle_with_options(&options).ok())
        };
        let full = demangle(cpp_demangle::DemangleOptions::new()).unwrap_or_else(|| symbol.to_owned());
        let bare = demangle(cpp_demangle::DemangleOptions::new().no_params().no_return_type())
            .unwrap_or_else(|| symbol.to_owned());
        Function { symbol: symbol.to_owned(), addr, full, bare, fortran: false }
    }

    /// Whether `--break name` names this function: by its name without parameters, or,
    /// where `name` has parameters, with them (spaces aside, ` const` optional).
    fn is_named(&self, name: &str) -> bool {
        let squeeze = |s: &str| s.split_whitespace().collect::<String>();
        if name.contains('(') {
            let (want, full) = (squeeze(name), squeeze(&self.full));
            full == want || full.strip_suffix("const") == Some(want.as_str())
        } else if self.fortran {
            let procedure = self.bare.rsplit("::").next().unwrap_or(&self.bare);
            self.bare.eq_ignore_ascii_case(name) || procedure.eq_ignore_ascii_case(name)
        } else {
            squeeze(&self.bare) == squeeze(name)
        }
    }
}

/// The Fortran procedure a gfortran symbol is: `name_` the external procedure `name`,
/// `__mod_MOD_name` the module procedure `mod::name`; `None` for other symbols.
fn fortran_name(symbol: &str) -> Option<String> {
    let lower = |s: &str| {
        s.as_bytes().first().is_some_and(u8::is_ascii_lowercase)
            && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
    };
    if let Some((module, name)) = symbol.strip_prefix("__").and_then(|rest| rest.split_once("_MOD_")) {
        return (lower(module) && lower(name)).then(|| format!("{module}::{name}"));
    }
    let name = symbol.strip_suffix('_')?;
    (lower(name) && !name.ends_with('_')).then(|| name.to_owned())
}

/// The identifier every symbol that can demangle to `name` holds as it is (`bar` of
/// `ns::Foo::bar(int)`), where there is one: only those symbols need demangling.
fn last_identifier(name: &str) -> Option<&str> {
    let base = name.split('(').next()?;
    let last = base.split('<').next()?.rsplit("::").next()?.trim();
    let plain = !last.is_empty() && last.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    (plain && !last.starts_with("operator")).then_some(last)
}

/// The address of function `name` in `file`, mapped as `mappings` (its own) say: a symbol
/// of that name, else the one function whose demangled name it is; `None` if it has none.
fn function_entry(mappings: &[Mapping], file: &str, name: &str) -> Result<Option<u64>, BreakError> {
    if let Some(addr) = sdt_target::symbol_in(mappings, file, name, &open) {
        return Ok(Some(addr));
    }
    let functions = program_functions(file, name)?;
    let symbol = match_function(name, &functions)?;
    Ok(symbol.and_then(|s| sdt_target::symbol_in(mappings, file, s, &open)))
}

/// The functions `file` (the program or a library) defines that could be `name`, from
/// its symbol tables.
fn program_functions(file: &str, name: &str) -> Result<Vec<Function>, BreakError> {
    use sdt_target::symbols::{DYNAMIC, STATIC, find_symbol};
    // Fortran names any case; gfortran's symbols are lower case.
    let must_hold = last_identifier(name).unwrap_or("").to_ascii_lowercase();
    let opened = open(file).ok_or_else(|| BreakError::Open { exe: file.to_owned() })?;
    let cache = object::ReadCache::new(opened);
    object::File::parse(&cache).map_err(|source| BreakError::Symbols { exe: file.to_owned(), source })?;
    let mut functions = Vec::new();
    find_symbol(&cache, &[STATIC, DYNAMIC], |s| {
        let symbol = std::str::from_utf8(s.name).ok().filter(|_| s.function && s.defined)?;
        if symbol.contains(&must_hold) || symbol.to_ascii_lowercase().contains(&must_hold) {
            functions.push(Function::new(symbol, s.address));
        }
        None::<()>
    });
    Ok(functions)
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

/// One of a prologue's usual instructions, which [`SymbolTraps::emulate_prologue`] runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Prologue {
    /// `f3 0f 1e fa`: a no-op outside CET.
    Endbr64,
    /// `push %reg` (`50+r`, or `41 50+r` for r8–r15): `reg` is the register's number
    /// in the instruction set's encoding (0 `rax`, … 7 `rdi`, 8 `r8`, … 15 `r15`).
    Push { reg: u8, len: u64 },
    /// `mov %rsp,%rbp` (`48 89 e5`): the frame pointer set up.
    FramePointer,
    /// `ret` (`c3`): the whole of the loader's `_dl_debug_state`.
    Ret,
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
            [0x48, 0x89, 0xe5, _] => Some(Prologue::FramePointer),
            [0xc3, ..] => Some(Prologue::Ret),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn breaks_parse() {
        assert_eq!(
            SymbolBreak::parse("solve").unwrap(),
            SymbolBreak { name: "solve".into(), ..Default::default() }
        );
        let b = SymbolBreak::parse("libz:deflate@2").unwrap();
        assert_eq!(
            (b.library.as_deref(), b.name.as_str(), b.to_string()),
            (Some("libz"), "deflate", "libz:deflate".into())
        );
        let b = SymbolBreak::parse("libk.so.1:Klass::method").unwrap();
        assert_eq!((b.library.as_deref(), b.name.as_str()), (Some("libk.so.1"), "Klass::method"));
        let b = SymbolBreak::parse("ns::Klass::method(int)").unwrap();
        assert_eq!((b.library, b.name.as_str()), (None, "ns::Klass::method(int)"));
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
        assert_eq!(
            refused(":deflate"),
            "--break :deflate: no library before the `:` (use --break LIB:FUNC, e.g. libz:deflate)"
        );
        assert!(matches!(SymbolBreak::parse("libz:"), Err(BreakError::NoFunction { .. })));
    }

    #[test]
    fn libraries_are_named_by_path_or_the_start_of_their_file_name() {
        let z = "/usr/lib/x86_64-linux-gnu/libz.so.1.3";
        for lib in ["libz", "libz.so", "libz.so.1", "libz.so.1.3", z] {
            assert!(names_library(z, lib), "{lib}");
        }
        for lib in ["lib", "libzs", "z", "libz.so.2", "/lib/libz.so.1.3"] {
            assert!(!names_library(z, lib), "{lib}");
        }
        assert!(names_library("/opt/lib/libfoo-2.0.so", "libfoo"));
    }

    /// The loader maps each library below the one before; it is itself searched last.
    #[test]
    fn libraries_are_searched_in_their_load_order() {
        let line = |l: &str| sdt_procfs::parse_maps_line(l).unwrap();
        let mappings = [
            line("1000-2000 r-xp 00000000 08:01 5 /bin/prog"),
            line("7f0000000000-7f0000001000 r--p 00000000 08:01 7 /lib/libm.so.6"),
            line("7f0000001000-7f0000002000 r-xp 00001000 08:01 7 /lib/libm.so.6"),
            line("7f1000000000-7f1000001000 r-xp 00000000 08:01 6 /lib/libc.so.6"),
            line("7f2000000000-7f2000001000 r-xp 00000000 08:01 8 /lib/ld-linux-x86-64.so.2"),
            line("7f3000000000-7f3000001000 r-xp 00000000 00:01 9 /memfd:jit (deleted)"),
            line("7f4000000000-7f4000001000 rw-p 00000000 08:01 10 /data/table.bin"),
        ];
        let order = library_files(&mappings, "/bin/prog", Some("/lib/ld-linux-x86-64.so.2"));
        assert_eq!(order, ["/lib/libc.so.6", "/lib/libm.so.6", "/lib/ld-linux-x86-64.so.2"]);
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
        // gfortran's: an external procedure, module procedures, the main program.
        let fortran: Vec<Function> = [
            ("report_", 0x100),
            ("__solver_MOD_relax", 0x200),
            ("__grid_MOD_relax", 0x300),
            ("MAIN__", 0x400),
        ]
        .into_iter()
        .map(|(s, a)| Function::new(s, a))
        .collect();
        let found = |name: &str| match_function(name, &fortran).unwrap();
        assert_eq!(found("report"), Some("report_"));
        assert_eq!(found("Report"), Some("report_"));
        assert_eq!(found("solver::relax"), Some("__solver_MOD_relax"));
        assert_eq!(found("GRID::Relax"), Some("__grid_MOD_relax"));
        assert_eq!(found("MAIN_"), None);
        assert_eq!(
            match_function("relax", &fortran).unwrap_err().to_string(),
            "--break relax is ambiguous: the program has 2 functions of that name: grid::relax, solver::relax; \
             name one as listed, e.g. --break 'grid::relax'"
        );
        assert_eq!(fortran_name("foo__"), None);
        assert_eq!(fortran_name("_start"), None);
        assert_eq!(found("Foo::bar(long)"), None);
        assert_eq!(
            match_function("Foo::bar", &functions).unwrap_err().to_string(),
            "--break Foo::bar is ambiguous: the program has 2 functions of that name: Foo::bar(double), \
             Foo::bar(int); name one as listed, e.g. --break 'Foo::bar(double)'"
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
        assert_eq!(Prologue::decode(&[0x48, 0x89, 0xe5, 0x89]), Some(Prologue::FramePointer));
        assert_eq!(Prologue::decode(&[0x48, 0x89, 0xe6, 0x89]), None, "mov %rsp,%rsi");
        assert_eq!(Prologue::decode(&[0xc3, 0x66, 0x66, 0x2e]), Some(Prologue::Ret));
    }
}
