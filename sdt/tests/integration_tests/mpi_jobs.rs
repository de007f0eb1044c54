//! MPI jobs under `sdt run`: `mpirun -np 3 sdt run -- job_ranks` with real Open MPI, on
//! one host (shared memory) and across the three network-namespace hosts of
//! `scripts/mpi-hosts` (TCP over the bridge). The ranks' runs form one job in the store;
//! `sdt ls` shows it, and `2:S1` is rank 2's S1 for gdb, show, diff and export.

use std::path::Path;
use std::process::{Command, Output};

use sdt_test_harness::Skip;
use serde_json::Value;

use crate::harness::{Hosts, Sdt, describe, int, mpi_job, mpi_program, program, stderr, stdout};

/// What each rank printed: `rank R of N on HOST value V` → (R, HOST, V), by rank.
fn printed(out: &Output) -> Vec<(u32, String, String)> {
    let mut ranks: Vec<(u32, String, String)> = stdout(out)
        .lines()
        .filter_map(|line| {
            let words: Vec<&str> = line.split_whitespace().collect();
            match words[..] {
                ["rank", r, "of", _, "on", host, "value", v] => {
                    Some((r.parse().ok()?, host.into(), v.into()))
                }
                _ => None,
            }
        })
        .collect();
    ranks.sort();
    ranks
}

