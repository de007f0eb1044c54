//! Files of numbers in a line: `/proc/PID/stat`, `/proc/PID/statm`, and the system's
//! `/proc/stat`.

use sdt_store::MemoryLayout;

/// A `/proc/PID/stat` (or `/proc/PID/task/TID/stat`) file split into its fields.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stat<'a> {
    /// Fields 3 on: those after the command.
    after_comm: Vec<&'a str>,
}

impl<'a> Stat<'a> {
    /// Splits a `stat` file into fields. Its second field, the command, is the thread's
    /// name in parentheses, which may itself hold spaces, parentheses and bytes that are
    /// not UTF-8: it ends at the file's last `)`. `None` without a `)`, or if what follows
    /// it is not UTF-8.
    pub fn parse(stat: &'a [u8]) -> Option<Stat<'a>> {
        let close = stat.iter().rposition(|&b| b == b')')?;
        let after = std::str::from_utf8(&stat[close + 1..]).ok()?;
        Some(Stat { after_comm: after.split_whitespace().collect() })
    }

    /// Field `n`, 1-based as proc_pid_stat(5) numbers them, from 3 (the state) on; `None`
    /// for fields 1 and 2 (the pid and the command) and past the last.
    pub fn field(&self, n: usize) -> Option<&'a str> {
        self.after_comm.get(n.checked_sub(3)?).copied()
    }

    /// The state (field 3): `R` running, `S` sleeping, `D` waiting on the disk, `Z`
    /// zombie, `T` stopped, `t` stopped by the tracer, …; `None` unless it is one
    /// character.
    pub fn state(&self) -> Option<char> {
        let mut chars = self.field(3)?.chars();
        let state = chars.next()?;
        chars.next().is_none().then_some(state)
    }

    /// The parent's pid, the process group and the session (fields 4–6).
    pub fn ids(&self) -> Option<(i32, i32, i32)> {
        let id = |n| self.field(n)?.parse().ok();
        Some((id(4)?, id(5)?, id(6)?))
    }

    /// Whether it is a kernel thread (`PF_KTHREAD` in its flags, field 9): no user memory
    /// and nothing a tracer may stop.
    pub fn is_kernel_thread(&self) -> Option<bool> {
        const PF_KTHREAD: u64 = 0x0020_0000;
        Some(self.field(9)?.parse::<u64>().ok()? & PF_KTHREAD != 0)
    }

    /// Whether it is in its exit (`PF_POSTCOREDUMP` or `PF_EXITING` in its flags, field
    /// 9), killed or ending, whatever its state says: a traced thread stops there once
    /// more for its tracer, `PTRACE_EVENT_EXIT`, its memory perhaps gone already.
    pub fn is_exiting(&self) -> Option<bool> {
        const PF_EXITING: u64 = 0x0000_0004;
        const PF_POSTCOREDUMP: u64 = 0x0000_0008;
        Some(self.field(9)?.parse::<u64>().ok()? & (PF_EXITING | PF_POSTCOREDUMP) != 0)
    }

    /// The caught and the ignored signals among 1–31 (fields 34 and 33: `stat` shows no
    /// real-time signal), bit `n-1` for signal `n`; `None` if either is missing or not a
    /// number.
    pub fn signal_sets(&self) -> Option<(u64, u64)> {
        let set = |n| self.field(n)?.parse().ok();
        Some((set(34)?, set(33)?))
    }

    /// The memory descriptor's fields (26–28 and 45–51), `brk` left 0: `stat` does not
    /// have it. `None` if the file stops short of field 51; a field that is not a number
    /// reads as 0.
    pub fn memory_layout(&self) -> Option<MemoryLayout> {
        let field = |n| Some(self.field(n)?.parse().unwrap_or(0));
        Some(MemoryLayout {
            start_code: field(26)?,
            end_code: field(27)?,
            start_stack: field(28)?,
            start_data: field(45)?,
            end_data: field(46)?,
            start_brk: field(47)?,
            brk: 0,
            arg_start: field(48)?,
            arg_end: field(49)?,
            env_start: field(50)?,
            env_end: field(51)?,
        })
    }
}

/// Pages of a process's memory resident now: the second number of its `statm`.
pub fn parse_statm_resident(statm: &[u8]) -> Option<u64> {
    std::str::from_utf8(statm).ok()?.split_whitespace().nth(1)?.parse().ok()
}

