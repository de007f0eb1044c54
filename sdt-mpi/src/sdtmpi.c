/*
 * sdtmpi.c: SDT's MPI interposition library, on MPI's profiling interface (PMPI).
 *
 * `sdt run` preloads it into an MPI program (LD_PRELOAD=/proc/self/fd/N, a sealed memfd)
 * and hands it three descriptors of files in the rank's run directory:
 * SDT_MPI_EVENTS_FD, SDT_MPI_COMMS_FD, SDT_MPI_SITES_FD. It records every point-to-point
 * event, probe and collective of the rank (a non-blocking collective as its post and
 * its completion), and an MPI_Abort or a fatal MPI error that ends it, in the layout of
 * sdt-history/src/format.rs (the one place that defines it), and carries a small header
 * with every message: the sender's event number (seq), so that a receive records which
 * send it took.
 *
 * Because this code runs inside the user's ranks, the following rules must be followed:
 *
 * - Only PMPI_* functions are called, never MPI_*: the library must not see itself.
 *   (The Fortran bindings of fortran.c call the C wrappers here, as MPICH's own do.)
 * - What the program sees is what it would see without SDT: return codes, statuses
 *   (MPI_Get_count counts the user's data, not the header), error handlers (a
 *   truncation is recorded, then the user's handler runs), and its environment (the
 *   library takes itself out of LD_PRELOAD and its descriptors are close-on-exec, so
 *   children inherit nothing of SDT).
 * - Recording never fails the program: without its files, or when the disk is full, the
 *   library stops recording but still sends the header, which every rank of the job
 *   expects.
 * - A record is complete before the header's count passes it (release store): a
 *   capture stops every thread at any instruction and reads the count as the last
 *   event. Records, tables and side files are written under one mutex where threads
 *   may call MPI at once (MPI_THREAD_MULTIPLE; with a lower level MPI's own rules keep
 *   the calls apart, and the mutex is skipped); the `blocked` slot is written without
 *   it (one slot per rank).
 * - Side-file lines are appended before any record names them.
 *
 * Replay (`sdt run --replay`, SDT_MPI_REPLAY_FD: the job's replay record, laid out as
 * sdt-history/src/replay.rs says): every rank duplicates MPI_COMM_WORLD into a shadow
 * communicator at MPI_Init. A send the record names travels on the shadow (to the world
 * rank of its destination), and the receive the record gives it receives there, from the
 * recorded source and tag: no other receive can take it, and it takes nothing else
 * (messages of one sender and tag arrive in order). Unrecorded receives take, among the
 * messages left on their communicator, the ones they took before. Waitany/Testany/
 * Waitsome/Testsome complete the recorded request when the next completion is recorded;
 * wildcard probes are narrowed to what they saw (and an Iprobe that found nothing before
 * finds nothing). A recorded receive whose piggyback is not the recorded send's is flagged
 * FLAG_DIVERGED and said on stderr. The receive seq numbering is the recorded run's, as
 * the program does the same thing: replay assumes one thread calls MPI. Not replayed:
 * MPI_Sendrecv_replace on recorded messages, messages on inter-communicators.
 *
 * Stopping at a cut (`sdt replay --until`, `sdt rollback --replay`; SDT_MPI_STOP_AFTER: a
 * count of events, SDT_MPI_STOP_CAPTURE): in a replay, the first MPI call the rank makes
 * once it has recorded that many events does not happen. The rank traps to `sdt run`
 * for a snapshot there (with SDT_MPI_STOP_CAPTURE: a breakpoint of SDT's own, class and
 * id -1, that every rank reaches once, so the ranks' snapshots form one global
 * snapshot), then finalizes MPI with the others (which keeps its messages moving for
 * the ranks not at their stop yet) and exits 0: the job ends at the cut. A call that
 * records several events (Waitall, Sendrecv) is not split: a cut inside one stops the
 * rank after it, which `sdt replay` reports.
 *
 * Ending the job (SDT_MPI_END_CAPTURE, set by `sdt run` under ptrace): a rank that calls
 * MPI_Abort, or that an MPI error ends under MPI_ERRORS_ARE_FATAL, traps for a snapshot
 * first, at another breakpoint of SDT's own (class -1, id -2, attrs "sdt=abort,code=N"
 * or "sdt=fatal_error,code=N"), after its abort event is recorded: the launcher kills
 * the other ranks after, and each of those gets the snapshot of a fatal signal.
 *
 * Persistent requests (MPI_Send_init, MPI_Recv_init, MPI_Start[all]) carry the piggyback
 * in a derived type made at their init, pointing at their entry's header, which each
 * start fills; matched probes (MPI_[I]mprobe) remember the communicator of the message
 * for its MPI_[I]mrecv. The route of both is fixed before the library could choose it,
 * so their events are flagged FLAG_FIXED_ROUTE and a replay does not enforce races on
 * them. Not covered: MPI_Bsend's buffer accounting (the header adds 8 bytes to each
 * buffered message). Fortran programs are recorded through fortran.c.
 */
#define _GNU_SOURCE
#include <cpuid.h>
#include <sdt.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <mpi.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

/* ---- The file layout (sdt-history/src/format.rs) ---- */

#define FORMAT_VERSION 1
#define HEADER_SIZE 4096
#define NONE UINT32_MAX

enum kind {
	KIND_NONE = 0,
	KIND_INIT = 1,
	KIND_FINALIZE = 2,
	KIND_SEND = 3,
	KIND_ISEND = 4,
	KIND_RECV = 5,
	KIND_IRECV = 6,
	KIND_RECV_DONE = 7,
	KIND_SEND_DONE = 8,
	KIND_PROBE = 9,
	KIND_ABORT = 10,
	KIND_FATAL_ERROR = 11,
	KIND_BARRIER = 32,
	KIND_BCAST,
	KIND_SCATTER,
	KIND_REDUCE,
	KIND_GATHER,
	KIND_ALLREDUCE,
	KIND_ALLGATHER,
	KIND_ALLTOALL,
	KIND_REDUCE_SCATTER,
	KIND_SCAN,
	KIND_OTHER_COLLECTIVE,
};
/* A non-blocking collective's post (MPI_Iallreduce, …) and its completion (in a Wait*
 * or Test*), for the collective KIND_BARRIER + n. */
#define KIND_POSTED(k) ((uint8_t)((k) + 32))
#define KIND_DONE(k) ((uint8_t)((k) + 64))

enum flag { FLAG_ANY_SOURCE = 1, FLAG_ANY_TAG = 2, FLAG_TRUNCATED = 4, FLAG_DIVERGED = 8, FLAG_FIXED_ROUTE = 16 };

struct header {
	char magic[8];
	uint32_t version;
	uint32_t record_size;
	uint32_t rank;
	uint32_t size;
	uint64_t count;
	uint32_t blocked_kind;
	uint16_t blocked_comm;
	uint16_t zero;
	int32_t blocked_peer;
	int32_t blocked_tag;
	uint32_t blocked_site;
	uint32_t blocked_since_us;
	uint64_t init_realtime_ns;
};
_Static_assert(sizeof(struct header) == 64, "header layout");

struct record {
	uint8_t kind;
	uint8_t flags;
	uint16_t comm;
	int32_t peer;
	int32_t tag;
	uint32_t bytes;
	uint32_t matched;
	uint32_t post;
	uint32_t site;
	uint32_t time_us;
};
_Static_assert(sizeof(struct record) == 32, "record layout");

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

/* Records added to the file at a time. */
#define CHUNK_RECORDS 32768

/* What travels in front of every message's data. */
struct piggyback {
	uint32_t seq; /* the sender's send event */
	uint32_t magic;
};
#define PIGGYBACK_MAGIC 0x53445431u /* "SDT1" */
#define PIGGYBACK_BYTES ((int)sizeof(struct piggyback))

/* ---- State ---- */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
/* Whether threads may call MPI at once (MPI_THREAD_MULTIPLE): then the mutex is taken.
 * Until MPI_Init says, it is. */
static int threads_call_at_once = 1;

static inline void lock_tables(void)
{
	if (threads_call_at_once)
		pthread_mutex_lock(&lock);
}

static inline void unlock_tables(void)
{
	if (threads_call_at_once)
		pthread_mutex_unlock(&lock);
}
static int events_fd = -1, comms_fd = -1, sites_fd = -1;
/* Recording is on: the files are mapped and writable. */
static int recording;
static struct header *header;
static struct record *records; /* mapped from offset HEADER_SIZE */
static uint64_t capacity;      /* records mapped */
static uint64_t next_seq;
static struct timespec init_time, init_wall;
static int world_rank, world_size;

/* A communicator the rank used: its id in mpi-comms and its members' world ranks. */
struct comm {
	MPI_Comm handle;
	int live; /* not freed since */
	uint16_t id;
	int size, remote_size;
	int *world, *remote_world; /* remote: an inter-communicator's other group */
	MPI_Errhandler user_handler;
};
static struct comm *comms;
static int ncomms, comms_cap;
static MPI_Errhandler our_handler = MPI_ERRHANDLER_NULL;

/* A posted non-blocking operation, until its completion. */
struct pending {
	struct pending *next;
	MPI_Request request;
	uint32_t post;    /* seq of the Isend/Irecv */
	int receive;      /* else a send */
	int wrapped;      /* the message carries the piggyback */
	struct comm *comm;
	int peer, tag;    /* as posted (world rank; -1 for any) */
	uint8_t flags;
	uint8_t collective; /* a non-blocking collective's KIND_* (0: a send or receive) */
	uint32_t site;
	const struct enforced *replay; /* the recorded match of a posted receive */
	struct piggyback header;
	/* A packed message (see packable): `packed_bytes` of data after the piggyback in
	 * `packed`; a receive copies them out to `user` when it completes. -1: not packed. */
	int64_t packed_bytes;
	void *user;
	/* A persistent request: it stays in the table from its init to MPI_Request_free,
	 * `active` from a start to its completion, with the wrapped type `own_type` (made
	 * at its init, pointing at `header`) and `bytes` of the user's data a start moves. */
	int persistent, active;
	MPI_Datatype own_type;
	int64_t bytes;
	unsigned char packed[];
};
#define PENDING_BUCKETS 4096
static struct pending *pending[PENDING_BUCKETS];

/* Operations the program freed before they completed (MPI_Request_free): their
 * piggyback and packed data must stay until MPI is done with them, so they are kept
 * here, with their requests, and tested whenever an operation is posted (and waited for
 * at MPI_Finalize); a completed one is recorded as if the program had waited for it.
 * Under the lock. */
static struct pending *detached;
static void reap_detached(int wait);
static struct pending *find(MPI_Request request);

/* ---- Replay state (set at MPI_Init, read-only after) ---- */

/* A match the replay enforces: the rank's event `seq` (posted by `post`, NONE for a
 * blocking receive or a probe) takes the message of world rank `source` with `tag`, sent
 * as the source's event `send` (NONE for a probe). */
struct enforced {
	uint32_t seq, post, source, send;
	int32_t tag;
};
static int replay_fd = -1;
static int replaying;
static MPI_Comm shadow = MPI_COMM_NULL;
static struct enforced *by_seq, *by_key; /* sorted by seq, and by where they match */
static size_t nenforced;
static uint32_t *reserved_sends; /* the rank's sends the record names, sorted */
static size_t nreserved;

/* The cut the rank stops at: its events before the stop (NO_STOP: none). Set from the
 * environment at load, armed once the replay is (MPI_Init). */
#define NO_STOP UINT64_MAX
static uint64_t stop_wanted = NO_STOP, stop_after = NO_STOP;
static int stop_capture;
static void stop_here(void);
/* Whether the rank traps for a snapshot as it ends the job (not under the module). */
static int end_capture;

/* At the entry of every call that records an event: whether the rank is at its cut. */
#define STOP_POINT()                                                                                        \
	do {                                                                                                \
		if (__builtin_expect(stop_after != NO_STOP, 0) &&                                           \
		    __atomic_load_n(&next_seq, __ATOMIC_RELAXED) >= stop_after)                              \
			stop_here();                                                                        \
	} while (0)

/* The call site of a call made through a Fortran binding (fortran.c): the Fortran
 * caller's return address, set while the binding runs. The C wrappers take it as
 * their caller instead of their own return address, which lies in the binding. */
__thread void *fortran_site __attribute__((visibility("hidden")));

/* The call site of the MPI call being recorded: a C wrapper's caller, or the Fortran
 * caller of the binding that called it. */
#define CALLER() (fortran_site ? fortran_site : __builtin_return_address(0))

/* A call site: a return address and its id in mpi-sites. */
struct site {
	uintptr_t address;
	uint32_t id;
};
static struct site *sites;
static size_t sites_cap, nsites;

/* The call in progress on this thread, for the error handler. */
struct call {
	uint8_t kind;
	uint8_t truncated; /* recorded by the error handler */
	struct comm *comm;
	int peer, tag;
	uint8_t flags;
	uint32_t bytes;
	uint32_t site;
	uint32_t post; /* for a completion: the Irecv (NONE otherwise) */
	const struct piggyback *pb; /* where a receive's piggyback lands (NULL: none) */
};
static __thread struct call *current;

/* ---- Small helpers ---- */

