//! The per-Workspace event journal: append (assigning the dense sequence and
//! dropping events beyond `event_journal_size`) and cursor polling. Owns the
//! `events` table; it does not fan out notifications or parse cursors (that
//! is `events/` and the broker).
//!
//! One sequence orders a Workspace's whole journal, but each visibility class
//! (`EventVisibility`: events every `event.read` host sees, and network events
//! only `network.read` hosts see) keeps its own newest `event_journal_size`
//! events, counted by a dense per-class `ordinal`. So a burst of network
//! events never pushes out what a host without `network.read` may see, and a
//! cursor is expired for a poller only when an event of a class it sees,
//! after the cursor, is no longer retained. Old events of a class are
//! deleted in batches of `PRUNE_BATCH`; until then polls treat the surplus as
//! already gone, so each class shows exactly its newest `event_journal_size`
//! events (`workspaces.pruned_<class>` remembers the highest sequence deleted).
//!
//! The journal head is `max(sequence)`: the newest event is never dropped
//! (the journal size is at least 1), so no separate counter row has to be
//! rewritten on every append.

use rusqlite::{Connection, OptionalExtension as _};

use super::db::{Store, column_u32, column_u64, in_savepoint, to_sql_u64};
use super::error::StoreError;
use super::model::{EventPoll, EventRow, NewEvent};

/// Appends of a class between two deletions of its old events. A run of 64
/// rows sits on a few pages, so deleting it costs little more than deleting
/// one row; this removes most of the per-append delete cost while the surplus
/// stays below one percent of the default journal (at most
/// `event_journal_size + 63` rows of each class are stored).
pub const PRUNE_BATCH: i64 = 64;

/// Columns read by `event_from_row`, in order.
macro_rules! event_columns {
    () => {
        "sequence, event_id, timestamp, generation, lease_id, target_id, event_type,
         payload_version, sensitivity, payload_json"
    };
}

/// What a poll reads first: the Workspace's journal key and head, and per class (0, 1) the
/// highest sequence pruned and the newest ordinal.
struct JournalHead {
    workspace_key: i64,
    latest: i64,
    classes: [(i64, i64); 2],
}

/// Maps a row of `workspace_id`'s journal (which stores only its key).
fn event_from_row(row: &rusqlite::Row<'_>, workspace_id: &str) -> rusqlite::Result<EventRow> {
    Ok(EventRow {
        sequence: column_u64(row, 0)?,
        id: row.get(1)?,
        workspace_id: workspace_id.to_owned(),
        timestamp: row.get(2)?,
        generation: column_u64(row, 3)?,
        lease_id: row.get(4)?,
        target_id: row.get(5)?,
        event_type: row.get(6)?,
        payload_version: column_u32(row, 7)?,
        sensitivity: row.get(8)?,
        payload_json: row.get(9)?,
    })
}

impl Store {
    /// Journals one event with `sequence = head + 1` and drops what falls
    /// out of the newest `event_journal_size`, in one transaction.
    /// `WorkspaceNotFound` if the Workspace is not active.
    pub fn append_event(&self, event: &NewEvent) -> Result<EventRow, StoreError> {
        let journal_size = self.limits().event_journal_size;
        self.write(|transaction| append_in(transaction, event, journal_size))
    }

    /// Journals several events in one transaction, in order (they may target
    /// different Workspaces). Nothing is journaled if any Workspace is gone.
    pub fn append_events(&self, events: &[NewEvent]) -> Result<Vec<EventRow>, StoreError> {
        let journal_size = self.limits().event_journal_size;
        self.write(|transaction| {
            events
                .iter()
                .map(|event| append_in(transaction, event, journal_size))
                .collect()
        })
    }

    /// Journals a burst (a page load's events, a Lease sweep's announcements)
    /// in one transaction, each event in its own savepoint: one result per
    /// event, in order, and an event whose Workspace is gone fails alone.
    /// The outer error is for the transaction itself.
    pub fn append_each(
        &self,
        events: &[NewEvent],
    ) -> Result<Vec<Result<EventRow, StoreError>>, StoreError> {
        let journal_size = self.limits().event_journal_size;
        self.write(|transaction| {
            Ok(events
                .iter()
                .map(|event| {
                    in_savepoint(transaction, |transaction| {
                        append_in(transaction, event, journal_size)
                    })
                })
                .collect())
        })
    }

