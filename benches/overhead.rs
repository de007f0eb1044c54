//! Overhead benchmark: what SDT costs a program whose breakpoints do not capture.
//!
//! The same workload (`workloads/annotated.c`: threads computing, passing a breakpoint
//! per iteration and about a million per second per thread in the inner loop) built
//! six ways and timed by itself over repetitions:
//!
//! - `compiled out`: `-DSDT_DISABLE`, no trace of SDT (the baseline);
//! - `built in, run alone`: linked with libsdt, run without `sdt run`;
//! - `under sdt run, filtered by level`: under `sdt run` with `max_level = 0`, which no
//!   breakpoint passes (dropped inline in `SetBreakpoint`);
//! - `under sdt run, filtered by class`: with `classes = [9]` (dropped inline too: the
//!   library's class mask);
//! - `under sdt run, filtered by id`: with `ids = [99]` (dropped inline: the id mask);
//! - `under sdt run, filtered by attrs`: with `phase = "none"` under `[attrs]` (one call
//!   into libsdt per breakpoint, which matches the attribute string; no system call).
//!
//! ```sh
//! scripts/bench overhead
//! ```

use std::ffi::OsString;
use std::path::Path;
use std::process::Command;

use workloads::workspace;

mod workloads;

/// The workload's own timing line, `run_ms N`.
fn run_ms(cmd: &mut Command) -> f64 {
    let out = cmd.output().expect("running the workload");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("run_ms ")?.trim().parse().ok())
        .expect("the workload prints run_ms")
}

fn main() {
    let dir = workspace().join("target/bench-overhead");
    std::fs::create_dir_all(&dir).unwrap();
    let sdt = workloads::release().join("sdt");
    let plain = workloads::build("annotated", &dir, "compiled-out", &["-DSDT_DISABLE"]);
    let built = workloads::build("annotated", &dir, "built-in", &[]);
    let by_level = dir.join("filter-by-level.toml");
    std::fs::write(&by_level, "max_level = 0\n").unwrap();
    let by_class = dir.join("filter-by-class.toml");
    std::fs::write(&by_class, "classes = [9]\n").unwrap();
    let by_id = dir.join("filter-by-id.toml");
    std::fs::write(&by_id, "ids = [99]\n").unwrap();
    let by_attrs = dir.join("filter-by-attrs.toml");
    std::fs::write(&by_attrs, "[attrs]\nphase = \"none\"\n").unwrap();
    let store = dir.join("store");
    let (threads, iterations, reps) = ("4", "100000", 9);

    let workload = [threads, iterations].map(OsString::from);
    let under_sdt = |config: &Path| -> Vec<OsString> {
        let mut args: Vec<OsString> = ["run", "-q", "--store"].map(OsString::from).into();
        args.push(store.clone().into());
        args.push("--config".into());
        args.push(config.into());
        args.push("--".into());
        args.push(built.clone().into());
        args.extend(workload.iter().cloned());
        args
    };
    // (name, program, arguments)
    let variants: Vec<(&str, &Path, Vec<OsString>)> = vec![
        ("compiled out", &plain, workload.to_vec()),
        ("built in, run alone", &built, workload.to_vec()),
        ("under sdt run, filtered by level", &sdt, under_sdt(&by_level)),
        ("under sdt run, filtered by class", &sdt, under_sdt(&by_class)),
        ("under sdt run, filtered by id", &sdt, under_sdt(&by_id)),
        ("under sdt run, filtered by attrs", &sdt, under_sdt(&by_attrs)),
    ];
    // Interleave the variants so that drift in the machine's speed hits all alike.
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); variants.len()];
    for _ in 0..reps {
        for (i, (_, program, args)) in variants.iter().enumerate() {
            times[i].push(run_ms(Command::new(program).args(args)));
        }
    }
    std::fs::remove_dir_all(&store).ok();
    let median = |v: &[f64]| {
        let mut v = v.to_vec();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let base = median(&times[0]);
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "overhead benchmark: {threads} threads x {iterations} iterations, 65 breakpoints per iteration (one per 64 elements), {reps} runs each (median), {cpus} CPUs"
    );
    println!();
    println!("| variant | median ms | min ms | max ms | vs compiled out |");
    println!("|---|---|---|---|---|");
    for ((name, _, _), t) in variants.iter().zip(&times) {
        let (lo, hi) = (t.iter().copied().fold(f64::MAX, f64::min), t.iter().copied().fold(0.0, f64::max));
        println!(
            "| {name} | {:.1} | {lo:.1} | {hi:.1} | {:+.2}% |",
            median(t),
            100.0 * (median(t) / base - 1.0)
        );
    }
}
