//! Shared harness for process tests: a temporary `BROWSER_PILOT_HOME`, bridges driven over their
//! real stdin/stdout, and helpers to read the Broker's locator. No mocks: every test talks to the
//! built `browser-pilot` executable.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

pub mod browserless;
pub mod chromium;
pub mod pages;
pub mod rig;

pub const BIN: &str = env!("CARGO_BIN_EXE_browser-pilot");
pub const BP: &str = env!("CARGO_BIN_EXE_bp");

/// How long a test waits for any single response before failing.
pub const RESPONSE_TIMEOUT: Duration = Duration::from_secs(20);

/// Taken by the tests that run many agents at once (the scale test's 32, the remote pool's 8), so
/// that two of them never share the machine: each alone keeps the browsers busy.
pub fn many_agents() -> std::sync::MutexGuard<'static, ()> {
    static MANY_AGENTS: std::sync::Mutex<()> = std::sync::Mutex::new(());
    // A failed test poisons the lock; the next one still runs.
    MANY_AGENTS
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A temporary Broker home; dropping it deletes the directory, which makes the Broker exit.
pub struct TestHome {
    pub dir: tempfile::TempDir,
    pub env: Vec<(String, String)>,
}

impl TestHome {
    pub fn new() -> TestHome {
        TestHome {
            dir: tempfile::tempdir().expect("temp dir"),
            env: Vec::new(),
        }
    }

    pub fn with_env(mut self, key: &str, value: &str) -> TestHome {
        self.env.push((key.to_owned(), value.to_owned()));
        self
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn command(&self, program: &str) -> Command {
        let mut command = Command::new(program);
        command.env("BROWSER_PILOT_HOME", self.path());
        command.env_remove("BROWSER_PILOT_DISCOVERY_DIRS");
        for (key, value) in &self.env {
            command.env(key, value);
        }
        command
    }

    pub fn locator(&self) -> Option<Value> {
        let bytes = std::fs::read(self.path().join("broker-locator.json")).ok()?;
        serde_json::from_slice(&bytes).ok()
    }

    pub fn broker_pid(&self) -> Option<u32> {
        self.locator()?.get("pid")?.as_u64().map(|p| p as u32)
    }

    pub fn spawn_bridge(&self) -> Bridge {
        self.spawn_bridge_with(&[])
    }

    pub fn spawn_bridge_with(&self, extra: &[&str]) -> Bridge {
        let mut command = self.command(BIN);
        command.args(["bridge", "--stdio"]).args(extra);
        Bridge::spawn(command)
    }

    /// Runs a CLI command to completion: (exit code, stdout, stderr).
    pub fn run(&self, program: &str, args: &[&str]) -> (i32, String, String) {
        let output = self
            .command(program)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("run command");
        (
            output.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&output.stdout).into_owned(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    }
}

impl TestHome {
    /// Whether `pid` is a Broker of this home (its role argument and its `BROWSER_PILOT_HOME`),
    /// not a stale locator's pid the system has since given to another process.
    fn is_own_broker(&self, pid: u32) -> bool {
        let read = |name: &str| std::fs::read(format!("/proc/{pid}/{name}")).unwrap_or_default();
        let entry = |path: &Path| {
            let mut entry = b"BROWSER_PILOT_HOME=".to_vec();
            entry.extend_from_slice(path.as_os_str().as_encoded_bytes());
            entry
        };
        let homes = [
            Some(entry(self.path())),
            self.path().canonicalize().ok().map(|path| entry(&path)),
        ];
        let cmdline = read("cmdline");
        let environ = read("environ");
        cmdline
            .split(|b| *b == 0)
            .any(|arg| arg == b"--browser-pilot-internal=broker")
            && environ
                .split(|b| *b == 0)
                .any(|var| homes.iter().flatten().any(|home| home.as_slice() == var))
    }
}

impl Drop for TestHome {
    fn drop(&mut self) {
        // Stop the Broker promptly; it would also exit by itself once its endpoint file is gone.
        // Only a live Broker of this home: other modules' processes run beside it.
        if let Some(pid) = self.broker_pid().filter(|pid| self.is_own_broker(*pid)) {
            unsafe_kill(pid, "TERM");
        }
    }
}

/// The TTL of the Leases test agents hold for a whole scenario: the longest a Lease may have,
/// since tool calls do not renew it and a scenario on a loaded machine can outlast a minute.
pub const TEST_LEASE_TTL_MS: i64 = 300_000;

pub fn unsafe_kill(pid: u32, signal: &str) {
    let _ = Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(pid.to_string())
        .status();
}

/// SIGSTOPs `pid` and returns once every thread of it is stopped (state `T` in
/// `/proc/PID/task/*/stat`; a signal is acted on by each thread at its next entry to the
/// kernel, so a busy thread may still run briefly after `kill` returns), or after 5 s.
pub fn stop_process(pid: u32) {
    unsafe_kill(pid, "STOP");
    let all_stopped = || {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
            return true;
        };
        tasks.flatten().all(|task| {
            std::fs::read_to_string(task.path().join("stat")).map_or(true, |stat| {
                stat.rsplit_once(')')
                    .and_then(|(_, rest)| rest.split_whitespace().next())
                    .is_some_and(|state| state == "T" || state == "t")
            })
        })
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while !all_stopped() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
}

pub fn pid_alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
        && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .is_ok_and(|s| s.split_whitespace().nth(2) == Some("Z"))
}

/// The Broker's janitor: the live process whose parent is the Broker `broker` and whose command
/// line carries the private role argument (a test kills only the janitor of its own Broker).
pub fn janitor_pid(broker: u32) -> Option<u32> {
    janitor_pids(broker).into_iter().next()
}

/// Every janitor of the Broker `broker` (one per browser connection).
pub fn janitor_pids(broker: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| {
            let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            // `pid (comm) state ppid ...`; comm may contain spaces, so split after ')'.
            let parent: u32 = stat
                .rsplit_once(')')?
                .1
                .split_whitespace()
                .nth(1)?
                .parse()
                .ok()?;
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
            let is_janitor = cmdline
                .split(|b| *b == 0)
                .any(|arg| arg == b"--browser-pilot-internal=janitor");
            (is_janitor && parent == broker && pid_alive(pid)).then_some(pid)
        })
        .collect()
}

