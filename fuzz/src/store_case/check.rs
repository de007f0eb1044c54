//! Reading back every snapshot of the store and exporting each, as `sdt` does, with what
//! must hold however hostile the store: no panic; every error one a hostile store may
//! give; what the reader hands out as it promises (mappings sorted and page-aligned,
//! names that fit the grammar); outputs bounded by what the store and the files it names
//! hold (never gigabytes of zeros); nothing left behind by a failed export.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use sdt_store::{Content, PAGE_SIZE, Run, Snapshot, Store};

use super::build::assert_read_error;

/// Pages read back from each snapshot at most, and bytes read from a mapping at once.
const MAX_PAGE_READS: usize = 64;
const MAX_READ: u64 = 8 * PAGE_SIZE;
/// What an export may write beyond memory contents: headers, notes, images of
/// metadata.
const OVERHEAD: u64 = 1 << 20;

/// Reads every run of the store at `root` and exports every snapshot that opens into
/// `out` (`cores/<name>.core`, `criu-<seq>/`).
pub fn check(root: &Path, out: &Path) {
    let store = Store::open(root).expect("the store written");
    let ids = store.run_ids().expect("the runs of a store");
    std::fs::create_dir(out.join("cores")).unwrap();
    for id in ids {
        let run = match store.open_run(&id) {
            Ok(run) => run,
            Err(e) => {
                assert_read_error(&e);
                continue;
            }
        };
        if let Err(e) = store.tree(id) {
            assert_read_error(&e);
        }
        check_run(&store, &run, out);
    }
}

fn check_run(store: &Store, run: &Run, out: &Path) {
    let entries = match run.snapshots() {
        Ok(entries) => entries,
        Err(e) => return assert_read_error(&e),
    };
    for entry in entries {
        let entry = match entry {
            Ok(entry) => entry,
            Err(e) => {
                assert_read_error(&e);
                continue;
            }
        };
        assert!(sdt_store::is_snapshot_name(&entry.name), "listed as {:?}", entry.name);
        if let Err(e) = run.read_meta(entry.seq) {
            assert_read_error(&e);
        }
        if let Err(e) = store.find_snapshot(run.id(), &entry.name) {
            assert_read_error(&e);
        }
        match run.open_snapshot(&entry.name) {
            Ok(snap) => check_snapshot(&snap, entry.seq, out),
            Err(e) => assert_read_error(&e),
        }
    }
}

fn check_snapshot(snap: &Snapshot, seq: u32, out: &Path) {
    let meta = snap.meta();
    assert!(sdt_store::is_snapshot_name(snap.name()), "opened as {:?}", snap.name());
    assert_eq!(meta.name, snap.name());
    let mut prev_end = 0;
    for m in &meta.mappings {
        assert!(m.start % PAGE_SIZE == 0 && m.end % PAGE_SIZE == 0 && m.start < m.end, "{m:?}");
        assert!(m.start >= prev_end, "mappings overlap or are not sorted: {m:?}");
        prev_end = m.end;
    }
    let stored = snap.stored_ranges();
    assert!(stored.windows(2).all(|w| w[0].end < w[1].start), "stored ranges not ascending apart");
    assert!(stored.iter().all(|r| r.start < r.end && r.start % PAGE_SIZE == 0), "stored ranges: {stored:?}");
    read_back(snap, &stored);
    if let Err(e) = snap.check_files() {
        assert_read_error(&e);
    }
    for m in &meta.mappings {
        if let Content::File(f) = &m.content
            && let Err(e) = snap.open_file(f)
        {
            assert_read_error(&e);
        }
    }
    let in_mappings = stored
        .iter()
        .flat_map(|r| {
            meta.mappings.iter().map(move |m| r.end.min(m.end).saturating_sub(r.start.max(m.start)))
        })
        .fold(0u64, u64::saturating_add);
    export_core(snap, in_mappings, out);
    export_criu(snap, in_mappings, &out.join(format!("criu-{seq}")));
}