/* Event times come from the CPU's time-stamp counter where it ticks at one rate on
 * every CPU (an invariant TSC), a few nanoseconds a read against a few tens for
 * clock_gettime: its rate is measured against CLOCK_MONOTONIC over MPI_Init (which takes
 * milliseconds). Elsewhere, or when MPI_Init was too quick to measure, clock_gettime. */
static uint64_t tsc_before_init, tsc_at_init;
static struct timespec mono_before_init;
static double us_per_tsc; /* 0: not used */

static uint64_t read_tsc(void)
{
#if defined(__x86_64__)
	return __rdtsc();
#else
	return 0;
#endif
}

static int invariant_tsc(void)
{
#if defined(__x86_64__)
	unsigned a, b, c, d;
	return __get_cpuid(0x80000007, &a, &b, &c, &d) && (d & (1u << 8));
#else
	return 0;
#endif
}

static int64_t ns_between(const struct timespec *from, const struct timespec *to)
{
	return (int64_t)(to->tv_sec - from->tv_sec) * 1000000000 + (to->tv_nsec - from->tv_nsec);
}

static void before_init(void)
{
	clock_gettime(CLOCK_MONOTONIC, &mono_before_init);
	tsc_before_init = read_tsc();
}

/* Measures the TSC's rate over MPI_Init; called right after init_time is read. */
static void calibrate_tsc(void)
{
	tsc_at_init = read_tsc();
	int64_t ns = ns_between(&mono_before_init, &init_time);
	if (invariant_tsc() && tsc_before_init && ns >= 2000000 && tsc_at_init > tsc_before_init)
		us_per_tsc = (double)ns / 1000.0 / (double)(tsc_at_init - tsc_before_init);
}

/* The time every event of a call that records several takes (one MPI_Waitall's
 * completions, done together), held by hold_time; NO_TIME when none is held. */
#define NO_TIME UINT64_MAX
static __thread uint64_t held_us = NO_TIME;

static uint32_t now_us(void)
{
	if (held_us != NO_TIME)
		return (uint32_t)held_us;
	int64_t us;
	if (us_per_tsc > 0) {
		us = (int64_t)((double)(read_tsc() - tsc_at_init) * us_per_tsc);
	} else {
		struct timespec t;
		clock_gettime(CLOCK_MONOTONIC, &t);
		us = ns_between(&init_time, &t) / 1000;
	}
	return us < 0 ? 0 : us > UINT32_MAX ? UINT32_MAX : (uint32_t)us;
}

/* The time to a few milliseconds (the kernel's tick), for what needs no more: how long
 * a rank has been blocked. A fraction of a time-stamp counter read. */
static uint32_t coarse_us(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC_COARSE, &t);
	int64_t us = ns_between(&init_time, &t) / 1000;
	return us < 0 ? 0 : us > UINT32_MAX ? UINT32_MAX : (uint32_t)us;
}

/* Events recorded until release_time take the time now: one time-stamp counter read
 * for a call's many completions rather than one each. */
static void hold_time(void)
{
	held_us = now_us();
}

static void release_time(void)
{
	held_us = NO_TIME;
}

static uint32_t saturate(int64_t bytes)
{
	return bytes < 0 ? 0 : bytes > UINT32_MAX ? UINT32_MAX : (uint32_t)bytes;
}

/* The last gap-free predefined type seen (by packable), and its size: programs send one
 * or two types over and over, and a predefined type never changes or goes away. */
static __thread struct {
	MPI_Datatype type;
	int size, known;
} last_packable;

static int64_t type_bytes(int count, MPI_Datatype type)
{
	int size = 0;
	if (last_packable.known && type == last_packable.type)
		size = last_packable.size;
	else if (type == MPI_DATATYPE_NULL || PMPI_Type_size(type, &size) != MPI_SUCCESS)
		return 0;
	return (int64_t)count * size;
}

