//! Line charts on numeric axes as PNG (the simulator's plan plots): axis ranges taken from
//! the data, markers on every point, peers drawn thinner with triangles.

use std::path::Path;

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

/// Draws `chart` to a PNG at `path` (1000 × 620 px).
pub fn draw(path: &Path, chart: &Chart) -> anyhow::Result<()> {
    ensure_font();
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
    let root = BitMapBackend::new(path, (1000, 620)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut c = ChartBuilder::on(&root)
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
    for (i, s) in chart.series.iter().enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        let style = ShapeStyle {
            color: color.to_rgba(),
            filled: true,
            stroke_width: if s.peer { 1 } else { 2 },
        };
        let anno = c.draw_series(LineSeries::new(s.points.clone(), style))?;
        anno.label(s.name.clone()).legend(move |(x, y)| {
            PathElement::new(
                vec![(x, y), (x + 20, y)],
                ShapeStyle {
                    color: color.to_rgba(),
                    filled: true,
                    stroke_width: 3,
                },
            )
        });
        if s.peer {
            c.draw_series(
                s.points
                    .iter()
                    .map(|&p| TriangleMarker::new(p, 5, color.filled())),
            )?;
        } else {
            c.draw_series(s.points.iter().map(|&p| Circle::new(p, 3, color.filled())))?;
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
    root.present()?;
    Ok(())
}
