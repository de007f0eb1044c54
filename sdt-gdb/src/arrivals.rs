//! Snapshots of two runs paired by breakpoint arrival, for checking a run against a
//! reference run (the same program on one thread, say): the same breakpoint (level,
//! class, id) reached for the same time (hit) is the same point of the computation.

use std::collections::HashMap;
use std::fmt;

use sdt_store::{Run, Trigger};

/// A breakpoint arrival: which breakpoint, and which time it was reached.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Arrival {
    /// The breakpoint's level.
    pub level: i32,
    /// Its class.
    pub class: i32,
    /// Its id.
    pub id: i32,
    /// Which arrival, from 1.
    pub hit: u64,
}

impl fmt::Display for Arrival {
    /// `level 1 class 2 id 10 hit 3`; `the stop at a cut` and `the end of the job` for
    /// the breakpoints of SDT's own (class -1) that ranks stopped at a cut of their
    /// history (id -1), and ranks ending the job (id -2), trap with.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.class, self.id) {
            (-1, -1) => return write!(f, "the stop at a cut"),
            (-1, -2) => return write!(f, "the end of the job"),
            _ => {}
        }
        write!(f, "level {} class {} id {} hit {}", self.level, self.class, self.id, self.hit)
    }
}

/// A snapshot taken at a breakpoint arrival.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Arrived {
    /// The arrival.
    pub arrival: Arrival,
    /// The snapshot's name.
    pub name: String,
    /// Its position in its run.
    pub seq: u32,
    /// For a rank of an MPI job, the events of its message history before it.
    pub mpi_events: Option<u64>,
}

/// The complete breakpoint snapshots of `run`, in the run's order (timed snapshots have
/// no arrival and are left out).
pub fn arrivals(run: &Run) -> Result<Vec<Arrived>, sdt_store::Error> {
    let mut out = Vec::new();
    for entry in run.snapshots()? {
        let entry = entry?;
        if !entry.complete {
            continue;
        }
        let (meta, _) = run.read_meta(entry.seq)?;
        if let Trigger::Breakpoint { level, class, id, hit, .. } = meta.trigger {
            let arrival = Arrival { level, class, id, hit };
            out.push(Arrived { arrival, name: entry.name, seq: entry.seq, mpi_events: meta.mpi_events });
        }
    }
    Ok(out)
}

/// The arrivals of `reference` that `other` reached too, in `reference`'s order, with
/// the snapshot of each (the first, where a run took two at one arrival); and how many
/// arrivals only one of them reached.
pub fn pair(reference: &[Arrived], other: &[Arrived]) -> (Vec<(Arrival, String, String)>, usize) {
    let mut in_other = HashMap::new();
    for a in other {
        in_other.entry(a.arrival).or_insert(&a.name);
    }
    let mut paired: Vec<(Arrival, String, String)> = Vec::new();
    for a in reference {
        if paired.iter().all(|(p, _, _)| *p != a.arrival)
            && let Some(theirs) = in_other.get(&a.arrival)
        {
            paired.push((a.arrival, a.name.clone(), (*theirs).clone()));
        }
    }
    let distinct = |list: &[Arrived]| {
        let mut all: Vec<Arrival> = list.iter().map(|a| a.arrival).collect();
        all.sort();
        all.dedup();
        all.len()
    };
    let unpaired = distinct(reference) + distinct(other) - 2 * paired.len();
    (paired, unpaired)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arrivals_pair_by_breakpoint_and_hit() {
        let at = |id, hit| Arrival { level: 1, class: 0, id, hit };
        let snap = |arrival, seq: u32| Arrived { arrival, name: format!("S{seq}"), seq, mpi_events: None };
        let reference = [snap(at(1, 1), 0), snap(at(2, 1), 1), snap(at(1, 2), 2)];
        let other = [snap(at(2, 1), 0), snap(at(1, 1), 1), snap(at(1, 3), 2)];
        let (paired, unpaired) = pair(&reference, &other);
        assert_eq!(paired, [(at(1, 1), "S0".into(), "S1".into()), (at(2, 1), "S1".into(), "S0".into())]);
        assert_eq!(unpaired, 2);
        assert_eq!(at(3, 4).to_string(), "level 1 class 0 id 3 hit 4");
    }
}
