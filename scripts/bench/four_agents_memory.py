#!/usr/bin/env python3
"""RSS of our processes while four agents loop on one Broker.

Reproduces the "four agents on one Broker" row of docs/performance.md: four bridges (four
Principals, each with its Workspace and Lease) on one Broker and one headless Chromium, each
looping navigate, observe, click, observe, 10 keystrokes and a screenshot on the harness's
small page; the RSS of every process running the executable is sampled every 200 ms.

    LOOPS=120 BENCH_PEERS_DIR=../shared/bench-peers python3 scripts/bench/four_agents_memory.py

LOOPS: loops per agent (default 120). BENCH_PEERS_DIR and BROWSER_PILOT as in
memory_after_heavy_pages.py.
"""
import os
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from memory_after_heavy_pages import EXE, pss, rss  # noqa: E402
import bench  # noqa: E402
import common  # noqa: E402
from drivers import browser_pilot as driver_module  # noqa: E402
from drivers.browser_pilot import BrowserPilot  # noqa: E402


def main():
    BrowserPilot.executable = EXE
    _server, base = bench.serve_fixtures()
    chromium = common.Chromium("four-agents")
    chromium.wait_ready()
    # One home for every bridge, so all four reach the same Broker.
    home = tempfile.mkdtemp(prefix="four-agents-home-")
    own_mkdtemp = tempfile.mkdtemp
    driver_module.tempfile.mkdtemp = (
        lambda *a, **k: home if k.get("prefix") == "bp-home-" else own_mkdtemp(*a, **k))
    drivers = []
    for index in range(4):
        driver = BrowserPilot(f"agent{index}", own_mkdtemp(), chromium)
        driver.start()
        drivers.append(driver)
    samples, done = [], threading.Event()

    def sample():
        while not done.is_set():
            samples.append((*rss(), pss()))
            time.sleep(0.2)

    def loop(driver, loops):
        for i in range(loops):
            driver.navigate(base + f"small.html?agent={driver.tag}&i={i}")
            observed = driver.snapshot()
            driver.click(driver.find_ref(observed, "checkbox", "I agree"))
            observed = driver.snapshot()
            driver.type(driver.find_ref(observed, "textbox", "Coupon code"), "abcdefghij", keystrokes=True)
            driver.screenshot()

    loops = int(os.environ.get("LOOPS", "120"))
    sampler = threading.Thread(target=sample)
    sampler.start()
    agents = [threading.Thread(target=loop, args=(d, loops)) for d in drivers]
    started = time.time()
    try:
        for agent in agents:
            agent.start()
        for agent in agents:
            agent.join()
    finally:
        done.set()
        sampler.join()
    print(f"{loops} loops per agent in {time.time() - started:.1f} s, {len(samples)} samples")
    for share in (0.25, 0.5, 0.75, 1.0):
        part = samples[:max(1, int(len(samples) * share))]
        print(f"first {int(share * 100)}%: peak RSS {max(s[0] for s in part)} MiB, "
              f"peak PSS {max(s[2] for s in part)} MiB, last {part[-1]}")
    # What the Broker's store holds at the end (rows and payload bytes per table).
    query = ("SELECT (SELECT count(*) FROM events), (SELECT sum(length(payload_json)) FROM events), "
             "(SELECT count(*) FROM commands), (SELECT sum(length(result_json)) FROM commands), "
             "(SELECT count(*) FROM artifacts)")
    held = subprocess.run([EXE, "debug", "sql", query], env={**os.environ, "BROWSER_PILOT_HOME": home},
                          capture_output=True, text=True)
    print("store: events, event bytes, commands, result bytes, artifacts:",
          held.stdout.strip() or held.stderr.strip())
    # The in-memory database's size (pages in use and free) and the pages of each table and
    # index: the database is one buffer of the Broker's heap that never shrinks.
    for query in ("SELECT (SELECT page_count FROM pragma_page_count) AS pages, "
                  "(SELECT freelist_count FROM pragma_freelist_count) AS free, "
                  "(SELECT page_size FROM pragma_page_size) AS page_size",
                  "SELECT count(*), sum(length(result_json)), sum(length(error_json)), sum(result_dropped), "
                  "max(length(result_json)), sum(length(args_hash)) FROM commands",
                  "SELECT name, count(*) AS pages, sum(payload) AS payload FROM dbstat "
                  "GROUP BY name ORDER BY 2 DESC LIMIT 6"):
        held = subprocess.run([EXE, "debug", "sql", query], env={**os.environ, "BROWSER_PILOT_HOME": home},
                              capture_output=True, text=True)
        print("store pages:", " ".join((held.stdout.strip() or held.stderr.strip()).splitlines()))
    for driver in drivers:
        driver.close()
    chromium.close()


if __name__ == "__main__":
    main()
