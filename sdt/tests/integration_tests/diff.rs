//! `sdt diff` names exactly what a program changed between two snapshots; `RUN:SNAP`
//! names a snapshot of another run.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::harness::{Sdt, program, stdout};

fn diff_json(sdt: &Sdt, a: &str, b: &str) -> Value {
    serde_json::from_slice(&sdt.ok(&["diff", a, b, "--json"]).stdout).unwrap()
}

/// `(old, new)` of the change named `name`.
fn values<'a>(changes: &'a [Value], name: &str) -> (&'a str, &'a str) {
    let c =
        changes.iter().find(|c| c["name"] == name).unwrap_or_else(|| panic!("no change {name}: {changes:?}"));
    (c["old"].as_str().unwrap(), c["new"].as_str().unwrap())
}

fn diff_names_exactly_the_changed_variables() {
    let sdt = Sdt::new();
    let prog = program("globals");
    let out = sdt.ok(&["run", "-q", "--", prog.to_str().unwrap()]);
    let buffer = stdout(&out).trim().rsplit(' ').next().map(|p| u64::from_str_radix(&p[2..], 16).unwrap());
    let main_tid = sdt.snapshots()[0]["tid"].as_i64().unwrap();

    let d = diff_json(&sdt, "S0", "S1");
    assert_eq!((d["a"].as_str(), d["b"].as_str()), (Some("1:S0"), Some("1:S1")));
    let vars = d["variables"].as_array().unwrap();
    let names: BTreeSet<&str> = vars.iter().map(|c| c["name"].as_str().unwrap()).collect();
    let mut expected: BTreeSet<String> =
        ["arr[2]", "arr[5]", "counter", "letter", "pt.y", "ratio", "started", "tls_counter"]
            .map(String::from)
            .into();
    expected.extend((0..16).map(|i| format!("big[{i}]")));
    assert_eq!(names, expected.iter().map(String::as_str).collect(), "{vars:#?}");
    assert_eq!(values(vars, "counter"), ("1", "2"));
    assert_eq!(values(vars, "ratio"), ("0.5", "0.25"));
    assert_eq!(values(vars, "letter"), ("97 'a'", "98 'b'"));
    assert_eq!(values(vars, "arr[5]"), ("5", "-5"));
    assert_eq!(values(vars, "pt.y"), ("1.5", "-2.5"));
    assert_eq!(values(vars, "big[3]"), ("0 '\\000'", "9 '\\011'"));
    let last_big = vars.iter().find(|c| c["name"] == "big[15]").unwrap();
    assert_eq!(last_big["more"], 48, "the other 48 elements are counted");
    let tls = vars.iter().find(|c| c["name"] == "tls_counter").unwrap();
    assert_eq!(
        (tls["old"].as_str(), tls["new"].as_str(), tls["thread"].as_i64()),
        (Some("1"), Some("2"), Some(main_tid))
    );

    // The 16 bytes written into the heap buffer, and no variable's bytes, are ranges.
    let ranges = d["ranges"].as_array().unwrap();
    let written = buffer.unwrap() + 100;
    assert!(
        ranges.iter().any(|r| r["start"] == written && r["end"] == written + 16 && r["mapping"] == "heap"),
        "{ranges:#?}"
    );
    let threads = d["threads"].as_array().unwrap();
    assert_eq!(threads.iter().filter(|t| t["change"] == "appeared").count(), 1, "{threads:#?}");
    assert!(threads.iter().all(|t| t["change"] != "ended"), "{threads:#?}");

    let text = stdout(&sdt.ok(&["diff", "0", "1"]));
    assert!(text.contains("\n  counter: 1 -> 2\n"), "{text}");
    assert!(text.contains("big[15]: 0 '\\000' -> 9 '\\011' (and 48 more elements)"), "{text}");
    assert!(!text.contains("unchanged_long") && !text.contains("file_static"), "{text}");

    // A snapshot with itself: nothing changed.
    let same = diff_json(&sdt, "S1", "1:S1");
    assert_eq!(same["variables"], Value::Array(vec![]));
    assert_eq!(same["ranges"], Value::Array(vec![]));
    assert_eq!(same["threads"], Value::Array(vec![]));
}

/// Past 32 changed ranges, the text sums them by mapping and lists the largest; `--all`
/// lists every one.
fn many_changed_ranges_are_summed_by_mapping() {
    let sdt = Sdt::new();
    let prog = program("dirty");
    // 1024 pages, one byte of every tenth (103 of them) written between S0 and S1.
    sdt.ok(&["run", "-q", "--", prog.to_str().unwrap(), "4", "10", "2"]);
    let ranges = diff_json(&sdt, "S0", "S1")["ranges"].as_array().unwrap().len();
    assert!(ranges > 100, "{ranges} ranges");
    let text = stdout(&sdt.ok(&["diff", "S0", "S1"]));
    assert!(
        text.contains(&format!("other memory ({ranges} ranges, ")) && text.contains("), by mapping:"),
        "{text}"
    );
    // The buffer's mapping comes first, with the most bytes (it may hold other memory
    // the program changed too).
    let first =
        text.lines().skip_while(|l| !l.ends_with("by mapping:")).nth(1).unwrap_or_else(|| panic!("{text}"));
    let fields: Vec<&str> = first.split_whitespace().collect();
    assert!(fields[0].starts_with("0x") && fields[2] == "ranges", "{text}");
    assert!(fields[1].parse::<usize>().unwrap() >= 103, "{text}");
    assert!(text.contains("the 32 largest ranges:"), "{text}");
    assert!(text.contains(&format!("… and {} more (`--all`", ranges - 32)), "{text}");
    assert!(text.lines().count() < 80, "{text}");
    let listed = |t: &str| t.lines().filter(|l| l.starts_with("  0x") && !l.contains(" ranges ")).count();
    assert_eq!(listed(&text), 32, "{text}");
    assert_eq!(listed(&stdout(&sdt.ok(&["diff", "S0", "S1", "--all"]))), ranges);
}

fn diff_compares_snapshots_of_two_runs() {
    let sdt = Sdt::new();
    let prog = program("globals");
    for _ in 0..2 {
        sdt.ok(&["run", "-q", "--", prog.to_str().unwrap()]);
    }
    // The same point of a deterministic program: its values agree but where it put
    // the heap.
    let d = diff_json(&sdt, "1:S1", "2:S1");
    assert_eq!((d["a"].as_str(), d["b"].as_str()), (Some("1:S1"), Some("2:S1")));
    let names: Vec<&str> =
        d["variables"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert!(names.iter().all(|n| *n == "buffer"), "{names:?}");
    let d = diff_json(&sdt, "1:S0", "2:S1");
    assert_eq!(values(d["variables"].as_array().unwrap(), "counter"), ("1", "2"));
    // Every command takes RUN:SNAP (runRUN:SNAP too); a run that disagrees with --run is
    // refused.
    assert!(stdout(&sdt.ok(&["show", "1:S0"])).starts_with("S0 of run 1 "));
    let out = sdt.output(&["show", "--run", "2", "1:S0"]);
    assert!(!out.status.success());
    let out = sdt.output(&["diff", "x:S0", "S1"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("before ':' comes a rank or run number"));
    assert!(stdout(&sdt.ok(&["show", "run2:S1"])).starts_with("S1 of run 2 "));
}

sdt_test_harness::tests![
    diff_names_exactly_the_changed_variables,
    many_changed_ranges_are_summed_by_mapping,
    diff_compares_snapshots_of_two_runs,
];
