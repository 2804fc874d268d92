//! Inline SVG charts: lines over time or load (one or two y axes), bars,
//! and a heat-map. No script and no external file: the report opens
//! offline. Colours are CSS variables, so light and dark mode restyle them.
//! Every data point is drawn as a mark (`class="pt"`, with a `<title>`
//! tooltip), so a reader — or a test — can tell a chart drew its data.

use super::esc;
use std::fmt::Write;

const W: f64 = 760.0;
const H: f64 = 300.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 70.0;
const TOP: f64 = 36.0;
const BOTTOM: f64 = 64.0;

fn plot_w() -> f64 {
    W - LEFT - RIGHT
}

fn plot_h() -> f64 {
    H - TOP - BOTTOM
}

/// Round tick steps (1, 2, 5 × 10^k) covering `0..=max` or `min..=max`.
fn ticks(min: f64, max: f64, want: usize) -> Vec<f64> {
    let span = (max - min).max(f64::MIN_POSITIVE);
    let raw = span / want.max(1) as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    let first = (min / step).ceil() * step;
    let mut out = Vec::new();
    let mut t = first;
    while t <= max + step * 1e-9 && out.len() < 50 {
        out.push(if t.abs() < step * 1e-9 { 0.0 } else { t });
        t += step;
    }
    out
}

/// "1.5k", "250", "0.25" — short tick labels.
pub fn short(v: f64) -> String {
    let a = v.abs();
    if a >= 1e6 {
        format!("{}M", trim(v / 1e6))
    } else if a >= 1e4 {
        format!("{}k", trim(v / 1e3))
    } else {
        trim(v)
    }
}

