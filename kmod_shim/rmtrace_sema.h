/*
 * rmtrace_sema.h: the one definition of a host semaphore/GR service message.
 *
 * A host service that emulates GSP for a guest (or rmtrace's reference model
 * of one, in the replayer) reports what it does as rmtrace records of source
 * RMT_SRC_SEMA: op = enum rmt_sema_op, one buffer of role RMT_BUF_PAYLOAD
 * (when RMT_WHEN_ONCE) holding one message: struct rmt_sema_hdr, then the
 * body the op names.  Phases: RMT_PH_SEND for what the guest asked of the
 * host, RMT_PH_RECV for what the host gave the guest, RMT_PH_EVENT for host
 * state changes nobody asked for.  The record's pid/tid are the guest
 * process when known (0 otherwise).
 *
 * The Python mirror (rmtrace/decoders/sema.py) is checked against the DWARF
 * layout of this header by tests/test_sema.py.  docs/sema-protocol.md gives
 * the semantics: which host counters move when, and how the second-client
 * wedge looks in these messages.
 *
 * All integers are little-endian; every struct is naturally aligned with no
 * implicit padding, so the layout is the same for any C compiler.
 */
#ifndef RMTRACE_SEMA_H
#define RMTRACE_SEMA_H

#ifdef __KERNEL__
#include <linux/types.h> /* uint32_t and friends, for the kernel modules */
#else
#include <stdint.h>
#endif

#define RMT_SEMA_MAGIC   0x414d4553u /* "SEMA" as bytes in the stream */
#define RMT_SEMA_VERSION 1
#define RMT_SEMA_NO_RANK 0xffffffffu /* no CE rank derived (yet)      */

enum rmt_sema_op {
	RMT_SEMA_REGISTER_CHANNEL   = 1,  /* SEND  rmt_sema_channel   guest registers a channel      */
	RMT_SEMA_UNREGISTER_CHANNEL = 2,  /* SEND  rmt_sema_channel   guest drops a channel          */
	RMT_SEMA_PUBLISH_RING       = 3,  /* SEND  rmt_sema_publish   GPFIFO ring address published  */
	RMT_SEMA_PUBLISH_USERD      = 4,  /* SEND  rmt_sema_publish   USERD address published        */
	RMT_SEMA_COMPLETION_HINT    = 5,  /* SEND  rmt_sema_hint      guest hints new work; rc = host verdict */
	RMT_SEMA_RELEASE            = 6,  /* RECV  rmt_sema_sem       host applied a GR release (gr_rel) */
	RMT_SEMA_ACQUIRE            = 7,  /* SEND  rmt_sema_sem       guest waits for a semaphore value */
	RMT_SEMA_LATCH_ARM          = 8,  /* EVENT rmt_sema_latch     a rank's one-shot latch armed  */
	RMT_SEMA_LATCH_FIRE         = 9,  /* EVENT rmt_sema_latch     a rank's latch fired (now spent) */
	RMT_SEMA_DRAIN_HOLD         = 10, /* EVENT rmt_sema_drain     host holds completions to drain */
	RMT_SEMA_DRAIN_RELEASE      = 11, /* EVENT rmt_sema_drain     the hold ended                 */
	RMT_SEMA_SESSION_RESET      = 12, /* EVENT rmt_sema_session   new GSP session / client context */
	RMT_SEMA_FAKED_COMPLETION   = 13, /* RECV  rmt_sema_sem       host completed for the guest (faked) */
	RMT_SEMA_COUNTERS           = 14, /* EVENT rmt_sema_counters  snapshot of the host counters  */
};

/* Why a SESSION_RESET happened (rmt_sema_session.reason). */
enum rmt_sema_reset_reason {
	RMT_SEMA_RESET_GSP_INIT   = 1, /* the guest re-ran the GSP boot handshake   */
	RMT_SEMA_RESET_NEW_CLIENT = 2, /* a new guest RM client context appeared    */
	RMT_SEMA_RESET_HOST       = 3, /* the host service reset itself             */
};

/* Why a drain hold started or ended (rmt_sema_drain.reason). */
enum rmt_sema_drain_reason {
	RMT_SEMA_DRAIN_CHANNEL_TEARDOWN = 1, /* a channel is being unregistered    */
	RMT_SEMA_DRAIN_SESSION_RESET    = 2, /* a session reset drains old work    */
	RMT_SEMA_DRAIN_DONE             = 3, /* RELEASE: everything drained         */
	RMT_SEMA_DRAIN_TIMEOUT          = 4, /* RELEASE: the bound expired (degrade) */
};

