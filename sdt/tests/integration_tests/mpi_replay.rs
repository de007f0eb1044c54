//! Replay of MPI jobs with real Open MPI on one host (`sdt replay`): a job whose output
//! depends on the order its messages arrive in prints the recorded output in every
//! replay, and a replay to a global snapshot finds the same values there in every rank.

use std::collections::BTreeSet;

use sdt_test_harness::Skip;
use serde_json::Value;

use crate::harness::{
    Hosts, Sdt, describe, mpi_example, mpi_job, mpi_job_saying, mpi_program, stdout, workspace,
};

/// Open MPI's shared-memory transport, as `mpi_job` on one host uses it.
const MPIRUN_ARGS: [&str; 3] = ["--mpirun-arg=--mca", "--mpirun-arg=btl", "--mpirun-arg=self,vader"];

/// The newest run of the store: a rank of the job that just ran.
fn latest_run(sdt: &Sdt) -> String {
    let out = stdout(&sdt.ok(&["runs"]));
    let last = out.lines().rev().find_map(|l| l.strip_prefix("run ")).expect("a run");
    last.split(':').next().unwrap().to_owned()
}

/// Runs `races MODE` on `ranks` ranks; its rank 0's line of output and a run of the job.
fn race(sdt: &Sdt, ranks: u32, mode: &str) -> Result<(String, String), Skip> {
    let prog = mpi_program("races")?;
    let out = mpi_job(sdt, Hosts::One, ranks, &[], &prog, &[mode])?;
    assert!(out.status.success(), "{}", describe(&out));
    Ok((stdout(&out).trim().to_owned(), latest_run(sdt)))
}

/// `sdt replay --run RUN`: what the replay printed.
fn replay(sdt: &Sdt, run: &str, more: &[&str]) -> String {
    let mut args = vec!["replay", "--run", run];
    args.extend(MPIRUN_ARGS);
    args.extend(more);
    let out = sdt.ok(&args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("diverged"), "{}", describe(&out));
    stdout(&out).trim().to_owned()
}

/// Runs `mode` until two runs print different lines (at most `tries`), then replays the
/// last one `replays` times: each prints what it printed.
fn replays_repeat(mode: &str, ranks: u32, tries: usize, replays: usize) -> Result<(), Skip> {
    let sdt = Sdt::new();
    let mut seen = BTreeSet::new();
    let (mut printed, mut run) = (String::new(), String::new());
    for _ in 0..tries {
        (printed, run) = race(&sdt, ranks, mode)?;
        seen.insert(printed.clone());
        if seen.len() > 1 {
            break;
        }
    }
    assert!(seen.len() > 1, "{tries} runs of `races {mode}` all printed {seen:?}");
    let dry = sdt.ok(&["replay", "--run", &run, "--dry-run"]);
    let said = String::from_utf8_lossy(&dry.stderr);
    assert!(said.contains("receives recorded for replay"), "{}", describe(&dry));
    for i in 0..replays {
        let again = replay(&sdt, &run, &[]);
        assert_eq!(again, printed, "replay {i} of run {run}");
    }
    Ok(())
}

/// A floating-point sum taken in arrival order (`MPI_ANY_SOURCE`): runs print different
/// sums, 20 replays all print the recorded one.
fn a_sum_in_arrival_order_is_the_recorded_one_in_every_replay() -> Result<(), Skip> {
    replays_repeat("sum", 3, 8, 20)
}

/// A master–worker queue (posted `MPI_ANY_SOURCE` receives): who answered when repeats.
fn a_master_worker_queue_repeats_in_replay() -> Result<(), Skip> {
    replays_repeat("queue", 4, 8, 5)
}

/// The end of a job's run says, once, what its replay record pins, which `sdt replay`
/// then reads as it is.
fn the_end_of_a_job_says_what_its_replay_record_pins() -> Result<(), Skip> {
    let sdt = Sdt::new();
    let prog = mpi_program("races")?;
    let out = mpi_job_saying(&sdt, Hosts::One, 3, &[], &[], &prog, &["sum"])?;
    assert!(out.status.success(), "{}", describe(&out));
    let said = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = said.lines().filter(|l| l.contains("receives recorded for replay")).collect();
    assert_eq!(lines.len(), 1, "{}", describe(&out));
    assert!(lines[0].contains(" of 40 receives recorded for replay"), "{}", describe(&out));
    let dry = sdt.ok(&["replay", "--dry-run"]);
    assert!(
        String::from_utf8_lossy(&dry.stderr).contains(lines[0].trim_start_matches("sdt: ")),
        "{}",
        describe(&dry)
    );
    Ok(())
}

