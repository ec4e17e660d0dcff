//! The `DOM` domain: the few node commands the click path uses (`GetFrameOwner`,
//! `ResolveNode`, `ScrollIntoViewIfNeeded`, `GetBoxModel`), `SetFileInputFiles` for uploads,
//! the backend node id they share, and `DOMDebugger.getEventListeners`
//! (`GetEventListeners`) with `DescribeNode`, which the Observation uses to find listener-only
//! controls.
//! Wire shapes only: no node is ever named to an agent by these ids.

use serde::{Deserialize, Serialize};

use super::command::{Command, Empty};

/// A `DOM.BackendNodeId`: stable for the node's lifetime without enabling the DOM domain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct BackendNodeId(pub i64);

/// `DOM.getFrameOwner`: the `<iframe>` (or `<frame>`) element that holds `frame_id`, in the
/// session that hosts the frame's parent document.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GetFrameOwner {
    pub frame_id: String,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GetFrameOwnerReply {
    pub backend_node_id: BackendNodeId,
}

impl Command for GetFrameOwner {
    const METHOD: &'static str = "DOM.getFrameOwner";
    type Reply = GetFrameOwnerReply;
}

/// `DOM.resolveNode`: a remote object for a node, in `execution_context_id`, in the object
/// group `object_group`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResolveNode {
    pub backend_node_id: BackendNodeId,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub execution_context_id: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub object_group: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ResolveNodeReply {
    pub object: super::runtime::RemoteObject,
}

impl Command for ResolveNode {
    const METHOD: &'static str = "DOM.resolveNode";
    type Reply = ResolveNodeReply;
}

/// `DOM.describeNode` of a remote object, without its children (`depth: 0`): its backend node
/// id, so the node can be resolved in another world. Needs no enabled domain.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DescribeNode {
    pub object_id: String,
    pub depth: i64,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct DescribeNodeReply {
    pub node: DescribedNode,
}

/// The part of a described node the Broker reads.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DescribedNode {
    pub backend_node_id: BackendNodeId,
}

impl Command for DescribeNode {
    const METHOD: &'static str = "DOM.describeNode";
    type Reply = DescribeNodeReply;
}

/// `DOMDebugger.getEventListeners` of a remote object; `depth: -1` with `pierce` lists the
/// listeners of every node below it too (shadow roots and same-process frames included).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GetEventListeners {
    pub object_id: String,
    pub depth: i64,
    pub pierce: bool,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct GetEventListenersReply {
    pub listeners: Vec<EventListener>,
}

/// One listener: its event type and the node it is on (absent for a non-node target).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EventListener {
    #[serde(rename = "type")]
    pub event_type: String,
    #[serde(default)]
    pub backend_node_id: Option<BackendNodeId>,
}

impl Command for GetEventListeners {
    const METHOD: &'static str = "DOMDebugger.getEventListeners";
    type Reply = GetEventListenersReply;
}

/// `DOM.scrollIntoViewIfNeeded` of a node.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ScrollIntoViewIfNeeded {
    pub backend_node_id: BackendNodeId,
}

impl Command for ScrollIntoViewIfNeeded {
    const METHOD: &'static str = "DOM.scrollIntoViewIfNeeded";
    type Reply = Empty;
}

/// `DOM.getBoxModel` of a node; Chromium answers an error for a node without a box.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GetBoxModel {
    pub backend_node_id: BackendNodeId,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct GetBoxModelReply {
    pub model: BoxModel,
}

/// The quads of a box, each eight numbers (four x, y corners clockwise from top left) in the
/// viewport CSS pixels of the node's frame.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct BoxModel {
    pub content: Vec<f64>,
    #[serde(default)]
    pub border: Vec<f64>,
    #[serde(default)]
    pub width: f64,
    #[serde(default)]
    pub height: f64,
}

impl Command for GetBoxModel {
    const METHOD: &'static str = "DOM.getBoxModel";
    type Reply = GetBoxModelReply;
}

/// `DOM.setFileInputFiles`: selects `files` (absolute paths) in a file input given as a remote
/// object. Chromium accepts a path that does not exist (an empty file of that name) and a
/// relative one (docs/cdp.md, "file chooser"): callers pass only checked absolute paths.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SetFileInputFiles {
    pub files: Vec<String>,
    pub object_id: String,
}

impl Command for SetFileInputFiles {
    const METHOD: &'static str = "DOM.setFileInputFiles";
    type Reply = Empty;
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::command::testing::{params, reply};
    use super::*;

    #[test]
    fn commands_have_the_wire_shape() {
        assert_eq!(
            params(&GetFrameOwner {
                frame_id: "F".to_owned()
            }),
            json!({"frameId": "F"})
        );
        assert_eq!(
            params(&ResolveNode {
                backend_node_id: BackendNodeId(12),
                execution_context_id: Some(4),
                object_group: Some("g".to_owned())
            }),
            json!({"backendNodeId": 12, "executionContextId": 4, "objectGroup": "g"})
        );
        assert_eq!(
            params(&ScrollIntoViewIfNeeded {
                backend_node_id: BackendNodeId(12)
            }),
            json!({"backendNodeId": 12})
        );
        assert_eq!(
            params(&GetBoxModel {
                backend_node_id: BackendNodeId(12)
            }),
            json!({"backendNodeId": 12})
        );
        assert_eq!(
            params(&SetFileInputFiles {
                files: vec!["/p/a.txt".to_owned()],
                object_id: "1.2.3".to_owned()
            }),
            json!({"files": ["/p/a.txt"], "objectId": "1.2.3"})
        );
    }

    /// Recorded from Chromium 156 on a 300x150 `srcdoc` iframe.
    #[test]
    fn replies_decode_from_chromium_samples() {
        let owner = reply::<GetFrameOwner>(json!({"backendNodeId":6}));
        assert_eq!(owner.backend_node_id, BackendNodeId(6));
        let resolved = reply::<ResolveNode>(
            json!({"object":{"className":"HTMLIFrameElement","description":"iframe#inner","objectId":"8553435088452544872.3.3","subtype":"node","type":"object"}}),
        );
        assert_eq!(
            resolved.object.object_id.as_deref(),
            Some("8553435088452544872.3.3")
        );
        let model = reply::<GetBoxModel>(
            json!({"model":{"border":[35.546875,79.875,335.546875,79.875,335.546875,229.875,35.546875,229.875],"content":[35.546875,79.875,335.546875,79.875,335.546875,229.875,35.546875,229.875],"height":150,"margin":[35.546875,79.875,335.546875,79.875,335.546875,229.875,35.546875,229.875],"padding":[35.546875,79.875,335.546875,79.875,335.546875,229.875,35.546875,229.875],"width":300}}),
        );
        assert_eq!(model.model.content.len(), 8);
        assert_eq!(model.model.content[2], 335.546875);
        assert_eq!((model.model.width, model.model.height), (300.0, 150.0));
        reply::<ScrollIntoViewIfNeeded>(json!({}));
        reply::<SetFileInputFiles>(json!({}));
    }
}
