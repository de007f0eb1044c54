//! `sdt run` returns when the program ends, leaving compaction it has not finished to a
//! background `sdt compact`; the snapshots read the same before and after.

use std::process::Command;
use std::time::{Duration, Instant};

use crate::harness::{Sdt, describe, program, run, stderr, stdout, wait_within};

fn sdt_run_returns_with_the_program_and_compaction_finishes_in_the_background() {
    let sdt = Sdt::new();
    let prog = program("dirty");
    // 8 snapshots of 192 MiB, every page written between them: far more than compaction
    // does in the moment sdt gives it once the program has ended.
    let started = Instant::now();
    let out = sdt.ok(&["run", "--", prog.to_str().unwrap(), "192", "100", "8"]);
    let took = started.elapsed();
    let err = stderr(&out);
    assert!(stdout(&out).contains("dirty done"), "{}", describe(&out));
    let left: u32 = err
        .split_once(" more being compacted in the background")
        .and_then(|(before, _)| before.rsplit(' ').next()?.parse().ok())
        .unwrap_or_else(|| panic!("sdt run said nothing of background compaction ({took:?}): {err}"));
    assert!((1..=8).contains(&left), "{err}");
    // The background compactor, starved as a busy machine starves it (it runs on idle CPU
    // time only): `sdt compact` below must not wait for it.
    let compactor: i32 = err
        .split_once("in the background (pid ")
        .and_then(|(_, rest)| rest.split_once(';')?.0.parse().ok())
        .unwrap_or_else(|| panic!("no pid for the background compactor: {err}"));
    assert!(run(Command::new("kill").args(["-STOP", &compactor.to_string()])).status.success(), "{err}");

    // Readable at once, raw: listed, and exported.
    let listed = sdt.snapshots();
    assert_eq!(listed.len(), 8, "{listed:?}");
    assert!(listed.iter().all(|s| s["complete"] == true), "{listed:?}");
    assert!(listed.last().unwrap()["raw"] == true, "S7 raw still: {listed:?}");
    let ls = stdout(&sdt.ok(&["ls"]));
    assert!(ls.contains("exited 0") && ls.contains("being compacted"), "{ls}");
    let raw_core = std::fs::read(sdt.core("S7")).unwrap();

    // `sdt compact` takes the background one's work over; then every snapshot is
    // compacted and reads as it did raw.
    let out = sdt.ok(&["compact"]);
    let said = stderr(&out);
    assert!(
        said.contains(&format!("being compacted in the background (pid {compactor}, on idle CPU time only)"))
            && said.contains("taking it over")
            && said.contains("sdt: compacted S7 of run 1"),
        "{}",
        describe(&out)
    );
    // Gone, or a zombie for whoever inherited it to reap.
    let state = std::fs::read_to_string(format!("/proc/{compactor}/stat")).unwrap_or_default();
    assert!(state.is_empty() || state.contains(") Z "), "the background compactor is left: {state}");
    let listed = sdt.snapshots();
    assert!(listed.iter().all(|s| s["raw"] == false), "{listed:?}");
    let path = sdt.dir.path().join("S7.compacted.core");
    sdt.ok(&["export", "core", "S7", "-o", path.to_str().unwrap()]);
    assert!(std::fs::read(&path).unwrap() == raw_core, "S7 exports differently compacted");
}

fn wait_compaction_returns_with_every_snapshot_compacted() {
    let sdt = Sdt::new();
    let prog = program("dirty");
    let out = sdt.ok(&["run", "--wait-compaction", "--", prog.to_str().unwrap(), "64", "100", "4"]);
    assert!(!stderr(&out).contains("background"), "{}", describe(&out));
    let listed = sdt.snapshots();
    assert_eq!(listed.len(), 4);
    assert!(listed.iter().all(|s| s["raw"] == false), "{listed:?}");
}

fn compact_refuses_a_run_still_being_captured_and_finishes_it_after() {
    let sdt = Sdt::new();
    let child = sdt.start_capturing("2000");
    let out = sdt.output(&["compact"]);
    assert!(!out.status.success(), "{}", describe(&out));
    assert!(stderr(&out).contains("is being captured by sdt"), "{}", describe(&out));

    let out = wait_within(child, Duration::from_secs(30), "sdt run");
    assert!(out.status.success(), "{}", describe(&out));
    sdt.ok(&["compact"]);
    let listed = sdt.snapshots();
    assert!(!listed.is_empty() && listed.iter().all(|s| s["raw"] == false), "{listed:?}");
}

sdt_test_harness::tests![
    sdt_run_returns_with_the_program_and_compaction_finishes_in_the_background,
    wait_compaction_returns_with_every_snapshot_compacted,
    compact_refuses_a_run_still_being_captured_and_finishes_it_after,
];
