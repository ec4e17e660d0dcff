//! Round trips through the real executable: host pipe -> `browser-pilot bridge --stdio` -> local
//! socket -> Broker -> in-memory SQLite -> back. Measures what the "Inside the Broker"
//! targets of docs/performance.md name: the `leases/heartbeat` round trip (criterion's mean plus a manual p50/p99 over
//! 10,000 calls printed to stderr), pipelined throughput (200 calls in one write), an
//! `events/poll` of 100 journaled events, and bridge start to `initialize` result with the Broker already running (warm) and with a fresh home
//! (cold: the Broker is spawned).
//!
//! It speaks only the public NDJSON surface of the built binary (`CARGO_BIN_EXE_browser-pilot`)
//! and imports nothing from the crate. Every Broker it starts lives in a temporary
//! `BROWSER_PILOT_HOME` and is stopped with `bp disconnect` before that home is deleted.
//! Under `cargo test --all-targets` (criterion's test mode) each measurement runs once and the
//! manual sample shrinks, so this file cannot rot without making the test run slow.

use std::hint::black_box;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput};
use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_browser-pilot");
const BP: &str = env!("CARGO_BIN_EXE_bp");

/// Heartbeats in the manual latency sample: enough for a stable p99 (100 samples above it).
const MANUAL_SAMPLE_CALLS: usize = 10_000;

/// The manual sample in criterion's test mode: just enough to prove the path works.
const TEST_MODE_SAMPLE_CALLS: usize = 10;

/// Calls written in one write for the throughput measurement; below the bridge's cap of 256
/// pending ordinary calls, so none is refused.
const PIPELINED_CALLS: usize = 200;

/// Events in the journal `events/poll` pages through: one page at the method's default limit.
const POLLED_EVENTS: usize = 100;

/// How long the bridge may take to exit after `shutdown`.
const BRIDGE_EXIT_TIMEOUT: Duration = Duration::from_secs(5);

/// One `browser-pilot bridge --stdio` process, read and written synchronously.
struct Bridge {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    line: String,
}

impl Bridge {
    fn spawn(home: &Path) -> Bridge {
        let mut child = Command::new(BIN)
            .args(["bridge", "--stdio"])
            .env("BROWSER_PILOT_HOME", home)
            .env_remove("BROWSER_PILOT_DISCOVERY_DIRS")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn the bridge");
        Bridge {
            stdin: child.stdin.take().expect("stdin is piped"),
            stdout: BufReader::new(child.stdout.take().expect("stdout is piped")),
            child,
            line: String::new(),
        }
    }

    /// Writes bytes holding whole lines in one `write_all`.
    fn send(&mut self, bytes: &[u8]) {
        self.stdin.write_all(bytes).expect("write to the bridge");
    }

    /// The next stdout line, whatever it holds.
    fn read_line(&mut self) -> &str {
        self.line.clear();
        let n = self.stdout.read_line(&mut self.line).expect("read stdout");
        assert!(n > 0, "the bridge closed stdout");
        &self.line
    }

    /// The next stdout line, which must be a successful response.
    fn read_result_line(&mut self) -> &str {
        self.read_line();
        assert!(
            self.line.contains("\"result\""),
            "not a successful response: {}",
            self.line
        );
        &self.line
    }

    /// One request, its parsed `result`. Setup only; notifications are not expected here.
    fn call(&mut self, method: &str, params: Value) -> Value {
        let request = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        self.send(format!("{request}\n").as_bytes());
        let line = self.read_result_line();
        let response: Value = serde_json::from_str(line).expect("response is JSON");
        response["result"].clone()
    }

    /// `shutdown`, then waits for the process to exit.
    fn shutdown(mut self) {
        self.call("shutdown", json!({}));
        drop(self.stdin);
        let deadline = Instant::now() + BRIDGE_EXIT_TIMEOUT;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        panic!("the bridge did not exit after shutdown");
    }
}

fn initialize_line() -> String {
    let request = json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {
            "client": {"id": "dev.browser-pilot.bench", "instanceId": "bench:1"},
            "protocol": {"min": {"major": 1, "minor": 1}, "max": {"major": 1, "minor": 1}},
        },
    });
    format!("{request}\n")
}

fn heartbeat_line(id: usize, workspace_id: &str, lease_id: &str) -> String {
    let request = json!({
        "jsonrpc": "2.0", "id": id, "method": "leases/heartbeat",
        "params": {"workspaceId": workspace_id, "leaseId": lease_id},
    });
    format!("{request}\n")
}

