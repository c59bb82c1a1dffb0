//! The simulated contact-hygiene service under `/hygiene/v1` (the wire of
//! [`crate::hygiene`]; issue 20). Deterministic: a number that does not parse (10–15 digits
//! once `+`, spaces, dots, dashes and parentheses are dropped) is `invalid` (`formato_invalido`),
//! a number marked with `POST /_sim/hygiene/invalid {numbers}` is `invalid` (`sem_whatsapp`),
//! every other is `valid`. A job takes `delay_ms` (`PUT /_sim/hygiene/faults`, default 0) to
//! finish, its `done` growing with the time; `fail_next` makes the next jobs fail halfway;
//! `unavailable` answers 503 to every call. `GET /_sim/hygiene/jobs` lists the jobs (tests).
//! A job created with a `callback_url` is announced there when it ends (signed; retried up to
//! six times over ~9 s while the answer is not 2xx).
//! Calls need `Authorization: Bearer <key>`: the simulator's `hygiene_api_key` when set, any
//! non-empty key otherwise.

use super::{now_ms, Inner};
use crate::hygiene::{JobProgress, JobStatus, ResultRow, ResultsPage, Validity};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use axum::{Json, Router};
use dashmap::DashMap;
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::sync::{Arc, Mutex};

/// Most numbers in one job.
pub const MAX_JOB_NUMBERS: usize = 200_000;

/// Faults of the hygiene service (`PUT /_sim/hygiene/faults`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HygieneFaults {
    /// How long a job takes to finish, ms.
    #[serde(default)]
    pub delay_ms: u64,
    /// How many of the next jobs fail (halfway through their delay).
    #[serde(default)]
    pub fail_next: u32,
    /// Every call answers 503.
    #[serde(default)]
    pub unavailable: bool,
}

/// A job.
#[derive(Debug, Clone)]
pub(crate) struct Job {
    numbers: Arc<Vec<String>>,
    created_at: i64,
    delay_ms: u64,
    fails: bool,
}

impl Job {
    fn progress(&self, id: &str, now: i64) -> JobProgress {
        let total = self.numbers.len() as u64;
        let elapsed = (now - self.created_at).max(0) as u64;
        if self.fails && elapsed >= self.delay_ms / 2 {
            return JobProgress {
                job_id: id.into(),
                status: JobStatus::Failed,
                done: total / 2,
                total,
                error: Some("falha simulada do serviço de higienização".into()),
            };
        }
        if elapsed >= self.delay_ms {
            return JobProgress {
                job_id: id.into(),
                status: JobStatus::Done,
                done: total,
                total,
                error: None,
            };
        }
        let done = total * elapsed / self.delay_ms.max(1);
        JobProgress {
            job_id: id.into(),
            status: if done == 0 {
                JobStatus::Queued
            } else {
                JobStatus::Running
            },
            done,
            total,
            error: None,
        }
    }
}

/// The service's state.
#[derive(Default)]
pub(crate) struct HygieneState {
    jobs: DashMap<String, Job>,
    invalid: DashMap<String, ()>,
    faults: Mutex<HygieneFaults>,
}

pub(crate) fn routes() -> Router<Arc<Inner>> {
    Router::new()
        // 200,000 numbers of 15 digits are ~3.6 MB of JSON: above axum's 2 MB default.
        .route(
            "/hygiene/v1/jobs",
            post(create_job).layer(axum::extract::DefaultBodyLimit::max(16 * 1024 * 1024)),
        )
        .route("/hygiene/v1/jobs/{id}", get(read_job))
        .route("/hygiene/v1/jobs/{id}/results", get(results))
        .route("/_sim/hygiene/invalid", post(mark_invalid))
        .route("/_sim/hygiene/faults", put(set_faults))
        .route("/_sim/hygiene/jobs", get(list_jobs))
}

fn error(status: StatusCode, message: &str) -> Response {
    (status, Json(json!({"error": {"message": message}}))).into_response()
}

