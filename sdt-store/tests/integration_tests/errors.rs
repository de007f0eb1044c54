//! Each error the API promises, and writer misuse.

use std::collections::BTreeMap;

use sdt_store::{Error, PageSource, RunId, Store};

use crate::common::*;

fn store_and_run_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join("nope");
    let e = Store::open(&missing).unwrap_err();
    assert!(matches!(e, Error::NoStore { .. }), "{e:?}");
    assert!(e.to_string().starts_with("no SDT store at"), "{e}");

    // An existing directory with no runs is an empty store; a file is no store.
    let store = Store::open_or_create(&tmp.path().join("s")).unwrap();
    assert!(store.run_ids().unwrap().is_empty());
    let e = store.latest_run().unwrap_err();
    assert!(e.to_string().contains("holds no runs yet"), "{e}");
    let file = tmp.path().join("plain");
    std::fs::write(&file, b"x").unwrap();
    let e = Store::open(&file).unwrap_err();
    assert!(matches!(&e, Error::Io { path, .. } if *path == file), "{e:?}");
    assert!(format!("{:?}", std::error::Error::source(&e)).contains("NotADirectory"), "{e:?}");

    let e = store.open_run(&RunId(1)).unwrap_err();
    assert!(e.to_string().ends_with("(runs: none)"), "{e}");
    store.create_run(run_info()).unwrap();
    store.create_run(run_info()).unwrap();
    // Directories that are not runs are not listed.
    std::fs::create_dir(store.root().join("runs/tmp")).unwrap();
    std::fs::create_dir(store.root().join("runs/007")).unwrap();
    let e = store.open_run(&RunId(9)).unwrap_err();
    assert!(matches!(e, Error::NoSuchRun { .. }), "{e:?}");
    assert!(e.to_string().starts_with("no run 9 in") && e.to_string().ends_with("(runs: 1, 2)"), "{e}");
    assert_eq!(store.latest_run().unwrap(), RunId(2));

    std::fs::write(store.root().join("runs/2/run.json"), b"{\"id\": ").unwrap();
    let e = store.open_run(&RunId(2)).unwrap_err();
    assert!(matches!(e, Error::BadRunInfo { .. }), "{e:?}");
    // A run that never got its run.json (its start failed) or lost it does not hide
    // the runs before it.
    assert_eq!(store.latest_run().unwrap(), RunId(1));
    std::fs::create_dir(store.root().join("runs/3")).unwrap();
    assert_eq!(store.latest_run().unwrap(), RunId(1));
}

fn snapshot_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let store = Store::open_or_create(tmp.path()).unwrap();
    let (_log, mut writer) = create_run(&store);
    let maps = vec![anon(0x1000, 2)];
    let pages: BTreeMap<u64, Vec<u8>> = [(0x1000, page(1, 0x1000))].into();
    for seq in 0..2 {
        writer.write_snapshot(meta(seq, maps.clone()), sources(&pages, &[])).unwrap();
    }
    let run = store.open_run(&writer.id()).unwrap();
    for name in ["S2", "S01", "s1", "", "1", "S1.0"] {
        let e = run.open_snapshot(name).unwrap_err();
        assert!(matches!(e, Error::NoSuchSnapshot { .. }), "{name}: {e:?}");
        assert_eq!(e.to_string(), format!("no snapshot {name} in run 1 (snapshots: S0, S1)"));
    }
    std::fs::rename(run.dir().join("S1.snap"), run.dir().join("S1.snap.incomplete")).unwrap();
    assert!(matches!(run.open_snapshot("S1"), Err(Error::Incomplete { .. })));

    // A file from a later format version: version 4 with a valid header checksum.
    let path = run.dir().join("S0.snap");
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[8] = 4;
    let sum = xxhash_rust::xxh3::xxh3_64(&bytes[..24]);
    bytes[24..32].copy_from_slice(&sum.to_le_bytes());
    std::fs::write(&path, &bytes).unwrap();
    let e = run.open_snapshot("S0").unwrap_err();
    assert!(matches!(e, Error::UnsupportedVersion { found: 4, supported: 3, .. }), "{e:?}");
    assert_eq!(e.to_string(), "snapshot S0 has format version 4; this sdt reads versions 1 to 3");
}

