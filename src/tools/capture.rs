//! Capture tools: `browser.capture` (a screenshot stored as an Artifact, with a model-sized
//! preview for large images) and `browser.pdf` (the page printed to PDF). Also the one mapping
//! of [`ArtifactError`] to agent-visible errors, shared with the Broker's `artifacts/*` methods.
//!
//! Results carry Artifact descriptors only: never image bytes, never a path. Bytes go straight
//! from the CDP reply into protected storage, except for annotated viewport captures
//! (`annotations`), whose image is first drawn on, with the live boxes of an Observation's refs,
//! on an unattached canvas in the Broker's isolated world (`page::draw_annotations`).

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::context::{CallScope, TargetScope, ToolEnv};
use super::dialogs::unless_dialog;
use super::error::ToolError;
use super::manifest::{Gate, Lane, ToolDef, object, open_object};
use super::tab::{Awaited, ControlledTab, LoadMark, LoadPhase, PageContext, TabCalls};
use crate::artifacts::{
    Artifact, ArtifactError, ArtifactKind, NewArtifact, decode_base64, dimensions_base64,
};
use crate::cdp::io;
use crate::cdp::page::{CaptureScreenshot, GetLayoutMetrics, PrintToPdf, Viewport};
use crate::cdp::{CdpError, Command, SessionId};
use crate::page::{
    ANNOTATION_MAX_REFS, AnnotationBoxes, Annotations, ExecutionContextId, Find, ScriptErrorCode,
    ViewportSize, image_boxes,
};
use crate::protocol::errors::{ErrorCode, RemediationAction, RpcError};
use crate::version::now_ms;

/// Longest side, in pixels, of a screenshot returned as is. Larger captures default to a preview
/// scaled down to this size: about what vision models take in before scaling images themselves,
/// and small enough to keep a full-page capture cheap for a host to read.
pub const PREVIEW_MAX_SIDE: u32 = 1600;
/// Longest accepted CSS selector.
const MAX_SELECTOR_CHARS: usize = 1024;
/// Longest accepted `pageRanges`.
const MAX_PAGE_RANGES_CHARS: usize = 256;
/// JPEG quality when the call gives none (Chromium's own default).
const DEFAULT_JPEG_QUALITY: u64 = 80;
/// Cap on one CDP call of these tools; the Command deadline usually ends it sooner. A full-page
/// capture of a very long page takes seconds.
const CALL_TIMEOUT: Duration = Duration::from_secs(60);
/// Bytes asked for per `IO.read` of a PDF stream: large enough for few round trips, small
/// enough that no single CDP message gets big.
const PDF_READ_CHUNK_BYTES: u64 = 1024 * 1024;
/// Sensitivity of page captures.
const CAPTURE_SENSITIVITY: &str = "browser_data";

/// The schema of an Artifact descriptor (`result.artifact`).
pub fn descriptor_schema() -> Value {
    open_object(
        json!({
            "id": {"type": "string"},
            "kind": {"enum": ArtifactKind::ALL.iter().map(|k| k.as_str()).collect::<Vec<_>>()},
            "mimeType": {"type": "string"},
            "byteLength": {"type": "integer", "minimum": 0},
            "sha256": {"type": "string", "minLength": 64, "maxLength": 64},
            "createdAt": {"type": "integer"},
            "expiresAt": {"type": "integer"},
            "retained": {"type": "boolean"},
            "sensitivity": {"type": "string"},
            "workspaceId": {"type": "string"},
            "previewOf": {"type": "string"},
            "width": {"type": "integer", "minimum": 0},
            "height": {"type": "integer", "minimum": 0},
            "fileName": {"type": "string", "x-browser-pilot-sensitivity": ["user_file"]},
        }),
        &[
            "id",
            "kind",
            "mimeType",
            "byteLength",
            "sha256",
            "createdAt",
            "expiresAt",
            "sensitivity",
            "workspaceId",
        ],
    )
}

