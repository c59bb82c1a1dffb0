//! The Client role's own routes (spec `panel-api.md`: `GET /api/client/context`,
//! `GET /api/client/sends`): its client, the numbers that serve it with their health, and the
//! messages they sent (D-059).

use super::PanelUser;
use crate::error::ApiError;
use crate::AppState;
use axum::extract::{Query, State};
use axum::Json;
use serde::Deserialize;
use services::panel::ClientView;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(context))
        .routes(routes!(sends))
}

#[utoipa::path(get, operation_id = "panel_client_context", summary = "Lê o cliente do usuário e os números que o servem", path = "/client/context", tag = "Cliente",
    responses((status = 200, description = "`data`: `{cliente, bms, wabas, numeros}`: o cliente do usuário e os números que o servem, com saúde ao vivo", body = crate::envelope::Data<ClientContextOut>)))]
pub(crate) async fn context(
    State(state): State<AppState>,
    me: PanelUser,
) -> Result<Json<crate::envelope::Data<ClientContextOut>>, ApiError> {
    let client_id = me.user.client_id.ok_or(ApiError::NotFound)?;
    let client = state
        .services
        .store()
        .client(me.account_id(), client_id)
        .await?;
    let all = state
        .services
        .panel_state(me.account_id(), &me.scope(), &me.user, &me.account_slug)
        .await?;
    Ok(crate::envelope::Data::json(ClientContextOut {
        cliente: ClientView::of(&client),
        bms: all.bms,
        wabas: all.wabas,
        numeros: all.numeros,
    }))
}

/// `GET /api/client/context`: a Client user's client and what serves it.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct ClientContextOut {
    /// The user's client.
    cliente: ClientView,
    /// Its BMs.
    bms: Vec<services::panel::PanelBm>,
    /// Its WABAs.
    wabas: Vec<services::panel::PanelWaba>,
    /// Its numbers, with live health.
    numeros: Vec<services::panel::NumberView>,
}

/// Filters of `GET /api/client/sends`.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub(crate) struct SendsQuery {
    /// A number (channel id) of the client.
    numero_id: Option<i64>,
    /// `queued`, `sending`, `sent`, `delivered`, `read`, `failed`.
    status: Option<String>,
    /// Created at or after (ISO 8601).
    desde: Option<String>,
    /// Created before (ISO 8601).
    ate: Option<String>,
    /// The `next_cursor` of the previous page.
    cursor: Option<String>,
    /// Page size, 1 to 500 (default 100).
    limit: Option<i64>,
}

#[utoipa::path(get, operation_id = "panel_client_sends", summary = "Lista as mensagens enviadas pelos números do cliente", path = "/client/sends", tag = "Cliente",
    params(SendsQuery),
    responses((status = 200, description = "`data`: as mensagens enviadas pelos números do cliente, a mais nova primeiro, com a linha do tempo; `has_more`, `next_cursor`", body = crate::envelope::Page<crate::routes::message_out::MessageOut>)))]
pub(crate) async fn sends(
    State(state): State<AppState>,
    me: PanelUser,
    q: Result<Query<SendsQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<crate::envelope::Page<crate::routes::message_out::MessageOut>>, ApiError> {
    let Query(q) = q.map_err(crate::extract::query_rejection)?;
    let before_id = crate::extract::cursor(&q.cursor)?;
    let limit = q.limit.unwrap_or(100).clamp(1, 500);
    let rows = state
        .services
        .store()
        .client_sends(
            me.account_id(),
            &me.scope(),
            q.numero_id,
            q.status.as_deref(),
            crate::extract::instant("desde", &q.desde)?,
            crate::extract::instant("ate", &q.ate)?,
            before_id,
            limit + 1,
        )
        .await?;
    Ok(Json(crate::extract::cursor_page(
        rows,
        limit,
        |m| m.id,
        |m| crate::routes::message_out::MessageOut::from(m),
    )))
}
