//! Restore benchmark: how long `sdt restore` takes to turn a snapshot back into a running
//! process, on this machine and in the QEMU guest (Debian's 6.1 kernel), where CRIU 3.17
//! restores the same snapshot, exported with `sdt export criu`, in the same boot.
//!
//! The workload is `workloads/heap.c`: 4 threads (`--threads`) over an H MiB heap of
//! random bytes, three snapshots with 10% of the pages written between them. S0 is stored
//! whole; the last one's changed pages are patches against the snapshots before it, so
//! restoring it reads through the store's index as any later snapshot does.
//!
//! ```sh
//! scripts/bench restore                            # 4, 64 and 256 MiB, here and in the guest
//! scripts/bench restore --heap-mb 256 --runs 9 --guest no
//! ```
//!
//! Needs root (the restored process gets a PID namespace), `target/release/sdt` and
//! `libsdt.a` (scripts/bench builds them) and gcc. The guest part needs
//! `qemu-system-x86_64` (`scripts/guest/prepare` installs it) and says it is skipped
//! where it is missing.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use serde_json::Value;
use stats::{median, range};
use workloads::workspace;

mod stats;
mod workloads;

/// The workload's shape: writes DIRTY % of its pages between SNAPSHOTS snapshots, each
/// after GAP_MS of computing.
const DIRTY: u32 = 10;
const SNAPSHOTS: u32 = 3;
const GAP_MS: u32 = 20;

struct Options {
    threads: u32,
    heap_mb: Vec<u32>,
    runs: usize,
    guest: bool,
}

fn parse_options() -> Options {
    let mut opts = Options { threads: 4, heap_mb: vec![4, 64, 256], runs: 5, guest: true };
    let mut args = std::env::args().skip(1).filter(|a| a != "--bench");
    while let Some(flag) = args.next() {
        let value = args.next().unwrap_or_else(|| panic!("{flag} needs a value"));
        let number = |n: &str| -> u32 { n.parse().unwrap_or_else(|_| panic!("{flag}: bad number {n}")) };
        match flag.as_str() {
            "--threads" => opts.threads = number(&value),
            "--heap-mb" => opts.heap_mb = value.split(',').map(number).collect(),
            "--runs" => opts.runs = number(&value).max(1) as usize,
            "--guest" => opts.guest = value != "no",
            other => panic!("unknown option {other} (--threads, --heap-mb, --runs, --guest yes|no)"),
        }
    }
    opts
}

/// The workload's arguments for an `heap_mb` heap.
fn workload_args(threads: u32, heap_mb: u32) -> [String; 5] {
    [threads, heap_mb, DIRTY, SNAPSHOTS, GAP_MS].map(|n| n.to_string())
}

/// The snapshot restored in the guest, and the second one restored here: the last.
fn last_snapshot() -> String {
    format!("S{}", SNAPSHOTS - 1)
}

/// One `sdt restore`: the time sdt reports (reading the snapshot to every thread ready),
/// the bytes of pages it wrote, and the whole command's wall time (the program's rest and
/// its exit included).
struct Restore {
    secs: f64,
    bytes: f64,
    command_secs: f64,
}

/// A figure as sdt prints it (`12.3 ms`, `256.2 MiB`), in the base unit of `units`.
fn quantity(text: &str, units: &[(&str, f64)]) -> Option<f64> {
    let (number, unit) = text.trim().split_once(' ')?;
    let scale = units.iter().find(|(name, _)| *name == unit)?.1;
    Some(number.parse::<f64>().ok()? * scale)
}

/// Seconds and bytes from sdt's line
/// `sdt: restored S2 of run 1 in 12.3 ms (192.0 KiB of pages); it ran with its breakpoints off`.
fn parse_restored(text: &str) -> Option<(f64, f64)> {
    let line = text[text.find("sdt: restored ")?..].lines().next()?;
    let (_, rest) = line.split_once(" in ")?;
    let (time, rest) = rest.split_once(" (")?;
    let (size, _) = rest.split_once(" of pages")?;
    let secs = quantity(time, &[("µs", 1e-6), ("ms", 1e-3), ("s", 1.0)])?;
    let kib = 1024.0;
    let bytes = quantity(size, &[("B", 1.0), ("KiB", kib), ("MiB", kib * kib), ("GiB", kib * kib * kib)])?;
    Some((secs, bytes))
}

fn ms(secs: f64) -> f64 {
    secs * 1e3
}

fn mib(bytes: f64) -> f64 {
    bytes / (1u64 << 20) as f64
}

/// True if we run as root, which `sdt restore` needs for its PID namespace.
fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Uid:").map(|ids| ids.split_whitespace().next() == Some("0")))
        })
        .unwrap_or(false)
}

