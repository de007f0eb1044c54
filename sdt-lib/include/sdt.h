/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * sdt.h - offline breakpoints for SDT, the snapshot debugger.
 *
 *   #include <sdt.h>
 *   SetBreakpoint(1, 2, 10, 0, "phase=solve,iter=3");
 *
 * Link with the library `cargo build --release` leaves in target/release:
 *   cc prog.c -I sdt-lib/include -L target/release -l:libsdt.a -lpthread -ldl -lm   (static)
 *   cc prog.c -I sdt-lib/include -L target/release -lsdt -Wl,-rpath,$PWD/target/release
 *
 * Run the program under `sdt run -- ./prog`: every breakpoint that passes the capture
 * config stops all of the program's threads while a snapshot is taken. Run it on its own
 * and SetBreakpoint costs one load and one predictable branch. Build with -DSDT_DISABLE
 * and it costs nothing and needs no library.
 *
 * Arguments:
 *   level          depth of detail; the config's max_level cuts deeper breakpoints
 *   class          the user's category (e.g. an I/O phase, a solver)
 *   id             the breakpoint's own number
 *   multiple_mark  0: across the whole run only the first thread to arrive captures;
 *                  1: every arrival may capture
 *   attrs          "key=value,key=value", matched by the config's [attrs] globs; may be NULL
 *
 * A breakpoint is identified by (level, class, id): hit counts and multiple_mark = 0
 * apply to that triple, wherever it is written in the source.
 *
 * Return values of SetBreakpoint() and sdt_breakpoint():
 *   n >= 0          snapshot S<n> was taken here
 *   SDT_OFF         not running under `sdt run`
 *   SDT_FILTERED    the capture config filtered this breakpoint out (no system call made;
 *                   one deeper than max_level, of a class 0-63 that `classes` leaves out
 *                   or with an id 0-4095 that `ids` leaves out, not even a function call)
 *   SDT_DECLINED    passed the config, but no snapshot was taken (max_snapshots reached,
 *                   or the capture failed; `sdt run` says why). Past max_snapshots it
 *                   costs no system call and no stop either
 *
 * Thread-safe. Not async-signal-safe on the first call of a process (it reads the
 * environment); afterwards it allocates nothing and takes no locks. When a snapshot is
 * taken, the calling thread stops inside SetBreakpoint() itself, so the snapshot's top
 * frame is the line that called it: at an `int3` for `sdt run`'s ptrace tracer, or in
 * the kernel module's trigger call under `sdt run --backend kmod`.
 */
#ifndef SDT_H
#define SDT_H

