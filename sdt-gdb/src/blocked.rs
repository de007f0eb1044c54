//! What a snapshot's blocked threads wait for, in words: the mutex (by the global's name
//! where the program's DWARF has it) and its holder, the thread being joined, and the
//! deadlocks those waits make; the descriptor a thread blocked in I/O waits on, and the
//! child a thread waits for. For `sdt show`, `sdt run`'s last word on a program stopped
//! at a signal or at its `--timeout`, and `sdt waits` in gdb.
//!
//! Names from the snapshot (a global's, a mapping's path) are written with
//! [`str::escape_debug`]: they reach a terminal.

use std::collections::HashMap;

use sdt_store::{SnapshotMeta, SnapshotSource};
use sdt_target::waits::{self, Cycle, Wait, Waited};
use sdt_target::{Activity, syscall_name};

use crate::vars::{Program, Symbolizer};

/// The waits of a snapshot's threads and their deadlocks, with the words that name them.
pub struct Blocked {
    waits: Vec<Wait>,
    /// Per wait: the futex word, named in full (with its address) and in short; empty
    /// until [`name_words`](Self::name_words).
    words: Vec<(String, String)>,
    /// The threads of the snapshot.
    threads: Vec<i32>,
    /// Threads blocked in other system calls, with what they wait on in words.
    others: Vec<(i32, String)>,
    /// Whether the process has timers armed, whose signals may wake a thread.
    timers: bool,
    /// Cycles of waits, as indices into `waits`.
    cycles: Vec<Cycle>,
}

impl Blocked {
    /// Reads what `snap`'s blocked threads wait for. The program's DWARF is read only
    /// when some thread waits in `futex`.
    pub fn of(snap: &impl SnapshotSource) -> Blocked {
        let mut blocked = Blocked::unnamed(snap);
        blocked.name_words(snap);
        blocked
    }

    /// [`findings`](Self::findings) of `snap` alone: the futex words are named (the
    /// program's DWARF read) only where there are some.
    pub fn findings_of(snap: &impl SnapshotSource) -> Vec<(&'static str, String)> {
        let mut blocked = Blocked::unnamed(snap);
        if blocked.cycles.is_empty() && !blocked.everyone_waits() {
            return Vec::new();
        }
        blocked.name_words(snap);
        blocked.findings()
    }

    /// What `snap`'s blocked threads wait for, the futex words not named yet.
    fn unnamed(snap: &impl SnapshotSource) -> Blocked {
        let meta = snap.meta();
        let read = |addr, buf: &mut [u8]| snap.read(addr, buf).is_ok();
        let waits = waits::waits(&meta.threads, &read);
        let cycles = waits::cycles(&waits);
        let threads = meta.threads.iter().map(|t| t.tid).collect();
        let timers = meta.timers.itimers.iter().flatten().next().is_some() || !meta.timers.posix.is_empty();
        Blocked { waits, words: Vec::new(), threads, others: other_waits(meta), timers, cycles }
    }

    /// Names the futex words, from the program's DWARF and the files' symbols.
    fn name_words(&mut self, snap: &impl SnapshotSource) {
        if self.waits.is_empty() {
            return;
        }
        let program = Program::load(snap).ok();
        let mut symbols = Symbolizer::default();
        self.words =
            self.waits.iter().map(|w| word_name(snap, program.as_ref(), &mut symbols, w.word)).collect();
    }

    /// How many threads wait in `futex`, for I/O or for a child.
    pub fn waiting(&self) -> usize {
        self.waits.len() + self.others.len()
    }

    /// Whether every thread of the snapshot waits in `futex` with no time limit, and no
    /// timer of the process can send a signal: nothing in the program can wake them.
    fn everyone_waits(&self) -> bool {
        !self.threads.is_empty()
            && !self.timers
            && self.waits.len() == self.threads.len()
            && self.waits.iter().all(|w| !w.timed)
    }

    /// What the snapshot says of a hang, each as a kind and a sentence: the deadlocks
    /// (`deadlock`), or, where there are none and every thread waits in `futex` for ever,
    /// that (`hang`).
    pub fn findings(&self) -> Vec<(&'static str, String)> {
        let deadlocks = self.deadlocks();
        if deadlocks.is_empty() && self.everyone_waits() {
            return vec![("hang", EVERYONE_WAITS.to_owned())];
        }
        deadlocks.into_iter().map(|d| ("deadlock", d)).collect()
    }

