//! Process tests of the advisory watchdogs against a real headless Chromium: the no-progress
//! detector (`watchdog.no_progress` and the `repeated_action` hint on the threshold result) on
//! the `stuck` fixture, `watchdog.navigation_stalled` on a page whose body never finishes, and
//! `watchdog.dialog_unhandled` for an alert nobody answers.

use crate::support;

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

use serde_json::{Value, json};
use support::rig::{Agent, Rig};
use support::wait_until;

/// The stall bound the navigation test gives the Broker (the operator knob; default 30 s): short
/// enough for a quick test, long enough for the first load of a new window on a loaded machine.
const TEST_STALL_MS: u64 = 4000;

/// An agent connected, with the stuck fixture open in a managed tab.
fn stuck(rig: &Rig) -> (Agent, Value) {
    let mut agent = Agent::new(rig, "com.example.watchdogs");
    agent.connect();
    let opened = agent.tool(
        "browser.open",
        None,
        json!({"url": rig.fixtures.url("/fixture/stuck")}),
    );
    (agent, opened["targetId"].clone())
}

fn observe(agent: &mut Agent, target: &Value) -> Value {
    agent.tool("browser.observe", Some(target), json!({}))
}

/// The ref of the first element whose name contains `name`.
fn find_ref(observation: &Value, name: &str) -> u64 {
    observation["elements"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"].as_str().unwrap_or("").contains(name))
        .unwrap_or_else(|| panic!("no element named {name:?} in {observation}"))["ref"]
        .as_u64()
        .unwrap()
}

/// Acts on the element named `name` in `observation` (refs from that Observation).
fn act_on(
    agent: &mut Agent,
    target: &Value,
    tool: &str,
    observation: &Value,
    name: &str,
    extra: Value,
) -> Value {
    let mut arguments =
        json!({"observationId": observation["observationId"], "ref": find_ref(observation, name)});
    if let (Some(arguments), Some(extra)) = (arguments.as_object_mut(), extra.as_object()) {
        arguments.extend(extra.clone());
    }
    agent.tool(tool, Some(target), arguments)
}

/// Clicks the element named `name` in `observation`; returns the result (a fresh Observation).
fn click(agent: &mut Agent, target: &Value, observation: &Value, name: &str) -> Value {
    act_on(agent, target, "browser.click", observation, name, json!({}))
}

fn repeated_action_hints(result: &Value) -> Vec<Value> {
    result["hints"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|h| h["code"] == "repeated_action")
        .cloned()
        .collect()
}

fn no_progress_events(agent: &mut Agent) -> Vec<Value> {
    agent
        .events()
        .into_iter()
        .filter(|e| e["type"] == "watchdog.no_progress")
        .collect()
}

/// Clicks the stubborn checkbox `times` times, each on the previous result's Observation;
/// returns the last result.
fn stubborn_clicks(agent: &mut Agent, target: &Value, from: Value, times: usize) -> Value {
    let mut current = from;
    for _ in 0..times {
        current = click(agent, target, &current, "Stubborn");
        assert_eq!(current["evidence"]["status"], "mismatch", "{current}");
        assert_eq!(current["evidence"]["kind"], "checkbox");
    }
    current
}

/// The payload carries no fingerprint and no action parameter: only these fields.
fn assert_payload_is_bounded(event: &Value, forbidden: &[&str]) {
    let payload = event["payload"].as_object().unwrap();
    let mut keys: Vec<&str> = payload.keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "action",
            "consecutiveActions",
            "hints",
            "reason",
            "targetId"
        ],
        "{event}"
    );
    let text = event.to_string();
    for needle in forbidden {
        assert!(!text.contains(needle), "{needle:?} leaked into {event}");
    }
    for leak in ["fingerprint", "signature", "observation:", "\"ref\""] {
        assert!(!text.contains(leak), "{leak:?} in {event}");
    }
}

