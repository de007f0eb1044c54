//! The restored threads' credentials: each thread ends with those it had at the snapshot
//! (user and group ids, supplementary groups, capabilities, `no_new_privs`, seccomp
//! strict mode), never more than the restorer itself has. They are set after everything
//! that needs the restorer's rights and before the program runs again, by calls injected
//! into each thread in turn: Linux keeps credentials per thread, and a raw `setresuid`
//! changes only its caller's (glibc's broadcast to the other threads is not there).
//!
//! ```text
//! each thread:  PR_CAPBSET_DROP       each capability its bounding set loses
//!               PR_SET_KEEPCAPS 1     if capabilities must outlive leaving uid 0
//!               setgroups, setresgid, setfsgid, setresuid, setfsuid
//!               capset                permitted, effective, inheritable: only lowered
//!               PR_CAP_AMBIENT        cleared, then each ambient capability raised
//!               PR_SET_KEEPCAPS 0
//!               PR_SET_NO_NEW_PRIVS   if it had it
//! the process:  PR_SET_DUMPABLE       as it was (changing ids clears it)
//! last call:    PR_SET_SECCOMP strict on the threads that had it
//! then:         every thread's /proc status must read what was set, or the restore fails
//! ```
//!
//! Before all that, the stub opened the program's files with its filesystem identity
//! ([`file_identity`]), so no descriptor carries the restorer's rights either.
//!
//! What is recorded is trusted only as far as the owner of the store has it
//! ([`OwnerRights`]): a store of another user than root that records uid 0, a group its
//! owner is not in or a capability is refused, or lowered to the owner's when the caller
//! asks ([`BeyondOwner::Lower`]).
//!
//! A seccomp filter cannot be restored (the snapshot does not hold it): a thread that had
//! one is refused, unless the caller asks to resume without it. Not restored either:
//! securebits (the threads keep the restorer's) and LSM labels.

use sdt_store::{BeyondOwner, Capabilities, Credentials, OwnerRights, ProcessInfo, SeccompMode};
use sdt_sys::Tid;
use sdt_sys::respawn::FileIdentity;

use crate::remote::{ARGS_ROOM, Remote};
use crate::{Error, Privileges, RestoredThread};

/// `_LINUX_CAPABILITY_VERSION_3` (`linux/capability.h`): 64-bit sets, as two 32-bit
/// `struct __user_cap_data_struct`.
const CAPABILITY_VERSION_3: u32 = 0x2008_0522;
/// The most supplementary groups the scratch area holds for `setgroups`.
const MAX_GROUPS: usize = (ARGS_ROOM / 4) as usize;

/// The credentials each thread is to end with, by its snapshot id.
#[derive(Debug)]
pub(crate) struct Targets(Vec<(i32, Credentials)>);

impl Targets {
    /// Thread `tid`'s.
    pub(crate) fn of(&self, tid: i32) -> &Credentials {
        &self.0.iter().find(|(t, _)| *t == tid).expect("every restored thread has a target").1
    }
}

/// The credentials each of the threads `tids` of `process` is to end with: the recorded
/// ones as far as the store's owners have them (`rights`; beyond that refused or lowered
/// to the owner's, as `beyond` says), bounded by `restorer`'s (the credentials the
/// restore runs with). A thread that had a seccomp filter is refused unless `privileges`
/// drops it.
pub(crate) fn targets(
    process: &ProcessInfo,
    tids: impl IntoIterator<Item = i32>,
    restorer: &Credentials,
    privileges: Privileges,
    rights: &OwnerRights,
    beyond: BeyondOwner,
) -> Result<Targets, Error> {
    let targets = tids
        .into_iter()
        .map(|tid| {
            let recorded = rights.credentials_of(process, tid, beyond)?;
            if beyond == BeyondOwner::Lower
                && let Err(e) = rights.credentials_of(process, tid, BeyondOwner::Refuse)
            {
                log::warn!("{e}: it resumes with the owner's (uid {})", recorded.uids.real);
            }
            if recorded.seccomp == SeccompMode::Filter {
                if privileges != Privileges::RecordedWithoutSeccompFilter {
                    return Err(Error::SeccompFilter { tid });
                }
                log::warn!("thread {tid} resumes without the seccomp filter it had");
            }
            if recorded.groups.len() > MAX_GROUPS {
                return Err(Error::Unsupported {
                    what: format!(
                        "thread {tid}'s {} supplementary groups (at most {MAX_GROUPS})",
                        recorded.groups.len()
                    ),
                });
            }
            let target = bounded(&recorded, restorer);
            // An old snapshot's root is taken to have had everything: bounding that is no news.
            // Nor is a bounding set lowered: it takes nothing the thread holds.
            let held = |c: &Capabilities| (c.permitted, c.effective, c.inheritable, c.ambient);
            if process.creds.is_some() && held(&target.caps) != held(&recorded.caps) {
                log::warn!(
                    "thread {tid} had capabilities this restore does not have: it resumes with {:#x} \
                     permitted instead of {:#x}",
                    target.caps.permitted,
                    recorded.caps.permitted
                );
            }
            Ok((tid, target))
        })
        .collect::<Result<_, _>>()?;
    Ok(Targets(targets))
}

