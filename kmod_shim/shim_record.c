/*
 * shim_record.c: building one record and writing it into the thread's ring.
 *
 * A record is assembled in the thread's scratch area (buffers read from the
 * program land there first, so a pointer found inside one can be followed),
 * then copied into the ring in one reservation and published by one
 * store-release of head (the pairing is tabled in rmtrace_ring.h).  A record
 * never exceeds max_record = ring_size / 2; buffers that would are cut
 * (TRUNCATED) and counted in trunc_big.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "shim.h"

#define ALIGN8(n) (((n) + 7u) & ~7u)

/* ------------------------------------------------------------------ ring */

void ring_count(uint64_t *counter)
{
	/* Only the ring's own thread writes its counters. */
	__atomic_store_n(counter, __atomic_load_n(counter, __ATOMIC_RELAXED) + 1, __ATOMIC_RELAXED);
}

static void ring_add(uint64_t *counter, uint64_t n)
{
	__atomic_store_n(counter, __atomic_load_n(counter, __ATOMIC_RELAXED) + n, __ATOMIC_RELAXED);
}

static int recorder_gone(void)
{
	pid_t pid = (pid_t)shim_proc.session->recorder_pid;
	return pid > 0 && kill(pid, 0) != 0 && errno == ESRCH;
}

static int recording(void)
{
	return __atomic_load_n(&shim_proc.session->state, __ATOMIC_RELAXED) == RMT_SESSION_RECORDING;
}

/* Room for size bytes at t->head: 0, or -1 when the record must be dropped.
 * Lossless mode sleeps and polls (20 us doubling to 1 ms) until the
 * recorder has consumed enough; it gives up only when recording stopped or
 * the recorder is gone, so a traced program never hangs on a dead recorder. */
int ring_reserve(struct shim_thread *t, uint32_t size)
{
	struct rmt_ring_ctl *ctl = t->ctl;
	long delay_ns = 20000, since_check = 0;
	int saved = errno;

	/* The tail seen last time is a safe under-estimate (tail only grows):
	 * reload it, a cache line the recorder writes, only when it says full. */
	if (t->head + size - t->tail_seen <= shim_proc.ring_size)
		return 0;
	for (;;) {
		uint64_t tail = __atomic_load_n(&ctl->tail, __ATOMIC_ACQUIRE);
		t->tail_seen = tail;
		if (tail > t->head) { /* a tail we never wrote: the ring is not ours to trust */
			ring_count(&ctl->lost_stopped);
			break;
		}
		if (t->head + size - tail <= shim_proc.ring_size) {
			errno = saved;
			return 0;
		}
		if (shim_proc.lossy) {
			ring_count(&ctl->lost_full);
			break;
		}
		if (!recording()) {
			ring_count(&ctl->lost_stopped);
			break;
		}
		if (since_check >= 10000000) {
			since_check = 0;
			if (recorder_gone()) {
				__atomic_store_n(&shim_proc.session->state, RMT_SESSION_STOPPED, __ATOMIC_RELAXED);
				continue;
			}
		}
		struct timespec ts = { 0, delay_ns };
		syscall(SYS_nanosleep, &ts, NULL);
		ring_count(&ctl->waits);
		ring_add(&ctl->wait_ns, (uint64_t)delay_ns);
		since_check += delay_ns;
		if (delay_ns < 1000000)
			delay_ns *= 2;
	}
	errno = saved;
	return -1;
}

void ring_write(struct shim_thread *t, uint64_t *pos, const void *src, size_t n)
{
	size_t off = (size_t)(*pos & t->mask), first = t->mask + 1 - off;
	if (first > n)
		first = n;
	memcpy(t->data + off, src, first);
	if (n > first)
		memcpy(t->data, (const uint8_t *)src + first, n - first);
	*pos += n;
}

void ring_zero(struct shim_thread *t, uint64_t *pos, size_t n)
{
	static const uint8_t zeros[8];
	ring_write(t, pos, zeros, n);
}

void ring_commit(struct shim_thread *t, uint64_t pos)
{
	t->head = pos;
	__atomic_store_n(&t->ctl->head, pos, __ATOMIC_RELEASE);
}

/* ------------------------------------------------------------------ records */

void rec_init(struct shim_rec *r, struct shim_thread *t, uint16_t source, uint8_t phase, uint32_t op, int fd,
	      uint64_t call_id)
{
	r->t = t;
	r->source = source;
	r->phase = phase;
	r->flags = 0;
	r->op = op;
	r->fd = fd;
	r->ret = 0;
	r->err = 0;
	r->call_id = call_id;
	r->time_ns = 0;
	r->nbufs = 0;
	r->size = sizeof(struct rmt_record);
	r->used = 0;
	r->cut = 0;
}

