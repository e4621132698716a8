//! The plot: requests admitted and denied over time, a panel per rule, as SVG.
//!
//! SVG only: plotters draws PNG through a font rasteriser (`ttf` brings font-kit with
//! FreeType and fontconfig, `ab_glyph` needs a font file shipped with weir), while
//! SVG leaves the text to the viewer and builds from two small crates.

use std::path::Path;
use std::time::Duration;

use plotters::coord::Shift;
use plotters::prelude::*;

use super::bucket;
use super::chart::{self, Swatch};
use super::error::SimulateError;
use super::report::{Outcome, RuleReport, Series, limit, period};

/// A rule's panel at its full height: the worst-window chart above, the per-bucket
/// chart below.
const PANEL_HEIGHT: u32 = 440;
/// Panels never shrink below this, whatever the number of rules.
const MIN_PANEL_HEIGHT: u32 = 264;
/// The image's height while panels can shrink to fit it: three full panels.
const MAX_HEIGHT: u32 = 3 * PANEL_HEIGHT;
/// At most this many panels side by side.
const MAX_COLUMNS: usize = 3;
/// A panel's width, legend included.
const WIDTH: u32 = 1000;
/// The legend's strip, right of the charts, so it never covers what they show.
const LEGEND_WIDTH: u32 = 250;

/// Checks that `path` names a plot weir can draw (`.svg`), before anything runs.
pub(crate) fn check_path(path: &Path) -> Result<(), SimulateError> {
    match path.extension().and_then(|e| e.to_str()) {
        Some(ext) if ext.eq_ignore_ascii_case("svg") => Ok(()),
        Some(ext) if ext.eq_ignore_ascii_case("png") => Err(SimulateError::Usage(format!(
            "{}: PNG plots are not supported (they would need a font rasteriser); write a .svg",
            path.display()
        ))),
        _ => Err(SimulateError::Usage(format!(
            "{}: the plot is written as SVG: name it *.svg",
            path.display()
        ))),
    }
}

/// Draws `outcome` into the SVG file at `path`.
pub fn write_svg(outcome: &Outcome, path: &Path) -> Result<(), SimulateError> {
    check_path(path)?;
    let mut svg = String::new();
    draw(outcome, &mut svg).map_err(|e| SimulateError::Plot {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    std::fs::write(path, svg).map_err(|error| SimulateError::Io {
        path: path.to_path_buf(),
        error,
    })
}

/// How the panels are laid out: a grid, so that many rules make a wider image rather
/// than a taller one (six rules: 2 columns of 3, 2,000 x 1,320 px, where one column
/// was 2,640 px tall).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Grid {
    columns: usize,
    rows: usize,
    /// Each panel's height (px).
    panel_height: u32,
}

impl Grid {
    /// Up to three rules one under the other; then up to three columns of at most
    /// three rows; past nine rules the rows share [`MAX_HEIGHT`], down to
    /// [`MIN_PANEL_HEIGHT`] each (fifteen rules), below which the image grows.
    fn for_panels(panels: usize) -> Self {
        let panels = panels.max(1);
        let columns = panels.div_ceil(3).min(MAX_COLUMNS);
        let rows = panels.div_ceil(columns);
        let shared = MAX_HEIGHT / rows as u32;
        Self {
            columns,
            rows,
            panel_height: shared.clamp(MIN_PANEL_HEIGHT, PANEL_HEIGHT),
        }
    }

    /// The image's size (px).
    fn size(self) -> (u32, u32) {
        (
            WIDTH * self.columns as u32,
            self.panel_height * self.rows as u32,
        )
    }
}

/// Draws a panel per rule (see [`draw_panel`]), in a [`Grid`].
fn draw(outcome: &Outcome, svg: &mut String) -> Result<(), Box<dyn std::error::Error>> {
    let grid = Grid::for_panels(outcome.rules.len());
    let root = SVGBackend::with_string(svg, grid.size()).into_drawing_area();
    root.fill(&WHITE)?;
    let areas = root.split_evenly((grid.rows, grid.columns));
    for (area, rule) in areas.iter().zip(&outcome.rules) {
        draw_panel(area, outcome.start, rule)?;
    }
    root.present()?;
    Ok(())
}

/// One rule's panel: two charts over the same time axis, zoomed to the traffic:
/// above, the most admitted to one key in a trailing period against the limit (the
/// table's worst window: a fixed window's 2x at a boundary stands out here); below,
/// the requests admitted and denied per bucket of time. The legend is at the right.
fn draw_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    start: u64,
    rule: &RuleReport,
) -> Result<(), Box<dyn std::error::Error>>
where
    DB::ErrorType: 'static,
{
    let caption = format!(
        "{} ({} {}), worst window {:.2}x the limit",
        rule.name,
        rule.policy.algorithm(),
        limit(&rule.policy),
        rule.overshoot()
    );
    let area = area.titled(&caption, ("sans-serif", 16))?;
    let (charts, legend) = area.split_horizontally(area.dim_in_pixel().0 - LEGEND_WIDTH);
    let (upper, lower) = charts.split_vertically(charts.dim_in_pixel().1 / 2);
    let time = Time::new(start, &rule.series);
    let every = period(rule.policy.period());
    let bucket = bucket::name(Duration::from_nanos(rule.series.width));
    draw_worst(&upper, &time, rule, &every)?;
    draw_counts(&lower, &time, &rule.series, &bucket)?;
    let entries = [
        (
            Swatch::Dot(WORST.to_rgba()),
            format!("most admitted to one key in {every}"),
        ),
        (
            Swatch::Line(BLACK.to_rgba()),
            format!("limit ({})", limit(&rule.policy)),
        ),
        (Swatch::Line(ADMITTED), format!("admitted per {bucket}")),
        (Swatch::Line(DENIED), format!("denied per {bucket}")),
    ];
    chart::draw_legend(&legend, 30, &entries)?;
    Ok(())
}

