//! Process tests of `browser.wait`, `browser.hover`, `browser.drag`, `browser.console.list` and
//! background driving, against a real headless Chromium and fixture pages served from
//! 127.0.0.1 that behave like real sites: results that arrive by fetch while a spinner shows,
//! a wizard step that changes the URL with pushState, a dashboard refresh that fires a burst of
//! requests (each slow answer held by the test server until the test releases it), a CSS
//! `:hover` menu and a `mouseenter` tooltip, a kanban board with HTML5 drag and drop and a
//! pointer-event sortable list, console output with uncaught exceptions, an unhandled rejection
//! and a flood, a tab the user opened before the Broker controlled it, and a heavy page whose
//! press handler outlives the deadline of a drag.

use crate::support;

use std::time::Duration;

use serde_json::{Value, json};
use support::chromium::OwnCdp;
use support::rig::{Agent, Rig, find_ref};
use support::wait_until;

/// One Chromium and one Broker for the whole module; each scenario has its own bridge,
/// Workspace and tab.
#[test]
fn waits_gestures_console_and_background_driving() {
    let rig = Rig::start();
    waits_for_text_selectors_urls_and_network_idle(&rig);
    hover_shows_menus_and_tooltips(&rig);
    drag_moves_cards_and_reorders_a_sortable_list(&rig);
    console_keeps_messages_and_exceptions_since_control_bounded(&rig);
    managed_tabs_are_driven_without_being_activated(&rig);
    a_drag_whose_press_outlives_the_deadline_is_unknown_outcome(&rig);
}

fn open(rig: &Rig, client: &str, fixture: &str) -> (Agent, Value) {
    let mut agent = Agent::new(rig, client);
    agent.connect();
    let opened = agent.tool(
        "browser.open",
        None,
        json!({"url": rig.fixtures.url(&format!("/fixture/{fixture}"))}),
    );
    (agent, opened["targetId"].clone())
}

fn observe(agent: &mut Agent, target: &Value) -> Value {
    agent.tool("browser.observe", Some(target), json!({"limit": 200}))
}

fn click(agent: &mut Agent, target: &Value, role: &str, name: &str) -> Value {
    let observation = observe(agent, target);
    let element = find_ref(&observation, role, name);
    agent.tool(
        "browser.click",
        Some(target),
        json!({"observationId": observation["observationId"], "ref": element}),
    )
}

/// A `tools/call` with its own `deadlineMs`; the whole response.
fn call_with_deadline(
    agent: &mut Agent,
    name: &str,
    target: &Value,
    arguments: Value,
    deadline_ms: u64,
) -> Value {
    let params = json!({"name": name, "arguments": arguments, "workspaceId": agent.workspace_id,
        "leaseId": agent.lease_id, "targetId": target, "deadlineMs": deadline_ms});
    agent.bridge.call("tools/call", params)
}

fn names(observation: &Value) -> Vec<String> {
    observation["elements"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap_or("").to_owned())
        .collect()
}

fn effects(evidence: &Value) -> Vec<&str> {
    evidence["effects"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e.as_str().unwrap())
        .collect()
}

/// A wait that must run out: `deadline_exceeded` (retryable) naming the condition, with the
/// last state seen.
fn wait_times_out(agent: &mut Agent, target: &Value, arguments: Value) -> Value {
    let response = call_with_deadline(agent, "browser.wait", target, arguments.clone(), 3_000);
    let error = &response["error"];
    assert_eq!(
        error["data"]["code"], "deadline_exceeded",
        "{arguments}: {response}"
    );
    assert_eq!(error["data"]["retryable"], true);
    assert!(
        error["data"]["context"]["condition"].is_string(),
        "{response}"
    );
    error["data"]["context"]["lastState"].clone()
}

