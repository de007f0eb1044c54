//! Running the programs: without SDT, under `sdt run`, and under gdb's `gcore` at the same
//! points; what each run gave.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, Result, bail};
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::Value;

use crate::suites::{Check, Kind, Program, RunOutput};
use crate::{Args, Size, workloads};

/// How long one run may take before it is killed.
const TIMEOUT: Duration = Duration::from_secs(600);
/// Snapshots per run, as in the paper.
pub const SNAPSHOTS: usize = 10;

/// One run's time: the program's region of interest where it prints one (ours), its
/// whole run otherwise; and whether its result was right.
#[derive(Clone, Debug)]
pub struct Timing {
    pub roi_s: f64,
    pub wall_s: f64,
    /// What was wrong: its exit status, or its own check of its result.
    pub failure: Option<String>,
}

/// One snapshot, from `sdt ls --json`.
#[derive(Clone, Debug, Default)]
pub struct Snap {
    pub pause_us: f64,
    pub deviation_us: f64,
    pub full_bytes: u64,
    pub stored_bytes: u64,
    pub copied_bytes: u64,
    pub pages: u64,
    pub pages_stored: u64,
}

pub struct SdtRun {
    pub timing: Timing,
    pub snaps: Vec<Snap>,
}

/// gcore at the same points: each dump's seconds and bytes.
pub struct GcoreRun {
    pub timing: Timing,
    pub dumps: Vec<(f64, u64)>,
    /// Why gcore stopped before the last point (it failed, or the program had ended).
    pub stopped: Option<String>,
}

/// Everything measured for one program at one thread count.
pub struct Cell {
    pub program: String,
    pub paper: &'static str,
    pub threads: u32,
    pub plain: Vec<Timing>,
    pub sdt: Vec<SdtRun>,
    pub gcore: Option<GcoreRun>,
    /// Runs that failed (their exit status or their own check): a program with any is
    /// reported as failed, not in the figures.
    pub failed: Vec<String>,
    /// What looks off (a missing snapshot, gcore figures left out, …).
    pub notes: Vec<String>,
}

pub struct Runner {
    out: PathBuf,
    sdt: PathBuf,
    config: PathBuf,
    size: Size,
    reps: u32,
    gcore: bool,
    bar: ProgressBar,
    step: u64,
}

