//! Line charts on numeric axes as PNG (the simulator's plan plots): axis ranges taken from
//! the data, markers on every point, peers drawn thinner with triangles.

use std::path::Path;

use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;

use crate::font::ensure_font;
use crate::palette::PALETTE;

/// One line of a chart.
#[derive(Debug, Clone)]
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
    /// Dashed-looking (drawn with markers only) for peers such as ns-3 TCP.
    pub peer: bool,
}

/// A line chart: x and y labels, series, and axis ranges taken from the data.
#[derive(Debug, Clone)]
pub struct Chart<'a> {
    pub title: &'a str,
    pub x_label: &'a str,
    pub y_label: &'a str,
    pub series: Vec<Series>,
    /// Forces y to start at 0.
    pub y_from_zero: bool,
    /// Formats x tick labels (e.g. BER in scientific notation).
    pub x_sci: bool,
    /// Legend in the lower left corner instead of the upper right.
    pub legend_low: bool,
}

fn fmt_x(v: f64, sci: bool) -> String {
    if sci {
        if v == 0.0 {
            "0".into()
        } else {
            format!("{v:.1e}")
        }
    } else if v.abs() >= 100.0 || v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}

/// Width and height of every chart, in pixels.
pub const SIZE: (u32, u32) = (1000, 620);

/// Draws `chart` to a PNG at `path` ([`SIZE`]).
pub fn draw(path: &Path, chart: &Chart) -> anyhow::Result<()> {
    ensure_font();
    let root = BitMapBackend::new(path, SIZE).into_drawing_area();
    paint(&root, chart)?;
    root.present()?;
    Ok(())
}

/// The pixels [`draw`] would write for `chart`: RGB, row by row, [`SIZE`].
pub fn draw_rgb(chart: &Chart) -> anyhow::Result<Vec<u8>> {
    ensure_font();
    let mut buf = vec![0u8; SIZE.0 as usize * SIZE.1 as usize * 3];
    {
        let root = BitMapBackend::with_buffer(&mut buf, SIZE).into_drawing_area();
        paint(&root, chart)?;
        root.present()?;
    }
    Ok(buf)
}

/// The plot area of [`paint`]'s chart: numeric x and y.
type Plot<'a, DB> = ChartContext<'a, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

fn paint<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, chart: &Chart) -> anyhow::Result<()>
where
    DB::ErrorType: 'static,
{
    let ((x0, x1), (y0, y1)) = axis_ranges(chart);
    root.fill(&WHITE)?;
    let mut c = ChartBuilder::on(root)
        .caption(chart.title, ("sans-serif", 24))
        .margin(18)
        .x_label_area_size(55)
        .y_label_area_size(90)
        .build_cartesian_2d(x0..x1, y0..y1)?;
    let sci = chart.x_sci;
    c.configure_mesh()
        .x_desc(chart.x_label)
        .y_desc(chart.y_label)
        .label_style(("sans-serif", 15))
        .axis_desc_style(("sans-serif", 18))
        .x_label_formatter(&|v| fmt_x(*v, sci))
        .y_label_formatter(&|v| {
            if v.abs() >= 1e4 || (v.abs() < 1e-2 && *v != 0.0) {
                format!("{v:.2e}")
            } else {
                format!("{v:.2}")
            }
        })
        .draw()?;
    // A series drawn over an earlier one it matches would hide it: drawn dashed with hollow
    // markers instead, and named in the legend as the same, so both show.
    let over = covered(&chart.series, (y1 - y0) / 250.0);
    for (i, s) in chart.series.iter().enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        match over[i] {
            None => draw_plain(&mut c, s, color)?,
            Some((j, exact)) => draw_over(&mut c, s, color, &chart.series[j].name, exact)?,
        }
    }
    c.configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 14))
        .position(if chart.legend_low {
            SeriesLabelPosition::LowerLeft
        } else {
            SeriesLabelPosition::UpperRight
        })
        .draw()?;
    Ok(())
}

/// The x and y ranges of `chart`'s axes: the data's, a unit square when there is none, y
/// padded by 5 % (not below 0 when it starts there).
fn axis_ranges(chart: &Chart) -> ((f64, f64), (f64, f64)) {
    let pts = || chart.series.iter().flat_map(|s| s.points.iter().copied());
    let (mut x0, mut x1) = pts().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), (x, _)| {
        (a.min(x), b.max(x))
    });
    let (mut y0, mut y1) = pts().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), (_, y)| {
        (a.min(y), b.max(y))
    });
    if !x0.is_finite() {
        (x0, x1, y0, y1) = (0.0, 1.0, 0.0, 1.0);
    }
    if x1 <= x0 {
        x1 = x0 + 1.0;
    }
    if chart.y_from_zero {
        y0 = y0.min(0.0);
    }
    let pad = ((y1 - y0) * 0.05).max(1e-9);
    y1 += pad;
    if !chart.y_from_zero {
        y0 -= pad;
    }
    ((x0, x1), (y0, y1))
}

