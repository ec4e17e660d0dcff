//! Process tests of the human `bp` CLI against a real headless Chromium: every command's JSON
//! output (stdout is a pipe) and exit code, `bp open` then `bp click 3` in separate processes
//! acting on the same Observation, two `bp` processes at once on one tab, `bp disconnect`
//! refusing while an embedded host is connected, no browser ready (exit 5), and the TTY
//! rendering of `bp observe` and of an error with remediation through a pseudo-terminal
//! (python3's `pty` module). One Chromium for the whole module.

use crate::support;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::chromium::OwnCdp;
use support::rig::Rig;
use support::{BP, TestHome, wait_until};

/// Runs `bp ARGS` in `cwd` with the rig's home (stdout is a pipe: JSON) and parses each stdout
/// line as JSON.
pub(crate) fn bp_in(
    home: &TestHome,
    cwd: &Path,
    args: &[&str],
    env: &[(&str, &str)],
) -> (i32, Vec<Value>, String) {
    let mut command = home.command(BP);
    command.current_dir(cwd).args(args).stdin(Stdio::null());
    for (key, value) in env {
        command.env(key, value);
    }
    let output = command.output().expect("run bp");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let lines = stdout
        .lines()
        .map(|line| {
            serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("bp {args:?}: not JSON ({e}): {line}"))
        })
        .collect();
    (
        output.status.code().unwrap_or(-1),
        lines,
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// `bp ARGS` that must succeed with one JSON object.
pub(crate) fn ok(home: &TestHome, cwd: &Path, args: &[&str]) -> Value {
    let (code, lines, stderr) = bp_in(home, cwd, args, &[]);
    assert_eq!(code, 0, "bp {args:?}: {lines:?} {stderr}");
    assert_eq!(lines.len(), 1, "bp {args:?}: {lines:?}");
    lines.into_iter().next().unwrap()
}

/// `bp ARGS` that must fail with `exit` and `data.code` (printed as `{"error": ...}`).
pub(crate) fn fails(home: &TestHome, cwd: &Path, args: &[&str], exit: i32, code: &str) -> Value {
    let (status, lines, stderr) = bp_in(home, cwd, args, &[]);
    assert_eq!(status, exit, "bp {args:?}: {lines:?} {stderr}");
    let error = lines
        .first()
        .map(|l| l["error"].clone())
        .unwrap_or(Value::Null);
    assert_eq!(error["code"], code, "bp {args:?}: {lines:?}");
    error
}

pub(crate) fn element(observation: &Value, reference: u64) -> &Value {
    observation["elements"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["ref"] == reference)
        .unwrap_or_else(|| panic!("no ref {reference} in {observation}"))
}

/// The ref (as an argument) of the element named `name`.
pub(crate) fn ref_of(observation: &Value, name: &str) -> String {
    observation["elements"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == name)
        .unwrap_or_else(|| panic!("no {name:?} in {observation}"))["ref"]
        .to_string()
}

/// Runs `bp ARGS` on a pseudo-terminal (stdin, stdout and stderr all on it) and returns what
/// the terminal showed and the exit code.
fn on_tty(home: &TestHome, args: &[&str], env: &[(&str, &str)]) -> (i32, String) {
    const PTY: &str = r#"
import os, subprocess, sys
master, slave = os.openpty()
child = subprocess.Popen(sys.argv[1:], stdin=slave, stdout=slave, stderr=slave, close_fds=True)
os.close(slave)
out = b""
while True:
    try:
        chunk = os.read(master, 65536)
    except OSError:
        break
    if not chunk:
        break
    out += chunk
sys.stdout.buffer.write(out)
sys.exit(child.wait())
"#;
    let mut command = home.command("python3");
    command
        .arg("-c")
        .arg(PTY)
        .arg(BP)
        .args(args)
        .stdin(Stdio::null());
    command.env_remove("NO_COLOR");
    for (key, value) in env {
        command.env(key, value);
    }
    let output = command.output().expect("python3 with pty");
    (
        output.status.code().unwrap_or(-1),
        as_shown(&String::from_utf8_lossy(&output.stdout)),
    )
}

/// What a terminal shows of `raw`: each line as what follows its last carriage return. A slow
/// call draws a progress line on stderr and clears it with `\r` before the output comes, so the
/// bytes of a loaded machine carry it while the screen does not.
fn as_shown(raw: &str) -> String {
    raw.split('\n')
        .map(|line| {
            line.trim_end_matches('\r')
                .rsplit('\r')
                .next()
                .unwrap_or("")
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn bp_drives_the_shared_browser_between_invocations() {
    let rig = Rig::start();
    let home = &rig.home;
    let work = tempfile::tempdir().unwrap();
    let cwd = work.path();

    // No Broker yet: status says so and starts none.
    let (code, lines, _) = bp_in(home, cwd, &["status"], &[]);
    assert_eq!(code, 3);
    assert_eq!(lines[0]["running"], false);
    assert!(home.broker_pid().is_none());

    let connected = ok(home, cwd, &["connect"]);
    assert_eq!(connected["state"], "connected");
    let again = ok(home, cwd, &["connect"]);
    assert_eq!(again["reused"], true);
    let error = fails(
        home,
        cwd,
        &["connect", "--browser", "netscape"],
        1,
        "invalid_params",
    );
    assert_eq!(error["remediation"]["action"], "discover");

    // Before any tab: a ref command explains how to get one.
    let error = fails(home, cwd, &["observe"], 1, "invalid_params");
    assert_eq!(error["remediation"]["action"], "open_tab");

    // bp open, then bp click 3 in another process, on the same Observation: the page inserts
    // an element above the checkbox in between, so a fresh Observation would number it 4.
    let form = rig.fixtures.url("/fixture/bp-form");
    let opened = ok(home, cwd, &["open", &form]);
    let observation = &opened["observation"];
    assert_eq!(opened["tab"]["loadState"], "complete");
    assert_eq!(element(observation, 3)["role"], "checkbox");
    assert_eq!(element(observation, 3)["name"], "Keep me signed in");
    assert_eq!(element(observation, 3)["checked"], false);
    let serialized = opened.to_string();
    assert!(
        !serialized.contains("/tmp/") && !serialized.contains("sessionId"),
        "{serialized}"
    );
    let mut own = OwnCdp::connect(&rig.chromium);
    own.evaluate_in_page(
        "/fixture/bp-form",
        "document.querySelector('form').insertAdjacentHTML('afterbegin', '<label><input type=checkbox name=promo> Send me offers</label>')",
    );
    let clicked = ok(home, cwd, &["click", "3"]);
    assert_eq!(clicked["evidence"]["status"], "verified", "{clicked}");
    assert!(
        clicked["evidence"]["effects"]
            .as_array()
            .unwrap()
            .contains(&json!("checked_changed"))
    );
    let fresh = clicked["elements"].as_array().unwrap();
    let remember = fresh
        .iter()
        .find(|e| e["name"] == "Keep me signed in")
        .unwrap();
    let promo = fresh
        .iter()
        .find(|e| e["name"] == "Send me offers")
        .unwrap();
    assert_eq!(remember["checked"], true, "{clicked}");
    assert_eq!(promo["checked"], false, "{clicked}");
    assert_ne!(clicked["observationId"], observation["observationId"]);
    // The click's own Observation is now the latest. Refs are stable within the document: the
    // clicked checkbox keeps its number, the inserted one gets a number never used before.
    assert_eq!(element(&clicked, 3)["name"], "Keep me signed in");
    let earlier_max = observation["elements"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["ref"].as_u64().unwrap())
        .max()
        .unwrap();
    assert!(promo["ref"].as_u64().unwrap() > earlier_max, "{clicked}");

    // Refs outside the Observation are refused, never resolved to another element.
    fails(home, cwd, &["click", "99"], 1, "stale_ref");

    let observed = ok(home, cwd, &["observe", "--limit", "3"]);
    assert_eq!(observed["elements"].as_array().unwrap().len(), 3);
    assert_eq!(observed["truncated"], true);
    let observed = ok(home, cwd, &["observe"]);
    let email = ref_of(&observed, "Email");
    // The same number as in the first Observation of this document (stable refs).
    assert_eq!(email, ref_of(observation, "Email"));

    let typed = ok(home, cwd, &["type", &email, "ada@example.com", "--clear"]);
    assert_eq!(typed["evidence"]["status"], "verified", "{typed}");
    assert_eq!(
        element(&typed, email.parse().unwrap())["value"],
        "ada@example.com"
    );

    let country = typed["elements"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["role"] == "combobox")
        .unwrap()["ref"]
        .to_string();
    let selected = ok(home, cwd, &["select", &country, "de"]);
    assert_eq!(selected["evidence"]["status"], "verified", "{selected}");
    let by_label = ok(home, cwd, &["select", &country, "France"]);
    assert_eq!(by_label["evidence"]["status"], "verified", "{by_label}");
    assert_eq!(
        element(&by_label, country.parse().unwrap())["value"],
        "France"
    );

    // A password from stdin: typed, verified, never echoed.
    let password = ref_of(&selected, "Password");
    let mut typing = home.command(BP);
    typing
        .current_dir(cwd)
        .args(["type", &password, "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut typing = typing.spawn().unwrap();
    {
        use std::io::Write;
        let mut stdin = typing.stdin.take().unwrap();
        stdin.write_all(b"s3cret-Pass\n").unwrap();
    }
    let typed = typing.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&typed.stdout);
    assert_eq!(typed.status.code(), Some(0), "{stdout}");
    assert!(
        !stdout.contains("s3cret") && !String::from_utf8_lossy(&typed.stderr).contains("s3cret")
    );
    let typed: Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(typed["evidence"]["status"], "verified", "{typed}");
    assert_eq!(typed["evidence"]["sensitive"], true, "{typed}");
    let field = element(&typed, password.parse().unwrap());
    assert_eq!(
        (&field["sensitive"], &field["valueLength"]),
        (&json!(true), &json!(11))
    );
    assert!(field.get("value").is_none(), "{field}");

    let pressed = ok(home, cwd, &["press", "Tab"]);
    assert_eq!(pressed["evidence"]["action"], "press");

    let read = ok(home, cwd, &["read", "form"]);
    assert!(
        read["text"].as_str().unwrap().contains("Keep me signed in"),
        "{read}"
    );
    let found = ok(home, cwd, &["search", "signed in"]);
    assert!(found["total"].as_u64().unwrap() >= 1, "{found}");
    let inputs = ok(home, cwd, &["find", "form input"]);
    assert_eq!(inputs["total"], 4, "{inputs}");

    let scrolled = ok(home, cwd, &["scroll", "--by", "200"]);
    assert_eq!(scrolled["evidence"]["action"], "scroll", "{scrolled}");
    let delete = ref_of(&scrolled, "Delete draft");
    let to_ref = ok(home, cwd, &["scroll", &delete]);
    assert_eq!(to_ref["evidence"]["action"], "scroll", "{to_ref}");
    let to_text = ok(home, cwd, &["scroll", "--to", "Nothing yet"]);
    assert_eq!(to_text["evidence"]["action"], "scroll", "{to_text}");
    let no_text = fails(
        home,
        cwd,
        &["scroll", "--to", "no such words anywhere"],
        1,
        "invalid_params",
    );
    assert_eq!(no_text["context"]["reason"], "no_match");
    assert_eq!(no_text["context"]["reason"], "no_match");

    // A coordinate click on the "Send me offers" checkbox's centre.
    let promo = to_text["elements"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "Send me offers")
        .unwrap();
    let bounds = &promo["bounds"];
    let x = bounds["x"].as_f64().unwrap() + bounds["width"].as_f64().unwrap() / 2.0;
    let y = bounds["y"].as_f64().unwrap() + bounds["height"].as_f64().unwrap() / 2.0;
    let at = ok(home, cwd, &["click", "--xy", &format!("{x},{y}")]);
    assert_eq!(at["evidence"]["action"], "click", "{at}");
    let promo = at["elements"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "Send me offers")
        .unwrap();
    assert_eq!(promo["checked"], true, "{at}");
    let (code, _, _) = bp_in(home, cwd, &["click", "--xy", "12"], &[]);
    assert_eq!(code, 2);

    let frames = ok(home, cwd, &["frames"]);
    assert_eq!(frames["frames"][0]["main"], true);
    let frame = ok(home, cwd, &["frame", "0"]);
    assert_eq!(frame["frame"]["main"], true, "{frame}");
    fails(home, cwd, &["frame", "7"], 1, "invalid_params");

    // A confirm dialog stays open until answered.
    let fresh = ok(home, cwd, &["observe"]);
    let delete = fresh["elements"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "Delete draft")
        .unwrap()["ref"]
        .to_string();
    let asked = ok(home, cwd, &["click", &delete]);
    assert_eq!(asked["dialogOpen"], true, "{asked}");
    let dialogs = ok(home, cwd, &["dialogs"]);
    assert_eq!(dialogs["dialogs"][0]["message"], "Really delete the draft?");
    let answered = ok(home, cwd, &["dialog", "dismiss"]);
    assert_eq!(answered["action"], "dismiss");
    fails(home, cwd, &["dialog", "accept"], 1, "invalid_params");
    let status_text = ok(home, cwd, &["read", "#status"]);
    assert_eq!(status_text["text"], "Kept the draft");

    // Artifacts go where the user asked, never anywhere else; an existing file is kept.
    let shot = ok(home, cwd, &["screenshot", "page.png", "--full"]);
    assert_eq!(shot["path"], json!(cwd.join("page.png")));
    let png = std::fs::read(cwd.join("page.png")).unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    fails(home, cwd, &["screenshot", "page.png"], 1, "export_exists");
    let unnamed = ok(home, cwd, &["screenshot"]);
    assert!(Path::new(unnamed["path"].as_str().unwrap()).starts_with(cwd));
    ok(home, cwd, &["record", "start"]);
    ok(home, cwd, &["pdf", "page.pdf"]);
    assert_eq!(&std::fs::read(cwd.join("page.pdf")).unwrap()[..5], b"%PDF-");
    // The recording spans invocations; stopping it writes the player where the user asked.
    let recorded = ok(home, cwd, &["record", "stop", "run.html"]);
    assert_eq!(recorded["artifact"]["kind"], "recording", "{recorded}");
    assert!(recorded["frames"].as_u64().unwrap() >= 1, "{recorded}");
    let player = std::fs::read_to_string(cwd.join("run.html")).unwrap();
    assert!(player.starts_with("<!doctype html>"), "{recorded}");
    assert!(player.contains("browser.pdf completed"), "{recorded}");
    fails(
        home,
        cwd,
        &["record", "stop", "again.html"],
        1,
        "invalid_params",
    );

    // History: follow the nav link, back, forward, reload.
    let fresh = ok(home, cwd, &["observe"]);
    let pricing = fresh["elements"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "Pricing")
        .unwrap()["ref"]
        .to_string();
    let followed = ok(home, cwd, &["click", &pricing]);
    assert!(
        followed["evidence"]["effects"]
            .as_array()
            .unwrap()
            .contains(&json!("navigation")),
        "{followed}"
    );
    let back = ok(home, cwd, &["back"]);
    assert!(
        back["url"].as_str().unwrap().ends_with("/fixture/bp-form"),
        "{back}"
    );
    let forward = ok(home, cwd, &["forward"]);
    assert!(
        forward["url"].as_str().unwrap().ends_with("/page/pricing"),
        "{forward}"
    );
    let reloaded = ok(home, cwd, &["reload"]);
    assert_eq!(reloaded["loadState"], "complete");

    // Tabs: the current one is marked; `bp tab N` selects (and observes) another.
    let tabs = ok(home, cwd, &["tabs"]);
    let list = tabs["tabs"].as_array().unwrap();
    assert!(list.len() >= 2, "{tabs}");
    let current: Vec<&Value> = list.iter().filter(|t| t["current"] == true).collect();
    assert_eq!(current.len(), 1, "{tabs}");
    assert!(
        current[0]["url"]
            .as_str()
            .unwrap()
            .ends_with("/page/pricing")
    );
    let other = list.iter().find(|t| t["current"] == false).unwrap()["number"].to_string();
    let switched = ok(home, cwd, &["tab", &other]);
    assert!(switched["observationId"].is_string());
    let tabs = ok(home, cwd, &["tabs"]);
    assert_eq!(
        tabs["tabs"][other.parse::<usize>().unwrap() - 1]["current"],
        true,
        "{tabs}"
    );
    fails(home, cwd, &["tab", "42"], 1, "invalid_params");
    ok(home, cwd, &["open", &form]);

    // Events: JSON lines from the Workspace's journal.
    let (code, events, _) = bp_in(home, cwd, &["events"], &[]);
    assert_eq!(code, 0);
    assert!(
        events
            .iter()
            .any(|e| e["type"] == "command.status" && e["payload"]["method"] == "browser.click"),
        "{events:?}"
    );

    // --follow prints new events as they are journaled, until interrupted.
    let mut follow = home.command(BP);
    follow
        .current_dir(cwd)
        .args(["events", "--follow"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped());
    let mut follow = follow.spawn().unwrap();
    let lines = std::sync::Arc::new(std::sync::Mutex::new(Vec::<Value>::new()));
    let reader = {
        let lines = lines.clone();
        let stdout = follow.stdout.take().unwrap();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
            {
                lines
                    .lock()
                    .unwrap()
                    .push(serde_json::from_str(&line).unwrap());
            }
        })
    };
    assert!(wait_until(Duration::from_secs(20), || !lines
        .lock()
        .unwrap()
        .is_empty()));
    let before = lines.lock().unwrap().len();
    ok(home, cwd, &["read"]);
    assert!(
        wait_until(Duration::from_secs(20), || lines.lock().unwrap()[before..]
            .iter()
            .any(|e| e["payload"]["method"] == "browser.read")),
        "the followed journal never showed the read: {:?}",
        lines.lock().unwrap()
    );
    support::unsafe_kill(follow.id(), "INT");
    let ended = follow.wait().unwrap();
    assert_eq!(ended.code(), Some(0), "Ctrl-C ends --follow cleanly");
    reader.join().unwrap();

    // Usage errors are exit 2.
    let (code, _, _) = bp_in(home, cwd, &["frobnicate"], &[]);
    assert_eq!(code, 2);
    let (code, _, _) = bp_in(home, cwd, &["click"], &[]);
    assert_eq!(code, 2);

    full_size_screenshot(&rig, cwd);
    failed_open_leaves_no_tab_in_use(&rig, cwd);
    url_policy_flags(&rig, cwd);
    two_bp_processes_on_one_tab(&rig, cwd);
    tty_rendering(&rig);
    status_and_disconnect(&rig, cwd);
    no_browser_ready(cwd);
    generated_docs(cwd);
    bad_log_level(&rig, cwd);
    launch_twice_and_without_display(cwd);
}

/// `bp screenshot --full` of a page taller than the 1600 px preview saves the full-size image.
fn full_size_screenshot(rig: &Rig, cwd: &Path) {
    let home = &rig.home;
    ok(home, cwd, &["open", &rig.fixtures.url("/gen?n=1000")]);
    let shot = ok(home, cwd, &["screenshot", "tall.png", "--full"]);
    let png = std::fs::read(cwd.join("tall.png")).unwrap();
    assert_eq!(&png[12..16], b"IHDR");
    let width = u32::from_be_bytes(png[16..20].try_into().unwrap());
    let height = u32::from_be_bytes(png[20..24].try_into().unwrap());
    assert!(
        height > 1600,
        "the page is not tall enough to test: {height}"
    );
    assert_eq!(
        (json!(width), json!(height)),
        (shot["width"].clone(), shot["height"].clone())
    );
    assert_ne!(shot["artifact"]["kind"], "preview", "{shot}");
}

/// `bp` and the subcommands a person runs refuse a `BROWSER_PILOT_LOG` that names no level
/// (exit 2); the bridge warns and goes on with its default.
fn bad_log_level(rig: &Rig, cwd: &Path) {
    let (code, lines, stderr) = bp_in(
        &rig.home,
        cwd,
        &["status"],
        &[("BROWSER_PILOT_LOG", "loud")],
    );
    assert_eq!(code, 2, "{lines:?} {stderr}");
    assert!(stderr.contains("BROWSER_PILOT_LOG"), "{stderr}");
    let stopped = rig
        .home
        .command(support::BIN)
        .args(["browser", "stop"])
        .env("BROWSER_PILOT_LOG", "loud")
        .output()
        .unwrap();
    assert_eq!(stopped.status.code(), Some(2));
    let mut command = rig.home.command(support::BIN);
    command
        .args(["bridge", "--stdio"])
        .env("BROWSER_PILOT_LOG", "loud");
    let mut bridge = support::Bridge::spawn(command);
    let initialized = bridge.initialize("com.example.loud", "i1");
    assert_eq!(initialized["protocol"]["major"], 1, "{initialized}");
    bridge.close_stdin();
    assert_eq!(bridge.wait_exit(Duration::from_secs(20)), Some(0));
}

/// A second `bp launch` says the managed Chromium is already running; a windowed launch where
/// there is no display says to use `--headless`.
fn launch_twice_and_without_display(cwd: &Path) {
    let home = TestHome::new();
    let first = ok(&home, cwd, &["launch", "--headless"]);
    assert_eq!(first["alreadyRunning"], false, "{first}");
    let second = ok(&home, cwd, &["launch", "--headless"]);
    assert_eq!(second["alreadyRunning"], true, "{second}");
    ok(&home, cwd, &["stop"]);
    let mut command = home.command(BP);
    command
        .current_dir(cwd)
        .args(["launch"])
        .env_remove("DISPLAY")
        .env_remove("WAYLAND_DISPLAY")
        .stdin(Stdio::null());
    let output = command.output().unwrap();
    assert_eq!(output.status.code(), Some(5));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("bp launch --headless"), "{stderr}");
    // Chromium's own reason, quoted from its start-up output.
    assert!(stderr.contains("Missing X server or $DISPLAY"), "{stderr}");
}

/// The compatibility Workspace lives while it is used and expires when it is not: with the idle
/// limit at 20 s, `bp` used every 5 s for 60 s keeps its tab; left unused, the Broker reclaims
/// it (closing its tab) and the next `bp` says it expired and why.
#[test]
fn bp_workspace_lives_while_used_and_expires_when_idle() {
    let Rig {
        home,
        profile,
        chromium,
        fixtures,
    } = Rig::start();
    let rig = Rig {
        home: home.with_env("BROWSER_PILOT_WORKSPACE_IDLE_MS", "20000"),
        profile,
        chromium,
        fixtures,
    };
    let home = &rig.home;
    let work = tempfile::tempdir().unwrap();
    let cwd = work.path();
    let form = rig.fixtures.url("/fixture/bp-form");
    ok(home, cwd, &["open", &form]);
    let mut own = OwnCdp::connect(&rig.chromium);
    let open_tabs = |own: &mut OwnCdp| own.pages().iter().filter(|(_, url)| *url == form).count();
    assert_eq!(open_tabs(&mut own), 1);

    let used_since = Instant::now();
    while used_since.elapsed() < Duration::from_secs(60) {
        // The pace of a person at work, not a synchronisation.
        std::thread::sleep(Duration::from_secs(5));
        let observed = ok(home, cwd, &["observe"]);
        assert_eq!(observed["url"], form.as_str(), "{observed}");
    }
    assert_eq!(open_tabs(&mut own), 1, "a Workspace in use keeps its tab");

    // Unused, it is reclaimed within the limit and a sweep tick; its tab is closed.
    assert!(
        wait_until(Duration::from_secs(40), || open_tabs(&mut own) == 0),
        "the idle Workspace's tab was never closed"
    );
    let error = fails(home, cwd, &["observe"], 1, "workspace_not_found");
    let message = error["message"].as_str().unwrap();
    assert!(
        message.contains("expired") && message.contains("20 s"),
        "{error}"
    );
    assert_eq!(error["context"]["reason"], "idle", "{error}");
    assert_eq!(error["remediation"]["action"], "open_tab", "{error}");
    // Said once: after that it is an ordinary Workspace with no tab yet.
    let error = fails(home, cwd, &["observe"], 1, "invalid_params");
    assert_eq!(error["remediation"]["action"], "open_tab");
}

/// A `bp open` whose navigation fails (an unsafe port) exits with `navigation_failed`, and the
/// tab it made is not left "in use by another host": its Lease ended with the invocation.
fn failed_open_leaves_no_tab_in_use(rig: &Rig, cwd: &Path) {
    let home = &rig.home;
    let error = fails(
        home,
        cwd,
        &["open", "http://127.0.0.1:6000/"],
        1,
        "navigation_failed",
    );
    assert!(
        error["message"].as_str().unwrap().contains("UNSAFE_PORT"),
        "{error}"
    );
    let tabs = ok(home, cwd, &["tabs"]);
    let tabs = tabs["tabs"].as_array().unwrap();
    assert!(!tabs.is_empty());
    for tab in tabs {
        assert_eq!(tab["controlledElsewhere"], false, "{tabs:?}");
    }
}

/// `--url-block` / `BP_URL_ALLOW` give bp's invocation a Workspace held to that policy (one of
/// its own: bp's ordinary Workspace stays unrestricted); a bad pattern is the Broker's
/// `invalid_params` naming it.
fn url_policy_flags(rig: &Rig, cwd: &Path) {
    let home = &rig.home;
    let page = rig.fixtures.url("/page/policy");
    let origin = rig.fixtures.url("");
    let error = fails(
        home,
        cwd,
        &["--url-block", &origin, "open", &page],
        1,
        "url_blocked",
    );
    assert_eq!(error["context"]["reason"], "blocked", "{error}");
    assert_eq!(rig.fixtures.hits("/page/policy"), 0);
    let (code, lines, stderr) = bp_in(
        home,
        cwd,
        &["open", &page],
        &[("BP_URL_ALLOW", "https://elsewhere.example")],
    );
    assert_eq!(code, 1, "{lines:?} {stderr}");
    assert_eq!(lines[0]["error"]["context"]["reason"], "not_allowed");
    let error = fails(
        home,
        cwd,
        &["--url-allow", "ftp://x.example", "open", &page],
        1,
        "invalid_params",
    );
    assert_eq!(
        error["context"]["path"], "params.urlPolicy.allow[0]",
        "{error}"
    );
    let opened = ok(home, cwd, &["--url-allow", &origin, "open", &page]);
    assert_eq!(opened["tab"]["loadState"], "complete", "{opened}");
    assert_eq!(rig.fixtures.hits("/page/policy"), 1);
}

/// The second `bp` waits a bounded time for the tab the first one controls, then fails with
/// `target_controlled_elsewhere` (exit 4); once the first is done the tab is free again.
fn two_bp_processes_on_one_tab(rig: &Rig, cwd: &Path) {
    let home = &rig.home;
    ok(home, cwd, &["open", &rig.fixtures.url("/fixture/bp-hold")]);
    let mut first = home.command(BP);
    first
        .current_dir(cwd)
        .args(["reload"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let first = first.spawn().unwrap();
    assert!(
        wait_until(Duration::from_secs(20), || rig
            .fixtures
            .hits("/hold/bp-reload")
            >= 1),
        "the reload never reached the server"
    );
    let (code, lines, stderr) = bp_in(home, cwd, &["observe"], &[("BP_CONTROL_WAIT_MS", "1500")]);
    assert_eq!(code, 4, "{lines:?} {stderr}");
    assert_eq!(lines[0]["error"]["code"], "target_controlled_elsewhere");
    assert!(
        lines[0]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("waited"),
        "{lines:?}"
    );
    rig.fixtures.release("bp-reload");
    let done = first.wait_with_output().unwrap();
    assert_eq!(
        done.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&done.stderr)
    );
    let reloaded: Value = serde_json::from_slice(&done.stdout).unwrap();
    // The held report arrived (the fixture server's plain page).
    assert!(
        reloaded["url"]
            .as_str()
            .unwrap()
            .ends_with("/hold/bp-reload"),
        "{reloaded}"
    );
    assert_eq!(reloaded["loadState"], "complete", "{reloaded}");
    let observed = ok(home, cwd, &["observe"]);
    assert_eq!(observed["url"], reloaded["url"]);
}

/// On a terminal: the lean text (`[ref] role "name" state` lines, refs in colour, none with
/// NO_COLOR; an action's evidence and what changed), and an error with its code and the
/// remediation's words.
fn tty_rendering(rig: &Rig) {
    let home = &rig.home;
    ok(
        home,
        Path::new("/"),
        &["open", &rig.fixtures.url("/fixture/bp-form")],
    );
    let (code, screen) = on_tty(home, &["observe"], &[]);
    assert_eq!(code, 0, "{screen}");
    assert!(
        screen.contains("\u{1b}[36m[3]\u{1b}[0m checkbox \"Keep me signed in\" unchecked @"),
        "{screen:?}"
    );
    assert!(
        !screen.trim_start().starts_with('{'),
        "JSON on a terminal: {screen}"
    );
    // The lean text MCP hosts read: a page header, then one line per element.
    let (code, plain) = on_tty(home, &["observe"], &[("NO_COLOR", "1")]);
    assert_eq!(code, 0, "{plain}");
    assert!(!plain.contains('\u{1b}'), "{plain:?}");
    let lines: Vec<&str> = plain.lines().map(|l| l.trim_end_matches('\r')).collect();
    assert!(lines[0].starts_with('"'), "{lines:#?}");
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("[2] textbox \"Email\" =\"\"")),
        "{lines:#?}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("[3] checkbox \"Keep me signed in\" unchecked @")),
        "{lines:#?}"
    );
    // An action: its evidence and what changed, with the ref.
    let (code, clicked) = on_tty(home, &["click", "3"], &[("NO_COLOR", "1")]);
    assert_eq!(code, 0, "{clicked}");
    let lines: Vec<&str> = clicked.lines().map(|l| l.trim_end_matches('\r')).collect();
    assert_eq!(lines[0], "verified", "{lines:#?}");
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("~[3] \"Keep me signed in\" checked")),
        "{lines:#?}"
    );
    assert!(lines.len() <= 3, "more than the change: {lines:#?}");
    let (code, error) = on_tty(home, &["tab", "42"], &[("NO_COLOR", "1")]);
    assert_eq!(code, 1, "{error}");
    assert!(error.contains("error: there is no tab 42"), "{error}");
    assert!(error.contains("code: invalid_params"), "{error}");
    assert!(
        error.contains("what to do: Run `bp tabs` for the numbers. (list_tabs)"),
        "{error}"
    );
    // --json on a terminal still prints JSON.
    let (code, forced) = on_tty(home, &["--json", "observe", "--limit", "1"], &[]);
    assert_eq!(code, 0);
    let value: Value = serde_json::from_str(forced.trim()).unwrap();
    assert!(value["observationId"].is_string());
}

