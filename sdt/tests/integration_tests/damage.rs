//! A damaged store, and a run killed mid-capture, lose nothing written before the damage.

use std::io::{BufRead, BufReader};
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::harness::{Sdt, describe, program, run, stderr, stdout, wait_with_timeout};

#[test]
fn a_truncated_snapshot_is_named_and_earlier_ones_still_read() {
    let sdt = Sdt::new();
    let prog = program("breakpoints");
    sdt.ok(&["run", "-q", "--", prog.to_str().unwrap(), "1", "3", "1/1/1/1"]);
    let s1 = sdt.store().join("runs/1/S1.snap");
    let len = std::fs::metadata(&s1).unwrap().len();
    std::fs::OpenOptions::new().write(true).open(&s1).unwrap().set_len(len / 2).unwrap();

    let ls = stdout(&sdt.ok(&["ls"]));
    assert!(ls.lines().any(|l| l.starts_with("S1 ") && l.contains("corrupt")), "{ls}");
    assert!(ls.lines().any(|l| l.starts_with("S0 ") && l.contains("bp 1/1/1")), "{ls}");
    sdt.core("S0");
    let out = sdt.output(&["export", "core", "S1", "-o", "s1.core"]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("snapshot S1 is corrupt"), "{}", stderr(&out));
}

#[test]
fn a_program_killed_during_a_capture_ends_the_run_cleanly() {
    let sdt = Sdt::new();
    let prog = program("behave");
    let mut child = sdt
        .command(&["run", "-q", "--", prog.to_str().unwrap(), "big", "256"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().unwrap()).read_line(&mut line).unwrap();
    let pid = line.trim().strip_prefix("pid ").expect("pid line").to_owned();
    // Each capture copies 256 MiB: a kill now lands in one, or between two.
    std::thread::sleep(Duration::from_millis(30));
    assert!(run(Command::new("kill").args(["-KILL", &pid])).status.success());
    let out = wait_with_timeout(child);
    assert_eq!(out.status.signal(), Some(9), "{}", describe(&out));
    let ls = stdout(&sdt.ok(&["ls"]));
    assert!(ls.lines().next().unwrap().contains("killed by signal 9"), "{ls}");
    assert!(ls.lines().any(|l| l.starts_with("S0 ")), "{ls}");
    sdt.core("S0");
}

#[test]
fn killing_sdt_mid_run_keeps_every_finished_snapshot() {
    let sdt = Sdt::new();
    let prog = program("churn");
    let mut child = sdt
        .command(&["run", "-q", "--", prog.to_str().unwrap(), "100000"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let run_dir = sdt.store().join("runs/1");
    let start = Instant::now();
    let finished = || {
        std::fs::read_dir(&run_dir).map_or(0, |d| {
            d.filter(|e| {
                let name = e.as_ref().unwrap().file_name();
                let name = name.to_string_lossy();
                name.starts_with('S') && (name.ends_with(".snap") || name.ends_with(".raw"))
            })
            .count()
        })
    };
    while finished() < 3 {
        assert!(start.elapsed() < Duration::from_secs(60), "no snapshots appeared");
        std::thread::sleep(Duration::from_millis(5));
    }
    child.kill().unwrap();
    child.wait().unwrap();

    let ls = stdout(&sdt.ok(&["ls"]));
    assert!(ls.lines().next().unwrap().contains("ended abnormally"), "{ls}");
    let complete: Vec<String> = sdt
        .snapshots()
        .iter()
        .filter(|s| s["complete"] == true)
        .map(|s| s["name"].as_str().unwrap().to_owned())
        .collect();
    assert!(complete.len() >= 3, "{ls}");
    for name in complete {
        sdt.core(&name);
    }
}
