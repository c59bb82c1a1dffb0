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
