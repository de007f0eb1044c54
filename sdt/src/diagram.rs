//! The time–process diagram of a job (`sdt diagram`): a line per rank, time to the right,
//! an arrow per message from its send to its receive, the ranks' snapshots as ticks, each
//! global snapshot as a line joining its ranks' ticks (green when consistent, red when
//! not), and `sdt check`'s findings circled in red.

use anyhow::Result;
use plotters::coord::Shift;
use plotters::prelude::*;
use sdt_history::check::Finding;
use sdt_history::cut::messages;
use sdt_history::trace::Mark;
use sdt_history::{EventKind, History};

use crate::cli::DiagramOpt;
use crate::job::{self, Job};
use crate::plot::{self, Picture};
use crate::select;

/// `sdt diagram -o FILE`.
pub fn diagram(opt: DiagramOpt) -> Result<()> {
    let store = select::open_store(&opt.store)?;
    let job = Job::open(&store, &opt.run)?;
    let (history, clocks) = job::history_with_clocks(&job)?;
    let cuts: Vec<GlobalCut> = job
        .global_snapshots(Some((&history, &clocks)))?
        .into_iter()
        .map(|g| GlobalCut {
            consistent: g.verdict.as_ref().is_some_and(|v| v.consistent),
            members: g.members.iter().map(|(rank, name, _)| format!("{rank}:{name}")).collect(),
            name: g.name,
        })
        .collect();
    let findings = sdt_history::check::check(&history);
    let marks = job.marks()?;
    plot::render(
        &opt.output,
        &Diagram { history: &history, marks: &marks, cuts: &cuts, findings: &findings },
    )?;
    eprintln!("sdt: wrote {}", opt.output.display());
    Ok(())
}

/// A global snapshot to draw: its name, its ranks' snapshots (as marks name them), its
/// verdict.
pub struct GlobalCut {
    pub name: String,
    pub members: Vec<String>,
    pub consistent: bool,
}

/// Everything the diagram shows.
pub struct Diagram<'a> {
    pub history: &'a History,
    pub marks: &'a [Mark],
    pub cuts: &'a [GlobalCut],
    pub findings: &'a [Finding],
}

const WIDTH: u32 = 1200;
const ROW: u32 = 90;
const MESSAGE: RGBColor = RGBColor(40, 90, 200);
const CONSISTENT: RGBColor = RGBColor(20, 150, 60);
const INCONSISTENT: RGBColor = RED;

impl Diagram<'_> {
    fn span_us(&self) -> f64 {
        let history = self.history;
        let end = history
            .ranks
            .iter()
            .filter_map(|rh| rh.events.last().and_then(|e| history.time_us(rh.rank, e.seq)))
            .fold(0.0, f64::max);
        end.max(1.0)
    }
}