/* Index of a value in rmt_sema_counters.value[]; new counters are appended. */
enum rmt_sema_counter {
	RMT_SEMA_CTR_PUB_CALLS   = 0, /* PUBLISH_RING + PUBLISH_USERD accepted          */
	RMT_SEMA_CTR_GR_REL      = 1, /* RELEASEs applied                               */
	RMT_SEMA_CTR_FAKED       = 2, /* FAKED_COMPLETIONs                              */
	RMT_SEMA_CTR_DRAIN_HELD  = 3, /* completions held by drain holds right now      */
	RMT_SEMA_CTR_HINTS       = 4, /* COMPLETION_HINTs received                      */
	RMT_SEMA_CTR_HINT_ERRORS = 5, /* COMPLETION_HINTs answered with rc != 0         */
	RMT_SEMA_CTR_LATCH_FIRED = 6, /* LATCH_FIREs                                    */
	RMT_SEMA_CTR_LATCH_ARMED = 7, /* LATCH_ARMs                                     */
	RMT_SEMA_CTR_CHANNELS    = 8, /* channels registered right now                  */
	RMT_SEMA_CTR_SESSIONS    = 9, /* SESSION_RESETs                                 */
};

struct rmt_sema_hdr {
	uint32_t magic;   /* RMT_SEMA_MAGIC                                     */
	uint16_t version; /* RMT_SEMA_VERSION                                   */
	uint16_t op;      /* enum rmt_sema_op, equal to the record's op         */
	uint32_t length;  /* header + body bytes                                */
	uint32_t vgpu;    /* vGPU instance the message is about                 */
	uint64_t session; /* host session generation the message was handled in */
};

/* REGISTER_CHANNEL, UNREGISTER_CHANNEL */
struct rmt_sema_channel {
	uint32_t client;   /* guest RM client handle (hClient)                   */
	uint32_t channel;  /* guest channel handle, e.g. 0xcaf000d4              */
	uint64_t ring_va;  /* GPFIFO ring GPU VA                                  */
	uint64_t userd_va; /* USERD GPU VA                                        */
	uint32_t rank;     /* CE rank the host derived from ring_va, or NO_RANK   */
	int32_t  rc;       /* host's result: 0 or -errno                          */
};

/* PUBLISH_RING, PUBLISH_USERD */
struct rmt_sema_publish {
	uint32_t channel;   /* channel handle                                     */
	uint32_t rank;      /* CE rank the publication lands on, or NO_RANK       */
	uint64_t va;        /* published GPU VA                                   */
	uint64_t size;      /* bytes published                                    */
	uint64_t pub_calls; /* counter pub_calls after this message               */
	int32_t  rc;        /* 0 accepted, -errno rejected (not counted)           */
	uint32_t reserved;  /* zero                                               */
};

/* COMPLETION_HINT */
struct rmt_sema_hint {
	uint32_t channel;  /* channel handle the guest named                     */
	uint32_t rank;     /* rank the host resolved it to, or NO_RANK           */
	uint64_t value;    /* semaphore value the guest's work will release      */
	int32_t  rc;       /* 0 applied; -22 (EINVAL) unknown or stale channel   */
	uint32_t reserved; /* zero                                               */
};

/* RELEASE, ACQUIRE, FAKED_COMPLETION */
struct rmt_sema_sem {
	uint32_t channel;  /* channel handle                                     */
	uint32_t rank;     /* CE rank                                            */
	uint64_t sema_va;  /* semaphore GPU VA                                   */
	uint64_t value;    /* value released / waited for                        */
	uint64_t counter;  /* gr_rel after RELEASE, faked after FAKED_COMPLETION, 0 for ACQUIRE */
	int32_t  rc;       /* 0 or -errno                                        */
	uint32_t reserved; /* zero                                               */
};

/* LATCH_ARM, LATCH_FIRE */
struct rmt_sema_latch {
	uint32_t rank;       /* the rank whose latch this is                     */
	uint32_t channel;    /* channel that armed or fired it                   */
	uint32_t generation; /* how many times this latch has been armed         */
	uint32_t armed;      /* state after the event: 1 armed, 0 spent          */
};

/* DRAIN_HOLD, DRAIN_RELEASE */
struct rmt_sema_drain {
	uint32_t rank;     /* rank being drained                                 */
	uint32_t channel;  /* channel being drained                              */
	uint32_t held;     /* counter drain_held after this message              */
	uint32_t reason;   /* enum rmt_sema_drain_reason                         */
	uint64_t held_ns;  /* RELEASE: how long the hold lasted; HOLD: 0         */
};

/* SESSION_RESET */
struct rmt_sema_session {
	uint64_t old_session;      /* generation before                          */
	uint64_t new_session;      /* generation after (the header carries it)   */
	uint32_t client;           /* guest client that caused it, 0 if none     */
	uint32_t reason;           /* enum rmt_sema_reset_reason                 */
	uint32_t channels_dropped; /* per-client channel state cleared           */
	uint32_t latches_rearmed;  /* one-shot rank latches re-armed             */
};

/* COUNTERS */
struct rmt_sema_counters {
	uint32_t count;    /* number of values that follow                       */
	uint32_t reserved; /* zero                                               */
	uint64_t value[];  /* indexed by enum rmt_sema_counter                   */
};

#endif /* RMTRACE_SEMA_H */
