//! The harness of SDT's integration test binaries (`harness = false`, on libtest-mimic): a
//! test whose requirement this machine lacks (root, QEMU, a tool) returns a [`Skip`] and is
//! reported as ignored, with the reason and how to get it run; it never reads as passed.
//!
//! ```no_run
//! // tests/integration_tests/restore.rs: each test once, in the module's `tests!`.
//! mod restore {
//!     use sdt_test_harness::{Skip, root};
//!
//!     fn a_snapshot_resumes() -> Result<(), Skip> {
//!         root("these restores run as root")?;
//!         // …
//!         Ok(())
//!     }
//!
//!     fn a_bad_interval_is_named() {
//!         // …
//!     }
//!
//!     sdt_test_harness::tests![a_snapshot_resumes, a_bad_interval_is_named];
//! }
//!
//! // tests/integration_tests/main.rs: each module once, in `main!`.
//! sdt_test_harness::main!(restore);
//! ```
//!
//! Names, filters and flags are libtest's (`cargo test --test integration_tests NAME`,
//! `--exact`, `--list`, `--test-threads`). A skipped test stays ignored under `--ignored`
//! and `--include-ignored`: what it needs is still missing.
//!
//! # Design constraints
//!
//! - A test is listed once, beside it. `#[test]` marks nothing without libtest, so the
//!   binary's `#![deny(dead_code)]` makes a test function left out of its module's
//!   `tests!` (and a module left out of `main!`) a compile error, and the check
//!   `every_test_is_listed` fails on a `#[test]` left in `tests/integration_tests/`.
//! - Each test runs on a thread named after it, as under libtest, so a panic names it.
//! - Output is not captured: what a test prints shows as it runs.
//! - Where `SDT_TEST_SKIPS` names a directory (`scripts/test` sets it), the binary writes
//!   its skips to `<package>.tsv` there, a line each: what the test needs, how to get it
//!   run, the test's name, why (`scripts/test` ends with their summary).

#![deny(missing_docs)]
#![deny(unsafe_code)]

use std::fmt;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Mutex;

use libtest_mimic::{Arguments, Completion, Failed};

#[doc(hidden)]
pub use libtest_mimic::Trial;

/// Why a test cannot run here: what it needs, why it lacks it, and how to get it run.
#[derive(Debug)]
pub struct Skip {
    needs: &'static str,
    why: String,
    fix: &'static str,
}

impl Skip {
    /// A test that `needs` something (`"root"`, `"qemu-system-x86_64"`: what the summary
    /// groups by), missing here as `why` says; `fix` says how to get it run.
    pub fn new(needs: &'static str, why: impl Into<String>, fix: &'static str) -> Skip {
        Skip { needs, why: why.into(), fix }
    }

    /// A test that needs root, as `why` says.
    pub fn needs_root(why: impl Into<String>) -> Skip {
        Skip::new("root", why, "run as root")
    }
}

impl fmt::Display for Skip {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}; {}", self.why, self.fix)
    }
}

/// `Ok` if this process runs as root (effective uid 0); otherwise the [`Skip::needs_root`].
pub fn root(why: &str) -> Result<(), Skip> {
    if nix::unistd::Uid::effective().is_root() { Ok(()) } else { Err(Skip::needs_root(why)) }
}

/// What a test function returns: `()`, or `Result<(), Skip>` where it checks a requirement.
pub trait TestResult {
    /// The skip, if the test did not run.
    fn skipped(self) -> Option<Skip>;
}

impl TestResult for () {
    fn skipped(self) -> Option<Skip> {
        None
    }
}

impl TestResult for Result<(), Skip> {
    fn skipped(self) -> Option<Skip> {
        self.err()
    }
}

/// How long a test runs before the harness reports its time.
const SLOW: std::time::Duration = std::time::Duration::from_secs(30);

/// Every skip of this run: the test's name and why.
static SKIPPED: Mutex<Vec<(String, Skip)>> = Mutex::new(Vec::new());