/// Reads the start and end of every mapping, across its end, and stored pages.
fn read_back(snap: &Snapshot, stored: &[std::ops::Range<u64>]) {
    let read = |addr: u64, len: u64| {
        let mut buf = vec![0; len as usize];
        if let Err(e) = snap.read(addr, &mut buf) {
            assert_read_error(&e);
        }
    };
    for m in snap.meta().mappings.iter().take(16) {
        read(m.start, m.len().min(MAX_READ));
        read(m.end - PAGE_SIZE, PAGE_SIZE);
        read(m.end - 1, 2);
    }
    for page in stored.iter().flat_map(|r| r.clone().step_by(PAGE_SIZE as usize)).take(MAX_PAGE_READS) {
        read(page, PAGE_SIZE);
    }
}

/// Bytes that the files mappings name provide, at most: what the core may hold beyond
/// the stored pages.
fn file_bytes(snap: &Snapshot) -> u64 {
    snap.meta()
        .mappings
        .iter()
        .filter_map(|m| match &m.content {
            Content::File(f) => {
                // The file the store reads: at its path, or a copy kept with the run.
                let size = snap.open_file(f).map(|file| file.metadata().map_or(0, |s| s.len())).unwrap_or(0);
                Some(m.len().min(size.next_multiple_of(PAGE_SIZE)))
            }
            _ => None,
        })
        .sum()
}

fn export_core(snap: &Snapshot, stored: u64, out: &Path) {
    let path = out.join("cores").join(format!("{}.core", snap.name()));
    assert_eq!(path.parent(), Some(out.join("cores").as_path()), "{path:?}");
    match sdt_gdb::export_core(snap, &path) {
        Ok(report) => {
            let meta = std::fs::symlink_metadata(&path).expect("the core written");
            assert_eq!(meta.len(), report.bytes);
            assert_eq!(meta.permissions().mode() & 0o777, 0o600);
            // Gaps of up to 4 pages between known pages are written as zeros.
            let bound = OVERHEAD + metadata_bytes(snap) + 5 * (stored + file_bytes(snap));
            assert!(report.bytes <= bound, "core of {} bytes, at most {bound} expected", report.bytes);
        }
        Err(e) => {
            match &e {
                sdt_gdb::Error::NoThreads | sdt_gdb::Error::BadRegisters(_) => {}
                sdt_gdb::Error::Store { source, .. } => assert_read_error(source),
                e => panic!("export_core: {e:?}"),
            }
            assert!(!path.exists(), "a failed export left {path:?}");
        }
    }
}

fn export_criu(snap: &Snapshot, stored: u64, dir: &Path) {
    match criu_export::export_criu(snap, dir) {
        Ok(report) => {
            let written: u64 = std::fs::read_dir(dir)
                .expect("the image directory")
                .map(|e| e.unwrap().metadata().unwrap().len())
                .sum();
            assert_eq!(written, report.bytes());
            // Pages the handover patches (trap record, tid words) may add to those stored.
            let patched = 2 * PAGE_SIZE * (snap.meta().threads.len() as u64 + 1);
            let bound = OVERHEAD + 4 * metadata_bytes(snap) + stored + patched;
            assert!(written <= bound, "images of {written} bytes, at most {bound} expected");
        }
        Err(e) => {
            match &e {
                criu_export::Error::NoLeader { .. }
                | criu_export::Error::BadRegisters(_)
                | criu_export::Error::NoLayout { .. }
                | criu_export::Error::Unsupported { .. }
                | criu_export::Error::Credentials(_) => {}
                criu_export::Error::Store { source, .. } | criu_export::Error::Refused { source, .. } => {
                    assert_read_error(source)
                }
                e => panic!("export_criu: {e:?}"),
            }
            assert!(!dir.exists(), "a failed export left {dir:?}");
        }
    }
}

/// The size of the snapshot's metadata as JSON: what the notes and images that describe
/// it grow with.
fn metadata_bytes(snap: &Snapshot) -> u64 {
    serde_json::to_vec(snap.meta()).map_or(0, |json| json.len() as u64)
}
