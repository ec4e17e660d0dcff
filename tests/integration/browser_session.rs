//! Process tests of the browser connection against a real headless Chromium started by each
//! test on its own profile directory (found through `BROWSER_PILOT_DISCOVERY_DIRS`), with
//! fixture pages served from 127.0.0.1. Each test has its own `BROWSER_PILOT_HOME` and Broker.

use crate::support;

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use support::chromium::{Chromium, OwnCdp};
use support::rig::{Agent, Rig};
use support::*;

#[test]
fn discover_connect_open_and_list_without_raw_ids() {
    let rig = Rig::start();
    let mut agent = Agent::new(&rig, "com.example.a");
    let init_browsers = {
        let mut probe = rig.home.spawn_bridge();
        probe.initialize("com.example.probe", "p")["browsers"].clone()
    };
    let ready: Vec<&Value> = init_browsers
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["state"] == "ready")
        .collect();
    assert_eq!(ready.len(), 1, "{init_browsers}");
    assert_eq!(
        ready[0]["authorizationState"], "unknown",
        "discovery is passive"
    );
    assert!(
        init_browsers
            .as_array()
            .unwrap()
            .iter()
            .any(|b| b["managed"] == true),
        "the managed profile is always a candidate"
    );

    let discovered = agent.bridge.ok(
        "tools/call",
        json!({"name": "browser.discover", "arguments": {}}),
    );
    let selected = discovered["result"]["selectedBrowserId"].clone();
    assert_eq!(selected, ready[0]["id"]);
    let ws = agent
        .bridge
        .ok("workspaces/get", json!({"workspaceId": agent.workspace_id}));
    assert_eq!(
        ws["workspace"]["browserId"], selected,
        "the Workspace binds to the selected browser"
    );

    // Target tools before connect: browser_disconnected with remediation.
    let (code, error) = agent.tool_err("browser.tabs.list", None, json!({}));
    assert_eq!(code, "browser_disconnected");
    assert_eq!(
        error["data"]["remediation"]["action"],
        "call_browser_connect"
    );

    let connected = agent.connect();
    assert_eq!(connected["browserConnectionGeneration"], 1);
    assert_eq!(connected["browserId"], selected);
    let again = agent.connect();
    assert_eq!(again["reused"], true);
    assert_eq!(again["browserConnectionGeneration"], 1);

    // A browser the Broker attached to keeps its start tab: the first managed navigation
    // opens a window of its own (only a browser the project launched lends its start tab).
    let before = agent.tabs();
    assert_eq!(before.len(), 1, "{before:?}");
    let start = before[0]["targetId"].clone();
    let opened = agent.tool(
        "browser.open",
        None,
        json!({"url": rig.fixtures.url("/page/one")}),
    );
    let target = opened["targetId"].clone();
    assert!(target.as_str().unwrap().starts_with("target:"));
    assert_ne!(
        target, start,
        "the start tab of an attached browser is never adopted"
    );
    assert_eq!(opened["title"], "one");
    assert_eq!(opened["loadState"], "complete");
    assert_eq!(opened["managed"], true);

    let tabs = agent.tabs();
    let mine = tabs
        .iter()
        .find(|t| t["targetId"] == target)
        .expect("managed tab listed");
    assert_eq!(mine["title"], "one", "the inventory shows the loaded title");
    assert_eq!(mine["managed"], true);
    assert_eq!(mine["controlled"], true);
    assert!(
        tabs.iter()
            .any(|t| t["managed"] == false && t["url"] == "about:blank" && t["targetId"] == start),
        "the user's about:blank tab is listed: {tabs:?}"
    );

    let navigated = agent.tool(
        "browser.navigate",
        Some(&target),
        json!({"action": "goto", "url": rig.fixtures.url("/page/two")}),
    );
    assert_eq!(navigated["title"], "two");
    let back = agent.tool("browser.navigate", Some(&target), json!({"action": "back"}));
    assert_eq!(back["title"], "one");
    let forward = agent.tool(
        "browser.navigate",
        Some(&target),
        json!({"action": "forward"}),
    );
    assert_eq!(forward["title"], "two");
    let reloaded = agent.tool(
        "browser.navigate",
        Some(&target),
        json!({"action": "reload"}),
    );
    assert_eq!(reloaded["title"], "two");
    let (code, _) = agent.tool_err(
        "browser.navigate",
        Some(&target),
        json!({"action": "forward"}),
    );
    assert_eq!(code, "navigation_failed");
    let (code, _) = agent.tool_err("browser.open", None, json!({"url": "javascript:alert(1)"}));
    assert_eq!(code, "invalid_params");

    let events = agent.events();
    let types: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert!(types.contains(&"target.attached"), "{types:?}");
    assert!(types.contains(&"command.status"), "{types:?}");
    assert!(
        events
            .iter()
            .all(|e| e["browserConnectionGeneration"] == 1 || e["type"] == "command.status")
    );

    // No raw CDP target id appears anywhere in what the host saw.
    let mut own = OwnCdp::connect(&rig.chromium);
    let everything = format!("{tabs:?}{events:?}{opened}{navigated}");
    for (raw, _) in own.pages() {
        assert!(!everything.contains(&raw), "raw CDP id {raw} leaked");
    }
    let _ = &rig.profile;
}

