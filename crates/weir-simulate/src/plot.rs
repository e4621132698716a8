//! The plot: requests admitted and denied over time, a panel per rule, as SVG.
//!
//! SVG only: plotters draws PNG through a font rasteriser (`ttf` brings font-kit with
//! FreeType and fontconfig, `ab_glyph` needs a font file shipped with weir), while
//! SVG leaves the text to the viewer and builds from two small crates.

use std::path::Path;

use plotters::prelude::*;

use super::error::SimulateError;
use super::report::{Outcome, limit, period};

/// A rule's panel: the worst-window chart above, the per-bucket chart below.
const PANEL_HEIGHT: u32 = 440;
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

/// Per rule, two charts over the same time axis, zoomed to the traffic: above, the most
/// admitted to one key in a trailing period against the limit (the table's worst
/// window: a fixed window's 2x at a boundary stands out here); below, the requests
/// admitted and denied per bucket of time.
fn draw(outcome: &Outcome, svg: &mut String) -> Result<(), Box<dyn std::error::Error>> {
    let panels = outcome.rules.len().max(1);
    let height = PANEL_HEIGHT * panels as u32;
    let root = SVGBackend::with_string(svg, (WIDTH, height)).into_drawing_area();
    root.fill(&WHITE)?;
    for (area, rule) in root.split_evenly((panels, 1)).iter().zip(&outcome.rules) {
        let series = &rule.series;
        let seconds = |bucket: usize| {
            (series.start - outcome.start + bucket as u64 * series.width) as f64 / 1e9
        };
        // A little room either side, so a burst at the first or last instant is seen.
        let (first, last) = (seconds(0), seconds(series.admitted.len()));
        let pad = (last - first) * 0.03;
        let x = first - pad..last + pad;
        let caption = format!(
            "{} ({} {}), worst window {:.2}x the limit",
            rule.name,
            rule.policy.algorithm(),
            limit(&rule.policy),
            rule.overshoot()
        );
        let area = area.titled(&caption, ("sans-serif", 16))?;
        let (charts, legend) = area.split_horizontally(WIDTH - LEGEND_WIDTH);
        let (upper, lower) = charts.split_vertically(charts.dim_in_pixel().1 / 2);
        let every = period(rule.policy.period());
        let width = std::time::Duration::from_nanos(series.width);
        let bucket = if series.width.is_multiple_of(1_000_000) {
            period(width)
        } else {
            format!("{width:?}")
        };

        let limit_value = rule.policy.limit() as f64;
        let top = series.trailing.iter().copied().max().unwrap_or(0) as f64;
        let mut chart = ChartBuilder::on(&upper)
            .margin(8)
            .x_label_area_size(28)
            .y_label_area_size(56)
            .build_cartesian_2d(x.clone(), 0f64..top.max(limit_value) * 1.15)?;
        chart
            .configure_mesh()
            .y_desc(format!("in a trailing {every}"))
            .draw()?;
        chart.draw_series(LineSeries::new(
            [(x.start, limit_value), (x.end, limit_value)],
            BLACK.stroke_width(1),
        ))?;
        chart.draw_series(
            series
                .trailing
                .iter()
                .enumerate()
                .filter(|&(_, &n)| n > 0)
                .map(|(i, &n)| Circle::new((seconds(i), n as f64), 3, BLUE.filled())),
        )?;

        let top = series
            .admitted
            .iter()
            .chain(&series.denied)
            .copied()
            .max()
            .unwrap_or(0)
            .max(1) as f64
            * 1.1;
        let mut chart = ChartBuilder::on(&lower)
            .margin(8)
            .x_label_area_size(32)
            .y_label_area_size(56)
            .build_cartesian_2d(x, 0f64..top)?;
        chart
            .configure_mesh()
            .x_desc("seconds from the start")
            .y_desc(format!("per {bucket}"))
            .draw()?;
        for (counts, color) in [
            (&series.admitted, GREEN.mix(0.9)),
            (&series.denied, RED.mix(0.9)),
        ] {
            // A step line: each bucket's count held across the bucket.
            let points = counts
                .iter()
                .enumerate()
                .flat_map(|(i, &n)| [(seconds(i), n as f64), (seconds(i + 1), n as f64)]);
            chart.draw_series(LineSeries::new(points, color.stroke_width(2)))?;
        }

        let entries = [
            (
                BLUE.to_rgba(),
                format!("most admitted to one key in {every}"),
            ),
            (BLACK.to_rgba(), format!("limit ({})", limit(&rule.policy))),
            (GREEN.mix(0.9), format!("admitted per {bucket}")),
            (RED.mix(0.9), format!("denied per {bucket}")),
        ];
        for (i, (color, label)) in entries.iter().enumerate() {
            let y = 30 + 22 * i as i32;
            legend.draw(&PathElement::new([(8, y), (30, y)], color.stroke_width(2)))?;
            legend.draw(&Text::new(label.as_str(), (36, y - 7), ("sans-serif", 13)))?;
        }
    }
    root.present()?;
    Ok(())
}
