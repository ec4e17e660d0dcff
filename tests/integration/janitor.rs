//! Process tests of the janitor role against a real headless Chromium that
//! each test starts itself (`--remote-debugging-port=0`, temp profile). The
//! test drives the janitor through its stdin/stdout exactly like the Broker
//! would, and checks the browser over its own, separate CDP WebSocket.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::chromium::{self, OwnCdp};

/// Generous bound for anything the browser or the janitor must do.
const WAIT: Duration = Duration::from_secs(20);

/// A headless Chromium owned by the test, on a temporary profile; killed on drop.
type Browser = chromium::TempChromium;

/// The ids of the browser's page targets, seen from the test's own CDP connection.
fn page_ids(own: &mut OwnCdp) -> Vec<String> {
    own.pages().into_iter().map(|(id, _)| id).collect()
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

    let mut own = OwnCdp::connect(&browser.chromium);
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

    let pages = page_ids(&mut own);
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
        let pages = page_ids(&mut own);
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

    // Chromium never answers a call whose target closes (docs/cdp.md,
    // "unanswered calls"); the client fails it when the session detaches.
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

/// Every typed command the Broker sends, against a real Chromium through the janitor: the
/// params are accepted (no remote error) and the replies decode into their types; every event
/// the stream carried meanwhile decodes too (a reply or event shape Chromium changed fails here,
/// not in a tool).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typed_commands_and_events_decode_real_chromium_replies() {
    use browser_pilot::cdp::dom::{
        GetBoxModel, GetFrameOwner, ResolveNode, ScrollIntoViewIfNeeded,
    };
    use browser_pilot::cdp::input::{
        DispatchKeyEvent, DispatchMouseEvent, InsertText, MouseButton, MouseEventType, Stroke,
        stroke_events, stroke_for,
    };
    use browser_pilot::cdp::page::{
        AddScriptToEvaluateOnNewDocument, CaptureScreenshot, CreateIsolatedWorld, Enable,
        GetFrameTree, GetLayoutMetrics, GetNavigationHistory, PrintToPdf,
    };
    use browser_pilot::cdp::runtime::{CallArgument, CallFunctionOn, Evaluate, ReleaseObjectGroup};
    use browser_pilot::cdp::target::{GetTargetInfo, SetAutoAttach};
    use browser_pilot::cdp::{CdpEvent, io};

    let browser = Browser::start();
    let fixtures = chromium::Fixtures::start();
    let (client, mut events, _child) = chromium::client_over_janitor(&browser.ws_url()).await;
    let target = client
        .create_target("about:blank", false, WAIT)
        .await
        .unwrap();
    let session = client.attach_to_target(&target, WAIT).await.unwrap();
    client.execute(&session, &Enable {}, WAIT).await.unwrap();
    client
        .set_lifecycle_events_enabled(&session, true, WAIT)
        .await
        .unwrap();
    client
        .execute(&session, &SetAutoAttach::iframes(), WAIT)
        .await
        .unwrap();
    let script = AddScriptToEvaluateOnNewDocument {
        source: "void 0".to_owned(),
        world_name: Some("typed-test".to_owned()),
    };
    let added = client.execute(&session, &script, WAIT).await.unwrap();
    assert!(!added.identifier.is_empty());
    let url = fixtures.url("/page/typed");
    let navigated = client.navigate(&session, &url, WAIT).await.unwrap();
    assert_eq!(navigated.error_text, None);
    // A same-process iframe with a box, added by the test acting as the page.
    let started = Instant::now();
    loop {
        let added = client
            .evaluate(
                &session,
                "document.readyState === 'complete' && (document.body.insertAdjacentHTML('beforeend', '<iframe id=inner srcdoc=\"<p>x</p>\" style=\"width:300px;height:150px;border:0\"></iframe>'), true)",
                WAIT,
            )
            .await
            .unwrap();
        if added == browser_pilot::cdp::Evaluation::Value(json!(true)) {
            break;
        }
        assert!(started.elapsed() < WAIT, "the fixture page never loaded");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let tree = loop {
        let tree = client
            .execute(&session, &GetFrameTree {}, WAIT)
            .await
            .unwrap()
            .frame_tree;
        if !tree.child_frames.is_empty() {
            break tree;
        }
        assert!(started.elapsed() < WAIT, "the iframe never appeared");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(
        tree.frame.id,
        target.as_str(),
        "a tab's main frame id is its target id"
    );
    assert_eq!(tree.frame.url, url);
    let child = &tree.child_frames[0].frame;
    assert_eq!(child.parent_id.as_deref(), Some(target.as_str()));
    let history = client
        .execute(&session, &GetNavigationHistory {}, WAIT)
        .await
        .unwrap();
    assert_eq!(history.entry(0).map(|e| e.title.as_str()), Some("typed"));
    let info = client
        .execute(
            None,
            &GetTargetInfo {
                target_id: target.clone(),
            },
            WAIT,
        )
        .await
        .unwrap();
    assert_eq!(info.target_info.url, url);

    let world = CreateIsolatedWorld {
        frame_id: tree.frame.id.clone(),
        world_name: "typed-test".to_owned(),
    };
    let context = client
        .execute(&session, &world, WAIT)
        .await
        .unwrap()
        .execution_context_id;
    let size = Evaluate {
        expression: "[innerWidth, innerHeight]".to_owned(),
        context_id: Some(context),
        return_by_value: true,
        await_promise: None,
        object_group: None,
        silent: None,
    };
    let size = client.execute(&session, &size, WAIT).await.unwrap();
    assert!(size.exception_details.is_none());
    assert_eq!(
        size.result
            .value
            .as_ref()
            .and_then(Value::as_array)
            .map(Vec::len),
        Some(2)
    );
    let call = CallFunctionOn {
        function_declaration: "function (a) { return JSON.stringify([a, typeof document]); }"
            .to_owned(),
        execution_context_id: Some(context),
        object_id: None,
        arguments: vec![CallArgument::value(json!({"n": 1}))],
        return_by_value: true,
        await_promise: Some(false),
        silent: true,
        object_group: None,
    };
    let called = client.execute(&session, &call, WAIT).await.unwrap();
    assert_eq!(called.result.value, Some(json!(r#"[{"n":1},"object"]"#)));
    let throws = CallFunctionOn {
        function_declaration: "function () { throw new Error('typed boom'); }".to_owned(),
        arguments: Vec::new(),
        ..call.clone()
    };
    let thrown = client.execute(&session, &throws, WAIT).await.unwrap();
    let details = thrown.exception_details.expect("an exception");
    assert!(details.message().contains("typed boom"), "{details:?}");

    let owner = client
        .execute(
            &session,
            &GetFrameOwner {
                frame_id: child.id.clone(),
            },
            WAIT,
        )
        .await
        .unwrap()
        .backend_node_id;
    let resolve = ResolveNode {
        backend_node_id: owner,
        execution_context_id: Some(context),
        object_group: Some("typed-test".to_owned()),
    };
    let resolved = client.execute(&session, &resolve, WAIT).await.unwrap();
    assert_eq!(resolved.object.subtype.as_deref(), Some("node"));
    assert!(resolved.object.object_id.is_some());
    client
        .execute(
            &session,
            &ScrollIntoViewIfNeeded {
                backend_node_id: owner,
            },
            WAIT,
        )
        .await
        .unwrap();
    let model = client
        .execute(
            &session,
            &GetBoxModel {
                backend_node_id: owner,
            },
            WAIT,
        )
        .await
        .unwrap()
        .model;
    assert_eq!(model.content.len(), 8);
    assert_eq!((model.width, model.height), (300.0, 150.0));
    let release = ReleaseObjectGroup {
        object_group: "typed-test".to_owned(),
    };
    client.execute(&session, &release, WAIT).await.unwrap();

    let (x, y) = (model.content[0] + 5.0, model.content[1] + 5.0);
    for kind in [
        MouseEventType::MouseMoved,
        MouseEventType::MousePressed,
        MouseEventType::MouseReleased,
    ] {
        let step = DispatchMouseEvent::step(kind, x, y, MouseButton::Left, 1);
        client.execute(&session, &step, WAIT).await.unwrap();
    }
    let Stroke::Key { key, shift } = stroke_for('!') else {
        panic!("! has a US key");
    };
    let keys: Vec<DispatchKeyEvent> = stroke_events(&key, shift);
    for event in &keys {
        client.execute(&session, event, WAIT).await.unwrap();
    }
    let insert = InsertText {
        text: "👋".to_owned(),
    };
    client.execute(&session, &insert, WAIT).await.unwrap();

    let metrics = client
        .execute(&session, &GetLayoutMetrics {}, WAIT)
        .await
        .unwrap();
    assert!(metrics.css_content_size["height"].as_f64().unwrap_or(0.0) > 0.0);
    let shot = CaptureScreenshot {
        format: "png",
        quality: None,
        clip: None,
        capture_beyond_viewport: false,
        optimize_for_speed: true,
    };
    let shot = client.execute(&session, &shot, WAIT).await.unwrap();
    assert!(shot.data.starts_with("iVBOR"), "a PNG, base64");
    let print = PrintToPdf {
        options: serde_json::Map::new(),
        transfer_mode: "ReturnAsStream",
    };
    let handle = client.execute(&session, &print, WAIT).await.unwrap().stream;
    let read = io::Read {
        handle: handle.clone(),
        size: Some(1 << 16),
    };
    let chunk = client.execute(&session, &read, WAIT).await.unwrap();
    assert!(!chunk.data.is_empty());
    client
        .execute(&session, &io::Close { handle }, WAIT)
        .await
        .unwrap();

    // Everything the stream carried: the events the Broker reads all decode.
    assert!(client.close_target(&target, WAIT).await.unwrap());
    let mut seen = std::collections::BTreeSet::new();
    let until = Instant::now() + WAIT;
    while !seen.contains("TargetDestroyed") {
        let event: CdpEvent = tokio::time::timeout_at(until.into(), events.recv())
            .await
            .expect("the tab's destruction is reported")
            .expect("the event stream is open");
        let method = event.method.clone();
        let (_, event) = event
            .decode()
            .unwrap_or_else(|error| panic!("{method} does not decode: {error}"));
        seen.insert(variant(&event));
    }
    for expected in [
        "TargetCreated",
        "TargetInfoChanged",
        "AttachedToTarget",
        "LifecycleEvent",
        "FrameStartedNavigating",
        "FrameNavigated",
        "FrameStoppedLoading",
        "DetachedFromTarget",
        "TargetDestroyed",
    ] {
        assert!(seen.contains(expected), "no {expected} among {seen:?}");
    }
}

/// The name of an event's variant, for the list of kinds seen.
fn variant(event: &browser_pilot::cdp::Event) -> &'static str {
    use browser_pilot::cdp::Event;
    match event {
        Event::TargetCreated(_) => "TargetCreated",
        Event::TargetInfoChanged(_) => "TargetInfoChanged",
        Event::TargetDestroyed(_) => "TargetDestroyed",
        Event::TargetCrashed(_) => "TargetCrashed",
        Event::AttachedToTarget(_) => "AttachedToTarget",
        Event::DetachedFromTarget(_) => "DetachedFromTarget",
        Event::InspectorDetached(_) => "InspectorDetached",
        Event::InspectorTargetCrashed(_) => "InspectorTargetCrashed",
        Event::LifecycleEvent(_) => "LifecycleEvent",
        Event::FrameStartedNavigating(_) => "FrameStartedNavigating",
        Event::FrameNavigated(_) => "FrameNavigated",
        Event::NavigatedWithinDocument(_) => "NavigatedWithinDocument",
        Event::FrameStoppedLoading(_) => "FrameStoppedLoading",
        Event::FrameDetached(_) => "FrameDetached",
        Event::JavascriptDialogOpening(_) => "JavascriptDialogOpening",
        Event::JavascriptDialogClosed(_) => "JavascriptDialogClosed",
        Event::DownloadWillBegin(_) => "DownloadWillBegin",
        Event::DownloadProgress(_) => "DownloadProgress",
        Event::ConsoleApiCalled(_) => "ConsoleApiCalled",
        Event::ExceptionThrown(_) => "ExceptionThrown",
        Event::RequestWillBeSent(_) => "RequestWillBeSent",
        Event::LoadingFinished(_) => "LoadingFinished",
        Event::LoadingFailed(_) => "LoadingFailed",
        Event::FileChooserOpened(_) => "FileChooserOpened",
        Event::ResponseReceived(_) => "ResponseReceived",
        Event::RequestPaused(_) => "RequestPaused",
        Event::AuthRequired(_) => "AuthRequired",
        Event::ScreencastFrame(_) => "ScreencastFrame",
        Event::Other { .. } => "Other",
    }
}
