//! The events of every rank of a job, as the analyses and the CLI see them.
//!
//! Ranks are always `MPI_COMM_WORLD` ranks: the library translates a communicator's rank
//! to the world rank when it records. An event's `seq` is its index in its rank's list
//! (from 0), so `(rank, seq)` names one event of the job.
//!
//! Vector clocks are not stored per event: every message records the `seq` of the send
//! it matched ([`Event::matched`]), which is all that is needed to recompute them exactly
//! (see the `clock` module).

use serde::Serialize;

/// What one event was.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    /// `MPI_Init` / `MPI_Init_thread` returned.
    Init,
    /// `MPI_Finalize` was called.
    Finalize,
    /// A blocking send (`MPI_Send`, `Ssend`, `Rsend`, `Bsend`, the send half of
    /// `Sendrecv`): the message leaves with this event's clock.
    Send,
    /// A non-blocking send was posted (`MPI_Isend`, `Issend`, `Irsend`, `Ibsend`): the
    /// message leaves with this event's clock.
    Isend,
    /// A blocking receive completed (`MPI_Recv`, the receive half of `Sendrecv`).
    Recv,
    /// A non-blocking receive was posted (`MPI_Irecv`); `peer`/`tag` are as posted
    /// (wildcards as `None`).
    Irecv,
    /// A posted receive completed (in `Wait*`/`Test*`); [`Event::post`] is its `Irecv`.
    RecvDone,
    /// A posted send completed (in `Wait*`/`Test*`); [`Event::post`] is its `Isend`.
    SendDone,
    /// A probe found a message (`MPI_Probe`, or `MPI_Iprobe` with flag set): its actual
    /// source and tag. Probes take no message and merge no clock.
    Probe,
    /// The rank called `MPI_Abort`: [`Event::tag`] is the error code.
    Abort,
    /// An MPI error ended the rank (the error handler `MPI_ERRORS_ARE_FATAL`):
    /// [`Event::tag`] is the error code, [`Event::site`] the call that failed.
    FatalError,
    /// A collective operation, on every member of its communicator.
    Collective(CollectiveKind),
    /// A non-blocking collective was posted (`MPI_Iallreduce`, `MPI_Ibarrier`, …): it
    /// counts in the communicator's order of collectives, and its data leaves with this
    /// event's clock.
    ICollective(CollectiveKind),
    /// A posted non-blocking collective completed (in `Wait*`/`Test*`); [`Event::post`]
    /// is its [`EventKind::ICollective`]. It follows the posts of the members it depends on.
    CollectiveDone(CollectiveKind),
}

impl EventKind {
    /// True for the events that take a message: their [`Event::matched`] names its send.
    pub fn receives(self) -> bool {
        matches!(self, EventKind::Recv | EventKind::RecvDone)
    }

    /// True for the events that send a message.
    pub fn sends(self) -> bool {
        matches!(self, EventKind::Send | EventKind::Isend)
    }

    /// The name `sdt events` prints: `send`, `recv_done`, `allreduce`, …
    pub fn name(self) -> &'static str {
        match self {
            EventKind::Init => "init",
            EventKind::Finalize => "finalize",
            EventKind::Send => "send",
            EventKind::Isend => "isend",
            EventKind::Recv => "recv",
            EventKind::Irecv => "irecv",
            EventKind::RecvDone => "recv_done",
            EventKind::SendDone => "send_done",
            EventKind::Probe => "probe",
            EventKind::Abort => "abort",
            EventKind::FatalError => "fatal_error",
            EventKind::Collective(c) => c.name(),
            EventKind::ICollective(c) => c.posted_name(),
            EventKind::CollectiveDone(c) => c.done_name(),
        }
    }

    /// For a completion, the kind of the event that posted it.
    pub fn posted_by(self) -> Option<EventKind> {
        match self {
            EventKind::RecvDone => Some(EventKind::Irecv),
            EventKind::SendDone => Some(EventKind::Isend),
            EventKind::CollectiveDone(c) => Some(EventKind::ICollective(c)),
            _ => None,
        }
    }

    /// True for the events that end the job before its time (`Abort`, `FatalError`).
    pub fn aborts(self) -> bool {
        matches!(self, EventKind::Abort | EventKind::FatalError)
    }

    /// The collective operation of a collective event, blocking or not.
    pub fn collective(self) -> Option<CollectiveKind> {
        match self {
            EventKind::Collective(c) | EventKind::ICollective(c) | EventKind::CollectiveDone(c) => Some(c),
            _ => None,
        }
    }

    /// True for the events that take a collective's place in its communicator's order:
    /// a blocking collective, or a non-blocking one's post.
    pub fn joins_collective(self) -> bool {
        matches!(self, EventKind::Collective(_) | EventKind::ICollective(_))
    }
}