    /// Reads up to `limit` events after the cursor `after_sequence` that a
    /// poller sees (network events only when `sees_network`), from one
    /// snapshot. `Expired` if an event of a class it sees, after the cursor,
    /// was dropped; `Future` if the cursor is past the head. Hidden events are
    /// skipped: the next cursor moves past them.
    pub fn poll_events(
        &self,
        workspace_id: &str,
        after_sequence: u64,
        limit: u32,
        sees_network: bool,
    ) -> Result<EventPoll, StoreError> {
        let after = to_sql_u64(after_sequence, "event cursor")?;
        let journal_size = i64::from(self.limits().event_journal_size);
        self.read(|transaction| {
            let head: Option<JournalHead> = transaction
                .prepare_cached(
                    "SELECT w.workspace_key,
                            (SELECT max(sequence) FROM events WHERE workspace_key = w.workspace_key),
                            w.pruned_0,
                            (SELECT max(ordinal) FROM events
                              WHERE workspace_key = w.workspace_key AND class = 0),
                            w.pruned_1,
                            (SELECT max(ordinal) FROM events
                              WHERE workspace_key = w.workspace_key AND class = 1)
                     FROM workspaces AS w WHERE w.workspace_id = ?1",
                )?
                .query_row([workspace_id], |row| {
                    Ok(JournalHead {
                        workspace_key: row.get(0)?,
                        latest: row.get::<_, Option<i64>>(1)?.unwrap_or(0),
                        classes: [
                            (row.get(2)?, row.get::<_, Option<i64>>(3)?.unwrap_or(0)),
                            (row.get(4)?, row.get::<_, Option<i64>>(5)?.unwrap_or(0)),
                        ],
                    })
                })
                .optional()?;
            let Some(head) = head else {
                return Err(StoreError::WorkspaceNotFound);
            };
            let (workspace_key, latest) = (head.workspace_key, head.latest);
            let latest_sequence = latest.unsigned_abs();
            // The oldest cursor from which no event this poller sees is missing: per class it
            // sees, the sequence of its newest event beyond the budget (pruned, or surplus not
            // yet pruned and so already invisible).
            let mut oldest_valid = 0;
            for (class, (pruned, newest_ordinal)) in head.classes.into_iter().enumerate() {
                if class == 1 && !sees_network {
                    continue;
                }
                let beyond = newest_ordinal - journal_size;
                if beyond <= 0 {
                    continue;
                }
                let boundary: Option<i64> = transaction
                    .prepare_cached(
                        "SELECT sequence FROM events
                         WHERE workspace_key = ?1 AND class = ?2 AND ordinal = ?3",
                    )?
                    .query_row((workspace_key, class as i64, beyond), |row| row.get(0))
                    .optional()?;
                oldest_valid = oldest_valid.max(boundary.unwrap_or(pruned));
            }
            if after > latest {
                return Ok(EventPoll::Future {
                    latest: latest_sequence,
                });
            }
            if after < oldest_valid {
                return Ok(EventPoll::Expired {
                    earliest: oldest_valid.unsigned_abs(),
                    latest: latest_sequence,
                });
            }
            let events = match limit {
                0 => Vec::new(),
                _ => transaction
                    .prepare_cached(concat!(
                        "SELECT ",
                        event_columns!(),
                        " FROM events WHERE workspace_key = ?1 AND sequence > ?2
                           AND (class = 0 OR ?4)
                         ORDER BY sequence LIMIT ?3"
                    ))?
                    .query_map((workspace_key, after, limit, sees_network), |row| {
                        event_from_row(row, workspace_id)
                    })?
                    .collect::<Result<Vec<_>, _>>()?,
            };
            // A short page read everything up to the head, hidden events included.
            let next_sequence = match events.last() {
                Some(event) if events.len() == limit as usize => event.sequence,
                _ if limit == 0 => after_sequence,
                _ => latest_sequence,
            };
            Ok(EventPoll::Page {
                events,
                next_sequence,
                has_more: next_sequence < latest_sequence,
            })
        })
    }
}

