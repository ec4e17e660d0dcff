//! The Broker bounds its own peers, not only the bridge: raw local-socket peers that send a huge
//! handshake, a huge line, or open more Connections than the cap are refused or contained, and
//! the bridges beside them keep working. A role claimed in the handshake grants nothing. A peer
//! that completes the handshake but does not initialize in time is closed, and a peer that goes
//! on after `shutdown` gets a structured answer. A bridge out of file descriptors names its
//! limit, never the live Broker.

use crate::support;

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use serde_json::{Value, json};
use support::*;

/// A raw peer on the Broker's socket, speaking the private handshake by hand.
struct RawPeer {
    stream: UnixStream,
    reader: BufReader<UnixStream>,
}

impl RawPeer {
    fn connect(home: &TestHome) -> RawPeer {
        let stream = UnixStream::connect(home_path(home, "broker.sock")).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        let reader = BufReader::new(stream.try_clone().unwrap());
        RawPeer { stream, reader }
    }

    fn send(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.stream.write_all(bytes)
    }

    /// Sends a well-formed handshake claiming `role`, and returns the Broker's reply.
    fn hello(&mut self, role: &str) -> Value {
        let hello = json!({"ipc": browser_pilot::version::IPC_VERSION, "role": role, "executableVersion": "0.0.0-raw", "installationId": "raw", "pid": std::process::id()});
        self.send(format!("{hello}\n").as_bytes()).unwrap();
        self.line().expect("a handshake reply")
    }

    fn line(&mut self) -> Option<Value> {
        let mut line = String::new();
        match self.reader.read_line(&mut line) {
            Ok(0) | Err(_) => None,
            Ok(_) => Some(serde_json::from_str(&line).expect("JSON line")),
        }
    }

    fn call(&mut self, id: u64, method: &str, params: Value) -> Value {
        let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.send(format!("{line}\n").as_bytes()).unwrap();
        self.line().expect("a response")
    }
}

/// A bridge with an initialized Connection, a Workspace and a Lease: the bystander that must
/// not notice anything.
fn bystander(home: &TestHome) -> (Bridge, Value, Value) {
    let mut bridge = home.spawn_bridge();
    bridge.initialize("com.example.bystander", "i1");
    let ws = bridge.ok("workspaces/create", json!({}))["workspace"]["id"].clone();
    let lease =
        bridge.ok("leases/create", json!({"workspaceId": ws, "ttlMs": 60000}))["lease"]["id"]
            .clone();
    (bridge, ws, lease)
}

fn still_fine(bridge: &mut Bridge, ws: &Value, lease: &Value) {
    bridge.ok(
        "leases/heartbeat",
        json!({"workspaceId": ws, "leaseId": lease}),
    );
    bridge.ok("workspaces/get", json!({"workspaceId": ws}));
}

#[test]
fn huge_handshake_and_huge_lines_are_cut_off() {
    let home = TestHome::new();
    let (mut bridge, ws, lease) = bystander(&home);

    // A handshake line far past the handshake bound, with no newline: the Broker stops reading
    // and closes instead of buffering it.
    let mut huge = RawPeer::connect(&home);
    let chunk = vec![b'x'; 64 * 1024];
    let mut sent = 0usize;
    while sent < 8 * 1024 * 1024 {
        if huge.send(&chunk).is_err() {
            break;
        }
        sent += chunk.len();
    }
    assert!(
        sent < 8 * 1024 * 1024,
        "the Broker kept reading an endless handshake"
    );
    still_fine(&mut bridge, &ws, &lease);

    // After a valid handshake, a request line past the largest negotiable message is answered
    // with message_too_large and the Connection closes.
    let mut peer = RawPeer::connect(&home);
    let welcome = peer.hello("bridge");
    assert!(welcome.get("welcome").is_some(), "{welcome}");
    let padding = "y".repeat(2 * 1024 * 1024);
    let line =
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"pad": padding}});
    let _ = peer.send(format!("{line}\n").as_bytes());
    let answer = peer.line();
    if let Some(answer) = answer {
        assert_eq!(
            answer["error"]["data"]["code"], "message_too_large",
            "{answer}"
        );
    }
    assert!(peer.line().is_none(), "the Connection is closed");
    still_fine(&mut bridge, &ws, &lease);
}

