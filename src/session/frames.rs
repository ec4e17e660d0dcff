//! Frame bookkeeping of one tab: the out-of-process iframe (OOPIF) sessions Chromium attached
//! to the tab session (`Target.setAutoAttach`), each Workspace's frame selection, and the opaque
//! `frame:` ids minted per Workspace. It is one of the tab's books beside its queue, so
//! the event pump can clear a selection whose frame went away without waiting for the tab's turn.
//!
//! It does no I/O and never decides what to tell a Workspace: the pump turns what
//! `on_frame_removed` / `on_frame_navigated` return into events, and the tools turn a
//! `FrameSelection::Detached` into an error. Raw CDP frame ids never leave this module's callers
//! in agent-visible output; only the opaque ids do. A new browser connection generation starts
//! with a new registry and therefore a new `FrameBook`, so opaque ids die with their generation.

use std::collections::HashMap;

use crate::cdp::SessionId;
use crate::protocol::ids::{IdKind, new_id};
use crate::store::WorkspaceId;

/// Opaque frame ids kept per tab (all Workspaces together). Pages that keep creating iframes
/// (ads, widgets) would otherwise grow the map without end; past the bound, ids of unselected
/// frames are forgotten and a later use of one answers `frame_not_found`.
pub const MAX_FRAME_IDS: usize = 1024;

/// OOPIF sessions tracked per tab. Chromium gives each out-of-process frame one; a page with
/// more is pathological, and frames past the bound are listed from the target inventory only.
pub const MAX_CHILD_SESSIONS: usize = 256;

/// Detached selections whose Observations still await invalidation, per tab. Drained on every
/// frame-scoped call; the bound only matters for a tab nobody uses while its frames churn.
const MAX_PENDING_INVALIDATIONS: usize = 64;

/// What a Workspace has selected on a tab. No entry means the main frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FrameSelection {
    /// A child frame: its raw CDP id, its opaque id and its ancestors' raw ids (nearest first,
    /// ending with the main frame), so a navigation of any ancestor is recognised as detaching it.
    Frame {
        raw: String,
        opaque: String,
        ancestors: Vec<String>,
    },
    /// The selected frame went away. Frame-scoped calls fail with `frame_not_found` until the
    /// Workspace selects again, so nothing runs in a frame the agent did not choose.
    Detached { opaque: String },
}

/// Why a selected frame stopped existing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DetachReason {
    /// The frame (or an ancestor) was removed from its parent's DOM.
    Removed,
    /// An ancestor frame loaded a new document, which discards the old one's frames.
    ParentNavigated,
}

impl DetachReason {
    pub fn as_str(self) -> &'static str {
        match self {
            DetachReason::Removed => "removed",
            DetachReason::ParentNavigated => "parent_navigated",
        }
    }
}

/// A Workspace whose selected frame just went away.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrameGone {
    pub workspace_id: String,
    /// The Workspace's opaque id of the frame.
    pub frame_id: String,
    pub reason: DetachReason,
}

#[derive(Default)]
pub struct FrameBook {
    /// OOPIF root frame (raw id; equals its target id) -> its flattened session.
    children: HashMap<String, SessionId>,
    /// Workspace -> selection; absent means the main frame.
    selections: HashMap<String, FrameSelection>,
    /// (Workspace, raw frame id) -> opaque id.
    opaque_of: HashMap<(String, String), String>,
    /// Opaque id -> (Workspace, raw frame id).
    raw_of: HashMap<String, (String, String)>,
    /// (Workspace, raw frame id) of detached selections whose Observations must be dropped.
    invalidations: Vec<(String, String)>,
}

impl FrameBook {
    /// Records an OOPIF session; false when the bound is reached.
    pub fn attach_child(&mut self, frame: &str, session: SessionId) -> bool {
        if self.children.len() >= MAX_CHILD_SESSIONS && !self.children.contains_key(frame) {
            return false;
        }
        self.children.insert(frame.to_owned(), session);
        true
    }

    /// Forgets an OOPIF session that detached. A frame re-attached under a new session (a
    /// cross-process navigation) keeps the new one.
    pub fn detach_child(&mut self, session: &SessionId) {
        self.children.retain(|_, s| s != session);
    }

    /// Forgets every OOPIF session (the tab session itself went away).
    pub fn clear_children(&mut self) {
        self.children.clear();
    }

    /// The session of an OOPIF whose root frame is `frame`.
    pub fn child_session(&self, frame: &str) -> Option<SessionId> {
        self.children.get(frame).cloned()
    }

