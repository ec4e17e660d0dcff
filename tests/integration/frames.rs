//! Process tests of frames against a real headless Chromium: `browser.frames.list` and
//! `browser.frames.select` on a parent page with a same-origin iframe, a cross-origin iframe of
//! the same site (a second 127.0.0.1 port: in-process) and a cross-site iframe (`localhost` on
//! that port: out-of-process under site isolation); observe/read/search/find and actions scoped
//! to the selected frame; refs bound to their frame; and `watchdog.frame_detached` when the
//! selected frame is removed or its parent navigates. No raw CDP frame or target id may appear
//! in any output.

use crate::support;

use std::time::Duration;

use serde_json::{Value, json};
use support::chromium::{Fixtures, OwnCdp};
use support::rig::{Agent, Rig, find_ref};
use support::wait_until;

/// The frames fixture with its two cross-origin children on `other` (another port).
fn frames_url(rig: &Rig, other: &Fixtures) -> String {
    let cross = other.url("/fixture/frame-child");
    let oopif = format!("http://localhost:{}/fixture/frame-child", other.port);
    format!(
        "{}#cross={cross}&oopif={oopif}",
        rig.fixtures.url("/fixture/frames")
    )
}

/// An agent connected, with the frames fixture open in a managed tab.
fn open_frames(rig: &Rig, other: &Fixtures) -> (Agent, Value, String) {
    let mut agent = Agent::new(rig, "com.example.frames");
    agent.connect();
    let url = frames_url(rig, other);
    let opened = agent.tool("browser.open", None, json!({"url": url}));
    (agent, opened["targetId"].clone(), url)
}

fn observe(agent: &mut Agent, target: &Value) -> Value {
    agent.tool("browser.observe", Some(target), json!({"limit": 500}))
}

fn names(observation: &Value) -> Vec<String> {
    observation["elements"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap_or("").to_owned())
        .collect()
}

fn act(
    agent: &mut Agent,
    target: &Value,
    tool: &str,
    observation: &Value,
    element_ref: u64,
    extra: Value,
) -> Value {
    let mut arguments = json!({"observationId": observation["observationId"], "ref": element_ref});
    if let (Some(arguments), Some(extra)) = (arguments.as_object_mut(), extra.as_object()) {
        arguments.extend(extra.clone());
    }
    agent.tool(tool, Some(target), arguments)
}

fn list(agent: &mut Agent, target: &Value) -> Value {
    agent.tool("browser.frames.list", Some(target), json!({}))
}

/// The listed frame whose name is `name` (the main frame has none).
fn frame<'a>(listed: &'a Value, name: &str) -> &'a Value {
    listed["frames"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == name)
        .unwrap_or_else(|| panic!("no frame named {name:?} in {listed}"))
}

fn select(agent: &mut Agent, target: &Value, frame_id: &Value) -> Value {
    agent.tool(
        "browser.frames.select",
        Some(target),
        json!({"frameId": frame_id}),
    )
}

/// Every raw id Chromium has for targets (tabs and out-of-process frames) and frames of the
/// tab showing `url`, read over the test's own CDP connection.
fn raw_ids(own: &mut OwnCdp, url: &str) -> Vec<String> {
    let targets = own.call("Target.getTargets", json!({}));
    let mut ids: Vec<String> = targets["targetInfos"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["targetId"].as_str().unwrap().to_owned())
        .collect();
    let page = own
        .pages()
        .into_iter()
        .find(|(_, u)| u == url)
        .expect("the frames tab")
        .0;
    let session = own.call(
        "Target.attachToTarget",
        json!({"targetId": page, "flatten": true}),
    )["sessionId"]
        .as_str()
        .unwrap()
        .to_owned();
    let tree = own.call_in(Some(&session), "Page.getFrameTree", json!({}));
    own.call("Target.detachFromTarget", json!({"sessionId": session}));
    let mut stack = vec![tree["frameTree"].clone()];
    while let Some(node) = stack.pop() {
        ids.push(node["frame"]["id"].as_str().unwrap().to_owned());
        stack.extend(node["childFrames"].as_array().cloned().unwrap_or_default());
    }
    ids
}

