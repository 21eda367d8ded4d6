/*
 * rmtrace_kmod.h: the device ABI of the kernel shim's /dev/rmtrace.
 *
 * read() returns records in the one record format (rmtrace_record.h), back
 * to back, oldest first across the per-CPU rings; a record that does not fit
 * the caller's buffer continues in the next read(), so the device reads as a
 * byte stream.  poll() says POLLIN when a record is waiting.  The ioctls
 * below choose the sources and the probes and read the counters.  The Python
 * mirror is rmtrace/capture/kmod.py, checked against this header's DWARF by
 * tests/kernel/test_kmod_abi.py.  docs/kernel-shim.md has it in prose.
 *
 * A probe is a kretprobe on one kernel function.  What it records is data,
 * computed by userspace from the driver profile (offsets of the driver's
 * structs, sizes of UVM params): which record it writes (source, kind, op)
 * and up to RMT_PROBE_MAX_CAPS buffers, each an address and a length that
 * are *values*: an argument register, optionally dereferenced through kernel
 * or user memory, shifted and masked (as perf probe's fetch args).
 */
#ifndef RMTRACE_KMOD_H
#define RMTRACE_KMOD_H

#ifdef __KERNEL__
#include <linux/types.h>
#include <linux/ioctl.h>
#else
#include <stdint.h>
#include <linux/ioctl.h>
#endif

#define RMT_KMOD_VERSION 1

/* Call ids the kernel hands out have this bit set: never equal to a shim's. */
#define RMT_KCALL_ID_BIT (1ull << 63)

/* Ops of the calls UVM makes into RM (nvUvmInterface*), recorded as source
 * UVM with op RMT_KCALL_BASE + enum rmt_kcall: numbers no UVM ioctl uses. */
#define RMT_KCALL_BASE 0x4b000000u

enum rmt_kcall {
	RMT_KCALL_REGISTER_GPU    = 1, /* nvUvmInterfaceRegisterGpu(uuid, platformInfo)        */
	RMT_KCALL_UNREGISTER_GPU  = 2, /* nvUvmInterfaceUnregisterGpu(uuid)                     */
	RMT_KCALL_RETAIN_CHANNEL  = 3, /* nvUvmInterfaceRetainChannel(vaSpace, hClient, hChannel, &retained, info) */
	RMT_KCALL_RELEASE_CHANNEL = 4, /* nvUvmInterfaceReleaseChannel(retained)                */
	RMT_KCALL_GET_GPU_INFO    = 5, /* nvUvmInterfaceGetGpuInfo(uuid, clientInfo, gpuInfo)   */
};

/* Which sources the module records: bit (1 << enum rmt_source). */
#define RMT_SOURCES_ALL 0x7eu

#define RMT_PROBE_NAME_MAX  64
#define RMT_PROBE_MAX_CAPS  6
#define RMT_PROBE_MAX_DEREF 3
#define RMT_PROBE_MAX_TABLE 160
#define RMT_PROBE_MAX_ARGS  6
#define RMT_PROBES_MAX      32

/* struct rmt_probe_spec.kind */
enum rmt_probe_kind {
	RMT_PROBE_CALL = 1, /* ENTER before the function runs, EXIT when it returns */
	RMT_PROBE_SEND = 2, /* one SEND record when it returns (a message it sent)  */
	RMT_PROBE_RECV = 3, /* one RECV record when it returns (a message it got)   */
};

/* struct rmt_probe_spec.flags */
enum rmt_probe_flag {
	RMT_PROBE_VOID    = 1u << 0, /* returns nothing: ret is 0                         */
	RMT_PROBE_OK_ONLY = 1u << 1, /* SEND/RECV: only when it returned 0 (NV_OK)        */
	RMT_PROBE_ARGS    = 1u << 2, /* an ARG buffer with the nargs argument registers   */
};

/* struct rmt_value.kind */
enum rmt_value_kind {
	RMT_VAL_NONE  = 0, /* no value (a capture with no length is skipped)       */
	RMT_VAL_CONST = 1, /* constant                                              */
	RMT_VAL_ARG   = 2, /* argument register arg, then derefs, then width bytes  */
	RMT_VAL_TABLE = 3, /* the probe's table, keyed by the record's op           */
};

/* Where a value's memory reads happen (struct rmt_value.space). */
enum rmt_space {
	RMT_SPACE_KERNEL = 1,
	RMT_SPACE_USER   = 2,
};

