//! `browser.emulate` (capability `page.emulate`, mutating): overrides of what one controlled
//! tab's pages are told about the device, the user and the network (viewport and device scale,
//! a device preset, touch, user agent, locale, timezone, geolocation, colour scheme, reduced
//! motion, offline and a throttle). The overrides live on the tab's CDP session only (no other
//! tab sees them) and end when control ends: `session::background::hand_back` undoes them when
//! a user tab is released, its Lease ends or its Workspace is released, so a user's tab is left
//! as it was found. A geolocation position also grants the `geolocation` permission to the
//! tab's current origin in its browser context, until that hand-back resets the context's
//! permission overrides. Owns the presets, the argument checks and the merge of a call into the
//! overrides in force; the CDP calls and their undo are `session::background`'s.

use serde::Deserialize;
use serde_json::{Value, json};

use super::context::{Conditions, Emulated, Position, TargetScope, ToolEnv, Viewport};
use super::error::ToolError;
use super::manifest::{Gate, Lane, ToolDef, object, open_object};
use super::tab::{ControlledTab, SCRIPT_TIMEOUT};
use crate::cdp::CdpError;
use crate::protocol::errors::RpcError;

/// The device presets: (name, width, height, device scale, mobile and touch).
pub const DEVICES: [(&str, u32, u32, f64, bool); 3] = [
    ("phone", 390, 844, 3.0, true),
    ("tablet", 820, 1180, 2.0, true),
    ("desktop", 1280, 800, 1.0, false),
];
/// Smallest and largest viewport edge accepted (CSS pixels), as Chromium bounds its own.
pub const MIN_EDGE: u32 = 100;
pub const MAX_EDGE: u32 = 10_000;

pub fn defs() -> Vec<ToolDef> {
    let devices: Vec<&str> = DEVICES.iter().map(|d| d.0).collect();
    vec![ToolDef {
        name: "browser.emulate",
        description: "Emulates a device, place or network on the tab: a `device` preset (phone 390x844 @3 mobile+touch, tablet 820x1180 @2 mobile+touch, desktop 1280x800 @1) or a viewport, touch, user agent, locale, timezone, geolocation (granted to the tab's origin), colour scheme, reduced motion, offline and a throttle. Fields not given keep their current override; `reset` first returns the tab to its own. Undone when control of the tab ends.",
        capability: "page.emulate",
        mutating: true,
        input_schema: object(
            json!({
                "reset": {"type": "boolean", "description": "Drop every override first."},
                "device": {"enum": devices, "description": "Device preset (viewport, scale, mobile, touch)."},
                "width": {"type": "integer", "minimum": MIN_EDGE, "maximum": MAX_EDGE, "description": "Viewport width in CSS pixels."},
                "height": {"type": "integer", "minimum": MIN_EDGE, "maximum": MAX_EDGE, "description": "Viewport height in CSS pixels."},
                "deviceScaleFactor": {"type": "number", "minimum": 0.5, "maximum": 5, "description": "Device pixel ratio."},
                "touch": {"type": "boolean", "description": "Touch screen (maxTouchPoints 5)."},
                "userAgent": {"type": "string", "minLength": 1, "maxLength": 1024, "description": "User-Agent string."},
                "locale": {"type": "string", "minLength": 2, "maxLength": 35, "description": "BCP 47 locale, such as fr-FR (Intl, navigator.language, Accept-Language)."},
                "timezone": {"type": "string", "minLength": 1, "maxLength": 64, "description": "IANA timezone, such as Asia/Tokyo."},
                "geolocation": described(object(json!({
                    "latitude": {"type": "number", "minimum": -90, "maximum": 90, "description": "Degrees."},
                    "longitude": {"type": "number", "minimum": -180, "maximum": 180, "description": "Degrees."},
                    "accuracy": {"type": "number", "minimum": 0, "maximum": 100000, "description": "Metres; default 10."},
                }), &["latitude", "longitude"]), "Position navigator.geolocation reports."),
                "colorScheme": {"enum": ["light", "dark"], "description": "prefers-color-scheme."},
                "reducedMotion": {"type": "boolean", "description": "prefers-reduced-motion: reduce."},
                "offline": {"type": "boolean", "description": "Every request of the tab fails."},
                "throttle": described(object(json!({
                    "latencyMs": {"type": "integer", "minimum": 0, "maximum": 60000, "description": "Added round-trip latency."},
                    "downloadKbps": {"type": "integer", "minimum": 1, "maximum": 10000000, "description": "Download cap, kilobits per second."},
                    "uploadKbps": {"type": "integer", "minimum": 1, "maximum": 10000000, "description": "Upload cap, kilobits per second."},
                }), &[]), "Slow network."),
            }),
            &[],
        ),
        output_schema: open_object(
            json!({
                "workspaceId": {"type": "string"},
                "leaseId": {"type": "string"},
                "targetId": {"type": "string"},
                "emulation": {"type": ["object", "null"], "description": "The overrides now in force (null: the tab's own)."},
            }),
            &["targetId", "emulation"],
        ),
        sensitivity_input: &["browser_data"],
        sensitivity_output: &["browser_data"],
        lane: Lane::Ordinary,
        gate: Gate::InTool,
        handler: handler!(Target: emulate),
    }]
}

