/*
 * rmprog.c: small programs that talk to the (fake) NVIDIA driver the way
 * libcuda does, for the capture tests.  Device paths come from
 * $RMTRACE_TEST_DEVICE_DIR.  Each scenario checks what the driver gave back
 * and exits non-zero with a message when something reached it wrong.
 *
 *   rmprog basic            every kind of buffer, dup'd and closed fds, mmap
 *   rmprog threads N M      N threads, M controls each
 *   rmprog fork             fork, exec, vfork, posix_spawn children
 *   rmprog child            (run by fork) one control on its own ctl fd
 *   rmprog block            a few controls, then an RM_FREE the driver never answers
 *   rmprog badptr           bad params, bad argument, PROT_NONE alloc params
 *   rmprog signals          its own SIGSEGV/SIGBUS handlers beside the shim's: bad pointers
 *                           never reach them, its own faults do; masks that block SIGSEGV
 *   rmprog segv             a fault of its own with no handler: it dies of SIGSEGV
 *   rmprog race             one thread makes controls while another makes one RM_FREE (which
 *                           the shim's test hook RMTRACE_TEST_STALL can hold between its time
 *                           and its publication); prints "race ok <controls>"
 *   rmprog many N [SIZE]    N controls with SIZE-byte params
 *   rmprog bench N [WHERE]  ns per control, traced fd vs untraced fd; WHERE: stack (default), heap,
 *                           nested (a pointed-to array), none (a pipe)
 *   rmprog steady N US LOG  N controls US microseconds apart, each numbered in its params; then
 *                           LOG gets "i enter_ns exit_ns" per call and a last line "done N"
 *   rmprog exit N           one control, then exit(N)
 *   rmprog kill             one control, then SIGTERM to itself
 *
 * With $RMPROG_TIME set it ends by printing "elapsed_ms <ms since main began>".
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define NV_IOCTL_MAGIC 'F'
#define ESC(nr, size) _IOC(_IOC_READ | _IOC_WRITE, NV_IOCTL_MAGIC, (nr), (size))
#define RM_FREE 0x29
#define RM_CONTROL 0x2a
#define RM_ALLOC 0x2b
#define CARD_INFO 200
#define XFER 211
#define UVM_INITIALIZE 0x30000001ul
#define UVM_PAGEABLE_MEM_ACCESS 39ul
#define CTRL_GET_CLASSLIST 0x00800201u
#define NV_ERR_INVALID_ADDRESS 0x1e

struct nvos54 { uint32_t hClient, hObject, cmd, flags; uint64_t params; uint32_t paramsSize, status; };
struct nvos21 { uint32_t hRoot, hParent, hNew, hClass; uint64_t pAllocParms; uint32_t paramsSize, status; };
struct nvos64 { uint32_t hRoot, hParent, hNew, hClass; uint64_t pAllocParms, pRights; uint32_t paramsSize, flags, status, pad; };
struct nvos00 { uint32_t hRoot, hParent, hOld, status; };
struct xfer { uint32_t cmd, size; uint64_t ptr; };
struct classlist { uint32_t numClasses, pad; uint64_t classList; };

static const char *dir;

static void fail(const char *what)
{
	fprintf(stderr, "rmprog: %s (errno %d)\n", what, errno);
	exit(99);
}

static int dev(const char *name)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	int fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		fail(path);
	return fd;
}

static uint32_t control(int fd, uint32_t cmd, void *params, uint32_t size)
{
	struct nvos54 c = { 0xc1d00001u, 0xc1d00001u, cmd, 0, (uint64_t)(uintptr_t)params, size, 0xffffffffu };
	if (ioctl(fd, ESC(RM_CONTROL, sizeof(c)), &c) != 0)
		fail("RM_CONTROL");
	return c.status;
}

static void check(int ok, const char *what)
{
	if (!ok)
		fail(what);
}

static void basic(void)
{
	int ctl = dev("nvidiactl"), gpu = dev("nvidia0"), uvm = dev("nvidia-uvm");
	uint8_t root_params[120] = { 7 }, alloc_params[56] = { 1 };
	uint32_t rights = 0x5, classes[5] = { 0 };
	struct nvos21 a21 = { 0, 0, 0, 0x41, (uint64_t)(uintptr_t)root_params, sizeof(root_params), 0xffffffffu };
	/* paramsSize 0, as libcuda passes it: RM reads the class's alloc params size (56 for NV01_DEVICE_0) */
	struct nvos64 a64 = { 0xc1d00001u, 0xc1d00001u, 0, 0x80, (uint64_t)(uintptr_t)alloc_params,
			      (uint64_t)(uintptr_t)&rights, 0, 0, 0xffffffffu, 0 };
	struct classlist cl = { 0, 0, 0 };
	uint8_t params[64], card[4 * 72];
	struct nvos54 inner = { 1, 2, 0x20800102u, 0, (uint64_t)(uintptr_t)params, sizeof(params), 0xffffffffu };
	struct xfer x = { RM_CONTROL, sizeof(inner), (uint64_t)(uintptr_t)&inner };
	struct { uint64_t flags; uint32_t rmStatus, pad; } init = { 0, 0xffffffffu, 0 };
	struct { uint8_t pageableMemAccess, pad[3]; uint32_t rmStatus; } pageable = { 0, { 0 }, 0xffffffffu };
	int pipefd[2], avail = 0;
	void *map;

	check(ioctl(ctl, ESC(RM_ALLOC, sizeof(a21)), &a21) == 0 && a21.status == 0 && a21.hNew, "RM_ALLOC NVOS21");
	check(root_params[0] == (7 ^ 0x80), "RM_ALLOC params written back");
	check(ioctl(ctl, ESC(RM_ALLOC, sizeof(a64)), &a64) == 0 && a64.status == 0, "RM_ALLOC NVOS64");
	/* GET_CLASSLIST twice, as libcuda does: the count, then the list (a nested pointer) */
	check(control(ctl, CTRL_GET_CLASSLIST, &cl, sizeof(cl)) == 0 && cl.numClasses == 5, "classlist count");
	cl.classList = (uint64_t)(uintptr_t)classes;
	check(control(ctl, CTRL_GET_CLASSLIST, &cl, sizeof(cl)) == 0 && classes[4] == 0xc004, "classlist list");
	memset(params, 0x10, sizeof(params));
	check(ioctl(gpu, ESC(XFER, sizeof(x)), &x) == 0 && inner.status == 0 && params[0] == 0x11, "XFER control");
	check(ioctl(ctl, ESC(CARD_INFO, sizeof(card)), card) == 0 && card[0] == 1, "CARD_INFO");
	check(ioctl(uvm, UVM_INITIALIZE, &init) == 0 && init.rmStatus == 0, "UVM_INITIALIZE");
	check(ioctl(uvm, UVM_PAGEABLE_MEM_ACCESS, &pageable) == 0 && pageable.pageableMemAccess == 1 &&
	      pageable.rmStatus == 0, "UVM_PAGEABLE_MEM_ACCESS");
	map = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, gpu, 0);
	check(map != MAP_FAILED, "mmap");
	check(munmap(map, 4096) == 0, "munmap");
	/* dup'd fds are the same device; a closed fd is nothing */
	int d1 = dup(ctl), d2 = fcntl(ctl, F_DUPFD_CLOEXEC, 100), d3 = dup2(gpu, 77);
	check(d1 >= 0 && d2 >= 100 && d3 == 77, "dup");
	check(control(d1, 0x20800102u, params, 16) == 0, "control on dup");
	check(control(d2, 0x20800102u, params, 16) == 0, "control on F_DUPFD");
	check(control(d3, 0x20800102u, params, 16) == 0, "control on dup2");
	close(d1);
	struct nvos54 c = { 1, 1, 0x20800102u, 0, (uint64_t)(uintptr_t)params, 16, 0 };
	errno = 0;
	check(ioctl(d1, ESC(RM_CONTROL, sizeof(c)), &c) == -1 && errno == EBADF, "closed fd gives EBADF");
	/* an ioctl on something else entirely is not ours */
	check(pipe(pipefd) == 0 && ioctl(pipefd[0], FIONREAD, &avail) == 0 && avail == 0, "pipe FIONREAD");
	close(pipefd[0]);
	close(pipefd[1]);
	close(d2);
	close(d3);
	close(uvm);
	close(gpu);
	close(ctl);
	puts("basic ok");
}

