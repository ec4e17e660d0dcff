// Browser Pilot client for TypeScript and JavaScript hosts: the contract's adapter pattern in one
// module.
//
// Copy this file and browser-pilot-client.d.mts (its types) into your host's tree and own
// them; it is a pattern, not a package to install. ESM, Node 18+, no dependencies. It speaks
// only the public stdio protocol (docs/protocol.md) to a child `browser-pilot bridge --stdio`;
// docs/clients.md shows how a host maps onto it. The same surface as the Python client:
//
// - The exact executable you pin is launched by absolute path, without a shell. stdout is
//   protocol only; stderr lines are diagnostics (handed to onDiagnostic, never parsed).
// - Protocol 1.1 and limits are negotiated; tools are discovered from `tools/list`.
// - One Client is one host work scope: a Workspace (its `clientKey`) and a Lease that a timer
//   heartbeats at a third of its TTL.
// - The host's tool-call id becomes the `commandId` and `idempotencyKey`: a call the host repeats
//   returns its recorded outcome instead of running twice.
// - A mutating call whose outcome is unknown throws UnknownOutcome. Nothing is retried
//   automatically, least of all that: inspect the page and decide.
// - Events: pollEvents -> process every event -> acknowledgeEvents(nextCursor). On
//   `cursor_expired`, rebuild your tab and Observation state, then resetEventCursor.
// - Artifacts: readImage reads the protected file and releases it; exportFile copies it into a
//   directory you own and releases it.
// - recover() after the bridge, the Broker or the Lease went away: a new bridge, the Workspace of
//   the same `clientKey` and a new Lease. A Broker that restarted has a new Workspace: the old one
//   is reported lost and events start from the new Workspace's cursor, never the old one.
// - close() releases the Workspace and shuts the bridge down.
//
// Nothing (tabs, Observations, refs, Artifacts, cursors) is written to disk except your exports.

import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdir, readFile } from "node:fs/promises";
import { isAbsolute, join } from "node:path";
import { createInterface } from "node:readline";

export const PROTOCOL = { min: { major: 1, minor: 1 }, max: { major: 1, minor: 1 } };
/** The contract's six. Add "network.read", "network.control" or "page.eval" only when your user
 * asks for the tools they guard. */
export const CAPABILITIES = Object.freeze(["browser.control", "workspace.manage",
  "observation.read", "action.input", "artifact.read", "event.read"]);
export const LIMITS = { maxMessageBytes: 1 << 20, maxResultBytes: 4 << 20 };
const EXTENSIONS = { "application/pdf": "pdf", "image/png": "png", "image/jpeg": "jpg" };

/** A structured error. Branch on `code` (the stable `data.code`), never on the message. */
export class BrokerError extends Error {
  constructor(code, message, { retryable = false, remediation, context } = {}) {
    super(`${code}: ${message}`);
    this.name = "BrokerError";
    this.code = code;
    this.retryable = retryable;
    this.remediation = remediation;
    this.context = context ?? {};
  }

  static fromRpc(error) {
    const data = error.data ?? {};
    if (data.code === "unknown_outcome") {
      return new UnknownOutcome(error.message, data);
    }
    return new BrokerError(data.code ?? "internal_error", error.message ?? "", {
      retryable: Boolean(data.retryable), remediation: data.remediation, context: data.context });
  }
}

/** A mutation that may or may not have reached the browser. Never retried: observe first. */
export class UnknownOutcome extends BrokerError {
  constructor(message, { remediation, context } = {}) {
    super("unknown_outcome", message, { retryable: false, context, remediation: remediation ?? {
      action: "inspect_state", message: "Observe the page first; never replay." } });
    this.name = "UnknownOutcome";
  }
}

function unavailable(reason) {
  return new BrokerError("broker_unavailable", "the bridge is gone", { retryable: true,
    remediation: { action: "restart_session", message: "Call recover()." }, context: { reason } });
}

/** One `browser-pilot bridge --stdio` child: whole request lines in, responses by id. */
export class Bridge {
  #child;
  #pending = new Map();
  #nextId = 1;