pub fn defs() -> Vec<ToolDef> {
    vec![
        ToolDef {
            name: "browser.capture",
            description: "Screenshot a controlled tab into an Artifact: the viewport by default, the whole page (`fullPage`), or one element's box (`selector`, the first match). A viewport capture may draw `annotations: {observationId, refs?}`: each ref's live box (revalidated, clipped to the viewport) outlined with its ref number (refs omitted: the first 200 refs of the Observation); the result then has `annotationCount` and `skippedRefs`. An image whose longest side exceeds 1600 px is returned as a `preview` Artifact scaled to 1600 px; `includeOriginal: true` also stores the full-size image as `original` (the preview's `previewOf`). Returns descriptors only; read the bytes with artifacts/get or artifacts/export.",
            capability: "observation.read",
            mutating: false,
            input_schema: object(
                json!({
                    "format": {"enum": ["png", "jpeg"], "description": "Image format; default png."},
                    "quality": {"type": "integer", "minimum": 0, "maximum": 100, "description": "JPEG quality from 0 to 100; jpeg only."},
                    "fullPage": {"type": "boolean", "description": "Capture the whole scrollable page when true."},
                    "selector": {"type": "string", "minLength": 1, "maxLength": MAX_SELECTOR_CHARS, "description": "CSS selector of the one element to capture."},
                    "includeOriginal": {"type": "boolean", "description": "Also keep the full-size image when scaled down."},
                    "annotations": super::manifest::described(
                        object(
                            json!({
                                "observationId": {"type": "string", "minLength": 1, "maxLength": 128, "description": "Observation whose refs are drawn."},
                                "refs": {"type": "array", "minItems": 1, "maxItems": ANNOTATION_MAX_REFS, "items": {"type": "integer", "minimum": 1}, "description": "Refs to draw; default the first 200."},
                            }),
                            &["observationId"],
                        ),
                        "Outline these refs of an Observation on the image.",
                    ),
                }),
                &[],
            ),
            output_schema: open_object(
                json!({
                    "artifact": descriptor_schema(),
                    "original": descriptor_schema(),
                    "width": {"type": "integer", "minimum": 0},
                    "height": {"type": "integer", "minimum": 0},
                    "annotationCount": {"type": "integer", "minimum": 0, "maximum": ANNOTATION_MAX_REFS},
                    "skippedRefs": {"type": "array", "maxItems": ANNOTATION_MAX_REFS, "items": open_object(json!({
                        "ref": {"type": "integer", "minimum": 1},
                        "reason": {"enum": ["unknown_ref", "stale", "not_visible", "outside_viewport"]},
                    }), &["ref", "reason"])},
                }),
                &["artifact", "width", "height"],
            ),
            sensitivity_input: &[],
            sensitivity_output: &[CAPTURE_SENSITIVITY, "user_file"],
            lane: Lane::Ordinary,
            gate: Gate::InTool,
            handler: handler!(Target: capture),
        },
        ToolDef {
            name: "browser.pdf",
            description: "Print a controlled tab to PDF into an Artifact (headless browsers; headed Chrome cannot print over CDP: pdf_unavailable). Returns the descriptor only.",
            capability: "observation.read",
            mutating: false,
            input_schema: object(
                json!({
                    "landscape": {"type": "boolean", "description": "Landscape paper orientation when true."},
                    "printBackground": {"type": "boolean", "description": "Print background colours and images when true."},
                    "scale": {"type": "number", "minimum": 0.1, "maximum": 2, "description": "Rendering scale from 0.1 to 2; default 1."},
                    "pageRanges": {"type": "string", "minLength": 1, "maxLength": MAX_PAGE_RANGES_CHARS, "description": "Pages to print, such as 1-3,5; default all."},
                }),
                &[],
            ),
            output_schema: open_object(json!({"artifact": descriptor_schema()}), &["artifact"]),
            sensitivity_input: &[],
            sensitivity_output: &[CAPTURE_SENSITIVITY, "user_file"],
            lane: Lane::Ordinary,
            gate: Gate::InTool,
            handler: handler!(Target: pdf),
        },
    ]
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    Png,
    Jpeg,
}

impl Format {
    fn cdp(self) -> &'static str {
        match self {
            Format::Png => "png",
            Format::Jpeg => "jpeg",
        }
    }

    fn mime(self) -> &'static str {
        match self {
            Format::Png => "image/png",
            Format::Jpeg => "image/jpeg",
        }
    }
}

/// What part of the page to capture.
#[derive(Debug, Clone, PartialEq)]
enum Area {
    Viewport,
    FullPage,
    Element(String),
}

/// The Observation refs an annotated capture draws.
#[derive(Debug, Clone, PartialEq)]
struct AnnotationRequest {
    observation_id: String,
    /// `None`: the first [`ANNOTATION_MAX_REFS`] refs in document order. Duplicates removed.
    refs: Option<Vec<u32>>,
}

