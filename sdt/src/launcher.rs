//! Which job and rank an `sdt run` is, from the environment its launcher gave it:
//! `mpirun -np 3 sdt run -- ./prog` starts one `sdt run` per rank, and each finds its
//! rank, the job's size and the job's id there, so the store groups the three runs as
//! one job.
//!
//! | launcher | rank, size | job id |
//! | --- | --- | --- |
//! | Open MPI 4 (ORTE + PMIx) | `OMPI_COMM_WORLD_RANK`, `OMPI_COMM_WORLD_SIZE` | `PMIX_NAMESPACE`, else `OMPI_MCA_ess_base_jobid`; then `-` and the first 32 bits of `OMPI_MCA_orte_precondition_transports`, in decimal |
//! | MPICH (Hydra) | `PMI_RANK`, `PMI_SIZE` | none: derived, see below |
//! | Slurm (`srun`) | `SLURM_PROCID`, `SLURM_NTASKS` | `SLURM_JOB_ID` `.` `SLURM_STEP_ID` |
//!
//! Hydra gives its ranks no job id. Every rank's parent (or an ancestor, through a
//! wrapper script) is a `hydra_pmi_proxy` started with `--control-port HOST:PORT`, the
//! address where the job's `mpiexec` listens, and `--pgid N`, the process group of the
//! job within that `mpiexec`: the same in every proxy of the job, on every host, and
//! unique among the jobs running at a time. The id is `hydra-HOST-PORT-N`. Should a later
//! `mpiexec` listen on the same port, [`Store::job_ranks`](sdt_store::Store::job_ranks)
//! keeps each rank's newest run.
//!
//! Open MPI's job ids come from `mpirun`'s process id and repeat from one `mpirun` to a
//! later one; the random key `mpirun` makes for each job's transports
//! (`OMPI_MCA_orte_precondition_transports`, the same in every rank) tells them apart.
//!
//! Job ids are made to fit the store's grammar with [`sdt_store::job_id`].

use anyhow::{Result, bail};
use sdt_store::JobMember;
use sdt_sys::Tid;

use crate::cli::JobArgs;

/// How far up the process tree a Hydra proxy is looked for (a wrapper script or two).
const MAX_ANCESTORS: usize = 8;

/// The job this rank belongs to: the launcher's environment, with what `args` gives on
/// top; `None` without a launcher.
pub fn job(args: &JobArgs) -> Result<Option<JobMember>> {
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let found = from_environment(var, hydra_job_id);
    let rank = args.rank.or(found.as_ref().map(|f| f.rank));
    let size = args.job_size.or(found.as_ref().map(|f| f.size));
    let id = args.job.clone().or(found.as_ref().and_then(|f| f.id.clone()));
    let (id, rank, size) = match (id, rank, size) {
        (None, None, _) => return Ok(None),
        (Some(id), Some(rank), Some(size)) => (id, rank, size),
        (None, Some(rank), _) => {
            eprintln!(
                "sdt: warning: the launcher says this is rank {rank} but gives no job id, so the run is not \
                 grouped with its job; `sdt run --job ID` names the job"
            );
            return Ok(None);
        }
        (Some(id), None, _) => {
            bail!("--job {id}: no rank in the environment (OMPI_COMM_WORLD_RANK, PMI_RANK, …)")
        }
        (Some(id), Some(rank), None) => bail!("--job {id}: rank {rank}, but the job's size is unknown"),
    };
    if rank >= size {
        bail!("rank {rank} of a job of {size}: the rank must be below the size");
    }
    let Some(id) = sdt_store::job_id(&id) else { bail!("the job id is empty") };
    Ok(Some(JobMember { id, rank, size, host: host_name() }))
}

/// What a launcher's environment says.
#[derive(Debug, PartialEq, Eq)]
struct Found {
    /// The job id as the launcher gives it (not yet made to fit the store's grammar).
    id: Option<String>,
    rank: u32,
    size: u32,
}

/// The rank, size and job id that the variables `var` reads give (see the module doc),
/// asking `hydra` for a Hydra job's id only when the variables are Hydra's.
fn from_environment(
    var: impl Fn(&str) -> Option<String>,
    hydra: impl FnOnce() -> Option<String>,
) -> Option<Found> {
    let number = |name: &str| var(name)?.trim().parse::<u32>().ok();
    let pair = |rank, size| Some((number(rank)?, number(size)?));
    if let Some((rank, size)) = pair("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE") {
        let id = var("PMIX_NAMESPACE").or_else(|| var("OMPI_MCA_ess_base_jobid"));
        let key = var("OMPI_MCA_orte_precondition_transports")
            .and_then(|key| u32::from_str_radix(key.get(..8)?, 16).ok());
        let id = match (id, key) {
            (Some(id), Some(key)) => Some(format!("{id}-{key}")),
            (id, _) => id,
        };
        return Some(Found { id, rank, size });
    }
    if let Some((rank, size)) = pair("PMI_RANK", "PMI_SIZE") {
        let id = hydra().or_else(|| slurm_job_id(&var));
        return Some(Found { id, rank, size });
    }
    let (rank, size) = pair("SLURM_PROCID", "SLURM_NTASKS")?;
    Some(Found { id: slurm_job_id(&var), rank, size })
}

