//! Writing the drawn run through the store's own API, as a capture and its compactor do:
//! `RunLog::spares` and `RunLog::commit` for raw snapshots, `RunWriter::write_snapshot`
//! and `RunWriter::compact` for compacted ones. What breaks the writer's contract must be
//! refused with [`Error::BadInput`], never a panic.

use std::collections::BTreeSet;
use std::path::Path;

use sdt_store::{
    Error, Mapping, PAGE_SIZE, PageSource, PageSpan, Refinement, RunId, RunInfo, RunLog, RunStatus,
    RunWriter, SnapshotMeta, Store,
};

use super::resolve::{self, Files};
use super::spec::*;

const PAGE: usize = PAGE_SIZE as usize;

/// Writes the run `case` describes into the store at `root`; returns its id.
pub fn build(case: &Case, root: &Path, files: &Files) -> RunId {
    let store = Store::open_or_create(root).expect("a new store in an empty directory");
    let parent = case.parent.as_ref().map(|p| Refinement {
        run: RunId(p.run),
        from: resolve::name(&p.from),
        to: p.to.as_ref().map(resolve::name),
        reached: p.reached,
        edit: None,
    });
    let info = RunInfo {
        id: RunId(0),
        command: vec!["./prog".into()],
        cwd: "/".into(),
        started_wall_ns: 0,
        sdt_pid: std::process::id(),
        config: String::new(),
        status: RunStatus::Running,
        parent,
        job: None,
    };
    let mut log = store.create_run(info).expect("a run in a new store");
    let id = log.run().id();
    let mut writer = log.compactor().expect("the compactor of a new run");
    let heap = MappingSpec {
        start: Start::After(0),
        len: Len::Pages(16),
        perms: 3,
        offset: Offset::Pages(0),
        dev: Text::Any("00:00".into()),
        inode: 0,
        path: PathSpec::Text(Text::Any("[heap]".into())),
        content: ContentSpec::Zero,
    };
    let mut mappings: Vec<Mapping> = resolve::mappings(&[heap], case.base, files);
    let mut seq = 0;
    for spec in case.snapshots.iter().take(MAX_SNAPSHOTS) {
        if let Some(specs) = &spec.mappings {
            mappings = resolve::mappings(specs, case.base, files);
        }
        let name = log.run().info().snapshot_name(seq);
        let meta = resolve::meta(spec, seq, name, mappings.clone(), files);
        let written = if spec.how == How::Compact && writer.next_seq() == seq {
            write_compacted(&mut writer, spec, meta)
        } else {
            let committed = commit_raw(&mut log, spec, meta);
            if committed && spec.how == How::RawThenCompact {
                compact_all(&mut writer);
            }
            committed
        };
        if written {
            seq += 1;
        }
    }
    if case.finish {
        log.finish(RunStatus::Exited { code: 0 }).expect("run.json rewritten");
    } else {
        drop(log);
    }
    drop(writer);
    if case.recompact {
        match store.compactor(id) {
            Ok(mut writer) => compact_all(&mut writer),
            // Its snapshots hold what the capture committed, however hostile.
            Err(e) => assert_read_error(&e),
        }
    }
    id
}

/// The pages of a snapshot: `(page number, bytes)` as drawn, or ascending without repeats.
fn pages(spec: &SnapSpec, meta: &SnapshotMeta) -> Vec<(u64, Vec<u8>)> {
    let mut pages: Vec<(u64, Vec<u8>)> = spec
        .pages
        .iter()
        .take(MAX_PAGES)
        .map(|p| (resolve::page_addr(&p.at, &meta.mappings), resolve::page(p, meta)))
        .collect();
    if !spec.verbatim {
        for p in &mut pages {
            p.0 -= p.0 % PAGE_SIZE;
        }
        pages.sort_by_key(|p| p.0);
        pages.dedup_by_key(|p| p.0);
    }
    pages
}

/// The unchanged spans of a snapshot, as page spans: as drawn, or ascending, merged and
/// clear of the pages it copies.
fn unchanged(spec: &SnapSpec, meta: &SnapshotMeta, copied: &[u64]) -> Vec<PageSpan> {
    let drawn = spec
        .unchanged
        .iter()
        .take(MAX_PAGES)
        .map(|s| PageSpan { first: resolve::page_number(&s.at, &meta.mappings), pages: u64::from(s.pages) });
    if spec.verbatim {
        return drawn.collect();
    }
    let copied: BTreeSet<u64> = copied.iter().copied().collect();
    let mut pages = BTreeSet::new();
    for s in drawn {
        // Spans stay small: each page is a set entry.
        let end = s.first.saturating_add(s.pages.min(256));
        pages.extend((s.first..end).filter(|p| !copied.contains(p)));
    }
    spans(pages.into_iter())
}

