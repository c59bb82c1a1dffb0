//! Spec section "Health and channels": connect an official number, list and read channels.

use crate::envelope::{Data, List, Page};
use crate::error::ApiError;
use crate::extract::{ApiJson, Auth, IdPath};
use crate::AppState;
use actors::protocol::ChannelSnapshot;
use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use engine::channel::{Quality, Tone};
use engine::ids::{AccountId, ChannelId};
use engine::Secret;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use services::connect::ConnectOfficial;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// Routes of this section (under `/api/v1`).
pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list))
        .routes(routes!(connect))
        .routes(routes!(embedded_signup))
        .routes(routes!(signup_config))
        .routes(routes!(official, update))
        .routes(routes!(health))
        .routes(routes!(verify))
        .routes(routes!(sync))
        .routes(routes!(templates))
        .routes(routes!(request_code))
        .routes(routes!(verify_code))
        .routes(routes!(register))
        .routes(routes!(payment_check))
}

/// The channel object of the spec ("Channel"), as every channel answer carries it. Handlers
/// serialize this type, so the document and the wire are one definition (issue 18).
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ChannelOut {
    /// Id.
    id: i64,
    /// The number, digits with country code.
    phone: String,
    /// Display name in disparo.
    name: String,
    /// A Cloud API number (`false`: an alternative provider's, referenced only).
    official: bool,
    /// The provider engine.
    engine: String,
    /// `WORKING`, `PENDING` or `DISCONNECTED`.
    #[schema(value_type = engine::channel::ChannelStatus)]
    status: String,
    /// The provider's quality rating: `GREEN`, `YELLOW`, `RED` or `UNKNOWN`.
    #[schema(value_type = engine::channel::Quality)]
    quality: String,
    /// The rating in pt-BR.
    quality_label: String,
    /// The messaging tier (`TIER_250`, `TIER_1K`… `TIER_UNLIMITED`), when known.
    tier: Option<String>,
    /// Whether business-initiated sends go now: `BLOCKED` (a bad health), `LIMITED` (no 24 h
    /// headroom) or `AVAILABLE`.
    #[schema(pattern = "^(AVAILABLE|LIMITED|BLOCKED)$")]
    can_send: &'static str,
    /// Live health (README "Health codes").
    health: engine::channel::Health,
    /// When it was connected (ISO 8601, UTC).
    created_at: String,
}

/// `POST /channels/official`'s answer: the channel and what the provider confirmed.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ConnectedOut {
    /// The connected number.
    data: ChannelOut,
    /// What the provider confirmed.
    verification: VerificationOut,
}

/// What the provider confirmed of a number's credential (spec "Official channel
/// configuration" › create response).
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct VerificationOut {
    /// The credential reads the number.
    ok: bool,
    /// The WABA is subscribed to the app (it is subscribed when it was not; D-072).
    subscribed: bool,
    /// The number as the provider shows it.
    display_phone_number: String,
    /// Its verified name.
    verified_name: String,
}

impl From<&services::connect::Verification> for VerificationOut {
    fn from(v: &services::connect::Verification) -> Self {
        VerificationOut {
            ok: v.ok,
            subscribed: v.subscribed,
            display_phone_number: v.display_phone_number.clone(),
            verified_name: v.verified_name.clone(),
        }
    }
}

/// `POST /channels/embedded-signup`'s answer (D-072).
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct SignedUpOut {
    /// The connected number.
    data: ChannelOut,
    /// What the provider confirmed.
    verification: VerificationOut,
    /// The registration with the PIN.
    registration: RegistrationOut,
}

/// The registration of a number signed up (`{ok, message}`).
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct RegistrationOut {
    /// The number is registered and sends.
    ok: bool,
    /// pt-BR summary (the provider's reason when it refused).
    message: String,
}

/// `GET /signup/config`: what the embedded-signup popup needs.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct SignupConfigOut {
    /// The app a code is exchanged with (`PROVIDER_APP_ID`).
    app_id: Option<String>,
    /// The login configuration (`PROVIDER_CONFIG_ID`).
    config_id: Option<String>,
    /// Both are set and the app secret is known: the popup can be offered.
    available: bool,
}

