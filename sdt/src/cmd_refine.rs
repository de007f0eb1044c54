//! `sdt refine`: resume S1 under a finer config until the program reaches S2's
//! breakpoint again, and compare the key variables of S2 and S2.new.

use std::process::ExitCode;

use anyhow::Result;
use sdt_daemon::{ProgramExit, human};
use sdt_refine::{Attempts, Comparison, Interval, Progress, Verdict};

use crate::cli::RefineOpt;
use crate::cmd_export::checked_program;
use crate::cmd_gdb::ServerParts;
use crate::cmd_run::{capture_config, conclude, say_why_it_hangs};
use crate::select;

pub fn refine(opt: RefineOpt) -> Result<ExitCode> {
    if select::is_global_name(&opt.from) || select::is_global_name(&opt.to) {
        return refine_job(opt);
    }
    let (run, from) = select::open_snapshot(&opt.store, &opt.run, Some(&opt.from))?;
    // `--to S2` is in the run of `--from`; one that names its run or rank must name that one.
    let to = match select::split_owner(&opt.to)? {
        (None, to) => select::snapshot_name(to),
        (Some(_), _) => {
            let (to_run, to) = select::open_snapshot(&opt.store, &opt.run, Some(&opt.to))?;
            if to_run.id() != run.id() {
                anyhow::bail!(
                    "--to {} is in run {}; it must be a snapshot of {}'s run {}",
                    opt.to,
                    to_run.id(),
                    from.name(),
                    run.id()
                );
            }
            to.name().to_owned()
        }
    };
    let interval = Interval::new(&run, &from, &to)?;
    let to = interval.to().name();
    // Said before anything runs.
    checked_program(interval.to())
        .map_err(|why| anyhow::anyhow!("--check needs the program to evaluate in gdb, and {why}"))?;
    let gdb = ServerParts::new(&opt.store)?;
    let evaluate = |run: &_, snap: &_, exprs: &[String]| gdb.evaluate(run, snap, exprs);
    let expected = interval.expect(split_exprs(&opt.check), evaluate)?;
    let attempts = Attempts {
        store: opt.store.store.clone(),
        config: capture_config(opt.capture.config.as_deref(), opt.capture.every)?,
        quiet: opt.capture.quiet,
        backend: opt.capture.backend.into(),
        count: opt.retries + 1,
        timeout: opt.timeout,
    };
    let until = interval.until();
    let allowed = sdt_refine::time_limit(attempts.timeout, interval.took()).unwrap_or_default();
    let verdict = interval.refine(&expected, &attempts, evaluate, |progress| match progress {
        Progress::Starting { attempt, of } => {
            eprintln!("sdt: refining {}..{to} (attempt {attempt} of {of})", from.name());
        }
        Progress::Ran(outcome) => conclude(outcome, &attempts.store, attempts.quiet),
        Progress::NotReached(outcome) if outcome.exit == ProgramExit::TimedOut => {
            eprintln!(
                "sdt: the resumed program had not reached the breakpoint of {to} (level {}, class {}, id {}, \
                 hit {}) after {}: it was stopped{} (--timeout sets the time)",
                until.level,
                until.class,
                until.id,
                until.hit,
                human::duration_ns(allowed.as_nanos() as u64),
                outcome.at_deadline.as_ref().map_or_else(String::new, |name| format!(
                    "; where it was then: {name} (`sdt gdb {name}`)"
                )),
            );
            if let Some(name) = &outcome.at_deadline {
                say_why_it_hangs(&attempts.store, outcome.run, name);
            }
        }
        Progress::NotReached(outcome) => eprintln!(
            "sdt: the resumed program ended ({}) before it reached the breakpoint of {to} (level {}, class {}, \
             id {}, hit {})",
            describe_exit(outcome.exit),
            until.level,
            until.class,
            until.id,
            until.hit
        ),
        Progress::Compared(comparison) => {
            print_table(comparison, to);
            let verdict = if comparison.reproduced() { "reproduced" } else { "differs from" };
            println!(
                "verdict: {} {verdict} {to} (run {}, attempt {})",
                comparison.new, comparison.run, comparison.attempt
            );
        }
    })?;
    match verdict {
        Verdict::Reproduced { .. } => Ok(ExitCode::SUCCESS),
        Verdict::NotReproduced { attempts } => {
            eprintln!(
                "sdt: {to} was not reproduced in {attempts} attempt{}",
                if attempts == 1 { "" } else { "s" }
            );
            Ok(ExitCode::FAILURE)
        }
    }
}