fn assert_no_raw_ids(output: &Value, raw: &[String]) {
    let text = output.to_string();
    for id in raw {
        assert!(
            !text.contains(id.as_str()),
            "raw CDP id {id} leaked: {text}"
        );
    }
}

#[test]
fn frames_list_select_and_scope_observe_read_and_actions() {
    let rig = Rig::start();
    let other = Fixtures::start();
    let (mut agent, target, url) = open_frames(&rig, &other);
    let mut own = OwnCdp::connect(&rig.chromium);
    let raw = raw_ids(&mut own, &url);
    assert!(raw.len() >= 5, "tab, OOPIF target and frames: {raw:?}");

    // The tree: main + same-origin + cross-origin in-process + cross-site out-of-process.
    let listed = list(&mut agent, &target);
    assert_no_raw_ids(&listed, &raw);
    let frames = listed["frames"].as_array().unwrap();
    assert_eq!(frames.len(), 4, "{listed}");
    assert_eq!(listed["truncated"], false);
    let main = &frames[0];
    assert_eq!(main["main"], true);
    assert_eq!(main["parentFrameId"], Value::Null);
    assert_eq!(main["selected"], true);
    assert_eq!(listed["selectedFrameId"], main["frameId"]);
    assert_eq!(listed["selectionDetached"], false);
    for f in frames {
        assert!(f["frameId"].as_str().unwrap().starts_with("frame:"), "{f}");
    }
    let same = frame(&listed, "same").clone();
    let cross = frame(&listed, "cross").clone();
    let oopif = frame(&listed, "oopif").clone();
    for (child, cross_origin, out_of_process) in [
        (&same, false, false),
        (&cross, true, false),
        (&oopif, true, true),
    ] {
        assert_eq!(child["parentFrameId"], main["frameId"], "{child}");
        assert_eq!(child["main"], false);
        assert_eq!(child["selected"], false);
        assert_eq!(child["crossOrigin"], cross_origin, "{child}");
        assert_eq!(child["outOfProcess"], out_of_process, "{child}");
        assert!(
            child["url"]
                .as_str()
                .unwrap()
                .ends_with("/fixture/frame-child")
        );
    }
    assert!(
        oopif["url"]
            .as_str()
            .unwrap()
            .starts_with("http://localhost:")
    );
    // The same frame keeps its id between listings.
    assert_eq!(
        frame(&list(&mut agent, &target), "same")["frameId"],
        same["frameId"]
    );

    // Same-origin frame: the Observation is the frame's, not the parent's.
    let selected = select(&mut agent, &target, &same["frameId"]);
    assert_eq!(selected["frame"]["frameId"], same["frameId"]);
    assert_eq!(selected["frame"]["selected"], true);
    assert_no_raw_ids(&selected, &raw);
    let observation = observe(&mut agent, &target);
    assert_no_raw_ids(&observation, &raw);
    let seen = names(&observation);
    assert!(seen.iter().any(|n| n.contains("Child agree")), "{seen:?}");
    assert!(!seen.iter().any(|n| n.contains("Parent")), "{seen:?}");
    assert!(
        observation["url"]
            .as_str()
            .unwrap()
            .ends_with("/fixture/frame-child")
    );
    // Click a checkbox inside it (the frame is below the fold: scrolled and translated).
    let clicked = act(
        &mut agent,
        &target,
        "browser.click",
        &observation,
        find_ref(&observation, "checkbox", "Child agree"),
        json!({}),
    );
    assert_eq!(clicked["evidence"]["status"], "verified", "{clicked}");
    assert_eq!(clicked["evidence"]["checked"], true);
    assert!(
        clicked["evidence"]["effects"]
            .as_array()
            .unwrap()
            .contains(&json!("checked_changed"))
    );
    // Type into an input inside it.
    let typed = act(
        &mut agent,
        &target,
        "browser.type",
        &clicked,
        find_ref(&clicked, "textbox", "Child name"),
        json!({"text": "Ada", "verification": "require_exact"}),
    );
    assert_eq!(typed["evidence"]["status"], "verified", "{typed}");
    assert_eq!(typed["evidence"]["afterLength"], 3);
    let name_field = find_ref(&typed, "textbox", "Child name");
    assert_eq!(element_with_ref(&typed, name_field)["value"], "Ada");
    submit_listener_only(&mut agent, &target, &typed);
    // Reading tools are scoped too.
    let read = agent.tool("browser.read", Some(&target), json!({}));
    let text = read["text"].as_str().unwrap();
    assert!(text.contains("Child frame content") && !text.contains("Frames parent"));
    let found = agent.tool(
        "browser.search",
        Some(&target),
        json!({"query": "child bottom"}),
    );
    assert_eq!(found["total"], 1, "{found}");
    let inputs = agent.tool(
        "browser.elements.find",
        Some(&target),
        json!({"selector": "input"}),
    );
    assert_eq!(inputs["total"], 2, "the child's two inputs: {inputs}");
    let scrolled = agent.tool(
        "browser.scroll",
        Some(&target),
        json!({"direction": "down", "amount": 300}),
    );
    assert_eq!(scrolled["evidence"]["status"], "verified", "{scrolled}");
    assert!(
        scrolled["evidence"]["after"]["y"].as_i64() > scrolled["evidence"]["before"]["y"].as_i64(),
        "the frame scrolled: {scrolled}"
    );

    // A ref taken in one frame is rejected once another frame is selected.
    let in_same = observe(&mut agent, &target);
    let stale_ref = find_ref(&in_same, "checkbox", "Child agree");
    select(&mut agent, &target, &oopif["frameId"]);
    let (code, error) = agent.tool_err(
        "browser.click",
        Some(&target),
        json!({"observationId": in_same["observationId"], "ref": stale_ref}),
    );
    assert_eq!(code, "stale_ref", "{error}");
    assert_eq!(error["data"]["context"]["reason"], "frame_changed");

    // The out-of-process frame: observe, click and type through its own session.
    let observation = observe(&mut agent, &target);
    assert_no_raw_ids(&observation, &raw);
    assert!(
        observation["url"]
            .as_str()
            .unwrap()
            .starts_with("http://localhost:")
    );
    assert!(!names(&observation).iter().any(|n| n.contains("Parent")));
    let clicked = act(
        &mut agent,
        &target,
        "browser.click",
        &observation,
        find_ref(&observation, "checkbox", "Child agree"),
        json!({}),
    );
    assert_eq!(clicked["evidence"]["status"], "verified", "{clicked}");
    assert_eq!(clicked["evidence"]["checked"], true);
    let typed = act(
        &mut agent,
        &target,
        "browser.type",
        &clicked,
        find_ref(&clicked, "textbox", "Child name"),
        json!({"text": "Grace", "verification": "require_exact", "submit": false}),
    );
    assert_eq!(typed["evidence"]["status"], "verified", "{typed}");
    let name_field = find_ref(&typed, "textbox", "Child name");
    assert_eq!(element_with_ref(&typed, name_field)["value"], "Grace");
    submit_listener_only(&mut agent, &target, &typed);
    // The other frames were not touched: the OOPIF's state is its own.
    let state = own.evaluate_in_page(
        &url,
        "[document.getElementById('parent-agree').checked, document.getElementById('same').contentDocument.getElementById('child-name').value]",
    );
    assert_eq!(state["result"]["value"], json!([false, "Ada"]));

    // The cross-origin, same-process frame works the same way.
    select(&mut agent, &target, &cross["frameId"]);
    let observation = observe(&mut agent, &target);
    let clicked = act(
        &mut agent,
        &target,
        "browser.click",
        &observation,
        find_ref(&observation, "checkbox", "Child agree"),
        json!({}),
    );
    assert_eq!(clicked["evidence"]["status"], "verified", "{clicked}");
    submit_listener_only(&mut agent, &target, &clicked);

    // Back to the main frame.
    let back = agent.tool(
        "browser.frames.select",
        Some(&target),
        json!({"main": true}),
    );
    assert_eq!(back["frame"]["frameId"], main["frameId"]);
    assert_eq!(back["frame"]["main"], true);
    let observation = observe(&mut agent, &target);
    let seen = names(&observation);
    assert!(seen.iter().any(|n| n.contains("Parent agree")), "{seen:?}");
    assert!(!seen.iter().any(|n| n.contains("Child agree")), "{seen:?}");
    let listed = list(&mut agent, &target);
    assert_eq!(listed["selectedFrameId"], main["frameId"]);
    assert_eq!(frame(&listed, "oopif")["selected"], false);

    // Bad selections.
    let (code, error) = agent.tool_err(
        "browser.frames.select",
        Some(&target),
        json!({"frameId": "frame:00000000000000000000000000000000"}),
    );
    assert_eq!(code, "frame_not_found", "{error}");
    assert_eq!(error["data"]["context"]["reason"], "unknown_frame");
    assert_eq!(error["data"]["remediation"]["action"], "list_frames");
    let (code, _) = agent.tool_err(
        "browser.frames.select",
        Some(&target),
        json!({"frameId": same["frameId"], "main": true}),
    );
    assert_eq!(code, "invalid_params");
    let (code, _) = agent.tool_err("browser.frames.select", Some(&target), json!({}));
    assert_eq!(code, "invalid_params");
}