/* Writes all of `len` bytes, retrying on EINTR; 0 or -1. */
static int write_all(int fd, const char *buf, size_t len)
{
	while (len > 0) {
		ssize_t n = write(fd, buf, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

/* ---- The events file ---- */

/* Maps `want` records (the file grows by whole chunks); 0 or -1. Under the lock. */
static int map_records(uint64_t want)
{
	uint64_t cap = (want + CHUNK_RECORDS - 1) / CHUNK_RECORDS * CHUNK_RECORDS;
	size_t bytes = cap * sizeof(struct record);
	if (ftruncate(events_fd, HEADER_SIZE + (off_t)bytes) != 0)
		return -1;
	void *map;
	if (records)
		map = mremap(records, capacity * sizeof(struct record), bytes, MREMAP_MAYMOVE);
	else
		map = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, events_fd, HEADER_SIZE);
	if (map == MAP_FAILED)
		return -1;
	/* Fault the new records' pages in, writable, in one call rather than one fault per
	 * page as records reach them (Linux 5.14; an older kernel faults them as before). */
	size_t old_bytes = capacity * sizeof(struct record);
	madvise((char *)map + old_bytes, bytes - old_bytes, MADV_POPULATE_WRITE);
	records = map;
	capacity = cap;
	return 0;
}

/* Sets up the events file for this rank; recording stays off where it cannot. */
static void open_events(void)
{
	if (events_fd < 0 || comms_fd < 0 || sites_fd < 0)
		return;
	if (ftruncate(events_fd, HEADER_SIZE) != 0)
		return;
	void *map = mmap(NULL, HEADER_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, events_fd, 0);
	if (map == MAP_FAILED)
		return;
	header = map;
	if (map_records(CHUNK_RECORDS) != 0)
		return;
	memcpy(header->magic, "SDTMPIEV", 8);
	header->version = FORMAT_VERSION;
	header->record_size = sizeof(struct record);
	header->rank = (uint32_t)world_rank;
	header->size = (uint32_t)world_size;
	header->blocked_site = NONE;
	header->init_realtime_ns = (uint64_t)init_wall.tv_sec * 1000000000u + (uint64_t)init_wall.tv_nsec;
	recording = 1;
}

/* Appends a record and publishes it; returns its seq. Under the lock. */
static uint32_t append(struct record r)
{
	uint32_t seq = (uint32_t)next_seq;
	if (!recording)
		return next_seq++, seq;
	if (next_seq >= capacity && map_records(next_seq + 1) != 0) {
		recording = 0;
		return next_seq++, seq;
	}
	records[next_seq] = r;
	next_seq++;
	__atomic_store_n(&header->count, next_seq, __ATOMIC_RELEASE);
	return seq;
}

/* ---- Call sites ---- */

/* Appends the site line for `address`; 0 or -1. */
static int write_site(uint32_t id, uintptr_t address)
{
	Dl_info info;
	char exe[PATH_MAX];
	const char *module = "?";
	uintptr_t base = 0;
	if (dladdr((void *)address, &info) && info.dli_fname) {
		base = (uintptr_t)info.dli_fbase;
		module = info.dli_fname;
		/* The main program is named as it was run (argv[0]). */
		if (module[0] != '/') {
			ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
			if (n > 0) {
				exe[n] = 0;
				module = exe;
			}
		}
	}
	char line[PATH_MAX + 64];
	int n = snprintf(line, sizeof line, "%u 0x%lx %s\n", id, (unsigned long)(address - base),
			 module[0] ? module : "?");
	if (n < 0 || (size_t)n >= sizeof line)
		return -1;
	/* A newline in the module's name would end the line early. */
	for (char *c = strchr(line, ' ') + 1; c < line + n - 1; c++)
		if (*c == '\n')
			*c = '?';
	return write_all(sites_fd, line, (size_t)n);
}

/* The id of the call site at `address` (its return address), adding it to mpi-sites
 * on first sight. Under the lock. */
static uint32_t site_id(void *address)
{
	uintptr_t a = (uintptr_t)address;
	if (!recording || a == 0)
		return NONE;
	if (nsites * 2 >= sites_cap) {
		size_t cap = sites_cap ? sites_cap * 2 : 1024;
		struct site *grown = calloc(cap, sizeof *grown);
		if (!grown)
			return NONE;
		for (size_t i = 0; i < sites_cap; i++) {
			if (!sites[i].address)
				continue;
			size_t j = (sites[i].address * 0x9E3779B97F4A7C15ull >> 20) & (cap - 1);
			while (grown[j].address)
				j = (j + 1) & (cap - 1);
			grown[j] = sites[i];
		}
		free(sites);
		sites = grown;
		sites_cap = cap;
	}
	size_t i = (a * 0x9E3779B97F4A7C15ull >> 20) & (sites_cap - 1);
	while (sites[i].address && sites[i].address != a)
		i = (i + 1) & (sites_cap - 1);
	if (sites[i].address)
		return sites[i].id;
	uint32_t id = (uint32_t)nsites;
	if (write_site(id, a) != 0)
		return NONE;
	sites[i] = (struct site){ a, id };
	nsites++;
	return id;
}

/* ---- Communicators ---- */

/* The world ranks of `group`'s members, in group order (malloc'd). */
static int *world_ranks(MPI_Group group, int size)
{
	int *local = malloc(sizeof(int) * (size_t)size);
	int *world = malloc(sizeof(int) * (size_t)size);
	MPI_Group world_group;
	if (!local || !world || PMPI_Comm_group(MPI_COMM_WORLD, &world_group) != MPI_SUCCESS) {
		free(local);
		free(world);
		return NULL;
	}
	for (int i = 0; i < size; i++)
		local[i] = i;
	PMPI_Group_translate_ranks(group, size, local, world_group, world);
	PMPI_Group_free(&world_group);
	free(local);
	return world;
}

/* The entry of `handle`, made (and its line appended to mpi-comms) on first use.
 * Under the lock. NULL where it cannot be made. */
static struct comm *comm_of(MPI_Comm handle)
{
	for (int i = ncomms - 1; i >= 0; i--)
		if (comms[i].live && comms[i].handle == handle)
			return &comms[i];
	if (handle == MPI_COMM_NULL || ncomms > UINT16_MAX)
		return NULL;
	if (ncomms == comms_cap) {
		int cap = comms_cap ? comms_cap * 2 : 16;
		struct comm *grown = realloc(comms, sizeof *grown * (size_t)cap);
		if (!grown)
			return NULL;
		comms = grown;
		comms_cap = cap;
	}
	struct comm c = { .handle = handle, .live = 1, .id = (uint16_t)ncomms, .remote_size = 0 };
	/* A new communicator inherits the handler of the one it came from; the library does
	 * not follow which one that was, and takes the world's. */
	c.user_handler = ncomms ? comms[0].user_handler : MPI_ERRORS_ARE_FATAL;
	MPI_Group group;
	int inter = 0;
	PMPI_Comm_size(handle, &c.size);
	PMPI_Comm_group(handle, &group);
	c.world = world_ranks(group, c.size);
	PMPI_Group_free(&group);
	PMPI_Comm_test_inter(handle, &inter);
	if (inter) {
		PMPI_Comm_remote_size(handle, &c.remote_size);
		PMPI_Comm_remote_group(handle, &group);
		c.remote_world = world_ranks(group, c.remote_size);
		PMPI_Group_free(&group);
	}
	if (!c.world)
		return NULL;
	if (recording) {
		size_t cap = 16 + (size_t)c.size * 12;
		char *line = malloc(cap);
		size_t n = line ? (size_t)snprintf(line, cap, "%u ", c.id) : 0;
		for (int i = 0; line && i < c.size; i++)
			n += (size_t)snprintf(line + n, cap - n, i ? ",%d" : "%d", c.world[i]);
		if (!line || write_all(comms_fd, strcat(line, "\n"), n + 1) != 0)
			recording = 0;
		free(line);
	}
	comms[ncomms] = c;
	return &comms[ncomms++];
}

/* The world rank of `rank` in `c` (the remote group's for an inter-communicator);
 * -1 for MPI_ANY_SOURCE, MPI_PROC_NULL and the like. */
static int world_of(const struct comm *c, int rank)
{
	if (!c || rank < 0)
		return -1;
	if (c->remote_world)
		return rank < c->remote_size ? c->remote_world[rank] : -1;
	return rank < c->size ? c->world[rank] : -1;
}

/* ---- Recording ---- */

static struct record event(uint8_t kind, const struct comm *c, int peer, int tag, int64_t bytes, uint32_t site)
{
	return (struct record){
		.kind = kind,
		.comm = c ? c->id : 0,
		.peer = peer,
		.tag = tag < 0 ? -1 : tag,
		.bytes = saturate(bytes),
		.matched = NONE,
		.post = NONE,
		.site = site,
		.time_us = now_us(),
	};
}

/* Marks the rank as inside a blocking call (kind written last, cleared first). */
static void block(uint8_t kind, const struct comm *c, int peer, int tag, uint32_t site)
{
	if (!recording)
		return;
	header->blocked_comm = c ? c->id : 0;
	header->blocked_peer = peer;
	header->blocked_tag = tag < 0 ? -1 : tag;
	header->blocked_site = site;
	header->blocked_since_us = coarse_us();
	__atomic_store_n(&header->blocked_kind, kind, __ATOMIC_RELEASE);
}

static void unblock(void)
{
	if (recording)
		__atomic_store_n(&header->blocked_kind, KIND_NONE, __ATOMIC_RELEASE);
}

/* A derived type of the piggyback followed by the user's data, both at absolute
 * addresses (used with MPI_BOTTOM). */
static MPI_Datatype build_wrapped(struct piggyback *pb, const void *buf, int count, MPI_Datatype type)
{
	int lengths[2] = { PIGGYBACK_BYTES, count };
	MPI_Aint displacements[2];
	MPI_Datatype types[2] = { MPI_BYTE, type };
	MPI_Datatype wrapped;
	PMPI_Get_address(pb, &displacements[0]);
	PMPI_Get_address(buf, &displacements[1]);
	PMPI_Type_create_struct(2, lengths, displacements, types, &wrapped);
	PMPI_Type_commit(&wrapped);
	return wrapped;
}

/* Wrapped types of predefined datatypes, kept for reuse: programs send from and receive
 * into the same buffers again and again (and the piggyback of a blocking call sits at
 * the same stack address), while creating and committing a type costs more than a small
 * message. Per thread, so no lock; direct-mapped. A predefined type is never freed, so
 * an entry never goes stale; an evicted entry's type is freed at the next wrap, which
 * MPI allows while an operation still uses it. */
#define WRAPPED_CACHE 64
struct wrapped_entry {
	const void *pb, *buf; /* pb NULL: empty */
	int count;
	MPI_Datatype type, wrapped;
};
static __thread struct wrapped_entry wrapped_cache[WRAPPED_CACHE];
/* The type last evicted from the cache, freed at the next wrap: one operation may wrap
 * twice (MPI_Sendrecv, both halves before it starts), and its second wrap must not free
 * the first's type before the operation has it. */
static __thread MPI_Datatype evicted[1];
static __thread int nevicted;

static int predefined(MPI_Datatype type)
{
	int integers, addresses, types, combiner;
	return PMPI_Type_get_envelope(type, &integers, &addresses, &types, &combiner) == MPI_SUCCESS &&
	       combiner == MPI_COMBINER_NAMED;
}

/* The wrapped type of (pb, buf, count, type); give it back with unwrap_type, which frees
 * it unless the cache keeps it (`*cached`). Call it at most twice for one operation. */
static MPI_Datatype wrap(struct piggyback *pb, const void *buf, int count, MPI_Datatype type, int *cached)
{
	/* Evicted by an earlier wrap: of an operation that has started, or this one's first
	 * wrap, which evicts no type of this operation. */
	while (nevicted > 0)
		PMPI_Type_free(&evicted[--nevicted]);
	uintptr_t key = (uintptr_t)pb ^ ((uintptr_t)buf * 31) ^ ((uintptr_t)count * 131) ^ (uintptr_t)type;
	struct wrapped_entry *e = &wrapped_cache[(key * 0x9E3779B97F4A7C15ull >> 40) % WRAPPED_CACHE];
	if (e->pb == pb && e->buf == buf && e->count == count && e->type == type) {
		*cached = 1;
		return e->wrapped;
	}
	MPI_Datatype wrapped = build_wrapped(pb, buf, count, type);
	*cached = predefined(type);
	if (*cached) {
		if (e->pb)
			evicted[nevicted++] = e->wrapped;
		*e = (struct wrapped_entry){ pb, buf, count, type, wrapped };
	}
	return wrapped;
}

/* Frees the wrapped types this thread keeps, before MPI_Finalize (which MPICH would
 * otherwise end by warning of leaked datatypes). */
static void drop_wrapped(void)
{
	while (nevicted > 0)
		PMPI_Type_free(&evicted[--nevicted]);
	for (int i = 0; i < WRAPPED_CACHE; i++) {
		if (wrapped_cache[i].pb)
			PMPI_Type_free(&wrapped_cache[i].wrapped);
		wrapped_cache[i].pb = NULL;
	}
}

static void unwrap_type(MPI_Datatype *wrapped, int cached)
{
	if (!cached)
		PMPI_Type_free(wrapped);
}

/* Small messages of a predefined, gap-free type travel packed instead: the piggyback and
 * the data copied into one contiguous buffer of bytes, which the MPIs move on their fast
 * path for contiguous data (a derived type goes through their slower general one). The
 * other side may wrap or pack: both put the same bytes on the wire. */
#define PACK_MAX 4096
static __thread unsigned char pack_buffer[PIGGYBACK_BYTES + PACK_MAX];

/* The bytes of `count` elements of `type` if they can travel packed, else -1. */
static int64_t packable(int count, MPI_Datatype type)
{
	int size = 0;
	if (count < 0 || type == MPI_DATATYPE_NULL)
		return -1;
	if (last_packable.known && type == last_packable.type) {
		size = last_packable.size;
	} else {
		MPI_Aint lb = 0, extent = 0;
		if (PMPI_Type_size(type, &size) != MPI_SUCCESS || PMPI_Type_get_extent(type, &lb, &extent) != MPI_SUCCESS ||
		    lb != 0 || extent != size || !predefined(type))
			return -1;
		last_packable.type = type, last_packable.size = size, last_packable.known = 1;
	}
	return (int64_t)count * size > PACK_MAX ? -1 : (int64_t)count * size;
}

/* Makes a received message's status count the user's data only; returns its bytes.
 * `got`: the message's bytes, piggyback included, where the caller has them from MPI
 * already (a packed message's); -1: the status is asked. */
static int64_t unwrap_status(MPI_Status *status, int64_t got)
{
	if (got < 0) {
		MPI_Count bytes = 0;
		PMPI_Get_elements_x(status, MPI_BYTE, &bytes);
		got = bytes == MPI_UNDEFINED ? 0 : bytes;
	}
	if (got < PIGGYBACK_BYTES)
		return 0;
	PMPI_Status_set_elements_x(status, MPI_BYTE, got - PIGGYBACK_BYTES);
	return got - PIGGYBACK_BYTES;
}

/* Records a completed receive: `pb` is what came with it (NULL: none did), `got` as
 * unwrap_status takes it. */
static void record_receive(uint8_t kind, struct comm *c, MPI_Status *status, const struct piggyback *pb,
			   int64_t got, uint8_t flags, uint32_t post, uint32_t site, int error)
{
	int64_t bytes = pb ? unwrap_status(status, got) : 0;
	int peer = world_of(c, status->MPI_SOURCE);
	struct record r = event(kind, c, peer, status->MPI_TAG, bytes, site);
	r.flags = flags;
	r.post = post;
	if (pb && pb->magic == PIGGYBACK_MAGIC && peer >= 0)
		r.matched = pb->seq;
	int class = MPI_SUCCESS;
	if (error != MPI_SUCCESS)
		PMPI_Error_class(error, &class);
	if (class == MPI_ERR_TRUNCATE)
		r.flags |= FLAG_TRUNCATED;
	append(r);
}

static uint8_t wildcards(int source, int tag)
{
	return (source == MPI_ANY_SOURCE ? FLAG_ANY_SOURCE : 0) | (tag == MPI_ANY_TAG ? FLAG_ANY_TAG : 0);
}

/* ---- Replay ---- */

#define REPLAY_HEADER 40
#define REPLAY_ENTRY 24

/* Where an enforced match matches: its Irecv for a posted receive, else itself. */
static uint32_t match_key(const struct enforced *e)
{
	return e->post != NONE ? e->post : e->seq;
}

static int seq_order(const void *a, const void *b)
{
	uint32_t x = ((const struct enforced *)a)->seq, y = ((const struct enforced *)b)->seq;
	return (x > y) - (x < y);
}

static int key_order(const void *a, const void *b)
{
	uint32_t x = match_key(a), y = match_key(b);
	return (x > y) - (x < y);
}

static int u32_order(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return (x > y) - (x < y);
}

static uint32_t le32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Takes this rank's entries of the replay record (as receiver and as sender); 0 or -1. */
static int read_replay(void)
{
	struct stat st;
	if (fstat(replay_fd, &st) != 0 || st.st_size < REPLAY_HEADER)
		return -1;
	size_t size = (size_t)st.st_size;
	unsigned char *bytes = malloc(size);
	size_t got = 0;
	while (bytes && got < size) {
		ssize_t n = pread(replay_fd, bytes + got, size - got, (off_t)got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	uint64_t count = 0;
	if (bytes && got == size)
		count = (uint64_t)le32(bytes + 32) | (uint64_t)le32(bytes + 36) << 32;
	if (!bytes || got != size || memcmp(bytes, "SDTMPIRP", 8) != 0 || le32(bytes + 8) != 1 ||
	    le32(bytes + 12) != REPLAY_ENTRY || count != (size - REPLAY_HEADER) / REPLAY_ENTRY ||
	    (size - REPLAY_HEADER) % REPLAY_ENTRY != 0) {
		free(bytes);
		return -1;
	}
	by_seq = malloc(sizeof *by_seq * (count + 1));
	by_key = malloc(sizeof *by_key * (count + 1));
	reserved_sends = malloc(sizeof *reserved_sends * (count + 1));
	if (!by_seq || !by_key || !reserved_sends) {
		free(bytes);
		return -1;
	}
	for (uint64_t i = 0; i < count; i++) {
		const unsigned char *at = bytes + REPLAY_HEADER + i * REPLAY_ENTRY;
		struct enforced e = { le32(at + 4), le32(at + 8), le32(at + 12), le32(at + 16), (int32_t)le32(at + 20) };
		if (le32(at) == (uint32_t)world_rank)
			by_seq[nenforced++] = e;
		if (e.source == (uint32_t)world_rank && e.send != NONE)
			reserved_sends[nreserved++] = e.send;
	}
	free(bytes);
	memcpy(by_key, by_seq, sizeof *by_seq * nenforced);
	qsort(by_seq, nenforced, sizeof *by_seq, seq_order);
	qsort(by_key, nenforced, sizeof *by_key, key_order);
	qsort(reserved_sends, nreserved, sizeof *reserved_sends, u32_order);
	return 0;
}

/* Sets the replay up at MPI_Init: the shadow communicator (collective: every rank of a
 * replay makes it, even one whose record does not read) and the rank's entries. */
static void open_replay(void)
{
	if (replay_fd < 0)
		return;
	int ok = read_replay() == 0;
	close(replay_fd);
	replay_fd = -1;
	if (PMPI_Comm_dup(MPI_COMM_WORLD, &shadow) != MPI_SUCCESS)
		ok = 0;
	if (!ok)
		fprintf(stderr, "[rank %d] sdt: the replay record cannot be used: this rank runs without replay\n",
			world_rank);
	replaying = ok;
	if (ok)
		stop_after = stop_wanted;
	else if (stop_wanted != NO_STOP)
		fprintf(stderr, "[rank %d] sdt: no replay, so no stop at the cut either\n", world_rank);
}

/* The entry whose `seq` (with `by_match`: whose match_key) is `key`, or NULL. */
static const struct enforced *enforced_of(uint32_t key, int by_match)
{
	const struct enforced *array = by_match ? by_key : by_seq;
	size_t lo = 0, hi = nenforced;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		uint32_t k = by_match ? match_key(&array[mid]) : array[mid].seq;
		if (k == key)
			return &array[mid];
		if (k < key)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

/* The seq of the rank's next event. */
static uint32_t upcoming(void)
{
	lock_tables();
	uint32_t seq = (uint32_t)next_seq;
	unlock_tables();
	return seq;
}

/* The rank of world rank `world` in `c` (MPI_ANY_SOURCE when it is not a member). */
static int rank_in(const struct comm *c, int world)
{
	for (int i = 0; c && i < c->size; i++)
		if (c->world[i] == world)
			return i;
	return MPI_ANY_SOURCE;
}

/* Where send `seq` to `*dest` goes: on the shadow, to the destination's world rank, when
 * the record names it; else on `handle`. */
static MPI_Comm send_route(uint32_t seq, const struct comm *c, MPI_Comm handle, int *dest)
{
	if (!replaying || !c || c->remote_world || !nreserved ||
	    !bsearch(&seq, reserved_sends, nreserved, sizeof *reserved_sends, u32_order))
		return handle;
	*dest = world_of(c, *dest);
	return shadow;
}

/* Where the receive that matches as the rank's next event receives: on the shadow, from
 * the recorded source and tag, when the record names it (`*e`); else on `handle`. */
static MPI_Comm receive_route(const struct comm *c, MPI_Comm handle, int *source, int *tag,
			      const struct enforced **e)
{
	*e = NULL;
	if (!replaying || !c || c->remote_world)
		return handle;
	const struct enforced *found = enforced_of(upcoming(), 1);
	if (!found || found->send == NONE)
		return handle;
	*e = found;
	*source = (int)found->source;
	*tag = found->tag < 0 ? MPI_ANY_TAG : found->tag;
	return shadow;
}

/* A recorded receive completed: the status gets the communicator's rank back, and the
 * piggyback must be the recorded send's. Returns FLAG_DIVERGED when it is not. */
static uint8_t replayed(const struct comm *c, const struct enforced *e, MPI_Status *status,
			const struct piggyback *pb)
{
	if (!e)
		return 0;
	status->MPI_SOURCE = rank_in(c, status->MPI_SOURCE);
	if (pb && pb->magic == PIGGYBACK_MAGIC && pb->seq == e->send)
		return 0;
	fprintf(stderr,
		"[rank %d] sdt: replay diverged at event %u: it took another message than send %u of rank %u, "
		"which the record says\n",
		world_rank, e->seq, e->send, e->source);
	return FLAG_DIVERGED;
}

/* A probe in a replay, on the communicator and on the shadow: a wildcard one narrowed to
 * the source and tag it saw (an MPI_Iprobe with none recorded found nothing). */
static int replay_probe(const struct comm *c, MPI_Comm handle, int source, int tag, int blocking, int *flag,
			MPI_Status *status)
{
	if (wildcards(source, tag)) {
		const struct enforced *e = enforced_of(upcoming(), 0);
		if (e && e->send == NONE) {
			source = rank_in(c, (int)e->source);
			tag = e->tag < 0 ? MPI_ANY_TAG : e->tag;
		} else if (!blocking) {
			*flag = 0;
			return MPI_SUCCESS;
		}
	}
	int world = source == MPI_ANY_SOURCE ? MPI_ANY_SOURCE : world_of(c, source);
	do {
		int rc = PMPI_Iprobe(source, tag, handle, flag, status);
		if (rc != MPI_SUCCESS || *flag)
			return rc;
		rc = PMPI_Iprobe(world, tag, shadow, flag, status);
		if (rc != MPI_SUCCESS)
			return rc;
		if (*flag) {
			status->MPI_SOURCE = rank_in(c, status->MPI_SOURCE);
			return rc;
		}
	} while (blocking);
	return MPI_SUCCESS;
}

/* In a replay, the request among `requests` whose completion the record names as the
 * rank's next event; -1 for none. */
static int replay_pick(int count, const MPI_Request *requests)
{
	if (!replaying)
		return -1;
	int found = -1;
	lock_tables();
	const struct enforced *e = enforced_of((uint32_t)next_seq, 0);
	for (int i = 0; e && e->post != NONE && i < count && found < 0; i++) {
		struct pending *p = find(requests[i]);
		if (p && p->post == e->post)
			found = i;
	}
	unlock_tables();
	return found;
}

/* ---- The error handler: records a truncation, then does what the user's would ---- */

/* ---- Stopping at a cut ---- */

/* Seconds a stopped rank waits for the others to finalize with it before it gives up. */
#define STOP_FINALIZE_SECONDS 600

/* The state word `sdt run` may write through a trap record (ours is never read). */
static int cut_state;

/* SDT's own breakpoints (level 0, class -1, first arrival): the rank at its cut, and
 * the rank about to end the job (MPI_Abort, or a fatal MPI error). */
#define OWN_CLASS -1
#define CUT_ID -1
#define END_ID -2

/* Traps to `sdt run` for a snapshot at SDT's own breakpoint `id`, `attrs` saying why. */
static void trap_own(int id, const char *attrs, int len)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	struct sdt_trap trap = {
		.version = SDT_PROTOCOL_VERSION,
		.size = sizeof trap,
		.level = 0,
		.class_ = OWN_CLASS,
		.id = id,
		.multiple_mark = 1,
		.hit = 1,
		.attrs_ptr = (uintptr_t)attrs,
		.attrs_len = len > 0 ? (unsigned long long)len : 0,
		.trigger_ns = (unsigned long long)now.tv_sec * 1000000000ull + (unsigned long long)now.tv_nsec,
		.state_ptr = (uintptr_t)&cut_state,
		.result = SDT_DECLINED,
	};
	__asm__ volatile("int3" : : "a"(SDT_TRAP_MAGIC), "D"(&trap) : "memory");
}

/* A snapshot of the rank at its cut, its attrs saying where the rank is. */
static void capture_cut(uint64_t events)
{
	char attrs[64];
	int len = snprintf(attrs, sizeof attrs, "sdt=cut,events=%llu", (unsigned long long)events);
	trap_own(CUT_ID, attrs, len);
}

/* A snapshot of the rank as it ends the job (SDT_MPI_END_CAPTURE): `why` is "abort" or
 * "fatal_error", `code` the error code. Once: a fatal error in MPI_Abort takes none. */
static void capture_end(const char *why, int code)
{
	static int taken;
	if (!end_capture || __atomic_exchange_n(&taken, 1, __ATOMIC_RELAXED))
		return;
	char attrs[64];
	int len = snprintf(attrs, sizeof attrs, "sdt=%s,code=%d", why, code);
	trap_own(END_ID, attrs, len);
}

/* Ends the rank's part of the job if the others never finalize with it. */
static void *stop_watchdog(void *unused)
{
	sleep(STOP_FINALIZE_SECONDS);
	fprintf(stderr, "[rank %d] sdt: stopped at its cut, but the job did not end within %d s: exiting\n",
		world_rank, STOP_FINALIZE_SECONDS);
	_exit(1);
}

/* The rank is at its cut: the call it was making does not happen. */
static void stop_here(void)
{
	uint64_t events = __atomic_load_n(&next_seq, __ATOMIC_RELAXED);
	stop_after = NO_STOP;
	if (stop_capture)
		capture_cut(events);
	fflush(NULL);
	pthread_t watchdog;
	if (pthread_create(&watchdog, NULL, stop_watchdog, NULL) == 0)
		pthread_detach(watchdog);
	drop_wrapped();
	PMPI_Finalize();
	_exit(0);
}


/* Records that the rank ends the job with error `code` (in the record's tag), from
 * `site`: `kind` is KIND_ABORT (MPI_Abort) or KIND_FATAL_ERROR (an MPI error under
 * MPI_ERRORS_ARE_FATAL). Under the lock. */
static void record_abort(uint8_t kind, const struct comm *c, int code, uint32_t site)
{
	struct record r = event(kind, c, -1, -1, 0, site);
	r.tag = code;
	append(r);
}

static void on_error(MPI_Comm *handle, int *code, ...)
{
	int class = 0;
	PMPI_Error_class(*code, &class);
	lock_tables();
	struct comm *c = comm_of(*handle);
	MPI_Errhandler user = c ? c->user_handler : MPI_ERRORS_ARE_FATAL;
	struct call *call = current;
	if (class == MPI_ERR_TRUNCATE && call && !call->truncated) {
		struct record r = event(call->kind, call->comm, call->peer, call->tag, call->bytes, call->site);
		r.flags = call->flags | FLAG_TRUNCATED;
		r.post = call->post;
		/* The piggyback comes first, so it arrived whole: the message is known. (Its
		 * source only when the receive named one.) */
		if (call->pb && call->pb->magic == PIGGYBACK_MAGIC && call->peer >= 0)
			r.matched = call->pb->seq;
		append(r);
		call->truncated = 1;
		/* The call is over, in error: the rank is no longer inside it. */
		unblock();
	}
	if (user == MPI_ERRORS_ARE_FATAL)
		record_abort(KIND_FATAL_ERROR, c, *code, call ? call->site : NONE);
	unlock_tables();
	if (user == MPI_ERRORS_RETURN)
		return;
	if (user == MPI_ERRORS_ARE_FATAL) {
		char text[MPI_MAX_ERROR_STRING];
		int len = 0;
		PMPI_Error_string(*code, text, &len);
		fprintf(stderr, "[rank %d] MPI error: %s\n", world_rank, text);
		capture_end("fatal_error", *code);
		PMPI_Abort(*handle, *code);
		return;
	}
	PMPI_Comm_set_errhandler(*handle, user);
	PMPI_Comm_call_errhandler(*handle, *code);
	PMPI_Comm_set_errhandler(*handle, our_handler);
}

int MPI_Comm_set_errhandler(MPI_Comm handle, MPI_Errhandler handler)
{
	lock_tables();
	struct comm *c = our_handler == MPI_ERRHANDLER_NULL ? NULL : comm_of(handle);
	if (c)
		c->user_handler = handler;
	unlock_tables();
	return PMPI_Comm_set_errhandler(handle, c ? our_handler : handler);
}

int MPI_Comm_get_errhandler(MPI_Comm handle, MPI_Errhandler *handler)
{
	lock_tables();
	struct comm *c = our_handler == MPI_ERRHANDLER_NULL ? NULL : comm_of(handle);
	MPI_Errhandler user = c ? c->user_handler : MPI_ERRHANDLER_NULL;
	unlock_tables();
	return c ? (*handler = user, MPI_SUCCESS) : PMPI_Comm_get_errhandler(handle, handler);
}

int MPI_Comm_free(MPI_Comm *handle)
{
	lock_tables();
	for (int i = 1; i < ncomms; i++)
		if (comms[i].live && comms[i].handle == *handle)
			comms[i].live = 0;
	unlock_tables();
	return PMPI_Comm_free(handle);
}

/* ---- Init and Finalize ---- */

static int after_init(int rc, void *site)
{
	if (rc != MPI_SUCCESS)
		return rc;
	/* Together: the wall-clock time puts the monotonic event times on the job's time line. */
	clock_gettime(CLOCK_MONOTONIC, &init_time);
	clock_gettime(CLOCK_REALTIME, &init_wall);
	calibrate_tsc();
	PMPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
	PMPI_Comm_size(MPI_COMM_WORLD, &world_size);
	lock_tables();
	open_events();
	struct comm *world = comm_of(MPI_COMM_WORLD);
	if (PMPI_Comm_create_errhandler(on_error, &our_handler) == MPI_SUCCESS) {
		PMPI_Comm_set_errhandler(MPI_COMM_WORLD, our_handler);
		PMPI_Comm_set_errhandler(MPI_COMM_SELF, our_handler);
	}
	append(event(KIND_INIT, world, -1, -1, 0, site_id(site)));
	unlock_tables();
	int level = MPI_THREAD_MULTIPLE;
	PMPI_Query_thread(&level);
	threads_call_at_once = level == MPI_THREAD_MULTIPLE;
	open_replay();
	return rc;
}

int MPI_Init(int *argc, char ***argv)
{
	before_init();
	return after_init(PMPI_Init(argc, argv), CALLER());
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
	before_init();
	return after_init(PMPI_Init_thread(argc, argv, required, provided), CALLER());
}

int MPI_Finalize(void)
{
	STOP_POINT();
	void *site = CALLER();
	lock_tables();
	reap_detached(1);
	append(event(KIND_FINALIZE, comm_of(MPI_COMM_WORLD), -1, -1, 0, site_id(site)));
	unlock_tables();
	drop_wrapped();
	return PMPI_Finalize();
}

/* ---- Sends ---- */

typedef int (*blocking_send)(const void *, int, MPI_Datatype, int, int, MPI_Comm);
typedef int (*posting_send)(const void *, int, MPI_Datatype, int, int, MPI_Comm, MPI_Request *);

/* Records the send event, returning the piggyback it sends. */
/* Records a send; `*c` is its communicator's entry and `*at` its call site's id. */
static struct piggyback send_event(uint8_t kind, MPI_Comm handle, int dest, int tag, int64_t bytes, void *site,
				   struct comm **c, uint32_t *at)
{
	lock_tables();
	*c = comm_of(handle);
	*at = site_id(site);
	struct piggyback pb = { append(event(kind, *c, world_of(*c, dest), tag, bytes, *at)), PIGGYBACK_MAGIC };
	unlock_tables();
	return pb;
}

static int send_wrapped(blocking_send call, const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm handle,
		void *site)
{
	STOP_POINT();
	if (dest == MPI_PROC_NULL)
		return call(buf, count, type, dest, tag, handle);
	struct comm *c;
	uint32_t at;
	struct piggyback pb = send_event(KIND_SEND, handle, dest, tag, type_bytes(count, type), site, &c, &at);
	int to = dest;
	MPI_Comm route = send_route(pb.seq, c, handle, &to);
	int64_t packed = packable(count, type);
	if (packed >= 0) {
		memcpy(pack_buffer, &pb, PIGGYBACK_BYTES);
		memcpy(pack_buffer + PIGGYBACK_BYTES, buf, (size_t)packed);
		block(KIND_SEND, c, world_of(c, dest), tag, at);
		int rc = call(pack_buffer, PIGGYBACK_BYTES + (int)packed, MPI_BYTE, to, tag, route);
		unblock();
		return rc;
	}
	int cached;
	MPI_Datatype wrapped = wrap(&pb, buf, count, type, &cached);
	block(KIND_SEND, c, world_of(c, dest), tag, at);
	int rc = call(MPI_BOTTOM, 1, wrapped, to, tag, route);
	unblock();
	unwrap_type(&wrapped, cached);
	return rc;
}

int MPI_Send(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm)
{
	return send_wrapped(PMPI_Send, buf, count, type, dest, tag, comm, CALLER());
}

int MPI_Ssend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm)
{
	return send_wrapped(PMPI_Ssend, buf, count, type, dest, tag, comm, CALLER());
}

int MPI_Rsend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm)
{
	return send_wrapped(PMPI_Rsend, buf, count, type, dest, tag, comm, CALLER());
}

int MPI_Bsend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm)
{
	return send_wrapped(PMPI_Bsend, buf, count, type, dest, tag, comm, CALLER());
}

/* Posted operations come and go by the thousand: their records are recycled through a
 * free list per thread (no lock), each with room for a packed message. */
#define PACK_INLINE 1024
#define POOL_MAX 256
static __thread struct pending *pool;
static __thread int pooled;

static struct pending *pending_new(void)
{
	struct pending *p = pool;
	if (p) {
		pool = p->next;
		pooled--;
	} else {
		p = malloc(sizeof *p + PIGGYBACK_BYTES + PACK_INLINE);
		if (!p)
			return NULL;
	}
	memset(p, 0, sizeof *p);
	p->packed_bytes = -1;
	return p;
}

static void pending_free(struct pending *p)
{
	if (!p)
		return;
	if (p->persistent) {
		if (p->request != MPI_REQUEST_NULL)
			PMPI_Request_free(&p->request);
		PMPI_Type_free(&p->own_type);
	}
	if (pooled >= POOL_MAX) {
		free(p);
		return;
	}
	p->next = pool;
	pool = p;
	pooled++;
}

/* The bucket of `request` in the table. */
static struct pending **bucket_of(MPI_Request request)
{
	uint64_t key = 0;
	memcpy(&key, &request, sizeof request < sizeof key ? sizeof request : sizeof key);
	return &pending[(key * 0x9E3779B97F4A7C15ull >> 32) % PENDING_BUCKETS];
}

/* The link that points at the posted operation of `request`, or at NULL at the end of
 * its bucket when it is not one of ours. Under the lock. */
static struct pending **link_of(MPI_Request request)
{
	struct pending **at = bucket_of(request);
	while (*at && (*at)->request != request)
		at = &(*at)->next;
	return at;
}

/* Remembers a posted operation until its completion. Under the lock. */
static void remember(struct pending *p)
{
	if (detached)
		reap_detached(0);
	struct pending **bucket = bucket_of(p->request);
	p->next = *bucket;
	*bucket = p;
}

/* The posted operation of `request`, left in the table (NULL: not one of ours). Under
 * the lock. */
static struct pending *find(MPI_Request request)
{
	return *link_of(request);
}

/* Takes the posted operation of `request` out of the table (NULL: not one of ours).
 * Under the lock. */
static struct pending *forget(MPI_Request request)
{
	struct pending **at = link_of(request);
	struct pending *found = *at;
	if (found)
		*at = found->next;
	return found;
}

static int isend(posting_send call, const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm handle,
		 MPI_Request *request, void *site)
{
	STOP_POINT();
	struct pending *p = dest == MPI_PROC_NULL ? NULL : pending_new();
	if (!p)
		return call(buf, count, type, dest, tag, handle, request);
	struct comm *c;
	p->header = send_event(KIND_ISEND, handle, dest, tag, type_bytes(count, type), site, &c, &p->site);
	int to = dest;
	MPI_Comm route = send_route(p->header.seq, c, handle, &to);
	int64_t packed = packable(count, type);
	int rc;
	if (packed >= 0 && packed <= PACK_INLINE) {
		memcpy(p->packed, &p->header, PIGGYBACK_BYTES);
		memcpy(p->packed + PIGGYBACK_BYTES, buf, (size_t)packed);
		p->packed_bytes = packed;
		rc = call(p->packed, PIGGYBACK_BYTES + (int)packed, MPI_BYTE, to, tag, route, request);
	} else {
		int cached;
		MPI_Datatype wrapped = wrap(&p->header, buf, count, type, &cached);
		rc = call(MPI_BOTTOM, 1, wrapped, to, tag, route, request);
		unwrap_type(&wrapped, cached);
	}
	if (rc != MPI_SUCCESS) {
		pending_free(p);
		return rc;
	}
	p->request = *request;
	p->post = p->header.seq;
	p->wrapped = 1;
	p->comm = c;
	p->peer = world_of(c, dest);
	p->tag = tag;
	lock_tables();
	remember(p);
	unlock_tables();
	return rc;
}

int MPI_Isend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm, MPI_Request *request)
{
	return isend(PMPI_Isend, buf, count, type, dest, tag, comm, request, CALLER());
}

