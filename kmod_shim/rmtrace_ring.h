/*
 * rmtrace_ring.h: the shared-memory files between the capture shim (the
 * LD_PRELOAD interposer, kmod_shim/interposer.c) and the recorder
 * (rmtrace/capture/).  The Python mirrors live in rmtrace/capture/shm.py and
 * are checked against this header's DWARF layout by tests/test_ring_abi.py.
 *
 * A recording session is one directory (RMTRACE_SESSION_DIR, made by the
 * recorder, e.g. /dev/shm/rmtrace-<recorder pid>-<random>/) holding:
 *
 *   session.ctl   struct rmt_session_ctl: counters every traced process shares
 *                 (image ids, losses without a ring) and the recording state.
 *                 Mapped read-write by the shim.
 *   capture.tab   the capture table: ring settings and the driver facts the
 *                 shim needs to find buffers (UVM params sizes, the controls
 *                 whose params carry pointers).  Written once by the
 *                 recorder from the driver profile; mapped read-only.
 *   ring-<pid>-<tid>-<image>.rb
 *                 one ring per traced thread: struct rmt_ring_ctl in the first
 *                 RMT_RING_CTL_SIZE bytes, then data_size bytes of records.
 *
 * Everything in these files is offsets and counts, never pointers: the traced
 * process is untrusted and the recorder bounds-checks all of it.
 *
 * ------------------------------------------------------------------ the ring
 * One producer (the thread that owns the ring) and one consumer (the
 * recorder).  head and tail are never-wrapped byte counters; the byte at
 * counter c lives at data[c & (data_size - 1)].  head - tail is the number
 * of bytes written and not yet consumed, always <= data_size.
 *
 * Records are exactly the bytes of the record format (rmtrace_record.h):
 * each starts with struct rmt_record, whose total_len (a multiple of 8)
 * covers its buffers.  A record may run past the end of the data area and
 * continue at its start: the producer writes it in two pieces and the
 * consumer reassembles it with a bounce copy (as perf's event_copy).  No
 * padding records exist.
 *
 * Memory ordering (x86-64 and the C11 model):
 *
 *   producer (shim)                          consumer (recorder)
 *   -------------------------------------    ------------------------------------
 *   t = load_acquire(tail)   ...pairs with   store_release(tail, t')  after reading
 *   if head + size - t > data_size: full                              the bytes
 *   write record bytes at head
 *   store_release(head, head + size) ...     h = load_acquire(head)   then read
 *                                 pairs with                          bytes < h
 *
 * The acquire on tail keeps the producer from overwriting bytes the consumer
 * is still reading; the release on head makes the record's bytes visible
 * before the new head.  The Python consumer does plain aligned 8-byte loads
 * and stores through mmap, which on x86-64 (TSO) have exactly acquire and
 * release semantics; it refuses to run on other machines.
 *
 * Full ring: by default (lossless) the producer sleeps and polls until the
 * consumer makes room, counting waits and wait_ns; with RMT_CTAB_LOSSY it
 * drops the record and counts lost_full.  A record larger than
 * data_size / 2 has its buffers cut to fit (trunc_big).  Every counter is
 * written only by the ring's producer (relaxed atomic stores), so the
 * consumer reads whole values.
 *
 * A tail beyond head is the consumer giving the ring up (it broke the
 * contract, or is of another version): the producer then drops what it would
 * write there, counted in lost_stopped, and never waits on it.
 *
 * The producer builds each record in place at head (nothing is visible
 * before the store-release of head), so the bytes between head and the
 * room it reserved may hold a record half written: never read them.
 *
 * Time order across rings (the recorder's merge): a record's time is taken
 * before it is published, and its thread may be descheduled in between for
 * any length of time, so no fixed lag makes a merge safe.  The producer
 * says when it is inside that window, in `writing` (its own cache line,
 * beside head):
 *
 *   producer (shim)                          consumer (recorder), each poll
 *   -------------------------------------    ------------------------------------
 *   writing = last     (a lower bound: the   now = clock()
 *                      thread's last time)   for each ring:
 *   t = clock()                                w = load(writing)
 *   writing = t                                h = load_acquire(head); drain
 *   ...the record, with time t...              floor = w ? w : now - slack
 *   store_release(head, head + size)         release every record whose time
 *   writing = 0                              is <= the smallest floor
 *
 * A ring seen idle (writing 0) publishes nothing older than the consumer's
 * now: its next record announces itself before it reads the clock.  x86-64
 * may hold that store in the store buffer past the clock read; the slack
 * (1 ms, rmtrace/capture/merge.py) covers that by many orders of magnitude
 * (a store buffer drains in well under a microsecond, and at once on any
 * interrupt or context switch).  A ring seen writing has its floor at w
 * until it publishes; the recorder stops waiting for one that stays there
 * longer than its stall limit (docs/capture.md).
 */