impl Runner {
    pub fn new(out: &Path, args: &Args, programs: usize) -> Result<Runner> {
        let runs_per_cell = 2 * args.reps as u64 + u64::from(!args.no_gcore);
        let total = programs as u64 * args.threads.len() as u64 * runs_per_cell;
        let bar = ProgressBar::new(total);
        bar.set_style(
            ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} runs  {msg}")
                .expect("progress template")
                .progress_chars("=> "),
        );
        std::fs::create_dir_all(out.join("runs"))?;
        Ok(Runner {
            out: out.to_owned(),
            sdt: workloads::release().join("sdt"),
            config: workloads::workspace().join("benches/workloads/paper/capture.toml"),
            size: args.size,
            reps: args.reps,
            gcore: !args.no_gcore,
            bar,
            step: 0,
        })
    }

    fn progress(&mut self, what: &str) {
        self.step += 1;
        if self.bar.is_hidden() {
            eprintln!("bench-paper: [{}/{}] {what}", self.step, self.bar.length().unwrap_or(0));
        } else {
            self.bar.set_message(what.to_owned());
        }
    }

    fn tick(&self) {
        self.bar.inc(1);
    }

    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }

    /// Runs `program` at `threads`: plain and `sdt run`, alternately, `reps` times each,
    /// then once under gcore.
    pub fn measure(&mut self, program: &Program, threads: u32) -> Result<Cell> {
        let dir = self.out.join("runs").join(format!("{}-{threads}", program.name.replace('/', "-")));
        std::fs::remove_dir_all(&dir).ok();
        std::fs::create_dir_all(&dir)?;
        let inv = Invocation::new(program, threads, self.size, &dir)?;
        let mut cell = Cell {
            program: program.name.clone(),
            paper: program.paper,
            threads,
            plain: Vec::new(),
            sdt: Vec::new(),
            gcore: None,
            failed: Vec::new(),
            notes: Vec::new(),
        };
        let over = if threads as usize > std::thread::available_parallelism().map_or(1, |n| n.get()) {
            " (oversubscribed)"
        } else {
            ""
        };
        for rep in 1..=self.reps {
            self.progress(&format!(
                "{} · {threads} threads{over} · without SDT {rep}/{}",
                program.name, self.reps
            ));
            let t = inv.run_plain(&dir)?;
            if let Some(why) = &t.failure {
                cell.failed.push(format!("without SDT, run {rep}: {why}"));
            }
            cell.plain.push(t);
            self.tick();

            self.progress(&format!(
                "{} · {threads} threads{over} · sdt run {rep}/{}",
                program.name, self.reps
            ));
            let every_ms = (!program.is_ours()).then(|| {
                let plain = crate::stats::median(&cell.plain.iter().map(|t| t.wall_s).collect::<Vec<_>>());
                ((plain * 1e3 / (SNAPSHOTS as f64 + 0.5)) as u64).max(1)
            });
            let run = self.run_sdt(&inv, &dir, every_ms)?;
            if let Some(why) = &run.timing.failure {
                cell.failed.push(format!("under sdt run, run {rep}: {why}"));
            }
            if run.snaps.len() != SNAPSHOTS {
                cell.notes.push(format!(
                    "under sdt run, run {rep}: {} snapshots, not {SNAPSHOTS}",
                    run.snaps.len()
                ));
            }
            cell.sdt.push(run);
            self.tick();
        }
        if self.gcore {
            self.progress(&format!("{} · {threads} threads{over} · gcore at the same points", program.name));
            let g = if program.is_ours() {
                inv.run_gcore_at_breakpoints(&dir)?
            } else {
                let plain = crate::stats::median(&cell.plain.iter().map(|t| t.wall_s).collect::<Vec<_>>());
                inv.run_gcore_timed(&dir, Duration::from_secs_f64(plain / (SNAPSHOTS as f64 + 0.5)))?
            };
            if let Some(why) = &g.timing.failure {
                cell.failed.push(format!("under gcore: {why}"));
            }
            match &g.stopped {
                // The row's gcore figures are left out: they would not be of ten dumps.
                Some(why) => cell.notes.push(format!(
                    "gcore figures missing: {} dumps of {SNAPSHOTS}, then {why}",
                    g.dumps.len()
                )),
                None => cell.gcore = Some(g),
            }
            self.tick();
        }
        for note in cell.failed.iter().map(|f| format!("FAILED {f}")).chain(cell.notes.iter().cloned()) {
            self.bar.suspend(|| eprintln!("bench-paper: {} at {threads} threads: {note}", program.name));
        }
        Ok(cell)
    }

    /// `sdt run`'s arguments before `--`. Our workloads reach their breakpoints, which the
    /// benchmark's config passes; suite programs get ten timed snapshots, spread over the
    /// run as the paper's are (`--break {recipe.break_at}` with `@HITS` would stop them at
    /// a function instead, here and nowhere else).
    fn sdt_args(&self, store: &Path, every_ms: Option<u64>) -> Vec<String> {
        let mut args: Vec<String> =
            vec!["run".into(), "-q".into(), "--store".into(), store.display().to_string()];
        match every_ms {
            None => args.extend(["--config".into(), self.config.display().to_string()]),
            Some(ms) => {
                let config = store.with_extension("toml");
                std::fs::write(&config, format!("every_ms = {ms}\nmax_snapshots = {SNAPSHOTS}\n")).ok();
                args.extend(["--config".into(), config.display().to_string()]);
            }
        }
        args
    }

    fn run_sdt(&self, inv: &Invocation, dir: &Path, every_ms: Option<u64>) -> Result<SdtRun> {
        let store = dir.join("store");
        std::fs::remove_dir_all(&store).ok();
        let mut cmd = Command::new(&self.sdt);
        cmd.args(self.sdt_args(&store, every_ms)).arg("--").arg(&inv.exe).args(&inv.args);
        let timing = inv.run(cmd, dir, "sdt")?;
        // Storage is counted compacted: `sdt run` returned with the program, and `sdt
        // compact` waits for the compaction it left in the background.
        let compact = Command::new(&self.sdt)
            .args(["compact", "--store"])
            .arg(&store)
            .output()
            .context("sdt compact")?;
        if !compact.status.success() {
            bail!("sdt compact failed: {}", String::from_utf8_lossy(&compact.stderr));
        }
        let ls = Command::new(&self.sdt)
            .args(["ls", "--json", "--store"])
            .arg(&store)
            .output()
            .context("sdt ls")?;
        if !ls.status.success() {
            bail!("sdt ls --json failed: {}", String::from_utf8_lossy(&ls.stderr));
        }
        let snaps: Vec<Value> = serde_json::from_slice(&ls.stdout).context("reading sdt ls --json")?;
        let num = |s: &Value, key: &str| s[key].as_f64().unwrap_or(0.0);
        let snaps = snaps
            .iter()
            .map(|s| Snap {
                pause_us: num(s, "pause_us"),
                deviation_us: num(s, "deviation_us"),
                full_bytes: num(s, "full_bytes") as u64,
                stored_bytes: num(s, "stored_bytes") as u64,
                copied_bytes: num(s, "copied_bytes") as u64,
                pages: num(s, "pages") as u64,
                pages_stored: num(s, "pages_stored") as u64,
            })
            .collect();
        std::fs::remove_dir_all(&store).ok();
        Ok(SdtRun { timing, snaps })
    }
}

