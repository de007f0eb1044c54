//! Each paper workload (`benches/workloads/paper/`) at the small size: its self-check
//! passes on its own and under `sdt run` with the benchmark's config, which passes exactly
//! ten of its twenty breakpoints; and it stops at the same ten for gcore.

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};

use serde_json::Value;

use crate::workloads;

fn build(name: &str) -> PathBuf {
    let out = workloads::release().join("test-programs/paper");
    std::fs::create_dir_all(&out).unwrap();
    workloads::build(&format!("paper/{name}"), &out, name, &["-Wall", "-Werror"])
}

fn stdout_of(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Runs `name` at 2 threads, small: plainly, then under `sdt run --config capture.toml`.
fn check(name: &str) {
    let exe = build(name);
    let plain = Command::new(&exe).args(["2", "small"]).output().unwrap();
    let text = stdout_of(&plain);
    assert!(plain.status.success() && text.contains("\nresult: PASS\n"), "{name} alone:\n{text}");
    assert!(text.lines().any(|l| l.starts_with("roi_ms ")), "{name} prints no roi_ms:\n{text}");
    assert!(!text.contains("FAILED"), "{text}");

    let store = tempfile::tempdir().unwrap();
    let sdt = workloads::release().join("sdt");
    let config = workloads::workspace().join("benches/workloads/paper/capture.toml");
    let traced = Command::new(&sdt)
        .args(["run", "-q", "--store"])
        .arg(store.path())
        .arg("--config")
        .arg(&config)
        .arg("--")
        .arg(&exe)
        .args(["2", "small"])
        .output()
        .unwrap();
    let text = stdout_of(&traced);
    assert!(
        traced.status.success() && text.contains("\nresult: PASS\n"),
        "{name} under sdt run:\n{text}\n{}",
        String::from_utf8_lossy(&traced.stderr)
    );
    let ls = Command::new(&sdt).args(["ls", "--json", "--store"]).arg(store.path()).output().unwrap();
    let snaps: Vec<Value> = serde_json::from_slice(&ls.stdout).unwrap();
    // Two threads that reach neighbouring breakpoints together may be captured in either
    // order: the tracer learns of their traps in thread order, not in time order.
    let mut ids: Vec<i64> = snaps.iter().map(|s| s["id"].as_i64().unwrap()).collect();
    ids.sort_unstable();
    assert_eq!(ids, (1..=10).collect::<Vec<_>>(), "{name}: each of the ten capturing breakpoints once");
    assert!(snaps.iter().all(|s| s["level"] == 1 && s["class"] == 1), "{name}: {snaps:?}");
}

#[test]
fn blackscholes() {
    check("blackscholes");
}

#[test]
fn fluid() {
    check("fluid");
}

#[test]
fn swaptions() {
    check("swaptions");
}

#[test]
fn pose() {
    check("pose");
}

#[test]
fn fft() {
    check("fft");
}

#[test]
fn lu() {
    check("lu");
}

#[test]
fn barnes() {
    check("barnes");
}

/// The pose tracker's answer does not depend on the thread count.
#[test]
fn pose_is_deterministic() {
    let exe = build("pose");
    let final_pose = |threads: &str| {
        let out = Command::new(&exe).args([threads, "small"]).output().unwrap();
        stdout_of(&out).lines().find(|l| l.starts_with("final pose:")).unwrap().to_owned()
    };
    assert_eq!(final_pose("1"), final_pose("3"));
}

/// With PAPER_GCORE=1 a workload stops at its ten capturing breakpoints, one after
/// another, and goes on when told (the protocol bench-paper drives gcore with).
#[test]
fn gcore_points() {
    let exe = build("lu");
    let mut child = Command::new(&exe)
        .args(["4", "small"])
        .env("PAPER_GCORE", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut points = Vec::new();
    let mut passed = false;
    for line in BufReader::new(child.stdout.take().unwrap()).lines() {
        let line = line.unwrap();
        if let Some(id) = line.strip_prefix("gcore-point ") {
            points.push(id.parse::<u32>().unwrap());
            stdin.write_all(b"\n").unwrap();
        }
        passed |= line == "result: PASS";
    }
    assert!(child.wait().unwrap().success() && passed);
    // Threads that reach their points together may do so in either order.
    points.sort_unstable();
    assert_eq!(points, (1..=10).collect::<Vec<_>>());
}

/// `bench-paper --list` finds the programs of a Splash-4 checkout and of a PARSEC source
/// mirror, and says why the others are skipped.
#[test]
fn splash4_and_parsec_mirror_are_listed() {
    let dir = tempfile::tempdir().unwrap();
    for (path, text) in [
        ("Splash-4/Makefile.config", ""),
        ("Splash-4/Splash-4/fft/Makefile", "TARGET = FFT\nOBJS = fft.o\ninclude ../../Makefile.config\n"),
        ("Splash-4/Splash-4/lu-contiguous_blocks/Makefile", "TARGET = LU-CONT\n"),
        ("parsec/swaptions/src/Makefile", "EXEC = swaptions\n"),
        ("parsec/blackscholes/Makefile", "TARGET = blackscholes\n"),
    ] {
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    let out = Command::new(env!("CARGO_BIN_EXE_bench-paper"))
        .arg("--list")
        .arg("--splash")
        .arg(dir.path().join("Splash-4"))
        .arg("--parsec")
        .arg(dir.path().join("parsec"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = stdout_of(&out);
    let d = dir.path().display();
    for line in [
        format!("splash/fft: found (Splash-4 at {d}/Splash-4)\n"),
        format!("splash/lu: found (Splash-4 at {d}/Splash-4)\n"),
        format!("splash/fmm: skipped: not found: no fmm/Makefile in {d}/Splash-4/Splash-4\n"),
        format!("parsec/swaptions: found (PARSEC source mirror at {d}/parsec/swaptions)\n"),
        format!("parsec/blackscholes: skipped: inputs not found: no {d}/parsec/blackscholes/inputs"),
        format!("parsec/fluidanimate: skipped: not found: {d}/parsec has neither bin/parsecmgmt"),
    ] {
        assert!(text.contains(&line), "{line}\nnot in:\n{text}");
    }
}

/// `bench-paper --list` names every suite program it cannot find, and why.
#[test]
fn missing_suites_are_named() {
    let out = Command::new(env!("CARGO_BIN_EXE_bench-paper"))
        .args(["--list", "--parsec", "/nonexistent/parsec-3.0", "--splash", "/nonexistent/Splash-3"])
        .args(["--out"])
        .arg(tempfile::tempdir().unwrap().path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = stdout_of(&out);
    for ours in ["blackscholes", "fluid", "swaptions", "pose", "fft", "lu", "barnes"] {
        assert!(text.contains(&format!("{ours}: found (benches/workloads/paper/{ours}.c)\n")), "{text}");
    }
    for app in ["blackscholes", "fluidanimate", "bodytrack", "swaptions"] {
        assert!(
            text.contains(&format!(
                "parsec/{app}: skipped: not found: --parsec /nonexistent/parsec-3.0 is not a folder\n"
            )),
            "{text}"
        );
    }
    for kernel in ["fft", "lu", "fmm"] {
        assert!(
            text.contains(&format!(
                "splash/{kernel}: skipped: not found: --splash /nonexistent/Splash-3 is not a folder\n"
            )),
            "{text}"
        );
    }
    let bad = Command::new(env!("CARGO_BIN_EXE_bench-paper"))
        .args(["--list", "--only", "nosuch"])
        .output()
        .unwrap();
    assert!(!bad.status.success());
    assert!(
        String::from_utf8_lossy(&bad.stderr)
            .contains("--only nosuch: no such program (these are: blackscholes, fluid,")
    );
}
