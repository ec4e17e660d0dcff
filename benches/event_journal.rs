//! Event journal benchmarks: (a) appending one event per transaction to a
//! Workspace whose journal is already full, so every append also drops the
//! oldest event; (b) polling 100 events from the middle of a full journal.
//! Targets: append >= 200,000 events/s, poll of 100 <= 50 us median.
//! Owns nothing but the measurement; all SQL stays in `store`.

use std::hint::black_box;

use browser_pilot::store::{
    ConnectionKind, EventPoll, NewConnection, NewEvent, NewWorkspace, PrincipalKey, Store,
    StoreLimits,
};
use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};

/// Events fetched per poll, a typical host page size.
const POLL_PAGE: u32 = 100;

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
    }
}

/// A Store with one Workspace whose journal holds exactly its bound.
fn full_journal() -> (Store, u64) {
    let limits = StoreLimits::default();
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
            let poll = store.poll_events("workspace:bench", black_box(cursor), POLL_PAGE);
            match poll.expect("poll") {
                EventPoll::Page { events, .. } => events,
                other => panic!("unexpected {other:?}"),
            }
        });
    });
    group.finish();
}

criterion_group!(
    benches,
    append_into_full_journal,
    poll_middle_of_full_journal
);
criterion_main!(benches);
