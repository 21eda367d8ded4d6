// SPDX-License-Identifier: GPL-2.0
/*
 * rmtrace_replay.c: /dev/rmtrace-replay, replay sessions against a kernel host service.
 *
 * Each open file is one session (root only): HELLO picks a registered
 * target and a clock, then submissions reach the target's submit() and its
 * answers and own records come back through read(), in the order they were
 * made.  rmtrace_replay.h describes the control records.
 *
 * Every write() is parsed and checked whole before anything happens: record
 * structure (magic, version, lengths, buffer bounds), control bodies, the
 * shape of each unit, the session's state.  A write that fails any check
 * gets -EINVAL, changes nothing, and leaves its reason for
 * RMT_IOC_REPLAY_ERROR.  Answers never write outside the record they patch:
 * every status location is bounds-checked against that record.
 *
 * Clocks: a virtual session's time moves only by ADVANCE, which fires the
 * target's timers in order (deterministic, as the in-process model); a real
 * session runs on CLOCK_MONOTONIC with a delayed work firing the timers.
 * Requests, answers and the service's records also go into the rings, on
 * CLOCK_MONOTONIC, so a recorder draining /dev/rmtrace sees the replay.
 */
#include <linux/capability.h>
#include <linux/fs.h>
#include <linux/list.h>
#include <linux/miscdevice.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/poll.h>
#include <linux/slab.h>
#include <linux/timekeeping.h>
#include <linux/uaccess.h>
#include <linux/wait.h>
#include <linux/workqueue.h>

#include "rmtrace_internal.h"

struct rmt_qrec {
	struct list_head node;
	u32 len;
	u8 data[];
};

struct rmt_session {
	struct rmt_opener opener;
	struct mutex lock;
	const struct rmt_target_ops *ops;
	void *state;
	bool bye;
	u32 clock;
	u64 vnow;
	u32 status[RMT_ST_COUNT];
	u64 write_seq;
	u64 submitted;
	u64 answered;
	struct list_head out;
	u64 out_bytes;
	u32 out_off; /* bytes of the first queued record already read */
	wait_queue_head_t wq;
	struct delayed_work tick;
	char error[RMT_REPLAY_ERROR_MAX];
};

static LIST_HEAD(targets);
static DEFINE_MUTEX(targets_lock);

struct rmt_target {
	struct list_head node;
	const struct rmt_target_ops *ops;
};

int rmtrace_register_target(const struct rmt_target_ops *ops)
{
	struct rmt_target *t = kzalloc(sizeof(*t), GFP_KERNEL);

	if (!t)
		return -ENOMEM;
	if (!ops->name || !ops->open || !ops->release || !ops->submit) {
		kfree(t);
		return -EINVAL;
	}
	t->ops = ops;
	mutex_lock(&targets_lock);
	list_add(&t->node, &targets);
	mutex_unlock(&targets_lock);
	return 0;
}
EXPORT_SYMBOL_GPL(rmtrace_register_target);

void rmtrace_unregister_target(const struct rmt_target_ops *ops)
{
	struct rmt_target *t, *next;

	mutex_lock(&targets_lock);
	list_for_each_entry_safe(t, next, &targets, node) {
		if (t->ops == ops) {
			list_del(&t->node);
			kfree(t);
		}
	}
	mutex_unlock(&targets_lock);
}
EXPORT_SYMBOL_GPL(rmtrace_unregister_target);

/* The target called `name` ("" the newest), with a reference on its module. */
static const struct rmt_target_ops *target_get(const char *name)
{
	const struct rmt_target_ops *found = NULL;
	struct rmt_target *t;

	mutex_lock(&targets_lock);
	list_for_each_entry(t, &targets, node) {
		if (!name[0] || !strcmp(t->ops->name, name)) {
			if (try_module_get(t->ops->owner))
				found = t->ops;
			break;
		}
	}
	mutex_unlock(&targets_lock);
	return found;
}

/* ------------------------------------------------------------ the session's clock and output */

u64 rmtrace_replay_now(struct rmt_session *s)
{
	return s->clock == RMT_CLOCK_VIRTUAL ? s->vnow : ktime_get_ns();
}
EXPORT_SYMBOL_GPL(rmtrace_replay_now);

