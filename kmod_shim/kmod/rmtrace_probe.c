// SPDX-License-Identifier: GPL-2.0
/*
 * rmtrace_probe.c: kretprobes that record calls and messages as records.
 *
 * A probe is a struct rmt_probe_spec (rmtrace_kmod.h): data saying which
 * record to write and which buffers to read, so the driver-specific facts
 * (offsets of the driver's structs, UVM params sizes) come from userspace's
 * driver profile and not from this code.  The entry handler writes a CALL's
 * ENTER before the probed function runs, so a call that never returns is in
 * the trace; the return handler writes its EXIT (or a SEND/RECV message)
 * with the buffers read again.  Handlers run with preemption off: memory is
 * read with the *_nofault copies (a bad or paged-out address makes the
 * buffer UNREADABLE, never a sleep or an oops) and the record is built in
 * this CPU's scratch with interrupts off, then committed to its ring.
 *
 * The default list (module parameter `probes`) names the NVIDIA open kernel
 * module's entry points with what can be recorded without a profile; a
 * symbol that is missing is skipped and reported, never a load failure.
 *
 * The probed modules come and go while rmtrace stays (a driver engineer
 * reloads nvidia.ko between runs): as perf's and ftrace's kprobe events do, a
 * module notifier detaches the probes on a module that is unloading and
 * attaches every missing probe again when a module loads, before its init
 * runs.  Each change goes into the rings as a MARK NOTE, so the trace says
 * where it cannot have seen calls.
 */
#include <linux/atomic.h>
#include <linux/kprobes.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/notifier.h>
#include <linux/percpu.h>
#include <linux/ptrace.h>
#include <linux/sched.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <linux/uaccess.h>
#include <linux/vmalloc.h>

#include "rmtrace_internal.h"

struct rmt_probe {
	struct kretprobe krp;
	struct rmt_probe_spec spec;
	atomic64_t hits;
};

/* What the entry handler leaves for the return handler (kretprobe instance data). */
struct rmt_call {
	u64 call_id;
	u32 op;
	unsigned long args[RMT_PROBE_MAX_ARGS];
};

static struct rmt_probe *probes[RMT_PROBES_MAX]; /* a missing probe keeps its spec, to attach later */
static int probe_state[RMT_PROBES_MAX];           /* 1 attached, -errno why not, 0 free */
static char probe_name[RMT_PROBES_MAX][RMT_PROBE_NAME_MAX];
static DEFINE_MUTEX(probe_lock);
static atomic64_t call_ids = ATOMIC64_INIT(0);
static DEFINE_PER_CPU(u8 *, scratch);

unsigned int rmt_gsp_element_offset = 48;
module_param_named(gsp_element_offset, rmt_gsp_element_offset, uint, 0444);
MODULE_PARM_DESC(gsp_element_offset,
		 "offset of pCmdQueueElement in MESSAGE_QUEUE_INFO for the default GSP probes (48: 535-590; 80: 595)");

u64 rmt_next_call_id(void)
{
	return RMT_KCALL_ID_BIT | (u64)atomic64_inc_return(&call_ids);
}

/* ------------------------------------------------------------ values */

static bool mem_read(u8 space, void *dst, unsigned long addr, size_t n)
{
	if (space == RMT_SPACE_USER)
		return !copy_from_user_nofault(dst, (const void __user *)addr, n);
	return !copy_from_kernel_nofault(dst, (const void *)addr, n);
}

