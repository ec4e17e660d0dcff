//! Background driving: what the Broker does so that a managed tab can be driven while it is not
//! the front tab of its window (a popup opened in front of it, a user who switched tabs) and
//! without ever activating a window or a tab. Today that is one thing: keeping a hidden tab's
//! compositor producing frames for the length of a screenshot, with a screencast of tiny
//! frames that nobody acks (a hidden tab's `Page.captureScreenshot` otherwise takes seconds or
//! is never answered; docs/cdp.md "Background driving").
//!
//! It never sends `Target.activateTarget` or `Page.bringToFront`, and owns no state of its own: the
//! session's screencast is shared with the live view's watchers through the one owner that
//! counts its users (`view::keep_rendering`), so it runs for the length of the work or longer,
//! and neither side stops it under the other. Whether a tab is hidden cannot be
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
//!
//! The overrides `browser.emulate` asked for ([`Emulated`], kept in the tab's books with the
//! session they are on) are applied by [`apply`] and undone by `hand_back` the same way: a
//! user tab is handed back as it was found (its viewport, agent, locale, timezone, position,
//! media and network its own again, the geolocation grant of its browser context ended).

use std::future::Future;
use std::time::Duration;

use crate::cdp::browser::{PermissionDescriptor, ResetPermissions, SetPermission};
use crate::cdp::emulation::{
    ClearDeviceMetricsOverride, ClearGeolocationOverride, MediaFeature, SetDeviceMetricsOverride,
    SetEmulatedMedia, SetFocusEmulationEnabled, SetGeolocationOverride, SetLocaleOverride,
    SetTimezoneOverride, SetTouchEmulationEnabled, SetUserAgentOverride,
};
use crate::cdp::network::EmulateNetworkConditions;
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
    // The session's screencast is shared with the live view (`view::keep_rendering` counts
    // its users): it starts unless the view runs one, and stops only when its last user leaves.
    let _rendering = super::view::keep_rendering(client, session, FRAME_EDGE, timeout).await;
    work.await
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
/// again, and the overrides of `browser.emulate` (`emulated`, when they were set on this
/// session) end. Best effort (the session may be gone with its tab, which ends the emulation
/// too).
pub async fn hand_back(
    client: &CdpClient,
    session: &SessionId,
    emulated: Option<&Emulated>,
    timeout: Duration,
) {
    let focus = SetFocusEmulationEnabled { enabled: false };
    if let Err(error) = client.execute(session, &focus, timeout).await {
        tracing::debug!(%error, "ending focus emulation of a released tab");
    }
    if let Some(emulated) = emulated.filter(|e| e.session == *session)
        && let Err(error) = apply(
            client,
            session,
            &Emulated::none(session.clone()),
            emulated,
            timeout,
        )
        .await
    {
        tracing::debug!(%error, "ending the emulation of a released tab");
    }
}

/// A viewport override (CSS pixels).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Viewport {
    pub width: u32,
    pub height: u32,
    pub scale: f64,
    pub mobile: bool,
}

/// A position `navigator.geolocation` reports.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Position {
    pub latitude: f64,
    pub longitude: f64,
    pub accuracy: f64,
}

/// Network conditions: offline, added latency (ms) and throughput caps (bytes/s, `None`: none).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Conditions {
    pub offline: bool,
    pub latency_ms: f64,
    pub download: Option<f64>,
    pub upload: Option<f64>,
}

/// The overrides in force on one session of a tab (`None` / `false`: the tab's own). Plain
/// data in the tab's books; [`apply`] moves a session from one to another.
#[derive(Debug, Clone, PartialEq)]
pub struct Emulated {
    pub session: SessionId,
    pub viewport: Option<Viewport>,
    pub touch: bool,
    pub user_agent: Option<String>,
    pub locale: Option<String>,
    pub timezone: Option<String>,
    pub position: Option<Position>,
    /// The origin geolocation was granted for, and the browser context it was granted in.
    pub granted: Option<(String, Option<String>)>,
    pub color_scheme: Option<&'static str>,
    pub reduced_motion: Option<bool>,
    pub network: Conditions,
}

