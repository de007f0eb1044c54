// SPDX-License-Identifier: GPL-2.0
/*
 * Holding every thread of a program while SDT captures it.
 *
 * A capture starts on the breaking thread (SDT_IOC_TRIGGER) or on the daemon
 * (SDT_IOC_FREEZE). For every other thread of the program it queues a task_work
 * (sdt_hold_work) with TWA_SIGNAL_NO_IPI, which sets TIF_NOTIFY_SIGNAL and wakes the
 * thread if it sleeps interruptibly, then sends an IPI (smp_call_function_many) to each
 * CPU that runs one of them. However a thread next heads for user mode, the kernel runs
 * the task_work first: the thread saves its own registers and sleeps (TASK_KILLABLE,
 * so SIGKILL still ends it; TASK_NOLOAD, so it adds nothing to the load average) until
 * the capture is released.
 *
 *   the thread at the trigger        how it comes to be held
 *   running in user mode             the IPI: on its return to user mode
 *   running in the kernel            on its way out; an interruptible wait fails at once
 *   runnable, not on a CPU           when it is scheduled, on its way out
 *   sleeping interruptibly           woken; the call returns -ERESTART* and restarts
 *                                    when the thread goes on (as under ptrace)
 *   sleeping uninterruptibly         when the sleep ends
 *   being created (clone)            sched_process_fork: held before its first
 *                                    instruction
 *   exiting                          the task_work runs in do_exit, after the thread's
 *                                    last write to user memory: counted as gone
 *
 * The capture is ready when no hold is pending; the daemon is woken, and SDT_IOC_GET
 * hands it every held thread's registers and the signal dispositions.
 */
#include <linux/elf.h>
#include <linux/futex.h>
#include <linux/hash.h>
#include <linux/hashtable.h>
#include <linux/ktime.h>
#include <linux/module.h>
#include <linux/pid_namespace.h>
#include <linux/regset.h>
#include <linux/sched/signal.h>
#include <linux/sched/task.h>
#include <linux/slab.h>
#include <linux/smp.h>
#include <linux/string.h>
#include <linux/task_work.h>
#include <linux/tracepoint.h>
#include <linux/uaccess.h>
#include <linux/version.h>

#include "sdt_filter.h"
#include "sdt_internal.h"

unsigned int sdt_xstate_size;
unsigned int sdt_thread_size;
struct sdt_stats sdt_stats;

static struct tracepoint *sdt_fork_tp;

static struct sdt_capture *capture_new(struct sdt_session *s, int kind)
{
	struct sdt_capture *cap = kzalloc(sizeof(*cap), GFP_KERNEL);

	if (!cap)
		return NULL;
	kref_init(&cap->kref);
	kref_get(&s->kref);
	cap->session = s;
	cap->kind = kind;
	cap->start_ns = ktime_get_ns();
	spin_lock_init(&cap->lock);
	INIT_LIST_HEAD(&cap->holds);
	hash_init(cap->by_pid);
	init_waitqueue_head(&cap->wq);
	cap->pending = 1; /* arming: not ready before every hold is queued */
	cap->result = SDT_RESULT_DECLINED;
	return cap;
}

static void capture_free(struct kref *kref)
{
	struct sdt_capture *cap = container_of(kref, struct sdt_capture, kref);
	struct sdt_hold *h, *next;

	list_for_each_entry_safe(h, next, &cap->holds, node) {
		put_pid(h->pid);
		kfree(h->regs);
		kfree(h);
	}
	sdt_session_put(cap->session);
	kfree(cap);
}

static void capture_put(struct sdt_capture *cap)
{
	kref_put(&cap->kref, capture_free);
}

static struct hlist_head *by_pid(struct sdt_capture *cap, struct pid *pid)
{
	return &cap->by_pid[hash_ptr(pid, SDT_HOLD_HASH_BITS)];
}

/* Whether `pid` has a hold in the capture. Called with cap->lock held. */
static bool hold_member(struct sdt_capture *cap, struct pid *pid)
{
	struct sdt_hold *h;

	hlist_for_each_entry(h, by_pid(cap, pid), hnode)
		if (h->pid == pid)
			return true;
	return false;
}