/// The line of a series (thinner for a peer), in the legend as a solid line.
fn series_style(s: &Series, color: RGBColor) -> (ShapeStyle, ShapeStyle) {
    let line = ShapeStyle {
        color: color.to_rgba(),
        filled: true,
        stroke_width: if s.peer { 1 } else { 2 },
    };
    let legend = ShapeStyle {
        color: color.to_rgba(),
        filled: true,
        stroke_width: 3,
    };
    (line, legend)
}

/// A series no earlier one hides: a solid line with filled markers (triangles for a peer).
fn draw_plain<'a, DB: DrawingBackend + 'a>(
    c: &mut Plot<'a, DB>,
    s: &Series,
    color: RGBColor,
) -> anyhow::Result<()>
where
    DB::ErrorType: 'static,
{
    let (style, legend_style) = series_style(s, color);
    let anno = c.draw_series(LineSeries::new(s.points.clone(), style))?;
    anno.label(s.name.clone())
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], legend_style));
    if s.peer {
        c.draw_series(
            s.points
                .iter()
                .map(|&p| TriangleMarker::new(p, 5, color.filled())),
        )?;
    } else {
        c.draw_series(s.points.iter().map(|&p| Circle::new(p, 3, color.filled())))?;
    }
    Ok(())
}

/// A series drawn over the earlier `other`: dashed, with larger hollow markers so the one
/// under it shows through, named in the legend as equal (`=`) or close (`≈`) to it.
fn draw_over<'a, DB: DrawingBackend + 'a>(
    c: &mut Plot<'a, DB>,
    s: &Series,
    color: RGBColor,
    other: &str,
    exact: bool,
) -> anyhow::Result<()>
where
    DB::ErrorType: 'static,
{
    let (style, legend_style) = series_style(s, color);
    let anno = c.draw_series(DashedLineSeries::new(s.points.clone(), 9, 9, style))?;
    let same = if exact { "=" } else { "≈" };
    anno.label(format!("{} ({same} {other})", s.name))
        .legend(move |(x, y)| {
            EmptyElement::at((x, y))
                + PathElement::new(vec![(0, 0), (7, 0)], legend_style)
                + PathElement::new(vec![(13, 0), (20, 0)], legend_style)
        });
    let ring = color.stroke_width(2);
    if s.peer {
        c.draw_series(s.points.iter().map(|&p| TriangleMarker::new(p, 9, ring)))?;
    } else {
        c.draw_series(s.points.iter().map(|&p| Circle::new(p, 6, ring)))?;
    }
    Ok(())
}

/// For each series, the first earlier one it would be drawn over, and whether exactly: the same
/// x values and every y within `tol` (about two pixels) of the other's.
fn covered(series: &[Series], tol: f64) -> Vec<Option<(usize, bool)>> {
    let matches = |a: &Series, b: &Series| {
        a.points.len() == b.points.len()
            && a.points
                .iter()
                .zip(&b.points)
                .all(|(p, q)| p.0 == q.0 && (p.1 - q.1).abs() <= tol)
    };
    series
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let j = series[..i].iter().position(|e| matches(e, s))?;
            Some((j, series[j].points == s.points))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(points: &[(f64, f64)]) -> Series {
        Series {
            name: String::new(),
            points: points.to_vec(),
            peer: false,
        }
    }

    #[test]
    fn covered_names_the_first_earlier_series_within_the_tolerance() {
        let a = s(&[(0.0, 1.0), (1.0, 2.0)]);
        let near = s(&[(0.0, 1.005), (1.0, 2.0)]);
        let far = s(&[(0.0, 1.5), (1.0, 2.0)]);
        let other_x = s(&[(0.0, 1.0), (2.0, 2.0)]);
        let shorter = s(&[(0.0, 1.0)]);
        let got = covered(&[a.clone(), far, a, near, other_x, shorter], 0.01);
        assert_eq!(
            got,
            vec![None, None, Some((0, true)), Some((0, false)), None, None]
        );
        assert_eq!(covered(&[], 0.01), vec![]);
    }
}