/*
 * v = arg[arg]; for i < nderef: v = *(u64 *)(v + off[i]);
 * if width: v = *(u<width*8> *)(v + off[nderef]) else v += off[nderef];
 * v = (v >> shift) & (mask ? mask : ~0).  Reads that fault make the value
 * unavailable (the buffer is recorded UNREADABLE), never an oops.
 */
struct rmt_value {
	uint8_t  kind;     /* enum rmt_value_kind                    */
	uint8_t  arg;      /* argument register, 0-based             */
	uint8_t  nderef;   /* <= RMT_PROBE_MAX_DEREF                 */
	uint8_t  width;    /* 0 (the address itself), 1, 2, 4 or 8   */
	uint8_t  space;    /* enum rmt_space of the reads            */
	uint8_t  shift;
	uint16_t reserved; /* zero                                   */
	int32_t  off[RMT_PROBE_MAX_DEREF + 1];
	uint64_t mask;
	uint64_t constant; /* RMT_VAL_CONST                          */
};

/* rmt_capture.when: when the bytes are read (bits) */
enum rmt_capture_when {
	RMT_CAP_BEFORE = 1u << 0,
	RMT_CAP_AFTER  = 1u << 1,
};

/* One buffer a probe records: len bytes (at most max) at addr, in space. */
struct rmt_capture {
	uint16_t role;      /* enum rmt_buf_role                             */
	uint8_t  when;      /* enum rmt_capture_when bits                    */
	uint8_t  space;     /* enum rmt_space of the bytes                   */
	uint32_t slot;      /* rmt_buffer.slot (NESTED: which argument)      */
	uint32_t only_op;   /* capture only for this op; 0xffffffff: any     */
	uint32_t max;       /* most bytes recorded (the rest: TRUNCATED)     */
	struct rmt_value addr;
	struct rmt_value len;
};

struct rmt_probe_entry {
	uint32_t key;
	uint32_t value;
};

struct rmt_probe_spec {
	char     symbol[RMT_PROBE_NAME_MAX]; /* NUL-terminated kernel symbol       */
	uint16_t source;                     /* enum rmt_source of its records      */
	uint8_t  kind;                       /* enum rmt_probe_kind                 */
	uint8_t  ncaps;                      /* <= RMT_PROBE_MAX_CAPS               */
	uint32_t flags;                      /* enum rmt_probe_flag                 */
	uint8_t  nargs;                      /* RMT_PROBE_ARGS: registers recorded  */
	uint8_t  reserved0[3];
	int32_t  fd;                         /* the records' fd (-1: none)          */
	struct rmt_value op;                 /* the records' op                     */
	struct rmt_capture cap[RMT_PROBE_MAX_CAPS];
	uint32_t ntable;                     /* <= RMT_PROBE_MAX_TABLE               */
	uint32_t reserved1;
	struct rmt_probe_entry table[RMT_PROBE_MAX_TABLE];
};

/* The state of probe `index` (RMT_IOC_PROBE_INFO). */
struct rmt_probe_info {
	uint32_t index;                      /* in: which probe                     */
	int32_t  state;                      /* 1 attached, 0 free slot, -errno: why it is not */
	char     symbol[RMT_PROBE_NAME_MAX];
	uint64_t hits;                       /* records written                     */
	uint64_t missed;                     /* kretprobe instances that ran out    */
};

struct rmt_kmod_stats {
	uint32_t version;    /* RMT_KMOD_VERSION                                    */
	uint32_t cpus;       /* rings                                               */
	uint32_t sources;    /* the source mask in force                            */
	uint32_t probes;     /* probes attached                                     */
	uint64_t ring_size;  /* bytes per ring                                      */
	uint64_t records;    /* written into the rings                              */
	uint64_t bytes;
	uint64_t drops_full; /* dropped: the ring was full (nobody read fast enough) */
	uint64_t drops_big;  /* dropped: larger than a record may be                */
	uint64_t drops_ctx;  /* dropped: called where nothing may be written (NMI)  */
	uint64_t consumed;   /* records handed to readers                           */
};

#define RMT_IOC_MAGIC       0xb7
#define RMT_IOC_STATS       _IOR(RMT_IOC_MAGIC, 1, struct rmt_kmod_stats)
#define RMT_IOC_SET_SOURCES _IOW(RMT_IOC_MAGIC, 2, uint32_t)
#define RMT_IOC_ADD_PROBE   _IOW(RMT_IOC_MAGIC, 3, struct rmt_probe_spec)
#define RMT_IOC_CLEAR_PROBES _IO(RMT_IOC_MAGIC, 4)
#define RMT_IOC_PROBE_INFO  _IOWR(RMT_IOC_MAGIC, 5, struct rmt_probe_info)

#endif /* RMTRACE_KMOD_H */
