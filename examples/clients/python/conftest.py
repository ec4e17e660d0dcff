"""pytest fixtures for the Python client's tests: the real executable, a temporary
BROWSER_PILOT_HOME per test with a managed headless Chromium (both stopped and removed after the
test), and fixture pages served from 127.0.0.1."""

from __future__ import annotations

import collections
import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Dict, Iterator

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
EXECUTABLE = os.path.abspath(os.environ.get(
    "BROWSER_PILOT_EXECUTABLE", os.path.join(ROOT, "target", "debug", "browser-pilot")))
BP = os.path.join(os.path.dirname(EXECUTABLE), "bp")

PAGES = {
    "/form": """<!doctype html><title>Sign up</title><h1>Sign up</h1>
<label>Name <input id="name"></label>
<label><input type="checkbox" id="agree"> Agree to the terms</label>""",
    # The click handler asks /hold synchronously, so the click is in flight until release().
    "/held": """<!doctype html><title>Checkout</title>
<button onclick="const x = new XMLHttpRequest(); x.open('GET', '/hold', false); x.send();
document.title = 'Ordered'">Place order</button>""",
}


class Pages:
    """Fixture pages on 127.0.0.1. ``/hold`` is answered only after ``release()`` (or 30 s)."""

    def __init__(self) -> None:
        self.hits: Dict[str, int] = collections.Counter()
        self.held, self.released = threading.Event(), threading.Event()
        pages = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                pages.hits[self.path] += 1
                if self.path == "/hold":
                    pages.held.set()
                    pages.released.wait(30)
                body = PAGES.get(self.path, "<title>fixture</title>").encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.server.server_port}{path}"

    def release(self) -> None:
        self.released.set()

    def close(self) -> None:
        self.release()
        self.server.shutdown()
        self.server.server_close()


def broker_pid(home: str) -> int:
    """The test's own Broker (the test reads the locator; a host never does)."""
    with open(os.path.join(home, "broker-locator.json")) as locator:
        pid = int(json.load(locator)["pid"])
    with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
        assert b"--browser-pilot-internal=broker" in cmdline.read().split(b"\0")
    return pid


def alive(pid: int) -> bool:
    """Running, not a zombie (an exited Broker's parent may be slow to reap it)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


@pytest.fixture
def home() -> Iterator[str]:
    path = tempfile.mkdtemp(prefix="browser-pilot-client-")
    yield path
    env = dict(os.environ, BROWSER_PILOT_HOME=path)
    try:
        broker = broker_pid(path)
    except (OSError, AssertionError, KeyError, ValueError):
        broker = None
    for command in ([EXECUTABLE, "browser", "stop"], [BP, "disconnect"]):
        subprocess.run(command, env=env, capture_output=True, timeout=60)
    if broker is not None:  # also one that a failed test left serving a client
        try:
            os.kill(broker, signal.SIGTERM)
        except OSError:
            pass
        for _ in range(100):  # its own cleanup writes in the home until it exits
            if not alive(broker):
                break
            time.sleep(0.1)
    for _ in range(10):  # Chromium's helpers may write to the profile a moment longer
        try:
            shutil.rmtree(path)
            return
        except OSError:
            time.sleep(0.5)


@pytest.fixture
def browser(home: str) -> str:
    """A managed headless Chromium in ``home``; the ``home`` fixture stops it."""
    subprocess.run([EXECUTABLE, "browser", "launch", "--headless"], check=True,
                   capture_output=True, timeout=60, env=dict(os.environ, BROWSER_PILOT_HOME=home))
    return home


@pytest.fixture
def pages() -> Iterator[Pages]:
    served = Pages()
    yield served
    served.close()
