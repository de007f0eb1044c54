//! Snapshots as captured (raw) and after compaction: the same bytes either way, a run
//! whose `sdt` died keeps every committed snapshot, and a compactor that comes later
//! finishes it.

use std::collections::BTreeMap;

use sdt_store::{Error, PageSpan, RunLog, RunStatus, SpillFile, Store};

use crate::common::*;

const BASE: u64 = 0x7f00_0000_0000;
const PAGES: u64 = 96;

fn addr(i: u64) -> u64 {
    BASE + i * 4096
}

/// Commits snapshot `seq` of `log` as a capture would: `written` pages copied into a
/// spare, the other pages of `cur` unchanged since the snapshot before.
fn commit(log: &mut RunLog, seq: u32, cur: &BTreeMap<u64, Vec<u8>>, written: &[u64], first: bool) {
    commit_of(log, seq, PAGES, cur, written, first);
}

/// [`commit`] of a mapping of `total` pages at [`BASE`].
fn commit_of(
    log: &mut RunLog,
    seq: u32,
    total: u64,
    cur: &BTreeMap<u64, Vec<u8>>,
    written: &[u64],
    first: bool,
) {
    let (spill, spans, unchanged) = captured(log, total, cur, written, first, usize::MAX);
    log.commit(spill, &spans, &unchanged, &meta(seq, vec![anon(BASE, total)])).unwrap();
}

/// A spare filled as a capture would fill it, its buffer held to `buffer_limit` bytes,
/// with the runs it copied and those unchanged.
fn captured(
    log: &RunLog,
    total: u64,
    cur: &BTreeMap<u64, Vec<u8>>,
    written: &[u64],
    first: bool,
    buffer_limit: usize,
) -> (SpillFile, Vec<PageSpan>, Vec<PageSpan>) {
    let copied: Vec<u64> = if first { cur.keys().copied().collect() } else { written.to_vec() };
    let mut spill = log.spares().make().unwrap();
    spill.grow(copied.len() * PAGE, buffer_limit).unwrap();
    let mut spans: Vec<PageSpan> = Vec::new();
    // A window at a time, each written through, where the buffer holds less.
    let window = spill.data().len() / PAGE;
    for (k, part) in copied.chunks(window.max(1)).enumerate() {
        for (slot, a) in part.iter().enumerate() {
            spill.data()[slot * PAGE..(slot + 1) * PAGE].copy_from_slice(&cur[a]);
        }
        if spill.past_buffer() > 0 {
            spill.write_through(part.len() * PAGE, k * window * PAGE).unwrap();
        }
    }
    for a in &copied {
        match spans.last_mut() {
            Some(s) if s.end() == a / 4096 => s.pages += 1,
            _ => spans.push(PageSpan { first: a / 4096, pages: 1 }),
        }
    }
    let mut unchanged: Vec<PageSpan> = Vec::new();
    if !first {
        for i in (0..total).filter(|i| written.binary_search(&addr(*i)).is_err()) {
            match unchanged.last_mut() {
                Some(s) if s.end() == addr(i) / 4096 => s.pages += 1,
                _ => unchanged.push(PageSpan { first: addr(i) / 4096, pages: 1 }),
            }
        }
    }
    (spill, spans, unchanged)
}

/// Each snapshot's pages, and the pages written since the one before.
type History = Vec<(BTreeMap<u64, Vec<u8>>, Vec<u64>)>;

/// Ten snapshots, each writing a few pages (some zeroed, some whole new).
fn history() -> History {
    let mut cur: BTreeMap<u64, Vec<u8>> =
        (0..PAGES).filter(|i| i % 5 != 0).map(|i| (addr(i), page(1, addr(i)))).collect();
    let mut out = vec![(cur.clone(), Vec::new())];
    for seq in 1..10u64 {
        let written: Vec<u64> = (0..PAGES).filter(|i| (i * 7 + seq) % 11 == 0).map(addr).collect();
        for &a in &written {
            if (a / 4096 + seq) % 4 == 0 {
                cur.remove(&a);
            } else {
                cur.insert(a, random_page(a ^ seq));
            }
        }
        // A zero page that was written counts as copied, and reads as zero.
        let full: BTreeMap<u64, Vec<u8>> =
            written.iter().map(|&a| (a, cur.get(&a).cloned().unwrap_or_else(|| vec![0; PAGE]))).collect();
        let mut with_zeros = cur.clone();
        with_zeros.extend(full);
        out.push((with_zeros, written));
    }
    out
}

