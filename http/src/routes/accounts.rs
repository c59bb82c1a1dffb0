//! Spec section "WABAs, BMs, overview, linking numbers".

use crate::envelope::{Data, List};
use crate::error::ApiError;
use crate::extract::{ApiJson, Auth, IdPath};
use crate::AppState;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::Json;
use serde::{Deserialize, Serialize};
use services::accounts::{AddedNumber, BmView, Overview, WabaView};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// Routes of this section (under `/api/v1`).
pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(overview))
        .routes(routes!(wabas))
        .routes(routes!(add_number))
        .routes(routes!(bm))
        .routes(routes!(sync_bm))
        .routes(routes!(payment_check))
}

#[utoipa::path(
    get,
    operation_id = "accounts_overview",
    summary = "Lê a visão geral da conta",
    path = "/overview",
    tag = "WABAs, BMs e visão geral",
    responses((status = 200, description = "Visão geral da conta", body = Data<Overview>))
)]
async fn overview(
    State(state): State<AppState>,
    auth: Auth,
) -> Result<Json<Data<Overview>>, ApiError> {
    let o = state.services.overview(auth.account_id()).await?;
    Ok(Data::json(o))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
struct WabaQuery {
    /// `good`, `bad` or `attention`: only WABAs in that health.
    #[param(pattern = "^(good|bad|attention)$")]
    health: Option<String>,
}

#[utoipa::path(
    get,
    operation_id = "accounts_wabas",
    summary = "Lista as WABAs da conta com a saúde dos números",
    path = "/wabas",
    tag = "WABAs, BMs e visão geral",
    params(WabaQuery),
    responses((status = 200, description = "WABAs com BM, credencial e saúde dos números", body = List<WabaView>))
)]
async fn wabas(
    State(state): State<AppState>,
    auth: Auth,
    q: Result<Query<WabaQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<List<WabaView>>, ApiError> {
    let Query(q) = q.map_err(crate::extract::query_rejection)?;
    if let Some(h) = &q.health {
        if !["good", "bad", "attention"].contains(&h.as_str()) {
            return Err(ApiError::invalid(
                "health",
                "invalid_filter",
                "`health` deve ser good, bad ou attention.",
            ));
        }
    }
    let list = state
        .services
        .wabas(auth.account_id(), q.health.as_deref())
        .await?;
    Ok(List::json(list))
}

/// `POST /wabas/{waba}/numbers` body.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
struct AddNumberIn {
    /// The national number without the country code: for Brazil the area code plus 8 or 9
    /// digits (`11988887777`); spaces, dashes, dots and parentheses allowed.
    #[schema(pattern = r"^[ ().-]*([0-9][ ().-]*){6,13}$")]
    phone: String,
    /// The display name to request, at least 3 characters.
    #[schema(min_length = 3, pattern = r"\S")]
    verified_name: String,
    /// Country code (default `55`).
    #[schema(pattern = "^[^0-9]*([0-9][^0-9]*){1,3}$")]
    cc: Option<String>,
    /// `SMS` (default), `VOICE` or `NONE` (ask the code later).
    #[schema(pattern = "^([Ss][Mm][Ss]|[Vv][Oo][Ii][Cc][Ee]|[Nn][Oo][Nn][Ee])$")]
    method: Option<String>,
    #[serde(default)]
    same_group: bool,
}

#[utoipa::path(
    post,
    operation_id = "accounts_add_number",
    summary = "Adiciona um número à WABA",
    path = "/wabas/{waba}/numbers",
    tag = "WABAs, BMs e visão geral",
    params(("waba" = String, Path, description = "WABA da conta com credencial")),
    request_body = AddNumberIn,
    responses((status = 201, description = "`data` {message, channel_id, phone, code_requested, bm_id}", body = Data<AddedNumber>))
)]
async fn add_number(
    State(state): State<AppState>,
    auth: Auth,
    Path(waba): Path<String>,
    ApiJson(body): ApiJson<AddNumberIn>,
) -> Result<(StatusCode, Json<Data<AddedNumber>>), ApiError> {
    let cc: String = body
        .cc
        .unwrap_or_else(|| "55".into())
        .chars()
        .filter(char::is_ascii_digit)
        .collect();
    if cc.is_empty() || cc.len() > 3 {
        return Err(ApiError::invalid(
            "cc",
            "invalid_cc",
            "`cc` deve ser o código do país, por exemplo 55.",
        ));
    }
    let req = services::accounts::AddNumber {
        phone: body.phone,
        verified_name: body.verified_name,
        cc,
        method: body.method.unwrap_or_else(|| "SMS".into()),
        same_group: body.same_group,
    };
    let out = state
        .services
        .add_number(auth.account_id(), &waba, req)
        .await?;
    Ok((StatusCode::CREATED, Data::json(out)))
}

