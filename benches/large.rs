//! Large-footprint benchmark: what a user of `sdt run --every` feels on programs that
//! rewrite hundreds of MiB between snapshots, as scientific codes do: an FFT, a blocked
//! LU factorization, an ocean-like grid solver and a radix sort
//! (`benches/workloads/large/`, 72–512 MiB each).
//!
//! For each workload: its running time alone and under `sdt run --every T` (T a
//! eleventh of the time alone, about ten timed snapshots), from spawn to return, the two
//! taken by turns and compared pair by pair; the
//! pauses the program saw; the bytes copied, stored after compaction and the full size
//! of the snapshots; and the memory of the `sdt` process itself.
//!
//! ```sh
//! scripts/bench large                       # the four workloads, 2 threads, 3 runs each
//! scripts/bench large --threads 4 --reps 5 --only fft
//! ```
//!
//! Needs `target/release/sdt` (scripts/bench builds it) and gcc. Writes the table to
//! `target/bench-large/large.md` too.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use indicatif::{ProgressBar, ProgressStyle};
use memory::{Peak, sample_memory};
use serde_json::Value;
use stats::{median, p90, range};
use workloads::workspace;

mod memory;
mod stats;
mod workloads;

const WORKLOADS: [&str; 4] = ["fft", "lu", "ocean", "radix"];

/// Timed snapshots aimed for in a run: the period is the plain time over this plus one.
const SNAPSHOTS: f64 = 10.0;

/// How long compaction may take after `sdt run` returns.
const COMPACTION_TIMEOUT: Duration = Duration::from_secs(600);

/// How often the `sdt` process's memory is read.
const SAMPLE_EVERY: Duration = Duration::from_millis(10);

/// A capture that waited this long (µs) for room or a spare before freezing counts as
/// having waited; shorter is the handing over of a spare ready for it.
const WAITED_US: f64 = 1000.0;

struct Options {
    threads: u32,
    reps: usize,
    only: Option<String>,
}

fn parse_options() -> Result<Options> {
    let mut opts = Options { threads: 2, reps: 3, only: None };
    let mut args = std::env::args().skip(1).filter(|a| a != "--bench");
    while let Some(flag) = args.next() {
        let value = args.next().with_context(|| format!("{flag} needs a value"))?;
        let number = || value.parse::<u32>().with_context(|| format!("{flag}: bad number {value}"));
        match flag.as_str() {
            "--threads" => opts.threads = number()?,
            "--reps" => opts.reps = number()? as usize,
            "--only" => {
                ensure!(
                    WORKLOADS.contains(&value.as_str()),
                    "--only: no workload {value} (one of {WORKLOADS:?})"
                );
                opts.only = Some(value);
            }
            other => bail!("unknown option {other} (--threads N, --reps N, --only NAME)"),
        }
    }
    ensure!(opts.threads >= 1 && opts.reps >= 1, "--threads and --reps must be at least 1");
    Ok(opts)
}

