//! Process tests of the agent's core loop on fixture pages served from 127.0.0.1 to a real
//! headless Chromium: Observations and refs, reading tools, actions with evidence, guarded
//! typing, dialogs and popups.

use crate::support;

use std::time::Duration;

use serde_json::{Value, json};
use support::rig::{Agent, Rig};
use support::wait_until;

/// An agent connected, with the form fixture open in a managed tab.
fn form(rig: &Rig) -> (Agent, Value) {
    let mut agent = Agent::new(rig, "com.example.loop");
    agent.connect();
    let opened = agent.tool(
        "browser.open",
        None,
        json!({"url": rig.fixtures.url("/fixture/form")}),
    );
    let target = opened["targetId"].clone();
    (agent, target)
}

fn observe(agent: &mut Agent, target: &Value) -> Value {
    agent.tool("browser.observe", Some(target), json!({"limit": 500}))
}

/// The ref of the first element whose name contains `name` (and role, if given).
fn find_ref(observation: &Value, role: Option<&str>, name: &str) -> u64 {
    observation["elements"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| {
            e["name"].as_str().unwrap_or("").contains(name) && role.is_none_or(|r| e["role"] == r)
        })
        .unwrap_or_else(|| {
            panic!(
                "no element named {name:?} ({role:?}) in {}",
                observation["elements"]
            )
        })["ref"]
        .as_u64()
        .unwrap()
}

