//! Capture benchmark: pause per snapshot, capture deviation, copy throughput and storage
//! of `sdt run` (ptrace backend) on a workload of N threads over an H MiB heap of random
//! bytes that writes D% of its pages between snapshots while its threads compute, and
//! gdb's `gcore` of the same workload in the same run.
//!
//! ```sh
//! scripts/bench capture                          # 2/4/8 threads x 4/64/400 MiB x 1/10/100 %
//! scripts/bench capture --threads 4 --heap-mb 400 --dirty 1,10 --tracking page-hash
//! ```
//!
//! Needs `target/release/sdt` and `libsdt.a` (scripts/bench builds them), gcc and gdb.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use serde_json::Value;
use stats::{median, p90};
use workloads::workspace;

mod stats;
mod workloads;

struct Options {
    threads: Vec<u32>,
    heap_mb: Vec<u32>,
    dirty: Vec<u32>,
    snapshots: u32,
    gap_ms: u32,
    tracking: String,
}

fn parse_options() -> Options {
    let mut opts = Options {
        threads: vec![2, 4, 8],
        heap_mb: vec![4, 64, 400],
        dirty: vec![1, 10, 100],
        snapshots: 10,
        gap_ms: 100,
        tracking: "auto".into(),
    };
    let mut args = std::env::args().skip(1).filter(|a| a != "--bench");
    while let Some(flag) = args.next() {
        let value = args.next().unwrap_or_else(|| panic!("{flag} needs a value"));
        let list = || -> Vec<u32> {
            value.split(',').map(|n| n.parse().unwrap_or_else(|_| panic!("{flag}: bad number {n}"))).collect()
        };
        match flag.as_str() {
            "--threads" => opts.threads = list(),
            "--heap-mb" => opts.heap_mb = list(),
            "--dirty" => opts.dirty = list(),
            "--snapshots" => opts.snapshots = list()[0],
            "--gap-ms" => opts.gap_ms = list()[0],
            "--tracking" => opts.tracking = value,
            other => panic!(
                "unknown option {other} (--threads, --heap-mb, --dirty, --snapshots, --gap-ms, --tracking)"
            ),
        }
    }
    opts
}

/// Seconds gcore takes to dump the workload (filled heap, its threads waiting), median of
/// three, and the core's size.
fn gcore(exe: &Path, dir: &Path, threads: u32, heap_mb: u32) -> (f64, u64) {
    let runs: Vec<(f64, u64)> = (0..3).map(|_| gcore_once(exe, dir, threads, heap_mb)).collect();
    (median(&runs.iter().map(|r| r.0).collect::<Vec<_>>()), runs[0].1)
}

fn gcore_once(exe: &Path, dir: &Path, threads: u32, heap_mb: u32) -> (f64, u64) {
    let mut child = Command::new(exe)
        .args([threads.to_string(), heap_mb.to_string(), "0".into(), "0".into()])
        .stdout(Stdio::piped())
        .spawn()
        .expect("workload");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    assert_eq!(line, "ready\n");
    let prefix = dir.join("gcore");
    let start = Instant::now();
    let out =
        Command::new("gcore").arg("-o").arg(&prefix).arg(child.id().to_string()).output().expect("gcore");
    let secs = start.elapsed().as_secs_f64();
    assert!(out.status.success(), "gcore failed: {}", String::from_utf8_lossy(&out.stderr));
    let core = PathBuf::from(format!("{}.{}", prefix.display(), child.id()));
    let size = std::fs::metadata(&core).map(|m| m.len()).unwrap_or(0);
    std::fs::remove_file(&core).ok();
    Command::new("kill").args(["-TERM", &child.id().to_string()]).status().ok();
    child.wait().ok();
    (secs, size)
}

/// One configuration's figures.
struct Row {
    mode: String,
    /// Pause of each snapshot after the first, in µs (the first registers and copies all).
    pauses: Vec<f64>,
    first_pause_us: f64,
    waits: Vec<f64>,
    deviations: Vec<f64>,
    copied: Vec<f64>,
    stored: u64,
    full: u64,
    /// How long the workload's rounds took under `sdt run`, and without it.
    rounds_ms: f64,
    plain_rounds_ms: f64,
    /// `sdt run` from start to end, writing included.
    run_secs: f64,
    gcore_secs: f64,
    gcore_bytes: u64,
}

