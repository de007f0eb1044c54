//! `sdt show`: one snapshot as text, or its stored metadata as JSON.

use anyhow::Result;
use sdt_daemon::human::{self, escape};
use sdt_store::{Content, Trigger};
use sdt_target::Activity;

use crate::cli::ShowOpt;
use crate::select;

pub fn show(opt: ShowOpt) -> Result<()> {
    let (run, snap) = select::open_snapshot(&opt.store, &opt.run, opt.snapshot.as_deref())?;
    let m = snap.meta();
    if opt.raw {
        println!("{}", serde_json::to_string_pretty(m)?);
        return Ok(());
    }
    let rank = match &run.info().job {
        Some(job) => format!(", rank {} of job {} on {}", job.rank, job.id, escape(&job.host)),
        None => String::new(),
    };
    println!("{} of run {}{rank} ({})", m.name, run.id(), escape(&run.info().command.join(" ")));
    match &m.trigger {
        Trigger::Breakpoint { level, class, id, multiple_mark, attrs, hit, tid } => println!(
            "trigger:  breakpoint level {level} class {class} id {id} (multiple_mark {multiple_mark}), hit {hit}, thread {tid}{}",
            if attrs.is_empty() { String::new() } else { format!(", attrs {}", escape(attrs)) }
        ),
        Trigger::Timer => println!("trigger:  timer"),
    }
    println!(
        "time:     {} (+{:.3} s into the run)",
        human::utc_timestamp(m.time.wall_ns),
        m.time.since_start_ns as f64 / 1e9
    );
    let s = &m.stats;
    println!(
        "capture:  {} mode, paused {} (all threads stopped after {}{}), copied {} in {}",
        escape(&s.mode),
        human::duration_ns(s.pause_ns),
        human::duration_ns(s.deviation_ns),
        if s.wait_ns > 0 {
            format!(", waited {} for room in the store", human::duration_ns(s.wait_ns))
        } else {
            String::new()
        },
        human::bytes(s.copied_bytes),
        human::duration_ns(s.copy_ns),
    );
    println!(
        "store:    {} of {} pages stored here, file {} (full {})",
        s.pages_stored,
        s.pages,
        human::bytes(snap.file_bytes()),
        human::bytes(s.full_bytes)
    );
    let p = &m.process;
    let args: Vec<_> = p.cmdline.iter().map(|a| escape(a)).collect();
    println!(
        "process:  pid {} ({}), exe {}, args {}",
        p.pid,
        escape(&p.comm),
        escape(&p.exe),
        args.join(" ")
    );
    let breaking = match m.trigger {
        Trigger::Breakpoint { tid, .. } => Some(tid),
        Trigger::Timer => None,
    };
    println!("\nthreads ({}):", m.threads.len());
    println!("  {:>7}  {:<16} {:<26} {:>18} {:>18}", "TID", "NAME", "STATE", "PC", "SP");
    for t in &m.threads {
        println!(
            "  {:>7}  {:<16} {:<26} {:>#18x} {:>#18x}",
            t.tid,
            escape(&t.name),
            Activity::of(t, breaking == Some(t.tid)).to_string(),
            t.pc(),
            t.sp()
        );
    }
    println!("\nmappings ({}):", m.mappings.len());
    println!("  {:>16}-{:<16} {:<5} {:>8} {:<10} PATH", "START", "END", "PERMS", "OFFSET", "CONTENT");
    for map in &m.mappings {
        // memory: its pages are stored; file: written pages stored, the rest from the
        // file; -: no contents.
        let content = match map.content {
            Content::Zero => "memory",
            Content::File(_) => "file",
            Content::Unreadable => "-",
        };
        println!(
            "  {:>16x}-{:<16x} {:<5} {:>8x} {:<10} {}",
            map.start,
            map.end,
            map.perms.to_string(),
            map.offset,
            content,
            escape(&map.path)
        );
    }
    Ok(())
}