#[test]
fn handoff_between_two_leases_never_steals() {
    let rig = Rig::start();
    let mut a = Agent::new(&rig, "com.example.a");
    let mut b = Agent::new(&rig, "com.example.b");
    a.connect();
    b.connect();
    let mut own = OwnCdp::connect(&rig.chromium);
    own.open_user_tab(&rig.fixtures.url("/page/shared"));
    // The tab is listed as soon as it exists; a reload before its first document committed
    // would meet that document replacing the blank one (`unknown_outcome`, document_changed).
    own.wait_for_document("/page/shared", "shared");
    let find = |tabs: &[Value]| {
        tabs.iter()
            .find(|t| t["url"].as_str().unwrap().ends_with("/page/shared"))
            .cloned()
            .expect("user tab listed")
    };
    assert!(wait_until(Duration::from_secs(15), || a
        .tabs()
        .iter()
        .any(|t| t["url"].as_str().unwrap().ends_with("/page/shared"))));
    let a_tab = find(&a.tabs());
    let b_tab = find(&b.tabs());
    assert_ne!(
        a_tab["targetId"], b_tab["targetId"],
        "each Workspace has its own opaque id for the tab"
    );
    assert_eq!(a_tab["managed"], false);

    a.tool(
        "browser.navigate",
        Some(&a_tab["targetId"]),
        json!({"action": "reload"}),
    );
    let b_view = find(&b.tabs());
    assert_eq!(b_view["controlledElsewhere"], true);
    let (code, _) = b.tool_err(
        "browser.navigate",
        Some(&b_tab["targetId"]),
        json!({"action": "reload"}),
    );
    assert_eq!(code, "target_controlled_elsewhere");
    // B cannot release what it does not hold, nor use A's id.
    let released = b.tool("browser.tabs.release", Some(&b_tab["targetId"]), json!({}));
    assert_eq!(released["released"], false);
    let (code, _) = b.tool_err(
        "browser.navigate",
        Some(&a_tab["targetId"]),
        json!({"action": "reload"}),
    );
    assert_eq!(code, "target_not_found");

    let released = a.tool("browser.tabs.release", Some(&a_tab["targetId"]), json!({}));
    assert_eq!(released["released"], true);
    let event = a.wait_event("target_control.released");
    assert_eq!(event["payload"]["targetId"], a_tab["targetId"]);
    let reloaded = b.tool(
        "browser.navigate",
        Some(&b_tab["targetId"]),
        json!({"action": "reload"}),
    );
    assert_eq!(reloaded["title"], "shared");
    let (code, _) = a.tool_err(
        "browser.navigate",
        Some(&a_tab["targetId"]),
        json!({"action": "reload"}),
    );
    assert_eq!(code, "target_controlled_elsewhere");
    // Closing a user tab is refused.
    let (code, _) = b.tool_err("browser.tabs.close", Some(&b_tab["targetId"]), json!({}));
    assert_eq!(code, "target_not_managed");
}

