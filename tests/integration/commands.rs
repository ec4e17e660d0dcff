//! Process tests for the Command pipeline and event delivery: `tools/list`, the `tools/call`
//! envelope, Command outcomes, idempotent retries, `commands/get` / `commands/cancel`
//! authorization, the out-of-band lane, and notifications versus the event journal. Each test
//! drives the real `browser-pilot bridge --stdio` over its pipes against a real Broker in its own
//! temporary `BROWSER_PILOT_HOME`. No browser is needed: the only tool used is the passive
//! `browser.discover`, with discovery pointed at no user profile so it is fast and hermetic.
//! Browser tools (Lease checks of Workspace tools, cancel before dispatch, `unknown_outcome`,
//! side-effect counters) are tested where those tools live.

use crate::support;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, ChildStdout, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::*;

/// The only wired tool: Connection-scoped, non-mutating, needs `browser.control`.
const DISCOVER: &str = "browser.discover";

/// Longest `commandId` / `idempotencyKey` the contract accepts, in characters.
const MAX_KEY_CHARS: usize = 256;

/// Leases one Connection may hold at once (the Broker's per-Connection bound).
const LEASES_PER_CONNECTION: usize = 64;

/// Longest `deadlineMs` accepted by `tools/call` (the range is 1 ms through 10 minutes).
const MAX_DEADLINE_MS: u64 = 600_000;

/// Terminal Commands the Broker keeps per Principal (oldest pruned first).
const TERMINAL_COMMANDS_KEPT: usize = 1024;

/// A home whose Broker discovers no user profile, only its own managed one.
fn hermetic_home() -> TestHome {
    TestHome::new().with_env("BROWSER_PILOT_DISCOVERY_DIRS", "")
}

fn error_code(message: &Value) -> &str {
    message["error"]["data"]["code"].as_str().unwrap_or("")
}

/// `tools/call` params for `browser.discover` plus the given envelope fields.
fn discover_params(extra: Value) -> Value {
    let mut params = json!({"name": DISCOVER, "arguments": {}});
    for (key, value) in extra.as_object().expect("extra fields are an object") {
        params[key] = value.clone();
    }
    params
}

fn initialize_with(
    bridge: &mut Bridge,
    client_id: &str,
    instance_id: &str,
    capabilities: &[&str],
) -> Value {
    let mut params = initialize_params(client_id, instance_id, (1, 1));
    params["requestedCapabilities"] = json!(capabilities);
    bridge.ok("initialize", params)
}

/// The next `count` responses in order of arrival, skipping notifications.
fn collect_responses(bridge: &mut Bridge, count: usize) -> Vec<Value> {
    let mut responses = Vec::with_capacity(count);
    while responses.len() < count {
        let message = bridge
            .next_message(RESPONSE_TIMEOUT)
            .unwrap_or_else(|| panic!("only {} of {count} responses arrived", responses.len()));
        if message.get("method").is_none() {
            responses.push(message);
        }
    }
    responses
}

fn request_line(id: Value, method: &str, params: Value) -> Vec<u8> {
    let mut line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
        .to_string()
        .into_bytes();
    line.push(b'\n');
    line
}