struct worker { int fd, n; };

static void *work(void *arg)
{
	struct worker *w = arg;
	uint8_t params[32];
	for (int i = 0; i < w->n; i++) {
		memset(params, i, sizeof(params));
		if (control(w->fd, 0x20800102u, params, sizeof(params)) != 0 || params[0] != (uint8_t)(i + 1))
			fail("thread control");
	}
	return NULL;
}

static void threads(int n, int m)
{
	pthread_t t[256];
	struct worker w = { dev("nvidiactl"), m };
	for (int i = 0; i < n; i++)
		pthread_create(&t[i], NULL, work, &w);
	for (int i = 0; i < n; i++)
		pthread_join(t[i], NULL);
	printf("threads ok %d\n", n * m);
}

struct race { int fd; int started, freed; };

static void *race_controls(void *arg)
{
	struct race *r = arg;
	uint8_t params[8];
	int n = 0;
	do { /* a control a millisecond until the free has returned, and one before it starts */
		struct timespec ms = { 0, 1000000 };
		if (n)
			nanosleep(&ms, NULL);
		memset(params, 0, sizeof(params));
		check(control(r->fd, 0x20800102u, params, sizeof(params)) == 0, "race control");
		__atomic_store_n(&r->started, 1, __ATOMIC_RELEASE);
		n++;
	} while (!__atomic_load_n(&r->freed, __ATOMIC_ACQUIRE));
	return (void *)(intptr_t)n;
}

