/*
 * fakedrv.c: a stand-in NVIDIA driver for the capture tests (test code only).
 *
 * Preloaded BENEATH the capture shim (LD_PRELOAD=shim.so:fakedrv.so), it
 * answers ioctls on the files of $RMTRACE_TEST_DEVICE_DIR (nvidiactl,
 * nvidia0, nvidia-uvm, ...) the way the driver does: it reads the argument
 * (EFAULT when it cannot, as copy_from_user), follows the pointers RM
 * follows (an unreadable params pointer gives status NV_ERR_INVALID_ADDRESS),
 * writes statuses and outputs back.  $FAKEDRV_BLOCK_REQ (hex request) makes
 * that request block forever, after writing our pid to $FAKEDRV_BLOCK_NOTE.
 * $FAKEDRV_TRUSTING skips the readability checks (the benchmark: an ioctl
 * that costs next to nothing, so what the shim adds stands out).
 *
 * $FAKEDRV_STRICT turns on a small RM of its own, for the replay tests: RM
 * clients and objects per process (an unknown client, parent or object
 * answers as RM does), client handles from a counter starting at
 * $FAKEDRV_HANDLE_BASE (RM's is global: a replay gets others than the
 * recording), fds checked where RM checks them (REGISTER_FD, ALLOC_OS_EVENT,
 * an OS event's alloc params, MAP_MEMORY's fd, UVM's rmCtrlFd), mapping
 * cookies MAP_MEMORY hands out and UNMAP_MEMORY must be given back, the
 * board's UUID ($FAKEDRV_UUID, 32 hex digits: GET_GID_INFO answers it,
 * UVM_REGISTER_GPU and MAP_EXTERNAL_ALLOCATION require it), OS-descriptor
 * memory that must be really mapped, UVM ranges over mapped addresses only.
 * Closing an RM fd frees the clients allocated through it, and so does a
 * normal exit (as the kernel's release of the fds does).  $FAKEDRV_LEDGER
 * names a file each process appends what it did to: "alloc PID CLIENT
 * HANDLE", "free PID CLIENT HANDLE", "closefree PID FD CLIENT", "exitfree PID
 * CLIENT", and "unsafe PID CMD" for the commands a replay must never send.
 * $FAKEDRV_RESERVATIONS names a file every process shares, counting the
 * compute-mode reservations held (ACQUIRE/RELEASE_COMPUTE_MODE_RESERVATION,
 * NV2080_CTRL_CMD_GPU_0x45/0x46): a release while another process still
 * holds one answers NV_ERR_STATE_IN_USE, as the H200 answers the first of
 * two CUDA processes at once to release.  With $FAKEDRV_RESERVATION_PEERS=N
 * an acquire waits (up to 10 s) until N acquires were made, so that N
 * processes are known to overlap, whichever of them then releases first.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#define NV_OK 0
#define NV_ERR_GPU_UUID_NOT_FOUND 0x12
#define NV_ERR_INSERT_DUPLICATE_NAME 0x19
#define NV_ERR_INVALID_ADDRESS 0x1e
#define NV_ERR_INVALID_ARGUMENT 0x1f
#define NV_ERR_INVALID_CLIENT 0x23
#define NV_ERR_INVALID_OBJECT_HANDLE 0x33
#define NV_ERR_OBJECT_NOT_FOUND 0x57
#define NV_ERR_STATE_IN_USE 0x63
#define CTRL_GET_CLASSLIST 0x00800201u
#define CTRL_GET_GID_INFO 0x2080014au
#define CTRL_PERF_BOOST 0x2080200au
#define CTRL_ACQUIRE_COMPUTE_MODE 0x20800145u
#define CTRL_RELEASE_COMPUTE_MODE 0x20800146u
#define CLASS_OS_EVENT 0x79u
#define CLASS_OS_DESCRIPTOR 0x71u

enum { NONE, RM, UVM };

static int (*real_ioctl)(int, unsigned long, ...);
static int (*real_close)(int);
static uint32_t next_handle = 0xcaf00000u;

/* The device files, by inode: an fd is ours however it was made (open,
 * dup, fork, exec). */