static bool value_of(const struct rmt_probe *p, const struct rmt_value *v, const struct rmt_call *c, u32 op, u64 *out)
{
	u64 x;
	u32 i;

	switch (v->kind) {
	case RMT_VAL_CONST:
		*out = v->constant;
		return true;
	case RMT_VAL_TABLE:
		for (i = 0; i < p->spec.ntable; i++) {
			if (p->spec.table[i].key == op) {
				*out = p->spec.table[i].value;
				return true;
			}
		}
		return false;
	case RMT_VAL_ARG:
		break;
	default:
		return false;
	}
	x = c->args[v->arg];
	for (i = 0; i < v->nderef; i++) {
		u64 next;

		if (!mem_read(v->space, &next, x + v->off[i], sizeof(next)))
			return false;
		x = next;
	}
	if (v->width) {
		u64 word = 0;

		if (!mem_read(v->space, &word, x + v->off[v->nderef], v->width))
			return false;
		x = word;
	} else {
		x += v->off[v->nderef];
	}
	x >>= v->shift;
	if (v->mask)
		x &= v->mask;
	*out = x;
	return true;
}

/* ------------------------------------------------------------ records */

struct rmt_build {
	u8 *buf;
	u32 len;
	u16 nbufs;
	u8 flags;
};

static struct rmt_buffer *build_buf(struct rmt_build *b, u16 role, u8 when, u32 slot)
{
	struct rmt_buffer *h = (struct rmt_buffer *)(b->buf + b->len);

	memset(h, 0, sizeof(*h));
	h->role = role;
	h->when = when;
	h->slot = slot;
	b->len += RMT_BUF_HEADER_SIZE;
	b->nbufs++;
	return h;
}

static void build_data(struct rmt_build *b, struct rmt_buffer *h, u32 n)
{
	u32 pad = RMT_ALIGN_UP(n) - n;

	memset(b->buf + b->len + n, 0, pad);
	h->len = n;
	b->len += n + pad;
}

static void capture(const struct rmt_probe *p, const struct rmt_capture *cap, const struct rmt_call *c, u32 op,
		    u8 when, struct rmt_build *b)
{
	struct rmt_buffer *h;
	u64 addr, want;
	u32 room, n;

	if (cap->only_op != U32_MAX && cap->only_op != op)
		return;
	if (!value_of(p, &cap->len, c, op, &want)) {
		if (cap->len.kind == RMT_VAL_TABLE)
			return; /* an op the table does not size: nothing to read */
		want = 0;
	} else if (!want) {
		return;
	}
	room = rmt_max_record - b->len - RMT_BUF_HEADER_SIZE - RMT_ALIGN;
	if (b->nbufs >= RMT_MAX_BUFS || room > rmt_max_record)
		return;
	h = build_buf(b, cap->role, when, cap->slot);
	h->orig_len = want > U32_MAX ? U32_MAX : (u32)want;
	if (!want || !value_of(p, &cap->addr, c, op, &addr)) {
		h->flags |= RMT_BF_UNREADABLE;
		b->flags |= RMT_RF_UNREADABLE;
		return;
	}
	n = min_t(u64, min_t(u64, want, cap->max), room & ~(RMT_ALIGN - 1));
	if (!mem_read(cap->space, b->buf + b->len, addr, n)) {
		h->flags |= RMT_BF_UNREADABLE;
		b->flags |= RMT_RF_UNREADABLE;
		n = 0;
	} else if (n < want) {
		h->flags |= RMT_BF_TRUNCATED;
		b->flags |= RMT_RF_TRUNCATED;
	}
	if (cap->space == RMT_SPACE_USER)
		h->addr = addr; /* kernel addresses stay out of traces */
	build_data(b, h, n);
}