u32 rmtrace_replay_status(struct rmt_session *s, unsigned int which)
{
	return which < RMT_ST_COUNT ? s->status[which] : 0;
}
EXPORT_SYMBOL_GPL(rmtrace_replay_status);

static struct rmt_qrec *qrec_alloc(u32 len)
{
	struct rmt_qrec *q = kvzalloc(struct_size(q, data, len), GFP_KERNEL);

	if (q)
		q->len = len;
	return q;
}

static void queue(struct rmt_session *s, struct rmt_qrec *q)
{
	list_add_tail(&q->node, &s->out);
	s->out_bytes += q->len;
	wake_up_interruptible(&s->wq);
}

/* Encode a record into a queue entry: header fields from ev, buffers from bufs. */
static struct rmt_qrec *encode(const struct rmt_event *ev, const struct rmt_emit_buf *bufs, unsigned int nbufs,
			       u64 time_ns)
{
	struct rmt_record *h;
	struct rmt_qrec *q;
	u32 len = RMT_HEADER_SIZE, off, i;

	if (nbufs > RMT_MAX_BUFS)
		return NULL;
	for (i = 0; i < nbufs; i++)
		len += RMT_BUF_HEADER_SIZE + RMT_ALIGN_UP(bufs[i].len);
	q = qrec_alloc(len);
	if (!q)
		return NULL;
	h = (struct rmt_record *)q->data;
	*h = (struct rmt_record){ .magic = RMT_RECORD_MAGIC, .version = RMT_RECORD_VERSION,
				  .header_size = RMT_HEADER_SIZE, .total_len = len, .source = ev->source,
				  .phase = ev->phase, .flags = ev->flags, .time_ns = time_ns, .pid = ev->pid,
				  .tid = ev->tid, .call_id = ev->call_id, .op = ev->op, .fd = ev->fd,
				  .ret = ev->ret, .err = ev->err, .nbufs = nbufs };
	off = RMT_HEADER_SIZE;
	for (i = 0; i < nbufs; i++) {
		struct rmt_buffer *b = (struct rmt_buffer *)(q->data + off);

		*b = (struct rmt_buffer){ .role = bufs[i].role, .when = bufs[i].when, .flags = bufs[i].flags,
					  .len = bufs[i].len, .addr = bufs[i].addr,
					  .orig_len = bufs[i].orig_len ? bufs[i].orig_len : bufs[i].len,
					  .slot = bufs[i].slot };
		off += RMT_BUF_HEADER_SIZE;
		if (bufs[i].len)
			memcpy(q->data + off, bufs[i].data, bufs[i].len);
		off += RMT_ALIGN_UP(bufs[i].len);
	}
	return q;
}

int rmtrace_replay_emit(struct rmt_session *s, const struct rmt_event *ev, const struct rmt_emit_buf *bufs,
			unsigned int nbufs)
{
	struct rmt_qrec *q = encode(ev, bufs, nbufs, ev->time_ns ? ev->time_ns : rmtrace_replay_now(s));

	if (!q)
		return -ENOMEM;
	rmt_emit_encoded(q->data, q->len, ktime_get_ns());
	queue(s, q);
	return 0;
}
EXPORT_SYMBOL_GPL(rmtrace_replay_emit);

static void emit_ctl(struct rmt_session *s, u16 op, const void *body, u32 size, const char *text, u32 text_len)
{
	struct {
		struct rmt_replay_ctl ctl;
		u8 body[96];
	} arg = { .ctl = { .magic = RMT_REPLAY_MAGIC, .version = RMT_REPLAY_VERSION, .op = op,
			   .length = sizeof(struct rmt_replay_ctl) + size } };
	struct rmt_emit_buf bufs[2] = {
		{ .role = RMT_BUF_ARG, .when = RMT_WHEN_ONCE, .len = arg.ctl.length, .data = &arg },
		{ .role = RMT_BUF_TEXT, .when = RMT_WHEN_ONCE, .len = text_len, .data = text },
	};
	struct rmt_event ev = { .source = RMT_SRC_MARK, .phase = RMT_PH_EVENT, .flags = RMT_RF_REPLAY,
				.op = RMT_MARK_NOTE, .fd = -1 };
	struct rmt_qrec *q;

	BUILD_BUG_ON(sizeof(struct rmt_replay_hello_reply) > sizeof(arg.body));
	memcpy(arg.body, body, size);
	q = encode(&ev, bufs, text ? 2 : 1, rmtrace_replay_now(s));
	if (q)
		queue(s, q);
}

