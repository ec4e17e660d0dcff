//! `browser.upload`: sets an imported `upload_input` Artifact as the selected file of a file
//! input (by Observation ref, by `inputIndex`, or the document's only one) and reads the input
//! back. Without a named input it takes the input of the tab's latest intercepted file
//! chooser, else the document's only file input. Output Artifacts (screenshots, previews, PDFs, downloads) are refused
//! (`artifact_kind_not_allowed`); another Workspace's or client's Artifact is
//! `artifact_not_found`, exactly like an unknown id. On a local browser the protected path goes
//! only into `DOM.setFileInputFiles`; a remote browser's machine does not have that file, so its
//! bytes are streamed into the Broker's isolated world (`page::UploadChunk`) and selected there as
//! a File through a DataTransfer (`page::UploadSetFiles`), with the input's `input` and `change`
//! events. Evidence carries counts and a name-match boolean, never a path or a file name the page
//! reports. The page side is `page::PickFileInput` / `UploadReadback`.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::act::{self, Act, ActionTool, Aimed, Call, Effects, Judged, Steps};
use super::actions::*;
use super::context::{TargetScope, ToolEnv};
use super::error::ToolError;
use super::evidence::{Action, Effect, Evidence, EvidenceReason, Status};
use super::manifest::{Gate, Lane, ToolDef, object};
use super::progress::Subject;
use super::tab::{ControlledTab, PageContext, RefParams, SCRIPT_TIMEOUT};
use crate::cdp::dom::{ResolveNode, SetFileInputFiles};
use crate::cdp::runtime::ReleaseObjectGroup;
use crate::page::{self, FileInputChoice, InputState, PickFileInput, Readback, UploadReadback};
use crate::protocol::errors::{ErrorCode, RpcError};
use crate::version::now_ms;

/// How long the page's `input`/`change` handlers get before the input is read back: page
/// validation that clears or swaps the selection often runs in a timer or a microtask after
/// the event, not in the handler itself.
const UPLOAD_SETTLE: Duration = Duration::from_millis(50);
/// Longest accepted Artifact id.
const MAX_ARTIFACT_ID_CHARS: usize = 128;
/// Largest accepted `inputIndex`.
const MAX_INPUT_INDEX: u32 = 10_000;
/// Bytes of the file per page-script call on a remote browser (base64 makes a call about 1.4 MB).
const REMOTE_CHUNK_BYTES: usize = 1 << 20;
/// Longest wait for the page to build and select a remote upload's File.
const REMOTE_SET_TIMEOUT: Duration = Duration::from_secs(30);

pub fn defs() -> Vec<ToolDef> {
    vec![ToolDef {
        name: "browser.upload",
        description: "Select an imported file (an `upload_input` Artifact from artifacts/import) in a file input of the selected frame: the input of `observationId` + `ref`, the `inputIndex`-th file input of the document (0-based), else the input whose file chooser a click just opened (file_chooser event), else the document's only one. Output Artifacts (screenshots, PDFs, downloads) are refused. The input is read back: evidence `verified` only when exactly one file with the imported name is selected, `mismatch` when the page cleared, swapped or replaced it, `unavailable` when the input is gone. Returns evidence {fileCount, fileNameMatches, ...} (never a path) and a fresh Observation. On a remote browser the file's bytes are sent to the page (its input/change events are then untrusted). A click that opens a file chooser reports the effect `file_chooser_opened`; answer it with this tool.",
        capability: "action.input",
        mutating: true,
        input_schema: object(
            merged(
                merged(
                    ref_properties(),
                    json!({
                        "artifactId": {"type": "string", "minLength": 1, "maxLength": MAX_ARTIFACT_ID_CHARS, "x-browser-pilot-sensitivity": ["user_file"], "description": "Imported upload_input Artifact whose file to select."},
                        "inputIndex": {"type": "integer", "minimum": 0, "maximum": MAX_INPUT_INDEX, "description": "0-based index of the document's file input."},
                    }),
                ),
                observe_property(),
            ),
            &["artifactId"],
        ),
        output_schema: action_output(upload_evidence_schema()),
        sensitivity_input: &["user_file"],
        sensitivity_output: &["browser_data"],
        lane: Lane::Ordinary,
        gate: Gate::InTool,
        handler: handler!(Target: upload),
    }]
}

fn upload_evidence_schema() -> Value {
    let mut schema = evidence_schema("upload");
    let properties = &mut schema["properties"];
    properties["reason"] =
        json!({"enum": ["files_cleared", "files_replaced", "input_replaced", "input_removed"]});
    properties["fileCount"] = json!({"type": "integer", "minimum": 0});
    properties["expectedFileCount"] = json!({"const": 1});
    properties["fileNameMatches"] = json!({"type": "boolean"});
    properties["multiple"] = json!({"type": "boolean"});
    schema
}

