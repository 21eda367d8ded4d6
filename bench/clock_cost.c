/*
 * clock_cost.c: what the shim's per-call primitives cost on this machine, as medians of
 * batches of 100 (bench/record_overhead.py prints them beside its figures).
 *
 *   clock_gettime(CLOCK_MONOTONIC)   the shim's two timestamps per ioctl (vDSO)
 *   rdtsc                            what a TSC timestamp would cost instead
 *   process_vm_readv of 64 bytes     the slow read path (a thread that blocks SIGSEGV)
 *   memcpy of 64 bytes               the fast one, less its fault handling (none when nothing faults)
 *   an ioctl's two records           432 bytes written into a fresh 4 MiB shared ring (as the shim's,
 *                                    MAP_POPULATE), a system call after each: plain, with PREFETCHW
 *                                    of the lines 2 KiB ahead, and with the shim's PREFETCHW of the
 *                                    exit record's lines after the enter's (ring_prefetch_exit), each
 *                                    less the system calls
 */
#define _GNU_SOURCE
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
#define AHEAD 2048

/* ns per ioctl of writing its two records into a fresh ring (mode 1: prefetched ahead; mode 2: the exit's
 * lines prefetched after the enter is written; mode 0: plain; mode -1: the system calls alone) over one
 * ring written 1,000 ioctls deep. */
static double ring_writes(int mode)
{
	uint8_t rec[RECORD];
	uint8_t *d = mmap(NULL, RING, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	uint64_t head = 0, done = 0, t0, ns;

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
			for (; mode == 1 && done < head + AHEAD; done += 64)
				__asm__ volatile("prefetchw %0" : : "m"(d[done]));
			for (uint64_t at = head & ~63ull; mode == 2 && k == 0 && at < head + RECORD; at += 64)
				__asm__ volatile("prefetchw %0" : : "m"(d[at]));
			syscall(SYS_getppid);
		}
	}
	ns = now() - t0;
	munmap(d, RING);
	return ns / 1000.0;
}

/* The ways of ring_writes in alternating rounds, each round's less the system calls of the same round:
 * the median of 101 rounds of each, so that the CPU's changes of speed move every way alike. */
static void ring_ways(void)
{
	static const char *label[] = { "an ioctl's records, 432 bytes", "the same, prefetchw 2 KiB ahead",
				       "the same, exit's lines at the enter" };
	static double added[3][101];

	for (int b = 0; b < 101; b++) {
		double calls = ring_writes(-1);
		for (int mode = 0; mode < 3; mode++)
			added[mode][b] = ring_writes(mode) - calls;
	}
	for (int mode = 0; mode < 3; mode++) {
		qsort(added[mode], 101, sizeof(added[mode][0]), cmp_double);
		printf("%-34s %7.1f ns\n", label[mode], added[mode][50]);
	}
}

int main(void)
{
	struct timespec ts;
	char src[64] = { 1 }, dst[64];
	struct iovec local = { dst, sizeof(dst) }, remote = { src, sizeof(src) };
	pid_t self = getpid();

	MEDIAN("clock_gettime(CLOCK_MONOTONIC)", clock_gettime(CLOCK_MONOTONIC, &ts); sink += (uint64_t)ts.tv_nsec);
	MEDIAN("rdtsc", sink += __rdtsc());
	MEDIAN("process_vm_readv, 64 bytes", sink += (uint64_t)process_vm_readv(self, &local, 1, &remote, 1, 0));
	MEDIAN("memcpy, 64 bytes", memcpy(dst, src, sizeof(dst)); __asm__ volatile("" ::: "memory"); sink += dst[3]);
	ring_ways();
	return 0;
}
