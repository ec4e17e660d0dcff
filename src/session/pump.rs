//! The CDP event pump: browser events in, journaled Workspace events out.
//!
//! Target discovery keeps the registry current (the janitor enabled it); a popup of a managed
//! tab becomes a managed tab of the same Workspace (`popup.opened`); a destroyed tab emits
//! `target.detached`; a URL change of a managed or controlled tab emits `navigation`; a new main
//! document emits `document.changed`. An event from an older generation is dropped before it is
//! journaled. When the janitor's stream ends, the browser is gone: `connection.lost`.

use std::collections::HashMap;

use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::service::{BrowserService, Live};
use crate::cdp::{CdpEvent, SessionId, TargetId, TargetInfo};
use crate::events::Emit;

/// Longest URL copied into an event payload.
const MAX_EVENT_URL_CHARS: usize = 2048;

pub async fn run(
    service: BrowserService,
    live: Live,
    mut events: mpsc::Receiver<CdpEvent>,
    mut janitor: tokio::process::Child,
) {
    let mut sessions: HashMap<SessionId, TargetId> = HashMap::new();
    while let Some(event) = events.recv().await {
        if service
            .live()
            .is_none_or(|now| now.generation != live.generation)
        {
            continue;
        }
        for emit in on_event(&service, &mut sessions, event) {
            let mut emit = emit;
            emit.generation = Some(live.generation);
            if let Err(error) = service.events().emit(emit).await {
                tracing::debug!(%error, "browser event not journaled (workspace gone)");
            }
        }
    }
    let _ = janitor.wait().await;
    service.on_lost(&live).await;
}

fn on_event(
    service: &BrowserService,
    sessions: &mut HashMap<SessionId, TargetId>,
    event: CdpEvent,
) -> Vec<Emit> {
    match (event.session.as_ref(), event.method.as_str()) {
        (None, "Target.targetCreated") => match target_info(&event.params) {
            Some(info) => on_created(service, &info),
            None => Vec::new(),
        },
        (None, "Target.targetInfoChanged") => match target_info(&event.params) {
            Some(info) => on_info_changed(service, &info),
            None => Vec::new(),
        },
        (None, "Target.targetDestroyed") => {
            let Some(target) = event
                .params
                .get("targetId")
                .and_then(Value::as_str)
                .map(TargetId::new)
            else {
                return Vec::new();
            };
            let known = service.with_registry(|registry| registry.remove(&target));
            known
                .into_iter()
                .map(|(workspace_id, opaque)| {
                    let mut emit = Emit::new(
                        &workspace_id,
                        "target.detached",
                        json!({"targetId": opaque, "reason": "closed"}),
                    );
                    emit.target_id = Some(opaque);
                    emit
                })
                .collect()
        }
        (None, "Target.attachedToTarget") => {
            let session = event
                .params
                .get("sessionId")
                .and_then(Value::as_str)
                .map(SessionId::new);
            let target = event
                .params
                .pointer("/targetInfo/targetId")
                .and_then(Value::as_str)
                .map(TargetId::new);
            if let (Some(session), Some(target)) = (session, target) {
                sessions.insert(session, target);
            }
            Vec::new()
        }
        (None, "Target.detachedFromTarget") => {
            if let Some(session) = event
                .params
                .get("sessionId")
                .and_then(Value::as_str)
                .map(SessionId::new)
            {
                sessions.remove(&session);
            }
            Vec::new()
        }
        (Some(session), "Page.javascriptDialogOpening") => {
            let Some(target) = sessions.get(session).cloned() else {
                return Vec::new();
            };
            on_dialog_opening(service, session, &target, &event.params)
        }
        (Some(session), "Page.javascriptDialogClosed") => {
            let Some(target) = sessions.get(session).cloned() else {
                return Vec::new();
            };
            let closed = service.with_registry(|registry| registry.dialogs.remove(&target));
            let Some(dialog) = closed else {
                return Vec::new();
            };
            let accepted = event
                .params
                .get("result")
                .and_then(Value::as_bool)
                .unwrap_or(false);
            for_interested(service, &target, |opaque| {
                (
                    "dialog",
                    json!({"dialogId": dialog.id, "state": "closed", "type": dialog.dialog_type, "accepted": accepted, "targetId": opaque}),
                )
            })
        }
        (Some(session), "Page.frameNavigated") => {
            let is_main = event.params.pointer("/frame/parentId").is_none();
            let Some(target) = sessions.get(session).cloned() else {
                return Vec::new();
            };
            match is_main {
                true => {
                    let url = bounded(
                        event
                            .params
                            .pointer("/frame/url")
                            .and_then(Value::as_str)
                            .unwrap_or(""),
                    );
                    for_interested(service, &target, |opaque| {
                        ("document.changed", json!({"targetId": opaque, "url": url}))
                    })
                }
                false => Vec::new(),
            }
        }
        _ => Vec::new(),
    }
}

