/*
 * shim.h: internals of the capture shim (the LD_PRELOAD interposer).
 *
 * Pieces, one file each:
 *   interposer.c    the hooked libc entry points and process start
 *   shim_state.c    process and thread state: init, fork detection, rings
 *   shim_mem.c      reading the traced program's memory without crashing it
 *   shim_record.c   building one record in place in the ring
 *   shim_ioctl.c    which buffers an RM or UVM ioctl carries
 *
 * Nothing here is exported: the library is built with -fvisibility=hidden
 * and only the hooks (SHIM_EXPORT) are visible to the dynamic linker.
 *
 * RMTRACE_TEST_HOOKS (the tests' build only, kmod_shim/shim_build.py) adds
 * RMTRACE_TEST_DEVICE_DIR: files of that folder are taken for the NVIDIA
 * device nodes.  The installed library has no such override.
 */
#ifndef RMTRACE_SHIM_H
#define RMTRACE_SHIM_H

#include <limits.h>
#include <linux/ioctl.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>

#include "rmtrace_record.h"
#include "rmtrace_ring.h"

#define SHIM_EXPORT __attribute__((visibility("default")))
#define likely(x)   __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)
/* The traced ioctl's path, placed together (.text.hot) so that after the driver's microseconds have
 * evicted it, it comes back in few cache lines and pages; the ways taken rarely go to .text.unlikely. */
#define SHIM_HOT    __attribute__((hot))
#define SHIM_COLD   __attribute__((cold))

/* ----------------------------------------------------------- the fd table
 * One byte per fd number saying which NVIDIA device it is, set on open by
 * path comparison (never readlink on the hot path).  fds at or above
 * SHIM_FD_MAX are not traced. */
enum shim_fd_kind {
	FD_NONE      = 0,
	FD_OTHER     = 1, /* another /dev/nvidia* node: open/close only */
	FD_CTL       = 2, /* /dev/nvidiactl: RM                        */
	FD_GPU       = 3, /* /dev/nvidia<N>: RM                        */
	FD_UVM       = 4, /* /dev/nvidia-uvm: UVM                      */
	FD_UVM_TOOLS = 5, /* /dev/nvidia-uvm-tools: UVM                */
};
#define SHIM_FD_MAX (1 << 20)

extern uint8_t shim_fd_kinds[SHIM_FD_MAX];

static inline unsigned fd_kind(int fd)
{
	return (unsigned)fd < SHIM_FD_MAX ? __atomic_load_n(&shim_fd_kinds[fd], __ATOMIC_RELAXED) : FD_NONE;
}

static inline int kind_is_ioctl_traced(unsigned kind)
{
	return kind >= FD_CTL;
}

static inline int kind_is_uvm(unsigned kind)
{
	return kind == FD_UVM || kind == FD_UVM_TOOLS;
}

void fd_set_kind(int fd, unsigned kind);
unsigned classify_path(const char *path);

/* ------------------------------------------------------ the real functions */
struct shim_real {
	int (*ioctl)(int, unsigned long, ...);
	int (*open)(const char *, int, ...);
	int (*open64)(const char *, int, ...);
	int (*openat)(int, const char *, int, ...);
	int (*openat64)(int, const char *, int, ...);
	int (*open_2)(const char *, int);
	int (*open64_2)(const char *, int);
	int (*openat_2)(int, const char *, int);
	int (*openat64_2)(int, const char *, int);
	int (*close)(int);
	int (*close_range)(unsigned, unsigned, int);
	void (*closefrom)(int);
	int (*dup)(int);
	int (*dup2)(int, int);
	int (*dup3)(int, int, int);
	int (*fcntl)(int, int, ...);
	int (*fcntl64)(int, int, ...);
	int (*sigaction)(int, const struct sigaction *, struct sigaction *);
	sighandler_t (*signal)(int, sighandler_t);
	int (*sigprocmask)(int, const sigset_t *, sigset_t *);
	int (*pthread_sigmask)(int, const sigset_t *, sigset_t *);
	void *(*mmap)(void *, size_t, int, int, int, off_t);
	void *(*mmap64)(void *, size_t, int, int, int, off_t);
	int (*munmap)(void *, size_t);
	pid_t (*fork)(void);
	int (*execve)(const char *, char *const[], char *const[]);
	int (*execvpe)(const char *, char *const[], char *const[]);
	int (*fexecve)(int, char *const[], char *const[]);
	int (*execveat)(int, const char *, char *const[], char *const[], int);
	int (*posix_spawn)(pid_t *, const char *, const void *, const void *, char *const[], char *const[]);
	int (*posix_spawnp)(pid_t *, const char *, const void *, const void *, char *const[], char *const[]);
	void (*exit_)(int);
	void (*Exit)(int);
};
extern struct shim_real shim_real;
void shim_resolve(void);
/* The real function: resolved on first use, also before our constructor ran. */
#define RESOLVED(field) (unlikely(shim_real.ioctl == NULL) ? shim_resolve() : (void)0, shim_real.field)

