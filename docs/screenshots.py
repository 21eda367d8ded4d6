"""Make the TUI screenshots in docs/ (Textual's SVG export, headless, 120x34).

    python docs/screenshots.py [TRACE]

With no TRACE it folds the constructed second-client wedge of
tests/scenarios.py (and its fixed boot, for the diff) with the real session
model; with TRACE (a real capture) it shows that instead.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from rmtrace.tui.app import RmtraceApp  # noqa: E402
from rmtrace.tui.services import library_services  # noqa: E402

SHOTS = (
    ("tui-wedge.svg", 1, ("w", "t", "plus", "plus", "plus", "plus", "plus", "down", "down")),
    ("tui-diff.svg", 2, ("d",)),
)
"""(file, how many traces, keys pressed before the shot)."""
CAPTURE_SHOT = ("tui-capture.svg", ("g", "4", "2", "0", "m", "s", "enter", "o"))
"""The shipped H200 capture with the cursor where its second client starts, objects shown."""
REPLAY_SHOT = ("tui-wedge-replay.svg", ("w", "t", *["plus"] * 6, *["down"] * 7))
"""The shipped cuda-streams capture replayed 3x against the legacy host model: the second client wedges."""


async def shoot(paths: list[str], out: Path, keys: tuple[str, ...]) -> None:
    app = RmtraceApp.open(paths, library_services())
    async with app.run_test(size=(120, 34)) as pilot:
        await pilot.pause()
        await app.workers.wait_for_complete()
        await pilot.pause()
        for key in keys:
            await pilot.press(key)
            await pilot.pause()
        app.save_screenshot(out.name, str(out.parent))


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        if len(sys.argv) > 1:
            traces = sys.argv[1:3]
        else:
            from tests.scenarios import sequential
            traces = [str(sequential(Path(tmp) / "wedge.trace", True)), str(sequential(Path(tmp) / "fixed.trace", False))]
        for name, n, keys in SHOTS:
            if len(traces) >= n:
                asyncio.run(shoot(traces[:n], ROOT / "docs" / name, keys))
                print(f"docs/{name}")
        if len(sys.argv) == 1:
            from rmtrace.replayer import Schedule, build_plan, make_target, replay

            from rmtrace import captures
            name, keys = CAPTURE_SHOT
            asyncio.run(shoot([str(captures.path())], ROOT / "docs" / name, keys))
            print(f"docs/{name}")
            replayed = str(Path(tmp) / "legacy-replay.trace")
            plan = build_plan(str(captures.path("cuda-streams"))).repeat(3)
            replay(plan, Schedule.parse("sequential"), make_target("model:legacy", plan), output=replayed)
            name, keys = REPLAY_SHOT
            asyncio.run(shoot([replayed], ROOT / "docs" / name, keys))
            print(f"docs/{name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
