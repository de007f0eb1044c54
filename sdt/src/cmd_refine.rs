//! `sdt refine`: resume S1 under a finer config until the program reaches S2's
//! breakpoint again, and compare the key variables of S2 and S2.new.

use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use sdt_daemon::{ProgramExit, RestoreFrom, RunOptions, Target, Tracking, Until};
use sdt_store::{Store, Trigger};

use crate::cli::RefineOpt;
use crate::cmd_export::{cached_core, checked_program};
use crate::cmd_run::{capture_config, conclude};
use crate::select;

pub fn refine(opt: RefineOpt) -> Result<ExitCode> {
    let (run, from) = select::open_snapshot(&opt.store, &opt.run, Some(&opt.from))?;
    let to_name = select::snapshot_name(&opt.to);
    let to = run
        .open_snapshot(&to_name)
        .with_context(|| format!("--to must name a snapshot of the run that holds {}", from.name()))?;
    if to.meta().seq <= from.meta().seq {
        bail!("--to {} was taken before --from {}: nothing lies between them", to.name(), from.name());
    }
    let Trigger::Breakpoint { level, class, id, hit, .. } = to.meta().trigger else {
        bail!("{} is a timed snapshot: a refinement ends at a breakpoint snapshot", to.name());
    };
    let exprs = split_exprs(&opt.check);
    let program = checked_program(&to)
        .map_err(|why| anyhow::anyhow!("--check needs the program to evaluate in gdb, and {why}"))?;
    let expected = evaluate(&program, &cached_core(&run, &to)?, &exprs)?;
    for (expr, value) in exprs.iter().zip(&expected) {
        if let Err(e) = value {
            bail!("--check {expr}: gdb cannot evaluate it in {}: {e}", to.name());
        }
    }
    let config = capture_config(opt.capture.config.as_deref(), opt.capture.every)?;
    let store = Store::open(&opt.store.store)?;
    let attempts = opt.retries + 1;
    for attempt in 1..=attempts {
        eprintln!("sdt: refining {}..{} (attempt {attempt} of {attempts})", from.name(), to.name());
        let outcome = sdt_daemon::run(&RunOptions {
            target: Target::Restore(RestoreFrom {
                run: run.id(),
                snapshot: from.name().to_owned(),
                until: Some(Until { name: to_name.clone(), level, class, id, hit }),
                env: Vec::new(),
            }),
            store: opt.store.store.clone(),
            config: config.clone(),
            verify: false,
            wait_for_compaction: false,
            quiet: opt.capture.quiet,
            tracking: Tracking::Auto,
            disk_budget: None,
            backend: opt.capture.backend.into(),
            breaks: Vec::new(),
        })
        .with_context(|| format!("resuming {}", from.name()))?;
        conclude(&outcome, &opt.store.store, opt.capture.quiet);
        let ProgramExit::Stopped = outcome.exit else {
            eprintln!(
                "sdt: the resumed program ended ({}) before it reached the breakpoint of {} (level {level}, \
                 class {class}, id {id}, hit {hit})",
                describe_exit(outcome.exit),
                to.name()
            );
            continue;
        };
        let child = store.open_run(&outcome.run)?;
        let new = child.open_snapshot(&format!("{to_name}.new"))?;
        let got = evaluate(&program, &cached_core(&child, &new)?, &exprs)?;
        let same = print_table(&exprs, to.name(), &expected, new.name(), &got);
        if same {
            println!(
                "verdict: {} reproduced {} (run {}, attempt {attempt})",
                new.name(),
                to.name(),
                child.id()
            );
            return Ok(ExitCode::SUCCESS);
        }
        println!(
            "verdict: {} differs from {} (run {}, attempt {attempt})",
            new.name(),
            to.name(),
            child.id()
        );
    }
    eprintln!(
        "sdt: {} was not reproduced in {attempts} attempt{}",
        to.name(),
        if attempts == 1 { "" } else { "s" }
    );
    Ok(ExitCode::FAILURE)
}

/// Each `--check` value split at its top-level commas (not those inside brackets,
/// parentheses, braces or quotes), trimmed.
fn split_exprs(values: &[String]) -> Vec<String> {
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

fn evaluate(program: &Path, core: &Path, exprs: &[String]) -> Result<Vec<Result<String, String>>> {
    sdt_gdb::frontend::evaluate(program, core, exprs)
        .context("running gdb (is it installed? apt-get install gdb)")
}

/// Prints the key values of both snapshots side by side; returns whether all match.
fn print_table(
    exprs: &[String],
    old: &str,
    expected: &[Result<String, String>],
    new: &str,
    got: &[Result<String, String>],
) -> bool {
    let show = |v: &Result<String, String>| match v {
        Ok(v) => v.clone(),
        Err(e) => format!("<{e}>"),
    };
    let width =
        |f: &dyn Fn(usize) -> usize, head: usize| (0..exprs.len()).map(f).max().unwrap_or(0).max(head);
    let we = width(&|i| exprs[i].len(), 4);
    let wo = width(&|i| show(&expected[i]).len(), old.len());
    let wn = width(&|i| show(&got[i]).len(), new.len());
    println!("{:we$}  {:wo$}  {:wn$}  SAME", "EXPR", old, new);
    let mut all = true;
    for (i, expr) in exprs.iter().enumerate() {
        let same = expected[i].is_ok() && expected[i] == got[i];
        all &= same;
        println!(
            "{expr:we$}  {:wo$}  {:wn$}  {}",
            show(&expected[i]),
            show(&got[i]),
            if same { "yes" } else { "NO" }
        );
    }
    all
}

fn describe_exit(exit: ProgramExit) -> String {
    match exit {
        ProgramExit::Code(code) => format!("exit code {code}"),
        ProgramExit::Signal(signal, _) => format!("killed by signal {signal}"),
        ProgramExit::Stopped => "stopped by sdt".into(),
    }
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
