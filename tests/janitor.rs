//! Process tests of the janitor role against a real headless Chromium that
//! each test starts itself (`--remote-debugging-port=0`, temp profile). The
//! test drives the janitor through its stdin/stdout exactly like the Broker
//! would, and checks the browser over its own, separate CDP WebSocket.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::{self, Message, WebSocket};

/// Generous bound for anything the browser or the janitor must do.
const WAIT: Duration = Duration::from_secs(20);

#[path = "support/chromium.rs"]
#[allow(
    dead_code,
    reason = "these tests use only part of the shared browser harness"
)]
mod chromium;

/// A headless Chromium owned by the test, on a temporary profile; killed on drop.
type Browser = chromium::TempChromium;

/// The test's own CDP connection (a separate WebSocket, like another tool).
struct OwnCdp {
    ws: WebSocket<TcpStream>,
    next_id: u64,
}

impl OwnCdp {
    fn connect(browser: &Browser) -> OwnCdp {
        let stream = TcpStream::connect(("127.0.0.1", browser.chromium.port)).unwrap();
        stream.set_read_timeout(Some(WAIT)).unwrap();
        let (ws, _) = tungstenite::client::client(browser.ws_url(), stream).expect("handshake");
        OwnCdp { ws, next_id: 0 }
    }

    fn call(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let request = json!({"id": id, "method": method, "params": params});
        self.ws.send(Message::text(request.to_string())).unwrap();
        loop {
            let message = self.ws.read().expect("own cdp read");
            let Message::Text(text) = message else {
                continue;
            };
            let value: Value = serde_json::from_str(text.as_str()).unwrap();
            if value["id"] == json!(id) {
                assert!(value.get("error").is_none(), "{method} failed: {value}");
                return value["result"].clone();
            }
        }
    }

    fn page_ids(&mut self) -> Vec<String> {
        let result = self.call("Target.getTargets", json!({}));
        result["targetInfos"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|info| info["type"] == "page")
            .map(|info| info["targetId"].as_str().unwrap().to_owned())
            .collect()
    }
}

/// A running janitor process: its stdin, and its stdout lines via a thread.
struct Janitor {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
    next_id: u64,
}

impl Janitor {
    fn spawn(ws_url: &str) -> Janitor {
        let mut child = Command::new(env!("CARGO_BIN_EXE_browser-pilot"))
            .arg("--browser-pilot-internal=janitor")
            .arg(ws_url)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn janitor");
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        let stdin = child.stdin.take();
        Janitor {
            child,
            stdin,
            lines,
            next_id: 0,
        }
    }

    fn next_line(&self) -> Value {
        let line = self.lines.recv_timeout(WAIT).expect("janitor line");
        let value: Value = serde_json::from_str(&line).expect("janitor line is json");
        if let Some(id) = value.get("id").and_then(Value::as_u64) {
            assert!(
                id < 2_000_000_000,
                "janitor leaked a private reply: {line:.200}"
            );
        }
        value
    }

    fn send(&mut self, session: Option<&str>, method: &str, params: Value) -> u64 {
        self.next_id += 1;
        let mut request = json!({"id": self.next_id, "method": method, "params": params});
        if let Some(session) = session {
            request["sessionId"] = json!(session);
        }
        let stdin = self.stdin.as_mut().expect("stdin open");
        writeln!(stdin, "{request}").unwrap();
        stdin.flush().unwrap();
        self.next_id
    }

    /// Sends a call and returns its reply; events seen meanwhile go to
    /// `seen`.
    fn call(
        &mut self,
        session: Option<&str>,
        method: &str,
        params: Value,
        seen: &mut Vec<Value>,
    ) -> Value {
        let id = self.send(session, method, params);
        loop {
            let message = self.next_line();
            if message["id"] == json!(id) {
                assert!(message.get("error").is_none(), "{method} failed: {message}");
                return message["result"].clone();
            }
            seen.push(message);
        }
    }

