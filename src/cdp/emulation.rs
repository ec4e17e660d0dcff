//! The `Emulation` domain. Focus emulation: a page in a window without OS focus (every managed
//! tab opens in its own unfocused window) gets no `focus`/`blur` events, `:focus` does not match
//! and `document.hasFocus()` is false; `SetFocusEmulationEnabled` makes the page behave as
//! focused without activating any window. And the overrides of `browser.emulate`: device
//! metrics, touch, user agent and `Accept-Language`, locale, timezone, geolocation and media
//! features, each with the call that clears it (docs/cdp.md, "emulation"). Every override lives
//! as long as the session that set it. Wire shapes only: which sessions get what is
//! `session::tab`'s and `session::background`'s.

use serde::Serialize;

use super::command::{Command, Empty};

/// `Emulation.setFocusEmulationEnabled`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SetFocusEmulationEnabled {
    pub enabled: bool,
}

impl Command for SetFocusEmulationEnabled {
    const METHOD: &'static str = "Emulation.setFocusEmulationEnabled";
    type Reply = Empty;
}

/// `Emulation.setDeviceMetricsOverride`: the viewport in CSS pixels, the device pixel ratio,
/// and `mobile` (a layout viewport of 980 px unless the page has a viewport meta tag, as on a
/// phone).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SetDeviceMetricsOverride {
    pub width: u32,
    pub height: u32,
    pub device_scale_factor: f64,
    pub mobile: bool,
}

impl Command for SetDeviceMetricsOverride {
    const METHOD: &'static str = "Emulation.setDeviceMetricsOverride";
    type Reply = Empty;
}

/// `Emulation.clearDeviceMetricsOverride`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClearDeviceMetricsOverride {}

impl Command for ClearDeviceMetricsOverride {
    const METHOD: &'static str = "Emulation.clearDeviceMetricsOverride";
    type Reply = Empty;
}

/// `Emulation.setTouchEmulationEnabled` (`navigator.maxTouchPoints`, touch media features).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SetTouchEmulationEnabled {
    pub enabled: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_touch_points: Option<u32>,
}

impl Command for SetTouchEmulationEnabled {
    const METHOD: &'static str = "Emulation.setTouchEmulationEnabled";
    type Reply = Empty;
}

/// `Emulation.setUserAgentOverride`: an empty `user_agent` keeps the browser's own, so the
/// call also sets `Accept-Language` / `navigator.language` alone, and with both empty clears.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SetUserAgentOverride {
    pub user_agent: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub accept_language: Option<String>,
}

impl Command for SetUserAgentOverride {
    const METHOD: &'static str = "Emulation.setUserAgentOverride";
    type Reply = Empty;
}

/// `Emulation.setLocaleOverride` (ICU: `Intl`, number and date formats); without `locale` it
/// clears.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SetLocaleOverride {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub locale: Option<String>,
}

impl Command for SetLocaleOverride {
    const METHOD: &'static str = "Emulation.setLocaleOverride";
    type Reply = Empty;
}

/// `Emulation.setTimezoneOverride`: an IANA id; the empty id clears.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SetTimezoneOverride {
    pub timezone_id: String,
}

impl Command for SetTimezoneOverride {
    const METHOD: &'static str = "Emulation.setTimezoneOverride";
    type Reply = Empty;
}

/// `Emulation.setGeolocationOverride`: the position `navigator.geolocation` reports (the page
/// still needs the geolocation permission).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SetGeolocationOverride {
    pub latitude: f64,
    pub longitude: f64,
    pub accuracy: f64,
}

impl Command for SetGeolocationOverride {
    const METHOD: &'static str = "Emulation.setGeolocationOverride";
    type Reply = Empty;
}

/// `Emulation.clearGeolocationOverride`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClearGeolocationOverride {}

impl Command for ClearGeolocationOverride {
    const METHOD: &'static str = "Emulation.clearGeolocationOverride";
    type Reply = Empty;
}

/// One media feature of [`SetEmulatedMedia`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MediaFeature {
    pub name: &'static str,
    pub value: &'static str,
}

/// `Emulation.setEmulatedMedia { features }`: replaces every emulated feature (the empty list
/// clears them all).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SetEmulatedMedia {
    pub features: Vec<MediaFeature>,
}

impl Command for SetEmulatedMedia {
    const METHOD: &'static str = "Emulation.setEmulatedMedia";
    type Reply = Empty;
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::cdp::command::testing::params;

    #[test]
    fn focus_emulation_has_the_wire_shape() {
        assert_eq!(
            params(&SetFocusEmulationEnabled { enabled: true }),
            json!({"enabled": true})
        );
    }

    #[test]
    fn overrides_have_the_wire_shape() {
        let metrics = SetDeviceMetricsOverride {
            width: 390,
            height: 844,
            device_scale_factor: 3.0,
            mobile: true,
        };
        assert_eq!(
            params(&metrics),
            json!({"width": 390, "height": 844, "deviceScaleFactor": 3.0, "mobile": true})
        );
        let touch = SetTouchEmulationEnabled {
            enabled: true,
            max_touch_points: Some(5),
        };
        assert_eq!(
            params(&touch),
            json!({"enabled": true, "maxTouchPoints": 5})
        );
        let agent = SetUserAgentOverride {
            user_agent: String::new(),
            accept_language: Some("fr-FR".into()),
        };
        assert_eq!(
            params(&agent),
            json!({"userAgent": "", "acceptLanguage": "fr-FR"})
        );
        assert_eq!(params(&SetLocaleOverride { locale: None }), json!({}));
        assert_eq!(
            params(&SetTimezoneOverride {
                timezone_id: "Asia/Tokyo".into()
            }),
            json!({"timezoneId": "Asia/Tokyo"})
        );
        let media = SetEmulatedMedia {
            features: vec![MediaFeature {
                name: "prefers-color-scheme",
                value: "dark",
            }],
        };
        assert_eq!(
            params(&media),
            json!({"features": [{"name": "prefers-color-scheme", "value": "dark"}]})
        );
    }
}
