//! Spec section "Messages": `POST /messages`.

use crate::envelope::{Data, Page};
use crate::error::ApiError;
use crate::extract::{Auth, IdPath, RawBody};
use crate::AppState;
use actors::protocol::{SendCommand, SendContent};
use axum::extract::State;
use axum::http::HeaderMap;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::idempotency::idempotent;
use super::message_out::{send_result, MessageOut, SendResultOut};
use super::template_in::TemplateIn;

/// Routes of this section (under `/api/v1`).
pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list, send))
        .routes(routes!(read))
        .routes(routes!(media))
}

/// The send request ("Message" › send request fields). Rules across fields, answered with
/// 422 (D-081): exactly one of `to` and `chat_id` (`ambiguous_recipient`, `required`); exactly
/// one of `text`, `template` and `media` (`ambiguous_content`); `caption` only with `media`
/// (`invalid_caption`); a `template` as [`TemplateIn`] reads it (D-127).
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[schema(as = MessageIn)]
#[serde(deny_unknown_fields)]
struct SendIn {
    #[schema(pattern = r"^\s*\+?[ ().-]*([0-9][ ().-]*){10,15}(@c\.us|@s\.whatsapp\.net)?\s*$")]
    to: Option<String>,
    #[schema(pattern = r"^\s*\+?[ ().-]*([0-9][ ().-]*){10,15}(@c\.us|@s\.whatsapp\.net)?\s*$")]
    chat_id: Option<String>,
    channel_id: Option<i64>,
    /// Free text inside the 24-hour window, 1 to 4,096 characters (PROVIDER.md §2.2).
    #[schema(min_length = 1, max_length = 4096)]
    text: Option<String>,
    template: Option<TemplateIn>,
    preview_text: Option<String>,
    media: Option<MediaIn>,
    /// With `media` only, up to 1,024 characters.
    #[schema(max_length = 1024)]
    caption: Option<String>,
}

/// `media` of a send: `{type, url}` (type image, document, video or audio).
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
struct MediaIn {
    /// `image`, `document`, `video` or `audio`.
    #[serde(rename = "type")]
    #[schema(pattern = "^(image|document|video|audio)$")]
    kind: String,
    /// A public `http(s)` URL the gateway fetches through its SSRF guard.
    #[schema(pattern = "^https?://")]
    url: String,
}

/// Reads a send's body into the command (the request's own rules: `engine::send`) and the
/// number it names, if any.
fn parse(body: SendIn) -> Result<(Option<i64>, SendCommand), ApiError> {
    let to = engine::send::recipient(body.to.as_deref(), body.chat_id.as_deref())?;
    engine::send::caption(body.caption.as_deref(), body.media.is_some())?;
    let content = match (body.media, body.text, body.template) {
        (Some(m), None, None) => {
            let kind = engine::media::MediaKind::parse("media.type", &m.kind)?;
            engine::send::media_url(&m.url)?;
            SendContent::Media {
                kind,
                url: m.url,
                caption: body.caption,
            }
        }
        (Some(_), _, _) => {
            return Err(ApiError::invalid(
                "media",
                "ambiguous_content",
                "Informe `media`, `text` ou `template`, só um deles.",
            ))
        }
        (None, Some(text), None) => {
            engine::send::text(&text)?;
            SendContent::Text { body: text }
        }
        (None, None, Some(t)) => SendContent::of_template(t.into_ref()?),
        (None, Some(_), Some(_)) => {
            return Err(ApiError::invalid(
                "text",
                "ambiguous_content",
                "Informe `text` ou `template`, não os dois.",
            ))
        }
        (None, None, None) => {
            return Err(ApiError::invalid(
                "text",
                "required",
                "Informe o conteúdo em `text` ou `template`.",
            ))
        }
    };
    Ok((
        body.channel_id,
        SendCommand {
            to,
            content,
            preview_text: body.preview_text,
            idempotency_key: None,
            group_limited: false,
            deadline: None,
            span: tracing::Span::none(),
        },
    ))
}

