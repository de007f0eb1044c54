//! Changed pages stored as patches on their previous version: chains up to their bound,
//! what they cost, and damage reached through a base.

use std::collections::BTreeMap;
use std::path::Path;

use sdt_store::{Error, PageSource, Run, Store};

use crate::common::*;

const BASE: u64 = 0x6000_0000;
/// Most patches in a chain (the store's bound).
const MAX_DEPTH: u32 = 8;

fn a(i: u64) -> u64 {
    BASE + i * 4096
}

/// Every page of `pages` read back from snapshot `seq`, byte-exact.
fn assert_reads(run: &Run, seq: u32, pages: &BTreeMap<u64, Vec<u8>>) {
    let snap = run.open_snapshot_seq(seq).unwrap();
    let mut buf = vec![0; PAGE];
    for (&addr, bytes) in pages {
        snap.read(addr, &mut buf).unwrap();
        assert!(buf == *bytes, "S{seq} page {addr:#x} reads wrong bytes");
    }
    assert_eq!(stored_pages(&snap), pages.keys().copied().collect::<Vec<_>>(), "S{seq}");
}

/// Reading page `i` of snapshot `seq` fails, naming `damaged`.
fn assert_fails(run: &Run, seq: u32, i: u64, damaged: &str, says: &str) {
    let e = run.open_snapshot_seq(seq).unwrap().read(a(i), &mut [0; 8]).unwrap_err();
    assert!(matches!(&e, Error::Corrupt { snapshot, .. } if snapshot == damaged), "S{seq} page {i}: {e:?}");
    assert!(e.to_string().contains(says), "S{seq} page {i}: {e}");
}

/// Pages changed by a few bytes, some in every snapshot: chains grow to 8 patches, the next
/// change stores the page whole and starts a new chain; pages that vanish or are rewritten
/// come back whole. Every snapshot reads back exactly after all were written.
fn chains_grow_to_the_bound_and_restart_whole() {
    const PAGES: u64 = 24;
    const SNAPSHOTS: u32 = 30;
    let tmp = tempfile::tempdir().unwrap();
    let store = Store::open_or_create(tmp.path()).unwrap();
    let (_log, mut writer) = create_run(&store);
    let maps = vec![anon(BASE, PAGES)];
    let mut cur: BTreeMap<u64, Vec<u8>> = (0..PAGES).map(|i| (a(i), random_page(i))).collect();
    // Per page: the patches in its chain, as the writer should count them.
    let mut depth = vec![0u32; PAGES as usize];
    let mut history = Vec::new();
    for seq in 0..SNAPSHOTS {
        let k = u64::from(seq);
        let mut changed = Vec::new();
        let mut patched = 0;
        if seq > 0 {
            for i in 0..PAGES {
                let d = &mut depth[i as usize];
                // Page 5 vanishes at S10 and comes back at S11; page 6 is rewritten at S12.
                match (i, seq) {
                    (5, 10) => {
                        cur.remove(&a(i));
                        continue;
                    }
                    (5, 11) | (6, 12) => {
                        cur.insert(a(i), random_page(1000 + i));
                        *d = 0;
                    }
                    // Page i changes every (i % 4 + 1)th snapshot.
                    _ if k % (i % 4 + 1) == 0 => {
                        let bytes = tweak(&cur[&a(i)], k);
                        cur.insert(a(i), bytes);
                        *d = if *d < MAX_DEPTH { *d + 1 } else { 0 };
                        patched += u64::from(*d > 0);
                    }
                    _ => continue,
                }
                changed.push(a(i));
            }
        }
        // Odd snapshots hand unchanged pages over as `Unchanged`, even ones as data.
        let unchanged: Vec<u64> = if seq % 2 == 1 {
            cur.keys().copied().filter(|p| !changed.contains(p)).collect()
        } else {
            vec![]
        };
        let r = writer.write_snapshot(meta(seq, maps.clone()), sources(&cur, &unchanged)).unwrap();
        let stored = if seq == 0 { PAGES } else { changed.len() as u64 };
        assert_eq!((r.pages_stored, r.pages_patched), (stored, patched), "S{seq}");
        history.push(cur.clone());
    }
    // Page 0 changed in every snapshot: whole in S0, S9, S18 and S27, patched between.
    assert_eq!(depth[0], (SNAPSHOTS - 1) % (MAX_DEPTH + 1));

    let run = store.open_run(&writer.id()).unwrap();
    for (seq, pages) in history.iter().enumerate() {
        assert_reads(&run, seq as u32, pages);
    }
    let last = run.open_snapshot_seq(SNAPSHOTS - 1).unwrap();
    assert!(
        read_mapping(&last, &maps[0]).unwrap() == expected_anon(&maps[0], &history[SNAPSHOTS as usize - 1])
    );
}

