//! The programs `bench-paper` runs: our workloads (`benches/workloads/paper/`), and
//! PARSEC 3.0's and SPLASH's, found and built from the sources the user has.
//!
//! Layouts recognised:
//!
//! ```text
//! --parsec DIR   PARSEC 3.0 tree    DIR/bin/parsecmgmt, DIR/pkgs/apps/NAME/ with
//!                                   inputs/input_SIZE.tar; built in place by
//!                                   `parsecmgmt -a build -p NAME -c gcc-pthreads`
//!                source mirror      no bin/parsecmgmt: DIR/NAME/ (or DIR/pkgs/apps/NAME/)
//!                                   with its Makefile in src/ or at its top, inputs in
//!                                   NAME/inputs/input_SIZE.tar; copied under the output
//!                                   folder and built there as gcc-pthreads does:
//!                                   `make version=pthreads` (blackscholes, fluidanimate,
//!                                   swaptions), `./configure --enable-threads
//!                                   --disable-openmp --disable-tbb && make` (bodytrack)
//! --splash DIR   SPLASH-2, SPLASH-3 DIR/codes/Makefile.config, codes/kernels/fft,
//!                                   codes/kernels/lu/contiguous_blocks, codes/apps/fmm
//!                Splash-4           DIR/Makefile.config, DIR/Splash-4/{fft,
//!                                   lu-contiguous_blocks, fmm}/Makefile (or DIR is that
//!                                   Splash-4/ folder); each app's Makefile names its
//!                                   binary (`TARGET = LU-CONT`) and includes
//!                                   ../../Makefile.config, which runs m4 on the `.c.in`
//!                                   sources where the release has them
//!                                   both copied under the output folder and built there
//!                                   with `make` in the program's folder
//!                PARSEC 3.0 tree    its SPLASH-2x (ext/splash2x/…), with parsecmgmt
//! ```
//!
//! Each suite program runs with its own check of its result, and a run whose check fails
//! counts as failed: FFT and LU with `-t` ("TEST PASSED"), FMM ("Finished FMM"),
//! blackscholes (prices.txt: the count, then a price per option), swaptions (a price per
//! swaption), fluidanimate (the output fluid file), bodytrack (poses.txt).
//!
//! Neither suite is annotated, so their programs are captured by timed snapshots (ten,
//! `--every` a tenth of their running time); `Recipe::break_at` names the function each
//! would stop at with `sdt run --break`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::SystemTime;

use anyhow::{Context, Result, bail};

use crate::Size;
use crate::workloads;

/// A program found and, after [`Program::build`], ready to run.
pub struct Program {
    /// `fft` for ours, `parsec/blackscholes`, `splash/fft`, …
    pub name: String,
    /// The paper's program this one is or stands for.
    pub paper: &'static str,
    /// Where it comes from, for the report.
    pub origin: String,
    pub kind: Kind,
    /// The executable, once built.
    pub exe: Option<PathBuf>,
}

pub enum Kind {
    /// Ours: `benches/workloads/paper/<source>.c`, annotated.
    Ours { source: &'static str },
    /// A suite's: captured by timed snapshots.
    Suite(Recipe),
}

/// One build command: `argv` run in `dir` with `env` added to the environment.
pub struct Step {
    /// Relative: inside the copy (see [`Recipe::copy`]).
    pub dir: PathBuf,
    pub argv: Vec<String>,
    pub env: Vec<(&'static str, &'static str)>,
}

/// What one run of a suite program left, for its check.
pub struct RunOutput<'a> {
    /// The folder it ran in.
    pub dir: &'a Path,
    /// Its stdout and stderr.
    pub text: &'a str,
    pub size: Size,
    /// When it started: files it writes must be newer.
    pub started: SystemTime,
}

/// A program's own check of its result: what is wrong, if anything.
pub type Check = fn(&RunOutput) -> Result<(), String>;

/// How to build and run one suite program.
pub struct Recipe {
    /// A folder to copy before building, and where to (set by [`place`]); relative step
    /// folders and `exe` are then inside the copy.
    pub copy: Option<(PathBuf, PathBuf)>,
    /// Commands, in order.
    pub build: Vec<Step>,
    /// Programs the build needs besides the commands themselves (m4).
    pub tools: Vec<&'static str>,
    /// The binary the build leaves; where it is missing, the newest executable beside it
    /// whose name starts with its name (`blackscholes-pthreads`).
    pub exe: PathBuf,
    /// A tar of inputs to unpack in the folder the program runs in.
    pub inputs: Option<PathBuf>,
    /// Arguments for a thread count.
    pub args: fn(u32, Size) -> Vec<String>,
    /// What the program reads on stdin, if anything.
    pub stdin: Option<fn(u32, Size) -> String>,
    pub check: Check,
    /// The function `sdt run --break FUNC` would stop at, as its source names it.
    /// `measure::Runner::sdt_args` is the one place that chooses timed snapshots instead.
    #[allow(dead_code)]
    pub break_at: &'static str,
}

/// A program that cannot be run, and why.
#[derive(Debug)]
pub struct Missing {
    pub name: String,
    pub reason: String,
}

/// The suite program `name`, standing for the paper's `paper`, as `found` (where, and
/// its recipe), or why not.
fn suite_program(
    name: String,
    paper: &'static str,
    found: Result<(String, Recipe), String>,
) -> Result<Program, Missing> {
    match found {
        Ok((origin, recipe)) => Ok(Program { name, paper, origin, kind: Kind::Suite(recipe), exe: None }),
        Err(reason) => Err(Missing { name, reason }),
    }
}

