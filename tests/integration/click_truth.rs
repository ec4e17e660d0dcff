//! Process tests of honest clicks against a real headless Chromium: a click is `verified` only
//! when a trusted click reached its element (an interstitial shown on pointerdown, a page's
//! capture-phase `stopImmediatePropagation` and a `preventDefault` must not pass), the element
//! must be actionable first (a moving button is clicked once it stops, one that never stops is
//! `not_stable`; disabled and covered elements are refused), clicks land inside CSS-transformed
//! iframes, same-site (in-process) and cross-site (`localhost` vs `127.0.0.1`, out-of-process)
//! alike, an overlay above a frame is seen, and a tab that is not in front is clicked the same
//! (also inside a transformed out-of-process frame), and on a page too long for a speculative
//! closing Observation the records are read on their own and judge the same.
//! Every case checks the page's own record of what was clicked.

use crate::support;

use std::time::Duration;

use serde_json::{Value, json};
use support::chromium::OwnCdp;
use support::rig::{Agent, Rig, find_ref};
use support::wait_until;

fn observe(agent: &mut Agent, target: &Value) -> Value {
    agent.tool("browser.observe", Some(target), json!({"limit": 500}))
}

/// `browser.click` on a ref, with an optional Command deadline; the raw response.
fn click(
    agent: &mut Agent,
    target: &Value,
    observation: &Value,
    name: &str,
    deadline_ms: Option<u64>,
) -> Value {
    let element_ref = find_ref(observation, "button", name);
    let mut params = json!({
        "name": "browser.click",
        "arguments": {"observationId": observation["observationId"], "ref": element_ref},
        "workspaceId": agent.workspace_id,
        "leaseId": agent.lease_id,
        "targetId": target,
    });
    if let Some(deadline_ms) = deadline_ms {
        params["deadlineMs"] = json!(deadline_ms);
    }
    agent.bridge.call("tools/call", params)
}

/// The result of a click that must succeed as a call (whatever its evidence says).
fn clicked(response: &Value) -> Value {
    let outcome = response
        .get("result")
        .unwrap_or_else(|| panic!("click failed: {response}"));
    assert_eq!(outcome["command"]["status"], "completed", "{response}");
    outcome["result"].clone()
}

/// `data` of a click that must fail.
fn refused(response: &Value) -> Value {
    response
        .get("error")
        .unwrap_or_else(|| panic!("click unexpectedly succeeded: {response}"))["data"]
        .clone()
}

/// The page's own record of clicks (`#log`) in the selected frame.
fn page_log(agent: &mut Agent, target: &Value) -> String {
    agent.tool("browser.read", Some(target), json!({"selector": "#log"}))["text"]
        .as_str()
        .unwrap()
        .trim()
        .to_owned()
}

