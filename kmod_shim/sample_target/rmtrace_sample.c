// SPDX-License-Identifier: GPL-2.0
/*
 * rmtrace_sample.c: a sample host service for /dev/rmtrace-replay.
 *
 * It implements the reference semantics of rmtrace's host-service model
 * (replayer/model/ in Python: core.py the guest's UVM/RM side, host.py the
 * sema service, objects.py RM's object lifecycle, policy.py the presets),
 * ported call for call, so a replay against it answers, parks, explains and
 * emits exactly what `--against model:legacy` / `model:fixed` does: the
 * differential test in tests/kernel compares them message by message.
 * docs/host-service-model.md describes the model; docs/kernel-shim.md
 * shows, with this file, the handful of calls a real host service adds.
 *
 * The policy is the module parameter `policy` (fixed, legacy, rearm-only),
 * read when a session opens.  Every state change of the sema service goes
 * out as a sema-service record (docs/sema-protocol.md) and the exchanges'
 * RPCs as GSP records, through rmtrace_replay_emit(): to the replaying
 * client and into rmtrace's rings.
 *
 * A guest call that must wait (for the UVM global lock, for the host to
 * complete work) is a task with a stack of frames, each a step of the
 * model's generator of the same name; it resumes where it stopped.  All
 * state is per session, touched only under the session's mutex; every
 * allocation is counted against a bound and freed when the session ends.
 */
#include <linux/list.h>
#include <linux/module.h>
#include <linux/slab.h>
#include <linux/sort.h>
#include <linux/string.h>

#include "../kmod/rmtrace.h"
#include "../rmtrace_sema.h"
#include "rmtrace_sample.h"

/* ------------------------------------------------------------ the model's constants (core.py, host.py) */

#define UVM_CLIENT 0xC1E00000u
#define UVM_CHANNEL 0xCAF000D4u
#define UVM_RING_VA 0xFFF0020000ull
#define UVM_USERD_VA 0xFFF0030000ull
#define UVM_RING_SIZE 0x8000ull
#define USERD_SIZE 0x200ull
#define RANK_SHIFT 16
#define HOLDS_NAMED 3
#define NO_STATUS (-1)
#define MAX_ALLOCS (1u << 20)
#define UVM_OBJECTS 6
#define OWNER_MAX (RMT_REPLAY_TEXT_MAX + 32)

static const char *const REGISTRATION = "registration exchange (uvm_gpu_retain_by_uuid -> add_gpu)";
static const char *const UNREGISTRATION = "unregister exchange (uvm_gpu_release_locked -> nvUvmInterfaceUnregisterGpu)";
static const char *const BRING_UP = "channel bring-up (first work on a new channel)";

struct policy {
	const char *name;
	bool reset_on_new_session, rearm_on_session, rearm_on_register, clear_stale_on_session,
		clear_stale_on_register, publications_per_client, rearm_on_queued_work;
	u64 drain_bound_ns; /* 0: unbounded */
	u32 ranks;
};

static const struct policy policies[] = {
	{ "fixed", true, true, true, true, true, true, true, 20 * NSEC_PER_MSEC, 4 },
	{ "legacy", false, false, false, false, false, false, false, 0, 4 },
	{ "rearm-only", true, true, true, false, false, false, false, 0, 4 },
};

static char *policy = "fixed";
module_param(policy, charp, 0644);
MODULE_PARM_DESC(policy, "host-service behaviour for new sessions: fixed, legacy or rearm-only");

/* ------------------------------------------------------------ state */

struct hchan {
	struct list_head node;    /* state->channels: every channel ever registered */
	bool uvm;                 /* key ("uvm", uuid) or (pid, hClient, handle)      */
	u8 uuid[16];
	u32 kpid, kclient;
	bool in_dict;             /* the model's channels[key] is this one           */
	u32 client, handle, rank, pid;
	u64 ring_va, userd_va, order;
	bool live, ring_ok;
	char owner[OWNER_MAX];
};

struct pub {
	struct list_head node;
	bool scoped, uvm;
	u32 kpid, kclient;
	int kind;                 /* 0 RING, 1 USERD */
	u64 va;
	struct hchan *owner;
};

struct hold {
	struct list_head node;    /* its rank's holds, in order */
	struct list_head timer;   /* state->timers, by (due, seq) */
	u32 rank;
	struct hchan *ch;
	u64 since, barrier, due, seq;
	bool active;
};

struct rank {
	bool armed;
	u32 generation;
	struct hchan *fired_by;
	struct list_head holds;
};

struct task;

struct completion_ {
	struct list_head node;    /* state->waiting while it waits */
	struct hchan *ch;
	u64 value, since;
	bool done;
	struct task *waiter;
};

struct chstate {              /* what the model keeps on an RM channel (ChannelState) */
	u64 ring_va, userd_va, ring_size;
	struct hchan *host;
	u64 work;
};

struct robj {
	struct list_head sibling;
	struct list_head children;
	struct list_head all;     /* its client's objects */
	u32 handle, category;
	struct robj *parent;
	struct chstate *extra;
};

struct rclient {
	struct list_head node;
	u32 pid, handle;
	s32 fd;
	struct list_head objects;
	struct robj *root;
};

struct vaspace {
	struct list_head node;
	u32 pid;
	s32 fd;
	bool listed;              /* in state->vaspaces */
	u8 gpus[8][16];
	u32 ngpus;
};

struct gpu {
	struct list_head node;
	u8 uuid[16];
	u32 refs;
	struct hchan *channel;
	struct chstate *state;
};

struct file_ {
	struct list_head node;
	u32 pid;
	s32 fd;
};

enum frame_type { F_BRINGUP, F_WORK, F_RETAIN, F_ADDGPU, F_RELEASE, F_DESTROY, F_EXIT };

struct frame {
	int type, pc;
	struct robj *obj;
	struct hchan *ch;
	struct chstate *st;
	struct vaspace *va;
	struct gpu *gpu;
	u8 uuid[16];
	u8 (*uuids)[16];
	s32 *fds;
	u32 i, n;
};

#define MAX_FRAMES 8

struct task {
	struct list_head node;    /* state->parked or ready */
	struct rmt_request *req;  /* its copy */
	struct frame frames[MAX_FRAMES];
	int depth;
	bool waits_lock;
	struct completion_ *waits;
	const char *stage;
	int status;
};

struct lock {
	struct task *holder;
	struct task *waiters[256];
	u32 head, n;
};

struct gsp_template {
	u32 function, seq_off, result_off, result_private_off, len;
	u8 *message;
};

struct state {
	struct rmt_session *s;
	const struct policy *p;
	u32 allocs;
	struct list_head mem;

	/* host (SemaHost) */
	u64 session;
	struct rank ranks[8];
	struct list_head channels, pubs, waiting, timers;
	u64 counters[10];
	u64 reported[10];
	bool has_reported;
	u64 order, timer_seq;

	/* guest (HostModel) */
	struct list_head clients, vaspaces, gpus, files, parked, ready;
	struct lock uvm_lock;
	bool handshake_session;

