/*
 * clock_cost.c: what the shim's per-call primitives cost on this machine, as medians of
 * batches of 100 (bench/record_overhead.py prints them beside its figures).
 *
 *   clock_gettime(CLOCK_MONOTONIC)   the shim's two timestamps per ioctl (vDSO)
 *   rdtsc                            what a TSC timestamp would cost instead
 *   process_vm_readv of 64 bytes     the slow read path (a thread that blocks SIGSEGV)
 *   memcpy of 64 bytes               the fast one, less its fault handling (none when nothing faults)
 *   an ioctl's two records           432 bytes written into a fresh 4 MiB shared ring (as the shim's,
 *                                    MAP_POPULATE), a system call after each, less the system calls
 *   the same, lapping                20,000 ioctls' records into one 4 MiB ring (two laps, as one bench
 *                                    process writes), by the writer's CPU time: nobody reading, a second
 *                                    thread reading behind as the recorder does (every 250 us: at a
 *                                    real ioctl's ~2.5 us that is ~45 KB behind, closer than the
 *                                    recorder's 2 ms) or spinning on head; and the same with
 *                                    non-temporal stores (MOVNTI, one SFENCE before head is published);
 *                                    and into a 1 MiB ring, which fits in a core's L2 (2 MiB here and on
 *                                    the H200), the 4 MiB one (rmtrace's default) not
 *
 * clock_cost [WRITER_CPU READER_CPU]: pin this thread and the reader (one core each, as the shim's thread
 * and the recorder on the H200 run: bench/h200_shim_ab.sh).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>

#define BATCHES 2001

static uint64_t now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static uint64_t r[BATCHES];
static volatile uint64_t sink;

#define MEDIAN(label, body)                                          \
	do {                                                         \
		for (int b = 0; b < BATCHES; b++) {                  \
			uint64_t t0 = now();                         \
			for (int i = 0; i < 100; i++) {              \
				body;                                \
			}                                            \
			r[b] = now() - t0;                           \
		}                                                    \
		qsort(r, BATCHES, sizeof(r[0]), cmp);                \
		printf("%-34s %7.1f ns\n", label, r[BATCHES / 2] / 100.0); \
	} while (0)

#define RING (4u << 20)
#define RECORD 216 /* an RM_CONTROL record: header, ARG and 64-byte PARAMS with their buffer headers */
#define LAPS_CALLS 20000 /* ioctls a lapping way writes: 8.6 MB, two laps of the ring, as one bench process */

/* ns per ioctl of writing its two records into a fresh ring (mode 0), or the system calls alone (mode -1),
 * over one ring written 1,000 ioctls deep. */
