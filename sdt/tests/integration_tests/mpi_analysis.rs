//! What SDT makes of an MPI job's message history, with real Open MPI jobs: vector clocks
//! (`sdt events`), global snapshots told consistent or not with the right messages in
//! flight (`sdt ls`, `sdt show G2`), errors placed at their rank and source line (`sdt
//! check`), the time–process diagram and the Perfetto trace. On one host and across the
//! three namespace hosts.

use std::path::Path;

use sdt_test_harness::Skip;
use serde_json::Value;

use crate::harness::{Hosts, Sdt, describe, int, mpi_job, mpi_program, stdout, workspace};

/// The line of `sdt/tests/programs/mpi/<program>.c` that carries `/* marker */`.
fn line_of(program: &str, marker: &str) -> String {
    let path = workspace().join("sdt/tests/programs/mpi").join(format!("{program}.c"));
    let text = std::fs::read_to_string(&path).unwrap();
    let line = text
        .lines()
        .position(|l| l.contains(&format!("/* {marker} */")))
        .unwrap_or_else(|| panic!("{marker}"));
    format!("{program}.c:{}", line + 1)
}

/// `sdt events --json`, as (rank, seq) → event.
fn events(sdt: &Sdt) -> Vec<Value> {
    serde_json::from_slice(&sdt.ok(&["events", "--json"]).stdout).unwrap()
}

fn clock(e: &Value) -> Vec<u64> {
    e["vc"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap()).collect()
}

/// `a < b` for vector clocks.
fn before(a: &[u64], b: &[u64]) -> bool {
    a.iter().zip(b).all(|(x, y)| x <= y) && a != b
}

/// Every receive's send happened before it; each rank's events are ordered; the ranks'
/// first events are concurrent.
fn check_clocks(events: &[Value]) {
    let find = |rank: i64, seq: i64| {
        events.iter().find(|e| int(e, "rank") == Some(rank) && int(e, "seq") == Some(seq))
    };
    let mut received = 0;
    for e in events {
        let (rank, seq) = (int(e, "rank").unwrap(), int(e, "seq").unwrap());
        if let Some(matched) = int(e, "matched") {
            let send = find(int(e, "peer").unwrap(), matched).unwrap();
            assert!(["send", "isend"].contains(&send["kind"].as_str().unwrap()), "{send}");
            assert_eq!(int(send, "peer"), Some(rank), "{send} -> {e}");
            assert!(before(&clock(send), &clock(e)), "{send} -> {e}");
            received += 1;
        }
        if seq > 0 {
            assert!(before(&clock(find(rank, seq - 1).unwrap()), &clock(e)), "{e}");
        }
    }
    assert!(received > 0);
    let (a, b) = (find(0, 0).unwrap(), find(1, 0).unwrap());
    assert!(!before(&clock(a), &clock(b)) && !before(&clock(b), &clock(a)), "{a} {b}");
}