/* Adds a hold to the capture. Called with cap->lock held. */
static void hold_add(struct sdt_capture *cap, struct sdt_hold *h)
{
	if (h->trigger)
		list_add(&h->node, &cap->holds);
	else
		list_add_tail(&h->node, &cap->holds);
	hlist_add_head(&h->hnode, by_pid(cap, h->pid));
}

/*
 * One pending hold arrived (held, gone, or given up). Called with cap->lock held; the
 * last one makes the capture ready.
 */
static void hold_resolved(struct sdt_capture *cap)
{
	if (--cap->pending || cap->released)
		return;
	cap->ready = true;
	cap->held_ns = ktime_get_ns();
	wake_up_all(&cap->session->daemon_wq);
}

/*
 * The calling thread's registers, signal mask, rseq and robust-list registrations and
 * alternate signal stack.
 */
static struct sdt_thread *read_thread(void)
{
	const struct user_regset_view *view = task_user_regset_view(current);
	struct sdt_thread *t = kzalloc(sizeof(*t) + sdt_xstate_size, GFP_KERNEL);
	unsigned int i;
	int n;

	if (!t)
		return NULL;
	for (i = 0; view->e_machine == EM_X86_64 && i < view->n; i++) {
		const struct user_regset *rs = &view->regsets[i];

		switch (rs->core_note_type) {
		case NT_PRSTATUS:
			n = regset_get(current, rs, sizeof(t->gpregs), t->gpregs);
			t->gpregs_size = max(n, 0);
			break;
		case NT_PRFPREG:
			n = regset_get(current, rs, sizeof(t->fpregs), t->fpregs);
			t->fpregs_size = max(n, 0);
			break;
		case NT_X86_XSTATE:
			if (!sdt_xstate_size)
				break;
			n = regset_get(current, rs, sdt_xstate_size, t + 1);
			t->xstate_size = max(n, 0);
			break;
		}
	}
	/* A thread in ppoll() or sigsuspend() runs with a temporary mask. */
	if (test_tsk_restore_sigmask(current))
		t->sigmask = current->saved_sigmask.sig[0];
	else
		t->sigmask = current->blocked.sig[0];
#ifdef CONFIG_RSEQ
	if (current->rseq) {
		t->rseq = (unsigned long)current->rseq;
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 3, 0)
		t->rseq_len = current->rseq_len;
#else
		t->rseq_len = sizeof(*current->rseq);
#endif
		t->rseq_sig = current->rseq_sig;
	}
#endif
	if (current->robust_list) {
		t->robust_list = (unsigned long)current->robust_list;
		t->robust_list_len = sizeof(*current->robust_list);
	}
	if (current->sas_ss_size) {
		t->altstack = current->sas_ss_sp;
		t->altstack_size = current->sas_ss_size;
		t->altstack_flags = current->sas_ss_flags & SS_AUTODISARM;
	}
	return t;
}

/* Sleeps until the capture is released, or a fatal signal ends the thread. */
static bool wait_released(struct sdt_capture *cap)
{
	struct wait_queue_entry wait;
	long fatal = 0;

	init_wait_entry(&wait, 0);
	for (;;) {
		fatal = prepare_to_wait_event(&cap->wq, &wait, TASK_KILLABLE | TASK_NOLOAD);
		if (READ_ONCE(cap->released) || fatal)
			break;
		schedule();
	}
	finish_wait(&cap->wq, &wait);
	return !fatal;
}

/*
 * The task_work queued on each thread: runs on the thread itself, on its way back to
 * user mode (or in do_exit).
 */
static void sdt_hold_work(struct callback_head *work)
{
	struct sdt_hold *h = container_of(work, struct sdt_hold, work);
	struct sdt_capture *cap = h->cap;
	bool exiting = current->flags & PF_EXITING;
	bool hold = !exiting && !READ_ONCE(cap->released);
	struct sdt_thread *regs = hold ? read_thread() : NULL;

	atomic_dec(&sdt_stats.pending);
	spin_lock(&cap->lock);
	if (hold && !cap->released) {
		h->regs = regs;
		h->held = true;
		cap->nr_held++;
		if (!regs)
			cap->failed = true;
	} else {
		kfree(regs);
		hold = false;
		h->gone = true;
	}
	hold_resolved(cap);
	spin_unlock(&cap->lock);
	if (exiting)
		atomic64_inc(&sdt_stats.gone);

	if (hold) {
		atomic_inc(&sdt_stats.held);
		wait_released(cap);
		atomic_dec(&sdt_stats.held);
	}
	capture_put(cap);
	/* Last: a queued or waiting hold keeps the module loaded. */
	module_put(THIS_MODULE);
}