/// Our seven workloads.
pub fn ours() -> Vec<Program> {
    [
        ("blackscholes", "blackscholes (PARSEC)"),
        ("fluid", "fluidanimate (PARSEC)"),
        ("swaptions", "swaptions (PARSEC)"),
        ("pose", "bodytrack (PARSEC)"),
        ("fft", "FFT (SPLASH-2)"),
        ("lu", "LU (SPLASH-2)"),
        ("barnes", "FMM (SPLASH-2)"),
    ]
    .into_iter()
    .map(|(name, paper)| Program {
        name: name.into(),
        paper,
        origin: format!("benches/workloads/paper/{name}.c"),
        kind: Kind::Ours { source: name },
        exe: None,
    })
    .collect()
}

impl Program {
    pub fn is_ours(&self) -> bool {
        matches!(self.kind, Kind::Ours { .. })
    }

    /// Builds the program; `out` is bench-paper's output folder.
    pub fn build(mut self, out: &Path, size: Size) -> Result<Program> {
        match &self.kind {
            Kind::Ours { source } => {
                self.exe =
                    Some(workloads::build(&format!("paper/{source}"), &out.join("bin"), source, &["-Wall"]));
            }
            Kind::Suite(recipe) => {
                for tool in &recipe.tools {
                    if !on_path(tool) {
                        bail!(
                            "could not build {}: it needs {tool}, which is not installed (apt-get install {tool})",
                            self.name
                        );
                    }
                }
                if let Some((from, to)) = &recipe.copy {
                    copy_tree(from, to)?;
                }
                for step in &recipe.build {
                    run_build(step).with_context(|| format!("could not build {}", self.name))?;
                }
                let exe = built_binary(&recipe.exe).with_context(|| {
                    format!(
                        "could not build {}: the build ran but left no {}",
                        self.name,
                        recipe.exe.display()
                    )
                })?;
                if let Some(tar) = &recipe.inputs
                    && !tar.exists()
                {
                    bail!("input not found: {} (size {})", tar.display(), size.name());
                }
                self.exe = Some(exe);
            }
        }
        Ok(self)
    }
}

/// Whether `tool` is an executable in `$PATH`.
fn on_path(tool: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| is_executable(&dir.join(tool))))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// `expected` if the build left it, else the newest executable beside it whose name starts
/// with its name.
fn built_binary(expected: &Path) -> Option<PathBuf> {
    if is_executable(expected) {
        return Some(expected.to_owned());
    }
    let stem = expected.file_name()?.to_str()?;
    std::fs::read_dir(expected.parent()?)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with(stem)))
        .filter(|p| is_executable(p))
        .max_by_key(|p| std::fs::metadata(p).and_then(|m| m.modified()).ok())
}

fn run_build(step: &Step) -> Result<()> {
    let shown = step.argv.join(" ");
    let output = Command::new(&step.argv[0])
        .args(&step.argv[1..])
        .envs(step.env.iter().copied())
        .current_dir(&step.dir)
        .output()
        .with_context(|| {
            format!("`{shown}` could not start in {} (is {} installed?)", step.dir.display(), step.argv[0])
        })?;
    if !output.status.success() {
        let text =
            String::from_utf8_lossy(&output.stderr).into_owned() + &String::from_utf8_lossy(&output.stdout);
        let tail: Vec<&str> = text.lines().rev().take(12).collect::<Vec<_>>().into_iter().rev().collect();
        bail!("`{shown}` in {} failed ({}):\n    {}", step.dir.display(), output.status, tail.join("\n    "));
    }
    Ok(())
}

fn copy_tree(from: &Path, to: &Path) -> Result<()> {
    std::fs::remove_dir_all(to).ok();
    std::fs::create_dir_all(to.parent().unwrap())?;
    let status = Command::new("cp").arg("-a").arg(from).arg(to).status().context("running cp")?;
    if !status.success() {
        bail!("could not copy {} to {}", from.display(), to.display());
    }
    Ok(())
}

/// PARSEC's input names by size.
fn parsec_input(size: Size) -> &'static str {
    match size {
        Size::Small => "simsmall",
        Size::Default => "simlarge",
        Size::Large => "native",
    }
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

fn blackscholes_args(threads: u32, size: Size) -> Vec<String> {
    let input = match size {
        Size::Small => "in_4K.txt",
        Size::Default => "in_64K.txt",
        Size::Large => "in_10M.txt",
    };
    strings(&[&threads.to_string(), input, "prices.txt"])
}

fn fluidanimate_args(threads: u32, size: Size) -> Vec<String> {
    let (frames, input) = match size {
        Size::Small => ("5", "in_35K.fluid"),
        Size::Default => ("5", "in_300K.fluid"),
        Size::Large => ("500", "in_500K.fluid"),
    };
    strings(&[&threads.to_string(), frames, input, "out.fluid"])
}

/// Swaptions priced (`-ns`) by size.
fn swaptions_count(size: Size) -> usize {
    match size {
        Size::Small => 16,
        Size::Default => 64,
        Size::Large => 128,
    }
}

fn swaptions_args(threads: u32, size: Size) -> Vec<String> {
    let sm = match size {
        Size::Small => "10000",
        Size::Default => "20000",
        Size::Large => "1000000",
    };
    strings(&["-ns", &swaptions_count(size).to_string(), "-sm", sm, "-nt", &threads.to_string()])
}

/// bodytrack's sequence folder and frame count by size.
fn bodytrack_sequence(size: Size) -> (&'static str, &'static str) {
    match size {
        Size::Small => ("sequenceB_1", "1"),
        Size::Default => ("sequenceB_4", "4"),
        Size::Large => ("sequenceB_261", "261"),
    }
}

fn bodytrack_args(threads: u32, size: Size) -> Vec<String> {
    let (seq, frames) = bodytrack_sequence(size);
    let particles = if size == Size::Small { "1000" } else { "4000" };
    strings(&[seq, "4", frames, particles, "5", "0", &threads.to_string()])
}

