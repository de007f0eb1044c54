//! Choosing the run and snapshot a command works on.

use anyhow::{Context, Result, bail};
use sdt_store::{Run, RunId, Snapshot, Store};

use crate::cli::{RunArgs, StoreArgs};

/// Opens the store and the run asked for (default: the latest). Warns when users other
/// than the store's owner may read it: snapshots hold the programs' memory.
pub fn open_run(store: &StoreArgs, run: &RunArgs) -> Result<(Store, Run)> {
    let s = open_store(store)?;
    let id = match run.run {
        Some(id) => RunId(id),
        None => s.latest_run()?,
    };
    let r = s.open_run(&id)?;
    Ok((s, r))
}

/// Opens the store, warning when users other than its owner may read it.
pub fn open_store(store: &StoreArgs) -> Result<Store> {
    let s = Store::open(&store.store)?;
    warn_if_exposed(&s);
    Ok(s)
}

/// Warns if users other than `store`'s owner may read it.
pub fn warn_if_exposed(store: &Store) {
    if let Ok(Some(mode)) = store.exposed_mode() {
        log::warn!(
            "the store {} can be read by other users (mode {mode:04o}): its snapshots hold your programs' \
             memory; `chmod 700 {}` makes it private",
            store.root().display(),
            store.root().display()
        );
    }
}

/// Normalises a snapshot argument: `3` → `S3`, `1.0` → `S1.0`.
pub fn snapshot_name(arg: &str) -> String {
    if arg.chars().next().is_some_and(|c| c.is_ascii_digit()) { format!("S{arg}") } else { arg.to_owned() }
}

/// What a snapshot argument names before its `:`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Owner {
    /// `run3:S1`: run 3, whatever the store holds.
    Run(u32),
    /// `2:S1`: rank 2 of the job when the run the command works on (`--run`, else the
    /// latest) belongs to one; otherwise run 2.
    Number(u32),
}

/// Splits a snapshot argument `OWNER:SNAP` (`2:S3`, `2:3`, `run2:S3`) into its owner and
/// the snapshot; an argument without `OWNER:` names none.
pub fn split_owner(arg: &str) -> Result<(Option<Owner>, &str)> {
    let Some((owner, snap)) = arg.split_once(':') else { return Ok((None, arg)) };
    let number = |text: &str| text.parse().ok().filter(|_| !text.starts_with('+'));
    match (owner.strip_prefix("run").map(number), number(owner)) {
        (Some(Some(id)), _) => Ok((Some(Owner::Run(id)), snap)),
        (None, Some(n)) => Ok((Some(Owner::Number(n)), snap)),
        _ => bail!("{arg:?}: before ':' comes a rank or run number (2:S3), or run and its id (run2:S3)"),
    }
}

/// The run `owner` names (see [`Owner`]), and whether it is a rank's (whose name is then
/// looked up in the rest of its refinement tree too).
fn owner_run(store: &Store, run: &RunArgs, owner: Owner) -> Result<(RunId, bool)> {
    let explicit = |id: u32| match run.run {
        Some(given) if given != id => bail!("--run {given} and the snapshot's run {id} differ"),
        _ => Ok((RunId(id), false)),
    };
    match owner {
        Owner::Run(id) => explicit(id),
        Owner::Number(n) => {
            let job = match run.run {
                Some(id) => store.job_of(RunId(id))?,
                None => store.latest_job()?,
            };
            match job {
                Some(job) => Ok((store.rank_run(&job.id, n)?, true)),
                None => explicit(n),
            }
        }
    }
}

/// Opens a snapshot by name (`S3`, `3`, `2:S3`, `run2:S3`), or the run's last complete
/// one. With a run (`--run`, or `runN:` before the name; `N:` outside a job), the name is
/// looked up in that run; with a rank (`N:` where the run worked on belongs to a job),
/// in that rank's run and then in the rest of its refinement tree; with neither, in the
/// latest run and its refinement tree (so `S3` and `S3.1` both work after a
/// refinement), unless the latest run is a job's rank: which rank is then for the user
/// to say. Returns the run that holds it.
pub fn open_snapshot(store: &StoreArgs, run: &RunArgs, name: Option<&str>) -> Result<(Run, Snapshot)> {
    let (owner, name) = match name {
        Some(arg) => split_owner(arg).map(|(owner, snap)| (owner, Some(snap)))?,
        None => (None, None),
    };
    let s = open_store(store)?;
    let (id, exact) = match (owner, run.run) {
        (Some(owner), _) => {
            let (id, rank) = owner_run(&s, run, owner)?;
            (id, !rank)
        }
        (None, Some(id)) => (RunId(id), true),
        (None, None) => {
            if let Some(job) = s.latest_job()? {
                let ranks = s.job_ranks(&job.id)?;
                let (first, last) = (ranks.first().map_or(0, |r| r.0), ranks.last().map_or(0, |r| r.0));
                let name = name.map_or("S0".into(), snapshot_name);
                bail!(
                    "the latest run is a rank of job {}: say which rank's snapshot ({first}:{name} … {last}:{name}), \
                     or --run ID",
                    job.id
                );
            }
            (s.latest_run()?, false)
        }
    };
    let base = s.open_run(&id)?;
    let Some(name) = name.map(snapshot_name) else {
        let mut last = None;
        for entry in base.snapshots()? {
            let entry = entry?;
            if entry.complete {
                last = Some(entry.name);
            }
        }
        let last = last.with_context(|| format!("run {} has no snapshots", base.id()))?;
        let snap = base.open_snapshot(&last)?;
        return Ok((base, snap));
    };
    if exact {
        let snap = base.open_snapshot(&name)?;
        return Ok((base, snap));
    }
    Ok(s.find_snapshot(base.id(), &name)?)
}

/// `G2`: the name of a job's global snapshot.
pub fn is_global_name(name: &str) -> bool {
    name.strip_prefix('G').is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshot_arguments_may_name_their_run_or_rank() {
        assert_eq!(split_owner("S3").unwrap(), (None, "S3"));
        assert_eq!(split_owner("2:S3").unwrap(), (Some(Owner::Number(2)), "S3"));
        assert_eq!(split_owner("12:1.0").unwrap(), (Some(Owner::Number(12)), "1.0"));
        assert_eq!(split_owner("run12:S1").unwrap(), (Some(Owner::Run(12)), "S1"));
        for bad in ["x:S3", "+2:S3", ":S3", "run:S3", "run+2:S3", "run-1:S3", "rank2:S3"] {
            assert!(split_owner(bad).is_err(), "{bad}");
        }
    }
}
