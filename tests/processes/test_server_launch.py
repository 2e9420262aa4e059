"""``launch``: a server that binds its own port (vLLM for vf-rl) is ready only when the answer
on that port comes from it, not from a process that took the port while it started."""

import contextlib
import http.server
import os
import signal
import socket
import subprocess
import sys
import threading

import pytest

from verifiers.processes.server import launch

NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]  # another local user

SQUATTER = """
import http.server, socket, sys

class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b'{"model": "squatter"}'
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass

server = http.server.HTTPServer(("127.0.0.1", 0), Health)
print(server.server_address[1], flush=True)
server.serve_forever()
"""

# a model server still loading its weights: it has not bound its port yet
LOADING = [sys.executable, "-c", "import time; time.sleep(120)"]


@pytest.fixture
def squatter():
    """A process of another local user (this user's, where not root) answering ``/health`` on
    a port it bound first."""
    who = NOBODY if os.geteuid() == 0 else []
    proc = subprocess.Popen(
        [*who, sys.executable, "-I", "-c", SQUATTER], stdout=subprocess.PIPE, text=True
    )
    try:
        yield int(proc.stdout.readline())
    finally:
        proc.kill()
        proc.wait()


def test_a_port_another_process_answers_on_is_not_taken_for_the_server(squatter, tmp_path):
    with pytest.raises(RuntimeError, match="another process took the port"):
        launch(
            LOADING, port=squatter, log_path=tmp_path / "s.log", env=dict(os.environ), timeout=60
        )


def test_the_servers_own_answer_makes_it_ready(tmp_path):
    """The same check passes for a server whose child process listens (as vLLM's API server
    may be a child of the command started)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    serve = (
        "import subprocess, sys; subprocess.run([sys.executable, '-m', 'http.server', "
        f"'--bind', '127.0.0.1', '--directory', {str(tmp_path)!r}, '{port}'])"
    )
    # http.server answers /health with 404: serve a directory holding a file named health
    (tmp_path / "health").write_text("ok")
    server = launch(
        [sys.executable, "-c", serve],
        port=port,
        log_path=tmp_path / "s.log",
        env=dict(os.environ),
        timeout=60,
        model="policy",
    )
    try:
        assert server.model == "policy" and server.base_url == f"http://127.0.0.1:{port}/v1"
    finally:
        server.stop()
        with contextlib.suppress(ProcessLookupError):  # the listening child, left by the stop
            os.killpg(server.process.pid, signal.SIGKILL)


def test_a_squatter_of_the_same_user_is_refused_too(tmp_path):
    """A port this user's own other process answers on (here: the test's) is not the server's."""
    import urllib.request

    handler = type(
        "H",
        (http.server.BaseHTTPRequestHandler,),
        {
            "do_GET": lambda self: (self.send_response(200), self.end_headers()),
            "log_message": lambda self, *a: None,
        },
    )
    server = http.server.HTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        port = server.server_address[1]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as resp:
            assert resp.status == 200
        with pytest.raises(RuntimeError, match="another process took the port"):
            launch(
                LOADING, port=port, log_path=tmp_path / "s.log", env=dict(os.environ), timeout=60
            )
    finally:
        server.shutdown()
