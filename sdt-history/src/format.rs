//! The per-rank event file, `mpi-events` in the rank's run directory.
//!
//! `sdt run` creates it (0600, inside the store) and hands it to the program's
//! interposition library as an inherited descriptor (`SDT_MPI_EVENTS_FD`); the library
//! maps it shared and grows it with `ftruncate`, so what it recorded is in the file even
//! when the rank is killed, and a capture (all threads stopped) reads an exact
//! [`Header::count`] as the last event of the snapshot. Once the rank has ended, its `sdt
//! run` puts the file's packed form in its place ([`packed`](crate::packed)), which
//! unpacks to this layout.
//!
//! ```text
//! offset 0      header, 4096 bytes (one page)
//! offset 4096   records, 32 bytes each: record i is the event with seq i
//! ```
//!
//! Header (little-endian):
//!
//! ```text
//!  0  [u8; 8]  magic  "SDTMPIEV"
//!  8  u32      version (VERSION)
//! 12  u32      record size (RECORD_SIZE)
//! 16  u32      rank in MPI_COMM_WORLD
//! 20  u32      size of MPI_COMM_WORLD
//! 24  u64      count: records written; a record is complete before count passes it
//! 32  u32      blocked.kind: KIND_NONE when the rank is not inside a blocking call
//! 36  u16      blocked.comm
//! 38  u16      0
//! 40  i32      blocked.peer (world rank; -1 for any source or none)
//! 44  i32      blocked.tag (-1 for any tag or none)
//! 48  u32      blocked.site (NONE for none)
//! 52  u32      blocked.since_us
//! 56  u64      CLOCK_REALTIME at MPI_Init, nanoseconds since the Unix epoch (0: unknown)
//! ```
//!
//! Record (little-endian, 32 bytes):
//!
//! ```text
//!  0  u8   kind (KIND_*)
//!  1  u8   flags (FLAG_*)
//!  2  u16  comm
//!  4  i32  peer (world rank; -1 for none or MPI_ANY_SOURCE)
//!  8  i32  tag (-1 for none or MPI_ANY_TAG; an abort's or fatal error's code)
//! 12  u32  bytes (saturating at u32::MAX)
//! 16  u32  matched: seq of the send a receive took (NONE otherwise)
//! 20  u32  post: seq of the posting event of a completion (NONE otherwise)
//! 24  u32  site (NONE for unknown)
//! 28  u32  time_us since MPI_Init (saturating)
//! ```
//!
//! Constraints a reader checks: `peer < size` or -1; `matched`, `post` and `site` name
//! entries that exist (a `post` names an earlier `Irecv`/`Isend`, or the post of the same
//! non-blocking collective, of the same rank);
//! `comm` names a communicator of the table; flags outside `FLAG_*` are an error.
//! The communicator and site tables are written by the library as text lines in two
//! small side files, `mpi-comms` (`COMM_ID WORLD_RANK,WORLD_RANK,…`) and `mpi-sites`
//! (`SITE_ID 0xOFFSET MODULE_PATH`), appended before any record names them.

/// The events file's name in the rank's run directory.
pub const EVENTS_FILE: &str = "mpi-events";
/// The communicator table's name in the rank's run directory.
pub const COMMS_FILE: &str = "mpi-comms";
/// The call-site table's name in the rank's run directory.
pub const SITES_FILE: &str = "mpi-sites";

/// The file's magic number.
pub const MAGIC: [u8; 8] = *b"SDTMPIEV";
/// The format version (not the crate's).
pub const VERSION: u32 = 1;
/// Bytes of the header.
pub const HEADER_SIZE: u64 = 4096;
/// Bytes of one record.
pub const RECORD_SIZE: u32 = 32;
/// "No such index" in `matched`, `post` and `site`.
pub const NONE: u32 = u32::MAX;

