/*
 * The buffer walk of a batch of records, for rmtrace.columns.scan: every
 * record's buffers in turn, the bytes they hold, and where its first ARG
 * buffer before the call, after it, and its first PATH buffer are; then the
 * argument members the call table keeps, read from those buffers.  numpy
 * could only walk the buffers one index at a time over all records (a gather
 * and a dozen passes per step); here it is one pass over the records.  The layout
 * is rmtrace_record.h's; rmtrace.columns.scan checks at import that the
 * construct mirror agrees with the sizes and offsets this file reports.
 *
 * Plain C, no Python: built by kmod_shim/shim_build.py beside the shim.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "rmtrace_record.h"

#define EXPORT __attribute__((visibility("default")))

enum { FOUND_B, FOUND_A, FOUND_PATH, FOUND_KINDS };

/* What rmt_scan_walk found wrong: the record's index, and which check. */
enum { WALK_OK = 0, WALK_HEADER_PAST_END = 1, WALK_DATA_PAST_END = 2 };

#define FIELD(f) offsetof(struct rmt_buffer, f), sizeof(((struct rmt_buffer *)0)->f)

/*
 * What this file takes from rmtrace_record.h, for rmtrace.columns.scan to
 * check at import against the construct mirror: sizeof(struct rmt_buffer),
 * offset and size of each field read here, and the
 * role / when / alignment constants.
 */
EXPORT const int64_t rmt_scan_buffer_layout[] = {
	sizeof(struct rmt_buffer),
	FIELD(role),
	FIELD(when),
	FIELD(flags),
	FIELD(len),
	RMT_BUF_ARG,
	RMT_BUF_PATH,
	RMT_WHEN_BEFORE,
	RMT_WHEN_AFTER,
	RMT_ALIGN,
};
EXPORT const int64_t rmt_scan_buffer_layout_len = sizeof rmt_scan_buffer_layout / sizeof rmt_scan_buffer_layout[0];

/*
 * Records i < n start their buffers at data + pos[i], end at data + limit[i]
 * (both within data's size) and have nbufs[i] buffers.  Fills total[i] (the
 * bytes of its buffers) and, per kind k (FOUND_*), start[k*n+i] (-1: none),
 * length[k*n+i] and flags[k*n+i] of its first such buffer.  Returns WALK_OK,
 * or the failed check that comes first in the order of a walk one buffer
 * index at a time over all records (lowest buffer index, a header check
 * before a data check, then lowest record: the order the vectorised walk this
 * replaced reported them in, so a damaged batch names the same record), with
 * the record's index in *bad.
 */
EXPORT int rmt_scan_walk(const uint8_t *data, int64_t n, const int64_t *pos, const int64_t *limit,
                         const int64_t *nbufs, int64_t *total, int64_t *start, int64_t *length,
                         int64_t *flags, int64_t *bad)
{
	int code = WALK_OK;
	int64_t bad_rank = INT64_MAX; /* 2 * buffer index, + 1 for a data check */
	for (int64_t k = 0; k < FOUND_KINDS * n; k++) {
		start[k] = -1;
		length[k] = 0;
		flags[k] = 0;
	}
	for (int64_t i = 0; i < n; i++) {
		int64_t p = pos[i], end = limit[i], sum = 0;
		for (int64_t step = 0; step < nbufs[i]; step++) {
			if (2 * step > bad_rank)
				break; /* a record before this one failed at an earlier check */
			if (p + (int64_t)sizeof(struct rmt_buffer) > end) {
				if (2 * step < bad_rank) { bad_rank = 2 * step; *bad = i; code = WALK_HEADER_PAST_END; }
				break;
			}
			struct rmt_buffer b;
			memcpy(&b, data + p, sizeof b);
			int64_t at = p + (int64_t)sizeof b, len = b.len;
			if (at + len > end) {
				if (2 * step + 1 < bad_rank) { bad_rank = 2 * step + 1; *bad = i; code = WALK_DATA_PAST_END; }
				break;
			}
			sum += len;
			int kind = b.role == RMT_BUF_PATH ? FOUND_PATH
			         : b.role != RMT_BUF_ARG ? -1
			         : b.when == RMT_WHEN_BEFORE ? FOUND_B
			         : b.when == RMT_WHEN_AFTER ? FOUND_A : -1;
			if (kind >= 0 && start[kind * n + i] < 0) {
				start[kind * n + i] = at;
				length[kind * n + i] = len;
				flags[kind * n + i] = b.flags;
			}
			p = at + (int64_t)RMT_ALIGN_UP((uint64_t)len);
		}
		total[i] = sum;
	}
	return code;
}

