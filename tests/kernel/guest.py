"""A real Debian kernel under qemu, with rmtrace's modules in it: the harness of tests/kernel.

``build()`` compiles the modules out of tree against Debian's headers (W=1,
the compiler's output kept for the warning check) and the guest programs
statically; ``Guest`` boots them in software-emulated qemu (``-smp 2``; no
KVM, see shared/docs/kernel-testing.md) from an initramfs of busybox, the
modules and the programs, with three virtio-serial ports whose host ends are
Unix sockets:

* ``rmtrace.agent``: a shell in the guest (``Guest.sh``), how tests drive it;
* ``rmtrace.replay``: ``rmt_relay replay``, the replayer's way to /dev/rmtrace-replay;
* ``rmtrace.trace``: ``rmt_relay drain``, the recorder's way to /dev/rmtrace.

Pass or fail is read from what the guest prints, never from qemu's exit
code; every qemu runs under a timeout.  One boot serves a whole test module.
"""

from __future__ import annotations

import base64
import os
import re
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SHIM = REPO / "kmod_shim"
KERNEL_DIR = Path(os.environ.get("RMTRACE_KERNEL_DIR", "/var/cache/rmtrace-kernel"))
HOW_TO_GET = "run tests/kernel/setup.sh as root (qemu, busybox-static, Debian's kernel and headers)"
MODULE_DIRS = ("kmod", "standin", "sample_target")
GUEST_PROGRAMS = ("rmt_relay", "rmt_check")
BOOT_TIMEOUT_S = 120
PORTS = ("agent", "replay", "trace")
AGENT_CHUNK = 3000
"""base64 characters per agent line (rmt_relay agent takes lines of up to 4095 bytes; a multiple of 4)."""


def kernel_version() -> str | None:
    try:
        return (KERNEL_DIR / "kver").read_text().strip() or None
    except OSError:
        return None


def missing() -> str | None:
    """What this machine lacks for the kernel tests, in one line (None: nothing)."""
    kver = kernel_version()
    needs = [tool for tool in ("qemu-system-x86_64", "busybox", "cpio", "gcc", "make") if shutil.which(tool) is None]
    if kver is None or not (KERNEL_DIR / f"vmlinuz-{kver}").exists():
        needs.append("Debian's kernel image")
    elif not Path(f"/usr/src/linux-headers-{kver}").is_dir():
        needs.append(f"linux-headers-{kver}")
    return f"missing {', '.join(needs)}: {HOW_TO_GET}" if needs else None


@dataclass
class Build:
    """What build() made: module paths, guest programs, and the compiler's words."""

    root: Path
    modules: dict[str, Path]
    programs: dict[str, Path]
    log: str


WARNING = re.compile(r"^.*\b(?:warning|WARNING): .*$", re.M)
"""A compiler's warning (gcc: ``file:line:col: warning: ...``) or modpost's (``WARNING: modpost: ...``)."""


def warnings(log: str) -> list[str]:
    """The warning lines of a build's output."""
    return WARNING.findall(log)


def kbuild(module_dir: Path, symvers: list[str] | None = None) -> subprocess.CompletedProcess:
    """``make modules`` of one out-of-tree module folder against Debian's headers, with W=1's extra warnings."""
    extra = [f"KBUILD_EXTRA_SYMBOLS={' '.join(symvers)}"] if symvers else []
    return subprocess.run(["make", "-C", f"/usr/src/linux-headers-{kernel_version()}", f"M={module_dir}", "W=1",
                           *extra, "modules"], capture_output=True, text=True, timeout=300)


