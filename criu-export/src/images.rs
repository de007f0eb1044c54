//! One function per image kind, each turning the [`Plan`] into CRIU's entries.
//!
//! ```text
//! image                   entries                                     written by
//! inventory.img           inventory_entry                             gen_inventory
//! pstree.img              pstree_entry: the process, its threads      gen_pstree
//! ids-<pid>.img           task_kobj_ids_entry                         gen_ids
//! core-<tid>.img          core_entry per thread: registers (gen_gpregs,
//!                         gen_fpregs), thread state; the leader's also
//!                         the task's (signal dispositions, mask,
//!                         timers, limits)                             gen_core
//! mm-<pid>.img            mm_entry: layout, auxv, every vma           gen_mm
//! pagemap-<pid>.img       pagemap_head, then pagemap_entry per run    gen_pagemap
//! pages-1.img             the runs' pages, raw                        (streamed by encode)
//! pagemap-shmem-<id>.img  pagemap_head, then an entry per run, by
//!                         offset in the shared memory object          gen_shmem_pagemap
//! pages-<id>.img          each object's pages (id 2, 3, …)            (streamed by encode)
//! memfd.img               memfd_inode_entry per memfd held open       gen_memfd_inodes
//! files.img               file_entry per file object                  gen_files
//! fdinfo-<files_id>.img   fdinfo_entry per descriptor                 gen_fdinfo
//! fs-<pid>.img            fs_entry                                    gen_fs
//! ```
//!
//! Ids: the task's memory, files, fs and signal handlers are object 2 (the restoring
//! criu's own are 1), its namespaces those of the restoring criu, so that nothing is
//! restored into new namespaces.

use std::collections::HashMap;

use sdt_store::{
    Credentials, ItimerKind, ResourceLimit, Timers, UserFpregs, UserRegs, XSAVE_HEADER_END, XsaveHead,
};

use crate::image::{IMAGES_V1_1, Image, ImageKind};
use crate::pb;
use crate::plan::{Plan, Shmem, Thread};

/// The object id of the restored task's memory, files, fs and signal handlers.
pub(crate) const TASK_OBJECTS_ID: u32 = 2;
/// `pages-<id>.img` of the single pagemap.
pub(crate) const PAGES_ID: u32 = 1;

/// `TASK_ALIVE`: a task CRIU restores running.
const TASK_ALIVE: u32 = 1;
/// `SS_DISABLE`: no alternate signal stack.
const SS_DISABLE: u32 = 2;
/// `PE_PRESENT`: a pagemap entry whose pages are in `pages-<id>.img`.
const PE_PRESENT: u32 = 1 << 2;
/// Signals numbered 1..=64; CRIU keeps a disposition for each but `SIGKILL` and `SIGSTOP`.
const SIGMAX: i32 = 64;
const SIGKILL: i32 = 9;
const SIGSTOP: i32 = 19;
/// The `umask` of the restored process where the snapshot does not record it.
const UMASK: u32 = 0o022;
/// Namespace ids shared by `inventory.img`'s root ids and the task's: the same values
/// mean "the restoring criu's namespaces".
const NAMESPACES: [u32; 7] = [1, 2, 3, 4, 6, 7, 8];

/// `inventory.img`: image version 1.1, descriptors per file-table id, and the ids of the
/// restoring side's own objects.
pub(crate) fn gen_inventory() -> Image {
    let entry = pb::InventoryEntry {
        img_version: IMAGES_V1_1,
        fdinfo_per_id: Some(true),
        root_ids: Some(kobj_ids(1)),
        ns_per_id: Some(true),
    };
    Image::with(ImageKind::Inventory, [&entry])
}

/// `pstree.img`: one process, the root of the restored tree, with its threads.
pub(crate) fn gen_pstree(plan: &Plan) -> Image {
    let p = &plan.meta.process;
    let entry = pb::PstreeEntry {
        pid: plan.pid,
        ppid: 0, // the root's parent is whoever restores it
        pgid: p.pgrp as u32,
        sid: p.sid as u32,
        threads: plan.threads.iter().map(|t| t.state.tid as u32).collect(),
    };
    Image::with(ImageKind::Pstree, [&entry])
}

