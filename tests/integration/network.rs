//! Process tests of network observation, rules and HTTP auth against one real headless Chromium
//! and a fixture server on 127.0.0.1 that records every request with its headers: events and
//! `browser.network.list|get` for a page with subresources and an XHR, a binary body,
//! `access_blocked` for a 403/429 main document but not for a 403 image or fetch, block, mock
//! and header rules seen by the server and removed again, never applied to an uncontrolled user
//! tab, a popup's first request observed and ruled, a page still usable after a rule is removed
//! mid-load, Basic auth accepted, rejected without a loop and unanswered after `clear`, an
//! internationalised origin matched in its punycode form, no network events for a Connection
//! without `network.read`, and no password in the journal, results or a `debug sql` dump; a
//! Workspace's rules stop applying to a user tab as soon as the Lease that controlled it ends
//! (released, or its bridge gone).

use crate::support;

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use support::chromium::{Chromium, OwnCdp};
use support::rig::{Agent, Rig, find_ref};
use support::{TestHome, wait_until};

const BIN: &str = env!("CARGO_BIN_EXE_browser-pilot");

/// Every capability, the three extras included.
const ALL_CAPABILITIES: [&str; 9] = [
    "browser.control",
    "workspace.manage",
    "observation.read",
    "action.input",
    "artifact.read",
    "event.read",
    "network.read",
    "network.control",
    "page.eval",
];

const GOOD_PASSWORD: &str = "pw1-not-in-any-output";
const WRONG_PASSWORD: &str = "wrong-pw-not-in-any-output";
const REALM3_PASSWORD: &str = "pw3-server-side-only";
/// The password of URLs with credentials (`http://user:URL_PASSWORD@host/...`).
const URL_PASSWORD: &str = "url-pw-not-in-any-output";

/// A valid 1x1 PNG: not UTF-8, so its body must come back as base64.
fn png_bytes() -> Vec<u8> {
    vec![
        0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44,
        0x52, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1f,
        0x15, 0xc4, 0x89, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0x00,
        0x01, 0x00, 0x00, 0x05, 0x00, 0x01, 0x0d, 0x0a, 0x2d, 0xb4, 0x00, 0x00, 0x00, 0x00, 0x49,
        0x45, 0x4e, 0x44, 0xae, 0x42, 0x60, 0x82,
    ]
}

/// One request the fixture server saw.
#[derive(Debug, Clone)]
struct Seen {
    path: String,
    headers: HashMap<String, String>,
}

/// A fixture server that records each request with its (lower-cased) headers.
struct Site {
    port: u16,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Site {
    fn start() -> Site {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let log = log.clone();
                std::thread::spawn(move || serve(stream, &log));
            }
        });
        Site { port, seen }
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{}", self.port, path)
    }

    fn origin(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn requests(&self, path: &str) -> Vec<Seen> {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .filter(|s| s.path == path)
            .cloned()
            .collect()
    }
}

fn basic(user: &str, password: &str) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let bytes = format!("{user}:{password}").into_bytes();
    let mut out = String::from("Basic ");
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for (i, shift) in [18u32, 12, 6, 0].into_iter().enumerate() {
            match i <= chunk.len() {
                true => out.push(char::from(ALPHABET[((n >> shift) & 63) as usize])),
                false => out.push('='),
            }
        }
    }
    out
}

fn html(title: &str, body: &str) -> Vec<u8> {
    format!("<!doctype html><html><head><title>{title}</title></head><body>{body}</body></html>")
        .into_bytes()
}

