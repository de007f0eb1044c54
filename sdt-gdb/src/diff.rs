//! What changed between two snapshots: variables by name ([`vars`](crate::vars)), the
//! other bytes that changed as address ranges with the mapping they lie in, and threads
//! that appeared, ended or moved.
//!
//! ```no_run
//! use sdt_store::Store;
//!
//! let store = Store::open(".sdt".as_ref())?;
//! let run = store.open_run(&store.latest_run()?)?;
//! let diff = sdt_gdb::diff::diff(&run.open_snapshot("S1")?, &run.open_snapshot("S2")?)?;
//! for r in &diff.ranges {
//!     println!("{:#x}-{:#x} in {}", r.start, r.end, r.mapping);
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Memory is compared where the store holds a page of either snapshot and both map it
//! readable; elsewhere both read as zeros or as the same file. Addresses are compared as
//! they are, so ranges between runs of a program loaded at other addresses mean little.

use std::ops::Range;

use sdt_store::{Content, PAGE_SIZE, SnapshotMeta, SnapshotSource};

use crate::vars::{Change, Program, Symbolizer, Tolerance, VarsError};

/// Differing bytes this close together are one range.
const RANGE_GAP: u64 = 8;

/// What changed from a first snapshot to a second.
#[derive(Debug)]
pub struct SnapshotDiff {
    /// Variables whose values differ, by leaf; empty with `variables_missing` set when
    /// the program's DWARF could not be read.
    pub variables: Vec<Change>,
    /// Why variables are not compared, if they are not.
    pub variables_missing: Option<VarsError>,
    /// Other changed bytes, ascending.
    pub ranges: Vec<ChangedRange>,
    /// Threads that appeared, ended or moved, by thread id.
    pub threads: Vec<ThreadChange>,
}

/// Changed bytes outside the program's variables.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChangedRange {
    /// First changed address.
    pub start: u64,
    /// One past the last.
    pub end: u64,
    /// The mapping it lies in (in the second snapshot): `heap`, `stack of thread 123`,
    /// a file's path, `anonymous`.
    pub mapping: String,
    /// That mapping's addresses; `None` where no mapping holds the range.
    pub mapping_range: Option<Range<u64>>,
}

/// A thread's change between the snapshots.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThreadChange {
    /// Its id.
    pub tid: i32,
    /// Where it was in the first snapshot; `None` if it appeared.
    pub old: Option<Location>,
    /// Where it is in the second; `None` if it ended.
    pub new: Option<Location>,
}

/// A thread's instruction pointer and the function it lies in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Location {
    /// The instruction pointer.
    pub pc: u64,
    /// `name+0xOFF`, if a symbol covers it.
    pub function: Option<String>,
}

/// Compares snapshot `a` with `b`.
pub fn diff(a: &impl SnapshotSource, b: &impl SnapshotSource) -> Result<SnapshotDiff, sdt_store::Error> {
    let (variables, variables_missing, known) = match Program::load(a) {
        Ok(program) => match program.changes(a, b, None, &Tolerance::EXACT) {
            Ok(changes) => (changes, None, variable_ranges(&program, b)),
            Err(e) => (Vec::new(), Some(e), Vec::new()),
        },
        Err(e) => (Vec::new(), Some(e), Vec::new()),
    };
    let ranges = changed_bytes(a, b)?
        .into_iter()
        .flat_map(|r| subtract(r, &known))
        .map(|r| {
            let (mapping, mapping_range) = mapping_of(b.meta(), r.start);
            ChangedRange { mapping, mapping_range, start: r.start, end: r.end }
        })
        .collect();
    Ok(SnapshotDiff { variables, variables_missing, ranges, threads: thread_changes(a, b) })
}

/// The bytes of every variable of `program` in `snap`, sorted.
fn variable_ranges(program: &Program, snap: &impl SnapshotSource) -> Vec<Range<u64>> {
    let mut ranges: Vec<Range<u64>> = program
        .variables()
        .iter()
        .flat_map(|v| {
            program.addresses(snap, v).into_iter().map(|(_, at)| at..at.saturating_add(v.ty.size()))
        })
        .collect();
    ranges.sort_by_key(|r| r.start);
    ranges
}

