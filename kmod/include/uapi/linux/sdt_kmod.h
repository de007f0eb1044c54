/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * sdt_kmod.h - /dev/sdt, the kernel module of SDT (the snapshot debugger).
 *
 * At an offline breakpoint, the module stops every other thread of the program with
 * inter-processor interrupts and holds each one in the kernel, on its way back to user
 * mode, until the capture side releases them. Four operations, after the paper's system
 * calls (RegisterSnapshot, TriggerSnapshot, GetSnapshot, and the release):
 *
 *   daemon                                    program (libsdt, on the breaking thread)
 *   ------                                    ------------------------------------------
 *   open("/dev/sdt")
 *   PTRACE_SEIZE the program, then
 *   SDT_IOC_REGISTER(pid, filter)
 *   PTRACE_DETACH                             open("/dev/sdt"); SDT_IOC_QUERY: registered?
 *   poll() ...                                SDT_IOC_TRIGGER(&record)
 *                                               filter fails: returns at once
 *                                               passes: every other thread is held;
 *   <- POLLIN once every thread is held          the caller waits
 *   SDT_IOC_GET: registers of every thread
 *   (pages: process_vm_readv)
 *   SDT_IOC_RELEASE(result) ----------------->  record.result = result; every thread runs
 *
 * SDT_IOC_FREEZE holds every thread without a breakpoint (timed snapshots).
 *
 * Who may do what:
 *   - SDT_IOC_REGISTER: only a process that is the program's ptrace tracer at that
 *     moment. Attaching ran the kernel's ptrace_may_access(PTRACE_MODE_ATTACH_REALCREDS)
 *     check, the one process_vm_readv makes (module code cannot call it: the kernel
 *     does not export it). The registration ends, and captures fail with EPERM, if the
 *     program's credentials change or it stops being dumpable (a set-user-ID execve).
 *   - SDT_IOC_QUERY and SDT_IOC_TRIGGER act on the calling process only.
 *   - SDT_IOC_FREEZE, SDT_IOC_GET and SDT_IOC_RELEASE act on the registration of the
 *     open file they are called on.
 * Closing the registering file releases every held thread and ends the registration.
 *
 * Return values (ioctl returns 0 or -1 with errno):
 *   EINVAL     bad size, version, flag or filter
 *   EPROTO     the structure's version is not SDT_KMOD_VERSION
 *   EPERM      not the program's tracer (REGISTER); the program changed credentials (GET)
 *   ESRCH      no such program, or it is exiting
 *   EBUSY      already registered (REGISTER); a capture is under way (FREEZE)
 *   EAGAIN     no capture is ready (GET without SDT_GET_WAIT)
 *   ENOSPC     the threads buffer is too small (GET): nr_threads and thread_size say
 *              how much is needed
 *   ENOMEM     out of memory, or a thread could not be held (the capture is unusable;
 *              release it)
 *   ESTALE     the program called execve during the capture (GET; release it)
 *
 * Bump SDT_KMOD_VERSION whenever a structure, a constant or a rule here changes.
 */
#ifndef _UAPI_LINUX_SDT_KMOD_H
#define _UAPI_LINUX_SDT_KMOD_H

#include <linux/ioctl.h>
#include <linux/types.h>

#define SDT_KMOD_VERSION 2

/* The device node's name under /dev. */
#define SDT_KMOD_NAME "sdt"

/*
 * The trap record: what the breaking thread passes to SDT_IOC_TRIGGER, laid out as
 * libsdt's `struct sdt_trap` (sdt.h, protocol version 1). The module writes `result`
 * (and, when told that no more snapshots will be taken, the int at `state_ptr`) before
 * the call returns.
 */
#define SDT_TRAP_VERSION 1
struct sdt_trap_record {
	__u32 version;			/* SDT_TRAP_VERSION */
	__u32 size;			/* sizeof(struct sdt_trap_record) */
	__s32 level;
	__s32 class_;
	__s32 id;
	__s32 multiple_mark;
	__u64 hit;			/* arrival number at this breakpoint, from 1 */
	__u64 attrs_ptr;		/* "key=value,..." (not NUL-terminated) */
	__u64 attrs_len;		/* at most SDT_ATTRS_MAX */
	__u64 trigger_ns;		/* CLOCK_MONOTONIC when the breakpoint was reached */
	__u64 state_ptr;		/* libsdt's state word (an int) */
	__s64 result;			/* written by the module: see SDT_RESULT_* */
};

#define SDT_ATTRS_MAX 4096

/* Breakpoint results besides a snapshot number (>= 0); libsdt's SDT_OFF etc. */
#define SDT_RESULT_OFF		(-1)	/* not registered: breakpoints are off */
#define SDT_RESULT_FILTERED	(-2)	/* the registered filter does not pass it */
#define SDT_RESULT_DECLINED	(-3)	/* passed, but no snapshot was taken */