fn serve(stream: TcpStream, log: &Mutex<Vec<Seen>>) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut request_line = String::new();
    if reader.read_line(&mut request_line).is_err() {
        return;
    }
    let mut headers = HashMap::new();
    loop {
        let mut line = String::new();
        match reader.read_line(&mut line) {
            Ok(0) | Err(_) => break,
            Ok(_) if line == "\r\n" || line == "\n" => break,
            Ok(_) => {
                if let Some((name, value)) = line.split_once(':') {
                    headers.insert(name.trim().to_ascii_lowercase(), value.trim().to_owned());
                }
            }
        }
    }
    let path = request_line
        .split_whitespace()
        .nth(1)
        .unwrap_or("/")
        .to_owned();
    log.lock().unwrap().push(Seen {
        path: path.clone(),
        headers: headers.clone(),
    });
    let route = path.split('?').next().unwrap_or("/");
    if let Some(key) = headers.get("sec-websocket-key") {
        return accept_websocket(stream, key);
    }
    let authorized =
        |expected: &str| headers.get("authorization").map(String::as_str) == Some(expected);
    let (status, content_type, extra, body): (&str, &str, String, Vec<u8>) = match route {
        "/sub" => (
            "200 OK",
            "text/html",
            String::new(),
            html(
                "subresources",
                "<link rel=stylesheet href=/style.css><script src=/app.js></script><img src=/img.png><p id=out>waiting</p>\
                 <script>fetch('/api/data?x=1').then(r => r.text()).then(t => { document.getElementById('out').textContent = 'api ' + t; });</script>",
            ),
        ),
        "/busy" => (
            "200 OK",
            "text/html",
            String::new(),
            html(
                "busy",
                "<script>Promise.all(Array.from({length: 40}, (_, i) => fetch('/echo/busy-' + i)))\
                 .then(() => { document.title = 'busy done'; });</script>",
            ),
        ),
        "/style.css" => (
            "200 OK",
            "text/css",
            String::new(),
            b"body { color: #333 }".to_vec(),
        ),
        "/app.js" => (
            "200 OK",
            "application/javascript",
            String::new(),
            b"window.appLoaded = true;".to_vec(),
        ),
        "/img.png" | "/user/img.png" => ("200 OK", "image/png", String::new(), png_bytes()),
        "/api/data" => (
            "200 OK",
            "application/json",
            String::new(),
            br#"{"ok":true}"#.to_vec(),
        ),
        "/status/403" => (
            "403 Forbidden",
            "text/html",
            String::new(),
            html("forbidden", "<h1>Access denied</h1>"),
        ),
        "/status/429" => (
            "429 Too Many Requests",
            "text/html",
            String::new(),
            html("slow down", "<h1>Too many requests</h1>"),
        ),
        "/assets403" => (
            "200 OK",
            "text/html",
            String::new(),
            html(
                "assets",
                "<img src=/img403.png><script>fetch('/api/forbidden').then(r => { document.title = 'fetched ' + r.status; });</script>",
            ),
        ),
        "/img403.png" => ("403 Forbidden", "image/png", String::new(), png_bytes()),
        "/api/forbidden" => (
            "403 Forbidden",
            "application/json",
            String::new(),
            br#"{"error":"no"}"#.to_vec(),
        ),
        "/ruled" => (
            "200 OK",
            "text/html",
            String::new(),
            html(
                "ruled",
                "<img src=/blocked.png><p id=mock>none</p><p id=echo>none</p>\
                 <script>fetch('/mocked/data').then(r => r.text()).then(t => { document.getElementById('mock').textContent = t; });\
                 fetch('/echo/ruled').then(r => r.text()).then(t => { document.getElementById('echo').textContent = t; });</script>",
            ),
        ),
        "/blocked.png" => ("200 OK", "image/png", String::new(), png_bytes()),
        "/mocked/data" => (
            "200 OK",
            "text/plain",
            String::new(),
            b"from the server".to_vec(),
        ),
        r if r.starts_with("/echo/") => {
            let value = headers
                .get("x-rule")
                .cloned()
                .unwrap_or_else(|| "absent".into());
            (
                "200 OK",
                "text/plain",
                String::new(),
                format!("x-rule={value}").into_bytes(),
            )
        }
        "/opener" => (
            "200 OK",
            "text/html",
            String::new(),
            html(
                "opener",
                "<button onclick=\"window.open('/popup/first')\">open popup</button>\
                 <a href=\"/popup/blank\" target=\"_blank\">blank link</a>",
            ),
        ),
        r if r.starts_with("/popup/") => (
            "200 OK",
            "text/html",
            String::new(),
            html("popup", "<p>popup</p>"),
        ),
        "/slow" => {
            std::thread::sleep(Duration::from_millis(1500));
            ("200 OK", "image/png", String::new(), png_bytes())
        }
        "/midload" => (
            "200 OK",
            "text/html",
            String::new(),
            html(
                "midload",
                "<img src=/slow><button onclick=\"document.title='clicked'\">Press</button>",
            ),
        ),
        "/realm1/page" | "/realm2/page" | "/realm3/page" => {
            let (realm, expected) = match route {
                "/realm1/page" => ("r1", basic("user", GOOD_PASSWORD)),
                "/realm2/page" => ("r2", basic("user", GOOD_PASSWORD)),
                _ => ("r3", basic("user", REALM3_PASSWORD)),
            };
            match authorized(&expected) {
                true => (
                    "200 OK",
                    "text/html",
                    String::new(),
                    html("welcome", &format!("<h1>welcome {realm}</h1>")),
                ),
                false => (
                    "401 Unauthorized",
                    "text/html",
                    format!("WWW-Authenticate: Basic realm=\"{realm}\"\r\n"),
                    html("unauthorized", "<h1>unauthorized</h1>"),
                ),
            }
        }
        "/urlcred/page" => match authorized(&basic("user", URL_PASSWORD)) {
            true => {
                let credentialed = format!(
                    "http://user:{URL_PASSWORD}@{}",
                    headers.get("host").map_or("127.0.0.1", String::as_str)
                );
                (
                    "200 OK",
                    "text/html",
                    String::new(),
                    html(
                        "credentialed",
                        &format!(
                            "<img src=\"{credentialed}/urlcred/img.png\">\
                             <button onclick=\"window.open('{credentialed}/urlcred/popup')\">open credentialed</button>"
                        ),
                    ),
                )
            }
            false => (
                "401 Unauthorized",
                "text/html",
                "WWW-Authenticate: Basic realm=\"url\"\r\n".to_owned(),
                html("unauthorized", "<h1>unauthorized</h1>"),
            ),
        },
        "/urlcred/redirect" => (
            "302 Found",
            "text/html",
            format!(
                "Location: http://user:{URL_PASSWORD}@{}/urlcred/page\r\n",
                headers.get("host").map_or("127.0.0.1", String::as_str)
            ),
            Vec::new(),
        ),
        "/urlcred/img.png" => ("200 OK", "image/png", String::new(), png_bytes()),
        "/framed" => {
            // A cross-site (out-of-process) frame: `localhost` on the same port.
            let port = headers
                .get("host")
                .and_then(|h| h.rsplit(':').next())
                .unwrap_or("80")
                .to_owned();
            (
                "200 OK",
                "text/html",
                String::new(),
                html(
                    "framed",
                    &format!("<iframe src=\"http://localhost:{port}/frame-child\"></iframe>"),
                ),
            )
        }
        "/frame-child" => (
            "200 OK",
            "text/html",
            String::new(),
            html("child", "<img src=/frame-child.png><p>child</p>"),
        ),
        "/frame-child.png" => ("200 OK", "image/png", String::new(), png_bytes()),
        // The URL policy's pages: `to` is the port of the other (blocked) origin.
        "/policy/page" => {
            let other = format!("http://127.0.0.1:{}", query_value(&path, "to"));
            (
                "200 OK",
                "text/html",
                String::new(),
                html(
                    "policy",
                    &format!(
                        "<a href=\"{other}/policy/clicked\">to the other origin</a>\
                         <button onclick=\"window.open('{other}/policy/popup')\">open popup</button>\
                         <img src=/policy/own.png><img src=\"{other}/policy/img.png\">\
                         <iframe src=\"{other}/policy/framed\"></iframe>\
                         <iframe src=\"http://localhost:{own}/policy/socket-frame?to={port}\"></iframe>\
                         <script>\
                         fetch('{other}/policy/fetched').catch(() => {{}});\
                         new EventSource('{other}/policy/events');\
                         window.sockets = {{}};\
                         const socket = (name, url) => {{ const w = new WebSocket(url); w.onopen = () => {{ sockets[name] = 'open'; }}; w.onerror = () => {{ sockets[name] = 'error'; }}; }};\
                         socket('blocked', 'ws://127.0.0.1:{port}/policy/socket');\
                         socket('own', 'ws://' + location.host + '/policy/own-socket');\
                         new Worker('/policy/worker.js?to={port}').onmessage = e => {{ document.title = 'worker ' + e.data; }};\
                         </script>",
                        port = query_value(&path, "to"),
                        own = host_port(&headers),
                    ),
                ),
            )
        }
        // A cross-site (out-of-process) frame of the allowed port opening a socket to `to`.
        "/policy/socket-frame" => (
            "200 OK",
            "text/html",
            String::new(),
            html(
                "socket frame",
                &format!(
                    "<script>new WebSocket('ws://127.0.0.1:{}/policy/frame-socket');</script>",
                    query_value(&path, "to")
                ),
            ),
        ),
        // Its fetch and its socket to `to`, then the two outcomes.
        "/policy/worker.js" => (
            "200 OK",
            "application/javascript",
            String::new(),
            format!(
                "const fetched = fetch('http://127.0.0.1:{to}/policy/from-worker').then(r => 'fetched ' + r.status, () => 'failed');\
                 const socket = new Promise(done => {{ const w = new WebSocket('ws://127.0.0.1:{to}/policy/worker-socket'); w.onopen = () => done('open'); w.onerror = () => done('refused'); }});\
                 Promise.all([fetched, socket]).then(outcomes => postMessage(outcomes.join(' ')));",
                to = query_value(&path, "to")
            )
            .into_bytes(),
        ),
        "/policy/redirect" => (
            "302 Found",
            "text/html",
            format!(
                "Location: http://127.0.0.1:{}/policy/redirected\r\n",
                query_value(&path, "to")
            ),
            Vec::new(),
        ),
        "/policy/own.png" | "/policy/img.png" => {
            ("200 OK", "image/png", String::new(), png_bytes())
        }
        "/favicon.ico" => ("404 Not Found", "text/plain", String::new(), Vec::new()),
        _ => (
            "200 OK",
            "text/html",
            String::new(),
            html("fixture", "<p>fixture</p>"),
        ),
    };
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nCache-Control: no-store\r\n{extra}Connection: close\r\n\r\n",
        body.len()
    );
    let mut stream = stream;
    let _ = stream.write_all(head.as_bytes());
    let _ = stream.write_all(&body);
    let _ = stream.flush();
    let mut rest = Vec::new();
    let _ = reader.read_to_end(&mut rest);
}

/// Answers a WebSocket handshake (RFC 6455's accept key) and holds the socket until the page
/// closes it.
fn accept_websocket(mut stream: TcpStream, key: &str) {
    use base64::Engine as _;
    let digest = ring::digest::digest(
        &ring::digest::SHA1_FOR_LEGACY_USE_ONLY,
        format!("{key}258EAFA5-E914-47DA-95CA-C5AB0DC85B11").as_bytes(),
    );
    let accept = base64::engine::general_purpose::STANDARD.encode(digest.as_ref());
    let head = format!(
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: {accept}\r\n\r\n"
    );
    let _ = stream.write_all(head.as_bytes());
    let mut rest = Vec::new();
    let _ = stream.read_to_end(&mut rest);
}

/// The port of the request's `Host` header (`80` when it names none).
fn host_port(headers: &HashMap<String, String>) -> String {
    headers
        .get("host")
        .and_then(|h| h.rsplit_once(':'))
        .map_or("80", |(_, port)| port)
        .to_owned()
}

/// The value of `name` in the path's query (`/p?to=123` -> `123`), digits only, `0` when absent.
fn query_value(path: &str, name: &str) -> String {
    let query = path.split_once('?').map_or("", |(_, query)| query);
    let value = query
        .split('&')
        .find_map(|pair| pair.strip_prefix(name)?.strip_prefix('='))
        .unwrap_or("0");
    let digits: String = value.chars().filter(char::is_ascii_digit).collect();
    if digits.is_empty() {
        "0".to_owned()
    } else {
        digits
    }
}

/// An agent of `client` with the given capabilities, a Workspace and a Lease.
fn agent_with(rig: &Rig, client: &str, capabilities: &[&str]) -> Agent {
    let mut bridge = rig.home.spawn_bridge();
    let mut params = support::initialize_params(client, "i1", (1, 1));
    params["requestedCapabilities"] = json!(capabilities);
    bridge.ok("initialize", params);
    let ws = bridge.ok("workspaces/create", json!({}));
    let workspace_id = ws["workspace"]["id"].clone();
    let lease = bridge.ok(
        "leases/create",
        json!({"workspaceId": workspace_id, "ttlMs": 120000}),
    );
    Agent {
        bridge,
        workspace_id,
        lease_id: lease["lease"]["id"].clone(),
        cursor: ws["eventCursor"].as_str().unwrap().to_owned(),
    }
}

/// Events of `event_type` whose payload URL contains `part`, polling until `check` holds.
fn wait_events(
    agent: &mut Agent,
    seen: &mut Vec<Value>,
    check: impl Fn(&[Value]) -> bool,
    what: &str,
) {
    let ok = wait_until(Duration::from_secs(20), || {
        seen.extend(agent.events());
        check(seen)
    });
    assert!(ok, "{what}: events were {seen:#?}");
}

