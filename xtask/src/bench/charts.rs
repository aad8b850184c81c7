//! SVG charts for the report: one horizontal bar chart per graft, each technology's
//! instructions as a multiple of the built-in graft, on a log axis with a line at 1×.
//!
//! The layout is computed here, in pixels, and `plotters`' SVG backend only writes the
//! shapes: its automatic log axis labels every key point (`7.08.09.010.0` on a narrow
//! range) and knows nothing of the row labels' widths. Here the axis spans whole decades
//! and is labelled at decades (also at 2 and 5 when it spans two decades or less); a
//! label that would touch an already placed one is left out, decades first. The column
//! left of the bars is as wide as the longest row label.
//!
//! No font is loaded (text is SVG `<text>`, set by whoever views the file), so widths
//! are estimated per character, erring wide of DejaVu Sans, the usual Linux sans-serif.
//! Limitation: a viewer whose sans-serif font is wider still may crowd the text.

use std::path::Path;

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::grafts::GraftTable;
use super::numbers;
use crate::Result;

/// Font family of every text (resolved by the SVG viewer).
const FONT_FAMILY: &str = "sans-serif";
/// `plotters`' SVG backend writes `font-size` = the style's size ÷ 1.24; styles are
/// given as the pixel size wanted times this.
const PLOTTERS_FONT_SCALE: f64 = 1.24;
/// Row labels, bar values and tick labels, pixels.
const TEXT_SIZE: f64 = 13.0;
/// The title, pixels.
const TITLE_SIZE: f64 = 16.0;
/// Outer margin on every side, pixels.
const MARGIN: f64 = 12.0;
/// Space between a row label and its bar, and between a bar and its value, pixels.
const TEXT_GAP: f64 = 8.0;
/// Smallest space between two tick labels, pixels.
const TICK_LABEL_GAP: f64 = 10.0;
/// Height of one row (bar plus space), pixels.
const ROW_HEIGHT: f64 = 30.0;
/// The bar's share of its row.
const BAR_FRACTION: f64 = 0.64;
/// Title line, including the space under it, pixels.
const TITLE_HEIGHT: f64 = 34.0;
/// Length of a tick mark below the axis, pixels.
const TICK_LENGTH: f64 = 5.0;
/// Axis area under the bars: tick marks, tick labels, the axis description, pixels.
const AXIS_HEIGHT: f64 = 52.0;
/// Width of the bar area, pixels.
const PLOT_WIDTH: f64 = 560.0;
/// Width of the line at 1×, pixels.
const REFERENCE_LINE_WIDTH: f64 = 2.0;
/// Bar colour.
const BAR_COLOUR: RGBColor = RGBColor(74, 112, 178);
/// Grid lines at labelled ticks.
const GRID_COLOUR: RGBColor = RGBColor(200, 200, 200);
/// Grid lines at the other integer multiples of a decade.
const MINOR_GRID_COLOUR: RGBColor = RGBColor(235, 235, 235);

/// Estimated width of `text` set in a sans-serif font of `size` pixels: per-character
/// widths in ems, each at or above DejaVu Sans's (so the estimate errs wide).
pub fn text_width(text: &str, size: f64) -> f64 {
    let ems: f64 = text
        .chars()
        .map(|character| match character {
            'i' | 'j' | 'l' | 'I' | '.' | ',' | ':' | ';' | '\'' | '|' | '!' | ' ' => 0.34,
            'f' | 't' | 'r' | '(' | ')' | '[' | ']' | '-' | '/' | '"' => 0.45,
            'm' | 'w' | 'M' | 'W' => 1.0,
            '+' | '=' | '<' | '>' | '×' | '÷' | '~' | '#' | '&' | '%' => 0.86,
            'A'..='Z' => 0.8,
            'a'..='z' | '0'..='9' | '_' | 'µ' => 0.66,
            _ => 1.0,
        })
        .sum();
    ems * size
}

