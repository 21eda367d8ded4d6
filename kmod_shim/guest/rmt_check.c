/*
 * rmt_check: the in-guest halves of tests/kernel (a static program; each
 * subcommand prints one result line the host test reads: "NAME ... PASS"
 * or "NAME ... FAIL: why").
 *
 *   rmt_check standin          drives the stand-in NVIDIA module: an RM_CONTROL
 *                              (params out and back through a GSP_RM_CONTROL RPC),
 *                              UVM_INITIALIZE, UVM_REGISTER_GPU, then a child whose
 *                              UVM_UNREGISTER_GPU blocks forever (stand-in wedge=1).
 *   rmt_check emit N IRQ [late] drains /dev/rmtrace while rmtrace_emitload emits N
 *                              records per CPU from a kthread and IRQ more from an
 *                              hrtimer; checks every record arrived or was counted
 *                              as dropped, exactly.  late: read only afterwards.
 *   rmt_check sources N        RMT_IOC_SET_SOURCES: a mask with unknown bits refused,
 *                              MARK off (emitload's N records per CPU neither
 *                              recorded nor dropped), then all on (every one read).
 *   rmt_check fuzz N SEED      N random and malformed writes to /dev/rmtrace-replay,
 *                              before and after a HELLO: each refused with EINVAL
 *                              (and nothing to read after it) or taken; the session
 *                              still answers afterwards.
 *   rmt_check addprobe FILE    RMT_IOC_ADD_PROBE with each struct rmt_probe_spec of FILE.
 *   rmt_check readers N [hold] N processes read /dev/rmtrace to its end (blocking,
 *                              poll-driven, non-blocking), each writing what it saw
 *                              to /tmp/rmt_reader.I (records, the STOP record, the
 *                              end); hold: keep the file open after the end.
 *                              Prints their pids (the detach test).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../rmtrace_kmod.h"
#include "../rmtrace_record.h"
#include "../rmtrace_replay.h"

static void fail(const char *what, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));

#include <stdarg.h>

static void fail(const char *what, const char *fmt, ...)
{
	va_list ap;

	printf("%s FAIL: ", what);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	exit(1);
}

/* ------------------------------------------------------------ standin */

struct nvos54 {
	uint32_t hClient, hObject, cmd, flags;
	uint64_t params;
	uint32_t paramsSize, status;
};

struct uvm_register_gpu {
	uint8_t uuid[16];
	uint32_t numaEnabled, numaNodeId, rmCtrlFd, hClient, hSmcPartRef, rmStatus;
};

static int standin(void)
{
	uint8_t params[16];
	struct nvos54 ctl = { .hClient = 0xc1d00001, .hObject = 0x5c000002, .cmd = 0x20800102, .paramsSize = 16 };
	/* rmStatus: what the caller leaves there, so that the record before the call differs from the one after */
	struct uvm_register_gpu reg = { .rmCtrlFd = 3, .hClient = 0xc1d00001, .rmStatus = 0xdeadbeef };
	uint64_t init[2] = { 0, 0 };
	int ctl_fd, uvm_fd, i, status;
	pid_t child;

	for (i = 0; i < 16; i++) {
		params[i] = (uint8_t)(0x10 + i);
		reg.uuid[i] = (uint8_t)(0xa0 + i);
	}
	ctl.params = (uint64_t)(uintptr_t)params;
	ctl_fd = open("/dev/nvidiactl", O_RDWR);
	uvm_fd = open("/dev/nvidia-uvm", O_RDWR);
	if (ctl_fd < 0 || uvm_fd < 0)
		fail("STANDIN", "open: %s", strerror(errno));
	if (ioctl(ctl_fd, _IOWR('F', 0x2a, struct nvos54), &ctl))
		fail("STANDIN", "RM_CONTROL: %s", strerror(errno));
	for (i = 0; i < 16; i++)
		if (params[i] != 0x11 + i)
			fail("STANDIN", "RM_CONTROL params byte %d is %#x after the call", i, params[i]);
	if (ioctl(uvm_fd, 0x30000001, init))
		fail("STANDIN", "UVM_INITIALIZE: %s", strerror(errno));
	if (ioctl(uvm_fd, 37, &reg) || reg.rmStatus)
		fail("STANDIN", "UVM_REGISTER_GPU: %s rmStatus %#x", strerror(errno), reg.rmStatus);
	child = fork();
	if (child == 0) {
		ioctl(uvm_fd, 38, &reg); /* UVM_UNREGISTER_GPU: blocks in the stand-in's UnregisterGpu */
		_exit(0);
	}
	sleep(1);
	if (waitpid(child, &status, WNOHANG) != 0)
		fail("STANDIN", "UVM_UNREGISTER_GPU returned: the stand-in did not block (wedge=1?)");
	printf("STANDIN pid=%d blocked=%d PASS\n", getpid(), child);
	return 0;
}

