// SPDX-License-Identifier: GPL-2.0
/*
 * sdt.ko: /dev/sdt, the kernel side of SDT's freeze (include/uapi/linux/sdt_kmod.h).
 *
 * This file is the device: opening and closing it, the ioctls, registrations (which
 * program a daemon captures, with which filter) and /sys/class/misc/sdt/status.
 * sdt_capture.c holds the threads; sdt_filter.c checks breakpoints.
 */
#include <linux/fs.h>
#include <linux/miscdevice.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/poll.h>
#include <linux/ptrace.h>
#include <linux/sched/coredump.h>
#include <linux/sched/signal.h>
#include <linux/sched/task.h>
#include <linux/slab.h>
#include <linux/uaccess.h>

#include "sdt_filter.h"
#include "sdt_internal.h"

LIST_HEAD(sdt_sessions);
static DEFINE_MUTEX(sdt_sessions_mutex);

/* An open /dev/sdt. */
struct sdt_file {
	struct mutex lock;
	struct sdt_session *session;	/* set once, by SDT_IOC_REGISTER */
};

struct sdt_session *sdt_session_find(struct pid *tgid)
{
	struct sdt_session *s, *found = NULL;

	rcu_read_lock();
	list_for_each_entry_rcu(s, &sdt_sessions, node) {
		if (s->tgid == tgid && kref_get_unless_zero(&s->kref)) {
			found = s;
			break;
		}
	}
	rcu_read_unlock();
	return found;
}

/* After an RCU grace period (lookups may still hold the pointer), from softirq. */
static void session_free_rcu(struct rcu_head *rcu)
{
	struct sdt_session *s = container_of(rcu, struct sdt_session, rcu);

	put_pid(s->tgid);
	put_pid(s->daemon);
	kvfree(s->filter);
	free_cpumask_var(s->ipi_cpus);
	kfree(s);
}

static void session_free(struct kref *kref)
{
	struct sdt_session *s = container_of(kref, struct sdt_session, kref);

	call_rcu(&s->rcu, session_free_rcu);
}

void sdt_session_put(struct sdt_session *s)
{
	kref_put(&s->kref, session_free);
}

/*
 * Whether the daemon may still read the program: the credentials it registered with,
 * and a dumpable memory (a set-user-ID execve makes it undumpable).
 */
bool sdt_program_allowed(struct sdt_session *s, struct task_struct *leader)
{
	const struct cred *c;
	struct task_struct *t;
	bool same, dumpable = false;

	rcu_read_lock();
	c = __task_cred(leader);
	same = uid_eq(c->uid, s->uid) && uid_eq(c->euid, s->euid) && uid_eq(c->suid, s->suid) &&
	       gid_eq(c->gid, s->gid) && gid_eq(c->egid, s->egid) && gid_eq(c->sgid, s->sgid);
	/* The leader may have exited first: any live thread shares the memory. */
	for_each_thread(leader, t) {
		task_lock(t);
		if (t->mm) {
			dumpable = get_dumpable(t->mm) == SUID_DUMP_USER;
			task_unlock(t);
			break;
		}
		task_unlock(t);
	}
	rcu_read_unlock();
	return same && dumpable;
}

/* Whether the calling thread's process is the program's ptrace tracer. */
static bool traced_by_caller(struct task_struct *program)
{
	struct task_struct *tracer;
	bool yes;

	rcu_read_lock();
	tracer = ptrace_parent(program);
	yes = tracer && same_thread_group(tracer, current);
	rcu_read_unlock();
	return yes;
}