static void race(void)
{
	struct race r = { dev("nvidiactl"), 0, 0 };
	struct nvos00 f = { 1, 1, 2, 0xffffffffu };
	pthread_t t;
	void *n;

	pthread_create(&t, NULL, race_controls, &r);
	while (!__atomic_load_n(&r.started, __ATOMIC_ACQUIRE))
		sched_yield();
	check(ioctl(r.fd, ESC(RM_FREE, sizeof(f)), &f) == 0, "race free");
	__atomic_store_n(&r.freed, 1, __ATOMIC_RELEASE);
	pthread_join(t, &n);
	printf("race ok %d\n", (int)(intptr_t)n);
}

static void one_control(int fd)
{
	uint8_t params[8] = { 0 };
	check(control(fd, 0x20800102u, params, sizeof(params)) == 0 && params[0] == 1, "control");
}

static void forks(const char *self)
{
	int ctl = dev("nvidiactl"), status;
	char *child_argv[] = { (char *)self, "child", NULL };
	pid_t pid;

	one_control(ctl);
	pid = fork();
	if (pid == 0) {
		one_control(ctl); /* the inherited fd, in the child's own ring */
		execv(self, child_argv);
		fail("execv");
	}
	check(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0, "fork child");
	pid = vfork();
	if (pid == 0) {
		execv(self, child_argv);
		_exit(98);
	}
	check(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0, "vfork child");
	check(posix_spawn(&pid, self, NULL, NULL, child_argv, environ) == 0, "posix_spawn");
	check(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0, "spawned child");
	one_control(ctl);
	close(ctl);
	puts("fork ok");
}

static void block(void)
{
	int ctl = dev("nvidiactl");
	struct nvos00 f = { 1, 1, 2, 0xffffffffu };
	one_control(ctl);
	one_control(ctl);
	ioctl(ctl, ESC(RM_FREE, sizeof(f)), &f); /* never returns */
	fail("RM_FREE returned");
}

static void badptr(void)
{
	int ctl = dev("nvidiactl");
	struct nvos54 c = { 1, 1, 0x20800102u, 0, 0x10, 64, 0xffffffffu };
	void *none = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct nvos21 a = { 0, 0, 0, 0x41, (uint64_t)(uintptr_t)none, 120, 0xffffffffu };

	check(ioctl(ctl, ESC(RM_CONTROL, sizeof(c)), &c) == 0 && c.status == NV_ERR_INVALID_ADDRESS, "bad params");
	errno = 0;
	check(ioctl(ctl, ESC(RM_CONTROL, sizeof(c)), (void *)0x18) == -1 && errno == EFAULT, "bad argument: EFAULT");
	check(ioctl(ctl, ESC(RM_ALLOC, sizeof(a)), &a) == 0 && a.status == NV_ERR_INVALID_ADDRESS, "PROT_NONE params");
	close(ctl);
	puts("badptr ok");
}

static sigjmp_buf fault_jump;
static volatile uintptr_t nowhere = 16; /* an address no program maps */
static volatile sig_atomic_t own_faults, usr1_ran;
static int signals_ctl;

static void own_fault(int sig, siginfo_t *si, void *ctx)
{
	(void)si;
	(void)ctx;
	own_faults++;
	siglongjmp(fault_jump, sig);
}

static void bad_params(int ctl)
{
	struct nvos54 c = { 1, 1, 0x20800102u, 0, 0x10, 64, 0xffffffffu };
	check(ioctl(ctl, ESC(RM_CONTROL, sizeof(c)), &c) == 0 && c.status == NV_ERR_INVALID_ADDRESS, "bad params");
}

