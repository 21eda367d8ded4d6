/* SPDX-License-Identifier: GPL-2.0 */
/*
 * rmtrace_internal.h: what the pieces of rmtrace.ko share.
 *
 *   rmtrace_main.c    module parameters, init and exit, debugfs counters
 *   rmtrace_ring.c    the per-CPU rings, rmtrace_emit(), /dev/rmtrace
 *   rmtrace_probe.c   kretprobes from probe specs, the default probe list
 *   rmtrace_replay.c  /dev/rmtrace-replay, sessions, the target registry
 *   rmtrace_detach.c  every open file of the two devices; ending their streams for an unload
 */
#ifndef RMTRACE_INTERNAL_H
#define RMTRACE_INTERNAL_H

#include <linux/list.h>
#include <linux/sched.h>
#include <linux/types.h>
#include <linux/wait.h>

#include "rmtrace.h"
#include "../rmtrace_kmod.h"

#define RMT_HEADER_SIZE ((u32)sizeof(struct rmt_record))
#define RMT_BUF_HEADER_SIZE ((u32)sizeof(struct rmt_buffer))
#define RMT_MAX_BUFS 32

extern unsigned int rmt_ring_kb;
extern unsigned int rmt_max_record;

/* rings */
int rmt_rings_init(void);
void rmt_rings_exit(void);
int rmt_dev_init(void);
void rmt_dev_exit(void);
bool rmt_source_on(u16 source);
u32 rmt_sources(void);
void rmt_set_sources(u32 mask);
void rmt_stats(struct rmt_kmod_stats *st);
/* Write an already-encoded record (checked by the caller), restamped with time_ns when nonzero. */
int rmt_emit_encoded(const void *rec, u32 len, u64 time_ns);
/* A record's bytes are well formed: header, buffers, lengths (0) or -EINVAL with *why set. */
int rmt_record_check(const void *data, u32 len, const char **why);

/* probes */
int rmt_probes_init(const char *list);
void rmt_probes_exit(void);
int rmt_probe_add(const struct rmt_probe_spec *spec);
void rmt_probes_clear(void);
int rmt_probe_info(struct rmt_probe_info *info);
u32 rmt_probes_attached(void);
u64 rmt_next_call_id(void);

/* detach: each open file of either device is registered, so that detaching can end its stream */
struct rmt_opener {
	struct list_head node;
	const char *device;
	wait_queue_head_t *wq; /* woken when the module detaches */
	pid_t pid;
	char comm[TASK_COMM_LEN];
};

/* 0, or -ENODEV once the module has detached (nothing new may open). */
int rmt_file_opened(struct rmt_opener *o, const char *device, wait_queue_head_t *wq);
void rmt_file_closed(struct rmt_opener *o);
bool rmt_detached(void);

/* replay */
int rmt_replay_init(void);
void rmt_replay_exit(void);

#endif /* RMTRACE_INTERNAL_H */
