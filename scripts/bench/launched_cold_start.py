#!/usr/bin/env python3
"""Cold start on a browser the project launched: `browser launch --headless`, then one bridge
from its start to the first `browser.open` of a small page answered.

Reproduces the "launched browser" cold-start row of docs/performance.md. Each repetition has a
fresh BROWSER_PILOT_HOME (so a fresh Broker and managed profile) and only the managed profile
discovered; the page comes from a server on 127.0.0.1. It prints per repetition the launch time,
the bridge's start to `browser.connect` done, the first `browser.open`, the sum, and whether the
first Workspace's tab was the browser's start tab (docs/architecture.md, "The start tab").

    python3 scripts/bench/launched_cold_start.py [REPS]

BROWSER_PILOT: the executable (default target/release/browser-pilot).
"""
import http.server
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXE = os.path.abspath(os.environ.get("BROWSER_PILOT", os.path.join(ROOT, "target", "release", "browser-pilot")))
PAGE = b"<!doctype html><title>small</title><h1>Small</h1><p>A page.</p><a href='#x'>link</a>"


class Page(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("content-type", "text/html")
        self.send_header("content-length", str(len(PAGE)))
        self.end_headers()
        self.wfile.write(PAGE)

    def log_message(self, *args):
        pass


class Bridge:
    def __init__(self, env):
        self.proc = subprocess.Popen([EXE, "bridge", "--stdio"], env=env, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.next_id = 0

    def call(self, method, params):
        self.next_id += 1
        line = json.dumps({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        self.proc.stdin.write(line.encode() + b"\n")
        self.proc.stdin.flush()
        while True:
            message = json.loads(self.proc.stdout.readline())
            if message.get("id") == self.next_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message["result"]

    def tool(self, name, arguments, workspace, lease):
        out = self.call("tools/call", {"name": name, "arguments": arguments, "workspaceId": workspace,
                                       "leaseId": lease, "deadlineMs": 60000})
        return out.get("result", out)

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=10)


def one(url):
    home = tempfile.mkdtemp(prefix="bp-cold-")
    env = dict(os.environ, BROWSER_PILOT_HOME=home, BROWSER_PILOT_DISCOVERY_DIRS="")
    try:
        t0 = time.monotonic()
        subprocess.run([EXE, "browser", "launch", "--headless"], env=env, check=True, stdout=subprocess.DEVNULL)
        t1 = time.monotonic()
        bridge = Bridge(env)
        bridge.call("initialize", {
            "client": {"id": "dev.bench.cold", "name": "Cold start", "version": "0.1.0", "instanceId": "cold"},
            "protocol": {"min": {"major": 1, "minor": 1}, "max": {"major": 1, "minor": 1}},
            "requestedCapabilities": ["browser.control", "workspace.manage", "observation.read"],
            "launchMode": "embedded"})
        workspace = bridge.call("workspaces/create", {})["workspace"]["id"]
        lease = bridge.call("leases/create", {"workspaceId": workspace, "ttlMs": 60000})["lease"]["id"]
        bridge.tool("browser.connect", {}, workspace, lease)
        t2 = time.monotonic()
        start = bridge.tool("browser.tabs.list", {}, workspace, lease)["tabs"]  # untimed
        t2b = time.monotonic()
        opened = bridge.tool("browser.open", {"url": url}, workspace, lease)
        t3 = time.monotonic()
        assert opened["title"] == "small", opened
        adopted = len(start) == 1 and opened["targetId"] == start[0]["targetId"]
        bridge.close()
        return (t1 - t0) * 1000, (t2 - t1) * 1000, (t3 - t2b) * 1000, adopted
    finally:
        subprocess.run([EXE, "browser", "stop"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        shutil.rmtree(home, ignore_errors=True)


def main():
    reps = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Page)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/small.html"
    rows = []
    for rep in range(reps):
        launch, connect, first, adopted = one(url + f"?cold={rep}")
        rows.append((launch, connect, first))
        print(f"rep {rep + 1}: launch {launch:.0f} ms, bridge to connected {connect:.0f} ms, "
              f"first browser.open {first:.0f} ms, bridge start to first page {connect + first:.0f} ms, "
              f"start tab adopted: {adopted}", flush=True)
    med = [statistics.median(column) for column in zip(*rows)]
    print(f"median: launch {med[0]:.0f} ms, bridge to connected {med[1]:.0f} ms, "
          f"first browser.open {med[2]:.0f} ms, bridge start to first page "
          f"{statistics.median(r[1] + r[2] for r in rows):.0f} ms")


if __name__ == "__main__":
    main()