    /// Every OOPIF session: (root frame raw id, session), in a stable order.
    pub fn child_sessions(&self) -> Vec<(String, SessionId)> {
        let mut children: Vec<(String, SessionId)> = self
            .children
            .iter()
            .map(|(frame, session)| (frame.clone(), session.clone()))
            .collect();
        children.sort();
        children
    }

    /// The Workspace's opaque id for a frame, minted on first use.
    pub fn opaque_id(&mut self, workspace_id: &str, raw: &str) -> String {
        let key = (workspace_id.to_owned(), raw.to_owned());
        if let Some(id) = self.opaque_of.get(&key) {
            return id.clone();
        }
        if self.opaque_of.len() >= MAX_FRAME_IDS {
            self.forget_unselected_ids();
        }
        let id = new_id(IdKind::Frame);
        self.raw_of.insert(id.clone(), key.clone());
        self.opaque_of.insert(key, id.clone());
        id
    }

    fn forget_unselected_ids(&mut self) {
        let kept: Vec<String> = self
            .selections
            .values()
            .map(|selection| match selection {
                FrameSelection::Frame { opaque, .. } | FrameSelection::Detached { opaque } => {
                    opaque.clone()
                }
            })
            .collect();
        self.raw_of.retain(|opaque, _| kept.contains(opaque));
        self.opaque_of.retain(|_, opaque| kept.contains(opaque));
    }

    /// The raw frame id behind a Workspace's opaque id.
    pub fn resolve(&self, workspace_id: &WorkspaceId, opaque: &str) -> Option<String> {
        match self.raw_of.get(opaque) {
            Some((owner, raw)) if owner == workspace_id => Some(raw.clone()),
            _ => None,
        }
    }

    pub fn selection(&self, workspace_id: &str) -> Option<&FrameSelection> {
        self.selections.get(workspace_id)
    }

    /// Selects a child frame (`raw` with its ancestors, nearest first) or, with `None`, the main
    /// frame. Replaces a detached selection too.
    pub fn select(&mut self, workspace_id: &str, frame: Option<(&str, Vec<String>)>) {
        match frame {
            None => {
                self.selections.remove(workspace_id);
            }
            Some((raw, ancestors)) => {
                let opaque = self.opaque_id(workspace_id, raw);
                self.selections.insert(
                    workspace_id.to_owned(),
                    FrameSelection::Frame {
                        raw: raw.to_owned(),
                        opaque,
                        ancestors,
                    },
                );
            }
        }
    }

    /// A frame was removed (`Page.frameDetached`, not a process swap): every selection of it or
    /// of a frame inside it is detached.
    pub fn on_frame_removed(&mut self, raw: &str) -> Vec<FrameGone> {
        self.detach_where(DetachReason::Removed, |frame, ancestors| {
            frame == raw || ancestors.iter().any(|a| a == raw)
        })
    }

    /// A frame loaded a new document (`Page.frameNavigated`): selections of frames inside it are
    /// detached; a selection of the frame itself stays (same frame, new document).
    pub fn on_frame_navigated(&mut self, raw: &str) -> Vec<FrameGone> {
        self.detach_where(DetachReason::ParentNavigated, |_, ancestors| {
            ancestors.iter().any(|a| a == raw)
        })
    }

    fn detach_where(
        &mut self,
        reason: DetachReason,
        gone: impl Fn(&str, &[String]) -> bool,
    ) -> Vec<FrameGone> {
        let mut detached = Vec::new();
        for (workspace_id, selection) in self.selections.iter_mut() {
            let FrameSelection::Frame {
                raw,
                opaque,
                ancestors,
            } = selection
            else {
                continue;
            };
            if !gone(raw, ancestors) {
                continue;
            }
            if self.invalidations.len() < MAX_PENDING_INVALIDATIONS {
                self.invalidations.push((workspace_id.clone(), raw.clone()));
            }
            detached.push(FrameGone {
                workspace_id: workspace_id.clone(),
                frame_id: opaque.clone(),
                reason,
            });
            *selection = FrameSelection::Detached {
                opaque: opaque.clone(),
            };
        }
        detached.sort_by(|a, b| a.workspace_id.cmp(&b.workspace_id));
        detached
    }

