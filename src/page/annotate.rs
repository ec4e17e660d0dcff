//! Annotated screenshots on the page side: the live, viewport-clipped boxes of an
//! Observation's refs (`AnnotationBoxes`, `js/annotate.js`, revalidated in the page), the
//! pure scaling of those boxes into image pixels (`image_boxes`), and the drawing function
//! (`ANNOTATE_DRAW`, `js/annotatedraw.js`) that `run::draw_annotations` runs on an unattached
//! `OffscreenCanvas` in the Broker's isolated world. No I/O here.

use serde::{Deserialize, Serialize};
use serde_json::json;

use super::error::PageError;
use super::observe::validate_key;
use super::script::{PageScript, Script, ScriptCall, decode};

/// Refs drawn when the call names none (the contract's "first 200 refs"), and the most a call
/// may name.
pub const ANNOTATION_MAX_REFS: usize = 200;

/// The drawing function: `(image base64, boxes, mime, quality|null, scale) -> base64`.
pub const ANNOTATE_DRAW: &str = include_str!("js/annotatedraw.js");

/// The boxes of `refs` (or of the first [`ANNOTATION_MAX_REFS`] refs in document order) of
/// the Observation `observation_key`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnnotationBoxes {
    pub observation_key: String,
    pub refs: Option<Vec<u32>>,
}

/// A box in viewport CSS pixels, already clipped to the viewport.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
pub struct CssBox {
    #[serde(rename = "ref")]
    pub element_ref: u32,
    pub x: f64,
    pub y: f64,
    pub width: f64,
    pub height: f64,
}

/// Why a ref was not drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SkipReason {
    /// Not a ref of the Observation.
    UnknownRef,
    /// Its element left the document.
    Stale,
    /// Not rendered, hidden or without a box.
    NotVisible,
    /// Wholly outside the viewport.
    OutsideViewport,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Skipped {
    #[serde(rename = "ref")]
    pub element_ref: u32,
    pub reason: SkipReason,
}

#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
pub struct CssSize {
    pub width: f64,
    pub height: f64,
}

/// What `annotate.js` measured.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Annotations {
    pub viewport: CssSize,
    pub boxes: Vec<CssBox>,
    pub skipped: Vec<Skipped>,
}

impl PageScript for AnnotationBoxes {
    type Output = Annotations;

    fn call(&self) -> Result<ScriptCall, PageError> {
        validate_key(&self.observation_key)?;
        if let Some(refs) = &self.refs
            && (refs.len() > ANNOTATION_MAX_REFS || refs.contains(&0))
        {
            return Err(PageError::InvalidOption {
                name: "annotations.refs",
                detail: format!("must be 1..={ANNOTATION_MAX_REFS} refs, each at least 1"),
            });
        }
        Ok(ScriptCall {
            script: Script::AnnotationBoxes,
            argument: json!({
                "observationKey": self.observation_key,
                "refs": self.refs,
                "limit": ANNOTATION_MAX_REFS,
            }),
        })
    }

    fn parse(&self, json: &str) -> Result<Annotations, PageError> {
        let annotations: Annotations = decode(Script::AnnotationBoxes, json)?;
        match annotations.boxes.len() + annotations.skipped.len() > ANNOTATION_MAX_REFS {
            true => Err(PageError::UnexpectedShape {
                script: Script::AnnotationBoxes.entry(),
                detail: "more boxes than refs asked for".to_owned(),
            }),
            false => Ok(annotations),
        }
    }
}

/// A box in image pixels (integers), as the drawing function takes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ImageBox {
    #[serde(rename = "ref")]
    pub element_ref: u32,
    pub x: u32,
    pub y: u32,
    pub width: u32,
    pub height: u32,
}

/// Scales CSS boxes by `scale` (device pixel ratio times any preview scale) into an image of
/// `width` x `height` pixels: the outer edges are rounded outwards, so an outline never cuts
/// into its element, and clamped to the image. Boxes that end up empty are dropped.
pub fn image_boxes(boxes: &[CssBox], scale: f64, width: u32, height: u32) -> Vec<ImageBox> {
    let clamp = |value: f64, limit: u32| value.max(0.0).min(f64::from(limit)) as u32;
    boxes
        .iter()
        .filter_map(|b| {
            // A tiny epsilon keeps exact edges (12.0 * 1.0) from rounding a pixel outwards.
            let left = clamp((b.x * scale + 1e-6).floor(), width);
            let top = clamp((b.y * scale + 1e-6).floor(), height);
            let right = clamp(((b.x + b.width) * scale - 1e-6).ceil(), width);
            let bottom = clamp(((b.y + b.height) * scale - 1e-6).ceil(), height);
            (right > left && bottom > top).then_some(ImageBox {
                element_ref: b.element_ref,
                x: left,
                y: top,
                width: right - left,
                height: bottom - top,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn css(element_ref: u32, x: f64, y: f64, width: f64, height: f64) -> CssBox {
        CssBox {
            element_ref,
            x,
            y,
            width,
            height,
        }
    }

    #[test]
    fn boxes_scale_round_outwards_and_clamp() {
        let boxes = [
            css(1, 10.0, 20.0, 100.0, 30.0),
            css(2, 10.25, 0.5, 5.5, 5.0),
            css(3, 700.0, 400.0, 200.0, 200.0),
            css(4, 0.0, 0.0, 0.0001, 10.0),
        ];
        let scaled = image_boxes(&boxes, 2.0, 800, 500);
        assert_eq!(
            scaled[0],
            ImageBox {
                element_ref: 1,
                x: 20,
                y: 40,
                width: 200,
                height: 60
            }
        );
        assert_eq!((scaled[1].x, scaled[1].y, scaled[1].width), (20, 1, 12));
        // Wholly past the image after scaling: dropped; a sliver keeps one pixel.
        let refs: Vec<u32> = scaled.iter().map(|b| b.element_ref).collect();
        assert_eq!(refs, [1, 2, 4]);
        assert_eq!((scaled[2].width, scaled[2].height), (1, 20));
    }

    #[test]
    fn bad_refs_are_refused_before_the_page() {
        let call = |refs: Option<Vec<u32>>| {
            AnnotationBoxes {
                observation_key: "observation:ab".to_owned(),
                refs,
            }
            .call()
        };
        assert_eq!(call(None).unwrap().argument["refs"], json!(null));
        assert_eq!(
            call(Some(vec![3, 1])).unwrap().argument["refs"],
            json!([3, 1])
        );
        assert!(call(Some(vec![0])).is_err());
        assert!(call(Some((1..=201).collect())).is_err());
    }
}