	/* GSP records of the exchanges (templates from the trace's profile) */
	struct gsp_template gsp[UVM_OBJECTS + 1];
	u32 gsp_sequence;
};

enum counter { C_PUB_CALLS, C_GR_REL, C_FAKED, C_DRAIN_HELD, C_HINTS, C_HINT_ERRORS, C_LATCH_FIRED,
	       C_LATCH_ARMED, C_CHANNELS, C_SESSIONS };

/* Every object of a session: counted (memory is bounded) and freed when it ends. */
struct mem {
	struct list_head node;
	u8 data[] __aligned(8);
};

static void *alloc(struct state *st, size_t size)
{
	struct mem *m;

	if (st->allocs >= MAX_ALLOCS)
		return NULL;
	m = kzalloc(sizeof(*m) + size, GFP_KERNEL);
	if (!m)
		return NULL;
	st->allocs++;
	list_add(&m->node, &st->mem);
	return m->data;
}

/* ------------------------------------------------------------ records (records.py) */

static const u8 sema_phase[] = {
	[RMT_SEMA_REGISTER_CHANNEL] = RMT_PH_SEND, [RMT_SEMA_UNREGISTER_CHANNEL] = RMT_PH_SEND,
	[RMT_SEMA_PUBLISH_RING] = RMT_PH_SEND, [RMT_SEMA_PUBLISH_USERD] = RMT_PH_SEND,
	[RMT_SEMA_COMPLETION_HINT] = RMT_PH_SEND, [RMT_SEMA_RELEASE] = RMT_PH_RECV,
	[RMT_SEMA_ACQUIRE] = RMT_PH_SEND, [RMT_SEMA_LATCH_ARM] = RMT_PH_EVENT, [RMT_SEMA_LATCH_FIRE] = RMT_PH_EVENT,
	[RMT_SEMA_DRAIN_HOLD] = RMT_PH_EVENT, [RMT_SEMA_DRAIN_RELEASE] = RMT_PH_EVENT,
	[RMT_SEMA_SESSION_RESET] = RMT_PH_EVENT, [RMT_SEMA_FAKED_COMPLETION] = RMT_PH_RECV,
	[RMT_SEMA_COUNTERS] = RMT_PH_EVENT,
};

/* One sema-service message (header + body) as a record, flagged as the host's, made by a replay. */
static void emit_sema(struct state *st, u16 op, const void *body, u32 size, u32 pid)
{
	u8 data[sizeof(struct rmt_sema_hdr) + sizeof(struct rmt_sema_counters) + 10 * sizeof(u64)];
	struct rmt_sema_hdr h = { .magic = RMT_SEMA_MAGIC, .version = RMT_SEMA_VERSION, .op = op,
				  .length = sizeof(h) + size, .vgpu = 0, .session = st->session };
	struct rmt_emit_buf buf = { .role = RMT_BUF_PAYLOAD, .when = RMT_WHEN_ONCE, .len = h.length, .data = data };
	struct rmt_event ev = { .source = RMT_SRC_SEMA, .phase = sema_phase[op], .op = op, .fd = -1, .pid = pid,
				.tid = pid, .flags = RMT_RF_REPLAY | RMT_RF_SYNTHETIC };

	memcpy(data, &h, sizeof(h));
	memcpy(data + sizeof(h), body, size);
	rmtrace_replay_emit(st->s, &ev, &buf, 1);
}

static void emit_counters(struct state *st)
{
	struct {
		struct rmt_sema_counters c;
		u64 value[10];
	} body = { .c = { .count = 10 } };

	if (st->has_reported && !memcmp(st->reported, st->counters, sizeof(st->counters)))
		return;
	st->has_reported = true;
	memcpy(st->reported, st->counters, sizeof(st->counters));
	memcpy(body.value, st->counters, sizeof(body.value));
	emit_sema(st, RMT_SEMA_COUNTERS, &body, sizeof(body), 0);
}

/* The RPCs of an exchange: the request UVM's RM sends and the host's response (GspRecords._exchange). */
static void emit_rpc(struct state *st, u32 which, u32 pid)
{
	struct gsp_template *t = &st->gsp[which];
	struct rmt_event ev = { .source = RMT_SRC_GSP, .op = t->function, .fd = -1, .pid = pid, .tid = pid,
				.flags = RMT_RF_REPLAY | RMT_RF_SYNTHETIC };
	struct rmt_emit_buf buf = { .role = RMT_BUF_PAYLOAD, .when = RMT_WHEN_ONCE, .len = t->len,
				    .data = t->message };
	u32 result;

	if (!t->message)
		return;
	st->gsp_sequence++;
	memcpy(t->message + t->seq_off, &st->gsp_sequence, 4);
	for (ev.phase = RMT_PH_SEND; ev.phase <= RMT_PH_RECV; ev.phase++) {
		result = ev.phase == RMT_PH_SEND ? 0xFFFFFFFFu : 0;
		memcpy(t->message + t->result_off, &result, 4);
		memcpy(t->message + t->result_private_off, &result, 4);
		rmtrace_replay_emit(st->s, &ev, &buf, 1);
	}
}

/* ------------------------------------------------------------ the sema service (host.py) */

static u32 rank_of(const struct state *st, u64 ring_va)
{
	return (u32)((ring_va >> RANK_SHIFT) % st->p->ranks);
}

static bool same_key(const struct hchan *a, const struct hchan *b)
{
	return a->uvm == b->uvm && (a->uvm ? !memcmp(a->uuid, b->uuid, 16) :
				    a->kpid == b->kpid && a->kclient == b->kclient && a->handle == b->handle);
}

static struct pub *pub_find(struct state *st, const struct hchan *ch, int kind, u64 va)
{
	bool scoped = st->p->publications_per_client;
	struct pub *p;

	list_for_each_entry(p, &st->pubs, node) {
		if (p->kind != kind || p->va != va || p->scoped != scoped)
			continue;
		if (!scoped || (p->uvm == ch->uvm && (ch->uvm || (p->kpid == ch->kpid && p->kclient == ch->kclient))))
			return p;
	}
	return NULL;
}

static u32 drop_stale(struct state *st)
{
	struct pub *p, *next;
	u32 n = 0;

	list_for_each_entry_safe(p, next, &st->pubs, node) {
		if (!p->owner->live) {
			list_del(&p->node);
			n++;
		}
	}
	return n;
}

static u32 arm(struct state *st, u32 index, struct hchan *ch, u32 pid)
{
	struct rank *r = &st->ranks[index];
	struct rmt_sema_latch body;

	r->armed = true;
	r->generation++;
	st->counters[C_LATCH_ARMED]++;
	body = (struct rmt_sema_latch){ .rank = index, .channel = ch ? ch->handle : 0, .generation = r->generation,
					.armed = 1 };
	emit_sema(st, RMT_SEMA_LATCH_ARM, &body, sizeof(body), pid);
	return 1;
}