/// `GET /channels/{id}/official`: the channel with its provider ids and how to point the
/// provider's webhook at disparo (spec "Official channel configuration" › read response).
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct OfficialOut {
    /// The channel.
    #[serde(flatten)]
    channel: ChannelOut,
    /// The provider's id of the number.
    phone_number_id: String,
    /// The provider's id of its WABA.
    waba_id: String,
    /// Its verified name at the provider.
    verified_name: String,
    /// The stored access token worked the last time it was used.
    credential_valid: bool,
    /// The provider-side webhook to configure for this number.
    webhook: WebhookBlockOut,
}

/// How to configure the provider's webhook for a number.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct WebhookBlockOut {
    /// Callback URL (`{public URL}/webhooks/messaging/{id}`).
    url: String,
    /// The number's verify token; `null` for a read-level token (issue 46: a secret of the
    /// number's receiver, for those who may change the channel).
    verify_token: Option<String>,
    /// Fields to subscribe: `messages`.
    fields: Vec<&'static str>,
}

/// `POST /channels/{id}/verify`'s answer: the credential tested again.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct VerifiedOut {
    /// Always true (a refused credential is 422 `credencial_invalida`).
    ok: bool,
    /// The number, digits with country code.
    display_phone_number: String,
    /// Its verified name.
    verified_name: String,
    /// The channel after the check.
    channel: ChannelOut,
}

/// `POST /channels/{id}/sync` and `/register`'s answer.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ChannelResultOut {
    /// pt-BR summary.
    message: &'static str,
    /// `register` only: the number is WORKING.
    #[serde(skip_serializing_if = "Option::is_none")]
    active: Option<bool>,
    /// The channel after the call.
    channel: ChannelOut,
}

/// A template approved on the number at the provider (spec "Template (library)" ›
/// approved-templates listing of a number).
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ProviderTemplateOut {
    /// The provider's name.
    name: String,
    /// Locale.
    language: String,
    /// The provider's category (`MARKETING`, `UTILITY`, `AUTHENTICATION`).
    category: String,
    /// The body's text.
    body: String,
    /// How many body variables it has.
    params: usize,
    /// The provider's HEADER component, if any.
    header: Option<Value>,
    /// The provider's buttons.
    buttons: Value,
}

/// `POST /channels/{id}/request-code`'s answer.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct CodeRequestedOut {
    /// pt-BR summary.
    message: String,
    /// Always true.
    code_requested: bool,
}

/// `POST /channels/{id}/payment-check` (and `/bms/{id}/payment-check`)'s answer for a number.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct PaidOut {
    /// pt-BR summary.
    message: &'static str,
    /// Payment is in order: sending locked by payment is released.
    paid: bool,
}

impl From<&ChannelSnapshot> for ChannelOut {
    fn from(s: &ChannelSnapshot) -> Self {
        let r = &s.record;
        let can_send = match (s.health.tone, s.health.code.as_str()) {
            (Tone::Bad, _) => "BLOCKED",
            (_, "limite_24h_esgotado") => "LIMITED",
            _ => "AVAILABLE",
        };
        ChannelOut {
            id: r.id,
            phone: r.phone.clone(),
            name: r.name.clone(),
            official: r.official,
            engine: r.engine.clone(),
            status: r.status.clone(),
            quality: r.quality.clone(),
            quality_label: Quality::parse(&r.quality).label().to_string(),
            tier: r.tier.clone(),
            can_send,
            health: s.health.clone(),
            created_at: actors::time::iso(r.created_at),
        }
    }
}

/// Filters of `GET /channels` (decision D-022): `status` (WORKING, PENDING, DISCONNECTED),
/// `quality` (GREEN, YELLOW, RED, UNKNOWN), `tone` (ok, attention, bad).
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
struct ListQuery {
    status: Option<String>,
    quality: Option<String>,
    /// `ok`, `attention` or `bad`.
    #[param(pattern = "^(ok|attention|bad)$")]
    tone: Option<String>,
    /// Page size (1 to 500, default 100).
    #[param(minimum = 1, maximum = 500)]
    limit: Option<i64>,
    /// The `next_cursor` of the previous page (opaque).
    #[param(pattern = "^[0-9]{1,18}$")]
    cursor: Option<String>,
}