/// How long a dialog may stay unanswered before `watchdog.dialog_unhandled` (contract: 15 s).
const DIALOG_UNHANDLED_AFTER: std::time::Duration = std::time::Duration::from_secs(15);

fn on_dialog_opening(
    service: &BrowserService,
    session: &SessionId,
    target: &TargetId,
    params: &Value,
) -> Vec<Emit> {
    let dialog = crate::session::DialogInfo {
        id: crate::protocol::ids::new_id(crate::protocol::ids::IdKind::Dialog),
        target: target.clone(),
        session: session.clone(),
        dialog_type: params
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("alert")
            .to_owned(),
        message: params
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or("")
            .chars()
            .take(2000)
            .collect(),
        default_prompt: params
            .get("defaultPrompt")
            .and_then(Value::as_str)
            .map(|p| p.chars().take(2000).collect()),
        url: bounded(params.get("url").and_then(Value::as_str).unwrap_or("")),
        opened_at: crate::version::now_ms(),
    };
    service.with_registry(|registry| registry.dialogs.insert(target.clone(), dialog.clone()));
    service.signal_dialog(target);
    // Never answered automatically; after 15 s the Workspaces are told once.
    let watchdog = service.clone();
    let (dialog_id, watched) = (dialog.id.clone(), target.clone());
    tokio::spawn(async move {
        tokio::time::sleep(DIALOG_UNHANDLED_AFTER).await;
        let still_open = watchdog.with_registry(|registry| {
            registry
                .dialogs
                .get(&watched)
                .is_some_and(|d| d.id == dialog_id)
        });
        if still_open {
            for emit in for_interested(&watchdog, &watched, |opaque| {
                (
                    "watchdog.dialog_unhandled",
                    json!({"dialogId": dialog_id, "targetId": opaque, "pendingMs": DIALOG_UNHANDLED_AFTER.as_millis() as u64}),
                )
            }) {
                let _ = watchdog.events().emit(emit).await;
            }
        }
    });
    for_interested(service, target, |opaque| {
        (
            "dialog",
            json!({"dialogId": dialog.id, "state": "opened", "type": dialog.dialog_type, "message": dialog.message, "url": dialog.url, "targetId": opaque}),
        )
    })
}

fn target_info(params: &Value) -> Option<TargetInfo> {
    serde_json::from_value(params.get("targetInfo")?.clone()).ok()
}

fn on_created(service: &BrowserService, info: &TargetInfo) -> Vec<Emit> {
    let adopted = service.with_registry(|registry| {
        let owner = registry.upsert(info)?;
        let opaque = registry.opaque_id(&owner, &info.target_id);
        let opener = info
            .opener_id
            .as_ref()
            .map(|o| registry.opaque_id(&owner, o));
        Some((owner, opaque, opener))
    });
    let Some((workspace_id, opaque, opener)) = adopted else {
        return Vec::new();
    };
    let mut popup = Emit::new(
        &workspace_id,
        "popup.opened",
        json!({"targetId": opaque, "openerTargetId": opener, "url": bounded(&info.url)}),
    );
    popup.target_id = Some(opaque.clone());
    popup.sensitivity = "browser_data";
    let mut attached = Emit::new(
        &workspace_id,
        "target.attached",
        json!({"targetId": opaque, "managed": true, "popup": true}),
    );
    attached.target_id = Some(opaque);
    vec![attached, popup]
}

fn on_info_changed(service: &BrowserService, info: &TargetInfo) -> Vec<Emit> {
    let url_changed = service.with_registry(|registry| {
        let before = registry.url_of(&info.target_id);
        registry.upsert(info);
        before.is_some_and(|before| before != info.url)
    });
    match url_changed {
        true => for_interested(service, &info.target_id, |opaque| {
            (
                "navigation",
                json!({"targetId": opaque, "url": bounded(&info.url)}),
            )
        }),
        false => Vec::new(),
    }
}

/// One event per Workspace that manages or controls the tab.
fn for_interested(
    service: &BrowserService,
    target: &TargetId,
    make: impl Fn(&str) -> (&'static str, Value),
) -> Vec<Emit> {
    let interested = service.with_registry(|registry| registry.interested_workspaces(target));
    interested
        .into_iter()
        .map(|(workspace_id, opaque)| {
            let (event_type, payload) = make(&opaque);
            let mut emit = Emit::new(&workspace_id, event_type, payload);
            emit.target_id = Some(opaque);
            emit.sensitivity = "browser_data";
            emit
        })
        .collect()
}

fn bounded(url: &str) -> String {
    url.chars().take(MAX_EVENT_URL_CHARS).collect()
}
