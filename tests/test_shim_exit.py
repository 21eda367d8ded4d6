"""An ioctl's exit record when a buffer its enter read whole can no longer be read after the call.

The shim builds an exit from its enter's plan: room for the whole record is checked once and each
buffer is copied again with no other test (kmod_shim/shim_ioctl.c, capture_ioctl_exit_whole).  A buffer the driver
unmapped during the call faults in that copy; the general way then reads it, marks it unreadable and
goes on, so the exit still has every other buffer, in the enter's order, and nothing is lost.

The stand-in driver here is a few lines of C preloaded beneath the shim: for an RM escape it sets the
argument's status and unmaps the page the params are on, as a driver that frees them would.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from rmtrace.record import BufferFlag, MarkOp, Phase, RecordFlag, Role, Source, When
from rmtrace.trace import TraceReader
from tests.capture_support import build_programs, make_device_dir
from tests.toolchain import needs_gcc

pytestmark = needs_gcc

SUPPORT = Path(__file__).resolve().parent / "capture_support.py"
RM_CONTROL = 0x2A
STATUS = 0x1E  # what the stand-in writes back into the argument's status

HEADER = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <linux/ioctl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
struct nvos54 { uint32_t hClient, hObject, cmd, flags; uint64_t params; uint32_t paramsSize, status; };
"""

DRIVER = HEADER + r"""
int ioctl(int fd, unsigned long req, ...)
{
	va_list ap;
	void *arg;
	va_start(ap, req);
	arg = va_arg(ap, void *);
	va_end(ap);
	if (_IOC_TYPE(req) != 'F') {
		int (*next)(int, unsigned long, ...) = (int (*)(int, unsigned long, ...))dlsym(RTLD_NEXT, "ioctl");
		return next(fd, req, arg);
	}
	struct nvos54 *c = arg;
	c->status = STATUS;
	if (c->hObject == 3) /* the program asks for the params to go */
		munmap((void *)(uintptr_t)c->params, 4096);
	return 0;
}
""".replace("STATUS", str(STATUS))

PROGRAM = HEADER + r"""
int main(void)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/nvidiactl", getenv("RMTRACE_TEST_DEVICE_DIR"));
	int fd = open(path, O_RDWR);
	for (int gone = 0; gone < 2; gone++) { /* first the params stay, then the driver unmaps them */
		uint8_t *page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		memset(page, 0x5a, 64);
		struct nvos54 c = { 1, 2 + gone, 0x20800102u, 0, (uint64_t)(uintptr_t)page, 64, 0 };
		int ret = ioctl(fd, _IOC(_IOC_READ | _IOC_WRITE, 'F', 0x2a, sizeof(c)), &c);
		printf("ret %d status %u\n", ret, c.status);
	}
	return 0;
}
"""


def _built(tmp_path: Path) -> tuple[Path, Path, Path]:
    """(program, stand-in driver, the shim's test build)."""
    (tmp_path / "drv.c").write_text(DRIVER)
    (tmp_path / "prog.c").write_text(PROGRAM)
    drv, prog = tmp_path / "drv.so", tmp_path / "prog"
    subprocess.run(["gcc", "-O2", "-shared", "-fPIC", "-o", str(drv), str(tmp_path / "drv.c"), "-ldl"], check=True)
    subprocess.run(["gcc", "-O2", "-o", str(prog), str(tmp_path / "prog.c")], check=True)
    return prog, drv, build_programs(tmp_path / "bin")["shim"]


def test_a_buffer_gone_at_the_exit_is_unreadable_there_and_the_rest_is_kept(tmp_path):
    prog, drv, shim = _built(tmp_path)
    out = tmp_path / "run.trace"
    env = {"PATH": "/usr/bin:/bin", "RMTRACE_SHIM": str(shim), "LD_PRELOAD": str(drv),
           "RMTRACE_TEST_DEVICE_DIR": str(make_device_dir(tmp_path / "dev"))}
    proc = subprocess.run([sys.executable, str(SUPPORT), "-o", str(out), "--", str(prog)], env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [f"ret 0 status {STATUS}"] * 2
    with TraceReader(out) as reader:
        records = list(reader)
    controls = [r for r in records if r.source == Source.RM and r.op == RM_CONTROL]
    assert [r.phase for r in controls] == [Phase.ENTER, Phase.EXIT] * 2
    kept_enter, kept_exit, gone_enter, gone_exit = controls
    for enter in (kept_enter, gone_enter):  # the enter read both whole
        assert [(b.role, b.when, len(b.data)) for b in enter.buffers] == [
            (Role.ARG, When.BEFORE, 32), (Role.PARAMS, When.BEFORE, 64)]
        assert enter.buffer(Role.PARAMS).data == b"\x5a" * 64 and not enter.flags & RecordFlag.UNREADABLE
    assert [(b.role, b.when, len(b.data)) for b in kept_exit.buffers] == [
        (Role.ARG, When.AFTER, 32), (Role.PARAMS, When.AFTER, 64)]
    assert kept_exit.buffer(Role.ARG).data[28:32] == STATUS.to_bytes(4, "little")  # read after the driver wrote
    assert not kept_exit.flags & RecordFlag.UNREADABLE
    arg, params = gone_exit.buffers
    assert (arg.role, arg.when, len(arg.data)) == (Role.ARG, When.AFTER, 32)
    assert arg.data[28:32] == STATUS.to_bytes(4, "little")
    assert (params.role, params.when, params.data, params.orig_len) == (Role.PARAMS, When.AFTER, b"", 64)
    assert params.flags & BufferFlag.UNREADABLE and params.addr == gone_enter.buffer(Role.PARAMS).addr
    assert gone_exit.flags & RecordFlag.UNREADABLE
    (stop,) = [r for r in records if r.source == Source.MARK and r.op == MarkOp.STOP]
    reads = json.loads(stop.buffer(Role.TEXT).data)["buffer_reads"]
    assert reads == {"copy": 7, "syscall": 0, "unreadable": 1}, reads  # 4 + 3 read by the copy, 1 gone
