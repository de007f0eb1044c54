//! `sdt ls` (a run's snapshots) and `sdt runs` (the store's runs). Both stream: each
//! snapshot's metadata is read, printed and dropped, so a run of a million snapshots
//! lists in the memory one takes.

use std::io::Write;

use anyhow::Result;
use sdt_daemon::human;
use sdt_gdb::arrivals::Arrival;
use sdt_store::{Run, RunInfo, RunStatus, SnapshotEntry, SnapshotMeta, Trigger};
use serde_json::{Value, json};

use crate::cli::{LsOpt, RunArgs, RunsOpt};
use crate::job::{self, Job};
use crate::select;

/// One snapshot as `ls` sees it.
enum Row {
    Ok { meta: Box<SnapshotMeta>, raw: bool, file_bytes: u64 },
    Broken { name: String, why: String },
}

impl Row {
    /// Reads the metadata of the snapshot `entry` lists.
    fn read(run: &Run, entry: &SnapshotEntry) -> Row {
        if !entry.complete {
            return Row::Broken {
                name: entry.name.clone(),
                why: "incomplete: its capture or compaction did not finish".into(),
            };
        }
        match run.read_meta(entry.seq) {
            Ok((meta, raw)) => Row::Ok { meta: Box::new(meta), raw, file_bytes: entry.file_bytes },
            Err(e) => Row::Broken { name: entry.name.clone(), why: human::error_chain(&e) },
        }
    }
}

/// What a listing adds up as it goes, for the line after a run's table.
#[derive(Default)]
struct Totals {
    listed: usize,
    /// Bytes of the compacted snapshots, and what they would take stored whole.
    stored: u64,
    full: u64,
    /// Snapshots not compacted yet, and the bytes of their raw files.
    raw: usize,
    raw_bytes: u64,
    modes: Vec<String>,
}

impl Totals {
    fn add(&mut self, row: &Row) {
        self.listed += 1;
        if let Row::Ok { meta, raw, file_bytes } = row {
            if *raw {
                self.raw += 1;
                self.raw_bytes += file_bytes;
            } else {
                self.stored += file_bytes;
                self.full += meta.stats.full_bytes;
            }
            if !self.modes.contains(&meta.stats.mode) {
                self.modes.push(meta.stats.mode.clone());
            }
        }
    }
}

/// The snapshots of `run` that `opt` asks for, as rows, in order, each read as it is
/// reached; and how many snapshots the run has.
fn rows<'a>(run: &'a Run, opt: &LsOpt) -> Result<(usize, impl Iterator<Item = Result<Row>> + 'a)> {
    let snapshots = run.snapshots()?;
    let total = snapshots.len();
    let skip = opt.last.map_or(0, |last| total.saturating_sub(last));
    let take = opt.first.unwrap_or(usize::MAX);
    Ok((total, snapshots.skip(skip).take(take).map(move |entry| Ok(Row::read(run, &entry?)))))
}

/// Width of the NAME column: as wide as the run's longest name is likely to be.
fn name_width(run: &Run, total: usize) -> usize {
    let last = run.info().snapshot_name(u32::try_from(total).unwrap_or(u32::MAX)).len();
    let end = run.info().parent.as_ref().and_then(|p| p.to.as_ref()).map_or(0, |to| to.len() + 4);
    last.max(end).max(6)
}

/// The runs one section of a listing shows: a run's refinement tree, root first; for a
/// job, one section per rank.
struct Section {
    /// The rank and its host, for a job's rank.
    rank: Option<(u32, String)>,
    tree: Vec<Run>,
}

