//! The page module's only I/O: runs a `PageScript` in an execution context
//! of a target session through `cdp::CdpClient` (the typed `Runtime.callFunctionOn`),
//! creates the Broker's isolated world, resolves a ref to a remote
//! object for CDP-level actions, lists the page's click-like listeners for `browser.observe`
//! (`run_observe`), and runs `browser.eval` in the page's main
//! world (`eval_in_main_world`, the one deliberate main-world path for code; the listing only
//! reads the main world's unforgeable `document` and objects CDP resolves there). It
//! decides nothing: which session, frame and context to use, deadlines and
//! error mapping belong to the caller.

use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;

use crate::cdp::dom::{DescribeNode, EventListener, GetEventListeners, ResolveNode};
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
/// observed document and its open shadow roots, read through the page's main world), each
/// resolved into `context` and passed to the script as an argument, so listener-only controls
/// are found (docs/cdp.md, "Listener-only controls"), in any frame. `session_root` is whether
/// `context` is the world of the session's root frame (the main frame or an out-of-process
/// frame's), whose main-world `document` one `Runtime.evaluate` names; when the listing fails
/// the Observation is what the script alone sees.
///
/// The world keeps the listing until its document changes (`bpListenerListing` in
/// common.js): the script is first called without one and uses the kept listing while no node
/// was added and no attribute but inline style changed since, in the document or an open
/// shadow root; otherwise it answers at once, before reading or disarming anything, that it
/// needs a fresh listing (with how many open shadow roots to list), and is called again with
/// one. An unchanged document pays no listing at all.
pub async fn run_observe(
    client: &CdpClient,
    session: &SessionId,
    (context, session_root): (ExecutionContextId, bool),
    script: &Observe,
    timeout: Duration,
) -> Result<PageObservation, PageError> {
    let mut call = script.call()?;
    call.argument["listing"] = Value::from("cached");
    let result = call_installed_with(client, session, context, (&call, &[]), true, timeout).await?;
    let answer = result.result.value.as_ref().and_then(Value::as_str);
    let Some(needed) = answer.and_then(needs_listing) else {
        return parse_observation(script, &call, answer);
    };
    call.argument["listing"] = Value::from("fresh");
    let roots = ListingRoots {
        context,
        session_root,
        shadow_roots: needed.shadow_roots.min(MAX_LISTING_ROOTS),
    };
    let objects = listener_targets(client, session, roots, timeout)
        .await
        .unwrap_or_default();
    let result =
        call_installed_with(client, session, context, (&call, &objects), true, timeout).await;
    let release = ReleaseObjectGroup {
        object_group: LISTENER_OBJECT_GROUP.to_owned(),
    };
    // Best effort: the objects die with their document anyway.
    let _ = client.execute(session, &release, RELEASE_TIMEOUT).await;
    let result = result?;
    parse_observation(
        script,
        &call,
        result.result.value.as_ref().and_then(Value::as_str),
    )
}

/// What observe.js answers when its kept listener listing is stale: `{"needsListing":true,
/// "shadowRoots":N}`, N the open shadow roots it gathered for the new listing.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct NeedsListing {
    needs_listing: bool,
    #[serde(default)]
    shadow_roots: usize,
}

/// The open shadow roots listed at most (observe.js gathers no more: `BP_MAX_LISTING_ROOTS`).
const MAX_LISTING_ROOTS: usize = 200;

/// `Some` when `answer` is observe.js asking for a fresh listing (an Observation's JSON text
/// never starts this way).
fn needs_listing(answer: &str) -> Option<NeedsListing> {
    if !answer.starts_with(r#"{"needsListing":"#) {
        return None;
    }
    serde_json::from_str::<NeedsListing>(answer)
        .ok()
        .filter(|needed| needed.needs_listing)
}

/// The tree scopes one listing covers: the document of `context` and `shadow_roots` open shadow
/// roots, which observe.js hands out by index (`listingRoot`).
#[derive(Clone, Copy)]
struct ListingRoots {
    context: ExecutionContextId,
    session_root: bool,
    shadow_roots: usize,
}

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

