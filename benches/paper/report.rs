//! Table 2, Figures 6–9 as CSV, and the report beside the paper's figures.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Context as _, Result};

use crate::Size;
use crate::measure::{Cell, SNAPSHOTS};
use crate::plots::{self, Chart};
use crate::stats::median;

/// The paper's figures (mean over its seven programs), by thread count 2, 4, 8.
const PAPER_OVERHEAD: [(u32, f64); 3] = [(2, 19.80), (4, 33.62), (8, 51.88)];
const PAPER_WORST_OVERHEAD: f64 = 76.21;
const PAPER_INCREMENTAL: [(u32, f64); 3] = [(2, 15.50), (4, 14.47), (8, 14.12)];
const PAPER_GROWTH_2_TO_8: f64 = 41.85;
/// The targets this evaluation is held to.
const TARGET_OVERHEAD_2: f64 = 5.0;
const TARGET_INCREMENTAL: f64 = 14.0;
const TARGET_GROWTH: f64 = 10.0;

/// How the run went, for the report's header.
pub struct Context {
    pub command: String,
    pub size: Size,
    pub reps: u32,
    pub threads: Vec<u32>,
    pub cpus: usize,
    pub load: (String, String),
    /// CPU seconds other processes took while the programs ran, and that as a % of the
    /// machine's CPU time.
    pub others: (f64, f64),
    pub kernel: String,
    /// One line per program: found, built, ran, or skipped and why.
    pub programs: Vec<String>,
    pub elapsed_s: f64,
}

/// One cell's figures.
pub struct Row {
    pub et: f64,
    pub ets: f64,
    pub overhead_pct: f64,
    pub ts: f64,
    pub tis: f64,
    /// Mean pause over a run's snapshots (median over runs), and the first snapshot's.
    pub pause_ms: f64,
    pub s0_ms: f64,
    pub deviation_us: f64,
    /// Per snapshot after the first: % of pages written, % of pages changed.
    pub written_pct: Vec<f64>,
    pub changed_pct: Vec<f64>,
    pub gcore_s: Option<f64>,
    pub gcore_bytes: Option<f64>,
    pub gcore_et: Option<f64>,
    pub passed: bool,
}

impl Row {
    pub fn tis_pct(&self) -> f64 {
        100.0 * self.tis / self.ts.max(1.0)
    }
}

fn mib(bytes: f64) -> f64 {
    bytes / (1u64 << 20) as f64
}

pub fn row(cell: &Cell) -> Row {
    let et = median(&cell.plain.iter().map(|t| t.roi_s).collect::<Vec<_>>());
    let ets = median(&cell.sdt.iter().map(|r| r.timing.roi_s).collect::<Vec<_>>());
    let per_run =
        |f: &dyn Fn(&crate::measure::SdtRun) -> f64| median(&cell.sdt.iter().map(f).collect::<Vec<_>>());
    let ts = per_run(&|r| r.snaps.iter().map(|s| s.full_bytes as f64).sum());
    let tis = per_run(&|r| r.snaps.iter().map(|s| s.stored_bytes as f64).sum());
    let pause_ms =
        per_run(&|r| r.snaps.iter().map(|s| s.pause_us).sum::<f64>() / r.snaps.len().max(1) as f64 / 1e3);
    let s0_ms = per_run(&|r| r.snaps.first().map_or(0.0, |s| s.pause_us / 1e3));
    let deviations: Vec<f64> = cell.sdt.iter().flat_map(|r| r.snaps.iter().map(|s| s.deviation_us)).collect();
    let by_index = |f: &dyn Fn(&crate::measure::Snap) -> f64| -> Vec<f64> {
        (1..SNAPSHOTS)
            .map(|k| median(&cell.sdt.iter().filter_map(|r| r.snaps.get(k)).map(f).collect::<Vec<_>>()))
            .collect()
    };
    let written_pct = by_index(&|s| 100.0 * s.copied_bytes as f64 / s.full_bytes.max(1) as f64);
    let changed_pct = by_index(&|s| 100.0 * s.pages_stored as f64 / s.pages.max(1) as f64);
    let gcore = cell.gcore.as_ref().filter(|g| !g.dumps.is_empty());
    let passed = cell.failed.is_empty();
    Row {
        et,
        ets,
        overhead_pct: 100.0 * (ets / et.max(1e-9) - 1.0),
        ts,
        tis,
        pause_ms,
        s0_ms,
        deviation_us: median(&deviations),
        written_pct,
        changed_pct,
        gcore_s: gcore.map(|g| g.dumps.iter().map(|d| d.0).sum::<f64>() / g.dumps.len() as f64),
        gcore_bytes: gcore.map(|g| g.dumps.iter().map(|d| d.1 as f64).sum::<f64>() / g.dumps.len() as f64),
        gcore_et: gcore.map(|g| g.timing.roi_s),
        passed,
    }
}

