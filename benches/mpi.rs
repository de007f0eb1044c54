//! MPI benchmark: what recording a job's message history costs, and what a global
//! snapshot pauses each rank.
//!
//! 1. **History cost**, on two message-heavy programs (`benches/workloads/mpi/`): a ring
//!    passing 10^5 messages of 8 bytes, and a 2-D halo exchange (Isend/Irecv/Waitall to
//!    four neighbours, an Allreduce every 50 iterations; 64² and 256² cells a rank). Each
//!    prints its own time (`MPI_Wtime` on rank 0, start-up excluded); the table compares
//!    it alone, under
//!    `sdt run --no-mpi-history`, and under `sdt run` (history recorded), and gives the
//!    bytes the ranks' history files take on disk per event. Twice: every rank on this
//!    host (shared memory), then, as root, a rank on each of the hosts
//!    `scripts/mpi-hosts` makes (TCP between network namespaces), as many as there are
//!    CPUs at most.
//! 2. **Global snapshot pause**: every rank of `heap.c` rewrites 10% of its 100 MiB, meets
//!    the others at a barrier and captures, 10 times; each rank's pauses against the same
//!    program run as a single process.
//! 3. **Replay record**: what `sdt replay` records of the ring, the halo exchange and a
//!    master–worker queue (`queue.c`, `MPI_ANY_SOURCE`), against recording every
//!    receive's match (in the record's own encoding, and in fixed 24-byte entries); and
//!    the queue's own time in the recorded run and in a replay.
//!
//! ```sh
//! scripts/bench mpi                     # 4 ranks, 5 runs each
//! scripts/bench mpi --ranks 8 --reps 3
//! ```
//!
//! Needs Open MPI (`mpicc`, `mpirun`) and `target/release/sdt` (scripts/bench builds it).
//! Writes the tables to `target/bench-mpi/mpi.md` too.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail, ensure};
use serde_json::Value;
use stats::{median, p90, range};
use workloads::workspace;

mod stats;
mod workloads;

struct Options {
    ranks: u32,
    reps: usize,
}

fn parse_options() -> Result<Options> {
    let mut opts = Options { ranks: 4, reps: 5 };
    let mut args = std::env::args().skip(1).filter(|a| a != "--bench");
    while let Some(flag) = args.next() {
        let value = args.next().with_context(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--ranks" => opts.ranks = value.parse().context("--ranks")?,
            "--reps" => opts.reps = value.parse().context("--reps")?,
            other => bail!("unknown option {other} (--ranks, --reps)"),
        }
    }
    ensure!(opts.ranks >= 2 && opts.reps >= 1, "--ranks must be at least 2 and --reps at least 1");
    Ok(opts)
}

/// How a program is run.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Alone,
    NoHistory,
    History,
}

/// Where a job's ranks run.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Place {
    /// All on this host, over shared memory, as many ranks as asked whatever the CPUs.
    OneHost,
    /// One on each of the hosts `scripts/mpi-hosts` made (network namespaces joined by
    /// a bridge), over TCP.
    Hosts,
}

/// `mpirun -np N [sdt run …] exe args` on one host, with what root and a small machine
/// need.
fn mpirun(ranks: u32, mode: Mode, store: &Path, exe: &Path, args: &[&str]) -> Result<String> {
    mpirun_at(Place::OneHost, ranks, mode, store, exe, args)
}

