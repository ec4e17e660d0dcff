//! Frame tools: `browser.frames.list` (the tab's frame tree, in-process and out-of-process
//! iframes alike) and `browser.frames.select` (which frame this Workspace's frame-scoped tools
//! run in), plus the piece the other tools need: the execution context of the selected frame
//! (`ControlledTab::frame_context`, called by `ControlledTab::page_context`). Where a click in a frame lands is
//! `pointer.rs`'s.
//!
//! Same-process frames are reached through the tab session (`Page.createIsolatedWorld
//! {frameId}`); an out-of-process iframe (OOPIF) through its own flattened session, which
//! Chromium auto-attached and the pump recorded in the tab's `FrameBook`. Agents only ever see
//! opaque `frame:` ids minted per Workspace; raw frame, target and session ids never leave this
//! file. It does not own the selection's lifetime on detach (the pump does) nor ref checks
//! (`ControlledTab::resolve_ref` compares the frame an Observation was taken in).

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};

use super::context::NoParams;
use super::context::{TargetScope, ToolEnv};
use super::error::ToolError;
use super::manifest::{Gate, Lane, ToolDef, object, open_object};
use super::tab::{ControlledTab, FrameSelection, PageContext, SCRIPT_TIMEOUT, TabCalls};
use crate::cdp::SessionId;
use crate::cdp::page::{FrameTree, GetFrameTree};
use crate::protocol::errors::{ErrorCode, RemediationAction, RpcError};

/// Frames listed at most; deeper or wider trees report `truncated`.
const MAX_LISTED_FRAMES: usize = 200;
/// Longest frame URL in a listing (query strings of ad frames can be huge).
const MAX_FRAME_URL_CHARS: usize = 2048;
/// Longest frame name in a listing.
const MAX_FRAME_NAME_CHARS: usize = 256;
/// How long `frames.list` waits for the pump to record an OOPIF session Chromium just attached
/// (the attach event and the call's own replies travel different queues).
const ATTACH_WAIT: Duration = Duration::from_secs(2);
/// Poll interval of that wait.
const ATTACH_POLL: Duration = Duration::from_millis(20);
/// Timeout of one frame-tree call.
const TREE_TIMEOUT: Duration = Duration::from_secs(10);

pub fn defs() -> Vec<ToolDef> {
    let frame = open_object(
        json!({
            "frameId": {"type": "string"},
            "parentFrameId": {"type": ["string", "null"]},
            "main": {"type": "boolean"},
            "url": {"type": "string", "x-browser-pilot-sensitivity": ["browser_data"]},
            "name": {"type": "string", "x-browser-pilot-sensitivity": ["browser_data"]},
            "crossOrigin": {"type": "boolean"},
            "outOfProcess": {"type": "boolean"},
            "selected": {"type": "boolean"},
        }),
        &[
            "frameId",
            "parentFrameId",
            "main",
            "url",
            "name",
            "crossOrigin",
            "outOfProcess",
            "selected",
        ],
    );
    vec![
        ToolDef {
            name: "browser.frames.list",
            description: "The tab's frame tree: the main frame and every child frame, same-origin, cross-origin and out-of-process alike, in document order. Each has an opaque frameId (valid for this Workspace and browser connection generation), parentFrameId, url, name, crossOrigin (origin differs from the main frame's), outOfProcess, and whether it is this Workspace's selected frame. `selectionDetached` is true when the selected frame went away (see watchdog.frame_detached).",
            capability: "observation.read",
            mutating: false,
            input_schema: object(json!({}), &[]),
            output_schema: open_object(
                json!({
                    "targetId": {"type": "string"},
                    "frames": {"type": "array", "maxItems": MAX_LISTED_FRAMES, "items": frame.clone()},
                    "selectedFrameId": {"type": ["string", "null"]},
                    "selectionDetached": {"type": "boolean"},
                    "truncated": {"type": "boolean"},
                }),
                &[
                    "targetId",
                    "frames",
                    "selectedFrameId",
                    "selectionDetached",
                    "truncated",
                ],
            ),
            sensitivity_input: &[],
            sensitivity_output: &["browser_data"],
            lane: Lane::Ordinary,
            gate: Gate::InTool,
            handler: handler!(Target: list),
        },
        ToolDef {
            name: "browser.frames.select",
            description: "Select the frame (`frameId` from browser.frames.list, or `main: true`) that this Workspace's observe, read, search, elements.find, click, type, press, keyboard, scroll and dropdown calls on this tab run in. Refs of Observations taken in another frame are then rejected (stale_ref, reason frame_changed). Resets the authentication-hint baseline.",
            capability: "observation.read",
            mutating: false,
            input_schema: object(
                json!({
                    "frameId": {"type": "string", "minLength": 1, "maxLength": 128, "description": "Frame id from browser.frames.list; or give main."},
                    "main": {"const": true, "description": "true selects the tab's main frame; or give frameId."},
                }),
                &[],
            ),
            output_schema: open_object(
                json!({"targetId": {"type": "string"}, "frame": frame}),
                &["targetId", "frame"],
            ),
            sensitivity_input: &[],
            sensitivity_output: &["browser_data"],
            lane: Lane::Ordinary,
            gate: Gate::InTool,
            handler: handler!(Target: select),
        },
    ]
}

