"""Write docs/dashboard.svg: the real dashboard on the shipped demo recording, 80x24, 45 s in (NPU 5 Warning).

Run from the repository root: `python docs/make_dashboard_svg.py` (textual comes with `pip install -e .`).
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from npudoctor.live.devices import ReplaySampler
from npudoctor.live.recording import demo_timeline
from npudoctor.live.session import DashboardConfig


async def main(out: Path) -> None:
    from npudoctor.tui.app import DashboardApp

    timeline = demo_timeline()
    clock = {"t": 0.0}
    sampler = ReplaySampler(timeline, clock=lambda: clock["t"])
    config = DashboardConfig(sampler=sampler, start_polling=False, title="npudoctor DEMO",
                             note="demo: a recording assembled from real npu-smi captures, readings varied over "
                                  "a minute")
    app = DashboardApp(config, check_at_start=False)
    async with app.run_test(size=(80, 24)) as pilot:
        for second in range(0, 46):
            clock["t"] = float(second)
            app.poller.poll_once()
            app.tick()
        await pilot.press("down", "down", "down", "down", "down")
        await pilot.pause()
        out.write_text(app.export_screenshot(title="npudoctor dashboard --demo"), encoding="utf-8")


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1] if len(sys.argv) > 1 else "docs/dashboard.svg")))