/// `ids-<pid>.img`.
pub(crate) fn gen_ids(plan: &Plan) -> Image {
    Image::with(ImageKind::Ids(plan.pid), [&kobj_ids(TASK_OBJECTS_ID)])
}

fn kobj_ids(objects: u32) -> pb::TaskKobjIdsEntry {
    let [pid_ns, net_ns, ipc_ns, uts_ns, mnt_ns, user_ns, cgroup_ns] = NAMESPACES.map(Some);
    pb::TaskKobjIdsEntry {
        vm_id: objects,
        files_id: objects,
        fs_id: objects,
        sighand_id: objects,
        pid_ns_id: pid_ns,
        net_ns_id: net_ns,
        ipc_ns_id: ipc_ns,
        uts_ns_id: uts_ns,
        mnt_ns_id: mnt_ns,
        user_ns_id: user_ns,
        cgroup_ns_id: cgroup_ns,
    }
}

/// `core-<tid>.img` of one thread. The leader's carries the task's state: its name,
/// signal dispositions and (as CRIU keeps it there) its signal mask.
pub(crate) fn gen_core(plan: &Plan, thread: &Thread) -> Image {
    let t = thread.state;
    let leader = t.tid as u32 == plan.pid;
    let tc = leader.then(|| pb::TaskCoreEntry {
        task_state: TASK_ALIVE,
        exit_code: 0,
        personality: plan.meta.process.personality.unwrap_or(0),
        flags: 0,
        blk_sigset: t.sigmask,
        comm: plan.meta.process.comm.clone(),
        timers: Some(gen_timers(&plan.meta.timers)),
        rlimits: Some(gen_rlimits(&plan.meta.process.limits)),
        signals_s: Some(pb::SignalQueueEntry { signals: Vec::new() }),
        sigactions: gen_sigactions(plan),
    });
    let (futex_rla, futex_rla_len) = t.robust_list.map_or((0, 0), |l| (l.head, l.len as u32));
    let (sched_nice, sched_policy) = scheduling(plan, t.tid);
    let thread_core = pb::ThreadCoreEntry {
        futex_rla,
        futex_rla_len,
        sched_nice: Some(sched_nice),
        sched_policy: Some(sched_policy),
        blk_sigset: (!leader).then_some(t.sigmask),
        sas: Some(
            t.altstack.map_or(pb::ThreadSasEntry { ss_sp: 0, ss_size: 0, ss_flags: SS_DISABLE }, |s| {
                pb::ThreadSasEntry { ss_sp: s.sp, ss_size: s.size, ss_flags: s.flags }
            }),
        ),
        signals_p: Some(pb::SignalQueueEntry { signals: Vec::new() }),
        creds: Some(gen_creds(&thread.creds)),
        comm: (!t.name.is_empty()).then(|| t.name.clone()),
        rseq_entry: t.rseq.map(|r| pb::RseqEntry {
            rseq_abi_pointer: r.addr,
            rseq_abi_size: r.len,
            signature: r.sig,
        }),
    };
    let entry = pb::CoreEntry {
        mtype: pb::core_entry::March::X8664 as i32,
        thread_info: Some(pb::ThreadInfoX86 {
            clear_tid_addr: thread.clear_tid.unwrap_or(0),
            gpregs: gen_gpregs(&thread.regs),
            fpregs: gen_fpregs(&thread.fpregs, &t.xstate),
            tls: gen_tls(),
        }),
        tc,
        thread_core: Some(thread_core),
    };
    Image::with(ImageKind::Core(t.tid as u32), [&entry])
}

