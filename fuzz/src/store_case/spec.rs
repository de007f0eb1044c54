//! What a fuzzed store holds, as `arbitrary` draws it: a run's snapshots (raw or
//! compacted), their metadata with hostile names, paths, sizes and register sets, the
//! files their mappings name, and the edits made to the files once written. Each field
//! is small: a case builds in a few milliseconds.
//!
//! Where the input runs out, `arbitrary` takes the first variant of an enum, `None` and
//! empty lists: those stand for a snapshot an export takes (a running main thread, a
//! known memory layout, a mapping), so that short inputs reach the exporters too.

use arbitrary::Arbitrary;

/// Most snapshots in a run.
pub const MAX_SNAPSHOTS: usize = 6;
/// Most mappings, pages, threads, descriptors and signals a snapshot lists.
pub const MAX_MAPPINGS: usize = 8;
pub const MAX_PAGES: usize = 24;
pub const MAX_THREADS: usize = 4;
pub const MAX_FDS: usize = 4;
pub const MAX_SIGNALS: usize = 4;
/// Most files the case creates for mappings to name.
pub const MAX_FILES: usize = 6;
/// Most edits made once the store is written.
pub const MAX_EDITS: usize = 4;
/// Most bytes a file the case creates holds (3 pages and a bit).
pub const MAX_FILE_BYTES: usize = 3 * 4096 + 100;

/// A whole case: one run of a store.
#[derive(Arbitrary, Debug, Clone)]
pub struct Case {
    /// The run is a refinement of another, with these names.
    pub parent: Option<ParentSpec>,
    /// Files created in the case's directory, which mappings and descriptors may name.
    pub files: Vec<FileSpec>,
    /// Where the first mapping starts.
    pub base: Base,
    pub snapshots: Vec<SnapSpec>,
    /// Changes to the written files.
    pub edits: Vec<Edit>,
    /// Record the run as finished.
    pub finish: bool,
    /// Once the capture side let go, compact what is left through `Store::compactor`.
    pub recompact: bool,
}

/// A refinement's `parent`.
#[derive(Arbitrary, Debug, Clone)]
pub struct ParentSpec {
    pub run: u32,
    pub from: Name,
    pub to: Option<Name>,
    pub reached: Option<u32>,
}

/// A snapshot name: one that fits the grammar, or any text.
#[derive(Arbitrary, Debug, Clone)]
pub enum Name {
    Seq(u8),
    New(u8),
    Nested(u8, u8),
    Text(Text),
}

/// Text as a capture could record it, chosen to hurt: traversal, NULs, escape sequences,
/// option-looking names, pseudo-paths, very long strings, or anything.
#[derive(Arbitrary, Debug, Clone)]
pub enum Text {
    Known(u8),
    Any(String),
}

/// The hostile texts [`Text::Known`] picks from.
pub const KNOWN_TEXTS: &[&str] = &[
    "",
    "prog",
    "..",
    "../../../../etc/shadow",
    "/etc/shadow",
    "/etc/../etc/passwd",
    "a\0b",
    "\0",
    "\x1b]0;owned\x07\x1b[2J",
    "\r\x1b[1A",
    "-x",
    "--eval-command=shell id",
    "$(id)",
    "`id`",
    "%s%n%x",
    "[heap]",
    "[stack]",
    "[vdso]",
    "[vvar]",
    "[vsyscall]",
    "[anon:x]",
    "[weird]",
    "/SYSV00000000 (deleted)",
    "/bin/true (deleted)",
    "pipe:[12]",
    "pipe:[x]",
    "socket:[7]",
    "anon_inode:[eventfd]",
    "/dev/pts/0",
    "/dev/tty",
    "/dev/null",
    "/dev/zero",
    "/dev/sdt",
    "/proc/self/mem",
    "/",
    "relative/path",
    "S1",
    "S1.new",
    "\u{202e}txt.exe",
    "é\u{fffd}",
];

/// Where the first mapping starts.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum Base {
    Low,
    Mmap,
    /// Close below the top of the address space: ends overflow.
    Top,
    Zero,
}

/// A file the case creates before writing the store.
#[derive(Arbitrary, Debug, Clone)]
pub enum FileSpec {
    Regular {
        len: u16,
        fill: u8,
        private: bool,
    },
    Fifo,
    /// A symbolic link to another of the case's files (by index), or outside them.
    Symlink {
        to: Option<u8>,
    },
    Missing,
    Directory,
}

/// A path: one of the case's files, or hostile text.
#[derive(Arbitrary, Debug, Clone)]
pub enum PathSpec {
    File(u8),
    Text(Text),
}

