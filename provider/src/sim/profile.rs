//! Business profiles and the resumable upload at the simulator (D-058; Meta's "Business
//! Profiles" and "Resumable Upload API" references, not in PROVIDER.md): the panel sets a
//! number's profile picture through them.
//!
//! - `POST /{app_id}/uploads?file_length&file_type[&file_name]` → `{"id": "upload:…"}`;
//! - `POST /{upload_id}` with `Authorization: OAuth <token>`, `file_offset: 0` and the bytes →
//!   `{"h": "<handle>"}`;
//! - `POST /{phone_number_id}/whatsapp_business_profile {messaging_product: "whatsapp",
//!   profile_picture_handle?, about?, description?}` → `{"success": true}`;
//! - `GET /{phone_number_id}/whatsapp_business_profile` → `{"data": [{…, profile_picture_url}]}`;
//! - `GET /_sim/profile-pictures/{phone_number_id}`: the picture (the provider's CDN URL).

use super::business::SIM_APP_ID;
use super::node::{authenticate, graph_error, param_str, params, unknown_node};
use super::Inner;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;
use std::collections::HashMap;
use std::sync::Arc;

/// Largest file a session takes: 5 MB (the provider's image limit, §3).
const MAX_UPLOAD: u64 = 5 * 1024 * 1024;

/// An upload session, then (once its bytes arrived) a handle.
#[derive(Debug, Clone)]
pub struct Upload {
    /// Business whose token opened it.
    pub business_id: String,
    /// Announced length, bytes.
    pub file_length: u64,
    /// Announced MIME type.
    pub file_type: String,
    /// The bytes, once posted.
    pub bytes: Option<Bytes>,
}

/// A number's business profile.
#[derive(Debug, Clone, Default)]
pub struct Profile {
    /// "About" text.
    pub about: Option<String>,
    /// Description.
    pub description: Option<String>,
    /// The picture: MIME type and bytes.
    pub picture: Option<(String, Bytes)>,
}

fn invalid(details: &str) -> Response {
    graph_error(
        StatusCode::BAD_REQUEST,
        100,
        "Invalid parameter",
        Some(details),
        None,
    )
}

/// `POST /{app_id}/uploads`: opens a session for the token's business.
pub(crate) async fn start_upload(
    State(inner): State<Arc<Inner>>,
    Path((_, node)): Path<(String, String)>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let business = match authenticate(&inner, &headers, &query) {
        Ok(b) => b,
        Err(r) => return r,
    };
    if node != SIM_APP_ID {
        return unknown_node(&node);
    }
    let p = params(&query, &body);
    let length = param_str(&p, "file_length")
        .and_then(|v| v.parse::<u64>().ok())
        .or_else(|| p.get("file_length").and_then(|v| v.as_u64()));
    let Some(length) = length.filter(|l| *l > 0) else {
        return invalid("file_length must be a positive integer.");
    };
    if length > MAX_UPLOAD {
        return invalid("file_length exceeds the maximum size.");
    }
    let Some(file_type) = param_str(&p, "file_type").map(str::to_string) else {
        return invalid("file_type is required.");
    };
    if ![
        "image/jpeg",
        "image/jpg",
        "image/png",
        "video/mp4",
        "application/pdf",
    ]
    .contains(&file_type.as_str())
    {
        return invalid("file_type is not supported.");
    }
    let id = format!(
        "upload:{}",
        inner.random_from(
            b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789",
            32
        )
    );
    inner.uploads.insert(
        id.clone(),
        Upload {
            business_id: business,
            file_length: length,
            file_type,
            bytes: None,
        },
    );
    Json(json!({ "id": id })).into_response()
}

