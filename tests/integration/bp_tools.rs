//! Process tests of the `bp` commands for the tools beyond the core loop, against a real
//! headless Chromium and one fixture page (`bp-tools.html`): hover, drag, keyboard, wait,
//! console, eval, upload, annotated screenshots, downloads with `--save` under the export
//! rules, cookies, network requests and rules, HTTP auth, goto and close, each in a pipe with
//! its JSON output and exit code checked, and the capability gate: a command whose capability
//! bp was not allowed fails with `capability_denied` saying how to allow it. One Chromium and
//! one compatibility Workspace for the whole module.

use crate::bp_cli::{bp_in, element, fails, ok, ref_of};
use crate::support;

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use support::rig::Rig;
use support::{BP, TestHome, wait_until};

/// `bp ARGS` with `input` on stdin; must succeed with one JSON object.
fn ok_with_stdin(home: &TestHome, cwd: &Path, args: &[&str], input: &str) -> (Value, String) {
    let mut command = home.command(BP);
    command
        .current_dir(cwd)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command.spawn().expect("run bp");
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(input.as_bytes()).unwrap();
    }
    let output = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(
        output.status.code(),
        Some(0),
        "bp {args:?}: {stdout} {stderr}"
    );
    let value = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("bp {args:?}: not JSON ({e}): {stdout}"));
    (value, stdout + &stderr)
}

/// `bp --text ARGS`: must succeed; its stdout, the text a person reads.
fn as_text(home: &TestHome, cwd: &Path, args: &[&str]) -> String {
    let output = home
        .command(BP)
        .current_dir(cwd)
        .arg("--text")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run bp");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert_eq!(
        output.status.code(),
        Some(0),
        "bp --text {args:?}: {stdout} {}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        !stdout.contains('\u{1b}'),
        "no colours in a pipe: {stdout:?}"
    );
    stdout
}

fn evidence_status(result: &Value) -> &str {
    result["evidence"]["status"].as_str().unwrap_or("")
}

