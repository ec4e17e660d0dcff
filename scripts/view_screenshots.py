#!/usr/bin/env python3
"""Screenshots of the live view for docs/view.md, taken from the real page.

Starts a throwaway Broker home, serves tests/fixtures/pages on 127.0.0.1, lets `bp` open the
checkout fixture in a headless Chromium (`bp launch --headless`) and observe it, so the view has
a Workspace with a tab and Commands; then opens the URL `browser-pilot view` prints in a second
headless Chromium, driven over CDP, presses Watch on the tab and waits for its first live frame,
and saves two PNGs: at 1280x720 and on a phone-sized (390x844) window.

    scripts/view_screenshots.py TARGET_DIR OUT_DIR      (TARGET_DIR: e.g. target/release)

Needs Chromium at /usr/bin/chromium (or CHROMIUM). Everything it starts, it stops.
"""

import base64
import functools
import http.server
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")


class Cdp:
    """A minimal CDP client over the browser's WebSocket (text frames, no extensions)."""

    def __init__(self, url):
        host_port, path = url.split("//")[1].split("/", 1)
        host, port = host_port.split(":")
        self.sock = socket.create_connection((host, int(port)), timeout=30)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall(
            (f"GET /{path} HTTP/1.1\r\nHost: {host_port}\r\nUpgrade: websocket\r\n"
             f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
             "Sec-WebSocket-Version: 13\r\n\r\n").encode())
        head = b""
        while b"\r\n\r\n" not in head:
            head += self.sock.recv(1)
        self.next_id = 0

    def exact(self, n):
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise OSError("closed")
            data += chunk
        return data

    def send(self, method, params=None, session=None):
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        payload = json.dumps(message).encode()
        mask = os.urandom(4)
        header = bytes([0x81])
        if len(payload) < 126:
            header += bytes([0x80 | len(payload)])
        else:
            header += bytes([0x80 | 126]) + struct.pack(">H", len(payload))
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        self.sock.sendall(header + mask + masked)
        while True:
            first, second = self.exact(2)
            length = second & 0x7F
            if length == 126:
                length = struct.unpack(">H", self.exact(2))[0]
            elif length == 127:
                length = struct.unpack(">Q", self.exact(8))[0]
            answer = json.loads(self.exact(length))
            if answer.get("id") == self.next_id:
                if "error" in answer:
                    raise RuntimeError(f"{method}: {answer['error']}")
                return answer["result"]


def run(args, env, **kwargs):
    return subprocess.run(args, env=env, check=True, capture_output=True, text=True, **kwargs)


def wait_for(check, seconds=30):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.2)
    raise TimeoutError("the view did not get there in time")


def main():
    target_dir, out_dir = (os.path.abspath(a) for a in sys.argv[1:3])
    bp, pilot = os.path.join(target_dir, "bp"), os.path.join(target_dir, "browser-pilot")
    home = tempfile.mkdtemp(prefix="bp-shots-")
    profile = tempfile.mkdtemp(prefix="bp-shots-viewer-")
    env = dict(os.environ, BROWSER_PILOT_HOME=home, NO_COLOR="1")
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    handler = functools.partial(Quiet, directory=os.path.join(ROOT, "tests/fixtures/pages"))
    fixtures = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=fixtures.serve_forever, daemon=True).start()
    viewer = None
    try:
        run([bp, "launch", "--headless"], env)
        page = f"http://127.0.0.1:{fixtures.server_port}/checkout.html"
        run([bp, "open", page], env)
        run([bp, "observe"], env)
        url = run([pilot, "view"], env).stdout.strip()

        sandbox = ["--no-sandbox"] if os.geteuid() == 0 else []
        viewer = subprocess.Popen(
            [CHROMIUM, *sandbox, "--headless=new", "--remote-debugging-port=0", f"--user-data-dir={profile}",
             "--no-first-run", "--hide-scrollbars", "--window-size=1280,720", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        port_file = os.path.join(profile, "DevToolsActivePort")
        wait_for(lambda: os.path.exists(port_file) and len(open(port_file).read().split()) >= 2)
        port, path = open(port_file).read().split()[:2]
        cdp = Cdp(f"ws://127.0.0.1:{port}{path}")
        target = cdp.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = cdp.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]

        def evaluate(expression):
            result = cdp.send("Runtime.evaluate", {"expression": expression, "returnByValue": True},
                              session)
            return result["result"].get("value")

        def shoot(name, width, height, mobile):
            cdp.send("Emulation.setDeviceMetricsOverride",
                     {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": mobile},
                     session)
            time.sleep(0.5)  # one layout and a frame at the new size
            shot = cdp.send("Page.captureScreenshot", {"format": "png"}, session)
            with open(os.path.join(out_dir, name), "wb") as f:
                f.write(base64.b64decode(shot["data"]))

        cdp.send("Emulation.setDeviceMetricsOverride",
                 {"width": 1280, "height": 720, "deviceScaleFactor": 1, "mobile": False}, session)
        cdp.send("Page.navigate", {"url": url}, session)
        wait_for(lambda: evaluate(
            "document.body && document.body.dataset.ready === 'true' && "
            "!!document.querySelector('[data-watch]')"))
        evaluate("document.querySelector('[data-watch]').click(); true")
        wait_for(lambda: (evaluate(
            "Number(document.getElementById('frame').dataset.frames || 0)") or 0) >= 1)
        os.makedirs(out_dir, exist_ok=True)
        shoot("view-1280x720.png", 1280, 720, False)
        shoot("view-phone.png", 390, 844, True)
    finally:
        if viewer is not None:
            viewer.terminate()
            viewer.wait()
        subprocess.run([pilot, "view", "--stop"], env=env, capture_output=True)
        subprocess.run([bp, "disconnect"], env=env, capture_output=True)
        subprocess.run([bp, "stop"], env=env, capture_output=True)
        fixtures.shutdown()
        shutil.rmtree(profile, ignore_errors=True)
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