/// The collective operations, by who depends on whom.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CollectiveKind {
    /// `MPI_Barrier`.
    Barrier,
    /// `MPI_Bcast`.
    Bcast,
    /// `MPI_Scatter`, `MPI_Scatterv`.
    Scatter,
    /// `MPI_Reduce`.
    Reduce,
    /// `MPI_Gather`, `MPI_Gatherv`.
    Gather,
    /// `MPI_Allreduce`.
    Allreduce,
    /// `MPI_Allgather`, `MPI_Allgatherv`.
    Allgather,
    /// `MPI_Alltoall`, `MPI_Alltoallv`.
    Alltoall,
    /// `MPI_Reduce_scatter`, `MPI_Reduce_scatter_block`.
    ReduceScatter,
    /// `MPI_Scan`, `MPI_Exscan`: rank i depends on ranks 0..i of the communicator.
    Scan,
    /// Any other collective (communicator creation and the like): treated as all-to-all.
    Other,
}

/// Which members a collective's members depend on, for happened-before.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// The root's data reaches every member: every member's event follows the root's.
    OneToAll,
    /// Every member's data reaches the root: the root's event follows every member's.
    AllToOne,
    /// Every member's event follows every member's.
    AllToAll,
    /// Member i's event follows members 0..=i (in communicator order).
    Prefix,
}

impl CollectiveKind {
    /// Who depends on whom.
    pub fn shape(self) -> Shape {
        match self {
            CollectiveKind::Bcast | CollectiveKind::Scatter => Shape::OneToAll,
            CollectiveKind::Reduce | CollectiveKind::Gather => Shape::AllToOne,
            CollectiveKind::Scan => Shape::Prefix,
            CollectiveKind::Barrier
            | CollectiveKind::Allreduce
            | CollectiveKind::Allgather
            | CollectiveKind::Alltoall
            | CollectiveKind::ReduceScatter
            | CollectiveKind::Other => Shape::AllToAll,
        }
    }

    /// The operation's name in lower case (`allreduce`).
    pub fn name(self) -> &'static str {
        match self {
            CollectiveKind::Barrier => "barrier",
            CollectiveKind::Bcast => "bcast",
            CollectiveKind::Scatter => "scatter",
            CollectiveKind::Reduce => "reduce",
            CollectiveKind::Gather => "gather",
            CollectiveKind::Allreduce => "allreduce",
            CollectiveKind::Allgather => "allgather",
            CollectiveKind::Alltoall => "alltoall",
            CollectiveKind::ReduceScatter => "reduce_scatter",
            CollectiveKind::Scan => "scan",
            CollectiveKind::Other => "collective",
        }
    }

    /// The name of its non-blocking post (`iallreduce`).
    pub fn posted_name(self) -> &'static str {
        match self {
            CollectiveKind::Barrier => "ibarrier",
            CollectiveKind::Bcast => "ibcast",
            CollectiveKind::Scatter => "iscatter",
            CollectiveKind::Reduce => "ireduce",
            CollectiveKind::Gather => "igather",
            CollectiveKind::Allreduce => "iallreduce",
            CollectiveKind::Allgather => "iallgather",
            CollectiveKind::Alltoall => "ialltoall",
            CollectiveKind::ReduceScatter => "ireduce_scatter",
            CollectiveKind::Scan => "iscan",
            CollectiveKind::Other => "icollective",
        }
    }

    /// The name of a non-blocking one's completion (`allreduce_done`).
    pub fn done_name(self) -> &'static str {
        match self {
            CollectiveKind::Barrier => "barrier_done",
            CollectiveKind::Bcast => "bcast_done",
            CollectiveKind::Scatter => "scatter_done",
            CollectiveKind::Reduce => "reduce_done",
            CollectiveKind::Gather => "gather_done",
            CollectiveKind::Allreduce => "allreduce_done",
            CollectiveKind::Allgather => "allgather_done",
            CollectiveKind::Alltoall => "alltoall_done",
            CollectiveKind::ReduceScatter => "reduce_scatter_done",
            CollectiveKind::Scan => "scan_done",
            CollectiveKind::Other => "collective_done",
        }
    }
}

