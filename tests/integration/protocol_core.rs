//! Process tests for the protocol core: the real `browser-pilot bridge --stdio` over its pipes,
//! a real Broker, each test with its own temporary `BROWSER_PILOT_HOME`. No browser is needed.

use crate::support;

use std::time::Duration;

use serde_json::{Value, json};
use support::*;

fn error_code(message: &Value) -> &str {
    message["error"]["data"]["code"].as_str().unwrap_or("")
}

#[test]
fn malformed_input_matrix_is_fatal_for_that_bridge_only() {
    let home = TestHome::new();
    let mut survivor = home.spawn_bridge();
    survivor.initialize("com.example.survivor", "s1");
    let ws = survivor.ok("workspaces/create", json!({}));
    let workspace_id = ws["workspace"]["id"].clone();
    let lease = survivor.ok(
        "leases/create",
        json!({"workspaceId": workspace_id, "ttlMs": 60000}),
    );

    let mut oversized = vec![b'{'; 1024 * 1024 + 1];
    oversized.push(b'\n');
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("non-JSON", b"this is not json\n".to_vec(), "parse_error"),
        (
            "bad UTF-8",
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\xff\xfe\"}\n".to_vec(),
            "parse_error",
        ),
        ("1 MiB + 1 byte", oversized, "message_too_large"),
        ("non-object", b"[1,2,3]\n".to_vec(), "invalid_request"),
        (
            "missing jsonrpc",
            b"{\"id\":1,\"method\":\"initialize\"}\n".to_vec(),
            "invalid_request",
        ),
        (
            "fractional id",
            b"{\"jsonrpc\":\"2.0\",\"id\":1.5,\"method\":\"tools/list\"}\n".to_vec(),
            "invalid_request",
        ),
        (
            "unsafe integer id",
            b"{\"jsonrpc\":\"2.0\",\"id\":9007199254740992,\"method\":\"tools/list\"}\n".to_vec(),
            "invalid_request",
        ),
        (
            "empty string id",
            b"{\"jsonrpc\":\"2.0\",\"id\":\"\",\"method\":\"tools/list\"}\n".to_vec(),
            "invalid_request",
        ),
        (
            "null id",
            b"{\"jsonrpc\":\"2.0\",\"id\":null,\"method\":\"tools/list\"}\n".to_vec(),
            "invalid_request",
        ),
        (
            "object id",
            b"{\"jsonrpc\":\"2.0\",\"id\":{},\"method\":\"tools/list\"}\n".to_vec(),
            "invalid_request",
        ),
        (
            "array params",
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"params\":[]}\n".to_vec(),
            "invalid_request",
        ),
        ("blank line", b"\n".to_vec(), "parse_error"),
        ("white-space-only line", b" \t \r\n".to_vec(), "parse_error"),
        (
            "leading BOM",
            b"\xEF\xBB\xBF{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\"}\n".to_vec(),
            "parse_error",
        ),
    ];
    for (name, bytes, want) in cases {
        let mut bridge = home.spawn_bridge();
        bridge.initialize("com.example.bad", "b1");
        bridge.send_raw(&bytes);
        let message = bridge
            .next_message(RESPONSE_TIMEOUT)
            .unwrap_or_else(|| panic!("{name}: no error response"));
        assert_eq!(message["id"], Value::Null, "{name}: {message}");
        assert_eq!(error_code(&message), want, "{name}: {message}");
        assert_eq!(message["error"]["data"]["retryable"], false, "{name}");
        let reason = match name {
            "blank line" | "white-space-only line" => json!("blank_line"),
            "leading BOM" => json!("bom"),
            _ => Value::Null,
        };
        assert_eq!(
            message["error"]["data"]["context"]["reason"], reason,
            "{name}: {message}"
        );
        let code = bridge
            .wait_exit(Duration::from_secs(10))
            .unwrap_or_else(|| panic!("{name}: bridge did not exit"));
        assert_ne!(code, 0, "{name}: bridge must exit non-zero");
        // The Broker and the other bridge carry on.
        let beat = survivor.ok(
            "leases/heartbeat",
            json!({"workspaceId": workspace_id, "leaseId": lease["lease"]["id"]}),
        );
        assert_eq!(beat["lease"]["id"], lease["lease"]["id"], "{name}");
    }
}

#[test]
fn request_before_initialize_and_double_initialize() {
    let home = TestHome::new();
    let mut bridge = home.spawn_bridge();
    let (code, _) = bridge.err("workspaces/create", json!({}));
    assert_eq!(code, "not_initialized");
    let (code, _) = bridge.err("initialize", json!({"client": {"id": ""}}));
    assert_eq!(
        code, "invalid_params",
        "a failed initialize is not the first successful one"
    );
    bridge.initialize("com.example.a", "i1");
    let (code, _) = bridge.err(
        "initialize",
        initialize_params("com.example.a", "i1", (1, 1)),
    );
    assert_eq!(code, "already_initialized");
    let (code, _) = bridge.err("no/such/method", json!({}));
    assert_eq!(code, "method_not_found");
}

#[test]
fn initialize_result_shape_and_capabilities() {
    let home = TestHome::new();
    let mut bridge = home.spawn_bridge();
    let mut params = initialize_params("com.example.a", "i1", (1, 1));
    params["requestedCapabilities"] = json!(["workspace.manage", "event.read", "not.a.capability"]);
    let result = bridge.ok("initialize", params);
    assert_eq!(result["protocol"], json!({"major": 1, "minor": 1}));
    assert_eq!(
        result["capabilities"]["granted"],
        json!(["workspace.manage", "event.read"])
    );
    let supported = result["capabilities"]["supported"].as_array().unwrap();
    for name in [
        "browser.control",
        "workspace.manage",
        "observation.read",
        "action.input",
        "artifact.read",
        "event.read",
        "network.read",
        "network.control",
        "page.eval",
    ] {
        assert!(supported.contains(&json!(name)), "{name} not supported");
    }
    assert!(
        result["broker"]["id"]
            .as_str()
            .unwrap()
            .starts_with("broker:")
    );
    assert!(
        result["connectionId"]
            .as_str()
            .unwrap()
            .starts_with("connection:")
    );
    assert!(
        result["executable"]["version"].is_string() && result["service"]["version"].is_string()
    );
    assert!(result["browsers"].is_array());
    assert_eq!(
        result["limits"]["connection"],
        json!({"maxMessageBytes": 1048576, "maxResultBytes": 4194304})
    );
    assert_eq!(result["limits"]["service"]["eventJournalSize"], 10000);
    assert!(
        result["limits"]["service"]["maxArtifactBytes"]
            .as_u64()
            .unwrap()
            > 0
    );
    // Without event.read, events/poll is refused.
    let mut other = home.spawn_bridge();
    let mut params = initialize_params("com.example.b", "i1", (1, 1));
    params["requestedCapabilities"] = json!(["workspace.manage"]);
    other.ok("initialize", params);
    let ws = other.ok("workspaces/create", json!({}));
    let (code, error) = other.err(
        "events/poll",
        json!({"workspaceId": ws["workspace"]["id"], "cursor": "cursor:0"}),
    );
    assert_eq!(code, "capability_denied");
    assert_eq!(error["data"]["context"]["capability"], "event.read");
}

