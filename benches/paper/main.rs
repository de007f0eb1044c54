//! `scripts/bench-paper`: the paper's evaluation as one command. Runs each workload at
//! 2, 4 and 8 threads without SDT, under `sdt run`, and under gdb's `gcore` at the same
//! ten points, and writes the paper's Table 2, its Figures 6–9 (CSV, PNG, SVG) and a
//! report that puts our figures beside the paper's.
//!
//! ```sh
//! scripts/bench-paper                                  # our seven workloads, default size
//! scripts/bench-paper --size small --reps 1 --threads 2 --only fft,lu
//! scripts/bench-paper --parsec ~/parsec-3.0 --splash ~/Splash-4 --list
//! ```
//!
//! Our workloads (`benches/workloads/paper/`) reach ten breakpoints that
//! `capture.toml` passes; PARSEC and SPLASH programs, built from the user's sources
//! (the layouts `suites` recognises), are captured by timed snapshots, ten spread over
//! the run, and checked by their own output. Each program ends with one line saying
//! whether it was found, built and ran, or why not; a run that fails its check, or that
//! cannot be measured, keeps its program and thread count out of the figures, and gcore
//! failing (a program that already ended) leaves only that row's gcore figures out.
//!
//! Needs `target/release/sdt` and `libsdt.a` (the script builds them), gcc and gdb.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use clap::{Parser, ValueEnum};

mod measure;
mod plots;
mod report;
#[path = "../stats.rs"]
mod stats;
mod suites;
#[path = "../workloads.rs"]
mod workloads;

use measure::{Cell, Runner};
use suites::Program;

const EXAMPLES: &str = "EXAMPLES:
  scripts/bench-paper                                  all seven workloads, 2/4/8 threads
  scripts/bench-paper --size small --reps 1 --only fft  a quick look
  scripts/bench-paper --parsec ~/parsec-3.0 --splash ~/Splash-4
                                                       the real programs too, from their sources
  scripts/bench-paper --parsec ~/parsec-3.0 --list     which of them can be found, and stop
  scripts/bench-paper --threads 2 --reps 1             one thread count: every figure but 7

SOURCES:
  --parsec  a PARSEC 3.0 tree (bin/parsecmgmt, pkgs/apps/NAME), built with parsecmgmt's
            gcc-pthreads; or a source mirror without parsecmgmt (NAME/ with its Makefile
            at its top or in src/, inputs in NAME/inputs/input_SIZE.tar), copied and built
            with `make version=pthreads` (bodytrack: ./configure --enable-threads, make)
  --splash  SPLASH-2/SPLASH-3 (codes/Makefile.config, codes/kernels/fft, …), Splash-4
            (Makefile.config, Splash-4/fft, Splash-4/lu-contiguous_blocks, Splash-4/fmm;
            the checkout or its Splash-4/ folder), copied and built with `make` (m4 where
            the sources are .c.in); or a PARSEC 3.0 tree for its SPLASH-2x
  Each runs with its own check: FFT and LU -t (TEST PASSED), FMM (Finished FMM),
  blackscholes (prices.txt), swaptions (its prices), fluidanimate (out.fluid),
  bodytrack (poses.txt). A failed check is a failed program, not a figure.";

/// The paper's evaluation: Table 2 and Figures 6–9, for our workloads and, given their
/// sources, PARSEC's and SPLASH-2's programs.
#[derive(Parser, Debug)]
#[command(name = "bench-paper", after_help = EXAMPLES)]
pub struct Args {
    /// Problem size of every workload (PARSEC: simsmall, simlarge, native).
    #[arg(long, value_enum, default_value_t = Size::Default)]
    pub size: Size,
    /// Runs without SDT and under `sdt run`, each, per program and thread count (median).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=50))]
    pub reps: u32,
    /// Thread counts.
    #[arg(long, value_delimiter = ',', default_value = "2,4,8")]
    pub threads: Vec<u32>,
    /// Only these programs (`fft`, `parsec/blackscholes`, `splash/lu`, …).
    #[arg(long, value_delimiter = ',')]
    pub only: Vec<String>,
    /// Output folder [default: target/bench-paper].
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// A PARSEC 3.0 tree or source mirror: blackscholes, fluidanimate, bodytrack and
    /// swaptions from it.
    #[arg(long, value_name = "DIR")]
    pub parsec: Option<PathBuf>,
    /// A SPLASH-2, SPLASH-3 or Splash-4 tree (or PARSEC 3.0's, for SPLASH-2x): FFT, LU
    /// and FMM from it.
    #[arg(long, value_name = "DIR")]
    pub splash: Option<PathBuf>,
    /// Say which programs were found (and why others were not), and stop.
    #[arg(long)]
    pub list: bool,
    /// Leave out the gcore runs.
    #[arg(long)]
    pub no_gcore: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Size {
    Small,
    Default,
    Large,
}

impl Size {
    pub fn name(self) -> &'static str {
        match self {
            Size::Small => "small",
            Size::Default => "default",
            Size::Large => "large",
        }
    }
}

