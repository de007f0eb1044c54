//! The history in the Chrome trace event format, which Perfetto's UI (ui.perfetto.dev)
//! and `chrome://tracing` open: a process per rank, a one-microsecond slice per event
//! (its arguments are the event's fields), and a flow arrow per message from its send to
//! its receive. Snapshots are instant events on their rank.
//!
//! Format: "Trace Event Format" (JSON object with `traceEvents`; phases `M` metadata,
//! `X` complete slice, `i` instant, `s`/`f` flow start and finish, `bp: "e"` binding the
//! finish to the enclosing slice).

use serde_json::{Value, json};

use crate::cut::messages;
use crate::model::History;

/// A snapshot to mark: its rank, its name and how many of the rank's events precede it.
#[derive(Clone, Debug)]
pub struct Mark {
    /// The rank.
    pub rank: u32,
    /// What to call it (`2:S3`).
    pub name: String,
    /// The rank's events before it.
    pub events: u64,
    /// When it was taken, nanoseconds since the Unix epoch (0: unknown).
    pub wall_ns: i64,
}

impl Mark {
    /// Where the snapshot lies on the job's time line (µs since the first `MPI_Init`): at
    /// its wall-clock time when the ranks' start times are known, else just after the
    /// rank's last event before it.
    pub fn time_us(&self, history: &History) -> f64 {
        if let Some(t) = history.wall_to_us(self.wall_ns) {
            return t;
        }
        match self.events.checked_sub(1) {
            Some(last) => {
                history.time_us(self.rank, last.min(u64::from(u32::MAX)) as u32).unwrap_or(0.0) + 0.5
            }
            None => history.ranks.get(self.rank as usize).map_or(0.0, |rh| history.start_offset_us(rh)),
        }
    }
}

/// The trace of `history`, with `marks` as instant events, as a JSON value.
pub fn chrome_trace(history: &History, marks: &[Mark]) -> Value {
    let mut out = Vec::new();
    for rh in &history.ranks {
        out.push(json!({"ph": "M", "name": "process_name", "pid": rh.rank, "args": {"name": format!("rank {}", rh.rank)}}));
        out.push(
            json!({"ph": "M", "name": "process_sort_index", "pid": rh.rank, "args": {"sort_index": rh.rank}}),
        );
        for e in &rh.events {
            let ts = history.time_us(rh.rank, e.seq).unwrap_or(0.0);
            out.push(json!({
                "ph": "X", "name": e.kind.name(), "cat": "mpi", "pid": rh.rank, "tid": rh.rank, "ts": ts, "dur": 1,
                "args": {"seq": e.seq, "peer": e.peer, "tag": e.tag, "bytes": e.bytes, "comm": e.comm},
            }));
        }
    }
    for (id, m) in messages(history).iter().enumerate() {
        let Some(recv) = m.recv else { continue };
        let (Some(sent_at), Some(received_at)) =
            (history.time_us(m.send.0, m.send.1), history.time_us(recv.0, recv.1))
        else {
            continue;
        };
        out.push(json!({"ph": "s", "name": "message", "cat": "message", "id": id, "pid": m.send.0, "tid": m.send.0, "ts": sent_at}));
        out.push(json!({"ph": "f", "bp": "e", "name": "message", "cat": "message", "id": id, "pid": recv.0, "tid": recv.0, "ts": received_at}));
    }
    for mark in marks {
        let Some(rh) = history.ranks.get(mark.rank as usize) else { continue };
        let ts = match mark.events.checked_sub(1) {
            Some(last) => {
                history.time_us(mark.rank, last.min(u64::from(u32::MAX)) as u32).unwrap_or(0.0) + 0.5
            }
            None => history.start_offset_us(rh),
        };
        out.push(json!({"ph": "i", "s": "p", "name": mark.name, "cat": "snapshot", "pid": mark.rank, "tid": mark.rank, "ts": ts}));
    }
    json!({"traceEvents": out, "displayTimeUnit": "ms"})
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{HistoryBuilder, Op};

    #[test]
    fn messages_are_flows_from_send_to_receive_and_snapshots_instants() {
        let mut h = HistoryBuilder::new(2);
        let s = h.push(0, Op::Send { to: 1, tag: 4 });
        h.push(1, Op::Recv { from: 0, matched: s.1, tag: 4 });
        let history = h.build();
        let trace = chrome_trace(&history, &[Mark { rank: 1, name: "1:S0".into(), events: 1, wall_ns: 0 }]);
        let events = trace["traceEvents"].as_array().unwrap();
        let phase = |ph: &str| events.iter().filter(|e| e["ph"] == ph).collect::<Vec<_>>();
        assert_eq!(phase("X").len(), 2);
        let (start, finish) = (phase("s"), phase("f"));
        assert_eq!((start.len(), finish.len()), (1, 1));
        assert_eq!((start[0]["pid"].as_u64(), finish[0]["pid"].as_u64()), (Some(0), Some(1)));
        assert_eq!(start[0]["id"], finish[0]["id"]);
        assert_eq!(phase("i")[0]["name"], "1:S0");
    }
}