/// `user_regs_struct` as CRIU's register entry: the same 27 registers, in the same order.
pub(crate) fn gen_gpregs(r: &UserRegs) -> pb::UserX86RegsEntry {
    pb::UserX86RegsEntry {
        r15: r.r15,
        r14: r.r14,
        r13: r.r13,
        r12: r.r12,
        bp: r.rbp,
        bx: r.rbx,
        r11: r.r11,
        r10: r.r10,
        r9: r.r9,
        r8: r.r8,
        ax: r.rax,
        cx: r.rcx,
        dx: r.rdx,
        si: r.rsi,
        di: r.rdi,
        orig_ax: r.orig_rax,
        ip: r.rip,
        cs: r.cs,
        flags: r.eflags,
        sp: r.rsp,
        ss: r.ss,
        fs_base: r.fs_base,
        gs_base: r.gs_base,
        ds: r.ds,
        es: r.es,
        fs: r.fs,
        gs: r.gs,
        mode: Some(pb::UserX86RegsMode::Native as i32),
    }
}

/// The FXSAVE area `f` (`user_fpregs_struct`), plus the XSAVE state CRIU carries when the
/// snapshot has an XSAVE area (`xstate`).
pub(crate) fn gen_fpregs(f: &UserFpregs, xstate: &[u8]) -> pb::UserX86FpregsEntry {
    pb::UserX86FpregsEntry {
        cwd: f.cwd.into(),
        swd: f.swd.into(),
        twd: f.ftw.into(),
        fop: f.fop.into(),
        rip: f.rip,
        rdp: f.rdp,
        mxcsr: f.mxcsr,
        mxcsr_mask: f.mxcr_mask,
        st_space: f.st_space.to_vec(),
        xmm_space: f.xmm_space.to_vec(),
        xsave: gen_xsave(xstate),
    }
}

/// The XSAVE components CRIU restores, from a standard-format XSAVE area as
/// `NT_X86_XSTATE` gives it: the header's `xstate_bv`, the upper halves of the YMM
/// registers, the AVX-512 state and PKRU. `None` without XSAVE.
///
/// Where a component lies is the CPU's business (CPUID leaf 0xD), and the snapshot does
/// not record it. Intel CPUs (and QEMU's) put each at a fixed offset, leaving room for
/// MPX; AMD CPUs pack the enabled ones in feature order. Which of the two the area
/// follows shows in its length; a component found in neither is left out, and CRIU
/// then restores it zeroed.
pub(crate) fn gen_xsave(x: &[u8]) -> Option<pb::UserX86XsaveEntry> {
    /// (feature bit, size, offset on Intel) of the user components after the legacy
    /// area and the header, in feature order; 3 and 4 are MPX, 8 a supervisor state.
    const COMPONENTS: [(u32, usize, usize); 7] = [
        (2, 256, 576),
        (3, 64, 960),
        (4, 64, 1024),
        (5, 64, 1088),
        (6, 512, 1152),
        (7, 1024, 1664),
        (9, 8, 2688),
    ];
    let head = XsaveHead::read(x)?;
    let enabled = head.legacy.xcr0();
    let xstate_bv = head.header.xstate_bv & enabled;
    let on: Vec<(u32, usize, usize)> =
        COMPONENTS.into_iter().filter(|&(bit, ..)| enabled & (1 << bit) != 0).collect();
    let packed_end = XSAVE_HEADER_END + on.iter().map(|&(_, size, _)| size).sum::<usize>();
    let intel_end = on.iter().map(|&(_, size, offset)| offset + size).max().unwrap_or(XSAVE_HEADER_END);
    let mut offsets = HashMap::new();
    if x.len() >= intel_end {
        offsets.extend(on.iter().map(|&(bit, _, offset)| (bit, offset)));
    } else if x.len() == packed_end {
        let mut at = XSAVE_HEADER_END;
        for &(bit, size, _) in &on {
            offsets.insert(bit, at);
            at += size;
        }
    }
    let component = |bit: u32| {
        let &(_, size, _) = on.iter().find(|c| c.0 == bit)?;
        let &offset = offsets.get(&bit)?;
        x.get(offset..offset + size)
    };
    Some(pb::UserX86XsaveEntry {
        xstate_bv,
        ymmh_space: component(2).map(words32).unwrap_or_default(),
        opmask_reg: component(5).map(words64).unwrap_or_default(),
        zmm_upper: component(6).map(words64).unwrap_or_default(),
        hi16_zmm: component(7).map(words64).unwrap_or_default(),
        pkru: component(9).map(words32).unwrap_or_default(),
    })
}

