//! The tab registry: physical tabs seen through target discovery, which Workspace manages which
//! tab, which Lease controls it, and the opaque per-Workspace `target:` ids.
//!
//! Plain data in the connection's `Tabs` (`pump.rs`); no I/O. Raw CDP target ids stay here: every id that
//! leaves is an opaque `target:` id minted per Workspace and generation. URLs and titles are
//! kept bounded (`session::bounds`), so the inventory never carries a page's megabyte title.

use std::collections::HashMap;

use super::bounds::{bound_title, bound_url};
use super::tab::TabHandle;
use crate::cdp::{BrowserContextId, TargetId, TargetInfo};
use crate::protocol::ids::{IdKind, new_id};
use crate::store::{LeaseId, TargetRef, WorkspaceId};

/// Why a target id could not be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TargetError {
    /// Unknown to this Workspace (never listed, closed, or from an older generation).
    NotFound,
    /// Another Lease controls the tab.
    ControlledElsewhere {
        workspace_id: String,
        lease_id: String,
    },
    /// A user tab (not created for this Workspace) cannot be closed.
    NotManaged,
    /// The person at the live view took the tab over (`session::view`): no Lease takes or
    /// uses it until they hand it back.
    HumanInControl,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Controller {
    pub workspace_id: String,
    pub lease_id: String,
}

struct TabEntry {
    handle: TabHandle,
    target_type: String,
    subtype: Option<String>,
    url: String,
    title: String,
    opener: Option<TargetId>,
    /// Its browser context, when discovery named one (an isolated Workspace's tabs are in the
    /// Workspace's own context; `session::contexts`).
    context: Option<BrowserContextId>,
    /// The Workspace that created the tab (or whose managed tab opened it as a popup).
    managed_by: Option<String>,
    controller: Option<Controller>,
    /// The Workspace that last controlled this user tab: what the page logged under one
    /// Workspace's control is never shown to the next (`acquire_control` says so).
    last_workspace: Option<String>,
    /// The person at the live view holds the tab (`session::view`).
    human: bool,
}

impl TabEntry {
    /// Control of the tab ended: when no Workspace manages or controls it any more, what its
    /// books kept of the page (console entries, requests) goes (`TabHandle::forget_page_data`).
    fn let_go(&self) {
        if self.managed_by.is_none() && self.controller.is_none() {
            self.handle.forget_page_data(crate::version::now_ms());
        }
    }
}

/// One row of `browser.tabs.list`, as seen by one Lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TabView {
    pub target_id: TargetRef,
    pub url: String,
    pub title: String,
    pub managed: bool,
    pub controlled: bool,
    pub controlled_elsewhere: bool,
    pub opener_target_id: Option<TargetRef>,
    /// The tab's browser context, for the service to tell an isolated Workspace's tabs apart.
    pub context: Option<BrowserContextId>,
}

/// A JavaScript dialog waiting for an explicit answer. Only the session that had `Page`
/// enabled when it opened can answer it (docs/cdp.md, "dialog session").
#[derive(Debug, Clone)]
pub struct DialogInfo {
    pub id: String,
    pub target: TargetId,
    pub session: crate::cdp::SessionId,
    pub dialog_type: String,
    pub message: String,
    pub default_prompt: Option<String>,
    pub url: String,
    pub opened_at: i64,
}

#[derive(Default)]
pub struct Registry {
    /// Open dialogs, one per tab at most.
    pub dialogs: HashMap<TargetId, DialogInfo>,
    tabs: HashMap<TargetId, TabEntry>,
    /// Opaque id -> (Workspace, physical tab).
    by_opaque: HashMap<TargetRef, (String, TargetId)>,
    /// (Workspace, physical tab) -> opaque id.
    opaque_of: HashMap<(String, TargetId), TargetRef>,
    /// Workspaces whose dedicated window exists.
    windows: HashMap<String, TargetId>,
}

