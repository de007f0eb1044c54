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

/// Splits a snapshot argument `RUN:SNAP` (`2:S3`, `2:3`) into the run's id and the
/// snapshot; an argument without `RUN:` names no run.
pub fn split_run(arg: &str) -> Result<(Option<u32>, &str)> {
    let Some((run, snap)) = arg.split_once(':') else { return Ok((None, arg)) };
    match run.parse() {
        Ok(id) if !run.starts_with('+') => Ok((Some(id), snap)),
        _ => bail!("{arg:?}: the run before ':' must be a run id (2:S3)"),
    }
}

/// Opens a snapshot by name (`S3`, `3`, `2:S3`), or the run's last complete one. With a
/// run (`--run`, or `RUN:` before the name), the name is looked up in that run; without,
/// in the latest run and then in the rest of its refinement tree (so `S3` and `S3.1` both
/// work after a refinement). Returns the run that holds it.
pub fn open_snapshot(store: &StoreArgs, run: &RunArgs, name: Option<&str>) -> Result<(Run, Snapshot)> {
    let (named_run, name) = match name {
        Some(arg) => split_run(arg).map(|(id, snap)| (id, Some(snap)))?,
        None => (None, None),
    };
    let run = match (run.run, named_run) {
        (Some(a), Some(b)) if a != b => bail!("--run {a} and the snapshot's run {b} differ"),
        (given, named) => &RunArgs { run: named.or(given) },
    };
    let (s, base) = open_run(store, run)?;
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
    if run.run.is_some() {
        let snap = base.open_snapshot(&name)?;
        return Ok((base, snap));
    }
    Ok(s.find_snapshot(base.id(), &name)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshot_arguments_may_name_their_run() {
        assert_eq!(split_run("S3").unwrap(), (None, "S3"));
        assert_eq!(split_run("2:S3").unwrap(), (Some(2), "S3"));
        assert_eq!(split_run("12:1.0").unwrap(), (Some(12), "1.0"));
        assert!(split_run("x:S3").is_err());
        assert!(split_run("+2:S3").is_err());
        assert!(split_run(":S3").is_err());
    }
}
