//! Spec section "Reports" (decision D-036): the campaign summary and the per-message detail,
//! as JSON or as CSV (`;`, UTF-8 byte-order mark, header row). The detail CSV covers the whole
//! filter and is streamed from the database, so an export of any size holds only a few
//! hundred rows in memory.

use crate::error::ApiError;
use crate::extract::Auth;
use crate::AppState;
use actors::time::iso;
use axum::body::{Body, Bytes};
use axum::extract::{Query, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use storage::reports::{CampaignReportRow, MessageReportRow, ReportFilter, ReportStatus};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// Routes (under `/api/v1`).
pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(campaigns))
        .routes(routes!(campaign_messages))
}

/// Most rows of one detail page.
pub const MAX_LIMIT: i64 = 1000;
/// Rows of a detail page by default.
pub const DEFAULT_LIMIT: i64 = 100;
/// The UTF-8 byte-order mark that starts a CSV export (spreadsheets read the encoding from it).
pub const BOM: &str = "\u{FEFF}";

/// Filters of both reports (spec "Reports"): `de`, `ate` (YYYY-MM-DD, local days,
/// America/Sao_Paulo, both included), `campanha` (campaign id), `canal` (channel id),
/// `template` (library template id), `audiencia` (`coluna:valor`, an audience column's exact
/// value), `status` (queued, sending, sent, delivered, read, failed, skipped), `q` (text in
/// the phone, the audience columns or the campaign name); `limit` (1–1000, default 100) and
/// `offset` (the spec's) or `cursor` (the previous page's `next_cursor`: keyset, issue 17) for
/// the detail page; `format` `json` (default) or `csv`.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
struct ReportQuery {
    de: Option<String>,
    ate: Option<String>,
    campanha: Option<String>,
    canal: Option<String>,
    template: Option<String>,
    audiencia: Option<String>,
    status: Option<String>,
    q: Option<String>,
    limit: Option<String>,
    offset: Option<String>,
    cursor: Option<String>,
    format: Option<String>,
}

fn int_param(name: &'static str, v: &Option<String>) -> Result<Option<i64>, ApiError> {
    match v.as_deref().map(str::trim).filter(|s| !s.is_empty()) {
        None => Ok(None),
        Some(s) => s.parse::<i64>().map(Some).map_err(|_| {
            ApiError::invalid(
                name,
                // One code per meaning: a bad `limit` is `invalid_limit` on every list.
                if name == "limit" {
                    "invalid_limit"
                } else {
                    "invalid_filter"
                },
                format!("`{name}` deve ser um número inteiro."),
            )
        }),
    }
}

fn day_param(name: &'static str, v: &Option<String>) -> Result<Option<i64>, ApiError> {
    match v.as_deref().map(str::trim).filter(|s| !s.is_empty()) {
        None => Ok(None),
        Some(s) => {
            let date = chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d").map_err(|_| {
                ApiError::invalid(
                    name,
                    "invalid_date",
                    format!("`{name}` deve ser uma data AAAA-MM-DD."),
                )
            })?;
            let epoch = chrono::NaiveDate::from_ymd_opt(1970, 1, 1).expect("valid date");
            Ok(Some((date - epoch).num_days()))
        }
    }
}

/// Whether the answer is CSV.
fn wants_csv(q: &ReportQuery) -> Result<bool, ApiError> {
    match q.format.as_deref().unwrap_or("json") {
        "json" => Ok(false),
        "csv" => Ok(true),
        _ => Err(ApiError::invalid(
            "format",
            "invalid_filter",
            "`format` deve ser json ou csv.",
        )),
    }
}

