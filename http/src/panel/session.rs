//! Panel sessions: `POST /api/login`, `POST /api/logout`, `GET /api/me` (spec
//! "Authentication" item 1, D-054).

use super::PanelUser;
use crate::error::ApiError;
use crate::extract::ApiJson;
use crate::AppState;
use actors::ActorError;
use axum::extract::State;
use axum::http::request::Parts;
use axum::Json;
use serde::Deserialize;
use services::panel::UserView;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(me))
        .routes(routes!(logout))
}

pub(super) fn public_routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(login))
}

/// `POST /api/login` body.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct LoginIn {
    /// E-mail.
    email: String,
    /// Password.
    password: String,
}

/// The request's parts that matter to the attempt limit.
pub(crate) struct Peer(Option<std::net::IpAddr>);

impl axum::extract::FromRequestParts<AppState> for Peer {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        Ok(Peer(crate::limits::client_ip(
            &parts.extensions,
            &parts.headers,
            &state.config.trusted_proxies,
        )))
    }
}

#[utoipa::path(
    post,
    operation_id = "panel_login",
    summary = "Entra no painel com e-mail e senha",
    path = "/login",
    tag = "Sessão",
    security(()),
    request_body = LoginIn,
    responses(
        (status = 200, description = "`data`: `{token: \"ses_…\", expires_at, user}`; o token aparece só aqui", body = crate::envelope::Data<SessionOut>),
        (status = 401, description = "`login_invalido`: e-mail ou senha incorretos (a mesma resposta para os dois)", body = crate::envelope::ErrorBody),
        (status = 429, description = "`muitas_tentativas`: limite por e-mail ou por endereço; `Retry-After`", body = crate::envelope::ErrorBody),
        (status = 422, description = "Corpo inválido", body = crate::envelope::ErrorBody),
        (status = 400, description = "`invalid_json`: o corpo não é JSON", body = crate::envelope::ErrorBody),
        (status = 415, description = "`unsupported_media_type`: envie `Content-Type: application/json`", body = crate::envelope::ErrorBody),
    )
)]
pub(crate) async fn login(
    State(state): State<AppState>,
    Peer(ip): Peer,
    ApiJson(b): ApiJson<LoginIn>,
) -> Result<Json<crate::envelope::Data<SessionOut>>, ApiError> {
    if b.email.len() > 254 || b.password.len() > engine::panel::PASSWORD_MAX_BYTES {
        return Err(ApiError::LoginFailed);
    }
    state
        .config
        .login_limit
        .take(&b.email, ip)
        .map_err(|retry_after| ApiError::TooManyAttempts { retry_after })?;
    let ttl = state.config.session_ttl.as_millis() as i64;
    match state.services.login(&b.email, &b.password, ttl).await {
        Ok((session, user, slug)) => Ok(crate::envelope::Data::json(SessionOut {
            token: session.token.expose().to_string(),
            expires_at: actors::time::iso(session.expires_at),
            user: UserView::of(&user, &slug),
        })),
        Err(ActorError::NotFound) => Err(ApiError::LoginFailed),
        Err(e) => Err(e.into()),
    }
}

#[utoipa::path(
    get,
    operation_id = "panel_me",
    summary = "Lê o usuário da sessão",
    path = "/me",
    tag = "Sessão",
    responses(
        (status = 200, description = "`data`: o usuário da sessão (id, email, name, role, status, scope, account)", body = crate::envelope::Data<UserView>),
        (status = 401, description = "`sessao_invalida`", body = crate::envelope::ErrorBody),
    )
)]
pub(crate) async fn me(user: PanelUser) -> Json<crate::envelope::Data<UserView>> {
    crate::envelope::Data::json(UserView::of(&user.user, &user.account_slug))
}

/// `POST /api/login`'s answer: the session token (shown only here) and its user.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct SessionOut {
    /// `ses_…`: send it as `Authorization: Bearer`.
    token: String,
    /// When it ends without use (ISO 8601; each use extends it, D-054).
    expires_at: String,
    /// The logged-in user.
    user: UserView,
}

/// `POST /api/logout`'s answer.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct LoggedOutOut {
    /// Always true: the token no longer works.
    logged_out: bool,
}

#[utoipa::path(
    post,
    operation_id = "panel_logout",
    summary = "Encerra a sessão",
    path = "/logout",
    tag = "Sessão",
    responses(
        (status = 200, description = "Sessão encerrada: o token deixa de valer", body = crate::envelope::Data<LoggedOutOut>),
        (status = 401, description = "`sessao_invalida`", body = crate::envelope::ErrorBody),
    )
)]
pub(crate) async fn logout(
    State(state): State<AppState>,
    user: PanelUser,
) -> Result<Json<crate::envelope::Data<LoggedOutOut>>, ApiError> {
    state
        .services
        .store()
        .revoke_session(user.session_id)
        .await?;
    Ok(crate::envelope::Data::json(LoggedOutOut {
        logged_out: true,
    }))
}