static void write_record(struct rmt_probe *p, const struct rmt_call *c, u8 phase, u32 op, s64 ret)
{
	const struct rmt_probe_spec *s = &p->spec;
	u8 when = phase == RMT_PH_ENTER ? RMT_WHEN_BEFORE : phase == RMT_PH_EXIT ? RMT_WHEN_AFTER : RMT_WHEN_ONCE;
	u8 bit = phase == RMT_PH_ENTER ? RMT_CAP_BEFORE : phase == RMT_PH_EXIT ? RMT_CAP_AFTER : 0xff;
	struct rmt_build b;
	struct rmt_record *h;
	unsigned long irqs;
	u32 i;

	if (!rmt_source_on(s->source))
		return;
	local_irq_save(irqs);
	b.buf = this_cpu_read(scratch);
	b.len = RMT_HEADER_SIZE;
	b.nbufs = 0;
	b.flags = 0;
	if ((s->flags & RMT_PROBE_ARGS) && phase != RMT_PH_EXIT) {
		struct rmt_buffer *bh = build_buf(&b, RMT_BUF_ARG, when, 0);
		u32 n = s->nargs * sizeof(u64);

		/* kernel addresses stay out of traces (as %pK would keep them out of logs): recorded as 0 */
		for (i = 0; i < s->nargs; i++)
			((u64 *)(b.buf + b.len))[i] = c->args[i] >= TASK_SIZE_MAX ? 0 : c->args[i];
		bh->orig_len = n;
		build_data(&b, bh, n);
	}
	for (i = 0; i < s->ncaps; i++)
		if (s->cap[i].when & bit)
			capture(p, &s->cap[i], c, op, when, &b);
	h = (struct rmt_record *)b.buf;
	memset(h, 0, sizeof(*h));
	h->magic = RMT_RECORD_MAGIC;
	h->version = RMT_RECORD_VERSION;
	h->header_size = RMT_HEADER_SIZE;
	h->total_len = b.len;
	h->source = s->source;
	h->phase = phase;
	h->flags = b.flags;
	h->time_ns = ktime_get_ns();
	if (in_task()) {
		h->pid = task_tgid_nr(current);
		h->tid = task_pid_nr(current);
	}
	h->call_id = s->kind == RMT_PROBE_CALL ? c->call_id : 0;
	h->op = op;
	h->fd = s->fd;
	if (phase == RMT_PH_EXIT && (s->source == RMT_SRC_RM || s->source == RMT_SRC_UVM) && ret < 0 &&
	    ret >= -MAX_ERRNO && op < RMT_KCALL_BASE) {
		h->ret = -1; /* what the process sees: -1 and errno */
		h->err = (s32)-ret;
	} else {
		h->ret = ret;
	}
	h->nbufs = b.nbufs;
	if (!rmt_emit_encoded(b.buf, b.len, 0))
		atomic64_inc(&p->hits);
	local_irq_restore(irqs);
}

static struct rmt_probe *probe_of(struct kretprobe_instance *ri)
{
	struct kretprobe *krp = get_kretprobe(ri);

	return krp ? container_of(krp, struct rmt_probe, krp) : NULL;
}

static int on_entry(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	struct rmt_probe *p = probe_of(ri);
	struct rmt_call *c = (struct rmt_call *)ri->data;
	u64 op = 0;
	int i;

	if (!p)
		return 1;
	for (i = 0; i < RMT_PROBE_MAX_ARGS; i++)
		c->args[i] = regs_get_kernel_argument(regs, i);
	c->call_id = rmt_next_call_id();
	if (p->spec.kind == RMT_PROBE_CALL) {
		if (!value_of(p, &p->spec.op, c, 0, &op))
			op = 0;
		c->op = (u32)op;
		write_record(p, c, RMT_PH_ENTER, c->op, 0);
	}
	return 0;
}

static int on_return(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	struct rmt_probe *p = probe_of(ri);
	struct rmt_call *c = (struct rmt_call *)ri->data;
	s64 ret = (s64)regs_return_value(regs);
	u64 op = 0;

	if (!p)
		return 0;
	if (p->spec.flags & RMT_PROBE_VOID)
		ret = 0;
	if (p->spec.kind == RMT_PROBE_CALL) {
		write_record(p, c, RMT_PH_EXIT, c->op, ret);
		return 0;
	}
	if ((p->spec.flags & RMT_PROBE_OK_ONLY) && (u32)ret != 0)
		return 0;
	if (!value_of(p, &p->spec.op, c, 0, &op))
		op = 0;
	write_record(p, c, p->spec.kind == RMT_PROBE_SEND ? RMT_PH_SEND : RMT_PH_RECV, (u32)op, ret);
	return 0;
}