/* ------------------------------------------------------- process state */
struct shim_process {
	/* What a traced ioctl reads, in the first cache line (the struct is aligned to one): after the
	 * driver's microseconds have evicted the shim's data, one line to fetch again, not three. */
	uint64_t image_id;                /* this process image (exec or fork)   */
	uint64_t gen;                     /* == image_id; rings made under it    */
	struct rmt_session_ctl *session;  /* shared, read-write                  */
	uint64_t ring_size;
	uint32_t max_record;              /* ring_size / 2                       */
	uint32_t max_buffer;
	uint32_t fast_end;                /* min(SHIM_FAST_ROOM, max_record): rec_fast */
	uint32_t rights_size;
	pid_t pid;
	uint8_t tsc;                      /* RMT_CTAB_TSC: shim_now extrapolates rdtsc */
	int active;                       /* a session was found at start        */
	int guard_on;                     /* atomic: the SIGSEGV/SIGBUS handler that makes shim_copy safe is in */
	/* The rest: written (calls, once per CALL_ID_BLOCK calls of a thread) or read rarely. */
	uint64_t calls;                   /* atomic: call ids handed out         */
	int lossy;
	int exit_recorded;
	const struct rmt_ctab_header *ctab;
	const struct rmt_ctab_uvm *uvm;
	const struct rmt_ctab_ctrl *ctrl;
	const struct rmt_ctab_ptr *ptr;
	const struct rmt_ctab_class *cls;
	char session_dir[PATH_MAX];
	char self_path[PATH_MAX];         /* this library, for LD_PRELOAD        */
#ifdef RMTRACE_TEST_HOOKS
	char test_dir[PATH_MAX];          /* RMTRACE_TEST_DEVICE_DIR, or empty   */
	uint32_t test_stall_op;           /* RMTRACE_TEST_STALL=OP:MS: records of */
	uint32_t test_stall_ms;           /*   RM escape OP sleep MS ms between  */
	                                  /*   their time and their publication  */
#endif
	char dev_prefix[PATH_MAX];        /* "/dev/", or "<test dir>/" in a test build */
	size_t dev_prefix_len;
} __attribute__((aligned(64)));
_Static_assert(offsetof(struct shim_process, calls) == 64, "the ioctl's fields fill the first line exactly");
extern struct shim_process shim_proc;

