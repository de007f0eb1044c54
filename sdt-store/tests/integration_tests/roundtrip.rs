//! Write runs, read every snapshot back byte-exact.

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use sdt_store::{Content, Error, FileRef, Mapping, PageSource, RunStatus, Store};

use crate::common::*;

type Pages = BTreeMap<u64, Vec<u8>>;

const HEAP: u64 = 0x10000;
const HEAP2: u64 = 0x20000; // right after the 16-page heap
const LIB: u64 = 0x40000;
const GUARD: u64 = 0x44000; // right after the 4-page library mapping
const STACK: u64 = 0x7ff0_0000;

fn file_ref(path: &Path) -> FileRef {
    let st = std::fs::metadata(path).unwrap();
    FileRef {
        path: path.to_str().unwrap().into(),
        dev: st.dev(),
        inode: st.ino(),
        size: st.size(),
        mtime_ns: st.mtime() * 1_000_000_000 + st.mtime_nsec(),
    }
}

/// What a file-backed mapping reads as: stored pages, else the file's bytes from
/// `m.offset`, zero past its end.
fn expected_file(m: &Mapping, pages: &BTreeMap<u64, Vec<u8>>, file: &[u8]) -> Vec<u8> {
    let mut out = vec![0; m.len() as usize];
    let from = (m.offset as usize).min(file.len());
    let n = (file.len() - from).min(out.len());
    out[..n].copy_from_slice(&file[from..from + n]);
    for (&addr, bytes) in pages.range(m.start..m.end) {
        let at = (addr - m.start) as usize;
        out[at..at + PAGE].copy_from_slice(bytes);
    }
    out
}

fn h(i: u64) -> u64 {
    HEAP + i * 4096
}