/* ------------------------------------------------------------ the probe list */

static int spec_check(const struct rmt_probe_spec *s)
{
	const struct rmt_value *vals[1 + 2 * RMT_PROBE_MAX_CAPS];
	u32 i, n = 0;

	if (strnlen(s->symbol, RMT_PROBE_NAME_MAX) == RMT_PROBE_NAME_MAX || !s->symbol[0])
		return -EINVAL;
	if (s->source < RMT_SRC_RM || s->source > RMT_SRC_MARK)
		return -EINVAL;
	if (s->kind < RMT_PROBE_CALL || s->kind > RMT_PROBE_RECV || s->ncaps > RMT_PROBE_MAX_CAPS ||
	    s->nargs > RMT_PROBE_MAX_ARGS || s->ntable > RMT_PROBE_MAX_TABLE)
		return -EINVAL;
	vals[n++] = &s->op;
	for (i = 0; i < s->ncaps; i++) {
		const struct rmt_capture *cap = &s->cap[i];

		if (cap->role < RMT_BUF_ARG || cap->role > RMT_BUF_RIGHTS || !cap->when ||
		    (cap->space != RMT_SPACE_KERNEL && cap->space != RMT_SPACE_USER))
			return -EINVAL;
		vals[n++] = &cap->addr;
		vals[n++] = &cap->len;
	}
	for (i = 0; i < n; i++) {
		const struct rmt_value *v = vals[i];

		if (v->kind > RMT_VAL_TABLE || v->arg >= RMT_PROBE_MAX_ARGS || v->nderef > RMT_PROBE_MAX_DEREF ||
		    (v->width != 0 && v->width != 1 && v->width != 2 && v->width != 4 && v->width != 8) ||
		    v->shift > 63 ||
		    (v->kind == RMT_VAL_ARG && (v->nderef || v->width) &&
		     v->space != RMT_SPACE_KERNEL && v->space != RMT_SPACE_USER))
			return -EINVAL;
	}
	return 0;
}

static void probe_free(int i)
{
	if (probe_state[i] == 1)
		unregister_kretprobe(&probes[i]->krp);
	kfree(probes[i]);
	probes[i] = NULL;
	probe_state[i] = 0;
	probe_name[i][0] = 0;
}

/* Register the probe's kretprobe afresh (a struct once unregistered is not registered again as it is). */
static int probe_attach(struct rmt_probe *p)
{
	memset(&p->krp, 0, sizeof(p->krp));
	p->krp.kp.symbol_name = p->spec.symbol;
	p->krp.entry_handler = on_entry;
	p->krp.handler = on_return;
	p->krp.data_size = sizeof(struct rmt_call);
	p->krp.maxactive = 64; /* calls blocked at once per probe (a wedge holds one) */
	return register_kretprobe(&p->krp);
}

/* A MARK NOTE in the rings: where the trace may lack calls, and why. */
static __printf(1, 2) void note(const char *fmt, ...)
{
	struct rmt_event ev = { .source = RMT_SRC_MARK, .phase = RMT_PH_EVENT, .op = RMT_MARK_NOTE,
				.flags = RMT_RF_SYNTHETIC, .fd = -1 };
	struct rmt_emit_buf buf = { .role = RMT_BUF_TEXT, .when = RMT_WHEN_ONCE };
	char text[160];
	va_list ap;

	va_start(ap, fmt);
	buf.len = vscnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	buf.data = text;
	pr_info("rmtrace: %s\n", text);
	rmtrace_emit(&ev, &buf, 1);
}