void shim_init(void);
/* Whether this process records; also notices a fork (reset) cheaply. */
int shim_active(void);
/* CLOCK_MONOTONIC in ns, through the vDSO. */
static inline uint64_t shim_monotonic(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline uint64_t shim_rdtsc(void)
{
	uint32_t lo, hi;
	__asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
	return (uint64_t)hi << 32 | lo;
}

/* ------------------------------------------------------- thread state */
enum shim_faults { FAULTS_UNKNOWN = 0, FAULTS_DELIVERED = 1, FAULTS_BLOCKED = 2 };

struct shim_thread {
	/* What a traced ioctl reads and writes, in the first two cache lines (the struct is aligned to one). */
	struct rmt_ring_ctl *ctl;
	uint8_t *data;
	uint64_t mask;
	uint64_t head;          /* our copy of ctl->head                     */
	uint64_t tail_seen;     /* ctl->tail when last loaded (it only grows) */
	uint64_t gen;           /* shim_proc.gen the ring was made under     */
	uint64_t ids_next;      /* call ids handed out by this thread:       */
	uint64_t ids_end;       /*   [ids_next, ids_end) of image ids_gen     */
	uint64_t ids_gen;
	uint64_t last_ns;       /* time of this thread's last record: a floor for its next */
	uint64_t clk_tsc;       /* shim_now's last sample of (TSC, CLOCK_MONOTONIC) ...   */
	uint64_t clk_ns;
	uint64_t clk_mult;      /* ns per TSC tick << 32 between the two; 0: none yet     */
	uint64_t populated;     /* data bytes [0, populated) mapped in (ring_populate); all: UINT64_MAX */
	uint32_t tid;
	int busy;               /* recursion guard: inside our own code      */
	int faults;             /* enum shim_faults: SIGSEGV/SIGBUS blocked? */
	int broken;             /* no ring could be made under gen           */
	/* Read only when the clock is sampled (shim_now_sync). */
	uint64_t base_tsc;      /* ... and the older one the rate is measured from        */
	uint64_t base_ns;
} __attribute__((aligned(64)));
_Static_assert(offsetof(struct shim_thread, base_tsc) <= 128, "the ioctl's fields in two lines");

/* The calling thread's state (its ring may not exist yet). */
struct shim_thread *shim_self_thread(void);

extern __thread struct shim_thread shim_self __attribute__((tls_model("initial-exec")));
/* &forkpage->gen (shim_state.c) once this process records; NULL before. */
extern const uint64_t *shim_forkgen;
struct shim_thread *shim_enter_slow(void);

/* TSC ticks a thread extrapolates CLOCK_MONOTONIC over before it samples the clock again (~3-4 ms at
 * 2-3 GHz), at a rate measured over a longer base (shim_record.c): the error stays tens of ns. */
#define SHIM_TSC_SPAN (1ull << 23)
uint64_t shim_now_sync(struct shim_thread *t, uint64_t tsc);

/* A record's time: CLOCK_MONOTONIC in ns.  Where the kernel's clocksource is the TSC (RMT_CTAB_TSC),
 * rdtsc extrapolated from this thread's last sample of CLOCK_MONOTONIC at the rate measured between
 * two samples (the vDSO's clock_gettime costs about twice a rdtsc: bench/clock_cost.c); a sample
 * is taken again every SHIM_TSC_SPAN ticks (shim_now_sync).  Never below the thread's last record. */
static inline uint64_t shim_now(struct shim_thread *t)
{
	if (likely(shim_proc.tsc)) {
		uint64_t tsc = shim_rdtsc(), since = tsc - t->clk_tsc;
		if (likely(since < SHIM_TSC_SPAN && t->clk_mult)) {
			uint64_t ns = t->clk_ns + (uint64_t)(((unsigned __int128)since * t->clk_mult) >> 32);
			return ns > t->last_ns ? ns : t->last_ns;
		}
		return shim_now_sync(t, tsc);
	}
	return shim_monotonic();
}

/* Call ids a thread takes from the process counter at a time: one atomic add per this many calls,
 * not per call (threads calling at once would fight over its cache line). */
#define CALL_ID_BLOCK 4096

/* The next call id of this process image (shim_state.c: image << 40 | n).  Inline: one increment,
 * and an atomic add on the process counter once per CALL_ID_BLOCK calls. */
static inline uint64_t shim_next_call_id(void)
{
	struct shim_thread *t = &shim_self;
	uint64_t n;

	if (unlikely(t->ids_next == t->ids_end || t->ids_gen != shim_proc.gen)) {
		t->ids_end = __atomic_add_fetch(&shim_proc.calls, CALL_ID_BLOCK, __ATOMIC_RELAXED) + 1;
		t->ids_next = t->ids_end - CALL_ID_BLOCK;
		t->ids_gen = shim_proc.gen;
	}
	n = t->ids_next++;
	return (shim_proc.image_id << 40) | (n & ((1ull << 40) - 1));
}

/* The calling thread's state with a usable ring, or NULL (inactive, no
 * ring, recording stopped).  Sets t->busy; release with shim_leave.  Inline:
 * the common case (a thread with its ring, recording, no fork since) in one
 * test; shim_enter_slow does everything else in full. */
static inline struct shim_thread *shim_enter(void)
{
	struct shim_thread *t = &shim_self;
	const uint64_t *forkgen = __atomic_load_n(&shim_forkgen, __ATOMIC_ACQUIRE);

	if (likely(forkgen && !t->busy && t->ctl && t->gen == shim_proc.gen &&
		   __atomic_load_n(forkgen, __ATOMIC_RELAXED) == shim_proc.gen &&
		   __atomic_load_n(&shim_proc.session->state, __ATOMIC_RELAXED) == RMT_SESSION_RECORDING)) {
		t->busy = 1;
		return t;
	}
	return shim_enter_slow();
}

/* The calling thread again, for the exit of the ioctl whose enter shim_enter gave it: as shim_enter, but
 * with no test of fork or of the ring, which cannot have changed for this thread meanwhile (a fork by
 * another thread leaves it in the parent, whose generation stays; only this thread makes its ring).
 * After the system call every load may miss: two here, not six. */
static inline struct shim_thread *shim_reenter(struct shim_thread *t)
{
	if (likely(!t->busy && __atomic_load_n(&shim_proc.session->state, __ATOMIC_RELAXED) == RMT_SESSION_RECORDING)) {
		t->busy = 1;
		return t;
	}
	return shim_enter_slow();
}

static inline void shim_leave(struct shim_thread *t)
{
	if (t)
		t->busy = 0;
}

/* ------------------------------------------------------- the ring */
int ring_reserve(struct shim_thread *t, uint32_t size);
/* Map in (MADV_POPULATE_WRITE) the ring's next pages up to head + SHIM_FAST_ROOM (shim_state.c). */
void ring_populate(struct shim_thread *t);
void ring_count(uint64_t *counter);

/* Add n to one of the ring's counters: a plain load and store, no locked add, since only the ring's
 * own thread writes its counters (the recorder only reads them). */
static inline void ring_add(uint64_t *counter, uint64_t n)
{
	__atomic_store_n(counter, __atomic_load_n(counter, __ATOMIC_RELAXED) + n, __ATOMIC_RELAXED);
}

/* ------------------------------------------------------- program memory */
enum shim_read_path { SHIM_READ_COPY = 0, SHIM_READ_SYSCALL = 1, SHIM_READ_UNREADABLE = 2 };

/* shim_copy(dst, src, n): 0, or -1 when src faulted (dst then holds part of it); shim_mem.c. */
long shim_copy(void *dst, const void *src, size_t n);
int shim_read_slow(struct shim_thread *t, void *dst, uint64_t addr, size_t n);

/* Copy n bytes from the program's address addr: the path that read them
 * (SHIM_READ_COPY or SHIM_READ_SYSCALL), or -1 when any of it is unreadable
 * (nothing faults).  Inline: the copy is the common case of every buffer. */
static inline int shim_read(struct shim_thread *t, void *dst, uint64_t addr, size_t n)
{
	/* A NULL or wrapping address needs no test here: it faults in the copy like any bad one. */
	if (likely(t->faults == FAULTS_DELIVERED && __atomic_load_n(&shim_proc.guard_on, __ATOMIC_RELAXED)))
		return shim_copy(dst, (const void *)(uintptr_t)addr, n) == 0 ? SHIM_READ_COPY : -1;
	return shim_read_slow(t, dst, addr, n);
}
/* A NUL-terminated string at addr into dst (at most cap bytes, NUL kept);
 * returns its length, or -1 when unreadable. */
long shim_read_str(struct shim_thread *t, char *dst, uint64_t addr, size_t cap);
/* Install the SIGSEGV/SIGBUS handler that turns a fault in the shim's own
 * copy into an unreadable buffer and chains every other fault. */
void shim_guard_install(void);
/* The program's sigaction, as the shim applies it (see shim_mem.c). */
int shim_sigaction(int sig, const struct sigaction *act, struct sigaction *old);
/* After the program changed this thread's signal mask to *now. */
void shim_mask_changed(const sigset_t *now);

/* ------------------------------------------------------- records */
#define SHIM_MAX_BUFS 24

/* A record being built in place: its bytes start at t->head, not yet published. */
struct shim_rec {
	struct shim_thread *t;
	uint8_t *base;          /* where it starts in the ring (t->head)  */
	uint16_t source;
	uint8_t phase;
	uint8_t flags;
	uint32_t op;
	int32_t fd;
	int64_t ret;
	int32_t err;
	uint64_t call_id;
	uint64_t time_ns;
	uint16_t nbufs;
	uint32_t size;          /* bytes written so far, header included */
	uint32_t fast_end;      /* rec_fast: it may grow to this size with no room check; 0: check each buffer */
	int cut;                /* trunc_big counted for this one        */
	int dropped;            /* no room (lossy, stopped): not emitted */
	uint16_t reads[3];      /* its buffers by enum shim_read_path    */
};

/* A buffer's captured bytes, where they lie in the ring. */
struct shim_view {
	const uint8_t *p;
	uint32_t len;
};

static inline void rec_init(struct shim_rec *r, struct shim_thread *t, uint16_t source, uint8_t phase, uint32_t op,
			    int fd, uint64_t call_id)
{
	*r = (struct shim_rec){ .t = t, .base = t->data + (t->head & t->mask), .source = source, .phase = phase,
				.op = op, .fd = fd, .call_id = call_id, .size = sizeof(struct rmt_record) };
}
/* Add a buffer from our own memory; 0, or -1 when it could not be added. */
int rec_add_local(struct shim_rec *r, uint16_t role, uint8_t when, uint32_t slot, const void *src, uint64_t n);
/* Zero the padding after a buffer's len data bytes at dst (8-aligned) before they are copied there: one
 * store of the last 8-byte word, which the copy then overwrites in part, instead of a memset after it. */
static inline void rec_pad(uint8_t *dst, uint32_t len)
{
	if (len & 7)
		__builtin_memcpy(dst + (len & ~7u), &(uint64_t){ 0 }, 8);
}

/* The buffer's header after its data (padded by rec_pad) is in place; the record grows by it. */
static inline struct shim_view rec_close(struct shim_rec *r, uint16_t role, uint8_t when, uint8_t flags, uint32_t len,
				  uint64_t addr, uint64_t n, uint32_t slot)
{
	struct rmt_buffer *bh = (struct rmt_buffer *)(r->base + r->size);
	struct shim_view v = { (const uint8_t *)(bh + 1), len };

	if (flags & RMT_BF_TRUNCATED)
		r->flags |= RMT_RF_TRUNCATED;
	if (flags & RMT_BF_UNREADABLE)
		r->flags |= RMT_RF_UNREADABLE;
	/* One struct store: the compiler merges it into three 8-byte moves. */
	*bh = (struct rmt_buffer){ .role = role, .when = when, .flags = flags, .len = len, .addr = addr,
				   .orig_len = n > UINT32_MAX ? UINT32_MAX : (uint32_t)n, .slot = slot };
	r->size += (uint32_t)sizeof(*bh) + RMT_ALIGN_UP(len);
	r->nbufs++;
	return v;
}

int rec_add_user_slow(struct shim_rec *r, uint16_t role, uint8_t when, uint32_t slot, uint64_t addr, uint64_t n,
		      struct shim_view *view);

/* Bytes a record may take with its room checked once, when it starts (rec_fast), not buffer by buffer:
 * nearly every ioctl's record is far smaller; a bigger one goes on the careful way. */
#define SHIM_FAST_ROOM (64u << 10)
uint32_t rec_fast_slow(struct shim_rec *r);

/* Whether size bytes at head may be written with no further test: the ring has room for them by the
 * tail seen last time, they are mapped in, and this thread's reads of the program go by the
 * fault-tolerant copy.  The test of rec_fast (for SHIM_FAST_ROOM bytes) and of
 * capture_ioctl_exit_whole (for its record's exact size). */
static inline __attribute__((always_inline)) int ring_fast_room(const struct shim_thread *t, uint64_t size)
{
	return likely(t->head + size - t->tail_seen <= shim_proc.ring_size && t->head + size <= t->populated &&
		      t->faults == FAULTS_DELIVERED && __atomic_load_n(&shim_proc.guard_on, __ATOMIC_RELAXED));
}

/* Let the record's buffers be added the quick way (rec_add_user's first branch): when the ring has
 * room for SHIM_FAST_ROOM bytes more (by the tail seen last time), mapped in, and this thread's reads
 * go by the fault-tolerant copy, r->fast_end says how far the record may grow unchecked.  Checked here
 * once a record instead of once a buffer; rec_fast_slow maps more of the ring in (ring_populate), or
 * looks at the consumer's tail when the one seen last says there is no room.  Inline: the common case
 * in four tests. */
static inline void rec_fast(struct shim_rec *r)
{
	if (likely(ring_fast_room(r->t, SHIM_FAST_ROOM)))
		r->fast_end = shim_proc.fast_end;
	else
		r->fast_end = rec_fast_slow(r);
}

/* Add a buffer read from the program: 0 with its captured bytes in *view,
 * or -1 when nothing was captured (unreadable, empty, no room).  Inline: the
 * common case (a record made rec_fast, a buffer that fits whole, read by the
 * copy) in four tests; rec_add_user_slow does everything else. */
static inline __attribute__((always_inline)) int rec_add_user(struct shim_rec *r, uint16_t role, uint8_t when, uint32_t slot, uint64_t addr,
			       uint64_t n, struct shim_view *view)
{
	/* n < 2^32 once the first test holds (max_buffer is a u32), so the sum cannot wrap. */
	if (likely(n - 1 < shim_proc.max_buffer && addr && r->nbufs < SHIM_MAX_BUFS &&
		   (uint64_t)r->size + sizeof(struct rmt_buffer) + ((n + 7) & ~7ull) <= r->fast_end)) {
		uint8_t *dst = r->base + r->size + sizeof(struct rmt_buffer);
		rec_pad(dst, (uint32_t)n);
		if (likely(shim_copy(dst, (const void *)(uintptr_t)addr, n) == 0)) {
			r->reads[SHIM_READ_COPY]++;
			*view = rec_close(r, role, when, 0, (uint32_t)n, addr, n, slot);
			return 0;
		} /* unreadable: the slow way says so */
	}
	return rec_add_user_slow(r, role, when, slot, addr, n, view);
}
/* A record's time, saying first in the ring that a record is being written (the recorder's merge
 * waits for it: rmtrace_ring.h, time order). */
static inline uint64_t ring_stamp(struct shim_thread *t)
{
	uint64_t now;

	/* The floor first, then the clock: a recorder that finds the ring idle may take its own
	 * time as this ring's floor, so this store must come before the time is read. */
	__atomic_store_n(&t->ctl->writing, t->last_ns ? t->last_ns : 1, __ATOMIC_RELAXED);
	now = shim_now(t);
	__atomic_store_n(&t->ctl->writing, now, __ATOMIC_RELAXED);
	return now;
}

#ifdef RMTRACE_TEST_HOOKS
/* A thread descheduled between its timestamp and its publication, on demand (RMTRACE_TEST_STALL). */
void test_stall(uint16_t source, uint32_t op);
#endif

/* A record's header: every field but the record's own is a constant or the process's, so both
 * ways of building a record (rec_emit, capture_ioctl_exit_whole) fill it the same. */
static inline struct rmt_record rec_header(const struct shim_thread *t, uint16_t source, uint8_t phase, uint8_t flags,
					   uint32_t total_len, uint64_t time_ns, uint64_t call_id, uint32_t op,
					   int32_t fd, int64_t ret, int32_t err, uint16_t nbufs)
{
	return (struct rmt_record){
		.magic = RMT_RECORD_MAGIC, .version = RMT_RECORD_VERSION, .header_size = sizeof(struct rmt_record),
		.total_len = total_len, .source = source, .phase = phase, .flags = flags, .seq = 0, .time_ns = time_ns,
		.pid = (uint32_t)shim_proc.pid, .tid = t->tid, .call_id = call_id, .op = op, .fd = fd, .ret = ret,
		.err = err, .nbufs = nbufs, .reserved = 0,
	};
}

/* An 8-byte word of a record in the ring (records start 8-aligned): stored through this type, the header's
 * words may alias the ring's bytes. */
typedef uint64_t __attribute__((may_alias, aligned(8))) shim_word;
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "rec_store_header puts each word together little-endian");
_Static_assert(offsetof(struct rmt_record, magic) == 0 && offsetof(struct rmt_record, version) == 4 && offsetof(struct rmt_record, header_size) == 6 &&
		       offsetof(struct rmt_record, total_len) == 8 && offsetof(struct rmt_record, source) == 12 &&
		       offsetof(struct rmt_record, phase) == 14 && offsetof(struct rmt_record, flags) == 15 &&
		       offsetof(struct rmt_record, seq) == 16 && offsetof(struct rmt_record, time_ns) == 24 &&
		       offsetof(struct rmt_record, pid) == 32 && offsetof(struct rmt_record, tid) == 36 &&
		       offsetof(struct rmt_record, call_id) == 40 && offsetof(struct rmt_record, op) == 48 &&
		       offsetof(struct rmt_record, fd) == 52 && offsetof(struct rmt_record, ret) == 56 &&
		       offsetof(struct rmt_record, err) == 64 && offsetof(struct rmt_record, nbufs) == 68 &&
		       offsetof(struct rmt_record, reserved) == 70 && sizeof(struct rmt_record) == 72,
	       "rec_store_header's words follow struct rmt_record's fields");