static long sdt_register(struct sdt_file *f, struct sdt_register __user *ureg)
{
	struct sdt_register reg;
	struct task_struct *program = NULL;
	struct sdt_session *s = NULL, *other;
	const struct cred *c;
	void *filter;
	long ret;

	if (copy_from_user(&reg, ureg, sizeof(reg)))
		return -EFAULT;
	if (reg.version != SDT_KMOD_VERSION)
		return -EPROTO;
	if (reg.size != sizeof(reg) || reg.filter_len < sizeof(struct sdt_filter) ||
	    reg.filter_len > sizeof(struct sdt_filter) +
				     SDT_FILTER_MAX_RULES * sizeof(struct sdt_rule) +
				     SDT_FILTER_MAX_STRINGS)
		return -EINVAL;
	filter = vmemdup_user(u64_to_user_ptr(reg.filter), reg.filter_len);
	if (IS_ERR(filter))
		return PTR_ERR(filter);
	ret = -EINVAL;
	if (sdt_filter_check(filter, reg.filter_len))
		goto fail;

	ret = -ESRCH;
	rcu_read_lock();
	program = pid_task(find_vpid(reg.pid), PIDTYPE_TGID);
	if (program)
		get_task_struct(program);
	rcu_read_unlock();
	if (!program || (program->flags & PF_EXITING))
		goto fail;
	/* Attaching ran ptrace_may_access(PTRACE_MODE_ATTACH_REALCREDS) for us. */
	ret = -EPERM;
	if (!traced_by_caller(program))
		goto fail;

	ret = -ENOMEM;
	s = kzalloc(sizeof(*s), GFP_KERNEL);
	if (!s || !zalloc_cpumask_var(&s->ipi_cpus, GFP_KERNEL))
		goto fail;
	kref_init(&s->kref);
	s->tgid = get_pid(task_tgid(program));
	s->daemon = get_pid(task_tgid(current));
	s->filter = filter;
	s->filter_len = reg.filter_len;
	c = get_task_cred(program);
	s->uid = c->uid;
	s->euid = c->euid;
	s->suid = c->suid;
	s->gid = c->gid;
	s->egid = c->egid;
	s->sgid = c->sgid;
	put_cred(c);
	spin_lock_init(&s->lock);
	init_waitqueue_head(&s->daemon_wq);
	put_task_struct(program);
	program = NULL;

	mutex_lock(&sdt_sessions_mutex);
	ret = -EBUSY;
	if (f->session)
		goto unlock;
	list_for_each_entry(other, &sdt_sessions, node)
		if (other->tgid == s->tgid)
			goto unlock;
	list_add_rcu(&s->node, &sdt_sessions);
	f->session = s;
	atomic_inc(&sdt_stats.sessions);
	mutex_unlock(&sdt_sessions_mutex);
	return 0;

unlock:
	mutex_unlock(&sdt_sessions_mutex);
	sdt_session_put(s); /* frees the filter too */
	return ret;
fail:
	if (program)
		put_task_struct(program);
	if (s) {
		free_cpumask_var(s->ipi_cpus);
		kfree(s);
	}
	kvfree(filter);
	return ret;
}

static long sdt_query(struct sdt_query __user *uq)
{
	struct sdt_query q = { .version = SDT_KMOD_VERSION };
	struct sdt_session *s = sdt_session_find(task_tgid(current));

	if (s) {
		q.registered = 1;
		q.daemon_pid = pid_vnr(s->daemon);
		sdt_session_put(s);
	}
	return copy_to_user(uq, &q, sizeof(q)) ? -EFAULT : 0;
}

static long sdt_version(struct sdt_version __user *uv)
{
	struct sdt_version v = {
		.version = SDT_KMOD_VERSION,
		.thread_size = sdt_thread_size,
		.xstate_size = sdt_xstate_size,
	};

	return copy_to_user(uv, &v, sizeof(v)) ? -EFAULT : 0;
}

/* The file's registration, for the daemon's operations. */
static struct sdt_session *registered(struct sdt_file *f)
{
	struct sdt_session *s;

	mutex_lock(&f->lock);
	s = f->session;
	mutex_unlock(&f->lock);
	return s;
}

static long sdt_ioctl(struct file *file, unsigned int cmd, unsigned long arg)
{
	struct sdt_file *f = file->private_data;
	void __user *uarg = (void __user *)arg;
	struct sdt_session *s;
	struct sdt_release rel;
	long ret;

	switch (cmd) {
	case SDT_IOC_VERSION:
		return sdt_version(uarg);
	case SDT_IOC_QUERY:
		return sdt_query(uarg);
	case SDT_IOC_TRIGGER:
		return sdt_trigger(uarg);
	case SDT_IOC_REGISTER:
		mutex_lock(&f->lock);
		ret = sdt_register(f, uarg);
		mutex_unlock(&f->lock);
		return ret;
	}

	s = registered(f);
	if (!s)
		return cmd == SDT_IOC_FREEZE || cmd == SDT_IOC_GET || cmd == SDT_IOC_RELEASE ?
			       -EINVAL : -ENOTTY;
	switch (cmd) {
	case SDT_IOC_FREEZE:
		return sdt_freeze(s);
	case SDT_IOC_GET:
		return sdt_get(s, uarg);
	case SDT_IOC_RELEASE:
		if (copy_from_user(&rel, uarg, sizeof(rel)))
			return -EFAULT;
		return sdt_release(s, &rel);
	}
	return -ENOTTY;
}

