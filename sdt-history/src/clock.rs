//! Vector clocks of every event, recomputed from the history.
//!
//! The interposition library keeps a vector clock per rank and piggybacks it on every
//! message; the event file stores only which send each receive took, which is enough to
//! compute the same clocks again here, exactly:
//!
//! - every event first increments its own rank's entry of the rank's clock;
//! - a receive (`Recv`, `RecvDone`) then takes the element-wise maximum with the clock of
//!   the send it matched;
//! - a collective takes the maximum over the members it depends on
//!   ([`Shape`](crate::model::Shape)): every member for all-to-all, the root for
//!   one-to-all (and the root takes every member's for all-to-one), members `0..=i` for a
//!   prefix operation — each member's own increment included.
//!
//! `a` happened before `b` exactly when `clock(a) < clock(b)` (less or equal everywhere,
//! different somewhere).
//!
//! A non-blocking collective is two events: its post, which only increments, and its
//! completion, which takes the maximum over the posts of the members it depends on (by
//! the same shapes).
//!
//! Collectives are matched across ranks by communicator and order: the k-th collective
//! a rank makes (or posts) on a communicator meets the k-th of every other member, as MPI
//! requires of programs. Communicators are told apart by their members and, among those
//! with the same members, by the order each rank first used them.

use std::collections::HashMap;

use crate::model::{EventKind, History, Shape};

/// A vector clock: one entry per rank of the job.
pub type Clock = Vec<u32>;

/// The history is not one that a run could have produced.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClockError {
    /// A receive names a send that does not exist or is not a send to it.
    #[error(
        "rank {rank} event {seq}: takes event {matched} of rank {peer}, which is not a send to rank {rank}"
    )]
    BadMatch {
        /// The receiving rank.
        rank: u32,
        /// The receive.
        seq: u32,
        /// The rank it names as sender.
        peer: u32,
        /// The event it names.
        matched: u32,
    },
    /// An event names a communicator its rank's table does not have.
    #[error("rank {rank} event {seq}: names communicator {comm}, which rank {rank} never described")]
    UnknownComm {
        /// The rank.
        rank: u32,
        /// The event.
        seq: u32,
        /// The communicator index.
        comm: u16,
    },
    /// The events wait on each other in a circle (or on a collective some member never
    /// made): no order of execution gives this history.
    #[error(
        "the events of rank {rank} from {seq} on wait on events that never happen (a cycle, or a collective not every member made)"
    )]
    Stuck {
        /// A rank that cannot go on.
        rank: u32,
        /// Its first event that cannot be placed.
        seq: u32,
    },
    /// A completion of a non-blocking collective names no post of one.
    #[error("rank {rank} event {seq}: completes no non-blocking collective of rank {rank}")]
    BadPost {
        /// The rank.
        rank: u32,
        /// The completion.
        seq: u32,
    },
}

/// The clocks of every event, `clocks[rank][seq]`, and the events a computation could
/// not reach.
#[derive(Debug, Clone, Default)]
pub struct Clocks {
    /// `clocks[rank][seq]` for each event that could be placed.
    pub clocks: Vec<Vec<Clock>>,
}

impl Clocks {
    /// The clock of event `(rank, seq)`.
    pub fn get(&self, rank: u32, seq: u32) -> Option<&Clock> {
        self.clocks.get(rank as usize)?.get(seq as usize)
    }

    /// Whether `a` happened before `b` (both `(rank, seq)`); false when either is unknown.
    pub fn happened_before(&self, a: (u32, u32), b: (u32, u32)) -> bool {
        match (self.get(a.0, a.1), self.get(b.0, b.1)) {
            (Some(ca), Some(cb)) => less(ca, cb),
            _ => false,
        }
    }

    /// Whether neither of `a` and `b` happened before the other.
    pub fn concurrent(&self, a: (u32, u32), b: (u32, u32)) -> bool {
        !self.happened_before(a, b) && !self.happened_before(b, a)
    }
}

/// `a < b` for vector clocks: no entry larger, some entry smaller.
pub fn less(a: &[u32], b: &[u32]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x <= y) && a != b
}

fn merge(into: &mut Clock, other: &[u32]) {
    for (x, y) in into.iter_mut().zip(other) {
        *x = (*x).max(*y);
    }
}

/// Which collective instance an event belongs to: the communicator's members, which of
/// the communicators with those members it is, and the collective's number on it.
pub(crate) type Instance = (Vec<u32>, u32, u32);

/// The seq that stands, in [`collective_instances`], for the blocking collective a rank's
/// history ends inside (it recorded no event for it).
pub(crate) const BLOCKED_SEQ: u32 = u32::MAX;