/*
 * Queues a hold on `t` unless it has one (or the capture is over). Returns 1 if it
 * queued one, 0 if not, -ENOMEM (the capture marked failed) if `t` could not be held.
 */
static int hold_queue(struct sdt_capture *cap, struct task_struct *t, gfp_t gfp)
{
	struct sdt_hold *h = kzalloc(sizeof(*h), gfp);
	struct pid *pid;

	if (!h) {
		spin_lock(&cap->lock);
		cap->failed = true;
		spin_unlock(&cap->lock);
		return -ENOMEM;
	}
	pid = get_task_pid(t, PIDTYPE_PID);
	h->pid = pid;
	h->cap = cap;
	init_task_work(&h->work, sdt_hold_work);

	spin_lock(&cap->lock);
	if (!pid || cap->released || hold_member(cap, pid)) {
		spin_unlock(&cap->lock);
		put_pid(pid);
		kfree(h);
		return 0;
	}
	hold_add(cap, h);
	cap->pending++;
	kref_get(&cap->kref);
	spin_unlock(&cap->lock);
	__module_get(THIS_MODULE);
	atomic_inc(&sdt_stats.pending);

	if (task_work_add(t, &h->work, TWA_SIGNAL_NO_IPI)) {
		/* Past its last task_work in do_exit: it runs no user code again. */
		atomic_dec(&sdt_stats.pending);
		atomic64_inc(&sdt_stats.gone);
		spin_lock(&cap->lock);
		h->gone = true;
		hold_resolved(cap);
		spin_unlock(&cap->lock);
		capture_put(cap);
		module_put(THIS_MODULE);
		return 0;
	}
	return 1;
}

/* The IPI: its only job is the interrupt; leaving it, the CPU runs the hold. */
static void sdt_kick(void *info)
{
	atomic64_inc(&sdt_stats.ipis);
}

/*
 * Queues a hold on every thread of `leader`'s process except the caller, then sends an
 * IPI to every CPU running one of them.
 */
static int pause_threads(struct sdt_capture *cap, struct task_struct *leader)
{
	struct sdt_session *s = cap->session;
	unsigned int room = get_nr_threads(leader) + 8, n, i;
	struct task_struct **tasks, *t;
	bool overflow;

again:
	tasks = kmalloc_array(room, sizeof(*tasks), GFP_KERNEL);
	if (!tasks)
		return -ENOMEM;
	n = 0;
	overflow = false;
	rcu_read_lock();
	for_each_thread(leader, t) {
		if (t == current || (t->flags & (PF_KTHREAD | PF_IO_WORKER)))
			continue;
		if (n == room) {
			overflow = true;
			break;
		}
		get_task_struct(t);
		tasks[n++] = t;
	}
	rcu_read_unlock();
	if (overflow) {
		while (n)
			put_task_struct(tasks[--n]);
		kfree(tasks);
		room *= 2;
		goto again;
	}

	for (i = 0; i < n; i++)
		hold_queue(cap, tasks[i], GFP_KERNEL);

	/*
	 * TIF_NOTIFY_SIGNAL is set (a full barrier) before on_cpu is read: a thread not seen
	 * on a CPU here checks the flag when it next leaves the kernel.
	 */
	cpumask_clear(s->ipi_cpus);
	for (i = 0; i < n; i++)
		if (READ_ONCE(tasks[i]->on_cpu))
			cpumask_set_cpu(task_cpu(tasks[i]), s->ipi_cpus);
	preempt_disable();
	smp_call_function_many(s->ipi_cpus, sdt_kick, NULL, true);
	preempt_enable();

	for (i = 0; i < n; i++)
		put_task_struct(tasks[i]);
	kfree(tasks);
	return 0;
}

