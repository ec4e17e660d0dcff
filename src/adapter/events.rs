//! Event recovery by cursor: poll, process, then acknowledge; rebuild after `cursor_expired`.
//!
//! Owns the host's last fully processed cursor of a Workspace, in memory only. `poll_events`
//! never advances it (a second poll before acknowledgement starts from the same cursor);
//! `acknowledge_events(next_cursor)` does, after the host processed every returned event;
//! `reset_event_cursor` takes `workspaces/get`'s cursor as the new baseline once the host has
//! rebuilt its tab and Observation state. Notifications never move the cursor.

use serde_json::{Value, json};

use super::workspace::Workspace;
use crate::protocol::errors::RpcError;
use crate::protocol::ids::parse_cursor;

/// Pages followed in one `poll_events` before returning what was read (the host processes and
/// acknowledges, then polls again): bounds the memory one poll can take.
const MAX_PAGES_PER_POLL: usize = 10;

/// Ordered events after the acknowledged cursor, and the cursor to acknowledge once they are
/// processed.
#[derive(Debug, Clone)]
pub struct EventBatch {
    pub events: Vec<Value>,
    pub next_cursor: String,
    /// More events remain past `next_cursor`.
    pub has_more: bool,
}

impl Workspace {
    /// The last acknowledged cursor.
    pub fn event_cursor(&self) -> String {
        self.cursor.lock().expect("cursor lock").clone()
    }

    /// Polls from the acknowledged cursor until `hasMore` is false (or a bounded number of
    /// pages). `cursor_expired` is returned as is: rebuild, then [`Workspace::reset_event_cursor`].
    pub async fn poll_events(&self, limit: u32) -> Result<EventBatch, RpcError> {
        self.check_open()?;
        let mut cursor = self.event_cursor();
        let mut events = Vec::new();
        for _ in 0..MAX_PAGES_PER_POLL {
            let page = self
                .session
                .request(
                    "events/poll",
                    json!({"workspaceId": self.id(), "cursor": cursor, "limit": limit}),
                )
                .await?;
            if let Some(items) = page["events"].as_array() {
                events.extend(items.iter().cloned());
            }
            if let Some(next) = page["nextCursor"].as_str() {
                cursor = next.to_owned();
            }
            if page["hasMore"] != json!(true) {
                return Ok(EventBatch {
                    events,
                    next_cursor: cursor,
                    has_more: false,
                });
            }
        }
        Ok(EventBatch {
            events,
            next_cursor: cursor,
            has_more: true,
        })
    }

    /// Records that every event up to `next_cursor` was processed.
    pub fn acknowledge_events(&self, next_cursor: &str) {
        let mut cursor = self.cursor.lock().expect("cursor lock");
        *cursor = advance(&cursor, next_cursor);
    }

    /// After `cursor_expired` and a rebuild: `workspaces/get`'s cursor is the new baseline.
    pub async fn reset_event_cursor(&self) -> Result<String, RpcError> {
        let current = self.get().await?;
        let baseline = current["eventCursor"]
            .as_str()
            .unwrap_or("cursor:0")
            .to_owned();
        *self.cursor.lock().expect("cursor lock") = baseline.clone();
        Ok(baseline)
    }
}

/// The acknowledged cursor after acknowledging `next`: never moves backwards (a late
/// acknowledgement of an older batch must not replay processed events), and an unreadable
/// cursor leaves it unchanged.
pub fn advance(current: &str, next: &str) -> String {
    match (parse_cursor(current), parse_cursor(next)) {
        (Some(at), Some(to)) if to > at => next.to_owned(),
        (None, Some(_)) => next.to_owned(),
        _ => current.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn acknowledgement_only_moves_forward() {
        let check = |current: &str, next: &str, expect: &str| {
            assert_eq!(advance(current, next), expect, "{current} + {next}");
        };
        check("cursor:3", "cursor:9", "cursor:9");
        check("cursor:9", "cursor:3", "cursor:9");
        check("cursor:9", "cursor:9", "cursor:9");
        check("cursor:9", "nonsense", "cursor:9");
        check("", "cursor:2", "cursor:2");
    }
}
