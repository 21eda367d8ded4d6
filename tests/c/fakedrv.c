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
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#define NV_OK 0
#define NV_ERR_INVALID_ADDRESS 0x1e
#define CTRL_GET_CLASSLIST 0x00800201u

enum { NONE, RM, UVM };

static int (*real_ioctl)(int, unsigned long, ...);

/* The device files, by inode: an fd is ours however it was made (open,
 * dup, fork, exec). */
static const struct { const char *name; int kind; } nodes[] = {
	{ "nvidiactl", RM }, { "nvidia0", RM }, { "nvidia1", RM }, { "nvidia-uvm", UVM }, { "nvidia-uvm-tools", UVM },
};
#define NODES (sizeof(nodes) / sizeof(nodes[0]))
static struct stat node_stat[NODES];
static int node_ok[NODES];

static int trusting;
static const char *block_req, *block_note;

static void resolve(void)
{
	const char *dir = getenv("RMTRACE_TEST_DEVICE_DIR");
	char path[4096];

	if (real_ioctl)
		return;
	trusting = getenv("FAKEDRV_TRUSTING") != NULL;
	block_req = getenv("FAKEDRV_BLOCK_REQ");
	block_note = getenv("FAKEDRV_BLOCK_NOTE");
	for (size_t i = 0; dir && i < NODES; i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, nodes[i].name);
		node_ok[i] = stat(path, &node_stat[i]) == 0;
	}
	real_ioctl = dlsym(RTLD_NEXT, "ioctl");
}

static int kind_of_fd(int fd)
{
	struct stat st;
	if (fstat(fd, &st) != 0)
		return NONE;
	for (size_t i = 0; i < NODES; i++)
		if (node_ok[i] && st.st_ino == node_stat[i].st_ino && st.st_dev == node_stat[i].st_dev)
			return nodes[i].kind;
	return NONE;
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

static uint32_t next_handle = 0xcaf00000u;

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
	return kind == UVM ? uvm_ioctl(req, arg) : rm_ioctl(req, arg);
}
