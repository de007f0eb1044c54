//! MPI jobs on one host (shared memory): each rank under `sdt run`, its message history
//! read back from its run and checked against the others'; the programs print what they
//! print without SDT.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use sdt_history::{Event, EventKind, RankHistory};
use sdt_store::Store;
use sdt_test_harness::Skip;

use crate::harness::{Sdt, describe, stdout, workspace};

/// Ranks of every job.
const RANKS: u32 = 3;

/// An MPI implementation's compilers (C and Fortran) and launcher, as Debian names them.
struct Mpi {
    cc: &'static str,
    fc: &'static str,
    run: &'static str,
}

const OPEN_MPI: Mpi = Mpi { cc: "mpicc.openmpi", fc: "mpif90.openmpi", run: "mpirun.openmpi" };
const MPICH: Mpi = Mpi { cc: "mpicc.mpich", fc: "mpif90.mpich", run: "mpirun.mpich" };

impl Mpi {
    /// `Ok` if both tools run; otherwise the [`Skip`] saying so.
    fn check(&self) -> Result<(), Skip> {
        for tool in [self.cc, self.run] {
            if Command::new(tool).arg("--version").output().is_err() {
                return Err(Skip::new(
                    "MPI",
                    format!("{tool} is not installed"),
                    "apt-get install openmpi-bin libopenmpi-dev mpich libmpich-dev",
                ));
            }
        }
        Ok(())
    }

    /// `Ok` if the Fortran compiler runs too (gfortran, beside MPI's wrapper).
    fn check_fortran(&self) -> Result<(), Skip> {
        self.check()?;
        if !Command::new(self.fc).arg("--version").output().is_ok_and(|o| o.status.success()) {
            return Err(Skip::new(
                "gfortran",
                format!("{} finds no Fortran compiler", self.fc),
                "apt-get install gfortran",
            ));
        }
        Ok(())
    }

    /// `sdt/tests/programs/mpi/NAME.c`, or `NAME.f90` with the Fortran compiler,
    /// compiled into `dir`.
    fn compile(&self, name: &str, dir: &Path) -> PathBuf {
        let sources = workspace().join("sdt/tests/programs/mpi");
        let fortran = sources.join(format!("{name}.f90"));
        let (compiler, source, flags): (_, _, &[&str]) = match fortran.exists() {
            // MPICH's `use mpi` checks argument ranks, which MPI's choice buffers break.
            true => (self.fc, fortran, &["-fallow-argument-mismatch"]),
            false => (self.cc, sources.join(format!("{name}.c")), &[]),
        };
        let out = dir.join(name);
        let built = Command::new(compiler)
            .args(["-O1", "-g"])
            .args(flags)
            .arg("-o")
            .arg(&out)
            .arg(&source)
            .output()
            .unwrap();
        assert!(built.status.success(), "{}", describe(&built));
        out
    }

    /// `mpirun -np RANKS [PREFIX…] PROGRAM ARGS`, on this host.
    fn launch(&self, prefix: &[&str], program: &Path, args: &[&str]) -> Output {
        let mut cmd = Command::new(self.run);
        if self.run == OPEN_MPI.run {
            cmd.args(["--oversubscribe", "--allow-run-as-root", "--mca", "btl", "self,vader"]);
        }
        let out =
            cmd.args(["-np", &RANKS.to_string()]).args(prefix).arg(program).args(args).output().unwrap();
        assert!(out.status.success(), "{}", describe(&out));
        out
    }
}