/* ------------------------------------------------------------ emit */

#define EMITLOAD_PID 0xe417
#define MAX_CPUS 64
#define MAX_N (1 << 20)

static uint8_t *seen[MAX_CPUS][2];

static void stats(int fd, struct rmt_kmod_stats *st)
{
	if (ioctl(fd, RMT_IOC_STATS, st))
		fail("EMIT", "RMT_IOC_STATS: %s", strerror(errno));
}

static uint64_t drops(const struct rmt_kmod_stats *st)
{
	return st->drops_full + st->drops_big + st->drops_ctx;
}

/* Read every record waiting; check each; count ours. */
static uint64_t drain(int fd, uint32_t n, uint32_t irq_n, uint64_t *dups)
{
	static uint8_t buf[1 << 20];
	static uint8_t rec[1 << 18];
	static size_t have;
	uint64_t got = 0;

	for (;;) {
		ssize_t k = read(fd, buf, sizeof(buf));
		size_t off = 0;

		if (k < 0 && errno == EAGAIN)
			return got;
		if (k <= 0)
			fail("EMIT", "read: %s", k ? strerror(errno) : "end of file");
		while (off < (size_t)k) {
			size_t take;
			const struct rmt_record *h = (const void *)rec;

			if (have < sizeof(*h)) {
				take = sizeof(*h) - have;
			} else {
				if (h->magic != RMT_RECORD_MAGIC || h->total_len % 8 || h->total_len > sizeof(rec))
					fail("EMIT", "a malformed record (magic %#x, total_len %u)", h->magic, h->total_len);
				take = h->total_len - have;
			}
			take = take < (size_t)k - off ? take : (size_t)k - off;
			memcpy(rec + have, buf + off, take);
			have += take;
			off += take;
			if (have < sizeof(*h) || have < h->total_len)
				continue;
			if (h->pid == EMITLOAD_PID) {
				uint32_t cpu = (uint32_t)(h->call_id >> 40), ctx = (uint32_t)(h->call_id >> 32) & 0xff;
				uint32_t i = (uint32_t)h->call_id;

				if (cpu >= MAX_CPUS || ctx > 1 || i >= (ctx ? irq_n : n))
					fail("EMIT", "a record with call_id %#llx", (unsigned long long)h->call_id);
				if (!seen[cpu][ctx])
					seen[cpu][ctx] = calloc(MAX_N, 1);
				if (seen[cpu][ctx][i]++)
					(*dups)++;
				got++;
			}
			have = 0;
		}
	}
}

static int emit(uint32_t n, uint32_t irq_n, int late)
{
	struct rmt_kmod_stats before, after;
	char cmd[256];
	uint64_t got = 0, dups = 0, emitted, dropped;
	pid_t child;
	int fd = open("/dev/rmtrace", O_RDONLY | O_NONBLOCK), status, cpus;

	if (fd < 0)
		fail("EMIT", "open /dev/rmtrace: %s", strerror(errno));
	got += drain(fd, n, irq_n, &dups); /* what was there before */
	got = 0;
	stats(fd, &before);
	snprintf(cmd, sizeof(cmd), "insmod /lib/rmtrace/rmtrace_emitload.ko count=%u irq_count=%u", n, irq_n);
	child = fork();
	if (child == 0) {
		execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
		_exit(127);
	}
	while (waitpid(child, &status, WNOHANG) == 0) {
		struct pollfd p = { .fd = fd, .events = POLLIN };

		if (late) {
			usleep(10000);
			continue;
		}
		poll(&p, 1, 10);
		got += drain(fd, n, irq_n, &dups);
	}
	if (!WIFEXITED(status) || WEXITSTATUS(status))
		fail("EMIT", "%s failed", cmd);
	got += drain(fd, n, irq_n, &dups);
	stats(fd, &after);
	cpus = (int)sysconf(_SC_NPROCESSORS_ONLN);
	emitted = (uint64_t)cpus * (n + irq_n);
	dropped = drops(&after) - drops(&before);
	if (dups)
		fail("EMIT", "%llu records arrived twice", (unsigned long long)dups);
	if (got + dropped != emitted)
		fail("EMIT", "emitted %llu, received %llu, counted as dropped %llu", (unsigned long long)emitted,
		     (unsigned long long)got, (unsigned long long)dropped);
	printf("EMIT cpus=%d emitted=%llu received=%llu dropped=%llu PASS\n", cpus, (unsigned long long)emitted,
	       (unsigned long long)got, (unsigned long long)dropped);
	system("rmmod rmtrace_emitload");
	return 0;
}

