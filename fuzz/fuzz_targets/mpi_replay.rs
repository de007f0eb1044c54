//! `sdt_history::replay::read` on any bytes: never panics; what it accepts, written again
//! (stored, and in the library's fixed layout), reads the same.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sdt_history::races::Record;
use sdt_history::replay::{read, write, write_fixed};

fuzz_target!(|bytes: &[u8]| {
    if let Ok((record, ranks)) = read(bytes) {
        assert_eq!(read(&write(&record, ranks)), Ok((record.clone(), ranks)));
        // The fixed layout does not hold the size of every match.
        let fixed = Record { every_match_bytes: None, ..record.clone() };
        assert_eq!(read(&write_fixed(&record, ranks)), Ok((fixed, ranks)));
    }
});