    /// [`lines`](Self::lines), then each of the [`findings`](Self::findings) as
    /// `KIND: SENTENCE`: what `sdt show` and gdb's `sdt waits` list.
    pub fn report(&self) -> Vec<String> {
        let findings = self.findings().into_iter().map(|(kind, finding)| format!("{kind}: {finding}"));
        self.lines().into_iter().chain(findings).collect()
    }

    /// One line per waiting thread, in the snapshot's order: `TID  for mutex `m` (0x…),
    /// held by thread T`, `TID  in read on fd 0 (pipe:[1234])`.
    pub fn lines(&self) -> Vec<String> {
        let futex = (0..self.waits.len()).map(|i| (self.waits[i].tid, self.wait_text(i, false)));
        let mut lines: Vec<(i32, String)> = futex.chain(self.others.iter().cloned()).collect();
        let order: HashMap<i32, usize> = self.threads.iter().enumerate().map(|(i, &tid)| (tid, i)).collect();
        lines.sort_by_key(|(tid, _)| order.get(tid).copied());
        lines.into_iter().map(|(tid, text)| format!("{tid:>7}  {text}")).collect()
    }

    /// One sentence per deadlock: `threads A and B wait for each other: A for …; B for …`,
    /// and the threads blocked behind it.
    fn deadlocks(&self) -> Vec<String> {
        self.cycles
            .iter()
            .map(|cycle| {
                let behind: Vec<i32> = cycle.behind.iter().map(|&i| self.waits[i].tid).collect();
                let them = if cycle.members.len() == 1 { "it" } else { "them" };
                let text = self.cycle_text(&cycle.members);
                match behind.as_slice() {
                    [] => text,
                    [one] => format!("{text}; thread {one} waits behind {them}"),
                    more => format!("{text}; threads {} wait behind {them}", listed(more)),
                }
            })
            .collect()
    }

    /// What wait `i` is for; in a deadlock's words (the word in short, no holder), or
    /// in full.
    fn wait_text(&self, i: usize, in_cycle: bool) -> String {
        let w = &self.waits[i];
        let word = if in_cycle { &self.words[i].1 } else { &self.words[i].0 };
        match w.waited {
            Waited::Mutex { .. } if in_cycle => format!("for mutex {word}"),
            Waited::Mutex { owner } if owner == w.tid => format!("for mutex {word}, which it holds itself"),
            Waited::Mutex { owner } if self.threads.contains(&owner) => {
                format!("for mutex {word}, held by thread {owner}")
            }
            Waited::Mutex { owner } => format!(
                "for mutex {word}, held by thread {owner}, not a thread of the process (it ended \
                 holding it, or is another process's)"
            ),
            Waited::Join { thread } => format!("for thread {thread} to end (joining it)"),
            Waited::Futex => format!(
                "on futex word {word} (a condition variable, barrier, semaphore, or a lock that \
                 records no owner)"
            ),
        }
    }

    fn cycle_text(&self, cycle: &[usize]) -> String {
        if let [only] = cycle {
            let short = self.words[*only].1.as_str();
            return format!(
                "thread {} waits for mutex {short}, which it holds itself",
                self.waits[*only].tid
            );
        }
        let tids: Vec<i32> = cycle.iter().map(|&i| self.waits[i].tid).collect();
        let how = if cycle.len() == 2 { "for each other" } else { "in a cycle" };
        let steps: Vec<String> = cycle
            .iter()
            .map(|&i| {
                let w = &self.waits[i];
                match w.waited {
                    Waited::Mutex { owner } => {
                        format!("{} {}, held by {owner}", w.tid, self.wait_text(i, true))
                    }
                    _ => format!("{} {}", w.tid, self.wait_text(i, true)),
                }
            })
            .collect();
        format!("threads {} wait {how}: {}", listed(&tids), steps.join("; "))
    }
}

/// What [`Blocked::findings`] says when every thread waits in `futex` for ever.
const EVERYONE_WAITS: &str = "every thread waits in futex with no time limit: nothing in the program can \
                              wake them (a wake-up that was lost, or a deadlock on locks that record no holder)";

/// System calls whose first argument is the descriptor they block on, by the names
/// [`syscall_name`] gives (checked against the kernel's header).
const ON_A_DESCRIPTOR: [&str; 19] = [
    "read",
    "write",
    "ioctl",
    "pread64",
    "pwrite64",
    "readv",
    "writev",
    "connect",
    "accept",
    "sendto",
    "recvfrom",
    "sendmsg",
    "recvmsg",
    "flock",
    "fsync",
    "epoll_wait",
    "epoll_pwait",
    "accept4",
    "epoll_pwait2",
];