/* ------------------------------------------------------------ sources */

/* rmtrace_emitload's N records per CPU (task context), then the ones of them that fd reads. */
static uint64_t emitload_read(int fd, uint32_t n)
{
	char cmd[128];
	uint64_t dups = 0, got;

	snprintf(cmd, sizeof(cmd), "insmod /lib/rmtrace/rmtrace_emitload.ko count=%u irq_count=0 && rmmod rmtrace_emitload", n);
	if (system(cmd))
		fail("SOURCES", "%s failed", cmd);
	got = drain(fd, n, 0, &dups); /* insmod returns once every record is written */
	if (dups)
		fail("SOURCES", "%llu records arrived twice", (unsigned long long)dups);
	return got;
}

/*
 * RMT_IOC_SET_SOURCES: a mask with unknown bits is refused and changes
 * nothing; with MARK off, the emitters' MARK records are neither recorded
 * nor counted as drops; with every source on again, all of them arrive.
 */
static int sources(uint32_t n)
{
	struct rmt_kmod_stats before, after;
	uint32_t unknown = 1u << 31, no_mark = RMT_SOURCES_ALL & ~(1u << RMT_SRC_MARK), all = RMT_SOURCES_ALL;
	uint64_t dups = 0, off, on;
	int fd = open("/dev/rmtrace", O_RDONLY | O_NONBLOCK), cpus = (int)sysconf(_SC_NPROCESSORS_ONLN);

	if (fd < 0)
		fail("SOURCES", "open /dev/rmtrace: %s", strerror(errno));
	drain(fd, n, 0, &dups); /* what was there before */
	if (ioctl(fd, RMT_IOC_SET_SOURCES, &unknown) == 0 || errno != EINVAL)
		fail("SOURCES", "a mask with unknown bits: %s, not EINVAL", strerror(errno));
	stats(fd, &before);
	if (before.sources != RMT_SOURCES_ALL)
		fail("SOURCES", "the refused mask left sources %#x", before.sources);
	if (ioctl(fd, RMT_IOC_SET_SOURCES, &no_mark))
		fail("SOURCES", "RMT_IOC_SET_SOURCES: %s", strerror(errno));
	off = emitload_read(fd, n);
	stats(fd, &after);
	if (off || after.sources != no_mark || after.records != before.records || drops(&after) != drops(&before))
		fail("SOURCES", "MARK off: %llu arrived, sources %#x, %llu more records, %llu more drops",
		     (unsigned long long)off, after.sources, (unsigned long long)(after.records - before.records),
		     (unsigned long long)(drops(&after) - drops(&before)));
	if (ioctl(fd, RMT_IOC_SET_SOURCES, &all))
		fail("SOURCES", "RMT_IOC_SET_SOURCES: %s", strerror(errno));
	on = emitload_read(fd, n);
	if (on != (uint64_t)cpus * n)
		fail("SOURCES", "every source on: %llu of %llu arrived", (unsigned long long)on,
		     (unsigned long long)cpus * n);
	printf("SOURCES off=%#x received_off=%llu received_on=%llu PASS\n", no_mark, (unsigned long long)off,
	       (unsigned long long)on);
	close(fd);
	return 0;
}

/* ------------------------------------------------------------ fuzz */

static uint64_t rng;

static uint64_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

struct builder {
	uint8_t buf[1 << 16];
	size_t len;
};

