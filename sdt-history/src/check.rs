//! Errors found in a job's history once it ended: the first phase of the two-phase method
//! (find where it went wrong in the history, then look at the state there).
//!
//! - **Deadlock**: ranks whose history ends inside a blocking call that only ranks in the
//!   same situation could have satisfied (a cycle of waits), or only ranks that ended.
//! - **Unreceived**: a message no rank took, whose destination ended or was stuck.
//! - **Truncated**: a receive whose buffer was smaller than the message.
//! - **Never completed**: a non-blocking send, receive or collective that a rank which
//!   reached `MPI_Finalize` never completed.
//! - **Aborted**: a rank called `MPI_Abort`, or an MPI error ended it (one not reported
//!   already as a truncation); ranks waiting on it are stuck, and are reported as such.
//! - **Mismatched collective**: the k-th collective on a communicator is not the same
//!   operation with the same root on every member (a blocking collective never matches a
//!   non-blocking one); members in mismatched collectives never meet.
//!
//! A rank that was still running when its history ends (the job was killed while it
//! computed) could have gone on: nothing waiting on it is reported.

use std::collections::{BTreeMap, HashSet};

use serde::Serialize;

use crate::clock::{self, BLOCKED_SEQ, Instance};
use crate::cut::messages;
use crate::model::{Blocked, Event, EventKind, History, RankHistory};

/// What kind of error a finding is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FindingKind {
    /// The rank waits for ever in a blocking call (see [`Finding::waits_on`]).
    Deadlock,
    /// A message was sent and no rank received it.
    Unreceived,
    /// A message was sent to a rank that ended without receiving it.
    SentToEnded,
    /// A receive's buffer was smaller than the message.
    Truncated,
    /// A non-blocking operation was never completed.
    NeverCompleted,
    /// The rank called `MPI_Abort`.
    Aborted,
    /// An MPI error ended the rank (`MPI_ERRORS_ARE_FATAL`).
    FatalError,
    /// The rank's k-th collective on a communicator is another operation (or root) than
    /// another member's k-th: MPI matches collectives by their order alone.
    CollectiveMismatch,
}

impl FindingKind {
    /// The name `sdt check` prints.
    pub fn name(self) -> &'static str {
        match self {
            FindingKind::Deadlock => "deadlock",
            FindingKind::Unreceived => "unreceived",
            FindingKind::SentToEnded => "sent to an ended rank",
            FindingKind::Truncated => "truncated",
            FindingKind::NeverCompleted => "never completed",
            FindingKind::Aborted => "aborted",
            FindingKind::FatalError => "fatal MPI error",
            FindingKind::CollectiveMismatch => "mismatched collective",
        }
    }
}

/// One error, placed at a rank's event (or at the blocking call its history ends in).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// What is wrong.
    pub kind: FindingKind,
    /// The rank where it shows.
    pub rank: u32,
    /// The event, `None` for the blocking call the history ends inside.
    pub seq: Option<u32>,
    /// Where the program made the call, an index into the rank's sites.
    pub site: Option<u32>,
    /// The other rank involved (the destination, the sender), if one.
    pub peer: Option<u32>,
    /// For a deadlock: the ranks it waits on, all stuck or ended.
    pub waits_on: Vec<u32>,
    /// What happened, in a sentence, without the rank and place (the caller adds them).
    pub what: String,
}

impl Finding {
    /// A finding at event `e`, about its peer.
    fn at(kind: FindingKind, e: &Event, what: String) -> Finding {
        Finding {
            kind,
            rank: e.rank,
            seq: Some(e.seq),
            site: e.site,
            peer: e.peer,
            waits_on: Vec::new(),
            what,
        }
    }
}

/// How a rank's history ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum End {
    /// It called `MPI_Finalize` and is not inside a call.
    Ended,
    /// It called `MPI_Abort`, or an MPI error ended it.
    Aborted,
    /// It is inside a blocking call.
    Blocked,
    /// Neither: it was computing (killed, or the history was read while it ran).
    Running,
}

