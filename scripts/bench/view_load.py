#!/usr/bin/env python3
"""The live view's own cost (docs/performance.md, "The live view").

Opens the view of BROWSER_PILOT_HOME (`browser-pilot view`), spends its secret for a token and
then asks the view exactly what its page asks while a tab is watched: the Workspace list and the
tab's events once a second, and the tab's frames over the live channel (the WebSocket at
/api/live, token in its first message), which pushes each screencast frame as it comes. It
watches the first tab of the first Workspace listed. After SECONDS it prints, as JSON: frames and
bytes per second the page would receive, and the CPU seconds per second of the view role, of the
Broker and of the Broker's Chromium with every process under it, over the same time (from /proc,
Linux only).

    BROWSER_PILOT_HOME=... scripts/bench/view_load.py BROWSER_PILOT_EXECUTABLE SECONDS

With SECONDS 0 it runs until interrupted (to hold a view open beside another benchmark) and
prints its totals then. With --list-only it watches no tab: it asks only the Workspace list once
a second, as the page does before a person picks a tab.

    BROWSER_PILOT_HOME=... scripts/bench/view_load.py BROWSER_PILOT_EXECUTABLE SECONDS --list-only
"""

import base64
import json
import os
import socket
import struct
import sys
import threading
import time
import urllib.request

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    """utime + stime of `pid` in seconds; None once it has gone."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except (OSError, TypeError):
        return None
    return (int(fields[11]) + int(fields[12])) / TICKS


def per_second(before, after, elapsed):
    if before is None or after is None:
        return None
    return round((after - before) / elapsed, 4)


def processes():
    """(pid, argv as bytes) of every process that can be read."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                yield int(entry), f.read().split(b"\0")
        except OSError:
            continue


def view_pid(home):
    for pid, argv in processes():
        if b"--browser-pilot-internal=view" not in argv:
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = f.read().split(b"\0")
        except OSError:
            continue
        if f"BROWSER_PILOT_HOME={home}".encode() in env:
            return pid
    return None


def descendants(root):
    """`root` and every process under it."""
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    parents[int(entry)] = int(stat.read().rsplit(")", 1)[1].split()[1])
            except OSError:
                pass
    found, changed = {root}, True
    while changed:
        changed = False
        for pid, parent in parents.items():
            if parent in found and pid not in found:
                found.add(pid)
                changed = True
    return found


def chromium_pid(home):
    """The browser process whose profile is under `home` (a `bp launch` one), if any."""
    for pid, argv in processes():
        if any(a.startswith(b"--user-data-dir=" + home.encode()) for a in argv) and not any(
            a.startswith(b"--type=") for a in argv
        ):
            return pid
    return None


def tree_cpu(root):
    if root is None:
        return None
    return sum(cpu_seconds(pid) or 0 for pid in descendants(root))


class Channel:
    """The live channel as the page opens it: a WebSocket whose first message is the token."""

    def __init__(self, origin, hello):
        host, port = origin.split("//")[1].split(":")
        self.sock = socket.create_connection((host, int(port)), timeout=20)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall(
            (f"GET /api/live HTTP/1.1\r\nHost: {host}:{port}\r\nOrigin: {origin}\r\n"
             f"Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
             "Sec-WebSocket-Version: 13\r\n\r\n").encode())
        head = b""
        while b"\r\n\r\n" not in head:
            head += self.sock.recv(1)
        if b" 101 " not in head.split(b"\r\n")[0]:
            raise OSError(head.decode(errors="replace"))
        self.bytes = len(head)
        payload = json.dumps(hello).encode()
        mask = os.urandom(4)
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        self.sock.sendall(bytes([0x81, 0x80 | 126]) + struct.pack(">H", len(payload)) + mask + masked)

    def exact(self, n):
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise OSError("closed")
            data += chunk
        self.bytes += n
        return data

    def message(self):
        first, second = self.exact(2)
        length = second & 0x7F
        if length == 126:
            length = struct.unpack(">H", self.exact(2))[0]
        elif length == 127:
            length = struct.unpack(">Q", self.exact(8))[0]
        data = self.exact(length)
        if first & 0x0F == 8:
            raise OSError("closed by the view")
        return json.loads(data) if first & 0x0F == 1 else None


