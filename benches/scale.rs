//! The scale bench: 1, 4, 16 and 32 agents on one Broker, each its own `browser-pilot bridge
//! --stdio`, Principal, Workspace, Lease and tab, looping navigate / observe / click / type /
//! capture against pages served from 127.0.0.1, on one of these placements: a Broker-managed
//! headless Chromium (`browser launch --headless` in a temporary home; the default), or remote
//! browsers of `remote-browsers.toml` (docs/remote.md): one plain headless Chromium as a
//! `shared` entry, a `[[pool]]` of two such (the Workspaces spread over two browsers), a
//! browserless engine as a `per_workspace` entry (a browser per Workspace), or a `[[pool]]` of
//! two browserless engines (the last two need `BROWSER_PILOT_BROWSERLESS_DIR`, as the remote
//! tests do, and take at most 4 Workspaces per engine). Per level it prints each operation's p50
//! and p99 and the throughput, the CPU time per tool call of Broker + janitors + bridges read
//! from `/proc` (`stat` for the Broker, janitors, keeper and browsers; the threads' `schedstat`
//! for the bridges, which use less than a clock tick each; the browsers' apart: Chromium under
//! the keeper, each remote Chromium's tree, or each engine's node and the browsers it launched),
//! the RSS of our processes sampled every 200 ms, and the events journaled and notified per
//! call. docs/performance.md ("Many agents on one Broker") has the command and the latest
//! tables.
//!
//! `cargo bench --bench scale -- [LEVELS] [SECONDS] [--placement=P]`: levels as `1,4,16,32`
//! (the default), seconds of looping per level (default 20), P one of `managed` (the default),
//! `shared`, `pool`, `per-workspace`, `browserless-pool`. Run without `--bench` (as `cargo test
//! --all-targets` does) it runs one agent for one loop on the managed browser and on the pool of
//! two plain Chromiums, so the bench cannot rot.

#[path = "../tests/integration/support/mod.rs"]
#[expect(dead_code, reason = "the bench uses part of the test harness")]
mod support;

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::browserless::{BROWSERLESS_TOKEN, OwnBrowserless};
use support::chromium::{Fixtures, TempChromium};
use support::rig::Agent;
use support::{BIN, TestHome, janitor_pids};

const OPERATIONS: [&str; 5] = ["navigate", "observe", "click", "type", "capture"];

/// What one agent measured in one level.
#[derive(Default)]
struct Tally {
    /// Milliseconds per operation.
    times: BTreeMap<&'static str, Vec<f64>>,
    errors: Vec<String>,
    calls: u64,
}

/// One agent of a level: its bridge, Workspace, Lease and tab.
struct Seat {
    agent: Agent,
    target: Value,
}

fn tool(agent: &mut Agent, name: &str, target: &Value, arguments: Value) -> Result<Value, String> {
    let response = agent.call(name, Some(target), arguments);
    match response.get("result") {
        Some(outcome) if outcome["command"]["status"] == "completed" => {
            Ok(outcome["result"].clone())
        }
        _ => Err(format!("{name}: {}", trimmed(&response))),
    }
}

fn trimmed(value: &Value) -> String {
    let text = value.to_string();
    text.chars().take(300).collect()
}

fn first_ref(observation: &Value, role: &str) -> Result<Value, String> {
    observation["elements"]
        .as_array()
        .and_then(|elements| elements.iter().find(|e| e["role"] == role))
        .map(|e| e["ref"].clone())
        .ok_or_else(|| format!("no {role} in the Observation"))
}

