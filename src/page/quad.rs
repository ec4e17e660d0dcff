//! Four-point projective maps: how a point of a frame's viewport lands in its parent's viewport
//! when the frame's `<iframe>` element is CSS-transformed (rotated, scaled, skewed, or seen in
//! perspective, also through a transformed ancestor). The `<iframe>`'s content quad (its content
//! box as the parent's viewport shows it, four corners in order top-left, top-right,
//! bottom-right, bottom-left of the untransformed box) is the image of the frame's viewport
//! rectangle `[0, w] x [0, h]`; a projective map (homography) through those four corners maps
//! every point of the frame exactly, affine transforms being the special case with a flat last
//! row. Pure arithmetic: no CDP, no page, no I/O.

/// A point in CSS px of some viewport.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    pub x: f64,
    pub y: f64,
}

impl Point {
    pub fn new(x: f64, y: f64) -> Point {
        Point { x, y }
    }
}

/// Four corners: top-left, top-right, bottom-right, bottom-left of the untransformed box, as CDP's
/// `DOM.getBoxModel` quads list them (`[x1, y1, ..., x4, y4]`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Quad(pub [Point; 4]);

impl Quad {
    /// From CDP's eight numbers; `None` for another length or a non-finite number.
    pub fn from_numbers(numbers: &[f64]) -> Option<Quad> {
        if numbers.len() != 8 || numbers.iter().any(|n| !n.is_finite()) {
            return None;
        }
        let p = |i: usize| Point::new(numbers[2 * i], numbers[2 * i + 1]);
        Some(Quad([p(0), p(1), p(2), p(3)]))
    }

    /// Twice the signed area (shoelace); near zero for a degenerate quad.
    fn doubled_area(&self) -> f64 {
        let p = &self.0;
        (0..4)
            .map(|i| {
                let (a, b) = (p[i], p[(i + 1) % 4]);
                a.x * b.y - b.x * a.y
            })
            .sum()
    }
}

/// A projective map of the plane, as a 3x3 matrix acting on `(x, y, 1)`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct QuadMap {
    m: [[f64; 3]; 3],
}

/// Below this (squared CSS px) a quad has no usable area: nothing can be clicked through it.
const MIN_DOUBLED_AREA: f64 = 1e-6;

impl QuadMap {
    /// The map taking the viewport rectangle `[0, width] x [0, height]` onto `quad` (corner to
    /// corner). `None` when the viewport is empty or the quad degenerate (zero area, or three
    /// corners on a line), i.e. when no point maps back uniquely.
    pub fn from_viewport(width: f64, height: f64, quad: &Quad) -> Option<QuadMap> {
        if !(width > 0.0 && height > 0.0) || quad.doubled_area().abs() < MIN_DOUBLED_AREA {
            return None;
        }
        let [p0, p1, p2, p3] = quad.0;
        // Unit square -> quad (the classic closed form): corners (0,0) (1,0) (1,1) (0,1).
        let (dx1, dx2, dx3) = (p1.x - p2.x, p3.x - p2.x, p0.x - p1.x + p2.x - p3.x);
        let (dy1, dy2, dy3) = (p1.y - p2.y, p3.y - p2.y, p0.y - p1.y + p2.y - p3.y);
        let den = dx1 * dy2 - dx2 * dy1;
        if den.abs() < f64::EPSILON {
            return None;
        }
        let g = (dx3 * dy2 - dx2 * dy3) / den;
        let h = (dx1 * dy3 - dx3 * dy1) / den;
        let square = [
            [p1.x - p0.x + g * p1.x, p3.x - p0.x + h * p3.x, p0.x],
            [p1.y - p0.y + g * p1.y, p3.y - p0.y + h * p3.y, p0.y],
            [g, h, 1.0],
        ];
        // Viewport -> unit square is a scale; fold it into the first two columns.
        let mut m = square;
        for row in &mut m {
            row[0] /= width;
            row[1] /= height;
        }
        let map = QuadMap { m };
        map.determinant().abs().is_normal().then_some(map)
    }

    /// Where `point` lands; `None` for a point the map sends to infinity or behind the viewer
    /// (possible only with a perspective quad, for points outside the frame).
    pub fn apply(&self, point: Point) -> Option<Point> {
        let m = &self.m;
        let w = m[2][0] * point.x + m[2][1] * point.y + m[2][2];
        if w <= f64::EPSILON {
            return None;
        }
        let x = (m[0][0] * point.x + m[0][1] * point.y + m[0][2]) / w;
        let y = (m[1][0] * point.x + m[1][1] * point.y + m[1][2]) / w;
        (x.is_finite() && y.is_finite()).then_some(Point::new(x, y))
    }

    /// The map back (parent viewport -> frame viewport), or `None` when not invertible.
    pub fn inverse(&self) -> Option<QuadMap> {
        let m = &self.m;
        let det = self.determinant();
        if !det.is_normal() {
            return None;
        }
        let cof = |r0: usize, r1: usize, c0: usize, c1: usize| {
            m[r0][c0] * m[r1][c1] - m[r0][c1] * m[r1][c0]
        };
        let adjugate = [
            [cof(1, 2, 1, 2), -cof(0, 2, 1, 2), cof(0, 1, 1, 2)],
            [-cof(1, 2, 0, 2), cof(0, 2, 0, 2), -cof(0, 1, 0, 2)],
            [cof(1, 2, 0, 1), -cof(0, 2, 0, 1), cof(0, 1, 0, 1)],
        ];
        // Normalise so the bottom-right entry is 1 when possible (keeps `apply`'s w positive for
        // points in front of the viewer).
        let scale = match adjugate[2][2] {
            s if s.abs() > f64::EPSILON => s,
            _ => det,
        };
        let mut inv = adjugate;
        for row in &mut inv {
            for value in row.iter_mut() {
                *value /= scale;
            }
        }
        Some(QuadMap { m: inv })
    }

