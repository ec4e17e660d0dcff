//! The Command pipeline behind `tools/call`, plus `commands/get` and `commands/cancel`.
//!
//! Order of checks: tool exists, negotiated capability, Lease ownership, argument schema, then
//! idempotency. A new Command is recorded `accepted`, becomes `dispatched` when the tool passes
//! its dispatch gate (just before it touches the browser), and ends `completed` (with a result
//! or a recorded error), `cancelled`, or `unknown_outcome`. Retries with the same
//! `idempotencyKey` or `commandId` never run the tool twice.
//!
//! Never replay a mutation: the tool sends its CDP calls through its gate's handle, which
//! records the first browser mutation; [`settle`] turns a mutating Command's failure after that
//! point into a non-retryable `unknown_outcome` naming what was sent. This file owns that rule,
//! not which CDP methods mutate (`tools::context`).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use ring::digest::{SHA256, digest};
use serde_json::{Map, Value, json};
use tokio::sync::watch;

use super::connection::{ConnectionContext, Session};
use super::methods::Reply;
use super::params::{CommandRef, Raw, ToolCall, needed};
use super::workspaces::explain_missing;
use crate::events::Emit;
use crate::protocol::errors::{ErrorCode, RemediationAction, RpcError};
use crate::protocol::ids::{IdKind, new_id};
use crate::store::{
    CommandRow, CommandStatus, ConnectionId, InsertCommand, LeaseId, NewCommand, StoreError,
    TargetRef, WorkspaceId,
};
use crate::tools::{self, CallScope, DispatchGate, MutationsSent, Scope, ScopeIds, ToolDef};
use crate::version::now_ms;

/// Default Command deadline when the call gives no `deadlineMs`.
pub const DEFAULT_DEADLINE_MS: u64 = 30_000;
/// Longest allowed `deadlineMs` (10 minutes: long enough for a slow page, short enough that a
/// forgotten Command does not pin a tab forever).
pub const MAX_DEADLINE_MS: u64 = 600_000;
/// Longest caller-supplied `commandId` / `idempotencyKey`.
const MAX_KEY_CHARS: usize = 256;

/// Cancellation signals of Commands executing in this Broker.
#[derive(Default)]
pub struct RunningCommands {
    by_id: Mutex<HashMap<String, watch::Sender<bool>>>,
}

impl RunningCommands {
    fn register(&self, id: &str) -> watch::Receiver<bool> {
        let (tx, rx) = watch::channel(false);
        self.by_id
            .lock()
            .expect("running lock")
            .insert(id.to_owned(), tx);
        rx
    }

    fn remove(&self, id: &str) {
        self.by_id.lock().expect("running lock").remove(id);
    }

    fn cancel(&self, id: &str) {
        if let Some(tx) = self.by_id.lock().expect("running lock").get(id) {
            let _ = tx.send(true);
        }
    }
}