#[test]
fn protocol_versions_negotiate_or_fail_with_remediation() {
    let home = TestHome::new();
    let mut old = home.spawn_bridge();
    let mut params = initialize_params("com.example.a", "i1", (1, 0));
    params["limits"] = json!({"maxMessageBytes": 65536});
    let result = old.ok("initialize", params);
    assert_eq!(result["protocol"], json!({"major": 1, "minor": 0}));
    assert_eq!(
        result["limits"]["connection"]["maxMessageBytes"], 1048576,
        "1.0 uses service limits"
    );
    let (code, _) = old.err("workspaces/create", json!({"clientKey": "k"}));
    assert_eq!(code, "invalid_params", "clientKey needs 1.1");

    let mut future = home.spawn_bridge();
    let mut params = initialize_params("com.example.a", "i2", (2, 0));
    params["protocol"]["min"] = json!({"major": 2, "minor": 0});
    let (code, error) = future.err("initialize", params);
    assert_eq!(code, "protocol_incompatible");
    assert!(error["data"]["remediation"]["action"].is_string());
}

#[test]
fn limit_negotiation_edges_and_pipelined_switch() {
    let home = TestHome::new();
    for (limits, ok) in [
        (json!({"maxMessageBytes": 65535}), false),
        (json!({"maxResultBytes": 1073741825}), false),
        (json!({"maxMessageBytes": "big"}), false),
        (
            json!({"maxMessageBytes": 65536, "maxResultBytes": 65536}),
            true,
        ),
        (
            json!({"maxMessageBytes": 1073741824, "maxResultBytes": 1073741824}),
            true,
        ),
    ] {
        let mut bridge = home.spawn_bridge();
        let mut params = initialize_params("com.example.limits", "i", (1, 1));
        params["limits"] = limits.clone();
        let response = bridge.call("initialize", params);
        match ok {
            true => {
                let connection = &response["result"]["limits"]["connection"];
                let want_message = limits["maxMessageBytes"].as_u64().unwrap().min(1048576);
                assert_eq!(connection["maxMessageBytes"], want_message, "{limits}");
                let want_result = limits["maxResultBytes"].as_u64().unwrap().min(4194304);
                assert_eq!(connection["maxResultBytes"], want_result, "{limits}");
            }
            false => assert_eq!(
                error_code(&response),
                "invalid_params",
                "{limits}: {response}"
            ),
        }
    }

    // The new input limit applies to the very next pipelined line, parsed only after the switch.
    let mut bridge = home.spawn_bridge();
    let mut init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": initialize_params("com.example.limits", "p", (1, 1))});
    init["params"]["limits"] = json!({"maxMessageBytes": 65536});
    let padding = "x".repeat(70_000);
    let big =
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"pad": padding}});
    let mut bytes = init.to_string().into_bytes();
    bytes.push(b'\n');
    bytes.extend(big.to_string().into_bytes());
    bytes.push(b'\n');
    bridge.send_raw(&bytes);
    let first = bridge
        .next_message(RESPONSE_TIMEOUT)
        .expect("initialize response");
    assert_eq!(first["id"], 1);
    assert!(first.get("result").is_some(), "{first}");
    let second = bridge
        .next_message(RESPONSE_TIMEOUT)
        .expect("error for the oversized line");
    assert_eq!(second["id"], Value::Null);
    assert_eq!(error_code(&second), "message_too_large");
    assert_ne!(bridge.wait_exit(Duration::from_secs(10)), Some(0));

    // A line of exactly the negotiated size is accepted.
    let mut bridge = home.spawn_bridge();
    let mut params = initialize_params("com.example.limits", "q", (1, 1));
    params["limits"] = json!({"maxMessageBytes": 65536});
    bridge.ok("initialize", params);
    let skeleton =
        json!({"jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": {"pad": ""}})
            .to_string();
    let pad = "y".repeat(65536 - skeleton.len());
    let exact = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": {"pad": pad}})
        .to_string();
    assert_eq!(exact.len(), 65536);
    bridge.send_raw(format!("{exact}\n").as_bytes());
    let response = bridge.response(&json!(7));
    assert!(response.get("result").is_some(), "{response}");
}

#[test]
fn oversized_result_becomes_result_too_large() {
    let home = TestHome::new();
    let mut small = home.spawn_bridge();
    let mut params = initialize_params("com.example.big", "i", (1, 1));
    params["limits"] = json!({"maxResultBytes": 65536});
    small.ok("initialize", params);
    let ws = small.ok("workspaces/create", json!({}));
    let workspace_id = ws["workspace"]["id"].clone();
    // 4 Connections x 64 short Leases -> 256 lease.expired events, about 80 KiB in one page.
    let mut helpers: Vec<Bridge> = (0..4).map(|_| home.spawn_bridge()).collect();
    for helper in &mut helpers {
        helper.initialize("com.example.big", "i");
        for _ in 0..64 {
            helper.ok(
                "leases/create",
                json!({"workspaceId": workspace_id, "ttlMs": 1000}),
            );
        }
    }
    let all_expired = wait_until(Duration::from_secs(10), || {
        small.ok("workspaces/get", json!({"workspaceId": workspace_id}))["eventCursor"]
            == "cursor:256"
    });
    assert!(all_expired, "256 lease.expired events journaled");
    let page = small.ok(
        "events/poll",
        json!({"workspaceId": workspace_id, "cursor": "cursor:200", "limit": 100}),
    );
    assert_eq!(page["events"].as_array().unwrap().len(), 56);
    assert_eq!(page["hasMore"], false);
    let (code, error) = small.err(
        "events/poll",
        json!({"workspaceId": workspace_id, "cursor": "cursor:0", "limit": 1000}),
    );
    assert_eq!(code, "result_too_large");
    assert_eq!(error["data"]["retryable"], true);
    assert_eq!(error["data"]["context"]["maxResultBytes"], 65536);
    // The Connection is still usable.
    small.ok("workspaces/get", json!({"workspaceId": workspace_id}));
}

