//! `Filter::decode` on any string: never panics, and what decodes re-encodes to itself.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sdt_abi::Filter;

fuzz_target!(|text: &str| {
    if let Ok(filter) = Filter::decode(text) {
        assert_eq!(Filter::decode(&filter.encode()), Ok(filter));
    }
});