/// Not inside a blocking call (header `blocked.kind`).
pub const KIND_NONE: u8 = 0;
/// [`EventKind::Init`](crate::EventKind::Init).
pub const KIND_INIT: u8 = 1;
/// [`EventKind::Finalize`](crate::EventKind::Finalize).
pub const KIND_FINALIZE: u8 = 2;
/// [`EventKind::Send`](crate::EventKind::Send).
pub const KIND_SEND: u8 = 3;
/// [`EventKind::Isend`](crate::EventKind::Isend).
pub const KIND_ISEND: u8 = 4;
/// [`EventKind::Recv`](crate::EventKind::Recv).
pub const KIND_RECV: u8 = 5;
/// [`EventKind::Irecv`](crate::EventKind::Irecv).
pub const KIND_IRECV: u8 = 6;
/// [`EventKind::RecvDone`](crate::EventKind::RecvDone).
pub const KIND_RECV_DONE: u8 = 7;
/// [`EventKind::SendDone`](crate::EventKind::SendDone).
pub const KIND_SEND_DONE: u8 = 8;
/// [`EventKind::Probe`](crate::EventKind::Probe).
pub const KIND_PROBE: u8 = 9;
/// [`EventKind::Abort`](crate::EventKind::Abort): its tag is the error code, any `i32`.
pub const KIND_ABORT: u8 = 10;
/// [`EventKind::FatalError`](crate::EventKind::FatalError): its tag is the error code.
pub const KIND_FATAL_ERROR: u8 = 11;
/// Collectives: `KIND_COLLECTIVE + n`, n in the order of
/// [`CollectiveKind`](crate::CollectiveKind)'s variants (Barrier = 0 … Other = 10).
pub const KIND_COLLECTIVE: u8 = 32;
/// Non-blocking collectives' posts: `KIND_ICOLLECTIVE + n`, n as for [`KIND_COLLECTIVE`].
pub const KIND_ICOLLECTIVE: u8 = 64;
/// Non-blocking collectives' completions: `KIND_COLLECTIVE_DONE + n`.
pub const KIND_COLLECTIVE_DONE: u8 = 96;

/// The receive was posted with `MPI_ANY_SOURCE`.
pub const FLAG_ANY_SOURCE: u8 = 1;
/// The receive was posted with `MPI_ANY_TAG`.
pub const FLAG_ANY_TAG: u8 = 2;
/// The message was truncated (`MPI_ERR_TRUNCATE`).
pub const FLAG_TRUNCATED: u8 = 4;
/// In a replay, the receive took another message than the replay record says.
pub const FLAG_DIVERGED: u8 = 8;
/// The operation's route was fixed before the library could choose it (a persistent
/// request, a matched probe and its receive): a replay does not enforce its match.
pub const FLAG_FIXED_ROUTE: u8 = 16;

use crate::model::{Blocked, CollectiveKind, Comm, Event, EventKind, RankHistory, Site};

/// The collectives in the order of their codes (`KIND_COLLECTIVE + index`).
const COLLECTIVES: [CollectiveKind; 11] = [
    CollectiveKind::Barrier,
    CollectiveKind::Bcast,
    CollectiveKind::Scatter,
    CollectiveKind::Reduce,
    CollectiveKind::Gather,
    CollectiveKind::Allreduce,
    CollectiveKind::Allgather,
    CollectiveKind::Alltoall,
    CollectiveKind::ReduceScatter,
    CollectiveKind::Scan,
    CollectiveKind::Other,
];

/// Every flag a record may carry.
const FLAGS: u8 = FLAG_ANY_SOURCE | FLAG_ANY_TAG | FLAG_TRUNCATED | FLAG_DIVERGED | FLAG_FIXED_ROUTE;

