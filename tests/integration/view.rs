//! The live view (`browser-pilot view`, docs/view.md) against a real Broker and headless
//! Chromium: the page opened in the browser lists what the Broker holds and shows live frames of
//! an agent's tab; requests without the secret, with a foreign `Host` or a foreign `Origin` are
//! refused; the secret never reaches an agent, and no agent lists or drives the view's tab.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::chromium::OwnCdp;
use crate::support::rig::{Agent, Rig, find_ref};
use crate::support::{BIN, TestHome, wait_until};

/// One HTTP/1.1 request to the view: (status, body).
fn http(port: u16, request: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    stream.write_all(request.as_bytes()).unwrap();
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    let answer = String::from_utf8_lossy(&answer).into_owned();
    let status = answer
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = answer.split("\r\n\r\n").nth(1).unwrap_or("").to_owned();
    (status, body)
}

fn get(port: u16, path: &str, headers: &str) -> (u16, String) {
    http(
        port,
        &format!(
            "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{headers}Connection: close\r\n\r\n"
        ),
    )
}

fn post(port: u16, path: &str, host: &str, headers: &str, body: &str) -> (u16, String) {
    http(
        port,
        &format!(
            "POST {path} HTTP/1.1\r\nHost: {host}\r\n{headers}Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        ),
    )
}

/// Opens the live channel with `origin` and sends `hello` as its first (masked text) message:
/// the status line, then everything the view sent until it closed the connection.
fn live_channel(port: u16, origin: &str, hello: &str) -> (String, String) {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let upgrade = format!(
        "GET /api/live HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nOrigin: {origin}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
    );
    stream.write_all(upgrade.as_bytes()).unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8];
    while !head.ends_with(b"\r\n\r\n") && stream.read_exact(&mut byte).is_ok() {
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head).into_owned();
    let status = head.lines().next().unwrap_or("").to_owned();
    if !status.contains(" 101 ") {
        return (status, head);
    }
    let mask = [7u8, 1, 9, 3];
    let mut frame = vec![0x81, 0x80 | hello.len() as u8];
    frame.extend(mask);
    frame.extend(hello.bytes().enumerate().map(|(i, b)| b ^ mask[i % 4]));
    stream.write_all(&frame).unwrap();
    let mut rest = Vec::new();
    let _ = stream.read_to_end(&mut rest);
    (status, String::from_utf8_lossy(&rest).into_owned())
}

/// `browser-pilot view`: (url, port, secret).
fn view_url(home: &TestHome) -> (String, u16, String) {
    let (code, out, err) = home.run(BIN, &["view"]);
    assert_eq!(code, 0, "view: {out} {err}");
    let url = out.trim().to_owned();
    let rest = url.strip_prefix("http://127.0.0.1:").expect(&url);
    let port: u16 = rest.split('/').next().unwrap().parse().unwrap();
    let secret = url.split("#bpview=").nth(1).expect(&url).to_owned();
    assert_eq!(secret.len(), 64, "{url}");
    (url, port, secret)
}

/// Evaluates `expression` in the view's page (found by its URL, the secret already gone).
fn in_view(cdp: &mut OwnCdp, port: u16, expression: &str) -> Value {
    cdp.evaluate_in_page(&format!(":{port}/"), expression)["result"]["value"].clone()
}