#[test]
fn workspace_release_closes_managed_tabs_and_never_user_tabs() {
    let rig = Rig::start();
    let mut a = Agent::new(&rig, "com.example.a");
    a.connect();
    let mut own = OwnCdp::connect(&rig.chromium);
    own.open_user_tab(&rig.fixtures.url("/page/user"));
    own.wait_for_document("/page/user", "user");
    let first = a.tool(
        "browser.open",
        None,
        json!({"url": rig.fixtures.url("/page/managed1")}),
    );
    let second = a.tool(
        "browser.open",
        None,
        json!({"url": rig.fixtures.url("/page/managed2")}),
    );
    let closed = a.tool("browser.tabs.close", Some(&second["targetId"]), json!({}));
    assert_eq!(closed["closed"], true);
    let detached = a.wait_event("target.detached");
    assert_eq!(detached["payload"]["targetId"], second["targetId"]);
    let (code, _) = a.tool_err(
        "browser.navigate",
        Some(&second["targetId"]),
        json!({"action": "reload"}),
    );
    assert_eq!(code, "target_not_found");
    assert!(
        own.pages()
            .iter()
            .any(|(_, url)| url.ends_with("/page/managed1"))
    );

    a.bridge
        .ok("workspaces/release", json!({"workspaceId": a.workspace_id}));
    assert!(
        wait_until(Duration::from_secs(15), || !own
            .pages()
            .iter()
            .any(|(_, url)| url.ends_with("/page/managed1"))),
        "managed tab closed"
    );
    assert!(
        own.pages()
            .iter()
            .any(|(_, url)| url.ends_with("/page/user")),
        "user tab survives"
    );
    let _ = first;
}

#[test]
fn sigkill_of_the_broker_closes_managed_tabs_but_not_user_tabs() {
    let rig = Rig::start();
    let mut a = Agent::new(&rig, "com.example.a");
    a.connect();
    let mut own = OwnCdp::connect(&rig.chromium);
    own.open_user_tab(&rig.fixtures.url("/page/user"));
    own.wait_for_document("/page/user", "user");
    let opener = a.tool(
        "browser.open",
        None,
        json!({"url": rig.fixtures.url("/page/managed")}),
    );
    // A popup of the managed tab becomes a managed tab of the same Workspace.
    own.evaluate_in_page("/page/managed", "window.open('/page/popup'); true");
    let popup = a.wait_event("popup.opened");
    assert_eq!(popup["payload"]["openerTargetId"], opener["targetId"]);
    let popup_id = popup["payload"]["targetId"].clone();
    let listed = a.tabs();
    let row = listed
        .iter()
        .find(|t| t["targetId"] == popup_id)
        .expect("popup listed");
    assert_eq!(row["managed"], true);
    assert_eq!(row["openerTargetId"], opener["targetId"]);
    // A popup of a user tab is listed, not adopted.
    own.evaluate_in_page("/page/user", "window.open('/page/userpopup'); true");
    assert!(wait_until(Duration::from_secs(15), || a.tabs().iter().any(
        |t| t["url"].as_str().unwrap().ends_with("/page/userpopup") && t["managed"] == false
    )));
    let pid = rig.home.broker_pid().unwrap();
    unsafe_kill(pid, "KILL");
    assert!(
        wait_until(Duration::from_secs(10), || !own
            .pages()
            .iter()
            .any(|(_, url)| url.ends_with("/page/managed"))),
        "the janitor closed the managed tab after the Broker died"
    );
    assert!(
        wait_until(Duration::from_secs(10), || !own
            .pages()
            .iter()
            .any(|(_, url)| url.ends_with("/page/popup"))),
        "and its popup"
    );
    assert!(
        own.pages()
            .iter()
            .any(|(_, url)| url.ends_with("/page/userpopup")),
        "the user tab's popup survives"
    );
    assert!(
        own.pages()
            .iter()
            .any(|(_, url)| url.ends_with("/page/user")),
        "the user tab survives"
    );
}