/// The trailing count's points.
const WORST: RGBColor = BLUE;
/// The admitted line.
const ADMITTED: RGBAColor = RGBAColor(0, 160, 0, 0.9);
/// The denied line.
const DENIED: RGBAColor = RGBAColor(220, 0, 0, 0.9);

/// A rule's time axis: seconds from the start of the traffic, per bucket.
struct Time {
    /// Seconds from the start at which the first bucket starts.
    first: f64,
    /// A bucket's width (s).
    width: f64,
    /// The axis, with a little room either side, so a burst at the first or last
    /// instant is seen.
    range: std::ops::Range<f64>,
}

impl Time {
    fn new(start: u64, series: &Series) -> Self {
        let first = series.start.saturating_sub(start) as f64 / 1e9;
        let width = series.width as f64 / 1e9;
        let last = first + width * series.admitted.len() as f64;
        let pad = (last - first) * 0.03;
        Self {
            first,
            width,
            range: first - pad..last + pad,
        }
    }

    /// Where bucket `i` starts (s from the start).
    fn at(&self, bucket: usize) -> f64 {
        self.first + self.width * bucket as f64
    }
}

/// The most admitted to one key in a trailing period, per bucket, as points, and the
/// limit as a line.
fn draw_worst<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    time: &Time,
    rule: &RuleReport,
    every: &str,
) -> Result<(), Box<dyn std::error::Error>>
where
    DB::ErrorType: 'static,
{
    let series = &rule.series;
    let limit_value = rule.policy.limit() as f64;
    let most = series.trailing.iter().copied().max().unwrap_or(0) as f64;
    let top = most.max(limit_value) * 1.15;
    let mut chart = ChartBuilder::on(area)
        .margin(8)
        .x_label_area_size(28)
        .y_label_area_size(56)
        .build_cartesian_2d(time.range.clone(), 0f64..top)?;
    chart
        .configure_mesh()
        .y_labels(chart::count_labels(top))
        .y_label_formatter(&chart::count_label)
        .x_label_formatter(&chart::number_label)
        .y_desc(format!("in a trailing {every}"))
        .draw()?;
    chart.draw_series(LineSeries::new(
        [
            (time.range.start, limit_value),
            (time.range.end, limit_value),
        ],
        BLACK.stroke_width(1),
    ))?;
    chart.draw_series(
        series
            .trailing
            .iter()
            .enumerate()
            .filter(|&(_, &n)| n > 0)
            .map(|(i, &n)| Circle::new((time.at(i), n as f64), 3, WORST.filled())),
    )?;
    Ok(())
}

/// Requests admitted and denied per bucket, as step lines.
fn draw_counts<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    time: &Time,
    series: &Series,
    bucket: &str,
) -> Result<(), Box<dyn std::error::Error>>
where
    DB::ErrorType: 'static,
{
    let most = series.admitted.iter().chain(&series.denied).copied().max();
    let top = most.unwrap_or(0).max(1) as f64 * 1.1;
    let mut chart = ChartBuilder::on(area)
        .margin(8)
        .x_label_area_size(32)
        .y_label_area_size(56)
        .build_cartesian_2d(time.range.clone(), 0f64..top)?;
    chart
        .configure_mesh()
        .y_labels(chart::count_labels(top))
        .y_label_formatter(&chart::count_label)
        .x_label_formatter(&chart::number_label)
        .x_desc("seconds from the start")
        .y_desc(format!("per {bucket}"))
        .draw()?;
    for (counts, colour) in [(&series.admitted, ADMITTED), (&series.denied, DENIED)] {
        // A step line: each bucket's count held across the bucket.
        let points = counts
            .iter()
            .enumerate()
            .flat_map(|(i, &n)| [(time.at(i), n as f64), (time.at(i + 1), n as f64)]);
        chart.draw_series(LineSeries::new(points, colour.stroke_width(2)))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn many_rules_make_a_grid_no_taller_than_three_panels() {
        let grid = |n| {
            let g = Grid::for_panels(n);
            (g.columns, g.rows, g.size())
        };
        assert_eq!(grid(1), (1, 1, (1000, 440)));
        assert_eq!(grid(3), (1, 3, (1000, 1320)));
        assert_eq!(grid(4), (2, 2, (2000, 880)));
        assert_eq!(grid(6), (2, 3, (2000, 1320)));
        assert_eq!(grid(9), (3, 3, (3000, 1320)));
        assert_eq!(grid(12), (3, 4, (3000, 1320)));
        assert_eq!(grid(15), (3, 5, (3000, 1320)));
        // Past fifteen, panels keep their least height and the image grows.
        assert_eq!(grid(18), (3, 6, (3000, 6 * MIN_PANEL_HEIGHT)));
    }
}
