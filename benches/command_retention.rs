//! Command record benchmarks: accepting and completing one Command (the two
//! store writes every `tools/call` makes) for a Principal that already keeps
//! 16, 1,024 (the count bound) or a full byte budget of results, so every
//! completion also prunes. The maintained per-Principal totals (migration
//! 0002) must keep the cost flat across the three. Owns nothing but the
//! measurement; all SQL stays in `store`.

use browser_pilot::store::{
    CommandStatus, CreateWorkspace, NewCommand, NewWorkspace, PrincipalKey, Store, StoreLimits,
};
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};

/// A click result with its closing Observation on a small page, about 6 KB.
fn result_json() -> String {
    let element = r#"{"ref":"e12","role":"checkbox","name":"Subscribe to the weekly letter","state":{"checked":true}},"#;
    format!(
        r#"{{"evidence":{{"status":"verified"}},"observation":{{"elements":[{}]}}}}"#,
        element.repeat(60).trim_end_matches(',')
    )
}

fn principal() -> PrincipalKey {
    PrincipalKey {
        client_id: "bench".to_owned(),
        instance_id: "bench".to_owned(),
    }
}

fn command(n: u64) -> NewCommand {
    NewCommand {
        id: format!("command:{n:016x}"),
        principal: principal(),
        workspace_id: Some("workspace:bench".to_owned()),
        connection_id: "connection:bench".to_owned(),
        method: "browser.click".to_owned(),
        generation: 1,
        idempotency_key: None,
        args_hash: [7; 32],
        accepted_at: 1_700_000_000_000,
        deadline_at: 1_700_000_030_000,
        mutating: true,
    }
}

/// Inserts and completes Command `n` with `result`.
fn run_one(store: &Store, n: u64, result: &str) {
    let new = command(n);
    store.insert_command(&new).expect("insert");
    store
        .complete_command(
            &new.id,
            CommandStatus::Completed,
            Some(result.to_owned()),
            None,
            1_700_000_000_000 + i64::try_from(n).expect("small"),
        )
        .expect("complete");
}

fn insert_and_complete(c: &mut Criterion) {
    let result = result_json();
    let mut group = c.benchmark_group("command_insert_and_complete");
    // (label, count bound, byte budget, Commands completed before measuring)
    let cases: [(&str, u32, u64, u64); 3] = [
        ("16_retained", 16, u64::MAX, 16),
        ("1024_retained", 1_024, u64::MAX, 1_024),
        ("byte_budget_full", 1_024, 2 * 1024 * 1024, 1_024),
    ];
    for (label, keep, bytes, warm) in cases {
        let store = Store::open(StoreLimits {
            max_terminal_commands_per_principal: keep,
            max_result_bytes_per_principal: bytes,
            ..StoreLimits::default()
        })
        .expect("open store");
        let created = store
            .create_workspace(&NewWorkspace {
                id: "workspace:bench".to_owned(),
                principal: principal(),
                browser_id: "browser:bench".to_owned(),
                client_key: None,
                options: Default::default(),
                now: 1,
            })
            .expect("workspace");
        assert!(matches!(created, CreateWorkspace::Created(_)));
        let mut n = 0;
        for _ in 0..warm {
            n += 1;
            run_one(&store, n, &result);
        }
        group.bench_function(BenchmarkId::from_parameter(label), |b| {
            b.iter(|| {
                n += 1;
                run_one(&store, n, &result);
            });
        });
    }
    group.finish();
}

criterion_group!(benches, insert_and_complete);
criterion_main!(benches);