/// One frame of the tab as CDP describes it (raw ids; never serialized).
#[derive(Debug, Clone, PartialEq)]
struct FrameNode {
    raw: String,
    parent: Option<String>,
    url: String,
    name: String,
    origin: String,
    /// The session that hosts the frame's document.
    session: SessionId,
    /// Hosted in an OOPIF session rather than the tab session.
    out_of_process: bool,
}

/// Flattens a `Page.getFrameTree` result (pre-order).
fn flatten_tree(tree: &FrameTree, session: &SessionId, out_of_process: bool) -> Vec<FrameNode> {
    tree.frames()
        .into_iter()
        .map(|frame| FrameNode {
            raw: frame.id.clone(),
            parent: frame.parent_id.clone(),
            url: format!(
                "{}{}",
                frame.url,
                frame.url_fragment.as_deref().unwrap_or("")
            ),
            name: frame.name.clone().unwrap_or_default(),
            origin: frame.security_origin.clone(),
            session: session.clone(),
            out_of_process,
        })
        .collect()
}

async fn frame_tree(
    calls: &TabCalls,
    session: &SessionId,
    out_of_process: bool,
) -> Result<Vec<FrameNode>, crate::cdp::CdpError> {
    let reply = calls
        .execute(session, &GetFrameTree {}, TREE_TIMEOUT)
        .await?;
    Ok(flatten_tree(&reply.frame_tree, session, out_of_process))
}

/// Every frame of the tab: the tab session's tree (main frame first), then each OOPIF
/// session's tree. An OOPIF session that just went away is skipped.
async fn frame_forest(
    tab: &ControlledTab,
    tab_session: &SessionId,
) -> Result<Vec<FrameNode>, ToolError> {
    let mut nodes = frame_tree(tab.calls(), tab_session, false).await?;
    let children = tab.frames().child_sessions();
    for (_, child) in children {
        match frame_tree(tab.calls(), &child, true).await {
            Ok(tree) => {
                // A frame is listed once, from the session that hosts its document.
                let hosted: HashSet<&str> = tree.iter().map(|n| n.raw.as_str()).collect();
                nodes.retain(|n| !hosted.contains(n.raw.as_str()));
                nodes.extend(tree);
            }
            Err(error) => tracing::debug!(%error, "an out-of-process frame went away mid-list"),
        }
    }
    Ok(nodes)
}

/// OOPIFs of this tab that Chromium reports but whose session the pump has not recorded yet:
/// iframe targets whose parent frame is one of ours but which are not in the forest.
async fn unrecorded_oopifs(calls: &TabCalls, nodes: &[FrameNode]) -> Result<usize, ToolError> {
    let targets = calls.get_targets(TREE_TIMEOUT).await?;
    let known: HashSet<&str> = nodes.iter().map(|n| n.raw.as_str()).collect();
    let missing = targets
        .iter()
        .filter(|info| info.target_type == "iframe")
        .filter(|info| {
            let parent = info.parent_frame_id.as_deref().unwrap_or_default();
            !known.contains(info.target_id.as_str()) && known.contains(parent)
        })
        .count();
    Ok(missing)
}

