//! From a snapshot to what CRIU restores: threads with their registers as CRIU's own dump
//! presents them, mappings as vmas, descriptors and files by id, the pages to write, and
//! the memory to patch so that the restored program runs on untraced. Refuses, naming
//! the object, what the images cannot express.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use sdt_abi::STATE_OFF;
use sdt_store::{
    Access, Content, Credentials, FileKind, FileState, Mapping, OpenFile, PAGE_SIZE, PosixTimer, Reopen,
    SeccompMode, SnapshotMeta, SnapshotSource, ThreadRunState, ThreadState, Trigger, UserFpregs, UserRegs,
};
use sdt_target::{ERESTART_RESTARTBLOCK, ERESTARTNOHAND, ERESTARTNOINTR, ERESTARTSYS, Patch};

use crate::images::PAGES_ID;
use crate::{Error, pb};

/// `EINTR`: what a sleep interrupted by the dump returns.
const EINTR: i64 = 4;
/// Length of the `syscall` instruction, which a restarted call runs again.
const SYSCALL_INSN_LEN: u64 = 2;

/// `O_CLOEXEC` as fdinfo shows it among a descriptor's flags.
const O_CLOEXEC: u32 = 0o2000000;
const O_RDWR: u32 = 0o2;
/// Flags that only `open(2)` itself acts on, which no open file keeps (fdinfo never shows
/// them): `O_CREAT`, `O_EXCL`, `O_NOCTTY`, `O_TRUNC`, `__O_TMPFILE`. Never written for
/// `criu restore` to open a file with.
const OPEN_ONLY: u32 = 0o100 | 0o200 | 0o400 | 0o1000 | 0o20000000;
/// `FD_CLOEXEC`: the descriptor flag CRIU keeps in `fdinfo_entry.flags`.
const FD_CLOEXEC: u32 = 1;

/// `mmap(2)` protection and flag bits, and CRIU's vma status bits (`criu/include/image.h`).
pub(crate) mod vm {
    pub const PROT_READ: u32 = 0x1;
    pub const PROT_WRITE: u32 = 0x2;
    pub const PROT_EXEC: u32 = 0x4;
    pub const MAP_SHARED: u32 = 0x1;
    pub const MAP_PRIVATE: u32 = 0x2;
    pub const MAP_ANONYMOUS: u32 = 0x20;
    pub const MAP_GROWSDOWN: u32 = 0x100;
    pub const MAP_NORESERVE: u32 = 0x4000;
    pub const VMA_AREA_REGULAR: u32 = 1 << 0;
    pub const VMA_AREA_VDSO: u32 = 1 << 3;
    pub const VMA_AREA_HEAP: u32 = 1 << 5;
    pub const VMA_FILE_PRIVATE: u32 = 1 << 6;
    pub const VMA_FILE_SHARED: u32 = 1 << 7;
    pub const VMA_ANON_SHARED: u32 = 1 << 8;
    pub const VMA_ANON_PRIVATE: u32 = 1 << 9;
    pub const VMA_AREA_VVAR: u32 = 1 << 12;
    pub const VMA_AREA_MEMFD: u32 = 1 << 14;
}

/// Anonymous private mappings larger than this may be reservations (a sanitizer's
/// shadow memory, or a part of it) larger than the machine's memory, which the kernel
/// maps only without reserving swap: `criu restore` maps them with `MAP_NORESERVE`, as
/// they most likely were (the maps file does not say). Where swap is not overcommitted
/// heuristically, the flag changes nothing.
const RESERVATION_BYTES: u64 = 1 << 30;

/// Character devices of the memory major (1) that a process may hold open; CRIU's own dump
/// treats them as regular files, reopened by path.
const MEM_DEVICES: [&str; 8] = [
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/kmsg",
    "/dev/mem",
    "/dev/port",
];

/// A thread as CRIU will restore it.
pub(crate) struct Thread<'a> {
    pub state: &'a ThreadState,
    /// `user_regs_struct`, with an interrupted system call set up the way CRIU's dump
    /// leaves it.
    pub regs: UserRegs,
    /// The FXSAVE area.
    pub fpregs: UserFpregs,
    /// glibc's `tid` word of the thread, if found: the clear-child-tid address.
    pub clear_tid: Option<u64>,
    /// The credentials it is restored with: those recorded, which the store's owners have.
    pub creds: Credentials,
}

/// Pages to write, `[start, start + pages * 4096)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PageRun {
    pub start: u64,
    pub pages: u64,
}

/// One object of shared memory the images make again (`VMA_ANON_SHARED`): its id (the
/// vmas' `shmid`), the pages image holding its pages (`pagemap-shmem-<id>.img` says
/// where each goes), and which object it is (device and inode, as maps gives them).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Shmem<'a> {
    pub id: u64,
    pub pages_id: u32,
    dev: String,
    inode: u64,
    /// Its stored pages, by offset.
    pub runs: Vec<ShmemRun>,
    /// Or, for a memfd the program held open, the parts of it that hold data (by offset),
    /// as the capture kept them with its descriptor.
    pub parts: Vec<(u64, &'a [u8])>,
}

impl Shmem<'_> {
    /// Its pages as the pagemap lists them: (offset, pages), ascending.
    pub fn pieces(&self) -> Vec<(u64, u64)> {
        let runs = self.runs.iter().map(|r| (r.offset, r.run.pages));
        let parts = self.parts.iter().map(|(offset, data)| {
            let first = offset - offset % PAGE_SIZE;
            (first, (offset + data.len() as u64).div_ceil(PAGE_SIZE) - first / PAGE_SIZE)
        });
        runs.chain(parts).collect()
    }
}

/// Pages of a shared memory object: at `offset` in it, read from the view at `run`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ShmemRun {
    pub offset: u64,
    pub run: PageRun,
}

/// Everything the images say, worked out from a snapshot.
pub(crate) struct Plan<'a> {
    pub meta: &'a SnapshotMeta,
    pub pid: u32,
    /// The leader first, then the other threads by id.
    pub threads: Vec<Thread<'a>>,
    pub files: Vec<pb::FileEntry>,
    pub fds: Vec<pb::FdinfoEntry>,
    pub vmas: Vec<pb::VmaEntry>,
    pub exe_file_id: u32,
    pub cwd_id: u32,
    pub root_id: u32,
    /// Read-only file entries opened by path (mappings, executable, directories), by path.
    path_files: HashMap<String, u32>,
    pub runs: Vec<PageRun>,
    pub patches: Vec<Patch>,
    /// The shared memory the images make again, each with its pages.
    pub shmems: Vec<Shmem<'a>>,
    /// The memfds the program held open (`memfd.img`), each with its path and inode.
    pub memfds: Vec<(pb::MemfdInodeEntry, (String, u64))>,
    /// What the user should know about the images, one line each.
    pub notes: Vec<String>,
}

