//! Process tests of Artifacts against a real headless Chromium: `browser.capture` (viewport,
//! full page, element, previews), `browser.pdf`, and the `artifacts/*` methods (get, export,
//! import, retain, release), their permissions, isolation between Workspaces and clients, and
//! byte cleanup on release, expiry, Workspace release and Broker exit; imports refusing kernel
//! pseudo-files and files changed while copied, and dropping bidirectional controls from names.
//! Every response except `artifacts/get` is checked for the protected path.

use crate::support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};
use support::chromium::{Chromium, Fixtures};
use support::*;

/// A Broker home that discovers exactly one test-owned Chromium profile.
struct Rig {
    home: TestHome,
    _profile: tempfile::TempDir,
    _chromium: Chromium,
    _fixtures: Fixtures,
}

impl Rig {
    fn start() -> Rig {
        Rig::start_with(&[])
    }

    fn start_with(env: &[(&str, &str)]) -> Rig {
        let profile = tempfile::tempdir().unwrap();
        let chromium = Chromium::start(profile.path());
        let mut home = TestHome::new().with_env(
            "BROWSER_PILOT_DISCOVERY_DIRS",
            profile.path().to_str().unwrap(),
        );
        for (key, value) in env {
            home = home.with_env(key, value);
        }
        Rig {
            home,
            _profile: profile,
            _chromium: chromium,
            _fixtures: Fixtures::start(),
        }
    }
}

/// One agent: a bridge, a Workspace and a Lease. Every response it reads, except
/// `artifacts/get`, is checked not to mention protected storage.
struct Agent {
    bridge: Bridge,
    workspace_id: Value,
    lease_id: Value,
    protected: String,
}

impl Agent {
    fn new(home: &TestHome, client: &str) -> Agent {
        Agent::with_capabilities(home, client, None)
    }

