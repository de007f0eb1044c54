//! The program's resource limits, set again by an injected `prlimit64` once its
//! process is laid out: a program that raised its stack or descriptor limit keeps it.
//! A limit is never raised above the hard limit the restored process already has (the
//! restorer's): what a store records cannot give a program more than its restorer
//! could.

use sdt_store::ResourceLimit;
use sdt_sys::Tid;

use crate::Error;
use crate::remote::Remote;

/// Sets the `recorded` limits in process `pid` through `remote`, each capped at the
/// process's own hard limit; those already so are left alone.
pub(crate) fn set(remote: &mut Remote, pid: Tid, recorded: &[ResourceLimit]) -> Result<(), Error> {
    if recorded.is_empty() {
        return Ok(());
    }
    let limits = sdt_procfs::read(pid, "limits")
        .map_err(|source| Error::Call { what: format!("reading /proc/{pid}/limits"), source })?;
    let now = sdt_procfs::parse_limits(&limits);
    for (had, want) in capped(recorded, &now) {
        if want != had {
            log::warn!(
                "{} resumes at {} (soft) and {} (hard), the most the restore may set: the program had {} and {}",
                want.name(),
                shown(want.soft),
                shown(want.hard),
                shown(had.soft),
                shown(had.hard),
            );
        }
        let bytes: Vec<u8> = [want.soft, want.hard].iter().flat_map(|v| v.to_le_bytes()).collect();
        let at = remote.put(0, &bytes)?;
        remote.call(
            &format!("setting {} again", want.name()),
            libc::SYS_prlimit64,
            &[0, u64::from(want.resource), at, 0],
        )?;
    }
    Ok(())
}

/// The limits of `recorded` to set where the process has `now`, each beside the one
/// recorded: each hard limit at most the current one, each soft limit at most its hard
/// one; those equal to `now` left out.
fn capped(recorded: &[ResourceLimit], now: &[ResourceLimit]) -> Vec<(ResourceLimit, ResourceLimit)> {
    recorded
        .iter()
        .filter_map(|&had| {
            let current = now.iter().find(|n| n.resource == had.resource)?;
            let hard = had.hard.min(current.hard);
            let want = ResourceLimit { resource: had.resource, soft: had.soft.min(hard), hard };
            (want != *current).then_some((had, want))
        })
        .collect()
}

/// A limit for the user: `unlimited` or its number.
fn shown(limit: u64) -> String {
    match limit {
        sdt_store::RLIM_INFINITY => "unlimited".into(),
        n => n.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use sdt_store::RLIM_INFINITY;

    use super::*;

    fn limit(resource: u32, soft: u64, hard: u64) -> ResourceLimit {
        ResourceLimit { resource, soft, hard }
    }

    #[test]
    fn limits_are_set_again_never_above_the_current_hard_ones() {
        let now = [limit(3, 8 << 20, RLIM_INFINITY), limit(7, 1024, 4096), limit(4, 0, RLIM_INFINITY)];
        let recorded = [
            // Raised within the hard limit: set.
            limit(3, RLIM_INFINITY, RLIM_INFINITY),
            // Beyond the hard limit: capped at it.
            limit(7, 65536, 65536),
            // As it is: left alone.
            limit(4, 0, RLIM_INFINITY),
        ];
        let wanted: Vec<ResourceLimit> = capped(&recorded, &now).into_iter().map(|(_, want)| want).collect();
        assert_eq!(wanted, [limit(3, RLIM_INFINITY, RLIM_INFINITY), limit(7, 4096, 4096)]);
        // Lowered: set as it was.
        assert_eq!(capped(&[limit(7, 256, 512)], &now), [(limit(7, 256, 512), limit(7, 256, 512))]);
    }
}
