//! The restored process's threads: created with their snapshot ids, given their TLS
//! bookkeeping (the kernel's clear-tid address, rseq area, signal stack, name), then their registers,
//! FPU/vector state and signal masks.
//!
//! A thread stopped inside a system call was captured with `orig_rax` = the call and
//! `rax` = `-ERESTART…`; its registers are set back as they were, and the kernel's
//! signal-return path restarts the call when the thread resumes, exactly as it would
//! have. The one the kernel cannot restart in a new thread (`-ERESTART_RESTARTBLOCK`,
//! an interrupted `nanosleep`) starts its call again from the beginning instead.

use sdt_store::{SignalAction, Snapshot, SnapshotMeta, ThreadRunState, ThreadState};
use sdt_sys::ptrace::{self, Regset};
use sdt_target::{ERESTART_RESTARTBLOCK, ERESTARTNOINTR};

use crate::remote::Remote;
use crate::{Error, RestoredThread};

/// `struct kernel_sigaction` of each signal 1..=64 as the stub sets them.
pub(crate) fn actions(signals: &[SignalAction]) -> [Option<[u64; 4]>; 64] {
    let mut out = [None; 64];
    for a in signals {
        if let Some(slot) = usize::try_from(a.signo - 1).ok().and_then(|i| out.get_mut(i)) {
            *slot = Some([a.handler, a.flags, a.restorer, a.mask]);
        }
    }
    out
}

/// Creates every thread of the snapshot but the main one (which is the stub) in the
/// stub, with its id. Returns every thread, the main one first, with its snapshot state.
/// Threads that were already exiting are left out.
pub(crate) fn create<'m>(
    remote: &mut Remote,
    meta: &'m SnapshotMeta,
) -> Result<Vec<(RestoredThread, &'m ThreadState)>, Error> {
    let pid = meta.process.pid;
    let main = meta.threads.iter().find(|t| t.tid == pid).expect("plan::threads checked the main thread");
    let mut out = vec![(RestoredThread { host: remote.leader, tid: pid }, main)];
    for t in meta.threads.iter().filter(|t| t.tid != pid && t.state == ThreadRunState::Running) {
        let set_tid = t.tid.to_le_bytes();
        let set_tid_at = remote.put(256, &set_tid)?;
        let flags = libc::CLONE_VM
            | libc::CLONE_FS
            | libc::CLONE_FILES
            | libc::CLONE_SIGHAND
            | libc::CLONE_THREAD
            | libc::CLONE_SYSVSEM;
        // struct clone_args: flags, pidfd, child_tid, parent_tid, exit_signal, stack,
        // stack_size, tls, set_tid, set_tid_size, cgroup. The new thread stops before it
        // runs a user instruction, so it needs no stack of its own yet.
        let fields = [flags as u64, 0, 0, 0, 0, 0, 0, 0, set_tid_at, 1, 0];
        let args: Vec<u8> = fields.iter().flat_map(|f| f.to_le_bytes()).collect();
        let args_at = remote.put(0, &args)?;
        remote.call(
            &format!("creating thread {}", t.tid),
            libc::SYS_clone3,
            &[args_at, args.len() as u64],
        )?;
        let host = remote.cloned.pop().ok_or_else(|| Error::Call {
            what: format!("creating thread {}: no clone event", t.tid),
            source: std::io::Error::from_raw_os_error(libc::ESRCH),
        })?;
        // Its first stop, before any instruction of its own.
        crate::wait_stopped(host)?;
        out.push((RestoredThread { host, tid: t.tid }, t));
    }
    Ok(out)
}

/// What each thread sets for itself: the address the kernel clears when it exits (glibc's
/// `pthread_join` waits on it), its rseq area, its robust-futex list, its alternate signal
/// stack, its name.
pub(crate) fn set_up(
    remote: &mut Remote,
    snap: &Snapshot,
    threads: &[(RestoredThread, &ThreadState)],
) -> Result<(), Error> {
    let tid_offset = sdt_target::tid_word_offset(snap.meta(), &|addr, buf| snap.read(addr, buf).is_ok());
    if tid_offset.is_none() {
        log::warn!("no thread-id word found in the threads' TLS: joining a restored thread may hang");
    }
    for (t, state) in threads {
        let word = tid_offset.zip(state.regs().ok().map(|r| r.fs_base).filter(|&b| b != 0));
        if let Some((off, fs_base)) = word.filter(|(off, base)| base.checked_add(*off).is_some()) {
            remote.call_on(
                t.host,
                &format!("setting thread {}'s clear-tid address", t.tid),
                libc::SYS_set_tid_address,
                &[fs_base + off],
            )?;
        }
        if let Some(rseq) = state.rseq {
            let rc = remote.raw_on(
                t.host,
                libc::SYS_rseq,
                &[rseq.addr, u64::from(rseq.len), 0, u64::from(rseq.sig)],
            )?;
            if rc < 0 {
                log::warn!("thread {}: registering its rseq area failed (errno {})", t.tid, -rc);
            }
        }
        if let Some(list) = state.robust_list {
            remote.call_on(
                t.host,
                &format!("setting thread {}'s robust-futex list", t.tid),
                libc::SYS_set_robust_list,
                &[list.head, list.len],
            )?;
        }
        if let Some(stack) = state.altstack {
            // stack_t { ss_sp, ss_flags, ss_size }
            let mut ss = [0u8; 24];
            ss[..8].copy_from_slice(&stack.sp.to_le_bytes());
            ss[8..12].copy_from_slice(&stack.flags.to_le_bytes());
            ss[16..].copy_from_slice(&stack.size.to_le_bytes());
            let at = remote.put(0, &ss)?;
            remote.call_on(
                t.host,
                &format!("setting thread {}'s alternate signal stack", t.tid),
                libc::SYS_sigaltstack,
                &[at, 0],
            )?;
        }
        if !state.name.is_empty() {
            let mut name = state.name.as_bytes()[..state.name.len().min(15)].to_vec();
            name.push(0);
            let at = remote.put(512, &name)?;
            remote.call_on(
                t.host,
                &format!("naming thread {}", t.tid),
                libc::SYS_prctl,
                &[libc::PR_SET_NAME as u64, at],
            )?;
        }
    }
    Ok(())
}

/// Gives every thread its snapshot registers, FPU/vector state and signal mask.
pub(crate) fn set_registers(threads: &[(RestoredThread, &ThreadState)]) -> Result<(), Error> {
    for (t, state) in threads {
        let mut regs = state.regs()?;
        if (regs.orig_rax as i64) >= 0 && regs.rax as i64 == -ERESTART_RESTARTBLOCK {
            regs.rax = (-ERESTARTNOINTR) as u64;
        }
        ptrace::set_regs(t.host, &regs).map_err(Error::Sys)?;
        if state.xstate.is_empty() {
            ptrace::set_regset(t.host, Regset::Fp, &state.fpregs).map_err(Error::Sys)?;
        } else {
            ptrace::set_regset(t.host, Regset::Xstate, &state.xstate).map_err(Error::Sys)?;
        }
        ptrace::set_sigmask(t.host, state.sigmask).map_err(Error::Sys)?;
    }
    Ok(())
}