#ifdef __cplusplus
extern "C" {
#endif

#define SDT_VERSION_MAJOR 0
#define SDT_VERSION_MINOR 1
#define SDT_VERSION_PATCH 0

#define SDT_OFF (-1)
#define SDT_FILTERED (-2)
#define SDT_DECLINED (-3)

#if defined(__GNUC__) || defined(__clang__)
#define SDT_MUST_CHECK __attribute__((warn_unused_result))
#else
#define SDT_MUST_CHECK
#endif

/*
 * 0: off. 1: not set up yet (the next breakpoint looks at the environment). From
 * SDT_STATE_ON up: running under `sdt run`, and the config's max_level is
 * sdt_state - SDT_STATE_ON, so deeper breakpoints are dropped inline. Negated (at most
 * -SDT_STATE_ON): `sdt run` takes no more snapshots (max_snapshots reached); breakpoints
 * are checked as under the positive value, and sdt_arm() returns SDT_DECLINED for one
 * that passes instead of letting it stop. Read with an acquire load (a plain load on
 * x86-64).
 */
extern int sdt_state;
#define SDT_STATE_ON 2

/*
 * While sdt_state is SDT_STATE_ON or more: bit c clear means no breakpoint of class c
 * (0 to 63) can capture, so it is dropped inline too. Written before the state word it
 * goes with; read after an acquire load of it.
 */
extern unsigned long long sdt_classes;

/* The same for ids 0 to 4095: bit id % 64 of sdt_ids[id / 64]. */
extern unsigned long long sdt_ids[64];

/*
 * The trap record: what a breaking thread hands to `sdt run`. SetBreakpoint() fills it
 * through sdt_arm() and stops in its caller's own frame (so gdb's current frame is the
 * user's code) with `int3`, rax = SDT_TRAP_MAGIC and rdi = the record. `sdt run` captures
 * the snapshot while the thread is stopped and writes `result` back, with `version` 0: a
 * later `int3` of the program's own that finds the registers as they were is its own.
 * Protocol version 1: bump SDT_TRAP_MAGIC's last byte when this changes.
 */
struct sdt_trap {
	unsigned int version;		/* SDT_PROTOCOL_VERSION */
	unsigned int size;		/* sizeof(struct sdt_trap) */
	int level, class_, id, multiple_mark;
	unsigned long long hit;		/* arrival number at this breakpoint, from 1 */
	unsigned long long attrs_ptr, attrs_len;
	unsigned long long trigger_ns;	/* CLOCK_MONOTONIC at the call */
	unsigned long long state_ptr;	/* &sdt_state, which sdt may switch off */
	long long result;		/* written by sdt: the snapshot number, or SDT_DECLINED */
};

#define SDT_PROTOCOL_VERSION 1
/* "SDTTRAP" and the protocol version, little-endian. */
#define SDT_TRAP_MAGIC 0x0150415254544453ULL

/*
 * Under `sdt run --backend kmod`: the open /dev/sdt of the kernel module that captures
 * this process (else -1), and its trigger request, ioctl(sdt_kmod_fd,
 * SDT_KMOD_TRIGGER, &trap) (SDT_IOC_TRIGGER of kmod/include/uapi/linux/sdt_kmod.h:
 * _IOWR(0xDB, 3, struct sdt_trap)). The call returns once every other thread of the
 * process was held, the snapshot taken and the threads released, with trap.result set.
 */
extern int sdt_kmod_fd;
#define SDT_KMOD_TRIGGER 0xC048DB03UL

#ifdef __cplusplus
static_assert(sizeof(struct sdt_trap) == 72, "struct sdt_trap is part of the protocol");
#else
_Static_assert(sizeof(struct sdt_trap) == 72, "struct sdt_trap is part of the protocol");
#endif

/*
 * Checks a breakpoint against the capture config. Returns 0 when it passes and `trap` is
 * filled for the caller to stop with (int3, or the module's trigger if sdt_kmod_fd is
 * set); SDT_OFF, SDT_FILTERED, or SDT_DECLINED (it passes, and `sdt run` takes no more
 * snapshots) otherwise.
 */
SDT_MUST_CHECK int sdt_arm(struct sdt_trap *trap, int level, int class_, int id,
			   int multiple_mark, const char *attrs);

/* The whole breakpoint as one call, for callers that cannot use SetBreakpoint(). */
int sdt_breakpoint(int level, int class_, int id, int multiple_mark, const char *attrs);

/* The library's version: MAJOR << 16 | MINOR << 8 | PATCH. */
SDT_MUST_CHECK unsigned int sdt_version(void);

#ifdef SDT_DISABLE
/* Compiled out: no reference to the library at all. */
static inline int SetBreakpoint(int level, int class_, int id, int multiple_mark,
				const char *attrs)
{
	(void)level, (void)class_, (void)id, (void)multiple_mark, (void)attrs;
	return SDT_OFF;
}
#else
static inline int SetBreakpoint(int level, int class_, int id, int multiple_mark,
				const char *attrs)
{
	struct sdt_trap trap;
	int armed, fd;
	int state = __atomic_load_n(&sdt_state, __ATOMIC_ACQUIRE);

	if (__builtin_expect(state == 0, 1))
		return SDT_OFF;
	/* No more snapshots: filtered as before, and sdt_arm() declines the rest. */
	if (state < 0)
		state = -state;
	if (state >= SDT_STATE_ON &&
	    (level > state - SDT_STATE_ON ||
	     ((unsigned int)class_ < 64 &&
	      !((__atomic_load_n(&sdt_classes, __ATOMIC_RELAXED) >> class_) & 1)) ||
	     ((unsigned int)id < 4096 &&
	      !((__atomic_load_n(&sdt_ids[id >> 6], __ATOMIC_RELAXED) >> (id & 63)) & 1))))
		return SDT_FILTERED;
	armed = sdt_arm(&trap, level, class_, id, multiple_mark, attrs);
	if (armed != 0)
		return armed;
#if defined(__x86_64__)
	fd = __atomic_load_n(&sdt_kmod_fd, __ATOMIC_ACQUIRE);
	if (fd >= 0) {
		/*
		 * The answer is trap.result, whatever the call returns: a snapshot resumed
		 * at this instruction has rax as it was inside the call, and result patched.
		 */
		long nr = 16; /* __NR_ioctl */

		__asm__ volatile("syscall"
				 : "+a"(nr)
				 : "D"((long)fd), "S"(SDT_KMOD_TRIGGER), "d"(&trap)
				 : "rcx", "r11", "memory");
	} else {
		__asm__ volatile("int3" : : "a"(SDT_TRAP_MAGIC), "D"(&trap) : "memory");
	}
#else
#error "SDT supports x86_64 only"
#endif
	return (int)trap.result;
}
#endif /* SDT_DISABLE */

#ifdef __cplusplus
}
#endif

#endif /* SDT_H */