/// A text's horizontal extent as drawn: `anchor_x` is its start, middle or end.
fn extent(anchor_x: f64, width: f64, anchor: HPos) -> (f64, f64) {
    match anchor {
        HPos::Left => (anchor_x, anchor_x + width),
        HPos::Center => (anchor_x - width / 2.0, anchor_x + width / 2.0),
        HPos::Right => (anchor_x - width, anchor_x),
    }
}

/// The label of a tick at `value`: `0.1×`, `1×`, `20×`, `1,000×`.
fn tick_label(value: f64) -> String {
    format!("{}×", numbers::trimmed(value))
}

/// Where every element of one chart goes, in pixels.
#[derive(Debug)]
struct Layout {
    /// The bars: (row label, ratio), first row at the top.
    bars: Vec<(String, f64)>,
    /// The title.
    title: String,
    /// Picture width.
    width: f64,
    /// Picture height.
    height: f64,
    /// Left edge of the bar area, where the bars start (the area is [`PLOT_WIDTH`] wide).
    plot_left: f64,
    /// Top of the first row.
    rows_top: f64,
    /// The axis starts at 10^low_decade…
    low_decade: i32,
    /// …and ends at 10^high_decade.
    high_decade: i32,
    /// Labelled ticks, ascending.
    ticks: Vec<f64>,
}

impl Layout {
    /// Lays out the chart of `bars` ((row label, ratio), top row first) for `group`.
    fn new(group: &str, bars: &[(&str, f64)]) -> Layout {
        let bars: Vec<(String, f64)> = bars.iter().map(|(label, ratio)| (label.to_string(), *ratio)).collect();
        let smallest = bars.iter().map(|(_, ratio)| *ratio).fold(1.0, f64::min);
        let largest = bars.iter().map(|(_, ratio)| *ratio).fold(1.0, f64::max);
        // Whole decades: the smallest bar strictly inside (the built-in row's own bar,
        // 1×, must have a length), the largest up to the right edge at most.
        let low_decade = smallest.log10().ceil() as i32 - 1;
        let high_decade = (largest.log10().ceil() as i32).max(low_decade + 1);
        let widest_label = bars.iter().map(|(label, _)| text_width(label, TEXT_SIZE)).fold(0.0, f64::max);
        let widest_value = bars.iter().map(|(_, ratio)| text_width(&numbers::ratio(*ratio), TEXT_SIZE)).fold(0.0, f64::max);
        let plot_left = (MARGIN + widest_label + TEXT_GAP).ceil();
        let title = format!("{group}: instructions × built-in (log scale)");
        // A value is written right of its bar, which may end at the plot's right edge.
        let width = (plot_left + PLOT_WIDTH + TEXT_GAP + widest_value + MARGIN).max(MARGIN * 2.0 + text_width(&title, TITLE_SIZE)).ceil();
        let rows_top = MARGIN + TITLE_HEIGHT;
        let height = (rows_top + ROW_HEIGHT * bars.len() as f64 + AXIS_HEIGHT + MARGIN).ceil();
        let mut layout = Layout { bars, title, width, height, plot_left, rows_top, low_decade, high_decade, ticks: Vec::new() };
        layout.ticks = layout.choose_ticks();
        layout
    }

    /// The x of `value` on the log axis.
    fn x(&self, value: f64) -> f64 {
        let span = f64::from(self.high_decade - self.low_decade);
        self.plot_left + (value.log10() - f64::from(self.low_decade)) / span * PLOT_WIDTH
    }

    /// The y of the axis line (below the last row).
    fn axis_y(&self) -> f64 {
        self.rows_top + ROW_HEIGHT * self.bars.len() as f64
    }