fn element(observation: &Value, element_ref: u64) -> &Value {
    // Refs are stable per document, not positions.
    observation["elements"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["ref"] == element_ref)
        .unwrap_or_else(|| panic!("no ref {element_ref} in {}", observation["elements"]))
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

#[test]
fn observe_returns_semantic_elements_refs_page_metrics_and_no_password() {
    let rig = Rig::start();
    let (mut agent, target) = form(&rig);
    let observation = observe(&mut agent, &target);
    assert!(
        observation["observationId"]
            .as_str()
            .unwrap()
            .starts_with("observation:")
    );
    assert_eq!(observation["title"], "Form");
    let email = find_ref(&observation, Some("textbox"), "Email");
    assert_eq!(element(&observation, email)["value"], "old");
    let password = element(&observation, find_ref(&observation, None, "Password"));
    assert!(
        password.get("value").is_none(),
        "password value never echoed: {password}"
    );
    assert_eq!(password["sensitive"], true);
    let terms = element(
        &observation,
        find_ref(&observation, Some("checkbox"), "I agree"),
    );
    assert_eq!(terms["checked"], false);
    let free = element(&observation, find_ref(&observation, Some("radio"), "Free"));
    assert_eq!(free["checked"], true);
    let page = &observation["page"];
    assert!(page["viewport"]["width"].as_u64().unwrap() > 0);
    assert!(page["document"]["height"].as_u64().unwrap() > 3000);
    assert!(observation["hints"].is_array());
    assert!(!observation.to_string().contains("secret-value"));
    // Bounded by limit, with the reason.
    let small = agent.tool("browser.observe", Some(&target), json!({"limit": 3}));
    assert_eq!(small["elements"].as_array().unwrap().len(), 3);
    assert_eq!(small["truncated"], true);
    assert_eq!(small["truncationReasons"], json!(["limit"]));
}

#[test]
fn click_evidence_statuses_and_effects() {
    let rig = Rig::start();
    let (mut agent, target) = form(&rig);
    let observation = observe(&mut agent, &target);
    // Checkbox: verified, checked_changed, and a fresh Observation.
    let clicked = act(
        &mut agent,
        &target,
        "browser.click",
        &observation,
        find_ref(&observation, Some("checkbox"), "I agree"),
        json!({}),
    );
    let evidence = &clicked["evidence"];
    assert_eq!(evidence["status"], "verified", "{evidence}");
    assert_eq!(evidence["kind"], "checkbox");
    assert!(
        evidence["effects"]
            .as_array()
            .unwrap()
            .contains(&json!("checked_changed"))
    );
    assert_eq!(evidence["checked"], true);
    assert_ne!(clicked["observationId"], observation["observationId"]);
    // Radio: verified.
    let fresh = clicked.clone();
    let pro = act(
        &mut agent,
        &target,
        "browser.click",
        &fresh,
        find_ref(&fresh, Some("radio"), "Pro"),
        json!({}),
    );
    assert_eq!(pro["evidence"]["status"], "verified");
    // Toggle button: pressed_changed; menu button: expanded_changed.
    let fresh = pro.clone();
    let bold = act(
        &mut agent,
        &target,
        "browser.click",
        &fresh,
        find_ref(&fresh, None, "Bold"),
        json!({}),
    );
    assert!(
        bold["evidence"]["effects"]
            .as_array()
            .unwrap()
            .contains(&json!("pressed_changed")),
        "{}",
        bold["evidence"]
    );
    let fresh = bold.clone();
    let menu = act(
        &mut agent,
        &target,
        "browser.click",
        &fresh,
        find_ref(&fresh, None, "Menu"),
        json!({}),
    );
    assert!(
        menu["evidence"]["effects"]
            .as_array()
            .unwrap()
            .contains(&json!("expanded_changed")),
        "{}",
        menu["evidence"]
    );
    // A semantic control that refuses its state: mismatch.
    let fresh = menu.clone();
    let stubborn = act(
        &mut agent,
        &target,
        "browser.click",
        &fresh,
        find_ref(&fresh, Some("checkbox"), "Stubborn"),
        json!({}),
    );
    assert_eq!(
        stubborn["evidence"]["status"], "mismatch",
        "{}",
        stubborn["evidence"]
    );
    // A plain button with no effect: unavailable + no_observable_effect, though the click
    // reached it and focus moved to it (focus alone proves nothing).
    let fresh = stubborn.clone();
    let noop = act(
        &mut agent,
        &target,
        "browser.click",
        &fresh,
        find_ref(&fresh, None, "Does nothing"),
        json!({}),
    );
    assert_eq!(
        noop["evidence"]["status"], "unavailable",
        "{}",
        noop["evidence"]
    );
    assert_eq!(
        noop["evidence"]["reason"], "no_observable_effect",
        "{}",
        noop["evidence"]
    );
    // Coordinates with no effect: unavailable.
    let coords = agent.tool("browser.click", Some(&target), json!({"x": 5, "y": 5}));
    assert_eq!(coords["evidence"]["kind"], "coordinates");
    // An Observation id never issued to this Workspace on this target is not found.
    let (code, _) = agent.tool_err(
        "browser.click",
        Some(&target),
        json!({"observationId": "observation:00000000000000000000000000000000", "ref": 1}),
    );
    assert_eq!(code, "observation_not_found");
    // Navigation by a link click.
    let fresh = observe(&mut agent, &target);
    // A ref the Observation never listed says so and what to do.
    let (code, error) = agent.tool_err(
        "browser.click",
        Some(&target),
        json!({"observationId": fresh["observationId"], "ref": 99999}),
    );
    assert_eq!(code, "stale_ref", "{error}");
    let data = &error["data"];
    assert_eq!(
        data["context"]["reason"], "ref_not_in_observation",
        "{error}"
    );
    assert!(
        data["context"]["highestRef"].as_u64().unwrap() >= 1,
        "{error}"
    );
    assert_eq!(data["remediation"]["action"], "observe", "{error}");
    let nav = act(
        &mut agent,
        &target,
        "browser.click",
        &fresh,
        find_ref(&fresh, Some("link"), "Next page"),
        json!({}),
    );
    let effects = nav["evidence"]["effects"].as_array().unwrap();
    assert!(
        effects.contains(&json!("navigation")) || effects.contains(&json!("document_changed")),
        "{}",
        nav["evidence"]
    );
    assert_eq!(nav["title"], "next");
    // The old Observation's refs are now stale: the closing Observation saw the new document,
    // so the old one's elements are already let go.
    let (code, error) = agent.tool_err(
        "browser.click",
        Some(&target),
        json!({"observationId": fresh["observationId"], "ref": 1}),
    );
    assert_eq!(code, "stale_ref", "{error}");
    assert_eq!(
        error["data"]["context"]["reason"], "document_replaced",
        "{error}"
    );
    assert_eq!(error["data"]["remediation"]["action"], "observe", "{error}");
}

/// The text `browser.read` finds at `selector` (a form control's whole value).
fn read_text(agent: &mut Agent, target: &Value, selector: &str) -> String {
    let read = agent.tool("browser.read", Some(target), json!({"selector": selector}));
    read["text"].as_str().unwrap_or_default().to_owned()
}

#[test]
fn an_agent_performs_eight_actions_from_one_observation() {
    let rig = Rig::start();
    let (mut agent, target) = form(&rig);
    // One Observation; every action below uses its refs, though each action makes a new
    // Observation and a tab keeps only the last 4 whole: a ref lives as long as its document.
    let plan = observe(&mut agent, &target);
    let r = |role: Option<&str>, name: &str| find_ref(&plan, role, name);
    let steps = [
        ("browser.click", r(Some("checkbox"), "I agree"), json!({})),
        (
            "browser.type",
            r(Some("textbox"), "Email"),
            json!({"text": "me@example.com", "mode": "fill"}),
        ),
        (
            "browser.dropdown.select",
            r(Some("combobox"), "Country"),
            json!({"labels": ["Germany"]}),
        ),
        ("browser.click", r(Some("radio"), "Pro"), json!({})),
        ("browser.click", r(Some("button"), "Bold"), json!({})),
        (
            "browser.type",
            r(None, "Notes"),
            json!({"text": "planned ahead"}),
        ),
        ("browser.press", r(None, "Controlled"), json!({"key": "a"})),
        ("browser.click", r(Some("button"), "Submit"), json!({})),
    ];
    for (number, (tool, element_ref, extra)) in steps.into_iter().enumerate() {
        let done = act(&mut agent, &target, tool, &plan, element_ref, extra);
        assert_ne!(
            done["observationId"], plan["observationId"],
            "action {number} made a new Observation"
        );
        assert_ne!(
            done["evidence"]["status"], "mismatch",
            "action {number} ({tool}): {}",
            done["evidence"]
        );
    }
    // Every effect, read back from the page.
    assert_eq!(read_text(&mut agent, &target, "#email"), "me@example.com");
    assert_eq!(read_text(&mut agent, &target, "#country"), "Germany");
    assert_eq!(read_text(&mut agent, &target, "#notes"), "planned ahead");
    assert_eq!(read_text(&mut agent, &target, "#controlled"), "A");
    assert_eq!(
        read_text(&mut agent, &target, "#status"),
        "submitted:me@example.com"
    );
    let after = observe(&mut agent, &target);
    assert_eq!(
        element(&after, r(Some("checkbox"), "I agree"))["checked"],
        true
    );
    assert_eq!(element(&after, r(Some("radio"), "Pro"))["checked"], true);
    assert_eq!(element(&after, r(Some("radio"), "Free"))["checked"], false);
    assert_eq!(element(&after, r(Some("button"), "Bold"))["pressed"], true);
    // The first Observation's refs name the same elements in the later ones.
    assert_eq!(
        element(&after, r(Some("textbox"), "Email"))["value"],
        "me@example.com"
    );

    // Still never another element: an element that left the document is stale_ref, so is a
    // ref the document never handed out, and once a later Observation saw another document
    // every earlier ref is stale_ref with reason document_replaced.
    let vanish = r(Some("button"), "Vanish");
    act(
        &mut agent,
        &target,
        "browser.click",
        &plan,
        vanish,
        json!({}),
    );
    let (code, error) = agent.tool_err(
        "browser.click",
        Some(&target),
        json!({"observationId": plan["observationId"], "ref": vanish}),
    );
    assert_eq!(code, "stale_ref", "{error}");
    let (code, error) = agent.tool_err(
        "browser.click",
        Some(&target),
        json!({"observationId": plan["observationId"], "ref": 99999}),
    );
    assert_eq!(code, "stale_ref", "{error}");
    assert_eq!(error["data"]["context"]["reason"], "ref_not_in_observation");
    agent.tool(
        "browser.navigate",
        Some(&target),
        json!({"action": "reload"}),
    );
    observe(&mut agent, &target);
    let (code, error) = agent.tool_err(
        "browser.click",
        Some(&target),
        json!({"observationId": plan["observationId"], "ref": r(Some("button"), "Bold")}),
    );
    assert_eq!(code, "stale_ref", "{error}");
    assert_eq!(
        error["data"]["context"]["reason"], "document_replaced",
        "{error}"
    );
}

#[test]
fn typing_is_guarded_and_verified() {
    let rig = Rig::start();
    let (mut agent, target) = form(&rig);
    let observation = observe(&mut agent, &target);
    let typed = act(
        &mut agent,
        &target,
        "browser.type",
        &observation,
        find_ref(&observation, Some("textbox"), "Email"),
        json!({"text": "me@example.com"}),
    );
    let evidence = &typed["evidence"];
    assert_eq!(evidence["status"], "verified", "{evidence}");
    assert_eq!(evidence["beforeLength"], 3);
    assert_eq!(evidence["expectedLength"], 14);
    assert_eq!(evidence["afterLength"], 14);
    assert_eq!(
        element(&typed, find_ref(&typed, Some("textbox"), "Email"))["value"],
        "me@example.com"
    );
    // Password: lengths only, never the value.
    let fresh = typed.clone();
    let pw = act(
        &mut agent,
        &target,
        "browser.type",
        &fresh,
        find_ref(&fresh, None, "Password"),
        json!({"text": "hunter22"}),
    );
    assert_eq!(pw["evidence"]["sensitive"], true);
    assert_eq!(pw["evidence"]["afterLength"], 8);
    assert!(!pw.to_string().contains("hunter22"));
    // Textarea and contenteditable.
    let fresh = pw.clone();
    let notes = act(
        &mut agent,
        &target,
        "browser.type",
        &fresh,
        find_ref(&fresh, None, "Notes"),
        json!({"text": "line"}),
    );
    assert_eq!(
        notes["evidence"]["status"], "verified",
        "{}",
        notes["evidence"]
    );
    let fresh = notes.clone();
    let editor = act(
        &mut agent,
        &target,
        "browser.type",
        &fresh,
        find_ref(&fresh, None, "Editor"),
        json!({"text": "world"}),
    );
    assert_eq!(editor["evidence"]["kind"], "contenteditable");
    // Date input through the native setter.
    let fresh = editor.clone();
    let date = act(
        &mut agent,
        &target,
        "browser.type",
        &fresh,
        find_ref(&fresh, None, "Date"),
        json!({"text": "2026-11-30"}),
    );
    assert_eq!(
        date["evidence"]["status"], "verified",
        "{}",
        date["evidence"]
    );
    assert_eq!(date["evidence"]["method"], "native_setter");
    // A controlled input that rewrites its value: mismatch, and require_exact fails.
    let fresh = date.clone();
    let controlled = act(
        &mut agent,
        &target,
        "browser.type",
        &fresh,
        find_ref(&fresh, None, "Controlled"),
        json!({"text": "abcdef"}),
    );
    assert_eq!(
        controlled["evidence"]["status"], "mismatch",
        "{}",
        controlled["evidence"]
    );
    let fresh = controlled.clone();
    let strict = agent.call(
        "browser.type",
        Some(&target),
        json!({"observationId": fresh["observationId"], "ref": find_ref(&fresh, None, "Controlled"), "text": "xyz1", "verification": "require_exact"}),
    );
    assert_eq!(
        strict["error"]["data"]["code"], "verification_failed",
        "{strict}"
    );
    // A page that moves focus mid-typing: unknown_outcome with focus_changed, the rest stopped.
    let fresh = observe(&mut agent, &target);
    let thief = agent.call("browser.type", Some(&target), json!({"observationId": fresh["observationId"], "ref": find_ref(&fresh, None, "Thief"), "text": "abcdef"}));
    let error = &thief["error"]["data"];
    assert_eq!(error["code"], "unknown_outcome", "{thief}");
    assert_eq!(error["context"]["reason"], "focus_changed");
    assert_eq!(error["context"]["dispatchedSteps"], 3);
    assert_eq!(error["context"]["remainingStepsStopped"], true);
    assert!(
        error["context"]["step"]
            .as_str()
            .unwrap()
            .starts_with("type_character:")
    );
    // Submit with Enter through the form.
    let fresh = observe(&mut agent, &target);
    let submitted = act(
        &mut agent,
        &target,
        "browser.type",
        &fresh,
        find_ref(&fresh, Some("textbox"), "Email"),
        json!({"text": "a@b.c", "submit": true}),
    );
    let read = agent.tool(
        "browser.read",
        Some(&target),
        json!({"selector": "#status"}),
    );
    assert_eq!(read["text"], "submitted:a@b.c", "{}", submitted["evidence"]);
}

#[test]
fn press_scroll_and_dropdowns() {
    let rig = Rig::start();
    let (mut agent, target) = form(&rig);
    let observation = observe(&mut agent, &target);
    // Tab moves focus.
    let email = find_ref(&observation, Some("textbox"), "Email");
    let pressed = act(
        &mut agent,
        &target,
        "browser.press",
        &observation,
        email,
        json!({"key": "Tab"}),
    );
    assert!(
        pressed["evidence"]["effects"]
            .as_array()
            .unwrap()
            .contains(&json!("focus_changed")),
        "{}",
        pressed["evidence"]
    );
    // A key with no visible effect.
    let nothing = agent.tool("browser.press", Some(&target), json!({"key": "Shift"}));
    assert_eq!(nothing["evidence"]["status"], "unavailable");
    assert_eq!(nothing["evidence"]["reason"], "no_observable_effect");
    // Native select: options, then select by label and verify.
    let fresh = observe(&mut agent, &target);
    let country = find_ref(&fresh, Some("combobox"), "Country");
    let options = act(
        &mut agent,
        &target,
        "browser.dropdown.options",
        &fresh,
        country,
        json!({}),
    );
    assert_eq!(options["kind"], "native");
    assert_eq!(options["options"].as_array().unwrap().len(), 3);
    let selected = act(
        &mut agent,
        &target,
        "browser.dropdown.select",
        &fresh,
        country,
        json!({"labels": ["Germany"]}),
    );
    assert_eq!(
        selected["evidence"]["status"], "verified",
        "{}",
        selected["evidence"]
    );
    assert!(
        selected["evidence"]["effects"]
            .as_array()
            .unwrap()
            .contains(&json!("selected_changed"))
    );
    // Mistakes are refused before anything is selected: invalid_params naming the options,
    // never unknown_outcome.
    let bold = find_ref(&fresh, Some("button"), "Bold");
    for (element, arguments, reason) in [
        (country, json!({"values": ["xx"]}), "option_not_found"),
        (country, json!({"labels": ["Atlantis"]}), "option_not_found"),
        (country, json!({"values": ["fr", "de"]}), "too_many_values"),
        (bold, json!({"values": ["fr"]}), "not_a_select"),
    ] {
        let mut call = json!({"observationId": fresh["observationId"], "ref": element});
        call.as_object_mut()
            .unwrap()
            .extend(arguments.as_object().unwrap().clone());
        let (code, error) = agent.tool_err("browser.dropdown.select", Some(&target), call);
        assert_eq!(code, "invalid_params", "{error}");
        let context = &error["data"]["context"];
        assert_eq!(context["reason"], reason, "{error}");
        if element == country {
            let available = context["available"].as_array().unwrap();
            assert!(
                available
                    .iter()
                    .any(|o| o["value"] == "fr" && o["label"] == "France"),
                "{error}"
            );
        }
    }
    let options = act(
        &mut agent,
        &target,
        "browser.dropdown.options",
        &fresh,
        country,
        json!({}),
    );
    let chosen: Vec<&Value> = options["options"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|o| o["selected"] == true)
        .map(|o| &o["value"])
        .collect();
    assert_eq!(chosen, [&json!("de")], "nothing was selected: {options}");
    // Scroll the page, by text match, and a container.
    let down = agent.tool(
        "browser.scroll",
        Some(&target),
        json!({"direction": "down", "amount": 500}),
    );
    assert_eq!(down["evidence"]["status"], "verified");
    assert_eq!(down["evidence"]["after"]["y"], 500);
    assert!(
        down["page"]["scroll"]["y"].as_u64().unwrap() >= 500
            || down["page"].to_string().contains("500"),
        "{}",
        down["page"]
    );
    let to_text = agent.tool(
        "browser.scroll",
        Some(&target),
        json!({"text": "Bottom marker"}),
    );
    assert_eq!(to_text["evidence"]["kind"], "text");
    assert!(
        to_text["evidence"]["after"]["y"].as_i64().unwrap() > 2000,
        "{}",
        to_text["evidence"]
    );
    let container = agent.tool(
        "browser.scroll",
        Some(&target),
        json!({"selector": "#box", "direction": "down", "amount": 100}),
    );
    assert_eq!(
        container["evidence"]["status"], "verified",
        "{}",
        container["evidence"]
    );
    let (code, _) = agent.tool_err(
        "browser.scroll",
        Some(&target),
        json!({"text": "no such text anywhere"}),
    );
    assert_eq!(code, "invalid_params");
    // Reading tools.
    let search = agent.tool(
        "browser.search",
        Some(&target),
        json!({"query": "bottom marker"}),
    );
    assert_eq!(search["matches"].as_array().unwrap().len(), 1);
    let found = agent.tool(
        "browser.elements.find",
        Some(&target),
        json!({"selector": "button"}),
    );
    assert!(found["total"].as_u64().unwrap() >= 8);
    let (code, _) = agent.tool_err(
        "browser.elements.find",
        Some(&target),
        json!({"selector": "[[["}),
    );
    assert_eq!(code, "invalid_params");
}

#[test]
fn dialogs_are_explicit_and_out_of_band_and_popups_are_managed() {
    let rig = Rig::start();
    let (mut agent, target) = form(&rig);
    for (name, action, prompt, expected) in [
        ("Confirm", "dismiss", None, "confirm:false"),
        ("Prompt", "accept", Some("Ada"), "prompt:Ada"),
        ("Alert", "accept", None, ""),
    ] {
        let observation = observe(&mut agent, &target);
        let reference = find_ref(&observation, Some("button"), name);
        let id = agent.bridge.request(
            "tools/call",
            json!({"name": "browser.click", "arguments": {"observationId": observation["observationId"], "ref": reference}, "workspaceId": agent.workspace_id, "leaseId": agent.lease_id, "targetId": target}),
        );
        let response = agent.bridge.response(&id);
        let evidence = &response["result"]["result"]["evidence"];
        assert!(evidence.is_object(), "{name}: {response}");
        assert!(
            evidence["effects"]
                .as_array()
                .unwrap()
                .contains(&json!("dialog_opened")),
            "{name}: {response}"
        );
        // The dialog stays open: never auto-accepted.
        let listed = agent.tool("browser.dialogs.list", None, json!({}));
        let dialog = listed["dialogs"][0].clone();
        assert_eq!(dialog["targetId"], target, "{listed}");
        assert_eq!(dialog["type"], name.to_lowercase());
        let mut seen = Vec::new();
        assert!(
            wait_until(Duration::from_secs(5), || {
                seen.extend(agent.events());
                seen.iter().any(|e| {
                    e["type"] == "dialog"
                        && e["payload"]["state"] == "opened"
                        && e["payload"]["dialogId"] == dialog["dialogId"]
                })
            }),
            "dialog opened event journaled: {seen:?}"
        );
        if name == "Alert" {
            // A pending dialog stalls no read: each answers at once with the dialog named,
            // long before its own generous deadline.
            for (tool, arguments) in [
                ("browser.observe", json!({})),
                ("browser.read", json!({})),
                ("browser.capture", json!({})),
            ] {
                let response = agent.bridge.call(
                    "tools/call",
                    json!({"name": tool, "arguments": arguments, "workspaceId": agent.workspace_id, "leaseId": agent.lease_id, "targetId": target, "deadlineMs": 60000}),
                );
                let data = &response["error"]["data"];
                assert_eq!(data["code"], "dialog_open", "{tool}: {response}");
                assert_eq!(data["context"]["dialogOpen"], true, "{tool}: {response}");
                assert_eq!(data["context"]["dialogId"], dialog["dialogId"], "{tool}");
                assert_eq!(data["context"]["dialogType"], "alert", "{tool}");
                assert_eq!(data["remediation"]["action"], "list_dialogs", "{tool}");
            }
        }
        let mut arguments = json!({"dialogId": dialog["dialogId"], "action": action});
        if let Some(prompt) = prompt {
            arguments["promptText"] = json!(prompt);
        }
        agent.tool("browser.dialogs.respond", None, arguments);
        assert!(wait_until(Duration::from_secs(5), || agent.tool(
            "browser.dialogs.list",
            None,
            json!({})
        )["dialogs"]
            .as_array()
            .unwrap()
            .is_empty()));
        if !expected.is_empty() {
            let status = agent.tool(
                "browser.read",
                Some(&target),
                json!({"selector": "#status"}),
            );
            assert_eq!(status["text"], expected);
        }
    }
    // A link with target=_blank opens a popup that becomes a managed tab of this Workspace.
    let observation = observe(&mut agent, &target);
    let popup = act(
        &mut agent,
        &target,
        "browser.click",
        &observation,
        find_ref(&observation, Some("link"), "Open popup"),
        json!({}),
    );
    assert!(
        popup["evidence"]["effects"]
            .as_array()
            .unwrap()
            .contains(&json!("popup_opened")),
        "{}",
        popup["evidence"]
    );
    let opened = agent.wait_event("popup.opened");
    assert_eq!(opened["payload"]["openerTargetId"], target);
    let tabs = agent.tabs();
    assert!(
        tabs.iter()
            .any(|t| t["targetId"] == opened["payload"]["targetId"] && t["managed"] == true)
    );
}

#[test]
fn custom_aria_combobox_through_fresh_observation_refs() {
    let rig = Rig::start();
    let mut agent = Agent::new(&rig, "com.example.combo");
    agent.connect();
    let target = agent.tool(
        "browser.open",
        None,
        json!({"url": rig.fixtures.url("/fixture/aria-combo")}),
    )["targetId"]
        .clone();
    let observation = observe(&mut agent, &target);
    let combo = find_ref(&observation, Some("combobox"), "Fruit");
    let options = act(
        &mut agent,
        &target,
        "browser.dropdown.options",
        &observation,
        combo,
        json!({}),
    );
    assert_eq!(options["kind"], "aria");
    let opened = act(
        &mut agent,
        &target,
        "browser.click",
        &observation,
        combo,
        json!({}),
    );
    assert_eq!(
        opened["evidence"]["status"], "verified",
        "{}",
        opened["evidence"]
    );
    assert!(
        opened["evidence"]["effects"]
            .as_array()
            .unwrap()
            .contains(&json!("expanded_changed"))
    );
    // The options are now refs of the fresh Observation; pick one and verify selection.
    let banana = find_ref(&opened, Some("option"), "Banana");
    let picked = act(
        &mut agent,
        &target,
        "browser.click",
        &opened,
        banana,
        json!({}),
    );
    assert_eq!(picked["evidence"]["kind"], "option");
    assert_eq!(
        picked["evidence"]["status"], "verified",
        "{}",
        picked["evidence"]
    );
    assert_eq!(picked["evidence"]["selected"], true);
    // A native-only select by label is refused on a custom listbox.
    let (code, error) = agent.tool_err("browser.dropdown.select", Some(&target), json!({"observationId": picked["observationId"], "ref": find_ref(&picked, Some("combobox"), "Fruit"), "labels": ["Apple"]}));
    assert_eq!(code, "element_not_actionable", "{error}");
}

#[test]
fn hints_on_real_pages_and_auth_transitions() {
    let rig = Rig::start();
    let mut agent = Agent::new(&rig, "com.example.hints");
    agent.connect();
    let hint = |observation: &Value, code: &str| {
        observation["hints"]
            .as_array()
            .unwrap()
            .iter()
            .find(|h| h["code"] == code)
            .cloned()
    };
    let target = agent.tool(
        "browser.open",
        None,
        json!({"url": rig.fixtures.url("/fixture/plain")}),
    )["targetId"]
        .clone();
    let plain = observe(&mut agent, &target);
    assert!(
        hint(&plain, "authentication_surface").is_none(),
        "{}",
        plain["hints"]
    );
    agent.tool(
        "browser.navigate",
        Some(&target),
        json!({"action": "goto", "url": rig.fixtures.url("/fixture/login")}),
    );
    let login = observe(&mut agent, &target);
    let auth = hint(&login, "authentication_surface").expect("auth hint on the login page");
    assert_eq!(auth["state"], "entered", "{auth}");
    assert_eq!(auth["recommendedAction"], "authenticate_or_ask_user");
    let count = login["elements"].as_array().unwrap().len() as u64;
    assert!(
        auth["refs"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| (1..=count).contains(&r.as_u64().unwrap())),
        "refs belong to this Observation"
    );
    let again = observe(&mut agent, &target);
    assert_eq!(
        hint(&again, "authentication_surface").unwrap()["state"],
        "present"
    );
    agent.tool(
        "browser.navigate",
        Some(&target),
        json!({"action": "goto", "url": rig.fixtures.url("/fixture/plain")}),
    );
    let left = observe(&mut agent, &target);
    assert_eq!(
        hint(&left, "authentication_surface").expect("left hint")["state"],
        "left"
    );

    for (fixture, code) in [
        ("modal", "modal_overlay"),
        ("autocomplete", "autocomplete"),
        ("filters", "filter_controls"),
        ("blocked", "access_blocked"),
    ] {
        agent.tool(
            "browser.navigate",
            Some(&target),
            json!({"action": "goto", "url": rig.fixtures.url(&format!("/fixture/{fixture}"))}),
        );
        let observation = observe(&mut agent, &target);
        let found = hint(&observation, code)
            .unwrap_or_else(|| panic!("{fixture}: no {code} hint in {}", observation["hints"]));
        assert!(
            found["source"].is_string()
                && found["confidence"].is_string()
                && found["recommendedAction"].is_string(),
            "{found}"
        );
        if code == "modal_overlay" {
            assert_eq!(found["blocking"], true);
        }
    }
}

#[test]
fn a_connection_without_action_input_sees_and_runs_no_input_tools() {
    let rig = Rig::start();
    let mut bridge = rig.home.spawn_bridge();
    let mut params = support::initialize_params("com.example.readonly", "r", (1, 1));
    params["requestedCapabilities"] = json!([
        "browser.control",
        "workspace.manage",
        "observation.read",
        "event.read"
    ]);
    bridge.ok("initialize", params);
    let tools = bridge.ok("tools/list", json!({}))["tools"]
        .as_array()
        .unwrap()
        .clone();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert!(names.contains(&"browser.observe"));
    for input_tool in [
        "browser.click",
        "browser.type",
        "browser.press",
        "browser.keyboard",
        "browser.dropdown.select",
        "browser.dialogs.respond",
    ] {
        assert!(
            !names.contains(&input_tool),
            "{input_tool} advertised without action.input"
        );
    }
    assert!(tools.iter().all(|t| t["capability"] != "action.input"));
    let ws = bridge.ok("workspaces/create", json!({}))["workspace"]["id"].clone();
    let lease = bridge.ok("leases/create", json!({"workspaceId": ws}))["lease"]["id"].clone();
    let (code, _) = bridge.err("tools/call", json!({"name": "browser.click", "arguments": {"x": 1, "y": 1}, "workspaceId": ws, "leaseId": lease, "targetId": "target:x"}));
    assert_eq!(code, "capability_denied");
}
