"""Browser Pilot client for Python hosts: the contract's adapter pattern in one module.

Copy this file into your host's tree and own it; it is a pattern, not a package to install.
Standard library only, Python 3.10+, typed, asyncio first (``SyncClient`` wraps it for hosts
without an event loop). It speaks only the public stdio protocol (docs/protocol.md) to a child
``browser-pilot bridge --stdio``; docs/clients.md shows how a host maps onto it.

- The exact executable you pin is launched by absolute path, without a shell. stdout is protocol
  only; stderr lines are diagnostics (logged, never parsed).
- Protocol 1.1 and limits are negotiated; tools are discovered from ``tools/list``.
- One ``Client`` is one host work scope: a Workspace (its ``clientKey``) and a Lease that a task
  heartbeats at a third of its TTL.
- The host's tool-call id becomes the ``commandId`` and ``idempotencyKey``: a call the host
  repeats returns its recorded outcome instead of running twice.
- A mutating call whose outcome is unknown raises ``UnknownOutcome``. Nothing is retried
  automatically, least of all that: inspect the page and decide.
- Events: ``poll_events`` -> process every event -> ``acknowledge_events(next_cursor)``. On
  ``cursor_expired``, rebuild your tab and Observation state, then ``reset_event_cursor``.
- Artifacts: ``read_image`` reads the protected file and releases it; ``export_file`` copies it
  into a directory you own and releases it.
- ``recover`` after the bridge, the Broker or the Lease went away: a new bridge, the Workspace of
  the same ``clientKey`` and a new Lease. A Broker that restarted has a new Workspace: the old
  one is reported lost and events start from the new Workspace's cursor, never the old one.
- ``close`` releases the Workspace and shuts the bridge down.

Nothing (tabs, Observations, refs, Artifacts, cursors) is written to disk except your exports.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
import logging
import os
import threading
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Dict, List, Optional, Sequence, TypeVar

JSON = Dict[str, Any]
T = TypeVar("T")

PROTOCOL = {"min": {"major": 1, "minor": 1}, "max": {"major": 1, "minor": 1}}
#: The contract's six. Add "network.read", "network.control" or "page.eval" only when your user
#: asks for the tools they guard.
CAPABILITIES = ("browser.control", "workspace.manage", "observation.read", "action.input",
                "artifact.read", "event.read")
LIMITS = {"maxMessageBytes": 1 << 20, "maxResultBytes": 4 << 20}
EXTENSIONS = {"application/pdf": "pdf", "image/png": "png", "image/jpeg": "jpg"}

log = logging.getLogger("browser_pilot")


class BrokerError(Exception):
    """A structured error. Branch on ``code`` (the stable ``data.code``), never on the message."""

    def __init__(self, code: str, message: str, retryable: bool = False,
                 remediation: Optional[JSON] = None, context: Optional[JSON] = None) -> None:
        super().__init__(f"{code}: {message}")
        self.code, self.message, self.retryable = code, message, retryable
        self.remediation, self.context = remediation, context or {}

    @staticmethod
    def from_rpc(error: JSON) -> BrokerError:
        data = error.get("data") or {}
        message, context = error.get("message", ""), data.get("context")
        if data.get("code") == "unknown_outcome":
            return UnknownOutcome(message, data.get("remediation"), context)
        return BrokerError(data.get("code", "internal_error"), message,
                           bool(data.get("retryable")), data.get("remediation"), context)


class UnknownOutcome(BrokerError):
    """A mutation that may or may not have reached the browser. Never retried: observe first."""

    def __init__(self, message: str, remediation: Optional[JSON] = None,
                 context: Optional[JSON] = None) -> None:
        super().__init__("unknown_outcome", message, False, remediation or {
            "action": "inspect_state", "message": "Observe the page first; never replay."},
            context)


def _unavailable(reason: str) -> BrokerError:
    return BrokerError("broker_unavailable", "the bridge is gone", True,
                       {"action": "restart_session", "message": "Call recover()."},
                       {"reason": reason})


class Bridge:
    """One ``browser-pilot bridge --stdio`` child: whole request lines in, responses by id."""

    def __init__(self, process: asyncio.subprocess.Process,
                 on_event: Optional[Callable[[JSON], None]]) -> None:
        self.process, self.on_event = process, on_event
        self.max_message_bytes = LIMITS["maxMessageBytes"]
        self.closed = asyncio.Event()
        self._ids = itertools.count(1)
        self._pending: Dict[int, asyncio.Future[Optional[JSON]]] = {}
        self._tasks = [asyncio.ensure_future(self._read()), asyncio.ensure_future(self._stderr())]

    @classmethod
    async def launch(cls, executable: str, args: Sequence[str], home: Optional[str] = None,
                     env: Optional[Dict[str, str]] = None,
                     on_event: Optional[Callable[[JSON], None]] = None) -> Bridge:
        for path in (executable, home):
            if path is not None and not os.path.isabs(path):
                raise BrokerError("invalid_params", f"{path} is not an absolute path",
                                  remediation={"action": "use_absolute_path",
                                               "message": "Pin the absolute path."})
        env = dict(os.environ if env is None else env)
        if home:
            env["BROWSER_PILOT_HOME"] = home
        process = await asyncio.create_subprocess_exec(
            executable, "bridge", "--stdio", *args, env=env, stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            limit=LIMITS["maxResultBytes"] + 65536)
        return cls(process, on_event)

    async def _read(self) -> None:
        assert self.process.stdout is not None
        try:
            async for line in self.process.stdout:
                message = json.loads(line)
                if "id" not in message:  # a notification: a low-latency hint, never the record
                    if message.get("method") == "events/event" and self.on_event is not None:
                        try:
                            self.on_event(message["params"]["event"])
                        except Exception:  # the host's callback must not stop the reader
                            log.exception("on_event failed")
                    continue
                future = self._pending.pop(message["id"], None)
                if future is not None and not future.done():
                    future.set_result(message)
        except (ValueError, asyncio.LimitOverrunError) as error:
            log.warning("unreadable bridge output: %s", error)
        finally:
            self.closed.set()
            for future in self._pending.values():
                if not future.done():
                    future.set_result(None)
            self._pending.clear()

    async def _stderr(self) -> None:
        assert self.process.stderr is not None
        async for line in self.process.stderr:
            log.debug("bridge: %s", line.decode("utf-8", "replace").rstrip())

    async def request(self, method: str, params: JSON, mutating: bool = False) -> JSON:
        """The result, or raises ``BrokerError``. ``mutating`` decides what a lost bridge means
        once the line was written: ``UnknownOutcome`` rather than retryable unavailability."""
        if self.closed.is_set():
            raise _unavailable("bridge_closed")
        request_id = next(self._ids)
        line = json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method,
                           "params": params}, separators=(",", ":")).encode() + b"\n"
        if len(line) > self.max_message_bytes:  # the bridge would exit on it
            raise BrokerError("message_too_large", f"{method} is {len(line)} bytes",
                              context={"maxMessageBytes": self.max_message_bytes})
        future: asyncio.Future[Optional[JSON]] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        assert self.process.stdin is not None
        try:
            self.process.stdin.write(line)  # one whole line: writes never interleave
            await self.process.stdin.drain()
        except (ConnectionError, OSError):
            self._pending.pop(request_id, None)
            raise _unavailable("write_failed")
        try:
            message = await future
        finally:
            self._pending.pop(request_id, None)
        if message is None:
            if mutating:
                raise UnknownOutcome(f"the bridge went away after {params.get('name')} was sent",
                                     context={"reason": "bridge_lost",
                                              "commandId": params.get("commandId")})
            raise _unavailable("bridge_lost")
        if "error" in message:
            raise BrokerError.from_rpc(message["error"])
        result: JSON = message["result"]
        return result

    async def close(self) -> None:
        """``shutdown``, EOF, then waits for the process (killed after 5 s)."""
        if not self.closed.is_set():
            try:
                await asyncio.wait_for(self.request("shutdown", {}), 5)
            except (BrokerError, asyncio.TimeoutError):
                pass
        if self.process.stdin is not None and not self.process.stdin.is_closing():
            self.process.stdin.close()
        try:
            await asyncio.wait_for(self.process.wait(), 5)
        except asyncio.TimeoutError:
            self.process.kill()
            await self.process.wait()
        for task in self._tasks:
            task.cancel()


@dataclass
class ClientOptions:
    executable: str  # absolute path of the browser-pilot you pin
    client_id: str  # your product, e.g. "com.example.agent"
    instance_id: str  # this installation, the same after a restart (Principal = id + instance)
    work_scope: str  # the Workspace's clientKey: one per host task or conversation
    client_name: str = ""
    client_version: str = ""
    capabilities: Sequence[str] = CAPABILITIES
    browser: Optional[str] = None  # bridge --browser preference
    home: Optional[str] = None  # an absolute, product-owned BROWSER_PILOT_HOME (isolation)
    env: Optional[Dict[str, str]] = None  # the bridge's environment (default: this process's)
    lease_ttl_ms: int = 30_000
    heartbeats: bool = True
    on_event: Optional[Callable[[JSON], None]] = None  # notifications; poll_events is the record


@dataclass
class Outcome:
    command: JSON  # the Command: id, status, method, mutating, ...
    result: JSON  # the tool's result (its outputSchema)


@dataclass
class EventBatch:
    events: List[JSON]
    next_cursor: str  # acknowledge it once every event is processed
    has_more: bool


@dataclass
class Recovery:
    workspace_lost: bool  # the Broker restarted: tabs, Observations and events start afresh
    previous_workspace_id: str
    workspace_id: str
    event_cursor: str


@dataclass
class _Scope:
    bridge: Bridge
    initialized: JSON
    tools: Dict[str, JSON]
    workspace_id: str
    lease: JSON
    renewal: Optional[asyncio.Task[None]] = field(default=None)
    lease_lost: Optional[BrokerError] = None


class Client:
    """One host work scope over one bridge: a Workspace and its heartbeated Lease."""

    def __init__(self, options: ClientOptions, scope: _Scope, cursor: str) -> None:
        self.options = options
        self.event_cursor = cursor  # the last fully processed cursor, in memory only
        self.target_id: Optional[str] = None  # the tab last opened or addressed
        self._scope = scope
        self._released = False
        digest = hashlib.sha256(options.instance_id.encode()).hexdigest()[:12]
        self._id_scope = "i" + digest  # stable across restarts, as the host's call ids are

    @classmethod
    async def start(cls, options: ClientOptions) -> Client:
        scope, created = await cls._open(options)
        client = cls(options, scope, created["eventCursor"])
        client._start_renewal()
        return client

    @staticmethod
    async def _open(options: ClientOptions) -> tuple[_Scope, JSON]:
        args = ["--browser", options.browser] if options.browser else []
        bridge = await Bridge.launch(options.executable, args, options.home, options.env,
                                     options.on_event)
        try:
            initialized = await bridge.request("initialize", {
                "client": {"id": options.client_id, "instanceId": options.instance_id,
                           "name": options.client_name or options.client_id,
                           "version": options.client_version or "0"},
                "protocol": PROTOCOL, "requestedCapabilities": list(options.capabilities),
                "launchMode": "embedded", "limits": LIMITS})
            bridge.max_message_bytes = initialized["limits"]["connection"]["maxMessageBytes"]
            tools = {t["name"]: t for t in (await bridge.request("tools/list", {}))["tools"]}
            created = await bridge.request("workspaces/create", {"clientKey": options.work_scope})
            workspace_id = created["workspace"]["id"]
            lease = (await bridge.request("leases/create", {
                "workspaceId": workspace_id, "ttlMs": options.lease_ttl_ms}))["lease"]
        except BaseException:
            await bridge.close()
            raise
        return _Scope(bridge, initialized, tools, workspace_id, lease), created

    def _start_renewal(self) -> None:
        if self.options.heartbeats:
            self._scope.renewal = asyncio.ensure_future(self._renew(self._scope))

    async def _renew(self, scope: _Scope) -> None:
        """Heartbeats at a third of the TTL, so two can be late before the Lease lapses."""
        while True:
            await asyncio.sleep(max(scope.lease["ttlMs"] / 3000, 0.2))
            try:
                await self._heartbeat(scope)
            except BrokerError as error:
                if error.code != "internal_error":  # transient: try again next period
                    scope.lease_lost = error
                    return

    async def _heartbeat(self, scope: _Scope) -> JSON:
        renewed = await scope.bridge.request("leases/heartbeat", {
            "workspaceId": scope.workspace_id, "leaseId": scope.lease["id"]})
        scope.lease = renewed["lease"]
        return scope.lease

    # What the host reads ---------------------------------------------------------------------

    @property
    def workspace_id(self) -> str:
        return self._scope.workspace_id

    @property
    def lease_id(self) -> str:
        return str(self._scope.lease["id"])

    @property
    def tools(self) -> Dict[str, JSON]:
        """``tools/list`` by name: scope, mutating, schemas, sensitivity."""
        return self._scope.tools

    @property
    def initialized(self) -> JSON:
        return self._scope.initialized

    @property
    def bridge(self) -> Bridge:
        """The current bridge process (a new one after ``recover``)."""
        return self._scope.bridge

    @property
    def connected(self) -> bool:
        return not self._scope.bridge.closed.is_set()

    @property
    def lease_lost(self) -> Optional[BrokerError]:
        """Why the Lease can no longer be used (expired, bridge gone), or None."""
        return self._scope.lease_lost

    async def wait_disconnected(self) -> None:
        """Returns once the bridge is gone (it exited, or the Broker behind it did)."""
        await self._scope.bridge.closed.wait()

    async def heartbeat(self) -> JSON:
        """One renewal now (the task does this by itself); returns the Lease."""
        return await self._heartbeat(self._scope)

    async def request(self, method: str, params: JSON) -> JSON:
        """A lifecycle method this module does not wrap (``commands/get``, ``commands/cancel``,
        ``artifacts/import``, ``artifacts/retain``, ...)."""
        return await self._scope.bridge.request(method, params)

    # Tool calls ------------------------------------------------------------------------------

    def command_identity(self, tool_call_id: str) -> tuple[str, str]:
        """``(commandId, idempotencyKey)`` of a host tool call."""
        call = str(tool_call_id)
        if len(call) > 128 or not all(c.isalnum() or c in "-_.:" for c in call):
            call = "h" + hashlib.sha256(call.encode()).hexdigest()[:32]
        return f"command:{self._id_scope}-{call}", f"host:{self._id_scope}:{call}"

    async def call(self, tool_call_id: str, name: str, arguments: Optional[JSON] = None,
                   target_id: Optional[str] = None, deadline_ms: Optional[int] = None) -> Outcome:
        """Runs Broker tool ``name`` as the host's tool call ``tool_call_id``."""
        scope = self._scope
        if self._released:
            raise BrokerError("workspace_not_found", "this Workspace was released",
                              context={"state": "released"})
        if scope.lease_lost is not None:
            raise scope.lease_lost
        tool = scope.tools.get(name)
        if tool is None:
            raise BrokerError("tool_not_found", f"no tool {name} (see tools/list)")
        command_id, key = self.command_identity(tool_call_id)
        params: JSON = {"name": name, "arguments": arguments or {}, "commandId": command_id,
                        "idempotencyKey": key}
        if deadline_ms is not None:
            params["deadlineMs"] = deadline_ms
        if tool["scope"] != "connection":
            params.update(workspaceId=scope.workspace_id, leaseId=scope.lease["id"])
        if tool["scope"] == "target":
            params["targetId"] = target_id or self.target_id
            if params["targetId"] is None:
                raise BrokerError("invalid_params", "no tab yet", remediation={
                    "action": "open_tab", "message": "Call browser.open first."})
        outcome = await scope.bridge.request("tools/call", params,
                                             mutating=tool.get("mutating", True))
        result = outcome["result"]
        if isinstance(result.get("targetId"), str):
            self.target_id = result["targetId"]
        return Outcome(outcome["command"], result)

    # Events ----------------------------------------------------------------------------------

    async def poll_events(self, limit: int = 100) -> EventBatch:
        """The events after the acknowledged cursor (which this does not move), up to 10 pages."""
        events: List[JSON] = []
        cursor = self.event_cursor
        for _ in range(10):
            try:
                page = await self._scope.bridge.request("events/poll", {
                    "workspaceId": self.workspace_id, "cursor": cursor, "limit": limit})
            except BrokerError as error:
                if error.code == "cursor_expired":
                    self.target_id = None  # rebuild from browser.tabs.list
                raise
            events.extend(page["events"])
            cursor = page["nextCursor"]
            if not page["hasMore"]:
                return EventBatch(events, cursor, False)
        return EventBatch(events, cursor, True)

    def acknowledge_events(self, next_cursor: str) -> None:
        """Every event up to ``next_cursor`` was processed. Never moves backwards."""
        if _sequence(next_cursor) > _sequence(self.event_cursor):
            self.event_cursor = next_cursor

    async def reset_event_cursor(self) -> str:
        """After ``cursor_expired`` and your rebuild: ``workspaces/get``'s cursor, the baseline."""
        current = await self._scope.bridge.request("workspaces/get",
                                                   {"workspaceId": self.workspace_id})
        self.event_cursor = current["eventCursor"]
        return self.event_cursor

    # Artifacts -------------------------------------------------------------------------------

    def _artifact(self, descriptor: JSON) -> JSON:
        return {"workspaceId": self.workspace_id, "leaseId": self.lease_id,
                "artifactId": descriptor["id"]}

    async def release_artifact(self, descriptor: JSON) -> None:
        await self._scope.bridge.request("artifacts/release", self._artifact(descriptor))

    async def read_image(self, descriptor: JSON) -> bytes:
        """The bytes of an image Artifact, read from its protected path; released afterwards."""
        try:
            got = await self._scope.bridge.request("artifacts/get", self._artifact(descriptor))
            with open(got["path"], "rb") as protected:
                return protected.read()
        finally:
            await self.release_artifact(descriptor)

    async def export_file(self, descriptor: JSON, directory: str) -> str:
        """Copies the Artifact into ``directory`` (absolute, yours; never overwriting), then
        releases it. Returns the path written."""
        stem = descriptor.get("kind", "artifact") + "-" + descriptor["id"].split(":")[-1][:12]
        name = str(descriptor.get("fileName", ""))  # a download's suggested name: page-chosen
        suffix = name.rpartition(".")[2] if "." in name else ""
        extension = suffix if suffix.isalnum() and len(suffix) <= 8 else EXTENSIONS.get(
            descriptor.get("mimeType", ""), "bin")
        try:
            os.makedirs(directory, mode=0o700, exist_ok=True)
            for attempt in itertools.count(1):
                name = f"{stem}.{extension}" if attempt == 1 else f"{stem}-{attempt}.{extension}"
                path = os.path.join(directory, name)
                try:
                    await self._scope.bridge.request("artifacts/export",
                                                     dict(self._artifact(descriptor), path=path))
                    return path
                except BrokerError as error:
                    if error.code != "export_exists" or attempt == 100:
                        raise
            raise AssertionError("unreachable")
        finally:
            await self.release_artifact(descriptor)

    # Recovery and cleanup --------------------------------------------------------------------

    async def recover(self) -> Recovery:
        """A new bridge, the Workspace of the same ``clientKey`` and a new Lease, after the
        bridge, the Broker or the Lease went away. Repeats no call: the host decides."""
        previous, cursor = self._scope, self.event_cursor
        await self._stop(previous)
        self._scope, created = await self._open(self.options)
        lost = self._scope.workspace_id != previous.workspace_id
        # A surviving Workspace keeps its journal, so the acknowledged cursor stays; a new one
        # (the Broker restarted) starts from its own cursor.
        self.event_cursor = created["eventCursor"] if lost else cursor
        self.target_id = None
        self._start_renewal()
        return Recovery(lost, previous.workspace_id, self.workspace_id, self.event_cursor)

    async def _stop(self, scope: _Scope) -> None:
        if scope.renewal is not None:
            scope.renewal.cancel()
        await scope.bridge.close()

    async def close(self, release_workspace: bool = True) -> Optional[BrokerError]:
        """Releases the Workspace (its Lease, managed tabs, Artifacts) and shuts the bridge
        down. Local state is invalid afterwards even if the release failed; returns that error."""
        self._released, self.target_id = True, None
        scope, error = self._scope, None
        if scope.renewal is not None:
            scope.renewal.cancel()
        if release_workspace:
            try:
                await scope.bridge.request("workspaces/release",
                                           {"workspaceId": scope.workspace_id})
            except BrokerError as failure:
                error = failure
        await self._stop(scope)
        return error


