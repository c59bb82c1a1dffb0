//! Token management (decision D-027): list, create with a level, revoke. Admin only.

use crate::envelope::{Data, Page};
use crate::error::ApiError;
use crate::extract::{ApiJson, Auth, IdPath};
use crate::AppState;
use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use engine::access::Level;
use serde::{Deserialize, Serialize};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// Routes (under `/api/v1`).
pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list, create))
        .routes(routes!(revoke))
}

#[utoipa::path(
    get,
    operation_id = "tokens_list",
    summary = "Lista os tokens da API da conta",
    path = "/tokens",
    tag = "Tokens",
    params(crate::extract::PageQuery),
    responses((status = 200, description = "Tokens da conta (sem o valor), o mais novo primeiro; `has_more`, `next_cursor`", body = Page<TokenOut>))
)]
async fn list(
    State(state): State<AppState>,
    auth: Auth,
    q: Result<
        axum::extract::Query<crate::extract::PageQuery>,
        axum::extract::rejection::QueryRejection,
    >,
) -> Result<Json<Page<TokenOut>>, ApiError> {
    let (limit, before) = crate::extract::list_page(q)?;
    let tokens = state
        .services
        .store()
        .list_tokens_page(auth.account_id(), before, limit + 1)
        .await?;
    Ok(Json(crate::extract::cursor_page(
        tokens,
        limit,
        |t| t.id,
        |t| TokenOut {
            id: t.id,
            name: t.name.clone(),
            prefix: t.prefix.clone(),
            level: t.level.clone(),
            created_at: actors::time::iso(t.created_at),
            revoked_at: t.revoked_at.map(actors::time::iso),
        },
    )))
}

/// An API token as the list shows it (never its value).
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct TokenOut {
    /// Id.
    id: i64,
    /// Its name (audit lines carry it).
    name: String,
    /// The value's first characters (`svc_…`), to recognise it.
    prefix: String,
    /// `read`, `write` or `admin` (D-027).
    #[schema(value_type = Level)]
    level: String,
    /// When it was created (ISO 8601).
    created_at: String,
    /// When it was revoked; null while it works.
    revoked_at: Option<String>,
}

/// `POST /tokens`'s answer: the token with its value, shown only here.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct TokenCreatedOut {
    /// Id.
    id: i64,
    /// Its name.
    name: String,
    /// Its level.
    level: Level,
    /// The value's first characters.
    prefix: String,
    /// The value (`svc_…`): only its hash is stored.
    token: String,
}

/// `DELETE /tokens/{id}`'s answer.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct RevokedOut {
    /// The token.
    id: i64,
    /// Always true.
    revoked: bool,
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[schema(as = TokenIn)]
#[serde(deny_unknown_fields)]
struct CreateIn {
    /// 1 to 100 characters, not blank.
    #[schema(min_length = 1, max_length = 100, pattern = r"\S")]
    name: String,
    /// `read`, `write` or `admin` (D-027).
    #[schema(value_type = Level)]
    level: String,
}

#[utoipa::path(
    post,
    operation_id = "tokens_create",
    summary = "Cria um token da API",
    path = "/tokens",
    tag = "Tokens",
    request_body = CreateIn,
    responses((status = 201, description = "`data`: token com o valor (mostrado uma vez)", body = Data<TokenCreatedOut>))
)]
async fn create(
    State(state): State<AppState>,
    auth: Auth,
    ApiJson(b): ApiJson<CreateIn>,
) -> Result<(StatusCode, Json<Data<TokenCreatedOut>>), ApiError> {
    if b.name.trim().is_empty() || b.name.len() > 100 {
        return Err(ApiError::invalid(
            "name",
            "required",
            "`name` deve ter de 1 a 100 caracteres.",
        ));
    }
    let level = Level::parse(&b.level).ok_or_else(|| {
        ApiError::invalid(
            "level",
            "invalid_level",
            "`level` deve ser read, write ou admin.",
        )
    })?;
    let t = state
        .services
        .store()
        .create_token(auth.account_id(), b.name.trim(), level.as_str())
        .await?;
    Ok((
        StatusCode::CREATED,
        Data::json(TokenCreatedOut {
            id: t.id,
            name: b.name.trim().to_string(),
            level,
            prefix: t.prefix,
            token: t.value.expose().to_string(),
        }),
    ))
}

#[utoipa::path(
    delete,
    operation_id = "tokens_revoke",
    summary = "Revoga um token da API",
    path = "/tokens/{id}",
    tag = "Tokens",
    params(("id" = i64, Path, description = "Id do recurso (inteiro); de outra conta → 404")),
    responses((status = 200, description = "Token revogado", body = Data<RevokedOut>))
)]
async fn revoke(
    State(state): State<AppState>,
    auth: Auth,
    IdPath(id): IdPath,
) -> Result<Json<Data<RevokedOut>>, ApiError> {
    state
        .services
        .store()
        .revoke_token(auth.account_id(), id)
        .await?;
    Ok(Data::json(RevokedOut { id, revoked: true }))
}
