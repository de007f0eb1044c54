//! The grammar of snapshot names, checked wherever a name is read from a store: a name
//! becomes part of file names (`cores/S3.core`) and reaches other programs, so one that
//! does not fit (`../../x`, `-x`, a control character) is damage, not a name.
//!
//! ```text
//! name  = "S" seq ( "." part )*          S3   S3.0   S12.4.1   S2.new   S1.0.new   S2.new.0   S3.e1
//! part  = seq | "new" | "e" seq          (after "e", seq is not 0)
//! seq   = "0" | [1-9][0-9]*              a u32, written as `to_string` writes it
//! ```
//!
//! `S1.0` is snapshot 0 of a refinement that resumed `S1`; `S2.new` the one a refinement
//! took at `S2`'s breakpoint; `S3.e1` the first edit of `S3`. A refinement resumed from
//! `S2.new` names its snapshots `S2.new.0`, `S2.new.1`, …, so `new` and `eN` may stand in
//! any part after the first.
//!
//! A job id (a run's [`JobMember::id`](crate::JobMember::id)) comes from the launcher's
//! environment and names the job in listings and messages:
//!
//! ```text
//! job-id = [A-Za-z0-9._-]{1,64}          1142685697   hydra-node1-40261-0
//! ```

use crate::dir::{JobMember, Refinement, RunInfo};

/// Longest job id.
const MAX_JOB_ID: usize = 64;

/// Whether `id` is a job id (see the module doc).
pub fn is_job_id(id: &str) -> bool {
    (1..=MAX_JOB_ID).contains(&id.len()) && id.bytes().all(is_job_id_byte)
}

fn is_job_id_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-')
}

/// `raw` (a launcher's job id, from the environment) made a job id: each byte outside
/// the grammar becomes `_`, and one longer than 64 bytes keeps its first 47 and a hash
/// of the whole (`-` and 16 hex digits), so that distinct long ids stay distinct. `None`
/// for an empty one.
pub fn job_id(raw: &str) -> Option<String> {
    if raw.is_empty() {
        return None;
    }
    let clean: String = raw.bytes().map(|b| if is_job_id_byte(b) { b as char } else { '_' }).collect();
    if clean.len() <= MAX_JOB_ID {
        return Some(clean);
    }
    let hash = xxhash_rust::xxh3::xxh3_64(raw.as_bytes());
    Some(format!("{}-{hash:016x}", &clean[..MAX_JOB_ID - 17]))
}

/// Whether `name` is a snapshot name (see the module doc).
pub fn is_snapshot_name(name: &str) -> bool {
    let mut parts = name.split('.');
    let first = parts.next().and_then(|p| p.strip_prefix('S'));
    first.is_some_and(is_seq) && parts.all(|p| p == "new" || is_seq(p) || is_edit(p))
}

/// `e1`, `e2`, …: an edit's number.
fn is_edit(part: &str) -> bool {
    part.strip_prefix('e').is_some_and(|n| is_seq(n) && n != "0")
}

/// A decimal u32 without sign or leading zeros.
fn is_seq(text: &str) -> bool {
    text.parse::<u32>().is_ok_and(|n| n.to_string() == text)
}

/// Checks the snapshot names a run's `run.json` holds (a refinement's `from` and `to`);
/// returns what is wrong.
pub(crate) fn check_run_info(info: &RunInfo) -> Result<(), String> {
    if let Some(JobMember { id, rank, size, .. }) = &info.job {
        if !is_job_id(id) {
            return Err(format!("job.id {id:?} is not a job id ([A-Za-z0-9._-], 1 to 64 of them)"));
        }
        if rank >= size {
            return Err(format!("job.rank {rank} is not below job.size {size}"));
        }
    }
    let Some(Refinement { from, to, .. }) = &info.parent else {
        return Ok(());
    };
    for (field, name) in [("parent.from", Some(from)), ("parent.to", to.as_ref())] {
        if let Some(name) = name.filter(|n| !is_snapshot_name(n)) {
            return Err(format!("{field} {name:?} is not a snapshot name (S3, S3.0, S2.new, …)"));
        }
    }
    Ok(())
}