impl Registry {
    /// Records a target from discovery. Returns the Workspace that adopted it when it is a
    /// popup of one of that Workspace's managed tabs.
    pub fn upsert(&mut self, info: &TargetInfo) -> Option<String> {
        let opener_owner = info
            .opener_id
            .as_ref()
            .and_then(|o| self.tabs.get(o))
            .and_then(|e| e.managed_by.clone());
        match self.tabs.get_mut(&info.target_id) {
            Some(entry) => {
                if let Some(context) = &info.browser_context_id {
                    entry.context = Some(BrowserContextId::new(context.as_str()));
                }
                entry.url = bound_url(&info.url);
                entry.title = bound_title(&info.title);
                entry.target_type.clone_from(&info.target_type);
                None
            }
            None => {
                let adopted = match info.target_type.as_str() {
                    "page" => opener_owner,
                    _ => None,
                };
                self.tabs.insert(
                    info.target_id.clone(),
                    TabEntry {
                        handle: TabHandle::new(info.target_id.clone()),
                        target_type: info.target_type.clone(),
                        subtype: info.subtype.clone(),
                        url: bound_url(&info.url),
                        title: bound_title(&info.title),
                        opener: info.opener_id.clone(),
                        context: (info.browser_context_id.as_deref()).map(BrowserContextId::new),
                        managed_by: adopted.clone(),
                        controller: None,
                        last_workspace: None,
                        human: false,
                    },
                );
                adopted
            }
        }
    }

    /// Marks a freshly created tab as managed by a Workspace and controlled by its Lease.
    pub fn adopt(&mut self, target: &TargetId, workspace_id: &WorkspaceId, lease_id: &LeaseId) {
        if let Some(entry) = self.tabs.get_mut(target) {
            entry.managed_by = Some(workspace_id.to_string());
            entry.controller = Some(Controller {
                workspace_id: workspace_id.to_string(),
                lease_id: lease_id.to_string(),
            });
        }
        self.windows
            .entry(workspace_id.to_string())
            .or_insert_with(|| target.clone());
    }

    /// Marks a tab the Broker created for a Workspace under an earlier connection as that
    /// Workspace's managed tab again, controlled by nobody (its Lease takes it back through
    /// its new opaque id).
    pub fn adopt_recovered(&mut self, target: &TargetId, workspace_id: &str) {
        let Some(entry) = self.tabs.get_mut(target) else {
            return;
        };
        entry.managed_by = Some(workspace_id.to_owned());
        entry.controller = None;
        self.windows
            .entry(workspace_id.to_owned())
            .or_insert_with(|| target.clone());
    }

    /// Whether `target` is an ordinary page with no opener whose URL `blank` accepts, that no
    /// Workspace manages or controls and the person at the live view does not hold.
    pub fn is_free_blank_page(&self, target: &TargetId, blank: impl Fn(&str) -> bool) -> bool {
        self.tabs.get(target).is_some_and(|entry| {
            is_ordinary_page(entry)
                && blank(&entry.url)
                && entry.opener.is_none()
                && entry.managed_by.is_none()
                && entry.controller.is_none()
                && !entry.human
        })
    }

    pub fn has_window(&self, workspace_id: &str) -> bool {
        self.windows
            .get(workspace_id)
            .is_some_and(|t| self.tabs.contains_key(t))
    }

    /// Removes a destroyed target; returns `(workspace, opaque id)` for every Workspace that knew it.
    pub fn remove(&mut self, target: &TargetId) -> Vec<(String, TargetRef)> {
        self.tabs.remove(target);
        self.dialogs.remove(target);
        let known: Vec<(String, TargetRef)> = self
            .opaque_of
            .iter()
            .filter(|((_, t), _)| t == target)
            .map(|((w, _), opaque)| (w.clone(), opaque.clone()))
            .collect();
        for (workspace, opaque) in &known {
            self.by_opaque.remove(opaque);
            self.opaque_of.remove(&(workspace.clone(), target.clone()));
        }
        known
    }

    /// The Workspace's opaque id for a tab, minted on first use.
    pub fn opaque_id(&mut self, workspace_id: &str, target: &TargetId) -> TargetRef {
        let key = (workspace_id.to_owned(), target.clone());
        if let Some(id) = self.opaque_of.get(&key) {
            return id.clone();
        }
        let id = TargetRef::from(new_id(IdKind::Target));
        self.by_opaque.insert(id.clone(), key.clone());
        self.opaque_of.insert(key, id.clone());
        id
    }

    /// The physical tab behind a Workspace's opaque id.
    pub fn resolve(
        &self,
        workspace_id: &WorkspaceId,
        opaque: &TargetRef,
    ) -> Result<(TargetId, TabHandle), TargetError> {
        match self.by_opaque.get(opaque.as_str()) {
            Some((owner, target)) if owner == workspace_id => match self.tabs.get(target) {
                // A tab showing the live view is nobody's to drive (docs/view.md).
                Some(entry) if !super::view::is_view_url(&entry.url) => {
                    Ok((target.clone(), entry.handle.clone()))
                }
                _ => Err(TargetError::NotFound),
            },
            _ => Err(TargetError::NotFound),
        }
    }

