//! The programs `bench-paper` runs: our workloads (`benches/workloads/paper/`), and
//! PARSEC 3.0's and SPLASH-2's, found and built from the user's sources.
//!
//! Layouts looked for:
//!
//! ```text
//! --parsec DIR   DIR/bin/parsecmgmt, DIR/pkgs/apps/NAME/ with inputs/input_SIZE.tar;
//!                built by `parsecmgmt -a build -p NAME -c gcc-pthreads`
//! --splash DIR   DIR/codes/Makefile.config with DIR/codes/kernels/fft,
//!                codes/kernels/lu/contiguous_blocks and codes/apps/fmm (SPLASH-2 or
//!                SPLASH-3): copied under the output folder and built there with `make`;
//!                or a PARSEC 3.0 tree, for its SPLASH-2x (ext/splash2x/…)
//! ```
//!
//! Neither suite is annotated, so their programs are captured by timed snapshots (ten,
//! `--every` a tenth of their running time); `Recipe::break_at` names the function each
//! would stop at with symbol breakpoints.

use std::path::{Path, PathBuf};
use std::process::Command;

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

/// How to build and run one suite program.
pub struct Recipe {
    /// Commands, each run in its folder, in order.
    pub build: Vec<(PathBuf, Vec<String>)>,
    /// A folder to copy to `copy.1` before building (the build then happens in the copy).
    pub copy: Option<(PathBuf, PathBuf)>,
    pub exe: PathBuf,
    /// A tar of inputs to unpack in the folder the program runs in.
    pub inputs: Option<PathBuf>,
    /// Arguments for a thread count.
    pub args: fn(u32, Size) -> Vec<String>,
    /// What the program reads on stdin, if anything.
    pub stdin: Option<fn(u32, Size) -> String>,
    /// The function `sdt run --break FUNC` is to stop at, once SDT has symbol breakpoints
    /// (issue 6, part 2). Until then these programs get timed snapshots; see
    /// `measure::Runner::sdt_args`, the one place to switch over.
    #[allow(dead_code)]
    pub break_at: &'static str,
}

/// A program that cannot be run, and why.
#[derive(Debug)]
pub struct Missing {
    pub name: String,
    pub reason: String,
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
                if let Some((from, to)) = &recipe.copy {
                    copy_tree(from, to)?;
                }
                for (dir, argv) in &recipe.build {
                    run_build(dir, argv).with_context(|| format!("could not build {}", self.name))?;
                }
                if !recipe.exe.exists() {
                    bail!(
                        "could not build {}: the build ran but left no {}",
                        self.name,
                        recipe.exe.display()
                    );
                }
                if let Some(tar) = &recipe.inputs
                    && !tar.exists()
                {
                    bail!("input not found: {} (size {})", tar.display(), size.name());
                }
                self.exe = Some(recipe.exe.clone());
            }
        }
        Ok(self)
    }
}