/// `sdt replay --until G1 --check total`: every rank reaches G1 again with its `total`.
fn a_replay_to_a_global_snapshot_has_the_same_values_in_every_rank() -> Result<(), Skip> {
    let sdt = Sdt::new();
    let (_, run) = race(&sdt, 3, "sum")?;
    let mut args = vec!["replay", "--run", &run, "--until", "G1", "--check", "total"];
    args.extend(MPIRUN_ARGS);
    let out = sdt.ok(&args);
    let text = stdout(&out);
    for rank in 0..3 {
        assert!(text.contains(&format!("rank {rank}: total equal at G1")), "{}", describe(&out));
    }
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("every rank reached G1 again"),
        "{}",
        describe(&out)
    );
    // The job ended at G1: rank 0 stopped halfway through the sum, before printing it.
    assert!(!text.contains("sum "), "{}", describe(&out));
    let ls = stdout(&sdt.ok(&["ls"]));
    assert!(ls.contains("G1"), "{ls}");
    Ok(())
}

/// A replay whose job cannot end (rank 2 now sends none of the values rank 0 took from
/// it) is stopped when its time is up: mpirun ends the ranks, each with a snapshot of
/// where it was, and `sdt check` of the replay finds rank 0 waiting for rank 2.
fn a_replay_that_hangs_is_stopped_in_time() -> Result<(), Skip> {
    let sdt = Sdt::new();
    let (_, run) = race(&sdt, 3, "sum")?;
    std::fs::write(sdt.dir.path().join("withhold"), "").unwrap();
    let mut args = vec!["replay", "--run", &run, "--timeout", "3"];
    args.extend(MPIRUN_ARGS);
    let started = std::time::Instant::now();
    let out = sdt.output(&args);
    assert!(started.elapsed() < std::time::Duration::from_secs(60), "took {:?}", started.elapsed());
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("the replay had not ended after 3.00 s (--timeout sets the time) and was stopped: "),
        "{err}"
    );
    // A run of the replay's job.
    let replayed = err.split("`sdt check --run ").nth(1).and_then(|r| r.split('`').next()).expect("named");
    assert_ne!(replayed, run);
    let ls = stdout(&sdt.ok(&["ls", "--run", replayed]));
    assert!(ls.contains("SIGTERM"), "a snapshot where a rank was stopped: {ls}");
    let check = sdt.output(&["check", "--run", replayed]);
    let found = stdout(&check);
    assert!(
        found.lines().any(|l| l.starts_with("deadlock: rank 0") && l.contains("rank 2")),
        "{}",
        describe(&check)
    );
    Ok(())
}

/// What `races sum`'s rank 0 holds in `total` after its first `received` receives of
/// the run whose history `events` (`sdt events --json`) is: rank 1 sends 1e16 and -1e16
/// in turn, rank r > 1 sends 1 + r/4, and rank 0 adds them in arrival order.
fn total_after(events: &[Value], received: usize) -> f64 {
    let mut sent_by_1 = 0;
    let mut total = 0.0;
    let receives = events.iter().filter(|e| e["rank"] == 0 && e["kind"] == "recv");
    for peer in receives.take(received).map(|e| e["peer"].as_u64().unwrap()) {
        total += match peer {
            1 => {
                sent_by_1 += 1;
                if sent_by_1 % 2 == 1 { 1e16 } else { -1e16 }
            }
            r => 1.0 + 0.25 * r as f64,
        };
    }
    total
}

