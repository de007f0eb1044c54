//! The README's transcripts are what the commands print today. Each command block that
//! shows output (lines `$ COMMAND` followed by what it printed) carries a comment naming
//! the setting it was taken in, `<!-- transcript: NAME -->`; the block's commands run
//! there, in order, and their output (stdout and stderr, as a terminal shows them) must
//! match, with what changes from run to run masked:
//!
//! - every number (decimal or hex) matches any number, and runs of spaces any spaces;
//! - a line `...` or `…` (indented or not) matches any number of lines;
//! - a line ending in `…` matches any line that begins with what comes before it;
//! - blank lines are left out on both sides.

use std::path::Path;
use std::process::Command;

use sdt_test_harness::{Skip, root};

use crate::harness::{
    describe, mpi_example, mpi_program, openmp_program, program, run, target_dir, workspace,
};

/// One command of a transcript and the lines the README shows for it.
#[derive(Debug)]
struct Step {
    command: String,
    expected: Vec<String>,
}

/// A transcript: where the README has it, the setting it names, and its steps.
#[derive(Debug)]
struct Transcript {
    line: usize,
    setting: String,
    steps: Vec<Step>,
}

/// The README's transcripts; a command block showing output without a setting is an error.
fn transcripts(readme: &str) -> Vec<Transcript> {
    let lines: Vec<&str> = readme.lines().collect();
    let mut found = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        if !lines[i].starts_with("```") || lines[i] == "```" {
            i += 1;
            continue;
        }
        let start = i;
        let mut end = i + 1;
        while end < lines.len() && lines[end] != "```" {
            end += 1;
        }
        let body = &lines[start + 1..end.min(lines.len())];
        i = end + 1;
        if !body.first().is_some_and(|l| l.starts_with("$ ")) {
            continue;
        }
        let setting = start
            .checked_sub(1)
            .and_then(|j| lines[j].strip_prefix("<!-- transcript: "))
            .and_then(|rest| rest.strip_suffix(" -->"))
            .unwrap_or_else(|| {
                panic!("README line {}: a transcript without <!-- transcript: NAME -->", start + 1)
            });
        let mut steps: Vec<Step> = Vec::new();
        let mut k = 0;
        while k < body.len() {
            if let Some(command) = body[k].strip_prefix("$ ") {
                let mut command = command.to_owned();
                while command.ends_with('\\') && k + 1 < body.len() {
                    command.pop();
                    k += 1;
                    command.push_str(body[k].trim_start());
                }
                steps.push(Step { command, expected: Vec::new() });
            } else if !body[k].is_empty() {
                steps.last_mut().unwrap().expected.push(body[k].to_owned());
            }
            k += 1;
        }
        found.push(Transcript { line: start + 1, setting: setting.to_owned(), steps });
    }
    found
}

/// Units a number may carry, which change with its size.
const UNITS: [&str; 9] = ["ns", "µs", "ms", "s", "B", "KiB", "MiB", "GiB", "TiB"];

/// A line with what varies between runs masked.
fn masked(line: &str) -> String {
    let mut out = String::new();
    let mut chars = line.trim_end().chars().peekable();
    while let Some(c) = chars.next() {
        if c.is_ascii_digit() {
            // A number: decimal, hex after 0x, with a fraction or an exponent.
            while chars.peek().is_some_and(|c| c.is_ascii_alphanumeric() || *c == '.') {
                chars.next();
            }
            out.push('#');
            // Its unit, which changes with its size (µs and ms, KiB and MiB).
            let rest: String = chars.clone().collect();
            if let Some(unit) = UNITS.iter().find(|u| {
                rest.strip_prefix(' ')
                    .and_then(|r| r.strip_prefix(**u))
                    .is_some_and(|after| !after.starts_with(|c: char| c.is_alphanumeric()))
            }) {
                for _ in 0..=unit.chars().count() {
                    chars.next();
                }
                out.push_str(" unit");
            }
        } else if c == ' ' {
            while chars.peek() == Some(&' ') {
                chars.next();
            }
            out.push(' ');
        } else {
            out.push(c);
        }
    }
    out
}

