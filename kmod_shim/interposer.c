/*
 * interposer.c: the capture shim's hooks (loaded with LD_PRELOAD by
 * `rmtrace record`; inert without RMTRACE_SESSION_DIR).
 *
 * Per traced call: an ENTER record, written and published before the real
 * call (so a call that blocks forever, or a process killed inside it, still
 * shows), then the real call, then an EXIT record with the result.  errno
 * and the return value reach the program unchanged.  What each call records:
 *
 *   ioctl on an RM or UVM fd   RM/UVM ENTER + EXIT, buffers per shim_ioctl.c
 *   open* of a /dev/nvidia*    SYS OPEN EVENT after the call (fd, PATH); the
 *                              driver defers GPU start-up to the first ioctl
 *   close of an NVIDIA fd      SYS CLOSE ENTER + EXIT (a last close tears the
 *                              RM client down, and can block)
 *   dup*, fcntl(F_DUPFD*)      SYS DUP EVENT (fd = new, ret = old); a dup2 or
 *                              close_range that drops an NVIDIA fd: CLOSE EVENT
 *   mmap of an NVIDIA fd       SYS MMAP ENTER + EXIT (ARG rmt_sys_mmap)
 *   munmap of such a mapping   SYS MUNMAP ENTER + EXIT
 *   fork, vfork, posix_spawn   SYS FORK EVENT in the parent (ret = child pid)
 *   exec*                      SYS EXEC ENTER before (PATH, TEXT argv); EXIT
 *                              with ret -1 if it fails, else EXIT from the
 *                              new image with ret 0 (the call id travels in
 *                              RMTRACE_EXEC_CALL)
 *   process start              SYS EXEC EVENT (ret = parent pid) when not
 *                              started by a traced exec: PATH, TEXT argv
 *   exit, _exit, _Exit         SYS EXIT EVENT, ret = status
 *
 * vfork is turned into fork: a vfork child shares our memory, and writing
 * records there would write the parent's rings.  Children are kept under
 * the shim: exec and posix_spawn put LD_PRELOAD and RMTRACE_SESSION_DIR back
 * into an environment that lacks them.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "shim.h"

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

extern char **environ;

/* ---------------------------------------------------------- small records */

/* One record with no buffers, or with one local buffer. */
static void sys_event(uint32_t op, uint8_t phase, int fd, uint64_t call_id, int64_t ret, int err, uint16_t role,
		      const void *data, size_t len)
{
	struct shim_thread *t;
	struct shim_rec r;
	int saved = errno;

	if (!(t = shim_enter())) {
		errno = saved;
		return;
	}
	rec_init(&r, t, RMT_SRC_SYS, phase, op, fd, call_id);
	r.ret = ret;
	r.err = err;
	if (data && len)
		rec_add_local(&r, role, RMT_WHEN_ONCE, 0, data, len);
	rec_emit(&r);
	shim_leave(t);
	errno = saved;
}

/* ---------------------------------------------------------------- ioctl */

SHIM_HOT static int traced_ioctl(int fd, unsigned long req, void *arg, unsigned kind)
{
	struct shim_plan plan;
	struct shim_rec r;
	struct shim_thread *t;
	uint16_t source = kind_is_uvm(kind) ? RMT_SRC_UVM : RMT_SRC_RM;
	uint32_t op = ioctl_op(kind, req);
	uint64_t call_id = 0;
	int *errp = &errno; /* one call of __errno_location, not four */
	int saved = *errp, ret, err, traced = 0;

	if ((t = shim_enter()) != NULL) {
		call_id = shim_next_call_id();
		capture_ioctl_enter(t, &plan, source, op, fd, call_id, kind, req, (uint64_t)(uintptr_t)arg);
		shim_leave(t);
		traced = 1;
	}
	*errp = saved;
	ret = shim_real.ioctl(fd, req, arg);
	err = *errp;
	if (traced && (t = shim_reenter(&shim_self)) != NULL) {
		int32_t failed = ret < 0 ? err : 0; /* errno means something only where the call failed */

		if (unlikely(capture_ioctl_exit_whole(&plan, source, op, fd, call_id, ret, failed) != 0)) {
			rec_init(&r, t, source, RMT_PH_EXIT, op, fd, call_id);
			if (plan.stamped)
				r.time_ns = plan.stamped;
			else
				rec_stamp(&r); /* the time the call returned, before its buffers are read again */
			r.ret = ret;
			r.err = failed;
			capture_ioctl_exit(&r, &plan);
			rec_emit(&r);
		}
		shim_leave(t);
	}
	*errp = err;
	return ret;
}

