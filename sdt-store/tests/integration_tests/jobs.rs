//! Runs grouped as a job's ranks: `job_ranks` (the newest run of a rank), `rank_run`,
//! `job_of` a refinement, `latest_job`, and a `run.json` whose job breaks the grammar.

use sdt_store::{Error, JobMember, Refinement, RunId, RunInfo, Store};

use crate::common::*;

fn rank(job: &str, rank: u32) -> RunInfo {
    RunInfo { job: Some(JobMember { id: job.into(), rank, size: 3, host: format!("h{rank}") }), ..run_info() }
}

fn job_ranks_keep_the_newest_run_of_each_rank() {
    let tmp = tempfile::tempdir().unwrap();
    let store = Store::open_or_create(tmp.path()).unwrap();
    assert_eq!(store.latest_job().unwrap(), None);
    for info in [rank("j1", 1), rank("j1", 0), run_info(), rank("j2", 0), rank("j1", 1)] {
        store.create_run(info).unwrap();
    }
    // Run 5 is rank 1 again (a job id used twice): it replaces run 1.
    assert_eq!(store.job_ranks("j1").unwrap(), [(0, RunId(2)), (1, RunId(5))]);
    assert_eq!(store.job_ranks("j2").unwrap(), [(0, RunId(4))]);
    assert!(store.job_ranks("j3").unwrap().is_empty());
    assert_eq!(store.rank_run("j1", 1).unwrap(), RunId(5));
    let e = store.rank_run("j1", 2).unwrap_err();
    assert!(matches!(e, Error::NoSuchRank { rank: 2, .. }), "{e:?}");
    assert_eq!(e.to_string(), "job j1 has no rank 2 in this store (ranks: 0, 1)");
    assert_eq!(store.job_of(RunId(3)).unwrap(), None);
    assert_eq!(store.latest_job().unwrap().map(|j| (j.id, j.rank)), Some(("j1".into(), 1)));

    // A refinement of a rank's snapshot belongs to the rank's job, without being a rank.
    let parent = Refinement { run: RunId(4), from: "S0".into(), to: None, reached: None, edit: None };
    store.create_run(RunInfo { parent: Some(parent), ..run_info() }).unwrap();
    assert_eq!(store.latest_job().unwrap().map(|j| j.id), Some("j2".into()));
    assert_eq!(store.job_ranks("j2").unwrap(), [(0, RunId(4))]);
}

fn a_job_that_breaks_the_grammar_is_damage() {
    let tmp = tempfile::tempdir().unwrap();
    let store = Store::open_or_create(tmp.path()).unwrap();
    store.create_run(rank("../../x", 0)).unwrap();
    let e = store.open_run(&RunId(1)).unwrap_err();
    assert!(matches!(e, Error::BadRunInfo { .. }) && e.to_string().contains("job.id"), "{e}");
    // It is left out of every job, as a damaged run is.
    assert!(store.job_ranks("../../x").unwrap().is_empty());
    store.create_run(rank("j", 3)).unwrap();
    assert!(store.open_run(&RunId(2)).unwrap_err().to_string().contains("job.rank 3"));
}

sdt_test_harness::tests![job_ranks_keep_the_newest_run_of_each_rank, a_job_that_breaks_the_grammar_is_damage];