#[test]
fn notifications_get_no_response() {
    let home = TestHome::new();
    let mut bridge = home.spawn_bridge();
    bridge.send(&json!({"jsonrpc": "2.0", "method": "initialized"}));
    bridge.send(&json!({"jsonrpc": "2.0", "method": "tools/list"}));
    let id = bridge.request(
        "initialize",
        initialize_params("com.example.n", "i", (1, 1)),
    );
    let first = bridge.next_message(RESPONSE_TIMEOUT).expect("a response");
    assert_eq!(
        first["id"], id,
        "the first line out answers the request, not a notification: {first}"
    );
}

#[test]
fn eight_bridges_launched_at_once_share_one_broker() {
    let home = TestHome::new();
    let mut bridges: Vec<Bridge> = (0..8).map(|_| home.spawn_bridge()).collect();
    let ids: Vec<Value> = bridges
        .iter_mut()
        .map(|b| {
            b.request(
                "initialize",
                initialize_params("com.example.race", "i", (1, 1)),
            )
        })
        .collect();
    let mut broker_ids = std::collections::HashSet::new();
    for (bridge, id) in bridges.iter_mut().zip(&ids) {
        let response = bridge.response(id);
        broker_ids.insert(
            response["result"]["broker"]["id"]
                .as_str()
                .expect("broker id")
                .to_owned(),
        );
    }
    assert_eq!(broker_ids.len(), 1, "{broker_ids:?}");
    let brokers = std::process::Command::new("pgrep")
        .args(["-f", "browser-pilot-internal=broker"])
        .output()
        .expect("pgrep");
    let pids: Vec<u32> = String::from_utf8_lossy(&brokers.stdout)
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect();
    let ours: Vec<&u32> = pids
        .iter()
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .map(|env| {
                    String::from_utf8_lossy(&env).contains(&home.path().display().to_string())
                })
                .unwrap_or(false)
        })
        .collect();
    assert_eq!(
        ours.len(),
        1,
        "exactly one Broker process for this home: {ours:?}"
    );
    assert_eq!(Some(*ours[0]), home.broker_pid());
}

#[test]
fn broker_is_detached_and_outlives_its_bridge() {
    let home = TestHome::new();
    let mut bridge = home.spawn_bridge();
    bridge.initialize("com.example.a", "i");
    let pid = home.broker_pid().expect("locator names the broker");
    bridge.close_stdin();
    assert_eq!(bridge.wait_exit(Duration::from_secs(10)), Some(0));
    assert!(pid_alive(pid), "the Broker survives its bridge");
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let fields: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap()
        .split_whitespace()
        .collect();
    let session: u32 = fields[3].parse().unwrap();
    assert_eq!(session, pid, "the Broker leads its own session");
    let mut next = home.spawn_bridge();
    let result = next.initialize("com.example.a", "i");
    assert_eq!(home.broker_pid(), Some(pid), "the next bridge reuses it");
    assert!(result["broker"]["id"].is_string());
}

#[test]
fn files_are_owner_only_and_hold_only_allowed_contents() {
    let home = TestHome::new();
    let mut bridge = home.spawn_bridge();
    bridge.initialize("com.example.a", "i");
    let ws = bridge.ok("workspaces/create", json!({}));
    bridge.ok(
        "leases/create",
        json!({"workspaceId": ws["workspace"]["id"]}),
    );
    assert_eq!(file_mode(home.path()), 0o700);
    for name in [
        "broker-locator.json",
        "broker-versions.json",
        "broker.sock",
        "startup.lock",
    ] {
        assert_eq!(file_mode(&home.path().join(name)), 0o600, "{name}");
    }
    let locator = home.locator().unwrap();
    let mut keys: Vec<&str> = locator
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort();
    assert_eq!(
        keys,
        vec![
            "brokerId",
            "executable",
            "ipc",
            "pid",
            "protocol",
            "startedAt"
        ]
    );
    let text = std::fs::read_to_string(home.path().join("broker-versions.json")).unwrap()
        + &std::fs::read_to_string(home.path().join("broker-locator.json")).unwrap();
    for forbidden in ["workspace:", "lease:", "target:", "connection:", "browser:"] {
        assert!(
            !text.contains(forbidden),
            "{forbidden} leaked into a file: {text}"
        );
    }
    let versions: Value = serde_json::from_str(
        &std::fs::read_to_string(home.path().join("broker-versions.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(versions["installations"].as_array().unwrap().len(), 1);
}

#[test]
fn stale_locator_and_socket_are_recovered() {
    let home = TestHome::new();
    std::fs::set_permissions(
        home.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o700),
    )
    .unwrap();
    let mut dead = std::process::Command::new("true").spawn().unwrap();
    let dead_pid = dead.id();
    dead.wait().unwrap();
    let stale = json!({"brokerId": "broker:dead", "pid": dead_pid, "ipc": 1, "executable": {"version": "0.0.0", "installationId": "x"}, "protocol": {}, "startedAt": 0});
    std::fs::write(home.path().join("broker-locator.json"), stale.to_string()).unwrap();
    // A socket file nobody listens on.
    drop(std::os::unix::net::UnixListener::bind(home.path().join("broker.sock")).unwrap());
    assert!(home.path().join("broker.sock").exists());
    let mut bridge = home.spawn_bridge();
    let result = bridge.initialize("com.example.a", "i");
    assert_ne!(result["broker"]["id"], "broker:dead");
    let pid = home.broker_pid().unwrap();
    assert_ne!(pid, dead_pid);
    assert!(pid_alive(pid));
}

#[test]
fn live_unresponsive_broker_is_not_killed() {
    let home = TestHome::new();
    std::fs::set_permissions(
        home.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o700),
    )
    .unwrap();
    // A "Broker" that accepts and never answers: this test process itself.
    let listener = std::os::unix::net::UnixListener::bind(home.path().join("broker.sock")).unwrap();
    let held = std::thread::spawn(move || {
        // Hold the one connection open, never answering, until the bridge gave up.
        let held = listener.accept();
        std::thread::sleep(Duration::from_secs(5));
        drop(held);
    });
    let locator = json!({"brokerId": "broker:stuck", "pid": std::process::id(), "ipc": 1, "executable": {"version": "0", "installationId": "x"}, "protocol": {}, "startedAt": 0});
    std::fs::write(home.path().join("broker-locator.json"), locator.to_string()).unwrap();
    let mut bridge = home.spawn_bridge();
    let (code, error) = bridge.err(
        "initialize",
        initialize_params("com.example.a", "i", (1, 1)),
    );
    assert_eq!(code, "browser_disconnected");
    assert_eq!(
        error["data"]["remediation"]["action"],
        "restart_unresponsive_broker"
    );
    assert_eq!(error["data"]["retryable"], true);
    // We are still alive (the bridge killed nothing) and our locator was not replaced.
    assert_eq!(home.locator().unwrap()["brokerId"], "broker:stuck");
    std::fs::remove_file(home.path().join("broker-locator.json")).unwrap();
    drop(bridge);
    held.join().unwrap();
}

#[test]
fn incompatible_broker_is_not_replaced() {
    let home = TestHome::new();
    std::fs::set_permissions(
        home.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o700),
    )
    .unwrap();
    let listener = std::os::unix::net::UnixListener::bind(home.path().join("broker.sock")).unwrap();
    let server = std::thread::spawn(move || {
        use std::io::{BufRead, Write};
        if let Ok((stream, _)) = listener.accept() {
            let mut reader = std::io::BufReader::new(stream.try_clone().unwrap());
            let mut hello = String::new();
            reader.read_line(&mut hello).unwrap();
            let mut writer = stream;
            let welcome = json!({"welcome": {"ipc": 99, "brokerId": "broker:future", "pid": 1, "serviceVersion": "9.0.0", "installationId": "y"}});
            writer.write_all(format!("{welcome}\n").as_bytes()).unwrap();
            std::thread::sleep(Duration::from_millis(500));
        }
    });
    let mut bridge = home.spawn_bridge();
    let (code, error) = bridge.err(
        "initialize",
        initialize_params("com.example.a", "i", (1, 1)),
    );
    assert_eq!(code, "protocol_incompatible");
    assert_eq!(
        error["data"]["remediation"]["action"],
        "use_compatible_executable"
    );
    server.join().unwrap();
    assert!(
        home.path().join("broker.sock").exists(),
        "the incompatible Broker's endpoint was left alone"
    );
}

