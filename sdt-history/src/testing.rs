//! Histories written by hand for the analyses' tests.

use crate::model::{Blocked, CollectiveKind, Comm, Event, EventKind, History, RankHistory};

/// One event to add, with the fields that matter to the analyses.
pub(crate) enum Op {
    Init,
    Finalize,
    Send {
        to: u32,
        tag: i32,
    },
    Isend {
        to: u32,
        tag: i32,
    },
    Recv {
        from: u32,
        matched: u32,
        tag: i32,
    },
    /// A receive posted with `MPI_ANY_SOURCE`.
    RecvAny {
        from: u32,
        matched: u32,
        tag: i32,
    },
    /// A probe with `MPI_ANY_SOURCE` that found a message.
    ProbeAny {
        from: u32,
        tag: i32,
    },
    Irecv {
        from: Option<u32>,
        tag: Option<i32>,
    },
    RecvDone {
        from: u32,
        matched: u32,
        post: u32,
        tag: i32,
    },
    SendDone {
        post: u32,
    },
    Truncated {
        from: u32,
        matched: u32,
        tag: i32,
    },
    Collective(CollectiveKind, Option<u32>),
    ICollective(CollectiveKind, Option<u32>),
    Abort {
        code: i32,
    },
    FatalError {
        code: i32,
    },
    CollectiveDone {
        post: u32,
    },
}

/// An event with nothing but its place and kind: no peer, tag, bytes or links, at
/// `10 * seq` µs.
pub(crate) fn event(rank: u32, seq: u32, kind: EventKind) -> Event {
    Event {
        rank,
        seq,
        kind,
        comm: 0,
        peer: None,
        tag: None,
        bytes: 0,
        matched: None,
        post: None,
        site: None,
        time_us: seq * 10,
        any_source: false,
        any_tag: false,
        truncated: false,
        diverged: false,
        fixed_route: false,
    }
}

/// Builds a [`History`] of `n` ranks, every rank on `MPI_COMM_WORLD` only.
pub(crate) struct HistoryBuilder {
    history: History,
}

impl HistoryBuilder {
    pub(crate) fn new(n: u32) -> HistoryBuilder {
        let ranks = (0..n)
            .map(|rank| RankHistory {
                rank,
                size: n,
                comms: vec![Comm { id: 0, ranks: (0..n).collect() }],
                ..RankHistory::default()
            })
            .collect();
        HistoryBuilder { history: History { ranks } }
    }

    /// Appends an event to `rank` and returns its `(rank, seq)`.
    pub(crate) fn push(&mut self, rank: u32, op: Op) -> (u32, u32) {
        let events = &mut self.history.ranks[rank as usize].events;
        let seq = events.len() as u32;
        let mut e = Event { bytes: 8, ..event(rank, seq, EventKind::Init) };
        match op {
            Op::Init => {}
            Op::Finalize => e.kind = EventKind::Finalize,
            Op::Send { to, tag } | Op::Isend { to, tag } => {
                e.kind = if matches!(op, Op::Send { .. }) { EventKind::Send } else { EventKind::Isend };
                (e.peer, e.tag) = (Some(to), Some(tag));
            }
            Op::Recv { from, matched, tag } | Op::Truncated { from, matched, tag } => {
                e.kind = EventKind::Recv;
                e.truncated = matches!(op, Op::Truncated { .. });
                (e.peer, e.matched, e.tag) = (Some(from), Some(matched), Some(tag));
            }
            Op::RecvAny { from, matched, tag } => {
                e.kind = EventKind::Recv;
                e.any_source = true;
                (e.peer, e.matched, e.tag) = (Some(from), Some(matched), Some(tag));
            }
            Op::ProbeAny { from, tag } => {
                e.kind = EventKind::Probe;
                e.any_source = true;
                (e.peer, e.tag) = (Some(from), Some(tag));
            }
            Op::Irecv { from, tag } => {
                e.kind = EventKind::Irecv;
                (e.peer, e.tag, e.any_source, e.any_tag) = (from, tag, from.is_none(), tag.is_none());
            }
            Op::RecvDone { from, matched, post, tag } => {
                e.kind = EventKind::RecvDone;
                (e.peer, e.matched, e.post, e.tag) = (Some(from), Some(matched), Some(post), Some(tag));
                // The completion keeps its post's wildcards, as the library records it.
                let posted = &events[post as usize];
                (e.any_source, e.any_tag) = (posted.any_source, posted.any_tag);
            }
            Op::SendDone { post } => {
                e.kind = EventKind::SendDone;
                e.post = Some(post);
            }
            Op::Collective(kind, root) => {
                e.kind = EventKind::Collective(kind);
                e.peer = root;
            }
            Op::Abort { code } | Op::FatalError { code } => {
                e.kind =
                    if matches!(op, Op::Abort { .. }) { EventKind::Abort } else { EventKind::FatalError };
                (e.tag, e.bytes) = (Some(code), 0);
            }
            Op::ICollective(kind, root) => {
                e.kind = EventKind::ICollective(kind);
                e.peer = root;
            }
            Op::CollectiveDone { post } => {
                let posted = &events[post as usize];
                e.kind = posted.kind.collective().map_or(EventKind::Init, EventKind::CollectiveDone);
                (e.peer, e.post, e.bytes) = (posted.peer, Some(post), 0);
            }
        }
        events.push(e);
        (rank, seq)
    }

    /// Says `rank`'s history ends inside a blocking call.
    pub(crate) fn blocked(&mut self, rank: u32, kind: EventKind, peer: Option<u32>) {
        self.history.ranks[rank as usize].blocked =
            Some(Blocked { kind, comm: 0, peer, tag: Some(0), site: None, since_us: 1000 });
    }

    pub(crate) fn build(self) -> History {
        self.history
    }
}
