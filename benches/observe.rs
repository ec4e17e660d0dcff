//! Scripted benchmark of `browser.observe`'s page side, end to end through
//! the crate's `CdpClient` and a real janitor process against a headless
//! Chromium: generated pages with 200, 5,000 and 20,000 interactive
//! elements, every element returned. One iteration is what a tool call pays
//! once the isolated world exists: `Runtime.callFunctionOn` of observe.js,
//! the reply through the janitor pipe, decoding into `PageObservation`,
//! hints, and serializing the agent-facing JSON. Prints a table of median /
//! min / max wall milliseconds, the median CPU milliseconds the whole process
//! tree spent (Chromium, janitor and this process, from Linux schedstat: a
//! figure that stays meaningful on a shared, loaded machine), output bytes
//! and wall ms per 1,000 elements (linear growth shows as a flat column).
//! Each size is measured three ways, interleaved so all see the same load: `script`, the
//! observe.js call alone (`page::run`); `tool`, what `browser.observe` pays on an unchanged
//! document (`page::run_observe` with the listener listing it keeps, docs/cdp.md); and `fresh`,
//! what it pays after the document changed (an attribute of `body` set, untimed, before each
//! call), when the listing is taken again.
//! Run with `cargo bench --bench observe`.

#[path = "../tests/integration/support/mod.rs"]
#[expect(dead_code, reason = "the bench uses part of the test harness")]
mod support;

use std::time::{Duration, Instant};

use browser_pilot::page::{self, HintContext, OBSERVE_MAX_MAX_BYTES, Observe, ObserveOptions};
use support::pages::{Browser, FixtureServer, Tab, client_over_janitor};

/// Deadline of one page call.
const WAIT: Duration = Duration::from_secs(60);

/// Element counts of the generated pages (the observation rows of docs/performance.md).
const SIZES: [usize; 3] = [200, 5_000, 20_000];

/// Measured iterations per size after one warm-up (fewer on big pages so a
/// run stays under a minute on a 2-core machine).
fn iterations(size: usize) -> usize {
    match size {
        0..=1_000 => 30,
        1_001..=10_000 => 10,
        _ => 5,
    }
}

struct Row {
    size: usize,
    path: &'static str,
    returned: usize,
    first_ms: f64,
    median_ms: f64,
    min_ms: f64,
    max_ms: f64,
    cpu_ms: Option<f64>,
    bytes: usize,
}

/// CPU time (ns) spent so far by this process and all its descendants
/// (Chromium's processes, the janitor), summed over every thread's
/// `/proc/<pid>/task/<tid>/schedstat`. `None` where there is no procfs.
fn tree_cpu_ns() -> Option<u64> {
    let me = std::process::id();
    let mut parents = Vec::new();
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // The parent pid is the second field after the parenthesised name.
        let after_name = stat.rsplit_once(')').map(|(_, rest)| rest).unwrap_or("");
        let ppid = after_name
            .split_whitespace()
            .nth(1)
            .and_then(|p| p.parse::<u32>().ok());
        parents.push((pid, ppid.unwrap_or(0)));
    }
    let mut tree = vec![me];
    let mut grew = true;
    while grew {
        grew = false;
        for (pid, ppid) in &parents {
            if tree.contains(ppid) && !tree.contains(pid) {
                tree.push(*pid);
                grew = true;
            }
        }
    }
    let mut total = 0;
    for pid in tree {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
            continue;
        };
        for task in tasks.flatten() {
            let path = task.path().join("schedstat");
            let run_ns = std::fs::read_to_string(path)
                .ok()
                .and_then(|text| text.split_whitespace().next()?.parse::<u64>().ok());
            total += run_ns.unwrap_or(0);
        }
    }
    Some(total)
}

fn millis(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}

/// How an iteration observes (the rows' `path`).
#[derive(Clone, Copy, PartialEq)]
enum Path {
    Script,
    Tool,
    Fresh,
}

impl Path {
    fn name(self) -> &'static str {
        match self {
            Path::Script => "script",
            Path::Tool => "tool",
            Path::Fresh => "fresh",
        }
    }
}

