/*
 * shim_state.c: process and thread state of the capture shim.
 *
 * A process image (each exec, and each fork child) takes an image id from
 * the session's shared counter; call ids are (image id << 40 | n), so they
 * are unique across the whole recording.  A fork is noticed without a system
 * call: the process generation lives in a page marked MADV_WIPEONFORK, which
 * reads as zero in any child however it was forked (pthread_atfork clears it
 * too, for kernels without wipe-on-fork).  A thread whose ring was made
 * under another generation makes a new one and never writes the old one: a
 * child never writes its parent's rings.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "shim.h"

uint8_t shim_fd_kinds[SHIM_FD_MAX];
struct shim_real shim_real;
struct shim_process shim_proc;

__thread struct shim_thread shim_self __attribute__((tls_model("initial-exec")));
const uint64_t *shim_forkgen;

struct shim_forkpage {
	uint64_t gen; /* shim_proc.gen in the process that owns the page; 0 in a fork child */
};
static struct shim_forkpage *forkpage;
static struct shim_forkpage forkpage_fallback;
static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static int init_done;
static pthread_key_t thread_key;

/* ------------------------------------------------------------ real symbols */

#define RESOLVE(field, name) shim_real.field = (__typeof__(shim_real.field))dlsym(RTLD_NEXT, name)

void shim_resolve(void)
{
	if (shim_real.ioctl)
		return;
	RESOLVE(open, "open");
	RESOLVE(open64, "open64");
	RESOLVE(openat, "openat");
	RESOLVE(openat64, "openat64");
	RESOLVE(open_2, "__open_2");
	RESOLVE(open64_2, "__open64_2");
	RESOLVE(openat_2, "__openat_2");
	RESOLVE(openat64_2, "__openat64_2");
	RESOLVE(close, "close");
	RESOLVE(close_range, "close_range");
	RESOLVE(closefrom, "closefrom");
	RESOLVE(dup, "dup");
	RESOLVE(dup2, "dup2");
	RESOLVE(dup3, "dup3");
	RESOLVE(fcntl, "fcntl");
	RESOLVE(fcntl64, "fcntl64");
	RESOLVE(sigaction, "sigaction");
	RESOLVE(signal, "signal");
	RESOLVE(sigprocmask, "sigprocmask");
	RESOLVE(pthread_sigmask, "pthread_sigmask");
	RESOLVE(mmap, "mmap");
	RESOLVE(mmap64, "mmap64");
	RESOLVE(munmap, "munmap");
	RESOLVE(fork, "fork");
	RESOLVE(execve, "execve");
	RESOLVE(execvpe, "execvpe");
	RESOLVE(fexecve, "fexecve");
	RESOLVE(execveat, "execveat");
	RESOLVE(posix_spawn, "posix_spawn");
	RESOLVE(posix_spawnp, "posix_spawnp");
	RESOLVE(exit_, "_exit");
	RESOLVE(Exit, "_Exit");
	/* Last: the others are resolved once this one is set. */
	__atomic_store_n(&shim_real.ioctl, (__typeof__(shim_real.ioctl))dlsym(RTLD_NEXT, "ioctl"), __ATOMIC_RELEASE);
}

/* ------------------------------------------------------------ the fd table */

void fd_set_kind(int fd, unsigned kind)
{
	if ((unsigned)fd >= SHIM_FD_MAX)
		return;
	if (__atomic_load_n(&shim_fd_kinds[fd], __ATOMIC_RELAXED) != kind)
		__atomic_store_n(&shim_fd_kinds[fd], (uint8_t)kind, __ATOMIC_RELAXED);
}

/* Which NVIDIA node a path names: "<prefix>nvidiactl", "nvidia<N>",
 * "nvidia-uvm", "nvidia-uvm-tools", any other "nvidia*" (FD_OTHER). */