/* Ends the arming count taken by capture_new: the capture may now become ready. */
static void capture_armed(struct sdt_capture *cap, int error)
{
	spin_lock(&cap->lock);
	if (error)
		cap->failed = true;
	hold_resolved(cap);
	spin_unlock(&cap->lock);
}

/* Lets every thread of the capture go, with `result` for the breaking thread. */
static void capture_release(struct sdt_capture *cap, s64 result, enum sdt_state_change then)
{
	spin_lock(&cap->lock);
	cap->result = result;
	cap->then = then;
	WRITE_ONCE(cap->released, true);
	spin_unlock(&cap->lock);
	wake_up_all(&cap->wq);
	atomic_dec(&sdt_stats.capturing);
	capture_put(cap); /* the session's */
}

/* Makes `cap` the session's capture; false if one is under way or the file closed. */
static bool capture_start(struct sdt_session *s, struct sdt_capture *cap)
{
	spin_lock(&s->lock);
	if (s->cur || s->closed) {
		spin_unlock(&s->lock);
		return false;
	}
	cap->seq = ++s->seq;
	s->cur = cap;
	spin_unlock(&s->lock);
	atomic_inc(&sdt_stats.capturing);
	atomic64_inc(&sdt_stats.captures);
	return true;
}

/*
 * Writes the breaking thread's result, and changes libsdt's state word as `then` says:
 * switched off, or, when no more snapshots will be taken, negated (see SDT_STATE_ON), so
 * that its breakpoints that pass are declined in the program. Declining leaves a word
 * that is not on (off, or negated already) as it is.
 */
static long answer(struct sdt_trap_record __user *urec, const struct sdt_trap_record *rec,
		   s64 result, enum sdt_state_change then)
{
	int __user *state_ptr = u64_to_user_ptr(rec->state_ptr);
	int state;

	if (put_user(result, &urec->result))
		return -EFAULT;
	switch (then) {
	case SDT_STATE_KEEP:
		return 0;
	case SDT_STATE_SWITCH_OFF:
		return put_user(SDT_STATE_OFF, state_ptr) ? -EFAULT : 0;
	case SDT_STATE_DECLINE:
		if (get_user(state, state_ptr))
			return -EFAULT;
		if (state >= SDT_STATE_ON && put_user(-state, state_ptr))
			return -EFAULT;
		return 0;
	}
	return 0;
}

/*
 * Another capture holds the program: the caller must be held by it before it tries
 * again. Returns -ERESTARTNOINTR once a hold is queued on the caller (it is held on
 * its way out, and the call restarts after the release), or 0 if `busy` was released
 * meanwhile.
 */
static long wait_turn(struct sdt_capture *busy)
{
	hold_queue(busy, current, GFP_KERNEL);
	if (test_thread_flag(TIF_NOTIFY_SIGNAL))
		return -ERESTARTNOINTR;
	return 0;
}

/* The breaking thread's own hold: registers read here, in the system call. */
static int hold_trigger(struct sdt_capture *cap)
{
	struct sdt_hold *h = kzalloc(sizeof(*h), GFP_KERNEL);

	if (!h)
		return -ENOMEM;
	h->pid = get_task_pid(current, PIDTYPE_PID);
	h->cap = cap;
	h->trigger = true;
	h->held = true;
	h->regs = read_thread();
	spin_lock(&cap->lock);
	hold_add(cap, h);
	cap->nr_held++;
	if (!h->regs)
		cap->failed = true;
	spin_unlock(&cap->lock);
	return 0;
}

