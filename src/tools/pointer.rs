//! Where a mouse click lands, and whether it can land now: the pointer half of `browser.click`.
//! It owns (1) the frame chain from the frame the page scripts run in up to the tab's main frame,
//! with every hop mapped through its `<iframe>` element's content quad by a four-point projective
//! map (`page::QuadMap`), so a point inside a rotated, scaled or otherwise transformed frame lands
//! where the frame shows it, for same-process and out-of-process frames alike; (2) a hit test in
//! each parent document at the mapped point, so an overlay above a frame is seen before anything
//! is sent; (3) the actionability wait before a ref click: attached, visible, stable (the element's
//! box and every hop's quad unchanged across two samples with a rendered frame between them, as
//! the page's `requestAnimationFrame` counts it and its animation clock shows; where no frame
//! comes at all (a hidden tab), or inside frames, a Broker-side interval), enabled and
//! hit-testable, for at most [`ACTIONABLE_WAIT_DEFAULT`] (the call's `actionableTimeoutMs`
//! chooses another bound; the Command's deadline bounds every wait), else
//! `element_not_actionable` with `context.reason` and `context.waitedMs`.
//!
//! Input then goes to the session hosting the element's frame (the tab's, or an out-of-process
//! frame's) at the point mapped into that session's root viewport. This file sends no input and
//! judges no evidence (the action pipeline `act.rs` and the tools do); raw CDP frame and session
//! ids never leave it.

use std::time::Duration;

use serde_json::json;

use super::error::ToolError;
use super::tab::{ControlledTab, PageContext, SCRIPT_TIMEOUT, TabCalls};
use crate::cdp::SessionId;
use crate::cdp::dom::{
    BackendNodeId, GetBoxModel, GetFrameOwner, ResolveNode, ScrollIntoViewIfNeeded,
};
use crate::cdp::page::GetFrameTree;
use crate::cdp::runtime::ReleaseObjectGroup;
use crate::page::{
    ClickProbe, ClickSettle, ClickTarget, FrameHit, PageError, Point, ProbeScroll, Quad, QuadMap,
    RefTarget, ScriptErrorCode, ViewportSize,
};
use crate::protocol::errors::{ErrorCode, RemediationAction, RpcError};

/// How long a ref action waits for its element to become actionable when the call does not say:
/// an agent learns soon that a disabled or covered element will not take the action (Playwright's
/// MCP server waits as long), while a button that is enabled or uncovered a moment later is still
/// clicked.
pub const ACTIONABLE_WAIT_DEFAULT: Duration = Duration::from_secs(5);
/// Kept from the actionability bound for the look that finds the wait over (a sample is a page
/// round trip), so the refusal comes within the bound.
const LAST_LOOK: Duration = Duration::from_millis(250);
/// The longest `actionableTimeoutMs` a call may ask for (the Command's deadline still applies).
const ACTIONABLE_WAIT_MAX_MS: u64 = 300_000;

/// The `actionableTimeoutMs` argument of the ref actions (click, hover, drag).
pub fn actionable_property() -> serde_json::Value {
    json!({"actionableTimeoutMs": {
        "type": "integer", "minimum": 0, "maximum": ACTIONABLE_WAIT_MAX_MS,
        "description": "Most ms to wait for the ref's element to become actionable; default 5000.",
    }})
}

/// How long an actionability wait may last: until `deadline` (the Command's) and at most `limit`.
#[derive(Debug, Clone, Copy)]
pub struct ActionableWait {
    pub deadline: tokio::time::Instant,
    pub limit: Duration,
}

impl ActionableWait {
    /// The wait a call asks for (`actionableTimeoutMs`, else the default).
    pub fn new(timeout_ms: Option<u64>, deadline: tokio::time::Instant) -> ActionableWait {
        let limit = timeout_ms.map_or(ACTIONABLE_WAIT_DEFAULT, Duration::from_millis);
        ActionableWait { deadline, limit }
    }
}

