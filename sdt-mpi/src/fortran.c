/*
 * fortran.c: the Fortran side of SDT's MPI interposition library, linked with sdtmpi.c.
 *
 * A Fortran program calls MPI through its MPI's Fortran bindings (`mpif.h` and `use mpi`:
 * mpi_send_, …; `use mpi_f08`: mpi_send_f08_, or MPICH's mpi_send_f08ts_ for calls with
 * a choice buffer), named as gfortran and flang name them: lower case, one trailing
 * underscore. This file defines those of the calls sdtmpi.c records, so that a Fortran
 * rank's history is recorded as a C rank's is, with the Fortran caller's line as each
 * event's call site. Every binding here sets fortran_site to its caller's return
 * address (unless a binding further out already did), which the C wrappers take as
 * their call site, and clears it on its way out. Then:
 *
 *   Open MPI, mpif.h    converts the arguments as Open MPI's binding would and calls the
 *                       C wrapper: Open MPI's bindings call PMPI_* directly, past any C
 *                       wrapper. These also take the names ompi_*_f, which Open MPI's
 *                       mpi_f08 bindings call.
 *   Open MPI, mpi_f08   calls Open MPI's own binding (dlsym RTLD_NEXT), which calls
 *                       ompi_*_f: the conversions above
 *   MPICH, mpif.h       calls MPICH's own binding, which calls the C MPI_* functions
 *   MPICH, mpi_f08      with a choice buffer (*_f08ts_): as mpif.h; without one (their
 *                       bindings call PMPI_*): converts, as for Open MPI's mpif.h
 *
 * Conversions: handles through MPI_*_f2c/c2f, statuses through MPI_Status_c2f (the same
 * words as the C status in both MPIs), request indices from 1, and the Fortran
 * MPI_BOTTOM, MPI_IN_PLACE and MPI_STATUS[ES]_IGNORE, which are addresses of the MPI's
 * own objects. The C wrappers are reached directly, not through the program's symbol
 * lookup (the library is linked with -Bsymbolic-functions).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

extern __thread void *fortran_site __attribute__((visibility("hidden")));

/* Sets the call site for the C wrappers below, unless a binding further out did;
 * returns whether this one did (and must clear it). */
static inline int site_enter(void *caller)
{
	if (fortran_site)
		return 0;
	fortran_site = caller;
	return 1;
}

static inline void site_leave(int own)
{
	if (own)
		fortran_site = NULL;
}

/* ---- Bindings that call the MPI's own ---- */

/* The MPI's own binding `name`, found once; a rank without it cannot have called ours. */
static void *own_binding(void **cached, const char *name)
{
	void *f = __atomic_load_n(cached, __ATOMIC_ACQUIRE);
	if (f)
		return f;
	f = dlsym(RTLD_NEXT, name);
	if (!f) {
		fprintf(stderr, "sdt: the MPI has no Fortran binding %s to call\n", name);
		abort();
	}
	__atomic_store_n(cached, f, __ATOMIC_RELEASE);
	return f;
}

#define PARAMS_1 void *a1
#define PARAMS_2 PARAMS_1, void *a2
#define PARAMS_3 PARAMS_2, void *a3
#define PARAMS_4 PARAMS_3, void *a4
#define PARAMS_5 PARAMS_4, void *a5
#define PARAMS_6 PARAMS_5, void *a6
#define PARAMS_7 PARAMS_6, void *a7
#define PARAMS_8 PARAMS_7, void *a8
#define PARAMS_9 PARAMS_8, void *a9
#define PARAMS_10 PARAMS_9, void *a10
#define PARAMS_11 PARAMS_10, void *a11
#define PARAMS_12 PARAMS_11, void *a12
#define PARAMS_13 PARAMS_12, void *a13
#define ARGS_1 a1
#define ARGS_2 ARGS_1, a2
#define ARGS_3 ARGS_2, a3
#define ARGS_4 ARGS_3, a4
#define ARGS_5 ARGS_4, a5
#define ARGS_6 ARGS_5, a6
#define ARGS_7 ARGS_6, a7
#define ARGS_8 ARGS_7, a8
#define ARGS_9 ARGS_8, a9
#define ARGS_10 ARGS_9, a10
#define ARGS_11 ARGS_10, a11
#define ARGS_12 ARGS_11, a12
#define ARGS_13 ARGS_12, a13

/* A binding `symbol` of `n` arguments (Fortran passes every one by reference) that calls
 * the MPI's own with the call site set. */