static int on_module(struct notifier_block *nb, unsigned long what, void *data)
{
	struct module *mod = data;
	int i;

	if (what != MODULE_STATE_COMING && what != MODULE_STATE_GOING)
		return NOTIFY_DONE;
	mutex_lock(&probe_lock);
	for (i = 0; i < RMT_PROBES_MAX; i++) {
		struct rmt_probe *p = probes[i];

		if (!p)
			continue;
		if (what == MODULE_STATE_GOING && probe_state[i] == 1 &&
		    within_module((unsigned long)p->krp.kp.addr, mod)) {
			unregister_kretprobe(&p->krp);
			probe_state[i] = -ENOENT;
			note("probe %s detached: module %s is unloading", p->spec.symbol, mod->name);
		} else if (what == MODULE_STATE_COMING && probe_state[i] != 1 && !probe_attach(p)) {
			probe_state[i] = 1;
			note("probe %s attached: module %s loaded", p->spec.symbol, mod->name);
		}
	}
	mutex_unlock(&probe_lock);
	return NOTIFY_DONE;
}

static struct notifier_block module_nb = { .notifier_call = on_module };

/* Attach a probe; a slot is used even when its symbol is missing, so the miss is reported. */
int rmt_probe_add(const struct rmt_probe_spec *spec)
{
	struct rmt_probe *p;
	int i, rc, slot = -1;

	rc = spec_check(spec);
	if (rc)
		return rc;
	mutex_lock(&probe_lock);
	for (i = 0; i < RMT_PROBES_MAX; i++) {
		if (!strncmp(probe_name[i], spec->symbol, RMT_PROBE_NAME_MAX)) {
			probe_free(i); /* a new spec replaces the old one */
			slot = i;
			break;
		}
		if (slot < 0 && !probe_name[i][0])
			slot = i;
	}
	rc = -ENOSPC;
	if (slot < 0)
		goto out;
	p = kzalloc(sizeof(*p), GFP_KERNEL);
	rc = -ENOMEM;
	if (!p)
		goto out;
	p->spec = *spec;
	strscpy(probe_name[slot], spec->symbol, RMT_PROBE_NAME_MAX);
	probes[slot] = p;
	rc = probe_attach(p);
	if (rc) {
		pr_info("rmtrace: probe %s skipped until a module defines it: %s (error %d)\n", spec->symbol,
			rc == -ENOENT || rc == -EINVAL ? "no such symbol" : "cannot attach", rc);
		probe_state[slot] = rc;
		rc = -ENOENT;
		goto out;
	}
	probe_state[slot] = 1;
	rc = slot;
out:
	mutex_unlock(&probe_lock);
	return rc;
}

void rmt_probes_clear(void)
{
	int i;

	mutex_lock(&probe_lock);
	for (i = 0; i < RMT_PROBES_MAX; i++)
		probe_free(i);
	mutex_unlock(&probe_lock);
}

int rmt_probe_info(struct rmt_probe_info *info)
{
	u32 i = info->index;

	if (i >= RMT_PROBES_MAX)
		return -EINVAL;
	mutex_lock(&probe_lock);
	info->state = probe_state[i];
	strscpy(info->symbol, probe_name[i], RMT_PROBE_NAME_MAX);
	info->hits = probes[i] ? atomic64_read(&probes[i]->hits) : 0;
	info->missed = probe_state[i] == 1 ? probes[i]->krp.nmissed : 0;
	mutex_unlock(&probe_lock);
	return 0;
}

u32 rmt_probes_attached(void)
{
	u32 i, n = 0;

	for (i = 0; i < RMT_PROBES_MAX; i++)
		n += READ_ONCE(probe_state[i]) == 1;
	return n;
}

/* ------------------------------------------------------------ the default list */

static struct rmt_value arg_value(u8 arg, u8 shift, u64 mask)
{
	return (struct rmt_value){ .kind = RMT_VAL_ARG, .arg = arg, .shift = shift, .mask = mask };
}

static struct rmt_value const_value(u64 v)
{
	return (struct rmt_value){ .kind = RMT_VAL_CONST, .constant = v };
}