/// How long to wait before looking again at an element that was not actionable, and how often a
/// document that renders no frames is sampled: longer than one frame at 60 Hz.
const SAMPLE_INTERVAL: Duration = Duration::from_millis(20);
/// How long an element of the tab's own document must stand still when the document renders no
/// frames at all (a hidden tab): well above any frame interval, so that a visible tab whose
/// renderer is merely slow proves stability by a frame instead.
const UNRENDERED_INTERVAL: Duration = Duration::from_millis(100);
/// The smallest step of the animation clock that is another frame (ms): a frame at 240 Hz.
const MIN_FRAME_STEP_MS: f64 = 4.0;
/// How soon an element that stood still is looked at again while no frame has been rendered
/// since the earlier sample (`ClickTarget::frames`): a frame at 60 Hz is at most 16.7 ms away.
const FRAME_POLL: Duration = Duration::from_millis(3);
/// The same after something scrolled, or when the element is inside a frame: long enough for
/// Chromium to produce a frame first (input routed by the browser right after a scroll was lost
/// while its hit-test data still showed the old position; 20 ms later it arrived; docs/cdp.md).
const SETTLE_INTERVAL: Duration = Duration::from_millis(50);
/// How long the page waits for the frame after a first sample (`ClickSettle`) before it answers
/// without a second one (a document that renders nothing goes on with timed samples).
const SETTLE_FRAME_WAIT: Duration = Duration::from_millis(50);
/// Part of the Command's remaining time kept for the click itself, its evidence and the fresh
/// Observation: the wait ends at the larger of a quarter of the remaining time and this.
const RESERVED_FOR_ACTION: Duration = Duration::from_millis(250);
/// Frames nested deeper than this are not followed (a page cannot make the chain endless).
const MAX_HOPS: usize = 16;
/// Two samples closer than this (CSS px) are the same place.
const SAME_PLACE: f64 = 0.01;
/// Object group of the `<iframe>` elements the chain resolves (released after the click).
const CHAIN_OBJECT_GROUP: &str = "browser-pilot-pointer";

/// One hop from a frame to the root frame of the session hosting its `<iframe>` element (the main
/// frame, or an out-of-process frame's root).
struct Hop {
    /// The session the `<iframe>` element lives in; its box model is in that session's root
    /// viewport however deep the element is nested in same-process frames.
    session: SessionId,
    /// The frame's `<iframe>` element.
    owner: BackendNodeId,
    /// The element of the session root's document that contains the frame (the owner itself, or
    /// the `<iframe>` of the outermost same-process frame on the way), resolved in the Broker's
    /// isolated world of that document, for the hit test.
    hit_object: String,
}

/// The frames between the page context's frame and the tab's main frame.
pub struct Chain {
    /// Where mouse input goes: the session hosting the page context's frame (the tab's, or an
    /// out-of-process frame's), at coordinates of that session's root viewport. Chromium hands
    /// input sent to an out-of-process frame's session straight to that frame; input sent to
    /// the tab session is routed by the browser's hit-test data, which in a background tab still
    /// showed a moved frame at its old place (docs/cdp.md).
    pub dispatch_session: SessionId,
    hops: Vec<Hop>,
}

/// Where to send a click: CSS px of the dispatch session's root viewport.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Aim {
    pub x: f64,
    pub y: f64,
}

/// Why an element cannot take a click now.
#[derive(Debug, Clone, PartialEq)]
enum Blocker {
    NotStable,
    Covered(Option<String>),
    Disabled,
    Hidden,
    Detached,
}