fn run_build(dir: &Path, argv: &[String]) -> Result<()> {
    let shown = argv.join(" ");
    let output = Command::new(&argv[0]).args(&argv[1..]).current_dir(dir).output().with_context(|| {
        format!("`{shown}` could not start in {} (is {} installed?)", dir.display(), argv[0])
    })?;
    if !output.status.success() {
        let text =
            String::from_utf8_lossy(&output.stderr).into_owned() + &String::from_utf8_lossy(&output.stdout);
        let tail: Vec<&str> = text.lines().rev().take(12).collect::<Vec<_>>().into_iter().rev().collect();
        bail!("`{shown}` in {} failed ({}):\n    {}", dir.display(), output.status, tail.join("\n    "));
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

fn swaptions_args(threads: u32, size: Size) -> Vec<String> {
    let (ns, sm) = match size {
        Size::Small => ("16", "10000"),
        Size::Default => ("64", "20000"),
        Size::Large => ("128", "1000000"),
    };
    strings(&["-ns", ns, "-sm", sm, "-nt", &threads.to_string()])
}

fn bodytrack_args(threads: u32, size: Size) -> Vec<String> {
    let (seq, frames, particles) = match size {
        Size::Small => ("sequenceB_1", "1", "1000"),
        Size::Default => ("sequenceB_4", "4", "4000"),
        Size::Large => ("sequenceB_261", "261", "4000"),
    };
    strings(&[seq, "4", frames, particles, "5", "0", &threads.to_string()])
}

fn fft_args(threads: u32, size: Size) -> Vec<String> {
    let m = match size {
        Size::Small => "-m16",
        Size::Default => "-m20",
        Size::Large => "-m24",
    };
    strings(&[&format!("-p{threads}"), m])
}

fn lu_args(threads: u32, size: Size) -> Vec<String> {
    let n = match size {
        Size::Small => "-n512",
        Size::Default => "-n2048",
        Size::Large => "-n4096",
    };
    strings(&[&format!("-p{threads}"), n])
}

fn no_args(_: u32, _: Size) -> Vec<String> {
    Vec::new()
}

/// FMM's input, read on stdin: two Plummer clusters, the thread count on line 5.
fn fmm_input(threads: u32, size: Size) -> String {
    let bodies = match size {
        Size::Small => 2048,
        Size::Default => 16384,
        Size::Large => 65536,
    };
    format!("two cluster\nplummer\n{bodies}\n1e-6\n{threads}\n5\n.025\n0.0\ncost zones\n")
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

type Entry = (&'static str, &'static str, fn(u32, Size) -> Vec<String>, &'static str);

fn find_parsec(dir: &Path) -> Vec<Result<Program, Missing>> {
    let apps: [Entry; 4] = [
        ("blackscholes", "blackscholes (PARSEC)", blackscholes_args, "bs_thread"),
        ("fluidanimate", "fluidanimate (PARSEC)", fluidanimate_args, "AdvanceFrameMT"),
        ("bodytrack", "bodytrack (PARSEC)", bodytrack_args, "ParticleFilterPthread::Exec"),
        ("swaptions", "swaptions (PARSEC)", swaptions_args, "worker"),
    ];
    let parsecmgmt = dir.join("bin/parsecmgmt");
    apps.into_iter()
        .map(|(app, paper, args, break_at)| {
            let name = format!("parsec/{app}");
            let missing = |reason: String| Err(Missing { name: name.clone(), reason });
            if !dir.is_dir() {
                return missing(format!("not found: --parsec {} is not a folder", dir.display()));
            }
            if !parsecmgmt.exists() {
                return missing(format!(
                    "not found: {} does not exist, so {} is not a PARSEC 3.0 tree",
                    parsecmgmt.display(),
                    dir.display()
                ));
            }
            let app_dir = dir.join("pkgs/apps").join(app);
            if !app_dir.join("src").is_dir() {
                return missing(format!("not found: no {}", app_dir.join("src").display()));
            }
            let inputs = app_dir.join("inputs");
            if !inputs.is_dir() {
                return missing(format!(
                    "inputs not found: no {} (PARSEC's inputs come in a separate archive, parsec-3.0-input-*.tar.gz)",
                    inputs.display()
                ));
            }
            Ok(Program {
                name: name.clone(),
                paper,
                origin: format!("PARSEC 3.0 at {}", dir.display()),
                kind: Kind::Suite(Recipe {
                    build: vec![(
                        dir.to_owned(),
                        strings(&[&parsecmgmt.display().to_string(), "-a", "build", "-p", app, "-c", "gcc-pthreads"]),
                    )],
                    copy: None,
                    exe: app_dir.join("inst").join(parsec_inst()).join("bin").join(app),
                    inputs: Some(inputs.join("input_SIZE.tar")),
                    args,
                    stdin: None,
                    break_at,
                }),
                exe: None,
            })
        })
        .collect()
}

fn find_splash(dir: &Path) -> Vec<Result<Program, Missing>> {
    // (name, paper, SPLASH-2/3 folder under codes/, its binary, SPLASH-2x package, args, stdin, break_at)
    type Splash = (
        &'static str,
        &'static str,
        &'static str,
        &'static str,
        &'static str,
        fn(u32, Size) -> Vec<String>,
        Option<fn(u32, Size) -> String>,
        &'static str,
    );
    let programs: [Splash; 3] = [
        ("fft", "FFT (SPLASH-2)", "kernels/fft", "FFT", "kernels/fft", fft_args, None, "FFT1D"),
        ("lu", "LU (SPLASH-2)", "kernels/lu/contiguous_blocks", "LU", "kernels/lu_cb", lu_args, None, "lu"),
        ("fmm", "FMM (SPLASH-2)", "apps/fmm", "FMM", "apps/fmm", no_args, Some(fmm_input), "ParallelExecute"),
    ];
    let codes = dir.join("codes");
    let splash2x = dir.join("ext/splash2x");
    programs
        .into_iter()
        .map(|(short, paper, sub, binary, x_sub, args, stdin, break_at)| {
            let name = format!("splash/{short}");
            let missing = |reason: String| Err(Missing { name: name.clone(), reason });
            if !dir.is_dir() {
                return missing(format!("not found: --splash {} is not a folder", dir.display()));
            }
            if codes.is_dir() {
                let src = codes.join(sub);
                if !src.is_dir() {
                    return missing(format!("not found: no {}", src.display()));
                }
                if !codes.join("Makefile.config").exists() {
                    return missing(format!(
                        "not found: no {} (SPLASH-2 needs one naming its m4 macros; SPLASH-3 ships one)",
                        codes.join("Makefile.config").display()
                    ));
                }
                return Ok(Program {
                    name: name.clone(),
                    paper,
                    origin: format!("SPLASH at {}", dir.display()),
                    kind: Kind::Suite(Recipe {
                        // Built in a copy under the output folder, filled in by Runner.
                        build: vec![(PathBuf::from(sub), strings(&["make"]))],
                        copy: Some((codes.clone(), PathBuf::new())),
                        exe: PathBuf::from(sub).join(binary),
                        inputs: None,
                        args,
                        stdin,
                        break_at,
                    }),
                    exe: None,
                });
            }
            if splash2x.is_dir() && dir.join("bin/parsecmgmt").exists() {
                let pkg_dir = splash2x.join(x_sub);
                let pkg = format!("splash2x.{}", x_sub.rsplit('/').next().unwrap());
                if !pkg_dir.is_dir() {
                    return missing(format!("not found: no {}", pkg_dir.display()));
                }
                let exe_name = x_sub.rsplit('/').next().unwrap();
                return Ok(Program {
                    name: name.clone(),
                    paper,
                    origin: format!("PARSEC 3.0's SPLASH-2x at {}", dir.display()),
                    kind: Kind::Suite(Recipe {
                        build: vec![(
                            dir.to_owned(),
                            strings(&[
                                &dir.join("bin/parsecmgmt").display().to_string(),
                                "-a",
                                "build",
                                "-p",
                                &pkg,
                                "-c",
                                "gcc-pthreads",
                            ]),
                        )],
                        copy: None,
                        exe: pkg_dir.join("inst").join(parsec_inst()).join("bin").join(exe_name),
                        inputs: None,
                        args,
                        stdin,
                        break_at,
                    }),
                    exe: None,
                });
            }
            missing(format!(
                "not found: {} has neither codes/ (SPLASH-2, SPLASH-3) nor ext/splash2x with bin/parsecmgmt (PARSEC 3.0)",
                dir.display()
            ))
        })
        .collect()
}

/// Settles a found program's paths: SPLASH copies go under `out/build/`, PARSEC inputs
/// by size. Called before [`Program::build`].
pub fn place(mut program: Program, out: &Path, size: Size) -> Program {
    let name = program.name.replace('/', "-");
    if let Kind::Suite(recipe) = &mut program.kind {
        if let Some((_, to)) = &mut recipe.copy {
            let root = out.join("build").join(&name).join("codes");
            *to = root.clone();
            for (dir, _) in &mut recipe.build {
                *dir = root.join(&*dir);
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
    fn not_a_parsec_tree() {
        let dir = tempfile::tempdir().unwrap();
        let r = reasons(find(Some(dir.path()), None));
        assert!(r[0].1.contains("bin/parsecmgmt does not exist"), "{}", r[0].1);

        std::fs::create_dir_all(dir.path().join("bin")).unwrap();
        std::fs::write(dir.path().join("bin/parsecmgmt"), "").unwrap();
        std::fs::create_dir_all(dir.path().join("pkgs/apps/blackscholes/src")).unwrap();
        std::fs::create_dir_all(dir.path().join("pkgs/apps/swaptions/src")).unwrap();
        std::fs::create_dir_all(dir.path().join("pkgs/apps/swaptions/inputs")).unwrap();
        let r = reasons(find(Some(dir.path()), None));
        assert!(r[0].1.starts_with("inputs not found: no "), "{}", r[0].1);
        assert!(
            r[1].1.starts_with("not found: no ") && r[1].1.ends_with("pkgs/apps/fluidanimate/src"),
            "{}",
            r[1].1
        );
        assert_eq!(r[3].1, "found");
    }

    #[test]
    fn splash_layouts() {
        let dir = tempfile::tempdir().unwrap();
        let r = reasons(find(None, Some(dir.path())));
        assert!(r[0].1.contains("has neither codes/ (SPLASH-2, SPLASH-3) nor ext/splash2x"), "{}", r[0].1);

        std::fs::create_dir_all(dir.path().join("codes/kernels/fft")).unwrap();
        let r = reasons(find(None, Some(dir.path())));
        assert!(r[0].1.contains("codes/Makefile.config (SPLASH-2 needs one"), "{}", r[0].1);
        assert!(r[1].1.ends_with("codes/kernels/lu/contiguous_blocks"), "{}", r[1].1);
        assert!(r[2].1.ends_with("codes/apps/fmm"), "{}", r[2].1);
    }

    /// A program whose build fails says so, with the build's last lines.
    #[test]
    fn build_failure() {
        let dir = tempfile::tempdir().unwrap();
        let fft = dir.path().join("codes/kernels/fft");
        std::fs::create_dir_all(&fft).unwrap();
        std::fs::write(dir.path().join("codes/Makefile.config"), "").unwrap();
        std::fs::write(fft.join("Makefile"), "all:\n\t@echo 'fft.C:1: no such macro MAIN_ENV' >&2; exit 1\n")
            .unwrap();
        let out = tempfile::tempdir().unwrap();
        let program = find(None, Some(dir.path())).into_iter().next().unwrap().ok().unwrap();
        let program = place(program, out.path(), Size::Small);
        let err = format!("{:#}", program.build(out.path(), Size::Small).err().unwrap());
        assert!(err.starts_with("could not build splash/fft: `make` in "), "{err}");
        assert!(err.contains("no such macro MAIN_ENV"), "{err}");
        assert!(out.path().join("build/splash-fft/codes/kernels/fft/Makefile").exists());
    }
}
