//! A job of the store as the message-history commands see it: its ranks' runs, their
//! message history read back, and its global snapshots (the ranks' snapshots at the same
//! breakpoint arrival) checked against the history.

use std::collections::BTreeMap;

use anyhow::{Context, Result, bail};
use sdt_gdb::arrivals::Arrival;
use sdt_history::clock::{self, Clocks};
use sdt_history::cut::{self, CutVerdict};
use sdt_history::trace::Mark;
use sdt_history::{History, RankHistory};
use sdt_store::{Run, RunId, Store};

use crate::cli::RunArgs;

/// A job's ranks, in rank order.
pub struct Job {
    /// The launcher's job id.
    pub id: String,
    /// How many ranks the job has.
    pub size: u32,
    /// Each rank that has a run, with its run.
    pub ranks: Vec<(u32, Run)>,
}

/// Each rank's snapshot at one arrival: rank → (seq, name, events before it).
type ByRank = BTreeMap<u32, (u32, String, Option<u64>)>;

/// The ranks' snapshots at one breakpoint arrival.
pub struct GlobalSnapshot {
    /// `G1`, `G2`, … in the order the arrivals came on the lowest rank.
    pub name: String,
    /// The arrival.
    pub arrival: Arrival,
    /// Each rank's snapshot: rank, snapshot name, its events before the snapshot.
    pub members: Vec<(u32, String, Option<u64>)>,
    /// The cut checked against the history, when every rank recorded one.
    pub verdict: Option<CutVerdict>,
}

impl GlobalSnapshot {
    /// Each rank's event count at the snapshot, in rank order, if every rank has one.
    pub fn counts(&self) -> Option<Vec<u64>> {
        self.members.iter().map(|m| m.2).collect()
    }
}

impl Job {
    /// The job of `--run` (default: of the latest run); an error when it is not a job's.
    pub fn open(store: &Store, run: &RunArgs) -> Result<Job> {
        let id = match run.run {
            Some(id) => RunId(id),
            None => store.latest_run()?,
        };
        match Job::of(store, id)? {
            Some(job) => Ok(job),
            None => bail!(
                "run {id} is not a rank of an MPI job: run the program as `mpirun -np N sdt run -- ./prog`, \
                 or name a job's run with --run"
            ),
        }
    }

    /// The job run `id` belongs to, if it does.
    pub fn of(store: &Store, id: RunId) -> Result<Option<Job>> {
        let Some(member) = store.job_of(id)? else { return Ok(None) };
        let mut ranks = Vec::new();
        for (rank, rid) in store.job_ranks(&member.id)? {
            ranks.push((rank, store.open_run(&rid)?));
        }
        Ok(Some(Job { id: member.id, size: member.size, ranks }))
    }

    /// Every rank's message history; an error names a rank that has none or whose files
    /// do not read.
    pub fn history(&self) -> Result<History> {
        let mut history = History::default();
        for rank in 0..self.size {
            let Some((_, run)) = self.ranks.iter().find(|(r, _)| *r == rank) else {
                bail!("rank {rank} of job {} has no run in the store: the history is incomplete", self.id);
            };
            history.ranks.push(rank_history(rank, run)?);
        }
        Ok(history)
    }

    /// Every rank's snapshots that recorded where the rank's history was, named `R:SNAP`.
    pub fn marks(&self) -> Result<Vec<Mark>> {
        let mut marks = Vec::new();
        for (rank, run) in &self.ranks {
            for entry in run.snapshots()? {
                let entry = entry?;
                if let Ok((meta, _)) = run.read_meta(entry.seq)
                    && let Some(events) = meta.mpi_events
                {
                    marks.push(Mark {
                        rank: *rank,
                        name: format!("{rank}:{}", entry.name),
                        events,
                        wall_ns: meta.time.wall_ns,
                    });
                }
            }
        }
        Ok(marks)
    }

    /// The job's global snapshots: breakpoint arrivals every rank captured, in the order
    /// of the lowest rank's snapshots, each checked against `history` when given.
    pub fn global_snapshots(&self, checked: Option<(&History, &Clocks)>) -> Result<Vec<GlobalSnapshot>> {
        // Arrival → (rank → (seq, name, events)).
        let mut arrivals: BTreeMap<Arrival, ByRank> = BTreeMap::new();
        for (rank, run) in &self.ranks {
            for a in sdt_gdb::arrivals::arrivals(run)? {
                arrivals.entry(a.arrival).or_default().insert(*rank, (a.seq, a.name, a.mpi_events));
            }
        }
        let mut complete: Vec<(Arrival, ByRank)> = arrivals
            .into_iter()
            .filter(|(_, by_rank)| {
                by_rank.len() == self.size as usize && (0..self.size).all(|r| by_rank.contains_key(&r))
            })
            .collect();
        complete.sort_by_key(|(arrival, by_rank)| (by_rank.values().next().map(|m| m.0), *arrival));
        Ok(complete
            .into_iter()
            .enumerate()
            .map(|(i, (arrival, by_rank))| {
                let members: Vec<(u32, String, Option<u64>)> =
                    by_rank.into_iter().map(|(rank, (_, name, events))| (rank, name, events)).collect();
                let mut g = GlobalSnapshot { name: format!("G{}", i + 1), arrival, members, verdict: None };
                if let (Some((history, clocks)), Some(counts)) = (checked, g.counts()) {
                    g.verdict = Some(cut::check(history, clocks, &counts));
                }
                g
            })
            .collect())
    }
}

/// Reads rank `rank`'s history from its run.
fn rank_history(rank: u32, run: &Run) -> Result<RankHistory> {
    let Some(history) =
        sdt_history::read_run(run).with_context(|| format!("rank {rank} (run {})", run.id()))?
    else {
        bail!(
            "rank {rank} (run {}) recorded no message history: it ran with --no-mpi-history, or never reached MPI_Init",
            run.id()
        );
    };
    if history.rank != rank {
        bail!(
            "run {} is rank {rank} of its job, but its message history says rank {}",
            run.id(),
            history.rank
        );
    }
    Ok(history)
}

/// The history and every event's clock; a history no run could produce is an error.
pub fn history_with_clocks(job: &Job) -> Result<(History, Clocks)> {
    let history = job.history()?;
    let clocks = clock::compute(&history)
        .with_context(|| format!("the message history of job {} is inconsistent", job.id))?;
    Ok((history, clocks))
}

/// What a global snapshot's check found, in a few words: `consistent, 1 message in flight`.
pub fn verdict_text(verdict: Option<&CutVerdict>) -> String {
    let messages = |n: usize| format!("{n} message{}", if n == 1 { "" } else { "s" });
    match verdict {
        None => "not checked: a rank recorded no message history".to_owned(),
        Some(v) if v.consistent => format!("consistent, {} in flight", messages(v.in_flight.len())),
        Some(v) => {
            let mut why = Vec::new();
            if !v.orphans.is_empty() {
                why.push(format!("{} received before it but sent after", messages(v.orphans.len())));
            }
            if !v.split_collectives.is_empty() {
                why.push(format!("{} collective(s) cut in two", v.split_collectives.len()));
            }
            format!("INCONSISTENT: {}", why.join(", "))
        }
    }
}