/// Stops the Broker of `home` (no embedded Connection may remain) so it does not outlive the
/// benchmark; it would also exit by itself about a second after its home is deleted.
fn stop_broker(home: &Path) {
    let status = Command::new(BP)
        .arg("disconnect")
        .env("BROWSER_PILOT_HOME", home)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .status()
        .expect("run bp disconnect");
    assert!(status.success(), "bp disconnect failed: {status}");
}

/// A temporary home with a running Broker and one initialized bridge holding a Workspace and a
/// Lease, shared by the steady-state measurements.
struct Fixture {
    home: tempfile::TempDir,
    bridge: Option<Bridge>,
    workspace_id: String,
    lease_id: String,
}

impl Fixture {
    fn start() -> Fixture {
        let home = tempfile::tempdir().expect("temp dir");
        let mut bridge = Bridge::spawn(home.path());
        bridge.send(initialize_line().as_bytes());
        bridge.read_result_line();
        let workspace = bridge.call("workspaces/create", json!({}));
        let workspace_id = workspace["workspace"]["id"]
            .as_str()
            .expect("workspace id")
            .to_owned();
        // The longest Lease; every heartbeat renews it anyway.
        let lease = bridge.call(
            "leases/create",
            json!({"workspaceId": workspace_id, "ttlMs": 300_000}),
        );
        let lease_id = lease["lease"]["id"].as_str().expect("lease id").to_owned();
        Fixture {
            home,
            bridge: Some(bridge),
            workspace_id,
            lease_id,
        }
    }

    fn bridge(&mut self) -> &mut Bridge {
        self.bridge.as_mut().expect("the fixture bridge runs")
    }

    fn stop(mut self) {
        if let Some(bridge) = self.bridge.take() {
            bridge.shutdown();
        }
        stop_broker(self.home.path());
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        // Only reached with a bridge still running when a measurement panicked.
        if let Some(mut bridge) = self.bridge.take() {
            let _ = bridge.child.kill();
            let _ = bridge.child.wait();
        }
    }
}

/// Criterion runs real measurements only with `--bench` (what `cargo bench` passes) and without
/// `--test`; everything else is its test mode.
fn bench_mode() -> bool {
    let args: Vec<String> = std::env::args().collect();
    args.iter().any(|a| a == "--bench") && !args.iter().any(|a| a == "--test")
}

/// (a) Heartbeat round trip: criterion's mean, then a manual sample for p50/p99.
fn heartbeat_round_trip(criterion: &mut Criterion, fixture: &mut Fixture) {
    let line = heartbeat_line(1, &fixture.workspace_id, &fixture.lease_id).into_bytes();
    let bridge = fixture.bridge();
    criterion.bench_function("bridge/leases_heartbeat_round_trip", |b| {
        b.iter(|| {
            bridge.send(&line);
            black_box(bridge.read_result_line().len())
        });
    });

    let calls = match bench_mode() {
        true => MANUAL_SAMPLE_CALLS,
        false => TEST_MODE_SAMPLE_CALLS,
    };
    let mut samples = Vec::with_capacity(calls);
    for _ in 0..calls {
        let started = Instant::now();
        bridge.send(&line);
        black_box(bridge.read_result_line().len());
        samples.push(started.elapsed());
    }
    samples.sort_unstable();
    let percentile = |p: usize| samples[(samples.len() * p / 100).min(samples.len() - 1)];
    let mean = samples.iter().sum::<Duration>() / samples.len() as u32;
    eprintln!(
        "bridge/leases_heartbeat_round_trip manual sample: n={} p50={:.1} us p99={:.1} us mean={:.1} us max={:.1} us",
        samples.len(),
        micros(percentile(50)),
        micros(percentile(99)),
        micros(mean),
        micros(samples[samples.len() - 1]),
    );
}

/// (b) Pipelined throughput: 200 heartbeats in one write, then all 200 responses.
fn pipelined_throughput(criterion: &mut Criterion, fixture: &mut Fixture) {
    let batch: String = (1..=PIPELINED_CALLS)
        .map(|id| heartbeat_line(id, &fixture.workspace_id, &fixture.lease_id))
        .collect();
    let batch = batch.into_bytes();
    let bridge = fixture.bridge();
    let mut group = criterion.benchmark_group("bridge");
    group.throughput(Throughput::Elements(PIPELINED_CALLS as u64));
    group.bench_function("pipelined_heartbeats_200", |b| {
        b.iter(|| {
            bridge.send(&batch);
            for _ in 0..PIPELINED_CALLS {
                black_box(bridge.read_result_line().len());
            }
        });
    });
    group.finish();
}

