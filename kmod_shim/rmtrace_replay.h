/*
 * rmtrace_replay.h: the control records of /dev/rmtrace-replay.
 *
 * The device speaks docs/replay-protocol.md with records in the one record
 * format (rmtrace_record.h) both ways: write() takes whole records, read()
 * returns the answers and the host service's own records.  Where the Unix
 * protocol's control records carry JSON, the device's carry these structs
 * (a kernel parses no JSON): a MARK record (op NOTE; BYE may be STOP) with
 * flag REPLAY whose first buffer, role ARG, starts with struct rmt_replay_ctl
 * and goes on with the op's body.  Text travels in TEXT buffers after it.
 *
 * One write() is whole units, all checked before any takes effect: a control
 * record, or a submission: [MSG] [oracle] request, where the oracle (flag
 * SYNTHETIC, the recorded reply) and the request carry the same pid and
 * call_id as the MSG.  Anything else is -EINVAL and changes nothing; the
 * reason is readable with RMT_IOC_REPLAY_ERROR.  Every write that is taken
 * is answered, after whatever it caused, by one ACK.
 *
 * The Python mirror is replayer/targets/kmod.py (checked by DWARF in
 * tests/kernel/test_kmod_abi.py); docs/kernel-shim.md describes it.
 */
#ifndef RMTRACE_REPLAY_H
#define RMTRACE_REPLAY_H

#ifdef __KERNEL__
#include <linux/types.h>
#include <linux/ioctl.h>
#else
#include <stdint.h>
#include <linux/ioctl.h>
#endif

#define RMT_REPLAY_MAGIC   0x594c5052u /* "RPLY" */
#define RMT_REPLAY_VERSION 1
#define RMT_REPLAY_MAX_WRITE (8u << 20)   /* most bytes one write() may carry   */
#define RMT_REPLAY_MAX_QUEUE (32u << 20)  /* most unread bytes a session holds  */
#define RMT_REPLAY_TEXT_MAX 256           /* longest name or label of a MSG     */

enum rmt_replay_op {
	RMT_REPLAY_HELLO   = 1, /* both ways: start the session / the service says who it is */
	RMT_REPLAY_MSG     = 2, /* in: the facts of the request that follows                */
	RMT_REPLAY_WHY     = 3, /* both ways: why is this request unanswered / the chain     */
	RMT_REPLAY_ADVANCE = 4, /* in: move the virtual clock (fires the target's timers)    */
	RMT_REPLAY_BYE     = 5, /* in: the replay is over (the service sends its last records) */
	RMT_REPLAY_ACK     = 6, /* out: a write was handled                                  */
	RMT_REPLAY_TARGET  = 7, /* in: configuration for the target (body: its own)          */
	RMT_REPLAY_REFUSED = 8, /* out, from the VM relay: the device refused a write (body below, reason in TEXT) */
};

enum rmt_replay_clock {
	RMT_CLOCK_VIRTUAL = 1, /* time moves only by ADVANCE: deterministic, as --against model */
	RMT_CLOCK_REAL    = 2, /* CLOCK_MONOTONIC, the target's timers fire by themselves       */
};

/* rmt_replay_msg.kind: what a message means to the host model (replayer/messages.py's Kind). */
enum rmt_replay_kind {
	RMT_KIND_PASS               = 0,  /* answered as bare metal did                  */
	RMT_KIND_RM_CLIENT          = 1,  /* RM_ALLOC of a root client                   */
	RMT_KIND_RM_ALLOC           = 2,
	RMT_KIND_RM_FREE            = 3,
	RMT_KIND_RM_CONTROL         = 4,
	RMT_KIND_WORK_TOKEN         = 5,  /* the channel goes live at the host           */
	RMT_KIND_UVM_INITIALIZE     = 6,
	RMT_KIND_UVM_CALL           = 7,  /* any other UVM ioctl                         */
	RMT_KIND_UVM_REGISTER_GPU   = 8,
	RMT_KIND_UVM_UNREGISTER_GPU = 9,
	RMT_KIND_SYS_OPEN           = 10,
	RMT_KIND_SYS_CLOSE          = 11,
	RMT_KIND_SYS_EXIT           = 12,
	RMT_KIND_GSP_INIT           = 13, /* the GSP boot handshake of a GSP-level client */
};

/* rmt_replay_msg.category: what an RM_ALLOC's class makes (replayer/model/objects.py's Category). */
enum rmt_replay_category {
	RMT_CAT_OTHER     = 0,
	RMT_CAT_ROOT      = 1,
	RMT_CAT_DEVICE    = 2,
	RMT_CAT_SUBDEVICE = 3,
	RMT_CAT_VASPACE   = 4,
	RMT_CAT_TSG       = 5,
	RMT_CAT_CHANNEL   = 6,
	RMT_CAT_CE        = 7,
	RMT_CAT_COMPUTE   = 8,
	RMT_CAT_MEMORY    = 9,
};

