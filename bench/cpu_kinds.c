/*
 * cpu_kinds.c: what kind of CPU each of this machine's CPUs is, for the shim's cost (on the H200 an
 * RM control costs ~2.4 us on some CPUs and ~3.7 us on others, and capture adds ~100 ns more on the
 * slower: bench/results/record_overhead-h200.md).  Is it where memory lies (pages first touched on
 * another node, which the shim could change) or the CPU itself (which it cannot)?
 *
 *   cpu_kinds            per CPU, pinned: ns per step of a dependent add chain (the clock),
 *                        per getppid (a bare system call), and per load of a pointer chase over
 *                        256 KiB, 16 MiB and 256 MiB (L2, L3, memory), the buffers touched first
 *                        by that same CPU
 *   then                 the 256 MiB chase with the buffer touched first by CPU A and chased by B,
 *                        A and B each a fast and a slow CPU (FAST, SLOW: default 2 and 0): if
 *                        the toucher moves the cost, placement matters
 *   then                 one cache line bounced between FAST (and SLOW) and each CPU: ns per
 *                        round trip (what a line shared by the recorder and the traced thread costs)
 *
 * Each line is printed as measured (a run that is killed keeps what it printed).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static uint64_t now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void pin(int cpu)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set) != 0) {
		perror("sched_setaffinity");
		exit(1);
	}
}

static double add_chain(void)
{
	volatile uint64_t sink;
	uint64_t x = 1, steps = 50000000, t0 = now();
	for (uint64_t i = 0; i < steps; i++)
		__asm__ volatile("add %1, %0" : "+r"(x) : "r"(i)); /* one dependent add a step: a clock */
	sink = x;
	(void)sink;
	return (double)(now() - t0) / (double)steps;
}

static double syscall_ns(void)
{
	int n = 200000;
	uint64_t t0 = now();
	for (int i = 0; i < n; i++)
		syscall(SYS_getppid);
	return (double)(now() - t0) / n;
}

/* A random cyclic chain of cache-line-sized steps over BYTES, written (first touched) by the caller. */
static uintptr_t *chain(size_t bytes)
{
	size_t lines = bytes / 64, *order = malloc(lines * sizeof(size_t));
	uintptr_t *buf = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (buf == MAP_FAILED || !order) {
		perror("chain");
		exit(1);
	}
	for (size_t i = 0; i < lines; i++)
		order[i] = i;
	srand(1);
	for (size_t i = lines - 1; i > 0; i--) {
		size_t j = ((size_t)rand() * RAND_MAX + (size_t)rand()) % (i + 1), t = order[i];
		order[i] = order[j];
		order[j] = t;
	}
	for (size_t i = 0; i < lines; i++)
		buf[order[i] * 8] = (uintptr_t)&buf[order[(i + 1) % lines] * 8];
	free(order);
	return buf;
}

static double chase(uintptr_t *buf, long steps)
{
	volatile uintptr_t sink;
	uintptr_t *p = buf;
	for (long i = 0; i < steps / 4; i++) /* warm the TLB and caches that can hold it */
		p = (uintptr_t *)*p;
	uint64_t t0 = now();
	for (long i = 0; i < steps; i++)
		p = (uintptr_t *)*p;
	sink = (uintptr_t)p;
	(void)sink;
	return (double)(now() - t0) / (double)steps;
}

static volatile uint64_t line __attribute__((aligned(64)));
static volatile int stop;

static void *echo(void *arg)
{
	pin(*(int *)arg);
	while (!stop) {
		uint64_t v = line;
		if (v & 1)
			line = v + 1; /* odd: the other side's turn was ours; answer */
	}
	return NULL;
}

static double bounce(int a, int b)
{
	pthread_t th;
	int n = 100000;
	pin(a);
	line = 0;
	stop = 0;
	pthread_create(&th, NULL, echo, &b);
	for (int i = 0; i < 1000; i++) { /* until the echo runs */
		line = line + 1;
		while (line & 1)
			;
	}
	uint64_t t0 = now();
	for (int i = 0; i < n; i++) {
		line = line + 1;
		while (line & 1)
			;
	}
	double ns = (double)(now() - t0) / n;
	stop = 1;
	pthread_join(th, NULL);
	return ns;
}

int main(void)
{
	int cpus = (int)sysconf(_SC_NPROCESSORS_ONLN);
	int fast = getenv("FAST") ? atoi(getenv("FAST")) : 2, slow = getenv("SLOW") ? atoi(getenv("SLOW")) : 0;
	static const size_t sizes[] = {256u << 10, 16u << 20, 256u << 20};

	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("# cpu add_ns getppid_ns chase_256K_ns chase_16M_ns chase_256M_ns (each CPU's own buffers)\n");
	for (int cpu = 0; cpu < cpus; cpu++) {
		pin(cpu);
		printf("%d %.3f %.1f", cpu, add_chain(), syscall_ns());
		for (int s = 0; s < 3; s++) {
			uintptr_t *buf = chain(sizes[s]);
			printf(" %.1f", chase(buf, 2000000));
			munmap(buf, sizes[s]);
		}
		printf("\n");
	}
	printf("# 256 MiB chase: touched first by CPU A, chased by CPU B (ns per load)\n");
	int who[2] = {fast, slow};
	for (int a = 0; a < 2; a++) {
		pin(who[a]);
		uintptr_t *buf = chain(sizes[2]);
		for (int b = 0; b < 2; b++) {
			pin(who[b]);
			printf("touched %d chased %d %.1f\n", who[a], who[b], chase(buf, 2000000));
		}
		munmap(buf, sizes[2]);
	}
	printf("# one cache line bounced: ns per round trip from A to B\n");
	for (int a = 0; a < 2; a++)
		for (int cpu = 0; cpu < cpus; cpu++)
			if (cpu != who[a])
				printf("bounce %d %d %.1f\n", who[a], cpu, bounce(who[a], cpu));
	return 0;
}