/// Why a rank's event files cannot be read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum FormatError {
    /// The events file is shorter than its header.
    #[error("the events file has {0} bytes, less than its {HEADER_SIZE}-byte header")]
    FileTooSmallForHeader(usize),
    /// The events file does not start with [`MAGIC`].
    #[error("the events file starts with {0:02x?}, not the magic {MAGIC:02x?}")]
    WrongMagicBytes([u8; 8]),
    /// An older format version than this reader's.
    #[error("the events file has format version {0}, older than {VERSION}")]
    VersionTooOld(u32),
    /// A newer format version than this reader's.
    #[error("the events file has format version {0}, newer than {VERSION}")]
    VersionTooNew(u32),
    /// The header's record size is not [`RECORD_SIZE`].
    #[error("the header's record size is {0}, expected {RECORD_SIZE}")]
    RecordSize(u32),
    /// The rank is not below the job's size.
    #[error("rank {rank} is not below the job's size {size}")]
    Rank {
        /// The header's rank.
        rank: u32,
        /// The header's size.
        size: u32,
    },
    /// The header counts more records than the file holds.
    #[error("the header counts {count} records; the file holds {available}")]
    Truncated {
        /// The header's count.
        count: u64,
        /// Whole records after the header.
        available: u64,
    },
    /// A line of `mpi-comms` does not hold.
    #[error("mpi-comms line {line}: {detail}")]
    Comms {
        /// The line, from 1.
        line: usize,
        /// What is wrong.
        detail: String,
    },
    /// A line of `mpi-sites` does not hold.
    #[error("mpi-sites line {line}: {detail}")]
    Sites {
        /// The line, from 1.
        line: usize,
        /// What is wrong.
        detail: String,
    },
    /// A record does not hold.
    #[error("event {seq}: {detail}")]
    Record {
        /// The record's index.
        seq: u32,
        /// What is wrong.
        detail: String,
    },
    /// The packed form of the events file does not hold.
    #[error("the packed events file: {0}")]
    Packed(String),
    /// The header's `blocked` slot does not hold.
    #[error("the header's blocked call: {0}")]
    Blocked(String),
}

/// Little-endian fields at fixed offsets of a checked slice.
struct Fields<'a>(&'a [u8]);

impl Fields<'_> {
    fn bytes<const N: usize>(&self, at: usize) -> [u8; N] {
        let mut out = [0; N];
        out.copy_from_slice(&self.0[at..at + N]);
        out
    }
    fn u16(&self, at: usize) -> u16 {
        u16::from_le_bytes(self.bytes(at))
    }
    fn u32(&self, at: usize) -> u32 {
        u32::from_le_bytes(self.bytes(at))
    }
    fn i32(&self, at: usize) -> i32 {
        i32::from_le_bytes(self.bytes(at))
    }
    fn u64(&self, at: usize) -> u64 {
        u64::from_le_bytes(self.bytes(at))
    }
}

/// The event kind of a record's or the header's kind code.
fn kind_of(code: u8) -> Option<EventKind> {
    Some(match code {
        KIND_INIT => EventKind::Init,
        KIND_FINALIZE => EventKind::Finalize,
        KIND_SEND => EventKind::Send,
        KIND_ISEND => EventKind::Isend,
        KIND_RECV => EventKind::Recv,
        KIND_IRECV => EventKind::Irecv,
        KIND_RECV_DONE => EventKind::RecvDone,
        KIND_SEND_DONE => EventKind::SendDone,
        KIND_PROBE => EventKind::Probe,
        KIND_ABORT => EventKind::Abort,
        KIND_FATAL_ERROR => EventKind::FatalError,
        KIND_COLLECTIVE_DONE.. => EventKind::CollectiveDone(collective(code - KIND_COLLECTIVE_DONE)?),
        KIND_ICOLLECTIVE.. => EventKind::ICollective(collective(code - KIND_ICOLLECTIVE)?),
        _ => EventKind::Collective(collective(code.checked_sub(KIND_COLLECTIVE)?)?),
    })
}

/// The collective operation numbered `n` in a kind code.
fn collective(n: u8) -> Option<CollectiveKind> {
    COLLECTIVES.get(usize::from(n)).copied()
}

/// The kind code of an event kind.
pub fn kind_code(kind: EventKind) -> u8 {
    match kind {
        EventKind::Init => KIND_INIT,
        EventKind::Finalize => KIND_FINALIZE,
        EventKind::Send => KIND_SEND,
        EventKind::Isend => KIND_ISEND,
        EventKind::Recv => KIND_RECV,
        EventKind::Irecv => KIND_IRECV,
        EventKind::RecvDone => KIND_RECV_DONE,
        EventKind::SendDone => KIND_SEND_DONE,
        EventKind::Probe => KIND_PROBE,
        EventKind::Abort => KIND_ABORT,
        EventKind::FatalError => KIND_FATAL_ERROR,
        EventKind::Collective(c) => KIND_COLLECTIVE + collective_number(c),
        EventKind::ICollective(c) => KIND_ICOLLECTIVE + collective_number(c),
        EventKind::CollectiveDone(c) => KIND_COLLECTIVE_DONE + collective_number(c),
    }
}

