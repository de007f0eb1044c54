//! `sdt check`: the errors an MPI job's message history shows, placed at ranks, events
//! and source lines.

use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;
use sdt_daemon::human;
use sdt_gdb::arrivals::Arrival;
use sdt_history::History;
use sdt_history::check::{self, Finding, FindingKind};
use serde_json::json;

use crate::cli::CheckOpt;
use crate::cmd_events::{located, site_lines};
use crate::job::Job;
use crate::select;

pub fn check(opt: CheckOpt) -> Result<ExitCode> {
    let store = select::open_store(&opt.store)?;
    let job = Job::open(&store, &opt.run)?;
    let history = job.history()?;
    let findings = check::check(&history);
    let lines = site_lines(&job, &history);
    let ended = ending_snapshots(&job);
    let snapshot = |f: &Finding| match f.kind {
        FindingKind::Aborted | FindingKind::FatalError => {
            ended.iter().find(|(rank, _)| *rank == f.rank).map(|(rank, name)| format!("{rank}:{name}"))
        }
        _ => None,
    };
    let mut out = std::io::stdout().lock();
    if opt.json {
        let all: Vec<_> = findings
            .iter()
            .map(|f| {
                json!({
                    "kind": f.kind, "rank": f.rank, "seq": f.seq, "site": located(&lines, f.rank, f.site),
                    "peer": f.peer, "waits_on": f.waits_on, "what": f.what, "snapshot": snapshot(f),
                })
            })
            .collect();
        serde_json::to_writer_pretty(&mut out, &all)?;
        writeln!(out)?;
    } else {
        let events: usize = history.ranks.iter().map(|rh| rh.events.len()).sum();
        let ranks = history.ranks.len();
        match findings.len() {
            0 => writeln!(
                out,
                "job {}: no errors in {events} events of {ranks} ranks",
                human::escape(&job.id)
            )?,
            n => writeln!(
                out,
                "job {}: {n} error(s) in {events} events of {ranks} ranks",
                human::escape(&job.id)
            )?,
        }
        for f in &findings {
            let mut line = finding_line(f, &history, &lines);
            if let Some(name) = snapshot(f) {
                line.push_str(&format!(" (its snapshot there: {name})"));
            }
            writeln!(out, "{}", human::escape(&line))?;
        }
    }
    Ok(if findings.is_empty() { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

/// Each rank's snapshot as it ended the job (`MPI_Abort`, a fatal MPI error): rank and
/// snapshot name. A rank whose run cannot be listed has none.
fn ending_snapshots(job: &Job) -> Vec<(u32, String)> {
    let ending = |a: &Arrival| (a.class, a.id) == (sdt_mpi::CUT_CLASS, sdt_mpi::END_ID);
    job.ranks
        .iter()
        .filter_map(|(rank, run)| {
            let arrived = sdt_gdb::arrivals::arrivals(run).ok()?;
            arrived.into_iter().find(|a| ending(&a.arrival)).map(|a| (*rank, a.name))
        })
        .collect()
}

/// `deadlock: rank 0, in the call at deadlock.c:21: blocked for ever …`.
fn finding_line(f: &Finding, history: &History, lines: &[Vec<Option<String>>]) -> String {
    let place = match f.seq {
        Some(seq) => {
            let kind = history.event(f.rank, seq).map_or("?", |e| e.kind.name());
            format!("rank {} event {seq} ({kind})", f.rank)
        }
        None => format!("rank {}, in the call its history ends in", f.rank),
    };
    let at = located(lines, f.rank, f.site).map_or_else(String::new, |l| format!(" at {l}"));
    format!("{}: {place}{at}: {}", f.kind.name(), f.what)
}
