//! The provider webhook log (spec `panel-api.md` "Events": `GET /api/webhook-logs`, issue 21,
//! D-061): every handshake and event the provider sent, with its signature status, whether it
//! was applied, and each forward's delivery; a line's forwards can be sent again.

use super::PanelUser;
use crate::error::ApiError;
use crate::extract::IdPath;
use crate::AppState;
use axum::extract::{Query, State};
use axum::Json;
use serde::Deserialize;
use storage::forwarding::LogFilter;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list))
        .routes(routes!(reforward))
        .routes(routes!(audit_log))
}

/// Filters of `GET /api/webhook-logs`.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub(crate) struct LogQuery {
    /// `evento` or `verificacao`.
    tipo: Option<String>,
    /// A phone number id the event named.
    numero: Option<String>,
    /// A client it was forwarded to.
    cliente_id: Option<i64>,
    /// `valida`, `invalida`, `sem_validacao`.
    assinatura: Option<String>,
    /// `encaminhado`, `pendente`, `falhou`, `nao_encaminhado` (applied to the page).
    encaminhamento: Option<String>,
    /// Received at or after (ISO 8601).
    desde: Option<String>,
    /// Received before (ISO 8601).
    ate: Option<String>,
    /// The `next_cursor` of the previous page.
    cursor: Option<String>,
    /// Page size, 1 to 200 (default 50).
    limit: Option<i64>,
}

#[utoipa::path(get, operation_id = "panel_webhook_logs", summary = "Lista os webhooks recebidos do provedor", path = "/webhook-logs", tag = "Webhooks do provedor",
    params(LogQuery),
    responses((status = 200, description = "`data`: linhas, a mais nova primeiro: `{id, tipo, received_at, assinatura, http_status, aplicado, wabas, numeros, campos, detalhe, corpo (enquanto retido), encaminhamento, entregas: [{id, client_id, phone_number_id, status, attempts, last_status_code, last_error}]}`; `has_more`, `next_cursor`", body = crate::envelope::Page<ProviderLogOut>)))]
pub(crate) async fn list(
    State(state): State<AppState>,
    me: PanelUser,
    q: Result<Query<LogQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<crate::envelope::Page<ProviderLogOut>>, ApiError> {
    let Query(q) = q.map_err(crate::extract::query_rejection)?;
    if let Some(t) = &q.tipo {
        if t != "evento" && t != "verificacao" {
            return Err(ApiError::invalid(
                "tipo",
                "invalid_kind",
                "`tipo` deve ser evento ou verificacao.",
            ));
        }
    }
    let before_id = crate::extract::cursor(&q.cursor)?;
    let limit = q.limit.unwrap_or(50).clamp(1, 200);
    let mut lines = state
        .services
        .store()
        .provider_logs(
            me.account_id(),
            &me.scope(),
            &LogFilter {
                kind: q.tipo.clone(),
                phone_number_id: q.numero.clone(),
                client_id: q.cliente_id,
                signature: q.assinatura.clone(),
                since: crate::extract::instant("desde", &q.desde)?,
                until: crate::extract::instant("ate", &q.ate)?,
                before_id,
                limit: limit + 1,
            },
        )
        .await?;
    let has_more = lines.len() as i64 > limit;
    lines.truncate(limit as usize);
    let next_cursor = if has_more {
        lines.last().map(|l| l.id.to_string())
    } else {
        None
    };
    let data = lines
        .into_iter()
        .filter(|l| {
            q.encaminhamento
                .as_deref()
                .is_none_or(|e| l.encaminhamento == e)
        })
        .map(|l| ProviderLogOut {
            received_at: actors::time::iso(l.received_at),
            line: l,
        })
        .collect();
    Ok(Json(crate::envelope::Page {
        data,
        has_more,
        next_cursor,
    }))
}

/// A line of the provider's webhook log (spec "Webhook log entry").
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct ProviderLogOut {
    /// The line and its forwards.
    #[serde(flatten)]
    line: storage::forwarding::ProviderLog,
    /// When it was received (ISO 8601).
    received_at: String,
}

#[utoipa::path(post, operation_id = "panel_webhook_logs_reforward", summary = "Reencaminha aos clientes os eventos de uma linha do log", path = "/webhook-logs/{id}/reforward", tag = "Webhooks do provedor",
    params(("id" = i64, Path, description = "Id da linha do log")),
    responses((status = 200, description = "`data`: `{queued}`: os encaminhamentos da linha, enviados de novo aos clientes (novas entregas)", body = crate::envelope::Data<ReforwardedOut>)))]
