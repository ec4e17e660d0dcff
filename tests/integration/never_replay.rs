//! Process tests of the never-replay rule and of input-order acceptance, against a real headless
//! Chromium and fixture pages on 127.0.0.1:
//! - a click whose handler blocks the page (Chromium acknowledges the mouse release only after
//!   it) and slow typing, interrupted by SIGKILL of Chromium or of the janitor: the call and its
//!   Command record say `unknown_outcome`, a retry with the same `idempotencyKey` returns that
//!   record without dispatching, and the page's effects reached the server at most once;
//! - `commands/get` and `commands/cancel` written in the same batch right after a queued call
//!   always find it (100 times), and no cancelled call has an effect;
//! - a call pending at `shutdown` or stdin EOF is answered, and its Command keeps its outcome;
//!   a call written right before EOF is accepted before the Connection's Leases are released;
//! - a Broker SIGKILLed while a click is held in the page's handler: the bridge answers the
//!   click `unknown_outcome` and a pending observe retryable `broker_unavailable`, and a host
//!   that repeats every retryable answer on a new bridge clicks exactly once.

use crate::support;

use std::time::Duration;

use serde_json::{Value, json};
use support::chromium::{Chromium, OwnCdp};
use support::rig::{Agent, Rig};
use support::{Bridge, janitor_pid, unsafe_kill, wait_until};

/// Generous bound for anything the browser or the Broker must do under load.
const WAIT: Duration = Duration::from_secs(20);

/// How long the busy-click fixture blocks in its click handler (the page's default is 2 s; a
/// little more leaves room to kill the browser under load).
const CLICK_BUSY_MS: u64 = 3000;

/// Characters typed into the slow-typing fixture (each keydown blocks 400 ms there).
const SLOW_TEXT: &str = "abcdefghijkl";

/// Iterations of the queued-call / cancel race.
const CANCEL_ITERATIONS: usize = 100;

fn open(agent: &mut Agent, url: &str) -> Value {
    agent.tool("browser.open", None, json!({"url": url}))["targetId"].clone()
}