#[test]
fn workspace_lifecycle_and_principal_isolation() {
    let home = TestHome::new();
    let mut a = home.spawn_bridge();
    a.initialize("com.example.a", "i1");
    let created = a.ok("workspaces/create", json!({"clientKey": "task-1"}));
    let id = created["workspace"]["id"].clone();
    assert!(id.as_str().unwrap().starts_with("workspace:"));
    assert_eq!(created["workspace"]["state"], "active");
    assert!(created["managedTabSet"]["id"].is_string());
    assert_eq!(created["eventCursor"], "cursor:0");
    assert_eq!(
        a.ok("workspaces/create", json!({"clientKey": "task-1"}))["workspace"]["id"],
        id,
        "clientKey is idempotent"
    );
    let (code, _) = a.err(
        "workspaces/create",
        json!({"clientKey": "task-1", "browserId": "browser:other"}),
    );
    assert_eq!(code, "client_key_conflict");
    // A key first used with an explicit browser: a retry without browserId is the same call.
    let pinned = a.ok(
        "workspaces/create",
        json!({"clientKey": "task-2", "browserId": "browser:pinned"}),
    );
    let retried = a.ok("workspaces/create", json!({"clientKey": "task-2"}));
    assert_eq!(retried["workspace"]["id"], pinned["workspace"]["id"]);
    assert_eq!(retried["workspace"]["browserId"], "browser:pinned");
    let got = a.ok("workspaces/get", json!({"workspaceId": id}));
    assert_eq!(got["workspace"]["id"], id);
    assert_eq!(got["eventCursor"], "cursor:0");

    // Same client id, other instance: another Principal that cannot see it.
    let mut b = home.spawn_bridge();
    b.initialize("com.example.a", "i2");
    for method in ["workspaces/get", "workspaces/release"] {
        let (code, _) = b.err(method, json!({"workspaceId": id}));
        assert_eq!(code, "workspace_not_found", "{method}");
    }
    let (code, _) = b.err(
        "events/poll",
        json!({"workspaceId": id, "cursor": "cursor:0"}),
    );
    assert_eq!(code, "workspace_not_found");
    let (code, _) = b.err("leases/create", json!({"workspaceId": id}));
    assert_eq!(code, "workspace_not_found");

    let first = a.ok("workspaces/release", json!({"workspaceId": id}));
    let second = a.ok("workspaces/release", json!({"workspaceId": id}));
    assert_eq!(first, second, "double release returns the same success");
    assert_eq!(first["workspace"]["state"], "released");
    let (code, error) = a.err("workspaces/get", json!({"workspaceId": id}));
    assert_eq!(code, "workspace_not_found");
    assert_eq!(error["data"]["context"]["state"], "released");
    let (code, _) = a.err("workspaces/get", json!({"workspaceId": 5}));
    assert_eq!(code, "invalid_params");
}