fn end_of(rh: &RankHistory) -> End {
    if rh.blocked.is_some() {
        End::Blocked
    } else if rh.events.last().is_some_and(|e| e.kind == EventKind::Finalize) {
        End::Ended
    } else if rh.events.last().is_some_and(|e| e.kind.aborts()) {
        End::Aborted
    } else {
        End::Running
    }
}

/// The ranks a blocked call could be released by.
fn could_release(history: &History, rank: u32, b: &Blocked) -> Vec<u32> {
    let members: Vec<u32> = history.ranks[rank as usize]
        .comms
        .iter()
        .find(|c| c.id == b.comm)
        .map_or_else(|| (0..history.ranks.len() as u32).collect(), |c| c.ranks.clone());
    match b.peer {
        Some(peer) if b.kind.collective().is_none() => vec![peer],
        _ => members.into_iter().filter(|&m| m != rank).collect(),
    }
}

/// Whether two blocked calls satisfy each other: a receive and the matching blocking send,
/// or every member inside the same collective.
fn meet(a_rank: u32, a: &Blocked, b_rank: u32, b: &Blocked) -> bool {
    let tag_fits = |want: Option<i32>, have: Option<i32>| want.is_none() || want == have;
    let peer_fits = |want: Option<u32>, have: u32| want.is_none() || want == Some(have);
    let sends = |k: EventKind| matches!(k, EventKind::Send | EventKind::SendDone);
    let receives = |k: EventKind| matches!(k, EventKind::Recv | EventKind::RecvDone | EventKind::Probe);
    match (a.kind, b.kind) {
        // The same operation: a blocking and a non-blocking collective never match.
        (x, y) if x.collective().is_some() => x == y,
        (x, y) if receives(x) && sends(y) => {
            peer_fits(a.peer, b_rank) && b.peer == Some(a_rank) && tag_fits(a.tag, b.tag)
        }
        (x, y) if sends(x) && receives(y) => {
            peer_fits(b.peer, a_rank) && a.peer == Some(b_rank) && tag_fits(b.tag, a.tag)
        }
        _ => false,
    }
}

/// The ranks stuck for ever: blocked, and every rank that could release them is stuck or
/// ended. Found by releasing, until nothing changes, every blocked rank that some running
/// rank, or a blocked rank whose call meets its own, could release.
fn stuck_ranks(history: &History) -> HashSet<u32> {
    let ends: Vec<End> = history.ranks.iter().map(end_of).collect();
    let mut stuck: HashSet<u32> =
        (0..history.ranks.len() as u32).filter(|&r| ends[r as usize] == End::Blocked).collect();
    loop {
        // Whether rank `m` could still act for a call of rank `r`: it is computing, or
        // blocked but not (yet) known stuck, or blocked in a call that meets `r`'s.
        let can_act = |r: u32, b: &Blocked, m: u32| match ends.get(m as usize) {
            Some(End::Running) => true,
            Some(End::Blocked) => {
                let mb = history.ranks[m as usize].blocked.as_ref().expect("blocked ranks have a call");
                !stuck.contains(&m) || meet(r, b, m, mb)
            }
            _ => false,
        };
        let released: Vec<u32> = stuck
            .iter()
            .copied()
            .filter(|&r| {
                let b = history.ranks[r as usize].blocked.as_ref().expect("blocked ranks have a call");
                let others = could_release(history, r, b);
                // A collective needs every member: each must be able to act.
                if b.kind.collective().is_some() {
                    others.iter().all(|&m| can_act(r, b, m))
                } else {
                    others.iter().any(|&m| can_act(r, b, m))
                }
            })
            .collect();
        if released.is_empty() {
            return stuck;
        }
        for r in released {
            stuck.remove(&r);
        }
    }
}

