//! The page module's only I/O: runs a `PageScript` in an execution context
//! of a target session through `cdp::CdpClient` (the typed `Runtime.callFunctionOn`),
//! creates the Broker's isolated world, resolves a ref to a remote
//! object for CDP-level actions, lists the page's click-like listeners for `browser.observe`
//! (`run_observe`), and runs `browser.eval` in the page's main
//! world (`eval_in_main_world`, the one deliberate main-world path for code; the listing only
//! reads the main world's unforgeable `document`). It
//! decides nothing: which session, frame and context to use, deadlines and
//! error mapping belong to the caller.

use std::time::Duration;

use serde_json::Value;

use crate::cdp::dom::{GetEventListeners, ResolveNode};
use crate::cdp::page::{CreateIsolatedWorld, GetFrameTree};
use crate::cdp::runtime::{
    CallArgument, CallFunctionOn, Evaluate, EvaluationReply, ExceptionDetails, ReleaseObjectGroup,
};
use crate::cdp::{CdpClient, CdpError, SessionId};

use super::actions::{FRAME_POINT_HIT, FrameHit, RefTarget};
use super::annotate::{ANNOTATE_DRAW, ImageBox};
use super::error::PageError;
use super::eval::{
    EVAL_OBJECT_GROUP, EvalOutcome, EvalRequest, EvalValue, bound_exception, eval_serializer,
};
use super::observe::{Observe, PageObservation, listener_nodes};
use super::script::{INSTALL_MARKER, PageScript, Script, ScriptCall, library_installer};
use super::upload::FILE_INPUT_INDEX;

/// Name of the Broker's isolated world in every frame. The page cannot see
/// its globals; creating it again on the same frame returns the same
/// context (field notes §3).
pub const WORLD_NAME: &str = "browser-pilot";

/// Object group of remote objects made by `resolve_object`; release them
/// with `Runtime.releaseObjectGroup`.
pub const REF_OBJECT_GROUP: &str = "browser-pilot-refs";

/// A `Runtime.ExecutionContextId` (valid until its document goes away).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ExecutionContextId(i64);

impl ExecutionContextId {
    pub fn new(raw: i64) -> ExecutionContextId {
        ExecutionContextId(raw)
    }

    pub fn get(self) -> i64 {
        self.0
    }
}

/// A `Runtime.RemoteObjectId` of an element in the isolated world.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RemoteObjectId(String);