#[utoipa::path(
    get,
    operation_id = "channels_list",
    summary = "Lista os números da conta",
    path = "/channels",
    tag = "Números",
    params(ListQuery),
    responses((status = 200, description = "`data`: números (Channel) em ordem de criação; `has_more`, `next_cursor`", body = Page<ChannelOut>))
)]
async fn list(
    State(state): State<AppState>,
    auth: Auth,
    query: Result<axum::extract::Query<ListQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<Page<ChannelOut>>, ApiError> {
    let axum::extract::Query(q) = query.map_err(crate::extract::query_rejection)?;
    if let Some(t) = &q.tone {
        if !["ok", "attention", "bad"].contains(&t.as_str()) {
            return Err(ApiError::invalid(
                "tone",
                "invalid_filter",
                "`tone` deve ser ok, attention ou bad.",
            ));
        }
    }
    let (limit, after) = crate::extract::page_params(
        q.limit,
        &q.cursor,
        crate::extract::LIST_DEFAULT,
        crate::extract::LIST_MAX,
    )?;
    let keep = |c: &ChannelSnapshot| {
        q.status
            .as_deref()
            .is_none_or(|s| c.record.status.eq_ignore_ascii_case(s))
            && q.quality
                .as_deref()
                .is_none_or(|s| c.record.quality.eq_ignore_ascii_case(s))
            && q.tone.as_deref().is_none_or(|t| {
                serde_json::to_value(c.health.tone)
                    .ok()
                    .and_then(|v| v.as_str().map(|x| x == t))
                    .unwrap_or(false)
            })
    };
    let rows = state
        .services
        .channels_page(auth.account_id(), after, limit as usize + 1, keep)
        .await?;
    Ok(Json(crate::extract::cursor_page(
        rows,
        limit,
        |c| c.record.id,
        |c| ChannelOut::from(c),
    )))
}

/// `POST /channels/official` body ("Official channel configuration"). `phone_number_id`,
/// `waba_id` and `access_token` are required (decision D-002). Its `Debug` hides the secrets.
#[derive(Deserialize, utoipa::ToSchema)]
#[schema(as = ConnectOfficialIn)]
#[serde(deny_unknown_fields)]
struct ConnectIn {
    /// Display name in disparo.
    name: Option<String>,
    /// The provider's id of the number: digits, at most 32.
    #[schema(pattern = "^[0-9]{1,32}$")]
    phone_number_id: String,
    /// The provider's id of its WABA: digits, at most 32.
    #[schema(pattern = "^[0-9]{1,32}$")]
    waba_id: String,
    /// The business (system-user) token; stored sealed.
    #[schema(min_length = 1, pattern = r"\S")]
    access_token: String,
    app_secret: Option<String>,
    verify_token: Option<String>,
}

impl std::fmt::Debug for ConnectIn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnectIn")
            .field("name", &self.name)
            .field("phone_number_id", &self.phone_number_id)
            .field("waba_id", &self.waba_id)
            .field("access_token", &"***")
            .field("app_secret", &self.app_secret.as_ref().map(|_| "***"))
            .field("verify_token", &self.verify_token.as_ref().map(|_| "***"))
            .finish()
    }
}

fn required(field: &str, value: &str) -> Result<(), ApiError> {
    if value.trim().is_empty() {
        return Err(ApiError::invalid(
            field,
            "required",
            format!("O campo `{field}` é obrigatório."),
        ));
    }
    Ok(())
}

fn digits_id(field: &'static str, value: &str) -> Result<(), ApiError> {
    Ok(engine::ids::check_provider_node_id(field, value)?)
}