/// The ref of the first element whose name contains `name`.
fn find_ref(observation: &Value, name: &str) -> u64 {
    observation["elements"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"].as_str().unwrap_or("").contains(name))
        .unwrap_or_else(|| panic!("no element named {name:?} in {observation}"))["ref"]
        .as_u64()
        .unwrap()
}

/// `tools/call` params on `target` with an idempotency key.
fn call_params(agent: &Agent, name: &str, target: &Value, arguments: Value, key: &str) -> Value {
    json!({"name": name, "arguments": arguments, "workspaceId": agent.workspace_id,
           "leaseId": agent.lease_id, "targetId": target, "idempotencyKey": key,
           "deadlineMs": 60000})
}

/// What kills the call midway.
#[derive(Clone, Copy)]
enum Kill {
    Chromium,
    /// The janitor of the Broker with this pid.
    Janitor(u32),
}

fn kill(rig: &mut Rig, how: Kill) {
    match how {
        Kill::Chromium => rig.chromium.sigkill(),
        Kill::Janitor(broker_pid) => {
            let pid = janitor_pid(broker_pid).expect("the Broker has a janitor");
            unsafe_kill(pid, "KILL");
        }
    }
}

fn prepare_click(rig: &Rig, agent: &mut Agent) -> Value {
    let url = rig.fixtures.url("/fixture/busy-click");
    let target = open(agent, &format!("{url}#busy={CLICK_BUSY_MS}"));
    let observation = agent.tool("browser.observe", Some(&target), json!({}));
    let arguments = json!({"observationId": observation["observationId"], "ref": find_ref(&observation, "Place order")});
    call_params(agent, "browser.click", &target, arguments, "order-click")
}

fn prepare_typing(rig: &Rig, agent: &mut Agent) -> Value {
    let target = open(agent, &rig.fixtures.url("/fixture/slow-typing"));
    let observation = agent.tool("browser.observe", Some(&target), json!({}));
    let arguments = json!({"observationId": observation["observationId"], "ref": find_ref(&observation, "Query"), "text": SLOW_TEXT});
    call_params(agent, "browser.type", &target, arguments, "slow-type")
}

/// The `error` of a response, which must be `unknown_outcome` naming the first mutation sent.
fn assert_unknown_outcome(response: &Value, first_mutation: &str) -> Value {
    let error = &response["error"];
    assert_eq!(error["data"]["code"], "unknown_outcome", "{response}");
    assert_eq!(error["data"]["retryable"], false, "{response}");
    let dispatched = &error["data"]["context"]["dispatched"];
    assert_eq!(dispatched["first"], first_mutation, "{response}");
    assert!(dispatched["count"].as_u64().unwrap() >= 1, "{response}");
    assert_eq!(
        error["data"]["context"]["cause"], "browser_disconnected",
        "the original (retryable) failure is named: {response}"
    );
    error.clone()
}

/// Sends `params`, waits until the page reported `started_effect`, kills, and checks the
/// answer and the Command record. Returns the recorded error.
fn interrupt(
    agent: &mut Agent,
    rig: &mut Rig,
    params: &Value,
    started_effect: &str,
    first_mutation: &str,
    how: Kill,
) -> Value {
    let id = agent.bridge.request("tools/call", params.clone());
    assert!(
        wait_until(WAIT, || rig.fixtures.hits(started_effect) == 1),
        "the page never reported {started_effect}"
    );
    kill(rig, how);
    let response = agent.bridge.response(&id);
    let error = assert_unknown_outcome(&response, first_mutation);
    let command_id = error["data"]["context"]["commandId"].clone();
    let record = agent.bridge.ok(
        "commands/get",
        json!({"commandId": command_id, "workspaceId": agent.workspace_id}),
    );
    assert_eq!(record["command"]["status"], "unknown_outcome", "{record}");
    assert_eq!(record["command"]["mutating"], true);
    assert_eq!(
        record["error"]["data"]["code"], "unknown_outcome",
        "{record}"
    );
    assert_eq!(
        record["error"]["data"]["context"]["dispatched"]["first"], first_mutation,
        "{record}"
    );
    error
}

/// A retry with the same idempotencyKey answers the recorded outcome without dispatching.
fn retry_returns_record(agent: &mut Agent, params: &Value, recorded: &Value) {
    let retry = agent.bridge.call("tools/call", params.clone());
    assert_eq!(retry["error"]["data"]["code"], "unknown_outcome", "{retry}");
    assert_eq!(
        retry["error"]["data"]["context"]["commandId"],
        recorded["data"]["context"]["commandId"]
    );
    assert_eq!(
        retry["error"]["data"]["context"]["dispatched"],
        recorded["data"]["context"]["dispatched"]
    );
}

/// Each effect of the fixtures reached the server at most once, and the interrupted calls did
/// start (the press and the first keys were seen exactly once).
fn assert_effects_at_most_once(rig: &Rig) {
    assert_eq!(rig.fixtures.hits_under("/effect/press/"), 1);
    assert!(rig.fixtures.hits_under("/effect/click/") <= 1);
    assert_eq!(rig.fixtures.hits("/effect/press/1"), 1);
    for (index, ch) in SLOW_TEXT.chars().enumerate() {
        let path = format!("/effect/key/{}/{ch}", index + 1);
        assert!(rig.fixtures.hits(&path) <= 1, "{path} seen twice");
    }
    assert!(
        rig.fixtures.hits_under("/effect/key/") <= SLOW_TEXT.chars().count(),
        "no key was typed twice"
    );
}

#[test]
fn chromium_killed_mid_click_or_mid_typing_gives_unknown_outcome_never_replayed() {
    let mut rig = Rig::start();
    let mut agent = Agent::new(&rig, "com.example.never-replay");
    agent.connect();
    let click = prepare_click(&rig, &mut agent);
    let clicked = interrupt(
        &mut agent,
        &mut rig,
        &click,
        "/effect/press/1",
        "Input.dispatchMouseEvent",
        Kill::Chromium,
    );

    rig.chromium = Chromium::start(rig.profile.path());
    agent.connect();
    let typing = prepare_typing(&rig, &mut agent);
    let typed = interrupt(
        &mut agent,
        &mut rig,
        &typing,
        "/effect/key/2/b",
        "Input.dispatchKeyEvent",
        Kill::Chromium,
    );

    // With a live browser again, both retries answer their records and dispatch nothing.
    rig.chromium = Chromium::start(rig.profile.path());
    agent.connect();
    retry_returns_record(&mut agent, &click, &clicked);
    retry_returns_record(&mut agent, &typing, &typed);
    assert_effects_at_most_once(&rig);
}

#[test]
fn janitor_killed_mid_click_or_mid_typing_gives_unknown_outcome_never_replayed() {
    let mut rig = Rig::start();
    let mut agent = Agent::new(&rig, "com.example.never-replay");
    agent.connect();
    let janitor = Kill::Janitor(rig.home.broker_pid().expect("a Broker runs"));
    let click = prepare_click(&rig, &mut agent);
    let clicked = interrupt(
        &mut agent,
        &mut rig,
        &click,
        "/effect/press/1",
        "Input.dispatchMouseEvent",
        janitor,
    );
    // The browser lives on: if the release reached it before the janitor died, the page
    // finishes its handler, once (the press alone may be all that was sent).
    wait_until(Duration::from_secs(8), || {
        rig.fixtures.hits("/effect/click/1") == 1
    });
    let clicks = rig.fixtures.hits("/effect/click/1");
    assert!(clicks <= 1, "the click ran {clicks} times");

    agent.connect();
    let typing = prepare_typing(&rig, &mut agent);
    let typed = interrupt(
        &mut agent,
        &mut rig,
        &typing,
        "/effect/key/2/b",
        "Input.dispatchKeyEvent",
        janitor,
    );

    agent.connect();
    retry_returns_record(&mut agent, &click, &clicked);
    retry_returns_record(&mut agent, &typing, &typed);
    assert_effects_at_most_once(&rig);
    assert_eq!(
        rig.fixtures.hits("/effect/click/1"),
        clicks,
        "the retry replayed the click"
    );
}

/// One batch: a slow navigation holding the tab, a call queued behind it, then `commands/get`
/// and `commands/cancel` for the queued call, written together.
fn queued_and_cancelled_batch(agent: &Agent, rig: &Rig, target: &Value, i: usize) -> Vec<u8> {
    let envelope = |name: &str, url: String, command: String| {
        json!({"name": name, "arguments": {"action": "goto", "url": url},
               "workspaceId": agent.workspace_id, "leaseId": agent.lease_id,
               "targetId": target, "commandId": command, "deadlineMs": 60000})
    };
    let lines = [
        json!({"jsonrpc": "2.0", "id": format!("slow-{i}"), "method": "tools/call",
               "params": envelope("browser.navigate", rig.fixtures.url(&format!("/hold/{i}")), format!("command:slow-{i}"))}),
        json!({"jsonrpc": "2.0", "id": format!("queued-{i}"), "method": "tools/call",
               "params": envelope("browser.navigate", rig.fixtures.url(&format!("/effect/cancelled/{i}")), format!("command:queued-{i}"))}),
        json!({"jsonrpc": "2.0", "id": format!("get-{i}"), "method": "commands/get",
               "params": {"commandId": format!("command:queued-{i}"), "workspaceId": agent.workspace_id}}),
        json!({"jsonrpc": "2.0", "id": format!("cancel-{i}"), "method": "commands/cancel",
               "params": {"commandId": format!("command:queued-{i}"), "workspaceId": agent.workspace_id}}),
    ];
    let mut batch = Vec::new();
    for line in lines {
        batch.extend_from_slice(line.to_string().as_bytes());
        batch.push(b'\n');
    }
    batch
}

#[test]
fn get_and_cancel_written_right_after_a_queued_call_always_find_it() {
    let rig = Rig::start();
    let mut agent = Agent::new(&rig, "com.example.cancel");
    agent.connect();
    let target = open(&mut agent, &rig.fixtures.url("/page/start"));
    for i in 0..CANCEL_ITERATIONS {
        let batch = queued_and_cancelled_batch(&agent, &rig, &target, i);
        agent.bridge.send_raw(&batch);
        // get and cancel may overtake each other, never the call: the Command is found,
        // before or after its cancellation.
        let got = agent.bridge.response(&json!(format!("get-{i}")));
        let status = got["result"]["command"]["status"].as_str();
        assert!(
            matches!(status, Some("accepted" | "cancelled")),
            "iteration {i}: {got}"
        );
        let cancel = agent.bridge.response(&json!(format!("cancel-{i}")));
        assert_eq!(
            cancel["result"]["command"]["status"], "cancelled",
            "iteration {i}: {cancel}"
        );
        let queued = agent.bridge.response(&json!(format!("queued-{i}")));
        assert_eq!(
            queued["error"]["data"]["code"], "cancelled",
            "iteration {i}: {queued}"
        );
        assert_eq!(queued["error"]["data"]["retryable"], false);
        rig.fixtures.release(&i.to_string());
        let slow = agent.bridge.response(&json!(format!("slow-{i}")));
        assert_eq!(
            slow["result"]["command"]["status"], "completed",
            "iteration {i}: {slow}"
        );
    }
    assert_eq!(
        rig.fixtures.hits_under("/effect/cancelled/"),
        0,
        "a cancelled call reached the browser"
    );
    assert_eq!(rig.fixtures.hits_under("/hold/"), CANCEL_ITERATIONS);
}

/// A navigation to `/hold/KEY` with a known commandId.
fn held_navigation(agent: &Agent, rig: &Rig, target: &Value, key: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": format!("held-{key}"), "method": "tools/call",
           "params": {"name": "browser.navigate", "arguments": {"action": "goto", "url": rig.fixtures.url(&format!("/hold/{key}"))},
                      "workspaceId": agent.workspace_id, "leaseId": agent.lease_id, "targetId": target,
                      "commandId": format!("command:{key}"), "deadlineMs": 60000}})
}