/// The forest, after giving the pump a moment to record OOPIFs Chromium attached just now.
async fn settled_forest(
    tab: &ControlledTab,
    tab_session: &SessionId,
) -> Result<Vec<FrameNode>, ToolError> {
    let until = tokio::time::Instant::now() + ATTACH_WAIT;
    loop {
        let nodes = frame_forest(tab, tab_session).await?;
        if tokio::time::Instant::now() >= until
            || unrecorded_oopifs(tab.calls(), &nodes).await? == 0
        {
            return Ok(order_frames(nodes));
        }
        tokio::time::sleep(ATTACH_POLL).await;
    }
}

/// Document order: the main frame, then each frame followed by its descendants. Frames whose
/// parent is not in the forest (a race with a removal) come last.
fn order_frames(nodes: Vec<FrameNode>) -> Vec<FrameNode> {
    let mut by_parent: HashMap<Option<String>, Vec<usize>> = HashMap::new();
    let present: HashSet<String> = nodes.iter().map(|n| n.raw.clone()).collect();
    for (index, node) in nodes.iter().enumerate() {
        let parent = node.parent.clone().filter(|p| present.contains(p));
        by_parent.entry(parent).or_default().push(index);
    }
    let mut ordered = Vec::with_capacity(nodes.len());
    let mut seen = vec![false; nodes.len()];
    let mut stack: Vec<usize> = by_parent
        .get(&None)
        .map(|roots| roots.iter().rev().copied().collect())
        .unwrap_or_default();
    while let Some(index) = stack.pop() {
        if std::mem::replace(&mut seen[index], true) {
            continue;
        }
        ordered.push(index);
        if let Some(children) = by_parent.get(&Some(nodes[index].raw.clone())) {
            stack.extend(children.iter().rev().copied());
        }
    }
    ordered.extend((0..nodes.len()).filter(|i| !seen[*i]));
    let mut slots: Vec<Option<FrameNode>> = nodes.into_iter().map(Some).collect();
    ordered
        .into_iter()
        .filter_map(|index| slots[index].take())
        .collect()
}

/// The origin a frame's content runs with: opaque or empty origins (about:blank, srcdoc)
/// inherit their parent's for the cross-origin comparison.
fn effective_origins(nodes: &[FrameNode]) -> HashMap<String, String> {
    let mut origins: HashMap<String, String> = HashMap::new();
    for node in nodes {
        let own = node.origin.as_str();
        let inherited = matches!(own, "" | "://" | "null");
        let origin = match (inherited, &node.parent) {
            (true, Some(parent)) => origins.get(parent).cloned().unwrap_or_default(),
            _ => own.to_owned(),
        };
        origins.insert(node.raw.clone(), origin);
    }
    origins
}

/// Raw ids of a frame's ancestors, nearest first.
fn ancestors(nodes: &[FrameNode], raw: &str) -> Vec<String> {
    let parents: HashMap<&str, Option<&str>> = nodes
        .iter()
        .map(|n| (n.raw.as_str(), n.parent.as_deref()))
        .collect();
    let mut chain = Vec::new();
    let mut current = parents.get(raw).copied().flatten();
    while let Some(parent) = current {
        if chain.iter().any(|c| c == parent) || chain.len() > nodes.len() {
            break;
        }
        chain.push(parent.to_owned());
        current = parents.get(parent).copied().flatten();
    }
    chain
}

/// `text` cut to `max` characters, ending with the truncation marker when cut.
fn bounded(text: &str, max: usize) -> String {
    super::context::bound(text, max)
}