fn mark(threads: u32, cpus: usize) -> &'static str {
    if threads as usize > cpus { "*" } else { "" }
}

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or("–".into(), |v| format!("{v:.digits$}"))
}

/// Table 2 as Markdown.
pub fn table2(cells: &[Cell], cpus: usize) -> String {
    let mut t = String::new();
    t.push_str("| program | paper's | threads | ET s | ETS s | overhead | TS MiB | TIS MiB | TIS/TS | pause ms | S0 pause ms | deviation µs | gcore s | gcore MiB | ET, gcore s | self-check |\n");
    t.push_str("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for cell in cells {
        let r = row(cell);
        let _ = writeln!(
            t,
            "| {} | {} | {}{} | {:.3} | {:.3} | {:+.1}% | {:.1} | {:.1} | {:.1}% | {:.2} | {:.2} | {:.0} | {} | {} | {} | {} |",
            cell.program,
            cell.paper,
            cell.threads,
            mark(cell.threads, cpus),
            r.et,
            r.ets,
            r.overhead_pct,
            mib(r.ts),
            mib(r.tis),
            r.tis_pct(),
            r.pause_ms,
            r.s0_ms,
            r.deviation_us,
            opt(r.gcore_s, 3),
            opt(r.gcore_bytes.map(mib), 1),
            opt(r.gcore_et, 3),
            if r.passed { "ok" } else { "FAILED" },
        );
    }
    t
}

/// Means over programs at one thread count.
struct Means {
    overhead: f64,
    incremental: f64,
    pause_ms: f64,
}

fn means(cells: &[Cell]) -> BTreeMap<u32, Means> {
    let mut by: BTreeMap<u32, Vec<Row>> = BTreeMap::new();
    for c in cells {
        by.entry(c.threads).or_default().push(row(c));
    }
    by.into_iter()
        .map(|(t, rows)| {
            let n = rows.len() as f64;
            let m = Means {
                overhead: rows.iter().map(|r| r.overhead_pct).sum::<f64>() / n,
                incremental: rows.iter().map(|r| r.tis_pct()).sum::<f64>() / n,
                pause_ms: rows.iter().map(|r| r.pause_ms).sum::<f64>() / n,
            };
            (t, m)
        })
        .collect()
}

/// Capture-time growth of each program from the fewest threads to `threads`, and the mean.
fn growth(cells: &[Cell], threads: u32) -> Option<(f64, Vec<(String, f64)>)> {
    let base = cells.iter().map(|c| c.threads).min()?;
    if base == threads {
        return None;
    }
    let per: Vec<(String, f64)> = cells
        .iter()
        .filter(|c| c.threads == threads)
        .filter_map(|c| {
            let b = cells.iter().find(|b| b.program == c.program && b.threads == base)?;
            Some((c.program.clone(), 100.0 * (row(c).pause_ms / row(b).pause_ms.max(1e-9) - 1.0)))
        })
        .collect();
    if per.is_empty() {
        return None;
    }
    Some((per.iter().map(|p| p.1).sum::<f64>() / per.len() as f64, per))
}

fn worst(cells: &[Cell]) -> Option<(f64, String)> {
    cells
        .iter()
        .map(|c| (row(c).overhead_pct, format!("{} at {} threads", c.program, c.threads)))
        .max_by(|a, b| a.0.total_cmp(&b.0))
}

