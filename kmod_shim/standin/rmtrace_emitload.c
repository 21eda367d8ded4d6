// SPDX-License-Identifier: GPL-2.0
/*
 * rmtrace_emitload.c: loads rmtrace_emit() from every CPU, in task and in hard-irq context.
 *
 * At insmod, one kthread per online CPU (bound to it) emits `count`
 * records while an hrtimer on the same CPU emits `irq_count` more from its
 * interrupt, both at once; insmod returns when all are done.  Each record
 * is a MARK NOTE with pid 0xe417 and call_id (cpu << 40 | ctx << 32 | n),
 * so a reader can tell exactly which ones it got; what rmtrace_emit
 * refused is counted in the emitload_* lines of the kernel log.
 */
#include <linux/atomic.h>
#include <linux/completion.h>
#include <linux/cpu.h>
#include <linux/hrtimer.h>
#include <linux/kthread.h>
#include <linux/module.h>
#include <linux/slab.h>

#include "../kmod/rmtrace.h"

#define EMITLOAD_PID 0xe417

static unsigned int count = 10000;
module_param(count, uint, 0444);
static unsigned int irq_count = 2000;
module_param(irq_count, uint, 0444);

struct loader {
	int cpu;
	struct hrtimer timer;
	unsigned int irq_done;
	struct completion done;
	struct completion irq_finished;
};

static atomic64_t refused = ATOMIC64_INIT(0);
static atomic64_t written = ATOMIC64_INIT(0);

static void emit_one(int cpu, u32 ctx, u32 n)
{
	u64 payload[4] = { cpu, ctx, n, 0x5eed };
	struct rmt_emit_buf buf = { .role = RMT_BUF_ARG, .when = RMT_WHEN_ONCE, .len = sizeof(payload),
				    .data = payload };
	struct rmt_event ev = { .source = RMT_SRC_MARK, .phase = RMT_PH_EVENT, .op = RMT_MARK_NOTE, .fd = -1,
				.pid = EMITLOAD_PID, .tid = cpu, .call_id = (u64)cpu << 40 | (u64)ctx << 32 | n };

	if (rmtrace_emit(&ev, &buf, 1))
		atomic64_inc(&refused);
	else
		atomic64_inc(&written);
}

static enum hrtimer_restart tick(struct hrtimer *t)
{
	struct loader *l = container_of(t, struct loader, timer);
	int i;

	for (i = 0; i < 8 && l->irq_done < irq_count; i++)
		emit_one(smp_processor_id(), 1, l->irq_done++);
	if (l->irq_done >= irq_count) {
		complete(&l->irq_finished);
		return HRTIMER_NORESTART;
	}
	hrtimer_forward_now(t, ns_to_ktime(20000));
	return HRTIMER_RESTART;
}

static int run(void *arg)
{
	struct loader *l = arg;
	unsigned int n;

	hrtimer_start(&l->timer, ns_to_ktime(10000), HRTIMER_MODE_REL_PINNED);
	for (n = 0; n < count; n++) {
		emit_one(l->cpu, 0, n);
		if (!(n % 256))
			cond_resched();
	}
	wait_for_completion(&l->irq_finished);
	complete(&l->done);
	return 0;
}

static int __init emitload_init(void)
{
	struct loader *loaders;
	int cpu, n = 0, i;

	loaders = kcalloc(num_online_cpus(), sizeof(*loaders), GFP_KERNEL);
	if (!loaders)
		return -ENOMEM;
	cpus_read_lock();
	for_each_online_cpu(cpu) {
		struct loader *l = &loaders[n];
		struct task_struct *t;

		l->cpu = cpu;
		init_completion(&l->done);
		init_completion(&l->irq_finished);
		hrtimer_init(&l->timer, CLOCK_MONOTONIC, HRTIMER_MODE_REL_PINNED);
		l->timer.function = tick;
		t = kthread_create_on_cpu(run, l, cpu, "rmt_emitload/%u");
		if (IS_ERR(t))
			break;
		wake_up_process(t);
		n++;
	}
	cpus_read_unlock();
	for (i = 0; i < n; i++)
		wait_for_completion(&loaders[i].done);
	kfree(loaders);
	pr_info("emitload_cpus %d emitload_written %lld emitload_refused %lld\n", n, atomic64_read(&written),
		atomic64_read(&refused));
	return 0;
}

static void __exit emitload_exit(void)
{
}

module_init(emitload_init);
module_exit(emitload_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("rmtrace test: rmtrace_emit from every CPU in task and hard-irq context");