#[test]
fn connections_beyond_the_cap_are_refused_with_a_retryable_code() {
    let home = TestHome::new();
    let (mut bridge, ws, lease) = bystander(&home);
    // The bystander's bridge holds one of the 256 slots.
    let cap = browser_pilot::broker::MAX_LIVE_CONNECTIONS;
    let mut peers: Vec<RawPeer> = (1..cap)
        .map(|_| {
            let mut peer = RawPeer::connect(&home);
            let welcome = peer.hello("bridge");
            assert!(welcome.get("welcome").is_some(), "{welcome}");
            peer
        })
        .collect();
    let mut extra = RawPeer::connect(&home);
    let refused = extra.hello("bridge");
    let error = &refused["refused"]["error"];
    assert_eq!(error["data"]["code"], "too_many_connections", "{refused}");
    assert_eq!(error["data"]["retryable"], true);
    assert_eq!(error["data"]["context"]["maxConnections"], cap);

    // A new bridge is refused the same way, as a structured error to its host...
    let mut late = home.spawn_bridge();
    let response = late.call(
        "initialize",
        initialize_params("com.example.late", "i1", (1, 1)),
    );
    assert_eq!(
        response["error"]["data"]["code"], "too_many_connections",
        "{response}"
    );
    // ...while the Connections already served keep working.
    still_fine(&mut bridge, &ws, &lease);

    // One slot frees: the next peer is served.
    drop(peers.pop());
    assert!(
        wait_until(Duration::from_secs(10), || {
            let mut peer = RawPeer::connect(&home);
            peer.hello("bridge").get("welcome").is_some()
        }),
        "a freed slot is reused"
    );
}

#[test]
fn a_claimed_cli_role_still_counts_as_a_live_connection_for_shutdown() {
    let home = TestHome::new();
    let mut bridge = home.spawn_bridge();
    bridge.initialize("com.example.a", "i1");
    bridge.close_stdin();
    assert_eq!(bridge.wait_exit(Duration::from_secs(10)), Some(0));

    // A raw peer that calls itself a CLI but initializes like a host.
    let mut peer = RawPeer::connect(&home);
    assert!(peer.hello("cli").get("welcome").is_some());
    let init = peer.call(
        1,
        "initialize",
        initialize_params("com.example.sneaky", "i1", (1, 1)),
    );
    assert!(init.get("result").is_some(), "{init}");

    let (code, stdout, stderr) = home.run(BP, &["disconnect"]);
    assert_eq!(
        code, 4,
        "refused while a Connection is live: {stdout} {stderr}"
    );
    assert!(home.broker_pid().is_some_and(pid_alive));

    drop(peer);
    assert!(
        wait_until(Duration::from_secs(10), || home.run(BP, &["disconnect"]).0
            == 0),
        "shutdown is accepted once the peer is gone"
    );
}

/// At the open-file limit `accept` fails at once, again and again: the Broker backs off instead
/// of spinning, keeps serving the Connections it has, and accepts again once descriptors free.
#[test]
fn the_accept_loop_backs_off_at_the_open_file_limit() {
    let log = tempfile::NamedTempFile::new().unwrap();
    let home = TestHome::new().with_env("BROWSER_PILOT_BROKER_LOG", log.path().to_str().unwrap());
    let (mut bridge, ws, lease) = bystander(&home);
    let broker = home.broker_pid().expect("a Broker runs");
    let open_now = std::fs::read_dir(format!("/proc/{broker}/fd"))
        .unwrap()
        .count();
    let limit = open_now + 4;
    let status = std::process::Command::new("prlimit")
        .arg(format!("--pid={broker}"))
        .arg(format!("--nofile={limit}:"))
        .status()
        .expect("prlimit runs");
    assert!(status.success());
    // Fill the remaining descriptors, then keep connecting: these wait in the backlog while
    // accept fails with EMFILE.
    let mut peers: Vec<UnixStream> = Vec::new();
    for _ in 0..16 {
        if let Ok(stream) = UnixStream::connect(home_path(&home, "broker.sock")) {
            peers.push(stream);
        }
    }
    let before = std::fs::read_to_string(log.path()).unwrap().lines().count();
    std::thread::sleep(Duration::from_secs(2));
    let backoffs = std::fs::read_to_string(log.path())
        .unwrap()
        .lines()
        .skip(before)
        .filter(|line| line.contains("accept failed"))
        .count();
    assert!(backoffs > 0, "the test did reach the open-file limit");
    assert!(
        backoffs < 200,
        "{backoffs} failed accepts logged in two seconds: the loop spins"
    );
    still_fine(&mut bridge, &ws, &lease);

    drop(peers);
    let status = std::process::Command::new("prlimit")
        .arg(format!("--pid={broker}"))
        .arg("--nofile=1024:")
        .status()
        .expect("prlimit runs");
    assert!(status.success());
    let mut later = home.spawn_bridge();
    later.initialize("com.example.later", "i1");
}