/// The number of a collective operation in a kind code.
fn collective_number(c: CollectiveKind) -> u8 {
    COLLECTIVES.iter().position(|&k| k == c).unwrap_or(10) as u8
}

/// Bytes of the header that [`count`] needs.
pub const COUNT_PREFIX: usize = 32;

/// The records the header counts, from the first [`COUNT_PREFIX`] bytes of `events`,
/// without checking them: what a capture notes as its snapshot's last event. `None` when
/// the header is not one (the rank has not called `MPI_Init`).
pub fn count(events: &[u8]) -> Option<u64> {
    let header = events.get(..COUNT_PREFIX)?;
    (header[..8] == MAGIC).then(|| Fields(header).u64(24))
}

/// Reads one rank's history from its three files (`mpi-events`, `mpi-comms`,
/// `mpi-sites`), checking every constraint of the layout. A last line of a side file
/// without its newline (the rank was killed while appending it) is ignored: no record
/// names it.
pub fn read_rank(events: &[u8], comms: &str, sites: &str) -> Result<RankHistory, FormatError> {
    let header =
        events.get(..HEADER_SIZE as usize).ok_or(FormatError::FileTooSmallForHeader(events.len()))?;
    let h = Fields(header);
    let magic: [u8; 8] = h.bytes(0);
    if magic != MAGIC {
        return Err(FormatError::WrongMagicBytes(magic));
    }
    match h.u32(8) {
        v if v < VERSION => return Err(FormatError::VersionTooOld(v)),
        v if v > VERSION => return Err(FormatError::VersionTooNew(v)),
        _ => {}
    }
    if h.u32(12) != RECORD_SIZE {
        return Err(FormatError::RecordSize(h.u32(12)));
    }
    let (rank, size) = (h.u32(16), h.u32(20));
    if rank >= size {
        return Err(FormatError::Rank { rank, size });
    }
    let body = &events[HEADER_SIZE as usize..];
    let available = (body.len() / RECORD_SIZE as usize) as u64;
    let count = h.u64(24);
    if count > available || count > u64::from(NONE) {
        return Err(FormatError::Truncated { count, available });
    }
    let comms = read_comms(comms, size)?;
    let sites = read_sites(sites)?;
    let peer = |raw: i32| -> Result<Option<u32>, String> {
        match raw {
            -1 => Ok(None),
            p if p >= 0 && (p as u32) < size => Ok(Some(p as u32)),
            p => Err(format!("peer {p} is not a rank of {size}")),
        }
    };
    let tag = |raw: i32| -> Result<Option<i32>, String> {
        match raw {
            -1 => Ok(None),
            t if t >= 0 => Ok(Some(t)),
            t => Err(format!("tag {t} is negative")),
        }
    };
    let comm = |raw: u16| -> Result<u16, String> {
        if (raw as usize) < comms.len() {
            Ok(raw)
        } else {
            Err(format!("communicator {raw} is not in mpi-comms"))
        }
    };
    let site = |raw: u32| -> Result<Option<u32>, String> {
        match raw {
            NONE => Ok(None),
            s if (s as usize) < sites.len() => Ok(Some(s)),
            s => Err(format!("site {s} is not in mpi-sites")),
        }
    };
    let mut out: Vec<Event> = Vec::with_capacity(count as usize);
    for (seq, record) in body.chunks_exact(RECORD_SIZE as usize).take(count as usize).enumerate() {
        let seq = seq as u32;
        let r = Fields(record);
        let event = (|| {
            let kind = kind_of(record[0]).ok_or_else(|| format!("unknown kind {}", record[0]))?;
            let flags = record[1];
            if flags & !FLAGS != 0 {
                return Err(format!("unknown flags {flags:#04x}"));
            }
            let matched = match r.u32(16) {
                NONE => None,
                m if kind.receives() => Some(m),
                m => return Err(format!("a {} names a matched send {m}", kind.name())),
            };
            let post = match (r.u32(20), kind.posted_by()) {
                (NONE, _) => None,
                (p, Some(wanted)) => match out.get(p as usize) {
                    Some(posted) if posted.kind == wanted => Some(p),
                    _ => return Err(format!("post {p} is not an earlier {}", wanted.name())),
                },
                (p, _) => return Err(format!("a {} names a post {p}", kind.name())),
            };
            let peer = peer(r.i32(4))?;
            if matched.is_some() && peer.is_none() {
                return Err("a receive names a matched send but no source".into());
            }
            Ok(Event {
                rank,
                seq,
                kind,
                comm: comm(r.u16(2))?,
                peer,
                tag: if kind.aborts() { Some(r.i32(8)) } else { tag(r.i32(8))? },
                bytes: u64::from(r.u32(12)),
                matched,
                post,
                site: site(r.u32(24))?,
                time_us: r.u32(28),
                any_source: flags & FLAG_ANY_SOURCE != 0,
                any_tag: flags & FLAG_ANY_TAG != 0,
                truncated: flags & FLAG_TRUNCATED != 0,
                diverged: flags & FLAG_DIVERGED != 0,
                fixed_route: flags & FLAG_FIXED_ROUTE != 0,
            })
        })()
        .map_err(|detail| FormatError::Record { seq, detail })?;
        out.push(event);
    }
    let blocked = match header[32..36] {
        [0, 0, 0, 0] => None,
        _ => Some(
            (|| {
                let code = h.u32(32);
                let kind = u8::try_from(code)
                    .ok()
                    .and_then(kind_of)
                    .ok_or_else(|| format!("unknown kind {code}"))?;
                Ok(Blocked {
                    kind,
                    comm: comm(h.u16(36))?,
                    peer: peer(h.i32(40))?,
                    tag: tag(h.i32(44))?,
                    site: site(h.u32(48))?,
                    since_us: h.u32(52),
                })
            })()
            .map_err(FormatError::Blocked)?,
        ),
    };
    Ok(RankHistory { rank, size, events: out, comms, sites, blocked, init_realtime_ns: h.u64(56) })
}