#[utoipa::path(
    post,
    operation_id = "channels_connect",
    summary = "Conecta um número oficial",
    path = "/channels/official",
    tag = "Números",
    request_body = ConnectIn,
    responses((status = 201, description = "`data`: número conectado, `verification`", body = ConnectedOut))
)]
async fn connect(
    State(state): State<AppState>,
    auth: Auth,
    ApiJson(body): ApiJson<ConnectIn>,
) -> Result<(StatusCode, Json<ConnectedOut>), ApiError> {
    digits_id("phone_number_id", &body.phone_number_id)?;
    digits_id("waba_id", &body.waba_id)?;
    required("access_token", &body.access_token)?;
    let req = ConnectOfficial {
        name: body.name,
        phone_number_id: body.phone_number_id,
        waba_id: body.waba_id,
        access_token: Secret::new(body.access_token.trim()),
        app_secret: body
            .app_secret
            .filter(|s| !s.trim().is_empty())
            .map(|s| Secret::new(s.trim())),
        verify_token: body.verify_token,
    };
    let (record, verification) = state
        .services
        .connect_official(auth.account_id(), req)
        .await?;
    let snapshot = state
        .services
        .snapshot(AccountId(auth.account_id()), ChannelId(record.id))
        .await?;
    Ok((
        StatusCode::CREATED,
        Json(ConnectedOut {
            data: ChannelOut::from(&snapshot),
            verification: VerificationOut::from(&verification),
        }),
    ))
}

/// `POST /channels/embedded-signup` body: what the Embedded Signup popup returns (D-072). Its
/// `Debug` hides the code and the PIN.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
struct SignupIn {
    /// The code of the `FB.login` callback.
    #[schema(min_length = 1, pattern = r"\S")]
    code: String,
    /// The WABA shared in the popup (digits).
    #[schema(pattern = "^[0-9]{1,32}$")]
    waba_id: String,
    /// The number chosen in the popup (digits).
    #[schema(pattern = "^[0-9]{1,32}$")]
    phone_number_id: String,
    /// Display name in disparo.
    name: Option<String>,
    /// 6 digits; default a random PIN, kept sealed.
    #[schema(pattern = "^([0-9]{6})?$")]
    pin: Option<String>,
}

impl std::fmt::Debug for SignupIn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SignupIn")
            .field("code", &"***")
            .field("waba_id", &self.waba_id)
            .field("phone_number_id", &self.phone_number_id)
            .field("name", &self.name)
            .field("pin", &self.pin.as_ref().map(|_| "***"))
            .finish()
    }
}

#[utoipa::path(
    post,
    operation_id = "channels_embedded_signup",
    summary = "Conecta um número pelo cadastro incorporado",
    path = "/channels/embedded-signup",
    tag = "Números",
    request_body = SignupIn,
    responses((status = 201, description = "`data`: número conectado (como `POST /channels/official`), `verification`, `registration` `{ok, message}`", body = SignedUpOut))
)]
async fn embedded_signup(
    State(state): State<AppState>,
    auth: Auth,
    ApiJson(body): ApiJson<SignupIn>,
) -> Result<(StatusCode, Json<SignedUpOut>), ApiError> {
    required("code", &body.code)?;
    digits_id("phone_number_id", &body.phone_number_id)?;
    digits_id("waba_id", &body.waba_id)?;
    let req = services::connect::CompleteSignup {
        code: Secret::new(body.code.trim()),
        waba_id: body.waba_id,
        phone_number_id: body.phone_number_id,
        name: body.name,
        pin: body.pin.filter(|p| !p.is_empty()).map(Secret::new),
    };
    let (record, verification, registration) = state
        .services
        .complete_signup(auth.account_id(), req)
        .await?;
    let snapshot = state
        .services
        .snapshot(AccountId(auth.account_id()), ChannelId(record.id))
        .await?;
    Ok((
        StatusCode::CREATED,
        Json(SignedUpOut {
            data: ChannelOut::from(&snapshot),
            verification: VerificationOut::from(&verification),
            registration: RegistrationOut {
                ok: registration.ok,
                message: registration.message,
            },
        }),
    ))
}

#[utoipa::path(
    get,
    operation_id = "signup_config",
    summary = "Lê a configuração do cadastro incorporado",
    path = "/signup/config",
    tag = "Números",
    responses((status = 200, description = "`data`: `{app_id, config_id, available}` para abrir o cadastro incorporado", body = Data<SignupConfigOut>))
)]
async fn signup_config(State(state): State<AppState>, _auth: Auth) -> Json<Data<SignupConfigOut>> {
    let c = state.services.signup_config();
    Data::json(SignupConfigOut {
        app_id: c.app_id,
        config_id: c.config_id,
        available: c.available,
    })
}

