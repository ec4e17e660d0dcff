//! Process tests of hostile pages against a real headless Chromium: a page that replaces
//! `JSON.stringify`, defines `Object.prototype.toJSON` and overrides its `document.title`,
//! `readyState`, `history` and `querySelector` still has its real URL and title reported and
//! loads normally; a megabyte title and a 300,000-character URL stay bounded (with a marker)
//! even at a 64 KiB negotiated result limit; password fields marked only by `autocomplete`
//! never have their values returned; a page that keeps reloading itself gets observe and read
//! answered with a result or a retryable `document_changed`, never raw protocol text.

use crate::support;

use std::time::Duration;

use serde_json::{Value, json};
use support::rig::{Agent, Rig};
use support::{TEST_LEASE_TTL_MS, initialize_params, wait_until};

/// The marker a cut title or URL ends with (docs/observation.md, "Bounded page strings").
const MARKER: char = '\u{2026}';

fn find_ref(observation: &Value, name: &str) -> u64 {
    observation["elements"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"].as_str().unwrap_or("").contains(name))
        .unwrap_or_else(|| panic!("no element named {name:?} in {}", observation["elements"]))
        ["ref"]
        .as_u64()
        .unwrap()
}

fn element<'a>(observation: &'a Value, name: &str) -> &'a Value {
    let element_ref = find_ref(observation, name);
    // Refs are stable per document, not positions.
    observation["elements"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["ref"] == element_ref)
        .unwrap_or_else(|| panic!("no ref {element_ref} in {}", observation["elements"]))
}

#[test]
fn a_spoofing_page_cannot_choose_what_the_broker_reports() {
    let rig = Rig::start();
    let mut agent = Agent::new(&rig, "com.example.hostile");
    agent.connect();
    let url = rig.fixtures.url("/fixture/spoof");

    // open completes (the page's readyState getter says "loading" forever) with the real values.
    let opened = agent.tool("browser.open", None, json!({"url": url}));
    assert_eq!(opened["url"], url, "{opened}");
    assert_eq!(opened["title"], "Real Title", "{opened}");
    assert_eq!(opened["loadState"], "complete");
    let target = opened["targetId"].clone();
    let tabs = agent.tabs();
    let mine = tabs.iter().find(|t| t["targetId"] == target).unwrap();
    assert_eq!(mine["url"], url);
    assert_eq!(mine["title"], "Real Title");
    assert!(
        !Value::Array(tabs.clone())
            .to_string()
            .contains("bank.example")
    );

    // Reading tools report the real document too.
    let observation = agent.tool("browser.observe", Some(&target), json!({}));
    assert_eq!(observation["url"], url);
    assert_eq!(observation["title"], "Real Title");
    let read = agent.tool("browser.read", Some(&target), json!({"selector": "#box"}));
    assert_eq!(read["text"], "Real body", "{read}");
    assert_eq!(read["title"], "Real Title");

    // The page's querySelector and getBoundingClientRect overrides cannot hide the clip.
    let capture = agent.tool(
        "browser.capture",
        Some(&target),
        json!({"selector": "#box"}),
    );
    assert!(capture["artifact"]["id"].is_string(), "{capture}");

    // History overrides in the page do not touch the browser's history navigation.
    let next = rig.fixtures.url("/page/two");
    let navigated = agent.tool(
        "browser.navigate",
        Some(&target),
        json!({"action": "goto", "url": next}),
    );
    assert_eq!(navigated["title"], "two");
    let back = agent.tool("browser.navigate", Some(&target), json!({"action": "back"}));
    assert_eq!(back["url"], url, "{back}");
    assert_eq!(back["title"], "Real Title");
    assert_eq!(back["loadState"], "complete");
    let reloaded = agent.tool(
        "browser.navigate",
        Some(&target),
        json!({"action": "reload"}),
    );
    assert_eq!(reloaded["title"], "Real Title", "{reloaded}");
    assert_eq!(reloaded["loadState"], "complete");

    // A link click leaves the page; the inventory follows to the real next document (its title
    // there is Chromium's target title, which is never a value the page's script forged).
    let observation = agent.tool("browser.observe", Some(&target), json!({}));
    let clicked = agent.tool(
        "browser.click",
        Some(&target),
        json!({"observationId": observation["observationId"], "ref": find_ref(&observation, "next")}),
    );
    let next_url = rig.fixtures.url("/page/next");
    assert!(
        wait_until(Duration::from_secs(15), || {
            agent
                .tabs()
                .iter()
                .any(|t| t["targetId"] == target && t["url"] == next_url)
        }),
        "the inventory shows the real next page: {:?} after {clicked}",
        agent.tabs()
    );
    // The URL changes at commit, the title once the document is parsed.
    let mut observation = Value::Null;
    assert!(
        wait_until(Duration::from_secs(15), || {
            observation = agent.tool("browser.observe", Some(&target), json!({}));
            observation["title"] == "next"
        }),
        "{observation}"
    );
    assert_eq!(observation["url"], next_url);
    let events = agent.events();
    assert!(
        events
            .iter()
            .filter(|e| e["type"] == "navigation" || e["type"] == "document.changed")
            .all(|e| !e.to_string().contains("bank.example")),
        "{events:?}"
    );
}

