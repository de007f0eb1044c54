//! `sdt diff`: what changed between two snapshots, as text or JSON.

use anyhow::{Context, Result};
use sdt_daemon::human::{self, escape};
use std::ops::Range;

use sdt_gdb::diff::{ChangedRange, Location, SnapshotDiff, ThreadChange};
use sdt_gdb::vars::Change;
use serde_json::{Value, json};

use crate::cli::DiffOpt;
use crate::select;

pub fn diff(opt: DiffOpt) -> Result<()> {
    let (run_a, a) = select::open_snapshot(&opt.store, &opt.run, Some(&opt.a))?;
    let (run_b, b) = select::open_snapshot(&opt.store, &opt.run, Some(&opt.b))?;
    let (name_a, name_b) = (qualified(&run_a, &a), qualified(&run_b, &b));
    let d = sdt_gdb::diff::diff(&a, &b).with_context(|| format!("comparing {name_a} with {name_b}"))?;
    if let Some(why) = &d.variables_missing {
        log::warn!("variables are not compared: {}", human::error_chain(why));
    }
    if opt.json {
        println!("{}", serde_json::to_string_pretty(&to_json(&d, &name_a, &name_b))?);
    } else {
        print_text(&d, &name_a, &name_b, opt.all);
    }
    Ok(())
}

/// `RUN:SNAP`; `runRUN:SNAP` for a job's rank, where `N:` would name rank N.
fn qualified(run: &sdt_store::Run, snap: &sdt_store::Snapshot) -> String {
    let prefix = if run.info().job.is_some() { "run" } else { "" };
    format!("{prefix}{}:{}", run.id(), snap.name())
}

fn to_json(d: &SnapshotDiff, a: &str, b: &str) -> Value {
    let ranges: Vec<Value> =
        d.ranges.iter().map(|r| json!({"start": r.start, "end": r.end, "mapping": r.mapping})).collect();
    let threads: Vec<Value> = d
        .threads
        .iter()
        .map(|t| {
            let at = |l: &Option<Location>| l.as_ref().map(|l| json!({"pc": l.pc, "function": l.function}));
            json!({"tid": t.tid, "change": thread_change(t), "old": at(&t.old), "new": at(&t.new)})
        })
        .collect();
    json!({
        "a": a,
        "b": b,
        "variables": d.variables.iter().map(change_json).collect::<Vec<_>>(),
        "ranges": ranges,
        "threads": threads,
    })
}

/// A changed value as JSON: `name`, `old`, `new`, and `thread` and `more` where they
/// apply. `sdt compare` prints the same.
pub fn change_json(c: &Change) -> Value {
    let mut v = json!({"name": c.name, "old": c.old, "new": c.new});
    if let Some(tid) = c.thread {
        v["thread"] = tid.into();
    }
    if c.more > 0 {
        v["more"] = c.more.into();
    }
    v
}

/// A changed value as a line of text: `name: old -> new`. `sdt compare` prints the same.
pub fn change_text(c: &Change) -> String {
    let thread = c.thread.map(|t| format!(" [thread {t}]")).unwrap_or_default();
    let more = if c.more > 0 { format!(" (and {} more elements)", c.more) } else { String::new() };
    format!("{}{thread}: {} -> {}{more}", escape(&c.name), c.old, c.new)
}

fn thread_change(t: &ThreadChange) -> &'static str {
    match (&t.old, &t.new) {
        (None, _) => "appeared",
        (_, None) => "ended",
        _ => "moved",
    }
}

/// Changed ranges listed one by one in text, unless `--all` asks for every one.
const RANGES_LISTED: usize = 32;

fn print_text(d: &SnapshotDiff, a: &str, b: &str, all: bool) {
    println!("{a} -> {b}");
    println!("variables ({} changed):", d.variables.len());
    for c in &d.variables {
        println!("  {}", change_text(c));
    }
    print_ranges(&d.ranges, all);
    println!("threads ({} changed):", d.threads.len());
    let at = |l: &Location| match &l.function {
        Some(f) => format!("{} ({:#x})", escape(f), l.pc),
        None => format!("{:#x}", l.pc),
    };
    for t in &d.threads {
        match (&t.old, &t.new) {
            (Some(old), Some(new)) => println!("  {}: {} -> {}", t.tid, at(old), at(new)),
            (None, Some(new)) => println!("  {}: appeared at {}", t.tid, at(new)),
            (Some(old), None) => println!("  {}: ended (was at {})", t.tid, at(old)),
            (None, None) => {}
        }
    }
}

/// Other changed memory: every range when they are few or `all` asks; else the changes
/// summed by mapping, most bytes first, and the largest ranges in address order.
fn print_ranges(ranges: &[ChangedRange], all: bool) {
    let bytes: u64 = ranges.iter().map(|r| r.end - r.start).sum();
    let line = |r: &ChangedRange| {
        format!("  {:#x}-{:#x} {:>10}  {}", r.start, r.end, human::bytes(r.end - r.start), escape(&r.mapping))
    };
    if all || ranges.len() <= RANGES_LISTED {
        println!("other memory ({} ranges, {}):", ranges.len(), human::bytes(bytes));
        ranges.iter().for_each(|r| println!("{}", line(r)));
        return;
    }
    println!("other memory ({} ranges, {}), by mapping:", ranges.len(), human::bytes(bytes));
    for m in by_mapping(ranges) {
        let at = m.range.map_or_else(String::new, |r| format!("{:#x}-{:#x}", r.start, r.end));
        println!("  {at:<29} {:>8} ranges {:>10}  {}", m.ranges, human::bytes(m.bytes), escape(m.label));
    }
    let mut largest: Vec<&ChangedRange> = ranges.iter().collect();
    largest.sort_by_key(|r| std::cmp::Reverse(r.end - r.start));
    largest.truncate(RANGES_LISTED);
    largest.sort_by_key(|r| r.start);
    println!("the {RANGES_LISTED} largest ranges:");
    largest.iter().for_each(|r| println!("{}", line(r)));
    println!(
        "  … and {} more (`--all` lists every range, `--json` gives them to a program)",
        ranges.len() - RANGES_LISTED
    );
}

/// The changes in one mapping.
struct MappingChanges<'a> {
    label: &'a str,
    range: Option<Range<u64>>,
    ranges: usize,
    bytes: u64,
}

/// `ranges` (in address order) summed by the mapping they lie in, most bytes first.
fn by_mapping(ranges: &[ChangedRange]) -> Vec<MappingChanges<'_>> {
    let mut out: Vec<MappingChanges> = Vec::new();
    for r in ranges {
        match out.last_mut() {
            Some(m) if m.range == r.mapping_range && m.label == r.mapping => {
                m.ranges += 1;
                m.bytes += r.end - r.start;
            }
            _ => out.push(MappingChanges {
                label: &r.mapping,
                range: r.mapping_range.clone(),
                ranges: 1,
                bytes: r.end - r.start,
            }),
        }
    }
    out.sort_by_key(|m| std::cmp::Reverse(m.bytes));
    out
}
