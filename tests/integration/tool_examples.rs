//! Runs every advertised tool once against a real headless Chromium and checks that
//! `docs/tool-examples.json` has an example request and result for it. With
//! `BROWSER_PILOT_UPDATE_DOCS=1` it rewrites that file from this run (ids shortened, long arrays
//! cut), from which `docs/tools.md` is rendered.

use crate::support;

use std::collections::BTreeMap;

use serde_json::{Value, json};
use support::TEST_LEASE_TTL_MS;
use support::rig::{Agent, Rig};

/// Shortens opaque ids and cuts long arrays so examples stay readable.
fn tidy(value: &Value) -> Value {
    match value {
        Value::String(s) => {
            let prefixes = [
                "workspace:",
                "lease:",
                "target:",
                "command:",
                "observation:",
                "event:",
                "dialog:",
                "frame:",
                "artifact:",
                "connection:",
                "broker:",
                "tabset:",
                "request:",
                "rule:",
            ];
            match prefixes.iter().find(|p| s.starts_with(*p)) {
                Some(prefix) if s.len() > prefix.len() + 8 => {
                    json!(format!("{}{}…", prefix, &s[prefix.len()..prefix.len() + 8]))
                }
                _ => json!(s),
            }
        }
        Value::Array(items) if items.len() > 3 => {
            let mut kept: Vec<Value> = items.iter().take(3).map(tidy).collect();
            kept.push(json!(format!("… {} more", items.len() - 3)));
            Value::Array(kept)
        }
        Value::Array(items) => Value::Array(items.iter().map(tidy).collect()),
        Value::Object(map) => {
            Value::Object(map.iter().map(|(k, v)| (k.clone(), tidy(v))).collect())
        }
        other => other.clone(),
    }
}

/// An agent granted every capability the Broker supports, so `tools/list` shows every tool.
fn agent_with_every_capability(rig: &Rig) -> Agent {
    agent_in(rig, json!({}))
}

/// [`agent_with_every_capability`] in a Workspace created with `create`'s params.
fn agent_in(rig: &Rig, create: Value) -> Agent {
    let mut bridge = rig.home.spawn_bridge();
    let mut params = support::initialize_params("com.example.docs", "i1", (1, 1));
    let probe = rig.home.spawn_bridge().ok("initialize", params.clone());
    params["requestedCapabilities"] = probe["capabilities"]["supported"].clone();
    bridge.ok("initialize", params);
    let ws = bridge.ok("workspaces/create", create);
    let workspace_id = ws["workspace"]["id"].clone();
    let lease = bridge.ok(
        "leases/create",
        json!({"workspaceId": workspace_id, "ttlMs": TEST_LEASE_TTL_MS}),
    );
    Agent {
        bridge,
        workspace_id,
        lease_id: lease["lease"]["id"].clone(),
        cursor: ws["eventCursor"].as_str().unwrap().to_owned(),
    }
}