impl Blocker {
    fn error(self) -> RpcError {
        let (reason, message, retryable) = match &self {
            Blocker::NotStable => (
                "not_stable",
                "the element kept moving until the wait ended",
                true,
            ),
            Blocker::Covered(_) => ("covered", "another element covers the click point", true),
            Blocker::Disabled => ("disabled", "the element is disabled", true),
            Blocker::Hidden => (
                "hidden",
                "the element is not visible (not rendered, hidden, empty, or out of view)",
                true,
            ),
            Blocker::Detached => (
                "detached",
                "the element was removed from its document",
                false,
            ),
        };
        let mut error = RpcError::new(ErrorCode::ElementNotActionable, message)
            .with_context("reason", json!(reason))
            .with_retryable(retryable);
        match self {
            Blocker::Covered(by) => {
                if let Some(by) = by {
                    error = error.with_context("occludedBy", json!(by));
                }
                error.with_remediation(
                    RemediationAction::ResolveOverlayFirst,
                    "Observe the page: a modal or overlay may need to be closed first.",
                )
            }
            Blocker::Detached => error.with_remediation(
                RemediationAction::Observe,
                "Call browser.observe and use refs from the new Observation.",
            ),
            _ => error,
        }
    }
}

/// A frame on the way up went away (removed, or its parent navigated) while the click was aimed.
fn frame_gone() -> RpcError {
    RpcError::new(
        ErrorCode::FrameNotFound,
        "a frame between the selected frame and the page went away while the click was aimed",
    )
    .with_context("reason", json!("frame_detached"))
    .with_remediation(
        RemediationAction::ListFrames,
        "Call browser.frames.list, select a frame (or {main: true}) with browser.frames.select, and observe again.",
    )
}

/// A frame of a session's frame tree: id and parent id.
struct TreeFrame {
    id: String,
    parent: Option<String>,
}

/// `Page.getFrameTree` of one session, root first.
async fn tree(client: &TabCalls, session: &SessionId) -> Result<Vec<TreeFrame>, ToolError> {
    let reply = client
        .execute(session, &GetFrameTree {}, SCRIPT_TIMEOUT)
        .await?;
    Ok(reply
        .frame_tree
        .frames()
        .into_iter()
        .map(|frame| TreeFrame {
            id: frame.id.clone(),
            parent: frame.parent_id.clone(),
        })
        .collect())
}

fn parent_in(frames: &[TreeFrame], id: &str) -> Option<String> {
    frames
        .iter()
        .find(|f| f.id == id)
        .and_then(|f| f.parent.clone())
}

async fn frame_owner(
    client: &TabCalls,
    session: &SessionId,
    frame: &str,
) -> Result<BackendNodeId, ToolError> {
    let command = GetFrameOwner {
        frame_id: frame.to_owned(),
    };
    let owner = client.execute(session, &command, SCRIPT_TIMEOUT).await?;
    Ok(owner.backend_node_id)
}

impl ControlledTab {
    /// The chain of `<iframe>` hops from `ctx`'s frame to the main frame, which aims a pointer
    /// event (see [`Chain`]).
    pub async fn pointer_chain(&mut self, ctx: &PageContext) -> Result<Chain, ToolError> {
        chain(self, ctx).await
    }
}