static const struct { const char *name; int kind; } nodes[] = {
	{ "nvidiactl", RM }, { "nvidia0", RM }, { "nvidia1", RM }, { "nvidia-uvm", UVM }, { "nvidia-uvm-tools", UVM },
};
#define NODES (sizeof(nodes) / sizeof(nodes[0]))
static struct stat node_stat[NODES];
static int node_ok[NODES];

static int trusting, strict;
static const char *block_req, *block_note, *ledger, *reservations;
static uint8_t board_uuid[16];
static int have_uuid;

static void resolve(void)
{
	const char *dir = getenv("RMTRACE_TEST_DEVICE_DIR");
	char path[4096];

	if (real_ioctl)
		return;
	trusting = getenv("FAKEDRV_TRUSTING") != NULL;
	strict = getenv("FAKEDRV_STRICT") != NULL;
	block_req = getenv("FAKEDRV_BLOCK_REQ");
	block_note = getenv("FAKEDRV_BLOCK_NOTE");
	ledger = getenv("FAKEDRV_LEDGER");
	reservations = getenv("FAKEDRV_RESERVATIONS");
	if (getenv("FAKEDRV_HANDLE_BASE"))
		next_handle = (uint32_t)strtoul(getenv("FAKEDRV_HANDLE_BASE"), NULL, 16);
	if (getenv("FAKEDRV_UUID") && strlen(getenv("FAKEDRV_UUID")) == 32) {
		const char *u = getenv("FAKEDRV_UUID");
		for (int i = 0; i < 16; i++) {
			char two[3] = { u[2 * i], u[2 * i + 1], 0 };
			board_uuid[i] = (uint8_t)strtoul(two, NULL, 16);
		}
		have_uuid = 1;
	}
	for (size_t i = 0; dir && i < NODES; i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, nodes[i].name);
		node_ok[i] = stat(path, &node_stat[i]) == 0;
	}
	real_ioctl = dlsym(RTLD_NEXT, "ioctl");
	real_close = dlsym(RTLD_NEXT, "close");
}

/* Which of nodes[] an fd is, or -1. */
static int node_of_fd(int fd)
{
	struct stat st;
	if (fstat(fd, &st) != 0)
		return -1;
	for (size_t i = 0; i < NODES; i++)
		if (node_ok[i] && st.st_ino == node_stat[i].st_ino && st.st_dev == node_stat[i].st_dev)
			return (int)i;
	return -1;
}

static int kind_of_fd(int fd)
{
	int node = node_of_fd(fd);
	return node < 0 ? NONE : nodes[node].kind;
}

static int readable(const void *p, size_t n)
{
	char buf[256];
	size_t off;
	if (trusting)
		return 1;
	for (off = 0; off < n; off += sizeof(buf)) {
		size_t k = n - off < sizeof(buf) ? n - off : sizeof(buf);
		struct iovec l = { buf, k }, r = { (char *)p + off, k };
		if (process_vm_readv(getpid(), &l, 1, &r, 1, 0) != (ssize_t)k)
			return 0;
	}
	return 1;
}

static void maybe_block(unsigned long req)
{
	if (!block_req || strtoul(block_req, NULL, 16) != req)
		return;
	if (block_note) {
		FILE *f = fopen(block_note, "w");
		if (f) {
			fprintf(f, "%d\n", getpid());
			fclose(f);
		}
	}
	for (;;)
		pause();
}

