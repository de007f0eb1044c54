//! Resuming stored snapshots under capture, and refinement (`sdt refine`): S1 resumed
//! under a finer capture config until the program reaches S2's breakpoint again, where
//! S2.new is taken; the key variables decide whether S2.new reproduced S2, and the
//! interval runs again until one does or the attempts are spent.
//!
//! ```text
//!  run 1:   S0 ── S1 ─────────────────────────── S2 ── S3
//!                 │ resumed, captured finer        ↕ key values compared
//!  run 2:         └ S1.0 ── S1.1 ── … ───────── S2.new   (refines S1..S2 of run 1)
//! ```
//!
//! ```no_run
//! use sdt_refine::{Attempts, Interval, KeyValues, Verdict};
//! use sdt_store::{Run, Snapshot, Store};
//!
//! let store = Store::open(".sdt".as_ref())?;
//! let run = store.open_run(&store.latest_run()?)?;
//! let from = run.open_snapshot("S1")?;
//! let interval = Interval::new(&run, &from, "S2")?;
//! // `sdt refine` reads the values with gdb, over `sdt gdbserver`.
//! let evaluate = |_: &Run, snap: &Snapshot, exprs: &[String]| -> Result<KeyValues, std::io::Error> {
//!     Ok(exprs.iter().map(|_| Ok(snap.meta().seq.to_string())).collect())
//! };
//! let expected = interval.expect(vec!["total".into()], evaluate)?;
//! let attempts = Attempts {
//!     store: ".sdt".into(),
//!     config: sdt_daemon::CaptureConfig::parse("max_level = 3", "inline").unwrap(),
//!     quiet: true,
//!     backend: sdt_daemon::Backend::Ptrace,
//!     count: 3,
//!     timeout: None,
//! };
//! let verdict = interval.refine(&expected, &attempts, evaluate, |_| {})?;
//! println!("{}", matches!(verdict, Verdict::Reproduced { .. }));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Design constraints
//!
//! - The crate sits above the capture (`sdt-daemon`) and the restorer (`sdt-restore`),
//!   which know nothing of each other: the capture takes a stored snapshot's process from
//!   a [`sdt_daemon::Restorer`], and [`Restore`] is the built-in one.
//! - A resume that captures takes the credentials its snapshot recorded
//!   ([`Restore::recorded`]).
//! - The key values are read by the caller's evaluator (`sdt refine` runs gdb on each
//!   snapshot, over `sdt gdbserver`); this crate runs the attempts and gives the verdict.
//! - A run that does not reach S2's breakpoint in its time (the bug may be a hang) is
//!   snapshotted where it is and ended, and counts as an attempt that did not reproduce.

#![deny(missing_docs)]
#![deny(unsafe_code)]

mod restore;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use sdt_daemon::{
    Backend, CaptureConfig, Error, ProgramExit, RestoreFrom, RunOptions, RunOutcome, Target, Tracking, Until,
};
use sdt_store::{Run, RunId, Snapshot, Store, Trigger};

pub use restore::Restore;

/// The least time a run again has by default.
const MIN_TIME_ALLOWED: Duration = Duration::from_secs(60);

/// How long a run again (of an interval, of a job) has, when the original took `took`:
/// `asked` (`--timeout`; zero for no limit), else ten times `took` (a finer config
/// captures more on the way), and at least a minute. `None`: no limit.
pub fn time_limit(asked: Option<Duration>, took: Duration) -> Option<Duration> {
    match asked {
        Some(Duration::ZERO) => None,
        Some(limit) => Some(limit),
        None => Some(took.saturating_mul(10).max(MIN_TIME_ALLOWED)),
    }
}

/// The values of the key expressions in one snapshot, in order: each its value as text,
/// or why it has none.
pub type KeyValues = Vec<Result<String, String>>;

/// Why a refinement cannot be made, or stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RefineError {
    /// S2 is not a snapshot of S1's run.
    #[error("--to must name a snapshot of the run that holds {from}")]
    NotInRun {
        /// S1.
        from: String,
        /// Why S2 cannot be opened there.
        #[source]
        source: sdt_store::Error,
    },
    /// S2 was taken before S1.
    #[error("--to {to} was taken before --from {from}: nothing lies between them")]
    Backwards {
        /// S1.
        from: String,
        /// S2.
        to: String,
    },
    /// S2 was not taken at a breakpoint (a timed snapshot, or one at a fatal signal): no
    /// breakpoint ends the interval.
    #[error("{to} is {what}: a refinement ends at a breakpoint snapshot")]
    NotABreakpoint {
        /// S2.
        to: String,
        /// What took it: `a timed snapshot`, `the snapshot at SIGSEGV`.
        what: String,
    },
    /// A key expression has no value in S2: nothing could be compared.
    #[error("--check {expr}: gdb cannot evaluate it in {snapshot}: {why}")]
    Unevaluable {
        /// The expression.
        expr: String,
        /// S2.
        snapshot: String,
        /// What the evaluator said.
        why: String,
    },
    /// The evaluator failed.
    #[error(transparent)]
    Evaluate(Box<dyn std::error::Error + Send + Sync>),
    /// S1 could not be resumed, or its run failed.
    #[error("resuming {from}")]
    Resume {
        /// S1.
        from: String,
        /// Why.
        #[source]
        source: Error,
    },
    /// The store could not be read.
    #[error(transparent)]
    Store(#[from] sdt_store::Error),
}