fn append_in(
    transaction: &Connection,
    event: &NewEvent,
    journal_size: u32,
) -> Result<EventRow, StoreError> {
    let generation = to_sql_u64(event.generation, "event generation")?;
    let class = event.visibility.class();
    let head: Option<(i64, Option<i64>, Option<i64>)> = transaction
        .prepare_cached(
            "SELECT w.workspace_key,
                    (SELECT max(sequence) FROM events WHERE workspace_key = w.workspace_key),
                    (SELECT max(ordinal) FROM events
                      WHERE workspace_key = w.workspace_key AND class = ?2)
             FROM workspaces AS w WHERE w.workspace_id = ?1",
        )?
        .query_row((&event.workspace_id, class), |row| {
            Ok((row.get(0)?, row.get(1)?, row.get(2)?))
        })
        .optional()?;
    let (workspace_key, sequence, ordinal) = match head {
        Some((workspace_key, latest, ordinal)) => (
            workspace_key,
            latest.unwrap_or(0) + 1,
            ordinal.unwrap_or(0) + 1,
        ),
        None => return Err(StoreError::WorkspaceNotFound),
    };
    transaction
        .prepare_cached(
            "INSERT INTO events (workspace_key, sequence, event_id, timestamp, generation,
                                 lease_id, target_id, event_type, payload_version,
                                 sensitivity, payload_json, class, ordinal)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
        )?
        .execute((
            workspace_key,
            sequence,
            &event.id,
            event.timestamp,
            generation,
            &event.lease_id,
            &event.target_id,
            &event.event_type,
            event.payload_version,
            &event.sensitivity,
            &event.payload_json,
            class,
            ordinal,
        ))?;
    let horizon = ordinal - i64::from(journal_size);
    if horizon > 0 && ordinal % PRUNE_BATCH == 0 {
        prune_class(transaction, workspace_key, class, horizon)?;
    }
    Ok(EventRow {
        sequence: sequence.unsigned_abs(),
        id: event.id.clone(),
        workspace_id: event.workspace_id.clone(),
        timestamp: event.timestamp,
        generation: event.generation,
        lease_id: event.lease_id.clone(),
        target_id: event.target_id.clone(),
        event_type: event.event_type.clone(),
        payload_version: event.payload_version,
        sensitivity: event.sensitivity.clone(),
        payload_json: event.payload_json.clone(),
    })
}

