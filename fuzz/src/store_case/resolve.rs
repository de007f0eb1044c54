//! Turning the drawn description into the store's own types: texts, paths, file
//! references, mappings, addresses, pages and snapshot metadata. Nothing here is checked:
//! the writer and the readers are the ones under test.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use sdt_store::{
    Capabilities, CaptureStats, Content, Credentials, FileKind, FileRef, Ids, Mapping, MemoryLayout,
    OpenFile, PAGE_SIZE, Perms, ProcessInfo, SeccompMode, SignalAction, SnapshotMeta, SnapshotTime,
    ThreadCredentials, ThreadRunState, ThreadState, Trigger,
};

use super::spec::*;

const PAGE: usize = PAGE_SIZE as usize;
/// Longest text taken from a drawn string.
const MAX_TEXT: usize = 300;

/// The files a case created, by index, as absolute paths.
pub struct Files {
    pub paths: Vec<PathBuf>,
}

impl Files {
    /// Creates the files `specs` describe in `dir`.
    pub fn create(dir: &Path, specs: &[FileSpec]) -> Files {
        let specs = &specs[..specs.len().min(MAX_FILES)];
        let paths: Vec<PathBuf> = (0..specs.len()).map(|i| dir.join(format!("f{i}"))).collect();
        for (i, spec) in specs.iter().enumerate() {
            let path = &paths[i];
            match *spec {
                FileSpec::Regular { len, fill, private } => {
                    let len = usize::from(len) % (MAX_FILE_BYTES + 1);
                    let bytes: Vec<u8> = (0..len).map(|k| fill.wrapping_add((k / PAGE) as u8)).collect();
                    std::fs::write(path, bytes).unwrap();
                    let mode = if private { 0o600 } else { 0o644 };
                    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
                }
                FileSpec::Fifo => {
                    nix::unistd::mkfifo(path, nix::sys::stat::Mode::from_bits_truncate(0o644)).unwrap();
                }
                FileSpec::Symlink { to } => {
                    let target = match to {
                        Some(k) => paths[usize::from(k) % paths.len()].clone(),
                        None => PathBuf::from("/etc/passwd"),
                    };
                    std::os::unix::fs::symlink(target, path).unwrap();
                }
                FileSpec::Missing => {}
                FileSpec::Directory => std::fs::create_dir(path).unwrap(),
            }
        }
        Files { paths }
    }
}

pub fn text(t: &Text) -> String {
    match t {
        Text::Known(k) => KNOWN_TEXTS[usize::from(*k) % KNOWN_TEXTS.len()].to_owned(),
        Text::Any(s) => s.chars().take(MAX_TEXT).collect(),
    }
}

pub fn name(n: &Name) -> String {
    match n {
        Name::Seq(s) => format!("S{s}"),
        Name::New(s) => format!("S{s}.new"),
        Name::Nested(a, b) => format!("S{a}.{b}"),
        Name::Text(t) => text(t),
    }
}

pub fn path(p: &PathSpec, files: &Files) -> String {
    match p {
        PathSpec::File(k) if !files.paths.is_empty() => {
            files.paths[usize::from(*k) % files.paths.len()].to_string_lossy().into_owned()
        }
        PathSpec::File(_) => "/nonexistent".to_owned(),
        PathSpec::Text(t) => text(t),
    }
}

/// The reference a capture would have recorded for `path` now (following links, as
/// `/proc/PID/map_files` does), or an all-zero identity if there is nothing there.
fn identity_of(path: &str) -> FileRef {
    match std::fs::metadata(path) {
        Ok(meta) => FileRef::of(path, &meta),
        Err(_) => FileRef { path: path.to_owned(), dev: 0, inode: 0, size: 0, mtime_ns: 0 },
    }
}

pub fn file_ref(spec: &FileRefSpec, files: &Files) -> FileRef {
    let path = path(&spec.path, files);
    match spec.identity {
        Identity::Exact => identity_of(&path),
        Identity::Off { field, by } => {
            let mut f = identity_of(&path);
            match field % 4 {
                0 => f.dev = f.dev.wrapping_add(by),
                1 => f.inode = f.inode.wrapping_add(by),
                2 => f.size = f.size.wrapping_add(by),
                _ => f.mtime_ns = f.mtime_ns.wrapping_add(by as i64),
            }
            f
        }
        Identity::Any { dev, inode, size, mtime_ns } => FileRef { path, dev, inode, size, mtime_ns },
    }
}