/// The collective instance of every collective event: `(rank, seq)` → instance; and of
/// the blocking collective a rank is blocked in, as `(rank, BLOCKED_SEQ)`.
pub(crate) fn collective_instances(history: &History) -> Result<HashMap<(u32, u32), Instance>, ClockError> {
    let mut instances = HashMap::new();
    for rh in &history.ranks {
        // Communicator index → (members, nth with those members), in first-use order.
        let mut keys: HashMap<u16, (Vec<u32>, u32)> = HashMap::new();
        let mut seen_members: HashMap<Vec<u32>, u32> = HashMap::new();
        let mut counts: HashMap<u16, u32> = HashMap::new();
        let joined = rh.events.iter().filter(|e| e.kind.joins_collective()).map(|e| (e.seq, e.comm));
        let blocked = rh.blocked.as_ref().filter(|b| matches!(b.kind, EventKind::Collective(_)));
        for (seq, comm_id) in joined.chain(blocked.map(|b| (BLOCKED_SEQ, b.comm))) {
            let key = match keys.get(&comm_id) {
                Some(key) => key.clone(),
                None => {
                    let comm = rh.comms.iter().find(|c| c.id == comm_id).ok_or(ClockError::UnknownComm {
                        rank: rh.rank,
                        seq,
                        comm: comm_id,
                    })?;
                    let nth = seen_members.entry(comm.ranks.clone()).or_insert(0);
                    let key = (comm.ranks.clone(), *nth);
                    *nth += 1;
                    keys.insert(comm_id, key.clone());
                    key
                }
            };
            let count = counts.entry(comm_id).or_insert(0);
            instances.insert((rh.rank, seq), (key.0, key.1, *count));
            *count += 1;
        }
    }
    Ok(instances)
}

/// Computes every event's clock. A history no run could produce is an error naming the
/// first event that shows it.
pub fn compute(history: &History) -> Result<Clocks, ClockError> {
    let n = history.ranks.len();
    let instances = collective_instances(history)?;
    // Members of each instance that have reached it, with their pre-merge clocks.
    let mut arrived: HashMap<&Instance, Vec<(u32, u32, Clock)>> = HashMap::new();
    // Members of each non-blocking instance that have posted it, with their posts' clocks.
    let mut posted: HashMap<&Instance, Vec<(u32, Clock)>> = HashMap::new();
    let mut clocks: Vec<Vec<Clock>> =
        history.ranks.iter().map(|r| Vec::with_capacity(r.events.len())).collect();
    // Per rank: the next event to place, and whether it waits at a collective already.
    let mut waiting_at_collective = vec![false; n];
    loop {
        let mut progressed = false;
        for r in 0..n {
            let rh = &history.ranks[r];
            while clocks[r].len() < rh.events.len() && !waiting_at_collective[r] {
                let e = &rh.events[clocks[r].len()];
                let mut clock = clocks[r].last().cloned().unwrap_or_else(|| vec![0; n]);
                clock[r] += 1;
                if e.kind.receives() {
                    let bad = || ClockError::BadMatch {
                        rank: e.rank,
                        seq: e.seq,
                        peer: e.peer.unwrap_or(u32::MAX),
                        matched: e.matched.unwrap_or(u32::MAX),
                    };
                    let (Some(peer), Some(matched)) = (e.peer, e.matched) else { return Err(bad()) };
                    let send = history.event(peer, matched).ok_or_else(bad)?;
                    if !send.kind.sends() || send.peer != Some(e.rank) {
                        return Err(bad());
                    }
                    match clocks[peer as usize].get(matched as usize) {
                        Some(sent) => merge(&mut clock, sent),
                        None => break,
                    }
                } else if let EventKind::Collective(kind) = e.kind {
                    let instance = &instances[&(e.rank, e.seq)];
                    let members = &instance.0;
                    let here = arrived.entry(instance).or_default();
                    here.push((e.rank, e.seq, clock));
                    waiting_at_collective[r] = true;
                    if here.len() == members.len() {
                        let done = arrived.remove(instance).unwrap_or_default();
                        finish_collective(kind.shape(), e.peer, members, done, &mut clocks);
                        for &m in members {
                            if let Some(w) = waiting_at_collective.get_mut(m as usize) {
                                *w = false;
                            }
                        }
                    }
                    progressed = true;
                    continue;
                } else if let EventKind::ICollective(_) = e.kind {
                    posted.entry(&instances[&(e.rank, e.seq)]).or_default().push((e.rank, clock.clone()));
                } else if let EventKind::CollectiveDone(kind) = e.kind {
                    let instance = e
                        .post
                        .and_then(|post| instances.get(&(e.rank, post)))
                        .ok_or(ClockError::BadPost { rank: e.rank, seq: e.seq })?;
                    let posts = posted.get(instance).map_or(&[][..], Vec::as_slice);
                    let post_of = |m: u32| posts.iter().find(|p| p.0 == m).map(|p| &p.1);
                    let needed = depends_on(kind.shape(), e.peer, &instance.0, e.rank);
                    // Until every member it depends on has posted.
                    if !needed.iter().all(|&m| post_of(m).is_some()) {
                        break;
                    }
                    for m in needed {
                        merge(&mut clock, post_of(m).expect("checked above"));
                    }
                }
                clocks[r].push(clock);
                progressed = true;
            }
        }
        if !progressed {
            break;
        }
    }
    for (r, rh) in history.ranks.iter().enumerate() {
        if clocks[r].len() < rh.events.len() {
            return Err(ClockError::Stuck { rank: r as u32, seq: clocks[r].len() as u32 });
        }
    }
    Ok(Clocks { clocks })
}

