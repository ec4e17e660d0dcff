#!/usr/bin/env python3
"""Reference adapter: one dispatcher tool, in stdlib-only Python.

The host gets a single tool, ``browser``, whose arguments are ``{name, arguments, targetId?}``;
it forwards them to the Broker tool of that name (in the spirit of an OpenClaw-style dispatcher
tool). It implements the contract's adapter pattern on its own, over the public stdio protocol
only:

- launches an absolute ``browser-pilot`` path directly (no shell), stdout is protocol only and
  stderr lines are diagnostics;
- negotiates protocol 1.1 and limits, discovers tools at runtime from ``tools/list``;
- maps the host's work scope to a Workspace (``clientKey``) and its active invocation to a Lease
  renewed by its own thread at a third of the TTL;
- host tool-call ids become ``commandId`` + ``idempotencyKey``, derived from the host's stable
  ``instanceId`` and the call id alone (no per-process salt: the host's tool-use ids are unique
  across its restarts, so a call a restarted host repeats returns its recorded outcome instead
  of running again); transport loss after a mutating call was written is returned as
  non-retryable ``unknown_outcome``;
- events: ``poll_events`` -> process -> ``acknowledge_events(next_cursor)``; ``cursor_expired``
  -> rebuild, then ``reset_event_cursor`` from ``workspaces/get``;
- image Artifacts are read from their protected path and released; other files are exported
  into a host-owned directory and released;
- cleanup releases the Workspace explicitly and invalidates local state even if that fails;
- the model reads the lean text (docs/adapters.md, "Lean results"): ``browser.observe`` asks for
  ``format: "compact"`` and answers a page header and one line per element; an action asks for a
  diff against the tab's previous Observation and answers its evidence and what changed.

Nothing (tabs, frames, Observations, refs, credentials, rules, Artifacts, cursors) is written to
disk except the exports the host asked for.

Run: ``python3 dispatcher.py --executable /abs/browser-pilot --url URL --output-dir /abs/dir``
performs one scripted turn and prints a JSON summary line.
"""

import argparse
import base64
import hashlib
import itertools
import json
import os
import queue
import subprocess
import sys
import threading

PROTOCOL = {"min": {"major": 1, "minor": 1}, "max": {"major": 1, "minor": 1}}
CAPABILITIES = ["browser.control", "workspace.manage", "observation.read",
                "action.input", "artifact.read", "event.read"]
LIMITS = {"maxMessageBytes": 1048576, "maxResultBytes": 4194304}


class BrokerError(Exception):
    """A structured error: ``code`` is the stable ``data.code`` to branch on."""

    def __init__(self, code, message, retryable=False, remediation=None, context=None):
        super().__init__(f"{code}: {message}")
        self.code, self.message = code, message
        self.retryable, self.remediation, self.context = retryable, remediation, context or {}

    @classmethod
    def from_rpc(cls, error):
        data = error.get("data") or {}
        return cls(data.get("code", "internal_error"), error.get("message", ""),
                   bool(data.get("retryable")), data.get("remediation"), data.get("context"))

    def as_json(self):
        return {"code": self.code, "message": self.message, "retryable": self.retryable,
                "remediation": self.remediation}


class TransportLost(Exception):
    def __init__(self, sent):
        super().__init__("bridge gone")
        self.sent = sent