/// One frame as the agent sees it.
fn frame_json(
    tab: &ControlledTab,
    workspace_id: &str,
    node: &FrameNode,
    main_origin: &str,
    origins: &HashMap<String, String>,
    selected: bool,
) -> Value {
    let mut frames = tab.frames();
    let parent = node
        .parent
        .as_deref()
        .map(|parent| frames.opaque_id(workspace_id, parent));
    let origin = origins.get(&node.raw).map_or("", String::as_str);
    json!({
        "frameId": frames.opaque_id(workspace_id, &node.raw),
        "parentFrameId": parent,
        "main": node.parent.is_none(),
        "url": bounded(&node.url, MAX_FRAME_URL_CHARS),
        "name": bounded(&node.name, MAX_FRAME_NAME_CHARS),
        "crossOrigin": origin != main_origin,
        "outOfProcess": node.out_of_process,
        "selected": selected,
    })
}

/// The one `frame_not_found` error: the frame is gone or the id is not this Workspace's.
pub fn frame_not_found(frame_id: &str, reason: &str) -> RpcError {
    let message = match reason {
        "frame_detached" => "the selected frame is gone (removed, or its parent navigated)",
        _ => {
            "no such frame for this Workspace on this tab (never listed, or from an older connection generation)"
        }
    };
    RpcError::new(ErrorCode::FrameNotFound, message)
        .with_context("frameId", json!(frame_id))
        .with_context("reason", json!(reason))
        .with_remediation(
            RemediationAction::ListFrames,
            "Call browser.frames.list, select a frame (or {main: true}) with browser.frames.select, and observe again.",
        )
}

async fn list(
    env: &ToolEnv,
    scope: &TargetScope<'_>,
    _params: NoParams,
) -> Result<Value, ToolError> {
    let mut tab = ControlledTab::acquire(env, scope).await?;
    let workspace_id = scope.workspace_id.to_owned();
    let session = tab.session().await?;
    let selection = tab.frame_selection();
    let nodes = settled_forest(&tab, &session).await?;
    let origins = effective_origins(&nodes);
    let main_origin = nodes
        .first()
        .and_then(|main| origins.get(&main.raw))
        .cloned()
        .unwrap_or_default();
    let selected_raw = match &selection {
        None => nodes.first().map(|main| main.raw.clone()),
        Some(FrameSelection::Frame { raw, .. }) => Some(raw.clone()),
        Some(FrameSelection::Detached { .. }) => None,
    };
    let frames: Vec<Value> = nodes
        .iter()
        .take(MAX_LISTED_FRAMES)
        .map(|node| {
            let selected = selected_raw.as_deref() == Some(node.raw.as_str());
            frame_json(&tab, &workspace_id, node, &main_origin, &origins, selected)
        })
        .collect();
    let selected_frame_id = selected_raw.map(|raw| tab.frames().opaque_id(&workspace_id, &raw));
    Ok(json!({
        "targetId": scope.target_id,
        "frames": frames,
        "selectedFrameId": selected_frame_id,
        "selectionDetached": matches!(selection, Some(FrameSelection::Detached { .. })),
        "truncated": nodes.len() > MAX_LISTED_FRAMES,
    }))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SelectParams {
    frame_id: Option<String>,
    main: Option<bool>,
}

async fn select(
    env: &ToolEnv,
    scope: &TargetScope<'_>,
    params: SelectParams,
) -> Result<Value, ToolError> {
    let frame_id = params.frame_id.as_deref();
    let main = params.main == Some(true);
    if frame_id.is_some() == main {
        return Err(ToolError::from(
            RpcError::invalid_params("give exactly one of \"frameId\" or \"main\": true")
                .with_context("path", json!("arguments.frameId")),
        ));
    }
    let mut tab = ControlledTab::acquire(env, scope).await?;
    let workspace_id = scope.workspace_id.to_owned();
    let session = tab.session().await?;
    // Drops Observations of a frame that detached meanwhile.
    tab.frame_selection();
    let nodes = settled_forest(&tab, &session).await?;
    let raw = match frame_id {
        Some(opaque) => tab
            .frames()
            .resolve(&workspace_id, opaque)
            .ok_or_else(|| frame_not_found(opaque, "unknown_frame"))?,
        None => nodes
            .first()
            .map(|main| main.raw.clone())
            .unwrap_or_default(),
    };
    let Some(node) = nodes.iter().find(|n| n.raw == raw) else {
        return Err(ToolError::from(frame_not_found(
            frame_id.unwrap_or_default(),
            "frame_detached",
        )));
    };
    // The main frame is "no selection"; a child frame remembers its ancestors.
    let chosen = node
        .parent
        .as_ref()
        .map(|_| (raw.as_str(), ancestors(&nodes, &raw)));
    tab.frames().select(&workspace_id, chosen);
    // A selected-frame change resets the authentication transition baseline (contract).
    tab.forget_auth_surface();
    let origins = effective_origins(&nodes);
    let main_origin = nodes
        .first()
        .and_then(|main| origins.get(&main.raw))
        .cloned()
        .unwrap_or_default();
    let frame = frame_json(&tab, &workspace_id, node, &main_origin, &origins, true);
    Ok(json!({"targetId": scope.target_id, "frame": frame}))
}

impl ControlledTab {
    /// Where the selected frame's page scripts run: the session hosting it, and the Broker's
    /// isolated world there. A detached selection, or a frame that no longer exists, is
    /// `frame_not_found`; the selection itself is only cleared by the pump's detach events.
    pub async fn frame_context(
        &mut self,
        tab_session: SessionId,
        selection: FrameSelection,
    ) -> Result<PageContext, ToolError> {
        frame_context(self, tab_session, selection).await
    }

    /// Re-checks a guarded action's pinned frame between steps; see [`repin`].
    pub fn repin(
        &mut self,
        tab_session: &SessionId,
        pinned_session: &SessionId,
        frame_id: &str,
    ) -> Result<bool, &'static str> {
        repin(self, tab_session, pinned_session, frame_id)
    }
}