fn writer_misuse_is_bad_input_and_changes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let store = Store::open_or_create(tmp.path()).unwrap();
    let (_log, mut writer) = create_run(&store);
    let maps = vec![anon(0x1000, 4)];
    let (p1, p2) = (page(1, 0x1000), page(2, 0x2000));
    let short = vec![1u8; 100];
    let bad_inputs: Vec<(u32, Vec<(u64, PageSource)>)> = vec![
        (1, vec![]),                                                                 // wrong seq
        (0, vec![(0x2000, PageSource::Data(&p2)), (0x1000, PageSource::Data(&p1))]), // unsorted
        (0, vec![(0x1000, PageSource::Data(&p1)), (0x1000, PageSource::Data(&p1))]), // repeated
        (0, vec![(0x1001, PageSource::Data(&p1))]),                                  // unaligned
        (0, vec![(0x1000, PageSource::Data(&short))]),                               // short page
    ];
    for (seq, pages) in bad_inputs {
        let e = writer.write_snapshot(meta(seq, maps.clone()), pages).unwrap_err();
        assert!(matches!(e, Error::BadInput(_)), "{e:?}");
    }
    let mut overlapping = maps.clone();
    overlapping.push(anon(0x2000, 1));
    let e = writer.write_snapshot(meta(0, overlapping), []).unwrap_err();
    assert!(e.to_string().contains("starts before the previous one ends"), "{e}");
    let mut unaligned = maps.clone();
    unaligned[0].end += 1;
    assert!(matches!(writer.write_snapshot(meta(0, unaligned), []), Err(Error::BadInput(_))));

    // None of it wrote anything: S0 is still next, and S1 must follow it.
    let pages = [(0x1000, PageSource::Data(&p1)), (0x2000, PageSource::Data(&p2))];
    assert_eq!(writer.write_snapshot(meta(0, maps.clone()), pages).unwrap().pages_stored, 2);
    let e = writer.write_snapshot(meta(0, maps.clone()), []).unwrap_err();
    assert_eq!(e.to_string(), "store writer misuse: snapshot S0 has seq 0, expected 1");
    // A late bad page fails the snapshot without touching the writer's state.
    let empty_run = [(0x1000, PageSource::Unchanged(0))];
    assert!(matches!(writer.write_snapshot(meta(1, maps.clone()), empty_run), Err(Error::BadInput(_))));
    let overlapping = [(0x1000, PageSource::Unchanged(2)), (0x2000, PageSource::Unchanged(1))];
    assert!(matches!(writer.write_snapshot(meta(1, maps.clone()), overlapping), Err(Error::BadInput(_))));
    let late = [(0x2000, PageSource::Unchanged(1)), (0x1000, PageSource::Unchanged(1))];
    assert!(matches!(writer.write_snapshot(meta(1, maps.clone()), late), Err(Error::BadInput(_))));
    let r = writer.write_snapshot(meta(1, maps.clone()), [(0x2000, PageSource::Unchanged(1))]).unwrap();
    assert_eq!((r.pages, r.pages_stored), (1, 0));
    let run = store.open_run(&writer.id()).unwrap();
    assert_eq!(run.snapshots().unwrap().len(), 2);
    let snap = run.open_snapshot("S1").unwrap();
    assert_eq!(stored_pages(&snap), [0x2000]);
    let mut buf = vec![0; 8192];
    snap.read(0x1000, &mut buf).unwrap();
    assert!(buf[..4096].iter().all(|&b| b == 0) && buf[4096..] == p2[..]);
}

/// An unchanged run that leaves the address space is refused: its end once wrapped
/// around, so that a lower page after it passed as ascending and the snapshot was
/// written with its index out of order, unreadable.
fn an_unchanged_run_past_the_address_space_is_bad_input() {
    let tmp = tempfile::tempdir().unwrap();
    let store = Store::open_or_create(tmp.path()).unwrap();
    let (_log, mut writer) = create_run(&store);
    // The highest mapping there can be: its end is the last page-aligned address.
    let top = 0xffff_ffff_ffff_e000;
    let maps = vec![anon(0x1000, 1), anon(top, 1)];
    let (low, high) = (page(1, 0x1000), page(2, top));
    let pages = [(0x1000, PageSource::Data(&low)), (top, PageSource::Data(&high))];
    writer.write_snapshot(meta(0, maps.clone()), pages).unwrap();
    let past_the_end = [(top, PageSource::Unchanged(3)), (0x1000, PageSource::Data(&low))];
    let e = writer.write_snapshot(meta(1, maps.clone()), past_the_end).unwrap_err();
    assert!(matches!(e, Error::BadInput(_)), "{e:?}");
    assert_eq!(e.to_string(), format!("store writer misuse: unchanged run of 3 pages at {top:#x}"));
    // S1 is still to be written, and reads back once it is.
    let pages = [(0x1000, PageSource::Data(&low)), (top, PageSource::Unchanged(1))];
    writer.write_snapshot(meta(1, maps), pages).unwrap();
    let snap = store.open_run(&writer.id()).unwrap().open_snapshot("S1").unwrap();
    assert_eq!(stored_pages(&snap), [0x1000, top]);
}

/// A thread listed twice, or with an id that is no thread's, is refused by the writer and
/// read as damage: exporters write one file per thread, named by its id (CRIU's
/// `core-<tid>.img`), and failed on the second one with a misleading write error.
fn thread_ids_are_positive_and_listed_once() {
    let tmp = tempfile::tempdir().unwrap();
    let store = Store::open_or_create(tmp.path()).unwrap();
    let (mut log, mut writer) = create_run(&store);
    let maps = vec![anon(0x1000, 1)];
    let twice = |seq| {
        let mut m = meta(seq, maps.clone());
        m.threads.push(m.threads[0].clone());
        m
    };
    let e = writer.write_snapshot(twice(0), []).unwrap_err();
    assert_eq!(e.to_string(), "store writer misuse: snapshot S0: thread 100 is listed twice");
    let mut zero = meta(0, maps.clone());
    zero.threads[0].tid = 0;
    let e = writer.write_snapshot(zero, []).unwrap_err();
    assert_eq!(e.to_string(), "store writer misuse: snapshot S0: thread id 0 is not > 0");
    writer.write_snapshot(meta(0, maps.clone()), []).unwrap();

    // The capture's commit does not check: the reader does.
    let spill = log.spares().make().unwrap();
    log.commit(spill, &[], &[], &twice(1)).unwrap();
    let run = store.open_run(&log.run().id()).unwrap();
    let e = run.open_snapshot("S1").unwrap_err();
    assert_eq!(e.to_string(), "snapshot S1 is corrupt: metadata: thread 100 is listed twice");
    assert!(matches!(run.read_meta(1), Err(Error::Corrupt { .. })));
    run.open_snapshot("S0").unwrap();
}

sdt_test_harness::tests![
    store_and_run_errors,
    snapshot_errors,
    writer_misuse_is_bad_input_and_changes_nothing,
    an_unchanged_run_past_the_address_space_is_bad_input,
    thread_ids_are_positive_and_listed_once,
];