def build(workdir: Path) -> Build:
    """The modules (W=1) and the static guest programs, built from a copy of kmod_shim/ in ``workdir``."""
    src = workdir / "kmod_shim"
    shutil.copytree(SHIM, src, ignore=shutil.ignore_patterns("*.so", "__pycache__", "*.o", "*.ko", "*.mod*",
                                                             ".*.cmd", "Module.symvers", "modules.order"))
    log = []
    modules: dict[str, Path] = {}
    symvers: list[str] = []
    for name in MODULE_DIRS:
        d = src / name
        out = kbuild(d, symvers)
        log.append(out.stdout + out.stderr)
        if out.returncode:
            raise RuntimeError(f"building {name} failed:\n{out.stdout}\n{out.stderr}")
        symvers.append(str(d / "Module.symvers"))
        modules.update({ko.stem: ko for ko in d.glob("*.ko")})
    programs = {}
    for name in GUEST_PROGRAMS:
        exe = workdir / name
        out = subprocess.run(["gcc", "-static", "-O2", "-Wall", "-Wextra", "-o", str(exe), str(src / "guest" / f"{name}.c")],
                             capture_output=True, text=True, timeout=120)
        log.append(out.stdout + out.stderr)
        if out.returncode:
            raise RuntimeError(f"building {name} failed:\n{out.stderr}")
        programs[name] = exe
    return Build(workdir, modules, programs, "\n".join(log))


INIT = r"""#!/bin/sh
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mount -t debugfs debugfs /sys/kernel/debug
mkdir -p /tmp && mount -t tmpfs tmp /tmp
for m in $(cat /lib/virtio/order); do insmod /lib/virtio/$m.ko; done
port() {
    for p in /sys/class/virtio-ports/*; do
        [ "$(cat $p/name 2>/dev/null)" = "$1" ] && echo /dev/${p##*/} && return
    done
}
n=0
while [ -z "$(port rmtrace.agent)" ] && [ $n -lt 100 ]; do sleep 0.1; n=$((n+1)); done
for name in agent replay trace; do ln -sf $(port rmtrace.$name) /dev/rmtrace-port-$name; done
echo RMT-GUEST-READY cpus=$(grep -c ^processor /proc/cpuinfo)
exec /bin/rmt_relay agent /dev/rmtrace-port-agent
"""


def make_initramfs(b: Build, path: Path) -> None:
    """busybox, the virtio modules, our modules and programs, and /init, as a gzipped newc cpio."""
    root = b.root / "initramfs"
    if root.exists():
        shutil.rmtree(root)
    for d in ("bin", "sbin", "proc", "sys", "dev", "tmp", "lib/virtio", "lib/rmtrace", "etc"):
        (root / d).mkdir(parents=True, exist_ok=True)
    busybox = shutil.which("busybox")
    shutil.copy(busybox, root / "bin" / "busybox")
    applets = subprocess.run([busybox, "--list"], capture_output=True, text=True, check=True).stdout.split()
    for applet in applets:
        if applet != "busybox":
            (root / "bin" / applet).symlink_to("busybox")
    for ko in (KERNEL_DIR / "modules").glob("*.ko"):
        shutil.copy(ko, root / "lib" / "virtio" / ko.name)
    shutil.copy(KERNEL_DIR / "modules" / "order", root / "lib" / "virtio" / "order")
    for name, ko in b.modules.items():
        shutil.copy(ko, root / "lib" / "rmtrace" / f"{name}.ko")
    for name, exe in b.programs.items():
        shutil.copy(exe, root / "bin" / name)
    (root / "init").write_text(INIT)
    (root / "init").chmod(0o755)
    files = subprocess.run(["find", "."], cwd=root, capture_output=True, text=True, check=True).stdout
    cpio = subprocess.run(["cpio", "-o", "-H", "newc", "--quiet"], cwd=root, input=files.encode(),
                          capture_output=True, check=True).stdout
    path.write_bytes(subprocess.run(["gzip", "-1"], input=cpio, capture_output=True, check=True).stdout)


