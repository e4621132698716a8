//! The plot: requests admitted and denied over time, a panel per rule, as SVG.
//!
//! SVG only: plotters draws PNG through a font rasteriser (`ttf` brings font-kit with
//! FreeType and fontconfig, `ab_glyph` needs a font file shipped with weir), while
//! SVG leaves the text to the viewer and builds from two small crates.

use std::path::Path;

use plotters::prelude::*;

use super::error::SimulateError;
use super::report::{Outcome, limit, period};

const PANEL_HEIGHT: u32 = 260;
const WIDTH: u32 = 1000;

/// Checks that `path` names a plot weir can draw (`.svg`), before anything runs.
pub fn check_path(path: &Path) -> Result<(), SimulateError> {
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
    std::fs::write(path, svg).map_err(|source| SimulateError::Io {
        path: path.to_path_buf(),
        source,
    })
}

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
        let end = seconds(series.admitted.len());
        let top = series
            .admitted
            .iter()
            .chain(&series.denied)
            .copied()
            .max()
            .unwrap_or(0)
            .max(1) as f64
            * 1.1;
        let caption = format!(
            "{} ({} {})",
            rule.name,
            rule.policy.algorithm(),
            limit(&rule.policy)
        );
        let mut chart = ChartBuilder::on(area)
            .caption(caption, ("sans-serif", 16))
            .margin(10)
            .x_label_area_size(32)
            .y_label_area_size(56)
            .build_cartesian_2d(0f64..end, 0f64..top)?;
        let width = std::time::Duration::from_nanos(series.width);
        let bucket = if series.width.is_multiple_of(1_000_000) {
            period(width)
        } else {
            format!("{width:?}")
        };
        chart
            .configure_mesh()
            .x_desc("seconds from the start")
            .y_desc(format!("requests per {bucket}"))
            .draw()?;
        for (counts, color, label) in [
            (&series.admitted, GREEN.mix(0.9), "admitted"),
            (&series.denied, RED.mix(0.9), "denied"),
        ] {
            // A step line: each bucket's count held across the bucket.
            let points = counts
                .iter()
                .enumerate()
                .flat_map(|(i, &n)| [(seconds(i), n as f64), (seconds(i + 1), n as f64)]);
            chart
                .draw_series(LineSeries::new(points, color.stroke_width(2)))?
                .label(label)
                .legend(move |(x, y)| {
                    PathElement::new([(x, y), (x + 20, y)], color.stroke_width(2))
                });
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()?;
    }
    root.present()?;
    Ok(())
}