/// `POST /{upload_id}`: the bytes of a session (`Authorization: OAuth <token>`, one chunk
/// from `file_offset: 0`); answers the handle.
pub(crate) fn upload_data(inner: &Inner, id: &str, headers: &HeaderMap, body: Bytes) -> Response {
    let token = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("OAuth "))
        .map(str::trim);
    let business = token.and_then(|t| inner.tokens.get(t).map(|b| b.clone()));
    let Some(business) = business else {
        return graph_error(
            StatusCode::UNAUTHORIZED,
            190,
            "Invalid OAuth access token - Cannot parse access token",
            None,
            None,
        );
    };
    let offset = headers
        .get("file_offset")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    let Some(mut upload) = inner
        .uploads
        .get_mut(id)
        .filter(|u| u.business_id == business)
    else {
        return unknown_node(id);
    };
    if offset != Some(0) || upload.bytes.is_some() {
        return invalid("file_offset must be 0 for a new upload.");
    }
    if body.len() as u64 != upload.file_length {
        return invalid("The body's length differs from file_length.");
    }
    upload.bytes = Some(body);
    let handle = format!(
        "4::{}",
        inner.random_from(
            b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789",
            40
        )
    );
    let done = upload.clone();
    drop(upload);
    inner.uploads.insert(handle.clone(), done);
    Json(json!({ "h": handle })).into_response()
}

/// `POST /{phone_number_id}/whatsapp_business_profile`.
pub(crate) async fn post_profile(
    State(inner): State<Arc<Inner>>,
    Path((_, node)): Path<(String, String)>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let business = match super::node::number_business(&inner, &node, &headers, &query) {
        Ok(b) => b,
        Err(r) => return r,
    };
    let p = params(&query, &body);
    if param_str(&p, "messaging_product") != Some("whatsapp") {
        return invalid("messaging_product must be whatsapp.");
    }
    let picture = match param_str(&p, "profile_picture_handle") {
        None => None,
        Some(h) => {
            let Some(u) = inner
                .uploads
                .get(h)
                .filter(|u| u.business_id == business)
                .map(|u| u.clone())
            else {
                return invalid("profile_picture_handle is not a valid handle.");
            };
            if !u.file_type.starts_with("image/") {
                return invalid("The profile picture must be an image.");
            }
            match u.bytes {
                Some(b) => Some((u.file_type, b)),
                None => return invalid("profile_picture_handle is not a valid handle."),
            }
        }
    };
    let mut profile = inner.profiles.entry(node).or_default();
    if let Some(pic) = picture {
        profile.picture = Some(pic);
    }
    if let Some(a) = param_str(&p, "about") {
        profile.about = Some(a.to_string());
    }
    if let Some(d) = param_str(&p, "description") {
        profile.description = Some(d.to_string());
    }
    Json(json!({"success": true})).into_response()
}

/// `GET /{phone_number_id}/whatsapp_business_profile`.
pub(crate) async fn get_profile(
    State(inner): State<Arc<Inner>>,
    Path((_, node)): Path<(String, String)>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    if let Err(r) = super::node::number_business(&inner, &node, &headers, &query) {
        return r;
    }
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("127.0.0.1");
    let profile = inner
        .profiles
        .get(&node)
        .map(|p| p.clone())
        .unwrap_or_default();
    let mut entry = json!({"messaging_product": "whatsapp"});
    if let Some(a) = profile.about {
        entry["about"] = json!(a);
    }
    if let Some(d) = profile.description {
        entry["description"] = json!(d);
    }
    if profile.picture.is_some() {
        entry["profile_picture_url"] = json!(format!("http://{host}/_sim/profile-pictures/{node}"));
    }
    Json(json!({ "data": [entry] })).into_response()
}

/// `GET /_sim/profile-pictures/{phone_number_id}`: the picture's bytes (public, as a CDN URL).
pub(crate) async fn picture(State(inner): State<Arc<Inner>>, Path(id): Path<String>) -> Response {
    match inner.profiles.get(&id).and_then(|p| p.picture.clone()) {
        Some((mime, bytes)) => ([(header::CONTENT_TYPE, mime)], bytes).into_response(),
        None => (StatusCode::NOT_FOUND, "no profile picture").into_response(),
    }
}