fn fft_args(threads: u32, size: Size) -> Vec<String> {
    let m = match size {
        Size::Small => "-m16",
        Size::Default => "-m20",
        Size::Large => "-m24",
    };
    strings(&[&format!("-p{threads}"), m, "-t"])
}

fn lu_args(threads: u32, size: Size) -> Vec<String> {
    let n = match size {
        Size::Small => "-n512",
        Size::Default => "-n2048",
        Size::Large => "-n4096",
    };
    strings(&[&format!("-p{threads}"), n, "-t"])
}

fn no_args(_: u32, _: Size) -> Vec<String> {
    Vec::new()
}

/// FMM's input, read on stdin: two Plummer clusters, the thread count on line 5 (the
/// format of SPLASH's inputs/input.P.N files).
fn fmm_input(threads: u32, size: Size) -> String {
    let bodies = match size {
        Size::Small => 2048,
        Size::Default => 16384,
        Size::Large => 65536,
    };
    format!("two cluster\nplummer\n{bodies}\n1e-6\n{threads}\n5\n.025\n0.0\ncost zones\n")
}

/// FFT's and LU's `-t`: a line "TEST PASSED" (or "TEST FAILED…", which is quoted).
fn check_test_passed(run: &RunOutput) -> Result<(), String> {
    if run.text.lines().any(|l| l.trim() == "TEST PASSED") {
        return Ok(());
    }
    match run.text.lines().find(|l| l.trim_start().starts_with("TEST FAILED")) {
        Some(line) => Err(format!("its test says `{}`", line.trim())),
        None => Err("no \"TEST PASSED\" line in its output".into()),
    }
}

fn check_fmm(run: &RunOutput) -> Result<(), String> {
    if run.text.lines().any(|l| l.trim() == "Finished FMM") {
        Ok(())
    } else {
        Err("no \"Finished FMM\" line in its output".into())
    }
}

/// The file `name` the run wrote in its folder (not one left by an earlier run).
fn written(run: &RunOutput, name: &str) -> Result<Vec<u8>, String> {
    let path = run.dir.join(name);
    let modified = std::fs::metadata(&path)
        .and_then(|m| m.modified())
        .map_err(|e| format!("it wrote no {name} ({e})"))?;
    if modified < run.started {
        return Err(format!("it did not write {name} (the one there is older than the run)"));
    }
    std::fs::read(&path).map_err(|e| format!("reading its {name}: {e}"))
}

/// blackscholes' prices.txt: the option count, then one price per option.
fn check_blackscholes(run: &RunOutput) -> Result<(), String> {
    let text = String::from_utf8_lossy(&written(run, "prices.txt")?).into_owned();
    let mut lines = text.lines();
    let count: usize = lines
        .next()
        .and_then(|l| l.trim().parse().ok())
        .ok_or("prices.txt does not start with the option count")?;
    let prices: Vec<f64> =
        lines.filter_map(|l| l.trim().parse().ok()).filter(|p: &f64| p.is_finite()).collect();
    if count == 0 || prices.len() != count {
        return Err(format!("prices.txt holds {} prices for {count} options", prices.len()));
    }
    Ok(())
}

fn check_fluidanimate(run: &RunOutput) -> Result<(), String> {
    if written(run, "out.fluid")?.is_empty() { Err("its out.fluid is empty".into()) } else { Ok(()) }
}

/// swaptions prints `Swaption N: [SwaptionPrice: P StdError: E]` for each one.
fn check_swaptions(run: &RunOutput) -> Result<(), String> {
    let want = swaptions_count(run.size);
    let priced = run
        .text
        .lines()
        .filter(|l| l.starts_with("Swaption ") && l.contains("SwaptionPrice:"))
        .filter(|l| {
            let price = l.split("SwaptionPrice:").nth(1).and_then(|r| r.split_whitespace().next());
            price.and_then(|p| p.parse::<f64>().ok()).is_some_and(f64::is_finite)
        })
        .count();
    if priced == want { Ok(()) } else { Err(format!("it printed {priced} swaption prices, not {want}")) }
}

/// bodytrack writes the poses it tracked to poses.txt in the sequence's folder.
fn check_bodytrack(run: &RunOutput) -> Result<(), String> {
    let (seq, _) = bodytrack_sequence(run.size);
    if written(run, &format!("{seq}/poses.txt"))?.is_empty() {
        Err(format!("its {seq}/poses.txt is empty"))
    } else {
        Ok(())
    }
}

/// The suite programs under the folders given, or why each cannot be used.
pub fn find(parsec: Option<&Path>, splash: Option<&Path>) -> Vec<Result<Program, Missing>> {
    let mut all = Vec::new();
    if let Some(dir) = parsec {
        all.extend(find_parsec(dir));
    }
    if let Some(dir) = splash {
        all.extend(find_splash(dir));
    }
    all
}

/// `uname -m`-linux.gcc-pthreads, where parsecmgmt installs what it builds.
fn parsec_inst() -> String {
    format!("{}-linux.gcc-pthreads", std::env::consts::ARCH.replace("x86_64", "amd64"))
}

/// One PARSEC program.
struct ParsecApp {
    name: &'static str,
    paper: &'static str,
    args: fn(u32, Size) -> Vec<String>,
    check: Check,
    /// Whether it reads files from inputs/input_SIZE.tar (swaptions reads none).
    reads_inputs: bool,
    break_at: &'static str,
}

