//! The snapshots a server moves between: those of a run of a store, opened on first
//! visit and the last few kept open, so that going back to one costs nothing.

use sdt_store::{PageSource, RunId, Snapshot, SnapshotMeta, SnapshotSource, Store, Trigger};

/// Where the server is in a run, and where it may go.
pub trait Timeline {
    /// A snapshot of the timeline.
    type Snapshot: SnapshotSource;
    /// The snapshot gdb sees now.
    fn current(&self) -> &Self::Snapshot;
    /// Moves to snapshot `name` (`S3`, or `RUN:S3` for a snapshot of another run of the
    /// tree); on failure stays, and says why.
    fn goto(&mut self, name: &str) -> Result<(), String>;
    /// The snapshots of the current one's run, in order.
    fn list(&self) -> Result<Vec<Entry>, String>;
    /// Stores the current snapshot with `meta` and `pages` (every page with content, in
    /// address order) for its own, as an edit of it (`S3.e1`), and moves there; returns
    /// the new snapshot's name, or says why it could not.
    fn commit(&mut self, meta: SnapshotMeta, pages: &[(u64, Vec<u8>)]) -> Result<String, String>;
}

/// One snapshot of a run, as `monitor list` shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// Its name (`S3`).
    pub name: String,
    /// The thread gdb selects there: the one that reached the breakpoint, or the first.
    pub tid: i32,
    /// What took it.
    pub trigger: Trigger,
    /// When, since the run started.
    pub since_start_ns: u64,
}

impl Entry {
    /// What took it, as `monitor list` says: `breakpoint 1/2/10 hit 3 "attrs"` (the
    /// attributes quoted and escaped), `timer`, or `SIGSEGV` (a signal about to end the
    /// program).
    pub fn trigger_text(&self) -> String {
        match &self.trigger {
            Trigger::Breakpoint { level, class, id, attrs, hit, .. } => {
                format!("breakpoint {level}/{class}/{id} hit {hit} {attrs:?}")
            }
            Trigger::Timer => "timer".to_owned(),
            Trigger::Signal { signo, .. } => sdt_store::signal_name(*signo),
        }
    }
}

/// Snapshots a timeline keeps open for going back to them: each holds its files open and
/// a cache of decoded blocks, and `sdt history` visits every snapshot of a run.
const KEPT_OPEN: usize = 8;

/// The snapshots of a store, starting in run `root`'s tree.
pub struct StoreTimeline {
    store: Store,
    root: RunId,
    /// The snapshots opened last, by the name they were asked for, with their run; the
    /// current one last.
    open: Vec<(String, RunId, Snapshot)>,
}

impl StoreTimeline {
    /// A timeline at snapshot `snap` of run `run` (of `root`'s refinement tree).
    pub fn new(store: Store, root: RunId, run: RunId, snap: Snapshot) -> StoreTimeline {
        StoreTimeline { store, root, open: vec![(snap.name().to_owned(), run, snap)] }
    }

    fn current_run(&self) -> RunId {
        self.open.last().expect("a timeline has a current snapshot").1
    }
}

impl StoreTimeline {
    /// Snapshot `snap` of run `run` (its id, as text), a run of the root's tree: names
    /// repeat across refinements, `RUN:` tells them apart.
    fn open_in_tree(&self, run: &str, snap: &str) -> Result<(sdt_store::Run, Snapshot), String> {
        let id = run.parse().map(RunId).map_err(|_| format!("{run:?}: not a run id (2:S3)"))?;
        let tree = self.store.tree(self.root).map_err(|e| error_chain(&e))?;
        let run = tree
            .into_iter()
            .find(|r| r.id() == id)
            .ok_or_else(|| format!("run {id} is not run {}'s or one of its refinements", self.root))?;
        let snap = run.open_snapshot(snap).map_err(|e| error_chain(&e))?;
        Ok((run, snap))
    }
}

impl Timeline for StoreTimeline {
    type Snapshot = Snapshot;

    fn current(&self) -> &Snapshot {
        &self.open.last().expect("a timeline has a current snapshot").2
    }

    fn goto(&mut self, name: &str) -> Result<(), String> {
        let entry = match self.open.iter().position(|(n, ..)| n == name) {
            Some(i) => self.open.remove(i),
            None => {
                let (run, snap) = match name.split_once(':') {
                    Some((run, snap)) => self.open_in_tree(run, snap)?,
                    None => self.store.find_snapshot(self.root, name).map_err(|e| error_chain(&e))?,
                };
                (name.to_owned(), run.id(), snap)
            }
        };
        self.open.push(entry);
        if self.open.len() > KEPT_OPEN {
            self.open.remove(0);
        }
        Ok(())
    }

    fn list(&self) -> Result<Vec<Entry>, String> {
        let run = self.store.open_run(&self.current_run()).map_err(|e| error_chain(&e))?;
        entries(&run)
    }

    fn commit(&mut self, meta: SnapshotMeta, pages: &[(u64, Vec<u8>)]) -> Result<String, String> {
        let run = self.current_run();
        let pages = pages.iter().map(|(at, data)| (*at, PageSource::Data(data)));
        let name = self.store.commit_edit(run, meta, pages).map_err(|e| error_chain(&e))?;
        self.goto(&name)?;
        Ok(name)
    }
}

/// The complete snapshots of `run`, in order, as `monitor list` shows them.
pub fn entries(run: &sdt_store::Run) -> Result<Vec<Entry>, String> {
    let mut entries = Vec::new();
    for e in run.snapshots().map_err(|e| error_chain(&e))? {
        let e = e.map_err(|e| error_chain(&e))?;
        if !e.complete {
            continue;
        }
        let (meta, _) = run.read_meta(e.seq).map_err(|e| error_chain(&e))?;
        entries.push(Entry { name: e.name, ..Entry::of(&meta) });
    }
    Ok(entries)
}

impl Entry {
    /// The line of `monitor list` for the snapshot `meta` describes.
    pub fn of(meta: &sdt_store::SnapshotMeta) -> Entry {
        Entry {
            name: meta.name.clone(),
            tid: meta.trigger.tid().or(meta.threads.first().map(|t| t.tid)).unwrap_or(0),
            trigger: meta.trigger.clone(),
            since_start_ns: meta.time.since_start_ns,
        }
    }
}

/// `e` and its causes, `: `-separated.
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        text.push_str(&format!(": {c}"));
        cause = c.source();
    }
    text
}