/// How to start one program at one thread count, and how to check its result.
struct Invocation {
    exe: PathBuf,
    args: Vec<String>,
    stdin: Option<PathBuf>,
    /// A suite program's own check; ours print `result: PASS`.
    check: Option<Check>,
    size: Size,
}

impl Invocation {
    fn new(program: &Program, threads: u32, size: Size, dir: &Path) -> Result<Invocation> {
        let exe = program.exe.clone().context("program not built")?;
        Ok(match &program.kind {
            Kind::Ours { .. } => Invocation {
                exe,
                args: vec![threads.to_string(), size.name().into()],
                stdin: None,
                check: None,
                size,
            },
            Kind::Suite(recipe) => {
                if let Some(tar) = &recipe.inputs {
                    let status =
                        Command::new("tar").arg("xf").arg(tar).current_dir(dir).status().context("tar")?;
                    if !status.success() {
                        bail!("could not unpack {}", tar.display());
                    }
                }
                let stdin = recipe.stdin.map(|make| {
                    let path = dir.join("stdin");
                    std::fs::write(&path, make(threads, size)).ok();
                    path
                });
                Invocation { exe, args: (recipe.args)(threads, size), stdin, check: Some(recipe.check), size }
            }
        })
    }

    fn stdin(&self) -> Result<Stdio> {
        Ok(match &self.stdin {
            Some(path) => Stdio::from(std::fs::File::open(path)?),
            None => Stdio::null(),
        })
    }

    fn run_plain(&self, dir: &Path) -> Result<Timing> {
        let mut cmd = Command::new(&self.exe);
        cmd.args(&self.args);
        self.run(cmd, dir, "plain")
    }

    /// Runs `cmd` in `dir` to its end (or the timeout), its output in `dir/<label>.out`.
    fn run(&self, mut cmd: Command, dir: &Path, label: &str) -> Result<Timing> {
        let out_path = dir.join(format!("{label}.out"));
        let out = std::fs::File::create(&out_path)?;
        cmd.current_dir(dir).stdin(self.stdin()?).stdout(out.try_clone()?).stderr(out);
        let started = SystemTime::now();
        let start = Instant::now();
        let mut child = cmd.spawn().with_context(|| format!("starting {:?}", cmd.get_program()))?;
        let status = wait_with_timeout(&mut child, TIMEOUT)?;
        let wall_s = start.elapsed().as_secs_f64();
        let text = std::fs::read_to_string(&out_path).unwrap_or_default();
        Ok(self.timing(&text, wall_s, status, dir, started))
    }

    /// A run's time, and what was wrong with it: its exit status, else its own check.
    fn timing(
        &self,
        text: &str,
        wall_s: f64,
        status: std::process::ExitStatus,
        dir: &Path,
        started: SystemTime,
    ) -> Timing {
        let roi = text.lines().find_map(|l| l.strip_prefix("roi_ms ")?.trim().parse::<f64>().ok());
        let failure = if !status.success() {
            Some(format!("it {status}"))
        } else {
            match self.check {
                None if !text.lines().any(|l| l == "result: PASS") => Some("no `result: PASS` line".into()),
                None => None,
                Some(check) => check(&RunOutput { dir, text, size: self.size, started }).err(),
            }
        };
        Timing { roi_s: roi.map_or(wall_s, |ms| ms / 1e3), wall_s, failure }
    }

