/*
 * rmtrace_record.h: the one definition of an rmtrace record.
 *
 * The same bytes travel through the interposer's shared-memory rings, the
 * kernel module's device, the trace file's chunks and the replay targets'
 * input and output.  The Python mirror (rmtrace/record.py) is checked against
 * the DWARF layout of this header by tests/test_record_abi.py, so the two
 * cannot drift.  docs/trace-format.md describes the bytes in prose.
 *
 * Layout of one record in a byte stream (all integers little-endian):
 *
 *   struct rmt_record                       72 bytes
 *   nbufs x { struct rmt_buffer             24 bytes
 *             data[len], zero padded to a multiple of 8 }
 *
 * total_len covers all of it and is always a multiple of 8, so a reader can
 * skip a record it does not understand.
 */
#ifndef RMTRACE_RECORD_H
#define RMTRACE_RECORD_H

#ifdef __KERNEL__
#include <linux/types.h> /* uint32_t and friends, for the kernel modules */
#else
#include <stdint.h>
#endif

#define RMT_RECORD_MAGIC   0x52544d52u /* "RMTR" as bytes in the stream */
#define RMT_RECORD_VERSION 1
#define RMT_ALIGN          8u
#define RMT_ALIGN_UP(n)    (((n) + RMT_ALIGN - 1u) & ~(RMT_ALIGN - 1u))

/* Where a record comes from. */
enum rmt_source {
	RMT_SRC_RM   = 1, /* RM ioctl on /dev/nvidiactl or /dev/nvidiaN   */
	RMT_SRC_UVM  = 2, /* UVM ioctl on /dev/nvidia-uvm(-tools)         */
	RMT_SRC_GSP  = 3, /* GSP RPC message (queue element or bare RPC)   */
	RMT_SRC_SEMA = 4, /* host semaphore/GR service message             */
	RMT_SRC_SYS  = 5, /* open/close/dup/mmap/munmap/fork/exec/exit     */
	RMT_SRC_MARK = 6, /* annotations, losses, in-flight marks, verdicts */
};

/* What moment of a call or message a record describes. */
enum rmt_phase {
	RMT_PH_ENTER = 1, /* before a call: written before it can block */
	RMT_PH_EXIT  = 2, /* after a call, same call_id as its enter     */
	RMT_PH_SEND  = 3, /* a message sent                              */
	RMT_PH_RECV  = 4, /* a message received                          */
	RMT_PH_EVENT = 5, /* something that happened, no pairing         */
};

/* rmt_record.flags */
enum rmt_record_flag {
	RMT_RF_TRUNCATED  = 1u << 0, /* at least one buffer was cut short       */
	RMT_RF_UNREADABLE = 1u << 1, /* at least one pointer could not be read   */
	RMT_RF_SYNTHETIC  = 1u << 2, /* written by the recorder, not the process */
	RMT_RF_REPLAY     = 1u << 3, /* produced by a replay                     */
};

/* rmt_record.op for source RMT_SRC_SYS */
enum rmt_sys_op {
	RMT_SYS_OPEN   = 1, /* fd = new fd, buffer PATH                    */
	RMT_SYS_CLOSE  = 2,
	RMT_SYS_DUP    = 3, /* fd = new fd, ret = old fd                   */
	RMT_SYS_MMAP   = 4, /* buffer ARG = struct rmt_sys_mmap            */
	RMT_SYS_MUNMAP = 5, /* buffer ARG = struct rmt_sys_mmap            */
	RMT_SYS_FORK   = 6, /* ret = child pid (in the parent)             */
	RMT_SYS_EXEC   = 7, /* buffers PATH and TEXT (argv, NUL separated)  */
	RMT_SYS_EXIT   = 8, /* ret = exit status or signal                 */
};