/// The job's `sdt ls`, `sdt ls --json`, `gdb`, `show`, `diff` and `export` by rank,
/// checked against what the ranks printed: three ranks, on `hosts` in rank order.
fn check_job(sdt: &Sdt, out: &Output, hosts: &[&str], prog: &Path) {
    let ranks = printed(out);
    assert_eq!(ranks.len(), 3, "{}", describe(out));
    for (rank, host, _) in &ranks {
        assert_eq!(host, hosts[*rank as usize], "{}", describe(out));
    }
    let mut distinct = hosts.to_vec();
    distinct.dedup();
    let ls = stdout(&sdt.ok(&["ls"]));
    let first = ls.lines().next().unwrap_or_default();
    assert!(
        first.starts_with("job ") && first.ends_with(&format!(": 3 ranks on {}", distinct.join(", "))),
        "{ls}"
    );
    for (rank, host, _) in &ranks {
        assert!(ls.contains(&format!("\nrank {rank} on {host}: run ")), "{ls}");
    }
    let listed: Vec<Value> = sdt.snapshots();
    for rank in 0..3 {
        let names: Vec<&str> = listed
            .iter()
            .filter(|s| int(s, "rank") == Some(rank))
            .map(|s| s["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["S0", "S1"], "rank {rank}: {listed:?}");
    }

    // gdb on rank 2's S1 sees the value rank 2 printed, and what its left neighbour sent.
    let gdb = stdout(&sdt.ok(&[
        "gdb",
        "2:S1",
        "--",
        "-batch",
        "-nx",
        "-ex",
        "print rank_value",
        "-ex",
        "print left_value",
    ]));
    assert!(gdb.contains(&format!("$1 = {}\n", ranks[2].2)), "{gdb}");
    assert!(gdb.contains(&format!("$2 = {}\n", ranks[1].2)), "{gdb}");
    let show = stdout(&sdt.ok(&["show", "1:S0"]));
    assert!(show.lines().next().unwrap().contains(", rank 1 of job "), "{show}");
    let diff = stdout(&sdt.ok(&["diff", "0:S0", "1:S0"]));
    assert!(diff.contains(&format!("rank_value: {} -> {}", ranks[0].2, ranks[1].2)), "{diff}");
    let core = sdt.dir.path().join("rank0.core");
    sdt.ok(&["export", "core", "0:S1", "-o", core.to_str().unwrap()]);
    // gdb on the core reads the rank's list of libraries: SDT's MPI library is not named
    // /proc/self/fd/N there, a descriptor of gdb's own (a pipe it once waited on for ever).
    let gdb = Command::new("timeout")
        .args(["-s", "KILL", "60", "gdb", "-q", "-batch", "-nx"])
        .arg(format!("--se={}", prog.display()))
        .arg(format!("--core={}", core.display()))
        .args(["-ex", "print rank_value", "-ex", "info sharedlibrary"])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let said = stdout(&gdb);
    assert!(said.contains(&format!("$1 = {}\n", ranks[0].2)), "{}", describe(&gdb));
    assert!(said.contains("sdtmpi.so") && !said.contains("/proc/self/fd/"), "{}", describe(&gdb));

    // After a job a name must say its rank; run N is still reachable as runN.
    let refused = sdt.output(&["show", "S1"]);
    assert_eq!(refused.status.code(), Some(1), "{}", describe(&refused));
    assert!(stderr(&refused).contains("say which rank's snapshot (0:S1 … 2:S1)"), "{}", describe(&refused));
    let run = listed.iter().find(|s| int(s, "rank") == Some(2)).and_then(|s| int(s, "run")).unwrap();
    let gdb =
        stdout(&sdt.ok(&["gdb", &format!("run{run}:S0"), "--", "-batch", "-nx", "-ex", "print rank_value"]));
    assert!(gdb.contains(&format!("$1 = {}\n", ranks[2].2)), "{gdb}");
}

/// This machine's host name, as `sdt run` records it.
fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap().trim().to_owned()
}

fn a_job_on_one_host() -> Result<(), Skip> {
    let prog = mpi_program("job_ranks")?;
    let sdt = Sdt::new();
    let out = mpi_job(&sdt, Hosts::One, 3, &[], &prog, &[])?;
    assert!(out.status.success(), "{}", describe(&out));
    let host = host_name();
    check_job(&sdt, &out, &[&host, &host, &host], &prog);
    Ok(())
}

fn a_job_across_three_hosts() -> Result<(), Skip> {
    let prog = mpi_program("job_ranks")?;
    let sdt = Sdt::new();
    let out = mpi_job(&sdt, Hosts::Three, 3, &["--mca", "btl_base_verbose", "30"], &prog, &[])?;
    assert!(out.status.success(), "{}", describe(&out));
    // The ranks' messages went over TCP between the hosts' addresses on the bridge.
    let log = format!("{}{}", stdout(&out), stderr(&out));
    for to in ["10.77.0.1", "10.77.0.2", "10.77.0.3"] {
        assert!(log.contains(&format!("btl:tcp: now connected to {to}")), "{log}");
    }
    check_job(&sdt, &out, &["sdt-h1", "sdt-h2", "sdt-h3"], &prog);
    Ok(())
}

/// Without a launcher, `--job`, `--rank` and `--job-size` make a job of plain runs: `sdt
/// ls` and rank names work the same, and outside a job `N:` still names run N.
fn ranks_given_on_the_command_line() {
    let sdt = Sdt::new();
    let prog = program("breakpoints");
    let prog = prog.to_str().unwrap();
    sdt.ok(&["run", "-q", "--", prog, "1", "1", "1/0/1/0"]);
    sdt.ok(&["show", "1:S0"]);
    for rank in ["1", "0"] {
        sdt.ok(&[
            "run",
            "-q",
            "--job",
            "a/b",
            "--rank",
            rank,
            "--job-size",
            "3",
            "--",
            prog,
            "1",
            "1",
            "1/0/1/0",
        ]);
    }
    let ls = stdout(&sdt.ok(&["ls"]));
    assert!(ls.starts_with(&format!("job a_b: 2 of 3 ranks (missing: 2) on {}\n", host_name())), "{ls}");
    // Rank 1 is run 2, rank 0 run 3.
    let show = stdout(&sdt.ok(&["show", "0:S0"]));
    assert!(show.starts_with("S0 of run 3, rank 0 of job a_b on "), "{show}");
    let show = stdout(&sdt.ok(&["show", "run1:S0"]));
    assert!(show.starts_with("S0 of run 1 ("), "{show}");
    let missing = sdt.output(&["show", "2:S0"]);
    assert!(
        stderr(&missing).contains("job a_b has no rank 2 in this store (ranks: 0, 1)"),
        "{}",
        describe(&missing)
    );
    let bad = sdt.output(&["run", "--job", "j", "--rank", "3", "--job-size", "3", "--", prog]);
    assert_eq!(bad.status.code(), Some(1), "{}", describe(&bad));
}

sdt_test_harness::tests![a_job_on_one_host, a_job_across_three_hosts, ranks_given_on_the_command_line];