#[utoipa::path(
    get,
    operation_id = "channels_official",
    summary = "Lê os dados oficiais do número e seu webhook",
    path = "/channels/{id}/official",
    tag = "Números",
    params(("id" = i64, Path, description = "Id do recurso (inteiro); de outra conta → 404")),
    responses((status = 200, description = "Número com o bloco `webhook`", body = Data<OfficialOut>))
)]
async fn official(
    State(state): State<AppState>,
    auth: Auth,
    IdPath(id): IdPath,
) -> Result<Json<Data<OfficialOut>>, ApiError> {
    let snapshot = state
        .services
        .snapshot(AccountId(auth.account_id()), ChannelId(id))
        .await?;
    let r = &snapshot.record;
    Ok(Data::json(OfficialOut {
        channel: ChannelOut::from(&snapshot),
        phone_number_id: r.phone_number_id.clone(),
        waba_id: r.waba_id.clone(),
        verified_name: r.verified_name.clone(),
        credential_valid: r.credential_valid,
        webhook: WebhookBlockOut {
            url: format!(
                "{}/webhooks/messaging/{}",
                state.config.public_url.trim_end_matches('/'),
                r.id
            ),
            verify_token: (auth.0.level != "read").then(|| r.verify_token.clone()),
            fields: vec!["messages"],
        },
    }))
}

#[utoipa::path(
    get,
    operation_id = "channels_health",
    summary = "Lê a saúde do número",
    path = "/channels/{id}/health",
    tag = "Números",
    params(("id" = i64, Path, description = "Id do recurso (inteiro); de outra conta → 404")),
    responses((status = 200, description = "`data`: objeto health", body = Data<engine::channel::Health>))
)]
async fn health(
    State(state): State<AppState>,
    auth: Auth,
    IdPath(id): IdPath,
) -> Result<Json<Data<engine::channel::Health>>, ApiError> {
    let snapshot = state
        .services
        .snapshot(AccountId(auth.account_id()), ChannelId(id))
        .await?;
    Ok(Data::json(snapshot.health))
}

/// `PATCH /channels/{id}/official` body (decision D-002): any of these; blank secrets keep the
/// stored ones. Its `Debug` hides the secrets.
#[derive(Deserialize, utoipa::ToSchema)]
#[schema(as = ChannelPatch)]
#[serde(deny_unknown_fields)]
struct UpdateIn {
    name: Option<String>,
    access_token: Option<String>,
    app_secret: Option<String>,
    verify_token: Option<String>,
}

impl std::fmt::Debug for UpdateIn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let hidden = |v: &Option<String>| v.as_ref().map(|_| "***");
        f.debug_struct("UpdateIn")
            .field("name", &self.name)
            .field("access_token", &hidden(&self.access_token))
            .field("app_secret", &hidden(&self.app_secret))
            .field("verify_token", &hidden(&self.verify_token))
            .finish()
    }
}

fn non_blank(v: Option<String>) -> Option<Secret> {
    v.map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .map(Secret::new)
}

#[utoipa::path(
    patch,
    operation_id = "channels_update",
    summary = "Altera o nome ou as credenciais do número",
    path = "/channels/{id}/official",
    tag = "Números",
    params(("id" = i64, Path, description = "Id do recurso (inteiro); de outra conta → 404")),
    request_body = UpdateIn,
    responses((status = 200, description = "Número atualizado", body = Data<ChannelOut>))
)]
async fn update(
    State(state): State<AppState>,
    auth: Auth,
    IdPath(id): IdPath,
    ApiJson(body): ApiJson<UpdateIn>,
) -> Result<Json<Data<ChannelOut>>, ApiError> {
    let req = services::connect::UpdateOfficial {
        name: body.name,
        access_token: non_blank(body.access_token),
        app_secret: non_blank(body.app_secret),
        verify_token: body.verify_token,
    };
    let snapshot = state
        .services
        .update_official(auth.account_id(), id, req)
        .await?;
    Ok(Data::json(ChannelOut::from(&snapshot)))
}

