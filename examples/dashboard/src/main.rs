//! A job dashboard: a ratatui view over live state, usable by keyboard,
//! with jobs that outlive a tool call.
//!
//! `start_job` returns at once with the job's id; the job then advances on a
//! timer and reports progress and completion through `tick/update`. That is
//! how a Tick runs work longer than the host's 60-second call timeout
//! (§7.3): the call never waits for the work.
//!
//! While a job runs, the catalog also offers `cancel_job`; the SDK notices
//! the catalog changed and gives it a new revision, so a call approved
//! against the old catalog is refused (-32004) instead of surprising anyone.
//!
//! Keys: `n` starts a 5-second job, `↑`/`↓` select a job, `c` cancels the
//! selected one. Selection is presentation, so it never becomes an update.

use std::time::Duration;
use tickbox_guest::prelude::*;

/// How often running jobs advance.
const STEP: Duration = Duration::from_millis(100);
/// Finished jobs kept in state.
const KEEP_DONE: usize = 10;

#[derive(Serialize, Clone, PartialEq)]
#[serde(rename_all = "snake_case")]
enum Status {
    Running,
    Done,
    Cancelled,
}

#[derive(Serialize, Clone)]
struct Job {
    id: u64,
    name: String,
    /// Whole percent, so a long job updates at most 100 times.
    progress: u8,
    status: Status,
    #[serde(skip)]
    steps_done: u64,
    #[serde(skip)]
    steps_total: u64,
}

#[derive(Default)]
struct Dashboard {
    jobs: Vec<Job>,
    next_id: u64,
    timer: Option<TimerId>,
    selected: usize,
}

#[derive(Deserialize, JsonSchema)]
struct StartJob {
    /// A short label shown in the dashboard.
    name: String,
    /// How long the job takes, 1 to 3600 seconds: longer than a call may
    /// wait, which is the point.
    seconds: u64,
}

#[derive(Deserialize, JsonSchema)]
struct JobId {
    /// The id `start_job` returned.
    id: u64,
}

impl Dashboard {
    fn running(&self) -> bool {
        self.jobs.iter().any(|j| j.status == Status::Running)
    }

    fn start(&mut self, name: String, seconds: u64, ctx: &mut Ctx) -> u64 {
        self.next_id += 1;
        let steps = seconds * 1000 / STEP.as_millis() as u64;
        self.jobs.push(Job {
            id: self.next_id,
            name,
            progress: 0,
            status: Status::Running,
            steps_done: 0,
            steps_total: steps.max(1),
        });
        // One timer drives every job; it runs only while there is work.
        if self.timer.is_none() {
            self.timer = Some(ctx.every(STEP));
        }
        self.next_id
    }

    fn cancel(&mut self, id: u64) -> bool {
        match self
            .jobs
            .iter_mut()
            .find(|j| j.id == id && j.status == Status::Running)
        {
            Some(job) => {
                job.status = Status::Cancelled;
                true
            }
            None => false,
        }
    }

    fn start_job(&mut self, a: StartJob, ctx: &mut Ctx) -> Result<Value, ToolError> {
        if a.name.trim().is_empty() || a.name.len() > 40 {
            return Err(ToolError::rejected("name must be 1 to 40 characters"));
        }
        if !(1..=3600).contains(&a.seconds) {
            return Err(ToolError::rejected("seconds must be between 1 and 3600"));
        }
        let id = self.start(a.name, a.seconds, ctx);
        // Returns immediately: progress and the outcome arrive as updates.
        Ok(json!({ "id": id, "status": "running" }))
    }

    fn cancel_job(&mut self, a: JobId, _: &mut Ctx) -> Result<Value, ToolError> {
        if self.cancel(a.id) {
            Ok(json!({ "id": a.id, "status": "cancelled" }))
        } else {
            Err(ToolError::rejected(format!("no running job {}", a.id)))
        }
    }

    fn list(&mut self, _: NoArgs, _: &mut Ctx) -> Result<Value, ToolError> {
        Ok(json!({ "jobs": self.jobs }))
    }
}