/// `JOB.STEP` of a Slurm job step.
fn slurm_job_id(var: &impl Fn(&str) -> Option<String>) -> Option<String> {
    Some(format!("slurm-{}.{}", var("SLURM_JOB_ID")?, var("SLURM_STEP_ID")?))
}

/// The job id of the Hydra job this process was started in: from the `hydra_pmi_proxy`
/// that is its parent or a near ancestor.
fn hydra_job_id() -> Option<String> {
    let mut pid = i32::try_from(std::os::unix::process::parent_id()).ok()?;
    for _ in 0..MAX_ANCESTORS {
        let tid = Tid::new(pid)?;
        let args = sdt_procfs::parse_cmdline(&sdt_procfs::read(tid, "cmdline").ok()?);
        if let Some(id) = hydra_proxy_job(&args) {
            return Some(id);
        }
        let stat = sdt_procfs::read(tid, "stat").ok()?;
        pid = sdt_procfs::Stat::parse(&stat)?.ids()?.0;
    }
    None
}

/// `hydra-HOST-PORT-PGID` from a `hydra_pmi_proxy` command line; `None` for another
/// program.
fn hydra_proxy_job(args: &[String]) -> Option<String> {
    let program = args.first()?;
    if program.rsplit('/').next() != Some("hydra_pmi_proxy") {
        return None;
    }
    let value = |flag: &str| Some(args[args.iter().position(|a| a == flag)? + 1..].first()?.as_str());
    let (host, port) = value("--control-port")?.rsplit_once(':')?;
    Some(format!("hydra-{host}-{port}-{}", value("--pgid").unwrap_or("0")))
}

/// This host's name, as its UTS namespace says (a network-namespace "host" of the
/// tests has its own).
fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|name| name.trim().to_owned())
        .ok()
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "localhost".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(vars: &'a [(&str, &str)]) -> impl Fn(&str) -> Option<String> + 'a {
        |name| vars.iter().find(|(n, _)| *n == name).map(|(_, v)| (*v).to_owned())
    }

    #[test]
    fn open_mpi() {
        let vars = [
            ("OMPI_COMM_WORLD_RANK", "2"),
            ("OMPI_COMM_WORLD_SIZE", "3"),
            ("PMIX_NAMESPACE", "1142685697"),
            ("OMPI_MCA_ess_base_jobid", "1142685697"),
            ("OMPI_MCA_orte_precondition_transports", "66daefff9598d40f-ca2c8d7191b4cc32"),
            ("PMI_RANK", "9"),
        ];
        let found = from_environment(env(&vars), || panic!("not Hydra"));
        assert_eq!(found, Some(Found { id: Some("1142685697-1725624319".into()), rank: 2, size: 3 }));
        let vars =
            [("OMPI_COMM_WORLD_RANK", "0"), ("OMPI_COMM_WORLD_SIZE", "1"), ("OMPI_MCA_ess_base_jobid", "7")];
        assert_eq!(from_environment(env(&vars), || None).unwrap().id.as_deref(), Some("7"));
    }

    #[test]
    fn mpich_and_slurm() {
        let vars = [("PMI_RANK", "1"), ("PMI_SIZE", "2"), ("PMI_FD", "6"), ("SLURM_PROCID", "0")];
        let found = from_environment(env(&vars), || Some("hydra-vm-40261-0".into()));
        assert_eq!(found, Some(Found { id: Some("hydra-vm-40261-0".into()), rank: 1, size: 2 }));
        assert_eq!(from_environment(env(&vars), || None).unwrap().id, None);
        let vars =
            [("SLURM_PROCID", "3"), ("SLURM_NTASKS", "4"), ("SLURM_JOB_ID", "88"), ("SLURM_STEP_ID", "0")];
        let found = from_environment(env(&vars), || panic!("not Hydra"));
        assert_eq!(found, Some(Found { id: Some("slurm-88.0".into()), rank: 3, size: 4 }));
        assert_eq!(from_environment(env(&[("PMI_RANK", "x"), ("PMI_SIZE", "2")]), || None), None);
        assert_eq!(from_environment(env(&[]), || None), None);
    }

    #[test]
    fn hydra_proxies() {
        let args = |line: &str| line.split(' ').map(String::from).collect::<Vec<_>>();
        assert_eq!(
            hydra_proxy_job(&args(
                "/usr/bin/hydra_pmi_proxy --control-port vm:40261 --rmk user --launcher ssh --pgid 0 --proxy-id 0"
            ))
            .as_deref(),
            Some("hydra-vm-40261-0")
        );
        assert_eq!(hydra_proxy_job(&args("/bin/sh -c x --control-port vm:1")), None);
        assert_eq!(hydra_proxy_job(&args("hydra_pmi_proxy --control-port")), None);
        assert_eq!(hydra_proxy_job(&[]), None);
    }
}