/// Opens non-blocking connections to `path` until the listener's accept queue is full (the
/// kernel answers EAGAIN), and returns them.
fn fill_accept_queue(path: &std::path::Path) -> Vec<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    use std::os::unix::ffi::OsStrExt;
    let mut address: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    address.sun_family = libc::AF_UNIX as libc::sa_family_t;
    for (slot, byte) in address.sun_path.iter_mut().zip(path.as_os_str().as_bytes()) {
        *slot = *byte as libc::c_char;
    }
    let mut queued = Vec::new();
    loop {
        // SAFETY: plain socket calls on a descriptor this function owns.
        let fd = unsafe {
            libc::socket(
                libc::AF_UNIX,
                libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                0,
            )
        };
        assert!(fd >= 0, "socket: {}", std::io::Error::last_os_error());
        let fd = unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) };
        let result = unsafe {
            libc::connect(
                std::os::fd::AsRawFd::as_raw_fd(&fd),
                (&address as *const libc::sockaddr_un).cast(),
                std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t,
            )
        };
        if result != 0 {
            let error = std::io::Error::last_os_error();
            assert_eq!(error.kind(), std::io::ErrorKind::WouldBlock, "{error}");
            return queued;
        }
        queued.push(fd);
        assert!(queued.len() < 100_000, "the accept queue never filled");
    }
}

/// A Broker killed while a bridge's handshake waits on it drops that connection as it dies: the
/// bridge sees a missing Broker and starts a new one, never `restart_unresponsive_broker` for a
/// process that no longer exists.
#[test]
fn a_broker_killed_during_a_handshake_is_replaced_not_reported_unresponsive() {
    let home = TestHome::new();
    let (_bystander, _ws, _lease) = bystander(&home);
    let broker = home.broker_pid().expect("a Broker runs");
    stop_process(broker);
    let mut host = home.spawn_bridge();
    let init = host.request(
        "initialize",
        initialize_params("com.example.after-death", "i1", (1, 1)),
    );
    // The bridge is connected and waiting for the stopped Broker's welcome.
    std::thread::sleep(Duration::from_millis(800));
    unsafe_kill(broker, "KILL");
    let answer = host.response(&init);
    assert!(answer["result"]["connectionId"].is_string(), "{answer}");
    let replacement = home.broker_pid().expect("a new Broker runs");
    assert_ne!(replacement, broker);
}

