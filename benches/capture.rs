//! Capture benchmark: pause per snapshot, capture deviation, throughput and storage of
//! `sdt run` (ptrace backend) on a workload of N threads over an H MiB heap that writes
//! D% of its pages between snapshots, and gdb's `gcore` of the same workload in the same
//! run.
//!
//! ```sh
//! scripts/bench                                    # default matrix
//! scripts/bench --threads 4 --heap-mb 256 --dirty 10 --snapshots 10
//! ```
//!
//! Needs `target/release/sdt` and `libsdt.a` (scripts/bench builds them), gcc and gdb.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use serde_json::Value;

struct Options {
    threads: Vec<u32>,
    heap_mb: Vec<u32>,
    dirty: Vec<u32>,
    snapshots: u32,
}

fn parse_options() -> Options {
    let mut opts = Options { threads: vec![2, 4, 8], heap_mb: vec![256], dirty: vec![1, 10], snapshots: 10 };
    let mut args = std::env::args().skip(1).filter(|a| a != "--bench");
    while let Some(flag) = args.next() {
        let mut list = || -> Vec<u32> {
            let v = args.next().unwrap_or_else(|| panic!("{flag} needs a value"));
            v.split(',').map(|n| n.parse().unwrap_or_else(|_| panic!("{flag}: bad number {n}"))).collect()
        };
        match flag.as_str() {
            "--threads" => opts.threads = list(),
            "--heap-mb" => opts.heap_mb = list(),
            "--dirty" => opts.dirty = list(),
            "--snapshots" => opts.snapshots = list()[0],
            other => panic!("unknown option {other} (--threads, --heap-mb, --dirty, --snapshots)"),
        }
    }
    opts
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_owned()
}

fn build_workload(out: &Path) -> PathBuf {
    let release = workspace().join("target/release");
    let lib = release.join("libsdt.a");
    assert!(
        lib.exists() && release.join("sdt").exists(),
        "build first: cargo build --release (scripts/bench does)"
    );
    let exe = out.join("heap");
    let status = Command::new("gcc")
        .args(["-O2", "-g", "-pthread"])
        .arg(workspace().join("benches/workloads/heap.c"))
        .arg("-I")
        .arg(workspace().join("sdt-lib/include"))
        .arg(&lib)
        .args(["-ldl", "-lm", "-o"])
        .arg(&exe)
        .status()
        .expect("gcc");
    assert!(status.success(), "building the workload failed");
    exe
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    if values.is_empty() { 0.0 } else { values[values.len() / 2] }
}

fn percentile(values: &mut [f64], p: f64) -> f64 {
    values.sort_by(f64::total_cmp);
    if values.is_empty() { 0.0 } else { values[((values.len() - 1) as f64 * p).round() as usize] }
}

/// Seconds gcore takes to dump the workload (waiting, filled, with `threads` threads not
/// started: gcore's cost is the memory), and the core's size.
fn gcore(exe: &Path, dir: &Path, heap_mb: u32) -> (f64, u64) {
    let mut child = Command::new(exe)
        .args(["1", &heap_mb.to_string(), "0", "0"])
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
    terminate(child.id());
    child.wait().ok();
    (secs, size)
}

fn terminate(pid: u32) {
    Command::new("kill").args(["-TERM", &pid.to_string()]).status().ok();
}

struct Row {
    threads: u32,
    heap_mb: u32,
    dirty: u32,
    snapshots: usize,
    pause_median_us: f64,
    pause_p90_us: f64,
    first_pause_us: f64,
    deviation_median_us: f64,
    stored: u64,
    full: u64,
    run_secs: f64,
    plain_secs: f64,
    gcore_secs: f64,
    gcore_bytes: u64,
}

