//! SVG charts for the report: one horizontal bar chart per graft, each technology's
//! instructions as a multiple of the built-in graft (log scale, a line at 1×), drawn with
//! `plotters`' SVG backend (no fonts loaded: text is emitted as SVG `<text>`).

use std::path::Path;

use plotters::coord::combinators::IntoLogRange;
use plotters::prelude::*;

use super::grafts::GraftTable;
use crate::Result;

/// Chart width, pixels.
const WIDTH: u32 = 960;
/// Height per bar, pixels (plus [`CHROME`]).
const BAR_HEIGHT: u32 = 34;
/// Title, axis and margins, pixels.
const CHROME: u32 = 110;
/// Width of the label column left of the bars, pixels.
const LABEL_WIDTH: u32 = 400;

/// Draws `table`'s ratios to `path`; false (and no file) when no row has a ratio yet.
pub fn graft_chart(table: &GraftTable, path: &Path) -> Result<bool> {
    let bars: Vec<(&str, f64)> = table.rows.iter().filter_map(|row| Some((row.label.as_str(), row.times_builtin.filter(|ratio| *ratio > 0.0)?))).collect();
    if bars.is_empty() {
        return Ok(false);
    }
    draw(&table.group, &bars, path).map_err(|error| format!("cannot draw {}: {error}", path.display()))?;
    Ok(true)
}

fn draw(group: &str, bars: &[(&str, f64)], path: &Path) -> std::result::Result<(), Box<dyn std::error::Error>> {
    let height = CHROME + BAR_HEIGHT * bars.len() as u32;
    let root = SVGBackend::new(path, (WIDTH, height)).into_drawing_area();
    root.fill(&WHITE)?;
    let (labels, plot) = root.split_horizontally(LABEL_WIDTH);
    let smallest = bars.iter().map(|(_, ratio)| *ratio).fold(1.0, f64::min);
    let largest = bars.iter().map(|(_, ratio)| *ratio).fold(1.0, f64::max);
    let mut chart = ChartBuilder::on(&plot)
        .caption(format!("{group}: instructions × built-in (log scale)"), ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(36)
        .build_cartesian_2d((smallest / 2.0..largest * 2.0).log_scale(), 0.0..bars.len() as f64)?;
    chart.configure_mesh().disable_y_mesh().disable_y_axis().x_desc("× built-in").draw()?;
    let count = bars.len() as f64;
    for (index, (label, ratio)) in bars.iter().enumerate() {
        // First row at the top.
        let top = count - index as f64 - 0.15;
        let bottom = count - index as f64 - 0.85;
        chart.draw_series(std::iter::once(Rectangle::new([(smallest / 2.0, bottom), (*ratio, top)], BLUE.mix(0.6).filled())))?;
        chart.draw_series(std::iter::once(Text::new(super::numbers::ratio(*ratio), (*ratio, top - 0.1), ("sans-serif", 13))))?;
        let (_, y) = chart.backend_coord(&(1.0, (top + bottom) / 2.0));
        labels.draw(&Text::new(label.to_string(), (8, y - 7), ("sans-serif", 13)))?;
    }
    chart.draw_series(std::iter::once(PathElement::new(vec![(1.0, 0.0), (1.0, count)], BLACK.stroke_width(1))))?;
    root.present()?;
    Ok(())
}
