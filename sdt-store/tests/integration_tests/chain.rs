//! A long run with few changes per snapshot: files stay small, and reading a snapshot
//! opens only the files its index names.

use std::collections::BTreeMap;

use sdt_store::{Error, Store};

use crate::common::*;

const BASE: u64 = 0x5555_0000_0000;
const PAGES: u64 = 64;
const SNAPSHOTS: u32 = 200;

fn addr(i: u64) -> u64 {
    BASE + i * 4096
}

fn two_hundred_snapshots() {
    let tmp = tempfile::tempdir().unwrap();
    let store = Store::open_or_create(tmp.path()).unwrap();
    let (_log, mut writer) = create_run(&store);
    let maps = vec![anon(BASE, PAGES)];
    // S0 stores every page; snapshot k >= 1 changes page k % 64 only.
    let mut cur: BTreeMap<u64, Vec<u8>> = (0..PAGES).map(|i| (addr(i), page(200, addr(i)))).collect();
    let mut history = Vec::new();
    for seq in 0..SNAPSHOTS {
        let mut unchanged = Vec::new();
        if seq > 0 {
            unchanged = cur.keys().copied().collect();
            let a = addr(u64::from(seq) % PAGES);
            cur.insert(a, page(seq as u8, a));
            unchanged.retain(|&u| u != a);
        }
        let r = writer.write_snapshot(meta(seq, maps.clone()), sources(&cur, &unchanged)).unwrap();
        if seq > 0 {
            assert_eq!((r.pages, r.pages_stored), (PAGES, 1));
            // Header, one small block, an index of a few runs, metadata, footer.
            assert!(r.file_bytes < 1500, "S{seq}: {} bytes", r.file_bytes);
        }
        history.push(cur.clone());
    }

    let run = store.open_run(&writer.id()).unwrap();
    let last = SNAPSHOTS - 1;
    // The last snapshot's pages live in S136..=S199 and S140's in S77..=S140.
    for gone in [0, 10, 50, 100] {
        std::fs::remove_file(run.dir().join(format!("S{gone}.snap"))).unwrap();
    }
    let snap = run.open_snapshot(&format!("S{last}")).unwrap();
    assert!(read_mapping(&snap, &maps[0]).unwrap() == expected_anon(&maps[0], &history[last as usize]));

    // S140 keeps page 36 in S100, which is gone: that read names S100; the others work.
    let snap = run.open_snapshot("S140").unwrap();
    let mut buf = vec![0; PAGE];
    let e = snap.read(addr(36), &mut buf).unwrap_err();
    assert!(matches!(&e, Error::Corrupt { snapshot, .. } if snapshot == "S100"), "{e:?}");
    assert!(e.to_string().contains("S100.snap is missing (S140 keeps pages there)"), "{e}");
    for i in (0..PAGES).filter(|&i| i != 36) {
        snap.read(addr(i), &mut buf).unwrap();
        assert!(buf == history[140][&addr(i)]);
    }
    let e = run.open_snapshot("S0").unwrap_err();
    assert!(matches!(e, Error::NoSuchSnapshot { .. }), "{e:?}");
}

sdt_test_harness::tests![two_hundred_snapshots];
