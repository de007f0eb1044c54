// SPDX-License-Identifier: GPL-2.0
/*
 * The smallest out-of-tree module: `scripts/guest/prepare` builds it once against the
 * unpacked headers to prove KDIR works, and the guest smoke test loads it with
 * `scripts/guest/run --module` and looks for its line in the kernel log. Loaded with
 * `warn=1` it raises a kernel WARNING, which `scripts/guest/run` must report as a failure.
 */
#include <linux/module.h>
#include <linux/kernel.h>
#include <linux/cpumask.h>
#include <linux/moduleparam.h>

static bool warn;
module_param(warn, bool, 0444);
MODULE_PARM_DESC(warn, "raise a WARNING when loaded (tests the harness)");

static int __init sdt_guest_hello_init(void)
{
	pr_info("sdt_guest_hello: loaded, %u CPUs online\n", num_online_cpus());
	WARN(warn, "sdt_guest_hello: warning on request\n");
	return 0;
}

static void __exit sdt_guest_hello_exit(void)
{
	pr_info("sdt_guest_hello: unloaded\n");
}

module_init(sdt_guest_hello_init);
module_exit(sdt_guest_hello_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("SDT guest harness self-check module");