/// Drops a class's events up to `horizon` (an ordinal) and records the highest
/// sequence dropped, which is where that class's valid cursors begin.
fn prune_class(
    transaction: &Connection,
    workspace_key: i64,
    class: i64,
    horizon: i64,
) -> Result<(), StoreError> {
    let dropped_through: Option<i64> = transaction
        .prepare_cached(
            "SELECT max(sequence) FROM events
             WHERE workspace_key = ?1 AND class = ?2 AND ordinal <= ?3",
        )?
        .query_row((workspace_key, class, horizon), |row| row.get(0))?;
    let Some(dropped_through) = dropped_through else {
        return Ok(());
    };
    transaction
        .prepare_cached(
            "DELETE FROM events WHERE workspace_key = ?1 AND class = ?2 AND ordinal <= ?3",
        )?
        .execute((workspace_key, class, horizon))?;
    let update = match class {
        0 => "UPDATE workspaces SET pruned_0 = max(pruned_0, ?2) WHERE workspace_key = ?1",
        _ => "UPDATE workspaces SET pruned_1 = max(pruned_1, ?2) WHERE workspace_key = ?1",
    };
    transaction
        .prepare_cached(update)?
        .execute((workspace_key, dropped_through))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::testing::{event, outcome, principal, store, store_with, workspace};
    use super::super::{EventPoll, EventVisibility, NewEvent, ReleaseReason, Store, StoreLimits};

    fn small_journal() -> Store {
        store_with(StoreLimits {
            event_journal_size: 5,
            ..StoreLimits::default()
        })
    }

    fn render(poll: EventPoll) -> String {
        match poll {
            EventPoll::Page {
                events,
                next_sequence,
                has_more,
            } => {
                let sequences: Vec<String> = events
                    .iter()
                    .map(|event| event.sequence.to_string())
                    .collect();
                let listed = match sequences.is_empty() {
                    true => "-".to_owned(),
                    false => sequences.join(","),
                };
                let more = match has_more {
                    true => "more",
                    false => "done",
                };
                format!("page {listed} next={next_sequence} {more}")
            }
            EventPoll::Expired { earliest, latest } => {
                format!("expired earliest={earliest} latest={latest}")
            }
            EventPoll::Future { latest } => format!("future latest={latest}"),
        }
    }

    fn check(store: &Store, workspace_id: &str, after: u64, limit: u32, expect: &str) {
        let actual = outcome(store.poll_events(workspace_id, after, limit, true), render);
        assert_eq!(actual, expect, "poll after {after} limit {limit}");
    }

    #[test]
    fn sequences_start_at_one_and_strictly_increase() {
        let store = small_journal();
        let owner = principal("a");
        workspace(&store, "workspace:1", &owner);
        workspace(&store, "workspace:2", &owner);
        let mut last = 0;
        for n in 1..=12 {
            let row = store.append_event(&event("workspace:1", n)).unwrap();
            assert_eq!(row.sequence, last + 1);
            last = row.sequence;
        }
        // Sequences are per Workspace.
        let other = store.append_event(&event("workspace:2", 1)).unwrap();
        assert_eq!(other.sequence, 1);
        let batch = store
            .append_events(&[
                event("workspace:1", 13),
                event("workspace:2", 2),
                event("workspace:1", 14),
            ])
            .unwrap();
        let sequences: Vec<u64> = batch.iter().map(|row| row.sequence).collect();
        assert_eq!(sequences, [13, 2, 14]);
    }

    #[test]
    fn journal_keeps_only_the_newest_events() {
        let store = small_journal();
        workspace(&store, "workspace:1", &principal("a"));
        let stored = || {
            let rows = store
                .query_readonly("SELECT min(sequence), max(sequence), count(*) FROM events")
                .unwrap();
            format!("{:?}", rows.rows)
        };
        for n in 1..=127 {
            store.append_event(&event("workspace:1", n)).unwrap();
        }
        // Pruned at 64 (keeping 60..=64), then the surplus grows to 63 rows.
        assert_eq!(stored(), "[[Integer(60), Integer(127), Integer(68)]]");
        check(
            &store,
            "workspace:1",
            121,
            10,
            "expired earliest=122 latest=127",
        );
        check(
            &store,
            "workspace:1",
            122,
            10,
            "page 123,124,125,126,127 next=127 done",
        );
        store.append_event(&event("workspace:1", 128)).unwrap();
        assert_eq!(stored(), "[[Integer(124), Integer(128), Integer(5)]]");
        check(
            &store,
            "workspace:1",
            122,
            10,
            "expired earliest=123 latest=128",
        );
    }

    #[test]
    fn poll_pages_expiry_and_future() {
        let store = small_journal();
        workspace(&store, "workspace:1", &principal("a"));
        for n in 1..=12 {
            store.append_event(&event("workspace:1", n)).unwrap();
        }
        // Retained: 8..=12, so the oldest valid cursor is 7.
        let cases = [
            (7, 2, "page 8,9 next=9 more"),
            (9, 2, "page 10,11 next=11 more"),
            (11, 2, "page 12 next=12 done"),
            (9, 100, "page 10,11,12 next=12 done"),
            (12, 100, "page - next=12 done"),
            (7, 0, "page - next=7 more"),
            (12, 0, "page - next=12 done"),
            (6, 100, "expired earliest=7 latest=12"),
            (0, 1, "expired earliest=7 latest=12"),
            (13, 1, "future latest=12"),
            (u64::MAX, 1, "ValueOutOfRange { what: \"event cursor\" }"),
        ];
        for (after, limit, expect) in cases {
            check(&store, "workspace:1", after, limit, expect);
        }
    }

    #[test]
    fn poll_of_a_fresh_workspace() {
        let store = store();
        workspace(&store, "workspace:1", &principal("a"));
        check(&store, "workspace:1", 0, 10, "page - next=0 done");
        check(&store, "workspace:1", 1, 10, "future latest=0");
        check(&store, "workspace:none", 0, 10, "WorkspaceNotFound");
    }

    #[test]
    fn appended_fields_round_trip() {
        let store = store();
        workspace(&store, "workspace:1", &principal("a"));
        let mut new = event("workspace:1", 1);
        new.lease_id = Some("lease:1".to_owned());
        new.generation = 9;
        let appended = store.append_event(&new).unwrap();
        let EventPoll::Page { events, .. } = store.poll_events("workspace:1", 0, 10, true).unwrap()
        else {
            panic!("expected a page");
        };
        assert_eq!(events, std::slice::from_ref(&appended));
        assert_eq!(
            (
                appended.id.as_str(),
                appended.lease_id.as_deref(),
                appended.generation
            ),
            ("event:1", Some("lease:1"), 9)
        );
        assert_eq!(appended.payload_json, "{\"n\":1}");
    }

    #[test]
    fn append_needs_an_active_workspace() {
        let store = store();
        let owner = principal("a");
        workspace(&store, "workspace:1", &owner);
        let missing = store.append_event(&event("workspace:none", 1));
        assert_eq!(
            outcome(missing, |row| row.sequence.to_string()),
            "WorkspaceNotFound"
        );
        // A batch is all or nothing.
        let batch = store.append_events(&[event("workspace:1", 1), event("workspace:none", 2)]);
        assert_eq!(
            outcome(batch, |rows| rows.len().to_string()),
            "WorkspaceNotFound"
        );
        check(&store, "workspace:1", 0, 10, "page - next=0 done");
        store
            .release_workspace(&owner, "workspace:1", 20, ReleaseReason::Released)
            .unwrap();
        let released = store.append_event(&event("workspace:1", 3));
        assert_eq!(
            outcome(released, |row| row.sequence.to_string()),
            "WorkspaceNotFound"
        );
    }

    #[test]
    fn each_visibility_class_keeps_its_own_budget() {
        let store = small_journal();
        workspace(&store, "workspace:1", &principal("a"));
        let network = |n| NewEvent {
            event_type: "network.response".to_owned(),
            visibility: EventVisibility::NetworkRead,
            ..event("workspace:1", n)
        };
        // Sequences 1..=3 are shared events; then 200 network events (pruned several times);
        // then one more shared event at 204.
        for n in 1..=3 {
            store.append_event(&event("workspace:1", n)).unwrap();
        }
        for n in 4..=203 {
            store.append_event(&network(n)).unwrap();
        }
        store.append_event(&event("workspace:1", 204)).unwrap();
        let poll = |after, sees_network| {
            outcome(
                store.poll_events("workspace:1", after, 100, sees_network),
                render,
            )
        };
        // Without network.read nothing it may see was lost: all four shared events, one
        // sequence order (so it sees 3 then 204), and the cursor ends at the head.
        assert_eq!(poll(0, false), "page 1,2,3,204 next=204 done");
        assert_eq!(poll(3, false), "page 204 next=204 done");
        // With network.read, the network class's budget (5) decides: 199..=203 are kept.
        assert_eq!(poll(0, true), "expired earliest=198 latest=204");
        assert_eq!(
            poll(198, true),
            "page 199,200,201,202,203,204 next=204 done"
        );
        // Each class stores at most its budget plus a prune batch.
        let stored = store
            .query_readonly("SELECT class, count(*) FROM events GROUP BY class ORDER BY class")
            .unwrap();
        assert_eq!(
            format!("{:?}", stored.rows),
            "[[Integer(0), Integer(4)], [Integer(1), Integer(13)]]"
        );
    }
}