SHIM_HOT SHIM_EXPORT int ioctl(int fd, unsigned long req, ...)
{
	va_list ap;
	void *arg;
	unsigned kind;

	va_start(ap, req);
	arg = va_arg(ap, void *);
	va_end(ap);
	kind = fd_kind(fd);
	if (likely(!kind_is_ioctl_traced(kind)))
		return RESOLVED(ioctl)(fd, req, arg);
	return traced_ioctl(fd, req, arg, kind);
}

/* ---------------------------------------------------------------- open */

/* After any open: mark the fd, and record opens of NVIDIA nodes.  A path
 * that the kernel did not reject with EFAULT was readable for it, so it is
 * readable for us. */
static int opened(int fd, const char *path)
{
	int err = errno;
	unsigned kind;

	if (!shim_active() || (fd < 0 && err == EFAULT))
		return fd;
	kind = classify_path(path);
	if (fd >= 0)
		fd_set_kind(fd, kind);
	if (kind != FD_NONE)
		sys_event(RMT_SYS_OPEN, RMT_PH_EVENT, fd, 0, fd, fd < 0 ? err : 0, RMT_BUF_PATH, path,
			  strnlen(path, PATH_MAX));
	errno = err;
	return fd;
}

static int wants_mode(int flags)
{
	return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE;
}

/* open(2)'s optional mode argument, read only when the flags say it was passed. */
#define MODE_ARG(mode, flags)                                                     \
	do {                                                                      \
		if (wants_mode(flags)) {                                          \
			va_list ap;                                               \
			va_start(ap, flags);                                      \
			mode = va_arg(ap, mode_t);                                \
			va_end(ap);                                               \
		}                                                                 \
	} while (0)
#define OPEN_HOOK(name, field)                                                    \
	SHIM_EXPORT int name(const char *path, int flags, ...)                    \
	{                                                                         \
		mode_t mode = 0;                                                  \
		MODE_ARG(mode, flags);                                            \
		return opened(RESOLVED(field)(path, flags, mode), path);          \
	}
#define OPENAT_HOOK(name, field)                                                  \
	SHIM_EXPORT int name(int dirfd, const char *path, int flags, ...)         \
	{                                                                         \
		mode_t mode = 0;                                                  \
		MODE_ARG(mode, flags);                                            \
		return opened(RESOLVED(field)(dirfd, path, flags, mode), path);   \
	}

OPEN_HOOK(open, open)
OPEN_HOOK(open64, open64)
OPENAT_HOOK(openat, openat)
OPENAT_HOOK(openat64, openat64)

SHIM_EXPORT int __open_2(const char *path, int flags)
{
	return opened(RESOLVED(open_2)(path, flags), path);
}

SHIM_EXPORT int __open64_2(const char *path, int flags)
{
	return opened(RESOLVED(open64_2)(path, flags), path);
}

SHIM_EXPORT int __openat_2(int dirfd, const char *path, int flags)
{
	return opened(RESOLVED(openat_2)(dirfd, path, flags), path);
}

SHIM_EXPORT int __openat64_2(int dirfd, const char *path, int flags)
{
	return opened(RESOLVED(openat64_2)(dirfd, path, flags), path);
}

/* ---------------------------------------------------------------- close */

SHIM_EXPORT int close(int fd)
{
	uint64_t call_id;
	int ret, err;

	if (likely(fd_kind(fd) == FD_NONE) || !shim_active())
		return RESOLVED(close)(fd);
	call_id = shim_next_call_id();
	sys_event(RMT_SYS_CLOSE, RMT_PH_ENTER, fd, call_id, 0, 0, 0, NULL, 0);
	/* Unmark first: once the kernel frees the number, another thread's open
	 * may get it and mark it anew. */
	fd_set_kind(fd, FD_NONE);
	ret = shim_real.close(fd);
	err = errno;
	sys_event(RMT_SYS_CLOSE, RMT_PH_EXIT, fd, call_id, ret, ret < 0 ? err : 0, 0, NULL, 0);
	errno = err;
	return ret;
}

/* fds [first, last] about to be closed together: unmark the NVIDIA ones
 * (remembered in dropped), so they can be re-marked if the call fails. */