fn of_type<'a>(events: &'a [Value], event_type: &str, url_part: &str) -> Vec<&'a Value> {
    events
        .iter()
        .filter(|e| {
            e["type"] == event_type
                && e["payload"]["url"]
                    .as_str()
                    .is_some_and(|url| url.contains(url_part))
        })
        .collect()
}

/// Whether a `network.response` of each URL part is among `events` (responses are journaled
/// as they come, in no promised order).
fn responded(events: &[Value], parts: &[&str]) -> bool {
    parts
        .iter()
        .all(|part| !of_type(events, "network.response", part).is_empty())
}

fn list(agent: &mut Agent, target: &Value, arguments: Value) -> Vec<Value> {
    agent.tool("browser.network.list", Some(target), arguments)["requests"]
        .as_array()
        .unwrap()
        .clone()
}

fn observe(agent: &mut Agent, target: &Value) -> Value {
    agent.tool("browser.observe", Some(target), json!({}))
}

fn hint<'a>(hints: &'a Value, code: &str) -> Option<&'a Value> {
    hints
        .as_array()
        .and_then(|hints| hints.iter().find(|h| h["code"] == code))
}

/// Network events have their own retention budget: on a page that makes 40 requests, with the
/// journal at 16 events, a Connection without `network.read` still polls every event it may see
/// from the Workspace's first, while the `network.read` Connection's old cursor has expired.
#[test]
fn network_events_never_push_out_what_a_host_without_network_read_sees() {
    let profile = tempfile::tempdir().unwrap();
    let chromium = Chromium::start(profile.path());
    let home = TestHome::new()
        .with_env(
            "BROWSER_PILOT_DISCOVERY_DIRS",
            profile.path().to_str().unwrap(),
        )
        .with_env("BROWSER_PILOT_EVENT_JOURNAL_SIZE", "16");
    let rig = Rig {
        home,
        profile,
        chromium,
        fixtures: support::chromium::Fixtures::start(),
    };
    let site = Site::start();
    let mut agent = agent_with(&rig, "com.example.journal", &ALL_CAPABILITIES);
    let mut plain = rig.home.spawn_bridge();
    let init = plain.initialize("com.example.journal", "i1");
    assert_eq!(init["limits"]["service"]["eventJournalSize"], 16);
    agent.connect();
    agent.tool("browser.open", None, json!({"url": site.url("/busy")}));
    let head = |bridge: &mut support::Bridge| -> u64 {
        let got = bridge.ok("workspaces/get", json!({"workspaceId": agent.workspace_id}));
        got["eventCursor"].as_str().unwrap()["cursor:".len()..]
            .parse()
            .unwrap()
    };
    // 40 requests and their responses are journaled: far beyond the journal size.
    assert!(
        wait_until(Duration::from_secs(20), || (0..40)
            .all(|i| !site.requests(&format!("/echo/busy-{i}")).is_empty())
            && head(&mut plain) >= 80),
        "the page's requests were never all journaled"
    );
    let (code, _) = agent.bridge.err(
        "events/poll",
        json!({"workspaceId": agent.workspace_id, "cursor": "cursor:0", "limit": 1000}),
    );
    assert_eq!(
        code, "cursor_expired",
        "network.read sees the network budget"
    );

    let head_before = head(&mut plain);
    let polled = plain.ok(
        "events/poll",
        json!({"workspaceId": agent.workspace_id, "cursor": "cursor:0", "limit": 1000}),
    );
    let events = polled["events"].as_array().unwrap();
    assert_eq!(events[0]["sequence"], 1, "{events:#?}");
    assert!(
        events.len() < 16
            && events
                .iter()
                .all(|e| !e["type"].as_str().unwrap().starts_with("network.")),
        "{events:#?}"
    );
    assert!(
        events.iter().any(|e| e["type"] == "command.status"
            && e["payload"]["method"] == "browser.open"
            && e["payload"]["status"] == "completed"),
        "{events:#?}"
    );
    assert_eq!(polled["hasMore"], false);
    // The cursor passes over the network events it may not see, up to the journal's head when
    // the poll ran (the page may still journal events while the test reads it).
    let next: u64 = polled["nextCursor"].as_str().unwrap()["cursor:".len()..]
        .parse()
        .unwrap();
    let head_after = head(&mut plain);
    assert!(
        (head_before..=head_after).contains(&next),
        "nextCursor {next}, head {head_before} before the poll and {head_after} after"
    );
}

#[test]
fn network_observation_rules_and_auth_on_controlled_tabs_only() {
    let log = tempfile::NamedTempFile::new().unwrap();
    let rig = Rig::start_logging(log.path());
    let site = Site::start();
    observation_and_access_blocked(&rig, &site);
    rules_block_mock_headers_popup_and_user_tab(&rig, &site);
    http_auth_accepted_rejected_and_cleared(&rig, &site, log.path());
    internationalised_auth_origin_matches_the_punycode_challenge(&rig, &site);
    url_credentials_reported_nowhere(&rig, &site, log.path());
}

