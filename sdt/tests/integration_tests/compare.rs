//! `sdt compare` checks a run against a reference run arrival by arrival: none differ
//! for a deterministic program, and an injected divergence is found where it was made.

use serde_json::Value;

use crate::harness::{Sdt, describe, program, run, stdout};

/// Runs `accumulate 5 THREADS` under sdt, with `INJECT_AT=inject` if given.
fn accumulate(sdt: &Sdt, threads: &str, inject: Option<&str>) {
    let prog = program("accumulate");
    let mut cmd = sdt.command(&["run", "-q", "--", prog.to_str().unwrap(), "5", threads]);
    if let Some(at) = inject {
        cmd.env("INJECT_AT", at);
    }
    let out = run(&mut cmd);
    assert!(out.status.success(), "{}", describe(&out));
}

fn compare_finds_no_difference_between_deterministic_runs() {
    let sdt = Sdt::new();
    accumulate(&sdt, "3", None);
    accumulate(&sdt, "3", None);
    accumulate(&sdt, "1", None);
    let out = sdt.ok(&["compare", "--reference", "1", "--run", "2"]);
    assert_eq!(
        stdout(&out),
        "no difference: run 2 agrees with reference run 1 at all 5 arrivals in common\n"
    );
    // One thread against three: the same sums up to rounding.
    sdt.ok(&["compare", "--reference", "3", "--run", "2", "--rtol", "1e-12"]);
    let out =
        sdt.ok(&["compare", "--reference", "3", "--run", "2", "--vars", "steps_done,checksum", "--json"]);
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!((json["paired"].as_u64(), json["first_difference"].is_null()), (Some(5), true), "{json}");
}

fn compare_reports_an_injected_divergence() {
    let sdt = Sdt::new();
    accumulate(&sdt, "1", None);
    accumulate(&sdt, "3", Some("3"));
    let out = sdt.output(&["compare", "--reference", "1", "--rtol", "1e-12"]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[0],
        "first difference: level 1 class 1 id 1 hit 3 (1:S2 and 2:S2); old: reference, new: run 2"
    );
    assert!(
        lines[1].starts_with("  total: 13.18875508520") && lines[1].contains(" -> 14.18875508520"),
        "{text}"
    );
    assert_eq!(lines[2], "last agreement: level 1 class 1 id 1 hit 2 (1:S1 and 2:S1)", "{text}");
    assert_eq!(lines.len(), 3, "only total differs: {text}");

    // Named members and elements, and expressions gdb evaluates, in JSON.
    let out = sdt.output(&[
        "compare",
        "--reference",
        "1",
        "--rtol",
        "1e-12",
        "--vars",
        "steps_done,total*2",
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    let first = &json["first_difference"];
    assert_eq!(
        (first["hit"].as_u64(), first["reference"].as_str(), first["run"].as_str()),
        (Some(3), Some("1:S2"), Some("2:S2"))
    );
    let values = first["values"].as_array().unwrap();
    assert_eq!(values.len(), 1, "{values:?}");
    assert_eq!(values[0]["name"], "total*2");
    assert!(values[0]["new"].as_str().unwrap().starts_with("28.37751017041"), "{values:?}");
    assert_eq!(json["last_agreement"]["hit"], 2);
}

sdt_test_harness::tests![
    compare_finds_no_difference_between_deterministic_runs,
    compare_reports_an_injected_divergence
];