/// The run asked for and the rest of its refinement tree: the root first, each
/// refinement after the run it refines, indented by its depth. When the run is a job's
/// rank (or refines one), the whole job: a line for the job, then each rank's tree.
pub fn ls(opt: LsOpt) -> Result<()> {
    let chosen = RunArgs { run: opt.run.run.or(opt.run_id) };
    let (store, run) = select::open_run(&opt.store, &chosen)?;
    let run_id = run.id();
    let job = store.job_of(run_id)?;
    let sections = match &job {
        None => vec![Section { rank: None, tree: tree_of(&store, run)? }],
        Some(job) => {
            let mut sections = Vec::new();
            for (rank, id) in store.job_ranks(&job.id)? {
                let run = store.open_run(&id)?;
                let host = run.info().job.as_ref().map_or_else(String::new, |m| m.host.clone());
                sections.push(Section { rank: Some((rank, host)), tree: tree_of(&store, run)? });
            }
            sections
        }
    };
    let mut out = std::io::stdout().lock();
    if opt.json {
        // One element at a time: `[`, elements separated by commas, `]`.
        writeln!(out, "[")?;
        let mut first = true;
        for section in &sections {
            for run in &section.tree {
                for row in rows(run, &opt)?.1 {
                    let mut v = row_json(&row?);
                    let object = v.as_object_mut().unwrap();
                    object.insert("run".into(), json!(run.id().0));
                    if let Some((rank, _)) = &section.rank {
                        object.insert("rank".into(), json!(rank));
                    }
                    let sep = if first { "" } else { ",\n" };
                    first = false;
                    write!(out, "{sep}{}", serde_json::to_string_pretty(&v)?)?;
                }
            }
        }
        writeln!(out, "\n]")?;
        return Ok(());
    }
    if let Some(job) = &job {
        writeln!(out, "{}", human::escape(&job_line(&job.id, job.size, &sections)))?;
    }
    for (s, section) in sections.iter().enumerate() {
        for (i, run) in section.tree.iter().enumerate() {
            let indent = "  ".repeat(depth(run, &section.tree));
            if i > 0 || s > 0 || job.is_some() {
                writeln!(out)?;
            }
            let line = match (&section.rank, i) {
                (Some((rank, host)), 0) => format!("rank {rank} on {host}: {}", run_line(run)?),
                _ => run_line(run)?,
            };
            writeln!(out, "{indent}{}", human::escape(&line))?;
            let mut totals = Totals::default();
            let (total, rows) = rows(run, &opt)?;
            let width = name_width(run, total);
            for row in rows {
                let row = row?;
                if totals.listed == 0 {
                    print_header(&mut out, &indent, width)?;
                }
                print_row(&mut out, &row, &indent, width)?;
                totals.add(&row);
            }
            if totals.listed > 0 {
                writeln!(out, "{indent}{}", totals_line(&totals))?;
            }
        }
    }
    if job.is_some()
        && let Some(job) = Job::of(&store, run_id)?
    {
        print_global_snapshots(&mut out, &job)?;
    }
    Ok(())
}

/// The job's global snapshots, each with its ranks' snapshots and what the history says
/// of the cut; nothing when there are none.
fn print_global_snapshots(out: &mut impl Write, job: &Job) -> Result<()> {
    let checked = job::history_with_clocks(job);
    let globals = job.global_snapshots(checked.as_ref().ok().map(|(h, c)| (h, c)))?;
    if globals.is_empty() {
        return Ok(());
    }
    writeln!(out, "\nglobal snapshots (every rank's snapshot at one breakpoint arrival):")?;
    for g in &globals {
        let Arrival { level, class, id, hit } = g.arrival;
        let verdict = match &checked {
            Ok(_) => job::verdict_text(g.verdict.as_ref()),
            Err(e) => format!("not checked: {e:#}"),
        };
        let names: Vec<String> = g.members.iter().map(|(rank, name, _)| format!("{rank}:{name}")).collect();
        writeln!(
            out,
            "{}",
            human::escape(&format!(
                "{:<4} bp {level}/{class}/{id} hit {hit:<4} {:<24} {verdict}",
                g.name,
                names.join(" ")
            ))
        )?;
    }
    Ok(())
}

/// `run`'s refinement tree, or `run` alone if the store lists no tree for it.
fn tree_of(store: &sdt_store::Store, run: Run) -> Result<Vec<Run>> {
    let tree = store.tree(run.id())?;
    Ok(if tree.is_empty() { vec![run] } else { tree })
}

/// `job 1142685697: 3 ranks on sdt-h1, sdt-h2, sdt-h3`: the job, how many of its ranks
/// the store holds (`2 of 3 ranks (missing: 1)`), and their hosts in rank order.
fn job_line(id: &str, size: u32, sections: &[Section]) -> String {
    let ranks: Vec<u32> = sections.iter().filter_map(|s| s.rank.as_ref().map(|r| r.0)).collect();
    let mut hosts: Vec<&str> = Vec::new();
    for (_, host) in sections.iter().filter_map(|s| s.rank.as_ref()) {
        if !hosts.contains(&host.as_str()) {
            hosts.push(host);
        }
    }
    let missing: Vec<String> = (0..size).filter(|r| !ranks.contains(r)).map(|r| r.to_string()).collect();
    let count = match missing.len() {
        0 => format!("{size} rank{}", if size == 1 { "" } else { "s" }),
        _ => format!("{} of {size} ranks (missing: {})", ranks.len(), missing.join(", ")),
    };
    format!("job {id}: {count} on {}", hosts.join(", "))
}

/// How many refinements deep `run` is in `tree`.
fn depth(run: &Run, tree: &[Run]) -> usize {
    let mut depth = 0;
    let mut at = run.info().parent.as_ref().map(|p| p.run);
    while let Some(parent) = at.filter(|_| depth < tree.len()) {
        depth += 1;
        at = tree.iter().find(|r| r.id() == parent).and_then(|r| r.info().parent.as_ref()).map(|p| p.run);
    }
    depth
}