long sdt_trigger(struct sdt_trap_record __user *urec)
{
	struct sdt_trap_record rec;
	struct sdt_session *s;
	struct sdt_capture *cap, *busy;
	struct sdt_site site;
	u8 *attrs = NULL;
	long ret;

	atomic64_inc(&sdt_stats.triggers);
	if (copy_from_user(&rec, urec, sizeof(rec)))
		return -EFAULT;
	if (rec.version != SDT_TRAP_VERSION || rec.size != sizeof(rec) ||
	    rec.attrs_len > SDT_ATTRS_MAX)
		return -EINVAL;
	s = sdt_session_find(task_tgid(current));
	if (!s)
		return answer(urec, &rec, SDT_RESULT_OFF, SDT_STATE_SWITCH_OFF);
	if (rec.attrs_len) {
		attrs = memdup_user(u64_to_user_ptr(rec.attrs_ptr), rec.attrs_len);
		if (IS_ERR(attrs)) {
			ret = PTR_ERR(attrs);
			attrs = NULL;
			goto out;
		}
	}
	site = (struct sdt_site){
		.level = rec.level,
		.class_ = rec.class_,
		.id = rec.id,
		.hit = rec.hit,
		.attrs = attrs,
		.attrs_len = rec.attrs_len,
	};
	if (!sdt_filter_match(s->filter, &site)) {
		ret = answer(urec, &rec, SDT_RESULT_FILTERED, SDT_STATE_KEEP);
		goto out;
	}

again:
	cap = capture_new(s, SDT_CAPTURE_TRIGGER);
	if (!cap) {
		ret = -ENOMEM;
		goto out;
	}
	cap->record = rec;
	cap->record_addr = (unsigned long)urec;
	if (!capture_start(s, cap)) {
		capture_put(cap);
		spin_lock(&s->lock);
		busy = s->cur;
		if (busy)
			kref_get(&busy->kref);
		spin_unlock(&s->lock);
		if (!busy) {
			/* The daemon closed the device: breakpoints are off. */
			ret = answer(urec, &rec, SDT_RESULT_OFF, SDT_STATE_SWITCH_OFF);
			goto out;
		}
		ret = wait_turn(busy);
		capture_put(busy);
		if (!ret)
			goto again;
		goto out;
	}

	kref_get(&cap->kref); /* ours; the session has the first */
	cap->exec_id = current->group_leader->self_exec_id;
	/* The others first: this thread's registers are read while they stop. */
	ret = pause_threads(cap, current);
	capture_armed(cap, ret ?: hold_trigger(cap));

	atomic_inc(&sdt_stats.held);
	if (wait_released(cap)) {
		s64 result;
		enum sdt_state_change then;

		spin_lock(&cap->lock);
		result = cap->result;
		then = cap->then;
		spin_unlock(&cap->lock);
		ret = answer(urec, &rec, result, then);
	} else {
		ret = -EINTR; /* killed: the result does not matter */
	}
	atomic_dec(&sdt_stats.held);
	capture_put(cap);
out:
	kfree(attrs);
	sdt_session_put(s);
	return ret;
}

long sdt_freeze(struct sdt_session *s)
{
	struct task_struct *leader = get_pid_task(s->tgid, PIDTYPE_TGID);
	struct sdt_capture *cap;

	if (!leader)
		return -ESRCH;
	cap = capture_new(s, SDT_CAPTURE_FREEZE);
	if (!cap) {
		put_task_struct(leader);
		return -ENOMEM;
	}
	if (!capture_start(s, cap)) {
		capture_put(cap);
		put_task_struct(leader);
		return -EBUSY;
	}
	cap->exec_id = leader->self_exec_id;
	capture_armed(cap, pause_threads(cap, leader));
	put_task_struct(leader);
	return 0;
}

bool sdt_ready(struct sdt_session *s)
{
	bool ready;

	spin_lock(&s->lock);
	ready = s->closed || (s->cur && READ_ONCE(s->cur->ready));
	spin_unlock(&s->lock);
	return ready;
}

/*
 * The program's signal dispositions, which no one can change while its threads are held.
 * Its sighand may be going away if it is dying: the lock is taken as
 * lock_task_sighand() does.
 */
static u32 read_actions(struct task_struct *leader, struct sdt_sigaction *actions)
{
	struct sighand_struct *sighand;
	unsigned long flags;
	u32 n = 0;
	int i;

	rcu_read_lock();
	sighand = rcu_dereference(leader->sighand);
	if (sighand) {
		spin_lock_irqsave(&sighand->siglock, flags);
		if (sighand == rcu_access_pointer(leader->sighand)) {
			for (i = 0; i < SDT_NSIG && i < _NSIG; i++) {
				const struct sigaction *sa = &sighand->action[i].sa;

				actions[i].handler = (unsigned long)sa->sa_handler;
				actions[i].flags = sa->sa_flags;
#ifdef __ARCH_HAS_SA_RESTORER
				actions[i].restorer = (unsigned long)sa->sa_restorer;
#endif
				actions[i].mask = sa->sa_mask.sig[0];
			}
			n = SDT_NSIG;
		}
		spin_unlock_irqrestore(&sighand->siglock, flags);
	}
	rcu_read_unlock();
	return n;
}