/// Runs `name` under `mpirun` with and without `sdt run` (with `sdt_args`); checks that
/// it prints the same lines, and returns each rank's history, in rank order, with the
/// `mpi_events` of each rank's snapshots.
fn run_job(mpi: &Mpi, name: &str, args: &[&str], sdt_args: &[&str]) -> Vec<(RankHistory, Vec<u64>)> {
    let sdt = Sdt::new();
    let program = mpi.compile(name, sdt.dir.path());
    let plain = mpi.launch(&[], &program, args);
    let binary = Path::new(env!("CARGO_BIN_EXE_sdt"));
    let store = sdt.store();
    let mut prefix = vec![binary.to_str().unwrap(), "run", "-q", "--store", store.to_str().unwrap()];
    prefix.extend(sdt_args);
    prefix.push("--");
    let traced = mpi.launch(&prefix, &program, args);
    let lines = |out: &Output| {
        let mut lines: Vec<String> = stdout(out).lines().map(str::to_owned).collect();
        lines.sort();
        lines
    };
    assert_eq!(lines(&traced), lines(&plain), "the program printed otherwise under sdt");
    // One run per rank, each in its own run of the shared store.
    let store = Store::open(&store).unwrap();
    let mut ranks: Vec<(RankHistory, Vec<u64>)> = store
        .run_ids()
        .unwrap()
        .iter()
        .map(|id| {
            let run = store.open_run(id).unwrap();
            let history = sdt_history::read_run(&run).unwrap().expect("the rank recorded a history");
            // The rank's sdt left the history packed, a few bytes an event.
            let events = std::fs::read(run.dir().join("mpi-events")).unwrap();
            assert!(sdt_history::packed::is_packed(&events), "rank {}: mpi-events not packed", history.rank);
            let most = 256 + 8 * history.events.len();
            assert!(
                events.len() <= most,
                "rank {}: {} bytes for {} events",
                history.rank,
                events.len(),
                history.events.len()
            );
            let counts = run
                .snapshots()
                .unwrap()
                .map(|entry| {
                    run.read_meta(entry.unwrap().seq).unwrap().0.mpi_events.expect("an MPI rank's snapshot")
                })
                .collect();
            (history, counts)
        })
        .collect();
    ranks.sort_by_key(|(h, _)| h.rank);
    assert_eq!(ranks.iter().map(|(h, _)| h.rank).collect::<Vec<_>>(), (0..RANKS).collect::<Vec<_>>());
    check_history(&ranks);
    ranks
}

/// What holds in every clean job: Init first, Finalize last, nobody blocked at the end,
/// every receive's `matched` a send of its peer with the same tag, communicator and
/// bytes, every snapshot's event count within the history.
fn check_history(ranks: &[(RankHistory, Vec<u64>)]) {
    for (h, counts) in ranks {
        assert_eq!(h.size, RANKS);
        let kinds: Vec<EventKind> = h.events.iter().map(|e| e.kind).collect();
        assert_eq!(kinds.first(), Some(&EventKind::Init), "rank {}", h.rank);
        assert_eq!(kinds.last(), Some(&EventKind::Finalize), "rank {}", h.rank);
        assert_eq!(kinds.iter().filter(|&&k| k == EventKind::Init).count(), 1);
        assert!(h.blocked.is_none(), "rank {} ended blocked: {:?}", h.rank, h.blocked);
        for &count in counts {
            assert!(count <= h.events.len() as u64, "rank {}: snapshot at {count} events", h.rank);
        }
        for e in h.events.iter().filter(|e| e.kind.receives()) {
            let peer = e.peer.expect("a receive's actual source");
            let seq = e.matched.expect("a receive names its send");
            let (sender, _) = &ranks[peer as usize];
            let send = &sender.events[seq as usize];
            assert!(send.kind.sends(), "rank {} event {} matched {send:?}", h.rank, e.seq);
            assert_eq!(send.peer, Some(h.rank), "{send:?} → {e:?}");
            assert_eq!(send.tag, e.tag, "{send:?} → {e:?}");
            assert_eq!(send.bytes, e.bytes, "{send:?} → {e:?}");
            assert_eq!(sender.comms[send.comm as usize].ranks, h.comms[e.comm as usize].ranks);
            assert!(e.site.is_some(), "{e:?} has no call site");
        }
    }
    // Every send was received exactly once (the programs receive all they send).
    let mut taken: HashMap<(u32, u32), u32> = HashMap::new();
    for (h, _) in ranks {
        for e in h.events.iter().filter(|e| e.kind.receives()) {
            *taken.entry((e.peer.unwrap(), e.matched.unwrap())).or_default() += 1;
        }
    }
    for (h, _) in ranks {
        for e in h.events.iter().filter(|e| e.kind.sends()) {
            assert_eq!(taken.get(&(h.rank, e.seq)), Some(&1), "{e:?} received once");
        }
    }
}

