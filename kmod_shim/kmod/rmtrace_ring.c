// SPDX-License-Identifier: GPL-2.0
/*
 * rmtrace_ring.c: per-CPU rings of records, rmtrace_emit(), /dev/rmtrace.
 *
 * One ring per possible CPU, ring_kb KiB each, allocated at load: memory is
 * bounded and nothing is allocated while recording.  The producer is the
 * CPU itself with interrupts off (probe handlers, emitters in any context but
 * NMI), so a ring has one producer at a time; the consumer is a reader under
 * rmt_read_lock.  head and tail are never-wrapped byte counters as in
 * rmtrace_ring.h's shared-memory rings (same acquire/release pairing):
 * the producer loads tail with acquire before writing over consumed bytes
 * and publishes head with release; the consumer loads head with acquire and
 * releases tail once the bytes are copied out.  A full ring drops the new
 * record and counts it: a probe handler never waits for a reader.
 *
 * Readers get records oldest first across the rings (a k-way merge on each
 * record's time_ns); the device is a byte stream: a record that does not
 * fit the caller's buffer continues in the next read().  Wakeups go through
 * an irq_work, so emitting is safe wherever a waitqueue lock could be held.
 */
#include <linux/atomic.h>
#include <linux/fs.h>
#include <linux/irq_work.h>
#include <linux/miscdevice.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/percpu.h>
#include <linux/poll.h>
#include <linux/sched.h>
#include <linux/slab.h>
#include <linux/timekeeping.h>
#include <linux/uaccess.h>
#include <linux/vmalloc.h>
#include <linux/wait.h>

#include "rmtrace_internal.h"

struct rmt_ring {
	u8 *data;
	u64 head; /* written by this CPU with interrupts off (store-release) */
	u64 tail; /* written by a reader under rmt_read_lock (store-release) */
	u64 records;
	u64 bytes;
	u64 drops_full;
	u64 drops_big;
};

static DEFINE_PER_CPU(struct rmt_ring, rmt_rings);
static u64 ring_size;
static atomic64_t drops_ctx = ATOMIC64_INIT(0);
static atomic64_t consumed = ATOMIC64_INIT(0);
static u32 source_mask = RMT_SOURCES_ALL;
static DECLARE_WAIT_QUEUE_HEAD(rmt_readq);
static DEFINE_MUTEX(rmt_read_lock);
static struct irq_work rmt_wake_work;

bool rmt_source_on(u16 source)
{
	return source < 32 && (READ_ONCE(source_mask) & (1u << source));
}

u32 rmt_sources(void)
{
	return READ_ONCE(source_mask);
}

void rmt_set_sources(u32 mask)
{
	WRITE_ONCE(source_mask, mask & RMT_SOURCES_ALL);
}

static void rmt_wake(struct irq_work *work)
{
	wake_up_interruptible_all(&rmt_readq);
}

/* ------------------------------------------------------------ the producer */

static void ring_put(struct rmt_ring *r, u64 *pos, const void *src, u32 n)
{
	u64 off = *pos & (ring_size - 1);
	u32 first = min_t(u64, n, ring_size - off);

	memcpy(r->data + off, src, first);
	if (first < n)
		memcpy(r->data, (const u8 *)src + first, n - first);
	*pos += n;
}

static void ring_zero(struct rmt_ring *r, u64 *pos, u32 n)
{
	static const u8 zeros[RMT_ALIGN];

	if (n)
		ring_put(r, pos, zeros, n);
}

/* Room for size bytes in this CPU's ring (interrupts off), counting a drop when there is none. */
static bool ring_reserve(struct rmt_ring *r, u32 size)
{
	if (size > rmt_max_record) {
		r->drops_big++;
		return false;
	}
	if (r->head + size - smp_load_acquire(&r->tail) > ring_size) {
		r->drops_full++;
		return false;
	}
	return true;
}

static void ring_commit(struct rmt_ring *r, u64 head, u32 size)
{
	smp_store_release(&r->head, head);
	r->records++;
	r->bytes += size;
	irq_work_queue(&rmt_wake_work);
}

