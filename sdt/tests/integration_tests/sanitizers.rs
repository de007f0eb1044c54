//! Programs built with the sanitizers users hunt races with. AddressSanitizer and
//! ThreadSanitizer reserve terabytes of shadow memory, which a capture must not scan
//! whole; LeakSanitizer's check at exit cannot run under a tracer.

use sdt_test_harness::Skip;

use crate::harness::{Sdt, describe, gdb_values, int, sanitized_program, stderr, stdout};
use crate::restore::may_restore;

/// Words of `sanitized.c`'s block.
const WORDS: i64 = 2 << 20;

/// What `sanitized THREADS ROUNDS` prints: each round adds `i + round` to word `i`.
fn sum_after(rounds: i64) -> String {
    let per_round = |r: i64| WORDS * (WORDS - 1) / 2 + r * WORDS;
    format!("sum {}\n", (0..rounds).map(per_round).sum::<i64>())
}

/// Runs the program built with `sanitizer` under `sdt run` for four rounds, and checks
/// what a user would: its output and exit, short pauses, the values gdb shows.
fn captures_briefly(sanitizer: &str) -> Result<Sdt, Skip> {
    let prog = sanitized_program("sanitized", sanitizer)?;
    let sdt = Sdt::new();
    let out = sdt.output(&["run", "--", prog.to_str().unwrap(), "2", "4"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert_eq!(stdout(&out), sum_after(4), "{}", describe(&out));
    let snapshots = sdt.snapshots();
    assert_eq!(snapshots.len(), 4, "{snapshots:?}");
    // Scanning the shadow whole took 0.5 s (ASan) to 1.2 s (TSan) a pause. (The first
    // capture may wait for its buffer of 110 MB to be made, 0–120 ms here, depending on
    // how soon the program breaks: not the capture's own time.)
    for snap in &snapshots {
        let capture_us = int(snap, "pause_us").unwrap() - int(snap, "wait_us").unwrap();
        assert!(capture_us < 150_000, "{} took {capture_us} µs: {snap}", snap["name"]);
    }
    let gdb = sdt.ok(&["gdb", "S2", "--", "-batch", "-nx", "-ex", "print rounds", "-ex", "print block[5]"]);
    assert_eq!(gdb_values(&stdout(&gdb)), ["3", &(3 * 5 + 3).to_string()], "{}", describe(&gdb));
    // Every snapshot holds what the process held, shadow memory included.
    let sdt_verified = Sdt::new();
    let out = sdt_verified.ok(&["run", "--verify", "--", prog.to_str().unwrap(), "2", "3"]);
    let verified = stderr(&out).lines().filter(|l| l.contains("matches the live process")).count();
    assert_eq!(verified, 3, "{}", describe(&out));
    Ok(sdt)
}

fn an_asan_program_pauses_briefly_and_ends_as_it_would() -> Result<(), Skip> {
    let sdt = captures_briefly("address")?;
    let ls = stdout(&sdt.ok(&["ls"]));
    assert!(ls.lines().next().unwrap().contains("exited 0"), "{ls}");
    Ok(())
}

fn leak_sanitizers_check_is_turned_off_unless_the_user_chose() -> Result<(), Skip> {
    let prog = sanitized_program("sanitized", "address")?;
    let sdt = Sdt::new();
    let out = sdt.output(&["run", "--", prog.to_str().unwrap(), "1", "1"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert!(stderr(&out).contains("LSAN_OPTIONS=detect_leaks=0"), "{}", describe(&out));
    // The user's own choice stands: the check runs, and fails under a tracer.
    let chosen = sdt
        .command(&["run", "-q", "--", prog.to_str().unwrap(), "1", "1"])
        .env("ASAN_OPTIONS", "detect_leaks=1")
        .output()
        .unwrap();
    assert!(!stderr(&chosen).contains("LSAN_OPTIONS=detect_leaks=0"), "{}", describe(&chosen));
    assert!(stderr(&chosen).contains("LeakSanitizer"), "{}", describe(&chosen));
    assert_ne!(chosen.status.code(), Some(0), "{}", describe(&chosen));
    Ok(())
}

fn a_tsan_program_pauses_briefly() -> Result<(), Skip> {
    captures_briefly("thread").map(drop)
}

fn an_asan_program_resumes_from_its_snapshot() -> Result<(), Skip> {
    may_restore()?;
    let prog = sanitized_program("sanitized", "address")?;
    let sdt = Sdt::new();
    sdt.ok(&["run", "-q", "--", prog.to_str().unwrap(), "2", "4"]);
    // Its shadow memory is mapped again without reserving swap for terabytes.
    let out = sdt.ok(&["restore", "-q", "S1"]);
    assert_eq!(stdout(&out), sum_after(4), "{}", describe(&out));
    Ok(())
}

sdt_test_harness::tests![
    an_asan_program_pauses_briefly_and_ends_as_it_would,
    leak_sanitizers_check_is_turned_off_unless_the_user_chose,
    a_tsan_program_pauses_briefly,
    an_asan_program_resumes_from_its_snapshot,
];
