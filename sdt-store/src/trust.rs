//! Whose rights a store's contents are trusted with ([`Trust`]): the users who own the
//! store's directory and the run's. A store is untrusted input that root often reads in
//! someone else's directory, and its owner can write anything into it, so nothing read
//! from it may give its reader's rights to its owner:
//!
//! - **Files.** A file the store names (a mapping's, a descriptor's) is used only if every
//!   owner other than the reader could have read it (and written it, where it is opened
//!   for writing): they own it with the owner bit set, or it has the bit for everyone.
//!   Group bits and ACLs are not looked at: a file only a group may read is refused.
//! - **Credentials.** A restored thread, or a CRIU image of one, is given at most what the
//!   store's owners have ([`OwnerRights`]), whoever reads the store. For an owner of uid
//!   U other than root: every user id (real, effective, saved, filesystem) must be U;
//!   every group id and supplementary group one U is in (its primary group and the
//!   groups the user database lists for it; a uid with no account only the group that
//!   owns its directory, never group 0); no inheritable, permitted, effective or ambient
//!   capability. The bounding set, `no_new_privs` and seccomp only ever take rights away
//!   and are kept as recorded. A store and run that root owns are trusted as recorded.
//!
//! Credentials beyond the owners' are refused, naming the thread, the credential and the
//! owner ([`CredentialsRefused`]), unless the caller asks for them to be lowered to the
//! owner's ([`BeyondOwner::Lower`]).

use std::ffi::CString;
use std::fs::{File, Metadata};
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use nix::unistd::{Gid, Uid, User};

use crate::dir::Run;
use crate::fileref::Reopen;
use crate::model::{Capabilities, Credentials, Ids, ProcessInfo};

/// `S_IRUSR`, `S_IWUSR`, `S_IROTH`, `S_IWOTH`.
const OWNER_READ: u32 = 0o400;
const OWNER_WRITE: u32 = 0o200;
const WORLD_READ: u32 = 0o004;
const WORLD_WRITE: u32 = 0o002;
/// The uid of a directory whose owner cannot be read: nobody's.
const UNKNOWN: u32 = u32::MAX;

/// The owners of a run's store, and who reads it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Trust {
    /// This process's effective uid.
    reader: u32,
    /// Owners (uid, gid) of the store's directory and of the run's, once each by uid,
    /// the store's first.
    owners: Vec<(u32, u32)>,
}

/// How a file is opened: what its owners must be allowed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Access {
    /// For reading.
    pub read: bool,
    /// For writing.
    pub write: bool,
}

impl Access {
    /// Reading only.
    pub const READ: Access = Access { read: true, write: false };

    /// The access the `open(2)` flags `flags` ask for (`O_ACCMODE`; none for `O_PATH`).
    pub fn of_flags(flags: u32) -> Access {
        const O_PATH: u32 = 0o10000000;
        if flags & O_PATH != 0 {
            return Access::default();
        }
        match flags & 0o3 {
            0 => Access { read: true, write: false },
            1 => Access { read: false, write: true },
            _ => Access { read: true, write: true },
        }
    }
}

impl Trust {
    /// For `run`: the owners of its directory and of its store's.
    pub fn of_run(run: &Run) -> Trust {
        Trust::of_run_dir(run.dir())
    }

    /// For the run in `run_dir` (`<store>/runs/<id>`). A directory whose owner cannot be
    /// read counts as nobody's (uid `u32::MAX`): only files everyone may read are used,
    /// and no credentials are given.
    pub(crate) fn of_run_dir(run_dir: &Path) -> Trust {
        let store = run_dir.parent().and_then(Path::parent).unwrap_or(run_dir);
        let mut owners: Vec<(u32, u32)> = Vec::new();
        for dir in [store, run_dir] {
            let owner = std::fs::metadata(dir).map_or((UNKNOWN, UNKNOWN), |m| (m.uid(), m.gid()));
            if !owners.iter().any(|&(uid, _)| uid == owner.0) {
                owners.push(owner);
            }
        }
        Trust { reader: nix::unistd::geteuid().as_raw(), owners }
    }