/* The header h at dst as nine 8-byte stores, each word put together in registers from the fields it holds
 * (little-endian host).  A struct store is not that: gcc stores each field whose value it does not know at
 * compile time on its own, 16 stores of 2 to 8 bytes, and each takes a store-buffer entry while the ring's
 * line it goes to is still being fetched. */
static inline void rec_store_header(uint8_t *dst, const struct rmt_record *h)
{
	shim_word *w = (shim_word *)dst;

	w[0] = h->magic | (uint64_t)h->version << 32 | (uint64_t)h->header_size << 48;
	w[1] = h->total_len | (uint64_t)h->source << 32 | (uint64_t)h->phase << 48 | (uint64_t)h->flags << 56;
	w[2] = h->seq;
	w[3] = h->time_ns;
	w[4] = h->pid | (uint64_t)h->tid << 32;
	w[5] = h->call_id;
	w[6] = h->op | (uint64_t)(uint32_t)h->fd << 32;
	w[7] = (uint64_t)h->ret;
	w[8] = (uint32_t)h->err | (uint64_t)h->nbufs << 32 | (uint64_t)h->reserved << 48;
}

/* Publish the record whose header is h and whose buffers are in place after it at head (it ends
 * what ring_stamp announced): its header, then head.  The header as a struct store where the compiler
 * merges its fields from the record being built (rec_emit: 12 stores), by words where it would not
 * (words: capture_ioctl_exit_whole, whose fields come from registers and spill slots: 16 stores, 9 by
 * rec_store_header). */