    /// Raw ids of this Workspace's frames that detached while selected; their Observations are
    /// to be dropped. Each is returned once.
    pub fn take_invalidations(&mut self, workspace_id: &str) -> Vec<String> {
        let (mine, rest): (Vec<_>, Vec<_>) = self
            .invalidations
            .drain(..)
            .partition(|(w, _)| w == workspace_id);
        self.invalidations = rest;
        mine.into_iter().map(|(_, raw)| raw).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ancestors(ids: &[&str]) -> Vec<String> {
        ids.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn opaque_ids_are_per_workspace_and_resolve_only_for_their_owner() {
        let mut book = FrameBook::default();
        let a = book.opaque_id("workspace:a", "F1");
        assert!(a.starts_with("frame:"));
        assert!(!a.contains("F1"));
        assert_eq!(book.opaque_id("workspace:a", "F1"), a, "stable");
        let b = book.opaque_id("workspace:b", "F1");
        assert_ne!(a, b);
        assert_eq!(
            book.resolve(&"workspace:a".into(), &a).as_deref(),
            Some("F1")
        );
        assert_eq!(book.resolve(&"workspace:b".into(), &a), None);
        assert_eq!(book.resolve(&"workspace:a".into(), "frame:unknown"), None);
    }

    #[test]
    fn removal_detaches_the_selected_frame_and_frames_inside_it_once() {
        let mut book = FrameBook::default();
        book.select("workspace:a", Some(("LEAF", ancestors(&["CHILD", "MAIN"]))));
        book.select("workspace:b", Some(("CHILD", ancestors(&["MAIN"]))));
        book.select("workspace:c", Some(("OTHER", ancestors(&["MAIN"]))));
        let gone = book.on_frame_removed("CHILD");
        let workspaces: Vec<&str> = gone.iter().map(|g| g.workspace_id.as_str()).collect();
        assert_eq!(workspaces, ["workspace:a", "workspace:b"]);
        assert!(gone.iter().all(|g| g.reason == DetachReason::Removed));
        assert!(matches!(
            book.selection("workspace:a"),
            Some(FrameSelection::Detached { opaque }) if *opaque == gone[0].frame_id
        ));
        assert!(matches!(
            book.selection("workspace:c"),
            Some(FrameSelection::Frame { .. })
        ));
        assert!(
            book.on_frame_removed("CHILD").is_empty(),
            "reported only once"
        );
        assert_eq!(book.take_invalidations("workspace:a"), ["LEAF"]);
        assert!(book.take_invalidations("workspace:a").is_empty());
        assert_eq!(book.take_invalidations("workspace:b"), ["CHILD"]);
        // Selecting again (here: the main frame) replaces the detached selection.
        book.select("workspace:a", None);
        assert_eq!(book.selection("workspace:a"), None);
    }

    #[test]
    fn navigation_detaches_descendants_but_not_the_frame_itself() {
        let mut book = FrameBook::default();
        book.select("workspace:a", Some(("CHILD", ancestors(&["MAIN"]))));
        assert!(book.on_frame_navigated("CHILD").is_empty());
        let gone = book.on_frame_navigated("MAIN");
        assert_eq!(gone.len(), 1);
        assert_eq!(gone[0].reason, DetachReason::ParentNavigated);
        assert_eq!(gone[0].reason.as_str(), "parent_navigated");
    }

    #[test]
    fn child_sessions_follow_attach_and_detach() {
        let mut book = FrameBook::default();
        assert!(book.attach_child("OOPIF", SessionId::new("s1")));
        // A cross-process navigation attaches a new session before the old one detaches.
        assert!(book.attach_child("OOPIF", SessionId::new("s2")));
        book.detach_child(&SessionId::new("s1"));
        assert_eq!(book.child_session("OOPIF"), Some(SessionId::new("s2")));
        book.detach_child(&SessionId::new("s2"));
        assert_eq!(book.child_session("OOPIF"), None);
        for n in 0..MAX_CHILD_SESSIONS {
            assert!(book.attach_child(&format!("F{n}"), SessionId::new(format!("s{n}"))));
        }
        assert!(!book.attach_child("ONE-TOO-MANY", SessionId::new("x")));
        book.clear_children();
        assert!(book.child_sessions().is_empty());
    }

    #[test]
    fn id_bound_keeps_selected_frames() {
        let mut book = FrameBook::default();
        book.select("workspace:a", Some(("KEEP", ancestors(&["MAIN"]))));
        let kept = book.opaque_id("workspace:a", "KEEP");
        let early = book.opaque_id("workspace:a", "F0");
        for n in 1..=MAX_FRAME_IDS {
            book.opaque_id("workspace:a", &format!("F{n}"));
        }
        assert!(book.opaque_of.len() <= MAX_FRAME_IDS);
        assert_eq!(
            book.resolve(&"workspace:a".into(), &kept).as_deref(),
            Some("KEEP")
        );
        assert_eq!(book.resolve(&"workspace:a".into(), &early), None);
    }
}
