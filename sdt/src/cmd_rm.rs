//! `sdt rm`: remove runs from the store, whole refinement trees and whole jobs only.

use std::collections::BTreeSet;
use std::ops::RangeInclusive;

use anyhow::{Context, Result, bail};
use sdt_daemon::human;
use sdt_store::{Run, RunId, RunStatus, Store};

use crate::cli::RmOpt;
use crate::cmd_compact::take_over_from_background;
use crate::cmd_ls::run_line;
use crate::select;

pub fn rm(opt: RmOpt) -> Result<()> {
    let store = select::open_store(&opt.store)?;
    let chosen = chosen_runs(&store, &opt.runs)?;
    check_whole(&store, &chosen)?;
    let (mut removed, mut freed) = (0usize, 0u64);
    for &id in &chosen {
        // A run whose `run.json` cannot be read (its sdt died as it started, say) goes too.
        let run = store.open_run(&id);
        let line = match &run {
            Ok(run) => run_line(run)?,
            Err(e) => format!("run {id}: {e}"),
        };
        if opt.dry_run {
            println!("would remove {}", human::escape(&line));
            continue;
        }
        freed += remove(&store, id, run.ok().as_ref())?;
        eprintln!("sdt: removed {}", human::escape(&line));
        removed += 1;
    }
    if !opt.dry_run && removed > 1 {
        eprintln!("sdt: {removed} runs removed, {} freed", human::bytes(freed));
    }
    Ok(())
}

/// The runs that `ranges` name, in order: a single id must be a run, a range must hold
/// one at least.
fn chosen_runs(store: &Store, ranges: &[RangeInclusive<u32>]) -> Result<BTreeSet<RunId>> {
    let existing = store.run_ids()?;
    let mut chosen = BTreeSet::new();
    let list: Vec<String> = existing.iter().map(RunId::to_string).collect();
    for range in ranges {
        let within: Vec<RunId> = existing.iter().copied().filter(|id| range.contains(&id.0)).collect();
        if within.is_empty() {
            let what = match range.start() == range.end() {
                true => format!("no run {}", range.start()),
                false => format!("no runs in {}-{}", range.start(), range.end()),
            };
            bail!("{what} in {} (runs: {})", store.root().display(), list.join(", "));
        }
        chosen.extend(within);
    }
    Ok(chosen)
}

/// Refuses to leave a refinement without the run it refines, or a job without some of
/// its ranks: each names the runs that must go with it.
fn check_whole(store: &Store, chosen: &BTreeSet<RunId>) -> Result<()> {
    let all: Vec<Run> = store.run_ids()?.iter().filter_map(|id| store.open_run(id).ok()).collect();
    for run in all.iter().filter(|r| !chosen.contains(&r.id())) {
        if let Some(parent) = run.info().parent.as_ref().filter(|p| chosen.contains(&p.run)) {
            bail!(
                "run {} grew from run {}'s {} (a refinement, a resume or an edit): name it too (sdt rm {} {}), \
                 or keep run {}",
                run.id(),
                parent.run,
                parent.from,
                parent.run,
                run.id(),
                parent.run
            );
        }
    }
    for run in all.iter().filter(|r| chosen.contains(&r.id())) {
        let Some(job) = &run.info().job else { continue };
        let ranks: Vec<RunId> = all
            .iter()
            .filter(|r| r.info().job.as_ref().is_some_and(|j| j.id == job.id))
            .map(Run::id)
            .collect();
        if ranks.iter().any(|id| !chosen.contains(id)) {
            let list: Vec<String> = ranks.iter().map(RunId::to_string).collect();
            bail!(
                "run {} is rank {} of job {}, whose ranks are runs {}: name them all (sdt rm {})",
                run.id(),
                job.rank,
                job.id,
                list.join(", "),
                list.join(" ")
            );
        }
    }
    Ok(())
}

/// Removes run `id` (`run`, where it can be read), returning the bytes freed: a run still
/// being captured is refused, the background compactor of one is stopped first, anyone
/// else's `sdt compact` is left to finish.
fn remove(store: &Store, id: RunId, run: Option<&Run>) -> Result<u64> {
    let held = |what: &str| anyhow::anyhow!("run {id} is being {what}: remove it once that has ended");
    match (store.remove_run(id), run) {
        (Err(sdt_store::Error::RunHeld { .. }), Some(run)) if run.info().status == RunStatus::Running => {
            Err(held(&format!("captured by sdt (pid {})", run.info().sdt_pid)))
        }
        (Err(sdt_store::Error::RunHeld { .. }), Some(_)) => {
            take_over_from_background(store, id, "stopping it")?;
            match store.remove_run(id) {
                Err(sdt_store::Error::RunHeld { .. }) => Err(held("compacted by `sdt compact`")),
                other => other.with_context(|| format!("removing run {id}")),
            }
        }
        (Err(sdt_store::Error::RunHeld { .. }), None) => Err(held("written by another sdt process")),
        (other, _) => other.with_context(|| format!("removing run {id}")),
    }
}