/// The first address mappings are laid out from.
fn base(b: Base) -> u64 {
    match b {
        Base::Low => 0x40_0000,
        Base::Mmap => 0x7f00_0000_0000,
        Base::Top => 0xffff_ffff_fff0_0000,
        Base::Zero => 0,
    }
}

/// The mappings `specs` describe, laid out one after the other from `base`; starts and
/// lengths may be anything the description says (unaligned, overlapping, overflowing).
pub fn mappings(specs: &[MappingSpec], b: Base, files: &Files) -> Vec<Mapping> {
    let mut at = base(b);
    let mut out = Vec::new();
    for spec in specs.iter().take(MAX_MAPPINGS) {
        let start = match spec.start {
            Start::After(gap) => at.wrapping_add(u64::from(gap) * PAGE_SIZE),
            Start::At(addr) => addr,
        };
        let len = match spec.len {
            Len::Pages(n) => u64::from(n.max(1)) * PAGE_SIZE,
            Len::Huge(k) => (1u64 << (20 + u32::from(k) % 32)) * PAGE_SIZE,
            Len::Any(n) => n,
        };
        let end = start.wrapping_add(len);
        at = end;
        let path = path(&spec.path, files);
        let content = match &spec.content {
            ContentSpec::Zero => Content::Zero,
            ContentSpec::Unreadable => Content::Unreadable,
            ContentSpec::File(f) => Content::File(file_ref(f, files)),
            ContentSpec::OwnPath => Content::File(identity_of(&path)),
        };
        out.push(Mapping {
            start,
            end,
            perms: Perms {
                read: spec.perms & 1 != 0,
                write: spec.perms & 2 != 0,
                exec: spec.perms & 4 != 0,
                shared: spec.perms & 8 != 0,
            },
            offset: match spec.offset {
                Offset::Pages(n) => u64::from(n) * PAGE_SIZE,
                Offset::Any(n) => n,
            },
            dev: text(&spec.dev),
            inode: u64::from(spec.inode),
            path,
            content,
        });
    }
    out
}

/// A mapping's length in pages, 0 for a broken one.
fn pages_of(m: &Mapping) -> u64 {
    m.end.saturating_sub(m.start) / PAGE_SIZE
}

pub fn addr(a: &AddrRef, mappings: &[Mapping]) -> u64 {
    match *a {
        AddrRef::In { mapping, offset } if !mappings.is_empty() => {
            let m = &mappings[usize::from(mapping) % mappings.len()];
            let len = m.end.saturating_sub(m.start).max(1);
            m.start.wrapping_add(u64::from(offset) % len)
        }
        AddrRef::In { offset, .. } => u64::from(offset),
        AddrRef::Any(a) => a,
    }
}

/// A page's number (address / 4096).
pub fn page_number(at: &PageAt, mappings: &[Mapping]) -> u64 {
    match *at {
        PageAt::In { mapping, page } if !mappings.is_empty() => {
            let m = &mappings[usize::from(mapping) % mappings.len()];
            m.start / PAGE_SIZE + u64::from(page) % pages_of(m).max(1)
        }
        PageAt::In { page, .. } => u64::from(page),
        PageAt::Any(a) => a / PAGE_SIZE,
    }
}

/// A page's address as handed to the writer: page-aligned unless drawn as any address.
pub fn page_addr(at: &PageAt, mappings: &[Mapping]) -> u64 {
    match *at {
        PageAt::Any(a) => a,
        _ => page_number(at, mappings).wrapping_mul(PAGE_SIZE),
    }
}

fn tid(t: Tid, pid: i32) -> i32 {
    match t {
        Tid::Pid => pid,
        Tid::Plus(n) => pid.wrapping_add(i32::from(n)),
        Tid::Any(t) => t,
    }
}