/// One loop: navigate, observe, click the first checkbox, type 10 keystrokes into the first
/// text field, capture the viewport (and release the Artifact). Each tool call is timed.
fn one_loop(seat: &mut Seat, page: &str, tally: &mut Tally) -> Result<(), String> {
    let Seat { agent, target } = seat;
    let mut timed = |tally: &mut Tally, op: &'static str, name: &str, arguments: Value| {
        let started = Instant::now();
        let result = tool(agent, name, target, arguments);
        tally.calls += 1;
        tally
            .times
            .entry(op)
            .or_default()
            .push(started.elapsed().as_secs_f64() * 1000.0);
        result
    };
    timed(
        tally,
        "navigate",
        "browser.navigate",
        json!({"action": "goto", "url": page}),
    )?;
    let observation = timed(tally, "observe", "browser.observe", json!({"limit": 200}))?;
    let (id, checkbox, textbox) = (
        observation["observationId"].clone(),
        first_ref(&observation, "checkbox")?,
        first_ref(&observation, "textbox")?,
    );
    timed(
        tally,
        "click",
        "browser.click",
        json!({"observationId": id, "ref": checkbox}),
    )?;
    timed(
        tally,
        "type",
        "browser.type",
        json!({"observationId": id, "ref": textbox, "text": "abcdefghij"}),
    )?;
    let shot = timed(tally, "capture", "browser.capture", json!({}))?;
    let params = json!({"workspaceId": agent.workspace_id, "leaseId": agent.lease_id, "artifactId": shot["artifact"]["id"]});
    agent.bridge.ok("artifacts/release", params);
    Ok(())
}

/// `/proc/PID/stat` fields after the command name, from field 3 (state) on.
fn stat_fields(pid: u32) -> Vec<u64> {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return Vec::new();
    };
    let Some((_, rest)) = stat.rsplit_once(')') else {
        return Vec::new();
    };
    rest.split_whitespace()
        .map(|field| field.parse().unwrap_or(0))
        .collect()
}

fn ticks_per_second() -> f64 {
    (unsafe { libc::sysconf(libc::_SC_CLK_TCK) }) as f64
}