#[utoipa::path(
    get,
    operation_id = "messages_read",
    summary = "Lê uma mensagem e seu status",
    path = "/messages/{id}",
    tag = "Mensagens",
    params(("id" = i64, Path, description = "Id do recurso (inteiro); de outra conta → 404")),
    responses((status = 200, description = "A mensagem e seu status", body = Data<MessageOut>))
)]
async fn read(
    State(state): State<AppState>,
    auth: Auth,
    IdPath(id): IdPath,
    sender: Option<axum::Extension<storage::sender::SenderCaller>>,
) -> Result<Json<Data<MessageOut>>, ApiError> {
    if let Some(axum::Extension(caller)) = sender {
        return super::sender::message(&state, &caller, id).await;
    }
    let m = state
        .services
        .store()
        .message(auth.account_id(), id)
        .await?;
    Ok(Data::json(MessageOut::from(&m)))
}

async fn send_once(
    state: &AppState,
    auth: &Auth,
    headers: &HeaderMap,
    body: &[u8],
    idempotency_key: Option<String>,
) -> Result<(StatusCode, Value), ApiError> {
    let input: SendIn = crate::extract::parse_json(headers, body)?;
    let (channel_id, mut cmd) = parse(input)?;
    cmd.idempotency_key = idempotency_key;
    let message = state
        .services
        .send(auth.account_id(), channel_id, cmd)
        .await?;
    Ok((
        StatusCode::CREATED,
        json!({ "data": send_result(&message) }),
    ))
}

/// Envia uma mensagem
///
/// `POST /messages`. With an `Idempotency-Key` header (1 to 255 printable ASCII characters),
/// the first answer for that key is replayed for 24 hours (`Idempotent-Replayed: true`) and the
/// message is never sent twice (decisions D-024, D-045): a send whose provider outcome is
/// unknown answers 202 with the message (`sending`), and so does every retry with its key.
#[utoipa::path(
    post,
    operation_id = "messages_send",
    path = "/messages",
    tag = "Mensagens",
    request_body = SendIn,
    responses((status = 201, description = "Resultado do envio; com `Idempotency-Key`, a primeira resposta é repetida", body = Data<SendResultOut>), (status = 202, description = "Envio em dúvida: o provedor não confirmou a tempo; a mensagem (`sending`) não será enviada de novo", body = Data<SendResultOut>))
)]
async fn send(
    State(state): State<AppState>,
    auth: Auth,
    headers: HeaderMap,
    sender: Option<axum::Extension<storage::sender::SenderCaller>>,
    RawBody(body): RawBody,
) -> Response {
    if let Some(axum::Extension(caller)) = sender {
        return super::sender::send(&state, &auth, &caller, &headers, &body).await;
    }
    idempotent(&state, &auth, "", &headers, &body, |key| {
        send_once(&state, &auth, &headers, &body, key)
    })
    .await
}

/// Baixa a mídia recebida de um contato
///
/// `GET /messages/{id}/media`: the file a contact sent, streamed from the provider.
#[utoipa::path(
    get,
    operation_id = "messages_media",
    path = "/messages/{id}/media",
    tag = "Mensagens",
    params(("id" = i64, Path, description = "Id do recurso (inteiro); de outra conta → 404")),
    responses((status = 200, description = "O arquivo de mídia recebido, com o `Content-Type` do provedor (imagem, áudio, vídeo, documento)", content_type = "*/*"))
)]
async fn media(
    State(state): State<AppState>,
    auth: Auth,
    IdPath(id): IdPath,
) -> Result<Response, ApiError> {
    let (mime, len, stream) = state.services.message_media(auth.account_id(), id).await?;
    let mut resp = axum::body::Body::from_stream(stream).into_response();
    let headers = resp.headers_mut();
    if let Ok(v) = axum::http::HeaderValue::from_str(&mime) {
        headers.insert(axum::http::header::CONTENT_TYPE, v);
    }
    if let Some(n) = len {
        headers.insert(
            axum::http::header::CONTENT_LENGTH,
            axum::http::HeaderValue::from(n),
        );
    }
    Ok(resp)
}