fn waits_for_text_selectors_urls_and_network_idle(rig: &Rig) {
    let (mut agent, tab) = open(rig, "com.example.wait", "wait");
    // Text that arrives by fetch, and the spinner shown meanwhile.
    click(&mut agent, &tab, "button", "Load results");
    let spinner = agent.tool("browser.wait", Some(&tab), json!({"selector": "#spinner"}));
    assert_eq!(spinner["condition"], "selector_visible");
    assert_eq!(spinner["state"]["visible"], 1);
    let last = wait_times_out(&mut agent, &tab, json!({"text": "results loaded"}));
    assert_eq!(last["textFound"], false, "{last}");
    rig.fixtures.release("results");
    // Case and whitespace do not matter; the page wrote "Results   loaded: 3 orders".
    let loaded = agent.tool(
        "browser.wait",
        Some(&tab),
        json!({"text": "RESULTS LOADED: 3"}),
    );
    assert_eq!(loaded["condition"], "text");
    assert_eq!(loaded["state"]["textFound"], true);
    let hidden = agent.tool(
        "browser.wait",
        Some(&tab),
        json!({"selector": "#spinner", "state": "hidden"}),
    );
    assert_eq!(hidden["condition"], "selector_hidden");
    assert_eq!(hidden["state"], json!({"matched": 1, "visible": 0}));
    let gone = agent.tool("browser.wait", Some(&tab), json!({"textGone": "Loading"}));
    assert_eq!(gone["condition"], "text_gone");
    assert_eq!(gone["state"]["textFound"], false);

    // The URL after pushState.
    click(&mut agent, &tab, "button", "Next step");
    let last = wait_times_out(&mut agent, &tab, json!({"url": "*step=2"}));
    assert!(
        last["url"].as_str().unwrap().ends_with("/fixture/wait"),
        "{last}"
    );
    rig.fixtures.release("step");
    let stepped = agent.tool("browser.wait", Some(&tab), json!({"url": "*step=2"}));
    assert_eq!(stepped["condition"], "url");
    assert!(
        stepped["state"]["url"]
            .as_str()
            .unwrap()
            .ends_with("/fixture/wait?wizard=1&step=2"),
        "{stepped}"
    );
    assert_eq!(stepped["url"], stepped["state"]["url"]);

    // Network idle after a burst: not while one request is held, then after it.
    click(&mut agent, &tab, "button", "Refresh dashboard");
    let last = wait_times_out(
        &mut agent,
        &tab,
        json!({"networkIdle": true, "idleMs": 200}),
    );
    assert!(last["inFlight"].as_u64().unwrap() >= 1, "{last}");
    rig.fixtures.release("burst");
    let idle = agent.tool(
        "browser.wait",
        Some(&tab),
        json!({"networkIdle": true, "idleMs": 300}),
    );
    assert_eq!(idle["condition"], "network_idle");
    assert_eq!(idle["state"]["inFlight"], 0);
    assert!(idle["state"]["quietMs"].as_u64().unwrap() >= 300, "{idle}");
    // Every request of the burst had ended: the page counted five answers.
    let counted = agent.tool("browser.wait", Some(&tab), json!({"text": "widgets: 5"}));
    assert_eq!(counted["state"]["textFound"], true);

    // Bad input is refused before anything waits.
    for arguments in [
        json!({}),
        json!({"text": "a", "url": "*"}),
        json!({"text": "a", "state": "hidden"}),
        json!({"selector": "div[", "state": "visible"}),
    ] {
        let (code, error) = agent.tool_err("browser.wait", Some(&tab), arguments.clone());
        assert_eq!(code, "invalid_params", "{arguments}: {error}");
    }
}

