//! What weir's plots share (this crate's and `weir simulate fleet`'s): a legend whose
//! swatch shows how each entry is drawn, axes of counts labelled as integers, and
//! numbers without trailing zeros.

use plotters::coord::Shift;
use plotters::prelude::*;

/// How a legend entry is drawn on the chart, so that its swatch looks the same.
#[derive(Debug, Clone, Copy)]
pub enum Swatch {
    /// A line: a short line of its colour.
    Line(RGBAColor),
    /// Points: a dot of its colour.
    Dot(RGBAColor),
    /// A shaded span: a filled rectangle of its colour (translucent, as drawn).
    Area(RGBAColor),
}

/// A legend entry's height (px).
const ROW: i32 = 22;
/// A swatch's width (px).
const SWATCH: i32 = 24;

/// Draws `entries` one under the other into `area`, the first at `top` px from its
/// top: a swatch drawn as the entry is drawn on the chart, then its label.
pub fn draw_legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    top: i32,
    entries: &[(Swatch, String)],
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    for (i, (swatch, label)) in (0..).zip(entries) {
        let y = top + ROW * i;
        let (left, right) = (8, 8 + SWATCH);
        match *swatch {
            Swatch::Line(colour) => area.draw(&PathElement::new(
                [(left, y), (right, y)],
                colour.stroke_width(3),
            ))?,
            Swatch::Dot(colour) => {
                area.draw(&Circle::new(((left + right) / 2, y), 4, colour.filled()))?
            }
            Swatch::Area(colour) => area.draw(&Rectangle::new(
                [(left, y - 7), (right, y + 7)],
                colour.filled(),
            ))?,
        }
        area.draw(&Text::new(
            label.as_str(),
            (right + 8, y - 7),
            ("sans-serif", 13),
        ))?;
    }
    Ok(())
}

/// How many labels a count axis from 0 to `top` may have: few enough that plotters'
/// steps (1, 2 or 5 x 10^k) are whole numbers, so no count is labelled `0.5` or `5.0`
/// (a step of 0.5 would need more than `top + 1` labels). At most 10.
pub fn count_labels(top: f64) -> usize {
    let whole = if top.is_finite() { top.max(1.0) } else { 1.0 };
    (whole.floor() as usize + 1).min(10)
}

/// A count's axis label: a whole number, `5` rather than `5.0`.
pub fn count_label(value: &f64) -> String {
    format!("{value:.0}")
}

/// A number's axis label without trailing zeros: `20`, `59.9`, `0.05` (plotters
/// writes `20.0`), to the microsecond when it is a time in seconds.
pub fn number_label(value: &f64) -> String {
    let text = format!("{value:.6}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    if text == "-0" { "0" } else { text }.to_owned()
}

#[cfg(test)]
mod tests {
    use plotters::coord::ranged1d::Ranged;
    use plotters::coord::types::RangedCoordf64;

    use super::*;

    #[test]
    fn count_axes_step_by_whole_numbers() {
        for top in [
            1.0, 1.1, 1.9, 2.2, 3.3, 4.4, 5.5, 7.0, 9.9, 11.5, 23.0, 110.0, 15_400.0,
        ] {
            let axis = RangedCoordf64::from(0.0..top);
            let ticks = axis.key_points(count_labels(top));
            assert!(ticks.len() >= 2, "{top}: {ticks:?}");
            for tick in ticks {
                assert_eq!(tick, tick.round(), "{top}: a tick at {tick}");
            }
        }
        assert_eq!(count_label(&5.0), "5");
        for (value, text) in [(20.0, "20"), (59.9, "59.9"), (0.05, "0.05"), (-0.0, "0")] {
            assert_eq!(number_label(&value), text);
        }
    }
}