/// `sdt rollback 0:5 --replay` where no global snapshot comes before the event: the job
/// runs again and every rank stops at the cut just before it with a snapshot there. The
/// snapshots form a consistent global snapshot of the replay at the cut's event counts,
/// and rank 0's `total` is the sum of exactly the four values it had received.
fn rollback_replays_to_the_cut_just_before_an_event() -> Result<(), Skip> {
    let sdt = Sdt::new();
    let (_, run) = race(&sdt, 3, "sum")?;
    let events: Vec<Value> =
        serde_json::from_str(&stdout(&sdt.ok(&["events", "--run", &run, "--json"]))).unwrap();
    let mut args = vec!["rollback", "--run", &run, "0:5", "--replay"];
    args.extend(MPIRUN_ARGS);
    let out = sdt.ok(&args);
    let text = stdout(&out);
    assert!(text.contains("no consistent global snapshot was taken before it"), "{}", describe(&out));
    let cut: Vec<u64> = (0..3)
        .map(|r| {
            let line = text.lines().find_map(|l| l.strip_prefix(&format!("  rank {r} after "))).unwrap();
            line.split(' ').next().unwrap().parse().unwrap()
        })
        .collect();
    assert_eq!(cut[0], 5, "{text}");
    assert!(
        text.contains("every rank stopped at the cut: the replay's G1 (0:S0 1:S0 2:S0), consistent"),
        "{}",
        describe(&out)
    );
    // Each rank's snapshot is where its history says: the cut's count of events (a rank
    // the event does not depend on at all stops right after its MPI_Init).
    for (rank, count) in cut.iter().enumerate() {
        let count = (*count).max(1);
        let show = stdout(&sdt.ok(&["show", &format!("{rank}:S0")]));
        assert!(
            show.contains(&format!("messages: {count} event(s) of its message history before it")),
            "{show}"
        );
    }
    let gdb =
        stdout(&sdt.ok(&["gdb", "0:S0", "--", "-batch", "-nx", "-ex", "printf \"total=%.17g\\n\", total"]));
    let expected = total_after(&events, 4);
    assert!(gdb.contains(&format!("total={expected}")), "expected total={expected}:\n{gdb}");
    // The rank stands in SDT's MPI library, inside the MPI_Recv it did not make: gdb
    // unwinds through the library to the rank's own call, and starts there.
    let bt = stdout(&sdt.ok(&["gdb", "0:S0", "--", "-batch", "-nx", "-ex", "bt"]));
    let (user_frame, innermost) = (bt.find(" in main ("), bt.find("#0 "));
    assert!(user_frame.is_some() && user_frame < innermost, "sdt frame selects main first:\n{bt}");
    assert!(bt.contains("MPI_ANY_SOURCE, 7") && bt.contains(" in MPI_Recv ("), "{bt}");
    // The replay ended at the cut: rank 0 never printed its sum.
    assert!(!text.contains("sum "), "{text}");
    Ok(())
}

/// `sdt rollback RANK:SEQ` on the relay example: before rank 1's receive of the total
/// (event 3) the latest consistent global snapshot is G2 (G3 is inconsistent), before
/// rank 0's first send G1, before rank 0's first event none (the cut is the start); with
/// `--replay` every rank reaches G2 again.
fn rollback_finds_the_latest_consistent_cut_before_an_event() -> Result<(), Skip> {
    let prog = mpi_example("relay")?;
    let sdt = Sdt::new();
    let out = mpi_job(&sdt, Hosts::One, 3, &[], &prog, &[])?;
    assert!(out.status.success(), "{}", describe(&out));
    let ls = stdout(&sdt.ok(&["ls"]));
    assert!(ls.contains("G2   bp 1/1/2 hit 1    0:S1 1:S1 2:S1           consistent"), "{ls}");
    assert!(ls.contains("INCONSISTENT"), "{ls}");
    let text = stdout(&sdt.ok(&["rollback", "1:3"]));
    assert!(text.starts_with("event 1:3: recv at relay.c:"), "{text}");
    assert!(text.contains("the latest consistent global snapshot before it: G2 (0:S1 1:S1 2:S1)"), "{text}");
    let text = stdout(&sdt.ok(&["rollback", "0:1"]));
    assert!(text.contains("before it: G1 (0:S0 1:S0 2:S0)"), "{text}");
    let none = sdt.output(&["rollback", "0:0"]);
    assert_eq!(none.status.code(), Some(1), "{}", describe(&none));
    assert!(
        stdout(&none)
            .contains("the cut just before it:\n  rank 0 after 0 event(s)\n  rank 1 after 0 event(s)\n")
    );
    let mut args = vec!["rollback", "1:3", "--replay"];
    args.extend(MPIRUN_ARGS);
    let again = sdt.ok(&args);
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("every rank reached G2 again"),
        "{}",
        describe(&again)
    );
    Ok(())
}

