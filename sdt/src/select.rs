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

/// Normalises a snapshot argument: `3` → `S3`.
pub fn snapshot_name(arg: &str) -> String {
    if arg.chars().next().is_some_and(|c| c.is_ascii_digit()) { format!("S{arg}") } else { arg.to_owned() }
}

/// Opens a snapshot by name, or the run's last complete one.
pub fn open_snapshot(run: &Run, name: Option<&str>) -> Result<Snapshot> {
    let name = match name {
        Some(name) => snapshot_name(name),
        None => run
            .snapshots()?
            .iter()
            .rev()
            .find(|s| s.complete)
            .map(|s| s.name.clone())
            .with_context(|| format!("run {} has no snapshots", run.id()))?,
    };
    Ok(run.open_snapshot(&name)?)
}
