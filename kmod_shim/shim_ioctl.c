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
 * are captured too, as role.  The rules of one escape follow each other
 * (esc_first finds the first). */
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
/* Escape number -> 1 + the index of its first rule (the rules of one escape are together), 0: none. */
static uint8_t esc_first[256];

/* Whether every field of an escape's argument that take_rm reads lies inside the argument the rule matches. */
static int esc_rule_sound(const struct esc_rule *e)
{
#define FURTHER(end, off, n) ((end) > (off) + (n) ? (end) : (off) + (n))
	uint32_t end = e->ptr_off + 8u;

	if (e->size_off != SIZE_RIGHTS)
		end = FURTHER(end, (e->size_off & ~SIZE_CLASS), 4u);
	if (e->size_off & SIZE_CLASS)
		end = FURTHER(end, NVOS21_CLASS, 4u);
	if (e->role == RMT_BUF_PARAMS)
		end = FURTHER(FURTHER(end, NVOS54_CMD, 4u), NVOS54_FLAGS, 4u);
	if (e->role == RMT_BUF_XFER)
		end = FURTHER(end, XFER_CMD, 4u);
#undef FURTHER
	return end <= e->arg_size;
}

/* n (<= 8) little-endian bytes at off of an escape's argument whose length a rule matched: no bounds
 * to test, esc_rule_sound having found every such field inside it when the process started. */
static inline uint64_t arg_load(const struct shim_view *arg, uint32_t off, unsigned n)
{
	uint64_t value = 0;
	memcpy(&value, arg->p + off, n);
	return value;
}

/* Read one buffer before the call and, where the driver may write it back (after), put the exit's
 * header for it in the plan; 0 when its bytes are in *v.  Inline at each of its four callers: a call
 * costs ~30 instructions a buffer in saved registers and arguments (callgrind, per traced ioctl:
 * stack 832 -> 742, nested 1073 -> 941). */
static inline __attribute__((always_inline)) int take(struct shim_rec *r, struct shim_plan *p, uint16_t role, uint8_t after, uint32_t slot,
		uint64_t addr, uint64_t len, struct shim_view *v)
{
	int got = rec_add_user(r, role, RMT_WHEN_BEFORE, slot, addr, len, v);

	if (after && p->n < SHIM_MAX_PLAN) {
		/* Built from the values at hand, not copied from the header just written before the bytes:
		 * a wide load of narrower stores still in flight waits for them (no store forwarding). */
		p->item[p->n++] = (struct rmt_buffer){ .role = role, .when = RMT_WHEN_AFTER, .len = v->len, .addr = addr,
							.orig_len = len > UINT32_MAX ? UINT32_MAX : (uint32_t)len,
							.slot = slot };
		if (got == 0 && v->len == len) /* whole: the exit takes as many bytes, unless it faults */
			p->exit_bytes += (uint32_t)sizeof(struct rmt_buffer) + RMT_ALIGN_UP(v->len);
		else
			p->whole = 0;
	}
	return got;
}

/* ------------------------------------------------------------ table lookups
 *
 * The capture table's arrays are sorted by their leading u32 key (for the
 * recorder's sake); the shim compiles them once per process image, from the
 * mapped table, into hash tables whose slots hold the answer itself (a
 * multiplicative hash, linear probing, at most half full), all in one
 * mapping: an RM_CONTROL, RM_ALLOC or UVM ioctl reads one 16-byte slot, and a
 * control without pointers (most of them) finds an empty slot at once.  The
 * pointers of a control or UVM command become nest rules, checked once here,
 * so that an ioctl's only test of one is whether its params hold it. */
struct ctab_slot {
	uint32_t key;
	uint32_t size;  /* UVM: its params' bytes; class: its alloc params' bytes */
	uint32_t first; /* its nest rules: rules[first, first + n)                */
	uint16_t n;
	uint16_t used;  /* 0: an empty slot                                      */
};