impl RemoteObjectId {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// The main frame's id from `Page.getFrameTree`.
pub async fn main_frame_id(
    client: &CdpClient,
    session: &SessionId,
    timeout: Duration,
) -> Result<String, PageError> {
    let tree = client.execute(session, &GetFrameTree {}, timeout).await?;
    Ok(tree.frame_tree.frame.id)
}

/// `Page.createIsolatedWorld {frameId, worldName: WORLD_NAME}`.
pub async fn create_isolated_world(
    client: &CdpClient,
    session: &SessionId,
    frame_id: &str,
    timeout: Duration,
) -> Result<ExecutionContextId, PageError> {
    let command = CreateIsolatedWorld {
        frame_id: frame_id.to_owned(),
        world_name: WORLD_NAME.to_owned(),
    };
    let world = client.execute(session, &command, timeout).await?;
    Ok(ExecutionContextId(world.execution_context_id))
}

/// Runs one page script in `context` and decodes its answer.
pub async fn run<S: PageScript>(
    client: &CdpClient,
    session: &SessionId,
    context: ExecutionContextId,
    script: &S,
    timeout: Duration,
) -> Result<S::Output, PageError> {
    let call = script.call()?;
    if call.script.writes_page() {
        client.note_page_write(call.script.entry());
    }
    let result = call_installed(client, session, context, &call, true, timeout).await?;
    match result.result.value.as_ref().and_then(Value::as_str) {
        Some(json) => script.parse(json),
        None => Err(PageError::UnexpectedShape {
            script: call.script.entry(),
            detail: "the script returned no JSON text".to_owned(),
        }),
    }
}

/// Object group of the listener targets `observe` hands to observe.js; released after the call.
const LISTENER_OBJECT_GROUP: &str = "browser-pilot-listeners";

/// Runs `browser.observe`'s script with the elements Chromium knows to have click-like
/// listeners (`observe::listener_nodes` picks them from `DOMDebugger.getEventListeners` of the
/// session's document, read through its main world), each resolved into `context` and passed
/// to the script as an argument, so listener-only controls are found (docs/cdp.md,
/// "Listener-only controls"). `listeners` is whether `context` is the world of the session's
/// root frame (the only document the listing reads); otherwise, or when the listing fails,
/// the Observation is what the script alone sees.
///
/// The world keeps the listing until its document changes (`bpListenerListing` in
/// common.js): the script is first called without one and uses the kept listing while no node
/// was added or removed and no attribute but inline style changed since; otherwise it answers
/// at once, before reading or disarming anything, that it needs a fresh listing, and is called
/// again with one. An unchanged document pays no listing at all.
pub async fn run_observe(
    client: &CdpClient,
    session: &SessionId,
    (context, listeners): (ExecutionContextId, bool),
    script: &Observe,
    timeout: Duration,
) -> Result<PageObservation, PageError> {
    let mut call = script.call()?;
    if listeners {
        call.argument["listing"] = Value::from("cached");
        let result =
            call_installed_with(client, session, context, (&call, &[]), true, timeout).await?;
        let answer = result.result.value.as_ref().and_then(Value::as_str);
        if answer != Some(NEEDS_LISTING) {
            return parse_observation(script, &call, answer);
        }
        call.argument["listing"] = Value::from("fresh");
    }
    let objects = match listeners {
        true => listener_targets(client, session, context, timeout)
            .await
            .unwrap_or_default(),
        false => Vec::new(),
    };
    let result =
        call_installed_with(client, session, context, (&call, &objects), true, timeout).await;
    if listeners {
        let release = ReleaseObjectGroup {
            object_group: LISTENER_OBJECT_GROUP.to_owned(),
        };
        // Best effort: the objects die with their document anyway.
        let _ = client.execute(session, &release, RELEASE_TIMEOUT).await;
    }
    let result = result?;
    parse_observation(
        script,
        &call,
        result.result.value.as_ref().and_then(Value::as_str),
    )
}

/// What observe.js answers when its kept listener listing is stale (exactly this JSON text).
const NEEDS_LISTING: &str = r#"{"needsListing":true}"#;

fn parse_observation(
    script: &Observe,
    call: &ScriptCall,
    answer: Option<&str>,
) -> Result<PageObservation, PageError> {
    match answer {
        Some(json) => script.parse(json),
        None => Err(PageError::UnexpectedShape {
            script: call.script.entry(),
            detail: "the script returned no JSON text".to_owned(),
        }),
    }
}

/// The elements of the session's document with click-like listeners, as remote objects of
/// `context` in `LISTENER_OBJECT_GROUP` (those that no longer resolve are left out). The
/// listing runs on the main world's `document` (an unforgeable property: the page cannot
/// substitute it) with `pierce: false`, which lists that world's listeners, the page's own:
/// from the isolated world it would list only the Broker's, and with `pierce: true` (all
/// worlds) Chromium 156 closed the tab's session after a few calls (docs/cdp.md). The nodes
/// are resolved all at once (pipelined on the session), not one round trip after another.
async fn listener_targets(
    client: &CdpClient,
    session: &SessionId,
    context: ExecutionContextId,
    timeout: Duration,
) -> Result<Vec<String>, PageError> {
    let document = Evaluate {
        expression: "document".to_owned(),
        context_id: None,
        return_by_value: false,
        await_promise: None,
        object_group: Some(LISTENER_OBJECT_GROUP.to_owned()),
        silent: Some(true),
    };
    let Some(document) = client
        .execute(session, &document, timeout)
        .await?
        .result
        .object_id
    else {
        return Ok(Vec::new());
    };
    let listing = GetEventListeners {
        object_id: document,
        depth: -1,
        pierce: false,
    };
    let listeners = client.execute(session, &listing, timeout).await?.listeners;
    let nodes = listener_nodes(&listeners);
    let mut resolving = tokio::task::JoinSet::new();
    for (index, node) in nodes.into_iter().enumerate() {
        let resolve = ResolveNode {
            backend_node_id: node,
            execution_context_id: Some(context.0),
            object_group: Some(LISTENER_OBJECT_GROUP.to_owned()),
        };
        let (client, session) = (client.clone(), session.clone());
        resolving.spawn(async move {
            let reply = client.execute(&session, &resolve, timeout).await;
            (index, reply.ok().and_then(|reply| reply.object.object_id))
        });
    }
    let mut objects = Vec::with_capacity(resolving.len());
    while let Some(joined) = resolving.join_next().await {
        // A node of another frame does not resolve: left out.
        if let Ok((index, Some(id))) = joined {
            objects.push((index, id));
        }
    }
    objects.sort_unstable_by_key(|(index, _)| *index);
    Ok(objects.into_iter().map(|(_, id)| id).collect())
}

/// Resolves a ref to a remote object in `context` (group
/// `REF_OBJECT_GROUP`), or `None` when the page no longer has it: unknown
/// observation, ref out of range, element detached or another document.
pub async fn resolve_object(
    client: &CdpClient,
    session: &SessionId,
    context: ExecutionContextId,
    target: &RefTarget,
    timeout: Duration,
) -> Result<Option<RemoteObjectId>, PageError> {
    let call = ScriptCall {
        script: Script::Resolve,
        argument: target.argument()?,
    };
    let result = call_installed(client, session, context, &call, false, timeout).await?;
    Ok(result.result.object_id.map(RemoteObjectId))
}

/// The file input `PickFileInput` remembered, as a remote object in `context` (group
/// `REF_OBJECT_GROUP`), or `None` when it left the document.
pub async fn picked_file_input(
    client: &CdpClient,
    session: &SessionId,
    context: ExecutionContextId,
    timeout: Duration,
) -> Result<Option<RemoteObjectId>, PageError> {
    let call = ScriptCall {
        script: Script::PickedFileInput,
        argument: Value::Object(Default::default()),
    };
    let result = call_installed(client, session, context, &call, false, timeout).await?;
    Ok(result.result.object_id.map(RemoteObjectId))
}

/// The index of the element `object_id` (resolved in the Broker's isolated world) among its
/// document's file inputs, or `None` when it is not one of them.
pub async fn file_input_index(
    client: &CdpClient,
    session: &SessionId,
    object_id: &str,
    timeout: Duration,
) -> Result<Option<u32>, PageError> {
    let command = CallFunctionOn {
        function_declaration: FILE_INPUT_INDEX.to_owned(),
        execution_context_id: None,
        object_id: Some(object_id.to_owned()),
        arguments: Vec::new(),
        return_by_value: true,
        await_promise: None,
        silent: true,
        object_group: None,
    };
    let result = client.execute(session, &command, timeout).await?;
    if let Some(details) = &result.exception_details {
        return Err(PageError::ScriptThrew {
            script: "fileInputIndex",
            text: exception_text(details),
        });
    }
    Ok(result
        .result
        .value
        .as_ref()
        .and_then(Value::as_i64)
        .and_then(|index| u32::try_from(index).ok()))
}

/// Draws `boxes` with their ref numbers onto the base64 image `image` (`ANNOTATE_DRAW`, on an
/// unattached canvas in `context`, which must be the Broker's isolated world) and returns the
/// annotated image as base64 of `mime`; `scale` is the image's pixels per CSS pixel (outline and
/// labels grow with it).
pub async fn draw_annotations(
    client: &CdpClient,
    session: &SessionId,
    context: ExecutionContextId,
    image: String,
    boxes: &[ImageBox],
    (mime, quality, scale): (&str, Option<u64>, f64),
    timeout: Duration,
) -> Result<String, PageError> {
    let value = CallArgument::value;
    let command = CallFunctionOn {
        function_declaration: ANNOTATE_DRAW.to_owned(),
        execution_context_id: Some(context.0),
        object_id: None,
        arguments: vec![
            value(Value::String(image)),
            value(serde_json::to_value(boxes).unwrap_or_default()),
            value(Value::String(mime.to_owned())),
            value(quality.map_or(Value::Null, Value::from)),
            value(Value::from(scale)),
        ],
        return_by_value: true,
        await_promise: Some(true),
        silent: true,
        object_group: None,
    };
    let result = client.execute(session, &command, timeout).await?;
    if let Some(details) = &result.exception_details {
        return Err(PageError::ScriptThrew {
            script: "annotateDraw",
            text: exception_text(details),
        });
    }
    match result.result.value {
        Some(Value::String(data)) if !data.is_empty() => Ok(data),
        _ => Err(PageError::UnexpectedShape {
            script: "annotateDraw",
            detail: "the drawing returned no image".to_owned(),
        }),
    }
}

/// Calls a script's stub; when the world has no library yet (a new
/// document, or one left by another Broker version), installs it and calls
/// the stub once more.
async fn call_installed(
    client: &CdpClient,
    session: &SessionId,
    context: ExecutionContextId,
    call: &ScriptCall,
    return_by_value: bool,
    timeout: Duration,
) -> Result<EvaluationReply, PageError> {
    call_installed_with(
        client,
        session,
        context,
        (call, &[]),
        return_by_value,
        timeout,
    )
    .await
}

/// `call_installed` with remote objects of `context` passed after the options.
async fn call_installed_with(
    client: &CdpClient,
    session: &SessionId,
    context: ExecutionContextId,
    (call, objects): (&ScriptCall, &[String]),
    return_by_value: bool,
    timeout: Duration,
) -> Result<EvaluationReply, PageError> {
    let with = (call, objects);
    let result = call_function(client, session, context, with, return_by_value, timeout).await?;
    if !asks_for_install(&result) {
        return Ok(result);
    }
    install_library(client, session, context, timeout).await?;
    let result = call_function(client, session, context, with, return_by_value, timeout).await?;
    match asks_for_install(&result) {
        true => Err(PageError::UnexpectedShape {
            script: call.script.entry(),
            detail: "the library did not install".to_owned(),
        }),
        false => Ok(result),
    }
}

/// Whether a stub answered that its world has no library.
fn asks_for_install(result: &EvaluationReply) -> bool {
    result.result.value.as_ref().and_then(Value::as_str) == Some(INSTALL_MARKER)
}

/// Installs the page-script library in `context` (idempotent). `run` does
/// this on demand; a caller may also do it eagerly right after creating
/// the world to take the compile cost off the first tool call.
pub async fn install_library(
    client: &CdpClient,
    session: &SessionId,
    context: ExecutionContextId,
    timeout: Duration,
) -> Result<(), PageError> {
    let command = CallFunctionOn {
        function_declaration: library_installer().to_owned(),
        execution_context_id: Some(context.0),
        object_id: None,
        arguments: Vec::new(),
        return_by_value: true,
        await_promise: None,
        silent: true,
        object_group: None,
    };
    let result = client.execute(session, &command, timeout).await?;
    match result.exception_details {
        Some(details) => Err(PageError::ScriptThrew {
            script: "install",
            text: exception_text(&details),
        }),
        None => Ok(()),
    }
}

/// Runs `FRAME_POINT_HIT` on a frame owner element (`object_id`, a remote object of the
/// Broker's isolated world of the owner's document) for the point `(x, y)` of the frame's own
/// viewport. `None` when the element answered nothing (its document went away).
pub async fn frame_point_hit(
    client: &CdpClient,
    session: &SessionId,
    object_id: &str,
    (x, y): (f64, f64),
    timeout: Duration,
) -> Result<Option<FrameHit>, PageError> {
    let command = CallFunctionOn {
        function_declaration: FRAME_POINT_HIT.to_owned(),
        execution_context_id: None,
        object_id: Some(object_id.to_owned()),
        arguments: vec![
            CallArgument::value(serde_json::json!(x)),
            CallArgument::value(serde_json::json!(y)),
        ],
        return_by_value: true,
        await_promise: None,
        silent: true,
        object_group: None,
    };
    let result = client.execute(session, &command, timeout).await?;
    if let Some(details) = &result.exception_details {
        return Err(PageError::ScriptThrew {
            script: "framePointHit",
            text: exception_text(details),
        });
    }
    match result
        .result
        .value
        .as_ref()
        .and_then(serde_json::Value::as_str)
    {
        Some(text) => {
            serde_json::from_str(text)
                .map(Some)
                .map_err(|error| PageError::UnexpectedShape {
                    script: "framePointHit",
                    detail: error.to_string(),
                })
        }
        None => Ok(None),
    }
}

async fn call_function(
    client: &CdpClient,
    session: &SessionId,
    context: ExecutionContextId,
    (call, objects): (&ScriptCall, &[String]),
    return_by_value: bool,
    timeout: Duration,
) -> Result<EvaluationReply, PageError> {
    let mut arguments = Vec::with_capacity(1 + objects.len());
    arguments.push(CallArgument::value(call.argument.clone()));
    arguments.extend(objects.iter().cloned().map(CallArgument::object));
    let command = CallFunctionOn {
        function_declaration: call.script.declaration().to_owned(),
        execution_context_id: Some(context.0),
        object_id: None,
        arguments,
        return_by_value,
        await_promise: Some(call.script.awaits()),
        silent: true,
        object_group: (!return_by_value).then(|| REF_OBJECT_GROUP.to_owned()),
    };
    let result = client.execute(session, &command, timeout).await?;
    match &result.exception_details {
        Some(details) => Err(PageError::ScriptThrew {
            script: call.script.entry(),
            text: exception_text(details),
        }),
        None => Ok(result),
    }
}

/// How long releasing the eval's object group may take; it is best effort.
const RELEASE_TIMEOUT: Duration = Duration::from_secs(2);

/// Runs `browser.eval` in the **main world** of `session`'s main frame, where the page
/// controls every global. Marks the call a page write first (the code may change anything), so
/// a failure after this point is the Command's `unknown_outcome`. The wrapper awaits the
/// result within `timeout` and boxes it; the box stays in the page as a remote object, and the
/// bounded serializer runs on it (`Runtime.callFunctionOn` on the handle): only its bounded
/// JSON text crosses. The object group is released afterwards.
pub async fn eval_in_main_world(
    client: &CdpClient,
    session: &SessionId,
    request: &EvalRequest,
    timeout: Duration,
) -> Result<EvalOutcome, PageError> {
    client.note_page_write("eval");
    let command = Evaluate {
        expression: request.wrapped(),
        context_id: None,
        return_by_value: false,
        await_promise: Some(true),
        object_group: Some(EVAL_OBJECT_GROUP.to_owned()),
        silent: Some(true),
    };
    let reply = client.execute(session, &command, timeout).await?;
    let outcome = match (&reply.exception_details, &reply.result.object_id) {
        (Some(details), _) => Ok(EvalOutcome::Threw {
            text: bound_exception(&thrown_text(details)),
        }),
        // The box is an object; anything else means the wrapper did not run as written.
        (None, None) => Ok(EvalOutcome::Value(EvalValue::unreadable())),
        (None, Some(object_id)) => {
            serialize_box(client, session, request, object_id, timeout).await
        }
    };
    let release = ReleaseObjectGroup {
        object_group: EVAL_OBJECT_GROUP.to_owned(),
    };
    if let Err(error) = client.execute(session, &release, RELEASE_TIMEOUT).await {
        tracing::debug!(%error, "eval object group not released");
    }
    outcome
}

/// Runs the bounded serializer on the boxed result (or boxed throw).
async fn serialize_box(
    client: &CdpClient,
    session: &SessionId,
    request: &EvalRequest,
    object_id: &str,
    timeout: Duration,
) -> Result<EvalOutcome, PageError> {
    let command = CallFunctionOn {
        function_declaration: eval_serializer().to_owned(),
        execution_context_id: None,
        object_id: Some(object_id.to_owned()),
        arguments: vec![CallArgument::value(request.serializer_options())],
        return_by_value: true,
        await_promise: Some(false),
        silent: true,
        object_group: None,
    };
    let reply = match client.execute(session, &command, timeout).await {
        Ok(reply) => reply,
        // The code ran and settled; Chromium refused to call into its box (the document went
        // away, e.g. the code navigated): the result is unreadable, the outcome is known.
        Err(CdpError::Remote { .. }) => return Ok(EvalOutcome::Value(EvalValue::unreadable())),
        Err(error) => return Err(error.into()),
    };
    Ok(
        match (reply.exception_details, reply.result.value.as_ref()) {
            (None, Some(Value::String(text))) => EvalOutcome::parse(text, request.max_chars),
            _ => EvalOutcome::Value(EvalValue::unreadable()),
        },
    )
}

/// The text of an exception the wrapper could not catch (a syntax error in the caller's
/// source): an `Error`'s description, a thrown string itself, else the exception summary.
fn thrown_text(details: &ExceptionDetails) -> String {
    let thrown = details.exception.as_ref();
    match (
        thrown.and_then(|e| e.description.as_deref()),
        thrown.and_then(|e| e.value.as_ref()),
    ) {
        (Some(description), _) => description.to_owned(),
        (None, Some(Value::String(text))) => text.clone(),
        (None, Some(other)) => other.to_string(),
        (None, None) => details.message().to_owned(),
    }
}

fn exception_text(details: &ExceptionDetails) -> String {
    details.message().chars().take(500).collect()
}
