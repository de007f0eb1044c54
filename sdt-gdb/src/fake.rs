//! A snapshot in memory for unit tests: two threads, four mappings. (gdb opening cores of
//! real programs is tested by the CLI's integration tests.)

use std::collections::{BTreeSet, HashMap};

use sdt_store::{
    BeyondOwner, CaptureStats, Content, Credentials, CredentialsRefused, FileRef, Mapping, OwnerRights,
    Perms, ProcessInfo, Reopen, SnapshotMeta, SnapshotSource, SnapshotTime, ThreadRunState, ThreadState,
    Trigger,
};

/// Metadata plus the bytes of memory that are not zero.
pub struct FakeSource {
    pub meta: SnapshotMeta,
    pub memory: HashMap<u64, u8>,
    /// The pages the store holds.
    pub stored: BTreeSet<u64>,
    /// This file changed: checking it, or reading a page it provides, fails with
    /// `FileChanged`.
    pub changed_file: Option<String>,
    /// Reading this page fails with `Corrupt`.
    pub corrupt_page: Option<u64>,
}

impl SnapshotSource for FakeSource {
    fn meta(&self) -> &SnapshotMeta {
        &self.meta
    }

    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), sdt_store::Error> {
        for (at, byte) in (addr..).zip(buf.iter_mut()) {
            let snapshot = self.meta.name.clone();
            if self.corrupt_page == Some(at - at % 4096) {
                return Err(sdt_store::Error::Corrupt { snapshot, detail: "block 0: checksum".into() });
            }
            let m = self.meta.mappings.iter().find(|m| m.contains(at));
            match m.map(|m| &m.content) {
                None => return Err(sdt_store::Error::Unmapped { addr: at, snapshot }),
                Some(Content::Unreadable) => {
                    return Err(sdt_store::Error::Unreadable { addr: at, snapshot });
                }
                Some(Content::File(f)) if !self.stored.contains(&(at - at % 4096)) => {
                    self.check_file(f)?;
                    *byte = self.memory.get(&at).copied().unwrap_or(0);
                }
                Some(_) => *byte = self.memory.get(&at).copied().unwrap_or(0),
            }
        }
        Ok(())
    }

    fn stored_ranges(&self) -> Vec<std::ops::Range<u64>> {
        self.stored.iter().fold(Vec::new(), |mut ranges: Vec<std::ops::Range<u64>>, &p| {
            match ranges.last_mut() {
                Some(r) if r.end == p => r.end += 4096,
                _ => ranges.push(p..p + 4096),
            }
            ranges
        })
    }

    /// `/dev/null` for every file but the changed one: the files are not on this machine.
    fn open_file(&self, f: &FileRef) -> Result<std::fs::File, sdt_store::Error> {
        if self.changed_file.as_ref() == Some(&f.path) {
            return Err(sdt_store::Error::FileChanged {
                path: f.path.clone(),
                snapshot: self.meta.name.clone(),
                detail: "size 1, expected 2".into(),
            });
        }
        Ok(std::fs::File::open("/dev/null").unwrap())
    }

    /// Every path passes: a core names files, it opens none again.
    fn check_reopen(&self, _: &Reopen) -> Result<(), sdt_store::Error> {
        Ok(())
    }

    /// Those recorded, as from a store root owns.
    fn credentials_of(&self, tid: i32) -> Result<Credentials, CredentialsRefused> {
        OwnerRights::default().credentials_of(&self.meta.process, tid, BeyondOwner::Refuse)
    }
}

/// The pages of `m`, for [`FakeSource::stored`].
pub fn pages(m: &Mapping) -> impl Iterator<Item = u64> {
    (m.start..m.end).step_by(4096)
}

pub const EXE: &str = "/usr/bin/prog";
pub const LIBC: &str = "/usr/lib/x86_64-linux-gnu/libc.so.6";

fn perms(spec: &str) -> Perms {
    let b = spec.as_bytes();
    Perms { read: b[0] == b'r', write: b[1] == b'w', exec: b[2] == b'x', shared: b[3] == b's' }
}