/* The held threads of a ready capture, the breaking thread first (kmalloc'd array). */
static struct sdt_hold **held_threads(struct sdt_capture *cap, unsigned int *nr)
{
	struct sdt_hold **held, *h;
	unsigned int room = READ_ONCE(cap->nr_held), n = 0;

	held = kmalloc_array(max(room, 1U), sizeof(*held), GFP_KERNEL);
	if (!held)
		return NULL;
	spin_lock(&cap->lock);
	list_for_each_entry(h, &cap->holds, node)
		if (h->held && h->regs && n < room)
			held[n++] = h;
	spin_unlock(&cap->lock);
	*nr = n;
	return held;
}

static long copy_threads(struct sdt_snapshot *snap, struct sdt_hold **held, unsigned int nr)
{
	struct pid_namespace *ns = task_active_pid_ns(current);
	void __user *dst = u64_to_user_ptr(snap->threads);
	struct sdt_thread *rec;
	unsigned int i;
	long ret = 0;

	rec = kmalloc(sdt_thread_size, GFP_KERNEL);
	if (!rec)
		return -ENOMEM;
	for (i = 0; i < nr && !ret; i++) {
		memset(rec, 0, sdt_thread_size);
		memcpy(rec, held[i]->regs, sizeof(*rec) + held[i]->regs->xstate_size);
		rec->tid = pid_nr_ns(held[i]->pid, ns);
		rec->flags = held[i]->trigger ? SDT_THREAD_TRIGGER : 0;
		if (copy_to_user(dst + (size_t)i * sdt_thread_size, rec, sdt_thread_size))
			ret = -EFAULT;
	}
	kfree(rec);
	return ret;
}

long sdt_get(struct sdt_session *s, struct sdt_snapshot __user *usnap)
{
	struct sdt_snapshot *snap;
	struct sdt_capture *cap = NULL;
	struct task_struct *leader = NULL;
	struct sdt_hold **held = NULL;
	unsigned int nr = 0;
	long ret;

	snap = kzalloc(sizeof(*snap), GFP_KERNEL);
	if (!snap)
		return -ENOMEM;
	ret = -EFAULT;
	if (copy_from_user(snap, usnap, offsetof(struct sdt_snapshot, seq)))
		goto out;
	ret = -EINVAL;
	if (snap->flags & ~SDT_GET_WAIT)
		goto out;
	if (snap->flags & SDT_GET_WAIT) {
		ret = wait_event_interruptible(s->daemon_wq, sdt_ready(s));
		if (ret)
			goto out;
	}
	spin_lock(&s->lock);
	cap = s->cur;
	if (cap && cap->ready)
		kref_get(&cap->kref);
	else
		cap = NULL;
	spin_unlock(&s->lock);
	ret = -EAGAIN;
	if (!cap)
		goto out;

	ret = -ESRCH;
	leader = get_pid_task(s->tgid, PIDTYPE_TGID);
	if (!leader || (leader->signal->flags & SIGNAL_GROUP_EXIT))
		goto out;
	ret = -EPERM;
	if (!sdt_program_allowed(s, leader))
		goto out;
	ret = -ESTALE;
	if (leader->self_exec_id != cap->exec_id)
		goto out; /* an execve() ended the threads held before it */
	ret = -ENOMEM;
	if (cap->failed)
		goto out;
	held = held_threads(cap, &nr);
	if (!held)
		goto out;

	snap->seq = cap->seq;
	snap->kind = cap->kind;
	snap->nr_threads = nr;
	snap->thread_size = sdt_thread_size;
	snap->start_ns = cap->start_ns;
	snap->held_ns = cap->held_ns;
	snap->exec_id = leader->self_exec_id;
	if (cap->kind == SDT_CAPTURE_TRIGGER) {
		snap->record = cap->record;
		snap->record_addr = cap->record_addr;
		if (nr && held[0]->trigger)
			snap->trigger_tid = pid_nr_ns(held[0]->pid, task_active_pid_ns(current));
	}
	snap->nr_actions = read_actions(leader, snap->actions);
	if ((u64)snap->threads_len < (u64)nr * sdt_thread_size)
		ret = -ENOSPC;
	else
		ret = copy_threads(snap, held, nr);
	if (ret != -EFAULT && copy_to_user(&usnap->seq, &snap->seq,
					   sizeof(*snap) - offsetof(struct sdt_snapshot, seq)))
		ret = -EFAULT;
out:
	kfree(held);
	if (leader)
		put_task_struct(leader);
	if (cap)
		capture_put(cap);
	kfree(snap);
	return ret;
}

