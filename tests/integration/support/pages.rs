//! Harness for the page-script tests and the observe bench: a headless
//! Chromium owned by the test, the crate's CDP client over a real janitor
//! process, a tiny HTTP server on 127.0.0.1 for fixture and generated pages,
//! and a `Tab` that navigates and runs page scripts in the isolated world.
//! No mocks: everything talks to the real browser.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::time::{Duration, Instant};

use browser_pilot::cdp::{CdpClient, Evaluation, SessionId};
use browser_pilot::page::{self, ExecutionContextId, PageError, PageScript};
use serde_json::{Value, json};

/// Generous bound for anything the browser must do.
pub const WAIT: Duration = Duration::from_secs(30);

use super::chromium;

/// A headless Chromium owned by the test, on a temporary profile; killed on drop.
pub type Browser = chromium::TempChromium;

/// The crate's CDP client over a real janitor process; events are drained and dropped.
pub async fn client_over_janitor(ws_url: &str) -> (CdpClient, tokio::process::Child) {
    let (client, mut events, child) = chromium::client_over_janitor(ws_url).await;
    tokio::spawn(async move { while events.recv().await.is_some() {} });
    (client, child)
}

/// What the fixture server answers for one path.
pub struct Response {
    pub status: u16,
    pub content_type: &'static str,
    pub body: Vec<u8>,
}

/// A tiny HTTP/1.1 server on 127.0.0.1 (one thread, `Connection: close`):
/// `/NAME.html` from `tests/fixtures/pages/`, `/generated/N` a page with N
/// interactive elements, anything else 404.
pub struct FixtureServer {
    pub port: u16,
}

impl FixtureServer {
    pub fn start() -> FixtureServer {
        let listener = TcpListener::bind(("127.0.0.1", 0)).unwrap();
        let port = listener.local_addr().unwrap().port();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                std::thread::spawn(move || serve_one(stream));
            }
        });
        FixtureServer { port }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{}", self.port, path)
    }
}

fn serve_one(stream: TcpStream) {
    let _ = stream.set_read_timeout(Some(WAIT));
    let mut reader = BufReader::new(match stream.try_clone() {
        Ok(clone) => clone,
        Err(_) => return,
    });
    let mut request_line = String::new();
    if reader.read_line(&mut request_line).is_err() {
        return;
    }
    loop {
        let mut header = String::new();
        match reader.read_line(&mut header) {
            Ok(0) | Err(_) => break,
            Ok(_) if header == "\r\n" || header == "\n" => break,
            Ok(_) => {}
        }
    }
    let path = request_line
        .split_whitespace()
        .nth(1)
        .unwrap_or("/")
        .to_owned();
    let response = respond(&path);
    let mut stream = stream;
    let head = format!(
        "HTTP/1.1 {} X\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        response.status,
        response.content_type,
        response.body.len()
    );
    let _ = stream.write_all(head.as_bytes());
    let _ = stream.write_all(&response.body);
    let _ = stream.flush();
    let mut rest = Vec::new();
    let _ = reader.read_to_end(&mut rest);
}

fn respond(path: &str) -> Response {
    let path = path.split('?').next().unwrap_or("/");
    if let Some(count) = path.strip_prefix("/generated/") {
        let count: usize = count.parse().unwrap_or(0);
        return Response {
            status: 200,
            content_type: "text/html; charset=utf-8",
            body: generated_page(count).into_bytes(),
        };
    }
    let name = path.trim_start_matches('/');
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/pages");
    let valid = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.')
        && !name.contains("..");
    match valid.then(|| std::fs::read(fixtures.join(name))) {
        Some(Ok(body)) => Response {
            status: 200,
            content_type: "text/html; charset=utf-8",
            body,
        },
        _ => Response {
            status: 404,
            content_type: "text/plain",
            body: b"not found".to_vec(),
        },
    }
}