/// The threads of `meta` asleep in a system call on a descriptor (what the descriptor
/// is, as the snapshot's table says) or in `wait4` (for which child).
fn other_waits(meta: &SnapshotMeta) -> Vec<(i32, String)> {
    let mut found = Vec::new();
    for t in &meta.threads {
        let Activity::Waiting { nr } = Activity::of(t, false) else { continue };
        let (Ok(regs), Some(name)) = (t.regs(), syscall_name(nr)) else { continue };
        if ON_A_DESCRIPTOR.contains(&name) {
            let fd = regs.rdi as i32;
            let what = match meta.files.iter().find(|f| f.fd == fd) {
                Some(f) => format!(" ({})", f.target.escape_debug()),
                None => String::new(),
            };
            found.push((t.tid, format!("in {name} on fd {fd}{what}")));
        } else if name == "wait4" {
            let child = match regs.rdi as i32 {
                -1 => "any child".to_owned(),
                pid if pid > 0 => format!("child process {pid}"),
                0 => "a child in its process group".to_owned(),
                group => format!("a child in process group {}", -group),
            };
            found.push((t.tid, format!("in wait4 for {child}")));
        }
    }
    found
}

/// `a`, `a and b`, `a, b and c`.
fn listed(tids: &[i32]) -> String {
    match tids {
        [rest @ .., last] if !rest.is_empty() => {
            let rest: Vec<String> = rest.iter().map(i32::to_string).collect();
            format!("{} and {last}", rest.join(", "))
        }
        _ => tids.iter().map(i32::to_string).collect(),
    }
}

/// `name` without its last members that the implementation's names: `never._M_cond._M_cond`
/// (a `std::condition_variable`) is `never`. Elements are kept (`locks._M_elems[2]`).
fn user_part(name: &str) -> &str {
    let mut name = name;
    while let Some((before, last)) = name.rsplit_once('.') {
        if !last.starts_with('_') || last.contains('[') {
            break;
        }
        name = before;
    }
    name
}

/// A futex word by the global it lies in (`` `accounts[3].lock` (0x…) ``, in short
/// `` `accounts[3].lock` ``), from the program's DWARF; else by the symbol of a library's
/// variable (`` `_PyRuntime+0x1d0` (0x… in /usr/lib/libpython3.11.so.1.0) ``); else by
/// its address and the mapping it lies in (in short, its address).
fn word_name(
    snap: &impl SnapshotSource,
    program: Option<&Program>,
    symbols: &mut Symbolizer,
    addr: u64,
) -> (String, String) {
    let mapping = match snap.meta().mappings.iter().find(|m| m.contains(addr)) {
        Some(m) if !m.path.is_empty() => format!(" in {}", m.path.escape_debug()),
        Some(_) => " in anonymous memory".to_owned(),
        None => String::new(),
    };
    if let Some(name) = program.and_then(|p| p.name_at(snap, addr)) {
        let short = format!("`{}`", user_part(&name).escape_debug());
        return (format!("{short} ({addr:#x})"), short);
    }
    if let Some(symbol) = symbols.variable_at(snap, addr) {
        let short = format!("`{}`", symbol.escape_debug());
        return (format!("{short} ({addr:#x}{mapping})"), short);
    }
    (format!("{addr:#x}{mapping}"), format!("{addr:#x}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_lose_the_implementations_members_but_keep_elements() {
        assert_eq!(user_part("never._M_cond._M_cond"), "never");
        assert_eq!(user_part("accounts[2].m"), "accounts[2].m");
        assert_eq!(user_part("locks._M_elems[2]._M_mutex"), "locks._M_elems[2]");
        assert_eq!(user_part("_private"), "_private");
    }

    #[test]
    fn the_calls_on_a_descriptor_are_system_calls_sdt_names() {
        for name in ON_A_DESCRIPTOR {
            assert!(sdt_target::SYSCALLS.iter().any(|&(_, n)| n == name), "{name}");
        }
    }

    #[test]
    fn threads_are_listed_in_words() {
        assert_eq!(listed(&[7]), "7");
        assert_eq!(listed(&[7, 8]), "7 and 8");
        assert_eq!(listed(&[7, 8, 9]), "7, 8 and 9");
    }
}