struct rmt_request *rmtrace_request_keep(const struct rmt_request *req, gfp_t gfp)
{
	size_t name = strlen(req->name) + 1, owner = strlen(req->owner) + 1;
	size_t size = sizeof(*req) + sizeof(*req->msg) + req->len + req->oracle_len + name + owner;
	struct rmt_request *copy = kmalloc(size, gfp);
	u8 *p;

	if (!copy)
		return NULL;
	p = (u8 *)(copy + 1);
	*copy = *req;
	if (req->msg) {
		memcpy(p, req->msg, sizeof(*req->msg));
		copy->msg = (const struct rmt_replay_msg *)p;
	}
	p += sizeof(*req->msg);
	memcpy(p, req->rec, req->len);
	copy->rec = (const struct rmt_record *)p;
	p += req->len;
	if (req->oracle) {
		memcpy(p, req->oracle, req->oracle_len);
		copy->oracle = (const struct rmt_record *)p;
	}
	p += req->oracle_len;
	memcpy(p, req->name, name);
	copy->name = (const char *)p;
	p += name;
	memcpy(p, req->owner, owner);
	copy->owner = (const char *)p;
	return copy;
}
EXPORT_SYMBOL_GPL(rmtrace_request_keep);

/* The byte offset of buffer `index`'s data in a (checked) record, or 0. */
static u32 buffer_data(const u8 *rec, u32 index, u32 *len)
{
	const struct rmt_record *h = (const struct rmt_record *)rec;
	u32 off = RMT_HEADER_SIZE, i;

	for (i = 0; i < h->nbufs; i++) {
		const struct rmt_buffer *b = (const struct rmt_buffer *)(rec + off);

		off += RMT_BUF_HEADER_SIZE;
		if (i == index) {
			*len = b->len;
			return off;
		}
		off += RMT_ALIGN_UP(b->len);
	}
	return 0;
}

int rmtrace_replay_answer(struct rmt_session *s, const struct rmt_request *req, bool status_override, u32 status)
{
	static const u8 reply_phase[] = { [RMT_PH_ENTER] = RMT_PH_EXIT, [RMT_PH_SEND] = RMT_PH_RECV,
					  [RMT_PH_EVENT] = RMT_PH_EXIT, [RMT_PH_EXIT] = RMT_PH_EXIT,
					  [RMT_PH_RECV] = RMT_PH_RECV };
	const struct rmt_record *base = req->oracle ? req->oracle : req->rec;
	u32 len = req->rec->phase == RMT_PH_EVENT && !req->oracle ? RMT_HEADER_SIZE : base->total_len;
	struct rmt_record *h;
	struct rmt_qrec *q = qrec_alloc(len);
	u32 i, off;

	if (!q)
		return -ENOMEM;
	memcpy(q->data, base, len);
	h = (struct rmt_record *)q->data;
	if (len == RMT_HEADER_SIZE) {
		h->total_len = len; /* an event's acknowledgement carries no buffers */
		h->nbufs = 0;
	}
	h->phase = reply_phase[req->rec->phase];
	h->source = req->rec->source;
	h->op = req->rec->op;
	h->pid = req->rec->pid;
	h->call_id = req->rec->call_id;
	h->flags = (h->flags & ~RMT_RF_SYNTHETIC) | RMT_RF_REPLAY;
	h->time_ns = rmtrace_replay_now(s);
	off = RMT_HEADER_SIZE;
	for (i = 0; !req->oracle && i < h->nbufs; i++) {
		struct rmt_buffer *b = (struct rmt_buffer *)(q->data + off);

		if (b->when == RMT_WHEN_BEFORE)
			b->when = RMT_WHEN_AFTER; /* the request turned into its reply */
		off += RMT_BUF_HEADER_SIZE + RMT_ALIGN_UP(b->len);
	}
	for (i = 0; status_override && req->msg && i < req->msg->nstatus; i++) {
		const struct rmt_replay_status_at *at = &req->msg->status_at[i];
		u32 blen = 0, data = buffer_data(q->data, at->buffer, &blen);

		if (data && at->width == sizeof(u32) && at->offset <= blen && blen - at->offset >= sizeof(u32))
			memcpy(q->data + data + at->offset, &status, sizeof(u32));
	}
	s->answered++;
	rmt_emit_encoded(q->data, q->len, ktime_get_ns());
	queue(s, q);
	return 0;
}
EXPORT_SYMBOL_GPL(rmtrace_replay_answer);