#[test]
fn lease_lifecycle_ownership_and_replacement_bridge() {
    let home = TestHome::new();
    let mut a = home.spawn_bridge();
    a.initialize("com.example.a", "i1");
    let ws = a.ok("workspaces/create", json!({}))["workspace"]["id"].clone();
    for ttl in [999, 300001, -5] {
        let (code, _) = a.err("leases/create", json!({"workspaceId": ws, "ttlMs": ttl}));
        assert_eq!(code, "invalid_params", "ttl {ttl}");
    }
    for ttl in [1000, 300000] {
        let lease = a.ok("leases/create", json!({"workspaceId": ws, "ttlMs": ttl}));
        assert_eq!(lease["lease"]["ttlMs"], ttl);
    }
    let default = a.ok("leases/create", json!({"workspaceId": ws}));
    assert_eq!(default["lease"]["ttlMs"], 30000);
    let keyed = a.ok(
        "leases/create",
        json!({"workspaceId": ws, "clientKey": "run-1", "ttlMs": 5000}),
    );
    std::thread::sleep(Duration::from_millis(20));
    let renewed = a.ok(
        "leases/create",
        json!({"workspaceId": ws, "clientKey": "run-1", "ttlMs": 6000}),
    );
    assert_eq!(renewed["lease"]["id"], keyed["lease"]["id"]);
    assert!(renewed["lease"]["expiresAt"].as_i64() > keyed["lease"]["expiresAt"].as_i64());
    let lease_id = default["lease"]["id"].clone();
    let before = default["lease"]["expiresAt"].as_i64().unwrap();
    std::thread::sleep(Duration::from_millis(20));
    let beat = a.ok(
        "leases/heartbeat",
        json!({"workspaceId": ws, "leaseId": lease_id}),
    );
    assert!(beat["lease"]["expiresAt"].as_i64().unwrap() > before);

    // A replacement bridge of the same product instance cannot continue the Lease...
    let mut replacement = home.spawn_bridge();
    replacement.initialize("com.example.a", "i1");
    let (code, _) = replacement.err(
        "leases/heartbeat",
        json!({"workspaceId": ws, "leaseId": lease_id}),
    );
    assert_eq!(code, "lease_not_owned");
    let (code, _) = replacement.err(
        "leases/release",
        json!({"workspaceId": ws, "leaseId": lease_id}),
    );
    assert_eq!(code, "lease_not_owned");
    // ...but may take a new one on the still-active Workspace.
    replacement.ok("leases/create", json!({"workspaceId": ws}));

    let released = a.ok(
        "leases/release",
        json!({"workspaceId": ws, "leaseId": lease_id}),
    );
    assert_eq!(released["released"], true);
    let (code, _) = a.err(
        "leases/heartbeat",
        json!({"workspaceId": ws, "leaseId": lease_id}),
    );
    assert_eq!(code, "lease_not_found");
}

#[test]
fn sigkill_of_a_bridge_leaves_its_lease_to_expire() {
    let home = TestHome::new();
    let mut victim = home.spawn_bridge();
    victim.initialize("com.example.a", "i1");
    let ws = victim.ok("workspaces/create", json!({}));
    let workspace_id = ws["workspace"]["id"].clone();
    let doomed = victim.ok(
        "leases/create",
        json!({"workspaceId": workspace_id, "ttlMs": 1000}),
    )["lease"]["id"]
        .clone();

    let mut other = home.spawn_bridge();
    other.initialize("com.example.a", "i1");
    let mine = other.ok(
        "leases/create",
        json!({"workspaceId": workspace_id, "ttlMs": 60000}),
    )["lease"]["id"]
        .clone();

    victim.child.kill().unwrap();
    victim.child.wait().unwrap();

    let mut cursor = ws["eventCursor"].as_str().unwrap().to_owned();
    let mut expired = None;
    let found = wait_until(Duration::from_secs(10), || {
        let page = other.ok(
            "events/poll",
            json!({"workspaceId": workspace_id, "cursor": cursor, "limit": 100}),
        );
        cursor = page["nextCursor"].as_str().unwrap().to_owned();
        expired = page["events"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["type"] == "lease.expired")
            .cloned();
        expired.is_some()
    });
    assert!(found, "lease.expired journaled");
    let event = expired.unwrap();
    assert_eq!(event["payload"]["leaseId"], doomed);
    assert_eq!(event["leaseId"], doomed);
    assert!(event["id"].as_str().unwrap().starts_with("event:"));
    assert_eq!(event["sequence"], 1);
    assert_eq!(event["browserConnectionGeneration"], 0);
    // The survivor keeps working and heard the event as a notification too.
    other.ok(
        "leases/heartbeat",
        json!({"workspaceId": workspace_id, "leaseId": mine}),
    );
    let notes = other.drain_notifications(Duration::from_millis(200));
    assert!(
        notes
            .iter()
            .any(|n| n["method"] == "events/event"
                && n["params"]["event"]["type"] == "lease.expired"),
        "{notes:?}"
    );
}

#[test]
fn eof_releases_leases_and_shutdown_exits_only_the_bridge() {
    let home = TestHome::new();
    let mut a = home.spawn_bridge();
    a.initialize("com.example.a", "i1");
    let ws = a.ok("workspaces/create", json!({}))["workspace"]["id"].clone();
    a.ok("leases/create", json!({"workspaceId": ws, "ttlMs": 300000}));
    let count = |home: &TestHome| {
        let (code, out, err) = home.run(BIN, &["debug", "sql", "SELECT count(*) AS n FROM leases"]);
        assert_eq!(code, 0, "{err}");
        serde_json::from_str::<Value>(out.trim()).unwrap()["n"]
            .as_i64()
            .unwrap()
    };
    assert_eq!(count(&home), 1);
    a.close_stdin();
    assert_eq!(a.wait_exit(Duration::from_secs(10)), Some(0));
    assert!(
        wait_until(Duration::from_secs(10), || count(&home) == 0),
        "EOF released the Lease at once"
    );

    let mut b = home.spawn_bridge();
    let broker = b.initialize("com.example.a", "i1")["broker"]["id"].clone();
    b.ok("leases/create", json!({"workspaceId": ws, "ttlMs": 300000}));
    let result = b.ok("shutdown", json!({}));
    assert_eq!(result, json!({}));
    assert_eq!(b.wait_exit(Duration::from_secs(10)), Some(0));
    assert_eq!(count(&home), 0, "shutdown released the Lease");
    let mut c = home.spawn_bridge();
    assert_eq!(
        c.initialize("com.example.a", "i1")["broker"]["id"],
        broker,
        "the shared Broker kept running"
    );
    c.ok("workspaces/get", json!({"workspaceId": ws}));
}