/// True if `qemu-system-x86_64` is on PATH.
fn have_qemu() -> bool {
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join("qemu-system-x86_64").is_file()))
}

/// Closes every descriptor but stdin, stdout and stderr, then runs its arguments. `sdt run`
/// hands the program the descriptors it inherits, and `sdt restore` refuses a snapshot
/// holding a pipe other than stdio; cargo and CI runners can leave such pipes open.
const STDIO_ONLY: &str =
    r#"for fd in $(ls /proc/$$/fd); do [ "$fd" -gt 2 ] && eval "exec $fd>&-"; done; exec "$@""#;

/// Captures the workload over `heap_mb` MiB into `store`; returns the snapshots' names.
fn capture(sdt: &Path, exe: &Path, store: &Path, threads: u32, heap_mb: u32) -> Vec<String> {
    std::fs::remove_dir_all(store).ok();
    let out = Command::new("bash")
        .args(["-c", STDIO_ONLY, "stdio-only"])
        .arg(sdt)
        .args(["run", "-q", "--store"])
        .arg(store)
        .arg("--")
        .arg(exe)
        .args(workload_args(threads, heap_mb))
        .output()
        .expect("sdt run");
    assert!(out.status.success(), "sdt run failed: {}", String::from_utf8_lossy(&out.stderr));
    let ls = Command::new(sdt).args(["ls", "--json", "--store"]).arg(store).output().expect("sdt ls");
    let snaps: Vec<Value> = serde_json::from_slice(&ls.stdout).expect("ls --json");
    let names: Vec<String> = snaps.iter().filter_map(|s| Some(s["name"].as_str()?.to_owned())).collect();
    assert_eq!(names.len() as u32, SNAPSHOTS, "every breakpoint should have captured");
    names
}

fn restore_once(sdt: &Path, store: &Path, snapshot: &str) -> Restore {
    let start = Instant::now();
    let out = Command::new(sdt)
        .args(["restore", "--store"])
        .arg(store)
        .arg(snapshot)
        .stdin(Stdio::null())
        .output()
        .expect("sdt restore");
    let command_secs = start.elapsed().as_secs_f64();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "sdt restore {snapshot} failed: {said}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("rounds_ms "),
        "the program restored from {snapshot} did not run to its end: {said}"
    );
    let (secs, bytes) = parse_restored(&said).unwrap_or_else(|| panic!("no restore line from sdt: {said}"));
    Restore { secs, bytes, command_secs }
}

/// This machine: S0 and the last snapshot of each heap size, restored alternately.
fn host(opts: &Options, sdt: &Path, exe: &Path, dir: &Path) {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "restore benchmark, this machine ({cpus} CPUs): `sdt restore` of snapshots of `heap {} H {DIRTY} {SNAPSHOTS} {GAP_MS}`, \
         S0 (stored whole) and {} (patches over the ones before), alternately, {} runs each (median)",
        opts.threads,
        last_snapshot(),
        opts.runs
    );
    println!(
        "restore: as sdt reports it, reading the snapshot to every thread ready; command: `sdt restore` from start to exit,"
    );
    println!("the program's remaining rounds ({GAP_MS} ms each) and its exit included");
    println!();
    if !is_root() {
        println!("this machine: skipped: this bench restores as root (a PID namespace of the restore's own)");
        return;
    }
    println!("| threads | heap MiB | snapshot | pages MiB | restore ms | min–max ms | GB/s | command ms |");
    println!("|---|---|---|---|---|---|---|---|");
    let over = if opts.threads as usize > cpus { "*" } else { "" };
    for &heap_mb in &opts.heap_mb {
        let store = dir.join(format!("store-{heap_mb}"));
        let names = capture(sdt, exe, &store, opts.threads, heap_mb);
        let chosen = [names[0].clone(), names[names.len() - 1].clone()];
        let mut runs: [Vec<Restore>; 2] = Default::default();
        for _ in 0..opts.runs {
            for (snapshot, runs) in chosen.iter().zip(runs.iter_mut()) {
                runs.push(restore_once(sdt, &store, snapshot));
            }
        }
        for (snapshot, runs) in chosen.iter().zip(&runs) {
            let secs: Vec<f64> = runs.iter().map(|r| r.secs).collect();
            let (lo, hi) = range(&secs);
            let bytes = runs[0].bytes;
            println!(
                "| {}{over} | {heap_mb} | {snapshot} | {:.1} | {:.1} | {:.1}–{:.1} | {:.2} | {:.1} |",
                opts.threads,
                mib(bytes),
                ms(median(&secs)),
                ms(lo),
                ms(hi),
                bytes / median(&secs) / 1e9,
                ms(median(&runs.iter().map(|r| r.command_secs).collect::<Vec<_>>())),
            );
        }
        std::fs::remove_dir_all(&store).ok();
    }
    if !over.is_empty() {
        println!();
        println!("`*`: more threads than CPUs (oversubscribed).");
    }
}