/// `bp status` lists the compatibility Workspace; `bp disconnect` releases it and refuses to
/// stop the Broker while an embedded host is connected, then stops it once it left.
fn status_and_disconnect(rig: &Rig, cwd: &Path) {
    let home = &rig.home;
    let status = ok(home, cwd, &["status"]);
    assert_eq!(status["running"], true);
    assert!(
        status["browsers"]
            .as_array()
            .unwrap()
            .iter()
            .any(|b| b["state"] == "connected"),
        "{status}"
    );
    let workspaces = status["workspaces"].as_array().unwrap();
    assert!(
        workspaces.iter().any(|w| w["client"] == "browser-pilot-cli"
            && w["clientKey"].as_str().unwrap().starts_with("bp:")),
        "{status}"
    );
    assert_eq!(status["cli"]["clientId"], "browser-pilot-cli");

    let mut host = home.spawn_bridge();
    host.initialize("com.example.embedded", "i1");
    let (code, lines, stderr) = bp_in(home, cwd, &["disconnect"], &[]);
    assert_eq!(code, 4, "{lines:?} {stderr}");
    assert_eq!(lines[0]["workspace"]["released"], true, "{lines:?}");
    assert_eq!(lines[0]["stopped"], false);
    assert_eq!(lines[0]["error"]["code"], "broker_in_use");
    let status = ok(home, cwd, &["status"]);
    assert!(
        !status["workspaces"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w["client"] == "browser-pilot-cli"),
        "the compatibility Workspace is released: {status}"
    );
    host.close_stdin();
    host.wait_exit(Duration::from_secs(10));
    let broker = home.broker_pid().unwrap();
    let stopped = ok(home, cwd, &["disconnect"]);
    assert_eq!(stopped["stopped"], true, "{stopped}");
    assert!(wait_until(Duration::from_secs(15), || !support::pid_alive(
        broker
    )));
    let (code, lines, _) = bp_in(home, cwd, &["status"], &[]);
    assert_eq!((code, &lines[0]["running"]), (3, &json!(false)));
    let gone = ok(home, cwd, &["disconnect"]);
    assert_eq!(gone["running"], false);
}