fn hover_shows_menus_and_tooltips(rig: &Rig) {
    let (mut agent, tab) = open(rig, "com.example.hover", "hover");
    let observation = observe(&mut agent, &tab);
    assert!(
        !names(&observation).iter().any(|n| n == "Laptops"),
        "the menu is hidden before the hover"
    );
    let products = find_ref(&observation, "link", "Products");
    let hovered = agent.tool(
        "browser.hover",
        Some(&tab),
        json!({"observationId": observation["observationId"], "ref": products}),
    );
    let evidence = &hovered["evidence"];
    assert_eq!(evidence["action"], "hover");
    assert_eq!(evidence["status"], "verified", "{evidence}");
    assert_eq!(evidence["hovered"], true);
    assert!(
        effects(evidence).contains(&"content_appeared"),
        "{evidence}"
    );
    assert_eq!(evidence["appearedCount"], 1, "{evidence}");
    assert_eq!(evidence["appeared"][0]["role"], "menu");
    assert_eq!(evidence["appeared"][0]["name"], "Products menu");
    // The fresh Observation shows the menu the hover opened.
    find_ref(&hovered, "menuitem", "Laptops");

    // A tooltip created by a mouseenter handler; the menu closes as the pointer leaves it.
    let help = find_ref(&hovered, "button", "Shipping help");
    let tipped = agent.tool(
        "browser.hover",
        Some(&tab),
        json!({"observationId": hovered["observationId"], "ref": help}),
    );
    let evidence = &tipped["evidence"];
    assert_eq!(evidence["status"], "verified", "{evidence}");
    assert_eq!(evidence["appeared"][0]["role"], "tooltip", "{evidence}");
    assert!(
        evidence["appeared"][0]["name"]
            .as_str()
            .unwrap()
            .contains("Free shipping"),
        "{evidence}"
    );
    assert!(!names(&tipped).iter().any(|n| n == "Laptops"));

    // Coordinates over empty space: the tooltip goes, nothing appears, so nothing is proved.
    let away = agent.tool("browser.hover", Some(&tab), json!({"x": 700, "y": 500}));
    let evidence = &away["evidence"];
    assert_eq!(evidence["kind"], "coordinates");
    assert_eq!(evidence["status"], "unavailable", "{evidence}");
    assert_eq!(evidence["reason"], "no_observable_effect");
    assert_eq!(evidence["appearedCount"], 0);
    let gone = agent.tool(
        "browser.wait",
        Some(&tab),
        json!({"selector": "[role=tooltip]", "state": "hidden"}),
    );
    assert_eq!(gone["state"]["matched"], 0);
}