/// The trial running `test` (of the module `module_path`), named as libtest names it:
/// its module path within the test binary, then its own name.
#[doc(hidden)]
pub fn trial<R: TestResult + 'static>(module_path: &str, name: &str, test: fn() -> R) -> Trial {
    let name = match module_path.split_once("::") {
        Some((_, module)) => format!("{module}::{name}"),
        None => name.to_owned(),
    };
    Trial::ignorable_test(name.clone(), move || {
        let started = std::time::Instant::now();
        let ran = std::thread::Builder::new().name(name.clone()).spawn(move || test().skipped());
        let ended = ran.expect("starting the test's thread").join();
        // The slow ones, to see in a run's log how close they come to their timeouts.
        if started.elapsed() > SLOW {
            eprintln!("{name}: took {:.0} s", started.elapsed().as_secs_f64());
        }
        match ended {
            Ok(None) => Ok(Completion::Completed),
            Ok(Some(skip)) => {
                let reason = skip.to_string();
                SKIPPED.lock().unwrap().push((name, skip));
                Ok(Completion::ignored_with(reason))
            }
            // libtest-mimic turns the panic into the failure, with its message.
            Err(panic) => std::panic::resume_unwind(panic),
        }
    })
}

/// Defines `tests()`, the trials of the test functions named, for [`main!`](crate::main).
/// Each returns `()` or `Result<(), Skip>`.
#[macro_export]
macro_rules! tests {
    ($($test:ident),* $(,)?) => {
        /// This module's tests, for the harness.
        pub fn tests() -> Vec<$crate::Trial> {
            vec![$($crate::trial(module_path!(), stringify!($test), $test)),*]
        }
    };
}

/// Defines `main`: runs the tests of the modules named (each with its [`tests!`]) as the
/// package's integration test binary, `tests/integration_tests/main.rs`.
#[macro_export]
macro_rules! main {
    ($($module:ident),* $(,)?) => {
        fn main() -> std::process::ExitCode {
            $crate::run(env!("CARGO_PKG_NAME"), env!("CARGO_MANIFEST_DIR"), vec![$($module::tests()),*])
        }
    };
}

/// Runs the trials as libtest would, with the command line's arguments, then writes the
/// skips where `SDT_TEST_SKIPS` says.
#[doc(hidden)]
pub fn run(package: &str, manifest_dir: &str, modules: Vec<Vec<Trial>>) -> ExitCode {
    let sources = Path::new(manifest_dir).join("tests/integration_tests");
    let mut trials: Vec<Trial> = modules.into_iter().flatten().collect();
    trials.push(Trial::test("every_test_is_listed", move || every_test_is_listed(&sources)));
    let conclusion = libtest_mimic::run(&Arguments::from_args(), trials);
    if let Some(dir) = std::env::var_os("SDT_TEST_SKIPS") {
        let path = Path::new(&dir).join(format!("{package}.tsv"));
        let lines: String = SKIPPED
            .lock()
            .unwrap()
            .iter()
            .map(|(test, skip)| {
                format!("{}\t{}\t{test}\t{}\n", skip.needs, skip.fix, skip.why.replace(['\t', '\n'], " "))
            })
            .collect();
        if let Err(e) = std::fs::create_dir_all(&dir).and_then(|()| std::fs::write(&path, lines)) {
            eprintln!("{package}: writing the skipped tests to {}: {e}", path.display());
            return ExitCode::FAILURE;
        }
    }
    conclusion.exit_code()
}

/// Fails on a `#[test]` in the test sources: without libtest it marks nothing, and the
/// test under it would never run.
fn every_test_is_listed(sources: &Path) -> Result<(), Failed> {
    let mut marked = Vec::new();
    for entry in std::fs::read_dir(sources).map_err(|e| format!("{}: {e}", sources.display()))? {
        let path = entry.map_err(|e| e.to_string())?.path();
        if path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        for (n, line) in text.lines().enumerate() {
            if line.trim_start().starts_with("#[test]") {
                marked.push(format!("{}:{}", path.display(), n + 1));
            }
        }
    }
    if marked.is_empty() {
        return Ok(());
    }
    Err(format!(
        "#[test] marks nothing in this harness; list the test in its module's `sdt_test_harness::tests![…]` instead: {}",
        marked.join(", ")
    )
    .into())
}