#[test]
fn three_mismatches_carry_the_hint_and_emit_no_progress_once() {
    let rig = Rig::start();
    let (mut agent, target) = stuck(&rig);
    let first = observe(&mut agent, &target);
    agent.events();
    let two = stubborn_clicks(&mut agent, &target, first, 2);
    assert!(repeated_action_hints(&two).is_empty(), "{two}");
    assert!(no_progress_events(&mut agent).is_empty());

    let third = stubborn_clicks(&mut agent, &target, two, 1);
    let hints = repeated_action_hints(&third);
    assert_eq!(
        hints,
        vec![
            json!({"code": "repeated_action", "source": "watchdog", "confidence": "strong", "recommendedAction": "change_strategy", "reason": "mismatch"})
        ],
        "{third}"
    );
    let events = no_progress_events(&mut agent);
    assert_eq!(events.len(), 1, "{events:?}");
    let event = &events[0];
    assert_eq!(event["payload"]["reason"], "mismatch");
    assert_eq!(event["payload"]["consecutiveActions"], 3);
    assert_eq!(event["payload"]["action"], "click");
    assert_eq!(event["payload"]["targetId"], target);
    assert_eq!(event["targetId"], target);
    assert_eq!(event["leaseId"], agent.lease_id);
    assert_eq!(
        event["payload"]["hints"],
        json!([hints[0]]),
        "the same hint in both, as the one-item event hints array"
    );
    assert_payload_is_bounded(event, &[third["observationId"].as_str().unwrap()]);

    // A fourth mismatch continues the same streak: no hint, no second event.
    let fourth = stubborn_clicks(&mut agent, &target, third, 1);
    assert!(repeated_action_hints(&fourth).is_empty(), "{fourth}");
    assert!(no_progress_events(&mut agent).is_empty());
}

#[test]
fn the_same_action_on_a_stagnant_page_is_reported() {
    let rig = Rig::start();
    let (mut agent, target) = stuck(&rig);
    let mut current = observe(&mut agent, &target);
    agent.events();
    for round in 1..=3 {
        current = click(&mut agent, &target, &current, "Apply nothing");
        let hints = repeated_action_hints(&current);
        match round {
            3 => assert_eq!(
                hints,
                vec![
                    json!({"code": "repeated_action", "source": "watchdog", "confidence": "medium", "recommendedAction": "change_strategy", "reason": "stagnant_page"})
                ],
                "{current}"
            ),
            _ => assert!(hints.is_empty(), "round {round}: {current}"),
        }
    }
    let events = no_progress_events(&mut agent);
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["payload"]["reason"], "stagnant_page");

    // Typing the same text into the same field: the page stays the same after the first.
    let secret = "zebra-4711";
    for round in 1..=3 {
        current = act_on(
            &mut agent,
            &target,
            "browser.type",
            &current,
            "Name",
            json!({"text": secret}),
        );
        assert_eq!(current["evidence"]["status"], "verified", "{current}");
        assert_eq!(
            repeated_action_hints(&current).len(),
            usize::from(round == 3),
            "round {round}: {current}"
        );
    }
    let events = no_progress_events(&mut agent);
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["payload"]["reason"], "stagnant_page");
    assert_eq!(events[0]["payload"]["action"], "type");
    assert_payload_is_bounded(&events[0], &[secret]);
}