static void task_ready(struct state *st, struct task *t);

static void finish(struct state *st, struct completion_ *c)
{
	c->done = true;
	if (c->waiter)
		task_ready(st, c->waiter);
}

static bool try_complete(struct state *st, struct completion_ *c)
{
	struct hchan *ch = c->ch;
	struct rank *r = &st->ranks[ch->rank];
	struct rmt_sema_latch latch;
	struct rmt_sema_sem rel;
	struct hold *h;

	if (!(ch->live && ch->ring_ok))
		return false;
	list_for_each_entry(h, &r->holds, node)
		if (ch->order > h->barrier)
			return false;
	if (!r->armed) {
		if (!st->p->rearm_on_queued_work)
			return false;
		arm(st, ch->rank, ch, ch->pid);
	}
	r->armed = false;
	r->fired_by = ch;
	st->counters[C_LATCH_FIRED]++;
	latch = (struct rmt_sema_latch){ .rank = ch->rank, .channel = ch->handle, .generation = r->generation };
	emit_sema(st, RMT_SEMA_LATCH_FIRE, &latch, sizeof(latch), ch->pid);
	st->counters[C_GR_REL]++;
	rel = (struct rmt_sema_sem){ .channel = ch->handle, .rank = ch->rank, .sema_va = ch->ring_va, .value = c->value,
				     .counter = st->counters[C_GR_REL] };
	emit_sema(st, RMT_SEMA_RELEASE, &rel, sizeof(rel), ch->pid);
	finish(st, c);
	return true;
}

static void retry(struct state *st)
{
	struct completion_ *c, *next;

	list_for_each_entry_safe(c, next, &st->waiting, node)
		if (try_complete(st, c))
			list_del_init(&c->node);
}

static void bound(struct state *st, struct hold *h)
{
	struct rmt_sema_drain drain;
	struct rmt_sema_sem faked;

	if (!h->active)
		return;
	h->active = false;
	list_del_init(&h->node);
	if (!list_empty(&h->timer))
		list_del_init(&h->timer);
	st->counters[C_DRAIN_HELD]--;
	drain = (struct rmt_sema_drain){ .rank = h->rank, .channel = h->ch->handle,
					 .held = (u32)st->counters[C_DRAIN_HELD], .reason = RMT_SEMA_DRAIN_TIMEOUT,
					 .held_ns = rmtrace_replay_now(st->s) - h->since };
	emit_sema(st, RMT_SEMA_DRAIN_RELEASE, &drain, sizeof(drain), h->ch->pid);
	st->counters[C_FAKED]++;
	faked = (struct rmt_sema_sem){ .channel = h->ch->handle, .rank = h->rank, .sema_va = h->ch->ring_va,
				       .counter = st->counters[C_FAKED] };
	emit_sema(st, RMT_SEMA_FAKED_COMPLETION, &faked, sizeof(faked), h->ch->pid);
	retry(st);
}

static void new_session(struct state *st, u32 reason, u32 client, u32 pid)
{
	struct rmt_sema_session body = { .old_session = st->session, .client = client, .reason = reason };
	u32 i;

	if (!st->p->reset_on_new_session)
		return;
	st->session++;
	st->counters[C_SESSIONS]++;
	body.new_session = st->session;
	body.channels_dropped = st->p->clear_stale_on_session ? drop_stale(st) : 0;
	for (i = 0; st->p->rearm_on_session && i < st->p->ranks; i++)
		if (!st->ranks[i].armed)
			body.latches_rearmed += arm(st, i, NULL, pid);
	emit_sema(st, RMT_SEMA_SESSION_RESET, &body, sizeof(body), pid);
	if (st->p->drain_bound_ns) {
		for (i = 0; i < st->p->ranks; i++) {
			struct hold *h, *next;

			list_for_each_entry_safe(h, next, &st->ranks[i].holds, node)
				bound(st, h);
		}
	}
	emit_counters(st);
	retry(st);
}

static struct hchan *host_register(struct state *st, const struct hchan *key, u32 client, u32 handle, u64 ring_va,
				   u64 userd_va, const char *owner, u32 pid)
{
	struct hchan *ch = alloc(st, sizeof(*ch)), *old;
	struct rmt_sema_channel body;
	struct rank *r;

	if (!ch)
		return NULL;
	if (st->p->clear_stale_on_register)
		drop_stale(st);
	*ch = *key;
	ch->client = client;
	ch->handle = handle;
	ch->ring_va = ring_va;
	ch->userd_va = userd_va;
	ch->rank = rank_of(st, ring_va);
	ch->order = ++st->order;
	ch->pid = pid;
	ch->live = true;
	ch->ring_ok = false;
	strscpy(ch->owner, owner, sizeof(ch->owner));
	list_for_each_entry(old, &st->channels, node)
		if (old->in_dict && same_key(old, ch))
			old->in_dict = false;
	ch->in_dict = true;
	list_add_tail(&ch->node, &st->channels);
	st->counters[C_CHANNELS]++;
	body = (struct rmt_sema_channel){ .client = client, .channel = handle, .ring_va = ring_va,
					  .userd_va = userd_va, .rank = ch->rank };
	emit_sema(st, RMT_SEMA_REGISTER_CHANNEL, &body, sizeof(body), pid);
	r = &st->ranks[ch->rank];
	if (!r->armed && (r->generation == 0 || st->p->rearm_on_register))
		arm(st, ch->rank, ch, pid);
	return ch;
}

static int host_unregister(struct state *st, struct hchan *ch)
{
	struct rmt_sema_channel body;
	struct rmt_sema_drain drain;
	struct hchan *c;
	struct hold *h;

	if (!ch->live)
		return 0;
	h = alloc(st, sizeof(*h));
	if (!h)
		return -ENOMEM;
	ch->live = false;
	list_for_each_entry(c, &st->channels, node)
		if (c->in_dict && same_key(c, ch))
			c->in_dict = false;
	st->counters[C_CHANNELS]--;
	body = (struct rmt_sema_channel){ .client = ch->client, .channel = ch->handle, .ring_va = ch->ring_va,
					  .userd_va = ch->userd_va, .rank = ch->rank };
	emit_sema(st, RMT_SEMA_UNREGISTER_CHANNEL, &body, sizeof(body), ch->pid);
	*h = (struct hold){ .rank = ch->rank, .ch = ch, .since = rmtrace_replay_now(st->s), .barrier = st->order,
			    .active = true };
	INIT_LIST_HEAD(&h->timer);
	list_add_tail(&h->node, &st->ranks[ch->rank].holds);
	st->counters[C_DRAIN_HELD]++;
	drain = (struct rmt_sema_drain){ .rank = ch->rank, .channel = ch->handle, .held = (u32)st->counters[C_DRAIN_HELD],
					 .reason = RMT_SEMA_DRAIN_CHANNEL_TEARDOWN };
	emit_sema(st, RMT_SEMA_DRAIN_HOLD, &drain, sizeof(drain), ch->pid);
	if (st->p->drain_bound_ns) {
		struct hold *t;

		h->due = h->since + st->p->drain_bound_ns;
		h->seq = ++st->timer_seq;
		list_for_each_entry(t, &st->timers, timer)
			if (t->due > h->due)
				break;
		list_add_tail(&h->timer, &t->timer); /* before the first later one: (due, seq) order */
	}
	return 0;
}

