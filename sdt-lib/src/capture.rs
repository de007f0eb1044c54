//! The library's view of `sdt run`: set up on the first breakpoint, and again whenever a
//! tracer asks (a restored program adopting a new filter).

use std::sync::atomic::{AtomicI32, AtomicPtr, AtomicU8, Ordering};
use std::time::Duration;

use sdt_abi::{
    ENV_CAPTURE, ENV_TRACER, Filter, RECONFIG_SIZE, RESULT_DECLINED, RESULT_FILTERED, RESULT_OFF, STATE_OFF,
    STATE_UNINIT, Site, TrapRecord, class_mask_for, id_mask_for, state_for,
};

use crate::{kmod_fd, sdt_classes, sdt_ids, sdt_state, sites, trap};

/// Running under `sdt run`: the capture filter the tracer handed over.
pub(crate) struct Capture {
    filter: Filter,
}

/// The current capture; null before the first breakpoint looked, or when off. Captures
/// are never freed (a replaced one may still be in use on another thread).
static CAPTURE: AtomicPtr<Capture> = AtomicPtr::new(std::ptr::null_mut());

/// Serialises setting up: only the first breakpoint after `sdt_state` became
/// `STATE_UNINIT` does it. Holds the pid of the process one of whose threads sets up (0
/// when none does): a child forked meanwhile inherits the word but not the thread that
/// would clear it, and tells by its own pid that it must not wait.
static SETUP_OWNER: AtomicI32 = AtomicI32::new(0);

/// Holding [`SETUP_OWNER`]; dropping it lets the next thread set up.
struct SetupTurn;

impl SetupTurn {
    /// Waits for this process's turn to set up; `None` in a child forked while a thread of
    /// its parent was setting up (such a child is neither traced nor registered).
    fn take() -> Option<SetupTurn> {
        let me = std::process::id() as i32;
        loop {
            match SETUP_OWNER.compare_exchange(0, me, Ordering::Acquire, Ordering::Relaxed) {
                Ok(_) => return Some(SetupTurn),
                Err(owner) if owner != me => return None,
                // Another thread sets up: briefly, unless a capture stopped it there.
                Err(_) => std::thread::sleep(Duration::from_micros(20)),
            }
        }
    }
}

impl Drop for SetupTurn {
    fn drop(&mut self) {
        SETUP_OWNER.store(0, Ordering::Release);
    }
}

/// `sdt_reconfig` (see [`sdt_abi::SYMBOL_RECONFIG`]): a new filter from a tracer that took
/// the program over, little-endian `u32` length then the wire form.
#[allow(unsafe_code)]
#[unsafe(no_mangle)]
#[allow(non_upper_case_globals)]
pub static sdt_reconfig: [AtomicU8; RECONFIG_SIZE] = [const { AtomicU8::new(0) }; RECONFIG_SIZE];

/// The capture; `None` when not under `sdt run`.
fn get() -> Option<&'static Capture> {
    if sdt_state.load(Ordering::Acquire) == STATE_UNINIT {
        return set_up();
    }
    let capture = CAPTURE.load(Ordering::Acquire);
    #[allow(unsafe_code)]
    // SAFETY: a non-null pointer came from `Box::leak` in `set_up` and is never freed.
    (!capture.is_null()).then(|| unsafe { &*capture })
}

/// Looks for a filter, the first time in the environment, later in `sdt_reconfig`, and
/// publishes the capture and the state word.
#[cold]
fn set_up() -> Option<&'static Capture> {
    // In a forked child this breakpoint is off; the state word is left alone, since a
    // restored copy of a process stopped while setting up sees its old pid there too,
    // until the thread that was setting up goes on and finishes.
    let _one_at_a_time = SetupTurn::take()?;
    if sdt_state.load(Ordering::Acquire) == STATE_UNINIT {
        let capture = match take_reconfig() {
            Some(filter) => {
                // A tracer took the program over (a restored one): breakpoints trap for it.
                kmod_fd::use_device(-1);
                Some(Capture { filter })
            }
            None if CAPTURE.load(Ordering::Acquire).is_null() => start(),
            None => None,
        };
        if let Some(capture) = capture {
            let capture = Box::leak(Box::new(capture));
            CAPTURE.store(capture, Ordering::Release);
            publish(&capture.filter);
        } else if CAPTURE.load(Ordering::Acquire).is_null() {
            sdt_state.store(STATE_OFF, Ordering::Release);
        } else {
            // Asked to look again, with nothing new: go on as before.
            let current = CAPTURE.load(Ordering::Acquire);
            #[allow(unsafe_code)]
            // SAFETY: non-null, leaked by an earlier `set_up`, never freed.
            publish(unsafe { &(*current).filter });
        }
    }
    let capture = CAPTURE.load(Ordering::Acquire);
    #[allow(unsafe_code)]
    // SAFETY: a non-null pointer came from `Box::leak` above and is never freed.
    (!capture.is_null()).then(|| unsafe { &*capture })
}

