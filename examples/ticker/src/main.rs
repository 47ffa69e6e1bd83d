//! A Tick that changes on its own: a timer samples a (made-up) price every
//! interval, and each sample is a business change, so it becomes a
//! `tick/update` with nobody calling anything.
//!
//! The samples are a time series in state (`/samples`, newest last), so a
//! host that trims state keeps the newest end; `samples` returns more of
//! them and is the `recover_with` tool.

use std::time::Duration;
use tickbox_guest::prelude::*;

/// Samples kept for `samples`; the state carries the last `IN_STATE`.
const KEEP: usize = 512;
const IN_STATE: usize = 20;

struct Ticker {
    interval: Duration,
    timer: Option<TimerId>,
    price: i64,
    n: u64,
    /// A tiny linear congruential generator: deterministic, no dependency.
    rng: u64,
    samples: Vec<Sample>,
}

#[derive(Serialize, Clone)]
struct Sample {
    n: u64,
    price: i64,
}

impl Default for Ticker {
    fn default() -> Self {
        Ticker {
            interval: Duration::from_millis(250),
            timer: None,
            price: 10_000,
            n: 0,
            rng: 0x2545_f491_4f6c_dd1d,
            samples: Vec::new(),
        }
    }
}

#[derive(Deserialize, JsonSchema)]
struct SetInterval {
    /// Milliseconds between samples (50 to 60000).
    ms: u64,
}

#[derive(Deserialize, JsonSchema)]
struct Samples {
    /// How many of the newest samples to return (at most 512).
    last: Option<usize>,
}

impl Ticker {
    fn restart(&mut self, ctx: &mut Ctx) {
        if let Some(t) = self.timer.take() {
            ctx.cancel(t);
        }
        self.timer = Some(ctx.every(self.interval));
    }

    fn set_interval(&mut self, a: SetInterval, ctx: &mut Ctx) -> Result<Value, ToolError> {
        if !(50..=60_000).contains(&a.ms) {
            return Err(ToolError::rejected("ms must be between 50 and 60000"));
        }
        self.interval = Duration::from_millis(a.ms);
        self.restart(ctx);
        Ok(json!({ "interval_ms": a.ms }))
    }

    fn samples(&mut self, a: Samples, _: &mut Ctx) -> Result<Value, ToolError> {
        let last = a.last.unwrap_or(KEEP).min(KEEP);
        let start = self.samples.len().saturating_sub(last);
        Ok(json!({ "samples": &self.samples[start..] }))
    }
}

impl Tick for Ticker {
    const KIND: &'static str = "example.ticker";
    const TITLE: &'static str = "Ticker";
    const DESCRIPTION: &'static str =
        "Samples a simulated price on a timer; every sample is an update.";
    const RECOVER_WITH: Option<&'static str> = Some("samples");
    const SERIES: &'static [Series] = &[Series::newest_last("/samples")];

    fn state(&self) -> impl Serialize {
        let start = self.samples.len().saturating_sub(IN_STATE);
        json!({
            "price": self.price,
            "interval_ms": self.interval.as_millis() as u64,
            "samples": &self.samples[start..],
        })
    }

    fn tools(&self, tools: &mut Tools<Self>) {
        tools
            .add(
                "set_interval",
                "Change how often the price is sampled.",
                Effect::Mutates,
                Self::set_interval,
            )
            .add(
                "samples",
                "Read up to the last 512 samples, oldest first.",
                Effect::ReadOnly,
                Self::samples,
            );
    }

    fn on_start(&mut self, ctx: &mut Ctx) {
        self.restart(ctx);
    }

    fn on_timer(&mut self, _: TimerId, _: &mut Ctx) {
        self.rng = self
            .rng
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        self.price += (self.rng >> 60) as i64 - 7;
        self.n += 1;
        self.samples.push(Sample {
            n: self.n,
            price: self.price,
        });
        if self.samples.len() > KEEP {
            self.samples.remove(0);
        }
    }

    fn view(&self, frame: &mut Frame) {
        let [top, chart] =
            Layout::vertical([Constraint::Length(3), Constraint::Min(3)]).areas(frame.area());
        let header = format!(
            "price {}   sample #{}   every {} ms",
            self.price,
            self.n,
            self.interval.as_millis()
        );
        frame.render_widget(
            Paragraph::new(header).block(Block::default().borders(Borders::ALL).title(" Ticker ")),
            top,
        );
        let low = self.samples.iter().map(|s| s.price).min().unwrap_or(0);
        let data: Vec<u64> = self
            .samples
            .iter()
            .map(|s| (s.price - low) as u64 + 1)
            .collect();
        let skip = data
            .len()
            .saturating_sub(chart.width.saturating_sub(2) as usize);
        frame.render_widget(
            Sparkline::default()
                .block(Block::default().borders(Borders::ALL).title(" recent "))
                .data(&data[skip..]),
            chart,
        );
    }
}

tickbox_guest::main!(Ticker);
