//! Time-sequence charts (as tcptrace draws them): TPDU numbers against time, one mark per
//! TPDU, with kinds told apart by colour and shape — first transmissions, retransmissions,
//! repairs, and the receiver's cumulative acknowledgement as a line (`aerotp trace`).

use std::path::Path;

use plotters::prelude::*;

use crate::font::ensure_font;
use crate::palette::PALETTE;

/// How a set of points is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mark {
    /// Small dots (first transmissions: many thousands of them).
    Dot,
    /// Crosses, drawn over the dots (retransmissions, losses).
    Cross,
    /// A step line through the points (cumulative acknowledgement).
    Step,
}

/// One kind of point of a time-sequence chart.
#[derive(Debug, Clone)]
pub struct Marks {
    pub name: String,
    pub mark: Mark,
    /// Index into [`PALETTE`].
    pub colour: usize,
    /// (time in seconds, TPDU number).
    pub points: Vec<(f64, f64)>,
}

/// A time-sequence chart.
#[derive(Debug, Clone)]
pub struct TimeSeq<'a> {
    pub title: &'a str,
    pub marks: Vec<Marks>,
}

/// Draws `chart` to a PNG at `path` (1200 × 700 px). An empty chart is drawn with unit axes.
pub fn draw_timeseq(path: &Path, chart: &TimeSeq) -> anyhow::Result<()> {
    ensure_font();
    let pts = || chart.marks.iter().flat_map(|m| m.points.iter().copied());
    let (x0, x1) = pts().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), (x, _)| {
        (a.min(x), b.max(x))
    });
    let (y0, y1) = pts().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), (_, y)| {
        (a.min(y), b.max(y))
    });
    let (x0, x1) = if x0.is_finite() {
        (x0, x1.max(x0 + 1e-3))
    } else {
        (0.0, 1.0)
    };
    let (y0, y1) = if y0.is_finite() {
        (y0, y1.max(y0 + 1.0))
    } else {
        (0.0, 1.0)
    };
    let pad = (y1 - y0) * 0.03;
    let root = BitMapBackend::new(path, (1200, 700)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut c = ChartBuilder::on(&root)
        .caption(chart.title, ("sans-serif", 22))
        .margin(18)
        .x_label_area_size(50)
        .y_label_area_size(90)
        .build_cartesian_2d(x0..x1, (y0 - pad)..(y1 + pad))?;
    c.configure_mesh()
        .x_desc("time, s")
        .y_desc("TPDU number")
        .label_style(("sans-serif", 15))
        .axis_desc_style(("sans-serif", 18))
        .y_label_formatter(&|v| format!("{v:.0}"))
        .draw()?;
    for m in &chart.marks {
        let colour = PALETTE[m.colour % PALETTE.len()];
        let legend_style = ShapeStyle {
            color: colour.to_rgba(),
            filled: true,
            stroke_width: 3,
        };
        let anno = match m.mark {
            Mark::Dot => {
                c.draw_series(m.points.iter().map(|&p| Circle::new(p, 1, colour.filled())))?
            }
            Mark::Cross => c.draw_series(
                m.points
                    .iter()
                    .map(|&p| Cross::new(p, 4, colour.stroke_width(2))),
            )?,
            Mark::Step => {
                let mut step = Vec::with_capacity(m.points.len() * 2);
                for w in m.points.windows(2) {
                    step.push(w[0]);
                    step.push((w[1].0, w[0].1));
                }
                if let Some(&last) = m.points.last() {
                    step.push(last);
                }
                c.draw_series(LineSeries::new(step, colour.stroke_width(2)))?
            }
        };
        anno.label(format!("{} ({})", m.name, m.points.len()))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], legend_style));
    }
    c.configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 14))
        .position(SeriesLabelPosition::UpperLeft)
        .draw()?;
    root.present()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_a_png_with_every_kind_of_mark() {
        let dir = std::env::temp_dir().join(format!("aerotp-timeseq-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("t.png");
        let chart = TimeSeq {
            title: "test",
            marks: vec![
                Marks {
                    name: "sent".into(),
                    mark: Mark::Dot,
                    colour: 0,
                    points: (0..100).map(|i| (i as f64 * 0.01, i as f64)).collect(),
                },
                Marks {
                    name: "resent".into(),
                    mark: Mark::Cross,
                    colour: 3,
                    points: vec![(0.5, 10.0)],
                },
                Marks {
                    name: "acked".into(),
                    mark: Mark::Step,
                    colour: 2,
                    points: vec![(0.02, 0.0), (0.5, 40.0), (1.0, 100.0)],
                },
            ],
        };
        draw_timeseq(&path, &chart).unwrap();
        let png = std::fs::read(&path).unwrap();
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
        assert!(png.len() > 5_000, "{} bytes", png.len());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