unsigned classify_path(const char *path)
{
	static const struct { const char *suffix; unsigned kind; } names[] = {
		{ "ctl", FD_CTL }, { "-uvm", FD_UVM }, { "-uvm-tools", FD_UVM_TOOLS },
	};
	const char *name;
	size_t i;

	if (!path || path[0] != '/' || strncmp(path, shim_proc.dev_prefix, shim_proc.dev_prefix_len) != 0)
		return FD_NONE;
	name = path + shim_proc.dev_prefix_len;
	if (strncmp(name, "nvidia", 6) != 0)
		return FD_NONE;
	name += 6;
	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strcmp(name, names[i].suffix) == 0)
			return names[i].kind;
	if (name[0] >= '0' && name[0] <= '9') {
		while (*name >= '0' && *name <= '9')
			name++;
		if (*name == 0)
			return FD_GPU;
	}
	return FD_OTHER;
}

/* fds the process inherited (an exec keeps fds without O_CLOEXEC). */
static void seed_fd_table(void)
{
	char buf[4096], link[64], target[PATH_MAX];
	int dirfd = (int)syscall(SYS_openat, AT_FDCWD, "/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	long n;

	if (dirfd < 0)
		return;
	while ((n = syscall(SYS_getdents64, dirfd, buf, sizeof(buf))) > 0) {
		long off = 0;
		while (off < n) {
			struct dirent64 *d = (struct dirent64 *)(buf + off);
			char *end;
			long fd = strtol(d->d_name, &end, 10);
			off += d->d_reclen;
			if (*end || end == d->d_name || fd == dirfd)
				continue;
			snprintf(link, sizeof(link), "/proc/self/fd/%ld", fd);
			long len = syscall(SYS_readlinkat, AT_FDCWD, link, target, sizeof(target) - 1);
			if (len <= 0)
				continue;
			target[len] = 0;
			fd_set_kind((int)fd, classify_path(target));
		}
	}
	syscall(SYS_close, dirfd);
}

/* ------------------------------------------------------------ session files */

static void *map_file(const char *dir, const char *name, int prot, size_t *size)
{
	char path[PATH_MAX];
	struct stat st;
	void *mem;
	int fd;

	if (snprintf(path, sizeof(path), "%s/%s", dir, name) >= (int)sizeof(path))
		return NULL;
	fd = (int)syscall(SYS_openat, AT_FDCWD, path, ((prot & PROT_WRITE) ? O_RDWR : O_RDONLY) | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	if (fstat(fd, &st) != 0 || st.st_size <= 0) {
		syscall(SYS_close, fd);
		return NULL;
	}
	mem = (void *)syscall(SYS_mmap, NULL, (size_t)st.st_size, prot, MAP_SHARED, fd, 0);
	syscall(SYS_close, fd);
	if ((long)mem < 0 && (long)mem > -4096)
		return NULL;
	*size = (size_t)st.st_size;
	return mem;
}

/* The capture table is ours (the recorder wrote it), but check it anyway:
 * a broken table must disable capture, not crash the program. */

static int load_ctab(const struct rmt_ctab_header *h, size_t size)
{
	if (size < sizeof(*h) || h->magic != RMT_CTAB_MAGIC || h->version != RMT_CTAB_VERSION ||
	    h->header_size != sizeof(*h) || h->total_size != size)
		return -1;
	if ((uint64_t)h->uvm_off + (uint64_t)h->n_uvm * sizeof(struct rmt_ctab_uvm) > size ||
	    (uint64_t)h->ctrl_off + (uint64_t)h->n_ctrl * sizeof(struct rmt_ctab_ctrl) > size ||
	    (uint64_t)h->ptr_off + (uint64_t)h->n_ptr * sizeof(struct rmt_ctab_ptr) > size ||
	    (uint64_t)h->class_off + (uint64_t)h->n_class * sizeof(struct rmt_ctab_class) > size)
		return -1;
	if (h->ring_size < RMT_RING_MIN_SIZE || (h->ring_size & (h->ring_size - 1)) || h->ring_size > (1ull << 32))
		return -1;
	shim_proc.ctab = h;
	shim_proc.uvm = (const void *)((const char *)h + h->uvm_off);
	shim_proc.ctrl = (const void *)((const char *)h + h->ctrl_off);
	shim_proc.ptr = (const void *)((const char *)h + h->ptr_off);
	shim_proc.cls = (const void *)((const char *)h + h->class_off);
	shim_proc.ring_size = h->ring_size;
	shim_proc.max_record = (uint32_t)(h->ring_size / 2);
	shim_proc.max_buffer = h->max_buffer;
	shim_proc.fast_end = shim_proc.max_record < SHIM_FAST_ROOM ? shim_proc.max_record : SHIM_FAST_ROOM;
	shim_proc.rights_size = h->rights_size;
	shim_proc.lossy = (h->flags & RMT_CTAB_LOSSY) != 0;
	shim_proc.tsc = (h->flags & RMT_CTAB_TSC) != 0;
	return ctab_index();
}

static void new_image(void)
{
	uint64_t id = __atomic_add_fetch(&shim_proc.session->next_image, 1, __ATOMIC_RELAXED);
	shim_proc.pid = (pid_t)syscall(SYS_getpid);
	shim_proc.image_id = id;
	shim_proc.gen = id;
	__atomic_store_n(&shim_proc.calls, 0, __ATOMIC_RELAXED);
	shim_proc.exit_recorded = 0;
	__atomic_store_n(&forkpage->gen, id, __ATOMIC_RELAXED);
}

static void atfork_child(void)
{
	/* Belt and braces for kernels without MADV_WIPEONFORK. */
	if (forkpage)
		__atomic_store_n(&forkpage->gen, 0, __ATOMIC_RELAXED);
}

static void thread_gone(void *arg)
{
	struct shim_thread *t = arg;
	if (t && t->ctl && t->gen == shim_proc.gen)
		__atomic_store_n(&t->ctl->state, RMT_RING_CLOSED, __ATOMIC_RELEASE);
}

static void copy_env(char *dst, size_t cap, const char *name)
{
	const char *v = getenv(name);
	dst[0] = 0;
	if (v && strlen(v) < cap)
		strcpy(dst, v);
}

static void init_once_body(void)
{
	struct rmt_session_ctl *session;
	const struct rmt_ctab_header *ctab;
	size_t size = 0, ctab_size = 0;
	Dl_info info;

	shim_resolve();
	copy_env(shim_proc.session_dir, sizeof(shim_proc.session_dir), "RMTRACE_SESSION_DIR");
#ifdef RMTRACE_TEST_HOOKS
	copy_env(shim_proc.test_dir, sizeof(shim_proc.test_dir), "RMTRACE_TEST_DEVICE_DIR");
	snprintf(shim_proc.dev_prefix, sizeof(shim_proc.dev_prefix), "%s/",
		 shim_proc.test_dir[0] ? shim_proc.test_dir : "/dev");
	if (getenv("RMTRACE_TEST_STALL") &&
	    sscanf(getenv("RMTRACE_TEST_STALL"), "%i:%u", (int *)&shim_proc.test_stall_op, &shim_proc.test_stall_ms) != 2)
		shim_proc.test_stall_ms = 0;
#else
	strcpy(shim_proc.dev_prefix, "/dev/");
#endif
	shim_proc.dev_prefix_len = strlen(shim_proc.dev_prefix);
	if (dladdr((void *)shim_init, &info) && info.dli_fname && strlen(info.dli_fname) < sizeof(shim_proc.self_path))
		strcpy(shim_proc.self_path, info.dli_fname);
	if (!shim_proc.session_dir[0])
		return;
	session = map_file(shim_proc.session_dir, "session.ctl", PROT_READ | PROT_WRITE, &size);
	if (!session || size < sizeof(*session) || session->magic != RMT_SESSION_MAGIC ||
	    session->version != RMT_SESSION_VERSION)
		return;
	ctab = map_file(shim_proc.session_dir, "capture.tab", PROT_READ, &ctab_size);
	if (!ctab || load_ctab(ctab, ctab_size) != 0)
		return;
	shim_proc.session = session;
	forkpage = (void *)syscall(SYS_mmap, NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if ((long)forkpage < 0 && (long)forkpage > -4096)
		forkpage = &forkpage_fallback;
	else
		madvise(forkpage, 4096, MADV_WIPEONFORK); /* fails harmlessly before Linux 4.14 */
	pthread_atfork(NULL, NULL, atfork_child);
	pthread_key_create(&thread_key, thread_gone);
	seed_fd_table();
	new_image();
	shim_guard_install();
	shim_proc.active = 1;
	__atomic_store_n(&shim_forkgen, &forkpage->gen, __ATOMIC_RELEASE);
}

void shim_init(void)
{
	pthread_once(&init_once, init_once_body);
	__atomic_store_n(&init_done, 1, __ATOMIC_RELEASE);
}

int shim_active(void)
{
	if (unlikely(!__atomic_load_n(&init_done, __ATOMIC_ACQUIRE)))
		shim_init();
	if (!shim_proc.active)
		return 0;
	if (unlikely(__atomic_load_n(&forkpage->gen, __ATOMIC_RELAXED) != shim_proc.gen))
		new_image(); /* we are a fork child: a new image, new rings */
	return 1;
}

struct shim_thread *shim_self_thread(void)
{
	return &shim_self;
}


/* ------------------------------------------------------------ thread rings */

/* Bytes of the data area mapped a second time after it: room for the longest record
 * (max_record = ring_size / 2), in whole pages. */
static size_t ring_mirror(uint64_t ring_size)
{
	return ring_size / 2 > 4096 ? ring_size / 2 : 4096;
}

static void ring_drop(struct shim_thread *t)
{
	if (t->ctl)
		syscall(SYS_munmap, t->ctl, RMT_RING_CTL_SIZE + t->mask + 1 + ring_mirror(t->mask + 1));
	t->ctl = NULL;
	t->data = NULL;
}

/* mmap by system call (the program's own mmap is hooked): the address, or NULL. */
static void *map(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	long mem = syscall(SYS_mmap, addr, len, prot, flags, fd, off);
	return mem < 0 && mem > -4096 ? NULL : (void *)mem;
}

/* Data bytes mapped in at a time: one madvise per 256 KiB of records in a ring's first pass. */
#define RING_POPULATE (256u << 10)
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif

static int ring_create(struct shim_thread *t)
{
	char path[PATH_MAX];
	size_t total = RMT_RING_CTL_SIZE + shim_proc.ring_size, mirror = ring_mirror(shim_proc.ring_size);
	struct rmt_ring_ctl *ctl;
	uint8_t *base;
	int fd;

	t->tid = (uint32_t)syscall(SYS_gettid);
	if (snprintf(path, sizeof(path), "%s/ring-%d-%u-%llu.rb", shim_proc.session_dir, shim_proc.pid, t->tid,
		     (unsigned long long)shim_proc.image_id) >= (int)sizeof(path))
		return -1;
	fd = (int)syscall(SYS_openat, AT_FDCWD, path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		return -1;
	/* Allocate every page now: a full /dev/shm then fails here (no ring, the
	 * call counted in lost_noring) instead of raising SIGBUS in the program
	 * at a later write.  They are mapped in as the ring fills (ring_populate),
	 * so an ioctl's records never take page faults (they were most of the
	 * shim's cost per call), and a process that records little does not pay
	 * for mapping the whole ring (3 of the 4.4 ms a 4 MiB ring took). */
	if (syscall(SYS_fallocate, fd, 0, 0L, (long)total) != 0) {
		syscall(SYS_close, fd);
		syscall(SYS_unlinkat, AT_FDCWD, path, 0);
		return -1;
	}
	/* The control page and the data area, then the data area's first pages again right after
	 * it (shim_record.c: a record running past the end stays one piece), in one reservation. */
	base = map(NULL, total + mirror, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (!base || !map(base, total, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0) ||
	    !map(base + total, mirror, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, RMT_RING_CTL_SIZE)) {
		if (base)
			syscall(SYS_munmap, base, total + mirror);
		syscall(SYS_close, fd);
		return -1;
	}
	syscall(SYS_close, fd);
	ctl = (struct rmt_ring_ctl *)base;
	ctl->version = RMT_RING_VERSION;
	ctl->ctl_size = RMT_RING_CTL_SIZE;
	ctl->data_size = shim_proc.ring_size;
	ctl->pid = (uint32_t)shim_proc.pid;
	ctl->tid = t->tid;
	ctl->image_id = shim_proc.image_id;
	ctl->state = RMT_RING_LIVE;
	__atomic_store_n(&ctl->magic, RMT_RING_MAGIC, __ATOMIC_RELEASE);
	t->ctl = ctl;
	t->data = (uint8_t *)ctl + RMT_RING_CTL_SIZE;
	t->mask = shim_proc.ring_size - 1;
	t->head = 0;
	t->tail_seen = 0;
	t->populated = 0;
	ring_populate(t);
	/* And the mirror's first pages, where an ioctl's record that runs past the end goes on. */
	syscall(SYS_madvise, base + total, mirror < SHIM_FAST_ROOM ? mirror : SHIM_FAST_ROOM, MADV_POPULATE_WRITE);
	pthread_setspecific(thread_key, t);
	return 0;
}

void ring_populate(struct shim_thread *t)
{
	uint64_t size = t->mask + 1, from = t->populated, to = t->head + SHIM_FAST_ROOM;
	uint8_t *at = from ? t->data + from : (uint8_t *)t->ctl; /* the control page with the first pages */

	if (from >= size)
		return;
	to = (to + RING_POPULATE - 1) / RING_POPULATE * RING_POPULATE;
	if (to > size)
		to = size;
	/* A kernel without MADV_POPULATE_WRITE: a read of each page maps it (a record's write may then still
	 * take a minor fault).  Never a write: records may lie there already, after one bigger than
	 * SHIM_FAST_ROOM went the careful way past what was mapped. */
	if (syscall(SYS_madvise, at, (size_t)(t->data + to - at), MADV_POPULATE_WRITE) != 0)
		for (const volatile uint8_t *page = t->data + from; page < t->data + to; page += 4096)
			(void)*page;
	t->populated = to >= size ? UINT64_MAX : to;
}

SHIM_COLD struct shim_thread *shim_enter_slow(void)
{
	struct shim_thread *t = &shim_self;

	if (!shim_active())
		return NULL;
	if (unlikely(t->busy)) {
		/* A signal handler interrupted us mid-record: its call goes unrecorded. */
		if (t->ctl && t->gen == shim_proc.gen)
			ring_count(&t->ctl->lost_nested);
		return NULL;
	}
	t->busy = 1;
	if (unlikely(t->gen != shim_proc.gen)) {
		/* First record of this thread, or of a fork child (whose copy of the
		 * parent's ring must never be written). */
		ring_drop(t);
		t->gen = shim_proc.gen;
		t->broken = ring_create(t) != 0;
	}
	if (unlikely(t->broken)) {
		__atomic_add_fetch(&shim_proc.session->lost_noring, 1, __ATOMIC_RELAXED);
		t->busy = 0;
		return NULL;
	}
	if (unlikely(__atomic_load_n(&shim_proc.session->state, __ATOMIC_RELAXED) != RMT_SESSION_RECORDING)) {
		ring_count(&t->ctl->lost_stopped);
		t->busy = 0;
		return NULL;
	}
	return t;
}
