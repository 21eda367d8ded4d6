/*
 * shim_mem.c: reading the traced program's memory without ever faulting it.
 *
 * The program hands the driver pointers that may be bad; the driver answers
 * EFAULT or an NV_ERR status, and so must we: a bad pointer becomes an
 * UNREADABLE buffer, never a SIGSEGV in the program.
 *
 * The fast path is a plain copy that may fault, the way the kernel's
 * copy_from_user does: shim_copy (below, in assembly) is a few moves, and
 * the shim's SIGSEGV/SIGBUS handler, finding the fault inside it, moves the
 * thread on to shim_copy's failure return instead of delivering the signal.  Every other fault goes to the program's own
 * handler, or to the default action, exactly as if we were not there: the
 * shim keeps its handler installed and takes the program's sigaction and
 * signal calls for SIGSEGV and SIGBUS as what to chain to (the signal
 * chaining of the JVM's libjsig).  No system call, no setjmp: a read costs
 * the copy.
 *
 * The slow path, process_vm_readv on our own pid (or pread on
 * /proc/self/mem where that is refused), is for a thread that has SIGSEGV or
 * SIGBUS blocked: the kernel kills a process whose thread faults with the
 * signal blocked, so that thread must not fault.  The shim follows each
 * thread's mask through sigprocmask and pthread_sigmask (and asks the kernel
 * once per thread), and leaves SIGSEGV and SIGBUS out of the masks the
 * program's signal handlers run with (blocking them there would only have
 * made a fault in the handler fatal).
 *
 * Each thread's ring counts the reads of each path (read_copy, read_syscall,
 * read_unreadable), so a trace says how often the slow path ran.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/ucontext.h>
#include <sys/uio.h>
#include <unistd.h>

#include "shim.h"

/* shim_copy(dst, src, n) in rdi, rsi, rdx.  Every instruction between shim_copy and
 * shim_copy_end may fault on src (dst is the ring or our own memory), and a fault there
 * resumes at shim_copy_fixup.  Up to 256 bytes (nearly every buffer of an ioctl) the copy
 * is a few moves, as a libc memcpy does small sizes: two that overlap for 4-16 bytes and
 * for 17-32 (8- and 16-byte ones), four 16-byte ones for 33-64, eight for 65-128 (a class
 * list, a handle array), 16-byte blocks and an overlapping last one beyond; no load
 * reaches outside [src, src + n).  Larger buffers
 * go by `rep movsb`, which costs tens of cycles to start, more than a small copy takes. */
extern const char shim_copy_end[], shim_copy_fixup[];
__asm__(".section .text.hot.shim_copy,\"ax\",@progbits\n" /* beside the hot C (SHIM_HOT) */
	".p2align 4\n"
	".globl shim_copy\n"
	".hidden shim_copy\n"
	".type shim_copy, @function\n"
	"shim_copy:\n"
	"	cmp $16, %rdx\n"
	"	jbe 6f\n"
	"	cmp $32, %rdx\n"
	"	ja 2f\n"
	"	movdqu (%rsi), %xmm0\n" /* 17..32 */
	"	movdqu -16(%rsi,%rdx), %xmm1\n"
	"	movdqu %xmm0, (%rdi)\n"
	"	movdqu %xmm1, -16(%rdi,%rdx)\n"
	"	xor %eax, %eax\n"
	"	ret\n"
	"2:	cmp $64, %rdx\n"
	"	ja 3f\n"
	"	movdqu (%rsi), %xmm0\n" /* 33..64 */
	"	movdqu 16(%rsi), %xmm1\n"
	"	movdqu -32(%rsi,%rdx), %xmm2\n"
	"	movdqu -16(%rsi,%rdx), %xmm3\n"
	"	movdqu %xmm0, (%rdi)\n"
	"	movdqu %xmm1, 16(%rdi)\n"
	"	movdqu %xmm2, -32(%rdi,%rdx)\n"
	"	movdqu %xmm3, -16(%rdi,%rdx)\n"
	"	xor %eax, %eax\n"
	"	ret\n"
	"3:	cmp $128, %rdx\n"
	"	ja 10f\n"
	"	movdqu (%rsi), %xmm0\n" /* 65..128: 64 bytes from each end */
	"	movdqu 16(%rsi), %xmm1\n"
	"	movdqu 32(%rsi), %xmm2\n"
	"	movdqu 48(%rsi), %xmm3\n"
	"	movdqu -64(%rsi,%rdx), %xmm4\n"
	"	movdqu -48(%rsi,%rdx), %xmm5\n"
	"	movdqu -32(%rsi,%rdx), %xmm6\n"
	"	movdqu -16(%rsi,%rdx), %xmm7\n"
	"	movdqu %xmm0, (%rdi)\n"
	"	movdqu %xmm1, 16(%rdi)\n"
	"	movdqu %xmm2, 32(%rdi)\n"
	"	movdqu %xmm3, 48(%rdi)\n"
	"	movdqu %xmm4, -64(%rdi,%rdx)\n"
	"	movdqu %xmm5, -48(%rdi,%rdx)\n"
	"	movdqu %xmm6, -32(%rdi,%rdx)\n"
	"	movdqu %xmm7, -16(%rdi,%rdx)\n"
	"	xor %eax, %eax\n"
	"	ret\n"
	"10:	cmp $256, %rdx\n"
	"	ja 4f\n"
	"	movdqu -16(%rsi,%rdx), %xmm1\n" /* 129..256: the last 16 bytes, then blocks */
	"	lea -16(%rdi,%rdx), %r8\n"
	"	mov %rdx, %rcx\n"
	"	shr $4, %rcx\n"
	"5:	movdqu (%rsi), %xmm0\n"
	"	movdqu %xmm0, (%rdi)\n"
	"	add $16, %rsi\n"
	"	add $16, %rdi\n"
	"	dec %rcx\n"
	"	jnz 5b\n"
	"	movdqu %xmm1, (%r8)\n"
	"	xor %eax, %eax\n"
	"	ret\n"
	"4:	mov %rdx, %rcx\n"
	"	rep movsb\n"
	"	xor %eax, %eax\n"
	"	ret\n"
	"6:	cmp $8, %rdx\n" /* 0..16 */
	"	jb 7f\n"
	"	mov (%rsi), %rax\n" /* 8..16 */
	"	mov -8(%rsi,%rdx), %rcx\n"
	"	mov %rax, (%rdi)\n"
	"	mov %rcx, -8(%rdi,%rdx)\n"
	"	xor %eax, %eax\n"
	"	ret\n"
	"7:	cmp $4, %rdx\n"
	"	jb 8f\n"
	"	mov (%rsi), %eax\n" /* 4..7 */
	"	mov -4(%rsi,%rdx), %ecx\n"
	"	mov %eax, (%rdi)\n"
	"	mov %ecx, -4(%rdi,%rdx)\n"
	"	xor %eax, %eax\n"
	"	ret\n"
	"8:	test %rdx, %rdx\n" /* 0..3 */
	"	jz 9f\n"
	"	movzbl (%rsi), %eax\n"
	"	mov %al, (%rdi)\n"
	"	inc %rsi\n"
	"	inc %rdi\n"
	"	dec %rdx\n"
	"	jmp 8b\n"
	"9:	xor %eax, %eax\n"
	"	ret\n"
	".globl shim_copy_end\n"
	".hidden shim_copy_end\n"
	"shim_copy_end:\n"
	".globl shim_copy_fixup\n"
	".hidden shim_copy_fixup\n"
	"shim_copy_fixup:\n"
	"	mov $-1, %rax\n"
	"	ret\n"
	".size shim_copy, .-shim_copy\n"
	".text\n");