/// The members whose part of a collective `rank`'s part depends on, by its shape.
fn depends_on(shape: Shape, root: Option<u32>, members: &[u32], rank: u32) -> Vec<u32> {
    match shape {
        Shape::AllToAll => members.to_vec(),
        Shape::OneToAll => root.into_iter().collect(),
        Shape::AllToOne if root == Some(rank) => members.to_vec(),
        Shape::AllToOne => Vec::new(),
        Shape::Prefix => members.iter().copied().take_while(|&m| m != rank).collect(),
    }
}

/// Gives each member of a collective instance its clock once all have arrived.
fn finish_collective(
    shape: Shape,
    root: Option<u32>,
    members: &[u32],
    arrived: Vec<(u32, u32, Clock)>,
    clocks: &mut [Vec<Clock>],
) {
    let own = |rank: u32| arrived.iter().find(|a| a.0 == rank).map(|a| &a.2);
    for (rank, _, base) in &arrived {
        let mut clock = base.clone();
        for m in depends_on(shape, root, members, *rank) {
            if let Some(c) = own(m) {
                merge(&mut clock, c);
            }
        }
        if let Some(list) = clocks.get_mut(*rank as usize) {
            list.push(clock);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{HistoryBuilder, Op};

    #[test]
    fn a_matched_send_happens_before_its_receive_and_unrelated_events_are_concurrent() {
        // rank 0: send to 1, then a local-only probe; rank 1: recv from 0; rank 2: send to 1, recv
        let mut h = HistoryBuilder::new(3);
        let s01 = h.push(0, Op::Send { to: 1, tag: 7 });
        let x0 = h.push(0, Op::Init);
        let s21 = h.push(2, Op::Send { to: 1, tag: 7 });
        let r10 = h.push(1, Op::Recv { from: 0, matched: s01.1, tag: 7 });
        let r12 = h.push(1, Op::Recv { from: 2, matched: s21.1, tag: 7 });
        let history = h.build();
        let clocks = compute(&history).unwrap();
        assert!(clocks.happened_before(s01, r10));
        assert!(clocks.happened_before(s21, r12));
        assert!(clocks.happened_before(s01, r12), "transitively through rank 1's order");
        assert!(clocks.concurrent(s01, s21));
        assert!(clocks.concurrent(x0, r10), "rank 0 went on after sending: not ordered with the receive");
        assert_eq!(clocks.get(1, 1).unwrap(), &vec![1, 2, 1]);
    }

    #[test]
    fn collectives_order_by_their_shape() {
        let mut h = HistoryBuilder::new(3);
        let before: Vec<_> = (0..3).map(|r| h.push(r, Op::Init)).collect();
        let bcast: Vec<_> =
            (0..3).map(|r| h.push(r, Op::Collective(CollectiveKind::Bcast, Some(1)))).collect();
        let after: Vec<_> = (0..3).map(|r| h.push(r, Op::Init)).collect();
        let reduce: Vec<_> =
            (0..3).map(|r| h.push(r, Op::Collective(CollectiveKind::Reduce, Some(0)))).collect();
        let barrier: Vec<_> =
            (0..3).map(|r| h.push(r, Op::Collective(CollectiveKind::Barrier, None))).collect();
        let end: Vec<_> = (0..3).map(|r| h.push(r, Op::Init)).collect();
        let clocks = compute(&h.build()).unwrap();
        // Bcast from 1: rank 1's earlier events precede everyone's bcast; rank 0's do not precede rank 2's.
        assert!(clocks.happened_before(before[1], bcast[0]));
        assert!(clocks.happened_before(before[1], after[2]));
        assert!(clocks.concurrent(before[0], after[2]));
        // Reduce to 0: everyone's events precede the root's reduce, not the other members'.
        assert!(clocks.happened_before(after[2], reduce[0]));
        assert!(clocks.concurrent(after[2], reduce[1]));
        // Barrier: everything before it precedes everything after it.
        for a in &reduce {
            for b in &end {
                assert!(clocks.happened_before(*a, *b));
            }
        }
        assert!(clocks.concurrent(barrier[0], barrier[2]));
    }

    #[test]
    fn a_non_blocking_collective_orders_its_completions_after_the_posts_not_the_posts() {
        // Ranks 0 and 1 post an ibarrier and an ibcast from 1, then complete both later.
        let mut h = HistoryBuilder::new(2);
        let before: Vec<_> = (0..2).map(|r| h.push(r, Op::Init)).collect();
        let barrier: Vec<_> =
            (0..2).map(|r| h.push(r, Op::ICollective(CollectiveKind::Barrier, None))).collect();
        let bcast: Vec<_> =
            (0..2).map(|r| h.push(r, Op::ICollective(CollectiveKind::Bcast, Some(1)))).collect();
        let between: Vec<_> = (0..2).map(|r| h.push(r, Op::Init)).collect();
        let barrier_done: Vec<_> =
            (0..2).map(|r| h.push(r, Op::CollectiveDone { post: barrier[r as usize].1 })).collect();
        let bcast_done: Vec<_> =
            (0..2).map(|r| h.push(r, Op::CollectiveDone { post: bcast[r as usize].1 })).collect();
        let clocks = compute(&h.build()).unwrap();
        // A post waits for nobody: rank 1's events before it do not precede rank 0's post.
        assert!(clocks.concurrent(before[1], barrier[0]));
        // Nor does what a rank does between its post and its completion.
        assert!(clocks.concurrent(between[1], barrier_done[0]));
        // The barrier's completion follows every member's post.
        assert!(clocks.happened_before(barrier[1], barrier_done[0]));
        assert!(clocks.happened_before(before[1], barrier_done[0]));
        // The bcast's completion follows the root's post only.
        assert!(clocks.happened_before(bcast[1], bcast_done[0]));
        assert!(!clocks.happened_before(bcast[0], bcast_done[1]));
        // The bcast counts after the barrier in the communicator's order.
        assert_eq!(clocks.get(0, bcast_done[0].1).unwrap(), &vec![6, 3]);
    }

    #[test]
    fn impossible_histories_are_errors_not_panics() {
        let mut h = HistoryBuilder::new(2);
        h.push(1, Op::Recv { from: 0, matched: 0, tag: 1 });
        h.push(0, Op::Recv { from: 1, matched: 0, tag: 1 });
        assert!(matches!(compute(&h.build()), Err(ClockError::BadMatch { .. })));

        let mut h = HistoryBuilder::new(2);
        h.push(0, Op::Collective(CollectiveKind::Barrier, None));
        assert!(matches!(compute(&h.build()), Err(ClockError::Stuck { rank: 0, seq: 0 })));

        // A completion whose barrier rank 1 never posted.
        let mut h = HistoryBuilder::new(2);
        let posted = h.push(0, Op::ICollective(CollectiveKind::Barrier, None));
        h.push(0, Op::CollectiveDone { post: posted.1 });
        assert!(matches!(compute(&h.build()), Err(ClockError::Stuck { rank: 0, seq: 1 })));

        // A completion that names no post.
        let mut h = HistoryBuilder::new(1);
        h.push(0, Op::Init);
        let mut history = h.build();
        let done = EventKind::CollectiveDone(CollectiveKind::Barrier);
        history.ranks[0].events.push(Event { post: Some(0), ..crate::testing::event(0, 1, done) });
        assert!(matches!(compute(&history), Err(ClockError::BadPost { rank: 0, seq: 1 })));

        // Each receives the other's second event before sending it: a cycle.
        let mut h = HistoryBuilder::new(2);
        h.push(0, Op::Recv { from: 1, matched: 1, tag: 1 });
        h.push(0, Op::Send { to: 1, tag: 1 });
        h.push(1, Op::Recv { from: 0, matched: 1, tag: 1 });
        h.push(1, Op::Send { to: 0, tag: 1 });
        assert!(matches!(compute(&h.build()), Err(ClockError::Stuck { .. })));
    }

    use crate::model::{CollectiveKind, Event};
}