/*
 * libsdt's state word: SDT_STATE_OFF switches breakpoints off; from SDT_STATE_ON up they
 * are checked (the value carries the config's max_level). SDT_RELEASE_TURN_OFF negates a
 * word of SDT_STATE_ON or more: checked as before, a breakpoint that passes then returns
 * SDT_RESULT_DECLINED in the program, without a trigger call.
 */
#define SDT_STATE_OFF 0
#define SDT_STATE_ON 2

/*
 * The capture filter: a header, `nr_rules` rules, then `strings_len` bytes of attribute
 * keys and globs. A breakpoint passes when every condition holds:
 *   level <= max_level                     (if SDT_FILTER_MAX_LEVEL)
 *   class in a SDT_RULE_CLASS span          (if SDT_FILTER_CLASSES; none: nothing passes)
 *   id in a SDT_RULE_ID span                (if SDT_FILTER_IDS; likewise)
 *   hit in a SDT_RULE_HIT span              (if SDT_FILTER_HITS; likewise)
 *   every SDT_RULE_ATTR: the attribute string holds the key, and its value (spaces
 *   around key and value trimmed) matches the glob: * ? [abc] [a-z] [!abc] \x
 * or the breakpoint is a SDT_RULE_ALWAYS (level, class, id), which passes regardless.
 */
#define SDT_FILTER_MAX_LEVEL	(1U << 0)
#define SDT_FILTER_CLASSES	(1U << 1)
#define SDT_FILTER_IDS		(1U << 2)
#define SDT_FILTER_HITS		(1U << 3)

#define SDT_FILTER_MAX_RULES	4096
#define SDT_FILTER_MAX_STRINGS	65536

struct sdt_filter {
	__u32 flags;			/* SDT_FILTER_* */
	__s32 max_level;
	__u32 nr_rules;			/* at most SDT_FILTER_MAX_RULES */
	__u32 strings_len;		/* at most SDT_FILTER_MAX_STRINGS */
};

enum sdt_rule_kind {
	SDT_RULE_CLASS = 1,		/* first..last */
	SDT_RULE_ID = 2,		/* first..last */
	SDT_RULE_HIT = 3,		/* first..last */
	SDT_RULE_ATTR = 4,		/* key and glob in the strings */
	SDT_RULE_ALWAYS = 5,		/* level, class_, id */
};

struct sdt_rule {
	__u32 kind;			/* enum sdt_rule_kind */
	__s32 level;
	__s32 class_;
	__s32 id;
	__s64 first;
	__s64 last;			/* >= first */
	__u32 key_off;
	__u32 key_len;
	__u32 glob_off;
	__u32 glob_len;
};

/* SDT_IOC_VERSION: what this module speaks. */
struct sdt_version {
	__u32 version;			/* SDT_KMOD_VERSION */
	__u32 thread_size;		/* bytes per thread in SDT_IOC_GET */
	__u32 xstate_size;		/* XSAVE area bytes per thread (0: no XSAVE) */
	__u32 reserved;
};

/* SDT_IOC_REGISTER: capture this program with this filter. */
struct sdt_register {
	__u32 version;			/* SDT_KMOD_VERSION */
	__u32 size;			/* sizeof(struct sdt_register) */
	__s32 pid;			/* the program (its first thread's id) */
	__u32 filter_len;		/* bytes at filter: the whole filter */
	__aligned_u64 filter;		/* struct sdt_filter, rules, strings */
};

/* SDT_IOC_QUERY: is the calling process registered, and by whom? */
struct sdt_query {
	__u32 version;			/* out: SDT_KMOD_VERSION */
	__u32 registered;		/* out: 1 if registered */
	__s32 daemon_pid;		/* out: the registering process (0: not visible) */
	__u32 reserved;
};

/* SDT_IOC_RELEASE: let every held thread go. */
#define SDT_RELEASE_TURN_OFF	(1U << 0)	/* no more snapshots: negate the state word */
struct sdt_release {
	__s64 result;			/* the breaking thread's record.result */
	__u32 flags;			/* SDT_RELEASE_* */
	__u32 reserved;
};

/* A signal's disposition (struct kernel_sigaction). */
struct sdt_sigaction {
	__u64 handler;
	__u64 flags;
	__u64 restorer;
	__u64 mask;
};

#define SDT_NSIG 64

/* SDT_IOC_GET: the capture every thread is held for. */
#define SDT_GET_WAIT		(1U << 0)	/* block until one is ready */

#define SDT_CAPTURE_TRIGGER	1	/* a breakpoint (SDT_IOC_TRIGGER) */
#define SDT_CAPTURE_FREEZE	2	/* SDT_IOC_FREEZE */