/// The three GDT TLS slots of a 64-bit thread, unused (it keeps its TLS in `fs_base`).
fn gen_tls() -> Vec<pb::UserDescT> {
    (12..15)
        .map(|entry_number| pb::UserDescT {
            entry_number,
            base_addr: 0,
            limit: 0,
            seg_32bit: false,
            contents_h: false,
            contents_l: false,
            read_exec_only: true,
            limit_in_pages: false,
            seg_not_present: true,
            usable: false,
        })
        .collect()
}

/// The resource limits, by `RLIMIT_*` number from 0 as CRIU reads them; none (the
/// process keeps those criu runs with) where the snapshot lacks one of them (a snapshot
/// from before they were recorded).
fn gen_rlimits(limits: &[ResourceLimit]) -> pb::TaskRlimitsEntry {
    let in_order = limits.iter().enumerate().all(|(i, l)| l.resource as usize == i);
    let rlimits = match in_order {
        true => limits.iter().map(|l| pb::RlimitEntry { cur: l.soft, max: l.hard }).collect(),
        false => Vec::new(),
    };
    pb::TaskRlimitsEntry { rlimits }
}

/// The interval timers the snapshot records as running, with the time they had left;
/// the others off.
fn gen_timers(timers: &Timers) -> pb::TaskTimersEntry {
    let entry = |kind: ItimerKind| {
        let running = timers.itimers.iter().flatten().find(|t| t.kind == kind);
        let (value, interval) = running.map_or((0, 0), |t| (t.value_us, t.interval_us));
        pb::ItimerEntry {
            isec: interval / 1_000_000,
            iusec: interval % 1_000_000,
            vsec: value / 1_000_000,
            vusec: value % 1_000_000,
        }
    };
    pb::TaskTimersEntry {
        real: entry(ItimerKind::Real),
        virt: entry(ItimerKind::Virtual),
        prof: entry(ItimerKind::Prof),
    }
}

/// Dispositions of signals 1..=64 but `SIGKILL` and `SIGSTOP`, in order; those the
/// snapshot does not list are the default.
fn gen_sigactions(plan: &Plan) -> Vec<pb::SaEntry> {
    (1..=SIGMAX)
        .filter(|&sig| sig != SIGKILL && sig != SIGSTOP)
        .map(|sig| {
            let a = plan.meta.signals.iter().find(|a| a.signo == sig);
            pb::SaEntry {
                sigaction: a.map_or(0, |a| a.handler),
                flags: a.map_or(0, |a| a.flags),
                restorer: a.map_or(0, |a| a.restorer),
                mask: a.map_or(0, |a| a.mask),
                compat_sigaction: Some(false),
            }
        })
        .collect()
}

/// A thread's credentials: those its snapshot recorded, which the store's owners have
/// ([`SnapshotSource::credentials_of`](sdt_store::SnapshotSource::credentials_of); for a
/// snapshot from before they were recorded, its real user and group everywhere, every
/// capability for root and none for anyone else). Capability sets are two words, the low one first. CRIU's
/// image has no ambient set; `no_new_privs` is written only when set (CRIU 3.17's `crit`
/// does not know the field).
fn gen_creds(c: &Credentials) -> pb::CredsEntry {
    let words = |mask: u64| vec![mask as u32, (mask >> 32) as u32];
    pb::CredsEntry {
        uid: c.uids.real,
        gid: c.gids.real,
        euid: c.uids.effective,
        egid: c.gids.effective,
        suid: c.uids.saved,
        sgid: c.gids.saved,
        fsuid: c.uids.fs,
        fsgid: c.gids.fs,
        cap_inh: words(c.caps.inheritable),
        cap_prm: words(c.caps.permitted),
        cap_eff: words(c.caps.effective),
        cap_bnd: words(c.caps.bounding),
        secbits: 0,
        groups: c.groups.clone(),
        no_new_privs: c.no_new_privs.then_some(1),
    }
}