int MPI_Issend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm, MPI_Request *request)
{
	return isend(PMPI_Issend, buf, count, type, dest, tag, comm, request, CALLER());
}

int MPI_Irsend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm, MPI_Request *request)
{
	return isend(PMPI_Irsend, buf, count, type, dest, tag, comm, request, CALLER());
}

int MPI_Ibsend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm, MPI_Request *request)
{
	return isend(PMPI_Ibsend, buf, count, type, dest, tag, comm, request, CALLER());
}

/* ---- Persistent requests ---- */

typedef int (*persistent_init)(const void *, int, MPI_Datatype, int, int, MPI_Comm, MPI_Request *);

/* A persistent send or receive: its request made on a wrapped type of its own (the
 * piggyback travels in the entry's header), kept in the table until it is freed. */
static int init_persistent(persistent_init call, int receive, const void *buf, int count, MPI_Datatype type,
			   int peer, int tag, MPI_Comm handle, MPI_Request *request)
{
	struct pending *p = peer == MPI_PROC_NULL ? NULL : pending_new();
	if (!p)
		return call(buf, count, type, peer, tag, handle, request);
	p->own_type = build_wrapped(&p->header, buf, count, type);
	int rc = call(MPI_BOTTOM, 1, p->own_type, peer, tag, handle, request);
	if (rc != MPI_SUCCESS) {
		PMPI_Type_free(&p->own_type);
		pending_free(p);
		return rc;
	}
	lock_tables();
	p->comm = comm_of(handle);
	p->request = *request;
	p->persistent = 1;
	p->receive = receive;
	p->wrapped = 1;
	p->peer = world_of(p->comm, peer);
	p->tag = tag;
	p->flags = (receive ? wildcards(peer, tag) : 0) | FLAG_FIXED_ROUTE;
	p->bytes = type_bytes(count, type);
	remember(p);
	unlock_tables();
	return rc;
}

