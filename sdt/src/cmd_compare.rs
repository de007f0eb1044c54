//! `sdt compare`: a run checked against a reference run, arrival by arrival.

use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use sdt_daemon::human::escape;
use sdt_gdb::arrivals::{self, Arrival};
use sdt_gdb::vars::{Change, Place, Program, Tolerance};
use sdt_store::{Run, RunId, Snapshot};
use serde_json::{Value, json};

use crate::cli::CompareOpt;
use crate::cmd_diff::{change_json, change_text};
use crate::cmd_gdb::{Answer, ServerParts, gdb_program};
use crate::cmd_refine::split_exprs;
use crate::select;

/// A line of progress on stderr every this many arrivals.
const PROGRESS_EVERY: usize = 50;

/// Two runs' snapshots at one arrival.
struct Pair {
    arrival: Arrival,
    reference: Snapshot,
    other: Snapshot,
}

pub fn compare(opt: CompareOpt) -> Result<ExitCode> {
    let store = select::open_store(&opt.store)?;
    let reference = store.open_run(&RunId(opt.reference))?;
    let other = store.open_run(&match opt.run.run {
        Some(id) => RunId(id),
        None => store.latest_run()?,
    })?;
    if reference.id() == other.id() {
        bail!("--reference {} is the run compared: pass --run with another run", reference.id());
    }
    let tol = Tolerance { rtol: opt.rtol, atol: opt.atol };
    let exprs = split_exprs(&opt.vars);
    let (paired, unpaired) = arrivals::pair(&arrivals::arrivals(&reference)?, &arrivals::arrivals(&other)?);
    if paired.is_empty() {
        bail!("runs {} and {} reached no breakpoint arrival in common", reference.id(), other.id());
    }
    if unpaired > 0 {
        log::warn!(
            "{unpaired} breakpoint arrivals were reached by only one of the runs; they are not compared"
        );
    }
    let program =
        Program::load(&reference.open_snapshot(&paired[0].1)?).context("reading the program's variables")?;
    // What gdb evaluates, in every paired snapshot of each run by one gdb.
    let gdb_exprs = for_gdb(&program, &exprs);
    let (ref_values, other_values) = match gdb_exprs.is_empty() {
        true => (Vec::new(), Vec::new()),
        false => {
            let gdb = ServerParts::new(&opt.store)?;
            let in_each = |run: &Run, names: Vec<&String>| evaluate_along(&gdb, run, &names, &gdb_exprs);
            (
                in_each(&reference, paired.iter().map(|p| &p.1).collect())?,
                in_each(&other, paired.iter().map(|p| &p.2).collect())?,
            )
        }
    };
    let (mut last_same, mut first_diff) = (None, None);
    for (i, (arrival, ref_name, other_name)) in paired.iter().enumerate() {
        if i > 0 && i % PROGRESS_EVERY == 0 {
            eprintln!("sdt: compared {i} of {} arrivals", paired.len());
        }
        let pair = Pair {
            arrival: *arrival,
            reference: reference.open_snapshot(ref_name)?,
            other: other.open_snapshot(other_name)?,
        };
        let values = (
            ref_values.get(i).map_or(&[][..], Vec::as_slice),
            other_values.get(i).map_or(&[][..], Vec::as_slice),
        );
        let changes = differences(&program, (&pair.reference, &pair.other), &exprs, &tol, values)?;
        if changes.is_empty() {
            last_same = Some(pair);
        } else {
            first_diff = Some((pair, changes));
            break;
        }
    }
    let names = |p: &Pair| {
        (format!("{}:{}", reference.id(), p.reference.name()), format!("{}:{}", other.id(), p.other.name()))
    };
    if opt.json {
        let at = |p: &Pair| {
            let (r, o) = names(p);
            let a = p.arrival;
            json!({"level": a.level, "class": a.class, "id": a.id, "hit": a.hit, "reference": r, "run": o})
        };
        let mut first = first_diff.as_ref().map(|(p, _)| at(p)).unwrap_or(Value::Null);
        if let Some((_, changes)) = &first_diff {
            first["values"] = changes.iter().map(change_json).collect();
        }
        let out = json!({
            "reference": reference.id().0,
            "run": other.id().0,
            "paired": paired.len(),
            "unpaired": unpaired,
            "first_difference": first,
            "last_agreement": last_same.as_ref().map(at),
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else if let Some((p, changes)) = &first_diff {
        let (r, o) = names(p);
        println!("first difference: {} ({r} and {o}); old: reference, new: run {}", p.arrival, other.id());
        for c in changes {
            println!("  {}", change_text(c));
        }
        match &last_same {
            Some(p) => {
                let (r, o) = names(p);
                println!("last agreement: {} ({r} and {o})", p.arrival);
            }
            None => println!("last agreement: none (they differ at the first arrival in common)"),
        }
    } else {
        println!(
            "no difference: run {} agrees with reference run {} at all {} arrivals in common",
            other.id(),
            reference.id(),
            paired.len()
        );
    }
    Ok(if first_diff.is_some() { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}

/// The expressions of `exprs` that gdb evaluates: all but the names of globals and of
/// their members and elements, which the program's DWARF reads.
pub fn for_gdb(program: &Program, exprs: &[String]) -> Vec<String> {
    exprs.iter().filter(|expr| !is_static(program, expr)).cloned().collect()
}

/// Whether `expr` names a global, or a member or element of one.
fn is_static(program: &Program, expr: &str) -> bool {
    let root = expr.split(['.', '[']).next().unwrap_or_default();
    program.variable(root).is_some_and(|v| matches!(v.place, Place::Static(_)))
}

/// The values of `exprs` in snapshots `names` of `run`, one gdb going from one to the
/// next: a list per snapshot.
fn evaluate_along(
    gdb: &ServerParts,
    run: &Run,
    names: &[&String],
    exprs: &[String],
) -> Result<Vec<Vec<Answer>>> {
    let Some(first) = names.first() else { return Ok(Vec::new()) };
    let exe = gdb_program(&run.open_snapshot(first)?)?;
    let snapshots: Vec<_> = names.iter().map(|name| (run.id(), (*name).clone())).collect();
    let evaluated = gdb.evaluate_in_each(&exe, gdb.server(run.id().0, first), &snapshots, exprs)?;
    Ok(evaluated.into_iter().map(|at| at.into_iter().map(|e| e.value).collect()).collect())
}

/// What differs between snapshots `a` and `b`: each of `exprs` (every global when
/// empty) within `tol`, as `a`'s value (`old`) and `b`'s (`new`). A name of a global, or
/// of a member or element of one, is read through the program's DWARF; the others
/// ([`for_gdb`]) gdb evaluated: `gdb_values` holds their values in `a` and in `b`.
pub fn differences(
    program: &Program,
    (a, b): (&Snapshot, &Snapshot),
    exprs: &[String],
    tol: &Tolerance,
    gdb_values: (&[Answer], &[Answer]),
) -> Result<Vec<Change>> {
    if exprs.is_empty() {
        let globals: Vec<&str> = program
            .variables()
            .iter()
            .filter(|v| matches!(v.place, Place::Static(_)))
            .map(|v| v.name.as_str())
            .collect();
        return Ok(program.changes(a, b, Some(&globals), tol)?);
    }
    let mut out = Vec::new();
    for expr in exprs.iter().filter(|expr| is_static(program, expr)) {
        let root = expr.split(['.', '[']).next().unwrap_or_default();
        let within = |name: &str| {
            name.strip_prefix(expr.as_str())
                .is_some_and(|rest| rest.is_empty() || rest.starts_with(['.', '[']))
        };
        out.extend(program.changes(a, b, Some(&[root]), tol)?.into_iter().filter(|c| within(&c.name)));
    }
    let no_value = Err("gdb gave no answer".to_owned());
    for (i, expr) in for_gdb(program, exprs).iter().enumerate() {
        let values = (gdb_values.0.get(i).unwrap_or(&no_value), gdb_values.1.get(i).unwrap_or(&no_value));
        let (old, new) = match values {
            (Ok(old), Ok(new)) => (old.clone(), new.clone()),
            (Err(why), _) | (_, Err(why)) => bail!("gdb cannot evaluate {}: {}", escape(expr), escape(why)),
        };
        if !tol.same_text(&old, &new) {
            out.push(Change { name: expr.clone(), thread: None, old, new, more: 0 });
        }
    }
    Ok(out)
}