#[derive(Debug, Clone, PartialEq)]
struct CaptureOptions {
    format: Format,
    quality: Option<u64>,
    area: Area,
    include_original: bool,
    annotations: Option<AnnotationRequest>,
}

/// `browser.capture`'s arguments.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct CaptureParams {
    /// `png` or `jpeg` (the schema's enum).
    format: Option<String>,
    quality: Option<u64>,
    full_page: Option<bool>,
    selector: Option<String>,
    annotations: Option<AnnotationParams>,
    include_original: Option<bool>,
}

/// The `annotations` argument: an Observation and, optionally, some of its refs.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct AnnotationParams {
    observation_id: String,
    refs: Option<Vec<u64>>,
}

impl CaptureOptions {
    /// The schema already checked types and ranges; these are the cross-field rules.
    fn parse(params: CaptureParams) -> Result<CaptureOptions, ToolError> {
        let format = match params.format.as_deref() {
            Some("jpeg") => Format::Jpeg,
            _ => Format::Png,
        };
        let quality = params.quality;
        if quality.is_some() && format == Format::Png {
            return Err(ToolError::from(
                RpcError::invalid_params("\"quality\" applies to jpeg only")
                    .with_context("path", json!("arguments.quality")),
            ));
        }
        let full_page = params.full_page == Some(true);
        let area = match (full_page, params.selector) {
            (true, Some(_)) => {
                return Err(ToolError::from(
                    RpcError::invalid_params("\"fullPage\" and \"selector\" cannot be combined")
                        .with_context("path", json!("arguments.selector")),
                ));
            }
            (true, None) => Area::FullPage,
            (false, Some(selector)) => Area::Element(selector),
            (false, None) => Area::Viewport,
        };
        let annotations = params.annotations.map(|request| {
            let refs = request.refs.map(|refs| {
                let mut unique: Vec<u32> = Vec::new();
                for r in refs {
                    let r = u32::try_from(r).unwrap_or(u32::MAX);
                    if !unique.contains(&r) {
                        unique.push(r);
                    }
                }
                unique
            });
            AnnotationRequest {
                observation_id: request.observation_id,
                refs,
            }
        });
        if annotations.is_some() && area != Area::Viewport {
            let other = match area {
                Area::FullPage => "fullPage",
                _ => "selector",
            };
            return Err(ToolError::from(
                RpcError::invalid_params(format!(
                    "\"annotations\" apply to viewport captures only, not with \"{other}\""
                ))
                .with_context("path", json!("arguments.annotations")),
            ));
        }
        Ok(CaptureOptions {
            format,
            quality,
            area,
            include_original: params.include_original == Some(true),
            annotations,
        })
    }
}

/// A rectangle in CSS pixels, document coordinates (what `Page.captureScreenshot` clips by).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Region {
    x: f64,
    y: f64,
    width: f64,
    height: f64,
}

/// The factor that brings an image whose longest side is `side` pixels down to
/// [`PREVIEW_MAX_SIDE`], or `None` if it already fits.
fn preview_scale(side: f64) -> Option<f64> {
    match side > f64::from(PREVIEW_MAX_SIDE) {
        true => Some(f64::from(PREVIEW_MAX_SIDE) / side),
        false => None,
    }
}

/// How long a capture of a tab that reads as visible may take before the tab is kept rendering
/// as a hidden one (a visible tab's capture took 20 to 60 ms on the 2-core machine).
const VISIBLE_PATIENCE: Duration = Duration::from_millis(250);

/// Time left for one CDP call.
fn call_timeout(scope: &CallScope) -> Duration {
    scope
        .deadline
        .saturating_duration_since(tokio::time::Instant::now())
        .min(CALL_TIMEOUT)
}

/// The tab a capture works on.
struct Tab<'a> {
    calls: TabCalls,
    session: SessionId,
    scope: &'a CallScope,
    /// Whether the tab's document is known to be hidden (then a capture keeps it rendering from
    /// the start): true unless its isolated world read `visibilityState` as visible. Focus
    /// emulation makes a hidden tab read as visible too, so a capture of a "visible" tab that
    /// takes longer than [`VISIBLE_PATIENCE`] starts the screencast then.
    hidden: bool,
}

