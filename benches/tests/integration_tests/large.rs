//! The large-footprint workloads (`benches/workloads/large/`) at tiny sizes: each one's
//! own check passes, and `sdt run --every` takes timed snapshots of one of them.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::workloads;

fn build(name: &str) -> PathBuf {
    let out = workloads::release().join("test-programs/large");
    std::fs::create_dir_all(&out).unwrap();
    workloads::build(&format!("large/{name}"), &out, name, &["-Wall", "-Werror"])
}

/// Runs `name` at 3 threads (bands of unequal size) on `size`: it passes its own check.
fn check(name: &str, size: &str) {
    let out = Command::new(build(name)).args(["3", size]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{name} {size} failed: {text}{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.starts_with(&format!("{name}: ")) && text.ends_with(": ok\n"), "{name}: {text}");
    assert_eq!(text.lines().count(), 1, "{name} prints one line: {text}");
}

#[test]
fn fft() {
    check("fft", "12");
}

#[test]
fn lu() {
    check("lu", "160");
}

#[test]
fn ocean() {
    check("ocean", "66");
}

#[test]
fn radix() {
    check("radix", "100000");
}

/// A bad argument is refused with the usage, exit code 2.
#[test]
fn usage() {
    let out = Command::new(build("radix")).args(["0"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("usage: "));
}

/// `sdt run --every 10` of the ocean workload: it still passes its check, and its timed
/// snapshots are listed and compacted, the last one holding the grids.
#[test]
fn timed_snapshots() {
    let exe = build("ocean");
    let store = tempfile::tempdir().unwrap();
    let sdt = workloads::release().join("sdt");
    let out = Command::new(&sdt)
        .args(["run", "-q", "--every", "10", "--store"])
        .arg(store.path())
        .arg("--")
        .arg(&exe)
        .args(["2", "514"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.ends_with(": ok\n"),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // Compaction may finish after `sdt run` returns.
    let start = Instant::now();
    let snaps = loop {
        let ls = Command::new(&sdt).args(["ls", "--json", "--store"]).arg(store.path()).output().unwrap();
        assert!(ls.status.success(), "{}", String::from_utf8_lossy(&ls.stderr));
        let snaps: Vec<Value> = serde_json::from_slice(&ls.stdout).unwrap();
        if snaps.iter().all(|s| s["raw"] != Value::Bool(true)) {
            break snaps;
        }
        assert!(start.elapsed() < Duration::from_secs(60), "still raw after 60 s: {snaps:?}");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(!snaps.is_empty(), "no timed snapshot of a run of about 50 ms at 10 ms");
    for s in &snaps {
        assert_eq!(s["trigger"], "timer", "{s}");
        assert_eq!(s["complete"], true, "{s}");
        assert!(s["pause_us"].as_f64().unwrap() > 0.0, "{s}");
    }
    assert!(snaps[0]["stored_bytes"].as_u64().unwrap() > 0, "{}", snaps[0]);
    // The first tick may come before the grids are made; the last one comes after.
    let grids = 3 * 514 * 514 * 8;
    let last = snaps.last().unwrap();
    assert!(last["full_bytes"].as_u64().unwrap() > grids, "the last snapshot lacks the grids: {last}");
}