fn main() {
    let args = Args::parse();
    if let Err(e) = real_main(&args) {
        eprintln!("bench-paper: {e:#}");
        std::process::exit(1);
    }
}

fn real_main(args: &Args) -> Result<()> {
    let started = Instant::now();
    if args.threads.is_empty() || args.threads.contains(&0) {
        bail!("--threads needs thread counts of 1 or more");
    }
    let out = args.out.clone().unwrap_or_else(|| workloads::workspace().join("target/bench-paper"));
    std::fs::create_dir_all(out.join("bin")).with_context(|| format!("creating {}", out.display()))?;

    let mut found = suites::ours();
    let mut missing = Vec::new();
    for result in suites::find(args.parsec.as_deref(), args.splash.as_deref()) {
        match result {
            Ok(p) => found.push(p),
            Err(m) => missing.push(m),
        }
    }
    let known: Vec<String> =
        found.iter().map(|p| p.name.clone()).chain(missing.iter().map(|m| m.name.clone())).collect();
    for name in &args.only {
        if !known.contains(name) {
            bail!("--only {name}: no such program (these are: {})", known.join(", "));
        }
    }
    let wanted = |name: &str| args.only.is_empty() || args.only.iter().any(|o| o == name);
    found.retain(|p| wanted(&p.name));
    missing.retain(|m| wanted(&m.name));
    // One line per program, in the order found: what became of it.
    let mut outcomes: Vec<Outcome> = found
        .iter()
        .map(|p| Outcome { name: p.name.clone(), line: format!("found ({})", p.origin) })
        .collect();
    outcomes.extend(
        missing.iter().map(|m| Outcome { name: m.name.clone(), line: format!("skipped: {}", m.reason) }),
    );
    for m in &missing {
        eprintln!("bench-paper: {}: {}", m.name, m.reason);
    }
    if args.list {
        for o in &outcomes {
            println!("{}: {}", o.name, o.line);
        }
        return Ok(());
    }

    // Build: ours with gcc against libsdt.a, the suites' with their own build.
    let mut programs: Vec<Program> = Vec::new();
    for p in found {
        eprintln!("bench-paper: building {}", p.name);
        let name = p.name.clone();
        let outcome = outcomes.iter_mut().find(|o| o.name == name).expect("every program found has its line");
        match suites::place(p, &out, args.size).build(&out, args.size) {
            Ok(p) => {
                outcome.line.push_str(", built");
                programs.push(p);
            }
            Err(e) => {
                eprintln!("bench-paper: {name}: {e:#}");
                outcome.line.push_str(&format!("; not built: {}", format!("{e:#}").replace('\n', " ")));
            }
        }
    }
    if programs.is_empty() {
        print_outcomes(&outcomes);
        bail!("no program to run");
    }

    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let load_before = load_average();
    let cpu_before = (machine_busy_s(), own_cpu_s());
    let measuring = Instant::now();
    let mut runner = Runner::new(&out, args, programs.len())?;
    let mut cells: Vec<Cell> = Vec::new();
    for program in &programs {
        let mut ran = Vec::new();
        let mut failed = Vec::new();
        for &threads in &args.threads {
            // A program that cannot be measured at one thread count is reported; the
            // evaluation goes on.
            match runner.measure(program, threads) {
                Ok(cell) if cell.failed.is_empty() => {
                    ran.push(threads.to_string());
                    cells.push(cell);
                }
                Ok(cell) => failed.push(format!("FAILED at {threads} threads ({})", cell.failed.join("; "))),
                Err(e) => failed.push(format!("could not be measured at {threads} threads ({e:#})")),
            }
        }
        let outcome =
            outcomes.iter_mut().find(|o| o.name == program.name).expect("every program built has its line");
        if !ran.is_empty() {
            outcome.line.push_str(&format!(", ran at {} threads: ok", ran.join(", ")));
        }
        for f in failed {
            outcome.line.push_str(&format!(", {f}"));
        }
    }
    runner.finish();
    let load_after = load_average();
    // CPU time the rest of the machine took meanwhile: all busy time less ours (this
    // process and every child it waited for: the workloads, sdt, gcore).
    let others_s = (machine_busy_s() - cpu_before.0) - (own_cpu_s() - cpu_before.1);
    let others_pct = 100.0 * others_s / (measuring.elapsed().as_secs_f64() * cpus as f64);

    let context = report::Context {
        command: std::env::args().skip(1).collect::<Vec<_>>().join(" "),
        size: args.size,
        reps: args.reps,
        threads: args.threads.clone(),
        cpus,
        load: (load_before, load_after),
        others: (others_s.max(0.0), others_pct.max(0.0)),
        kernel: kernel(),
        programs: outcomes.iter().map(|o| format!("{}: {}", o.name, o.line)).collect(),
        elapsed_s: started.elapsed().as_secs_f64(),
    };
    let table = report::table2(&cells, cpus);
    report::write_all(&out, &cells, &context)?;
    println!("{table}");
    println!();
    println!("{}", report::summary(&cells, args.threads.as_slice()).join("\n"));
    println!();
    print_outcomes(&outcomes);
    println!();
    println!(
        "other processes took {:.0} CPU-seconds while the programs ran ({:.1}% of the machine)",
        context.others.0, context.others.1
    );
    println!(
        "bench-paper: wrote {} (report.md, table2.md, the figures' .csv, .png and .svg) in {:.0} s",
        out.display(),
        started.elapsed().as_secs_f64()
    );
    if cells.is_empty() {
        bail!("no program ran to a right result: see the lines above");
    }
    Ok(())
}