impl Tab<'_> {
    async fn execute<C: Command>(&self, command: &C) -> Result<C::Reply, CdpError> {
        self.calls
            .execute(&self.session, command, call_timeout(self.scope))
            .await
    }

    /// One `Page.captureScreenshot` of `region` at `scale`; returns the base64 image. Anything
    /// but the viewport is captured beyond it, so the page neither scrolls nor resizes. Always
    /// clipped, so viewport, page and element share one path and a large viewport is previewed
    /// with one capture rather than two.
    async fn screenshot(
        &self,
        options: &CaptureOptions,
        region: Region,
        scale: f64,
    ) -> Result<String, ToolError> {
        let command = CaptureScreenshot {
            format: options.format.cdp(),
            quality: match options.format {
                Format::Jpeg => Some(options.quality.unwrap_or(DEFAULT_JPEG_QUALITY)),
                Format::Png => None,
            },
            // A plain viewport capture at its own size is what Chromium captures without a clip
            // (the visible viewport, scrollbars included), and faster: a clip costs Chromium
            // about 20 ms more here. Annotations are drawn in the clipped content area.
            clip: match options.area == Area::Viewport
                && scale == 1.0
                && options.annotations.is_none()
            {
                true => None,
                false => Some(Viewport {
                    x: region.x,
                    y: region.y,
                    width: region.width,
                    height: region.height,
                    scale,
                }),
            },
            capture_beyond_viewport: options.area != Area::Viewport,
            optimize_for_speed: true,
        };
        // A hidden tab renders no frames of its own: keep it rendering for this capture.
        let shot = self.execute(&command);
        let timeout = call_timeout(self.scope);
        let reply = match self.hidden {
            true => self.calls.rendering(&self.session, timeout, shot).await,
            false => {
                self.calls
                    .when_slow(&self.session, timeout, VISIBLE_PATIENCE, shot)
                    .await
            }
        };
        Ok(reply?.data)
    }

    /// The visible viewport and the whole document, in document coordinates, and the device
    /// pixel ratio (the deprecated device-pixel `visualViewport` over its CSS twin), in one call.
    async fn layout(&self) -> Result<Layout, ToolError> {
        let metrics = self.execute(&GetLayoutMetrics {}).await?;
        let number = |value: &Value| value.as_f64().unwrap_or(0.0);
        let css = &metrics.css_visual_viewport;
        let content = &metrics.css_content_size;
        let css_width = number(&css["clientWidth"]);
        let device_width = metrics
            .visual_viewport
            .as_ref()
            .map_or(0.0, |viewport| number(&viewport["clientWidth"]));
        Ok(Layout {
            viewport: Region {
                x: number(&css["pageX"]),
                y: number(&css["pageY"]),
                width: css_width,
                height: number(&css["clientHeight"]),
            },
            page: Region {
                x: 0.0,
                y: 0.0,
                width: number(&content["width"]),
                height: number(&content["height"]),
            },
            ratio: match css_width > 0.0 && device_width > 0.0 {
                true => device_width / css_width,
                false => 1.0,
            },
        })
    }

    /// The box of the first element matching `selector` in the main document, in document
    /// coordinates, and the device pixel ratio. The query runs in the Broker's isolated world
    /// of the main frame (`page::Find`), so a page that overrides `document.querySelector` or
    /// `getBoundingClientRect` in its own world cannot move or hide the clip.
    async fn element(
        &self,
        controlled: &mut ControlledTab,
        selector: &str,
    ) -> Result<(Region, f64), ToolError> {
        let timeout = call_timeout(self.scope);
        let frame_id = controlled.main_frame(&self.session, timeout).await?;
        let context = self
            .calls
            .create_isolated_world(&self.session, &frame_id, timeout)
            .await?;
        let script = Find {
            selector: selector.to_owned(),
            pierce: false,
            limit: 1,
        };
        let selector_error = |reason: &str, message: &str| {
            RpcError::invalid_params(message.to_owned())
                .with_context("path", json!("arguments.selector"))
                .with_context("reason", json!(reason))
        };
        let world = PageContext {
            session: self.session.clone(),
            frame_id: frame_id.clone(),
            context,
            session_root: true,
        };
        let found = match world.run_within(&self.calls, &script, timeout).await {
            Ok(found) => found,
            Err(error) => {
                return Err(match error.refusal() {
                    Some(ScriptErrorCode::InvalidSelector) => ToolError::from(selector_error(
                        "invalid_selector",
                        "\"selector\" is not a valid CSS selector",
                    )),
                    _ => ToolError::from(error),
                });
            }
        };
        let Some(element) = found.elements.first() else {
            return Err(ToolError::from(selector_error(
                "no_match",
                "\"selector\" matches no element",
            )));
        };
        // `find` reports viewport coordinates; the clip is in document coordinates.
        let layout = self.layout().await?;
        let region = Region {
            x: element.bounds.x as f64 + layout.viewport.x,
            y: element.bounds.y as f64 + layout.viewport.y,
            width: element.bounds.width as f64,
            height: element.bounds.height as f64,
        };
        if region.width < 1.0 || region.height < 1.0 {
            return Err(ToolError::from(selector_error(
                "empty_box",
                "the element has no visible box",
            )));
        }
        Ok((region, layout.ratio))
    }
}