/// Every error the history shows, by rank and event.
pub fn check(history: &History) -> Vec<Finding> {
    let mut findings = Vec::new();
    let stuck = stuck_ranks(history);
    let ends: Vec<End> = history.ranks.iter().map(end_of).collect();
    let mut stuck_sorted: Vec<u32> = stuck.iter().copied().collect();
    stuck_sorted.sort_unstable();
    for &r in &stuck_sorted {
        let b = history.ranks[r as usize].blocked.as_ref().expect("stuck ranks are blocked");
        let waits_on = could_release(history, r, b);
        let call = match (b.kind, b.peer) {
            (EventKind::ICollective(c), _) => {
                let post = open_post(&history.ranks[r as usize], b.kind)
                    .map_or_else(String::new, |seq| format!(" (event {seq})"));
                format!("waiting for its {}{post} to complete on every member", c.posted_name())
            }
            (k, _) if k.collective().is_some() => format!("in {} waiting for every member", k.name()),
            (EventKind::Send | EventKind::SendDone, Some(p)) => format!("sending to rank {p}"),
            (_, Some(p)) => format!("receiving from rank {p}"),
            (_, None) => "receiving from any rank".to_owned(),
        };
        let others: Vec<String> = waits_on
            .iter()
            .map(|&m| match ends.get(m as usize) {
                Some(End::Ended) => format!("rank {m} ended"),
                Some(End::Aborted) => format!("rank {m} aborted"),
                _ => format!("rank {m} is stuck too"),
            })
            .collect();
        findings.push(Finding {
            kind: FindingKind::Deadlock,
            rank: r,
            seq: None,
            site: b.site,
            peer: b.peer,
            waits_on,
            what: format!("blocked for ever {call}: {}", others.join(", ")),
        });
    }
    for m in messages(history) {
        if m.recv.is_some() {
            continue;
        }
        let site = history.event(m.send.0, m.send.1).and_then(|e| e.site);
        let (kind, what) = match ends.get(m.to as usize) {
            Some(End::Ended) => (
                FindingKind::SentToEnded,
                format!(
                    "message to rank {} (tag {}, {} bytes) was never received: rank {} ended",
                    m.to,
                    tag_text(m.tag),
                    m.bytes,
                    m.to
                ),
            ),
            Some(End::Blocked) => (
                FindingKind::Unreceived,
                format!(
                    "message to rank {} (tag {}, {} bytes) was never received",
                    m.to,
                    tag_text(m.tag),
                    m.bytes
                ),
            ),
            _ => continue,
        };
        findings.push(Finding {
            kind,
            rank: m.send.0,
            seq: Some(m.send.1),
            site,
            peer: Some(m.to),
            waits_on: Vec::new(),
            what,
        });
    }
    for rh in &history.ranks {
        for (i, e) in rh.events.iter().enumerate().filter(|(_, e)| e.kind.aborts()) {
            let code = e.tag.map_or_else(|| "?".to_owned(), |c| c.to_string());
            let finding = if e.kind == EventKind::Abort {
                Finding::at(FindingKind::Aborted, e, format!("aborted the job with error code {code}"))
            } else if i > 0 && rh.events[i - 1].truncated {
                continue; // the truncation, reported, is what ended the rank
            } else {
                Finding::at(FindingKind::FatalError, e, format!("an MPI error (code {code}) ended the job"))
            };
            findings.push(finding);
        }
        for e in rh.events.iter().filter(|e| e.truncated) {
            let what = format!(
                "receive from rank {} (tag {}) got a message larger than its buffer of {} bytes",
                e.peer.map_or_else(|| "?".to_owned(), |p| p.to_string()),
                tag_text(e.tag),
                e.bytes
            );
            findings.push(Finding::at(FindingKind::Truncated, e, what));
        }
        if ends[rh.rank as usize] != End::Ended {
            continue;
        }
        let completed: HashSet<u32> = rh.events.iter().filter_map(|e| e.post).collect();
        let posts =
            |k: EventKind| matches!(k, EventKind::Isend | EventKind::Irecv | EventKind::ICollective(_));
        for e in rh.events.iter().filter(|e| posts(e.kind) && !completed.contains(&e.seq)) {
            let peer = e.peer.map_or_else(|| "any rank".to_owned(), |p| format!("rank {p}"));
            let op = match e.kind {
                EventKind::Isend => format!("send to {peer} (tag {})", tag_text(e.tag)),
                EventKind::Irecv => format!("receive from {peer} (tag {})", tag_text(e.tag)),
                k => format!("collective ({})", k.name()),
            };
            let what = format!("non-blocking {op} was never completed before MPI_Finalize");
            findings.push(Finding::at(FindingKind::NeverCompleted, e, what));
        }
    }
    findings.extend(mismatched_collectives(history));
    findings
}