/// An 8-byte change costs a few dozen bytes, not a page; a page rewritten with random
/// bytes is stored whole, as before patches.
fn small_changes_cost_little_and_random_pages_go_whole() {
    const PAGES: u64 = 64;
    let tmp = tempfile::tempdir().unwrap();
    let store = Store::open_or_create(tmp.path()).unwrap();
    let (_log, mut writer) = create_run(&store);
    let maps = vec![anon(BASE, PAGES)];
    let mut cur: BTreeMap<u64, Vec<u8>> = (0..PAGES).map(|i| (a(i), random_page(i))).collect();
    let mut history = vec![cur.clone()];
    let r0 = writer.write_snapshot(meta(0, maps.clone()), sources(&cur, &[])).unwrap();
    for i in 0..PAGES {
        let bytes = tweak(&cur[&a(i)], i);
        cur.insert(a(i), bytes);
    }
    history.push(cur.clone());
    let r1 = writer.write_snapshot(meta(1, maps.clone()), sources(&cur, &[])).unwrap();
    history.push(cur.clone());
    let r2 = writer.write_snapshot(meta(2, maps.clone()), [(BASE, PageSource::Unchanged(PAGES))]).unwrap();
    let cur: BTreeMap<u64, Vec<u8>> = (0..PAGES).map(|i| (a(i), random_page(100 + i))).collect();
    history.push(cur.clone());
    let r3 = writer.write_snapshot(meta(3, maps.clone()), sources(&cur, &[])).unwrap();

    assert_eq!((r1.pages_stored, r1.pages_patched), (PAGES, PAGES));
    assert_eq!((r2.pages_stored, r2.pages_patched), (0, 0));
    // S2 (nothing stored) has the same index and metadata as S1, bar the patches.
    let per_page = (r1.file_bytes - r2.file_bytes) / PAGES;
    assert!(per_page < 200, "{per_page} bytes per changed page: {r1:?} {r2:?}");
    assert_eq!((r3.pages_stored, r3.pages_patched), (PAGES, 0));
    assert!(r3.file_bytes <= r0.file_bytes + 16, "{r3:?} {r0:?}");
    assert!(r3.file_bytes < PAGES * 4096 + 1024, "{r3:?}");

    let run = store.open_run(&writer.id()).unwrap();
    for (seq, pages) in history.iter().enumerate() {
        assert_reads(&run, seq as u32, pages);
    }
}

/// Replaces `path` by a new file holding `bytes`.
fn replace(path: &Path, bytes: &[u8]) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, bytes).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// Four snapshots: page 0 patched in S1, S2 and S3 (the chain S3 -> S2 -> S1 -> S0), page 1
/// rewritten whole in S1, page 2 in S3.
fn chain_store(root: &Path) -> (Run, Vec<BTreeMap<u64, Vec<u8>>>) {
    let store = Store::open_or_create(root).unwrap();
    let (_log, mut writer) = create_run(&store);
    let maps = vec![anon(BASE, 4)];
    let mut cur: BTreeMap<u64, Vec<u8>> = (0..4).map(|i| (a(i), random_page(i))).collect();
    let mut history = Vec::new();
    for seq in 0..4u32 {
        if seq > 0 {
            let bytes = tweak(&cur[&a(0)], seq.into());
            cur.insert(a(0), bytes);
        }
        match seq {
            1 => cur.insert(a(1), random_page(11)),
            3 => cur.insert(a(2), random_page(12)),
            _ => None,
        };
        let r = writer.write_snapshot(meta(seq, maps.clone()), sources(&cur, &[])).unwrap();
        assert_eq!(r.pages_patched, u64::from(seq > 0), "S{seq}");
        history.push(cur.clone());
    }
    (store.open_run(&writer.id()).unwrap(), history)
}