fn observation_and_access_blocked(rig: &Rig, site: &Site) {
    let mut agent = agent_with(rig, "com.example.network", &ALL_CAPABILITIES);
    // The same Principal without the extras: it hears the Workspace's events, but no network ones.
    let mut plain = rig.home.spawn_bridge();
    plain.initialize("com.example.network", "i1");
    agent.connect();
    let opened = agent.tool("browser.open", None, json!({"url": site.url("/sub")}));
    let target = opened["targetId"].clone();
    let mut events = Vec::new();
    let parts = ["/sub", "/style.css", "/app.js", "/img.png", "/api/data"];
    wait_events(
        &mut agent,
        &mut events,
        |e| responded(e, &parts),
        "every subresource's response",
    );
    for part in parts {
        assert_eq!(
            of_type(&events, "network.request", part).len(),
            1,
            "request {part}"
        );
        assert_eq!(
            of_type(&events, "network.response", part).len(),
            1,
            "response {part}"
        );
    }
    let document = of_type(&events, "network.response", "/sub")[0];
    assert_eq!(document["targetId"], target);
    assert_eq!(document["sensitivity"], "browser_data");
    assert_eq!(document["payload"]["status"], 200);
    assert_eq!(document["payload"]["resourceType"], "Document");
    assert_eq!(document["payload"]["mainDocument"], true);
    assert!(
        document["payload"]["requestId"]
            .as_str()
            .unwrap()
            .starts_with("request:")
    );
    assert!(document["payload"].get("hints").is_none());
    let xhr = of_type(&events, "network.response", "/api/data")[0];
    assert_eq!(xhr["payload"]["resourceType"], "Fetch");
    assert_eq!(xhr["payload"]["mimeType"], "application/json");
    // Bounded metadata only: no headers, bodies or cookies in any network event.
    for event in events
        .iter()
        .filter(|e| e["type"].as_str().unwrap().starts_with("network."))
    {
        let payload = event["payload"].as_object().unwrap();
        for key in payload.keys() {
            assert!(
                [
                    "requestId",
                    "method",
                    "url",
                    "resourceType",
                    "mainDocument",
                    "status",
                    "mimeType",
                    "fromCache",
                    "timing",
                    "targetId",
                    "hints",
                    "failed",
                    "errorText",
                    "blockedByRule"
                ]
                .contains(&key.as_str()),
                "unexpected {key} in {event}"
            );
        }
        let text = event.to_string();
        assert!(!text.contains("Mozilla/"), "a header value leaked: {text}");
    }

    // list: filters and cursor pages.
    let all = list(&mut agent, &target, json!({}));
    assert!(all.len() >= 5, "{all:?}");
    let images = list(&mut agent, &target, json!({"resourceType": "Image"}));
    assert_eq!(images.len(), 1);
    assert!(images[0]["url"].as_str().unwrap().ends_with("/img.png"));
    let api = list(&mut agent, &target, json!({"urlContains": "/api/"}));
    assert_eq!(api.len(), 1);
    assert_eq!(
        list(
            &mut agent,
            &target,
            json!({"status": 404, "urlContains": "/api/"})
        )
        .len(),
        0
    );
    let first = agent.tool("browser.network.list", Some(&target), json!({"limit": 2}));
    assert_eq!(first["hasMore"], true);
    let second = agent.tool(
        "browser.network.list",
        Some(&target),
        json!({"limit": 2, "cursor": first["nextCursor"]}),
    );
    assert_ne!(
        first["requests"][0]["requestId"],
        second["requests"][0]["requestId"]
    );
    let (code, error) = agent.tool_err(
        "browser.network.list",
        Some(&target),
        json!({"cursor": "bogus"}),
    );
    assert_eq!(code, "invalid_params", "{error}");
    assert_eq!(error["data"]["context"]["path"], "arguments.cursor");

    // get: headers, a text body and a binary body as base64.
    let script = of_type(&events, "network.response", "/app.js")[0]["payload"]["requestId"].clone();
    let got = agent.tool(
        "browser.network.get",
        Some(&target),
        json!({"requestId": script, "includeBody": true}),
    );
    assert_eq!(got["body"]["encoding"], "utf8");
    assert_eq!(got["body"]["data"], "window.appLoaded = true;");
    let response_headers = got["request"]["responseHeaders"].as_array().unwrap();
    assert!(response_headers.iter().any(|h| {
        h["name"]
            .as_str()
            .unwrap()
            .eq_ignore_ascii_case("content-type")
            && h["value"] == "application/javascript"
    }));
    let image = images[0]["requestId"].clone();
    let got = agent.tool(
        "browser.network.get",
        Some(&target),
        json!({"requestId": image, "includeBody": true}),
    );
    assert_eq!(got["body"]["encoding"], "base64", "{got}");
    assert_eq!(got["body"]["bytes"], png_bytes().len(), "{got}");
    assert_eq!(got["body"]["truncated"], false);
    let cut = agent.tool(
        "browser.network.get",
        Some(&target),
        json!({"requestId": image, "includeBody": true, "maxBodyBytes": 30}),
    );
    assert_eq!(cut["body"]["truncated"], true);
    assert_eq!(cut["body"]["data"].as_str().unwrap().len(), 40);
    let without = agent.tool(
        "browser.network.get",
        Some(&target),
        json!({"requestId": image}),
    );
    assert!(without.get("body").is_none());
    let (code, _) = agent.tool_err(
        "browser.network.get",
        Some(&target),
        json!({"requestId": "request:0000"}),
    );
    assert_eq!(code, "request_not_found");

    // access_blocked: a 403 and a 429 main document, on the event and the next Observation.
    for (path, status) in [("/status/403", 403), ("/status/429", 429)] {
        agent.tool(
            "browser.navigate",
            Some(&target),
            json!({"action": "goto", "url": site.url(path)}),
        );
        wait_events(
            &mut agent,
            &mut events,
            |e| !of_type(e, "network.response", path).is_empty(),
            "the blocked document's response",
        );
        let response = of_type(&events, "network.response", path)[0];
        let blocked =
            hint(&response["payload"]["hints"], "access_blocked").expect("hint on the event");
        assert_eq!(blocked["source"], "network");
        assert_eq!(blocked["status"], status);
        let observation = observe(&mut agent, &target);
        let seen = hint(&observation["hints"], "access_blocked").expect("hint on the Observation");
        // The same hint; the page's own text may add evidence beside the status.
        for field in [
            "code",
            "source",
            "confidence",
            "recommendedAction",
            "blocking",
            "status",
        ] {
            assert_eq!(seen[field], blocked[field], "{field}: {seen} vs {blocked}");
        }
        assert!(
            seen["evidence"]
                .as_array()
                .unwrap()
                .contains(&json!(format!("http_{status}")))
        );
    }
    // ... but not for a 403 image or fetch on a 200 document.
    agent.tool(
        "browser.navigate",
        Some(&target),
        json!({"action": "goto", "url": site.url("/assets403")}),
    );
    let parts = ["/img403.png", "/api/forbidden", "/assets403"];
    wait_events(
        &mut agent,
        &mut events,
        |e| responded(e, &parts),
        "the forbidden image and fetch",
    );
    for part in parts {
        let response = of_type(&events, "network.response", part)[0];
        assert!(response["payload"].get("hints").is_none(), "{response}");
    }
    assert_eq!(
        of_type(&events, "network.response", "/img403.png")[0]["payload"]["status"],
        403
    );
    let observation = observe(&mut agent, &target);
    assert!(
        hint(&observation["hints"], "access_blocked").is_none(),
        "{}",
        observation["hints"]
    );

    // The Connection without network.read: other events of the Workspace, no network ones.
    let notifications = plain.drain_notifications(Duration::from_millis(500));
    let types: Vec<&str> = notifications
        .iter()
        .filter_map(|n| n["params"]["event"]["type"].as_str())
        .collect();
    assert!(types.contains(&"document.changed"), "{types:?}");
    assert!(
        !types.iter().any(|t| t.starts_with("network.")),
        "{types:?}"
    );
    let polled = plain.ok(
        "events/poll",
        json!({"workspaceId": agent.workspace_id, "cursor": "cursor:0", "limit": 1000}),
    );
    let polled_types: Vec<&str> = polled["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["type"].as_str())
        .collect();
    assert!(
        polled_types.contains(&"document.changed"),
        "{polled_types:?}"
    );
    assert!(
        !polled_types.iter().any(|t| t.starts_with("network.")),
        "{polled_types:?}"
    );
    let mut tools_seen = agent.bridge.drain_notifications(Duration::from_millis(200));
    tools_seen.retain(|n| {
        n["params"]["event"]["type"]
            .as_str()
            .is_some_and(|t| t.starts_with("network."))
    });
    assert!(
        !tools_seen.is_empty(),
        "the network.read Connection hears network events"
    );
    // An out-of-process frame's requests, from its first subresource, belong to its tab.
    agent.tool(
        "browser.navigate",
        Some(&target),
        json!({"action": "goto", "url": site.url("/framed")}),
    );
    wait_events(
        &mut agent,
        &mut events,
        |e| !of_type(e, "network.response", "/frame-child.png").is_empty(),
        "the out-of-process frame's image",
    );
    let child_image = of_type(&events, "network.request", "/frame-child.png")[0];
    assert_eq!(child_image["targetId"], target);
    assert!(
        child_image["payload"]["url"]
            .as_str()
            .unwrap()
            .starts_with("http://localhost:")
    );
    assert_eq!(child_image["payload"]["mainDocument"], false);
    let denied = plain.call(
        "tools/call",
        json!({"name": "browser.network.list", "arguments": {}, "workspaceId": agent.workspace_id, "leaseId": agent.lease_id, "targetId": target}),
    );
    assert_eq!(
        denied["error"]["data"]["code"], "capability_denied",
        "{denied}"
    );
    agent.tool("browser.tabs.close", Some(&target), json!({}));
}

fn rules_block_mock_headers_popup_and_user_tab(rig: &Rig, site: &Site) {
    let mut agent = agent_with(rig, "com.example.rules", &ALL_CAPABILITIES);
    agent.connect();
    // Bad input names its path.
    let (code, error) = agent.tool_err(
        "browser.network.rules.add",
        None,
        json!({"urlPattern": "has space", "action": "block"}),
    );
    assert_eq!(code, "invalid_params");
    assert_eq!(error["data"]["context"]["path"], "arguments.urlPattern");
    let (code, error) = agent.tool_err(
        "browser.network.rules.add",
        None,
        json!({"urlPattern": "*", "action": "headers", "headers": [{"name": "X-Ok", "value": "1"}, {"name": "Bad Name", "value": "1"}]}),
    );
    assert_eq!(code, "invalid_params");
    assert_eq!(error["data"]["context"]["path"], "arguments.headers[1]");

    let block = agent.tool(
        "browser.network.rules.add",
        None,
        json!({"urlPattern": "*/blocked.png*", "action": "block"}),
    )["rule"]
        .clone();
    let mock = agent.tool(
        "browser.network.rules.add",
        None,
        json!({"urlPattern": "*/mocked/*", "action": "mock", "status": 200, "headers": [{"name": "Content-Type", "value": "text/plain"}, {"name": "Access-Control-Allow-Origin", "value": "*"}], "body": "from the rule"}),
    )["rule"]
        .clone();
    let headers = agent.tool(
        "browser.network.rules.add",
        None,
        json!({"urlPattern": "*/echo/*", "action": "headers", "headers": [{"name": "X-Rule", "value": "secret-token-1"}]}),
    )["rule"]
        .clone();
    assert_eq!(headers["headerNames"], json!(["X-Rule"]));
    let listed = agent.tool("browser.network.rules.list", None, json!({}));
    assert_eq!(listed["rules"].as_array().unwrap().len(), 3);
    assert!(
        !listed.to_string().contains("secret-token-1"),
        "header values are not echoed"
    );

    // An uncontrolled user tab beside the managed one: never ruled.
    let mut own = OwnCdp::connect(&rig.chromium);
    own.open_user_tab(&site.url("/ruled?user"));
    let opened = agent.tool(
        "browser.open",
        None,
        json!({"url": site.url("/ruled?managed")}),
    );
    let target = opened["targetId"].clone();
    assert!(wait_until(Duration::from_secs(20), || {
        let observation = agent.tool("browser.read", Some(&target), json!({}));
        let text = observation.to_string();
        text.contains("from the rule") && text.contains("x-rule=secret-token-1")
    }));
    // Both tabs' echoes, and the user tab's image and fetch (each on its own connection, so
    // logged in no particular order).
    assert!(wait_until(Duration::from_secs(20), || site
        .requests("/echo/ruled")
        .len()
        >= 2
        && !site.requests("/blocked.png").is_empty()
        && !site.requests("/mocked/data").is_empty()));
    // The server saw the managed tab's header; the merged request kept the original headers.
    let echoes = site.requests("/echo/ruled");
    let ruled: Vec<&Seen> = echoes
        .iter()
        .filter(|s| s.headers.contains_key("x-rule"))
        .collect();
    assert_eq!(ruled.len(), 1, "{echoes:?}");
    assert_eq!(ruled[0].headers["x-rule"], "secret-token-1");
    assert!(ruled[0].headers.contains_key("user-agent") && ruled[0].headers.contains_key("accept"));
    // Blocked and mocked requests never reached the server from the managed tab; the user tab's did.
    assert_eq!(
        site.requests("/blocked.png").len(),
        1,
        "only the user tab's image"
    );
    assert_eq!(
        site.requests("/mocked/data").len(),
        1,
        "only the user tab's fetch"
    );
    let failed = list(&mut agent, &target, json!({"urlContains": "/blocked.png"}));
    assert_eq!(failed[0]["failed"], true);

    // A popup's first request is observed and ruled.
    agent.tool(
        "browser.network.rules.add",
        None,
        json!({"urlPattern": "*/popup/*", "action": "headers", "headers": [{"name": "X-Rule", "value": "popup"}]}),
    );
    agent.tool(
        "browser.navigate",
        Some(&target),
        json!({"action": "goto", "url": site.url("/opener")}),
    );
    let observation = observe(&mut agent, &target);
    let button = find_ref(&observation, "button", "open popup");
    agent.tool(
        "browser.click",
        Some(&target),
        json!({"observationId": observation["observationId"], "ref": button}),
    );
    let mut events = Vec::new();
    wait_events(
        &mut agent,
        &mut events,
        |e| e.iter().any(|e| e["type"] == "popup.opened"),
        "popup.opened",
    );
    let popup = events.iter().find(|e| e["type"] == "popup.opened").unwrap();
    let popup_target = popup["payload"]["targetId"].clone();
    wait_events(
        &mut agent,
        &mut events,
        |e| {
            of_type(e, "network.response", "/popup/first")
                .iter()
                .any(|r| r["targetId"] == popup_target)
        },
        "the popup's first response",
    );
    let first = site.requests("/popup/first");
    assert_eq!(first.len(), 1);
    assert_eq!(
        first[0].headers.get("x-rule").map(String::as_str),
        Some("popup"),
        "ruled"
    );

    // A `target="_blank"` link opens a `noopener` popup, which cannot be set up while it is
    // paused: it is resumed anyway and set up right after, so it loads and can be driven at
    // once (not after a setup timeout).
    let observation = observe(&mut agent, &target);
    let link = find_ref(&observation, "link", "blank link");
    agent.tool(
        "browser.click",
        Some(&target),
        json!({"observationId": observation["observationId"], "ref": link}),
    );
    wait_events(
        &mut agent,
        &mut events,
        |e| e.iter().filter(|e| e["type"] == "popup.opened").count() == 2,
        "the second popup.opened",
    );
    let blank = events
        .iter()
        .filter(|e| e["type"] == "popup.opened")
        .nth(1)
        .unwrap()["payload"]["targetId"]
        .clone();
    // popup.opened comes as the tab is made: its page may still be committing, so observe
    // until it is there, within a bound well short of the setup timeout.
    let mut observed = Value::Null;
    let loaded = wait_until(Duration::from_secs(6), || {
        let response = agent.bridge.call(
            "tools/call",
            json!({"name": "browser.observe", "arguments": {}, "workspaceId": agent.workspace_id,
                   "leaseId": agent.lease_id, "targetId": blank, "deadlineMs": 6000}),
        );
        observed = response["result"]["result"].clone();
        observed["title"] == "popup"
    });
    assert!(loaded, "{observed}");
    assert_eq!(site.requests("/popup/blank").len(), 1);

    // Removed rules stop applying.
    for rule in [&block, &mock, &headers] {
        let removed = agent.tool(
            "browser.network.rules.remove",
            None,
            json!({"ruleId": rule["ruleId"]}),
        );
        assert_eq!(removed["removed"], true);
    }
    let (code, _) = agent.tool_err(
        "browser.network.rules.remove",
        None,
        json!({"ruleId": block["ruleId"]}),
    );
    assert_eq!(code, "rule_not_found");
    agent.tool(
        "browser.navigate",
        Some(&target),
        json!({"action": "goto", "url": site.url("/ruled?after")}),
    );
    assert!(wait_until(Duration::from_secs(20), || {
        let text = agent
            .tool("browser.read", Some(&target), json!({}))
            .to_string();
        text.contains("from the server") && text.contains("x-rule=absent")
    }));
    assert_eq!(site.requests("/blocked.png").len(), 2);

    // A rule removed while its page is still loading: the page finishes and stays usable.
    agent.tool(
        "browser.network.rules.add",
        None,
        json!({"urlPattern": "*/slow*", "action": "headers", "headers": [{"name": "X-Rule", "value": "slow"}]}),
    );
    let rules = agent.tool("browser.network.rules.list", None, json!({}));
    let slow_rule = rules["rules"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["urlPattern"] == "*/slow*")
        .unwrap()["ruleId"]
        .clone();
    let navigate = agent.bridge.request(
        "tools/call",
        json!({"name": "browser.navigate", "arguments": {"action": "goto", "url": site.url("/midload")}, "workspaceId": agent.workspace_id, "leaseId": agent.lease_id, "targetId": target}),
    );
    assert!(wait_until(Duration::from_secs(20), || !site
        .requests("/slow")
        .is_empty()));
    let removed = agent.tool(
        "browser.network.rules.remove",
        None,
        json!({"ruleId": slow_rule}),
    );
    assert_eq!(removed["removed"], true);
    let navigated = agent.bridge.response(&navigate);
    assert!(navigated.get("result").is_some(), "{navigated}");
    let observation = observe(&mut agent, &target);
    let press = find_ref(&observation, "button", "Press");
    agent.tool(
        "browser.click",
        Some(&target),
        json!({"observationId": observation["observationId"], "ref": press}),
    );
    let clicked = observe(&mut agent, &target);
    assert_eq!(clicked["title"], "clicked", "the page is usable: {clicked}");
    agent.bridge.ok(
        "workspaces/release",
        json!({"workspaceId": agent.workspace_id}),
    );
}

fn http_auth_accepted_rejected_and_cleared(rig: &Rig, site: &Site, log: &std::path::Path) {
    let mut agent = agent_with(rig, "com.example.auth", &ALL_CAPABILITIES);
    agent.connect();
    let set = agent.tool(
        "browser.auth.set",
        None,
        json!({"origin": site.origin(), "username": "user", "password": GOOD_PASSWORD}),
    );
    assert_eq!(set, json!({"origin": site.origin(), "replaced": false}));
    let (code, error) = agent.tool_err(
        "browser.auth.set",
        None,
        json!({"origin": "ftp://x", "username": "u", "password": "p"}),
    );
    assert_eq!(code, "invalid_params");
    assert_eq!(error["data"]["context"]["path"], "arguments.origin");

    // Accepted.
    let opened = agent.tool(
        "browser.open",
        None,
        json!({"url": site.url("/realm1/page")}),
    );
    let target = opened["targetId"].clone();
    assert_eq!(opened["title"], "welcome");
    let realm1 = site.requests("/realm1/page");
    assert!(realm1.len() <= 2, "{realm1:?}");
    assert_eq!(
        realm1.last().unwrap().headers.get("authorization"),
        Some(&basic("user", GOOD_PASSWORD))
    );

    // Rejected: cancelled on the second challenge instead of looping.
    let replaced = agent.tool(
        "browser.auth.set",
        None,
        json!({"origin": site.origin(), "username": "user", "password": WRONG_PASSWORD}),
    );
    assert_eq!(replaced["replaced"], true);
    let rejected = agent.tool(
        "browser.navigate",
        Some(&target),
        json!({"action": "goto", "url": site.url("/realm3/page")}),
    );
    assert_eq!(rejected["title"], "unauthorized", "{rejected}");
    let realm3 = site.requests("/realm3/page");
    let challenged = realm3.len();
    assert!(challenged <= 2, "at most two challenges: {realm3:?}");
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        site.requests("/realm3/page").len(),
        challenged,
        "no loop afterwards"
    );

    // Cleared: a challenge of a new realm is left to the browser (no credentials sent).
    let cleared = agent.tool("browser.auth.clear", None, json!({}));
    assert_eq!(cleared["cleared"], 1);
    // Chromium's own handling: headless has no prompt, so the load ends as a failed auth.
    let after = agent.call(
        "browser.navigate",
        Some(&target),
        json!({"action": "goto", "url": site.url("/realm2/page")}),
    );
    let failed = after["error"]["data"]["context"]["errorText"].as_str();
    let shown = after["result"]["result"]["title"].as_str();
    assert!(
        failed == Some("net::ERR_INVALID_AUTH_CREDENTIALS") || shown == Some("unauthorized"),
        "{after}"
    );
    let realm2 = site.requests("/realm2/page");
    assert_eq!(realm2.len(), 1, "{realm2:?}");
    assert!(!realm2[0].headers.contains_key("authorization"));

    // No password anywhere: journal, debug sql dump of every table, Broker log.
    let mut journal = agent
        .bridge
        .ok(
            "events/poll",
            json!({"workspaceId": agent.workspace_id, "cursor": "cursor:0", "limit": 1000}),
        )
        .to_string();
    journal.push_str(
        &agent
            .events()
            .iter()
            .map(Value::to_string)
            .collect::<String>(),
    );
    let mut dump = String::new();
    for table in [
        "events",
        "commands",
        "workspaces",
        "leases",
        "connections",
        "principals",
        "artifacts",
    ] {
        let (code, out, err) = rig
            .home
            .run(BIN, &["debug", "sql", &format!("SELECT * FROM {table}")]);
        assert_eq!(code, 0, "debug sql {table}: {err}");
        dump.push_str(&out);
    }
    assert!(
        dump.contains("browser.auth.set"),
        "the dump shows the auth Commands"
    );
    let broker_log = std::fs::read_to_string(log).unwrap_or_default();
    assert!(
        broker_log.contains("Fetch.continueWithAuth"),
        "the trace log shows the auth answers (without their password)"
    );
    for secret in [
        GOOD_PASSWORD,
        WRONG_PASSWORD,
        &basic("user", GOOD_PASSWORD)[6..],
    ] {
        assert!(!journal.contains(secret), "journal holds a password");
        assert!(!dump.contains(secret), "debug sql holds a password");
        assert!(
            !broker_log.contains(secret),
            "the Broker log holds a password"
        );
    }
    // Headers read back never carry the Authorization value the Broker supplied.
    let requests = list(&mut agent, &target, json!({"urlContains": "/realm1/"}));
    for request in requests {
        let got = agent.tool(
            "browser.network.get",
            Some(&target),
            json!({"requestId": request["requestId"]}),
        );
        assert!(
            !got.to_string().contains(&basic("user", GOOD_PASSWORD)[6..]),
            "{got}"
        );
    }
}