class View:
    def __init__(self, url):
        self.origin, secret = url.split("/#bpview=")
        self.bytes = 0
        answer = self.call("POST", "/api/session", headers={"X-BP-Secret": secret})
        self.token = answer["token"]

    def call(self, method, path, headers=None, body=None):
        request = urllib.request.Request(self.origin + path, method=method, data=body)
        for name, value in (headers or {"X-BP-Token": self.token}).items():
            request.add_header(name, value)
        with urllib.request.urlopen(request, timeout=20) as response:
            data = response.read()
        self.bytes += len(data)
        return json.loads(data)


def main():
    executable, seconds = sys.argv[1], float(sys.argv[2])
    list_only = sys.argv[3:] == ["--list-only"]
    home = os.environ["BROWSER_PILOT_HOME"]
    url = os.popen(f"'{executable}' view").read().strip()
    view = View(url)
    stop = threading.Event()
    frames, errors = [0], [0]
    watched = [None]

    def pick():
        # The first tab of the first Workspace, as a person would click Watch on it.
        state = view.call("GET", "/api/state")
        tabs = [(w["workspaceId"], t["targetId"]) for w in state["workspaces"] for t in w["tabs"]]
        watched[0] = tabs[0] if tabs else None

    def query():
        return f"workspaceId={watched[0][0]}&targetId={watched[0][1]}"

    while watched[0] is None and not list_only:
        pick()
        if watched[0] is None:
            time.sleep(0.25)

    def each_second():
        while not stop.wait(1.0):
            try:
                view.call("GET", "/api/state")
                if watched[0] is not None:
                    view.call("GET", "/api/events?" + query())
            except (OSError, ValueError):
                errors[0] += 1

    channel_bytes = [0]

    def frame_loop():
        while not stop.is_set():
            channel = None
            try:
                if watched[0] is None:
                    raise ValueError("no tab to watch")
                hello = {"token": view.token, "workspaceId": watched[0][0], "targetId": watched[0][1]}
                channel = Channel(view.origin, hello)
                channel.sock.settimeout(1.0)
                while not stop.is_set():
                    try:
                        frame = channel.message()
                    except socket.timeout:
                        continue
                    if frame and frame.get("data"):
                        frames[0] += 1
            except (OSError, ValueError):
                # The tab went (the agent closed it): watch the first one listed now.
                errors[0] += 1
                try:
                    pick()
                except (OSError, ValueError):
                    pass
                stop.wait(0.25)
            finally:
                if channel is not None:
                    channel_bytes[0] += channel.bytes
                    channel.sock.close()

    with open(os.path.join(home, "broker-locator.json")) as f:
        broker = json.load(f)["pid"]
    viewer = view_pid(home)
    chromium = chromium_pid(home)
    cpu_before = (cpu_seconds(viewer), cpu_seconds(broker), tree_cpu(chromium))
    started = time.monotonic()
    workers = [threading.Thread(target=each_second)]
    if not list_only:
        workers.append(threading.Thread(target=frame_loop))
    for worker in workers:
        worker.start()
    try:
        if seconds > 0:
            time.sleep(seconds)
        else:
            threading.Event().wait()
    except KeyboardInterrupt:
        pass
    stop.set()
    for worker in workers:
        worker.join()
    elapsed = time.monotonic() - started
    cpu_after = (cpu_seconds(viewer), cpu_seconds(broker), tree_cpu(chromium))
    print(json.dumps({
        "seconds": round(elapsed, 1),
        "framesPerSecond": round(frames[0] / elapsed, 2),
        "errors": errors[0],
        "bytesPerSecond": round((view.bytes + channel_bytes[0]) / elapsed),
        "viewCpuPerSecond": per_second(cpu_before[0], cpu_after[0], elapsed),
        "brokerCpuPerSecond": per_second(cpu_before[1], cpu_after[1], elapsed),
        "chromiumCpuPerSecond": per_second(cpu_before[2], cpu_after[2], elapsed),
    }))


if __name__ == "__main__":
    main()