/// [`mpirun`] with the ranks at `place`.
fn mpirun_at(
    place: Place,
    ranks: u32,
    mode: Mode,
    store: &Path,
    exe: &Path,
    args: &[&str],
) -> Result<String> {
    let mut cmd = match place {
        Place::OneHost => {
            let mut cmd = Command::new("mpirun");
            cmd.arg("--oversubscribe");
            cmd
        }
        Place::Hosts => {
            let mut cmd = Command::new(workspace().join("scripts/mpi-hosts"));
            cmd.arg("mpirun");
            cmd
        }
    };
    cmd.args(["-np", &ranks.to_string()]);
    // Open MPI refuses root unless told.
    if is_root() {
        cmd.arg("--allow-run-as-root");
    }
    if mode != Mode::Alone {
        cmd.arg(workloads::release().join("sdt")).args(["run", "-q", "--store"]).arg(store);
        if mode == Mode::NoHistory {
            cmd.arg("--no-mpi-history");
        }
        cmd.arg("--");
    }
    let out = cmd.arg(exe).args(args).output().context("running mpirun (is Open MPI installed?)")?;
    ensure!(
        out.status.success(),
        "{} failed: {}{}",
        exe.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The seconds a program printed as `… in S s…`.
fn program_secs(out: &str) -> Result<f64> {
    out.split(" in ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|s| s.parse().ok())
        .with_context(|| format!("no time in the program's output: {out}"))
}

/// The run directories of a store (one per rank).
fn runs(store: &Path) -> Result<Vec<PathBuf>> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(store.join("runs"))
        .with_context(|| format!("reading {}", store.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    Ok(dirs)
}

/// Events recorded in a store's history files, and the bytes those files take on disk.
fn history_size(store: &Path) -> Result<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let (mut events, mut bytes) = (0, 0);
    for run in runs(store)? {
        let file = std::fs::read(run.join("mpi-events")).context("reading a rank's mpi-events")?;
        events += sdt_history::packed::recorded(&file)
            .with_context(|| format!("{}: no history header", run.display()))?;
        for name in ["mpi-events", "mpi-comms", "mpi-sites"] {
            bytes += std::fs::metadata(run.join(name)).map_or(0, |m| m.blocks() * 512);
        }
    }
    Ok((events, bytes))
}

/// Every snapshot's pause in µs, over every rank of a store.
fn pauses_us(store: &Path) -> Result<Vec<f64>> {
    let sdt = workloads::release().join("sdt");
    let mut pauses = Vec::new();
    for run in runs(store)? {
        let id = run.file_name().and_then(|n| n.to_str()).context("run directory name")?;
        let out = Command::new(&sdt)
            .args(["ls", "--json", "--store"])
            .arg(store)
            .args(["--run", id])
            .output()
            .context("running sdt ls")?;
        ensure!(out.status.success(), "sdt ls failed: {}", String::from_utf8_lossy(&out.stderr));
        let snaps: Vec<Value> = serde_json::from_slice(&out.stdout).context("reading sdt ls --json")?;
        // The first capture of a rank copies its whole heap: the figure is for the others.
        pauses.extend(snaps.iter().skip(1).filter_map(|s| s["pause_us"].as_f64()));
    }
    Ok(pauses)
}

fn history_cost(opts: &Options, dir: &Path, place: Place) -> Result<String> {
    let halo = workloads::build_with("mpicc", "mpi/halo", dir, "halo", &["-lm"]);
    let ring = workloads::build_with("mpicc", "mpi/ring", dir, "ring", &[]);
    let ranks = match place {
        Place::OneHost => opts.ranks,
        // A rank per CPU: ranks over TCP that share a CPU wait out each other's time
        // slices while they poll (3 ranks on 2 CPUs: milliseconds a message).
        Place::Hosts => opts.ranks.min(cpus() as u32).max(2),
    };
    let mut programs = vec![
        ("ring", ranks, ring.clone(), vec!["100000"]),
        ("halo", ranks, halo.clone(), vec![]),
        // Blocks of 256² cells a rank: 16 times the work between the same messages.
        ("halo 256²", ranks, halo, vec!["2000", "256"]),
    ];
    let title = match place {
        Place::OneHost => {
            // One rank passing messages to itself: no other rank shares its CPU, so the
            // difference is the library's own cost a message, steady from run to run.
            programs.push(("ring of 1 rank", 1, ring, vec!["1000000"]));
            format!("{ranks} ranks on one host (shared memory) unless the row says")
        }
        Place::Hosts => {
            format!("{ranks} ranks, one on each of {ranks} hosts (scripts/mpi-hosts: TCP over a bridge)")
        }
    };
    let mut table = format!(
        "history cost: {title}, the program's own time (MPI_Wtime, rank 0), median of {} runs\n\n\
         | program | alone s | sdt run, no history s | sdt run s | history cost % | cost vs alone % | events | bytes per event |\n\
         |---|---|---|---|---|---|---|---|\n",
        opts.reps
    );
    for (name, ranks, exe, args) in &programs {
        let mut times = [Vec::new(), Vec::new(), Vec::new()];
        let mut size = (0, 0);
        for rep in 0..opts.reps {
            for (i, mode) in [Mode::Alone, Mode::NoHistory, Mode::History].into_iter().enumerate() {
                eprintln!(
                    "bench mpi: {name} run {}/{} ({})",
                    rep + 1,
                    opts.reps,
                    ["alone", "no history", "history"][i]
                );
                let store = tempfile::tempdir_in(dir).context("making a store")?;
                times[i].push(program_secs(&mpirun_at(place, *ranks, mode, store.path(), exe, args)?)?);
                if mode == Mode::History {
                    size = history_size(store.path())?;
                }
            }
        }
        let [alone, bare, history] = times.map(|t| median(&t));
        table += &format!(
            "| {name} | {alone:.3} | {bare:.3} | {history:.3} | {:+.1} | {:+.1} | {} | {:.1} |\n",
            100.0 * (history / bare - 1.0),
            100.0 * (history / alone - 1.0),
            size.0,
            size.1 as f64 / size.0.max(1) as f64
        );
    }
    Ok(table)
}

fn global_pause(opts: &Options, dir: &Path) -> Result<String> {
    let include = workspace().join("sdt-lib/include");
    let include = format!("-I{}", include.display());
    let exe = workloads::build_with("mpicc", "mpi/heap", dir, "heap", &[&include]);
    let args = ["100", "10", "10"];
    let mut table = format!(
        "global snapshot pause: heap.c, 100 MiB per rank, 10% of its pages written between 10 snapshots; \
         pauses of every snapshot after each rank's first, over {} runs\n\n\
         | ranks | pause p50 ms | p90 ms | max ms | min ms | p50 against one process |\n|---|---|---|---|---|---|\n",
        opts.reps
    );
    let mut single = 0.0;
    for ranks in [1, opts.ranks] {
        let mut pauses = Vec::new();
        for rep in 0..opts.reps {
            eprintln!("bench mpi: heap, {ranks} rank(s), run {}/{}", rep + 1, opts.reps);
            let store = tempfile::tempdir_in(dir).context("making a store")?;
            mpirun(ranks, Mode::History, store.path(), &exe, &args)?;
            pauses.extend(pauses_us(store.path())?);
        }
        let p50 = median(&pauses) / 1e3;
        if ranks == 1 {
            single = p50;
        }
        let (min, max) = range(&pauses);
        table += &format!(
            "| {ranks} | {p50:.2} | {:.2} | {:.2} | {:.2} | {:.2}× |\n",
            p90(&pauses) / 1e3,
            max / 1e3,
            min / 1e3,
            p50 / single
        );
    }
    Ok(table)
}

/// Whether this process runs as root (Open MPI then needs telling).
fn is_root() -> bool {
    std::fs::metadata("/proc/self").is_ok_and(|m| std::os::unix::fs::MetadataExt::uid(&m) == 0)
}

/// `sdt replay` of the job in `store` (`--dry-run` only writes the record): its stderr
/// and stdout.
fn sdt_replay(store: &Path, dry_run: bool) -> Result<(String, String)> {
    let mut cmd = Command::new(workloads::release().join("sdt"));
    cmd.args(["replay", "--store"]).arg(store);
    if dry_run {
        cmd.arg("--dry-run");
    }
    if is_root() {
        cmd.env("OMPI_ALLOW_RUN_AS_ROOT", "1").env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
    }
    let out = cmd.output().context("running sdt replay")?;
    let (stderr, stdout) = (
        String::from_utf8_lossy(&out.stderr).into_owned(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    );
    ensure!(out.status.success(), "sdt replay failed: {stderr}");
    Ok((stderr, stdout))
}

/// What `sdt replay` says of its record.
struct RecordSize {
    /// Receives (and wildcard probes) recorded.
    recorded: u64,
    /// Receives (and wildcard probes) the job made.
    receives: u64,
    /// Bytes of the record.
    bytes: u64,
    /// Bytes of a record of every match in the same encoding.
    every_encoded: u64,
    /// Bytes of every match in fixed 24-byte entries.
    every_fixed: u64,
}

/// `…: N of M receives recorded for replay[, …] (X bytes; every match: Y bytes in this
/// encoding, Z bytes as fixed entries)`.
fn record_size(said: &str) -> Result<RecordSize> {
    let parse = || -> Option<RecordSize> {
        let line = said.lines().find(|l| l.contains("receives recorded for replay"))?;
        let (counts, rest) = line.split_once(" receives recorded for replay")?;
        let (left, m) = counts.rsplit_once(" of ")?;
        let n = left.rsplit(' ').next()?;
        let (_, sizes) = rest.split_once('(')?;
        let (x, rest) = sizes.split_once(" bytes; every match: ")?;
        let (y, rest) = rest.split_once(" bytes in this encoding, ")?;
        let z = rest.strip_suffix(" bytes as fixed entries)")?;
        Some(RecordSize {
            recorded: n.parse().ok()?,
            receives: m.parse().ok()?,
            bytes: x.parse().ok()?,
            every_encoded: y.parse().ok()?,
            every_fixed: z.parse().ok()?,
        })
    };
    parse().with_context(|| format!("no record size in: {said}"))
}

fn replay_record(opts: &Options, dir: &Path) -> Result<String> {
    let programs = [
        ("ring", workloads::build_with("mpicc", "mpi/ring", dir, "ring", &[]), vec!["100000"]),
        ("halo", workloads::build_with("mpicc", "mpi/halo", dir, "halo", &["-lm"]), vec![]),
        ("queue", workloads::build_with("mpicc", "mpi/queue", dir, "queue", &[]), vec![]),
    ];
    let mut table = format!(
        "replay record: {} ranks, what `sdt replay` records against a record of every receive's match, \
         in the same encoding and in fixed 24-byte entries; the program's own time in the recorded run \
         and in its replay, median of {} pairs\n\n\
         | program | receives | recorded | record bytes | every match bytes | record / every match | \
         every match, fixed bytes | record / every match, fixed | recorded run s | replay s |\n\
         |---|---|---|---|---|---|---|---|---|---|\n",
        opts.ranks, opts.reps
    );
    for (name, exe, args) in &programs {
        let (mut recorded_secs, mut replay_secs) = (Vec::new(), Vec::new());
        let mut size = None;
        for rep in 0..opts.reps {
            eprintln!("bench mpi: replay of {name}, run {}/{}", rep + 1, opts.reps);
            let store = tempfile::tempdir_in(dir).context("making a store")?;
            recorded_secs.push(program_secs(&mpirun(opts.ranks, Mode::History, store.path(), exe, args)?)?);
            size = Some(record_size(&sdt_replay(store.path(), true)?.0)?);
            let (_, printed) = sdt_replay(store.path(), false)?;
            replay_secs.push(program_secs(&printed)?);
        }
        let RecordSize { recorded, receives, bytes, every_encoded, every_fixed } =
            size.context("--reps is at least 1")?;
        let percent = |every: u64| 100.0 * bytes as f64 / every.max(1) as f64;
        table += &format!(
            "| {name} | {receives} | {recorded} | {bytes} | {every_encoded} | {:.1}% | {every_fixed} | {:.2}% | {:.3} | {:.3} |\n",
            percent(every_encoded),
            percent(every_fixed),
            median(&recorded_secs),
            median(&replay_secs)
        );
    }
    Ok(table)
}

/// CPUs this process may run on.
fn cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// The history's cost with the ranks on hosts of their own, talking TCP, as a job over
/// several machines does: with at least `ranks` of `scripts/mpi-hosts`' hosts up
/// (brought up here, and down again after, where none were); or why it cannot run.
fn history_cost_across_hosts(opts: &Options, dir: &Path) -> Result<String> {
    if !is_root() {
        return Ok("history cost across hosts: skipped (network namespaces need root)\n".into());
    }
    let script = workspace().join("scripts/mpi-hosts");
    let hosts = |args: &[&str]| -> Result<()> {
        let out = Command::new(&script).args(args).output().context("running scripts/mpi-hosts")?;
        ensure!(
            out.status.success(),
            "scripts/mpi-hosts {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
        Ok(())
    };
    let were_up = Path::new("/run/netns/sdt-h1").exists();
    let count = opts.ranks.max(3).to_string();
    if let Err(e) = hosts(&["up", "--count", &count]) {
        return Ok(format!("history cost across hosts: skipped ({e:#})\n"));
    }
    let table = history_cost(opts, dir, Place::Hosts);
    if !were_up {
        hosts(&["down"])?;
    }
    table
}

fn real_main() -> Result<()> {
    let opts = parse_options()?;
    let dir = workspace().join("target/bench-mpi");
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut report = format!("MPI benchmark: Open MPI, {} CPUs\n\n", cpus());
    report += &history_cost(&opts, &dir, Place::OneHost)?;
    report += "\n";
    report += &history_cost_across_hosts(&opts, &dir)?;
    report += "\n";
    report += &global_pause(&opts, &dir)?;
    report += "\n";
    report += &replay_record(&opts, &dir)?;
    print!("{report}");
    std::io::stdout().flush().ok();
    let md = dir.join("mpi.md");
    std::fs::write(&md, &report).with_context(|| format!("writing {}", md.display()))?;
    Ok(())
}

fn main() {
    if let Err(err) = real_main() {
        eprintln!("bench mpi: {err:#}");
        std::process::exit(1);
    }
}
