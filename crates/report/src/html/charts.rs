//! The report's line charts — over time, or against load, on one or two
//! y axes — drawn in the browser by the code the live dashboard draws
//! with (`assets/charts.js`, and uPlot 1.6.32, MIT, `assets/uplot/`, both
//! embedded): each chart carries its points as JSON. Canvas charts keep a
//! one-hour run's report small (a point a second of every series) and
//! give hover values, zoom and series toggles.

use maud::{html, Markup, PreEscaped};
use serde_json::{json, Value};

pub const UPLOT_JS: &str = include_str!("../../assets/uplot/uPlot.iife.min.js");
pub const UPLOT_CSS: &str = include_str!("../../assets/uplot/uPlot.min.css");
/// The drawing code shared by the report and the dashboard.
pub const CHARTS_JS: &str = include_str!("../../assets/charts.js");

/// What a page needs to draw its charts, inline.
pub fn scripts() -> Markup {
    html! {
        style { (PreEscaped(UPLOT_CSS)) }
        script { (PreEscaped(UPLOT_JS)) }
        script { (PreEscaped(CHARTS_JS)) }
        script { (PreEscaped("headroomCharts.drawAll();")) }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Left,
    Right,
}

pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
    pub side: Side,
    /// Draw the points only (no line), e.g. a scatter of steps.
    pub points_only: bool,
}

impl Series {
    pub fn new(name: &str, points: Vec<(f64, f64)>) -> Series {
        Series {
            name: name.to_string(),
            points,
            side: Side::Left,
            points_only: false,
        }
    }

    pub fn right(mut self) -> Series {
        self.side = Side::Right;
        self
    }
}

/// A vertical marker, e.g. the knee or the capacity.
pub struct Marker {
    pub x: f64,
    pub label: String,
}

pub struct LineChart {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    /// Label of the right axis, when a series uses it.
    pub y2_label: Option<String>,
    pub series: Vec<Series>,
    pub markers: Vec<Marker>,
    /// A dashed y = x line (achieved vs offered).
    pub diagonal: bool,
}

impl LineChart {
    pub fn new(title: &str, x_label: &str, y_label: &str) -> LineChart {
        LineChart {
            title: title.into(),
            x_label: x_label.into(),
            y_label: y_label.into(),
            y2_label: None,
            series: Vec::new(),
            markers: Vec::new(),
            diagonal: false,
        }
    }

    /// The chart's points and labels, as `charts.js` reads them. A y that
    /// is not a number (a second with no value) is a gap in the line.
    pub fn spec(&self) -> Value {
        let series: Vec<Value> = self
            .series
            .iter()
            .map(|s| {
                let points: Vec<Value> = s
                    .points
                    .iter()
                    .filter(|p| p.0.is_finite())
                    .map(|&(x, y)| json!([x, y.is_finite().then_some(y)]))
                    .collect();
                json!({
                    "name": s.name,
                    "right": s.side == Side::Right,
                    "points_only": s.points_only,
                    "points": points,
                })
            })
            .collect();
        let markers: Vec<Value> = self
            .markers
            .iter()
            .map(|m| json!({"x": m.x, "label": m.label}))
            .collect();
        json!({
            "x_label": self.x_label,
            "y_label": self.y_label,
            "y2_label": self.y2_label,
            "time": self.x_label.starts_with("time"),
            "diagonal": self.diagonal,
            "series": series,
            "markers": markers,
        })
    }

    pub fn render(&self) -> Markup {
        html! {
            div class="chart uchart" role="img" aria-label=(self.title) data-chart=(self.spec().to_string()) {
                h3 { (self.title) }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gap_is_null_and_the_right_axis_is_marked() {
        let mut c = LineChart::new("Latency", "time since start (s)", "ms");
        c.series.push(Series::new(
            "p99",
            vec![(1.0, 2.0), (2.0, f64::NAN), (3.0, 4.0)],
        ));
        c.series
            .push(Series::new("rate", vec![(1.0, 10.0)]).right());
        let spec = c.spec();
        assert_eq!(
            spec["series"][0]["points"],
            json!([[1.0, 2.0], [2.0, null], [3.0, 4.0]])
        );
        assert_eq!(spec["series"][1]["right"], true);
        assert_eq!(spec["time"], true);
        let html = c.render().into_string();
        assert!(html.contains("data-chart=\"{&quot;"), "{html}");
    }
}