fn ring(mpi: &Mpi) -> Result<(), Skip> {
    mpi.check()?;
    let ranks = run_job(mpi, "ring", &["500"], &["--break", "round_done@100,300"]);
    for (h, counts) in &ranks {
        let sends = h.events.iter().filter(|e| e.kind == EventKind::Send).count();
        let recvs = h.events.iter().filter(|e| e.kind == EventKind::Recv).count();
        assert_eq!((sends, recvs), (500, 500), "rank {}", h.rank);
        let site = &h.sites[h.events[1].site.unwrap() as usize];
        assert!(site.module.ends_with("/ring"), "{site:?}");
        // After round r, a rank has recorded Init and two events per round.
        assert_eq!(counts, &[1 + 2 * 100, 1 + 2 * 300], "rank {}", h.rank);
    }
    Ok(())
}

fn a_ring_under_open_mpi_records_every_message_and_its_send() -> Result<(), Skip> {
    ring(&OPEN_MPI)
}

fn a_ring_under_mpich_records_every_message_and_its_send() -> Result<(), Skip> {
    ring(&MPICH)
}

fn wildcard_receives_record_the_source_that_matched() -> Result<(), Skip> {
    OPEN_MPI.check()?;
    let ranks = run_job(&OPEN_MPI, "gather", &[], &[]);
    let (root, _) = &ranks[0];
    let posted: Vec<_> = root.events.iter().filter(|e| e.kind == EventKind::Irecv).collect();
    assert_eq!(posted.len(), 2 * 3);
    assert!(posted.iter().all(|e| e.any_source && e.any_tag && e.peer.is_none() && e.tag.is_none()));
    let done: Vec<_> = root.events.iter().filter(|e| e.kind == EventKind::RecvDone).collect();
    assert_eq!(done.len(), 6);
    for e in &done {
        assert!(e.any_source && e.any_tag);
        let posted = &root.events[e.post.unwrap() as usize];
        assert_eq!(posted.kind, EventKind::Irecv);
        // Rank r's k-th message has tag 10 + k and 1 + 4r + k ints.
        let (peer, tag) = (e.peer.unwrap(), e.tag.unwrap());
        assert_eq!(e.bytes, 4 * u64::from(1 + 4 * peer + (tag as u32 - 10)), "{e:?}");
    }
    Ok(())
}