static __poll_t sdt_poll(struct file *file, struct poll_table_struct *wait)
{
	struct sdt_session *s = registered(file->private_data);

	if (!s)
		return 0;
	poll_wait(file, &s->daemon_wq, wait);
	return sdt_ready(s) ? EPOLLIN | EPOLLRDNORM : 0;
}

static int sdt_open(struct inode *inode, struct file *file)
{
	struct sdt_file *f = kzalloc(sizeof(*f), GFP_KERNEL);

	if (!f)
		return -ENOMEM;
	mutex_init(&f->lock);
	file->private_data = f;
	return nonseekable_open(inode, file);
}

/* The last reference to an open /dev/sdt is gone (close, or the holder died). */
static int sdt_release_file(struct inode *inode, struct file *file)
{
	struct sdt_file *f = file->private_data;
	struct sdt_session *s = f->session;

	if (s) {
		mutex_lock(&sdt_sessions_mutex);
		list_del_rcu(&s->node);
		atomic_dec(&sdt_stats.sessions);
		mutex_unlock(&sdt_sessions_mutex);
		sdt_session_end_capture(s);
		sdt_session_put(s);
	}
	kfree(f);
	return 0;
}

static const struct file_operations sdt_fops = {
	.owner = THIS_MODULE,
	.open = sdt_open,
	.release = sdt_release_file,
	.unlocked_ioctl = sdt_ioctl,
	.compat_ioctl = compat_ptr_ioctl,
	.poll = sdt_poll,
	.llseek = no_llseek,
};

static ssize_t status_show(struct device *dev, struct device_attribute *attr, char *buf)
{
	return sysfs_emit(buf,
			  "version %d\nsessions %d\ncapturing %d\nheld %d\npending %d\n"
			  "captures %lld\ntriggers %lld\nipis %lld\nborn %lld\ngone %lld\n",
			  SDT_KMOD_VERSION, atomic_read(&sdt_stats.sessions),
			  atomic_read(&sdt_stats.capturing), atomic_read(&sdt_stats.held),
			  atomic_read(&sdt_stats.pending), atomic64_read(&sdt_stats.captures),
			  atomic64_read(&sdt_stats.triggers), atomic64_read(&sdt_stats.ipis),
			  atomic64_read(&sdt_stats.born), atomic64_read(&sdt_stats.gone));
}
static DEVICE_ATTR_RO(status);

static struct attribute *sdt_attrs[] = {
	&dev_attr_status.attr,
	NULL,
};
ATTRIBUTE_GROUPS(sdt);

/*
 * Anyone may open it: registering needs the program's ptrace rights, and a trigger or a
 * query acts on the caller's own process only.
 */
static struct miscdevice sdt_dev = {
	.minor = MISC_DYNAMIC_MINOR,
	.name = SDT_KMOD_NAME,
	.fops = &sdt_fops,
	.mode = 0666,
	.groups = sdt_groups,
};

static int __init sdt_init(void)
{
	int ret = sdt_capture_init();

	if (ret)
		return ret;
	ret = misc_register(&sdt_dev);
	if (ret) {
		sdt_capture_exit();
		return ret;
	}
	pr_info("sdt: /dev/sdt ready (interface version %d, %u-byte XSAVE area)\n",
		SDT_KMOD_VERSION, sdt_xstate_size);
	return 0;
}

static void __exit sdt_exit(void)
{
	misc_deregister(&sdt_dev);
	sdt_capture_exit();
	/* Sessions freed through call_rcu must be gone before the module. */
	rcu_barrier();
	pr_info("sdt: unloaded\n");
}

module_init(sdt_init);
module_exit(sdt_exit);
MODULE_LICENSE("GPL");
MODULE_AUTHOR("SDT");
MODULE_DESCRIPTION("SDT snapshot debugger: hold every thread of a program at an offline breakpoint");
