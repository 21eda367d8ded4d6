/*
 * rmt_relay: the guest end of rmtrace's VM transport, a tiny static program.
 *
 * When rmtrace.ko runs inside a VM, the Python recorder and replayer run on
 * the host and reach the guest's devices through virtio-serial ports (qemu:
 * -device virtserialport,chardev=...,name=rmtrace.replay with a Unix socket
 * chardev on the host).  In the guest:
 *
 *   rmt_relay replay PORT [DEVICE]  each host connection is one replay session
 *       on DEVICE (/dev/rmtrace-replay): the host sends frames, a u32 length
 *       then that many bytes, and each frame is one write() of the device (the
 *       device takes whole units per write); everything the device reads out
 *       goes back as it is.  A write the device refuses goes back as a
 *       RMT_REPLAY_REFUSED control record carrying errno and the device's reason,
 *       and so does the end of the session when rmtrace.ko detaches (ENODEV).
 *   rmt_relay drain PORT [DEVICE]   copies DEVICE (/dev/rmtrace) to the host
 *       while the host is connected: a recorder there drains the rings.  When
 *       the module detaches, the stream ends with its MARK STOP record; the
 *       relay closes the device (so rmmod can go) and opens it again once a
 *       module is loaded: it stays attached across unload and load.
 *   rmt_relay agent PORT            runs each line the host sends with /bin/sh,
 *       its output going back, then "@@rc=N@@": the test harness's hands.
 *
 * A port whose host end is not connected reads as hung up; the relay then
 * waits and looks again (virtio-serial has no "connected" event to block on).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../rmtrace_record.h"
#include "../rmtrace_replay.h"

static void nap(void)
{
	struct timespec ts = { 0, 20 * 1000 * 1000 };

	nanosleep(&ts, NULL);
}

/* Whether the host end of the port is connected (no hangup). */
static int host_connected(int port)
{
	struct pollfd p = { .fd = port, .events = POLLOUT };

	return poll(&p, 1, 0) >= 0 && !(p.revents & POLLHUP);
}

static int write_all(int fd, const void *buf, size_t n)
{
	const char *p = buf;

	while (n) {
		ssize_t k = write(fd, p, n);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return -1;
		p += k;
		n -= (size_t)k;
	}
	return 0;
}

/* Read exactly n bytes; 0 at a clean end, -1 on a hangup mid-frame. */
static int read_all(int fd, void *buf, size_t n)
{
	char *p = buf;
	size_t got = 0;

	while (got < n) {
		ssize_t k = read(fd, p + got, n - got);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return got ? -1 : 0;
		got += (size_t)k;
	}
	return 1;
}

struct refused_record {
	struct rmt_record rec;
	struct rmt_buffer arg_hdr;
	struct rmt_replay_ctl ctl;
	struct rmt_replay_refused body;
	struct rmt_buffer text_hdr;
	char text[RMT_REPLAY_ERROR_MAX];
};

static void refused(int port, int err, const char *why)
{
	struct refused_record r;
	uint32_t n = (uint32_t)strnlen(why, RMT_REPLAY_ERROR_MAX - 8);
	uint32_t arg = sizeof(r.ctl) + sizeof(r.body);

	memset(&r, 0, sizeof(r));
	r.rec = (struct rmt_record){ .magic = RMT_RECORD_MAGIC, .version = RMT_RECORD_VERSION,
				     .header_size = sizeof(struct rmt_record), .source = RMT_SRC_MARK,
				     .phase = RMT_PH_EVENT, .flags = RMT_RF_REPLAY, .op = RMT_MARK_NOTE, .fd = -1,
				     .nbufs = 2 };
	r.arg_hdr = (struct rmt_buffer){ .role = RMT_BUF_ARG, .when = RMT_WHEN_ONCE, .len = arg, .orig_len = arg };
	r.ctl = (struct rmt_replay_ctl){ .magic = RMT_REPLAY_MAGIC, .version = RMT_REPLAY_VERSION,
					 .op = RMT_REPLAY_REFUSED, .length = arg };
	r.body.err = err;
	r.text_hdr = (struct rmt_buffer){ .role = RMT_BUF_TEXT, .when = RMT_WHEN_ONCE, .len = n, .orig_len = n };
	memcpy(r.text, why, n);
	r.rec.total_len = (uint32_t)(offsetof(struct refused_record, text) + RMT_ALIGN_UP(n));
	write_all(port, &r, r.rec.total_len);
}

