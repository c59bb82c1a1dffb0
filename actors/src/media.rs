//! Media given by public URL: downloaded by disparo (the provider's type and size limits, a
//! timeout, no private or loopback addresses unless allowed), then uploaded to the provider
//! and sent by media id (decision D-025).

use crate::error::ActorError;
use engine::media::{bare_mime, check, is_public_ip, mime_from_extension, MediaKind};
use engine::ValidationError;
use futures::StreamExt;
use std::time::Duration;

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
}

fn refused(code: &'static str, message: impl Into<String>) -> ActorError {
    ActorError::Validation(ValidationError::new(code, "media.url", message))
}

/// Downloads `url` as media of `kind`. The host is resolved once and the connection pinned to
/// that address (so a DNS answer cannot change between the check and the fetch); redirects
/// are not followed; the body is read up to the kind's limit.
pub async fn fetch(
    url: &str,
    kind: MediaKind,
    allow_private: bool,
    timeout: Duration,
) -> Result<FetchedMedia, ActorError> {
    let parsed = url::Url::parse(url).map_err(|_| {
        refused(
            "invalid_media_url",
            "`media.url` deve ser um endereço http(s) completo.",
        )
    })?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(refused(
            "invalid_media_url",
            "`media.url` deve usar http ou https.",
        ));
    }
    let host = parsed
        .host_str()
        .ok_or_else(|| refused("invalid_media_url", "`media.url` não tem host."))?
        .to_string();
    let port = parsed.port_or_known_default().unwrap_or(80);
    let lookup_host = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_string();
    let addrs: Vec<std::net::SocketAddr> = tokio::time::timeout(
        timeout,
        tokio::net::lookup_host((lookup_host.as_str(), port)),
    )
    .await
    .map_err(|_| {
        refused(
            "media_unreachable",
            "Tempo esgotado ao resolver o host da mídia.",
        )
    })?
    .map_err(|_| {
        refused(
            "media_unreachable",
            format!("Não foi possível resolver o host {host}."),
        )
    })?
    .collect();
    let addr = addrs
        .iter()
        .find(|a| allow_private || is_public_ip(a.ip()))
        .copied()
        .ok_or_else(|| {
            refused(
                "private_media_url",
                "A URL da mídia aponta para um endereço privado ou local; use uma URL pública.",
            )
        })?;
    let client = reqwest::Client::builder()
        .timeout(timeout)
        .redirect(reqwest::redirect::Policy::none())
        .resolve(&lookup_host, addr)
        .build()
        .map_err(|e| refused("media_unreachable", e.to_string()))?;
    let resp = client.get(parsed.as_str()).send().await.map_err(|e| {
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
    })?;
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
    let mut body = Vec::new();
    let mut stream = resp.bytes_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk
            .map_err(|e| refused("media_unreachable", format!("Download interrompido: {e}")))?;
        body.extend_from_slice(&chunk);
        if body.len() as u64 > kind.max_bytes() {
            check(kind, &mime, body.len() as u64)?;
        }
    }
    check(kind, &mime, body.len() as u64)?;
    Ok(FetchedMedia {
        kind,
        bytes: bytes::Bytes::from(body),
        mime,
        filename,
        url: url.to_string(),
    })
}