/* One user pointer of a params struct, from a struct rmt_ctab_ptr whose sizes were found sound. */
struct nest_rule {
	uint32_t need;        /* params bytes it reads: the pointer's and the count's      */
	uint32_t ptr_off;
	uint32_t count_end;   /* the count is the count_size bytes that end here, read as  */
	uint32_t shift;       /*   the 8 bytes that do, >> (64 - 8 * count_size)           */
	uint32_t fixed_count; /* nonzero: the count                                        */
	uint32_t elem_size;
	uint32_t max_count;   /* UINT32_MAX / elem_size: the most elements a length can say */
	uint32_t slot;        /* the pointer's index among the control's                    */
};

struct row_index {
	struct ctab_slot *slot;
	uint32_t shift; /* 32 - log2(slots) */
	uint32_t mask;  /* slots - 1        */
};
static struct row_index uvm_rows, ctrl_rows, class_rows;
static const struct nest_rule *rules;

#define ROW_HASH 0x9e3779b1u /* 2^32 / golden ratio */

/* log2 of the slots for n keys, at most half full. */
static uint32_t slot_bits(uint32_t n)
{
	uint32_t bits = 4;
	while ((1ull << bits) < 2ull * n)
		bits++;
	return bits;
}

static void index_init(struct row_index *x, struct ctab_slot *mem, uint32_t bits)
{
	x->slot = mem;
	x->shift = 32 - bits;
	x->mask = (1u << bits) - 1;
}

static struct ctab_slot *index_add(struct row_index *x, uint32_t key)
{
	uint32_t at = (key * ROW_HASH) >> x->shift;
	while (x->slot[at].used && x->slot[at].key != key)
		at = (at + 1) & x->mask;
	x->slot[at].key = key; /* a key twice (a broken table) keeps its last row */
	x->slot[at].used = 1;
	return &x->slot[at];
}

/* The slot of key; NULL if none. */
SHIM_HOT static const struct ctab_slot *find_row(const struct row_index *x, uint32_t key)
{
	const struct ctab_slot *s;
	uint32_t at;

	for (at = (key * ROW_HASH) >> x->shift; (s = &x->slot[at])->used; at = (at + 1) & x->mask)
		if (s->key == key)
			return s;
	return NULL;
}

/* The sound rules of pointers [first, first + n) of the table into out; how many. */
static uint32_t compile_rules(struct nest_rule *out, uint32_t first, uint32_t n)
{
	const struct rmt_ctab_header *h = shim_proc.ctab;
	uint32_t i, k = 0;

	if (first > h->n_ptr || n > h->n_ptr - first)
		return 0;
	for (i = 0; i < n && i < SHIM_MAX_BUFS; i++) { /* a record holds no more buffers */
		const struct rmt_ctab_ptr *f = &shim_proc.ptr[first + i];
		uint64_t count_end = (uint64_t)f->count_offset + f->count_size, ptr_end = (uint64_t)f->offset + 8;

		if (f->elem_size == 0 || (!f->fixed_count && (f->count_size == 0 || f->count_size > 8)))
			continue; /* it can never point to anything */
		if (f->fixed_count)
			count_end = 0;
		if (ptr_end > UINT32_MAX || count_end > UINT32_MAX)
			continue; /* beyond any params */
		out[k++] = (struct nest_rule){
			.need = (uint32_t)(ptr_end > count_end ? ptr_end : count_end), .ptr_off = f->offset,
			.count_end = (uint32_t)count_end, .shift = f->fixed_count ? 0 : 64 - 8 * f->count_size,
			.fixed_count = f->fixed_count, .elem_size = f->elem_size, .max_count = UINT32_MAX / f->elem_size,
			.slot = i,
		};
	}
	return k;
}