long sdt_release(struct sdt_session *s, const struct sdt_release *rel)
{
	struct sdt_capture *cap;

	if (rel->flags & ~SDT_RELEASE_TURN_OFF || rel->reserved)
		return -EINVAL;
	spin_lock(&s->lock);
	cap = s->cur;
	s->cur = NULL;
	spin_unlock(&s->lock);
	if (!cap)
		return -EINVAL;
	capture_release(cap, rel->result,
			rel->flags & SDT_RELEASE_TURN_OFF ? SDT_STATE_DECLINE : SDT_STATE_KEEP);
	return 0;
}

/* The registering file closed: let everything go, breakpoints off. */
void sdt_session_end_capture(struct sdt_session *s)
{
	struct sdt_capture *cap;

	spin_lock(&s->lock);
	s->closed = true;
	cap = s->cur;
	s->cur = NULL;
	spin_unlock(&s->lock);
	if (cap)
		capture_release(cap, SDT_RESULT_DECLINED, SDT_STATE_SWITCH_OFF);
	wake_up_all(&s->daemon_wq);
}

/*
 * sched_process_fork, in the parent after the child is linked in and before it first
 * runs: a thread created during a capture is held before its first instruction.
 */
static void sdt_fork_probe(void *data, struct task_struct *parent, struct task_struct *child)
{
	struct sdt_session *s;
	struct sdt_capture *cap = NULL;

	if (child->tgid != parent->tgid || list_empty(&sdt_sessions))
		return;
	rcu_read_lock();
	list_for_each_entry_rcu(s, &sdt_sessions, node) {
		if (s->tgid != task_tgid(parent))
			continue;
		spin_lock(&s->lock);
		cap = s->cur;
		if (cap)
			kref_get(&cap->kref);
		spin_unlock(&s->lock);
		break;
	}
	rcu_read_unlock();
	if (cap) {
		if (hold_queue(cap, child, GFP_ATOMIC) > 0)
			atomic64_inc(&sdt_stats.born);
		capture_put(cap);
	}
}

static void find_fork_tracepoint(struct tracepoint *tp, void *priv)
{
	if (!strcmp(tp->name, "sched_process_fork"))
		sdt_fork_tp = tp;
}

int sdt_capture_init(void)
{
	const struct user_regset_view *view = task_user_regset_view(current);
	unsigned int i;
	int ret;

	for (i = 0; i < view->n; i++)
		if (view->regsets[i].core_note_type == NT_X86_XSTATE)
			sdt_xstate_size = view->regsets[i].n * view->regsets[i].size;
	sdt_thread_size = sizeof(struct sdt_thread) + ALIGN(sdt_xstate_size, 8);

	for_each_kernel_tracepoint(find_fork_tracepoint, NULL);
	if (!sdt_fork_tp) {
		pr_err("sdt: no sched_process_fork tracepoint: threads created during a capture could not be held\n");
		return -ENOENT;
	}
	ret = tracepoint_probe_register(sdt_fork_tp, sdt_fork_probe, NULL);
	if (ret)
		pr_err("sdt: cannot attach to sched_process_fork: %d\n", ret);
	return ret;
}

void sdt_capture_exit(void)
{
	tracepoint_probe_unregister(sdt_fork_tp, sdt_fork_probe, NULL);
	tracepoint_synchronize_unregister();
}
