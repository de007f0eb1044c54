//! What the threads of a snapshot asleep in `futex` wait for, and the cycles those waits
//! make (a deadlock): a glibc mutex and the thread holding it, a thread being joined, or
//! a futex word of some other kind (a condition variable, a barrier, a semaphore, a lock
//! that records no owner, as Rust's and C++ atomics-based ones).
//!
//! A thread asleep in `futex` keeps the call's arguments in its registers: the word's
//! address in `rdi`, the operation in `rsi`. What the word belongs to is read from the
//! snapshot's memory around it:
//!
//! - glibc's `pthread_mutex_t` (`struct __pthread_mutex_s`, x86_64) holds the lock word
//!   (1 locked, 2 locked with waiters), a recursion count, the owner's tid, a user count
//!   and the kind, as five 32-bit words from its start; a waiter sleeps on the lock word.
//!   A robust mutex's lock word is the owner's tid (with flag bits); a priority-inheriting
//!   one's too, and its waiters call `FUTEX_LOCK_PI` instead.
//! - `pthread_join` sleeps on the joined thread's tid word, in its thread descriptor,
//!   which that thread's `fs_base` points at.
//!
//! Memory that merely looks so (a condition variable followed by a tid-like word) could be
//! taken for a mutex; every field is checked against what glibc leaves there to keep that
//! unlikely, and the owner named is always a thread of the snapshot or said not to be.

use std::collections::HashMap;

use sdt_store::ThreadState;

use crate::{Activity, Read};

/// `futex(2)`'s number on x86_64.
const SYS_FUTEX: u64 = 202;
/// The operation, without `FUTEX_PRIVATE_FLAG` and `FUTEX_CLOCK_REALTIME`.
const FUTEX_CMD_MASK: u64 = 0x7f;
const FUTEX_WAIT: u64 = 0;
const FUTEX_LOCK_PI: u64 = 6;
const FUTEX_WAIT_BITSET: u64 = 9;
const FUTEX_LOCK_PI2: u64 = 13;
/// The tid bits of a robust or PI futex word (`FUTEX_TID_MASK`).
const FUTEX_TID_MASK: u32 = 0x3fff_ffff;
/// glibc's mutex kinds are below this (type, robust, PI, PP, shared and elision bits).
const MUTEX_KINDS: i32 = 0x400;
/// How far past a thread's `fs_base` its descriptor's tid word may lie.
const DESCRIPTOR_BYTES: u64 = 4096;

/// What a thread asleep in `futex` waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Waited {
    /// A mutex held by thread `owner` (which may not be one of the snapshot's threads).
    Mutex {
        /// The holder's tid, as the mutex records it.
        owner: i32,
    },
    /// The end of `thread`, which it joins.
    Join {
        /// The joined thread.
        thread: i32,
    },
    /// A futex word that names no thread: a condition variable, a barrier, a semaphore,
    /// a lock that keeps no owner.
    Futex,
}

/// One thread's wait.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Wait {
    /// The waiting thread.
    pub tid: i32,
    /// The futex word's address.
    pub word: u64,
    /// What it waits for.
    pub waited: Waited,
    /// Whether the wait has a time limit (a timeout argument).
    pub timed: bool,
}

impl Wait {
    /// The thread whose step this wait needs: the mutex's holder, the joined thread.
    pub fn on(&self) -> Option<i32> {
        match self.waited {
            Waited::Mutex { owner } => Some(owner),
            Waited::Join { thread } => Some(thread),
            Waited::Futex => None,
        }
    }
}

/// The waits of a snapshot's `threads` asleep in `futex`, in their order; `read` reads
/// the snapshot's memory.
pub fn waits(threads: &[ThreadState], read: Read<'_>) -> Vec<Wait> {
    let by_tid: HashMap<i32, &ThreadState> = threads.iter().map(|t| (t.tid, t)).collect();
    threads
        .iter()
        .filter(|t| Activity::of(t, false) == Activity::Waiting { nr: SYS_FUTEX })
        .filter_map(|t| {
            let regs = t.regs().ok()?;
            let waited = waited(&by_tid, t.tid, regs.rdi, regs.rsi & FUTEX_CMD_MASK, read);
            // Every waiting operation takes its timeout fourth, in r10.
            Some(Wait { tid: t.tid, word: regs.rdi, waited, timed: regs.r10 != 0 })
        })
        .collect()
}