fn drag_moves_cards_and_reorders_a_sortable_list(rig: &Rig) {
    let (mut agent, tab) = open(rig, "com.example.drag", "drag");
    let observation = observe(&mut agent, &tab);
    let card_a = find_ref(&observation, "clickable", "Card A");
    let done = find_ref(&observation, "clickable", "Done column");
    let dragged = agent.tool(
        "browser.drag",
        Some(&tab),
        json!({"observationId": observation["observationId"], "ref": card_a, "toRef": done}),
    );
    let evidence = &dragged["evidence"];
    assert_eq!(evidence["action"], "drag");
    assert_eq!(evidence["status"], "verified", "{evidence}");
    assert_eq!(evidence["dragStarted"], true);
    assert_eq!(evidence["drop"]["inside"], true, "{evidence}");
    assert!(
        evidence["drop"]["types"]
            .as_array()
            .unwrap()
            .contains(&json!("text/plain")),
        "{evidence}"
    );
    assert_eq!(evidence["dropEffect"], "move");
    assert_eq!(evidence["reordered"], true, "the card changed columns");
    for effect in ["dropped", "element_moved", "target_changed"] {
        assert!(effects(evidence).contains(&effect), "{effect}: {evidence}");
    }
    // The page's own drop handler read the dataTransfer.
    let moved = agent.tool("browser.wait", Some(&tab), json!({"text": "done: card-a"}));
    assert_eq!(moved["state"]["textFound"], true);

    // A column that refuses drops: the drag started, nothing dropped, nothing proved.
    let observation = observe(&mut agent, &tab);
    let refused = agent.tool(
        "browser.drag",
        Some(&tab),
        json!({"observationId": observation["observationId"],
            "ref": find_ref(&observation, "clickable", "Card B"),
            "toRef": find_ref(&observation, "clickable", "Locked column")}),
    );
    let evidence = &refused["evidence"];
    assert_eq!(evidence["status"], "unavailable", "{evidence}");
    assert_eq!(evidence["reason"], "no_observable_effect");
    assert_eq!(evidence["dragStarted"], true, "{evidence}");
    assert_eq!(evidence["dropEffect"], "none");
    assert!(evidence.get("drop").is_none(), "{evidence}");
    assert_eq!(evidence["moved"], false);

    // A drop target given as coordinates, low in the Done column (both ends in view, so
    // nothing scrolls under the point).
    let observation = observe(&mut agent, &tab);
    let done_box = observation["elements"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "Done column")
        .unwrap()["bounds"]
        .clone();
    let (to_x, to_y) = (
        done_box["x"].as_f64().unwrap() + done_box["width"].as_f64().unwrap() / 2.0,
        done_box["y"].as_f64().unwrap() + done_box["height"].as_f64().unwrap() - 10.0,
    );
    let by_point = agent.tool(
        "browser.drag",
        Some(&tab),
        json!({"observationId": observation["observationId"],
            "ref": find_ref(&observation, "clickable", "Card B"), "toX": to_x, "toY": to_y}),
    );
    let evidence = &by_point["evidence"];
    assert_eq!(evidence["status"], "verified", "{evidence}");
    assert_eq!(
        evidence["drop"]["inside"],
        Value::Null,
        "no target ref to be inside"
    );
    agent.tool("browser.wait", Some(&tab), json!({"text": "done: card-b"}));

    // A sortable list driven by pointer events on drag handles.
    let observation = observe(&mut agent, &tab);
    let sorted = agent.tool(
        "browser.drag",
        Some(&tab),
        json!({"observationId": observation["observationId"],
            "ref": find_ref(&observation, "button", "Move First item"),
            "toRef": find_ref(&observation, "button", "Move Third item")}),
    );
    let evidence = &sorted["evidence"];
    assert_eq!(evidence["status"], "verified", "{evidence}");
    assert_eq!(evidence["moved"], true);
    assert!(effects(evidence).contains(&"element_moved"), "{evidence}");
    assert!(
        evidence.get("drop").is_none(),
        "no HTML5 drop in a pointer sortable"
    );
    let reordered = agent.tool(
        "browser.wait",
        Some(&tab),
        json!({"textGone": "order: 1,2,3"}),
    );
    assert_eq!(reordered["state"]["textFound"], false);
    let observation = observe(&mut agent, &tab);
    let items: Vec<String> = names(&observation)
        .into_iter()
        .filter(|n| n.starts_with("Move "))
        .collect();
    assert_ne!(items[0], "Move First item", "{items:?}");

    // A target without its source is refused before any input.
    let (code, _) = agent.tool_err(
        "browser.drag",
        Some(&tab),
        json!({"observationId": observation["observationId"], "ref": 1}),
    );
    assert_eq!(code, "invalid_params");
}

