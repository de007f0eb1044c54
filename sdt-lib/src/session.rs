//! The library's view of `sdt run`: set up on the first breakpoint, read-only afterwards.

use std::sync::OnceLock;
use std::sync::atomic::Ordering;

use sdt_abi::{
    ENV_CAPTURE, ENV_TRACER, Filter, RESULT_FILTERED, RESULT_OFF, STATE_OFF, Site, TrapRecord, state_for,
};

use crate::{sdt_state, sites, trap};

/// Running under `sdt run`: the capture filter the tracer handed over.
pub(crate) struct Session {
    filter: Filter,
}

static SESSION: OnceLock<Option<Session>> = OnceLock::new();

/// The session, set up on first use; `None` when not under `sdt run`.
fn get() -> Option<&'static Session> {
    SESSION
        .get_or_init(|| {
            let session = start();
            let state = session.as_ref().map_or(STATE_OFF, |s| state_for(s.filter.max_level));
            sdt_state.store(state, Ordering::Release);
            session
        })
        .as_ref()
}

fn start() -> Option<Session> {
    let tracer: i32 = std::env::var(ENV_TRACER).ok()?.parse().ok()?;
    // An inherited environment is not enough: only the process `sdt run` traces may trap.
    if tracer_pid() != Some(tracer) {
        return None;
    }
    let wire = std::env::var(ENV_CAPTURE).unwrap_or_default();
    let filter = match Filter::decode(&wire) {
        Ok(filter) => filter,
        Err(e) => {
            eprintln!("sdt: {e}; breakpoints are off (is libsdt older or newer than sdt?)");
            return None;
        }
    };
    // A forked child is not traced: its breakpoints must not trap.
    #[allow(unsafe_code)]
    // SAFETY: registers a plain function that only stores to an atomic.
    unsafe {
        libc::pthread_atfork(None, None, Some(turn_off_in_child));
    }
    Some(Session { filter })
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
/// ([`sdt_abi::RESULT_OFF`] when not under `sdt run`).
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
    let Some(Session { filter }) = get() else { return Some(RESULT_OFF) };
    if !filter.matches_numbers(level, class, id) {
        return Some(RESULT_FILTERED);
    }
    let site = Site { level, class, id, attrs: attrs() };
    if !filter.matches_attrs(site.attrs) {
        return Some(RESULT_FILTERED);
    }
    let entry = sites::lookup(level, class, id);
    let hit = entry.map_or(0, |e| e.hits.fetch_add(1, Ordering::Relaxed) + 1);
    if hit != 0 && !filter.matches_hit(hit) {
        return Some(RESULT_FILTERED);
    }
    if multiple_mark == 0 && entry.is_some_and(|e| e.taken.swap(true, Ordering::AcqRel)) {
        return Some(RESULT_FILTERED);
    }
    trap::arm(record, &site, multiple_mark, hit);
    None
}
