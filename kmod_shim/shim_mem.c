/*
 * shim_mem.c: reading the traced program's memory without ever faulting.
 *
 * The program hands the driver pointers that may be bad; the driver answers
 * EFAULT or an NV_ERR status, and so must we: a bad pointer becomes an
 * UNREADABLE buffer, never a SIGSEGV in the program.  Reads go through
 * process_vm_readv on our own pid (the kernel checks the pages), or, where
 * that call is refused, pread on /proc/self/mem.  The one shortcut: bytes
 * between the current stack pointer and the top of this thread's stack
 * mapping are live stack, mapped by definition, and are copied directly;
 * ioctl arguments usually live there.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "shim.h"

enum read_method { READ_VM = 0, READ_PROCMEM = 1 };

static int method = READ_VM;
static int procmem_fd = -1;
static uint64_t procmem_gen; /* /proc/self/mem names the mm it was opened in */

static int in_live_stack(const struct shim_thread *t, uint64_t addr, size_t n)
{
	uintptr_t sp = (uintptr_t)__builtin_frame_address(0);
	return t->stack_hi && t->stack_lo <= sp && sp < t->stack_hi && addr >= sp && addr + n <= t->stack_hi &&
	       addr + n >= addr;
}

static int read_procmem(void *dst, uint64_t addr, size_t n)
{
	if (procmem_fd < 0 || procmem_gen != shim_proc.gen) {
		if (procmem_fd >= 0)
			syscall(SYS_close, procmem_fd);
		procmem_fd = (int)syscall(SYS_openat, AT_FDCWD, "/proc/self/mem", O_RDONLY | O_CLOEXEC);
		procmem_gen = shim_proc.gen;
		if (procmem_fd < 0)
			return -1;
	}
	return pread(procmem_fd, dst, n, (off_t)addr) == (ssize_t)n ? 0 : -1;
}

int shim_read(struct shim_thread *t, void *dst, uint64_t addr, size_t n)
{
	struct iovec local = { dst, n }, remote = { (void *)(uintptr_t)addr, n };
	ssize_t got;

	if (n == 0)
		return 0;
	if (addr == 0)
		return -1;
	if (in_live_stack(t, addr, n)) {
		memcpy(dst, (const void *)(uintptr_t)addr, n);
		return 0;
	}
	if (method == READ_PROCMEM)
		return read_procmem(dst, addr, n);
	got = process_vm_readv(shim_proc.pid, &local, 1, &remote, 1, 0);
	if (got == (ssize_t)n)
		return 0;
	if (got < 0 && (errno == ENOSYS || errno == EPERM)) {
		method = READ_PROCMEM;
		return read_procmem(dst, addr, n);
	}
	return -1;
}

long shim_read_str(struct shim_thread *t, char *dst, uint64_t addr, size_t cap)
{
	size_t have = 0;

	if (cap == 0 || addr == 0)
		return -1;
	while (have < cap - 1) {
		/* Never ask for bytes past the page end: the next page may be unmapped. */
		size_t page_left = 4096 - ((addr + have) & 4095);
		size_t want = cap - 1 - have < page_left ? cap - 1 - have : page_left;
		char *nul;
		if (shim_read(t, dst + have, addr + have, want) != 0)
			return -1;
		nul = memchr(dst + have, 0, want);
		if (nul)
			return nul - dst;
		have += want;
	}
	dst[have] = 0;
	return (long)have;
}
