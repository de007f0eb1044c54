//! `sdt restore`: resume a program from a snapshot.

use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use sdt_daemon::{RestoreFrom, RunOptions, Target, Tracking, human};

use crate::cli::RestoreOpt;
use crate::cmd_run::{capture_config, exit_code, report};
use crate::select;

pub fn restore(opt: RestoreOpt) -> Result<ExitCode> {
    let env = extra_env(&opt.env)?;
    let (run, snap) = select::open_snapshot(&opt.store, &opt.run, Some(&opt.snapshot))?;
    let name = snap.name().to_owned();
    drop(snap);
    let capture = &opt.capture;
    if capture.config.is_none() && capture.every.is_none() {
        let resumed = sdt_daemon::resume_detached(&opt.store.store, run.id(), &name, &env)
            .with_context(|| format!("restoring {name} of run {}", run.id()))?;
        if !capture.quiet {
            eprintln!(
                "sdt: restored {name} of run {} in {} ({} of pages); it ran with its breakpoints off",
                run.id(),
                human::duration_ns(resumed.restore_ns),
                human::bytes(resumed.bytes_written)
            );
        }
        return Ok(exit_code(resumed.exit, capture.quiet));
    }
    let outcome = sdt_daemon::run(&RunOptions {
        target: Target::Restore(RestoreFrom { run: run.id(), snapshot: name.clone(), until: None, env }),
        store: opt.store.store.clone(),
        config: capture_config(capture.config.as_deref(), capture.every)?,
        verify: false,
        quiet: capture.quiet,
        tracking: Tracking::Auto,
        disk_budget: None,
        backend: capture.backend.into(),
        breaks: Vec::new(),
    })
    .with_context(|| format!("restoring {name} of run {}", run.id()))?;
    report(&outcome, &opt.store.store, capture.quiet);
    Ok(exit_code(outcome.exit, capture.quiet))
}

/// The `NAME=VALUE` arguments as (name, value) pairs.
fn extra_env(args: &[String]) -> Result<Vec<(String, String)>> {
    args.iter()
        .map(|arg| match arg.split_once('=') {
            Some((name, value)) if !name.is_empty() && !name.contains('\0') && !value.contains('\0') => {
                Ok((name.to_owned(), value.to_owned()))
            }
            _ => bail!("`{arg}`: an extra environment variable is NAME=VALUE"),
        })
        .collect()
}