#[test]
fn tools_call_envelope_validation_matrix() {
    let home = hermetic_home();
    let mut bridge = home.spawn_bridge();
    bridge.initialize("com.example.envelope", "i1");
    let long_ascii = "k".repeat(MAX_KEY_CHARS + 1);
    let cases: Vec<(&str, Value, &str)> = vec![
        ("no params at all", json!({}), "invalid_params"),
        ("missing name", json!({"arguments": {}}), "invalid_params"),
        (
            "empty name",
            json!({"name": "", "arguments": {}}),
            "invalid_params",
        ),
        (
            "non-string name",
            json!({"name": 7, "arguments": {}}),
            "invalid_params",
        ),
        (
            "unknown tool",
            json!({"name": "browser.nope", "arguments": {}}),
            "tool_not_found",
        ),
        (
            "arguments array",
            json!({"name": DISCOVER, "arguments": []}),
            "invalid_params",
        ),
        (
            "arguments string",
            json!({"name": DISCOVER, "arguments": "{}"}),
            "invalid_params",
        ),
        (
            "arguments number",
            json!({"name": DISCOVER, "arguments": 1}),
            "invalid_params",
        ),
        (
            "arguments off-schema",
            json!({"name": DISCOVER, "arguments": {"x": 1}}),
            "invalid_params",
        ),
        (
            "deadlineMs 0",
            discover_params(json!({"deadlineMs": 0})),
            "invalid_params",
        ),
        (
            "deadlineMs -1",
            discover_params(json!({"deadlineMs": -1})),
            "invalid_params",
        ),
        (
            "deadlineMs 600001",
            discover_params(json!({"deadlineMs": 600_001})),
            "invalid_params",
        ),
        (
            "deadlineMs string",
            discover_params(json!({"deadlineMs": "5"})),
            "invalid_params",
        ),
        (
            "deadlineMs fraction",
            discover_params(json!({"deadlineMs": 1.5})),
            "invalid_params",
        ),
        (
            "deadlineMs bool",
            discover_params(json!({"deadlineMs": true})),
            "invalid_params",
        ),
        (
            "commandId too long",
            discover_params(json!({"commandId": long_ascii})),
            "invalid_params",
        ),
        (
            "commandId number",
            discover_params(json!({"commandId": 42})),
            "invalid_params",
        ),
        (
            "commandId empty",
            discover_params(json!({"commandId": ""})),
            "invalid_params",
        ),
        (
            "commandId object",
            discover_params(json!({"commandId": {}})),
            "invalid_params",
        ),
        (
            "idempotencyKey too long",
            discover_params(json!({"idempotencyKey": long_ascii})),
            "invalid_params",
        ),
        (
            "idempotencyKey number",
            discover_params(json!({"idempotencyKey": 1})),
            "invalid_params",
        ),
        (
            "idempotencyKey empty",
            discover_params(json!({"idempotencyKey": ""})),
            "invalid_params",
        ),
    ];
    for (name, params, want) in cases {
        let response = bridge.call("tools/call", params.clone());
        assert_eq!(
            error_code(&response),
            want,
            "{name}: {params} -> {response}"
        );
        assert_eq!(response["error"]["data"]["retryable"], false, "{name}");
        assert!(
            response["error"]["code"].as_i64().is_some_and(|c| c < 0),
            "{name}"
        );
    }

    // The unknown tool is named back; the schema violation says where it is.
    let (_, error) = bridge.err("tools/call", json!({"name": "browser.nope"}));
    assert_eq!(error["data"]["context"]["name"], "browser.nope");
    let (_, error) = bridge.err(
        "tools/call",
        json!({"name": DISCOVER, "arguments": {"x": 1}}),
    );
    assert_eq!(error["data"]["context"]["path"], "arguments.x", "{error}");

    // A rejected call records no Command: its commandId is free and unknown afterwards.
    let (code, _) = bridge.err(
        "tools/call",
        discover_params(json!({"arguments": {"x": 1}, "commandId": "envelope-rejected"})),
    );
    assert_eq!(code, "invalid_params");
    let (code, _) = bridge.err("commands/get", json!({"commandId": "envelope-rejected"}));
    assert_eq!(
        code, "command_not_found",
        "a rejected call leaves no Command"
    );
    let (code, _) = bridge.err(
        "tools/call",
        discover_params(json!({"deadlineMs": 0, "commandId": "envelope-rejected"})),
    );
    assert_eq!(code, "invalid_params");
    let (code, _) = bridge.err("commands/get", json!({"commandId": "envelope-rejected"}));
    assert_eq!(code, "command_not_found");

    // Boundaries that are accepted: absent or null arguments, the extreme deadlines, and keys of
    // exactly 256 characters (counted as characters, not bytes).
    for params in [
        json!({"name": DISCOVER}),
        json!({"name": DISCOVER, "arguments": null}),
        discover_params(json!({"deadlineMs": MAX_DEADLINE_MS})),
    ] {
        let result = bridge.ok("tools/call", params.clone());
        assert_eq!(result["command"]["status"], "completed", "{params}");
    }
    let result = bridge.ok(
        "tools/call",
        discover_params(json!({"deadlineMs": MAX_DEADLINE_MS})),
    );
    let command = &result["command"];
    assert_eq!(
        command["deadlineAt"].as_i64().unwrap() - command["acceptedAt"].as_i64().unwrap(),
        MAX_DEADLINE_MS as i64
    );
    let wide_id = "é".repeat(MAX_KEY_CHARS);
    let wide_key = "ß".repeat(MAX_KEY_CHARS);
    let result = bridge.ok(
        "tools/call",
        discover_params(json!({"commandId": wide_id, "idempotencyKey": wide_key})),
    );
    assert_eq!(result["command"]["id"], wide_id.as_str());
    assert_eq!(result["command"]["idempotencyKey"], wide_key.as_str());
}

#[test]
fn shortest_deadline_outcome_is_recorded_as_returned() {
    // With a 1 ms deadline the call may finish or miss its deadline; whichever happened, the
    // response and the recorded Command must agree, and a retry replays exactly that outcome.
    let home = hermetic_home();
    let mut bridge = home.spawn_bridge();
    bridge.initialize("com.example.deadline", "i1");
    for n in 0..5 {
        let command_id = format!("deadline-{n}");
        let params = discover_params(json!({"deadlineMs": 1, "commandId": command_id}));
        let response = bridge.call("tools/call", params.clone());
        let record = bridge.ok("commands/get", json!({"commandId": command_id}));
        assert_eq!(
            record["command"]["deadlineAt"].as_i64().unwrap()
                - record["command"]["acceptedAt"].as_i64().unwrap(),
            1
        );
        match response.get("result") {
            Some(result) => {
                assert_eq!(record["command"]["status"], "completed", "{record}");
                assert_eq!(record["result"], result["result"]);
                assert_eq!(record["command"], result["command"]);
            }
            None => {
                assert_eq!(error_code(&response), "deadline_exceeded", "{response}");
                assert_eq!(
                    response["error"]["data"]["context"]["commandId"],
                    command_id.as_str()
                );
                let status = record["command"]["status"].as_str().unwrap();
                assert!(["completed", "cancelled"].contains(&status), "{record}");
                assert_eq!(
                    record["error"]["data"]["code"], "deadline_exceeded",
                    "{record}"
                );
                assert!(record.get("result").is_none(), "{record}");
                assert!(record["command"]["completedAt"].is_i64(), "{record}");
            }
        }
        let retry = bridge.call("tools/call", params);
        assert_eq!(
            retry.get("result"),
            response.get("result"),
            "retry replays the outcome"
        );
        assert_eq!(error_code(&retry), error_code(&response));
    }
}