/// The elements of the observed document and its open shadow roots with click-like listeners,
/// as remote objects of `roots.context` in `LISTENER_OBJECT_GROUP` (those that no longer
/// resolve are left out). Each tree scope is listed through its main-world object with
/// `pierce: false`, which lists that world's listeners, the page's own, of that scope only:
/// from the isolated world it would list only the Broker's, and with `pierce: true` (all worlds,
/// shadow roots, frames) Chromium 156 closed the tab's session after a few calls (docs/cdp.md).
/// The session root's document is the main world's `document` (an unforgeable property: the
/// page cannot substitute it); any other scope (a shadow root, the document of a frame that is
/// not its session's root) is handed out by observe.js in the isolated world, described for its
/// backend node id and resolved in the main world, so no page code runs. The scopes are listed
/// all at once, and so are the listed nodes resolved (pipelined on the session).
async fn listener_targets(
    client: &CdpClient,
    session: &SessionId,
    roots: ListingRoots,
    timeout: Duration,
) -> Result<Vec<String>, PageError> {
    let mut listing = tokio::task::JoinSet::new();
    for index in 0..=roots.shadow_roots {
        let (client, session) = (client.clone(), session.clone());
        listing.spawn(async move {
            let listeners = scope_listeners(&client, &session, roots, index, timeout).await;
            (index, listeners)
        });
    }
    let mut scopes = Vec::with_capacity(listing.len());
    while let Some(joined) = listing.join_next().await {
        match joined {
            Ok((index, Ok(listeners))) => scopes.push((index, listeners)),
            // The document's own listing failing fails the listing; a shadow root that went
            // away in between is left out.
            Ok((0, Err(error))) => return Err(error),
            Ok((_, Err(_))) | Err(_) => {}
        }
    }
    scopes.sort_unstable_by_key(|(index, _)| *index);
    let listeners: Vec<EventListener> = scopes
        .into_iter()
        .flat_map(|(_, listeners)| listeners)
        .collect();
    let nodes = listener_nodes(&listeners);
    let mut resolving = tokio::task::JoinSet::new();
    for (index, node) in nodes.into_iter().enumerate() {
        let resolve = ResolveNode {
            backend_node_id: node,
            execution_context_id: Some(roots.context.0),
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

/// The listeners of tree scope `index` of `roots` (0: the document), listed through its
/// main-world object; empty when the scope is gone.
async fn scope_listeners(
    client: &CdpClient,
    session: &SessionId,
    roots: ListingRoots,
    index: usize,
    timeout: Duration,
) -> Result<Vec<EventListener>, PageError> {
    let main_world = match (index, roots.session_root) {
        (0, true) => {
            let document = Evaluate {
                expression: "document".to_owned(),
                context_id: None,
                return_by_value: false,
                await_promise: None,
                object_group: Some(LISTENER_OBJECT_GROUP.to_owned()),
                silent: Some(true),
            };
            client
                .execute(session, &document, timeout)
                .await?
                .result
                .object_id
        }
        _ => main_world_scope(client, session, roots.context, index, timeout).await?,
    };
    let Some(object_id) = main_world else {
        return Ok(Vec::new());
    };
    let listing = GetEventListeners {
        object_id,
        depth: -1,
        pierce: false,
    };
    Ok(client.execute(session, &listing, timeout).await?.listeners)
}

/// Tree scope `index` of the listing observe.js prepared in `context` (`listingRoot`), as an
/// object of the page's main world: the isolated world's object, described for its backend node
/// id, resolved without a context (the frame's main world).
async fn main_world_scope(
    client: &CdpClient,
    session: &SessionId,
    context: ExecutionContextId,
    index: usize,
    timeout: Duration,
) -> Result<Option<String>, PageError> {
    let call = ScriptCall {
        script: Script::ListingRoot,
        argument: serde_json::json!({ "index": index }),
    };
    let command = CallFunctionOn {
        function_declaration: call.script.declaration().to_owned(),
        execution_context_id: Some(context.0),
        object_id: None,
        arguments: vec![CallArgument::value(call.argument)],
        return_by_value: false,
        await_promise: Some(false),
        silent: true,
        object_group: Some(LISTENER_OBJECT_GROUP.to_owned()),
    };
    let reply = client.execute(session, &command, timeout).await?;
    let Some(isolated) = reply
        .result
        .object_id
        .filter(|_| reply.exception_details.is_none())
    else {
        return Ok(None);
    };
    let describe = DescribeNode {
        object_id: isolated,
        depth: 0,
    };
    let node = client.execute(session, &describe, timeout).await?.node;
    let resolve = ResolveNode {
        backend_node_id: node.backend_node_id,
        execution_context_id: None,
        object_group: Some(LISTENER_OBJECT_GROUP.to_owned()),
    };
    Ok(client
        .execute(session, &resolve, timeout)
        .await?
        .object
        .object_id)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stale_listing_answer_says_how_many_shadow_roots_to_list() {
        let needed = needs_listing(r#"{"needsListing":true,"shadowRoots":3}"#).unwrap();
        assert_eq!(needed.shadow_roots, 3);
        assert_eq!(
            needs_listing(r#"{"needsListing":true}"#)
                .unwrap()
                .shadow_roots,
            0
        );
        // An Observation, or anything else, is not a request for a listing.
        assert!(needs_listing(r#"{"elements":[],"needsListing":true}"#).is_none());
        assert!(needs_listing(r#"{"needsListing":false,"shadowRoots":1}"#).is_none());
        assert!(needs_listing(r#"{"needsListing":tru"#).is_none());
    }
}