    /// Our workloads with `PAPER_GCORE=1`: they stop at each capturing breakpoint and
    /// say so; gcore dumps them there.
    fn run_gcore_at_breakpoints(&self, dir: &Path) -> Result<GcoreRun> {
        let started = SystemTime::now();
        let start = Instant::now();
        let mut child = Command::new(&self.exe)
            .args(&self.args)
            .current_dir(dir)
            .env("PAPER_GCORE", "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .context("starting the workload for gcore")?;
        let done = watchdog(child.id());
        let mut stdin = child.stdin.take().unwrap();
        let mut text = String::new();
        let mut dumps = Vec::new();
        let mut stopped = None;
        for line in BufReader::new(child.stdout.take().unwrap()).lines() {
            let line = line?;
            if line.starts_with("gcore-point ") {
                if stopped.is_none() {
                    match gcore(child.id(), dir) {
                        Ok(dump) => dumps.push(dump),
                        Err(e) => stopped = Some(format!("{e:#}")),
                    }
                }
                stdin.write_all(b"\n")?;
            } else {
                text.push_str(&line);
                text.push('\n');
            }
        }
        drop(stdin);
        let status = child.wait()?;
        done.store(true, Ordering::Relaxed);
        if stopped.is_none() && dumps.len() != SNAPSHOTS {
            stopped = Some(format!("the program reached {} gcore points", dumps.len()));
        }
        let timing = self.timing(&text, start.elapsed().as_secs_f64(), status, dir, started);
        Ok(GcoreRun { timing, dumps, stopped })
    }

    /// A suite program: gcore every `gap`, ten times or until it ends.
    fn run_gcore_timed(&self, dir: &Path, gap: Duration) -> Result<GcoreRun> {
        let out_path = dir.join("gcore.out");
        let out = std::fs::File::create(&out_path)?;
        let started = SystemTime::now();
        let start = Instant::now();
        let mut child = Command::new(&self.exe)
            .args(&self.args)
            .current_dir(dir)
            .stdin(self.stdin()?)
            .stdout(out.try_clone()?)
            .stderr(out)
            .spawn()
            .context("starting the program for gcore")?;
        let done = watchdog(child.id());
        let mut dumps = Vec::new();
        let mut stopped = None;
        let mut next = start + gap;
        let status = loop {
            if let Some(status) = child.try_wait()? {
                break status;
            }
            if stopped.is_none() && dumps.len() < SNAPSHOTS && Instant::now() >= next {
                match gcore(child.id(), dir) {
                    Ok(dump) => dumps.push(dump),
                    // Most often the program ended while gcore attached: it runs on.
                    Err(e) => stopped = Some(format!("{e:#}")),
                }
                next += gap;
            }
            std::thread::sleep(Duration::from_millis(2));
        };
        done.store(true, Ordering::Relaxed);
        if stopped.is_none() && dumps.len() < SNAPSHOTS {
            stopped = Some(format!(
                "the program ended after {:.3} s, before the next point",
                start.elapsed().as_secs_f64()
            ));
        }
        let text = std::fs::read_to_string(&out_path).unwrap_or_default();
        let timing = self.timing(&text, start.elapsed().as_secs_f64(), status, dir, started);
        Ok(GcoreRun { timing, dumps, stopped })
    }
}

/// `gcore -o DIR/core PID`: seconds and the core's size (the core is removed).
fn gcore(pid: u32, dir: &Path) -> Result<(f64, u64)> {
    let prefix = dir.join("core");
    let start = Instant::now();
    let out = Command::new("gcore")
        .arg("-o")
        .arg(&prefix)
        .arg(pid.to_string())
        .output()
        .context("running gcore (gdb's; apt-get install gdb)")?;
    let secs = start.elapsed().as_secs_f64();
    let core = PathBuf::from(format!("{}.{pid}", prefix.display()));
    let size = std::fs::metadata(&core).map(|m| m.len()).unwrap_or(0);
    std::fs::remove_file(&core).ok();
    if size == 0 {
        let said = String::from_utf8_lossy(&out.stderr);
        let said = said.lines().rfind(|l| !l.trim().is_empty()).unwrap_or("").trim();
        bail!(
            "gcore wrote no core of process {pid} ({})",
            if said.is_empty() { "it said nothing" } else { said }
        );
    }
    Ok((secs, size))
}

fn wait_with_timeout(child: &mut Child, timeout: Duration) -> Result<std::process::ExitStatus> {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(status);
        }
        if start.elapsed() > timeout {
            child.kill().ok();
            child.wait().ok();
            bail!("a run took more than {} s and was killed", timeout.as_secs());
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Kills `pid` if it still runs after [`TIMEOUT`], unless the flag returned is set first.
fn watchdog(pid: u32) -> Arc<AtomicBool> {
    let done = Arc::new(AtomicBool::new(false));
    let flag = done.clone();
    std::thread::spawn(move || {
        let start = Instant::now();
        while start.elapsed() < TIMEOUT {
            if flag.load(Ordering::Relaxed) {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        if !flag.load(Ordering::Relaxed) {
            Command::new("kill").args(["-KILL", &pid.to_string()]).status().ok();
        }
    });
    done
}