/// `recorded` as far as `restorer` can give it: ids and groups as recorded (setting them
/// needs `CAP_SETUID`/`CAP_SETGID`, checked by the kernel), no capability the restorer
/// lacks, its own `no_new_privs` and seccomp mode kept (neither can be undone), and a
/// seccomp filter left out (see [`targets`]).
fn bounded(recorded: &Credentials, restorer: &Credentials) -> Credentials {
    let (r, c) = (&recorded.caps, &restorer.caps);
    let permitted = r.permitted & c.permitted;
    let inheritable = r.inheritable & (c.inheritable | c.permitted);
    let bounding = r.bounding & c.bounding;
    let mut groups = recorded.groups.clone();
    // The order the kernel keeps them in, and reads them back.
    groups.sort_unstable();
    groups.dedup();
    Credentials {
        uids: recorded.uids,
        gids: recorded.gids,
        groups,
        caps: Capabilities {
            inheritable,
            permitted,
            effective: r.effective & permitted,
            bounding,
            ambient: r.ambient & permitted & inheritable & bounding,
        },
        no_new_privs: recorded.no_new_privs || restorer.no_new_privs,
        seccomp: match recorded.seccomp {
            SeccompMode::Strict => SeccompMode::Strict,
            SeccompMode::Disabled | SeccompMode::Filter => restorer.seccomp,
        },
    }
}

impl Targets {
    /// The same credentials, `creds`, for every thread of `tids`.
    pub(crate) fn all(tids: impl IntoIterator<Item = i32>, creds: &Credentials) -> Targets {
        Targets(tids.into_iter().map(|tid| (tid, bounded(creds, creds))).collect())
    }
}

/// `CAP_SYS_ADMIN`, which creating a PID namespace and choosing pids in it take in the
/// restorer's own user namespace.
pub(crate) fn may_choose_pids(restorer: &Credentials) -> bool {
    const CAP_SYS_ADMIN: u64 = 1 << 21;
    restorer.caps.effective & CAP_SYS_ADMIN != 0
}

/// Checks that every target has only the restorer's own ids and groups: all that a user
/// namespace the restorer creates without privilege maps, and all it may not drop.
pub(crate) fn check_own(targets: &Targets, restorer: &Credentials) -> Result<(), Error> {
    let (uid, gid) = (restorer.uids.effective, restorer.gids.effective);
    let mut groups = restorer.groups.clone();
    groups.sort_unstable();
    groups.dedup();
    let own = || format!("uid {uid}, gid {gid}, groups {groups:?}");
    for (tid, want) in &targets.0 {
        let (uids, gids) = (want.uids.as_array(), want.gids.as_array());
        let differs: [(&str, String, bool); 3] = [
            ("user ids", format!("{uids:?}"), uids.iter().any(|&u| u != uid)),
            ("group ids", format!("{gids:?}"), gids.iter().any(|&g| g != gid)),
            ("supplementary groups", format!("{:?}", want.groups), want.groups != groups),
        ];
        if let Some((what, recorded, _)) = differs.into_iter().find(|(.., differs)| *differs) {
            return Err(Error::NotOwnIds { tid: *tid, what, recorded, own: own() });
        }
    }
    Ok(())
}

/// What the stub's file access is checked against: the main thread's target identity.
pub(crate) fn file_identity(main: &Credentials) -> FileIdentity {
    FileIdentity { fsuid: main.uids.fs, fsgid: main.gids.fs, groups: main.groups.clone() }
}