    fn with_capabilities(home: &TestHome, client: &str, capabilities: Option<Value>) -> Agent {
        let mut bridge = home.spawn_bridge();
        let mut params = initialize_params(client, "i1", (1, 1));
        if let Some(capabilities) = capabilities {
            params["requestedCapabilities"] = capabilities;
        }
        bridge.ok("initialize", params);
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
            protected: home.path().join("artifacts").to_string_lossy().into_owned(),
        }
    }

    fn send(&mut self, method: &str, params: Value) -> Value {
        let response = self.bridge.call(method, params);
        if method != "artifacts/get" {
            assert!(
                !response.to_string().contains(&self.protected),
                "{method} leaked the protected path: {response}"
            );
        }
        response
    }

    fn ok(&mut self, method: &str, params: Value) -> Value {
        let response = self.send(method, params.clone());
        match response.get("result") {
            Some(result) => result.clone(),
            None => panic!("{method} {params} failed: {response}"),
        }
    }

    fn err(&mut self, method: &str, params: Value) -> (String, Value) {
        let response = self.send(method, params.clone());
        match response.get("error") {
            Some(error) => (
                error["data"]["code"].as_str().unwrap_or("").to_owned(),
                error.clone(),
            ),
            None => panic!("{method} {params} unexpectedly succeeded: {response}"),
        }
    }

    fn call(&mut self, name: &str, target: Option<&Value>, arguments: Value) -> Value {
        let mut params = json!({"name": name, "arguments": arguments, "workspaceId": self.workspace_id, "leaseId": self.lease_id});
        if let Some(target) = target {
            params["targetId"] = target.clone();
        }
        self.send("tools/call", params)
    }

    fn tool(&mut self, name: &str, target: Option<&Value>, arguments: Value) -> Value {
        let response = self.call(name, target, arguments.clone());
        match response.get("result") {
            Some(outcome) => {
                assert_eq!(
                    outcome["command"]["status"], "completed",
                    "{name}: {response}"
                );
                outcome["result"].clone()
            }
            None => panic!("{name} {arguments} failed: {response}"),
        }
    }

    fn tool_err(
        &mut self,
        name: &str,
        target: Option<&Value>,
        arguments: Value,
    ) -> (String, Value) {
        let response = self.call(name, target, arguments);
        match response.get("error") {
            Some(error) => (
                error["data"]["code"].as_str().unwrap_or("").to_owned(),
                error.clone(),
            ),
            None => panic!("{name} unexpectedly succeeded: {response}"),
        }
    }

    /// Connects and opens `url` in a new managed tab; returns its targetId.
    fn open(&mut self, url: &str) -> Value {
        self.tool("browser.connect", None, json!({}));
        let opened = self.tool("browser.open", None, json!({"url": url}));
        assert_eq!(opened["loadState"], "complete", "{opened}");
        opened["targetId"].clone()
    }

    /// `{workspaceId, leaseId, artifactId}` plus `extra`.
    fn artifact_params(&self, artifact_id: &Value, extra: Value) -> Value {
        let mut params = json!({"workspaceId": self.workspace_id, "leaseId": self.lease_id, "artifactId": artifact_id});
        for (key, value) in extra.as_object().unwrap() {
            params[key] = value.clone();
        }
        params
    }

    /// `artifacts/get`: the descriptor and the protected path.
    fn get(&mut self, artifact_id: &Value) -> (Value, PathBuf) {
        let params = self.artifact_params(artifact_id, json!({}));
        let got = self.ok("artifacts/get", params);
        (
            got["artifact"].clone(),
            PathBuf::from(got["path"].as_str().unwrap()),
        )
    }

    fn artifact_err(&mut self, method: &str, artifact_id: &Value, extra: Value) -> String {
        let params = self.artifact_params(artifact_id, extra);
        self.err(method, params).0
    }

    fn import(&mut self, path: &Path, extra: Value) -> Result<Value, String> {
        let mut params = json!({"workspaceId": self.workspace_id, "leaseId": self.lease_id, "path": path.to_string_lossy()});
        for (key, value) in extra.as_object().unwrap() {
            params[key] = value.clone();
        }
        let response = self.send("artifacts/import", params);
        match response.get("result") {
            Some(result) => Ok(result["artifact"].clone()),
            None => Err(response["error"]["data"]["code"]
                .as_str()
                .unwrap_or("")
                .to_owned()),
        }
    }
}

/// A `data:` URL of an HTML document, percent-encoded so `#` and spaces survive.
fn data_url(html: &str) -> String {
    let mut url = String::from("data:text/html,");
    for byte in html.bytes() {
        match byte.is_ascii_alphanumeric() || b"-_.~<>/=:;(){}!\"'".contains(&byte) {
            true => url.push(byte as char),
            false => url.push_str(&format!("%{byte:02X}")),
        }
    }
    url
}

/// A 5000 px tall page with a 300x200 box at (40, 60).
fn tall_page() -> String {
    data_url(
        "<!doctype html><html><head><title>capture</title><style>\
         body { margin: 0 } \
         #box { position: absolute; left: 40px; top: 60px; width: 300px; height: 200px; background: rgb(200, 30, 30) } \
         #tall { width: 10px; height: 5000px }\
         </style></head><body><div id=\"box\"></div><div id=\"tall\"></div>\
         <p id=\"hidden\" style=\"display: none\">hidden</p></body></html>",
    )
}

const PNG_SIGNATURE: &[u8] = b"\x89PNG\r\n\x1a\n";

fn png_size(bytes: &[u8]) -> (u64, u64) {
    assert_eq!(&bytes[..8], PNG_SIGNATURE, "not a PNG");
    let word = |at: usize| u64::from(u32::from_be_bytes(bytes[at..at + 4].try_into().unwrap()));
    (word(16), word(20))
}