/// The bytes of page `spec`.
pub fn page(spec: &PageSpec, meta: &SnapshotMeta) -> Vec<u8> {
    let mut p = vec![spec.fill; PAGE];
    for (at, word) in spec.words.iter().take(8) {
        let bytes = match word {
            Word::U8(v) => vec![*v],
            Word::U32(v) => v.to_le_bytes().to_vec(),
            Word::U64(v) => v.to_le_bytes().to_vec(),
            Word::Addr(a) => addr(a, &meta.mappings).to_le_bytes().to_vec(),
            Word::Record { matches, state, attrs, attrs_len } => trap_record(
                meta,
                *matches,
                addr(state, &meta.mappings),
                addr(attrs, &meta.mappings),
                *attrs_len,
            ),
            Word::Tid(k) => {
                let t = meta.threads.get(usize::from(*k) % meta.threads.len().max(1));
                t.map_or(0, |t| t.tid).to_le_bytes().to_vec()
            }
        };
        let at = usize::from(*at) % (PAGE - bytes.len() + 1);
        p[at..at + bytes.len()].copy_from_slice(&bytes);
    }
    p
}

/// A breakpoint's trap record as the library writes it, for the snapshot's breakpoint
/// (`matches`) or another.
fn trap_record(meta: &SnapshotMeta, matches: bool, state: u64, attrs: u64, attrs_len: u64) -> Vec<u8> {
    let (level, class, id) = match (&meta.trigger, matches) {
        (Trigger::Breakpoint { level, class, id, .. }, true) => (*level, *class, *id),
        _ => (1, 2, 3),
    };
    let mut r = Vec::with_capacity(sdt_abi::TRAP_RECORD_SIZE);
    r.extend_from_slice(&sdt_abi::PROTOCOL_VERSION.to_le_bytes());
    r.extend_from_slice(&(sdt_abi::TRAP_RECORD_SIZE as u32).to_le_bytes());
    for v in [level, class, id, 0] {
        r.extend_from_slice(&v.to_le_bytes());
    }
    for v in [1, attrs, attrs_len, 0, state, 0] {
        r.extend_from_slice(&v.to_le_bytes());
    }
    r
}

fn creds(c: &CredsSpec) -> Credentials {
    let ids = |v: [u32; 4]| Ids { real: v[0], effective: v[1], saved: v[2], fs: v[3] };
    Credentials {
        uids: ids(c.uids),
        gids: ids(c.gids),
        groups: c.groups.iter().take(8).copied().collect(),
        caps: Capabilities {
            inheritable: c.caps[0],
            permitted: c.caps[1],
            effective: c.caps[2],
            bounding: c.caps[3],
            ambient: c.caps[4],
        },
        no_new_privs: c.no_new_privs,
        seccomp: match c.seccomp % 3 {
            0 => SeccompMode::Disabled,
            1 => SeccompMode::Strict,
            _ => SeccompMode::Filter,
        },
    }
}

const FILE_KINDS: [FileKind; 8] = [
    FileKind::Regular,
    FileKind::Directory,
    FileKind::CharDevice,
    FileKind::BlockDevice,
    FileKind::Pipe,
    FileKind::Socket,
    FileKind::AnonInode,
    FileKind::Other,
];