    fn determinant(&self) -> f64 {
        let m = &self.m;
        m[0][0] * (m[1][1] * m[2][2] - m[1][2] * m[2][1])
            - m[0][1] * (m[1][0] * m[2][2] - m[1][2] * m[2][0])
            + m[0][2] * (m[1][0] * m[2][1] - m[1][1] * m[2][0])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: Point, b: Point) -> bool {
        (a.x - b.x).abs() < 1e-6 && (a.y - b.y).abs() < 1e-6
    }

    fn quad(points: [(f64, f64); 4]) -> Quad {
        Quad(points.map(|(x, y)| Point::new(x, y)))
    }

    #[test]
    fn corners_map_to_corners_and_back() {
        // A perspective-looking quad (no two sides parallel).
        let q = quad([(100.0, 50.0), (420.0, 80.0), (390.0, 300.0), (130.0, 260.0)]);
        let map = QuadMap::from_viewport(300.0, 200.0, &q).unwrap();
        let corners = [(0.0, 0.0), (300.0, 0.0), (300.0, 200.0), (0.0, 200.0)];
        for (corner, expected) in corners.iter().zip(q.0) {
            let mapped = map.apply(Point::new(corner.0, corner.1)).unwrap();
            assert!(close(mapped, expected), "{corner:?} -> {mapped:?}");
        }
        let back = map.inverse().unwrap();
        for probe in [(10.0, 20.0), (150.0, 100.0), (299.0, 1.0)] {
            let p = Point::new(probe.0, probe.1);
            let round = back.apply(map.apply(p).unwrap()).unwrap();
            assert!(close(round, p), "{p:?} -> {round:?}");
        }
    }

    #[test]
    fn a_translated_box_is_an_offset() {
        let q = quad([(10.0, 20.0), (310.0, 20.0), (310.0, 220.0), (10.0, 220.0)]);
        let map = QuadMap::from_viewport(300.0, 200.0, &q).unwrap();
        assert!(close(
            map.apply(Point::new(5.0, 7.0)).unwrap(),
            Point::new(15.0, 27.0)
        ));
    }

    #[test]
    fn rotation_and_scale_follow_the_css_transform() {
        // A 300x200 box at the origin, scaled by 0.5 and rotated 90 degrees clockwise about its
        // top-left corner, then moved to (400, 100): (x, y) -> (400 - 0.5 y, 100 + 0.5 x).
        let t = |x: f64, y: f64| (400.0 - 0.5 * y, 100.0 + 0.5 * x);
        let q = quad([t(0.0, 0.0), t(300.0, 0.0), t(300.0, 200.0), t(0.0, 200.0)]);
        let map = QuadMap::from_viewport(300.0, 200.0, &q).unwrap();
        let (ex, ey) = t(200.0, 120.0);
        assert!(close(
            map.apply(Point::new(200.0, 120.0)).unwrap(),
            Point::new(ex, ey)
        ));
        // The same point with translation only (the box's first corner) would miss by far.
        let naive = Point::new(q.0[0].x + 200.0, q.0[0].y + 120.0);
        assert!((naive.x - ex).abs() + (naive.y - ey).abs() > 100.0);
    }

    #[test]
    fn the_measured_rotated_frame_maps_onto_its_button() {
        // Measured on Chromium 156 (docs/cdp.md): a 300x200 iframe rotated 25 degrees; its
        // content quad, and the content quad of a button at (150..250, 100..140) inside it.
        let owner = Quad::from_numbers(&[
            265.160888671875,
            104.1638641357422,
            537.05322265625,
            230.9493408203125,
            452.5295715332031,
            412.2109069824219,
            180.63723754882812,
            285.4254150390625,
        ])
        .unwrap();
        let map = QuadMap::from_viewport(300.0, 200.0, &owner).unwrap();
        let centre = map.apply(Point::new(200.0, 120.0)).unwrap();
        // Centre of the button's measured quad.
        let button = [
            (358.84375, 258.1875),
            (449.46875, 300.453125),
            (432.578125, 336.703125),
            (341.9375, 294.4375),
        ];
        let cx = button.iter().map(|p| p.0).sum::<f64>() / 4.0;
        let cy = button.iter().map(|p| p.1).sum::<f64>() / 4.0;
        assert!(
            (centre.x - cx).abs() < 0.5 && (centre.y - cy).abs() < 0.5,
            "{centre:?}"
        );
    }

    #[test]
    fn degenerate_quads_and_viewports_have_no_map() {
        let flat = quad([(0.0, 0.0), (100.0, 0.0), (200.0, 0.0), (50.0, 0.0)]);
        assert!(QuadMap::from_viewport(300.0, 200.0, &flat).is_none());
        let square = quad([(0.0, 0.0), (10.0, 0.0), (10.0, 10.0), (0.0, 10.0)]);
        assert!(QuadMap::from_viewport(0.0, 200.0, &square).is_none());
        assert!(Quad::from_numbers(&[1.0, 2.0]).is_none());
        assert!(Quad::from_numbers(&[f64::NAN; 8]).is_none());
    }
}
