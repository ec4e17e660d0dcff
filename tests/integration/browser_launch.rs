//! Process tests of `browser-pilot browser launch|stop` against the real
//! headless Chromium, each with its own temporary `BROWSER_PILOT_HOME`, and of the launched
//! browser's start tab as the first Workspace's dedicated window.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use serde_json::{Value, json};

use crate::support;
use support::chromium::Fixtures;
use support::rig::Agent;
use support::{TestHome, unsafe_kill, wait_until};

fn require_chromium() {
    let path = std::env::var_os("BROWSER_PILOT_CHROMIUM")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/bin/chromium"));
    assert!(
        path.is_file(),
        "Chromium not found at {}: install it with `sudo apt-get install chromium` \
         (Debian/Ubuntu) or set BROWSER_PILOT_CHROMIUM",
        path.display()
    );
}

fn run(home: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_browser-pilot"))
        .args(args)
        .env("BROWSER_PILOT_HOME", home)
        .output()
        .expect("run browser-pilot")
}

fn json_stdout(output: &Output) -> Value {
    assert!(
        output.status.success(),
        "failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("stdout is one json value")
}

fn profile_dir(home: &Path) -> PathBuf {
    home.join("browser").join("managed-profile")
}

fn keeper_socket(home: &Path) -> PathBuf {
    home.join("browser").join("keeper.sock")
}

/// The pid in the profile's `SingletonLock` (`<host>-<pid>`): the browser process.
fn browser_pid(home: &Path) -> u32 {
    let target = std::fs::read_link(profile_dir(home).join("SingletonLock")).unwrap();
    let target = target.to_string_lossy().into_owned();
    target.rsplit_once('-').unwrap().1.parse().unwrap()
}

fn pid_alive(pid: u32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
        && !std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
            stat.rsplit_once(')')
                .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'))
        })
}

/// `pid` and all its descendants.
fn process_tree(pid: u32) -> Vec<u32> {
    let mut parents: Vec<(u32, u32)> = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(child) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{child}/stat")) else {
            continue;
        };
        let Some(parent) = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse::<u32>().ok())
        else {
            continue;
        };
        parents.push((child, parent));
    }
    let mut tree = vec![pid];
    let mut at = 0;
    while at < tree.len() {
        let parent = tree[at];
        tree.extend(
            parents
                .iter()
                .filter(|(_, p)| *p == parent)
                .map(|(c, _)| *c),
        );
        at += 1;
    }
    tree
}

/// The socket inodes the processes hold open.
fn socket_inodes(pids: &[u32]) -> Vec<u64> {
    let mut inodes = Vec::new();
    for pid in pids {
        let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
            continue;
        };
        for fd in fds.flatten() {
            let Ok(target) = std::fs::read_link(fd.path()) else {
                continue;
            };
            let target = target.to_string_lossy().into_owned();
            if let Some(inode) = target
                .strip_prefix("socket:[")
                .and_then(|rest| rest.strip_suffix(']'))
                .and_then(|inode| inode.parse().ok())
            {
                inodes.push(inode);
            }
        }
    }
    inodes
}

/// The listening TCP sockets (port, inode) as uid `nobody` reads them from
/// `/proc/net/tcp` and `/proc/net/tcp6`: what another local user can find.
fn listening_as_nobody() -> Vec<(u16, u64)> {
    let output = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .args(["cat", "/proc/net/tcp", "/proc/net/tcp6"])
        .output()
        .expect("run setpriv (util-linux)");
    assert!(output.status.success(), "{output:?}");
    let text = String::from_utf8(output.stdout).unwrap();
    let mut listening = Vec::new();
    for line in text.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
        if fields.len() < 10 || fields[3] != "0A" {
            continue;
        }
        let Some(port) = fields[1]
            .rsplit_once(':')
            .and_then(|(_, port)| u16::from_str_radix(port, 16).ok())
        else {
            continue;
        };
        if let Ok(inode) = fields[9].parse() {
            listening.push((port, inode));
        }
    }
    listening
}

