//! How blocks are encoded: doubles that change a little each snapshot (patches on their
//! previous version, byte-shuffled), random pages (stored as they are), text and zero
//! pages; every snapshot reads back byte for byte, in this format and in files that an
//! earlier build wrote.

use std::collections::BTreeMap;
use std::path::Path;

use proptest::prelude::*;
use sdt_store::{Store, WriteReport};

use crate::common::*;

const BASE: u64 = 0x5000_0000;
/// Pages of each kind: one block each.
const BLOCK: u64 = 64;

fn a(i: u64) -> u64 {
    BASE + i * 4096
}

/// A page of doubles scattered over several magnitudes (no two neighbours alike), each
/// moved by a millionth of itself `step` times: every byte-shuffled patch on the previous
/// step has zero high bytes.
fn doubles(seed: u64, step: u32) -> Vec<u8> {
    let words = random_page(seed);
    words
        .chunks(8)
        .flat_map(|w| {
            let x = (u64::from_le_bytes(w.try_into().unwrap()) >> 11) as f64 / (1u64 << 40) as f64;
            (x * (1.0f64 + 1e-6).powi(step as i32)).to_le_bytes()
        })
        .collect()
}

/// A page of English-like text, from `seed`.
fn text(seed: u64) -> Vec<u8> {
    const WORDS: [&str; 8] = ["the ", "snapshot ", "of ", "memory ", "reads ", "back ", "page ", "and\n"];
    let mut bytes = Vec::with_capacity(PAGE + 16);
    let mut x = seed | 1;
    while bytes.len() < PAGE {
        x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        bytes.extend_from_slice(WORDS[(x >> 61) as usize].as_bytes());
    }
    bytes.truncate(PAGE);
    bytes
}

/// Writes `history` (each snapshot's pages) as a run; checks that every snapshot reads
/// back exactly; returns the writer's reports.
fn write_and_check(history: &[BTreeMap<u64, Vec<u8>>], pages: u64) -> Vec<WriteReport> {
    let tmp = tempfile::tempdir().unwrap();
    let store = Store::open_or_create(tmp.path()).unwrap();
    let (_log, mut writer) = create_run(&store);
    let maps = vec![anon(BASE, pages)];
    let reports: Vec<WriteReport> = history
        .iter()
        .enumerate()
        .map(|(seq, cur)| writer.write_snapshot(meta(seq as u32, maps.clone()), sources(cur, &[])).unwrap())
        .collect();
    let run = store.open_run(&writer.id()).unwrap();
    for (seq, cur) in history.iter().enumerate() {
        let snap = run.open_snapshot_seq(seq as u32).unwrap();
        assert!(
            read_mapping(&snap, &maps[0]).unwrap() == expected_anon(&maps[0], cur),
            "S{seq} reads wrong bytes"
        );
    }
    reports
}

/// A block each of doubles, random bytes, text and zero pages, over 12 snapshots: the
/// doubles change every snapshot (whole-page patches, shuffled, in chains of at most 4),
/// one random page changes one word (small patches, in chains of at most 8), the text
/// pages stay.
fn each_encoding_reads_back() {
    let mut history = Vec::new();
    for step in 0..12u32 {
        let mut cur = BTreeMap::new();
        for i in 0..BLOCK {
            cur.insert(a(i), doubles(i, step));
            let mut random = random_page(1000 + i);
            if i == 5 {
                random[8 * step as usize..][..8].copy_from_slice(&u64::from(step).to_le_bytes());
            }
            cur.insert(a(BLOCK + i), random);
            cur.insert(a(2 * BLOCK + i), text(i));
            cur.insert(a(3 * BLOCK + i), vec![0; PAGE]);
        }
        history.push(cur);
    }
    let reports = write_and_check(&history, 4 * BLOCK);
    let r0 = &reports[0];
    // Zero pages cost nothing; doubles shuffled, random bytes stored as they are, text zstd.
    assert_eq!((r0.pages, r0.pages_stored, r0.blocks), (3 * BLOCK, 3 * BLOCK, 3));
    assert_eq!((r0.blocks_shuffled, r0.blocks_stored), (1, 1), "{r0:?}");
    assert!(r0.file_bytes < 3 * BLOCK * 4096 * 3 / 4, "{r0:?}");
    for (seq, r) in reports.iter().enumerate().skip(1) {
        // The doubles and the random page that changed: patches, but where their chains are full.
        let patched = BLOCK * u64::from(seq % 5 != 0) + u64::from(seq % 9 != 0);
        assert_eq!((r.pages_stored, r.pages_patched), (BLOCK + 1, patched), "S{seq}: {r:?}");
        assert!(r.blocks_shuffled >= 1, "S{seq}: {r:?}");
        // Shuffled patches of the doubles take far less than the doubles.
        if seq % 5 != 0 {
            assert!(r.file_bytes < BLOCK * 4096 * 3 / 4, "S{seq}: {r:?} vs {r0:?}");
        }
    }
}

