//! Attach benchmark: `sdt attach PID` (one snapshot of a running process, which then
//! runs on) against gdb's `gcore PID` of the same process in the same run, taken in turns.
//! The process is the capture benchmark's workload: N threads over an H MiB heap of
//! random bytes, waiting.
//!
//! What the user feels: the time from the command's start to its return, how long the
//! process stood still (sdt: its snapshot's pause; gcore holds it from its attach to its
//! detach, nearly all of its run), sdt's peak memory, and what each leaves on disk (sdt:
//! after the compaction that runs once it has returned, timed apart).
//!
//! ```sh
//! scripts/bench attach                                  # 4 threads x 64, 400 MiB, 5 turns each
//! scripts/bench attach --threads 2,8 --heap-mb 400 --reps 9
//! ```
//!
//! Needs `target/release/sdt` and `libsdt.a` (scripts/bench builds them), gcc and gdb.

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use memory::sample_memory;
use serde_json::Value;
use stats::{median, p90, range};
use workloads::workspace;

mod memory;
mod stats;
mod workloads;

/// How often the `sdt attach` process's memory is read: it lives a fraction of a second.
const SAMPLE_EVERY: Duration = Duration::from_millis(2);

struct Options {
    threads: Vec<u32>,
    heap_mb: Vec<u32>,
    reps: usize,
}

fn parse_options() -> Options {
    let mut opts = Options { threads: vec![4], heap_mb: vec![64, 400], reps: 5 };
    let args: Vec<String> = std::env::args().skip(1).filter(|a| a != "--bench").collect();
    for pair in args.chunks(2) {
        let [flag, value] = pair else { panic!("{} needs a value", pair[0]) };
        match flag.as_str() {
            "--threads" => opts.threads = numbers(flag, value),
            "--heap-mb" => opts.heap_mb = numbers(flag, value),
            "--reps" => opts.reps = numbers(flag, value)[0].max(1) as usize,
            other => panic!("unknown option {other} (--threads, --heap-mb, --reps)"),
        }
    }
    opts
}

/// The comma-separated numbers `value` of option `flag`.
fn numbers(flag: &str, value: &str) -> Vec<u32> {
    value.split(',').map(|n| n.parse().unwrap_or_else(|_| panic!("{flag}: bad number {n}"))).collect()
}

/// One `sdt attach` of the workload.
struct Attach {
    secs: f64,
    pause_us: f64,
    copied_bytes: u64,
    peak_kib: u64,
    compact_secs: f64,
    stored_bytes: u64,
}

/// One configuration's figures.
#[derive(Default)]
struct Row {
    attach_secs: Vec<f64>,
    pauses_us: Vec<f64>,
    copied_bytes: Vec<f64>,
    peaks_kib: Vec<f64>,
    compact_secs: Vec<f64>,
    stored_bytes: Vec<f64>,
    gcore_secs: Vec<f64>,
    core_bytes: Vec<f64>,
}

fn attach_once(sdt: &Path, store: &Path, pid: u32) -> Attach {
    std::fs::remove_dir_all(store).ok();
    let start = Instant::now();
    let child = Command::new(sdt)
        .arg("attach")
        .arg(pid.to_string())
        .arg("--store")
        .arg(store)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("sdt attach");
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = sample_memory(child.id(), SAMPLE_EVERY, stop.clone());
    let out = child.wait_with_output().expect("waiting for sdt attach");
    let secs = start.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    let peak = sampler.join().expect("memory sampler");
    assert!(out.status.success(), "sdt attach failed: {}", String::from_utf8_lossy(&out.stderr));
    let captured = ls_json(sdt, store);
    // The compaction `sdt attach` left to the background, finished and timed.
    let start = Instant::now();
    let compact = Command::new(sdt).args(["compact", "--store"]).arg(store).output().expect("sdt compact");
    assert!(compact.status.success(), "sdt compact failed: {}", String::from_utf8_lossy(&compact.stderr));
    let compact_secs = start.elapsed().as_secs_f64();
    let compacted = ls_json(sdt, store);
    std::fs::remove_dir_all(store).ok();
    Attach {
        secs,
        pause_us: captured["pause_us"].as_f64().unwrap_or(0.0),
        copied_bytes: captured["copied_bytes"].as_u64().unwrap_or(0),
        peak_kib: peak.hwm_kib,
        compact_secs,
        stored_bytes: compacted["stored_bytes"].as_u64().unwrap_or(0),
    }
}