/// A Broker whose accept queue is briefly full is busy, not unresponsive: a bridge keeps
/// trying for its handshake time and never reports `restart_unresponsive_broker` for it.
#[test]
fn a_briefly_saturated_accept_queue_is_not_an_unresponsive_broker() {
    let home = TestHome::new();
    let (mut bridge, ws, lease) = bystander(&home);
    let broker = home.broker_pid().expect("a Broker runs");
    stop_process(broker);
    let queued = fill_accept_queue(&home_path(&home, "broker.sock"));
    assert!(!queued.is_empty());
    // The queued peers give up; their entries stay queued until the Broker accepts them.
    drop(queued);

    let mut host = home.spawn_bridge();
    let init = host.request(
        "initialize",
        initialize_params("com.example.patient", "i1", (1, 1)),
    );
    std::thread::sleep(Duration::from_millis(800));
    unsafe_kill(broker, "CONT");
    let answer = host.response(&init);
    let remediation = &answer["error"]["data"]["remediation"]["action"];
    assert_ne!(
        remediation, "restart_unresponsive_broker",
        "a busy Broker was reported unresponsive: {answer}"
    );
    match answer["error"]["data"]["code"].as_str() {
        None => assert!(answer["result"]["connectionId"].is_string(), "{answer}"),
        // The drained peers may still hold Connection slots for a moment.
        Some(code) => assert_eq!(code, "too_many_connections", "{answer}"),
    }
    still_fine(&mut bridge, &ws, &lease);
    // Once the drained peers are gone, new hosts are served again.
    let mut refusals = 0;
    let served = wait_until(Duration::from_secs(15), || {
        let mut next = home.spawn_bridge();
        let answer = next.call(
            "initialize",
            initialize_params("com.example.next", "i1", (1, 1)),
        );
        refusals += 1;
        answer.get("result").is_some()
    });
    assert!(served, "never served again after {refusals} tries");
}

/// A peer that writes calls and never reads: beyond the pending bound each call is answered at
/// once with the retryable `result_too_large` (never dispatched), and when even those answers
/// pile up unread the Broker closes the Connection instead of queueing without end.
#[test]
fn a_peer_that_never_reads_is_refused_then_closed() {
    let home = TestHome::new();
    let (mut bridge, ws, lease) = bystander(&home);
    let mut peer = RawPeer::connect(&home);
    assert!(peer.hello("bridge").get("welcome").is_some());
    let init = peer.call(
        1,
        "initialize",
        initialize_params("com.example.flood", "i1", (1, 1)),
    );
    assert!(init.get("result").is_some(), "{init}");

    const CALLS: u64 = 20_000;
    let mut stream = peer.stream.try_clone().unwrap();
    let flood = std::thread::spawn(move || {
        let mut sent = 0;
        for id in 2..CALLS + 2 {
            let line = json!({"jsonrpc": "2.0", "id": id, "method": "workspaces/get", "params": {"workspaceId": ws_placeholder()}});
            if stream.write_all(format!("{line}\n").as_bytes()).is_err() {
                break;
            }
            sent += 1;
        }
        sent
    });
    // Read nothing until the flood stalls (the Broker stopped reading) or ends.
    std::thread::sleep(Duration::from_secs(3));
    let mut answers = 0u64;
    let mut refusals = 0u64;
    while let Some(line) = peer.line() {
        answers += 1;
        if line["error"]["data"]["code"] == "result_too_large" {
            assert_eq!(line["error"]["data"]["retryable"], true, "{line}");
            assert_eq!(line["error"]["data"]["context"]["pendingLimit"], 256);
            refusals += 1;
        }
    }
    let sent = flood.join().unwrap();
    assert!(
        refusals > 0,
        "no call was refused ({answers} answers to {sent} calls)"
    );
    assert!(
        answers < CALLS,
        "the Connection was never closed: {answers} answers to {sent} calls"
    );
    still_fine(&mut bridge, &ws, &lease);
}

fn ws_placeholder() -> &'static str {
    "workspace:00000000000000000000000000000000"
}

/// The initialize deadline a test Broker uses (`BROWSER_PILOT_INITIALIZE_TIMEOUT_MS`).
const TEST_INITIALIZE_TIMEOUT_MS: &str = "1500";