static void on_usr1(int sig)
{
	(void)sig;
	bad_params(signals_ctl); /* in a handler whose mask blocks every signal */
	usr1_ran = 1;
}

static void *blocked_thread(void *arg)
{
	sigset_t all;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL); /* as worker threads of many programs do */
	one_control(signals_ctl);
	bad_params(signals_ctl);
	return arg;
}

static void signals(void)
{
	struct sigaction own, back, usr1;
	pthread_t thread;

	signals_ctl = dev("nvidiactl");
	memset(&own, 0, sizeof(own));
	own.sa_sigaction = own_fault;
	own.sa_flags = SA_SIGINFO;
	sigemptyset(&own.sa_mask);
	check(sigaction(SIGSEGV, &own, NULL) == 0, "sigaction SIGSEGV");
	check(sigaction(SIGSEGV, NULL, &back) == 0 && back.sa_sigaction == own_fault, "reads back its own handler");
	check(signal(SIGBUS, SIG_IGN) == SIG_DFL && signal(SIGBUS, SIG_DFL) == SIG_IGN, "signal() round trip");
	bad_params(signals_ctl);
	check(own_faults == 0, "a bad pointer in an ioctl reached the program's handler");
	if (sigsetjmp(fault_jump, 1) == 0) {
		*(volatile int *)nowhere = 1;
		fail("no fault");
	}
	check(own_faults == 1, "the program's own fault did not reach its handler");
	bad_params(signals_ctl); /* and the shim's guard still works after it */
	check(own_faults == 1, "a bad pointer reached the program's handler after its own fault");

	memset(&usr1, 0, sizeof(usr1));
	usr1.sa_handler = on_usr1;
	sigfillset(&usr1.sa_mask);
	check(sigaction(SIGUSR1, &usr1, NULL) == 0, "sigaction SIGUSR1");
	raise(SIGUSR1);
	check(usr1_ran, "SIGUSR1 handler");
	check(pthread_create(&thread, NULL, blocked_thread, NULL) == 0 && pthread_join(thread, NULL) == 0, "thread");
	close(signals_ctl);
	puts("signals ok");
}

static void segv(void)
{
	one_control(dev("nvidiactl"));
	*(volatile int *)nowhere = 1;
	fail("no fault");
}