/// The credentials of thread `tid` (in this process's pid namespace) now.
pub(crate) fn current(tid: Tid) -> Result<Credentials, Error> {
    read(&format!("/proc/{tid}/status"), tid.raw())
}

/// The credentials of the calling thread.
pub(crate) fn own() -> Result<Credentials, Error> {
    read("/proc/thread-self/status", 0)
}

fn read(path: &str, tid: i32) -> Result<Credentials, Error> {
    let status = std::fs::read(path)
        .map_err(|e| Error::Sys(sdt_sys::Error { call: "reading /proc/PID/status", tid, source: e }))?;
    sdt_procfs::parse_credentials(&status).ok_or_else(|| Error::Unsupported {
        what: format!("on a kernel whose {path} lacks the credential lines"),
    })
}

/// Gives each thread its target credentials, `now` being those they all have (the
/// stub's), then makes the process dumpable or not. Seccomp strict mode comes later,
/// from [`confine`].
pub(crate) fn set(
    remote: &mut Remote,
    threads: &[RestoredThread],
    targets: &Targets,
    now: &Credentials,
    dumpable: bool,
) -> Result<(), Error> {
    for t in threads {
        set_thread(remote, *t, targets.of(t.tid), now)?;
    }
    remote.call(
        "setting the process dumpable or not",
        libc::SYS_prctl,
        &[libc::PR_SET_DUMPABLE as u64, u64::from(dumpable)],
    )?;
    Ok(())
}

fn set_thread(
    remote: &mut Remote,
    t: RestoredThread,
    want: &Credentials,
    now: &Credentials,
) -> Result<(), Error> {
    let call = |remote: &mut Remote, what: &str, nr: i64, args: &[u64]| {
        remote.call_on(t.host, &format!("thread {}: {what}", t.tid), nr, args)
    };
    let prctl = libc::SYS_prctl;
    for cap in bits(now.caps.bounding & !want.caps.bounding) {
        call(
            remote,
            "dropping a capability from its bounding set",
            prctl,
            &[libc::PR_CAPBSET_DROP as u64, cap],
        )?;
    }
    // Leaving uid 0 (as real, effective and saved uid) clears the permitted set unless
    // the thread keeps it.
    let root_in = |ids: &sdt_store::Ids| ids.as_array()[..3].contains(&0);
    let keep_caps =
        root_in(&now.uids) && !root_in(&want.uids) && (want.caps.permitted | want.caps.inheritable) != 0;
    if keep_caps {
        call(
            remote,
            "keeping capabilities across the user change",
            prctl,
            &[libc::PR_SET_KEEPCAPS as u64, 1],
        )?;
    }
    // Not when they are already (a user namespace of the restore's own denies it).
    if want.groups != now.groups {
        let groups: Vec<u8> = want.groups.iter().flat_map(|g| g.to_le_bytes()).collect();
        let groups_at = if groups.is_empty() { 0 } else { remote.put(0, &groups)? };
        call(
            remote,
            "setting its supplementary groups",
            libc::SYS_setgroups,
            &[want.groups.len() as u64, groups_at],
        )?;
    }
    let [rgid, egid, sgid, fsgid] = want.gids.as_array().map(u64::from);
    call(remote, "setting its group ids", libc::SYS_setresgid, &[rgid, egid, sgid])?;
    call(remote, "setting its filesystem group id", libc::SYS_setfsgid, &[fsgid])?;
    let [ruid, euid, suid, fsuid] = want.uids.as_array().map(u64::from);
    call(remote, "setting its user ids", libc::SYS_setresuid, &[ruid, euid, suid])?;
    call(remote, "setting its filesystem user id", libc::SYS_setfsuid, &[fsuid])?;
    // struct __user_cap_header_struct { version, pid = 0: the caller }, then two
    // struct __user_cap_data_struct { effective, permitted, inheritable }: the low words,
    // then the high ones.
    let c = &want.caps;
    let words = [
        CAPABILITY_VERSION_3,
        0,
        c.effective as u32,
        c.permitted as u32,
        c.inheritable as u32,
        (c.effective >> 32) as u32,
        (c.permitted >> 32) as u32,
        (c.inheritable >> 32) as u32,
    ];
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    let header = remote.put(0, &bytes)?;
    call(remote, "setting its capabilities", libc::SYS_capset, &[header, header + 8])?;
    let ambient = libc::PR_CAP_AMBIENT as u64;
    if now.caps.ambient != 0 {
        let clear = [ambient, libc::PR_CAP_AMBIENT_CLEAR_ALL as u64, 0, 0, 0];
        call(remote, "clearing its ambient capabilities", prctl, &clear)?;
    }
    for cap in bits(want.caps.ambient) {
        let raise = [ambient, libc::PR_CAP_AMBIENT_RAISE as u64, cap, 0, 0];
        call(remote, "raising an ambient capability", prctl, &raise)?;
    }
    if keep_caps {
        call(remote, "clearing keep-capabilities", prctl, &[libc::PR_SET_KEEPCAPS as u64, 0])?;
    }
    if want.no_new_privs && !now.no_new_privs {
        call(remote, "setting no_new_privs", prctl, &[libc::PR_SET_NO_NEW_PRIVS as u64, 1, 0, 0, 0])?;
    }
    Ok(())
}