    /// A store that user `uid`, group `gid`, owns, read by this process.
    #[cfg(test)]
    pub(crate) fn owned_by(uid: u32, gid: u32) -> Trust {
        Trust { reader: nix::unistd::geteuid().as_raw(), owners: vec![(uid, gid)] }
    }

    /// Why the file `meta` describes may not be opened with `access`, if it may not:
    /// an owner other than the reader could not have.
    pub(crate) fn refuses(&self, meta: &Metadata, access: Access) -> Option<String> {
        let mode = meta.mode();
        let allowed = |uid: u32, owner_bit: u32, world_bit: u32| {
            mode & world_bit != 0 || (meta.uid() == uid && mode & owner_bit != 0)
        };
        for &(uid, _) in self.owners.iter().filter(|&&(uid, _)| uid != self.reader) {
            let verb = if access.read && !allowed(uid, OWNER_READ, WORLD_READ) {
                "read"
            } else if access.write && !allowed(uid, OWNER_WRITE, WORLD_WRITE) {
                "write"
            } else {
                continue;
            };
            return Some(match uid {
                UNKNOWN => format!("not everyone may {verb} it, and the store's owner is unknown"),
                uid => format!(
                    "the store belongs to uid {uid}, who could not {verb} it (owner {}, mode {:o})",
                    meta.uid(),
                    mode & 0o7777
                ),
            });
        }
        None
    }

    /// Opens the file `r` names `O_PATH` (never blocking, never reaching a driver) and
    /// checks that it is what `r` says and that the store's owners could open it with
    /// `r.access`: [`Error::FileRefused`](crate::Error::FileRefused) or
    /// [`Error::FileChanged`](crate::Error::FileChanged) otherwise. `snapshot` names the
    /// snapshot for errors. Opening `/proc/self/fd/N` of the descriptor returned opens
    /// the very file checked.
    pub fn reopen(&self, r: &Reopen, snapshot: &str) -> crate::Result<File> {
        crate::fileref::reopen(r, self, snapshot)
    }

    /// What the store's owners have, looked up in the user database: the most that
    /// credentials from the store may claim.
    pub fn rights(&self) -> OwnerRights {
        let owners = self
            .owners
            .iter()
            .filter(|&&(uid, _)| uid != 0)
            .map(|&(uid, dir_gid)| Owner { uid, gids: groups_of(uid, dir_gid) })
            .collect();
        OwnerRights { owners }
    }
}

/// The groups user `uid` is in, its primary group first: the user database's, or, for a
/// uid without an account, `dir_gid` (the group of the directory it owns) unless that is
/// root's group or unknown.
fn groups_of(uid: u32, dir_gid: u32) -> Vec<u32> {
    let account = if uid == UNKNOWN { None } else { User::from_uid(Uid::from_raw(uid)).ok().flatten() };
    let Some(user) = account else {
        return if dir_gid == 0 || dir_gid == UNKNOWN { Vec::new() } else { vec![dir_gid] };
    };
    let mut gids = vec![user.gid.as_raw()];
    let listed = CString::new(user.name.as_bytes())
        .ok()
        .and_then(|name| nix::unistd::getgrouplist(&name, user.gid).ok());
    for gid in listed.unwrap_or_default().into_iter().map(Gid::as_raw) {
        if !gids.contains(&gid) {
            gids.push(gid);
        }
    }
    gids
}

/// What credentials from a store may claim: what its owners have. No owners (the
/// default): a store root owns, whose credentials are taken as recorded.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OwnerRights {
    /// The owners other than root.
    owners: Vec<Owner>,
}

/// A user who owns a store (or its run) and the groups it may act as.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Owner {
    /// Its uid. Not 0.
    pub uid: u32,
    /// The groups it is in, its primary group first; empty when it has none to give.
    pub gids: Vec<u32>,
}

/// What to do with recorded credentials beyond what the store's owner has.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum BeyondOwner {
    /// Refuse them ([`CredentialsRefused`]).
    #[default]
    Refuse,
    /// Give the owner's instead: its uid, the recorded groups it is in (else its primary
    /// group), no capabilities.
    Lower,
}

