//! `sdt show`: one snapshot as text, or its stored metadata as JSON.

use std::path::Path;

use anyhow::Result;
use sdt_daemon::human::{self, escape};
use sdt_gdb::arrivals::Arrival;
use sdt_gdb::blocked::Blocked;
use sdt_store::{Content, FileKind, FileState, OpenFile, Trigger};
use sdt_target::Activity;

use crate::cli::ShowOpt;
use crate::cmd_events::{located, site_lines};
use crate::job::{self, Job};
use crate::select;

/// `SS_AUTODISARM` in a signal stack's flags.
const SS_AUTODISARM: u32 = 1 << 31;

/// What a breakpoint of SDT's own (class -1) is for: a rank's stop at a cut of its
/// history, or a rank ending its job.
fn own_breakpoint(class: i32, id: i32) -> Option<&'static str> {
    match (class == sdt_mpi::CUT_CLASS).then_some(id)? {
        sdt_mpi::CUT_ID => Some("the rank's stop at a cut of its message history"),
        sdt_mpi::END_ID => Some("the rank ending its job (MPI_Abort, or a fatal MPI error)"),
        _ => None,
    }
}

pub fn show(opt: ShowOpt) -> Result<()> {
    if let Some(global) = opt.snapshot.as_deref().filter(|name| select::is_global_name(name)) {
        return show_global(&opt, global);
    }
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
            "trigger:  breakpoint level {level} class {class} id {id} (multiple_mark {multiple_mark}), hit {hit}, thread {tid}{}{}",
            if attrs.is_empty() { String::new() } else { format!(", attrs {}", escape(attrs)) },
            own_breakpoint(*class, *id).map_or_else(String::new, |what| format!(": SDT's own, {what}"))
        ),
        Trigger::Timer => println!("trigger:  timer"),
        Trigger::Signal { signo, code, tid, .. } => println!(
            "trigger:  signal {} (si_code {code}{}), thread {tid}: it ended the program next",
            sdt_store::signal_name(*signo),
            m.trigger.fault_addr().map_or_else(String::new, |addr| format!(", fault address {addr:#x}"))
        ),
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
    if let Some(events) = m.mpi_events {
        let rank = run.info().job.as_ref().map_or_else(String::new, |job| format!(" --rank {}", job.rank));
        println!("messages: {events} event(s) of its message history before it (`sdt events{rank}`)");
    }
    let p = &m.process;
    let args: Vec<_> = p.cmdline.iter().map(|a| escape(a)).collect();
    let umask = p.umask.map_or_else(String::new, |m| format!(", umask {m:04o}"));
    println!(
        "process:  pid {} ({}), exe {}{umask}, args {}",
        p.pid,
        escape(&p.comm),
        escape(&p.exe),
        args.join(" ")
    );
    if m.unread_handlers != 0 {
        println!(
            "signals:  handlers of {} not recorded (seccomp, which sdt could not suspend): not resumable",
            m.unread_handler_names()
        );
    }
    for t in m.timers.itimers.iter().flatten() {
        let every = match t.interval_us {
            0 => String::new(),
            us => format!(", then every {}", human::duration_ns(us.saturating_mul(1000))),
        };
        println!(
            "timer:    {} ({}) due in {}{every}: a resume sets it again",
            t.kind.name(),
            sdt_store::signal_name(t.kind.signal()),
            human::duration_ns(t.value_us.saturating_mul(1000))
        );
    }
    for t in &m.timers.posix {
        println!(
            "timer:    POSIX {} (clock {}): a resume cannot make it again (`--without-timers`)",
            t.describe(),
            t.clock
        );
    }
    let breaking = match m.trigger {
        Trigger::Breakpoint { tid, .. } => Some(tid),
        Trigger::Timer | Trigger::Signal { .. } => None,
    };
    println!("\nthreads ({}):", m.threads.len());
    println!("  {:>7}  {:<16} {:<26} {:>18} {:>18}  SCHEDULING", "TID", "NAME", "STATE", "PC", "SP");
    for t in &m.threads {
        // Its CPUs, and what a plain user's thread would not have.
        let scheduling = m.process.scheduling.iter().find(|s| s.tid == t.tid).map_or_else(String::new, |s| {
            match s.unusual().as_str() {
                "" => format!("cpus {}", escape(&s.cpus)),
                unusual => format!("cpus {}, {unusual}", escape(&s.cpus)),
            }
        });
        println!(
            "  {:>7}  {:<16} {:<26} {:>#18x} {:>#18x}  {scheduling}",
            t.tid,
            escape(&t.name),
            match m.trigger {
                Trigger::Signal { signo, tid, .. } if tid == t.tid =>
                    format!("got {}", sdt_store::signal_name(signo)),
                _ => Activity::of(t, breaking == Some(t.tid)).to_string(),
            },
            t.pc(),
            t.sp()
        );
    }
    let stacks: Vec<_> = m.threads.iter().filter_map(|t| t.altstack.map(|s| (t.tid, s))).collect();
    if !stacks.is_empty() {
        println!("\nsignal stacks ({}):", stacks.len());
        for (tid, s) in stacks {
            let end = s.sp.saturating_add(s.size);
            let disarm = if s.flags & SS_AUTODISARM != 0 { ", off while a handler runs on it" } else { "" };
            println!("  {tid:>7}  {:#x}-{end:#x} ({}){disarm}", s.sp, human::bytes(s.size));
        }
    }
    let blocked = Blocked::of(&snap);
    if blocked.waiting() > 0 {
        println!("\nwaits ({}):", blocked.waiting());
        for line in blocked.report() {
            println!("  {line}");
        }
    }
    println!("\ndescriptors ({}):", m.files.len());
    println!("  {:>5}  {:<11} {:<6} WHAT", "FD", "KIND", "FLAGS");
    for f in &m.files {
        println!("  {:>5}  {:<11} {:<6} {}", f.fd, kind_name(f.kind), flags_text(f.flags), describe_file(f));
    }
    println!("\nmappings ({}):", m.mappings.len());
    println!("  {:>16}-{:<16} {:<5} {:>8} {:<10} PATH", "START", "END", "PERMS", "OFFSET", "CONTENT");
    for map in &m.mappings {
        // memory: its pages are stored; file: written pages stored, the rest from the
        // file (kept: from the copy kept with the run, the file having changed since;
        // changed or refused: the rest cannot be read); -: no contents.
        let content = match &map.content {
            Content::Zero => "memory",
            Content::File(f) => match snap.file_path(f) {
                Ok(path) if path == Path::new(&f.path) => "file",
                Ok(_) => "file,kept",
                Err(sdt_store::Error::FileChanged { .. }) => "changed",
                Err(_) => "refused",
            },
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

/// A descriptor's kind, as `sdt show` lists it.
fn kind_name(kind: FileKind) -> &'static str {
    match kind {
        FileKind::Regular => "file",
        FileKind::Directory => "directory",
        FileKind::CharDevice => "chardev",
        FileKind::BlockDevice => "blockdev",
        FileKind::Pipe => "pipe",
        FileKind::Socket => "socket",
        FileKind::AnonInode => "anon_inode",
        FileKind::Other => "other",
    }
}

/// `r`, `w` or `rw`, and `nb` for `O_NONBLOCK`.
fn flags_text(flags: u32) -> String {
    let access = match flags & libc::O_ACCMODE as u32 {
        a if a == libc::O_RDONLY as u32 => "r",
        a if a == libc::O_WRONLY as u32 => "w",
        _ => "rw",
    };
    let nonblocking = if flags & libc::O_NONBLOCK as u32 != 0 { ",nb" } else { "" };
    format!("{access}{nonblocking}")
}

/// What a descriptor refers to, and what a restore makes it again with.
fn describe_file(f: &OpenFile) -> String {
    let target = escape(&f.target);
    let state = match &f.state {
        None if f.kind == FileKind::Regular && f.target.ends_with(" (deleted)") => {
            ": its bytes not kept (past what a snapshot keeps of deleted files): a resume refuses it"
                .to_owned()
        }
        None => String::new(),
        Some(FileState::PipeBuffer { capacity, data }) => {
            format!(": holds {} (of {})", human::bytes(data.len() as u64), human::bytes(u64::from(*capacity)))
        }
        Some(FileState::Eventfd { count, semaphore, .. }) => {
            format!(": count {count}{}", if *semaphore { ", semaphore" } else { "" })
        }
        Some(FileState::Epoll { watches }) => {
            let each: Vec<String> = watches
                .iter()
                .map(|w| format!("fd {} (events {:#x}, data {})", w.fd, w.events, w.data))
                .collect();
            format!(": watches {}", if each.is_empty() { "nothing".to_owned() } else { each.join(", ") })
        }
        Some(FileState::Timerfd { clockid, ticks, value_ns, interval_ns }) => {
            let next = match value_ns {
                0 => "disarmed".to_owned(),
                ns => format!("next in {}", human::duration_ns(*ns)),
            };
            let every = match interval_ns {
                0 => String::new(),
                ns => format!(", every {}", human::duration_ns(*ns)),
            };
            format!(": clock {clockid}, {next}{every}, {ticks} unread")
        }
        Some(FileState::Signalfd { mask }) => {
            let signals: Vec<String> =
                (1..=64).filter(|n| mask & (1u64 << (n - 1)) != 0).map(sdt_store::signal_name).collect();
            format!(": reads {}", signals.join(", "))
        }
        Some(FileState::DeletedFile { data }) => format!(": its {} kept", human::bytes(data.len() as u64)),
        Some(FileState::SparseDeletedFile { size, parts }) => format!(
            ": its {} of data kept (a sparse file of {})",
            human::bytes(parts.iter().map(|p| p.data.len() as u64).sum()),
            human::bytes(*size)
        ),
    };
    let inherited = if f.inherited { " (from `sdt run`'s caller)" } else { "" };
    format!("{target}{state}{inherited}")
}

/// `sdt show G2`: the ranks' snapshots of a global snapshot, what the history says of
/// the cut, and the messages in flight across it (and those that make it inconsistent).
fn show_global(opt: &ShowOpt, name: &str) -> Result<()> {
    let store = select::open_store(&opt.store)?;
    let job = Job::open(&store, &opt.run)?;
    let (history, clocks) = job::history_with_clocks(&job)?;
    let globals = job.global_snapshots(Some((&history, &clocks)))?;
    let Some(g) = globals.iter().find(|g| g.name == name) else {
        let names: Vec<&str> = globals.iter().map(|g| g.name.as_str()).collect();
        anyhow::bail!(
            "job {} has no global snapshot {name} (it has {})",
            escape(&job.id),
            if names.is_empty() {
                "none: no breakpoint arrival was captured by every rank".to_owned()
            } else {
                names.join(", ")
            }
        );
    };
    let Arrival { level, class, id, hit } = g.arrival;
    println!(
        "{} of job {}: breakpoint level {level} class {class} id {id}, hit {hit}, on {} ranks",
        g.name,
        escape(&job.id),
        g.members.len()
    );
    println!("verdict:  {}", job::verdict_text(g.verdict.as_ref()));
    println!("RANK  SNAPSHOT  EVENTS BEFORE");
    for (rank, snap, events) in &g.members {
        println!(
            "{rank:<5} {:<9} {}",
            escape(snap),
            events.map_or_else(|| "?".to_owned(), |n| n.to_string())
        );
    }
    let Some(verdict) = &g.verdict else { return Ok(()) };
    let lines = site_lines(&job, &history);
    let describe = |rank: u32, seq: u32| {
        let e = history.event(rank, seq);
        let kind = e.map_or("?", |e| e.kind.name());
        let at =
            e.and_then(|e| located(&lines, rank, e.site)).map_or_else(String::new, |l| format!(" at {l}"));
        format!("rank {rank} event {seq} ({kind}{at})")
    };
    for (title, list) in [
        ("in flight (sent before the cut, received after it or never)", &verdict.in_flight),
        ("received before the cut but sent after it", &verdict.orphans),
    ] {
        if list.is_empty() {
            continue;
        }
        println!("{title}:");
        for m in list {
            let to = match m.recv {
                Some((rank, seq)) => describe(rank, seq),
                None => format!("rank {}, never received", m.to),
            };
            let tag = m.tag.map_or_else(|| "?".to_owned(), |t| t.to_string());
            println!("  {} -> {to}: tag {tag}, {} bytes", describe(m.send.0, m.send.1), m.bytes);
        }
    }
    for &(rank, seq) in &verdict.split_collectives {
        println!("collective cut in two: {} depends on ranks' events after the cut", describe(rank, seq));
    }
    Ok(())
}