/// Puts the threads that had it in seccomp strict mode: the last call the restore makes
/// in them, as none but `read`, `write`, `exit` and `sigreturn` is allowed after it.
pub(crate) fn confine(
    remote: &mut Remote,
    threads: &[RestoredThread],
    targets: &Targets,
    now: &Credentials,
) -> Result<(), Error> {
    for t in threads {
        if targets.of(t.tid).seccomp == SeccompMode::Strict && now.seccomp != SeccompMode::Strict {
            remote.call_on(
                t.host,
                &format!("thread {}: entering seccomp strict mode", t.tid),
                libc::SYS_prctl,
                &[libc::PR_SET_SECCOMP as u64, u64::from(libc::SECCOMP_MODE_STRICT)],
            )?;
        }
    }
    Ok(())
}

/// Checks that every thread now has its target credentials, as the kernel reports them.
pub(crate) fn verify(threads: &[RestoredThread], targets: &Targets) -> Result<(), Error> {
    for t in threads {
        let got = current(t.host)?;
        if let Some((what, got, want)) = difference(&got, targets.of(t.tid)) {
            return Err(Error::Credentials { tid: t.tid, what, got, want });
        }
    }
    Ok(())
}

/// The first credential in which `got` differs from `want`: its name, then both values.
fn difference(got: &Credentials, want: &Credentials) -> Option<(&'static str, String, String)> {
    let (g, w) = (&got.caps, &want.caps);
    let fields: [(&str, String, String); 10] = [
        ("user ids", format!("{:?}", got.uids.as_array()), format!("{:?}", want.uids.as_array())),
        ("group ids", format!("{:?}", got.gids.as_array()), format!("{:?}", want.gids.as_array())),
        ("supplementary groups", format!("{:?}", got.groups), format!("{:?}", want.groups)),
        ("inheritable capabilities", format!("{:#x}", g.inheritable), format!("{:#x}", w.inheritable)),
        ("permitted capabilities", format!("{:#x}", g.permitted), format!("{:#x}", w.permitted)),
        ("effective capabilities", format!("{:#x}", g.effective), format!("{:#x}", w.effective)),
        ("bounding capabilities", format!("{:#x}", g.bounding), format!("{:#x}", w.bounding)),
        ("ambient capabilities", format!("{:#x}", g.ambient), format!("{:#x}", w.ambient)),
        ("no_new_privs", got.no_new_privs.to_string(), want.no_new_privs.to_string()),
        ("seccomp mode", format!("{:?}", got.seccomp), format!("{:?}", want.seccomp)),
    ];
    fields.into_iter().find(|(_, g, w)| g != w)
}

/// The numbers of the bits set in `mask`, ascending.
fn bits(mask: u64) -> impl Iterator<Item = u64> {
    (0..64).filter(move |b| mask & (1 << b) != 0)
}

#[cfg(test)]
mod tests {
    use sdt_store::{ALL_CAPS, Ids, ThreadCredentials};

    use super::*;

    /// Root as these machines run it: every capability but `CAP_SYS_RESOURCE`.
    fn restorer() -> Credentials {
        let mut root = Credentials::implied(0, 0);
        let all = ALL_CAPS & !(1 << 24);
        root.caps = Capabilities { permitted: all, effective: all, bounding: all, ..root.caps };
        root
    }

    fn user(uid: u32) -> Credentials {
        Credentials { groups: vec![1004, 27, 1004], ..Credentials::implied(uid, 100) }
    }

    fn process(creds: Option<Credentials>, thread_creds: Vec<ThreadCredentials>) -> ProcessInfo {
        ProcessInfo { pid: 7, uid: 1001, gid: 100, creds, thread_creds, ..ProcessInfo::default() }
    }