impl Tab<'_> {
    /// The Broker's isolated world of the main frame.
    async fn main_world(
        &self,
        controlled: &mut ControlledTab,
    ) -> Result<ExecutionContextId, ToolError> {
        let timeout = call_timeout(self.scope);
        let frame_id = controlled.main_frame(&self.session, timeout).await?;
        Ok(self
            .calls
            .create_isolated_world(&self.session, &frame_id, timeout)
            .await?)
    }

    /// The live boxes of the requested refs. The Observation must be one this Workspace took
    /// of this tab's main frame (the Observation error codes otherwise); the page then
    /// revalidates every ref (`page::AnnotationBoxes`).
    async fn annotation_boxes(
        &self,
        controlled: &mut ControlledTab,
        workspace_id: &str,
        request: &AnnotationRequest,
        world: ExecutionContextId,
    ) -> Result<Annotations, ToolError> {
        let timeout = call_timeout(self.scope);
        let main = controlled.main_frame(&self.session, timeout).await?;
        let record = controlled.observation_frame(&request.observation_id, workspace_id);
        let Some(frame_id) = record else {
            return Err(ToolError::from(
                RpcError::new(
                    ErrorCode::ObservationNotFound,
                    "no such Observation for this Workspace on this target (evicted, another target, or before a reconnect)",
                )
                .with_context("observationId", json!(request.observation_id))
                .with_remediation(
                    RemediationAction::Observe,
                    "Call browser.observe on this target and annotate with the new Observation.",
                ),
            ));
        };
        if frame_id != main {
            return Err(ToolError::from(
                RpcError::invalid_params(
                    "annotations need an Observation of the main frame; this one was taken in a frame",
                )
                .with_context("path", json!("arguments.annotations.observationId"))
                .with_context("reason", json!("frame_observation")),
            ));
        }
        let script = AnnotationBoxes {
            observation_key: request.observation_id.clone(),
            refs: request.refs.clone(),
        };
        let world = PageContext {
            session: self.session.clone(),
            frame_id,
            context: world,
            session_root: true,
        };
        Ok(world.run_within(&self.calls, &script, timeout).await?)
    }

    /// Draws `annotations` onto a captured image of `region` (base64) in the isolated world.
    async fn annotate(
        &self,
        world: ExecutionContextId,
        options: &CaptureOptions,
        region: Region,
        annotations: &Annotations,
        data: String,
    ) -> Result<String, ToolError> {
        let (width, height) = image_size(&data)?;
        // Image pixels per CSS pixel: the device pixel ratio times any preview scale, read off
        // the image itself.
        let scale = match region.width > 0.0 {
            true => f64::from(width) / region.width,
            false => 1.0,
        };
        let boxes = image_boxes(&annotations.boxes, scale, width, height);
        let quality = match options.format {
            Format::Jpeg => Some(options.quality.unwrap_or(DEFAULT_JPEG_QUALITY)),
            Format::Png => None,
        };
        let drawn = self
            .calls
            .draw_annotations(
                &self.session,
                world,
                data,
                &boxes,
                (options.format.mime(), quality, scale),
                call_timeout(self.scope),
            )
            .await?;
        Ok(drawn)
    }
}

/// What `Page.getLayoutMetrics` tells a capture.
struct Layout {
    viewport: Region,
    page: Region,
    /// Device pixels per CSS pixel.
    ratio: f64,
}

/// Pixel size of a base64 image from the browser.
fn image_size(data: &str) -> Result<(u32, u32), ToolError> {
    dimensions_base64(data).ok_or_else(|| {
        RpcError::new(
            ErrorCode::InternalError,
            "the browser returned an unreadable image",
        )
        .into()
    })
}

