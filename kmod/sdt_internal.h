/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What sdt_main.c (the device, registrations) and sdt_capture.c (holding threads) share.
 *
 * Objects and who keeps them alive:
 *
 *   sdt_session   one per registration: the program, its filter, the capture under way.
 *                 Referenced by the registering file, by each of its captures, and
 *                 briefly by a trigger that found it; found by the program's tgid on
 *                 the RCU list sdt_sessions.
 *   sdt_capture   one per snapshot: every thread's hold, the breaking thread's record,
 *                 the result to hand back. Referenced by its session while current, by
 *                 each hold still queued or waiting, by the breaking thread, and by
 *                 SDT_IOC_GET while it copies.
 *   sdt_hold      one per thread of a capture, owned by the capture (freed with it). Its
 *                 callback_head is the task_work that holds the thread; its registers
 *                 are what SDT_IOC_GET returns.
 *
 * Locks: sdt_sessions_mutex orders registrations; session->lock guards session->cur,
 * closed and seq; capture->lock guards the holds list and the counters. A capture's
 * lock nests inside its session's.
 */
#ifndef SDT_INTERNAL_H
#define SDT_INTERNAL_H

#include <linux/atomic.h>
#include <linux/cpumask.h>
#include <linux/cred.h>
#include <linux/kref.h>
#include <linux/list.h>
#include <linux/pid.h>
#include <linux/rcupdate.h>
#include <linux/sched.h>
#include <linux/spinlock.h>
#include <linux/types.h>
#include <linux/wait.h>

#include <linux/sdt_kmod.h>

struct sdt_session {
	struct kref kref;
	struct list_head node;		/* in sdt_sessions */
	struct rcu_head rcu;
	struct pid *tgid;		/* the program */
	struct pid *daemon;		/* the registering process */
	void *filter;			/* struct sdt_filter, rules, strings (checked) */
	size_t filter_len;
	/* The program's credentials when registered; a capture needs them unchanged. */
	kuid_t uid, euid, suid;
	kgid_t gid, egid, sgid;
	cpumask_var_t ipi_cpus;		/* scratch for the pauser (one capture at a time) */

	spinlock_t lock;
	struct sdt_capture *cur;	/* the capture under way */
	bool closed;			/* the registering file is closed */
	u64 seq;			/* captures so far */

	wait_queue_head_t daemon_wq;	/* SDT_IOC_GET and poll(): cur became ready */
};

#define SDT_HOLD_HASH_BITS 6

/* What becomes of libsdt's state word when the breaking thread is answered. */
enum sdt_state_change {
	SDT_STATE_KEEP,
	SDT_STATE_DECLINE,	/* no more snapshots: negate it (SDT_RELEASE_TURN_OFF) */
	SDT_STATE_SWITCH_OFF,	/* not captured any more (sdt is gone): SDT_STATE_OFF */
};

struct sdt_capture {
	struct kref kref;
	struct sdt_session *session;	/* holds a reference */
	int kind;			/* SDT_CAPTURE_* */
	u64 seq;
	u64 start_ns;			/* CLOCK_MONOTONIC */
	u64 held_ns;

	u64 exec_id;			/* the program's, when the capture began */

	spinlock_t lock;
	struct list_head holds;		/* struct sdt_hold, the breaking thread's first */
	struct hlist_head by_pid[1 << SDT_HOLD_HASH_BITS];	/* the holds, by thread */
	unsigned int pending;		/* holds queued that have not arrived, +1 while arming */
	unsigned int nr_held;
	bool ready;			/* nothing pending: every thread held or gone */
	bool failed;			/* a thread could not be held or read */
	bool released;			/* read without the lock by waiting threads */
	wait_queue_head_t wq;		/* held threads wait here for `released` */

	/* Set by SDT_IOC_RELEASE, for the breaking thread. */
	s64 result;
	enum sdt_state_change then;

	/* SDT_CAPTURE_TRIGGER: the breaking thread's record, where it lies. */
	struct sdt_trap_record record;
	u64 record_addr;
};

struct sdt_hold {
	struct callback_head work;	/* queued on the thread (task_work_add) */
	struct list_head node;		/* in capture->holds */
	struct hlist_node hnode;	/* in capture->by_pid */
	struct sdt_capture *cap;
	struct pid *pid;		/* the thread */
	bool trigger;			/* the breaking thread (no task_work) */
	bool held;			/* stopped, registers in regs */
	bool gone;			/* exited, or never queued */
	struct sdt_thread *regs;	/* + sdt_xstate_size bytes; tid filled by GET */
};

/* sdt_main.c */
extern struct list_head sdt_sessions;
struct sdt_session *sdt_session_find(struct pid *tgid);
void sdt_session_put(struct sdt_session *s);
bool sdt_program_allowed(struct sdt_session *s, struct task_struct *leader);

/* sdt_capture.c */
extern unsigned int sdt_xstate_size;
extern unsigned int sdt_thread_size;

struct sdt_stats {
	atomic_t sessions;		/* registrations */
	atomic_t capturing;		/* captures under way */
	atomic_t held;			/* threads waiting in a hold or a trigger */
	atomic_t pending;		/* task_works queued, not yet run */
	atomic64_t captures;		/* captures begun */
	atomic64_t triggers;		/* SDT_IOC_TRIGGER calls */
	atomic64_t ipis;		/* IPI callbacks run */
	atomic64_t born;		/* threads held from their creation (fork tracepoint) */
	atomic64_t gone;		/* threads that exited instead of being held */
};
extern struct sdt_stats sdt_stats;

int sdt_capture_init(void);
void sdt_capture_exit(void);
long sdt_trigger(struct sdt_trap_record __user *urec);
long sdt_freeze(struct sdt_session *s);
long sdt_get(struct sdt_session *s, struct sdt_snapshot __user *usnap);
long sdt_release(struct sdt_session *s, const struct sdt_release *rel);
bool sdt_ready(struct sdt_session *s);
void sdt_session_end_capture(struct sdt_session *s);

#endif /* SDT_INTERNAL_H */