static struct rmt_record *record(struct builder *b, uint16_t source, uint8_t phase, uint8_t flags, uint32_t op,
				 uint32_t pid, uint64_t call_id)
{
	struct rmt_record *h = (void *)(b->buf + b->len);

	memset(h, 0, sizeof(*h));
	*h = (struct rmt_record){ .magic = RMT_RECORD_MAGIC, .version = RMT_RECORD_VERSION,
				  .header_size = sizeof(*h), .total_len = sizeof(*h), .source = source,
				  .phase = phase, .flags = flags, .pid = pid, .tid = pid, .call_id = call_id,
				  .op = op, .fd = -1 };
	b->len += sizeof(*h);
	return h;
}

static void buffer(struct builder *b, struct rmt_record *h, uint16_t role, uint8_t when, const void *data,
		   uint32_t len)
{
	struct rmt_buffer *bh = (void *)(b->buf + b->len);
	uint32_t padded = (len + 7) & ~7u;

	*bh = (struct rmt_buffer){ .role = role, .when = when, .len = len, .orig_len = len };
	memset(bh + 1, 0, padded);
	memcpy(bh + 1, data, len);
	b->len += sizeof(*bh) + padded;
	h->total_len += (uint32_t)(sizeof(*bh) + padded);
	h->nbufs++;
}

static void ctl(struct builder *b, uint16_t op, const void *body, uint32_t size)
{
	uint8_t arg[256];
	struct rmt_replay_ctl c = { .magic = RMT_REPLAY_MAGIC, .version = RMT_REPLAY_VERSION, .op = op,
				    .length = (uint32_t)sizeof(c) + size };
	struct rmt_record *h = record(b, RMT_SRC_MARK, RMT_PH_EVENT, RMT_RF_REPLAY, RMT_MARK_NOTE, 0, 0);

	memcpy(arg, &c, sizeof(c));
	memcpy(arg + sizeof(c), body, size);
	buffer(b, h, RMT_BUF_ARG, RMT_WHEN_ONCE, arg, c.length);
}

/* A valid submission: MSG, oracle, request (an RM_CONTROL of 32 bytes). */
static void submission(struct builder *b, uint32_t pid, uint64_t call_id)
{
	struct rmt_replay_msg m = { .kind = 4, .expect = 1, .has_status = 1, .nstatus = 1,
				    .status_at = { { .buffer = 0, .width = 4, .offset = 28 } } };
	uint8_t arg[32] = { 1, 2, 3, 4 };
	struct rmt_record *h;
	size_t start = b->len;

	ctl(b, RMT_REPLAY_MSG, &m, sizeof(m));
	h = (void *)(b->buf + start);
	h->pid = pid;
	h->call_id = call_id;
	buffer(b, h, RMT_BUF_TEXT, RMT_WHEN_ONCE, "RM_CONTROL", 10);
	buffer(b, h, RMT_BUF_TEXT, RMT_WHEN_ONCE, "c1 pid 1", 8);
	h = record(b, RMT_SRC_RM, RMT_PH_EXIT, RMT_RF_REPLAY | RMT_RF_SYNTHETIC, 0x2a, pid, call_id);
	buffer(b, h, RMT_BUF_ARG, RMT_WHEN_AFTER, arg, sizeof(arg));
	h = record(b, RMT_SRC_RM, RMT_PH_ENTER, RMT_RF_REPLAY, 0x2a, pid, call_id);
	buffer(b, h, RMT_BUF_ARG, RMT_WHEN_BEFORE, arg, sizeof(arg));
}

static void hello(struct builder *b)
{
	struct rmt_replay_hello h = { .clock = RMT_CLOCK_VIRTUAL };

	ctl(b, RMT_REPLAY_HELLO, &h, sizeof(h));
}

