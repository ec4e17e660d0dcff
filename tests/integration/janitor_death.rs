//! Process tests of a dying janitor against a real headless Chromium: the janitor (the Broker's
//! child, `--browser-pilot-internal=janitor`) is SIGKILLed while two Principals share the
//! Broker. The Broker treats it as a connection loss; after reconnect the other Principal never
//! sees the first one's managed tabs (not as user tabs, not at all) and cannot drive them, the
//! first one has them back as managed tabs, a Workspace released while disconnected has its
//! tabs closed on reconnect, a release after reconnect closes them, and the new janitor closes
//! the re-adopted ones when the Broker itself dies.

use crate::support;

use std::time::Duration;

use serde_json::{Value, json};
use support::chromium::{Fixtures, OwnCdp};
use support::rig::{Agent, Rig};
use support::{BIN, TestHome, janitor_pid, pid_alive, unsafe_kill, wait_until};

/// A second Workspace (and Lease) of the same agent's Principal.
fn another_workspace(agent: &mut Agent) -> (Value, Value) {
    let ws = agent.bridge.ok("workspaces/create", json!({}));
    let workspace_id = ws["workspace"]["id"].clone();
    let lease = agent.bridge.ok(
        "leases/create",
        json!({"workspaceId": workspace_id, "ttlMs": 60000}),
    );
    (workspace_id, lease["lease"]["id"].clone())
}

/// `browser.open` in another Workspace of the agent; returns the opaque target id.
fn open_in(agent: &mut Agent, scope: &(Value, Value), url: &str) -> Value {
    let response = agent.bridge.call(
        "tools/call",
        json!({"name": "browser.open", "arguments": {"url": url}, "workspaceId": scope.0, "leaseId": scope.1}),
    );
    response["result"]["result"]["targetId"].clone()
}

fn page_open(own: &mut OwnCdp, url: &str) -> bool {
    own.pages().iter().any(|(_, u)| u == url)
}

