//! The packets gdb sends and what the server answers: a stopped process whose state is
//! the current snapshot, with what gdb wrote over it (`edits`). Packets the server does
//! not know get the empty reply ("not supported"), as the protocol asks.

use std::io::{self, BufRead, Write};

use sdt_gdb::blocked::Blocked;
use sdt_store::{SnapshotSource, ThreadState};

use crate::edits::Edits;
use crate::packet::{Connection, Incoming, escape_binary, from_hex, hex_number, to_hex};
use crate::timeline::{Entry, Timeline};
use crate::view::View;

/// Largest packet we accept and send, in bytes (`PacketSize`, hex in `qSupported`).
const PACKET_SIZE: usize = 0x4000;
/// Largest memory read answered at once: two hex digits a byte, and room for framing.
const MAX_READ: usize = PACKET_SIZE / 2 - 16;
/// gdb's number of `rip` in the target description.
const PC_REGISTER: usize = 16;
/// Bytes under the stack pointer that x86_64 code may use without moving it.
const RED_ZONE: u64 = 128;

/// Serves `timeline` to gdb on `input`/`output` until gdb detaches, kills the target or
/// closes the connection.
pub fn serve<T: Timeline>(timeline: &mut T, input: impl BufRead, output: impl Write) -> io::Result<()> {
    let view = View::of(timeline.current());
    let mut server = Server {
        timeline,
        view,
        thread: None,
        edits: Edits::default(),
        conn: Connection::new(input, output),
    };
    server.run()
}

struct Server<'a, T, R, W> {
    timeline: &'a mut T,
    view: View,
    /// The thread `Hg` selected; `None`: the first.
    thread: Option<i32>,
    /// What gdb wrote over the current snapshot.
    edits: Edits,
    conn: Connection<R, W>,
}

/// What to do after a packet.
enum Next {
    Reply(Vec<u8>),
    /// The reply is sent already.
    Sent,
    /// Reply, then end the session.
    ReplyAndEnd(Vec<u8>),
    End,
}

