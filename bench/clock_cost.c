/*
 * clock_cost.c: what the shim's per-call primitives cost on this machine, as medians of
 * batches of 100 (bench/record_overhead.py prints them beside its figures).
 *
 *   clock_gettime(CLOCK_MONOTONIC)   the shim's two timestamps per ioctl (vDSO)
 *   rdtsc                            what a TSC timestamp would cost instead
 *   process_vm_readv of 64 bytes     the slow read path (a thread that blocks SIGSEGV)
 *   memcpy of 64 bytes               the fast one, less its fault handling (none when nothing faults)
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
	return 0;
}
