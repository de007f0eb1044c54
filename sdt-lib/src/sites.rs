//! Per-breakpoint counters, keyed by (level, class, id), in a fixed table that is filled
//! without locks or allocation.

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicU64, Ordering};

/// Distinct breakpoints the table holds; beyond that, breakpoints are not counted
/// (hit 0, and `multiple_mark = 0` is not enforced).
const CAPACITY: usize = 4096;

const EMPTY: u32 = 0;
const CLAIMED: u32 = 1;
const READY: u32 = 2;

/// One breakpoint's counters.
pub(crate) struct Entry {
    state: AtomicU32,
    level: AtomicI32,
    class: AtomicI32,
    id: AtomicI32,
    /// Arrivals that passed the filter's site conditions.
    pub(crate) hits: AtomicU64,
    /// Whether a `multiple_mark = 0` arrival already went to the tracer.
    pub(crate) taken: AtomicBool,
}

impl Entry {
    const fn new() -> Entry {
        Entry {
            state: AtomicU32::new(EMPTY),
            level: AtomicI32::new(0),
            class: AtomicI32::new(0),
            id: AtomicI32::new(0),
            hits: AtomicU64::new(0),
            taken: AtomicBool::new(false),
        }
    }

    fn is(&self, level: i32, class: i32, id: i32) -> bool {
        self.level.load(Ordering::Relaxed) == level
            && self.class.load(Ordering::Relaxed) == class
            && self.id.load(Ordering::Relaxed) == id
    }
}

static TABLE: [Entry; CAPACITY] = [const { Entry::new() }; CAPACITY];

/// The entry of breakpoint (level, class, id), created on first use; `None` once the
/// table is full.
///
/// # Signal Safe Methods
///
/// Lock-free; spins only while another thread is writing a new entry's key.
pub(crate) fn lookup(level: i32, class: i32, id: i32) -> Option<&'static Entry> {
    let key = (level as u32 as u64) << 32 ^ (class as u32 as u64) << 16 ^ id as u32 as u64;
    let start = (key.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 52) as usize;
    let mut probe = 0;
    while probe < CAPACITY {
        let entry = &TABLE[(start + probe) % CAPACITY];
        match entry.state.load(Ordering::Acquire) {
            READY if entry.is(level, class, id) => return Some(entry),
            READY => probe += 1,
            EMPTY => {
                if entry.state.compare_exchange(EMPTY, CLAIMED, Ordering::Acquire, Ordering::Acquire).is_ok()
                {
                    entry.level.store(level, Ordering::Relaxed);
                    entry.class.store(class, Ordering::Relaxed);
                    entry.id.store(id, Ordering::Relaxed);
                    entry.state.store(READY, Ordering::Release);
                    return Some(entry);
                }
                // Lost the race for this slot: look at it again.
            }
            _ => std::hint::spin_loop(),
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_key_same_entry_across_threads() {
        let addrs: Vec<usize> = std::thread::scope(|s| {
            let handles: Vec<_> =
                (0..8).map(|_| s.spawn(|| lookup(7, -3, 99).unwrap() as *const Entry as usize)).collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert!(addrs.windows(2).all(|w| w[0] == w[1]));
        let a = lookup(7, -3, 99).unwrap();
        let b = lookup(7, -3, 98).unwrap();
        assert!(!std::ptr::eq(a, b));
        assert!(b.is(7, -3, 98));
    }
}