/// The complete lines of a side file, numbered from 1.
fn complete_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    let complete = text.rfind('\n').map_or("", |end| &text[..end]);
    complete.split('\n').enumerate().filter(|_| !complete.is_empty()).map(|(i, line)| (i + 1, line))
}

/// `mpi-comms`: `ID RANK,RANK,…`, ids from 0 in order, 0 being `MPI_COMM_WORLD`.
fn read_comms(text: &str, size: u32) -> Result<Vec<Comm>, FormatError> {
    let mut comms: Vec<Comm> = Vec::new();
    for (line, text) in complete_lines(text) {
        let err = |detail: String| FormatError::Comms { line, detail };
        let (id, members) = text.split_once(' ').ok_or_else(|| err(format!("{text:?} is not `ID RANKS`")))?;
        let id: u16 = id.parse().map_err(|_| err(format!("id {id:?} is not a number")))?;
        if id as usize != comms.len() {
            return Err(err(format!("id {id}, expected {}", comms.len())));
        }
        let mut ranks = Vec::new();
        for member in members.split(',') {
            let r: u32 = member.parse().map_err(|_| err(format!("member {member:?} is not a number")))?;
            if r >= size || ranks.contains(&r) {
                return Err(err(format!("member {r} is repeated or not a rank of {size}")));
            }
            ranks.push(r);
        }
        if id == 0 && !ranks.iter().copied().eq(0..size) {
            return Err(err(format!("communicator 0 is not MPI_COMM_WORLD's {size} ranks in order")));
        }
        comms.push(Comm { id, ranks });
    }
    Ok(comms)
}

/// `mpi-sites`: `ID 0xOFFSET MODULE_PATH`, ids from 0 in order.
fn read_sites(text: &str) -> Result<Vec<Site>, FormatError> {
    let mut sites: Vec<Site> = Vec::new();
    for (line, text) in complete_lines(text) {
        let err = |detail: String| FormatError::Sites { line, detail };
        let mut parts = text.splitn(3, ' ');
        let (Some(id), Some(offset), Some(module)) = (parts.next(), parts.next(), parts.next()) else {
            return Err(err(format!("{text:?} is not `ID 0xOFFSET MODULE`")));
        };
        let id: u32 = id.parse().map_err(|_| err(format!("id {id:?} is not a number")))?;
        if id as usize != sites.len() || id == NONE {
            return Err(err(format!("id {id}, expected {}", sites.len())));
        }
        let offset = offset
            .strip_prefix("0x")
            .and_then(|hex| u64::from_str_radix(hex, 16).ok())
            .ok_or_else(|| err(format!("offset {offset:?} is not 0xHEX")))?;
        if module.is_empty() {
            return Err(err("no module".into()));
        }
        sites.push(Site { id, module: module.to_owned(), offset });
    }
    Ok(sites)
}