/// Run in the guest: for each size, capture (page-hash mode: the 6.1 kernel has no
/// PAGEMAP_SCAN), export the last snapshot for CRIU, then restore it with sdt and with
/// `criu restore -d` in turn. CRIU's own log says when it resumed the tasks; -d returns
/// then. The output file is put back as it was at the snapshot (empty) before each CRIU
/// restore, which checks its size, and read after the restored process has gone.
const GUEST_SCRIPT: &str = r#"
now() { ns-date +%s%N; }
for i in 1 2 3 4 5; do t0=$(now); t1=$(now); echo "GUEST clock ns=$((t1 - t0))"; done
criu check >/tmp/check.txt 2>&1 || { echo "GUEST error criu check: $(tail -n 1 /tmp/check.txt)"; exit 1; }
for mb in @SIZES@; do
    st=/tmp/store-$mb img=/tmp/img-$mb
    sdt run -q --store $st -- heap @THREADS@ $mb @DIRTY@ @SNAPSHOTS@ @GAP_MS@ </dev/null >/tmp/out 2>/tmp/err
    rc=$?
    [ $rc = 0 ] || { echo "GUEST error sdt run rc=$rc: $(tail -n 3 /tmp/err)"; exit 1; }
    t0=$(now); sdt export criu --store $st @SNAP@ -o $img 2>/tmp/export.txt; rc=$?; t1=$(now)
    [ $rc = 0 ] || { echo "GUEST error sdt export rc=$rc: $(tail -n 3 /tmp/export.txt)"; exit 1; }
    echo "GUEST export $mb ns=$((t1 - t0))"
    for i in $(seq @RUNS@); do
        t0=$(now); sdt restore --store $st @SNAP@ </dev/null >/tmp/sdt-out 2>/tmp/sdt-err; rc=$?; t1=$(now)
        echo "GUEST sdt $mb rc=$rc ns=$((t1 - t0)) ended=$(grep -c rounds_ms /tmp/sdt-out) $(grep 'sdt: restored' /tmp/sdt-err)"
        [ $rc = 0 ] || tail -n 5 /tmp/sdt-err
        : >/tmp/out
        t0=$(now); criu restore -d -D $img --shell-job -v4 -o restore-$i.log </dev/null >/tmp/criu.txt 2>&1; rc=$?; t1=$(now)
        n=0; while pidof heap >/dev/null && [ $n -lt 600 ]; do usleep 50000; n=$((n + 1)); done
        resumed=$(sed -n 's/^(\([0-9.]*\)) Restore finished successfully.*/\1/p' $img/restore-$i.log)
        echo "GUEST criu $mb rc=$rc ns=$((t1 - t0)) ended=$(grep -c rounds_ms /tmp/out) resumed=${resumed:-none}"
        [ $rc = 0 ] || grep -E 'Error|Warn' $img/restore-$i.log | tail -n 5
    done
    rm -rf $st $img
done
"#;

/// The value of `key=` on a `GUEST` line.
fn value<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    line.split_whitespace().find_map(|t| t.strip_prefix(key)?.strip_prefix('='))
}

/// The guest's figures for one heap size.
#[derive(Default)]
struct GuestRow {
    export_secs: f64,
    sdt: Vec<Restore>,
    /// `criu restore -d` from start until it returned, the process running.
    criu_secs: Vec<f64>,
    /// When CRIU's log says the tasks were resumed.
    criu_log_secs: Vec<f64>,
}