#[test]
fn every_tool_has_a_real_example() {
    let rig = Rig::start();
    let mut agent = agent_with_every_capability(&rig);
    let tools = agent.bridge.ok("tools/list", json!({}))["tools"]
        .as_array()
        .unwrap()
        .clone();
    let mut examples: BTreeMap<String, Value> = BTreeMap::new();
    let mut record =
        |agent: &mut Agent, name: &str, target: Option<&Value>, arguments: Value| -> Value {
            let mut request = json!({"name": name, "arguments": arguments});
            if name != "browser.discover" {
                request["workspaceId"] = agent.workspace_id.clone();
                request["leaseId"] = agent.lease_id.clone();
            }
            if let Some(target) = target {
                request["targetId"] = target.clone();
            }
            let response = agent.bridge.call("tools/call", request.clone());
            let outcome = response
                .get("result")
                .cloned()
                .unwrap_or_else(|| panic!("{name} failed: {response}"));
            examples.insert(
                name.to_owned(),
                json!({"request": tidy(&request), "result": tidy(&outcome)}),
            );
            outcome["result"].clone()
        };
    record(&mut agent, "browser.discover", None, json!({}));
    record(&mut agent, "browser.connect", None, json!({}));
    let opened = record(
        &mut agent,
        "browser.open",
        None,
        json!({"url": rig.fixtures.url("/fixture/form")}),
    );
    let target = opened["targetId"].clone();
    record(&mut agent, "browser.tabs.list", None, json!({}));
    let observation = record(
        &mut agent,
        "browser.observe",
        Some(&target),
        json!({"limit": 20}),
    );
    let find = |name: &str| -> u64 {
        observation["elements"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"].as_str().unwrap_or("").contains(name))
            .unwrap()["ref"]
            .as_u64()
            .unwrap()
    };
    let observation_id = observation["observationId"].clone();
    let (terms, email, country) = (find("I agree"), find("Email"), find("Country"));
    record(
        &mut agent,
        "browser.read",
        Some(&target),
        json!({"selector": "h1"}),
    );
    record(
        &mut agent,
        "browser.search",
        Some(&target),
        json!({"query": "agree", "maxTokens": 400}),
    );
    record(
        &mut agent,
        "browser.elements.find",
        Some(&target),
        json!({"selector": "select"}),
    );
    record(
        &mut agent,
        "browser.dropdown.options",
        Some(&target),
        json!({"observationId": observation_id, "ref": country}),
    );
    let clicked = record(
        &mut agent,
        "browser.click",
        Some(&target),
        json!({"observationId": observation_id, "ref": terms, "observe": {"limit": 20, "sinceObservationId": observation_id, "format": "compact"}}),
    );
    let fresh = clicked["observationId"].clone();
    let _ = (email, fresh);
    let observation = agent.tool("browser.observe", Some(&target), json!({"limit": 40}));
    let find_now = |name: &str| -> u64 {
        observation["elements"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"].as_str().unwrap_or("").contains(name))
            .unwrap()["ref"]
            .as_u64()
            .unwrap()
    };
    let observation_id = observation["observationId"].clone();
    let (email, country) = (find_now("Email"), find_now("Country"));
    record(
        &mut agent,
        "browser.dropdown.select",
        Some(&target),
        json!({"observationId": observation_id, "ref": country, "values": ["fr"], "observe": {"limit": 5}}),
    );
    let typed = record(
        &mut agent,
        "browser.type",
        Some(&target),
        json!({"observationId": observation_id, "ref": email, "text": "ada@example.com", "observe": {"limit": 5}}),
    );
    let _ = typed;
    record(
        &mut agent,
        "browser.keyboard",
        Some(&target),
        json!({"text": "!", "observe": {"limit": 5}}),
    );
    record(
        &mut agent,
        "browser.press",
        Some(&target),
        json!({"key": "Tab", "observe": {"limit": 5}}),
    );
    record(
        &mut agent,
        "browser.scroll",
        Some(&target),
        json!({"direction": "down", "amount": 400, "observe": {"limit": 5}}),
    );
    record(
        &mut agent,
        "browser.navigate",
        Some(&target),
        json!({"action": "reload"}),
    );
    // A dialog, answered out of band.
    let observation = agent.tool("browser.observe", Some(&target), json!({"limit": 200}));
    let confirm = observation["elements"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "Confirm")
        .unwrap()["ref"]
        .clone();
    agent.tool(
        "browser.click",
        Some(&target),
        json!({"observationId": observation["observationId"], "ref": confirm}),
    );
    let dialogs = record(&mut agent, "browser.dialogs.list", None, json!({}));
    record(
        &mut agent,
        "browser.dialogs.respond",
        None,
        json!({"dialogId": dialogs["dialogs"][0]["dialogId"], "action": "accept"}),
    );
    record(
        &mut agent,
        "browser.capture",
        Some(&target),
        json!({"annotations": {"observationId": observation["observationId"], "refs": [confirm]}}),
    );
    record(
        &mut agent,
        "browser.pdf",
        Some(&target),
        json!({"printBackground": true}),
    );
    // A recording of the tab while the agent reads it, stored as the Workspace's Artifact.
    record(
        &mut agent,
        "browser.recording.start",
        Some(&target),
        json!({}),
    );
    agent.tool("browser.read", Some(&target), json!({"selector": "h1"}));
    record(
        &mut agent,
        "browser.recording.stop",
        Some(&target),
        json!({}),
    );
    // Waits, gestures and the console on the board fixture (tests/integration/actions18.rs goes deeper).
    let board = agent.tool(
        "browser.open",
        None,
        json!({"url": rig.fixtures.url("/fixture/drag")}),
    )["targetId"]
        .clone();
    record(
        &mut agent,
        "browser.wait",
        Some(&board),
        json!({"text": "Card A"}),
    );
    // A hand-off, answered by the person's `bp handoff done` as soon as it is waiting.
    let person = {
        let mut done = rig.home.command(crate::support::BP);
        done.args(["handoff", "done", "--note", "solved it"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        std::thread::spawn(move || {
            crate::support::wait_until(std::time::Duration::from_secs(20), || {
                done.status().is_ok_and(|status| status.success())
            })
        })
    };
    record(
        &mut agent,
        "browser.handoff",
        Some(&board),
        json!({"reason": "Solve the captcha, then press Done", "timeoutMs": 20000}),
    );
    assert!(
        person.join().unwrap(),
        "bp handoff done reached the hand-off"
    );
    let cards = agent.tool("browser.observe", Some(&board), json!({"limit": 20}));
    let card = |name: &str| -> Value {
        cards["elements"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == name)
            .unwrap()["ref"]
            .clone()
    };
    record(
        &mut agent,
        "browser.hover",
        Some(&board),
        json!({"observationId": cards["observationId"], "ref": card("Card A"), "observe": {"limit": 5}}),
    );
    record(
        &mut agent,
        "browser.drag",
        Some(&board),
        json!({"observationId": cards["observationId"], "ref": card("Card A"), "toRef": card("Done column"), "observe": {"limit": 5}}),
    );
    let console = agent.tool(
        "browser.open",
        None,
        json!({"url": rig.fixtures.url("/fixture/console")}),
    )["targetId"]
        .clone();
    agent.tool(
        "browser.wait",
        Some(&console),
        json!({"text": "Checkout diagnostics"}),
    );
    record(
        &mut agent,
        "browser.console.list",
        Some(&console),
        json!({"limit": 5}),
    );
    // Frames: the frames fixture in a second tab (its cross-origin frames stay empty here).
    let framed = agent.tool(
        "browser.open",
        None,
        json!({"url": rig.fixtures.url("/fixture/frames")}),
    )["targetId"]
        .clone();
    let frames = record(&mut agent, "browser.frames.list", Some(&framed), json!({}));
    let same = frames["frames"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == "same")
        .unwrap()["frameId"]
        .clone();
    record(
        &mut agent,
        "browser.frames.select",
        Some(&framed),
        json!({"frameId": same}),
    );
    record(
        &mut agent,
        "browser.eval",
        Some(&target),
        json!({"expression": "(document.cookie = 'theme=dark; path=/', document.title)"}),
    );
    record(&mut agent, "browser.cookies.list", Some(&target), json!({}));
    record(
        &mut agent,
        "browser.cookies.set",
        Some(&target),
        json!({"name": "sid", "value": "example-secret", "httpOnly": true, "sameSite": "Lax"}),
    );
    record(
        &mut agent,
        "browser.cookies.delete",
        Some(&target),
        json!({"name": "sid"}),
    );
    record(
        &mut agent,
        "browser.emulate",
        Some(&target),
        json!({"device": "phone", "colorScheme": "dark", "timezone": "Europe/Paris"}),
    );
    agent.tool("browser.emulate", Some(&target), json!({"reset": true}));
    // Upload: an imported client file into the first file input of the upload fixture.
    let uploading = agent.tool(
        "browser.open",
        None,
        json!({"url": rig.fixtures.url("/fixture/upload")}),
    )["targetId"]
        .clone();
    let client_dir = tempfile::tempdir().unwrap();
    let resume = client_dir.path().join("resume.pdf");
    std::fs::write(&resume, b"%PDF-1.4 example\n").unwrap();
    let imported = agent.bridge.ok(
        "artifacts/import",
        json!({"workspaceId": agent.workspace_id, "leaseId": agent.lease_id, "path": resume}),
    );
    record(
        &mut agent,
        "browser.upload",
        Some(&uploading),
        json!({"artifactId": imported["artifact"]["id"], "inputIndex": 0, "observe": {"limit": 5}}),
    );
    // The network tools (extra capabilities, granted to this agent).
    let page = agent.tool(
        "browser.open",
        None,
        json!({"url": rig.fixtures.url("/page/network")}),
    )["targetId"]
        .clone();
    let listed = record(
        &mut agent,
        "browser.network.list",
        Some(&page),
        json!({"resourceType": "Document"}),
    );
    record(
        &mut agent,
        "browser.network.get",
        Some(&page),
        json!({"requestId": listed["requests"][0]["requestId"], "includeBody": true, "maxBodyBytes": 64}),
    );
    let rule = record(
        &mut agent,
        "browser.network.rules.add",
        None,
        json!({"urlPattern": "*/api/*", "action": "headers", "headers": [{"name": "X-Example", "value": "1"}]}),
    );
    record(&mut agent, "browser.network.rules.list", None, json!({}));
    record(
        &mut agent,
        "browser.network.rules.remove",
        None,
        json!({"ruleId": rule["rule"]["ruleId"]}),
    );
    record(
        &mut agent,
        "browser.auth.set",
        None,
        json!({"origin": "https://intranet.example", "username": "ada", "password": "example-password"}),
    );
    record(
        &mut agent,
        "browser.auth.clear",
        None,
        json!({"origin": "https://intranet.example"}),
    );
    // The storage state tools, in an isolated Workspace of the same Principal.
    let mut isolated = agent_in(&rig, json!({"isolation": "context"}));
    isolated.tool(
        "browser.open",
        None,
        json!({"url": rig.fixtures.url("/page/signed-in")}),
    );
    let saved = record(&mut isolated, "browser.storage.save", None, json!({}));
    record(
        &mut isolated,
        "browser.storage.load",
        None,
        json!({"artifactId": saved["artifact"]["id"]}),
    );
    record(&mut agent, "browser.tabs.release", Some(&target), json!({}));
    record(&mut agent, "browser.tabs.close", Some(&target), json!({}));

    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/tool-examples.json");
    if std::env::var_os("BROWSER_PILOT_UPDATE_DOCS").is_some() {
        std::fs::write(
            path,
            serde_json::to_string_pretty(&examples).unwrap() + "\n",
        )
        .unwrap();
    }
    let on_disk: Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap_or_else(|_| "{}".into()))
            .unwrap();
    for tool in &tools {
        let name = tool["name"].as_str().unwrap();
        assert!(
            examples.contains_key(name),
            "this test does not exercise {name}: add it"
        );
        assert!(
            on_disk.get(name).is_some(),
            "docs/tool-examples.json lacks {name}: run with BROWSER_PILOT_UPDATE_DOCS=1"
        );
    }
}