#[test]
fn killed_chromium_gives_connection_lost_then_restored_with_a_newer_generation() {
    let mut rig = Rig::start();
    let mut a = Agent::new(&rig, "com.example.a");
    a.connect();
    let opened = a.tool(
        "browser.open",
        None,
        json!({"url": rig.fixtures.url("/page/before")}),
    );
    // A new document invalidates the Observations held of the old one.
    a.tool("browser.observe", Some(&opened["targetId"]), json!({}));
    a.events();
    a.tool(
        "browser.navigate",
        Some(&opened["targetId"]),
        json!({"action": "goto", "url": rig.fixtures.url("/page/next")}),
    );
    let invalidated = a.wait_event("observation.invalidated");
    assert_eq!(invalidated["payload"]["reason"], "document_changed");
    assert_eq!(invalidated["payload"]["targetId"], opened["targetId"]);

    rig.chromium.sigkill();
    let lost = a.wait_event("connection.lost");
    assert_eq!(lost["browserConnectionGeneration"], 1);
    assert_eq!(lost["payload"]["generation"], 1);
    let (code, error) = a.tool_err("browser.tabs.list", None, json!({}));
    assert_eq!(code, "browser_disconnected");
    assert_eq!(error["data"]["retryable"], true);
    // The Workspace and Lease survive.
    a.bridge.ok(
        "leases/heartbeat",
        json!({"workspaceId": a.workspace_id, "leaseId": a.lease_id}),
    );

    rig.chromium = Chromium::start(rig.profile.path());
    let connected = a.connect();
    assert_eq!(connected["browserConnectionGeneration"], 2);
    // Every Observation of the lost connection is invalidated, in the old generation, and
    // journaled before the restore.
    let mut seen: Vec<Value> = Vec::new();
    assert!(wait_until(Duration::from_secs(15), || {
        seen.extend(a.events());
        seen.iter().any(|e| e["type"] == "connection.restored")
    }));
    let position = |kind: &str| seen.iter().position(|e| e["type"] == kind).unwrap();
    let invalidated = &seen[position("observation.invalidated")];
    assert_eq!(invalidated["payload"]["reason"], "reconnected");
    assert_eq!(invalidated["browserConnectionGeneration"], 1);
    assert!(position("observation.invalidated") < position("connection.restored"));
    let restored = &seen[position("connection.restored")];
    assert_eq!(restored["browserConnectionGeneration"], 2);
    let (code, _) = a.tool_err(
        "browser.navigate",
        Some(&opened["targetId"]),
        json!({"action": "reload"}),
    );
    assert_eq!(
        code, "target_not_found",
        "old target ids are invalid after reconnect"
    );
    assert!(!a.tabs().is_empty());
}

#[test]
fn idempotent_open_runs_once_and_conflicting_reuse_is_rejected() {
    let rig = Rig::start();
    let mut a = Agent::new(&rig, "com.example.a");
    a.connect();
    let params = json!({"name": "browser.open", "arguments": {"url": rig.fixtures.url("/page/idem")}, "workspaceId": a.workspace_id, "leaseId": a.lease_id, "idempotencyKey": "open-1"});
    let first = a.bridge.ok("tools/call", params.clone());
    let second = a.bridge.ok("tools/call", params.clone());
    assert_eq!(first, second, "the retry returns the recorded outcome");
    assert_eq!(
        rig.fixtures.hits("/page/idem"),
        1,
        "the page was opened once"
    );
    let mut other = params.clone();
    other["arguments"]["url"] = json!(rig.fixtures.url("/page/other"));
    let response = a.bridge.call("tools/call", other);
    assert_eq!(
        response["error"]["data"]["code"], "idempotency_conflict",
        "{response}"
    );
    assert_eq!(rig.fixtures.hits("/page/other"), 0);
}