#[test]
fn the_view_shows_the_brokers_workspaces_and_refuses_strangers() {
    let rig = Rig::start();
    let mut agent = Agent::new(&rig, "view-agent");
    agent.connect();
    let opened = agent.tool(
        "browser.open",
        None,
        json!({"url": rig.fixtures.url("/page/Alpha")}),
    );
    let target = opened["targetId"].clone();

    let (url, port, secret) = view_url(&rig.home);
    let (_, again, second) = view_url(&rig.home);
    assert_eq!(again, port, "a second `view` finds the running one");
    assert_ne!(second, secret, "each URL carries a fresh secret");
    assert!(
        !std::fs::read_dir(rig.home.path())
            .unwrap()
            .flatten()
            .any(|entry| std::fs::read(entry.path())
                .is_ok_and(|bytes| { String::from_utf8_lossy(&bytes).contains(&secret) })),
        "the secret is written nowhere in the home"
    );

    // Strangers: no token, a rebound Host, a foreign Origin, a wrong secret.
    let (status, body) = get(port, "/api/state", "");
    assert_eq!(status, 403, "{body}");
    let (status, body) = get(port, "/api/state", "X-BP-Token: 00\r\n");
    assert_eq!(status, 403, "{body}");
    let rebound = format!("evil.test:{port}");
    let (status, _) = post(
        port,
        "/api/session",
        &rebound,
        &format!("X-BP-Secret: {second}\r\n"),
        "",
    );
    assert_eq!(status, 403, "a rebound Host is refused");
    let (status, page) = http(
        port,
        &format!("GET / HTTP/1.1\r\nHost: {rebound}\r\nConnection: close\r\n\r\n"),
    );
    assert_eq!(status, 403, "even the static page: {page}");
    let own = format!("127.0.0.1:{port}");
    let (status, _) = post(
        port,
        "/api/session",
        &own,
        &format!("Origin: http://evil.test\r\nX-BP-Secret: {second}\r\n"),
        "",
    );
    assert_eq!(status, 403, "a foreign Origin is refused");
    let (status, _) = post(port, "/api/session", &own, "X-BP-Secret: 1234\r\n", "");
    assert_eq!(status, 403, "a wrong secret is refused");
    // The live channel: a foreign Origin is refused before the upgrade; without a valid token
    // in its first message it says so and closes, sending no frame.
    let (status, _) = live_channel(port, "http://evil.test", "{}");
    assert!(status.contains(" 403 "), "{status}");
    let hello = json!({"token": "00", "workspaceId": "w", "targetId": "t"}).to_string();
    let (status, sent) = live_channel(port, &format!("http://127.0.0.1:{port}"), &hello);
    assert!(status.contains(" 101 "), "{status}");
    assert!(sent.contains("no valid token"), "{sent}");
    assert!(!sent.contains("\"data\""), "{sent}");
    // The first GET of the page carries no data.
    let (status, page) = get(port, "/", "");
    assert_eq!(status, 200);
    assert!(
        !page.contains("workspace:") && !page.contains("Alpha"),
        "{page}"
    );
    // The second secret, refused above only for its Host and Origin, is still good once.
    let (status, body) = post(
        port,
        "/api/session",
        &own,
        &format!("X-BP-Secret: {second}\r\n"),
        "",
    );
    assert_eq!(status, 200, "{body}");
    let token: Value = serde_json::from_str(&body).unwrap();
    let token = token["token"].as_str().unwrap().to_owned();
    let (status, _) = post(
        port,
        "/api/session",
        &own,
        &format!("X-BP-Secret: {second}\r\n"),
        "",
    );
    assert_eq!(status, 403, "a secret is spent once");
    let (status, body) = get(port, "/api/state", &format!("X-BP-Token: {token}\r\n"));
    assert_eq!(status, 200, "{body}");
    let state: Value = serde_json::from_str(&body).unwrap();
    let workspace = (state["workspaces"].as_array().unwrap().iter())
        .find(|w| w["workspaceId"] == agent.workspace_id)
        .unwrap_or_else(|| panic!("the agent's Workspace is listed: {state}"))
        .clone();
    assert_eq!(workspace["client"]["id"], "view-agent");
    assert_eq!(workspace["leases"][0]["leaseId"], agent.lease_id);
    let tab = &workspace["tabs"][0];
    assert_eq!(tab["targetId"], target, "{workspace}");
    assert_eq!(tab["controlledBy"], agent.lease_id);
    assert_eq!(tab["title"], "Alpha");
    assert!(
        (workspace["commands"].as_array().unwrap().iter()).any(|c| c["method"] == "browser.open"),
        "{workspace}"
    );

    // The page in the browser: the secret leaves the address bar, the list matches.
    let mut cdp = OwnCdp::connect(&rig.chromium);
    cdp.open_user_tab(&url);
    let ready = format!(
        "document.body.dataset.ready === 'true' && !!document.querySelector('[data-workspace-id=\"{}\"] [data-target-id=\"{}\"]')",
        agent.workspace_id.as_str().unwrap(),
        target.as_str().unwrap()
    );
    assert!(
        wait_until(Duration::from_secs(20), || {
            cdp.pages()
                .iter()
                .any(|(_, u)| u.ends_with(&format!(":{port}/")))
                && in_view(&mut cdp, port, &ready) == true
        }),
        "the view lists the agent's Workspace and tab"
    );
    assert_eq!(
        in_view(&mut cdp, port, "location.href"),
        json!(format!("http://127.0.0.1:{port}/"))
    );

    // Live frames: watch the tab, then the agent navigates and the frame changes.
    let watch = format!(
        "document.querySelector('[data-watch=\"{}\"]').click(); true",
        target.as_str().unwrap()
    );
    in_view(&mut cdp, port, &watch);
    let frame = "(() => { const i = document.getElementById('frame'); return [Number(i.dataset.frames), i.src]; })()";
    let mut before = Value::Null;
    assert!(
        wait_until(Duration::from_secs(20), || {
            before = in_view(&mut cdp, port, frame);
            before[0].as_u64().unwrap_or(0) >= 1
        }),
        "a first frame arrives: {}",
        in_view(
            &mut cdp,
            port,
            "document.getElementById('frame-note').textContent"
        )
    );
    agent.tool(
        "browser.navigate",
        Some(&target),
        json!({"action": "goto", "url": rig.fixtures.url("/fixture/form")}),
    );
    assert!(
        wait_until(Duration::from_secs(20), || {
            let now = in_view(&mut cdp, port, frame);
            now[1] != before[1] && now[0].as_u64() > before[0].as_u64()
        }),
        "the frame changes after the agent navigates"
    );

    // No agent lists the view's tab, or sees the secret; one that goes there loses the tab.
    let tabs = agent.tabs();
    assert!(
        !tabs.iter().any(|t| t["url"]
            .as_str()
            .unwrap_or("")
            .contains(&format!(":{port}"))),
        "{tabs:?}"
    );
    let (_, _, third) = view_url(&rig.home);
    let view_link = format!("http://127.0.0.1:{port}/#bpview={third}");
    let navigated = agent.call(
        "browser.navigate",
        Some(&target),
        json!({"action": "goto", "url": view_link}),
    );
    let after = agent.call("browser.observe", Some(&target), json!({}));
    assert_eq!(
        after["error"]["data"]["code"], "target_not_found",
        "the view's tab is nobody's to drive: {after}"
    );
    let events = agent.events();
    let tabs = agent.tabs();
    let (code, dump, _) = rig.home.run(
        BIN,
        &["debug", "sql", "SELECT payload_json FROM events UNION ALL SELECT coalesce(result_json, error_json) FROM commands"],
    );
    assert_eq!(code, 0);
    for secret in [&secret, &second, &third] {
        for (what, text) in [
            ("navigate", navigated.to_string()),
            ("observe", after.to_string()),
            ("events", json!(events).to_string()),
            ("tabs", json!(tabs).to_string()),
            ("debug sql", dump.clone()),
        ] {
            assert!(
                !text.contains(secret.as_str()),
                "{what} holds a secret: {text}"
            );
        }
    }

    let (code, out, _) = rig.home.run(BIN, &["view", "--stop"]);
    assert_eq!((code, out.trim()), (0, r#"{"stopped":true}"#));
    assert!(
        wait_until(Duration::from_secs(10), || TcpStream::connect((
            "127.0.0.1",
            port
        ))
        .is_err()),
        "the view stops"
    );
}

#[test]
fn a_handoff_completes_with_evidence_when_done_is_pressed_in_the_page() {
    let rig = Rig::start();
    let mut agent = Agent::new(&rig, "handoff-agent");
    agent.connect();
    let opened = agent.tool(
        "browser.open",
        None,
        json!({"url": rig.fixtures.url("/page/Captcha")}),
    );
    let target = opened["targetId"].clone();
    let (url, port, secret) = view_url(&rig.home);
    let mut cdp = OwnCdp::connect(&rig.chromium);
    cdp.open_user_tab(&url);

    // The agent asks; its call waits for the person.
    let asking = std::thread::spawn(move || {
        let response = agent.call(
            "browser.handoff",
            Some(&target),
            json!({"reason": "Solve the captcha", "timeoutMs": 60000}),
        );
        (agent, response)
    });
    let waiting = "!!document.querySelector('[data-handoff-done]')";
    assert!(
        wait_until(Duration::from_secs(30), || {
            cdp.pages()
                .iter()
                .any(|(_, u)| u.ends_with(&format!(":{port}/")))
                && in_view(&mut cdp, port, waiting) == true
        }),
        "the view shows the waiting hand-off"
    );
    assert_eq!(
        in_view(
            &mut cdp,
            port,
            "document.querySelector('[data-handoff-id]').textContent.includes('Solve the captcha')"
        ),
        true
    );
    // The person solves it: a cookie and a new document in the agent's tab.
    cdp.evaluate_in_page(
        "/page/Captcha",
        "document.cookie = 'solved=1; path=/'; location.href = '/page/Solved'; true",
    );
    cdp.wait_for_document("/page/Solved", "Solved");
    in_view(
        &mut cdp,
        port,
        "document.querySelector('.handoff input').value = 'captcha solved'; document.querySelector('[data-handoff-done]').click(); true",
    );
    let (mut agent, response) = asking.join().unwrap();
    let result = &response["result"]["result"];
    assert_eq!(
        response["result"]["command"]["status"], "completed",
        "{response}"
    );
    let evidence = &result["evidence"];
    assert_eq!(evidence["status"], "verified", "{result}");
    assert_eq!(evidence["urlChanged"], true, "{result}");
    assert_eq!(evidence["titleChanged"], true, "{result}");
    assert_eq!(evidence["documentChanged"], true, "{result}");
    assert_eq!(evidence["cookieCountChanged"], true, "{result}");
    assert_eq!(evidence["note"], "captcha solved", "{result}");
    assert_eq!(result["title"], "Solved");

    let events = agent.events();
    let requested = (events.iter())
        .find(|e| e["type"] == "handoff.requested")
        .unwrap_or_else(|| panic!("{events:?}"));
    assert_eq!(requested["payload"]["reason"], "Solve the captcha");
    assert_eq!(requested["payload"]["view"]["path"], "/");
    assert!(events.iter().any(|e| e["type"] == "handoff.completed"));
    assert!(!json!(events).to_string().contains(&secret));
    assert!(
        wait_until(Duration::from_secs(10), || {
            in_view(
                &mut cdp,
                port,
                "!document.querySelector('[data-handoff-done]')",
            ) == true
        }),
        "the page drops the finished hand-off"
    );

    // Without Done, the hand-off ends in handoff_timeout, never in a completion.
    let tabs = agent.tabs();
    let target = (tabs.iter())
        .find(|t| t["managed"] == true)
        .unwrap_or_else(|| panic!("{tabs:?}"))["targetId"]
        .clone();
    let (code, error) = agent.tool_err(
        "browser.handoff",
        Some(&target),
        json!({"reason": "nobody comes", "timeoutMs": 1000}),
    );
    assert_eq!(code, "handoff_timeout", "{error}");
    assert_eq!(error["data"]["retryable"], true);
    assert_eq!(error["data"]["remediation"]["action"], "open_view");
    let (code, out, _) = rig.home.run(BIN, &["view", "--stop"]);
    assert_eq!((code, out.trim()), (0, r#"{"stopped":true}"#));
}

/// Clicks the view's picture of the watched tab at fractions `(x, y)` of it, as a person would.
fn click_picture(cdp: &mut OwnCdp, port: u16, x: f64, y: f64) {
    in_view(
        cdp,
        port,
        &format!(
            "(() => {{ const i = document.getElementById('frame'); const r = i.getBoundingClientRect(); i.dispatchEvent(new MouseEvent('click', {{bubbles: true, clientX: r.left + r.width * {x}, clientY: r.top + r.height * {y}}})); return true; }})()"
        ),
    );
}

fn inputs_sent(cdp: &mut OwnCdp, port: u16) -> u64 {
    in_view(
        cdp,
        port,
        "Number(document.getElementById('frame').dataset.inputs)",
    )
    .as_u64()
    .unwrap_or(0)
}

#[test]
fn a_person_takes_a_tab_over_in_the_page_and_hands_it_back() {
    let rig = Rig::start();
    let mut agent = Agent::new(&rig, "takeover-agent");
    agent.connect();
    let opened = agent.tool(
        "browser.open",
        None,
        json!({"url": rig.fixtures.url("/fixture/takeover")}),
    );
    let target = opened["targetId"].clone();
    let (url, port, _) = view_url(&rig.home);
    let mut cdp = OwnCdp::connect(&rig.chromium);
    cdp.open_user_tab(&url);
    let listed = format!(
        "document.body.dataset.ready === 'true' && !!document.querySelector('[data-watch=\"{}\"]')",
        target.as_str().unwrap()
    );
    assert!(
        wait_until(Duration::from_secs(20), || {
            cdp.pages()
                .iter()
                .any(|(_, u)| u.ends_with(&format!(":{port}/")))
                && in_view(&mut cdp, port, &listed) == true
        }),
        "the view lists the agent's tab"
    );
    in_view(
        &mut cdp,
        port,
        &format!(
            "document.querySelector('[data-watch=\"{}\"]').click(); true",
            target.as_str().unwrap()
        ),
    );
    assert!(
        wait_until(Duration::from_secs(20), || in_view(
            &mut cdp,
            port,
            "Number(document.getElementById('frame').dataset.frames) >= 1"
        ) == true),
        "a first frame arrives"
    );

    // The person takes the tab: the agent hears of it, and its Commands fail fast meanwhile.
    in_view(
        &mut cdp,
        port,
        "document.getElementById('takeover').click(); true",
    );
    assert!(
        wait_until(Duration::from_secs(20), || in_view(
            &mut cdp,
            port,
            "document.getElementById('watch').dataset.held === 'true'"
        ) == true),
        "the page holds the tab"
    );
    let human = agent.wait_event("target_control.human");
    assert_eq!(human["payload"]["targetId"], target, "{human}");
    let (code, error) = agent.tool_err("browser.observe", Some(&target), json!({}));
    assert_eq!(code, "human_in_control", "{error}");
    assert_eq!(error["data"]["retryable"], true, "{error}");
    assert_eq!(
        error["data"]["remediation"]["action"], "wait_for_hand_back",
        "{error}"
    );
    let (code, _) = agent.tool_err(
        "browser.navigate",
        Some(&target),
        json!({"action": "goto", "url": rig.fixtures.url("/page/Elsewhere")}),
    );
    assert_eq!(code, "human_in_control", "a mutation is refused too");

    // The person's click and keys on the picture land on the agent's tab.
    click_picture(&mut cdp, port, 0.5, 0.25);
    click_picture(&mut cdp, port, 0.5, 0.7);
    for key in ["h", "i"] {
        in_view(
            &mut cdp,
            port,
            &format!(
                "document.getElementById('frame').dispatchEvent(new KeyboardEvent('keydown', {{key: '{key}', bubbles: true}})); true"
            ),
        );
    }
    assert!(
        wait_until(Duration::from_secs(20), || inputs_sent(&mut cdp, port) >= 4),
        "the page sent the person's input"
    );
    let page_state =
        "[document.getElementById('big').textContent, document.getElementById('field').value]";
    assert_eq!(
        cdp.evaluate_in_page("/fixture/takeover", page_state)["result"]["value"],
        json!(["Clicked 1", "hi"]),
        "the click and the keys landed on the tab"
    );

    // Hand-back: the agent hears what changed, and its next Observation shows the person's work.
    in_view(
        &mut cdp,
        port,
        "document.getElementById('handback').click(); true",
    );
    let returned = agent.wait_event("target_control.returned");
    let evidence = &returned["payload"]["evidence"];
    assert_eq!(evidence["status"], "verified", "{returned}");
    assert_eq!(evidence["titleChanged"], true, "{returned}");
    assert_eq!(evidence["urlChanged"], false, "{returned}");
    assert_eq!(evidence["documentChanged"], false, "{returned}");
    assert_eq!(returned["payload"]["title"], "Clicked");
    assert!(
        wait_until(Duration::from_secs(10), || in_view(
            &mut cdp,
            port,
            "document.getElementById('watch').dataset.handedBack === 'true'"
        ) == true),
        "the page says the tab went back"
    );
    let observation = agent.tool("browser.observe", Some(&target), json!({}));
    assert!(
        observation.to_string().contains("Clicked 1"),
        "the next Observation reflects the person's click: {observation}"
    );
    let (code, out, _) = rig.home.run(BIN, &["view", "--stop"]);
    assert_eq!((code, out.trim()), (0, r#"{"stopped":true}"#));
}

#[test]
fn a_recording_of_an_agent_run_plays_offline_without_the_typed_password() {
    const PASSWORD: &str = "Tr0ub4dor-typed-77";
    let rig = Rig::start();
    let mut agent = Agent::new(&rig, "recorded-agent");
    agent.connect();
    let opened = agent.tool(
        "browser.open",
        None,
        json!({"url": rig.fixtures.url("/fixture/recording")}),
    );
    let target = opened["targetId"].clone();
    let (_, port, secret) = view_url(&rig.home);
    let own = format!("127.0.0.1:{port}");
    let (status, body) = post(
        port,
        "/api/session",
        &own,
        &format!("X-BP-Secret: {secret}\r\n"),
        "",
    );
    assert_eq!(status, 200, "{body}");
    let token: Value = serde_json::from_str(&body).unwrap();
    let header = format!("X-BP-Token: {}\r\n", token["token"].as_str().unwrap());
    let tab = json!({"workspaceId": agent.workspace_id, "targetId": target}).to_string();
    let (status, body) = post(port, "/api/recording/start", &own, &header, &tab);
    assert_eq!(status, 200, "{body}");
    // One recording per tab, whoever started it: the agent's own start is refused meanwhile.
    let (code, refused) = agent.tool_err("browser.recording.start", Some(&target), json!({}));
    assert_eq!(code, "invalid_params", "{refused}");
    // The person's recording from the view is the Workspace's Artifact too.
    let (status, body) = post(port, "/api/recording/stop", &own, &header, &tab);
    assert_eq!(status, 200, "{body}");
    let by_person: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(by_person["artifact"]["kind"], "recording", "{by_person}");
    assert_eq!(
        by_person["artifact"]["workspaceId"], agent.workspace_id,
        "{by_person}"
    );

    // The agent records its own run through the bridge.
    let started = agent.tool("browser.recording.start", Some(&target), json!({}));
    assert_eq!(started["recording"], true, "{started}");
    assert_eq!(started["framesPerSecond"], 2, "{started}");

    // A short agent run: type a password, press the button.
    let observation = agent.tool("browser.observe", Some(&target), json!({}));
    let observation_id = observation["observationId"].clone();
    let field = find_ref(&observation, "textbox", "Password");
    agent.tool(
        "browser.type",
        Some(&target),
        json!({"observationId": observation_id, "ref": field, "text": PASSWORD}),
    );
    let button = find_ref(&observation, "button", "Sign in");
    agent.tool(
        "browser.click",
        Some(&target),
        json!({"observationId": observation_id, "ref": button}),
    );

    let stopped = agent.tool("browser.recording.stop", Some(&target), json!({}));
    assert_eq!(stopped["artifact"]["kind"], "recording", "{stopped}");
    assert_eq!(stopped["artifact"]["mimeType"], "text/html", "{stopped}");
    let frames = stopped["frames"].as_u64().unwrap();
    let entries = stopped["timeline"].as_u64().unwrap();
    assert!(
        frames >= 2,
        "the first and the last state at least: {stopped}"
    );

    // The Workspace's Artifact, exported like any other, holds no typed password.
    let client = TestHome::new();
    let path = client.path().join("run.html");
    agent.bridge.ok(
        "artifacts/export",
        json!({"workspaceId": agent.workspace_id, "leaseId": agent.lease_id,
               "artifactId": stopped["artifact"]["id"], "path": path.to_string_lossy()}),
    );
    let file = std::fs::read_to_string(&path).unwrap();
    assert!(
        !file.contains(PASSWORD),
        "the typed password is in the recording"
    );
    assert!(!file.contains(&secret));

    // It opens in Chromium from disk and plays: every frame, and the timeline of the run.
    let mut cdp = OwnCdp::connect(&rig.chromium);
    cdp.open_user_tab(&format!("file://{}", path.display()));
    let played = "document.body.dataset.played === 'true'";
    assert!(
        wait_until(Duration::from_secs(30), || {
            cdp.pages().iter().any(|(_, u)| u.ends_with("/run.html"))
                && cdp.evaluate_in_page("/run.html", played)["result"]["value"] == true
        }),
        "the recording plays to its last frame"
    );
    let shown = cdp.evaluate_in_page(
        "/run.html",
        "[Number(document.body.dataset.frames), Number(document.body.dataset.shown), Array.from(document.querySelectorAll('#timeline li')).map(li => li.textContent)]",
    )["result"]["value"]
        .clone();
    assert_eq!(shown[0], frames, "{shown}");
    assert_eq!(shown[1], frames - 1, "{shown}");
    let timeline = shown[2].as_array().unwrap();
    assert_eq!(timeline.len() as u64, entries, "{shown}");
    for tool in ["browser.observe", "browser.type", "browser.click"] {
        assert!(
            timeline
                .iter()
                .any(|t| t.as_str().unwrap().contains(&format!("{tool} completed"))),
            "{tool} in the timeline: {shown}"
        );
    }
    let (code, out, _) = rig.home.run(BIN, &["view", "--stop"]);
    assert_eq!((code, out.trim()), (0, r#"{"stopped":true}"#));
}