fn print_header(out: &mut impl Write, indent: &str, width: usize) -> std::io::Result<()> {
    writeln!(
        out,
        "{indent}{:<width$} {:<14} {:>4} {:<20} {:>7} {:>9} {:>4} {:>9} {:>15} {:>10}",
        "NAME", "TRIGGER", "HIT", "ATTRS", "TID", "TIME", "THR", "PAUSE", "PAGES STORED", "BYTES"
    )
}

fn print_row(out: &mut impl Write, row: &Row, indent: &str, width: usize) -> std::io::Result<()> {
    let (meta, raw, file_bytes) = match row {
        Row::Ok { meta, raw, file_bytes } => (meta, *raw, *file_bytes),
        Row::Broken { name, why } => return writeln!(out, "{indent}{name:<width$} ({})", human::escape(why)),
    };
    let (trigger, hit, attrs, tid) = match &meta.trigger {
        Trigger::Breakpoint { level, class, id, attrs, hit, tid, .. } => {
            (format!("bp {level}/{class}/{id}"), hit.to_string(), attrs.clone(), tid.to_string())
        }
        Trigger::Timer => ("timer".into(), "-".into(), "-".into(), "-".into()),
        Trigger::Signal { signo, tid, .. } => {
            let fault =
                meta.trigger.fault_addr().map_or_else(|| "-".into(), |addr| format!("addr={addr:#x}"));
            (sdt_store::signal_name(*signo), "-".into(), fault, tid.to_string())
        }
    };
    let pages = if raw {
        // Diffed at compaction: until then, what the capture copied.
        format!("raw {}", meta.stats.copied_bytes / sdt_store::PAGE_SIZE)
    } else {
        format!("{}/{}", meta.stats.pages_stored, meta.stats.pages)
    };
    writeln!(
        out,
        "{indent}{:<width$} {:<14} {:>4} {:<20} {:>7} {:>9} {:>4} {:>9} {:>15} {:>10}",
        meta.name,
        trigger,
        hit,
        truncate(&human::escape(&attrs), 20),
        tid,
        format!("+{:.3}s", meta.time.since_start_ns as f64 / 1e9),
        meta.threads.len(),
        human::duration_ns(meta.stats.pause_ns),
        pages,
        human::bytes(file_bytes),
    )
}

fn truncate(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        text.to_owned()
    } else {
        text.chars().take(width - 1).chain(std::iter::once('…')).collect()
    }
}

fn row_json(row: &Row) -> Value {
    match row {
        Row::Broken { name, why } => json!({ "name": name, "complete": false, "error": why }),
        Row::Ok { meta, raw, file_bytes } => {
            let mut v = json!({
                "name": meta.name,
                "complete": true,
                "raw": raw,
                "time": human::utc_timestamp(meta.time.wall_ns),
                "since_start_ms": meta.time.since_start_ns as f64 / 1e6,
                "threads": meta.threads.len(),
                "pages": meta.stats.pages,
                "pages_stored": meta.stats.pages_stored,
                "stored_bytes": file_bytes,
                "full_bytes": meta.stats.full_bytes,
                "pause_us": meta.stats.pause_ns / 1000,
                "deviation_us": meta.stats.deviation_ns / 1000,
                "wait_us": meta.stats.wait_ns / 1000,
                "copied_bytes": meta.stats.copied_bytes,
                "copy_us": meta.stats.copy_ns / 1000,
                "mode": meta.stats.mode,
            });
            let trigger = match &meta.trigger {
                Trigger::Breakpoint { level, class, id, multiple_mark, attrs, hit, tid } => json!({
                    "trigger": "breakpoint", "level": level, "class": class, "id": id,
                    "multiple_mark": multiple_mark, "attrs": attrs, "hit": hit, "tid": tid,
                }),
                Trigger::Timer => json!({
                    "trigger": "timer", "level": null, "class": null, "id": null,
                    "multiple_mark": null, "attrs": null, "hit": null, "tid": null,
                }),
                Trigger::Signal { signo, code, tid, .. } => json!({
                    "trigger": "signal", "level": null, "class": null, "id": null,
                    "multiple_mark": null, "attrs": null, "hit": null, "tid": tid,
                    "signal": sdt_store::signal_name(*signo), "signo": signo, "si_code": code,
                    "fault_addr": meta.trigger.fault_addr(),
                }),
            };
            v.as_object_mut().unwrap().extend(trigger.as_object().unwrap().clone());
            v
        }
    }
}