/// The headline figures, one line each.
pub fn summary(cells: &[Cell], threads: &[u32]) -> Vec<String> {
    let m = means(cells);
    let mut lines = Vec::new();
    let list = |f: &dyn Fn(&Means) -> f64| {
        threads
            .iter()
            .filter_map(|t| m.get(t).map(|x| format!("{:.2}% at {t}", f(x))))
            .collect::<Vec<_>>()
            .join(", ")
    };
    lines.push(format!("mean overhead: {}", list(&|x| x.overhead)));
    if let Some((w, at)) = worst(cells) {
        lines.push(format!("worst overhead: {w:.2}% ({at})"));
    }
    lines.push(format!("mean incremental storage (TIS/TS): {}", list(&|x| x.incremental)));
    for &t in threads {
        if let Some((g, _)) = growth(cells, t) {
            lines.push(format!("capture-time growth to {t} threads: {g:+.2}% (mean over programs)"));
        }
    }
    lines
}

fn verdict(ok: bool) -> &'static str {
    if ok { "met" } else { "**not met**" }
}

/// Writes table2.md, the figures' CSVs and plots, and report.md into `out`.
pub fn write_all(out: &Path, cells: &[Cell], ctx: &Context) -> Result<()> {
    let table = table2(cells, ctx.cpus);
    std::fs::write(out.join("table2.md"), &table)?;

    // Figure 6: overhead.
    let mut csv = String::from("program,threads,et_s,ets_s,overhead_pct,oversubscribed\n");
    for c in cells {
        let r = row(c);
        let _ = writeln!(
            csv,
            "{},{},{:.6},{:.6},{:.3},{}",
            c.program,
            c.threads,
            r.et,
            r.ets,
            r.overhead_pct,
            c.threads as usize > ctx.cpus
        );
    }
    std::fs::write(out.join("fig6-overhead.csv"), csv)?;
    // Figure 7: capture time and its growth.
    let mut csv = String::from("program,threads,pause_ms,s0_pause_ms,deviation_us,growth_pct\n");
    for c in cells {
        let r = row(c);
        let g = growth(cells, c.threads)
            .and_then(|(_, per)| per.into_iter().find(|p| p.0 == c.program).map(|p| p.1));
        let _ = writeln!(
            csv,
            "{},{},{:.4},{:.4},{:.1},{}",
            c.program,
            c.threads,
            r.pause_ms,
            r.s0_ms,
            r.deviation_us,
            opt(g, 3)
        );
    }
    std::fs::write(out.join("fig7-capture-growth.csv"), csv)?;
    // Figure 8: incremental against full.
    let mut csv = String::from("program,threads,ts_bytes,tis_bytes,tis_pct\n");
    for c in cells {
        let r = row(c);
        let _ = writeln!(csv, "{},{},{:.0},{:.0},{:.3}", c.program, c.threads, r.ts, r.tis, r.tis_pct());
    }
    std::fs::write(out.join("fig8-storage.csv"), csv)?;
    // Figure 9: page change rate per snapshot.
    let mut csv = String::from("program,threads,snapshot,written_pct,changed_pct\n");
    for c in cells {
        let r = row(c);
        for (k, (w, ch)) in r.written_pct.iter().zip(&r.changed_pct).enumerate() {
            let _ = writeln!(csv, "{},{},S{},{:.3},{:.3}", c.program, c.threads, k + 1, w, ch);
        }
    }
    std::fs::write(out.join("fig9-page-changes.csv"), csv)?;

    let drawn = plots::draw_figures(out, cells, &ctx.threads, ctx.cpus).map_err(|e| {
        eprintln!("bench-paper: plots not drawn: {e:#}");
        format!("{e:#}")
    });
    std::fs::write(out.join("report.md"), report(cells, ctx, &table, &drawn))
        .with_context(|| format!("writing {}", out.join("report.md").display()))?;
    Ok(())
}

