//! The program's timers. Its interval timers (`setitimer`, `alarm`) are set again with
//! the time each had left, just before its threads get their registers; a program
//! waiting for its alarm gets it. POSIX timers (`timer_create`) are not made again (the
//! snapshot holds neither the order of their ids nor the time they had left): a snapshot
//! with any is refused, naming them, unless the user resumes without them.

use sdt_store::{PosixTimer, SnapshotMeta, Timers};

use crate::Error;
use crate::remote::Remote;

/// Refuses a snapshot whose program held POSIX timers, unless `without` them.
pub(crate) fn check(meta: &SnapshotMeta, without: bool) -> Result<(), Error> {
    let posix = &meta.timers.posix;
    if posix.is_empty() {
        return Ok(());
    }
    let names: Vec<String> = posix.iter().map(PosixTimer::describe).collect();
    if without {
        log::warn!("--without-timers: the program resumes without its POSIX timers ({})", names.join("; "));
        return Ok(());
    }
    Err(Error::PosixTimers { names: names.join("; ") })
}

/// Sets the interval timers of `timers` in the process, through `remote`.
pub(crate) fn set(remote: &mut Remote, timers: &Timers) -> Result<(), Error> {
    for t in timers.itimers.iter().flatten() {
        let timeval = |us: u64| [(us / 1_000_000) as i64, (us % 1_000_000) as i64];
        let [isec, iusec] = timeval(t.interval_us);
        let [vsec, vusec] = timeval(t.value_us);
        let itimerval: Vec<u8> = [isec, iusec, vsec, vusec].iter().flat_map(|v| v.to_le_bytes()).collect();
        let at = remote.put(0, &itimerval)?;
        remote.call(
            &format!("setting {} again", t.kind.name()),
            libc::SYS_setitimer,
            &[t.kind.which() as u64, at, 0],
        )?;
    }
    Ok(())
}