/// The members whose k-th collective on a communicator differs from that of its lowest
/// member that made one (blocked in it, for a blocking collective the history ends in):
/// another operation, or another root.
fn mismatched_collectives(history: &History) -> Vec<Finding> {
    // A history whose communicators are unknown has its clock error said elsewhere.
    let Ok(instances) = clock::collective_instances(history) else { return Vec::new() };
    let mut by_instance: BTreeMap<&Instance, Vec<(u32, u32)>> = BTreeMap::new();
    for (member, instance) in &instances {
        by_instance.entry(instance).or_default().push(*member);
    }
    // The operation a member made: its kind and root, where it made it.
    let made = |(rank, seq): (u32, u32)| -> Option<(EventKind, Option<u32>, Option<u32>)> {
        match seq {
            BLOCKED_SEQ => {
                history.ranks.get(rank as usize)?.blocked.as_ref().map(|b| (b.kind, b.peer, b.site))
            }
            seq => history.event(rank, seq).map(|e| (e.kind, e.peer, e.site)),
        }
    };
    let text = |(kind, root, _): (EventKind, Option<u32>, Option<u32>)| match root {
        Some(root) => format!("{} (root {root})", kind.name()),
        None => kind.name().to_owned(),
    };
    let mut findings = Vec::new();
    for (instance, mut members) in by_instance {
        members.sort_unstable();
        let Some((&first, others)) = members.split_first() else { continue };
        let Some(theirs) = made(first) else { continue };
        for &(rank, seq) in others {
            let Some(ours) = made((rank, seq)) else { continue };
            if (ours.0, ours.1) == (theirs.0, theirs.1) {
                continue;
            }
            let why = match ours.0.collective() == theirs.0.collective() && ours.1 == theirs.1 {
                true => " (a blocking and a non-blocking collective never match)",
                false => "",
            };
            findings.push(Finding {
                kind: FindingKind::CollectiveMismatch,
                rank,
                seq: (seq != BLOCKED_SEQ).then_some(seq),
                site: ours.2,
                peer: Some(first.0),
                waits_on: Vec::new(),
                what: format!(
                    "its collective number {} on its communicator is {}, where rank {}'s is {}{why}",
                    instance.2 + 1,
                    text(ours),
                    first.0,
                    text(theirs)
                ),
            });
        }
    }
    findings
}

/// The rank's last post of kind `kind` that nothing completed.
fn open_post(rh: &RankHistory, kind: EventKind) -> Option<u32> {
    let completed: HashSet<u32> = rh.events.iter().filter_map(|e| e.post).collect();
    rh.events.iter().rev().find(|e| e.kind == kind && !completed.contains(&e.seq)).map(|e| e.seq)
}

