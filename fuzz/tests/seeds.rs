//! The `store` target's seeds (`fuzz/seeds/store/`), replayed as the fuzzer reads them:
//! the cases they describe hold, without cargo-fuzz, in every test run.

use arbitrary::{Arbitrary, Unstructured};
use sdt_fuzz::store_case::{self, Case};

#[test]
fn store_seeds_hold() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("seeds/store");
    let mut seeds: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    seeds.sort();
    assert!(!seeds.is_empty(), "no seeds in {dir:?}");
    for seed in seeds {
        let bytes = std::fs::read(&seed).unwrap();
        // As `fuzz_target!` draws a typed input.
        let case = Case::arbitrary_take_rest(Unstructured::new(&bytes)).unwrap();
        store_case::run(&case);
    }
}