class Bridge:
    """``browser-pilot bridge --stdio`` as a child: one writer lock, one reader thread."""

    def __init__(self, executable, client):
        if not os.path.isabs(executable):
            raise BrokerError("invalid_params", "the executable must be an absolute path")
        self.proc = subprocess.Popen([executable, "bridge", "--stdio"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.ids = itertools.count(1)
        self.pending = {}
        self.lock = threading.Lock()  # the pending table
        self.write_lock = threading.Lock()  # whole lines, never interleaved
        self.closed = False
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._diagnostics, daemon=True).start()
        self.init = self.request("initialize", {
            "client": client, "protocol": PROTOCOL, "requestedCapabilities": CAPABILITIES,
            "launchMode": "embedded", "limits": LIMITS})
        self.tools = {t["name"]: t for t in self.request("tools/list", {})["tools"]}

    def _diagnostics(self):
        for line in self.proc.stderr:
            sys.stderr.write("bridge: " + line.decode("utf-8", "replace"))

    def _read(self):
        for line in self.proc.stdout:
            message = json.loads(line)
            if "method" in message:
                continue  # best-effort notifications; the journal is the record
            with self.lock:
                slot = self.pending.pop(message.get("id"), None)
            if slot is not None:
                slot.put(message)
        with self.lock:
            self.closed = True
            waiting, self.pending = self.pending, {}
        for slot in waiting.values():
            slot.put(None)

    def request(self, method, params):
        request_id = next(self.ids)
        slot = queue.Queue(1)
        line = json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method,
                           "params": params}).encode() + b"\n"
        with self.lock:
            if self.closed:
                raise TransportLost(sent=False)
            self.pending[request_id] = slot
        with self.write_lock:
            try:
                self.proc.stdin.write(line)
                self.proc.stdin.flush()
            except OSError:
                with self.lock:
                    self.pending.pop(request_id, None)
                raise TransportLost(sent=False)
        message = slot.get()
        if message is None:
            raise TransportLost(sent=True)
        if "error" in message:
            raise BrokerError.from_rpc(message["error"])
        return message["result"]

    def close(self):
        try:
            self.request("shutdown", {})
        except (BrokerError, TransportLost):
            pass
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()


class LeaseKeeper(threading.Thread):
    """Heartbeats at a third of the TTL, well before ``expiresAt``."""

    def __init__(self, bridge, workspace_id, lease):
        super().__init__(daemon=True)
        self.bridge, self.workspace_id, self.lease_id = bridge, workspace_id, lease["id"]
        self.every = max(lease["ttlMs"] / 3000.0, 0.2)
        self.stopped = threading.Event()
        self.lost = None

    def run(self):
        while not self.stopped.wait(self.every):
            try:
                self.bridge.request("leases/heartbeat", {"workspaceId": self.workspace_id,
                                                         "leaseId": self.lease_id})
            except BrokerError as error:
                if error.code != "internal_error":
                    self.lost = error
                    return
            except TransportLost:
                return


