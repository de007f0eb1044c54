//! Changing a written store the way someone handing it over could: bytes of a
//! snapshot's metadata or index changed and the checksums fixed up (so that the checks
//! past the checksums are what stands), bytes changed without fixing them, files cut
//! short or replaced by FIFOs and links, `run.json` changed.
//!
//! The layouts are those `sdt-store/src/format.rs` (compacted files) and
//! `sdt-store/src/raw.rs` (raw files) document.

use std::path::{Path, PathBuf};

use sdt_store::SnapshotMeta;
use xxhash_rust::xxh3::xxh3_64;

use super::resolve::{self, Files};
use super::spec::*;

/// Compacted files: footer length, and the zstd level used again.
const FOOTER_LEN: usize = 64;
/// Raw files: the header page, and where its commit lies.
const HEADER_PAGE: usize = 4096;
const COMMIT_AT: usize = 4032;
/// Most bytes a frame is decompressed to here.
const MAX_FRAME: usize = 16 << 20;

/// Makes the edits `case` describes to the run in `run_dir`.
pub fn edit(case: &Case, run_dir: &Path, files: &Files) {
    for e in case.edits.iter().take(MAX_EDITS) {
        let snapshots = snapshot_files(run_dir);
        if let EditKind::RunInfo(patches) = &e.what {
            let path = run_dir.join("run.json");
            if let Ok(mut bytes) = std::fs::read(&path) {
                apply(&mut bytes, patches);
                std::fs::write(&path, bytes).unwrap();
            }
            continue;
        }
        if let EditKind::KeptFile { mapping, what } = e.what {
            plant_kept(run_dir, e.snapshot, mapping, what, files);
            continue;
        }
        let Some(path) = snapshots.get(usize::from(e.snapshot) % snapshots.len().max(1)) else { continue };
        let Ok(bytes) = std::fs::read(path) else { continue };
        let raw = path.extension().is_some_and(|x| x == "raw");
        let edited = match &e.what {
            EditKind::MetaBytes(patches) => reseal(&bytes, raw, |_| {}, |meta| apply(meta, patches)),
            EditKind::IndexBytes(patches) => reseal(&bytes, raw, |index| apply(index, patches), |_| {}),
            EditKind::Mappings(specs) => reseal(
                &bytes,
                raw,
                |_| {},
                |json| edit_meta(json, |meta| meta.mappings = resolve::mappings(specs, case.base, files)),
            ),
            EditKind::Names { seq, name } => reseal(
                &bytes,
                raw,
                |_| {},
                |json| {
                    edit_meta(json, |meta| {
                        meta.seq = seq.unwrap_or(meta.seq);
                        meta.name = resolve::name(name);
                    })
                },
            ),
            EditKind::FileBytes(patches) => {
                let mut bytes = bytes;
                apply(&mut bytes, patches);
                Some(bytes)
            }
            EditKind::Truncate(len) => Some(bytes[..bytes.len().min(*len as usize)].to_vec()),
            EditKind::Fifo => {
                std::fs::remove_file(path).unwrap();
                nix::unistd::mkfifo(path, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
                None
            }
            EditKind::Symlink { to_outside } => {
                let target = match (to_outside, snapshots.iter().find(|p| *p != path)) {
                    (false, Some(other)) => other.clone(),
                    _ => PathBuf::from("/etc/passwd"),
                };
                std::fs::remove_file(path).unwrap();
                std::os::unix::fs::symlink(target, path).unwrap();
                None
            }
            EditKind::RunInfo(_) | EditKind::KeptFile { .. } => unreachable!("handled above"),
        };
        if let Some(bytes) = edited {
            std::fs::write(path, bytes).unwrap();
        }
    }
}

/// Plants `what` in `run_dir/files/` under the kept name of the file the `mapping`th
/// file mapping of snapshot `seq` refers to, if the store reads that metadata.
fn plant_kept(run_dir: &Path, seq: u8, mapping: u8, what: Planted, files: &Files) {
    let Some(id) = run_dir.file_name().and_then(|n| n.to_str()?.parse().ok()) else { return };
    let Some(root) = run_dir.parent().and_then(Path::parent) else { return };
    let meta = sdt_store::Store::open(root)
        .and_then(|store| store.open_run(&sdt_store::RunId(id))?.read_meta(u32::from(seq)));
    let Ok((meta, _)) = meta else { return };
    let refs: Vec<&sdt_store::FileRef> = meta
        .mappings
        .iter()
        .filter_map(|m| match &m.content {
            sdt_store::Content::File(f) => Some(f),
            _ => None,
        })
        .collect();
    let Some(f) = refs.get(usize::from(mapping) % refs.len().max(1)) else { return };
    let name = sdt_store::kept_name(f);
    let case_file = |i: u8| files.paths.get(usize::from(i) % files.paths.len().max(1)).cloned();
    let copy_to = |dir: &Path, i: u8, recorded_mtime: bool| {
        let Some(from) = case_file(i) else { return };
        let to = dir.join(&name);
        if std::fs::copy(&from, &to).is_ok() && recorded_mtime {
            let mtime = std::time::UNIX_EPOCH + std::time::Duration::from_nanos(f.mtime_ns.max(0) as u64);
            std::fs::File::options().write(true).open(&to).and_then(|file| file.set_modified(mtime)).ok();
        }
    };
    let kept = run_dir.join("files");
    if let Planted::LinkedFolder { file } = what {
        let outside = run_dir.join("..").join("..").join("..").join("outside-files");
        std::fs::create_dir_all(&outside).unwrap();
        copy_to(&outside, file, true);
        std::fs::remove_dir_all(&kept).ok();
        std::os::unix::fs::symlink(&outside, &kept).ok();
        return;
    }
    std::fs::create_dir_all(&kept).ok();
    let at = kept.join(&name);
    std::fs::remove_file(&at).ok();
    match what {
        Planted::Fifo => {
            nix::unistd::mkfifo(&at, nix::sys::stat::Mode::from_bits_truncate(0o600)).ok();
        }
        Planted::Symlink { to_outside, file } => {
            let target = match (to_outside, case_file(file)) {
                (false, Some(path)) => path,
                _ => PathBuf::from("/etc/passwd"),
            };
            std::os::unix::fs::symlink(target, &at).ok();
        }
        Planted::Copy { file, recorded_mtime } => copy_to(&kept, file, recorded_mtime),
        Planted::LinkedFolder { .. } => unreachable!("handled above"),
    }
}

/// The run's snapshot files (`S<n>.snap`, `S<n>.raw`) that are regular files, in name
/// order.
fn snapshot_files(run_dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(run_dir)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok())
                .map(|e| e.path())
                .filter(|p| {
                    let name = p.file_name().unwrap_or_default().to_string_lossy();
                    name.starts_with('S') && (name.ends_with(".snap") || name.ends_with(".raw"))
                })
                // Never through a link an edit planted, nor into a FIFO.
                .filter(|p| std::fs::symlink_metadata(p).is_ok_and(|m| m.is_file()))
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

/// Writes each patch's bytes (1, 2, 4 or 8 of its value, little-endian) at its offset
/// modulo the length.
fn apply(bytes: &mut [u8], patches: &[Patch]) {
    if bytes.is_empty() {
        return;
    }
    for p in patches.iter().take(8) {
        let width = [1, 2, 4, 8][usize::from(p.width % 4)].min(bytes.len());
        let at = p.at as usize % (bytes.len() - width + 1);
        bytes[at..at + width].copy_from_slice(&p.value.to_le_bytes()[..width]);
    }
}

/// Decodes the metadata JSON, changes it, and encodes it again; leaves JSON that does
/// not decode as it is.
fn edit_meta(json: &mut Vec<u8>, change: impl FnOnce(&mut SnapshotMeta)) {
    if let Ok(mut meta) = serde_json::from_slice::<SnapshotMeta>(json) {
        change(&mut meta);
        *json = serde_json::to_vec(&meta).unwrap();
    }
}

/// The snapshot file `bytes` with its index (a raw file's page spans) and its metadata
/// JSON changed by `index` and `meta`, every checksum and offset fixed up; `None` if the
/// file does not hold what its footer or commit says.
fn reseal(
    bytes: &[u8],
    raw: bool,
    index: impl FnOnce(&mut Vec<u8>),
    meta: impl FnOnce(&mut Vec<u8>),
) -> Option<Vec<u8>> {
    if raw { reseal_raw(bytes, index, meta) } else { reseal_compact(bytes, index, meta) }
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

fn put(b: &mut [u8], at: usize, value: &[u8]) {
    b[at..at + value.len()].copy_from_slice(value);
}

fn reseal_compact(
    bytes: &[u8],
    index: impl FnOnce(&mut Vec<u8>),
    meta: impl FnOnce(&mut Vec<u8>),
) -> Option<Vec<u8>> {
    let footer = bytes.get(bytes.len().checked_sub(FOOTER_LEN)?..)?;
    let index_offset = usize::try_from(u64_at(footer, 16)).ok()?;
    let index_len = usize::try_from(u64_at(footer, 24)).ok()?;
    let meta_offset = usize::try_from(u64_at(footer, 40)).ok()?;
    let meta_len = u32_at(footer, 48) as usize;
    let frame = |at: usize, len: usize| -> Option<Vec<u8>> {
        zstd::bulk::decompress(bytes.get(at..at.checked_add(len)?)?, MAX_FRAME).ok()
    };
    let (mut index_bytes, mut meta_bytes) = (frame(index_offset, index_len)?, frame(meta_offset, meta_len)?);
    index(&mut index_bytes);
    meta(&mut meta_bytes);
    let index_frame = zstd::bulk::compress(&index_bytes, 1).ok()?;
    let meta_frame = zstd::bulk::compress(&meta_bytes, 1).ok()?;
    let mut out = bytes[..index_offset].to_vec();
    out.extend_from_slice(&index_frame);
    let new_meta_offset = out.len() as u64;
    out.extend_from_slice(&meta_frame);
    let mut f = footer.to_vec();
    put(&mut f, 24, &(index_frame.len() as u64).to_le_bytes());
    put(&mut f, 32, &xxh3_64(&index_frame).to_le_bytes());
    put(&mut f, 40, &new_meta_offset.to_le_bytes());
    put(&mut f, 48, &(meta_frame.len() as u32).to_le_bytes());
    put(&mut f, 52, &(xxh3_64(&meta_frame) as u32).to_le_bytes());
    let sum = xxh3_64(&f[..56]);
    put(&mut f, 56, &sum.to_le_bytes());
    out.extend_from_slice(&f);
    Some(out)
}

fn reseal_raw(
    bytes: &[u8],
    spans: impl FnOnce(&mut Vec<u8>),
    meta: impl FnOnce(&mut Vec<u8>),
) -> Option<Vec<u8>> {
    let commit = bytes.get(COMMIT_AT..HEADER_PAGE)?;
    let record_offset = usize::try_from(u64_at(commit, 24)).ok()?;
    let record_len = usize::try_from(u64_at(commit, 32)).ok()?;
    let record = bytes.get(record_offset..record_offset.checked_add(record_len)?)?;
    // Two lists of spans, each a u32 count and 16 bytes a span, then the JSON.
    let mut json_at = 0;
    for _ in 0..2 {
        let count = u32::from_le_bytes(record.get(json_at..json_at + 4)?.try_into().ok()?) as usize;
        json_at = json_at.checked_add(4 + count.checked_mul(16)?)?;
    }
    let (mut span_bytes, mut json) = (record.get(..json_at)?.to_vec(), record.get(json_at..)?.to_vec());
    spans(&mut span_bytes);
    meta(&mut json);
    let record = [span_bytes, json].concat();
    let mut out = bytes[..record_offset].to_vec();
    out.extend_from_slice(&record);
    let mut c = commit.to_vec();
    put(&mut c, 32, &(record.len() as u64).to_le_bytes());
    put(&mut c, 40, &xxh3_64(&record).to_le_bytes());
    let sum = xxh3_64(&c[..56]);
    put(&mut c, 56, &sum.to_le_bytes());
    put(&mut out, COMMIT_AT, &c);
    Some(out)
}