fn tag_text(tag: Option<i32>) -> String {
    tag.map_or_else(|| "any".to_owned(), |t| t.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::CollectiveKind;
    use crate::testing::{HistoryBuilder, Op};

    fn kinds(findings: &[Finding]) -> Vec<(FindingKind, u32, Option<u32>)> {
        findings.iter().map(|f| (f.kind, f.rank, f.seq)).collect()
    }

    #[test]
    fn a_clean_job_has_no_findings() {
        let mut h = HistoryBuilder::new(2);
        let s = h.push(0, Op::Isend { to: 1, tag: 1 });
        let posted = h.push(1, Op::Irecv { from: None, tag: Some(1) });
        h.push(1, Op::RecvDone { from: 0, matched: s.1, post: posted.1, tag: 1 });
        h.push(0, Op::SendDone { post: s.1 });
        for r in 0..2 {
            h.push(r, Op::Collective(CollectiveKind::Barrier, None));
            h.push(r, Op::Finalize);
        }
        assert_eq!(check(&h.build()), []);
    }

    #[test]
    fn two_ranks_receiving_from_each_other_deadlock_and_a_third_running_one_does_not() {
        let mut h = HistoryBuilder::new(3);
        h.push(0, Op::Init);
        h.push(1, Op::Init);
        h.blocked(0, EventKind::Recv, Some(1));
        h.blocked(1, EventKind::Recv, Some(0));
        h.blocked(2, EventKind::Recv, Some(0));
        let findings = check(&h.build());
        assert_eq!(
            kinds(&findings),
            [
                (FindingKind::Deadlock, 0, None),
                (FindingKind::Deadlock, 1, None),
                (FindingKind::Deadlock, 2, None)
            ]
        );
        assert_eq!(findings[0].waits_on, [1]);

        // Rank 2 still computing could send to rank 1... but 1 waits on 0 only: still stuck.
        // A rank waiting on a running rank is not reported.
        let mut h = HistoryBuilder::new(3);
        h.blocked(0, EventKind::Recv, Some(2));
        h.blocked(1, EventKind::Recv, None);
        h.push(2, Op::Init);
        assert_eq!(check(&h.build()), []);
    }

    #[test]
    fn a_job_killed_inside_a_barrier_every_rank_reached_or_a_matching_send_is_not_a_deadlock() {
        let mut h = HistoryBuilder::new(3);
        for r in 0..3 {
            h.blocked(r, EventKind::Collective(CollectiveKind::Barrier), None);
        }
        assert_eq!(check(&h.build()), []);

        let mut h = HistoryBuilder::new(2);
        h.blocked(0, EventKind::Send, Some(1));
        h.blocked(1, EventKind::Recv, None);
        assert_eq!(check(&h.build()), []);

        // Two of three in the barrier, the third ended: stuck.
        let mut h = HistoryBuilder::new(3);
        h.blocked(0, EventKind::Collective(CollectiveKind::Barrier), None);
        h.blocked(1, EventKind::Collective(CollectiveKind::Barrier), None);
        h.push(2, Op::Finalize);
        let findings = check(&h.build());
        assert_eq!(kinds(&findings), [(FindingKind::Deadlock, 0, None), (FindingKind::Deadlock, 1, None)]);
        assert!(findings[0].what.contains("rank 2 ended"), "{}", findings[0].what);
    }

    #[test]
    fn a_rank_waiting_for_its_ibarrier_while_another_waits_for_its_message_deadlocks() {
        let mut h = HistoryBuilder::new(2);
        h.push(0, Op::ICollective(CollectiveKind::Barrier, None));
        h.blocked(0, EventKind::ICollective(CollectiveKind::Barrier), None);
        h.blocked(1, EventKind::Recv, Some(0));
        let findings = check(&h.build());
        assert_eq!(kinds(&findings), [(FindingKind::Deadlock, 0, None), (FindingKind::Deadlock, 1, None)]);
        assert!(
            findings[0].what.contains("waiting for its ibarrier (event 0) to complete on every member"),
            "{}",
            findings[0].what
        );

        // Both waiting for the ibarrier they posted: MPI completes it once all are there.
        let mut h = HistoryBuilder::new(2);
        for r in 0..2 {
            h.push(r, Op::ICollective(CollectiveKind::Barrier, None));
            h.blocked(r, EventKind::ICollective(CollectiveKind::Barrier), None);
        }
        assert_eq!(check(&h.build()), []);
    }

    #[test]
    fn a_barrier_and_an_ibarrier_never_meet_and_are_a_mismatch() {
        use CollectiveKind::{Barrier, Bcast, Reduce};
        let mut h = HistoryBuilder::new(3);
        h.blocked(0, EventKind::Collective(Barrier), None);
        let posts: Vec<_> = (1..3).map(|r| h.push(r, Op::ICollective(Barrier, None))).collect();
        for r in 1..3 {
            h.blocked(r, EventKind::ICollective(Barrier), None);
        }
        let findings = check(&h.build());
        let (mismatch, posts) = (FindingKind::CollectiveMismatch, posts.iter().map(|p| Some(p.1)));
        let expected: Vec<_> = (0..3)
            .map(|r| (FindingKind::Deadlock, r, None))
            .chain((1..3).zip(posts).map(|(r, seq)| (mismatch, r, seq)))
            .collect();
        assert_eq!(kinds(&findings), expected);
        assert_eq!(
            findings[3].what,
            "its collective number 1 on its communicator is ibarrier, where rank 0's is barrier (a blocking and \
             a non-blocking collective never match)"
        );

        // Two collectives that both completed, another operation or another root.
        let mut h = HistoryBuilder::new(3);
        h.push(0, Op::Collective(Bcast, Some(0)));
        h.push(1, Op::Collective(Bcast, Some(1)));
        h.push(2, Op::Collective(Reduce, Some(0)));
        let findings = check(&h.build());
        assert_eq!(kinds(&findings), [(mismatch, 1, Some(0)), (mismatch, 2, Some(0))]);
        assert!(
            findings[0].what.ends_with("is bcast (root 1), where rank 0's is bcast (root 0)"),
            "{:?}",
            findings[0]
        );
        assert!(
            findings[1].what.ends_with("is reduce (root 0), where rank 0's is bcast (root 0)"),
            "{:?}",
            findings[1]
        );
    }

    #[test]
    fn an_abort_is_placed_at_its_call_and_the_ranks_waiting_on_it_are_stuck() {
        let mut h = HistoryBuilder::new(3);
        h.blocked(0, EventKind::Recv, Some(1));
        h.push(1, Op::Send { to: 2, tag: 4 });
        let abort = h.push(1, Op::Abort { code: -3 });
        h.push(2, Op::Init);
        let findings = check(&h.build());
        // Rank 2, computing, could have gone on; its unreceived message is not an error of
        // its own.
        assert_eq!(
            kinds(&findings),
            [(FindingKind::Deadlock, 0, None), (FindingKind::Aborted, 1, Some(abort.1))]
        );
        assert!(findings[0].what.ends_with("receiving from rank 1: rank 1 aborted"), "{}", findings[0].what);
        assert_eq!(findings[1].what, "aborted the job with error code -3");

        // An MPI error that ended a rank is its own finding, unless it was a truncation.
        let mut h = HistoryBuilder::new(2);
        let big = h.push(0, Op::Send { to: 1, tag: 2 });
        let fatal = h.push(0, Op::FatalError { code: 6 });
        h.push(1, Op::Truncated { from: 0, matched: big.1, tag: 2 });
        h.push(1, Op::FatalError { code: 15 });
        let findings = check(&h.build());
        assert_eq!(
            kinds(&findings),
            [(FindingKind::FatalError, 0, Some(fatal.1)), (FindingKind::Truncated, 1, Some(0))]
        );
        assert_eq!(findings[0].what, "an MPI error (code 6) ended the job");
    }

    #[test]
    fn unreceived_messages_truncations_and_uncompleted_requests_are_placed_at_their_events() {
        let mut h = HistoryBuilder::new(3);
        let lost = h.push(0, Op::Send { to: 1, tag: 5 });
        let big = h.push(0, Op::Send { to: 2, tag: 6 });
        h.push(2, Op::Truncated { from: 0, matched: big.1, tag: 6 });
        let pending = h.push(2, Op::Irecv { from: None, tag: Some(9) });
        let reduced: Vec<_> =
            (0..3).map(|r| h.push(r, Op::ICollective(CollectiveKind::Allreduce, None))).collect();
        for r in 0..2 {
            h.push(r, Op::CollectiveDone { post: reduced[r as usize].1 });
        }
        for r in 0..3 {
            h.push(r, Op::Finalize);
        }
        let findings = check(&h.build());
        assert_eq!(
            kinds(&findings),
            [
                (FindingKind::SentToEnded, 0, Some(lost.1)),
                (FindingKind::Truncated, 2, Some(0)),
                (FindingKind::NeverCompleted, 2, Some(pending.1)),
                (FindingKind::NeverCompleted, 2, Some(reduced[2].1)),
            ]
        );
        assert!(findings[2].what.contains("receive from any rank (tag 9)"), "{}", findings[2].what);
        assert!(findings[3].what.contains("non-blocking collective (iallreduce)"), "{}", findings[3].what);
    }
}