int rmtrace_emit(const struct rmt_event *ev, const struct rmt_emit_buf *bufs, unsigned int nbufs)
{
	struct rmt_record h = {
		.magic = RMT_RECORD_MAGIC,
		.version = RMT_RECORD_VERSION,
		.header_size = RMT_HEADER_SIZE,
		.source = ev->source,
		.phase = ev->phase,
		.flags = ev->flags,
		.pid = ev->pid,
		.tid = ev->tid,
		.call_id = ev->call_id,
		.op = ev->op,
		.fd = ev->fd,
		.ret = ev->ret,
		.err = ev->err,
		.nbufs = nbufs,
	};
	struct rmt_ring *r;
	unsigned long irqs;
	u64 size = RMT_HEADER_SIZE, head;
	unsigned int i;
	int rc = 0;

	if (nbufs > RMT_MAX_BUFS)
		return -EINVAL;
	if (in_nmi()) {
		atomic64_inc(&drops_ctx);
		return -EDEADLK;
	}
	for (i = 0; i < nbufs; i++)
		size += RMT_BUF_HEADER_SIZE + RMT_ALIGN_UP((u64)bufs[i].len);
	h.total_len = size > U32_MAX ? U32_MAX : (u32)size;
	h.time_ns = ev->time_ns ? ev->time_ns : ktime_get_ns();

	local_irq_save(irqs);
	if (!rmt_source_on(ev->source)) { /* checked with interrupts off: see rmt_detach() */
		rc = -ENODATA;
		goto out;
	}
	r = this_cpu_ptr(&rmt_rings);
	if (!ring_reserve(r, h.total_len)) {
		rc = h.total_len > rmt_max_record ? -E2BIG : -ENOSPC;
		goto out;
	}
	head = r->head;
	ring_put(r, &head, &h, sizeof(h));
	for (i = 0; i < nbufs; i++) {
		struct rmt_buffer b = {
			.role = bufs[i].role,
			.when = bufs[i].when,
			.flags = bufs[i].flags,
			.len = bufs[i].len,
			.addr = bufs[i].addr,
			.orig_len = bufs[i].orig_len ? bufs[i].orig_len : bufs[i].len,
			.slot = bufs[i].slot,
		};

		ring_put(r, &head, &b, sizeof(b));
		if (b.len)
			ring_put(r, &head, bufs[i].data, b.len);
		ring_zero(r, &head, RMT_ALIGN_UP(b.len) - b.len);
	}
	ring_commit(r, head, (u32)size);
out:
	local_irq_restore(irqs);
	return rc;
}
EXPORT_SYMBOL_GPL(rmtrace_emit);

int rmt_emit_encoded(const void *rec, u32 len, u64 time_ns)
{
	const struct rmt_record *in = rec;
	struct rmt_ring *r;
	unsigned long irqs;
	u64 head;
	int rc = 0;

	if (in_nmi()) {
		atomic64_inc(&drops_ctx);
		return -EDEADLK;
	}
	local_irq_save(irqs);
	if (!rmt_source_on(in->source)) {
		rc = -ENODATA;
		goto out;
	}
	r = this_cpu_ptr(&rmt_rings);
	if (!ring_reserve(r, len)) {
		rc = len > rmt_max_record ? -E2BIG : -ENOSPC;
		goto out;
	}
	head = r->head;
	if (time_ns) {
		struct rmt_record h = *in;

		h.time_ns = time_ns;
		ring_put(r, &head, &h, sizeof(h));
		ring_put(r, &head, (const u8 *)rec + sizeof(h), len - sizeof(h));
	} else {
		ring_put(r, &head, rec, len);
	}
	ring_commit(r, head, len);
out:
	local_irq_restore(irqs);
	return rc;
}

/* ------------------------------------------------------------ checking records */