/// A `FileRef`: which file, and whether its recorded identity is the file's.
#[derive(Arbitrary, Debug, Clone)]
pub struct FileRefSpec {
    pub path: PathSpec,
    pub identity: Identity,
}

#[derive(Arbitrary, Debug, Clone)]
pub enum Identity {
    /// As `stat` says now (following links).
    Exact,
    /// As `stat` says, one field changed.
    Off {
        field: u8,
        by: u64,
    },
    Any {
        dev: u64,
        inode: u64,
        size: u64,
        mtime_ns: i64,
    },
}

/// One snapshot.
#[derive(Arbitrary, Debug, Clone)]
pub struct SnapSpec {
    pub how: How,
    /// The seq given in the metadata: the next one, or any.
    pub seq: Option<u32>,
    /// The name in the metadata: the run's for its seq, or another.
    pub name: Option<Name>,
    /// The mappings; `None`: the previous snapshot's (for the first, one anonymous
    /// mapping at the base).
    pub mappings: Option<Vec<MappingSpec>>,
    pub pages: Vec<PageSpec>,
    /// Pages handed over as unchanged since the previous snapshot.
    pub unchanged: Vec<SpanSpec>,
    /// Hand pages and spans over in the order drawn, not sorted.
    pub verbatim: bool,
    /// Room in a raw snapshot's spare.
    pub room: Room,
    /// Pages of that room in the spare's buffer, the rest in its file; `None`: all.
    pub buffer_pages: Option<u8>,
    /// The threads; `None`: one, the main thread, running.
    pub threads: Option<Vec<ThreadSpec>>,
    pub trigger: TriggerSpec,
    pub process: ProcessSpec,
    pub fds: Vec<FdSpec>,
    pub signals: Vec<(i32, AddrRef, u64, u64, u64)>,
    pub layout: LayoutSpec,
    pub auxv: Vec<u8>,
}

/// How the snapshot is written.
#[derive(Arbitrary, Debug, Clone, Copy, PartialEq, Eq)]
pub enum How {
    /// `RunWriter::write_snapshot`, when every earlier snapshot is compacted (else raw).
    Compact,
    /// Committed as a raw file by `RunLog::commit`.
    Raw,
    /// Committed raw, then everything raw so far compacted.
    RawThenCompact,
}

/// Room in a spare, against what the snapshot copies.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum Room {
    Exact,
    Short,
    More(u8),
}

/// A mapping.
#[derive(Arbitrary, Debug, Clone)]
pub struct MappingSpec {
    pub start: Start,
    pub len: Len,
    pub perms: u8,
    pub offset: Offset,
    pub dev: Text,
    pub inode: u8,
    pub path: PathSpec,
    pub content: ContentSpec,
}

#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum Start {
    /// After the previous mapping (or the base), this many pages further.
    After(u16),
    At(u64),
}

#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum Len {
    Pages(u8),
    /// 2^(20 + n % 32) pages: terabytes of address space and more.
    Huge(u8),
    Any(u64),
}

#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum Offset {
    Pages(u8),
    Any(u64),
}

#[derive(Arbitrary, Debug, Clone)]
pub enum ContentSpec {
    Zero,
    Unreadable,
    File(FileRefSpec),
    /// The file the mapping's own path names, as it is now.
    OwnPath,
}

/// A page with content: where, and what.
#[derive(Arbitrary, Debug, Clone)]
pub struct PageSpec {
    pub at: PageAt,
    pub fill: u8,
    pub words: Vec<(u16, Word)>,
}

#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum PageAt {
    In { mapping: u8, page: u32 },
    Any(u64),
}

/// Pages unchanged since the previous snapshot.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub struct SpanSpec {
    pub at: PageAt,
    pub pages: u16,
}

/// Bytes written into a page: plain values, addresses of the snapshot's memory, a
/// breakpoint's trap record, a thread's id (where glibc keeps it, or anywhere).
#[derive(Arbitrary, Debug, Clone)]
pub enum Word {
    U8(u8),
    U32(u32),
    U64(u64),
    Addr(AddrRef),
    Record { matches: bool, state: AddrRef, attrs: AddrRef, attrs_len: u64 },
    Tid(u8),
}

/// An address: inside one of the snapshot's mappings, or any.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum AddrRef {
    In { mapping: u8, offset: u32 },
    Any(u64),
}

#[derive(Arbitrary, Debug, Clone)]
pub struct ThreadSpec {
    pub tid: Tid,
    pub name: Text,
    pub exiting: bool,
    pub gpregs: Regs,
    /// `None`: the right size.
    pub fpregs_len: Option<u16>,
    pub xstate: Option<XState>,
    pub sigmask: u64,
    pub rseq: Option<(AddrRef, u32, u32)>,
    pub robust_list: Option<(AddrRef, u64)>,
}