int MPI_Send_init(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm, MPI_Request *request)
{
	return init_persistent(PMPI_Send_init, 0, buf, count, type, dest, tag, comm, request);
}

int MPI_Ssend_init(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm, MPI_Request *request)
{
	return init_persistent(PMPI_Ssend_init, 0, buf, count, type, dest, tag, comm, request);
}

int MPI_Rsend_init(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm, MPI_Request *request)
{
	return init_persistent(PMPI_Rsend_init, 0, buf, count, type, dest, tag, comm, request);
}

int MPI_Bsend_init(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm, MPI_Request *request)
{
	return init_persistent(PMPI_Bsend_init, 0, buf, count, type, dest, tag, comm, request);
}

/* PMPI_Recv_init's buffer is not const: called through the shape the sends share. */
static int recv_init(const void *buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
		     MPI_Request *request)
{
	return PMPI_Recv_init((void *)buf, count, type, source, tag, comm, request);
}

int MPI_Recv_init(void *buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm, MPI_Request *request)
{
	return init_persistent(recv_init, 1, buf, count, type, source, tag, comm, request);
}

/* Records the start of `request` if it is a persistent request of ours: a send's event
 * (its seq goes out in the header) or a receive's post. Under the lock. */
static void started(MPI_Request request, uint32_t site)
{
	struct pending *p = find(request);
	if (!p || !p->persistent)
		return;
	struct record r = event(p->receive ? KIND_IRECV : KIND_ISEND, p->comm, p->peer, p->tag, p->bytes, site);
	r.flags = p->flags;
	p->post = append(r);
	p->header = (struct piggyback){ p->post, PIGGYBACK_MAGIC };
	p->site = site;
	p->active = 1;
}

int MPI_Start(MPI_Request *request)
{
	STOP_POINT();
	uint32_t site;
	lock_tables();
	site = site_id(CALLER());
	started(*request, site);
	unlock_tables();
	return PMPI_Start(request);
}

int MPI_Startall(int count, MPI_Request requests[])
{
	STOP_POINT();
	lock_tables();
	uint32_t site = site_id(CALLER());
	for (int i = 0; i < count; i++)
		started(requests[i], site);
	unlock_tables();
	return PMPI_Startall(count, requests);
}

/* ---- Receives ---- */

/* The rank's comm entry and call site, under the lock. */
static struct comm *enter(MPI_Comm handle, void *address, uint32_t *site)
{
	lock_tables();
	struct comm *c = comm_of(handle);
	*site = site_id(address);
	unlock_tables();
	return c;
}

/* MPI's own blocking receive of (buf, count, type) for `blocking_receive`, with what
 * it needs besides: a source, tag and communicator, or a matched message. */
typedef int (*receiving)(void *buf, int count, MPI_Datatype type, void *how, MPI_Status *status);

struct route {
	int source, tag;
	MPI_Comm comm;
};

static int receive_routed(void *buf, int count, MPI_Datatype type, void *how, MPI_Status *status)
{
	struct route *r = how;
	return PMPI_Recv(buf, count, type, r->source, r->tag, r->comm, status);
}

static int receive_matched(void *buf, int count, MPI_Datatype type, void *how, MPI_Status *status)
{
	return PMPI_Mrecv(buf, count, type, how, status);
}

/* A blocking receive into (buf, count, type) on `c` from world rank `peer`: the data in
 * or out of the pack buffer or a wrapped type around `call`, the rank marked blocked
 * meanwhile, the receive recorded (and checked against the replay's `e`). */
static int blocking_receive(void *buf, int count, MPI_Datatype type, struct comm *c, int peer, int tag,
			    uint8_t flags, uint32_t site, const struct enforced *e, receiving receive, void *how,
			    MPI_Status *status)
{
	MPI_Status mine;
	if (status == MPI_STATUS_IGNORE)
		status = &mine;
	struct piggyback pb = { 0 };
	int64_t packed = packable(count, type);
	int cached = 1;
	MPI_Datatype wrapped = packed >= 0 ? MPI_BYTE : wrap(&pb, buf, count, type, &cached);
	struct call call = { KIND_RECV, 0, c, peer, tag, flags, saturate(type_bytes(count, type)), site, NONE,
			     packed >= 0 ? (const struct piggyback *)pack_buffer : &pb };
	current = &call;
	block(KIND_RECV, c, peer, tag, site);
	int rc = packed >= 0 ? receive(pack_buffer, PIGGYBACK_BYTES + (int)packed, MPI_BYTE, how, status)
			     : receive(MPI_BOTTOM, 1, wrapped, how, status);
	unblock();
	current = NULL;
	int64_t received = -1;
	if (packed >= 0) {
		int got = 0;
		if (rc == MPI_SUCCESS && PMPI_Get_count(status, MPI_BYTE, &got) == MPI_SUCCESS && got >= PIGGYBACK_BYTES) {
			memcpy(&pb, pack_buffer, PIGGYBACK_BYTES);
			memcpy(buf, pack_buffer + PIGGYBACK_BYTES, (size_t)(got - PIGGYBACK_BYTES));
			received = got;
		}
	} else {
		unwrap_type(&wrapped, cached);
	}
	if (!call.truncated) {
		uint8_t diverged = rc == MPI_SUCCESS ? replayed(c, e, status, &pb) : 0;
		lock_tables();
		record_receive(KIND_RECV, c, status, &pb, received, call.flags | diverged, NONE, site, rc);
		unlock_tables();
	} else {
		unwrap_status(status, -1);
	}
	return rc;
}

int MPI_Recv(void *buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm handle, MPI_Status *status)
{
	STOP_POINT();
	if (source == MPI_PROC_NULL)
		return PMPI_Recv(buf, count, type, source, tag, handle, status);
	uint32_t site;
	struct comm *c = enter(handle, CALLER(), &site);
	const struct enforced *e;
	struct route route = { source, tag, handle };
	route.comm = receive_route(c, handle, &route.source, &route.tag, &e);
	return blocking_receive(buf, count, type, c, world_of(c, source), tag, wildcards(source, tag), site, e,
				receive_routed, &route, status);
}

/* MPI's own posting of a receive of (buf, count, type) for `post_receive`. */
typedef int (*posting)(void *buf, int count, MPI_Datatype type, void *how, MPI_Request *request);

static int post_routed(void *buf, int count, MPI_Datatype type, void *how, MPI_Request *request)
{
	struct route *r = how;
	return PMPI_Irecv(buf, count, type, r->source, r->tag, r->comm, request);
}

static int post_matched(void *buf, int count, MPI_Datatype type, void *how, MPI_Request *request)
{
	return PMPI_Imrecv(buf, count, type, how, request);
}

/* Posts the receive `p` of (buf, count, type) on `c` from world rank `peer`, into the
 * entry's pack buffer or a wrapped type, and records its post. */
static int post_receive(struct pending *p, void *buf, int count, MPI_Datatype type, struct comm *c, int peer, int tag,
			uint8_t flags, void *address, posting post, void *how, MPI_Request *request)
{
	int64_t packed = packable(count, type);
	int rc;
	if (packed >= 0 && packed <= PACK_INLINE) {
		p->packed_bytes = packed;
		p->user = buf;
		rc = post(p->packed, PIGGYBACK_BYTES + (int)packed, MPI_BYTE, how, request);
	} else {
		int cached;
		MPI_Datatype wrapped = wrap(&p->header, buf, count, type, &cached);
		rc = post(MPI_BOTTOM, 1, wrapped, how, request);
		unwrap_type(&wrapped, cached);
	}
	if (rc != MPI_SUCCESS) {
		pending_free(p);
		return rc;
	}
	lock_tables();
	p->request = *request;
	p->receive = 1;
	p->wrapped = 1;
	p->comm = c;
	p->peer = peer;
	p->tag = tag;
	p->flags = flags;
	p->site = site_id(address);
	struct record r = event(KIND_IRECV, c, p->peer, tag, type_bytes(count, type), p->site);
	r.flags = p->flags;
	p->post = append(r);
	remember(p);
	unlock_tables();
	return rc;
}

