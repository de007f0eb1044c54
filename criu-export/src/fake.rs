//! A snapshot in memory for unit tests: a process of four threads caught the ways `sdt run`
//! catches them (at a breakpoint, in a futex wait, in a sleep, exiting), seven mappings and
//! three descriptors. (`criu restore` of real programs is tested in the QEMU guest by the
//! CLI's integration tests.)

use std::cell::RefCell;
use std::collections::HashMap;

use sdt_abi::{PROTOCOL_VERSION, RESULT_DECLINED, STATE_ON, TRAP_RECORD_SIZE};
use sdt_store::{
    Access, BeyondOwner, Capabilities, CaptureStats, Content, Credentials, CredentialsRefused, FileKind,
    FileRef, Ids, Mapping, MemoryLayout, OpenFile, OwnerRights, PAGE_SIZE, Perms, ProcessInfo, Reopen, Rseq,
    SignalAction, SnapshotMeta, SnapshotSource, SnapshotTime, ThreadCredentials, ThreadRunState,
    ThreadScheduling, ThreadState, Trigger, set_gpreg,
};

/// Metadata plus the pages the store holds; pages of file mappings read as [`FILE_BYTE`].
pub struct FakeSource {
    pub meta: SnapshotMeta,
    pub pages: HashMap<u64, Vec<u8>>,
    /// Reading a page of this file fails with `FileChanged`.
    pub changed_file: Option<String>,
    /// Reopening this path is refused (`FileRefused`).
    pub refused_path: Option<String>,
    /// Files changed since the snapshot, each with the path of the copy the run kept.
    pub kept: HashMap<String, String>,
    /// Files mapped shared that no longer exist.
    pub gone: Vec<String>,
    /// The store's owners' rights (default: root's store).
    pub rights: OwnerRights,
    /// Every file checked for reopening: path, kind, access.
    pub reopened: RefCell<Vec<(String, FileKind, Access)>>,
}

/// What every byte of the fake executable reads as.
pub const FILE_BYTE: u8 = 0xaa;
pub const EXE: &str = "/usr/bin/prog";
pub const PID: i32 = 100;
/// The thread at the breakpoint.
pub const BREAKING: i32 = 101;
/// The thread sleeping in `clock_nanosleep`.
pub const SLEEPING: i32 = 102;
/// The thread past its last instruction.
pub const EXITING: i32 = 103;
/// Where each thread's TLS block starts: `fs_base` of thread `tid` is
/// `TLS + (tid - PID) * 0x1000`.
pub const TLS: u64 = 0x7f00_0000_0000;
/// The breakpoint's record, on the breaking thread's stack.
pub const RECORD: u64 = 0x7fff_f002_0f00;
/// The SDT library's state word, in the program's data.
pub const STATE_WORD: u64 = 0x40_1010;
pub const SEQ: u32 = 3;

impl SnapshotSource for FakeSource {
    fn meta(&self) -> &SnapshotMeta {
        &self.meta
    }

    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), sdt_store::Error> {
        for (at, byte) in (addr..).zip(buf.iter_mut()) {
            let snapshot = self.meta.name.clone();
            let page = at - at % PAGE_SIZE;
            let Some(m) = self.meta.mappings.iter().find(|m| m.contains(at)) else {
                return Err(sdt_store::Error::Unmapped { addr: at, snapshot });
            };
            *byte = match (&m.content, self.pages.get(&page)) {
                (Content::Unreadable, _) => return Err(sdt_store::Error::Unreadable { addr: at, snapshot }),
                (_, Some(bytes)) => bytes[(at - page) as usize],
                (Content::File(f), None) if self.changed_file.as_ref() == Some(&f.path) => {
                    return Err(sdt_store::Error::FileChanged {
                        path: f.path.clone(),
                        snapshot,
                        detail: "size 1, expected 2".into(),
                    });
                }
                (Content::File(_), None) => FILE_BYTE,
                (Content::Zero, None) => 0,
            };
        }
        Ok(())
    }

    fn stored_ranges(&self) -> Vec<std::ops::Range<u64>> {
        let mut pages: Vec<u64> = self.pages.keys().copied().collect();
        pages.sort_unstable();
        let mut ranges: Vec<std::ops::Range<u64>> = Vec::new();
        for p in pages {
            match ranges.last_mut() {
                Some(r) if r.end == p => r.end += PAGE_SIZE,
                _ => ranges.push(p..p + PAGE_SIZE),
            }
        }
        ranges
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

    fn file_path(&self, f: &FileRef) -> Result<std::path::PathBuf, sdt_store::Error> {
        self.check_file(f)?;
        Ok(self.kept.get(&f.path).unwrap_or(&f.path).into())
    }

    fn shared_file_gone(&self, f: &FileRef) -> bool {
        self.gone.contains(&f.path)
    }

    /// Every path passes but the refused one.
    fn check_reopen(&self, r: &Reopen) -> Result<(), sdt_store::Error> {
        self.reopened.borrow_mut().push((r.path.to_owned(), r.kind, r.access));
        if self.refused_path.as_deref() == Some(r.path) {
            return Err(sdt_store::Error::FileRefused {
                path: r.path.to_owned(),
                snapshot: self.meta.name.clone(),
                why: "the store belongs to uid 1000, who could not read it (owner 0, mode 600)".into(),
            });
        }
        Ok(())
    }

    fn credentials_of(&self, tid: i32) -> Result<Credentials, CredentialsRefused> {
        self.rights.credentials_of(&self.meta.process, tid, BeyondOwner::Refuse)
    }
}