    /// Every tab's target id.
    pub fn targets(&self) -> Vec<TargetId> {
        self.tabs.keys().cloned().collect()
    }

    /// Every tab's handle.
    pub fn handles(&self) -> impl Iterator<Item = &TabHandle> {
        self.tabs.values().map(|e| &e.handle)
    }

    pub fn handle(&self, target: &TargetId) -> Option<TabHandle> {
        self.tabs.get(target).map(|e| e.handle.clone())
    }

    pub fn managed_by(&self, target: &TargetId) -> Option<&str> {
        self.tabs.get(target).and_then(|e| e.managed_by.as_deref())
    }

    /// Takes control for a Lease if the tab is free or already its own. `Ok(true)` when a
    /// user tab passed from another Workspace's control to this one: the caller clears what
    /// the page logged before (console history belongs to whoever controlled the tab).
    pub fn acquire_control(
        &mut self,
        target: &TargetId,
        workspace_id: &WorkspaceId,
        lease_id: &LeaseId,
    ) -> Result<bool, TargetError> {
        let entry = self.tabs.get_mut(target).ok_or(TargetError::NotFound)?;
        if entry.human {
            return Err(TargetError::HumanInControl);
        }
        match &entry.controller {
            Some(c) if c.workspace_id == workspace_id && c.lease_id == lease_id => Ok(false),
            Some(c) => Err(TargetError::ControlledElsewhere {
                workspace_id: c.workspace_id.clone(),
                lease_id: c.lease_id.clone(),
            }),
            None => {
                entry.controller = Some(Controller {
                    workspace_id: workspace_id.to_string(),
                    lease_id: lease_id.to_string(),
                });
                if entry.managed_by.is_some() {
                    return Ok(false);
                }
                let previous = entry.last_workspace.replace(workspace_id.to_string());
                Ok(previous.is_some_and(|w| w != workspace_id))
            }
        }
    }

    /// The person at the live view takes the tab (`true`) or hands it back (`false`); every
    /// Lease's `acquire_control` fails with `HumanInControl` meanwhile. False when it already
    /// stood so.
    pub fn set_human(&mut self, target: &TargetId, human: bool) -> Result<bool, TargetError> {
        let entry = self.tabs.get_mut(target).ok_or(TargetError::NotFound)?;
        Ok(std::mem::replace(&mut entry.human, human) != human)
    }

    /// Clears control held by a Lease that no longer exists.
    pub fn clear_stale_control(&mut self, target: &TargetId, stale: &Controller) {
        if let Some(entry) = self.tabs.get_mut(target)
            && entry.controller.as_ref() == Some(stale)
        {
            entry.controller = None;
        }
    }

    /// Hands control back; true when this Lease held it.
    pub fn release_control(
        &mut self,
        target: &TargetId,
        workspace_id: &WorkspaceId,
        lease_id: &LeaseId,
    ) -> bool {
        match self.tabs.get_mut(target) {
            Some(entry)
                if entry
                    .controller
                    .as_ref()
                    .is_some_and(|c| c.workspace_id == workspace_id && c.lease_id == lease_id) =>
            {
                entry.controller = None;
                entry.let_go();
                true
            }
            _ => false,
        }
    }

    /// Every eligible ordinary user tab plus the Workspace's managed tabs, as seen by one Lease.
    pub fn list(&mut self, workspace_id: &WorkspaceId, lease_id: &LeaseId) -> Vec<TabView> {
        let mut eligible: Vec<TargetId> = self
            .tabs
            .iter()
            .filter(|(_, e)| {
                is_ordinary_page(e) && e.managed_by.as_deref().is_none_or(|w| w == workspace_id)
            })
            .map(|(t, _)| t.clone())
            .collect();
        eligible.sort();
        let mut views = Vec::with_capacity(eligible.len());
        for target in eligible {
            let opaque = self.opaque_id(workspace_id, &target);
            let opener = self.tabs[&target].opener.clone();
            let opener_target_id = opener
                .filter(|o| self.tabs.contains_key(o))
                .map(|o| self.opaque_id(workspace_id, &o));
            let entry = &self.tabs[&target];
            let mine = entry
                .controller
                .as_ref()
                .is_some_and(|c| c.workspace_id == workspace_id && c.lease_id == lease_id);
            views.push(TabView {
                target_id: opaque,
                url: entry.url.clone(),
                title: entry.title.clone(),
                managed: entry.managed_by.is_some(),
                controlled: mine,
                controlled_elsewhere: entry.controller.is_some() && !mine,
                opener_target_id,
                context: entry.context.clone(),
            });
        }
        views
    }