/// S1..S2 of one run, the interval a refinement runs again: S2 comes after S1, at a
/// breakpoint.
pub struct Interval<'r> {
    run: &'r Run,
    from: &'r Snapshot,
    to: Snapshot,
    until: Until,
}

/// The key expressions, and their values in S2.
pub struct Expected {
    exprs: Vec<String>,
    values: KeyValues,
}

/// How each attempt runs.
#[derive(Clone, Debug)]
pub struct Attempts {
    /// The store S1's run is in; the refinements go there too.
    pub store: PathBuf,
    /// The capture config of the refinement runs.
    pub config: CaptureConfig,
    /// No line per snapshot.
    pub quiet: bool,
    /// How the program's threads are stopped.
    pub backend: Backend,
    /// Runs of the interval at most (at least one).
    pub count: u32,
    /// How long each run has to reach S2's breakpoint before it is snapshotted where it
    /// is and ended: `None` for the default ([`time_limit`] of [`Interval::took`]),
    /// [`Duration::ZERO`] for no limit.
    pub timeout: Option<Duration>,
}

/// What a refinement says as it goes.
#[derive(Debug)]
pub enum Progress<'p> {
    /// Attempt `attempt` of `of` starts: S1 resumes.
    Starting {
        /// From 1.
        attempt: u32,
        /// Attempts at most.
        of: u32,
    },
    /// The attempt's run ended.
    Ran(&'p RunOutcome),
    /// The run ended before the program reached S2's breakpoint (it ended, or its time
    /// ran out: [`ProgramExit::TimedOut`]): no S2.new.
    NotReached(&'p RunOutcome),
    /// S2.new was taken and compared with S2.
    Compared(&'p Comparison),
}

/// S2.new's key values beside S2's.
#[derive(Clone, Debug)]
pub struct Comparison {
    /// The attempt, from 1.
    pub attempt: u32,
    /// The attempt's run.
    pub run: RunId,
    /// S2.new's name.
    pub new: String,
    /// One per key expression, in order.
    pub rows: Vec<Row>,
}

/// One key expression in S2 and S2.new.
#[derive(Clone, Debug)]
pub struct Row {
    /// The expression.
    pub expr: String,
    /// Its value in S2.
    pub expected: Result<String, String>,
    /// Its value in S2.new.
    pub got: Result<String, String>,
    /// Both have the same value.
    pub same: bool,
}

impl Comparison {
    /// Whether S2.new reproduced S2: every key value is the same.
    pub fn reproduced(&self) -> bool {
        self.rows.iter().all(|r| r.same)
    }
}

/// How a refinement ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Attempt `attempt` (in run `run`) reproduced S2.
    Reproduced {
        /// From 1.
        attempt: u32,
        /// Its run.
        run: RunId,
    },
    /// No attempt did.
    NotReproduced {
        /// How many ran.
        attempts: u32,
    },
}

#[allow(
    clippy::result_large_err,
    reason = "RefineError holds the run's Error unboxed, for callers to find in the source chain"
)]
impl<'r> Interval<'r> {
    /// The interval from `from`, a snapshot of `run`, to its snapshot named `to`.
    pub fn new(run: &'r Run, from: &'r Snapshot, to: &str) -> Result<Interval<'r>, RefineError> {
        let to = run
            .open_snapshot(to)
            .map_err(|source| RefineError::NotInRun { from: from.name().to_owned(), source })?;
        if to.meta().seq <= from.meta().seq {
            return Err(RefineError::Backwards { from: from.name().to_owned(), to: to.name().to_owned() });
        }
        let (level, class, id, hit) = match to.meta().trigger {
            Trigger::Breakpoint { level, class, id, hit, .. } => (level, class, id, hit),
            Trigger::Timer => {
                let what = "a timed snapshot".to_owned();
                return Err(RefineError::NotABreakpoint { to: to.name().to_owned(), what });
            }
            Trigger::Signal { signo, .. } => {
                let what = format!("the snapshot at {}", sdt_store::signal_name(signo));
                return Err(RefineError::NotABreakpoint { to: to.name().to_owned(), what });
            }
        };
        let until = Until { name: to.name().to_owned(), level, class, id, hit };
        Ok(Interval { run, from, to, until })
    }

    /// S2.
    pub fn to(&self) -> &Snapshot {
        &self.to
    }

    /// The breakpoint arrival that ends it (S2's).
    pub fn until(&self) -> &Until {
        &self.until
    }

    /// What the interval took when S1 and S2 were taken.
    pub fn took(&self) -> Duration {
        let from = self.from.meta().time.since_start_ns;
        Duration::from_nanos(self.to.meta().time.since_start_ns.saturating_sub(from))
    }

    /// The values of `exprs` in S2, as `evaluate` reads them (in a run, from a snapshot);
    /// an error names the first expression that has none there.
    pub fn expect<E>(
        &self,
        exprs: Vec<String>,
        mut evaluate: impl FnMut(&Run, &Snapshot, &[String]) -> Result<KeyValues, E>,
    ) -> Result<Expected, RefineError>
    where
        E: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let values = evaluate(self.run, &self.to, &exprs).map_err(|e| RefineError::Evaluate(e.into()))?;
        for (expr, value) in exprs.iter().zip(&values) {
            if let Err(why) = value {
                let snapshot = self.to.name().to_owned();
                return Err(RefineError::Unevaluable { expr: expr.clone(), snapshot, why: why.clone() });
            }
        }
        Ok(Expected { exprs, values })
    }

    /// Runs the interval again, as `attempts` says, until an S2.new has the `expected`
    /// values (read by `evaluate`); says how each attempt goes through `progress`.
    pub fn refine<E>(
        &self,
        expected: &Expected,
        attempts: &Attempts,
        mut evaluate: impl FnMut(&Run, &Snapshot, &[String]) -> Result<KeyValues, E>,
        mut progress: impl FnMut(Progress<'_>),
    ) -> Result<Verdict, RefineError>
    where
        E: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let store = Store::open(&attempts.store)?;
        let opts = self.run_options(attempts);
        for attempt in 1..=attempts.count {
            progress(Progress::Starting { attempt, of: attempts.count });
            let outcome = sdt_daemon::run(&opts)
                .map_err(|source| RefineError::Resume { from: self.from.name().to_owned(), source })?;
            progress(Progress::Ran(&outcome));
            let ProgramExit::Stopped = outcome.exit else {
                progress(Progress::NotReached(&outcome));
                continue;
            };
            let child = store.open_run(&outcome.run)?;
            let new = child.open_snapshot(&format!("{}.new", self.until.name))?;
            let got = evaluate(&child, &new, &expected.exprs).map_err(|e| RefineError::Evaluate(e.into()))?;
            let comparison = Comparison {
                attempt,
                run: child.id(),
                new: new.name().to_owned(),
                rows: compare(expected, got),
            };
            progress(Progress::Compared(&comparison));
            if comparison.reproduced() {
                return Ok(Verdict::Reproduced { attempt, run: child.id() });
            }
        }
        Ok(Verdict::NotReproduced { attempts: attempts.count })
    }

    /// What each attempt's run is asked.
    fn run_options(&self, attempts: &Attempts) -> RunOptions {
        RunOptions {
            target: Target::Restore(RestoreFrom {
                run: self.run.id(),
                snapshot: self.from.name().to_owned(),
                until: Some(self.until.clone()),
                restorer: Arc::new(Restore::recorded(Vec::new())),
            }),
            store: attempts.store.clone(),
            config: attempts.config.clone(),
            verify: false,
            wait_for_compaction: false,
            quiet: attempts.quiet,
            tracking: Tracking::Auto,
            disk_budget: None,
            backend: attempts.backend,
            breaks: Vec::new(),
            job: None,
            // A restored process has its library loaded already, or none.
            mpi_history: false,
            mpi_replay: None,
            mpi_stop: None,
            signal_snapshots: true,
            time_limit: time_limit(attempts.timeout, self.took()),
        }
    }
}