/// `sdt refine --from G1 --to G3 --check total` of a job: replayed to G3, `total` equal
/// in every rank; global snapshots out of order are refused.
fn refining_a_job_between_global_snapshots_replays_it() -> Result<(), Skip> {
    let prog = mpi_example("relay")?;
    let sdt = Sdt::new();
    let out = mpi_job(&sdt, Hosts::One, 3, &[], &prog, &[])?;
    assert!(out.status.success(), "{}", describe(&out));
    let out = sdt.output(&["refine", "--from", "G1", "--to", "G3", "--check", "total"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    for rank in 0..3 {
        assert!(stdout(&out).contains(&format!("rank {rank}: total equal at G3")), "{}", describe(&out));
    }
    let wrong = sdt.output(&["refine", "--from", "G3", "--to", "G1", "--check", "total"]);
    assert!(
        String::from_utf8_lossy(&wrong.stderr).contains("--from G3 must come before --to G1"),
        "{}",
        describe(&wrong)
    );
    Ok(())
}

/// A race across the three namespace hosts (TCP): the replay, launched there too
/// (`--mpirun scripts/mpi-hosts-mpirun`), prints what the recorded run printed, and a
/// rollback there stops every rank at a consistent cut.
fn a_race_across_three_hosts_replays_there() -> Result<(), Skip> {
    let prog = mpi_program("races")?;
    let sdt = Sdt::new();
    let out = mpi_job(&sdt, Hosts::Three, 3, &[], &prog, &["sum"])?;
    assert!(out.status.success(), "{}", describe(&out));
    let printed = stdout(&out).trim().to_owned();
    let ls = stdout(&sdt.ok(&["ls"]));
    assert!(ls.lines().next().unwrap().ends_with("3 ranks on sdt-h1, sdt-h2, sdt-h3"), "{ls}");
    let run = latest_run(&sdt);
    let launcher = workspace().join("scripts/mpi-hosts-mpirun");
    for _ in 0..3 {
        let again = sdt.ok(&["replay", "--mpirun", launcher.to_str().unwrap()]);
        assert!(!String::from_utf8_lossy(&again.stderr).contains("diverged"), "{}", describe(&again));
        assert_eq!(stdout(&again).trim(), printed, "{}", describe(&again));
    }
    // The replays ran on the hosts too.
    let ls = stdout(&sdt.ok(&["ls"]));
    assert!(ls.lines().next().unwrap().ends_with("3 ranks on sdt-h1, sdt-h2, sdt-h3"), "{ls}");
    let back =
        sdt.ok(&["rollback", "--run", &run, "0:5", "--replay", "--mpirun", launcher.to_str().unwrap()]);
    assert!(
        stdout(&back).contains("every rank stopped at the cut: the replay's G1 (0:S0 1:S0 2:S0), consistent"),
        "{}",
        describe(&back)
    );
    Ok(())
}

/// The store is untrusted: a link planted where the replay record goes is neither
/// followed when it is written nor handed to the ranks.
fn a_link_planted_as_the_replay_record_is_not_followed() -> Result<(), Skip> {
    let prog = mpi_example("relay")?;
    let sdt = Sdt::new();
    let out = mpi_job(&sdt, Hosts::One, 3, &[], &prog, &[])?;
    assert!(out.status.success(), "{}", describe(&out));
    let victim = sdt.dir.path().join("victim");
    std::fs::write(&victim, "precious").unwrap();
    let rank0 = stdout(&sdt.ok(&["ls"])).lines().find_map(|l| {
        l.strip_prefix("rank 0 on ")?.split("run ").nth(1)?.split(':').next().map(str::to_owned)
    });
    let record = sdt.store().join("runs").join(rank0.unwrap()).join("mpi-replay");
    std::os::unix::fs::symlink(&victim, &record).unwrap();
    let out = sdt.output(&["replay", "--dry-run"]);
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious", "{}", describe(&out));
    if out.status.success() {
        assert!(std::fs::symlink_metadata(&record).unwrap().is_file(), "{}", describe(&out));
    }
    Ok(())
}

fn a_replay_of_a_rebuilt_program_says_it_runs_the_new_one() -> Result<(), Skip> {
    let built = mpi_program("races")?;
    let sdt = Sdt::new();
    let prog = sdt.dir.path().join("races");
    std::fs::copy(&built, &prog).unwrap();
    let out = mpi_job(&sdt, Hosts::One, 2, &[], &prog, &["sum"])?;
    assert!(out.status.success(), "{}", describe(&out));
    let run = latest_run(&sdt);
    // Rebuilt: a new file in its place, one byte longer.
    let mut bytes = std::fs::read(&built).unwrap();
    bytes.push(0);
    std::fs::write(sdt.dir.path().join("races.new"), &bytes).unwrap();
    std::fs::set_permissions(
        sdt.dir.path().join("races.new"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    std::fs::rename(sdt.dir.path().join("races.new"), &prog).unwrap();
    let mut args = vec!["replay", "--run", &run];
    args.extend(MPIRUN_ARGS);
    let out = sdt.ok(&args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("changed since snapshot S0") && err.contains("the replay runs the program as it is now"),
        "{}",
        describe(&out)
    );
    Ok(())
}

sdt_test_harness::tests![
    a_replay_that_hangs_is_stopped_in_time,
    a_replay_of_a_rebuilt_program_says_it_runs_the_new_one,
    a_link_planted_as_the_replay_record_is_not_followed,
    a_race_across_three_hosts_replays_there,
    refining_a_job_between_global_snapshots_replays_it,
    rollback_finds_the_latest_consistent_cut_before_an_event,
    rollback_replays_to_the_cut_just_before_an_event,
    the_end_of_a_job_says_what_its_replay_record_pins,
    a_sum_in_arrival_order_is_the_recorded_one_in_every_replay,
    a_master_worker_queue_repeats_in_replay,
    a_replay_to_a_global_snapshot_has_the_same_values_in_every_rank,
];
