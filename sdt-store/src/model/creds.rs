//! Who a thread acts as and what it may do: its user and group ids, supplementary groups,
//! capability sets, `no_new_privs` and seccomp mode. Linux keeps these per thread; the
//! capture reads them from `/proc/PID/task/TID/status`, and a restore gives every thread
//! its own back (never more than the restorer has).

use serde::{Deserialize, Serialize};

/// Every capability up to `CAP_CHECKPOINT_RESTORE` (40), the last one Linux 5.9 to 6.x
/// define: what a root process has unless something took capabilities away.
pub const ALL_CAPS: u64 = (1 << 41) - 1;

/// The credentials of one thread, as the `Uid:` … `Seccomp:` lines of its
/// `/proc/PID/task/TID/status` give them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Credentials {
    /// User ids (`Uid:`).
    pub uids: Ids,
    /// Group ids (`Gid:`).
    pub gids: Ids,
    /// Supplementary groups (`Groups:`), ascending as the kernel lists them.
    pub groups: Vec<u32>,
    /// Capability sets.
    pub caps: Capabilities,
    /// `prctl(PR_SET_NO_NEW_PRIVS)` was set (`NoNewPrivs:`).
    pub no_new_privs: bool,
    /// Seccomp mode (`Seccomp:`).
    pub seccomp: SeccompMode,
}

/// Real, effective, saved and filesystem ids (user or group), in the order
/// `/proc/PID/status` lists them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ids {
    /// Real id.
    pub real: u32,
    /// Effective id.
    pub effective: u32,
    /// Saved set-id.
    pub saved: u32,
    /// Filesystem id (what file access is checked against).
    pub fs: u32,
}

impl Ids {
    /// The same id in all four places.
    pub fn all(id: u32) -> Ids {
        Ids { real: id, effective: id, saved: id, fs: id }
    }

    /// The four ids, real first.
    pub fn as_array(&self) -> [u32; 4] {
        [self.real, self.effective, self.saved, self.fs]
    }
}

/// Capability sets, bit `n` for capability `n` (`CAP_CHOWN` = 0, …).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Capabilities {
    /// `CapInh:`.
    pub inheritable: u64,
    /// `CapPrm:`.
    pub permitted: u64,
    /// `CapEff:`.
    pub effective: u64,
    /// `CapBnd:`, the bounding set.
    pub bounding: u64,
    /// `CapAmb:` (0 before Linux 4.3, which has no ambient set).
    pub ambient: u64,
}

/// A thread's seccomp mode.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SeccompMode {
    /// No seccomp.
    #[default]
    Disabled,
    /// `SECCOMP_MODE_STRICT`: only `read`, `write`, `_exit` and `sigreturn`.
    Strict,
    /// `SECCOMP_MODE_FILTER`: BPF filters, which the snapshot does not hold.
    Filter,
}

/// The credentials of a thread that differ from those of the process as a whole.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadCredentials {
    /// The thread's id (in the process's pid namespace). Must be > 0.
    pub tid: i32,
    /// Its credentials.
    pub creds: Credentials,
}

impl Credentials {
    /// What a process of real user `uid` and group `gid` is taken to have had when its
    /// snapshot recorded nothing more (snapshots from before credentials were recorded):
    /// those ids everywhere, no supplementary groups, and every capability for root,
    /// none for anyone else.
    pub fn implied(uid: u32, gid: u32) -> Credentials {
        let granted = if uid == 0 { ALL_CAPS } else { 0 };
        Credentials {
            uids: Ids::all(uid),
            gids: Ids::all(gid),
            groups: Vec::new(),
            caps: Capabilities {
                inheritable: 0,
                permitted: granted,
                effective: granted,
                bounding: ALL_CAPS,
                ambient: 0,
            },
            no_new_privs: false,
            seccomp: SeccompMode::Disabled,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_has_its_own_credentials_or_the_process_s() {
        let process =
            Credentials { no_new_privs: true, groups: vec![27], ..Credentials::implied(1001, 1001) };
        let other = Credentials { no_new_privs: false, ..process.clone() };
        let info = crate::ProcessInfo {
            uid: 1001,
            gid: 1001,
            creds: Some(process.clone()),
            thread_creds: vec![ThreadCredentials { tid: 9, creds: other.clone() }],
            ..Default::default()
        };
        assert_eq!(info.credentials_of(9), other);
        assert_eq!(info.credentials_of(8), process);
        let old = crate::ProcessInfo { creds: None, thread_creds: Vec::new(), ..info };
        assert_eq!(old.credentials_of(8), Credentials::implied(1001, 1001));
    }

    #[test]
    fn what_old_snapshots_imply() {
        let user = Credentials::implied(1001, 100);
        assert_eq!((user.uids, user.gids), (Ids::all(1001), Ids::all(100)));
        assert_eq!((user.caps.permitted, user.caps.effective, user.caps.bounding), (0, 0, ALL_CAPS));
        let root = Credentials::implied(0, 0);
        assert_eq!((root.caps.permitted, root.caps.effective), (ALL_CAPS, ALL_CAPS));
        assert!(root.groups.is_empty() && !root.no_new_privs);
    }
}