/// A thread's recorded credentials claim more than the owner of its store has.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "thread {tid} was recorded with {what} {got}, more than the owner of its store (uid {owner}) has: {has}"
)]
pub struct CredentialsRefused {
    /// The thread.
    pub tid: i32,
    /// Which credential: `user ids`, `group ids`, `supplementary groups`, `permitted
    /// capabilities`, …
    pub what: &'static str,
    /// Its recorded value.
    pub got: String,
    /// The owner.
    pub owner: u32,
    /// What the owner has of it.
    pub has: String,
}

impl OwnerRights {
    /// The rights of stores that `owners` own (none: root).
    pub fn of(owners: Vec<Owner>) -> OwnerRights {
        OwnerRights { owners: owners.into_iter().filter(|o| o.uid != 0).collect() }
    }

    /// The owners whose rights credentials are held to; none for a store root owns,
    /// whose credentials are taken as recorded.
    pub fn owners(&self) -> &[Owner] {
        &self.owners
    }

    /// The credentials thread `tid` of `process` may be given: those recorded
    /// ([`ProcessInfo::credentials_of`]) if the owners have them; otherwise, as `beyond`
    /// says, refused or lowered to the first owner's.
    pub fn credentials_of(
        &self,
        process: &ProcessInfo,
        tid: i32,
        beyond: BeyondOwner,
    ) -> Result<Credentials, CredentialsRefused> {
        let recorded = process.credentials_of(tid);
        let (Some(first), BeyondOwner::Lower) = (self.owners.first(), beyond) else {
            return self.check(tid, recorded);
        };
        let primary = first.gids.first().copied();
        let lower_gid = |gid: u32| if first.gids.contains(&gid) { Some(gid) } else { primary };
        let g = recorded.gids;
        let gids = match [g.real, g.effective, g.saved, g.fs].map(lower_gid) {
            [Some(real), Some(effective), Some(saved), Some(fs)] => Ids { real, effective, saved, fs },
            // No group to give: refused, naming the recorded ones.
            _ => g,
        };
        let lowered = Credentials {
            uids: Ids::all(first.uid),
            gids,
            groups: recorded.groups.iter().copied().filter(|g| first.gids.contains(g)).collect(),
            caps: Capabilities { bounding: recorded.caps.bounding, ..Capabilities::default() },
            ..recorded
        };
        self.check(tid, lowered)
    }

    /// `creds` if every owner has them, else the first credential one lacks.
    fn check(&self, tid: i32, creds: Credentials) -> Result<Credentials, CredentialsRefused> {
        for owner in &self.owners {
            if let Some((what, got, has)) = beyond(&creds, owner) {
                return Err(CredentialsRefused { tid, what, got, owner: owner.uid, has });
            }
        }
        Ok(creds)
    }
}