/// `schema` with a `description` (every input property carries one).
fn described(mut schema: Value, description: &str) -> Value {
    schema["description"] = json!(description);
    schema
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct GeoParams {
    latitude: f64,
    longitude: f64,
    accuracy: Option<f64>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ThrottleParams {
    latency_ms: Option<u64>,
    download_kbps: Option<u64>,
    upload_kbps: Option<u64>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct EmulateParams {
    reset: Option<bool>,
    device: Option<String>,
    width: Option<u32>,
    height: Option<u32>,
    device_scale_factor: Option<f64>,
    touch: Option<bool>,
    user_agent: Option<String>,
    locale: Option<String>,
    timezone: Option<String>,
    geolocation: Option<GeoParams>,
    color_scheme: Option<String>,
    reduced_motion: Option<bool>,
    offline: Option<bool>,
    throttle: Option<ThrottleParams>,
}

fn bad(path: &str, message: &str) -> RpcError {
    RpcError::invalid_params(format!("arguments.{path} {message}"))
        .with_context("path", json!(format!("arguments.{path}")))
}

/// Kilobits per second as the bytes per second CDP takes.
fn bytes_per_second(kbps: u64) -> f64 {
    kbps as f64 * 1000.0 / 8.0
}

/// `current` with this call's fields merged in (`reset`: from the tab's own); the permission
/// grant follows the position and is filled in by the caller.
fn merge(current: &Emulated, params: &EmulateParams) -> Result<Emulated, RpcError> {
    let mut next = match params.reset {
        Some(true) => Emulated::none(current.session.clone()),
        _ => current.clone(),
    };
    if let Some(name) = &params.device {
        let (_, width, height, scale, mobile) = DEVICES
            .iter()
            .find(|d| d.0 == name)
            .copied()
            .ok_or_else(|| bad("device", "is not a preset"))?;
        next.viewport = Some(Viewport {
            width,
            height,
            scale,
            mobile,
        });
        next.touch = mobile;
    }
    if params.width.is_some() || params.height.is_some() || params.device_scale_factor.is_some() {
        let base = next.viewport.unwrap_or(Viewport {
            width: 0,
            height: 0,
            scale: 1.0,
            mobile: false,
        });
        let width = params.width.unwrap_or(base.width);
        let height = params.height.unwrap_or(base.height);
        if width == 0 || height == 0 {
            return Err(bad(
                if width == 0 { "width" } else { "height" },
                "is needed with the other viewport fields (or a device)",
            ));
        }
        next.viewport = Some(Viewport {
            width,
            height,
            scale: params.device_scale_factor.unwrap_or(base.scale),
            mobile: base.mobile,
        });
    }
    if let Some(touch) = params.touch {
        next.touch = touch;
    }
    if let Some(agent) = &params.user_agent {
        if agent.chars().any(char::is_control) {
            return Err(bad("userAgent", "must not hold control characters"));
        }
        next.user_agent = Some(agent.clone());
    }
    if let Some(locale) = &params.locale {
        if !locale
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return Err(bad("locale", "must be a BCP 47 tag such as fr-FR"));
        }
        next.locale = Some(locale.clone());
    }
    if let Some(timezone) = &params.timezone {
        if !timezone
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "/_-+".contains(c))
        {
            return Err(bad(
                "timezone",
                "must be an IANA timezone such as Asia/Tokyo",
            ));
        }
        next.timezone = Some(timezone.clone());
    }
    if let Some(geo) = &params.geolocation {
        next.position = Some(Position {
            latitude: geo.latitude,
            longitude: geo.longitude,
            accuracy: geo.accuracy.unwrap_or(10.0),
        });
    }
    if let Some(scheme) = &params.color_scheme {
        next.color_scheme = Some(match scheme.as_str() {
            "dark" => "dark",
            _ => "light",
        });
    }
    if let Some(reduce) = params.reduced_motion {
        next.reduced_motion = Some(reduce);
    }
    if let Some(offline) = params.offline {
        next.network.offline = offline;
    }
    if let Some(throttle) = &params.throttle {
        next.network = Conditions {
            offline: next.network.offline,
            latency_ms: throttle.latency_ms.unwrap_or(0) as f64,
            download: throttle.download_kbps.map(bytes_per_second),
            upload: throttle.upload_kbps.map(bytes_per_second),
        };
    }
    Ok(next)
}

/// The overrides in force, in wire form (`null`: none).
fn emulation_json(e: &Emulated) -> Value {
    if !e.any() {
        return Value::Null;
    }
    let kbps = |bytes: Option<f64>| bytes.map(|b| (b * 8.0 / 1000.0).round() as u64);
    json!({
        "viewport": e.viewport.map(|v| json!({"width": v.width, "height": v.height, "deviceScaleFactor": v.scale, "mobile": v.mobile})),
        "touch": e.touch,
        "userAgent": e.user_agent,
        "locale": e.locale,
        "timezone": e.timezone,
        "geolocation": e.position.map(|p| json!({"latitude": p.latitude, "longitude": p.longitude, "accuracy": p.accuracy})),
        "geolocationGrantedTo": e.granted.as_ref().map(|(origin, _)| origin),
        "colorScheme": e.color_scheme,
        "reducedMotion": e.reduced_motion,
        "offline": e.network.offline,
        "throttle": (e.network.latency_ms > 0.0 || e.network.download.is_some() || e.network.upload.is_some())
            .then(|| json!({"latencyMs": e.network.latency_ms as u64, "downloadKbps": kbps(e.network.download), "uploadKbps": kbps(e.network.upload)})),
    })
}

/// The origin of an http(s) URL (`scheme://host[:port]`), for the geolocation grant.
fn origin_of(url: &str) -> Option<String> {
    let parsed = url::Url::parse(url).ok()?;
    matches!(parsed.scheme(), "http" | "https").then(|| parsed.origin().ascii_serialization())
}

async fn emulate(
    env: &ToolEnv,
    scope: &TargetScope<'_>,
    params: EmulateParams,
) -> Result<Value, ToolError> {
    let mut tab = ControlledTab::acquire(env, scope).await?;
    let session = tab.session().await?;
    let current = tab.emulation(&session);
    let mut next = merge(&current, &params)?;
    next.granted = match next.position {
        None => None,
        Some(_) => {
            let (url, _) = tab.page_info().await?;
            match origin_of(&url) {
                Some(origin) => {
                    let target = tab.target().clone();
                    let context = (tab.calls().get_targets(SCRIPT_TIMEOUT).await?)
                        .into_iter()
                        .find(|info| info.target_id == target)
                        .and_then(|info| info.browser_context_id);
                    Some((origin, context))
                }
                None => None,
            }
        }
    };
    match tab.emulate(next.clone()).await {
        Ok(()) => {}
        Err(CdpError::Remote { message, .. }) => {
            return Err(RpcError::invalid_params(format!(
                "the browser refused the emulation: {message}"
            ))
            .into());
        }
        Err(other) => return Err(other.into()),
    }
    Ok(json!({
        "workspaceId": scope.workspace_id,
        "leaseId": scope.lease_id,
        "targetId": scope.target_id,
        "emulation": emulation_json(&next),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cdp::SessionId;

    fn params(v: Value) -> EmulateParams {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn a_call_merges_into_the_overrides_in_force() {
        let none = Emulated::none(SessionId::new("S"));
        let phone = merge(
            &none,
            &params(json!({"device": "phone", "colorScheme": "dark"})),
        )
        .unwrap();
        assert_eq!(
            phone.viewport,
            Some(Viewport {
                width: 390,
                height: 844,
                scale: 3.0,
                mobile: true
            })
        );
        assert!(phone.touch);
        assert_eq!(phone.color_scheme, Some("dark"));
        // A later call keeps what it does not name; a width keeps the preset's height.
        let wider = merge(&phone, &params(json!({"width": 430, "offline": true}))).unwrap();
        assert_eq!(wider.viewport.unwrap().width, 430);
        assert_eq!(wider.viewport.unwrap().height, 844);
        assert_eq!(wider.color_scheme, Some("dark"));
        assert!(wider.network.offline);
        let reset = merge(
            &wider,
            &params(json!({"reset": true, "timezone": "Asia/Tokyo"})),
        )
        .unwrap();
        assert_eq!(reset.viewport, None);
        assert!(!reset.network.offline);
        assert_eq!(reset.timezone.as_deref(), Some("Asia/Tokyo"));
        let throttled = merge(
            &none,
            &params(json!({"throttle": {"latencyMs": 400, "downloadKbps": 800}})),
        )
        .unwrap();
        assert_eq!(throttled.network.download, Some(100_000.0));
        assert_eq!(emulation_json(&throttled)["throttle"]["downloadKbps"], 800);
        assert_eq!(emulation_json(&none), Value::Null);
    }

    #[test]
    fn bad_arguments_name_their_path() {
        let none = Emulated::none(SessionId::new("S"));
        for (args, path) in [
            (json!({"width": 500}), "arguments.height"),
            (json!({"locale": "fr FR"}), "arguments.locale"),
            (json!({"timezone": "Asia/To kyo"}), "arguments.timezone"),
            (json!({"userAgent": "a\nb"}), "arguments.userAgent"),
        ] {
            let error = merge(&none, &params(args.clone())).err().unwrap();
            assert_eq!(error.context.unwrap()["path"], path, "{args}");
        }
        assert_eq!(
            origin_of("http://127.0.0.1:8080/x?y"),
            Some("http://127.0.0.1:8080".into())
        );
        assert_eq!(origin_of("about:blank"), None);
    }
}