/// Whether `actual` lines match the `expected` ones (module note).
fn matches(expected: &[String], actual: &[&str]) -> bool {
    match expected.split_first() {
        None => actual.is_empty(),
        Some((e, rest)) if e.trim() == "..." || e.trim() == "…" => {
            (0..=actual.len()).any(|skip| matches(rest, &actual[skip..]))
        }
        Some((e, rest)) => {
            let Some((a, after)) = actual.split_first() else { return false };
            let fits = match e.strip_suffix('…') {
                Some(prefix) => masked(a).starts_with(&masked(prefix)),
                None => masked(a) == masked(e),
            };
            fits && matches(rest, after)
        }
    }
}

/// A folder holding what the setting `name` needs; commands run in it. The [`Skip`] when
/// this machine lacks what it needs.
fn setting(name: &str) -> Result<tempfile::TempDir, Skip> {
    let dir = tempfile::tempdir().unwrap();
    let copy = |from: &Path, to: &str| {
        let to = dir.path().join(to);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(from, to).unwrap();
    };
    match name {
        // scripts/demo: the bank example, run once with its capture config.
        "bank" => {
            // Built as scripts/demo builds it: what gdb shows depends on it.
            let out = run(Command::new("gcc")
                .args(["-g", "-O1", "-pthread", "-Wall"])
                .arg(workspace().join("examples/bank/bank.c"))
                .arg("-I")
                .arg(workspace().join("sdt-lib/include"))
                .arg(target_dir().join("libsdt.a"))
                .args(["-ldl", "-lm", "-o"])
                .arg(dir.path().join("bank")));
            assert!(out.status.success(), "building bank: {}", describe(&out));
            for file in ["capture.toml", "fine.toml"] {
                copy(&workspace().join("examples/bank").join(file), &format!("examples/bank/{file}"));
            }
            shell(dir.path(), "sdt run -q --config examples/bank/capture.toml -- ./bank 4 || true");
        }
        // The globals test program, run once.
        "globals" => {
            copy(&program("globals"), "globals");
            shell(dir.path(), "sdt run -q -- ./globals");
        }
        "accumulate" => copy(&program("accumulate"), "accumulate"),
        "behave" => copy(&program("behave"), "behave"),
        // The hangs test program, set to deadlock.
        "hangs" => {
            copy(&program("hangs"), "hangs");
            std::fs::write(dir.path().join("hang"), "").unwrap();
        }
        // The states test program, run once.
        "states" => {
            copy(&program("states"), "states");
            shell(dir.path(), "sdt run -q -- ./states >/dev/null");
        }
        // The OpenMP test program, run once.
        "openmp" => {
            copy(&openmp_program("openmp")?, "openmp");
            shell(dir.path(), "sdt run -q -- ./openmp >/dev/null");
        }
        // The races test program (MPI).
        "races" => copy(&mpi_program("races")?, "races"),
        // examples/relay built, and the scripts that make the namespace hosts.
        "relay on three hosts" => {
            let relay = mpi_example("relay")?;
            copy(&relay, "relay");
            for script in ["mpi-hosts", "mpi-hosts-agent"] {
                copy(&workspace().join("scripts").join(script), &format!("scripts/{script}"));
            }
        }
        other => panic!("README: no transcript setting {other}"),
    }
    Ok(dir)
}