fn damage_to_a_base_is_named() {
    let tmp = tempfile::tempdir().unwrap();
    let (run, history) = chain_store(tmp.path());
    let path = |seq: u32| run.dir().join(format!("S{seq}.snap"));
    let originals: Vec<Vec<u8>> = (0..4).map(|seq| std::fs::read(path(seq)).unwrap()).collect();
    let page = |seq: usize, i: u64| history[seq][&a(i)].clone();
    let read = |seq: u32, i: u64| {
        let mut buf = vec![0; PAGE];
        run.open_snapshot_seq(seq).unwrap().read(a(i), &mut buf).map(|()| buf)
    };

    // A byte of S0's only block: S3's page 0 (three patches away) and S3's page 3 (kept
    // in S0) fail naming S0; S3's pages 1 and 2, stored whole in S1 and S3, read.
    let mut bytes = originals[0].clone();
    bytes[32 + 16 + 100] ^= 1;
    replace(&path(0), &bytes);
    assert_fails(&run, 3, 0, "S0", "block 0 at offset 32: checksum");
    assert_fails(&run, 3, 3, "S0", "block 0 at offset 32: checksum");
    assert!(read(3, 1).unwrap() == page(3, 1));
    assert!(read(3, 2).unwrap() == page(3, 2));
    replace(&path(0), &originals[0]);

    // The same in S1's block: S3's page 0 fails naming S1, S0 still reads.
    let mut bytes = originals[1].clone();
    bytes[32 + 16 + 20] ^= 1;
    replace(&path(1), &bytes);
    assert_fails(&run, 3, 0, "S1", "block 0 at offset 32: checksum");
    assert_fails(&run, 2, 0, "S1", "block 0 at offset 32: checksum");
    assert_reads(&run, 0, &history[0]);
    replace(&path(1), &originals[1]);

    // A base whose file is gone.
    std::fs::remove_file(path(2)).unwrap();
    assert_fails(&run, 3, 0, "S2", "S2.snap is missing (S3 keeps pages there)");
    assert!(read(3, 2).unwrap() == page(3, 2));
    replace(&path(2), &originals[2]);
    for (seq, pages) in history.iter().enumerate() {
        assert_reads(&run, seq as u32, pages);
    }
}

/// A base that cannot be read when the next snapshot is written: the page goes in whole.
fn writer_stores_whole_when_the_base_is_gone() {
    let tmp = tempfile::tempdir().unwrap();
    let store = Store::open_or_create(tmp.path()).unwrap();
    let (_log, mut writer) = create_run(&store);
    let maps = vec![anon(BASE, 2)];
    let mut cur: BTreeMap<u64, Vec<u8>> = (0..2).map(|i| (a(i), random_page(i))).collect();
    writer.write_snapshot(meta(0, maps.clone()), sources(&cur, &[])).unwrap();
    let bytes = tweak(&cur[&a(0)], 1);
    cur.insert(a(0), bytes);
    assert_eq!(
        writer.write_snapshot(meta(1, maps.clone()), sources(&cur, &[a(1)])).unwrap().pages_patched,
        1
    );
    let run = store.open_run(&writer.id()).unwrap();
    std::fs::remove_file(run.dir().join("S1.snap")).unwrap();
    let bytes = tweak(&cur[&a(0)], 2);
    cur.insert(a(0), bytes);
    let r = writer.write_snapshot(meta(2, maps.clone()), sources(&cur, &[a(1)])).unwrap();
    assert_eq!((r.pages_stored, r.pages_patched), (1, 0));
    assert_reads(&run, 2, &cur);
}

/// Rewrites the index of snapshot file `path` with `edit` applied to its bytes, with
/// valid checksums: a well-formed file that says something wrong.
fn rewrite_index(path: &Path, edit: impl FnOnce(&mut Vec<u8>)) {
    let file = std::fs::read(path).unwrap();
    let footer_at = file.len() - 64;
    let field = |at: usize| u64::from_le_bytes(file[footer_at + at..footer_at + at + 8].try_into().unwrap());
    let (index_offset, index_len, meta_offset) = (field(16) as usize, field(24) as usize, field(40) as usize);
    let mut index = zstd::bulk::decompress(&file[index_offset..index_offset + index_len], 1 << 20).unwrap();
    edit(&mut index);
    let frame = zstd::bulk::compress(&index, 1).unwrap();
    let mut out = file[..index_offset].to_vec();
    out.extend_from_slice(&frame);
    let new_meta_offset = out.len() as u64;
    out.extend_from_slice(&file[meta_offset..footer_at]);
    let mut footer = file[footer_at..].to_vec();
    footer[24..32].copy_from_slice(&(frame.len() as u64).to_le_bytes());
    footer[32..40].copy_from_slice(&xxhash_rust::xxh3::xxh3_64(&frame).to_le_bytes());
    footer[40..48].copy_from_slice(&new_meta_offset.to_le_bytes());
    let sum = xxhash_rust::xxh3::xxh3_64(&footer[..56]);
    footer[56..64].copy_from_slice(&sum.to_le_bytes());
    out.extend_from_slice(&footer);
    replace(path, &out);
}