/* Junk of kind k: random bytes, a mutated valid unit, a truncated one, a lying length. */
static void junk(struct builder *b, int k)
{
	size_t i, n;

	b->len = 0;
	switch (k) {
	case 0:
		n = next() % 4096 + 1;
		for (i = 0; i < n; i++)
			b->buf[i] = (uint8_t)next();
		if (n >= 4 && (next() & 1))
			memcpy(b->buf, &(uint32_t){ RMT_RECORD_MAGIC }, 4);
		b->len = n;
		return;
	case 1:
	case 2:
		submission(b, 7, next());
		for (i = 0; i < 1 + next() % 4; i++)
			b->buf[next() % b->len] ^= (uint8_t)(1u << (next() % 8));
		return;
	case 3:
		submission(b, 7, next());
		b->len = next() % b->len + 1;
		return;
	case 4: {
		struct rmt_record *h;

		submission(b, 7, next());
		h = (void *)b->buf;
		switch (next() % 6) {
		case 0: h->total_len = (uint32_t)next(); break;
		case 1: h->nbufs = (uint16_t)next(); break;
		case 2: h->header_size = (uint16_t)next(); break;
		case 3: ((struct rmt_buffer *)(h + 1))->len = (uint32_t)next(); break;
		case 4: h->version = (uint16_t)(2 + next() % 100); break;
		default: ((struct rmt_replay_msg *)((uint8_t *)(h + 1) + 24 + 16))->nstatus = (uint32_t)next(); break;
		}
		return;
	}
	default: {
		struct rmt_replay_advance a = { .to_ns = next(), .flags = (uint32_t)next() | 2 };

		ctl(b, (uint16_t)(next() % 12), &a, sizeof(a) - (next() % 2) * 8);
		return;
	}
	}
}

static void read_all_out(int fd)
{
	static uint8_t buf[1 << 20];

	while (read(fd, buf, sizeof(buf)) > 0)
		;
}

static int fuzz(long n, uint64_t seed)
{
	static struct builder b;
	static uint8_t left[1 << 16];
	long refused = 0, taken = 0, other = 0, i;
	int fd = open("/dev/rmtrace-replay", O_RDWR | O_NONBLOCK), last_other = 0;
	pid_t child;
	int status;

	rng = seed | 1;
	if (fd < 0)
		fail("FUZZ", "open /dev/rmtrace-replay: %s", strerror(errno));
	for (i = 0; i < n; i++) {
		if (i == n / 4) {
			b.len = 0;
			hello(&b);
			if (write(fd, b.buf, b.len) != (ssize_t)b.len)
				fail("FUZZ", "a valid HELLO was refused: %s (is a target loaded?)", strerror(errno));
		}
		junk(&b, (int)(next() % 6));
		read_all_out(fd); /* what the writes before made: a refused write adds nothing to it */
		if (write(fd, b.buf, b.len) == (ssize_t)b.len) {
			taken++;
		} else if (errno == EINVAL) {
			refused++;
			if (read(fd, left, sizeof(left)) != -1 || errno != EAGAIN)
				fail("FUZZ", "refused write %ld (junk of %zu bytes) left something to read", i, b.len);
		} else {
			other++, last_other = errno;
		}
	}
	if (write(fd, b.buf, 0) != -1 || errno != EINVAL)
		fail("FUZZ", "an empty write was not refused with EINVAL");
	{
		char *big = calloc(1, RMT_REPLAY_MAX_WRITE + 8);

		if (write(fd, big, RMT_REPLAY_MAX_WRITE + 8) != -1 || errno != EINVAL)
			fail("FUZZ", "an oversized write was not refused with EINVAL");
		free(big);
	}
	/* still a working session: a valid submission gets its answer */
	read_all_out(fd);
	b.len = 0;
	submission(&b, 4242, 0x77);
	if (write(fd, b.buf, b.len) != (ssize_t)b.len)
		fail("FUZZ", "a valid submission after the junk was refused: %s", strerror(errno));
	{
		uint8_t out[1 << 16];
		ssize_t k;
		size_t off = 0;
		int answered = 0;

		usleep(100000);
		k = read(fd, out, sizeof(out));
		while (k > 0 && off + sizeof(struct rmt_record) <= (size_t)k) {
			const struct rmt_record *h = (const void *)(out + off);

			if (h->pid == 4242 && h->call_id == 0x77 && h->phase == RMT_PH_EXIT)
				answered = 1;
			if (!h->total_len)
				break;
			off += h->total_len;
		}
		if (!answered)
			fail("FUZZ", "the valid submission after the junk got no answer");
	}
	close(fd);
	child = fork();
	if (child == 0) {
		if (setuid(65534))
			_exit(2);
		_exit(open("/dev/rmtrace-replay", O_RDWR) < 0 && (errno == EPERM || errno == EACCES) ? 0 : 1);
	}
	waitpid(child, &status, 0);
	if (!WIFEXITED(status) || WEXITSTATUS(status))
		fail("FUZZ", "a user other than root could open /dev/rmtrace-replay");
	if (other)
		fail("FUZZ", "%ld writes failed with another errno (last %s)", other, strerror(last_other));
	printf("FUZZ writes=%ld refused=%ld taken=%ld PASS\n", n, refused, taken);
	return 0;
}

