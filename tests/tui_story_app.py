"""Run the TUI on the wedge story (real trace files, session-model double) in a real terminal.

    python tests/tui_story_app.py DIR [--diff] [--screenshot FILE.svg KEY...]

Used by the tmux test and to make the screenshots in docs/ before real
captures are folded by the real session model.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from rmtrace.tui.app import RmtraceApp  # noqa: E402
from tests.tui_doubles import double_services, wedge_story  # noqa: E402


def make_app(directory: str, diff: bool = False) -> RmtraceApp:
    a, b = os.path.join(directory, "run1.trace"), os.path.join(directory, "run2.trace")
    models = {a: wedge_story(a)}
    if diff:
        models[b] = wedge_story(b, second_client_recovers=True)
    return RmtraceApp.open(list(models), double_services(models))


async def screenshot(app: RmtraceApp, path: str, keys: list[str], size=(120, 34)) -> None:
    """Press ``keys`` headless at ``size`` and save the screen as SVG (Textual's export)."""
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        await app.workers.wait_for_complete()
        await pilot.pause()
        for key in keys:
            await pilot.press(key)
            await pilot.pause()
        app.save_screenshot(os.path.basename(path), os.path.dirname(os.path.abspath(path)))


if __name__ == "__main__":
    args = sys.argv[1:]
    app = make_app(args[0], "--diff" in args)
    if "--screenshot" in args:
        import asyncio
        at = args.index("--screenshot")
        asyncio.run(screenshot(app, args[at + 1], [k for k in args[at + 2:] if k != "--diff"]))
    else:
        app.run()