#[test]
fn tools_list_and_call_follow_granted_capabilities() {
    let home = hermetic_home();
    let mut without = home.spawn_bridge();
    initialize_with(
        &mut without,
        "com.example.caps",
        "i1",
        &["workspace.manage", "event.read"],
    );
    let listed = without.ok("tools/list", json!({}));
    let names: Vec<&str> = listed["tools"]
        .as_array()
        .expect("tools array")
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(!names.contains(&DISCOVER), "{names:?}");
    let (code, error) = without.err("tools/call", discover_params(json!({})));
    assert_eq!(code, "capability_denied");
    assert_eq!(error["data"]["context"]["capability"], "browser.control");
    assert_eq!(error["data"]["remediation"]["action"], "request_capability");
    // The capability is checked before the arguments: a bad call still says capability_denied.
    let (code, _) = without.err(
        "tools/call",
        json!({"name": DISCOVER, "arguments": {"x": 1}}),
    );
    assert_eq!(code, "capability_denied");
    // An unknown tool is unknown whatever the capabilities.
    let (code, _) = without.err("tools/call", json!({"name": "browser.nope"}));
    assert_eq!(code, "tool_not_found");

    let mut with = home.spawn_bridge();
    initialize_with(&mut with, "com.example.caps", "i2", &["browser.control"]);
    let listed = with.ok("tools/list", json!({}));
    let tools = listed["tools"].as_array().expect("tools array");
    for tool in tools {
        assert_eq!(
            tool["capability"], "browser.control",
            "only granted tools are listed: {tool}"
        );
    }
    let discover = tools
        .iter()
        .find(|t| t["name"] == DISCOVER)
        .expect("browser.discover listed");
    assert_eq!(discover["capability"], "browser.control");
    assert_eq!(discover["mutating"], false);
    assert_eq!(discover["scope"], "connection");
    assert!(
        discover["description"]
            .as_str()
            .is_some_and(|d| !d.is_empty())
    );
    assert_eq!(discover["inputSchema"]["type"], "object");
    assert_eq!(discover["inputSchema"]["additionalProperties"], false);
    assert_eq!(discover["outputSchema"]["type"], "object");
    let required: Vec<&str> = discover["outputSchema"]["required"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_str().unwrap())
        .collect();
    assert_eq!(required, ["browsers", "selectedBrowserId"]);
    assert!(discover["sensitivity"]["input"].is_array(), "{discover}");
    assert!(discover["sensitivity"]["output"].is_array(), "{discover}");
    let call = with.ok("tools/call", discover_params(json!({})));
    assert_eq!(call["command"]["status"], "completed");

    // tools/list takes no Workspace and is the same on every call.
    assert_eq!(with.ok("tools/list", json!({})), listed);
}

#[test]
fn discover_outcome_has_the_command_shape() {
    let home = hermetic_home();
    let mut bridge = home.spawn_bridge();
    bridge.initialize("com.example.shape", "i1");
    let before = now_ms();
    let outcome = bridge.ok(
        "tools/call",
        discover_params(json!({"commandId": "shape-1"})),
    );
    let after = now_ms();
    let command = &outcome["command"];
    assert_eq!(
        command["id"], "shape-1",
        "a caller-supplied commandId is the Command id"
    );
    assert_eq!(command["status"], "completed");
    assert_eq!(command["method"], DISCOVER);
    assert_eq!(
        command["browserConnectionGeneration"], 0,
        "no browser was ever connected"
    );
    assert_eq!(command["mutating"], false);
    assert_eq!(command["cancellationRequested"], false);
    assert!(
        command.get("workspaceId").is_none(),
        "a Connection tool has no Workspace: {command}"
    );
    assert!(
        command.get("idempotencyKey").is_none(),
        "none was given: {command}"
    );
    let at = |name: &str| {
        command[name]
            .as_i64()
            .unwrap_or_else(|| panic!("{name} missing: {command}"))
    };
    let (accepted, dispatched, completed, deadline) = (
        at("acceptedAt"),
        at("dispatchedAt"),
        at("completedAt"),
        at("deadlineAt"),
    );
    assert!(
        before <= accepted
            && accepted <= dispatched
            && dispatched <= completed
            && completed <= after,
        "{command}"
    );
    assert_eq!(deadline - accepted, 30_000, "the default deadline is 30 s");

    let result = &outcome["result"];
    let browsers = result["browsers"].as_array().expect("browsers array");
    for browser in browsers {
        for field in [
            "id",
            "product",
            "channel",
            "state",
            "processState",
            "remoteDebuggingState",
            "authorizationState",
        ] {
            assert!(browser[field].is_string(), "{field} in {browser}");
        }
        assert_eq!(
            browser["authorizationState"], "unknown",
            "discovery is passive: {browser}"
        );
    }
    match &result["selectedBrowserId"] {
        Value::Null => {}
        Value::String(id) => assert!(browsers.iter().any(|b| b["id"] == id.as_str()), "{result}"),
        other => panic!("selectedBrowserId {other}"),
    }

    // Without a commandId the Broker generates a fresh, prefixed one per call.
    let first = bridge.ok("tools/call", discover_params(json!({})));
    let second = bridge.ok("tools/call", discover_params(json!({})));
    let (first_id, second_id) = (
        first["command"]["id"].as_str().unwrap(),
        second["command"]["id"].as_str().unwrap(),
    );
    assert!(
        first_id.starts_with("command:") && second_id.starts_with("command:"),
        "{first_id} {second_id}"
    );
    assert_ne!(first_id, second_id);
    assert_eq!(
        first["result"], second["result"],
        "discovery is deterministic here"
    );
    // The idempotencyKey is echoed when given.
    let keyed = bridge.ok(
        "tools/call",
        discover_params(json!({"idempotencyKey": "shape-key"})),
    );
    assert_eq!(keyed["command"]["idempotencyKey"], "shape-key");
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock after 1970")
        .as_millis() as i64
}

