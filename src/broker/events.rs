//! `events/poll`: a page of a Workspace's journal after a cursor, written straight from the
//! journal's rows (`events::poll_page_json`); notifications themselves are `events/`'s.

use serde_json::json;

use super::connection::{ConnectionContext, Session};
use super::methods::Reply;
use super::params::EventPoll;
use super::workspaces::active_workspace;
use crate::protocol::errors::{ErrorCode, RemediationAction, RpcError};
use crate::protocol::ids::{format_cursor, parse_cursor};
use crate::store::EventPoll as Page;

/// Default and largest `events/poll` page.
pub const DEFAULT_POLL_LIMIT: u64 = 100;
pub const MAX_POLL_LIMIT: u64 = 1_000;

pub async fn poll(
    context: &ConnectionContext,
    session: &Session,
    params: EventPoll,
) -> Result<Reply, RpcError> {
    let after = parse_cursor(&params.cursor)
        .ok_or_else(|| RpcError::invalid_params("\"cursor\" must look like \"cursor:N\""))?;
    let limit = match params.limit {
        None => DEFAULT_POLL_LIMIT,
        Some(limit) if (1..=MAX_POLL_LIMIT).contains(&limit) => limit,
        Some(_) => {
            return Err(RpcError::invalid_params(format!(
                "\"limit\" must be an integer from 1 through {MAX_POLL_LIMIT}"
            )));
        }
    };
    let row = active_workspace(context, session, params.workspace_id).await?;
    let workspace_id = row.id;
    // Network events are journaled for everyone but delivered only with `network.read`; the
    // cursor still moves past them, and only events this Connection may see decide whether
    // its cursor expired.
    let hears_network = session
        .negotiated
        .granted
        .iter()
        .any(|c| c == "network.read");
    let poll = context
        .broker
        .store
        .call_read(move |store| {
            store.poll_events(&workspace_id, after, limit as u32, hears_network)
        })
        .await?;
    match poll {
        Page::Page { events, next_sequence, has_more } => crate::events::poll_page_json(
            &events,
            |row| hears_network || !crate::events::is_network_event(&row.event_type),
            &format_cursor(next_sequence),
            has_more,
        )
        .map(Reply::Json)
        .map_err(|_| RpcError::new(ErrorCode::InternalError, "the event page could not be written")),
        Page::Expired { earliest, latest } => Err(RpcError::new(ErrorCode::CursorExpired, "the cursor predates the retained journal")
            .with_context("earliestCursor", json!(format_cursor(earliest)))
            .with_context("latestCursor", json!(format_cursor(latest)))
            .with_remediation(RemediationAction::RebuildState, "Rebuild tab and Observation state, then call workspaces/get for a new baseline cursor.")),
        Page::Future { latest } => Err(RpcError::invalid_params("the cursor is ahead of the journal")
            .with_context("latestCursor", json!(format_cursor(latest)))),
    }
}
