//! Encodings benchmark: what the store's compaction keeps of memory that changes the way
//! programs change it, and how fast it compacts and reads it back. No program runs: the
//! pages are made here and handed to the store's writer, as the capture hands them over.
//!
//! - `pde`: an array of doubles that a solver steps on: every element moves a little
//!   each snapshot (a diffusion step plus a small smooth source), so every page changes,
//!   and each double's high bytes stay as they were.
//! - `drift`: doubles scattered at random (particle coordinates), each drifting a little
//!   each snapshot: neighbours share nothing, but each double keeps its high bytes.
//! - `heap`: random bytes; between snapshots 10% of the pages get one word rewritten.
//! - `text`: pages of English-like words; between snapshots 10% of the pages get a word
//!   replaced by one of another length, which shifts the rest of the page.
//!
//! Each case writes SNAPSHOTS snapshots of an MB MiB region, then reads each back whole
//! and checks it against a hash of what was written. Stored % is the files' bytes over the bytes of every
//! snapshot stored whole; compaction MB/s is those bytes over the writer's time (all
//! threads of this machine), then over the CPU time it took (what it costs, however
//! busy the machine); read MB/s reads every snapshot, every page through its chain of
//! patches, likewise.
//!
//! ```sh
//! scripts/bench encodings                          # 256 MiB, 10 snapshots
//! scripts/bench encodings --mb 64 --snapshots 5
//! ```

use std::time::{Duration, Instant};

use sdt_store::{
    CaptureStats, Content, Mapping, PAGE_SIZE, PageSource, Perms, ProcessInfo, RunId, RunInfo, RunStatus,
    SnapshotMeta, SnapshotTime, Store, Trigger,
};

const PAGE: usize = PAGE_SIZE as usize;
const BASE: u64 = 0x7f00_0000_0000;
/// Share of pages (in %) the `heap` and `text` cases change between snapshots.
const DIRTY_PERCENT: usize = 10;

struct Options {
    mb: usize,
    snapshots: u32,
    cases: Vec<String>,
}

fn parse_options() -> Options {
    let mut opts = Options {
        mb: 256,
        snapshots: 10,
        cases: vec!["pde".into(), "drift".into(), "heap".into(), "text".into()],
    };
    let mut args = std::env::args().skip(1).filter(|a| a != "--bench");
    while let Some(flag) = args.next() {
        let value = args.next().unwrap_or_else(|| panic!("{flag} needs a value"));
        let number = |n: &str| -> usize { n.parse().unwrap_or_else(|_| panic!("{flag}: bad number {n}")) };
        match flag.as_str() {
            "--mb" => opts.mb = number(&value).max(1),
            "--snapshots" => opts.snapshots = number(&value).max(1) as u32,
            "--cases" => opts.cases = value.split(',').map(str::to_owned).collect(),
            other => panic!("unknown option {other} (--mb, --snapshots, --cases pde,drift,heap,text)"),
        }
    }
    opts
}

/// A region's contents, changed in place from one snapshot to the next.
trait Workload {
    fn bytes(&self) -> &[u8];
    fn step(&mut self, snapshot: u32);
}

/// xorshift64: the same bytes on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// A 1-D diffusion field of doubles, kept as its bytes.
struct Pde {
    field: Vec<f64>,
    bytes: Vec<u8>,
}

impl Pde {
    fn new(len: usize) -> Pde {
        let field: Vec<f64> =
            (0..len).map(|i| 2.0 + (i as f64 * 1e-3).sin() + 0.1 * (i as f64 * 0.0137).cos()).collect();
        let mut pde = Pde { bytes: vec![0; len * 8], field };
        pde.store();
        pde
    }

    fn store(&mut self) {
        for (out, x) in self.bytes.chunks_exact_mut(8).zip(&self.field) {
            out.copy_from_slice(&x.to_le_bytes());
        }
    }
}

impl Workload for Pde {
    fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    fn step(&mut self, snapshot: u32) {
        let t = f64::from(snapshot);
        let mut left = self.field[0];
        let n = self.field.len();
        for i in 0..n {
            let here = self.field[i];
            let right = if i + 1 < n { self.field[i + 1] } else { here };
            let source = 1e-4 * (i as f64 * 2e-4 + t).sin();
            self.field[i] = here + 0.1 * (left - 2.0 * here + right) + source;
            left = here;
        }
        self.store();
    }
}

/// Doubles of random magnitude, each moving by a millionth of itself per snapshot.
struct Drift {
    pde: Pde,
}

impl Drift {
    fn new(len: usize) -> Drift {
        let mut rng = Rng(0x1234_5678_9abc_def1);
        let field = (0..len).map(|_| (rng.next() >> 11) as f64 / (1u64 << 53) as f64 * 100.0).collect();
        let mut pde = Pde { bytes: vec![0; len * 8], field };
        pde.store();
        Drift { pde }
    }
}

