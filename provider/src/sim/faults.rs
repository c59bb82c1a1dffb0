//! Fault injection on the Graph surface (`PUT /_sim/faults`): added latency, answers held after
//! the request was handled, 5xx answers, hangs, and queued errors for a given number or WABA.

use super::node::graph_error;
use super::Inner;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::Response;
use std::sync::Arc;
use std::time::Duration;

/// The node (second path segment: `/{version}/{node}/…`) a Graph request addresses.
fn node_of(path: &str) -> Option<&str> {
    path.trim_start_matches('/').split('/').nth(1)
}

/// Applies the configured faults before the Graph handler runs.
pub(crate) async fn inject(State(inner): State<Arc<Inner>>, req: Request, next: Next) -> Response {
    let node = node_of(req.uri().path()).unwrap_or_default().to_string();
    let (delay, action, answer_delay) = {
        let mut f = inner.faults.lock().expect("faults lock");
        let answer_delay = f.answer_delay_ms.map(Duration::from_millis);
        let delay = f.latency_ms.map(|l| {
            let u = inner.draw();
            let ms = if u < 0.5 {
                l.p50 as f64 * (u / 0.5)
            } else if u < 0.99 {
                l.p50 as f64 + (l.p99.saturating_sub(l.p50)) as f64 * ((u - 0.5) / 0.49)
            } else {
                l.p99 as f64 * (1.0 + (u - 0.99) * 10.0)
            };
            Duration::from_millis(ms as u64)
        });
        let waba_of_node = inner.numbers.get(&node).map(|n| n.waba_id.clone());
        let edge = req.uri().path().rsplit('/').next().unwrap_or_default();
        let queued = f.next_errors.iter().position(|e| {
            e.edge.as_deref().is_none_or(|x| x == edge)
                && match (&e.phone_number_id, &e.waba_id) {
                    (Some(p), _) => *p == node,
                    (None, Some(w)) => *w == node || waba_of_node.as_deref() == Some(w.as_str()),
                    (None, None) => true,
                }
        });
        let action = if let Some(i) = queued {
            let code = f.next_errors[i].code;
            f.next_errors[i].count = f.next_errors[i].count.saturating_sub(1);
            if f.next_errors[i].count == 0 {
                f.next_errors.remove(i);
            }
            Some(Action::Error(code))
        } else if f.share_timeout > 0.0 && inner.draw() < f.share_timeout {
            Some(Action::Hang(Duration::from_millis(
                f.timeout_ms.unwrap_or(30_000),
            )))
        } else if f.share_5xx > 0.0 && inner.draw() < f.share_5xx {
            Some(Action::Error(2))
        } else {
            None
        };
        if action.is_some() {
            inner
                .injected_faults
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        (delay, action, answer_delay)
    };
    if let Some(d) = delay {
        tokio::time::sleep(d).await;
    }
    match action {
        None => {
            let answer = next.run(req).await;
            if let Some(d) = answer_delay {
                tokio::time::sleep(d).await;
            }
            answer
        }
        Some(Action::Hang(d)) => {
            tokio::time::sleep(d).await;
            graph_error(
                StatusCode::GATEWAY_TIMEOUT,
                2,
                "Service temporarily unavailable",
                None,
                None,
            )
        }
        Some(Action::Error(2)) => {
            let mut r = graph_error(
                StatusCode::INTERNAL_SERVER_ERROR,
                2,
                "An unexpected error has occurred. Please retry your request later.",
                None,
                None,
            );
            *r.status_mut() = StatusCode::INTERNAL_SERVER_ERROR;
            r
        }
        Some(Action::Error(code)) => {
            let (status, message, details) = super::errors::canned(code);
            graph_error(status, code, &message, details, None)
        }
    }
}

enum Action {
    Error(i64),
    Hang(Duration),
}
