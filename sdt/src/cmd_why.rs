//! `sdt why RANK:SNAP`: the messages a rank's snapshot depends on, back along the flow of
//! messages to the job's previous global snapshot.

use anyhow::{Context, Result, bail};
use sdt_daemon::human::escape;
use sdt_history::causal;
use sdt_history::trace::Mark;
use serde_json::json;

use crate::cli::WhyOpt;
use crate::cmd_events::{located, site_lines};
use crate::job::{self, Job};
use crate::select;

pub fn why(opt: WhyOpt) -> Result<()> {
    let (run, snap) = select::open_snapshot(&opt.store, &opt.run, Some(&opt.snapshot))?;
    let store = select::open_store(&opt.store)?;
    let Some(job) = Job::of(&store, run.id())? else {
        bail!("{} is not a snapshot of an MPI job's rank", escape(&opt.snapshot));
    };
    let rank =
        run.info().job.as_ref().map(|m| m.rank).context("a refinement's snapshot has no place in the job")?;
    let meta = snap.meta();
    let Some(count) = meta.mpi_events else {
        bail!("{} recorded no message history (its rank ran with --no-mpi-history)", escape(&opt.snapshot));
    };
    let (history, clocks) = job::history_with_clocks(&job)?;
    // The previous global snapshot: the last one whose snapshot of this rank came before.
    let globals = job.global_snapshots(None)?;
    let previous = globals
        .iter()
        .rfind(|g| g.members.iter().any(|(r, name, _)| *r == rank && seq_of(&run, name) < Some(meta.seq)));
    let since = previous.and_then(|g| g.counts()).unwrap_or_default();
    let found = causal::depends_on(&history, &clocks, rank, count, &since);
    let lines = site_lines(&job, &history);
    let marks = job.marks()?;
    let site = |rank: u32, seq: u32| history.event(rank, seq).and_then(|e| located(&lines, rank, e.site));
    // The sender's last snapshot taken before the send.
    let before = |rank: u32, seq: u32| -> Option<&Mark> {
        marks.iter().filter(|m| m.rank == rank && m.events <= u64::from(seq)).max_by_key(|m| m.events)
    };
    let name = format!("{rank}:{}", meta.name);
    if opt.json {
        let all: Vec<_> = found
            .iter()
            .map(|m| {
                let recv = m.recv.expect("a message depended on was received");
                json!({
                    "send": [m.send.0, m.send.1], "recv": [recv.0, recv.1], "tag": m.tag, "bytes": m.bytes,
                    "send_site": site(m.send.0, m.send.1), "recv_site": site(recv.0, recv.1),
                    "sender_snapshot": before(m.send.0, m.send.1).map(|s| s.name.clone()),
                })
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&all)?);
        return Ok(());
    }
    let since_text = match previous {
        Some(g) => format!(
            "since {} ({})",
            g.name,
            g.members.iter().map(|(r, n, _)| format!("{r}:{n}")).collect::<Vec<_>>().join(" ")
        ),
        None => "since the job started".to_owned(),
    };
    println!(
        "{} (rank {rank}, after {count} events) depends on {} message(s) {since_text}:",
        escape(&name),
        found.len()
    );
    for m in &found {
        let recv = m.recv.expect("a message depended on was received");
        let at = |place: Option<String>| place.map_or_else(String::new, |l| format!(" at {l}"));
        let after = before(m.send.0, m.send.1)
            .map_or_else(|| ", before its first snapshot".to_owned(), |s| format!(", after {}", s.name));
        println!(
            "  rank {} event {} (send{}{after}) -> rank {} event {} (recv{}): tag {}, {} bytes",
            m.send.0,
            m.send.1,
            at(site(m.send.0, m.send.1)),
            recv.0,
            recv.1,
            at(site(recv.0, recv.1)),
            m.tag.map_or_else(|| "?".to_owned(), |t| t.to_string()),
            m.bytes
        );
    }
    Ok(())
}

/// The position in `run` of its snapshot `name`.
fn seq_of(run: &sdt_store::Run, name: &str) -> Option<u32> {
    run.info().snapshot_seq(name)
}