impl Emulated {
    /// Nothing overridden on `session`.
    pub fn none(session: SessionId) -> Emulated {
        Emulated {
            session,
            viewport: None,
            touch: false,
            user_agent: None,
            locale: None,
            timezone: None,
            position: None,
            granted: None,
            color_scheme: None,
            reduced_motion: None,
            network: Conditions::default(),
        }
    }

    /// Whether anything is overridden.
    pub fn any(&self) -> bool {
        *self != Emulated::none(self.session.clone())
    }
}

/// Moves `session` from the overrides `from` to `to`, sending only the calls for what differs
/// (each override and the call that clears it; a permission granted for `from` is reset in its
/// browser context, one granted for `to` is set). Stops at the first refusal.
pub async fn apply(
    client: &CdpClient,
    session: &SessionId,
    to: &Emulated,
    from: &Emulated,
    timeout: Duration,
) -> Result<(), CdpError> {
    if to.viewport != from.viewport {
        match to.viewport {
            Some(v) => {
                let metrics = SetDeviceMetricsOverride {
                    width: v.width,
                    height: v.height,
                    device_scale_factor: v.scale,
                    mobile: v.mobile,
                };
                client.execute(session, &metrics, timeout).await?;
            }
            None => {
                client
                    .execute(session, &ClearDeviceMetricsOverride {}, timeout)
                    .await?;
            }
        }
    }
    if to.touch != from.touch {
        let touch = SetTouchEmulationEnabled {
            enabled: to.touch,
            max_touch_points: to.touch.then_some(5),
        };
        client.execute(session, &touch, timeout).await?;
    }
    if (&to.user_agent, &to.locale) != (&from.user_agent, &from.locale) {
        // One call carries both: the agent string and the Accept-Language / navigator.language
        // of the locale (an empty agent keeps the browser's own).
        let agent = SetUserAgentOverride {
            user_agent: to.user_agent.clone().unwrap_or_default(),
            accept_language: to.locale.clone(),
        };
        client.execute(session, &agent, timeout).await?;
    }
    if to.locale != from.locale {
        let locale = SetLocaleOverride {
            locale: to.locale.clone(),
        };
        client.execute(session, &locale, timeout).await?;
    }
    if to.timezone != from.timezone {
        let timezone = SetTimezoneOverride {
            timezone_id: to.timezone.clone().unwrap_or_default(),
        };
        client.execute(session, &timezone, timeout).await?;
    }
    if to.position != from.position {
        match to.position {
            Some(p) => {
                let position = SetGeolocationOverride {
                    latitude: p.latitude,
                    longitude: p.longitude,
                    accuracy: p.accuracy,
                };
                client.execute(session, &position, timeout).await?;
            }
            None => {
                client
                    .execute(session, &ClearGeolocationOverride {}, timeout)
                    .await?;
            }
        }
    }
    if to.granted != from.granted {
        if let Some((_, context)) = &from.granted {
            let reset = ResetPermissions {
                browser_context_id: context.clone(),
            };
            client.execute(None, &reset, timeout).await?;
        }
        if let Some((origin, context)) = &to.granted {
            let grant = SetPermission {
                permission: PermissionDescriptor {
                    name: "geolocation",
                },
                setting: "granted",
                origin: origin.clone(),
                browser_context_id: context.clone(),
            };
            client.execute(None, &grant, timeout).await?;
        }
    }
    if (to.color_scheme, to.reduced_motion) != (from.color_scheme, from.reduced_motion) {
        let mut features = Vec::new();
        if let Some(scheme) = to.color_scheme {
            features.push(MediaFeature {
                name: "prefers-color-scheme",
                value: scheme,
            });
        }
        if let Some(reduce) = to.reduced_motion {
            features.push(MediaFeature {
                name: "prefers-reduced-motion",
                value: if reduce { "reduce" } else { "no-preference" },
            });
        }
        client
            .execute(session, &SetEmulatedMedia { features }, timeout)
            .await?;
    }
    if to.network != from.network {
        let conditions = EmulateNetworkConditions {
            offline: to.network.offline,
            latency: to.network.latency_ms,
            download_throughput: to.network.download.unwrap_or(-1.0),
            upload_throughput: to.network.upload.unwrap_or(-1.0),
        };
        client.execute(session, &conditions, timeout).await?;
    }
    Ok(())
}