fn measure(exe: &Path, dir: &Path, threads: u32, heap_mb: u32, dirty: u32, snapshots: u32) -> Row {
    let sdt = workspace().join("target/release/sdt");
    let store = dir.join(format!("store-{threads}-{heap_mb}-{dirty}"));
    std::fs::remove_dir_all(&store).ok();
    let args = [threads.to_string(), heap_mb.to_string(), dirty.to_string(), snapshots.to_string()];

    let start = Instant::now();
    let status = Command::new(exe).args(&args).status().expect("workload");
    let plain_secs = start.elapsed().as_secs_f64();
    assert!(status.success());

    let start = Instant::now();
    let status = Command::new(&sdt)
        .arg("run")
        .arg("-q")
        .arg("--store")
        .arg(&store)
        .arg("--")
        .arg(exe)
        .args(&args)
        .status()
        .expect("sdt");
    let run_secs = start.elapsed().as_secs_f64();
    assert!(status.success(), "sdt run failed");
    let ls = Command::new(&sdt).args(["ls", "--json", "--store"]).arg(&store).output().expect("sdt ls");
    let snaps: Vec<Value> = serde_json::from_slice(&ls.stdout).expect("ls --json");
    let field = |key: &str| snaps.iter().map(|s| s[key].as_f64().unwrap_or(0.0)).collect::<Vec<f64>>();
    let mut pauses = field("pause_us");
    let first_pause_us = pauses.first().copied().unwrap_or(0.0);
    let mut later: Vec<f64> = pauses.iter().skip(1).copied().collect();
    let (gcore_secs, gcore_bytes) = gcore(exe, dir, heap_mb);
    std::fs::remove_dir_all(&store).ok();
    Row {
        threads,
        heap_mb,
        dirty,
        snapshots: snaps.len(),
        pause_median_us: median(&mut later),
        pause_p90_us: percentile(&mut pauses, 0.9),
        first_pause_us,
        deviation_median_us: median(&mut field("deviation_us")),
        stored: field("stored_bytes").iter().sum::<f64>() as u64,
        full: field("full_bytes").iter().sum::<f64>() as u64,
        run_secs,
        plain_secs,
        gcore_secs,
        gcore_bytes,
    }
}

fn mib(bytes: u64) -> String {
    format!("{:.1}", bytes as f64 / (1 << 20) as f64)
}

fn main() {
    let opts = parse_options();
    let dir = workspace().join("target/bench-capture");
    std::fs::create_dir_all(&dir).unwrap();
    let exe = build_workload(&dir);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "capture benchmark: ptrace backend, full-copy mode, {} snapshots per run, {cores} CPUs",
        opts.snapshots
    );
    println!();
    println!(
        "| threads | heap MiB | dirty % | pause S0 ms | pause S1+ median ms | p90 ms | deviation µs | stored / full MiB | stored % | run s (plain s) | gcore s | gcore MiB | gcore / pause |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for &heap_mb in &opts.heap_mb {
        for &dirty in &opts.dirty {
            for &threads in &opts.threads {
                let r = measure(&exe, &dir, threads, heap_mb, dirty, opts.snapshots);
                let over = if r.threads as usize + 1 > cores { " (oversubscribed)" } else { "" };
                println!(
                    "| {}{over} | {} | {} | {:.2} | {:.2} | {:.2} | {:.0} | {} / {} | {:.1} | {:.2} ({:.2}) | {:.2} | {} | {:.0}× |",
                    r.threads,
                    r.heap_mb,
                    r.dirty,
                    r.first_pause_us / 1e3,
                    r.pause_median_us / 1e3,
                    r.pause_p90_us / 1e3,
                    r.deviation_median_us,
                    mib(r.stored),
                    mib(r.full),
                    100.0 * r.stored as f64 / r.full.max(1) as f64,
                    r.run_secs,
                    r.plain_secs,
                    r.gcore_secs,
                    mib(r.gcore_bytes),
                    r.gcore_secs * 1e6 / r.pause_median_us.max(1.0),
                );
                assert_eq!(r.snapshots as u32, opts.snapshots, "every breakpoint should have captured");
            }
        }
    }
}