/// One event of one rank.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Event {
    /// The rank (in `MPI_COMM_WORLD`) that recorded it.
    pub rank: u32,
    /// Its index among the rank's events, from 0.
    pub seq: u32,
    /// What it was.
    pub kind: EventKind,
    /// The communicator, as an index into the rank's [`RankHistory::comms`]
    /// (0 is `MPI_COMM_WORLD`).
    pub comm: u16,
    /// The other side, as a world rank: the destination of a send, the source a receive
    /// took (or was posted for; `None` for `MPI_ANY_SOURCE`), a collective's root.
    pub peer: Option<u32>,
    /// The message's tag (`None` for `MPI_ANY_TAG` in a posted receive, and for
    /// collectives); an abort's error code.
    pub tag: Option<i32>,
    /// Bytes of the message (the received size for receives), or of the rank's part of a
    /// collective.
    pub bytes: u64,
    /// For receives: the `seq` of the send it took, on rank `peer`.
    pub matched: Option<u32>,
    /// For completions (`RecvDone`, `SendDone`, `CollectiveDone`): the `seq` of the event
    /// that posted it.
    pub post: Option<u32>,
    /// Where the program called MPI: an index into [`RankHistory::sites`].
    pub site: Option<u32>,
    /// Microseconds since the rank's `MPI_Init`.
    pub time_us: u32,
    /// The receive (or probe) was posted with `MPI_ANY_SOURCE`.
    pub any_source: bool,
    /// The receive (or probe) was posted with `MPI_ANY_TAG`.
    pub any_tag: bool,
    /// The message was larger than the receive's buffer (`MPI_ERR_TRUNCATE`).
    pub truncated: bool,
    /// In a replay: the receive took another message than the replay record says (the
    /// replay went its own way from here).
    pub diverged: bool,
    /// A persistent request's, or a matched probe's and its receive's: its route was
    /// fixed before the library could choose it, so a replay does not enforce its match.
    pub fixed_route: bool,
}

/// A communicator a rank used.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Comm {
    /// Its index in the rank's table (0 is `MPI_COMM_WORLD`).
    pub id: u16,
    /// Its members' world ranks, in communicator rank order.
    pub ranks: Vec<u32>,
}

/// A place in the program that called MPI.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Site {
    /// Its index in the rank's table.
    pub id: u32,
    /// The file of the module that holds the call (the program or a library), as the
    /// rank's `dladdr` named it.
    pub module: String,
    /// The return address of the call, as an offset from the module's load address.
    pub offset: u64,
}

/// The MPI call a rank was inside when its history ends (it never returned from it: the
/// rank was killed there, or the job ended around it).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Blocked {
    /// The call's kind, as the event it would have recorded (`Recv` for `MPI_Recv` and
    /// `MPI_Wait` on a receive, `Send` for a blocking send, a collective's kind).
    pub kind: EventKind,
    /// The communicator, as in [`Event::comm`].
    pub comm: u16,
    /// The world rank it waited for (`None` for any source, or for a collective).
    pub peer: Option<u32>,
    /// The tag it waited for (`None` for any tag).
    pub tag: Option<i32>,
    /// Where the program called it.
    pub site: Option<u32>,
    /// Microseconds since `MPI_Init` when the call began, to the kernel's tick (a few ms).
    pub since_us: u32,
}

/// Everything one rank recorded.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct RankHistory {
    /// The rank in `MPI_COMM_WORLD`.
    pub rank: u32,
    /// The job's size, as the rank saw it.
    pub size: u32,
    /// Its events, in order: `events[i].seq == i`.
    pub events: Vec<Event>,
    /// The communicators its events name.
    pub comms: Vec<Comm>,
    /// The call sites its events name.
    pub sites: Vec<Site>,
    /// The call it was inside when the history ends, if any.
    pub blocked: Option<Blocked>,
    /// Wall-clock time of its `MPI_Init`, nanoseconds since the Unix epoch (0: unknown):
    /// what puts the ranks' [`Event::time_us`] on one time line.
    pub init_realtime_ns: u64,
}

/// The history of a whole job: one entry per rank, in rank order.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct History {
    /// `ranks[r].rank == r`.
    pub ranks: Vec<RankHistory>,
}

impl History {
    /// The event `(rank, seq)`, if the history has it.
    pub fn event(&self, rank: u32, seq: u32) -> Option<&Event> {
        self.ranks.get(rank as usize)?.events.get(seq as usize)
    }

    /// When event `(rank, seq)` happened, in microseconds since the first rank's
    /// `MPI_Init` (each rank's own start when a rank's wall-clock start is unknown).
    pub fn time_us(&self, rank: u32, seq: u32) -> Option<f64> {
        let rh = self.ranks.get(rank as usize)?;
        let e = rh.events.get(seq as usize)?;
        Some(self.start_offset_us(rh) + f64::from(e.time_us))
    }

    /// A wall-clock time (nanoseconds since the Unix epoch) on the job's time line:
    /// microseconds since the first rank's `MPI_Init`; `None` when no rank's start is known.
    pub fn wall_to_us(&self, wall_ns: i64) -> Option<f64> {
        let first = self.ranks.iter().map(|r| r.init_realtime_ns).filter(|&t| t > 0).min()?;
        Some((wall_ns as f64 - first as f64) / 1000.0)
    }

    /// Microseconds from the first rank's `MPI_Init` to `rh`'s.
    pub fn start_offset_us(&self, rh: &RankHistory) -> f64 {
        let first = self.ranks.iter().map(|r| r.init_realtime_ns).filter(|&t| t > 0).min();
        match first {
            Some(first) if rh.init_realtime_ns >= first => (rh.init_realtime_ns - first) as f64 / 1000.0,
            _ => 0.0,
        }
    }
}