    /// Records the browser context a tab was created in (discovery may not have named it yet).
    pub fn note_context(&mut self, target: &TargetId, context: &BrowserContextId) {
        if let Some(entry) = self.tabs.get_mut(target) {
            entry.context = Some(context.clone());
        }
    }

    /// The browser context of a tab, when discovery named one.
    pub fn context_of(&self, target: &TargetId) -> Option<BrowserContextId> {
        self.tabs
            .get(target)
            .and_then(|entry| entry.context.clone())
    }

    /// Tabs created for (or adopted by) a Workspace.
    pub fn managed_tabs(&self, workspace_id: &str) -> Vec<TargetId> {
        self.tabs
            .iter()
            .filter(|(_, e)| e.managed_by.as_deref() == Some(workspace_id))
            .map(|(t, _)| t.clone())
            .collect()
    }

    /// User tabs (managed by no Workspace) that the Workspace controls now.
    pub fn controlled_user_tabs(&self, workspace_id: &str) -> Vec<TabHandle> {
        self.tabs
            .values()
            .filter(|e| {
                e.managed_by.is_none()
                    && e.controller
                        .as_ref()
                        .is_some_and(|c| c.workspace_id == workspace_id)
            })
            .map(|e| e.handle.clone())
            .collect()
    }

    /// Drops a released Workspace's ids and its controls (its managed tabs are closed by the caller).
    pub fn forget_workspace(&mut self, workspace_id: &str) {
        self.by_opaque.retain(|_, (w, _)| w != workspace_id);
        self.opaque_of.retain(|(w, _), _| w != workspace_id);
        self.windows.remove(workspace_id);
        for entry in self.tabs.values_mut() {
            if entry
                .controller
                .as_ref()
                .is_some_and(|c| c.workspace_id == workspace_id)
            {
                entry.controller = None;
            }
        }
    }

    /// How many tabs this tab opened that are still open.
    pub fn popups_of(&self, opener: &TargetId) -> usize {
        self.tabs
            .values()
            .filter(|e| e.opener.as_ref() == Some(opener))
            .count()
    }

    /// The Workspace's opaque id for a tab it already knows (no minting).
    pub fn known_opaque(&self, workspace_id: &str, target: &TargetId) -> Option<TargetRef> {
        self.opaque_of
            .get(&(workspace_id.to_owned(), target.clone()))
            .cloned()
    }

    pub fn note_page(&mut self, target: &TargetId, url: &str, title: &str) {
        if let Some(entry) = self.tabs.get_mut(target) {
            entry.url = bound_url(url);
            entry.title = bound_title(title);
        }
    }

    pub fn url_of(&self, target: &TargetId) -> Option<String> {
        self.tabs.get(target).map(|e| e.url.clone())
    }

    /// Who a download of this tab belongs to: the controlling Lease's Workspace, else the
    /// managing Workspace (a managed tab or popup nobody controls right now); `None` for an
    /// uncontrolled user tab. `(Workspace, Lease, opaque id)`.
    pub fn capture_owner(
        &mut self,
        target: &TargetId,
    ) -> Option<(String, Option<String>, TargetRef)> {
        let entry = self.tabs.get(target)?;
        let (workspace_id, lease_id) = match (&entry.controller, &entry.managed_by) {
            (Some(c), _) => (c.workspace_id.clone(), Some(c.lease_id.clone())),
            (None, Some(managed)) => (managed.clone(), None),
            (None, None) => return None,
        };
        let opaque = self.opaque_id(&workspace_id, target);
        Some((workspace_id, lease_id, opaque))
    }