async fn store_image(
    env: &ToolEnv,
    scope: &TargetScope<'_>,
    format: Format,
    kind: ArtifactKind,
    preview_of: Option<String>,
    data: String,
) -> Result<Artifact, ToolError> {
    let (width, height) = image_size(&data)?;
    let mut new = NewArtifact::new(scope.workspace_id, kind, format.mime(), CAPTURE_SENSITIVITY);
    new.preview_of = preview_of;
    new.width = Some(width);
    new.height = Some(height);
    Ok(env.artifacts.create_base64(new, data, now_ms()).await?)
}

async fn capture(
    env: &ToolEnv,
    scope: &TargetScope<'_>,
    params: CaptureParams,
) -> Result<Value, ToolError> {
    let options = CaptureOptions::parse(params)?;
    unless_dialog(env, scope, capture_tab(env, scope, options)).await
}

/// `browser.capture` on a tab no dialog holds.
async fn capture_tab(
    env: &ToolEnv,
    scope: &TargetScope<'_>,
    options: CaptureOptions,
) -> Result<Value, ToolError> {
    let mut controlled = ControlledTab::acquire(env, scope).await?;
    let session = controlled.session().await?;
    let mark = controlled.load_mark();
    let mut tab = Tab {
        calls: controlled.calls().clone(),
        session,
        scope,
        hidden: true,
    };
    let (region, ratio) = match &options.area {
        Area::Element(selector) => tab.element(&mut controlled, selector).await?,
        Area::Viewport => {
            // The page's visibility and the browser's layout metrics, asked at once.
            let (hidden, layout) = tokio::join!(document_hidden(&mut controlled), tab.layout());
            tab.hidden = hidden;
            let layout = layout?;
            (layout.viewport, layout.ratio)
        }
        Area::FullPage => {
            let layout = tab.layout().await?;
            (layout.page, layout.ratio)
        }
    };
    // Annotations: the boxes are sampled right before the capture (a page can still move
    // itself in between; the contract tells hosts so).
    let annotated = match &options.annotations {
        Some(request) => {
            let world = tab.main_world(&mut controlled).await?;
            let boxes = tab
                .annotation_boxes(&mut controlled, scope.workspace_id, request, world)
                .await?;
            Some((world, boxes))
        }
        None => None,
    };
    let controlled = &controlled;
    let shoot = |scale| {
        let shot = shoot(&tab, &options, region, annotated.as_ref(), scale);
        unless_replaced(controlled, &mark, scope.deadline, shot)
    };
    let store =
        |kind, preview_of, data| store_image(env, scope, options.format, kind, preview_of, data);
    let (shown, original) = match preview_scale(region.width.max(region.height) * ratio) {
        None => {
            let data = shoot(1.0).await?;
            (store(ArtifactKind::Screenshot, None, data).await?, None)
        }
        Some(scale) => {
            let original = match options.include_original {
                true => {
                    let data = shoot(1.0).await?;
                    Some(store(ArtifactKind::Screenshot, None, data).await?)
                }
                false => None,
            };
            let preview = shoot(scale).await?;
            let preview_of = original.as_ref().map(|o| o.id.clone());
            (
                store(ArtifactKind::Preview, preview_of, preview).await?,
                original,
            )
        }
    };
    let mut result = json!({
        "artifact": shown.to_json(),
        "width": shown.width.unwrap_or(0),
        "height": shown.height.unwrap_or(0),
    });
    if let Some((_, boxes)) = &annotated {
        result["annotationCount"] = json!(boxes.boxes.len());
        result["skippedRefs"] = serde_json::to_value(&boxes.skipped)?;
    }
    if let Some(original) = original {
        result["original"] = original.to_json();
    }
    Ok(result)
}

/// Whether the tab's document may be hidden: read in the Broker's isolated world (the page
/// cannot fake it there); anything but a visible answer counts as hidden.
async fn document_hidden(controlled: &mut ControlledTab) -> bool {
    let Ok(ctx) = controlled.page_context().await else {
        return true;
    };
    ctx.run(controlled.calls(), &ViewportSize)
        .await
        .map_or(true, |viewport| viewport.hidden)
}

/// Runs one capture unless the main frame commits a new document first (since `mark`, taken
/// before the region was measured): Chromium never answers a screenshot whose document went away
/// under it, so without this a page that keeps replacing its document held the call to its
/// deadline. The answer is the retryable `document_changed` that observe and read give.
async fn unless_replaced<T>(
    controlled: &ControlledTab,
    mark: &LoadMark,
    until: tokio::time::Instant,
    work: impl Future<Output = Result<T, ToolError>>,
) -> Result<T, ToolError> {
    let replaced = Awaited::NewDocument(mark.clone());
    tokio::select! {
        biased;
        outcome = work => outcome,
        Some(_) = controlled.wait_for_phase(&replaced, LoadPhase::Loading, until) => {
            Err(ToolError::from(super::error::document_changed()))
        }
    }
}