const PARSEC_APPS: [ParsecApp; 4] = [
    ParsecApp {
        name: "blackscholes",
        paper: "blackscholes (PARSEC)",
        args: blackscholes_args,
        check: check_blackscholes,
        reads_inputs: true,
        break_at: "bs_thread",
    },
    ParsecApp {
        name: "fluidanimate",
        paper: "fluidanimate (PARSEC)",
        args: fluidanimate_args,
        check: check_fluidanimate,
        reads_inputs: true,
        break_at: "AdvanceFrameMT",
    },
    ParsecApp {
        name: "bodytrack",
        paper: "bodytrack (PARSEC)",
        args: bodytrack_args,
        check: check_bodytrack,
        reads_inputs: true,
        break_at: "ParticleFilterPthread::Exec",
    },
    ParsecApp {
        name: "swaptions",
        paper: "swaptions (PARSEC)",
        args: swaptions_args,
        check: check_swaptions,
        reads_inputs: false,
        break_at: "worker",
    },
];

fn find_parsec(dir: &Path) -> Vec<Result<Program, Missing>> {
    PARSEC_APPS
        .iter()
        .map(|app| {
            let name = format!("parsec/{}", app.name);
            let found = if !dir.is_dir() {
                Err(format!("not found: --parsec {} is not a folder", dir.display()))
            } else if dir.join("bin/parsecmgmt").exists() {
                parsec_tree(dir, app)
            } else {
                parsec_mirror(dir, app)
            };
            suite_program(name, app.paper, found)
        })
        .collect()
}

/// The inputs tar of `app_dir` (its name at size simsmall; [`place`] sets the size), if
/// the program needs one.
fn parsec_inputs(app_dir: &Path, app: &ParsecApp) -> Result<Option<PathBuf>, String> {
    if !app.reads_inputs {
        return Ok(None);
    }
    let inputs = app_dir.join("inputs");
    if !inputs.is_dir() {
        return Err(format!(
            "inputs not found: no {} (PARSEC's inputs come in a separate archive, parsec-3.0-input-*.tar.gz)",
            inputs.display()
        ));
    }
    Ok(Some(inputs.join("input_simsmall.tar")))
}

/// A full PARSEC 3.0 tree, built by its parsecmgmt.
fn parsec_tree(dir: &Path, app: &ParsecApp) -> Result<(String, Recipe), String> {
    let parsecmgmt = dir.join("bin/parsecmgmt");
    let app_dir = dir.join("pkgs/apps").join(app.name);
    if !app_dir.join("src").is_dir() {
        return Err(format!("not found: no {}", app_dir.join("src").display()));
    }
    let inputs = parsec_inputs(&app_dir, app)?;
    Ok((
        format!("PARSEC 3.0 at {}", dir.display()),
        Recipe {
            copy: None,
            build: vec![Step {
                dir: dir.to_owned(),
                argv: strings(&[
                    &parsecmgmt.display().to_string(),
                    "-a",
                    "build",
                    "-p",
                    app.name,
                    "-c",
                    "gcc-pthreads",
                ]),
                env: Vec::new(),
            }],
            tools: Vec::new(),
            exe: app_dir.join("inst").join(parsec_inst()).join("bin").join(app.name),
            inputs,
            args: app.args,
            stdin: None,
            check: app.check,
            break_at: app.break_at,
        },
    ))
}

/// PARSEC's gcc configuration's compiler flags (config/gcc.bldconf), in the environment
/// so that the Makefiles' own `CXXFLAGS +=` still apply.
const PARSEC_FLAGS: [(&str, &str); 2] =
    [("CFLAGS", "-O3 -g -funroll-loops"), ("CXXFLAGS", "-O3 -g -funroll-loops -fexceptions")];

/// A PARSEC source mirror: one folder per program, its Makefile in src/ or at its top.
fn parsec_mirror(dir: &Path, app: &ParsecApp) -> Result<(String, Recipe), String> {
    let Some(app_dir) =
        [dir.join(app.name), dir.join("pkgs/apps").join(app.name)].into_iter().find(|d| d.is_dir())
    else {
        return Err(format!(
            "not found: {} has neither bin/parsecmgmt (a PARSEC 3.0 tree) nor {}/ (a PARSEC source mirror)",
            dir.display(),
            app.name
        ));
    };
    // The sources: src/ as in PARSEC's packages, or the folder itself.
    let src = ["src", ""]
        .into_iter()
        .find(|sub| {
            let d = app_dir.join(sub);
            d.join("Makefile").exists() || d.join("configure").exists()
        })
        .ok_or_else(|| format!("not found: no Makefile in {} or its src/", app_dir.display()))?;
    let inputs = parsec_inputs(&app_dir, app)?;
    // Built in a copy of the program's folder: `copy` is filled in by `place`.
    let in_copy = Path::new(src);
    let configure = app_dir.join(src).join("configure").exists();
    let (build, exe) = if configure {
        // bodytrack: autoconf, as parsecmgmt runs it with its gcc-pthreads build_conf.
        let conf = strings(&["./configure", "--enable-threads", "--disable-openmp", "--disable-tbb"]);
        (
            vec![
                Step { dir: in_copy.to_owned(), argv: conf, env: PARSEC_FLAGS.to_vec() },
                Step { dir: in_copy.to_owned(), argv: strings(&["make"]), env: PARSEC_FLAGS.to_vec() },
            ],
            in_copy.join("TrackingBenchmark").join(app.name),
        )
    } else {
        (
            vec![Step {
                dir: in_copy.to_owned(),
                argv: strings(&["make", "version=pthreads"]),
                env: PARSEC_FLAGS.to_vec(),
            }],
            in_copy.join(app.name),
        )
    };
    let tools = if needs_m4(&app_dir.join(src), None) { vec!["m4"] } else { Vec::new() };
    Ok((
        format!("PARSEC source mirror at {}", app_dir.display()),
        Recipe {
            copy: Some((app_dir.clone(), PathBuf::new())),
            build,
            tools,
            exe,
            inputs,
            args: app.args,
            stdin: None,
            check: app.check,
            break_at: app.break_at,
        },
    ))
}