    /// Tabs a Lease controls that no Workspace manages (user tabs it took).
    pub fn user_tabs_controlled_by(
        &self,
        workspace_id: &WorkspaceId,
        lease_id: &LeaseId,
    ) -> Vec<TargetId> {
        self.tabs
            .iter()
            .filter(|(_, e)| {
                e.managed_by.is_none()
                    && e.controller
                        .as_ref()
                        .is_some_and(|c| c.workspace_id == workspace_id && c.lease_id == lease_id)
            })
            .map(|(t, _)| t.clone())
            .collect()
    }

    /// Ends every control this Lease held (it is gone) and returns those tabs, managed or not,
    /// so no tab stays "controlled elsewhere" by a Lease nobody holds.
    pub fn end_lease_control(
        &mut self,
        workspace_id: &WorkspaceId,
        lease_id: &LeaseId,
    ) -> Vec<TargetId> {
        let mut ended = Vec::new();
        for (target, entry) in &mut self.tabs {
            if entry
                .controller
                .as_ref()
                .is_some_and(|c| c.workspace_id == workspace_id && c.lease_id == lease_id)
            {
                entry.controller = None;
                entry.let_go();
                ended.push(target.clone());
            }
        }
        ended
    }

    /// Every ordinary tab some Workspace manages or controls, as the live view lists it: one
    /// row per (Workspace, tab), in the Workspace's own opaque ids. Mints no id: a tab a
    /// Workspace manages or controls already has one.
    pub fn view_rows(&self) -> Vec<super::view::ViewTab> {
        let mut rows = Vec::new();
        for (target, entry) in &self.tabs {
            if !is_ordinary_page(entry) {
                continue;
            }
            let mut workspaces: Vec<&str> = entry.managed_by.iter().map(String::as_str).collect();
            if let Some(controller) = &entry.controller
                && !workspaces.contains(&controller.workspace_id.as_str())
            {
                workspaces.push(&controller.workspace_id);
            }
            for workspace_id in workspaces {
                let Some(opaque) = self.known_opaque(workspace_id, target) else {
                    continue;
                };
                let dialog = self.dialogs.get(target).map(|d| super::view::ViewDialog {
                    dialog_type: d.dialog_type.clone(),
                    message: d.message.clone(),
                });
                rows.push(super::view::ViewTab {
                    workspace_id: workspace_id.to_owned(),
                    target_id: opaque.to_string(),
                    url: entry.url.clone(),
                    title: entry.title.clone(),
                    managed: entry.managed_by.as_deref() == Some(workspace_id),
                    controlled_by: (entry.controller.as_ref())
                        .filter(|c| c.workspace_id == workspace_id)
                        .map(|c| c.lease_id.clone()),
                    dialog,
                    human: entry.human,
                    handle: entry.handle.clone(),
                });
            }
        }
        rows.sort_by(|a, b| (&a.workspace_id, &a.target_id).cmp(&(&b.workspace_id, &b.target_id)));
        rows
    }

    /// `(Workspace, opaque id)` for the Workspace managing the tab and the one controlling it.
    pub fn interested_workspaces(&mut self, target: &TargetId) -> Vec<(String, TargetRef)> {
        let Some(entry) = self.tabs.get(target) else {
            return Vec::new();
        };
        let mut workspaces: Vec<String> = entry.managed_by.iter().cloned().collect();
        if let Some(controller) = &entry.controller
            && !workspaces.contains(&controller.workspace_id)
        {
            workspaces.push(controller.workspace_id.clone());
        }
        workspaces
            .into_iter()
            .map(|w| {
                let opaque = self.opaque_id(&w, target);
                (w, opaque)
            })
            .collect()
    }
}

