//! Capture benchmark: pause per snapshot, capture deviation, copy throughput and storage
//! of `sdt run` (ptrace backend) on a workload of N threads over an H MiB heap of random
//! bytes that writes D% of its pages between snapshots, and gdb's `gcore` of the same
//! workload in the same run.
//!
//! Between snapshots the workload's threads compute (`--shape busy`, the default) or
//! sleep at a barrier (`--shape barrier`) while the main thread breaks; `--gap-ms` is
//! the time between a capture and the next breakpoint (0: back to back). Given either
//! option, the table gets a row per shape and gap, and a comparison of their pauses.
//!
//! ```sh
//! scripts/bench capture                          # 2/4/8 threads x 4/64/400 MiB x 1/10/100 %
//! scripts/bench capture --threads 4 --heap-mb 400 --dirty 1,10 --tracking page-hash
//! scripts/bench capture --threads 4 --heap-mb 400 --dirty 1,10 --shape busy,barrier --gap-ms 0,100
//! scripts/bench capture --threads 2 --heap-mb 400 --dirty 1,10 --sanitize none,address,thread
//! ```
//!
//! `--sanitize` builds the workload with `-fsanitize=address` or `=thread` too (`none`:
//! without), whose terabytes of shadow memory a capture must not scan whole; the rows
//! say which build, and all runs of a sanitized build have its leak check and race
//! reports off (`ASAN_OPTIONS`, `TSAN_OPTIONS`), alone as under `sdt run`.
//!
//! Needs `target/release/sdt` and `libsdt.a` (scripts/bench builds them), gcc and gdb.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
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
    /// What the workers do while the main thread breaks: `busy` or `barrier`.
    shapes: Vec<String>,
    gaps_ms: Vec<u32>,
    tracking: String,
    /// `--shape` or `--gap-ms` was given: rows say which.
    by_shape: bool,
    /// Builds of the workload: `none`, or the sanitizer it is built with.
    builds: Vec<String>,
}

/// A workload configuration: one row of the table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Config<'a> {
    build: &'a str,
    heap_mb: u32,
    dirty: u32,
    threads: u32,
    shape: &'a str,
    gap_ms: u32,
}