/* ------------------------------------------------------------ parsing a write */

enum unit_kind { U_CTL, U_SUBMIT };

struct unit {
	u8 kind;
	u16 op;                       /* U_CTL */
	const struct rmt_record *ctl;
	const void *body;
	u32 body_len;
	struct rmt_request req;       /* U_SUBMIT */
	char name[RMT_REPLAY_TEXT_MAX + 1];
	char owner[RMT_REPLAY_TEXT_MAX + 1];
};

/* Buffer `index` of a checked record: its header, data in *data. */
static const struct rmt_buffer *buffer_at(const struct rmt_record *rec, u32 index, const u8 **data)
{
	u32 len = 0, off = buffer_data((const u8 *)rec, index, &len);

	if (!off)
		return NULL;
	*data = (const u8 *)rec + off;
	return (const struct rmt_buffer *)(*data - RMT_BUF_HEADER_SIZE);
}

static u32 body_size(u16 op)
{
	switch (op) {
	case RMT_REPLAY_HELLO:
		return sizeof(struct rmt_replay_hello);
	case RMT_REPLAY_MSG:
		return sizeof(struct rmt_replay_msg);
	case RMT_REPLAY_WHY:
		return sizeof(struct rmt_replay_why);
	case RMT_REPLAY_ADVANCE:
		return sizeof(struct rmt_replay_advance);
	case RMT_REPLAY_BYE:
		return 0;
	case RMT_REPLAY_TARGET:
		return U32_MAX; /* any length: the target checks it */
	}
	return U32_MAX - 1;
}

/* The control header of a record, or NULL when it is not a control record. */
static const struct rmt_replay_ctl *ctl_of(const struct rmt_record *rec, const u8 **body, u32 *body_len)
{
	const struct rmt_replay_ctl *ctl;
	const struct rmt_buffer *b;
	const u8 *data;

	if (rec->source != RMT_SRC_MARK || !(rec->flags & RMT_RF_REPLAY) || rec->nbufs < 1)
		return NULL;
	b = buffer_at(rec, 0, &data);
	if (!b || b->role != RMT_BUF_ARG || b->len < sizeof(*ctl))
		return NULL;
	ctl = (const struct rmt_replay_ctl *)data;
	if (ctl->magic != RMT_REPLAY_MAGIC)
		return NULL;
	*body = data + sizeof(*ctl);
	*body_len = min(ctl->length, b->len) - (u32)sizeof(*ctl);
	return ctl;
}

static bool text_at(const struct rmt_record *rec, u32 index, char *dst)
{
	const struct rmt_buffer *b;
	const u8 *data;

	dst[0] = 0;
	if (index >= rec->nbufs)
		return true;
	b = buffer_at(rec, index, &data);
	if (!b || b->role != RMT_BUF_TEXT || b->len > RMT_REPLAY_TEXT_MAX || memchr(data, 0, b->len))
		return false;
	memcpy(dst, data, b->len);
	dst[b->len] = 0;
	return true;
}

static bool is_request(const struct rmt_record *r)
{
	return !(r->flags & RMT_RF_SYNTHETIC) && r->source >= RMT_SRC_RM && r->source <= RMT_SRC_SYS &&
	       r->source != RMT_SRC_SEMA &&
	       (r->phase == RMT_PH_ENTER || r->phase == RMT_PH_SEND || r->phase == RMT_PH_EVENT);
}