#[utoipa::path(
    post,
    operation_id = "channels_verify",
    summary = "Testa a credencial do número no provedor",
    path = "/channels/{id}/verify",
    tag = "Números",
    params(("id" = i64, Path, description = "Id do recurso (inteiro); de outra conta → 404")),
    responses((status = 200, description = "Credencial testada de novo", body = Data<VerifiedOut>))
)]
async fn verify(
    State(state): State<AppState>,
    auth: Auth,
    IdPath(id): IdPath,
) -> Result<Json<Data<VerifiedOut>>, ApiError> {
    let snapshot = state.services.sync_channel(auth.account_id(), id).await?;
    Ok(Data::json(VerifiedOut {
        ok: true,
        display_phone_number: snapshot.record.phone.clone(),
        verified_name: snapshot.record.verified_name.clone(),
        channel: ChannelOut::from(&snapshot),
    }))
}

#[utoipa::path(
    post,
    operation_id = "channels_sync",
    summary = "Sincroniza o número com o provedor",
    path = "/channels/{id}/sync",
    tag = "Números",
    params(("id" = i64, Path, description = "Id do recurso (inteiro); de outra conta → 404")),
    responses((status = 200, description = "`data` {message, channel}", body = Data<ChannelResultOut>))
)]
async fn sync(
    State(state): State<AppState>,
    auth: Auth,
    IdPath(id): IdPath,
) -> Result<Json<Data<ChannelResultOut>>, ApiError> {
    let snapshot = state.services.sync_channel(auth.account_id(), id).await?;
    Ok(Data::json(ChannelResultOut {
        message: "Número relido no provedor.",
        active: None,
        channel: ChannelOut::from(&snapshot),
    }))
}