impl Workload for Drift {
    fn bytes(&self) -> &[u8] {
        &self.pde.bytes
    }

    fn step(&mut self, snapshot: u32) {
        let t = f64::from(snapshot);
        for (i, x) in self.pde.field.iter_mut().enumerate() {
            *x *= 1.0 + 1e-6 * (i as f64 + t).sin();
        }
        self.pde.store();
    }
}

/// Random bytes; a tenth of the pages get one word rewritten per snapshot.
struct Heap {
    bytes: Vec<u8>,
    rng: Rng,
}

impl Workload for Heap {
    fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    fn step(&mut self, _: u32) {
        let pages = self.bytes.len() / PAGE;
        for _ in 0..pages * DIRTY_PERCENT / 100 {
            let at = self.rng.below(pages) * PAGE + self.rng.below(PAGE / 8) * 8;
            self.bytes[at..at + 8].copy_from_slice(&self.rng.next().to_le_bytes());
        }
    }
}

impl Heap {
    fn new(len: usize) -> Heap {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let bytes = (0..len / 8).flat_map(|_| rng.next().to_le_bytes()).collect();
        Heap { bytes, rng }
    }
}

/// Words drawn from a small vocabulary, page by page; a tenth of the pages get a word
/// replaced per snapshot.
struct Text {
    bytes: Vec<u8>,
    rng: Rng,
}

const WORDS: &[&str] = &[
    "the",
    "of",
    "and",
    "snapshot",
    "memory",
    "page",
    "a",
    "to",
    "in",
    "program",
    "thread",
    "is",
    "that",
    "for",
    "debugger",
    "it",
    "with",
    "as",
    "was",
    "on",
    "value",
    "compaction",
    "be",
    "at",
    "by",
    "this",
];

impl Text {
    fn new(len: usize) -> Text {
        let mut rng = Rng(0x2545_f491_4f6c_dd1d);
        let mut bytes = Vec::with_capacity(len + 16);
        while bytes.len() < len {
            bytes.extend_from_slice(WORDS[rng.below(WORDS.len())].as_bytes());
            bytes.push(if rng.below(12) == 0 { b'\n' } else { b' ' });
        }
        bytes.truncate(len);
        Text { bytes, rng }
    }
}

impl Workload for Text {
    fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    fn step(&mut self, _: u32) {
        let pages = self.bytes.len() / PAGE;
        for _ in 0..pages * DIRTY_PERCENT / 100 {
            let page = &mut self.bytes[self.rng.below(pages) * PAGE..][..PAGE];
            // A new word at a random place; the rest of the page moves up by its length,
            // the last bytes of the page falling off.
            let word = WORDS[self.rng.below(WORDS.len())].as_bytes();
            let at = self.rng.below(PAGE - word.len() - 1);
            page.copy_within(at..PAGE - word.len() - 1, at + word.len() + 1);
            page[at..at + word.len()].copy_from_slice(word);
            page[at + word.len()] = b' ';
        }
    }
}

/// What one case stored and how fast.
struct Figures {
    full: u64,
    stored: u64,
    pages_stored: u64,
    pages_patched: u64,
    blocks: u64,
    blocks_shuffled: u64,
    blocks_stored: u64,
    write: Duration,
    write_cpu: Duration,
    read: Duration,
    read_cpu: Duration,
    read_bytes: u64,
}

/// CPU time this process has used, all threads, user and system (`/proc/self/stat`, in
/// clock ticks of 10 ms): what compaction costs whatever else runs on the machine.
fn cpu_time() -> Duration {
    let stat = std::fs::read("/proc/self/stat").unwrap();
    let stat = sdt_procfs::Stat::parse(&stat).unwrap();
    // utime and stime.
    let ticks: u64 =
        stat.field(14).unwrap().parse::<u64>().unwrap() + stat.field(15).unwrap().parse::<u64>().unwrap();
    Duration::from_millis(ticks * 10)
}

fn info() -> RunInfo {
    RunInfo {
        id: RunId(0),
        command: vec!["encodings".into()],
        cwd: "/".into(),
        started_wall_ns: 0,
        sdt_pid: std::process::id(),
        config: String::new(),
        status: RunStatus::Running,
        parent: None,
        job: None,
    }
}

fn meta(seq: u32, mapping: &Mapping) -> SnapshotMeta {
    SnapshotMeta {
        name: format!("S{seq}"),
        seq,
        trigger: Trigger::Breakpoint {
            level: 1,
            class: 0,
            id: 1,
            multiple_mark: 0,
            attrs: String::new(),
            hit: u64::from(seq) + 1,
            tid: 1,
        },
        time: SnapshotTime { wall_ns: 0, since_start_ns: 0 },
        process: ProcessInfo { pid: 1, comm: "encodings".into(), ..ProcessInfo::default() },
        threads: Vec::new(),
        mappings: vec![mapping.clone()],
        auxv: Vec::new(),
        stats: CaptureStats { mode: "full-copy".into(), ..CaptureStats::default() },
        files: Vec::new(),
        signals: Vec::new(),
        layout: Default::default(),
        unread_handlers: 0,
        mpi_events: None,
        timers: Default::default(),
    }
}