#[test]
fn cancel_before_dispatch_never_reaches_the_browser_and_late_mutations_are_unknown() {
    let rig = Rig::start();
    let mut a = Agent::new(&rig, "com.example.a");
    a.connect();
    let tab = a.tool(
        "browser.open",
        None,
        json!({"url": rig.fixtures.url("/page/start")}),
    )["targetId"]
        .clone();
    // c1 holds the tab (slow page); c2 queues behind it and is cancelled before dispatch.
    let slow = json!({"name": "browser.navigate", "arguments": {"action": "goto", "url": rig.fixtures.url("/slow?ms=8000")}, "workspaceId": a.workspace_id, "leaseId": a.lease_id, "targetId": tab, "commandId": "command:c1", "deadlineMs": 4000});
    let queued = json!({"name": "browser.navigate", "arguments": {"action": "goto", "url": rig.fixtures.url("/page/never")}, "workspaceId": a.workspace_id, "leaseId": a.lease_id, "targetId": tab, "commandId": "command:c2"});
    let id1 = a.bridge.request("tools/call", slow);
    let id2 = a.bridge.request("tools/call", queued);
    assert!(wait_until(Duration::from_secs(5), || rig
        .fixtures
        .hits("/slow?ms=8000")
        == 1));
    let got = a.bridge.ok(
        "commands/get",
        json!({"commandId": "command:c2", "workspaceId": a.workspace_id}),
    );
    assert_eq!(got["command"]["status"], "accepted", "{got}");
    let cancelled = a.bridge.ok(
        "commands/cancel",
        json!({"commandId": "command:c2", "workspaceId": a.workspace_id}),
    );
    assert_eq!(cancelled["command"]["status"], "cancelled");
    let second = a.bridge.response(&id2);
    assert_eq!(second["error"]["data"]["code"], "cancelled", "{second}");
    let first = a.bridge.response(&id1);
    assert_eq!(
        first["error"]["data"]["code"], "unknown_outcome",
        "a mutating command past its deadline after dispatch: {first}"
    );
    assert_eq!(first["error"]["data"]["retryable"], false);
    let recorded = a
        .bridge
        .ok("commands/get", json!({"commandId": "command:c1"}));
    assert_eq!(recorded["command"]["status"], "unknown_outcome");
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(
        rig.fixtures.hits("/page/never"),
        0,
        "the cancelled command never reached the browser"
    );
    // A second client can neither read nor cancel these Commands.
    let mut stranger = rig.home.spawn_bridge();
    stranger.initialize("com.example.stranger", "x");
    let (code, _) = stranger.err("commands/get", json!({"commandId": "command:c1"}));
    assert_eq!(code, "command_not_found");
    let (code, _) = stranger.err("commands/cancel", json!({"commandId": "command:c1"}));
    assert_eq!(code, "command_not_found");
}

/// A Workspace created without `browserId` binds to the browser the Broker is connected to, even
/// when stable selection would pick another ready candidate that nobody connected to.
#[test]
fn a_new_workspace_binds_to_the_live_connection_not_an_idle_candidate() {
    let mut rig = Rig::start();
    // The decoy is listed first and looks ready: its DevToolsActivePort names a live loopback
    // port (the fixture server's), which is not a debugging endpoint.
    let decoy = tempfile::tempdir().unwrap();
    let fixture_port = rig
        .fixtures
        .url("/")
        .trim_end_matches('/')
        .rsplit(':')
        .next()
        .unwrap()
        .to_owned();
    std::fs::write(
        decoy.path().join("DevToolsActivePort"),
        format!("{fixture_port}\n/devtools/browser/decoy\n"),
    )
    .unwrap();
    let dirs = std::env::join_paths([decoy.path(), rig.profile.path()]).unwrap();
    rig.home = TestHome::new().with_env("BROWSER_PILOT_DISCOVERY_DIRS", dirs.to_str().unwrap());

    let mut first = Agent::new(&rig, "com.example.first");
    let bound = first
        .bridge
        .ok("workspaces/get", json!({"workspaceId": first.workspace_id}))["workspace"]["browserId"]
        .clone();
    let browsers = first.tool("browser.discover", None, json!({}))["browsers"].clone();
    let ready: Vec<Value> = browsers
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["state"] == "ready")
        .map(|b| b["id"].clone())
        .collect();
    assert_eq!(ready.len(), 2, "the decoy and the real browser: {browsers}");
    assert_eq!(
        bound, ready[0],
        "before any connection, stable selection picks the first"
    );
    let real = ready[1].clone();
    let connected = first.tool("browser.connect", None, json!({"browserId": real}));
    assert_eq!(connected["browserId"], real);

    let mut second = Agent::new(&rig, "com.example.second");
    let ws = second.bridge.ok(
        "workspaces/get",
        json!({"workspaceId": second.workspace_id}),
    );
    assert_eq!(
        ws["workspace"]["browserId"], real,
        "bound to the live connection, not the idle decoy"
    );
}