#[derive(Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
struct UploadParams {
    #[serde(flatten)]
    target: RefParams,
    artifact_id: String,
    input_index: Option<u32>,
    #[serde(flatten)]
    observe: ObserveArgument,
}

async fn upload(
    env: &ToolEnv,
    scope: &TargetScope<'_>,
    params: UploadParams,
) -> Result<Value, ToolError> {
    let by_ref = params.target.given();
    if by_ref && params.input_index.is_some() {
        return Err(ToolError::from(
            RpcError::invalid_params(
                "name the file input by observationId + ref or by inputIndex, not both",
            )
            .with_context("path", json!("arguments.inputIndex")),
        ));
    }
    // The Artifact is checked before the tab is touched: a refused one never dispatches.
    let (artifact, path) = env
        .artifacts
        .upload_input(scope.workspace_id, &params.artifact_id, now_ms())
        .await?;
    let expected_name = artifact
        .file_name
        .clone()
        .or_else(|| {
            path.file_name()
                .map(|name| name.to_string_lossy().into_owned())
        })
        .unwrap_or_default();
    // Chromium accepts a path that does not exist (an empty file of that name): check it here.
    let present = tokio::fs::metadata(&path)
        .await
        .is_ok_and(|meta| meta.is_file() && meta.len() == artifact.byte_len);
    let file = match (present, path.to_str()) {
        (true, Some(file)) => file.to_owned(),
        _ => {
            return Err(ToolError::from(RpcError::new(
                ErrorCode::InternalError,
                "the imported file is missing from protected storage",
            )));
        }
    };
    let call = Call::of(&params, &params.observe);
    let upload = Upload {
        params,
        by_ref,
        file,
        expected_name,
        mime_type: artifact.mime_type,
        byte_len: artifact.byte_len,
    };
    act::run(env, scope, call, upload).await
}

/// `browser.upload` in the action pipeline, with its Artifact already checked.
struct Upload {
    params: UploadParams,
    by_ref: bool,
    /// The protected path of the imported file.
    file: String,
    expected_name: String,
    mime_type: String,
    byte_len: u64,
}

impl Upload {
    /// A remote browser: the file's bytes, read from the protected path, go to the picked
    /// input's world in pieces (nothing of the page changes yet).
    async fn send_bytes(&self, act: &mut Act<'_>) -> Result<(), ToolError> {
        use base64::Engine as _;
        use tokio::io::AsyncReadExt;
        let missing = |error: std::io::Error| {
            tracing::warn!(%error, "reading an imported file for a remote upload");
            ToolError::from(RpcError::new(
                ErrorCode::InternalError,
                "the imported file is missing from protected storage",
            ))
        };
        let mut file = tokio::fs::File::open(&self.file).await.map_err(missing)?;
        let mut buffer = vec![0_u8; REMOTE_CHUNK_BYTES];
        let (mut sent, mut first) = (0_u64, true);
        loop {
            let mut filled = 0;
            while filled < buffer.len() {
                match file.read(&mut buffer[filled..]).await.map_err(missing)? {
                    0 => break,
                    n => filled += n,
                }
            }
            if filled == 0 && !first {
                break;
            }
            let chunk = page::UploadChunk {
                reset: first,
                base64: base64::engine::general_purpose::STANDARD.encode(&buffer[..filled]),
            };
            let held = act.tab.run(&act.ctx, &chunk).await?;
            sent += filled as u64;
            first = false;
            if held.received != sent {
                return Err(ToolError::from(RpcError::new(
                    ErrorCode::InternalError,
                    "the page lost part of the upload's bytes",
                )));
            }
            if filled < buffer.len() {
                break;
            }
        }
        match sent == self.byte_len {
            true => Ok(()),
            false => Err(ToolError::from(RpcError::new(
                ErrorCode::InternalError,
                "the imported file changed in protected storage",
            ))),
        }
    }
}

/// The file input picked, as the page reported it before the upload, and its element handle.
struct UploadAim {
    multiple: bool,
    file_count: u32,
    element: page::RemoteObjectId,
}

impl ActionTool for Upload {
    type Aim = UploadAim;
    /// The read-back: `None` when a dialog blocks the page, `Some(None)` when it failed.
    type Read = Option<Option<Readback>>;
    const ACTION: Action = Action::Upload;
    const STEPS: Steps = Steps {
        effects: true,
        late_watch: false,
    };