/// `mm-<pid>.img`: where the program's parts are, the auxiliary vector, every vma.
pub(crate) fn gen_mm(plan: &Plan) -> Image {
    let l = &plan.meta.layout;
    // The vector up to and including its AT_NULL pair, as CRIU saves it.
    let mut auxv = words64(&plan.meta.auxv[..plan.meta.auxv.len() / 8 * 8]);
    if let Some(end) = auxv.chunks(2).position(|pair| pair[0] == 0) {
        auxv.truncate(end * 2 + 2);
    }
    let entry = pb::MmEntry {
        mm_start_code: l.start_code,
        mm_end_code: l.end_code,
        mm_start_data: l.start_data,
        mm_end_data: l.end_data,
        mm_start_stack: l.start_stack,
        mm_start_brk: l.start_brk,
        mm_brk: l.brk,
        mm_arg_start: l.arg_start,
        mm_arg_end: l.arg_end,
        mm_env_start: l.env_start,
        mm_env_end: l.env_end,
        exe_file_id: plan.exe_file_id,
        mm_saved_auxv: auxv,
        vmas: plan.vmas.clone(),
        dumpable: Some(1),
    };
    Image::with(ImageKind::Mm(plan.pid), [&entry])
}

/// `pagemap-<pid>.img`: the pages image's id, then one entry per run of pages, in the
/// order `pages-1.img` holds them.
pub(crate) fn gen_pagemap(plan: &Plan) -> Image {
    let mut image = Image::new(ImageKind::Pagemap(plan.pid));
    image.push(&pb::PagemapHead { pages_id: PAGES_ID });
    for run in &plan.runs {
        image.push(&pb::PagemapEntry {
            vaddr: run.start,
            nr_pages: u32::try_from(run.pages).expect("a run of more than 2^32 pages"),
            in_parent: None,
            flags: Some(PE_PRESENT),
        });
    }
    image
}

/// `pagemap-shmem-<id>.img`: the pages image of shared memory object `shmem`, then one
/// entry per run, at its offset in the object.
pub(crate) fn gen_shmem_pagemap(shmem: &Shmem) -> Image {
    let mut image = Image::new(ImageKind::ShmemPagemap(shmem.id));
    image.push(&pb::PagemapHead { pages_id: shmem.pages_id });
    for (offset, pages) in shmem.pieces() {
        image.push(&pb::PagemapEntry {
            vaddr: offset,
            nr_pages: u32::try_from(pages).expect("a run of more than 2^32 pages"),
            in_parent: None,
            flags: Some(PE_PRESENT),
        });
    }
    image
}

/// `memfd.img`: each memfd the images open.
pub(crate) fn gen_memfd_inodes(plan: &Plan) -> Image {
    Image::with(ImageKind::MemfdInode, plan.memfds.iter().map(|(entry, _)| entry))
}

/// `files.img`: every file object, by id.
pub(crate) fn gen_files(plan: &Plan) -> Image {
    Image::with(ImageKind::Files, &plan.files)
}

/// `fdinfo-<files_id>.img`: each descriptor and the file object it holds.
pub(crate) fn gen_fdinfo(plan: &Plan) -> Image {
    Image::with(ImageKind::Fdinfo(TASK_OBJECTS_ID), &plan.fds)
}

/// Thread `tid`'s nice value and policy as its core image holds them: the recorded ones
/// but a real-time policy, whose priority the images do not hold (other, nice 0 where
/// none was recorded).
fn scheduling(plan: &Plan, tid: i32) -> (i32, u32) {
    match plan.meta.process.scheduling.iter().find(|s| s.tid == tid) {
        Some(s) if !s.is_realtime() => (s.nice, s.policy as u32),
        Some(s) => (s.nice, 0),
        None => (0, 0),
    }
}

/// `fs-<pid>.img`.
pub(crate) fn gen_fs(plan: &Plan) -> Image {
    Image::with(ImageKind::Fs(plan.pid), [&fs_entry(plan)])
}

/// The working and root directories and the umask.
fn fs_entry(plan: &Plan) -> pb::FsEntry {
    let umask = plan.meta.process.umask.unwrap_or(UMASK);
    pb::FsEntry { cwd_id: plan.cwd_id, root_id: plan.root_id, umask: Some(umask) }
}