/// One capture of `region` at `scale`, annotated when asked.
async fn shoot(
    tab: &Tab<'_>,
    options: &CaptureOptions,
    region: Region,
    annotated: Option<&(ExecutionContextId, Annotations)>,
    scale: f64,
) -> Result<String, ToolError> {
    let data = tab.screenshot(options, region, scale).await?;
    match annotated {
        Some((world, boxes)) => tab.annotate(*world, options, region, boxes, data).await,
        None => Ok(data),
    }
}

/// Maps a `Page.printToPDF` refusal: headed Chrome cannot print, and bad page ranges are the
/// caller's mistake.
fn pdf_error(error: CdpError) -> ToolError {
    match &error {
        CdpError::Remote { message, .. }
            if message.to_ascii_lowercase().contains("not implemented") =>
        {
            RpcError::new(
                ErrorCode::PdfUnavailable,
                "this browser cannot print to PDF over CDP",
            )
            .with_remediation(
                RemediationAction::UseHeadlessBrowser,
                "Print from a headless browser (browser-pilot browser launch --headless).",
            )
            .into()
        }
        CdpError::Remote { message, .. } if message.to_ascii_lowercase().contains("range") => {
            RpcError::invalid_params(format!("\"pageRanges\" was refused: {message}"))
                .with_context("path", json!("arguments.pageRanges"))
                .into()
        }
        _ => ToolError::from(error),
    }
}

/// `browser.pdf`'s arguments: the print options it passes on.
#[derive(Debug, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
struct PdfParams {
    #[serde(skip_serializing_if = "Option::is_none")]
    landscape: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    print_background: Option<bool>,
    /// Kept as given (a whole number stays whole).
    #[serde(skip_serializing_if = "Option::is_none")]
    scale: Option<serde_json::Number>,
    #[serde(skip_serializing_if = "Option::is_none")]
    page_ranges: Option<String>,
}

async fn pdf(
    env: &ToolEnv,
    scope: &TargetScope<'_>,
    params: PdfParams,
) -> Result<Value, ToolError> {
    // The options given, as the wire spells them, are `Page.printToPDF`'s own.
    let options = match serde_json::to_value(params)? {
        Value::Object(options) => options,
        _ => Map::new(),
    };
    let print = PrintToPdf {
        options,
        transfer_mode: "ReturnAsStream",
    };
    unless_dialog(env, scope, print_tab(env, scope, print)).await
}

/// `browser.pdf` on a tab no dialog holds.
async fn print_tab(
    env: &ToolEnv,
    scope: &TargetScope<'_>,
    print: PrintToPdf,
) -> Result<Value, ToolError> {
    let mut controlled = ControlledTab::acquire(env, scope).await?;
    let session = controlled.session().await?;
    let tab = Tab {
        calls: controlled.calls().clone(),
        session,
        scope,
        hidden: true,
    };
    let handle = tab.execute(&print).await.map_err(pdf_error)?.stream;
    let read = read_stream(&tab, &handle, env.artifacts.limits().max_artifact_bytes).await;
    let _ = tab.execute(&io::Close { handle }).await;
    let new = NewArtifact::new(
        scope.workspace_id,
        ArtifactKind::Pdf,
        "application/pdf",
        CAPTURE_SENSITIVITY,
    );
    let artifact = env.artifacts.create(new, read?, now_ms()).await?;
    Ok(json!({"artifact": artifact.to_json()}))
}