fn parse_options() -> Options {
    let mut opts = Options {
        threads: vec![2, 4, 8],
        heap_mb: vec![4, 64, 400],
        dirty: vec![1, 10, 100],
        snapshots: 10,
        shapes: vec!["busy".into()],
        gaps_ms: vec![100],
        tracking: "auto".into(),
        by_shape: false,
        builds: vec!["none".into()],
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
            "--gap-ms" => {
                opts.gaps_ms = list();
                opts.by_shape = true;
            }
            "--shape" => {
                opts.shapes = value.split(',').map(str::to_owned).collect();
                if let Some(bad) = opts.shapes.iter().find(|s| !["busy", "barrier"].contains(&s.as_str())) {
                    panic!("--shape: unknown shape {bad} (busy, barrier)");
                }
                opts.by_shape = true;
            }
            "--tracking" => opts.tracking = value,
            "--sanitize" => {
                opts.builds = value.split(',').map(str::to_owned).collect();
                if let Some(bad) =
                    opts.builds.iter().find(|s| !["none", "address", "thread"].contains(&s.as_str()))
                {
                    panic!("--sanitize: unknown build {bad} (none, address, thread)");
                }
            }
            other => panic!(
                "unknown option {other} (--threads, --heap-mb, --dirty, --snapshots, --gap-ms, --shape, --tracking, --sanitize)"
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
    let mut child = workloads::start_waiting_heap(exe, threads, heap_mb);
    let dumped = workloads::gcore(dir, child.id());
    Command::new("kill").args(["-TERM", &child.id().to_string()]).status().ok();
    child.wait().ok();
    dumped
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
}

fn measure(exe: &Path, dir: &Path, opts: &Options, c: Config) -> Row {
    let sdt = workloads::release().join("sdt");
    let store = dir.join(format!("store-{}-{}-{}-{}-{}", c.threads, c.heap_mb, c.dirty, c.shape, c.gap_ms));
    std::fs::remove_dir_all(&store).ok();
    let mut args = [c.threads, c.heap_mb, c.dirty, opts.snapshots, c.gap_ms].map(|n| n.to_string()).to_vec();
    args.push(c.shape.to_owned());

    let plain = workload(exe).args(&args).output().expect("workload");
    assert!(plain.status.success(), "the workload failed: {}", String::from_utf8_lossy(&plain.stderr));
    let start = Instant::now();
    let traced = workload(&sdt)
        .args(["run", "-q", "--tracking", &opts.tracking, "--store"])
        .arg(&store)
        .arg("--")
        .arg(exe)
        .args(&args)
        .output()
        .expect("sdt");
    let run_secs = start.elapsed().as_secs_f64();
    assert!(traced.status.success(), "sdt run failed: {}", String::from_utf8_lossy(&traced.stderr));
    // Storage compacted: `sdt compact` waits for what `sdt run` left to the background.
    let compact = Command::new(&sdt).args(["compact", "--store"]).arg(&store).output().expect("sdt compact");
    assert!(compact.status.success(), "sdt compact failed: {}", String::from_utf8_lossy(&compact.stderr));
    let ls = Command::new(&sdt).args(["ls", "--json", "--store"]).arg(&store).output().expect("sdt ls");
    let snaps: Vec<Value> = serde_json::from_slice(&ls.stdout).expect("ls --json");
    assert_eq!(snaps.len() as u32, opts.snapshots, "every breakpoint should have captured");
    let field =
        |key: &str| snaps.iter().skip(1).map(|s| s[key].as_f64().unwrap_or(0.0)).collect::<Vec<f64>>();
    let total = |key: &str| snaps.iter().map(|s| s[key].as_u64().unwrap_or(0)).sum::<u64>();
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
    }
}

/// Every configuration the options ask for, build by build.
fn configs(opts: &Options) -> Vec<Config<'_>> {
    let mut out = Vec::new();
    for build in &opts.builds {
        for &heap_mb in &opts.heap_mb {
            for &dirty in &opts.dirty {
                for &threads in &opts.threads {
                    for shape in &opts.shapes {
                        for &gap_ms in &opts.gaps_ms {
                            out.push(Config { build, heap_mb, dirty, threads, shape, gap_ms });
                        }
                    }
                }
            }
        }
    }
    out
}