/// Text rewritten in place (a word inserted, shifting the rest) is stored whole, plainly
/// compressed: its patch would be noise where the page is text.
fn rewritten_text_goes_whole() {
    let s0: BTreeMap<u64, Vec<u8>> = (0..BLOCK).map(|i| (a(i), text(i))).collect();
    let s1 = s0
        .iter()
        .map(|(&addr, page)| {
            let mut p = b"inserted ".to_vec();
            p.extend_from_slice(&page[..PAGE - 9]);
            (addr, p)
        })
        .collect();
    let reports = write_and_check(&[s0, s1], BLOCK);
    let r1 = &reports[1];
    assert_eq!((r1.pages_stored, r1.pages_patched, r1.blocks_stored), (BLOCK, 0, 0), "{r1:?}");
}

/// A run that the previous build wrote in format version 2 (all blocks plain zstd, with
/// patches) reads the same.
fn version_2_run_reads() {
    let store = Store::open(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/v2")).unwrap();
    let run = store.open_run(&store.latest_run().unwrap()).unwrap();
    let m = anon(0x10000, 4);
    let p = |i: u64| 0x10000 + i * 4096;
    // As that build wrote them: S0 three random pages; S1 page 1 tweaked (a patch), page 3
    // new; S2 pages 0 and 1 tweaked (patches, page 1's on S1's).
    let mut cur: BTreeMap<u64, Vec<u8>> = (0..3).map(|i| (p(i), random_page(i))).collect();
    let mut expected = vec![cur.clone()];
    cur.insert(p(1), tweak(&cur[&p(1)], 1));
    cur.insert(p(3), page(2, p(3)));
    expected.push(cur.clone());
    cur.insert(p(0), tweak(&cur[&p(0)], 2));
    cur.insert(p(1), tweak(&cur[&p(1)], 3));
    expected.push(cur);
    for (seq, cur) in expected.iter().enumerate() {
        let path = run.dir().join(format!("S{seq}.snap"));
        assert_eq!(std::fs::read(&path).unwrap()[8], 2, "{path:?} is a version-2 file");
        let snap = run.open_snapshot_seq(seq as u32).unwrap();
        assert!(read_mapping(&snap, &m).unwrap() == expected_anon(&m, cur), "S{seq}");
    }
}

/// What one page holds in a snapshot.
#[derive(Clone, Copy, Debug)]
enum Kind {
    Zero,
    Random(u8),
    Text(u8),
    /// Doubles, stepped this many times.
    Doubles(u8),
}

fn kind() -> impl Strategy<Value = Kind> {
    prop_oneof![
        Just(Kind::Zero),
        any::<u8>().prop_map(Kind::Random),
        (0u8..3).prop_map(Kind::Text),
        (0u8..20).prop_map(Kind::Doubles),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Runs of pages of every kind, changing kind or step at random: every snapshot reads
    /// back exactly, whatever encodings and patches the writer chose.
    fn mixed_pages_read_back(run in prop::collection::vec(prop::collection::vec(kind(), 80), 1..6)) {
        let history: Vec<BTreeMap<u64, Vec<u8>>> = run
            .iter()
            .map(|kinds| {
                kinds
                    .iter()
                    .enumerate()
                    .map(|(i, k)| {
                        let i = i as u64;
                        let bytes = match *k {
                            Kind::Zero => vec![0; PAGE],
                            Kind::Random(seed) => random_page(i * 256 + u64::from(seed)),
                            Kind::Text(seed) => text(i * 4 + u64::from(seed)),
                            Kind::Doubles(step) => doubles(i, step.into()),
                        };
                        (a(i), bytes)
                    })
                    .collect()
            })
            .collect();
        write_and_check(&history, 80);
    }
}

sdt_test_harness::tests![
    each_encoding_reads_back,
    rewritten_text_goes_whole,
    version_2_run_reads,
    mixed_pages_read_back,
];