fn filter(q: &ReportQuery) -> Result<ReportFilter, ApiError> {
    let from_day = day_param("de", &q.de)?;
    let to_day = day_param("ate", &q.ate)?;
    if let (Some(a), Some(b)) = (from_day, to_day) {
        if a > b {
            return Err(ApiError::invalid(
                "ate",
                "invalid_filter",
                "`ate` deve ser igual ou posterior a `de`.",
            ));
        }
    }
    let status = match q.status.as_deref().map(str::trim).filter(|s| !s.is_empty()) {
        None => None,
        Some(s) => Some(ReportStatus::parse(s).ok_or_else(|| {
            ApiError::invalid(
                "status",
                "invalid_filter",
                "`status` deve ser queued, sending, sent, delivered, read, failed ou skipped.",
            )
        })?),
    };
    let audience = match q.audiencia.as_deref().filter(|s| !s.trim().is_empty()) {
        None => None,
        Some(a) => {
            let Some((col, val)) = a.split_once(':').filter(|(c, _)| !c.trim().is_empty()) else {
                return Err(ApiError::invalid(
                    "audiencia",
                    "invalid_filter",
                    "`audiencia` deve ter a forma coluna:valor.",
                ));
            };
            Some((col.trim().to_string(), val.to_string()))
        }
    };
    Ok(ReportFilter {
        from_ms: from_day.map(engine::guardrail::day_start),
        until_ms: to_day.map(|d| engine::guardrail::day_start(d + 1)),
        campaign_id: int_param("campanha", &q.campanha)?,
        channel_id: int_param("canal", &q.canal)?,
        template_id: int_param("template", &q.template)?,
        audience,
        status,
        q: q.q.clone(),
    })
}

fn query(
    q: Result<Query<ReportQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<ReportQuery, ApiError> {
    q.map(|Query(q)| q).map_err(crate::extract::query_rejection)
}

fn opt_iso(ms: Option<i64>) -> Option<String> {
    ms.map(iso)
}

/// A summary row as JSON.
/// The counts of a campaign's rows by status (a report row and the totals).
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ReportCounts {
    /// Rows (recipients) in all.
    total: i64,
    /// Waiting for a number.
    queued: i64,
    /// Handed to the provider, answer pending.
    sending: i64,
    /// Accepted by the provider.
    sent: i64,
    /// Delivered (a timestamp: read ones count too).
    delivered: i64,
    /// Read.
    read: i64,
    /// Failed.
    failed: i64,
    /// Not sent on purpose.
    skipped: i64,
}

impl From<&CampaignReportRow> for ReportCounts {
    fn from(r: &CampaignReportRow) -> Self {
        ReportCounts {
            total: r.total,
            queued: r.queued,
            sending: r.sending,
            sent: r.sent,
            delivered: r.delivered,
            read: r.read,
            failed: r.failed,
            skipped: r.skipped,
        }
    }
}

/// One campaign of the summary report (spec "Report rows" › summary).
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ReportRowOut {
    /// The campaign.
    campaign_id: i64,
    /// Its name.
    name: String,
    /// Its template's name.
    template: String,
    /// Its state.
    #[schema(value_type = engine::campaign::CampaignState)]
    state: String,
    /// When it was created (ISO 8601).
    created_at: String,
    /// Its rows' counts.
    #[serde(flatten)]
    counts: ReportCounts,
}

/// The summary's totals: the counts over every campaign of the filter.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ReportTotalsOut {
    /// Campaigns in the report.
    campaigns: usize,
    /// The counts summed.
    #[serde(flatten)]
    counts: ReportCounts,
}

/// `GET /reports/campaigns` as JSON.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ReportSummaryOut {
    /// One row per campaign, newest first.
    data: Vec<ReportRowOut>,
    /// The totals.
    totals: ReportTotalsOut,
}

fn summary_json(r: &CampaignReportRow) -> ReportRowOut {
    ReportRowOut {
        campaign_id: r.campaign_id,
        name: r.name.clone(),
        template: r.template_name.clone(),
        state: r.state.clone(),
        created_at: iso(r.created_at),
        counts: ReportCounts::from(r),
    }
}

fn totals(rows: &[CampaignReportRow]) -> CampaignReportRow {
    rows.iter().fold(CampaignReportRow::default(), |mut t, r| {
        t.total += r.total;
        t.queued += r.queued;
        t.sending += r.sending;
        t.sent += r.sent;
        t.delivered += r.delivered;
        t.read += r.read;
        t.failed += r.failed;
        t.skipped += r.skipped;
        t
    })
}