/// What became of one program: found, built, ran (at which thread counts), or skipped and why.
struct Outcome {
    name: String,
    line: String,
}

fn print_outcomes(outcomes: &[Outcome]) {
    println!("programs:");
    for o in outcomes {
        println!("  {}: {}", o.name, o.line);
    }
}

/// `/proc/loadavg`'s first three fields.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

/// Seconds of CPU time the whole machine has spent busy (`/proc/stat`: all but idle and
/// iowait), at 100 ticks a second.
fn machine_busy_s() -> f64 {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let ticks: Vec<f64> =
        stat.lines().next().unwrap_or("").split_whitespace().skip(1).filter_map(|t| t.parse().ok()).collect();
    let busy: f64 =
        ticks.iter().enumerate().filter(|(i, _)| *i != 3 && *i != 4 && *i < 8).map(|(_, t)| t).sum();
    busy / 100.0
}

/// This process's CPU time and its waited-for children's (`/proc/self/stat` utime, stime,
/// cutime, cstime), in seconds.
fn own_cpu_s() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after_name = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    // Fields 14-17 of the file; after the name, state is field 3.
    after_name.split_whitespace().skip(11).take(4).filter_map(|t| t.parse::<f64>().ok()).sum::<f64>() / 100.0
}

fn kernel() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_owned())
        .unwrap_or_else(|_| "?".into())
}

/// `path` relative to `base` where it lies below it.
pub fn shown(path: &Path, base: &Path) -> String {
    path.strip_prefix(base).unwrap_or(path).display().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli() {
        Args::command().debug_assert();
        let a = Args::parse_from(["bench-paper", "--size", "small", "--threads", "2,4", "--only", "fft,lu"]);
        assert_eq!(
            (a.size, a.threads, a.only, a.reps),
            (Size::Small, vec![2, 4], vec!["fft".into(), "lu".into()], 5)
        );
    }
}