/// `drawn`: each figure and why it was not drawn, if it was not; or why none was.
fn report(
    cells: &[Cell],
    ctx: &Context,
    table: &str,
    drawn: &Result<Vec<(&'static str, Option<String>)>, String>,
) -> String {
    let m = means(cells);
    let mut r = String::new();
    let _ = writeln!(r, "# The paper's evaluation, on SDT\n");
    let _ = writeln!(
        r,
        "`{}`: size {}, {} runs without SDT and {} under `sdt run` per program and thread count (median), one under gcore; {} CPUs, Linux {}; load average {} before, {} after; other processes took {:.0} CPU-seconds meanwhile ({:.1}% of the machine{}); {:.0} s in all.\n",
        format!("scripts/bench-paper {}", ctx.command).trim_end(),
        ctx.size.name(),
        ctx.reps,
        ctx.reps,
        ctx.cpus,
        ctx.kernel,
        ctx.load.0,
        ctx.load.1,
        ctx.others.0,
        ctx.others.1,
        if ctx.others.1 > 5.0 { ": **figures taken under load**" } else { "" },
        ctx.elapsed_s
    );
    let _ = writeln!(r, "## Beside the paper\n");
    let _ = writeln!(r, "| figure | paper | SDT here | target | |");
    let _ = writeln!(r, "|---|---|---|---|---|");
    for (t, paper) in PAPER_OVERHEAD {
        if let Some(x) = m.get(&t) {
            let target = if t == 2 { format!("≤ {TARGET_OVERHEAD_2}%") } else { "report".into() };
            let v = if t == 2 { verdict(x.overhead <= TARGET_OVERHEAD_2) } else { "" };
            let _ = writeln!(
                r,
                "| mean overhead, {t} threads{} | {paper:.2}% | {:.2}% | {target} | {v} |",
                mark(t, ctx.cpus),
                x.overhead
            );
        }
    }
    if let Some((w, at)) = worst(cells) {
        let _ = writeln!(r, "| worst overhead | {PAPER_WORST_OVERHEAD:.2}% | {w:.2}% ({at}) | | |");
    }
    for (t, paper) in PAPER_INCREMENTAL {
        if let Some(x) = m.get(&t) {
            let _ = writeln!(
                r,
                "| incremental storage (TIS/TS), {t} threads{} | {paper:.2}% | {:.2}% | ≤ {TARGET_INCREMENTAL}% | {} |",
                mark(t, ctx.cpus),
                x.incremental,
                verdict(x.incremental <= TARGET_INCREMENTAL)
            );
        }
    }
    if let Some((g, _)) = growth(cells, 8) {
        let _ = writeln!(
            r,
            "| capture-time growth, 2 → 8 threads | {PAPER_GROWTH_2_TO_8:.2}% | {g:+.2}% | < {TARGET_GROWTH}% | {} |",
            verdict(g < TARGET_GROWTH)
        );
    }
    if let Some((g, _)) = growth(cells, 4) {
        let _ = writeln!(r, "| capture-time growth, 2 → 4 threads | – | {g:+.2}% | | |");
    }
    let _ = writeln!(r);
    let _ = writeln!(
        r,
        "Mean pause per snapshot: {}.",
        m.iter().map(|(t, x)| format!("{:.2} ms at {t} threads", x.pause_ms)).collect::<Vec<_>>().join(", ")
    );
    let gc: Vec<(f64, f64)> = cells
        .iter()
        .filter_map(|c| {
            let r = row(c);
            Some((r.gcore_s?, r.pause_ms))
        })
        .collect();
    if !gc.is_empty() {
        let ratio = gc.iter().map(|(g, p)| g * 1e3 / p.max(1e-6)).sum::<f64>() / gc.len() as f64;
        let _ = writeln!(
            r,
            "gdb's gcore at the same points takes {ratio:.0}× as long per snapshot as SDT's pause, on average over the rows."
        );
    }
    let _ = writeln!(r);
    let _ = writeln!(r, "## Table 2\n");
    let _ = writeln!(
        r,
        "ET: the program's time without SDT (its region of interest: our workloads time their parallel part, input generation and self-check left out; suite programs are timed whole). ETS: the same under `sdt run`, ten snapshots. TS: what the ten snapshots hold, were each stored whole; TIS: what the store holds (incremental, compressed). Pause: trigger to every thread running again, the mean over a run's ten snapshots; S0, the first, copies every page. Deviation: trigger to the last thread stopped (the paper's capture deviation). gcore: gdb's `gcore` at the same ten points in a run of its own: seconds and size per dump, and the program's time with them. `*`: more threads than CPUs (oversubscribed).\n"
    );
    r.push_str(table);
    let notes: Vec<String> = cells
        .iter()
        .flat_map(|c| c.notes.iter().map(move |n| format!("- {} at {} threads: {n}", c.program, c.threads)))
        .collect();
    if !notes.is_empty() {
        let _ = writeln!(r, "\nNotes:\n\n{}", notes.join("\n"));
    }
    let _ = writeln!(
        r,
        "\n## Programs\n\nWhat became of each program (a failed run, by its exit status or its own check of its result, keeps that program and thread count out of the figures):\n"
    );
    for line in &ctx.programs {
        let _ = writeln!(r, "- {}", line.replace('\n', " "));
    }
    let _ = writeln!(r, "\n## Figures\n");
    match drawn {
        Ok(drawn) => {
            for (stem, title) in plots::FIGURES {
                match drawn.iter().find(|d| d.0 == stem).and_then(|d| d.1.as_deref()) {
                    None => {
                        let _ = writeln!(
                            r,
                            "### {title}\n\n![{title}]({stem}.png)\n\nData: [{stem}.csv]({stem}.csv), plot: [{stem}.svg]({stem}.svg)\n"
                        );
                    }
                    Some(why) => {
                        let _ =
                            writeln!(r, "### {title}\n\nNot drawn: {why}. Data: [{stem}.csv]({stem}.csv)\n");
                    }
                }
            }
        }
        Err(e) => {
            let _ = writeln!(
                r,
                "Plots were not drawn ({e}); the data is in fig6-overhead.csv, fig7-capture-growth.csv, fig8-storage.csv and fig9-page-changes.csv."
            );
        }
    }
    r
}

/// The figures' series, for the plots; for a figure the runs cannot give, why.
pub fn chart_data(
    cells: &[Cell],
    threads: &[u32],
    cpus: usize,
) -> Vec<(&'static str, Result<Chart, String>)> {
    let mut programs: Vec<String> = Vec::new();
    for c in cells {
        if !programs.contains(&c.program) {
            programs.push(c.program.clone());
        }
    }
    let value = |program: &str, t: u32, f: &dyn Fn(&Row) -> f64| {
        cells.iter().find(|c| c.program == program && c.threads == t).map(|c| f(&row(c))).unwrap_or(f64::NAN)
    };
    let label = |t: u32| format!("{t} threads{}", if t as usize > cpus { " (oversubscribed)" } else { "" });
    let series = |f: &dyn Fn(&Row) -> f64| -> Vec<(String, Vec<f64>)> {
        threads.iter().map(|&t| (label(t), programs.iter().map(|p| value(p, t, f)).collect())).collect()
    };
    let base = threads.iter().copied().min().unwrap_or(2);
    let growth_series: Vec<(String, Vec<f64>)> = threads
        .iter()
        .filter(|&&t| t != base)
        .map(|&t| {
            let per = growth(cells, t).map(|g| g.1).unwrap_or_default();
            (
                format!("{base} → {}", label(t)),
                programs.iter().map(|p| per.iter().find(|x| &x.0 == p).map_or(f64::NAN, |x| x.1)).collect(),
            )
        })
        .collect();
    let lines: Vec<(String, Vec<f64>)> = programs
        .iter()
        .filter_map(|p| {
            cells
                .iter()
                .find(|c| &c.program == p && c.threads == base)
                .map(|c| (p.clone(), row(c).changed_pct))
        })
        .collect();
    let growth = if growth_series.is_empty() {
        Err(format!(
            "it compares thread counts, and this run had one ({base}); give two or more, e.g. --threads {base},{}",
            base * 4
        ))
    } else {
        Ok(Chart::Bars {
            title: format!("Capture time (mean pause) growth from {base} threads"),
            y_label: "growth %".into(),
            groups: programs.clone(),
            series: growth_series,
        })
    };
    vec![
        (
            "fig6-overhead",
            Ok(Chart::Bars {
                title: "Overhead of ten snapshots (ETS / ET − 1)".into(),
                y_label: "overhead %".into(),
                groups: programs.clone(),
                series: series(&|r| r.overhead_pct),
            }),
        ),
        ("fig7-capture-growth", growth),
        (
            "fig8-storage",
            Ok(Chart::Bars {
                title: "Incremental storage: TIS as % of TS".into(),
                y_label: "TIS / TS %".into(),
                groups: programs.clone(),
                series: series(&|r| r.tis_pct()),
            }),
        ),
        (
            "fig9-page-changes",
            Ok(Chart::Lines {
                title: format!("Pages changed since the previous snapshot ({base} threads)"),
                x_label: "snapshot".into(),
                y_label: "pages changed %".into(),
                series: lines,
            }),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::{SdtRun, Snap, Timing};

    /// A cell of one program at `threads`: five runs each, ten snapshots each.
    fn cell(program: &str, threads: u32) -> Cell {
        let timing = |s: f64| Timing { roi_s: s, wall_s: s, failure: None };
        let snap = Snap {
            pause_us: 500.0,
            full_bytes: 1 << 20,
            stored_bytes: 1 << 16,
            pages: 256,
            pages_stored: 16,
            ..Default::default()
        };
        Cell {
            program: program.into(),
            paper: "FFT (SPLASH-2)",
            threads,
            plain: vec![timing(1.0); 5],
            sdt: (0..5)
                .map(|_| SdtRun { timing: timing(1.02), snaps: vec![snap.clone(); SNAPSHOTS] })
                .collect(),
            gcore: None,
            failed: Vec::new(),
            notes: Vec::new(),
        }
    }

    /// With one thread count, every figure but the growth between thread counts is drawn,
    /// and the report says why that one is not.
    #[test]
    fn one_thread_count_gives_every_figure_it_can() {
        let cells = [cell("fft", 2), cell("lu", 2)];
        let charts = chart_data(&cells, &[2], 2);
        let why: Vec<(&str, Option<String>)> = charts.into_iter().map(|(stem, c)| (stem, c.err())).collect();
        assert_eq!(why[0], ("fig6-overhead", None));
        assert_eq!(why[2], ("fig8-storage", None));
        assert_eq!(why[3], ("fig9-page-changes", None));
        assert_eq!(why[1].0, "fig7-capture-growth");
        assert!(why[1].1.as_deref().unwrap().contains("this run had one (2)"), "{:?}", why[1]);
        assert!(chart_data(&[cell("fft", 2), cell("fft", 8)], &[2, 8], 2)[1].1.is_ok());

        let out = tempfile::tempdir().unwrap();
        let ctx = Context {
            command: "--threads 2".into(),
            size: Size::Small,
            reps: 5,
            threads: vec![2],
            cpus: 2,
            load: ("0".into(), "0".into()),
            others: (0.0, 0.0),
            kernel: "6.1".into(),
            programs: vec!["fft: found (ours), built, ran at 2 threads: ok".into()],
            elapsed_s: 1.0,
        };
        write_all(out.path(), &cells, &ctx).unwrap();
        let report = std::fs::read_to_string(out.path().join("report.md")).unwrap();
        assert!(report.contains("- fft: found (ours), built, ran at 2 threads: ok"), "{report}");
        if plots::draw_figures(out.path(), &cells, &[2], 2).is_ok() {
            for stem in ["fig6-overhead", "fig8-storage", "fig9-page-changes"] {
                assert!(out.path().join(format!("{stem}.png")).exists(), "{stem}");
                assert!(report.contains(&format!("]({stem}.png)")), "{report}");
            }
            assert!(!out.path().join("fig7-capture-growth.png").exists());
            assert!(report.contains("Not drawn: it compares thread counts"), "{report}");
        }
    }
}