static inline void ring_publish(struct shim_thread *t, struct rmt_record h, int words)
{
	/* Read before the header's stores, which may alias anything (shim_word), so that none is read again. */
	struct rmt_ring_ctl *ctl = t->ctl;
	uint8_t *at = t->data + (t->head & t->mask);
	uint64_t head = t->head + h.total_len;

	if (words)
		rec_store_header(at, &h);
	else
		*(struct rmt_record *)at = h;
#ifdef RMTRACE_TEST_HOOKS
	if (unlikely(shim_proc.test_stall_ms))
		test_stall(h.source, h.op);
#endif
	t->head = head;
	__atomic_store_n(&ctl->head, head, __ATOMIC_RELEASE);
	t->last_ns = h.time_ns;
	__atomic_store_n(&ctl->writing, 0, __ATOMIC_RELAXED); /* after head: a consumer that sees 0 sees the record */
}

/* Take the record's time (ring_stamp); rec_emit does it for a record whose time was not taken before. */
void rec_stamp(struct shim_rec *r);
/* rec_emit's rare ways, out of line (shim_record.c): the record's reads by the slow paths into the
 * ring's counters; room for a record that grew past what rec_fast allowed (0, or -1: dropped). */
void rec_count_slow(const struct shim_rec *r);
int rec_emit_room(struct shim_rec *r);

