//! `sdt compact`: diff and compress a run's raw snapshots, which a run leaves when its
//! program ends (for the background compactor `sdt run` starts), when its sdt dies or
//! when its disk fills up; and record that a run whose sdt died has ended.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use sdt_daemon::human;
use sdt_store::{Run, RunId, RunStatus, Store};

use crate::cli::CompactOpt;
use crate::select;

pub fn compact(opt: CompactOpt) -> Result<()> {
    if opt.background {
        // Only what no program wants: the next `sdt run` is not slowed by this one's.
        sdt_sys::set_thread_urgency(None, sdt_sys::Urgency::Background).ok();
        // The `sdt run` that started it blocks SIGTERM, SIGINT, … for its signalfd: here
        // they end it, as a user's `sdt compact` taking its work over expects.
        sdt_sys::events::unblock_all_signals().ok();
    }
    let (store, run) = select::open_run(&opt.store, &opt.run)?;
    let id = run.id();
    let mut waited = false;
    let held = loop {
        match store.hold_run(id) {
            Ok(held) => {
                if opt.background {
                    tell_starter_we_hold_the_run();
                }
                break held;
            }
            // Another compactor has it (the one `sdt run` left, or a user's): it does the work.
            Err(sdt_store::Error::RunHeld { .. }) if opt.background => return Ok(()),
            // The one `sdt run` left runs on idle CPU time only, which a busy machine may
            // never give it: the user asking now takes its work over, at a user's speed.
            // Anyone else's is waited for.
            Err(sdt_store::Error::RunHeld { .. }) => {
                if !take_over_from_background(&store, id, "taking it over")? {
                    wait_for_compactor(&store, id)?;
                }
                waited = true;
            }
            Err(e) => return Err(e).with_context(|| format!("compacting run {id}")),
        }
    };
    let mut writer = held.compactor().with_context(|| format!("compacting run {id}"))?;
    let first = writer.next_seq();
    let (mut stored, mut full) = (0, 0);
    while let Some(report) =
        writer.compact().with_context(|| format!("compacting S{} of run {id}", writer.next_seq()))?
    {
        stored += report.file_bytes;
        full += report.full_bytes;
        if !opt.background {
            eprintln!(
                "sdt: compacted {} of run {id}: {}",
                run.info().snapshot_name(writer.next_seq() - 1),
                human::bytes(report.file_bytes)
            );
        }
    }
    let done = writer.next_seq() - first;
    if writer.record_interrupted()? {
        eprintln!(
            "sdt: run {id}: its sdt (pid {}) had died before the program ended; recorded",
            run.info().sdt_pid
        );
    }
    if opt.background {
        return Ok(());
    }
    if done == 0 && waited {
        eprintln!("sdt: run {id}: compacted");
    } else if done == 0 {
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

/// Starts `sdt compact --background` on run `id` of `store`, detached (its own process
/// group, no terminal, stdin and stderr to `/dev/null`), and returns its pid once it holds
/// the run's lock, which the run's `sdt` has let go of (it ends quietly if someone else
/// has it). Until then `sdt ls` would call the run's raw snapshots abandoned, and a user's
/// `sdt compact` would not know to wait.
pub fn start_in_background(store: &Path, id: RunId) -> std::io::Result<u32> {
    use std::io::Read;
    use std::os::fd::AsFd;
    use std::os::unix::process::CommandExt;
    let mut child = Command::new(std::env::current_exe()?)
        .arg("compact")
        .arg("--background")
        .arg("--run")
        .arg(id.to_string())
        .arg("--store")
        .arg(store)
        .stdin(Stdio::null())
        // Its one byte on stdout says it holds the run; its end closes the pipe.
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        // Out of the terminal's foreground group: a ^C for the next command spares it.
        .process_group(0)
        .spawn()?;
    let mut said = child.stdout.take().expect("stdout is piped");
    let start = std::time::Instant::now();
    // Not fatal: past it the compactor still runs, and takes the run when it can.
    if sdt_sys::events::wait_readable(said.as_fd(), HANDOVER).map_err(std::io::Error::other)? {
        // Nothing read: it ended first (another compactor had the run, or it failed).
        if said.read(&mut [0u8; 1])? == 0 {
            log::debug!("the background compactor ended without taking the run");
        }
    }
    log::debug!("the background compactor took the run in {:?}", start.elapsed());
    // Not waited for: it outlives us and is reaped by whoever inherits it.
    Ok(child.id())
}

/// How long `sdt run` waits for the background compactor to take the run: an `exec` and
/// the store's opening, milliseconds unless the machine is swamped.
const HANDOVER: Duration = Duration::from_secs(5);

/// The background compactor's word to the `sdt run` that started it (one byte on the
/// pipe that is its stdout; it prints nothing else there). A starter already gone is
/// no matter.
fn tell_starter_we_hold_the_run() {
    use std::io::Write;
    let _ = std::io::stdout().write_all(b"\n").and_then(|()| std::io::stdout().flush());
}

/// How often a waiting `sdt compact` looks at the run again.
const POLL: Duration = Duration::from_millis(100);

/// Stops the background compactor (`sdt compact --background`, which `sdt run` starts
/// when the program ends) if that is what holds run `id`, saying so and what comes next
/// (`then`), and waits until it has let the run go: what it was writing is left
/// unfinished, and is written again by whoever compacts next. False if something else
/// holds the run (a user's `sdt compact`, or a process we may not signal); refuses a run
/// whose capture is still going on. `^C` ends the wait.
pub(crate) fn take_over_from_background(store: &Store, id: RunId, then: &str) -> Result<bool> {
    let run = open_for_compaction(store, id)?;
    let Some(pid) = background_compactor(&run) else { return Ok(false) };
    let raw = count_raw(&run)?;
    // SIGCONT: one that is stopped (by a debugger, say) ends too.
    for signal in [libc::SIGTERM, libc::SIGCONT] {
        match sdt_sys::kill_process(pid, signal) {
            Ok(()) => {}
            // Gone already: the run is free, or about to be.
            Err(e) if e.errno() == libc::ESRCH => break,
            // Another user's: waited for.
            Err(e) if e.errno() == libc::EPERM => return Ok(false),
            Err(e) => {
                return Err(e).with_context(|| format!("stopping the background compactor of run {id}"));
            }
        }
    }
    eprintln!(
        "sdt: run {id} was being compacted in the background (pid {pid}, on idle CPU time only), {raw} raw \
         snapshot(s) left: {then}"
    );
    // One whose SIGTERM stays blocked (an older sdt's) is killed.
    let since = std::time::Instant::now();
    let mut killed = false;
    while store.open_run(&id)?.is_held() {
        if !killed && since.elapsed() > TERM_GRACE {
            sdt_sys::kill_process(pid, libc::SIGKILL).ok();
            killed = true;
        }
        std::thread::sleep(POLL);
    }
    Ok(true)
}

/// How long a background compactor told to end may take before it is killed.
const TERM_GRACE: Duration = Duration::from_secs(5);

/// The `sdt compact --background` process that holds `run`'s lock, if that is who holds
/// it: a holder `/proc/locks` names, with that very file open, whose command line says
/// so. (Not the store's word: nothing in it says who compacts.)
fn background_compactor(run: &Run) -> Option<sdt_sys::Tid> {
    use std::os::unix::fs::MetadataExt;
    let (dev, ino) = run.lock_file_id().ok()?;
    let locks = std::fs::read("/proc/locks").ok()?;
    let has_lock_open = |pid: sdt_sys::Tid| {
        let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else { return false };
        // `metadata` follows each descriptor's link to the file it has open.
        fds.flatten().any(|fd| std::fs::metadata(fd.path()).is_ok_and(|m| m.dev() == dev && m.ino() == ino))
    };
    sdt_procfs::parse_flocks(&locks).into_iter().filter(|l| l.inode == ino).find_map(|l| {
        let pid = sdt_sys::Tid::new(l.pid)?;
        let args = sdt_procfs::parse_cmdline(&sdt_procfs::read(pid, "cmdline").ok()?);
        let background =
            args.get(1).is_some_and(|a| a == "compact") && args.iter().any(|a| a == "--background");
        (background && has_lock_open(pid)).then_some(pid)
    })
}

/// Run `id`, refused while its capture is still going on (its `sdt` compacts it).
fn open_for_compaction(store: &Store, id: RunId) -> Result<Run> {
    let run = store.open_run(&id)?;
    if run.info().status == RunStatus::Running && run.is_held() {
        bail!(
            "run {id} is being captured by sdt (pid {}): its snapshots are compacted as the program runs",
            run.info().sdt_pid
        );
    }
    Ok(run)
}

/// Waits until no `sdt compact` holds run `id` (the one `sdt run` left behind, or a
/// user's), saying how many raw snapshots are left as it goes; refuses a run whose
/// capture is still going on. `^C` ends the wait; the compaction goes on.
fn wait_for_compactor(store: &Store, id: RunId) -> Result<()> {
    let mut said = None;
    loop {
        // Read again each time: the run's end is recorded before its compaction is
        // handed over.
        let run = open_for_compaction(store, id)?;
        if !run.is_held() {
            return Ok(());
        }
        let raw = count_raw(&run)?;
        if said != Some(raw) {
            eprintln!(
                "sdt: run {id} is being compacted in the background: {raw} raw snapshot(s) left, waiting"
            );
            said = Some(raw);
        }
        std::thread::sleep(POLL);
    }
}

/// The run's snapshots still stored raw.
fn count_raw(run: &Run) -> Result<usize> {
    let mut raw = 0;
    for entry in run.snapshots()? {
        raw += usize::from(entry?.raw);
    }
    Ok(raw)
}
