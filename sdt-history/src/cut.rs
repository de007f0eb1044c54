//! Global cuts: one point in each rank's history, such as the ranks' snapshots at the same
//! breakpoint arrival. A cut is consistent when everything that happened before an event
//! before the cut is itself before the cut; in message terms, no message is received
//! before the cut that was sent after it. Messages sent before the cut and received after
//! it (or never) are in flight across it: a restart from the cut must deliver them.

use serde::Serialize;

use crate::clock::Clocks;
use crate::model::{EventKind, History};

/// One message: a send and, if it was received, the receive that took it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Message {
    /// The send, `(rank, seq)`.
    pub send: (u32, u32),
    /// The receive that took it, `(rank, seq)`; `None` if no rank did.
    pub recv: Option<(u32, u32)>,
    /// The rank it was sent to.
    pub to: u32,
    /// Its tag.
    pub tag: Option<i32>,
    /// Its size in bytes, as sent.
    pub bytes: u64,
}

/// Every message of the history, in the order of the senders' ranks and events.
pub fn messages(history: &History) -> Vec<Message> {
    let mut taken = std::collections::HashMap::new();
    for rh in &history.ranks {
        for e in rh.events.iter().filter(|e| e.kind.receives()) {
            if let (Some(peer), Some(matched)) = (e.peer, e.matched) {
                taken.insert((peer, matched), (e.rank, e.seq));
            }
        }
    }
    history
        .ranks
        .iter()
        .flat_map(|rh| rh.events.iter())
        .filter(|e| e.kind.sends())
        .map(|e| Message {
            send: (e.rank, e.seq),
            recv: taken.get(&(e.rank, e.seq)).copied(),
            to: e.peer.unwrap_or(u32::MAX),
            tag: e.tag,
            bytes: e.bytes,
        })
        .collect()
}

/// What a cut is, checked against the history.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CutVerdict {
    /// No event before the cut depends on one after it.
    pub consistent: bool,
    /// Messages sent before the cut and received after it, or never.
    pub in_flight: Vec<Message>,
    /// Messages received before the cut but sent after it: what makes it inconsistent.
    pub orphans: Vec<Message>,
    /// Collectives some members made before the cut and others after, where one made
    /// before depends on one made after: `(rank, seq)` of the member before the cut.
    pub split_collectives: Vec<(u32, u32)>,
}

/// Checks the cut where rank `r` has made its first `cut[r]` events (a snapshot's
/// `mpi_events`). Counts past a rank's history are taken as its end.
pub fn check(history: &History, clocks: &Clocks, cut: &[u64]) -> CutVerdict {
    let before = |rank: u32, seq: u32| cut.get(rank as usize).is_some_and(|&c| u64::from(seq) < c);
    let mut in_flight = Vec::new();
    let mut orphans = Vec::new();
    for m in messages(history) {
        let sent_before = before(m.send.0, m.send.1);
        let received_before = m.recv.is_some_and(|(r, s)| before(r, s));
        if sent_before && !received_before {
            in_flight.push(m);
        } else if !sent_before && received_before {
            orphans.push(m);
        }
    }
    let mut consistent = true;
    let mut split_collectives = Vec::new();
    for rh in &history.ranks {
        let count = cut.get(rh.rank as usize).copied().unwrap_or(0).min(rh.events.len() as u64) as usize;
        let Some(last) = count.checked_sub(1) else { continue };
        let Some(clock) = clocks.get(rh.rank, last as u32) else { continue };
        let depends_on_later =
            clock.iter().enumerate().any(|(p, &seen)| u64::from(seen) > cut.get(p).copied().unwrap_or(0));
        if depends_on_later {
            consistent = false;
            // Name the collectives that carry the dependency (messages are in `orphans`).
            let carries = |k: EventKind| matches!(k, EventKind::Collective(_) | EventKind::CollectiveDone(_));
            for e in rh.events[..count].iter().filter(|e| carries(e.kind)) {
                let Some(c) = clocks.get(rh.rank, e.seq) else { continue };
                let later =
                    c.iter().enumerate().any(|(p, &seen)| u64::from(seen) > cut.get(p).copied().unwrap_or(0));
                if later && !orphans.iter().any(|m| m.recv.is_some_and(|r| r.0 == rh.rank && r.1 <= e.seq)) {
                    split_collectives.push((rh.rank, e.seq));
                }
            }
        }
    }
    CutVerdict { consistent, in_flight, orphans, split_collectives }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::compute;
    use crate::model::CollectiveKind;
    use crate::testing::{HistoryBuilder, Op};

    /// rank 0 sends m1 to 1, then m2 to 1; rank 1 receives both.
    fn two_messages() -> History {
        let mut h = HistoryBuilder::new(2);
        h.push(0, Op::Init);
        h.push(1, Op::Init);
        let m1 = h.push(0, Op::Send { to: 1, tag: 1 });
        let m2 = h.push(0, Op::Send { to: 1, tag: 2 });
        h.push(1, Op::Recv { from: 0, matched: m1.1, tag: 1 });
        h.push(1, Op::Recv { from: 0, matched: m2.1, tag: 2 });
        h.build()
    }

    #[test]
    fn a_cut_after_a_send_and_before_its_receive_is_consistent_with_the_message_in_flight() {
        let history = two_messages();
        let clocks = compute(&history).unwrap();
        let v = check(&history, &clocks, &[2, 1]);
        assert!(v.consistent);
        assert_eq!(v.in_flight.iter().map(|m| m.send).collect::<Vec<_>>(), [(0, 1)]);
        assert!(v.orphans.is_empty());

        let v = check(&history, &clocks, &[3, 2]);
        assert!(v.consistent);
        assert_eq!(
            v.in_flight.iter().map(|m| (m.send, m.recv)).collect::<Vec<_>>(),
            [((0, 2), Some((1, 2)))]
        );
    }

    #[test]
    fn a_receive_before_the_cut_of_a_send_after_it_makes_it_inconsistent() {
        let history = two_messages();
        let clocks = compute(&history).unwrap();
        let v = check(&history, &clocks, &[2, 3]);
        assert!(!v.consistent);
        assert_eq!(v.orphans.iter().map(|m| (m.send, m.recv)).collect::<Vec<_>>(), [((0, 2), Some((1, 2)))]);
        assert!(v.split_collectives.is_empty());
    }

    #[test]
    fn a_barrier_split_by_the_cut_is_inconsistent_and_named() {
        let mut h = HistoryBuilder::new(2);
        h.push(0, Op::Collective(CollectiveKind::Barrier, None));
        h.push(1, Op::Collective(CollectiveKind::Barrier, None));
        h.push(0, Op::Init);
        let history = h.build();
        let clocks = compute(&history).unwrap();
        let v = check(&history, &clocks, &[1, 0]);
        assert!(!v.consistent);
        assert_eq!(v.split_collectives, [(0, 0)]);
        assert!(check(&history, &clocks, &[1, 1]).consistent);
        assert!(check(&history, &clocks, &[0, 0]).consistent);
    }

    #[test]
    fn a_message_never_received_is_in_flight_across_every_cut_after_its_send() {
        let mut h = HistoryBuilder::new(2);
        h.push(0, Op::Send { to: 1, tag: 3 });
        let history = h.build();
        let clocks = compute(&history).unwrap();
        let v = check(&history, &clocks, &[1, 0]);
        assert_eq!(v.in_flight, [Message { send: (0, 0), recv: None, to: 1, tag: Some(3), bytes: 8 }]);
        assert!(check(&history, &clocks, &[0, 0]).in_flight.is_empty());
    }
}