/// A rank's three files, as the interposition library writes them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RankFiles {
    /// `mpi-events`.
    pub events: Vec<u8>,
    /// `mpi-comms`.
    pub comms: String,
    /// `mpi-sites`.
    pub sites: String,
}

/// Writes `history` in the library's layout (for tests and fixtures; the library
/// itself is C). [`read_rank`] reads back what it was given, for any history it accepts.
pub fn write_rank(history: &RankHistory) -> RankFiles {
    let mut events = vec![0; HEADER_SIZE as usize];
    events[..8].copy_from_slice(&MAGIC);
    let mut put = |at: usize, bytes: &[u8]| events[at..at + bytes.len()].copy_from_slice(bytes);
    put(8, &VERSION.to_le_bytes());
    put(12, &RECORD_SIZE.to_le_bytes());
    put(16, &history.rank.to_le_bytes());
    put(20, &history.size.to_le_bytes());
    put(24, &(history.events.len() as u64).to_le_bytes());
    let raw_peer = |peer: Option<u32>| peer.map_or(-1, |p| p as i32);
    if let Some(b) = &history.blocked {
        put(32, &u32::from(kind_code(b.kind)).to_le_bytes());
        put(36, &b.comm.to_le_bytes());
        put(40, &raw_peer(b.peer).to_le_bytes());
        put(44, &b.tag.unwrap_or(-1).to_le_bytes());
        put(48, &b.site.unwrap_or(NONE).to_le_bytes());
        put(52, &b.since_us.to_le_bytes());
    }
    put(56, &history.init_realtime_ns.to_le_bytes());
    for e in &history.events {
        let flags = [
            (e.any_source, FLAG_ANY_SOURCE),
            (e.any_tag, FLAG_ANY_TAG),
            (e.truncated, FLAG_TRUNCATED),
            (e.diverged, FLAG_DIVERGED),
            (e.fixed_route, FLAG_FIXED_ROUTE),
        ]
        .iter()
        .filter(|(set, _)| *set)
        .fold(0, |flags, (_, flag)| flags | flag);
        events.extend_from_slice(&[kind_code(e.kind), flags]);
        events.extend_from_slice(&e.comm.to_le_bytes());
        events.extend_from_slice(&raw_peer(e.peer).to_le_bytes());
        events.extend_from_slice(&e.tag.unwrap_or(-1).to_le_bytes());
        events.extend_from_slice(&u32::try_from(e.bytes).unwrap_or(u32::MAX).to_le_bytes());
        for field in [e.matched, e.post, e.site] {
            events.extend_from_slice(&field.unwrap_or(NONE).to_le_bytes());
        }
        events.extend_from_slice(&e.time_us.to_le_bytes());
    }
    let comms = history
        .comms
        .iter()
        .map(|c| {
            let ranks: Vec<String> = c.ranks.iter().map(u32::to_string).collect();
            format!("{} {}\n", c.id, ranks.join(","))
        })
        .collect();
    let sites = history.sites.iter().map(|s| format!("{} {:#x} {}\n", s.id, s.offset, s.module)).collect();
    RankFiles { events, comms, sites }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(seq: u32, kind: EventKind) -> Event {
        crate::testing::event(1, seq, kind)
    }

    /// Rank 1 of 3: init, a wildcard Irecv completed from rank 2, a send, an allreduce
    /// on a sub-communicator, finalize; blocked in a receive.
    fn sample() -> RankHistory {
        let mut events = vec![
            event(0, EventKind::Init),
            Event { tag: Some(7), any_source: true, ..event(1, EventKind::Irecv) },
            Event {
                peer: Some(2),
                tag: Some(7),
                bytes: 8,
                matched: Some(4),
                post: Some(1),
                any_source: true,
                site: Some(0),
                ..event(2, EventKind::RecvDone)
            },
            Event { peer: Some(0), tag: Some(3), bytes: 4, site: Some(1), ..event(3, EventKind::Send) },
            Event { comm: 1, bytes: 8, ..event(4, EventKind::Collective(CollectiveKind::Allreduce)) },
            event(5, EventKind::Finalize),
        ];
        events[4].peer = None;
        RankHistory {
            rank: 1,
            size: 3,
            events,
            comms: vec![Comm { id: 0, ranks: vec![0, 1, 2] }, Comm { id: 1, ranks: vec![2, 1] }],
            sites: vec![
                Site { id: 0, module: "/home/u/ring".into(), offset: 0x1234 },
                Site { id: 1, module: "/lib/with space.so".into(), offset: 0 },
            ],
            blocked: Some(Blocked {
                kind: EventKind::Recv,
                comm: 0,
                peer: None,
                tag: Some(1),
                site: Some(1),
                since_us: 99,
            }),
            init_realtime_ns: 1_764_000_000_123_456_789,
        }
    }

    fn read(files: &RankFiles) -> Result<RankHistory, FormatError> {
        read_rank(&files.events, &files.comms, &files.sites)
    }

    #[test]
    fn reads_what_it_writes() {
        let files = write_rank(&sample());
        assert_eq!(files.events.len(), 4096 + 6 * 32);
        assert_eq!(files.comms, "0 0,1,2\n1 2,1\n");
        assert_eq!(files.sites, "0 0x1234 /home/u/ring\n1 0x0 /lib/with space.so\n");
        assert_eq!(read(&files).unwrap(), sample());
        assert_eq!(count(&files.events), Some(6));
    }

    #[test]
    fn records_past_the_count_and_unfinished_lines_are_not_read() {
        let mut files = write_rank(&sample());
        files.events.extend_from_slice(&[0xff; 64 * 1024]);
        files.sites.push_str("2 0x10 /half-writ");
        assert_eq!(read(&files).unwrap(), sample());
    }

    #[test]
    fn header_errors() {
        let files = write_rank(&sample());
        assert_eq!(read_rank(&files.events[..100], "", ""), Err(FormatError::FileTooSmallForHeader(100)));
        let patched = |at: usize, bytes: &[u8]| {
            let mut events = files.events.clone();
            events[at..at + bytes.len()].copy_from_slice(bytes);
            read_rank(&events, &files.comms, &files.sites)
        };
        assert_eq!(patched(0, b"SDTMPIEW"), Err(FormatError::WrongMagicBytes(*b"SDTMPIEW")));
        assert_eq!(patched(8, &0u32.to_le_bytes()), Err(FormatError::VersionTooOld(0)));
        assert_eq!(patched(8, &2u32.to_le_bytes()), Err(FormatError::VersionTooNew(2)));
        assert_eq!(patched(12, &16u32.to_le_bytes()), Err(FormatError::RecordSize(16)));
        assert_eq!(patched(16, &3u32.to_le_bytes()), Err(FormatError::Rank { rank: 3, size: 3 }));
        assert_eq!(patched(24, &7u64.to_le_bytes()), Err(FormatError::Truncated { count: 7, available: 6 }));
        assert_eq!(
            patched(24, &u64::MAX.to_le_bytes()),
            Err(FormatError::Truncated { count: u64::MAX, available: 6 })
        );
        assert!(matches!(patched(32, &[KIND_COLLECTIVE + 11]), Err(FormatError::Blocked(_))));
        assert!(matches!(patched(36, &[2]), Err(FormatError::Blocked(_))));
    }

    #[test]
    fn record_errors() {
        let files = write_rank(&sample());
        let record = |seq: usize, at: usize, bytes: &[u8]| {
            let mut events = files.events.clone();
            let at = 4096 + seq * 32 + at;
            events[at..at + bytes.len()].copy_from_slice(bytes);
            match read_rank(&events, &files.comms, &files.sites) {
                Err(FormatError::Record { seq: got, detail }) => {
                    assert_eq!(got as usize, seq);
                    detail
                }
                other => panic!("{other:?}"),
            }
        };
        assert_eq!(record(0, 0, &[12]), "unknown kind 12");
        assert_eq!(record(0, 0, &[KIND_COLLECTIVE + 11]), "unknown kind 43");
        assert_eq!(record(0, 0, &[KIND_ICOLLECTIVE + 11]), "unknown kind 75");
        assert_eq!(record(0, 0, &[KIND_COLLECTIVE_DONE + 11]), "unknown kind 107");
        assert_eq!(record(0, 1, &[32]), "unknown flags 0x20");
        assert_eq!(record(3, 2, &[2, 0]), "communicator 2 is not in mpi-comms");
        assert_eq!(record(3, 4, &3i32.to_le_bytes()), "peer 3 is not a rank of 3");
        assert_eq!(record(3, 4, &(-2i32).to_le_bytes()), "peer -2 is not a rank of 3");
        assert_eq!(record(3, 8, &(-5i32).to_le_bytes()), "tag -5 is negative");
        assert_eq!(record(3, 16, &0u32.to_le_bytes()), "a send names a matched send 0");
        assert_eq!(record(2, 4, &(-1i32).to_le_bytes()), "a receive names a matched send but no source");
        assert_eq!(record(2, 20, &2u32.to_le_bytes()), "post 2 is not an earlier irecv");
        assert_eq!(record(2, 20, &0u32.to_le_bytes()), "post 0 is not an earlier irecv");
        assert_eq!(record(3, 20, &1u32.to_le_bytes()), "a send names a post 1");
        assert_eq!(record(3, 24, &2u32.to_le_bytes()), "site 2 is not in mpi-sites");
    }

    #[test]
    fn every_kind_reads_back_from_its_code() {
        for c in COLLECTIVES {
            for kind in [EventKind::Collective(c), EventKind::ICollective(c), EventKind::CollectiveDone(c)] {
                assert_eq!(kind_of(kind_code(kind)), Some(kind));
            }
        }
        let mut history = sample();
        history.events[4].kind = EventKind::ICollective(CollectiveKind::Allreduce);
        history.events[5] = Event {
            comm: 1,
            post: Some(4),
            ..event(5, EventKind::CollectiveDone(CollectiveKind::Allreduce))
        };
        history.events.push(Event { tag: Some(-7), ..event(6, EventKind::Abort) });
        history.blocked = Some(Blocked {
            kind: EventKind::ICollective(CollectiveKind::Barrier),
            ..sample().blocked.unwrap()
        });
        assert_eq!(read(&write_rank(&history)).unwrap(), history);
        // A completion names its own collective's post.
        history.events[5].post = Some(3);
        let err = read(&write_rank(&history)).unwrap_err().to_string();
        assert_eq!(err, "event 5: post 3 is not an earlier iallreduce");
    }

    #[test]
    fn side_file_errors() {
        let files = write_rank(&sample());
        let comms = |text: &str| read_rank(&files.events, text, &files.sites).unwrap_err().to_string();
        assert_eq!(comms("0 0,1,2\n2 1\n"), "mpi-comms line 2: id 2, expected 1");
        assert_eq!(
            comms("0 0,1\n"),
            "mpi-comms line 1: communicator 0 is not MPI_COMM_WORLD's 3 ranks in order"
        );
        assert_eq!(comms("0 0,1,2\n1 1,1\n"), "mpi-comms line 2: member 1 is repeated or not a rank of 3");
        assert_eq!(comms("0 0,1,2\n1 \n"), "mpi-comms line 2: member \"\" is not a number");
        assert_eq!(comms("0,1,2\n"), "mpi-comms line 1: \"0,1,2\" is not `ID RANKS`");
        // The records name communicator 1.
        assert_eq!(comms("0 0,1,2\n"), "event 4: communicator 1 is not in mpi-comms");
        let sites = |text: &str| read_rank(&files.events, &files.comms, text).unwrap_err().to_string();
        assert_eq!(sites("0 0x1 a\n0 0x2 b\n"), "mpi-sites line 2: id 0, expected 1");
        assert_eq!(sites("0 12 a\n"), "mpi-sites line 1: offset \"12\" is not 0xHEX");
        assert_eq!(sites("0 0x1\n"), "mpi-sites line 1: \"0 0x1\" is not `ID 0xOFFSET MODULE`");
        assert_eq!(sites("0 0x1 \n"), "mpi-sites line 1: no module");
        assert_eq!(sites("\u{e9} 0x1 a\n"), "mpi-sites line 1: id \"\u{e9}\" is not a number");
    }
}
