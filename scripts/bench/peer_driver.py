"""The peer harness's browser-pilot driver, adapted as its README allows (scripts/bench/peers
puts this file into a copy of the harness; the operations and correctness checks are the
harness's own):

- the snapshot asks for the compact form (`format: "compact"`, docs/observation.md) with the
  manifest's largest `limit`, so the 20,000-element page (25,003 elements) is returned whole;
  `find_ref` reads the compact lines (`ref role "name" ...`);
- `type()` defaults to fill (`keystrokes=False`) like `drivers/base.py` and every other driver,
  so the harness's fill row uses `mode: "fill"` and its keystroke row keystrokes;
- `browser-pilot-mcp` navigates the tab it opened first with `browser_navigate` (`action:
  "goto"`), as the other MCP drivers navigate their current page (Playwright MCP's
  `browser_navigate`, Chrome DevTools MCP's `navigate_page`) and the bridge driver its tab; the
  stock driver calls `browser_open` for every navigation, which opens a new tab in a window of
  its own each time.
"""
import json
import re

from .browser_pilot import BrowserPilot
from .browser_pilot_mcp import BrowserPilotMcp

LINE = re.compile(r'^(\S+) ([a-z]+)(?::\d+)? ("(?:[^"\\]|\\.)*")', re.M)


class BrowserPilotAdapted(BrowserPilot):
    def snapshot(self, interactive=False):
        return self._obs(self._tool("browser.observe", {"limit": 50000, "maxBytes": 4000000,
                                                         "format": "compact"}))

    def find_ref(self, obs, role, name):
        res = json.loads(obs.text)
        for ref, line_role, quoted in LINE.findall(res.get("compact", "")):
            if line_role == role and json.loads(quoted).startswith(name):
                return int(ref) if ref.isdigit() else ref
        return super().find_ref(obs, role, name)

    def type(self, ref, text, keystrokes=False):
        return super().type(ref, text, keystrokes=keystrokes)


class BrowserPilotMcpAdapted(BrowserPilotMcp):
    def start(self):
        super().start()
        self.opened = False

    def navigate(self, url):
        if not self.opened:
            self.opened = True
            return super().navigate(url)
        return self._obs(self.m.tool("browser_navigate", {"action": "goto", "url": url}))
