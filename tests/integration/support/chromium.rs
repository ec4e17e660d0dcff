//! A real headless Chromium for process tests (started by the test on a profile directory it
//! owns, found by the Broker through `BROWSER_PILOT_DISCOVERY_DIRS`), the test's own separate
//! CDP connection to check the browser from outside, and a tiny HTTP fixture server on
//! 127.0.0.1. No mocks.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::{self, Message, WebSocket};

const WAIT: Duration = Duration::from_secs(20);

/// Debian's Chromium, or `BROWSER_PILOT_CHROMIUM`. Missing is a loud failure, never a skip.
pub fn chromium_path() -> PathBuf {
    let path = std::env::var_os("BROWSER_PILOT_CHROMIUM")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/bin/chromium"));
    assert!(
        path.is_file(),
        "Chromium not found at {}: install it with `sudo apt-get install -y chromium` (Debian/Ubuntu) or set BROWSER_PILOT_CHROMIUM",
        path.display()
    );
    path
}

/// A headless Chromium on a profile directory; killed and reaped on drop.
pub struct Chromium {
    /// The browser process while it runs.
    pub child: Option<Child>,
    pub port: u16,
    pub ws_path: String,
}

impl Chromium {
    pub fn start(profile: &Path) -> Chromium {
        Chromium::start_with_env(profile, &[])
    }

    /// Starts Chromium with these variables added to its environment (the test's own
    /// environment is never changed: every module of the test binary shares it).
    pub fn start_with_env(profile: &Path, env: &[(&str, &Path)]) -> Chromium {
        // A stale DevToolsActivePort from a killed run would look live to nobody; remove it.
        let _ = std::fs::remove_file(profile.join("DevToolsActivePort"));
        let mut command = Command::new(chromium_path());
        command.args([
            "--headless",
            "--disable-gpu",
            "--remote-debugging-port=0",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
        ]);
        command.arg(format!("--user-data-dir={}", profile.display()));
        if unsafe { libc::geteuid() } == 0 {
            command.arg("--no-sandbox");
        }
        command.arg("about:blank");
        for (key, value) in env {
            command.env(key, value);
        }
        let child = command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn chromium");
        let (port, ws_path) = wait_for_active_port(profile);
        Chromium {
            child: Some(child),
            port,
            ws_path,
        }
    }

    pub fn ws_url(&self) -> String {
        format!("ws://127.0.0.1:{}{}", self.port, self.ws_path)
    }

    pub fn sigkill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A headless Chromium on a temporary profile the value owns (removed on drop).
pub struct TempChromium {
    pub chromium: Chromium,
    _profile: tempfile::TempDir,
}

impl TempChromium {
    pub fn start() -> TempChromium {
        let profile = tempfile::tempdir().expect("temp profile");
        TempChromium {
            chromium: Chromium::start(profile.path()),
            _profile: profile,
        }
    }