/// What the word at `word` that thread `tid` waits on with operation `op` belongs to.
fn waited(threads: &HashMap<i32, &ThreadState>, tid: i32, word: u64, op: u64, read: Read<'_>) -> Waited {
    let mut bytes = [0u8; 20];
    if !read(word, &mut bytes) {
        return Waited::Futex;
    }
    let field = |i: usize| u32::from_le_bytes(bytes[4 * i..4 * i + 4].try_into().unwrap());
    let (lock, owner, users, kind) = (field(0), field(2) as i32, field(3), field(4) as i32);
    match op {
        FUTEX_LOCK_PI | FUTEX_LOCK_PI2 => match (lock & FUTEX_TID_MASK) as i32 {
            0 => Waited::Futex,
            owner => Waited::Mutex { owner },
        },
        FUTEX_WAIT | FUTEX_WAIT_BITSET => {
            let joined = threads.get(&(lock as i32)).filter(|t| {
                t.tid != tid && t.regs().is_ok_and(|r| word.wrapping_sub(r.fs_base) < DESCRIPTOR_BYTES)
            });
            if let Some(t) = joined {
                return Waited::Join { thread: t.tid };
            }
            let locked = lock == 1 || lock == 2 || (lock & FUTEX_TID_MASK) as i32 == owner;
            if locked && owner > 0 && users > 0 && (0..MUTEX_KINDS).contains(&kind) {
                Waited::Mutex { owner }
            } else {
                Waited::Futex
            }
        }
        _ => Waited::Futex,
    }
}

/// A cycle of waits (a deadlock) and the waits stuck behind it, as indices into the
/// waits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cycle {
    /// Each waits for the next, the last for the first; from its first in the waits'
    /// order. A thread waiting for a mutex it holds is a cycle of one.
    pub members: Vec<usize>,
    /// The other waits whose chain leads into it (a thread joining one of its threads,
    /// or waiting for a mutex one of them holds), in order.
    pub behind: Vec<usize>,
}

/// The cycles of `waits`, in the order of their first members, each with the waits
/// behind it. Linear in the waits: each wait leads to at most one other (the thread it
/// waits for), so each chain is walked once.
pub fn cycles(waits: &[Wait]) -> Vec<Cycle> {
    let index: HashMap<i32, usize> = waits.iter().enumerate().map(|(i, w)| (w.tid, i)).collect();
    let next = |i: usize| waits[i].on().and_then(|tid| index.get(&tid).copied());
    // Per wait: not reached yet, on the chain being walked, or the cycle its chain ends in.
    #[derive(Clone, Copy, PartialEq)]
    enum Reached {
        No,
        OnPath,
        Done(Option<usize>),
    }
    let mut reached = vec![Reached::No; waits.len()];
    let mut found: Vec<Cycle> = Vec::new();
    for start in 0..waits.len() {
        let mut path = Vec::new();
        let mut at = Some(start);
        let ends_in = loop {
            let Some(i) = at else { break None };
            match reached[i] {
                Reached::Done(cycle) => break cycle,
                Reached::OnPath => {
                    let from = path.iter().position(|&p| p == i).unwrap_or(0);
                    let mut members = path.split_off(from);
                    let first = (0..members.len()).min_by_key(|&k| members[k]).unwrap_or(0);
                    members.rotate_left(first);
                    for &m in &members {
                        reached[m] = Reached::Done(Some(found.len()));
                    }
                    found.push(Cycle { members, behind: Vec::new() });
                    break Some(found.len() - 1);
                }
                Reached::No => {
                    reached[i] = Reached::OnPath;
                    path.push(i);
                    at = next(i);
                }
            }
        };
        for &i in &path {
            reached[i] = Reached::Done(ends_in);
            if let Some(c) = ends_in {
                found[c].behind.push(i);
            }
        }
    }
    for cycle in &mut found {
        cycle.behind.sort_unstable();
    }
    found.sort_by_key(|c| c.members[0]);
    found
}

#[cfg(test)]
mod tests {
    use sdt_abi::regs::UserRegs;
    use sdt_store::ThreadRunState;

    use super::*;
    use crate::ERESTARTSYS;
    use crate::test_threads::thread_with;

    /// A thread asleep in `futex(word, op)`, or running when `word` is 0.
    fn thread(tid: i32, word: u64, op: u64, fs_base: u64) -> ThreadState {
        let (orig_rax, rax) = if word == 0 { (u64::MAX, 0) } else { (SYS_FUTEX, (-ERESTARTSYS) as u64) };
        let regs = UserRegs { orig_rax, rax, rdi: word, rsi: op, fs_base, ..bytemuck::Zeroable::zeroed() };
        thread_with(tid, regs, ThreadRunState::Running)
    }