struct sdt_snapshot {
	/* in */
	__aligned_u64 threads;		/* nr_threads records of thread_size bytes */
	__u32 threads_len;		/* bytes at threads */
	__u32 flags;			/* SDT_GET_* */
	/* out */
	__u64 seq;			/* captures of this registration, this one included */
	__u32 kind;			/* SDT_CAPTURE_* */
	__u32 nr_threads;		/* held threads, the breaking thread first */
	__u32 thread_size;		/* bytes per record at threads */
	__s32 trigger_tid;		/* the breaking thread (0 for a freeze) */
	__u64 start_ns;			/* CLOCK_MONOTONIC: the trigger or freeze began */
	__u64 held_ns;			/* CLOCK_MONOTONIC: the last thread was held */
	__u64 exec_id;			/* changes whenever the program calls execve */
	__aligned_u64 record_addr;	/* the breaking thread's trap record */
	struct sdt_trap_record record;	/* as the module read it */
	__u32 nr_actions;		/* SDT_NSIG, or 0 if unknown */
	__u32 reserved;
	struct sdt_sigaction actions[SDT_NSIG];	/* signal n at [n - 1] */
};

/* One held thread in SDT_IOC_GET's buffer, followed by xstate_size bytes. */
#define SDT_THREAD_TRIGGER	(1U << 0)	/* the breaking thread */

struct sdt_thread {
	__s32 tid;			/* in the caller's pid namespace */
	__u32 flags;			/* SDT_THREAD_* */
	__u64 sigmask;			/* blocked signals, bit n - 1 for signal n */
	__aligned_u64 rseq;		/* rseq area (0: none) */
	__u32 rseq_len;
	__u32 rseq_sig;
	__aligned_u64 robust_list;	/* robust futex list head (0: none) */
	__u64 robust_list_len;
	__aligned_u64 altstack;		/* alternate signal stack's base (0: none) */
	__u64 altstack_size;
	__u32 gpregs_size;		/* bytes of gpregs filled */
	__u32 fpregs_size;		/* bytes of fpregs filled */
	__u32 xstate_size;		/* bytes of XSAVE area after this record */
	__u32 altstack_flags;		/* SS_AUTODISARM or 0 */
	__u64 gpregs[27];		/* struct user_regs_struct (NT_PRSTATUS) */
	__u8 fpregs[512];		/* struct user_i387_struct (NT_PRFPREG) */
};

#define SDT_IOC_MAGIC 0xDB

#define SDT_IOC_VERSION		_IOR(SDT_IOC_MAGIC, 0, struct sdt_version)
#define SDT_IOC_REGISTER	_IOW(SDT_IOC_MAGIC, 1, struct sdt_register)
#define SDT_IOC_QUERY		_IOR(SDT_IOC_MAGIC, 2, struct sdt_query)
#define SDT_IOC_TRIGGER		_IOWR(SDT_IOC_MAGIC, 3, struct sdt_trap_record)
#define SDT_IOC_FREEZE		_IO(SDT_IOC_MAGIC, 4)
#define SDT_IOC_GET		_IOWR(SDT_IOC_MAGIC, 5, struct sdt_snapshot)
#define SDT_IOC_RELEASE		_IOW(SDT_IOC_MAGIC, 6, struct sdt_release)

#ifdef __cplusplus
#define SDT_KMOD_ASSERT(c, m) static_assert(c, m)
#else
#define SDT_KMOD_ASSERT(c, m) _Static_assert(c, m)
#endif
SDT_KMOD_ASSERT(sizeof(struct sdt_trap_record) == 72, "sdt_trap_record is part of the ABI");
SDT_KMOD_ASSERT(sizeof(struct sdt_filter) == 16, "sdt_filter is part of the ABI");
SDT_KMOD_ASSERT(sizeof(struct sdt_rule) == 48, "sdt_rule is part of the ABI");
SDT_KMOD_ASSERT(sizeof(struct sdt_version) == 16, "sdt_version is part of the ABI");
SDT_KMOD_ASSERT(sizeof(struct sdt_register) == 24, "sdt_register is part of the ABI");
SDT_KMOD_ASSERT(sizeof(struct sdt_query) == 16, "sdt_query is part of the ABI");
SDT_KMOD_ASSERT(sizeof(struct sdt_release) == 16, "sdt_release is part of the ABI");
SDT_KMOD_ASSERT(sizeof(struct sdt_sigaction) == 32, "sdt_sigaction is part of the ABI");
SDT_KMOD_ASSERT(sizeof(struct sdt_snapshot) == 2200, "sdt_snapshot is part of the ABI");
SDT_KMOD_ASSERT(sizeof(struct sdt_thread) == 808, "sdt_thread is part of the ABI");
#undef SDT_KMOD_ASSERT

#endif /* _UAPI_LINUX_SDT_KMOD_H */