/// The one snapshot of the store's run, as `sdt ls --json` gives it.
fn ls_json(sdt: &Path, store: &Path) -> Value {
    let ls = Command::new(sdt).args(["ls", "--json", "--store"]).arg(store).output().expect("sdt ls");
    assert!(ls.status.success(), "sdt ls failed: {}", String::from_utf8_lossy(&ls.stderr));
    let mut snaps: Vec<Value> = serde_json::from_slice(&ls.stdout).expect("ls --json");
    assert_eq!(snaps.len(), 1, "sdt attach takes one snapshot");
    snaps.remove(0)
}

fn measure(exe: &Path, dir: &Path, reps: usize, threads: u32, heap_mb: u32) -> Row {
    let sdt = workloads::release().join("sdt");
    let store = dir.join(format!("store-{threads}-{heap_mb}"));
    let mut workload = workloads::start_waiting_heap(exe, threads, heap_mb);
    let pid = workload.id();
    let mut row = Row::default();
    for _ in 0..reps {
        let a = attach_once(&sdt, &store, pid);
        row.attach_secs.push(a.secs);
        row.pauses_us.push(a.pause_us);
        row.copied_bytes.push(a.copied_bytes as f64);
        row.peaks_kib.push(a.peak_kib as f64);
        row.compact_secs.push(a.compact_secs);
        row.stored_bytes.push(a.stored_bytes as f64);
        let (secs, bytes) = workloads::gcore(dir, pid);
        row.gcore_secs.push(secs);
        row.core_bytes.push(bytes as f64);
    }
    Command::new("kill").args(["-TERM", &pid.to_string()]).status().ok();
    workload.wait().ok();
    row
}

fn mib(bytes: f64) -> f64 {
    bytes / (1u64 << 20) as f64
}

/// `p50 / p90 / max` of `values`, scaled by `scale`, with `digits` decimals.
fn spread(values: &[f64], scale: f64, digits: usize) -> String {
    let (_, max) = range(values);
    format!(
        "{:.digits$} / {:.digits$} / {:.digits$}",
        median(values) * scale,
        p90(values) * scale,
        max * scale
    )
}

fn main() {
    let opts = parse_options();
    let dir = workspace().join("target/bench-attach");
    std::fs::create_dir_all(&dir).unwrap();
    let exe = workloads::build("heap", &dir, "heap", &[]);
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "attach benchmark: sdt attach and gcore of the same running process in turns, {} each, {cpus} CPUs;",
        opts.reps
    );
    println!("the process: the capture workload's threads over a heap of random bytes, waiting;");
    println!(
        "return: the command's start to its return (p50 / p90 / max); pause: how long sdt stopped the process;"
    );
    println!("sdt peak: its VmHWM; stored: after the compaction it leaves to the background, timed apart");
    println!();
    println!(
        "| threads | heap MiB | sdt attach s | pause ms | copied MiB | sdt peak MiB | compaction s | stored MiB | gcore s | core MiB | gcore / attach | gcore / pause |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|");
    for &heap_mb in &opts.heap_mb {
        for &threads in &opts.threads {
            let row = measure(&exe, &dir, opts.reps, threads, heap_mb);
            let attach = median(&row.attach_secs);
            let pause_s = median(&row.pauses_us) / 1e6;
            let gcore = median(&row.gcore_secs);
            println!(
                "| {threads} | {heap_mb} | {} | {} | {:.1} | {:.1} | {:.2} | {:.1} | {} | {:.1} | {:.1}× | {:.0}× |",
                spread(&row.attach_secs, 1.0, 3),
                spread(&row.pauses_us, 1e-3, 1),
                mib(median(&row.copied_bytes)),
                median(&row.peaks_kib) / 1024.0,
                median(&row.compact_secs),
                mib(median(&row.stored_bytes)),
                spread(&row.gcore_secs, 1.0, 3),
                mib(median(&row.core_bytes)),
                gcore / attach.max(1e-9),
                gcore / pause_s.max(1e-9),
            );
        }
    }
}