pub(crate) async fn reforward(
    State(state): State<AppState>,
    me: PanelUser,
    IdPath(id): IdPath,
) -> Result<Json<crate::envelope::Data<ReforwardedOut>>, ApiError> {
    let queued = state
        .services
        .reforward(me.account_id(), &me.scope(), id)
        .await?;
    Ok(crate::envelope::Data::json(ReforwardedOut { id, queued }))
}

/// `POST /api/webhook-logs/{id}/reforward`'s answer.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct ReforwardedOut {
    /// The log line.
    id: i64,
    /// Forwards queued again (new deliveries).
    queued: u64,
}

/// Filters of `GET /api/audit-log`.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub(crate) struct AuditQuery {
    /// Lines, 1 to 500 (default 100), the newest first.
    #[param(minimum = 1, maximum = 500)]
    limit: Option<i64>,
    /// Lines whose author contains this (case-insensitive; a panel user's name or e-mail, a
    /// token's name).
    #[param(max_length = 200)]
    autor: Option<String>,
    /// Lines on one kind of record: the route's first segment after `/api` or `/api/v1`
    /// (`campaigns`, `tasks`, `phone-numbers`, `business-managers`, `clientes`, `users`,
    /// `templates`, `wiki`, `messages`…).
    #[param(pattern = "^[a-z0-9-]{1,40}$")]
    recurso: Option<String>,
    /// The `next_cursor` of the previous page.
    cursor: Option<String>,
}

/// One line of the audit log: a write made through the account API or the panel.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub(crate) struct AuditLineOut {
    /// Id.
    id: i64,
    /// Who: the token's name, or `Nome <email> (painel)` for a panel user.
    token_name: String,
    /// `METHOD /route/template`.
    action: String,
    /// The concrete path, with ids.
    target: String,
    /// The HTTP status answered.
    status: i64,
    /// When (ISO 8601, UTC).
    at: String,
}

#[utoipa::path(get, operation_id = "panel_audit_log", summary = "Lista o log de auditoria da conta", path = "/audit-log", tag = "Auditoria",
    params(AuditQuery),
    responses((status = 200, description = "As escritas da conta (API e painel), a mais recente primeiro, com `has_more` e `next_cursor`", body = crate::envelope::Page<AuditLineOut>)))]
pub(crate) async fn audit_log(
    State(state): State<AppState>,
    me: PanelUser,
    q: Result<Query<AuditQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<crate::envelope::Page<AuditLineOut>>, ApiError> {
    let Query(q) = q.map_err(crate::extract::query_rejection)?;
    let limit = q.limit.unwrap_or(100);
    if !(1..=500).contains(&limit) {
        return Err(ApiError::invalid(
            "limit",
            "invalid_limit",
            "`limit` deve estar entre 1 e 500.",
        ));
    }
    let filter = audit_filter(&q)?;
    let lines = state
        .services
        .store()
        .list_audit_where(me.account_id(), &filter, limit + 1)
        .await?;
    Ok(Json(crate::extract::cursor_page(
        lines,
        limit,
        |l| l.id,
        |l| AuditLineOut {
            id: l.id,
            token_name: l.token_name.clone(),
            action: l.action.clone(),
            target: l.target.clone(),
            status: l.status,
            at: actors::time::iso(l.at),
        },
    )))
}

/// The audit filter of `q`: 422 `invalid_field` for a `recurso` that is not a route segment
/// or an `autor` over 200 characters, `invalid_cursor` for a bad cursor.
fn audit_filter(q: &AuditQuery) -> Result<storage::accounts::AuditFilter, ApiError> {
    if q.autor.as_deref().is_some_and(|a| a.chars().count() > 200) {
        return Err(ApiError::invalid(
            "autor",
            "invalid_field",
            "`autor` deve ter até 200 caracteres.",
        ));
    }
    let author = q.autor.as_deref().map(str::trim).filter(|a| !a.is_empty());
    let resource = q.recurso.as_deref();
    if let Some(r) = resource {
        let ok = (1..=40).contains(&r.len())
            && r.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
        if !ok {
            return Err(ApiError::invalid(
                "recurso",
                "invalid_field",
                "`recurso` deve ser o primeiro trecho de uma rota, como campaigns ou tasks.",
            ));
        }
    }
    Ok(storage::accounts::AuditFilter {
        author_contains: author.map(str::to_string),
        resource: resource.map(str::to_string),
        before_id: crate::extract::cursor(&q.cursor)?,
    })
}