/// An ordinary tab: a page, not a prerender, not DevTools or browser UI.
fn is_ordinary_page(entry: &TabEntry) -> bool {
    entry.target_type == "page"
        && entry.subtype.as_deref() != Some("prerender")
        && !entry.url.starts_with("devtools://")
        && !entry.url.starts_with("chrome-extension://")
        && !super::view::is_view_url(&entry.url)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(id: &str, kind: &str, opener: Option<&str>) -> TargetInfo {
        TargetInfo {
            target_type: kind.into(),
            opener_id: opener.map(TargetId::new),
            ..TargetInfo::page(TargetId::new(id), &format!("http://127.0.0.1/{id}"))
        }
    }

    #[test]
    fn recovered_tabs_are_their_workspaces_only() {
        // A fresh inventory after a janitor death: the tab looks like any user tab at first.
        let mut registry = Registry::default();
        registry.upsert(&info("user", "page", None));
        registry.upsert(&info("mine", "page", None));
        assert_eq!(
            registry
                .list(&"workspace:b".into(), &"lease:b".into())
                .len(),
            2
        );
        registry.adopt_recovered(&TargetId::new("mine"), "workspace:a");
        let b = registry.list(&"workspace:b".into(), &"lease:b".into());
        assert_eq!(b.len(), 1, "another Workspace no longer sees it: {b:?}");
        assert!(b[0].url.ends_with("/user"));
        let a = registry.list(&"workspace:a".into(), &"lease:a".into());
        let mine = a.iter().find(|v| v.url.ends_with("/mine")).unwrap();
        assert!(mine.managed && !mine.controlled && !mine.controlled_elsewhere);
        assert!(registry.has_window("workspace:a"));
        assert_eq!(
            registry.managed_tabs("workspace:a"),
            vec![TargetId::new("mine")]
        );
        // Its popups are the Workspace's too.
        assert_eq!(
            registry.upsert(&info("popup", "page", Some("mine"))),
            Some("workspace:a".into())
        );
        // An unknown target is ignored.
        registry.adopt_recovered(&TargetId::new("gone"), "workspace:a");
        assert_eq!(registry.managed_tabs("workspace:a").len(), 2);
    }

    #[test]
    fn ids_control_popups_and_isolation() {
        let mut registry = Registry::default();
        registry.upsert(&info("user", "page", None));
        registry.upsert(&info("ui", "browser_ui", None));
        registry.upsert(&info("mine", "page", None));
        registry.adopt(
            &TargetId::new("mine"),
            &"workspace:a".into(),
            &"lease:a".into(),
        );
        assert_eq!(
            registry.upsert(&info("popup", "page", Some("mine"))),
            Some("workspace:a".into())
        );
        assert_eq!(
            registry.upsert(&info("userpopup", "page", Some("user"))),
            None,
            "popups of user tabs are not adopted"
        );

        let a = registry.list(&"workspace:a".into(), &"lease:a".into());
        assert_eq!(a.len(), 4, "user, userpopup, mine, popup; no browser_ui");
        let b = registry.list(&"workspace:b".into(), &"lease:b".into());
        assert_eq!(b.len(), 2, "another Workspace sees only user tabs");
        assert!(b.iter().all(|v| !v.managed));
        // Opaque ids differ per Workspace and resolve only for their owner.
        let a_user = a
            .iter()
            .find(|v| v.url.ends_with("/user"))
            .unwrap()
            .target_id
            .clone();
        let b_user = b
            .iter()
            .find(|v| v.url.ends_with("/user"))
            .unwrap()
            .target_id
            .clone();
        assert_ne!(a_user, b_user);
        assert!(registry.resolve(&"workspace:b".into(), &a_user).is_err());
        let (target, _) = registry.resolve(&"workspace:b".into(), &b_user).unwrap();
        assert_eq!(target, TargetId::new("user"));

        // One controller at a time; release hands it over.
        assert_eq!(
            registry.acquire_control(&target, &"workspace:a".into(), &"lease:a".into()),
            Ok(false)
        );
        assert!(matches!(
            registry.acquire_control(&target, &"workspace:b".into(), &"lease:b".into()),
            Err(TargetError::ControlledElsewhere { .. })
        ));
        assert!(!registry.release_control(&target, &"workspace:b".into(), &"lease:b".into()));
        assert!(registry.release_control(&target, &"workspace:a".into(), &"lease:a".into()));
        // Handed over to another Workspace: its console history must not follow.
        assert_eq!(
            registry.acquire_control(&target, &"workspace:b".into(), &"lease:b".into()),
            Ok(true)
        );
        assert!(registry.release_control(&target, &"workspace:b".into(), &"lease:b".into()));
        assert_eq!(
            registry.acquire_control(&target, &"workspace:b".into(), &"lease:b2".into()),
            Ok(false)
        );

        let known = registry.remove(&target);
        assert_eq!(known.len(), 2);
        assert_eq!(
            registry.resolve(&"workspace:b".into(), &b_user).err(),
            Some(TargetError::NotFound)
        );
        registry.forget_workspace("workspace:a");
        assert!(
            registry
                .list(&"workspace:a".into(), &"lease:a".into())
                .iter()
                .all(|v| !v.controlled)
        );
    }
}