#define PASS_ON(symbol, n)                                                                         \
	void symbol(PARAMS_##n)                                                                    \
	{                                                                                          \
		static void *own;                                                                  \
		void (*call)(PARAMS_##n) = (void (*)(PARAMS_##n))own_binding(&own, #symbol);       \
		int own_site = site_enter(__builtin_return_address(0));                            \
		call(ARGS_##n);                                                                    \
		site_leave(own_site);                                                              \
	}

/* Every recorded call: its Fortran name, its arguments (with ierror), and its kind: 1
 * for a call with a choice buffer (MPICH's mpi_f08 names those *_f08ts_), 2 for the
 * Test* and I[m]probe calls (Open MPI's mpi_f08 bindings of those call pmpi_*_, past
 * ompi_*_f, so their mpi_f08 names are converted here too), 0 for the others. */
#define RECORDED(X)                                                                                \
	X(init, 1, 0) X(init_thread, 3, 0) X(finalize, 1, 0) X(abort, 3, 0)                        \
	X(comm_set_errhandler, 3, 0) X(comm_get_errhandler, 3, 0) X(comm_free, 2, 0)               \
	X(send, 7, 1) X(ssend, 7, 1) X(rsend, 7, 1) X(bsend, 7, 1)                                 \
	X(isend, 8, 1) X(issend, 8, 1) X(irsend, 8, 1) X(ibsend, 8, 1)                             \
	X(send_init, 8, 1) X(ssend_init, 8, 1) X(rsend_init, 8, 1) X(bsend_init, 8, 1)             \
	X(recv_init, 8, 1) X(start, 2, 0) X(startall, 3, 0)                                        \
	X(recv, 8, 1) X(irecv, 8, 1) X(sendrecv, 13, 1) X(sendrecv_replace, 10, 1)                 \
	X(probe, 5, 0) X(iprobe, 6, 2) X(mprobe, 6, 0) X(improbe, 7, 2)                            \
	X(mrecv, 6, 1) X(imrecv, 6, 1)                                                             \
	X(wait, 3, 0) X(test, 4, 2) X(waitall, 4, 0) X(testall, 5, 2)                              \
	X(waitany, 5, 0) X(testany, 6, 2) X(waitsome, 6, 0) X(testsome, 6, 2)                      \
	X(request_free, 2, 0)                                                                      \
	X(barrier, 2, 0) X(bcast, 6, 1) X(reduce, 8, 1) X(allreduce, 7, 1)                         \
	X(gather, 9, 1) X(gatherv, 10, 1) X(scatter, 9, 1) X(scatterv, 10, 1)                      \
	X(allgather, 8, 1) X(allgatherv, 9, 1) X(alltoall, 8, 1) X(alltoallv, 10, 1)               \
	X(reduce_scatter, 7, 1) X(reduce_scatter_block, 7, 1) X(scan, 7, 1) X(exscan, 7, 1)        \
	X(ibarrier, 3, 0) X(ibcast, 7, 1) X(ireduce, 9, 1) X(iallreduce, 8, 1)                     \
	X(igather, 10, 1) X(igatherv, 11, 1) X(iscatter, 10, 1) X(iscatterv, 11, 1)                \
	X(iallgather, 9, 1) X(iallgatherv, 10, 1) X(ialltoall, 9, 1) X(ialltoallv, 11, 1)          \
	X(ireduce_scatter, 8, 1) X(ireduce_scatter_block, 8, 1) X(iscan, 8, 1) X(iexscan, 8, 1)

#if defined(OPEN_MPI)
#define F08_0(name, n) PASS_ON(mpi_##name##_f08_, n)
#define F08_1(name, n) PASS_ON(mpi_##name##_f08_, n)
#define F08_2(name, n)
#elif defined(MPICH)
#define MPIF(name, n, kind) PASS_ON(mpi_##name##_, n)
RECORDED(MPIF)
#define F08_0(name, n)
#define F08_1(name, n) PASS_ON(mpi_##name##_f08ts_, n)
#define F08_2(name, n)
#endif
#define F08(name, n, kind) F08_##kind(name, n)
RECORDED(F08)

/* ---- Bindings that convert and call the C wrappers ---- */

#if defined(OPEN_MPI)
/* Open MPI's Fortran MPI_BOTTOM and MPI_IN_PLACE: common blocks of libmpi. */
extern char mpi_fortran_bottom_, mpi_fortran_in_place_;
#define F_STATUS_IGNORE ((void *)MPI_F_STATUS_IGNORE)
#define F_STATUSES_IGNORE ((void *)MPI_F_STATUSES_IGNORE)
#else
#define F_STATUS_IGNORE ((void *)MPI_F08_STATUS_IGNORE)
#define F_STATUSES_IGNORE ((void *)MPI_F08_STATUSES_IGNORE)
#endif

/* Requests or statuses converted in place on the stack up to this many; more are
 * allocated. */
#define ON_STACK 16

/* A Fortran status is the C status, word for word. */
_Static_assert(sizeof(MPI_Status) % sizeof(MPI_Fint) == 0, "a status is whole Fortran integers");
#define STATUS_WORDS (sizeof(MPI_Status) / sizeof(MPI_Fint))

static void status_out(const MPI_Status *c, MPI_Fint *f)
{
	if ((void *)f != F_STATUS_IGNORE)
		PMPI_Status_c2f(c, f);
}

static int logical(int c)
{
	return c ? 1 : 0;
}

/* The C requests of Fortran's `f[0..n)`, in `small` when they fit; NULL when memory
 * is short. */
static MPI_Request *requests_in(int n, const MPI_Fint *f, MPI_Request *small)
{
	MPI_Request *c = n <= ON_STACK ? small : malloc((size_t)n * sizeof *c);
	for (int i = 0; c && i < n; i++)
		c[i] = PMPI_Request_f2c(f[i]);
	return c;
}

/* Writes the requests back (a completed one is MPI_REQUEST_NULL now) and frees them. */
static void requests_out(int n, MPI_Request *c, MPI_Fint *f, const MPI_Request *small)
{
	for (int i = 0; i < n; i++)
		f[i] = PMPI_Request_c2f(c[i]);
	if (c != small)
		free(c);
}

/* Sets `*c` to C statuses for `n` Fortran ones: MPI_STATUSES_IGNORE for Fortran's, else
 * room for them (`small` when they fit); -1 when memory is short. */
static int statuses_in(int n, const MPI_Fint *f, MPI_Status *small, MPI_Status **c)
{
	if ((void *)f == F_STATUSES_IGNORE || n <= 0)
		*c = MPI_STATUSES_IGNORE;
	else
		*c = n <= ON_STACK ? small : malloc((size_t)n * sizeof(MPI_Status));
	return *c || (void *)f == F_STATUSES_IGNORE || n <= 0 ? 0 : -1;
}

/* Writes the first `n` statuses out and frees them. */
static void statuses_out(int n, MPI_Status *c, MPI_Fint *f, const MPI_Status *small)
{
	if ((void *)f == F_STATUSES_IGNORE || c == MPI_STATUSES_IGNORE)
		return;
	for (int i = 0; i < n; i++)
		PMPI_Status_c2f(&c[i], f + (size_t)i * STATUS_WORDS);
	if (c != small)
		free(c);
}

/* A converting binding: mpif.h's `mpi_NAME_` and `ompi_NAME_f` for Open MPI,
 * `mpi_NAME_f08_` for MPICH. The call site is set around the body, which sets `rc`,
 * and ierror (optional in mpi_f08) gets it. */
#define BINDING(name, params, ...)                                                                 \
	void CONVERTED(name) params                                                                \
	{                                                                                          \
		int own_site = site_enter(__builtin_return_address(0));                            \
		int rc;                                                                            \
		__VA_ARGS__;                                                                       \
		site_leave(own_site);                                                              \
		if (ierr)                                                                          \
			*ierr = rc;                                                                \
	}                                                                                          \
	ALSO(name, params)
#if defined(OPEN_MPI)
#define CONVERTED(name) mpi_##name##_
#define ALSO(name, params) void ompi_##name##_f params __attribute__((alias("mpi_" #name "_")));
#define ALSO_F08(name, params) void mpi_##name##_f08_ params __attribute__((alias("mpi_" #name "_")));
#else
#define CONVERTED(name) mpi_##name##_f08_
#define ALSO(name, params)
#define ALSO_F08(name, params)
#endif

/* A binding of a call of kind 2 in RECORDED. */
#define LOGICAL_BINDING(name, params, ...) BINDING(name, params, __VA_ARGS__) ALSO_F08(name, params)

#define COMM(f) PMPI_Comm_f2c(*(f))
#define TYPE(f) PMPI_Type_f2c(*(f))
#define OP(f) PMPI_Op_f2c(*(f))

BINDING(init, (MPI_Fint *ierr), rc = MPI_Init(NULL, NULL))

BINDING(init_thread, (MPI_Fint *required, MPI_Fint *provided, MPI_Fint *ierr), {
	int got = MPI_THREAD_SINGLE;
	rc = MPI_Init_thread(NULL, NULL, *required, &got);
	*provided = got;
})

BINDING(finalize, (MPI_Fint *ierr), rc = MPI_Finalize())

BINDING(abort, (MPI_Fint *comm, MPI_Fint *code, MPI_Fint *ierr), rc = MPI_Abort(COMM(comm), *code))

BINDING(comm_set_errhandler, (MPI_Fint *comm, MPI_Fint *handler, MPI_Fint *ierr),
	rc = MPI_Comm_set_errhandler(COMM(comm), PMPI_Errhandler_f2c(*handler)))

BINDING(comm_get_errhandler, (MPI_Fint *comm, MPI_Fint *handler, MPI_Fint *ierr), {
	MPI_Errhandler c;
	rc = MPI_Comm_get_errhandler(COMM(comm), &c);
	if (rc == MPI_SUCCESS)
		*handler = PMPI_Errhandler_c2f(c);
})

BINDING(comm_free, (MPI_Fint *comm, MPI_Fint *ierr), {
	MPI_Comm c = COMM(comm);
	rc = MPI_Comm_free(&c);
	if (rc == MPI_SUCCESS)
		*comm = PMPI_Comm_c2f(c);
})

/* ---- Point to point without a buffer: both MPIs ---- */

BINDING(start, (MPI_Fint *request, MPI_Fint *ierr), {
	MPI_Request c = PMPI_Request_f2c(*request);
	rc = MPI_Start(&c);
})

BINDING(startall, (MPI_Fint *count, MPI_Fint *requests, MPI_Fint *ierr), {
	MPI_Request small[ON_STACK], *c = requests_in(*count, requests, small);
	rc = c ? MPI_Startall(*count, c) : MPI_ERR_NO_MEM;
	if (c)
		requests_out(*count, c, requests, small);
})

BINDING(probe, (MPI_Fint *source, MPI_Fint *tag, MPI_Fint *comm, MPI_Fint *status, MPI_Fint *ierr), {
	MPI_Status c;
	rc = MPI_Probe(*source, *tag, COMM(comm), &c);
	status_out(&c, status);
})

LOGICAL_BINDING(iprobe,
	(MPI_Fint *source, MPI_Fint *tag, MPI_Fint *comm, MPI_Fint *flag, MPI_Fint *status, MPI_Fint *ierr),
	{
		MPI_Status c;
		int found = 0;
		rc = MPI_Iprobe(*source, *tag, COMM(comm), &found, &c);
		*flag = logical(found);
		if (found)
			status_out(&c, status);
	})

BINDING(mprobe,
	(MPI_Fint *source, MPI_Fint *tag, MPI_Fint *comm, MPI_Fint *message, MPI_Fint *status, MPI_Fint *ierr),
	{
		MPI_Status c;
		MPI_Message m;
		rc = MPI_Mprobe(*source, *tag, COMM(comm), &m, &c);
		if (rc == MPI_SUCCESS)
			*message = PMPI_Message_c2f(m);
		status_out(&c, status);
	})

LOGICAL_BINDING(improbe,
	(MPI_Fint *source, MPI_Fint *tag, MPI_Fint *comm, MPI_Fint *flag, MPI_Fint *message, MPI_Fint *status,
	 MPI_Fint *ierr),
	{
		MPI_Status c;
		MPI_Message m;
		int found = 0;
		rc = MPI_Improbe(*source, *tag, COMM(comm), &found, &m, &c);
		*flag = logical(found);
		if (found) {
			*message = PMPI_Message_c2f(m);
			status_out(&c, status);
		}
	})

/* ---- Completions ---- */

BINDING(wait, (MPI_Fint *request, MPI_Fint *status, MPI_Fint *ierr), {
	MPI_Request r = PMPI_Request_f2c(*request);
	MPI_Status c;
	rc = MPI_Wait(&r, &c);
	*request = PMPI_Request_c2f(r);
	status_out(&c, status);
})

LOGICAL_BINDING(test, (MPI_Fint *request, MPI_Fint *flag, MPI_Fint *status, MPI_Fint *ierr), {
	MPI_Request r = PMPI_Request_f2c(*request);
	MPI_Status c;
	int done = 0;
	rc = MPI_Test(&r, &done, &c);
	*request = PMPI_Request_c2f(r);
	*flag = logical(done);
	if (done)
		status_out(&c, status);
})

/* MPICH's MPI_STATUSES_IGNORE is (MPI_Status *)1, which gcc takes for an array too
 * small for the statuses MPICH's prototypes say are written. */
#pragma GCC diagnostic ignored "-Wstringop-overflow"

/* Runs CALL on `count` C requests and statuses made from Fortran's, and writes back the
 * first `written` statuses. */
#define ON_ARRAYS(count, requests, statuses, written, CALL)                                        \
	do {                                                                                       \
		MPI_Request small_[ON_STACK];                                                      \
		MPI_Status states_[ON_STACK], *s = MPI_STATUSES_IGNORE;                            \
		MPI_Request *r = requests_in(count, requests, small_);                             \
		if (!r || statuses_in(count, statuses, states_, &s) != 0) {                        \
			rc = MPI_ERR_NO_MEM;                                                       \
		} else {                                                                           \
			CALL;                                                                      \
			statuses_out(written, s, statuses, states_);                               \
		}                                                                                  \
		if (r)                                                                             \
			requests_out(count, r, requests, small_);                                  \
	} while (0)

BINDING(waitall, (MPI_Fint *count, MPI_Fint *requests, MPI_Fint *statuses, MPI_Fint *ierr),
	ON_ARRAYS(*count, requests, statuses, *count, rc = MPI_Waitall(*count, r, s)))

LOGICAL_BINDING(testall, (MPI_Fint *count, MPI_Fint *requests, MPI_Fint *flag, MPI_Fint *statuses, MPI_Fint *ierr), {
	int done = 0;
	ON_ARRAYS(*count, requests, statuses, done ? *count : 0, rc = MPI_Testall(*count, r, &done, s));
	*flag = logical(done);
})

/* Fortran counts requests from 1. */
static int from_one(int index)
{
	return index == MPI_UNDEFINED ? MPI_UNDEFINED : index + 1;
}

BINDING(waitany, (MPI_Fint *count, MPI_Fint *requests, MPI_Fint *index, MPI_Fint *status, MPI_Fint *ierr), {
	MPI_Status c;
	int at = MPI_UNDEFINED;
	ON_ARRAYS(*count, requests, F_STATUSES_IGNORE, 0, rc = MPI_Waitany(*count, r, &at, &c));
	*index = from_one(at);
	if (at != MPI_UNDEFINED)
		status_out(&c, status);
})

LOGICAL_BINDING(testany,
	(MPI_Fint *count, MPI_Fint *requests, MPI_Fint *index, MPI_Fint *flag, MPI_Fint *status, MPI_Fint *ierr),
	{
		MPI_Status c;
		int at = MPI_UNDEFINED, done = 0;
		ON_ARRAYS(*count, requests, F_STATUSES_IGNORE, 0, rc = MPI_Testany(*count, r, &at, &done, &c));
		*index = from_one(at);
		*flag = logical(done);
		if (done && at != MPI_UNDEFINED)
			status_out(&c, status);
	})

#define SOME(name, c_name, binding)                                                                \
	binding(name,                                                                              \
		(MPI_Fint *count, MPI_Fint *requests, MPI_Fint *outcount, MPI_Fint *indices,      \
		 MPI_Fint *statuses, MPI_Fint *ierr),                                              \
		{                                                                                  \
			int out = MPI_UNDEFINED;                                                   \
			ON_ARRAYS(*count, requests, statuses, out == MPI_UNDEFINED ? 0 : out,      \
				  rc = c_name(*count, r, &out, indices, s));                       \
			*outcount = out;                                                           \
			for (int i = 0; out != MPI_UNDEFINED && i < out; i++)                      \
				indices[i]++;                                                      \
		})
SOME(waitsome, MPI_Waitsome, BINDING)
SOME(testsome, MPI_Testsome, LOGICAL_BINDING)

BINDING(request_free, (MPI_Fint *request, MPI_Fint *ierr), {
	MPI_Request r = PMPI_Request_f2c(*request);
	rc = MPI_Request_free(&r);
	if (rc == MPI_SUCCESS)
		*request = PMPI_Request_c2f(r);
})

/* ---- Collectives without a buffer ---- */

/* A collective binding, blocking (`rc = CALL`) or not (CALL with `&r` for its request,
 * written back as Fortran's `request`, the parameter before ierror). */
#define COLLECTIVE(name, params, call) BINDING(name, (params, MPI_Fint *ierr), rc = call)
#define ICOLLECTIVE(name, params, call)                                                            \
	BINDING(name, (params, MPI_Fint *request, MPI_Fint *ierr), {                               \
		MPI_Request r;                                                                     \
		rc = call;                                                                         \
		if (rc == MPI_SUCCESS)                                                             \
			*request = PMPI_Request_c2f(r);                                            \
	})
#define P(...) __VA_ARGS__

COLLECTIVE(barrier, MPI_Fint *comm, MPI_Barrier(COMM(comm)))
ICOLLECTIVE(ibarrier, MPI_Fint *comm, MPI_Ibarrier(COMM(comm), &r))

#if defined(OPEN_MPI)
/* ---- Calls with a choice buffer: Open MPI's mpif.h ---- */

/* A choice buffer as C sees it. */
static void *buffer(void *b)
{
	return b == &mpi_fortran_bottom_ ? MPI_BOTTOM : b == &mpi_fortran_in_place_ ? MPI_IN_PLACE : b;
}

#define SEND(name, c_name)                                                                         \
	BINDING(name,                                                                              \
		(void *buf, MPI_Fint *count, MPI_Fint *type, MPI_Fint *dest, MPI_Fint *tag,       \
		 MPI_Fint *comm, MPI_Fint *ierr),                                                  \
		rc = c_name(buffer(buf), *count, TYPE(type), *dest, *tag, COMM(comm)))
SEND(send, MPI_Send)
SEND(ssend, MPI_Ssend)
SEND(rsend, MPI_Rsend)
SEND(bsend, MPI_Bsend)

/* Sends and receives that make a request: posted and persistent ones. */
#define POST(name, c_name)                                                                         \
	BINDING(name,                                                                              \
		(void *buf, MPI_Fint *count, MPI_Fint *type, MPI_Fint *peer, MPI_Fint *tag,       \
		 MPI_Fint *comm, MPI_Fint *request, MPI_Fint *ierr),                               \
		{                                                                                  \
			MPI_Request c;                                                             \
			rc = c_name(buffer(buf), *count, TYPE(type), *peer, *tag, COMM(comm), &c); \
			if (rc == MPI_SUCCESS)                                                     \
				*request = PMPI_Request_c2f(c);                                    \
		})
POST(isend, MPI_Isend)
POST(issend, MPI_Issend)
POST(irsend, MPI_Irsend)
POST(ibsend, MPI_Ibsend)
POST(send_init, MPI_Send_init)
POST(ssend_init, MPI_Ssend_init)
POST(rsend_init, MPI_Rsend_init)
POST(bsend_init, MPI_Bsend_init)
POST(recv_init, MPI_Recv_init)
POST(irecv, MPI_Irecv)

BINDING(recv,
	(void *buf, MPI_Fint *count, MPI_Fint *type, MPI_Fint *source, MPI_Fint *tag, MPI_Fint *comm,
	 MPI_Fint *status, MPI_Fint *ierr),
	{
		MPI_Status c;
		rc = MPI_Recv(buffer(buf), *count, TYPE(type), *source, *tag, COMM(comm), &c);
		status_out(&c, status);
	})

BINDING(sendrecv,
	(void *sendbuf, MPI_Fint *sendcount, MPI_Fint *sendtype, MPI_Fint *dest, MPI_Fint *sendtag, void *recvbuf,
	 MPI_Fint *recvcount, MPI_Fint *recvtype, MPI_Fint *source, MPI_Fint *recvtag, MPI_Fint *comm,
	 MPI_Fint *status, MPI_Fint *ierr),
	{
		MPI_Status c;
		rc = MPI_Sendrecv(buffer(sendbuf), *sendcount, TYPE(sendtype), *dest, *sendtag, buffer(recvbuf),
				  *recvcount, TYPE(recvtype), *source, *recvtag, COMM(comm), &c);
		status_out(&c, status);
	})

BINDING(sendrecv_replace,
	(void *buf, MPI_Fint *count, MPI_Fint *type, MPI_Fint *dest, MPI_Fint *sendtag, MPI_Fint *source,
	 MPI_Fint *recvtag, MPI_Fint *comm, MPI_Fint *status, MPI_Fint *ierr),
	{
		MPI_Status c;
		rc = MPI_Sendrecv_replace(buffer(buf), *count, TYPE(type), *dest, *sendtag, *source, *recvtag,
					  COMM(comm), &c);
		status_out(&c, status);
	})

BINDING(mrecv,
	(void *buf, MPI_Fint *count, MPI_Fint *type, MPI_Fint *message, MPI_Fint *status, MPI_Fint *ierr),
	{
		MPI_Status c;
		MPI_Message m = PMPI_Message_f2c(*message);
		rc = MPI_Mrecv(buffer(buf), *count, TYPE(type), &m, &c);
		*message = PMPI_Message_c2f(m);
		status_out(&c, status);
	})

BINDING(imrecv,
	(void *buf, MPI_Fint *count, MPI_Fint *type, MPI_Fint *message, MPI_Fint *request, MPI_Fint *ierr),
	{
		MPI_Request r;
		MPI_Message m = PMPI_Message_f2c(*message);
		rc = MPI_Imrecv(buffer(buf), *count, TYPE(type), &m, &r);
		*message = PMPI_Message_c2f(m);
		if (rc == MPI_SUCCESS)
			*request = PMPI_Request_c2f(r);
	})

/* Collectives: the parameter lists several share (P_*), and their arguments in C (A_*). */
#define P_ROOTED P(void *sendbuf, MPI_Fint *sendcount, MPI_Fint *sendtype, void *recvbuf, MPI_Fint *recvcount, \
		   MPI_Fint *recvtype, MPI_Fint *root, MPI_Fint *comm)
#define A_ROOTED buffer(sendbuf), *sendcount, TYPE(sendtype), buffer(recvbuf), *recvcount, TYPE(recvtype), *root, COMM(comm)
#define P_ALL P(void *sendbuf, MPI_Fint *sendcount, MPI_Fint *sendtype, void *recvbuf, MPI_Fint *recvcount, \
		MPI_Fint *recvtype, MPI_Fint *comm)
#define A_ALL buffer(sendbuf), *sendcount, TYPE(sendtype), buffer(recvbuf), *recvcount, TYPE(recvtype), COMM(comm)
#define P_GATHERV P(void *sendbuf, MPI_Fint *sendcount, MPI_Fint *sendtype, void *recvbuf, MPI_Fint *recvcounts, \
		    MPI_Fint *displs, MPI_Fint *recvtype, MPI_Fint *root, MPI_Fint *comm)