    async fn aim(&mut self, act: &mut Act<'_>) -> Result<Aimed<UploadAim>, ToolError> {
        let (ctx, scope) = (&act.ctx, act.scope);
        let tab = &mut act.tab;
        let (choice, subject) = match (self.by_ref, self.params.input_index) {
            (true, _) => {
                let (target, summary) =
                    tab.resolve_ref(scope, &ctx.frame_id, &self.params.target)?;
                let subject = Subject::RefPosition {
                    element_ref: u64::from(target.element_ref),
                    role: summary.role,
                };
                (FileInputChoice::Ref(target), subject)
            }
            (false, Some(index)) => (FileInputChoice::Index(index), Subject::Page),
            (false, None) => match chooser_input(tab, ctx).await {
                Some(index) => (FileInputChoice::Index(index), Subject::Page),
                None => (FileInputChoice::Only, Subject::Page),
            },
        };
        let picked = tab.run(ctx, &PickFileInput(choice)).await?;
        let element = tab.calls().picked_file_input(ctx).await?.ok_or_else(|| {
            ToolError::from(RpcError::new(
                ErrorCode::StaleRef,
                "the file input left the document",
            ))
        })?;
        if tab.calls().remote_browser() {
            self.send_bytes(act).await?;
        }
        let own = UploadAim {
            multiple: picked.multiple,
            file_count: picked.file_count,
            element,
        };
        Ok(Aimed::at("file_input", subject, own))
    }

    async fn dispatch(
        &mut self,
        act: &mut Act<'_>,
        aimed: &mut Aimed<UploadAim>,
    ) -> Result<Option<Option<Readback>>, ToolError> {
        let client = act.tab.input();
        // What the page script refused, when it did (not a CDP failure: nothing was set).
        let refused = std::sync::Arc::new(std::sync::Mutex::new(None));
        let dialog = match client.remote_browser() {
            false => {
                let set = SetFileInputFiles {
                    files: vec![self.file.clone()],
                    object_id: aimed.own.element.as_str().to_owned(),
                };
                let session = act.ctx.session.clone();
                act.race(async move {
                    client
                        .execute(&session, &set, INPUT_TIMEOUT)
                        .await
                        .map(|_| ())
                })
                .await?
            }
            true => {
                let set = page::UploadSetFiles {
                    name: self.expected_name.clone(),
                    mime_type: self.mime_type.clone(),
                    byte_len: self.byte_len,
                };
                let ctx = PageContext {
                    session: act.ctx.session.clone(),
                    frame_id: act.ctx.frame_id.clone(),
                    context: act.ctx.context,
                    session_root: act.ctx.session_root,
                };
                let slot = refused.clone();
                act.race(async move {
                    match ctx.run_within(&client, &set, REMOTE_SET_TIMEOUT).await {
                        Ok(_) => Ok(()),
                        Err(page::PageError::Cdp(error)) => Err(error),
                        Err(error) => {
                            *slot.lock().expect("refusal slot") = Some(error);
                            Ok(())
                        }
                    }
                })
                .await?
            }
        };
        if let Some(error) = refused.lock().expect("refusal slot").take() {
            return Err(ToolError::from(error));
        }
        let (tab, ctx) = (&act.tab, &act.ctx);
        if !dialog {
            // The element handle is not needed any more (best effort).
            let release = ReleaseObjectGroup {
                object_group: page::REF_OBJECT_GROUP.to_owned(),
            };
            let _ = tab.execute(&ctx.session, &release, SCRIPT_TIMEOUT).await;
        }
        Ok(match dialog {
            true => None,
            false => {
                tokio::time::sleep(UPLOAD_SETTLE).await;
                let script = UploadReadback {
                    expected_name: self.expected_name.clone(),
                };
                Some(tab.run(ctx, &script).await.ok())
            }
        })
    }

    fn judge(
        &self,
        aimed: &Aimed<UploadAim>,
        readback: Option<Option<Readback>>,
        effects: &Effects,
    ) -> Result<Judged, ToolError> {
        let own = &aimed.own;
        let list = effects.list.clone();
        Ok(upload_evidence(own.multiple, own.file_count, readback, list).into())
    }
}