/// Writes `snapshots` snapshots of `work`, stepping it between them, into a new store
/// under `root`; reads the last back and checks it.
fn measure(work: &mut dyn Workload, snapshots: u32, root: &std::path::Path) -> Figures {
    let store = Store::open_or_create(root).unwrap();
    let log = store.create_run(info()).unwrap();
    let mut writer = log.compactor().unwrap();
    let len = work.bytes().len() as u64;
    let mapping = Mapping {
        start: BASE,
        end: BASE + len,
        perms: Perms { read: true, write: true, exec: false, shared: false },
        offset: 0,
        dev: "00:00".into(),
        inode: 0,
        path: String::new(),
        content: Content::Zero,
    };
    let mut f = Figures {
        full: 0,
        stored: 0,
        pages_stored: 0,
        pages_patched: 0,
        blocks: 0,
        blocks_shuffled: 0,
        blocks_stored: 0,
        write: Duration::ZERO,
        write_cpu: Duration::ZERO,
        read: Duration::ZERO,
        read_cpu: Duration::ZERO,
        read_bytes: len * u64::from(snapshots),
    };
    // What each snapshot held, to check what reads back.
    let mut hashes = Vec::new();
    for seq in 0..snapshots {
        if seq > 0 {
            work.step(seq);
        }
        hashes.push(hash(work.bytes()));
        let pages = work.bytes().chunks_exact(PAGE).enumerate();
        let pages = pages.map(|(i, page)| (BASE + (i * PAGE) as u64, PageSource::Data(page)));
        let (started, cpu) = (Instant::now(), cpu_time());
        let r = writer.write_snapshot(meta(seq, &mapping), pages).unwrap();
        f.write += started.elapsed();
        f.write_cpu += cpu_time() - cpu;
        f.full += r.full_bytes;
        f.stored += r.file_bytes;
        f.pages_stored += r.pages_stored;
        f.pages_patched += r.pages_patched;
        f.blocks += r.blocks;
        f.blocks_shuffled += r.blocks_shuffled;
        f.blocks_stored += r.blocks_stored;
    }
    let run = store.open_run(&writer.id()).unwrap();
    let mut back = vec![0; len as usize];
    for (seq, written) in hashes.iter().enumerate() {
        let snap = run.open_snapshot_seq(seq as u32).unwrap();
        let (started, cpu) = (Instant::now(), cpu_time());
        snap.read(BASE, &mut back).unwrap();
        f.read += started.elapsed();
        f.read_cpu += cpu_time() - cpu;
        assert!(hash(&back) == *written, "S{seq} reads back other bytes than were written");
    }
    f
}

fn hash(bytes: &[u8]) -> u64 {
    let mut h = std::hash::DefaultHasher::new();
    std::hash::Hasher::write(&mut h, bytes);
    std::hash::Hasher::finish(&h)
}

fn mb_per_s(bytes: u64, time: Duration) -> f64 {
    bytes as f64 / 1e6 / time.as_secs_f64().max(1e-9)
}

fn main() {
    let opts = parse_options();
    let len = opts.mb * 1024 * 1024;
    // tmpfs where there is one: the figures are the encoder's, not the disk's.
    let shm = std::path::Path::new("/dev/shm");
    println!(
        "## Store encodings: {} MiB region, {} snapshots, {} threads\n",
        opts.mb,
        opts.snapshots,
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    println!(
        "| case | stored % of full | pages stored | of them patches | blocks shuffled / stored as is / all | compaction MB/s | per CPU-s | read MB/s | per CPU-s |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for case in &opts.cases {
        let mut work: Box<dyn Workload> = match case.as_str() {
            "pde" => Box::new(Pde::new(len / 8)),
            "drift" => Box::new(Drift::new(len / 8)),
            "heap" => Box::new(Heap::new(len)),
            "text" => Box::new(Text::new(len)),
            other => panic!("unknown case {other} (pde, drift, heap, text)"),
        };
        let tmp = if shm.is_dir() { tempfile::tempdir_in(shm) } else { tempfile::tempdir() }.unwrap();
        let f = measure(work.as_mut(), opts.snapshots, tmp.path());
        println!(
            "| {case} | {:.2} | {} | {} | {} / {} / {} | {:.0} | {:.0} | {:.0} | {:.0} |",
            100.0 * f.stored as f64 / f.full as f64,
            f.pages_stored,
            f.pages_patched,
            f.blocks_shuffled,
            f.blocks_stored,
            f.blocks,
            mb_per_s(f.full, f.write),
            mb_per_s(f.full, f.write_cpu),
            mb_per_s(f.read_bytes, f.read),
            mb_per_s(f.read_bytes, f.read_cpu),
        );
    }
}