/* The queue element the GSP message queue functions copy through: *(arg0 + offset) + off. */
static struct rmt_value element_at(int off, u8 width)
{
	return (struct rmt_value){ .kind = RMT_VAL_ARG, .nderef = 1, .width = width, .space = RMT_SPACE_KERNEL,
				   .off = { rmt_gsp_element_offset, off } };
}

static void add_cap(struct rmt_probe_spec *s, u16 role, u8 when, u8 space, u32 slot, struct rmt_value addr,
		    struct rmt_value len, u32 max, u32 only_op)
{
	s->cap[s->ncaps++] = (struct rmt_capture){ .role = role, .when = when, .space = space, .slot = slot,
						   .addr = addr, .len = len, .max = max, .only_op = only_op };
}

static void kcall(struct rmt_probe_spec *s, const char *sym, u32 op, u8 nargs, u32 flags)
{
	strscpy(s->symbol, sym, sizeof(s->symbol));
	s->source = RMT_SRC_UVM;
	s->kind = RMT_PROBE_CALL;
	s->flags = flags | RMT_PROBE_ARGS;
	s->nargs = nargs;
	s->fd = -1;
	s->op = const_value(RMT_KCALL_BASE + op);
}

/* The default spec for `name`, false when the name is not in the default list. */
static bool default_spec(const char *name, struct rmt_probe_spec *s)
{
	static const u8 both = RMT_CAP_BEFORE | RMT_CAP_AFTER;
	struct rmt_value uuid = arg_value(0, 0, 0);

	memset(s, 0, sizeof(*s));
	if (!strcmp(name, "nvidia_unlocked_ioctl")) {
		/* (file, cmd, arg): op _IOC_NR(cmd); the argument struct is _IOC_SIZE(cmd) bytes at arg */
		strscpy(s->symbol, name, sizeof(s->symbol));
		s->source = RMT_SRC_RM;
		s->kind = RMT_PROBE_CALL;
		s->fd = -1;
		s->op = arg_value(1, 0, 0xff);
		add_cap(s, RMT_BUF_ARG, both, RMT_SPACE_USER, 0, arg_value(2, 0, 0), arg_value(1, 16, 0x3fff), 16384,
			U32_MAX);
		return true;
	}
	if (!strcmp(name, "uvm_ioctl")) {
		/* (filp, cmd, arg): op the raw command; params sizes come from the profile (RMT_IOC_ADD_PROBE) */
		strscpy(s->symbol, name, sizeof(s->symbol));
		s->source = RMT_SRC_UVM;
		s->kind = RMT_PROBE_CALL;
		s->fd = -1;
		s->op = arg_value(1, 0, 0xffffffff);
		add_cap(s, RMT_BUF_ARG, both, RMT_SPACE_USER, 0, arg_value(2, 0, 0),
			(struct rmt_value){ .kind = RMT_VAL_TABLE }, 65536, U32_MAX);
		return true;
	}
	if (!strcmp(name, "nvUvmInterfaceRegisterGpu")) {
		kcall(s, name, RMT_KCALL_REGISTER_GPU, 2, 0);
		add_cap(s, RMT_BUF_NESTED, RMT_CAP_BEFORE, RMT_SPACE_KERNEL, 0, uuid, const_value(16), 16, U32_MAX);
		return true;
	}
	if (!strcmp(name, "nvUvmInterfaceUnregisterGpu")) {
		kcall(s, name, RMT_KCALL_UNREGISTER_GPU, 1, RMT_PROBE_VOID);
		add_cap(s, RMT_BUF_NESTED, RMT_CAP_BEFORE, RMT_SPACE_KERNEL, 0, uuid, const_value(16), 16, U32_MAX);
		return true;
	}
	if (!strcmp(name, "nvUvmInterfaceGetGpuInfo")) {
		kcall(s, name, RMT_KCALL_GET_GPU_INFO, 3, 0);
		add_cap(s, RMT_BUF_NESTED, RMT_CAP_BEFORE, RMT_SPACE_KERNEL, 0, uuid, const_value(16), 16, U32_MAX);
		return true;
	}
	if (!strcmp(name, "nvUvmInterfaceRetainChannel")) {
		kcall(s, name, RMT_KCALL_RETAIN_CHANNEL, 5, 0); /* hClient, hChannel: the rest are kernel addresses */
		return true;
	}
	if (!strcmp(name, "nvUvmInterfaceReleaseChannel")) {
		kcall(s, name, RMT_KCALL_RELEASE_CHANNEL, 1, RMT_PROBE_VOID);
		return true;
	}
	if (!strcmp(name, "GspMsgQueueSendCommand") || !strcmp(name, "GspMsgQueueReceiveStatus")) {
		/* (pMQI, pGpu): the message is the queue element at pMQI->pCmdQueueElement, read at return */
		strscpy(s->symbol, name, sizeof(s->symbol));
		s->source = RMT_SRC_GSP;
		s->kind = name[11] == 'S' ? RMT_PROBE_SEND : RMT_PROBE_RECV;
		s->flags = RMT_PROBE_OK_ONLY;
		s->fd = 0;
		s->op = element_at(48 + 12, 4); /* rpc.function */
		add_cap(s, RMT_BUF_ARG, RMT_CAP_AFTER, RMT_SPACE_KERNEL, 0, element_at(0, 0), const_value(48), 48,
			U32_MAX);
		add_cap(s, RMT_BUF_PAYLOAD, RMT_CAP_AFTER, RMT_SPACE_KERNEL, 0, element_at(48, 0), element_at(48 + 8, 4),
			65488, U32_MAX);
		return true;
	}
	return false;
}