#define DROP_MAX 256
static int drop_range(unsigned first, unsigned last, int *dropped, uint8_t *kinds)
{
	unsigned hi = last < (unsigned)SHIM_FD_MAX - 1 ? last : (unsigned)SHIM_FD_MAX - 1, fd;
	int n = 0;

	for (fd = first; fd <= hi && fd >= first; fd++) {
		unsigned k = fd_kind((int)fd);
		if (k == FD_NONE)
			continue;
		if (n < DROP_MAX) {
			dropped[n] = (int)fd;
			kinds[n++] = (uint8_t)k;
		}
		fd_set_kind((int)fd, FD_NONE);
	}
	return n;
}

static void dropped_result(int ok, const int *dropped, const uint8_t *kinds, int n)
{
	int i;
	for (i = 0; i < n; i++) {
		if (ok)
			sys_event(RMT_SYS_CLOSE, RMT_PH_EVENT, dropped[i], 0, 0, 0, 0, NULL, 0);
		else
			fd_set_kind(dropped[i], kinds[i]);
	}
}

SHIM_EXPORT int close_range(unsigned first, unsigned last, int flags)
{
	int dropped[DROP_MAX], n = 0, ret, err;
	uint8_t kinds[DROP_MAX];

	if (!RESOLVED(close_range)) {
		errno = ENOSYS;
		return -1;
	}
	if (!(flags & CLOSE_RANGE_CLOEXEC) && shim_active())
		n = drop_range(first, last, dropped, kinds);
	ret = shim_real.close_range(first, last, flags);
	err = errno;
	dropped_result(ret == 0, dropped, kinds, n);
	errno = err;
	return ret;
}

SHIM_EXPORT void closefrom(int lowfd)
{
	int dropped[DROP_MAX], n = 0, err;
	uint8_t kinds[DROP_MAX];

	if (!RESOLVED(closefrom))
		return;
	if (shim_active() && lowfd >= 0)
		n = drop_range((unsigned)lowfd, ~0u, dropped, kinds);
	shim_real.closefrom(lowfd);
	err = errno;
	dropped_result(1, dropped, kinds, n);
	errno = err;
}

/* ---------------------------------------------------------------- dup */

static int duped(int oldfd, int newfd, unsigned replaced)
{
	unsigned kind;

	if (newfd < 0 || oldfd == newfd)
		return newfd;
	kind = fd_kind(oldfd);
	if (likely(kind == FD_NONE && replaced == FD_NONE))
		return newfd;
	if (replaced != FD_NONE)
		sys_event(RMT_SYS_CLOSE, RMT_PH_EVENT, newfd, 0, 0, 0, 0, NULL, 0);
	fd_set_kind(newfd, kind);
	if (kind != FD_NONE)
		sys_event(RMT_SYS_DUP, RMT_PH_EVENT, newfd, 0, oldfd, 0, 0, NULL, 0);
	return newfd;
}

SHIM_EXPORT int dup(int oldfd)
{
	return duped(oldfd, RESOLVED(dup)(oldfd), FD_NONE);
}

SHIM_EXPORT int dup2(int oldfd, int newfd)
{
	unsigned replaced = oldfd != newfd ? fd_kind(newfd) : FD_NONE;
	return duped(oldfd, RESOLVED(dup2)(oldfd, newfd), replaced);
}

SHIM_EXPORT int dup3(int oldfd, int newfd, int flags)
{
	unsigned replaced = oldfd != newfd ? fd_kind(newfd) : FD_NONE;
	return duped(oldfd, RESOLVED(dup3)(oldfd, newfd, flags), replaced);
}

static int fcntl_result(int fd, int cmd, int ret)
{
	if (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC)
		return duped(fd, ret, FD_NONE);
	return ret;
}

SHIM_EXPORT int fcntl(int fd, int cmd, ...)
{
	va_list ap;
	void *arg;
	va_start(ap, cmd);
	arg = va_arg(ap, void *);
	va_end(ap);
	return fcntl_result(fd, cmd, RESOLVED(fcntl)(fd, cmd, arg));
}

SHIM_EXPORT int fcntl64(int fd, int cmd, ...)
{
	va_list ap;
	void *arg;
	va_start(ap, cmd);
	arg = va_arg(ap, void *);
	va_end(ap);
	if (!RESOLVED(fcntl64))
		return fcntl_result(fd, cmd, shim_real.fcntl(fd, cmd, arg));
	return fcntl_result(fd, cmd, shim_real.fcntl64(fd, cmd, arg));
}

/* ---------------------------------------------------------------- mmap */