fn sha256_hex(bytes: &[u8]) -> String {
    ring::digest::digest(&ring::digest::SHA256, bytes)
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Reads an Artifact through `artifacts/get` and checks everything the descriptor promises.
fn read_checked(agent: &mut Agent, descriptor: &Value) -> Vec<u8> {
    let (got, path) = agent.get(&descriptor["id"]);
    assert_eq!(
        &got, descriptor,
        "artifacts/get returns the same descriptor"
    );
    assert!(path.is_absolute(), "{path:?}");
    assert!(path.starts_with(&agent.protected), "{path:?}");
    assert_eq!(file_mode(&path), 0o600);
    assert_eq!(file_mode(path.parent().unwrap()), 0o700);
    assert_eq!(file_mode(Path::new(&agent.protected)), 0o700);
    let bytes = std::fs::read(&path).unwrap();
    assert_eq!(
        bytes.len() as u64,
        descriptor["byteLength"].as_u64().unwrap()
    );
    assert_eq!(sha256_hex(&bytes), descriptor["sha256"]);
    assert_eq!(descriptor["workspaceId"], agent.workspace_id);
    assert!(descriptor["expiresAt"].as_i64().unwrap() > descriptor["createdAt"].as_i64().unwrap());
    bytes
}

fn near(actual: &Value, expect: u64) -> bool {
    actual.as_u64().is_some_and(|v| v.abs_diff(expect) <= 2)
}

#[test]
fn capture_viewport_element_full_page_and_previews() {
    let rig = Rig::start();
    let mut agent = Agent::new(&rig.home, "com.example.a");
    let tab = agent.open(&tall_page());

    // Viewport, PNG by default.
    let shot = agent.tool("browser.capture", Some(&tab), json!({}));
    let artifact = &shot["artifact"];
    assert!(artifact["id"].as_str().unwrap().starts_with("artifact:"));
    assert_eq!(artifact["kind"], "screenshot");
    assert_eq!(artifact["mimeType"], "image/png");
    assert_eq!(artifact["sensitivity"], "browser_data");
    assert!(artifact.get("previewOf").is_none() && shot.get("original").is_none());
    let bytes = read_checked(&mut agent, artifact);
    let (width, height) = png_size(&bytes);
    assert_eq!(
        (json!(width), json!(height)),
        (shot["width"].clone(), shot["height"].clone())
    );
    assert_eq!(
        (artifact["width"].clone(), artifact["height"].clone()),
        (shot["width"].clone(), shot["height"].clone())
    );
    assert!(
        (200..=1600).contains(&width) && (200..=1600).contains(&height),
        "{width}x{height}"
    );
    assert!(height < 5000, "the viewport, not the page");

    // One element's box.
    let element = agent.tool("browser.capture", Some(&tab), json!({"selector": "#box"}));
    assert!(
        near(&element["width"], 300) && near(&element["height"], 200),
        "{element}"
    );
    let bytes = read_checked(&mut agent, &element["artifact"]);
    assert_eq!(
        png_size(&bytes),
        (
            element["width"].as_u64().unwrap(),
            element["height"].as_u64().unwrap()
        )
    );

    // The full page is taller than the preview bound: a preview, no original.
    let full = agent.tool("browser.capture", Some(&tab), json!({"fullPage": true}));
    let preview = &full["artifact"];
    assert_eq!(preview["kind"], "preview", "{full}");
    assert!(
        near(&full["height"], 1600),
        "longest side scaled to 1600: {full}"
    );
    assert!(full["width"].as_u64().unwrap() < full["height"].as_u64().unwrap());
    assert!(preview.get("previewOf").is_none() && full.get("original").is_none());
    let bytes = read_checked(&mut agent, preview);
    assert_eq!(png_size(&bytes).1, full["height"].as_u64().unwrap());

    // includeOriginal keeps the full-size image too, and the preview points to it.
    let both = agent.tool(
        "browser.capture",
        Some(&tab),
        json!({"fullPage": true, "includeOriginal": true}),
    );
    let original = &both["original"];
    assert_eq!(original["kind"], "screenshot");
    assert_eq!(both["artifact"]["kind"], "preview");
    assert_eq!(both["artifact"]["previewOf"], original["id"]);
    let bytes = read_checked(&mut agent, original);
    let (_, original_height) = png_size(&bytes);
    assert!(original_height >= 5000, "{original_height}");
    assert_eq!(original["height"], json!(original_height));
    read_checked(&mut agent, &both["artifact"]);

    // Small images ignore includeOriginal: there is nothing to preview.
    let small = agent.tool(
        "browser.capture",
        Some(&tab),
        json!({"selector": "#box", "includeOriginal": true}),
    );
    assert_eq!(small["artifact"]["kind"], "screenshot");
    assert!(small.get("original").is_none());

    // JPEG.
    let jpeg = agent.tool(
        "browser.capture",
        Some(&tab),
        json!({"format": "jpeg", "quality": 60}),
    );
    assert_eq!(jpeg["artifact"]["mimeType"], "image/jpeg");
    let bytes = read_checked(&mut agent, &jpeg["artifact"]);
    assert_eq!(&bytes[..3], b"\xff\xd8\xff");
    let (_, path) = agent.get(&jpeg["artifact"]["id"]);
    assert_eq!(path.extension().unwrap(), "jpg");

    // Events carry no protected path either (Agent::send checks every response).
    let workspace_id = agent.workspace_id.clone();
    agent.ok(
        "events/poll",
        json!({"workspaceId": workspace_id, "cursor": "cursor:0", "limit": 1000}),
    );

    // Refusals, all before anything is stored.
    let refusals = [
        (
            json!({"annotations": {"observationId": "observation:x"}, "fullPage": true}),
            "invalid_params",
            None,
        ),
        (
            json!({"fullPage": true, "selector": "#box"}),
            "invalid_params",
            None,
        ),
        (json!({"quality": 50}), "invalid_params", None),
        (json!({"format": "webp"}), "invalid_params", None),
        (
            json!({"selector": "#missing"}),
            "invalid_params",
            Some("no_match"),
        ),
        (
            json!({"selector": "#hidden"}),
            "invalid_params",
            Some("empty_box"),
        ),
        (
            json!({"selector": "a[["}),
            "invalid_params",
            Some("invalid_selector"),
        ),
    ];
    for (arguments, code, reason) in refusals {
        let (got, error) = agent.tool_err("browser.capture", Some(&tab), arguments.clone());
        assert_eq!(got, code, "{arguments}: {error}");
        if let Some(reason) = reason {
            assert_eq!(error["data"]["context"]["reason"], reason, "{error}");
        }
    }
}

#[test]
fn pdf_prints_the_page() {
    let rig = Rig::start();
    let mut agent = Agent::new(&rig.home, "com.example.a");
    let tab = agent.open(&tall_page());
    let printed = agent.tool("browser.pdf", Some(&tab), json!({"printBackground": true}));
    let artifact = &printed["artifact"];
    assert_eq!(artifact["kind"], "pdf");
    assert_eq!(artifact["mimeType"], "application/pdf");
    let bytes = read_checked(&mut agent, artifact);
    assert_eq!(&bytes[..5], b"%PDF-");
    let (_, path) = agent.get(&artifact["id"]);
    assert_eq!(path.extension().unwrap(), "pdf");

    let first_page = agent.tool(
        "browser.pdf",
        Some(&tab),
        json!({"landscape": true, "pageRanges": "1", "scale": 0.5}),
    );
    let single = read_checked(&mut agent, &first_page["artifact"]);
    assert_eq!(&single[..5], b"%PDF-");
    assert!(
        single.len() < bytes.len(),
        "one page is smaller than the whole document"
    );

    let (code, error) = agent.tool_err("browser.pdf", Some(&tab), json!({"pageRanges": "999"}));
    assert_eq!(code, "invalid_params", "{error}");
    let (code, _) = agent.tool_err("browser.pdf", Some(&tab), json!({"scale": 3}));
    assert_eq!(code, "invalid_params");
}

#[test]
fn export_import_retain_and_release() {
    let home = TestHome::new();
    let mut agent = Agent::new(&home, "com.example.a");
    let client = tempfile::tempdir().unwrap();

    // Import: copied into protected storage, the source stays.
    let source = client.path().join("resume.pdf");
    std::fs::write(&source, b"%PDF-1.4 resume").unwrap();
    let imported = agent.import(&source, json!({})).unwrap();
    assert_eq!(imported["kind"], "upload_input");
    assert_eq!(imported["mimeType"], "application/pdf");
    assert_eq!(imported["sensitivity"], "user_file");
    assert_eq!(imported["fileName"], "resume.pdf");
    let bytes = read_checked(&mut agent, &imported);
    assert_eq!(bytes, b"%PDF-1.4 resume");
    assert_eq!(std::fs::read(&source).unwrap(), b"%PDF-1.4 resume");
    let typed = agent
        .import(&source, json!({"mimeType": "text/plain"}))
        .unwrap();
    assert_eq!(typed["mimeType"], "text/plain");
    assert_eq!(
        agent.import(client.path(), json!({})),
        Err("path_not_allowed".into()),
        "a directory"
    );
    let link = client.path().join("dir-link");
    std::os::unix::fs::symlink(client.path(), &link).unwrap();
    assert_eq!(
        agent.import(&link, json!({})),
        Err("path_not_allowed".into()),
        "a symlink to a directory"
    );
    assert_eq!(
        agent.import(&client.path().join("missing.pdf"), json!({})),
        Err("file_not_found".into())
    );
    assert_eq!(
        agent.import(Path::new("resume.pdf"), json!({})),
        Err("path_not_allowed".into()),
        "relative"
    );
    assert_eq!(
        agent.import(&home.path().join("broker-locator.json"), json!({})),
        Err("path_not_allowed".into()),
        "inside the home"
    );
    assert_eq!(
        agent.import(&source, json!({"mimeType": "pdf"})),
        Err("invalid_params".into())
    );

    // Kernel pseudo-files are regular files whose size is not their content: refused.
    for pseudo in ["/proc/self/status", "/proc/self/environ", "/proc/cpuinfo"] {
        let params =
            json!({"workspaceId": agent.workspace_id, "leaseId": agent.lease_id, "path": pseudo});
        let (code, error) = agent.err("artifacts/import", params);
        assert_eq!(code, "path_not_allowed", "{pseudo}: {error}");
        assert!(
            error["data"]["context"]["reason"]
                .as_str()
                .unwrap()
                .contains("pseudo-file"),
            "{error}"
        );
    }
    // Bidirectional controls are dropped from the name (`invoice<RLO>fdp.txt` would read as
    // `invoicetxt.pdf`).
    let spoofed = client.path().join("invoice\u{202E}fdp.txt");
    std::fs::write(&spoofed, b"spoof").unwrap();
    assert_eq!(
        agent.import(&spoofed, json!({})).unwrap()["fileName"],
        "invoicefdp.txt"
    );
    // A file cut short and grown again while it is copied never becomes a partial Artifact:
    // the import is refused, or it holds the file whole at one of its two sizes.
    const BIG: u64 = 48 * 1024 * 1024;
    const SMALL: u64 = 1024 * 1024;
    let changing = client.path().join("changing.bin");
    std::fs::write(&changing, vec![7u8; BIG as usize]).unwrap();
    for _ in 0..3 {
        let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flipper = {
            let (done, changing) = (done.clone(), changing.clone());
            std::thread::spawn(move || {
                let file = std::fs::OpenOptions::new()
                    .write(true)
                    .open(&changing)
                    .unwrap();
                while !done.load(std::sync::atomic::Ordering::Relaxed) {
                    file.set_len(SMALL).unwrap();
                    file.set_len(BIG).unwrap();
                }
            })
        };
        let imported = agent.import(&changing, json!({}));
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        flipper.join().unwrap();
        match imported {
            Err(code) => assert_eq!(code, "path_not_allowed"),
            Ok(artifact) => {
                let len = artifact["byteLength"].as_u64().unwrap();
                assert!(
                    len == SMALL || len == BIG,
                    "a partial Artifact of {len} bytes"
                );
            }
        }
    }

    // Export: absolute paths only, no overwrite unless asked.
    let target = client.path().join("copy.pdf");
    let params = agent.artifact_params(&imported["id"], json!({"path": target.to_string_lossy()}));
    let exported = agent.ok("artifacts/export", params.clone());
    assert_eq!(exported["path"], target.to_string_lossy().as_ref());
    assert_eq!(exported["byteLength"], imported["byteLength"]);
    assert_eq!(exported["artifact"]["id"], imported["id"]);
    assert_eq!(std::fs::read(&target).unwrap(), b"%PDF-1.4 resume");
    let (code, error) = agent.err("artifacts/export", params.clone());
    assert_eq!(code, "export_exists");
    assert_eq!(error["data"]["remediation"]["action"], "choose_path");
    std::fs::write(&target, b"old").unwrap();
    let mut overwrite = params.clone();
    overwrite["overwrite"] = json!(true);
    agent.ok("artifacts/export", overwrite);
    assert_eq!(std::fs::read(&target).unwrap(), b"%PDF-1.4 resume");
    assert_eq!(
        agent.artifact_err(
            "artifacts/export",
            &imported["id"],
            json!({"path": "relative.pdf"})
        ),
        "path_not_allowed"
    );
    assert!(!Path::new("relative.pdf").exists());
    assert_eq!(
        agent.artifact_err(
            "artifacts/export",
            &imported["id"],
            json!({"path": client.path().join("no/such/dir.pdf").to_string_lossy()})
        ),
        "file_not_found"
    );
    assert_eq!(
        agent.artifact_err("artifacts/export", &imported["id"], json!({})),
        "invalid_params",
        "path is required"
    );

    // Retain extends the lifetime.
    let retained = agent.ok(
        "artifacts/retain",
        agent.artifact_params(&imported["id"], json!({})),
    );
    let before = imported["expiresAt"].as_i64().unwrap();
    let after = retained["artifact"]["expiresAt"].as_i64().unwrap();
    assert!(after >= before + 23 * 3600 * 1000, "{before} -> {after}");
    assert_eq!(retained["artifact"]["retained"], true);
    assert_eq!(agent.get(&imported["id"]).0["expiresAt"], json!(after));

    // Release deletes the bytes; everything after that is artifact_not_found.
    let (_, path) = agent.get(&imported["id"]);
    let released = agent.ok(
        "artifacts/release",
        agent.artifact_params(&imported["id"], json!({})),
    );
    assert_eq!(released["released"], true);
    assert!(!path.exists());
    assert!(
        source.exists() && target.exists(),
        "client files are never deleted"
    );
    for method in ["artifacts/release", "artifacts/get", "artifacts/retain"] {
        assert_eq!(
            agent.artifact_err(method, &imported["id"], json!({})),
            "artifact_not_found",
            "{method}"
        );
    }
    assert_eq!(
        agent.artifact_err("artifacts/get", &json!("artifact:unknown"), json!({})),
        "artifact_not_found"
    );
}

#[test]
fn artifacts_are_private_to_their_workspace_and_client() {
    let home = TestHome::new();
    let mut a = Agent::new(&home, "com.example.a");
    let client = tempfile::tempdir().unwrap();
    let source = client.path().join("notes.txt");
    std::fs::write(&source, b"notes").unwrap();
    let artifact = a.import(&source, json!({})).unwrap();
    let id = artifact["id"].clone();

    // Another client, with its own Workspace and Lease.
    let mut b = Agent::new(&home, "com.example.b");
    for method in [
        "artifacts/get",
        "artifacts/export",
        "artifacts/retain",
        "artifacts/release",
    ] {
        let extra = json!({"path": client.path().join("stolen.txt").to_string_lossy()});
        assert_eq!(
            b.artifact_err(method, &id, extra),
            "artifact_not_found",
            "{method}"
        );
    }
    // The other client naming A's Workspace has no Lease there.
    let (code, _) = b.err(
        "artifacts/get",
        json!({"workspaceId": a.workspace_id, "leaseId": b.lease_id, "artifactId": id}),
    );
    assert_eq!(code, "lease_not_found");
    // The same client, another Workspace.
    let ws2 = a.ok("workspaces/create", json!({"clientKey": "second"}));
    let ws2_id = ws2["workspace"]["id"].clone();
    let lease2 = a.ok("leases/create", json!({"workspaceId": ws2_id}));
    let (code, _) = a.err(
        "artifacts/get",
        json!({"workspaceId": ws2_id, "leaseId": lease2["lease"]["id"], "artifactId": id}),
    );
    assert_eq!(code, "artifact_not_found");
    // Another client's Lease answers exactly like an unknown one.
    let (code, _) = b.err(
        "artifacts/get",
        json!({"workspaceId": a.workspace_id, "leaseId": a.lease_id, "artifactId": id}),
    );
    assert_eq!(code, "lease_not_found");
    // Without artifact.read.
    let mut c = Agent::with_capabilities(&home, "com.example.c", Some(json!(["workspace.manage"])));
    let (code, error) = c.err(
        "artifacts/get",
        json!({"workspaceId": c.workspace_id, "leaseId": c.lease_id, "artifactId": id}),
    );
    assert_eq!(code, "capability_denied");
    assert_eq!(error["data"]["context"]["capability"], "artifact.read");
    assert!(std::fs::read(&source).is_ok());
    a.get(&id);
}

#[test]
fn bytes_go_on_expiry_workspace_release_and_broker_exit() {
    let rig = Rig::start_with(&[("BROWSER_PILOT_ARTIFACT_TTL_MS", "2000")]);
    let mut agent = Agent::new(&rig.home, "com.example.a");
    let tab = agent.open(&tall_page());

    // Expiry: the sweep removes the bytes about a second after expiresAt. The Artifact to keep
    // is retained first, well within its short TTL.
    let kept = agent.tool("browser.capture", Some(&tab), json!({}))["artifact"].clone();
    agent.ok(
        "artifacts/retain",
        agent.artifact_params(&kept["id"], json!({})),
    );
    let shot = agent.tool("browser.capture", Some(&tab), json!({}));
    let artifact = shot["artifact"].clone();
    assert_eq!(
        artifact["expiresAt"].as_i64().unwrap() - artifact["createdAt"].as_i64().unwrap(),
        2000
    );
    let (_, expiring) = agent.get(&artifact["id"]);
    assert!(
        wait_until(Duration::from_secs(10), || !expiring.exists()),
        "expired bytes were swept"
    );
    let code = agent.artifact_err("artifacts/get", &artifact["id"], json!({}));
    assert_eq!(code, "artifact_not_found");
    let (_, kept_path) = agent.get(&kept["id"]);
    assert!(
        kept_path.exists(),
        "a retained Artifact outlives the default TTL"
    );

    // Workspace release deletes the Workspace's bytes at once.
    let pdf = agent.tool("browser.pdf", Some(&tab), json!({}))["artifact"].clone();
    let (_, pdf_path) = agent.get(&pdf["id"]);
    let workspace_dir = pdf_path.parent().unwrap().to_owned();
    agent.ok(
        "workspaces/release",
        json!({"workspaceId": agent.workspace_id}),
    );
    assert!(!pdf_path.exists() && !kept_path.exists() && !workspace_dir.exists());

    // Broker exit deletes everything left.
    let mut other = Agent::new(&rig.home, "com.example.b");
    let tab = other.open(&tall_page());
    let shot = other.tool("browser.capture", Some(&tab), json!({}))["artifact"].clone();
    let (_, path) = other.get(&shot["id"]);
    assert!(path.exists());
    let pid = rig.home.broker_pid().unwrap();
    unsafe_kill(pid, "TERM");
    assert!(
        wait_until(Duration::from_secs(10), || !pid_alive(pid)),
        "the Broker exits"
    );
    assert!(!path.exists());
    let left: Vec<_> = std::fs::read_dir(rig.home.path().join("artifacts"))
        .map(|entries| entries.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "{left:?}");
}