#[test]
fn clicks_are_verified_only_when_they_reach_an_actionable_target() {
    let rig = Rig::start();
    let mut agent = Agent::new(&rig, "com.example.clicktruth");
    agent.connect();
    let url = rig.fixtures.url("/fixture/click-truth");
    let opened = agent.tool("browser.open", None, json!({"url": url}));
    let target = opened["targetId"].clone();
    let observation = observe(&mut agent, &target);

    // A plain button: the click reached it.
    let plain = clicked(&click(&mut agent, &target, &observation, "Plain", None));
    assert_eq!(
        plain["evidence"]["status"], "verified",
        "{}",
        plain["evidence"]
    );
    assert_eq!(plain["evidence"]["delivery"], "reached");
    // Its handler wrote the page's log: that is the effect seen, not the focus it took.
    assert!(
        plain["evidence"]["effects"]
            .as_array()
            .unwrap()
            .contains(&json!("content_changed")),
        "{}",
        plain["evidence"]
    );
    assert_eq!(page_log(&mut agent, &target), "plain:visible");

    // An interstitial appears on pointerdown: the release lands on it, the button never gets
    // its click (its focus may still move: that proves nothing).
    let trap = clicked(&click(&mut agent, &target, &plain, "Overlay trap", None));
    assert_eq!(
        trap["evidence"]["status"], "mismatch",
        "{}",
        trap["evidence"]
    );
    assert_eq!(trap["evidence"]["reason"], "click_intercepted");
    assert_eq!(trap["evidence"]["delivery"], "intercepted");
    assert!(!page_log(&mut agent, &target).contains("trap"));

    // The page's capture listener stops the click before the button: not verified. The
    // interstitial of the previous click may still cover the page; the click waits for it.
    let swallowed = clicked(&click(&mut agent, &target, &trap, "Swallowed", None));
    assert_eq!(
        swallowed["evidence"]["status"], "mismatch",
        "{}",
        swallowed["evidence"]
    );
    assert_eq!(swallowed["evidence"]["reason"], "propagation_stopped");
    assert!(!page_log(&mut agent, &target).contains("swallowed"));

    // The form's handler cancels the submission: the click reached the button, its default
    // action did not happen, nothing else changed but focus.
    let prevented = clicked(&click(&mut agent, &target, &swallowed, "No submit", None));
    assert_eq!(
        prevented["evidence"]["status"], "mismatch",
        "{}",
        prevented["evidence"]
    );
    assert_eq!(prevented["evidence"]["reason"], "default_prevented");
    assert_eq!(prevented["evidence"]["defaultPrevented"], true);
    assert!(page_log(&mut agent, &target).ends_with("nosubmit:prevented"));
    assert_eq!(
        rig.fixtures.hits("/page/submitted?") + rig.fixtures.hits("/page/submitted"),
        0,
        "the form was submitted"
    );

    // A moving button is clicked once it stops moving (the site's animation ends while the click
    // waits), exactly once.
    let fresh = observe(&mut agent, &target);
    let moved = std::thread::scope(|scope| {
        scope.spawn(|| {
            std::thread::sleep(Duration::from_millis(800));
            let mut own = OwnCdp::connect(&rig.chromium);
            own.evaluate_in_page("/fixture/click-truth", "stopMoving()");
        });
        click(&mut agent, &target, &fresh, "Mover", None)
    });
    let moved = clicked(&moved);
    assert_eq!(
        moved["evidence"]["status"], "verified",
        "{}",
        moved["evidence"]
    );
    let log = page_log(&mut agent, &target);
    assert!(log.ends_with(",mover:still"), "{log}");
    assert!(!log.contains("mover:moving"), "{log}");

    // A button that never stops: not_stable when the deadline passes, and never clicked.
    let jitter = refused(&click(&mut agent, &target, &moved, "Jitter", Some(2500)));
    assert_eq!(jitter["code"], "element_not_actionable", "{jitter}");
    assert_eq!(jitter["context"]["reason"], "not_stable", "{jitter}");
    assert_eq!(jitter["retryable"], true, "waiting longer could help");

    // Disabled and covered: refused, retryable, nothing clicked; within the 5 s wait the docs
    // name for a ref action (observation.md, "Click evidence"), not the Command's 30 s deadline.
    const DOCUMENTED_WAIT_MS: u64 = 5000;
    let disabled = refused(&click(&mut agent, &target, &moved, "Disabled", None));
    assert_eq!(disabled["code"], "element_not_actionable", "{disabled}");
    assert_eq!(disabled["context"]["reason"], "disabled", "{disabled}");
    assert_eq!(disabled["retryable"], true);
    let waited = disabled["context"]["waitedMs"].as_u64().expect("waitedMs");
    assert!(waited <= DOCUMENTED_WAIT_MS, "{disabled}");
    // `actionableTimeoutMs` chooses the bound: the wait ends after its 600 ms, far short of
    // the default 5 s (the last check may finish a little past the bound on a loaded machine).
    let asked = json!({"observationId": moved["observationId"], "ref": find_ref(&moved, "button", "Disabled"), "actionableTimeoutMs": 600});
    let (code, shorter) = agent.tool_err("browser.click", Some(&target), asked);
    assert_eq!(code, "element_not_actionable", "{shorter}");
    let waited = shorter["data"]["context"]["waitedMs"]
        .as_u64()
        .expect("waitedMs");
    assert!(waited < 2_000, "{shorter}");
    let covered = refused(&click(&mut agent, &target, &moved, "Covered", None));
    let waited = covered["context"]["waitedMs"].as_u64().expect("waitedMs");
    assert!(waited <= DOCUMENTED_WAIT_MS, "{covered}");
    assert_eq!(covered["code"], "element_not_actionable", "{covered}");
    assert_eq!(covered["context"]["reason"], "covered", "{covered}");
    assert_eq!(covered["context"]["occludedBy"], "div#shield", "{covered}");
    assert_eq!(covered["retryable"], true);
    assert_eq!(covered["remediation"]["action"], "resolve_overlay_first");
    let log = page_log(&mut agent, &target);
    for never in ["jitter", "disabled", "covered", "shield"] {
        assert!(!log.contains(never), "{never} was clicked: {log}");
    }

    // A tab that is not in front: a popup it opens comes in front of it in its window (a new
    // managed tab would open in a window of its own). Focus emulation keeps the page behaving
    // as focused and visible there (docs/cdp.md, "Background driving"); the click works the same.
    let mut own = OwnCdp::connect(&rig.chromium);
    own.evaluate_in_page(
        "/fixture/click-truth",
        "window.open('/page/front', '_blank', 'noopener'), true",
    );
    assert!(
        wait_until(Duration::from_secs(10), || {
            own.pages()
                .iter()
                .any(|(_, url)| url.ends_with("/page/front"))
        }),
        "the popup never opened"
    );
    let behind = observe(&mut agent, &target);
    let plain = clicked(&click(&mut agent, &target, &behind, "Plain", None));
    assert_eq!(
        plain["evidence"]["status"], "verified",
        "{}",
        plain["evidence"]
    );
    let log = page_log(&mut agent, &target);
    assert!(log.ends_with(",plain:visible"), "{log}");

    // A page too long for an action to take its closing Observation speculatively (the last
    // Observation returned more than 2,000 elements): the click's record and fill's guard record
    // are read by calls of their own, and judge the same.
    let url = rig.fixtures.url("/fixture/click-truth-long");
    let long = agent.tool("browser.open", None, json!({"url": url}))["targetId"].clone();
    let whole = |agent: &mut Agent| {
        let observation = agent.tool("browser.observe", Some(&long), json!({"limit": 5000}));
        assert!(
            observation["elements"].as_array().unwrap().len() > 2_000,
            "{}",
            observation["truncated"]
        );
        observation
    };
    for (name, status, delivery) in [
        ("Plain", "verified", "reached"),
        ("Overlay trap", "mismatch", "intercepted"),
        ("Swallowed", "mismatch", "stopped"),
    ] {
        let seen = whole(&mut agent);
        let evidence = clicked(&click(&mut agent, &long, &seen, name, None))["evidence"].clone();
        assert_eq!(
            (evidence["status"].as_str(), evidence["delivery"].as_str()),
            (Some(status), Some(delivery)),
            "{name}: {evidence}"
        );
    }
    assert_eq!(page_log(&mut agent, &long), "plain");
    let seen = whole(&mut agent);
    let coupon = find_ref(&seen, "textbox", "Coupon code");
    let filled = agent.tool(
        "browser.type",
        Some(&long),
        json!({"observationId": seen["observationId"], "ref": coupon, "text": "SPRING \u{1F338}", "mode": "fill"}),
    );
    assert_eq!(
        filled["evidence"]["status"], "verified",
        "{}",
        filled["evidence"]
    );
    assert_eq!(
        filled["evidence"]["afterLength"], 8,
        "{}",
        filled["evidence"]
    );
    assert_eq!(coupon_value(&mut agent, &long), "SPRING \u{1F338}");
}

