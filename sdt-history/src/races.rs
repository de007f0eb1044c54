//! Message races, and the few matches a replay must enforce to repeat a run.
//!
//! The only nondeterminism of a correct message-passing program is which message a
//! receive that could take several actually takes. A replay that makes every such match
//! happen again repeats the run; it need not pin every receive. The method (Netzer and
//! Miller's optimal tracing, computed here from the finished history and its clocks):
//!
//! - For a receive R that took message m (sent by S), look at the receives R' of the same
//!   rank *earlier in matching order* that could also have taken m: the same
//!   communicator, a source of S's rank or `MPI_ANY_SOURCE`, m's tag or `MPI_ANY_TAG`.
//!   Matching order is posting order: a blocking receive matches at its own event, a
//!   posted one at its `Irecv`; completions of posted receives count as receives.
//! - m *races* with m' (what R' took, sent by S') when R' did not happen before S: m
//!   could have reached R' first.
//! - S→R is recorded when some such R' races with it, S' is not an earlier send of the
//!   same rank on the same communicator (MPI's non-overtaking rule lets m' pass first),
//!   and S'→R' was not itself recorded (the replay already pins R', so m cannot reach it:
//!   this keeps the record minimal where races are not transitive).
//!
//! A replay then works as the record says: a recorded message travels apart from the
//! others and only its recorded receive takes it; an unrecorded receive takes, among the
//! messages that remain, the one it took before, since every other candidate is recorded
//! for a later receive or comes after its own message on the same channel.
//!
//! Wildcard probes (`MPI_Probe`/`MPI_Iprobe` with `MPI_ANY_SOURCE` or `MPI_ANY_TAG`) see a
//! message without taking it, and their event does not say which: each one's source and
//! tag is recorded.
//!
//! A match whose receive, probe or send has a fixed route ([`Event::fixed_route`]: a
//! persistent request, a matched probe) cannot be enforced, and is left out.

use std::collections::HashSet;

use crate::clock::Clocks;
use crate::model::{Event, EventKind, History, RankHistory};
use crate::replay;

/// A match the replay enforces: the receive (or wildcard probe) `(rank, seq)` gets the
/// message of `source` with `tag`, sent by its event `send`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Enforced {
    /// The receiving rank.
    pub rank: u32,
    /// The receive's (or probe's) event.
    pub seq: u32,
    /// For a completion of a posted receive, its `Irecv`: where the replay posts it.
    pub post: Option<u32>,
    /// The sending rank.
    pub source: u32,
    /// The send's event; `None` for a probe, which does not say which message it saw.
    pub send: Option<u32>,
    /// The message's tag.
    pub tag: i32,
}

/// What a replay of a job enforces, and how much it leaves to itself.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Record {
    /// The matches to enforce, in `(rank, seq)` order.
    pub enforced: Vec<Enforced>,
    /// Receives (and wildcard probes) the job made: what recording every match would
    /// record.
    pub receives: u64,
    /// Bytes of a record of every match in the record's own encoding
    /// ([`replay::write`]): what [`Record::enforced`] saves, compared fairly. `None` for
    /// a record read from a file that does not say (format version 1).
    pub every_match_bytes: Option<u64>,
}

impl Record {
    /// How many of [`Record::enforced`] are receives (not probes).
    pub fn receives_enforced(&self) -> usize {
        self.enforced.iter().filter(|e| e.send.is_some()).count()
    }
}

/// The matches a replay of `history` must enforce.
pub fn record(history: &History, clocks: &Clocks) -> Record {
    let mut out = Record::default();
    for rh in &history.ranks {
        record_rank(history, clocks, rh, &mut out);
    }
    out.enforced.sort();
    let every = Record { enforced: every_match(history), receives: out.receives, every_match_bytes: None };
    out.every_match_bytes = Some(replay::write(&every, history.ranks.len() as u32).len() as u64);
    out
}

/// Every match of `history` a record could hold: each receive that took a message from a
/// known send, each wildcard probe that saw a source; in `(rank, seq)` order.
fn every_match(history: &History) -> Vec<Enforced> {
    let mut every: Vec<Enforced> =
        history.ranks.iter().flat_map(|rh| rh.events.iter().filter_map(|e| match_of(rh.rank, e))).collect();
    every.sort();
    every
}

/// The match of event `e` of `rank` as the record holds it: a receive's, or a wildcard
/// probe's; `None` for other events, and for a match whose other side is unknown.
fn match_of(rank: u32, e: &Event) -> Option<Enforced> {
    let send = match e.kind {
        kind if kind.receives() => Some(e.matched?),
        EventKind::Probe if e.any_source || e.any_tag => None,
        _ => return None,
    };
    Some(Enforced { rank, seq: e.seq, post: e.post, source: e.peer?, send, tag: e.tag.unwrap_or(-1) })
}