/// Builds the chain from `ctx`'s frame to the main frame (empty for the main frame itself).
async fn chain(tab: &mut ControlledTab, ctx: &PageContext) -> Result<Chain, ToolError> {
    let tab_session = tab.session().await?;
    let client = &tab.calls().clone();
    let mut chain = Chain {
        dispatch_session: ctx.session.clone(),
        hops: Vec::new(),
    };
    if ctx.session == tab_session && ctx.session_root {
        return Ok(chain);
    }
    let mut sessions = vec![tab_session.clone()];
    sessions.extend(
        tab.frames()
            .child_sessions()
            .into_iter()
            .map(|(_, session)| session),
    );
    let gone = frame_gone;
    let (mut frame, mut session) = (ctx.frame_id.clone(), ctx.session.clone());
    for _ in 0..MAX_HOPS {
        let frames = tree(client, &session).await?;
        let root = frames.first().map(|f| f.id.clone()).ok_or_else(gone)?;
        let root_parent = frames.first().and_then(|f| f.parent.clone());
        // The session holding the frame's <iframe> element, and that session's frames.
        let (host, host_frames) = if frame == root {
            if session == tab_session {
                return Ok(chain);
            }
            let parent = root_parent.clone().ok_or_else(gone)?;
            let mut found = None;
            for candidate in sessions.iter().filter(|s| **s != session) {
                // A session that detached meanwhile simply does not hold the parent.
                let Ok(candidate_frames) = tree(client, candidate).await else {
                    continue;
                };
                if candidate_frames.iter().any(|f| f.id == parent) {
                    found = Some((candidate.clone(), candidate_frames));
                    break;
                }
            }
            found.ok_or_else(gone)?
        } else {
            (session.clone(), frames)
        };
        let host_root = host_frames.first().map(|f| f.id.clone()).ok_or_else(gone)?;
        // The frame directly below the host's root on the way up from `frame`.
        let mut outermost = frame.clone();
        for _ in 0..MAX_HOPS {
            let parent = match parent_in(&host_frames, &outermost) {
                Some(parent) => parent,
                // An out-of-process frame: not in the host's tree, its parent is.
                None => root_parent.clone().ok_or_else(gone)?,
            };
            if parent == host_root {
                break;
            }
            outermost = parent;
        }
        let owner = frame_owner(client, &host, &frame).await?;
        let hit_owner = match outermost == frame {
            true => owner,
            false => frame_owner(client, &host, &outermost).await?,
        };
        let context = client
            .create_isolated_world(&host, &host_root, SCRIPT_TIMEOUT)
            .await?;
        let resolve = ResolveNode {
            backend_node_id: hit_owner,
            execution_context_id: Some(context.get()),
            object_group: Some(CHAIN_OBJECT_GROUP.to_owned()),
        };
        let resolved = client.execute(&host, &resolve, SCRIPT_TIMEOUT).await?;
        let hit_object = resolved.object.object_id.ok_or_else(gone)?;
        chain.hops.push(Hop {
            session: host.clone(),
            owner,
            hit_object,
        });
        if host == tab_session {
            return Ok(chain);
        }
        frame = host_root;
        session = host;
    }
    Err(ToolError::from(
        RpcError::new(
            ErrorCode::ElementNotActionable,
            format!("the element is inside frames nested deeper than {MAX_HOPS}"),
        )
        .with_context("reason", json!("hidden")),
    ))
}

/// A mapped point and what stood in its way.
struct Mapped {
    /// The point in the dispatch session's root viewport.
    aim: Aim,
    /// Every hop's quad, for the stability comparison.
    quads: Vec<Quad>,
    blocker: Option<Blocker>,
}

/// Maps a point of the chain's first frame (whose viewport is `frame` = `[width, height]`)
/// through every hop to the main frame, hit-testing each parent document (`hit_test`) and
/// scrolling each `<iframe>` into view first when `scroll` is set. The aim is the point in the
/// dispatch session's root viewport: mapped through the hops inside that session only.
async fn map_through(
    client: &TabCalls,
    chain: &Chain,
    point: Point,
    frame: [f64; 2],
    scroll: bool,
    hit_test: bool,
) -> Result<Mapped, ToolError> {
    let mut point = point;
    let mut aim = Aim {
        x: point.x,
        y: point.y,
    };
    let mut size = frame;
    let mut quads = Vec::new();
    for hop in &chain.hops {
        if scroll {
            // Best effort: a frame that cannot scroll into view shows as hidden below.
            let scroll = ScrollIntoViewIfNeeded {
                backend_node_id: hop.owner,
            };
            let _ = client.execute(&hop.session, &scroll, SCRIPT_TIMEOUT).await;
        }
        let box_model = GetBoxModel {
            backend_node_id: hop.owner,
        };
        let model = client
            .execute(&hop.session, &box_model, SCRIPT_TIMEOUT)
            .await;
        let numbers: Vec<f64> = model.map(|m| m.model.content).unwrap_or_default();
        let mapped = Quad::from_numbers(&numbers).and_then(|quad| {
            let mapped = QuadMap::from_viewport(size[0], size[1], &quad)?.apply(point)?;
            Some((quad, mapped))
        });
        // No box (display: none), a degenerate transform, or a point behind the viewer.
        let Some((quad, mapped)) = mapped else {
            return Ok(Mapped {
                aim,
                quads,
                blocker: Some(Blocker::Hidden),
            });
        };
        quads.push(quad);
        point = mapped;
        if hop.session == chain.dispatch_session {
            aim = Aim {
                x: point.x,
                y: point.y,
            };
        }
        let hit = frame_hit(client, hop, point).await?;
        size = hit.frame;
        if hit_test && !hit.hit {
            let inside = point.x >= 0.0 && point.y >= 0.0 && point.x < size[0] && point.y < size[1];
            return Ok(Mapped {
                aim,
                quads,
                blocker: Some(match inside {
                    true => Blocker::Covered(hit.occluded_by),
                    false => Blocker::Hidden,
                }),
            });
        }
    }
    Ok(Mapped {
        aim,
        quads,
        blocker: None,
    })
}