def _sequence(cursor: str) -> int:
    try:
        return int(cursor.rsplit(":", 1)[1])
    except (IndexError, ValueError):
        return -1


class SyncClient:
    """``Client`` for hosts without an event loop. The loop, and with it the Lease heartbeats
    and ``on_event``, runs in a background thread; every method blocks until done."""

    def __init__(self, options: ClientOptions) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self.client = self._run(Client.start(options))

    def _run(self, work: Awaitable[T]) -> T:
        async def run() -> T:
            return await work
        return asyncio.run_coroutine_threadsafe(run(), self._loop).result()

    def call(self, tool_call_id: str, name: str, arguments: Optional[JSON] = None,
             target_id: Optional[str] = None, deadline_ms: Optional[int] = None) -> Outcome:
        return self._run(self.client.call(tool_call_id, name, arguments, target_id, deadline_ms))

    def heartbeat(self) -> JSON:
        return self._run(self.client.heartbeat())

    def request(self, method: str, params: JSON) -> JSON:
        return self._run(self.client.request(method, params))

    def poll_events(self, limit: int = 100) -> EventBatch:
        return self._run(self.client.poll_events(limit))

    def acknowledge_events(self, next_cursor: str) -> None:
        self.client.acknowledge_events(next_cursor)

    def reset_event_cursor(self) -> str:
        return self._run(self.client.reset_event_cursor())

    def read_image(self, descriptor: JSON) -> bytes:
        return self._run(self.client.read_image(descriptor))

    def export_file(self, descriptor: JSON, directory: str) -> str:
        return self._run(self.client.export_file(descriptor, directory))

    def recover(self) -> Recovery:
        return self._run(self.client.recover())

    def close(self, release_workspace: bool = True) -> Optional[BrokerError]:
        try:
            return self._run(self.client.close(release_workspace))
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(5)