fn changes_appear_disappear_and_file_mappings() {
    let tmp = tempfile::tempdir().unwrap();
    let lib_path = tmp.path().join("lib.so");
    let lib_bytes: Vec<u8> = (0..PAGE * 5 / 2).map(|i| (i * 31 % 251) as u8).collect();
    std::fs::write(&lib_path, &lib_bytes).unwrap();
    let mut lib = with_content(LIB, 4, Content::File(file_ref(&lib_path)));
    lib.offset = 4096;
    let mappings = vec![
        anon(HEAP, 16),
        anon(HEAP2, 2),
        lib,
        with_content(GUARD, 1, Content::Unreadable),
        anon(STACK, 4),
    ];

    let store = Store::open_or_create(&tmp.path().join(".sdt")).unwrap();
    let (log, mut writer) = create_run(&store);
    // Per snapshot: its mappings and the pages given for it.
    let mut states: Vec<(Vec<Mapping>, Pages)> = Vec::new();
    let mut reports = Vec::new();
    let mut write =
        |seq: u32, maps: &[Mapping], cur: &BTreeMap<u64, Vec<u8>>, unchanged: &[u64], stored: u64| {
            let report = writer.write_snapshot(meta(seq, maps.to_vec()), sources(cur, unchanged)).unwrap();
            let pages = cur.values().filter(|p| p.iter().any(|&b| b != 0)).count() as u64;
            assert_eq!(
                (report.pages, report.pages_stored, report.full_bytes),
                (pages, stored, pages * 4096),
                "S{seq}"
            );
            states.push((maps.to_vec(), cur.clone()));
            reports.push(report);
        };

    // S0: heap pages 0..8 (3 is zero), the second heap, two stack pages.
    let mut cur = BTreeMap::new();
    for i in 0..8 {
        cur.insert(h(i), if i == 3 { vec![0; PAGE] } else { page(1, h(i)) });
    }
    cur.insert(HEAP2, page(4, HEAP2));
    cur.insert(STACK, page(5, STACK));
    cur.insert(STACK + 4096, page(5, STACK + 4096));
    write(0, &mappings, &cur, &[], 10);

    // S1: heap 1 changes, heap 2 becomes zero, heap 5 disappears, heap 10 appears,
    // library page 1 is written (copy-on-write), the stack is known unchanged, heap 4 is
    // passed again with the same bytes.
    cur.insert(h(1), page(2, h(1)));
    cur.insert(h(2), vec![0; PAGE]);
    cur.remove(&h(5));
    cur.insert(h(10), page(1, h(10)));
    cur.insert(LIB + 4096, page(9, LIB + 4096));
    write(1, &mappings, &cur, &[h(0), STACK, STACK + 4096], 3);

    // S2: heap 1 goes back to its S0 bytes (stored again: it differs from S1), heap 2
    // gets content, the library page is dropped (the file provides it again).
    cur.insert(h(1), page(1, h(1)));
    cur.insert(h(2), page(3, h(2)));
    cur.remove(&(LIB + 4096));
    let rest: Vec<u64> = cur.keys().copied().filter(|&a| a != h(1) && a != h(2)).collect();
    write(2, &mappings, &cur, &rest, 2);

    // S3: the stack is unmapped; nothing else changes.
    let maps3: Vec<Mapping> = mappings.iter().filter(|m| m.start != STACK).cloned().collect();
    cur.retain(|&a, _| a < STACK);
    let all: Vec<u64> = cur.keys().copied().collect();
    write(3, &maps3, &cur, &all, 0);
    log.finish(RunStatus::Exited { code: 0 }).unwrap();

    let store = Store::open(&tmp.path().join(".sdt")).unwrap();
    let run = store.open_run(&store.latest_run().unwrap()).unwrap();
    assert_eq!(run.info().status, RunStatus::Exited { code: 0 });
    let entries = run.snapshots().unwrap().collect::<Result<Vec<_>, _>>().unwrap();
    assert_eq!(entries.iter().map(|e| e.name.as_str()).collect::<Vec<_>>(), ["S0", "S1", "S2", "S3"]);
    for (seq, (maps, pages)) in states.iter().enumerate() {
        let snap = run.open_snapshot(&format!("S{seq}")).unwrap();
        assert_eq!(snap.name(), format!("S{seq}"));
        assert_eq!(snap.file_bytes(), reports[seq].file_bytes);
        assert_eq!(entries[seq].file_bytes, reports[seq].file_bytes);
        let m = snap.meta();
        assert_eq!((m.seq, &m.mappings, m.auxv.as_slice()), (seq as u32, maps, &[1u8, 2, 3][..]));
        assert_eq!(m.stats.pages_stored, reports[seq].pages_stored);
        assert_eq!(m.stats.pages, reports[seq].pages);
        assert_eq!(m.stats.full_bytes, reports[seq].full_bytes);
        let stored: Vec<u64> =
            pages.iter().filter(|(_, p)| p.iter().any(|&b| b != 0)).map(|(&a, _)| a).collect();
        assert_eq!(stored_pages(&snap), stored, "S{seq}");
        for m in maps {
            let got = read_mapping(&snap, m);
            match &m.content {
                Content::Zero => assert!(got.unwrap() == expected_anon(m, pages), "S{seq} {:#x}", m.start),
                Content::File(_) => {
                    assert!(got.unwrap() == expected_file(m, pages, &lib_bytes), "S{seq} {:#x}", m.start)
                }
                Content::Unreadable => {
                    assert!(matches!(got, Err(Error::Unreadable { addr: GUARD, .. })), "{got:?}")
                }
            }
        }
        // A read across two adjacent mappings.
        let mut across = vec![0; 8192];
        snap.read(HEAP2 - 4096, &mut across).unwrap();
        assert!(across[..4096] == expected_anon(&mappings[0], pages)[15 * 4096..]);
        assert!(across[4096..] == expected_anon(&mappings[1], pages)[..4096]);
        // Into the guard, past the end, into a gap.
        let mut buf = [0; 32];
        assert!(matches!(snap.read(GUARD - 16, &mut buf), Err(Error::Unreadable { addr: GUARD, .. })));
        assert!(matches!(
            snap.read(HEAP2 + 2 * 4096 - 16, &mut buf),
            Err(Error::Unmapped { addr: 0x22000, .. })
        ));
        let e = snap.read(0x30000, &mut buf).unwrap_err();
        assert_eq!(e.to_string(), format!("address 0x30000 is not mapped in snapshot S{seq}"));
        assert!(snap.read(u64::MAX - 4, &mut buf).is_err());
        snap.read(0x30000, &mut []).unwrap();
    }

    // The library changes on disk: reading a page the file provides fails, naming it;
    // a page the snapshot stored still reads.
    std::fs::write(&lib_path, b"rebuilt").unwrap();
    let s1 = run.open_snapshot("S1").unwrap();
    let mut buf = vec![0; 4096];
    s1.read(LIB + 4096, &mut buf).unwrap();
    assert!(buf == page(9, LIB + 4096));
    let e = s1.read(LIB, &mut buf).unwrap_err();
    assert!(matches!(e, Error::FileChanged { .. }), "{e:?}");
    let msg = e.to_string();
    assert!(msg.contains(lib_path.to_str().unwrap()) && msg.contains("size 7, expected 10240"), "{msg}");
    std::fs::remove_file(&lib_path).unwrap();
    let e = run.open_snapshot("S0").unwrap().read(LIB, &mut buf).unwrap_err();
    assert!(e.to_string().contains("no longer exists"), "{e}");
}