fn measure(exe: &Path, dir: &Path, opts: &Options, threads: u32, heap_mb: u32, dirty: u32) -> Row {
    let sdt = workloads::release().join("sdt");
    let store = dir.join(format!("store-{threads}-{heap_mb}-{dirty}"));
    std::fs::remove_dir_all(&store).ok();
    let args = [threads, heap_mb, dirty, opts.snapshots, opts.gap_ms].map(|n| n.to_string());

    let plain = Command::new(exe).args(&args).output().expect("workload");
    assert!(plain.status.success());
    let start = Instant::now();
    let traced = Command::new(&sdt)
        .args(["run", "-q", "--tracking", &opts.tracking, "--store"])
        .arg(&store)
        .arg("--")
        .arg(exe)
        .args(&args)
        .output()
        .expect("sdt");
    let run_secs = start.elapsed().as_secs_f64();
    assert!(traced.status.success(), "sdt run failed: {}", String::from_utf8_lossy(&traced.stderr));
    let ls = Command::new(&sdt).args(["ls", "--json", "--store"]).arg(&store).output().expect("sdt ls");
    let snaps: Vec<Value> = serde_json::from_slice(&ls.stdout).expect("ls --json");
    assert_eq!(snaps.len() as u32, opts.snapshots, "every breakpoint should have captured");
    let field =
        |key: &str| snaps.iter().skip(1).map(|s| s[key].as_f64().unwrap_or(0.0)).collect::<Vec<f64>>();
    let total = |key: &str| snaps.iter().map(|s| s[key].as_u64().unwrap_or(0)).sum::<u64>();
    let (gcore_secs, gcore_bytes) = gcore(exe, dir, threads, heap_mb);
    std::fs::remove_dir_all(&store).ok();
    Row {
        mode: snaps[0]["mode"].as_str().unwrap_or("?").to_owned(),
        pauses: field("pause_us"),
        first_pause_us: snaps[0]["pause_us"].as_f64().unwrap_or(0.0),
        waits: field("wait_us"),
        deviations: field("deviation_us"),
        copied: field("copied_bytes"),
        stored: total("stored_bytes"),
        full: total("full_bytes"),
        rounds_ms: rounds_ms(&traced.stdout),
        plain_rounds_ms: rounds_ms(&plain.stdout),
        run_secs,
        gcore_secs,
        gcore_bytes,
    }
}

/// The workload's own timing line, `rounds_ms N`.
fn rounds_ms(stdout: &[u8]) -> f64 {
    String::from_utf8_lossy(stdout)
        .lines()
        .find_map(|l| l.strip_prefix("rounds_ms ")?.trim().parse().ok())
        .expect("the workload prints rounds_ms")
}

fn mib(bytes: f64) -> f64 {
    bytes / (1u64 << 20) as f64
}

fn main() {
    let opts = parse_options();
    let dir = workspace().join("target/bench-capture");
    std::fs::create_dir_all(&dir).unwrap();
    let exe = workloads::build("heap", &dir, "heap", &[]);
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "capture benchmark: ptrace backend, {} snapshots per run, {} ms of computing between them, {cpus} CPUs",
        opts.snapshots, opts.gap_ms
    );
    println!("pause, wait, deviation and copy are per snapshot after the first (median; p90 for pause);");
    println!("slowdown: the workload's own running time under sdt run against without it;");
    println!("gcore: median of three dumps of the same workload, threads waiting");
    println!();
    println!(
        "| threads | heap MiB | dirty % | mode | pause S0 ms | pause ms | p90 ms | waited ms | deviation µs | copied MiB | copy GB/s | stored / full MiB | stored % | slowdown % | sdt run s | gcore s | gcore MiB | gcore / pause |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    let mut medians = BTreeMap::new();
    for &heap_mb in &opts.heap_mb {
        for &dirty in &opts.dirty {
            for &threads in &opts.threads {
                let r = measure(&exe, &dir, &opts, threads, heap_mb, dirty);
                let pause = median(&r.pauses);
                medians.insert((heap_mb, dirty, threads), pause);
                let copied = median(&r.copied);
                let over = if threads as usize > cpus { "*" } else { "" };
                println!(
                    "| {threads}{over} | {heap_mb} | {dirty} | {} | {:.2} | {:.3} | {:.3} | {:.2} | {:.0} | {:.1} | {:.1} | {:.1} / {:.1} | {:.1} | {:.1} | {:.2} | {:.2} | {:.1} | {:.0}× |",
                    r.mode,
                    r.first_pause_us / 1e3,
                    pause / 1e3,
                    p90(&r.pauses) / 1e3,
                    median(&r.waits) / 1e3,
                    median(&r.deviations),
                    mib(copied),
                    copied / (pause * 1e3).max(1.0),
                    mib(r.stored as f64),
                    mib(r.full as f64),
                    100.0 * r.stored as f64 / r.full.max(1) as f64,
                    100.0 * (r.rounds_ms / r.plain_rounds_ms - 1.0),
                    r.run_secs,
                    r.gcore_secs,
                    mib(r.gcore_bytes as f64),
                    r.gcore_secs * 1e6 / pause.max(1.0),
                );
            }
        }
    }
    println!();
    println!("`*`: more threads than CPUs (oversubscribed).");
    let (lo, hi) = (opts.threads.iter().min().unwrap(), opts.threads.iter().max().unwrap());
    if lo != hi {
        println!();
        println!("pause growth from {lo} to {hi} threads (median pause):");
        for &heap_mb in &opts.heap_mb {
            for &dirty in &opts.dirty {
                let (a, b) = (medians[&(heap_mb, dirty, *lo)], medians[&(heap_mb, dirty, *hi)]);
                println!("  {heap_mb} MiB, {dirty}%: {:+.1}%", 100.0 * (b / a.max(1.0) - 1.0));
            }
        }
    }
}
