//! Token management (decision D-027): list, create with a level, revoke. Admin only.

use crate::error::ApiError;
use crate::extract::{ApiJson, Auth, IdPath};
use crate::AppState;
use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use engine::access::Level;
use serde::Deserialize;
use serde_json::{json, Value};
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
    path = "/tokens",
    tag = "Tokens",
    params(crate::extract::PageQuery),
    responses((status = 200, description = "Tokens da conta (sem o valor), o mais novo primeiro; `has_more`, `next_cursor`", body = crate::openapi::ListEnvelope), (status = "4XX", description = "Erro: `{message, code, …}` (401 sem token, 403 nível insuficiente, 404 fora da conta, 422 inválido)", body = crate::openapi::ErrorBody))
)]
async fn list(
    State(state): State<AppState>,
    auth: Auth,
    q: Result<
        axum::extract::Query<crate::extract::PageQuery>,
        axum::extract::rejection::QueryRejection,
    >,
) -> Result<Json<Value>, ApiError> {
    let (limit, before) = crate::extract::list_page(q)?;
    let tokens = state
        .runtime
        .store()
        .list_tokens_page(auth.account_id(), before, limit + 1)
        .await?;
    Ok(Json(crate::extract::cursor_page(
        tokens,
        limit,
        |t| t.id,
        |t| {
            json!({"id": t.id, "name": t.name, "prefix": t.prefix, "level": t.level,
                   "created_at": actors::time::iso(t.created_at), "revoked_at": super::iso_opt(t.revoked_at)})
        },
    )))
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[schema(as = TokenIn)]
#[serde(deny_unknown_fields)]
struct CreateIn {
    name: String,
    level: String,
}

#[utoipa::path(
    post,
    operation_id = "tokens_create",
    path = "/tokens",
    tag = "Tokens",
    request_body = CreateIn,
    responses((status = 201, description = "`data`: token com o valor (mostrado uma vez)", body = crate::openapi::DataEnvelope), (status = "4XX", description = "Erro: `{message, code, …}` (401 sem token, 403 nível insuficiente, 404 fora da conta, 422 inválido)", body = crate::openapi::ErrorBody))
)]
async fn create(
    State(state): State<AppState>,
    auth: Auth,
    ApiJson(b): ApiJson<CreateIn>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
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
        .runtime
        .store()
        .create_token(auth.account_id(), b.name.trim(), level.as_str())
        .await?;
    Ok((
        StatusCode::CREATED,
        Json(
            json!({"data": {"id": t.id, "name": b.name.trim(), "level": level.as_str(), "prefix": t.prefix, "token": t.value.expose()}}),
        ),
    ))
}

#[utoipa::path(
    delete,
    operation_id = "tokens_revoke",
    path = "/tokens/{id}",
    tag = "Tokens",
    params(("id" = i64, Path, description = "Id do recurso (inteiro); de outra conta → 404")),
    responses((status = 200, description = "Token revogado", body = crate::openapi::DataEnvelope), (status = "4XX", description = "Erro: `{message, code, …}` (401 sem token, 403 nível insuficiente, 404 fora da conta, 422 inválido)", body = crate::openapi::ErrorBody))
)]
async fn revoke(
    State(state): State<AppState>,
    auth: Auth,
    IdPath(id): IdPath,
) -> Result<Json<Value>, ApiError> {
    state
        .runtime
        .store()
        .revoke_token(auth.account_id(), id)
        .await?;
    Ok(Json(json!({"data": {"id": id, "revoked": true}})))
}