/* ------------------------------------------------------------ addprobe */

/* Each struct rmt_probe_spec of FILE (as rmtrace's recorder builds them from a driver profile) through
 * RMT_IOC_ADD_PROBE: a probe whose symbol is missing is kept, to attach when a module defines it. */
static int addprobe(const char *path)
{
	static struct rmt_probe_spec spec;
	int fd = open("/dev/rmtrace", O_RDONLY), n = 0;
	FILE *in = fopen(path, "rb");

	if (fd < 0 || !in)
		fail("ADDPROBE", "open: %s", strerror(errno));
	while (fread(&spec, sizeof(spec), 1, in) == 1) {
		int slot = ioctl(fd, RMT_IOC_ADD_PROBE, &spec);

		printf("ADDPROBE %s %s\n", spec.symbol, slot >= 0 ? "attached" : errno == ENOENT ? "waiting" : strerror(errno));
		if (slot < 0 && errno != ENOENT)
			fail("ADDPROBE", "%s: %s", spec.symbol, strerror(errno));
		n++;
	}
	printf("ADDPROBE %d PASS\n", n);
	return 0;
}

/* ------------------------------------------------------------ readers */

/* One reader: reads /dev/rmtrace to its end (blocking, poll-driven or non-blocking by `how`),
 * parsing the byte stream into records; what it saw goes to /tmp/rmt_reader.N. */
static void reader(int index, int how, int hold)
{
	static unsigned char buf[1 << 20];
	size_t have = 0;
	unsigned records = 0, stop = 0, after_stop = 0;
	int fd = open("/dev/rmtrace", O_RDONLY | (how == 2 ? O_NONBLOCK : 0));
	char path[64];
	FILE *out;

	if (fd < 0)
		_exit(1);
	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		ssize_t k;

		if (how && poll(&p, 1, -1) < 0)
			continue;
		k = read(fd, buf + have, sizeof(buf) - have);
		if (k < 0 && errno == EAGAIN)
			continue;
		if (k <= 0)
			break;
		have += (size_t)k;
		while (have >= sizeof(struct rmt_record)) {
			const struct rmt_record *r = (const void *)buf;

			if (r->magic != RMT_RECORD_MAGIC || r->total_len > sizeof(buf))
				_exit(3);
			if (have < r->total_len)
				break;
			records++;
			after_stop += stop;
			if (r->source == RMT_SRC_MARK && r->op == RMT_MARK_STOP && (r->flags & RMT_RF_SYNTHETIC))
				stop++;
			have -= r->total_len;
			memmove(buf, buf + r->total_len, have);
		}
	}
	snprintf(path, sizeof(path), "/tmp/rmt_reader.%d", index);
	out = fopen(path, "w");
	if (out) {
		fprintf(out, "READER %d how=%d records=%u stop=%u after_stop=%u leftover=%zu eof\n", index, how, records,
			stop, after_stop, have);
		fclose(out);
	}
	while (hold)
		pause(); /* keeps its file open after the end of its stream */
	_exit(0);
}

static int readers(int n, int hold)
{
	int i;

	for (i = 0; i < n; i++) {
		pid_t pid = fork();

		if (pid == 0)
			reader(i, i % 3, hold);
		printf("%d ", pid);
	}
	printf("\nREADERS %d PASS\n", n);
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc >= 2 && !strcmp(argv[1], "standin"))
		return standin();
	if (argc >= 4 && !strcmp(argv[1], "emit"))
		return emit((uint32_t)atoi(argv[2]), (uint32_t)atoi(argv[3]), argc > 4);
	if (argc >= 3 && !strcmp(argv[1], "sources"))
		return sources((uint32_t)atoi(argv[2]));
	if (argc >= 4 && !strcmp(argv[1], "fuzz"))
		return fuzz(atol(argv[2]), strtoull(argv[3], NULL, 0));
	if (argc >= 3 && !strcmp(argv[1], "addprobe"))
		return addprobe(argv[2]);
	if (argc >= 3 && !strcmp(argv[1], "readers"))
		return readers(atoi(argv[2]), argc > 3 && !strcmp(argv[3], "hold"));
	fprintf(stderr, "usage: rmt_check standin | emit N IRQ [late] | sources N | fuzz N SEED | addprobe FILE | readers N [hold]\n");
	return 2;
}
