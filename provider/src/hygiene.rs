//! The contact-hygiene (validation) service panel campaigns send their contacts to (issue 20,
//! decision D-062): an external HTTP service at `HYGIENE_URL`, authenticated with
//! `Authorization: Bearer <HYGIENE_API_KEY>`. The simulator serves the same wire under
//! `/hygiene/v1` ([`crate::sim`]).
//!
//! Wire (paths relative to `HYGIENE_URL`, e.g. `http://host/hygiene/v1`):
//! - `POST /jobs {numbers: [string], callback_url?}` → 202 `{job_id, status, total}`;
//! - `GET /jobs/{id}` → `{job_id, status: queued|running|done|failed, done, total, error?}`;
//! - `GET /jobs/{id}/results?offset&limit` → `{data: [{input, e164, wa_id, status:
//!   valid|invalid|unknown, reason}], next_offset}` (409 until the job is done);
//! - optional completion callback: `POST callback_url {job_id, status}` signed with
//!   `X-Hygiene-Signature: sha256=<hex HMAC-SHA256(api key, body)>`.

use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Rows asked per results page.
pub const RESULTS_PAGE: usize = 20_000;

/// A job's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JobStatus {
    /// Accepted, not started.
    Queued,
    /// Being checked.
    Running,
    /// Finished: the results can be read.
    Done,
    /// Gave up (see `error`).
    Failed,
}

/// `GET /jobs/{id}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobProgress {
    /// The job.
    pub job_id: String,
    /// Its state.
    pub status: JobStatus,
    /// Numbers checked so far.
    pub done: u64,
    /// Numbers in the job.
    pub total: u64,
    /// Why a failed job failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A number's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Validity {
    /// Has WhatsApp and may receive messages.
    Valid,
    /// Malformed, or no WhatsApp account.
    Invalid,
    /// The service could not tell.
    Unknown,
}

impl Validity {
    /// The stored and wire form.
    pub fn as_str(self) -> &'static str {
        match self {
            Validity::Valid => "valid",
            Validity::Invalid => "invalid",
            Validity::Unknown => "unknown",
        }
    }
}

/// One row of `GET /jobs/{id}/results`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResultRow {
    /// The number as submitted.
    pub input: String,
    /// E.164 form (`+5511…`) when it parses.
    #[serde(default)]
    pub e164: Option<String>,
    /// The WhatsApp id when the number has an account.
    #[serde(default)]
    pub wa_id: Option<String>,
    /// The verdict.
    pub status: Validity,
    /// Why it is not valid.
    #[serde(default)]
    pub reason: Option<String>,
}

/// A page of results.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ResultsPage {
    /// Rows.
    pub data: Vec<ResultRow>,
    /// Offset of the next page; none at the end.
    #[serde(default)]
    pub next_offset: Option<u64>,
}

#[derive(Debug, Serialize)]
struct JobIn<'a> {
    numbers: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    callback_url: Option<&'a str>,
}

#[derive(Debug, Deserialize)]
struct JobCreated {
    job_id: String,
}

/// What went wrong talking to the service.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HygieneError {
    /// No answer, or a 5xx: try again later.
    #[error("serviço de higienização indisponível: {0}")]
    Unavailable(String),
    /// The service refused the request (4xx other than 409).
    #[error("serviço de higienização recusou a chamada (HTTP {status}): {message}")]
    Refused {
        /// HTTP status.
        status: u16,
        /// The service's words (first 300 characters).
        message: String,
    },
    /// Results asked for before the job finished (409).
    #[error("a higienização ainda não terminou")]
    NotReady,
    /// An answer that does not follow the wire.
    #[error("resposta ilegível do serviço de higienização: {0}")]
    Decode(String),
}

/// The client. Cheap to clone.
#[derive(Clone)]
pub struct HygieneClient {
    http: reqwest::Client,
    base: String,
    api_key: String,
}

impl std::fmt::Debug for HygieneClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HygieneClient")
            .field("base", &self.base)
            .finish_non_exhaustive()
    }
}

impl HygieneClient {
    /// A client of the service at `base` (no trailing slash needed) with `api_key`; each call
    /// waits at most `timeout`. Redirects are not followed and no proxy from the environment
    /// is used: the URL is the operator's setting and the only place calls go.
    pub fn new(base: &str, api_key: &str, timeout: Duration) -> Result<Self, HygieneError> {
        let http = reqwest::Client::builder()
            .timeout(timeout)
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .build()
            .map_err(|e| HygieneError::Unavailable(e.to_string()))?;
        Ok(Self {
            http,
            base: base.trim_end_matches('/').to_string(),
            api_key: api_key.to_string(),
        })
    }