static bool is_oracle(const struct rmt_record *r)
{
	return (r->flags & RMT_RF_SYNTHETIC) && r->source >= RMT_SRC_RM && r->source <= RMT_SRC_SYS &&
	       (r->phase == RMT_PH_EXIT || r->phase == RMT_PH_RECV);
}

#define REFUSE(why) do { *reason = (why); return -EINVAL; } while (0)

/* Split buf into units; every check that can refuse the write happens here. */
static int parse(struct rmt_session *s, const u8 *buf, u32 count, struct unit *units, u32 max_units, u32 *nunits,
		 const char **reason)
{
	const struct rmt_record *recs[3];
	bool hello = s->ops != NULL, bye = s->bye;
	u32 off = 0, n = 0;

	while (off < count) {
		const struct rmt_replay_ctl *ctl;
		const struct rmt_record *r;
		struct unit *u;
		const u8 *body;
		u32 len, body_len, k = 0, i;

		if (n == max_units)
			REFUSE("too many records in one write");
		u = &units[n];
		memset(u, 0, sizeof(*u));
		/* a unit is up to three records: [MSG] [oracle] request */
		while (off < count && k < 3) {
			if (count - off < RMT_HEADER_SIZE)
				REFUSE("a partial record at the end of the write");
			r = (const struct rmt_record *)(buf + off);
			len = r->total_len;
			if (len < RMT_HEADER_SIZE || len > count - off)
				REFUSE("a record's total_len runs past the write");
			if (rmt_record_check(r, len, reason))
				return -EINVAL;
			recs[k++] = r;
			off += len;
			if (ctl_of(r, &body, &body_len)) {
				if (k > 1)
					REFUSE("a control record inside a submission");
				ctl = ctl_of(r, &body, &body_len);
				if (ctl->op != RMT_REPLAY_MSG)
					break;
				continue;
			}
			if (is_request(r))
				break;
			if (!is_oracle(r))
				REFUSE("a record that is neither a request, an oracle nor a control record");
		}
		ctl = ctl_of(recs[0], &body, &body_len);
		if (ctl) {
			if (ctl->version != RMT_REPLAY_VERSION || ctl->reserved)
				REFUSE("unknown control record version");
			if (ctl->length < sizeof(*ctl))
				REFUSE("a control record shorter than its header");
			if (body_size(ctl->op) == U32_MAX - 1)
				REFUSE("unknown control op");
			if (body_size(ctl->op) != U32_MAX && body_len != body_size(ctl->op))
				REFUSE("a control body of the wrong size");
			if (bye)
				REFUSE("the session said BYE");
			if (!hello && ctl->op != RMT_REPLAY_HELLO)
				REFUSE("the first record of a session must be its HELLO");
			if (hello && ctl->op == RMT_REPLAY_HELLO)
				REFUSE("a second HELLO");
		}
		if (ctl && ctl->op != RMT_REPLAY_MSG) {
			if (k != 1)
				REFUSE("a control record inside a submission");
			if (ctl->op == RMT_REPLAY_HELLO) {
				const struct rmt_replay_hello *h = (const void *)body;

				if ((h->clock != RMT_CLOCK_VIRTUAL && h->clock != RMT_CLOCK_REAL) || h->reserved ||
				    !memchr(h->target, 0, sizeof(h->target)))
					REFUSE("a HELLO with an unknown clock or an unterminated target name");
				hello = true;
			}
			if (ctl->op == RMT_REPLAY_ADVANCE) {
				const struct rmt_replay_advance *a = (const void *)body;

				if (a->flags & ~RMT_ADVANCE_UNTIL_ANSWER || a->reserved)
					REFUSE("an ADVANCE with unknown flags");
			}
			if (ctl->op == RMT_REPLAY_BYE)
				bye = true;
			if (ctl->op == RMT_REPLAY_TARGET) {
				/* the target's own check, so that its refusal too changes nothing */
				if (!s->ops)
					REFUSE("a TARGET record in the write of the session's HELLO");
				if (!s->ops->configure || (s->ops->check && s->ops->check(s->state, body, body_len, recs[0])))
					REFUSE("the target refused its TARGET record");
			}
			u->kind = U_CTL;
			u->op = ctl->op;
			u->ctl = recs[0];
			u->body = body;
			u->body_len = body_len;
			n++;
			continue;
		}
		/* a submission */
		if (!hello)
			REFUSE("the first record of a session must be its HELLO");
		if (bye)
			REFUSE("the session said BYE");
		u->kind = U_SUBMIT;
		i = 0;
		if (ctl) {
			const struct rmt_replay_msg *m = (const void *)body;

			if (m->nstatus > RMT_REPLAY_STATUS_AT || m->reserved || m->expect < -1 || m->expect > 1)
				REFUSE("a MSG with bad counts");
			if (!text_at(recs[0], 1, u->name) || !text_at(recs[0], 2, u->owner))
				REFUSE("a MSG whose name or label is not short text");
			u->req.msg = m;
			i++;
		}
		if (i < k && is_oracle(recs[i])) {
			u->req.oracle = recs[i];
			u->req.oracle_len = recs[i]->total_len;
			i++;
		}
		if (i != k - 1 || !is_request(recs[i]))
			REFUSE("a submission must end in its request");
		u->req.rec = recs[i];
		u->req.len = recs[i]->total_len;
		for (k = 0; k < i; k++)
			if (recs[k]->pid != u->req.rec->pid || recs[k]->call_id != u->req.rec->call_id)
				REFUSE("a MSG or oracle names another request (pid, call_id)");
		if (u->req.oracle && u->req.oracle->source != u->req.rec->source)
			REFUSE("an oracle of another source");
		u->req.name = u->name;
		u->req.owner = u->owner;
		n++;
	}
	*nunits = n;
	return 0;
}