impl<'a> Plan<'a> {
    /// Works out the images of `source`. `state_word` is the address of the SDT library's
    /// state word if the caller found it (by symbol); a breakpoint's own record names it too.
    pub(crate) fn new(source: &'a impl SnapshotSource, state_word: Option<u64>) -> Result<Plan<'a>, Error> {
        let meta = source.meta();
        if !meta.layout.is_known() {
            return Err(Error::NoLayout { snapshot: meta.name.clone() });
        }
        let pid = meta.process.pid;
        let leader_runs = meta.threads.iter().any(|t| t.tid == pid && t.state == ThreadRunState::Running);
        if !leader_runs || pid <= 0 {
            return Err(Error::NoLeader { pid });
        }
        check_mapped_files(source)?;

        let mut plan = Plan {
            meta,
            pid: pid as u32,
            threads: Vec::new(),
            files: Vec::new(),
            fds: Vec::new(),
            vmas: Vec::new(),
            exe_file_id: 0,
            cwd_id: 0,
            root_id: 0,
            path_files: HashMap::new(),
            runs: Vec::new(),
            patches: Vec::new(),
            shmems: Vec::new(),
            memfds: Vec::new(),
            notes: Vec::new(),
        };
        plan.plan_threads(source)?;
        plan.plan_handover(source, state_word);
        plan.plan_vmas(source)?;
        plan.plan_fds(source)?;
        let exe = &meta.process.exe;
        if !exe.starts_with('/') || exe.ends_with(" (deleted)") {
            return Err(Error::Unsupported {
                object: format!("the executable {exe:?}"),
                why: "CRIU needs the executable's path, and this one was not recorded or is deleted",
            });
        }
        // A program changed since: the copy the run kept, which the store checked.
        plan.exe_file_id = match kept_path(source, exe) {
            Some(kept) => plan.file_by_path(&kept, None),
            None => {
                let exe_reopen = Reopen {
                    path: exe,
                    kind: FileKind::Regular,
                    identity: mapped_identity(meta, exe),
                    access: Access::READ,
                };
                check_reopen(source, &exe_reopen, || format!("the executable ({exe})"))?;
                plan.file_by_path(exe, None)
            }
        };
        let cwd = &meta.process.cwd;
        if cwd.starts_with('/') {
            // Entered, not read: every lookup from it is checked again.
            let cwd_reopen =
                Reopen { path: cwd, kind: FileKind::Directory, identity: None, access: Access::default() };
            check_reopen(source, &cwd_reopen, || format!("the working directory ({cwd})"))?;
            plan.cwd_id = plan.file_by_path(cwd, None);
        } else {
            plan.notes
                .push(format!("the working directory {cwd:?} is unknown: the restored process starts in /"));
            plan.cwd_id = plan.file_by_path("/", None);
        }
        plan.root_id = plan.file_by_path("/", None);
        plan.plan_pages(source);
        plan.plan_shmem_pages(source);
        if meta.process.sid != pid {
            plan.notes.push(format!(
                "the process is not a session leader (session {}): restore with `criu restore --shell-job`",
                meta.process.sid
            ));
        }
        Ok(plan)
    }

    /// Whether `criu restore` needs `--shell-job`.
    pub(crate) fn shell_job(&self) -> bool {
        self.meta.process.sid != self.meta.process.pid
    }

    fn plan_threads(&mut self, source: &impl SnapshotSource) -> Result<(), Error> {
        if self.meta.unread_handlers != 0 {
            return Err(Error::Unsupported {
                object: format!("the handlers of {}", self.meta.unread_handler_names()),
                why: "sdt could not read them (the program ran under seccomp): CRIU would restore \
                      the program without them",
            });
        }
        if !self.meta.timers.posix.is_empty() {
            let timers: Vec<String> = self.meta.timers.posix.iter().map(PosixTimer::describe).collect();
            self.notes.push(format!(
                "POSIX timers left out ({}): the images hold the interval timers only",
                timers.join("; ")
            ));
        }
        let read = |addr: u64, buf: &mut [u8]| source.read(addr, buf).is_ok();
        let tid_offset = sdt_target::tid_word_offset(self.meta, &read);
        let mut threads = Vec::new();
        for t in &self.meta.threads {
            let (mut regs, fpregs) = (t.regs()?, t.fp_regs()?);
            let fs_base = Some(regs.fs_base).filter(|&b| b != 0);
            let clear_tid = fs_base.zip(tid_offset).and_then(|(base, off)| base.checked_add(off));
            if t.state == ThreadRunState::Exiting {
                // Past its last user instruction: CRIU cannot restore it, so it goes (its
                // tid word is cleared by the handover's patches).
                self.notes.push(match clear_tid {
                    Some(_) => format!("thread {} was exiting: left out", t.tid),
                    None => format!(
                        "thread {} was exiting: left out, but its tid word was not found, so a \
                         pthread_join() on it waits forever",
                        t.tid
                    ),
                });
                continue;
            }
            restart_syscall(&mut regs);
            let creds = source.credentials_of(t.tid)?;
            if creds.seccomp != SeccompMode::Disabled {
                return Err(Error::Unsupported {
                    object: format!("thread {}", t.tid),
                    why: "it ran under seccomp, which the snapshot does not hold: `criu restore` would \
                          run it unconfined",
                });
            }
            if clear_tid.is_none() {
                self.notes.push(format!(
                    "thread {}: no glibc thread block at fs_base {:#x}; restored without a \
                     clear-child-tid address",
                    t.tid,
                    fs_base.unwrap_or(0)
                ));
            }
            threads.push(Thread { state: t, regs, fpregs, clear_tid, creds });
        }
        threads.sort_by_key(|t| (t.state.tid != self.meta.process.pid, t.state.tid));
        self.threads = threads;
        Ok(())
    }

    /// Patches the memory so that the restored program, which no tracer watches, runs on
    /// as the original did (see [`sdt_target`]): the breakpoint that took the snapshot
    /// returns the snapshot's number, exiting threads' id words are cleared, and later
    /// breakpoints cost nothing instead of stopping it with `SIGTRAP`.
    fn plan_handover(&mut self, source: &impl SnapshotSource, state_word: Option<u64>) {
        let read = |addr: u64, buf: &mut [u8]| source.read(addr, buf).is_ok();
        self.patches.extend(sdt_target::patches(self.meta, &read));
        let record = sdt_target::trap_record(self.meta, &read);
        if let (Trigger::Breakpoint { tid, .. }, None) = (&self.meta.trigger, &record) {
            self.notes.push(format!(
                "thread {tid}: the breakpoint's record is unreadable; its SetBreakpoint() returns {} in the \
                 restored process",
                sdt_abi::RESULT_DECLINED
            ));
        }
        match record.map(|(_, r)| r.state_ptr).or(state_word) {
            Some(addr) if writable_private(&self.meta.mappings, addr, 4) => {
                self.patches.push(Patch { addr, bytes: STATE_OFF.to_le_bytes().to_vec() });
                self.notes.push("SDT breakpoints are off in the restored process (it runs untraced)".into());
            }
            _ => self.notes.push(
                "the SDT library's state word was not found (a program without libsdt, or one \
                 stripped of its symbols): if it has breakpoints, one that passes the capture \
                 config will stop the restored process with SIGTRAP"
                    .into(),
            ),
        }
    }

    fn plan_vmas(&mut self, source: &impl SnapshotSource) -> Result<(), Error> {
        use vm::*;
        let meta = self.meta;
        for m in &meta.mappings {
            if m.path == "[vsyscall]" {
                continue; // fixed by the kernel, never mapped by a restore
            }
            let mut prot = 0;
            for (on, bit) in
                [(m.perms.read, PROT_READ), (m.perms.write, PROT_WRITE), (m.perms.exec, PROT_EXEC)]
            {
                if on {
                    prot |= bit;
                }
            }
            let special = m.inode == 0 && m.path.starts_with('[');
            let known_special = ["[heap]", "[stack]", "[vdso]", "[vvar]", "[vvar_vclock]"]
                .contains(&m.path.as_str())
                || m.path.starts_with("[anon");
            if special && !known_special {
                return Err(unsupported_mapping(
                    m,
                    "a kernel-provided mapping CRIU images here cannot express",
                ));
            }
            // Opened by criu as root, as the vma says: for writing too if shared and writable.
            let access = Access { read: true, write: m.perms.shared && m.perms.write };
            let checked = |path: &str, identity| {
                let reopen = Reopen { path, kind: FileKind::Regular, identity, access };
                check_reopen(source, &reopen, || mapping_name(m))
            };
            let fdflags = if m.perms.write { O_RDWR } else { 0 };
            if let Some(file) = self.memfd_view(m, fdflags)? {
                self.vmas.push(pb::VmaEntry {
                    start: m.start,
                    end: m.end,
                    pgoff: m.offset,
                    shmid: u64::from(file),
                    prot,
                    flags: MAP_SHARED,
                    status: VMA_AREA_REGULAR | VMA_FILE_SHARED | VMA_AREA_MEMFD,
                    fd: -1,
                    madv: None,
                    fdflags: Some(fdflags),
                });
                continue;
            }
            if let Some(shmid) = self.shmem_of(source, m) {
                self.vmas.push(pb::VmaEntry {
                    start: m.start,
                    end: m.end,
                    pgoff: m.offset,
                    shmid,
                    prot,
                    flags: MAP_SHARED | MAP_ANONYMOUS,
                    status: VMA_AREA_REGULAR | VMA_ANON_SHARED,
                    fd: -1,
                    madv: None,
                    fdflags: None,
                });
                continue;
            }
            let file = match (&m.content, m.inode) {
                (_, 0) => None,
                (Content::File(f), _) => {
                    // Read by the store's check already; written through a shared mapping.
                    // A private one of a file changed since maps the copy the run kept; a
                    // shared one must be of the file itself.
                    let path = kept_path(source, &f.path);
                    if m.perms.shared && path.is_some() {
                        return Err(unsupported_mapping(m, "a shared mapping of a file changed since"));
                    }
                    if access.write {
                        checked(&f.path, Some((f.dev, f.inode)))?;
                    }
                    Some(self.file_by_path(path.as_deref().unwrap_or(&f.path), Some(f.size)))
                }
                // A file mapping without contents (PROT_NONE): by path, if it has one.
                (Content::Unreadable, _) if m.path.starts_with('/') && !m.path.ends_with(" (deleted)") => {
                    match kept_path(source, &m.path) {
                        Some(kept) if !m.perms.shared => Some(self.file_by_path(&kept, None)),
                        _ => {
                            checked(&m.path, mapped_identity(meta, &m.path))?;
                            Some(self.file_by_path(&m.path, None))
                        }
                    }
                }
                // A file the capture could not name or check (deleted, a device): every
                // page of the private mapping that held data is in the snapshot (the rest
                // read as zero), so it is restored as anonymous memory holding them.
                _ if !m.perms.shared => None,
                _ => return Err(unsupported_mapping(m, "shared memory that is not a regular file")),
            };
            let (flags, status, shmid, pgoff, fdflags) = match file {
                Some(id) if m.perms.shared => {
                    let fdflags = if m.perms.write { O_RDWR } else { 0 };
                    (MAP_SHARED, VMA_AREA_REGULAR | VMA_FILE_SHARED, id, m.offset, Some(fdflags))
                }
                Some(id) => (MAP_PRIVATE, VMA_AREA_REGULAR | VMA_FILE_PRIVATE, id, m.offset, Some(0)),
                None if m.perms.shared => {
                    return Err(unsupported_mapping(m, "shared anonymous memory"));
                }
                None => {
                    let mut status = VMA_AREA_REGULAR | VMA_ANON_PRIVATE;
                    let mut flags = MAP_PRIVATE | MAP_ANONYMOUS;
                    match m.path.as_str() {
                        "[heap]" => status |= VMA_AREA_HEAP,
                        "[stack]" => flags |= MAP_GROWSDOWN,
                        "[vdso]" => status |= VMA_AREA_VDSO,
                        // (Linux 6.12 split the clock pages into their own mapping.)
                        "[vvar]" | "[vvar_vclock]" => status |= VMA_AREA_VVAR,
                        // A sanitizer's terabytes of shadow memory: mapped without
                        // reserving swap, which the maps file does not say.
                        _ if m.end - m.start > RESERVATION_BYTES => flags |= MAP_NORESERVE,
                        _ => {}
                    }
                    (flags, status, 0, 0, None)
                }
            };
            self.vmas.push(pb::VmaEntry {
                start: m.start,
                end: m.end,
                pgoff,
                shmid: u64::from(shmid),
                prot,
                flags,
                status,
                fd: -1,
                madv: None,
                fdflags,
            });
        }
        Ok(())
    }

    /// The id of the shared memory `m` is a view of, where the images make it again as
    /// shared anonymous memory (`VMA_ANON_SHARED`): `MAP_SHARED | MAP_ANONYMOUS` memory,
    /// a memfd or a deleted file (every page of theirs that holds data is in the
    /// snapshot), and a file gone since that only shared writable mappings mapped (the
    /// pages the program had of it are). Views of one object, by device and inode, share
    /// the id. Not System V segments, nor anything else.
    fn shmem_of(&mut self, source: &impl SnapshotSource, m: &Mapping) -> Option<u64> {
        let made_again = match &m.content {
            Content::File(f) => source.shared_file_gone(f),
            Content::Zero => m.path.ends_with(" (deleted)") && !m.path.starts_with("/SYSV"),
            Content::Unreadable => false,
        };
        if !m.perms.shared || m.inode == 0 || !made_again {
            return None;
        }
        let object = (m.dev.as_str(), m.inode);
        let known = self.shmems.iter().position(|s| (s.dev.as_str(), s.inode) == object);
        let id = match known {
            Some(index) => self.shmems[index].id,
            None => self.new_shmem(m.dev.clone(), m.inode, Vec::new()),
        };
        Some(id)
    }

    /// A new shared memory object of the images, for the object (`dev`, `inode`), its
    /// contents `parts` where they come from a kept file; its id. Its pages image follows
    /// `pages-1.img`.
    fn new_shmem(&mut self, dev: String, inode: u64, parts: Vec<(u64, &'a [u8])>) -> u64 {
        let id = self.shmems.len() as u64 + 1;
        let pages_id = PAGES_ID + 1 + self.shmems.len() as u32;
        self.shmems.push(Shmem { id, pages_id, dev, inode, runs: Vec::new(), parts });
        id
    }

    /// The descriptor of the memfd that the shared mapping `m` is a view of, if the
    /// program held one: then the view maps the memfd (`VMA_AREA_MEMFD`), through a file
    /// entry of its own (its `shmid`) opened with `flags`, so that writes through either
    /// show in the other.
    fn memfd_view(&mut self, m: &Mapping, flags: u32) -> Result<Option<u32>, Error> {
        if !m.perms.shared || !m.path.starts_with("/memfd:") || m.content != Content::Zero {
            return Ok(None);
        }
        let meta = self.meta;
        let held = meta
            .files
            .iter()
            .find(|f| f.target == m.path && f.file.as_ref().is_some_and(|r| r.inode == m.inode));
        let Some(held) = held else { return Ok(None) };
        let inode_id = self.memfd_inode(held)?;
        Ok(Some(self.memfd_file(inode_id, flags, 0)))
    }

    /// The `memfd.img` id of the memfd descriptor `f` opens, made on first use: its name,
    /// size and owner, and its contents as a shared memory object of their own, from what
    /// the capture kept of the file.
    fn memfd_inode(&mut self, f: &'a OpenFile) -> Result<u32, Error> {
        let file = f.file.as_ref().expect("a memfd descriptor names its file");
        let key = (f.target.clone(), file.inode);
        if let Some(i) = self.memfds.iter().position(|(_, k)| *k == key) {
            return Ok(i as u32 + 1);
        }
        let Some((size, parts)) = f.state.as_ref().and_then(FileState::deleted_file_parts) else {
            return Err(Error::Unsupported {
                object: format!("fd {} ({})", f.fd, f.target),
                why: "a memfd whose bytes the snapshot did not keep",
            });
        };
        let name = f.target.trim_start_matches("/memfd:").trim_end_matches(" (deleted)");
        let parts = parts.into_iter().filter(|(_, data)| !data.is_empty()).collect();
        let id = self.new_shmem(String::new(), file.inode, parts);
        let owner = &self.threads.first().expect("the leader is planned first").creds;
        let inode_id = self.memfds.len() as u64 + 1;
        let entry = pb::MemfdInodeEntry {
            name: name.to_owned(),
            uid: owner.uids.fs,
            gid: owner.gids.fs,
            size,
            shmid: u32::try_from(id).expect("fewer than 2^32 shared memory objects"),
            seals: 0,
            inode_id,
        };
        self.memfds.push((entry, key));
        Ok(inode_id as u32)
    }

    /// A memfd file entry of memfd `inode_id`, opened with `flags` at `pos`.
    fn memfd_file(&mut self, inode_id: u32, flags: u32, pos: u64) -> u32 {
        let id = self.files.len() as u32 + 1;
        self.files.push(pb::FileEntry {
            r#type: pb::FdTypes::Memfd as i32,
            id,
            reg: None,
            pipe: None,
            memfd: Some(pb::MemfdFileEntry { id, flags, pos, fown: no_owner(), inode_id }),
        });
        id
    }

    /// The stored pages of each shared memory object, by offset in it: one view's where
    /// several show the same page.
    fn plan_shmem_pages(&mut self, source: &impl SnapshotSource) {
        let stored = source.stored_ranges();
        for shmem in &mut self.shmems {
            // Offset in the object → address of a view holding it.
            let mut pages: BTreeMap<u64, u64> = BTreeMap::new();
            for vma in self.vmas.iter().filter(|v| v.status & vm::VMA_ANON_SHARED != 0 && v.shmid == shmem.id)
            {
                let from = stored.partition_point(|r| r.end <= vma.start);
                for r in stored[from..].iter().take_while(|r| r.start < vma.end) {
                    for addr in (r.start.max(vma.start)..r.end.min(vma.end)).step_by(PAGE_SIZE as usize) {
                        pages.entry(vma.pgoff + (addr - vma.start)).or_insert(addr);
                    }
                }
            }
            for (offset, addr) in pages {
                match shmem.runs.last_mut() {
                    Some(run)
                        if run.offset + run.run.pages * PAGE_SIZE == offset
                            && run.run.start + run.run.pages * PAGE_SIZE == addr =>
                    {
                        run.run.pages += 1
                    }
                    _ => shmem.runs.push(ShmemRun { offset, run: PageRun { start: addr, pages: 1 } }),
                }
            }
        }
    }

    fn plan_fds(&mut self, source: &impl SnapshotSource) -> Result<(), Error> {
        // Descriptors that name the same file with the same flags and position are taken
        // for dup(2)s of one open file (a shell's `>out 2>&1`): they share one file entry,
        // so that they share the position after the restore too.
        let mut shared: HashMap<(&str, u32, u64), u32> = HashMap::new();
        let meta = self.meta;
        for f in &meta.files {
            if f.kind == FileKind::CharDevice && f.target == sdt_abi::kmod::DEVICE {
                self.notes.push(format!(
                    "fd {} is SDT's kernel module ({}), which the restored program, its breakpoints off, \
                     does not use: left closed",
                    f.fd, f.target
                ));
                continue;
            }
            let fd_flags = if f.flags & O_CLOEXEC != 0 { FD_CLOEXEC } else { 0 };
            let flags = f.flags & !(O_CLOEXEC | OPEN_ONLY);
            let key = (f.target.as_str(), flags, f.pos);
            let (kind, id) = match shared.get(&key) {
                Some(&id) => (self.files[id as usize - 1].r#type, id),
                None => {
                    let (kind, id) = self.open_file(source, f, flags)?;
                    shared.insert(key, id);
                    (kind, id)
                }
            };
            self.fds.push(pb::FdinfoEntry { id, flags: fd_flags, r#type: kind, fd: f.fd as u32 });
        }
        Ok(())
    }

    /// A file entry for descriptor `f`, reopened with `flags`; a file opened by path is
    /// checked first.
    fn open_file(
        &mut self,
        source: &impl SnapshotSource,
        f: &'a OpenFile,
        flags: u32,
    ) -> Result<(i32, u32), Error> {
        let object = || format!("fd {} ({})", f.fd, f.target);
        let unsupported = |why| Err(Error::Unsupported { object: object(), why });
        let checked = |kind| {
            let identity = f.file.as_ref().map(|r| (r.dev, r.inode));
            let reopen = Reopen { path: &f.target, kind, identity, access: Access::of_flags(flags) };
            check_reopen(source, &reopen, object)
        };
        if f.target.starts_with("/memfd:") && f.target.ends_with(" (deleted)") && f.file.is_some() {
            let inode_id = self.memfd_inode(f)?;
            return Ok((pb::FdTypes::Memfd as i32, self.memfd_file(inode_id, flags, f.pos)));
        }
        if f.target.ends_with(" (deleted)") {
            return unsupported("a deleted file other than a memfd, which CRIU images here cannot express");
        }
        let id = self.files.len() as u32 + 1;
        let reg = |name: &str, size: Option<u64>| pb::FileEntry {
            r#type: pb::FdTypes::Reg as i32,
            id,
            reg: Some(pb::RegFileEntry {
                id,
                flags,
                pos: f.pos,
                fown: no_owner(),
                name: name.to_owned(),
                size,
            }),
            pipe: None,
            memfd: None,
        };
        let entry = match f.kind {
            FileKind::Socket | FileKind::AnonInode | FileKind::BlockDevice | FileKind::Other
                if f.inherited =>
            {
                self.notes.push(f.inherited_note());
                reg("/dev/null", None)
            }
            FileKind::Regular => {
                checked(FileKind::Regular)?;
                reg(&f.target, f.file.as_ref().map(|r| r.size))
            }
            FileKind::Directory => {
                checked(FileKind::Directory)?;
                reg(&f.target, None)
            }
            FileKind::CharDevice if MEM_DEVICES.contains(&f.target.as_str()) => {
                checked(FileKind::CharDevice)?;
                reg(&f.target, None)
            }
            FileKind::CharDevice if is_terminal(&f.target) => {
                checked(FileKind::CharDevice)?;
                self.notes.push(format!(
                    "fd {fd} is the terminal {t}: the restored process opens {t} again by path \
                     (or pass `--inherit-fd fd[N]:{k}` for descriptor N of criu's); it does not \
                     become the controlling terminal",
                    fd = f.fd,
                    t = f.target,
                    k = &f.target[1..]
                ));
                // A terminal has no position: no lseek(2) on restore (-1).
                pb::FileEntry {
                    reg: Some(pb::RegFileEntry { pos: u64::MAX, ..reg(&f.target, None).reg.unwrap() }),
                    ..reg(&f.target, None)
                }
            }
            FileKind::Pipe if f.target.starts_with("pipe:[") => {
                let Some(inode) = f.target["pipe:[".len()..].strip_suffix(']').and_then(|n| n.parse().ok())
                else {
                    return unsupported("a pipe whose inode cannot be read");
                };
                self.notes.push(format!(
                    "fd {} is {}: criu creates a new pipe for it unless given `--inherit-fd fd[N]:{}`",
                    f.fd, f.target, f.target
                ));
                if let Some(FileState::PipeBuffer { data, .. }) = &f.state
                    && !data.is_empty()
                {
                    self.notes.push(format!(
                        "{} held {} bytes at the snapshot, which these images do not carry (`sdt restore` \
                         puts them back)",
                        f.target,
                        data.len()
                    ));
                }
                pb::FileEntry {
                    r#type: pb::FdTypes::Pipe as i32,
                    id,
                    reg: None,
                    pipe: Some(pb::PipeEntry { id, pipe_id: inode, flags, fown: no_owner() }),
                    memfd: None,
                }
            }
            FileKind::Pipe => return unsupported("a FIFO, which CRIU images here cannot express"),
            FileKind::Socket => return unsupported("a socket, which CRIU images here cannot express"),
            FileKind::AnonInode => {
                return unsupported(
                    "an anonymous-inode file (eventfd, epoll, timerfd, …), which CRIU images here cannot express",
                );
            }
            FileKind::CharDevice => return unsupported("a character device CRIU images here cannot express"),
            FileKind::BlockDevice => {
                return unsupported("a block device, which CRIU images here cannot express");
            }
            FileKind::Other => return unsupported("a file of unknown kind"),
        };
        let kind = entry.r#type;
        self.files.push(entry);
        Ok((kind, id))
    }

    /// The id of a read-only regular file entry for `path` (mappings, the executable, the
    /// working and root directories), added on first use. `size`, when known, is checked
    /// by `criu restore`.
    fn file_by_path(&mut self, path: &str, size: Option<u64>) -> u32 {
        if let Some(&id) = self.path_files.get(path) {
            return id;
        }
        let id = self.files.len() as u32 + 1;
        self.path_files.insert(path.to_owned(), id);
        self.files.push(pb::FileEntry {
            r#type: pb::FdTypes::Reg as i32,
            id,
            reg: Some(pb::RegFileEntry {
                id,
                flags: 0,
                pos: 0,
                fown: no_owner(),
                name: path.to_owned(),
                size,
            }),
            pipe: None,
            memfd: None,
        });
        id
    }

    /// The pages to write: those the store holds for private mappings with contents, and
    /// those that patches touch.
    fn plan_pages(&mut self, source: &impl SnapshotSource) {
        let stored = source.stored_ranges();
        let patched: BTreeSet<u64> = self
            .patches
            .iter()
            .flat_map(|p| {
                let first = p.addr - p.addr % PAGE_SIZE;
                let end = p.addr + p.bytes.len() as u64;
                (first..end).step_by(PAGE_SIZE as usize)
            })
            .collect();
        for m in &self.meta.mappings {
            if m.perms.shared || m.content == Content::Unreadable || m.path == "[vsyscall]" {
                continue;
            }
            // The stored ranges in the mapping and the patched pages, as runs that do not
            // cross into the next mapping.
            let from = stored.partition_point(|r| r.end <= m.start);
            let mut pieces: Vec<(u64, u64)> = stored[from..]
                .iter()
                .take_while(|r| r.start < m.end)
                .map(|r| (r.start.max(m.start), r.end.min(m.end)))
                .collect();
            pieces.extend(patched.range(m.start..m.end).map(|&p| (p, p + PAGE_SIZE)));
            pieces.sort_unstable();
            let first_run = self.runs.len();
            for (start, end) in pieces {
                match self.runs[first_run..].last_mut() {
                    Some(run) if start <= run.start + run.pages * PAGE_SIZE => {
                        run.pages = run.pages.max((end - run.start) / PAGE_SIZE)
                    }
                    _ => self.runs.push(PageRun { start, pages: (end - start) / PAGE_SIZE }),
                }
            }
        }
        // A patch outside every private mapping with contents changes nothing: drop it.
        let runs = &self.runs;
        self.patches
            .retain(|p| runs.iter().any(|r| r.start <= p.addr && p.addr < r.start + r.pages * PAGE_SIZE));
    }
}

/// Sets up an interrupted system call the way CRIU's dump presents it (compel's
/// `get_task_regs`): a call the kernel would restart is set to run again from its
/// `syscall` instruction; one that would restart through `restart_syscall(2)` (sleeps
/// with a timeout) returns `EINTR` instead.
pub(crate) fn restart_syscall(regs: &mut UserRegs) {
    if (regs.orig_rax as i64) < 0 {
        return; // not in a system call
    }
    match -(regs.rax as i64) {
        ERESTARTSYS | ERESTARTNOINTR | ERESTARTNOHAND => {
            regs.rax = regs.orig_rax;
            regs.rip = regs.rip.wrapping_sub(SYSCALL_INSN_LEN);
        }
        ERESTART_RESTARTBLOCK => regs.rax = (-EINTR) as u64,
        _ => {}
    }
}

/// Checks every file a mapping refers to: `criu restore` maps these files again, so each
/// must be the version that was mapped, a regular file, and one the store's owner could
/// read (a store is untrusted: it could name `/etc/shadow` for a root `criu restore`
/// to map). Zeros instead of its pages would be a different program, so a file that
/// fails refuses the export, naming the mapping.
fn check_mapped_files(source: &impl SnapshotSource) -> Result<(), Error> {
    let mut checked = BTreeSet::new();
    for m in &source.meta().mappings {
        let Content::File(f) = &m.content else { continue };
        if checked.insert(&f.path) && !source.shared_file_gone(f) {
            source.open_file(f).map_err(|source| Error::Store {
                what: format!("mapping {:#x}-{:#x} {}", m.start, m.end, m.path),
                source,
            })?;
        }
    }
    Ok(())
}

/// Checks a file `criu restore` opens by path, `object` naming it for the error.
fn check_reopen(
    source: &impl SnapshotSource,
    r: &Reopen,
    object: impl FnOnce() -> String,
) -> Result<(), Error> {
    source.check_reopen(r).map_err(|source| Error::Refused { object: object(), source })
}

/// The copy the run kept of the file at `path`, if a mapping takes its pages from it and
/// the file changed since (the store checked the copy: the version mapped, a regular
/// file, readable by the store's owner).
fn kept_path(source: &impl SnapshotSource, path: &str) -> Option<String> {
    let kept = source.file_path(source.meta().mapped_file(path)?).ok()?;
    // A store whose path is not UTF-8 cannot be named in an image: the file's own path,
    // checked as any other, refuses the export.
    let kept = kept.to_str()?;
    (kept != path).then(|| kept.to_owned())
}

/// The device and inode the snapshot recorded for the file at `path`, if a mapping takes
/// its pages from it.
fn mapped_identity(meta: &SnapshotMeta, path: &str) -> Option<(u64, u64)> {
    meta.mapped_file(path).map(|f| (f.dev, f.inode))
}

/// Whether `[addr, addr + len)` lies in one private writable mapping with contents.
fn writable_private(mappings: &[Mapping], addr: u64, len: u64) -> bool {
    mappings.iter().any(|m| {
        m.perms.write
            && !m.perms.shared
            && m.content != Content::Unreadable
            && m.start <= addr
            && addr + len <= m.end
    })
}

fn unsupported_mapping(m: &Mapping, why: &'static str) -> Error {
    Error::Unsupported { object: mapping_name(m), why }
}

/// `mapping START-END PERMS PATH`.
fn mapping_name(m: &Mapping) -> String {
    format!("mapping {:#x}-{:#x} {} {}", m.start, m.end, m.perms, m.path)
}

fn is_terminal(path: &str) -> bool {
    path.starts_with("/dev/pts/") || path.starts_with("/dev/tty") || path == "/dev/console"
}

/// No `F_SETOWN` owner.
fn no_owner() -> pb::FownEntry {
    pb::FownEntry { uid: 0, euid: 0, signum: 0, pid_type: 0, pid: 0 }
}

#[cfg(test)]
mod tests {
    use sdt_store::{FileRef, Owner, OwnerRights, Perms};

    use super::*;
    use crate::fake::{self, BREAKING, EXITING, PID, RECORD, SEQ, SLEEPING, STATE_WORD, TLS};

    #[test]
    fn system_calls_restart_as_after_criu_dump() {
        let source = fake::sample();
        let plan = Plan::new(&source, None).unwrap();
        let tids: Vec<i32> = plan.threads.iter().map(|t| t.state.tid).collect();
        assert_eq!(tids, [PID, BREAKING, SLEEPING], "leader first, the exiting thread left out");
        // futex wait (-ERESTARTSYS): back on its `syscall` instruction, rax the call again.
        let regs: Vec<UserRegs> = plan.threads.iter().map(|t| t.regs).collect();
        assert_eq!((regs[0].rip, regs[0].rax), (0x40_0200, 202));
        // At the breakpoint: untouched.
        assert_eq!((regs[1].rip, regs[1].rax), (0x40_0101, 0x1234));
        // clock_nanosleep (-ERESTART_RESTARTBLOCK): returns EINTR where it stopped.
        assert_eq!((regs[2].rip, regs[2].rax as i64), (0x40_0303, -4));
        assert_eq!(plan.threads[2].clear_tid, Some(TLS + 0x2000 + 0x2d0));
    }

    #[test]
    fn other_errors_and_user_mode_stay() {
        // read(2) that ended in EAGAIN: a finished call.
        let mut regs = UserRegs { orig_rax: 0, rax: (-11i64) as u64, rip: 0x1000, ..UserRegs::default() };
        let before = regs;
        restart_syscall(&mut regs);
        assert_eq!(regs, before);
        regs.orig_rax = u64::MAX; // not in a call, whatever rax holds
        regs.rax = (-512i64) as u64;
        let before = regs;
        restart_syscall(&mut regs);
        assert_eq!(regs, before);
    }

    #[test]
    fn handover_patches_result_state_word_and_exited_tid() {
        let source = fake::sample();
        let plan = Plan::new(&source, None).unwrap();
        let patch = |addr| plan.patches.iter().find(|p| p.addr == addr).map(|p| p.bytes.clone());
        assert_eq!(patch(RECORD + 64), Some(i64::from(SEQ).to_le_bytes().to_vec()));
        assert_eq!(patch(STATE_WORD), Some(0i32.to_le_bytes().to_vec()));
        let exited = TLS + (EXITING - PID) as u64 * 0x1000 + 0x2d0;
        assert_eq!(patch(exited), Some(vec![0; 4]));
        assert!(plan.notes.iter().any(|n| n.contains("breakpoints are off")), "{:?}", plan.notes);
    }

    #[test]
    fn a_kernel_module_snapshot_has_its_record_in_the_trigger_calls_argument() {
        // Stopped in ioctl(fd 5, SDT_IOC_TRIGGER, &record): rdi is the descriptor.
        let mut source = fake::sample();
        let breaking = source.meta.threads.iter_mut().find(|t| t.tid == BREAKING).unwrap();
        for (reg, value) in
            [("rdi", 5), ("rsi", sdt_abi::kmod::IOC_TRIGGER), ("rdx", RECORD), ("orig_rax", 16)]
        {
            sdt_store::set_gpreg(&mut breaking.gpregs, reg, value);
        }
        let plan = Plan::new(&source, None).unwrap();
        let patch = |addr| plan.patches.iter().find(|p| p.addr == addr).map(|p| p.bytes.clone());
        assert_eq!(patch(RECORD + 64), Some(i64::from(SEQ).to_le_bytes().to_vec()));
        assert_eq!(patch(STATE_WORD), Some(0i32.to_le_bytes().to_vec()));
    }

    #[test]
    fn timer_snapshots_take_the_state_word_from_the_caller() {
        let mut source = fake::sample();
        source.meta.trigger = Trigger::Timer;
        let plan = Plan::new(&source, Some(STATE_WORD)).unwrap();
        assert_eq!(plan.patches.iter().filter(|p| p.addr == STATE_WORD).count(), 1);
        assert!(plan.patches.iter().all(|p| p.addr != RECORD + 64));
        let plan = Plan::new(&source, None).unwrap();
        assert!(plan.patches.iter().all(|p| p.addr != STATE_WORD));
        assert!(plan.notes.iter().any(|n| n.contains("SIGTRAP")), "{:?}", plan.notes);
    }

    #[test]
    fn pages_are_the_stored_ones_of_private_mappings() {
        let mut source = fake::sample();
        // A page the store holds in a shared mapping is the file's: not written.
        source.meta.mappings[0].perms.shared = true;
        source.poke(0x40_0000, b"shared");
        let plan = Plan::new(&source, None).unwrap();
        let runs: Vec<(u64, u64)> = plan.runs.iter().map(|r| (r.start, r.pages)).collect();
        assert_eq!(
            runs,
            [
                (0x40_1000, 1),
                (0x60_0000, 1),
                (TLS, 4), // the four threads' tid words, one page each
                (0x7fff_f002_0000, 1),
                (0x7fff_f7ff_4000, 1),
            ]
        );
    }

    #[test]
    fn shared_memory_is_made_again_with_its_pages_by_offset() {
        let mut source = fake::sample();
        let (a, b, other) = (0x7000_0000, 0x7100_0000, 0x7200_0000);
        let memfd = "/memfd:ring (deleted)";
        let mut second = fake::mapping(b, b + 0x1000, "r--s", 0x1000, memfd, Content::Zero);
        second.perms.read = true;
        let mut anon = fake::mapping(other, other + 0x1000, "rw-s", 0, "/dev/zero (deleted)", Content::Zero);
        anon.inode = 99;
        source
            .meta
            .mappings
            .splice(0..0, [fake::mapping(a, a + 0x2000, "rw-s", 0, memfd, Content::Zero), second, anon]);
        source.poke(a, b"first");
        source.poke(a + 0x1000, b"second");
        // The same page of the memfd through the second view.
        source.poke(b, b"second");
        source.poke(other, b"other");
        // A file mapped shared, gone since; its page in the store.
        let gone = 0x7300_0000;
        let file =
            FileRef { path: "/tmp/hsperfdata".into(), dev: 2049, inode: 77, size: 0x1000, mtime_ns: 1 };
        let mut perf = fake::mapping(gone, gone + 0x1000, "rw-s", 0, "/tmp/hsperfdata", Content::File(file));
        perf.inode = 77;
        source.meta.mappings.insert(3, perf);
        source.gone.push("/tmp/hsperfdata".into());
        source.poke(gone, b"perf");
        let plan = Plan::new(&source, None).unwrap();
        let vma = |start| plan.vmas.iter().find(|v| v.start == start).unwrap();
        for start in [a, b, other, gone] {
            assert_eq!(vma(start).flags, vm::MAP_SHARED | vm::MAP_ANONYMOUS);
            assert_eq!(vma(start).status, vm::VMA_AREA_REGULAR | vm::VMA_ANON_SHARED);
        }
        assert_eq!(vma(b).pgoff, 0x1000);
        assert_eq!(vma(a).shmid, vma(b).shmid, "views of one memfd");
        assert_ne!(vma(a).shmid, vma(other).shmid);
        let shmem = |id| plan.shmems.iter().find(|s| s.id == id).unwrap();
        let runs = &shmem(vma(a).shmid).runs;
        assert_eq!(runs, &[ShmemRun { offset: 0, run: PageRun { start: a, pages: 2 } }]);
        assert_eq!(
            shmem(vma(other).shmid).runs,
            [ShmemRun { offset: 0, run: PageRun { start: other, pages: 1 } }]
        );
        assert_eq!(
            shmem(vma(gone).shmid).runs,
            [ShmemRun { offset: 0, run: PageRun { start: gone, pages: 1 } }]
        );
        let pages_ids: Vec<u32> = plan.shmems.iter().map(|s| s.pages_id).collect();
        assert_eq!(pages_ids, [2, 3, 4], "each its own pages image after pages-1.img");
        // Not among the private mappings' pages.
        assert!(plan.runs.iter().all(|r| r.start < a || r.start >= gone + 0x1000));
    }

    #[test]
    fn a_memfd_held_open_is_one_memfd_for_its_descriptor_and_views() {
        let mut source = fake::sample();
        let (view, path) = (0x7000_0000, "/memfd:ring (deleted)");
        source.meta.mappings.insert(0, fake::mapping(view, view + 0x2000, "rw-s", 0, path, Content::Zero));
        source.poke(view, b"in memory");
        let file = FileRef { path: path.into(), dev: 1, inode: 4242, size: 0x1800, mtime_ns: 1 };
        let data = b"held".to_vec();
        source.meta.files.push(OpenFile {
            fd: 7,
            target: path.into(),
            kind: FileKind::Regular,
            flags: 2,
            pos: 3,
            file: Some(file),
            inherited: false,
            state: Some(FileState::SparseDeletedFile {
                size: 0x1800,
                parts: vec![sdt_store::FilePart { offset: 0x1000, data: data.clone() }],
            }),
        });
        let plan = Plan::new(&source, None).unwrap();
        let vma = plan.vmas.iter().find(|v| v.start == view).unwrap();
        assert_eq!(vma.status, vm::VMA_AREA_REGULAR | vm::VMA_FILE_SHARED | vm::VMA_AREA_MEMFD);
        assert_eq!((vma.flags, vma.fdflags), (vm::MAP_SHARED, Some(O_RDWR)));
        let memfd = |id: u32| plan.files.iter().find(|f| f.id == id).unwrap().memfd.unwrap();
        let by_view = memfd(vma.shmid as u32);
        let fd = plan.fds.iter().find(|d| d.fd == 7).unwrap();
        assert_eq!(fd.r#type, pb::FdTypes::Memfd as i32);
        let by_fd = memfd(fd.id);
        assert_eq!((by_fd.flags, by_fd.pos), (2, 3));
        assert_eq!(by_view.inode_id, by_fd.inode_id, "one memfd");
        let [(inode, _)] = &plan.memfds[..] else { panic!("{:?}", plan.memfds) };
        assert_eq!((inode.name.as_str(), inode.size, inode.inode_id), ("ring", 0x1800, 1));
        // Its contents: what the capture kept of the file, not the view's pages.
        let shmem = plan.shmems.iter().find(|s| s.id == u64::from(inode.shmid)).unwrap();
        assert_eq!(shmem.parts, [(0x1000, &data[..])]);
        assert_eq!(shmem.pieces(), [(0x1000, 1)]);
        assert!(plan.shmems.iter().all(|s| s.runs.is_empty()), "the view is no shared memory of its own");
    }

    #[test]
    fn a_shadow_reservation_is_mapped_without_reserving_swap() {
        let mut source = fake::sample();
        let (start, end) = (0x7fff_8000, 0x1000_7fff_8000);
        source.meta.mappings.insert(0, fake::mapping(start, end, "rw-p", 0, "", Content::Zero));
        let plan = Plan::new(&source, None).unwrap();
        let flags = |start| plan.vmas.iter().find(|v| v.start == start).unwrap().flags;
        assert_eq!(flags(start), vm::MAP_PRIVATE | vm::MAP_ANONYMOUS | vm::MAP_NORESERVE);
        assert_eq!(flags(0x60_0000), vm::MAP_PRIVATE | vm::MAP_ANONYMOUS, "the heap");
    }

    #[test]
    fn descriptors_share_a_file_when_duplicated() {
        let source = fake::sample();
        let plan = Plan::new(&source, None).unwrap();
        let fds: Vec<(u32, u32, u32)> = plan.fds.iter().map(|f| (f.fd, f.id, f.flags)).collect();
        let (null, out, exe_fd) = (fds[0].1, fds[1].1, fds[3].1);
        assert_eq!(fds, [(0, null, 0), (1, out, 0), (2, out, 0), (3, exe_fd, FD_CLOEXEC)]);
        let reg = |id: u32| plan.files[id as usize - 1].reg.clone().unwrap();
        assert_eq!((reg(null).name.as_str(), reg(null).flags, reg(null).size), ("/dev/null", 0o100000, None));
        assert_eq!((reg(out).pos, reg(out).flags, reg(out).size), (100, 0o100001, Some(100)));
        assert_eq!(reg(exe_fd).flags, 0o100000, "O_CLOEXEC is the descriptor's, not the file's");
        // The executable's mapping entry is its own, checked for size, and mm names it.
        assert_ne!(plan.exe_file_id, exe_fd);
        assert_eq!(
            (reg(plan.exe_file_id).name.as_str(), reg(plan.exe_file_id).size),
            (fake::EXE, Some(0x2000))
        );
        assert_eq!(reg(plan.cwd_id).name, "/home/user");
        assert_eq!(reg(plan.root_id).name, "/");
    }

    #[test]
    fn terminals_and_pipes_on_stdio() {
        let mut source = fake::sample();
        source.meta.files[0] = OpenFile {
            fd: 0,
            target: "/dev/pts/3".into(),
            kind: FileKind::CharDevice,
            flags: 2,
            pos: 0,
            file: None,
            inherited: false,
            state: None,
        };
        source.meta.files[1] = OpenFile {
            fd: 1,
            target: "pipe:[5209]".into(),
            kind: FileKind::Pipe,
            flags: 1,
            pos: 0,
            file: None,
            inherited: false,
            state: None,
        };
        let plan = Plan::new(&source, None).unwrap();
        let tty = plan.files[plan.fds[0].id as usize - 1].reg.clone().unwrap();
        assert_eq!((tty.name.as_str(), tty.pos), ("/dev/pts/3", u64::MAX), "no lseek on a terminal");
        let pipe = &plan.files[plan.fds[1].id as usize - 1];
        assert_eq!(pipe.r#type, pb::FdTypes::Pipe as i32);
        assert_eq!(pipe.pipe.as_ref().map(|p| (p.pipe_id, p.flags)), Some((5209, 1)));
        assert!(plan.notes.iter().any(|n| n.contains("--inherit-fd fd[N]:pipe:[5209]")), "{:?}", plan.notes);
    }

    #[test]
    fn unsupported_objects_are_named() {
        let err = |edit: &dyn Fn(&mut SnapshotMeta)| {
            let mut source = fake::sample();
            edit(&mut source.meta);
            Plan::new(&source, None).err().map(|e| e.to_string()).unwrap_or_default()
        };
        assert_eq!(
            err(&|m| {
                m.files[2].kind = FileKind::AnonInode;
                m.files[2].target = "anon_inode:[eventfd]".into();
            }),
            "fd 2 (anon_inode:[eventfd]): an anonymous-inode file (eventfd, epoll, timerfd, …), which CRIU \
             images here cannot express"
        );
        assert_eq!(
            err(&|m| m.files[1].target = "/tmp/gone (deleted)".into()),
            "fd 1 (/tmp/gone (deleted)): a deleted file other than a memfd, which CRIU images here cannot express"
        );
        assert_eq!(
            err(&|m| {
                let shm = &mut m.mappings[3];
                (shm.perms.shared, shm.inode, shm.path) = (true, 5, "/SYSV00000000 (deleted)".into());
            }),
            "mapping 0x7f0000000000-0x7f0000010000 rw-s /SYSV00000000 (deleted): shared memory that is not a \
             regular file"
        );
        assert_eq!(
            err(&|m| m.mappings[3].perms.shared = true),
            "mapping 0x7f0000000000-0x7f0000010000 rw-s : shared anonymous memory"
        );
        assert!(err(&|m| m.threads.retain(|t| t.tid != PID)).contains("no running main thread (pid 100)"));
        assert!(err(&|m| m.layout = Default::default()).contains("has no memory layout"));
        assert!(err(&|m| m.threads[0].fpregs.truncate(100)).contains("fpregs is 100 bytes, expected 512"));
    }

    #[test]
    fn the_kernel_modules_device_is_left_closed() {
        let mut source = fake::sample();
        source.meta.files[2].kind = FileKind::CharDevice;
        source.meta.files[2].target = "/dev/sdt".into();
        let plan = Plan::new(&source, None).unwrap();
        assert!(plan.fds.iter().all(|f| f.fd != 2), "{:?}", plan.fds);
        assert!(plan.notes.iter().any(|n| n.contains("fd 2 is SDT's kernel module")), "{:?}", plan.notes);
    }

    #[test]
    fn a_mapped_file_is_checked_even_when_the_store_holds_all_its_pages() {
        // criu restore maps it again all the same.
        let mut source = fake::sample();
        let exe =
            source.meta.mappings.iter().find(|m| matches!(m.content, Content::File(_))).unwrap().clone();
        for page in (exe.start..exe.end).step_by(PAGE_SIZE as usize) {
            source.poke(page, b"x");
        }
        source.changed_file = Some(fake::EXE.into());
        let err = Plan::new(&source, None).err().unwrap();
        assert!(matches!(err, Error::Store { source: sdt_store::Error::FileChanged { .. }, .. }), "{err:?}");
    }

    #[test]
    fn every_file_criu_opens_by_path_is_checked_for_how_it_opens_it() {
        let mut source = fake::sample();
        // A PROT_NONE gap of a library, and a shared writable mapping of a data file.
        let lib = "/usr/lib/libx.so";
        let gap = Mapping {
            perms: Perms::default(),
            content: Content::Unreadable,
            ..source.meta.mappings[0].clone()
        };
        source.meta.mappings.push(Mapping { start: 0x50_0000, end: 0x50_1000, path: lib.into(), ..gap });
        let db = FileRef { path: "/srv/db".into(), dev: 9, inode: 8, size: 4096, mtime_ns: 1 };
        let data = &source.meta.mappings[3];
        source.meta.mappings.push(Mapping {
            start: 0x7f10_0000_0000,
            end: 0x7f10_0000_1000,
            perms: Perms { shared: true, ..data.perms },
            inode: 8,
            path: db.path.clone(),
            content: Content::File(db),
            ..data.clone()
        });
        source.meta.mappings.sort_by_key(|m| m.start);
        Plan::new(&source, None).unwrap();
        let read = Access::READ;
        let checked = source.reopened.borrow().clone();
        let expected = [
            (lib, FileKind::Regular, read),
            ("/srv/db", FileKind::Regular, Access { read: true, write: true }),
            ("/dev/null", FileKind::CharDevice, read),
            ("/tmp/out.txt", FileKind::Regular, Access { read: false, write: true }),
            (fake::EXE, FileKind::Regular, read),
            (fake::EXE, FileKind::Regular, read),
            ("/home/user", FileKind::Directory, Access::default()),
        ];
        let expected: Vec<_> = expected.iter().map(|&(p, k, a)| (p.to_owned(), k, a)).collect();
        assert_eq!(checked, expected, "fds 1 and 2 share one file; private mappings are read by the store");

        source.refused_path = Some("/tmp/out.txt".into());
        let err = Plan::new(&source, None).err().unwrap();
        assert!(matches!(err, Error::Refused { .. }), "{err:?}");
        assert_eq!(err.to_string(), "fd 1 (/tmp/out.txt) is refused: `criu restore` would open it as root");
        source.refused_path = Some(lib.into());
        let err = Plan::new(&source, None).err().unwrap().to_string();
        assert!(err.starts_with("mapping 0x500000-0x501000 ---p /usr/lib/libx.so is refused"), "{err}");
    }

    #[test]
    fn flags_only_open_acts_on_are_never_written() {
        let mut source = fake::sample();
        // O_CREAT | O_TRUNC | O_WRONLY, as no descriptor shows them.
        source.meta.files[1].flags = 0o1101;
        source.meta.files[2].flags = 0o1101;
        let plan = Plan::new(&source, None).unwrap();
        let out = plan.files[plan.fds[1].id as usize - 1].reg.clone().unwrap();
        assert_eq!(out.flags, 0o1);
    }

    #[test]
    fn credentials_beyond_the_stores_owner_are_refused() {
        let mut source = fake::sample();
        source.rights = OwnerRights::of(vec![Owner { uid: 1000, gids: vec![1000, 24] }]);
        // Thread 101 ran with effective uid 1001, the others with a capability.
        let err = Plan::new(&source, None).err().unwrap();
        assert_eq!(
            err.to_string(),
            "thread 101 was recorded with user ids [1000, 1001, 1000, 1001], more than the owner of its store \
             (uid 1000) has: uid 1000"
        );
        source.meta.process.thread_creds.clear();
        let err = Plan::new(&source, None).err().unwrap();
        assert!(err.to_string().contains("permitted capabilities 0x400"), "{err}");
        source.meta.process.creds.as_mut().unwrap().caps.permitted = 0;
        let plan = Plan::new(&source, None).unwrap();
        assert!(plan.threads.iter().all(|t| t.creds.uids.as_array() == [1000; 4]));
    }

    #[test]
    fn a_changed_mapped_file_is_reported() {
        let mut source = fake::sample();
        source.changed_file = Some(fake::EXE.into());
        let err = Plan::new(&source, None).err().unwrap();
        assert!(matches!(err, Error::Store { source: sdt_store::Error::FileChanged { .. }, .. }), "{err:?}");
    }

    #[test]
    fn a_changed_program_is_restored_from_the_copy_the_run_kept() {
        const KEPT: &str = "/store/runs/1/files/801-1092-2000-0-prog";
        let mut source = fake::sample();
        source.kept.insert(fake::EXE.into(), KEPT.into());
        let plan = Plan::new(&source, None).unwrap();
        let name = |id: u32| plan.files[id as usize - 1].reg.clone().unwrap().name;
        // mm's executable and every vma of the program's file name the copy, which needs
        // no reopening check of its own: the store checked it.
        assert_eq!(name(plan.exe_file_id), KEPT);
        let exe_vmas: Vec<String> = plan
            .vmas
            .iter()
            .filter(|v| v.shmid != 0)
            .map(|v| name(v.shmid as u32))
            .filter(|n| n.ends_with("prog"))
            .collect();
        assert!(!exe_vmas.is_empty() && exe_vmas.iter().all(|n| n == KEPT), "{exe_vmas:?}");
        assert!(source.reopened.borrow().iter().all(|(path, ..)| path != KEPT));
        // A shared mapping of a changed file cannot be: it would write to, or read, another.
        let mut source = fake::sample();
        let shared =
            source.meta.mappings.iter_mut().find(|m| matches!(&m.content, Content::File(_))).unwrap();
        shared.perms.shared = true;
        let Content::File(f) = &shared.content else { unreachable!() };
        source.kept.insert(f.path.clone(), KEPT.into());
        assert!(matches!(Plan::new(&source, None), Err(Error::Unsupported { .. })));
    }

    #[test]
    fn seccomp_and_unread_handlers_are_refused() {
        let mut sandboxed = fake::sample();
        sandboxed.meta.process.thread_creds[0].creds.seccomp = SeccompMode::Filter;
        let Err(err) = Plan::new(&sandboxed, None) else { panic!("planned") };
        let err = err.to_string();
        assert!(err.contains(&format!("thread {}", fake::BREAKING)) && err.contains("unconfined"), "{err}");

        let mut unread = fake::sample();
        unread.meta.unread_handlers = 1 << (10 - 1) | 1 << (33 - 1);
        let Err(err) = Plan::new(&unread, None) else { panic!("planned") };
        let err = err.to_string();
        assert!(err.starts_with("the handlers of SIGUSR1, SIGRTMIN+1: sdt could not read them"), "{err}");
    }
}
