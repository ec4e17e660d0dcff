//! Event delivery throughput: `EventSink::emit` (journal append in the in-memory store, then the
//! `events/event` notification offered to every subscribed Connection) with 0, 1 and 10
//! Connections subscribed to the Workspace's Principal, awaited one at a time (`emit`) and from
//! `PRODUCERS` concurrent tasks (`emit_concurrent`: the writer thread group-commits what they
//! queue, as with many Connections and event producers at once); a burst through
//! `EventSink::emit_all` (`BURST` events, one store call); and two baselines:
//! `Store::append_event` called directly, and an empty round trip through tokio's blocking pool. Each Connection is what the Broker gives
//! it: a bounded queue drained by its own task. In-process, no sockets and no Chromium; the
//! socket write is `bridge_roundtrip`'s business. `event_delivery_32_agents` is the shape of the
//! 32-agent scale bench (`benches/scale.rs`): 32 Principals, each with its Workspace and one
//! subscribed Connection, one emitting task per Workspace; its time is the process's CPU time
//! per event (journal append, notification line, queue, the Connection's task taking it), not
//! wall time.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use browser_pilot::events::{Emit, EventSink, Generations, Hub};
use browser_pilot::store::{
    EventVisibility, NewEvent, NewWorkspace, PrincipalKey, Store, StoreLimits,
};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use serde_json::json;
use tokio::runtime::Runtime;
use tokio::sync::mpsc;

/// Per-Connection notification queue, as in the Broker (`NOTIFICATION_QUEUE`).
const NOTIFICATION_QUEUE: usize = 1024;

/// Subscribed Connection counts measured.
const SUBSCRIBER_COUNTS: &[usize] = &[0, 1, 10];

/// Concurrent emitting tasks in `emit_concurrent`.
const PRODUCERS: u64 = 64;

/// Events per `emit_all` call in `emit_all_burst`.
const BURST: u64 = 100;

/// One Workspace with `subscribers` draining Connections of its owner.
struct Fixture {
    sink: EventSink,
    sink_store: Store,
    workspace_id: String,
    offered: u64,
    delivered: Arc<AtomicU64>,
}

/// Creates a Workspace of a new Principal `client_id` in the store and the hub.
fn add_workspace(store: &Store, hub: &Hub, client_id: &str, workspace_id: &str) -> PrincipalKey {
    let principal = PrincipalKey {
        client_id: client_id.into(),
        instance_id: "i1".into(),
    };
    store
        .create_workspace(&NewWorkspace {
            id: workspace_id.into(),
            principal: principal.clone(),
            browser_id: "browser:bench".into(),
            client_key: None,
            options: Default::default(),
            now: 0,
        })
        .expect("create workspace");
    hub.add_workspace(workspace_id, &principal);
    principal
}

fn fixture(runtime: &Runtime, subscribers: usize) -> Fixture {
    let store = Store::open(StoreLimits::default()).expect("open store");
    let hub = Arc::new(Hub::default());
    let workspace_id = "workspace:bench".to_owned();
    let principal = add_workspace(&store, &hub, "com.example.bench", &workspace_id);
    let delivered = Arc::new(AtomicU64::new(0));
    for n in 0..subscribers {
        let (tx, mut rx) = mpsc::channel::<String>(NOTIFICATION_QUEUE);
        hub.subscribe(&principal, &format!("connection:bench-{n}"), tx);
        let delivered = delivered.clone();
        runtime.spawn(async move {
            while let Some(line) = rx.recv().await {
                std::hint::black_box(line);
                delivered.fetch_add(1, Ordering::Relaxed);
            }
        });
    }
    let sink = EventSink::new(store.clone(), hub, Arc::new(Generations::default()));
    Fixture {
        sink,
        sink_store: store,
        workspace_id,
        offered: 0,
        delivered,
    }
}

