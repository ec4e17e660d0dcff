//! Background driving: what the Broker does so that a managed tab can be driven while it is not
//! the front tab of its window (a popup opened in front of it, a user who switched tabs) and
//! without ever activating a window or a tab. Today that is one thing: keeping a hidden tab's
//! compositor producing frames for the length of a screenshot, with a screencast of tiny
//! frames that nobody acks (a hidden tab's `Page.captureScreenshot` otherwise takes seconds or
//! is never answered; docs/cdp.md "Background driving").
//!
//! It never sends `Target.activateTarget` or `Page.bringToFront`, and owns no state: the
//! screencast lives exactly as long as the work it wraps. Whether a tab is hidden cannot be
//! read from the page (focus emulation makes a hidden tab report `visible`), so `when_slow`
//! starts the screencast only once the work has waited longer than a visible tab takes.
//!
//! It also owns the per-session emulation a controlled tab runs under (`emulate`: focus
//! emulation, so a page in an unfocused window behaves as focused) and its hand-back
//! (`hand_back`): when a tab is released (`browser.tabs.release`, the controlling Lease ending,
//! the Workspace released) the page sees its true focus and visibility again, and `emulate`
//! runs again when a Lease controls it once more. The release path is the one of download
//! capture (`downloads::release_tab` and `downloads::on_control` call these two), so a new
//! per-session emulation adds its setting to `emulate` and its restore to `hand_back`.

use std::future::Future;
use std::time::Duration;

use crate::cdp::emulation::SetFocusEmulationEnabled;
use crate::cdp::page::{StartScreencast, StopScreencast};
use crate::cdp::{CdpClient, CdpError, SessionId};

/// Smallest frames Chromium encodes for the screencast: they are never read.
const FRAME_EDGE: u64 = 16;

/// Runs `work` (a screenshot of the tab on `session`) while the tab keeps rendering, also when
/// it is hidden. Starting or stopping the screencast is best effort: when Chromium refuses it
/// the work still runs, and its own deadline applies.
pub async fn rendering<T>(
    client: &CdpClient,
    session: &SessionId,
    timeout: Duration,
    work: impl Future<Output = T>,
) -> T {
    let start = StartScreencast {
        format: "jpeg",
        quality: 1,
        max_width: FRAME_EDGE,
        max_height: FRAME_EDGE,
    };
    let started = client.execute(session, &start, timeout).await.is_ok();
    let outcome = work.await;
    if started {
        let _ = client.execute(session, &StopScreencast {}, timeout).await;
    }
    outcome
}

/// Runs `work` (a screenshot of the tab on `session`) as it is, and starts the screencast of
/// [`rendering`] only when it has not finished after `patience`: a visible tab is captured
/// without the screencast's cost, a hidden one after `patience` more. Stopping is best effort.
pub async fn when_slow<T>(
    client: &CdpClient,
    session: &SessionId,
    timeout: Duration,
    patience: Duration,
    work: impl Future<Output = T>,
) -> T {
    tokio::pin!(work);
    if let Ok(outcome) = tokio::time::timeout(patience, &mut work).await {
        return outcome;
    }
    rendering(client, session, timeout, work).await
}

/// Turns on the emulation a controlled tab runs under: the page behaves as focused (focus and
/// blur events, `:focus`, `hasFocus()`) without any window being activated.
pub async fn emulate(
    client: &CdpClient,
    session: &SessionId,
    timeout: Duration,
) -> Result<(), CdpError> {
    let focus = SetFocusEmulationEnabled { enabled: true };
    client.execute(session, &focus, timeout).await.map(|_| ())
}

/// Undoes [`emulate`] on a tab handed back: the page reports its true focus and visibility
/// again. Best effort (the session may be gone with its tab, which ends the emulation too).
pub async fn hand_back(client: &CdpClient, session: &SessionId, timeout: Duration) {
    let focus = SetFocusEmulationEnabled { enabled: false };
    if let Err(error) = client.execute(session, &focus, timeout).await {
        tracing::debug!(%error, "ending focus emulation of a released tab");
    }
}