/// A page with `count` interactive elements: rows of text with one control
/// each (button, link, labelled input, labelled checkbox, select, textarea,
/// `div[role=button]`, contenteditable, details/summary), every tenth a
/// custom element with an open shadow root holding a button (the page
/// docs/cdp.md's observation costs were measured on).
pub fn generated_page(count: usize) -> String {
    let mut body = String::with_capacity(count * 120);
    for i in 0..count {
        body.push_str("<div class=row><span>Row ");
        body.push_str(&i.to_string());
        body.push_str(" text</span> ");
        let control = match (i % 10, i % 9) {
            (9, _) => "<x-item></x-item>".to_owned(),
            (_, 0) => format!("<button>Button {i}</button>"),
            (_, 1) => format!("<a href=\"/item/{i}\">Link {i}</a>"),
            (_, 2) => format!("<label for=i{i}>Input {i}</label><input id=i{i} value=v{i}>"),
            (_, 3) => format!("<label><input type=checkbox> Check {i}</label>"),
            (_, 4) => format!(
                "<select aria-label=\"Select {i}\"><option>A</option><option>B</option></select>"
            ),
            (_, 5) => format!("<textarea aria-label=\"Area {i}\">t</textarea>"),
            (_, 6) => format!("<div role=button tabindex=0>Div button {i}</div>"),
            (_, 7) => format!("<div contenteditable=true>Edit {i}</div>"),
            _ => format!("<details><summary>Summary {i}</summary>d</details>"),
        };
        body.push_str(&control);
        body.push_str("</div>\n");
    }
    format!(
        "<!doctype html><html><head><title>Generated {count}</title></head><body>\n{body}\
         <script>customElements.define('x-item', class extends HTMLElement {{\
         connectedCallback() {{ if (!this.shadowRoot) {{ this.attachShadow({{mode:'open'}})\
         .innerHTML = '<button>Shadow button</button>'; }} }} }});</script></body></html>"
    )
}

/// One tab of the test browser with the Broker's isolated world.
pub struct Tab {
    pub client: CdpClient,
    pub session: SessionId,
    pub context: ExecutionContextId,
}

impl Tab {
    pub async fn open(client: &CdpClient, url: &str) -> Tab {
        let target = client
            .create_target("about:blank", false, WAIT)
            .await
            .unwrap();
        let session = client.attach_to_target(&target, WAIT).await.unwrap();
        let mut tab = Tab {
            client: client.clone(),
            session,
            context: ExecutionContextId::new(0),
        };
        tab.navigate(url).await;
        tab
    }

    /// Navigates, waits for the load to complete, and creates the isolated
    /// world of the new document.
    pub async fn navigate(&mut self, url: &str) {
        let outcome = self
            .client
            .navigate(&self.session, url, WAIT)
            .await
            .unwrap();
        assert_eq!(outcome.error_text, None, "navigate {url}");
        let started = Instant::now();
        loop {
            let state = self
                .client
                .evaluate(&self.session, "[document.readyState, location.href]", WAIT)
                .await
                .unwrap();
            if let Evaluation::Value(value) = &state
                && value[0] == json!("complete")
                && value[1] == json!(url)
            {
                break;
            }
            assert!(started.elapsed() < WAIT, "{url} never loaded: {state:?}");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        self.context = self.new_world().await;
    }

    pub async fn new_world(&self) -> ExecutionContextId {
        let frame = page::main_frame_id(&self.client, &self.session, WAIT)
            .await
            .unwrap();
        page::create_isolated_world(&self.client, &self.session, &frame, WAIT)
            .await
            .unwrap()
    }

    pub async fn run<S: PageScript>(&self, script: &S) -> Result<S::Output, PageError> {
        page::run(&self.client, &self.session, self.context, script, WAIT).await
    }

    /// Evaluates in the page's main world (the page's own view).
    pub async fn eval(&self, expression: &str) -> Value {
        match self
            .client
            .evaluate(&self.session, expression, WAIT)
            .await
            .unwrap()
        {
            Evaluation::Value(value) => value,
            Evaluation::Exception { text } => panic!("{expression} threw: {text}"),
        }
    }

    /// Evaluates `expression` in the isolated world of `self.context`.
    pub async fn eval_in_world(&self, expression: &str) -> Value {
        self.client
            .call(
                Some(&self.session),
                "Runtime.evaluate",
                json!({"expression": expression, "contextId": self.context.get(), "returnByValue": true}),
                WAIT,
            )
            .await
            .unwrap()
    }

    /// One trusted key stroke (down with its text, then up) of a character key.
    pub async fn stroke(&self, character: &str) {
        let code = format!("Key{}", character.to_uppercase());
        for kind in ["keyDown", "keyUp"] {
            let mut params = json!({"type": kind, "key": character, "code": code});
            if kind == "keyDown" {
                params["text"] = json!(character);
            }
            self.client
                .call(Some(&self.session), "Input.dispatchKeyEvent", params, WAIT)
                .await
                .unwrap();
        }
    }

    /// A trusted left click at viewport coordinates.
    pub async fn click_at(&self, x: f64, y: f64) {
        for (kind, buttons) in [("mouseMoved", 0), ("mousePressed", 1), ("mouseReleased", 0)] {
            let mut params = json!({"type": kind, "x": x, "y": y, "buttons": buttons});
            if kind != "mouseMoved" {
                params["button"] = json!("left");
                params["clickCount"] = json!(1);
            }
            self.client
                .call(
                    Some(&self.session),
                    "Input.dispatchMouseEvent",
                    params,
                    WAIT,
                )
                .await
                .unwrap();
        }
    }
}
