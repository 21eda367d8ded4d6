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
 *
 * The producer maps the ring's data area followed by its first max_record
 * bytes again (the same pages, shim_state.c), so a record that runs past the
 * end goes on in that mirror: every record is one contiguous piece of the
 * producer's memory, written and read back with plain stores and loads (the
 * recorder sees the wrap and bounce-copies it).
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
	ring_add(counter, 1);
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
SHIM_COLD int ring_reserve(struct shim_thread *t, uint32_t size)
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

/* ------------------------------------------------------------------ records */

/* Ring room for the record so far plus extra bytes; 0, or -1 (the record is dropped). */
static inline int rec_room(struct shim_rec *r, uint32_t extra)
{
	struct shim_thread *t = r->t;

	if (likely(!r->dropped && t->head + r->size + extra - t->tail_seen <= shim_proc.ring_size))
		return 0; /* the tail seen last time says there is room: no need to look at the consumer's line */
	if (!r->dropped && ring_reserve(t, r->size + extra) != 0) {
		r->dropped = 1;
		r->fast_end = 0;
	}
	return r->dropped ? -1 : 0;
}

SHIM_COLD uint32_t rec_fast_slow(struct shim_rec *r)
{
	struct shim_thread *t = r->t;

	if (r->dropped || t->faults != FAULTS_DELIVERED || !__atomic_load_n(&shim_proc.guard_on, __ATOMIC_RELAXED))
		return 0;
	if (t->head + SHIM_FAST_ROOM > t->populated)
		ring_populate(t);
	/* Once every ring_size - SHIM_FAST_ROOM bytes while the recorder keeps up: its tail, a line it writes. */
	t->tail_seen = __atomic_load_n(&t->ctl->tail, __ATOMIC_ACQUIRE);
	if (t->tail_seen > t->head || t->head + SHIM_FAST_ROOM - t->tail_seen > shim_proc.ring_size)
		return 0; /* a tail we never wrote, or a ring that is full: the careful way decides */
	return shim_proc.fast_end;
}

/* A new buffer for n bytes: where its data goes, and how many bytes it takes (*take, cut to the
 * limits); NULL when it cannot be added at all (too many buffers, the record at its limit, no room). */
SHIM_COLD static uint8_t *rec_open(struct shim_rec *r, uint64_t n, uint32_t *take)
{
	uint64_t room, want = n;

	*take = 0;
	if (r->dropped)
		return NULL;
	if (r->nbufs >= SHIM_MAX_BUFS || r->size + sizeof(struct rmt_buffer) > shim_proc.max_record) {
		r->flags |= RMT_RF_TRUNCATED;
		return NULL;
	}
	room = (shim_proc.max_record - r->size - sizeof(struct rmt_buffer)) & ~7ull;
	if (want > shim_proc.max_buffer)
		want = shim_proc.max_buffer;
	if (unlikely(want > room)) {
		want = room;
		if (!r->cut) {
			r->cut = 1;
			ring_count(&r->t->ctl->trunc_big);
		}
	}
	*take = (uint32_t)want;
	if (rec_room(r, (uint32_t)sizeof(struct rmt_buffer) + ALIGN8(*take)) != 0)
		return NULL;
	return r->base + r->size + sizeof(struct rmt_buffer);
}

int rec_add_local(struct shim_rec *r, uint16_t role, uint8_t when, uint32_t slot, const void *src, uint64_t n)
{
	uint32_t take;
	uint8_t *dst = rec_open(r, n, &take);

	if (!dst)
		return -1;
	rec_pad(dst, take);
	memcpy(dst, src, take);
	rec_close(r, role, when, take < n ? RMT_BF_TRUNCATED : 0, take, 0, n, slot);
	return 0;
}

SHIM_COLD int rec_add_user_slow(struct shim_rec *r, uint16_t role, uint8_t when, uint32_t slot, uint64_t addr,
				 uint64_t n, struct shim_view *view)
{
	struct shim_thread *t = r->t;
	uint8_t flags, *dst;
	uint32_t take;
	int how;

	dst = rec_open(r, n, &take);
	view->len = 0;
	if (!dst)
		return -1;
	flags = take < n ? RMT_BF_TRUNCATED : 0;
	if (n == 0) {
		*view = rec_close(r, role, when, flags, 0, addr, n, slot); /* an empty buffer, as the program gave it */
		return -1;
	}
	rec_pad(dst, take);
	how = addr == 0 ? -1 : take ? shim_read(t, dst, addr, take) : SHIM_READ_COPY;
	if (how < 0) {
		r->reads[SHIM_READ_UNREADABLE]++;
		*view = rec_close(r, role, when, flags | RMT_BF_UNREADABLE, 0, addr, n, slot);
		return -1;
	}
	if (take)
		r->reads[how]++;
	*view = rec_close(r, role, when, flags, take, addr, n, slot);
	return take ? 0 : -1;
}