/* ------------------------------------------------------------ signal chaining */

#define N_GUARDED 2
static const int guarded_sig[N_GUARDED] = { SIGSEGV, SIGBUS };

/* What the program asked for, per guarded signal: two slots and the index of the
 * current one, so a handler running while another thread installs one reads a
 * whole struct. */
static struct sigaction program_act[N_GUARDED][2];
static int program_slot[N_GUARDED];

static int guarded_index(int sig)
{
	return sig == SIGSEGV ? 0 : sig == SIGBUS ? 1 : -1;
}

static void chain(int i, int sig, siginfo_t *si, void *ctx)
{
	const struct sigaction *a = &program_act[i][__atomic_load_n(&program_slot[i], __ATOMIC_ACQUIRE)];
	sigset_t mask, old;

	if (!(a->sa_flags & SA_SIGINFO) && (a->sa_handler == SIG_DFL || a->sa_handler == SIG_IGN)) {
		/* The default action (a synchronous fault is never ignored by the kernel either):
		 * restore it and let the fault happen again, or the sent signal arrive again. */
		struct sigaction dfl;
		memset(&dfl, 0, sizeof(dfl));
		dfl.sa_handler = SIG_DFL;
		shim_real.sigaction(sig, &dfl, NULL);
		if (si->si_code <= 0)
			raise(sig);
		return;
	}
	mask = a->sa_mask; /* what the kernel would have blocked while the program's handler runs */
	if (!(a->sa_flags & SA_NODEFER))
		sigaddset(&mask, sig);
	syscall(SYS_rt_sigprocmask, SIG_BLOCK, &mask, &old, _NSIG / 8);
	if (a->sa_flags & SA_SIGINFO)
		a->sa_sigaction(sig, si, ctx);
	else
		a->sa_handler(sig);
	syscall(SYS_rt_sigprocmask, SIG_SETMASK, &old, NULL, _NSIG / 8);
	if (a->sa_flags & SA_RESETHAND) {
		int next = !program_slot[i];
		memset(&program_act[i][next], 0, sizeof(program_act[i][next]));
		program_act[i][next].sa_handler = SIG_DFL;
		__atomic_store_n(&program_slot[i], next, __ATOMIC_RELEASE);
	}
}

