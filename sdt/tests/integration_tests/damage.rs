//! A damaged store, and a run killed mid-capture, lose nothing written before the damage.

use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::harness::{Sdt, describe, program, run, stderr, stdout, wait_with_timeout, wait_within};

fn a_truncated_snapshot_is_named_and_earlier_ones_still_read() {
    let sdt = Sdt::new();
    let prog = program("breakpoints");
    sdt.ok(&["run", "-q", "--wait-compaction", "--", prog.to_str().unwrap(), "1", "3", "1/1/1/1"]);
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

fn a_program_killed_during_a_capture_ends_the_run_cleanly() {
    let sdt = Sdt::new();
    let prog = program("behave");
    let (child, _rest, line) = sdt.start(&["run", "-q", "--", prog.to_str().unwrap(), "big", "256"]);
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

/// A tiny xorshift generator: the kills' delays, repeatable from the printed seed.
struct Delays(u64);

impl Delays {
    fn next(&mut self, below: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % below
    }
}

fn a_program_killed_at_any_instant_of_its_captures_ends_the_run_cleanly() {
    let seed = std::env::var("SDT_TEST_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64
    });
    println!("kill delays from seed {seed} (SDT_TEST_SEED={seed} repeats them)");
    let mut delays = Delays(seed | 1);
    // Two threads, the case that hung; one and eight around it.
    for (threads, trials) in [(2, 20), (1, 6), (8, 6)] {
        for trial in 1..=trials {
            let delay = Duration::from_micros(delays.next(250_000));
            let what = format!("(seed {seed}: {threads} threads, trial {trial}, killed after {delay:?})");
            kill_during_captures(threads, delay, &what);
        }
    }
}

/// Runs `killed THREADS`, which snapshots in a loop, kills it with SIGKILL after `delay`,
/// and checks that `sdt run` ends at once as the program did, keeping every snapshot the
/// program was told of.
fn kill_during_captures(threads: u32, delay: Duration, what: &str) {
    let sdt = Sdt::new();
    let prog = program("killed");
    let (child, mut lines, line) =
        sdt.start(&["run", "-q", "--", prog.to_str().unwrap(), &threads.to_string()]);
    let pid =
        line.trim().strip_prefix("pid ").unwrap_or_else(|| panic!("pid line: {line:?} {what}")).to_owned();
    let told = std::thread::spawn(move || {
        let mut rest = String::new();
        std::io::Read::read_to_string(&mut lines, &mut rest).ok();
        rest
    });
    std::thread::sleep(delay);
    assert!(run(Command::new("kill").args(["-KILL", &pid])).status.success());
    let out = wait_within(child, Duration::from_secs(20), what);
    assert_eq!(out.status.signal(), Some(9), "{what}: {}", describe(&out));
    // A capture the kill cut short is dropped, not stored with the pages it could not read.
    assert!(!stderr(&out).contains("could not be read"), "{what}: {}", describe(&out));
    let told = told.join().unwrap();

    let ls = stdout(&sdt.ok(&["ls"]));
    assert!(ls.lines().next().unwrap().contains("killed by signal 9"), "{what}: {ls}");
    let stored = sdt.complete_snapshots();
    let told: Vec<&str> = told.lines().collect();
    assert!(told.contains(&"S0"), "{what}: {told:?}");
    for name in told {
        assert!(stored.iter().any(|s| s == name), "{what}: the program was told of {name}, not stored: {ls}");
    }
}

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

    // A commit handed to sdt's writer child is finished by it after sdt's death: the run
    // reads as running until then.
    let mut ls = stdout(&sdt.ok(&["ls"]));
    let waited = Instant::now();
    while ls.lines().next().unwrap().contains("— running") && waited.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(20));
        ls = stdout(&sdt.ok(&["ls"]));
    }
    assert!(ls.lines().next().unwrap().contains("ended abnormally"), "{ls}");
    let complete = sdt.complete_snapshots();
    assert!(complete.len() >= 3, "{ls}");
    for name in complete {
        sdt.core(&name);
    }
}

sdt_test_harness::tests![
    a_truncated_snapshot_is_named_and_earlier_ones_still_read,
    a_program_killed_during_a_capture_ends_the_run_cleanly,
    a_program_killed_at_any_instant_of_its_captures_ends_the_run_cleanly,
    killing_sdt_mid_run_keeps_every_finished_snapshot,
];