/* ------------------------------------------------------------ running a write */

static void arm_tick(struct rmt_session *s)
{
	u64 due, now;

	if (s->clock != RMT_CLOCK_REAL || !s->ops || !s->ops->next_timer)
		return;
	due = s->ops->next_timer(s->state);
	if (due == U64_MAX)
		return;
	now = ktime_get_ns();
	mod_delayed_work(system_wq, &s->tick, due > now ? nsecs_to_jiffies(due - now) + 1 : 0);
}

static void tick(struct work_struct *work)
{
	struct rmt_session *s = container_of(to_delayed_work(work), struct rmt_session, tick);

	mutex_lock(&s->lock);
	if (s->ops && s->ops->fire)
		s->ops->fire(s->state, ktime_get_ns());
	arm_tick(s);
	mutex_unlock(&s->lock);
}

static void advance(struct rmt_session *s, const struct rmt_replay_advance *a)
{
	u64 due;

	if (!s->ops->next_timer || !s->ops->fire)
		goto done;
	if (s->clock == RMT_CLOCK_REAL) {
		s->ops->fire(s->state, ktime_get_ns());
		return;
	}
	while ((due = s->ops->next_timer(s->state)) <= a->to_ns) {
		u64 answered = s->answered;

		s->vnow = max(s->vnow, due);
		s->ops->fire(s->state, due);
		if ((a->flags & RMT_ADVANCE_UNTIL_ANSWER) && s->answered > answered)
			return;
	}
done:
	if (s->clock == RMT_CLOCK_VIRTUAL)
		s->vnow = max(s->vnow, a->to_ns);
}

static int hello(struct rmt_session *s, const struct rmt_replay_hello *h)
{
	struct rmt_replay_hello_reply reply = { .clock = h->clock };
	const struct rmt_target_ops *ops = target_get(h->target);
	void *state;

	if (!ops) {
		strscpy(s->error, h->target[0] ? "no such replay target is registered" :
			"no replay target is registered (load a host-service module)", sizeof(s->error));
		return -ENODEV;
	}
	s->clock = h->clock;
	s->vnow = h->start_ns;
	memcpy(s->status, h->status, sizeof(s->status));
	strscpy(reply.service, ops->name, sizeof(reply.service));
	state = ops->open(s, reply.service, sizeof(reply.service));
	if (IS_ERR_OR_NULL(state)) {
		module_put(ops->owner);
		strscpy(s->error, "the target refused the session", sizeof(s->error));
		return state ? PTR_ERR(state) : -ENOMEM;
	}
	s->ops = ops;
	s->state = state;
	reply.answers = ops->answers;
	reply.now_ns = rmtrace_replay_now(s);
	emit_ctl(s, RMT_REPLAY_HELLO, &reply, sizeof(reply), NULL, 0);
	return 0;
}

