//! `sdt_history::format::read_rank` on any three files: never panics; what it accepts,
//! written again, reads the same.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sdt_history::format::{read_rank, write_rank};

fuzz_target!(|files: (&str, &str, &[u8])| {
    let (comms, sites, events) = files;
    if let Ok(history) = read_rank(events, comms, sites) {
        let again = write_rank(&history);
        assert_eq!(read_rank(&again.events, &again.comms, &again.sites).as_ref(), Ok(&history));
    }
});
