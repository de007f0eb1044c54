//! The built-in restorer (`sdt-restore`) as the capture takes it: a
//! [`sdt_daemon::Restorer`].

use std::error::Error as StdError;

use sdt_daemon::{RestoredProcess, Restorer};
use sdt_restore::Privileges;
use sdt_store::{BeyondOwner, Run, Snapshot, Trust};

/// How a stored snapshot's process is recreated: extra environment variables and whose
/// credentials. A capturing resume takes [`Restore::recorded`].
#[derive(Clone, Debug)]
pub struct Restore {
    /// Environment variables (name, value) to add to or replace in the program's.
    pub env: Vec<(String, String)>,
    /// Whose credentials the program resumes with.
    pub privileges: Privileges,
    /// What becomes of recorded credentials beyond what the store's owner has.
    pub beyond_owner: BeyondOwner,
    /// Resume a program that held POSIX timers without them (else refused).
    pub without_posix_timers: bool,
}

impl Restore {
    /// With the variables of `env` added, and the credentials the snapshot recorded
    /// (those beyond what the store's owner has are refused).
    pub fn recorded(env: Vec<(String, String)>) -> Restore {
        Restore {
            env,
            privileges: Privileges::Recorded,
            beyond_owner: BeyondOwner::Refuse,
            without_posix_timers: false,
        }
    }
}

impl Restorer for Restore {
    fn restore(
        &self,
        run: &Run,
        snap: &Snapshot,
        ptrace_options: u32,
    ) -> Result<RestoredProcess, Box<dyn StdError + Send + Sync>> {
        let options = sdt_restore::Options {
            ptrace_options,
            env: &self.env,
            privileges: self.privileges,
            beyond_owner: self.beyond_owner,
            without_posix_timers: self.without_posix_timers,
        };
        let restored = sdt_restore::restore(snap, &Trust::of_run(run), &options)?;
        Ok(RestoredProcess {
            pid: restored.pid,
            init: restored.init,
            threads: restored.threads.iter().map(|t| t.host).collect(),
            bytes_written: restored.bytes_written,
            user_namespace: restored.user_namespace,
        })
    }
}