fn probes_and_collectives_are_recorded() -> Result<(), Skip> {
    OPEN_MPI.check()?;
    let ranks = run_job(&OPEN_MPI, "probes", &[], &[]);
    let (root, _) = &ranks[0];
    let probes: Vec<_> = root.events.iter().filter(|e| e.kind == EventKind::Probe).collect();
    assert_eq!(probes.first().map(|p| (p.peer, p.tag)), Some((Some(1), Some(42))));
    assert_eq!(probes.last().map(|p| (p.peer, p.tag)), Some((Some(2), Some(5))));
    let collectives = |h: &RankHistory| -> Vec<&str> {
        h.events
            .iter()
            .filter(|e| matches!(e.kind, EventKind::Collective(_)))
            .map(|e| e.kind.name())
            .collect()
    };
    let expected = [
        "bcast",
        "reduce",
        "allreduce",
        "scan",
        "gather",
        "scatter",
        "allgather",
        "alltoall",
        "allreduce",
        "barrier",
        "barrier",
    ];
    for (h, _) in &ranks {
        assert_eq!(collectives(h), expected, "rank {}", h.rank);
        let bcast = h.events.iter().find(|e| e.kind.name() == "bcast").unwrap();
        assert_eq!(bcast.peer, Some(RANKS - 1));
        // The split communicator: the ranks of this one's parity, highest first.
        let half = h.events.iter().find(|e| e.kind.name() == "barrier").unwrap();
        let members: Vec<u32> = (0..RANKS).rev().filter(|r| r % 2 == h.rank % 2).collect();
        assert_eq!(h.comms[half.comm as usize].ranks, members);
        // The non-blocking ones: each post, then its completion naming it, in the Waitall.
        let names: Vec<&str> =
            h.events.iter().filter(|e| e.kind.collective().is_some()).map(|e| e.kind.name()).collect();
        assert_eq!(
            names[names.len() - 5..],
            ["iallreduce", "ibarrier", "allreduce_done", "barrier_done", "barrier"]
        );
        for done in h.events.iter().filter(|e| matches!(e.kind, EventKind::CollectiveDone(_))) {
            let post = &h.events[done.post.unwrap() as usize];
            assert_eq!(post.kind, EventKind::ICollective(done.kind.collective().unwrap()), "{done:?}");
            assert_eq!(done.site, post.site);
        }
        // A send's completion is placed at its send's line, not elsewhere.
        for done in h.events.iter().filter(|e| e.kind == EventKind::SendDone) {
            let post = &h.events[done.post.unwrap() as usize];
            assert_eq!((post.kind, done.site), (EventKind::Isend, post.site), "{done:?}");
        }
    }
    // Every completion of the Iallreduce follows every rank's post of it, and no rank's
    // post follows another's.
    let history = sdt_history::History { ranks: ranks.iter().map(|(h, _)| h.clone()).collect() };
    let clocks = sdt_history::clock::compute(&history).unwrap();
    let of =
        |h: &RankHistory, kind: EventKind| (h.rank, h.events.iter().find(|e| e.kind == kind).unwrap().seq);
    let allreduce = sdt_history::CollectiveKind::Allreduce;
    for (a, _) in &ranks {
        for (b, _) in &ranks {
            let (post, done) =
                (of(a, EventKind::ICollective(allreduce)), of(b, EventKind::CollectiveDone(allreduce)));
            assert!(clocks.happened_before(post, done), "{post:?} → {done:?}");
            if a.rank != b.rank {
                assert!(clocks.concurrent(post, of(b, EventKind::ICollective(allreduce))));
            }
        }
    }
    Ok(())
}

/// Packed and wrapped messages meeting each other, large ones, and sends whose requests
/// the program freed: the program prints what it prints without SDT, every message is
/// matched to its send, and the freed sends are recorded as completed.
fn messages_of_every_shape_arrive_as_sent() -> Result<(), Skip> {
    OPEN_MPI.check()?;
    let ranks = run_job(&OPEN_MPI, "shapes", &[], &[]);
    let completed = |h: &RankHistory| h.events.iter().filter(|e| e.kind == EventKind::SendDone).count();
    assert_eq!(completed(&ranks[0].0), 1, "rank 0's freed send");
    assert_eq!(completed(&ranks[2].0), 1, "rank 2's freed send");
    let large = ranks[2].0.events.iter().find(|e| e.kind == EventKind::RecvDone).unwrap();
    assert_eq!(large.bytes, 800_000);
    Ok(())
}

