//! Document-level page scripts of `js/document.js`: the scroll position and the three ways
//! `browser.scroll` moves a document (by a delta, a selected container, to a text match), the
//! frame's URL and title, and its viewport size. Typed calls and results only; no I/O and no
//! decision about what a scroll proves (that is the tool's evidence).

use serde::{Deserialize, Serialize};
use serde_json::json;

use super::error::PageError;
use super::script::{PageScript, Script, ScriptCall, decode};

/// A scroll position in CSS pixels (a container's may be fractional).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ScrollXY {
    pub x: f64,
    pub y: f64,
}

/// The document's scroll position, rounded to the CSS pixel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScrollPosition;

impl PageScript for ScrollPosition {
    type Output = ScrollXY;

    fn call(&self) -> Result<ScriptCall, PageError> {
        Ok(ScriptCall {
            script: Script::ScrollPosition,
            argument: json!({}),
        })
    }

    fn parse(&self, json: &str) -> Result<ScrollXY, PageError> {
        decode(Script::ScrollPosition, json)
    }
}

/// Scrolls the document by a delta.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScrollPage {
    pub dx: i64,
    pub dy: i64,
}

#[derive(Deserialize)]
struct Scrolled {
    #[expect(
        dead_code,
        reason = "the script's acknowledgement; only its shape is checked"
    )]
    scrolled: bool,
}

impl PageScript for ScrollPage {
    type Output = ();

    fn call(&self) -> Result<ScriptCall, PageError> {
        Ok(ScriptCall {
            script: Script::ScrollPage,
            argument: json!({"dx": self.dx, "dy": self.dy}),
        })
    }

    fn parse(&self, json: &str) -> Result<(), PageError> {
        decode::<Scrolled>(Script::ScrollPage, json).map(|_| ())
    }
}

/// Scrolls the first element matching `selector` by a delta. The selector goes to the page
/// as given: an invalid one is no match, as it always was for `browser.scroll`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScrollContainer {
    pub selector: String,
    pub dx: i64,
    pub dy: i64,
}

/// How a selected container scrolled: its position before and after.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ContainerScroll {
    pub moved: bool,
    pub before: ScrollXY,
    pub after: ScrollXY,
}

#[derive(Deserialize)]
struct ContainerAnswer {
    found: bool,
    #[serde(flatten)]
    scroll: Option<ContainerScroll>,
}

impl PageScript for ScrollContainer {
    /// `None` when the selector is invalid or matches nothing.
    type Output = Option<ContainerScroll>;

    fn call(&self) -> Result<ScriptCall, PageError> {
        Ok(ScriptCall {
            script: Script::ScrollContainer,
            argument: json!({"selector": self.selector, "dx": self.dx, "dy": self.dy}),
        })
    }

    fn parse(&self, json: &str) -> Result<Option<ContainerScroll>, PageError> {
        let answer: ContainerAnswer = decode(Script::ScrollContainer, json)?;
        match (answer.found, answer.scroll) {
            (true, Some(scroll)) => Ok(Some(scroll)),
            (false, _) => Ok(None),
            (true, None) => Err(PageError::UnexpectedShape {
                script: Script::ScrollContainer.entry(),
                detail: "a found container without positions".to_owned(),
            }),
        }
    }
}

/// Scrolls the first visible text match into the middle of the viewport.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScrollToText {
    pub text: String,
}

#[derive(Deserialize)]
struct Found {
    found: bool,
}

impl PageScript for ScrollToText {
    /// Whether a visible match was found (and scrolled to).
    type Output = bool;

    fn call(&self) -> Result<ScriptCall, PageError> {
        Ok(ScriptCall {
            script: Script::ScrollToText,
            argument: json!({"text": self.text}),
        })
    }

    fn parse(&self, json: &str) -> Result<bool, PageError> {
        decode::<Found>(Script::ScrollToText, json).map(|found| found.found)
    }
}

/// The frame's URL and title, each cut one character past its bound (so the caller's
/// bounding marks a cut value).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DocumentInfo {
    pub max_url_chars: usize,
    pub max_title_chars: usize,
}

/// What `documentInfo` read.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct UrlAndTitle {
    pub url: String,
    pub title: String,
}

impl PageScript for DocumentInfo {
    type Output = UrlAndTitle;

    fn call(&self) -> Result<ScriptCall, PageError> {
        Ok(ScriptCall {
            script: Script::DocumentInfo,
            argument: json!({"maxUrlChars": self.max_url_chars, "maxTitleChars": self.max_title_chars}),
        })
    }

    fn parse(&self, json: &str) -> Result<UrlAndTitle, PageError> {
        decode(Script::DocumentInfo, json)
    }
}

/// The frame's layout viewport in its own CSS pixels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ViewportSize;

/// Width and height of a viewport, and whether its document is hidden (`visibilityState`).
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
pub struct Viewport {
    pub width: f64,
    pub height: f64,
    #[serde(default)]
    pub hidden: bool,
}

impl PageScript for ViewportSize {
    type Output = Viewport;

    fn call(&self) -> Result<ScriptCall, PageError> {
        Ok(ScriptCall {
            script: Script::ViewportSize,
            argument: json!({}),
        })
    }

    fn parse(&self, json: &str) -> Result<Viewport, PageError> {
        decode(Script::ViewportSize, json)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn container_answers_decode() {
        let script = ScrollContainer {
            selector: "#list".into(),
            dx: 0,
            dy: 100,
        };
        assert_eq!(script.parse(r#"{"found":false}"#).unwrap(), None);
        let moved = script
            .parse(r#"{"found":true,"moved":true,"before":{"x":0,"y":0},"after":{"x":0,"y":99.5}}"#)
            .unwrap()
            .unwrap();
        assert!(moved.moved);
        assert_eq!(moved.after.y, 99.5);
        assert!(script.parse(r#"{"found":true}"#).is_err());
    }

    #[test]
    fn document_scripts_decode() {
        assert_eq!(
            ScrollPosition.parse(r#"{"x":0,"y":600}"#).unwrap(),
            ScrollXY { x: 0.0, y: 600.0 }
        );
        assert!(
            ScrollToText { text: "a".into() }
                .parse(r#"{"found":true}"#)
                .unwrap()
        );
        let info = DocumentInfo {
            max_url_chars: 10,
            max_title_chars: 5,
        };
        assert_eq!(info.call().unwrap().argument["maxUrlChars"], 10);
        assert_eq!(
            info.parse(r#"{"url":"http://a/","title":"T"}"#)
                .unwrap()
                .title,
            "T"
        );
        assert_eq!(
            ViewportSize
                .parse(r#"{"width":800,"height":600}"#)
                .unwrap()
                .width,
            800.0
        );
    }
}