fn line(message: &Value) -> Vec<u8> {
    let mut bytes = message.to_string().into_bytes();
    bytes.push(b'\n');
    bytes
}

/// Polls `commands/get` from `bridge` until the Command is terminal; returns the record.
fn terminal_record(bridge: &mut Bridge, command_id: &str, workspace_id: &Value) -> Value {
    let mut record = Value::Null;
    assert!(
        wait_until(WAIT, || {
            record = bridge.ok(
                "commands/get",
                json!({"commandId": command_id, "workspaceId": workspace_id}),
            );
            !matches!(
                record["command"]["status"].as_str(),
                Some("accepted" | "dispatched")
            )
        }),
        "{command_id} never ended: {record}"
    );
    record
}

#[test]
fn a_call_pending_at_shutdown_or_eof_is_answered_and_its_outcome_recorded() {
    let rig = Rig::start();
    // shutdown while a call is in flight: the call is answered before the bridge exits.
    let mut agent = Agent::new(&rig, "com.example.shutdown");
    agent.connect();
    let target = open(&mut agent, &rig.fixtures.url("/page/start"));
    let mut batch = line(&held_navigation(&agent, &rig, &target, "at-shutdown"));
    batch.extend(line(
        &json!({"jsonrpc": "2.0", "id": "bye", "method": "shutdown", "params": {}}),
    ));
    agent.bridge.send_raw(&batch);
    let bye = agent.bridge.response(&json!("bye"));
    assert_eq!(bye["result"], json!({}), "{bye}");
    rig.fixtures.release("at-shutdown");
    let held = agent.bridge.response(&json!("held-at-shutdown"));
    assert_eq!(held["result"]["command"]["status"], "completed", "{held}");
    assert_eq!(agent.bridge.wait_exit(WAIT), Some(0));

    // stdin EOF while a call outlives the bridge's drain bound: the bridge answers it rather
    // than dropping it, and the Command still records its real outcome.
    let mut agent = Agent::new(&rig, "com.example.eof");
    agent.connect();
    let target = open(&mut agent, &rig.fixtures.url("/page/start"));
    agent
        .bridge
        .send_raw(&line(&held_navigation(&agent, &rig, &target, "at-eof")));
    assert!(wait_until(WAIT, || rig.fixtures.hits("/hold/at-eof") == 1));
    agent.bridge.close_stdin();
    assert_eq!(agent.bridge.wait_exit(WAIT), Some(0));
    let answered = agent.bridge.response(&json!("held-at-eof"));
    assert_eq!(
        answered["error"]["data"]["code"], "unknown_outcome",
        "{answered}"
    );
    assert_eq!(
        answered["error"]["data"]["context"]["reason"],
        "bridge_exiting"
    );
    assert_eq!(answered["error"]["data"]["retryable"], false);
    rig.fixtures.release("at-eof");
    let mut next = rig.home.spawn_bridge();
    next.initialize("com.example.eof", "i1");
    let record = terminal_record(&mut next, "command:at-eof", &agent.workspace_id);
    assert_eq!(record["command"]["status"], "completed", "{record}");
    assert_eq!(rig.fixtures.hits("/hold/at-eof"), 1, "nothing was repeated");
}

