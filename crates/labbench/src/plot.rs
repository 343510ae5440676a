//! PNG line plots over categorical x values (plotters, bitmap backend, DejaVu Sans).

use std::path::Path;
use std::sync::OnceLock;

use anyhow::{anyhow, bail, Result};
use plotters::prelude::*;

const FONTS: [&str; 3] = [
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
];

fn register_font() -> Result<()> {
    static DONE: OnceLock<std::result::Result<(), String>> = OnceLock::new();
    DONE.get_or_init(|| {
        let bytes = FONTS
            .iter()
            .find_map(|p| std::fs::read(p).ok())
            .ok_or_else(|| {
                format!("no DejaVuSans.ttf in {FONTS:?} (apt-get install fonts-dejavu-core)")
            })?;
        let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
        plotters::style::register_font("sans-serif", FontStyle::Normal, bytes)
            .map_err(|_| "font not usable".to_string())
    })
    .clone()
    .map_err(|e| anyhow!(e))
}

const COLORS: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

/// One line per series over the categorical x `labels` (NaN points are skipped).
pub fn lines(
    path: &Path,
    title: &str,
    xlabel: &str,
    ylabel: &str,
    labels: &[String],
    series: &[(String, Vec<f64>)],
) -> Result<()> {
    register_font()?;
    if labels.is_empty() {
        bail!("nothing to plot");
    }
    let ymax = series
        .iter()
        .flat_map(|(_, v)| v.iter().copied())
        .filter(|v| v.is_finite())
        .fold(0.0f64, f64::max)
        .max(1e-9)
        * 1.08;
    let root = BitMapBackend::new(path, (1000, 620)).into_drawing_area();
    let e = |e: DrawingAreaErrorKind<_>| anyhow!("plot {}: {e:?}", path.display());
    root.fill(&WHITE).map_err(e)?;
    let n = labels.len();
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 24))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(65)
        .build_cartesian_2d(-0.3f64..(n as f64 - 0.7), 0.0..ymax)
        .map_err(e)?;
    chart
        .configure_mesh()
        .x_desc(xlabel)
        .y_desc(ylabel)
        .x_labels(n)
        .x_label_formatter(&|x| {
            let i = x.round();
            if (x - i).abs() < 1e-6 && i >= 0.0 && (i as usize) < n {
                labels[i as usize].clone()
            } else {
                String::new()
            }
        })
        .draw()
        .map_err(e)?;
    for (k, (name, ys)) in series.iter().enumerate() {
        let color = COLORS[k % COLORS.len()];
        let pts: Vec<(f64, f64)> = ys
            .iter()
            .enumerate()
            .filter(|(_, y)| y.is_finite())
            .map(|(i, &y)| (i as f64, y))
            .collect();
        chart
            .draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))
            .map_err(e)?
            .label(name.clone())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
        chart
            .draw_series(pts.iter().map(|&p| Circle::new(p, 4, color.filled())))
            .map_err(e)?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperRight)
        .draw()
        .map_err(e)?;
    root.present().map_err(e)?;
    Ok(())
}

/// Several (x, y) series on numeric axes (rate timelines).
pub fn xy(
    path: &Path,
    title: &str,
    xlabel: &str,
    ylabel: &str,
    series: &[(String, Vec<(f64, f64)>)],
    marks: &[f64],
) -> Result<()> {
    register_font()?;
    let all = series.iter().flat_map(|(_, v)| v.iter().copied());
    let (mut x0, mut x1, mut y1) = (f64::INFINITY, f64::NEG_INFINITY, 0.0f64);
    for (x, y) in all {
        x0 = x0.min(x);
        x1 = x1.max(x);
        y1 = y1.max(y);
    }
    if !x0.is_finite() || x1 <= x0 {
        bail!("nothing to plot");
    }
    let root = BitMapBackend::new(path, (1000, 620)).into_drawing_area();
    let e = |e: DrawingAreaErrorKind<_>| anyhow!("plot {}: {e:?}", path.display());
    root.fill(&WHITE).map_err(e)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 24))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(65)
        .build_cartesian_2d(x0..x1, 0.0..(y1 * 1.08).max(1e-9))
        .map_err(e)?;
    chart
        .configure_mesh()
        .x_desc(xlabel)
        .y_desc(ylabel)
        .draw()
        .map_err(e)?;
    for &m in marks {
        chart
            .draw_series(LineSeries::new(
                vec![(m, 0.0), (m, y1 * 1.05)],
                BLACK.mix(0.4),
            ))
            .map_err(e)?;
    }
    for (k, (name, pts)) in series.iter().enumerate() {
        let color = COLORS[k % COLORS.len()];
        chart
            .draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))
            .map_err(e)?
            .label(name.clone())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(SeriesLabelPosition::LowerRight)
        .draw()
        .map_err(e)?;
    root.present().map_err(e)?;
    Ok(())
}