/// Each `--check` value split at its top-level commas (not those inside brackets,
/// parentheses, braces or quotes), trimmed.
pub fn split_exprs(values: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    for value in values {
        let (mut depth, mut quote, mut start) = (0i32, None, 0);
        for (i, c) in value.char_indices() {
            match (quote, c) {
                (Some(q), c) if c == q => quote = None,
                (Some(_), _) => {}
                (None, '"' | '\'') => quote = Some(c),
                (None, '(' | '[' | '{') => depth += 1,
                (None, ')' | ']' | '}') => depth -= 1,
                (None, ',') if depth == 0 => {
                    out.push(value[start..i].trim().to_owned());
                    start = i + 1;
                }
                _ => {}
            }
        }
        out.push(value[start..].trim().to_owned());
    }
    out.retain(|e| !e.is_empty());
    out
}

/// Prints the key values of S2 (`old`) and S2.new side by side.
fn print_table(comparison: &Comparison, old: &str) {
    let show = |v: &Result<String, String>| match v {
        Ok(v) => v.clone(),
        Err(e) => format!("<{e}>"),
    };
    let rows = &comparison.rows;
    let width = |f: &dyn Fn(usize) -> usize, head: usize| (0..rows.len()).map(f).max().unwrap_or(0).max(head);
    let we = width(&|i| rows[i].expr.len(), 4);
    let wo = width(&|i| show(&rows[i].expected).len(), old.len());
    let wn = width(&|i| show(&rows[i].got).len(), comparison.new.len());
    println!("{:we$}  {:wo$}  {:wn$}  SAME", "EXPR", old, comparison.new);
    for row in rows {
        println!(
            "{:we$}  {:wo$}  {:wn$}  {}",
            row.expr,
            show(&row.expected),
            show(&row.got),
            if row.same { "yes" } else { "NO" }
        );
    }
}

fn describe_exit(exit: ProgramExit) -> String {
    match exit {
        ProgramExit::Code(code) => format!("exit code {code}"),
        ProgramExit::Signal(signal, _) => format!("killed by signal {signal}"),
        ProgramExit::Stopped | ProgramExit::TimedOut => "stopped by sdt".into(),
        ProgramExit::Detached => "let go by sdt".into(),
    }
}

/// `sdt refine --from G1 --to G3` of an MPI job: a job cannot resume from a snapshot (its
/// ranks' connections belong to the whole job), so it is replayed from its start with its
/// message races enforced, which brings every rank through G1 to G3 again; the capture
/// config captures on the way (from the start), and the expressions are compared at G3.
fn refine_job(opt: RefineOpt) -> Result<ExitCode> {
    if !select::is_global_name(&opt.from) || !select::is_global_name(&opt.to) {
        anyhow::bail!(
            "--from and --to name global snapshots of a job together (G1, G3), or snapshots of a run"
        );
    }
    if opt.capture.every.is_some() {
        anyhow::bail!("--every is for single processes: a job's replay captures with --config");
    }
    let number = |g: &str| g[1..].parse::<u64>().unwrap_or(u64::MAX);
    if number(&opt.from) >= number(&opt.to) {
        anyhow::bail!("--from {} must come before --to {}", opt.from, opt.to);
    }
    crate::cmd_replay::replay(crate::cli::ReplayOpt {
        store: opt.store,
        run: opt.run,
        until: Some(opt.to),
        config: opt.capture.config,
        check: opt.check,
        launcher: crate::cli::LauncherArgs { timeout: opt.timeout, ..Default::default() },
        dry_run: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expressions_split_at_top_level_commas() {
        let got = split_exprs(&["total, acct[3].balance,f(1, 2)".into(), "s == \"a,b\"".into(), " ,".into()]);
        assert_eq!(got, ["total", "acct[3].balance", "f(1, 2)", "s == \"a,b\""]);
    }
}
