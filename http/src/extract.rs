//! Extractors that turn bad input into our error shape: JSON bodies, numeric ids in paths, and
//! the authenticated token.

use crate::error::ApiError;
use axum::extract::rejection::JsonRejection;
use axum::extract::{FromRequest, FromRequestParts, Path, Request};
use axum::http::request::Parts;
use axum::http::StatusCode;
use serde::de::DeserializeOwned;
use storage::accounts::TokenOwner;

/// A JSON body. Malformed JSON → 400; wrong types or missing fields → 422 naming the problem;
/// too large → 413; not JSON → 415.
pub struct ApiJson<T>(pub T);

impl<S, T> FromRequest<S> for ApiJson<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        match axum::Json::<T>::from_request(req, state).await {
            Ok(axum::Json(v)) => Ok(ApiJson(v)),
            Err(rejection) => Err(json_rejection(rejection)),
        }
    }
}

/// Parses a JSON body already read (same errors as [`ApiJson`]).
pub fn parse_json<T: DeserializeOwned>(
    headers: &axum::http::HeaderMap,
    body: &[u8],
) -> Result<T, ApiError> {
    let is_json = headers
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.split(';')
                .next()
                .is_some_and(|m| m.trim().eq_ignore_ascii_case("application/json"))
        });
    if !is_json {
        return Err(ApiError::UnsupportedMediaType);
    }
    let de = &mut serde_json::Deserializer::from_slice(body);
    match serde_path_to_error::deserialize(de) {
        Ok(v) => Ok(v),
        Err(e) if e.inner().is_data() => Err(ApiError::Unprocessable {
            code: "invalid_field",
            message: format!(
                "Campo inválido ou ausente no corpo: {}: {}",
                e.path(),
                e.inner()
            ),
            details: serde_json::Map::new(),
        }),
        Err(e) => Err(ApiError::Malformed(e.inner().to_string())),
    }
}

fn json_rejection(r: JsonRejection) -> ApiError {
    match r {
        JsonRejection::JsonDataError(e) => {
            // serde's message names the field and the expectation, e.g. "missing field `to`".
            let detail = std::error::Error::source(&e)
                .map(|s| s.to_string())
                .unwrap_or_else(|| e.body_text());
            ApiError::Unprocessable {
                code: "invalid_field",
                message: format!("Campo inválido ou ausente no corpo: {detail}"),
                details: serde_json::Map::new(),
            }
        }
        JsonRejection::JsonSyntaxError(e) => ApiError::Malformed(e.body_text()),
        JsonRejection::MissingJsonContentType(_) => ApiError::UnsupportedMediaType,
        other if other.status() == StatusCode::PAYLOAD_TOO_LARGE => ApiError::PayloadTooLarge,
        other => ApiError::Malformed(other.body_text()),
    }
}

/// A query string that does not parse into the route's filters: 422 `invalid_query` naming
/// the problem.
pub fn query_rejection(e: axum::extract::rejection::QueryRejection) -> ApiError {
    ApiError::invalid(
        "query",
        "invalid_query",
        format!("Parâmetro de consulta inválido: {}", e.body_text()),
    )
}

/// The raw request body (for handlers that hash it, like idempotent sends); a body over the
/// limit is 413 in our envelope.
pub struct RawBody(pub bytes::Bytes);

impl<S: Send + Sync> FromRequest<S> for RawBody {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        match bytes::Bytes::from_request(req, state).await {
            Ok(b) => Ok(RawBody(b)),
            Err(r) if r.status() == StatusCode::PAYLOAD_TOO_LARGE => Err(ApiError::PayloadTooLarge),
            Err(r) => Err(ApiError::Malformed(r.body_text())),
        }
    }
}

/// A numeric id from the path (`/{id}`); anything else is a record that does not exist: 404.
pub struct IdPath(pub i64);

impl<S: Send + Sync> FromRequestParts<S> for IdPath {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let Path(raw) = Path::<String>::from_request_parts(parts, state)
            .await
            .map_err(|_| ApiError::NotFound)?;
        raw.parse::<i64>()
            .map(IdPath)
            .map_err(|_| ApiError::NotFound)
    }
}

/// The account and token behind the request (set by the auth middleware).
#[derive(Debug, Clone)]
pub struct Auth(pub TokenOwner);

impl<S: Send + Sync> FromRequestParts<S> for Auth {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, ApiError> {
        parts
            .extensions
            .get::<TokenOwner>()
            .cloned()
            .map(Auth)
            .ok_or(ApiError::Unauthorized)
    }
}

impl Auth {
    /// The account id.
    pub fn account_id(&self) -> i64 {
        self.0.account_id
    }
}

/// For `#[serde(default, deserialize_with = "crate::extract::present")]` on an
/// `Option<Option<T>>` field of a partial update: absent → `None` (keep), `null` →
/// `Some(None)` (clear), a value → `Some(Some(v))`.
pub fn present<'de, D: serde::Deserializer<'de>, T: serde::Deserialize<'de>>(
    d: D,
) -> Result<Option<Option<T>>, D::Error> {
    <Option<T> as serde::Deserialize>::deserialize(d).map(Some)
}