#[test]
fn idempotent_retries_replay_the_recorded_outcome() {
    let home = hermetic_home();
    let mut bridge = home.spawn_bridge();
    bridge.initialize("com.example.retry", "i1");

    // Same idempotencyKey twice: the identical response, same id and completedAt.
    let first = bridge.ok(
        "tools/call",
        discover_params(json!({"idempotencyKey": "key-1"})),
    );
    std::thread::sleep(Duration::from_millis(5));
    let again = bridge.ok(
        "tools/call",
        discover_params(json!({"idempotencyKey": "key-1"})),
    );
    assert_eq!(again, first, "a retry with the same key replays the record");
    // A different deadline does not make it a different call, and keeps the recorded deadline.
    let later = bridge.ok(
        "tools/call",
        discover_params(json!({"idempotencyKey": "key-1", "deadlineMs": 5000})),
    );
    assert_eq!(later, first);
    // The same key with a new commandId is still the recorded Command, under its recorded id.
    let renamed = bridge.ok(
        "tools/call",
        discover_params(json!({"idempotencyKey": "key-1", "commandId": "retry-new-id"})),
    );
    assert_eq!(renamed, first);
    let (code, _) = bridge.err("commands/get", json!({"commandId": "retry-new-id"}));
    assert_eq!(
        code, "command_not_found",
        "the retry created no second Command"
    );

    // Same commandId twice: identical.
    let by_id = bridge.ok(
        "tools/call",
        discover_params(json!({"commandId": "retry-1"})),
    );
    std::thread::sleep(Duration::from_millis(5));
    let by_id_again = bridge.ok(
        "tools/call",
        discover_params(json!({"commandId": "retry-1"})),
    );
    assert_eq!(by_id_again, by_id);
    assert_ne!(by_id["command"]["id"], first["command"]["id"]);

    // Keys belong to the Principal, not the bridge: a second bridge of the same product
    // instance replays the same record.
    let mut sibling = home.spawn_bridge();
    sibling.initialize("com.example.retry", "i1");
    assert_eq!(
        sibling.ok(
            "tools/call",
            discover_params(json!({"idempotencyKey": "key-1"}))
        ),
        first
    );
    assert_eq!(
        sibling.ok(
            "tools/call",
            discover_params(json!({"commandId": "retry-1"}))
        ),
        by_id
    );

    // Another Principal using the same key gets its own, new Command.
    let mut stranger = home.spawn_bridge();
    stranger.initialize("com.example.other", "i1");
    let theirs = stranger.ok(
        "tools/call",
        discover_params(json!({"idempotencyKey": "key-1"})),
    );
    assert_ne!(theirs["command"]["id"], first["command"]["id"]);
    // The same commandId from another Principal (another client, or the same client's other
    // instance) is a conflict and reveals nothing of the owner's Command.
    let mut other_instance = home.spawn_bridge();
    other_instance.initialize("com.example.retry", "i2");
    for intruder in [&mut stranger, &mut other_instance] {
        let (code, error) = intruder.err(
            "tools/call",
            discover_params(json!({"commandId": "retry-1"})),
        );
        assert_eq!(code, "idempotency_conflict");
        assert_eq!(error["data"]["retryable"], false);
        assert_eq!(error["data"]["remediation"]["action"], "use_new_key");
        let text = error.to_string();
        assert!(
            !text.contains("browsers") && !text.contains("completedAt"),
            "leaks the owner's outcome: {text}"
        );
        let (code, _) = intruder.err("commands/get", json!({"commandId": "retry-1"}));
        assert_eq!(code, "command_not_found");
    }
    // The owner's record is untouched by the attempts.
    let record = bridge.ok("commands/get", json!({"commandId": "retry-1"}));
    assert_eq!(record["command"], by_id["command"]);
    assert_eq!(record["result"], by_id["result"]);
}