/// An origin given with an internationalised host (`bücher.localhost`, which Chromium resolves
/// to loopback) is stored in the punycode form Chromium reports in its challenge, so the
/// credential is sent.
fn internationalised_auth_origin_matches_the_punycode_challenge(rig: &Rig, site: &Site) {
    let mut agent = agent_with(rig, "com.example.idn", &ALL_CAPABILITIES);
    agent.connect();
    let punycode = format!("xn--bcher-kva.localhost:{}", site.port);
    let set = agent.tool(
        "browser.auth.set",
        None,
        json!({"origin": format!("http://Bücher.localhost:{}/", site.port), "username": "user", "password": GOOD_PASSWORD}),
    );
    assert_eq!(
        set,
        json!({"origin": format!("http://{punycode}"), "replaced": false})
    );
    let opened = agent.tool(
        "browser.open",
        None,
        json!({"url": format!("http://bücher.localhost:{}/realm1/page", site.port)}),
    );
    assert_eq!(opened["title"], "welcome", "{opened}");
    let seen: Vec<Seen> = site
        .requests("/realm1/page")
        .into_iter()
        .filter(|s| s.headers.get("host") == Some(&punycode))
        .collect();
    assert!(!seen.is_empty() && seen.len() <= 2, "{seen:?}");
    assert_eq!(
        seen.last().unwrap().headers.get("authorization"),
        Some(&basic("user", GOOD_PASSWORD))
    );
    let cleared = agent.tool(
        "browser.auth.clear",
        None,
        json!({"origin": format!("http://bücher.localhost:{}", site.port)}),
    );
    assert_eq!(cleared["cleared"], 1);
}