/// The TCP ports that another uid sees listening and that belong to the
/// process tree of `pid`.
fn ports_another_uid_finds(pid: u32) -> Vec<u16> {
    let inodes = socket_inodes(&process_tree(pid));
    listening_as_nobody()
        .into_iter()
        .filter(|(_, inode)| inodes.contains(inode))
        .map(|(port, _)| port)
        .collect()
}

fn port_is_open(port: u16) -> bool {
    TcpStream::connect(("127.0.0.1", port)).is_ok()
}

/// Stops the managed browser even when an assertion failed midway.
struct StopOnDrop<'a>(&'a Path);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        let _ = run(self.0, &["browser", "stop"]);
    }
}

#[test]
fn launch_is_idempotent_and_stop_closes_the_browser() {
    require_chromium();
    let home_dir = tempfile::tempdir().unwrap();
    let home = home_dir.path().join("bp-home");
    // A stale file from an earlier run must not be mistaken for a browser.
    std::fs::create_dir_all(profile_dir(&home)).unwrap();
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let stale_port = closed.local_addr().unwrap().port();
    drop(closed);
    std::fs::write(
        profile_dir(&home).join("DevToolsActivePort"),
        format!("{stale_port}\n/devtools/browser/stale"),
    )
    .unwrap();

    let _stop = StopOnDrop(&home);
    let launched = json_stdout(&run(&home, &["browser", "launch", "--headless"]));
    assert_eq!(launched["managed"], true);
    assert_eq!(launched["channel"], "managed");
    assert_eq!(launched["state"], "ready");
    assert_eq!(launched["processState"], "running");
    assert_eq!(launched["remoteDebuggingState"], "enabled");
    assert_eq!(launched["authorizationState"], "unknown");
    assert!(launched.get("remediation").is_none());
    let id = launched["id"].as_str().unwrap().to_owned();
    assert!(id.starts_with("browser:"), "{id}");

    // The browser has its keeper's pipe and no port: no DevToolsActivePort, and
    // the socket is owner-only in an owner-only directory.
    assert!(!profile_dir(&home).join("DevToolsActivePort").exists());
    let socket = keeper_socket(&home);
    let mode = std::fs::metadata(&socket).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode & 0o077, 0, "socket mode {mode:o}");
    let text = launched.to_string();
    assert!(!text.contains("keeper"), "{text}");
    for dir in [home.join("browser"), profile_dir(&home)] {
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700, "{}", dir.display());
    }
    let browser = browser_pid(&home);
    for file in ["launch.json", "keeper.log"] {
        let path = home.join("browser").join(file);
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{}", path.display());
    }

    // Launch again: same browser, same id.
    let again = json_stdout(&run(&home, &["browser", "launch", "--headless"]));
    assert_eq!(again["id"], id.as_str());
    assert_eq!(browser_pid(&home), browser);

    let stopped = json_stdout(&run(&home, &["browser", "stop"]));
    assert_eq!(stopped["stopped"], true);
    assert!(!pid_alive(browser), "the browser exited");
    assert!(!socket.exists(), "the keeper removed its socket");
    assert!(
        !home.join("browser").join("launch.json").exists(),
        "a stopped browser is not relaunched by browser.connect"
    );
    let stopped = json_stdout(&run(&home, &["browser", "stop"]));
    assert_eq!(stopped["stopped"], false);
}

#[test]
fn missing_executable_fails_with_the_install_command() {
    let home = tempfile::tempdir().unwrap();
    let output = run(
        home.path(),
        &[
            "browser",
            "launch",
            "--headless",
            "--executable",
            "/nonexistent/chromium",
        ],
    );
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("apt-get install chromium"), "{stderr}");
    assert!(stderr.contains("/nonexistent/chromium"), "{stderr}");

    let output = Command::new(env!("CARGO_BIN_EXE_browser-pilot"))
        .args(["browser", "launch", "--headless"])
        .env("BROWSER_PILOT_HOME", home.path())
        .env("BROWSER_PILOT_CHROMIUM", "/nonexistent/chrome-from-env")
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("BROWSER_PILOT_CHROMIUM"), "{stderr}");
    assert!(stderr.contains("apt-get install chromium"), "{stderr}");
}

