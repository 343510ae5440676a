//! What a plan writes besides its report: one CSV per experiment and its PNG plots.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use aerotp_plot::{draw, Chart, Series};
use anyhow::Context;

use super::row::Row;
use super::template::{Lookup, Vars};
use super::{Column, Experiment, Plot};
use crate::run::RunResult;

/// Writes `rows` with `columns`; the series column is always quoted (names hold commas),
/// a missing value is an empty cell.
pub fn write_csv(path: &Path, columns: &[Column], rows: &[&Row]) -> anyhow::Result<()> {
    let mut s = columns
        .iter()
        .map(|c| c.header.as_str())
        .collect::<Vec<_>>()
        .join(",");
    s.push('\n');
    for r in rows {
        let cells: Vec<String> = columns
            .iter()
            .map(|c| {
                let v = c.field.render(*r).unwrap_or_default();
                if c.field.expr.name == "series" {
                    format!("\"{}\"", v.replace('"', "\"\""))
                } else {
                    v
                }
            })
            .collect();
        s += &cells.join(",");
        s.push('\n');
    }
    std::fs::write(path, s).with_context(|| format!("writing {}", path.display()))
}

/// The values a faceted plot or table is drawn for: the distinct values of `facet` over
/// the simulator's rows, ascending (peers' rows join the facet that matches theirs).
pub fn facet_values(rows: &[&Row], facet: &str) -> Vec<f64> {
    let mut v: Vec<f64> = rows
        .iter()
        .filter(|r| r.is_sim())
        .filter_map(|r| r.number(facet))
        .collect();
    v.sort_by(f64::total_cmp);
    v.dedup();
    v
}

/// The facet as a template variable (`{ber:e}` in a file name).
pub fn facet_vars(facet: &str, value: f64) -> Vars {
    Vars {
        numbers: vec![(facet.to_owned(), value)],
        texts: vec![],
    }
}

/// The rows of a plot or table split by `facet`: per facet value (see [`facet_values`]) the
/// value as a template variable and the rows that have it; without a facet, all rows in one
/// group with no variables.
pub fn facet_groups<'a>(rows: &[&'a Row], facet: Option<&str>) -> Vec<(Vars, Vec<&'a Row>)> {
    let Some(f) = facet else {
        return vec![(Vars::default(), rows.to_vec())];
    };
    facet_values(rows, f)
        .into_iter()
        .map(|v| {
            let rs = rows
                .iter()
                .copied()
                .filter(|r| r.number(f) == Some(v))
                .collect();
            (facet_vars(f, v), rs)
        })
        .collect()
}

/// Series in the order they first appear, each with its points (x scaled, metric).
fn series(rows: &[&Row], plot: &Plot) -> Vec<Series> {
    let mut order: Vec<&str> = Vec::new();
    for r in rows {
        if !order.contains(&r.series.as_str()) {
            order.push(&r.series);
        }
    }
    order
        .into_iter()
        .map(|name| {
            let mut points: Vec<(f64, f64)> = rows
                .iter()
                .filter(|r| r.series == name)
                .filter_map(|r| {
                    let x = plot.x_scale.map_or(r.x, |k| r.x * k);
                    plot.y.eval(*r).map(|y| (x, y))
                })
                .collect();
            points.sort_by(|a, b| a.0.total_cmp(&b.0));
            let peer = rows.iter().any(|r| r.series == name && !r.is_sim());
            Series {
                name: name.to_owned(),
                points,
                peer,
            }
        })
        .filter(|s| !s.points.is_empty())
        .collect()
}

/// Draws every plot of one experiment (one per facet value for faceted ones).
pub fn plots(out: &Path, ex: &Experiment, rows: &[&Row]) -> anyhow::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for p in &ex.plots {
        for (vars, rs) in facet_groups(rows, p.facet.as_deref()) {
            let path = out.join(p.file.render(&vars));
            let title = p.title.render(&vars);
            draw(
                &path,
                &Chart {
                    title: &title,
                    x_label: &p.x_label,
                    y_label: &p.y_label,
                    series: series(&rs, p),
                    y_from_zero: true,
                    x_sci: p.x_sci,
                    legend_low: p.legend_low,
                },
            )
            .with_context(|| format!("drawing {}", path.display()))?;
            files.push(path);
        }
    }
    Ok(files)
}

/// The timeline CSV (`series,time_s,delivered_bytes`) and the cumulative-delivery plot.
pub fn timelines(
    out: &Path,
    ex: &Experiment,
    runs: &[(String, RunResult)],
) -> anyhow::Result<Vec<PathBuf>> {
    let Some(t) = &ex.timeline else {
        return Ok(Vec::new());
    };
    let mut csv = String::from("series,time_s,delivered_bytes\n");
    for (name, r) in runs {
        for (time, b) in &r.timeline {
            writeln!(csv, "\"{name}\",{time},{b}")?;
        }
    }
    let csv_path = out.join(&t.csv);
    std::fs::write(&csv_path, csv).with_context(|| format!("writing {}", csv_path.display()))?;
    let cum: Vec<Series> = runs
        .iter()
        .map(|(name, r)| Series {
            name: name.clone(),
            points: r
                .timeline
                .iter()
                .map(|&(t, b)| (t, b as f64 / 1e3))
                .collect(),
            peer: false,
        })
        .collect();
    let plot_path = out.join(&t.plot);
    draw(
        &plot_path,
        &Chart {
            title: &t.title,
            x_label: "time (s)",
            y_label: "delivered (kB)",
            series: cum,
            y_from_zero: true,
            x_sci: false,
            legend_low: false,
        },
    )
    .with_context(|| format!("drawing {}", plot_path.display()))?;
    Ok(vec![csv_path, plot_path])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::row::SIM_SOURCE;

    fn row(source: &str, ber: Option<f64>) -> Row {
        Row {
            experiment: "e".into(),
            series: "s".into(),
            source: source.into(),
            x: 0.0,
            metrics: ber.map(|b| ("ber".to_owned(), b)).into_iter().collect(),
        }
    }

    #[test]
    fn facet_groups_split_rows_by_the_simulators_values() {
        let rows = [
            row(SIM_SOURCE, Some(1e-4)),
            row(SIM_SOURCE, Some(1e-5)),
            row("peer", Some(1e-4)),
            row("peer", Some(1e-3)),
            row(SIM_SOURCE, None),
        ];
        let refs: Vec<&Row> = rows.iter().collect();
        let all = facet_groups(&refs, None);
        assert_eq!(all.len(), 1);
        assert_eq!((all[0].0.numbers.len(), all[0].1.len()), (0, 5));
        let by_ber = facet_groups(&refs, Some("ber"));
        // One group per value the simulator has, ascending; the peer's 1e-3 gets none.
        let shape: Vec<(Vec<(String, f64)>, usize)> = by_ber
            .iter()
            .map(|(v, rs)| (v.numbers.clone(), rs.len()))
            .collect();
        assert_eq!(
            shape,
            vec![
                (vec![("ber".to_owned(), 1e-5)], 1),
                (vec![("ber".to_owned(), 1e-4)], 2),
            ]
        );
    }
}