/* Publish the record (and end what rec_stamp announced): 0, or -1 when dropped (lossy, stopped).
 * Inline: after the buffers, the common case (a record within rec_fast's room, every buffer read by
 * the copy) is a counter, the time where it was not taken, the header and head, with no call. */
static inline __attribute__((always_inline)) int rec_emit(struct shim_rec *r)
{
	struct shim_thread *t = r->t;

	ring_add(&t->ctl->read_copy, r->reads[SHIM_READ_COPY]); /* head's line: written with the record anyway */
	if (unlikely(r->reads[SHIM_READ_SYSCALL] | r->reads[SHIM_READ_UNREADABLE]))
		rec_count_slow(r);
	/* A record that stayed within what rec_fast allowed has its room (fast_end is 0 once dropped). */
	if (unlikely(r->size > r->fast_end) && rec_emit_room(r) != 0)
		return -1;
	if (!r->time_ns)
		r->time_ns = ring_stamp(t);
	ring_publish(t, rec_header(t, r->source, r->phase, r->flags, r->size, r->time_ns, r->call_id, r->op, r->fd,
				   r->ret, r->err, r->nbufs), 0);
	return 0;
}

/* ------------------------------------------------------- ioctl capture */
#define SHIM_MAX_PLAN 20

/* What an ioctl's enter read that the driver may write back, so its exit reads the same memory again.
 * Each item is the exit's buffer header as it will stand when the buffer is read whole again (when
 * AFTER, no flags, len = orig_len = the bytes read at enter): the exit copies it into the ring as is,
 * one 24-byte move, with nothing to test or compute per buffer.  Where the enter did not read the
 * buffer whole (whole = 0), the general way reads orig_len bytes (the program's length, capped at
 * UINT32_MAX like the header's: every length past max_buffer is cut alike). */