/// A loopback port that discovery takes for a browser's debugging endpoint (a profile directory
/// whose `DevToolsActivePort` names it). Each WebSocket upgrade request is counted and then
/// either answered with `answer` or held open unanswered, as Chrome holds it while its approval
/// prompt waits. Discovery's TCP probe sends no request and is not counted.
struct Decoy {
    profile: tempfile::TempDir,
    upgrades: Arc<AtomicUsize>,
}

impl Decoy {
    fn start(answer: Option<&'static str>) -> Decoy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let profile = tempfile::tempdir().unwrap();
        std::fs::write(
            profile.path().join("DevToolsActivePort"),
            format!("{port}\n/devtools/browser/decoy\n"),
        )
        .unwrap();
        let upgrades = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&upgrades);
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let counter = Arc::clone(&counter);
                std::thread::spawn(move || {
                    let mut reader = BufReader::new(stream.try_clone().unwrap());
                    let mut request = String::new();
                    loop {
                        let mut line = String::new();
                        match reader.read_line(&mut line) {
                            Ok(0) | Err(_) => return,
                            Ok(_) if line.trim().is_empty() => break,
                            Ok(_) => request.push_str(&line),
                        }
                    }
                    if request.starts_with("GET ") {
                        counter.fetch_add(1, Ordering::SeqCst);
                    }
                    match answer {
                        Some(answer) => {
                            let _ = (&stream).write_all(answer.as_bytes());
                        }
                        // Unanswered until the client gives up and closes.
                        None => {
                            while matches!(reader.read_line(&mut String::new()), Ok(n) if n > 0) {}
                        }
                    }
                });
            }
        });
        Decoy { profile, upgrades }
    }

    fn upgrades(&self) -> usize {
        self.upgrades.load(Ordering::SeqCst)
    }
}

/// A home that discovers `decoy` and the rig's Chromium, with the handshake budget shortened so
/// an unanswered upgrade is `authorization_timeout` in a few seconds.
fn home_with_decoy(rig: &Rig, decoy: &Decoy) -> TestHome {
    let dirs = std::env::join_paths([decoy.profile.path(), rig.profile.path()]).unwrap();
    TestHome::new()
        .with_env("BROWSER_PILOT_DISCOVERY_DIRS", dirs.to_str().unwrap())
        .with_env("BROWSER_PILOT_AUTHORIZATION_TIMEOUT_MS", "2000")
}

/// The candidate ids of `agent`'s discovery: (the decoy, the real browser), by listing order.
fn decoy_and_real(agent: &mut Agent) -> (Value, Value) {
    let browsers = agent.tool("browser.discover", None, json!({}))["browsers"].clone();
    let ids: Vec<Value> = browsers
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["state"] == "ready")
        .map(|b| b["id"].clone())
        .collect();
    assert_eq!(ids.len(), 2, "{browsers}");
    (ids[0].clone(), ids[1].clone())
}

/// Sends `browser.connect` on every agent before reading any answer; returns the responses.
fn connect_together(agents: &mut [Agent], browser_id: &Value) -> Vec<Value> {
    let ids: Vec<Value> = agents
        .iter_mut()
        .map(|agent| {
            agent.bridge.request(
                "tools/call",
                json!({"name": "browser.connect", "arguments": {"browserId": browser_id}, "workspaceId": agent.workspace_id, "leaseId": agent.lease_id}),
            )
        })
        .collect();
    agents
        .iter_mut()
        .zip(ids)
        .map(|(agent, id)| agent.bridge.response(&id))
        .collect()
}