    fn wait_exit(&mut self) -> i32 {
        let started = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status.code().expect("janitor exited normally");
            }
            assert!(started.elapsed() < WAIT, "janitor did not exit");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Janitor {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn stdin_eof_closes_managed_tabs_and_popups_but_not_user_tabs() {
    let browser = Browser::start();
    let mut janitor = Janitor::spawn(&browser.ws_url());
    assert_eq!(janitor.next_line(), json!({"janitor": "connected"}));
    let mut seen = Vec::new();

    let created = janitor.call(
        None,
        "Target.createTarget",
        json!({"url": "about:blank"}),
        &mut seen,
    );
    let managed = created["targetId"].as_str().unwrap().to_owned();

    let mut own = OwnCdp::connect(&browser);
    let user = own.call("Target.createTarget", json!({"url": "about:blank"}));
    let user = user["targetId"].as_str().unwrap().to_owned();

    // A popup opened by the managed tab (opener = managed) is managed too.
    let attached = janitor.call(
        None,
        "Target.attachToTarget",
        json!({"targetId": managed, "flatten": true}),
        &mut seen,
    );
    let session = attached["sessionId"].as_str().unwrap().to_owned();
    janitor.call(
        Some(&session),
        "Runtime.evaluate",
        json!({"expression": "window.open('about:blank#popup', '_blank'); 1", "userGesture": true}),
        &mut seen,
    );
    let started = Instant::now();
    let popup = loop {
        let found = seen.iter().find_map(|event| {
            let info = &event["params"]["targetInfo"];
            match (event["method"].as_str(), info["openerId"].as_str()) {
                (Some("Target.targetCreated"), Some(opener)) if opener == managed => {
                    info["targetId"].as_str().map(str::to_owned)
                }
                _ => None,
            }
        });
        if let Some(popup) = found {
            break popup;
        }
        assert!(started.elapsed() < WAIT, "no popup target event");
        seen.push(janitor.next_line());
    };

    // Messages far above tungstenite's default 16 MiB frame limit pass.
    let big = janitor.call(
        Some(&session),
        "Runtime.evaluate",
        json!({"expression": "'x'.repeat(20 * 1024 * 1024)", "returnByValue": true}),
        &mut seen,
    );
    assert_eq!(
        big["result"]["value"].as_str().map(str::len),
        Some(20 * 1024 * 1024)
    );

    let pages = own.page_ids();
    for id in [&managed, &popup, &user] {
        assert!(
            pages.contains(id),
            "{id} should exist before cleanup: {pages:?}"
        );
    }

    // The Broker goes away: EOF on the janitor's stdin.
    drop(janitor.stdin.take());
    assert_eq!(janitor.wait_exit(), 0);

    let started = Instant::now();
    loop {
        let pages = own.page_ids();
        assert!(pages.contains(&user), "user tab must survive: {pages:?}");
        if !pages.contains(&managed) && !pages.contains(&popup) {
            break;
        }
        assert!(
            started.elapsed() < WAIT,
            "managed tabs still open: {pages:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn browser_exit_is_reported_as_disconnected() {
    let mut browser = Browser::start();
    let mut janitor = Janitor::spawn(&browser.ws_url());
    assert_eq!(janitor.next_line(), json!({"janitor": "connected"}));
    browser.chromium.sigkill();
    let started = Instant::now();
    loop {
        let line = janitor.next_line();
        if line == json!({"janitor": "disconnected"}) {
            break;
        }
        assert!(started.elapsed() < WAIT, "no disconnected line");
    }
    assert_eq!(janitor.wait_exit(), 0);
}

#[test]
fn refused_endpoint_fails_with_a_reason() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut janitor = Janitor::spawn(&format!("ws://127.0.0.1:{port}/devtools/browser/x"));
    let line = janitor.next_line();
    assert_eq!(line["janitor"], "failed");
    assert_eq!(line["reason"], "refused");
    assert!(line["message"].is_string());
    assert_eq!(janitor.wait_exit(), 1);
}

#[test]
fn non_loopback_endpoint_is_refused_without_connecting() {
    let mut janitor = Janitor::spawn("ws://192.0.2.1:9222/devtools/browser/x");
    let line = janitor.next_line();
    assert_eq!(line["janitor"], "failed");
    assert_eq!(line["reason"], "invalid_url");
    assert_eq!(janitor.wait_exit(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cdp_client_drives_a_tab_through_the_janitor() {
    use browser_pilot::cdp::{CdpError, Evaluation};
    let browser = Browser::start();
    let (client, _events, mut child) = chromium::client_over_janitor(&browser.ws_url()).await;

    let target = client
        .create_target("about:blank", false, WAIT)
        .await
        .unwrap();
    let session = client.attach_to_target(&target, WAIT).await.unwrap();
    let navigated = client
        .navigate(&session, "data:text/html,<title>hello</title>", WAIT)
        .await
        .unwrap();
    assert_eq!(navigated.error_text, None);
    assert!(!navigated.frame_id.is_empty());
    // Page.navigate answers at commit, before the document is parsed.
    let started = Instant::now();
    loop {
        let title = client
            .evaluate(&session, "document.title", WAIT)
            .await
            .unwrap();
        if title == Evaluation::Value(json!("hello")) {
            break;
        }
        assert!(
            started.elapsed() < WAIT,
            "title never became hello: {title:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let thrown = client
        .evaluate(&session, "(() => { throw new Error('boom') })()", WAIT)
        .await
        .unwrap();
    assert!(
        matches!(&thrown, Evaluation::Exception { text } if text.contains("boom")),
        "{thrown:?}"
    );
    let targets = client.get_targets(WAIT).await.unwrap();
    let info = targets
        .iter()
        .find(|info| info.target_id == target)
        .expect("listed");
    assert_eq!(info.target_type, "page");
    assert!(info.attached);

    // Chromium never answers a call whose target closes (field notes §0
    // item 4); the client fails it when the session detaches.
    let hanging = tokio::spawn({
        let client = client.clone();
        let session = session.clone();
        async move {
            client
                .call(
                    Some(&session),
                    "Runtime.evaluate",
                    json!({"expression": "new Promise(() => {})", "awaitPromise": true}),
                    WAIT,
                )
                .await
        }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(client.close_target(&target, WAIT).await.unwrap());
    let outcome = hanging.await.unwrap();
    assert!(
        matches!(outcome, Err(CdpError::SessionClosed { .. })),
        "{outcome:?}"
    );

    // Dropping the client ends the janitor's stdin: it exits 0.
    drop(client);
    let status = tokio::time::timeout(WAIT, child.wait())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(status.code(), Some(0));
}