async fn frame_context(
    tab: &mut ControlledTab,
    tab_session: SessionId,
    selection: FrameSelection,
) -> Result<PageContext, ToolError> {
    let (raw, opaque) = match selection {
        FrameSelection::Detached { opaque } => {
            return Err(ToolError::from(frame_not_found(&opaque, "frame_detached")));
        }
        FrameSelection::Frame { raw, opaque, .. } => (raw, opaque),
    };
    let oopif_root = tab.frames().child_session(&raw);
    let (session, session_root) = match oopif_root {
        Some(child) => (child, true),
        None => match hosting_session(tab, &tab_session, &raw).await? {
            Some(session) => (session, false),
            None => return Err(ToolError::from(frame_not_found(&opaque, "frame_detached"))),
        },
    };
    let context = tab
        .calls()
        .create_isolated_world(&session, &raw, SCRIPT_TIMEOUT)
        .await
        .map_err(|_| frame_not_found(&opaque, "frame_detached"))?;
    Ok(PageContext {
        session,
        frame_id: raw,
        context,
        session_root,
    })
}

/// Re-checks a guarded action's pinned frame between steps (no CDP call): `Err(reason)` when
/// the selected frame went away (`frame_changed`) or the pinned session is neither the tab's
/// current one nor a still-attached OOPIF session (`session_changed`); else whether the pinned
/// frame is its session's root frame.
fn repin(
    tab: &mut ControlledTab,
    tab_session: &SessionId,
    pinned_session: &SessionId,
    frame_id: &str,
) -> Result<bool, &'static str> {
    if let Some(FrameSelection::Detached { .. }) = tab.frame_selection() {
        return Err("frame_changed");
    }
    if pinned_session == tab_session {
        return Ok(tab.is_main_frame(frame_id));
    }
    // One guard of the tab's books at a time (the match would keep a scrutinee's guard).
    let child = tab.frames().child_session(frame_id);
    match child {
        Some(child) if child == *pinned_session => Ok(true),
        _ if tab
            .frames()
            .child_sessions()
            .iter()
            .any(|(_, child)| child == pinned_session) =>
        {
            Ok(false)
        }
        _ => Err("session_changed"),
    }
}

