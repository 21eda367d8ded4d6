/*
 * shim_ioctl.c: which buffers an RM or UVM ioctl carries.
 *
 * RM (/dev/nvidiactl, /dev/nvidia<N>): the driver dispatches on _IOC_NR of
 * the request and copies _IOC_SIZE bytes of argument (nvidia_ioctl), so the
 * record's op is the escape number and buffer ARG is those bytes: for
 * CARD_INFO the whole card array, for RM_FREE, RM_ALLOC_MEMORY,
 * RM_MAP_MEMORY and the rest their argument struct.  The escapes whose
 * argument points further are in esc_rules below; IOCTL_XFER_CMD wraps any
 * other escape whose argument is too big for _IOC_SIZE, and its inner
 * argument (buffer XFER) gets the inner escape's rules.  RM_CONTROL params
 * may themselves hold user pointers: the capture table lists which controls
 * do and where (NESTED buffers, slot = which pointer).
 *
 * UVM (/dev/nvidia-uvm, -tools): the request number is raw, not
 * _IOC-encoded, so the params size comes from the capture table; op is the
 * request, ARG the params.
 *
 * Every buffer is read before the call and again after it (the driver
 * writes statuses and results back), except RIGHTS, which is input only.
 */
#define _GNU_SOURCE
#include <linux/ioctl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "shim.h"

/* Escape numbers (_IOC_NR) and argument layouts, from NVIDIA's nv-ioctl.h,
 * nv-ioctl-numbers.h and nvos.h; identical in the 535..595 drivers. */
enum {
	NV_ESC_RM_CONTROL     = 0x2a, /* NVOS54, 32 bytes                    */
	NV_ESC_RM_ALLOC       = 0x2b, /* NVOS21 (32 bytes) or NVOS64 (48)   */
	NV_ESC_IOCTL_XFER_CMD = 211,  /* nv_ioctl_xfer_t {u32 cmd, size; ptr} */
};
#define NVOS21_CLASS          12 /* hClass, in NVOS21 and NVOS64 alike */
#define NVOS54_CMD            8
#define NVOS54_FLAGS          12
#define NVOS54_FLAGS_FINN_SERIALIZED 0x4u /* params are serialized: no raw pointers */
#define XFER_CMD              0
#define XFER_SIZE             4
#define XFER_ARG_SIZE         16

#define SIZE_RIGHTS 0xffff /* size_off: the capture table's rights_size */
#define SIZE_CLASS  0x8000 /* size_off flag: the class table's size for hClass, else the u32 at size_off */

/* Pointer fields of escape arguments: when the argument (of arg_size bytes)
 * of escape nr is captured, the size_off u32 bytes at the NvP64 at ptr_off
 * are captured too, as role. */
static const struct esc_rule {
	uint32_t nr;
	uint16_t arg_size;
	uint16_t ptr_off;
	uint16_t size_off;
	uint16_t role;
	uint8_t after;
} esc_rules[] = {
	{ NV_ESC_RM_CONTROL,     32, 16, 24,          RMT_BUF_PARAMS,       1 }, /* params, paramsSize         */
	{ NV_ESC_RM_ALLOC,       32, 16, SIZE_CLASS | 24, RMT_BUF_ALLOC_PARAMS, 1 }, /* NVOS21 pAllocParms, by class */
	{ NV_ESC_RM_ALLOC,       48, 16, SIZE_CLASS | 32, RMT_BUF_ALLOC_PARAMS, 1 }, /* NVOS64 pAllocParms, by class */
	{ NV_ESC_RM_ALLOC,       48, 24, SIZE_RIGHTS, RMT_BUF_RIGHTS,       0 }, /* NVOS64 pRightsRequested    */
	{ NV_ESC_IOCTL_XFER_CMD, 16,  8, XFER_SIZE,   RMT_BUF_XFER,         1 }, /* the inner argument        */
};

/* Read one buffer before the call and remember it for the exit; 0 when its bytes are in *v. */
SHIM_HOT static int take(struct shim_rec *r, struct shim_plan *p, uint16_t role, uint8_t after, uint32_t slot,
		uint64_t addr, uint64_t len, struct shim_view *v)
{
	int got = rec_add_user(r, role, RMT_WHEN_BEFORE, slot, addr, len, v);

	if (p->n < SHIM_MAX_PLAN) {
		p->item[p->n].role = role;
		p->item[p->n].after = after;
		p->item[p->n].slot = slot;
		p->item[p->n].addr = addr;
		p->item[p->n].len = len;
		p->n++;
		if (after) {
			if (got == 0 && v->len == len) /* whole: the exit takes as many bytes, unless it faults */
				p->exit_bytes += (uint32_t)sizeof(struct rmt_buffer) + RMT_ALIGN_UP((uint32_t)len);
			else
				p->whole = 0;
		}
	}
	return got;
}

