//! Figures 6–9 drawn with plotters, each as PNG and SVG. Text in PNGs needs a TrueType
//! font: DejaVu Sans (Debian's fonts-dejavu-core) or Liberation Sans, looked for where
//! Debian installs them.

use std::ops::Range;
use std::path::Path;
use std::sync::OnceLock;

use anyhow::{Result, anyhow, bail};
use plotters::coord::Shift;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use plotters::style::{FontStyle, register_font};

use crate::measure::Cell;
use crate::report;

/// Each figure's file stem and title.
pub const FIGURES: [(&str, &str); 4] = [
    ("fig6-overhead", "Figure 6: overhead per program and thread count"),
    ("fig7-capture-growth", "Figure 7: capture-time growth with the thread count"),
    ("fig8-storage", "Figure 8: incremental against full storage"),
    ("fig9-page-changes", "Figure 9: page change rate"),
];

const FONTS: [&str; 3] = [
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
];

pub enum Chart {
    /// One group of bars per program, one bar per series.
    Bars { title: String, y_label: String, groups: Vec<String>, series: Vec<(String, Vec<f64>)> },
    /// One line per series over snapshots 1, 2, …
    Lines { title: String, x_label: String, y_label: String, series: Vec<(String, Vec<f64>)> },
}

const SIZE: (u32, u32) = (1000, 560);

fn font() -> Result<()> {
    static FONT: OnceLock<Result<(), String>> = OnceLock::new();
    FONT.get_or_init(|| {
        let Some(path) = FONTS.iter().find(|p| Path::new(p).exists()) else {
            return Err(format!(
                "no TrueType font in {} (apt-get install fonts-dejavu-core)",
                FONTS.join(", ")
            ));
        };
        let bytes: &'static [u8] = Vec::leak(std::fs::read(path).map_err(|e| format!("{path}: {e}"))?);
        register_font("sans-serif", FontStyle::Normal, bytes)
            .map_err(|_| format!("{path}: not a usable font"))
    })
    .clone()
    .map_err(|e| anyhow!(e))
}

/// Draws each figure that the runs allow as `out/<stem>.png` and `.svg`; gives, per
/// figure, why it was not drawn, if it was not.
pub fn draw_figures(
    out: &Path,
    cells: &[Cell],
    threads: &[u32],
    cpus: usize,
) -> Result<Vec<(&'static str, Option<String>)>> {
    font()?;
    let mut drawn = Vec::new();
    for (stem, chart) in report::chart_data(cells, threads, cpus) {
        let chart = match chart {
            Ok(chart) => chart,
            Err(why) => {
                drawn.push((stem, Some(why)));
                continue;
            }
        };
        let png = out.join(format!("{stem}.png"));
        let svg = out.join(format!("{stem}.svg"));
        let root = BitMapBackend::new(&png, SIZE).into_drawing_area();
        draw(&root, &chart)?;
        root.present().map_err(|e| anyhow!("{}: {e}", png.display()))?;
        let root = SVGBackend::new(&svg, SIZE).into_drawing_area();
        draw(&root, &chart)?;
        root.present().map_err(|e| anyhow!("{}: {e}", svg.display()))?;
        drawn.push((stem, None));
    }
    Ok(drawn)
}

fn colour(i: usize) -> RGBColor {
    const PALETTE: [RGBColor; 8] = [
        RGBColor(31, 119, 180),
        RGBColor(255, 127, 14),
        RGBColor(44, 160, 44),
        RGBColor(214, 39, 40),
        RGBColor(148, 103, 189),
        RGBColor(140, 86, 75),
        RGBColor(227, 119, 194),
        RGBColor(127, 127, 127),
    ];
    PALETTE[i % PALETTE.len()]
}

/// The range a set of values needs, zero included, with room above for the legend.
fn y_range<'a>(values: impl Iterator<Item = &'a f64>) -> Range<f64> {
    let finite: Vec<f64> = values.copied().filter(|v| v.is_finite()).collect();
    let lo = finite.iter().copied().fold(0.0, f64::min);
    let hi = finite.iter().copied().fold(0.0, f64::max);
    let span = (hi - lo).max(1.0);
    (if lo < 0.0 { lo - 0.05 * span } else { 0.0 })..(hi + 0.3 * span)
}

