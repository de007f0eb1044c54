//! Any bytes as a run's first snapshot file: opening it and reading every mapping never
//! panics; it either reads or reports the snapshot as damaged.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sdt_store::{Error, RunId, Store};

fuzz_target!(|bytes: &[u8]| {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("runs/1");
    std::fs::create_dir_all(&run).unwrap();
    let info = r#"{"id":1,"command":["fuzz"],"cwd":"/","started_wall_ns":0,"sdt_pid":1,"config":"","status":{"kind":"running"}}"#;
    std::fs::write(run.join("run.json"), info).unwrap();
    std::fs::write(run.join("S0.snap"), bytes).unwrap();
    let store = Store::open(dir.path()).unwrap();
    let run = store.open_run(&RunId(1)).unwrap();
    match run.open_snapshot("S0") {
        Ok(snapshot) => {
            for mapping in &snapshot.meta().mappings {
                let mut buf = vec![0u8; mapping.len().min(1 << 20) as usize];
                let _ = snapshot.read(mapping.start, &mut buf);
            }
        }
        Err(Error::Corrupt { snapshot, .. }) | Err(Error::UnsupportedVersion { snapshot, .. }) => {
            assert_eq!(snapshot, "S0")
        }
        Err(e) => panic!("unexpected error for a damaged file: {e}"),
    }
});