/// Enough pages for several blocks and compression threads.
fn many_blocks() {
    let tmp = tempfile::tempdir().unwrap();
    let store = Store::open_or_create(tmp.path()).unwrap();
    let (_log, mut writer) = create_run(&store);
    let n = 1000u64;
    let maps = vec![anon(HEAP, n)];
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut noise = |tag: u8, addr: u64| {
        let mut p = page(tag, addr);
        for b in &mut p[200..1200] {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            *b = x as u8;
        }
        p
    };
    let mut s0 = BTreeMap::new();
    for i in 0..n {
        s0.insert(h(i), noise(1, h(i)));
    }
    let r0 = writer.write_snapshot(meta(0, maps.clone()), sources(&s0, &[])).unwrap();
    assert_eq!(r0.pages_stored, n);
    let mut s1 = s0.clone();
    for i in (0..n).step_by(3) {
        s1.insert(h(i), noise(2, h(i)));
    }
    let unchanged: Vec<u64> = (0..n).filter(|i| i % 3 != 0).map(h).collect();
    let r1 = writer.write_snapshot(meta(1, maps.clone()), sources(&s1, &unchanged)).unwrap();
    assert_eq!(r1.pages_stored, n.div_ceil(3));
    assert!(r1.file_bytes < r0.file_bytes / 2, "{r1:?} {r0:?}");

    let run = store.open_run(&writer.id()).unwrap();
    for (seq, pages) in [s0, s1].iter().enumerate() {
        let snap = run.open_snapshot_seq(seq as u32).unwrap();
        assert!(read_mapping(&snap, &maps[0]).unwrap() == expected_anon(&maps[0], pages));
        // Backwards, page by page: every lookup misses the block cache at times.
        let mut buf = vec![0; PAGE];
        for i in (0..n).rev() {
            snap.read(h(i), &mut buf).unwrap();
            assert!(buf == pages[&h(i)]);
        }
    }
}

