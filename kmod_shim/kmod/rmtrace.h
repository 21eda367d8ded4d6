/* SPDX-License-Identifier: GPL-2.0 */
/*
 * rmtrace.h: what rmtrace.ko exports to other kernel modules.
 *
 * 1. rmtrace_emit(): a host service puts its own records (sema-service
 *    messages, GSP RPCs, counters, session resets) into rmtrace's per-CPU
 *    rings, in the one record format.  Callable from any context but NMI;
 *    never sleeps; a full ring drops the record and counts it.
 *
 * 2. rmtrace_register_target(): a host service serves replays.  Each open
 *    file of /dev/rmtrace-replay is one session with a fresh state from
 *    ops->open; every request of the replay reaches ops->submit, under the
 *    session's mutex (process context, may sleep), and the service answers
 *    it now or later with rmtrace_replay_answer().  Its own records go out
 *    with rmtrace_replay_emit(): to the replaying client and into the rings.
 *
 * kmod_shim/sample_target/ is the worked example; docs/kernel-shim.md says
 * what a team adds to its own service.
 */
#ifndef RMTRACE_KERNEL_H
#define RMTRACE_KERNEL_H

#include <linux/types.h>

#include "../rmtrace_record.h"
#include "../rmtrace_replay.h"

struct module;

/* The header of a record to emit; time_ns 0 means now. */
struct rmt_event {
	u16 source;
	u8 phase;
	u8 flags;
	u32 op;
	s32 fd;
	u32 pid;
	u32 tid;
	u64 call_id;
	s64 ret;
	s32 err;
	u64 time_ns;
};

/* One buffer of a record to emit (orig_len 0 means len). */
struct rmt_emit_buf {
	u16 role;
	u8 when;
	u8 flags;
	u32 len;
	const void *data;
	u64 addr;
	u32 orig_len;
	u32 slot;
};

/*
 * Write one record into this CPU's ring.  0: written; -ENOSPC: the ring was
 * full, -E2BIG: too large, -EDEADLK: NMI context (each one counted as a drop);
 * -ENODATA: its source is not being recorded (not a drop); -EINVAL: nbufs.
 */
int rmtrace_emit(const struct rmt_event *ev, const struct rmt_emit_buf *bufs, unsigned int nbufs);

struct rmt_session;

/* One submission of a replay: the request, the oracle, the facts. */
struct rmt_request {
	const struct rmt_record *rec;      /* the request as the replayer sent it    */
	u32 len;
	const struct rmt_record *oracle;   /* the recorded reply, or NULL            */
	u32 oracle_len;
	const struct rmt_replay_msg *msg;  /* its facts, or NULL (answer as recorded) */
	const char *name;                  /* the message's name, "" if none         */
	const char *owner;                 /* its client's label, "" if none         */
};

struct rmt_target_ops {
	const char *name;
	struct module *owner;
	u32 answers;                                    /* enum rmt_replay_answers */
	/* A fresh host state for a new session; an ERR_PTR refuses the session. */
	void *(*open)(struct rmt_session *s, char *service, size_t size);
	void (*release)(void *state);
	int (*submit)(void *state, const struct rmt_request *req);
	/* The earliest timer, U64_MAX when none; fire every timer due by now. */
	u64 (*next_timer)(void *state);
	void (*fire)(void *state, u64 now);
	/* Why the request (source, pid, call_id) waits: lines ending in \n; the length written. */
	size_t (*explain)(void *state, const struct rmt_replay_why *why, char *buf, size_t size);
	/* RMT_REPLAY_TARGET records: configuration only this target understands.  check() says
	 * whether configure() would take it, changing nothing (-EINVAL refuses the whole write
	 * before any of it runs); configure() then fails only for want of resources. */
	int (*check)(void *state, const void *body, u32 len, const struct rmt_record *rec);
	int (*configure)(void *state, const void *body, u32 len, const struct rmt_record *rec);
	void (*bye)(void *state);
};

int rmtrace_register_target(const struct rmt_target_ops *ops);
void rmtrace_unregister_target(const struct rmt_target_ops *ops);

/* The session's clock (virtual or CLOCK_MONOTONIC, as its HELLO chose). */
u64 rmtrace_replay_now(struct rmt_session *s);
/* The NV_STATUS the trace's profile gives enum rmt_replay_status `which`. */
u32 rmtrace_replay_status(struct rmt_session *s, unsigned int which);
/*
 * Answer a request: the oracle (or the request, turned into its reply) with
 * `status` written where the MSG says the status lives; status_override false
 * keeps it as recorded.  Queued for the client and logged into the rings.
 */
int rmtrace_replay_answer(struct rmt_session *s, const struct rmt_request *req, bool status_override, u32 status);
/* A copy of a submission that outlives submit() (for an answer given later); free with kfree(). */
struct rmt_request *rmtrace_request_keep(const struct rmt_request *req, gfp_t gfp);
/* A record of the service's own: to the client (session clock) and the rings (now). */
int rmtrace_replay_emit(struct rmt_session *s, const struct rmt_event *ev, const struct rmt_emit_buf *bufs,
			unsigned int nbufs);

#endif /* RMTRACE_KERNEL_H */