/* rmt_record.op for source RMT_SRC_MARK */
enum rmt_mark_op {
	RMT_MARK_IN_FLIGHT = 1, /* call_id/pid/tid name a call still in flight at stop */
	RMT_MARK_LOST      = 2, /* TEXT: JSON with named loss counters                 */
	RMT_MARK_NOTE      = 3, /* TEXT: free annotation                                */
	RMT_MARK_VERDICT   = 4, /* TEXT: JSON replay verdict for one client             */
	RMT_MARK_STOP      = 5, /* TEXT: JSON why and when the recording stopped        */
};

/* rmt_buffer.role: what a buffer holds. */
enum rmt_buf_role {
	RMT_BUF_ARG          = 1, /* the ioctl argument struct (UVM: its params)   */
	RMT_BUF_PARAMS       = 2, /* RM_CONTROL params                             */
	RMT_BUF_ALLOC_PARAMS = 3, /* RM_ALLOC / RM_ALLOC_MEMORY alloc params        */
	RMT_BUF_NESTED       = 4, /* an array a params struct points to (slot = which) */
	RMT_BUF_XFER         = 5, /* IOCTL_XFER_CMD's inner argument                */
	RMT_BUF_PATH         = 6, /* a file path                                    */
	RMT_BUF_TEXT         = 7, /* UTF-8 text or JSON                             */
	RMT_BUF_PAYLOAD      = 8, /* a message: GSP RPC or sema-service body        */
	RMT_BUF_RIGHTS       = 9, /* RM_ALLOC's pRightsRequested                    */
};

/* rmt_buffer.when */
enum rmt_buf_when {
	RMT_WHEN_BEFORE = 1, /* read before the call      */
	RMT_WHEN_AFTER  = 2, /* read after the call       */
	RMT_WHEN_ONCE   = 3, /* messages, system records  */
};

/* rmt_buffer.flags */
enum rmt_buf_flag {
	RMT_BF_TRUNCATED  = 1u << 0, /* len < orig_len: cut at the capture limit    */
	RMT_BF_UNREADABLE = 1u << 1, /* the pointer was bad; len is 0                */
};

struct rmt_record {
	uint32_t magic;       /* RMT_RECORD_MAGIC                               */
	uint16_t version;     /* RMT_RECORD_VERSION                             */
	uint16_t header_size; /* sizeof(struct rmt_record): buffers start here  */
	uint32_t total_len;   /* header + buffers + padding, multiple of 8      */
	uint16_t source;      /* enum rmt_source                                */
	uint8_t  phase;       /* enum rmt_phase                                 */
	uint8_t  flags;       /* enum rmt_record_flag                           */
	uint64_t seq;         /* position in the trace (the recorder assigns)   */
	uint64_t time_ns;     /* CLOCK_MONOTONIC                                */
	uint32_t pid;
	uint32_t tid;
	uint64_t call_id;     /* pairs enter and exit; unique per process       */
	uint32_t op;          /* escape nr, UVM command, RPC function, sema op  */
	int32_t  fd;          /* -1 where none                                  */
	int64_t  ret;         /* return value (exit phase)                      */
	int32_t  err;         /* errno (exit phase), 0 when none                */
	uint16_t nbufs;       /* number of struct rmt_buffer that follow        */
	uint16_t reserved;    /* zero                                           */
};

struct rmt_buffer {
	uint16_t role;     /* enum rmt_buf_role                                 */
	uint8_t  when;     /* enum rmt_buf_when                                 */
	uint8_t  flags;    /* enum rmt_buf_flag                                 */
	uint32_t len;      /* bytes of data that follow, before padding         */
	uint64_t addr;     /* user address it was read from, 0 where none       */
	uint32_t orig_len; /* bytes the program pointed at (>= len)             */
	uint32_t slot;     /* NESTED: which pointer of the parent; else 0       */
};

/* Payload of RMT_SYS_MMAP / RMT_SYS_MUNMAP records (buffer role ARG). */
struct rmt_sys_mmap {
	uint64_t addr;   /* mapping address (the result, for mmap)  */
	uint64_t length;
	uint64_t offset;
	int32_t  prot;
	int32_t  flags;
};

#endif /* RMTRACE_RECORD_H */