/// Bridges started in turn (in a home without a browser: Lease checks need none).
const EOF_ITERATIONS: usize = 20;

#[test]
fn a_call_written_right_before_eof_is_accepted_before_its_lease_is_released() {
    let home = support::TestHome::new().with_env("BROWSER_PILOT_DISCOVERY_DIRS", "");
    for i in 0..EOF_ITERATIONS {
        let mut bridge = home.spawn_bridge();
        bridge.initialize("com.example.eof-order", &format!("i{i}"));
        let workspace = bridge.ok("workspaces/create", json!({}))["workspace"]["id"].clone();
        let lease = bridge.ok(
            "leases/create",
            json!({"workspaceId": workspace, "ttlMs": 60000}),
        )["lease"]["id"]
            .clone();
        let call = json!({"jsonrpc": "2.0", "id": "last", "method": "tools/call",
                          "params": {"name": "browser.tabs.list", "arguments": {},
                                     "workspaceId": workspace, "leaseId": lease}});
        bridge.send_raw(&line(&call));
        bridge.close_stdin();
        let response = bridge.response(&json!("last"));
        // No browser is connected, so the call fails, but only after its Lease was checked:
        // the input-closed notice that follows it must not release the Lease first.
        assert_eq!(
            response["error"]["data"]["code"], "browser_disconnected",
            "iteration {i}: {response}"
        );
        assert_eq!(bridge.wait_exit(WAIT), Some(0));
    }
}

