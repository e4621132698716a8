//! The plot, as SVG (plotters, as `weir simulate` draws): above, per rule, the most
//! admitted to one key in a trailing period against its limit, second by second, with
//! leases; below, Redis calls per second per shard (the busiest shard and the mean
//! shard) with and without leases, and the failed shard. The shift and the failure
//! are shaded.

use std::path::Path;

use plotters::prelude::*;

use super::FleetError;
use super::report::{FleetReport, bound};

const WIDTH: u32 = 1100;
const HEIGHT: u32 = 900;
const LEGEND_WIDTH: u32 = 280;

/// Draws `report` into the SVG file at `path`.
pub(super) fn write_svg(report: &FleetReport, path: &Path) -> Result<(), FleetError> {
    let mut svg = String::new();
    draw(report, &mut svg).map_err(|e| FleetError::Plot {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    std::fs::write(path, svg).map_err(|error| FleetError::Io {
        path: path.to_path_buf(),
        error,
    })
}

/// A line: its name, colour and points.
type Series = (String, RGBAColor, Vec<(f64, f64)>);

/// Colours for series, in order.
const COLOURS: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
];

fn draw(report: &FleetReport, svg: &mut String) -> Result<(), Box<dyn std::error::Error>> {
    let root = SVGBackend::with_string(svg, (WIDTH, HEIGHT)).into_drawing_area();
    root.fill(&WHITE)?;
    let root = root.titled(
        &format!(
            "weir simulate fleet: {} (seed {})",
            report.scenario.name, report.seed
        ),
        ("sans-serif", 18),
    )?;
    let (charts, legend) = root.split_horizontally(WIDTH - LEGEND_WIDTH);
    let (upper, lower) = charts.split_vertically(charts.dim_in_pixel().1 / 2);
    let (upper_legend, lower_legend) = legend.split_vertically(legend.dim_in_pixel().1 / 2);
    let seconds = report.scenario.duration.as_secs_f64();
    let bands = bands(report);

    // Admitted against limit.
    let with = &report.with_leases;
    let ratios: Vec<Vec<(f64, f64)>> = with
        .rules
        .iter()
        .map(|rule| {
            let limit = rule.policy.limit() as f64;
            rule.per_second
                .iter()
                .enumerate()
                .map(|(s, &n)| (s as f64 + 0.5, n as f64 / limit))
                .collect()
        })
        .collect();
    let most = ratios
        .iter()
        .flatten()
        .map(|&(_, r)| r)
        .chain(with.rules.iter().filter_map(|r| bound(&r.policy)))
        .fold(1.0, f64::max);
    let mut chart = ChartBuilder::on(&upper)
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(50)
        .build_cartesian_2d(0.0..seconds, 0.0..most * 1.1)?;
    chart
        .configure_mesh()
        .x_desc("seconds")
        .y_desc("x limit (worst key, trailing period)")
        .draw()?;
    for (range, colour) in &bands {
        chart.draw_series([Rectangle::new(
            [(range.0, 0.0), (range.1, most * 1.1)],
            colour.mix(0.12).filled(),
        )])?;
    }
    chart.draw_series(LineSeries::new(
        [(0.0, 1.0), (seconds, 1.0)],
        BLACK.stroke_width(1),
    ))?;
    let mut entries = Vec::new();
    for (i, (name, points)) in report.rules.iter().zip(&ratios).enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        chart.draw_series(LineSeries::new(
            points.iter().copied().filter(|&(_, r)| r > 0.0),
            colour.stroke_width(2),
        ))?;
        entries.push((colour.to_rgba(), format!("{name} (with leases)")));
    }
    entries.push((BLACK.to_rgba(), "the limit (1.00x)".to_owned()));
    for (range, colour) in &bands {
        let _ = range;
        entries.push((colour.mix(0.5), band_name(report, colour)));
    }
    legend_box(&upper_legend, &entries)?;

    // Calls per shard.
    let mut series: Vec<Series> = Vec::new();
    for (k, (run, stats)) in report.runs().into_iter().enumerate() {
        let shards: Vec<&Vec<u32>> = stats.calls.iter().flatten().collect();
        let len = shards.iter().map(|c| c.len()).max().unwrap_or(0);
        let at = |s: usize| shards.iter().map(move |c| c.get(s).copied().unwrap_or(0));
        let max: Vec<(f64, f64)> = (0..len)
            .map(|s| (s as f64 + 0.5, at(s).max().unwrap_or(0) as f64))
            .collect();
        let mean: Vec<(f64, f64)> = (0..len)
            .map(|s| {
                let total: u64 = at(s).map(u64::from).sum();
                (s as f64 + 0.5, total as f64 / shards.len().max(1) as f64)
            })
            .collect();
        let colour = COLOURS[3 + k % 3];
        series.push((format!("busiest shard, {run}"), colour.to_rgba(), max));
        series.push((format!("mean shard, {run}"), colour.mix(0.45), mean));
    }
    if let Some(f) = &report.scenario.failure {
        let calls = &with.calls[f.region][f.shard];
        series.push((
            format!(
                "failed shard ({} {}), with leases",
                report.scenario.regions[f.region].name, f.shard
            ),
            COLOURS[2].to_rgba(),
            calls
                .iter()
                .enumerate()
                .map(|(s, &n)| (s as f64 + 0.5, f64::from(n)))
                .collect(),
        ));
    }
    let top = series
        .iter()
        .flat_map(|(_, _, p)| p.iter().map(|&(_, n)| n))
        .fold(1.0, f64::max);
    let mut chart = ChartBuilder::on(&lower)
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..seconds, 0.0..top * 1.1)?;
    chart
        .configure_mesh()
        .x_desc("seconds")
        .y_desc("Redis calls per second")
        .draw()?;
    for (range, colour) in &bands {
        chart.draw_series([Rectangle::new(
            [(range.0, 0.0), (range.1, top * 1.1)],
            colour.mix(0.12).filled(),
        )])?;
    }
    let mut entries = Vec::new();
    for (name, colour, points) in series {
        chart.draw_series(LineSeries::new(points, colour.stroke_width(2)))?;
        entries.push((colour, name));
    }
    legend_box(&lower_legend, &entries)?;
    root.present()?;
    Ok(())
}