#[test]
fn bp_covers_the_data_action_and_network_tools() {
    let rig = Rig::start();
    let home = &rig.home;
    let work = tempfile::tempdir().unwrap();
    let cwd = work.path();
    let page = rig.fixtures.url("/fixture/bp-tools");
    let opened = ok(home, cwd, &["open", &page]);
    let observation = &opened["observation"];

    // The capability gate: not allowed by default, and the error says how to allow it.
    let denied = fails(home, cwd, &["eval", "1 + 1"], 1, "capability_denied");
    assert_eq!(denied["remediation"]["action"], "request_capability");
    let how = denied["remediation"]["message"].as_str().unwrap();
    assert!(
        how.contains("bp --allow page.eval") && how.contains("BP_ALLOW=page.eval"),
        "{how}"
    );
    let (code, _, stderr) = bp_in(home, cwd, &["tabs"], &[("BP_ALLOW", "everything")]);
    assert_eq!(code, 2, "{stderr}");
    let (code, _, _) = bp_in(home, cwd, &["--allow", "browser.control", "tabs"], &[]);
    assert_eq!(code, 2);

    // eval: an expression, a function with JSON arguments, and BP_ALLOW instead of --allow.
    let title = ok(
        home,
        cwd,
        &["--allow", "page.eval", "eval", "document.title"],
    );
    assert_eq!(
        (&title["value"], &title["type"]),
        (&json!("bp tools"), &json!("string"))
    );
    let sum = ok(
        home,
        cwd,
        &[
            "--allow",
            "page.eval",
            "eval",
            "--function",
            "function add(a, b) { return a.n + b }",
            "--arg",
            "{\"n\": 2}",
            "--arg",
            "3",
        ],
    );
    assert_eq!(sum["value"], 5, "{sum}");
    let (code, lines, stderr) = bp_in(
        home,
        cwd,
        &["eval", "location.pathname"],
        &[("BP_ALLOW", "page.eval")],
    );
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(lines[0]["value"], "/fixture/bp-tools");
    let thrown = fails(
        home,
        cwd,
        &[
            "--allow",
            "page.eval",
            "eval",
            "Promise.reject(new Error('no way'))",
        ],
        1,
        "eval_exception",
    );
    let text = thrown["context"]["exception"]["text"].as_str().unwrap();
    assert!(text.contains("no way"), "{thrown}");

    // hover: the tooltip appears; the ref's element is hovered.
    let help = ref_of(observation, "Shipping help");
    let hovered = ok(home, cwd, &["hover", &help]);
    assert_eq!(evidence_status(&hovered), "verified", "{hovered}");
    assert_eq!(hovered["evidence"]["hovered"], true, "{hovered}");

    // keyboard: into the element that has focus after a click.
    let note = ref_of(&hovered, "Note");
    ok(home, cwd, &["click", &note]);
    let typed = ok(home, cwd, &["keyboard", "hello"]);
    assert_eq!(evidence_status(&typed), "verified", "{typed}");
    assert_eq!(element(&typed, note.parse().unwrap())["value"], "hello");

    // drag: the card into the Done column, by refs of one Observation.
    let card = ref_of(&typed, "Card A");
    let done = ref_of(&typed, "Done");
    let dragged = ok(home, cwd, &["drag", &card, "--to", &done]);
    assert_eq!(evidence_status(&dragged), "verified", "{dragged}");
    let board = ok(home, cwd, &["read", "#board"]);
    assert!(
        board["text"].as_str().unwrap().contains("done: card"),
        "{board}"
    );

    // wait: text that appears after a click; a selector that never matches runs out of time.
    let save = ref_of(&dragged, "Save");
    ok(home, cwd, &["click", &save]);
    let waited = ok(home, cwd, &["wait", "Saved"]);
    assert_eq!(waited["condition"], "text", "{waited}");
    assert_eq!(waited["state"]["textFound"], true, "{waited}");
    let gone = ok(
        home,
        cwd,
        &["wait", "--selector", "#nothing-here", "--hidden"],
    );
    assert_eq!(gone["condition"], "selector_hidden", "{gone}");
    fails(
        home,
        cwd,
        &["wait", "--selector", "#never", "--timeout", "1500"],
        1,
        "deadline_exceeded",
    );

    // console: the page's messages, and only the errors.
    let console = ok(home, cwd, &["console"]);
    let texts: Vec<&str> = console["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["text"].as_str())
        .collect();
    assert!(texts.contains(&"bp tools ready"), "{console}");
    let printed = as_text(home, cwd, &["console", "--level", "log,error"]);
    assert!(
        printed.contains(" log       bp tools ready\n")
            && printed.contains(" error     bp tools failed once\n"),
        "{printed}"
    );
    let errors = ok(home, cwd, &["console", "--level", "error"]);
    let entries = errors["entries"].as_array().unwrap();
    assert!(
        !entries.is_empty() && entries.iter().all(|e| e["level"] == "error"),
        "{errors}"
    );

    // upload: a file of the working directory into the ref's input.
    std::fs::write(cwd.join("cv.txt"), "my cv").unwrap();
    let observed = ok(home, cwd, &["observe"]);
    let resume = ref_of(&observed, "Resume file");
    let uploaded = ok(home, cwd, &["upload", &resume, "cv.txt"]);
    assert_eq!(evidence_status(&uploaded), "verified", "{uploaded}");
    assert_eq!(uploaded["evidence"]["fileCount"], 1, "{uploaded}");
    let serialized = uploaded.to_string();
    assert!(!serialized.contains(cwd.to_str().unwrap()), "{serialized}");
    fails(
        home,
        cwd,
        &["upload", &resume, "missing.txt"],
        1,
        "file_not_found",
    );

    // An annotated screenshot outlines the latest Observation's refs.
    let shot = ok(home, cwd, &["screenshot", "boxes.png", "--annotate"]);
    assert!(shot["annotationCount"].as_u64().unwrap() > 0, "{shot}");
    assert!(cwd.join("boxes.png").is_file());
    let only = ok(
        home,
        cwd,
        &["screenshot", "one.png", "--annotate", "--refs", &help],
    );
    assert_eq!(only["annotationCount"], 1, "{only}");

    // cookies and network requests need network.read.
    fails(home, cwd, &["cookies"], 1, "capability_denied");
    let cookies = ok(home, cwd, &["--allow", "network.read", "cookies"]);
    let theme = cookies["cookies"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "theme");
    assert_eq!(theme.unwrap()["value"], "dark", "{cookies}");
    // Cookie writes need network.control, and profile.write for bp's shared-profile Workspace;
    // a value from stdin is set, read back and deleted.
    fails(
        home,
        cwd,
        &[
            "--allow",
            "network.control",
            "cookies",
            "set",
            "bp-token",
            "x",
        ],
        1,
        "capability_denied",
    );
    let write = ["--allow", "network.control,profile.write", "cookies"];
    let (set, _) = ok_with_stdin(
        home,
        cwd,
        &[&write[..], &["set", "bp-token", "-", "--http-only"]].concat(),
        "from-stdin-value",
    );
    assert_eq!(set["evidence"]["status"], "verified", "{set}");
    assert_eq!(set["cookie"]["httpOnly"], true, "{set}");
    assert!(!set.to_string().contains("from-stdin-value"), "{set}");
    let cookies = ok(home, cwd, &["--allow", "network.read", "cookies"]);
    assert!(
        cookies.to_string().contains("from-stdin-value"),
        "{cookies}"
    );
    let deleted = ok(home, cwd, &[&write[..], &["delete", "bp-token"]].concat());
    assert_eq!(deleted["evidence"]["status"], "verified", "{deleted}");
    assert_eq!(deleted["deleted"], 1, "{deleted}");
    let listed = ok(home, cwd, &["--allow", "network.read", "network"]);
    let requests = listed["requests"].as_array().unwrap();
    let document = requests
        .iter()
        .find(|r| r["url"].as_str().unwrap().ends_with("/fixture/bp-tools"))
        .unwrap();
    let number = document["number"].to_string();
    let api = ok(
        home,
        cwd,
        &[
            "--allow",
            "network.read",
            "network",
            "list",
            "--url-contains",
            "api-data",
        ],
    );
    let api_requests = api["requests"].as_array().unwrap();
    assert_eq!(api_requests.len(), 1, "{api}");
    // Numbers are places among all of the tab's requests, with or without a filter.
    let api_number = api_requests[0]["number"].clone();
    assert!(
        requests
            .iter()
            .any(|r| r["number"] == api_number && r["url"] == api_requests[0]["url"]),
        "{listed}"
    );
    let printed = as_text(
        home,
        cwd,
        &[
            "--allow",
            "network.read",
            "network",
            "list",
            "--url-contains",
            "api-data",
        ],
    );
    assert!(
        printed.contains(&format!("{:>4}  200 GET ", api_number.as_u64().unwrap()))
            && printed.contains("/page/api-data\n"),
        "{printed}"
    );
    let got = ok(
        home,
        cwd,
        &[
            "--allow",
            "network.read",
            "network",
            "get",
            &number,
            "--body",
        ],
    );
    assert_eq!(got["request"]["status"], 200, "{got}");
    assert!(
        got["body"]["data"]
            .as_str()
            .unwrap()
            .contains("<title>bp tools</title>"),
        "{got}"
    );
    let none = fails(
        home,
        cwd,
        &["--allow", "network.read", "network", "get", "9999"],
        1,
        "invalid_params",
    );
    assert_eq!(none["remediation"]["action"], "inspect_state");

    // network rules need network.control; they block and mock what the page fetches.
    fails(home, cwd, &["network", "rules"], 1, "capability_denied");
    let control = ["--allow", "network.control,page.eval"];
    let with = |rest: &[&str]| -> Vec<String> {
        control.iter().chain(rest).map(|s| s.to_string()).collect()
    };
    let run = |rest: &[&str]| {
        let args = with(rest);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        ok(home, cwd, &args)
    };
    let blocked = run(&["network", "rules", "add", "*/page/blocked*", "block"]);
    assert_eq!(blocked["rule"]["action"], "block", "{blocked}");
    let mocked = run(&[
        "network",
        "rules",
        "add",
        "*/api/me",
        "mock",
        "--status",
        "200",
        "--body",
        "{\"name\":\"Ada\"}",
        "--header",
        "Content-Type: application/json",
    ]);
    assert_eq!(
        mocked["rule"]["headerNames"],
        json!(["Content-Type"]),
        "{mocked}"
    );
    let rules = run(&["network", "rules"]);
    assert_eq!(rules["rules"].as_array().unwrap().len(), 2, "{rules}");
    assert_eq!(rules["rules"][0]["number"], 1);
    let fetched = run(&[
        "eval",
        "fetch('/page/blocked').then(r => 'through ' + r.status, () => 'blocked')",
    ]);
    assert_eq!(fetched["value"], "blocked", "{fetched}");
    let me = run(&["eval", "fetch('/api/me').then(r => r.text())"]);
    assert_eq!(me["value"], "{\"name\":\"Ada\"}", "{me}");
    run(&["network", "rules", "remove", "1"]);
    let id = mocked["rule"]["ruleId"].as_str().unwrap();
    run(&["network", "rules", "remove", id]);
    let rules = run(&["network", "rules", "list"]);
    assert_eq!(rules["rules"], json!([]), "{rules}");
    let fetched = run(&[
        "eval",
        "fetch('/page/blocked').then(r => 'through ' + r.status, () => 'blocked')",
    ]);
    assert_eq!(fetched["value"], "through 200", "{fetched}");

    // HTTP auth: the password from stdin, never printed.
    let origin = rig.fixtures.url("");
    let (set, printed) = ok_with_stdin(
        home,
        cwd,
        &[
            "--allow",
            "network.control",
            "auth",
            "set",
            &origin,
            "ada",
            "-",
        ],
        "pa55-word\n",
    );
    assert_eq!(
        (&set["origin"], &set["replaced"]),
        (&json!(origin), &json!(false)),
        "{set}"
    );
    assert!(!printed.contains("pa55"), "{printed}");
    let (again, _) = ok_with_stdin(
        home,
        cwd,
        &[
            "--allow",
            "network.control",
            "auth",
            "set",
            &origin,
            "ada",
            "-",
        ],
        "other",
    );
    assert_eq!(again["replaced"], true, "{again}");
    ok(home, cwd, &["--allow", "network.control", "auth", "clear"]);
    fails(home, cwd, &["auth", "clear"], 1, "capability_denied");

    // downloads: listed, saved only when asked, under the safe name, once.
    let fresh = ok(home, cwd, &["observe"]);
    let get = ref_of(&fresh, "Get conftest.py");
    ok(home, cwd, &["click", &get]);
    let mut listed = Value::Null;
    assert!(
        wait_until(Duration::from_secs(20), || {
            listed = ok(home, cwd, &["downloads"]);
            listed["downloads"]
                .as_array()
                .is_some_and(|d| d.iter().any(|d| d["state"] == "completed"))
        }),
        "{listed}"
    );
    assert!(std::fs::read_dir(cwd).unwrap().all(|e| {
        !e.unwrap()
            .file_name()
            .to_string_lossy()
            .contains("conftest")
    }));
    let open_dir = cwd.join("shared");
    std::fs::create_dir(&open_dir).unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&open_dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    }
    let refused = fails(
        home,
        cwd,
        &["downloads", "--save", "shared"],
        1,
        "path_not_allowed",
    );
    assert_eq!(refused["remediation"]["action"], "choose_path");
    assert_eq!(std::fs::read_dir(&open_dir).unwrap().count(), 0);
    let saved = ok(home, cwd, &["downloads", "--save", "saved"]);
    let files = saved["saved"].as_array().unwrap();
    assert_eq!(files.len(), 1, "{saved}");
    let path = Path::new(files[0]["path"].as_str().unwrap());
    let name = path.file_name().unwrap().to_str().unwrap();
    assert!(
        name.starts_with("download-") && name.ends_with("-conftest.py"),
        "{name}"
    );
    assert_eq!(path.parent().unwrap(), cwd.join("saved"));
    assert_eq!(std::fs::read_to_string(path).unwrap(), "import os\n");
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(cwd.join("saved"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o077, 0, "{mode:o}");
    }
    let printed = as_text(home, cwd, &["downloads"]);
    assert!(
        printed.starts_with("completed  conftest.py  10 bytes"),
        "{printed}"
    );
    let twice = ok(home, cwd, &["downloads", "--save", "saved"]);
    assert_eq!(twice["saved"], json!([]), "{twice}");
    assert_eq!(
        twice["notSaved"][0]["code"], "artifact_not_found",
        "{twice}"
    );

    // goto and close.
    let second = rig.fixtures.url("/page/second");
    let went = ok(home, cwd, &["goto", &second]);
    assert_eq!(went["title"], "second", "{went}");
    let tabs = ok(home, cwd, &["tabs"]);
    let before = tabs["tabs"].as_array().unwrap().len();
    let closed = ok(home, cwd, &["close"]);
    assert!(closed.is_object(), "{closed}");
    let tabs = ok(home, cwd, &["tabs"]);
    assert_eq!(tabs["tabs"].as_array().unwrap().len(), before - 1, "{tabs}");
    fails(home, cwd, &["close", "99"], 1, "invalid_params");
}