/// Whether building in `dir` runs m4: its sources are m4's (SPLASH's `.C`/`.H`/`.c.in`,
/// PARSEC's `c.m4.pthreads` macros) and its Makefile, or the `config` it includes, uses
/// m4 (Splash-4 releases that ship the generated `.c` beside the `.c.in` do not).
fn needs_m4(dir: &Path, config: Option<&Path>) -> bool {
    let uses_m4 = |makefile: &Path| std::fs::read_to_string(makefile).is_ok_and(|t| t.contains("m4"));
    if !uses_m4(&dir.join("Makefile")) && !config.is_some_and(uses_m4) {
        return false;
    }
    let Ok(entries) = std::fs::read_dir(dir) else { return false };
    entries.filter_map(|e| e.ok()).any(|e| {
        let name = e.file_name().to_string_lossy().into_owned();
        name.ends_with(".C")
            || name.ends_with(".H")
            || name.ends_with(".in") && name != "Makefile.in"
            || name.starts_with("c.m4.")
    })
}

/// The binary a SPLASH Makefile names (`TARGET = LU-CONT`), where it names it plainly.
fn makefile_target(makefile: &Path) -> Option<String> {
    let text = std::fs::read_to_string(makefile).ok()?;
    text.lines().find_map(|line| {
        let (var, value) = line.split_once('=')?;
        let var = var.trim().trim_end_matches(':').trim();
        let value = value.trim();
        (var == "TARGET" && !value.is_empty() && !value.contains('$') && !value.contains(' '))
            .then(|| value.to_owned())
    })
}

/// One SPLASH program.
struct SplashApp {
    short: &'static str,
    paper: &'static str,
    /// Its folder under SPLASH-2's and SPLASH-3's codes/.
    codes: &'static str,
    /// Its folder under Splash-4/, by the names releases have given it.
    splash4: &'static [&'static str],
    /// Its binary where its Makefile names none plainly.
    binary: &'static str,
    /// Its package under PARSEC's ext/splash2x/.
    splash2x: &'static str,
    args: fn(u32, Size) -> Vec<String>,
    stdin: Option<fn(u32, Size) -> String>,
    check: Check,
    break_at: &'static str,
}

const SPLASH_APPS: [SplashApp; 3] = [
    SplashApp {
        short: "fft",
        paper: "FFT (SPLASH-2)",
        codes: "kernels/fft",
        splash4: &["fft"],
        binary: "FFT",
        splash2x: "kernels/fft",
        args: fft_args,
        stdin: None,
        check: check_test_passed,
        break_at: "FFT1D",
    },
    SplashApp {
        short: "lu",
        paper: "LU (SPLASH-2)",
        codes: "kernels/lu/contiguous_blocks",
        splash4: &["lu-contiguous_blocks", "lu-contiguous", "lu/contiguous_blocks"],
        binary: "LU",
        splash2x: "kernels/lu_cb",
        args: lu_args,
        stdin: None,
        check: check_test_passed,
        break_at: "lu",
    },
    SplashApp {
        short: "fmm",
        paper: "FMM (SPLASH-2)",
        codes: "apps/fmm",
        splash4: &["fmm"],
        binary: "FMM",
        splash2x: "apps/fmm",
        args: no_args,
        stdin: Some(fmm_input),
        check: check_fmm,
        break_at: "ParallelExecute",
    },
];

/// Which SPLASH a `--splash` folder holds.
enum SplashTree {
    /// SPLASH-2 or SPLASH-3: the codes/ folder.
    Codes(PathBuf),
    /// Splash-4: the folder with Makefile.config, and its Splash-4/ folder of programs.
    Splash4 { root: PathBuf, apps: PathBuf },
    /// A PARSEC 3.0 tree, for its SPLASH-2x.
    Splash2x(PathBuf),
}

fn splash_tree(dir: &Path) -> Result<SplashTree, String> {
    if !dir.is_dir() {
        return Err(format!("not found: --splash {} is not a folder", dir.display()));
    }
    if dir.join("codes").is_dir() {
        return Ok(SplashTree::Codes(dir.join("codes")));
    }
    if dir.join("Splash-4").is_dir() {
        return Ok(SplashTree::Splash4 { root: dir.to_owned(), apps: dir.join("Splash-4") });
    }
    // The Splash-4/ folder itself: its programs' Makefiles include ../../Makefile.config.
    let holds_programs =
        SPLASH_APPS.iter().flat_map(|a| a.splash4).any(|sub| dir.join(sub).join("Makefile").exists());
    if holds_programs && let Some(root) = dir.parent().filter(|p| p.join("Makefile.config").exists()) {
        return Ok(SplashTree::Splash4 { root: root.to_owned(), apps: dir.to_owned() });
    }
    if dir.join("ext/splash2x").is_dir() && dir.join("bin/parsecmgmt").exists() {
        return Ok(SplashTree::Splash2x(dir.to_owned()));
    }
    Err(format!(
        "not found: {} has neither codes/ (SPLASH-2, SPLASH-3), Splash-4/ (Splash-4) nor ext/splash2x with bin/parsecmgmt (PARSEC 3.0)",
        dir.display()
    ))
}

fn find_splash(dir: &Path) -> Vec<Result<Program, Missing>> {
    let tree = splash_tree(dir);
    SPLASH_APPS
        .iter()
        .map(|app| {
            let name = format!("splash/{}", app.short);
            let found = match &tree {
                Err(reason) => Err(reason.clone()),
                Ok(SplashTree::Codes(codes)) => splash_codes(codes, app),
                Ok(SplashTree::Splash4 { root, apps }) => splash4(root, apps, app),
                Ok(SplashTree::Splash2x(parsec)) => splash2x(parsec, app),
            };
            suite_program(name, app.paper, found)
        })
        .collect()
}