SHIM_HOT void rec_stamp(struct shim_rec *r)
{
	r->time_ns = ring_stamp(r->t);
}

/* Ticks a sample may take from its first rdtsc to its second (a clock_gettime is about a hundred): a
 * pair further apart was interrupted in between, and its ns may lie anywhere between its ticks.
 * 256 ticks bound a sample's own error to ~50 ns at 2.5 GHz. */
#define SYNC_GAP 256
#define SYNC_TRIES 3
/* The rate is measured from a base sample at least RATE_BASE_MIN ticks (4 spans) older, so that the
 * samples' own error moves an extrapolation by at most half as much again; until then the
 * thread reads the clock.  The base moves up once it is RATE_BASE_MAX old (~1.5 s), the rate kept,
 * so that the rate follows the kernel's (NTP) adjustments of CLOCK_MONOTONIC. */
#define RATE_BASE_MIN (1ull << 25)
#define RATE_BASE_MAX (1ull << 32)

/* shim_now's way once every SHIM_TSC_SPAN ticks (and in a thread's first RATE_BASE_MIN ticks):
 * CLOCK_MONOTONIC read between two rdtsc, the tightest of a few tries; that pair becomes the thread's
 * sample, and the rate since the base sample is what shim_now extrapolates with until the next. */
SHIM_COLD uint64_t shim_now_sync(struct shim_thread *t, uint64_t tsc)
{
	uint64_t ns = 0, mid = 0, gap = UINT64_MAX;
	int i;

	if (t->base_tsc && !t->clk_mult && tsc - t->base_tsc < RATE_BASE_MIN) {
		ns = shim_monotonic(); /* no rate yet, and no sample needed until the base is old enough */
		return ns > t->last_ns ? ns : t->last_ns;
	}
	for (i = 0; i < SYNC_TRIES && gap >= SYNC_GAP / 2; i++) {
		uint64_t before = i ? shim_rdtsc() : tsc, now = shim_monotonic(), after = shim_rdtsc();
		if (after - before < gap) {
			gap = after - before;
			ns = now;
			mid = before + gap / 2;
		}
	}
	if (gap < SYNC_GAP) {
		if (!t->base_tsc || mid <= t->base_tsc || ns <= t->base_ns) {
			t->base_tsc = mid;
			t->base_ns = ns;
		} else if (mid - t->base_tsc >= RATE_BASE_MIN) {
			t->clk_mult = (uint64_t)(((unsigned __int128)(ns - t->base_ns) << 32) / (mid - t->base_tsc));
			if (mid - t->base_tsc > RATE_BASE_MAX) {
				t->base_tsc = mid;
				t->base_ns = ns;
			}
		}
		t->clk_tsc = mid;
		t->clk_ns = ns;
	}
	return ns > t->last_ns ? ns : t->last_ns;
}

#ifdef RMTRACE_TEST_HOOKS
SHIM_COLD void test_stall(uint16_t source, uint32_t op)
{
	if (source == RMT_SRC_RM && op == shim_proc.test_stall_op) {
		struct timespec ts = { shim_proc.test_stall_ms / 1000, (long)(shim_proc.test_stall_ms % 1000) * 1000000L };
		syscall(SYS_nanosleep, &ts, NULL);
	}
}
#endif

/* The reads by the slow paths into the ring's counters (rec_emit counts the copies): once a record,
 * not once a buffer. */
SHIM_COLD void rec_count_slow(const struct shim_rec *r)
{
	ring_add(&r->t->ctl->read_syscall, r->reads[SHIM_READ_SYSCALL]);
	ring_add(&r->t->ctl->read_unreadable, r->reads[SHIM_READ_UNREADABLE]);
}

SHIM_COLD int rec_emit_room(struct shim_rec *r)
{
	if (rec_room(r, 0) == 0)
		return 0;
	__atomic_store_n(&r->t->ctl->writing, 0, __ATOMIC_RELAXED); /* (lossy) dropped: what rec_stamp announced ends here */
	return -1;
}