    pub fn ws_url(&self) -> String {
        self.chromium.ws_url()
    }
}

/// Spawns the janitor role with tokio pipes and puts the crate's CDP client on top of it, the
/// way the Broker does; returns the client, its event stream and the janitor process.
pub async fn client_over_janitor(
    ws_url: &str,
) -> (
    browser_pilot::cdp::CdpClient,
    tokio::sync::mpsc::Receiver<browser_pilot::cdp::CdpEvent>,
    tokio::process::Child,
) {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_browser-pilot"))
        .arg("--browser-pilot-internal=janitor")
        .arg(ws_url)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn janitor");
    let mut stdin = child.stdin.take().expect("janitor stdin");
    let mut stdout =
        tokio::io::BufReader::new(child.stdout.take().expect("janitor stdout")).lines();
    let first = stdout
        .next_line()
        .await
        .expect("janitor stdout")
        .expect("janitor line");
    assert_eq!(first, r#"{"janitor":"connected"}"#);
    let (out_tx, mut out_rx) = tokio::sync::mpsc::channel::<String>(64);
    let (in_tx, in_rx) = tokio::sync::mpsc::channel::<String>(64);
    tokio::spawn(async move {
        while let Some(line) = out_rx.recv().await {
            if stdin
                .write_all(format!("{line}\n").as_bytes())
                .await
                .is_err()
            {
                return;
            }
        }
    });
    tokio::spawn(async move {
        while let Ok(Some(line)) = stdout.next_line().await {
            if line.starts_with(r#"{"janitor""#) {
                continue;
            }
            if in_tx.send(line).await.is_err() {
                return;
            }
        }
    });
    let (client, events) = browser_pilot::cdp::CdpClient::spawn(out_tx, in_rx);
    (client, events, child)
}

impl Drop for Chromium {
    fn drop(&mut self) {
        self.sigkill();
    }
}

fn wait_for_active_port(dir: &Path) -> (u16, String) {
    let started = Instant::now();
    loop {
        if let Ok(text) = std::fs::read_to_string(dir.join("DevToolsActivePort")) {
            let mut lines = text.lines();
            if let (Some(port), Some(path)) = (lines.next(), lines.next())
                && let Ok(port) = port.trim().parse::<u16>()
                && TcpStream::connect(("127.0.0.1", port)).is_ok()
            {
                return (port, path.trim().to_owned());
            }
        }
        assert!(
            started.elapsed() < WAIT,
            "chromium wrote no DevToolsActivePort"
        );
        std::thread::sleep(Duration::from_millis(25));
    }
}

/// The test's own CDP connection: a separate WebSocket, like another tool on the machine.
pub struct OwnCdp {
    ws: WebSocket<TcpStream>,
    next_id: u64,
}

impl OwnCdp {
    pub fn connect(browser: &Chromium) -> OwnCdp {
        let stream = TcpStream::connect(("127.0.0.1", browser.port)).unwrap();
        stream.set_read_timeout(Some(WAIT)).unwrap();
        let (ws, _) = tungstenite::client::client(browser.ws_url(), stream).expect("handshake");
        OwnCdp { ws, next_id: 0 }
    }

    pub fn call(&mut self, method: &str, params: Value) -> Value {
        self.call_in(None, method, params)
    }

    /// A call on a flattened target session (`None`: the browser connection).
    pub fn call_in(&mut self, session: Option<&str>, method: &str, params: Value) -> Value {
        self.try_call_in(session, method, params)
            .unwrap_or_else(|error| panic!("{method} failed: {error}"))
    }

    /// A call whose CDP error is the caller's to judge (the whole answer as the error).
    pub fn try_call_in(
        &mut self,
        session: Option<&str>,
        method: &str,
        params: Value,
    ) -> Result<Value, Value> {
        self.next_id += 1;
        let id = self.next_id;
        let mut request = json!({"id": id, "method": method, "params": params});
        if let Some(session) = session {
            request["sessionId"] = json!(session);
        }
        self.ws.send(Message::text(request.to_string())).unwrap();
        loop {
            let message = match self.ws.read() {
                Ok(message) => message,
                // A signal handled in this process (tokio's SIGCHLD handler, installed once a
                // module spawns a child through tokio) interrupts a read on a socket with a
                // timeout even under SA_RESTART; nothing was consumed, so read again.
                Err(tungstenite::Error::Io(error))
                    if error.kind() == std::io::ErrorKind::Interrupted =>
                {
                    continue;
                }
                Err(error) => panic!("own cdp read: {error:?}"),
            };
            let Message::Text(text) = message else {
                continue;
            };
            let value: Value = serde_json::from_str(text.as_str()).unwrap();
            if value["id"] == json!(id) {
                return match value.get("error") {
                    None => Ok(value["result"].clone()),
                    Some(_) => Err(value),
                };
            }
        }
    }

    /// `(targetId, url)` of every page target.
    pub fn pages(&mut self) -> Vec<(String, String)> {
        let result = self.call("Target.getTargets", json!({}));
        result["targetInfos"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|info| info["type"] == "page")
            .map(|info| {
                (
                    info["targetId"].as_str().unwrap().to_owned(),
                    info["url"].as_str().unwrap_or("").to_owned(),
                )
            })
            .collect()
    }

    /// Runs script in a page (found by URL suffix) as if the user did it (user gesture).
    pub fn evaluate_in_page(&mut self, url_suffix: &str, expression: &str) -> Value {
        self.try_evaluate_in_page(url_suffix, expression)
            .unwrap_or_else(|error| panic!("Runtime.evaluate failed: {error}"))
    }

    /// Waits (at most 20 s) until the page whose URL ends with `url_suffix` shows its loaded
    /// document titled `title`. A tab opened with a URL is listed with that URL while its
    /// initial about:blank, whose readyState is already "complete", may still be the document.
    pub fn wait_for_document(&mut self, url_suffix: &str, title: &str) {
        let condition = format!(
            "document.readyState === 'complete' && document.title === {}",
            json!(title)
        );
        // A page not yet listed, or an evaluation its navigation interrupted: asked again.
        assert!(
            super::wait_until(Duration::from_secs(20), || {
                self.try_evaluate_in_page(url_suffix, &condition)
                    .is_ok_and(|answer| answer["result"]["value"] == true)
            }),
            "no document titled {title:?} at ...{url_suffix}"
        );
    }

    /// The evaluation's answer, or the CDP error (a JSON string when no page is listed).
    fn try_evaluate_in_page(&mut self, url_suffix: &str, expression: &str) -> Result<Value, Value> {
        let Some((target, _)) = self
            .pages()
            .into_iter()
            .find(|(_, url)| url.ends_with(url_suffix))
        else {
            return Err(json!(format!("no page at ...{url_suffix}")));
        };
        let session = self.call(
            "Target.attachToTarget",
            json!({"targetId": target, "flatten": true}),
        )["sessionId"]
            .as_str()
            .unwrap()
            .to_owned();
        let result = self.try_call_in(
            Some(&session),
            "Runtime.evaluate",
            json!({"expression": expression, "userGesture": true, "returnByValue": true}),
        );
        self.call("Target.detachFromTarget", json!({"sessionId": session}));
        result
    }

    /// Opens a "user" tab the Broker did not create.
    pub fn open_user_tab(&mut self, url: &str) -> String {
        self.call("Target.createTarget", json!({"url": url}))["targetId"]
            .as_str()
            .unwrap()
            .to_owned()
    }
}

/// A fixture HTTP server on 127.0.0.1: `/slow?ms=N` sleeps before answering, `/hold/KEY`
/// answers only once the test calls `release(KEY)` (at most `HOLD_LIMIT`), `/page/NAME`
/// serves a small page titled NAME, anything else a tiny page. Counts requests per path.
pub struct Fixtures {
    pub port: u16,
    hits: Arc<std::sync::Mutex<Vec<String>>>,
    released: Arc<Released>,
}

/// Longest a `/hold/KEY` request waits for its release, so a failed test never hangs the server.
const HOLD_LIMIT: Duration = Duration::from_secs(60);

/// The `/hold/` keys the test released, and a condition variable to wake held requests.
#[derive(Default)]
struct Released {
    keys: std::sync::Mutex<std::collections::HashSet<String>>,
    changed: std::sync::Condvar,
}

impl Fixtures {
    pub fn start() -> Fixtures {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let hits = Arc::new(std::sync::Mutex::new(Vec::new()));
        let released = Arc::new(Released::default());
        let (hits_in, released_in) = (hits.clone(), released.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let hits = hits_in.clone();
                let released = released_in.clone();
                std::thread::spawn(move || serve(stream, &hits, &released));
            }
        });
        Fixtures {
            port,
            hits,
            released,
        }
    }