static int publish(struct state *st, struct hchan *ch, int kind, u64 va, u64 size)
{
	struct pub *p = pub_find(st, ch, kind, va);
	struct rmt_sema_publish body;
	int rc = 0;

	if (p && p->owner != ch) {
		rc = -EEXIST; /* taken: by a live channel (a collision) or by a gone one (stale) */
	} else {
		if (!p) {
			p = alloc(st, sizeof(*p));
			if (!p)
				return -ENOMEM;
			*p = (struct pub){ .scoped = st->p->publications_per_client, .uvm = ch->uvm, .kpid = ch->kpid,
					   .kclient = ch->kclient, .kind = kind, .va = va };
			list_add_tail(&p->node, &st->pubs);
		}
		p->owner = ch;
		st->counters[C_PUB_CALLS]++;
	}
	body = (struct rmt_sema_publish){ .channel = ch->handle, .rank = ch->rank, .va = va, .size = size,
					  .pub_calls = st->counters[C_PUB_CALLS], .rc = rc };
	emit_sema(st, kind ? RMT_SEMA_PUBLISH_USERD : RMT_SEMA_PUBLISH_RING, &body, sizeof(body), ch->pid);
	if (rc == 0 && kind == 0) {
		ch->ring_ok = true;
		if (!st->ranks[ch->rank].armed)
			arm(st, ch->rank, ch, ch->pid);
		retry(st);
	}
	return rc;
}

/* COMPLETION_HINT: NULL (rc -22) when ch is not live; *err on no memory. */
static struct completion_ *hint(struct state *st, struct hchan *ch, u64 value, int *err)
{
	struct rmt_sema_hint body = { .channel = ch->handle, .value = value };
	struct completion_ *c;

	st->counters[C_HINTS]++;
	if (!ch->live || !ch->in_dict) {
		st->counters[C_HINT_ERRORS]++;
		body.rank = RMT_SEMA_NO_RANK;
		body.rc = -EINVAL;
		emit_sema(st, RMT_SEMA_COMPLETION_HINT, &body, sizeof(body), ch->pid);
		return NULL;
	}
	body.rank = ch->rank;
	emit_sema(st, RMT_SEMA_COMPLETION_HINT, &body, sizeof(body), ch->pid);
	c = alloc(st, sizeof(*c));
	if (!c) {
		*err = -ENOMEM;
		return NULL;
	}
	*c = (struct completion_){ .ch = ch, .value = value, .since = rmtrace_replay_now(st->s) };
	INIT_LIST_HEAD(&c->node);
	if (!try_complete(st, c))
		list_add_tail(&c->node, &st->waiting);
	return c;
}

/* ------------------------------------------------------------ RM objects (objects.py) */

enum { ST_NONE = NO_STATUS, ST_OK = RMT_ST_OK, ST_ILLEGAL = RMT_ST_ILLEGAL_ACTION, ST_DUP = RMT_ST_DUPLICATE,
       ST_BAD_HANDLE = RMT_ST_BAD_HANDLE, ST_NOT_FOUND = RMT_ST_NOT_FOUND, ST_BAD_CLIENT = RMT_ST_BAD_CLIENT };

static struct rclient *client_of(struct state *st, u32 pid, u32 handle)
{
	struct rclient *c;

	list_for_each_entry(c, &st->clients, node)
		if (c->pid == pid && c->handle == handle)
			return c;
	return NULL;
}

static struct robj *obj_of(struct rclient *c, u32 handle)
{
	struct robj *o;

	list_for_each_entry(o, &c->objects, all)
		if (o->handle == handle)
			return o;
	return NULL;
}

static struct robj *new_obj(struct state *st, struct rclient *c, u32 handle, u32 category, struct robj *parent)
{
	struct robj *o = alloc(st, sizeof(*o));

	if (!o)
		return NULL;
	o->handle = handle;
	o->category = category;
	o->parent = parent;
	INIT_LIST_HEAD(&o->children);
	INIT_LIST_HEAD(&o->sibling);
	list_add_tail(&o->all, &c->objects);
	if (parent)
		list_add_tail(&o->sibling, &parent->children);
	return o;
}

static int alloc_client(struct state *st, u32 pid, u32 handle, s32 fd)
{
	struct rclient *c;

	if (client_of(st, pid, handle))
		return ST_DUP;
	c = alloc(st, sizeof(*c));
	if (!c)
		return -ENOMEM;
	*c = (struct rclient){ .pid = pid, .handle = handle, .fd = fd };
	INIT_LIST_HEAD(&c->objects);
	c->root = new_obj(st, c, handle, 1, NULL);
	if (!c->root)
		return -ENOMEM;
	list_add_tail(&c->node, &st->clients);
	return ST_OK;
}

/* Children before parents, as RM frees them (objects._subtree); out has room for every object. */
static u32 subtree(struct robj *o, struct robj **out, u32 n)
{
	struct robj *child, *next;

	list_for_each_entry_safe(child, next, &o->children, sibling)
		n = subtree(child, out, n);
	out[n++] = o;
	return n;
}

static u32 count_objects(struct rclient *c)
{
	struct robj *o;
	u32 n = 0;

	list_for_each_entry(o, &c->objects, all)
		n++;
	return n;
}

/* Free an object and everything under it; the freed ones, in order, in *freed (kfree it). */
static int free_obj(struct state *st, u32 pid, u32 h_client, u32 h_object, struct robj ***freed, u32 *nfreed)
{
	struct rclient *c = client_of(st, pid, h_client);
	struct robj *o, **out;
	u32 i, n;

	*freed = NULL;
	*nfreed = 0;
	if (!c)
		return ST_BAD_HANDLE;
	o = obj_of(c, h_object);
	if (!o)
		return ST_OK;
	out = kmalloc_array(count_objects(c), sizeof(*out), GFP_KERNEL);
	if (!out)
		return -ENOMEM;
	n = subtree(o, out, 0);
	for (i = 0; i < n; i++)
		list_del(&out[i]->all);
	if (o->parent)
		list_del_init(&o->sibling);
	else
		list_del(&c->node);
	*freed = out;
	*nfreed = n;
	return ST_OK;
}

/* ------------------------------------------------------------ tasks (core.py's generators) */

static struct frame *push(struct task *t, int type)
{
	struct frame *f;

	if (t->depth == MAX_FRAMES)
		return NULL;
	f = &t->frames[t->depth++];
	memset(f, 0, sizeof(*f));
	f->type = type;
	return f;
}

static void task_ready(struct state *st, struct task *t)
{
	list_move_tail(&t->node, &st->ready);
}