#define A_GATHERV buffer(sendbuf), *sendcount, TYPE(sendtype), buffer(recvbuf), recvcounts, displs, TYPE(recvtype), \
		*root, COMM(comm)
#define P_SCATTERV P(void *sendbuf, MPI_Fint *sendcounts, MPI_Fint *displs, MPI_Fint *sendtype, void *recvbuf, \
		     MPI_Fint *recvcount, MPI_Fint *recvtype, MPI_Fint *root, MPI_Fint *comm)
#define A_SCATTERV buffer(sendbuf), sendcounts, displs, TYPE(sendtype), buffer(recvbuf), *recvcount, TYPE(recvtype), \
		*root, COMM(comm)
#define P_ALLGATHERV P(void *sendbuf, MPI_Fint *sendcount, MPI_Fint *sendtype, void *recvbuf, MPI_Fint *recvcounts, \
		       MPI_Fint *displs, MPI_Fint *recvtype, MPI_Fint *comm)
#define A_ALLGATHERV buffer(sendbuf), *sendcount, TYPE(sendtype), buffer(recvbuf), recvcounts, displs, \
		TYPE(recvtype), COMM(comm)
#define P_ALLTOALLV P(void *sendbuf, MPI_Fint *sendcounts, MPI_Fint *sdispls, MPI_Fint *sendtype, void *recvbuf, \
		      MPI_Fint *recvcounts, MPI_Fint *rdispls, MPI_Fint *recvtype, MPI_Fint *comm)