/// A file whose index makes a chain longer than the bound is refused, naming the chain's
/// first file; snapshots the chain does not pass through read.
fn a_chain_past_the_bound_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let store = Store::open_or_create(tmp.path()).unwrap();
    let (_log, mut writer) = create_run(&store);
    let maps = vec![anon(BASE, 2)];
    let mut cur: BTreeMap<u64, Vec<u8>> = (0..2).map(|i| (a(i), random_page(i))).collect();
    let mut history = Vec::new();
    for seq in 0..=10u32 {
        if seq > 0 {
            let bytes = tweak(&cur[&a(0)], seq.into());
            cur.insert(a(0), bytes);
        }
        let unchanged = if seq > 0 { vec![a(1)] } else { vec![] };
        let r = writer.write_snapshot(meta(seq, maps.clone()), sources(&cur, &unchanged)).unwrap();
        // S1..=S8 patch page 0, S9 stores it whole, S10 patches S9's.
        assert_eq!(r.pages_patched, u64::from(seq > 0 && seq != 9), "S{seq}");
        history.push(cur.clone());
    }
    // S9 now says its one slot is a patch on S8's: page 0 in S9 becomes 9 patches deep.
    let run = store.open_run(&writer.id()).unwrap();
    rewrite_index(&run.dir().join("S9.snap"), |index| {
        assert_eq!(index[index.len() - 4..], [0; 4], "S9 has no patch runs");
        index.truncate(index.len() - 4);
        for field in [1u32, 0, 0, 1, 8, 0] {
            index.extend_from_slice(&field.to_le_bytes());
        }
    });
    assert_fails(
        &run,
        9,
        0,
        "S9",
        "page 0x60000000 is stored as a chain of more than 8 patches, S9 back to S1",
    );
    assert_fails(&run, 10, 0, "S10", "chain of more than 8 patches, S10 back to S2");
    for (seq, pages) in history.iter().enumerate() {
        let snap = run.open_snapshot_seq(seq as u32).unwrap();
        let mut buf = vec![0; PAGE];
        snap.read(a(1), &mut buf).unwrap();
        assert!(buf == pages[&a(1)], "S{seq}");
        if seq <= 8 {
            assert_reads(&run, seq as u32, pages);
        }
    }
}

/// An index whose run claims four billion pages of an earlier file that holds one lists
/// as one range (exporters work from ranges, so nothing allocates for the claim), and
/// reading past the real page is damage, named.
fn a_run_claiming_more_than_its_file_holds_costs_nothing_until_read() {
    let tmp = tempfile::tempdir().unwrap();
    let store = Store::open_or_create(tmp.path()).unwrap();
    let (_log, mut writer) = create_run(&store);
    let maps = vec![anon(BASE, 1 << 20)];
    let cur: BTreeMap<u64, Vec<u8>> = [(a(0), random_page(0))].into();
    writer.write_snapshot(meta(0, maps.clone()), sources(&cur, &[])).unwrap();
    writer.write_snapshot(meta(1, maps.clone()), sources(&cur, &[a(0)])).unwrap();
    let run = store.open_run(&writer.id()).unwrap();
    rewrite_index(&run.dir().join("S1.snap"), |index| {
        // No blocks, one run: page, count, S0, slot 0.
        assert_eq!(index[..8], [0, 0, 0, 0, 1, 0, 0, 0]);
        index[16..20].copy_from_slice(&u32::MAX.to_le_bytes());
    });
    let snap = run.open_snapshot("S1").unwrap();
    assert_eq!(snap.stored_ranges(), vec![BASE..BASE + u64::from(u32::MAX) * PAGE as u64]);
    let mut page = vec![0; PAGE];
    snap.read(a(0), &mut page).unwrap();
    assert_eq!(page, cur[&a(0)]);
    let e = snap.read(a(1), &mut page).unwrap_err();
    assert!(e.to_string().contains("slot 1 of S0, which holds 1 pages"), "{e}");
}

sdt_test_harness::tests![
    chains_grow_to_the_bound_and_restart_whole,
    small_changes_cost_little_and_random_pages_go_whole,
    damage_to_a_base_is_named,
    writer_stores_whole_when_the_base_is_gone,
    a_chain_past_the_bound_is_refused,
    a_run_claiming_more_than_its_file_holds_costs_nothing_until_read,
];
