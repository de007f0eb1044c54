//! Every truncation and every single-byte change of every file of a small store: never a
//! panic, the damaged snapshot is named, earlier snapshots read exactly, later ones read
//! exactly unless they need what was damaged, in which case they name it too.

use std::collections::BTreeMap;
use std::path::Path;

use sdt_store::{Content, Mapping, Run, SnapshotMeta, Store};

use crate::common::*;

const BASE: u64 = 0x1000;

/// Snapshot `seq`'s one readable mapping.
fn read_snapshot(run: &Run, seq: u32, m: &Mapping) -> sdt_store::Result<Vec<u8>> {
    let snap = run.open_snapshot_seq(seq)?;
    let mut bytes = vec![0; m.len() as usize];
    snap.read(m.start, &mut bytes)?;
    Ok(bytes)
}

/// Replaces `path` by a new file holding `bytes` (never changing a file in place, which
/// the store's maps do not allow). Removing first rather than renaming over it spares
/// ext4's flush on replace (`auto_da_alloc`), which would make this test slow.
fn replace(path: &Path, bytes: &[u8]) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, bytes).unwrap();
    std::fs::remove_file(path).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// Three snapshots of four pages: S1 takes pages from S0, S2 from S0 and S1.
fn small_store(root: &Path) -> (Run, Mapping, Vec<Vec<u8>>) {
    let store = Store::open_or_create(root).unwrap();
    let mut writer = store.create_run(run_info()).unwrap();
    let maps = vec![anon(BASE, 4), with_content(BASE + 4 * 4096, 1, Content::Unreadable)];
    let a = |i: u64| BASE + i * 4096;
    let mut cur = BTreeMap::new();
    let mut expected = Vec::new();
    let steps: [&[(u64, u8)]; 3] = [&[(0, 1), (1, 1), (2, 1)], &[(1, 2), (3, 2)], &[(0, 3)]];
    for (seq, changes) in steps.iter().enumerate() {
        let mut unchanged: Vec<u64> = cur.keys().copied().collect();
        for &(i, tag) in *changes {
            cur.insert(a(i), page(tag, a(i)));
            unchanged.retain(|&u| u != a(i));
        }
        // A lean metadata keeps the files, and so the number of cases, small.
        let meta = SnapshotMeta { threads: Vec::new(), ..meta(seq as u32, maps.clone()) };
        writer.write_snapshot(meta, sources(&cur, &unchanged)).unwrap();
        expected.push(expected_anon(&maps[0], &cur));
    }
    let run = store.open_run(&writer.id()).unwrap();
    (run, maps[0].clone(), expected)
}

/// Checks the store with file `damaged` changed. `later_fine`: whether later snapshots
/// must still read (the damage is in metadata they do not use).
fn check(run: &Run, m: &Mapping, expected: &[Vec<u8>], damaged: u32, later_fine: bool, what: &str) {
    let name = format!("snapshot S{damaged} ");
    for seq in 0..expected.len() as u32 {
        let got = read_snapshot(run, seq, m);
        if seq < damaged || (seq > damaged && later_fine) {
            match got {
                Ok(bytes) => assert!(bytes == expected[seq as usize], "{what}: S{seq} reads wrong bytes"),
                Err(e) => panic!("{what}: S{seq}: {e}"),
            }
        } else {
            match got {
                Ok(_) => panic!("{what}: S{seq} reads without an error"),
                Err(e) => assert!(e.to_string().contains(&name), "{what}: S{seq}: {e}"),
            }
        }
    }
}

#[test]
fn every_truncation_and_every_flipped_byte() {
    let tmp = tempfile::tempdir().unwrap();
    let (run, m, expected) = small_store(tmp.path());
    check(&run, &m, &expected, u32::MAX, true, "undamaged");
    for seq in 0..3u32 {
        let path = run.dir().join(format!("S{seq}.snap"));
        let original = std::fs::read(&path).unwrap();
        let len = original.len();
        // The metadata frame lies between meta_offset (footer bytes 40..48) and the footer.
        let meta_offset = u64::from_le_bytes(original[len - 24..len - 16].try_into().unwrap()) as usize;
        for cut in 0..len {
            replace(&path, &original[..cut]);
            check(&run, &m, &expected, seq, false, &format!("S{seq} cut at {cut}"));
        }
        for at in 0..len {
            let mut bytes = original.clone();
            bytes[at] ^= 0xff;
            replace(&path, &bytes);
            let in_meta = (meta_offset..len - 64).contains(&at);
            check(&run, &m, &expected, seq, in_meta, &format!("S{seq} byte {at} flipped"));
        }
        replace(&path, &original);
    }
    check(&run, &m, &expected, u32::MAX, true, "restored");
}

#[test]
fn incomplete_files_are_ignored() {
    let tmp = tempfile::tempdir().unwrap();
    let (run, m, expected) = small_store(tmp.path());
    // A writer died writing S3, and a stray file sits beside it.
    std::fs::write(run.dir().join("S3.snap.incomplete"), b"SDTSNAP\0 half a header").unwrap();
    std::fs::write(run.dir().join("notes.txt"), b"hello").unwrap();
    let entries = run.snapshots().unwrap();
    let listed: Vec<(&str, bool)> = entries.iter().map(|e| (e.name.as_str(), e.complete)).collect();
    assert_eq!(listed, [("S0", true), ("S1", true), ("S2", true), ("S3", false)]);
    let e = run.open_snapshot("S3").unwrap_err();
    assert_eq!(e.to_string(), "snapshot S3 is incomplete: its capture did not finish");
    let e = run.open_snapshot("S4").unwrap_err();
    assert_eq!(e.to_string(), "no snapshot S4 in run 1 (snapshots: S0, S1, S2)");
    check(&run, &m, &expected, u32::MAX, true, "with S3.snap.incomplete");
}