static void on_fault(int sig, siginfo_t *si, void *ctx)
{
	ucontext_t *uc = ctx;
	greg_t rip = uc->uc_mcontext.gregs[REG_RIP];
	int i = guarded_index(sig);

	if (si->si_code > 0 && rip >= (greg_t)(uintptr_t)shim_copy && rip < (greg_t)(uintptr_t)shim_copy_end) {
		uc->uc_mcontext.gregs[REG_RIP] = (greg_t)(uintptr_t)shim_copy_fixup;
		return; /* our copy faulted: it returns -1 */
	}
	chain(i, sig, si, ctx);
}

void shim_guard_install(void)
{
	struct sigaction ours;
	int i;

	if (!shim_real.sigaction)
		return;
	memset(&ours, 0, sizeof(ours));
	ours.sa_sigaction = on_fault;
	ours.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART | SA_NODEFER;
	sigemptyset(&ours.sa_mask);
	for (i = 0; i < N_GUARDED; i++)
		if (shim_real.sigaction(guarded_sig[i], &ours, &program_act[i][0]) != 0)
			return;
	__atomic_store_n(&shim_proc.guard_on, 1, __ATOMIC_RELEASE);
}

/* The program's sigaction, for SIGSEGV and SIGBUS once the guard is on: kept, not installed. */
int shim_sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
	int i = guarded_index(sig);

	if (i < 0 || !__atomic_load_n(&shim_proc.guard_on, __ATOMIC_ACQUIRE)) {
		struct sigaction copy;
		if (act && (sigismember(&act->sa_mask, SIGSEGV) == 1 || sigismember(&act->sa_mask, SIGBUS) == 1)) {
			copy = *act; /* a fault in the handler kills the process either way: keep our reads safe there */
			sigdelset(&copy.sa_mask, SIGSEGV);
			sigdelset(&copy.sa_mask, SIGBUS);
			act = &copy;
		}
		return shim_real.sigaction(sig, act, old);
	}
	if (old)
		*old = program_act[i][__atomic_load_n(&program_slot[i], __ATOMIC_ACQUIRE)];
	if (act) {
		int next = !program_slot[i];
		program_act[i][next] = *act;
		__atomic_store_n(&program_slot[i], next, __ATOMIC_RELEASE);
	}
	return 0;
}

/* ------------------------------------------------------------ the thread's mask */

static int blocks_faults(const sigset_t *mask)
{
	return sigismember(mask, SIGSEGV) == 1 || sigismember(mask, SIGBUS) == 1;
}

void shim_mask_changed(const sigset_t *now)
{
	shim_self_thread()->faults = blocks_faults(now) ? FAULTS_BLOCKED : FAULTS_DELIVERED;
}

/* Whether a fault in this thread reaches our handler (it kills the process while blocked). */
static int faults_delivered(struct shim_thread *t)
{
	if (unlikely(t->faults == FAULTS_UNKNOWN)) {
		sigset_t now;
		sigemptyset(&now);
		if (syscall(SYS_rt_sigprocmask, SIG_BLOCK, NULL, &now, _NSIG / 8) != 0)
			return 0;
		t->faults = blocks_faults(&now) ? FAULTS_BLOCKED : FAULTS_DELIVERED;
	}
	return t->faults == FAULTS_DELIVERED;
}

/* ------------------------------------------------------------ reading */

enum read_method { READ_VM = 0, READ_PROCMEM = 1 };

static int method = READ_VM;
static int procmem_fd = -1;
static uint64_t procmem_gen; /* /proc/self/mem names the mm it was opened in */

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
	return pread(procmem_fd, dst, n, (off_t)addr) == (ssize_t)n ? SHIM_READ_SYSCALL : -1;
}

/* The kernel reads for us: process_vm_readv on our own pid, or /proc/self/mem where that is refused. */
static int read_syscall(void *dst, uint64_t addr, size_t n)
{
	struct iovec local = { dst, n }, remote = { (void *)(uintptr_t)addr, n };
	ssize_t got;

	if (method == READ_PROCMEM)
		return read_procmem(dst, addr, n);
	got = process_vm_readv(shim_proc.pid, &local, 1, &remote, 1, 0);
	if (got == (ssize_t)n)
		return SHIM_READ_SYSCALL;
	if (got < 0 && (errno == ENOSYS || errno == EPERM)) {
		method = READ_PROCMEM;
		return read_procmem(dst, addr, n);
	}
	return -1;
}

/* shim_read's way when its inline test fails: the thread's mask not yet known, or blocking
 * faults; a bad address; no guard. */
SHIM_COLD int shim_read_slow(struct shim_thread *t, void *dst, uint64_t addr, size_t n)
{
	int saved = errno, how;

	if (n == 0)
		return SHIM_READ_COPY;
	if (addr == 0 || addr + n < addr)
		return -1;
	if (__atomic_load_n(&shim_proc.guard_on, __ATOMIC_RELAXED) && faults_delivered(t))
		return shim_copy(dst, (const void *)(uintptr_t)addr, n) == 0 ? SHIM_READ_COPY : -1;
	how = read_syscall(dst, addr, n);
	errno = saved;
	return how;
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
		if (shim_read(t, dst + have, addr + have, want) < 0)
			return -1;
		nul = memchr(dst + have, 0, want);
		if (nul)
			return nul - dst;
		have += want;
	}
	dst[have] = 0;
	return (long)have;
}