static double ring_writes(int mode)
{
	uint8_t rec[RECORD];
	uint8_t *d = mmap(NULL, RING, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	uint64_t head = 0, t0, ns;

	if (d == MAP_FAILED)
		exit(1);
	memset(rec, 7, sizeof(rec));
	t0 = now();
	for (int i = 0; i < 1000; i++) {
		for (int k = 0; k < 2; k++) {
			if (mode >= 0) {
				memcpy(d + head, rec, sizeof(rec));
				__asm__ volatile("" ::: "memory");
				head += sizeof(rec);
			}
			syscall(SYS_getppid);
		}
	}
	ns = now() - t0;
	munmap(d, RING);
	return ns / 1000.0;
}

/* The lapping ways: a ring of RING bytes written LAPS_CALLS ioctls deep (two records each, a system call
 * after each), head published after each record as the shim does, with or without a second thread
 * reading behind as the recorder does (every `lag_us`, it copies out what was published and stores tail;
 * the writer waits when the ring is full).  What matters to the writer is whether the lines it stores
 * into were last read by another core (a read-for-ownership from that core's cache) or are its own. */
enum store_kind { STORE_PLAIN, STORE_NT };
struct lap_ring {
	uint8_t *data;
	uint64_t size;              /* a power of two, at most RING */
	_Alignas(64) uint64_t head; /* the writer's line, as in struct rmt_ring_ctl */
	_Alignas(64) uint64_t tail; /* the reader's line */
	_Alignas(64) int stop;
	int lag_us;                 /* the reader's sleep between passes; -1: spin on head */
	int cpu;                    /* the reader's CPU, -1: any */
	uint64_t read_bytes;
};

static void *lap_reader(void *arg)
{
	struct lap_ring *r = arg;
	static uint8_t out[RING];
	uint64_t tail = 0;

	if (r->cpu >= 0) {
		cpu_set_t set;
		CPU_ZERO(&set);
		CPU_SET(r->cpu, &set);
		pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
	}
	while (!__atomic_load_n(&r->stop, __ATOMIC_ACQUIRE)) {
		uint64_t head = __atomic_load_n(&r->head, __ATOMIC_ACQUIRE);
		/* The bytes out, by whole lines (records are not line-aligned: a line holding the last one's end is
		 * read again with the next), as the recorder's bytes() reads them. */
		for (uint64_t at = tail & ~63ull; at < head; at += 64)
			memcpy(out + (at & (r->size - 1)), r->data + (at & (r->size - 1)), 64);
		tail = head;
		__atomic_store_n(&r->tail, tail, __ATOMIC_RELEASE);
		r->read_bytes = tail;
		if (r->lag_us > 0)
			usleep((useconds_t)r->lag_us);
	}
	return NULL;
}

/* One record into the ring at head: plain stores (memcpy), or non-temporal 8-byte stores (MOVNTI) with
 * one SFENCE before head is published, so that no line is read for ownership. */
static inline void lap_store(uint8_t *dst, const uint8_t *rec, enum store_kind kind)
{
	if (kind == STORE_PLAIN) {
		memcpy(dst, rec, RECORD);
		return;
	}
	for (int w = 0; w < RECORD / 8; w++) {
		long long v;
		memcpy(&v, rec + 8 * w, 8);
		_mm_stream_si64((long long *)(dst + 8 * w), v);
	}
	_mm_sfence();
}

/* Writer thread CPU ns per ioctl (its stores, its system calls, its waits for room) of one lapping run;
 * reader_lag: -2 no reader (the ring's tail follows head at once), -1 a reader spinning on head, else its
 * sleep in us.  mode -1: the system calls alone. */
static double ring_laps(int mode, enum store_kind kind, uint64_t size, int reader_lag, int reader_cpu)
{
	struct lap_ring r = { .size = size, .lag_us = reader_lag, .cpu = reader_cpu };
	uint8_t rec[RECORD];
	struct timespec a, b;
	pthread_t th;

	r.data = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (r.data == MAP_FAILED)
		exit(1);
	memset(rec, 7, sizeof(rec));
	if (reader_lag > -2)
		pthread_create(&th, NULL, lap_reader, &r);
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
	for (int i = 0; i < LAPS_CALLS; i++) {
		for (int k = 0; k < 2; k++) {
			if (mode >= 0) {
				uint64_t head = r.head;
				while (reader_lag > -2 && head + RECORD - __atomic_load_n(&r.tail, __ATOMIC_ACQUIRE) > size)
					usleep(20); /* full: the shim's lossless wait */
				/* Records never wrap here: the shim maps the first half again after the end. */
				if ((head & (size - 1)) + RECORD > size)
					head += size - (head & (size - 1));
				lap_store(r.data + (head & (size - 1)), rec, kind);
				__atomic_store_n(&r.head, head + RECORD, __ATOMIC_RELEASE);
			}
			syscall(SYS_getppid);
		}
	}
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
	__atomic_store_n(&r.stop, 1, __ATOMIC_RELEASE);
	if (reader_lag > -2)
		pthread_join(th, NULL);
	munmap(r.data, size);
	return ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / LAPS_CALLS;
}

/* The ways in alternating rounds, each round's less the system calls of the same round: the median of
 * 101 rounds of the fresh ring, of 31 of the lapping ways (each two laps of a 4 MiB ring). */
static void ring_ways(int reader_cpu)
{
	static const struct { const char *label; enum store_kind kind; uint64_t size; int lag; } lap[] = {
		{ "plain, two laps, nobody reading", STORE_PLAIN, RING, -2 },
		{ "plain, a reader every 250 us", STORE_PLAIN, RING, 250 },
		{ "plain, a reader spinning on head", STORE_PLAIN, RING, -1 },
		{ "MOVNTI+SFENCE, nobody reading", STORE_NT, RING, -2 },
		{ "MOVNTI+SFENCE, a reader every 250 us", STORE_NT, RING, 250 },
		{ "plain, 1 MiB ring, nobody reading", STORE_PLAIN, 1u << 20, -2 },
		{ "plain, 1 MiB ring, a reader every 250 us", STORE_PLAIN, 1u << 20, 250 },
	};
	enum { NLAP = sizeof(lap) / sizeof(lap[0]), LAP_ROUNDS = 31 };
	static double fresh[101], added[NLAP][LAP_ROUNDS];

	for (int b = 0; b < 101; b++)
		fresh[b] = ring_writes(0) - ring_writes(-1);
	qsort(fresh, 101, sizeof(fresh[0]), cmp_double);
	printf("%-34s %7.1f ns\n", "an ioctl's records, 432 bytes", fresh[50]);
	for (int b = 0; b < LAP_ROUNDS; b++) {
		double calls = ring_laps(-1, STORE_PLAIN, RING, -2, reader_cpu);
		for (int w = 0; w < NLAP; w++)
			added[w][b] = ring_laps(0, lap[w].kind, lap[w].size, lap[w].lag, reader_cpu) - calls;
	}
	printf("the same, %d ioctls into a 4 MiB ring (or 1 MiB), writer's CPU time, median [range]:\n", LAPS_CALLS);
	for (int w = 0; w < NLAP; w++) {
		qsort(added[w], LAP_ROUNDS, sizeof(added[w][0]), cmp_double);
		printf("  %-40s %7.1f ns [%.1f, %.1f]\n", lap[w].label, added[w][LAP_ROUNDS / 2], added[w][0],
		       added[w][LAP_ROUNDS - 1]);
	}
}

int main(int argc, char **argv)
{
	struct timespec ts;
	char src[64] = { 1 }, dst[64];
	struct iovec local = { dst, sizeof(dst) }, remote = { src, sizeof(src) };
	pid_t self = getpid();

	if (argc > 2) {
		cpu_set_t set;
		CPU_ZERO(&set);
		CPU_SET(atoi(argv[1]), &set);
		sched_setaffinity(0, sizeof(set), &set);
	}

	MEDIAN("clock_gettime(CLOCK_MONOTONIC)", clock_gettime(CLOCK_MONOTONIC, &ts); sink += (uint64_t)ts.tv_nsec);
	MEDIAN("rdtsc", sink += __rdtsc());
	MEDIAN("process_vm_readv, 64 bytes", sink += (uint64_t)process_vm_readv(self, &local, 1, &remote, 1, 0));
	MEDIAN("memcpy, 64 bytes", memcpy(dst, src, sizeof(dst)); __asm__ volatile("" ::: "memory"); sink += dst[3]);
	ring_ways(argc > 2 ? atoi(argv[2]) : -1);
	return 0;
}