impl Tick for Dashboard {
    const KIND: &'static str = "example.dashboard";
    const TITLE: &'static str = "Dashboard";
    const DESCRIPTION: &'static str =
        "Background jobs with live progress; start them by tool or keyboard.";
    const RECOVER_WITH: Option<&'static str> = Some("jobs");

    fn state(&self) -> impl Serialize {
        json!({
            "running": self.jobs.iter().filter(|j| j.status == Status::Running).count(),
            "jobs": self.jobs,
        })
    }

    fn tools(&self, tools: &mut Tools<Self>) {
        tools
            .add(
                "start_job",
                "Start a background job; returns its id at once, progress arrives as updates.",
                Effect::Mutates,
                Self::start_job,
            )
            .add("jobs", "List all jobs.", Effect::ReadOnly, Self::list);
        // Offered only while it can do something: the catalog follows state.
        if self.running() {
            tools.add(
                "cancel_job",
                "Cancel a running job.",
                Effect::Mutates,
                Self::cancel_job,
            );
        }
    }

    fn on_timer(&mut self, timer: TimerId, ctx: &mut Ctx) {
        for job in self.jobs.iter_mut().filter(|j| j.status == Status::Running) {
            job.steps_done += 1;
            job.progress = (job.steps_done * 100 / job.steps_total).min(100) as u8;
            if job.steps_done >= job.steps_total {
                job.status = Status::Done;
            }
        }
        // Forget old finished jobs so state stays small (§6.4).
        while self
            .jobs
            .iter()
            .filter(|j| j.status != Status::Running)
            .count()
            > KEEP_DONE
        {
            if let Some(i) = self.jobs.iter().position(|j| j.status != Status::Running) {
                self.jobs.remove(i);
            }
        }
        if !self.running() {
            ctx.cancel(timer);
            self.timer = None;
        }
        self.selected = self.selected.min(self.jobs.len().saturating_sub(1));
    }

    fn on_key(&mut self, key: Key, ctx: &mut Ctx) {
        match key {
            Key::Char('n') => {
                let name = format!("job {}", self.next_id + 1);
                self.start(name, 5, ctx);
            }
            Key::Char('c') => {
                if let Some(id) = self.jobs.get(self.selected).map(|j| j.id) {
                    self.cancel(id);
                }
            }
            Key::Up => self.selected = self.selected.saturating_sub(1),
            Key::Down => self.selected = (self.selected + 1).min(self.jobs.len().saturating_sub(1)),
            _ => {}
        }
    }

    fn view(&self, frame: &mut Frame) {
        let [list, help] =
            Layout::vertical([Constraint::Min(3), Constraint::Length(1)]).areas(frame.area());
        let items: Vec<ListItem> = self
            .jobs
            .iter()
            .enumerate()
            .map(|(i, j)| {
                let filled = j.progress as usize / 5;
                let bar = format!("{}{}", "█".repeat(filled), "░".repeat(20 - filled));
                let status = match j.status {
                    Status::Running => "running".yellow(),
                    Status::Done => "done".green(),
                    Status::Cancelled => "cancelled".red(),
                };
                let line = Line::from(vec![
                    format!("#{:<3} {:<20} {bar} {:>3}% ", j.id, j.name, j.progress).into(),
                    status,
                ]);
                let item = ListItem::new(line);
                if i == self.selected {
                    item.style(Style::default().reversed())
                } else {
                    item
                }
            })
            .collect();
        let title = format!(
            " Jobs ({} running) ",
            self.jobs
                .iter()
                .filter(|j| j.status == Status::Running)
                .count()
        );
        frame.render_widget(
            List::new(items).block(Block::default().borders(Borders::ALL).title(title)),
            list,
        );
        frame.render_widget(
            Paragraph::new("[n] new job  [↑/↓] select  [c] cancel".dim()),
            help,
        );
    }
}

tickbox_guest::main!(Dashboard);
