// SPDX-License-Identifier: GPL-2.0
/*
 * rmtrace_detach.c: ending every open file's stream so the module can go.
 *
 * An open file of /dev/rmtrace or /dev/rmtrace-replay holds a reference on
 * this module, as every character device's does, and Linux cannot revoke an
 * open file: its release() must still find this module's code when it is
 * finally closed, so rmmod refuses while one is open (docs/kernel-shim.md,
 * "Unloading with readers attached", says why no safe way around that
 * exists).  Detaching is how the module goes anyway, as SystemTap's modules
 * do on STP_EXIT: writing 1 to /sys/module/rmtrace/parameters/detach stops
 * every probe and source, then every reader gets the records still in the
 * rings, one MARK STOP record saying the module detached, and then the end
 * of its stream (read() 0, poll() EPOLLHUP); every replay session its queued
 * answers and then the end (a write is -ENODEV).  The readers close (the
 * recorder finishes its trace, rmt_relay waits for the device to come back)
 * and the write returns once the last file is closed, or fails with EBUSY
 * naming the processes that keep one open after detach_wait_s seconds.
 * Then rmmod succeeds.  Detaching is one way: a detached module records
 * nothing more and only waits to be unloaded.
 */
#include <linux/list.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/mutex.h>
#include <linux/rcupdate.h>
#include <linux/sched.h>
#include <linux/string.h>
#include <linux/sysfs.h>
#include <linux/wait.h>

#include "rmtrace_internal.h"

static unsigned int detach_wait_s = 10;
module_param(detach_wait_s, uint, 0644);
MODULE_PARM_DESC(detach_wait_s, "how long writing 'detach' waits for the readers to close their files");

static LIST_HEAD(open_files);
static DEFINE_MUTEX(open_lock);
static DECLARE_WAIT_QUEUE_HEAD(closed_wq);
static unsigned int nopen; /* written under open_lock, read by the detach wait */
static bool detached;

bool rmt_detached(void)
{
	return READ_ONCE(detached);
}

int rmt_file_opened(struct rmt_opener *o, const char *device, wait_queue_head_t *wq)
{
	int rc = 0;

	o->device = device;
	o->wq = wq;
	o->pid = task_tgid_nr(current);
	get_task_comm(o->comm, current);
	mutex_lock(&open_lock);
	if (detached) {
		rc = -ENODEV; /* on its way out: nothing new may start */
	} else {
		list_add_tail(&o->node, &open_files);
		WRITE_ONCE(nopen, nopen + 1);
	}
	mutex_unlock(&open_lock);
	return rc;
}

void rmt_file_closed(struct rmt_opener *o)
{
	mutex_lock(&open_lock);
	list_del(&o->node);
	WRITE_ONCE(nopen, nopen - 1);
	mutex_unlock(&open_lock);
	wake_up_all(&closed_wq);
}

static int rmt_detach(void)
{
	struct rmt_opener *o;
	long left;

	if (!rmt_detached()) {
		rmt_probes_clear();   /* waits for running probe handlers */
		rmt_set_sources(0);   /* rmtrace_emit() now says -ENODATA */
		synchronize_rcu();    /* every emit that saw a source on (irqs off) has committed */
		mutex_lock(&open_lock);
		WRITE_ONCE(detached, true);
		pr_info("rmtrace: detaching: %u open files get the end of their stream\n", nopen);
		mutex_unlock(&open_lock);
	}
	mutex_lock(&open_lock);
	list_for_each_entry(o, &open_files, node)
		wake_up_interruptible_all(o->wq);
	mutex_unlock(&open_lock);
	left = wait_event_interruptible_timeout(closed_wq, !READ_ONCE(nopen), (long)detach_wait_s * HZ);
	if (left > 0)
		return 0;
	if (left < 0)
		return (int)left;
	mutex_lock(&open_lock);
	list_for_each_entry(o, &open_files, node)
		pr_warn("rmtrace: detach: pid %d (%s) keeps %s open after its end of stream\n", o->pid, o->comm,
			o->device);
	mutex_unlock(&open_lock);
	return -EBUSY;
}

static int detach_set(const char *val, const struct kernel_param *kp)
{
	bool on;
	int rc = kstrtobool(val, &on);

	if (rc)
		return rc;
	return on ? rmt_detach() : -EINVAL; /* one way: a detached module only waits for rmmod */
}

static int detach_get(char *buf, const struct kernel_param *kp)
{
	return sysfs_emit(buf, "%d\n", rmt_detached());
}

static const struct kernel_param_ops detach_ops = {
	.set = detach_set,
	.get = detach_get,
};
module_param_cb(detach, &detach_ops, NULL, 0600);
MODULE_PARM_DESC(detach, "write 1: end every reader's and replay session's stream, so that rmmod can follow");
