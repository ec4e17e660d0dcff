//! Event journal benchmarks: (a) appending one event per transaction to a
//! Workspace whose journal is already full, so every append also drops the
//! oldest event; (b) polling 100 events from the middle of a full journal;
//! (c) the same at 1,000, 10,000 and 100,000 retained events, both called
//! synchronously and through the async store API (`Store::call` appends from
//! `PRODUCERS` concurrent tasks, so the writer thread group-commits them;
//! `Store::call_read` polls one at a time), to show the cost per event and
//! per poll does not grow with the journal.
//! Targets: one-event append >= 300,000 events/s, poll of 100 <= 30 us.
//! Owns nothing but the measurement; all SQL stays in `store`.

use std::hint::black_box;
use std::time::{Duration, Instant};

use browser_pilot::store::{
    ConnectionKind, EventPoll, EventVisibility, NewConnection, NewEvent, NewWorkspace,
    PrincipalKey, Store, StoreLimits,
};
use criterion::{BatchSize, BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use tokio::runtime::Runtime;

/// Events fetched per poll, a typical host page size.
const POLL_PAGE: u32 = 100;

/// Journal sizes (retained events) at which cost must stay flat.
const JOURNAL_SIZES: &[u32] = &[1_000, 10_000, 100_000];

/// Concurrent tasks appending through `Store::call`, as many Connections and
/// event producers would: enough in flight for the writer to batch.
const PRODUCERS: u64 = 64;

fn event(n: u64) -> NewEvent {
    NewEvent {
        id: format!("event:{n:016x}"),
        workspace_id: "workspace:bench".to_owned(),
        timestamp: 1_700_000_000_000,
        generation: 1,
        lease_id: Some("lease:bench".to_owned()),
        target_id: Some("target:bench".to_owned()),
        event_type: "network.request".to_owned(),
        payload_version: 1,
        sensitivity: "browser_data".to_owned(),
        payload_json: r#"{"requestId":"request:1","method":"GET","url":"https://example.com/app.js","status":200}"#
            .to_owned(),
        visibility: EventVisibility::NetworkRead,
    }
}

/// A Store with one Workspace whose journal holds exactly its bound.
fn full_journal() -> (Store, u64) {
    full_journal_of(StoreLimits::default())
}

/// A Store with one Workspace whose journal holds exactly `limits`' bound.
fn full_journal_of(limits: StoreLimits) -> (Store, u64) {
    let store = Store::open(limits).expect("open store");
    let principal = PrincipalKey {
        client_id: "bench".to_owned(),
        instance_id: "bench".to_owned(),
    };
    store
        .open_connection(&NewConnection {
            id: "connection:bench".to_owned(),
            principal: principal.clone(),
            kind: ConnectionKind::Embedded,
            protocol_minor: 1,
            opened_at: 0,
        })
        .expect("open connection");
    store
        .create_workspace(&NewWorkspace {
            id: "workspace:bench".to_owned(),
            principal,
            browser_id: "browser:bench".to_owned(),
            client_key: None,
            options: Default::default(),
            now: 0,
        })
        .expect("create workspace");
    let size = u64::from(limits.event_journal_size);
    let batch: Vec<NewEvent> = (1..=size).map(event).collect();
    store.append_events(&batch).expect("fill journal");
    (store, size)
}

fn append_into_full_journal(c: &mut Criterion) {
    let (store, mut n) = full_journal();
    let mut group = c.benchmark_group("event_journal");
    group.throughput(Throughput::Elements(1));
    // Building the NewEvent and freeing the returned row are the caller's
    // work, so they stay outside the timed section.
    group.bench_function("append_full_journal", |b| {
        b.iter_batched(
            || {
                n += 1;
                event(n)
            },
            |new| store.append_event(&new).expect("append"),
            BatchSize::SmallInput,
        );
    });
    group.finish();
}

fn poll_middle_of_full_journal(c: &mut Criterion) {
    let (store, size) = full_journal();
    let cursor = size / 2;
    let mut group = c.benchmark_group("event_journal");
    group.throughput(Throughput::Elements(u64::from(POLL_PAGE)));
    // Freeing the page is the caller's work (after serializing it), so the
    // drop stays outside the timed section.
    group.bench_function("poll_100_middle", |b| {
        b.iter_with_large_drop(|| {
            let poll = store.poll_events("workspace:bench", black_box(cursor), POLL_PAGE, true);
            match poll.expect("poll") {
                EventPoll::Page { events, .. } => events,
                other => panic!("unexpected {other:?}"),
            }
        });
    });
    group.finish();
}

fn runtime() -> Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

/// Appends `iters` events through `Store::call` from `PRODUCERS` tasks.
fn pipelined_appends(runtime: &Runtime, store: &Store, next: &mut u64, iters: u64) -> Duration {
    let first = *next;
    *next += iters;
    let store = store.clone();
    runtime.block_on(async move {
        let started = Instant::now();
        let mut producers = tokio::task::JoinSet::new();
        for producer in 0..PRODUCERS {
            let store = store.clone();
            producers.spawn(async move {
                let mut n = first + producer;
                while n < first + iters {
                    let new = event(n);
                    let row = store.call(move |store| store.append_event(&new)).await;
                    black_box(row.expect("append"));
                    n += PRODUCERS;
                }
            });
        }
        while let Some(done) = producers.join_next().await {
            done.expect("producer");
        }
        started.elapsed()
    })
}

fn journal_sizes(c: &mut Criterion) {
    let runtime = runtime();
    let mut group = c.benchmark_group("event_journal_sizes");
    for &size in JOURNAL_SIZES {
        let limits = StoreLimits {
            event_journal_size: size,
            ..StoreLimits::default()
        };
        let (store, mut n) = full_journal_of(limits);
        group.throughput(Throughput::Elements(1));
        group.bench_with_input(BenchmarkId::new("append", size), &size, |b, _| {
            b.iter_batched(
                || {
                    n += 1;
                    event(n)
                },
                |new| store.append_event(&new).expect("append"),
                BatchSize::SmallInput,
            );
        });
        group.bench_with_input(
            BenchmarkId::new("call_append_pipelined", size),
            &size,
            |b, _| b.iter_custom(|iters| pipelined_appends(&runtime, &store, &mut n, iters)),
        );
        let head = match store.poll_events("workspace:bench", i64::MAX.unsigned_abs(), 0, true) {
            Ok(EventPoll::Future { latest }) => latest,
            other => panic!("unexpected {other:?}"),
        };
        let cursor = head - u64::from(size) / 2;
        group.throughput(Throughput::Elements(u64::from(POLL_PAGE)));
        group.bench_with_input(BenchmarkId::new("poll_100", size), &size, |b, _| {
            b.iter_with_large_drop(|| {
                match store.poll_events("workspace:bench", black_box(cursor), POLL_PAGE, true) {
                    Ok(EventPoll::Page { events, .. }) => events,
                    other => panic!("unexpected {other:?}"),
                }
            });
        });
        group.bench_with_input(
            BenchmarkId::new("call_read_poll_100", size),
            &size,
            |b, _| {
                b.iter_custom(|iters| {
                    let store = store.clone();
                    runtime.block_on(async move {
                        let started = Instant::now();
                        for _ in 0..iters {
                            let poll = store
                                .call_read(move |store| {
                                    store.poll_events("workspace:bench", cursor, POLL_PAGE, true)
                                })
                                .await;
                            match poll {
                                Ok(EventPoll::Page { events, .. }) => black_box(events),
                                other => panic!("unexpected {other:?}"),
                            };
                        }
                        started.elapsed()
                    })
                });
            },
        );
    }
    group.finish();
}

criterion_group!(
    benches,
    append_into_full_journal,
    poll_middle_of_full_journal,
    journal_sizes
);
criterion_main!(benches);