fn words32(bytes: &[u8]) -> Vec<u32> {
    bytes.chunks_exact(4).map(|w| u32::from_le_bytes(w.try_into().unwrap())).collect()
}

fn words64(bytes: &[u8]) -> Vec<u64> {
    bytes.chunks_exact(8).map(|w| u64::from_le_bytes(w.try_into().unwrap())).collect()
}

#[cfg(test)]
mod tests {
    use sdt_store::{Itimer, PosixTimer};

    use super::*;
    use crate::fake;

    /// An XSAVE area of `len` bytes whose features are `xcr0`, with byte `i` of each
    /// component at `offsets` set to `bit + i`.
    fn area(len: usize, xcr0: u64, offsets: &[(u32, usize, usize)]) -> Vec<u8> {
        let mut x = vec![0u8; len];
        x[464..472].copy_from_slice(&xcr0.to_le_bytes());
        x[512..520].copy_from_slice(&(xcr0 & !0x4).to_le_bytes()); // YMM in its init state
        for &(bit, offset, size) in offsets {
            for i in 0..size {
                x[offset + i] = (bit as usize + i) as u8;
            }
        }
        x
    }

    fn bytes32(words: &[u32]) -> Vec<u8> {
        words.iter().flat_map(|w| w.to_le_bytes()).collect()
    }

    fn bytes64(words: &[u64]) -> Vec<u8> {
        words.iter().flat_map(|w| w.to_le_bytes()).collect()
    }

    fn filled(bit: u32, size: usize) -> Vec<u8> {
        (0..size).map(|i| (bit as usize + i) as u8).collect()
    }

    #[test]
    fn xsave_components_at_intel_offsets() {
        // QEMU's `max` CPU: AVX and PKRU, PKRU at 2688.
        let x = area(2696, 0x207, &[(2, 576, 256), (9, 2688, 8)]);
        let e = gen_xsave(&x).unwrap();
        assert_eq!(e.xstate_bv, 0x203);
        assert_eq!(bytes32(&e.ymmh_space), filled(2, 256));
        assert_eq!(bytes32(&e.pkru), filled(9, 8));
        assert!(e.opmask_reg.is_empty() && e.zmm_upper.is_empty() && e.hi16_zmm.is_empty());
    }

    #[test]
    fn xsave_components_packed_as_on_amd() {
        // AVX-512 without MPX, packed: opmask right after YMM.
        let x = area(2432, 0xe7, &[(2, 576, 256), (5, 832, 64), (6, 896, 512), (7, 1408, 1024)]);
        let e = gen_xsave(&x).unwrap();
        assert_eq!(bytes32(&e.ymmh_space), filled(2, 256));
        assert_eq!(bytes64(&e.opmask_reg), filled(5, 64));
        assert_eq!(bytes64(&e.zmm_upper), filled(6, 512));
        assert_eq!(bytes64(&e.hi16_zmm), filled(7, 1024));
        assert!(e.pkru.is_empty());
    }

    /// The creds entry of thread `tid`.
    fn creds_of(plan: &Plan, tid: i32) -> pb::CredsEntry {
        gen_creds(&plan.threads.iter().find(|t| t.state.tid == tid).unwrap().creds)
    }

    #[test]
    fn each_thread_carries_its_recorded_credentials() {
        let source = crate::fake::sample();
        let plan = Plan::new(&source, None).unwrap();
        let main = creds_of(&plan, fake::PID);
        assert_eq!((main.uid, main.euid, main.suid, main.fsuid), (1000, 1000, 1000, 1000));
        assert_eq!((main.gid, main.egid, main.sgid, main.fsgid), (1000, 1000, 1000, 1000));
        assert_eq!(main.groups, [24, 1000]);
        assert_eq!(
            (main.cap_prm.as_slice(), main.cap_eff.as_slice()),
            ([1 << 10, 0].as_slice(), [0, 0].as_slice())
        );
        assert_eq!(main.cap_bnd, [u32::MAX, 0x1ff]);
        assert_eq!(main.no_new_privs, None);
        let other = creds_of(&plan, fake::BREAKING);
        assert_eq!((other.uid, other.euid, other.suid, other.fsuid), (1000, 1001, 1000, 1001));
        assert_eq!(other.no_new_privs, None);

        let mut confined = crate::fake::sample();
        confined.meta.process.thread_creds[0].creds.no_new_privs = true;
        let plan = Plan::new(&confined, None).unwrap();
        assert_eq!(creds_of(&plan, fake::BREAKING).no_new_privs, Some(1));
        assert_eq!(creds_of(&plan, fake::PID).no_new_privs, None);

        // A snapshot from before credentials were recorded: its real user everywhere.
        let mut old = crate::fake::sample();
        old.meta.process.creds = None;
        old.meta.process.thread_creds.clear();
        let plan = Plan::new(&old, None).unwrap();
        let creds = creds_of(&plan, fake::BREAKING);
        assert_eq!((creds.euid, creds.fsgid, creds.cap_prm.as_slice()), (1000, 1000, [0, 0].as_slice()));
        assert_eq!(creds.cap_bnd, [u32::MAX, 0x1ff]);
    }