#define A_ALLTOALLV buffer(sendbuf), sendcounts, sdispls, TYPE(sendtype), buffer(recvbuf), recvcounts, rdispls, \
		TYPE(recvtype), COMM(comm)
#define P_REDUCE P(void *sendbuf, void *recvbuf, MPI_Fint *count, MPI_Fint *type, MPI_Fint *op, MPI_Fint *root, \
		   MPI_Fint *comm)
#define A_REDUCE buffer(sendbuf), buffer(recvbuf), *count, TYPE(type), OP(op), *root, COMM(comm)
#define P_ALLREDUCE P(void *sendbuf, void *recvbuf, MPI_Fint *count, MPI_Fint *type, MPI_Fint *op, MPI_Fint *comm)
#define A_ALLREDUCE buffer(sendbuf), buffer(recvbuf), *count, TYPE(type), OP(op), COMM(comm)
#define P_REDUCE_SCATTER P(void *sendbuf, void *recvbuf, MPI_Fint *recvcounts, MPI_Fint *type, MPI_Fint *op, \
			   MPI_Fint *comm)
#define A_REDUCE_SCATTER buffer(sendbuf), buffer(recvbuf), recvcounts, TYPE(type), OP(op), COMM(comm)

COLLECTIVE(bcast, P(void *buf, MPI_Fint *count, MPI_Fint *type, MPI_Fint *root, MPI_Fint *comm),
	   MPI_Bcast(buffer(buf), *count, TYPE(type), *root, COMM(comm)))