/* Take the UVM global lock, or queue for it: true when taken now. */
static bool lock_take(struct state *st, struct task *t)
{
	struct lock *l = &st->uvm_lock;

	if (!l->holder) {
		l->holder = t;
		return true;
	}
	if (l->n < ARRAY_SIZE(l->waiters))
		l->waiters[(l->head + l->n++) % ARRAY_SIZE(l->waiters)] = t;
	t->waits_lock = true;
	return false;
}

static void unlock(struct state *st)
{
	struct lock *l = &st->uvm_lock;

	if (l->n) {
		l->holder = l->waiters[l->head];
		l->head = (l->head + 1) % ARRAY_SIZE(l->waiters);
		l->n--;
		task_ready(st, l->holder);
	} else {
		l->holder = NULL;
	}
}

static int drop_channel(struct state *st, struct chstate *cs)
{
	int err = host_unregister(st, cs->host);

	if (err)
		return err;
	cs->work++;
	hint(st, cs->host, cs->work, &err); /* arrives after the unregister: refused with rc -22 */
	return err;
}

static int teardown(struct state *st, struct robj **freed, u32 n)
{
	int err = 0;
	u32 i;

	for (i = 0; i < n && !err; i++)
		if (freed[i]->category == RMT_CAT_CHANNEL && freed[i]->extra && freed[i]->extra->host)
			err = drop_channel(st, freed[i]->extra);
	if (n)
		emit_counters(st);
	return err;
}

static struct vaspace *vaspace_of(struct state *st, u32 pid, s32 fd)
{
	struct vaspace *va;

	list_for_each_entry(va, &st->vaspaces, node)
		if (va->pid == pid && va->fd == fd)
			return va;
	return NULL;
}

static int cmp_uuid(const void *a, const void *b)
{
	return memcmp(a, b, 16);
}

static int cmp_s32(const void *a, const void *b)
{
	return *(const s32 *)a < *(const s32 *)b ? -1 : *(const s32 *)a > *(const s32 *)b;
}

/* _close's immediate part; the VA space whose GPUs must now be released, or NULL. */
static struct vaspace *close_fd(struct state *st, u32 pid, s32 fd, int *err)
{
	struct rclient *c, *next;
	struct file_ *f, *fn;
	struct vaspace *va;

	list_for_each_entry_safe(f, fn, &st->files, node)
		if (f->pid == pid && f->fd == fd)
			list_del(&f->node);
	va = vaspace_of(st, pid, fd);
	if (va) {
		list_del(&va->node);
		va->listed = false;
	}
	list_for_each_entry_safe(c, next, &st->clients, node) {
		struct robj **freed;
		u32 n;

		if (c->pid != pid || c->fd != fd)
			continue;
		*err = free_obj(st, pid, c->handle, c->handle, &freed, &n);
		if (*err >= 0)
			*err = teardown(st, freed, n);
		kfree(freed);
		if (*err)
			return NULL;
	}
	return va && va->ngpus ? va : NULL;
}

static struct gpu *gpu_of(struct state *st, const u8 *uuid)
{
	struct gpu *g;

	list_for_each_entry(g, &st->gpus, node)
		if (!memcmp(g->uuid, uuid, 16))
			return g;
	return NULL;
}

/* _work's first half: publish ring and USERD, hint, the completion to wait for (or NULL). */
static struct completion_ *work(struct state *st, struct hchan *ch, struct chstate *cs, int *err)
{
	struct completion_ *c;

	if ((*err = publish(st, ch, 0, ch->ring_va, cs->ring_size)) == -ENOMEM ||
	    (*err = publish(st, ch, 1, ch->userd_va, USERD_SIZE)) == -ENOMEM)
		return NULL;
	*err = 0;
	cs->work++;
	c = hint(st, ch, cs->work, err);
	emit_counters(st);
	return c && !c->done ? c : NULL;
}

enum { DONE, WAIT };

/* Run a task until it waits or ends; a negative errno when memory ran out. */
static int step(struct state *st, struct task *t)
{
	const struct rmt_replay_msg *m = t->req->msg;
	int err = 0;

	while (t->depth) {
		struct frame *f = &t->frames[t->depth - 1], *g;
		struct completion_ *c;

		switch (f->type * 16 + f->pc) {
		case F_BRINGUP * 16: {
			struct hchan key = { .kpid = t->req->rec->pid, .kclient = m->h_client };
			char owner[OWNER_MAX];

			t->stage = BRING_UP;
			key.handle = f->obj->handle;
			strscpy(owner, t->req->owner, sizeof(owner));
			f->st = f->obj->extra;
			f->ch = host_register(st, &key, m->h_client, f->obj->handle, f->st->ring_va, f->st->userd_va, owner,
					      t->req->rec->pid);
			if (!f->ch)
				return -ENOMEM;
			f->st->host = f->ch;
			f->type = F_WORK; /* yield from _work */
			break;
		}
		case F_WORK * 16:
			c = work(st, f->ch, f->st, &err);
			if (err)
				return err;
			f->pc = 1;
			if (c) {
				c->waiter = t;
				t->waits = c;
				return WAIT;
			}
			t->depth--;
			break;
		case F_WORK * 16 + 1:
			emit_counters(st); /* resumed: the completion came */
			t->depth--;
			break;
		case F_RETAIN * 16:
			f->pc = 1;
			if (!lock_take(st, t))
				return WAIT;
			break;
		case F_RETAIN * 16 + 1:
			t->waits_lock = false;
			f->gpu = gpu_of(st, f->uuid);
			if (!f->gpu) {
				f->gpu = alloc(st, sizeof(*f->gpu));
				if (!f->gpu)
					return -ENOMEM;
				memcpy(f->gpu->uuid, f->uuid, 16);
				list_add_tail(&f->gpu->node, &st->gpus);
			}
			f->pc = 2;
			if (f->gpu->refs == 0) {
				g = push(t, F_ADDGPU);
				if (!g)
					return -ENOMEM;
				g->gpu = f->gpu;
			}
			break;
		case F_RETAIN * 16 + 2:
			f->gpu->refs++;
			if (f->va->ngpus < ARRAY_SIZE(f->va->gpus)) {
				u32 i;

				for (i = 0; i < f->va->ngpus && memcmp(f->va->gpus[i], f->uuid, 16); i++)
					;
				if (i == f->va->ngpus)
					memcpy(f->va->gpus[f->va->ngpus++], f->uuid, 16);
			}
			unlock(st);
			t->depth--;
			break;
		case F_ADDGPU * 16: {
			struct hchan key = { .uvm = true };
			char owner[OWNER_MAX];
			u32 i;

			t->stage = REGISTRATION;
			for (i = 0; i < UVM_OBJECTS; i++)
				emit_rpc(st, i, t->req->rec->pid);
			memcpy(key.uuid, f->gpu->uuid, 16);
			snprintf(owner, sizeof(owner), "UVM (retained for %s)", t->req->owner);
			f->ch = host_register(st, &key, UVM_CLIENT, UVM_CHANNEL, UVM_RING_VA, UVM_USERD_VA, owner,
					      t->req->rec->pid);
			f->st = alloc(st, sizeof(*f->st));
			if (!f->ch || !f->st)
				return -ENOMEM;
			*f->st = (struct chstate){ .ring_va = UVM_RING_VA, .userd_va = UVM_USERD_VA,
						   .ring_size = UVM_RING_SIZE, .host = f->ch };
			f->gpu->channel = f->ch;
			f->gpu->state = f->st;
			f->type = F_WORK;
			break;
		}
		case F_RELEASE * 16:
			f->pc = 1;
			if (!lock_take(st, t))
				return WAIT;
			break;
		case F_RELEASE * 16 + 1:
			t->waits_lock = false;
			f->gpu = gpu_of(st, f->uuid);
			f->gpu->refs--;
			f->pc = 3;
			if (f->gpu->refs == 0) {
				t->stage = UNREGISTRATION;
				f->pc = 2;
				g = push(t, F_WORK);
				if (!g)
					return -ENOMEM;
				g->ch = f->gpu->channel;
				g->st = f->gpu->state;
			}
			break;
		case F_RELEASE * 16 + 2:
			err = drop_channel(st, f->gpu->state);
			if (err)
				return err;
			emit_rpc(st, UVM_OBJECTS, t->req->rec->pid);
			f->gpu->channel = NULL;
			f->gpu->state = NULL;
			emit_counters(st);
			f->pc = 3;
			break;
		case F_RELEASE * 16 + 3:
			unlock(st);
			t->depth--;
			break;
		case F_DESTROY * 16:
			sort(f->va->gpus, f->va->ngpus, 16, cmp_uuid, NULL);
			f->pc = 1;
			break;
		case F_DESTROY * 16 + 1:
			if (f->i < f->va->ngpus) {
				g = push(t, F_RELEASE);
				if (!g)
					return -ENOMEM;
				memcpy(g->uuid, f->va->gpus[f->i++], 16);
				break;
			}
			f->va->ngpus = 0;
			t->depth--;
			break;
		case F_EXIT * 16:
			if (f->i < f->n) {
				struct vaspace *va = close_fd(st, t->req->rec->pid, f->fds[f->i++], &err);

				if (err)
					return err;
				if (va) {
					g = push(t, F_DESTROY);
					if (!g)
						return -ENOMEM;
					g->va = va;
				}
				break;
			}
			t->depth--;
			break;
		default:
			WARN_ONCE(1, "rmtrace_sample: frame %d pc %d", f->type, f->pc);
			return -EINVAL;
		}
	}
	return DONE;
}