/// A call of the Broker-loss test, built afresh by whichever session sends it.
#[derive(Clone, Copy, Debug)]
enum HostCall {
    Click,
    Observe,
}

/// Sends `call` on the held-click user tab `target` and returns its request id.
fn send_host_call(agent: &mut Agent, call: HostCall, target: &Value) -> Value {
    let arguments = match call {
        HostCall::Click => {
            let observation = agent.tool("browser.observe", Some(target), json!({}));
            json!({"observationId": observation["observationId"],
                   "ref": find_ref(&observation, "Place order")})
        }
        HostCall::Observe => json!({}),
    };
    let name = match call {
        HostCall::Click => "browser.click",
        HostCall::Observe => "browser.observe",
    };
    let params = json!({"name": name, "arguments": arguments, "workspaceId": agent.workspace_id,
                        "leaseId": agent.lease_id, "targetId": target, "deadlineMs": 60000});
    agent.bridge.request("tools/call", params)
}

/// This Workspace's id for the user tab showing the held-click fixture.
fn held_click_tab(agent: &mut Agent) -> Value {
    let mut found = None;
    assert!(
        wait_until(WAIT, || {
            found = agent.tabs().into_iter().find(|tab| {
                tab["url"]
                    .as_str()
                    .is_some_and(|url| url.ends_with("/fixture/held-click"))
            });
            found.is_some()
        }),
        "the user tab is never listed"
    );
    found.unwrap()["targetId"].clone()
}