COLLECTIVE(reduce, P_REDUCE, MPI_Reduce(A_REDUCE))
COLLECTIVE(allreduce, P_ALLREDUCE, MPI_Allreduce(A_ALLREDUCE))
COLLECTIVE(gather, P_ROOTED, MPI_Gather(A_ROOTED))
COLLECTIVE(gatherv, P_GATHERV, MPI_Gatherv(A_GATHERV))
COLLECTIVE(scatter, P_ROOTED, MPI_Scatter(A_ROOTED))
COLLECTIVE(scatterv, P_SCATTERV, MPI_Scatterv(A_SCATTERV))
COLLECTIVE(allgather, P_ALL, MPI_Allgather(A_ALL))
COLLECTIVE(allgatherv, P_ALLGATHERV, MPI_Allgatherv(A_ALLGATHERV))
COLLECTIVE(alltoall, P_ALL, MPI_Alltoall(A_ALL))
COLLECTIVE(alltoallv, P_ALLTOALLV, MPI_Alltoallv(A_ALLTOALLV))
COLLECTIVE(reduce_scatter, P_REDUCE_SCATTER, MPI_Reduce_scatter(A_REDUCE_SCATTER))
COLLECTIVE(reduce_scatter_block, P_ALLREDUCE, MPI_Reduce_scatter_block(A_ALLREDUCE))
COLLECTIVE(scan, P_ALLREDUCE, MPI_Scan(A_ALLREDUCE))
COLLECTIVE(exscan, P_ALLREDUCE, MPI_Exscan(A_ALLREDUCE))