int rmt_record_check(const void *data, u32 len, const char **why)
{
	const struct rmt_record *h = data;
	u32 off, i;

	if (len < RMT_HEADER_SIZE)
		return *why = "shorter than a record header", -EINVAL;
	if (h->magic != RMT_RECORD_MAGIC)
		return *why = "bad record magic", -EINVAL;
	if (h->version != RMT_RECORD_VERSION)
		return *why = "unknown record version", -EINVAL;
	if (h->header_size != RMT_HEADER_SIZE)
		return *why = "bad record header_size", -EINVAL;
	if (h->total_len != len || len % RMT_ALIGN)
		return *why = "bad record total_len", -EINVAL;
	if (h->source < RMT_SRC_RM || h->source > RMT_SRC_MARK)
		return *why = "unknown record source", -EINVAL;
	if (h->phase < RMT_PH_ENTER || h->phase > RMT_PH_EVENT)
		return *why = "unknown record phase", -EINVAL;
	if (h->nbufs > RMT_MAX_BUFS)
		return *why = "too many buffers", -EINVAL;
	if (h->reserved)
		return *why = "record reserved field not zero", -EINVAL;
	off = RMT_HEADER_SIZE;
	for (i = 0; i < h->nbufs; i++) {
		const struct rmt_buffer *b;

		if (len - off < RMT_BUF_HEADER_SIZE)
			return *why = "a buffer header runs past the record", -EINVAL;
		b = (const struct rmt_buffer *)((const u8 *)data + off);
		off += RMT_BUF_HEADER_SIZE;
		if (b->role < RMT_BUF_ARG || b->role > RMT_BUF_RIGHTS)
			return *why = "unknown buffer role", -EINVAL;
		if (b->when < RMT_WHEN_BEFORE || b->when > RMT_WHEN_ONCE)
			return *why = "unknown buffer when", -EINVAL;
		if (b->len > len - off || RMT_ALIGN_UP(b->len) > len - off)
			return *why = "a buffer runs past the record", -EINVAL;
		if (b->orig_len < b->len)
			return *why = "a buffer's orig_len is below its len", -EINVAL;
		off += RMT_ALIGN_UP(b->len);
	}
	if (off != len)
		return *why = "bytes after the last buffer", -EINVAL;
	return 0;
}

/* ------------------------------------------------------------ the consumer */

static void ring_get(const struct rmt_ring *r, u64 pos, void *dst, u32 n)
{
	u64 off = pos & (ring_size - 1);
	u32 first = min_t(u64, n, ring_size - off);

	memcpy(dst, r->data + off, first);
	if (first < n)
		memcpy((u8 *)dst + first, r->data, n - first);
}

static bool rmt_pending(void)
{
	int cpu;

	for_each_possible_cpu(cpu) {
		const struct rmt_ring *r = per_cpu_ptr(&rmt_rings, cpu);

		if (smp_load_acquire(&r->head) != READ_ONCE(r->tail))
			return true;
	}
	return false;
}

/* The oldest waiting record of all rings into dst (room rmt_max_record): its length, or 0. */
static u32 rmt_take(u8 *dst)
{
	struct rmt_ring *best = NULL;
	u64 best_time = U64_MAX;
	struct rmt_record h;
	int cpu;

	lockdep_assert_held(&rmt_read_lock);
	for_each_possible_cpu(cpu) {
		struct rmt_ring *r = per_cpu_ptr(&rmt_rings, cpu);

		if (smp_load_acquire(&r->head) == r->tail)
			continue;
		ring_get(r, r->tail, &h, sizeof(h));
		if (!best || h.time_ns < best_time) {
			best = r;
			best_time = h.time_ns;
		}
	}
	if (!best)
		return 0;
	ring_get(best, best->tail, &h, sizeof(h));
	ring_get(best, best->tail, dst, h.total_len);
	smp_store_release(&best->tail, best->tail + h.total_len);
	atomic64_inc(&consumed);
	return h.total_len;
}

void rmt_stats(struct rmt_kmod_stats *st)
{
	int cpu;

	memset(st, 0, sizeof(*st));
	st->version = RMT_KMOD_VERSION;
	st->sources = rmt_sources();
	st->probes = rmt_probes_attached();
	st->ring_size = ring_size;
	for_each_possible_cpu(cpu) {
		const struct rmt_ring *r = per_cpu_ptr(&rmt_rings, cpu);

		st->cpus++;
		st->records += READ_ONCE(r->records);
		st->bytes += READ_ONCE(r->bytes);
		st->drops_full += READ_ONCE(r->drops_full);
		st->drops_big += READ_ONCE(r->drops_big);
	}
	st->drops_ctx = atomic64_read(&drops_ctx);
	st->consumed = atomic64_read(&consumed);
}

