// The TypeScript client against the real executable and a managed headless Chromium (`node
// --test`): a full agent loop, a Broker or a bridge killed mid-click, Lease heartbeats through
// 10 s idle, Artifacts released. Each test has its own BROWSER_PILOT_HOME and browser, removed
// after it.

import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import { rm } from "node:fs/promises";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { describe, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { fileURLToPath } from "node:url";

import { BrokerError, Client, UnknownOutcome } from "./browser-pilot-client.mjs";

const ROOT = fileURLToPath(new URL("../../..", import.meta.url));
const EXECUTABLE = resolve(process.env.BROWSER_PILOT_EXECUTABLE ??
  join(ROOT, "target", "debug", "browser-pilot"));
const BP = join(dirname(EXECUTABLE), "bp");

const PAGES = {
  "/form": `<!doctype html><title>Sign up</title><h1>Sign up</h1>
<label>Name <input id="name"></label>
<label><input type="checkbox" id="agree"> Agree to the terms</label>`,
  // The click handler asks /hold synchronously, so the click is in flight until release().
  "/held": `<!doctype html><title>Checkout</title>
<button onclick="const x = new XMLHttpRequest(); x.open('GET', '/hold', false); x.send();
document.title = 'Ordered'">Place order</button>`,
};

/** Fixture pages on 127.0.0.1. `/hold` is answered only after release() (or 30 s). */
async function servePages(t) {
  const hits = new Map();
  let release;
  const released = new Promise((resolve) => { release = resolve; });
  let markHeld;
  const held = new Promise((resolve) => { markHeld = resolve; });
  const server = createServer(async (request, response) => {
    hits.set(request.url, (hits.get(request.url) ?? 0) + 1);
    if (request.url === "/hold") {
      markHeld();
      await Promise.race([released, sleep(30000, null, { ref: false })]);
    }
    response.writeHead(200, { "Content-Type": "text/html" });
    response.end(PAGES[request.url] ?? "<title>fixture</title>");
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  t.after(() => { release(); server.closeAllConnections(); server.close(); });
  const url = (path) => `http://127.0.0.1:${server.address().port}${path}`;
  return { url, hits, held, release };
}

/** Runs a command to its end without blocking the event loop (the other tests' heartbeats run
 * on it): its exit code. */
function run(program, args, env) {
  return new Promise((resolve) => execFile(program, args, { env, timeout: 60000 },
    (error) => resolve(error ? error.code ?? 1 : 0)));
}

/** A temporary BROWSER_PILOT_HOME (with a managed headless Chromium when asked), stopped and
 * removed after the test. */
async function makeHome(t, { browser = true } = {}) {
  const home = mkdtempSync(join(tmpdir(), "browser-pilot-client-"));
  const env = { ...process.env, BROWSER_PILOT_HOME: home };
  t.after(async () => {
    let broker = null;
    try { broker = brokerPid(home); } catch { /* none started */ }
    for (const [program, ...args] of [[EXECUTABLE, "browser", "stop"], [BP, "disconnect"]]) {
      await run(program, args, env);
    }
    if (broker !== null) { // also one that a failed test left serving a client
      try { process.kill(broker, "SIGTERM"); } catch { /* gone */ }
      // Its own cleanup writes in the home until it exits.
      for (let wait = 0; wait < 100 && alive(broker); wait++) await sleep(100);
    }
    for (let attempt = 0; attempt < 10; attempt++) {
      try { await rm(home, { recursive: true }); return; } catch { await sleep(500); }
    }
  });
  if (browser) {
    assert.equal(await run(EXECUTABLE, ["browser", "launch", "--headless"], env), 0);
  }
  return home;
}

/** Running, not a zombie (an exited Broker's parent may be slow to reap it). */
function alive(pid) {
  try {
    return readFileSync(`/proc/${pid}/stat`, "utf8").split(")").pop().trim()[0] !== "Z";
  } catch {
    return false;
  }
}

/** The test's own Broker (the test reads the locator; a host never does). */
function brokerPid(home) {
  const { pid } = JSON.parse(readFileSync(join(home, "broker-locator.json"), "utf8"));
  const cmdline = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0");
  assert.ok(cmdline.includes("--browser-pilot-internal=broker"));
  return pid;
}

function options(home, scope, overrides = {}) {
  return { executable: EXECUTABLE, clientId: "com.example.typescript-client",
    instanceId: `install:${scope}`, workScope: scope, home, ...overrides };
}

function ref(observation, role, name) {
  return observation.elements.find((e) => e.role === role && (e.name ?? "").includes(name)).ref;
}

async function assertReleased(client, artifact) {
  await assert.rejects(client.request("artifacts/get", { workspaceId: client.workspaceId,
    leaseId: client.leaseId, artifactId: artifact.id }), { code: "artifact_not_found" });
}

describe("TypeScript client", { concurrency: true }, () => {
  test("an agent loop observes, clicks, types, captures and releases its Artifacts", async (t) => {
    const home = await makeHome(t);
    const pages = await servePages(t);
    const exports = join(home, "..", `${home.split("/").pop()}-exports`);
    t.after(() => rm(exports, { recursive: true, force: true }));
    const client = await Client.start(options(home, "agent-loop", {
      env: { ...process.env, BROWSER_PILOT_EVENT_JOURNAL_SIZE: "16" } })); // it wraps soon
    try {
      assert.deepEqual(client.initialized.protocol, { major: 1, minor: 1 });
      for (const name of ["browser.click", "browser.type", "browser.capture"]) {
        assert.ok(client.tools[name], name);
      }
      assert.equal(client.tools["browser.eval"], undefined); // an extra, not requested
      await client.call("toolu_01", "browser.connect");
      const opened = await client.call("toolu_02", "browser.open", { url: pages.url("/form") });
      assert.equal(client.targetId, opened.result.targetId);
      const seen = (await client.call("toolu_03", "browser.observe")).result;

      const click = { observationId: seen.observationId, ref: ref(seen, "checkbox", "Agree") };
      const clicked = await client.call("toolu_04", "browser.click", click);
      assert.equal(clicked.command.id, client.commandIdentity("toolu_04")[0]);
      assert.equal(clicked.result.evidence.status, "verified");
      // The host repeats its call: the recorded outcome, not a second click.
      const again = await client.call("toolu_04", "browser.click", click);
      assert.deepEqual(again.command, clicked.command);
      const typed = await client.call("toolu_05", "browser.type", {
        observationId: clicked.result.observationId,
        ref: ref(clicked.result, "textbox", "Name"), text: "Ada" });
      assert.equal(typed.result.evidence.status, "verified");
      const now = (await client.call("toolu_06", "browser.observe")).result;
      assert.equal(now.elements.find((e) => e.role === "checkbox").checked, true);

      const shot = (await client.call("toolu_07", "browser.capture")).result.artifact;
      const png = await client.readImage(shot);
      assert.deepEqual([...png.subarray(0, 8)], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
      await assertReleased(client, shot);
      const pdf = (await client.call("toolu_08", "browser.pdf")).result.artifact;
      const path = await client.exportFile(pdf, exports);
      assert.equal(readFileSync(path).subarray(0, 5).toString(), "%PDF-");
      await assertReleased(client, pdf);

      await assert.rejects(client.call("toolu_09", "browser.click",
        { observationId: "observation:0", ref: 1 }),
      { code: "observation_not_found", retryable: false });

      // Events: a poll does not move the cursor; acknowledging does.
      const first = await client.pollEvents();
      assert.equal(first.events[0].sequence, 1);
      assert.equal(first.hasMore, false);
      assert.ok(first.events.some((e) => e.type === "target.attached"));
      assert.deepEqual((await client.pollEvents()).events, first.events);
      client.acknowledgeEvents(first.nextCursor);
      assert.deepEqual((await client.pollEvents()).events, []);

      // More than the journal holds past the cursor: cursor_expired, then a new baseline.
      for (let n = 0; n < 17; n++) await client.call(`toolu_list_${n}`, "browser.tabs.list");
      await assert.rejects(client.pollEvents(), { code: "cursor_expired" });
      assert.equal(client.targetId, null); // rebuilt from browser.tabs.list
      const { tabs } = (await client.call("toolu_10", "browser.tabs.list")).result;
      assert.ok(tabs.some((tab) => tab.targetId === opened.result.targetId));
      const baseline = await client.resetEventCursor();
      assert.equal(client.eventCursor, baseline);
      assert.deepEqual((await client.pollEvents()).events, []);
    } finally {
      assert.equal(await client.close(), null);
    }
    await assert.rejects(client.call("toolu_11", "browser.tabs.list"),
      { code: "workspace_not_found" });
  });

  test("a Broker killed mid-click is unknown_outcome and recovery starts a new Workspace",
    async (t) => {
      const home = await makeHome(t);
      const pages = await servePages(t);
      const client = await Client.start(options(home, "broker-loss"));
      try {
        await client.call("call-1", "browser.connect");
        await client.call("call-2", "browser.open", { url: pages.url("/held") });
        const seen = (await client.call("call-3", "browser.observe")).result;
        const batch = await client.pollEvents();
        client.acknowledgeEvents(batch.nextCursor);
        const oldCursor = client.eventCursor;
        const oldWorkspace = client.workspaceId;
        assert.notEqual(oldCursor, "cursor:0");

        const click = client.call("call-4", "browser.click", {
          observationId: seen.observationId, ref: ref(seen, "button", "Place order") });
        click.catch(() => {}); // awaited below
        await pages.held;
        const broker = brokerPid(home);
        process.kill(broker, "SIGKILL");
        await assert.rejects(click, (error) => {
          assert.ok(error instanceof UnknownOutcome);
          assert.equal(error.code, "unknown_outcome");
          assert.equal(error.retryable, false);
          assert.equal(error.context.reason, "broker_lost"); // answered by the bridge
          assert.equal(error.remediation.action, "inspect_state");
          return true;
        });
        pages.release();
        await client.waitDisconnected();
        await assert.rejects(client.call("call-5", "browser.observe"),
          { code: "broker_unavailable", retryable: true });

        // Recover once the killed process is gone: a new bridge that reached the Broker's
        // socket sooner once answered browser_disconnected (alive but no handshake).
        while (alive(broker)) await sleep(50);
        const recovery = await client.recover();
        assert.equal(recovery.workspaceLost, true);
        assert.equal(recovery.previousWorkspaceId, oldWorkspace);
        assert.equal(recovery.workspaceId, client.workspaceId);
        assert.notEqual(client.workspaceId, oldWorkspace);
        assert.equal(client.eventCursor, recovery.eventCursor);
        assert.notEqual(client.eventCursor, oldCursor);
        const current = await client.request("workspaces/get", {
          workspaceId: client.workspaceId });
        assert.equal(current.eventCursor, client.eventCursor);

        // The new Workspace works, and its events are read from its own start.
        await client.call("call-6", "browser.connect");
        await client.call("call-7", "browser.open", { url: pages.url("/form") });
        const fresh = await client.pollEvents();
        assert.equal(fresh.events[0].sequence, 1);
        assert.deepEqual([...new Set(fresh.events.map((e) => e.workspaceId))],
          [client.workspaceId]);
        assert.equal(pages.hits.get("/hold"), 1, "the click was sent again");
      } finally {
        await client.close();
      }
    });

  test("a bridge killed mid-click is unknown_outcome and recovery keeps the Workspace",
    async (t) => {
      const home = await makeHome(t);
      const pages = await servePages(t);
      const client = await Client.start(options(home, "bridge-loss"));
      try {
        await client.call("call-1", "browser.connect");
        await client.call("call-2", "browser.open", { url: pages.url("/held") });
        const seen = (await client.call("call-3", "browser.observe")).result;
        const batch = await client.pollEvents();
        client.acknowledgeEvents(batch.nextCursor);
        const cursor = client.eventCursor;
        const workspace = client.workspaceId;

        const click = client.call("call-4", "browser.click", {
          observationId: seen.observationId, ref: ref(seen, "button", "Place order") });
        click.catch(() => {}); // awaited below
        await pages.held;
        process.kill(client.bridge.pid, "SIGKILL");
        const [commandId] = client.commandIdentity("call-4");
        await assert.rejects(click, (error) => {
          assert.ok(error instanceof UnknownOutcome);
          assert.deepEqual(error.context, { reason: "bridge_lost", commandId });
          return true;
        });
        pages.release();

        // The Broker lives: the same Workspace, and events resume after the acknowledged
        // cursor. The replacement bridge reads the click's real outcome.
        const recovery = await client.recover();
        assert.equal(recovery.workspaceLost, false);
        assert.equal(recovery.workspaceId, workspace);
        assert.equal(client.eventCursor, cursor);
        const command = { commandId, workspaceId: client.workspaceId };
        while ((await client.request("commands/get", command)).command.status !== "completed") {
          await sleep(50);
        }
        const { events } = await client.pollEvents();
        assert.ok(events[0].sequence > Number(cursor.split(":")[1])); // network events are gaps
        assert.ok(events.some((e) => e.type === "command.status" &&
          e.payload.commandId === commandId), JSON.stringify(events));
        assert.equal(pages.hits.get("/hold"), 1, "the click was sent again");
      } finally {
        await client.close();
      }
    });

  test("heartbeats keep a 2 s Lease through 10 s idle, and without them it expires",
    async (t) => {
      const home = await makeHome(t, { browser: false });
      const kept = await Client.start(options(home, "kept", { leaseTtlMs: 2000 }));
      const lapsed = await Client.start(options(home, "lapsed",
        { leaseTtlMs: 2000, heartbeats: false }));
      const idleUntil = Date.now() + 10000;
      try {
        let expired;
        while (!expired && Date.now() < idleUntil) {
          const batch = await lapsed.pollEvents();
          lapsed.acknowledgeEvents(batch.nextCursor);
          expired = batch.events.find((e) => e.type === "lease.expired");
          await sleep(100);
        }
        assert.ok(expired, "the Lease without heartbeats never expired");
        assert.equal(expired.payload.leaseId, lapsed.leaseId);
        const gone = ["lease_expired", "lease_not_found"];
        await assert.rejects(lapsed.call("call-1", "browser.tabs.list"),
          (error) => error instanceof BrokerError && gone.includes(error.code));

        await sleep(Math.max(0, idleUntil - Date.now())); // idle: only the heartbeats run
        assert.equal(kept.leaseLost, null, String(kept.leaseLost?.stack));
        assert.equal((await kept.heartbeat()).id, kept.leaseId);
        const events = (await kept.pollEvents()).events;
        assert.deepEqual(events.filter((e) => e.type === "lease.expired"), []);
      } finally {
        await kept.close();
        await lapsed.close();
      }
    });
});