/// Polls the journal until an event of each type arrived; returns them all.
/// The selected child frame's "Submit", a `div` clickable only through a script listener, is in
/// `observation` as a control; clicking its ref submits (the frame's status says so).
fn submit_listener_only(agent: &mut Agent, target: &Value, observation: &Value) {
    assert_eq!(read_status(agent, target), "child idle");
    let submit = find_ref(observation, "clickable", "Submit");
    let clicked = act(
        agent,
        target,
        "browser.click",
        observation,
        submit,
        json!({}),
    );
    assert_eq!(clicked["evidence"]["action"], "click", "{clicked}");
    assert_eq!(read_status(agent, target), "child submitted");
}

fn read_status(agent: &mut Agent, target: &Value) -> String {
    agent.tool("browser.read", Some(target), json!({"selector": "#status"}))["text"]
        .as_str()
        .unwrap()
        .to_owned()
}

fn wait_events(agent: &mut Agent, types: &[&str]) -> Vec<Value> {
    let mut seen: Vec<Value> = Vec::new();
    let arrived = wait_until(Duration::from_secs(15), || {
        seen.extend(agent.events());
        types.iter().all(|t| seen.iter().any(|e| e["type"] == *t))
    });
    assert!(arrived, "expected {types:?}, got {seen:?}");
    seen
}