/// Where a receive matched: its `Irecv` for a posted one, else itself.
fn matching_seq(e: &Event) -> u32 {
    e.post.unwrap_or(e.seq)
}

/// Whether receive `r` (as posted) could take a message from `source` with `tag` on the
/// communicator `comm`.
fn could_take(r: &Event, comm: u16, source: u32, tag: Option<i32>) -> bool {
    r.comm == comm && (r.any_source || r.peer == Some(source)) && (r.any_tag || r.tag == tag)
}

fn record_rank(history: &History, clocks: &Clocks, rh: &RankHistory, out: &mut Record) {
    // The receives that took a message, in matching order.
    let mut receives: Vec<&Event> = rh.events.iter().filter(|e| e.kind.receives()).collect();
    receives.sort_by_key(|e| matching_seq(e));
    // latest[i]: the largest completion seq among receives[..=i]. When receives[i]
    // completes last of them and happened before a send, so did every earlier one.
    let latest: Vec<u32> = receives
        .iter()
        .scan(0, |max, e| {
            *max = (*max).max(e.seq);
            Some(*max)
        })
        .collect();
    let mut recorded: HashSet<u32> = HashSet::new();
    out.receives += receives.len() as u64;
    for (i, r) in receives.iter().enumerate() {
        let (Some(source), Some(send)) = (r.peer, r.matched) else { continue };
        if history.event(source, send).is_none() {
            continue;
        }
        let sent = (source, send);
        let mut races = false;
        for j in (0..i).rev() {
            let earlier = receives[j];
            let before = clocks.happened_before((rh.rank, earlier.seq), sent);
            if before {
                if latest[j] == earlier.seq {
                    break;
                }
                continue;
            }
            if !could_take(earlier, r.comm, source, r.tag) || recorded.contains(&earlier.seq) {
                continue;
            }
            let in_order = earlier.peer == Some(source) && earlier.matched.is_some_and(|m| m < send);
            if !in_order {
                races = true;
                break;
            }
        }
        let fixed = r.fixed_route || history.event(source, send).is_some_and(|s| s.fixed_route);
        if races && !fixed {
            recorded.insert(r.seq);
            out.enforced.extend(match_of(rh.rank, r));
        }
    }
    for e in &rh.events {
        if e.kind == EventKind::Probe && (e.any_source || e.any_tag) && !e.fixed_route {
            out.receives += 1;
            out.enforced.extend(match_of(rh.rank, e));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::compute;
    use crate::testing::{HistoryBuilder, Op};

    fn enforced(h: &History) -> Vec<(u32, u32)> {
        let clocks = compute(h).unwrap();
        record(h, &clocks).enforced.iter().map(|e| (e.rank, e.seq)).collect()
    }

    /// Rank 0 takes one message from each of ranks 1, 2 and 3 with `MPI_ANY_SOURCE`.
    /// `ordered`: rank 3 sends only after hearing from rank 0, which answered its first
    /// message (so m1 and m3 do not race), else all three messages are concurrent.
    fn three_senders(ordered: bool) -> History {
        let mut h = HistoryBuilder::new(4);
        for r in 0..4 {
            h.push(r, Op::Init);
        }
        let m1 = h.push(1, Op::Send { to: 0, tag: 0 });
        let m2 = h.push(2, Op::Send { to: 0, tag: 0 });
        h.push(0, Op::RecvAny { from: 1, matched: m1.1, tag: 0 });
        if ordered {
            let go = h.push(0, Op::Send { to: 3, tag: 9 });
            h.push(3, Op::Recv { from: 0, matched: go.1, tag: 9 });
        }
        let m3 = h.push(3, Op::Send { to: 0, tag: 0 });
        h.push(0, Op::RecvAny { from: 2, matched: m2.1, tag: 0 });
        h.push(0, Op::RecvAny { from: 3, matched: m3.1, tag: 0 });
        h.build()
    }

    #[test]
    fn transitive_races_record_two_messages() {
        assert_eq!(enforced(&three_senders(false)), [(0, 2), (0, 3)]);
    }

    #[test]
    fn non_transitive_races_record_one_message() {
        // m2 races with m1 (recorded); m3 races only with m2, which the record pins.
        assert_eq!(enforced(&three_senders(true)), [(0, 3)]);
    }

    #[test]
    fn races_on_fixed_routes_are_left_out() {
        // A persistent receive cannot be pinned, nor a message a persistent send sent.
        let mut h = three_senders(false);
        h.ranks[0].events[2].fixed_route = true;
        assert_eq!(enforced(&h), [(0, 3)]);
        let mut h = three_senders(false);
        let m3 = h.ranks[0].events[3].matched.unwrap();
        h.ranks[3].events[m3 as usize].fixed_route = true;
        assert_eq!(enforced(&h), [(0, 2)]);
    }

    #[test]
    fn messages_of_one_sender_are_never_recorded() {
        let mut h = HistoryBuilder::new(2);
        h.push(0, Op::Init);
        h.push(1, Op::Init);
        let sends: Vec<_> = (0..5).map(|_| h.push(1, Op::Send { to: 0, tag: 0 })).collect();
        for s in &sends {
            h.push(0, Op::RecvAny { from: 1, matched: s.1, tag: 0 });
        }
        assert!(enforced(&h.build()).is_empty());
    }

    #[test]
    fn receives_from_named_sources_do_not_race() {
        let mut h = HistoryBuilder::new(3);
        for r in 0..3 {
            h.push(r, Op::Init);
        }
        let a = h.push(1, Op::Send { to: 0, tag: 0 });
        let b = h.push(2, Op::Send { to: 0, tag: 0 });
        h.push(0, Op::Recv { from: 2, matched: b.1, tag: 0 });
        h.push(0, Op::Recv { from: 1, matched: a.1, tag: 0 });
        assert!(enforced(&h.build()).is_empty());
    }

    #[test]
    fn a_posted_wildcard_receive_races_with_a_later_posted_one() {
        let mut h = HistoryBuilder::new(3);
        for r in 0..3 {
            h.push(r, Op::Init);
        }
        let a = h.push(1, Op::Send { to: 0, tag: 0 });
        let b = h.push(2, Op::Send { to: 0, tag: 0 });
        let p1 = h.push(0, Op::Irecv { from: None, tag: Some(0) });
        let p2 = h.push(0, Op::Irecv { from: None, tag: Some(0) });
        // The second posted receive completes first: matching order is posting order.
        h.push(0, Op::RecvDone { from: 2, matched: b.1, post: p2.1, tag: 0 });
        h.push(0, Op::RecvDone { from: 1, matched: a.1, post: p1.1, tag: 0 });
        assert_eq!(enforced(&h.build()), [(0, 3)]);
    }

    /// A master hands out `tasks` tasks to `workers` workers and collects each result
    /// with `MPI_ANY_SOURCE`, answering the worker with its next task.
    fn master_worker(workers: u32, tasks: u32) -> History {
        let mut h = HistoryBuilder::new(workers + 1);
        for r in 0..=workers {
            h.push(r, Op::Init);
        }
        let mut handed = 0;
        for w in 1..=workers {
            let task = h.push(0, Op::Send { to: w, tag: 1 });
            h.push(w, Op::Recv { from: 0, matched: task.1, tag: 1 });
            handed += 1;
        }
        // Workers answer in turn; each result is received before the next one is sent.
        let mut w = 1;
        for _ in 0..tasks {
            let result = h.push(w, Op::Send { to: 0, tag: 2 });
            h.push(0, Op::RecvAny { from: w, matched: result.1, tag: 2 });
            if handed < tasks {
                let task = h.push(0, Op::Send { to: w, tag: 1 });
                h.push(w, Op::Recv { from: 0, matched: task.1, tag: 1 });
                handed += 1;
            }
            w = w % workers + 1;
        }
        h.build()
    }

    #[test]
    fn a_master_worker_queue_records_two_of_three_results() {
        let h = master_worker(3, 60);
        let clocks = compute(&h).unwrap();
        let record = record(&h, &clocks);
        assert_eq!(record.receives, 60 + 60);
        // A result races with the results of the other workers that were outstanding
        // when it was sent. The first of each round of three goes unrecorded: its
        // competitors are recorded, and the rest of its round then races only with
        // recorded ones or with it. So 2 of each 3 results are recorded (none of the tasks).
        assert_eq!(record.receives_enforced(), 40);
        // Compared with a record of every match in the same encoding.
        let bytes = replay::write(&record, 4).len() as u64;
        assert!(record.every_match_bytes.is_some_and(|every| every > bytes), "{bytes}: {record:?}");
    }

    #[test]
    fn wildcard_probes_are_recorded_with_what_they_saw() {
        let mut h = HistoryBuilder::new(2);
        h.push(0, Op::Init);
        h.push(1, Op::Init);
        let s = h.push(1, Op::Send { to: 0, tag: 4 });
        h.push(0, Op::ProbeAny { from: 1, tag: 4 });
        h.push(0, Op::Recv { from: 1, matched: s.1, tag: 4 });
        let h = h.build();
        let record = record(&h, &compute(&h).unwrap());
        assert_eq!(
            record.enforced,
            [Enforced { rank: 0, seq: 1, post: None, source: 1, send: None, tag: 4 }]
        );
    }
}
