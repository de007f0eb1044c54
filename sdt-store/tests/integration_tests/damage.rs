//! Every truncation and every single-byte change of every file of a small store that
//! holds patches: never a panic, the damaged snapshot is named, snapshots that do not
//! need it read exactly, the others name it too (also when they reach it as a base).

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

/// A store's snapshots: what each reads as, and the files each needs (itself included).
struct Expected {
    bytes: Vec<Vec<u8>>,
    needs: Vec<Vec<u32>>,
}

/// Four snapshots of four pages. S1 patches page 1 (on S0) and adds page 3; S2 patches
/// page 0 (on S0) and page 1 again (on S1's patch); S3 rewrites every page whole and needs
/// no other file.
fn small_store(root: &Path) -> (Run, Mapping, Expected) {
    let store = Store::open_or_create(root).unwrap();
    let (_log, mut writer) = create_run(&store);
    let maps = vec![anon(BASE, 4), with_content(BASE + 4 * 4096, 1, Content::Unreadable)];
    let a = |i: u64| BASE + i * 4096;
    let mut cur: BTreeMap<u64, Vec<u8>> = BTreeMap::new();
    let mut bytes = Vec::new();
    // Per snapshot: (page, new tag or 0 for a small change of its bytes).
    let steps: [&[(u64, u8)]; 4] =
        [&[(0, 1), (1, 1), (2, 1)], &[(1, 0), (3, 2)], &[(0, 0), (1, 0)], &[(0, 4), (1, 4), (2, 4), (3, 4)]];
    let patched = [0, 1, 2, 0];
    for (seq, changes) in steps.iter().enumerate() {
        let mut unchanged: Vec<u64> = cur.keys().copied().collect();
        for &(i, tag) in *changes {
            let new = match tag {
                0 => tweak(&cur[&a(i)], seq as u64),
                _ => page(tag, a(i)),
            };
            cur.insert(a(i), new);
            unchanged.retain(|&u| u != a(i));
        }
        // A lean metadata keeps the files, and so the number of cases, small.
        let meta = SnapshotMeta { threads: Vec::new(), ..meta(seq as u32, maps.clone()) };
        let r = writer.write_snapshot(meta, sources(&cur, &unchanged)).unwrap();
        assert_eq!(r.pages_patched, patched[seq], "S{seq}");
        bytes.push(expected_anon(&maps[0], &cur));
    }
    let run = store.open_run(&writer.id()).unwrap();
    let needs = vec![vec![0], vec![0, 1], vec![0, 1, 2], vec![3]];
    (run, maps[0].clone(), Expected { bytes, needs })
}

/// Checks the store with file `damaged` changed. `meta_only`: the damage is in its
/// metadata, which other snapshots do not use.
fn check(run: &Run, m: &Mapping, expected: &Expected, damaged: u32, meta_only: bool, what: &str) {
    let name = format!("snapshot S{damaged} ");
    for (seq, needs) in expected.needs.iter().enumerate() {
        let seq = seq as u32;
        let got = read_snapshot(run, seq, m);
        if !needs.contains(&damaged) || (seq != damaged && meta_only) {
            match got {
                Ok(bytes) => {
                    assert!(bytes == expected.bytes[seq as usize], "{what}: S{seq} reads wrong bytes")
                }
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

fn every_truncation_and_every_flipped_byte() {
    let tmp = tempfile::tempdir().unwrap();
    let (run, m, expected) = small_store(tmp.path());
    check(&run, &m, &expected, u32::MAX, true, "undamaged");
    for seq in 0..4u32 {
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

fn incomplete_files_are_ignored() {
    let tmp = tempfile::tempdir().unwrap();
    let (run, m, expected) = small_store(tmp.path());
    // A writer died writing S4, and a stray file sits beside it.
    std::fs::write(run.dir().join("S4.snap.incomplete"), b"SDTSNAP\0 half a header").unwrap();
    std::fs::write(run.dir().join("notes.txt"), b"hello").unwrap();
    let entries = run.snapshots().unwrap().collect::<Result<Vec<_>, _>>().unwrap();
    let listed: Vec<(&str, bool)> = entries.iter().map(|e| (e.name.as_str(), e.complete)).collect();
    assert_eq!(listed, [("S0", true), ("S1", true), ("S2", true), ("S3", true), ("S4", false)]);
    let e = run.open_snapshot("S4").unwrap_err();
    assert_eq!(e.to_string(), "snapshot S4 is incomplete: its capture did not finish");
    let e = run.open_snapshot("S5").unwrap_err();
    assert_eq!(e.to_string(), "no snapshot S5 in run 1 (snapshots: S0, S1, S2, S3)");
    check(&run, &m, &expected, u32::MAX, true, "with S4.snap.incomplete");
}

sdt_test_harness::tests![every_truncation_and_every_flipped_byte, incomplete_files_are_ignored];