/// The 401 or 503 a call gets before it is handled, if any.
fn refuse(inner: &Inner, headers: &HeaderMap) -> Option<Response> {
    if inner
        .hygiene
        .faults
        .lock()
        .expect("faults lock")
        .unavailable
    {
        return Some(error(
            StatusCode::SERVICE_UNAVAILABLE,
            "serviço indisponível (simulado)",
        ));
    }
    let key = headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim)
        .filter(|k| !k.is_empty());
    let ok = match (&inner.cfg.hygiene_api_key, key) {
        (_, None) => false,
        (Some(expected), Some(k)) => expected == k,
        (None, Some(_)) => true,
    };
    (!ok).then(|| error(StatusCode::UNAUTHORIZED, "chave de API inválida"))
}

/// The digits of a number when it looks like one (10–15 digits).
fn digits(input: &str) -> Option<String> {
    let kept: String = input
        .trim()
        .chars()
        .filter(|c| !matches!(c, '+' | ' ' | '.' | '-' | '(' | ')'))
        .collect();
    (kept.chars().all(|c| c.is_ascii_digit()) && (10..=15).contains(&kept.len())).then_some(kept)
}

fn classify(inner: &Inner, input: &str) -> ResultRow {
    match digits(input) {
        None => ResultRow {
            input: input.into(),
            e164: None,
            wa_id: None,
            status: Validity::Invalid,
            reason: Some("formato_invalido".into()),
        },
        Some(d) if inner.hygiene.invalid.contains_key(&d) => ResultRow {
            input: input.into(),
            e164: Some(format!("+{d}")),
            wa_id: None,
            status: Validity::Invalid,
            reason: Some("sem_whatsapp".into()),
        },
        Some(d) => ResultRow {
            input: input.into(),
            e164: Some(format!("+{d}")),
            wa_id: Some(d),
            status: Validity::Valid,
            reason: None,
        },
    }
}

#[derive(Debug, Deserialize)]
struct JobIn {
    numbers: Vec<String>,
    #[serde(default)]
    callback_url: Option<String>,
}

async fn create_job(State(inner): State<Arc<Inner>>, headers: HeaderMap, body: String) -> Response {
    if let Some(r) = refuse(&inner, &headers) {
        return r;
    }
    let Ok(b) = serde_json::from_str::<JobIn>(&body) else {
        return error(
            StatusCode::BAD_REQUEST,
            "corpo inválido: esperado {numbers: [string]}",
        );
    };
    if b.numbers.is_empty() || b.numbers.len() > MAX_JOB_NUMBERS {
        return error(
            StatusCode::UNPROCESSABLE_ENTITY,
            "envie de 1 a 200000 números por job",
        );
    }
    let (delay_ms, fails) = {
        let mut f = inner.hygiene.faults.lock().expect("faults lock");
        let fails = f.fail_next > 0;
        f.fail_next = f.fail_next.saturating_sub(1);
        (f.delay_ms, fails)
    };
    let id = format!(
        "hyg_{}",
        inner.random_from(b"abcdefghijkmnpqrstuvwxyz23456789", 16)
    );
    let total = b.numbers.len();
    let job = Job {
        numbers: Arc::new(b.numbers),
        created_at: now_ms(),
        delay_ms,
        fails,
    };
    inner.hygiene.jobs.insert(id.clone(), job);
    if let Some(url) = b.callback_url {
        let key = inner.cfg.hygiene_api_key.clone().unwrap_or_else(|| {
            headers
                .get(axum::http::header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.strip_prefix("Bearer "))
                .unwrap_or_default()
                .to_string()
        });
        let job_id = id.clone();
        let wait = if fails { delay_ms / 2 } else { delay_ms };
        tokio::spawn(async move {
            tokio::time::sleep(std::time::Duration::from_millis(wait)).await;
            let body = json!({"job_id": job_id, "status": if fails { "failed" } else { "done" }})
                .to_string();
            let signature = crate::hygiene::sign(&key, body.as_bytes());
            // Retried on a non-2xx answer or no answer, like a real service's callbacks: the
            // gateway may not have recorded the job yet.
            let client = reqwest::Client::new();
            for wait_ms in [0u64, 200, 500, 1000, 2000, 5000] {
                tokio::time::sleep(std::time::Duration::from_millis(wait_ms)).await;
                let sent = client
                    .post(&url)
                    .header("content-type", "application/json")
                    .header("x-hygiene-signature", &signature)
                    .body(body.clone())
                    .send()
                    .await;
                if sent.is_ok_and(|r| r.status().is_success()) {
                    break;
                }
            }
        });
    }
    (
        StatusCode::ACCEPTED,
        Json(json!({"job_id": id, "status": "queued", "total": total})),
    )
        .into_response()
}