/* ------------------------------------------------------------ table lookups
 *
 * The capture table's arrays are sorted by their leading u32 key (for the
 * recorder's sake); the shim finds rows through a hash of each, built once
 * per process image from the mapped table (a multiplicative hash, linear
 * probing, at most half full): an RM_CONTROL, RM_ALLOC or UVM ioctl costs one
 * probe, one cache line, and a control without pointers (most of them) finds
 * an empty slot at once. */
struct row_index {
	const uint8_t *rows;
	uint32_t size;  /* bytes of a row                */
	uint32_t shift; /* 32 - log2(slots)              */
	uint32_t mask;  /* slots - 1                     */
	uint32_t *slot; /* row + 1, 0 for an empty slot  */
};
static struct row_index uvm_rows, ctrl_rows, class_rows;

#define ROW_HASH 0x9e3779b1u /* 2^32 / golden ratio */

static uint32_t row_key(const struct row_index *x, uint32_t row)
{
	uint32_t k;
	memcpy(&k, x->rows + (size_t)row * x->size, sizeof(k));
	return k;
}

static int index_rows(struct row_index *x, const void *rows, uint32_t n, size_t size)
{
	uint32_t bits = 4, i;
	long mem;

	while ((1ull << bits) < 2ull * n)
		bits++;
	if (bits > 28)
		return -1;
	mem = syscall(SYS_mmap, NULL, sizeof(uint32_t) << bits, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		      -1, 0);
	if (mem < 0 && mem > -4096)
		return -1;
	x->rows = rows;
	x->size = (uint32_t)size;
	x->shift = 32 - bits;
	x->mask = (1u << bits) - 1;
	x->slot = (uint32_t *)mem;
	for (i = 0; i < n; i++) {
		uint32_t at = (row_key(x, i) * ROW_HASH) >> x->shift;
		while (x->slot[at])
			at = (at + 1) & x->mask;
		x->slot[at] = i + 1;
	}
	return 0;
}

int ctab_index(void)
{
	const struct rmt_ctab_header *h = shim_proc.ctab;
	return index_rows(&uvm_rows, shim_proc.uvm, h->n_uvm, sizeof(*shim_proc.uvm)) ||
	       index_rows(&ctrl_rows, shim_proc.ctrl, h->n_ctrl, sizeof(*shim_proc.ctrl)) ||
	       index_rows(&class_rows, shim_proc.cls, h->n_class, sizeof(*shim_proc.cls)) ? -1 : 0;
}

/* The row whose key is key; NULL if none. */
SHIM_HOT static const void *find_row(const struct row_index *x, uint32_t key)
{
	uint32_t at, row;

	for (at = (key * ROW_HASH) >> x->shift; (row = x->slot[at]) != 0; at = (at + 1) & x->mask)
		if (row_key(x, row - 1) == key)
			return x->rows + (size_t)(row - 1) * x->size;
	return NULL;
}

static const struct rmt_ctab_ctrl *find_ctrl(uint32_t cmd)
{
	return find_row(&ctrl_rows, cmd);
}

static const struct rmt_ctab_uvm *find_uvm(uint32_t nr)
{
	return find_row(&uvm_rows, nr);
}

/* Bytes of alloc params RM reads for class cls (it ignores paramsSize); 0 when the table lacks it. */
static uint32_t class_params_size(uint32_t cls)
{
	const struct rmt_ctab_class *c = find_row(&class_rows, cls);
	return c ? c->size : 0;
}

/* The arrays that params (captured, in the ring) point to. */
SHIM_HOT static void take_nested(struct shim_rec *r, struct shim_plan *p, const struct shim_view *params, uint32_t first,
			uint32_t n)
{
	uint32_t i;

	if (first > shim_proc.ctab->n_ptr || n > shim_proc.ctab->n_ptr - first)
		return;
	for (i = 0; i < n; i++) {
		const struct rmt_ctab_ptr *f = &shim_proc.ptr[first + i];
		struct shim_view nested;
		uint64_t addr, count;

		if ((uint64_t)f->offset + 8 > params->len)
			continue;
		addr = view_load(params, f->offset, 8);
		if (f->fixed_count) {
			count = f->fixed_count;
		} else {
			if (f->count_size == 0 || f->count_size > 8 || (uint64_t)f->count_offset + f->count_size > params->len)
				continue;
			count = view_load(params, f->count_offset, f->count_size);
		}
		if (addr == 0 || count == 0 || f->elem_size == 0)
			continue;
		if (count > UINT32_MAX / f->elem_size)
			count = UINT32_MAX / f->elem_size; /* rec_add_user caps it further */
		take(r, p, RMT_BUF_NESTED, 1, i, addr, count * f->elem_size, &nested);
	}
}