/// Concurrent `browser.connect` calls for one browser share one in-flight attempt: one upgrade
/// request (one approval prompt) and its outcome for all of them when it fails, one connection
/// and one generation when it succeeds. A later call makes a new attempt.
#[test]
fn concurrent_connects_share_one_attempt() {
    let mut rig = Rig::start();
    let decoy = Decoy::start(None);
    rig.home = home_with_decoy(&rig, &decoy);
    let mut agents: Vec<Agent> = (0..3)
        .map(|i| Agent::new(&rig, &format!("com.example.connect{i}")))
        .collect();
    let (decoy_id, real_id) = decoy_and_real(&mut agents[0]);

    for response in connect_together(&mut agents, &decoy_id) {
        assert_eq!(
            response["error"]["data"]["code"], "authorization_timeout",
            "{response}"
        );
    }
    assert_eq!(decoy.upgrades(), 1, "three callers, one attempt");
    let (code, _) = agents[0].tool_err("browser.connect", None, json!({"browserId": decoy_id}));
    assert_eq!(code, "authorization_timeout");
    assert_eq!(
        decoy.upgrades(),
        2,
        "a call after the shared one tries again"
    );

    let connected: Vec<Value> = connect_together(&mut agents, &real_id)
        .into_iter()
        .map(|response| {
            assert_eq!(
                response["result"]["command"]["status"], "completed",
                "{response}"
            );
            response["result"]["result"].clone()
        })
        .collect();
    let generation = &connected[0]["browserConnectionGeneration"];
    assert!(
        connected
            .iter()
            .all(|c| c["browserConnectionGeneration"] == *generation && c["browserId"] == real_id),
        "{connected:?}"
    );
    let made = connected.iter().filter(|c| c["reused"] == false).count();
    assert_eq!(
        made, 1,
        "one connection made, the others reused it: {connected:?}"
    );
}

/// An agent on a bridge started with `--browser preference`: a Workspace and a Lease.
fn agent_preferring(rig: &Rig, client: &str, preference: &str) -> Agent {
    let mut bridge = rig.home.spawn_bridge_with(&["--browser", preference]);
    bridge.initialize(client, "i1");
    let ws = bridge.ok("workspaces/create", json!({}));
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

fn bound_browser(agent: &mut Agent) -> Value {
    let id = agent.workspace_id.clone();
    agent
        .bridge
        .ok("workspaces/get", json!({"workspaceId": id}))["workspace"]["browserId"]
        .clone()
}

/// `bridge --browser X` names the browser a bridge's Workspaces bind to, what
/// `browser.discover` calls selected and what `browser.connect` without `browserId` connects;
/// and the running Broker keeps the choice it made for a preference, so Workspaces created later
/// bind where the first did even after discovery would now choose otherwise.
#[test]
fn bridge_browser_chooses_the_browser_and_the_broker_keeps_the_choice() {
    let mut rig = Rig::start();
    let decoy = Decoy::start(None);
    rig.home = home_with_decoy(&rig, &decoy);
    let mut plain = Agent::new(&rig, "com.example.plain");
    let (decoy_id, real_id) = decoy_and_real(&mut plain);
    let discovered = plain.tool("browser.discover", None, json!({}));
    assert_eq!(discovered["selectedBrowserId"], decoy_id, "first ready");

    // `--browser chromium` matches both profiles by product; the first ready one is chosen.
    let mut by_product = agent_preferring(&rig, "com.example.product", "chromium");
    assert_eq!(bound_browser(&mut by_product), decoy_id);
    // The decoy stops looking ready: a fresh choice would now be the real browser.
    std::fs::remove_file(decoy.profile.path().join("DevToolsActivePort")).unwrap();
    let browsers = plain.tool("browser.discover", None, json!({}))["browsers"].clone();
    let decoy_now = browsers
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["id"] == decoy_id)
        .unwrap_or_else(|| panic!("the decoy profile is still listed: {browsers}"));
    assert_ne!(decoy_now["state"], "ready", "{decoy_now}");
    // ... but the Broker keeps the choice it made for that preference.
    let again = by_product.bridge.ok("workspaces/create", json!({}));
    assert_eq!(again["workspace"]["browserId"], decoy_id, "{again}");
    let selected = by_product.tool("browser.discover", None, json!({}));
    assert_eq!(selected["selectedBrowserId"], decoy_id);

    // `--browser <id>` names one candidate: selected, bound and connected.
    let mut by_id = agent_preferring(&rig, "com.example.by-id", real_id.as_str().unwrap());
    let selected = by_id.tool("browser.discover", None, json!({}));
    assert_eq!(selected["selectedBrowserId"], real_id);
    assert_eq!(bound_browser(&mut by_id), real_id);
    let connected = by_id.tool("browser.connect", None, json!({}));
    assert_eq!(connected["browserId"], real_id, "{connected}");
    assert_eq!(connected["state"], "connected");
    // Connected to the real browser, a bridge without a preference binds there too.
    let mut later = Agent::new(&rig, "com.example.later");
    assert_eq!(bound_browser(&mut later), real_id);
}