int ctab_index(void)
{
	const struct rmt_ctab_header *h = shim_proc.ctab;
	uint32_t ubits = slot_bits(h->n_uvm), cbits = slot_bits(h->n_ctrl), kbits = slot_bits(h->n_class), i, k = 0;
	size_t slots, bytes;
	struct nest_rule *out;
	long mem;

	if (ubits > 26 || cbits > 26 || kbits > 26 || h->n_ptr > (1u << 26))
		return -1;
	slots = (1ul << ubits) + (1ul << cbits) + (1ul << kbits);
	bytes = slots * sizeof(struct ctab_slot) + (size_t)h->n_ptr * sizeof(struct nest_rule);
	mem = syscall(SYS_mmap, NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (mem < 0 && mem > -4096)
		return -1;
	index_init(&ctrl_rows, (struct ctab_slot *)mem, cbits);
	index_init(&uvm_rows, ctrl_rows.slot + (1ul << cbits), ubits);
	index_init(&class_rows, uvm_rows.slot + (1ul << ubits), kbits);
	out = (struct nest_rule *)(class_rows.slot + (1ul << kbits));
	rules = out;
	for (i = 0; i < h->n_ctrl; i++) {
		const struct rmt_ctab_ctrl *c = &shim_proc.ctrl[i];
		uint32_t n = compile_rules(out + k, c->first_ptr, c->n_ptr);
		if (n) { /* a control none of whose pointers can be followed is one without */
			struct ctab_slot *s = index_add(&ctrl_rows, c->cmd);
			s->first = k;
			s->n = (uint16_t)n;
			k += n;
		}
	}
	for (i = 0; i < h->n_uvm; i++) {
		const struct rmt_ctab_uvm *u = &shim_proc.uvm[i];
		struct ctab_slot *s = index_add(&uvm_rows, u->nr);
		s->size = u->size;
		s->first = k;
		s->n = (uint16_t)compile_rules(out + k, u->first_ptr, u->n_ptr);
		k += s->n;
	}
	for (i = 0; i < h->n_class; i++)
		if (shim_proc.cls[i].size) /* a class without a size is one the table lacks */
			index_add(&class_rows, shim_proc.cls[i].cls)->size = shim_proc.cls[i].size;
	/* The escapes' rules by escape number, for take_rm. */
	for (i = sizeof(esc_rules) / sizeof(esc_rules[0]); i-- > 0;) {
		if (esc_rules[i].nr > 0xff || !esc_rule_sound(&esc_rules[i]))
			return -1; /* a rule this file got wrong: capture nothing rather than read past an argument */
		esc_first[esc_rules[i].nr] = (uint8_t)(i + 1);
	}
	return 0;
}

/* Bytes of alloc params RM reads for class cls (it ignores paramsSize); 0 when the table lacks it. */
static uint32_t class_params_size(uint32_t cls)
{
	const struct ctab_slot *c = find_row(&class_rows, cls);
	return c ? c->size : 0;
}

/* The 8 bytes of a captured buffer that end at end (>= 1): those before its data are its own header's. */
static inline uint64_t load_ending(const struct shim_view *v, uint32_t end)
{
	uint64_t value;
	memcpy(&value, v->p + end - 8, sizeof(value)); /* little-endian host */
	return value;
}

/* The arrays that params (captured, in the ring) point to, by the n rules at first. */
SHIM_HOT static void take_nested(struct shim_rec *r, struct shim_plan *p, const struct shim_view *params, uint32_t first,
				 uint32_t n)
{
	const struct nest_rule *f = rules + first, *end = f + n;

	for (; f < end; f++) {
		struct shim_view nested;
		uint64_t addr, count;

		if (f->need > params->len)
			continue;
		addr = load_ending(params, f->ptr_off + 8);
		count = f->fixed_count ? f->fixed_count : load_ending(params, f->count_end) >> f->shift;
		if (addr == 0 || count == 0)
			continue;
		if (count > f->max_count)
			count = f->max_count; /* rec_add_user caps it further */
		take(r, p, RMT_BUF_NESTED, 1, f->slot, addr, count * f->elem_size, &nested);
	}
}

static void take_xfer(struct shim_rec *r, struct shim_plan *p, uint32_t nr, const struct shim_view *arg);

/* The buffers an RM escape's argument (captured, in the ring) points to.  Inline in capture_ioctl_enter
 * (a call costs ~20 instructions in saved registers and arguments, once per traced ioctl); the inner
 * escape of an IOCTL_XFER_CMD goes out of line (take_xfer), so that nothing here recurses. */
static inline __attribute__((always_inline)) void take_rm(struct shim_rec *r, struct shim_plan *p, uint32_t nr,
							  const struct shim_view *arg, int inner)
{
	const struct esc_rule *e, *end = esc_rules + sizeof(esc_rules) / sizeof(esc_rules[0]);

	if (nr > 0xff || !esc_first[nr])
		return; /* most escapes: an argument that points nowhere */
	for (e = esc_rules + esc_first[nr] - 1; e < end && e->nr == nr; e++) {
		uint64_t addr, size;
		struct shim_view got;

		if (e->arg_size != arg->len)
			continue;
		addr = arg_load(arg, e->ptr_off, 8);
		if (e->size_off == SIZE_RIGHTS)
			size = shim_proc.rights_size;
		else if (e->size_off & SIZE_CLASS) {
			size = class_params_size((uint32_t)arg_load(arg, NVOS21_CLASS, 4));
			if (size == 0) /* a class the profile lacks: trust the argument */
				size = arg_load(arg, e->size_off & ~SIZE_CLASS, 4);
		} else
			size = arg_load(arg, e->size_off, 4);
		/* NULL with no size is "none"; so is a NULL pRightsRequested, whose size is implied, and
		 * NULL alloc params, whose size the class implies (RM allows NULL where they are optional).
		 * NULL with a size the caller gave is a bad pointer the driver will refuse: UNREADABLE. */
		if (addr == 0 && (size == 0 || e->size_off == SIZE_RIGHTS || (e->size_off & SIZE_CLASS)))
			continue;
		if (take(r, p, e->role, e->after, 0, addr, size, &got) != 0)
			continue;
		if (e->role == RMT_BUF_PARAMS && !(arg_load(arg, NVOS54_FLAGS, 4) & NVOS54_FLAGS_FINN_SERIALIZED)) {
			const struct ctab_slot *c = find_row(&ctrl_rows, (uint32_t)arg_load(arg, NVOS54_CMD, 4));
			if (c)
				take_nested(r, p, &got, c->first, c->n);
		}
		if (e->role == RMT_BUF_XFER && !inner)
			take_xfer(r, p, (uint32_t)arg_load(arg, XFER_CMD, 4), &got);
	}
}

/* The inner escape nr of an IOCTL_XFER_CMD, whose argument is arg (the XFER buffer). */
SHIM_HOT static __attribute__((noinline)) void take_xfer(struct shim_rec *r, struct shim_plan *p, uint32_t nr,
							 const struct shim_view *arg)
{
	take_rm(r, p, nr, arg, 1);
}

SHIM_HOT void capture_ioctl_enter(struct shim_thread *t, struct shim_plan *p, uint16_t source, uint32_t op, int fd,
				  uint64_t call_id, unsigned kind, unsigned long req, uint64_t arg)
{
	struct shim_view data;
	struct shim_rec rec, *r = &rec;

	/* Built and published here, from rec_init to rec_emit: the record's first state is known where its
	 * first buffer is added (no buffers yet, the header's size), so those tests fold away. */
	rec_init(r, t, source, RMT_PH_ENTER, op, fd, call_id);
	p->n = 0;
	p->whole = 1;
	p->exit_bytes = 0;
	rec_fast(r);
	if (kind_is_uvm(kind)) {
		const struct ctab_slot *u = find_row(&uvm_rows, (uint32_t)req);
		if (u && take(r, p, RMT_BUF_ARG, 1, 0, arg, u->size, &data) == 0 && u->n)
			take_nested(r, p, &data, u->first, u->n);
		/* else a command this driver profile does not know: op alone */
	} else if (take(r, p, RMT_BUF_ARG, 1, 0, arg, _IOC_SIZE(req), &data) == 0 && data.len == _IOC_SIZE(req))
		take_rm(r, p, (uint32_t)_IOC_NR(req), &data, 0);
	rec_emit(r); /* in lossy mode a dropped enter still gets its exit tried: every record is written or counted */
}

/* The general way of the exit (capture_ioctl_exit_whole could not): each buffer as its enter found it,
 * read again one by one, with room and faults handled per buffer. */
SHIM_HOT void capture_ioctl_exit(struct shim_rec *r, const struct shim_plan *p)
{
	struct shim_view ignored;
	uint32_t i;

	rec_fast(r);
	for (i = 0; i < p->n; i++)
		rec_add_user(r, p->item[i].role, RMT_WHEN_AFTER, p->item[i].slot, p->item[i].addr, p->item[i].orig_len,
			     &ignored);
}