#[test]
fn success_navigation_and_release_reset_the_streaks() {
    let rig = Rig::start();
    let (mut agent, target) = stuck(&rig);
    let first = observe(&mut agent, &target);
    agent.events();

    // Observable success between mismatches ends the streak.
    let two = stubborn_clicks(&mut agent, &target, first, 2);
    let success = click(&mut agent, &target, &two, "Working option");
    assert_eq!(success["evidence"]["status"], "verified", "{success}");
    let two_more = stubborn_clicks(&mut agent, &target, success, 2);
    assert!(repeated_action_hints(&two_more).is_empty(), "{two_more}");
    assert!(no_progress_events(&mut agent).is_empty());
    let third = stubborn_clicks(&mut agent, &target, two_more, 1);
    assert_eq!(repeated_action_hints(&third).len(), 1, "{third}");
    assert_eq!(no_progress_events(&mut agent).len(), 1);

    // A navigation ends it.
    let two = stubborn_clicks(&mut agent, &target, third, 2);
    drop(two);
    agent.tool(
        "browser.navigate",
        Some(&target),
        json!({"action": "reload"}),
    );
    let reloaded = observe(&mut agent, &target);
    let after_reload = stubborn_clicks(&mut agent, &target, reloaded, 2);
    assert!(
        repeated_action_hints(&after_reload).is_empty(),
        "{after_reload}"
    );

    // Handing the tab back ends it (the same Lease then takes control again).
    let released = agent.tool("browser.tabs.release", Some(&target), json!({}));
    assert_eq!(released["released"], true);
    let after_release = stubborn_clicks(&mut agent, &target, after_reload, 2);
    assert!(
        repeated_action_hints(&after_release).is_empty(),
        "{after_release}"
    );
    assert!(no_progress_events(&mut agent).is_empty());
    let crossing = stubborn_clicks(&mut agent, &target, after_release, 1);
    assert_eq!(repeated_action_hints(&crossing).len(), 1, "{crossing}");
    assert_eq!(no_progress_events(&mut agent).len(), 1);
}

/// A server whose pages send their headers and the start of the HTML, then hold the socket
/// open without finishing the body: the document stays `loading`.
struct StallingServer {
    port: u16,
}

impl StallingServer {
    fn start() -> StallingServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                std::thread::spawn(move || stall(stream));
            }
        });
        StallingServer { port }
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{}", self.port, path)
    }
}

fn stall(mut stream: TcpStream) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    loop {
        let mut line = String::new();
        match reader.read_line(&mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) if line == "\r\n" || line == "\n" => break,
            Ok(_) => {}
        }
    }
    // Enough bytes that the browser commits and starts parsing, never the end of the document.
    let padding = "<!-- loading -->".repeat(256);
    let head = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nCache-Control: no-store\r\n\r\n<!doctype html><html><head><title>Stalled</title></head><body><p>partial</p>{padding}"
    );
    if stream.write_all(head.as_bytes()).is_err() {
        return;
    }
    let _ = stream.flush();
    // Hold the socket until the test process ends (or the browser gives up on it).
    std::thread::sleep(Duration::from_secs(300));
}

#[test]
fn a_navigation_that_never_becomes_interactive_is_stalled_and_unknown() {
    let mut rig = Rig::start();
    rig.home.env.push((
        "BROWSER_PILOT_NAVIGATION_STALL_MS".to_owned(),
        TEST_STALL_MS.to_string(),
    ));
    let server = StallingServer::start();
    let (mut agent, target) = stuck(&rig);
    agent.events();
    let url = server.url("/stalled?token=abc");
    let started = std::time::Instant::now();
    let (code, error) = agent.tool_err(
        "browser.navigate",
        Some(&target),
        json!({"action": "goto", "url": url}),
    );
    let took = started.elapsed();
    assert_eq!(code, "unknown_outcome", "{error}");
    assert_eq!(error["data"]["context"]["reason"], "navigation_stalled");
    assert_eq!(error["data"]["retryable"], false);
    assert!(
        took >= Duration::from_millis(TEST_STALL_MS) && took < Duration::from_secs(20),
        "{took:?}"
    );
    let stalled = agent.wait_event("watchdog.navigation_stalled");
    assert_eq!(stalled["targetId"], target);
    assert_eq!(stalled["leaseId"], agent.lease_id);
    assert_eq!(stalled["payload"]["targetId"], target);
    assert_eq!(stalled["payload"]["url"], url);
    let elapsed = stalled["payload"]["elapsedMs"].as_u64().unwrap();
    assert!((TEST_STALL_MS..20_000).contains(&elapsed), "{stalled}");
    assert_eq!(stalled["sensitivity"], "browser_data");

    // Nothing was retried or stopped: the tab is still on the loading page and observable.
    let observation = observe(&mut agent, &target);
    assert_eq!(observation["url"], url, "{observation}");

    // browser.open into a new tab stalls the same way.
    let (code, error) = agent.tool_err("browser.open", None, json!({"url": server.url("/again")}));
    assert_eq!(code, "unknown_outcome", "{error}");
    let opened = error["data"]["context"]["targetId"].clone();
    assert!(opened.as_str().unwrap().starts_with("target:"), "{error}");
    assert_ne!(opened, target);
    let again = agent.wait_event("watchdog.navigation_stalled");
    assert_eq!(again["payload"]["url"], server.url("/again"));
    assert_eq!(again["targetId"], opened);
}