/// CPU seconds a process used (user + system); with `children`, also that of its children it
/// reaped (Chromium's renderers that exited).
fn cpu_seconds(pid: u32, children: bool) -> f64 {
    let fields = stat_fields(pid);
    // After ')': state(0) ppid(1) ... utime(11) stime(12) cutime(13) cstime(14).
    let own = fields.get(11).copied().unwrap_or(0) + fields.get(12).copied().unwrap_or(0);
    let reaped = if children {
        fields.get(13).copied().unwrap_or(0) + fields.get(14).copied().unwrap_or(0)
    } else {
        0
    };
    (own + reaped) as f64 / ticks_per_second()
}

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find(|line| line.starts_with("VmRSS:"))
                .and_then(|line| line.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

/// Every live process: (pid, parent).
fn processes() -> Vec<(u32, u32)> {
    std::fs::read_dir("/proc")
        .map(|entries| {
            entries
                .flatten()
                .filter_map(|entry| {
                    let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
                    let parent = *stat_fields(pid).get(1)? as u32;
                    Some((pid, parent))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The managed browser's keeper of this home (its role argument and the home's `browser`
/// folder on its command line).
fn keeper_pid(home: &TestHome) -> Option<u32> {
    let folder = home.path().join("browser");
    processes().into_iter().map(|(pid, _)| pid).find(|pid| {
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
        args.contains(&b"--browser-pilot-internal=keeper".as_slice())
            && args.contains(&folder.as_os_str().as_encoded_bytes())
    })
}

/// CPU seconds of every descendant of `root` (Chromium under its keeper), reaped ones included.
fn tree_cpu_seconds(root: u32) -> f64 {
    let all = processes();
    let mut stack = vec![root];
    let mut total = 0.0;
    while let Some(pid) = stack.pop() {
        for (child, _) in all.iter().filter(|(_, parent)| *parent == pid) {
            total += cpu_seconds(*child, true);
            stack.push(*child);
        }
    }
    total
}

/// The processes whose CPU is counted, read at one moment.
#[derive(Clone, Copy, Default)]
struct Cpu {
    broker: f64,
    janitors: f64,
    bridges: f64,
    keeper: f64,
    browsers: f64,
}

struct Pids {
    broker: u32,
    /// One per browser connection.
    janitors: Vec<u32>,
    /// The managed browser's keeper (Chromium runs under it), when the placement is managed.
    keeper: Option<u32>,
    /// Remote browsers' roots: a plain Chromium, or an engine's node (its browsers under it).
    remote_roots: Vec<u32>,
}

/// CPU seconds of the live threads of a process, in nanoseconds of run time
/// (`/proc/PID/task/*/schedstat`): finer than the clock ticks of `stat`, for processes that use
/// less than a tick in a level (a bridge); threads that exited are not counted, and a bridge's
/// threads live as long as it does.
fn thread_cpu_seconds(pid: u32) -> f64 {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0.0;
    };
    tasks
        .flatten()
        .filter_map(|task| {
            let text = std::fs::read_to_string(task.path().join("schedstat")).ok()?;
            text.split_whitespace().next()?.parse::<u64>().ok()
        })
        .sum::<u64>() as f64
        / 1e9
}

fn read_cpu(pids: &Pids, bridges: &[u32]) -> Cpu {
    let remote: f64 = (pids.remote_roots.iter())
        .map(|root| cpu_seconds(*root, true) + tree_cpu_seconds(*root))
        .sum();
    Cpu {
        broker: cpu_seconds(pids.broker, false),
        janitors: pids
            .janitors
            .iter()
            .map(|pid| cpu_seconds(*pid, false))
            .sum(),
        bridges: bridges.iter().map(|pid| thread_cpu_seconds(*pid)).sum(),
        keeper: pids.keeper.map_or(0.0, |pid| cpu_seconds(pid, false)),
        browsers: pids.keeper.map_or(0.0, tree_cpu_seconds) + remote,
    }
}

fn percentile(sorted: &[f64], share: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let at = ((sorted.len() as f64 - 1.0) * share).round() as usize;
    sorted[at.min(sorted.len() - 1)]
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|text| {
            text.split_whitespace()
                .take(3)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_default()
}

/// The highest journal sequence of a Workspace (its head), from `workspaces/get`'s cursor.
fn journal_head(agent: &mut Agent) -> u64 {
    let got = agent
        .bridge
        .ok("workspaces/get", json!({"workspaceId": agent.workspace_id}));
    got["eventCursor"]
        .as_str()
        .and_then(|cursor| cursor.strip_prefix("cursor:"))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

fn run_level(
    browsers: &Browsers,
    fixtures: &Fixtures,
    agents: usize,
    seconds: f64,
    loops: Option<usize>,
) {
    let home = &browsers.home;
    let browser_id = browsers.browser_id;
    let page = fixtures.url("/gen?n=32");
    // Every seat at once, as agent products would arrive.
    let mut seats: Vec<Seat> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..agents)
            .map(|index| {
                let page = page.clone();
                scope.spawn(move || {
                    let client = format!("com.example.scale{index}");
                    let mut agent = Agent::bound(home, &client, browser_id);
                    agent.connect();
                    let target =
                        agent.tool("browser.open", None, json!({"url": page}))["targetId"].clone();
                    Seat { agent, target }
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    // One loop each before measuring (first document of each tab, page libraries installed).
    std::thread::scope(|scope| {
        for seat in seats.iter_mut() {
            let page = page.clone();
            scope.spawn(move || {
                let _ = one_loop(seat, &page, &mut Tally::default());
            });
        }
    });
    let broker = home.broker_pid().expect("broker pid");
    let pids = Pids {
        broker,
        janitors: janitor_pids(broker),
        keeper: (browser_id.is_none()).then(|| keeper_pid(home).expect("keeper pid")),
        remote_roots: browsers.remote_roots(),
    };
    assert!(!pids.janitors.is_empty(), "the Broker has no janitor");
    let bridges: Vec<u32> = seats.iter().map(|s| s.agent.bridge.child.id()).collect();
    let heads_before: Vec<u64> = seats
        .iter_mut()
        .map(|s| journal_head(&mut s.agent))
        .collect();
    for seat in seats.iter_mut() {
        seat.agent.bridge.drain_notifications(Duration::ZERO);
    }
    let load_before = load_average();
    let samples = Mutex::new(Vec::<(u64, u64)>::new());
    let sampling = AtomicBool::new(true);
    let cpu_before = read_cpu(&pids, &bridges);
    let started = Instant::now();
    let tallies: Vec<(Tally, usize)> = std::thread::scope(|scope| {
        scope.spawn(|| {
            while sampling.load(Ordering::Relaxed) {
                let janitors: u64 = pids.janitors.iter().map(|pid| rss_kib(*pid)).sum();
                let ours = rss_kib(pids.broker) + janitors;
                let bridged: u64 = bridges.iter().map(|pid| rss_kib(*pid)).sum();
                samples.lock().unwrap().push((ours, bridged));
                std::thread::sleep(Duration::from_millis(200));
            }
        });
        let handles: Vec<_> = seats
            .iter_mut()
            .map(|seat| {
                let page = page.clone();
                scope.spawn(move || {
                    let mut tally = Tally::default();
                    let mut done = 0;
                    while loops.map_or(started.elapsed().as_secs_f64() < seconds, |n| done < n) {
                        if let Err(error) = one_loop(seat, &page, &mut tally) {
                            tally.errors.push(error);
                        }
                        done += 1;
                    }
                    // Lease TTLs are long, but a long level must not let one lapse.
                    let params = json!({"workspaceId": seat.agent.workspace_id, "leaseId": seat.agent.lease_id});
                    seat.agent.bridge.ok("leases/heartbeat", params);
                    (tally, done)
                })
            })
            .collect();
        let tallies = handles.into_iter().map(|h| h.join().unwrap()).collect();
        sampling.store(false, Ordering::Relaxed);
        tallies
    });
    let elapsed = started.elapsed().as_secs_f64();
    let cpu_after = read_cpu(&pids, &bridges);
    let load_after = load_average();
    let heads_after: Vec<u64> = seats
        .iter_mut()
        .map(|s| journal_head(&mut s.agent))
        .collect();
    let notified: usize = seats
        .iter_mut()
        .map(|s| {
            s.agent
                .bridge
                .drain_notifications(Duration::from_millis(100))
                .iter()
                .filter(|n| n["method"] == "events/event")
                .count()
        })
        .sum();
    let journaled: u64 = heads_after
        .iter()
        .zip(&heads_before)
        .map(|(a, b)| a - b)
        .sum();

    let calls: u64 = tallies.iter().map(|(t, _)| t.calls).sum();
    let loops_done: usize = tallies.iter().map(|(_, n)| n).sum();
    let errors: Vec<&String> = tallies.iter().flat_map(|(t, _)| &t.errors).collect();
    println!(
        "\n== {agents} agent(s) on {}: {loops_done} loops, {calls} tool calls in {elapsed:.1} s ({:.1} calls/s); load {load_before} -> {load_after}; errors {}",
        browsers.placement.name(),
        calls as f64 / elapsed,
        errors.len()
    );
    for error in errors.iter().take(3) {
        println!("   error: {error}");
    }
    println!("| operation | p50 ms | p99 ms | n |");
    println!("| --- | --- | --- | --- |");
    for op in OPERATIONS {
        let mut all: Vec<f64> = tallies
            .iter()
            .flat_map(|(t, _)| t.times.get(op).into_iter().flatten().copied())
            .collect();
        all.sort_by(f64::total_cmp);
        println!(
            "| {op} | {:.1} | {:.1} | {} |",
            percentile(&all, 0.5),
            percentile(&all, 0.99),
            all.len()
        );
    }
    let per_call = |seconds: f64| seconds * 1e6 / calls.max(1) as f64;
    let d = |f: fn(&Cpu) -> f64| f(&cpu_after) - f(&cpu_before);
    let (b, j, g, k, c) = (
        d(|c| c.broker),
        d(|c| c.janitors),
        d(|c| c.bridges),
        d(|c| c.keeper),
        d(|c| c.browsers),
    );
    println!(
        "CPU per tool call (us): Broker {:.0} + janitors ({}) {:.0} + bridges {:.0} = {:.0}; keeper {:.0}; browsers {:.0}",
        per_call(b),
        pids.janitors.len(),
        per_call(j),
        per_call(g),
        per_call(b + j + g),
        per_call(k),
        per_call(c)
    );
    let samples = samples.into_inner().unwrap();
    let peak_ours = samples.iter().map(|s| s.0).max().unwrap_or(0);
    let peak_bridges = samples.iter().map(|s| s.1).max().unwrap_or(0);
    println!(
        "RSS peak (MiB): Broker + janitors {:.1}, bridges {:.1} ({:.1} each), {} samples",
        peak_ours as f64 / 1024.0,
        peak_bridges as f64 / 1024.0,
        peak_bridges as f64 / 1024.0 / agents as f64,
        samples.len()
    );
    println!(
        "events: {journaled} journaled ({:.2} per call), {notified} notifications delivered",
        journaled as f64 / calls.max(1) as f64
    );
    println!(
        "SCALE placement={} agents={agents} calls={calls} seconds={elapsed:.2} cpu_broker={b:.3} cpu_janitors={j:.3} cpu_bridges={g:.3} cpu_keeper={k:.3} cpu_browsers={c:.3} rss_broker_janitor_kib={peak_ours} rss_bridges_kib={peak_bridges} journaled={journaled} notified={notified} errors={}",
        browsers.placement.name(),
        errors.len()
    );
    // Release the seats: the tabs close with their Workspaces.
    for seat in seats.iter_mut() {
        let ids = json!({"workspaceId": seat.agent.workspace_id, "leaseId": seat.agent.lease_id});
        seat.agent.bridge.ok("leases/release", ids);
        let ws = json!({"workspaceId": seat.agent.workspace_id});
        seat.agent.bridge.ok("workspaces/release", ws);
        seat.agent.bridge.ok("shutdown", json!({}));
    }
}

/// Where the agents' Workspaces run.
#[derive(Clone, Copy, PartialEq)]
enum Placement {
    /// The Broker-managed headless Chromium.
    Managed,
    /// One plain headless Chromium, a `shared` remote entry.
    Shared,
    /// Two plain headless Chromiums, `shared` entries of a `[[pool]]`.
    Pool,
    /// A browserless engine, a `per_workspace` entry.
    PerWorkspace,
    /// Two browserless engines, `per_workspace` entries of a `[[pool]]`.
    BrowserlessPool,
}

impl Placement {
    const ALL: [Placement; 5] = [
        Placement::Managed,
        Placement::Shared,
        Placement::Pool,
        Placement::PerWorkspace,
        Placement::BrowserlessPool,
    ];

    fn name(self) -> &'static str {
        match self {
            Placement::Managed => "managed",
            Placement::Shared => "shared",
            Placement::Pool => "pool",
            Placement::PerWorkspace => "per-workspace",
            Placement::BrowserlessPool => "browserless-pool",
        }
    }
}

/// Sessions one browserless engine runs at once (its test setting).
const ENGINE_SESSIONS: usize = 4;

/// A home whose Broker reaches the placement's browsers, and those browsers (ended on drop).
struct Browsers {
    placement: Placement,
    home: TestHome,
    /// The candidate every Workspace is bound to (`None`: the default binding, the managed
    /// browser).
    browser_id: Option<&'static str>,
    /// How many Workspaces the placement takes at once.
    capacity: Option<usize>,
    chromiums: Vec<TempChromium>,
    engines: Vec<OwnBrowserless>,
    _token_dir: Option<tempfile::TempDir>,
}

impl Browsers {
    fn start(placement: Placement) -> Browsers {
        let mut browsers = Browsers {
            placement,
            home: TestHome::new(),
            browser_id: None,
            capacity: None,
            chromiums: Vec::new(),
            engines: Vec::new(),
            _token_dir: None,
        };
        let entries = match placement {
            Placement::Managed => {
                let (code, _, err) = browsers.home.run(BIN, &["browser", "launch", "--headless"]);
                assert_eq!(code, 0, "browser launch: {err}");
                return browsers;
            }
            Placement::Shared | Placement::Pool => {
                let count = if placement == Placement::Pool { 2 } else { 1 };
                browsers.chromiums = (0..count).map(|_| TempChromium::start()).collect();
                (browsers.chromiums.iter())
                    .map(|chromium| {
                        format!(
                            "endpoint = \"{}\"\nsessions = \"shared\"\n",
                            chromium.ws_url()
                        )
                    })
                    .collect::<Vec<_>>()
            }
            Placement::PerWorkspace | Placement::BrowserlessPool => {
                let count = if placement == Placement::BrowserlessPool {
                    2
                } else {
                    1
                };
                browsers.engines = std::thread::scope(|scope| {
                    let starting: Vec<_> = (0..count)
                        .map(|_| scope.spawn(OwnBrowserless::start))
                        .collect();
                    starting
                        .into_iter()
                        .map(|engine| engine.join().unwrap())
                        .collect()
                });
                let dir = tempfile::tempdir().unwrap();
                let token_file = dir.path().join("engine.token");
                std::fs::write(&token_file, BROWSERLESS_TOKEN).unwrap();
                std::fs::set_permissions(
                    &token_file,
                    std::os::unix::fs::PermissionsExt::from_mode(0o600),
                )
                .unwrap();
                browsers._token_dir = Some(dir);
                browsers.capacity = Some(count * ENGINE_SESSIONS);
                (browsers.engines.iter())
                    .map(|own| format!(
                        "endpoint = \"{}?token={{token}}\"\ntoken_file = \"{}\"\nsessions = \"per_workspace\"\nmax_sessions = {ENGINE_SESSIONS}\n",
                        own.engine.ws_url(),
                        token_file.display()
                    ))
                    .collect()
            }
        };
        let mut config: String = (entries.iter().enumerate())
            .map(|(n, entry)| format!("[[browser]]\nid = \"b{n}\"\n{entry}\n"))
            .collect();
        browsers.browser_id = Some(match entries.len() {
            1 => "browser:remote:b0",
            _ => {
                config.push_str("[[pool]]\nid = \"farm\"\nbrowsers = [\"b0\", \"b1\"]\n");
                "browser:remote:farm"
            }
        });
        browsers.home = TestHome::new().with_env("BROWSER_PILOT_DISCOVERY_DIRS", "");
        let file = browsers.home.path().join("remote-browsers.toml");
        std::fs::write(&file, config).unwrap();
        std::fs::set_permissions(&file, std::os::unix::fs::PermissionsExt::from_mode(0o600))
            .unwrap();
        browsers
    }

    /// The remote browsers' root processes.
    fn remote_roots(&self) -> Vec<u32> {
        let chromiums = (self.chromiums.iter()).filter_map(|c| c.chromium.child.as_ref());
        let engines = self.engines.iter().filter_map(|own| own.pid);
        chromiums
            .map(std::process::Child::id)
            .chain(engines)
            .collect()
    }

    fn stop(self) {
        if self.placement == Placement::Managed {
            let (code, _, err) = self.home.run(BIN, &["browser", "stop"]);
            assert_eq!(code, 0, "browser stop: {err}");
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let benching = args.iter().any(|a| a == "--bench");
    let free: Vec<&String> = args.iter().filter(|a| !a.starts_with("--")).collect();
    let levels: Vec<usize> = match free.first() {
        Some(list) if list.contains(',') || list.parse::<usize>().is_ok() => list
            .split(',')
            .filter_map(|n| n.trim().parse().ok())
            .collect(),
        _ if benching => vec![1, 4, 16, 32],
        _ => vec![1],
    };
    let seconds: f64 = free.get(1).and_then(|s| s.parse().ok()).unwrap_or(20.0);
    let loops = (!benching).then_some(1);
    let placements: Vec<Placement> = match args.iter().find_map(|a| a.strip_prefix("--placement=")) {
        Some(name) => vec![
            *(Placement::ALL.iter())
                .find(|p| p.name() == name)
                .unwrap_or_else(|| panic!("--placement is one of managed, shared, pool, per-workspace, browserless-pool")),
        ],
        None if benching => vec![Placement::Managed],
        None => vec![Placement::Managed, Placement::Pool],
    };

    let fixtures = Fixtures::start();
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    for placement in placements {
        let browsers = Browsers::start(placement);
        println!(
            "scale bench on {}: {cores} cores, load average {} at start",
            placement.name(),
            load_average()
        );
        for &agents in &levels {
            match browsers.capacity {
                Some(capacity) if agents > capacity => {
                    println!("\n== {agents} agent(s): skipped, the placement takes {capacity}");
                }
                _ => run_level(&browsers, &fixtures, agents, seconds, loops),
            }
        }
        browsers.stop();
    }
}