static const char *const default_list =
	"nvidia_unlocked_ioctl,uvm_ioctl,nvUvmInterfaceRegisterGpu,nvUvmInterfaceUnregisterGpu,"
	"nvUvmInterfaceGetGpuInfo,nvUvmInterfaceRetainChannel,nvUvmInterfaceReleaseChannel,"
	"GspMsgQueueSendCommand,GspMsgQueueReceiveStatus";

int rmt_probes_init(const char *list)
{
	struct rmt_probe_spec *spec;
	char *copy, *cur, *name;
	int cpu, attached = 0, missing = 0;

	for_each_possible_cpu(cpu) {
		u8 *buf = vmalloc_node(rmt_max_record, cpu_to_node(cpu));

		if (!buf) {
			rmt_probes_exit();
			return -ENOMEM;
		}
		per_cpu(scratch, cpu) = buf;
	}
	if (!list || !strcmp(list, "default"))
		list = default_list;
	spec = kmalloc(sizeof(*spec), GFP_KERNEL);
	copy = kstrdup(list, GFP_KERNEL);
	if (!spec || !copy) {
		kfree(spec);
		kfree(copy);
		rmt_probes_exit();
		return -ENOMEM;
	}
	cur = copy;
	while ((name = strsep(&cur, ","))) {
		if (!*name)
			continue;
		if (!default_spec(name, spec)) {
			pr_warn("rmtrace: probe %s is not in the default list; add it with RMT_IOC_ADD_PROBE\n", name);
			continue;
		}
		if (rmt_probe_add(spec) >= 0)
			attached++;
		else
			missing++;
	}
	kfree(copy);
	kfree(spec);
	pr_info("rmtrace: %d probes attached, %d skipped\n", attached, missing);
	return register_module_notifier(&module_nb);
}

void rmt_probes_exit(void)
{
	int cpu;

	unregister_module_notifier(&module_nb);
	rmt_probes_clear();
	for_each_possible_cpu(cpu) {
		vfree(per_cpu(scratch, cpu));
		per_cpu(scratch, cpu) = NULL;
	}
}