#[test]
fn autocomplete_password_fields_are_sensitive_in_every_reading_path() {
    let rig = Rig::start();
    let mut agent = Agent::new(&rig, "com.example.secrets");
    agent.connect();
    let opened = agent.tool(
        "browser.open",
        None,
        json!({"url": rig.fixtures.url("/fixture/spoof")}),
    );
    let target = opened["targetId"].clone();
    let observation = agent.tool("browser.observe", Some(&target), json!({}));
    let account = element(&observation, "Account");
    assert_eq!(
        account["value"], "ada",
        "an ordinary field still shows its value"
    );
    let secret = element(&observation, "Secret");
    assert_eq!(secret["sensitive"], true, "{secret}");
    assert_eq!(secret["valueLength"], 7);
    assert!(secret.get("value").is_none(), "{secret}");
    let fresh = element(&observation, "New secret");
    assert_eq!(fresh["sensitive"], true, "{fresh}");
    assert_eq!(fresh["valueLength"], 9);
    let text = observation.to_string();
    assert!(!text.contains("hunter2") && !text.contains("swordfish"));
    // The auth-surface hint treats it as a password field.
    let hints = observation["hints"].as_array().unwrap();
    assert!(
        hints.iter().any(|h| h["code"] == "authentication_surface"),
        "{hints:?}"
    );

    // Typing into it: evidence and the fresh Observation carry lengths only.
    let typed = agent.tool(
        "browser.type",
        Some(&target),
        json!({"observationId": observation["observationId"], "ref": find_ref(&observation, "Secret"), "text": "opensesame"}),
    );
    assert_eq!(
        typed["evidence"]["sensitive"], true,
        "{}",
        typed["evidence"]
    );
    assert_eq!(typed["evidence"]["afterLength"], 10);
    assert!(!typed.to_string().contains("opensesame"), "{typed}");

    // Read by selector, a field the Observation marks sensitive answers only its length (at
    // any offset), while an ordinary one reads as its value.
    let plain = agent.tool(
        "browser.read",
        Some(&target),
        json!({"selector": "#account"}),
    );
    assert_eq!(plain["text"], "ada", "{plain}");
    for (selector, length) in [("#secret", 10), ("#fresh", 9)] {
        for offset in [0, 2] {
            let read = agent.tool(
                "browser.read",
                Some(&target),
                json!({"selector": selector, "offset": offset}),
            );
            assert_eq!(read["sensitive"], true, "{selector}: {read}");
            assert_eq!(read["valueLength"], length, "{selector}: {read}");
            assert_eq!(read["text"], "", "{selector}: {read}");
            let text = read.to_string();
            assert!(
                !text.contains("opensesame") && !text.contains("swordfish"),
                "{selector}: {text}"
            );
        }
    }

    // The other reading tools never return it either.
    for (tool, arguments) in [
        ("browser.read", json!({})),
        ("browser.search", json!({"query": "secret"})),
        ("browser.elements.find", json!({"selector": "input"})),
    ] {
        let result = agent.tool(tool, Some(&target), arguments);
        let text = result.to_string();
        assert!(
            !text.contains("opensesame") && !text.contains("swordfish"),
            "{tool}: {text}"
        );
    }
}