/* NVIDIA mappings, so munmap knows which ranges were the driver's. */
#define MAPS_MAX 4096
static struct map_entry {
	uint64_t addr, length, offset;
	int32_t prot, flags, fd;
} maps[MAPS_MAX];
static int maps_count;
static pthread_mutex_t maps_lock = PTHREAD_MUTEX_INITIALIZER;

static void maps_add(uint64_t addr, uint64_t length, uint64_t offset, int prot, int flags, int fd)
{
	pthread_mutex_lock(&maps_lock);
	if (maps_count < MAPS_MAX)
		maps[maps_count++] = (struct map_entry){ addr, length, offset, prot, flags, fd };
	pthread_mutex_unlock(&maps_lock);
}

/* The tracked mapping overlapping [addr, addr + length), if any; removed
 * when remove is set and the range covers it. */
static int maps_find(uint64_t addr, uint64_t length, struct map_entry *out, int remove)
{
	int i, found = 0;

	if (likely(__atomic_load_n(&maps_count, __ATOMIC_RELAXED) == 0))
		return 0;
	pthread_mutex_lock(&maps_lock);
	for (i = 0; i < maps_count; i++) {
		struct map_entry *m = &maps[i];
		if (addr < m->addr + m->length && m->addr < addr + length) {
			*out = *m;
			found = 1;
			if (remove && addr <= m->addr && m->addr + m->length <= addr + length)
				*m = maps[--maps_count];
			break;
		}
	}
	pthread_mutex_unlock(&maps_lock);
	return found;
}

static void maps_prefork(void)
{
	pthread_mutex_lock(&maps_lock);
}

static void maps_postfork(void)
{
	pthread_mutex_unlock(&maps_lock);
}

static void *traced_mmap(void *(*real)(void *, size_t, int, int, int, off_t), void *addr, size_t length, int prot,
			 int flags, int fd, off_t offset)
{
	struct rmt_sys_mmap arg = { (uint64_t)(uintptr_t)addr, length, (uint64_t)offset, prot, flags };
	uint64_t call_id = shim_next_call_id();
	void *ret;
	int err;

	sys_event(RMT_SYS_MMAP, RMT_PH_ENTER, fd, call_id, 0, 0, RMT_BUF_ARG, &arg, sizeof(arg));
	ret = real(addr, length, prot, flags, fd, offset);
	err = errno;
	if (ret != MAP_FAILED) {
		arg.addr = (uint64_t)(uintptr_t)ret;
		maps_add(arg.addr, length, (uint64_t)offset, prot, flags, fd);
	}
	sys_event(RMT_SYS_MMAP, RMT_PH_EXIT, fd, call_id, ret == MAP_FAILED ? -1 : (int64_t)(uintptr_t)ret,
		  ret == MAP_FAILED ? err : 0, RMT_BUF_ARG, &arg, sizeof(arg));
	errno = err;
	return ret;
}

SHIM_EXPORT void *mmap(void *addr, size_t length, int prot, int flags, int fd, off_t offset)
{
	if (likely(fd_kind(fd) == FD_NONE) || !shim_active())
		return RESOLVED(mmap)(addr, length, prot, flags, fd, offset);
	return traced_mmap(shim_real.mmap, addr, length, prot, flags, fd, offset);
}

SHIM_EXPORT void *mmap64(void *addr, size_t length, int prot, int flags, int fd, off_t offset)
{
	if (likely(fd_kind(fd) == FD_NONE) || !shim_active())
		return RESOLVED(mmap64)(addr, length, prot, flags, fd, offset);
	return traced_mmap(shim_real.mmap64, addr, length, prot, flags, fd, offset);
}

SHIM_EXPORT int munmap(void *addr, size_t length)
{
	struct map_entry m;
	struct rmt_sys_mmap arg;
	uint64_t call_id;
	int ret, err;

	if (likely(!maps_find((uint64_t)(uintptr_t)addr, length, &m, 0)) || !shim_active())
		return RESOLVED(munmap)(addr, length);
	arg = (struct rmt_sys_mmap){ (uint64_t)(uintptr_t)addr, length, m.offset + ((uint64_t)(uintptr_t)addr - m.addr),
				     m.prot, m.flags };
	call_id = shim_next_call_id();
	sys_event(RMT_SYS_MUNMAP, RMT_PH_ENTER, m.fd, call_id, 0, 0, RMT_BUF_ARG, &arg, sizeof(arg));
	ret = shim_real.munmap(addr, length);
	err = errno;
	if (ret == 0)
		maps_find((uint64_t)(uintptr_t)addr, length, &m, 1);
	sys_event(RMT_SYS_MUNMAP, RMT_PH_EXIT, m.fd, call_id, ret, ret < 0 ? err : 0, 0, NULL, 0);
	errno = err;
	return ret;
}