/// The recipe for a SPLASH program built with `make` in `sub` of a copy of `root`, whose
/// Makefile includes `root/Makefile.config`.
fn splash_make(root: &Path, sub: &Path, app: &SplashApp) -> Recipe {
    let src = root.join(sub);
    let binary = makefile_target(&src.join("Makefile")).unwrap_or_else(|| app.binary.to_owned());
    Recipe {
        copy: Some((root.to_owned(), PathBuf::new())),
        build: vec![Step { dir: sub.to_owned(), argv: strings(&["make"]), env: Vec::new() }],
        tools: if needs_m4(&src, Some(&root.join("Makefile.config"))) { vec!["m4"] } else { Vec::new() },
        exe: sub.join(binary),
        inputs: None,
        args: app.args,
        stdin: app.stdin,
        check: app.check,
        break_at: app.break_at,
    }
}

fn splash_codes(codes: &Path, app: &SplashApp) -> Result<(String, Recipe), String> {
    let src = codes.join(app.codes);
    if !src.is_dir() {
        return Err(format!("not found: no {}", src.display()));
    }
    if !codes.join("Makefile.config").exists() {
        return Err(format!(
            "not found: no {} (SPLASH-2 needs one naming its m4 macros; SPLASH-3 ships one)",
            codes.join("Makefile.config").display()
        ));
    }
    let origin = format!("SPLASH at {}", codes.parent().unwrap_or(codes).display());
    Ok((origin, splash_make(codes, Path::new(app.codes), app)))
}

fn splash4(root: &Path, apps: &Path, app: &SplashApp) -> Result<(String, Recipe), String> {
    let Some(folder) = app.splash4.iter().map(|sub| apps.join(sub)).find(|d| d.join("Makefile").exists())
    else {
        return Err(format!(
            "not found: no {}/Makefile in {}",
            app.splash4.join("/Makefile, no "),
            apps.display()
        ));
    };
    if !root.join("Makefile.config").exists() {
        return Err(format!(
            "not found: no {} (Splash-4's programs include ../../Makefile.config)",
            root.join("Makefile.config").display()
        ));
    }
    let sub = folder.strip_prefix(root).unwrap_or(&folder).to_owned();
    Ok((format!("Splash-4 at {}", root.display()), splash_make(root, &sub, app)))
}

fn splash2x(parsec: &Path, app: &SplashApp) -> Result<(String, Recipe), String> {
    let pkg_dir = parsec.join("ext/splash2x").join(app.splash2x);
    let leaf = app.splash2x.rsplit('/').next().unwrap_or(app.splash2x);
    if !pkg_dir.is_dir() {
        return Err(format!("not found: no {}", pkg_dir.display()));
    }
    Ok((
        format!("PARSEC 3.0's SPLASH-2x at {}", parsec.display()),
        Recipe {
            copy: None,
            build: vec![Step {
                dir: parsec.to_owned(),
                argv: strings(&[
                    &parsec.join("bin/parsecmgmt").display().to_string(),
                    "-a",
                    "build",
                    "-p",
                    &format!("splash2x.{leaf}"),
                    "-c",
                    "gcc-pthreads",
                ]),
                env: Vec::new(),
            }],
            tools: Vec::new(),
            exe: pkg_dir.join("inst").join(parsec_inst()).join("bin").join(leaf),
            inputs: None,
            args: app.args,
            stdin: app.stdin,
            check: app.check,
            break_at: app.break_at,
        },
    ))
}