ICOLLECTIVE(ibcast, P(void *buf, MPI_Fint *count, MPI_Fint *type, MPI_Fint *root, MPI_Fint *comm),
	    MPI_Ibcast(buffer(buf), *count, TYPE(type), *root, COMM(comm), &r))
ICOLLECTIVE(ireduce, P_REDUCE, MPI_Ireduce(A_REDUCE, &r))
ICOLLECTIVE(iallreduce, P_ALLREDUCE, MPI_Iallreduce(A_ALLREDUCE, &r))
ICOLLECTIVE(igather, P_ROOTED, MPI_Igather(A_ROOTED, &r))
ICOLLECTIVE(igatherv, P_GATHERV, MPI_Igatherv(A_GATHERV, &r))
ICOLLECTIVE(iscatter, P_ROOTED, MPI_Iscatter(A_ROOTED, &r))
ICOLLECTIVE(iscatterv, P_SCATTERV, MPI_Iscatterv(A_SCATTERV, &r))
ICOLLECTIVE(iallgather, P_ALL, MPI_Iallgather(A_ALL, &r))
ICOLLECTIVE(iallgatherv, P_ALLGATHERV, MPI_Iallgatherv(A_ALLGATHERV, &r))
ICOLLECTIVE(ialltoall, P_ALL, MPI_Ialltoall(A_ALL, &r))
ICOLLECTIVE(ialltoallv, P_ALLTOALLV, MPI_Ialltoallv(A_ALLTOALLV, &r))
ICOLLECTIVE(ireduce_scatter, P_REDUCE_SCATTER, MPI_Ireduce_scatter(A_REDUCE_SCATTER, &r))
ICOLLECTIVE(ireduce_scatter_block, P_ALLREDUCE, MPI_Ireduce_scatter_block(A_ALLREDUCE, &r))
ICOLLECTIVE(iscan, P_ALLREDUCE, MPI_Iscan(A_ALLREDUCE, &r))
ICOLLECTIVE(iexscan, P_ALLREDUCE, MPI_Iexscan(A_ALLREDUCE, &r))
#endif