static int run_unit(struct rmt_session *s, struct unit *u)
{
	if (u->kind == U_SUBMIT) {
		rmt_emit_encoded(u->req.rec, u->req.len, ktime_get_ns());
		s->submitted++;
		return s->ops->submit(s->state, &u->req);
	}
	switch (u->op) {
	case RMT_REPLAY_HELLO:
		return hello(s, u->body);
	case RMT_REPLAY_WHY: {
		char *text = kmalloc(PAGE_SIZE, GFP_KERNEL);
		size_t n = 0;

		if (!text)
			return -ENOMEM;
		if (s->ops->explain)
			n = s->ops->explain(s->state, u->body, text, PAGE_SIZE);
		emit_ctl(s, RMT_REPLAY_WHY, u->body, sizeof(struct rmt_replay_why), text, n);
		kfree(text);
		return 0;
	}
	case RMT_REPLAY_ADVANCE:
		advance(s, u->body);
		return 0;
	case RMT_REPLAY_BYE:
		if (s->ops->bye)
			s->ops->bye(s->state);
		s->bye = true;
		return 0;
	case RMT_REPLAY_TARGET: /* parse() made sure there is a configure() and its check() took the body */
		return s->ops->configure(s->state, u->body, u->body_len, u->ctl);
	}
	return -EINVAL;
}

#define MAX_UNITS 256

static ssize_t replay_write(struct file *file, const char __user *ubuf, size_t count, loff_t *ppos)
{
	struct rmt_session *s = file->private_data;
	struct rmt_replay_ack ack = {};
	const char *reason = NULL;
	struct unit *units;
	u32 nunits = 0, i;
	u8 *buf;
	int rc;

	if (count > RMT_REPLAY_MAX_WRITE || count < RMT_HEADER_SIZE) {
		mutex_lock(&s->lock);
		strscpy(s->error, count ? "a write must hold whole records, at most 8 MiB" : "an empty write",
			sizeof(s->error));
		mutex_unlock(&s->lock);
		return -EINVAL;
	}
	buf = kvmalloc(count, GFP_KERNEL);
	units = kvmalloc_array(MAX_UNITS, sizeof(*units), GFP_KERNEL);
	rc = -ENOMEM;
	if (!buf || !units)
		goto free;
	rc = -EFAULT;
	if (copy_from_user(buf, ubuf, count))
		goto free;
	mutex_lock(&s->lock);
	if (rmt_detached()) {
		strscpy(s->error, "rmtrace has detached: the session is over", sizeof(s->error));
		rc = -ENODEV;
		goto unlock;
	}
	if (s->out_bytes > RMT_REPLAY_MAX_QUEUE) {
		strscpy(s->error, "the session's answers are not being read", sizeof(s->error));
		rc = -ENOBUFS;
		goto unlock;
	}
	rc = parse(s, buf, count, units, MAX_UNITS, &nunits, &reason);
	if (rc) {
		strscpy(s->error, reason, sizeof(s->error));
		goto unlock;
	}
	s->error[0] = 0;
	for (i = 0; i < nunits; i++) {
		rc = run_unit(s, &units[i]);
		if (rc)
			break;
	}
	if (s->ops) {
		ack.write_seq = ++s->write_seq;
		ack.now_ns = rmtrace_replay_now(s);
		ack.next_timer_ns = s->ops->next_timer ? s->ops->next_timer(s->state) : U64_MAX;
		ack.parked = (u32)(s->submitted - min(s->submitted, s->answered));
		emit_ctl(s, RMT_REPLAY_ACK, &ack, sizeof(ack), NULL, 0);
		arm_tick(s);
	}
	rc = rc ? rc : (int)count;
unlock:
	mutex_unlock(&s->lock);
free:
	kvfree(units);
	kvfree(buf);
	return rc;
}