/// Settles a found program's paths: copies go under `out/build/<name>/`, PARSEC inputs
/// by size. Called before [`Program::build`].
pub fn place(mut program: Program, out: &Path, size: Size) -> Program {
    let name = program.name.replace('/', "-");
    if let Kind::Suite(recipe) = &mut program.kind {
        if let Some((from, to)) = &mut recipe.copy {
            let leaf = from.file_name().map_or_else(|| "src".into(), |n| n.to_owned());
            let root = out.join("build").join(&name).join(leaf);
            *to = root.clone();
            for step in &mut recipe.build {
                step.dir = root.join(&step.dir);
            }
            recipe.exe = root.join(&recipe.exe);
        }
        if let Some(tar) = &mut recipe.inputs {
            *tar = tar.with_file_name(format!("input_{}.tar", parsec_input(size)));
        }
    }
    program
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reasons(found: Vec<Result<Program, Missing>>) -> Vec<(String, String)> {
        found
            .into_iter()
            .map(|r| match r {
                Ok(p) => (p.name, "found".into()),
                Err(m) => (m.name, m.reason),
            })
            .collect()
    }

    /// Writes `files` (path, contents) under `root`.
    fn tree(root: &Path, files: &[(&str, &str)]) {
        for (path, text) in files {
            let path = root.join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
    }

    fn recipe(p: &Program) -> &Recipe {
        match &p.kind {
            Kind::Suite(r) => r,
            Kind::Ours { .. } => panic!("{} is ours", p.name),
        }
    }

    #[test]
    fn nothing_there() {
        let r = reasons(find(Some(Path::new("/nonexistent/parsec")), Some(Path::new("/nonexistent/splash"))));
        let names: Vec<&str> = r.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                "parsec/blackscholes",
                "parsec/fluidanimate",
                "parsec/bodytrack",
                "parsec/swaptions",
                "splash/fft",
                "splash/lu",
                "splash/fmm"
            ]
        );
        assert_eq!(r[0].1, "not found: --parsec /nonexistent/parsec is not a folder");
        assert_eq!(r[6].1, "not found: --splash /nonexistent/splash is not a folder");
    }

    #[test]
    fn parsec_tree_layout() {
        let dir = tempfile::tempdir().unwrap();
        let r = reasons(find(Some(dir.path()), None));
        assert!(
            r[0].1.contains("has neither bin/parsecmgmt (a PARSEC 3.0 tree) nor blackscholes/"),
            "{}",
            r[0].1
        );

        tree(dir.path(), &[("bin/parsecmgmt", "")]);
        std::fs::create_dir_all(dir.path().join("pkgs/apps/blackscholes/src")).unwrap();
        std::fs::create_dir_all(dir.path().join("pkgs/apps/swaptions/src")).unwrap();
        let r = reasons(find(Some(dir.path()), None));
        assert!(r[0].1.starts_with("inputs not found: no "), "{}", r[0].1);
        assert!(
            r[1].1.starts_with("not found: no ") && r[1].1.ends_with("pkgs/apps/fluidanimate/src"),
            "{}",
            r[1].1
        );
        // swaptions reads no input files.
        assert_eq!(r[3].1, "found");
        let found = find(Some(dir.path()), None).into_iter().nth(3).unwrap().ok().unwrap();
        assert_eq!(found.origin, format!("PARSEC 3.0 at {}", dir.path().display()));
        assert_eq!(
            recipe(&found).build[0].argv[1..],
            strings(&["-a", "build", "-p", "swaptions", "-c", "gcc-pthreads"])
        );
    }

    /// A PARSEC 3.0 source mirror: a folder per program with its Makefile, no parsecmgmt.
    #[test]
    fn parsec_mirror_layout() {
        let dir = tempfile::tempdir().unwrap();
        tree(
            dir.path(),
            &[
                ("blackscholes/Makefile", "TARGET = blackscholes\nMACROS = c.m4.pthreads\n"),
                ("blackscholes/blackscholes.c", ""),
                ("blackscholes/c.m4.pthreads", ""),
                ("blackscholes/inputs/input_simsmall.tar", ""),
                ("bodytrack/src/configure", "#!/bin/sh\n"),
                ("bodytrack/inputs/input_simsmall.tar", ""),
                ("fluidanimate/src/Makefile", "TARGET = fluidanimate\n"),
                ("swaptions/src/Makefile", "EXEC = swaptions\n"),
            ],
        );
        let out = Path::new("/out");
        let found: Vec<Result<Program, Missing>> = find(Some(dir.path()), None);
        let r: Vec<Result<Program, Missing>> =
            found.into_iter().map(|p| p.map(|p| place(p, out, Size::Small))).collect();
        let [Ok(bs), Err(fluid), Ok(body), Ok(swap)] = &r[..] else { panic!("{:?}", reasons(r)) };

        let bs_r = recipe(bs);
        assert_eq!(
            bs.origin,
            format!("PARSEC source mirror at {}", dir.path().join("blackscholes").display())
        );
        assert_eq!(bs_r.copy.as_ref().unwrap().1, out.join("build/parsec-blackscholes/blackscholes"));
        assert_eq!(bs_r.build.len(), 1);
        assert_eq!(bs_r.build[0].argv, ["make", "version=pthreads"]);
        assert_eq!(bs_r.build[0].dir, out.join("build/parsec-blackscholes/blackscholes"));
        assert_eq!(bs_r.exe, out.join("build/parsec-blackscholes/blackscholes/blackscholes"));
        assert_eq!(bs_r.tools, ["m4"], "c.m4.pthreads: the pthreads version goes through m4");
        assert_eq!(
            bs_r.inputs.as_deref(),
            Some(dir.path().join("blackscholes/inputs/input_simsmall.tar").as_path())
        );

        assert!(
            fluid.reason.starts_with("inputs not found: no ") && fluid.reason.contains("fluidanimate/inputs")
        );

        let body_r = recipe(body);
        assert_eq!(
            body_r.build[0].argv,
            ["./configure", "--enable-threads", "--disable-openmp", "--disable-tbb"]
        );
        assert_eq!(body_r.build[1].argv, ["make"]);
        assert_eq!(body_r.build[1].dir, out.join("build/parsec-bodytrack/bodytrack/src"));
        assert_eq!(body_r.exe, out.join("build/parsec-bodytrack/bodytrack/src/TrackingBenchmark/bodytrack"));

        let swap_r = recipe(swap);
        assert_eq!(swap_r.build[0].dir, out.join("build/parsec-swaptions/swaptions/src"));
        assert!(swap_r.inputs.is_none() && swap_r.tools.is_empty());
        assert_eq!((swap_r.args)(2, Size::Small), ["-ns", "16", "-sm", "10000", "-nt", "2"]);
    }

    #[test]
    fn splash_layouts() {
        let dir = tempfile::tempdir().unwrap();
        let r = reasons(find(None, Some(dir.path())));
        assert!(
            r[0].1.contains("has neither codes/ (SPLASH-2, SPLASH-3), Splash-4/ (Splash-4) nor ext/splash2x"),
            "{}",
            r[0].1
        );

        std::fs::create_dir_all(dir.path().join("codes/kernels/fft")).unwrap();
        let r = reasons(find(None, Some(dir.path())));
        assert!(r[0].1.contains("codes/Makefile.config (SPLASH-2 needs one"), "{}", r[0].1);
        assert!(r[1].1.ends_with("codes/kernels/lu/contiguous_blocks"), "{}", r[1].1);
        assert!(r[2].1.ends_with("codes/apps/fmm"), "{}", r[2].1);
    }

    /// A Splash-4 checkout: Makefile.config at the top, one folder per program under
    /// Splash-4/ whose Makefile names the binary; given as the checkout or as Splash-4/.
    #[test]
    fn splash4_layout() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("checkout");
        tree(
            &root,
            &[
                ("Makefile.config", "MACROS := $(BASEDIR)/pthread.m4\n"),
                ("pthread.m4", ""),
                ("Splash-4/Makefile", ""),
                ("Splash-4/fft/Makefile", "TARGET = FFT\nOBJS = fft.o\n\ninclude ../../Makefile.config\n"),
                ("Splash-4/fft/fft.c.in", ""),
                ("Splash-4/lu-contiguous_blocks/Makefile", "TARGET = LU-CONT\nOBJS = lu.o\n"),
                ("Splash-4/lu-contiguous_blocks/lu.C", ""),
                ("Splash-4/radix/Makefile", "TARGET = RADIX\n"),
            ],
        );
        for given in [root.clone(), root.join("Splash-4")] {
            let out = Path::new("/out");
            let r: Vec<Result<Program, Missing>> =
                find(None, Some(&given)).into_iter().map(|p| p.map(|p| place(p, out, Size::Small))).collect();
            let [Ok(fft), Ok(lu), Err(fmm)] = &r[..] else { panic!("{:?}", reasons(r)) };
            assert_eq!(fft.origin, format!("Splash-4 at {}", root.display()));
            let fft_r = recipe(fft);
            assert_eq!(fft_r.copy.as_ref().unwrap(), &(root.clone(), out.join("build/splash-fft/checkout")));
            assert_eq!(fft_r.build[0].argv, ["make"]);
            assert_eq!(fft_r.build[0].dir, out.join("build/splash-fft/checkout/Splash-4/fft"));
            assert_eq!(fft_r.exe, out.join("build/splash-fft/checkout/Splash-4/fft/FFT"));
            assert_eq!(fft_r.tools, ["m4"]);
            assert_eq!((fft_r.args)(4, Size::Small), ["-p4", "-m16", "-t"]);
            let lu_r = recipe(lu);
            assert_eq!(lu_r.exe, out.join("build/splash-lu/checkout/Splash-4/lu-contiguous_blocks/LU-CONT"));
            assert_eq!(lu_r.tools, ["m4"]);
            assert!(fmm.reason.starts_with("not found: no fmm/Makefile in "), "{}", fmm.reason);
        }
        // A release that ships the generated .c files and a Makefile.config without m4
        // builds without it.
        tree(
            &root,
            &[("Makefile.config", "CC := gcc\n%.o: %.c\n\t$(CC) -c $<\n"), ("Splash-4/fft/fft.c", "")],
        );
        let fft = find(None, Some(&root)).into_iter().next().unwrap().ok().unwrap();
        assert!(recipe(&fft).tools.is_empty());
    }

    /// A program whose build fails says so, with the build's last lines.
    #[test]
    fn build_failure() {
        let dir = tempfile::tempdir().unwrap();
        tree(
            dir.path(),
            &[
                ("codes/Makefile.config", ""),
                (
                    "codes/kernels/fft/Makefile",
                    "all:\n\t@echo 'fft.c:1: no such macro MAIN_ENV' >&2; exit 1\n",
                ),
            ],
        );
        let out = tempfile::tempdir().unwrap();
        let program = find(None, Some(dir.path())).into_iter().next().unwrap().ok().unwrap();
        let program = place(program, out.path(), Size::Small);
        let err = format!("{:#}", program.build(out.path(), Size::Small).err().unwrap());
        assert!(err.starts_with("could not build splash/fft: `make` in "), "{err}");
        assert!(err.contains("no such macro MAIN_ENV"), "{err}");
        assert!(out.path().join("build/splash-fft/codes/kernels/fft/Makefile").exists());
    }

    /// A build that names its binary otherwise (`blackscholes-pthreads`) still gives it.
    #[test]
    fn binary_named_by_version() {
        let dir = tempfile::tempdir().unwrap();
        tree(
            dir.path(),
            &[(
                "swaptions/Makefile",
                "all:\n\tprintf '#!/bin/sh\\n' > swaptions-pthreads; chmod +x swaptions-pthreads\n",
            )],
        );
        let out = tempfile::tempdir().unwrap();
        let program = find(Some(dir.path()), None).into_iter().nth(3).unwrap().ok().unwrap();
        let program = place(program, out.path(), Size::Small).build(out.path(), Size::Small).unwrap();
        assert_eq!(
            program.exe.unwrap(),
            out.path().join("build/parsec-swaptions/swaptions/swaptions-pthreads")
        );
    }

    /// Each program's check reads what the real program prints or writes.
    #[test]
    fn checks_read_the_programs_output() {
        let dir = tempfile::tempdir().unwrap();
        let started = SystemTime::now() - std::time::Duration::from_secs(1);
        let run = |text: &'static str| RunOutput { dir: dir.path(), text, size: Size::Small, started };
        assert_eq!(check_test_passed(&run("Checksum difference is 0.000\nTEST PASSED\n")), Ok(()));
        assert_eq!(
            check_test_passed(&run("TEST FAILED: (0.00100 diff)\n")),
            Err("its test says `TEST FAILED: (0.00100 diff)`".into())
        );
        assert_eq!(check_test_passed(&run("")), Err("no \"TEST PASSED\" line in its output".into()));
        assert_eq!(check_fmm(&run("Starting FMM with 2 processors\nFinished FMM\n")), Ok(()));

        assert!(check_blackscholes(&run("")).unwrap_err().starts_with("it wrote no prices.txt"));
        std::fs::write(dir.path().join("prices.txt"), "3\n1.5\n2.25\n").unwrap();
        assert_eq!(check_blackscholes(&run("")), Err("prices.txt holds 2 prices for 3 options".into()));
        std::fs::write(dir.path().join("prices.txt"), "3\n1.5\n2.25\n0.125\n").unwrap();
        assert_eq!(check_blackscholes(&run("")), Ok(()));

        let line = "Swaption 0: [SwaptionPrice: 40.8 StdError: 0.01] \n";
        assert_eq!(check_swaptions(&run(line)), Err("it printed 1 swaption prices, not 16".into()));
        let all: &'static str = Box::leak(line.repeat(16).into_boxed_str());
        assert_eq!(check_swaptions(&run(all)), Ok(()));
    }
}
