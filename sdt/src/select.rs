//! Choosing the run and snapshot a command works on.

use anyhow::{Context, Result};
use sdt_store::{Run, RunId, Snapshot, Store};

use crate::cli::{RunArgs, StoreArgs};

/// Opens the store and the run asked for (default: the latest).
pub fn open_run(store: &StoreArgs, run: &RunArgs) -> Result<(Store, Run)> {
    let s = Store::open(&store.store)?;
    let id = match run.run {
        Some(id) => RunId(id),
        None => s.latest_run()?,
    };
    let r = s.open_run(&id)?;
    Ok((s, r))
}

/// Normalises a snapshot argument: `3` → `S3`, `1.0` → `S1.0`.
pub fn snapshot_name(arg: &str) -> String {
    if arg.chars().next().is_some_and(|c| c.is_ascii_digit()) { format!("S{arg}") } else { arg.to_owned() }
}

/// Opens a snapshot by name, or the run's last complete one. With `--run`, the name is
/// looked up in that run; without, in the latest run and then in the rest of its
/// refinement tree (so `S3` and `S3.1` both work after a refinement). Returns the run
/// that holds it.
pub fn open_snapshot(store: &StoreArgs, run: &RunArgs, name: Option<&str>) -> Result<(Run, Snapshot)> {
    let (s, base) = open_run(store, run)?;
    let Some(name) = name.map(snapshot_name) else {
        let last = base
            .snapshots()?
            .iter()
            .rev()
            .find(|s| s.complete)
            .map(|s| s.name.clone())
            .with_context(|| format!("run {} has no snapshots", base.id()))?;
        let snap = base.open_snapshot(&last)?;
        return Ok((base, snap));
    };
    if run.run.is_some() {
        let snap = base.open_snapshot(&name)?;
        return Ok((base, snap));
    }
    Ok(s.find_snapshot(base.id(), &name)?)
}
