//! Per-number campaign guardrails (spec "Limits": daily cap, cadence, warm-up; D-031):
//! `GET`/`PATCH /channels/{id}/guardrails` and `POST /channels/{id}/guardrails/authorize`.

use crate::envelope::Data;
use crate::error::ApiError;
use crate::extract::{ApiJson, Auth, IdPath};
use crate::AppState;
use actors::protocol::GuardrailView;
use axum::extract::State;
use axum::Json;
use engine::guardrail::{self, MAX_CADENCE_MS, MAX_CAP};
use serde::{Deserialize, Serialize};
use services::guardrails::GuardrailsPatch;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// Routes (under `/api/v1`).
pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(read, update))
        .routes(routes!(authorize))
}

/// A number's campaign guardrails (spec "Limits"; D-031): the settings and today's cap.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct GuardrailsOut {
    /// Campaign sends per local day; null: no cap.
    daily_cap: Option<i64>,
    /// Least time between two campaign sends of the number, ms (0: the provider's pace).
    cadence_ms: i64,
    /// The warm-up ramp is on.
    warmup: bool,
    /// When the ramp started (ISO 8601).
    warmup_started_at: String,
    /// The ramp's first-day cap (messages); it doubles each day up to `daily_cap`.
    warmup_initial_cap: i64,
    /// Today (local day in America/Sao_Paulo).
    today: GuardrailsTodayOut,
    /// Until when the number backs off after the provider's rate limit (ISO 8601).
    backoff_until: Option<String>,
}

/// Today's campaign cap of a number.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct GuardrailsTodayOut {
    /// The local date (`YYYY-MM-DD`).
    date: String,
    /// Campaign sends allowed today (authorizations included); null: no cap.
    cap: Option<i64>,
    /// Why the cap is what it is.
    cap_source: engine::guardrail::CapSource,
    /// The warm-up day (1 on the first), while the ramp sets the cap.
    warmup_day: Option<u32>,
    /// Extra sends an admin authorized today.
    authorized: i64,
    /// Campaign sends today.
    sent: i64,
    /// What is left today; null: no cap.
    remaining: Option<i64>,
    /// When the count starts again (ISO 8601).
    resets_at: String,
}

fn view_json(v: &GuardrailView) -> GuardrailsOut {
    let day_start = guardrail::day_start(v.day);
    GuardrailsOut {
        daily_cap: v.settings.daily_cap,
        cadence_ms: v.settings.cadence_ms,
        warmup: v.settings.warmup,
        warmup_started_at: actors::time::iso(v.settings.warmup_started_at),
        warmup_initial_cap: v.settings.warmup_initial_cap,
        today: GuardrailsTodayOut {
            date: actors::time::local_date(day_start),
            cap: v.today.cap,
            cap_source: v.today.source,
            warmup_day: v.today.warmup_day,
            authorized: v.today.authorized,
            sent: v.sent_today,
            remaining: v.today.remaining(v.sent_today),
            resets_at: actors::time::iso(v.resets_at),
        },
        backoff_until: v.backoff_until.map(actors::time::iso),
    }
}