/// A home whose only candidate is the managed Chromium, not started: exit 5 with the way out.
fn no_browser_ready(cwd: &Path) {
    let empty = tempfile::tempdir().unwrap();
    let home = TestHome::new().with_env(
        "BROWSER_PILOT_DISCOVERY_DIRS",
        empty.path().to_str().unwrap(),
    );
    let error = fails(&home, cwd, &["open", "about:blank"], 5, "browser_not_ready");
    assert!(
        error["remediation"]["message"]
            .as_str()
            .unwrap()
            .contains("bp launch --headless"),
        "{error}"
    );
}

/// Completions and the man page come from the same definitions; `--help` has examples and
/// lists no command whose tools do not exist.
fn generated_docs(cwd: &Path) {
    let run = |args: &[&str]| {
        let output = Command::new(BP)
            .current_dir(cwd)
            .args(args)
            .output()
            .unwrap();
        assert!(output.status.success(), "bp {args:?}");
        String::from_utf8(output.stdout).unwrap()
    };
    assert!(run(&["completions", "bash"]).contains("complete -F _bp"));
    assert!(run(&["completions", "zsh"]).starts_with("#compdef bp"));
    assert!(run(&["completions", "fish"]).contains("complete -c bp"));
    let man = run(&["man"]);
    assert!(
        man.contains(".TH bp") && man.contains("disconnect"),
        "{man}"
    );
    // `bp man DIR` writes every page bp.1 links to.
    let pages = tempfile::tempdir().unwrap();
    run(&["man", pages.path().to_str().unwrap()]);
    let top = std::fs::read_to_string(pages.path().join("bp.1")).unwrap();
    let linked: Vec<&str> = top
        .split("bp\\-")
        .skip(1)
        .filter_map(|rest| rest.split_once("(1)").map(|(name, _)| name))
        .filter(|name| name.chars().all(|c| c.is_ascii_lowercase()))
        .collect();
    assert!(linked.contains(&"open") && linked.len() > 20, "{linked:?}");
    for name in linked {
        let page = std::fs::read_to_string(pages.path().join(format!("bp-{name}.1")))
            .unwrap_or_else(|_| panic!("bp.1 links bp-{name}(1), which was not written"));
        assert!(page.contains(&format!(".TH bp-{name} 1")), "{page}");
    }
    let help = run(&["--help"]);
    assert!(help.contains("Exit codes: 0 ok"), "{help}");
    for listed in [
        "upload",
        "cookies",
        "network",
        "eval",
        "downloads",
        "auth",
        "wait",
    ] {
        assert!(
            help.contains(&format!("  {listed} ")),
            "{listed} not listed: {help}"
        );
    }
    let eval = run(&["eval", "--help"]);
    assert!(
        eval.contains("--allow page.eval") && eval.contains("BP_ALLOW=page.eval"),
        "{eval}"
    );
    assert!(run(&["click", "--help"]).contains("bp click 3"));
}