static void many(int n, int size)
{
	int ctl = dev("nvidiactl");
	uint8_t *params = calloc(1, (size_t)size);
	for (int i = 0; i < n; i++) {
		params[0] = (uint8_t)i;
		if (control(ctl, 0x20800102u, params, (uint32_t)size) != 0 || params[0] != (uint8_t)(i + 1))
			fail("many");
	}
	close(ctl);
	printf("many ok %d\n", n);
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* What the program itself did, to set against what a recording holds (a recorder killed
 * mid-run must not cost the program anything, nor the trace more than its last moments). */
static void steady(int n, int gap_us, const char *log)
{
	int ctl = dev("nvidiactl");
	uint64_t (*t)[2] = calloc((size_t)n, sizeof(*t));
	uint8_t params[8];
	FILE *f;

	check(t != NULL, "steady: memory");
	for (int i = 0; i < n; i++) {
		struct timespec gap = { 0, gap_us * 1000L };
		uint32_t number = (uint32_t)i;
		memset(params, 0, sizeof(params));
		memcpy(params + 4, &number, sizeof(number)); /* the driver adds 1 to every byte */
		t[i][0] = now_ns();
		check(control(ctl, 0x20800102u, params, sizeof(params)) == 0 && params[0] == 1, "steady control");
		t[i][1] = now_ns();
		nanosleep(&gap, NULL);
	}
	f = fopen(log, "w");
	check(f != NULL, "steady: log");
	for (int i = 0; i < n; i++)
		fprintf(f, "%d %llu %llu\n", i, (unsigned long long)t[i][0], (unsigned long long)t[i][1]);
	fprintf(f, "done %d\n", n);
	fclose(f);
	close(ctl);
}

/* ns per ioctl, side by side in one process: batches of 100 RM controls
 * alternate between the ctl fd as opened (which the shim traces) and the
 * same device reopened through /proc/self/fd (a path the shim does not take
 * for an NVIDIA node, so it passes those calls through untouched).  Prints
 * the median of each.  Where the buffers live:
 *   stack   the argument and 64-byte params on this thread's stack
 *   heap    both on the heap, as libcuda keeps most of its params
 *   nested  GET_CLASSLIST: heap params pointing to a heap array of 32 class ids
 *   none    FIONREAD on a pipe, not a device at all */
static void bench(int n, const char *where)
{
	int fds[2], failures = 0, avail, none = !strcmp(where, "none");
	int heap = !strcmp(where, "heap"), nested = !strcmp(where, "nested");
	uint8_t stack_params[64] = { 0 };
	struct nvos54 stack_c = { 0xbad0c1d0u, 0xbad0c1d0u, 0x20800102u, 0, 0, sizeof(stack_params), 0 };
	struct nvos54 *c = &stack_c;
	int batches = n / 200 > 0 ? n / 200 : 1;
	uint64_t *ns[2] = { calloc((size_t)batches, sizeof(uint64_t)), calloc((size_t)batches, sizeof(uint64_t)) };
	char path[64];

	check(none || heap || nested || !strcmp(where, "stack"), "bench: stack, heap, nested or none");
	stack_c.params = (uint64_t)(uintptr_t)stack_params;
	if (heap || nested) {
		c = malloc(sizeof(*c));
		*c = stack_c;
		c->params = (uint64_t)(uintptr_t)calloc(1, 64);
	}
	if (nested) {
		struct classlist *cl = (struct classlist *)(uintptr_t)c->params;
		cl->numClasses = 32;
		cl->classList = (uint64_t)(uintptr_t)calloc(32, sizeof(uint32_t));
		c->cmd = CTRL_GET_CLASSLIST;
		c->paramsSize = sizeof(*cl);
	}
	if (none) {
		check(pipe(fds) == 0, "pipe");
	} else {
		fds[0] = dev("nvidiactl");
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fds[0]);
		fds[1] = open(path, O_RDWR | O_CLOEXEC);
		check(fds[1] >= 0, "reopen through /proc/self/fd");
	}
	for (int b = 0; b < batches; b++) {
		for (int k = 0; k < 2; k++) {
			int fd = none ? fds[0] : fds[(b + k) % 2]; /* alternate which goes first */
			uint64_t t0 = now_ns();
			for (int i = 0; i < 100; i++) /* only the time matters: a refusal is a full trip too */
				failures += (none ? ioctl(fd, FIONREAD, &avail) : ioctl(fd, ESC(RM_CONTROL, sizeof(*c)), c)) != 0;
			ns[none ? k : fd == fds[1]][b] = now_ns() - t0;
		}
	}
	for (int k = 0; k < 2; k++)
		qsort(ns[k], (size_t)batches, sizeof(uint64_t), cmp_u64);
	printf("traced_ns %.1f untraced_ns %.1f failures %d status 0x%x\n", ns[0][batches / 2] / 100.0,
	       ns[1][batches / 2] / 100.0, failures, c->status);
}

int main(int argc, char **argv)
{
	const char *what = argc > 1 ? argv[1] : "basic";
	uint64_t start = now_ns();
	dir = getenv("RMPROG_DEVICE_DIR") ? getenv("RMPROG_DEVICE_DIR") : getenv("RMTRACE_TEST_DEVICE_DIR");
	if (!dir)
		fail("neither RMPROG_DEVICE_DIR nor RMTRACE_TEST_DEVICE_DIR is set");
	if (!strcmp(what, "basic"))
		basic();
	else if (!strcmp(what, "threads"))
		threads(atoi(argv[2]), atoi(argv[3]));
	else if (!strcmp(what, "fork"))
		forks(argv[0]);
	else if (!strcmp(what, "child")) {
		int ctl = dev("nvidiactl");
		one_control(ctl);
		close(ctl);
	} else if (!strcmp(what, "block"))
		block();
	else if (!strcmp(what, "badptr"))
		badptr();
	else if (!strcmp(what, "signals"))
		signals();
	else if (!strcmp(what, "segv"))
		segv();
	else if (!strcmp(what, "race"))
		race();
	else if (!strcmp(what, "many"))
		many(atoi(argv[2]), argc > 3 ? atoi(argv[3]) : 64);
	else if (!strcmp(what, "steady") && argc > 4)
		steady(atoi(argv[2]), atoi(argv[3]), argv[4]);
	else if (!strcmp(what, "bench"))
		bench(atoi(argv[2]), argc > 3 ? argv[3] : "stack");
	else if (!strcmp(what, "exit")) {
		one_control(dev("nvidiactl"));
		exit(atoi(argv[2]));
	} else if (!strcmp(what, "kill")) {
		one_control(dev("nvidiactl"));
		raise(SIGTERM);
	} else
		fail("unknown scenario");
	if (getenv("RMPROG_TIME"))
		printf("elapsed_ms %.3f\n", (now_ns() - start) / 1e6);
	return 0;
}