/// An agent whose bridge negotiated 64 KiB message and result limits.
fn small_limit_agent(rig: &Rig) -> Agent {
    let mut bridge = rig.home.spawn_bridge();
    let mut params = initialize_params("com.example.small", "i1", (1, 1));
    params["limits"] = json!({"maxMessageBytes": 65536, "maxResultBytes": 65536});
    let init = bridge.ok("initialize", params);
    assert_eq!(init["limits"]["connection"]["maxResultBytes"], 65536);
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

fn assert_bounded(text: &Value, max_chars: usize, what: &str) {
    let text = text
        .as_str()
        .unwrap_or_else(|| panic!("{what} is not a string"));
    let chars = text.chars().count();
    assert!(chars <= max_chars, "{what}: {chars} characters");
}

#[test]
fn a_megabyte_title_stays_bounded_at_a_64_kib_limit() {
    let rig = Rig::start();
    let mut agent = small_limit_agent(&rig);
    agent.connect();
    let url = rig.fixtures.url("/fixture/huge-title");
    let response = agent.call("browser.open", None, json!({"url": url}));
    let opened = match response.get("result") {
        Some(outcome) => outcome["result"].clone(),
        None => panic!("open failed at a 64 KiB limit: {response}"),
    };
    let target = opened["targetId"].clone();
    assert_bounded(&opened["title"], 1024, "open title");
    assert_bounded(&opened["url"], 8192, "open url");
    assert!(
        opened["url"].as_str().unwrap().ends_with(MARKER),
        "the cut URL is marked: {}",
        &opened["url"].as_str().unwrap()[..80]
    );

    // The browser reports the scripted title a moment after load; the inventory then shows it
    // cut and marked, in a result far below the limit.
    let mut tab = Value::Null;
    assert!(
        wait_until(Duration::from_secs(15), || {
            let response = agent.call("browser.tabs.list", None, json!({}));
            let tabs = response["result"]["result"]["tabs"].clone();
            tab = tabs
                .as_array()
                .unwrap_or_else(|| panic!("tabs.list failed: {response}"))
                .iter()
                .find(|t| t["targetId"] == target)
                .cloned()
                .unwrap_or(Value::Null);
            tab["title"].as_str().is_some_and(|t| t.ends_with(MARKER))
        }),
        "the megabyte title never showed, cut: {tab}"
    );
    assert_bounded(&tab["title"], 1024, "inventory title");
    assert!(tab["title"].as_str().unwrap().starts_with("TTTT"));
    assert_bounded(&tab["url"], 8192, "inventory url");

    // Reading tools and a second open on the same tab stay within the limit too.
    let observation = agent.tool("browser.observe", Some(&target), json!({}));
    assert_bounded(&observation["title"], 1024, "observe title");
    assert_bounded(&observation["url"], 8192, "observe url");
    let link = element(&observation, "Name Name");
    assert_bounded(&link["name"], 200, "element name");
    assert!(link["name"].as_str().unwrap().ends_with(MARKER), "{link}");
    let far = element(&observation, "Far away");
    assert_bounded(&far["href"], 300, "element href");
    assert!(far["href"].as_str().unwrap().ends_with(MARKER), "{far}");
    let reopened = agent.tool("browser.open", Some(&target), json!({"url": url}));
    assert_bounded(&reopened["title"], 1024, "reopen title");
    assert_bounded(&reopened["url"], 8192, "reopen url");

    // Events carry event-sized URLs.
    for event in agent.events() {
        if let Some(url) = event["payload"].get("url") {
            assert_bounded(url, 2048, &format!("{} url", event["type"]));
        }
    }
}

/// observe, read and capture on a page that reloads itself every 40 ms: each answers a result
/// or a structured, retryable `document_changed`, never `internal_error` with the browser's own
/// protocol text, and never waits out its deadline (a capture whose document went away does not
/// hold the call until `deadline_exceeded`).
#[test]
fn a_page_that_keeps_replacing_its_document_gets_structured_answers() {
    let rig = Rig::start();
    let mut agent = Agent::new(&rig, "com.example.replacing");
    agent.connect();
    let opened = agent.tool(
        "browser.open",
        None,
        json!({"url": rig.fixtures.url("/fixture/replacing")}),
    );
    let target = opened["targetId"].clone();
    let mut changed = 0;
    for _ in 0..6 {
        for tool in ["browser.observe", "browser.read", "browser.capture"] {
            let params = json!({"name": tool, "arguments": {}, "workspaceId": agent.workspace_id,
                "leaseId": agent.lease_id, "targetId": target, "deadlineMs": 10000});
            let response = agent.bridge.call("tools/call", params);
            let Some(error) = response.get("error") else {
                continue;
            };
            let data = &error["data"];
            assert_eq!(data["code"], "document_changed", "{tool}: {response}");
            assert_eq!(data["retryable"], true, "{tool}: {response}");
            assert_eq!(data["context"]["reason"], "document_changed", "{tool}");
            assert!(
                !error["message"].as_str().unwrap().contains("Runtime."),
                "{tool}: {response}"
            );
            changed += 1;
        }
    }
    assert!(
        changed > 0,
        "the page never replaced its document under a call"
    );
}