/// `FRAME_POINT_HIT` on a hop's element, in its document's isolated world.
async fn frame_hit(client: &TabCalls, hop: &Hop, point: Point) -> Result<FrameHit, ToolError> {
    let hit = client
        .frame_point_hit(
            &hop.session,
            &hop.hit_object,
            (point.x, point.y),
            SCRIPT_TIMEOUT,
        )
        .await?;
    Ok(hit.ok_or_else(frame_gone)?)
}

/// The main-frame point of a coordinate click given in the page context's frame viewport (no
/// hit tests: coordinates mean "whatever is there").
pub async fn map_point(
    client: &TabCalls,
    ctx: &PageContext,
    chain: &Chain,
    (x, y): (f64, f64),
) -> Result<Aim, ToolError> {
    if chain.hops.is_empty() {
        return Ok(Aim { x, y });
    }
    let viewport = ctx.run(client, &ViewportSize).await?;
    let (width, height) = (viewport.width, viewport.height);
    let mapped = map_through(
        client,
        chain,
        Point::new(x, y),
        [width, height],
        false,
        false,
    )
    .await?;
    match mapped.blocker {
        None => Ok(mapped.aim),
        Some(blocker) => Err(ToolError::from(blocker.error())),
    }
}

/// One actionability sample of a ref's element.
struct Sample {
    aim: Aim,
    rect: Option<[f64; 4]>,
    quads: Vec<Quad>,
    blocker: Option<Blocker>,
    in_view: bool,
    scrolled: bool,
    /// The document's frame callbacks seen so far and its animation clock
    /// (`ClickTarget::frames`, `ClickTarget::timeline`).
    frames: u64,
    timeline: Option<f64>,
}

impl Sample {
    /// Whether a whole rendered frame lies between `earlier` and this sample: the page's frame
    /// callbacks ran and its animation clock advanced since.
    fn frame_after(&self, earlier: &Sample) -> bool {
        let clock = match (earlier.timeline, self.timeline) {
            // One frame's callbacks can run a moment after its clock was read (the clock then
            // reads a hair later within the same frame): only a step of a frame counts.
            (Some(before), Some(now)) => now - before >= MIN_FRAME_STEP_MS,
            _ => false,
        };
        self.frames > earlier.frames && clock
    }
}

impl Sample {
    fn same_place(&self, other: &Sample) -> bool {
        let near = |a: f64, b: f64| (a - b).abs() < SAME_PLACE;
        let same_quads = self.quads.len() == other.quads.len()
            && self.quads.iter().zip(&other.quads).all(|(a, b)| {
                a.0.iter()
                    .zip(b.0.iter())
                    .all(|(p, q)| near(p.x, q.x) && near(p.y, q.y))
            });
        self.rect == other.rect
            && near(self.aim.x, other.aim.x)
            && near(self.aim.y, other.aim.y)
            && same_quads
    }
}

/// Why a sample could not be taken.
enum Failure {
    /// The ref's element is no longer in its document.
    Stale(PageError),
    Other(ToolError),
}