/// `cuts.c` on `hosts`: G1 consistent, G2 consistent with m1 in flight, G3 inconsistent
/// with m2 received before the cut but sent after it; clocks, diagram and trace.
fn global_snapshots_on(hosts: Hosts) -> Result<(), Skip> {
    let prog = mpi_program("cuts")?;
    let sdt = Sdt::new();
    let out = mpi_job(&sdt, hosts, 2, &[], &prog, &[])?;
    assert!(out.status.success(), "{}", describe(&out));
    assert!(stdout(&out).contains("rank 1 received 3000"), "{}", describe(&out));

    let ls = stdout(&sdt.ok(&["ls"]));
    let global = |name: &str| {
        ls.lines().find(|l| l.starts_with(&format!("{name} "))).unwrap_or_else(|| panic!("{ls}"))
    };
    assert!(
        global("G1").contains("bp 1/1/1 hit 1") && global("G1").ends_with("consistent, 0 messages in flight"),
        "{ls}"
    );
    assert!(
        global("G2").contains("0:S1 1:S1") && global("G2").ends_with("consistent, 1 message in flight"),
        "{ls}"
    );
    assert!(global("G3").ends_with("INCONSISTENT: 1 message received before it but sent after"), "{ls}");

    let (m1_send, m1_recv) = (line_of("cuts", "m1-send"), line_of("cuts", "m1-recv"));
    let (m2_send, m2_recv) = (line_of("cuts", "m2-send"), line_of("cuts", "m2-recv"));
    let g2 = stdout(&sdt.ok(&["show", "G2"]));
    assert!(
        g2.contains(&format!("in flight (sent before the cut, received after it or never):\n  rank 0 event 1 (send at {m1_send}) -> rank 1 event 1 (recv at {m1_recv}): tag 1, 8 bytes\n")),
        "{g2}"
    );
    assert!(!g2.contains("received before the cut"), "{g2}");
    let g3 = stdout(&sdt.ok(&["show", "G3"]));
    assert!(
        g3.contains(&format!("received before the cut but sent after it:\n  rank 0 event 2 (send at {m2_send}) -> rank 1 event 2 (recv at {m2_recv})")),
        "{g3}"
    );
    let missing = sdt.output(&["show", "G4"]);
    assert!(
        String::from_utf8_lossy(&missing.stderr).contains("has no global snapshot G4 (it has G1, G2, G3)"),
        "{}",
        describe(&missing)
    );

    // The value rank 1 printed is in its last snapshot.
    let gdb = stdout(&sdt.ok(&["gdb", "1:S2", "--", "-batch", "-nx", "-ex", "print received"]));
    assert!(gdb.contains("$1 = 3000\n"), "{gdb}");

    let events = events(&sdt);
    check_clocks(&events);
    // m2's send is concurrent with rank 1's receive of m1 but precedes its receive of m2.
    let vc = |rank: i64, seq: i64| {
        clock(events.iter().find(|e| int(e, "rank") == Some(rank) && int(e, "seq") == Some(seq)).unwrap())
    };
    assert!(!before(&vc(0, 2), &vc(1, 1)) && !before(&vc(1, 1), &vc(0, 2)));
    assert!(before(&vc(0, 2), &vc(1, 2)));

    let dir = sdt.dir.path();
    for picture in ["job.svg", "job.png"] {
        sdt.ok(&["diagram", "-o", dir.join(picture).to_str().unwrap()]);
    }
    let svg = std::fs::read_to_string(dir.join("job.svg")).unwrap();
    for text in ["rank 0", "rank 1", "G1", "G3", "0:S2", "1:S1"] {
        assert!(svg.contains(&format!("\n{text}\n</text>")), "{text} missing from the diagram");
    }
    assert!(dir.join("job.png").metadata().unwrap().len() > 1000);

    let trace_path = dir.join("trace.json");
    sdt.ok(&["events", "--perfetto", trace_path.to_str().unwrap()]);
    let trace: Value = serde_json::from_slice(&std::fs::read(&trace_path).unwrap()).unwrap();
    let phases = |ph: &str| trace["traceEvents"].as_array().unwrap().iter().filter(|e| e["ph"] == ph).count();
    assert_eq!((phases("s"), phases("f")), (2, 2), "a flow per message");
    assert_eq!(phases("X"), events.len());
    assert_eq!(phases("i"), 6, "a mark per snapshot");
    Ok(())
}

fn global_snapshots_on_one_host() -> Result<(), Skip> {
    global_snapshots_on(Hosts::One)
}

fn global_snapshots_across_three_hosts() -> Result<(), Skip> {
    global_snapshots_on(Hosts::Three)
}

/// `sdt check --json` of a job of `check_errors MODE` (ended by mpirun's timeout when it
/// hangs): (kind, rank, site) of each finding.
fn findings(mode: &str) -> Result<Vec<(String, i64, String, Value)>, Skip> {
    findings_in(&Sdt::new(), mode)
}

/// [`findings`] of a job run in `sdt`.
fn findings_in(sdt: &Sdt, mode: &str) -> Result<Vec<(String, i64, String, Value)>, Skip> {
    let prog = mpi_program("check_errors")?;
    mpi_job(sdt, Hosts::One, 3, &["--timeout", "10"], &prog, &[mode])?;
    let out = sdt.output(&["check", "--json"]);
    let found: Vec<Value> =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|_| panic!("{}", describe(&out)));
    assert_eq!(out.status.code(), Some(if found.is_empty() { 0 } else { 1 }), "{}", describe(&out));
    Ok(found
        .into_iter()
        .map(|f| {
            let site = f["site"].as_str().unwrap_or("?").to_owned();
            (f["kind"].as_str().unwrap().to_owned(), int(&f, "rank").unwrap(), site, f)
        })
        .collect())
}

/// `sdt check --json` of `check_errors MODE` finds `expected`: (kind, rank, marker of
/// the line in `check_errors.c`), in order. Returns the findings' JSON objects.
fn expect_findings(mode: &str, expected: &[(&str, i64, &str)]) -> Result<Vec<Value>, Skip> {
    expect_findings_in(&Sdt::new(), mode, expected)
}

/// [`expect_findings`] of a job run in `sdt`.
fn expect_findings_in(sdt: &Sdt, mode: &str, expected: &[(&str, i64, &str)]) -> Result<Vec<Value>, Skip> {
    let found = findings_in(sdt, mode)?;
    let summary: Vec<(&str, i64, String)> = found.iter().map(|f| (f.0.as_str(), f.1, f.2.clone())).collect();
    let wanted: Vec<(&str, i64, String)> =
        expected.iter().map(|&(kind, rank, marker)| (kind, rank, line_of("check_errors", marker))).collect();
    assert_eq!(summary, wanted, "{mode}: {found:?}");
    Ok(found.into_iter().map(|f| f.3).collect())
}