int MPI_Irecv(void *buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm handle, MPI_Request *request)
{
	STOP_POINT();
	struct pending *p = source == MPI_PROC_NULL ? NULL : pending_new();
	if (!p)
		return PMPI_Irecv(buf, count, type, source, tag, handle, request);
	lock_tables();
	struct comm *c = comm_of(handle);
	unlock_tables();
	struct route route = { source, tag, handle };
	if (replaying)
		route.comm = receive_route(c, handle, &route.source, &route.tag, &p->replay);
	return post_receive(p, buf, count, type, c, world_of(c, source), tag, wildcards(source, tag),
			    CALLER(), post_routed, &route, request);
}

int MPI_Sendrecv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, int dest, int sendtag, void *recvbuf,
		 int recvcount, MPI_Datatype recvtype, int source, int recvtag, MPI_Comm handle, MPI_Status *status)
{
	STOP_POINT();
	if (dest == MPI_PROC_NULL || source == MPI_PROC_NULL)
		return PMPI_Sendrecv(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype, source,
				     recvtag, handle, status);
	void *address = CALLER();
	struct comm *c;
	uint32_t site;
	struct piggyback out =
		send_event(KIND_SEND, handle, dest, sendtag, type_bytes(sendcount, sendtype), address, &c, &site);
	struct piggyback in = { 0 };
	MPI_Status mine;
	if (status == MPI_STATUS_IGNORE)
		status = &mine;
	int send_cached, recv_cached;
	MPI_Datatype send_type = wrap(&out, sendbuf, sendcount, sendtype, &send_cached);
	MPI_Datatype recv_type = wrap(&in, recvbuf, recvcount, recvtype, &recv_cached);
	struct call call = { KIND_RECV, 0, c, world_of(c, source), recvtag, wildcards(source, recvtag),
			     saturate(type_bytes(recvcount, recvtype)), site, NONE, &in };
	int to = dest, from = source, with = recvtag;
	const struct enforced *e;
	MPI_Comm send_comm = send_route(out.seq, c, handle, &to);
	MPI_Comm recv_comm = receive_route(c, handle, &from, &with, &e);
	current = &call;
	block(KIND_RECV, c, call.peer, recvtag, site);
	int rc;
	if (send_comm == handle && recv_comm == handle) {
		rc = PMPI_Sendrecv(MPI_BOTTOM, 1, send_type, dest, sendtag, MPI_BOTTOM, 1, recv_type, source, recvtag,
				   handle, status);
	} else {
		/* A replayed half on the shadow: the two halves apart, as Sendrecv does them. */
		MPI_Request sent;
		rc = PMPI_Isend(MPI_BOTTOM, 1, send_type, to, sendtag, send_comm, &sent);
		if (rc == MPI_SUCCESS) {
			rc = PMPI_Recv(MPI_BOTTOM, 1, recv_type, from, with, recv_comm, status);
			int sent_rc = PMPI_Wait(&sent, MPI_STATUS_IGNORE);
			rc = rc == MPI_SUCCESS ? sent_rc : rc;
		}
	}
	unblock();
	current = NULL;
	unwrap_type(&send_type, send_cached);
	unwrap_type(&recv_type, recv_cached);
	if (call.truncated) {
		unwrap_status(status, -1);
		return rc;
	}
	uint8_t diverged = rc == MPI_SUCCESS ? replayed(c, e, status, &in) : 0;
	lock_tables();
	record_receive(KIND_RECV, c, status, &in, -1, call.flags | diverged, NONE, site, rc);
	unlock_tables();
	return rc;
}

int MPI_Sendrecv_replace(void *buf, int count, MPI_Datatype type, int dest, int sendtag, int source, int recvtag,
			 MPI_Comm handle, MPI_Status *status)
{
	STOP_POINT();
	if (dest == MPI_PROC_NULL || source == MPI_PROC_NULL)
		return PMPI_Sendrecv_replace(buf, count, type, dest, sendtag, source, recvtag, handle, status);
	void *address = CALLER();
	struct comm *c;
	/* One piggyback both ways: ours goes out, the peer's comes back in its place. */
	uint32_t site;
	struct piggyback pb = send_event(KIND_SEND, handle, dest, sendtag, type_bytes(count, type), address, &c, &site);
	MPI_Status mine;
	if (status == MPI_STATUS_IGNORE)
		status = &mine;
	int cached;
	MPI_Datatype wrapped = wrap(&pb, buf, count, type, &cached);
	struct call call = { KIND_RECV, 0, c, world_of(c, source), recvtag, wildcards(source, recvtag),
			     saturate(type_bytes(count, type)), site, NONE, &pb };
	current = &call;
	block(KIND_RECV, c, call.peer, recvtag, site);
	int rc = PMPI_Sendrecv_replace(MPI_BOTTOM, 1, wrapped, dest, sendtag, source, recvtag, handle, status);
	unblock();
	current = NULL;
	unwrap_type(&wrapped, cached);
	if (call.truncated) {
		unwrap_status(status, -1);
		return rc;
	}
	lock_tables();
	record_receive(KIND_RECV, c, status, &pb, -1, call.flags, NONE, site, rc);
	unlock_tables();
	return rc;
}

/* ---- Probes ---- */

/* Records a probe that found a message; `flags`: its wildcards. */
static void record_probe(struct comm *c, MPI_Status *status, uint32_t site, uint8_t flags)
{
	unwrap_status(status, -1);
	lock_tables();
	struct record r = event(KIND_PROBE, c, world_of(c, status->MPI_SOURCE), status->MPI_TAG, 0, site);
	r.flags = flags;
	append(r);
	unlock_tables();
}

/* Whether probes on `c` go through replay_probe. */
static int probes_replayed(const struct comm *c)
{
	return replaying && c && !c->remote_world;
}

int MPI_Probe(int source, int tag, MPI_Comm handle, MPI_Status *status)
{
	STOP_POINT();
	if (source == MPI_PROC_NULL)
		return PMPI_Probe(source, tag, handle, status);
	uint32_t site;
	struct comm *c = enter(handle, CALLER(), &site);
	MPI_Status mine;
	if (status == MPI_STATUS_IGNORE)
		status = &mine;
	block(KIND_PROBE, c, world_of(c, source), tag, site);
	int flag;
	int rc = probes_replayed(c) ? replay_probe(c, handle, source, tag, 1, &flag, status)
				    : PMPI_Probe(source, tag, handle, status);
	unblock();
	if (rc == MPI_SUCCESS)
		record_probe(c, status, site, wildcards(source, tag));
	return rc;
}

int MPI_Iprobe(int source, int tag, MPI_Comm handle, int *flag, MPI_Status *status)
{
	STOP_POINT();
	MPI_Status mine;
	if (status == MPI_STATUS_IGNORE)
		status = &mine;
	if (source == MPI_PROC_NULL)
		return PMPI_Iprobe(source, tag, handle, flag, status);
	uint32_t site = NONE;
	struct comm *c = NULL;
	if (replaying)
		c = enter(handle, CALLER(), &site);
	int rc = probes_replayed(c) ? replay_probe(c, handle, source, tag, 0, flag, status)
				    : PMPI_Iprobe(source, tag, handle, flag, status);
	if (rc == MPI_SUCCESS && *flag) {
		if (!c)
			c = enter(handle, CALLER(), &site);
		record_probe(c, status, site, wildcards(source, tag));
	}
	return rc;
}

/* ---- Matched probes ---- */

/* A message a matched probe took (MPI_[I]mprobe), with what the probe saw of it (an
 * MPI_Message does not say its communicator), until its MPI_[I]mrecv. Under the lock. */
struct matched {
	struct matched *next;
	MPI_Message message;
	struct comm *comm;
	int peer, tag;
};
static struct matched *matched_messages;

static void remember_message(MPI_Message message, struct comm *c, const MPI_Status *status)
{
	struct matched *m = malloc(sizeof *m);
	if (!m)
		return;
	*m = (struct matched){ matched_messages, message, c, world_of(c, status->MPI_SOURCE), status->MPI_TAG };
	lock_tables();
	matched_messages = m;
	unlock_tables();
}

/* What the probe of `message` saw, taken out of the list (zero: not one of ours). */
static struct matched take_message(MPI_Message message)
{
	struct matched found = { NULL, message, NULL, -1, -1 };
	lock_tables();
	for (struct matched **m = &matched_messages; *m; m = &(*m)->next) {
		if ((*m)->message == message) {
			struct matched *taken = *m;
			*m = taken->next;
			found = *taken;
			free(taken);
			break;
		}
	}
	unlock_tables();
	return found;
}

int MPI_Mprobe(int source, int tag, MPI_Comm handle, MPI_Message *message, MPI_Status *status)
{
	STOP_POINT();
	if (source == MPI_PROC_NULL)
		return PMPI_Mprobe(source, tag, handle, message, status);
	uint32_t site;
	struct comm *c = enter(handle, CALLER(), &site);
	MPI_Status mine;
	if (status == MPI_STATUS_IGNORE)
		status = &mine;
	block(KIND_PROBE, c, world_of(c, source), tag, site);
	int rc = PMPI_Mprobe(source, tag, handle, message, status);
	unblock();
	if (rc == MPI_SUCCESS) {
		remember_message(*message, c, status);
		record_probe(c, status, site, wildcards(source, tag) | FLAG_FIXED_ROUTE);
	}
	return rc;
}

int MPI_Improbe(int source, int tag, MPI_Comm handle, int *flag, MPI_Message *message, MPI_Status *status)
{
	STOP_POINT();
	if (source == MPI_PROC_NULL)
		return PMPI_Improbe(source, tag, handle, flag, message, status);
	MPI_Status mine;
	if (status == MPI_STATUS_IGNORE)
		status = &mine;
	int rc = PMPI_Improbe(source, tag, handle, flag, message, status);
	if (rc == MPI_SUCCESS && *flag) {
		uint32_t site;
		struct comm *c = enter(handle, CALLER(), &site);
		remember_message(*message, c, status);
		record_probe(c, status, site, wildcards(source, tag) | FLAG_FIXED_ROUTE);
	}
	return rc;
}

int MPI_Mrecv(void *buf, int count, MPI_Datatype type, MPI_Message *message, MPI_Status *status)
{
	STOP_POINT();
	if (*message == MPI_MESSAGE_NO_PROC || *message == MPI_MESSAGE_NULL)
		return PMPI_Mrecv(buf, count, type, message, status);
	struct matched m = take_message(*message);
	lock_tables();
	uint32_t site = site_id(CALLER());
	unlock_tables();
	return blocking_receive(buf, count, type, m.comm, m.peer, m.tag, FLAG_FIXED_ROUTE, site, NULL,
				receive_matched, message, status);
}

int MPI_Imrecv(void *buf, int count, MPI_Datatype type, MPI_Message *message, MPI_Request *request)
{
	STOP_POINT();
	struct pending *p = *message == MPI_MESSAGE_NO_PROC || *message == MPI_MESSAGE_NULL ? NULL : pending_new();
	if (!p)
		return PMPI_Imrecv(buf, count, type, message, request);
	struct matched m = take_message(*message);
	return post_receive(p, buf, count, type, m.comm, m.peer, m.tag, FLAG_FIXED_ROUTE, CALLER(),
			    post_matched, message, request);
}

/* ---- Completions ---- */

/* Records the completion of `request` (its handle before the call completed it), with
 * the status the MPI gave (fixed for the user) and its error; `call` is the wait's
 * context, whose truncation the error handler may have recorded. Under the lock. */
/* A packed receive that completed: its piggyback and its data to where the program
 * asked for them. Returns the bytes it got, piggyback included (-1: not unpacked). */
static int64_t unpack(struct pending *p, MPI_Status *status, int error)
{
	int got = 0;
	if (!p->receive || p->packed_bytes < 0 || error != MPI_SUCCESS ||
	    PMPI_Get_count(status, MPI_BYTE, &got) != MPI_SUCCESS || got < PIGGYBACK_BYTES)
		return -1;
	memcpy(&p->header, p->packed, PIGGYBACK_BYTES);
	memcpy(p->user, p->packed + PIGGYBACK_BYTES, (size_t)(got - PIGGYBACK_BYTES));
	return got;
}

/* A completed operation's entry: freed, or for a persistent request made inactive. */
static void done_with(struct pending *p)
{
	if (p->persistent)
		p->active = 0;
	else
		pending_free(p);
}

/* Records the completion of posted operation `p`, with the status and error MPI gave
 * and the bytes `got` as unpack gave them. Under the lock. */
static void record_done(struct pending *p, MPI_Status *status, int64_t got, uint8_t flags, int error)
{
	if (p->receive) {
		record_receive(KIND_RECV_DONE, p->comm, status, p->wrapped ? &p->header : NULL, got, flags, p->post,
			       p->site, error);
		return;
	}
	uint8_t kind = p->collective ? KIND_DONE(p->collective) : KIND_SEND_DONE;
	struct record r = event(kind, p->comm, p->peer, p->tag, 0, p->site);
	r.post = p->post;
	append(r);
}