class Guest:
    """One booted guest; ``sh(cmd)`` runs a shell command in it."""

    def __init__(self, b: Build, *, cpus: int = 2, memory_mb: int = 1024, timeout_s: int = 900) -> None:
        self.build = b
        self.dir = b.root / "vm"
        self.dir.mkdir(exist_ok=True)
        self.console = self.dir / "console.log"
        self.sockets = {name: str(self.dir / f"{name}.sock") for name in PORTS}
        initrd = self.dir / "initramfs.gz"
        make_initramfs(b, initrd)
        kver = kernel_version()
        cmd = ["timeout", str(timeout_s), "qemu-system-x86_64", "-accel", "tcg", "-m", str(memory_mb),
               "-smp", str(cpus), "-kernel", str(KERNEL_DIR / f"vmlinuz-{kver}"), "-initrd", str(initrd),
               "-append", "console=ttyS0 quiet panic=-1 oops=panic loglevel=4", "-display", "none",
               "-no-reboot", "-monitor", "none", "-serial", f"file:{self.console}",
               "-device", "virtio-serial-pci,id=vs"]
        for name, path in self.sockets.items():
            cmd += ["-chardev", f"socket,id={name},path={path},server=on,wait=off",
                    "-device", f"virtserialport,bus=vs.0,chardev={name},name=rmtrace.{name}"]
        self.qemu = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self.agent = self._connect("agent", BOOT_TIMEOUT_S)
        self._wait_ready()

    def _connect(self, name: str, timeout_s: float) -> socket.socket:
        deadline = time.monotonic() + timeout_s
        while True:
            if self.qemu.poll() is not None:
                raise RuntimeError(f"qemu exited ({self.qemu.returncode}): {self.qemu.stderr.read().decode()}")
            try:
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                sock.connect(self.sockets[name])
                return sock
            except OSError:
                sock.close()
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + BOOT_TIMEOUT_S
        while "RMT-GUEST-READY" not in self.log():
            if time.monotonic() > deadline or self.qemu.poll() is not None:
                raise RuntimeError(f"the guest did not come up:\n{self.log()}")
            time.sleep(0.1)

    def log(self) -> str:
        try:
            return self.console.read_text(errors="replace")
        except OSError:
            return ""

    def sh(self, command: str, timeout_s: float = 300) -> tuple[int, str]:
        """Run ``command`` with the guest's /bin/sh: (exit status, output)."""
        self.agent.sendall(command.encode() + b"\n")
        self.agent.settimeout(timeout_s)
        out = b""
        while True:
            end = out.rfind(b"@@rc=")
            if end >= 0 and out.endswith(b"@@\n"):
                return int(out[end + 5:-3]), out[:end].decode(errors="replace").rstrip("\n")
            chunk = self.agent.recv(65536)
            if not chunk:
                raise RuntimeError(f"the guest agent went away after {out[-2000:]!r}:\n{self.log()[-4000:]}")
            out += chunk

    def ok(self, command: str, timeout_s: float = 300) -> str:
        """Run ``command``; its output, or an error with the output when it fails."""
        rc, out = self.sh(command, timeout_s)
        if rc:
            raise AssertionError(f"guest: {command!r} exited {rc}:\n{out}")
        return out

    def put(self, path: str, data: bytes) -> None:
        """Write ``data`` to ``path`` in the guest (base64 through the agent, in lines it takes whole)."""
        text = base64.b64encode(data).decode()
        self.ok(f": > {path}")
        for i in range(0, len(text), AGENT_CHUNK):
            self.ok(f"echo {text[i:i + AGENT_CHUNK]} | base64 -d >> {path}")

    def stop(self, pattern: str) -> None:
        """End the guest processes whose command line contains ``pattern`` (busybox has no pkill)."""
        self.sh(f"for p in $(ps -o pid,args | grep '{pattern}' | grep -v grep | awk '{{print $1}}'); "
                f"do kill $p; done; sleep 0.3")

    def close(self) -> None:
        try:
            self.agent.sendall(b"poweroff -f\n")
        except OSError:
            pass
        try:
            self.qemu.wait(30)
        except subprocess.TimeoutExpired:
            self.qemu.kill()
            self.qemu.wait()
        self.agent.close()