    /// A store root owns: credentials as recorded.
    fn as_recorded() -> OwnerRights {
        OwnerRights::default()
    }

    fn recorded_targets(p: &ProcessInfo, tids: impl IntoIterator<Item = i32>) -> Result<Targets, Error> {
        targets(p, tids, &restorer(), Privileges::Recorded, &as_recorded(), BeyondOwner::Refuse)
    }

    #[test]
    fn a_users_store_gives_no_more_than_the_user_has_or_lowers_to_it() {
        let owner = OwnerRights::of(vec![sdt_store::Owner { uid: 1001, gids: vec![100, 27, 1004] }]);
        let mut root = Credentials::implied(0, 0);
        root.groups = vec![0, 27];
        let p = process(Some(user(1001)), vec![ThreadCredentials { tid: 8, creds: root }]);
        let err =
            targets(&p, [7, 8], &restorer(), Privileges::Recorded, &owner, BeyondOwner::Refuse).unwrap_err();
        assert!(matches!(&err, Error::BeyondOwner(e) if e.tid == 8 && e.what == "user ids"), "{err}");
        assert!(err.to_string().contains("more than the owner of its store (uid 1001) has"), "{err}");
        let t = targets(&p, [7, 8], &restorer(), Privileges::Recorded, &owner, BeyondOwner::Lower).unwrap();
        assert_eq!(t.of(8).uids, Ids::all(1001));
        assert_eq!(t.of(8).gids, Ids::all(100), "group 0 is not the owner's: its primary group");
        assert_eq!(t.of(8).groups, [27]);
        assert_eq!((t.of(8).caps.permitted, t.of(8).caps.effective), (0, 0));
        assert_eq!(t.of(7), &bounded(&user(1001), &restorer()), "the owner's own are kept");
    }

    #[test]
    fn each_thread_gets_its_own_recorded_credentials() {
        let mut other = user(1001);
        other.uids.effective = 1003;
        other.no_new_privs = true;
        let p = process(Some(user(1001)), vec![ThreadCredentials { tid: 9, creds: other }]);
        let t =
            targets(&p, [7, 8, 9], &restorer(), Privileges::Recorded, &as_recorded(), BeyondOwner::Refuse)
                .unwrap();
        assert_eq!(t.of(7).uids, Ids::all(1001));
        assert_eq!(t.of(7).groups, [27, 1004], "sorted and once each, as the kernel keeps them");
        assert_eq!(t.of(8), t.of(7));
        assert_eq!(t.of(9).uids, Ids { effective: 1003, ..Ids::all(1001) });
        assert!(t.of(9).no_new_privs && !t.of(7).no_new_privs);
        assert_eq!(
            t.of(7).caps,
            Capabilities { bounding: restorer().caps.bounding, ..Capabilities::default() }
        );
        assert_eq!(file_identity(t.of(9)), FileIdentity { fsuid: 1001, fsgid: 100, groups: vec![27, 1004] });
    }

    #[test]
    fn old_snapshots_resume_as_their_real_user_and_root_keeps_no_more_than_the_restorer() {
        let t = recorded_targets(&process(None, Vec::new()), [7]).unwrap();
        let main = t.of(7);
        assert_eq!((main.uids, main.gids), (Ids::all(1001), Ids::all(100)));
        assert!(main.groups.is_empty());
        assert_eq!((main.caps.permitted, main.caps.effective, main.caps.ambient), (0, 0, 0));

        let root = ProcessInfo { uid: 0, gid: 0, ..process(None, Vec::new()) };
        let t = recorded_targets(&root, [7]).unwrap();
        assert_eq!(t.of(7).caps, restorer().caps, "all it had, which is all the restorer has");
    }

    #[test]
    fn capabilities_are_only_ever_lowered() {
        let mut recorded = user(0);
        recorded.caps = Capabilities {
            inheritable: 1 << 24 | 1 << 10,
            permitted: 1 << 24 | 1 << 10 | 1,
            effective: 1 << 24 | 1,
            bounding: u64::MAX,
            ambient: 1 << 24 | 1 << 10,
        };
        recorded.no_new_privs = false;
        let mut r = restorer();
        r.no_new_privs = true;
        let t = bounded(&recorded, &r);
        assert_eq!(t.caps.permitted, 1 << 10 | 1, "CAP_SYS_RESOURCE is not the restorer's to give");
        assert_eq!(t.caps.effective, 1);
        assert_eq!(t.caps.inheritable, 1 << 10);
        assert_eq!(t.caps.ambient, 1 << 10);
        assert_eq!(t.caps.bounding, r.caps.bounding);
        assert!(t.no_new_privs, "the restorer's own cannot be undone");
    }