    /// Where the value of a bar of `ratio` is written: (anchor x, anchor, colour). Right
    /// of the bar; inside it, in white, for a bar that ends left of the 1× line (the
    /// text would cross the line) when it fits; otherwise right of the 1× line.
    fn value_position(&self, ratio: f64) -> (f64, HPos, RGBColor) {
        let (end, one) = (self.x(ratio), self.x(1.0));
        let width = text_width(&numbers::ratio(ratio), TEXT_SIZE);
        if end + TEXT_GAP + width < one - REFERENCE_LINE_WIDTH {
            (end + TEXT_GAP, HPos::Left, BLACK)
        } else if end < one && width + 2.0 * TEXT_GAP <= end - self.plot_left {
            (end - TEXT_GAP, HPos::Right, WHITE)
        } else {
            (end.max(one + REFERENCE_LINE_WIDTH) + TEXT_GAP, HPos::Left, BLACK)
        }
    }

    /// 10^decade.
    fn decade(decade: i32) -> f64 {
        10f64.powi(decade)
    }

    /// Tick candidates in order of preference: decades, then 5s and 2s of each decade
    /// when the axis spans two decades or less. A candidate is kept when its label keeps
    /// [`TICK_LABEL_GAP`] from every label already kept.
    fn choose_ticks(&self) -> Vec<f64> {
        let decades = self.low_decade..=self.high_decade;
        let mut candidates: Vec<f64> = decades.clone().map(Layout::decade).collect();
        if self.high_decade - self.low_decade <= 2 {
            for step in [5.0, 2.0] {
                candidates.extend(decades.clone().filter(|decade| *decade < self.high_decade).map(|decade| step * Layout::decade(decade)));
            }
        }
        let mut kept: Vec<(f64, (f64, f64))> = Vec::new();
        for value in candidates {
            let (left, right) = extent(self.x(value), text_width(&tick_label(value), TEXT_SIZE), HPos::Center);
            let clear = kept.iter().all(|(_, (other_left, other_right))| right + TICK_LABEL_GAP <= *other_left || *other_right + TICK_LABEL_GAP <= left);
            if clear && left >= 0.0 && right <= self.width {
                kept.push((value, (left, right)));
            }
        }
        let mut ticks: Vec<f64> = kept.into_iter().map(|(value, _)| value).collect();
        ticks.sort_by(f64::total_cmp);
        ticks
    }

    /// Unlabelled grid lines: 2…9 × each decade, where no labelled tick is.
    fn minor_grid(&self) -> Vec<f64> {
        (self.low_decade..self.high_decade)
            .flat_map(|decade| (2..=9).map(move |multiple| f64::from(multiple) * Layout::decade(decade)))
            .filter(|value| !self.ticks.iter().any(|tick| (tick / value - 1.0).abs() < 1e-9))
            .collect()
    }
}

/// A text style of `size` pixels, anchored at (`horizontal`, vertical centre or top).
fn text_style(size: f64, horizontal: HPos, vertical: VPos) -> TextStyle<'static> {
    (FONT_FAMILY, size * PLOTTERS_FONT_SCALE).into_font().color(&BLACK).pos(Pos::new(horizontal, vertical))
}

/// Pixel coordinates as `plotters` takes them.
fn point(x: f64, y: f64) -> (i32, i32) {
    (x.round() as i32, y.round() as i32)
}

