//! Line plots of values over time, as PNG or SVG (by the file's extension), drawn with
//! plotters.
//!
//! Text needs a TrueType font to be measured (and, in a PNG, drawn): DejaVu Sans or
//! Liberation Sans where Debian and Arch install them. Without one, the plot is drawn
//! without its title, axis labels and legend, and a note says so.

use std::path::Path;

use anyhow::{Result, anyhow, bail};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::{FontStyle, register_font};

/// One line: its name (in the legend) and its points, x ascending.
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

const SIZE: (u32, u32) = (960, 540);

/// Where a sans-serif TrueType font may be.
const FONT_FILES: [&str; 3] = [
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
];

/// A picture that can be drawn on any plotters backend.
pub trait Picture {
    /// The picture's size in pixels.
    fn size(&self) -> (u32, u32) {
        SIZE
    }

    /// Draws it on `root`; `with_text` is false when no font was found.
    fn draw<B: DrawingBackend>(
        &self,
        root: &DrawingArea<B, Shift>,
        with_text: bool,
    ) -> Result<(), DrawingAreaErrorKind<B::ErrorType>>;
}

/// Draws `picture` into `path`, as PNG or SVG by the file's extension.
pub fn render(path: &Path, picture: &impl Picture) -> Result<()> {
    let with_text = register_sans_serif();
    if !with_text {
        eprintln!(
            "sdt: note: no TrueType font ({}; apt-get install fonts-dejavu-core): {} has no text",
            FONT_FILES.join(", "),
            path.display()
        );
    }
    let fail = |e: &dyn std::fmt::Display| anyhow!("drawing {}: {e}", path.display());
    match path.extension().and_then(|e| e.to_str()) {
        Some("svg") => {
            let root = SVGBackend::new(path, picture.size()).into_drawing_area();
            picture.draw(&root, with_text).map_err(|e| fail(&e))?;
            root.present().map_err(|e| fail(&e))
        }
        Some("png") => {
            let root = BitMapBackend::new(path, picture.size()).into_drawing_area();
            picture.draw(&root, with_text).map_err(|e| fail(&e))?;
            root.present().map_err(|e| fail(&e))
        }
        _ => bail!("{}: the picture's file name must end in .svg or .png", path.display()),
    }
}

/// Draws `series` as lines with points into `path` (`.png` or `.svg`), titled `title`.
pub fn lines(path: &Path, title: &str, x_label: &str, series: &[Series]) -> Result<()> {
    render(path, &LinePlot { title, x_label, series })
}

/// Lines with points over a shared x axis.
struct LinePlot<'a> {
    title: &'a str,
    x_label: &'a str,
    series: &'a [Series],
}

/// Registers the first font of [`FONT_FILES`] there is as `sans-serif`; false if none.
fn register_sans_serif() -> bool {
    FONT_FILES.iter().any(|file| {
        std::fs::read(file)
            .is_ok_and(|bytes| register_font("sans-serif", FontStyle::Normal, Vec::leak(bytes)).is_ok())
    })
}

impl Picture for LinePlot<'_> {
    fn draw<B: DrawingBackend>(
        &self,
        root: &DrawingArea<B, Shift>,
        with_text: bool,
    ) -> Result<(), DrawingAreaErrorKind<B::ErrorType>> {
        let LinePlot { title, x_label, series } = *self;
        root.fill(&WHITE)?;
        let points = || series.iter().flat_map(|s| &s.points);
        let (x_min, x_max) = span(points().map(|p| p.0));
        let (y_min, y_max) = span(points().map(|p| p.1));
        let mut builder = ChartBuilder::on(root);
        builder.margin(20);
        if with_text {
            builder.caption(title, ("sans-serif", 22)).x_label_area_size(40).y_label_area_size(70);
        }
        let mut chart = builder.build_cartesian_2d(x_min..x_max, y_min..y_max)?;
        let mut mesh = chart.configure_mesh();
        if with_text {
            mesh.x_desc(x_label).label_style(("sans-serif", 14));
        } else {
            mesh.disable_x_axis().disable_y_axis();
        }
        mesh.draw()?;
        for (i, s) in series.iter().enumerate() {
            let color = Palette99::pick(i).to_rgba();
            let line = chart.draw_series(LineSeries::new(s.points.iter().copied(), color.stroke_width(2)))?;
            if with_text {
                line.label(s.name.clone())
                    .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], color.stroke_width(2)));
            }
            chart.draw_series(s.points.iter().map(|&p| Circle::new(p, 3, color.filled())))?;
        }
        if with_text && series.len() > 1 {
            chart.configure_series_labels().background_style(WHITE.mix(0.8)).border_style(BLACK).draw()?;
        }
        Ok(())
    }
}

/// The least and greatest of `values`, widened to a non-empty range.
fn span(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (min, max) = values.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| (lo.min(v), hi.max(v)));
    let pad = ((max - min) * 0.05).max(max.abs() * 0.05).max(1e-9);
    (min - pad, max + pad)
}
