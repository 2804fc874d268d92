//! Inline SVG charts: bars across configurations and a heat-map (the line
//! charts are drawn in the browser: [`super::charts`]). No external file:
//! the report opens offline. Colours are CSS variables, so light and dark
//! mode restyle them. Every data point is drawn as a mark (`class="pt"`,
//! with a `<title>` tooltip), so a reader — or a test — can tell a chart
//! drew its data.

use maud::{html, Markup, Render};

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

/// A coordinate with one decimal: enough for a 760 px wide chart.
struct Px(f64);

impl Render for Px {
    fn render_to(&self, buffer: &mut String) {
        use std::fmt::Write;
        let _ = write!(buffer, "{:.1}", self.0);
    }
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

/// The frame of every chart: its box, its title, then what is drawn in it.
fn chart(title: &str, drawn: Markup) -> Markup {
    html! {
        svg class="chart" viewBox={ "0 0 " (W) " " (H) } role="img" aria-label=(title)
            xmlns="http://www.w3.org/2000/svg" {
            text class="title" x=(LEFT) y="20" { (title) }
            (drawn)
        }
    }
}

/// Horizontal grid lines with their labels on the left, at (value, y).
fn y_grid(at: impl Iterator<Item = (f64, f64)>) -> Markup {
    html! {
        @for (t, y) in at {
            line class="grid" x1=(LEFT) x2=(LEFT + plot_w()) y1=(Px(y)) y2=(Px(y)) {}
            text class="tick" x=(LEFT - 6.0) y=(Px(y + 4.0)) text-anchor="end" { (short(t)) }
        }
    }
}

fn axes(x_label: &str, y_label: &str, y2_label: Option<&str>) -> Markup {
    let bottom = TOP + plot_h();
    html! {
        line class="axis" x1=(LEFT) x2=(LEFT) y1=(TOP) y2=(bottom) {}
        line class="axis" x1=(LEFT) x2=(LEFT + plot_w()) y1=(bottom) y2=(bottom) {}
        text class="label" x=(LEFT + plot_w() / 2.0) y=(bottom + 34.0) text-anchor="middle" { (x_label) }
        text class="label" transform={ "translate(16 " (TOP + plot_h() / 2.0) ") rotate(-90)" }
            text-anchor="middle" { (y_label) }
        @if let Some(y2) = y2_label {
            text class="label" transform={ "translate(" (W - 14.0) " " (TOP + plot_h() / 2.0) ") rotate(90)" }
                text-anchor="middle" { (y2) }
        }
    }
}

fn legend(names: impl Iterator<Item = String>) -> Markup {
    let y = H - 12.0;
    // Each key starts where the one before ended (about 6.6 px a character).
    let placed = names.scan(LEFT, |x, name| {
        let at = *x;
        *x += 26.0 + name.chars().count() as f64 * 6.6;
        Some((at, name))
    });
    html! {
        @for (i, (x, name)) in placed.enumerate() {
            rect class={ "key s" (i % 8 + 1) } x=(Px(x)) y=(y - 10.0) width="12" height="12" {}
            text class="legend" x=(Px(x + 16.0)) y=(y) { (name) }
        }
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
    pub fn render(&self) -> Markup {
        let (y0, y1) = range(
            self.series.iter().flat_map(|(_, v)| v.iter().copied()),
            false,
        );
        let py = |y: f64| TOP + plot_h() - (y - y0) / (y1 - y0) * plot_h();
        let n = self.categories.len().max(1) as f64;
        let slot = plot_w() / n;
        let k = self.series.len().max(1) as f64;
        let bar = (slot * 0.8 / k).min(60.0);
        let every = self.label_every.max(1);
        let base = py(y0.max(0.0));
        chart(
            &self.title,
            html! {
                (y_grid(ticks(y0, y1, 5).into_iter().map(|t| (t, py(t)))))
                (axes(&self.x_label, &self.y_label, None))
                @for (c, name) in self.categories.iter().enumerate() {
                    @let left = LEFT + slot * c as f64 + (slot - bar * k) / 2.0;
                    @for (j, (series, values)) in self.series.iter().enumerate() {
                        @if let Some(&v) = values.get(c).filter(|v| v.is_finite()) {
                            rect class={ "pt bar s" (j % 8 + 1) @if self.highlight == Some(c) { " best" } }
                                x=(Px(left + bar * j as f64)) y=(Px(py(v).min(base)))
                                width=(Px(bar)) height=(Px((base - py(v)).abs().max(0.5))) {
                                title { (name) " — " (series) ": " (short(v)) }
                            }
                        }
                    }
                    @if c % every == 0 || c + 1 == self.categories.len() {
                        text class="tick" x=(Px(LEFT + slot * (c as f64 + 0.5))) y=(TOP + plot_h() + 16.0)
                            text-anchor="middle" { (fit(name, slot * every as f64)) }
                    }
                }
                @if self.series.len() > 1 {
                    (legend(self.series.iter().map(|(n, _)| n.clone())))
                }
            },
        )
    }
}

/// `name` cut with an ellipsis to as many characters as `width` px hold
/// (about 6.5 px each).
fn fit(name: &str, width: f64) -> String {
    let fits = ((width / 6.5) as usize).max(3);
    if name.chars().count() > fits {
        name.chars().take(fits - 1).chain(['…']).collect()
    } else {
        name.to_string()
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
    pub fn render(&self) -> Markup {
        let all: Vec<f64> = self.values.iter().flatten().flatten().copied().collect();
        let lo = all.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = all.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let cw = plot_w() / self.cols.len().max(1) as f64;
        let ch = plot_h() / self.rows.len().max(1) as f64;
        let opacity = |v: f64| {
            let share = if hi > lo { (v - lo) / (hi - lo) } else { 1.0 };
            format!("fill-opacity:{:.2}", 0.15 + 0.85 * share)
        };
        chart(
            &self.title,
            html! {
                @for (r, row) in self.values.iter().enumerate() {
                    @for (c, v) in row.iter().enumerate() {
                        @let (x, y) = (LEFT + cw * c as f64, TOP + ch * r as f64);
                        @if let Some(v) = v {
                            rect class="pt cell" x=(Px(x)) y=(Px(y)) width=(Px(cw)) height=(Px(ch)) style=(opacity(*v)) {
                                title {
                                    (self.row_label) " " (self.rows[r]) ", " (self.col_label) " "
                                    (self.cols[c]) ": " (short(*v)) " " (self.unit)
                                }
                            }
                            text class="cell-label" x=(Px(x + cw / 2.0)) y=(Px(y + ch / 2.0 + 5.0)) text-anchor="middle" { (short(*v)) }
                        } @else {
                            rect class="cell-empty" x=(Px(x)) y=(Px(y)) width=(Px(cw)) height=(Px(ch)) {}
                        }
                    }
                }
                @for (c, name) in self.cols.iter().enumerate() {
                    text class="tick" x=(Px(LEFT + cw * (c as f64 + 0.5))) y=(TOP + plot_h() + 16.0) text-anchor="middle" { (name) }
                }
                @for (r, name) in self.rows.iter().enumerate() {
                    text class="tick" x=(LEFT - 6.0) y=(Px(TOP + ch * (r as f64 + 0.5) + 4.0)) text-anchor="end" { (name) }
                }
                (axes(&self.col_label, &self.row_label, None))
                text class="legend" x=(LEFT) y=(H - 12.0) { "darker = more " (self.unit) }
            },
        )
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
}