impl<T: Timeline, R: BufRead, W: Write> Server<'_, T, R, W> {
    fn run(&mut self) -> io::Result<()> {
        while let Some(incoming) = self.conn.receive()? {
            // The target never runs: there is nothing to interrupt.
            let Incoming::Packet(packet) = incoming else { continue };
            log::debug!("gdb: {}", String::from_utf8_lossy(&packet));
            match self.answer(&packet)? {
                Next::Reply(reply) => self.conn.send(&reply)?,
                Next::Sent => {}
                Next::ReplyAndEnd(reply) => return self.conn.send(&reply),
                Next::End => return Ok(()),
            }
        }
        Ok(())
    }

    fn answer(&mut self, packet: &[u8]) -> io::Result<Next> {
        let reply = |text: &str| Ok(Next::Reply(text.as_bytes().to_vec()));
        let text = String::from_utf8_lossy(packet);
        match packet {
            b"?" => reply(&self.view.stop_reply),
            b"g" => reply(&to_hex(&self.reg_values())),
            b"qC" => reply(&format!("QC{:x}", self.thread().tid)),
            b"qAttached" => reply("1"),
            b"qfThreadInfo" => {
                let tids: Vec<String> =
                    self.snap().meta().threads.iter().map(|t| format!("{:x}", t.tid)).collect();
                reply(&format!("m{}", tids.join(",")))
            }
            b"qsThreadInfo" => reply("l"),
            b"QStartNoAckMode" => {
                self.conn.send(b"OK")?;
                self.conn.stop_acks();
                Ok(Next::Sent)
            }
            b"D" => Ok(Next::ReplyAndEnd(b"OK".to_vec())),
            b"k" => Ok(Next::End),
            _ if text.starts_with("vKill") => Ok(Next::ReplyAndEnd(b"OK".to_vec())),
            _ if text.starts_with("qSupported") => {
                let swbreak = if text.contains("swbreak+") { ";swbreak+" } else { "" };
                // Without the program's file (deleted before a capture, say), gdb asking for
                // it would stop short of the shared libraries' symbols too.
                let exec_file = if self.view.exec_file.is_empty() { "" } else { "qXfer:exec-file:read+;" };
                reply(&format!(
                    "PacketSize={PACKET_SIZE:x};QStartNoAckMode+;qXfer:features:read+;qXfer:threads:read+;\
                     qXfer:auxv:read+;qXfer:libraries-svr4:read+;{exec_file}qXfer:siginfo:read+{swbreak}"
                ))
            }
            _ if text.starts_with("qXfer:") => Ok(Next::Reply(self.transfer(&text))),
            _ if text.starts_with("qRcmd,") => {
                let command = from_hex(&packet[6..]).unwrap_or_default();
                let said = self.monitor(&String::from_utf8_lossy(&command));
                for chunk in said.as_bytes().chunks(MAX_READ) {
                    self.conn.send(format!("O{}", to_hex(chunk)).as_bytes())?;
                }
                reply("OK")
            }
            _ if text.starts_with("qSymbol") => reply("OK"),
            _ if text.starts_with("qGetTLSAddr:") => reply(&self.tls_address(&text["qGetTLSAddr:".len()..])),
            _ if text.starts_with("Hg") => reply(self.select(&packet[2..])),
            _ if text.starts_with('H') => reply("OK"),
            _ if text.starts_with('T') => {
                let alive = parse_tid(&packet[1..]).is_some_and(|tid| self.find_thread(tid).is_some());
                reply(if alive { "OK" } else { "E01" })
            }
            _ if text.starts_with('p') => {
                let range = hex_number(&packet[1..]).and_then(|n| self.view.regs.range(n as usize));
                match range {
                    Some(range) => reply(&to_hex(&self.reg_values()[range])),
                    None => reply("E00"),
                }
            }
            _ if text.starts_with('m') => reply(&self.read_memory(&text[1..])),
            _ if text.starts_with('M') => reply(self.write_memory(&text[1..])),
            _ if text.starts_with('P') => reply(self.write_register(&text[1..])),
            _ if text.starts_with('G') => {
                let values = from_hex(&packet[1..]).filter(|v| v.len() == self.view.regs.values_len());
                reply(values.map_or("E01", |values| {
                    let thread = self.thread();
                    let captured = self.view.regs.values(thread);
                    self.edits.set_regs(thread.tid, values, &captured);
                    "OK"
                }))
            }
            // Software breakpoints: the snapshot never runs into them, and gdb, told they
            // are set, does not write `int3` into memory (an edit) instead.
            _ if text.starts_with("Z0,") || text.starts_with("z0,") => reply("OK"),
            // Binary writes: gdb falls back to `M`.
            _ if text.starts_with('X') => reply(""),
            b"c" | b"s" => self.cannot_run(),
            _ if text.starts_with("vCont;") || text.starts_with(['c', 's', 'C', 'S']) => self.cannot_run(),
            _ => reply(""),
        }
    }

    fn snap(&self) -> &T::Snapshot {
        self.timeline.current()
    }

    fn find_thread(&self, tid: i32) -> Option<&ThreadState> {
        self.snap().meta().threads.iter().find(|t| t.tid == tid)
    }

    /// The thread `Hg` selected, or the first (the one that reached the breakpoint).
    fn thread(&self) -> &ThreadState {
        let threads = &self.snap().meta().threads;
        self.thread.and_then(|tid| self.find_thread(tid)).or(threads.first()).unwrap_or(&NO_THREAD)
    }

    /// `Hg<tid>`: `0` and `-1` mean any thread.
    fn select(&mut self, id: &[u8]) -> &'static str {
        match id {
            b"0" | b"-1" => {
                self.thread = None;
                "OK"
            }
            _ => match parse_tid(id).filter(|&tid| self.find_thread(tid).is_some()) {
                Some(tid) => {
                    self.thread = Some(tid);
                    "OK"
                }
                None => "E01",
            },
        }
    }

    /// Every register of the selected thread, as written or as in the snapshot.
    fn reg_values(&self) -> Vec<u8> {
        let thread = self.thread();
        self.edits.regs(thread.tid).map_or_else(|| self.view.regs.values(thread), <[u8]>::to_vec)
    }

    /// `P N=VALUE`: register `N` of the selected thread.
    fn write_register(&mut self, args: &str) -> &'static str {
        let Some((n, value)) = args.split_once('=') else { return "E01" };
        let range = hex_number(n.as_bytes()).and_then(|n| self.view.regs.range(n as usize));
        match (range, from_hex(value.as_bytes())) {
            (Some(range), Some(value)) if value.len() == range.len() => {
                let mut values = self.reg_values();
                values[range].copy_from_slice(&value);
                let thread = self.thread();
                let captured = self.view.regs.values(thread);
                self.edits.set_regs(thread.tid, values, &captured);
                "OK"
            }
            _ => "E01",
        }
    }

    /// `M ADDR,LENGTH:BYTES`: only where the snapshot can read.
    fn write_memory(&mut self, args: &str) -> &'static str {
        let parsed = args.split_once(':').and_then(|(at, bytes)| {
            let (addr, len) = at.split_once(',')?;
            let bytes = from_hex(bytes.as_bytes())?;
            (hex_number(len.as_bytes())? == bytes.len() as u64)
                .then_some((hex_number(addr.as_bytes())?, bytes))
        });
        match parsed {
            Some((addr, bytes)) if self.edits.write(self.timeline.current(), addr, &bytes) => "OK",
            Some(_) => "E14",
            None => "E01",
        }
    }

    /// `m ADDR,LENGTH`: the bytes, as many as can be read from `ADDR` on; an error if
    /// none can.
    fn read_memory(&self, args: &str) -> String {
        let Some((addr, len)) = args
            .split_once(',')
            .and_then(|(a, l)| Some((hex_number(a.as_bytes())?, hex_number(l.as_bytes())?)))
        else {
            return "E01".to_owned();
        };
        let mut buf = vec![0; (len as usize).min(MAX_READ)];
        if self.edits.read(self.snap(), addr, &mut buf) {
            return to_hex(&buf);
        }
        // Up to the first page that cannot be read.
        let mut done = 0;
        while done < buf.len() {
            let at = addr.wrapping_add(done as u64);
            let n = ((sdt_store::PAGE_SIZE - at % sdt_store::PAGE_SIZE) as usize).min(buf.len() - done);
            if !self.edits.read(self.snap(), at, &mut buf[done..done + n]) {
                break;
            }
            done += n;
        }
        if done == 0 { "E14".to_owned() } else { to_hex(&buf[..done]) }
    }

    /// `qGetTLSAddr:TID,OFFSET,LM`: the address of a thread-local variable of the main
    /// program (module 1 of glibc's x86_64 TLS): its block is the one the thread's dtv
    /// (`*(fs_base + 8)`) points to in entry 1 (16 bytes an entry). Libraries' variables
    /// would need their module ids from glibc's private `struct link_map`: an error.
    fn tls_address(&self, args: &str) -> String {
        let fields: Vec<Option<u64>> = args.split(',').map(|f| hex_number(f.as_bytes())).collect();
        let [Some(tid), Some(offset), Some(lm)] = fields[..] else { return "E01".to_owned() };
        let thread = i32::try_from(tid).ok().and_then(|tid| self.find_thread(tid));
        let (Some(thread), true) = (thread, self.view.main_lm == Some(lm)) else { return "E01".to_owned() };
        let word = |addr: u64| {
            let mut b = [0; 8];
            self.snap().read(addr, &mut b).ok().map(|()| u64::from_le_bytes(b))
        };
        let tp = thread.regs().map_or(0, |r| r.fs_base);
        match word(tp.wrapping_add(8)).and_then(|dtv| word(dtv.wrapping_add(16))) {
            Some(block) if block != 0 => format!("{:x}", block.wrapping_add(offset)),
            _ => "E01".to_owned(),
        }
    }

    /// `qXfer:OBJECT:read:ANNEX:OFFSET,LENGTH`: a piece of an object, `m` before more,
    /// `l` for the last.
    fn transfer(&self, text: &str) -> Vec<u8> {
        let mut parts = text.splitn(5, ':');
        let (_, object, op, annex, range) =
            (parts.next(), parts.next(), parts.next(), parts.next(), parts.next().unwrap_or(""));
        let Some((offset, len)) = range
            .split_once(',')
            .and_then(|(o, l)| Some((hex_number(o.as_bytes())?, hex_number(l.as_bytes())?)))
        else {
            return b"E00".to_vec();
        };
        if op != Some("read") {
            return Vec::new();
        }
        let siginfo;
        let data: &[u8] = match (object, annex) {
            (Some("features"), Some("target.xml")) => self.view.target_xml.as_bytes(),
            (Some("features"), _) => return b"E00".to_vec(),
            (Some("threads"), _) => self.view.threads_xml.as_bytes(),
            (Some("auxv"), _) => &self.snap().meta().auxv,
            // The `siginfo_t` a core of the snapshot holds: `$_siginfo` in gdb.
            (Some("siginfo"), _) => {
                siginfo = sdt_gdb::core::gen_siginfo(self.snap().meta());
                &siginfo
            }
            (Some("libraries-svr4"), _) => self.view.libraries_xml.as_bytes(),
            (Some("exec-file"), _) if !self.view.exec_file.is_empty() => self.view.exec_file.as_bytes(),
            (Some("exec-file"), _) => return b"E00".to_vec(),
            _ => return Vec::new(),
        };
        let start = (offset as usize).min(data.len());
        let end = start.saturating_add((len as usize).min(MAX_READ)).min(data.len());
        let mut reply = vec![if end == data.len() { b'l' } else { b'm' }];
        escape_binary(&data[start..end], &mut reply);
        reply
    }

    /// `monitor COMMAND`: what it prints.
    fn monitor(&mut self, command: &str) -> String {
        let mut words = command.split_whitespace();
        match (words.next(), words.next(), words.next()) {
            (Some("goto"), Some(name), None) => match self.timeline.goto(name) {
                Ok(()) => {
                    let dropped = self.drop_edits();
                    self.view = View::of(self.snap());
                    // gdb sends `Hg` only when it selects another thread than the one it
                    // last named: that one stays selected where the snapshot has it, or
                    // gdb would read another thread's registers for it.
                    self.thread = self.thread.filter(|&tid| self.find_thread(tid).is_some());
                    // From the snapshot itself: listing the run would read every
                    // snapshot's metadata at each move.
                    dropped + &entry_line(&Entry::of(self.snap().meta()), true)
                }
                Err(why) => error_line(why),
            },
            (Some("commit"), None, _) => self.commit(),
            (Some("list"), None, _) => self.entries().map_or_else(error_line, |entries| {
                let current = self.snap().meta().name.clone();
                entries.iter().map(|e| entry_line(e, e.name == current)).collect()
            }),
            (Some("waits"), None, _) => waits_text(self.snap()),
            (Some("waits"), Some("--findings"), None) => {
                let findings = Blocked::findings_of(self.snap());
                findings.into_iter().map(|(kind, finding)| format!("{kind}: {finding}\n")).collect()
            }
            _ => "sdt: the monitor commands are `goto SNAPSHOT`, `list`, `waits [--findings]` and `commit`\n"
                .to_owned(),
        }
    }

    /// Forgets what gdb wrote over the snapshot it leaves; says so if it wrote anything.
    fn drop_edits(&mut self) -> String {
        if std::mem::take(&mut self.edits).is_empty() {
            return String::new();
        }
        "sdt: the values set in the snapshot left are dropped (`sdt commit` keeps them)\n".to_owned()
    }

    /// `monitor commit`: stores the snapshot with what gdb wrote as a new snapshot, and
    /// moves there.
    fn commit(&mut self) -> String {
        if self.edits.is_empty() {
            return error_line("nothing was set in this snapshot: nothing to commit".to_owned());
        }
        let meta = self.edits.meta(self.snap(), &self.view.regs);
        let committed = match self.edits.pages(self.snap()) {
            Ok(pages) => self.timeline.commit(meta, &pages),
            Err(e) => Err(e.to_string()),
        };
        match committed {
            Ok(name) => {
                self.edits = Edits::default();
                self.view = View::of(self.snap());
                format!("sdt: committed as {name}\n")
            }
            Err(why) => error_line(why),
        }
    }

    fn entries(&self) -> Result<Vec<Entry>, String> {
        self.timeline.list()
    }

    /// A snapshot cannot run: say so, and report the same place as the end of the
    /// execution history (`replaylog`), which ends any command that resumes: a `next` or
    /// `finish` would otherwise resume again and again from the same stop. A resume with
    /// the pc moved is gdb calling a function (`print f()`): that gets a signal, on which
    /// gdb puts back what it set for the call (with `set unwindonsignal on`, as `sdt gdb`
    /// sets) instead of leaving the session inside the call.
    fn cannot_run(&mut self) -> io::Result<Next> {
        let tid = self.thread().tid;
        let (said, stop) = if self.pc_moved() {
            self.forget_call_frame();
            ("sdt: a snapshot does not run, nor call functions\n", format!("T05thread:{tid:x};"))
        } else {
            (
                "sdt: a snapshot does not run; move between snapshots with `sdt next`, `sdt prev` or `sdt goto`\n",
                format!("T05thread:{tid:x};replaylog:;"),
            )
        };
        self.conn.send(format!("O{}", to_hex(said.as_bytes())).as_bytes())?;
        Ok(Next::Reply(stop.into_bytes()))
    }

    /// Forgets what gdb wrote below the selected thread's stack for a call (its return
    /// address, an `int3` there): gdb puts the registers back, not that memory. The red
    /// zone under the stack pointer, which the thread's code may use, stays.
    fn forget_call_frame(&mut self) {
        let sp = self.thread().sp();
        let meta = self.timeline.current().meta();
        let Some(stack) = meta.mappings.iter().find(|m| m.contains(sp)) else { return };
        let below = stack.start..sp.saturating_sub(RED_ZONE).max(stack.start);
        self.edits.forget(self.timeline.current(), below);
    }

    /// Whether gdb set the selected thread's pc elsewhere than the snapshot has it.
    fn pc_moved(&self) -> bool {
        let thread = self.thread();
        match (self.edits.regs(thread.tid), self.view.regs.range(PC_REGISTER)) {
            (Some(edited), Some(pc)) => edited.get(pc.clone()) != self.view.regs.values(thread).get(pc),
            _ => false,
        }
    }
}