    #[test]
    fn recorded_interval_timers_are_armed_with_their_time_left() {
        let mut source = crate::fake::sample();
        source.meta.timers.itimers =
            Some(vec![Itimer { kind: ItimerKind::Prof, value_us: 2_500_000, interval_us: 10_000 }]);
        source.meta.timers.posix =
            vec![PosixTimer { id: 3, signo: 10, notify: "signal/pid.1".into(), clock: 1 }];
        let plan = Plan::new(&source, None).unwrap();
        let timers = gen_timers(&plan.meta.timers);
        assert_eq!(
            (timers.prof.vsec, timers.prof.vusec, timers.prof.isec, timers.prof.iusec),
            (2, 500_000, 0, 10_000)
        );
        let off = pb::ItimerEntry { isec: 0, iusec: 0, vsec: 0, vusec: 0 };
        assert_eq!((timers.real, timers.virt), (off, off));
        assert!(
            plan.notes.iter().any(|n| n.starts_with("POSIX timers left out (timer 3: SIGUSR1)")),
            "{:?}",
            plan.notes
        );
    }

    #[test]
    fn threads_keep_their_nice_value_and_policy_but_a_real_time_one() {
        let mut source = crate::fake::sample();
        let plan = Plan::new(&source, None).unwrap();
        assert_eq!((scheduling(&plan, fake::BREAKING), scheduling(&plan, fake::PID)), ((7, 3), (0, 0)));
        source.meta.process.scheduling[0].policy = 1;
        let plan = Plan::new(&source, None).unwrap();
        assert_eq!(scheduling(&plan, fake::BREAKING), (7, 0));
    }

    #[test]
    fn the_umask_is_the_programs_or_022_where_unrecorded() {
        let mut source = crate::fake::sample();
        assert_eq!(fs_entry(&Plan::new(&source, None).unwrap()).umask, Some(0o027));
        source.meta.process.umask = None;
        assert_eq!(fs_entry(&Plan::new(&source, None).unwrap()).umask, Some(0o022));
    }

    #[test]
    fn resource_limits_are_written_in_order_or_not_at_all() {
        let limit = |resource, soft, hard| ResourceLimit { resource, soft, hard };
        let all: Vec<ResourceLimit> = (0..16).map(|r| limit(r, u64::from(r), u64::MAX)).collect();
        let entry = gen_rlimits(&all);
        assert_eq!(entry.rlimits.len(), 16);
        assert_eq!((entry.rlimits[7].cur, entry.rlimits[7].max), (7, u64::MAX));
        let gap = [limit(0, 1, 1), limit(2, 1, 1)];
        assert!(gen_rlimits(&gap).rlimits.is_empty());
        assert!(gen_rlimits(&[]).rlimits.is_empty());
    }

    #[test]
    fn no_xsave_without_an_area_and_nothing_from_an_unknown_layout() {
        assert_eq!(gen_xsave(&[]), None);
        assert_eq!(gen_xsave(&[0; 512]), None);
        let e = gen_xsave(&area(1000, 0x207, &[])).unwrap();
        assert!(e.ymmh_space.is_empty() && e.pkru.is_empty());
    }
}
