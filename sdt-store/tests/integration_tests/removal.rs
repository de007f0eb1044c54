//! Removing runs: gone at once for readers, their ids never given again, nothing outside
//! the run touched through a link planted in it, a run being written left alone.

use std::os::unix::ffi::OsStrExt;

use sdt_store::{Error, PageSource, RunId, RunStatus, Store};

use crate::common::*;

/// A finished run with one snapshot; its id.
fn finished_run(store: &Store) -> RunId {
    let log = store.create_run(run_info()).unwrap();
    let id = log.run().id();
    let mut writer = log.compactor().unwrap();
    let page = page(1, 0x1000);
    writer.write_snapshot(meta(0, vec![anon(0x1000, 1)]), [(0x1000, PageSource::Data(&page))]).unwrap();
    drop(writer);
    log.finish(RunStatus::Exited { code: 0 }).unwrap();
    id
}

fn latest(store: &Store) -> Option<String> {
    let link = std::fs::read_link(store.root().join("latest")).ok()?;
    Some(link.to_string_lossy().into_owned())
}

fn removed_runs_are_gone_and_their_ids_are_not_given_again() {
    let tmp = tempfile::tempdir().unwrap();
    let store = Store::open_or_create(&tmp.path().join("store")).unwrap();
    for _ in 0..3 {
        finished_run(&store);
    }
    let freed = store.remove_run(RunId(3)).unwrap();
    assert!(freed >= 4096, "a snapshot and run.json freed {freed} bytes");
    assert_eq!(store.run_ids().unwrap(), [RunId(1), RunId(2)]);
    assert_eq!(latest(&store).as_deref(), Some("runs/2"));
    assert!(matches!(store.open_run(&RunId(3)), Err(Error::NoSuchRun { .. })));
    // Run 3's id is not given to the next run: what named run 3 never names another.
    assert_eq!(finished_run(&store), RunId(4));
    for id in [1, 2, 4] {
        store.remove_run(RunId(id)).unwrap();
    }
    assert!(store.run_ids().unwrap().is_empty());
    assert_eq!(latest(&store), None, "no run left: no latest link");
    assert!(matches!(store.latest_run(), Err(Error::EmptyStore { .. })));
    assert_eq!(finished_run(&store), RunId(5));
}

fn removal_follows_no_link_and_takes_every_name() {
    let tmp = tempfile::tempdir().unwrap();
    let store = Store::open_or_create(&tmp.path().join("store")).unwrap();
    let id = finished_run(&store);
    let run_dir = store.root().join("runs/1");
    // Someone else's files, which links in the run point at: they stay.
    let outside = tmp.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    std::fs::write(outside.join("precious"), b"keep").unwrap();
    std::os::unix::fs::symlink(outside.join("precious"), run_dir.join("S7.snap")).unwrap();
    std::os::unix::fs::symlink(&outside, run_dir.join("cores")).unwrap();
    // A folder, and a name that is not UTF-8.
    std::fs::create_dir_all(run_dir.join("sub/deeper")).unwrap();
    std::fs::write(run_dir.join("sub/deeper/f"), b"x").unwrap();
    std::fs::write(run_dir.join(std::ffi::OsStr::from_bytes(b"S\xff.raw")), b"x").unwrap();
    store.remove_run(id).unwrap();
    assert!(!run_dir.exists());
    assert_eq!(std::fs::read(outside.join("precious")).unwrap(), b"keep");
    let left: Vec<_> =
        std::fs::read_dir(store.root().join("runs")).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(left, [std::ffi::OsString::from(".last-id")]);
}

fn a_run_being_written_is_not_removed() {
    let tmp = tempfile::tempdir().unwrap();
    let store = Store::open_or_create(&tmp.path().join("store")).unwrap();
    let log = store.create_run(run_info()).unwrap();
    assert!(matches!(store.remove_run(log.run().id()), Err(Error::RunHeld { .. })));
    assert_eq!(store.run_ids().unwrap(), [RunId(1)]);
    log.finish(RunStatus::Exited { code: 0 }).unwrap();
    store.remove_run(RunId(1)).unwrap();
}

fn a_run_that_cannot_be_read_is_removed_too() {
    let tmp = tempfile::tempdir().unwrap();
    let store = Store::open_or_create(&tmp.path().join("store")).unwrap();
    finished_run(&store);
    // Run 2's sdt died as it started (no run.json, no lock); run 3's run.json is garbage.
    std::fs::create_dir(store.root().join("runs/2")).unwrap();
    std::fs::create_dir(store.root().join("runs/3")).unwrap();
    std::fs::write(store.root().join("runs/3/run.json"), b"{not json").unwrap();
    assert!(store.open_run(&RunId(3)).is_err());
    store.remove_run(RunId(3)).unwrap();
    store.remove_run(RunId(2)).unwrap();
    assert_eq!(store.run_ids().unwrap(), [RunId(1)]);
    assert!(matches!(store.remove_run(RunId(2)), Err(Error::NoSuchRun { .. })));
}

fn what_an_interrupted_removal_left_goes_with_the_next() {
    let tmp = tempfile::tempdir().unwrap();
    let store = Store::open_or_create(&tmp.path().join("store")).unwrap();
    let id = finished_run(&store);
    let left = store.root().join("runs/.removing-7-4242");
    std::fs::create_dir_all(&left).unwrap();
    std::fs::write(left.join("S0.snap"), b"half removed").unwrap();
    store.remove_run(id).unwrap();
    assert!(!left.exists());
}

sdt_test_harness::tests![
    removed_runs_are_gone_and_their_ids_are_not_given_again,
    removal_follows_no_link_and_takes_every_name,
    a_run_being_written_is_not_removed,
    a_run_that_cannot_be_read_is_removed_too,
    what_an_interrupted_removal_left_goes_with_the_next,
];
