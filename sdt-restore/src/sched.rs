//! Each thread's scheduling, set again from outside once the threads exist: the CPUs it
//! may run on (a program that pins its threads keeps them pinned), its policy and its
//! nice value. None of it decides whether the program can run, so what cannot be set
//! (CPUs no longer in the restorer's cpuset, a priority the restorer may not give) is
//! said in a warning and left as the restorer's.
//!
//! What a store records is trusted only as far as its owner has it: from a store of a
//! user other than root, no thread gets a real-time policy or a nice value below 0 (a
//! higher priority than a user may take), whoever restores it.

use sdt_store::{OwnerRights, ThreadScheduling};
use sdt_sys::sched::{self, Scheduling};

use crate::RestoredThread;

/// Gives each of `threads` the scheduling `recorded` holds for it, as far as `rights`
/// let the store's owner have it.
pub(crate) fn set(threads: &[RestoredThread], recorded: &[ThreadScheduling], rights: &OwnerRights) {
    let users_store = !rights.owners().is_empty();
    for t in threads {
        let Some(had) = recorded.iter().find(|s| s.tid == t.tid) else { continue };
        let Ok(now) = sched::of(t.host) else { continue };
        let want = wanted(had, users_store);
        if let Some(reason) = want.reason {
            log::warn!("thread {} resumes without the {} it had: {reason}", t.tid, had.unusual());
        }
        if want.cpus.is_none() {
            log::warn!(
                "thread {}: its recorded CPUs ({:?}) are not a CPU list: it keeps the restorer's",
                t.tid,
                had.cpus
            );
        }
        apply(t, &now, &want);
    }
}

/// The scheduling to give a thread that had `had`.
#[derive(Debug, PartialEq, Eq)]
struct Wanted {
    /// CPUs, `None` if the recorded list does not read.
    cpus: Option<Vec<usize>>,
    /// Policy and priority, `None` to leave it.
    policy: Option<(i32, i32)>,
    nice: i32,
    /// Why it is less than `had`, if it is.
    reason: Option<&'static str>,
}

/// What a thread that had `had` gets: all of it from root's store; from a user's
/// (`users_store`), no real-time policy and no negative nice value.
fn wanted(had: &ThreadScheduling, users_store: bool) -> Wanted {
    let cpus = had.cpu_numbers().filter(|c| !c.is_empty());
    let raises = had.is_realtime() || had.nice < 0;
    if users_store && raises {
        let reason = "its store's owner is not root, and a user's thread cannot be given a higher priority";
        let policy = (!had.is_realtime()).then_some((had.policy, had.priority));
        return Wanted { cpus, policy, nice: had.nice.max(0), reason: Some(reason) };
    }
    Wanted { cpus, policy: Some((had.policy, had.priority)), nice: had.nice, reason: None }
}

/// Sets what differs from `now`, warning for each call the kernel refuses.
fn apply(t: &RestoredThread, now: &Scheduling, want: &Wanted) {
    let refused = |what: &str, e: sdt_sys::Error| {
        log::warn!("thread {} resumes without {what}: {e}: {}", t.tid, e.source);
    };
    if let Some(cpus) = want.cpus.as_ref().filter(|&c| *c != now.cpus) {
        let list = ThreadScheduling::cpu_list(cpus);
        if let Err(e) = sched::set_cpus(t.host, cpus) {
            refused(&format!("its CPUs ({list})"), e);
        }
    }
    if let Some((policy, priority)) = want.policy.filter(|&p| p != (now.policy, now.priority))
        && let Err(e) = sched::set_policy(t.host, policy, priority)
    {
        refused("its scheduling policy", e);
    }
    if want.nice != now.nice
        && let Err(e) = sched::set_nice(t.host, want.nice)
    {
        refused(&format!("its nice value ({})", want.nice), e);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn had(policy: i32, priority: i32, nice: i32, cpus: &str) -> ThreadScheduling {
        ThreadScheduling { tid: 7, policy, priority, nice, cpus: cpus.into() }
    }

    #[test]
    fn roots_store_gives_all_it_recorded() {
        let w = wanted(&had(1, 10, -5, "0,2"), false);
        assert_eq!(w, Wanted { cpus: Some(vec![0, 2]), policy: Some((1, 10)), nice: -5, reason: None });
    }

    #[test]
    fn a_users_store_gives_no_higher_priority_than_a_user_may_take() {
        let w = wanted(&had(2, 50, -3, "1"), true);
        assert_eq!((w.policy, w.nice, w.cpus), (None, 0, Some(vec![1])));
        assert!(w.reason.is_some());
        let batch = wanted(&had(3, 0, 7, "0-1"), true);
        assert_eq!((batch.policy, batch.nice, batch.reason), (Some((3, 0)), 7, None));
    }

    #[test]
    fn an_unreadable_cpu_list_is_left_out() {
        assert_eq!(wanted(&had(0, 0, 0, "x"), false).cpus, None);
        assert_eq!(wanted(&had(0, 0, 0, ""), false).cpus, None);
    }
}