/// The shift (blue) and the failure (red), as spans of seconds.
fn bands(report: &FleetReport) -> Vec<((f64, f64), RGBColor)> {
    let mut bands = Vec::new();
    if let Some(s) = &report.scenario.shift {
        bands.push(((s.start.as_secs_f64(), s.end.as_secs_f64()), BLUE));
    }
    if let Some(f) = &report.scenario.failure {
        bands.push(((f.start.as_secs_f64(), f.end.as_secs_f64()), RED));
    }
    bands
}

fn band_name(report: &FleetReport, colour: &RGBColor) -> String {
    match (
        *colour == BLUE,
        &report.scenario.shift,
        &report.scenario.failure,
    ) {
        (true, Some(s), _) => format!(
            "shift {} -> {}",
            report.scenario.regions[s.from].name, report.scenario.regions[s.to].name
        ),
        (false, _, Some(f)) => format!(
            "shard {} of {} down",
            f.shard, report.scenario.regions[f.region].name
        ),
        _ => String::new(),
    }
}

fn legend_box<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    entries: &[(RGBAColor, String)],
) -> Result<(), Box<dyn std::error::Error>>
where
    DB::ErrorType: 'static,
{
    for (i, (colour, label)) in entries.iter().enumerate() {
        let y = 40 + 22 * i as i32;
        area.draw(&PathElement::new(
            vec![(8, y), (32, y)],
            colour.stroke_width(3),
        ))?;
        area.draw(&Text::new(label.clone(), (40, y - 7), ("sans-serif", 13)))?;
    }
    Ok(())
}
