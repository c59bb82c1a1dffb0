//! Numbers of an alternative provider (spec "What the service does" item 11, "Other";
//! decision D-034): registration, the notification URLs, and the receivers of those URLs.

use crate::envelope::Data;
use crate::error::ApiError;
use crate::extract::{ApiJson, Auth, RawBody};
use crate::routes::channels::ChannelOut;
use crate::AppState;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::post;
use axum::{Json, Router};
use engine::Secret;
use serde::Deserialize;
use serde_json::{json, Value};
use services::alternative::{ConnectAlternative, NotifyVia};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// Routes under `/api/v1`.
pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(connect))
        .routes(routes!(notify_url))
}

/// The receivers (outside `/api/v1`, no token: the URL's key or the sender's phone names the
/// account).
pub fn public_routes() -> Router<AppState> {
    Router::new()
        .route("/webhooks/alternative", post(receive_fixed))
        .route("/webhooks/alternative/{key}", post(receive_account))
}

/// `POST /channels/alternative` body. Its `Debug` hides the API key.
#[derive(Deserialize, utoipa::ToSchema)]
#[schema(as = ConnectAlternativeIn)]
#[serde(deny_unknown_fields)]
struct ConnectIn {
    name: Option<String>,
    phone: String,
    /// The alternative provider: `360dialog`.
    #[schema(pattern = r"^\s*(360dialog)\s*$")]
    engine: String,
    /// The provider's API key: visible ASCII characters (it travels in a header).
    #[schema(pattern = "^[!-~]+$")]
    api_key: String,
    provider_url: Option<String>,
}

impl std::fmt::Debug for ConnectIn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnectIn")
            .field("name", &self.name)
            .field("phone", &self.phone)
            .field("engine", &self.engine)
            .field("api_key", &"***")
            .field("provider_url", &self.provider_url)
            .finish()
    }
}

/// Conecta um número de um provedor alternativo
///
/// `POST /channels/alternative`: 201 `{data: channel, templates: <count read>}`; 422
/// `unknown_engine`, `invalid_phone`, `credential_refused`; 409 when the phone is already
/// registered with that provider.
#[utoipa::path(
    post,
    operation_id = "alternative_connect",
    path = "/channels/alternative",
    tag = "Provedor alternativo",
    request_body = ConnectIn,
    responses((status = 201, description = "`data`: número do provedor alternativo, `templates`: quantos foram lidos", body = AlternativeConnectedOut))
)]
async fn connect(
    State(state): State<AppState>,
    auth: Auth,
    ApiJson(b): ApiJson<ConnectIn>,
) -> Result<(StatusCode, Json<AlternativeConnectedOut>), ApiError> {
    let (snapshot, templates) = state
        .services
        .connect_alternative(
            auth.account_id(),
            ConnectAlternative {
                name: b.name,
                phone: b.phone,
                engine: b.engine,
                provider_url: b.provider_url,
                api_key: Secret::new(b.api_key),
            },
        )
        .await?;
    Ok((
        StatusCode::CREATED,
        Json(AlternativeConnectedOut {
            data: ChannelOut::from(&snapshot),
            templates,
        }),
    ))
}

/// `POST /channels/alternative`'s answer.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct AlternativeConnectedOut {
    /// The number, referenced only (`official: false`).
    data: ChannelOut,
    /// The sender's templates read from the provider.
    templates: usize,
}

/// The alternative provider's notification URLs (spec "Other").
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct NotifyUrlOut {
    /// This account's URL (identifies it: keep it as a secret).
    notify_url: String,
    /// The one URL for every account (the sender's number names the account).
    fixed_url: String,
    /// pt-BR note on how to use them.
    observacao: &'static str,
}

/// Lê as URLs de notificação do provedor alternativo
///
/// `GET /channels/alternative/notify-url`: `{data: {notify_url, fixed_url, observacao}}`.
#[utoipa::path(
    get,
    operation_id = "alternative_notify_url",
    path = "/channels/alternative/notify-url",
    tag = "Provedor alternativo",
    responses((status = 200, description = "`data` {notify_url, fixed_url, observacao}", body = Data<NotifyUrlOut>))
)]
async fn notify_url(
    State(state): State<AppState>,
    auth: Auth,
) -> Result<Json<Data<NotifyUrlOut>>, ApiError> {
    let key = state
        .services
        .alternative_notify_key(auth.account_id())
        .await?;
    let base = state.config.public_url.trim_end_matches('/');
    Ok(Data::json(NotifyUrlOut {
        notify_url: format!("{base}/webhooks/alternative/{key}"),
        fixed_url: format!("{base}/webhooks/alternative"),
        observacao: "Configure a notify_url como webhook do remetente no painel do provedor alternativo: ela é desta conta e a identifica (guarde-a como um segredo). A fixed_url é a mesma para todas as contas, para provedores que aceitam uma só URL; nela a conta é reconhecida pelo número do remetente (metadata.display_phone_number), que precisa estar cadastrado em POST /channels/alternative. O disparo registra as notificações recebidas; os envios destes números são feitos no provedor, não pelo disparo.",
    }))
}

async fn receive_account(
    State(state): State<AppState>,
    Path(key): Path<String>,
    RawBody(body): RawBody,
) -> Result<Json<Value>, ApiError> {
    let id = state
        .services
        .receive_alternative(NotifyVia::Account, Some(&key), &body)
        .await?;
    Ok(Json(json!({"data": {"received": true, "id": id}})))
}

async fn receive_fixed(
    State(state): State<AppState>,
    RawBody(body): RawBody,
) -> Result<Json<Value>, ApiError> {
    let id = state
        .services
        .receive_alternative(NotifyVia::Fixed, None, &body)
        .await?;
    Ok(Json(json!({"data": {"received": true, "id": id}})))
}

#[cfg(test)]
mod tests {
    /// The documented `engine` pattern names exactly the engines the check knows.
    #[test]
    fn the_engine_pattern_names_every_engine() {
        let doc = serde_json::to_value(crate::openapi::document()).unwrap();
        let pattern = &doc["components"]["schemas"]["ConnectAlternativeIn"]["properties"]["engine"]
            ["pattern"];
        let engines = services::alternative::engines().join("|");
        assert_eq!(pattern, &format!(r"^\s*({engines})\s*$"));
    }
}
