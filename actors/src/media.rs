//! Media given by public URL: downloaded by disparo (the provider's type and size limits, a
//! timeout, no private or loopback addresses unless allowed), then uploaded to the provider
//! and sent by media id (decision D-025).

use crate::error::ActorError;
use crate::outbound::{is_refused, refusal_message, Guard};
use engine::media::{bare_mime, check, mime_from_extension, MediaKind};
use engine::net::UrlRefusal;
use engine::ValidationError;
use futures::StreamExt;

/// A downloaded file, checked, ready to upload.
#[derive(Debug, Clone)]
pub struct FetchedMedia {
    /// Its kind.
    pub kind: MediaKind,
    /// The bytes.
    pub bytes: bytes::Bytes,
    /// Its MIME type.
    pub mime: String,
    /// File name from the URL's last path segment (sent with documents).
    pub filename: String,
    /// Where it came from.
    pub url: String,
    /// Its share of the media memory budget, held until the file is dropped.
    pub budget: std::sync::Arc<MediaPermit>,
}

/// What a downloaded file holds of the process-wide media budget: one download slot and its
/// size in KiB (released when the file is dropped, after its upload).
#[derive(Debug)]
pub struct MediaPermit {
    _slot: tokio::sync::OwnedSemaphorePermit,
    _bytes: Option<tokio::sync::OwnedSemaphorePermit>,
}

/// The process-wide bound on media downloads (issue 15): at most `max_downloads` at once
/// (`DISPARO_MEDIA_MAX_CONCURRENT`) and at most `max_kib` KiB of downloaded files in memory
/// (`DISPARO_MEDIA_MAX_MEMORY_MB`). A send that finds no room is 503 (`Retry-After: 1`)
/// rather than a process that grows without bound.
#[derive(Debug, Clone)]
pub struct MediaBudget {
    downloads: std::sync::Arc<tokio::sync::Semaphore>,
    kib: std::sync::Arc<tokio::sync::Semaphore>,
    max_kib: u32,
}

impl MediaBudget {
    /// A budget of `max_downloads` concurrent downloads and `max_bytes` bytes in memory.
    pub fn new(max_downloads: usize, max_bytes: u64) -> Self {
        let max_kib = (max_bytes / 1024).clamp(1, u32::MAX as u64) as u32;
        Self {
            downloads: std::sync::Arc::new(tokio::sync::Semaphore::new(max_downloads.max(1))),
            kib: std::sync::Arc::new(tokio::sync::Semaphore::new(max_kib as usize)),
            max_kib,
        }
    }
}

fn busy() -> ActorError {
    metrics::counter!("disparo_media_budget_refusals_total").increment(1);
    ActorError::Unavailable
}

fn refused(code: &'static str, message: impl Into<String>) -> ActorError {
    ActorError::Validation(ValidationError::new(code, "media.url", message))
}

/// Downloads `url` as media of `kind` through `http` (a client of the [`Guard`]: the host is
/// checked before the request and its resolved addresses at connect time, redirects are not
/// followed); the body is read up to the kind's limit.
pub async fn fetch(
    url: &str,
    kind: MediaKind,
    guard: &Guard,
    http: &reqwest::Client,
    budget: &MediaBudget,
) -> Result<FetchedMedia, ActorError> {
    let parsed = guard.check_url(url).map_err(|r| match r {
        UrlRefusal::Invalid(_) => refused("invalid_media_url", refusal_message(&r)),
        UrlRefusal::PrivateAddress(_) => refused(
            "private_media_url",
            "A URL da mídia aponta para um endereço privado ou local; use uma URL pública.",
        ),
    })?;
    let slot = budget
        .downloads
        .clone()
        .try_acquire_owned()
        .map_err(|_| busy())?;
    let resp = http
        .get(parsed.as_str())
        .send()
        .await
        .map_err(|e| unreachable(&e))?;
    if !resp.status().is_success() {
        return Err(refused(
            "media_unreachable",
            format!(
                "O servidor da mídia respondeu HTTP {}.",
                resp.status().as_u16()
            ),
        ));
    }
    let declared = resp
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(bare_mime);
    let filename = parsed
        .path_segments()
        .and_then(|mut s| s.next_back().map(str::to_string))
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| format!("arquivo.{}", kind.as_str()));
    let mime = match declared.as_deref() {
        Some(m) if m != "application/octet-stream" && m != "binary/octet-stream" => m.to_string(),
        _ => mime_from_extension(&filename)
            .unwrap_or("application/octet-stream")
            .to_string(),
    };
    if resp.content_length().is_some_and(|n| n > kind.max_bytes()) {
        check(kind, &mime, resp.content_length().unwrap_or(0))?;
    }
    let (body, held) = read_body(resp, kind, &mime, budget).await?;
    check(kind, &mime, body.len() as u64)?;
    Ok(FetchedMedia {
        kind,
        bytes: bytes::Bytes::from(body),
        mime,
        filename,
        url: url.to_string(),
        budget: std::sync::Arc::new(MediaPermit {
            _slot: slot,
            _bytes: held,
        }),
    })
}

/// Why a media download's request failed: a private address met at connect time, else the
/// server unreachable (timeout or connection error).
fn unreachable(e: &reqwest::Error) -> ActorError {
    if is_refused(e) {
        return refused(
            "private_media_url",
            "A URL da mídia aponta para um endereço privado ou local; use uma URL pública.",
        );
    }
    refused(
        "media_unreachable",
        format!(
            "Não foi possível baixar a mídia: {}",
            if e.is_timeout() {
                "tempo esgotado".to_string()
            } else {
                e.to_string()
            }
        ),
    )
}

/// Reads a media body within the kind's limit, taking the process's byte budget for what it
/// holds before holding it (1 KiB permits).
///
/// Errors: `media_unreachable` when the download breaks, the kind's size refusal, `Unavailable`
/// when the budget is spent.
async fn read_body(
    resp: reqwest::Response,
    kind: MediaKind,
    mime: &str,
    budget: &MediaBudget,
) -> Result<(Vec<u8>, Option<tokio::sync::OwnedSemaphorePermit>), ActorError> {
    let mut body = Vec::new();
    let mut held: Option<tokio::sync::OwnedSemaphorePermit> = None;
    let mut stream = resp.bytes_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk
            .map_err(|e| refused("media_unreachable", format!("Download interrompido: {e}")))?;
        // Take the budget for what the body will hold before holding it.
        let want = (body.len() + chunk.len()).div_ceil(1024) as u32;
        let have = held.as_ref().map_or(0, |p| p.num_permits() as u32);
        if want > have {
            if want > budget.max_kib {
                return Err(busy());
            }
            let more = budget
                .kib
                .clone()
                .try_acquire_many_owned(want - have)
                .map_err(|_| busy())?;
            match held.as_mut() {
                Some(p) => p.merge(more),
                None => held = Some(more),
            }
        }
        body.extend_from_slice(&chunk);
        if body.len() as u64 > kind.max_bytes() {
            check(kind, mime, body.len() as u64)?;
        }
    }
    Ok((body, held))
}