/// One `browser-pilot bridge --stdio` process.
pub struct Bridge {
    pub child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    /// Lines read but not yet claimed (responses for other ids, notifications).
    backlog: Vec<Value>,
    next_id: u64,
    pub stderr: std::sync::Arc<std::sync::Mutex<String>>,
}

impl Bridge {
    pub fn spawn(mut command: Command) -> Bridge {
        command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = command.spawn().expect("spawn bridge");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                match line {
                    Ok(line) => {
                        if tx.send(line).is_err() {
                            return;
                        }
                    }
                    Err(_) => return,
                }
            }
        });
        let stderr_text = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let mut stderr = child.stderr.take().expect("stderr");
        let sink = stderr_text.clone();
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = stderr.read_to_string(&mut text);
            sink.lock().unwrap().push_str(&text);
        });
        Bridge {
            stdin: child.stdin.take(),
            child,
            lines: rx,
            backlog: Vec::new(),
            next_id: 1000,
            stderr: stderr_text,
        }
    }

    pub fn send_raw(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(bytes).expect("write stdin");
        stdin.flush().expect("flush stdin");
    }

    pub fn send(&mut self, message: &Value) {
        let mut line = message.to_string().into_bytes();
        line.push(b'\n');
        self.send_raw(&line);
    }

    pub fn close_stdin(&mut self) {
        self.stdin.take();
    }

    /// Sends a request with a fresh id and returns that id.
    pub fn request(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = json!(self.next_id);
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        id
    }

    /// The next line from stdout as JSON, or None on EOF / timeout.
    pub fn next_message(&mut self, timeout: Duration) -> Option<Value> {
        match self.lines.recv_timeout(timeout) {
            Ok(line) => Some(
                serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("stdout carried non-JSON {line:?}: {e}")),
            ),
            Err(RecvTimeoutError::Timeout) | Err(RecvTimeoutError::Disconnected) => None,
        }
    }

    /// Waits for the response with this id, keeping other lines in the backlog.
    pub fn response(&mut self, id: &Value) -> Value {
        self.response_within(id, RESPONSE_TIMEOUT)
    }

    /// [`Bridge::response`] waiting at most `timeout` (for calls that may rightly take longer
    /// than [`RESPONSE_TIMEOUT`], such as many agents' tool calls queued on one browser: the
    /// Broker answers each by its Command's deadline).
    pub fn response_within(&mut self, id: &Value, timeout: Duration) -> Value {
        if let Some(at) = self
            .backlog
            .iter()
            .position(|m| m.get("id") == Some(id) && m.get("method").is_none())
        {
            return self.backlog.remove(at);
        }
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let message = self.next_message(left).unwrap_or_else(|| {
                panic!(
                    "no response for id {id}; stderr: {}",
                    self.stderr.lock().unwrap()
                )
            });
            if message.get("id") == Some(id) && message.get("method").is_none() {
                return message;
            }
            self.backlog.push(message);
        }
    }

    /// Request and full response.
    pub fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.request(method, params);
        self.response(&id)
    }

    /// Request that must succeed; returns `result`.
    pub fn ok(&mut self, method: &str, params: Value) -> Value {
        let response = self.call(method, params.clone());
        match response.get("result") {
            Some(result) => result.clone(),
            None => panic!("{method} {params} failed: {response}"),
        }
    }

    /// Request that must fail; returns `error.data.code`.
    pub fn err(&mut self, method: &str, params: Value) -> (String, Value) {
        let response = self.call(method, params.clone());
        match response.get("error") {
            Some(error) => (
                error["data"]["code"].as_str().unwrap_or("").to_owned(),
                error.clone(),
            ),
            None => panic!("{method} {params} unexpectedly succeeded: {response}"),
        }
    }

    pub fn initialize(&mut self, client_id: &str, instance_id: &str) -> Value {
        self.ok(
            "initialize",
            initialize_params(client_id, instance_id, (1, 1)),
        )
    }

    /// Notifications seen so far (from the backlog and anything already readable).
    pub fn drain_notifications(&mut self, wait: Duration) -> Vec<Value> {
        while let Some(message) = self.next_message(wait) {
            self.backlog.push(message);
        }
        let (notifications, rest): (Vec<Value>, Vec<Value>) = self
            .backlog
            .drain(..)
            .partition(|m| m.get("method").is_some());
        self.backlog = rest;
        notifications
    }

    /// Waits for the process to exit; returns its code.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<i32> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return Some(status.code().unwrap_or(-1));
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Bridge {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn initialize_params(client_id: &str, instance_id: &str, version: (u32, u32)) -> Value {
    json!({
        "client": {"id": client_id, "name": "Test Host", "version": "1.0.0", "instanceId": instance_id},
        "protocol": {"min": {"major": 1, "minor": 0}, "max": {"major": version.0, "minor": version.1}},
        "requestedCapabilities": ["browser.control", "workspace.manage", "observation.read", "action.input", "artifact.read", "event.read"],
        "launchMode": "embedded",
    })
}

pub fn file_mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path)
        .expect("metadata")
        .permissions()
        .mode()
        & 0o777
}

pub fn wait_until(timeout: Duration, mut check: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if check() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    check()
}

pub fn home_path(home: &TestHome, name: &str) -> PathBuf {
    home.path().join(name)
}

/// A directory of npm packages a process test serves or runs: the one `variable` names
/// (scripts/test installs it there; it must hold `marker`), else a scratch install of
/// `packages`, kept alive by the returned guard. A missing npm is a loud failure with the
/// install command.
pub fn npm_packages(
    variable: &str,
    marker: &str,
    packages: &[&str],
) -> (PathBuf, Option<tempfile::TempDir>) {
    if let Some(dir) = std::env::var_os(variable) {
        let dir = PathBuf::from(dir);
        assert!(
            dir.join(marker).is_file(),
            "{variable}={} has no {marker}",
            dir.display()
        );
        return (dir, None);
    }
    let scratch = tempfile::tempdir().unwrap();
    let status = Command::new("npm")
        .args(["install", "--no-audit", "--no-fund", "--silent", "--prefix"])
        .arg(scratch.path())
        .args(packages)
        .status()
        .expect("npm is required: sudo apt-get install -y nodejs npm");
    assert!(status.success(), "npm install {packages:?} failed");
    (scratch.path().to_owned(), Some(scratch))
}