impl FakeSource {
    /// Writes `bytes` at `addr` into stored pages, storing the pages first if needed.
    pub fn poke(&mut self, addr: u64, bytes: &[u8]) {
        for (at, &b) in (addr..).zip(bytes) {
            let page = at - at % PAGE_SIZE;
            self.pages.entry(page).or_insert_with(|| vec![0; PAGE_SIZE as usize])[(at - page) as usize] = b;
        }
    }
}

fn perms(spec: &str) -> Perms {
    let b = spec.as_bytes();
    Perms { read: b[0] == b'r', write: b[1] == b'w', exec: b[2] == b'x', shared: b[3] == b's' }
}

/// A mapping of `[start, end)` with permissions as maps writes them (`rw-p`), of the file
/// at `path` (a made-up inode) or anonymous.
pub fn mapping(start: u64, end: u64, spec: &str, offset: u64, path: &str, content: Content) -> Mapping {
    let inode = if path.starts_with('/') { 4242 } else { 0 };
    Mapping { start, end, perms: perms(spec), offset, dev: "08:01".into(), inode, path: path.into(), content }
}

fn exe_ref() -> FileRef {
    FileRef { path: EXE.into(), dev: 2049, inode: 4242, size: 0x2000, mtime_ns: 1 }
}

/// A thread with general registers `regs` (by name; the rest zero), its FPU areas
/// recognisable by tid.
fn thread(tid: i32, state: ThreadRunState, regs: &[(&str, u64)]) -> ThreadState {
    let mut gpregs = vec![0u8; 216];
    set_gpreg(&mut gpregs, "cs", 0x33);
    set_gpreg(&mut gpregs, "ss", 0x2b);
    set_gpreg(&mut gpregs, "fs_base", TLS + (tid - PID) as u64 * 0x1000);
    set_gpreg(&mut gpregs, "orig_rax", u64::MAX);
    for &(name, value) in regs {
        set_gpreg(&mut gpregs, name, value);
    }
    ThreadState {
        tid,
        name: format!("worker-{tid}"),
        state,
        gpregs,
        fpregs: (0..512).map(|i| (i * 3) as u8 ^ tid as u8).collect(),
        xstate: Vec::new(),
        sigmask: 1 << (tid - PID),
        rseq: Some(Rseq { addr: TLS + (tid - PID) as u64 * 0x1000 + 0x920, len: 32, sig: 0x5305_3053 }),
        robust_list: None,
        altstack: None,
    }
}