#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum Tid {
    /// The process's pid.
    Pid,
    /// pid + n.
    Plus(u8),
    Any(i32),
}

/// General registers: the right size with some set, or the wrong size.
#[derive(Arbitrary, Debug, Clone)]
pub enum Regs {
    Set(Vec<(u8, AddrRef)>),
    Size(u16),
}

/// An XSAVE area of `len` bytes (at most 4 KiB) with these XCR0 and XSTATE_BV words.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub struct XState {
    pub len: u16,
    pub xcr0: u64,
    pub xstate_bv: u64,
}

#[derive(Arbitrary, Debug, Clone)]
pub enum TriggerSpec {
    Breakpoint { level: i32, class: i32, id: i32, multiple_mark: i32, attrs: Text, hit: u64, tid: Tid },
    Timer,
    Signal { signo: i32, code: i32, addr: u64, tid: Tid },
}

#[derive(Arbitrary, Debug, Clone)]
pub struct ProcessSpec {
    /// `None`: 1000.
    pub pid: Option<i32>,
    pub ppid: i32,
    pub sid: Tid,
    pub uid: u32,
    pub gid: u32,
    pub comm: Text,
    pub exe: PathSpec,
    pub cmdline: Vec<Text>,
    pub cwd: PathSpec,
    pub creds: Option<CredsSpec>,
    pub thread_creds: Vec<(Tid, CredsSpec)>,
    pub dumpable: Option<bool>,
    pub umask: Option<u32>,
    /// The program recorded as deleted before the capture: a file a reader opens.
    pub deleted_program: Option<FileRefSpec>,
}

#[derive(Arbitrary, Debug, Clone)]
pub struct CredsSpec {
    pub uids: [u32; 4],
    pub gids: [u32; 4],
    pub groups: Vec<u32>,
    pub caps: [u64; 5],
    pub no_new_privs: bool,
    pub seccomp: u8,
}

/// An open descriptor.
#[derive(Arbitrary, Debug, Clone)]
pub struct FdSpec {
    pub fd: i32,
    pub target: PathSpec,
    pub kind: u8,
    pub flags: u32,
    pub pos: u64,
    pub file: Option<FileRefSpec>,
    pub inherited: bool,
}

#[derive(Arbitrary, Debug, Clone)]
pub enum LayoutSpec {
    /// Each field an address of the snapshot's memory, or any.
    Known([AddrRef; 11]),
    Unknown,
}

/// A change to the store once written.
#[derive(Arbitrary, Debug, Clone)]
pub struct Edit {
    /// Which snapshot's file (by position among those written).
    pub snapshot: u8,
    pub what: EditKind,
}

#[derive(Arbitrary, Debug, Clone)]
pub enum EditKind {
    /// Overwrite bytes of the metadata JSON, then fix the checksums up.
    MetaBytes(Vec<Patch>),
    /// Replace the metadata's mappings by these, unchecked, and fix the checksums up.
    Mappings(Vec<MappingSpec>),
    /// Replace the metadata's seq and name, and fix the checksums up.
    Names { seq: Option<u32>, name: Name },
    /// Overwrite bytes of a compacted file's index, or a raw file's page spans, then fix
    /// the checksums up.
    IndexBytes(Vec<Patch>),
    /// Overwrite bytes of the file itself, checksums left as they are.
    FileBytes(Vec<Patch>),
    /// Cut the file short (to at most this many bytes).
    Truncate(u32),
    /// Put a FIFO in the file's place.
    Fifo,
    /// Put a symbolic link in the file's place, to another snapshot's file or outside.
    Symlink { to_outside: bool },
    /// Overwrite bytes of the run's `run.json`.
    RunInfo(Vec<Patch>),
    /// Plant something in the run's `files/` under the name a file one of the snapshot's
    /// mappings refers to is kept under (by position among those mappings).
    KeptFile { mapping: u8, what: Planted },
}

/// What an edit plants as a kept file.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum Planted {
    /// A FIFO.
    Fifo,
    /// A symbolic link, to one of the case's files or outside the store.
    Symlink { to_outside: bool, file: u8 },
    /// A copy of one of the case's files, its mtime the recorded one or not.
    Copy { file: u8, recorded_mtime: bool },
    /// `files/` itself a link to a folder outside holding such a copy.
    LinkedFolder { file: u8 },
}

/// Bytes written at an offset (taken modulo the length edited).
#[derive(Arbitrary, Debug, Clone, Copy)]
pub struct Patch {
    pub at: u32,
    pub value: u64,
    pub width: u8,
}