/// A command for `program`, with a sanitized build's leak check and race reports off.
fn workload(program: &Path) -> Command {
    let mut cmd = Command::new(program);
    cmd.env("ASAN_OPTIONS", "detect_leaks=0").env("TSAN_OPTIONS", "report_bugs=0");
    cmd
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
    let exes: BTreeMap<&str, PathBuf> = opts
        .builds
        .iter()
        .map(|b| {
            let exe = match b.as_str() {
                "none" => workloads::build("heap", &dir, "heap", &[]),
                s => workloads::build("heap", &dir, &format!("heap-{s}"), &[&format!("-fsanitize={s}")]),
            };
            (b.as_str(), exe)
        })
        .collect();
    let by_build = opts.builds.len() > 1 || opts.builds[0] != "none";
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    if opts.by_shape {
        println!(
            "capture benchmark: ptrace backend, {} snapshots per run, {cpus} CPUs; shape: what the workers do \
             while the main thread breaks (busy: compute, barrier: sleep at a barrier); gap: ms from a capture \
             to the next breakpoint (0: back to back)",
            opts.snapshots
        );
    } else {
        println!(
            "capture benchmark: ptrace backend, {} snapshots per run, {} ms of computing between them, {cpus} CPUs",
            opts.snapshots, opts.gaps_ms[0]
        );
    }
    println!("pause, wait, deviation and copy are per snapshot after the first (median; p90 for pause);");
    println!("slowdown: the workload's own running time under sdt run against without it;");
    println!("gcore: median of three dumps of the same workload, threads waiting");
    println!();
    let (shape_head, shape_rule) = if opts.by_shape { (" shape | gap ms |", "---|---|") } else { ("", "") };
    let (build_head, build_rule) = if by_build { (" build |", "---|") } else { ("", "") };
    println!(
        "|{build_head} threads | heap MiB | dirty % |{shape_head} mode | pause S0 ms | pause ms | p90 ms | waited ms | deviation µs | copied MiB | copy GB/s | stored / full MiB | stored % | slowdown % | sdt run s | gcore s | gcore MiB | gcore / pause |"
    );
    println!(
        "|{build_rule}---|---|---|{shape_rule}---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    );
    let mut medians = BTreeMap::new();
    let mut gcores = BTreeMap::new();
    for c in configs(&opts) {
        let Config { build, heap_mb, dirty, threads, shape, gap_ms } = c;
        let exe = &exes[build];
        let r = measure(exe, &dir, &opts, c);
        // gcore's dump does not depend on what the workload writes.
        let (gcore_secs, gcore_bytes) =
            *gcores.entry((build, threads, heap_mb)).or_insert_with(|| gcore(exe, &dir, threads, heap_mb));
        let pause = median(&r.pauses);
        medians.insert(c, pause);
        let copied = median(&r.copied);
        let over = if threads as usize > cpus { "*" } else { "" };
        let shape_cells = if opts.by_shape { format!(" {shape} | {gap_ms} |") } else { String::new() };
        let build_cell = if by_build { format!(" {build} |") } else { String::new() };
        println!(
            "|{build_cell} {threads}{over} | {heap_mb} | {dirty} |{shape_cells} {} | {:.2} | {:.3} | {:.3} | {:.2} | {:.0} | {:.1} | {:.1} | {:.1} / {:.1} | {:.1} | {:.1} | {:.2} | {:.2} | {:.1} | {:.0}× |",
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
            gcore_secs,
            mib(gcore_bytes as f64),
            gcore_secs * 1e6 / pause.max(1.0),
        );
    }
    println!();
    println!("`*`: more threads than CPUs (oversubscribed).");
    let (lo, hi) = (opts.threads.iter().min().unwrap(), opts.threads.iter().max().unwrap());
    if lo != hi {
        println!();
        println!("pause growth from {lo} to {hi} threads (median pause):");
        for (c, &pause) in medians.iter().filter(|(c, _)| c.threads == *lo) {
            let b = medians[&Config { threads: *hi, ..*c }];
            let mut which =
                if opts.by_shape { format!(", {}, gap {} ms", c.shape, c.gap_ms) } else { String::new() };
            if by_build {
                which.push_str(&format!(", build {}", c.build));
            }
            println!("  {} MiB, {}%{which}: {:+.1}%", c.heap_mb, c.dirty, 100.0 * (b / pause.max(1.0) - 1.0));
        }
    }
    if opts.by_shape {
        compare_shapes(&opts, &medians);
    }
}

/// How the pause of each shape and gap compares with the busy shape's, and with the
/// largest gap's, at the same threads, heap and dirty share.
fn compare_shapes(opts: &Options, medians: &BTreeMap<Config, f64>) {
    let widest = *opts.gaps_ms.iter().max().unwrap();
    println!();
    println!(
        "median pause against the busy shape at the same gap, and against the same shape {widest} ms apart:"
    );
    for (c, &pause) in medians {
        let busy = medians.get(&Config { shape: "busy", ..*c }).filter(|_| c.shape != "busy");
        let apart = medians.get(&Config { gap_ms: widest, ..*c }).filter(|_| c.gap_ms != widest);
        let mut against = Vec::new();
        if let Some(busy) = busy {
            against.push(format!("{:.2}× busy", pause / busy.max(1.0)));
        }
        if let Some(apart) = apart {
            against.push(format!("{:.2}× {widest} ms apart", pause / apart.max(1.0)));
        }
        println!(
            "  {} threads, {} MiB, {}%, {}, gap {} ms: {:.3} ms{}{}",
            c.threads,
            c.heap_mb,
            c.dirty,
            c.shape,
            c.gap_ms,
            pause / 1e3,
            if against.is_empty() { "" } else { ", " },
            against.join(", ")
        );
    }
}