#[test]
fn a_killed_janitor_never_hands_managed_tabs_to_another_principal() {
    let rig = Rig::start();
    let mut own = OwnCdp::connect(&rig.chromium);
    let mut alice = Agent::new(&rig, "com.example.alice");
    let mut bob = Agent::new(&rig, "com.example.bob");
    let generation = alice.connect()["browserConnectionGeneration"]
        .as_u64()
        .unwrap();
    bob.connect();

    // Alice: three Workspaces, one managed tab each.
    let kept_url = rig.fixtures.url("/page/alice-kept");
    let second_url = rig.fixtures.url("/page/alice-second");
    let dropped_url = rig.fixtures.url("/page/alice-dropped");
    let kept = alice.tool("browser.open", None, json!({"url": kept_url}))["targetId"].clone();
    let second_scope = another_workspace(&mut alice);
    let dropped_scope = another_workspace(&mut alice);
    assert!(open_in(&mut alice, &second_scope, &second_url).is_string());
    assert!(open_in(&mut alice, &dropped_scope, &dropped_url).is_string());
    let bob_before = bob.tabs();
    assert!(
        !Value::Array(bob_before).to_string().contains("alice-"),
        "Bob never sees Alice's managed tabs"
    );

    // The janitor dies: a connection loss for every Workspace.
    let broker = rig.home.broker_pid().expect("broker pid");
    let janitor = janitor_pid(broker).expect("the Broker's janitor runs");
    unsafe_kill(janitor, "KILL");
    let lost = alice.wait_event("connection.lost");
    assert_eq!(lost["payload"]["generation"], generation);
    bob.wait_event("connection.lost");
    let (code, error) = bob.tool_err("browser.tabs.list", None, json!({}));
    assert_eq!(code, "browser_disconnected", "{error}");
    assert_eq!(error["data"]["retryable"], true);
    // Chromium keeps the tabs: nothing closed them.
    assert!(page_open(&mut own, &kept_url) && page_open(&mut own, &dropped_url));

    // Alice releases one Workspace while no connection can close its tab.
    alice.bridge.ok(
        "workspaces/release",
        json!({"workspaceId": dropped_scope.0}),
    );

    // Bob reconnects first: a new generation, and Alice's tabs are not his.
    let restored = bob.connect();
    assert!(restored["browserConnectionGeneration"].as_u64().unwrap() > generation);
    bob.wait_event("connection.restored");
    let bob_tabs = bob.tabs();
    let listed = Value::Array(bob_tabs.clone()).to_string();
    assert!(!listed.contains("alice-"), "{listed}");
    assert!(bob_tabs.iter().all(|t| t["managed"] == false));
    // Alice's old id means nothing to Bob (nor to anyone: ids are per generation).
    let (code, _) = bob.tool_err("browser.observe", Some(&kept), json!({}));
    assert_eq!(code, "target_not_found");

    // The released Workspace's tab is closed by the Broker itself; the others stay open.
    assert!(
        wait_until(Duration::from_secs(10), || !page_open(
            &mut own,
            &dropped_url
        )),
        "the released Workspace's tab was closed on reconnect"
    );
    assert!(page_open(&mut own, &kept_url) && page_open(&mut own, &second_url));

    // Alice has her tab back as a managed tab under a new id, and can drive it.
    let alice_tabs = alice.tabs();
    let mine = alice_tabs
        .iter()
        .find(|t| t["url"] == kept_url)
        .unwrap_or_else(|| panic!("Alice's tab is listed: {alice_tabs:?}"));
    assert_eq!(mine["managed"], true, "{mine}");
    assert_eq!(mine["controlledElsewhere"], false);
    assert_ne!(mine["targetId"], kept);
    let kept_now = mine["targetId"].clone();
    let observation = alice.tool("browser.observe", Some(&kept_now), json!({}));
    assert_eq!(observation["title"], "alice-kept");
    // And Bob still cannot see it, now that Alice controls it.
    assert!(!Value::Array(bob.tabs()).to_string().contains("alice-"));

    // Releasing Alice's Workspace closes its tab.
    alice.bridge.ok(
        "workspaces/release",
        json!({"workspaceId": alice.workspace_id}),
    );
    assert!(
        wait_until(Duration::from_secs(10), || !page_open(&mut own, &kept_url)),
        "the released Workspace's re-adopted tab was closed"
    );

    // The new janitor took the re-adopted tab over: when the Broker dies, it closes it.
    assert!(page_open(&mut own, &second_url));
    unsafe_kill(broker, "KILL");
    assert!(
        wait_until(Duration::from_secs(15), || !page_open(
            &mut own,
            &second_url
        )),
        "the new janitor closed the re-adopted tab after the Broker died"
    );
}

#[test]
fn a_navigation_in_flight_when_the_janitor_dies_is_unknown_outcome() {
    let rig = Rig::start();
    let mut agent = Agent::new(&rig, "com.example.inflight");
    agent.connect();
    // The fixture server holds this response, so `Page.navigate` is still pending.
    let slow = "/slow?ms=8000";
    let id = agent.bridge.request(
        "tools/call",
        json!({"name": "browser.open", "arguments": {"url": rig.fixtures.url(slow)}, "workspaceId": agent.workspace_id, "leaseId": agent.lease_id, "deadlineMs": 60000}),
    );
    assert!(
        wait_until(Duration::from_secs(15), || rig.fixtures.hits(slow) >= 1),
        "the navigation reached the server"
    );
    let broker = rig.home.broker_pid().expect("broker pid");
    unsafe_kill(janitor_pid(broker).expect("janitor"), "KILL");
    let response = agent.bridge.response(&id);
    let error = &response["error"];
    assert_eq!(error["data"]["code"], "unknown_outcome", "{response}");
    assert_eq!(error["data"]["retryable"], false);
    assert_eq!(error["data"]["context"]["cause"], "browser_disconnected");
    let command_id = error["data"]["context"]["commandId"].clone();
    let recorded = agent.bridge.ok(
        "commands/get",
        json!({"commandId": command_id, "workspaceId": agent.workspace_id}),
    );
    assert_eq!(
        recorded["command"]["status"], "unknown_outcome",
        "{recorded}"
    );
    // A browser tool called after the loss (the Workspace has heard of it: the failed call can
    // come back before the connection is marked lost), which never reaches a browser, stays
    // retryable.
    agent.wait_event("connection.lost");
    let (code, error) = agent.tool_err("browser.tabs.list", None, json!({}));
    assert_eq!(code, "browser_disconnected", "{error}");
    assert_eq!(error["data"]["retryable"], true);
}

