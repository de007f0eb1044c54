//! `sdt rollback RANK:SEQ`: where a job can be rolled back to before one event of its
//! history (as `sdt events` numbers them): the latest consistent global snapshot that
//! does not contain the event, or, when none was taken, the cut just before it. With
//! `--replay` the job runs again and every rank stops there: at the global snapshot's
//! breakpoint, or at the cut, where each rank takes a snapshot.

use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use sdt_daemon::human::escape;
use sdt_history::causal;

use crate::cli::{ReplayOpt, RollbackOpt};
use crate::cmd_events::{located, site_lines};
use crate::cmd_replay;
use crate::job::{self, Job};
use crate::select;

pub fn rollback(opt: RollbackOpt) -> Result<ExitCode> {
    let (rank, seq) = opt
        .event
        .split_once(':')
        .and_then(|(r, s)| Some((r.parse::<u32>().ok()?, s.parse::<u32>().ok()?)))
        .with_context(|| {
            format!("{:?}: an event is RANK:SEQ, as `sdt events` lists them (2:14)", opt.event)
        })?;
    let store = select::open_store(&opt.store)?;
    let job = Job::open(&store, &opt.run)?;
    let (history, clocks) = job::history_with_clocks(&job)?;
    let Some(event) = history.event(rank, seq) else {
        bail!("job {} has no event {rank}:{seq} (`sdt events` lists them)", escape(&job.id));
    };
    let lines = site_lines(&job, &history);
    let at = located(&lines, rank, event.site).map_or_else(String::new, |l| format!(" at {l}"));
    println!("event {rank}:{seq}: {}{at}", event.kind.name());
    let globals = job.global_snapshots(Some((&history, &clocks)))?;
    let before = globals.iter().rfind(|g| {
        g.verdict.as_ref().is_some_and(|v| v.consistent)
            && g.counts()
                .is_some_and(|counts| counts.get(rank as usize).is_some_and(|&c| c <= u64::from(seq)))
    });
    let Some(g) = before else {
        let cut = causal::cut_before(&clocks, rank, seq).context("the event has no clock")?;
        println!("no consistent global snapshot was taken before it; the cut just before it:");
        for (r, count) in cut.iter().enumerate() {
            println!("  rank {r} after {count} event(s)");
        }
        if !opt.replay {
            println!("`sdt rollback --replay` runs the job again and stops every rank there");
            return Ok(ExitCode::from(1));
        }
        let (replayed, g) = cmd_replay::replay_to_cut(&store, &job, &cut, &opt.launcher)?;
        let members: Vec<String> = g.members.iter().map(|(r, name, _)| format!("{r}:{name}")).collect();
        println!(
            "every rank stopped at the cut: the replay's {} ({}), {}",
            g.name,
            members.join(" "),
            job::verdict_text(g.verdict.as_ref())
        );
        println!("each rank's state there: `sdt gdb --run {} {}`, …", replayed.ranks[0].1.id(), members[0]);
        return Ok(ExitCode::SUCCESS);
    };
    let members: Vec<String> = g.members.iter().map(|(r, name, _)| format!("{r}:{name}")).collect();
    println!("the latest consistent global snapshot before it: {} ({})", g.name, members.join(" "));
    if !opt.replay {
        println!(
            "every rank's state there: `sdt gdb {}`, …; `sdt rollback --replay` runs the job to it again",
            members[0]
        );
        return Ok(ExitCode::SUCCESS);
    }
    cmd_replay::replay(ReplayOpt {
        store: opt.store,
        run: opt.run,
        until: Some(g.name.clone()),
        config: None,
        check: Vec::new(),
        launcher: opt.launcher,
        dry_run: false,
    })
}