#[test]
fn another_uid_finds_no_debugging_port_of_the_managed_browser() {
    require_chromium();
    assert_eq!(
        unsafe { libc::geteuid() },
        0,
        "this test reads the machine as uid nobody through setpriv and must run as root"
    );
    let home_dir = tempfile::tempdir().unwrap();
    let home = home_dir.path().join("bp-home");
    let _stop = StopOnDrop(&home);
    json_stdout(&run(&home, &["browser", "launch", "--headless"]));
    let browser = browser_pid(&home);
    assert!(
        process_tree(browser).len() > 1,
        "the browser has its helpers"
    );
    assert_eq!(
        ports_another_uid_finds(browser),
        Vec::<u16>::new(),
        "the managed browser listens on no TCP port"
    );
    assert!(!profile_dir(&home).join("DevToolsActivePort").exists());
    // Nor can that uid reach the keeper's socket.
    let reach = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .arg("stat")
        .arg(keeper_socket(&home))
        .output()
        .unwrap();
    assert!(!reach.status.success(), "{reach:?}");
    assert!(
        String::from_utf8_lossy(&reach.stderr).contains("Permission denied"),
        "{reach:?}"
    );

    // The same look finds the port of a browser started with one, as before the keeper.
    let profile = tempfile::tempdir().unwrap();
    let chromium =
        std::env::var_os("BROWSER_PILOT_CHROMIUM").unwrap_or_else(|| "/usr/bin/chromium".into());
    let mut with_port = Command::new(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--remote-debugging-port=0",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg("about:blank")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let active_port = profile.path().join("DevToolsActivePort");
    let started = std::time::Instant::now();
    let port = loop {
        if let Some(port) = std::fs::read_to_string(&active_port)
            .ok()
            .and_then(|text| text.lines().next()?.parse::<u16>().ok())
            .filter(|port| port_is_open(*port))
        {
            break port;
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(20),
            "the control browser opened its port"
        );
        std::thread::sleep(std::time::Duration::from_millis(25));
    };
    let found = ports_another_uid_finds(with_port.id());
    let _ = with_port.kill();
    let _ = with_port.wait();
    assert_eq!(found, vec![port], "the look finds a debugging port");
}

/// Many connections arriving at once (discovery's probes from many agents) do not get a
/// janitor's attach behind them closed: it waits for a turn and is attached.
#[test]
fn an_attach_behind_many_silent_connections_waits_its_turn() {
    require_chromium();
    let home_dir = tempfile::tempdir().unwrap();
    let home = home_dir.path().join("bp-home");
    let _stop = StopOnDrop(&home);
    let launched = json_stdout(&run(&home, &["browser", "launch", "--headless"]));
    assert_eq!(launched["state"], "ready");
    let socket = keeper_socket(&home);
    let silent: Vec<UnixStream> = (0..12)
        .map(|_| UnixStream::connect(&socket).unwrap())
        .collect();
    let mut attach = UnixStream::connect(&socket).unwrap();
    attach.write_all(b"{\"keeper\":\"attach\"}\n").unwrap();
    std::thread::sleep(Duration::from_millis(300));
    drop(silent);
    attach
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut line = String::new();
    BufReader::new(&attach).read_line(&mut line).unwrap();
    assert_eq!(line.trim(), r#"{"keeper":"attached"}"#);
}

/// An agent of `home` whose Workspace is isolated (`isolation: "context"`).
fn isolated_agent(home: &TestHome, client: &str) -> Agent {
    let mut bridge = home.spawn_bridge();
    bridge.ok(
        "initialize",
        support::initialize_params(client, "i1", (1, 1)),
    );
    let ws = bridge.ok("workspaces/create", json!({"isolation": "context"}));
    let workspace_id = ws["workspace"]["id"].clone();
    let lease = bridge.ok(
        "leases/create",
        json!({"workspaceId": workspace_id, "ttlMs": support::TEST_LEASE_TTL_MS}),
    );
    Agent {
        bridge,
        workspace_id,
        lease_id: lease["lease"]["id"].clone(),
        cursor: ws["eventCursor"].as_str().unwrap().to_owned(),
    }
}

/// The one tab `agent` lists, asserting there is exactly one.
fn only_tab(agent: &mut Agent) -> Value {
    let tabs = agent.tabs();
    assert_eq!(tabs.len(), 1, "{tabs:?}");
    tabs[0].clone()
}

/// On a browser the project launched, the first managed navigation of a Workspace in the
/// profile takes the untouched start tab as its dedicated window (no new target); an isolated
/// Workspace never does, nor does any later Workspace; releasing the Workspace closes the tab
/// with a blank tab left in its place and the browser running; the janitor's clean-up after a
/// Broker SIGKILL does the same for an adopted start tab.
#[test]
fn the_first_workspace_adopts_the_untouched_start_tab_of_a_launched_browser() {
    require_chromium();
    let home = TestHome::new().with_env("BROWSER_PILOT_DISCOVERY_DIRS", "");
    let fixtures = Fixtures::start();
    let _stop = StopOnDrop(home.path());
    let launched = json_stdout(&run(home.path(), &["browser", "launch", "--headless"]));
    assert_eq!(launched["state"], "ready");
    let browser = browser_pid(home.path());

    // An isolated Workspace navigates first: its tab is its context's own, never the start tab.
    let mut isolated = isolated_agent(&home, "com.example.isolated");
    isolated.connect();
    let mut alice = Agent::with_home(&home, "com.example.alice");
    alice.connect();
    let start = only_tab(&mut alice);
    assert_eq!(start["url"], "about:blank", "{start}");
    assert_eq!(start["managed"], false, "{start}");
    let secret_url = fixtures.url("/page/isolated-first");
    let opened = isolated.tool("browser.open", None, json!({"url": secret_url}));
    assert_eq!(opened["isolated"], true, "{opened}");
    let still = only_tab(&mut alice);
    assert_eq!(still["targetId"], start["targetId"], "{still}");
    assert_eq!(
        still["managed"], false,
        "the start tab is still untouched: {still}"
    );

    // Alice's first managed navigation adopts it: the same tab, now hers, and no new target.
    let alice_url = fixtures.url("/page/alice-start");
    let opened = alice.tool("browser.open", None, json!({"url": alice_url}));
    assert_eq!(opened["targetId"], start["targetId"], "{opened}");
    assert_eq!(opened["managed"], true);
    assert_eq!(opened["title"], "alice-start");
    let mine = only_tab(&mut alice);
    assert_eq!(mine["targetId"], start["targetId"]);
    assert_eq!(mine["managed"], true, "{mine}");
    assert_eq!(mine["controlled"], true, "{mine}");
    let attached = alice.wait_event("target.attached");
    assert_eq!(attached["payload"]["managed"], true, "{attached}");

    // A second Workspace sees no tab of anyone's and gets a window of its own.
    let mut bob = Agent::with_home(&home, "com.example.bob");
    bob.connect();
    assert!(bob.tabs().is_empty(), "the start tab is Alice's now");
    let bob_url = fixtures.url("/page/bob-window");
    let bobs = bob.tool("browser.open", None, json!({"url": bob_url}))["targetId"].clone();
    assert_eq!(only_tab(&mut bob)["targetId"], bobs);

    // Releasing Alice's Workspace closes the adopted tab; a blank tab nobody manages takes its
    // place and the browser runs on.
    alice.bridge.ok(
        "workspaces/release",
        json!({"workspaceId": alice.workspace_id}),
    );
    let mut listed = Vec::new();
    assert!(
        wait_until(Duration::from_secs(10), || {
            listed = bob.tabs();
            listed.len() == 2
                && listed.iter().all(|t| t["url"] != alice_url)
                && listed
                    .iter()
                    .any(|t| t["url"] == "about:blank" && t["managed"] == false)
        }),
        "the start tab closed and a blank tab took its place: {listed:?}"
    );
    assert!(pid_alive(browser), "the browser keeps running");

    // The Broker dies: the janitor closes Bob's window and leaves the blank tab. The next
    // Broker's first Workspace adopts that blank tab; when that Broker dies too, the janitor
    // puts a blank tab in its place before closing it.
    let broker = home.broker_pid().expect("broker pid");
    unsafe_kill(broker, "KILL");
    drop((isolated, bob));
    let mut carol = Agent::with_home(&home, "com.example.carol");
    carol.connect();
    let mut tabs = Vec::new();
    assert!(
        wait_until(Duration::from_secs(15), || {
            tabs = carol.tabs();
            tabs.len() == 1 && tabs[0]["url"] == "about:blank"
        }),
        "only the blank tab is left: {tabs:?}"
    );
    let blank = tabs[0].clone();
    let carol_url = fixtures.url("/page/carol-start");
    let opened = carol.tool("browser.open", None, json!({"url": carol_url}));
    assert_eq!(opened["targetId"], blank["targetId"], "{opened}");
    let broker = home.broker_pid().expect("broker pid");
    unsafe_kill(broker, "KILL");
    drop(carol);
    let mut dave = Agent::with_home(&home, "com.example.dave");
    dave.connect();
    assert!(
        wait_until(Duration::from_secs(15), || {
            tabs = dave.tabs();
            tabs.len() == 1 && tabs[0]["url"] == "about:blank" && tabs[0]["managed"] == false
        }),
        "the janitor closed the adopted start tab and left a blank one: {tabs:?}"
    );
    assert!(pid_alive(browser), "the browser keeps running");
}

/// A start tab someone used is never adopted, even once it is blank again: its history shows it.
#[test]
fn a_used_start_tab_is_not_adopted_even_when_blank_again() {
    require_chromium();
    let home = TestHome::new().with_env("BROWSER_PILOT_DISCOVERY_DIRS", "");
    let fixtures = Fixtures::start();
    let _stop = StopOnDrop(home.path());
    json_stdout(&run(home.path(), &["browser", "launch", "--headless"]));
    let mut alice = Agent::with_home(&home, "com.example.alice");
    alice.connect();
    let start = only_tab(&mut alice)["targetId"].clone();
    // Alice drives the start tab as a user tab: somewhere, back to about:blank, then hands it back.
    let url = fixtures.url("/page/used-start");
    alice.tool(
        "browser.navigate",
        Some(&start),
        json!({"action": "goto", "url": url}),
    );
    alice.tool(
        "browser.navigate",
        Some(&start),
        json!({"action": "goto", "url": "about:blank"}),
    );
    alice.tool("browser.tabs.release", Some(&start), json!({}));

    let mut bob = Agent::with_home(&home, "com.example.bob");
    bob.connect();
    let blank = only_tab(&mut bob);
    assert_eq!(blank["url"], "about:blank", "{blank}");
    let opened = bob.tool(
        "browser.open",
        None,
        json!({"url": fixtures.url("/page/bob-window")}),
    );
    assert_ne!(opened["targetId"], blank["targetId"], "{opened}");
    let tabs = bob.tabs();
    assert_eq!(tabs.len(), 2, "{tabs:?}");
    assert!(
        tabs.iter()
            .any(|t| t["targetId"] == blank["targetId"] && t["managed"] == false),
        "the used start tab stays the user's: {tabs:?}"
    );
}