/* ------------------------------------------------------------ answering */

static int answer(struct state *st, struct task *t)
{
	const struct rmt_replay_msg *m = t->req->msg;
	u32 code;

	if (t->status == ST_NONE || !m)
		return rmtrace_replay_answer(st->s, t->req, false, 0);
	code = rmtrace_replay_status(st->s, t->status);
	if (m->has_status && m->status == code)
		return rmtrace_replay_answer(st->s, t->req, false, 0);
	return rmtrace_replay_answer(st->s, t->req, true, code);
}

/* Resume every ready task, in order (core._drain_ready). */
static int drain_ready(struct state *st)
{
	int rc = 0;

	while (!list_empty(&st->ready)) {
		struct task *t = list_first_entry(&st->ready, struct task, node);

		list_del_init(&t->node);
		t->waits = NULL;
		t->waits_lock = false;
		rc = step(st, t);
		if (rc < 0)
			return rc;
		if (rc == WAIT) {
			list_add_tail(&t->node, &st->parked);
			continue;
		}
		rc = answer(st, t);
		if (rc)
			return rc;
	}
	return 0;
}

static u32 add_fd(s32 *fds, u32 n, u32 max, s32 fd)
{
	u32 i;

	for (i = 0; i < n; i++)
		if (fds[i] == fd)
			return n;
	if (n < max)
		fds[n++] = fd;
	return n;
}

static bool recorded_ok(const struct rmt_replay_msg *m)
{
	return !m->has_status || m->status == 0;
}

