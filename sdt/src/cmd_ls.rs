//! `sdt ls` (a run's snapshots) and `sdt runs` (the store's runs).

use anyhow::Result;
use sdt_daemon::human;
use sdt_store::{Run, RunInfo, RunStatus, SnapshotEntry, SnapshotMeta, Store, Trigger};
use serde_json::{Value, json};

use crate::cli::{LsOpt, RunsOpt};
use crate::select;

/// One snapshot file as `ls` sees it.
enum Row {
    Ok { meta: Box<SnapshotMeta>, file_bytes: u64 },
    Broken { name: String, why: String },
}

fn rows(run: &Run) -> Result<Vec<Row>> {
    Ok(run
        .snapshots()?
        .into_iter()
        .map(|entry: SnapshotEntry| {
            if !entry.complete {
                return Row::Broken {
                    name: entry.name,
                    why: "incomplete: its capture did not finish".into(),
                };
            }
            match run.open_snapshot(&entry.name) {
                Ok(snap) => Row::Ok { meta: Box::new(snap.meta().clone()), file_bytes: entry.file_bytes },
                Err(e) => Row::Broken { name: entry.name, why: human::error_chain(&e) },
            }
        })
        .collect())
}

/// The run asked for and the rest of its refinement tree: the root first, each
/// refinement after the run it refines, indented by its depth.
pub fn ls(opt: LsOpt) -> Result<()> {
    let (store, run) = select::open_run(&opt.store, &opt.run)?;
    let tree = store.tree(run.id())?;
    let tree = if tree.is_empty() { vec![run] } else { tree };
    if opt.json {
        let mut array = Vec::new();
        for run in &tree {
            for row in rows(run)? {
                let mut v = row_json(&row);
                v.as_object_mut().unwrap().insert("run".into(), json!(run.id().0));
                array.push(v);
            }
        }
        println!("{}", serde_json::to_string_pretty(&array)?);
        return Ok(());
    }
    for (i, run) in tree.iter().enumerate() {
        let depth = depth(run, &tree);
        let indent = "  ".repeat(depth);
        if i > 0 {
            println!();
        }
        let rows = rows(run)?;
        println!("{indent}{}", human::escape(&run_line(run.info(), &rows)));
        print_table(&rows, &indent);
    }
    Ok(())
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

fn print_table(rows: &[Row], indent: &str) {
    if rows.is_empty() {
        return;
    }
    let width = rows
        .iter()
        .map(|r| match r {
            Row::Ok { meta, .. } => meta.name.len(),
            Row::Broken { name, .. } => name.len(),
        })
        .max()
        .unwrap_or(0)
        .max(6);
    println!(
        "{indent}{:<width$} {:<14} {:>4} {:<20} {:>7} {:>9} {:>4} {:>9} {:>9} {:>15} {:>10}",
        "NAME", "TRIGGER", "HIT", "ATTRS", "TID", "TIME", "THR", "PAUSE", "WAIT", "PAGES STORED", "BYTES"
    );
    for row in rows {
        match row {
            Row::Ok { meta, file_bytes } => {
                let (trigger, hit, attrs, tid) = match &meta.trigger {
                    Trigger::Breakpoint { level, class, id, attrs, hit, tid, .. } => {
                        (format!("bp {level}/{class}/{id}"), hit.to_string(), attrs.clone(), tid.to_string())
                    }
                    Trigger::Timer => ("timer".into(), "-".into(), "-".into(), "-".into()),
                };
                let wait = match meta.stats.wait_ns {
                    0 => "-".to_owned(),
                    ns => human::duration_ns(ns),
                };
                println!(
                    "{indent}{:<width$} {:<14} {:>4} {:<20} {:>7} {:>9} {:>4} {:>9} {:>9} {:>15} {:>10}",
                    meta.name,
                    trigger,
                    hit,
                    truncate(&human::escape(&attrs), 20),
                    tid,
                    format!("+{:.3}s", meta.time.since_start_ns as f64 / 1e9),
                    meta.threads.len(),
                    human::duration_ns(meta.stats.pause_ns),
                    wait,
                    format!("{}/{}", meta.stats.pages_stored, meta.stats.pages),
                    human::bytes(*file_bytes),
                );
            }
            Row::Broken { name, why } => println!("{indent}{name:<width$} ({})", human::escape(why)),
        }
    }
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
        Row::Ok { meta, file_bytes } => {
            let mut v = json!({
                "name": meta.name,
                "complete": true,
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
            };
            v.as_object_mut().unwrap().extend(trigger.as_object().unwrap().clone());
            v
        }
    }
}

/// `run 3: ./prog 4 — exited 0, 10 snapshots, stored 1.2 MiB (full 40.0 MiB), uffd-wp`.
fn run_line(info: &RunInfo, rows: &[Row]) -> String {
    let metas: Vec<&SnapshotMeta> = rows
        .iter()
        .filter_map(|row| match row {
            Row::Ok { meta, .. } => Some(&**meta),
            Row::Broken { .. } => None,
        })
        .collect();
    let stored: u64 =
        rows.iter().map(|row| if let Row::Ok { file_bytes, .. } = row { *file_bytes } else { 0 }).sum();
    let full: u64 = metas.iter().map(|m| m.stats.full_bytes).sum();
    let mut modes: Vec<&str> = metas.iter().map(|m| m.stats.mode.as_str()).collect();
    modes.dedup();
    let waited = metas.iter().filter(|m| m.stats.wait_ns > 0).count();
    let mut notes = String::new();
    if !modes.is_empty() {
        notes.push_str(&format!(", {}", modes.join("+")));
    }
    if waited > 0 {
        notes.push_str(&format!(
            ", {waited} capture{} waited for the writer (see sdt run --queue-mb)",
            if waited == 1 { "" } else { "s" }
        ));
    }
    let what = match &info.parent {
        None => info.command.join(" "),
        Some(p) => match &p.to {
            Some(to) => format!("refines {}..{to} of run {}", p.from, p.run),
            None => format!("resumes {} of run {}", p.from, p.run),
        },
    };
    format!(
        "run {}: {what} — {}, {} snapshot{}, stored {} (full {}){notes}",
        info.id,
        status_text(info),
        rows.len(),
        if rows.len() == 1 { "" } else { "s" },
        human::bytes(stored),
        human::bytes(full)
    )
}

fn status_text(info: &RunInfo) -> String {
    match &info.status {
        RunStatus::Running if sdt_sys::process_exists(info.sdt_pid) => "running".into(),
        RunStatus::Running => "ended abnormally (sdt was killed)".into(),
        RunStatus::Exited { code } => format!("exited {code}"),
        RunStatus::Signaled { signal } => format!("killed by signal {signal}"),
        RunStatus::Stopped { reason } => format!("stopped: {reason}"),
        RunStatus::Failed { message } => format!("failed: {message}"),
    }
}

pub fn runs(opt: RunsOpt) -> Result<()> {
    let store = Store::open(&opt.store.store)?;
    let ids = store.run_ids()?;
    if ids.is_empty() {
        println!("no runs in {}", store.root().display());
    }
    for id in ids {
        match store.open_run(&id) {
            Ok(run) => {
                let rows = rows(&run)?;
                println!(
                    "{}  started {}",
                    human::escape(&run_line(run.info(), &rows)),
                    human::utc_timestamp(run.info().started_wall_ns)
                );
            }
            Err(e) => println!("run {id}: {}", human::escape(&e.to_string())),
        }
    }
    Ok(())
}
