#!/usr/bin/env python3
"""RSS of our processes (bridge + Broker + janitor) through one bridge, after heavy pages.

Reproduces the "Memory" rows of docs/performance.md: the small page, two
5,000-element Observations, a 20,000-element one in the compact form and one in JSON, then back
to the small page and 3 s idle. It drives the peer harness's own browser-pilot driver and
fixtures against a headless Chromium the harness launches.

    BENCH_PEERS_DIR=../shared/bench-peers python3 scripts/bench/memory_after_heavy_pages.py

BENCH_PEERS_DIR: the harness (default ../shared/bench-peers beside the repository; the
documented numbers used the copy whose snapshot asks for `format: "compact"`, as described in
docs/performance.md). BROWSER_PILOT: the executable (default target/release/browser-pilot).
"""
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.environ.get("BENCH_PEERS_DIR", os.path.join(ROOT, "..", "shared", "bench-peers")))
import bench  # noqa: E402
import common  # noqa: E402
from drivers.browser_pilot import BrowserPilot  # noqa: E402

EXE = os.path.abspath(os.environ.get("BROWSER_PILOT", os.path.join(ROOT, "target", "release", "browser-pilot")))


def rss():
    """Total RSS in MiB of the processes running EXE, and each one's."""
    out = subprocess.run(["ps", "-eo", "rss=,args="], capture_output=True, text=True).stdout
    rows = []
    for line in out.splitlines():
        fields = line.split()
        if len(fields) >= 2 and fields[1] == EXE:
            role = fields[2] if len(fields) > 2 else ""
            rows.append((round(int(fields[0]) / 1024), role.replace("--browser-pilot-internal=", "")))
    return sum(r for r, _ in rows), rows


def pss():
    """Total PSS in MiB of the processes running EXE: each shared page (the executable's code,
    libc) counted once across them, not once per process as summed RSS counts it."""
    total = 0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.readlink(f"/proc/{pid}/exe") != EXE:
                continue
            with open(f"/proc/{pid}/smaps_rollup") as rollup:
                total += next(int(line.split()[1]) for line in rollup if line.startswith("Pss:"))
        except (OSError, StopIteration):
            continue
    return round(total / 1024)


def main():
    BrowserPilot.executable = EXE
    _server, base = bench.serve_fixtures()
    chromium = common.Chromium("memory")
    chromium.wait_ready()
    driver = BrowserPilot("memory", tempfile.mkdtemp(), chromium)
    driver.start()
    try:
        driver.navigate(base + "small.html")
        driver.snapshot()
        print("after the small page", rss(), "PSS", pss())
        driver.navigate(base + "large.html")
        driver.snapshot()
        driver.snapshot()
        print("after two 5,000-element Observations", rss(), "PSS", pss())
        driver.navigate(base + "huge.html")
        driver.snapshot()
        print("after a 20,000-element Observation", rss(), "PSS", pss())
        driver._tool("browser.observe", {"limit": 50000, "maxBytes": 4000000})
        print("after a 20,000-element Observation in JSON", rss(), "PSS", pss())
        driver.navigate(base + "small.html")
        driver.snapshot()
        time.sleep(3)
        print("idle 3 s later, back on the small page", rss(), "PSS", pss())
    finally:
        driver.close()
        chromium.close()


if __name__ == "__main__":
    main()