fn mapping(
    start: u64,
    end: u64,
    spec: &str,
    offset: u64,
    inode: u64,
    path: &str,
    content: Content,
) -> Mapping {
    Mapping { start, end, perms: perms(spec), offset, dev: "08:01".into(), inode, path: path.into(), content }
}

/// A thread whose registers are recognisable: byte `i` of gpregs is `i ^ tid`.
pub fn thread(tid: i32, xstate: Vec<u8>) -> ThreadState {
    ThreadState {
        tid,
        name: format!("worker-{tid}"),
        state: ThreadRunState::Running,
        gpregs: (0..216).map(|i| i as u8 ^ tid as u8).collect(),
        fpregs: (0..512).map(|i| (i * 3) as u8 ^ tid as u8).collect(),
        xstate,
        sigmask: 0x1_0000_0000 | tid as u64,
        rseq: None,
        robust_list: None,
        altstack: None,
    }
}

/// An XSAVE area of `len` bytes with `xcr0` in the software-reserved bytes and
/// `xstate_bv` in the header; other bytes are `i % 251`.
pub fn xsave(len: usize, xcr0: u64, xstate_bv: u64) -> Vec<u8> {
    let mut x: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
    x[464..472].copy_from_slice(&xcr0.to_le_bytes());
    x[512..520].copy_from_slice(&xstate_bv.to_le_bytes());
    x
}

/// Breakpoint snapshot of pid 1000: thread 1001 hit it, thread 1002 did not.
///
/// Mappings: the executable's text (read from the file), libc's data (captured whole,
/// but file-backed), the heap, and a guard page without contents. The store holds every
/// page of the two captured ones.
pub fn sample() -> FakeSource {
    let exe = FileRef { path: EXE.into(), dev: 0x801, inode: 42, size: 0x3000, mtime_ns: 7 };
    let meta = SnapshotMeta {
        name: "S1".into(),
        seq: 1,
        trigger: Trigger::Breakpoint {
            level: 1,
            class: 2,
            id: 3,
            multiple_mark: 0,
            attrs: String::new(),
            hit: 1,
            tid: 1001,
        },
        time: SnapshotTime { wall_ns: 0, since_start_ns: 0 },
        process: ProcessInfo {
            pid: 1000,
            ppid: 999,
            pgrp: 998,
            sid: 997,
            uid: 1234,
            gid: 5678,
            comm: "prog".into(),
            exe: EXE.into(),
            cmdline: vec![EXE.into(), "--size".into(), "3".into()],
            cwd: "/tmp".into(),
            ..ProcessInfo::default()
        },
        threads: vec![thread(1001, xsave(11008, 0x602e7, 0x602e3)), thread(1002, xsave(2696, 0x2ff, 0x3))],
        mappings: vec![
            mapping(0x40_0000, 0x40_2000, "r-xp", 0x1000, 42, EXE, Content::File(exe)),
            mapping(0x7f00_0000, 0x7f00_1000, "rw-p", 0x1d_2000, 77, LIBC, Content::Zero),
            mapping(0x7f10_0000, 0x7f10_3000, "rw-p", 0, 0, "[heap]", Content::Zero),
            mapping(0x7f10_3000, 0x7f10_4000, "---p", 0, 0, "", Content::Unreadable),
        ],
        auxv: (0..48u8).collect(),
        stats: CaptureStats::default(),
        files: Vec::new(),
        signals: Vec::new(),
        layout: Default::default(),
        unread_handlers: 0,
        mpi_events: None,
        timers: Default::default(),
    };
    let mut memory = HashMap::new();
    let mut stored = BTreeSet::new();
    for m in &meta.mappings {
        if m.perms.read {
            for addr in m.start..m.end {
                memory.insert(addr, (addr >> 12) as u8 ^ addr as u8);
            }
        }
        if m.content == Content::Zero {
            stored.extend(pages(m));
        }
    }
    FakeSource { meta, memory, stored, changed_file: None, corrupt_page: None }
}
