/*
 * shim_floor.c: the floors of bench/h200_shim_ab.sh (FLOORS=...), bench-only builds of the capture shim that
 * are never installed.  h200_common.sh's add_floors compiles this file first with the shim's own sources and
 * -DRMTRACE_BENCH_FLOOR=N, linked with --allow-multiple-definition: the ioctl hook exported is then this
 * file's, and the shim's sources stay free of bench-only code.
 *
 * With 1, every ioctl is forwarded and nothing else (the interposer alone); with 2, a traced ioctl does what
 * any recorder of its times must, and no more: the thread's state checked, a call id, the time before the
 * call and after it (shim_now), no record; with 3, that and its two records without their buffers (the op,
 * fd, times and result, as the shim builds and publishes them).  What the shim adds above 2 is its records,
 * above 3 its buffers.  Between 2 and 3, what a record without buffers spends its time on: 4 is 2 with each
 * record begun (the op, rec_init, rec_fast's room tests) and not written; 5 is 4 with the ring control's
 * stores of rec_emit (the copies counter, ring_stamp's announcement, head stored again unmoved, writing
 * cleared) but no header in the ring, so the recorder sees no record.  3 above 5 is the header's stores and
 * head moving on.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>

#include "shim.h"

#if !defined(RMTRACE_BENCH_FLOOR) || RMTRACE_BENCH_FLOOR < 1 || RMTRACE_BENCH_FLOOR > 5
#error "build with -DRMTRACE_BENCH_FLOOR=1..5 (bench/h200_common.sh, add_floors)"
#endif

#if RMTRACE_BENCH_FLOOR >= 2
static volatile uint64_t floor_sink;

/* One of a traced ioctl's two records, as far as the floor goes. */
SHIM_HOT static inline void floor_record(struct shim_thread *t, uint16_t source, uint8_t phase, uint32_t op, int fd,
					 uint64_t call_id, int ret, int err)
{
#if RMTRACE_BENCH_FLOOR == 2
	(void)source, (void)phase, (void)op, (void)fd, (void)ret, (void)err;
	floor_sink = call_id ^ shim_now(t);
#else
	struct shim_rec r;

	rec_init(&r, t, source, phase, op, fd, call_id);
	rec_fast(&r);
#if RMTRACE_BENCH_FLOOR == 3
	r.ret = ret;
	r.err = ret < 0 ? err : 0;
	rec_emit(&r);
#elif RMTRACE_BENCH_FLOOR == 4
	(void)ret, (void)err;
	floor_sink = call_id ^ (uintptr_t)r.base ^ r.fast_end ^ shim_now(t);
#else
	(void)ret, (void)err;
	ring_add(&t->ctl->read_copy, r.reads[SHIM_READ_COPY]);
	r.time_ns = ring_stamp(t);
	__atomic_store_n(&t->ctl->head, t->head, __ATOMIC_RELEASE);
	t->last_ns = r.time_ns;
	__atomic_store_n(&t->ctl->writing, 0, __ATOMIC_RELAXED);
	floor_sink = call_id ^ (uintptr_t)r.base ^ r.fast_end;
#endif
#endif
}

SHIM_HOT static int floor_ioctl(int fd, unsigned long req, void *arg, unsigned kind)
{
	struct shim_thread *t;
	int *errp = &errno, saved = *errp, ret, err;
	uint16_t source = kind_is_uvm(kind) ? RMT_SRC_UVM : RMT_SRC_RM;
	uint32_t op = ioctl_op(kind, req);
	uint64_t call_id = 0;

	if ((t = shim_enter()) != NULL) {
		call_id = shim_next_call_id();
		floor_record(t, source, RMT_PH_ENTER, op, fd, call_id, 0, 0);
		shim_leave(t);
	}
	*errp = saved;
	ret = shim_real.ioctl(fd, req, arg);
	err = *errp;
	if (t && (t = shim_reenter(&shim_self)) != NULL) {
		floor_record(t, source, RMT_PH_EXIT, op, fd, call_id, ret, err);
		shim_leave(t);
	}
	*errp = err;
	return ret;
}
#endif

/* The shim's own hook (interposer.c) with the traced way replaced by the floor's. */
SHIM_HOT SHIM_EXPORT int ioctl(int fd, unsigned long req, ...)
{
	va_list ap;
	void *arg;
	unsigned kind;

	va_start(ap, req);
	arg = va_arg(ap, void *);
	va_end(ap);
#if RMTRACE_BENCH_FLOOR == 1
	(void)kind;
	return RESOLVED(ioctl)(fd, req, arg);
#else
	kind = fd_kind(fd);
	if (likely(!kind_is_ioctl_traced(kind)))
		return RESOLVED(ioctl)(fd, req, arg);
	return floor_ioctl(fd, req, arg, kind);
#endif
}
