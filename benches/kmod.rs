//! Kernel module benchmark: capture deviation (trigger to the last thread stopped) and
//! pause (trigger to every thread running again) of `sdt run --backend kmod` against
//! `--backend ptrace`, in the QEMU guest (Debian's 6.1 kernel, where the module loads),
//! same boot, configurations interleaved.
//!
//! The workload is `workloads/heap.c`: N threads over a small heap (4 MiB: the copy,
//! the same for both backends, stays a small part of the pause), writing 10% of it
//! between ten snapshots while they compute; the main thread reaches the breakpoint
//! while the workers run. Figures are over the nine snapshots after the first, of every
//! round.
//!
//! ```sh
//! scripts/bench kmod                          # 2, 4, 8 threads, 3 rounds, 4 guest CPUs
//! scripts/bench kmod --threads 2,8 --rounds 5 --heap-mb 16 --cpus 2
//! ```
//!
//! The guest's CPUs are threads of QEMU on this machine's: with more of them than it has
//! cores, an IPI to a CPU whose thread is not running waits for the host to schedule it,
//! which both backends pay. `--cpus 2` keeps them within 2 cores.
//!
//! Needs `qemu-system-x86_64` (`scripts/guest/prepare` installs it), make and gcc;
//! builds `kmod/` against the guest kernel's headers.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;
use stats::{median, p90};
use workloads::workspace;

mod stats;
mod workloads;

const DIRTY: u32 = 10;
const SNAPSHOTS: u32 = 10;
const GAP_MS: u32 = 100;
struct Options {
    threads: Vec<u32>,
    rounds: u32,
    heap_mb: u32,
    /// The guest's CPUs (`scripts/guest/run`'s default: 4).
    cpus: u32,
}

fn parse_options() -> Options {
    let mut opts = Options { threads: vec![2, 4, 8], rounds: 3, heap_mb: 4, cpus: 4 };
    let mut args = std::env::args().skip(1).filter(|a| a != "--bench");
    while let Some(flag) = args.next() {
        let value = args.next().unwrap_or_else(|| panic!("{flag} needs a value"));
        let number = |v: &str| v.parse::<u32>().unwrap_or_else(|_| panic!("{flag}: bad number {v}"));
        match flag.as_str() {
            "--threads" => opts.threads = value.split(',').map(number).collect(),
            "--rounds" => opts.rounds = number(&value),
            "--heap-mb" => opts.heap_mb = number(&value),
            "--cpus" => opts.cpus = number(&value),
            other => panic!("unknown option {other} (--threads, --rounds, --heap-mb, --cpus)"),
        }
    }
    opts
}

/// `scripts/guest/prepare`'s variables.
fn prepare() -> BTreeMap<String, String> {
    let out =
        Command::new(workspace().join("scripts/guest/prepare")).output().expect("scripts/guest/prepare");
    assert!(out.status.success(), "scripts/guest/prepare failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.replace('\\', "")))
        .collect()
}

/// Builds `kmod/sdt.ko` against the guest kernel's headers.
fn build_module(kdir: &str) -> PathBuf {
    let kmod = workspace().join("kmod");
    let out = Command::new("make").arg("-C").arg(&kmod).arg(format!("KDIR={kdir}")).output().expect("make");
    assert!(out.status.success(), "make -C kmod failed: {}", String::from_utf8_lossy(&out.stderr));
    kmod.join("sdt.ko")
}

const GUEST_SCRIPT: &str = r#"
cd /tmp
for r in $(seq @ROUNDS@); do
    for t in @THREADS@; do
        heap $t @HEAP@ @DIRTY@ @SNAPSHOTS@ @GAP_MS@ >/tmp/plain.out
        echo "GUEST plain t=$t $(grep rounds_ms /tmp/plain.out)"
        for b in ptrace kmod; do
            rm -rf /tmp/store
            sdt run -q --backend $b --store /tmp/store -- heap $t @HEAP@ @DIRTY@ @SNAPSHOTS@ @GAP_MS@ \
                >/tmp/out 2>/tmp/err
            rc=$?
            echo "GUEST run b=$b t=$t rc=$rc $(grep rounds_ms /tmp/out)"
            [ $rc = 0 ] || tail -n 5 /tmp/err
            echo "GUEST json b=$b t=$t $(sdt ls --json --store /tmp/store | tr -d '\n')"
        done
    done
done
echo "GUEST status $(tr '\n' ' ' </sys/class/misc/sdt/status)"
"#;

/// Per-snapshot figures of one backend at one thread count, over every round.
#[derive(Default)]
struct Figures {
    deviation_us: Vec<f64>,
    pause_us: Vec<f64>,
    rounds_ms: Vec<f64>,
}

/// `rounds_ms N` in a line.
fn rounds_ms(line: &str) -> Option<f64> {
    line.split("rounds_ms ").nth(1)?.split_whitespace().next()?.parse().ok()
}

/// The value of `key=` in a line.
fn value<'a>(line: &'a str, key: &str) -> &'a str {
    line.split_whitespace().find_map(|t| t.strip_prefix(key)?.strip_prefix('=')).unwrap_or("")
}