/// Persistent requests and matched probes, under Open MPI and MPICH: every message
/// arrives as sent (the program prints the same as without SDT), and each is recorded
/// and matched to its send, flagged as a route a replay cannot choose.
fn persistent_requests_and_matched_probes_arrive_as_sent() -> Result<(), Skip> {
    for mpi in [&OPEN_MPI, &MPICH] {
        mpi.check()?;
        let ranks = run_job(mpi, "persistent", &[], &[]);
        let of = |rank: usize, kind: EventKind| -> Vec<&Event> {
            ranks[rank].0.events.iter().filter(|e| e.kind == kind).collect()
        };
        // Two persistent sends a round, three rounds; each started send completes.
        let started = of(0, EventKind::Isend);
        assert_eq!(started.len(), 6, "{:?}", mpi.cc);
        assert!(started.iter().all(|e| e.fixed_route));
        assert_eq!(of(0, EventKind::SendDone).len(), 6);
        // Rank 1's persistent receives took rank 0's sends, round by round.
        let taken: Vec<Option<u32>> = of(1, EventKind::RecvDone).iter().map(|e| e.matched).collect();
        let sent: Vec<Option<u32>> = started.iter().map(|e| Some(e.seq)).collect();
        assert_eq!(taken, sent, "{:?}", mpi.cc);
        // Rank 0's plain receives took rank 1's persistent answers.
        assert!(of(0, EventKind::Recv).iter().all(|e| e.peer == Some(1) && e.matched.is_some()));
        // Rank 2's matched receives: both probed, both taken, sizes without the header.
        let probes = of(2, EventKind::Probe);
        assert_eq!(probes.len(), 2);
        assert!(probes.iter().all(|e| e.fixed_route && e.peer == Some(0)));
        let matched = [of(2, EventKind::Recv), of(2, EventKind::RecvDone)].concat();
        assert_eq!(
            matched.iter().map(|e| (e.tag, e.bytes)).collect::<Vec<_>>(),
            [(Some(4), 4), (Some(5), 12)]
        );
        assert!(matched.iter().all(|e| e.fixed_route && e.matched.is_some()));
    }
    Ok(())
}

/// Fortran ranks, with `use mpi` (mpif.h's bindings) and with `use mpi_f08`, under Open
/// MPI (whose Fortran bindings call PMPI_* past the C wrappers) and MPICH: each job
/// prints what it prints without SDT, every message is matched to its send, and every
/// event's call site is a line of the Fortran program, not of MPI's Fortran library.
fn fortran_ranks_record_their_history_and_lines() -> Result<(), Skip> {
    for mpi in [&OPEN_MPI, &MPICH] {
        mpi.check_fortran()?;
        for program in ["fortran", "fortran08"] {
            let ranks = run_job(mpi, program, &[], &[]);
            for (h, _) in &ranks {
                for e in &h.events {
                    let site = &h.sites[e.site.expect("every event has a site") as usize];
                    assert!(
                        site.module.ends_with(&format!("/{program}")),
                        "{program}, {}: {e:?} at {site:?}",
                        mpi.fc
                    );
                }
            }
            let (root, _) = &ranks[0];
            let count = |kind: EventKind| root.events.iter().filter(|e| e.kind == kind).count();
            let wildcards =
                root.events.iter().filter(|e| e.kind == EventKind::RecvDone && e.any_source).count();
            assert!(count(EventKind::Probe) >= 1, "{program}, {}: {:?}", mpi.fc, root.events);
            assert_eq!(wildcards, if program == "fortran" { 2 } else { 3 }, "{program}, {}", mpi.fc);
            let collectives: Vec<&str> = root
                .events
                .iter()
                .filter(|e| matches!(e.kind, EventKind::Collective(_) | EventKind::ICollective(_)))
                .map(|e| e.kind.name())
                .collect();
            let expected: &[&str] = match program {
                "fortran" => &[
                    "bcast",
                    "allreduce",
                    "reduce",
                    "gather",
                    "allgather",
                    "alltoall",
                    "iallreduce",
                    "ibarrier",
                    "barrier",
                ],
                _ => &["allreduce", "ibarrier", "barrier"],
            };
            assert_eq!(collectives, expected, "{program}, {}", mpi.fc);
        }
    }
    Ok(())
}

sdt_test_harness::tests![
    fortran_ranks_record_their_history_and_lines,
    persistent_requests_and_matched_probes_arrive_as_sent,
    messages_of_every_shape_arrive_as_sent,
    a_ring_under_open_mpi_records_every_message_and_its_send,
    a_ring_under_mpich_records_every_message_and_its_send,
    wildcard_receives_record_the_source_that_matched,
    probes_and_collectives_are_recorded
];