/// Filters and paging of `GET /messages`.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
struct ListQuery {
    /// One number (channel id).
    channel_id: Option<i64>,
    /// The contact, with country code (formatting allowed).
    #[param(pattern = r"^\s*\+?[ ().-]*([0-9][ ().-]*){10,15}(@c\.us|@s\.whatsapp\.net)?\s*$")]
    to: Option<String>,
    /// `in` (received) or `out` (sent).
    #[param(pattern = "^(in|out)$")]
    direction: Option<String>,
    /// `queued`, `sending`, `sent`, `delivered`, `read`, `failed`, `skipped`, `received`.
    #[param(pattern = "^(queued|sending|sent|delivered|read|failed|skipped|received)$")]
    status: Option<String>,
    /// Created at or after (ISO 8601 with zone).
    #[param(format = DateTime)]
    since: Option<String>,
    /// Created before (ISO 8601 with zone).
    #[param(format = DateTime)]
    until: Option<String>,
    /// The `next_cursor` of the previous page (opaque).
    #[param(pattern = "^[0-9]{1,18}$")]
    cursor: Option<String>,
    /// Page size, 1 to 500 (default 100).
    #[param(minimum = 1, maximum = 500)]
    limit: Option<i64>,
}

/// Lista as mensagens da conta
///
/// `GET /messages`: the account's messages, newest first (issue 17); `{data, has_more,
/// next_cursor}`.
#[utoipa::path(
    get,
    operation_id = "messages_list",
    path = "/messages",
    tag = "Mensagens",
    params(ListQuery),
    responses((status = 200, description = "`data`: mensagens (enviadas e recebidas), a mais nova primeiro; `has_more`, `next_cursor`", body = Page<MessageOut>))
)]
async fn list(
    State(state): State<AppState>,
    auth: Auth,
    q: Result<axum::extract::Query<ListQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<Page<MessageOut>>, ApiError> {
    let axum::extract::Query(q) = q.map_err(crate::extract::query_rejection)?;
    if let Some(d) = &q.direction {
        if d != "in" && d != "out" {
            return Err(ApiError::invalid(
                "direction",
                "invalid_filter",
                "`direction` deve ser in ou out.",
            ));
        }
    }
    const STATUSES: [&str; 8] = [
        "queued",
        "sending",
        "sent",
        "delivered",
        "read",
        "failed",
        "skipped",
        "received",
    ];
    if let Some(s) = &q.status {
        if !STATUSES.contains(&s.as_str()) {
            return Err(ApiError::invalid(
                "status",
                "invalid_filter",
                format!("`status` deve ser um de: {}.", STATUSES.join(", ")),
            ));
        }
    }
    let contact =
        q.to.as_deref()
            .map(|t| engine::phone::Phone::parse("to", t).map(|p| p.as_str().to_string()))
            .transpose()?;
    let before = crate::extract::cursor(&q.cursor)?;
    let limit = q.limit.unwrap_or(100);
    if !(1..=500).contains(&limit) {
        return Err(ApiError::invalid(
            "limit",
            "invalid_limit",
            "`limit` deve estar entre 1 e 500.",
        ));
    }
    let filter = storage::messages::MessageFilter {
        channel_id: q.channel_id,
        contact,
        direction: q.direction.clone(),
        status: q.status.clone(),
        since: crate::extract::instant("since", &q.since)?,
        until: crate::extract::instant("until", &q.until)?,
    };
    let rows = state
        .services
        .store()
        .list_messages(auth.account_id(), &filter, before, limit + 1)
        .await?;
    Ok(Json(crate::extract::cursor_page(
        rows,
        limit,
        |m| m.id,
        |m| MessageOut::from(m),
    )))
}
