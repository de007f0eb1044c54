//! What a rank's state depends on: the messages in the causal past of a point in its
//! history (every message whose receive happened before that point, on any rank),
//! received after an earlier cut; and the cut just before an event. The first steps back
//! along the flow of messages when the state is wrong: which sender, from where, sent
//! what it was built from, and where every rank stood before.

use crate::clock::Clocks;
use crate::cut::{Message, messages};
use crate::model::History;

/// The messages whose receive lies in the causal past of rank `rank` after its first
/// `count` events, and not before the cut `since` (each rank's event count there; an
/// empty slice for the start of the job), in the order they were received.
pub fn depends_on(history: &History, clocks: &Clocks, rank: u32, count: u64, since: &[u64]) -> Vec<Message> {
    let Some(last) = count.checked_sub(1).and_then(|c| u32::try_from(c).ok()) else { return Vec::new() };
    let Some(past) = clocks.get(rank, last) else { return Vec::new() };
    let mut found: Vec<Message> = messages(history)
        .into_iter()
        .filter(|m| {
            m.recv.is_some_and(|(q, j)| {
                let in_past = past.get(q as usize).is_some_and(|&seen| j < seen);
                let after_since = since.get(q as usize).is_none_or(|&c| u64::from(j) >= c);
                in_past && after_since
            })
        })
        .collect();
    found.sort_by(|a, b| {
        let at = |m: &Message| m.recv.and_then(|(q, j)| history.time_us(q, j)).unwrap_or(0.0);
        at(a).total_cmp(&at(b))
    });
    found
}

/// The cut just before event `(rank, seq)`: everything that happened before it, on every
/// rank, and nothing else (`rank` stops before the event itself). Consistent by
/// construction: the causal past of an event is closed under happened-before.
pub fn cut_before(clocks: &Clocks, rank: u32, seq: u32) -> Option<Vec<u64>> {
    let mut cut: Vec<u64> = clocks.get(rank, seq)?.iter().map(|&seen| u64::from(seen)).collect();
    *cut.get_mut(rank as usize)? = u64::from(seq);
    Some(cut)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::compute;
    use crate::testing::{HistoryBuilder, Op};

    #[test]
    fn a_state_depends_on_the_messages_behind_it_transitively_and_since_the_cut() {
        // 2 -> 1 (a), then 1 -> 0 (b); 2 -> 0 later (c, after rank 0's point).
        let mut h = HistoryBuilder::new(3);
        let a = h.push(2, Op::Send { to: 1, tag: 1 });
        h.push(1, Op::Recv { from: 2, matched: a.1, tag: 1 });
        let b = h.push(1, Op::Send { to: 0, tag: 2 });
        h.push(0, Op::Init);
        h.push(0, Op::Recv { from: 1, matched: b.1, tag: 2 });
        let c = h.push(2, Op::Send { to: 0, tag: 3 });
        h.push(0, Op::Recv { from: 2, matched: c.1, tag: 3 });
        let history = h.build();
        let clocks = compute(&history).unwrap();
        let sends = |found: Vec<Message>| found.iter().map(|m| m.send).collect::<Vec<_>>();
        // After rank 0's first two events: b directly, a through rank 1.
        assert_eq!(sends(depends_on(&history, &clocks, 0, 2, &[])), [a, b]);
        // Since a cut after rank 1's receive of a: only b.
        assert_eq!(sends(depends_on(&history, &clocks, 0, 2, &[0, 1, 1])), [b]);
        assert!(depends_on(&history, &clocks, 0, 0, &[]).is_empty());
        assert_eq!(sends(depends_on(&history, &clocks, 0, 3, &[])), [a, b, c]);

        // Before rank 0's receive of b: rank 1 up to its send of b, rank 2 up to a.
        let cut = cut_before(&clocks, 0, 1).unwrap();
        assert_eq!(cut, [1, 2, 1]);
        assert!(crate::cut::check(&history, &clocks, &cut).consistent);
    }
}
