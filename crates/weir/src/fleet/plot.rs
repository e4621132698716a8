//! The plot, as SVG (plotters, as `weir simulate` draws): above, per rule, the most
//! admitted to one key in a trailing period as a multiple of the rule's bound (what one
//! store admits at most: a bucket's burst plus a period's refill), second by second,
//! with leases, so 1.0 is "at the bound" and above it a real excess; below, Redis
//! calls per second per shard (the busiest shard and the mean shard) with and without
//! leases, and the failed shard. The shift and the failure are shaded, translucent and
//! behind the lines, in colours no line uses.

use std::path::Path;

use plotters::coord::Shift;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use weir_simulate::chart::{self, Swatch};

use super::FleetError;
use super::report::{FleetReport, most_in_a_period, thousands};
use super::stats::RuleStats;

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

/// Colours for lines, in order.
const COLOURS: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
];

/// The shift's shading: an olive yellow, 30 degrees of hue or more from every line's
/// colour (cyan was too near the blue line).
const SHIFT: RGBAColor = RGBAColor(188, 189, 34, 0.2);
/// The failure's shading: a grey no line uses (it was red, and hid the red line).
const FAILURE: RGBAColor = RGBAColor(127, 127, 127, 0.2);

/// A shaded span of the run: from, to (s), its colour and name.
struct Band {
    span: (f64, f64),
    colour: RGBAColor,
    name: String,
}

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
    let bands = bands(report);
    draw_against_bound(report, &bands, &upper, &upper_legend)?;
    draw_calls(report, &bands, &lower, &lower_legend)?;
    root.present()?;
    Ok(())
}

/// Per second, the most admitted to one key in a trailing period ending in it, over
/// the rule's [`most_in_a_period`]: 1.0 is a key at its bound.
pub(super) fn against_bound(rule: &RuleStats) -> Vec<(f64, f64)> {
    let bound = most_in_a_period(&rule.policy) as f64;
    (0..)
        .zip(&rule.per_second)
        .map(|(s, &n)| (f64::from(s) + 0.5, n as f64 / bound))
        .collect()
}

/// The upper chart: each rule's worst key against its bound, with leases.
fn draw_against_bound<DB: DrawingBackend>(
    report: &FleetReport,
    bands: &[Band],
    area: &DrawingArea<DB, Shift>,
    legend: &DrawingArea<DB, Shift>,
) -> Result<(), Box<dyn std::error::Error>>
where
    DB::ErrorType: 'static,
{
    let seconds = report.scenario.duration.as_secs_f64();
    let rules = &report.with_leases.rules;
    let ratios: Vec<Vec<(f64, f64)>> = rules.iter().map(against_bound).collect();
    let most = ratios.iter().flatten().map(|&(_, r)| r).fold(1.0, f64::max);
    let top = most * 1.1;
    let mut chart = ChartBuilder::on(area)
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(50)
        .build_cartesian_2d(0.0..seconds, 0.0..top)?;
    chart
        .configure_mesh()
        .x_label_formatter(&chart::number_label)
        .y_label_formatter(&chart::number_label)
        .x_desc("seconds")
        .y_desc("worst key / its bound, with leases")
        .draw()?;
    let shaded = shade(&mut chart, bands, top)?;
    chart.draw_series(LineSeries::new(
        [(0.0, 1.0), (seconds, 1.0)],
        BLACK.stroke_width(1),
    ))?;
    let mut entries = Vec::new();
    for (i, ((name, points), rule)) in report.rules.iter().zip(&ratios).zip(rules).enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        chart.draw_series(LineSeries::new(
            points.iter().copied().filter(|&(_, r)| r > 0.0),
            colour.stroke_width(2),
        ))?;
        let bound = thousands(most_in_a_period(&rule.policy));
        let label = format!("{name} (bound {bound})");
        entries.push((Swatch::Line(colour.to_rgba()), label));
    }
    let label = "1.0: burst + a period's refill".to_owned();
    entries.push((Swatch::Line(BLACK.to_rgba()), label));
    entries.extend(shaded);
    chart::draw_legend(legend, 40, &entries)?;
    Ok(())
}

/// The lower chart: Redis calls per second on the busiest and the mean shard, with
/// and without leases, and on the failed shard.
fn draw_calls<DB: DrawingBackend>(
    report: &FleetReport,
    bands: &[Band],
    area: &DrawingArea<DB, Shift>,
    legend: &DrawingArea<DB, Shift>,
) -> Result<(), Box<dyn std::error::Error>>
where
    DB::ErrorType: 'static,
{
    let seconds = report.scenario.duration.as_secs_f64();
    let series = calls(report);
    let most = series
        .iter()
        .flat_map(|(_, _, p)| p.iter().map(|&(_, n)| n))
        .fold(1.0, f64::max);
    let top = most * 1.1;
    let mut chart = ChartBuilder::on(area)
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..seconds, 0.0..top)?;
    chart
        .configure_mesh()
        .y_labels(chart::count_labels(top))
        .y_label_formatter(&chart::count_label)
        .x_label_formatter(&chart::number_label)
        .x_desc("seconds")
        .y_desc("Redis calls per second")
        .draw()?;
    let shaded = shade(&mut chart, bands, top)?;
    let mut entries = Vec::new();
    for (name, colour, points) in series {
        chart.draw_series(LineSeries::new(points, colour.stroke_width(2)))?;
        entries.push((Swatch::Line(colour), name));
    }
    entries.extend(shaded);
    chart::draw_legend(legend, 40, &entries)?;
    Ok(())
}

/// The calls' lines: per run the busiest and the mean shard, then the failed shard
/// with leases.
fn calls(report: &FleetReport) -> Vec<Series> {
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
        let calls = &report.with_leases.calls[f.region][f.shard];
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
    series
}

/// Shades each band from 0 to `top`, before the lines are drawn so that it lies
/// behind them, and returns the bands' legend entries (filled swatches).
fn shade<DB: DrawingBackend>(
    chart: &mut ChartContext<'_, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>,
    bands: &[Band],
    top: f64,
) -> Result<Vec<(Swatch, String)>, Box<dyn std::error::Error>>
where
    DB::ErrorType: 'static,
{
    for band in bands {
        chart.draw_series([Rectangle::new(
            [(band.span.0, 0.0), (band.span.1, top)],
            band.colour.filled(),
        )])?;
    }
    Ok(bands
        .iter()
        .map(|b| (Swatch::Area(b.colour), b.name.clone()))
        .collect())
}

/// The shift and the failure, as spans of seconds.
fn bands(report: &FleetReport) -> Vec<Band> {
    let regions = &report.scenario.regions;
    let mut bands = Vec::new();
    if let Some(s) = &report.scenario.shift {
        bands.push(Band {
            span: (s.start.as_secs_f64(), s.end.as_secs_f64()),
            colour: SHIFT,
            name: format!("shift {} -> {}", regions[s.from].name, regions[s.to].name),
        });
    }
    if let Some(f) = &report.scenario.failure {
        bands.push(Band {
            span: (f.start.as_secs_f64(), f.end.as_secs_f64()),
            colour: FAILURE,
            name: format!("shard {} of {} down", f.shard, regions[f.region].name),
        });
    }
    bands
}
