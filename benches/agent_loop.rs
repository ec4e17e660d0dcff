//! End-to-end agent-loop timings through the real `browser-pilot bridge --stdio` against a real
//! headless Chromium and pages served from 127.0.0.1: navigate + observe, observe at 32 / 5,000 /
//! 20,000 interactive elements, click a checkbox by ref with evidence and a fresh Observation,
//! type 20 characters with evidence. The targets are in docs/performance.md.

#[path = "../tests/integration/support/mod.rs"]
#[expect(dead_code, reason = "the bench uses part of the test harness")]
mod support;

use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::{Value, json};
use support::rig::{Agent, Rig};

fn first_ref(observation: &Value, role: &str) -> Value {
    observation["elements"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["role"] == role)
        .unwrap()["ref"]
        .clone()
}

fn agent_loop(c: &mut Criterion) {
    let rig = Rig::start();
    let mut agent = Agent::new(&rig, "com.example.bench");
    agent.connect();
    let target = agent.tool(
        "browser.open",
        None,
        json!({"url": rig.fixtures.url("/gen?n=32")}),
    )["targetId"]
        .clone();
    let mut group = c.benchmark_group("agent_loop");
    // Keep the Lease alive between benchmark functions (each runs well under its TTL).
    fn heartbeat(agent: &mut Agent) {
        let params = json!({"workspaceId": agent.workspace_id, "leaseId": agent.lease_id});
        agent.bridge.ok("leases/heartbeat", params);
    }
    group
        .sample_size(20)
        .measurement_time(Duration::from_secs(5))
        .warm_up_time(Duration::from_secs(1));

    let small = rig.fixtures.url("/gen?n=32");
    group.bench_function("navigate_32_elements_plus_observe", |b| {
        b.iter(|| {
            agent.tool(
                "browser.navigate",
                Some(&target),
                json!({"action": "goto", "url": small}),
            );
            agent.tool("browser.observe", Some(&target), json!({"limit": 200}))
        })
    });
    heartbeat(&mut agent);
    group.bench_function("observe_32_elements", |b| {
        b.iter(|| agent.tool("browser.observe", Some(&target), json!({"limit": 200})))
    });
    let observation = agent.tool("browser.observe", Some(&target), json!({"limit": 200}));
    let checkbox = first_ref(&observation, "checkbox");
    let textbox = first_ref(&observation, "textbox");
    heartbeat(&mut agent);
    group.bench_function("click_checkbox_with_evidence_and_observation", |b| {
        b.iter(|| {
            let observation = agent.tool("browser.observe", Some(&target), json!({"limit": 200, "viewportOnly": true}));
            agent.tool("browser.click", Some(&target), json!({"observationId": observation["observationId"], "ref": checkbox, "observe": {"limit": 200}}))
        })
    });
    heartbeat(&mut agent);
    group.bench_function("type_20_chars_with_evidence", |b| {
        b.iter(|| {
            let observation = agent.tool("browser.observe", Some(&target), json!({"limit": 200}));
            agent.tool("browser.type", Some(&target), json!({"observationId": observation["observationId"], "ref": textbox, "text": "abcdefghijklmnopqrst", "observe": {"limit": 50}}))
        })
    });
    heartbeat(&mut agent);
    group.bench_function("viewport_screenshot_to_artifact", |b| {
        b.iter(|| {
            let shot = agent.tool("browser.capture", Some(&target), json!({}));
            let params = json!({"workspaceId": agent.workspace_id, "leaseId": agent.lease_id, "artifactId": shot["artifact"]["id"]});
            agent.bridge.ok("artifacts/release", params);
        })
    });
    heartbeat(&mut agent);
    // The same capture with every ref of the page's Observation outlined and numbered (drawn
    // on an unattached canvas in the isolated world), to read beside the plain one.
    let annotated = agent.tool("browser.observe", Some(&target), json!({"limit": 200}));
    group.bench_function("viewport_screenshot_annotated_to_artifact", |b| {
        b.iter(|| {
            let shot = agent.tool("browser.capture", Some(&target), json!({"annotations": {"observationId": annotated["observationId"]}}));
            let params = json!({"workspaceId": agent.workspace_id, "leaseId": agent.lease_id, "artifactId": shot["artifact"]["id"]});
            agent.bridge.ok("artifacts/release", params);
        })
    });
    eprintln!("RSS idle-ish (KiB): {}", rss_report(&rig, &agent));
    for n in [5_000usize, 20_000] {
        heartbeat(&mut agent);
        agent.tool(
            "browser.navigate",
            Some(&target),
            json!({"action": "goto", "url": rig.fixtures.url(&format!("/gen?n={n}"))}),
        );
        let sized = agent.tool(
            "browser.observe",
            Some(&target),
            json!({"limit": n as u64, "maxBytes": 4_000_000}),
        );
        eprintln!(
            "observe {n}: {} elements, {} bytes, truncated {}",
            sized["elements"].as_array().unwrap().len(),
            sized.to_string().len(),
            sized["truncated"]
        );
        group.sample_size(10);
        group.bench_function(format!("observe_{n}_elements_all_returned"), |b| {
            b.iter(|| {
                agent.tool(
                    "browser.observe",
                    Some(&target),
                    json!({"limit": n as u64, "maxBytes": 4_000_000}),
                )
            })
        });
    }
    group.finish();
    eprintln!(
        "RSS after the 20,000-element observations (KiB): {}",
        rss_report(&rig, &agent)
    );
}

/// Resident set sizes of the Broker, its janitor and the bridge, from /proc.
fn rss_report(rig: &Rig, agent: &Agent) -> String {
    let rss = |pid: u32| -> u64 {
        std::fs::read_to_string(format!("/proc/{pid}/status"))
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("VmRSS:"))
                    .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
            })
            .unwrap_or(0)
    };
    let broker = rig.home.broker_pid().unwrap_or(0);
    let janitor = std::process::Command::new("pgrep")
        .args(["-P", &broker.to_string()])
        .output()
        .ok()
        .and_then(|o| {
            String::from_utf8_lossy(&o.stdout)
                .split_whitespace()
                .next()?
                .parse()
                .ok()
        })
        .unwrap_or(0);
    let bridge = agent.bridge.child.id();
    let (b, j, g) = (rss(broker), rss(janitor), rss(bridge));
    format!("broker {b} + janitor {j} + bridge {g} = {}", b + j + g)
}

criterion_group!(benches, agent_loop);
criterion_main!(benches);