/* ---------------------------------------------------------------- fork */

SHIM_EXPORT pid_t fork(void)
{
	pid_t pid = RESOLVED(fork)();
	if (pid != 0 && shim_active())
		sys_event(RMT_SYS_FORK, RMT_PH_EVENT, -1, 0, pid, pid < 0 ? errno : 0, 0, NULL, 0);
	return pid;
}

SHIM_EXPORT pid_t vfork(void)
{
	return fork();
}

/* ---------------------------------------------------------------- exec */

/* The environment a child gets: envp with LD_PRELOAD holding this library,
 * RMTRACE_SESSION_DIR (and the test device dir), and RMTRACE_EXEC_CALL
 * naming the exec's call id when there is one.  Heap-allocated; NULL when
 * not traced or out of memory (then envp is used as it is). */
static const char *const OUR_VARS[] = { "LD_PRELOAD=", "RMTRACE_SESSION_DIR=", "RMTRACE_EXEC_CALL=",
#ifdef RMTRACE_TEST_HOOKS
					"RMTRACE_TEST_DEVICE_DIR=",
#endif
};

static int our_var(const char *entry)
{
	size_t i;
	for (i = 0; i < sizeof(OUR_VARS) / sizeof(OUR_VARS[0]); i++)
		if (strncmp(entry, OUR_VARS[i], strlen(OUR_VARS[i])) == 0)
			return (int)i;
	return -1;
}

static int preload_has_self(const char *value)
{
	size_t n = strlen(shim_proc.self_path);
	const char *p = value;
	while ((p = strstr(p, shim_proc.self_path)) != NULL) {
		if ((p == value || p[-1] == ':' || p[-1] == ' ') && (p[n] == 0 || p[n] == ':' || p[n] == ' '))
			return 1;
		p += n;
	}
	return 0;
}

static char **child_env(char *const envp[], uint64_t call_id)
{
	const char *preload = NULL;
	size_t n = 0, i, k = 0;
	char **env;

	if (!shim_active() || !shim_proc.self_path[0])
		return NULL;
	for (i = 0; envp && envp[i]; i++) {
		n++;
		if (our_var(envp[i]) == 0)
			preload = envp[i] + strlen(OUR_VARS[0]);
	}
	env = calloc(n + 5, sizeof(char *));
	if (!env)
		return NULL;
	for (i = 0; envp && envp[i]; i++)
		if (our_var(envp[i]) < 0)
			env[k++] = envp[i];
	if (preload && preload_has_self(preload))
		asprintf(&env[k], "LD_PRELOAD=%s", preload);
	else
		asprintf(&env[k], "LD_PRELOAD=%s%s%s", shim_proc.self_path, preload && *preload ? ":" : "",
			 preload ? preload : "");
	k++;
	asprintf(&env[k++], "RMTRACE_SESSION_DIR=%s", shim_proc.session_dir);
#ifdef RMTRACE_TEST_HOOKS
	if (shim_proc.test_dir[0])
		asprintf(&env[k++], "RMTRACE_TEST_DEVICE_DIR=%s", shim_proc.test_dir);
#endif
	if (call_id)
		asprintf(&env[k++], "RMTRACE_EXEC_CALL=%llu", (unsigned long long)call_id);
	env[k] = NULL;
	return env;
}

static void free_child_env(char **env)
{
	size_t i;
	if (!env)
		return;
	for (i = 0; env[i]; i++)
		if (our_var(env[i]) >= 0) /* ours: every copied entry was not one of them */
			free(env[i]);
	free(env);
}

#define ARGV_TEXT_MAX (16u << 10)

/* argv as NUL-separated text, read defensively; returns its length. */
static size_t argv_text(struct shim_thread *t, char *out, size_t cap, char *const argv[])
{
	size_t have = 0, i;
	for (i = 0; argv && have < cap; i++) {
		uint64_t p;
		long n;
		if (shim_read(t, &p, (uint64_t)(uintptr_t)&argv[i], sizeof(p)) < 0 || p == 0)
			break;
		n = shim_read_str(t, out + have, p, cap - have);
		if (n < 0)
			break;
		have += (size_t)n + 1;
	}
	return have > cap ? cap : have;
}