struct shim_plan {
	uint32_t n;
	uint32_t whole;         /* every item was read whole at enter */
	uint32_t exit_bytes;    /* then: the exit record's buffers, headers and padding included */
	uint64_t stamped;       /* capture_ioctl_exit_whole: the exit's time, where it took it and gave up */
	struct rmt_buffer item[SHIM_MAX_PLAN];
};

/* The enter record of an RM or UVM ioctl (its op number and its buffers before the call), built in the
 * thread's ring and published, and in p what its exit reads again. */
void capture_ioctl_enter(struct shim_thread *t, struct shim_plan *p, uint16_t source, uint32_t op, int fd,
			 uint64_t call_id, unsigned kind, unsigned long req, uint64_t arg);
/* The same buffers after the call. */
void capture_ioctl_exit(struct shim_rec *r, const struct shim_plan *p);

/* The size of the exit record capture_ioctl_exit_whole would build for plan p, or 0 where it will not (a
 * buffer the enter could not take whole, or a record past what rec_fast allows). */
static inline uint32_t exit_whole_size(const struct shim_plan *p)
{
	uint32_t size = (uint32_t)sizeof(struct rmt_record) + p->exit_bytes;

	return p->whole && size <= shim_proc.fast_end ? size : 0;
}

/* The calling thread's exit record in one pass, when the enter read every buffer whole: 0 when it is
 * published; -1 when the general way (capture_ioctl_exit) must build it, with p->stamped its time when
 * taken (else 0).  Inline, in traced_ioctl: after the system call, no call but the clock's and the
 * copies.  The room is checked once for the record's exact size, which the plan knows (within what
 * rec_fast allows: no more than SHIM_FAST_ROOM, mapped in, the copy's guard in); then the time, each
 * buffer's header moved from the plan with its bytes copied behind it, the header, head.  No struct
 * shim_rec, no test per buffer.  A copy that faults (the driver unmapped a buffer) leaves the record
 * unpublished: the general way builds it again with that time. */