  constructor(child, { onEvent, onDiagnostic } = {}) {
    this.#child = child;
    this.maxMessageBytes = LIMITS.maxMessageBytes;
    this.isClosed = false;
    this.closed = new Promise((resolve) => {
      createInterface({ input: child.stdout, crlfDelay: Infinity })
        .on("line", (line) => this.#receive(line, onEvent))
        .on("close", () => {
          this.isClosed = true;
          for (const settle of this.#pending.values()) settle(null);
          this.#pending.clear();
          resolve();
        });
    });
    createInterface({ input: child.stderr }).on("line", (line) => onDiagnostic?.(line));
    child.stdin.on("error", () => {}); // a dead bridge shows as the end of its stdout
  }

  static async launch(executable, args, { home, env, onEvent, onDiagnostic } = {}) {
    for (const path of [executable, home]) {
      if (path !== undefined && !isAbsolute(path)) {
        throw new BrokerError("invalid_params", `${path} is not an absolute path`, {
          remediation: { action: "use_absolute_path", message: "Pin the absolute path." } });
      }
    }
    const childEnv = { ...(env ?? process.env), ...(home ? { BROWSER_PILOT_HOME: home } : {}) };
    const child = spawn(executable, ["bridge", "--stdio", ...args], { env: childEnv,
      shell: false, stdio: ["pipe", "pipe", "pipe"] });
    await new Promise((resolve, reject) => child.once("spawn", resolve).once("error", reject));
    return new Bridge(child, { onEvent, onDiagnostic });
  }

  /** The bridge's process id. */
  get pid() { return this.#child.pid; }

  #receive(line, onEvent) {
    let message;
    try {
      message = JSON.parse(line);
    } catch {
      return; // stdout is protocol only; nothing else is expected there
    }
    if (!("id" in message)) { // a notification: a low-latency hint, never the record
      if (message.method === "events/event") {
        try { onEvent?.(message.params.event); } catch { /* the host's callback */ }
      }
      return;
    }
    const settle = this.#pending.get(message.id);
    this.#pending.delete(message.id);
    settle?.(message);
  }

  /** The result, or throws BrokerError. `mutating` decides what a lost bridge means once the
   * line was written: UnknownOutcome rather than retryable unavailability. */
  async request(method, params, mutating = false) {
    if (this.isClosed) throw unavailable("bridge_closed");
    const id = this.#nextId++;
    const line = JSON.stringify({ jsonrpc: "2.0", id, method, params }) + "\n";
    if (Buffer.byteLength(line) > this.maxMessageBytes) { // the bridge would exit on it
      throw new BrokerError("message_too_large", `${method} is ${Buffer.byteLength(line)} bytes`,
        { context: { maxMessageBytes: this.maxMessageBytes } });
    }
    const answer = new Promise((settle) => this.#pending.set(id, settle));
    this.#child.stdin.write(line); // one whole line: writes never interleave
    const message = await answer;
    if (message === null) {
      if (mutating) {
        throw new UnknownOutcome(`the bridge went away after ${params.name} was sent`, {
          context: { reason: "bridge_lost", commandId: params.commandId } });
      }
      throw unavailable("bridge_lost");
    }
    if (message.error) throw BrokerError.fromRpc(message.error);
    return message.result;
  }

  /** `shutdown`, EOF, then waits for the process (killed after 5 s). */
  async close() {
    const within = (promise) => Promise.race([promise,
      new Promise((resolve) => setTimeout(resolve, 5000, "timeout").unref())]);
    if (!this.isClosed) await within(this.request("shutdown", {}).catch(() => {}));
    this.#child.stdin.end();
    const exited = this.#child.exitCode !== null || this.#child.signalCode !== null ||
      (await within(new Promise((resolve) => this.#child.once("exit", resolve)))) !== "timeout";
    if (!exited) this.#child.kill("SIGKILL");
    await this.closed;
  }
}

/** One host work scope over one bridge: a Workspace and its heartbeated Lease. */
export class Client {
  #scope;
  #released = false;
  #idScope;

  constructor(options, scope, cursor) {
    this.options = options;
    this.eventCursor = cursor; // the last fully processed cursor, in memory only
    this.targetId = null; // the tab last opened or addressed
    this.#scope = scope;
    const digest = createHash("sha256").update(options.instanceId).digest("hex").slice(0, 12);
    this.#idScope = "i" + digest; // stable across restarts, as the host's call ids are
  }

  static async start(options) {
    const [scope, created] = await Client.#open(options);
    const client = new Client(options, scope, created.eventCursor);
    client.#startRenewal();
    return client;
  }

  static async #open(options) {
    const args = options.browser ? ["--browser", options.browser] : [];
    const bridge = await Bridge.launch(options.executable, args, options);
    try {
      const initialized = await bridge.request("initialize", {
        client: { id: options.clientId, instanceId: options.instanceId,
          name: options.clientName ?? options.clientId, version: options.clientVersion ?? "0" },
        protocol: PROTOCOL, requestedCapabilities: [...(options.capabilities ?? CAPABILITIES)],
        launchMode: "embedded", limits: LIMITS });
      bridge.maxMessageBytes = initialized.limits.connection.maxMessageBytes;
      const listed = await bridge.request("tools/list", {});
      const tools = Object.fromEntries(listed.tools.map((tool) => [tool.name, tool]));
      const created = await bridge.request("workspaces/create", { clientKey: options.workScope });
      const workspaceId = created.workspace.id;
      const { lease } = await bridge.request("leases/create", { workspaceId,
        ttlMs: options.leaseTtlMs ?? 30000 });
      return [{ bridge, initialized, tools, workspaceId, lease, leaseLost: null }, created];
    } catch (error) {
      await bridge.close();
      throw error;
    }
  }

  /** Heartbeats at a third of the TTL, so two can be late before the Lease lapses. */
  #startRenewal() {
    const scope = this.#scope;
    if (this.options.heartbeats === false) return;
    const tick = async () => {
      try {
        await this.#heartbeat(scope);
      } catch (error) {
        if (error.code !== "internal_error") { // transient: try again next period
          scope.leaseLost = error;
          return;
        }
      }
      if (!scope.stopped) scope.timer = setTimeout(tick, Math.max(scope.lease.ttlMs / 3, 200));
    };
    scope.timer = setTimeout(tick, Math.max(scope.lease.ttlMs / 3, 200));
  }

  async #heartbeat(scope) {
    const renewed = await scope.bridge.request("leases/heartbeat", {
      workspaceId: scope.workspaceId, leaseId: scope.lease.id });
    scope.lease = renewed.lease;
    return scope.lease;
  }

  // What the host reads ---------------------------------------------------------------------

  get workspaceId() { return this.#scope.workspaceId; }
  get leaseId() { return this.#scope.lease.id; }
  /** `tools/list` by name: scope, mutating, schemas, sensitivity. */
  get tools() { return this.#scope.tools; }
  get initialized() { return this.#scope.initialized; }
  /** The current bridge process (a new one after recover()). */
  get bridge() { return this.#scope.bridge; }
  get connected() { return !this.#scope.bridge.isClosed; }
  /** Why the Lease can no longer be used (expired, bridge gone), or null. */
  get leaseLost() { return this.#scope.leaseLost; }

  /** Resolves once the bridge is gone (it exited, or the Broker behind it did). */
  waitDisconnected() { return this.#scope.bridge.closed; }

  /** One renewal now (the timer does this by itself); returns the Lease. */
  heartbeat() { return this.#heartbeat(this.#scope); }

  /** A lifecycle method this module does not wrap (`commands/get`, `commands/cancel`,
   * `artifacts/import`, `artifacts/retain`, ...). */
  request(method, params) { return this.#scope.bridge.request(method, params); }

  // Tool calls ------------------------------------------------------------------------------

  /** `[commandId, idempotencyKey]` of a host tool call. */
  commandIdentity(toolCallId) {
    let call = String(toolCallId);
    if (call.length > 128 || !/^[A-Za-z0-9_.:-]+$/.test(call)) {
      call = "h" + createHash("sha256").update(call).digest("hex").slice(0, 32);
    }
    return [`command:${this.#idScope}-${call}`, `host:${this.#idScope}:${call}`];
  }

  /** Runs Broker tool `name` as the host's tool call `toolCallId`; resolves `{command, result}`. */
  async call(toolCallId, name, args = {}, { targetId, deadlineMs } = {}) {
    const scope = this.#scope;
    if (this.#released) {
      throw new BrokerError("workspace_not_found", "this Workspace was released", {
        context: { state: "released" } });
    }
    if (scope.leaseLost) throw scope.leaseLost;
    const tool = scope.tools[name];
    if (!tool) throw new BrokerError("tool_not_found", `no tool ${name} (see tools/list)`);
    const [commandId, idempotencyKey] = this.commandIdentity(toolCallId);
    const params = { name, arguments: args, commandId, idempotencyKey };
    if (deadlineMs !== undefined) params.deadlineMs = deadlineMs;
    if (tool.scope !== "connection") {
      Object.assign(params, { workspaceId: scope.workspaceId, leaseId: scope.lease.id });
    }
    if (tool.scope === "target") {
      params.targetId = targetId ?? this.targetId;
      if (!params.targetId) {
        throw new BrokerError("invalid_params", "no tab yet", {
          remediation: { action: "open_tab", message: "Call browser.open first." } });
      }
    }
    const { command, result } = await scope.bridge.request("tools/call", params,
      tool.mutating ?? true);
    if (typeof result.targetId === "string") this.targetId = result.targetId;
    return { command, result };
  }

  // Events ----------------------------------------------------------------------------------

  /** The events after the acknowledged cursor (which this does not move), up to 10 pages. */
  async pollEvents(limit = 100) {
    const events = [];
    let cursor = this.eventCursor;
    for (let page = 0; page < 10; page++) {
      let polled;
      try {
        polled = await this.#scope.bridge.request("events/poll", {
          workspaceId: this.workspaceId, cursor, limit });
      } catch (error) {
        if (error.code === "cursor_expired") this.targetId = null; // rebuild from tabs.list
        throw error;
      }
      events.push(...polled.events);
      cursor = polled.nextCursor;
      if (!polled.hasMore) return { events, nextCursor: cursor, hasMore: false };
    }
    return { events, nextCursor: cursor, hasMore: true };
  }

  /** Every event up to `nextCursor` was processed. Never moves backwards. */
  acknowledgeEvents(nextCursor) {
    if (sequence(nextCursor) > sequence(this.eventCursor)) this.eventCursor = nextCursor;
  }

  /** After `cursor_expired` and your rebuild: `workspaces/get`'s cursor is the baseline. */
  async resetEventCursor() {
    const current = await this.#scope.bridge.request("workspaces/get", {
      workspaceId: this.workspaceId });
    this.eventCursor = current.eventCursor;
    return this.eventCursor;
  }

  // Artifacts -------------------------------------------------------------------------------

  #artifact(descriptor) {
    return { workspaceId: this.workspaceId, leaseId: this.leaseId, artifactId: descriptor.id };
  }

  async releaseArtifact(descriptor) {
    await this.#scope.bridge.request("artifacts/release", this.#artifact(descriptor));
  }

  /** The bytes of an image Artifact, read from its protected path; released afterwards. */
  async readImage(descriptor) {
    try {
      const { path } = await this.#scope.bridge.request("artifacts/get",
        this.#artifact(descriptor));
      return await readFile(path);
    } finally {
      await this.releaseArtifact(descriptor);
    }
  }

  /** Copies the Artifact into `directory` (absolute, yours; never overwriting), then releases
   * it. Resolves the path written. */
  async exportFile(descriptor, directory) {
    try {
      await mkdir(directory, { recursive: true, mode: 0o700 });
      const id = descriptor.id.split(":").pop().slice(0, 12);
      const stem = `${descriptor.kind ?? "artifact"}-${id}`;
      const name = String(descriptor.fileName ?? ""); // a download's suggested name: page-chosen
      const suffix = name.includes(".") ? name.split(".").pop() : "";
      const extension = /^[A-Za-z0-9]{1,8}$/.test(suffix) ? suffix
        : EXTENSIONS[descriptor.mimeType] ?? "bin";
      for (let attempt = 1; ; attempt++) {
        const path = join(directory, attempt === 1 ? `${stem}.${extension}`
          : `${stem}-${attempt}.${extension}`);
        try {
          await this.#scope.bridge.request("artifacts/export", { ...this.#artifact(descriptor),
            path });
          return path;
        } catch (error) {
          if (error.code !== "export_exists" || attempt === 100) throw error;
        }
      }
    } finally {
      await this.releaseArtifact(descriptor);
    }
  }

  // Recovery and cleanup --------------------------------------------------------------------

  /** A new bridge, the Workspace of the same `clientKey` and a new Lease, after the bridge, the
   * Broker or the Lease went away. Repeats no call: the host decides. */
  async recover() {
    const previous = this.#scope;
    const cursor = this.eventCursor;
    await Client.#stop(previous);
    const [scope, created] = await Client.#open(this.options);
    this.#scope = scope;
    const workspaceLost = scope.workspaceId !== previous.workspaceId;
    // A surviving Workspace keeps its journal, so the acknowledged cursor stays; a new one (the
    // Broker restarted) starts from its own cursor.
    this.eventCursor = workspaceLost ? created.eventCursor : cursor;
    this.targetId = null;
    this.#startRenewal();
    return { workspaceLost, previousWorkspaceId: previous.workspaceId,
      workspaceId: scope.workspaceId, eventCursor: this.eventCursor };
  }

  static async #stop(scope) {
    scope.stopped = true;
    clearTimeout(scope.timer);
    await scope.bridge.close();
  }

  /** Releases the Workspace (its Lease, managed tabs, Artifacts) and shuts the bridge down.
   * Local state is invalid afterwards even if the release failed; resolves that error or null. */
  async close({ releaseWorkspace = true } = {}) {
    this.#released = true;
    this.targetId = null;
    const scope = this.#scope;
    scope.stopped = true;
    clearTimeout(scope.timer);
    let failure = null;
    if (releaseWorkspace) {
      try {
        await scope.bridge.request("workspaces/release", { workspaceId: scope.workspaceId });
      } catch (error) {
        failure = error;
      }
    }
    await Client.#stop(scope);
    return failure;
  }
}

function sequence(cursor) {
  const n = Number(String(cursor).split(":").pop());
  return Number.isInteger(n) ? n : -1;
}