/* ------------------------------------------------------------ /dev/rmtrace */

struct rmt_reader {
	struct rmt_opener opener;
	u8 *carry; /* the record being handed out */
	u32 len;
	u32 off;
	bool ended; /* detached: this reader was handed its STOP record */
};

static int rmt_open(struct inode *inode, struct file *file)
{
	struct rmt_reader *rd = kzalloc(sizeof(*rd), GFP_KERNEL);
	int rc;

	if (!rd)
		return -ENOMEM;
	rd->carry = kvmalloc(rmt_max_record, GFP_KERNEL);
	rc = rd->carry ? rmt_file_opened(&rd->opener, "/dev/rmtrace", &rmt_readq) : -ENOMEM;
	if (rc) {
		kvfree(rd->carry);
		kfree(rd);
		return rc;
	}
	file->private_data = rd;
	return stream_open(inode, file);
}

static int rmt_release(struct inode *inode, struct file *file)
{
	struct rmt_reader *rd = file->private_data;

	rmt_file_closed(&rd->opener);
	kvfree(rd->carry);
	kfree(rd);
	return 0;
}

/*
 * The last record a reader gets once the module has detached: MARK STOP (flag
 * SYNTHETIC) whose TEXT is JSON, the reason and the counters, so that a
 * recorder behind a relay, which cannot ask for RMT_IOC_STATS, has them too.
 */
static u32 end_record(u8 *dst)
{
	struct rmt_record *h = (struct rmt_record *)dst;
	struct rmt_buffer *b = (struct rmt_buffer *)(dst + RMT_HEADER_SIZE);
	char *text = (char *)(b + 1);
	struct rmt_kmod_stats st;
	int n;

	rmt_stats(&st);
	n = scnprintf(text, 512, "{\"reason\": \"detached\", \"by\": \"rmtrace.ko\", \"records\": %llu, "
		      "\"bytes\": %llu, \"drops_full\": %llu, \"drops_big\": %llu, \"drops_ctx\": %llu, "
		      "\"consumed\": %llu}", st.records, st.bytes, st.drops_full, st.drops_big, st.drops_ctx,
		      st.consumed);
	memset(text + n, 0, RMT_ALIGN_UP(n) - n);
	*b = (struct rmt_buffer){ .role = RMT_BUF_TEXT, .when = RMT_WHEN_ONCE, .len = n, .orig_len = n };
	*h = (struct rmt_record){ .magic = RMT_RECORD_MAGIC, .version = RMT_RECORD_VERSION,
				  .header_size = RMT_HEADER_SIZE, .source = RMT_SRC_MARK, .phase = RMT_PH_EVENT,
				  .flags = RMT_RF_SYNTHETIC, .op = RMT_MARK_STOP, .fd = -1, .nbufs = 1,
				  .time_ns = ktime_get_ns(),
				  .total_len = RMT_HEADER_SIZE + RMT_BUF_HEADER_SIZE + RMT_ALIGN_UP(n) };
	return h->total_len;
}

static ssize_t rmt_read(struct file *file, char __user *ubuf, size_t count, loff_t *ppos)
{
	struct rmt_reader *rd = file->private_data;
	size_t done = 0;
	int rc;

	if (!count)
		return 0;
	for (;;) {
		if (mutex_lock_interruptible(&rmt_read_lock))
			return done ? done : -ERESTARTSYS;
		while (done < count) {
			u32 n;

			if (rd->off == rd->len) {
				rd->len = rmt_take(rd->carry);
				if (!rd->len && rmt_detached() && !rd->ended) {
					rd->len = end_record(rd->carry);
					rd->ended = true;
				}
				rd->off = 0;
				if (!rd->len)
					break;
			}
			n = min_t(size_t, rd->len - rd->off, count - done);
			if (copy_to_user(ubuf + done, rd->carry + rd->off, n)) {
				mutex_unlock(&rmt_read_lock);
				return done ? done : -EFAULT;
			}
			rd->off += n;
			done += n;
		}
		mutex_unlock(&rmt_read_lock);
		if (done || rd->ended) /* after its STOP record, a detached reader's stream has ended: 0 */
			return done;
		if (file->f_flags & O_NONBLOCK)
			return -EAGAIN;
		rc = wait_event_interruptible(rmt_readq, rmt_pending() || rmt_detached());
		if (rc)
			return rc;
	}
}