/* The buffers an RM escape's argument (captured, in the ring) points to. */
SHIM_HOT static void take_rm(struct shim_rec *r, struct shim_plan *p, uint32_t nr, const struct shim_view *arg, int inner)
{
	size_t i;

	for (i = 0; i < sizeof(esc_rules) / sizeof(esc_rules[0]); i++) {
		const struct esc_rule *e = &esc_rules[i];
		uint64_t addr, size;
		struct shim_view got;

		if (e->nr != nr || e->arg_size != arg->len)
			continue;
		addr = view_load(arg, e->ptr_off, 8);
		if (e->size_off == SIZE_RIGHTS)
			size = shim_proc.rights_size;
		else if (e->size_off & SIZE_CLASS) {
			size = class_params_size((uint32_t)view_load(arg, NVOS21_CLASS, 4));
			if (size == 0) /* a class the profile lacks: trust the argument */
				size = view_load(arg, e->size_off & ~SIZE_CLASS, 4);
		} else
			size = view_load(arg, e->size_off, 4);
		/* NULL with no size is "none"; so is a NULL pRightsRequested, whose size is implied, and
		 * NULL alloc params, whose size the class implies (RM allows NULL where they are optional).
		 * NULL with a size the caller gave is a bad pointer the driver will refuse: UNREADABLE. */
		if (addr == 0 && (size == 0 || e->size_off == SIZE_RIGHTS || (e->size_off & SIZE_CLASS)))
			continue;
		if (take(r, p, e->role, e->after, 0, addr, size, &got) != 0)
			continue;
		if (e->role == RMT_BUF_PARAMS && !(view_load(arg, NVOS54_FLAGS, 4) & NVOS54_FLAGS_FINN_SERIALIZED)) {
			const struct rmt_ctab_ctrl *c = find_ctrl((uint32_t)view_load(arg, NVOS54_CMD, 4));
			if (c)
				take_nested(r, p, &got, c->first_ptr, c->n_ptr);
		}
		if (e->role == RMT_BUF_XFER && !inner)
			take_rm(r, p, (uint32_t)view_load(arg, XFER_CMD, 4), &got, 1);
	}
}

SHIM_HOT void capture_ioctl_enter(struct shim_rec *r, struct shim_plan *p, unsigned kind, unsigned long req, uint64_t arg)
{
	struct shim_view data;

	p->n = 0;
	p->whole = 1;
	p->exit_bytes = 0;
	if (kind_is_uvm(kind)) {
		const struct rmt_ctab_uvm *u = find_uvm((uint32_t)req);
		if (!u)
			return; /* a command this driver profile does not know: op alone */
		if (take(r, p, RMT_BUF_ARG, 1, 0, arg, u->size, &data) == 0 && u->n_ptr)
			take_nested(r, p, &data, u->first_ptr, u->n_ptr);
		return;
	}
	if (take(r, p, RMT_BUF_ARG, 1, 0, arg, _IOC_SIZE(req), &data) == 0 && data.len == _IOC_SIZE(req))
		take_rm(r, p, (uint32_t)_IOC_NR(req), &data, 0);
}

/* The exit's buffers when each was read whole at enter: the room for the whole record checked once,
 * then per buffer one copy and its header, nothing else tested.  Returns the plan item at which the
 * general way (capture_ioctl_exit) must go on: p->n when all are in, or the one whose copy faulted
 * (it is left out of the record, so the general way reads it again and says it is unreadable). */
SHIM_HOT static int exit_whole(struct shim_rec *r, const struct shim_plan *p)
{
	struct shim_thread *t = r->t;
	uint32_t total = r->size + p->exit_bytes;
	uint16_t copied = 0;
	int i;

	if (!p->whole || r->dropped || total > shim_proc.max_record || t->head + total - t->tail_seen > shim_proc.ring_size ||
	    t->faults != FAULTS_DELIVERED || !__atomic_load_n(&shim_guard_on, __ATOMIC_RELAXED))
		return 0;
	for (i = 0; i < p->n; i++) {
		uint8_t *dst = r->base + r->size + sizeof(struct rmt_buffer);
		uint32_t len = (uint32_t)p->item[i].len;

		if (!p->item[i].after)
			continue;
		rec_pad(dst, len);
		if (unlikely(shim_copy(dst, (const void *)(uintptr_t)p->item[i].addr, len) != 0))
			break;
		rec_close(r, p->item[i].role, RMT_WHEN_AFTER, 0, len, p->item[i].addr, len, p->item[i].slot);
		copied++;
	}
	r->reads[SHIM_READ_COPY] += copied;
	return i;
}

SHIM_HOT void capture_ioctl_exit(struct shim_rec *r, const struct shim_plan *p)
{
	struct shim_view ignored;
	int i;
	for (i = exit_whole(r, p); i < p->n; i++)
		if (p->item[i].after)
			rec_add_user(r, p->item[i].role, RMT_WHEN_AFTER, p->item[i].slot, p->item[i].addr,
				     p->item[i].len, &ignored);
}