/// The metadata of snapshot `spec`, with seq `seq` and name `run_name` unless the
/// description overrides them, over `mappings`.
pub fn meta(
    spec: &SnapSpec,
    seq: u32,
    run_name: String,
    mappings: Vec<Mapping>,
    files: &Files,
) -> SnapshotMeta {
    let p = &spec.process;
    let pid = p.pid.unwrap_or(1000);
    let a = |r: &AddrRef| addr(r, &mappings);
    let main = [ThreadSpec {
        tid: Tid::Pid,
        name: Text::Any("prog".into()),
        exiting: false,
        gpregs: Regs::Set(Vec::new()),
        fpregs_len: None,
        xstate: None,
        sigmask: 0,
        rseq: None,
        robust_list: None,
    }];
    let threads = spec
        .threads
        .as_deref()
        .unwrap_or(&main)
        .iter()
        .take(MAX_THREADS)
        .map(|t| {
            let gpregs = match &t.gpregs {
                Regs::Set(regs) => {
                    let mut g = vec![0; sdt_store::GPREGS_SIZE];
                    for (reg, value) in regs.iter().take(8) {
                        let name = sdt_store::GPREG_NAMES[usize::from(*reg) % 27];
                        sdt_store::set_gpreg(&mut g, name, a(value));
                    }
                    g
                }
                Regs::Size(n) => vec![0; usize::from(*n) % 1024],
            };
            let xstate = t.xstate.map_or(Vec::new(), |x| {
                let mut bytes = vec![0; usize::from(x.len) % 4097];
                for (at, word) in [(464, x.xcr0), (512, x.xstate_bv)] {
                    if let Some(dst) = bytes.get_mut(at..at + 8) {
                        dst.copy_from_slice(&word.to_le_bytes());
                    }
                }
                bytes
            });
            ThreadState {
                tid: tid(t.tid, pid),
                name: text(&t.name),
                state: if t.exiting { ThreadRunState::Exiting } else { ThreadRunState::Running },
                gpregs,
                fpregs: vec![0; t.fpregs_len.map_or(sdt_store::FPREGS_SIZE, |n| usize::from(n) % 1024)],
                xstate,
                sigmask: t.sigmask,
                rseq: t.rseq.map(|(at, len, sig)| sdt_store::Rseq { addr: a(&at), len, sig }),
                robust_list: t.robust_list.map(|(at, len)| sdt_store::RobustList { head: a(&at), len }),
                altstack: None,
            }
        })
        .collect();
    let trigger = match &spec.trigger {
        TriggerSpec::Breakpoint { level, class, id, multiple_mark, attrs, hit, tid: t } => {
            Trigger::Breakpoint {
                level: *level,
                class: *class,
                id: *id,
                multiple_mark: *multiple_mark,
                attrs: text(attrs),
                hit: *hit,
                tid: tid(*t, pid),
            }
        }
        TriggerSpec::Timer => Trigger::Timer,
        TriggerSpec::Signal { signo, code, addr, tid: t } => {
            Trigger::Signal { signo: *signo, code: *code, addr: *addr, tid: tid(*t, pid) }
        }
    };
    let layout = match &spec.layout {
        LayoutSpec::Unknown => MemoryLayout::default(),
        LayoutSpec::Known(r) => MemoryLayout {
            start_code: a(&r[0]),
            end_code: a(&r[1]),
            start_data: a(&r[2]),
            end_data: a(&r[3]),
            start_brk: a(&r[4]),
            brk: a(&r[5]),
            start_stack: a(&r[6]),
            arg_start: a(&r[7]),
            arg_end: a(&r[8]),
            env_start: a(&r[9]),
            env_end: a(&r[10]),
        },
    };
    let files_open = spec
        .fds
        .iter()
        .take(MAX_FDS)
        .map(|f| OpenFile {
            fd: f.fd,
            target: path(&f.target, files),
            kind: FILE_KINDS[usize::from(f.kind) % FILE_KINDS.len()],
            flags: f.flags,
            pos: f.pos,
            file: f.file.as_ref().map(|r| file_ref(r, files)),
            inherited: f.inherited,
            state: None,
        })
        .collect();
    let signals = spec
        .signals
        .iter()
        .take(MAX_SIGNALS)
        .map(|(signo, handler, flags, restorer, mask)| SignalAction {
            signo: *signo,
            handler: a(handler),
            flags: *flags,
            restorer: *restorer,
            mask: *mask,
        })
        .collect();
    let process = ProcessInfo {
        pid,
        ppid: p.ppid,
        pgrp: pid,
        sid: tid(p.sid, pid),
        uid: p.uid,
        gid: p.gid,
        comm: text(&p.comm),
        exe: path(&p.exe, files),
        cmdline: p.cmdline.iter().take(4).map(text).collect(),
        cwd: path(&p.cwd, files),
        creds: p.creds.as_ref().map(creds),
        thread_creds: p
            .thread_creds
            .iter()
            .take(MAX_THREADS)
            .map(|(t, c)| ThreadCredentials { tid: tid(*t, pid), creds: creds(c) })
            .collect(),
        dumpable: p.dumpable,
        limits: Vec::new(),
        umask: p.umask,
        personality: None,
        scheduling: Vec::new(),
        deleted_program: p.deleted_program.as_ref().map(|f| file_ref(f, files)),
    };
    SnapshotMeta {
        name: spec.name.as_ref().map_or(run_name, name),
        seq: spec.seq.unwrap_or(seq),
        trigger,
        time: SnapshotTime { wall_ns: 1_700_000_000_000_000_000, since_start_ns: u64::from(seq) * 1000 },
        process,
        threads,
        mappings,
        auxv: spec.auxv.iter().take(512).copied().collect(),
        stats: CaptureStats { mode: "page-hash".into(), ..CaptureStats::default() },
        files: files_open,
        signals,
        layout,
        unread_handlers: 0,
        mpi_events: None,
        timers: Default::default(),
    }
}