fn entries(list: &Value) -> Vec<(String, String)> {
    list["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["level"].as_str().unwrap().to_owned(),
                e["text"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn console_keeps_messages_and_exceptions_since_control_bounded(rig: &Rig) {
    // A tab the user opened: what it logged before the Broker controlled it is not reported.
    let mut own = OwnCdp::connect(&rig.chromium);
    let mut agent = Agent::new(rig, "com.example.console");
    agent.connect();
    own.open_user_tab(&rig.fixtures.url("/fixture/console#user"));
    let mut user_tab = Value::Null;
    assert!(wait_until(Duration::from_secs(10), || {
        user_tab = agent
            .tabs()
            .into_iter()
            .find(|t| {
                t["url"]
                    .as_str()
                    .unwrap()
                    .ends_with("/fixture/console#user")
            })
            .map(|t| t["targetId"].clone())
            .unwrap_or(Value::Null);
        !user_tab.is_null()
    }));
    // The user's page has run its start-up logging before the Broker ever controls the tab.
    own.wait_for_document("/fixture/console#user", "Console");
    let before = agent.tool("browser.console.list", Some(&user_tab), json!({}));
    assert_eq!(before["entries"], json!([]), "{before}");
    own.evaluate_in_page(
        "/fixture/console#user",
        "console.log('after control'); true",
    );
    let mut after = Value::Null;
    assert!(wait_until(Duration::from_secs(10), || {
        after = agent.tool("browser.console.list", Some(&user_tab), json!({}));
        !after["entries"].as_array().unwrap().is_empty()
    }));
    assert_eq!(
        entries(&after),
        vec![("log".into(), "after control".into())],
        "{after}"
    );

    // Handed back and taken by another client: none of what the page logged under the first
    // client's control is returned to the second, only what it logs from then on.
    agent.tool("browser.tabs.release", Some(&user_tab), json!({}));
    let mut other = Agent::new(rig, "com.example.console-b");
    other.connect();
    let theirs = other
        .tabs()
        .into_iter()
        .find(|t| {
            t["url"]
                .as_str()
                .unwrap()
                .ends_with("/fixture/console#user")
        })
        .map(|t| t["targetId"].clone())
        .expect("the user tab is listed for the second client");
    let handed = other.tool("browser.console.list", Some(&theirs), json!({}));
    assert_eq!(handed["entries"], json!([]), "{handed}");
    own.evaluate_in_page("/fixture/console#user", "console.log('for b'); true");
    let mut seen_by_b = Value::Null;
    assert!(wait_until(Duration::from_secs(10), || {
        seen_by_b = other.tool("browser.console.list", Some(&theirs), json!({}));
        !seen_by_b["entries"].as_array().unwrap().is_empty()
    }));
    assert_eq!(
        entries(&seen_by_b),
        vec![("log".into(), "for b".into())],
        "{seen_by_b}"
    );
    other.tool("browser.tabs.release", Some(&theirs), json!({}));

    // A managed tab, from its first document on.
    let opened = agent.tool(
        "browser.open",
        None,
        json!({"url": rig.fixtures.url("/fixture/console")}),
    );
    let tab = opened["targetId"].clone();
    let mut boot = Value::Null;
    assert!(wait_until(Duration::from_secs(10), || {
        boot = agent.tool("browser.console.list", Some(&tab), json!({}));
        boot["entries"].as_array().unwrap().len() >= 3
    }));
    assert_eq!(
        entries(&boot),
        vec![
            ("log".into(), "boot Object 42 true null".into()),
            ("info".into(), "api ready".into()),
            ("warning".into(), "slow network".into()),
        ]
    );
    let latest = boot["latest"].as_u64().unwrap();
    click(&mut agent, &tab, "button", "Save order");
    let mut failed = Value::Null;
    assert!(wait_until(Duration::from_secs(10), || {
        failed = agent.tool(
            "browser.console.list",
            Some(&tab),
            json!({"after": latest, "levels": ["error", "exception"]}),
        );
        failed["entries"].as_array().unwrap().len() >= 3
    }));
    let failed = entries(&failed);
    assert_eq!(failed[0], ("error".into(), "save failed: 500".into()));
    let exceptions: Vec<&String> = failed
        .iter()
        .filter(|(level, _)| level == "exception")
        .map(|(_, text)| text)
        .collect();
    assert_eq!(exceptions.len(), 2, "{failed:?}");
    assert!(
        exceptions
            .iter()
            .any(|t| t.contains("Error: kaboom in timer")),
        "{failed:?}"
    );
    assert!(
        exceptions
            .iter()
            .any(|t| t.contains("(in promise)") && t.contains("nope: promise rejected")),
        "{failed:?}"
    );
    let only = agent.tool(
        "browser.console.list",
        Some(&tab),
        json!({"levels": ["exception"]}),
    );
    assert_eq!(only["entries"].as_array().unwrap().len(), 2);

    // A flood is bounded: the newest 500 are kept, older ones counted, texts cut.
    click(&mut agent, &tab, "button", "Flood");
    let mut flooded = Value::Null;
    assert!(wait_until(Duration::from_secs(10), || {
        flooded = agent.tool("browser.console.list", Some(&tab), json!({"limit": 50}));
        flooded["latest"].as_u64().unwrap() >= 706
    }));
    assert_eq!(flooded["entries"].as_array().unwrap().len(), 50);
    assert_eq!(flooded["hasMore"], true);
    let latest = flooded["latest"].as_u64().unwrap();
    assert_eq!(flooded["dropped"].as_u64().unwrap(), latest - 500);
    let first = flooded["entries"][0]["sequence"].as_u64().unwrap();
    assert_eq!(first, latest - 499, "the oldest kept entry");
    let last = agent.tool(
        "browser.console.list",
        Some(&tab),
        json!({"after": latest - 1}),
    );
    let entry = &last["entries"][0];
    assert!(entry["text"].as_str().unwrap().starts_with("line 699 xxx"));
    assert_eq!(entry["text"].as_str().unwrap().chars().count(), 2_000);
    assert_eq!(entry["truncated"], true);
    let none = agent.tool("browser.console.list", Some(&tab), json!({"after": latest}));
    assert_eq!(none["entries"], json!([]));
    assert_eq!(none["hasMore"], false);
    // Console output is read, never pushed: no event carries it.
    for event in agent.events() {
        let text = event.to_string();
        assert!(
            !event["type"].as_str().unwrap().contains("console")
                && !text.contains("kaboom")
                && !text.contains("line 699"),
            "{event}"
        );
    }
}

/// `document.visibilityState` of the page whose URL ends with `suffix`, read from outside.
fn visibility(own: &mut OwnCdp, suffix: &str) -> Value {
    own.evaluate_in_page(suffix, "document.visibilityState")["result"]["value"].clone()
}

fn managed_tabs_are_driven_without_being_activated(rig: &Rig) {
    let mut own = OwnCdp::connect(&rig.chromium);
    // A second managed tab opens as the front tab of a window of its own: both stay visible
    // (hidden tabs are driven in tests/integration/background.rs).
    let (mut agent, back) = open(rig, "com.example.background", "hover#back");
    agent.tool(
        "browser.open",
        None,
        json!({"url": rig.fixtures.url("/fixture/console#front")}),
    );
    assert_eq!(visibility(&mut own, "#back"), "visible");
    assert_eq!(visibility(&mut own, "#front"), "visible");
    // Drive the background tab: hover, click and wait all reach it where it is.
    let observation = observe(&mut agent, &back);
    let hovered = agent.tool(
        "browser.hover",
        Some(&back),
        json!({"observationId": observation["observationId"],
            "ref": find_ref(&observation, "link", "Products")}),
    );
    assert_eq!(hovered["evidence"]["status"], "verified", "{hovered}");
    find_ref(&hovered, "menuitem", "Laptops");
    let clicked = agent.tool(
        "browser.click",
        Some(&back),
        json!({"observationId": hovered["observationId"],
            "ref": find_ref(&hovered, "menuitem", "Phones")}),
    );
    assert_eq!(clicked["evidence"]["status"], "verified", "{clicked}");
    let waited = agent.tool("browser.wait", Some(&back), json!({"url": "*#phones"}));
    assert_eq!(waited["condition"], "url");
    // Nothing was activated or hidden.
    assert_eq!(visibility(&mut own, "#front"), "visible");
    assert_eq!(visibility(&mut own, "#phones"), "visible");
}

fn a_drag_whose_press_outlives_the_deadline_is_unknown_outcome(rig: &Rig) {
    let (mut agent, tab) = open(rig, "com.example.busydrag", "drag-busy");
    let observation = observe(&mut agent, &tab);
    let arguments = json!({"observationId": observation["observationId"],
        "ref": find_ref(&observation, "button", "Grip"),
        "toRef": find_ref(&observation, "button", "Slot")});
    let response = call_with_deadline(&mut agent, "browser.drag", &tab, arguments, 5_000);
    let error = &response["error"];
    assert_eq!(error["data"]["code"], "unknown_outcome", "{response}");
    assert_eq!(error["data"]["retryable"], false);
    assert_eq!(
        error["data"]["context"]["dispatched"]["first"],
        "Input.dispatchMouseEvent"
    );
}