#[test]
fn broker_killed_mid_click_gives_unknown_outcome_and_a_retrying_host_clicks_once() {
    let rig = Rig::start();
    let mut own = OwnCdp::connect(&rig.chromium);
    // A user tab: the killed Broker's janitor closes only managed tabs, so the page lives on.
    own.open_user_tab(&rig.fixtures.url("/fixture/held-click"));
    own.wait_for_document("/fixture/held-click", "Held click");
    let client = "com.example.broker-loss";
    let mut agent = Agent::new(&rig, client);
    agent.connect();
    let target = held_click_tab(&mut agent);

    let click_id = send_host_call(&mut agent, HostCall::Click, &target);
    assert!(
        wait_until(WAIT, || rig.fixtures.hits("/hold/order") == 1),
        "the click never reached the page"
    );
    // The page is held inside its click handler: this observe cannot finish before the kill.
    // The kill waits until the Broker accepted it (a line the bridge has not read yet when its
    // Broker goes away is never forwarded, and the bridge exits without it).
    let observes = || {
        let (code, out, err) = rig.home.run(
            support::BIN,
            &[
                "debug",
                "sql",
                "SELECT count(*) AS n FROM commands WHERE method = 'browser.observe'",
            ],
        );
        assert_eq!(code, 0, "{err}");
        out
    };
    let before = observes();
    let observe_id = send_host_call(&mut agent, HostCall::Observe, &target);
    assert!(
        wait_until(WAIT, || observes() != before),
        "the Broker never accepted the observe"
    );
    let broker = rig.home.broker_pid().expect("a Broker runs");
    unsafe_kill(broker, "KILL");

    let click = agent.bridge.response(&click_id);
    let error = &click["error"]["data"];
    assert_eq!(error["code"], "unknown_outcome", "{click}");
    assert_eq!(error["retryable"], false, "{click}");
    assert_eq!(error["context"]["reason"], "broker_lost", "{click}");
    assert_eq!(error["context"]["tool"], "browser.click", "{click}");
    assert_eq!(error["remediation"]["action"], "inspect_state", "{click}");
    let observe = agent.bridge.response(&observe_id);
    assert_eq!(
        observe["error"]["data"]["code"], "broker_unavailable",
        "{observe}"
    );
    assert_eq!(observe["error"]["data"]["retryable"], true, "{observe}");
    assert_eq!(observe["error"]["data"]["context"]["reason"], "broker_lost");
    assert_eq!(agent.bridge.wait_exit(WAIT), Some(1), "the bridge exits");

    // The page finishes the one click it received.
    rig.fixtures.release("order");
    assert!(wait_until(WAIT, || rig.fixtures.hits("/effect/click/1") == 1));

    // The host repeats every call answered `retryable: true` on a new bridge (and a new Broker),
    // as the adapter library does; the click is not among them.
    let mut next = Agent::new(&rig, client);
    next.connect();
    let target = held_click_tab(&mut next);
    let mut repeated = Vec::new();
    for (call, answer) in [(HostCall::Click, &click), (HostCall::Observe, &observe)] {
        if answer["error"]["data"]["retryable"] == true {
            let id = send_host_call(&mut next, call, &target);
            let again = next.bridge.response(&id);
            assert!(again.get("result").is_some(), "{call:?}: {again}");
            repeated.push(call);
        }
    }
    assert_eq!(format!("{repeated:?}"), "[Observe]");
    let clicks = own.evaluate_in_page("/fixture/held-click", "clicks");
    assert_eq!(clicks["result"]["value"], 1, "the page counted {clicks}");
    assert_eq!(rig.fixtures.hits_under("/effect/click/"), 1);
    assert_eq!(rig.fixtures.hits("/hold/order"), 1);
}