/// `r` less the ranges of `known` (sorted by start).
fn subtract(r: Range<u64>, known: &[Range<u64>]) -> Vec<Range<u64>> {
    let mut out = Vec::new();
    let mut at = r.start;
    for k in known.iter().filter(|k| k.end > r.start && k.start < r.end) {
        if k.start > at {
            out.push(at..k.start);
        }
        at = at.max(k.end);
    }
    if at < r.end {
        out.push(at..r.end);
    }
    out
}

/// The byte ranges whose contents differ between `a` and `b`, among the pages the store
/// holds for either and both map readable; differing bytes [`RANGE_GAP`] apart or
/// closer make one range.
fn changed_bytes(
    a: &impl SnapshotSource,
    b: &impl SnapshotSource,
) -> Result<Vec<Range<u64>>, sdt_store::Error> {
    let mut pages: Vec<Range<u64>> = a.stored_ranges().into_iter().chain(b.stored_ranges()).collect();
    pages.sort_by_key(|r| r.start);
    let mut out: Vec<Range<u64>> = Vec::new();
    let (mut pa, mut pb) = (vec![0; PAGE_SIZE as usize], vec![0; PAGE_SIZE as usize]);
    let mut done = 0;
    for r in pages {
        let mut page = r.start.max(done);
        while page < r.end {
            let readable = |m: &SnapshotMeta| {
                m.mappings.iter().any(|m| m.contains(page) && !matches!(m.content, Content::Unreadable))
            };
            if readable(a.meta()) && readable(b.meta()) {
                a.read(page, &mut pa)?;
                b.read(page, &mut pb)?;
                let mut i = 0;
                while i < pa.len() {
                    if pa[i] == pb[i] {
                        i += 1;
                        continue;
                    }
                    let start = page + i as u64;
                    while i < pa.len() && pa[i] != pb[i] {
                        i += 1;
                    }
                    let end = page + i as u64;
                    match out.last_mut() {
                        Some(last) if start - last.end <= RANGE_GAP => last.end = end,
                        _ => out.push(start..end),
                    }
                }
            }
            page = page.saturating_add(PAGE_SIZE);
            if page == u64::MAX {
                break;
            }
        }
        done = done.max(r.end);
    }
    Ok(out)
}

/// What `addr` lies in, in `meta`: the heap, a thread's stack, a file, or anonymous
/// memory; and that mapping's addresses.
fn mapping_of(meta: &SnapshotMeta, addr: u64) -> (String, Option<Range<u64>>) {
    let Some(m) = meta.mappings.iter().find(|m| m.contains(addr)) else { return ("unmapped".into(), None) };
    let label = if m.path == "[heap]" {
        "heap".into()
    } else if let Some(t) = meta.threads.iter().find(|t| m.contains(t.sp())) {
        format!("stack of thread {}", t.tid)
    } else if m.path.is_empty() {
        "anonymous".into()
    } else {
        m.path.clone()
    };
    (label, Some(m.start..m.end))
}

/// Threads in only one of the snapshots, and those whose pc changed.
fn thread_changes(a: &impl SnapshotSource, b: &impl SnapshotSource) -> Vec<ThreadChange> {
    let mut symbols = (Symbolizer::default(), Symbolizer::default());
    let mut out = Vec::new();
    let mut tids: Vec<i32> = a.meta().threads.iter().chain(&b.meta().threads).map(|t| t.tid).collect();
    tids.sort_unstable();
    tids.dedup();
    for tid in tids {
        let pc = |m: &SnapshotMeta| m.threads.iter().find(|t| t.tid == tid).map(|t| t.pc());
        let (old, new) = (pc(a.meta()), pc(b.meta()));
        if old == new {
            continue;
        }
        out.push(ThreadChange {
            tid,
            old: old.map(|pc| Location { pc, function: symbols.0.function_at(a, pc) }),
            new: new.map(|pc| Location { pc, function: symbols.1.function_at(b, pc) }),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_ranges_are_cut_out() {
        assert_eq!(subtract(10..20, &[0..5, 12..14, 18..30]), [10..12, 14..18]);
        let (whole, none) = (10..20, Vec::new());
        assert_eq!(subtract(whole.clone(), &none), std::iter::once(whole.clone()).collect::<Vec<_>>());
        assert!(subtract(whole, std::slice::from_ref(&(5..25))).is_empty());
    }
}