/* The immediate handlers; ST_NONE means "as bare metal answered"; frames pushed mean a generator. */
static int handle(struct state *st, struct task *t)
{
	const struct rmt_replay_msg *m = t->req->msg;
	u32 pid = t->req->rec->pid;
	struct rclient *c;
	struct robj *o, **freed;
	struct vaspace *va;
	struct frame *f;
	u32 n;
	int rc;

	switch (m->kind) {
	case RMT_KIND_RM_CLIENT: {
		bool first = list_empty(&st->clients);

		if (!recorded_ok(m))
			return ST_NONE;
		rc = alloc_client(st, pid, m->h_client, m->fd);
		if (rc != ST_OK)
			return rc;
		if (first && !st->handshake_session)
			new_session(st, RMT_SEMA_RESET_NEW_CLIENT, m->h_client, pid);
		st->handshake_session = false;
		return ST_NONE;
	}
	case RMT_KIND_RM_ALLOC: {
		struct robj *parent;

		if (!recorded_ok(m))
			return ST_NONE;
		c = client_of(st, pid, m->h_client);
		if (!c || m->h_object == 0 || m->h_object == m->h_client)
			return ST_BAD_HANDLE;
		if (obj_of(c, m->h_object))
			return ST_DUP;
		parent = obj_of(c, m->h_parent ? m->h_parent : m->h_client);
		if (!parent)
			return ST_NOT_FOUND;
		o = new_obj(st, c, m->h_object, m->category, parent);
		if (!o)
			return -ENOMEM;
		if (m->category == RMT_CAT_CHANNEL) {
			o->extra = alloc(st, sizeof(*o->extra));
			if (!o->extra)
				return -ENOMEM;
			*o->extra = (struct chstate){ .ring_va = m->ring_va, .userd_va = m->userd_va,
						      .ring_size = m->ring_size };
		}
		return ST_NONE;
	}
	case RMT_KIND_RM_FREE:
		if (!recorded_ok(m))
			return ST_NONE;
		rc = free_obj(st, pid, m->h_client, m->h_object, &freed, &n);
		if (rc >= 0) {
			int err = teardown(st, freed, n);

			if (err)
				rc = err;
		}
		kfree(freed);
		return rc == ST_OK ? ST_NONE : rc;
	case RMT_KIND_RM_CONTROL:
	case RMT_KIND_WORK_TOKEN:
		c = client_of(st, pid, m->h_client);
		if (!c)
			return ST_BAD_CLIENT;
		o = obj_of(c, m->h_object);
		if (!o)
			return ST_NOT_FOUND;
		if (m->kind == RMT_KIND_RM_CONTROL || o->category != RMT_CAT_CHANNEL || !o->extra || o->extra->host ||
		    !recorded_ok(m))
			return ST_NONE;
		f = push(t, F_BRINGUP);
		f->obj = o;
		return ST_NONE;
	case RMT_KIND_UVM_INITIALIZE:
		if (!vaspace_of(st, pid, m->fd)) {
			va = alloc(st, sizeof(*va));
			if (!va)
				return -ENOMEM;
			*va = (struct vaspace){ .pid = pid, .fd = m->fd, .listed = true };
			list_add_tail(&va->node, &st->vaspaces);
		}
		return ST_NONE;
	case RMT_KIND_UVM_CALL:
		return vaspace_of(st, pid, m->fd) ? ST_NONE : ST_ILLEGAL;
	case RMT_KIND_UVM_REGISTER_GPU:
		va = vaspace_of(st, pid, m->fd);
		if (!va)
			return ST_ILLEGAL;
		if (!recorded_ok(m))
			return ST_NONE;
		f = push(t, F_RETAIN);
		f->va = va;
		memcpy(f->uuid, m->gpu, 16);
		return ST_NONE;
	case RMT_KIND_UVM_UNREGISTER_GPU: {
		u32 i;

		va = vaspace_of(st, pid, m->fd);
		if (!va)
			return ST_ILLEGAL;
		for (i = 0; i < va->ngpus && memcmp(va->gpus[i], m->gpu, 16); i++)
			;
		if (i == va->ngpus || !recorded_ok(m))
			return ST_NONE;
		memmove(va->gpus[i], va->gpus[i + 1], (va->ngpus - i - 1) * 16);
		va->ngpus--;
		f = push(t, F_RELEASE);
		memcpy(f->uuid, m->gpu, 16);
		return ST_NONE;
	}
	case RMT_KIND_SYS_OPEN: {
		struct file_ *file = alloc(st, sizeof(*file));

		if (!file)
			return -ENOMEM;
		*file = (struct file_){ .pid = pid, .fd = m->fd };
		list_add_tail(&file->node, &st->files);
		return ST_NONE;
	}
	case RMT_KIND_SYS_CLOSE:
		rc = 0;
		va = close_fd(st, pid, m->fd, &rc);
		if (rc)
			return rc;
		if (va) {
			f = push(t, F_DESTROY);
			f->va = va;
		}
		return ST_NONE;
	case RMT_KIND_SYS_EXIT: {
		struct file_ *file;
		s32 fds[256];
		u32 nfds = 0;

		/* every fd the process still has: files, VA spaces, RM clients; sorted, once each */
		list_for_each_entry(file, &st->files, node)
			if (file->pid == pid)
				nfds = add_fd(fds, nfds, ARRAY_SIZE(fds), file->fd);
		list_for_each_entry(va, &st->vaspaces, node)
			if (va->pid == pid)
				nfds = add_fd(fds, nfds, ARRAY_SIZE(fds), va->fd);
		list_for_each_entry(c, &st->clients, node)
			if (c->pid == pid)
				nfds = add_fd(fds, nfds, ARRAY_SIZE(fds), c->fd);
		f = push(t, F_EXIT);
		f->fds = alloc(st, sizeof(s32) * (nfds + 1));
		if (!f->fds)
			return -ENOMEM;
		memcpy(f->fds, fds, sizeof(s32) * nfds);
		sort(f->fds, nfds, sizeof(s32), cmp_s32, NULL);
		f->n = nfds;
		return ST_NONE;
	}
	case RMT_KIND_GSP_INIT:
		new_session(st, RMT_SEMA_RESET_GSP_INIT, 0, pid);
		st->handshake_session = true; /* the RM client that follows belongs to this session */
		return ST_NONE;
	}
	return ST_NONE;
}

/* ------------------------------------------------------------ why a task waits (core._why, host.blockers) */

struct text {
	char *buf;
	size_t size, len;
};

static __printf(2, 3) void put(struct text *out, const char *fmt, ...)
{
	va_list ap;

	if (out->len >= out->size)
		return;
	va_start(ap, fmt);
	out->len += vscnprintf(out->buf + out->len, out->size - out->len, fmt, ap);
	va_end(ap);
}

static void blockers(struct state *st, struct completion_ *c, struct text *out)
{
	struct hchan *ch = c->ch;
	struct rank *r = &st->ranks[ch->rank];
	struct hold *h;
	u32 n = 0, named = 0;

	if (!ch->live)
		put(out, "  - channel 0x%x is no longer registered with the host\n", ch->handle);
	if (!ch->ring_ok) {
		struct pub *p = pub_find(st, ch, 0, ch->ring_va);

		put(out, "  - its ring 0x%llx is not published for it: the host keeps that publication for ", ch->ring_va);
		if (p)
			put(out, "channel 0x%x of %s%s\n", p->owner->handle, p->owner->owner,
			    p->owner->live ? "" : " (gone: stale)");
		else
			put(out, "nobody\n");
	}
	if (!r->armed) {
		put(out, "  - the one-shot latch of rank %u is spent (fired", ch->rank);
		if (r->fired_by)
			put(out, " by channel 0x%x of %s", r->fired_by->handle, r->fired_by->owner);
		put(out, ") and nothing re-armed it\n");
	}
	list_for_each_entry(h, &r->holds, node)
		n += h->active && ch->order > h->barrier;
	if (!n)
		return;
	put(out, "  - rank %u is drain-held by the teardown of %u channel%s (", ch->rank, n, n > 1 ? "s" : "");
	list_for_each_entry(h, &r->holds, node) {
		if (!(h->active && ch->order > h->barrier) || named == HOLDS_NAMED)
			continue;
		put(out, "%s0x%x of %s", named ? ", " : "", h->ch->handle, h->ch->owner);
		named++;
	}
	if (n > HOLDS_NAMED)
		put(out, " and %u more", n - HOLDS_NAMED);
	put(out, "), whose last work the host refused (hint rc -22), so the drain never ends\n");
}

static void why(struct state *st, struct task *t, struct text *out, int depth)
{
	const char *owner = t->req->owner, *name = t->req->name;
	u32 index = t->req->msg->index + 1;

	if (t->waits_lock) {
		struct task *holder = st->uvm_lock.holder;
		bool waiting = holder->waits_lock || holder->waits;

		put(out, "%s is blocked in %s (message %u) waiting for the UVM global lock, held by %s in %s (message %u)",
		    owner, name, index, holder->req->owner, holder->req->name, holder->req->msg->index + 1);
		if (!waiting || holder == t || depth > 8) {
			put(out, "\n");
			return;
		}
		if (strcmp(holder->req->owner, owner)) {
			put(out, ", which is blocked itself: see its own chain\n");
			return;
		}
		put(out, "\n");
		why(st, holder, out, depth + 1);
		return;
	}
	if (t->waits) {
		put(out, "%s is blocked in %s (message %u)%s, in its %s: waiting for the host to complete work on "
		    "channel 0x%x (rank %u)\n", owner, name, index,
		    st->uvm_lock.holder == t ? " holding the UVM global lock" : "", t->stage, t->waits->ch->handle,
		    t->waits->ch->rank);
		blockers(st, t->waits, out);
		return;
	}
	put(out, "%s is blocked in %s (message %u)\n", owner, name, index);
}