/// Draws `layout` on `root`.
fn draw<DB: DrawingBackend>(root: &DrawingArea<DB, plotters::coord::Shift>, layout: &Layout) -> std::result::Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    root.fill(&WHITE)?;
    root.draw(&Text::new(layout.title.clone(), point(MARGIN, MARGIN), text_style(TITLE_SIZE, HPos::Left, VPos::Top)))?;
    let (top, axis_y) = (layout.rows_top, layout.axis_y());
    let vertical_line = |value: f64, colour: &RGBColor, width: u32| PathElement::new(vec![point(layout.x(value), top), point(layout.x(value), axis_y)], colour.stroke_width(width));
    for value in layout.minor_grid() {
        root.draw(&vertical_line(value, &MINOR_GRID_COLOUR, 1))?;
    }
    for &value in &layout.ticks {
        root.draw(&vertical_line(value, &GRID_COLOUR, 1))?;
    }
    for (index, (label, ratio)) in layout.bars.iter().enumerate() {
        let centre = top + ROW_HEIGHT * (index as f64 + 0.5);
        let half_bar = ROW_HEIGHT * BAR_FRACTION / 2.0;
        root.draw(&Rectangle::new([point(layout.plot_left, centre - half_bar), point(layout.x(*ratio), centre + half_bar)], BAR_COLOUR.filled()))?;
        root.draw(&Text::new(label.clone(), point(layout.plot_left - TEXT_GAP, centre), text_style(TEXT_SIZE, HPos::Right, VPos::Center)))?;
        let (value_x, anchor, colour) = layout.value_position(*ratio);
        root.draw(&Text::new(numbers::ratio(*ratio), point(value_x, centre), text_style(TEXT_SIZE, anchor, VPos::Center).color(&colour)))?;
    }
    // The built-in graft itself: 1×.
    root.draw(&vertical_line(1.0, &BLACK, REFERENCE_LINE_WIDTH as u32))?;
    let plot_right = layout.plot_left + PLOT_WIDTH;
    root.draw(&PathElement::new(vec![point(layout.plot_left, axis_y), point(plot_right, axis_y)], BLACK.stroke_width(1)))?;
    for &value in &layout.ticks {
        let x = layout.x(value);
        root.draw(&PathElement::new(vec![point(x, axis_y), point(x, axis_y + TICK_LENGTH)], BLACK.stroke_width(1)))?;
        root.draw(&Text::new(tick_label(value), point(x, axis_y + TICK_LENGTH + 3.0), text_style(TEXT_SIZE, HPos::Center, VPos::Top)))?;
    }
    let description = "instructions ÷ the built-in graft's instructions (same build)";
    root.draw(&Text::new(description, point((layout.plot_left + plot_right) / 2.0, axis_y + 30.0), text_style(TEXT_SIZE, HPos::Center, VPos::Top)))?;
    Ok(())
}

/// The SVG text of the chart of `bars` ((row label, ratio to built-in), top row first).
fn svg(group: &str, bars: &[(&str, f64)]) -> Result<String> {
    let layout = Layout::new(group, bars);
    let mut text = String::new();
    {
        let root = SVGBackend::with_string(&mut text, (layout.width as u32, layout.height as u32)).into_drawing_area();
        draw(&root, &layout).map_err(|error| error.to_string())?;
        root.present().map_err(|error| error.to_string())?;
    }
    Ok(text)
}

/// Draws `table`'s ratios to `path`; false (and no file) when no row has a ratio yet.
pub fn graft_chart(table: &GraftTable, path: &Path) -> Result<bool> {
    let bars: Vec<(&str, f64)> = table.rows.iter().filter_map(|row| Some((row.label.as_str(), row.times_builtin.filter(|ratio| ratio.is_finite() && *ratio > 0.0)?))).collect();
    if bars.is_empty() {
        return Ok(false);
    }
    let text = svg(&table.group, &bars).map_err(|error| format!("cannot draw {}: {error}", path.display()))?;
    std::fs::write(path, text).map_err(|error| format!("cannot write {}: {error}", path.display()))?;
    Ok(true)
}