#[utoipa::path(
    get,
    operation_id = "accounts_bm",
    summary = "Lê um BM com verificação, pagamento e números",
    path = "/bms/{id}",
    tag = "WABAs, BMs e visão geral",
    params(("id" = i64, Path, description = "Id do recurso (inteiro); de outra conta → 404")),
    responses((status = 200, description = "BM com verificação, pagamento, envio e números", body = Data<BmView>))
)]
async fn bm(
    State(state): State<AppState>,
    auth: Auth,
    IdPath(id): IdPath,
) -> Result<Json<Data<BmView>>, ApiError> {
    Ok(Data::json(
        state.services.bm_view(auth.account_id(), id).await?,
    ))
}

#[utoipa::path(
    post,
    operation_id = "accounts_sync_bm",
    summary = "Sincroniza os números do BM com o provedor",
    path = "/bms/{id}/sync",
    tag = "WABAs, BMs e visão geral",
    params(("id" = i64, Path, description = "Id do recurso (inteiro); de outra conta → 404")),
    responses((status = 200, description = "`data` {message, created_numbers, missing_numbers, bm}", body = Data<BmSyncedOut>))
)]
async fn sync_bm(
    State(state): State<AppState>,
    auth: Auth,
    IdPath(id): IdPath,
) -> Result<Json<Data<BmSyncedOut>>, ApiError> {
    let r = state.services.sync_bm(auth.account_id(), id).await?;
    Ok(Data::json(BmSyncedOut {
        message: format!(
            "BM relido: {} número(s) novo(s), {} ausente(s).",
            r.created_numbers.len(),
            r.missing_numbers.len()
        ),
        bm: BmGoodOut {
            id: r.bm_id,
            good: r.good,
        },
        created_numbers: r.created_numbers,
        missing_numbers: r.missing_numbers,
    }))
}

#[utoipa::path(
    post,
    operation_id = "accounts_payment_check",
    summary = "Verifica o pagamento do BM no provedor",
    path = "/bms/{id}/payment-check",
    tag = "WABAs, BMs e visão geral",
    params(("id" = i64, Path, description = "Id do recurso (inteiro); de outra conta → 404")),
    responses((status = 200, description = "`data` {message, bm}", body = Data<BmPaymentOut>))
)]
async fn payment_check(
    State(state): State<AppState>,
    auth: Auth,
    IdPath(id): IdPath,
) -> Result<Json<Data<BmPaymentOut>>, ApiError> {
    let (bm, paid) = state
        .services
        .payment_check_bm(auth.account_id(), id)
        .await?;
    let message = if paid {
        "Pagamento em dia; números liberados."
    } else {
        "O provedor ainda aponta problema de pagamento."
    };
    Ok(Data::json(BmPaymentOut {
        message,
        bm: BmPaidOut {
            id: bm.id,
            name: bm.name,
            good: paid,
            payment: if paid { "ok" } else { "pending" },
        },
    }))
}

/// `POST /bms/{id}/sync`'s answer (spec "WABAs, BMs, overview").
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct BmSyncedOut {
    /// pt-BR summary.
    message: String,
    /// Numbers found at the provider that became channels.
    created_numbers: Vec<services::accounts::SyncedNumber>,
    /// Channels whose number is gone at the provider.
    missing_numbers: Vec<services::accounts::SyncedNumber>,
    /// The BM after the sync.
    bm: BmGoodOut,
}

/// `{id, good}` of a BM.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct BmGoodOut {
    /// Id.
    id: i64,
    /// Payment in order and nothing banned.
    good: bool,
}

/// `POST /bms/{id}/payment-check`'s answer.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct BmPaymentOut {
    /// pt-BR summary.
    message: &'static str,
    /// The BM after the check.
    bm: BmPaidOut,
}

/// A BM's payment state (spec "BM record seen in results").
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct BmPaidOut {
    /// Id.
    id: i64,
    /// Name.
    name: String,
    /// Payment in order.
    good: bool,
    /// `ok` or `pending`.
    #[schema(pattern = "^(ok|pending)$")]
    payment: &'static str,
}