class Dispatcher:
    """The host's single ``browser`` tool over one Workspace and Lease."""

    def __init__(self, executable, work_scope, output_dir, instance_id):
        """``instance_id`` is the host's stable instance (the same after a restart)."""
        instance = instance_id
        self.scope = "i" + hashlib.sha256(instance.encode()).hexdigest()[:12]
        self.bridge = Bridge(executable, {"id": "com.example.dispatcher", "name": "Dispatcher",
                                          "version": "1.0.0", "instanceId": instance})
        self.output_dir = output_dir
        created = self.bridge.request("workspaces/create", {"clientKey": work_scope})
        self.workspace_id = created["workspace"]["id"]
        self.cursor = created["eventCursor"]
        lease = self.bridge.request("leases/create", {"workspaceId": self.workspace_id})["lease"]
        self.keeper = LeaseKeeper(self.bridge, self.workspace_id, lease)
        self.keeper.start()
        self.target = None
        self.observations = {}  # tab -> its latest Observation (the base of the next diff)
        self.released = False

    # The one host tool -------------------------------------------------------------------

    def browser(self, tool_call_id, name, arguments=None, target_id=None):
        """Returns a host result: ``{content: [...], details, isError}``."""
        try:
            return self._dispatch(tool_call_id, name, arguments or {}, target_id)
        except BrokerError as error:
            return {"content": [{"type": "text", "text": f"{error.code}: {error.message}"}],
                    "details": error.as_json(), "isError": True}

    def _dispatch(self, tool_call_id, name, arguments, target_id):
        if self.released:
            raise BrokerError("workspace_not_found", "this Workspace was released",
                              context={"state": "released"})
        if self.keeper.lost is not None:
            raise self.keeper.lost
        tool = self.bridge.tools.get(name)
        if tool is None:
            raise BrokerError("tool_not_found", f"no tool named {name}")
        command_id, key = self.identity(tool_call_id)
        params = {"name": name, "arguments": arguments, "commandId": command_id,
                  "idempotencyKey": key}
        if tool["scope"] != "connection":
            params.update(workspaceId=self.workspace_id, leaseId=self.keeper.lease_id)
        if tool["scope"] == "target":
            target_id = target_id or self.target
            if target_id is None:
                raise BrokerError("invalid_params", "no tab opened or selected yet",
                                  remediation={"action": "open_tab",
                                               "message": "Call browser.open first."})
            params["targetId"] = target_id
            params["arguments"] = lean_arguments(tool, self.observations.get(target_id),
                                                 dict(arguments))
        try:
            outcome = self.bridge.request("tools/call", params)
        except TransportLost as lost:
            if lost.sent and tool.get("mutating", True):
                raise BrokerError("unknown_outcome",
                                  f"the bridge went away after {name} was sent",
                                  context={"commandId": command_id},
                                  remediation={"action": "inspect_state",
                                               "message": "Observe before deciding; never replay."})
            raise BrokerError("broker_unavailable", "the bridge is gone", retryable=True)
        result = outcome["result"]
        if isinstance(result.get("targetId"), str):
            self.target = result["targetId"]
        tab = params.get("targetId") or result.get("targetId")
        if tab and isinstance(result.get("observationId"), str):
            self.observations[tab] = result["observationId"]
        content = [{"type": "text", "text": lean_text(result)}]
        artifact = result.get("artifact")
        if isinstance(artifact, dict):
            content.append(self.artifact_content(artifact))
        self.process_events()
        return {"content": content, "details": result, "isError": False}

    def identity(self, tool_call_id):
        call = str(tool_call_id)
        if len(call) > 128 or not all(c.isalnum() or c in "-_.:" for c in call):
            call = "h" + hashlib.sha256(call.encode()).hexdigest()[:32]
        return f"command:{self.scope}-{call}", f"host:{self.scope}:{call}"

    # Artifacts ---------------------------------------------------------------------------

    def _artifact(self, artifact_id):
        return {"workspaceId": self.workspace_id, "leaseId": self.keeper.lease_id,
                "artifactId": artifact_id}

    def artifact_content(self, descriptor):
        mime = descriptor.get("mimeType", "application/octet-stream")
        if mime.startswith("image/"):
            got = self.bridge.request("artifacts/get", self._artifact(descriptor["id"]))
            try:
                with open(got["path"], "rb") as protected:
                    data = protected.read()
            finally:
                self.bridge.request("artifacts/release", self._artifact(descriptor["id"]))
            return {"type": "image", "mimeType": mime, "data": base64.b64encode(data).decode()}
        os.makedirs(self.output_dir, mode=0o700, exist_ok=True)
        stem = descriptor.get("kind", "artifact") + "-" + descriptor["id"].split(":")[-1][:12]
        extension = {"application/pdf": "pdf"}.get(mime, "bin")
        for attempt in range(1, 101):
            name = f"{stem}.{extension}" if attempt == 1 else f"{stem}-{attempt}.{extension}"
            path = os.path.join(self.output_dir, name)
            params = dict(self._artifact(descriptor["id"]), path=path)
            try:
                self.bridge.request("artifacts/export", params)
                break
            except BrokerError as error:
                if error.code != "export_exists":
                    raise
        self.bridge.request("artifacts/release", self._artifact(descriptor["id"]))
        return {"type": "file", "path": path, "mimeType": mime}

    # Events ------------------------------------------------------------------------------

    def poll_events(self):
        """Events after the acknowledged cursor; the cursor is not advanced here."""
        events, cursor = [], self.cursor
        while True:
            page = self.bridge.request("events/poll", {"workspaceId": self.workspace_id,
                                                       "cursor": cursor, "limit": 100})
            events.extend(page["events"])
            cursor = page["nextCursor"]
            if not page["hasMore"]:
                return events, cursor

    def acknowledge_events(self, next_cursor):
        self.cursor = next_cursor

    def reset_event_cursor(self):
        current = self.bridge.request("workspaces/get", {"workspaceId": self.workspace_id})
        self.cursor = current["eventCursor"]

    def process_events(self):
        try:
            events, next_cursor = self.poll_events()
        except BrokerError as error:
            if error.code != "cursor_expired":
                raise
            self.target = None  # rebuild: tab state is rediscovered with browser.tabs.list
            self.reset_event_cursor()
            return
        for event in events:
            if event["type"] == "connection.restored":
                self.target = None
        self.acknowledge_events(next_cursor)

    # Cleanup -----------------------------------------------------------------------------

    def close(self):
        """Releases the Workspace explicitly; local state is invalid whatever happens."""
        self.released = True
        self.target = None
        self.keeper.stopped.set()
        error = None
        try:
            self.bridge.request("workspaces/release", {"workspaceId": self.workspace_id})
        except (BrokerError, TransportLost) as failure:
            error = failure
        self.bridge.close()
        return error