/// Publishes `filter` to `SetBreakpoint`'s inline checks: the class and id masks, then,
/// with release ordering, the state word that makes them count.
fn publish(filter: &Filter) {
    sdt_classes.store(class_mask_for(filter), Ordering::Relaxed);
    for (word, bits) in sdt_ids.iter().zip(id_mask_for(filter)) {
        word.store(bits, Ordering::Relaxed);
    }
    sdt_state.store(state_for(filter), Ordering::Release);
}

/// A filter a tracer wrote into `sdt_reconfig` (which is then emptied). The tracer wrote
/// it while the program was stopped, so it is whole.
fn take_reconfig() -> Option<Filter> {
    let byte = |i: usize| sdt_reconfig[i].load(Ordering::Acquire);
    let len = u32::from_le_bytes([byte(0), byte(1), byte(2), byte(3)]) as usize;
    if len == 0 || len > RECONFIG_SIZE - 4 {
        return None;
    }
    let wire: Vec<u8> = (4..4 + len).map(byte).collect();
    for b in &sdt_reconfig[..4] {
        b.store(0, Ordering::Release);
    }
    match std::str::from_utf8(&wire)
        .map_err(|e| e.to_string())
        .and_then(|w| Filter::decode(w).map_err(|e| e.to_string()))
    {
        Ok(filter) => Some(filter),
        Err(e) => {
            eprintln!("sdt: the filter sdt handed over does not decode ({e}); keeping the old one");
            None
        }
    }
}

fn start() -> Option<Capture> {
    let tracer: i32 = std::env::var(ENV_TRACER).ok()?.parse().ok()?;
    // An inherited environment is not enough: only the process `sdt run` traces, or
    // registered with the kernel module, may stop.
    let device = if tracer_pid() == Some(tracer) { -1 } else { kmod_fd::open_registered(tracer)? };
    let wire = std::env::var(ENV_CAPTURE).unwrap_or_default();
    let filter = match Filter::decode(&wire) {
        Ok(filter) => filter,
        Err(e) => {
            eprintln!("sdt: {e}; breakpoints are off (is libsdt older or newer than sdt?)");
            kmod_fd::close(device);
            return None;
        }
    };
    // A forked child is neither traced nor registered: its breakpoints must not stop.
    #[allow(unsafe_code)]
    // SAFETY: registers a plain function that only stores to an atomic.
    unsafe {
        libc::pthread_atfork(None, None, Some(turn_off_in_child));
    }
    kmod_fd::use_device(device);
    Some(Capture { filter })
}

extern "C" fn turn_off_in_child() {
    sdt_state.store(STATE_OFF, Ordering::Relaxed);
}

/// `TracerPid` from `/proc/self/status`.
fn tracer_pid() -> Option<i32> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status.lines().find_map(|line| line.strip_prefix("TracerPid:")).and_then(|v| v.trim().parse().ok())
}

/// Checks a breakpoint against the capture filter. If it passes, fills `record` and
/// returns `None`: the caller must stop with it. Otherwise returns the result
/// ([`sdt_abi::RESULT_OFF`] when not under `sdt run`, [`sdt_abi::RESULT_DECLINED`] for
/// one that passes once the tracer takes no more snapshots).
///
/// `attrs` is called only for a breakpoint whose numbers pass, so a filtered C breakpoint
/// never measures its attribute string.
///
/// # Signal Safe Methods
///
/// After the first call of the process, allocates nothing and takes no locks.
#[cold]
#[inline(never)]
pub(crate) fn arm<'a>(
    record: &mut TrapRecord,
    level: i32,
    class: i32,
    id: i32,
    multiple_mark: i32,
    attrs: impl FnOnce() -> &'a [u8],
) -> Option<i64> {
    let Some(Capture { filter }) = get() else { return Some(RESULT_OFF) };
    // A forced breakpoint (the end of a refinement) passes every condition.
    let forced = filter.forces(level, class, id);
    if !forced && !filter.matches_numbers(level, class, id) {
        return Some(RESULT_FILTERED);
    }
    let site = Site { level, class, id, attrs: attrs() };
    if !forced && !filter.matches_attrs(site.attrs) {
        return Some(RESULT_FILTERED);
    }
    let entry = sites::lookup(level, class, id);
    let hit = entry.map_or(0, |e| e.hits.fetch_add(1, Ordering::Relaxed) + 1);
    if !forced && hit != 0 && !filter.matches_hit(hit) {
        return Some(RESULT_FILTERED);
    }
    if multiple_mark == 0 && entry.is_some_and(|e| e.taken.swap(true, Ordering::AcqRel)) {
        return Some(RESULT_FILTERED);
    }
    // No more snapshots: the tracer would decline it, so it does not stop.
    if sdt_state.load(Ordering::Acquire) < STATE_OFF {
        return Some(RESULT_DECLINED);
    }
    trap::arm(record, &site, multiple_mark, hit);
    None
}