#[utoipa::path(
    get,
    operation_id = "guardrails_read",
    summary = "Lê os limites de envio do número",
    path = "/channels/{id}/guardrails",
    tag = "Guardrails",
    params(("id" = i64, Path, description = "Id do recurso (inteiro); de outra conta → 404")),
    responses((status = 200, description = "Guardrails e o limite de hoje", body = Data<GuardrailsOut>))
)]
pub(crate) async fn read(
    State(state): State<AppState>,
    auth: Auth,
    IdPath(id): IdPath,
) -> Result<Json<Data<GuardrailsOut>>, ApiError> {
    let v = state.services.guardrails(auth.account_id(), id).await?;
    Ok(Data::json(view_json(&v)))
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct PatchIn {
    /// Campaign sends per local day, 1 to `engine::guardrail::MAX_CAP`; `null` removes the cap.
    #[serde(default, deserialize_with = "crate::extract::present")]
    #[schema(value_type = Option<i64>, minimum = 1, maximum = 1_000_000)]
    daily_cap: Option<Option<i64>>,
    /// Least ms between two campaign sends, 0 to `engine::guardrail::MAX_CADENCE_MS`.
    #[schema(minimum = 0, maximum = 60_000)]
    cadence_ms: Option<i64>,
    /// The warm-up ramp on or off.
    warmup: Option<bool>,
    /// A date (`YYYY-MM-DD`, its start in America/Sao_Paulo) or an RFC 3339 date-time.
    warmup_started_at: Option<String>,
    /// The ramp's first-day cap, 1 to `MAX_CAP`.
    #[schema(minimum = 1, maximum = 1_000_000)]
    warmup_initial_cap: Option<i64>,
}

/// An instant from RFC 3339 (`2026-11-20T09:00:00-03:00`) or a date (`2026-11-20`, its
/// start in America/Sao_Paulo).
fn parse_instant(s: &str) -> Option<i64> {
    if let Ok(t) = chrono::DateTime::parse_from_rfc3339(s) {
        return Some(t.timestamp_millis());
    }
    let d = chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d").ok()?;
    let utc_midnight = d.and_hms_opt(0, 0, 0)?.and_utc().timestamp_millis();
    Some(guardrail::day_start(guardrail::local_day(
        utc_midnight - guardrail::LOCAL_OFFSET_MS,
    )))
}

#[utoipa::path(
    patch,
    operation_id = "guardrails_update",
    summary = "Altera os limites de envio do número",
    path = "/channels/{id}/guardrails",
    tag = "Guardrails",
    params(("id" = i64, Path, description = "Id do recurso (inteiro); de outra conta → 404")),
    request_body = PatchIn,
    responses((status = 200, description = "Guardrails atualizados", body = Data<GuardrailsOut>))
)]
pub(crate) async fn update(
    State(state): State<AppState>,
    auth: Auth,
    IdPath(id): IdPath,
    ApiJson(b): ApiJson<PatchIn>,
) -> Result<Json<Data<GuardrailsOut>>, ApiError> {
    let in_range = |field: &str, v: Option<i64>, lo: i64, hi: i64| match v {
        Some(n) if !(lo..=hi).contains(&n) => Err(ApiError::invalid(
            field,
            "out_of_range",
            format!("`{field}` deve estar entre {lo} e {hi}."),
        )),
        _ => Ok(()),
    };
    in_range("daily_cap", b.daily_cap.flatten(), 1, MAX_CAP)?;
    in_range("cadence_ms", b.cadence_ms, 0, MAX_CADENCE_MS)?;
    in_range("warmup_initial_cap", b.warmup_initial_cap, 1, MAX_CAP)?;
    let warmup_started_at = match b.warmup_started_at.as_deref() {
        None => None,
        Some(s) => Some(parse_instant(s).ok_or_else(|| {
            ApiError::invalid(
                "warmup_started_at",
                "invalid_date",
                "`warmup_started_at` deve ser uma data (AAAA-MM-DD) ou data e hora RFC 3339.",
            )
        })?),
    };
    let patch = GuardrailsPatch {
        daily_cap: b.daily_cap,
        cadence_ms: b.cadence_ms,
        warmup: b.warmup,
        warmup_started_at,
        warmup_initial_cap: b.warmup_initial_cap,
    };
    let v = state
        .services
        .set_guardrails(auth.account_id(), id, patch)
        .await?;
    Ok(Data::json(view_json(&v)))
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
struct AuthorizeIn {
    /// More campaign sends today, 1 to `engine::guardrail::MAX_CAP`.
    #[schema(minimum = 1, maximum = 1_000_000)]
    extra: i64,
}

/// Autoriza envios extras de campanha hoje no número
///
/// Owner/admin only (the access table): `extra` more campaign sends today.
#[utoipa::path(
    post,
    operation_id = "guardrails_authorize",
    path = "/channels/{id}/guardrails/authorize",
    tag = "Guardrails",
    params(("id" = i64, Path, description = "Id do recurso (inteiro); de outra conta → 404")),
    request_body = AuthorizeIn,
    responses((status = 200, description = "Envios extras autorizados hoje (nível admin)", body = Data<GuardrailsOut>))
)]
async fn authorize(
    State(state): State<AppState>,
    auth: Auth,
    IdPath(id): IdPath,
    ApiJson(b): ApiJson<AuthorizeIn>,
) -> Result<Json<Data<GuardrailsOut>>, ApiError> {
    if !(1..=MAX_CAP).contains(&b.extra) {
        return Err(ApiError::invalid(
            "extra",
            "out_of_range",
            format!("`extra` deve estar entre 1 e {MAX_CAP}."),
        ));
    }
    let v = state
        .services
        .authorize_cap(auth.account_id(), id, b.extra, &auth.0.token_name)
        .await?;
    Ok(Data::json(view_json(&v)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instants_parse_from_rfc3339_or_a_local_date() {
        assert_eq!(
            parse_instant("2026-11-20"),
            parse_instant("2026-11-20T00:00:00-03:00")
        );
        assert_eq!(
            parse_instant("2026-11-20T03:00:00Z"),
            parse_instant("2026-11-20")
        );
        assert_eq!(parse_instant("20/11/2026"), None);
    }
}