fn sdt_check_places_each_injected_error_at_its_rank_and_line() -> Result<(), Skip> {
    assert_eq!(findings("clean")?, []);

    let found = expect_findings("deadlock", &[("deadlock", 0, "deadlock-0"), ("deadlock", 1, "deadlock-1")])?;
    assert_eq!(found[0]["waits_on"], serde_json::json!([1]));
    assert_eq!(found[1]["waits_on"], serde_json::json!([0]));

    // A wait for a non-blocking barrier that one rank never joins: placed at the wait.
    let found = expect_findings(
        "ideadlock",
        &[
            ("deadlock", 0, "ideadlock-wait"),
            ("deadlock", 1, "ideadlock-1"),
            ("deadlock", 2, "ideadlock-wait"),
        ],
    )?;
    let what = found[0]["what"].as_str().unwrap();
    assert!(what.contains("waiting for its ibarrier (event 1) to complete on every member"), "{what}");

    // A barrier where the others wait for an ibarrier: they never meet, and the
    // collectives do not match.
    let found = expect_findings(
        "mismatch",
        &[
            ("deadlock", 0, "mismatch-0"),
            ("deadlock", 1, "mismatch-wait"),
            ("deadlock", 2, "mismatch-wait"),
            ("collective_mismatch", 1, "mismatch-post"),
            ("collective_mismatch", 2, "mismatch-post"),
        ],
    )?;
    let what = found[3]["what"].as_str().unwrap();
    assert!(
        what.ends_with(
            "is ibarrier, where rank 0's is barrier (a blocking and a non-blocking collective never match)"
        ),
        "{what}"
    );

    // MPI_Abort, placed at its call, and the ranks left waiting for the rank that called it.
    let sdt = Sdt::new();
    let found = expect_findings_in(
        &sdt,
        "abort",
        &[("deadlock", 0, "abort-wait"), ("deadlock", 2, "abort-wait"), ("aborted", 1, "abort-call")],
    )?;
    assert_eq!(found[2]["what"], "aborted the job with error code 3", "{found:?}");
    assert!(found[0]["what"].as_str().unwrap().ends_with("rank 1 aborted"), "{found:?}");
    // The rank that aborted took a snapshot there, which gdb opens at the call.
    assert_eq!(found[2]["snapshot"], "1:S0", "{found:?}");
    let shown = stdout(&sdt.ok(&["show", "1:S0"]));
    assert!(shown.contains("class -1 id -2 (multiple_mark 1), hit 1, thread "), "{shown}");
    assert!(shown.contains(", attrs sdt=abort,code=3: SDT's own, the rank ending its job"), "{shown}");
    let text =
        stdout(&sdt.ok(&["gdb", "1:S0", "--", "-batch", "-ex", "sdt frame --caller", "-ex", "print rank"]));
    let line = line_of("check_errors", "abort-call");
    assert!(text.contains(&format!("check_errors.c:{}", line.rsplit(':').next().unwrap())), "{text}");
    assert!(text.contains("$1 = 1"), "{text}");

    let found = expect_findings("unmatched", &[("sent_to_ended", 0, "unmatched-send")])?;
    assert_eq!(int(&found[0], "peer"), Some(1));

    // The truncation ended rank 2 (MPI_ERRORS_ARE_FATAL): one finding, not two, and its
    // snapshot as the error ended it.
    let sdt = Sdt::new();
    expect_findings_in(&sdt, "truncate", &[("truncated", 2, "truncate-recv")])?;
    let shown = stdout(&sdt.ok(&["show", "2:S0"]));
    assert!(shown.contains(", attrs sdt=fatal_error,code="), "{shown}");
    Ok(())
}

/// A program that is not a job's rank gets a clear error from the job commands.
fn job_commands_outside_a_job_say_so() {
    let sdt = Sdt::new();
    let prog = crate::harness::program("breakpoints");
    sdt.ok(&["run", "-q", "--", prog.to_str().unwrap(), "1", "1", "1/0/1/0"]);
    for command in [&["events"][..], &["check"], &["diagram", "-o", "x.svg"]] {
        let out = sdt.output(command);
        assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("run 1 is not a rank of an MPI job"),
            "{}",
            describe(&out)
        );
    }
    assert!(!Path::new("x.svg").exists());
}

sdt_test_harness::tests![
    global_snapshots_on_one_host,
    global_snapshots_across_three_hosts,
    sdt_check_places_each_injected_error_at_its_rank_and_line,
    job_commands_outside_a_job_say_so,
];