/// Stops the home's managed browser even when an assertion failed midway.
struct StopManaged<'a>(&'a TestHome);

impl Drop for StopManaged<'_> {
    fn drop(&mut self) {
        let _ = self.0.run(BIN, &["browser", "stop"]);
    }
}

/// The managed browser's pid, from its profile's `SingletonLock` (`<host>-<pid>`).
fn managed_browser_pid(home: &TestHome) -> u32 {
    let lock = home
        .path()
        .join("browser")
        .join("managed-profile")
        .join("SingletonLock");
    let target = std::fs::read_link(lock).unwrap();
    let target = target.to_string_lossy().into_owned();
    target.rsplit_once('-').unwrap().1.parse().unwrap()
}

#[test]
fn the_managed_browser_outlives_its_janitor_and_is_relaunched_after_its_death() {
    // Only the managed profile is discovered: the browser the keeper holds on its pipe.
    let home = TestHome::new().with_env("BROWSER_PILOT_DISCOVERY_DIRS", "");
    let fixtures = Fixtures::start();
    let _stop = StopManaged(&home);
    let (code, out, err) = home.run(BIN, &["browser", "launch", "--headless"]);
    assert_eq!(code, 0, "{out}{err}");
    let browser = managed_browser_pid(&home);
    let mut agent = Agent::with_home(&home, "com.example.keeper");
    let connected = agent.connect();
    let first = connected["browserConnectionGeneration"].as_u64().unwrap();
    let url = fixtures.url("/page/kept-through-the-keeper");
    agent.tool("browser.open", None, json!({"url": url}));

    // The keeper serves one client: a second janitor is refused and the first one carries on.
    let socket = home.path().join("browser").join("keeper.sock");
    let mut second = std::process::Command::new(BIN)
        .arg("--browser-pilot-internal=janitor")
        .arg(format!("keeper:{}", socket.display()))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut first_line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(second.stdout.take().unwrap()),
        &mut first_line,
    )
    .unwrap();
    let status: Value = serde_json::from_str(&first_line).unwrap();
    assert_eq!(status["janitor"], "failed", "{first_line}");
    assert_eq!(status["reason"], "refused", "{first_line}");
    assert_eq!(second.wait().unwrap().code(), Some(1));
    assert!(agent.tabs().iter().any(|t| t["url"] == url));

    // The janitor dies: the browser and the tab live on; the next connect goes through the
    // keeper again, in a newer generation, and finds the tab as the Workspace's own.
    let broker = home.broker_pid().expect("broker pid");
    unsafe_kill(
        janitor_pid(broker).expect("the Broker's janitor runs"),
        "KILL",
    );
    let lost = agent.wait_event("connection.lost");
    assert_eq!(lost["payload"]["generation"], first);
    assert!(pid_alive(browser), "a janitor death never ends the browser");
    let again = agent.connect();
    let second = again["browserConnectionGeneration"].as_u64().unwrap();
    assert!(second > first, "{again}");
    let restored = agent.wait_event("connection.restored");
    assert_eq!(restored["payload"]["generation"], second);
    let tabs = agent.tabs();
    let tab = tabs
        .iter()
        .find(|t| t["url"] == url)
        .unwrap_or_else(|| panic!("the tab is still there: {tabs:?}"));
    assert_eq!(tab["managed"], true, "{tab}");
    let observation = agent.tool("browser.observe", Some(&tab["targetId"]), json!({}));
    assert_eq!(observation["title"], "kept-through-the-keeper");

    // The browser dies: the loss is journaled, and browser.connect launches the managed
    // profile again.
    unsafe_kill(browser, "KILL");
    let lost = agent.wait_event("connection.lost");
    assert_eq!(lost["payload"]["generation"], second);
    let relaunched = agent.connect();
    let third = relaunched["browserConnectionGeneration"].as_u64().unwrap();
    assert!(third > second, "{relaunched}");
    let new_browser = managed_browser_pid(&home);
    assert_ne!(new_browser, browser);
    assert!(pid_alive(new_browser));
    let url = fixtures.url("/page/after-the-relaunch");
    agent.tool("browser.open", None, json!({"url": url}));
    assert!(agent.tabs().iter().any(|t| t["url"] == url));
}