/// A horizontal bar chart on a linear axis from 0 (the `policies` group's charts): one
/// bar per `(label, value)`, its value written right of it; `axis` names the unit. False
/// (and no file) without a positive finite value.
pub fn bar_chart(title: &str, axis: &str, bars: &[(String, f64)], path: &Path) -> Result<bool> {
    let largest = bars.iter().map(|(_, value)| *value).filter(|value| value.is_finite()).fold(0.0f64, f64::max);
    if largest <= 0.0 {
        return Ok(false);
    }
    let label_width = bars.iter().map(|(label, _)| text_width(label, TEXT_SIZE)).fold(0.0f64, f64::max);
    let value_width = bars.iter().map(|(_, value)| text_width(&numbers::significant(*value), TEXT_SIZE)).fold(0.0f64, f64::max);
    let left = MARGIN + label_width + TEXT_GAP;
    let width = left + PLOT_WIDTH + TEXT_GAP + value_width + MARGIN;
    let top = MARGIN + TITLE_HEIGHT;
    let height = top + bars.len() as f64 * ROW_HEIGHT + AXIS_HEIGHT + MARGIN;
    let scale = PLOT_WIDTH / largest;
    let escape = |text: &str| text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;");
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width:.0}\" height=\"{height:.0}\" viewBox=\"0 0 {width:.0} {height:.0}\" font-family=\"{FONT_FAMILY}\" font-size=\"{TEXT_SIZE}\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n<text x=\"{MARGIN}\" y=\"{:.1}\" font-size=\"{TITLE_SIZE}\">{}</text>\n",
        MARGIN + TITLE_SIZE,
        escape(title)
    );
    for (index, (label, value)) in bars.iter().enumerate() {
        let y = top + index as f64 * ROW_HEIGHT;
        let bar = if value.is_finite() { value.max(0.0) * scale } else { 0.0 };
        let middle = y + ROW_HEIGHT * BAR_FRACTION / 2.0;
        svg += &format!(
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\" dominant-baseline=\"middle\">{}</text>\n<rect x=\"{left:.1}\" y=\"{y:.1}\" width=\"{bar:.1}\" height=\"{:.1}\" fill=\"rgb({},{},{})\"/>\n<text x=\"{:.1}\" y=\"{middle:.1}\" dominant-baseline=\"middle\">{}</text>\n",
            left - TEXT_GAP,
            middle,
            escape(label),
            ROW_HEIGHT * BAR_FRACTION,
            BAR_COLOUR.0,
            BAR_COLOUR.1,
            BAR_COLOUR.2,
            left + bar + TEXT_GAP,
            escape(&numbers::significant(*value))
        );
    }
    let axis_y = top + bars.len() as f64 * ROW_HEIGHT;
    svg += &format!("<line x1=\"{left:.1}\" y1=\"{axis_y:.1}\" x2=\"{:.1}\" y2=\"{axis_y:.1}\" stroke=\"black\"/>\n", left + PLOT_WIDTH);
    for tick in 0..=4 {
        let value = largest * f64::from(tick) / 4.0;
        let x = left + value * scale;
        svg += &format!(
            "<line x1=\"{x:.1}\" y1=\"{axis_y:.1}\" x2=\"{x:.1}\" y2=\"{:.1}\" stroke=\"black\"/>\n<text x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>\n",
            axis_y + TICK_LENGTH,
            axis_y + TICK_LENGTH + TEXT_SIZE + 2.0,
            numbers::significant(value)
        );
    }
    svg += &format!("<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>\n</svg>\n", left + PLOT_WIDTH / 2.0, axis_y + AXIS_HEIGHT - 4.0, escape(axis));
    std::fs::write(path, svg).map_err(|error| format!("cannot write {}: {error}", path.display()))?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One `<text>` element of an SVG.
    struct SvgText {
        x: f64,
        y: f64,
        anchor: HPos,
        size: f64,
        fill: String,
        content: String,
    }

    impl SvgText {
        /// Its horizontal extent, estimated.
        fn extent(&self) -> (f64, f64) {
            extent(self.x, text_width(&self.content, self.size), self.anchor)
        }
    }

    /// The value of attribute `name` in the start tag `tag`.
    fn attribute<'a>(tag: &'a str, name: &str) -> Option<&'a str> {
        let start = tag.find(&format!(" {name}=\""))? + name.len() + 3;
        Some(&tag[start..start + tag[start..].find('"')?])
    }

    fn number(tag: &str, name: &str) -> f64 {
        attribute(tag, name).unwrap_or_else(|| panic!("{name} missing in {tag}")).parse().unwrap_or_else(|_| panic!("{name} not a number in {tag}"))
    }

    fn texts(svg: &str) -> Vec<SvgText> {
        svg.split("<text").skip(1)
            .map(|element| {
                let (tag, rest) = element.split_once('>').expect("text start tag");
                let content = rest.split("</text>").next().expect("text end tag").trim().replace("&amp;", "&");
                let anchor = match attribute(tag, "text-anchor") {
                    Some("end") => HPos::Right,
                    Some("middle") => HPos::Center,
                    _ => HPos::Left,
                };
                SvgText { x: number(tag, "x"), y: number(tag, "y"), anchor, size: number(tag, "font-size"), fill: attribute(tag, "fill").unwrap_or_default().to_string(), content }
            })
            .collect()
    }

    /// (x, width) of every `<rect>` filled with the bar colour.
    fn bars(svg: &str) -> Vec<(f64, f64)> {
        let fill = format!("#{:02X}{:02X}{:02X}", BAR_COLOUR.0, BAR_COLOUR.1, BAR_COLOUR.2);
        svg.split("<rect").skip(1).map(|element| element.split_once('>').expect("rect tag").0).filter(|tag| attribute(tag, "fill") == Some(fill.as_str())).map(|tag| (number(tag, "x"), number(tag, "width"))).collect()
    }

    const LONG: &str = "C reference through the dispatcher (bounded binding)";

    /// Rows shaped like the hot-list chart of a real run (long labels, 0.7× to 32×).
    fn sample_rows() -> Vec<(&'static str, f64)> {
        vec![
            ("built-in", 1.0),
            ("native (signed .kext)", 1.129),
            ("Wasm (wasmi), default build", 32.32),
            (LONG, 0.695),
            ("the graft called directly (no dispatcher)", 0.636),
            ("user-level (upcall)", 2.33),
            ("Wasm (wasmi) [+unaligned-scalar-mem]", 8.496),
            ("the graft called directly (no dispatcher) [+unaligned-scalar-mem]", 0.99),
            ("tiny", 0.13),
        ]
    }

    /// The checks every chart must pass: no two texts on one line overlap, every text is
    /// inside the picture, row labels end left of the bars, and at least two ticks are
    /// labelled with gaps between them.
    fn check(svg: &str, expected_bars: usize) -> Vec<SvgText> {
        let width = number(svg.split_once("<svg").expect("svg tag").1.split_once('>').expect("svg tag").0, "width");
        let texts = texts(svg);
        for (index, first) in texts.iter().enumerate() {
            let (left, right) = first.extent();
            assert!(left >= 0.0 && right <= width, "{:?} ({left:.0}…{right:.0}) leaves the {width}-pixel picture", first.content);
            for second in texts.iter().skip(index + 1).filter(|second| second.y == first.y) {
                let (other_left, other_right) = second.extent();
                assert!(right <= other_left || other_right <= left, "{:?} and {:?} overlap", first.content, second.content);
            }
        }
        let bars = bars(svg);
        assert_eq!(bars.len(), expected_bars);
        let bars_left = bars.iter().map(|(x, _)| *x).fold(f64::INFINITY, f64::min);
        assert!(bars.iter().all(|(_, width)| *width > 0.0), "every bar has a length, the 1× bar included");
        for text in texts.iter().filter(|text| text.fill == "#FFFFFF") {
            let (left, right) = text.extent();
            assert!(bars.iter().any(|(x, width)| left >= *x && right <= x + width), "white {:?} ({left:.0}…{right:.0}) is not inside a bar", text.content);
        }
        let row_labels: Vec<&SvgText> = texts.iter().filter(|text| matches!(text.anchor, HPos::Right) && text.x < bars_left).collect();
        assert_eq!(row_labels.len(), expected_bars);
        for label in &row_labels {
            let (left, right) = label.extent();
            assert!(left >= 0.0 && right < bars_left, "{:?} ({left:.0}…{right:.0}) runs into the bars at {bars_left}", label.content);
        }
        // The 1× line: no text in the bar area crosses it.
        let line = svg.split("<polyline").skip(1).map(|element| element.split_once("/>").expect("polyline tag").0).find(|tag| attribute(tag, "stroke") == Some("#000000") && attribute(tag, "stroke-width") == Some("2")).expect("the 1× line");
        let points: Vec<(f64, f64)> = attribute(line, "points").expect("points").split_whitespace().map(|pair| pair.split_once(',').map(|(x, y)| (x.parse().expect("x"), y.parse().expect("y"))).expect("x,y")).collect();
        let (line_x, line_top, line_bottom) = (points[0].0, points[0].1, points[1].1);
        for text in texts.iter().filter(|text| text.y > line_top && text.y < line_bottom) {
            let (left, right) = text.extent();
            assert!(right <= line_x - 1.0 || left >= line_x + 1.0, "{:?} ({left:.0}…{right:.0}) crosses the 1× line at {line_x}", text.content);
        }
        let mut ticks: Vec<&SvgText> = texts.iter().filter(|text| matches!(text.anchor, HPos::Center) && text.content.ends_with('×')).collect();
        ticks.sort_by(|a, b| a.x.total_cmp(&b.x));
        assert!(ticks.len() >= 2, "the axis has {} label(s)", ticks.len());
        assert!(ticks.iter().all(|tick| tick.y == ticks[0].y), "tick labels share one line");
        for pair in ticks.windows(2) {
            let spacing = pair[1].x - pair[0].x;
            let needed = (text_width(&pair[0].content, pair[0].size) + text_width(&pair[1].content, pair[1].size)) / 2.0;
            assert!(spacing >= needed + TICK_LABEL_GAP - 1.0, "{:?} and {:?} are {spacing:.0} px apart, need {needed:.0}", pair[0].content, pair[1].content);
        }
        texts
    }

    #[test]
    fn sample_chart_is_readable() {
        let svg = svg("graft-hotlist", &sample_rows()).expect("svg");
        let texts = check(&svg, 9);
        let white: Vec<&str> = texts.iter().filter(|text| text.fill == "#FFFFFF").map(|text| text.content.as_str()).collect();
        assert_eq!(white, ["0.69×", "0.64×", "0.99×"], "values of bars ending just left of 1× are written inside them");
        let ticks: Vec<&str> = texts.iter().filter(|text| matches!(text.anchor, HPos::Center) && text.content.ends_with('×')).map(|text| text.content.as_str()).collect();
        assert_eq!(ticks, ["0.1×", "1×", "10×", "100×"], "three decades: labelled at decades");
        assert!(texts.iter().any(|text| text.content == LONG), "the long label is whole");
        assert!(texts.iter().any(|text| text.content == "32.3×"), "bar values are formatted");
    }

    #[test]
    fn narrow_range_gets_one_two_five_ticks() {
        // The case that printed `7.08.09.010.0`.
        let rows = [("built-in", 1.0), ("seven", 7.0), ("eight", 8.0), ("nine", 9.0), ("ten", 10.0)];
        let svg = svg("graft-narrow", &rows).expect("svg");
        let texts = check(&svg, 5);
        let ticks: Vec<&str> = texts.iter().filter(|text| matches!(text.anchor, HPos::Center) && text.content.ends_with('×')).map(|text| text.content.as_str()).collect();
        assert_eq!(ticks, ["0.1×", "0.2×", "0.5×", "1×", "2×", "5×", "10×"], "two decades: 1-2-5 steps");
        assert!(!svg.contains("7.08.0") && !svg.contains(">7.0<"));
    }

    #[test]
    fn crowded_ticks_are_dropped_not_overlapped() {
        let mut layout = Layout::new("graft-test", &[("built-in", 1.0), ("x", 3.0)]);
        assert_eq!((layout.low_decade, layout.high_decade), (-1, 1), "0.1× … 10× holds 1× and 3×");
        // Squeeze: with an axis of many decades on the same width, only some decades fit.
        layout.low_decade = -30;
        layout.high_decade = 30;
        let ticks = layout.choose_ticks();

        assert!(ticks.len() >= 2 && ticks.len() < 61, "{} ticks", ticks.len());
        for pair in ticks.windows(2) {
            let (_, right) = extent(layout.x(pair[0]), text_width(&tick_label(pair[0]), TEXT_SIZE), HPos::Center);
            let (left, _) = extent(layout.x(pair[1]), text_width(&tick_label(pair[1]), TEXT_SIZE), HPos::Center);
            assert!(right + TICK_LABEL_GAP <= left);
        }
        // Ten decades of 56 pixels from 0.1×: a 0.9× bar cannot hold its value, which
        // would cross the 1× line right of the bar, so it goes right of the line.
        layout.low_decade = -1;
        layout.high_decade = 9;
        let (x, anchor, _) = layout.value_position(0.9);
        assert!(matches!(anchor, HPos::Left) && x >= layout.x(1.0) + REFERENCE_LINE_WIDTH, "{x} vs {}", layout.x(1.0));
        let (x, anchor, _) = layout.value_position(0.11);
        assert!(matches!(anchor, HPos::Left) && x < layout.x(1.0), "room between a short bar and the line");
    }

    #[test]
    fn the_label_column_follows_the_longest_label() {
        let short = Layout::new("graft-test", &[("built-in", 1.0), ("native", 1.1)]);
        let long = Layout::new("graft-test", &[("built-in", 1.0), (LONG, 1.1)]);
        assert!(long.plot_left >= MARGIN + text_width(LONG, TEXT_SIZE) + TEXT_GAP);
        assert!(short.plot_left < long.plot_left - 200.0, "a short label leaves a narrow column ({} vs {})", short.plot_left, long.plot_left);
        assert!(long.width > long.plot_left + PLOT_WIDTH);
    }

    #[test]
    fn width_estimate_errs_wide() {
        // DejaVu Sans advance widths (ems): "m" 0.974, "i" 0.278, "W" 0.989, "0" 0.636.
        assert!(text_width("m", 10.0) >= 9.74 && text_width("i", 10.0) >= 2.78 && text_width("W", 10.0) >= 9.89 && text_width("0", 10.0) >= 6.36);
        assert!(text_width("", 13.0) == 0.0);
        assert!(text_width("abc", 26.0) == 2.0 * text_width("abc", 13.0));
    }

    #[test]
    fn graft_chart_writes_only_with_ratios() {
        let directory = std::env::temp_dir().join(format!("spindle-chart-test-{}", std::process::id()));
        std::fs::create_dir_all(&directory).expect("directory");
        let path = directory.join("chart.svg");
        let row = |name: &str, instructions: f64| crate::bench::Row { group: "graft-hotlist".into(), name: name.into(), iterations: 4096, instructions };
        let hardware = std::collections::BTreeMap::new();
        let (cycles, disk) = (&crate::bench::model::CYCLE_MODEL, &crate::bench::model::DISK_MODEL);
        let unmeasured = crate::bench::grafts::tables(&[row("page-fault-caught", 276.0)], &hardware, cycles, disk).remove(0);
        assert!(!graft_chart(&unmeasured, &path).expect("no ratios"));
        assert!(!path.exists(), "no chart without ratios");
        let rows = [row("reclaim-builtin", 1286.125), row("reclaim-native", 1452.0), row("reclaim-wasm", 41564.126), row("reclaim-c-reference", 894.125)];
        let table = crate::bench::grafts::tables(&rows, &hardware, cycles, disk).remove(0);
        assert!(graft_chart(&table, &path).expect("chart"));
        let texts = check(&std::fs::read_to_string(&path).expect("written"), 4);
        assert!(texts.iter().any(|text| text.content == "32.3×"));
        let _ = std::fs::remove_dir_all(&directory);
    }
}