/// The workload's result line, checked: exit code 0 and the line ends in ": ok".
fn result_line(name: &str, what: &str, out: &Output) -> Result<String> {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout.lines().find(|l| l.starts_with(&format!("{name}: "))).unwrap_or("").to_owned();
    ensure!(
        out.status.success() && line.ends_with(": ok"),
        "{name} {what} failed ({}):\n{stdout}{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(line)
}

/// The "footprint N MiB" of a result line.
fn footprint_mib(line: &str) -> f64 {
    line.split(", ")
        .find_map(|part| part.strip_prefix("footprint ")?.strip_suffix(" MiB")?.parse().ok())
        .unwrap_or(0.0)
}

/// The "S s" of a result line: the program's own time from its start to its check.
fn program_secs(line: &str) -> f64 {
    line.split(", ").find_map(|part| part.strip_suffix(" s")?.parse().ok()).unwrap_or(0.0)
}

/// The workload alone: seconds from spawn to exit, and its footprint.
fn run_plain(name: &str, exe: &Path, threads: u32) -> Result<(f64, f64)> {
    let start = Instant::now();
    let out =
        Command::new(exe).arg(threads.to_string()).output().with_context(|| format!("running {name}"))?;
    let secs = start.elapsed().as_secs_f64();
    let line = result_line(name, "alone", &out)?;
    Ok((secs, footprint_mib(&line)))
}

/// One `sdt run` of a workload.
struct SdtRun {
    secs: f64,
    /// The program's own time, as it printed it.
    program_secs: f64,
    /// Seconds from the program's result line (its last) to `sdt run`'s return.
    return_secs: f64,
    pauses_us: Vec<f64>,
    waited: usize,
    raw_bytes: u64,
    stored_bytes: u64,
    full_bytes: u64,
    /// Seconds from `sdt run`'s return until no snapshot was raw any more.
    compaction_secs: f64,
    peak: Peak,
    /// How written pages were found (`uffd-wp`, `page-hash`).
    tracking: String,
}

/// `sdt ls --json` of one run (the latest if `run` is None).
fn ls_json(sdt: &Path, store: &Path, run: Option<u64>) -> Result<Vec<Value>> {
    let mut cmd = Command::new(sdt);
    cmd.args(["ls", "--json", "--store"]).arg(store);
    if let Some(run) = run {
        cmd.args(["--run", &run.to_string()]);
    }
    let out = cmd.output().context("running sdt ls")?;
    ensure!(out.status.success(), "sdt ls --json failed: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).context("reading sdt ls --json")
}

/// Polls the run's snapshots until none is raw (compaction may go on after `sdt run`
/// returns); returns them.
fn wait_for_compaction(sdt: &Path, store: &Path, run: u64) -> Result<Vec<Value>> {
    let start = Instant::now();
    loop {
        let snaps = ls_json(sdt, store, Some(run))?;
        let raw = snaps.iter().filter(|s| s["raw"] == Value::Bool(true)).count();
        if raw == 0 {
            return Ok(snaps);
        }
        ensure!(
            start.elapsed() < COMPACTION_TIMEOUT,
            "run {run} in {}: {raw} of {} snapshots still raw {} s after sdt run returned; is compaction stuck?",
            store.display(),
            snaps.len(),
            COMPACTION_TIMEOUT.as_secs()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn run_sdt(
    name: &str,
    exe: &Path,
    threads: u32,
    every_ms: u64,
    store: &Path,
    bar: &ProgressBar,
) -> Result<SdtRun> {
    let sdt = workloads::release().join("sdt");
    let start = Instant::now();
    let mut child = Command::new(&sdt)
        .args(["run", "-q", "--every", &every_ms.to_string(), "--store"])
        .arg(store)
        .arg("--")
        .arg(exe)
        .arg(threads.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("starting sdt run")?;
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = sample_memory(child.id(), SAMPLE_EVERY, stop.clone());
    // Read as it comes, to see when the program prints its last line.
    let mut stdout = String::new();
    let mut printed = None;
    for line in BufReader::new(child.stdout.take().expect("piped")).lines() {
        let line = line.context("reading the program's output")?;
        if line.starts_with(&format!("{name}:")) {
            printed = Some(Instant::now());
        }
        stdout += &line;
        stdout.push('\n');
    }
    let mut out = child.wait_with_output().context("waiting for sdt run")?;
    let secs = start.elapsed().as_secs_f64();
    let return_secs = printed.map_or(f64::NAN, |t| t.elapsed().as_secs_f64());
    out.stdout = stdout.into_bytes();
    stop.store(true, Ordering::Relaxed);
    let peak = sampler.join().expect("memory sampler");
    let line = result_line(name, "under sdt run", &out)?;

    let snaps = ls_json(&sdt, store, None)?;
    let run = snaps
        .first()
        .and_then(|s| s["run"].as_u64())
        .with_context(|| format!("{name}: sdt run took no snapshot"))?;
    progress(bar, format!("{name} · waiting for compaction"));
    let returned = Instant::now();
    let snaps = wait_for_compaction(&sdt, store, run)?;
    let compaction_secs = returned.elapsed().as_secs_f64();
    let num = |s: &Value, key: &str| s[key].as_f64().unwrap_or(0.0);
    let total = |key: &str| snaps.iter().map(|s| num(s, key) as u64).sum::<u64>();
    Ok(SdtRun {
        secs,
        program_secs: program_secs(&line),
        return_secs,
        pauses_us: snaps.iter().map(|s| num(s, "pause_us")).collect(),
        waited: snaps.iter().filter(|s| num(s, "wait_us") >= WAITED_US).count(),
        raw_bytes: total("copied_bytes"),
        stored_bytes: total("stored_bytes"),
        full_bytes: total("full_bytes"),
        compaction_secs,
        peak,
        tracking: snaps[0]["mode"].as_str().unwrap_or("?").to_owned(),
    })
}

/// One workload's figures.
struct Row {
    name: &'static str,
    footprint_mib: f64,
    /// Seconds alone, each run just before the run under sdt of the same index.
    plain: Vec<f64>,
    sdt_runs: Vec<SdtRun>,
}

impl Row {
    fn plain_secs(&self) -> f64 {
        median(&self.plain)
    }

    fn sdt_secs(&self) -> f64 {
        median(&self.sdt_runs.iter().map(|r| r.secs).collect::<Vec<_>>())
    }

    /// The median, over the pairs of runs, of the time under sdt over the time alone, less one.
    fn overhead(&self) -> f64 {
        let ratios: Vec<f64> = self.plain.iter().zip(&self.sdt_runs).map(|(p, s)| s.secs / p).collect();
        median(&ratios) - 1.0
    }

    /// The median over the runs of one figure.
    fn median_of(&self, figure: impl Fn(&SdtRun) -> f64) -> f64 {
        median(&self.sdt_runs.iter().map(figure).collect::<Vec<_>>())
    }

    fn markdown(&self, threads: u32) -> String {
        let pauses: Vec<f64> = self.sdt_runs.iter().flat_map(|r| r.pauses_us.iter().copied()).collect();
        let snapshots = pauses.len();
        let waited: usize = self.sdt_runs.iter().map(|r| r.waited).sum();
        let mib = |bytes: f64| bytes / (1u64 << 20) as f64;
        let raw = self.median_of(|r| r.raw_bytes as f64);
        let stored = self.median_of(|r| r.stored_bytes as f64);
        let full = self.median_of(|r| r.full_bytes as f64);
        let hwm = self.sdt_runs.iter().map(|r| r.peak.hwm_kib).max().unwrap_or(0);
        let anon = self.sdt_runs.iter().map(|r| r.peak.anon_kib).max().unwrap_or(0);
        format!(
            "| {} | {threads} | {:.0} | {:.2} | {:.2} | {:.2} | {:.2} | {:+.1} | {} | {:.1} / {:.1} / {:.1} | {waited}/{snapshots} | {:.0} | {:.0} | {:.0} | {:.1} | {:.0} ({:.0}) |",
            self.name,
            self.footprint_mib,
            self.plain_secs(),
            self.sdt_secs(),
            self.median_of(|r| r.program_secs),
            self.median_of(|r| r.return_secs),
            100.0 * self.overhead(),
            self.median_of(|r| r.pauses_us.len() as f64),
            median(&pauses) / 1e3,
            p90(&pauses) / 1e3,
            range(&pauses).1 / 1e3,
            mib(raw),
            mib(stored),
            mib(full),
            100.0 * stored / full.max(1.0),
            hwm as f64 / 1024.0,
            anon as f64 / 1024.0,
        )
    }
}

/// Shows what runs now: on the bar, or as a line where stderr is no terminal.
fn progress(bar: &ProgressBar, what: String) {
    if bar.is_hidden() {
        eprintln!("bench large: {what}");
    } else {
        bar.set_message(what);
    }
}

/// Runs the workload alone once to set the period of the timed snapshots, then alone and
/// under `sdt run` by turns, `reps` times each: each run under sdt is compared with the
/// run alone just before it, so that the machine's drift (a shared VM's speed wanders
/// by tens of percent over minutes) falls on both sides of each comparison.
fn measure(name: &'static str, exe: &Path, opts: &Options, dir: &Path, bar: &ProgressBar) -> Result<Row> {
    progress(bar, format!("{name} · alone, to time it"));
    let (first_secs, footprint_mib) = run_plain(name, exe, opts.threads)?;
    let every_ms = ((first_secs * 1e3 / (SNAPSHOTS + 1.0)).round() as u64).max(1);
    let mut plain = Vec::new();
    let mut sdt_runs = Vec::new();
    for rep in 1..=opts.reps {
        progress(bar, format!("{name} · alone {rep}/{}", opts.reps));
        plain.push(run_plain(name, exe, opts.threads)?.0);
        bar.inc(1);
        progress(bar, format!("{name} · sdt run --every {every_ms} {rep}/{}", opts.reps));
        let store = tempfile::tempdir_in(dir).context("making a store directory")?;
        sdt_runs.push(run_sdt(name, exe, opts.threads, every_ms, store.path(), bar)?);
        bar.inc(1);
    }
    Ok(Row { name, footprint_mib, plain, sdt_runs })
}

/// The machine's 1-minute load average, as /proc/loadavg has it.
fn load_average() -> String {
    let text = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    text.split_whitespace().next().unwrap_or("?").to_owned()
}

fn real_main() -> Result<()> {
    let opts = parse_options()?;
    let dir = workspace().join("target/bench-large");
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let names: Vec<&'static str> =
        WORKLOADS.into_iter().filter(|n| opts.only.as_deref().is_none_or(|only| only == *n)).collect();
    let exes: Vec<PathBuf> =
        names.iter().map(|n| workloads::build(&format!("large/{n}"), &dir, n, &[])).collect();

    let load_before = load_average();
    let bar = ProgressBar::new((names.len() * opts.reps * 2) as u64);
    bar.set_style(
        ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} runs  {msg}")
            .expect("progress template")
            .progress_chars("=> "),
    );
    let mut rows = Vec::new();
    for (name, exe) in names.iter().zip(&exes) {
        rows.push(measure(name, exe, &opts, &dir, &bar)?);
    }
    bar.finish_and_clear();

    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let tracking = &rows[0].sdt_runs[0].tracking;
    let mut report = format!(
        "large-footprint benchmark: sdt run --every T (T = time alone / {}), ptrace backend, {tracking}, {cpus} CPUs, {} runs each\n\
         times: median, from spawn to return; overhead: median over the runs under sdt of each one's time over the run alone just before it;\n\
         program s: its own time under sdt run, as it printed it;\n\
         return s: from the program's last line to sdt run's return;\n\
         pauses: every snapshot of every run; waited: snapshots whose capture first waited 1 ms or more for room in the store or a spare, of all;\n\
         raw (copied), stored (after compaction) and full bytes: per run, the median run; sdt peak: VmHWM (largest RssAnon) of the sdt process\n\n\
         | workload | threads | footprint MiB | plain s | sdt run s | program s | return s | overhead % | snapshots | pause p50 / p90 / max ms | waited | raw MiB | stored MiB | full MiB | stored % of full | sdt peak MiB (anon) |\n\
         |---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
        SNAPSHOTS + 1.0,
        opts.reps
    );
    for row in &rows {
        report += &row.markdown(opts.threads);
        report += "\n";
    }
    let mean = rows.iter().map(Row::overhead).sum::<f64>() / rows.len() as f64;
    report += &format!("\nmean overhead: {:+.1}%\n", 100.0 * mean);
    report += &format!(
        "load average (1 min) of the machine: {load_before} before, {} after: other work slows both columns\n",
        load_average()
    );
    report += "compaction finished after sdt run returned (median):";
    for row in &rows {
        report += &format!(" {} {:.1} s;", row.name, row.median_of(|r| r.compaction_secs));
    }
    report.pop();
    report += "\n";

    print!("{report}");
    std::io::stdout().flush().ok();
    let md = dir.join("large.md");
    std::fs::write(&md, &report).with_context(|| format!("writing {}", md.display()))?;
    Ok(())
}

fn main() {
    if let Err(err) = real_main() {
        eprintln!("bench large: {err:#}");
        std::process::exit(1);
    }
}