/* An exec (or the start of an image) as a SYS EXEC record: PATH and TEXT. */
static void exec_record(uint8_t phase, uint64_t call_id, int64_t ret, const char *path, int path_is_ours,
			char *const argv[], const char *argv_blob, size_t argv_len)
{
	struct shim_thread *t;
	struct shim_rec r;
	char *work;
	int saved = errno;
	size_t cap = PATH_MAX + ARGV_TEXT_MAX;

	if (!(t = shim_enter()))
		return;
	work = (char *)syscall(SYS_mmap, NULL, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if ((long)work < 0 && (long)work > -4096) {
		shim_leave(t);
		errno = saved;
		return;
	}
	rec_init(&r, t, RMT_SRC_SYS, phase, RMT_SYS_EXEC, -1, call_id);
	r.ret = ret;
	if (path_is_ours) {
		rec_add_local(&r, RMT_BUF_PATH, RMT_WHEN_ONCE, 0, path, strlen(path));
	} else {
		long n = shim_read_str(t, work, (uint64_t)(uintptr_t)path, PATH_MAX);
		if (n >= 0)
			rec_add_local(&r, RMT_BUF_PATH, RMT_WHEN_ONCE, 0, work, (size_t)n);
		else {
			struct shim_view unreadable;
			rec_add_user(&r, RMT_BUF_PATH, RMT_WHEN_ONCE, 0, (uint64_t)(uintptr_t)path, 1, &unreadable);
		}
	}
	if (argv_blob)
		rec_add_local(&r, RMT_BUF_TEXT, RMT_WHEN_ONCE, 0, argv_blob, argv_len);
	else
		rec_add_local(&r, RMT_BUF_TEXT, RMT_WHEN_ONCE, 0, work + PATH_MAX,
			      argv_text(t, work + PATH_MAX, ARGV_TEXT_MAX, argv));
	rec_emit(&r);
	syscall(SYS_munmap, work, cap);
	shim_leave(t);
	errno = saved;
}

/* Record the exec, run it in a kept-traced environment, record a failure. */
#define EXEC_BODY(path, argv, envp, call)                                                 \
	do {                                                                              \
		uint64_t call_id = 0;                                                     \
		char **env;                                                               \
		int ret, err, saved = errno;                                              \
		if (shim_active()) {                                                      \
			call_id = shim_next_call_id();                                    \
			exec_record(RMT_PH_ENTER, call_id, 0, path, 0, argv, NULL, 0);    \
		}                                                                         \
		env = child_env(envp, call_id);                                           \
		errno = saved;                                                            \
		ret = call;                                                               \
		err = errno;                                                              \
		free_child_env(env);                                                      \
		if (call_id)                                                              \
			sys_event(RMT_SYS_EXEC, RMT_PH_EXIT, -1, call_id, ret, err, 0, NULL, 0); \
		errno = err;                                                              \
		return ret;                                                               \
	} while (0)

SHIM_EXPORT int execve(const char *path, char *const argv[], char *const envp[])
{
	EXEC_BODY(path, argv, envp, RESOLVED(execve)(path, argv, env ? env : envp));
}

SHIM_EXPORT int execvpe(const char *file, char *const argv[], char *const envp[])
{
	EXEC_BODY(file, argv, envp, RESOLVED(execvpe)(file, argv, env ? env : envp));
}

SHIM_EXPORT int execv(const char *path, char *const argv[])
{
	return execve(path, argv, environ);
}

SHIM_EXPORT int execvp(const char *file, char *const argv[])
{
	return execvpe(file, argv, environ);
}

SHIM_EXPORT int fexecve(int fd, char *const argv[], char *const envp[])
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	EXEC_BODY(path, argv, envp, RESOLVED(fexecve)(fd, argv, env ? env : envp));
}

SHIM_EXPORT int execveat(int dirfd, const char *path, char *const argv[], char *const envp[], int flags)
{
	if (!RESOLVED(execveat)) {
		errno = ENOSYS;
		return -1;
	}
	EXEC_BODY(path, argv, envp, shim_real.execveat(dirfd, path, argv, env ? env : envp, flags));
}

/* execl, execle, execlp: the variadic list as an argv array. */
static char **collect_args(const char *arg0, va_list ap, char ***envp_out)
{
	va_list count;
	size_t n = 1, i;
	char **argv;

	va_copy(count, ap);
	while (va_arg(count, char *) != NULL)
		n++;
	va_end(count);
	argv = malloc((n + 1) * sizeof(char *));
	if (!argv)
		return NULL;
	argv[0] = (char *)arg0;
	for (i = 1; i <= n; i++)
		argv[i] = va_arg(ap, char *); /* the last one read is the NULL */
	if (envp_out)
		*envp_out = va_arg(ap, char **);
	return argv;
}

