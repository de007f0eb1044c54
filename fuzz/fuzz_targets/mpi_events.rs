//! `sdt_history::format::read_rank` on any three files, the events file in either form
//! (`sdt_history::packed`): never panics; what it accepts, written again, reads the same;
//! a packed file that unpacks, packed again, unpacks the same.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sdt_history::format::{read_rank, write_rank};
use sdt_history::packed;

fuzz_target!(|files: (&str, &str, &[u8])| {
    let (comms, sites, events) = files;
    let raw = match packed::is_packed(events) {
        true => match packed::unpack(events, 1 << 20) {
            Ok(raw) => raw,
            Err(_) => return,
        },
        false => events.to_vec(),
    };
    if packed::is_packed(events) {
        let read_at = |buffer: &mut [u8], at: u64| {
            buffer.copy_from_slice(&raw[at as usize..at as usize + buffer.len()]);
            Ok(())
        };
        let again = packed::pack(read_at, 1 << 20).unwrap().expect("an unpacked file packs");
        assert_eq!(packed::unpack(&again, 1 << 20).as_ref(), Ok(&raw));
    }
    if let Ok(history) = read_rank(&raw, comms, sites) {
        let again = write_rank(&history);
        assert_eq!(read_rank(&again.events, &again.comms, &again.sites).as_ref(), Ok(&history));
    }
});