/// A tab opened at `http://user:PASSWORD@host/...` (through a redirect whose `Location` carries
/// the password too), a credentialed image and a credentialed popup: the password is in no tool
/// result, `tabs.list`, event, network record, `debug sql` dump or Broker log line, while the
/// server did get it.
fn url_credentials_reported_nowhere(rig: &Rig, site: &Site, log: &std::path::Path) {
    let mut agent = agent_with(rig, "com.example.urlcred", &ALL_CAPABILITIES);
    agent.connect();
    let credentialed =
        |path: &str| format!("http://user:{URL_PASSWORD}@127.0.0.1:{}{path}", site.port);
    let mut output = String::new();
    let opened = agent.tool(
        "browser.open",
        None,
        json!({"url": credentialed("/urlcred/redirect")}),
    );
    output.push_str(&opened.to_string());
    assert_eq!(opened["title"], "credentialed", "{opened}");
    let target = opened["targetId"].clone();
    assert!(
        site.requests("/urlcred/page")
            .iter()
            .any(|s| s.headers.get("authorization") == Some(&basic("user", URL_PASSWORD))),
        "the browser used the URL's credentials"
    );
    let navigated = agent.tool(
        "browser.navigate",
        Some(&target),
        json!({"action": "goto", "url": credentialed("/urlcred/page?again")}),
    );
    output.push_str(&navigated.to_string());
    let observation = observe(&mut agent, &target);
    output.push_str(&observation.to_string());
    let button = find_ref(&observation, "button", "open credentialed");
    let clicked = agent.tool(
        "browser.click",
        Some(&target),
        json!({"observationId": observation["observationId"], "ref": button}),
    );
    output.push_str(&clicked.to_string());
    let mut events = Vec::new();
    wait_events(
        &mut agent,
        &mut events,
        |e| e.iter().any(|e| e["type"] == "popup.opened") && responded(e, &["/urlcred/page?again"]),
        "popup.opened and the page's response",
    );
    let popup = events.iter().find(|e| e["type"] == "popup.opened").unwrap();
    let popup_target = popup["payload"]["targetId"].clone();
    let popup_read = agent.tool("browser.read", Some(&popup_target), json!({}));
    output.push_str(&popup_read.to_string());
    let tabs = agent.tabs();
    output.push_str(&json!(tabs).to_string());
    for tab in [&target, &popup_target] {
        for request in list(&mut agent, tab, json!({})) {
            output.push_str(&request.to_string());
            let got = agent.tool(
                "browser.network.get",
                Some(tab),
                json!({"requestId": request["requestId"]}),
            );
            output.push_str(&got.to_string());
        }
    }
    let journal = agent.bridge.ok(
        "events/poll",
        json!({"workspaceId": agent.workspace_id, "cursor": "cursor:0", "limit": 1000}),
    );
    output.push_str(&journal.to_string());
    events.extend(agent.events());
    output.push_str(&json!(events).to_string());
    // The URLs were reported, with the password replaced.
    assert!(
        output.contains(&format!("user:[redacted]@127.0.0.1:{}/urlcred/", site.port)),
        "{output}"
    );
    let mut dump = String::new();
    for table in ["events", "commands"] {
        let (code, out, err) = rig
            .home
            .run(BIN, &["debug", "sql", &format!("SELECT * FROM {table}")]);
        assert_eq!(code, 0, "debug sql {table}: {err}");
        dump.push_str(&out);
    }
    let broker_log = std::fs::read_to_string(log).unwrap_or_default();
    for (place, text) in [
        ("output", &output),
        ("debug sql", &dump),
        ("Broker log", &broker_log),
    ] {
        let leaks: Vec<&str> = text
            .match_indices(URL_PASSWORD)
            .map(|(at, _)| &text[at.saturating_sub(160)..(at + 40).min(text.len())])
            .collect();
        assert!(
            leaks.is_empty(),
            "the {place} holds a URL password: {leaks:#?}"
        );
    }
    agent.bridge.ok(
        "workspaces/release",
        json!({"workspaceId": agent.workspace_id}),
    );
}