/// The sample snapshot: S3, taken at breakpoint 1/2/3 by thread 101.
pub fn sample() -> FakeSource {
    let mappings = vec![
        mapping(0x40_0000, 0x40_1000, "r-xp", 0, EXE, Content::File(exe_ref())),
        mapping(0x40_1000, 0x40_2000, "rw-p", 0x1000, EXE, Content::File(exe_ref())),
        mapping(0x60_0000, 0x62_1000, "rw-p", 0, "[heap]", Content::Zero),
        mapping(TLS, TLS + 0x10_000, "rw-p", 0, "", Content::Zero),
        mapping(0x7fff_f000_0000, 0x7fff_f002_1000, "rw-p", 0, "[stack]", Content::Zero),
        mapping(0x7fff_f7ff_0000, 0x7fff_f7ff_4000, "r--p", 0, "[vvar]", Content::Unreadable),
        mapping(0x7fff_f7ff_4000, 0x7fff_f7ff_6000, "r-xp", 0, "[vdso]", Content::Zero),
    ];
    let threads = vec![
        thread(BREAKING, ThreadRunState::Running, &[("rip", 0x40_0101), ("rdi", RECORD), ("rax", 0x1234)]),
        // In futex(FUTEX_WAIT): restarted from its `syscall` instruction.
        thread(
            PID,
            ThreadRunState::Running,
            &[("rip", 0x40_0202), ("orig_rax", 202), ("rax", (-512i64) as u64)],
        ),
        // In clock_nanosleep: returns EINTR.
        thread(
            SLEEPING,
            ThreadRunState::Running,
            &[("rip", 0x40_0303), ("orig_rax", 230), ("rax", (-516i64) as u64)],
        ),
        thread(EXITING, ThreadRunState::Exiting, &[("rip", 0x40_0404), ("orig_rax", 60)]),
    ];
    let out = FileRef { path: "/tmp/out.txt".into(), dev: 2049, inode: 77, size: 100, mtime_ns: 2 };
    let file = |fd, target: &str, kind, flags, pos, file| OpenFile {
        fd,
        target: target.into(),
        kind,
        flags,
        pos,
        file,
        inherited: false,
        state: None,
    };
    // User 1000 of group 1000, in two more, with CAP_NET_BIND_SERVICE permitted.
    let user = Credentials {
        groups: vec![24, 1000],
        caps: Capabilities { permitted: 1 << 10, ..Credentials::implied(1000, 1000).caps },
        ..Credentials::implied(1000, 1000)
    };
    let meta = SnapshotMeta {
        name: format!("S{SEQ}"),
        seq: SEQ,
        trigger: Trigger::Breakpoint {
            level: 1,
            class: 2,
            id: 3,
            multiple_mark: 0,
            attrs: "phase=test".into(),
            hit: 1,
            tid: BREAKING,
        },
        time: SnapshotTime { wall_ns: 1_700_000_000_000_000_000, since_start_ns: 1_000_000 },
        process: ProcessInfo {
            pid: PID,
            ppid: 1,
            pgrp: 90,
            sid: 90,
            uid: 1000,
            gid: 1000,
            comm: "prog".into(),
            exe: EXE.into(),
            cmdline: vec![EXE.into(), "--fast".into()],
            cwd: "/home/user".into(),
            creds: Some(user.clone()),
            thread_creds: vec![ThreadCredentials {
                tid: BREAKING,
                creds: Credentials { uids: Ids { effective: 1001, fs: 1001, ..user.uids }, ..user.clone() },
            }],
            dumpable: Some(true),
            limits: Vec::new(),
            umask: Some(0o027),
            personality: None,
            scheduling: vec![ThreadScheduling {
                tid: BREAKING,
                policy: 3,
                priority: 0,
                nice: 7,
                cpus: "0".into(),
            }],
            deleted_program: None,
        },
        threads,
        mappings,
        auxv: [33u64, 0x7fff_f7ff_4000, 6, 4096, 0, 0, 0, 0].iter().flat_map(|v| v.to_le_bytes()).collect(),
        stats: CaptureStats::default(),
        files: vec![
            file(0, "/dev/null", FileKind::CharDevice, 0o100000, 0, None),
            file(1, "/tmp/out.txt", FileKind::Regular, 0o100001, 100, Some(out.clone())),
            file(2, "/tmp/out.txt", FileKind::Regular, 0o100001, 100, Some(out)),
            file(3, EXE, FileKind::Regular, 0o2100000, 0, Some(exe_ref())),
        ],
        signals: vec![SignalAction {
            signo: 33,
            handler: 0x40_0500,
            flags: 0x1c00_0004,
            restorer: 0x40_0600,
            mask: 0,
        }],
        layout: MemoryLayout {
            start_code: 0x40_0000,
            end_code: 0x40_0fff,
            start_data: 0x40_1000,
            end_data: 0x40_1800,
            start_brk: 0x60_0000,
            brk: 0x62_1000,
            start_stack: 0x7fff_f002_0ff0,
            arg_start: 0x7fff_f002_0f80,
            arg_end: 0x7fff_f002_0f90,
            env_start: 0x7fff_f002_0f90,
            env_end: 0x7fff_f002_0ff0,
        },
        unread_handlers: 0,
        mpi_events: None,
        timers: Default::default(),
    };
    let mut source = FakeSource {
        meta,
        pages: HashMap::new(),
        changed_file: None,
        refused_path: None,
        kept: HashMap::new(),
        gone: Vec::new(),
        rights: OwnerRights::default(),
        reopened: RefCell::new(Vec::new()),
    };
    // The program's written data page, the stack page holding the record, a heap page.
    source.poke(0x40_1000, &[1, 2, 3]);
    source.poke(0x60_0000, b"heap");
    source.poke(0x7fff_f7ff_4000, b"\x7fELF");
    source.poke(STATE_WORD, &(STATE_ON + 2).to_le_bytes());
    let mut record = Vec::with_capacity(TRAP_RECORD_SIZE);
    for v in [PROTOCOL_VERSION, TRAP_RECORD_SIZE as u32, 1, 2, 3, 0] {
        record.extend_from_slice(&v.to_le_bytes());
    }
    for v in [1u64, 0x40_0800, 10, 5, STATE_WORD, RESULT_DECLINED as u64] {
        record.extend_from_slice(&v.to_le_bytes());
    }
    source.poke(RECORD, &record);
    // glibc's tid word of every thread.
    for tid in [PID, BREAKING, SLEEPING, EXITING] {
        // glibc's `struct pthread` keeps the thread's id 0x2d0 past the thread pointer.
        source.poke(TLS + (tid - PID) as u64 * 0x1000 + 0x2d0, &tid.to_le_bytes());
    }
    source
}