static void complete(MPI_Request request, MPI_Status *status, int error, const struct call *call)
{
	struct pending **at = link_of(request);
	struct pending *p = *at;
	if (!p || (p->persistent && !p->active))
		return;
	if (!p->persistent)
		*at = p->next;
	if (call->truncated && call->post == p->post) {
		unwrap_status(status, -1);
		done_with(p);
		return;
	}
	int cancelled = 0;
	PMPI_Test_cancelled(status, &cancelled);
	if (cancelled) {
		done_with(p);
		return;
	}
	int64_t got = unpack(p, status, error);
	uint8_t diverged =
		p->receive && error == MPI_SUCCESS ? replayed(p->comm, p->replay, status, &p->header) : 0;
	record_done(p, status, got, p->flags | diverged, error);
	done_with(p);
}

/* The context of a wait or test on `requests`: the first receive of ours among them
 * (for the error handler, which records its truncation), else the first send or
 * non-blocking collective. With
 * `blocking`, the rank is marked blocked on it, at the wait's call `address`. */
static void enter_completion(struct call *call, int count, const MPI_Request *requests, int blocking, void *address)
{
	STOP_POINT();
	*call = (struct call){ .kind = KIND_NONE, .post = NONE };
	lock_tables();
	uint32_t waits_at = blocking ? site_id(address) : NONE;
	for (int i = 0; i < count && call->kind != KIND_RECV_DONE; i++) {
		struct pending *p = find(requests[i]);
		if (!p || (p->persistent && !p->active))
			continue;
		const struct piggyback *pb = !p->wrapped ? NULL
					     : p->packed_bytes >= 0 ? (const struct piggyback *)p->packed
								    : &p->header;
		uint8_t kind = p->receive ? KIND_RECV_DONE : p->collective ? KIND_POSTED(p->collective) : KIND_SEND_DONE;
		if (call->kind == KIND_NONE || p->receive)
			*call = (struct call){ kind, 0, p->comm, p->peer, p->tag, p->flags, 0, p->site, p->post, pb };
	}
	unlock_tables();
	if (call->kind == KIND_RECV_DONE)
		current = call;
	/* Blocked in a receive, a send, or (by its posted kind) a non-blocking collective, at
	 * the wait's own call. */
	uint8_t blocked = call->kind == KIND_RECV_DONE ? KIND_RECV
			  : call->kind == KIND_SEND_DONE ? KIND_SEND
							 : call->kind;
	if (blocking && blocked != KIND_NONE)
		block(blocked, call->comm, call->peer, call->tag, waits_at);
}

static void leave_completion(void)
{
	unblock();
	current = NULL;
}

/* Space for `count` statuses when the user passed MPI_STATUSES_IGNORE, and a copy of
 * the request handles (the call overwrites them). */
struct completion {
	MPI_Request *before;
	MPI_Status *statuses;
	MPI_Request small_before[16];
	MPI_Status small_statuses[16];
};

static int start_completion(struct completion *c, int count, const MPI_Request *requests, MPI_Status *statuses)
{
	size_t n = count > 0 ? (size_t)count : 0;
	c->before = n <= 16 ? c->small_before : malloc(n * sizeof *c->before);
	c->statuses = statuses != MPI_STATUSES_IGNORE ? statuses
		      : n <= 16			   ? c->small_statuses
						   : malloc(n * sizeof *c->statuses);
	if (!c->before || !c->statuses)
		return -1;
	memcpy(c->before, requests, n * sizeof *requests);
	return 0;
}

static void end_completion(struct completion *c, MPI_Status *statuses)
{
	if (c->before != c->small_before)
		free(c->before);
	if (c->statuses != statuses && c->statuses != c->small_statuses)
		free(c->statuses);
}

int MPI_Wait(MPI_Request *request, MPI_Status *status)
{
	MPI_Request before = *request;
	MPI_Status mine;
	if (status == MPI_STATUS_IGNORE)
		status = &mine;
	struct call call;
	enter_completion(&call, 1, &before, 1, CALLER());
	int rc = PMPI_Wait(request, status);
	leave_completion();
	lock_tables();
	complete(before, status, rc, &call);
	unlock_tables();
	return rc;
}

int MPI_Test(MPI_Request *request, int *flag, MPI_Status *status)
{
	MPI_Request before = *request;
	MPI_Status mine;
	if (status == MPI_STATUS_IGNORE)
		status = &mine;
	struct call call;
	enter_completion(&call, 1, &before, 0, CALLER());
	int rc = PMPI_Test(request, flag, status);
	leave_completion();
	if (*flag) {
		lock_tables();
		complete(before, status, rc, &call);
		unlock_tables();
	}
	return rc;
}

/* Waitall and Testall: every request completed. */
static void complete_all(struct completion *c, int count, int rc, const struct call *call)
{
	lock_tables();
	hold_time();
	for (int i = 0; i < count; i++) {
		int error = rc == MPI_ERR_IN_STATUS ? c->statuses[i].MPI_ERROR : rc;
		if (error != MPI_ERR_PENDING)
			complete(c->before[i], &c->statuses[i], error, call);
	}
	release_time();
	unlock_tables();
}

int MPI_Waitall(int count, MPI_Request requests[], MPI_Status statuses[])
{
	struct completion c;
	if (start_completion(&c, count, requests, statuses) != 0) {
		end_completion(&c, statuses);
		return PMPI_Waitall(count, requests, statuses);
	}
	struct call call;
	enter_completion(&call, count, c.before, 1, CALLER());
	int rc = PMPI_Waitall(count, requests, c.statuses);
	leave_completion();
	complete_all(&c, count, rc, &call);
	end_completion(&c, statuses);
	return rc;
}

int MPI_Testall(int count, MPI_Request requests[], int *flag, MPI_Status statuses[])
{
	struct completion c;
	if (start_completion(&c, count, requests, statuses) != 0) {
		end_completion(&c, statuses);
		return PMPI_Testall(count, requests, flag, statuses);
	}
	struct call call;
	enter_completion(&call, count, c.before, 0, CALLER());
	int rc = PMPI_Testall(count, requests, flag, c.statuses);
	leave_completion();
	if (*flag)
		complete_all(&c, count, rc, &call);
	end_completion(&c, statuses);
	return rc;
}

/* Waitany and Testany: request `index` completed. */
static void complete_one(struct completion *c, int index, MPI_Status *status, int rc, const struct call *call)
{
	if (index == MPI_UNDEFINED)
		return;
	lock_tables();
	complete(c->before[index], status, rc, call);
	unlock_tables();
}

int MPI_Waitany(int count, MPI_Request requests[], int *index, MPI_Status *status)
{
	struct completion c;
	MPI_Status mine;
	if (status == MPI_STATUS_IGNORE)
		status = &mine;
	if (start_completion(&c, count, requests, MPI_STATUSES_IGNORE) != 0) {
		end_completion(&c, MPI_STATUSES_IGNORE);
		return PMPI_Waitany(count, requests, index, status);
	}
	struct call call;
	enter_completion(&call, count, c.before, 1, CALLER());
	int pick = replay_pick(count, c.before);
	int rc = pick < 0 ? PMPI_Waitany(count, requests, index, status) : PMPI_Wait(&requests[pick], status);
	if (pick >= 0)
		*index = pick;
	leave_completion();
	complete_one(&c, *index, status, rc, &call);
	end_completion(&c, MPI_STATUSES_IGNORE);
	return rc;
}

int MPI_Testany(int count, MPI_Request requests[], int *index, int *flag, MPI_Status *status)
{
	struct completion c;
	MPI_Status mine;
	if (status == MPI_STATUS_IGNORE)
		status = &mine;
	if (start_completion(&c, count, requests, MPI_STATUSES_IGNORE) != 0) {
		end_completion(&c, MPI_STATUSES_IGNORE);
		return PMPI_Testany(count, requests, index, flag, status);
	}
	struct call call;
	enter_completion(&call, count, c.before, 0, CALLER());
	int pick = replay_pick(count, c.before);
	int rc = pick < 0 ? PMPI_Testany(count, requests, index, flag, status) : PMPI_Test(&requests[pick], flag, status);
	if (pick >= 0)
		*index = *flag ? pick : MPI_UNDEFINED;
	leave_completion();
	if (*flag)
		complete_one(&c, *index, status, rc, &call);
	end_completion(&c, MPI_STATUSES_IGNORE);
	return rc;
}

/* Waitsome and Testsome: the requests at `indices` completed. */
static void complete_some(struct completion *c, int outcount, const int *indices, int rc, const struct call *call)
{
	if (outcount == MPI_UNDEFINED)
		return;
	lock_tables();
	hold_time();
	for (int i = 0; i < outcount; i++)
		complete(c->before[indices[i]], &c->statuses[i], rc == MPI_ERR_IN_STATUS ? c->statuses[i].MPI_ERROR : rc,
			 call);
	release_time();
	unlock_tables();
}

typedef int (*some_call)(int, MPI_Request[], int *, int[], MPI_Status[]);

/* MPI_Waitsome and MPI_Testsome (`blocking` for the first). */
static int some(some_call call, int blocking, int count, MPI_Request requests[], int *outcount, int indices[],
		MPI_Status statuses[], void *address)
{
	struct completion c;
	if (start_completion(&c, count, requests, statuses) != 0) {
		end_completion(&c, statuses);
		return call(count, requests, outcount, indices, statuses);
	}
	struct call context;
	enter_completion(&context, count, c.before, blocking, address);
	/* In a replay, the request the record says completed next, alone. */
	int pick = replay_pick(count, c.before);
	int rc;
	if (pick < 0) {
		rc = call(count, requests, outcount, indices, c.statuses);
	} else {
		int done = 1;
		rc = blocking ? PMPI_Wait(&requests[pick], &c.statuses[0])
			      : PMPI_Test(&requests[pick], &done, &c.statuses[0]);
		*outcount = done;
		indices[0] = pick;
	}
	leave_completion();
	complete_some(&c, *outcount, indices, rc, &context);
	end_completion(&c, statuses);
	return rc;
}

int MPI_Waitsome(int count, MPI_Request requests[], int *outcount, int indices[], MPI_Status statuses[])
{
	return some(PMPI_Waitsome, 1, count, requests, outcount, indices, statuses, CALLER());
}

int MPI_Testsome(int count, MPI_Request requests[], int *outcount, int indices[], MPI_Status statuses[])
{
	return some(PMPI_Testsome, 0, count, requests, outcount, indices, statuses, CALLER());
}

/* Completes the detached operations that are done (`wait`: waits for every one). Under
 * the lock. */
static void reap_detached(int wait)
{
	for (struct pending **at = &detached; *at;) {
		struct pending *p = *at;
		MPI_Status status;
		int done = 0;
		int error = wait ? PMPI_Wait(&p->request, &status) : PMPI_Test(&p->request, &done, &status);
		if (!wait && !done && error == MPI_SUCCESS) {
			at = &p->next;
			continue;
		}
		*at = p->next;
		record_done(p, &status, unpack(p, &status, error), p->flags, error);
		pending_free(p);
	}
}

int MPI_Request_free(MPI_Request *request)
{
	lock_tables();
	struct pending *p = forget(*request);
	if (p && p->persistent && !p->active) {
		pending_free(p);
	} else if (p) {
		p->next = detached;
		detached = p;
	}
	unlock_tables();
	if (!p)
		return PMPI_Request_free(request);
	*request = MPI_REQUEST_NULL;
	return MPI_SUCCESS;
}

/* ---- Abort ---- */

int MPI_Abort(MPI_Comm handle, int code)
{
	uint32_t site;
	struct comm *c = enter(handle, CALLER(), &site);
	lock_tables();
	record_abort(KIND_ABORT, c, code, site);
	unlock_tables();
	capture_end("abort", code);
	return PMPI_Abort(handle, code);
}

/* ---- Collectives ---- */

/* Runs a collective between marking the rank blocked and recording its event. */
#define COLLECTIVE(KIND, COMM, ROOT, BYTES, CALL)                                                  \
	do {                                                                                       \
		uint32_t site_;                                                                    \
		STOP_POINT();                                                                      \
		struct comm *c_ = enter(COMM, CALLER(), &site_);                \
		int peer_ = world_of(c_, ROOT);                                                    \
		block(KIND, c_, peer_, -1, site_);                                                 \
		int rc_ = CALL;                                                                    \
		unblock();                                                                         \
		lock_tables();                                                         \
		append(event(KIND, c_, peer_, -1, BYTES, site_));                                  \
		unlock_tables();                                                       \
		return rc_;                                                                        \
	} while (0)

/* The rank's own part of a rooted or in-place buffer. */
#define PART(BUF, COUNT, TYPE) ((BUF) == MPI_IN_PLACE ? 0 : type_bytes(COUNT, TYPE))

int MPI_Barrier(MPI_Comm comm)
{
	COLLECTIVE(KIND_BARRIER, comm, -1, 0, PMPI_Barrier(comm));
}

int MPI_Bcast(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm)
{
	COLLECTIVE(KIND_BCAST, comm, root, type_bytes(count, type), PMPI_Bcast(buf, count, type, root, comm));
}