static ssize_t replay_read(struct file *file, char __user *ubuf, size_t count, loff_t *ppos)
{
	struct rmt_session *s = file->private_data;
	size_t done = 0;
	int rc;

	for (;;) {
		mutex_lock(&s->lock);
		while (done < count && !list_empty(&s->out)) {
			struct rmt_qrec *q = list_first_entry(&s->out, struct rmt_qrec, node);
			u32 n = min_t(size_t, q->len - s->out_off, count - done);

			if (copy_to_user(ubuf + done, q->data + s->out_off, n)) {
				mutex_unlock(&s->lock);
				return done ? done : -EFAULT;
			}
			done += n;
			s->out_off += n;
			if (s->out_off == q->len) {
				list_del(&q->node);
				s->out_bytes -= q->len;
				s->out_off = 0;
				kvfree(q);
			}
		}
		mutex_unlock(&s->lock);
		if (done || !count || rmt_detached()) /* detached: the answers queued, then the end */
			return done;
		if (file->f_flags & O_NONBLOCK)
			return -EAGAIN;
		rc = wait_event_interruptible(s->wq, !list_empty(&s->out) || rmt_detached());
		if (rc)
			return rc;
	}
}

static __poll_t replay_poll(struct file *file, poll_table *wait)
{
	struct rmt_session *s = file->private_data;
	__poll_t mask = EPOLLOUT | EPOLLWRNORM;

	poll_wait(file, &s->wq, wait);
	mutex_lock(&s->lock);
	if (!list_empty(&s->out) || rmt_detached())
		mask |= EPOLLIN | EPOLLRDNORM;
	if (rmt_detached())
		mask |= EPOLLHUP;
	mutex_unlock(&s->lock);
	return mask;
}

static long replay_ioctl(struct file *file, unsigned int cmd, unsigned long arg)
{
	struct rmt_session *s = file->private_data;
	char why[RMT_REPLAY_ERROR_MAX];

	if (cmd != RMT_IOC_REPLAY_ERROR)
		return -ENOTTY;
	mutex_lock(&s->lock);
	memcpy(why, s->error, sizeof(why));
	mutex_unlock(&s->lock);
	return copy_to_user((void __user *)arg, why, sizeof(why)) ? -EFAULT : 0;
}

static int replay_open(struct inode *inode, struct file *file)
{
	struct rmt_session *s;
	int rc;

	if (!capable(CAP_SYS_ADMIN))
		return -EPERM;
	s = kzalloc(sizeof(*s), GFP_KERNEL);
	if (!s)
		return -ENOMEM;
	mutex_init(&s->lock);
	INIT_LIST_HEAD(&s->out);
	init_waitqueue_head(&s->wq);
	rc = rmt_file_opened(&s->opener, "/dev/rmtrace-replay", &s->wq);
	if (rc) {
		kfree(s);
		return rc;
	}
	INIT_DELAYED_WORK(&s->tick, tick);
	file->private_data = s;
	return stream_open(inode, file);
}

static int replay_release(struct inode *inode, struct file *file)
{
	struct rmt_session *s = file->private_data;
	struct rmt_qrec *q, *next;

	cancel_delayed_work_sync(&s->tick);
	if (s->ops) {
		s->ops->release(s->state);
		module_put(s->ops->owner);
	}
	list_for_each_entry_safe(q, next, &s->out, node)
		kvfree(q);
	rmt_file_closed(&s->opener);
	kfree(s);
	return 0;
}

static const struct file_operations replay_fops = {
	.owner = THIS_MODULE,
	.open = replay_open,
	.release = replay_release,
	.read = replay_read,
	.write = replay_write,
	.poll = replay_poll,
	.unlocked_ioctl = replay_ioctl,
	.llseek = no_llseek,
};

static struct miscdevice replay_misc = {
	.minor = MISC_DYNAMIC_MINOR,
	.name = "rmtrace-replay",
	.fops = &replay_fops,
	.mode = 0600,
};

int rmt_replay_init(void)
{
	return misc_register(&replay_misc);
}

void rmt_replay_exit(void)
{
	misc_deregister(&replay_misc);
}