/// Each tool's `tools/list` entry with its capability, serialized once: the manifest never
/// changes while the Broker runs, and building the entries from its schemas took about 2 ms
/// a call. Built at start-up on a thread of its own ([`warm_tools_list`]).
fn listing_entries() -> &'static [(&'static str, String)] {
    static ENTRIES: std::sync::OnceLock<Vec<(&'static str, String)>> = std::sync::OnceLock::new();
    ENTRIES.get_or_init(|| {
        tools::manifest()
            .iter()
            .map(|tool| (tool.capability, tool.to_json().to_string()))
            .collect()
    })
}

/// Builds the tool listing ahead of the first `tools/list`.
pub fn warm_tools_list() {
    listing_entries();
}

/// `tools/list`: the kept listing, filtered by the session's capabilities.
pub async fn list(_: &ConnectionContext, session: &Session, _: Raw) -> Result<Reply, RpcError> {
    Ok(Reply::Json(tools_list(session)))
}

/// The bridge's own request: every tool's `mutating` flag, nothing else (the bridge answers a
/// call lost with its Broker by it). Any Connection, initialized or not: a bridge asks as soon
/// as it connects.
pub async fn flags(_: &ConnectionContext, _: Raw) -> Result<Value, RpcError> {
    let tools: Map<String, Value> = tools::manifest()
        .iter()
        .map(|tool| (tool.name.to_owned(), Value::Bool(tool.mutating)))
        .collect();
    Ok(json!({"tools": tools}))
}

/// `tools/call`: accepted (recorded) in input order, then run beside the Connection's later
/// calls; a retry of a recorded Command is answered at once.
pub async fn call(
    context: &std::sync::Arc<ConnectionContext>,
    session: &Session,
    params: ToolCall,
) -> Result<Reply, RpcError> {
    let received = std::time::Instant::now();
    let acceptance = accept(context, session, params).await;
    tracing::debug!(
        us = received.elapsed().as_micros() as u64,
        "tools/call accepted"
    );
    match acceptance? {
        Acceptance::Answered(answer) => answer.map(Reply::Value),
        Acceptance::Accepted(accepted) => {
            let context = context.clone();
            Ok(Reply::Later(Box::pin(async move {
                let outcome = run(&context, *accepted).await;
                // Time inside the Broker from acceptance to the outcome, for profiling.
                tracing::debug!(
                    us = received.elapsed().as_micros() as u64,
                    "tools/call answered"
                );
                outcome
            })))
        }
    }
}

/// The `tools/list` result for the session's granted capabilities, serialized.
fn tools_list(session: &Session) -> String {
    let granted = &session.negotiated.granted;
    let entries: Vec<&str> = listing_entries()
        .iter()
        .filter(|(capability, _)| granted.iter().any(|g| g == capability))
        .map(|(_, entry)| entry.as_str())
        .collect();
    format!(r#"{{"tools":[{}]}}"#, entries.join(","))
}

/// A `tools/call` after the in-order acceptance phase.
pub enum Acceptance {
    /// Answered without running anything (a retry of a recorded Command).
    Answered(Result<Value, RpcError>),
    /// Recorded as `accepted`; run it with [`run`].
    Accepted(Box<Accepted>),
}

pub struct Accepted {
    def: &'static ToolDef,
    scope: CallScope,
    arguments: Map<String, Value>,
    cancelled: watch::Receiver<bool>,
}

/// The in-order part of `tools/call`: validation, the Command record and the tab-queue place.
/// The Connection runs this for each ordinary request in input order, then runs the accepted
/// Command concurrently, so a slow tool does not hold up the Connection.
async fn accept(
    context: &ConnectionContext,
    session: &Session,
    params: ToolCall,
) -> Result<Acceptance, RpcError> {
    let name = params.name.as_str();
    let def = tools::find(name).ok_or_else(|| {
        RpcError::new(ErrorCode::ToolNotFound, format!("no tool named {name:?}"))
            .with_context("name", json!(name))
    })?;
    session.require(def.capability)?;
    let broker = &context.broker;
    let ids = match def.scope() {
        Scope::Connection => ScopeIds::Connection,
        Scope::Workspace | Scope::Target => {
            let workspace_id = needed(params.workspace_id, "workspaceId")?;
            let lease_id = needed(params.lease_id, "leaseId")?;
            let (connection_id, ws, lease) = (
                ConnectionId::from(session.connection_id.clone()),
                WorkspaceId::from(workspace_id.clone()),
                LeaseId::from(lease_id.clone()),
            );
            if let Err(error) = broker
                .store
                .call_read(move |store| store.check_lease(&connection_id, &ws, &lease, now_ms()))
                .await
            {
                return Err(explain_missing(context, session, &workspace_id, error).await);
            }
            match def.scope() {
                Scope::Target => ScopeIds::Target {
                    workspace_id: workspace_id.into(),
                    lease_id: lease_id.into(),
                    target_id: needed(params.target_id, "targetId")?.into(),
                },
                _ => ScopeIds::Workspace {
                    workspace_id: workspace_id.into(),
                    lease_id: lease_id.into(),
                    target_id: params.target_id.map(TargetRef::from),
                },
            }
        }
    };
    let workspace_id = ids.workspace_id().map(String::from);
    let target_id = ids.target_id().map(String::from);
    let arguments = params.arguments.unwrap_or_default();
    if let Err(violation) = def.validate_arguments(&Value::Object(arguments.clone())) {
        return Err(
            RpcError::invalid_params(format!("{} {}", violation.path, violation.message))
                .with_context("path", json!(violation.path)),
        );
    }
    let command_id = match params.command_id {
        Some(id) if id.chars().count() <= MAX_KEY_CHARS => id,
        Some(_) => {
            return Err(RpcError::invalid_params(format!(
                "\"commandId\" is longer than {MAX_KEY_CHARS} characters"
            )));
        }
        None => new_id(IdKind::Command),
    };
    let idempotency_key = match params.idempotency_key {
        Some(key) if key.chars().count() <= MAX_KEY_CHARS => Some(key),
        Some(_) => {
            return Err(RpcError::invalid_params(format!(
                "\"idempotencyKey\" is longer than {MAX_KEY_CHARS} characters"
            )));
        }
        None => None,
    };
    let deadline_ms = match params.deadline_ms {
        None => DEFAULT_DEADLINE_MS,
        Some(ms) if (1..=MAX_DEADLINE_MS).contains(&ms) => ms,
        Some(_) => {
            return Err(RpcError::invalid_params(format!(
                "\"deadlineMs\" must be an integer from 1 through {MAX_DEADLINE_MS}"
            )));
        }
    };
    let accepted_at = now_ms();
    let new_command = NewCommand {
        id: command_id.clone(),
        principal: session.principal.clone(),
        workspace_id: workspace_id.clone(),
        connection_id: session.connection_id.clone(),
        method: def.name.to_owned(),
        generation: broker.events.generation_of(workspace_id.as_deref()),
        idempotency_key: idempotency_key.clone(),
        args_hash: arguments_hash(
            def.name,
            &arguments,
            workspace_id.as_deref(),
            target_id.as_deref(),
        ),
        accepted_at,
        deadline_at: accepted_at + deadline_ms as i64,
        mutating: def.mutating,
    };
    let inserted = broker.store.call(move |store| store.insert_command(&new_command)).await.map_err(|error| match error {
        StoreError::IdempotencyConflict => RpcError::new(
            ErrorCode::IdempotencyConflict,
            "this idempotencyKey or commandId was already used with different arguments",
        )
        .with_remediation(RemediationAction::UseNewKey, "Use a fresh idempotencyKey/commandId for a different call; reuse one only to retry the same call."),
        other => other.into(),
    })?;
    let row = match inserted {
        InsertCommand::Duplicate(row) => return Ok(Acceptance::Answered(replay(&row))),
        InsertCommand::Inserted(row) => row,
    };

    let scope = CallScope {
        principal: session.principal.clone(),
        capabilities: session.negotiated.granted.clone(),
        connection_id: session.connection_id.clone(),
        ids,
        command_id: row.id.clone(),
        deadline: tokio::time::Instant::now() + Duration::from_millis(deadline_ms),
        browser_preference: context.hello.browser_preference.clone(),
        gate: DispatchGate::new(
            broker.store.clone(),
            broker.events.clone(),
            row.id.clone(),
            (row.workspace_id.clone(), row.generation),
        ),
        ticket: std::sync::Mutex::new(None),
    };
    if let (Some(workspace_id), Some(target_id)) = (scope.ids.workspace_id(), scope.ids.target_id())
    {
        *scope.ticket.lock().expect("ticket lock") =
            broker.tools.browser.ticket(workspace_id, target_id);
    }
    let cancelled = broker.running.register(&row.id);
    Ok(Acceptance::Accepted(Box::new(Accepted {
        def,
        scope,
        arguments,
        cancelled,
    })))
}

/// Runs an accepted Command to its outcome and records it.
pub async fn run(context: &ConnectionContext, accepted: Accepted) -> Result<Value, RpcError> {
    let Accepted {
        def,
        scope,
        arguments,
        mut cancelled,
    } = accepted;
    let broker = &context.broker;
    let execution = tools::execute(&broker.tools, &scope, def, arguments);
    let outcome = tokio::select! {
        outcome = tokio::time::timeout_at(scope.deadline, execution) => match outcome {
            Ok(result) => Outcome::Finished(result),
            Err(_) => Outcome::DeadlinePassed,
        },
        _ = wait_cancelled(&mut cancelled, &scope.gate) => Outcome::CancelledBeforeDispatch,
    };
    broker.running.remove(&scope.command_id);
    finish(context, def, &scope, outcome).await
}

/// How a Command's execution ended, before the never-replay rule is applied.
enum Outcome {
    Finished(Result<Value, RpcError>),
    DeadlinePassed,
    CancelledBeforeDispatch,
}

/// Resolves when a cancel arrives for a Command that has not passed its dispatch gate.
/// After dispatch, cancellation is best effort: the Command runs to its end.
async fn wait_cancelled(cancelled: &mut watch::Receiver<bool>, gate: &DispatchGate) {
    loop {
        if cancelled.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
        if *cancelled.borrow() && !gate.passed() {
            return;
        }
    }
}

/// Errors that still say exactly what happened after a mutation was sent: the browser reported
/// the navigation failed, the keystrokes ran but the value differs, or the tool already judged
/// the outcome unknown. Every other failure of a mutating Command after that point (the
/// connection dropped, the janitor or the tab died, a CDP call timed out) leaves the outcome
/// unknown.
const SETTLED_AFTER_MUTATION: &[ErrorCode] = &[
    ErrorCode::NavigationFailed,
    ErrorCode::VerificationFailed,
    ErrorCode::UnknownOutcome,
    // `browser.eval` ran the code and it threw: a known outcome.
    ErrorCode::EvalException,
];

/// The never-replay rule: what a Command's record says about how it ended. `mutating` is the
/// tool's flag, `gate_passed` whether it was marked dispatched, `sent` the browser mutations it
/// sent. Once a mutating Command sent its first mutation, a failure whose error does not settle
/// the outcome becomes `unknown_outcome` (never retryable, `context.dispatched` says what was
/// sent, `context.cause` the original code); before that, and for non-mutating Commands, errors
/// keep their codes (retryable ones stay retryable).
fn settle(
    mutating: bool,
    gate_passed: bool,
    sent: Option<&MutationsSent>,
    outcome: Outcome,
) -> (CommandStatus, Option<Value>, Option<RpcError>) {
    let after_mutation = sent.filter(|_| mutating);
    match outcome {
        Outcome::Finished(Ok(result)) => (CommandStatus::Completed, Some(result), None),
        Outcome::Finished(Err(error)) if error.code == ErrorCode::Cancelled => {
            (CommandStatus::Cancelled, None, Some(error))
        }
        Outcome::Finished(Err(error)) => match after_mutation {
            Some(sent) if !SETTLED_AFTER_MUTATION.contains(&error.code) => (
                CommandStatus::UnknownOutcome,
                None,
                Some(unknown_after_mutation(sent, Some(&error))),
            ),
            _ if error.code == ErrorCode::UnknownOutcome => {
                let error = match sent {
                    Some(sent) => error.with_context("dispatched", sent.to_json()),
                    None => error,
                };
                (CommandStatus::UnknownOutcome, None, Some(error))
            }
            _ => (CommandStatus::Completed, None, Some(error)),
        },
        Outcome::CancelledBeforeDispatch => (
            CommandStatus::Cancelled,
            None,
            Some(RpcError::new(
                ErrorCode::Cancelled,
                "the Command was cancelled before it reached the browser",
            )),
        ),
        Outcome::DeadlinePassed => match (after_mutation, gate_passed) {
            (Some(sent), _) => (
                CommandStatus::UnknownOutcome,
                None,
                Some(unknown_after_mutation(sent, None)),
            ),
            (None, true) => (
                CommandStatus::Completed,
                None,
                Some(RpcError::new(
                    ErrorCode::DeadlineExceeded,
                    "the deadline passed before the Command finished",
                )),
            ),
            (None, false) => (
                CommandStatus::Cancelled,
                None,
                Some(RpcError::new(
                    ErrorCode::DeadlineExceeded,
                    "the deadline passed before the Command was dispatched; it never reached the browser",
                )),
            ),
        },
    }
}

/// The `unknown_outcome` error of a mutating Command that failed (`cause`) or ran out of time
/// (`None`) after it sent `sent`.
fn unknown_after_mutation(sent: &MutationsSent, cause: Option<&RpcError>) -> RpcError {
    let message = match cause {
        Some(cause) => format!(
            "the Command failed after it sent {} to the browser ({}); it may or may not have taken effect",
            sent.first, cause.message
        ),
        None => format!(
            "the deadline passed after the Command sent {} to the browser; it may or may not have taken effect",
            sent.first
        ),
    };
    let error = RpcError::new(ErrorCode::UnknownOutcome, message)
        .with_context("dispatched", sent.to_json())
        .with_remediation(
            RemediationAction::InspectState,
            "Observe the page before deciding what to do; the Command is never replayed automatically.",
        );
    match cause {
        Some(cause) => error.with_context("cause", json!(cause.code.as_str())),
        None => error.with_context("cause", json!(ErrorCode::DeadlineExceeded.as_str())),
    }
}

async fn finish(
    context: &ConnectionContext,
    def: &ToolDef,
    scope: &CallScope,
    outcome: Outcome,
) -> Result<Value, RpcError> {
    let broker = &context.broker;
    let sent = scope.gate.mutations_sent();
    let (mut status, mut result, mut error) =
        settle(def.mutating, scope.gate.passed(), sent.as_ref(), outcome);
    // A result that slipped its schema is a bug; after a mutation it leaves the outcome unknown
    // (settled like any failure after the first mutation), so mutating tools are checked in
    // every build. Debug builds check every tool; release builds spare the reading tools (a
    // complete Observation can be megabytes) the walk, as their slip changes no outcome.
    if (def.mutating || cfg!(debug_assertions))
        && let Some(value) = &result
        && let Err(violation) = tools::schema::validate(&def.output_schema, value, "result")
    {
        tracing::error!(
            tool = def.name,
            ?violation,
            "result violates the output schema"
        );
        let slip = RpcError::new(
            ErrorCode::InternalError,
            format!(
                "{} result violates its schema at {}: {}",
                def.name, violation.path, violation.message
            ),
        );
        let failed = Outcome::Finished(Err(slip));
        (status, result, error) = settle(def.mutating, true, sent.as_ref(), failed);
    }
    let error = error.map(|e| e.with_context("commandId", json!(scope.command_id)));
    let result_json = result.as_ref().map(Value::to_string);
    let error_json = error.as_ref().map(|e| e.to_json().to_string());
    let id = scope.command_id.clone();
    let (lease_id, target_id) = (
        scope.ids.lease_id().map(String::from),
        scope.ids.target_id().map(String::from),
    );
    // The completion and its `command.status` event are one unit of work on the store's writer.
    let (row, journaled) = broker
        .events
        .call_then_emit(move |store| {
            let row = store.complete_command(&id, status, result_json, error_json, now_ms())?;
            let emit = row.workspace_id.as_deref().map(|workspace_id| {
                let mut emit = Emit::new(
                    workspace_id,
                    "command.status",
                    json!({"commandId": row.id, "status": row.status.as_str(), "method": row.method}),
                );
                emit.lease_id = lease_id;
                emit.target_id = target_id;
                emit.generation = Some(row.generation);
                emit
            });
            Ok((row, emit))
        })
        .await?;
    if let Some(Err(error)) = journaled {
        tracing::debug!(%error, "command.status not journaled");
    }
    replay(&row)
}

/// The response for a recorded Command: its result, its recorded error, or (still running)
/// the Command alone.
fn replay(row: &CommandRow) -> Result<Value, RpcError> {
    if let Some(error_json) = &row.error_json {
        let error: Value = serde_json::from_str(error_json).unwrap_or(Value::Null);
        return Err(RpcError::from_json(&error).with_context("commandId", json!(row.id)));
    }
    match &row.result_json {
        Some(result_json) => {
            let result: Value = serde_json::from_str(result_json).unwrap_or(Value::Null);
            Ok(json!({"command": command_json(row), "result": result}))
        }
        None if row.status == CommandStatus::Cancelled => Err(RpcError::new(
            ErrorCode::Cancelled,
            "the Command was cancelled before it reached the browser",
        )
        .with_context("commandId", json!(row.id))),
        None => Ok(json!({"command": command_json(row)})),
    }
}

pub fn command_json(row: &CommandRow) -> Value {
    let mut command = json!({
        "id": row.id,
        "status": row.status.as_str(),
        "method": row.method,
        "browserConnectionGeneration": row.generation,
        "acceptedAt": row.accepted_at,
        "deadlineAt": row.deadline_at,
        "mutating": row.mutating,
        "cancellationRequested": row.cancellation_requested,
    });
    if let Some(key) = &row.idempotency_key {
        command["idempotencyKey"] = json!(key);
    }
    if let Some(workspace_id) = &row.workspace_id {
        command["workspaceId"] = json!(workspace_id);
    }
    if let Some(at) = row.dispatched_at {
        command["dispatchedAt"] = json!(at);
    }
    if let Some(at) = row.completed_at {
        command["completedAt"] = json!(at);
    }
    if row.result_dropped {
        command["resultDropped"] = json!(true);
    }
    command
}

/// SHA-256 of this Broker's random salt and the canonical call: serde_json maps are ordered by
/// key, so equal calls serialize to equal bytes whatever order the host wrote them in. The salt
/// (drawn once per Broker, like the in-memory store it compares within) keeps a stored hash from
/// confirming a guessed secret argument, such as a `browser.auth.set` password, in `debug sql`.
fn arguments_hash(
    name: &str,
    arguments: &Map<String, Value>,
    workspace_id: Option<&str>,
    target_id: Option<&str>,
) -> [u8; 32] {
    static SALT: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    let salt =
        SALT.get_or_init(|| crate::protocol::ids::new_id(crate::protocol::ids::IdKind::Broker));
    let canonical = json!({"salt": salt, "name": name, "arguments": arguments, "workspaceId": workspace_id, "targetId": target_id}).to_string();
    let hash = digest(&SHA256, canonical.as_bytes());
    let mut out = [0u8; 32];
    out.copy_from_slice(hash.as_ref());
    out
}

/// `commands/get`: authorized by Principal ownership, not by the original Lease.
pub async fn get(
    context: &ConnectionContext,
    session: &Session,
    params: CommandRef,
) -> Result<Value, RpcError> {
    let row = owned_command(context, session, params).await?;
    let mut response = json!({"command": command_json(&row)});
    if let Some(result) = &row.result_json {
        // The Principal owns the record, but this Connection may lack the capability the
        // tool needs (another Connection of the same client asked for `network.read` or
        // `page.eval`): status, times and error still answer, the result does not.
        match withheld_capability(session, &row.method) {
            Some(capability) => {
                response["context"] =
                    json!({"reason": "capability_withheld", "capability": capability});
            }
            None => response["result"] = serde_json::from_str(result).unwrap_or(Value::Null),
        }
    }
    if let Some(error) = &row.error_json {
        response["error"] = serde_json::from_str(error).unwrap_or(Value::Null);
    }
    Ok(response)
}

/// The capability a recorded Command's tool needs that this Connection was not granted, if
/// any: its result is then not this Connection's to read.
fn withheld_capability(session: &Session, method: &str) -> Option<&'static str> {
    let capability = tools::find(method)?.capability;
    match session.require(capability) {
        Ok(()) => None,
        Err(_) => Some(capability),
    }
}

/// `commands/cancel`: prevents dispatch while accepted; afterwards only records the request.
pub async fn cancel(
    context: &ConnectionContext,
    session: &Session,
    params: CommandRef,
) -> Result<Value, RpcError> {
    let row = owned_command(context, session, params).await?;
    let principal = session.principal.clone();
    let id = row.id.clone();
    let updated = context
        .broker
        .store
        .call(move |store| store.request_cancel(&principal, &id, now_ms()))
        .await?
        .ok_or_else(command_not_found)?;
    context.broker.running.cancel(&updated.id);
    Ok(json!({"command": command_json(&updated)}))
}

async fn owned_command(
    context: &ConnectionContext,
    session: &Session,
    params: CommandRef,
) -> Result<CommandRow, RpcError> {
    let CommandRef {
        command_id: id,
        workspace_id,
    } = params;
    let principal = session.principal.clone();
    let row = context
        .broker
        .store
        .call_read(move |store| store.get_command(&principal, &id))
        .await?;
    match row {
        Some(row) if workspace_id.is_none() || row.workspace_id == workspace_id => Ok(row),
        _ => Err(command_not_found()),
    }
}

fn command_not_found() -> RpcError {
    RpcError::new(
        ErrorCode::CommandNotFound,
        "no Command with this id for this client",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sent() -> MutationsSent {
        MutationsSent {
            first: "Input.dispatchMouseEvent".to_owned(),
            count: 2,
            first_at: 7,
        }
    }

    fn failed(code: ErrorCode) -> Outcome {
        Outcome::Finished(Err(RpcError::new(code, "the browser went away")))
    }

    /// `(status, error code, retryable)` of a settled outcome.
    fn check(
        mutating: bool,
        sent: Option<&MutationsSent>,
        outcome: Outcome,
        expect: (CommandStatus, Option<&str>, bool),
    ) {
        let (status, _, error) = settle(mutating, true, sent, outcome);
        let code = error.as_ref().map(|e| e.code.as_str());
        let retryable = error.as_ref().is_some_and(|e| e.code.retryable());
        assert_eq!((status, code, retryable), expect);
    }

    #[test]
    fn a_mutating_failure_after_the_first_mutation_is_unknown_and_never_retryable() {
        use CommandStatus::*;
        let after = Some(sent());
        let after = after.as_ref();
        for code in [
            ErrorCode::BrowserDisconnected,
            ErrorCode::DeadlineExceeded,
            ErrorCode::TargetNotFound,
            ErrorCode::InternalError,
            ErrorCode::ActionNotVerified,
        ] {
            let retryable = code.retryable();
            // mutating, before the first mutation: the code stays.
            check(
                true,
                None,
                failed(code),
                (Completed, Some(code.as_str()), retryable),
            );
            // mutating, after: unknown_outcome.
            check(
                true,
                after,
                failed(code),
                (UnknownOutcome, Some("unknown_outcome"), false),
            );
            // non-mutating, before and after (a non-mutating tool may send input, e.g. scroll).
            check(
                false,
                None,
                failed(code),
                (Completed, Some(code.as_str()), retryable),
            );
            check(
                false,
                after,
                failed(code),
                (Completed, Some(code.as_str()), retryable),
            );
        }
        // The deadline: the same rule.
        check(
            true,
            after,
            Outcome::DeadlinePassed,
            (UnknownOutcome, Some("unknown_outcome"), false),
        );
        check(
            true,
            None,
            Outcome::DeadlinePassed,
            (Completed, Some("deadline_exceeded"), true),
        );
        check(
            false,
            after,
            Outcome::DeadlinePassed,
            (Completed, Some("deadline_exceeded"), true),
        );
        // Before the gate the deadline cancels the Command: it never reached the browser.
        let (status, _, error) = settle(true, false, None, Outcome::DeadlinePassed);
        assert_eq!(status, Cancelled);
        assert_eq!(error.unwrap().code, ErrorCode::DeadlineExceeded);
    }

    #[test]
    fn results_and_settled_errors_are_kept_after_a_mutation() {
        use CommandStatus::*;
        let after = Some(sent());
        let after = after.as_ref();
        let (status, result, error) =
            settle(true, true, after, Outcome::Finished(Ok(json!({"ok": 1}))));
        assert_eq!(
            (status, result, error.is_none()),
            (Completed, Some(json!({"ok": 1})), true)
        );
        for code in [ErrorCode::NavigationFailed, ErrorCode::VerificationFailed] {
            check(
                true,
                after,
                failed(code),
                (Completed, Some(code.as_str()), false),
            );
        }
        check(
            true,
            after,
            failed(ErrorCode::UnknownOutcome),
            (UnknownOutcome, Some("unknown_outcome"), false),
        );
        check(
            true,
            None,
            failed(ErrorCode::Cancelled),
            (Cancelled, Some("cancelled"), false),
        );
    }

    #[test]
    fn the_unknown_outcome_says_what_was_dispatched_and_what_failed() {
        let (_, _, error) = settle(
            true,
            true,
            Some(&sent()),
            failed(ErrorCode::BrowserDisconnected),
        );
        let error = error.unwrap().to_json();
        let context = &error["data"]["context"];
        assert_eq!(context["cause"], "browser_disconnected");
        assert_eq!(context["dispatched"]["first"], "Input.dispatchMouseEvent");
        assert_eq!(context["dispatched"]["count"], 2);
        assert_eq!(error["data"]["retryable"], false);
        assert_eq!(error["data"]["remediation"]["action"], "inspect_state");
    }

    fn row(
        result_json: Option<&str>,
        error_json: Option<&str>,
        result_dropped: bool,
    ) -> CommandRow {
        CommandRow {
            id: "command:1".to_owned(),
            workspace_id: None,
            connection_id: "connection:1".to_owned(),
            method: "browser.click".to_owned(),
            generation: 1,
            idempotency_key: None,
            args_hash: [0; 32],
            status: CommandStatus::Completed,
            accepted_at: 1,
            deadline_at: 2,
            dispatched_at: Some(1),
            completed_at: Some(2),
            mutating: true,
            cancellation_requested: false,
            result_json: result_json.map(str::to_owned),
            error_json: error_json.map(str::to_owned),
            result_dropped,
        }
    }

    #[test]
    fn a_replay_says_when_the_result_was_dropped_and_keeps_errors() {
        let kept = replay(&row(Some(r#"{"ok":1}"#), None, false)).unwrap();
        assert_eq!(kept["result"]["ok"], 1);
        assert_eq!(kept["command"].get("resultDropped"), None);
        let dropped = replay(&row(None, None, true)).unwrap();
        assert_eq!(dropped.get("result"), None);
        assert_eq!(dropped["command"]["resultDropped"], true);
        assert_eq!(dropped["command"]["status"], "completed");
        let failed =
            r#"{"code":-32020,"message":"m","data":{"code":"unknown_outcome","retryable":false}}"#;
        let error = replay(&row(None, Some(failed), false))
            .unwrap_err()
            .to_json();
        assert_eq!(error["data"]["code"], "unknown_outcome");
    }
}