#define EXECL_BODY(target, first, want_env, call)                 \
	do {                                                      \
		va_list ap;                                       \
		char **argv, **envp = environ;                    \
		int ret, err;                                     \
		va_start(ap, first);                              \
		argv = collect_args(first, ap, want_env ? &envp : NULL); \
		va_end(ap);                                       \
		if (!argv) {                                      \
			errno = ENOMEM;                           \
			return -1;                                \
		}                                                 \
		ret = call;                                       \
		err = errno;                                      \
		free(argv);                                       \
		errno = err;                                      \
		return ret;                                       \
	} while (0)

SHIM_EXPORT int execl(const char *path, const char *arg, ...)
{
	EXECL_BODY(path, arg, 0, execve(path, argv, envp));
}

SHIM_EXPORT int execle(const char *path, const char *arg, ...)
{
	EXECL_BODY(path, arg, 1, execve(path, argv, envp));
}

SHIM_EXPORT int execlp(const char *file, const char *arg, ...)
{
	EXECL_BODY(file, arg, 0, execvpe(file, argv, envp));
}

/* posix_spawn: the child runs exec inside libc, out of our reach, so it
 * is traced by its environment alone and writes its own EXEC EVENT. */
#define SPAWN_BODY(field, pid, path, actions, attr, argv, envp)                                  \
	do {                                                                                     \
		char **env = child_env(envp, 0);                                                 \
		pid_t child = 0;                                                                 \
		int ret = RESOLVED(field)(&child, path, actions, attr, argv, env ? env : envp);  \
		free_child_env(env);                                                             \
		if (ret == 0 && shim_active())                                                   \
			sys_event(RMT_SYS_FORK, RMT_PH_EVENT, -1, 0, child, 0, 0, NULL, 0);      \
		if (pid)                                                                         \
			*pid = child;                                                            \
		return ret;                                                                      \
	} while (0)

SHIM_EXPORT int posix_spawn(pid_t *pid, const char *path, const void *actions, const void *attr,
			    char *const argv[], char *const envp[])
{
	SPAWN_BODY(posix_spawn, pid, path, actions, attr, argv, envp);
}

SHIM_EXPORT int posix_spawnp(pid_t *pid, const char *file, const void *actions, const void *attr,
			     char *const argv[], char *const envp[])
{
	SPAWN_BODY(posix_spawnp, pid, file, actions, attr, argv, envp);
}

/* ---------------------------------------------------------------- signals
 *
 * SIGSEGV and SIGBUS are the shim's own once it records (shim_mem.c: a fault
 * in its copy of the program's memory becomes an unreadable buffer); the
 * program's handlers for them are kept and chained to, and it reads back what
 * it set.  The masks are followed so that a thread blocking them reads the
 * slow way, never faulting with the signal blocked. */

SHIM_EXPORT int sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
	(void)RESOLVED(sigaction);
	return shim_sigaction(sig, act, old);
}

SHIM_EXPORT int __sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
	return sigaction(sig, act, old);
}

/* signal() and its aliases, for the two signals the shim keeps: BSD semantics, as glibc's. */
static sighandler_t guarded_signal(int sig, sighandler_t handler, int flags)
{
	struct sigaction act, old;

	memset(&act, 0, sizeof(act));
	act.sa_handler = handler;
	act.sa_flags = flags;
	sigemptyset(&act.sa_mask);
	if (!(flags & SA_NODEFER))
		sigaddset(&act.sa_mask, sig);
	if (shim_sigaction(sig, &act, &old) != 0)
		return SIG_ERR;
	return old.sa_handler;
}

SHIM_EXPORT sighandler_t signal(int sig, sighandler_t handler)
{
	if (sig == SIGSEGV || sig == SIGBUS)
		return guarded_signal(sig, handler, SA_RESTART);
	return RESOLVED(signal)(sig, handler);
}

SHIM_EXPORT sighandler_t bsd_signal(int sig, sighandler_t handler)
{
	return signal(sig, handler);
}

SHIM_EXPORT sighandler_t ssignal(int sig, sighandler_t handler)
{
	return signal(sig, handler);
}