impl Picture for Diagram<'_> {
    fn size(&self) -> (u32, u32) {
        (WIDTH, 100 + ROW * self.history.ranks.len().max(1) as u32)
    }

    fn draw<B: DrawingBackend>(
        &self,
        root: &DrawingArea<B, Shift>,
        with_text: bool,
    ) -> Result<(), DrawingAreaErrorKind<B::ErrorType>> {
        root.fill(&WHITE)?;
        let history = self.history;
        let n = history.ranks.len().max(1) as f64;
        let end_ms = self.span_us() * 1.04 / 1000.0;
        let mut builder = ChartBuilder::on(root);
        builder.margin(20);
        if with_text {
            builder
                .caption("time–process diagram", ("sans-serif", 20))
                .x_label_area_size(35)
                .y_label_area_size(70);
        }
        // Rank 0 at the top: y = -rank.
        let mut chart = builder.build_cartesian_2d(0.0..end_ms, (-n + 0.5)..0.6)?;
        let mut mesh = chart.configure_mesh();
        mesh.disable_y_mesh().y_labels(0).x_desc("time since the first MPI_Init (ms)");
        if with_text {
            mesh.label_style(("sans-serif", 13));
        } else {
            mesh.disable_x_axis().disable_y_axis();
        }
        mesh.draw()?;
        let at = |rank: u32, us: f64| (us / 1000.0, -f64::from(rank));
        for rh in &history.ranks {
            let start = history.start_offset_us(rh);
            let end = rh.events.last().and_then(|e| history.time_us(rh.rank, e.seq)).unwrap_or(start);
            chart.draw_series([PathElement::new(
                [at(rh.rank, start), at(rh.rank, end)],
                BLACK.stroke_width(2),
            )])?;
            if with_text {
                // In the margin left of the chart, level with the rank's line.
                let (x, y) = chart.plotting_area().map_coordinate(&(0.0, -f64::from(rh.rank)));
                root.draw(&Text::new(format!("rank {}", rh.rank), (x - 62, y - 7), ("sans-serif", 14)))?;
            }
            let points =
                rh.events.iter().filter(|e| !matches!(e.kind, EventKind::Init | EventKind::Finalize));
            chart.draw_series(points.filter_map(|e| {
                history.time_us(rh.rank, e.seq).map(|t| Circle::new(at(rh.rank, t), 2, BLACK.filled()))
            }))?;
        }
        for m in messages(history) {
            let Some(from) = history.time_us(m.send.0, m.send.1).map(|t| at(m.send.0, t)) else { continue };
            let to = match m.recv {
                Some((rank, seq)) => history.time_us(rank, seq).map(|t| at(rank, t)),
                // Never received: a short red stub towards its destination.
                None => Some((from.0 + end_ms * 0.02, from.1 + (-f64::from(m.to) - from.1) * 0.3)),
            };
            let Some(to) = to else { continue };
            let color = if m.recv.is_some() { MESSAGE } else { RED };
            chart.draw_series([PathElement::new([from, to], color.stroke_width(1))])?;
            let area = chart.plotting_area();
            root.draw(&arrow_head(area.map_coordinate(&from), area.map_coordinate(&to), color))?;
        }
        for mark in self.marks {
            let (x, y) = at(mark.rank, mark.time_us(history));
            chart.draw_series([PathElement::new([(x, y - 0.18), (x, y + 0.18)], BLACK.stroke_width(3))])?;
            if with_text {
                chart.draw_series([Text::new(mark.name.clone(), (x, y + 0.32), ("sans-serif", 12))])?;
            }
        }
        for cut in self.cuts {
            let color = if cut.consistent { CONSISTENT } else { INCONSISTENT };
            let points: Vec<(f64, f64)> = cut
                .members
                .iter()
                .filter_map(|name| self.marks.iter().find(|m| &m.name == name))
                .map(|m| at(m.rank, m.time_us(history)))
                .collect();
            chart.draw_series([PathElement::new(points.clone(), color.stroke_width(2))])?;
            if with_text && let Some(&(x, _)) = points.first() {
                chart.draw_series([Text::new(
                    cut.name.clone(),
                    (x, 0.5),
                    ("sans-serif", 14).into_font().color(&color),
                )])?;
            }
        }
        for f in self.findings {
            let t = match f.seq {
                Some(seq) => history.time_us(f.rank, seq),
                None => history.ranks.get(f.rank as usize).map(|rh| {
                    rh.events.last().and_then(|e| history.time_us(f.rank, e.seq)).unwrap_or(0.0)
                        + self.span_us() * 0.01
                }),
            };
            let Some(t) = t else { continue };
            chart.draw_series([Circle::new(at(f.rank, t), 9, RED.stroke_width(2))])?;
            if with_text {
                let (x, y) = at(f.rank, t);
                chart.draw_series([Text::new(
                    f.kind.name(),
                    (x, y - 0.3),
                    ("sans-serif", 12).into_font().color(&RED),
                )])?;
            }
        }
        Ok(())
    }
}

/// A filled arrow head at `b`, pointing from `a`.
fn arrow_head(a: (i32, i32), b: (i32, i32), color: RGBColor) -> Polygon<(i32, i32)> {
    let (dx, dy) = (f64::from(b.0 - a.0), f64::from(b.1 - a.1));
    let len = dx.hypot(dy).max(1.0);
    let (ux, uy) = (dx / len, dy / len);
    let (size, half) = (9.0, 4.0);
    let base = (f64::from(b.0) - ux * size, f64::from(b.1) - uy * size);
    let left = ((base.0 - uy * half) as i32, (base.1 + ux * half) as i32);
    let right = ((base.0 + uy * half) as i32, (base.1 - ux * half) as i32);
    Polygon::new(vec![b, left, right], color.filled())
}