fn emit_throughput(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let mut group = c.benchmark_group("event_delivery");
    group.throughput(Throughput::Elements(1));
    for &subscribers in SUBSCRIBER_COUNTS {
        let mut fixture = fixture(&runtime, subscribers);
        group.bench_with_input(
            BenchmarkId::new("emit", format!("{subscribers}_connections")),
            &subscribers,
            |b, _| {
                b.iter_custom(|iters| {
                    let sink = fixture.sink.clone();
                    let workspace_id = fixture.workspace_id.clone();
                    fixture.offered += iters * subscribers as u64;
                    runtime.block_on(async move {
                        let started = Instant::now();
                        for n in 0..iters {
                            let payload = json!({"leaseId": "lease:bench", "n": n});
                            let row = sink
                                .emit(Emit::new(&workspace_id, "lease.expired", payload))
                                .await
                                .expect("emit");
                            std::hint::black_box(row);
                        }
                        started.elapsed()
                    })
                });
            },
        );
        group.bench_with_input(
            BenchmarkId::new("emit_concurrent", format!("{subscribers}_connections")),
            &subscribers,
            |b, _| {
                b.iter_custom(|iters| {
                    let sink = fixture.sink.clone();
                    let workspace_id = fixture.workspace_id.clone();
                    fixture.offered += iters * subscribers as u64;
                    runtime.block_on(async move {
                        let started = Instant::now();
                        let mut producers = tokio::task::JoinSet::new();
                        for producer in 0..PRODUCERS {
                            let (sink, workspace_id) = (sink.clone(), workspace_id.clone());
                            producers.spawn(async move {
                                let mut n = producer;
                                while n < iters {
                                    let payload = json!({"leaseId": "lease:bench", "n": n});
                                    let row = sink
                                        .emit(Emit::new(&workspace_id, "lease.expired", payload))
                                        .await
                                        .expect("emit");
                                    std::hint::black_box(row);
                                    n += PRODUCERS;
                                }
                            });
                        }
                        while let Some(done) = producers.join_next().await {
                            done.expect("producer");
                        }
                        started.elapsed()
                    })
                });
            },
        );
        // Let the drainers catch up, then say how much of the fan-out was delivered.
        runtime.block_on(async { tokio::time::sleep(Duration::from_millis(100)).await });
        let delivered = fixture.delivered.load(Ordering::Relaxed);
        match fixture.offered {
            0 => eprintln!("{subscribers} connections: journal only"),
            offered => eprintln!(
                "{subscribers} connections: {delivered} of {offered} notifications delivered ({:.1}%)",
                delivered as f64 * 100.0 / offered as f64
            ),
        }
    }
    // A burst (a page load's events, a Lease sweep) journaled by one store call.
    let mut burst = fixture(&runtime, 10);
    group.throughput(Throughput::Elements(BURST));
    group.bench_function("emit_all_burst_100/10_connections", |b| {
        b.iter_custom(|iters| {
            let sink = burst.sink.clone();
            let workspace_id = burst.workspace_id.clone();
            burst.offered += iters * BURST * 10;
            runtime.block_on(async move {
                let started = Instant::now();
                for _ in 0..iters {
                    let emits = (0..BURST)
                        .map(|n| {
                            let payload = json!({"leaseId": "lease:bench", "n": n});
                            Emit::new(&workspace_id, "lease.expired", payload)
                        })
                        .collect();
                    let rows = sink.emit_all(emits).await.expect("emit_all");
                    std::hint::black_box(rows);
                }
                started.elapsed()
            })
        });
    });
    group.throughput(Throughput::Elements(1));
    // Baseline: one hop through tokio's blocking pool and back (what every emit paid before the
    // store's writer thread).
    group.bench_function("blocking_pool_hop", |b| {
        b.iter_custom(|iters| {
            runtime.block_on(async move {
                let started = Instant::now();
                for _ in 0..iters {
                    tokio::task::spawn_blocking(|| ()).await.expect("hop");
                }
                started.elapsed()
            })
        });
    });
    // Baseline: the journal append alone, called synchronously (no blocking-pool hop, no fan-out).
    let fixture = fixture(&runtime, 0);
    let store = fixture.sink_store;
    let mut n = 0u64;
    group.bench_function("append_event_direct", |b| {
        b.iter(|| {
            n += 1;
            let event = NewEvent {
                id: format!("event:bench-{n}"),
                workspace_id: fixture.workspace_id.clone(),
                timestamp: 0,
                generation: 1,
                lease_id: None,
                target_id: None,
                event_type: "lease.expired".into(),
                payload_version: 1,
                sensitivity: "none".into(),
                payload_json: json!({"leaseId": "lease:bench", "n": n}).to_string(),
                visibility: EventVisibility::EventRead,
            };
            std::hint::black_box(store.append_event(&event).expect("append"))
        });
    });
    group.finish();
}

/// Agents in `event_delivery_32_agents`.
const AGENTS: usize = 32;

/// CPU time of this whole process (every thread), for costs measured as CPU rather than wall
/// time.
fn process_cpu() -> Duration {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut now) };
    Duration::new(now.tv_sec as u64, now.tv_nsec as u32)
}

fn emit_32_agents(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let store = Store::open(StoreLimits::default()).expect("open store");
    let hub = Arc::new(Hub::default());
    let delivered = Arc::new(AtomicU64::new(0));
    let mut workspaces = Vec::new();
    for agent in 0..AGENTS {
        let workspace_id = format!("workspace:agent{agent}");
        let principal = add_workspace(
            &store,
            &hub,
            &format!("com.example.agent{agent}"),
            &workspace_id,
        );
        let (tx, mut rx) = mpsc::channel::<String>(NOTIFICATION_QUEUE);
        hub.subscribe(&principal, &format!("connection:agent{agent}"), tx);
        let delivered = delivered.clone();
        runtime.spawn(async move {
            while let Some(line) = rx.recv().await {
                std::hint::black_box(line);
                delivered.fetch_add(1, Ordering::Relaxed);
            }
        });
        workspaces.push(workspace_id);
    }
    let sink = EventSink::new(store, hub, Arc::new(Generations::default()));
    let mut group = c.benchmark_group("event_delivery_32_agents");
    group.throughput(Throughput::Elements(1));
    let mut offered = 0u64;
    group.bench_function("emit_cpu_per_event", |b| {
        b.iter_custom(|iters| {
            offered += iters;
            let (sink, workspaces) = (sink.clone(), workspaces.clone());
            runtime.block_on(async move {
                let started = process_cpu();
                let mut producers = tokio::task::JoinSet::new();
                for (agent, workspace_id) in workspaces.into_iter().enumerate() {
                    let sink = sink.clone();
                    producers.spawn(async move {
                        let mut n = agent as u64;
                        while n < iters {
                            let payload = json!({"commandId": "command:bench", "status": "completed", "method": "browser.click", "n": n});
                            let row = sink
                                .emit(Emit::new(&workspace_id, "command.status", payload))
                                .await
                                .expect("emit");
                            std::hint::black_box(row);
                            n += AGENTS as u64;
                        }
                    });
                }
                while let Some(done) = producers.join_next().await {
                    done.expect("producer");
                }
                process_cpu() - started
            })
        });
    });
    group.finish();
    runtime.block_on(async { tokio::time::sleep(Duration::from_millis(100)).await });
    eprintln!(
        "32 agents: {} of {offered} notifications delivered",
        delivered.load(Ordering::Relaxed)
    );
}

criterion_group!(benches, emit_throughput, emit_32_agents);
criterion_main!(benches);