SHIM_EXPORT sighandler_t sysv_signal(int sig, sighandler_t handler)
{
	static sighandler_t (*real)(int, sighandler_t);
	if (sig == SIGSEGV || sig == SIGBUS)
		return guarded_signal(sig, handler, SA_RESETHAND | SA_NODEFER);
	if (!real)
		real = (sighandler_t(*)(int, sighandler_t))dlsym(RTLD_NEXT, "sysv_signal");
	return real ? real(sig, handler) : SIG_ERR;
}

/* sigprocmask and pthread_sigmask: the real call, then note whether SIGSEGV or SIGBUS is blocked now. */
static int mask_call(int (*real)(int, const sigset_t *, sigset_t *), int how, const sigset_t *set, sigset_t *old)
{
	static const int guarded[] = { SIGSEGV, SIGBUS };
	sigset_t before, now;
	int ret = real(how, set, &before);

	if (ret != 0)
		return ret;
	if (old)
		*old = before;
	sigemptyset(&now);
	for (size_t i = 0; i < sizeof(guarded) / sizeof(guarded[0]); i++) {
		int sig = guarded[i], was = sigismember(&before, sig) == 1, in = set && sigismember(set, sig) == 1;
		int blocked = !set ? was : how == SIG_SETMASK ? in : how == SIG_BLOCK ? (was || in) : (was && !in);
		if (blocked)
			sigaddset(&now, sig);
	}
	shim_mask_changed(&now);
	return 0;
}

SHIM_EXPORT int sigprocmask(int how, const sigset_t *set, sigset_t *old)
{
	return mask_call(RESOLVED(sigprocmask), how, set, old);
}

SHIM_EXPORT int pthread_sigmask(int how, const sigset_t *set, sigset_t *old)
{
	return mask_call(RESOLVED(pthread_sigmask), how, set, old);
}

/* ---------------------------------------------------------------- exit */

static void exit_record(int status)
{
	if (!shim_active() || shim_proc.exit_recorded)
		return;
	shim_proc.exit_recorded = 1;
	sys_event(RMT_SYS_EXIT, RMT_PH_EVENT, -1, 0, status, 0, 0, NULL, 0);
}

static void on_exit_hook(int status, void *arg)
{
	(void)arg;
	exit_record(status);
}

SHIM_EXPORT void _exit(int status)
{
	exit_record(status);
	RESOLVED(exit_)(status);
	syscall(SYS_exit_group, status);
	__builtin_unreachable();
}

SHIM_EXPORT void _Exit(int status)
{
	exit_record(status);
	RESOLVED(Exit)(status);
	syscall(SYS_exit_group, status);
	__builtin_unreachable();
}

/* ---------------------------------------------------------------- start */

/* The first record of a process image: the EXIT of the exec that made it
 * (when a traced exec did), else an EXEC EVENT whose ret is the parent. */
static void image_start(void)
{
	char path[PATH_MAX], *argv = NULL;
	const char *call = getenv("RMTRACE_EXEC_CALL");
	uint64_t call_id = call ? strtoull(call, NULL, 10) : 0;
	long n = syscall(SYS_readlinkat, AT_FDCWD, "/proc/self/exe", path, sizeof(path) - 1);
	size_t argv_len = 0;
	int fd;

	path[n > 0 ? n : 0] = 0;
	argv = (char *)syscall(SYS_mmap, NULL, ARGV_TEXT_MAX, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if ((long)argv < 0 && (long)argv > -4096)
		argv = NULL;
	fd = (int)syscall(SYS_openat, AT_FDCWD, "/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
	if (argv && fd >= 0) {
		long got;
		while (argv_len < ARGV_TEXT_MAX &&
		       (got = syscall(SYS_read, fd, argv + argv_len, ARGV_TEXT_MAX - argv_len)) > 0)
			argv_len += (size_t)got;
	}
	if (fd >= 0)
		syscall(SYS_close, fd);
	if (call_id)
		exec_record(RMT_PH_EXIT, call_id, 0, path, 1, NULL, argv ? argv : "", argv_len);
	else
		exec_record(RMT_PH_EVENT, 0, (int64_t)getppid(), path, 1, NULL, argv ? argv : "", argv_len);
	if (argv)
		syscall(SYS_munmap, argv, ARGV_TEXT_MAX);
	if (call)
		unsetenv("RMTRACE_EXEC_CALL");
}

__attribute__((constructor)) static void shim_start(void)
{
	shim_init();
	if (!shim_active())
		return;
	pthread_atfork(maps_prefork, maps_postfork, maps_postfork);
	on_exit(on_exit_hook, NULL);
	image_start();
}
