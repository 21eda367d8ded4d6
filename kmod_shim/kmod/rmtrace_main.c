// SPDX-License-Identifier: GPL-2.0
/*
 * rmtrace_main.c: rmtrace.ko, the kernel shim of rmtrace.
 *
 * Records RM/UVM calls and GSP messages from kretprobes and host-service
 * records from rmtrace_emit() into per-CPU rings that /dev/rmtrace reads,
 * and serves replays to registered host services on /dev/rmtrace-replay.
 * docs/kernel-shim.md describes all of it.  Counters are in
 * /sys/kernel/debug/rmtrace/stats (and RMT_IOC_STATS).
 *
 * Unloading: every open file of the two devices holds a reference on this
 * module (as every char device's does), so rmmod waits until readers have
 * closed; a host-service module using the exported API must go first.
 * Exit order: probes (unregister_kretprobe waits for running handlers),
 * then the devices, then the rings nothing can write any more.
 */
#include <linux/debugfs.h>
#include <linux/module.h>
#include <linux/seq_file.h>

#include "rmtrace_internal.h"

unsigned int rmt_ring_kb = 1024;
module_param_named(ring_kb, rmt_ring_kb, uint, 0444);
MODULE_PARM_DESC(ring_kb, "KiB of ring per CPU (rounded up to a power of two; at least 64)");

unsigned int rmt_max_record = 256 << 10;
module_param_named(max_record, rmt_max_record, uint, 0444);
MODULE_PARM_DESC(max_record, "largest record in bytes (at most half a ring); larger ones are dropped and counted");

static char *probes = "default";
module_param(probes, charp, 0444);
MODULE_PARM_DESC(probes, "probes attached at load: 'default' (the NVIDIA entry points), '' none, or a comma list");

static struct dentry *debug_dir;

static int stats_show(struct seq_file *m, void *unused)
{
	struct rmt_kmod_stats st;

	rmt_stats(&st);
	seq_printf(m, "records %llu\nbytes %llu\ndrops_full %llu\ndrops_big %llu\ndrops_ctx %llu\n"
		   "consumed %llu\ncpus %u\nring_size %llu\nsources %#x\nprobes %u\n",
		   st.records, st.bytes, st.drops_full, st.drops_big, st.drops_ctx, st.consumed, st.cpus,
		   st.ring_size, st.sources, st.probes);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(stats);

static int probes_show(struct seq_file *m, void *unused)
{
	struct rmt_probe_info info;
	u32 i;

	for (i = 0; i < RMT_PROBES_MAX; i++) {
		info.index = i;
		if (rmt_probe_info(&info) || !info.symbol[0])
			continue;
		seq_printf(m, "%s %s hits %llu missed %llu\n", info.symbol,
			   info.state == 1 ? "attached" : "missing", info.hits, info.missed);
	}
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(probes);

static int __init rmtrace_init(void)
{
	int rc;

	rc = rmt_rings_init();
	if (rc)
		return rc;
	rc = rmt_dev_init();
	if (rc)
		goto rings;
	rc = rmt_replay_init();
	if (rc)
		goto dev;
	rc = rmt_probes_init(probes);
	if (rc)
		goto replay;
	debug_dir = debugfs_create_dir("rmtrace", NULL);
	debugfs_create_file("stats", 0400, debug_dir, NULL, &stats_fops);
	debugfs_create_file("probes", 0400, debug_dir, NULL, &probes_fops);
	return 0;
replay:
	rmt_replay_exit();
dev:
	rmt_dev_exit();
rings:
	rmt_rings_exit();
	return rc;
}

static void __exit rmtrace_exit(void)
{
	debugfs_remove(debug_dir);
	rmt_probes_exit();
	rmt_replay_exit();
	rmt_dev_exit();
	rmt_rings_exit();
}

module_init(rmtrace_init);
module_exit(rmtrace_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("rmtrace: records NVIDIA RM/UVM calls, GSP and host-service messages; serves replays");