#ifndef RMTRACE_RING_H
#define RMTRACE_RING_H

#include <stdint.h>

/* ------------------------------------------------------------------ rings */

#define RMT_RING_MAGIC    0x474e5252u /* "RRNG" */
#define RMT_RING_VERSION  3
#define RMT_RING_CTL_SIZE 4096u       /* the data area starts one page in */
#define RMT_RING_MIN_SIZE 4096u       /* smallest data area (a power of two) */

enum rmt_ring_state {
	RMT_RING_LIVE   = 1, /* its thread may still write                    */
	RMT_RING_CLOSED = 2, /* its thread exited; nothing more will be written */
};

struct rmt_ring_ctl {
	/* Identity: written before magic, which is stored (release) last. */
	uint32_t magic;         /* RMT_RING_MAGIC once the ring is ready          */
	uint16_t version;       /* RMT_RING_VERSION                               */
	uint16_t ctl_size;      /* RMT_RING_CTL_SIZE: where the data area starts  */
	uint64_t data_size;     /* bytes of data area, a power of two             */
	uint32_t pid;
	uint32_t tid;
	uint64_t image_id;      /* process image that owns it (see session ctl)   */
	uint32_t flags;         /* reserved, zero                                 */
	uint32_t state;         /* enum rmt_ring_state                            */
	uint8_t  reserved0[24]; /* pads the identity to one cache line            */
	/* Producer's cache line: what it writes with every record, and its loss counters. */
	uint64_t head;          /* bytes ever written (store-release)             */
	uint64_t writing;       /* a lower bound of the time of the record being
	                         * written, 0 when none (see time order above)    */
	uint64_t read_copy;     /* buffers read by the fault-tolerant copy        */
	uint64_t lost_full;     /* lossy: records dropped on a full ring          */
	uint64_t lost_nested;   /* calls unrecorded: a signal handler re-entered  */
	uint64_t lost_stopped;  /* calls unrecorded: the recorder stopped or died */
	uint64_t trunc_big;     /* records cut to fit data_size / 2               */
	uint64_t read_unreadable; /* buffers not read: a bad pointer (UNREADABLE) */
	/* Consumer's cache line. */
	uint64_t tail;          /* bytes ever consumed (store-release)            */
	uint8_t  reserved2[56];
	/* The producer's counters of its slow paths (read by the recorder only
	 * when the ring retires). */
	uint64_t read_syscall;  /* buffers read by process_vm_readv: the thread
	                         * blocked SIGSEGV or SIGBUS                      */
	uint64_t waits;         /* lossless: times the writer slept, ring full    */
	uint64_t wait_ns;       /* lossless: total time slept                     */
	uint64_t reserved3[5];
};

/* ---------------------------------------------------------- session control */

#define RMT_SESSION_MAGIC   0x53455352u /* "RSES" */
#define RMT_SESSION_VERSION 1

enum rmt_session_state {
	RMT_SESSION_RECORDING = 1,
	RMT_SESSION_STOPPED   = 2, /* shims stop writing (and never wait)       */
};

