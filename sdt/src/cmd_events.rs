//! `sdt events`: an MPI job's message history, as a table, JSON, or a Perfetto trace.

use std::io::Write;
use std::path::Path;

use anyhow::{Context, Result};
use sdt_daemon::human;
use sdt_history::clock::Clocks;
use sdt_history::sites::source_lines;
use sdt_history::trace;
use sdt_history::{Event, History};
use serde_json::{Value, json};

use crate::cli::EventsOpt;
use crate::job::{self, Job};
use crate::select;

pub fn events(opt: EventsOpt) -> Result<()> {
    let store = select::open_store(&opt.store)?;
    let job = Job::open(&store, &opt.run)?;
    let (history, clocks) = job::history_with_clocks(&job)?;
    if let Some(path) = &opt.perfetto {
        write_perfetto(&job, &history, path)?;
        eprintln!("sdt: wrote {} (open it in ui.perfetto.dev)", path.display());
        return Ok(());
    }
    let lines = site_lines(&job, &history);
    let events = history
        .ranks
        .iter()
        .filter(|rh| opt.rank.is_none_or(|r| r == rh.rank))
        .flat_map(|rh| rh.events.iter());
    let mut out = std::io::stdout().lock();
    if opt.json {
        let all: Vec<Value> = events.map(|e| event_json(e, &history, &clocks, &lines)).collect();
        serde_json::to_writer_pretty(&mut out, &all)?;
        writeln!(out)?;
        return Ok(());
    }
    let total: usize = history.ranks.iter().map(|rh| rh.events.len()).sum();
    writeln!(out, "job {}: {} ranks, {total} events", human::escape(&job.id), history.ranks.len())?;
    writeln!(
        out,
        "{:<5} {:>6} {:>10}  {:<14} {:>5} {:>6} {:>9} {:>7}  {:<16} SITE",
        "RANK", "SEQ", "TIME ms", "EVENT", "PEER", "TAG", "BYTES", "TAKES", "VC"
    )?;
    for e in events {
        let time = history.time_us(e.rank, e.seq).unwrap_or(0.0) / 1000.0;
        let opt_text = |v: Option<String>| v.unwrap_or_else(|| "-".to_owned());
        let peer = if e.any_source && e.kind == sdt_history::EventKind::Irecv {
            "any".to_owned()
        } else {
            opt_text(e.peer.map(|p| p.to_string()))
        };
        let tag = if e.any_tag && e.kind == sdt_history::EventKind::Irecv {
            "any".to_owned()
        } else {
            opt_text(e.tag.map(|t| t.to_string()))
        };
        let takes = opt_text(
            e.matched.map(|m| format!("{}:{m}", e.peer.unwrap_or(0))).or(e.post.map(|p| format!("#{p}"))),
        );
        let vc = clocks.get(e.rank, e.seq).map_or_else(String::new, |c| format!("{c:?}").replace(' ', ""));
        writeln!(
            out,
            "{:<5} {:>6} {time:>10.3}  {:<14} {peer:>5} {tag:>6} {:>9} {takes:>7}  {vc:<16} {}",
            e.rank,
            e.seq,
            e.kind.name(),
            e.bytes,
            site_text(&lines, e)
        )?;
    }
    Ok(())
}

/// `file:line` of every site, per rank: `lines[rank][site]`.
pub fn site_lines(job: &Job, history: &History) -> Vec<Vec<Option<String>>> {
    history
        .ranks
        .iter()
        .map(|rh| {
            let cwd = job
                .ranks
                .iter()
                .find(|(r, _)| *r == rh.rank)
                .map(|(_, run)| run.info().cwd.clone())
                .unwrap_or_default();
            source_lines(&rh.sites, Path::new(&cwd))
        })
        .collect()
}

/// Where `e`'s call was, as `file:line`, or the module and offset when the line is not known.
pub fn site_text(lines: &[Vec<Option<String>>], e: &Event) -> String {
    located(lines, e.rank, e.site).unwrap_or_else(|| "?".to_owned())
}

/// The source line of site `site` of `rank`, if known.
pub fn located(lines: &[Vec<Option<String>>], rank: u32, site: Option<u32>) -> Option<String> {
    lines.get(rank as usize)?.get(site? as usize)?.clone()
}

fn event_json(e: &Event, history: &History, clocks: &Clocks, lines: &[Vec<Option<String>>]) -> Value {
    json!({
        "rank": e.rank,
        "seq": e.seq,
        "kind": e.kind.name(),
        "peer": e.peer,
        "tag": e.tag,
        "bytes": e.bytes,
        "vc": clocks.get(e.rank, e.seq),
        "matched": e.matched,
        "post": e.post,
        "comm": e.comm,
        "time_us": history.time_us(e.rank, e.seq),
        "site": located(lines, e.rank, e.site),
        "any_source": e.any_source,
        "any_tag": e.any_tag,
        "truncated": e.truncated,
        "diverged": e.diverged,
        "fixed_route": e.fixed_route,
    })
}

fn write_perfetto(job: &Job, history: &History, path: &Path) -> Result<()> {
    let trace = trace::chrome_trace(history, &job.marks()?);
    let file = std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
    serde_json::to_writer(std::io::BufWriter::new(file), &trace)
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}