/// Reads every snapshot of run `id` and compares it with `history`; those from
/// `first_raw` on must be raw.
fn check_reads(store: &Store, id: sdt_store::RunId, history: &History, first_raw: usize) {
    let run = store.open_run(&id).unwrap();
    let m = anon(BASE, PAGES);
    for (seq, (pages, _)) in history.iter().enumerate() {
        let snap = run.open_snapshot(&format!("S{seq}")).unwrap();
        let raw = seq >= first_raw;
        assert_eq!(snap.is_raw(), raw, "S{seq}");
        let nonzero: BTreeMap<u64, Vec<u8>> =
            pages.iter().filter(|(_, b)| b.iter().any(|&x| x != 0)).map(|(a, b)| (*a, b.clone())).collect();
        assert!(read_mapping(&snap, &m).unwrap() == expected_anon(&m, &nonzero), "S{seq} (raw: {raw})");
    }
}

fn raw_and_compacted_snapshots_read_back_the_same() {
    let tmp = tempfile::tempdir().unwrap();
    let store = Store::open_or_create(tmp.path()).unwrap();
    let mut log = store.create_run(run_info()).unwrap();
    let history = history();
    for (seq, (cur, written)) in history.iter().enumerate() {
        commit(&mut log, seq as u32, cur, written, seq == 0);
    }
    let id = log.run().id();
    check_reads(&store, id, &history, 0);
    let run = store.open_run(&id).unwrap();
    let listed: Vec<_> = run.snapshots().unwrap().map(|e| e.unwrap()).collect();
    assert_eq!(listed.len(), 10);
    assert!(listed.iter().all(|e| e.raw && e.complete));

    // A reader that opened a raw snapshot keeps reading it after compaction removed it.
    let early = run.open_snapshot("S9").unwrap();
    let mut writer = log.compactor().unwrap();
    for seq in 0..10 {
        let report = writer.compact().unwrap().unwrap_or_else(|| panic!("S{seq} was not raw"));
        assert!(report.file_bytes > 0);
    }
    assert!(writer.compact().unwrap().is_none());
    check_reads(&store, id, &history, 10);
    let m = anon(BASE, PAGES);
    assert!(
        read_mapping(&early, &m).unwrap() == read_mapping(&run.open_snapshot("S9").unwrap(), &m).unwrap()
    );
    let names: Vec<String> = std::fs::read_dir(run.dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert!(!names.iter().any(|n| n.ends_with(".raw")), "{names:?}");
    log.finish(RunStatus::Exited { code: 0 }).unwrap();
}

fn a_capture_past_its_buffer_reads_back_the_same() {
    let tmp = tempfile::tempdir().unwrap();
    let store = Store::open_or_create(tmp.path()).unwrap();
    let mut log = store.create_run(run_info()).unwrap();
    let history = history();
    for (seq, (cur, written)) in history.iter().enumerate() {
        // No buffer, a buffer of a few pages, by turns; committed by turns by this
        // process and by a writer child.
        let limit = [0, 5 * PAGE, 3 * PAGE + 100][seq % 3];
        let (spill, spans, unchanged) = captured(&log, PAGES, cur, written, seq == 0, limit);
        assert!(spill.past_buffer() > 0, "S{seq}");
        let meta = meta(seq as u32, vec![anon(BASE, PAGES)]);
        match seq % 2 {
            0 => drop(log.commit(spill, &spans, &unchanged, &meta).unwrap()),
            _ => drop(log.hand_over_commit(spill, &spans, &unchanged, &meta).unwrap().settle().unwrap()),
        }
    }
    let id = log.run().id();
    check_reads(&store, id, &history, 0);
    let mut writer = log.compactor().unwrap();
    while writer.compact().unwrap().is_some() {}
    check_reads(&store, id, &history, 10);
}

fn a_run_whose_sdt_died_keeps_its_snapshots_and_is_finished_later() {
    let tmp = tempfile::tempdir().unwrap();
    let store = Store::open_or_create(tmp.path()).unwrap();
    let mut log = store.create_run(run_info()).unwrap();
    let id = log.run().id();
    let history = history();
    let mut writer = log.compactor().unwrap();
    for (seq, (cur, written)) in history.iter().enumerate() {
        commit(&mut log, seq as u32, cur, written, seq == 0);
        // The compactor keeps up with the first three only.
        if seq < 3 {
            writer.compact().unwrap().unwrap();
        }
    }
    assert!(store.open_run(&id).unwrap().is_held());
    // Death mid-work: a spare being filled, a compaction half written, nothing recorded.
    let mut spare = log.spares().make().unwrap();
    spare.grow(8 * PAGE, usize::MAX).unwrap();
    std::mem::forget(spare);
    std::fs::write(store.root().join(format!("runs/{id}/S3.snap.incomplete")), b"SDTSNAP\0 half").unwrap();
    // And a raw file whose compaction had finished, not yet removed.
    std::fs::copy(
        store.root().join(format!("runs/{id}/S5.raw")),
        store.root().join(format!("runs/{id}/S2.raw")),
    )
    .unwrap();
    drop(writer);
    drop(log);

    let run = store.open_run(&id).unwrap();
    assert!(!run.is_held());
    assert_eq!(run.info().status, RunStatus::Running);
    let listed: Vec<_> = run.snapshots().unwrap().map(|e| e.unwrap()).collect();
    assert_eq!(
        listed.iter().map(|e| (e.seq, e.raw, e.complete)).collect::<Vec<_>>(),
        (0..10).map(|s| (s, s >= 3, true)).collect::<Vec<_>>()
    );
    check_reads(&store, id, &history, 3);

    let mut writer = store.compactor(id).unwrap();
    assert_eq!(writer.next_seq(), 3);
    assert!(matches!(store.compactor(id), Err(Error::RunHeld { .. })));
    while writer.compact().unwrap().is_some() {}
    assert!(writer.record_interrupted().unwrap());
    drop(writer);
    let run = store.open_run(&id).unwrap();
    assert!(
        matches!(&run.info().status, RunStatus::Failed { message } if message.contains("ended before the program"))
    );
    let names: Vec<String> = std::fs::read_dir(run.dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert!(
        names.iter().all(|n| !n.starts_with(".spare") && !n.ends_with(".incomplete") && !n.ends_with(".raw")),
        "{names:?}"
    );
    check_reads(&store, id, &history, 10);
}

/// The compactor hands the raw file's pages back to the page cache as it reads them (its
/// diff every 16 MiB, its patches and blocks every batch): a snapshot of more than that
/// is compacted to the same bytes.
fn a_raw_snapshot_larger_than_the_compactors_window_compacts_to_the_same_bytes() {
    const TOTAL: u64 = 4096 + 700;
    let tmp = tempfile::tempdir().unwrap();
    let store = Store::open_or_create(tmp.path()).unwrap();
    let mut log = store.create_run(run_info()).unwrap();
    let mut cur: BTreeMap<u64, Vec<u8>> = (0..TOTAL).map(|i| (addr(i), page(1, addr(i)))).collect();
    let mut history = vec![cur.clone()];
    commit_of(&mut log, 0, TOTAL, &cur, &[], true);
    // Every third page rewritten whole, every fifth a few bytes changed (a patch).
    let written: Vec<u64> = (0..TOTAL).filter(|i| i % 3 == 0 || i % 5 == 0).map(addr).collect();
    for &a in &written {
        let page = cur.get_mut(&a).unwrap();
        if (a / 4096) % 3 == 0 {
            *page = random_page(a);
        } else {
            page[100..108].copy_from_slice(&a.to_le_bytes());
        }
    }
    history.push(cur.clone());
    commit_of(&mut log, 1, TOTAL, &cur, &written, false);

    let id = log.run().id();
    let mut writer = log.compactor().unwrap();
    while writer.compact().unwrap().is_some() {}
    let run = store.open_run(&id).unwrap();
    let m = anon(BASE, TOTAL);
    for (seq, pages) in history.iter().enumerate() {
        let snap = run.open_snapshot(&format!("S{seq}")).unwrap();
        assert!(!snap.is_raw(), "S{seq}");
        assert!(read_mapping(&snap, &m).unwrap() == expected_anon(&m, pages), "S{seq}");
    }
    log.finish(RunStatus::Exited { code: 0 }).unwrap();
}

fn damaged_raw_files_are_named() {
    let tmp = tempfile::tempdir().unwrap();
    let store = Store::open_or_create(tmp.path()).unwrap();
    let mut log = store.create_run(run_info()).unwrap();
    let history = history();
    for (seq, (cur, written)) in history.iter().take(3).enumerate() {
        commit(&mut log, seq as u32, cur, written, seq == 0);
    }
    let run = store.open_run(&log.run().id()).unwrap();
    let path = |seq: u32| run.dir().join(format!("S{seq}.raw"));
    // S2's record cut short: S2 is corrupt.
    let len = std::fs::metadata(path(2)).unwrap().len();
    std::fs::OpenOptions::new().write(true).open(path(2)).unwrap().set_len(len - 10).unwrap();
    let e = run.open_snapshot("S2").unwrap_err();
    assert!(
        matches!(&e, Error::Corrupt { snapshot, detail } if snapshot == "S2" && detail.starts_with("truncated")),
        "{e:?}"
    );
    // S1 gone: S2 cannot be resolved, and the error names S1.
    std::fs::remove_file(path(1)).unwrap();
    commit(&mut log, 3, &history[3].0, &history[3].1, false);
    let e = run.open_snapshot("S3").unwrap_err();
    assert!(matches!(&e, Error::Corrupt { snapshot, .. } if snapshot == "S2"), "{e:?}");
    // A raw file never committed (a spare renamed by hand) is not a snapshot.
    let mut spare = log.spares().make().unwrap();
    spare.grow(PAGE, usize::MAX).unwrap();
    spare.data()[0] = 1;
    let spare_name = std::fs::read_dir(run.dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .find(|n| n.starts_with(".spare"))
        .unwrap();
    std::fs::copy(run.dir().join(&spare_name), path(7)).unwrap();
    let e = run.open_snapshot_seq(7).unwrap_err();
    assert!(e.to_string().contains("never committed"), "{e}");
}

fn spares_share_one_buffer_whose_old_bytes_never_reach_a_later_snapshot() {
    let tmp = tempfile::tempdir().unwrap();
    let store = Store::open_or_create(tmp.path()).unwrap();
    let mut log = store.create_run(run_info()).unwrap();
    let spares = log.spares();
    // S0 fills the buffer with 8 pages of ones.
    let mut first = spares.make().unwrap();
    first.grow(8 * PAGE, usize::MAX).unwrap();
    assert_eq!(first.faulted(), 0);
    assert!(!first.fault_in(3 * PAGE) && first.faulted() == 3 * PAGE);
    assert!(first.fault_in(usize::MAX / 2) && first.faulted() == 8 * PAGE);
    first.data().fill(1);
    let buffer = first.data().as_ptr();
    let spans = [PageSpan { first: BASE / 4096, pages: 8 }];
    let m = anon(BASE, 8);
    log.commit(first, &spans, &[], &meta(0, vec![m.clone()])).unwrap();

    // S1, from the same buffer, copies 2 pages: the 6 left over are not in its file, and
    // the rest of the mapping is S0's.
    let mut second = spares.make().unwrap();
    assert_eq!(second.capacity(), 0, "a new spare has no room on disk yet");
    second.grow(2 * PAGE, usize::MAX).unwrap();
    assert_eq!(second.data().as_ptr(), buffer, "the buffer is the same memory");
    assert_eq!(second.faulted(), 2 * PAGE, "and still faulted in");
    second.data().fill(2);
    let spans = [PageSpan { first: BASE / 4096 + 1, pages: 2 }];
    let unchanged =
        [PageSpan { first: BASE / 4096, pages: 1 }, PageSpan { first: BASE / 4096 + 3, pages: 5 }];
    let committed = log.commit(second, &spans, &unchanged, &meta(1, vec![m.clone()])).unwrap();
    let run = store.open_run(&log.run().id()).unwrap();
    let raw_len = std::fs::metadata(run.dir().join("S1.raw")).unwrap().len();
    assert_eq!(raw_len, committed.file_bytes);
    assert!(raw_len < 4096 + 3 * PAGE as u64, "S1.raw holds 2 pages and its record: {raw_len} bytes");
    let mut expected = vec![1u8; 8 * PAGE];
    expected[PAGE..3 * PAGE].fill(2);
    assert!(read_mapping(&run.open_snapshot("S1").unwrap(), &m).unwrap() == expected);
    assert!(read_mapping(&run.open_snapshot("S0").unwrap(), &m).unwrap() == vec![1u8; 8 * PAGE]);

    // A spare dropped uncommitted leaves no file, and gives the buffer back.
    let mut dropped = spares.make().unwrap();
    dropped.grow(PAGE, usize::MAX).unwrap();
    drop(dropped);
    let names: Vec<String> = std::fs::read_dir(run.dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert!(!names.iter().any(|n| n.starts_with(".spare-")), "{names:?}");
    let mut again = spares.make().unwrap();
    again.grow(PAGE, usize::MAX).unwrap();
    assert_eq!(again.data().as_ptr(), buffer);
}

/// Files of the store under `root` that this process has open.
fn open_files_under(root: &std::path::Path) -> usize {
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter(|target| target.starts_with(root))
        .count()
}

/// A run of 1,200 raw snapshots (an `sdt` killed before compaction, or compaction behind),
/// each writing another page: the last one reads back with a few of its files open, not
/// one per snapshot that holds its pages (a process may hold 1,024), and still after
/// compaction replaced most of them while it was open.
fn a_long_chain_of_raw_snapshots_reads_with_few_files_open() {
    const SNAPSHOTS: u64 = 1200;
    const TOTAL: u64 = 1500;
    let tmp = tempfile::tempdir().unwrap();
    let store = Store::open_or_create(tmp.path()).unwrap();
    let mut log = store.create_run(run_info()).unwrap();
    let id = log.run().id();
    let mut cur: BTreeMap<u64, Vec<u8>> = (0..TOTAL).map(|i| (addr(i), page(1, addr(i)))).collect();
    commit_of(&mut log, 0, TOTAL, &cur, &[], true);
    for seq in 1..SNAPSHOTS {
        let a = addr(seq);
        cur.insert(a, random_page(seq));
        commit_of(&mut log, seq as u32, TOTAL, &cur, &[a], false);
    }
    let m = anon(BASE, TOTAL);
    let expected = expected_anon(&m, &cur);
    let root = tmp.path().canonicalize().unwrap();
    let run = store.open_run(&id).unwrap();
    let last = run.open_snapshot(&format!("S{}", SNAPSHOTS - 1)).unwrap();
    assert!(last.is_raw());
    assert!(read_mapping(&last, &m).unwrap() == expected);
    let open = open_files_under(&root);
    assert!(open <= 80, "{open} files of the store open");

    let mut writer = log.compactor().unwrap();
    for _ in 0..SNAPSHOTS - 100 {
        writer.compact().unwrap().unwrap();
    }
    assert!(read_mapping(&last, &m).unwrap() == expected, "read through the compacted files");
    // Opened afresh, one after another, each resolves from the one before.
    let run = store.open_run(&id).unwrap();
    for seq in SNAPSHOTS - 100..SNAPSHOTS {
        let snap = run.open_snapshot(&format!("S{seq}")).unwrap();
        let mut bytes = vec![0; PAGE];
        snap.read(addr(seq), &mut bytes).unwrap();
        assert!(bytes == random_page(seq), "S{seq}");
    }
}

sdt_test_harness::tests![
    a_long_chain_of_raw_snapshots_reads_with_few_files_open,
    raw_and_compacted_snapshots_read_back_the_same,
    a_capture_past_its_buffer_reads_back_the_same,
    a_raw_snapshot_larger_than_the_compactors_window_compacts_to_the_same_bytes,
    a_run_whose_sdt_died_keeps_its_snapshots_and_is_finished_later,
    damaged_raw_files_are_named,
    spares_share_one_buffer_whose_old_bytes_never_reach_a_later_snapshot,
];