/// The coupon field's value on the long page, read back from an Observation.
fn coupon_value(agent: &mut Agent, target: &Value) -> String {
    let observation = agent.tool("browser.observe", Some(target), json!({"limit": 20}));
    let coupon = find_ref(&observation, "textbox", "Coupon code");
    observation["elements"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["ref"] == coupon)
        .and_then(|e| e["value"].as_str())
        .unwrap_or_default()
        .to_owned()
}

#[test]
fn clicks_land_inside_transformed_frames_in_and_out_of_process() {
    let rig = Rig::start();
    let mut agent = Agent::new(&rig, "com.example.clickframes");
    agent.connect();
    let same = rig.fixtures.url("/fixture/click-frame-child");
    let cross = format!(
        "http://localhost:{}/fixture/click-frame-child",
        rig.fixtures.port
    );
    let url = format!(
        "{}#rotated-same={same}&scaled-same={same}&rotated-cross={cross}&scaled-cross={cross}&nested-cross={cross}&veiled={cross}",
        rig.fixtures.url("/fixture/click-frames")
    );
    let opened = agent.tool("browser.open", None, json!({"url": url}));
    let target = opened["targetId"].clone();
    let mut frames = Vec::new();
    assert!(
        wait_until(Duration::from_secs(15), || {
            let listed = agent.tool("browser.frames.list", Some(&target), json!({}));
            frames = listed["frames"].as_array().unwrap().clone();
            frames.len() == 7
                && frames.iter().all(|f| {
                    f["main"] == true || f["url"].as_str().unwrap_or("").ends_with("child")
                })
        }),
        "frames never loaded: {frames:?}"
    );
    let frame = |name: &str| {
        frames
            .iter()
            .find(|f| f["name"] == name)
            .unwrap_or_else(|| panic!("no frame {name}"))
            .clone()
    };
    for (name, out_of_process) in [
        ("rotated-same", false),
        ("scaled-same", false),
        ("rotated-cross", true),
        ("scaled-cross", true),
        ("nested-cross", true),
    ] {
        let child = frame(name);
        assert_eq!(child["outOfProcess"], out_of_process, "{child}");
        agent.tool(
            "browser.frames.select",
            Some(&target),
            json!({"frameId": child["frameId"]}),
        );
        let observation = observe(&mut agent, &target);
        let result = clicked(&click(&mut agent, &target, &observation, "Target", None));
        assert_eq!(
            result["evidence"]["status"], "verified",
            "{name}: {}",
            result["evidence"]
        );
        assert_eq!(result["evidence"]["delivery"], "reached", "{name}");
        // The frame's own record: the target, and no decoy.
        assert_eq!(page_log(&mut agent, &target), "target", "{name}");
        // Coordinates of the frame's viewport are mapped the same way: the target's centre.
        let at = agent.tool("browser.click", Some(&target), json!({"x": 235, "y": 152}));
        assert_eq!(at["evidence"]["kind"], "coordinates");
        assert_eq!(page_log(&mut agent, &target), "target,target", "{name}");
    }

    // Behind another tab: the parent must scroll the rotated out-of-process frame back into view
    // first (the browser's own hit-test data of a background tab does not follow that scroll).
    agent.tool(
        "browser.open",
        None,
        json!({"url": rig.fixtures.url("/page/front")}),
    );
    let rotated = frame("rotated-cross");
    agent.tool(
        "browser.frames.select",
        Some(&target),
        json!({"frameId": rotated["frameId"]}),
    );
    let observation = observe(&mut agent, &target);
    let behind = clicked(&click(&mut agent, &target, &observation, "Target", None));
    assert_eq!(
        behind["evidence"]["status"], "verified",
        "{}",
        behind["evidence"]
    );
    assert_eq!(page_log(&mut agent, &target), "target,target,target");

    // An overlay in the parent above a frame: the parent's hit test sees it, nothing is sent.
    let veiled = frame("veiled");
    agent.tool(
        "browser.frames.select",
        Some(&target),
        json!({"frameId": veiled["frameId"]}),
    );
    let observation = observe(&mut agent, &target);
    let covered = refused(&click(
        &mut agent,
        &target,
        &observation,
        "Target",
        Some(1500),
    ));
    assert_eq!(covered["code"], "element_not_actionable", "{covered}");
    assert_eq!(covered["context"]["reason"], "covered", "{covered}");
    assert_eq!(covered["context"]["occludedBy"], "div#veil", "{covered}");
    assert_eq!(page_log(&mut agent, &target), "");
}
