//! Builders for runs and snapshots, and the shadow model tests compare against.

use std::collections::BTreeMap;

use sdt_store::{
    CaptureStats, Content, Mapping, PAGE_SIZE, PageSource, Perms, ProcessInfo, RunId, RunInfo, RunStatus,
    Snapshot, SnapshotMeta, SnapshotTime, ThreadRunState, ThreadState, Trigger,
};

pub const PAGE: usize = PAGE_SIZE as usize;

pub fn run_info() -> RunInfo {
    RunInfo {
        id: RunId(0),
        command: vec!["./prog".into(), "arg".into()],
        cwd: "/tmp".into(),
        started_wall_ns: 1_700_000_000_000_000_000,
        sdt_pid: 42,
        config: String::new(),
        status: RunStatus::Running,
        parent: None,
        job: None,
    }
}

/// An anonymous read-write mapping of `pages` pages at `start`.
pub fn anon(start: u64, pages: u64) -> Mapping {
    with_content(start, pages, Content::Zero)
}

pub fn with_content(start: u64, pages: u64, content: Content) -> Mapping {
    Mapping {
        start,
        end: start + pages * PAGE_SIZE,
        perms: Perms { read: true, write: true, exec: false, shared: false },
        offset: 0,
        dev: "00:00".into(),
        inode: 0,
        path: String::new(),
        content,
    }
}

pub fn meta(seq: u32, mappings: Vec<Mapping>) -> SnapshotMeta {
    SnapshotMeta {
        name: format!("S{seq}"),
        seq,
        trigger: Trigger::Breakpoint {
            level: 1,
            class: 2,
            id: 10,
            multiple_mark: 0,
            attrs: "phase=solve".into(),
            hit: u64::from(seq) + 1,
            tid: 100,
        },
        time: SnapshotTime { wall_ns: 1, since_start_ns: u64::from(seq) * 1000 },
        process: ProcessInfo { pid: 100, comm: "prog".into(), ..ProcessInfo::default() },
        threads: vec![ThreadState {
            tid: 100,
            name: "prog".into(),
            state: ThreadRunState::Running,
            gpregs: vec![0; sdt_store::GPREGS_SIZE],
            fpregs: vec![0; sdt_store::FPREGS_SIZE],
            xstate: Vec::new(),
            sigmask: 0,
            rseq: None,
            robust_list: None,
            altstack: None,
        }],
        mappings,
        auxv: vec![1, 2, 3],
        stats: CaptureStats { mode: "full-copy".into(), ..CaptureStats::default() },
        files: Vec::new(),
        signals: Vec::new(),
        layout: Default::default(),
        unread_handlers: 0,
        mpi_events: None,
        timers: Default::default(),
    }
}

/// A page that compresses well and differs by `tag` and by address.
pub fn page(tag: u8, addr: u64) -> Vec<u8> {
    let mut p = vec![tag; PAGE];
    p[..8].copy_from_slice(&addr.to_le_bytes());
    p[100] = tag.wrapping_mul(7);
    p
}

/// The pages list for `write_snapshot`: every page of `current` as Data, except those
/// in `unchanged`, which go as `Unchanged`.
pub fn sources<'a>(current: &'a BTreeMap<u64, Vec<u8>>, unchanged: &[u64]) -> Vec<(u64, PageSource<'a>)> {
    current
        .iter()
        .map(|(&addr, bytes)| {
            let source =
                if unchanged.contains(&addr) { PageSource::Unchanged(1) } else { PageSource::Data(bytes) };
            (addr, source)
        })
        .collect()
}

/// Reads the whole of mapping `m` from `snap`, once in one call and once in odd-sized
/// pieces that straddle pages, and checks that both agree.
pub fn read_mapping(snap: &Snapshot, m: &Mapping) -> sdt_store::Result<Vec<u8>> {
    let mut whole = vec![0xaa; m.len() as usize];
    snap.read(m.start, &mut whole)?;
    let mut pieces = vec![0x55; m.len() as usize];
    for (i, chunk) in pieces.chunks_mut(1000).enumerate() {
        snap.read(m.start + i as u64 * 1000, chunk)?;
    }
    assert!(whole == pieces, "{}: whole and piecewise reads differ", snap.name());
    Ok(whole)
}

/// What mapping `m` should read as: the stored pages of `pages`, zero elsewhere.
pub fn expected_anon(m: &Mapping, pages: &BTreeMap<u64, Vec<u8>>) -> Vec<u8> {
    let mut out = vec![0; m.len() as usize];
    for (&addr, bytes) in pages.range(m.start..m.end) {
        let at = (addr - m.start) as usize;
        out[at..at + PAGE].copy_from_slice(bytes);
    }
    out
}

/// `bytes` with 8 bytes changed, at an offset that depends on `k`: a page stored as a
/// small patch on its previous version.
pub fn tweak(bytes: &[u8], k: u64) -> Vec<u8> {
    let mut p = bytes.to_vec();
    let at = (k as usize * 8 * 61) % PAGE;
    for b in &mut p[at..at + 8] {
        *b ^= 0x5a;
    }
    p
}

/// A page of pseudo-random bytes (xorshift from `seed`): incompressible.
pub fn random_page(seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut p = vec![0; PAGE];
    for word in p.chunks_mut(8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        word.copy_from_slice(&x.to_le_bytes());
    }
    p
}

/// A new run of `store`: its capture side, which records how it ends, and its compactor,
/// which writes snapshots.
pub fn create_run(store: &sdt_store::Store) -> (sdt_store::RunLog, sdt_store::RunWriter) {
    let log = store.create_run(run_info()).unwrap();
    let writer = log.compactor().unwrap();
    (log, writer)
}

/// The page addresses `snap` stores, one by one.
pub fn stored_pages(snap: &Snapshot) -> Vec<u64> {
    snap.stored_ranges().into_iter().flat_map(|r| r.step_by(PAGE)).collect()
}
