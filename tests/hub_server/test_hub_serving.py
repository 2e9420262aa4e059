"""How a hub process serves: its collector is set before the first request, the heap it built
at startup (imports, app, state) frozen out of every collection, young collections rare, so no
full collection walks the whole process while requests wait on the loop."""

from __future__ import annotations

import subprocess
import sys

from verifiers.processes.collector import RUN_YOUNG_THRESHOLD

# what ``serve`` leaves for the server: uvicorn's run is where requests start, so it reports
# the collector's state there instead of serving
REPORT_AT_RUN = (
    "import gc, uvicorn\n"
    "uvicorn.run = lambda *a, **k: print(gc.get_freeze_count(), gc.get_threshold()[0])\n"
    "from hub_server.app import create_app, served\n"
    "from hub_server.edges.server import serve\n"
    "serve(served(create_app({data!r})), '127.0.0.1', 0, 10.0, [])\n"
)


def test_a_hub_serves_with_its_startup_heap_frozen_and_young_collections_rare(tmp_path):
    done = subprocess.run(
        [sys.executable, "-c", REPORT_AT_RUN.format(data=str(tmp_path / "data"))],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    frozen, young = map(int, done.stdout.split())
    assert frozen > 50_000  # the imports and the app, never walked again
    assert young == RUN_YOUNG_THRESHOLD