#[test]
fn commands_get_and_cancel_are_principal_scoped() {
    let home = hermetic_home();
    let mut owner = home.spawn_bridge();
    owner.initialize("com.example.owner", "i1");
    let outcome = owner.ok(
        "tools/call",
        discover_params(json!({"commandId": "owned-1"})),
    );

    // Own Command: found with its result.
    let record = owner.ok("commands/get", json!({"commandId": "owned-1"}));
    assert_eq!(record["command"], outcome["command"]);
    assert_eq!(record["result"], outcome["result"]);
    assert!(record.get("error").is_none(), "{record}");

    // Malformed and unknown ids.
    for params in [json!({}), json!({"commandId": ""}), json!({"commandId": 7})] {
        for method in ["commands/get", "commands/cancel"] {
            let (code, _) = owner.err(method, params.clone());
            assert_eq!(code, "invalid_params", "{method} {params}");
        }
    }
    for method in ["commands/get", "commands/cancel"] {
        let (code, error) = owner.err(method, json!({"commandId": "command:never-issued"}));
        assert_eq!(code, "command_not_found", "{method}");
        assert_eq!(error["data"]["retryable"], false);
        // A Connection Command is not found under a Workspace it does not belong to.
        let (code, _) = owner.err(
            method,
            json!({"commandId": "owned-1", "workspaceId": "workspace:elsewhere"}),
        );
        assert_eq!(
            code, "command_not_found",
            "{method} with a foreign workspaceId"
        );
    }
    // Even the owner's own real Workspace does not match a Connection Command.
    let workspace_id = owner.ok("workspaces/create", json!({}))["workspace"]["id"].clone();
    let (code, _) = owner.err(
        "commands/get",
        json!({"commandId": "owned-1", "workspaceId": workspace_id}),
    );
    assert_eq!(code, "command_not_found");

    // Other Principals: another client, and the same client's other instance.
    let mut other_client = home.spawn_bridge();
    other_client.initialize("com.example.intruder", "i1");
    let mut other_instance = home.spawn_bridge();
    other_instance.initialize("com.example.owner", "i2");
    for intruder in [&mut other_client, &mut other_instance] {
        for method in ["commands/get", "commands/cancel"] {
            let (code, error) = intruder.err(method, json!({"commandId": "owned-1"}));
            assert_eq!(code, "command_not_found", "{method}");
            assert!(
                error["data"]
                    .get("context")
                    .is_none_or(|c| c.get("status").is_none()),
                "{error}"
            );
        }
    }

    // Cancelling a completed Command leaves it completed, with its result.
    let cancelled = owner.ok("commands/cancel", json!({"commandId": "owned-1"}));
    assert_eq!(cancelled["command"]["status"], "completed", "{cancelled}");
    assert_eq!(
        cancelled["command"]["completedAt"],
        outcome["command"]["completedAt"]
    );
    let record = owner.ok("commands/get", json!({"commandId": "owned-1"}));
    assert_eq!(record["command"]["status"], "completed");
    assert_eq!(record["result"], outcome["result"]);
    // A retry after the cancel still replays the completed outcome.
    assert_eq!(
        owner.ok(
            "tools/call",
            discover_params(json!({"commandId": "owned-1"}))
        ),
        outcome
    );

    // A replacement bridge of the same product instance reads the outcome after the first exits.
    owner.close_stdin();
    assert_eq!(owner.wait_exit(Duration::from_secs(10)), Some(0));
    let mut replacement = home.spawn_bridge();
    replacement.initialize("com.example.owner", "i1");
    let record = replacement.ok("commands/get", json!({"commandId": "owned-1"}));
    assert_eq!(record["command"]["id"], "owned-1");
    assert_eq!(
        record["command"]["completedAt"],
        outcome["command"]["completedAt"]
    );
    assert_eq!(record["result"], outcome["result"]);
    let cancelled = replacement.ok("commands/cancel", json!({"commandId": "owned-1"}));
    assert_eq!(cancelled["command"]["status"], "completed");
    // The intruders still cannot see it.
    let (code, _) = other_client.err("commands/get", json!({"commandId": "owned-1"}));
    assert_eq!(code, "command_not_found");
}

#[test]
fn out_of_band_calls_wait_out_a_stopped_broker_and_all_answer() {
    let home = hermetic_home();
    let mut bridge = home.spawn_bridge();
    bridge.initialize("com.example.oob", "i1");
    let known = bridge.ok(
        "tools/call",
        discover_params(json!({"commandId": "oob-known"})),
    );
    let pid = home.broker_pid().expect("broker pid");
    stop_process(pid);
    let mut batch = Vec::new();
    for n in 0..10 {
        batch.extend(request_line(
            json!(format!("call-{n}")),
            "tools/call",
            discover_params(json!({})),
        ));
    }
    for n in 0..3 {
        batch.extend(request_line(
            json!(format!("get-{n}")),
            "commands/get",
            json!({"commandId": "oob-known"}),
        ));
    }
    bridge.send_raw(&batch);
    let early = bridge.next_message(Duration::from_millis(500));
    unsafe_kill(pid, "CONT");
    assert!(
        early.is_none(),
        "nothing answers while the Broker is stopped: {early:?}"
    );
    let responses = collect_responses(&mut bridge, 13);
    let mut by_id: HashMap<String, Value> = HashMap::new();
    for response in responses {
        let id = response["id"].as_str().expect("string id").to_owned();
        assert!(
            by_id.insert(id.clone(), response).is_none(),
            "{id} answered twice"
        );
    }
    let mut command_ids = HashSet::new();
    for n in 0..10 {
        let response = &by_id[&format!("call-{n}")];
        assert_eq!(
            response["result"]["command"]["status"], "completed",
            "{response}"
        );
        assert!(
            command_ids.insert(
                response["result"]["command"]["id"]
                    .as_str()
                    .unwrap()
                    .to_owned()
            )
        );
    }
    for n in 0..3 {
        let response = &by_id[&format!("get-{n}")];
        assert_eq!(
            response["result"]["command"], known["command"],
            "{response}"
        );
    }
    assert!(
        bridge.next_message(Duration::from_millis(200)).is_none(),
        "no extra responses"
    );
}