/// The input of the tab's latest intercepted file chooser, as its index among the file inputs
/// of the selected frame's document, when it is one of them (the default when the call names no
/// input: the agent answers the chooser its click opened, even for a hidden input that is not
/// in any Observation).
async fn chooser_input(tab: &mut ControlledTab, ctx: &PageContext) -> Option<u32> {
    let (session, node) = tab.last_file_chooser()?;
    if session != ctx.session {
        return None;
    }
    let resolve = ResolveNode {
        backend_node_id: node,
        execution_context_id: Some(ctx.context.get()),
        object_group: Some(page::REF_OBJECT_GROUP.to_owned()),
    };
    let object = tab
        .execute(&ctx.session, &resolve, SCRIPT_TIMEOUT)
        .await
        .ok()?
        .object
        .object_id?;
    tab.calls()
        .file_input_index(&ctx.session, &object)
        .await
        .ok()
        .flatten()
}

/// Upload evidence from the read-back (`None`: a dialog blocks the page; `Some(None)`: the
/// read-back failed, e.g. the document was replaced) and the action's other effects.
fn upload_evidence(
    multiple: bool,
    count_before: u32,
    readback: Option<Option<Readback>>,
    mut effects: Vec<Effect>,
) -> Evidence {
    let read = readback.flatten();
    let (status, reason) = match read.map(|r| (r.state, r.file_count, r.name_matches)) {
        None if readback.is_none() => (Status::Unavailable, None),
        None => (Status::Unavailable, Some(EvidenceReason::InputRemoved)),
        Some((InputState::Connected, 1, true)) => (Status::Verified, None),
        Some((InputState::Connected, 0, _)) => {
            (Status::Mismatch, Some(EvidenceReason::FilesCleared))
        }
        Some((InputState::Connected, _, _)) => {
            (Status::Mismatch, Some(EvidenceReason::FilesReplaced))
        }
        Some((InputState::Replaced, _, _)) => {
            (Status::Mismatch, Some(EvidenceReason::InputReplaced))
        }
        Some((InputState::Removed | InputState::Unreadable, _, _)) => {
            (Status::Unavailable, Some(EvidenceReason::InputRemoved))
        }
    };
    let connected = read.filter(|r| r.state == InputState::Connected);
    if connected.is_some_and(|r| r.name_matches || r.file_count != count_before) {
        effects.insert(0, Effect::FilesChanged);
    }
    let mut evidence = Evidence::new(Action::Upload, status, "file_input", effects);
    evidence.reason = reason;
    if let Some(read) =
        read.filter(|r| matches!(r.state, InputState::Connected | InputState::Replaced))
    {
        evidence.set("fileCount", read.file_count);
        evidence.set("fileNameMatches", read.name_matches);
    }
    evidence.set("expectedFileCount", 1);
    evidence.set("multiple", multiple);
    evidence
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(state: InputState, file_count: u32, name_matches: bool) -> Option<Option<Readback>> {
        Some(Some(Readback {
            state,
            file_count,
            name_matches,
        }))
    }

    fn judged(readback: Option<Option<Readback>>) -> Value {
        upload_evidence(false, 0, readback, Vec::new()).to_json()
    }

    #[test]
    fn verified_only_for_exactly_the_expected_file() {
        let held = judged(read(InputState::Connected, 1, true));
        assert_eq!(held["status"], "verified");
        assert_eq!(held["effects"], json!(["files_changed"]));
        assert_eq!(
            (&held["fileCount"], &held["fileNameMatches"]),
            (&json!(1), &json!(true))
        );
        let cleared = judged(read(InputState::Connected, 0, false));
        assert_eq!(
            (&cleared["status"], &cleared["reason"]),
            (&json!("mismatch"), &json!("files_cleared"))
        );
        let swapped = judged(read(InputState::Connected, 1, false));
        assert_eq!(swapped["reason"], "files_replaced");
        let doubled = judged(read(InputState::Connected, 2, false));
        assert_eq!(doubled["reason"], "files_replaced");
        let replaced = judged(read(InputState::Replaced, 0, false));
        assert_eq!(
            (&replaced["status"], &replaced["reason"]),
            (&json!("mismatch"), &json!("input_replaced"))
        );
        assert_eq!(replaced["effects"], json!([]));
    }

    #[test]
    fn a_gone_input_is_unavailable_and_says_nothing_about_files() {
        for readback in [read(InputState::Removed, 0, false), Some(None)] {
            let gone = judged(readback);
            assert_eq!(
                (&gone["status"], &gone["reason"]),
                (&json!("unavailable"), &json!("input_removed"))
            );
            assert!(gone.get("fileCount").is_none());
        }
        let blocked = upload_evidence(true, 0, None, vec![Effect::DialogOpened]).to_json();
        assert_eq!(blocked["status"], "unavailable");
        assert_eq!(blocked["effects"], json!(["dialog_opened"]));
        assert_eq!(blocked["multiple"], true);
    }
}
