//! The exporter's thread: the one place telemetry leaves the process,
//! off every path a Tick or a call waits on. It batches spans, exports
//! them and the metrics on their schedules, counts spans lost with a
//! failed request as dropped, and warns at a bounded rate.

use super::endpoint::{Endpoint, OtlpPost};
use super::wire::{metrics_body, traces_body};
use super::{Inner, SpanRecord};
use crate::limits::{OTEL_BATCH_SPANS, OTEL_WARN_INTERVAL};
use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::Instant;
use tickbox_protocol::text;

/// The name of the exporter's thread (a test looks for it in
/// `/proc/PID/task`).
pub const THREAD_NAME: &str = "tickbox-otlp";

/// The exporter's thread: batches spans, exports them and the metrics,
/// and warns about failures at a bounded rate.
pub(super) struct Exporter {
    inner: Arc<Inner>,
    post: Box<dyn OtlpPost>,
    warned: Option<Instant>,
    /// Failures since the last warning.
    failed: u64,
}

impl Exporter {
    pub(super) fn new(inner: Arc<Inner>, post: Box<dyn OtlpPost>) -> Exporter {
        Exporter {
            inner,
            post,
            warned: None,
            failed: 0,
        }
    }

    pub(super) fn run(mut self, rx: Receiver<SpanRecord>) {
        let config = self.inner.config.clone();
        let mut batch: Vec<SpanRecord> = Vec::new();
        let mut spans_due = Instant::now() + config.span_delay;
        let mut metrics_due = Instant::now() + config.metric_interval;
        loop {
            let now = Instant::now();
            let mut next = spans_due;
            if config.metrics.is_some() {
                next = next.min(metrics_due);
            }
            match rx.recv_timeout(next.saturating_duration_since(now)) {
                Ok(span) => {
                    batch.push(span);
                    if batch.len() >= OTEL_BATCH_SPANS {
                        self.send_spans(&mut batch);
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => {
                    self.send_spans(&mut batch);
                    self.send_metrics();
                    return;
                }
            }
            let now = Instant::now();
            if now >= spans_due {
                self.send_spans(&mut batch);
                spans_due = now + config.span_delay;
            }
            if config.metrics.is_some() && now >= metrics_due {
                self.send_metrics();
                metrics_due = now + config.metric_interval;
            }
        }
    }

    fn send_spans(&mut self, batch: &mut Vec<SpanRecord>) {
        let Some(to) = self.inner.config.traces.clone() else {
            batch.clear();
            return;
        };
        if batch.is_empty() {
            return;
        }
        let body = traces_body(&self.inner.config, batch);
        let n = batch.len();
        batch.clear();
        let result = self.post.post(
            &to,
            &self.inner.config.trace_headers,
            body,
            self.inner.config.timeout,
        );
        if let Err(e) = result {
            // The spans are lost with the request: counted as dropped.
            self.inner.dropped.fetch_add(n as u64, Ordering::Relaxed);
            self.warn(&to, &e);
        }
    }

    fn send_metrics(&mut self) {
        let Some(to) = self.inner.config.metrics.clone() else {
            return;
        };
        let body = metrics_body(&self.inner);
        let result = self.post.post(
            &to,
            &self.inner.config.metric_headers,
            body,
            self.inner.config.timeout,
        );
        if let Err(e) = result {
            self.warn(&to, &e);
        }
    }

    /// One warning now, then at most one per [`OTEL_WARN_INTERVAL`].
    fn warn(&mut self, to: &Endpoint, why: &str) {
        self.failed += 1;
        if self
            .warned
            .is_some_and(|w| w.elapsed() < OTEL_WARN_INTERVAL)
        {
            return;
        }
        tracing::warn!(
            endpoint = %text::escape(&to.url),
            failed_exports = self.failed,
            dropped_spans = self.inner.dropped.load(Ordering::Relaxed),
            "cannot export telemetry over OTLP: {}; tickbox keeps serving and tries again (at most one such warning every {}s)",
            text::escape(why),
            OTEL_WARN_INTERVAL.as_secs()
        );
        self.warned = Some(Instant::now());
        self.failed = 0;
    }
}