    #[test]
    fn a_seccomp_filter_is_refused_unless_dropped_and_strict_mode_kept() {
        let mut filtered = user(1001);
        filtered.seccomp = SeccompMode::Filter;
        let p = process(Some(user(1001)), vec![ThreadCredentials { tid: 8, creds: filtered }]);
        let err = recorded_targets(&p, [7, 8]).unwrap_err();
        assert!(matches!(err, Error::SeccompFilter { tid: 8 }), "{err}");
        assert!(err.to_string().contains("thread 8") && err.to_string().contains("seccomp filter"), "{err}");
        let t = targets(
            &p,
            [7, 8],
            &restorer(),
            Privileges::RecordedWithoutSeccompFilter,
            &as_recorded(),
            BeyondOwner::Refuse,
        )
        .unwrap();
        assert_eq!(t.of(8).seccomp, SeccompMode::Disabled);

        let mut strict = user(1001);
        strict.seccomp = SeccompMode::Strict;
        let t = recorded_targets(&process(Some(strict), Vec::new()), [7]).unwrap();
        assert_eq!(t.of(7).seccomp, SeccompMode::Strict);
    }

    #[test]
    fn too_many_groups_are_refused_by_name() {
        let mut many = user(1001);
        many.groups = (0..MAX_GROUPS as u32 + 1).collect();
        let err = recorded_targets(&process(Some(many), Vec::new()), [7]).unwrap_err();
        assert!(err.to_string().contains("supplementary groups"), "{err}");
    }

    #[test]
    fn without_sys_admin_only_the_restorers_own_ids_are_given() {
        let me = Credentials { groups: vec![1004, 27], ..Credentials::implied(1001, 100) };
        assert!(may_choose_pids(&restorer()) && !may_choose_pids(&me));
        let own = |p: &ProcessInfo, tids: &[i32]| {
            let t = targets(
                p,
                tids.iter().copied(),
                &me,
                Privileges::Recorded,
                &as_recorded(),
                BeyondOwner::Refuse,
            );
            check_own(&t.unwrap(), &me)
        };
        own(&process(Some(user(1001)), Vec::new()), &[7]).unwrap();

        let mut other = user(1001);
        other.uids.effective = 1003;
        let err = own(&process(Some(user(1001)), vec![ThreadCredentials { tid: 8, creds: other }]), &[7, 8])
            .unwrap_err();
        assert!(matches!(&err, Error::NotOwnIds { tid: 8, what: "user ids", .. }), "{err}");
        assert!(err.to_string().contains("are [1001, 1003, 1001, 1001]"), "{err}");

        let mut fewer = user(1001);
        fewer.groups = vec![27];
        let err = own(&process(Some(fewer), Vec::new()), &[7]).unwrap_err();
        assert!(
            err.to_string().contains("supplementary groups are [27]: restoring without root")
                && err.to_string().contains("(uid 1001, gid 100, groups [27, 1004]); restore it as root"),
            "{err}"
        );

        let all = Targets::all([7, 8], &me);
        check_own(&all, &me).unwrap();
        assert_eq!(all.of(8).uids, Ids::all(1001));
    }

    #[test]
    fn differences_are_named() {
        let want = user(1001);
        assert_eq!(difference(&want, &want), None);
        let mut got = want.clone();
        got.uids.saved = 0;
        let (what, got_text, want_text) = difference(&got, &want).unwrap();
        assert_eq!(
            (what, got_text.as_str(), want_text.as_str()),
            ("user ids", "[1001, 1001, 0, 1001]", "[1001, 1001, 1001, 1001]")
        );
        let mut got = want.clone();
        got.caps.effective = 1 << 21;
        assert_eq!(difference(&got, &want).unwrap().0, "effective capabilities");
    }

    #[test]
    fn bits_of_a_mask() {
        assert_eq!(bits(0).count(), 0);
        assert_eq!(bits(1 << 63 | 1 << 10 | 1).collect::<Vec<_>>(), [0, 10, 63]);
    }
}