#[test]
fn pending_call_saturation_is_answered_without_dispatch() {
    let home = TestHome::new();
    let mut bridge = home.spawn_bridge();
    bridge.initialize("com.example.a", "i1");
    let ws = bridge.ok("workspaces/create", json!({}))["workspace"]["id"].clone();
    let pid = home.broker_pid().unwrap();
    stop_process(pid);
    let mut batch = Vec::new();
    for n in 0..300 {
        batch.extend(json!({"jsonrpc": "2.0", "id": format!("o{n}"), "method": "workspaces/get", "params": {"workspaceId": ws}}).to_string().into_bytes());
        batch.push(b'\n');
    }
    for n in 0..20 {
        batch.extend(json!({"jsonrpc": "2.0", "id": format!("b{n}"), "method": "commands/get", "params": {"commandId": "command:x"}}).to_string().into_bytes());
        batch.push(b'\n');
    }
    bridge.send_raw(&batch);
    let mut rejected = Vec::new();
    while rejected.len() < 48 {
        let message = bridge
            .next_message(Duration::from_secs(10))
            .expect("saturation answers arrive while the Broker is stopped");
        assert_eq!(error_code(&message), "result_too_large", "{message}");
        assert_eq!(message["error"]["data"]["retryable"], true);
        rejected.push(message["id"].as_str().unwrap().to_owned());
    }
    assert!(
        bridge.next_message(Duration::from_millis(300)).is_none(),
        "nothing else answers while the Broker is stopped"
    );
    unsafe_kill(pid, "CONT");
    let expected_rejected: Vec<String> = (256..300)
        .map(|n| format!("o{n}"))
        .chain((16..20).map(|n| format!("b{n}")))
        .collect();
    let mut sorted = rejected.clone();
    sorted.sort();
    let mut want = expected_rejected.clone();
    want.sort();
    assert_eq!(sorted, want);
    let mut answered = Vec::new();
    while answered.len() < 272 {
        let message = bridge
            .next_message(Duration::from_secs(20))
            .expect("dispatched calls complete");
        answered.push(message["id"].as_str().unwrap().to_owned());
        if message["id"].as_str().unwrap().starts_with('o') {
            assert!(message.get("result").is_some(), "{message}");
        }
    }
    // Ordinary calls complete in input order.
    let ordinary: Vec<&String> = answered.iter().filter(|id| id.starts_with('o')).collect();
    let in_order: Vec<String> = (0..256).map(|n| format!("o{n}")).collect();
    assert_eq!(ordinary, in_order.iter().collect::<Vec<_>>());
    let ws_ok = bridge.ok("workspaces/get", json!({"workspaceId": ws}));
    assert_eq!(ws_ok["workspace"]["id"], ws);
}

#[test]
fn pipelined_thousand_calls_correlate() {
    let home = TestHome::new();
    let mut bridge = home.spawn_bridge();
    bridge.initialize("com.example.a", "i1");
    let ws = bridge.ok("workspaces/create", json!({}))["workspace"]["id"].clone();
    let lease = bridge.ok("leases/create", json!({"workspaceId": ws}))["lease"]["id"].clone();
    let mut batch = Vec::new();
    for n in 0..1000 {
        let (method, params) = match n % 2 {
            0 => (
                "leases/heartbeat",
                json!({"workspaceId": ws, "leaseId": lease}),
            ),
            _ => ("workspaces/get", json!({"workspaceId": ws})),
        };
        batch.extend(
            json!({"jsonrpc": "2.0", "id": n, "method": method, "params": params})
                .to_string()
                .into_bytes(),
        );
        batch.push(b'\n');
    }
    bridge.send_raw(&batch);
    // Every id gets exactly one response: a result, or (past the 256 pending-call cap)
    // retryable result_too_large without dispatch.
    let mut seen = std::collections::HashMap::new();
    for _ in 0..1000 {
        let message = bridge.next_message(RESPONSE_TIMEOUT).expect("response");
        let n = message["id"].as_u64().expect("integer id");
        assert!(
            seen.insert(n, message.clone()).is_none(),
            "id {n} answered twice"
        );
    }
    assert!(
        bridge.next_message(Duration::from_millis(200)).is_none(),
        "no extra responses"
    );
    let mut dispatched = 0;
    for n in 0..1000u64 {
        let message = &seen[&n];
        match message.get("result") {
            Some(result) if n % 2 == 0 => {
                assert_eq!(result["lease"]["id"], lease);
                dispatched += 1;
            }
            Some(result) => {
                assert_eq!(result["workspace"]["id"], ws);
                dispatched += 1;
            }
            None => assert_eq!(error_code(message), "result_too_large", "{message}"),
        }
    }
    assert!(
        dispatched >= 256,
        "at least the first 256 were dispatched: {dispatched}"
    );
}

#[test]
fn event_poll_cursors_paging_and_expiry() {
    let home = TestHome::new().with_env("BROWSER_PILOT_EVENT_JOURNAL_SIZE", "16");
    let mut bridge = home.spawn_bridge();
    let init = bridge.initialize("com.example.a", "i1");
    assert_eq!(init["limits"]["service"]["eventJournalSize"], 16);
    let ws = bridge.ok("workspaces/create", json!({}))["workspace"]["id"].clone();
    for bad in ["cursor:-1", "cursor:01", "7", "cursor:"] {
        let (code, _) = bridge.err("events/poll", json!({"workspaceId": ws, "cursor": bad}));
        assert_eq!(code, "invalid_params", "{bad}");
    }
    for limit in [json!(0), json!(1001), json!("5")] {
        let (code, _) = bridge.err(
            "events/poll",
            json!({"workspaceId": ws, "cursor": "cursor:0", "limit": limit}),
        );
        assert_eq!(code, "invalid_params", "{limit}");
    }
    let (code, error) = bridge.err(
        "events/poll",
        json!({"workspaceId": ws, "cursor": "cursor:5"}),
    );
    assert_eq!(code, "invalid_params", "a cursor from the future");
    assert_eq!(error["data"]["context"]["latestCursor"], "cursor:0");
    let empty = bridge.ok(
        "events/poll",
        json!({"workspaceId": ws, "cursor": "cursor:0"}),
    );
    assert_eq!(
        empty,
        json!({"events": [], "nextCursor": "cursor:0", "hasMore": false})
    );

    for _ in 0..20 {
        bridge.ok("leases/create", json!({"workspaceId": ws, "ttlMs": 1000}));
    }
    assert!(wait_until(Duration::from_secs(10), || {
        bridge.ok("workspaces/get", json!({"workspaceId": ws}))["eventCursor"] == "cursor:20"
    }));
    let (code, error) = bridge.err(
        "events/poll",
        json!({"workspaceId": ws, "cursor": "cursor:0"}),
    );
    assert_eq!(code, "cursor_expired");
    assert_eq!(error["data"]["context"]["earliestCursor"], "cursor:4");
    assert_eq!(error["data"]["context"]["latestCursor"], "cursor:20");
    assert_eq!(error["data"]["remediation"]["action"], "rebuild_state");
    let mut cursor = "cursor:4".to_owned();
    let mut sequences = Vec::new();
    loop {
        let page = bridge.ok(
            "events/poll",
            json!({"workspaceId": ws, "cursor": cursor, "limit": 5}),
        );
        sequences.extend(
            page["events"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| e["sequence"].as_u64().unwrap()),
        );
        cursor = page["nextCursor"].as_str().unwrap().to_owned();
        if page["hasMore"] == false {
            break;
        }
    }
    assert_eq!(sequences, (5..=20).collect::<Vec<u64>>());
    assert_eq!(cursor, "cursor:20");
}