/// `authorizationState` takes only its documented values (`unknown`, `authorized`, `denied`),
/// in the schema `tools/list` serves and in every answer: discovery says `unknown`; an endpoint
/// that refuses the upgrade (HTTP 403, as Chrome does when the user declines) makes it
/// `denied`; one that never answers (a prompt nobody answered) leaves it `unknown`, and a
/// connection makes it `authorized`.
#[test]
fn authorization_state_stays_within_its_documented_values() {
    const DOCUMENTED: [&str; 3] = ["unknown", "authorized", "denied"];
    let mut rig = Rig::start();
    let silent = Decoy::start(None);
    let refusing = Decoy::start(Some(
        "HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
    ));
    let dirs = std::env::join_paths([
        silent.profile.path(),
        refusing.profile.path(),
        rig.profile.path(),
    ])
    .unwrap();
    rig.home = TestHome::new()
        .with_env("BROWSER_PILOT_DISCOVERY_DIRS", dirs.to_str().unwrap())
        .with_env("BROWSER_PILOT_AUTHORIZATION_TIMEOUT_MS", "2000");
    let mut agent = Agent::new(&rig, "com.example.authorization");
    let listed = agent.bridge.ok("tools/list", json!({}));
    let discover = listed["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "browser.discover")
        .unwrap()
        .clone();
    let schema = &discover["outputSchema"]["properties"]["browsers"]["items"]["properties"]["authorizationState"];
    assert_eq!(schema["enum"], json!(DOCUMENTED), "{schema}");

    let states = |agent: &mut Agent| -> Vec<(Value, Value)> {
        let found = agent.tool("browser.discover", None, json!({}));
        found["browsers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| {
                let state = b["authorizationState"].clone();
                assert!(
                    DOCUMENTED.iter().any(|d| state == *d),
                    "undocumented authorizationState: {b}"
                );
                (b["id"].clone(), state)
            })
            .collect()
    };
    let before = states(&mut agent);
    assert!(before.iter().all(|(_, s)| s == "unknown"), "{before:?}");
    // The three profiles in listing order (the Broker-managed profile comes after them).
    let ids: Vec<Value> = before.into_iter().take(3).map(|(id, _)| id).collect();
    assert_eq!(ids.len(), 3);
    let state_of = |agent: &mut Agent, id: &Value| {
        states(agent)
            .into_iter()
            .find(|(candidate, _)| candidate == id)
            .unwrap()
            .1
    };

    let (code, _) = agent.tool_err("browser.connect", None, json!({"browserId": ids[0]}));
    assert_eq!(code, "authorization_timeout");
    assert_eq!(
        state_of(&mut agent, &ids[0]),
        "unknown",
        "a timeout decides nothing"
    );
    let (code, _) = agent.tool_err("browser.connect", None, json!({"browserId": ids[1]}));
    assert_eq!(code, "authorization_denied");
    assert_eq!(state_of(&mut agent, &ids[1]), "denied");
    agent.tool("browser.connect", None, json!({"browserId": ids[2]}));
    assert_eq!(state_of(&mut agent, &ids[2]), "authorized");

    // `initialize` lists the same candidates with the same values.
    let mut late = rig.home.spawn_bridge();
    let initialized = late.initialize("com.example.late", "i1");
    let browsers = initialized["browsers"].as_array().unwrap().clone();
    let expected = ["unknown", "denied", "authorized"];
    for (id, state) in ids.iter().zip(expected) {
        let listed = browsers.iter().find(|b| b["id"] == *id).unwrap();
        assert_eq!(listed["authorizationState"], state, "{listed}");
    }
}