/* A new buffer slot and how many of n bytes fit in it (0 when none). */
static struct shim_buf *rec_slot(struct shim_rec *r, uint16_t role, uint8_t when, uint32_t slot, uint64_t addr,
				 uint64_t n, uint32_t *take)
{
	struct shim_buf *b;
	uint64_t room, want = n;

	*take = 0;
	if (r->nbufs >= SHIM_MAX_BUFS || r->size + sizeof(struct rmt_buffer) > shim_proc.max_record) {
		r->flags |= RMT_RF_TRUNCATED;
		return NULL;
	}
	b = &r->buf[r->nbufs++];
	b->role = role;
	b->when = when;
	b->flags = 0;
	b->len = 0;
	b->addr = addr;
	b->orig_len = n > UINT32_MAX ? UINT32_MAX : (uint32_t)n;
	b->slot = slot;
	b->data = NULL;
	r->size += sizeof(struct rmt_buffer);
	room = (shim_proc.max_record - r->size) & ~7ull;
	if (want > shim_proc.max_buffer)
		want = shim_proc.max_buffer;
	if (want > room) {
		want = room;
		if (!r->cut) {
			r->cut = 1;
			ring_count(&r->t->ctl->trunc_big);
		}
	}
	if (want < n) {
		b->flags |= RMT_BF_TRUNCATED;
		r->flags |= RMT_RF_TRUNCATED;
	}
	*take = (uint32_t)want;
	return b;
}

static const uint8_t *rec_fill(struct shim_rec *r, struct shim_buf *b, uint32_t take)
{
	b->len = take;
	b->data = r->t->scratch + r->used;
	r->used += ALIGN8(take);
	r->size += ALIGN8(take);
	return b->data;
}

const uint8_t *rec_add_local(struct shim_rec *r, uint16_t role, uint8_t when, uint32_t slot, const void *src,
			     uint64_t n)
{
	uint32_t take;
	struct shim_buf *b = rec_slot(r, role, when, slot, 0, n, &take);
	if (!b || take == 0)
		return NULL;
	memcpy(r->t->scratch + r->used, src, take);
	return rec_fill(r, b, take);
}

const uint8_t *rec_add_user(struct shim_rec *r, uint16_t role, uint8_t when, uint32_t slot, uint64_t addr,
			    uint64_t n, uint32_t *got)
{
	uint32_t take;
	struct shim_buf *b = rec_slot(r, role, when, slot, addr, n, &take);

	if (got)
		*got = 0;
	if (!b || n == 0)
		return NULL;
	if (addr == 0 || (take && shim_read(r->t, r->t->scratch + r->used, addr, take) != 0)) {
		b->flags |= RMT_BF_UNREADABLE;
		r->flags |= RMT_RF_UNREADABLE;
		return NULL;
	}
	if (take == 0)
		return NULL;
	if (got)
		*got = take;
	return rec_fill(r, b, take);
}

int rec_emit(struct shim_rec *r)
{
	struct shim_thread *t = r->t;
	struct rmt_record h;
	uint64_t pos;
	uint16_t i;

	if (ring_reserve(t, r->size) != 0)
		return -1;
	memset(&h, 0, sizeof(h));
	h.magic = RMT_RECORD_MAGIC;
	h.version = RMT_RECORD_VERSION;
	h.header_size = sizeof(h);
	h.total_len = r->size;
	h.source = r->source;
	h.phase = r->phase;
	h.flags = r->flags;
	h.time_ns = r->time_ns ? r->time_ns : shim_now();
	h.pid = (uint32_t)shim_proc.pid;
	h.tid = t->tid;
	h.call_id = r->call_id;
	h.op = r->op;
	h.fd = r->fd;
	h.ret = r->ret;
	h.err = r->err;
	h.nbufs = r->nbufs;
	pos = t->head;
	ring_write(t, &pos, &h, sizeof(h));
	for (i = 0; i < r->nbufs; i++) {
		const struct shim_buf *b = &r->buf[i];
		struct rmt_buffer bh = { b->role, b->when, b->flags, b->len, b->addr, b->orig_len, b->slot };
		ring_write(t, &pos, &bh, sizeof(bh));
		if (b->len) {
			ring_write(t, &pos, b->data, b->len);
			ring_zero(t, &pos, ALIGN8(b->len) - b->len);
		}
	}
	ring_commit(t, pos);
	return 0;
}