/* One host connection: frames in, device output out, until the host hangs up. */
static void replay_session(int port, const char *device)
{
	static char buf[RMT_REPLAY_MAX_WRITE];
	int dev = open(device, O_RDWR | O_NONBLOCK);
	uint32_t len;

	if (dev < 0) {
		refused(port, errno, "the guest cannot open the replay device (is rmtrace.ko loaded?)");
		return;
	}
	for (;;) {
		struct pollfd p[2] = { { .fd = port, .events = POLLIN }, { .fd = dev, .events = POLLIN } };

		if (poll(p, 2, -1) < 0 && errno != EINTR)
			break;
		if (p[1].revents & (POLLIN | POLLHUP)) {
			ssize_t k = read(dev, buf, sizeof(buf));

			if (k == 0) { /* rmtrace.ko detached: the session is over */
				refused(port, ENODEV, "rmtrace.ko detached in the guest: the replay session is over");
				break;
			}
			if (k > 0 && write_all(port, buf, (size_t)k))
				break;
		}
		if (p[0].revents & POLLHUP)
			break;
		if (!(p[0].revents & POLLIN))
			continue;
		if (read_all(port, &len, sizeof(len)) <= 0 || len > sizeof(buf) || read_all(port, buf, len) <= 0)
			break;
		if (write(dev, buf, len) < 0) {
			char why[RMT_REPLAY_ERROR_MAX] = "";
			int err = errno;

			ioctl(dev, RMT_IOC_REPLAY_ERROR, why);
			refused(port, err, why[0] ? why : strerror(err));
		}
	}
	close(dev);
}

static void drain(int port, const char *device)
{
	static char buf[1 << 20];
	int dev = -1;

	for (;;) {
		struct pollfd p;
		ssize_t k;

		if (!host_connected(port)) {
			nap();
			continue;
		}
		if (dev < 0 && (dev = open(device, O_RDONLY | O_NONBLOCK)) < 0) {
			nap();
			continue;
		}
		p = (struct pollfd){ .fd = dev, .events = POLLIN };
		if (poll(&p, 1, 100) <= 0)
			continue;
		k = read(dev, buf, sizeof(buf));
		if (k == 0) { /* detached: its STOP record went out; let the module go, wait for the next */
			close(dev);
			dev = -1;
			continue;
		}
		if (k > 0 && write_all(port, buf, (size_t)k))
			fprintf(stderr, "rmt_relay: the host hung up mid-write: %zd bytes lost\n", k);
	}
}

static void agent(int port)
{
	char line[4096];
	size_t n = 0;

	for (;;) {
		char c;
		ssize_t k = read(port, &c, 1);

		if (k <= 0) {
			nap();
			continue;
		}
		if (c != '\n' && n < sizeof(line) - 1) {
			line[n++] = c;
			continue;
		}
		line[n] = 0;
		n = 0;
		pid_t pid = fork();

		if (pid == 0) {
			dup2(port, 1);
			dup2(port, 2);
			execl("/bin/sh", "sh", "-c", line, (char *)NULL);
			_exit(127);
		}
		int status = 0;
		char done[64];

		/* the agent is the guest's init: it reaps every orphan too (a test's readers, relays) */
		while (waitpid(-1, &status, 0) != pid)
			;
		snprintf(done, sizeof(done), "\n@@rc=%d@@\n", WIFEXITED(status) ? WEXITSTATUS(status) : 128);
		write_all(port, done, strlen(done));
	}
}

int main(int argc, char **argv)
{
	int port;

	if (argc < 3) {
		fprintf(stderr, "usage: rmt_relay replay|drain|agent PORT [DEVICE]\n");
		return 2;
	}
	port = open(argv[2], O_RDWR);
	if (port < 0) {
		perror(argv[2]);
		return 1;
	}
	if (!strcmp(argv[1], "agent"))
		agent(port);
	else if (!strcmp(argv[1], "drain"))
		drain(port, argc > 3 ? argv[3] : "/dev/rmtrace");
	for (;;) {
		if (!host_connected(port)) {
			nap();
			continue;
		}
		replay_session(port, argc > 3 ? argv[3] : "/dev/rmtrace-replay");
		while (host_connected(port))
			nap(); /* the rest of a refused session: wait for the host to go */
	}
}