fn run_ids_are_distinct_under_concurrency() {
    let tmp = tempfile::tempdir().unwrap();
    let store = Store::open_or_create(tmp.path()).unwrap();
    let mut ids: Vec<u32> = std::thread::scope(|s| {
        let handles: Vec<_> =
            (0..8).map(|_| s.spawn(|| store.create_run(run_info()).unwrap().run().id().0)).collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    ids.sort();
    assert_eq!(ids, (1..=8).collect::<Vec<_>>());
    assert_eq!(store.run_ids().unwrap().len(), 8);
    assert_eq!(store.latest_run().unwrap().0, 8);
    // Whichever run pointed it last, it names the newest.
    let link = std::fs::read_link(tmp.path().join("latest")).unwrap();
    assert_eq!(link, std::path::Path::new("runs/8"));
    let run = store.open_run(&sdt_store::RunId(3)).unwrap();
    assert_eq!(run.id().0, 3);
    assert_eq!(run.info().command, run_info().command);
    assert_eq!(run.info().status, RunStatus::Running);
    assert!(run.snapshots().unwrap().is_empty());
}

fn finish_records_status() {
    let tmp = tempfile::tempdir().unwrap();
    let store = Store::open_or_create(tmp.path()).unwrap();
    let w1 = store.create_run(run_info()).unwrap();
    let w2 = store.create_run(run_info()).unwrap();
    assert_eq!(std::fs::read_link(tmp.path().join("latest")).unwrap(), Path::new("runs/2"));
    w1.finish(RunStatus::Signaled { signal: 11 }).unwrap();
    w2.finish(RunStatus::Failed { message: "target vanished".into() }).unwrap();
    let r1 = store.open_run(&sdt_store::RunId(1)).unwrap();
    assert_eq!(r1.info().status, RunStatus::Signaled { signal: 11 });
    let r2 = store.open_run(&store.latest_run().unwrap()).unwrap();
    assert_eq!(r2.info().status, RunStatus::Failed { message: "target vanished".into() });
}

/// A write that fails at its last step (the rename) leaves the run as it was: the next
/// attempt at the same seq diffs against the last complete snapshot.
fn failed_write_changes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let store = Store::open_or_create(tmp.path()).unwrap();
    let (_log, mut writer) = create_run(&store);
    let maps = vec![anon(HEAP, 4)];
    let s0: BTreeMap<u64, Vec<u8>> = (0..4).map(|i| (h(i), page(1, h(i)))).collect();
    writer.write_snapshot(meta(0, maps.clone()), sources(&s0, &[])).unwrap();
    let run_dir = store.root().join("runs/1");
    std::fs::create_dir(run_dir.join("S1.snap")).unwrap();
    let mut s1 = s0.clone();
    s1.insert(h(2), page(2, h(2)));
    let e = writer.write_snapshot(meta(1, maps.clone()), sources(&s1, &[])).unwrap_err();
    assert!(matches!(e, Error::Io { .. }), "{e:?}");
    assert!(run_dir.join("S1.snap.incomplete").exists());
    std::fs::remove_dir(run_dir.join("S1.snap")).unwrap();
    let run = store.open_run(&writer.id()).unwrap();
    let e = run.open_snapshot("S1").unwrap_err();
    assert!(matches!(e, Error::Incomplete { .. }), "{e:?}");

    let mut s1 = s0.clone();
    s1.insert(h(3), page(3, h(3)));
    let r = writer
        .write_snapshot(meta(1, maps.clone()), s1.iter().map(|(&a, p)| (a, PageSource::Data(p))))
        .unwrap();
    assert_eq!(r.pages_stored, 1);
    assert!(!run_dir.join("S1.snap.incomplete").exists());
    let snap = run.open_snapshot("S1").unwrap();
    assert!(read_mapping(&snap, &maps[0]).unwrap() == expected_anon(&maps[0], &s1));
}

/// A run that an earlier build wrote in format version 1 (no patches) reads the same.
fn version_1_run_reads() {
    let store = Store::open(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/v1")).unwrap();
    let run = store.open_run(&store.latest_run().unwrap()).unwrap();
    let m = anon(0x10000, 4);
    let a = |i: u64| 0x10000 + i * 4096;
    let mut cur = BTreeMap::new();
    let steps: [&[(u64, u8)]; 3] = [&[(0, 1), (1, 1), (2, 1)], &[(1, 2), (3, 2)], &[(0, 3)]];
    for (seq, changes) in steps.iter().enumerate() {
        for &(i, tag) in *changes {
            cur.insert(a(i), page(tag, a(i)));
        }
        let path = run.dir().join(format!("S{seq}.snap"));
        assert_eq!(std::fs::read(&path).unwrap()[8], 1, "{path:?} is a version-1 file");
        let snap = run.open_snapshot_seq(seq as u32).unwrap();
        assert!(read_mapping(&snap, &m).unwrap() == expected_anon(&m, &cur), "S{seq}");
        assert_eq!(stored_pages(&snap), cur.keys().copied().collect::<Vec<_>>(), "S{seq}");
        assert_eq!(snap.meta().stats.pages_stored, changes.len() as u64, "S{seq}");
    }
}

sdt_test_harness::tests![
    changes_appear_disappear_and_file_mappings,
    many_blocks,
    run_ids_are_distinct_under_concurrency,
    finish_records_status,
    failed_write_changes_nothing,
    version_1_run_reads,
];