    /// Lets every request for `/hold/KEY` (waiting or later) be answered.
    pub fn release(&self, key: &str) {
        self.released.keys.lock().unwrap().insert(key.to_owned());
        self.released.changed.notify_all();
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{}", self.port, path)
    }

    /// How many requests asked for exactly this path (with query).
    pub fn hits(&self, path: &str) -> usize {
        self.hits
            .lock()
            .unwrap()
            .iter()
            .filter(|p| p.as_str() == path)
            .count()
    }

    /// How many requests asked for a path starting with `prefix`.
    pub fn hits_under(&self, prefix: &str) -> usize {
        self.hits
            .lock()
            .unwrap()
            .iter()
            .filter(|p| p.starts_with(prefix))
            .count()
    }
}

fn serve(stream: TcpStream, hits: &std::sync::Mutex<Vec<String>>, released: &Released) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
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
    hits.lock().unwrap().push(path.clone());
    if let Some(ms) = path
        .strip_prefix("/slow?ms=")
        .and_then(|v| v.parse::<u64>().ok())
    {
        std::thread::sleep(Duration::from_millis(ms));
    }
    if let Some(key) = path.strip_prefix("/hold/") {
        let keys = released.keys.lock().unwrap();
        let _ = released
            .changed
            .wait_timeout_while(keys, HOLD_LIMIT, |keys| !keys.contains(key));
    }
    let title = path.strip_prefix("/page/").unwrap_or("fixture");
    let fixture = path.strip_prefix("/fixture/").map(|name| {
        let name: String = name
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
            .collect();
        let base = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
        std::fs::read_to_string(base.join("actions").join(format!("{name}.html")))
            .or_else(|_| std::fs::read_to_string(base.join("pages").join(format!("{name}.html"))))
            .unwrap_or_else(|_| format!("<title>missing {name}</title>"))
    });
    let generated = path
        .strip_prefix("/gen?n=")
        .and_then(|n| n.parse::<usize>().ok())
        .map(generated_page);
    let body = match (path.as_str(), fixture.or(generated)) {
        ("/favicon.ico", _) => String::new(),
        (_, Some(page)) => page,
        _ => format!(
            "<!doctype html><html><head><title>{title}</title></head><body><h1>{title}</h1><a href=\"/page/next\">next</a></body></html>"
        ),
    };
    let status = if path == "/favicon.ico" {
        "404 Not Found"
    } else {
        "200 OK"
    };
    let response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let mut stream = stream;
    let _ = stream.write_all(response.as_bytes());
    let _ = stream.flush();
    let mut rest = Vec::new();
    let _ = reader.read_to_end(&mut rest);
}

/// A page with `n` interactive elements (a mix of labelled inputs, checkboxes, buttons, links
/// and selects), for observation benchmarks.
pub fn generated_page(n: usize) -> String {
    let mut body = String::with_capacity(n * 80);
    for i in 0..n {
        match i % 5 {
            0 => body.push_str(&format!(
                "<label>Field {i} <input name=\"f{i}\" value=\"v{i}\"></label>\n"
            )),
            1 => body.push_str(&format!(
                "<label><input type=\"checkbox\" name=\"c{i}\"> Option {i}</label>\n"
            )),
            2 => body.push_str(&format!("<button type=\"button\">Action {i}</button>\n")),
            3 => body.push_str(&format!("<a href=\"#item{i}\">Link {i}</a>\n")),
            _ => body.push_str(&format!(
                "<select aria-label=\"Choice {i}\"><option>a</option><option>b</option></select>\n"
            )),
        }
    }
    format!(
        "<!doctype html><html><head><title>generated {n}</title></head><body>{body}</body></html>"
    )
}