fn event<'a>(events: &'a [Value], event_type: &str) -> &'a Value {
    events.iter().find(|e| e["type"] == event_type).unwrap()
}

#[test]
fn a_detached_selected_frame_is_announced_and_later_calls_say_so() {
    let rig = Rig::start();
    let other = Fixtures::start();
    let (mut agent, target, url) = open_frames(&rig, &other);
    let mut own = OwnCdp::connect(&rig.chromium);
    let raw = raw_ids(&mut own, &url);
    let listed = list(&mut agent, &target);
    let main = listed["frames"][0].clone();
    let same = frame(&listed, "same").clone();
    select(&mut agent, &target, &same["frameId"]);
    let observation = observe(&mut agent, &target);
    let child_ref = find_ref(&observation, "checkbox", "Child agree");
    agent.events();

    // The parent removes the selected iframe (another tool on the machine does it).
    own.evaluate_in_page(&url, "document.getElementById('same').remove()");
    let events = wait_events(
        &mut agent,
        &["watchdog.frame_detached", "observation.invalidated"],
    );
    let watchdog = event(&events, "watchdog.frame_detached");
    assert_eq!(
        watchdog["payload"]["frameId"], same["frameId"],
        "{watchdog}"
    );
    assert_eq!(watchdog["payload"]["targetId"], target);
    assert_eq!(watchdog["payload"]["reason"], "removed");
    assert_eq!(watchdog["targetId"], target);
    let invalidated = event(&events, "observation.invalidated");
    assert_eq!(invalidated["payload"]["frameId"], same["frameId"]);
    assert_eq!(invalidated["payload"]["reason"], "frame_detached");
    assert_no_raw_ids(&json!(events), &raw);
    assert_eq!(
        events
            .iter()
            .filter(|e| e["type"] == "watchdog.frame_detached")
            .count(),
        1
    );

    // Frame-scoped calls say so until the Workspace selects again; nothing runs elsewhere.
    let (code, error) = agent.tool_err("browser.observe", Some(&target), json!({}));
    assert_eq!(code, "frame_not_found", "{error}");
    assert_eq!(error["data"]["context"]["reason"], "frame_detached");
    assert_eq!(error["data"]["context"]["frameId"], same["frameId"]);
    assert_eq!(error["data"]["remediation"]["action"], "list_frames");
    let (code, _) = agent.tool_err(
        "browser.click",
        Some(&target),
        json!({"observationId": observation["observationId"], "ref": child_ref}),
    );
    assert_eq!(code, "frame_not_found");
    let (code, _) = agent.tool_err("browser.click", Some(&target), json!({"x": 10, "y": 10}));
    assert_eq!(
        code, "frame_not_found",
        "coordinates do not fall back to the parent"
    );
    let state = own.evaluate_in_page(&url, "document.getElementById('parent-agree').checked");
    assert_eq!(state["result"]["value"], false);
    let listed = list(&mut agent, &target);
    assert_eq!(listed["selectionDetached"], true);
    assert_eq!(listed["selectedFrameId"], Value::Null);
    assert_eq!(listed["frames"].as_array().unwrap().len(), 3);
    assert!(
        !listed
            .to_string()
            .contains(same["frameId"].as_str().unwrap())
    );
    let (code, error) = agent.tool_err(
        "browser.frames.select",
        Some(&target),
        json!({"frameId": same["frameId"]}),
    );
    assert_eq!(code, "frame_not_found", "{error}");

    // Selecting the main frame ends it; the detached frame's Observation stays invalid.
    agent.tool(
        "browser.frames.select",
        Some(&target),
        json!({"main": true}),
    );
    let in_main = observe(&mut agent, &target);
    assert!(names(&in_main).iter().any(|n| n.contains("Parent agree")));
    let (code, error) = agent.tool_err(
        "browser.click",
        Some(&target),
        json!({"observationId": observation["observationId"], "ref": child_ref}),
    );
    assert_eq!(code, "observation_not_found", "{error}");

    // An out-of-process selected frame goes away when the parent navigates.
    let oopif = frame(&listed, "oopif").clone();
    select(&mut agent, &target, &oopif["frameId"]);
    observe(&mut agent, &target);
    agent.events();
    agent.tool(
        "browser.navigate",
        Some(&target),
        json!({"action": "goto", "url": rig.fixtures.url("/page/after")}),
    );
    let events = wait_events(&mut agent, &["watchdog.frame_detached"]);
    let watchdog = event(&events, "watchdog.frame_detached");
    assert_eq!(watchdog["payload"]["frameId"], oopif["frameId"]);
    assert_eq!(watchdog["payload"]["reason"], "parent_navigated");
    let (code, _) = agent.tool_err("browser.read", Some(&target), json!({}));
    assert_eq!(code, "frame_not_found");
    let listed = list(&mut agent, &target);
    assert_eq!(listed["frames"].as_array().unwrap().len(), 1);
    assert_eq!(
        listed["frames"][0]["frameId"], main["frameId"],
        "the main frame stays the same frame across documents"
    );
}

/// The element with this ref (refs are stable per document, not positions).
fn element_with_ref(observation: &Value, element_ref: u64) -> &Value {
    observation["elements"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["ref"] == element_ref)
        .unwrap_or_else(|| panic!("no ref {element_ref} in {observation}"))
}