/// One message of the detail report (spec "Report rows" › detail).
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ReportDetailOut {
    /// The row (campaign recipient).
    id: i64,
    /// Its campaign.
    campaign_id: i64,
    /// The campaign's name.
    campaign: String,
    /// The template's name.
    template: String,
    /// The recipient, digits with country code.
    phone: String,
    /// The audience columns of the row.
    #[schema(value_type = std::collections::BTreeMap<String, String>)]
    vars: Value,
    /// `queued`, `sending`, `sent`, `delivered`, `read`, `failed` or `skipped`.
    #[schema(value_type = engine::message::MessageStatus)]
    status: &'static str,
    /// The number used.
    channel_id: Option<i64>,
    /// Its phone.
    channel_phone: Option<String>,
    /// The message (`GET /messages/{id}`).
    message_id: Option<i64>,
    /// The provider's message id, the name it has in every answer and event.
    provider_message_id: Option<String>,
    /// Deprecated: the same as `provider_message_id` (the CSV keeps this column name).
    engine_message_id: Option<String>,
    /// When it was sent (ISO 8601).
    sent_at: Option<String>,
    /// When it was delivered.
    delivered_at: Option<String>,
    /// When it was read.
    read_at: Option<String>,
    /// The provider's error code.
    error_code: Option<i64>,
    /// The provider's error.
    error: Option<String>,
}

/// `GET /reports/campaign-messages` as JSON: a page of rows with its `limit` and `offset`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ReportDetailPage {
    /// The rows, `has_more`, `next_cursor`.
    #[serde(flatten)]
    page: crate::envelope::Page<ReportDetailOut>,
    /// The page size asked (≤ 1,000).
    limit: i64,
    /// Rows skipped.
    offset: i64,
}

/// A detail row.
fn detail_json(r: &MessageReportRow) -> ReportDetailOut {
    ReportDetailOut {
        id: r.id,
        campaign_id: r.campaign_id,
        campaign: r.campaign_name.clone(),
        template: r.template_name.clone(),
        phone: r.phone.clone(),
        vars: serde_json::from_str::<Value>(&r.vars).unwrap_or(json!({})),
        status: r.status(),
        channel_id: r.channel_id,
        channel_phone: r.channel_phone.clone(),
        message_id: r.message_id,
        provider_message_id: r.provider_message_id.clone(),
        engine_message_id: r.provider_message_id.clone(),
        sent_at: opt_iso(r.sent_at),
        delivered_at: opt_iso(r.delivered_at),
        read_at: opt_iso(r.read_at),
        error_code: r.error_code,
        error: r.error.clone(),
    }
}

/// Column names of the summary CSV (the JSON keys).
const SUMMARY_HEADER: [&str; 13] = [
    "campaign_id",
    "name",
    "template",
    "state",
    "created_at",
    "total",
    "queued",
    "sending",
    "sent",
    "delivered",
    "read",
    "failed",
    "skipped",
];

/// A text cell made inert for spreadsheets (CSV injection, OWASP): a cell that starts with
/// `=`, `+`, `-`, `@`, a tab or a carriage return is prefixed with `'`, so Excel, LibreOffice
/// and Sheets show it as text instead of running it as a formula (issue 15). Numbers and
/// timestamps disparo writes itself never start so.
/// A cell a spreadsheet will not run as a formula (a leading `=`, `+`, `-`, `@`, tab or CR is
/// quoted with `'`).
pub(crate) fn inert(cell: &str) -> String {
    match cell.chars().next() {
        Some('=' | '+' | '-' | '@' | '\t' | '\r') => format!("'{cell}"),
        _ => cell.to_string(),
    }
}

fn summary_record(r: &CampaignReportRow, totals_row: bool) -> Vec<String> {
    let (id, created) = if totals_row {
        ("TOTAL".to_string(), String::new())
    } else {
        (r.campaign_id.to_string(), iso(r.created_at))
    };
    vec![
        id,
        inert(&r.name),
        inert(&r.template_name),
        r.state.clone(),
        created,
        r.total.to_string(),
        r.queued.to_string(),
        r.sending.to_string(),
        r.sent.to_string(),
        r.delivered.to_string(),
        r.read.to_string(),
        r.failed.to_string(),
        r.skipped.to_string(),
    ]
}