/// The session whose frame tree holds a frame that is not an OOPIF root: the tab session's
/// (most frames), else an OOPIF's (frames nested in one). `None` when no tree has it.
async fn hosting_session(
    tab: &ControlledTab,
    tab_session: &SessionId,
    raw: &str,
) -> Result<Option<SessionId>, ToolError> {
    let in_tab = frame_tree(tab.calls(), tab_session, false).await?;
    if in_tab.iter().any(|n| n.raw == raw) {
        return Ok(Some(tab_session.clone()));
    }
    let children = tab.frames().child_sessions();
    for (_, child) in children {
        if let Ok(tree) = frame_tree(tab.calls(), &child, true).await
            && tree.iter().any(|n| n.raw == raw)
        {
            return Ok(Some(child));
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree() -> FrameTree {
        parse(json!({
            "frame": {"id": "MAIN", "url": "http://127.0.0.1:1/p", "urlFragment": "#x", "securityOrigin": "http://127.0.0.1:1"},
            "childFrames": [
                {"frame": {"id": "A", "parentId": "MAIN", "name": "a", "url": "http://127.0.0.1:1/a", "securityOrigin": "http://127.0.0.1:1"},
                 "childFrames": [{"frame": {"id": "A1", "parentId": "A", "url": "about:blank", "securityOrigin": "://"}}]},
                {"frame": {"id": "B", "parentId": "MAIN", "url": "http://127.0.0.1:2/b", "securityOrigin": "http://127.0.0.1:2"}},
            ]
        }))
    }

    fn parse(tree: Value) -> FrameTree {
        serde_json::from_value(tree).expect("a frame tree")
    }

    #[test]
    fn trees_flatten_in_document_order_with_inherited_origins() {
        let session = SessionId::new("s");
        let nodes = flatten_tree(&tree(), &session, false);
        let ids: Vec<&str> = nodes.iter().map(|n| n.raw.as_str()).collect();
        assert_eq!(ids, ["MAIN", "A", "A1", "B"]);
        assert_eq!(nodes[0].url, "http://127.0.0.1:1/p#x");
        assert_eq!(nodes[1].name, "a");
        let origins = effective_origins(&nodes);
        assert_eq!(origins["A1"], "http://127.0.0.1:1", "about:blank inherits");
        assert_eq!(origins["B"], "http://127.0.0.1:2");
        assert_eq!(ancestors(&nodes, "A1"), ["A", "MAIN"]);
        assert!(ancestors(&nodes, "MAIN").is_empty());
    }

    #[test]
    fn out_of_process_subtrees_are_placed_under_their_parent() {
        let tab = SessionId::new("tab");
        let child = SessionId::new("child");
        let mut nodes = flatten_tree(&tree(), &tab, false);
        nodes.extend(flatten_tree(
            &parse(json!({"frame": {"id": "O", "parentId": "A", "securityOrigin": "http://localhost:2"},
                    "childFrames": [{"frame": {"id": "O1", "parentId": "O"}}]})),
            &child,
            true,
        ));
        nodes.push(FrameNode {
            raw: "ORPHAN".into(),
            parent: Some("GONE".into()),
            url: String::new(),
            name: String::new(),
            origin: String::new(),
            session: child.clone(),
            out_of_process: true,
        });
        let ordered = order_frames(nodes);
        let ids: Vec<&str> = ordered.iter().map(|n| n.raw.as_str()).collect();
        assert_eq!(ids, ["MAIN", "A", "A1", "O", "O1", "B", "ORPHAN"]);
        assert!(ordered[3].out_of_process && ordered[3].session == child);
        assert_eq!(ancestors(&ordered, "O1"), ["O", "A", "MAIN"]);
    }

    #[test]
    fn frame_not_found_names_the_frame_and_the_way_out() {
        let error = frame_not_found("frame:ab", "frame_detached").to_json();
        assert_eq!(error["data"]["code"], "frame_not_found");
        assert_eq!(error["data"]["context"]["frameId"], "frame:ab");
        assert_eq!(error["data"]["context"]["reason"], "frame_detached");
        assert_eq!(error["data"]["remediation"]["action"], "list_frames");
    }
}