type Chart2d<'a, DB> = ChartContext<'a, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// A titled chart over `x` by `y`.
fn frame<'a, DB: DrawingBackend>(
    root: &'a DrawingArea<DB, Shift>,
    title: &str,
    x: Range<f64>,
    y: Range<f64>,
) -> Result<Chart2d<'a, DB>, DrawingAreaErrorKind<DB::ErrorType>> {
    ChartBuilder::on(root)
        .caption(title, ("sans-serif", 24))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(80)
        .build_cartesian_2d(x, y)
}

/// The series' names, top right.
fn legend<'a, DB: DrawingBackend + 'a>(
    c: &mut Chart2d<'a, DB>,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    c.configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .label_font(("sans-serif", 15))
        .draw()
}

fn draw<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, chart: &Chart) -> Result<()>
where
    DB::ErrorType: 'static,
{
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| anyhow!("drawing: {e:?}");
    root.fill(&WHITE).map_err(err)?;
    match chart {
        Chart::Bars { title, y_label, groups, series } => {
            if groups.is_empty() || series.is_empty() {
                bail!("nothing to plot for {title}");
            }
            let y = y_range(series.iter().flat_map(|s| s.1.iter()));
            let mut c = frame(root, title, 0f64..groups.len() as f64, y.clone()).map_err(err)?;
            c.configure_mesh()
                .disable_x_mesh()
                .x_labels(0)
                .y_desc(y_label.as_str())
                .label_style(("sans-serif", 15))
                .draw()
                .map_err(err)?;
            let width = 0.8 / series.len() as f64;
            for (k, (name, values)) in series.iter().enumerate() {
                let fill = colour(k).filled();
                c.draw_series(values.iter().enumerate().filter(|(_, v)| v.is_finite()).map(|(g, v)| {
                    let x0 = g as f64 + 0.1 + k as f64 * width;
                    Rectangle::new([(x0, 0.0), (x0 + width * 0.95, *v)], fill)
                }))
                .map_err(err)?
                .label(name.as_str())
                .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 14, y + 6)], fill));
            }
            // Program names under their groups.
            let base = y.start;
            for (g, name) in groups.iter().enumerate() {
                let (px, py) = c.backend_coord(&(g as f64 + 0.5, base));
                let style =
                    TextStyle::from(("sans-serif", 16).into_font()).pos(Pos::new(HPos::Center, VPos::Top));
                root.draw_text(name, &style, (px, py + 8)).map_err(err)?;
            }
            c.draw_series(std::iter::once(PathElement::new(
                vec![(0.0, 0.0), (groups.len() as f64, 0.0)],
                BLACK.stroke_width(1),
            )))
            .map_err(err)?;
            legend(&mut c).map_err(err)?;
        }
        Chart::Lines { title, x_label, y_label, series } => {
            let n = series.iter().map(|s| s.1.len()).max().unwrap_or(0);
            if n == 0 {
                bail!("nothing to plot for {title}");
            }
            let y = y_range(series.iter().flat_map(|s| s.1.iter()));
            let mut c = frame(root, title, 0.5f64..n as f64 + 0.5, y).map_err(err)?;
            c.configure_mesh()
                .x_labels(n)
                .x_label_formatter(&|x| format!("S{}", x.round() as i64))
                .x_desc(x_label.as_str())
                .y_desc(y_label.as_str())
                .label_style(("sans-serif", 15))
                .draw()
                .map_err(err)?;
            for (k, (name, values)) in series.iter().enumerate() {
                let style = colour(k).stroke_width(2);
                let points: Vec<(f64, f64)> = values
                    .iter()
                    .enumerate()
                    .filter(|(_, v)| v.is_finite())
                    .map(|(i, v)| (i as f64 + 1.0, *v))
                    .collect();
                c.draw_series(LineSeries::new(points.clone(), style))
                    .map_err(err)?
                    .label(name.as_str())
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], style));
                c.draw_series(points.into_iter().map(|p| Circle::new(p, 3, colour(k).filled())))
                    .map_err(err)?;
            }
            legend(&mut c).map_err(err)?;
        }
    }
    Ok(())
}