fn trim(v: f64) -> String {
    let s = format!("{v:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// A value range that starts at 0 unless `tight`, with head-room on top.
fn range(values: impl Iterator<Item = f64>, tight: bool) -> (f64, f64) {
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for v in values.filter(|v| v.is_finite()) {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if !lo.is_finite() {
        return (0.0, 1.0);
    }
    if !tight {
        lo = lo.min(0.0);
    }
    if hi <= lo {
        hi = lo + 1.0;
    }
    (lo, hi + (hi - lo) * 0.05)
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

    pub fn render(&self) -> String {
        let mut s = open(&self.title);
        let xs = || {
            self.series
                .iter()
                .flat_map(|s| s.points.iter().map(|p| p.0))
        };
        let (x0, x1) = range(xs().chain(self.markers.iter().map(|m| m.x)), true);
        let side_values = |side: Side| {
            self.series
                .iter()
                .filter(move |s| s.side == side)
                .flat_map(|s| s.points.iter().map(|p| p.1))
        };
        let (mut y0, mut y1) = range(side_values(Side::Left), false);
        if self.diagonal {
            y0 = y0.min(x0.min(0.0));
            y1 = y1.max(x1);
        }
        let (r0, r1) = range(side_values(Side::Right), false);
        let px = |x: f64| LEFT + (x - x0) / (x1 - x0) * plot_w();
        let py = |y: f64, lo: f64, hi: f64| TOP + plot_h() - (y - lo) / (hi - lo) * plot_h();
        // Grid and axes.
        for t in ticks(y0, y1, 5) {
            let y = py(t, y0, y1);
            let _ = write!(
                s,
                r#"<line class="grid" x1="{LEFT}" x2="{}" y1="{y:.1}" y2="{y:.1}"/><text class="tick" x="{}" y="{:.1}" text-anchor="end">{}</text>"#,
                LEFT + plot_w(),
                LEFT - 6.0,
                y + 4.0,
                short(t)
            );
        }
        for t in ticks(x0, x1, 8) {
            let x = px(t);
            let _ = write!(
                s,
                r#"<line class="grid" x1="{x:.1}" x2="{x:.1}" y1="{TOP}" y2="{}"/><text class="tick" x="{x:.1}" y="{}" text-anchor="middle">{}</text>"#,
                TOP + plot_h(),
                TOP + plot_h() + 16.0,
                short(t)
            );
        }
        let has_right = self.series.iter().any(|s| s.side == Side::Right);
        if has_right {
            for t in ticks(r0, r1, 5) {
                let _ = write!(
                    s,
                    r#"<text class="tick" x="{}" y="{:.1}">{}</text>"#,
                    LEFT + plot_w() + 6.0,
                    py(t, r0, r1) + 4.0,
                    short(t)
                );
            }
        }
        axes(
            &mut s,
            &self.x_label,
            &self.y_label,
            self.y2_label.as_deref().filter(|_| has_right),
        );
        if self.diagonal {
            let lo = x0.max(y0);
            let hi = x1.min(y1);
            let _ = write!(
                s,
                r#"<line class="diag" x1="{:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}"><title>achieved = offered</title></line>"#,
                px(lo),
                py(lo, y0, y1),
                px(hi),
                py(hi, y0, y1)
            );
        }
        for (i, m) in self.markers.iter().enumerate() {
            let x = px(m.x);
            // Labels of nearby markers are stacked, not overprinted.
            let _ = write!(
                s,
                r#"<line class="marker" x1="{x:.1}" x2="{x:.1}" y1="{TOP}" y2="{}"/><text class="marker-label" x="{:.1}" y="{}">{}</text>"#,
                TOP + plot_h(),
                x + 4.0,
                TOP + 12.0 + 14.0 * i as f64,
                esc(&m.label)
            );
        }
        for (i, series) in self.series.iter().enumerate() {
            let (lo, hi) = match series.side {
                Side::Left => (y0, y1),
                Side::Right => (r0, r1),
            };
            let colour = i % 8 + 1;
            // A point that is not finite (a second with no value) breaks
            // the line: each run of finite points is its own polyline.
            let shown: Vec<((f64, f64), (f64, f64))> = series
                .points
                .iter()
                .filter(|p| p.0.is_finite() && p.1.is_finite())
                .map(|&(x, y)| ((px(x), py(y, lo, hi)), (x, y)))
                .collect();
            if !series.points_only {
                let dash = if series.side == Side::Right {
                    r#" stroke-dasharray="6 3""#
                } else {
                    ""
                };
                for run in series
                    .points
                    .split(|p| !(p.0.is_finite() && p.1.is_finite()))
                    .filter(|run| run.len() > 1)
                {
                    let d: Vec<String> = run
                        .iter()
                        .map(|&(x, y)| format!("{:.1},{:.1}", px(x), py(y, lo, hi)))
                        .collect();
                    let _ = write!(
                        s,
                        r#"<polyline class="line s{colour}"{dash} points="{}"/>"#,
                        d.join(" ")
                    );
                }
            }
            let radius = if shown.len() > 120 { 1.2 } else { 3.0 };
            for ((x, y), (vx, vy)) in &shown {
                let _ = write!(
                    s,
                    r#"<circle class="pt s{colour}" cx="{x:.1}" cy="{y:.1}" r="{radius}"><title>{}: {} → {}</title></circle>"#,
                    esc(&series.name),
                    short(*vx),
                    short(*vy)
                );
            }
        }
        legend(
            &mut s,
            self.series.iter().map(|x| {
                let suffix = if has_right && x.side == Side::Right {
                    " (right axis)"
                } else {
                    ""
                };
                format!("{}{suffix}", x.name)
            }),
        );
        s.push_str("</svg>");
        s
    }
}

fn open(title: &str) -> String {
    format!(
        r#"<svg class="chart" viewBox="0 0 {W} {H}" role="img" aria-label="{t}" xmlns="http://www.w3.org/2000/svg"><text class="title" x="{LEFT}" y="20">{t}</text>"#,
        t = esc(title)
    )
}

fn axes(s: &mut String, x_label: &str, y_label: &str, y2_label: Option<&str>) {
    let _ = write!(
        s,
        r#"<line class="axis" x1="{LEFT}" x2="{LEFT}" y1="{TOP}" y2="{b}"/><line class="axis" x1="{LEFT}" x2="{r}" y1="{b}" y2="{b}"/><text class="label" x="{cx}" y="{xl}" text-anchor="middle">{x}</text><text class="label" transform="translate(16 {cy}) rotate(-90)" text-anchor="middle">{y}</text>"#,
        b = TOP + plot_h(),
        r = LEFT + plot_w(),
        cx = LEFT + plot_w() / 2.0,
        xl = TOP + plot_h() + 34.0,
        cy = TOP + plot_h() / 2.0,
        x = esc(x_label),
        y = esc(y_label)
    );
    if let Some(y2) = y2_label {
        let _ = write!(
            s,
            r#"<text class="label" transform="translate({} {}) rotate(90)" text-anchor="middle">{}</text>"#,
            W - 14.0,
            TOP + plot_h() / 2.0,
            esc(y2)
        );
    }
}

fn legend(s: &mut String, names: impl Iterator<Item = String>) {
    let mut x = LEFT;
    let y = H - 12.0;
    for (i, name) in names.enumerate() {
        let colour = i % 8 + 1;
        let _ = write!(
            s,
            r#"<rect class="key s{colour}" x="{x:.1}" y="{}" width="12" height="12"/><text class="legend" x="{:.1}" y="{y}">{}</text>"#,
            y - 10.0,
            x + 16.0,
            esc(&name)
        );
        x += 26.0 + name.chars().count() as f64 * 6.6;
    }
}

/// Bars per category, one or more series side by side.
pub struct BarChart {
    pub title: String,
    pub y_label: String,
    pub categories: Vec<String>,
    /// (series name, one value per category)
    pub series: Vec<(String, Vec<f64>)>,
    /// Category drawn emphasised (the winner).
    pub highlight: Option<usize>,
    /// x-axis label (the categories' meaning).
    pub x_label: String,
    /// Label every n-th category only (and the last), each label using
    /// the room of the unlabelled ones; every bar keeps its name on hover.
    pub label_every: usize,
}

impl BarChart {
    pub fn render(&self) -> String {
        let mut s = open(&self.title);
        let (y0, y1) = range(
            self.series.iter().flat_map(|(_, v)| v.iter().copied()),
            false,
        );
        let py = |y: f64| TOP + plot_h() - (y - y0) / (y1 - y0) * plot_h();
        for t in ticks(y0, y1, 5) {
            let y = py(t);
            let _ = write!(
                s,
                r#"<line class="grid" x1="{LEFT}" x2="{}" y1="{y:.1}" y2="{y:.1}"/><text class="tick" x="{}" y="{:.1}" text-anchor="end">{}</text>"#,
                LEFT + plot_w(),
                LEFT - 6.0,
                y + 4.0,
                short(t)
            );
        }
        axes(&mut s, &self.x_label, &self.y_label, None);
        let n = self.categories.len().max(1) as f64;
        let slot = plot_w() / n;
        let k = self.series.len().max(1) as f64;
        let bar = (slot * 0.8 / k).min(60.0);
        for (c, name) in self.categories.iter().enumerate() {
            let left = LEFT + slot * c as f64 + (slot - bar * k) / 2.0;
            for (j, (series, values)) in self.series.iter().enumerate() {
                let Some(&v) = values.get(c) else { continue };
                if !v.is_finite() {
                    continue;
                }
                let top = py(v);
                let base = py(y0.max(0.0));
                let class = if self.highlight == Some(c) {
                    " best"
                } else {
                    ""
                };
                let _ = write!(
                    s,
                    r#"<rect class="pt bar s{}{class}" x="{:.1}" y="{:.1}" width="{bar:.1}" height="{:.1}"><title>{} — {}: {}</title></rect>"#,
                    j % 8 + 1,
                    left + bar * j as f64,
                    top.min(base),
                    (base - top).abs().max(0.5),
                    esc(name),
                    esc(series),
                    short(v)
                );
            }
            let every = self.label_every.max(1);
            let last = c + 1 == self.categories.len();
            if c % every != 0 && !last {
                continue;
            }
            // As many characters as the slots it may use hold (about 6.5
            // px each).
            let fits = ((slot * every as f64 / 6.5) as usize).max(3);
            let label: String = if name.chars().count() > fits {
                name.chars().take(fits - 1).chain(['…']).collect()
            } else {
                name.clone()
            };
            let _ = write!(
                s,
                r#"<text class="tick" x="{:.1}" y="{}" text-anchor="middle">{}</text>"#,
                LEFT + slot * (c as f64 + 0.5),
                TOP + plot_h() + 16.0,
                esc(&label)
            );
        }
        if self.series.len() > 1 {
            legend(&mut s, self.series.iter().map(|(n, _)| n.clone()));
        }
        s.push_str("</svg>");
        s
    }
}

/// A grid of values (e.g. throughput by workers × threads), darker = higher.
pub struct Heatmap {
    pub title: String,
    pub row_label: String,
    pub col_label: String,
    pub rows: Vec<String>,
    pub cols: Vec<String>,
    /// `values[row][col]`; `None` where the configuration has no figure.
    pub values: Vec<Vec<Option<f64>>>,
    pub unit: String,
}

impl Heatmap {
    pub fn render(&self) -> String {
        let mut s = open(&self.title);
        let all: Vec<f64> = self.values.iter().flatten().flatten().copied().collect();
        let lo = all.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = all.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let cw = plot_w() / self.cols.len().max(1) as f64;
        let ch = plot_h() / self.rows.len().max(1) as f64;
        for (r, row) in self.values.iter().enumerate() {
            for (c, v) in row.iter().enumerate() {
                let x = LEFT + cw * c as f64;
                let y = TOP + ch * r as f64;
                match v {
                    Some(v) => {
                        let share = if hi > lo { (v - lo) / (hi - lo) } else { 1.0 };
                        let _ = write!(
                            s,
                            r#"<rect class="pt cell" x="{x:.1}" y="{y:.1}" width="{cw:.1}" height="{ch:.1}" style="fill-opacity:{:.2}"><title>{} {}, {} {}: {} {}</title></rect><text class="cell-label" x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
                            0.15 + 0.85 * share,
                            esc(&self.row_label),
                            esc(&self.rows[r]),
                            esc(&self.col_label),
                            esc(&self.cols[c]),
                            short(*v),
                            esc(&self.unit),
                            x + cw / 2.0,
                            y + ch / 2.0 + 5.0,
                            short(*v)
                        );
                    }
                    None => {
                        let _ = write!(
                            s,
                            r#"<rect class="cell-empty" x="{x:.1}" y="{y:.1}" width="{cw:.1}" height="{ch:.1}"/>"#
                        );
                    }
                }
            }
        }
        for (c, name) in self.cols.iter().enumerate() {
            let _ = write!(
                s,
                r#"<text class="tick" x="{:.1}" y="{}" text-anchor="middle">{}</text>"#,
                LEFT + cw * (c as f64 + 0.5),
                TOP + plot_h() + 16.0,
                esc(name)
            );
        }
        for (r, name) in self.rows.iter().enumerate() {
            let _ = write!(
                s,
                r#"<text class="tick" x="{}" y="{:.1}" text-anchor="end">{}</text>"#,
                LEFT - 6.0,
                TOP + ch * (r as f64 + 0.5) + 4.0,
                esc(name)
            );
        }
        axes(&mut s, &self.col_label, &self.row_label, None);
        let _ = write!(
            s,
            r#"<text class="legend" x="{LEFT}" y="{}">darker = more {}</text>"#,
            H - 12.0,
            esc(&self.unit)
        );
        s.push_str("</svg>");
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round() {
        assert_eq!(
            ticks(0.0, 100.0, 5),
            vec![0.0, 20.0, 40.0, 60.0, 80.0, 100.0]
        );
        let small: Vec<String> = ticks(0.0, 0.9, 8).iter().map(|t| short(*t)).collect();
        assert_eq!(small, vec!["0", "0.2", "0.4", "0.6", "0.8"]);
        assert_eq!(short(12_500.0), "12.5k");
    }

    #[test]
    fn a_line_chart_draws_every_point_and_its_labels() {
        let mut c = LineChart::new("Latency", "time (s)", "latency (ms)");
        c.series
            .push(Series::new("p90", vec![(1.0, 5.0), (2.0, 7.5), (3.0, 6.0)]));
        c.series
            .push(Series::new("users", vec![(1.0, 10.0), (2.0, 10.0)]).right());
        c.y2_label = Some("users".into());
        let svg = c.render();
        assert_eq!(svg.matches("class=\"pt ").count(), 5);
        assert!(svg.contains("time (s)") && svg.contains("latency (ms)"));
        assert!(svg.contains("users (right axis)"));
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>"));
    }

    #[test]
    fn a_second_without_a_value_is_a_gap_in_the_line() {
        let mut c = LineChart::new("Latency", "time (s)", "latency (ms)");
        let points = vec![
            (1.0, 5.0),
            (2.0, 6.0),
            (3.0, f64::NAN),
            (4.0, 7.0),
            (5.0, 8.0),
        ];
        c.series.push(Series::new("p90", points));
        let svg = c.render();
        assert_eq!(
            svg.matches("<polyline").count(),
            2,
            "two runs either side of the gap"
        );
        assert_eq!(svg.matches("class=\"pt ").count(), 4);
        // Each point's label is its own value (not shifted past the gap).
        assert!(svg.contains("p90: 4 → 7"), "{svg}");
        assert!(!svg.contains("NaN"));
    }
}