/// Column names of the detail CSV (the JSON keys, without `vars`).
const DETAIL_HEADER: [&str; 15] = [
    "id",
    "campaign_id",
    "campaign",
    "template",
    "phone",
    "status",
    "channel_id",
    "channel_phone",
    "message_id",
    "engine_message_id",
    "sent_at",
    "delivered_at",
    "read_at",
    "error_code",
    "error",
];

fn detail_record(r: &MessageReportRow) -> [String; 15] {
    let s = |v: &Option<String>| inert(v.as_deref().unwrap_or_default());
    let n = |v: Option<i64>| v.map(|x| x.to_string()).unwrap_or_default();
    [
        r.id.to_string(),
        r.campaign_id.to_string(),
        inert(&r.campaign_name),
        inert(&r.template_name),
        inert(&r.phone),
        r.status().to_string(),
        n(r.channel_id),
        s(&r.channel_phone),
        n(r.message_id),
        s(&r.provider_message_id),
        s(&opt_iso(r.sent_at)),
        s(&opt_iso(r.delivered_at)),
        s(&opt_iso(r.read_at)),
        n(r.error_code),
        s(&r.error),
    ]
}

/// Encodes records as `;`-separated CSV (quoting fields that hold `;`, quotes or line
/// breaks).
pub(crate) fn csv_bytes<I, R>(records: I) -> Bytes
where
    I: IntoIterator<Item = R>,
    R: IntoIterator,
    R::Item: AsRef<[u8]>,
{
    let mut w = csv::WriterBuilder::new()
        .delimiter(b';')
        .from_writer(Vec::with_capacity(64 * 1024));
    for r in records {
        // Writing to a Vec cannot fail.
        let _ = w.write_record(r);
    }
    Bytes::from(w.into_inner().unwrap_or_default())
}

pub(crate) fn csv_response(filename: &str, body: Body) -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/csv; charset=utf-8".to_string()),
            (
                header::CONTENT_DISPOSITION,
                format!("attachment; filename=\"{filename}\""),
            ),
        ],
        body,
    )
        .into_response()
}

