//! Snapshots of two runs paired by breakpoint arrival, for checking a run against a
//! reference run (the same program on one thread, say): the same breakpoint (level,
//! class, id) reached for the same time (hit) is the same point of the computation.

use std::collections::HashMap;
use std::fmt;

use sdt_store::{Run, Trigger};

/// A breakpoint arrival: which breakpoint, and which time it was reached.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
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
    /// `level 1 class 2 id 10 hit 3`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "level {} class {} id {} hit {}", self.level, self.class, self.id, self.hit)
    }
}

/// The complete breakpoint snapshots of `run` by name, in the run's order (timed
/// snapshots have no arrival and are left out).
pub fn arrivals(run: &Run) -> Result<Vec<(Arrival, String)>, sdt_store::Error> {
    let mut out = Vec::new();
    for entry in run.snapshots()? {
        let entry = entry?;
        if !entry.complete {
            continue;
        }
        let (meta, _) = run.read_meta(entry.seq)?;
        if let Trigger::Breakpoint { level, class, id, hit, .. } = meta.trigger {
            out.push((Arrival { level, class, id, hit }, entry.name));
        }
    }
    Ok(out)
}

/// The arrivals of `reference` that `other` reached too, in `reference`'s order, with
/// the snapshot of each (the first, where a run took two at one arrival); and how many
/// arrivals only one of them reached.
pub fn pair(
    reference: &[(Arrival, String)],
    other: &[(Arrival, String)],
) -> (Vec<(Arrival, String, String)>, usize) {
    let mut in_other = HashMap::new();
    for (arrival, name) in other {
        in_other.entry(*arrival).or_insert(name);
    }
    let mut paired: Vec<(Arrival, String, String)> = Vec::new();
    for (arrival, name) in reference {
        if paired.iter().all(|(a, _, _)| a != arrival)
            && let Some(theirs) = in_other.get(arrival)
        {
            paired.push((*arrival, name.clone(), (*theirs).clone()));
        }
    }
    let distinct = |list: &[(Arrival, String)]| {
        let mut all: Vec<Arrival> = list.iter().map(|(a, _)| *a).collect();
        all.sort_by_key(|a| (a.level, a.class, a.id, a.hit));
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
        let reference = [(at(1, 1), "S0".into()), (at(2, 1), "S1".into()), (at(1, 2), "S2".into())];
        let other = [(at(2, 1), "S0".into()), (at(1, 1), "S1".into()), (at(1, 3), "S2".into())];
        let (paired, unpaired) = pair(&reference, &other);
        assert_eq!(paired, [(at(1, 1), "S0".into(), "S1".into()), (at(2, 1), "S1".into(), "S0".into())]);
        assert_eq!(unpaired, 2);
        assert_eq!(at(3, 4).to_string(), "level 1 class 0 id 3 hit 4");
    }
}