static inline __attribute__((always_inline)) int capture_ioctl_exit_whole(struct shim_plan *p, uint16_t source, uint32_t op,
										 int fd, uint64_t call_id, int64_t ret, int32_t err)
{
	struct shim_thread *t = &shim_self;
	const struct rmt_buffer *it = p->item, *end = it + p->n;
	uint32_t size = exit_whole_size(p);
	uint8_t *dst = t->data + (t->head & t->mask) + sizeof(struct rmt_record);
	uint64_t now;

	p->stamped = 0;
	if (unlikely(!size || !ring_fast_room(t, size)))
		return -1;
	p->stamped = now = ring_stamp(t);
	for (; it < end; it++) {
		uint32_t len = it->len;

		memcpy(dst, it, sizeof(*it));
		rec_pad(dst + sizeof(*it), len);
		if (unlikely(shim_copy(dst + sizeof(*it), (const void *)(uintptr_t)it->addr, len) != 0))
			return -1;
		dst += sizeof(*it) + RMT_ALIGN_UP(len);
	}
	/* The read counter shares head's line, written just below. */
	ring_add(&t->ctl->read_copy, p->n);
	ring_publish(t, rec_header(t, source, RMT_PH_EXIT, 0, size, now, call_id, op, fd, ret, err, (uint16_t)p->n), 1);
	return 0;
}
/* The record's op: the raw request for UVM (not _IOC-encoded), the escape number (_IOC_NR) for RM. */
static inline uint32_t ioctl_op(unsigned kind, unsigned long req)
{
	return kind_is_uvm(kind) ? (uint32_t)req : (uint32_t)_IOC_NR(req);
}
/* Index the capture table's rows for the lookups above (once per process image): 0, or -1. */
int ctab_index(void);

#endif /* RMTRACE_SHIM_H */