async fn observe_once(tab: &Tab, key: &str, size: usize, path: Path) -> (Duration, usize, usize) {
    if path == Path::Fresh {
        // A changed document: the kept listener listing is stale.
        tab.eval(&format!(
            "document.body.setAttribute('data-bench', {key:?})"
        ))
        .await;
    }
    let started = Instant::now();
    let script = Observe {
        key: key.to_owned(),
        options: ObserveOptions {
            limit: u32::try_from(size).unwrap_or(u32::MAX).max(1),
            max_bytes: OBSERVE_MAX_MAX_BYTES,
            viewport_only: false,
        },
        base_key: None,
        compact: false,
        key_record: false,
        click_verdict: None,
        state_of: None,
    };
    let observation = match path != Path::Script {
        true => {
            page::run_observe(
                &tab.client,
                &tab.session,
                (tab.context, true),
                &script,
                WAIT,
            )
            .await
        }
        false => tab.run(&script).await,
    }
    .expect("observe");
    let hints = page::observation_hints(&observation, &HintContext::default());
    let wire = serde_json::to_vec(&observation.wire(&hints)).expect("serialize");
    (started.elapsed(), wire.len(), observation.elements.len())
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let rows = runtime.block_on(async {
        let browser = Browser::start();
        let server = FixtureServer::start();
        let (client, _janitor) = client_over_janitor(&browser.ws_url()).await;
        let mut rows = Vec::new();
        for size in SIZES {
            let tab = Tab::open(&client, &server.url(&format!("/generated/{size}"))).await;
            let (first, _, _) = observe_once(&tab, "warm-up", size, Path::Tool).await;
            for path in [Path::Script, Path::Tool, Path::Fresh] {
                let other = match path {
                    Path::Script => Path::Tool,
                    Path::Tool => Path::Script,
                    Path::Fresh => Path::Tool,
                };
                let mut times = Vec::new();
                let mut cpu = Vec::new();
                let mut bytes = 0;
                let mut returned = 0;
                for iteration in 0..iterations(size) {
                    // The other path between two of this one's: both see the same load.
                    let _ = observe_once(&tab, &format!("other-{iteration}"), size, other).await;
                    let cpu_before = tree_cpu_ns();
                    let (elapsed, wire_bytes, count) =
                        observe_once(&tab, &format!("bench-{iteration}"), size, path).await;
                    if let (Some(before), Some(after)) = (cpu_before, tree_cpu_ns()) {
                        cpu.push(after.saturating_sub(before));
                    }
                    times.push(elapsed);
                    bytes = wire_bytes;
                    returned = count;
                }
                times.sort();
                cpu.sort_unstable();
                rows.push(Row {
                    size,
                    path: path.name(),
                    returned,
                    first_ms: millis(first),
                    median_ms: millis(times[times.len() / 2]),
                    min_ms: millis(times[0]),
                    max_ms: millis(times[times.len() - 1]),
                    cpu_ms: cpu.get(cpu.len() / 2).map(|ns| *ns as f64 / 1e6),
                    bytes,
                });
            }
        }
        drop(browser);
        rows
    });
    println!(
        "{:>8} {:>6} {:>8} {:>9} {:>10} {:>8} {:>8} {:>8} {:>11} {:>12}",
        "elements",
        "path",
        "returned",
        "first ms",
        "median ms",
        "min ms",
        "max ms",
        "cpu ms",
        "bytes",
        "ms/1k elems"
    );
    for row in rows {
        let cpu = row
            .cpu_ms
            .map(|ms| format!("{ms:.1}"))
            .unwrap_or_else(|| "-".to_owned());
        println!(
            "{:>8} {:>6} {:>8} {:>9.1} {:>10.1} {:>8.1} {:>8.1} {:>8} {:>11} {:>12.2}",
            row.size,
            row.path,
            row.returned,
            row.first_ms,
            row.median_ms,
            row.min_ms,
            row.max_ms,
            cpu,
            row.bytes,
            row.median_ms / row.size as f64 * 1000.0
        );
    }
}