/// (c) `events/poll` of a full page through the bridge: the journal holds the `command.status`
/// events of `POLLED_EVENTS` `browser.tabs.list` Commands (answered `browser_disconnected`, no
/// browser is connected), and every poll reads them all from the journal's start.
fn events_poll_round_trip(criterion: &mut Criterion, fixture: &mut Fixture) {
    let (workspace_id, lease_id) = (fixture.workspace_id.clone(), fixture.lease_id.clone());
    let bridge = fixture.bridge();
    let calls: String = (1..=POLLED_EVENTS)
        .map(|id| {
            let request = json!({
                "jsonrpc": "2.0", "id": id, "method": "tools/call",
                "params": {"name": "browser.tabs.list", "arguments": {},
                           "workspaceId": workspace_id, "leaseId": lease_id},
            });
            format!("{request}\n")
        })
        .collect();
    bridge.send(calls.as_bytes());
    // Their responses, in any order, among the `events/event` notifications of the same events.
    let mut responses = 0;
    while responses < POLLED_EVENTS {
        let line: Value = serde_json::from_str(bridge.read_line()).expect("a JSON line");
        if line.get("id").is_some() {
            responses += 1;
        }
    }
    let poll = json!({
        "jsonrpc": "2.0", "id": 1, "method": "events/poll",
        "params": {"workspaceId": workspace_id, "cursor": "cursor:0", "limit": POLLED_EVENTS},
    });
    let poll = format!("{poll}\n").into_bytes();
    bridge.send(&poll);
    let page = loop {
        let line: Value = serde_json::from_str(bridge.read_line()).expect("a JSON line");
        if line.get("id").is_some() {
            break line;
        }
    };
    let events = page["result"]["events"].as_array().map_or(0, Vec::len);
    assert_eq!(events, POLLED_EVENTS, "the journal holds one page");
    let mut group = criterion.benchmark_group("bridge");
    group.throughput(Throughput::Elements(POLLED_EVENTS as u64));
    group.bench_function("events_poll_100_round_trip", |b| {
        b.iter(|| {
            bridge.send(&poll);
            black_box(bridge.read_result_line().len())
        });
    });
    group.finish();
}

/// (d) Bridge start to `initialize` result with the Broker already running.
fn warm_start(criterion: &mut Criterion, fixture: &Fixture) {
    let home = fixture.home.path();
    let initialize = initialize_line().into_bytes();
    let mut group = criterion.benchmark_group("bridge");
    group.sample_size(20);
    group.bench_function("start_to_initialize_warm_broker", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let started = Instant::now();
                let mut bridge = Bridge::spawn(home);
                bridge.send(&initialize);
                black_box(bridge.read_result_line().len());
                total += started.elapsed();
                bridge.shutdown();
            }
            total
        });
    });
    group.finish();
}

/// (e) Bridge start to `initialize` result in a fresh home: the bridge takes the startup lock
/// and spawns the Broker.
fn cold_start(criterion: &mut Criterion) {
    let initialize = initialize_line().into_bytes();
    let mut group = criterion.benchmark_group("bridge");
    group.sample_size(10);
    group.bench_function("start_to_initialize_cold_broker", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let home = tempfile::tempdir().expect("temp dir");
                let started = Instant::now();
                let mut bridge = Bridge::spawn(home.path());
                bridge.send(&initialize);
                black_box(bridge.read_result_line().len());
                total += started.elapsed();
                bridge.shutdown();
                stop_broker(home.path());
            }
            total
        });
    });
    group.finish();
}

fn micros(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e6
}

fn main() {
    let mut criterion = Criterion::default().configure_from_args();
    let mut fixture = Fixture::start();
    heartbeat_round_trip(&mut criterion, &mut fixture);
    pipelined_throughput(&mut criterion, &mut fixture);
    events_poll_round_trip(&mut criterion, &mut fixture);
    warm_start(&mut criterion, &fixture);
    fixture.stop();
    cold_start(&mut criterion);
    criterion.final_summary();
}