/// Idle and I/O-wait ticks (`USER_HZ`) of all CPUs together, from the `cpu` line that
/// starts the system's `/proc/stat`.
pub fn parse_cpu_idle_ticks(proc_stat: &[u8]) -> Option<u64> {
    let line = proc_stat.split(|&b| b == b'\n').next()?;
    let fields = std::str::from_utf8(line).ok()?.strip_prefix("cpu ")?;
    let mut ticks = fields.split_whitespace().map(|f| f.parse::<u64>().ok());
    let (idle, iowait) = (ticks.nth(3)??, ticks.next()??);
    idle.checked_add(iowait)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(stat: &[u8]) -> Option<(i32, i32, i32)> {
        Stat::parse(stat)?.ids()
    }

    #[test]
    fn parentheses_and_spaces_in_the_command() {
        assert_eq!(ids(b"83 (Thread.(<lambda>)) S 1 19 19 0 -1"), Some((1, 19, 19)));
        assert_eq!(ids(b"83 (a) b) R 7 8 9"), Some((7, 8, 9)));
        assert_eq!(ids(b"83 () (  ) S -1 0 0"), Some((-1, 0, 0)));
        assert_eq!(ids(b"83 (a\nb\xff) Z 7 8 9"), Some((7, 8, 9)));
        let stat = Stat::parse(b"83 (a) (b) t 7 8 9").unwrap();
        assert_eq!((stat.state(), stat.field(6), stat.field(7)), (Some('t'), Some("9"), None));
        assert_eq!((stat.field(0), stat.field(1), stat.field(2)), (None, None, None));
    }

    #[test]
    fn kernel_threads_by_their_flags() {
        let kthread = Stat::parse(b"2 (kthreadd) S 0 0 0 0 -1 2129984 0").unwrap();
        assert_eq!(kthread.is_kernel_thread(), Some(true));
        let user = Stat::parse(b"83 (cat) S 1 83 83 0 -1 4194304 100").unwrap();
        assert_eq!(user.is_kernel_thread(), Some(false));
        assert_eq!(Stat::parse(b"83 (cat) S 1 83 83 0").unwrap().is_kernel_thread(), None);
        // Killed, at its exit's stop for the tracer (PF_SIGNALED | PF_POSTCOREDUMP), and
        // past it (PF_EXITING).
        let at_exit_stop = Stat::parse(b"83 (cat) t 1 83 83 0 -1 4195336 100").unwrap();
        let exiting = Stat::parse(b"83 (cat) R 1 83 83 0 -1 4194308 100").unwrap();
        assert_eq!(
            (user.is_exiting(), at_exit_stop.is_exiting(), exiting.is_exiting()),
            (Some(false), Some(true), Some(true))
        );
    }

    #[test]
    fn what_does_not_parse() {
        assert_eq!(Stat::parse(b"83 (a"), None);
        assert_eq!(Stat::parse(b""), None);
        assert_eq!(Stat::parse(b"83 (a) S 1 \xff 3"), None);
        assert_eq!(ids(b"83 (a) S 1 2"), None);
        assert_eq!(ids(b"83 (a) S 1 x 3"), None);
        assert_eq!(ids(b"83 (a) S 1 2 99999999999"), None);
        assert_eq!(Stat::parse(b"83 (a)").unwrap().state(), None);
        assert_eq!(Stat::parse(b"83 (a) Zz 1").unwrap().state(), None);
    }

    #[test]
    fn memory_layout_fields() {
        // A real line: `cat` at rest (fields past 51 cut), its name changed to `c a)t`.
        let stat = b"4242 (c a)t) S 1 4242 4242 0 -1 4194304 100 0 0 0 0 0 0 0 20 0 1 0 \
                    5 2273280 200 18446744073709551615 94000000000000 94000000016000 \
                    140730000000000 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0 94000000030000 \
                    94000000031000 94000001000000 140730000001000 140730000001100 \
                    140730000001100 140730000002000 0";
        let layout = Stat::parse(stat).unwrap().memory_layout().unwrap();
        assert_eq!(layout.start_code, 94000000000000);
        assert_eq!(layout.end_code, 94000000016000);
        assert_eq!(layout.start_stack, 140730000000000);
        assert_eq!(layout.start_data, 94000000030000);
        assert_eq!(layout.end_data, 94000000031000);
        assert_eq!(layout.start_brk, 94000001000000);
        assert_eq!(layout.brk, 0);
        assert_eq!((layout.arg_start, layout.arg_end), (140730000001000, 140730000001100));
        assert_eq!((layout.env_start, layout.env_end), (140730000001100, 140730000002000));
        assert_eq!(Stat::parse(b"1 (x) S 1 2 3").unwrap().memory_layout(), None);
        // Numbers the kernel hides (or garbage) read as 0.
        let hidden = [&b"1 (x) S"[..], &b" x".repeat(49)].concat();
        assert_eq!(Stat::parse(&hidden).unwrap().memory_layout(), Some(MemoryLayout::default()));
    }

    #[test]
    fn statm_resident_pages() {
        assert_eq!(parse_statm_resident(b"2273 200 150 5 0 120 0\n"), Some(200));
        assert_eq!(parse_statm_resident(b"2273\n"), None);
        assert_eq!(parse_statm_resident(b"2273 -1\n"), None);
        assert_eq!(parse_statm_resident(b"\xff 1"), None);
    }

    #[test]
    fn cpu_idle_ticks() {
        let stat =
            b"cpu  2255 34 2290 22625563 6290 127 456 0 0 0\ncpu0 1132 34 1441 11311718 3675 127 438 0 0 0\n";
        assert_eq!(parse_cpu_idle_ticks(stat), Some(22625563 + 6290));
        assert_eq!(parse_cpu_idle_ticks(b"cpu0 1 2 3 4 5\n"), None);
        assert_eq!(parse_cpu_idle_ticks(b"cpu  1 2 3\n"), None);
        assert_eq!(parse_cpu_idle_ticks(b"cpu  1 2 3 18446744073709551615 1\n"), None);
        assert_eq!(parse_cpu_idle_ticks(b"intr 1\ncpu  1 2 3 4 5\n"), None);
        assert_eq!(parse_cpu_idle_ticks(b""), None);
    }
}