/*
 * Rows of width bytes at data + pos[i], i < n, copied to out back to back (the
 * record headers: half the CPU of numpy's gather of rows).  Returns -1, or the first
 * i whose row would run past the data's size bytes (nothing copied from it on).
 */
EXPORT int64_t rmt_scan_rows(const uint8_t *data, int64_t size, int64_t n, const int64_t *pos, int64_t width,
                             uint8_t *out)
{
	for (int64_t i = 0; i < n; i++) {
		if (pos[i] < 0 || pos[i] + width > size)
			return i;
		memcpy(out + i * width, data + pos[i], (size_t)width);
	}
	return -1;
}

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "rmt_scan_members reads the records' little-endian members as the host's numbers"
#endif

/* The w-byte number at p (w: 1 to 8), unsigned.  Each case is a copy of a size the compiler knows, one load;
 * a copy of w bytes would be a call to memcpy per member. */
static inline uint64_t read_le(const uint8_t *p, int64_t w)
{
	uint8_t u8;
	uint16_t u16;
	uint32_t u32;
	uint64_t u64 = 0;
	switch (w) {
	case 1: memcpy(&u8, p, 1); return u8;
	case 2: memcpy(&u16, p, 2); return u16;
	case 4: memcpy(&u32, p, 4); return u32;
	case 8: memcpy(&u64, p, 8); return u64;
	default: memcpy(&u64, p, (size_t)w); return u64;
	}
}

/*
 * The argument members the call table keeps, of a batch's records: record
 * i < n has its argument's data at data + start[i] and decodes it as layout
 * ids[i] (start or id < 0: nothing to read).  Layout l's member slot k < slots
 * lies offset[l * slots + k] bytes into it, width[l * slots + k] bytes long
 * (0: the layout has no such member), signed where is_signed[l * slots + k];
 * rmtrace.columns.argspec works these out from the driver profile's layouts,
 * so nothing here knows a struct.  Slot 0 goes to key[i], slot 1 to
 * status[i], slot 2 + j to handles[i * (slots - 2) + j] (a handle is 32 bits:
 * the low ones of a wider member); 0 where nothing is read.  Returns -1, or
 * the index of the first record a member of which would lie past the data's
 * size bytes (the layout a record's argument is given fits in it, so that is
 * a caller's bug).
 */
EXPORT int64_t rmt_scan_members(const uint8_t *data, int64_t size, int64_t n, const int64_t *start,
                                const int32_t *ids, int64_t slots, const int64_t *offset, const int64_t *width,
                                const uint8_t *is_signed, int64_t *key, int64_t *status, uint32_t *handles)
{
	const int64_t nh = slots - 2;
	for (int64_t i = 0; i < n; i++) {
		uint32_t *h = handles + i * nh;
		key[i] = status[i] = 0;
		for (int64_t j = 0; j < nh; j++)
			h[j] = 0;
		if (start[i] < 0 || ids[i] < 0)
			continue;
		const int64_t row = (int64_t)ids[i] * slots;
		for (int64_t k = 0; k < slots; k++) {
			int64_t w = width[row + k], at = start[i] + offset[row + k];
			if (!w)
				continue;
			if (w > 8 || at < 0 || at + w > size)
				return i;
			uint64_t v = read_le(data + at, w);
			if (is_signed[row + k] && w < 8) {
				uint64_t sign = (uint64_t)1 << (8 * w - 1);
				v = (v ^ sign) - sign;
			}
			if (k == 0)
				key[i] = (int64_t)v;
			else if (k == 1)
				status[i] = (int64_t)v;
			else
				h[k - 2] = (uint32_t)v;
		}
	}
	return -1;
}