# Lean text ---------------------------------------------------------------------------------

def lean_arguments(tool, latest, arguments):
    """Compact Observations; an action's closing Observation as a diff against ``latest``."""
    offered = tool.get("inputSchema", {}).get("properties", {})
    if tool["name"] == "browser.observe":
        arguments.setdefault("format", "compact")
        if arguments["format"] == "compact":
            arguments.setdefault("limit", 5000)
            arguments.setdefault("maxTokens", 8000)
    if "observe" in offered and "observe" not in arguments:
        arguments["observe"] = {"format": "compact", "limit": 5000, "maxTokens": 2000}
        if latest:
            arguments["observe"]["sinceObservationId"] = latest
    if latest and "observationId" in offered and "observationId" not in arguments and (
            "ref" in arguments or "toRef" in arguments):
        arguments["observationId"] = latest
    return arguments


def bracketed(line):
    number, _, rest = line.partition(" ")
    return f"[{number}] {rest}" if number.isdigit() else line


# Effects a changed line already shows: the evidence line leaves them out.
SHOWN_BY_LINES = {"checked_changed", "selected_changed", "pressed_changed", "expanded_changed",
                  "value_changed", "focus_changed", "content_appeared", "content_changed",
                  "element_moved", "scrolled"}


def changed_line(line, fields):
    """``~[ref] "name" state``: the current state, without the role (unless it changed) and
    the coordinates."""
    at = line.rfind(" @")
    body = line[:at] if at >= 0 else line
    parts = body.split(" ", 2)
    if len(parts) < 3:
        return "~" + body
    ref, role, rest = parts
    if {"role", "level"} & set(fields):
        return f"~[{ref}] {role} {rest}"
    return f"~[{ref}] {rest}"


def dialog_named_below(line, following):
    """A grouping line ending in a dialog, without the dialog's name when ``following`` is that
    dialog's own line, which names it; else None."""
    at = line.rfind(' dialog "')
    if not line.startswith("##") or at < 0:
        return None
    try:
        section = json.loads(line[at + len(" dialog "):])
        ref, role, rest = following.split(" ", 2)
        name, _ = json.JSONDecoder().raw_decode(rest)
    except ValueError:
        return None
    if not ref.isdigit() or role not in ("dialog", "alertdialog"):
        return None
    return line[:at + len(" dialog")] if section and name.startswith(section) else None


