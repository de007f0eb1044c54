//! Moving between snapshots in gdb: `sdt goto` from one snapshot to another in a gdb
//! connected to `sdt gdbserver` (once both have been visited), beside exporting a core
//! and starting gdb on it; and `sdt history EXPR` over every snapshot of the run. The
//! workload is `workloads/heap.c`: THREADS threads over a HEAP_MB MiB heap, SNAPSHOTS
//! breakpoints back to back, 1% of the heap written between them.
//!
//! ```sh
//! scripts/bench history                          # 8 threads, 400 MiB, 100 snapshots
//! scripts/bench history --threads 8 --heap-mb 400 --snapshots 100 --reps 5
//! ```

#[path = "workloads.rs"]
mod workloads;

use std::path::Path;
use std::process::{Command, Output};
use std::time::Instant;

use anyhow::{Result, bail};

struct Options {
    threads: u32,
    heap_mb: u32,
    snapshots: u32,
    reps: u32,
}

fn parse_options() -> Options {
    let mut opts = Options { threads: 8, heap_mb: 400, snapshots: 100, reps: 5 };
    let mut args = std::env::args().skip(1).filter(|a| a != "--bench");
    while let Some(arg) = args.next() {
        let mut value = || args.next().and_then(|v| v.parse().ok()).expect("a number after the option");
        match arg.as_str() {
            "--threads" => opts.threads = value(),
            "--heap-mb" => opts.heap_mb = value(),
            "--snapshots" => opts.snapshots = value(),
            "--reps" => opts.reps = value(),
            other => panic!("unknown option {other} (--threads, --heap-mb, --snapshots, --reps)"),
        }
    }
    opts
}

/// `sdt ARGS` on `store`, checked to succeed.
fn sdt(store: &Path, args: &[&str]) -> Result<Output> {
    let out = Command::new(workloads::release().join("sdt")).args(args).env("SDT_STORE", store).output()?;
    if !out.status.success() {
        bail!("sdt {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(out)
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// Milliseconds per `sdt goto` between S1 and S2 of a gdb on `sdt gdbserver`, each
/// snapshot visited once before: gdb times each goto itself, `reps` times each way.
fn goto_ms(store: &Path, reps: u32) -> Result<Vec<f64>> {
    let timing = format!(
        "python import time; sdt_times = []\n\
         python gdb.execute('sdt goto S2', to_string=True); gdb.execute('sdt goto S1', to_string=True)\n\
         python exec(\"for _ in range({reps}):\\n for s in ('S2', 'S1'):\\n  t = time.perf_counter(); gdb.execute('sdt goto ' + s, to_string=True); sdt_times.append(time.perf_counter() - t)\")\n\
         python print('goto_ms', *[round(t * 1e3, 3) for t in sdt_times])\n"
    );
    let script = store.join("goto.gdb");
    std::fs::write(&script, timing)?;
    let out = sdt(store, &["gdb", "S1", "--", "-batch", "-nx", "-x", script.to_str().unwrap()])?;
    let text = String::from_utf8_lossy(&out.stdout);
    let Some(line) = text.lines().find_map(|l| l.strip_prefix("goto_ms ")) else {
        bail!("gdb printed no times:\n{text}{}", String::from_utf8_lossy(&out.stderr))
    };
    Ok(line.split(' ').filter_map(|t| t.parse().ok()).collect())
}

/// Seconds to export S2 as a core, and to start gdb on it and print a variable.
fn core_then_gdb(store: &Path, exe: &Path) -> Result<(f64, f64)> {
    let core = store.join("S2.core");
    let start = Instant::now();
    sdt(store, &["export", "core", "S2", "-o", core.to_str().unwrap()])?;
    let export = start.elapsed().as_secs_f64();
    let start = Instant::now();
    let out = Command::new("gdb")
        .args(["-q", "-batch", "-nx"])
        .arg(format!("--se={}", exe.display()))
        .arg(format!("--core={}", core.display()))
        .args(["-ex", "print dirtied"])
        .output()?;
    let gdb = start.elapsed().as_secs_f64();
    if !out.status.success() {
        bail!("gdb on the core failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    std::fs::remove_file(&core)?;
    Ok((export, gdb))
}

fn main() -> Result<()> {
    let opts = parse_options();
    let dir = tempfile::tempdir()?;
    let exe = workloads::build("heap", dir.path(), "heap", &[]);
    let store = dir.path().join("store");
    let args = [opts.threads, opts.heap_mb, 1, opts.snapshots, 0].map(|n| n.to_string());
    let start = Instant::now();
    let mut run = Command::new(workloads::release().join("sdt"));
    run.args(["run", "-q", "--store"]).arg(&store).arg("--").arg(&exe).args(&args);
    if !run.output()?.status.success() {
        bail!("sdt run failed");
    }
    sdt(&store, &["compact"])?;
    eprintln!("captured {} snapshots in {:.1} s", opts.snapshots, start.elapsed().as_secs_f64());

    let gotos = goto_ms(&store, opts.reps)?;
    let (export, gdb) = core_then_gdb(&store, &exe)?;
    let mut history = Vec::new();
    let mut listed = 0;
    for _ in 0..opts.reps.min(3) {
        let start = Instant::now();
        let out = sdt(&store, &["history", "dirtied"])?;
        history.push(start.elapsed().as_secs_f64());
        listed = String::from_utf8_lossy(&out.stdout).lines().count();
    }
    println!(
        "{} threads, {} MiB heap, {} snapshots (workloads/heap.c)\n",
        opts.threads, opts.heap_mb, opts.snapshots
    );
    println!("| what | time |");
    println!("|---|---|");
    println!("| `sdt goto` S1 ↔ S2, warm (median of {}) | {:.1} ms |", gotos.len(), median(gotos.clone()));
    println!("| `sdt goto`, slowest | {:.1} ms |", gotos.iter().copied().fold(0.0, f64::max));
    println!("| `sdt export core S2` | {:.2} s |", export);
    println!("| gdb on that core, to the first value | {:.2} s |", gdb);
    println!(
        "| `sdt history dirtied`, {listed} snapshots (median of {}) | {:.2} s |",
        history.len(),
        median(history)
    );
    Ok(())
}