    /// Memory of 32-bit words at given addresses, zero elsewhere.
    fn memory(words: &[(u64, u32)]) -> impl Fn(u64, &mut [u8]) -> bool + '_ {
        move |addr, buf| {
            for (i, byte) in buf.iter_mut().enumerate() {
                let at = addr + i as u64;
                *byte = words
                    .iter()
                    .find(|(a, _)| (*a..a + 4).contains(&at))
                    .map_or(0, |(a, w)| w.to_le_bytes()[(at - a) as usize]);
            }
            true
        }
    }

    /// A locked glibc mutex at `at`, held by `owner`, with waiters.
    fn mutex(at: u64, owner: u32) -> [(u64, u32); 3] {
        [(at, 2), (at + 8, owner), (at + 12, 1)]
    }

    #[test]
    fn two_threads_each_holding_the_mutex_the_other_wants_are_a_cycle() {
        let (first, second) = (0x1000, 0x2000);
        let words: Vec<(u64, u32)> = [mutex(first, 11), mutex(second, 12)].concat();
        let threads = vec![
            thread(10, 0x7000_02d0, 0x189, 0x7000_0000),
            thread(11, second, 0x80, 0),
            thread(12, first, 0x80, 0),
            thread(13, 0, 0, 0),
        ];
        let mut words = words;
        words.push((0x7000_02d0, 11));
        let read = memory(&words);
        let found = waits(&threads, &read);
        assert_eq!(
            found.iter().map(|w| (w.tid, w.waited)).collect::<Vec<_>>(),
            [(10, Waited::Futex), (11, Waited::Mutex { owner: 12 }), (12, Waited::Mutex { owner: 11 })]
        );
        assert_eq!(cycles(&found), [Cycle { members: vec![1, 2], behind: vec![] }]);
    }

    #[test]
    fn cycles_come_once_each_with_the_chains_that_lead_into_them() {
        let wait = |tid, owner| Wait { tid, word: 0, waited: Waited::Mutex { owner }, timed: false };
        let join = |tid, thread| Wait { tid, word: 0, waited: Waited::Join { thread }, timed: false };
        let waits = [
            wait(1, 2),  // 0: in the cycle 1 → 2 → 3 → 1
            join(9, 7),  // 1: behind the second cycle, through 7
            wait(2, 3),  // 2
            wait(7, 8),  // 3: behind the second cycle
            wait(3, 1),  // 4
            wait(8, 8),  // 5: the second cycle, of one
            wait(5, 1),  // 6: behind the first
            wait(6, 42), // 7: waits for a thread that does not wait
        ];
        assert_eq!(
            cycles(&waits),
            [
                Cycle { members: vec![0, 2, 4], behind: vec![6] },
                Cycle { members: vec![5], behind: vec![1, 3] }
            ]
        );
        // A long chain into a cycle: every link is behind it.
        let mut chain: Vec<Wait> = (1..4000).map(|tid| wait(tid, tid + 1)).collect();
        chain.push(wait(4000, 3999));
        let found = cycles(&chain);
        assert_eq!(found.len(), 1);
        assert_eq!((found[0].members.as_slice(), found[0].behind.len()), ([3998, 3999].as_slice(), 3998));
    }

    #[test]
    fn a_join_names_the_thread_whose_descriptor_holds_the_word() {
        let words = [(0x7000_02d0, 11)];
        let threads = vec![thread(10, 0x7000_02d0, 0x189, 0), thread(11, 0, 0, 0x7000_0000)];
        let read = memory(&words);
        assert_eq!(waits(&threads, &read)[0].waited, Waited::Join { thread: 11 });
        // The same word elsewhere than the thread's descriptor is not a join.
        let threads = vec![thread(10, 0x7000_02d0, 0x189, 0), thread(11, 0, 0, 0x9000_0000)];
        assert_eq!(waits(&threads, &read)[0].waited, Waited::Futex);
    }

    #[test]
    fn relocking_a_mutex_one_holds_is_a_cycle_of_one_that_blocks_a_pi_waiter_behind_it() {
        let words = [mutex(0x1000, 10).as_slice(), &[(0x3000, 10 | 0x8000_0000)]].concat();
        let threads = vec![thread(10, 0x1000, 0x80, 0), thread(11, 0x3000, 0x86, 0)];
        let read = memory(&words);
        let found = waits(&threads, &read);
        assert_eq!(found[1].waited, Waited::Mutex { owner: 10 });
        assert_eq!(cycles(&found), [Cycle { members: vec![0], behind: vec![1] }]);
    }

    #[test]
    fn words_that_are_not_a_held_mutex_name_no_thread() {
        // A condition variable's sequence word, an unlocked mutex, a kind glibc never sets.
        let words = [(0x1000, 4), (0x1008, 11), (0x100c, 1), (0x2000, 0), (0x2008, 11), (0x200c, 1)];
        let words = [&words[..], &[(0x3000, 2), (0x3008, 11), (0x300c, 1), (0x3010, 0x7fff)]].concat();
        let threads =
            vec![thread(10, 0x1000, 0x80, 0), thread(11, 0x2000, 0x80, 0), thread(12, 0x3000, 0x80, 0)];
        let read = memory(&words);
        assert!(waits(&threads, &read).iter().all(|w| w.waited == Waited::Futex));
    }
}