/// Reads a CDP stream to its end, refusing more than `limit` bytes.
async fn read_stream(tab: &Tab<'_>, handle: &str, limit: u64) -> Result<Vec<u8>, ToolError> {
    let mut bytes = Vec::new();
    loop {
        let read = io::Read {
            handle: handle.to_owned(),
            size: Some(PDF_READ_CHUNK_BYTES),
        };
        let chunk = tab.execute(&read).await?;
        let data = chunk.data.as_str();
        match chunk.base64_encoded {
            true => bytes.extend(decode_base64(data).ok_or_else(|| {
                RpcError::new(
                    ErrorCode::InternalError,
                    "the browser sent a malformed PDF stream",
                )
            })?),
            false => bytes.extend_from_slice(data.as_bytes()),
        }
        if bytes.len() as u64 > limit {
            return Err(ToolError::from(ArtifactError::TooLarge {
                len: bytes.len() as u64,
                limit,
            }));
        }
        if chunk.eof {
            return Ok(bytes);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::artifact_error;

    fn parse(arguments: Value) -> Result<CaptureOptions, String> {
        let params = serde_json::from_value(arguments).unwrap();
        CaptureOptions::parse(params).map_err(|e| RpcError::from(e).message)
    }

    #[test]
    fn capture_options() {
        assert_eq!(
            parse(json!({})),
            Ok(CaptureOptions {
                format: Format::Png,
                quality: None,
                area: Area::Viewport,
                include_original: false,
                annotations: None,
            })
        );
        assert_eq!(
            parse(
                json!({"format": "jpeg", "quality": 50, "selector": "#a", "includeOriginal": true})
            ),
            Ok(CaptureOptions {
                format: Format::Jpeg,
                quality: Some(50),
                area: Area::Element("#a".into()),
                include_original: true,
                annotations: None,
            })
        );
        assert_eq!(
            parse(json!({"fullPage": true})).map(|o| o.area),
            Ok(Area::FullPage)
        );
        assert!(parse(json!({"quality": 50})).is_err());
        assert!(parse(json!({"fullPage": true, "selector": "a"})).is_err());
        let annotated =
            parse(json!({"annotations": {"observationId": "observation:a", "refs": [3, 1, 3]}}));
        assert_eq!(
            annotated.map(|o| o.annotations),
            Ok(Some(AnnotationRequest {
                observation_id: "observation:a".into(),
                refs: Some(vec![3, 1])
            }))
        );
        let all = parse(json!({"annotations": {"observationId": "observation:a"}})).unwrap();
        assert_eq!(all.annotations.unwrap().refs, None);
        for other in [json!({"fullPage": true}), json!({"selector": "a"})] {
            let mut arguments = other.clone();
            arguments["annotations"] = json!({"observationId": "observation:a"});
            let refused = parse(arguments).unwrap_err();
            assert!(refused.contains("viewport captures only"), "{refused}");
        }
    }

    #[test]
    fn preview_scale_keeps_the_longest_side_at_the_bound() {
        assert_eq!(preview_scale(1600.0), None);
        assert_eq!(preview_scale(800.0), None);
        assert_eq!(preview_scale(3200.0), Some(0.5));
        let scale = preview_scale(5000.0).unwrap();
        assert!((5000.0 * scale - 1600.0).abs() < 1e-9);
    }

    #[test]
    fn every_artifact_error_has_its_code() {
        let check =
            |error: ArtifactError, code: ErrorCode| assert_eq!(artifact_error(error).code, code);
        check(ArtifactError::NotFound, ErrorCode::ArtifactNotFound);
        check(
            ArtifactError::Expired { expired_at: 1 },
            ErrorCode::ArtifactExpired,
        );
        check(
            ArtifactError::TooLarge { len: 2, limit: 1 },
            ErrorCode::ArtifactTooLarge,
        );
        check(
            ArtifactError::QuotaExceeded {
                what: "x",
                limit: 1,
            },
            ErrorCode::LimitExceeded,
        );
        check(
            ArtifactError::PathNotAllowed { reason: "r" },
            ErrorCode::PathNotAllowed,
        );
        check(
            ArtifactError::FileNotFound("/x".into()),
            ErrorCode::FileNotFound,
        );
        check(
            ArtifactError::ExportExists("/x".into()),
            ErrorCode::ExportExists,
        );
        check(
            ArtifactError::KindNotAllowed {
                kind: "pdf",
                allowed: "upload_input",
            },
            ErrorCode::ArtifactKindNotAllowed,
        );
        check(
            ArtifactError::BadMimeType("x".into()),
            ErrorCode::InvalidParams,
        );
        check(
            ArtifactError::WorkspaceNotFound,
            ErrorCode::WorkspaceNotFound,
        );
        let storage = artifact_error(ArtifactError::Storage {
            op: "write",
            source: std::io::Error::other("/secret/path"),
        });
        assert_eq!(storage.code, ErrorCode::InternalError);
        assert!(
            !storage.to_json().to_string().contains("/secret/path"),
            "protected paths never leak"
        );
    }
}