/// The user reloads their tab at `/ruled?user` (a script timer, so the evaluation returns
/// first); returns the request its `/echo/ruled` fetch made to the server.
fn user_reload(own: &mut OwnCdp, site: &Site) -> Seen {
    let before = site.requests("/echo/ruled").len();
    own.evaluate_in_page(
        "/ruled?user",
        "setTimeout(() => location.reload(), 0); true",
    );
    assert!(
        wait_until(Duration::from_secs(20), || site
            .requests("/echo/ruled")
            .len()
            > before),
        "the reloaded page's fetch never reached the server"
    );
    site.requests("/echo/ruled").pop().unwrap()
}

/// A user reload of the tab: whether its `/echo/ruled` fetch carried the header rule's `X-Rule`
/// and whether the block rule held its image back, with what the server saw and the image's
/// width, for messages.
fn reload_outcome(own: &mut OwnCdp, site: &Site) -> (bool, bool, Seen, Value) {
    let echo = user_reload(own, site);
    let ruled = echo.headers.get("x-rule").map(String::as_str) == Some("lease");
    // The image's fate, once the page settled it: loaded (1 px wide) or blocked (0).
    let mut width = Value::Null;
    assert!(
        wait_until(Duration::from_secs(20), || {
            width = own.evaluate_in_page(
                "/ruled?user",
                "document.readyState === 'complete' && document.images[0].complete ? document.images[0].naturalWidth : null",
            )["result"]["value"]
                .clone();
            !width.is_null()
        }),
        "the image never settled"
    );
    let blocked = width == 0;
    (ruled, blocked, echo, width)
}

/// Whether a user reload of the tab went out ruled (the block rule held its image back and the
/// header rule added `X-Rule`) or as the page asked (its image fetched, no header).
fn reload_is_ruled(own: &mut OwnCdp, site: &Site) -> bool {
    let (ruled, blocked, echo, width) = reload_outcome(own, site);
    assert_eq!(
        ruled, blocked,
        "both rules or neither: {echo:?}, width {width}"
    );
    ruled
}