/// The `expected` values beside those `got`: the same where both are values and equal.
fn compare(expected: &Expected, got: KeyValues) -> Vec<Row> {
    let got = got.into_iter().chain(std::iter::repeat_with(|| Err("no value".to_owned())));
    expected
        .exprs
        .iter()
        .zip(&expected.values)
        .zip(got)
        .map(|((expr, expected), got)| Row {
            expr: expr.clone(),
            same: expected.is_ok() && *expected == got,
            expected: expected.clone(),
            got,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_again_has_ten_times_the_original_at_least_a_minute_or_what_was_asked() {
        let secs = Duration::from_secs;
        assert_eq!(time_limit(None, secs(2)), Some(secs(60)));
        assert_eq!(time_limit(None, secs(10)), Some(secs(100)));
        assert_eq!(time_limit(Some(secs(3)), secs(10)), Some(secs(3)));
        assert_eq!(time_limit(Some(Duration::ZERO), secs(10)), None);
    }

    #[test]
    fn rows_are_the_same_only_for_equal_values() {
        let expected = Expected {
            exprs: ["a", "b", "c"].map(String::from).to_vec(),
            values: vec![Ok("1".into()), Ok("2".into()), Ok("3".into())],
        };
        let rows = compare(&expected, vec![Ok("1".into()), Ok("5".into()), Err("gone".into())]);
        assert_eq!(rows.iter().map(|r| r.same).collect::<Vec<_>>(), [true, false, false]);
        let rows = compare(&expected, vec![Ok("1".into())]);
        assert_eq!(rows.len(), 3, "a value missing from what the evaluator gave is no value");
        assert!(!rows[2].same);
        let all_same = Comparison {
            attempt: 1,
            run: RunId(2),
            new: "S2.new".into(),
            rows: compare(&expected, expected.values.clone()),
        };
        assert!(all_same.reproduced());
    }
}