/* Statuses the target answers with, from the trace's driver profile. */
enum rmt_replay_status {
	RMT_ST_OK             = 0,
	RMT_ST_ILLEGAL_ACTION = 1,
	RMT_ST_DUPLICATE      = 2, /* NV_ERR_INSERT_DUPLICATE_NAME */
	RMT_ST_BAD_HANDLE     = 3, /* NV_ERR_INVALID_OBJECT_HANDLE */
	RMT_ST_NOT_FOUND      = 4, /* NV_ERR_OBJECT_NOT_FOUND      */
	RMT_ST_BAD_CLIENT     = 5, /* NV_ERR_INVALID_CLIENT        */
	RMT_ST_COUNT          = 8,
};

/* Answer parts a service produces (hello reply's answers). */
enum rmt_replay_answers {
	RMT_ANSWERS_STATUS = 1u << 0,
	RMT_ANSWERS_RET    = 1u << 1,
	RMT_ANSWERS_ERR    = 1u << 2,
	RMT_ANSWERS_FIELDS = 1u << 3,
};

struct rmt_replay_ctl {
	uint32_t magic;    /* RMT_REPLAY_MAGIC                       */
	uint16_t version;  /* RMT_REPLAY_VERSION                     */
	uint16_t op;       /* enum rmt_replay_op                     */
	uint32_t length;   /* this header + the body                 */
	uint32_t reserved; /* zero                                   */
};

/* HELLO, client -> device */
struct rmt_replay_hello {
	uint32_t clock;                    /* enum rmt_replay_clock                    */
	uint32_t reserved;
	uint64_t start_ns;                 /* virtual clock's start                    */
	uint32_t status[RMT_ST_COUNT];     /* NV_STATUS of each enum rmt_replay_status */
	char     target[32];               /* which registered target; "" the newest   */
};

/* HELLO, device -> client */
struct rmt_replay_hello_reply {
	uint32_t clock;
	uint32_t answers;                  /* enum rmt_replay_answers                  */
	uint64_t now_ns;
	char     service[64];              /* e.g. "rmtrace_sample:legacy"             */
};

/* A place where an answer's NV_STATUS lives: buffer index, byte offset. */
struct rmt_replay_status_at {
	uint16_t buffer;
	uint16_t width; /* 4 */
	uint32_t offset;
};

#define RMT_REPLAY_STATUS_AT 4

/* MSG: what the replayer knows of the request that follows (replayer/messages.py's
 * Message, precomputed from the trace's decoders); TEXT buffers follow the
 * ARG: the message's name ("UVM_REGISTER_GPU"), then the client's label. */
struct rmt_replay_msg {
	uint32_t kind;          /* enum rmt_replay_kind                              */
	uint32_t index;         /* position in its client's stream, 0-based          */
	uint32_t category;      /* enum rmt_replay_category of an RM_ALLOC           */
	int32_t  fd;
	uint32_t h_client;
	uint32_t h_parent;
	uint32_t h_object;
	int32_t  expect;        /* 1 a reply was recorded, 0 an event, -1 in flight  */
	uint32_t has_status;    /* the recorded reply has an NV_STATUS                */
	uint32_t status;        /* which                                              */
	uint64_t ring_va;
	uint64_t userd_va;
	uint64_t ring_size;
	uint8_t  gpu[16];       /* UVM: the GPU's UUID                                */
	uint32_t nstatus;       /* <= RMT_REPLAY_STATUS_AT                            */
	uint32_t reserved;
	struct rmt_replay_status_at status_at[RMT_REPLAY_STATUS_AT];
};

/* WHY, both ways (device -> client: a TEXT buffer follows, lines split by \n) */
struct rmt_replay_why {
	uint32_t source;
	uint32_t pid;
	uint64_t call_id;
};

/* ADVANCE flags */
enum rmt_replay_advance_flag {
	RMT_ADVANCE_UNTIL_ANSWER = 1u << 0, /* stop at the first due time that answered something */
};

struct rmt_replay_advance {
	uint64_t to_ns;
	uint32_t flags;
	uint32_t reserved;
};

struct rmt_replay_ack {
	uint64_t write_seq;     /* which write (1, 2, ...)                    */
	uint64_t now_ns;        /* the session's clock after it               */
	uint64_t next_timer_ns; /* the target's earliest timer, ~0 for none    */
	uint32_t parked;        /* requests waiting for their answer           */
	uint32_t reserved;
};

/* REFUSED: what write() said */
struct rmt_replay_refused {
	int32_t err;       /* errno */
	uint32_t reserved;
};

#define RMT_REPLAY_ERROR_MAX 160
#define RMT_IOC_REPLAY_ERROR _IOR(0xb7, 0x20, char[RMT_REPLAY_ERROR_MAX])

#endif /* RMTRACE_REPLAY_H */