/// A Workspace's rules apply to a user tab only while one of its Leases controls the tab: not
/// before, and not after the Lease ends, whether it is released or its bridge goes away (the
/// tab is refreshed when the Lease ends, not when the Workspace is reclaimed).
#[test]
fn rules_stop_applying_to_a_user_tab_when_its_lease_ends() {
    let log = tempfile::NamedTempFile::new().unwrap();
    let rig = Rig::start_logging(log.path());
    let site = Site::start();
    let mut agent = agent_with(&rig, "com.example.leased-rules", &ALL_CAPABILITIES);
    agent.connect();
    agent.tool(
        "browser.network.rules.add",
        None,
        json!({"urlPattern": "*/blocked.png*", "action": "block"}),
    );
    agent.tool(
        "browser.network.rules.add",
        None,
        json!({"urlPattern": "*/echo/*", "action": "headers", "headers": [{"name": "X-Rule", "value": "lease"}]}),
    );
    let mut own = OwnCdp::connect(&rig.chromium);
    own.open_user_tab(&site.url("/ruled?user"));
    own.wait_for_document("/ruled?user", "ruled");
    assert!(
        !reload_is_ruled(&mut own, &site),
        "nobody controls the tab yet"
    );

    // Controlled through a Lease: ruled, even when the user reloads it.
    let user_tab = |agent: &mut Agent| {
        agent
            .tabs()
            .into_iter()
            .find(|t| t["url"].as_str().unwrap_or("").ends_with("/ruled?user"))
            .expect("the user tab is listed")["targetId"]
            .clone()
    };
    let target = user_tab(&mut agent);
    agent.tool("browser.observe", Some(&target), json!({}));
    assert!(reload_is_ruled(&mut own, &site), "controlled: ruled");

    // The Lease is released, the Workspace and its rules stay: the tab is no longer ruled.
    let id = (agent.workspace_id.clone(), agent.lease_id.clone());
    agent.bridge.ok(
        "leases/release",
        json!({"workspaceId": id.0, "leaseId": id.1}),
    );
    let listed = agent.bridge.call(
        "tools/call",
        json!({"name": "browser.network.rules.list", "arguments": {}, "workspaceId": id.0}),
    );
    assert!(
        listed.get("error").is_some(),
        "no Lease, no tool call: {listed}"
    );
    assert!(!reload_is_ruled(&mut own, &site), "released: not ruled");

    // A new Lease takes control again; then its bridge goes away (end of input).
    let lease = agent.bridge.ok(
        "leases/create",
        json!({"workspaceId": id.0, "ttlMs": 120000}),
    );
    agent.lease_id = lease["lease"]["id"].clone();
    agent.tool("browser.observe", Some(&target), json!({}));
    assert_eq!(
        agent.tool("browser.network.rules.list", None, json!({}))["rules"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    assert!(reload_is_ruled(&mut own, &site), "controlled again: ruled");
    agent.bridge.close_stdin();
    assert!(agent.bridge.wait_exit(Duration::from_secs(10)).is_some());
    // The Broker ends the Lease when it sees the Connection close, just after the bridge exits;
    // each request is decided by the rules as they are when it is paused, so a reload under way
    // while the Lease ends may go out half ruled (its image blocked, its later fetch not).
    assert!(
        wait_until(Duration::from_secs(20), || {
            let (ruled, blocked, _, _) = reload_outcome(&mut own, &site);
            !ruled && !blocked
        }),
        "rules still applied after the controlling bridge went away"
    );
    assert!(
        !reload_is_ruled(&mut own, &site),
        "the Lease ended: not ruled"
    );
}

/// An agent whose Workspace is created with `workspace_params` (a `urlPolicy`), with a Lease.
fn agent_with_workspace(rig: &Rig, client: &str, workspace_params: Value) -> Agent {
    let mut bridge = rig.home.spawn_bridge();
    let mut params = support::initialize_params(client, "i1", (1, 1));
    params["requestedCapabilities"] = json!(ALL_CAPABILITIES);
    bridge.ok("initialize", params);
    let ws = bridge.ok("workspaces/create", workspace_params);
    let workspace_id = ws["workspace"]["id"].clone();
    let lease = bridge.ok(
        "leases/create",
        json!({"workspaceId": workspace_id, "ttlMs": 120000}),
    );
    Agent {
        bridge,
        workspace_id,
        lease_id: lease["lease"]["id"].clone(),
        cursor: ws["eventCursor"].as_str().unwrap().to_owned(),
    }
}

/// Whether a `network.response` for a URL containing `part` says the URL policy blocked it.
fn policy_blocked(events: &[Value], part: &str) -> bool {
    of_type(events, "network.response", part)
        .iter()
        .any(|e| e["payload"]["failed"] == true && e["payload"]["urlPolicy"]["reason"] == "blocked")
}

/// A Workspace's `urlPolicy` against a fixture site on two origins (two ports of 127.0.0.1, one
/// blocked): bad patterns and a changed policy under the same `clientKey` are refused; a
/// navigation to the blocked origin answers `url_blocked` before dispatch; the page's image,
/// fetch, EventSource, iframe, dedicated worker's fetch, a link click, a popup and a 302 to the
/// blocked origin never reach its server and are reported with `urlPolicy`, and neither do
/// the WebSocket handshakes of the page, its dedicated worker and its out-of-process frame
/// (held by network-condition rules, docs/network.md "URL policy"); the allowed origin keeps
/// working, its WebSocket included; an allow list refuses everything else, sockets too.
#[test]
fn url_policy_holds_navigations_and_requests_to_its_origins() {
    let log = tempfile::NamedTempFile::new().unwrap();
    let rig = Rig::start_logging(log.path());
    let (allowed, blocked) = (Site::start(), Site::start());
    let mut bridge = rig.home.spawn_bridge();
    let mut params = support::initialize_params("com.example.policy", "i1", (1, 1));
    params["requestedCapabilities"] = json!([&ALL_CAPABILITIES[..], &["page.emulate"]].concat());
    bridge.ok("initialize", params);
    for (policy, path) in [
        (
            json!({"block": ["http://ok.test", "ftp://x.test"]}),
            "params.urlPolicy.block[1]",
        ),
        (
            json!({"allow": ["https://*.ok.test/path"]}),
            "params.urlPolicy.allow[0]",
        ),
        (json!({"blocked": []}), "params.urlPolicy.blocked"),
    ] {
        let error = bridge.call("workspaces/create", json!({"urlPolicy": policy}))["error"].clone();
        assert_eq!(error["data"]["code"], "invalid_params", "{error}");
        assert_eq!(error["data"]["context"]["path"], path, "{error}");
    }
    let block = json!({"block": [blocked.url("/"), "HTTPS://Bücher.example:443"]});
    let ws = bridge.ok(
        "workspaces/create",
        json!({"clientKey": "policy", "urlPolicy": block}),
    );
    assert_eq!(
        ws["workspace"]["urlPolicy"],
        json!({"allow": [], "block": [blocked.origin(), "https://xn--bcher-kva.example"]})
    );
    let again = bridge.ok(
        "workspaces/create",
        json!({"clientKey": "policy", "urlPolicy": {"block": ["https://xn--bcher-kva.example", blocked.origin()]}}),
    );
    assert_eq!(again["workspace"]["id"], ws["workspace"]["id"]);
    let changed = bridge.call(
        "workspaces/create",
        json!({"clientKey": "policy", "urlPolicy": {"allow": [allowed.origin()]}}),
    );
    assert_eq!(
        changed["error"]["data"]["code"], "client_key_conflict",
        "{changed}"
    );
    let workspace_id = ws["workspace"]["id"].clone();
    let lease = bridge.ok(
        "leases/create",
        json!({"workspaceId": workspace_id, "ttlMs": 120000}),
    );
    let mut agent = Agent {
        bridge,
        workspace_id,
        lease_id: lease["lease"]["id"].clone(),
        cursor: ws["eventCursor"].as_str().unwrap().to_owned(),
    };
    agent.connect();

    // Refused before dispatch: nothing was sent to the browser.
    let (code, error) = agent.tool_err(
        "browser.open",
        None,
        json!({"url": blocked.url("/policy/direct")}),
    );
    assert_eq!(code, "url_blocked", "{error}");
    let context = &error["data"]["context"];
    assert_eq!(
        (context["reason"].as_str(), context["pattern"].as_str()),
        (Some("blocked"), Some(blocked.origin().as_str()))
    );
    let command = agent
        .bridge
        .ok("commands/get", json!({"commandId": context["commandId"]}));
    assert_eq!(command["command"]["dispatchedAt"], Value::Null, "{command}");

    // The allowed origin's page loads; everything it sends to the blocked origin is failed.
    let page = allowed.url(&format!("/policy/page?to={}", blocked.port));
    let opened = agent.tool("browser.open", None, json!({"url": page}));
    let target = opened["targetId"].clone();
    assert_eq!(opened["loadState"], "complete", "{opened}");
    let mut seen = Vec::new();
    let subresources = [
        "/policy/from-worker",
        "/policy/img.png",
        "/policy/fetched",
        "/policy/events",
        "/policy/framed",
    ];
    wait_events(
        &mut agent,
        &mut seen,
        |events| subresources.iter().all(|part| policy_blocked(events, part)),
        "the page's requests to the blocked origin are reported blocked",
    );
    // A dedicated worker runs (the tab's auto-attach resumes it) and its fetch and socket are
    // held too.
    let mut title = Value::Null;
    let worker_done = wait_until(Duration::from_secs(20), || {
        title = agent.tool("browser.read", Some(&target), json!({}))["title"].clone();
        title == "worker failed refused"
    });
    assert!(
        worker_done,
        "the dedicated worker's fetch and socket failed: title {title}"
    );
    // The page's socket to the blocked origin fails, the one to its own origin opens.
    assert_sockets(&mut agent, &target);
    assert_eq!(allowed.requests("/policy/own-socket").len(), 1);
    // Emulated network conditions join the socket rules instead of replacing them: while the
    // page keeps opening sockets to both origins, the blocked one sees none of them.
    agent.tool(
        "browser.eval",
        Some(&target),
        json!({"expression": "(window.probe = setInterval(() => { new WebSocket('ws://127.0.0.1:' + new URL(location).searchParams.get('to') + '/policy/socket'); new WebSocket('ws://' + location.host + '/policy/own-socket'); }, 25), 1)"}),
    );
    agent.tool(
        "browser.emulate",
        Some(&target),
        json!({"throttle": {"latencyMs": 20}}),
    );
    let before = allowed.requests("/policy/own-socket").len();
    assert!(
        wait_until(Duration::from_secs(20), || allowed
            .requests("/policy/own-socket")
            .len()
            >= before + 5),
        "the page kept opening sockets to its own origin"
    );
    assert!(blocked.seen.lock().unwrap().is_empty());
    agent.tool(
        "browser.eval",
        Some(&target),
        json!({"expression": "(clearInterval(window.probe), 1)"}),
    );
    agent.tool("browser.emulate", Some(&target), json!({"reset": true}));
    assert_eq!(
        allowed.requests("/policy/own.png").len(),
        1,
        "the allowed origin still works"
    );
    let observation = observe(&mut agent, &target);

    // A popup and a link click to the blocked origin.
    let button = find_ref(&observation, "button", "open popup");
    agent.tool(
        "browser.click",
        Some(&target),
        json!({"observationId": observation["observationId"], "ref": button}),
    );
    let link = find_ref(&observation, "link", "other origin");
    agent.tool(
        "browser.click",
        Some(&target),
        json!({"observationId": observation["observationId"], "ref": link}),
    );
    wait_events(
        &mut agent,
        &mut seen,
        |events| {
            policy_blocked(events, "/policy/popup") && policy_blocked(events, "/policy/clicked")
        },
        "the popup's and the link's documents are reported blocked",
    );

    // A 302 from the allowed origin to the blocked one.
    let (code, error) = agent.tool_err(
        "browser.navigate",
        Some(&target),
        json!({"action": "goto", "url": allowed.url(&format!("/policy/redirect?to={}", blocked.port))}),
    );
    assert_eq!(code, "navigation_failed", "{error}");
    wait_events(
        &mut agent,
        &mut seen,
        |events| policy_blocked(events, "/policy/redirected"),
        "the redirect's target is reported blocked",
    );
    assert_eq!(
        allowed
            .requests(&format!("/policy/redirect?to={}", blocked.port))
            .len(),
        1
    );

    let reached: Vec<String> = blocked
        .seen
        .lock()
        .unwrap()
        .iter()
        .map(|s| s.path.clone())
        .collect();
    // WebSocket handshakes of the page, its worker and its out-of-process frame included.
    assert_eq!(
        reached,
        Vec::<String>::new(),
        "nothing reached the blocked origin"
    );

    // An allow list admits only its origins.
    let mut listed = agent_with_workspace(
        &rig,
        "com.example.allow",
        json!({"urlPolicy": {"allow": [allowed.origin()]}}),
    );
    let (code, error) = listed.tool_err(
        "browser.open",
        None,
        json!({"url": blocked.url("/policy/direct")}),
    );
    assert_eq!(code, "url_blocked", "{error}");
    assert_eq!(error["data"]["context"]["reason"], "not_allowed");
    let (code, _) = listed.tool_err("browser.open", None, json!({"url": "data:text/html,x"}));
    assert_eq!(code, "url_blocked");
    let opened = listed.tool(
        "browser.open",
        None,
        json!({"url": allowed.url("/policy/own-page")}),
    );
    assert_eq!(opened["title"], "fixture");
    // Sockets too: the allowed origin's opens, every other is refused.
    let page = allowed.url(&format!("/policy/page?to={}", blocked.port));
    let before = allowed.requests("/policy/own-socket").len();
    let target = listed.tool("browser.open", None, json!({"url": page}))["targetId"].clone();
    assert_sockets(&mut listed, &target);
    assert!(allowed.requests("/policy/own-socket").len() > before);
    let reached: Vec<String> = blocked
        .seen
        .lock()
        .unwrap()
        .iter()
        .map(|s| s.path.clone())
        .collect();
    assert_eq!(reached, Vec::<String>::new());
}

/// Waits for the policy page's two sockets: the one to the blocked origin failed, the one to
/// its own origin open.
fn assert_sockets(agent: &mut Agent, target: &Value) {
    let mut sockets = Value::Null;
    let settled = wait_until(Duration::from_secs(20), || {
        sockets = agent.tool(
            "browser.eval",
            Some(target),
            json!({"expression": "({...window.sockets})"}),
        )["value"]
            .clone();
        sockets["own"].is_string() && sockets["blocked"].is_string()
    });
    assert!(settled, "the page's sockets settled: {sockets}");
    assert_eq!(sockets, json!({"own": "open", "blocked": "error"}));
}
