//! `sdt restore`: resume a program from a snapshot.

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use sdt_daemon::{RestoreFrom, RunOptions, Target, Tracking, human};
use sdt_refine::Restore;
use sdt_restore::Privileges;
use sdt_store::{BeyondOwner, SnapshotMeta};

use crate::cli::RestoreOpt;
use crate::cmd_run::{capture_config, conclude, exit_code};
use crate::select;

pub fn restore(opt: RestoreOpt) -> Result<ExitCode> {
    let env = extra_env(&opt.env)?;
    let (run, snap) = select::open_snapshot(&opt.store, &opt.run, Some(&opt.snapshot))?;
    let name = snap.name().to_owned();
    let capture = &opt.capture;
    let detached = capture.config.is_none() && capture.every.is_none();
    let (privileges, beyond_owner) = privileges(&opt, snap.meta(), detached)?;
    drop(snap);
    let without_posix_timers = opt.without_timers;
    if detached {
        let restore = Restore { env, privileges, beyond_owner, without_posix_timers };
        let resumed = sdt_daemon::resume_detached(&opt.store.store, run.id(), &name, &restore)
            .inspect_err(|e| match crate::restore_error(e) {
                Some(sdt_restore::Error::SeccompFilter { .. }) => eprintln!(
                    "sdt: hint: `sdt restore --without-seccomp {name}` resumes it without the filter"
                ),
                Some(sdt_restore::Error::PosixTimers { .. }) => {
                    eprintln!("sdt: hint: `sdt restore --without-timers {name}` resumes it without them")
                }
                Some(sdt_restore::Error::BeyondOwner(refused)) => eprintln!(
                    "sdt: hint: `sdt restore --as-owner {name}` resumes it as uid {} instead",
                    refused.owner
                ),
                _ => {}
            })
            .with_context(|| format!("restoring {name} of run {}", run.id()))?;
        if !capture.quiet {
            let namespace = match resumed.user_namespace {
                true => " in a user namespace of its own (sdt had no CAP_SYS_ADMIN)",
                false => "",
            };
            eprintln!(
                "sdt: restored {name} of run {} in {} ({} of pages); it ran{namespace} with its breakpoints off",
                run.id(),
                human::duration_ns(resumed.restore_ns),
                human::bytes(resumed.bytes_written)
            );
        }
        return Ok(exit_code(resumed.exit, capture.quiet));
    }
    let outcome = sdt_daemon::run(&RunOptions {
        target: Target::Restore(RestoreFrom {
            run: run.id(),
            snapshot: name.clone(),
            until: None,
            restorer: Arc::new(Restore { without_posix_timers, ..Restore::recorded(env) }),
        }),
        store: opt.store.store.clone(),
        config: capture_config(capture.config.as_deref(), capture.every)?,
        verify: false,
        wait_for_compaction: false,
        quiet: capture.quiet,
        tracking: Tracking::Auto,
        disk_budget: None,
        backend: capture.backend.into(),
        breaks: Vec::new(),
        job: None,
        // A restored process has its library loaded already, or none.
        mpi_history: false,
        mpi_replay: None,
        mpi_stop: None,
        signal_snapshots: true,
        time_limit: None,
    })
    .with_context(|| format!("restoring {name} of run {}", run.id()))?;
    conclude(&outcome, &opt.store.store, capture.quiet);
    Ok(exit_code(outcome.exit, capture.quiet))
}

/// Whose credentials the program resumes with, warning loudly when not its own, and what
/// becomes of those beyond the store owner's. Only a `detached` resume (no capture) may
/// opt out of the recorded ones.
fn privileges(opt: &RestoreOpt, meta: &SnapshotMeta, detached: bool) -> Result<(Privileges, BeyondOwner)> {
    if (opt.keep_root || opt.without_seccomp || opt.as_owner) && !detached {
        bail!(
            "--keep-root, --without-seccomp and --as-owner resume without capturing: not with --config or \
             --every"
        );
    }
    let beyond_owner = if opt.as_owner { BeyondOwner::Lower } else { BeyondOwner::Refuse };
    let had = meta.process.credentials_of(meta.process.pid);
    let euid = nix::unistd::geteuid();
    if opt.keep_root && !euid.is_root() {
        bail!(
            "--keep-root resumes the program as root, and sdt runs as uid {euid}: without it, {} resumes as \
             the uid {} it ran as",
            meta.name,
            had.uids.effective
        );
    }
    if opt.keep_root {
        eprintln!(
            "sdt: WARNING: --keep-root: {} resumes with sdt's own credentials (root's, every capability \
             sdt has), not as the uid {} and gid {} it ran as: it can read and change anything root can",
            meta.name, had.uids.effective, had.gids.effective,
        );
        return Ok((Privileges::Restorer, beyond_owner));
    }
    if opt.without_seccomp {
        eprintln!(
            "sdt: warning: --without-seccomp: threads that ran under a seccomp filter resume without it"
        );
        return Ok((Privileges::RecordedWithoutSeccompFilter, beyond_owner));
    }
    Ok((Privileges::Recorded, beyond_owner))
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
