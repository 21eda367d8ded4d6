/*
 * shim_record.c: building one record in place in the thread's ring.
 *
 * A record is written straight into the ring at head as its buffers are
 * read: each buffer's bytes are copied from the program into the ring (a
 * pointer inside one is then read back from there, shim_view), its
 * struct rmt_buffer is put before them, and the struct rmt_record header goes
 * first once the size is known; one store-release of head publishes it (the
 * pairing is tabled in rmtrace_ring.h).  Room is reserved as the record
 * grows, so nothing is copied twice.  A record never exceeds max_record =
 * ring_size / 2; buffers that would are cut (TRUNCATED) and counted in
 * trunc_big.
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

/* The two pieces of n ring bytes at never-wrapped position pos. */
static size_t ring_split(const struct shim_thread *t, uint64_t pos, size_t n, uint8_t **first)
{
	size_t off = (size_t)(pos & t->mask), room = t->mask + 1 - off;
	*first = t->data + off;
	return room < n ? room : n;
}

void ring_write(struct shim_thread *t, uint64_t pos, const void *src, size_t n)
{
	uint8_t *dst;
	size_t first = ring_split(t, pos, n, &dst);
	memcpy(dst, src, first);
	if (n > first)
		memcpy(t->data, (const uint8_t *)src + first, n - first);
}

static void ring_read(const struct shim_thread *t, uint64_t pos, void *dst, size_t n)
{
	uint8_t *src;
	size_t first = ring_split(t, pos, n, &src);
	memcpy(dst, src, first);
	if (n > first)
		memcpy((uint8_t *)dst + first, t->data, n - first);
}

static void ring_zero(struct shim_thread *t, uint64_t pos, size_t n)
{
	static const uint8_t zeros[8];
	ring_write(t, pos, zeros, n);
}

/* n bytes of the program's memory at addr into the ring at pos: the read path used, or -1. */
static int ring_read_user(struct shim_thread *t, uint64_t pos, uint64_t addr, size_t n)
{
	uint8_t *dst;
	size_t first = ring_split(t, pos, n, &dst);
	int how = shim_read(t, dst, addr, first);
	if (how >= 0 && n > first) {
		int rest = shim_read(t, t->data, addr + first, n - first);
		how = rest < 0 ? rest : how > rest ? how : rest;
	}
	return how;
}

void ring_commit(struct shim_thread *t, uint64_t pos)
{
	t->head = pos;
	__atomic_store_n(&t->ctl->head, pos, __ATOMIC_RELEASE);
}

/* ------------------------------------------------------------------ views */

uint64_t view_load(const struct shim_rec *r, const struct shim_view *v, uint32_t off, unsigned n)
{
	uint64_t value = 0;
	if (off > v->len || n > v->len - off || n > sizeof(value))
		return 0;
	ring_read(r->t, v->pos + off, &value, n); /* little-endian host */
	return value;
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
	r->cut = 0;
	r->dropped = 0;
}

/* Ring room for the record so far plus extra bytes; 0, or -1 (the record is dropped). */
static int rec_room(struct shim_rec *r, uint32_t extra)
{
	if (!r->dropped && ring_reserve(r->t, r->size + extra) != 0)
		r->dropped = 1;
	return r->dropped ? -1 : 0;
}

/* A new buffer for n bytes: how many it takes (*take, cut to the limits); 0, or -1 when it cannot be
 * added at all (too many buffers, the record at its limit, no room in the ring). */
static int rec_open(struct shim_rec *r, uint64_t n, uint32_t *take)
{
	uint64_t room, want = n;

	*take = 0;
	if (r->dropped)
		return -1;
	if (r->nbufs >= SHIM_MAX_BUFS || r->size + sizeof(struct rmt_buffer) > shim_proc.max_record) {
		r->flags |= RMT_RF_TRUNCATED;
		return -1;
	}
	room = (shim_proc.max_record - r->size - sizeof(struct rmt_buffer)) & ~7ull;
	if (want > shim_proc.max_buffer)
		want = shim_proc.max_buffer;
	if (want > room) {
		want = room;
		if (!r->cut) {
			r->cut = 1;
			ring_count(&r->t->ctl->trunc_big);
		}
	}
	*take = (uint32_t)want;
	return rec_room(r, (uint32_t)sizeof(struct rmt_buffer) + ALIGN8(*take));
}

/* Where the data of the buffer being added goes. */
static uint64_t rec_data_pos(const struct shim_rec *r)
{
	return r->t->head + r->size + sizeof(struct rmt_buffer);
}

/* The buffer's header (and padding) after its data is in place; the record grows by it. */
static struct shim_view rec_close(struct shim_rec *r, uint16_t role, uint8_t when, uint8_t flags, uint32_t len,
				  uint64_t addr, uint64_t n, uint32_t slot)
{
	uint64_t at = r->t->head + r->size;
	struct rmt_buffer bh = { role, when, flags, len, addr, n > UINT32_MAX ? UINT32_MAX : (uint32_t)n, slot };
	struct shim_view v = { at + sizeof(bh), len };

	if (flags & RMT_BF_TRUNCATED)
		r->flags |= RMT_RF_TRUNCATED;
	if (flags & RMT_BF_UNREADABLE)
		r->flags |= RMT_RF_UNREADABLE;
	ring_write(r->t, at, &bh, sizeof(bh));
	if (ALIGN8(len) > len)
		ring_zero(r->t, v.pos + len, ALIGN8(len) - len);
	r->size += (uint32_t)sizeof(bh) + ALIGN8(len);
	r->nbufs++;
	return v;
}

int rec_add_local(struct shim_rec *r, uint16_t role, uint8_t when, uint32_t slot, const void *src, uint64_t n)
{
	uint32_t take;

	if (rec_open(r, n, &take) != 0)
		return -1;
	ring_write(r->t, rec_data_pos(r), src, take);
	rec_close(r, role, when, take < n ? RMT_BF_TRUNCATED : 0, take, 0, n, slot);
	return 0;
}

int rec_add_user(struct shim_rec *r, uint16_t role, uint8_t when, uint32_t slot, uint64_t addr, uint64_t n,
		 struct shim_view *view)
{
	struct shim_thread *t = r->t;
	uint8_t flags;
	uint32_t take;
	int how;

	view->len = 0;
	if (rec_open(r, n, &take) != 0)
		return -1;
	flags = take < n ? RMT_BF_TRUNCATED : 0;
	if (n == 0) {
		*view = rec_close(r, role, when, flags, 0, addr, n, slot); /* an empty buffer, as the program gave it */
		return -1;
	}
	how = addr == 0 ? -1 : take ? ring_read_user(t, rec_data_pos(r), addr, take) : SHIM_READ_COPY;
	if (how < 0) {
		ring_count(&t->ctl->read_unreadable);
		*view = rec_close(r, role, when, flags | RMT_BF_UNREADABLE, 0, addr, n, slot);
		return -1;
	}
	if (take)
		ring_count(how == SHIM_READ_COPY ? &t->ctl->read_copy : &t->ctl->read_syscall);
	*view = rec_close(r, role, when, flags, take, addr, n, slot);
	return take ? 0 : -1;
}

int rec_emit(struct shim_rec *r)
{
	struct shim_thread *t = r->t;
	struct rmt_record h;

	if (rec_room(r, 0) != 0)
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
	ring_write(t, t->head, &h, sizeof(h));
	ring_commit(t, t->head + r->size);
	return 0;
}