    /// Submits `numbers` as a job; returns its id.
    pub async fn submit(
        &self,
        numbers: &[String],
        callback_url: Option<&str>,
    ) -> Result<String, HygieneError> {
        let resp = self
            .http
            .post(format!("{}/jobs", self.base))
            .bearer_auth(&self.api_key)
            .json(&JobIn {
                numbers,
                callback_url,
            })
            .send()
            .await
            .map_err(transport)?;
        let created: JobCreated = read(resp).await?;
        Ok(created.job_id)
    }

    /// The job's progress.
    pub async fn progress(&self, job_id: &str) -> Result<JobProgress, HygieneError> {
        let resp = self
            .http
            .get(format!("{}/jobs/{}", self.base, encode(job_id)))
            .bearer_auth(&self.api_key)
            .send()
            .await
            .map_err(transport)?;
        read(resp).await
    }

    /// Every result row of a finished job, page by page ([`HygieneError::NotReady`] before).
    pub async fn results(&self, job_id: &str) -> Result<Vec<ResultRow>, HygieneError> {
        let mut rows = Vec::new();
        let mut offset = 0u64;
        loop {
            let resp = self
                .http
                .get(format!("{}/jobs/{}/results", self.base, encode(job_id)))
                .query(&[("offset", offset), ("limit", RESULTS_PAGE as u64)])
                .bearer_auth(&self.api_key)
                .send()
                .await
                .map_err(transport)?;
            let page: ResultsPage = read(resp).await?;
            rows.extend(page.data);
            match page.next_offset {
                Some(next) if next > offset => offset = next,
                _ => return Ok(rows),
            }
        }
    }
}

/// Percent-encodes a path segment (job ids are opaque strings of the service).
fn encode(segment: &str) -> String {
    segment
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                char::from(b).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

fn transport(e: reqwest::Error) -> HygieneError {
    HygieneError::Unavailable(if e.is_timeout() {
        "tempo esgotado".into()
    } else {
        "sem conexão".into()
    })
}

async fn read<T: serde::de::DeserializeOwned>(resp: reqwest::Response) -> Result<T, HygieneError> {
    let status = resp.status();
    if status.as_u16() == 409 {
        return Err(HygieneError::NotReady);
    }
    let body = resp.bytes().await.map_err(transport)?;
    if status.is_server_error() {
        return Err(HygieneError::Unavailable(format!(
            "HTTP {}",
            status.as_u16()
        )));
    }
    if !status.is_success() {
        let text = String::from_utf8_lossy(&body);
        return Err(HygieneError::Refused {
            status: status.as_u16(),
            message: text.chars().take(300).collect(),
        });
    }
    serde_json::from_slice(&body).map_err(|e| HygieneError::Decode(e.to_string()))
}

/// The `X-Hygiene-Signature` value of a callback body: `sha256=<hex HMAC-SHA256(key, body)>`.
pub fn sign(api_key: &str, body: &[u8]) -> String {
    use hmac::{Hmac, Mac};
    let mut mac =
        Hmac::<sha2::Sha256>::new_from_slice(api_key.as_bytes()).expect("HMAC takes any key");
    mac.update(body);
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}

/// Whether `header` is the signature of `body` under `api_key` (constant time).
pub fn verify(api_key: &str, body: &[u8], header: &str) -> bool {
    use hmac::{Hmac, Mac};
    let Some(hex_sig) = header.trim().strip_prefix("sha256=") else {
        return false;
    };
    let Ok(sig) = hex::decode(hex_sig) else {
        return false;
    };
    let mut mac =
        Hmac::<sha2::Sha256>::new_from_slice(api_key.as_bytes()).expect("HMAC takes any key");
    mac.update(body);
    mac.verify_slice(&sig).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signatures_verify_and_refuse() {
        let s = sign("k", b"{}");
        assert!(verify("k", b"{}", &s));
        assert!(!verify("k2", b"{}", &s));
        assert!(!verify("k", b"{ }", &s));
        assert!(!verify("k", b"{}", "sha256=zz"));
        assert_eq!(encode("a/b c"), "a%2Fb%20c");
    }
}
