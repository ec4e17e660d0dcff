//! Network event journaling for one page load with `SUBRESOURCES` subresources: the
//! `network.request` + `network.response` pair of the document and of every subresource,
//! with the payloads the pump builds (`session::network`), journaled the way the pump does it
//! (one `EventSink::emit_all` batch per burst) and, as the baseline it replaced, one
//! `EventSink::emit` per event. One Connection granted `network.read` drains its notification
//! queue. Reported: Broker time to journal (and offer) one page load's events
//! (`page_load/batch`, `page_load/per_event`), and the events per second one producer sustains
//! over back-to-back page loads (`sustained`, criterion's element throughput). In-process: no
//! Chromium, no sockets; it owns nothing but the measurement.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use browser_pilot::events::{Emit, EventSink, Generations, Hub};
use browser_pilot::store::{NewWorkspace, PrincipalKey, Store, StoreLimits};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use serde_json::{Value, json};
use tokio::runtime::Runtime;
use tokio::sync::mpsc;

/// Subresources of the measured page load (the figure).
const SUBRESOURCES: usize = 300;

/// Per-Connection notification queue, as in the Broker.
const NOTIFICATION_QUEUE: usize = 1024;

/// Back-to-back page loads per `sustained` iteration.
const LOADS_PER_ITERATION: usize = 4;

struct Fixture {
    sink: EventSink,
    workspace_id: String,
}

fn fixture(runtime: &Runtime) -> Fixture {
    let store = Store::open(StoreLimits::default()).expect("open store");
    let principal = PrincipalKey {
        client_id: "com.example.bench".into(),
        instance_id: "i1".into(),
    };
    let workspace_id = "workspace:bench".to_owned();
    store
        .create_workspace(&NewWorkspace {
            id: workspace_id.clone(),
            principal: principal.clone(),
            browser_id: "browser:bench".into(),
            client_key: None,
            options: Default::default(),
            now: 0,
        })
        .expect("create workspace");
    let hub = Arc::new(Hub::default());
    hub.add_workspace(&workspace_id, &principal);
    let (tx, mut rx) = mpsc::channel::<String>(NOTIFICATION_QUEUE);
    hub.subscribe_with(&principal, "connection:bench", tx, true);
    let delivered = Arc::new(AtomicU64::new(0));
    let seen = delivered.clone();
    runtime.spawn(async move {
        while let Some(line) = rx.recv().await {
            std::hint::black_box(line);
            seen.fetch_add(1, Ordering::Relaxed);
        }
    });
    let sink = EventSink::new(store, hub, Arc::new(Generations::default()));
    Fixture { sink, workspace_id }
}

fn resource(n: usize) -> (String, &'static str, &'static str) {
    match n % 4 {
        0 => (
            format!("https://cdn.example.com/img/{n}.png"),
            "Image",
            "image/png",
        ),
        1 => (
            format!("https://cdn.example.com/js/{n}.js"),
            "Script",
            "application/javascript",
        ),
        2 => (
            format!("https://cdn.example.com/css/{n}.css"),
            "Stylesheet",
            "text/css",
        ),
        _ => (
            format!("https://api.example.com/v1/items/{n}"),
            "Fetch",
            "application/json",
        ),
    }
}

/// The pump's events of one page load: request and response of the document and of every
/// subresource, payloads shaped like `session::network`'s.
fn page_load(workspace_id: &str, load: usize) -> Vec<Emit> {
    let mut emits = Vec::with_capacity(2 * (SUBRESOURCES + 1));
    let document = (
        format!("https://www.example.com/page/{load}"),
        "Document",
        "text/html",
    );
    for (n, (url, kind, mime)) in std::iter::once(document)
        .chain((0..SUBRESOURCES).map(resource))
        .enumerate()
    {
        let request_id = format!("request:{load:08x}{n:024x}");
        let started_at = 1_700_000_000_000i64 + n as i64;
        let request: Value = json!({"requestId": request_id, "method": "GET", "url": url,
            "resourceType": kind, "mainDocument": n == 0, "timing": {"startedAt": started_at},
            "targetId": "target:bench"});
        let response: Value = json!({"requestId": request_id, "method": "GET", "url": url,
            "resourceType": kind, "mainDocument": n == 0, "status": 200, "mimeType": mime,
            "fromCache": false, "timing": {"startedAt": started_at, "responseMs": 12},
            "targetId": "target:bench"});
        for (event_type, payload) in [("network.request", request), ("network.response", response)]
        {
            let mut emit = Emit::new(workspace_id, event_type, payload);
            emit.target_id = Some("target:bench".into());
            emit.sensitivity = "browser_data";
            emits.push(emit);
        }
    }
    emits
}

fn network_events(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let fixture = fixture(&runtime);
    let events_per_load = 2 * (SUBRESOURCES + 1);
    let mut group = c.benchmark_group("network_events");
    group.throughput(Throughput::Elements(events_per_load as u64));
    group.bench_function("page_load/batch", |b| {
        b.iter_custom(|iters| {
            let sink = fixture.sink.clone();
            let workspace_id = fixture.workspace_id.clone();
            runtime.block_on(async move {
                let mut spent = std::time::Duration::ZERO;
                for load in 0..iters as usize {
                    let emits = page_load(&workspace_id, load);
                    let started = Instant::now();
                    let rows = sink.emit_all(emits).await.expect("emit_all");
                    spent += started.elapsed();
                    std::hint::black_box(rows);
                }
                spent
            })
        });
    });
    group.bench_function("page_load/per_event", |b| {
        b.iter_custom(|iters| {
            let sink = fixture.sink.clone();
            let workspace_id = fixture.workspace_id.clone();
            runtime.block_on(async move {
                let mut spent = std::time::Duration::ZERO;
                for load in 0..iters as usize {
                    let emits = page_load(&workspace_id, load);
                    let started = Instant::now();
                    for emit in emits {
                        std::hint::black_box(sink.emit(emit).await.expect("emit"));
                    }
                    spent += started.elapsed();
                }
                spent
            })
        });
    });
    group.throughput(Throughput::Elements(
        (events_per_load * LOADS_PER_ITERATION) as u64,
    ));
    group.bench_function("sustained", |b| {
        b.iter_custom(|iters| {
            let sink = fixture.sink.clone();
            let workspace_id = fixture.workspace_id.clone();
            runtime.block_on(async move {
                let loads: Vec<Vec<Emit>> = (0..iters as usize * LOADS_PER_ITERATION)
                    .map(|load| page_load(&workspace_id, load))
                    .collect();
                let started = Instant::now();
                for emits in loads {
                    std::hint::black_box(sink.emit_all(emits).await.expect("emit_all"));
                }
                started.elapsed()
            })
        });
    });
    group.finish();
}

criterion_group!(benches, network_events);
criterion_main!(benches);
