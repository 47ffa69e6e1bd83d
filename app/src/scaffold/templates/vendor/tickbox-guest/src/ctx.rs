//! What a handler may ask of the SDK (timers, the terminal size,
//! quitting, a redraw): the `Ctx` every tool and event handler gets.
//!
//! Its own module because the catalog's handlers take it and the dispatcher
//! owns it: here, neither imports the other for it (issue 40).

use std::time::{Duration, Instant};

/// Timers never fire more often than this, so a mistaken zero period cannot
/// spin the Tick.
pub const MIN_TIMER_PERIOD: Duration = Duration::from_millis(10);

/// Names a timer set through [`Ctx::every`] or [`Ctx::after`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TimerId(u64);

pub(crate) struct Timer {
    pub(crate) id: TimerId,
    pub(crate) due: Instant,
    pub(crate) period: Option<Duration>,
}

/// What a handler may ask of the SDK: timers, the terminal size, quitting.
pub struct Ctx {
    pub(crate) timers: Vec<Timer>,
    next_timer: u64,
    pub(crate) quit: bool,
    pub(crate) size: (u16, u16),
    pub(crate) redraw: bool,
}

impl Ctx {
    pub(crate) fn new(size: (u16, u16)) -> Ctx {
        Ctx {
            timers: Vec::new(),
            next_timer: 1,
            quit: false,
            size,
            redraw: false,
        }
    }

    fn add_timer(&mut self, delay: Duration, period: Option<Duration>) -> TimerId {
        let id = TimerId(self.next_timer);
        self.next_timer += 1;
        self.timers.push(Timer {
            id,
            due: Instant::now() + delay,
            period,
        });
        id
    }

    /// Calls [`Tick::on_timer`](crate::Tick::on_timer) every `period` (at least 10 ms) until
    /// cancelled. Ticks are not queued up: a Tick that falls behind gets one
    /// call, not a burst.
    pub fn every(&mut self, period: Duration) -> TimerId {
        let period = period.max(MIN_TIMER_PERIOD);
        self.add_timer(period, Some(period))
    }

    /// Calls [`Tick::on_timer`](crate::Tick::on_timer) once after `delay`.
    pub fn after(&mut self, delay: Duration) -> TimerId {
        self.add_timer(delay, None)
    }

    /// Stops a timer; unknown or finished timers are ignored.
    pub fn cancel(&mut self, timer: TimerId) {
        self.timers.retain(|t| t.id != timer);
    }

    /// Ends the Tick after the current event. The host sees the session end.
    pub fn quit(&mut self) {
        self.quit = true;
    }

    /// The view terminal's size as (columns, rows).
    pub fn size(&self) -> (u16, u16) {
        self.size
    }

    /// Redraws the view after this event. Only a read-only tool needs it:
    /// everything else is followed by a redraw anyway, while after a
    /// read-only call the SDK redraws only when the state or the catalog
    /// changed. A read-only tool that changes only what the view shows (a
    /// highlight, a scroll position) calls this.
    pub fn redraw(&mut self) {
        self.redraw = true;
    }
}
