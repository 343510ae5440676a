//! The lab benches' plots: lines over categorical x values (one point per bench setting) and
//! (x, y) timelines with vertical marks; the font and colours of every plot.

use std::path::Path;

use anyhow::{anyhow, bail, Result};
use plotters::prelude::*;

use crate::font::ensure_font;
use crate::palette::PALETTE;

/// One line per series over the categorical x `labels` (NaN points are skipped).
pub fn lines(
    path: &Path,
    title: &str,
    xlabel: &str,
    ylabel: &str,
    labels: &[String],
    series: &[(String, Vec<f64>)],
) -> Result<()> {
    ensure_font();
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
        let color = PALETTE[k % PALETTE.len()];
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
    ensure_font();
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
        let color = PALETTE[k % PALETTE.len()];
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

#[cfg(test)]
mod tests {
    use super::*;

    fn png_size(path: &Path) -> (u32, u32) {
        let b = std::fs::read(path).unwrap();
        assert_eq!(&b[..8], b"\x89PNG\r\n\x1a\n", "not a PNG");
        let w = u32::from_be_bytes(b[16..20].try_into().unwrap());
        let h = u32::from_be_bytes(b[20..24].try_into().unwrap());
        (w, h)
    }

    #[test]
    fn both_plots_write_pngs_and_empty_input_is_an_error() {
        let dir = std::env::temp_dir().join(format!("aerotp-plot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let labels: Vec<String> = ["0", "1e-5", "1e-4"].map(String::from).to_vec();
        let series = vec![
            ("tcp".to_string(), vec![4.7, 1.1, f64::NAN]),
            ("aerotp".to_string(), vec![4.7, 4.6, 4.3]),
        ];
        let p = dir.join("lines.png");
        lines(&p, "goodput", "BER", "Mb/s", &labels, &series).unwrap();
        let (w, h) = png_size(&p);
        assert!(w > 100 && h > 100, "{w}x{h}");
        assert!(lines(&dir.join("none.png"), "t", "x", "y", &[], &series).is_err());
        let p = dir.join("xy.png");
        let pts = vec![("delivered".to_string(), vec![(0.0, 0.0), (1.0, 2.0)])];
        xy(&p, "outage", "s", "MB", &pts, &[0.5]).unwrap();
        let (w, h) = png_size(&p);
        assert!(w > 100 && h > 100, "{w}x{h}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