/// The contract's bound for `watchdog.dialog_unhandled` (docs/watchdogs.md): 15 s pending.
const DIALOG_UNHANDLED_MS: u64 = 15_000;

/// Clicks the form fixture's Alert button; returns the `dialogId` the click opened.
fn open_alert(agent: &mut Agent, target: &Value) -> Value {
    let observation = observe(agent, target);
    let result = click(agent, target, &observation, "Alert");
    assert!(
        result["evidence"]["effects"]
            .as_array()
            .unwrap()
            .contains(&json!("dialog_opened")),
        "{result}"
    );
    let listed = agent.tool("browser.dialogs.list", None, json!({}));
    let dialogs = listed["dialogs"].as_array().unwrap();
    assert_eq!(dialogs.len(), 1, "{listed}");
    dialogs[0]["dialogId"].clone()
}

/// An alert answered at once raises nothing; one left pending is reported once, after the
/// contract's 15 s, and stays open: the watchdog neither accepts nor dismisses it.
#[test]
fn an_unanswered_dialog_is_reported_once_and_left_open() {
    let rig = Rig::start();
    let mut agent = Agent::new(&rig, "com.example.watchdogs");
    agent.connect();
    let opened = agent.tool(
        "browser.open",
        None,
        json!({"url": rig.fixtures.url("/fixture/form")}),
    );
    let target = opened["targetId"].clone();
    agent.events();

    let answered = open_alert(&mut agent, &target);
    agent.tool(
        "browser.dialogs.respond",
        None,
        json!({"dialogId": answered, "action": "accept"}),
    );
    let pending = open_alert(&mut agent, &target);
    assert_ne!(pending, answered);

    let mut seen = Vec::new();
    let reported = |seen: &[Value]| {
        seen.iter()
            .filter(|e| e["type"] == "watchdog.dialog_unhandled")
            .cloned()
            .collect::<Vec<_>>()
    };
    assert!(
        wait_until(Duration::from_secs(45), || {
            seen.extend(agent.events());
            !reported(&seen).is_empty()
        }),
        "no watchdog.dialog_unhandled: {seen:?}"
    );
    // The answered dialog's timer (started first) ran out before the pending one's: had it
    // reported, its event would be here too.
    let watchdogs = reported(&seen);
    assert_eq!(watchdogs.len(), 1, "{watchdogs:?}");
    let event = &watchdogs[0];
    assert_eq!(event["payload"]["dialogId"], pending, "{event}");
    assert_eq!(event["payload"]["targetId"], target, "{event}");
    assert_eq!(
        event["payload"]["pendingMs"], DIALOG_UNHANDLED_MS,
        "{event}"
    );
    assert_eq!(event["targetId"], target, "{event}");
    let mut keys: Vec<&str> = event["payload"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    assert_eq!(keys, ["dialogId", "pendingMs", "targetId"], "{event}");
    assert!(
        !event.to_string().contains("Hello there"),
        "no page text: {event}"
    );

    // Advisory only: the dialog is still pending, and answering it is still the host's call.
    let listed = agent.tool("browser.dialogs.list", None, json!({}));
    assert_eq!(listed["dialogs"][0]["dialogId"], pending, "{listed}");
    agent.tool(
        "browser.dialogs.respond",
        None,
        json!({"dialogId": pending, "action": "dismiss"}),
    );
    let listed = agent.tool("browser.dialogs.list", None, json!({}));
    assert_eq!(listed["dialogs"], json!([]), "{listed}");
    assert!(
        reported(&agent.events()).is_empty(),
        "reported once, not again when answered"
    );
}