/// The thread of a snapshot without threads (a damaged one): registers all zero.
static NO_THREAD: ThreadState = ThreadState {
    tid: 0,
    name: String::new(),
    state: sdt_store::ThreadRunState::Running,
    gpregs: Vec::new(),
    fpregs: Vec::new(),
    xstate: Vec::new(),
    sigmask: 0,
    rseq: None,
    robust_list: None,
    altstack: None,
};

/// A thread id as gdb writes it without multiprocess extensions: hex.
fn parse_tid(id: &[u8]) -> Option<i32> {
    hex_number(id).and_then(|t| i32::try_from(t).ok())
}

/// `monitor list`'s line for `e`: `*` marks the current snapshot, then the name, the
/// thread, and what took it (attributes quoted and escaped).
fn entry_line(e: &Entry, current: bool) -> String {
    let mark = if current { '*' } else { ' ' };
    format!("{mark} {} thread {} {}\n", e.name, e.tid, e.trigger_text())
}

/// `monitor waits`: what each blocked thread of `snap` waits for, and the
/// deadlocks among them, as `sdt show` lists them.
fn waits_text(snap: &impl SnapshotSource) -> String {
    let blocked = Blocked::of(snap);
    if blocked.waiting() == 0 {
        return "no thread waits for a lock, a thread, a descriptor or a child\n".to_owned();
    }
    blocked.report().into_iter().map(|line| line + "\n").collect()
}

fn error_line(why: String) -> String {
    format!("sdt: error: {}\n", why.escape_debug())
}
