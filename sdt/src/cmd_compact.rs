//! `sdt compact`: diff and compress a run's raw snapshots, which a run leaves when its
//! sdt dies or its disk fills up; and record that a run whose sdt died has ended.

use anyhow::{Context, Result};
use sdt_daemon::human;

use crate::cli::CompactOpt;
use crate::select;

pub fn compact(opt: CompactOpt) -> Result<()> {
    let (store, run) = select::open_run(&opt.store, &opt.run)?;
    let id = run.id();
    let mut writer = store.compactor(id).with_context(|| format!("compacting run {id}"))?;
    let first = writer.next_seq();
    let (mut stored, mut full) = (0, 0);
    while let Some(report) =
        writer.compact().with_context(|| format!("compacting S{} of run {id}", writer.next_seq()))?
    {
        stored += report.file_bytes;
        full += report.full_bytes;
        eprintln!(
            "sdt: compacted {} of run {id}: {}",
            run.info().snapshot_name(writer.next_seq() - 1),
            human::bytes(report.file_bytes)
        );
    }
    let done = writer.next_seq() - first;
    if writer.record_interrupted()? {
        eprintln!(
            "sdt: run {id}: its sdt (pid {}) had died before the program ended; recorded",
            run.info().sdt_pid
        );
    }
    if done == 0 {
        eprintln!("sdt: run {id} has no raw snapshots");
    } else {
        eprintln!(
            "sdt: run {id}: {done} snapshot{} compacted, {} (full {})",
            if done == 1 { "" } else { "s" },
            human::bytes(stored),
            human::bytes(full)
        );
    }
    Ok(())
}
