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

    /// Parses the credential lines of a `/proc/PID/status` file. `None` if one that every
    /// supported kernel writes (`Uid:`, `Gid:`, `Groups:`, `CapInh:`, `CapPrm:`,
    /// `CapEff:`, `CapBnd:`) is missing or does not parse; the younger ones (`CapAmb:`,
    /// `NoNewPrivs:`, `Seccomp:`) read as 0 when absent. Other lines, and bytes that are
    /// not UTF-8 in them (a thread's name), are ignored.
    pub fn parse_status(status: &[u8]) -> Option<Credentials> {
        let field = |key: &str| -> Option<&str> {
            status
                .split(|&b| b == b'\n')
                .find_map(|line| std::str::from_utf8(line.strip_prefix(key.as_bytes())?).ok())
        };
        let ids = |key: &str| -> Option<Ids> {
            let mut values = field(key)?.split_whitespace().map(|v| v.parse::<u32>());
            let mut next = || values.next()?.ok();
            let ids = Ids { real: next()?, effective: next()?, saved: next()?, fs: next()? };
            values.next().is_none().then_some(ids)
        };
        let mask = |key: &str| -> Option<u64> {
            let hex = field(key)?.trim();
            if hex.is_empty() || hex.len() > 16 {
                return None;
            }
            u64::from_str_radix(hex, 16).ok()
        };
        let number = |key: &str| -> Option<Option<u32>> {
            match field(key) {
                None => Some(None),
                Some(v) => v.trim().parse().ok().map(Some),
            }
        };
        let groups =
            field("Groups:")?.split_whitespace().map(|g| g.parse().ok()).collect::<Option<Vec<u32>>>()?;
        let seccomp = match number("Seccomp:")?.unwrap_or(0) {
            0 => SeccompMode::Disabled,
            1 => SeccompMode::Strict,
            2 => SeccompMode::Filter,
            _ => return None,
        };
        let no_new_privs = match number("NoNewPrivs:")?.unwrap_or(0) {
            0 => false,
            1 => true,
            _ => return None,
        };
        let ambient = match field("CapAmb:") {
            None => 0,
            Some(_) => mask("CapAmb:")?,
        };
        Some(Credentials {
            uids: ids("Uid:")?,
            gids: ids("Gid:")?,
            groups,
            caps: Capabilities {
                inheritable: mask("CapInh:")?,
                permitted: mask("CapPrm:")?,
                effective: mask("CapEff:")?,
                bounding: mask("CapBnd:")?,
                ambient,
            },
            no_new_privs,
            seccomp,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The credential lines of a thread of uid 1001 with two supplementary groups and
    /// one capability, among lines it ignores (a name that is not UTF-8 included).
    const STATUS: &[u8] = b"Name:\tw\xffrker\n\
        Umask:\t0022\n\
        State:\tS (sleeping)\n\
        Uid:\t1001\t1001\t1001\t1001\n\
        Gid:\t1001\t1001\t1001\t1001\n\
        FDSize:\t64\n\
        Groups:\t27 1002 \n\
        NSpid:\t4242\t7\n\
        SigCgt:\t0000000000004a02\n\
        CapInh:\t0000000000000000\n\
        CapPrm:\t0000000000000400\n\
        CapEff:\t0000000000000400\n\
        CapBnd:\t000001ffffffffff\n\
        CapAmb:\t0000000000000400\n\
        NoNewPrivs:\t1\n\
        Seccomp:\t0\n\
        Seccomp_filters:\t0\n";

    #[test]
    fn a_full_status() {
        let c = Credentials::parse_status(STATUS).unwrap();
        assert_eq!(c.uids, Ids::all(1001));
        assert_eq!(c.gids, Ids::all(1001));
        assert_eq!(c.groups, [27, 1002]);
        let net_bind_service = 1 << 10;
        assert_eq!(
            c.caps,
            Capabilities {
                inheritable: 0,
                permitted: net_bind_service,
                effective: net_bind_service,
                bounding: ALL_CAPS,
                ambient: net_bind_service,
            }
        );
        assert!(c.no_new_privs);
        assert_eq!(c.seccomp, SeccompMode::Disabled);
    }

    #[test]
    fn ids_in_their_order_and_spaces_around_values() {
        let status = b"Uid:  0 1001\t 2 3 \nGid:\t5\t6\t7\t8\nGroups:\n\
            CapInh: 0\nCapPrm:\t ffffffffffffffff \nCapEff:\t8000000000000001\nCapBnd:\t1ff\n\
            Seccomp:\t 2\n";
        let c = Credentials::parse_status(status).unwrap();
        assert_eq!(c.uids, Ids { real: 0, effective: 1001, saved: 2, fs: 3 });
        assert_eq!(c.gids.as_array(), [5, 6, 7, 8]);
        assert!(c.groups.is_empty());
        // 64-bit masks: the top bit too.
        assert_eq!(c.caps.permitted, u64::MAX);
        assert_eq!(c.caps.effective, 1 << 63 | 1);
        assert_eq!(c.caps.bounding, 0x1ff);
        // Lines younger kernels add read as unset when absent.
        assert_eq!((c.caps.ambient, c.no_new_privs), (0, false));
        assert_eq!(c.seccomp, SeccompMode::Filter);
    }

    #[test]
    fn missing_or_bad_lines() {
        let without = |key: &[u8]| -> Vec<u8> {
            STATUS
                .split_inclusive(|&b| b == b'\n')
                .filter(|l| !l.starts_with(key))
                .flatten()
                .copied()
                .collect()
        };
        for key in ["Uid:", "Gid:", "Groups:", "CapInh:", "CapPrm:", "CapEff:", "CapBnd:"] {
            assert_eq!(Credentials::parse_status(&without(key.as_bytes())), None, "without {key}");
        }
        assert!(Credentials::parse_status(&without(b"CapAmb:")).is_some());
        let with = |line: &[u8]| [STATUS, line].concat();
        let bad: [&[u8]; 7] = [
            b"Uid:\t1\t2\t3\n",
            b"Uid:\t1\t2\t3\t4\t5\n",
            b"Gid:\t1\t2\tx\t4\n",
            b"Groups:\t1 -2\n",
            b"CapEff:\t10000000000000000\n",
            b"Seccomp:\t3\n",
            b"NoNewPrivs:\t2\n",
        ];
        for line in bad {
            // The first line of a key counts: put the bad one first.
            let status =
                [line, &without(&line[..line.iter().position(|&b| b == b':').unwrap() + 1])].concat();
            assert_eq!(Credentials::parse_status(&status), None, "{}", String::from_utf8_lossy(line));
            // And a duplicate after a good one is ignored.
            assert!(Credentials::parse_status(&with(line)).is_some());
        }
        assert_eq!(Credentials::parse_status(b""), None);
        assert_eq!(Credentials::parse_status(&STATUS[..STATUS.len() / 2]), None);
    }

    #[test]
    fn a_thread_has_its_own_credentials_or_the_process_s() {
        let process = Credentials::parse_status(STATUS).unwrap();
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