/// Ascending page numbers as maximal spans.
fn spans(pages: impl Iterator<Item = u64>) -> Vec<PageSpan> {
    let mut out: Vec<PageSpan> = Vec::new();
    for p in pages {
        match out.last_mut() {
            Some(s) if s.end() == p => s.pages += 1,
            _ => out.push(PageSpan { first: p, pages: 1 }),
        }
    }
    out
}

fn write_compacted(writer: &mut RunWriter, spec: &SnapSpec, meta: SnapshotMeta) -> bool {
    let pages = pages(spec, &meta);
    let numbers: Vec<u64> = pages.iter().map(|p| p.0 / PAGE_SIZE).collect();
    let unchanged = unchanged(spec, &meta, &numbers);
    let mut sources: Vec<(u64, PageSource)> =
        pages.iter().map(|(addr, bytes)| (*addr, PageSource::Data(bytes))).collect();
    sources
        .extend(unchanged.iter().map(|s| (s.first.wrapping_mul(PAGE_SIZE), PageSource::Unchanged(s.pages))));
    if !spec.verbatim {
        sources.sort_by_key(|s| s.0);
    }
    match writer.write_snapshot(meta, sources) {
        Ok(report) => {
            assert!(report.pages_stored <= pages.len() as u64, "{report:?}");
            true
        }
        Err(Error::BadInput(_)) => false,
        Err(e) => panic!("write_snapshot: {e:?}"),
    }
}

fn commit_raw(log: &mut RunLog, spec: &SnapSpec, meta: SnapshotMeta) -> bool {
    let pages = pages(spec, &meta);
    let numbers: Vec<u64> = pages.iter().map(|p| p.0 / PAGE_SIZE).collect();
    let unchanged = unchanged(spec, &meta, &numbers);
    let copied = if spec.verbatim {
        numbers.iter().map(|&first| PageSpan { first, pages: 1 }).collect()
    } else {
        spans(numbers.iter().copied())
    };
    let need = pages.len() * PAGE;
    let room = match spec.room {
        Room::Exact => need,
        Room::Short => need.saturating_sub(PAGE),
        Room::More(n) => need + usize::from(n % 16) * PAGE,
    };
    let mut spill = log.spares().make().expect("a spare");
    let buffer_limit = spec.buffer_pages.map_or(usize::MAX, |n| usize::from(n) * PAGE);
    spill.grow(room, buffer_limit).expect("room in a small spare");
    // The pages the room holds (the commit refuses the snapshot when it is short), a
    // window at a time, each written through, where the buffer holds less than the room.
    let fit = &pages[..pages.len().min(spill.capacity() / PAGE)];
    let window = (spill.data().len() / PAGE).max(1);
    for (k, part) in fit.chunks(window).enumerate() {
        for (slot, (_, bytes)) in part.iter().enumerate() {
            spill.data()[slot * PAGE..(slot + 1) * PAGE].copy_from_slice(bytes);
        }
        if spill.past_buffer() > 0 {
            spill.write_through(part.len() * PAGE, k * window * PAGE).expect("a write through");
        }
    }
    match log.commit(spill, &copied, &unchanged, &meta) {
        Ok(_) => true,
        Err(Error::BadInput(_)) => false,
        // A seq drawn to be one already committed.
        Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::AlreadyExists => false,
        Err(e) => panic!("commit: {e:?}"),
    }
}

/// Compacts raw snapshots until there is none to compact, or one cannot be.
fn compact_all(writer: &mut RunWriter) {
    loop {
        match writer.compact() {
            Ok(Some(_)) => {}
            Ok(None) => break,
            Err(Error::BadInput(_)) => break,
            Err(e) => {
                assert_read_error(&e);
                break;
            }
        }
    }
}

/// Panics unless `e` is an error reading a hostile store may give.
pub fn assert_read_error(e: &Error) {
    match e {
        Error::Corrupt { .. }
        | Error::UnsupportedVersion { .. }
        | Error::Incomplete { .. }
        | Error::NoSuchSnapshot { .. }
        | Error::Unmapped { .. }
        | Error::Unreadable { .. }
        | Error::FileChanged { .. }
        | Error::FileRefused { .. }
        | Error::BadRunInfo { .. }
        | Error::Io { .. } => {}
        e => panic!("not an error of a hostile store: {e:?}"),
    }
}