def lean_text(result):
    """The text a model reads: evidence, then a full Observation (header, lines, hints) or what
    changed (``+`` added, ``~`` changed, ``removed``); other results as JSON without the ids."""
    out = []
    evidence = result.get("evidence")
    if isinstance(evidence, dict):
        line = evidence.get("status", "unknown")
        if evidence.get("reason"):
            line += f" ({evidence['reason']})"
        effects = [e for e in evidence.get("effects", []) if e not in SHOWN_BY_LINES]
        if effects:
            line += ": " + ", ".join(effects)
        out.append(line)
    if not isinstance(result.get("observationId"), str):
        if not isinstance(evidence, dict):
            out.append(json.dumps({k: v for k, v in result.items()
                                   if k not in ("workspaceId", "leaseId")}))
        return "\n".join(out)
    lines = [l for l in (result.get("compact") or "").split("\n") if l]
    diff = result.get("diff")
    if isinstance(diff, dict):
        added = set(diff.get("added", []))
        changed = {c["ref"]: c["fields"] for c in diff.get("changed", [])
                   if set(c["fields"]) - {"inViewport", "focused"}}
        for line in lines:
            number = line.split(" ", 1)[0]
            if number.isdigit() and int(number) in added:
                out.append("+" + bracketed(line))
            elif number.isdigit() and int(number) in changed:
                out.append(changed_line(line, changed[int(number)]))
        if diff.get("removed"):
            out.append("removed " + ",".join(str(r) for r in diff["removed"]))
        return "\n".join(out)
    page = result.get("page", {})
    end = page.get("document", {}).get("height", 0) - page.get("viewport", {}).get("height", 0)
    header = json.dumps(result.get("title", "")) + " " + result.get("url", "")
    if end > 0:
        header += f" | scroll {page.get('scroll', {}).get('y', 0)}/{end}"
    if result.get("truncated"):
        shown = sum(1 for line in lines if line.split(" ", 1)[0].isdigit())
        header += (f" | {shown} of {result.get('candidateCount')} shown: browser.scroll, "
                   "then browser.observe for the rest")
    out.append(header)
    for line, following in zip(lines, lines[1:] + [""]):
        out.append(dialog_named_below(line, following) or bracketed(line))
    for hint in result.get("hints", []):
        out.append(f"hint {hint['code']}: {hint['recommendedAction']}")
    return "\n".join(out)


def run_turn(executable, url, output_dir, instance_id=None):
    # This scripted turn numbers its calls from t1 in every run, so unless told otherwise it is
    # a new host instance each time; a real host passes its persistent instanceId.
    instance = instance_id or "install:" + os.urandom(8).hex()
    dispatcher = Dispatcher(executable, "reference-dispatch", output_dir, instance)
    steps = {}

    def step(key, call_id, name, arguments=None, target_id=None):
        result = dispatcher.browser(call_id, name, arguments, target_id)
        steps[key] = {"isError": result["isError"],
                      "content": [c["type"] for c in result["content"]],
                      "text": result["content"][0].get("text"),
                      "code": result["details"].get("code") if result["isError"] else None}
        return result

    step("connect", "t1", "browser.connect")
    step("open", "t2", "browser.open", {"url": url})
    observed = step("observe", "t3", "browser.observe")
    # The model's view: the first checkbox line of the lean text, `[12] checkbox "Agree" ...`.
    checkbox = next((int(line[1:line.index("]")]) for line in observed["content"][0]["text"]
                     .split("\n") if line.startswith("[") and "] checkbox " in line), None)
    clicked = step("click", "t4", "browser.click", {"ref": checkbox})
    steps["click"]["evidence"] = clicked["details"].get("evidence", {}).get("status")
    captured = step("capture", "t5", "browser.capture")
    image = next(c for c in captured["content"] if c["type"] == "image")
    steps["capture"]["png"] = base64.b64decode(image["data"])[:4] == b"\x89PNG"
    printed = step("pdf", "t6", "browser.pdf")
    steps["pdf"]["path"] = next(c["path"] for c in printed["content"] if c["type"] == "file")
    step("error", "t7", "browser.click", {"observationId": "observation:none", "ref": 1})
    step("unknown", "t8", "browser.nothing")
    release_error = dispatcher.close()
    after = dispatcher.browser("t9", "browser.tabs.list")
    return {"tools": sorted(dispatcher.bridge.tools), "steps": steps,
            "releaseError": str(release_error) if release_error else None,
            "afterClose": after["details"].get("code")}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--executable", required=True)
    parser.add_argument("--url", required=True)
    parser.add_argument("--output-dir", required=True)
    parser.add_argument("--instance-id", help="the host's stable instanceId (default: a new one)")
    args = parser.parse_args()
    print(json.dumps(run_turn(args.executable, args.url, args.output_dir, args.instance_id)))


if __name__ == "__main__":
    main()
