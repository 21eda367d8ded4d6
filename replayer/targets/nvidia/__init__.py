"""The real NVIDIA driver as a replay target (``--against nvidia``): docs/replay-nvidia.md.

``target.py`` drives it, ``compile.py`` decides per recorded message what a
replaying process does (or why it skips it), ``fields.py`` walks a call's
buffers to their fields, ``remap.py`` holds what differs between the
recording and now, ``process.py`` and ``executor.py`` are the two ends of one
client process.
"""

from rmtrace.replayer.targets.nvidia.target import ClientStats, NvidiaTarget

__all__ = ["NvidiaTarget", "ClientStats"]
