//! `sdt history EXPR`: EXPR in every snapshot of a run and of its refinements, from one
//! gdb connected to `sdt gdbserver` that goes from snapshot to snapshot.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use sdt_daemon::human::escape;
use sdt_gdb::frontend::Frame;
use sdt_gdbserver::{Entry, entries};
use sdt_store::RunId;
use serde_json::json;

use crate::cli::HistoryOpt;
use crate::cmd_export::checked_program;
use crate::cmd_gdb::ServerParts;
use crate::{plot, select};

/// One snapshot of the tree and what EXPR was there.
struct Row {
    run: RunId,
    entry: Entry,
    value: Result<String, String>,
    /// Where gdb found EXPR, when not in the breaking thread's own frame.
    elsewhere: Option<Frame>,
}

pub fn history(opt: HistoryOpt) -> Result<ExitCode> {
    let (store, run) = select::open_run(&opt.store, &opt.run)?;
    let tree = store.tree(run.id())?;
    let tree = if tree.is_empty() { vec![run] } else { tree };
    let mut snapshots = Vec::new();
    for run in &tree {
        let listed =
            entries(run).map_err(anyhow::Error::msg).with_context(|| format!("listing run {}", run.id()))?;
        snapshots.extend(listed.into_iter().map(|entry| (run.id(), entry)));
    }
    let Some((first_run, first)) = snapshots.first() else { bail!("run {} has no snapshots", tree[0].id()) };
    let snap = store.open_run(first_run)?.open_snapshot(&first.name)?;
    // Without the program gdb knows no variables: every value is an error that says so.
    let exe = checked_program(&snap).unwrap_or_else(|why| {
        eprintln!("sdt: warning: {}; gdb gets no symbols of it", escape(&why));
        PathBuf::new()
    });
    let parts = ServerParts::new(&opt.store)?;
    let server = parts.server(first_run.0, &first.name);
    // `RUN:NAME`, since names repeat across refinements.
    let names: Vec<_> = snapshots.iter().map(|(run, e)| (*run, e.name.clone())).collect();
    let values = parts.evaluate_in_each(&exe, server, &names, std::slice::from_ref(&opt.expr))?;
    let rows: Vec<Row> = snapshots
        .into_iter()
        .zip(values)
        .map(|((run, entry), mut at)| {
            let evaluated = at.swap_remove(0);
            Row { run, entry, value: evaluated.value, elsewhere: evaluated.elsewhere }
        })
        .collect();
    let root = tree[0].id();
    let shown = if opt.changes { changes(&rows) } else { rows.iter().collect() };
    let mut out = std::io::stdout().lock();
    if opt.json {
        let objects: Vec<_> = shown.iter().map(|row| row_json(row)).collect();
        writeln!(out, "{}", serde_json::to_string_pretty(&objects)?)?;
    } else {
        for row in &shown {
            let name = if row.run == root {
                row.entry.name.clone()
            } else {
                format!("{}:{}", row.run, row.entry.name)
            };
            let mut value = row.value.as_ref().map_or_else(|why| format!("<{why}>"), Clone::clone);
            if let Some(place) = &row.elsewhere {
                value.push_str(&format!("  [in {place}]"));
            }
            let line =
                format!("{name:<6} thread {:<7} {:<40} {value}", row.entry.tid, row.entry.trigger_text());
            writeln!(out, "{}", escape(&line))?;
        }
    }
    out.flush()?;
    if let Some(path) = &opt.plot {
        draw(path, &opt.expr, &tree.iter().map(|r| r.id()).collect::<Vec<_>>(), &rows)?;
    }
    let failed = rows.iter().filter(|r| r.value.is_err()).count();
    if failed > 0 {
        eprintln!(
            "sdt: gdb could not evaluate {} in {failed} of {} snapshots",
            escape(&opt.expr),
            rows.len()
        );
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

/// The rows where the value (or the error) differs from the one before it in the same
/// run; each run's first row.
fn changes(rows: &[Row]) -> Vec<&Row> {
    let mut shown: Vec<&Row> = Vec::new();
    for (i, row) in rows.iter().enumerate() {
        let before = i.checked_sub(1).map(|j| &rows[j]).filter(|b| b.run == row.run);
        if before.is_none_or(|b| b.value != row.value) {
            shown.push(row);
        }
    }
    shown
}

fn row_json(row: &Row) -> serde_json::Value {
    let mut object = json!({
        "run": row.run.0,
        "name": row.entry.name,
        "thread": row.entry.tid,
        "trigger": row.entry.trigger_text(),
        "since_start_ns": row.entry.since_start_ns,
    });
    let (key, text) = match &row.value {
        Ok(value) => ("value", value),
        Err(why) => ("error", why),
    };
    object[key] = json!(text);
    if let Some(frame) = &row.elsewhere {
        object["evaluated_in"] =
            json!({"function": frame.function, "frame": frame.level, "thread": frame.thread});
    }
    object
}

/// Plots the numeric values over each snapshot's time since its run started, one
/// series per run of `runs`.
fn draw(path: &std::path::Path, expr: &str, runs: &[RunId], rows: &[Row]) -> Result<()> {
    let series: Vec<plot::Series> = runs
        .iter()
        .map(|&run| plot::Series {
            name: format!("run {run}"),
            points: rows
                .iter()
                .filter(|r| r.run == run)
                .filter_map(|r| Some((r.entry.since_start_ns as f64 / 1e9, numeric(r.value.as_ref().ok()?)?)))
                .collect(),
        })
        .filter(|s| !s.points.is_empty())
        .collect();
    if series.is_empty() {
        bail!("{}: no snapshot gave {} a numeric value to plot", path.display(), escape(expr));
    }
    plot::lines(path, expr, "time since the run started (s)", &series)
}

/// A value gdb printed as a number: `42`, `-1.5`, `0x1f`, `97 'a'` (a char), `true`.
fn numeric(value: &str) -> Option<f64> {
    let word = value.split(' ').next()?;
    let char_or_number = value == word || value[word.len()..].starts_with(" '");
    match word {
        _ if !char_or_number => None,
        "true" => Some(1.0),
        "false" => Some(0.0),
        _ => match word.strip_prefix("0x") {
            Some(hex) => u64::from_str_radix(hex, 16).ok().map(|v| v as f64),
            None => word.parse().ok().filter(|v: &f64| v.is_finite()),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_read_as_gdb_prints_them() {
        assert_eq!(numeric("42"), Some(42.0));
        assert_eq!(numeric("-1.5"), Some(-1.5));
        assert_eq!(numeric("97 'a'"), Some(97.0));
        assert_eq!(numeric("0x1f"), Some(31.0));
        assert_eq!(numeric("true"), Some(1.0));
        assert_eq!(numeric("{1, 2}"), None);
        assert_eq!(numeric("0x55d0 \"text\""), None);
        assert_eq!(numeric("inf"), None);
    }
}