/// Gera o relatório por campanha
///
/// `GET /reports/campaigns`: one row per campaign with its counts over the filtered rows,
/// newest first, plus `totals`; CSV with a final `TOTAL` row.
#[utoipa::path(
    get,
    operation_id = "reports_campaigns",
    path = "/reports/campaigns",
    tag = "Relatórios",
    params(ReportQuery),
    responses((status = 200, description = "`data`: linhas por campanha, `totals`; ou o CSV (`;`, BOM)", content((ReportSummaryOut = "application/json"), (String = "text/csv"))))
)]
async fn campaigns(
    State(state): State<AppState>,
    auth: Auth,
    q: Result<Query<ReportQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Response, ApiError> {
    let q = query(q)?;
    let csv = wants_csv(&q)?;
    let f = filter(&q)?;
    let rows = state
        .services
        .store()
        .campaign_report(auth.account_id(), &f)
        .await?;
    let t = totals(&rows);
    if csv {
        let mut records: Vec<Vec<String>> =
            vec![SUMMARY_HEADER.iter().map(|h| h.to_string()).collect()];
        records.extend(rows.iter().map(|r| summary_record(r, false)));
        records.push(summary_record(&t, true));
        let mut bytes = BOM.as_bytes().to_vec();
        bytes.extend_from_slice(&csv_bytes(records));
        return Ok(csv_response("relatorio-campanhas.csv", Body::from(bytes)));
    }
    Ok(Json(ReportSummaryOut {
        data: rows.iter().map(summary_json).collect(),
        totals: ReportTotalsOut {
            campaigns: rows.len(),
            counts: ReportCounts::from(&t),
        },
    })
    .into_response())
}

/// Gera o relatório por contato de campanha com sua última mensagem
///
/// `GET /reports/campaign-messages`: one row per campaign recipient (its latest message) in
/// row order: a page of `limit` rows after `offset` with `has_more`; with `format=csv`, every
/// row of the filter, streamed.
#[utoipa::path(
    get,
    operation_id = "reports_campaign_messages",
    path = "/reports/campaign-messages",
    tag = "Relatórios",
    params(ReportQuery),
    responses((status = 200, description = "`data`: linhas, `limit`, `offset`, `has_more`; ou o CSV de todo o filtro", content((ReportDetailPage = "application/json"), (String = "text/csv"))))
)]
async fn campaign_messages(
    State(state): State<AppState>,
    auth: Auth,
    q: Result<Query<ReportQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Response, ApiError> {
    let q = query(q)?;
    let csv = wants_csv(&q)?;
    let f = filter(&q)?;
    if csv {
        return Ok(csv_response(
            "relatorio-mensagens.csv",
            stream_csv(state, auth.account_id(), f),
        ));
    }
    let limit = int_param("limit", &q.limit)?.unwrap_or(DEFAULT_LIMIT);
    if !(1..=MAX_LIMIT).contains(&limit) {
        return Err(ApiError::invalid(
            "limit",
            "invalid_limit",
            format!("`limit` deve estar entre 1 e {MAX_LIMIT}."),
        ));
    }
    let offset = int_param("offset", &q.offset)?.unwrap_or(0);
    if offset < 0 {
        return Err(ApiError::invalid(
            "offset",
            "invalid_filter",
            "`offset` não pode ser negativo.",
        ));
    }
    let after = crate::extract::cursor(&q.cursor)?;
    let rows = state
        .services
        .store()
        .campaign_messages_page(auth.account_id(), &f, limit, offset, after)
        .await?;
    Ok(Json(ReportDetailPage {
        page: crate::extract::cursor_page(rows, limit, |r| r.id, detail_json),
        limit,
        offset,
    })
    .into_response())
}

/// Rows per CSV chunk.
pub(crate) const CHUNK_ROWS: usize = 500;

/// The detail CSV as a streamed body: a task reads the rows in order into a bounded channel;
/// [`csv_body`] encodes them.
fn stream_csv(state: AppState, account_id: i64, f: ReportFilter) -> Body {
    let (tx, rx) = tokio::sync::mpsc::channel(2 * CHUNK_ROWS);
    tokio::spawn(async move {
        state
            .services
            .store()
            .stream_campaign_messages(account_id, &f, tx)
            .await;
    });
    csv_body(&DETAIL_HEADER, rx, detail_record)
}

/// A streamed CSV body (BOM, `header`, then the rows of `rx` encoded by `record` in chunks of
/// [`CHUNK_ROWS`]). A database error mid-way ends the body with an error (the client sees a cut
/// transfer, not a short file that looks whole).
pub(crate) fn csv_body<T, R>(
    header: &[&str],
    rx: tokio::sync::mpsc::Receiver<Result<T, storage::StorageError>>,
    record: fn(&T) -> R,
) -> Body
where
    T: Send + 'static,
    R: IntoIterator + 'static,
    R::Item: AsRef<[u8]>,
{
    let mut head = BOM.as_bytes().to_vec();
    head.extend_from_slice(&csv_bytes([header]));
    let first =
        futures::stream::once(async move { Ok::<Bytes, std::io::Error>(Bytes::from(head)) });
    let rows = futures::stream::unfold(rx, move |mut rx| async move {
        let mut batch = Vec::with_capacity(CHUNK_ROWS);
        if rx.recv_many(&mut batch, CHUNK_ROWS).await == 0 {
            return None;
        }
        let mut records = Vec::with_capacity(batch.len());
        for item in batch {
            match item {
                Ok(r) => records.push(record(&r)),
                Err(e) => {
                    tracing::error!(error = %e, "CSV export failed mid-way");
                    return Some((Err(std::io::Error::other("export failed")), rx));
                }
            }
        }
        Some((Ok(csv_bytes(records)), rx))
    });
    Body::from_stream(futures::StreamExt::chain(first, rows))
}