async fn sample(
    client: &TabCalls,
    ctx: &PageContext,
    chain: &Chain,
    target: &RefTarget,
    scroll: ProbeScroll,
) -> Result<Sample, Failure> {
    let probe = ClickProbe {
        target: target.clone(),
        scroll,
    };
    match ctx.run(client, &probe).await {
        Ok(point) => to_sample(client, chain, point, scroll).await,
        Err(error) => refused_sample(error),
    }
}

/// A first sample and, when the element could take a click there, a second one taken by the
/// page in the first frame callback a whole frame later (`ClickSettle`): the frame is waited
/// for in the page instead of polled for. Own document only (no frames on the way).
async fn settled_samples(
    client: &TabCalls,
    ctx: &PageContext,
    chain: &Chain,
    target: &RefTarget,
    scroll: ProbeScroll,
) -> Result<(Sample, Option<Sample>), Failure> {
    let settle = ClickSettle {
        probe: ClickProbe {
            target: target.clone(),
            scroll,
        },
        min_step_ms: MIN_FRAME_STEP_MS,
        max_wait: SETTLE_FRAME_WAIT,
    };
    match ctx.run(client, &settle).await {
        Ok(settled) => {
            let first = to_sample(client, chain, settled.first, scroll).await?;
            let second = match settled.second {
                Some(point) => Some(to_sample(client, chain, point, ProbeScroll::None).await?),
                None => None,
            };
            Ok((first, second))
        }
        Err(error) => refused_sample(error).map(|sample| (sample, None)),
    }
}

/// A probe's refusal as a sample: not rendered is a hidden element; a stale ref or anything
/// else fails the sample.
fn refused_sample(error: PageError) -> Result<Sample, Failure> {
    match error.refusal() {
        Some(ScriptErrorCode::NotVisible) => Ok(Sample {
            aim: Aim { x: 0.0, y: 0.0 },
            rect: None,
            quads: Vec::new(),
            blocker: Some(Blocker::Hidden),
            in_view: false,
            scrolled: false,
            frames: 0,
            timeline: None,
        }),
        Some(ScriptErrorCode::RefStale) => Err(Failure::Stale(error)),
        _ => Err(Failure::Other(ToolError::from(error))),
    }
}

/// What a probe's answer says about the element, mapped through the frames on the way.
async fn to_sample(
    client: &TabCalls,
    chain: &Chain,
    point: ClickTarget,
    scroll: ProbeScroll,
) -> Result<Sample, Failure> {
    let mut blocker = match (point.in_viewport, point.hit) {
        (false, _) => Some(Blocker::Hidden),
        (true, false) => Some(Blocker::Covered(point.occluded_by.clone())),
        (true, true) => None,
    };
    let frame = point.frame.unwrap_or([0.0, 0.0]);
    let mapped = map_through(
        client,
        chain,
        Point::new(point.x, point.y),
        frame,
        scroll != ProbeScroll::None,
        true,
    )
    .await
    .map_err(Failure::Other)?;
    if blocker.is_none() {
        blocker = mapped.blocker;
    }
    if blocker.is_none() && point.disabled {
        blocker = Some(Blocker::Disabled);
    }
    Ok(Sample {
        aim: mapped.aim,
        rect: point.rect,
        quads: mapped.quads,
        blocker,
        in_view: point.in_viewport,
        scrolled: point.scrolled,
        frames: point.frames,
        timeline: point.timeline,
    })
}

/// Waits until the ref's element can take a click at one place (two samples agree and nothing
/// blocks), then answers where to send it. Until the deadline (less the time the click itself
/// needs); then `element_not_actionable` with the last reason seen. The first sample's scrolling
/// is given: `ProbeScroll::None` leaves an element
/// whose click point is already in view where it is (the second end of a drag must not scroll
/// the first out of view); one out of view is still scrolled in.
pub async fn actionable_from(
    client: &TabCalls,
    ctx: &PageContext,
    chain: &Chain,
    target: &RefTarget,
    wait: ActionableWait,
    first_scroll: ProbeScroll,
) -> Result<Aim, ToolError> {
    let none: Option<std::future::Ready<()>> = None;
    let (aim, _) = actionable_during(client, ctx, chain, target, wait, first_scroll, none).await?;
    Ok(aim)
}