/// Checks that the name a snapshot's metadata gives it is the one its run gives its seq.
pub(crate) fn check_meta_name(in_meta: &str, in_run: &str) -> Result<(), String> {
    if in_meta == in_run {
        Ok(())
    } else {
        Err(format!("metadata names it {in_meta:?}, its run names it {in_run:?}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dir::{RunId, RunStatus};

    #[test]
    fn names_that_fit() {
        for good in [
            "S0",
            "S3",
            "S12",
            "S3.0",
            "S3.0.new",
            "S12.4.1",
            "S2.new",
            "S2.new.0",
            "S4294967295",
            "S3.e1",
            "S3.e12",
            "S3.0.e2",
            "S3.e1.0",
        ] {
            assert!(is_snapshot_name(good), "{good}");
        }
    }

    #[test]
    fn names_that_do_not() {
        for bad in [
            "",
            "S",
            "s3",
            "3",
            "S03",
            "S3.01",
            "S-1",
            "S+1",
            "S3.",
            "S.3",
            "S3..0",
            "Snew",
            "S3.NEW",
            "S3.e0",
            "S3.e01",
            "S3.e",
            "Se1",
            "S3.E1",
            "S3.e-1",
            "S3.new/../x",
            "../../../../root/x",
            "S3/x",
            "S4294967296",
            "S3 ",
            "S3\n",
            "--eval-command=shell id",
        ] {
            assert!(!is_snapshot_name(bad), "{bad:?}");
        }
    }

    #[test]
    fn run_info_refinement_names() {
        let info = |from: &str, to: Option<&str>| RunInfo {
            id: RunId(2),
            command: Vec::new(),
            cwd: String::new(),
            started_wall_ns: 0,
            sdt_pid: 0,
            config: String::new(),
            status: RunStatus::Running,
            parent: Some(Refinement {
                run: RunId(1),
                from: from.into(),
                to: to.map(Into::into),
                reached: None,
                edit: None,
            }),
            job: None,
        };
        assert_eq!(check_run_info(&info("S1", Some("S2"))), Ok(()));
        assert_eq!(check_run_info(&info("S1.0", None)), Ok(()));
        assert_eq!(
            check_run_info(&info("../../x", Some("S2"))),
            Err("parent.from \"../../x\" is not a snapshot name (S3, S3.0, S2.new, …)".into())
        );
        assert!(check_run_info(&info("S1", Some("S2/.."))).unwrap_err().starts_with("parent.to"));
        let mut edit = info("S3", None);
        edit.parent.as_mut().unwrap().edit = Some(2);
        assert_eq!(edit.snapshot_name(0), "S3.e2");
        assert_eq!(edit.snapshot_seq("S3.e2"), Some(0));
        assert_eq!((edit.snapshot_seq("S3.e1"), edit.snapshot_seq("S3.0")), (None, None));
        assert!(is_snapshot_name(&edit.snapshot_name(0)));
        assert_eq!(check_meta_name("S1.3", "S1.3"), Ok(()));
        assert!(check_meta_name("../x", "S3").is_err());
    }

    #[test]
    fn job_ids() {
        for good in ["1142685697", "hydra-vm-40261-0", "a.b_c-D", &"x".repeat(64)] {
            assert!(is_job_id(good), "{good}");
        }
        for bad in ["", "../x", "a/b", "a b", "-x\n", &"x".repeat(65), "é"] {
            assert!(!is_job_id(bad), "{bad:?}");
        }
        assert_eq!(job_id("1142685697").as_deref(), Some("1142685697"));
        assert_eq!(job_id("../a b\n").as_deref(), Some(".._a_b_"));
        assert_eq!(job_id("é").as_deref(), Some("__"));
        assert_eq!(job_id(""), None);
        let (a, b) = (job_id(&"y".repeat(100)).unwrap(), job_id(&format!("{}z", "y".repeat(99))).unwrap());
        assert!(is_job_id(&a) && is_job_id(&b) && a != b, "{a} {b}");
        assert_eq!(a.len(), 64);
    }

    #[test]
    fn run_info_job_members() {
        let info = |id: &str, rank, size| RunInfo {
            id: RunId(2),
            command: Vec::new(),
            cwd: String::new(),
            started_wall_ns: 0,
            sdt_pid: 0,
            config: String::new(),
            status: RunStatus::Running,
            parent: None,
            job: Some(JobMember { id: id.into(), rank, size, host: "h1".into() }),
        };
        assert_eq!(check_run_info(&info("77", 2, 3)), Ok(()));
        assert!(check_run_info(&info("../77", 0, 3)).unwrap_err().starts_with("job.id"));
        assert!(check_run_info(&info("77", 3, 3)).unwrap_err().starts_with("job.rank"));
    }
}