fn guest(opts: &Options, sdt: &Path, exe: &Path, dir: &Path) {
    let snapshot = last_snapshot();
    if !have_qemu() {
        println!(
            "in the QEMU guest: skipped: qemu-system-x86_64 is not installed (scripts/guest/prepare installs it)"
        );
        return;
    }
    let sizes: Vec<String> = opts.heap_mb.iter().map(u32::to_string).collect();
    let script = GUEST_SCRIPT
        .replace("@SIZES@", &sizes.join(" "))
        .replace("@THREADS@", &opts.threads.to_string())
        .replace("@DIRTY@", &DIRTY.to_string())
        .replace("@SNAPSHOTS@", &SNAPSHOTS.to_string())
        .replace("@GAP_MS@", &GAP_MS.to_string())
        .replace("@SNAP@", &snapshot)
        .replace("@RUNS@", &opts.runs.to_string());
    let path = dir.join("guest.sh");
    std::fs::write(&path, script).unwrap();
    // The program, its store (whole once, patches after), its images and two restored
    // copies at once, with room to spare.
    let biggest = opts.heap_mb.iter().copied().max().unwrap_or(0);
    let memory = format!("{}M", 1024 + 12 * biggest);
    let out = Command::new(workspace().join("scripts/guest/run"))
        .args(["--memory", &memory, "--timeout", "900", "--file"])
        .arg(sdt)
        .arg("--file")
        .arg(exe)
        // GNU date, for nanoseconds: busybox's has none.
        .args(["--file", "/usr/bin/date:/usr/local/bin/ns-date", "--"])
        .arg(&path)
        .output()
        .expect("scripts/guest/run");
    let text = String::from_utf8_lossy(&out.stdout);
    let all = || format!("{text}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success() && !text.contains("GUEST error"), "the guest part failed:\n{}", all());

    let secs = |line: &str, key: &str| -> f64 {
        value(line, key)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or_else(|| panic!("no {key}= in '{line}'"))
    };
    let mut rows: Vec<GuestRow> = opts.heap_mb.iter().map(|_| GuestRow::default()).collect();
    // Reading the clock starts a program: slow in an emulated CPU, and taken off.
    let clock: Vec<f64> = text
        .lines()
        .filter_map(|l| l.strip_prefix("GUEST clock "))
        .map(|line| secs(line, "ns") / 1e9)
        .collect();
    let clock_secs = median(&clock);
    let wall = |line: &str| secs(line, "ns") / 1e9 - clock_secs;
    for line in text.lines().filter_map(|l| l.strip_prefix("GUEST ")) {
        let mut words = line.split_whitespace();
        let (what, heap) = (words.next().unwrap_or(""), words.next().and_then(|w| w.parse::<u32>().ok()));
        let Some(row) = heap.and_then(|h| opts.heap_mb.iter().position(|&m| m == h)).map(|i| &mut rows[i])
        else {
            continue;
        };
        let ok = value(line, "rc") == Some("0") && value(line, "ended") == Some("1");
        match what {
            "export" => row.export_secs = wall(line),
            "sdt" => {
                assert!(
                    ok,
                    "sdt restore failed in the guest, or its program did not run to its end:\n{}",
                    all()
                );
                let (restore, bytes) =
                    parse_restored(line).unwrap_or_else(|| panic!("no restore line: {line}"));
                row.sdt.push(Restore { secs: restore, bytes, command_secs: wall(line) });
            }
            "criu" => {
                assert!(
                    ok,
                    "criu restore failed in the guest, or its program did not run to its end:\n{}",
                    all()
                );
                row.criu_secs.push(wall(line));
                row.criu_log_secs.push(secs(line, "resumed"));
            }
            _ => {}
        }
    }
    let started = text.lines().find_map(|l| l.strip_prefix("SDT-GUEST-START kernel ")).unwrap_or("?");
    println!(
        "in the QEMU guest (kernel {started}; software emulation, QEMU's qemu64 CPU, {memory} of memory), one boot: \
         the same workload captured there (page-hash mode), {snapshot} exported with `sdt export criu` and restored by \
         `sdt restore` and by `criu restore -d -D DIR --shell-job` (CRIU 3.17) in turn, {} runs each (median)",
        opts.runs
    );
    println!(
        "sdt restore: as sdt reports it; command: from start to exit (the program's end included); criu restore -d: \
         from start until it returns, the process running; criu log: when CRIU's log says `Restore finished \
         successfully. Tasks resumed.` (its clock starts as criu does); wall times are less the {:.1} ms the guest takes \
         to read the clock (a program started)",
        ms(clock_secs)
    );
    println!();
    println!(
        "| threads | heap MiB | pages MiB | sdt restore ms | sdt restore command ms | sdt export criu ms | criu restore -d ms | criu log: resumed at ms | sdt restore / criu log |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    for (heap_mb, row) in opts.heap_mb.iter().zip(&rows) {
        let sdt_secs = median(&row.sdt.iter().map(|r| r.secs).collect::<Vec<_>>());
        let criu_log = median(&row.criu_log_secs);
        println!(
            "| {} | {heap_mb} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1}× |",
            opts.threads,
            mib(row.sdt.first().map_or(0.0, |r| r.bytes)),
            ms(sdt_secs),
            ms(median(&row.sdt.iter().map(|r| r.command_secs).collect::<Vec<_>>())),
            ms(row.export_secs),
            ms(median(&row.criu_secs)),
            ms(criu_log),
            sdt_secs / criu_log.max(1e-9),
        );
    }
}

fn main() {
    let opts = parse_options();
    let dir = workspace().join("target/bench-restore");
    std::fs::create_dir_all(&dir).unwrap();
    let exe = workloads::build("heap", &dir, "heap", &[]);
    let sdt: PathBuf = workloads::release().join("sdt");
    host(&opts, &sdt, &exe, &dir);
    println!();
    if opts.guest {
        guest(&opts, &sdt, &exe, &dir);
    }
}
