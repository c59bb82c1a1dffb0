//! Media at the simulator (PROVIDER.md §3): multipart upload with the provider's type and size
//! limits, URL lookup, bearer-protected download, delete.

use super::node::{authenticate, graph_error, resolve, unknown_node, Node};
use super::state::Media;
use super::Inner;
use axum::extract::{Multipart, Path, Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::sync::Arc;

/// Largest upload per MIME type, bytes (§3 "Supported types and max sizes"; the rules live in
/// `engine::media`, plus stickers).
pub(crate) fn max_size(mime: &str) -> Option<usize> {
    use engine::media::{bare_mime, MediaKind};
    let base = bare_mime(mime);
    if base == "image/webp" {
        return Some(500 * 1024);
    }
    [
        MediaKind::Image,
        MediaKind::Document,
        MediaKind::Video,
        MediaKind::Audio,
    ]
    .into_iter()
    .find(|k| k.mime_types().contains(&base.as_str()))
    .map(|k| k.max_bytes() as usize)
}

fn upload_error(details: &str) -> Response {
    let (status, message, _) = super::errors::canned(131053);
    graph_error(status, 131053, &message, Some(details), None)
}

/// Stores bytes as a media object and returns its id.
pub(crate) fn store(
    inner: &Inner,
    business_id: &str,
    phone_number_id: &str,
    mime: &str,
    bytes: bytes::Bytes,
) -> String {
    let id = inner.digits(16);
    inner.media.insert(
        id.clone(),
        Media {
            id: id.clone(),
            business_id: business_id.to_string(),
            phone_number_id: phone_number_id.to_string(),
            mime_type: mime.to_string(),
            sha256: hex::encode(Sha256::digest(&bytes)),
            bytes,
        },
    );
    id
}

/// `POST /{phone_number_id}/media` (multipart: `messaging_product`, `file`, `type`).
pub(crate) async fn upload(
    State(inner): State<Arc<Inner>>,
    Path((_, node)): Path<(String, String)>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
    mut multipart: Multipart,
) -> Response {
    let business = match authenticate(&inner, &headers, &query) {
        Ok(b) => b,
        Err(r) => return r,
    };
    if !matches!(resolve(&inner, &business, &node), Some(Node::Number)) {
        return unknown_node(&node);
    }
    let (mut product, mut declared, mut file) = (None, None, None);
    loop {
        match multipart.next_field().await {
            Ok(Some(field)) => {
                let name = field.name().unwrap_or_default().to_string();
                let content_type = field.content_type().map(str::to_string);
                let Ok(data) = field.bytes().await else {
                    return upload_error("The upload could not be read.");
                };
                match name.as_str() {
                    "messaging_product" => {
                        product = Some(String::from_utf8_lossy(&data).into_owned())
                    }
                    "type" => declared = Some(String::from_utf8_lossy(&data).into_owned()),
                    "file" => file = Some((content_type, data)),
                    _ => {}
                }
            }
            Ok(None) => break,
            Err(_) => return upload_error("The body is not a valid multipart upload."),
        }
    }
    if product.as_deref() != Some("whatsapp") {
        return graph_error(
            StatusCode::BAD_REQUEST,
            100,
            "Invalid parameter",
            Some("messaging_product must be \"whatsapp\"."),
            None,
        );
    }
    let Some((part_type, data)) = file else {
        return graph_error(
            StatusCode::BAD_REQUEST,
            100,
            "Invalid parameter",
            Some("The parameter file is required."),
            None,
        );
    };
    let Some(mime) = declared.or(part_type) else {
        return upload_error("The media type is missing.");
    };
    let Some(max) = max_size(&mime) else {
        return upload_error(&format!(
            "Param file must be a file with one of the supported types; got {mime}."
        ));
    };
    if data.is_empty() || data.len() > max {
        return upload_error(&format!(
            "The file has {} bytes; the limit for {mime} is {max}.",
            data.len()
        ));
    }
    let id = store(&inner, &business, &node, &mime, data);
    Json(json!({"id": id})).into_response()
}

/// `GET /{media_id}` → `{messaging_product, url, mime_type, sha256, file_size, id}`.
pub(crate) fn describe(
    inner: &Inner,
    id: &str,
    headers: &HeaderMap,
    query: &HashMap<String, String>,
) -> Response {
    let Some(m) = inner.media.get(id) else {
        return unknown_node(id);
    };
    if query
        .get("phone_number_id")
        .is_some_and(|p| *p != m.phone_number_id)
    {
        return unknown_node(id);
    }
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("127.0.0.1");
    Json(json!({
        "messaging_product": "whatsapp",
        "url": format!("http://{host}/_sim/lookaside/{id}"),
        "mime_type": m.mime_type,
        "sha256": m.sha256,
        "file_size": m.bytes.len().to_string(),
        "id": m.id,
    }))
    .into_response()
}

/// `DELETE /{media_id}`.
pub(crate) async fn delete_media(
    State(inner): State<Arc<Inner>>,
    Path((_, node)): Path<(String, String)>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    let business = match authenticate(&inner, &headers, &query) {
        Ok(b) => b,
        Err(r) => return r,
    };
    match resolve(&inner, &business, &node) {
        Some(Node::Media) => {
            inner.media.remove(&node);
            Json(json!({"success": true})).into_response()
        }
        _ => unknown_node(&node),
    }
}

/// `GET /_sim/lookaside/{media_id}`: the download URL; needs the same bearer token (§3).
pub(crate) async fn download(
    State(inner): State<Arc<Inner>>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Response {
    let business = match authenticate(&inner, &headers, &HashMap::new()) {
        Ok(b) => b,
        Err(r) => return r,
    };
    match inner.media.get(&id).filter(|m| m.business_id == business) {
        Some(m) => (
            [(header::CONTENT_TYPE, m.mime_type.clone())],
            m.bytes.clone(),
        )
            .into_response(),
        None => (StatusCode::NOT_FOUND, "media not found").into_response(),
    }
}