/// What [`actionable_with`] ran in the wait: `during`'s output, and whether the wait it ran in was
/// the last one before the element proved actionable (so nothing but one sample interval
/// separates it from the click). When false the caller repeats that work.
pub struct During<T> {
    pub output: Option<T>,
    pub last_gap: bool,
}

/// [`actionable_from`] with the first sample scrolling as needed, running `during` inside the first wait between two samples instead of after
/// the wait: work that must come before the click but proves nothing about actionability (the
/// before state, arming click truth) overlaps the wait for the stability proof.
pub async fn actionable_with<T, F: std::future::Future<Output = T>>(
    client: &TabCalls,
    ctx: &PageContext,
    chain: &Chain,
    target: &RefTarget,
    wait: ActionableWait,
    during: F,
) -> Result<(Aim, During<T>), ToolError> {
    actionable_during(
        client,
        ctx,
        chain,
        target,
        wait,
        ProbeScroll::IfNeeded,
        Some(during),
    )
    .await
}

async fn actionable_during<T, F: std::future::Future<Output = T>>(
    client: &TabCalls,
    ctx: &PageContext,
    chain: &Chain,
    target: &RefTarget,
    wait: ActionableWait,
    first_scroll: ProbeScroll,
    mut during: Option<F>,
) -> Result<(Aim, During<T>), ToolError> {
    let mut ran = During {
        output: None,
        last_gap: false,
    };
    let now = tokio::time::Instant::now();
    let remaining = wait.deadline.saturating_duration_since(now);
    let reserve = std::cmp::max(remaining / 4, RESERVED_FOR_ACTION);
    let wait_until = now
        + remaining
            .saturating_sub(reserve)
            .min(wait.limit.saturating_sub(LAST_LOOK));
    // A refusal says how long the element was waited for.
    let refuse = |blocker: Blocker| {
        let waited = now.elapsed().as_millis() as u64;
        ToolError::from(blocker.error().with_context("waitedMs", json!(waited)))
    };
    // The last sample that started a wait: when it was taken, and the interval it asks for.
    let mut previous: Option<(Sample, tokio::time::Instant, Duration)> = None;
    // Whether the document rendered a frame since the first sample of this wait.
    let (mut first_frames, mut rendering) = (None, false);
    let mut scroll = first_scroll;
    // The page's second sample of a settled pair, taken a whole frame after the first.
    let mut queued: Option<Sample> = None;
    loop {
        let taken = tokio::time::Instant::now();
        // When the page took this sample, as far as timed rules go: right after the call for
        // the first of a settled pair (which then waited for a frame), else when it answered.
        let mut sampled_at = None;
        let probed = match queued.take() {
            Some(second) => Ok(second),
            // The tab's own document: the first sample waits in the page for the frame that
            // proves stability, with the work meant for the first wait running meanwhile.
            None if previous.is_none() && chain.hops.is_empty() => {
                let pair = settled_samples(client, ctx, chain, target, scroll);
                let pair = alongside(pair, &mut during, &mut ran).await;
                sampled_at = Some(taken);
                pair.map(|(first, second)| {
                    queued = second;
                    first
                })
            }
            None => sample(client, ctx, chain, target, scroll).await,
        };
        let current = match probed {
            Ok(current) => current,
            // Removed while we waited: it will not come back as the same element.
            Err(Failure::Stale(_)) if previous.is_some() => {
                return Err(refuse(Blocker::Detached));
            }
            // Gone before the first look: the ref itself is stale (as for every tool).
            Err(Failure::Stale(error)) => return Err(ToolError::from(error)),
            Err(Failure::Other(error)) => return Err(error),
        };
        let moved = previous
            .as_ref()
            .is_some_and(|(p, _, _)| !p.same_place(&current));
        rendering |= current.frames > *first_frames.get_or_insert(current.frames);
        tracing::debug!(frames = current.frames, timeline = ?current.timeline, rect = ?current.rect, blocked = current.blocker.is_some(), moved, "actionability sample");
        if current.blocker.is_none()
            && !moved
            && let Some((earlier, at, interval)) = &previous
        {
            // Stable: the document rendered a frame between the two samples (the element's own
            // document is the tab's: no frames on the way, whose input routing follows the
            // browser's hit-test data), or the whole interval passed. For the tab's own
            // document the interval stands in only for a document that renders nothing (a
            // hidden tab): once it rendered a frame in this wait, only a frame proves anything,
            // since a busy renderer can stall frames (and CSS animations, which follow them)
            // for longer than the interval.
            let own_document = chain.hops.is_empty();
            let framed = own_document && current.frame_after(earlier);
            let timed = match own_document {
                true => !rendering && taken.duration_since(*at) >= UNRENDERED_INTERVAL,
                false => taken.duration_since(*at) >= *interval,
            };
            if framed || timed {
                return Ok((current.aim, ran));
            }
            // The same place, but no frame yet: look again shortly, against the same sample
            // (less often once the document looks like one that renders nothing).
            let poll = match !rendering && taken.duration_since(*at) >= SAMPLE_INTERVAL {
                true => SAMPLE_INTERVAL,
                false => FRAME_POLL,
            };
            if tokio::time::Instant::now() + poll > wait_until {
                return Err(refuse(Blocker::NotStable));
            }
            tokio::time::sleep(poll).await;
            continue;
        }
        // Out of view: scroll it in; covered: centre it (away from a sticky header or footer).
        scroll = match (&current.blocker, current.in_view) {
            (_, false) => ProbeScroll::IfNeeded,
            (Some(Blocker::Covered(_)), true) => ProbeScroll::Center,
            _ => ProbeScroll::None,
        };
        let interval = match current.scrolled || !chain.hops.is_empty() {
            true => SETTLE_INTERVAL,
            false => SAMPLE_INTERVAL,
        };
        let blocker = current.blocker.clone().unwrap_or(Blocker::NotStable);
        if tokio::time::Instant::now() + interval > wait_until {
            return Err(refuse(blocker));
        }
        // An actionable element of the tab's own document is looked at again soon (a frame may
        // come first); anything else after the whole interval.
        let pause = match current.blocker.is_none() && chain.hops.is_empty() {
            true => FRAME_POLL,
            false => interval,
        };
        let at = sampled_at.unwrap_or_else(tokio::time::Instant::now);
        previous = Some((current, at, interval));
        if queued.is_some() {
            // The page's second sample is already here: judge it at once.
            continue;
        }
        alongside(tokio::time::sleep(pause), &mut during, &mut ran).await;
    }
}

/// Runs `wait` (a sample or a pause of the actionability wait) and, the first time, `during`
/// beside it, recording its output and whether this wait ran it (`During::last_gap`).
async fn alongside<W: std::future::Future, T, F: std::future::Future<Output = T>>(
    wait: W,
    during: &mut Option<F>,
    ran: &mut During<T>,
) -> W::Output {
    match during.take() {
        Some(work) => {
            let (waited, output) = tokio::join!(wait, work);
            ran.output = Some(output);
            ran.last_gap = true;
            waited
        }
        None => {
            ran.last_gap = false;
            wait.await
        }
    }
}

/// Releases the objects the chain resolved (best effort).
pub async fn release(client: &TabCalls, chain: &Chain) {
    let mut sessions: Vec<&SessionId> = chain.hops.iter().map(|h| &h.session).collect();
    sessions.dedup();
    for session in sessions {
        let release = ReleaseObjectGroup {
            object_group: CHAIN_OBJECT_GROUP.to_owned(),
        };
        let _ = client.execute(session, &release, SCRIPT_TIMEOUT).await;
    }
}