/// A run's snapshot files: how many, how many of them raw, and their bytes.
#[derive(Clone, Copy)]
struct SnapshotFiles {
    count: usize,
    raw: usize,
    bytes: u64,
}

fn snapshot_files(run: &Run) -> Result<SnapshotFiles> {
    let mut files = SnapshotFiles { count: 0, raw: 0, bytes: 0 };
    for entry in run.snapshots()? {
        let entry = entry?;
        files.count += 1;
        files.raw += usize::from(entry.raw);
        files.bytes += entry.file_bytes;
    }
    Ok(files)
}

/// `run 3: ./prog 4 — exited 0, 10 snapshots, 1.2 MiB`: what the run is, from its
/// `run.json` and its directory, without reading a snapshot.
pub(crate) fn run_line(run: &Run) -> Result<String> {
    Ok(describe_run(run, &snapshot_files(run)?))
}

/// [`run_line`] of `run`, whose snapshot files are `files`.
fn describe_run(run: &Run, files: &SnapshotFiles) -> String {
    let info = run.info();
    let SnapshotFiles { count, raw, bytes } = *files;
    let what = match &info.parent {
        None => info.command.join(" "),
        Some(p) => match &p.to {
            _ if p.edit.is_some() => format!("edits {} of run {}", p.from, p.run),
            Some(to) => format!("refines {}..{to} of run {}", p.from, p.run),
            None => format!("resumes {} of run {}", p.from, p.run),
        },
    };
    let raw_note = match raw {
        0 => String::new(),
        n if run.is_held() => format!(" ({n} raw, being compacted)"),
        n => format!(" ({n} raw: `sdt compact --run {}` compacts them)", info.id),
    };
    format!(
        "run {}: {what} — {}, {count} snapshot{}, {}{raw_note}",
        info.id,
        status_text(run),
        if count == 1 { "" } else { "s" },
        human::bytes(bytes),
    )
}

/// `10 listed: 57.8 KiB stored (compacted 2.9% of full), full 1.9 MiB, uffd-wp`: the line
/// after a run's table, over the rows listed; with `…; 3 raw, 1.2 GiB as captured` for
/// those not compacted yet.
fn totals_line(t: &Totals) -> String {
    let compacted = if t.full > 0 {
        format!(" (compacted {:.1}% of full)", 100.0 * t.stored as f64 / t.full as f64)
    } else {
        String::new()
    };
    let raw = match t.raw {
        0 => String::new(),
        n => format!("; {n} raw, {} as captured", human::bytes(t.raw_bytes)),
    };
    format!(
        "{} listed: {} stored{compacted}, full {}{raw}{}",
        t.listed,
        human::bytes(t.stored),
        human::bytes(t.full),
        if t.modes.is_empty() { String::new() } else { format!(", {}", t.modes.join("+")) }
    )
}

fn status_text(run: &Run) -> String {
    let info: &RunInfo = run.info();
    match &info.status {
        RunStatus::Running if run.is_held() => "running".into(),
        RunStatus::Running => format!(
            "ended abnormally: sdt (pid {}) died before the program ended; every snapshot it committed is here",
            info.sdt_pid
        ),
        RunStatus::Exited { code } => format!("exited {code}"),
        RunStatus::Signaled { signal } => format!("killed by signal {signal}"),
        RunStatus::Stopped { reason } => format!("stopped: {reason}"),
        RunStatus::Detached { pid } => format!("attached to process {pid}, let go (it ran on)"),
        RunStatus::Failed { message } => format!("failed: {message}"),
    }
}

pub fn runs(opt: RunsOpt) -> Result<()> {
    let store = select::open_store(&opt.store)?;
    let ids = store.run_ids()?;
    if ids.is_empty() {
        println!("no runs in {}", store.root().display());
    }
    let mut stored = 0;
    for id in &ids {
        match store.open_run(id) {
            Ok(run) => {
                let files = snapshot_files(&run)?;
                println!(
                    "{}  started {}",
                    human::escape(&describe_run(&run, &files)),
                    human::utc_timestamp(run.info().started_wall_ns)
                );
                stored += files.bytes;
            }
            Err(e) => println!("run {id}: {}", human::escape(&e.to_string())),
        }
    }
    if !ids.is_empty() {
        let free =
            store.free_bytes().map(|b| format!(", {} free there", human::bytes(b))).unwrap_or_default();
        let kept = match store.kept_bytes() {
            Ok(0) | Err(_) => String::new(),
            Ok(bytes) => format!(" and {} of kept program files", human::bytes(bytes)),
        };
        println!(
            "{} run{}: {} of snapshots{kept} in {}{free}",
            ids.len(),
            if ids.len() == 1 { "" } else { "s" },
            human::bytes(stored),
            human::escape(&store.root().display().to_string())
        );
    }
    Ok(())
}