struct rmt_session_ctl {
	uint32_t magic;        /* RMT_SESSION_MAGIC                              */
	uint16_t version;      /* RMT_SESSION_VERSION                            */
	uint16_t size;         /* sizeof(struct rmt_session_ctl)                 */
	uint32_t recorder_pid; /* a shim that finds it gone stops recording      */
	uint32_t state;        /* enum rmt_session_state (recorder writes)       */
	uint64_t next_image;   /* atomic: each process image takes the next id   */
	uint64_t lost_noring;  /* atomic: calls unrecorded, no ring could be made */
	uint64_t reserved[4];
};

/* ----------------------------------------------------------- capture table
 *
 * capture.tab, all little-endian:
 *
 *   struct rmt_ctab_header
 *   struct rmt_ctab_uvm  [n_uvm]   at uvm_off,  sorted by nr
 *   struct rmt_ctab_ctrl [n_ctrl]  at ctrl_off, sorted by cmd
 *   struct rmt_ctab_ptr  [n_ptr]   at ptr_off
 *   struct rmt_ctab_class[n_class] at class_off, sorted by cls
 *
 * A UVM command's params are `size` bytes (UVM request numbers are raw, not
 * _IOC-encoded, so the size must come from here).  A control listed in the
 * ctrl table has params holding n_ptr user pointers, described by
 * ptr[first_ptr .. first_ptr + n_ptr): the shim records the array each one
 * points to as a NESTED buffer whose slot is the pointer's index in that
 * list.  UVM commands may list pointers the same way.  RM sizes RM_ALLOC's
 * params by the class being allocated and ignores the argument's paramsSize
 * (which libcuda passes as 0), so the class table gives each class's alloc
 * params size; a class it lacks falls back to paramsSize.
 */

#define RMT_CTAB_MAGIC   0x42544352u /* "RCTB" */
#define RMT_CTAB_VERSION 2

enum rmt_ctab_flag {
	RMT_CTAB_LOSSY = 1u << 0, /* drop on a full ring instead of waiting */
	RMT_CTAB_TSC   = 1u << 1, /* the kernel's clocksource is the TSC: records' times from
	                           * rdtsc, extrapolated from CLOCK_MONOTONIC (shim.h, shim_now) */
};

struct rmt_ctab_header {
	uint32_t magic;       /* RMT_CTAB_MAGIC                                    */
	uint16_t version;     /* RMT_CTAB_VERSION                                  */
	uint16_t header_size; /* sizeof(struct rmt_ctab_header)                    */
	uint32_t total_size;  /* bytes of the whole file                           */
	uint32_t flags;       /* enum rmt_ctab_flag                                */
	uint64_t ring_size;   /* data bytes of each ring, a power of two           */
	uint32_t max_buffer;  /* most bytes captured of one buffer                 */
	uint32_t rights_size; /* bytes RM_ALLOC's pRightsRequested points to       */
	uint32_t n_uvm;
	uint32_t uvm_off;
	uint32_t n_ctrl;
	uint32_t ctrl_off;
	uint32_t n_ptr;
	uint32_t ptr_off;
	uint32_t n_class;
	uint32_t class_off;
};

struct rmt_ctab_uvm {
	uint32_t nr;        /* the raw UVM ioctl request number */
	uint32_t size;      /* bytes of its params struct       */
	uint32_t first_ptr; /* its pointers in the ptr table     */
	uint32_t n_ptr;
};

struct rmt_ctab_ctrl {
	uint32_t cmd;       /* RM control command id            */
	uint32_t first_ptr;
	uint32_t n_ptr;
	uint32_t reserved;
};

/* One user pointer inside a params struct: the array it points to holds
 * count elements of elem_size bytes, count being fixed_count when nonzero,
 * else the count_size-byte (1, 2, 4 or 8) integer at count_offset. */
struct rmt_ctab_ptr {
	uint32_t offset;       /* of the 8-byte pointer in the params */
	uint32_t count_offset;
	uint32_t elem_size;
	uint32_t fixed_count;
	uint32_t count_size;
	uint32_t reserved;
};

/* A class RM_ALLOC can create, and the bytes of its alloc params RM reads. */
struct rmt_ctab_class {
	uint32_t cls;  /* class id (NVOS21/NVOS64 hClass) */
	uint32_t size; /* sizeof its alloc params struct  */
};

#endif /* RMTRACE_RING_H */