#[test]
fn pipelined_thousand_tool_calls_are_each_answered_once() {
    let home = hermetic_home();
    let mut bridge = home.spawn_bridge();
    bridge.initialize("com.example.pipeline", "i1");
    let mut batch = Vec::new();
    for n in 0..1000 {
        batch.extend(request_line(
            json!(n),
            "tools/call",
            discover_params(json!({})),
        ));
    }
    bridge.send_raw(&batch);
    let mut seen: BTreeMap<u64, Value> = BTreeMap::new();
    for response in collect_responses(&mut bridge, 1000) {
        let n = response["id"].as_u64().expect("integer id");
        assert!(n < 1000, "unknown id {n}");
        assert!(seen.insert(n, response).is_none(), "id {n} answered twice");
    }
    assert!(
        bridge.next_message(Duration::from_millis(300)).is_none(),
        "no extra responses"
    );
    let mut command_ids = HashSet::new();
    let mut rejected = 0;
    for (n, response) in &seen {
        match response.get("result") {
            Some(result) => {
                assert_eq!(result["command"]["status"], "completed", "{n}: {response}");
                assert_eq!(result["command"]["method"], DISCOVER);
                let id = result["command"]["id"].as_str().unwrap().to_owned();
                assert!(
                    command_ids.insert(id),
                    "{n}: a Command id answered two calls"
                );
            }
            None => {
                assert_eq!(error_code(response), "result_too_large", "{n}: {response}");
                assert_eq!(response["error"]["data"]["retryable"], true);
                rejected += 1;
            }
        }
    }
    assert!(
        command_ids.len() >= 256,
        "at least the first 256 were dispatched: {}",
        command_ids.len()
    );
    assert_eq!(command_ids.len() + rejected, 1000);
    // The Connection is still usable afterwards.
    let after = bridge.ok("tools/call", discover_params(json!({})));
    assert_eq!(after["command"]["status"], "completed");
}

/// A bridge whose stdout nobody reads until `read_until_quiet`: the host is a slow reader. Its
/// stdout pipe is shrunk to one page so backpressure reaches the bridge and the Broker quickly.
struct SilentBridge {
    child: Child,
    /// Held open for the bridge's lifetime: EOF on stdin would end the Connection.
    stdin: Option<ChildStdin>,
    stdout: Option<ChildStdout>,
}

/// Smallest pipe Linux allows (one page), so a silent host fills it after a few notifications.
const SILENT_PIPE_BYTES: libc::c_int = 4096;