#[test]
fn debug_sql_reads_and_refuses_writes() {
    let home = TestHome::new();
    let mut bridge = home.spawn_bridge();
    bridge.initialize("com.example.a", "i1");
    bridge.ok("workspaces/create", json!({}));
    let (code, out, err) = home.run(
        BIN,
        &["debug", "sql", "SELECT count(*) AS n FROM workspaces"],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.trim(), "{\"n\":1}");
    for sql in [
        "DELETE FROM workspaces",
        "INSERT INTO tombstones VALUES ('x', 1, 1)",
        "ATTACH DATABASE ':memory:' AS other",
        "PRAGMA user_version = 7",
        "SELECT 1; DELETE FROM workspaces",
    ] {
        let (code, _, err) = home.run(BIN, &["debug", "sql", sql]);
        assert_ne!(code, 0, "{sql} must be refused");
        assert!(
            err.contains("read_only_violation") || err.contains("invalid_params"),
            "{sql}: {err}"
        );
    }
    let (_, out, _) = home.run(
        BIN,
        &["debug", "sql", "SELECT count(*) AS n FROM workspaces"],
    );
    assert_eq!(out.trim(), "{\"n\":1}", "nothing was changed");
}

#[test]
fn bp_disconnect_refuses_while_hosts_are_connected() {
    let home = TestHome::new();
    let mut bridge = home.spawn_bridge();
    bridge.initialize("com.example.a", "i1");
    let pid = home.broker_pid().unwrap();
    let (code, _, err) = home.run(BP, &["disconnect"]);
    assert_eq!(code, 4, "{err}");
    assert!(err.contains("broker_in_use"), "{err}");
    assert!(pid_alive(pid));
    bridge.close_stdin();
    bridge.wait_exit(Duration::from_secs(10));
    let (code, out, err) = home.run(BP, &["disconnect"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        wait_until(Duration::from_secs(5), || !pid_alive(pid)),
        "the Broker exited"
    );
    assert!(!home.path().join("broker-locator.json").exists());
    let (code, out, _) = home.run(BP, &["status"]);
    assert_eq!(code, 3, "{out}");
}

/// `bp disconnect` gets the answer to its `broker/shutdown` however quickly the Broker exits
/// after it: the Broker lets its Connections finish before it stops. Before, about one round in
/// ten failed with "the Broker closed the connection" although the Broker stopped.
#[test]
fn bp_disconnect_always_gets_its_answer() {
    let home = TestHome::new();
    for round in 0..30 {
        let mut bridge = home.spawn_bridge();
        bridge.initialize("com.example.a", "i1");
        let pid = home.broker_pid().unwrap();
        bridge.close_stdin();
        bridge.wait_exit(Duration::from_secs(10));
        let (code, out, err) = home.run(BP, &["disconnect"]);
        assert_eq!(code, 0, "round {round}: {out}{err}");
        assert!(out.contains("\"stopped\":true"), "round {round}: {out}");
        assert!(
            wait_until(Duration::from_secs(5), || !pid_alive(pid)),
            "round {round}: the Broker exited"
        );
    }
}

#[test]
fn a_broker_whose_endpoint_was_replaced_exits() {
    let home = TestHome::new();
    let mut first = home.spawn_bridge();
    first.initialize("com.example.a", "i");
    let old = home.broker_pid().unwrap();
    first.close_stdin();
    first.wait_exit(Duration::from_secs(10));
    // The home is wiped and a new Broker takes the same path before the old one looks.
    std::fs::remove_file(home.path().join("broker.sock")).unwrap();
    std::fs::remove_file(home.path().join("broker-locator.json")).unwrap();
    let mut second = home.spawn_bridge();
    second.initialize("com.example.a", "i");
    let new = home.broker_pid().unwrap();
    assert_ne!(new, old);
    assert!(
        wait_until(Duration::from_secs(5), || !pid_alive(old)),
        "the replaced Broker exits"
    );
    assert!(pid_alive(new), "the new Broker keeps running");
    second.ok("workspaces/create", json!({}));
}

#[test]
fn sigterm_stops_the_broker_cleanly() {
    let home = TestHome::new();
    let mut bridge = home.spawn_bridge();
    bridge.initialize("com.example.a", "i");
    let pid = home.broker_pid().unwrap();
    unsafe_kill(pid, "TERM");
    assert!(
        wait_until(Duration::from_secs(5), || !pid_alive(pid)),
        "the Broker exits on SIGTERM"
    );
    assert!(
        !home.path().join("broker-locator.json").exists(),
        "its locator is removed"
    );
    assert!(
        !home.path().join("broker.sock").exists(),
        "its socket is removed"
    );
}

/// Lease expiry is judged by when the host's bridge read the heartbeat: a heartbeat sent on time
/// while the Broker was stopped past the TTL keeps its Lease; one sent after expiry ends it and
/// journals `lease.expired` exactly once, although the sweep never saw it.
#[test]
fn heartbeats_are_judged_by_when_the_bridge_read_them() {
    let home = TestHome::new();
    let mut host = home.spawn_bridge();
    host.initialize("com.example.a", "i1");
    let created = host.ok("workspaces/create", json!({}));
    let ws = created["workspace"]["id"].clone();
    let cursor = created["eventCursor"].clone();
    let broker = home.broker_pid().expect("a Broker runs");

    // On time: sent well within a 3 s TTL, read by the bridge at once, then the Broker stays
    // stopped for 4.5 s.
    let kept =
        host.ok("leases/create", json!({"workspaceId": ws, "ttlMs": 3000}))["lease"]["id"].clone();
    stop_process(broker);
    let beat = host.request(
        "leases/heartbeat",
        json!({"workspaceId": ws, "leaseId": kept}),
    );
    std::thread::sleep(Duration::from_millis(4500));
    unsafe_kill(broker, "CONT");
    let answer = host.response(&beat);
    assert!(answer["result"]["lease"]["id"] == kept, "kept: {answer}");
    host.ok(
        "leases/heartbeat",
        json!({"workspaceId": ws, "leaseId": kept}),
    );

    // Late: the Lease's TTL passes while the Broker is stopped, then the heartbeat is sent.
    let late =
        host.ok("leases/create", json!({"workspaceId": ws, "ttlMs": 1000}))["lease"]["id"].clone();
    stop_process(broker);
    std::thread::sleep(Duration::from_millis(1500));
    let beat = host.request(
        "leases/heartbeat",
        json!({"workspaceId": ws, "leaseId": late}),
    );
    unsafe_kill(broker, "CONT");
    let answer = host.response(&beat);
    assert_eq!(error_code(&answer), "lease_expired", "{answer}");

    // Exactly one lease.expired, for the late Lease only; the kept one is still alive.
    std::thread::sleep(Duration::from_millis(300));
    let events = host.ok(
        "events/poll",
        json!({"workspaceId": ws, "cursor": cursor, "limit": 100}),
    )["events"]
        .clone();
    let expired: Vec<&Value> = events
        .as_array()
        .unwrap()
        .iter()
        .filter(|event| event["type"] == "lease.expired")
        .collect();
    assert_eq!(expired.len(), 1, "{events}");
    assert_eq!(expired[0]["payload"]["leaseId"], late);
    host.ok(
        "leases/heartbeat",
        json!({"workspaceId": ws, "leaseId": kept}),
    );
}

/// Another Principal's Lease and Workspace ids answer exactly as unknown ones.
#[test]
fn another_principals_ids_answer_like_unknown_ones() {
    let home = TestHome::new();
    let mut a = home.spawn_bridge();
    a.initialize("com.example.a", "i1");
    let ws = a.ok("workspaces/create", json!({}))["workspace"]["id"].clone();
    let lease = a.ok("leases/create", json!({"workspaceId": ws}))["lease"]["id"].clone();
    let mut b = home.spawn_bridge();
    b.initialize("com.example.b", "i1");
    let own = b.ok("workspaces/create", json!({}))["workspace"]["id"].clone();
    let unknown_lease = "lease:00000000000000000000000000000000";
    let unknown_ws = "workspace:00000000000000000000000000000000";
    for method in ["leases/heartbeat", "leases/release"] {
        for workspace in [&ws, &own] {
            let (theirs, theirs_error) =
                b.err(method, json!({"workspaceId": workspace, "leaseId": lease}));
            let (unknown, unknown_error) = b.err(
                method,
                json!({"workspaceId": workspace, "leaseId": unknown_lease}),
            );
            assert_eq!(
                theirs, unknown,
                "{method}: {theirs_error} vs {unknown_error}"
            );
            assert_eq!(theirs_error["message"], unknown_error["message"]);
            assert_eq!(theirs_error["data"], unknown_error["data"]);
        }
    }
    for method in ["workspaces/get", "workspaces/release"] {
        let (theirs, theirs_error) = b.err(method, json!({"workspaceId": ws}));
        let (unknown, unknown_error) = b.err(method, json!({"workspaceId": unknown_ws}));
        assert_eq!(theirs, unknown, "{method}");
        assert_eq!(theirs_error["data"], unknown_error["data"], "{method}");
    }
    let (theirs, _) = b.err("leases/create", json!({"workspaceId": ws}));
    let (unknown, _) = b.err("leases/create", json!({"workspaceId": unknown_ws}));
    assert_eq!(theirs, unknown);
    // A's Lease is untouched by all of it.
    a.ok(
        "leases/heartbeat",
        json!({"workspaceId": ws, "leaseId": lease}),
    );
}

/// Whether `fd`'s open file description has `O_NONBLOCK` set.
fn nonblocking(fd: &impl std::os::fd::AsRawFd) -> bool {
    // SAFETY: F_GETFL on a descriptor the caller owns; it touches no memory.
    let flags = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) };
    assert!(flags >= 0, "F_GETFL failed");
    flags & libc::O_NONBLOCK != 0
}

