//! Random runs over a small address space against a shadow model: every snapshot reads
//! back what was written for it, and each file stores exactly the pages that changed, as
//! patches exactly where the writer's rule says.

use proptest::prelude::*;
use sdt_store::{PageSource, Store};

use crate::common::*;

const BASE: u64 = 0x7000_0000;
const PAGES: usize = 12;

/// What a snapshot does with one page.
#[derive(Clone, Copy, Debug)]
enum Action {
    /// Not listed: zero.
    Absent,
    /// Data, all zero.
    Zero,
    /// Data, the same bytes as the previous snapshot had.
    Same,
    /// `Unchanged`: whatever the previous snapshot had.
    Unchanged,
    /// Data with this pattern (few patterns, so a page often gets its old bytes back).
    Fill(u8),
    /// Data: the previous bytes with 8 of them changed (at an offset chosen by this).
    Tweak(u8),
}

fn action() -> impl Strategy<Value = Action> {
    prop_oneof![
        1 => Just(Action::Absent),
        1 => Just(Action::Zero),
        1 => Just(Action::Same),
        2 => Just(Action::Unchanged),
        3 => (1u8..4).prop_map(Action::Fill),
        4 => any::<u8>().prop_map(Action::Tweak),
    ]
}

/// Whether the writer stores `new` as a patch on `old`, whose chain holds `depth` patches.
fn is_patch(old: &[u8], new: &[u8], depth: u32) -> bool {
    let nonzero = |bytes: &mut dyn Iterator<Item = u8>| bytes.filter(|&b| b != 0).count();
    let changed = nonzero(&mut old.iter().zip(new).map(|(a, b)| a ^ b));
    depth < 8
        && old.iter().any(|&b| b != 0)
        && changed <= PAGE / 4
        && changed < nonzero(&mut new.iter().copied())
}

fn addr(i: usize) -> u64 {
    BASE + i as u64 * 4096
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    fn snapshots_read_back_and_store_only_changes(
        run in prop::collection::vec(prop::collection::vec(action(), PAGES), 1..12)
    ) {
        let tmp = tempfile::tempdir().unwrap();
        let store = Store::open_or_create(tmp.path()).unwrap();
        let (_log, mut writer) = create_run(&store);
        let maps = vec![anon(BASE, PAGES as u64)];
        let zero = vec![0u8; PAGE];
        let mut prev: Vec<Vec<u8>> = vec![zero.clone(); PAGES];
        // Per page: the patches in its chain.
        let mut depth = [0u32; PAGES];
        let mut expected = Vec::new();
        for (seq, actions) in run.iter().enumerate() {
            let mut now = prev.clone();
            // Per page: not listed, `Unchanged` (None), or these bytes.
            let mut given: Vec<Option<Option<Vec<u8>>>> = vec![None; PAGES];
            let (mut stored, mut patched) = (0, 0);
            for (i, a) in actions.iter().enumerate() {
                let bytes = match *a {
                    Action::Absent => {
                        now[i] = zero.clone();
                        depth[i] = 0;
                        continue;
                    }
                    Action::Unchanged => {
                        given[i] = Some(None);
                        continue;
                    }
                    Action::Zero => zero.clone(),
                    Action::Same => prev[i].clone(),
                    Action::Fill(tag) => page(tag, addr(i)),
                    Action::Tweak(k) => tweak(&prev[i], k.into()),
                };
                if bytes == zero {
                    depth[i] = 0;
                } else if bytes != prev[i] {
                    stored += 1;
                    if is_patch(&prev[i], &bytes, depth[i]) {
                        patched += 1;
                        depth[i] += 1;
                    } else {
                        depth[i] = 0;
                    }
                }
                now[i] = bytes.clone();
                given[i] = Some(Some(bytes));
            }
            // Neighbouring unchanged pages go as one run, as dirty tracking hands them.
            let mut pages: Vec<(u64, PageSource)> = Vec::new();
            for (i, g) in given.iter().enumerate() {
                match (g, pages.last_mut()) {
                    (None, _) => {}
                    (Some(None), Some((start, PageSource::Unchanged(n)))) if *start + *n * 4096 == addr(i) => *n += 1,
                    (Some(None), _) => pages.push((addr(i), PageSource::Unchanged(1))),
                    (Some(Some(bytes)), _) => pages.push((addr(i), PageSource::Data(bytes))),
                }
            }
            let r = writer.write_snapshot(meta(seq as u32, maps.clone()), pages).unwrap();
            let with_content = now.iter().filter(|p| **p != zero).count() as u64;
            prop_assert_eq!(r.pages_stored, stored, "S{}", seq);
            prop_assert_eq!(r.pages_patched, patched, "S{}", seq);
            prop_assert_eq!(r.pages, with_content, "S{}", seq);
            expected.push((now.concat(), stored));
            prev = now;
        }
        let run = store.open_run(&writer.id()).unwrap();
        for (seq, (bytes, stored)) in expected.iter().enumerate() {
            let snap = run.open_snapshot_seq(seq as u32).unwrap();
            prop_assert_eq!(snap.meta().stats.pages_stored, *stored);
            prop_assert!(read_mapping(&snap, &maps[0]).unwrap() == *bytes, "S{} reads wrong bytes", seq);
        }
    }
}

sdt_test_harness::tests![snapshots_read_back_and_store_only_changes];