/* ------------------------------------------------------------ the target */

static void *sample_open(struct rmt_session *s, char *service, size_t size)
{
	const struct policy *p = NULL;
	struct state *st;
	u32 i;

	for (i = 0; i < ARRAY_SIZE(policies); i++)
		if (sysfs_streq(policy, policies[i].name))
			p = &policies[i];
	if (!p)
		return ERR_PTR(-EINVAL);
	st = kzalloc(sizeof(*st), GFP_KERNEL);
	if (!st)
		return ERR_PTR(-ENOMEM);
	st->s = s;
	st->p = p;
	INIT_LIST_HEAD(&st->mem);
	INIT_LIST_HEAD(&st->channels);
	INIT_LIST_HEAD(&st->pubs);
	INIT_LIST_HEAD(&st->waiting);
	INIT_LIST_HEAD(&st->timers);
	INIT_LIST_HEAD(&st->clients);
	INIT_LIST_HEAD(&st->vaspaces);
	INIT_LIST_HEAD(&st->gpus);
	INIT_LIST_HEAD(&st->files);
	INIT_LIST_HEAD(&st->parked);
	INIT_LIST_HEAD(&st->ready);
	for (i = 0; i < ARRAY_SIZE(st->ranks); i++)
		INIT_LIST_HEAD(&st->ranks[i].holds);
	snprintf(service, size, "rmtrace_sample:%s", p->name);
	return st;
}

static void sample_release(void *state)
{
	struct state *st = state;
	struct task *t, *tn;
	struct mem *m, *mn;
	u32 i;

	list_splice_init(&st->ready, &st->parked);
	list_for_each_entry_safe(t, tn, &st->parked, node) {
		kfree(t->req);
		kfree(t);
	}
	list_for_each_entry_safe(m, mn, &st->mem, node)
		kfree(m);
	for (i = 0; i < ARRAY_SIZE(st->gsp); i++)
		kfree(st->gsp[i].message);
	kfree(st);
}

static int sample_submit(void *state, const struct rmt_request *req)
{
	struct state *st = state;
	struct task *t;
	int rc;

	if (!req->msg) /* no facts: nothing to model, answer as recorded */
		return rmtrace_replay_answer(st->s, req, false, 0);
	t = kzalloc(sizeof(*t), GFP_KERNEL);
	if (!t)
		return -ENOMEM;
	INIT_LIST_HEAD(&t->node);
	t->req = rmtrace_request_keep(req, GFP_KERNEL);
	if (!t->req) {
		kfree(t);
		return -ENOMEM;
	}
	t->status = handle(st, t);
	rc = t->status < ST_NONE ? t->status : 0;
	if (!rc && t->depth) {
		rc = step(st, t);
		if (rc == WAIT) {
			list_add_tail(&t->node, &st->parked);
			return drain_ready(st);
		}
		t->status = ST_NONE; /* a generator's value is always "as bare metal" */
	}
	if (rc >= 0)
		rc = answer(st, t);
	if (rc >= 0)
		rc = drain_ready(st);
	kfree(t->req);
	kfree(t);
	return rc < 0 ? rc : 0;
}

static u64 sample_next_timer(void *state)
{
	struct state *st = state;

	return list_empty(&st->timers) ? U64_MAX : list_first_entry(&st->timers, struct hold, timer)->due;
}

static void sample_fire(void *state, u64 now)
{
	struct state *st = state;

	while (!list_empty(&st->timers)) {
		struct hold *h = list_first_entry(&st->timers, struct hold, timer);

		if (h->due > now)
			break;
		list_del_init(&h->timer);
		bound(st, h);
		drain_ready(st);
	}
}

static size_t sample_explain(void *state, const struct rmt_replay_why *w, char *buf, size_t size)
{
	struct state *st = state;
	struct text out = { .buf = buf, .size = size };
	struct task *t;

	list_for_each_entry(t, &st->parked, node) {
		const struct rmt_record *r = t->req->rec;

		if (r->source == w->source && r->pid == w->pid && r->call_id == w->call_id) {
			why(st, t, &out, 0);
			break;
		}
	}
	return out.len;
}

/* TARGET records: a GSP message template for the exchanges' RPCs (from the trace's profile). */
/*
 * The GSP template's message (the TARGET record's second buffer, after the ARG that
 * holds the body), or NULL when the record is not a template this target takes.
 */
static const struct rmt_buffer *template_message(const void *body, u32 len, const struct rmt_record *rec)
{
	const struct rmt_sample_gsp_template *t = body;
	const u8 *data = (const u8 *)rec + sizeof(*rec);
	const struct rmt_buffer *b;
	u32 i;

	if (len != sizeof(*t) || t->kind != RMT_SAMPLE_GSP_TEMPLATE || t->index > UVM_OBJECTS || rec->nbufs < 2)
		return NULL;
	b = (const struct rmt_buffer *)data;
	data += sizeof(*b) + RMT_ALIGN_UP(b->len);
	b = (const struct rmt_buffer *)data;
	if (b->role != RMT_BUF_PAYLOAD || b->len > 65536)
		return NULL;
	for (i = 0; i < 3; i++) {
		u32 off = (&t->seq_off)[i];

		if (off > b->len || b->len - off < 4)
			return NULL;
	}
	return b;
}

static int sample_check(void *state, const void *body, u32 len, const struct rmt_record *rec)
{
	return template_message(body, len, rec) ? 0 : -EINVAL;
}

static int sample_configure(void *state, const void *body, u32 len, const struct rmt_record *rec)
{
	const struct rmt_sample_gsp_template *t = body;
	const struct rmt_buffer *b = template_message(body, len, rec);
	struct state *st = state;

	if (!b)
		return -EINVAL;
	kfree(st->gsp[t->index].message);
	st->gsp[t->index] = (struct gsp_template){ .function = t->function, .seq_off = t->seq_off,
						    .result_off = t->result_off,
						    .result_private_off = t->result_private_off, .len = b->len };
	st->gsp[t->index].message = kmemdup(b + 1, b->len, GFP_KERNEL);
	return st->gsp[t->index].message ? 0 : -ENOMEM;
}

static void sample_bye(void *state)
{
	emit_counters(state); /* the replay ended: the host's final counters */
}

static const struct rmt_target_ops sample_ops = {
	.name = "rmtrace_sample",
	.owner = THIS_MODULE,
	.answers = RMT_ANSWERS_STATUS,
	.open = sample_open,
	.release = sample_release,
	.submit = sample_submit,
	.next_timer = sample_next_timer,
	.fire = sample_fire,
	.explain = sample_explain,
	.check = sample_check,
	.configure = sample_configure,
	.bye = sample_bye,
};

static int __init sample_init(void)
{
	return rmtrace_register_target(&sample_ops);
}

static void __exit sample_exit(void)
{
	rmtrace_unregister_target(&sample_ops);
}

module_init(sample_init);
module_exit(sample_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("rmtrace sample host service: the reference model (legacy, fixed) as a kernel replay target");