#[test]
fn host_stdio_as_files_or_shared_pipes_works_and_is_left_blocking() {
    use std::io::{BufRead as _, BufReader, Write as _};
    use std::process::Stdio;

    let home = TestHome::new();
    let request = |id: u64, method: &str, params: Value| {
        format!(
            "{}\n",
            json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
        )
    };
    let initialize = initialize_params("com.example.stdio", "i", (1, 1));

    // Regular files cannot be polled: the bridge reads and writes them as blocking stdio.
    let files = tempfile::tempdir().expect("temp dir");
    let input = files.path().join("host-input.ndjson");
    let output = files.path().join("host-output.ndjson");
    let lines = request(1, "initialize", initialize.clone()) + &request(2, "tools/list", json!({}));
    std::fs::write(&input, lines).expect("write input");
    let status = home
        .command(BIN)
        .args(["bridge", "--stdio"])
        .stdin(std::fs::File::open(&input).expect("open input"))
        .stdout(std::fs::File::create(&output).expect("create output"))
        .stderr(Stdio::null())
        .status()
        .expect("run the bridge");
    assert!(status.success(), "bridge exit {status:?}");
    let answered: Vec<Value> = std::fs::read_to_string(&output)
        .expect("read output")
        .lines()
        .map(|line| serde_json::from_str(line).expect("JSON line"))
        .collect();
    assert_eq!(answered.len(), 2, "{answered:?}");
    assert_eq!(
        (&answered[0]["id"], &answered[1]["id"]),
        (&json!(1), &json!(2))
    );
    let tools = answered[1]["result"]["tools"].as_array();
    assert!(tools.is_some_and(|t| !t.is_empty()), "{}", answered[1]);

    // A pipe whose read end this test keeps open too shares its file description with the
    // bridge's stdin: polled (non-blocking) while the bridge runs, blocking again after it exits.
    let (read_end, mut write_end) = std::io::pipe().expect("pipe");
    // Blocking before the bridge starts (asked before the spawn: once it runs, it may already
    // have switched the shared description to non-blocking).
    assert!(!nonblocking(&read_end));
    let mut child = home
        .command(BIN)
        .args(["bridge", "--stdio"])
        .stdin(read_end.try_clone().expect("clone read end"))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn the bridge");
    write_end
        .write_all(request(7, "initialize", initialize).as_bytes())
        .expect("write");
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
    let mut line = String::new();
    stdout
        .read_line(&mut line)
        .expect("read the initialize response");
    assert_eq!(serde_json::from_str::<Value>(&line).expect("JSON")["id"], 7);
    assert!(nonblocking(&read_end), "the bridge polls a piped stdin");
    drop(write_end);
    let status = child.wait().expect("bridge exits on EOF");
    assert!(status.success(), "bridge exit {status:?}");
    assert!(
        !nonblocking(&read_end),
        "the bridge restored the pipe's flags"
    );
}