/* One RM escape with its argument (already known readable). */
static int rm_escape(unsigned nr, uint8_t *arg, uint32_t size)
{
	uint64_t ptr;
	uint32_t psize, cmd, *status;

	switch (nr) {
	case 0x2a: /* RM_CONTROL, NVOS54 */
		memcpy(&cmd, arg + 8, 4);
		memcpy(&ptr, arg + 16, 8);
		memcpy(&psize, arg + 24, 4);
		status = (uint32_t *)(arg + 28);
		if (psize && !readable((void *)ptr, psize)) {
			*status = NV_ERR_INVALID_ADDRESS;
			return 0;
		}
		if (cmd == CTRL_GET_CLASSLIST && psize >= 16) {
			uint32_t *num = (uint32_t *)ptr, i;
			uint64_t list;
			memcpy(&list, (uint8_t *)ptr + 8, 8);
			if (list == 0) {
				*num = 5;
			} else {
				if (!readable((void *)list, 4ull * *num)) {
					*status = NV_ERR_INVALID_ADDRESS;
					return 0;
				}
				for (i = 0; i < *num; i++)
					((uint32_t *)list)[i] = 0xc000u + i;
			}
		} else {
			for (uint32_t i = 0; i < psize; i++)
				((uint8_t *)ptr)[i] += 1;
		}
		*status = NV_OK;
		return 0;
	case 0x2b: /* RM_ALLOC, NVOS21 (32) or NVOS64 (48) */
		memcpy(&ptr, arg + 16, 8);
		memcpy(&psize, arg + (size == 48 ? 32 : 24), 4);
		status = (uint32_t *)(arg + (size == 48 ? 40 : 28));
		if (psize && !readable((void *)ptr, psize)) {
			*status = NV_ERR_INVALID_ADDRESS;
			return 0;
		}
		if (*(uint32_t *)(arg + 8) == 0)
			*(uint32_t *)(arg + 8) = next_handle++;
		if (psize)
			((uint8_t *)ptr)[0] ^= 0x80;
		*status = NV_OK;
		return 0;
	case 0x29: /* RM_FREE, NVOS00 */
		*(uint32_t *)(arg + 12) = NV_OK;
		return 0;
	case 200: /* CARD_INFO: an array of 72-byte entries */
		for (uint32_t i = 0; i + 72 <= size; i += 72) {
			memset(arg + i, 0, 72);
			arg[i] = i == 0; /* valid */
		}
		return 0;
	}
	return 0;
}

static int rm_ioctl(unsigned long req, uint8_t *arg)
{
	unsigned nr = _IOC_NR(req);
	uint32_t size = _IOC_SIZE(req);

	if (!readable(arg, size)) {
		errno = EFAULT;
		return -1;
	}
	if (nr == 211) { /* IOCTL_XFER_CMD {u32 cmd; u32 size; u64 ptr} */
		uint32_t cmd = *(uint32_t *)arg, isize = *(uint32_t *)(arg + 4);
		uint8_t *inner = (uint8_t *)*(uint64_t *)(arg + 8);
		if (!readable(inner, isize)) {
			errno = EFAULT;
			return -1;
		}
		return rm_escape(cmd, inner, isize);
	}
	return rm_escape(nr, arg, size);
}

/* UVM: raw request numbers; each params struct ends with NV_STATUS rmStatus. */
static int uvm_ioctl(unsigned long req, uint8_t *arg)
{
	static const struct { unsigned long nr; uint32_t size, status; } sizes[] = {
		{ 0x30000001, 16, 8 }, { 37, 40, 36 }, { 39, 8, 4 }, { 75, 8, 4 },
	};
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		if (sizes[i].nr != req)
			continue;
		if (!readable(arg, sizes[i].size)) {
			errno = EFAULT;
			return -1;
		}
		if (req == 39)
			arg[0] = 1; /* pageableMemAccess */
		*(uint32_t *)(arg + sizes[i].status) = NV_OK;
		return 0;
	}
	errno = EINVAL;
	return -1;
}

/* ------------------------------------------------------------ $FAKEDRV_STRICT: a small RM */

#define NODE_CTL 0 /* nodes[0] is nvidiactl */
#define MAX_OBJS 4096
#define MAX_COOKIES 1024
#define MAX_FDS 1024

static struct obj { uint32_t client, handle, parent, cls; int fd, live; } objs[MAX_OBJS];
static int nobjs;
static struct cookie { uint32_t client, memory; uint64_t value; int live; } cookies[MAX_COOKIES];
static int ncookies;
static uint8_t os_event_fd[MAX_FDS], uvm_ready[MAX_FDS];
static pthread_mutex_t rm_lock = PTHREAD_MUTEX_INITIALIZER;