static __poll_t rmt_poll(struct file *file, poll_table *wait)
{
	struct rmt_reader *rd = file->private_data;

	poll_wait(file, &rmt_readq, wait);
	if (rmt_detached()) /* what is left, then the STOP record, then the end */
		return EPOLLIN | EPOLLRDNORM | EPOLLHUP;
	return (rd->off < rd->len || rmt_pending()) ? EPOLLIN | EPOLLRDNORM : 0;
}

static long rmt_ioctl(struct file *file, unsigned int cmd, unsigned long arg)
{
	void __user *uarg = (void __user *)arg;

	if (rmt_detached() && cmd != RMT_IOC_STATS && cmd != RMT_IOC_PROBE_INFO)
		return -ENODEV; /* a detached module records nothing more */
	switch (cmd) {
	case RMT_IOC_STATS: {
		struct rmt_kmod_stats st;

		rmt_stats(&st);
		return copy_to_user(uarg, &st, sizeof(st)) ? -EFAULT : 0;
	}
	case RMT_IOC_SET_SOURCES: {
		u32 mask;

		if (get_user(mask, (u32 __user *)uarg))
			return -EFAULT;
		if (mask & ~RMT_SOURCES_ALL)
			return -EINVAL;
		rmt_set_sources(mask);
		return 0;
	}
	case RMT_IOC_ADD_PROBE: {
		struct rmt_probe_spec *spec = memdup_user(uarg, sizeof(*spec));
		int rc;

		if (IS_ERR(spec))
			return PTR_ERR(spec);
		rc = rmt_probe_add(spec);
		kfree(spec);
		return rc;
	}
	case RMT_IOC_CLEAR_PROBES:
		rmt_probes_clear();
		return 0;
	case RMT_IOC_PROBE_INFO: {
		struct rmt_probe_info info;
		int rc;

		if (copy_from_user(&info, uarg, sizeof(info)))
			return -EFAULT;
		rc = rmt_probe_info(&info);
		if (rc)
			return rc;
		return copy_to_user(uarg, &info, sizeof(info)) ? -EFAULT : 0;
	}
	}
	return -ENOTTY;
}

static const struct file_operations rmt_fops = {
	.owner = THIS_MODULE,
	.open = rmt_open,
	.release = rmt_release,
	.read = rmt_read,
	.poll = rmt_poll,
	.unlocked_ioctl = rmt_ioctl,
	.llseek = no_llseek,
};

static struct miscdevice rmt_misc = {
	.minor = MISC_DYNAMIC_MINOR,
	.name = "rmtrace",
	.fops = &rmt_fops,
	.mode = 0600,
};

int rmt_rings_init(void)
{
	int cpu;

	ring_size = roundup_pow_of_two((u64)max(rmt_ring_kb, 64u) << 10);
	rmt_max_record = min_t(u64, rmt_max_record, ring_size / 2);
	init_irq_work(&rmt_wake_work, rmt_wake);
	for_each_possible_cpu(cpu) {
		struct rmt_ring *r = per_cpu_ptr(&rmt_rings, cpu);

		r->data = vzalloc_node(ring_size, cpu_to_node(cpu));
		if (!r->data) {
			rmt_rings_exit();
			return -ENOMEM;
		}
	}
	return 0;
}

void rmt_rings_exit(void)
{
	int cpu;

	irq_work_sync(&rmt_wake_work);
	for_each_possible_cpu(cpu) {
		struct rmt_ring *r = per_cpu_ptr(&rmt_rings, cpu);

		vfree(r->data);
		r->data = NULL;
	}
}

int rmt_dev_init(void)
{
	return misc_register(&rmt_misc);
}

void rmt_dev_exit(void)
{
	misc_deregister(&rmt_misc);
}