int MPI_Reduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Op op, int root, MPI_Comm comm)
{
	COLLECTIVE(KIND_REDUCE, comm, root, type_bytes(count, type),
		   PMPI_Reduce(sendbuf, recvbuf, count, type, op, root, comm));
}

int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm)
{
	COLLECTIVE(KIND_ALLREDUCE, comm, -1, type_bytes(count, type),
		   PMPI_Allreduce(sendbuf, recvbuf, count, type, op, comm));
}

int MPI_Gather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
	       MPI_Datatype recvtype, int root, MPI_Comm comm)
{
	COLLECTIVE(KIND_GATHER, comm, root, PART(sendbuf, sendcount, sendtype),
		   PMPI_Gather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm));
}

int MPI_Gatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, const int recvcounts[],
		const int displs[], MPI_Datatype recvtype, int root, MPI_Comm comm)
{
	COLLECTIVE(KIND_GATHER, comm, root, PART(sendbuf, sendcount, sendtype),
		   PMPI_Gatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root, comm));
}

int MPI_Scatter(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
		MPI_Datatype recvtype, int root, MPI_Comm comm)
{
	COLLECTIVE(KIND_SCATTER, comm, root, PART(recvbuf, recvcount, recvtype),
		   PMPI_Scatter(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm));
}

int MPI_Scatterv(const void *sendbuf, const int sendcounts[], const int displs[], MPI_Datatype sendtype,
		 void *recvbuf, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm)
{
	COLLECTIVE(KIND_SCATTER, comm, root, PART(recvbuf, recvcount, recvtype),
		   PMPI_Scatterv(sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root, comm));
}

int MPI_Allgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
		  MPI_Datatype recvtype, MPI_Comm comm)
{
	COLLECTIVE(KIND_ALLGATHER, comm, -1, PART(sendbuf, sendcount, sendtype),
		   PMPI_Allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm));
}

int MPI_Allgatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, const int recvcounts[],
		   const int displs[], MPI_Datatype recvtype, MPI_Comm comm)
{
	COLLECTIVE(KIND_ALLGATHER, comm, -1, PART(sendbuf, sendcount, sendtype),
		   PMPI_Allgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm));
}

int MPI_Alltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
		 MPI_Datatype recvtype, MPI_Comm comm)
{
	COLLECTIVE(KIND_ALLTOALL, comm, -1, PART(sendbuf, sendcount, sendtype),
		   PMPI_Alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm));
}

int MPI_Alltoallv(const void *sendbuf, const int sendcounts[], const int sdispls[], MPI_Datatype sendtype,
		  void *recvbuf, const int recvcounts[], const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm)
{
	COLLECTIVE(KIND_ALLTOALL, comm, -1, 0,
		   PMPI_Alltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype,
				  comm));
}

int MPI_Reduce_scatter(const void *sendbuf, void *recvbuf, const int recvcounts[], MPI_Datatype type, MPI_Op op,
		       MPI_Comm comm)
{
	COLLECTIVE(KIND_REDUCE_SCATTER, comm, -1, 0, PMPI_Reduce_scatter(sendbuf, recvbuf, recvcounts, type, op, comm));
}

int MPI_Reduce_scatter_block(const void *sendbuf, void *recvbuf, int recvcount, MPI_Datatype type, MPI_Op op,
			     MPI_Comm comm)
{
	COLLECTIVE(KIND_REDUCE_SCATTER, comm, -1, type_bytes(recvcount, type),
		   PMPI_Reduce_scatter_block(sendbuf, recvbuf, recvcount, type, op, comm));
}

int MPI_Scan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm)
{
	COLLECTIVE(KIND_SCAN, comm, -1, type_bytes(count, type), PMPI_Scan(sendbuf, recvbuf, count, type, op, comm));
}

int MPI_Exscan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm)
{
	COLLECTIVE(KIND_SCAN, comm, -1, type_bytes(count, type), PMPI_Exscan(sendbuf, recvbuf, count, type, op, comm));
}

/* ---- Non-blocking collectives ---- */

/* Records a non-blocking collective's post once MPI took it, and remembers its request
 * so that the Wait* or Test* that completes it records the completion. */
#define ICOLLECTIVE(KIND, COMM, ROOT, BYTES, REQUEST, CALL)                                        \
	do {                                                                                       \
		uint32_t site_;                                                                    \
		STOP_POINT();                                                                      \
		struct comm *c_ = enter(COMM, CALLER(), &site_);                \
		struct pending *p_ = pending_new();                                                \
		int rc_ = CALL;                                                                    \
		if (!p_ || rc_ != MPI_SUCCESS) {                                                   \
			pending_free(p_);                                                          \
			return rc_;                                                                \
		}                                                                                  \
		p_->request = *(REQUEST);                                                          \
		p_->collective = KIND;                                                             \
		p_->comm = c_;                                                                     \
		p_->peer = world_of(c_, ROOT);                                                     \
		p_->tag = -1;                                                                      \
		p_->site = site_;                                                                  \
		lock_tables();                                                                     \
		p_->post = append(event(KIND_POSTED(KIND), c_, p_->peer, -1, BYTES, site_));       \
		remember(p_);                                                                      \
		unlock_tables();                                                                   \
		return rc_;                                                                        \
	} while (0)

int MPI_Ibarrier(MPI_Comm comm, MPI_Request *request)
{
	ICOLLECTIVE(KIND_BARRIER, comm, -1, 0, request, PMPI_Ibarrier(comm, request));
}

int MPI_Ibcast(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm, MPI_Request *request)
{
	ICOLLECTIVE(KIND_BCAST, comm, root, type_bytes(count, type), request,
		    PMPI_Ibcast(buf, count, type, root, comm, request));
}

int MPI_Ireduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Op op, int root, MPI_Comm comm,
		MPI_Request *request)
{
	ICOLLECTIVE(KIND_REDUCE, comm, root, type_bytes(count, type), request,
		    PMPI_Ireduce(sendbuf, recvbuf, count, type, op, root, comm, request));
}

int MPI_Iallreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
		   MPI_Request *request)
{
	ICOLLECTIVE(KIND_ALLREDUCE, comm, -1, type_bytes(count, type), request,
		    PMPI_Iallreduce(sendbuf, recvbuf, count, type, op, comm, request));
}

int MPI_Iscatter(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
		 MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request *request)
{
	ICOLLECTIVE(KIND_SCATTER, comm, root, PART(recvbuf, recvcount, recvtype), request,
		    PMPI_Iscatter(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, request));
}

int MPI_Iscatterv(const void *sendbuf, const int sendcounts[], const int displs[], MPI_Datatype sendtype,
		  void *recvbuf, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request *request)
{
	ICOLLECTIVE(KIND_SCATTER, comm, root, PART(recvbuf, recvcount, recvtype), request,
		    PMPI_Iscatterv(sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root, comm,
				   request));
}

int MPI_Igather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
		MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request *request)
{
	ICOLLECTIVE(KIND_GATHER, comm, root, PART(sendbuf, sendcount, sendtype), request,
		    PMPI_Igather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, request));
}

int MPI_Igatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, const int recvcounts[],
		 const int displs[], MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request *request)
{
	ICOLLECTIVE(KIND_GATHER, comm, root, PART(sendbuf, sendcount, sendtype), request,
		    PMPI_Igatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root, comm,
				  request));
}

int MPI_Iallgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
		   MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request)
{
	ICOLLECTIVE(KIND_ALLGATHER, comm, -1, PART(sendbuf, sendcount, sendtype), request,
		    PMPI_Iallgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, request));
}

int MPI_Iallgatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, const int recvcounts[],
		    const int displs[], MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request)
{
	ICOLLECTIVE(KIND_ALLGATHER, comm, -1, PART(sendbuf, sendcount, sendtype), request,
		    PMPI_Iallgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm,
				     request));
}

int MPI_Ialltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
		  MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request)
{
	ICOLLECTIVE(KIND_ALLTOALL, comm, -1, PART(sendbuf, sendcount, sendtype), request,
		    PMPI_Ialltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, request));
}

int MPI_Ialltoallv(const void *sendbuf, const int sendcounts[], const int sdispls[], MPI_Datatype sendtype,
		   void *recvbuf, const int recvcounts[], const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm,
		   MPI_Request *request)
{
	ICOLLECTIVE(KIND_ALLTOALL, comm, -1, 0, request,
		    PMPI_Ialltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype,
				    comm, request));
}

int MPI_Ireduce_scatter(const void *sendbuf, void *recvbuf, const int recvcounts[], MPI_Datatype type, MPI_Op op,
			MPI_Comm comm, MPI_Request *request)
{
	ICOLLECTIVE(KIND_REDUCE_SCATTER, comm, -1, 0, request,
		    PMPI_Ireduce_scatter(sendbuf, recvbuf, recvcounts, type, op, comm, request));
}

int MPI_Ireduce_scatter_block(const void *sendbuf, void *recvbuf, int recvcount, MPI_Datatype type, MPI_Op op,
			      MPI_Comm comm, MPI_Request *request)
{
	ICOLLECTIVE(KIND_REDUCE_SCATTER, comm, -1, type_bytes(recvcount, type), request,
		    PMPI_Ireduce_scatter_block(sendbuf, recvbuf, recvcount, type, op, comm, request));
}

int MPI_Iscan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
	      MPI_Request *request)
{
	ICOLLECTIVE(KIND_SCAN, comm, -1, type_bytes(count, type), request,
		    PMPI_Iscan(sendbuf, recvbuf, count, type, op, comm, request));
}

int MPI_Iexscan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
		MPI_Request *request)
{
	ICOLLECTIVE(KIND_SCAN, comm, -1, type_bytes(count, type), request,
		    PMPI_Iexscan(sendbuf, recvbuf, count, type, op, comm, request));
}

/* ---- Loading ---- */

/* The descriptor number in environment variable `name` (removed), made close-on-exec;
 * -1 if there is none. */
static int take_fd(const char *name)
{
	const char *value = getenv(name);
	if (!value)
		return -1;
	char *end;
	long fd = strtol(value, &end, 10);
	unsetenv(name);
	if (*end || fd < 0 || fd > INT_MAX || fcntl((int)fd, F_SETFD, FD_CLOEXEC) != 0)
		return -1;
	return (int)fd;
}

/* The cut to stop at, from SDT_MPI_STOP_AFTER and SDT_MPI_STOP_CAPTURE, and whether the
 * rank traps as it ends the job, from SDT_MPI_END_CAPTURE (all removed). */
static void take_stop(void)
{
	const char *after = getenv("SDT_MPI_STOP_AFTER");
	if (after) {
		char *end;
		unsigned long long n = strtoull(after, &end, 10);
		if (!*end && *after && n > 0 && n < NO_STOP)
			stop_wanted = n;
		unsetenv("SDT_MPI_STOP_AFTER");
	}
	stop_capture = getenv("SDT_MPI_STOP_CAPTURE") != NULL;
	unsetenv("SDT_MPI_STOP_CAPTURE");
	end_capture = getenv("SDT_MPI_END_CAPTURE") != NULL;
	unsetenv("SDT_MPI_END_CAPTURE");
}

/* Takes this library out of LD_PRELOAD (it was loaded as /proc/self/fd/N, a descriptor
 * the rank's children will not have) and closes its descriptor. */
static void unpreload(void)
{
	Dl_info self;
	const char *preload = getenv("LD_PRELOAD");
	if (!preload || !dladdr((void *)unpreload, &self) || !self.dli_fname)
		return;
	size_t len = strlen(self.dli_fname);
	char *kept = malloc(strlen(preload) + 1);
	if (!kept)
		return;
	kept[0] = 0;
	for (const char *p = preload; *p;) {
		size_t n = strcspn(p, ": ");
		if (n && !(n == len && strncmp(p, self.dli_fname, len) == 0)) {
			if (kept[0])
				strcat(kept, ":");
			strncat(kept, p, n);
		}
		p += n;
		p += *p != 0;
	}
	if (kept[0])
		setenv("LD_PRELOAD", kept, 1);
	else
		unsetenv("LD_PRELOAD");
	free(kept);
	int fd;
	if (sscanf(self.dli_fname, "/proc/self/fd/%d", &fd) == 1)
		close(fd);
}

/* Renames this library in the dynamic linker's list of loaded objects: its name there,
 * /proc/self/fd/N, would make a debugger reading a snapshot's list (gdb on an exported
 * core) open its own descriptor N, a pipe it then waits on for ever. The file name it
 * gets names no file; `sdt gdb` knows the library by its bytes. */
static void rename_loaded(void)
{
	Dl_info self;
	struct link_map *entry = NULL;
	if (dladdr1((void *)rename_loaded, &self, (void **)&entry, RTLD_DL_LINKMAP) && entry &&
	    strncmp(entry->l_name, "/proc/self/fd/", 14) == 0)
		entry->l_name = (char *)"sdtmpi.so";
}

__attribute__((constructor)) static void load(void)
{
	unpreload();
	rename_loaded();
	events_fd = take_fd("SDT_MPI_EVENTS_FD");
	comms_fd = take_fd("SDT_MPI_COMMS_FD");
	sites_fd = take_fd("SDT_MPI_SITES_FD");
	replay_fd = take_fd("SDT_MPI_REPLAY_FD");
	take_stop();
}