/* The compute-mode reservations every process holds, counted in the file
 * $FAKEDRV_RESERVATIONS under a lock ({held, acquired ever}, two int32): an
 * acquire adds one; a release drops one and answers NV_ERR_STATE_IN_USE when
 * another is still held.  $FAKEDRV_RESERVATION_PEERS counts acquires ever,
 * not those held: a peer may acquire and release between two looks. */
static uint32_t reservation(int acquire)
{
	int fd = open(reservations, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	int32_t count[2] = { 0, 0 }; /* held, acquired ever */
	int peers = getenv("FAKEDRV_RESERVATION_PEERS") ? atoi(getenv("FAKEDRV_RESERVATION_PEERS")) : 0;
	uint32_t status = NV_OK;

	if (fd < 0)
		return NV_ERR_INVALID_ARGUMENT;
	flock(fd, LOCK_EX);
	if (pread(fd, count, sizeof(count), 0) < (ssize_t)sizeof(count[0]))
		count[0] = count[1] = 0;
	if (acquire) {
		count[0]++;
		count[1]++;
		for (int waited = 0; count[1] < peers && waited < 10000; waited++) {
			if (pwrite(fd, count, sizeof(count), 0) != sizeof(count))
				break;
			flock(fd, LOCK_UN);
			usleep(1000);
			flock(fd, LOCK_EX);
			if (pread(fd, count, sizeof(count), 0) != sizeof(count))
				break;
		}
	} else {
		if (count[0] > 1)
			status = NV_ERR_STATE_IN_USE;
		if (count[0] > 0)
			count[0]--;
	}
	if (pwrite(fd, count, sizeof(count), 0) != sizeof(count))
		status = NV_ERR_INVALID_ARGUMENT;
	flock(fd, LOCK_UN);
	real_close(fd);
	return status;
}

static void note(const char *fmt, ...)
{
	char line[256];
	va_list ap;
	int fd, n;

	if (!ledger)
		return;
	va_start(ap, fmt);
	n = vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	fd = open(ledger, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
	if (fd >= 0) {
		if (write(fd, line, (size_t)n) != n)
			n = 0;
		real_close(fd);
	}
}

static struct obj *find(uint32_t client, uint32_t handle)
{
	for (int i = 0; i < nobjs; i++)
		if (objs[i].live && objs[i].client == client && objs[i].handle == handle)
			return &objs[i];
	return NULL;
}

static int is_root_class(uint32_t cls)
{
	return cls == 0x0 || cls == 0x1 || cls == 0x41;
}

static uint32_t add(uint32_t client, uint32_t handle, uint32_t parent, uint32_t cls, int fd)
{
	if (nobjs >= MAX_OBJS)
		return NV_ERR_INVALID_ARGUMENT;
	objs[nobjs++] = (struct obj){ client, handle, parent, cls, fd, 1 };
	note("alloc %d %#x %#x\n", getpid(), client, handle);
	return NV_OK;
}

/* Free an object and everything under it. */
static void drop(uint32_t client, uint32_t handle)
{
	for (int i = 0; i < nobjs; i++)
		if (objs[i].live && objs[i].client == client && objs[i].parent == handle && objs[i].handle != handle)
			drop(client, objs[i].handle);
	struct obj *o = find(client, handle);
	if (o) {
		o->live = 0;
		note("free %d %#x %#x\n", getpid(), client, handle);
	}
}

/* Free the clients allocated through fd (what RM does when the fd's file is released). */
static void drop_clients_of(int fd, const char *why)
{
	for (int i = 0; i < nobjs; i++)
		if (objs[i].live && objs[i].handle == objs[i].client && objs[i].fd == fd) {
			note("%s %d %d %#x\n", why, getpid(), fd, objs[i].client);
			for (int j = 0; j < nobjs; j++)
				if (objs[j].client == objs[i].client)
					objs[j].live = 0;
		}
}

/* Whether [p, p + n) is mapped in this process (mincore answers ENOMEM for a hole). */
static int mapped(uint64_t p, uint64_t n)
{
	unsigned char vec[1];
	uint64_t first = p & ~4095ull, last = (p + (n ? n - 1 : 0)) & ~4095ull;
	return n && mincore((void *)first, 4096, vec) == 0 && mincore((void *)last, 4096, vec) == 0;
}

static int is_rm_fd(int fd)
{
	return kind_of_fd(fd) == RM;
}

static uint32_t alloc_object(int fd, uint32_t *hroot, uint32_t parent, uint32_t *hnew, uint32_t cls, uint8_t *params)
{
	if (is_root_class(cls)) {
		if (*hnew == 0)
			*hnew = next_handle++;
		if (find(*hnew, *hnew))
			return NV_ERR_INSERT_DUPLICATE_NAME;
		return add(*hnew, *hnew, 0, cls, fd);
	}
	if (!find(*hroot, *hroot))
		return NV_ERR_INVALID_OBJECT_HANDLE;
	if (parent != *hroot && !find(*hroot, parent))
		return NV_ERR_OBJECT_NOT_FOUND;
	if (cls == CLASS_OS_EVENT) { /* NV0005_ALLOC_PARAMETERS.data is the fd of an OS event */
		uint64_t data;
		if (!params || !readable(params, 24))
			return NV_ERR_INVALID_ARGUMENT;
		memcpy(&data, params + 16, 8);
		if (data >= MAX_FDS || !os_event_fd[data])
			return NV_ERR_INVALID_ARGUMENT;
	}
	if (*hnew == 0)
		*hnew = next_handle++;
	if (find(*hroot, *hnew))
		return NV_ERR_INSERT_DUPLICATE_NAME;
	return add(*hroot, *hnew, parent, cls, fd);
}

static int strict_escape(int fd, unsigned nr, uint8_t *arg, uint32_t size)
{
	uint32_t *w = (uint32_t *)arg;
	uint64_t ptr;

	switch (nr) {
	case 0x2b: { /* RM_ALLOC */
		uint32_t *status = (uint32_t *)(arg + (size == 48 ? 40 : 28));
		memcpy(&ptr, arg + 16, 8);
		*status = alloc_object(fd, &w[0], w[1], &w[2], w[3], (uint8_t *)ptr);
		return 0;
	}
	case 0x27: { /* RM_ALLOC_MEMORY: nv_ioctl_nvos02_parameters_with_fd */
		uint64_t limit;
		memcpy(&ptr, arg + 24, 8);
		memcpy(&limit, arg + 32, 8);
		if (w[3] == CLASS_OS_DESCRIPTOR && !readable((void *)ptr, limit + 1)) {
			w[10] = NV_ERR_INVALID_ADDRESS;
			return 0;
		}
		w[10] = alloc_object(fd, &w[0], w[1], &w[2], w[3], NULL);
		return 0;
	}
	case 0x29: /* RM_FREE */
		if (!find(w[0], w[0]))
			w[3] = NV_ERR_INVALID_OBJECT_HANDLE;
		else {
			drop(w[0], w[2]);
			w[3] = NV_OK;
		}
		return 0;
	case 0x2a: { /* RM_CONTROL */
		uint32_t cmd = w[2], psize = w[6];
		memcpy(&ptr, arg + 16, 8);
		if (!find(w[0], w[0])) {
			w[7] = NV_ERR_INVALID_CLIENT;
			return 0;
		}
		if (w[1] != w[0] && !find(w[0], w[1])) {
			w[7] = NV_ERR_OBJECT_NOT_FOUND;
			return 0;
		}
		if (cmd == CTRL_PERF_BOOST)
			note("unsafe %d %#x\n", getpid(), cmd);
		if (reservations && (cmd == CTRL_ACQUIRE_COMPUTE_MODE || cmd == CTRL_RELEASE_COMPUTE_MODE)) {
			w[7] = reservation(cmd == CTRL_ACQUIRE_COMPUTE_MODE);
			return 0;
		}
		if (cmd == CTRL_GET_GID_INFO && psize >= 28 && readable((void *)ptr, psize)) {
			uint32_t *gid = (uint32_t *)ptr;
			gid[2] = 16; /* length */
			memcpy((uint8_t *)ptr + 12, board_uuid, 16);
			w[7] = NV_OK;
			return 0;
		}
		return -2; /* the plain fake's answer */
	}
	case 0x4e: { /* RM_MAP_MEMORY: nv_ioctl_nvos33_parameters_with_fd */
		int mfd = *(int32_t *)(arg + 48);
		if (!is_rm_fd(mfd)) {
			w[10] = NV_ERR_INVALID_ARGUMENT;
			return 0;
		}
		if (!find(w[0], w[2])) {
			w[10] = NV_ERR_OBJECT_NOT_FOUND;
			return 0;
		}
		if (ncookies >= MAX_COOKIES) {
			w[10] = NV_ERR_INVALID_ARGUMENT;
			return 0;
		}
		cookies[ncookies] = (struct cookie){ w[0], w[2], ((uint64_t)next_handle << 12) + ((uint64_t)ncookies << 16), 1 };
		memcpy(arg + 32, &cookies[ncookies].value, 8);
		ncookies++;
		w[10] = NV_OK;
		return 0;
	}
	case 0x4f: /* RM_UNMAP_MEMORY: NVOS34 */
	case 0x5e: { /* RM_UPDATE_DEVICE_MAPPING_INFO: NVOS56 */
		uint32_t *status = &w[nr == 0x4f ? 6 : 8];
		memcpy(&ptr, arg + 16, 8);
		*status = NV_ERR_INVALID_ARGUMENT;
		for (int i = 0; i < ncookies; i++)
			if (cookies[i].live && cookies[i].client == w[0] && cookies[i].memory == w[2] && cookies[i].value == ptr) {
				uint64_t cpu;
				memcpy(&cpu, arg + 24, 8);
				if (nr == 0x5e && !mapped(cpu, 1)) {
					*status = NV_ERR_INVALID_ADDRESS;
					break;
				}
				cookies[i].live = nr == 0x5e;
				*status = NV_OK;
			}
		return 0;
	}
	case 201: { /* REGISTER_FD: the control fd must be nvidiactl */
		int ctl = *(int32_t *)arg;
		if (node_of_fd(ctl) != NODE_CTL) {
			errno = EINVAL;
			return -1;
		}
		return 0;
	}
	case 206: /* ALLOC_OS_EVENT */
	case 207: /* FREE_OS_EVENT */
		if (w[2] >= MAX_FDS || !is_rm_fd((int)w[2])) {
			w[3] = NV_ERR_INVALID_ARGUMENT;
			return 0;
		}
		os_event_fd[w[2]] = nr == 206;
		w[3] = NV_OK;
		return 0;
	}
	return -2;
}

/* UVM with its checks: init state per fd, the board's UUID, rmCtrlFd and handles, mapped ranges. */
static int strict_uvm(int fd, unsigned long req, uint8_t *arg)
{
	static const struct { unsigned long nr; uint32_t size, status; } sizes[] = {
		{ 0x30000001, 16, 8 }, { 75, 8, 4 }, { 39, 8, 4 }, { 37, 40, 36 }, { 38, 20, 16 }, { 25, 32, 28 },
		{ 73, 24, 16 }, { 33, 9264, 9260 }, { 34, 24, 16 },
	};
	uint32_t status = NV_OK, *rm_status = NULL;
	uint64_t base, length;

	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
		if (sizes[i].nr == req) {
			if (!readable(arg, sizes[i].size)) {
				errno = EFAULT;
				return -1;
			}
			rm_status = (uint32_t *)(arg + sizes[i].status);
		}
	if (!rm_status) {
		errno = EINVAL;
		return -1;
	}
	memcpy(&base, arg, 8);
	memcpy(&length, arg + 8, 8);
	if (req == 0x30000001) {
		if (fd < MAX_FDS)
			uvm_ready[fd] = 1;
	} else if (req == 75) {
		int32_t ufd = *(int32_t *)arg;
		if (ufd < 0 || ufd >= MAX_FDS || !uvm_ready[ufd] || kind_of_fd(ufd) != UVM)
			status = NV_ERR_INVALID_ARGUMENT;
	} else if (fd >= MAX_FDS || !uvm_ready[fd]) {
		status = 0x16; /* NV_ERR_ILLEGAL_ACTION: UVM's init check */
	} else if (req == 37 || req == 38) {
		if (have_uuid && memcmp(arg, board_uuid, 16) != 0)
			status = NV_ERR_GPU_UUID_NOT_FOUND;
	} else if (req == 25) {
		uint32_t *w = (uint32_t *)(arg + 16);
		if (have_uuid && memcmp(arg, board_uuid, 16) != 0)
			status = NV_ERR_GPU_UUID_NOT_FOUND;
		else if (node_of_fd((int)w[0]) != NODE_CTL)
			status = NV_ERR_INVALID_ARGUMENT;
		else if (!find(w[1], w[1]))
			status = NV_ERR_INVALID_CLIENT;
		else if (!find(w[1], w[2]))
			status = NV_ERR_OBJECT_NOT_FOUND;
	} else if (req == 73 || req == 34) {
		if (!mapped(base, length ? length : 1))
			status = NV_ERR_INVALID_ADDRESS;
	} else if (req == 33) {
		uint32_t *w = (uint32_t *)(arg + 9248);
		if (have_uuid && memcmp(arg + 24, board_uuid, 16) != 0)
			status = NV_ERR_GPU_UUID_NOT_FOUND;
		else if (node_of_fd((int)w[0]) != NODE_CTL)
			status = NV_ERR_INVALID_ARGUMENT;
		else if (!find(w[1], w[1]))
			status = NV_ERR_INVALID_CLIENT;
		else if (!find(w[1], w[2]))
			status = NV_ERR_OBJECT_NOT_FOUND;
		else if (!mapped(base, length))
			status = NV_ERR_INVALID_ADDRESS;
	}
	if (req == 39)
		arg[0] = 1; /* pageableMemAccess */
	*rm_status = status;
	return 0;
}

static int strict_ioctl(int fd, int kind, unsigned long req, uint8_t *arg)
{
	unsigned nr = _IOC_NR(req);
	uint32_t size = _IOC_SIZE(req);
	int ret;

	pthread_mutex_lock(&rm_lock);
	if (kind == UVM) {
		ret = strict_uvm(fd, req, arg);
	} else if (!readable(arg, size)) {
		errno = EFAULT;
		ret = -1;
	} else {
		ret = strict_escape(fd, nr, arg, size);
		if (ret == -2)
			ret = rm_ioctl(req, arg);
	}
	pthread_mutex_unlock(&rm_lock);
	return ret;
}

int close(int fd)
{
	resolve();
	if (strict) {
		int node = node_of_fd(fd);
		pthread_mutex_lock(&rm_lock);
		if (node >= 0 && nodes[node].kind == RM)
			drop_clients_of(fd, "closefree");
		if (node >= 0 && fd < MAX_FDS) {
			uvm_ready[fd] = 0;
			os_event_fd[fd] = 0;
		}
		pthread_mutex_unlock(&rm_lock);
	}
	return real_close(fd);
}

/* A process that exits normally has its fds released by the kernel: RM frees its clients. */
__attribute__((destructor)) static void released_at_exit(void)
{
	if (!strict)
		return;
	for (int i = 0; i < nobjs; i++)
		if (objs[i].live && objs[i].handle == objs[i].client) {
			note("exitfree %d %#x\n", getpid(), objs[i].client);
			objs[i].live = 0;
		}
}

int ioctl(int fd, unsigned long req, ...)
{
	va_list ap;
	va_start(ap, req);
	void *arg = va_arg(ap, void *);
	va_end(ap);
	resolve();
	int kind = kind_of_fd(fd);
	if (kind == NONE)
		return real_ioctl(fd, req, arg);
	maybe_block(req);
	if (strict)
		return strict_ioctl(fd, kind, req, arg);
	return kind == UVM ? uvm_ioctl(req, arg) : rm_ioctl(req, arg);
}