/// Runs `command` with bash in `dir`, the built `sdt` first on the PATH; stdout and
/// stderr together.
fn shell(dir: &Path, command: &str) -> String {
    let path = format!("{}:{}", target_dir().display(), std::env::var("PATH").unwrap_or_default());
    let out = run(Command::new("bash")
        .arg("-c")
        .arg(format!("exec 2>&1; {command}"))
        .current_dir(dir)
        .env("PATH", path)
        .env_remove("SDT_STORE")
        .env_remove("RUST_LOG")
        // Open MPI refuses root unless told (the tests that need root run as root).
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"));
    assert!(out.stderr.is_empty(), "{}", describe(&out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn readme_transcripts_match_what_the_commands_print() -> Result<(), Skip> {
    let readme = std::fs::read_to_string(workspace().join("README.md")).unwrap();
    let transcripts = transcripts(&readme);
    assert!(transcripts.len() >= 4, "{transcripts:?}");
    let mut failures = Vec::new();
    let mut skipped = Vec::new();
    for t in &transcripts {
        // A setting `NAME (root)`: its commands resume snapshots, which needs root.
        let name = match t.setting.strip_suffix(" (root)") {
            Some(_) if root("").is_err() => {
                skipped.push(format!("README line {}", t.line));
                continue;
            }
            Some(name) => name,
            None => t.setting.as_str(),
        };
        let dir = match setting(name) {
            Ok(dir) => dir,
            Err(skip) => {
                skipped.push(format!("README line {} ({skip})", t.line));
                continue;
            }
        };
        for step in &t.steps {
            let printed = shell(dir.path(), &step.command);
            // Blank lines separate, in the output as in the README: neither counts; nor
            // does Open MPI's launcher saying it lost a race of its own.
            let lines: Vec<&str> =
                printed.lines().filter(|l| !l.trim().is_empty() && !launcher_race(l)).collect();
            if !matches(&step.expected, &lines) {
                failures.push(format!(
                    "README line {} ({}): `{}` printed:\n{printed}\nthe README shows:\n{}\n",
                    t.line,
                    t.setting,
                    step.command,
                    step.expected.join("\n")
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    if skipped.is_empty() {
        Ok(())
    } else {
        Err(Skip::needs_root(format!("the transcripts at {} resume snapshots", skipped.join(", "))))
    }
}

/// Open MPI's rsh launcher (`plm:rsh`) warns when the child it forked has exec'd the
/// agent before the parent's `setpgid` on it (`EACCES`): a race inside the launcher,
/// harmless, that a loaded machine wins now and then.
fn launcher_race(line: &str) -> bool {
    line.contains("plm:rsh: Warning: setpgid(") && line.contains("failed in parent")
}

fn masking_and_wildcards() {
    let lines = |text: &str| text.lines().map(str::to_owned).collect::<Vec<_>>();
    assert_eq!(masked("S3  bp 2/2/4   767 µs 0x7fb3"), "S# bp #/#/# # unit #");
    assert_eq!(masked("1.4 ms, 57.8 KiB, 3 snapshots"), masked("957 µs, 1.9 MiB, 10 snapshots"));
    assert!(matches(&lines("a 1\n...\nz 2"), &["a 5", "b", "c", "z 3"]));
    assert!(matches(&lines("a 1\n  …\nz"), &["a 5", "z"]));
    assert!(matches(&lines("S1 phase=tra…"), &["S7 phase=transfer,round=2"]));
    assert!(!matches(&lines("a 1\nz"), &["a 1", "b", "z"]));
    assert!(!matches(&lines("at sdt.h:140"), &["at sdt-lib/include/sdt.h:177"]));
    assert!(launcher_race(
        "[sdt-h1:17259] plm:rsh: Warning: setpgid(17282,17282) failed in parent with errno=Permission denied(13)"
    ));
    assert!(!launcher_race("sdt: warning: setpgid failed"));
    let parsed = transcripts("<!-- transcript: bank -->\n```text\n$ sdt ls \\\n  --json\nout\n\n$ b\n```\n");
    assert_eq!(parsed.len(), 1);
    assert_eq!(parsed[0].steps[0].command, "sdt ls --json");
    assert_eq!(parsed[0].steps[0].expected, ["out"]);
    assert!(parsed[0].steps[1].expected.is_empty());
}

sdt_test_harness::tests![readme_transcripts_match_what_the_commands_print, masking_and_wildcards];