/// The first credential of `c` that `owner` does not have: its name, its value, and what
/// the owner has of it.
fn beyond(c: &Credentials, owner: &Owner) -> Option<(&'static str, String, String)> {
    let groups = || match owner.gids.as_slice() {
        [] => "no group (it has no account, and its directory's group is root's or unknown)".to_owned(),
        gids => format!("groups {gids:?}"),
    };
    if c.uids.as_array().iter().any(|&uid| uid != owner.uid) {
        return Some(("user ids", format!("{:?}", c.uids.as_array()), format!("uid {}", owner.uid)));
    }
    if c.gids.as_array().iter().any(|g| !owner.gids.contains(g)) {
        return Some(("group ids", format!("{:?}", c.gids.as_array()), groups()));
    }
    if c.groups.iter().any(|g| !owner.gids.contains(g)) {
        return Some(("supplementary groups", format!("{:?}", c.groups), groups()));
    }
    let caps = &c.caps;
    [
        ("permitted capabilities", caps.permitted),
        ("effective capabilities", caps.effective),
        ("inheritable capabilities", caps.inheritable),
        ("ambient capabilities", caps.ambient),
    ]
    .into_iter()
    .find(|&(_, set)| set != 0)
    .map(|(what, set)| (what, format!("{set:#x}"), "none".to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ALL_CAPS, SeccompMode, ThreadCredentials};

    const CAP_SYS_ADMIN: u64 = 1 << 21;

    fn owner() -> OwnerRights {
        OwnerRights::of(vec![Owner { uid: 1001, gids: vec![1001, 27] }])
    }

    fn process(creds: Credentials) -> ProcessInfo {
        ProcessInfo { pid: 7, uid: 1001, gid: 1001, creds: Some(creds), ..ProcessInfo::default() }
    }

    fn user() -> Credentials {
        Credentials { groups: vec![27], ..Credentials::implied(1001, 1001) }
    }

    #[test]
    fn the_owners_own_credentials_are_given_as_recorded() {
        let mut c = user();
        c.no_new_privs = true;
        c.seccomp = SeccompMode::Strict;
        c.caps.bounding = 0x1ff;
        assert_eq!(owner().credentials_of(&process(c.clone()), 7, BeyondOwner::Refuse), Ok(c));
    }

    #[test]
    fn more_than_the_owner_has_is_refused_naming_it() {
        let refused = |edit: &dyn Fn(&mut Credentials)| {
            let mut c = user();
            edit(&mut c);
            let err = owner().credentials_of(&process(c), 7, BeyondOwner::Refuse).unwrap_err();
            (err.what, err.to_string())
        };
        let (what, text) = refused(&|c| c.uids = Ids::all(0));
        assert_eq!(what, "user ids");
        assert_eq!(
            text,
            "thread 7 was recorded with user ids [0, 0, 0, 0], more than the owner of its store (uid 1001) \
             has: uid 1001"
        );
        assert_eq!(refused(&|c| c.uids.saved = 0).0, "user ids", "a saved uid 0 gets root back");
        assert_eq!(refused(&|c| c.uids.fs = 0).0, "user ids");
        let (what, text) = refused(&|c| c.gids.effective = 0);
        assert_eq!(what, "group ids");
        assert!(text.ends_with("has: groups [1001, 27]"), "{text}");
        assert_eq!(refused(&|c| c.groups = vec![0, 27]).0, "supplementary groups");
        let (what, text) = refused(&|c| c.caps.permitted = CAP_SYS_ADMIN);
        assert_eq!(what, "permitted capabilities");
        assert!(text.contains("permitted capabilities 0x200000,") && text.ends_with("has: none"), "{text}");
        assert_eq!(refused(&|c| c.caps.ambient = 1).0, "ambient capabilities");
        assert_eq!(refused(&|c| c.caps.inheritable = 1).0, "inheritable capabilities");
    }

    #[test]
    fn each_thread_is_checked_and_old_snapshots_by_what_they_imply() {
        let mut p = process(user());
        p.thread_creds = vec![ThreadCredentials { tid: 8, creds: Credentials::implied(0, 0) }];
        assert!(owner().credentials_of(&p, 7, BeyondOwner::Refuse).is_ok());
        assert_eq!(owner().credentials_of(&p, 8, BeyondOwner::Refuse).unwrap_err().tid, 8);
        // No credentials recorded: a real uid 0 implies every capability.
        let old = ProcessInfo { uid: 0, gid: 0, creds: None, thread_creds: Vec::new(), ..p };
        assert_eq!(owner().credentials_of(&old, 7, BeyondOwner::Refuse).unwrap_err().what, "user ids");
    }

    #[test]
    fn lowered_to_the_owners() {
        let mut c = Credentials::implied(0, 0);
        c.gids.effective = 27;
        c.groups = vec![0, 27, 1001];
        c.no_new_privs = true;
        let got = owner().credentials_of(&process(c), 7, BeyondOwner::Lower).unwrap();
        assert_eq!(got.uids, Ids::all(1001));
        assert_eq!(got.gids, Ids { effective: 27, ..Ids::all(1001) }, "groups it is in are kept");
        assert_eq!(got.groups, [27, 1001]);
        assert_eq!(got.caps, Capabilities { bounding: ALL_CAPS, ..Capabilities::default() });
        assert!(got.no_new_privs);
        // An owner with no group to give cannot take them.
        let groupless = OwnerRights::of(vec![Owner { uid: 1001, gids: Vec::new() }]);
        let err = groupless.credentials_of(&process(user()), 7, BeyondOwner::Lower).unwrap_err();
        assert_eq!(err.what, "group ids");
        assert!(err.to_string().contains("no group (it has no account"), "{err}");
    }

    #[test]
    fn roots_store_is_taken_as_recorded_and_two_owners_must_both_have_it() {
        let root = Credentials::implied(0, 0);
        let unlimited = OwnerRights::of(vec![Owner { uid: 0, gids: vec![0] }]);
        assert!(unlimited.owners().is_empty());
        assert_eq!(unlimited.credentials_of(&process(root.clone()), 7, BeyondOwner::Refuse), Ok(root));
        let two = OwnerRights::of(vec![
            Owner { uid: 1001, gids: vec![1001] },
            Owner { uid: 1002, gids: vec![1001] },
        ]);
        let err = two.credentials_of(&process(user()), 7, BeyondOwner::Lower).unwrap_err();
        assert_eq!((err.what, err.owner), ("user ids", 1002));
    }

    #[test]
    fn an_owner_without_an_account_has_its_directorys_group_but_never_roots() {
        // No account has this uid.
        let uid = 3_999_999_999;
        assert_eq!(groups_of(uid, 1001), [1001]);
        assert_eq!(groups_of(uid, 0), Vec::<u32>::new());
        assert_eq!(groups_of(UNKNOWN, UNKNOWN), Vec::<u32>::new());
        // Root's account: its primary group first.
        assert_eq!(groups_of(0, 1234).first(), Some(&0));
    }

    #[test]
    fn files_need_the_owners_rights_for_how_they_are_opened() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, b"x").unwrap();
        let me = nix::unistd::geteuid().as_raw();
        let other = Trust::owned_by(me.wrapping_add(1), 0);
        let rw = Access { read: true, write: true };
        let meta = |mode: u32| {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
            std::fs::metadata(&path).unwrap()
        };
        assert_eq!(other.refuses(&meta(0o644), Access::READ), None);
        let why = other.refuses(&meta(0o644), rw).unwrap();
        assert!(why.contains("who could not write it (owner"), "{why}");
        assert!(other.refuses(&meta(0o640), Access::READ).unwrap().contains("could not read it"));
        assert_eq!(other.refuses(&meta(0o666), rw), None);
        assert_eq!(other.refuses(&meta(0o600), Access::default()), None, "O_PATH asks for nothing");
        // The reader's own store: the kernel checks its own access.
        let mine = Trust::owned_by(me, 0);
        assert_eq!(mine.refuses(&meta(0o000), rw), None);
    }

    #[test]
    fn trust_comes_from_the_owners_of_the_store_and_the_run() {
        let store = tempfile::tempdir().unwrap();
        let run = store.path().join("runs").join("1");
        std::fs::create_dir_all(&run).unwrap();
        let me = nix::unistd::geteuid().as_raw();
        let owners = |t: Trust| t.owners.iter().map(|&(uid, _)| uid).collect::<Vec<_>>();
        assert_eq!(owners(Trust::of_run_dir(&run)), [me]);
        if me != 0 {
            return;
        }
        assert!(Trust::of_run_dir(&run).rights().owners().is_empty(), "root's store");
        std::os::unix::fs::chown(store.path(), Some(1001), Some(1001)).unwrap();
        assert_eq!(Trust::of_run_dir(&run).owners, [(1001, 1001), (0, 0)]);
        std::os::unix::fs::chown(&run, Some(1002), None).unwrap();
        assert_eq!(owners(Trust::of_run_dir(&run)), [1001, 1002]);
        let rights = Trust::of_run_dir(&run).rights();
        assert_eq!(rights.owners.iter().map(|o| o.uid).collect::<Vec<_>>(), [1001, 1002]);
    }

    #[test]
    fn access_of_open_flags() {
        assert_eq!(Access::of_flags(0o100000), Access::READ);
        assert_eq!(Access::of_flags(0o2101), Access { read: false, write: true });
        assert_eq!(Access::of_flags(0o2), Access { read: true, write: true });
        assert_eq!(Access::of_flags(0o10000000), Access::default());
    }
}
