//! A valid store, built through the store's own writing API from a drawn description
//! (raw and compacted snapshots; hostile names, paths, sizes, register sets and files;
//! edits past the checksums), read back and exported as a core file and as CRIU images:
//! nothing panics, hangs, errs outside the documented errors, writes out of proportion
//! or outside the directories given. See `sdt_fuzz::store_case`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sdt_fuzz::store_case::{self, Case};

fuzz_target!(|case: Case| store_case::run(&case));
