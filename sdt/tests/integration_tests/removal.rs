//! `sdt rm`: runs removed whole, never half a job or a refinement without the run it grew
//! from, ids not given twice, a live capture left alone, a background compaction stopped.

use std::process::{Command, Stdio};
use std::time::Duration;

use sdt_test_harness::Skip;

use crate::harness::{Sdt, describe, program, run, stderr, stdout, wait_within};

/// `sdt runs`, one line per run, each cut at its first ":".
fn runs(sdt: &Sdt) -> Vec<String> {
    let out = sdt.ok(&["runs"]);
    let text = stdout(&out);
    text.lines().filter(|l| l.starts_with("run ")).map(|l| l.split(':').next().unwrap().to_owned()).collect()
}

fn rm_removes_whole_jobs_only_and_never_gives_an_id_twice() {
    let sdt = Sdt::new();
    let spin = program("spin");
    let spin = spin.to_str().unwrap();
    for _ in 0..3 {
        sdt.ok(&["run", "-q", "--every", "20", "--", spin, "60"]);
    }
    // Runs 4 and 5: the two ranks of job slurm-77.0, as Slurm's srun would start them.
    for rank in ["0", "1"] {
        let out = run(sdt
            .command(&["run", "-q", "--every", "20", "--", spin, "60"])
            .env("SLURM_PROCID", rank)
            .env("SLURM_NTASKS", "2")
            .env("SLURM_JOB_ID", "77")
            .env("SLURM_STEP_ID", "0")
            .stdin(Stdio::null()));
        assert!(out.status.success(), "{}", describe(&out));
    }
    assert_eq!(runs(&sdt), ["run 1", "run 2", "run 3", "run 4", "run 5"]);
    let total = stdout(&sdt.ok(&["runs"])).lines().last().unwrap().to_owned();
    assert!(
        total.starts_with("5 runs: ") && total.contains(" of snapshots in ") && total.contains(" free there"),
        "{total}"
    );

    let out = sdt.output(&["rm", "2", "4"]);
    assert!(!out.status.success(), "{}", describe(&out));
    assert!(
        stderr(&out).contains(
            "run 4 is rank 0 of job slurm-77.0, whose ranks are runs 4, 5: name them all (sdt rm 4 5)"
        ),
        "{}",
        describe(&out)
    );
    let out = sdt.ok(&["rm", "--dry-run", "2", "4-5"]);
    let said = stdout(&out);
    assert!(said.contains("would remove run 2: ") && said.contains("would remove run 5: "), "{said}");
    assert_eq!(runs(&sdt).len(), 5, "a dry run removes nothing");

    let out = sdt.ok(&["rm", "2", "4-5"]);
    let said = stderr(&out);
    assert!(said.contains("sdt: removed run 4: ") && said.contains("3 runs removed"), "{said}");
    assert_eq!(runs(&sdt), ["run 1", "run 3"]);
    let out = sdt.output(&["rm", "9"]);
    assert!(stderr(&out).contains("no run 9") && stderr(&out).contains("(runs: 1, 3)"), "{}", describe(&out));

    // The removed ids stay unused, the latest run's included.
    sdt.ok(&["rm", "3"]);
    sdt.ok(&["run", "-q", "--", spin, "10"]);
    assert_eq!(runs(&sdt), ["run 1", "run 6"]);
    let latest = std::fs::read_link(sdt.store().join("latest")).unwrap();
    assert_eq!(latest, std::path::Path::new("runs/6"));

    // A run whose run.json is garbage (an sdt killed as it wrote it) goes as well.
    std::fs::create_dir(sdt.store().join("runs/7")).unwrap();
    std::fs::write(sdt.store().join("runs/7/run.json"), b"{").unwrap();
    let out = sdt.ok(&["rm", "7"]);
    assert!(stderr(&out).contains("sdt: removed run 7: "), "{}", describe(&out));
    assert_eq!(runs(&sdt), ["run 1", "run 6"]);
}

fn rm_keeps_a_resumed_run_with_the_run_it_grew_from() -> Result<(), Skip> {
    crate::restore::may_restore()?;
    let sdt = Sdt::new();
    let spin = program("spin");
    sdt.ok(&["run", "-q", "--every", "20", "--", spin.to_str().unwrap(), "100"]);
    // Run 2 resumes run 1's S1, capturing.
    sdt.ok(&["restore", "-q", "S1", "--every", "20"]);
    let out = sdt.output(&["rm", "1"]);
    assert!(
        stderr(&out).contains("run 2 grew from run 1's S1") && stderr(&out).contains("(sdt rm 1 2)"),
        "{}",
        describe(&out)
    );
    sdt.ok(&["rm", "1", "2"]);
    assert!(runs(&sdt).is_empty(), "{:?}", runs(&sdt));
    assert!(stdout(&sdt.ok(&["runs"])).starts_with("no runs in "));
    Ok(())
}

fn rm_refuses_a_live_capture_and_stops_a_background_compaction() {
    let sdt = Sdt::new();
    let child = sdt.start_capturing("1500");
    let out = sdt.output(&["rm", "1"]);
    assert!(stderr(&out).contains("run 1 is being captured by sdt"), "{}", describe(&out));
    let out = wait_within(child, Duration::from_secs(30), "sdt run");
    assert!(out.status.success(), "{}", describe(&out));

    // Run 2 leaves a background compactor, stopped here as a busy machine starves it.
    let out = sdt.ok(&["run", "--", program("dirty").to_str().unwrap(), "64", "100", "8"]);
    let err = stderr(&out);
    let compactor: i32 = err
        .split_once("in the background (pid ")
        .and_then(|(_, rest)| rest.split_once(';')?.0.parse().ok())
        .unwrap_or_else(|| panic!("no background compactor: {err}"));
    assert!(run(Command::new("kill").args(["-STOP", &compactor.to_string()])).status.success(), "{err}");
    let out = sdt.ok(&["rm", "2"]);
    let said = stderr(&out);
    assert!(
        said.contains(&format!("(pid {compactor}, on idle CPU time only)"))
            && said.contains("stopping it")
            && said.contains("sdt: removed run 2: "),
        "{said}"
    );
    let state = std::fs::read_to_string(format!("/proc/{compactor}/stat")).unwrap_or_default();
    assert!(state.is_empty() || state.contains(") Z "), "the background compactor is left: {state}");
    assert_eq!(runs(&sdt), ["run 1"]);
}

sdt_test_harness::tests![
    rm_removes_whole_jobs_only_and_never_gives_an_id_twice,
    rm_keeps_a_resumed_run_with_the_run_it_grew_from,
    rm_refuses_a_live_capture_and_stops_a_background_compaction,
];
