//! `sdt run`: capture a program's snapshots.

use std::process::ExitCode;

use anyhow::Result;
use sdt_daemon::{CaptureConfig, ProgramExit, RunOptions, Tracking, human};

use crate::cli::{RunOpt, TrackingArg};

pub fn run(opt: RunOpt) -> Result<ExitCode> {
    let mut config = match &opt.config {
        Some(path) => CaptureConfig::load(path)?,
        None => CaptureConfig::default(),
    };
    if opt.every.is_some() {
        config.every_ms = opt.every;
    }
    let outcome = sdt_daemon::run(&RunOptions {
        command: opt.command,
        store: opt.store.store.clone(),
        config,
        verify: opt.verify,
        quiet: opt.quiet,
        queue_bytes: (opt.queue_mb as usize) << 20,
        tracking: match opt.tracking {
            TrackingArg::Auto => Tracking::Auto,
            TrackingArg::UffdWp => Tracking::UffdWp,
            TrackingArg::PageHash => Tracking::PageHash,
        },
    })?;
    for problem in &outcome.problems {
        eprintln!("sdt: warning: {problem}");
    }
    let t = &outcome.totals;
    if !opt.quiet {
        let ratio = if t.full_bytes > 0 {
            format!(", {:.1}%", 100.0 * t.stored_bytes as f64 / t.full_bytes as f64)
        } else {
            String::new()
        };
        eprintln!(
            "sdt: run {} in {}: {} snapshot{}, stored {} (full {}{ratio}); `sdt ls` lists them",
            outcome.run,
            opt.store.store.display(),
            t.snapshots,
            if t.snapshots == 1 { "" } else { "s" },
            human::bytes(t.stored_bytes),
            human::bytes(t.full_bytes),
        );
    }
    if t.verify_failures > 0 {
        eprintln!("sdt: error: {} snapshot(s) differ from the live process", t.verify_failures);
    }
    match outcome.exit {
        ProgramExit::Code(code) => Ok(ExitCode::from(code as u8)),
        ProgramExit::Signal(signal, _) => {
            if !opt.quiet {
                eprintln!("sdt: the program was killed by signal {signal}");
            }
            sdt_sys::exit_like_signal(signal)
        }
    }
}