impl SilentBridge {
    fn spawn(home: &TestHome, client_id: &str, instance_id: &str) -> SilentBridge {
        let mut command = home.command(BIN);
        command
            .args(["bridge", "--stdio"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let mut child = command.spawn().expect("spawn silent bridge");
        let stdin = child.stdin.take().expect("stdin");
        let mut stdout = child.stdout.take().expect("stdout");
        {
            use std::os::fd::AsRawFd;
            // SAFETY: F_SETPIPE_SZ on a pipe fd this process owns; no memory is passed.
            let size =
                unsafe { libc::fcntl(stdout.as_raw_fd(), libc::F_SETPIPE_SZ, SILENT_PIPE_BYTES) };
            assert_eq!(size, SILENT_PIPE_BYTES, "shrink the silent host's pipe");
        }
        let mut bridge_stdin = stdin;
        let init = json!({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": initialize_params(client_id, instance_id, (1, 1))});
        bridge_stdin
            .write_all(format!("{init}\n").as_bytes())
            .expect("write initialize");
        bridge_stdin.flush().expect("flush");
        // Read exactly one line, byte by byte, so nothing later is consumed.
        let mut line = Vec::new();
        let mut byte = [0u8; 1];
        while byte[0] != b'\n' {
            stdout.read_exact(&mut byte).expect("initialize response");
            line.push(byte[0]);
        }
        let response: Value = serde_json::from_slice(&line).expect("JSON");
        assert!(response.get("result").is_some(), "{response}");
        SilentBridge {
            child,
            stdin: Some(bridge_stdin),
            stdout: Some(stdout),
        }
    }

    /// Starts reading; returns every line that arrives until `quiet` passes without one.
    fn read_until_quiet(&mut self, quiet: Duration) -> Vec<Value> {
        let stdout = self.stdout.take().expect("read once");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                match line {
                    Ok(line) => {
                        if tx.send(line).is_err() {
                            return;
                        }
                    }
                    Err(_) => return,
                }
            }
        });
        let mut lines = Vec::new();
        while let Ok(line) = rx.recv_timeout(quiet) {
            lines.push(serde_json::from_str(&line).expect("stdout line is JSON"));
        }
        lines
    }
}

impl Drop for SilentBridge {
    fn drop(&mut self) {
        self.stdin.take();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Every event of the Workspace from the start of its journal, page by page.
fn poll_all(bridge: &mut Bridge, workspace_id: &Value) -> Vec<Value> {
    let mut cursor = "cursor:0".to_owned();
    let mut events = Vec::new();
    loop {
        let page = bridge.ok(
            "events/poll",
            json!({"workspaceId": workspace_id, "cursor": cursor, "limit": 1000}),
        );
        events.extend(page["events"].as_array().expect("events").iter().cloned());
        cursor = page["nextCursor"].as_str().expect("nextCursor").to_owned();
        if page["hasMore"] == false {
            return events;
        }
    }
}

/// Producer Connections in the slow-reader test, each holding the per-Connection Lease maximum.
const CHURN_CONNECTIONS: usize = 4;

/// Rounds of Lease churn: each journals `CHURN_CONNECTIONS x 64 = 256` `lease.expired` events, so
/// four rounds (1,024) exceed what a silent host can be holding: the bridge's 256-line
/// notification queue, one batch of up to 256 lines its stdout writer holds while the pipe is
/// full, and about 200 lines of a default 64 KiB pipe (two rounds, 512, fitted now and then).
const CHURN_ROUNDS: usize = 4;

#[test]
fn slow_reader_loses_notifications_but_never_journal_events() {
    let home = hermetic_home();
    let mut silent = SilentBridge::spawn(&home, "com.example.events", "i1");
    let mut producers: Vec<Bridge> = (0..CHURN_CONNECTIONS)
        .map(|_| home.spawn_bridge())
        .collect();
    for producer in &mut producers {
        producer.initialize("com.example.events", "i1");
    }
    let workspace = producers[0].ok("workspaces/create", json!({}));
    let workspace_id = workspace["workspace"]["id"].clone();
    assert_eq!(workspace["eventCursor"], "cursor:0");
    let mut stranger = home.spawn_bridge();
    stranger.initialize("com.example.stranger", "i1");

    let started = Instant::now();
    let mut expected = 0usize;
    for _ in 0..CHURN_ROUNDS {
        for producer in &mut producers {
            let mut batch = Vec::new();
            for n in 0..LEASES_PER_CONNECTION {
                batch.extend(request_line(
                    json!(format!("lease-{n}")),
                    "leases/create",
                    json!({"workspaceId": workspace_id, "ttlMs": 1000}),
                ));
            }
            producer.send_raw(&batch);
        }
        for producer in &mut producers {
            for n in 0..LEASES_PER_CONNECTION {
                let response = producer.response(&json!(format!("lease-{n}")));
                assert!(response.get("result").is_some(), "{response}");
            }
        }
        expected += producers.len() * LEASES_PER_CONNECTION;
        let target = format!("cursor:{expected}");
        let all_expired = wait_until(Duration::from_secs(15), || {
            producers[0].ok("workspaces/get", json!({"workspaceId": workspace_id}))["eventCursor"]
                == target.as_str()
        });
        assert!(all_expired, "{expected} lease.expired journaled");
    }
    eprintln!("journaled {expected} events in {:?}", started.elapsed());

    let journal = poll_all(&mut producers[0], &workspace_id);
    assert_eq!(journal.len(), expected, "every event is journaled");
    let sequences: Vec<u64> = journal
        .iter()
        .map(|e| e["sequence"].as_u64().unwrap())
        .collect();
    assert_eq!(
        sequences,
        (1..=expected as u64).collect::<Vec<_>>(),
        "dense, strictly increasing"
    );
    for event in &journal {
        assert_eq!(event["type"], "lease.expired", "{event}");
        assert_eq!(event["workspaceId"], workspace_id);
        assert_eq!(event["browserConnectionGeneration"], 0);
    }
    let by_sequence: HashMap<u64, &Value> = journal
        .iter()
        .map(|e| (e["sequence"].as_u64().unwrap(), e))
        .collect();

    // The silent host now reads what survived: a subset of the journal, each exactly as journaled.
    let lines = silent.read_until_quiet(Duration::from_secs(1));
    let mut heard = HashSet::new();
    for line in &lines {
        assert_eq!(
            line["method"], "events/event",
            "only notifications were due: {line}"
        );
        assert!(line.get("id").is_none(), "{line}");
        let event = &line["params"]["event"];
        let sequence = event["sequence"].as_u64().expect("sequence");
        assert!(
            heard.insert(sequence),
            "notification for sequence {sequence} delivered twice"
        );
        assert_eq!(
            Some(&event),
            by_sequence.get(&sequence),
            "notification differs from the journal"
        );
    }
    eprintln!(
        "the silent host heard {} of {expected} notifications",
        heard.len()
    );
    assert!(
        !heard.is_empty(),
        "the first notifications found room in the queues"
    );
    assert!(
        heard.len() < expected,
        "a silent host loses notifications under backpressure"
    );

    // Another Principal hears nothing about this Workspace (nor can it poll it).
    let notes = stranger.drain_notifications(Duration::from_millis(300));
    assert!(
        notes
            .iter()
            .all(|n| n["params"]["event"]["workspaceId"] != workspace_id),
        "{notes:?}"
    );
    assert!(notes.is_empty(), "{notes:?}");
    let (code, _) = stranger.err(
        "events/poll",
        json!({"workspaceId": workspace_id, "cursor": "cursor:0"}),
    );
    assert_eq!(code, "workspace_not_found");
}

#[test]
fn concurrent_duplicates_share_one_command() {
    // Two bridges of one product instance race the same idempotency keys. Whichever arrives
    // second sees the first's Command: completed (its recorded outcome) or still in flight (the
    // Command alone, never a second dispatch). Either way one key is one Command.
    const KEYS: usize = 40;
    let home = hermetic_home();
    let mut bridges: Vec<Bridge> = (0..2).map(|_| home.spawn_bridge()).collect();
    for bridge in &mut bridges {
        bridge.initialize("com.example.race", "i1");
    }
    let pid = home.broker_pid().expect("broker pid");
    stop_process(pid);
    for bridge in &mut bridges {
        let mut batch = Vec::new();
        for n in 0..KEYS {
            batch.extend(request_line(
                json!(n),
                "tools/call",
                discover_params(json!({"idempotencyKey": format!("race-{n}")})),
            ));
        }
        bridge.send_raw(&batch);
    }
    std::thread::sleep(Duration::from_millis(200));
    unsafe_kill(pid, "CONT");
    let answers: Vec<Vec<Value>> = bridges
        .iter_mut()
        .map(|bridge| {
            let mut by_id = collect_responses(bridge, KEYS);
            by_id.sort_by_key(|r| r["id"].as_u64().unwrap());
            by_id
        })
        .collect();
    let mut in_flight = 0;
    for (n, (first, second)) in answers[0].iter().zip(&answers[1]).enumerate() {
        let (a, b) = (&first["result"], &second["result"]);
        assert_eq!(
            a["command"]["id"], b["command"]["id"],
            "key race-{n}: {a} / {b}"
        );
        for side in [a, b] {
            match side.get("result") {
                Some(_) => assert_eq!(side["command"]["status"], "completed", "{side}"),
                None => {
                    in_flight += 1;
                    let status = side["command"]["status"].as_str().unwrap();
                    assert!(["accepted", "dispatched"].contains(&status), "{side}");
                    assert!(side["command"].get("completedAt").is_none(), "{side}");
                }
            }
        }
        let record = bridges[0].ok("commands/get", json!({"commandId": a["command"]["id"]}));
        assert_eq!(record["command"]["status"], "completed", "{record}");
        assert_eq!(record["command"]["idempotencyKey"], format!("race-{n}"));
    }
    eprintln!("{in_flight} of {KEYS} duplicates arrived while the first was in flight");
    let (code, out, err) = home.run(BIN, &["debug", "sql", "SELECT count(*) AS n FROM commands"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out.trim(),
        format!("{{\"n\":{KEYS}}}"),
        "one Command per key"
    );
}

#[test]
fn terminal_commands_are_retained_up_to_the_bound() {
    const CALLS: usize = TERMINAL_COMMANDS_KEPT + 76;
    /// Stay under the bridge's 256 pending ordinary calls so nothing is refused.
    const BATCH: usize = 200;
    let home = hermetic_home();
    let mut bridge = home.spawn_bridge();
    bridge.initialize("com.example.retention", "i1");
    let mut first_outcome = Value::Null;
    for start in (0..CALLS).step_by(BATCH) {
        let end = (start + BATCH).min(CALLS);
        let mut batch = Vec::new();
        for n in start..end {
            batch.extend(request_line(
                json!(n),
                "tools/call",
                discover_params(json!({"commandId": format!("keep-{n}")})),
            ));
        }
        bridge.send_raw(&batch);
        for response in collect_responses(&mut bridge, end - start) {
            assert_eq!(
                response["result"]["command"]["status"], "completed",
                "{response}"
            );
            if response["id"] == 0 {
                first_outcome = response["result"].clone();
            }
        }
    }
    let (code, out, err) = home.run(BIN, &["debug", "sql", "SELECT count(*) AS n FROM commands"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out.trim(),
        format!("{{\"n\":{TERMINAL_COMMANDS_KEPT}}}"),
        "the SQL bound holds"
    );
    // Pruning goes by completion order. Calls of one batch run concurrently and may complete in
    // any order, but every batch completes before the next is sent: the first call is pruned and
    // the last batch is kept.
    let (code, _) = bridge.err("commands/get", json!({"commandId": "keep-0"}));
    assert_eq!(
        code, "command_not_found",
        "keep-0 is among the oldest and pruned"
    );
    for n in [CALLS - BATCH, CALLS - 1] {
        let record = bridge.ok("commands/get", json!({"commandId": format!("keep-{n}")}));
        assert_eq!(record["command"]["id"], format!("keep-{n}"));
    }
    // Once pruned, a commandId is no longer a retry: it runs as a new Command.
    std::thread::sleep(Duration::from_millis(5));
    let rerun = bridge.ok(
        "tools/call",
        discover_params(json!({"commandId": "keep-0"})),
    );
    assert_eq!(rerun["command"]["id"], "keep-0");
    assert!(
        rerun["command"]["acceptedAt"].as_i64() > first_outcome["command"]["acceptedAt"].as_i64(),
        "a new Command: {rerun} vs {first_outcome}"
    );
}