#[test]
fn a_peer_that_does_not_initialize_in_time_is_closed() {
    let home = TestHome::new().with_env(
        "BROWSER_PILOT_INITIALIZE_TIMEOUT_MS",
        TEST_INITIALIZE_TIMEOUT_MS,
    );
    let (mut bridge, ws, lease) = bystander(&home);
    // Handshaken first, and initialized: its deadline passes before the idle peer's.
    let mut initialized = RawPeer::connect(&home);
    assert!(initialized.hello("bridge").get("welcome").is_some());
    let init = initialized.call(
        1,
        "initialize",
        initialize_params("com.example.prompt", "i1", (1, 1)),
    );
    assert!(init.get("result").is_some(), "{init}");
    for role in ["bridge", "cli"] {
        let mut idle = RawPeer::connect(&home);
        assert!(idle.hello(role).get("welcome").is_some());
        assert_eq!(idle.line(), None, "{role}: the idle peer is closed");
    }
    let listed = initialized.call(2, "tools/list", json!({}));
    assert!(listed.get("result").is_some(), "{listed}");
    still_fine(&mut bridge, &ws, &lease);
}

#[test]
fn a_peer_that_goes_on_after_shutdown_gets_a_structured_answer() {
    let home = TestHome::new();
    let (mut bridge, ws, lease) = bystander(&home);
    let mut peer = RawPeer::connect(&home);
    assert!(peer.hello("bridge").get("welcome").is_some());
    let init = peer.call(
        1,
        "initialize",
        initialize_params("com.example.after", "i1", (1, 1)),
    );
    assert!(init.get("result").is_some(), "{init}");
    let workspace = peer.call(2, "workspaces/create", json!({}));
    let workspace_id = workspace["result"]["workspace"]["id"].clone();
    assert_eq!(peer.call(3, "shutdown", json!({}))["result"], json!({}));
    let calls = [
        ("workspaces/create", json!({})),
        ("workspaces/get", json!({"workspaceId": workspace_id})),
        ("tools/list", json!({})),
        (
            "commands/get",
            json!({"commandId": "command:x", "workspaceId": workspace_id}),
        ),
        ("shutdown", json!({})),
    ];
    for (id, (method, params)) in (4..).zip(calls) {
        let answer = peer.call(id, method, params);
        assert_eq!(answer["id"], id, "{answer}");
        let data = &answer["error"]["data"];
        assert_eq!(data["code"], "not_initialized", "{method}: {answer}");
        assert_eq!(
            data["context"]["reason"], "connection_shut_down",
            "{answer}"
        );
        assert_eq!(data["retryable"], false, "{answer}");
    }
    still_fine(&mut bridge, &ws, &lease);
}

/// A bridge that runs out of file descriptors while it reaches its Broker says so: the error
/// names the open-file limit and what to do about it, and never takes the live Broker for an
/// unresponsive one (whose remediation would be to stop it). Each bridge runs under a smaller
/// open-file limit (`prlimit`), from too small to start at all up to enough to connect.
#[test]
fn a_bridge_out_of_descriptors_names_its_limit_not_the_broker() {
    let home = TestHome::new();
    let (mut bridge, ws, lease) = bystander(&home);
    let input = tempfile::NamedTempFile::new().unwrap();
    let request = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": initialize_params("com.example.limited", "i1", (1, 1))});
    std::fs::write(input.path(), format!("{request}\n")).unwrap();
    let mut limited = 0;
    for limit in 3..=64 {
        let output = home
            .command("prlimit")
            .arg(format!("--nofile={limit}:{limit}"))
            .args([BIN, "bridge", "--stdio"])
            .stdin(std::fs::File::open(input.path()).unwrap())
            .output()
            .expect("prlimit runs");
        let stdout = String::from_utf8_lossy(&output.stdout);
        // Too few descriptors to start the runtime: the process fails before it reads a line.
        let Some(line) = stdout.lines().next() else {
            continue;
        };
        let answer: Value = serde_json::from_str(line).unwrap();
        if answer.get("result").is_some() {
            break;
        }
        let data = &answer["error"]["data"];
        assert_eq!(
            data["code"], "broker_unavailable",
            "limit {limit}: {answer}"
        );
        assert_eq!(
            data["context"]["reason"], "open_file_limit",
            "limit {limit}: {answer}"
        );
        assert_eq!(data["remediation"]["action"], "free_resources", "{answer}");
        limited += 1;
    }
    assert!(limited > 0, "no limit left the bridge out of descriptors");
    // The Broker was never blamed, and it serves on.
    still_fine(&mut bridge, &ws, &lease);
}