fn main() {
    let opts = parse_options();
    let vars = prepare();
    let module = build_module(&vars["GUEST_KDIR"]);
    let dir = workspace().join("target/bench-kmod");
    std::fs::create_dir_all(&dir).unwrap();
    let exe = workloads::build("heap", &dir, "heap", &[]);
    let sdt = workloads::release().join("sdt");
    let threads: Vec<String> = opts.threads.iter().map(u32::to_string).collect();
    let script = GUEST_SCRIPT
        .replace("@ROUNDS@", &opts.rounds.to_string())
        .replace("@THREADS@", &threads.join(" "))
        .replace("@HEAP@", &opts.heap_mb.to_string())
        .replace("@DIRTY@", &DIRTY.to_string())
        .replace("@SNAPSHOTS@", &SNAPSHOTS.to_string())
        .replace("@GAP_MS@", &GAP_MS.to_string());
    let path = dir.join("guest.sh");
    std::fs::write(&path, script).unwrap();
    let out = Command::new(workspace().join("scripts/guest/run"))
        .args(["--timeout", "1800", "--memory", "1G", "--cpus", &opts.cpus.to_string(), "--module"])
        .arg(&module)
        .arg("--file")
        .arg(&sdt)
        .arg("--file")
        .arg(&exe)
        .arg("--")
        .arg(&path)
        .output()
        .expect("scripts/guest/run");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "the guest run failed:\n{text}\n{}", String::from_utf8_lossy(&out.stderr));

    let mut figures: BTreeMap<(u32, &str), Figures> = BTreeMap::new();
    let mut plain: BTreeMap<u32, Vec<f64>> = BTreeMap::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("GUEST ") else { continue };
        let t: u32 = value(rest, "t").parse().unwrap_or(0);
        let backend = if value(rest, "b") == "kmod" { "kmod" } else { "ptrace" };
        if rest.starts_with("plain ") {
            plain.entry(t).or_default().extend(rounds_ms(rest));
        } else if rest.starts_with("run ") {
            assert_eq!(value(rest, "rc"), "0", "sdt run failed in the guest:\n{text}");
            figures.entry((t, backend)).or_default().rounds_ms.extend(rounds_ms(rest));
        } else if rest.starts_with("json ") {
            let json = rest.splitn(4, ' ').nth(3).unwrap_or("[]");
            let snaps: Vec<Value> = serde_json::from_str(json).unwrap_or_else(|e| panic!("{e}: {json}"));
            assert_eq!(snaps.len() as u32, SNAPSHOTS, "every breakpoint should have captured: {json}");
            let f = figures.entry((t, backend)).or_default();
            for s in snaps.iter().skip(1) {
                f.deviation_us.push(s["deviation_us"].as_f64().unwrap_or(0.0));
                f.pause_us.push(s["pause_us"].as_f64().unwrap_or(0.0));
            }
        }
    }

    let kernel = text.lines().find_map(|l| l.split("SDT-GUEST-START kernel ").nth(1)).unwrap_or("?");
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "kernel module vs ptrace in the QEMU guest (kernel {kernel}; software emulation on this machine's \
         {cores} cores), one boot, {} rounds interleaved;",
        opts.rounds
    );
    println!(
        "workload heap: {} MiB, {DIRTY}% written between {SNAPSHOTS} snapshots, {GAP_MS} ms of computing \
         between them; page-hash mode (the 6.1 kernel has no PAGEMAP_SCAN);",
        opts.heap_mb
    );
    println!(
        "deviation and pause are per snapshot after the first (median, p90); slowdown: the workload's own time"
    );
    println!("under sdt run against without it (median of its rounds).");
    println!();
    println!(
        "| threads | backend | deviation µs | p90 µs | pause ms | p90 ms | slowdown % | kmod / ptrace deviation | kmod / ptrace pause |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    for &t in &opts.threads {
        let over = if t + 1 > opts.cpus { "*" } else { "" };
        let base = median(plain.get(&t).map_or(&[][..], Vec::as_slice));
        let dev = |b: &str| median(&figures[&(t, b)].deviation_us);
        let pause = |b: &str| median(&figures[&(t, b)].pause_us);
        for backend in ["ptrace", "kmod"] {
            let f = &figures[&(t, backend)];
            let ratios = if backend == "kmod" {
                format!(
                    "{:.2}× | {:.2}×",
                    dev("kmod") / dev("ptrace").max(1.0),
                    pause("kmod") / pause("ptrace").max(1.0)
                )
            } else {
                " | ".into()
            };
            println!(
                "| {t}{over} | {backend} | {:.0} | {:.0} | {:.2} | {:.2} | {:.1} | {ratios} |",
                median(&f.deviation_us),
                p90(&f.deviation_us),
                median(&f.pause_us) / 1e3,
                p90(&f.pause_us) / 1e3,
                100.0 * (median(&f.rounds_ms) / base.max(1.0) - 1.0),
            );
        }
    }
    println!();
    println!(
        "`*`: the workload's threads and its main thread outnumber the guest's {} CPUs (oversubscribed){}.",
        opts.cpus,
        if opts.cpus as usize > cores {
            format!("; the {} guest CPUs themselves share {cores} host cores", opts.cpus)
        } else {
            String::new()
        }
    );
    if let Some(status) = text.lines().find_map(|l| l.strip_prefix("GUEST status ")) {
        println!("module counters at the end: {status}");
    }
}