/// Lista os templates aprovados do número no provedor
///
/// Approved templates at the provider: name, language, category, body, params (count of
/// variables), header (nullable), buttons.
#[utoipa::path(
    get,
    operation_id = "channels_templates",
    path = "/channels/{id}/templates",
    tag = "Números",
    params(("id" = i64, Path, description = "Id do recurso (inteiro); de outra conta → 404")),
    responses((status = 200, description = "Templates aprovados do número no provedor", body = List<ProviderTemplateOut>))
)]
async fn templates(
    State(state): State<AppState>,
    auth: Auth,
    IdPath(id): IdPath,
) -> Result<Json<List<ProviderTemplateOut>>, ApiError> {
    let list = state
        .services
        .provider_templates(auth.account_id(), id)
        .await?;
    let data: Vec<ProviderTemplateOut> = list
        .iter()
        .map(|t| {
            let comps = t.components.as_array().cloned().unwrap_or_default();
            let find = |kind: &str| {
                comps
                    .iter()
                    .find(|c| {
                        c["type"]
                            .as_str()
                            .is_some_and(|x| x.eq_ignore_ascii_case(kind))
                    })
                    .cloned()
            };
            let body = find("BODY")
                .and_then(|b| b["text"].as_str().map(str::to_string))
                .unwrap_or_default();
            ProviderTemplateOut {
                name: t.name.clone(),
                language: t.language.clone(),
                category: t.category.clone(),
                params: engine::template::parameter_count(&body),
                body,
                header: find("HEADER"),
                buttons: find("BUTTONS")
                    .map(|b| b["buttons"].clone())
                    .unwrap_or(json!([])),
            }
        })
        .collect();
    Ok(List::json(data))
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
struct MethodIn {
    /// `SMS` (default) or `VOICE` (a call).
    #[serde(default = "sms")]
    #[schema(pattern = "^([Ss][Mm][Ss]|[Vv][Oo][Ii][Cc][Ee])$")]
    method: String,
}

fn sms() -> String {
    "SMS".into()
}

#[utoipa::path(
    post,
    operation_id = "channels_request_code",
    summary = "Pede o código de verificação do número",
    path = "/channels/{id}/request-code",
    tag = "Números",
    params(("id" = i64, Path, description = "Id do recurso (inteiro); de outra conta → 404")),
    request_body = MethodIn,
    responses((status = 200, description = "Código pedido", body = Data<CodeRequestedOut>))
)]
async fn request_code(
    State(state): State<AppState>,
    auth: Auth,
    IdPath(id): IdPath,
    body: axum::body::Bytes,
) -> Result<Json<Data<CodeRequestedOut>>, ApiError> {
    // The body is optional: no body means SMS.
    let method = if body.iter().all(u8::is_ascii_whitespace) {
        sms()
    } else {
        serde_json::from_slice::<MethodIn>(&body)
            .map_err(|e| {
                ApiError::invalid(
                    "method",
                    "invalid_field",
                    format!(
                        "Corpo inválido: {}",
                        crate::extract::in_portuguese(&e.to_string())
                    ),
                )
            })?
            .method
    };
    let message = state
        .services
        .request_code(auth.account_id(), id, &method)
        .await?;
    Ok(Data::json(CodeRequestedOut {
        message,
        code_requested: true,
    }))
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
struct CodeIn {
    /// The 6-digit code the provider sent (separators allowed: `123-456`).
    #[schema(pattern = "^[^0-9]*([0-9][^0-9]*){6}$")]
    code: String,
}

#[utoipa::path(
    post,
    operation_id = "channels_verify_code",
    summary = "Confirma o código de verificação do número",
    path = "/channels/{id}/verify-code",
    tag = "Números",
    params(("id" = i64, Path, description = "Id do recurso (inteiro); de outra conta → 404")),
    request_body = CodeIn,
    responses((status = 200, description = "`data` {active, pin_required}", body = Data<services::accounts::CodeVerified>))
)]
async fn verify_code(
    State(state): State<AppState>,
    auth: Auth,
    IdPath(id): IdPath,
    ApiJson(body): ApiJson<CodeIn>,
) -> Result<Json<Data<services::accounts::CodeVerified>>, ApiError> {
    let out = state
        .services
        .verify_code(auth.account_id(), id, &body.code)
        .await?;
    Ok(Data::json(out))
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
struct PinIn {
    /// The number's 6-digit PIN (two-step verification).
    #[schema(pattern = "^[0-9]{6}$")]
    pin: String,
}

#[utoipa::path(
    post,
    operation_id = "channels_register",
    summary = "Registra o número no provedor com o PIN",
    path = "/channels/{id}/register",
    tag = "Números",
    params(("id" = i64, Path, description = "Id do recurso (inteiro); de outra conta → 404")),
    request_body = PinIn,
    responses((status = 200, description = "Resultado do registro", body = Data<ChannelResultOut>))
)]
async fn register(
    State(state): State<AppState>,
    auth: Auth,
    IdPath(id): IdPath,
    ApiJson(body): ApiJson<PinIn>,
) -> Result<Json<Data<ChannelResultOut>>, ApiError> {
    let snapshot = state
        .services
        .register(auth.account_id(), id, &body.pin)
        .await?;
    Ok(Data::json(ChannelResultOut {
        message: "Número registrado.",
        active: Some(snapshot.record.status == "WORKING"),
        channel: ChannelOut::from(&snapshot),
    }))
}

#[utoipa::path(
    post,
    operation_id = "channels_payment_check",
    summary = "Verifica o pagamento do número no provedor",
    path = "/channels/{id}/payment-check",
    tag = "Números",
    params(("id" = i64, Path, description = "Id do recurso (inteiro); de outra conta → 404")),
    responses((status = 200, description = "`data` {message, paid}", body = Data<PaidOut>))
)]
async fn payment_check(
    State(state): State<AppState>,
    auth: Auth,
    IdPath(id): IdPath,
) -> Result<Json<Data<PaidOut>>, ApiError> {
    let paid = state
        .services
        .payment_check_channel(auth.account_id(), id)
        .await?;
    let message = if paid {
        "Pagamento em dia; envios liberados."
    } else {
        "O provedor ainda aponta problema de pagamento."
    };
    Ok(Data::json(PaidOut { message, paid }))
}