async fn read_job(
    State(inner): State<Arc<Inner>>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    if let Some(r) = refuse(&inner, &headers) {
        return r;
    }
    match inner.hygiene.jobs.get(&id) {
        Some(job) => Json(job.progress(&id, now_ms())).into_response(),
        None => error(StatusCode::NOT_FOUND, "job não encontrado"),
    }
}

#[derive(Debug, Deserialize)]
struct Page {
    offset: Option<usize>,
    limit: Option<usize>,
}

async fn results(
    State(inner): State<Arc<Inner>>,
    headers: HeaderMap,
    Path(id): Path<String>,
    Query(page): Query<Page>,
) -> Response {
    if let Some(r) = refuse(&inner, &headers) {
        return r;
    }
    let Some(job) = inner.hygiene.jobs.get(&id).map(|j| j.clone()) else {
        return error(StatusCode::NOT_FOUND, "job não encontrado");
    };
    let progress = job.progress(&id, now_ms());
    if progress.status != JobStatus::Done {
        return error(StatusCode::CONFLICT, "o job ainda não terminou");
    }
    let offset = page.offset.unwrap_or(0).min(job.numbers.len());
    let limit = page.limit.unwrap_or(10_000).clamp(1, 50_000);
    let end = (offset + limit).min(job.numbers.len());
    let data: Vec<ResultRow> = job.numbers[offset..end]
        .iter()
        .map(|n| classify(&inner, n))
        .collect();
    Json(ResultsPage {
        data,
        next_offset: (end < job.numbers.len()).then_some(end as u64),
    })
    .into_response()
}

#[derive(Debug, Deserialize)]
struct NumbersIn {
    numbers: Vec<String>,
}

async fn mark_invalid(State(inner): State<Arc<Inner>>, Json(b): Json<NumbersIn>) -> Response {
    let mut marked = 0;
    for n in b.numbers {
        if let Some(d) = digits(&n) {
            inner.hygiene.invalid.insert(d, ());
            marked += 1;
        }
    }
    Json(json!({"data": {"marked": marked}})).into_response()
}

async fn set_faults(State(inner): State<Arc<Inner>>, Json(f): Json<HygieneFaults>) -> Response {
    *inner.hygiene.faults.lock().expect("faults lock") = f.clone();
    Json(json!({"data": f})).into_response()
}

async fn list_jobs(State(inner): State<Arc<Inner>>) -> Response {
    let now = now_ms();
    let jobs: Vec<JobProgress> = inner
        .hygiene
        .jobs
        .iter()
        .map(|j| j.value().progress(j.key(), now))
        .collect();
    Json(json!({"data": jobs})).into_response()
}

#[cfg(test)]
mod tests {
    use super::digits;

    #[test]
    fn formats() {
        assert_eq!(
            digits("+55 (11) 99999-0001").as_deref(),
            Some("5511999990001")
        );
        assert_eq!(digits("123"), None);
        assert_eq!(digits("55119999x0001"), None);
    }
}
