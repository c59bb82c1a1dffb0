//! The web panel's handlers: each reads or writes through the panel API as the operator's
//! session ([`Caller`]) and renders an askama template (`http/templates/`). Form actions
//! answer a redirect (or `HX-Refresh` / a fragment for htmx) on success and the API's own
//! message on failure.

use super::views::*;
use super::{Caller, Envelope, Failure, WebError};
use super::{WebForm, WebPath};
use crate::AppState;
use askama::Template;
use axum::body::Body;
use axum::extract::{Query, RawQuery, State};
use axum::http::header::{self, HeaderMap, HeaderName, HeaderValue};
use axum::http::{Method, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{Html, IntoResponse, Redirect, Response};
use futures::Stream;
use serde::Deserialize;
use serde_json::{json, Value};
use std::convert::Infallible;
use std::time::Duration;

// ---- rendering ---------------------------------------------------------------------------

/// A template rendered as a page.
pub(super) fn render<T: Template>(t: &T) -> Result<Response, WebError> {
    t.render().map(|s| Html(s).into_response()).map_err(|e| {
        tracing::error!(error = %e, "a page template failed to render");
        WebError {
            failure: Failure::Api {
                status: StatusCode::INTERNAL_SERVER_ERROR,
                message: "A página não pôde ser montada.".into(),
            },
            htmx: false,
        }
    })
}

#[derive(Template)]
#[template(path = "alerta.html")]
struct AlertFragment<'a> {
    message: &'a str,
    field: Option<&'a str>,
}

/// An error alert (`role="alert"`), swapped into `#avisos` by htmx; `field`, the form
/// control at fault (`data-campo`, marked and focused by `app.js`).
pub(super) fn alert_fragment(message: &str, field: Option<&str>) -> String {
    AlertFragment { message, field }
        .render()
        .unwrap_or_default()
}

#[derive(Template)]
#[template(path = "erro.html")]
struct ErrorPage<'a> {
    status: u16,
    message: &'a str,
}

/// A page that shows an error and the way back.
pub(super) fn error_page(status: StatusCode, message: &str) -> String {
    ErrorPage {
        status: status.as_u16(),
        message,
    }
    .render()
    .unwrap_or_default()
}

/// After a successful form action: back to `to` (a redirect, or `HX-Location` for htmx).
pub(super) fn done(c: &Caller, to: &str, toast: &str) -> Response {
    if c.htmx {
        match HeaderValue::from_str(to) {
            Ok(v) => {
                let mut r = (
                    StatusCode::OK,
                    [(HeaderName::from_static("hx-location"), v)],
                )
                    .into_response();
                r.headers_mut().insert(
                    HeaderName::from_static("hx-trigger"),
                    super::toast_trigger(toast),
                );
                r
            }
            Err(_) => Redirect::to("/").into_response(),
        }
    } else {
        Redirect::to(to).into_response()
    }
}

/// `Some(n)` for a filled form field holding a number; `None` for blank.
fn opt_id(v: &Option<String>) -> Option<i64> {
    v.as_deref()
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .and_then(|s| s.parse().ok())
}

/// A filled form field, trimmed; `None` for blank.
fn opt_text(v: &Option<String>) -> Option<String> {
    v.as_deref()
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

/// Percent-encodes a query value.
pub(super) fn q(v: &str) -> String {
    url::form_urlencoded::byte_serialize(v.as_bytes()).collect()
}

// ---- login ---------------------------------------------------------------------------------

#[derive(Template)]
#[template(path = "login.html")]
struct LoginPage {
    message: Option<String>,
    email: String,
}

#[derive(Debug, Deserialize)]
pub(super) struct LoginQuery {
    expirada: Option<String>,
}

pub(super) async fn login_page(Query(q): Query<LoginQuery>) -> Result<Response, WebError> {
    render(&LoginPage {
        message: q
            .expirada
            .map(|_| "Sua sessão expirou ou foi encerrada. Entre de novo.".into()),
        email: String::new(),
    })
}

#[derive(Debug, Deserialize)]
pub(super) struct LoginForm {
    email: String,
    password: String,
}

/// `POST /login`: `POST /api/login`, then the session in the cookie.
pub(super) async fn login(
    state: State<AppState>,
    c: Caller,
    WebForm(f): WebForm<LoginForm>,
) -> Result<Response, WebError> {
    let answer = c
        .json(
            Method::POST,
            "/api/login",
            Some(json!({"email": f.email, "password": f.password})),
        )
        .await;
    match answer {
        Ok(v) => {
            let token = v["data"]["token"].as_str().unwrap_or_default();
            let Some(cookie) = super::session_cookie(token, super::secure_cookies(&state)) else {
                return Err(c.fail(Failure::Api {
                    status: StatusCode::BAD_GATEWAY,
                    message: "A sessão recebida não pôde ser guardada.".into(),
                }));
            };
            Ok(([(header::SET_COOKIE, cookie)], Redirect::to("/")).into_response())
        }
        Err(WebError {
            failure:
                Failure::Api { status, message }
                | Failure::Field {
                    status, message, ..
                },
            ..
        }) => {
            let mut page = render(&LoginPage {
                message: Some(message),
                email: f.email,
            })?;
            *page.status_mut() = status;
            Ok(page)
        }
        Err(e) => Err(e),
    }
}

/// `POST /logout`: revokes the session (`POST /api/logout`) and forgets the cookie.
pub(super) async fn logout(c: Caller) -> Response {
    if c.has_session() {
        let _ = c.json(Method::POST, "/api/logout", None).await;
    }
    (
        [(header::SET_COOKIE, super::clear_cookie())],
        Redirect::to("/login"),
    )
        .into_response()
}

// ---- dashboard -------------------------------------------------------------------------

#[derive(Template)]
#[template(path = "dashboard.html")]
struct DashboardPage {
    me: Me,
    kpis: Dashboard,
    alerts: Vec<Alert>,
    chart: SendsChart,
}

#[derive(Template)]
#[template(path = "kpis.html")]
struct KpisFragment {
    kpis: Dashboard,
    /// Admin or Operador (a Client sees no task counts).
    staff: bool,
}

impl KpisFragment {
    fn staff(&self) -> bool {
        self.staff
    }
}

impl DashboardPage {
    fn staff(&self) -> bool {
        self.me.staff()
    }
}

/// `GET /`: KPIs and alerts by severity.
pub(super) async fn dashboard(c: Caller) -> Result<Response, WebError> {
    if !c.has_session() {
        return Ok(Redirect::to("/login").into_response());
    }
    let me: Me = c.data("/api/me").await?;
    let kpis: Dashboard = c.data("/api/dashboard").await?;
    let alerts: Vec<Alert> = c.data("/api/alertas").await?;
    let hourly: HourlySends = c.data("/api/dashboard/envios-por-hora?horas=24").await?;
    render(&DashboardPage {
        me,
        kpis,
        alerts,
        chart: SendsChart::of(&hourly),
    })
}

/// A stream of rendered fragments: `make` every `every`, as SSE events named `name`; ends
/// when the session does.
fn live<F, Fut>(
    every: Duration,
    name: &'static str,
    make: F,
) -> impl Stream<Item = Result<Event, Infallible>>
where
    F: Fn() -> Fut + Send + 'static,
    Fut: std::future::Future<Output = Result<String, WebError>> + Send,
{
    futures::stream::unfold((make, true), move |(make, first)| async move {
        if !first {
            tokio::time::sleep(every).await;
        }
        match make().await {
            Ok(html) => Some((Ok(Event::default().event(name).data(html)), (make, false))),
            Err(WebError {
                failure: Failure::LoggedOut | Failure::NoSession,
                ..
            }) => None,
            Err(WebError {
                failure: Failure::Api { message, .. } | Failure::Field { message, .. },
                ..
            }) => Some((
                Ok(Event::default()
                    .event(name)
                    .data(alert_fragment(&message, None))),
                (make, false),
            )),
        }
    })
}

/// How a live stream answers when its first read fails: a session that ended gets 204 (an
/// `EventSource` stops on it) and keeps its cookie as it is — the page's next navigation
/// says the session expired; an API refusal is the refusal.
fn stream_refused<T>(first: Result<T, WebError>) -> Option<Result<Response, WebError>> {
    match first {
        Ok(_) => None,
        Err(WebError {
            failure: Failure::LoggedOut | Failure::NoSession,
            ..
        }) => Some(Ok(StatusCode::NO_CONTENT.into_response())),
        Err(e) => Some(Err(e)),
    }
}

/// `GET /eventos/dashboard`: the KPIs, re-rendered every 2 s (SSE event `kpis`).
pub(super) async fn dashboard_events(c: Caller) -> Result<Response, WebError> {
    let me = c.data::<Me>("/api/me").await;
    let staff = me.as_ref().is_ok_and(Me::staff);
    if let Some(done) = stream_refused(me) {
        return done;
    }
    let c = std::sync::Arc::new(c);
    let stream = live(Duration::from_secs(2), "kpis", move || {
        let c = c.clone();
        async move {
            let kpis: Dashboard = c.data("/api/dashboard").await?;
            KpisFragment { kpis, staff }.render().map_err(|_| {
                c.fail(Failure::Api {
                    status: StatusCode::INTERNAL_SERVER_ERROR,
                    message: "A página não pôde ser montada.".into(),
                })
            })
        }
    });
    Ok(Sse::new(stream)
        .keep_alive(KeepAlive::default())
        .into_response())
}

// ---- inventory -------------------------------------------------------------------------

#[derive(Template)]
#[template(path = "inventario.html")]
struct InventoryPage {
    me: Me,
    bms: Vec<Bm>,
    clients: Vec<Client>,
}

#[derive(Template)]
#[template(path = "bm.html")]
struct BmFragment {
    me: Me,
    bm: Bm,
    clients: Vec<Client>,
    notice: Option<String>,
}

/// `GET /inventario`: BMs → WABAs → numbers.
pub(super) async fn inventory(c: Caller) -> Result<Response, WebError> {
    let me: Me = c.data("/api/me").await?;
    let bms: Vec<Bm> = c.data("/api/business-managers").await?;
    let clients: Vec<Client> = c.data("/api/clientes").await?;
    render(&InventoryPage { me, bms, clients })
}

/// The BM form of the inventory (issue 47 item 6): secrets are write-only, a blank one keeps
/// what is stored.
#[derive(Debug, Deserialize)]
pub(super) struct BmForm {
    nome: String,
    cliente_id: Option<String>,
    cliente: Option<String>,
    id_provider: Option<String>,
    access_token: Option<String>,
    app_id: Option<String>,
    app_secret: Option<String>,
}

impl BmForm {
    /// The API's body (`BmIn`); a client picked from the list wins over a new name.
    fn body(&self) -> Value {
        let client_id = opt_text(&self.cliente_id).and_then(|c| c.parse::<i64>().ok());
        json!({
            "nome": self.nome.trim(),
            "cliente_id": client_id,
            "cliente": client_id.map_or_else(|| opt_text(&self.cliente), |_| None),
            "id_provider": opt_text(&self.id_provider),
            "access_token": opt_text(&self.access_token),
            "app_id": opt_text(&self.app_id),
            "app_secret": opt_text(&self.app_secret),
        })
    }
}

/// `POST /inventario/bms`: `POST /api/business-managers`; to the new BM's card.
pub(super) async fn create_bm(
    c: Caller,
    WebForm(f): WebForm<BmForm>,
) -> Result<Response, WebError> {
    let v = c
        .json(Method::POST, "/api/business-managers", Some(f.body()))
        .await?;
    let id = v["data"]["id"].as_i64().unwrap_or_default();
    Ok(done(&c, &format!("/inventario#bm-{id}"), "BM cadastrada."))
}

/// `POST /inventario/bms/{id}`: `PUT /api/business-managers/{id}`; to the BM's card.
pub(super) async fn update_bm(
    c: Caller,
    WebPath(id): WebPath<i64>,
    WebForm(f): WebForm<BmForm>,
) -> Result<Response, WebError> {
    c.json(
        Method::PUT,
        &format!("/api/business-managers/{id}"),
        Some(f.body()),
    )
    .await?;
    Ok(done(&c, &format!("/inventario#bm-{id}"), "BM alterada."))
}

/// `POST /inventario/bms/{id}/sync`: `POST /api/business-managers/{id}/sync`; the BM's card
/// again, with what the sync found.
pub(super) async fn sync_bm(c: Caller, WebPath(id): WebPath<i64>) -> Result<Response, WebError> {
    let me: Me = c.data("/api/me").await?;
    let v = c
        .json(
            Method::POST,
            &format!("/api/business-managers/{id}/sync"),
            None,
        )
        .await?;
    let bm: Bm = serde_json::from_value(v["data"]["bm"].clone()).map_err(|_| {
        c.fail(Failure::Api {
            status: StatusCode::BAD_GATEWAY,
            message: "A resposta da sincronização não pôde ser lida.".into(),
        })
    })?;
    let s = &v["data"]["sync"];
    let notice = format!(
        "Sincronizado: {} WABA(s), {} template(s) importado(s), {} número(s) novo(s), {} foto(s).",
        s["wabas"].as_array().map_or(0, Vec::len),
        s["templates_imported"].as_i64().unwrap_or(0),
        s["created_numbers"].as_array().map_or(0, Vec::len),
        s["photos"].as_i64().unwrap_or(0),
    );
    let clients: Vec<Client> = c.data("/api/clientes").await?;
    render(&BmFragment {
        me,
        bm,
        clients,
        notice: Some(notice),
    })
}

#[derive(Debug, Deserialize)]
pub(super) struct NumberForm {
    nome_exibicao: Option<String>,
    cliente_id: Option<String>,
}

/// `POST /inventario/numeros/{id}`: display name and client (`PUT /api/phone-numbers/{id}`).
pub(super) async fn update_number(
    c: Caller,
    WebPath(id): WebPath<i64>,
    WebForm(f): WebForm<NumberForm>,
) -> Result<Response, WebError> {
    let mut body = json!({"cliente_id": opt_id(&f.cliente_id)});
    if let Some(n) = opt_text(&f.nome_exibicao) {
        body["nome_exibicao"] = json!(n);
    }
    c.json(Method::PUT, &format!("/api/phone-numbers/{id}"), Some(body))
        .await?;
    Ok(done(
        &c,
        &format!("/inventario#numero-{id}"),
        "Número alterado.",
    ))
}

/// `POST /inventario/numeros/{id}/foto`: the multipart form as it came, to
/// `POST /api/phone-numbers/{id}/foto`.
pub(super) async fn number_photo(
    c: Caller,
    WebPath(id): WebPath<i64>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, WebError> {
    let resp = c
        .raw(
            Method::POST,
            &format!("/api/phone-numbers/{id}/foto"),
            headers.get(header::CONTENT_TYPE).cloned(),
            body,
        )
        .await?;
    c.read(resp).await?;
    Ok(done(
        &c,
        &format!("/inventario#numero-{id}"),
        "Foto de perfil trocada no provedor.",
    ))
}

#[derive(Template)]
#[template(path = "guardrails.html")]
struct GuardrailsFragment {
    id: i64,
    g: Guardrails,
    notice: Option<String>,
}

/// `GET /inventario/numeros/{id}/guardrails`: the number's guardrails and today's limit
/// (`GET /api/phone-numbers/{id}/guardrails`), loaded when its editor opens.
pub(super) async fn number_guardrails(
    c: Caller,
    WebPath(id): WebPath<i64>,
) -> Result<Response, WebError> {
    let g: Guardrails = c
        .data(&format!("/api/phone-numbers/{id}/guardrails"))
        .await?;
    render(&GuardrailsFragment {
        id,
        g,
        notice: None,
    })
}

#[derive(Debug, Deserialize)]
pub(super) struct GuardrailsForm {
    daily_cap: Option<String>,
    cadence_ms: Option<String>,
    warmup: Option<String>,
}

/// `POST /inventario/numeros/{id}/guardrails`: daily cap (blank: none), cadence and warm-up
/// (`PATCH /api/phone-numbers/{id}/guardrails`); the fragment again.
pub(super) async fn set_number_guardrails(
    c: Caller,
    WebPath(id): WebPath<i64>,
    WebForm(f): WebForm<GuardrailsForm>,
) -> Result<Response, WebError> {
    let number = |field: &'static str, v: &Option<String>| -> Result<Option<i64>, WebError> {
        match opt_text(v) {
            None => Ok(None),
            Some(t) => t.parse().map(Some).map_err(|_| {
                c.fail(Failure::Api {
                    status: StatusCode::UNPROCESSABLE_ENTITY,
                    message: format!("`{field}` deve ser um número inteiro."),
                })
            }),
        }
    };
    let mut body = json!({
        "daily_cap": number("daily_cap", &f.daily_cap)?,
        "warmup": f.warmup.is_some(),
    });
    if let Some(ms) = number("cadence_ms", &f.cadence_ms)? {
        body["cadence_ms"] = json!(ms);
    }
    let v = c
        .json(
            Method::PATCH,
            &format!("/api/phone-numbers/{id}/guardrails"),
            Some(body),
        )
        .await?;
    let g: Guardrails = serde_json::from_value(v["data"].clone()).map_err(|_| {
        c.fail(Failure::Api {
            status: StatusCode::BAD_GATEWAY,
            message: "A resposta da API do painel não pôde ser lida.".into(),
        })
    })?;
    render(&GuardrailsFragment {
        id,
        g,
        notice: Some("Guardrails salvos.".into()),
    })
}

// ---- clients, users, API tokens ----------------------------------------------------------

#[derive(Template)]
#[template(path = "clientes.html")]
struct ClientsPage {
    me: Me,
    clients: Vec<Client>,
    secret: Option<(String, String)>,
}

/// `GET /clientes`.
pub(super) async fn clients(c: Caller) -> Result<Response, WebError> {
    let me: Me = c.data("/api/me").await?;
    let clients: Vec<Client> = c.data("/api/clientes").await?;
    render(&ClientsPage {
        me,
        clients,
        secret: None,
    })
}

#[derive(Debug, Deserialize)]
pub(super) struct ClientForm {
    nome: String,
    documento: Option<String>,
    webhook_url: Option<String>,
}

/// The clients page after a write, with `secret` (`(name, value)`) shown once when the API
/// gave one.
async fn clients_after(c: &Caller, secret: Option<(String, String)>) -> Result<Response, WebError> {
    let me: Me = c.data("/api/me").await?;
    let clients: Vec<Client> = c.data("/api/clientes").await?;
    render(&ClientsPage {
        me,
        clients,
        secret,
    })
}

/// `POST /clientes/{id}`: `PUT /api/clientes/{id}` (name, document, webhook URL; issue 47
/// item 6); the page again, with the webhook secret when a first URL brought one.
pub(super) async fn update_client(
    c: Caller,
    WebPath(id): WebPath<i64>,
    WebForm(f): WebForm<ClientForm>,
) -> Result<Response, WebError> {
    let v = c
        .json(
            Method::PUT,
            &format!("/api/clientes/{id}"),
            Some(json!({"nome": f.nome, "documento": opt_text(&f.documento), "webhook_url": opt_text(&f.webhook_url)})),
        )
        .await?;
    let secret = v["data"]["webhook_secret"].as_str().map(|s| {
        (
            v["data"]["nome"].as_str().unwrap_or_default().to_string(),
            s.to_string(),
        )
    });
    clients_after(&c, secret).await
}

/// `POST /clientes/{id}/remover`: `DELETE /api/clientes/{id}` (its links to BMs, WABAs and
/// numbers are undone); the page again.
pub(super) async fn delete_client(
    c: Caller,
    WebPath(id): WebPath<i64>,
) -> Result<Response, WebError> {
    c.json(Method::DELETE, &format!("/api/clientes/{id}"), None)
        .await?;
    clients_after(&c, None).await
}

/// `POST /clientes`: `POST /api/clientes`; the page again with the webhook secret, shown once.
pub(super) async fn create_client(
    c: Caller,
    WebForm(f): WebForm<ClientForm>,
) -> Result<Response, WebError> {
    let v = c
        .json(
            Method::POST,
            "/api/clientes",
            Some(json!({"nome": f.nome, "documento": opt_text(&f.documento), "webhook_url": opt_text(&f.webhook_url)})),
        )
        .await?;
    let secret = v["data"]["webhook_secret"].as_str().map(|s| {
        (
            v["data"]["nome"].as_str().unwrap_or_default().to_string(),
            s.to_string(),
        )
    });
    clients_after(&c, secret).await
}

#[derive(Template)]
#[template(path = "segredo.html")]
struct SecretFragment {
    label: String,
    value: String,
}

/// `POST /clientes/{id}/segredo`: a new webhook secret (`POST /api/clientes/{id}/webhook-secret`),
/// shown once in place.
pub(super) async fn rotate_client_secret(
    c: Caller,
    WebPath(id): WebPath<i64>,
) -> Result<Response, WebError> {
    let v = c
        .json(
            Method::POST,
            &format!("/api/clientes/{id}/webhook-secret"),
            None,
        )
        .await?;
    render(&SecretFragment {
        label: "Novo segredo do webhook (mostrado uma vez; assinaturas antigas deixam de valer)"
            .into(),
        value: v["data"]["webhook_secret"]
            .as_str()
            .unwrap_or_default()
            .into(),
    })
}

#[derive(Template)]
#[template(path = "usuarios.html")]
struct UsersPage {
    me: Me,
    users: Vec<User>,
    clients: Vec<Client>,
    /// The account's BMs, for a user's scope.
    bms: Vec<Bm>,
}

/// `GET /usuarios` (Admin: the API refuses the others).
pub(super) async fn users(c: Caller) -> Result<Response, WebError> {
    let me: Me = c.data("/api/me").await?;
    let users: Vec<User> = c.data("/api/users").await?;
    let clients: Vec<Client> = c.data("/api/clientes").await?;
    let bms: Vec<Bm> = c.data("/api/business-managers").await?;
    render(&UsersPage {
        me,
        users,
        clients,
        bms,
    })
}

/// `POST /usuarios/{id}/acesso`: a user's BM scope (repeated `bms`; none ticked: every BM)
/// and a new password (blank keeps it), as `PUT /api/users/{id}` (issue 47 item 6). A Client
/// user's form has no BMs (its scope is its client).
pub(super) async fn update_access(
    c: Caller,
    WebPath(id): WebPath<i64>,
    axum::extract::RawForm(raw): axum::extract::RawForm,
) -> Result<Response, WebError> {
    let mut bms = Vec::new();
    let mut password = None;
    let mut has_scope = false;
    for (k, v) in url::form_urlencoded::parse(&raw) {
        match k.as_ref() {
            "bms" => bms.extend(v.parse::<i64>().ok()),
            "escopo" => has_scope = true,
            "password" if !v.trim().is_empty() => password = Some(v.to_string()),
            _ => {}
        }
    }
    let mut body = serde_json::Map::new();
    if has_scope {
        body.insert("bms".into(), json!(bms));
    }
    if let Some(p) = password {
        body.insert("password".into(), json!(p));
    }
    c.json(
        Method::PUT,
        &format!("/api/users/{id}"),
        Some(Value::Object(body)),
    )
    .await?;
    render(&NoticeFragment {
        message: "Acesso alterado.".into(),
    })
}

#[derive(Debug, Deserialize)]
pub(super) struct UserForm {
    email: String,
    name: String,
    role: String,
    password: String,
    cliente_id: Option<String>,
}

/// `POST /usuarios`: `POST /api/users`.
pub(super) async fn create_user(
    c: Caller,
    WebForm(f): WebForm<UserForm>,
) -> Result<Response, WebError> {
    c.json(
        Method::POST,
        "/api/users",
        Some(json!({"email": f.email, "name": f.name, "role": f.role, "password": f.password, "cliente_id": opt_id(&f.cliente_id)})),
    )
    .await?;
    Ok(done(&c, "/usuarios", "Usuário criado."))
}

#[derive(Debug, Deserialize)]
pub(super) struct UserChangeForm {
    role: String,
    status: String,
}

/// `POST /usuarios/{id}`: role and status (`PUT /api/users/{id}`; the API keeps the last
/// Admin and ends a disabled user's sessions).
pub(super) async fn update_user(
    c: Caller,
    WebPath(id): WebPath<i64>,
    WebForm(f): WebForm<UserChangeForm>,
) -> Result<Response, WebError> {
    c.json(
        Method::PUT,
        &format!("/api/users/{id}"),
        Some(json!({"role": f.role, "status": f.status})),
    )
    .await?;
    render(&NoticeFragment {
        message: "Usuário alterado.".into(),
    })
}

/// `POST /usuarios/{id}/token`: the user's public sender token (`POST /api/users/{id}/api-token`),
/// shown once in place.
pub(super) async fn create_api_token(
    c: Caller,
    WebPath(id): WebPath<i64>,
) -> Result<Response, WebError> {
    let v = c
        .json(Method::POST, &format!("/api/users/{id}/api-token"), None)
        .await?;
    render(&SecretFragment {
        label: "Token do remetente público (mostrado uma vez; o anterior foi revogado)".into(),
        value: v["data"]["token"].as_str().unwrap_or_default().into(),
    })
}

// ---- templates -------------------------------------------------------------------------

#[derive(Template)]
#[template(path = "templates.html")]
struct TemplatesPage {
    me: Me,
    templates: Vec<TemplateView>,
    numbers: Vec<Number>,
}

impl TemplatesPage {
    /// The number's phone, for a template's channel id.
    fn phone(&self, channel_id: &i64) -> String {
        phone_of(&self.numbers, *channel_id)
    }

    /// No action notice on the whole page.
    fn notice_for(&self, _template: &i64) -> Option<String> {
        None
    }
}

/// One template's card after an action on it (`template_card.html`): its per-number status
/// read again, with what the action did.
#[derive(Template)]
#[template(path = "template_card.html")]
struct TemplateCard {
    t: TemplateView,
    numbers: Vec<Number>,
    notice: String,
}

impl TemplateCard {
    fn phone(&self, channel_id: &i64) -> String {
        phone_of(&self.numbers, *channel_id)
    }

    fn notice_for(&self, _template: &i64) -> Option<String> {
        Some(self.notice.clone())
    }
}

/// The card of template `id` read again after an action whose notice is `notice`.
async fn template_card(c: &Caller, id: i64, notice: String) -> Result<Response, WebError> {
    let t: TemplateView = c.data(&format!("/api/templates/{id}")).await?;
    let numbers: Vec<Number> = c.data("/api/phone-numbers").await?;
    render(&TemplateCard { t, numbers, notice })
}

/// `GET /templates`: the library, per-number status and quality, a preview.
pub(super) async fn templates(c: Caller) -> Result<Response, WebError> {
    let me: Me = c.data("/api/me").await?;
    let templates: Vec<TemplateView> = c.data("/api/templates?limit=200").await?;
    let numbers: Vec<Number> = c.data("/api/phone-numbers").await?;
    render(&TemplatesPage {
        me,
        templates,
        numbers,
    })
}

/// `POST /templates/{id}/{acao}`: `submeter` (to every number of the account) or
/// `sincronizar` (status and quality read again) — `POST /api/templates/{id}/submit|sync`.
pub(super) async fn template_action(
    c: Caller,
    WebPath((id, action)): WebPath<(i64, String)>,
) -> Result<Response, WebError> {
    let path = match action.as_str() {
        "submeter" => format!("/api/templates/{id}/submit"),
        "sincronizar" => format!("/api/templates/{id}/sync"),
        _ => {
            return Err(c.fail(Failure::Api {
                status: StatusCode::NOT_FOUND,
                message: "Ação desconhecida.".into(),
            }))
        }
    };
    let v = c.json(Method::POST, &path, None).await?;
    template_card(&c, id, template_notice(&action, &v)).await
}

/// `POST /templates/{id}/numeros/{channel}/reativar`: a new version of a paused or disabled
/// template on that number (`POST /api/templates/{id}/channels/{channel}/reactivate`).
pub(super) async fn reactivate_template(
    c: Caller,
    WebPath((id, channel)): WebPath<(i64, i64)>,
) -> Result<Response, WebError> {
    let v = c
        .json(
            Method::POST,
            &format!("/api/templates/{id}/channels/{channel}/reactivate"),
            None,
        )
        .await?;
    template_card(&c, id, template_notice("reativar", &v)).await
}

// ---- campaigns -------------------------------------------------------------------------

#[derive(Template)]
#[template(path = "campanhas.html")]
struct CampaignsPage {
    me: Me,
    campaigns: Vec<Campaign>,
    templates: Vec<TemplateView>,
    numbers: Vec<Number>,
    dispatch: DispatchSetting,
}

/// `GET /campanhas`: the list, the CSV form and the dispatch switch.
pub(super) async fn campaigns(c: Caller) -> Result<Response, WebError> {
    let me: Me = c.data("/api/me").await?;
    let campaigns: Vec<Campaign> = c.data("/api/campaigns?limit=100").await?;
    let templates: Vec<TemplateView> = c.data("/api/templates?limit=200").await?;
    let numbers: Vec<Number> = c.data("/api/phone-numbers").await?;
    let dispatch: DispatchSetting = c.data("/api/settings/dispatch").await?;
    render(&CampaignsPage {
        me,
        campaigns,
        templates,
        numbers,
        dispatch,
    })
}

/// `POST /campanhas`: the multipart form as it came, to `POST /api/campaigns/import`; then
/// the new campaign's page.
pub(super) async fn import_campaign(
    c: Caller,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, WebError> {
    let resp = c
        .raw(
            Method::POST,
            "/api/campaigns/import",
            headers.get(header::CONTENT_TYPE).cloned(),
            body,
        )
        .await?;
    let v = c.read(resp).await?;
    let id = v["data"]["id"].as_i64().unwrap_or_default();
    Ok(done(
        &c,
        &format!("/campanhas/{id}"),
        "Campanha importada; a higienização dos contatos começou.",
    ))
}

#[derive(Template)]
#[template(path = "campanha.html")]
struct CampaignPage {
    me: Me,
    campaign: Campaign,
    report: Report,
    invalid: Option<Vec<Contact>>,
    sends: Option<Envelope<Vec<SendLine>>>,
    numbers: Vec<Number>,
    filter: SendsFilter,
    export_query: String,
    /// The reading's instant (for the ETA).
    now: chrono::DateTime<chrono::Utc>,
}

#[derive(Template)]
#[template(path = "progresso.html")]
struct ProgressFragment {
    campaign: Campaign,
    report: Report,
    numbers: Vec<Number>,
    /// The reading's instant (for the ETA).
    now: chrono::DateTime<chrono::Utc>,
}

/// The phone of a channel id among `numbers`.
fn phone_of(numbers: &[Number], id: i64) -> String {
    numbers
        .iter()
        .find(|n| n.id == id)
        .map_or_else(|| format!("#{id}"), |n| n.telefone.clone())
}

impl CampaignPage {
    fn phone(&self, id: &i64) -> String {
        phone_of(&self.numbers, *id)
    }

    /// The sends' statuses a filter may pick (the panel API's own list).
    fn statuses(&self) -> [&'static str; 7] {
        crate::panel::campaigns::SEND_STATUSES
    }

    /// Whether the filter picked `status`.
    fn selected(&self, status: &str) -> bool {
        self.filter.status.as_deref() == Some(status)
    }
}

impl ProgressFragment {
    fn phone(&self, id: &i64) -> String {
        phone_of(&self.numbers, *id)
    }
}

/// The sends' filters of a campaign page.
#[derive(Debug, Default, Deserialize)]
pub(super) struct SendsFilter {
    status: Option<String>,
    destino: Option<String>,
    cursor: Option<String>,
}

impl SendsFilter {
    /// The query string of the API (and the export) for these filters.
    fn query(&self, with_cursor: bool) -> String {
        let mut parts = Vec::new();
        if let Some(s) = opt_text(&self.status) {
            parts.push(format!("status={}", q(&s)));
        }
        if let Some(d) = opt_text(&self.destino) {
            parts.push(format!("destino={}", q(&d)));
        }
        if with_cursor {
            if let Some(cur) = opt_text(&self.cursor) {
                parts.push(format!("cursor={}", q(&cur)));
            }
        }
        parts.join("&")
    }
}

/// `GET /campanhas/{id}`: state, hygiene result, actions, live progress per number, charts,
/// sends with filters.
pub(super) async fn campaign(
    c: Caller,
    WebPath(id): WebPath<i64>,
    Query(filter): Query<SendsFilter>,
) -> Result<Response, WebError> {
    let me: Me = c.data("/api/me").await?;
    let campaign: Campaign = c.data(&format!("/api/campaigns/{id}")).await?;
    let report: Report = c.data(&format!("/api/campaigns/{id}/report")).await?;
    // The lists are parts: one that cannot be read leaves the state and the actions on the
    // page (issue 47).
    let invalid: Option<Vec<Contact>> = c
        .part(&format!(
            "/api/campaigns/{id}/contacts?status=invalid&limit=100"
        ))
        .await?
        .map(|e| e.data);
    let sends: Option<Envelope<Vec<SendLine>>> = c
        .part(&format!(
            "/api/campaigns/{id}/sends?limit=50&{}",
            filter.query(true)
        ))
        .await?;
    let numbers: Vec<Number> = c.data("/api/phone-numbers").await?;
    let export_query = filter.query(false);
    render(&CampaignPage {
        me,
        campaign,
        report,
        invalid,
        sends,
        numbers,
        filter,
        export_query,
        now: chrono::Utc::now(),
    })
}

/// `GET /campanhas/{id}/eventos`: the progress, re-rendered every second (SSE event
/// `progresso`).
pub(super) async fn campaign_events(
    c: Caller,
    WebPath(id): WebPath<i64>,
) -> Result<Response, WebError> {
    if let Some(done) = stream_refused(c.data::<Campaign>(&format!("/api/campaigns/{id}")).await) {
        return done;
    }
    let c = std::sync::Arc::new(c);
    let stream = live(Duration::from_secs(1), "progresso", move || {
        let c = c.clone();
        async move {
            let campaign: Campaign = c.data(&format!("/api/campaigns/{id}")).await?;
            let report: Report = c.data(&format!("/api/campaigns/{id}/report")).await?;
            let numbers: Vec<Number> = c.data("/api/phone-numbers").await?;
            ProgressFragment {
                campaign,
                report,
                numbers,
                now: chrono::Utc::now(),
            }
            .render()
            .map_err(|_| {
                c.fail(Failure::Api {
                    status: StatusCode::INTERNAL_SERVER_ERROR,
                    message: "A página não pôde ser montada.".into(),
                })
            })
        }
    });
    Ok(Sse::new(stream)
        .keep_alive(KeepAlive::default())
        .into_response())
}

/// `GET /campanhas/{id}/export`: the API's CSV (`GET /api/campaigns/{id}/sends/export`), as it
/// comes.
pub(super) async fn export_campaign(
    c: Caller,
    WebPath(id): WebPath<i64>,
    RawQuery(query): RawQuery,
) -> Result<Response, WebError> {
    let path = match query {
        Some(qs) if !qs.is_empty() => format!("/api/campaigns/{id}/sends/export?{qs}"),
        _ => format!("/api/campaigns/{id}/sends/export"),
    };
    let resp = c.raw(Method::GET, &path, None, Body::empty()).await?;
    if !resp.status().is_success() {
        c.read(resp).await?;
        return Err(c.fail(Failure::Api {
            status: StatusCode::BAD_GATEWAY,
            message: "A exportação não pôde ser lida.".into(),
        }));
    }
    let (parts, body) = resp.into_parts();
    let mut out = Response::new(body);
    for h in [header::CONTENT_TYPE, header::CONTENT_DISPOSITION] {
        if let Some(v) = parts.headers.get(&h) {
            out.headers_mut().insert(h, v.clone());
        }
    }
    Ok(out)
}

/// The test send's form: the destination number.
#[derive(Debug, Deserialize)]
pub(super) struct TestSendForm {
    destino: String,
}

/// `POST /campanhas/{id}/teste`: `POST /api/campaigns/{id}/test-send` (issue 47 item 10): the
/// campaign's message as its first contact will get it, sent to one number of the operator's;
/// the answer says what was sent (the API limits how many tests a day).
pub(super) async fn test_send(
    c: Caller,
    WebPath(id): WebPath<i64>,
    WebForm(f): WebForm<TestSendForm>,
) -> Result<Response, WebError> {
    let v = c
        .json(
            Method::POST,
            &format!("/api/campaigns/{id}/test-send"),
            Some(json!({"destino": f.destino.trim()})),
        )
        .await?;
    let m = &v["data"];
    let text = m["preview_text"]
        .as_str()
        .or_else(|| m["text"].as_str())
        .unwrap_or_default();
    render(&NoticeFragment {
        message: format!(
            "Teste enviado para {}: “{text}”",
            m["to"].as_str().unwrap_or_default()
        ),
    })
}

/// `POST /campanhas/{id}/{acao}`: `higienizar`, `validar`, `aprovar`, `disparar`, `pausar`,
/// `retomar`, `cancelar` — each one call of the panel API.
pub(super) async fn campaign_action(
    c: Caller,
    WebPath((id, action)): WebPath<(i64, String)>,
) -> Result<Response, WebError> {
    let (method, path, body) = match action.as_str() {
        "higienizar" => (Method::POST, format!("/api/campaigns/{id}/hygiene"), None),
        "validar" => (Method::POST, format!("/api/campaigns/{id}/validate"), None),
        "aprovar" => (Method::POST, format!("/api/campaigns/{id}/approve"), None),
        "disparar" => (Method::POST, format!("/api/campaigns/{id}/dispatch"), None),
        "pausar" => (
            Method::PUT,
            format!("/api/campaigns/{id}"),
            Some(json!({"status": "pausada"})),
        ),
        "retomar" => (
            Method::PUT,
            format!("/api/campaigns/{id}"),
            Some(json!({"status": "em_andamento"})),
        ),
        "cancelar" => (
            Method::PUT,
            format!("/api/campaigns/{id}"),
            Some(json!({"status": "cancelada"})),
        ),
        _ => {
            return Err(c.fail(Failure::Api {
                status: StatusCode::NOT_FOUND,
                message: "Ação desconhecida.".into(),
            }))
        }
    };
    c.json(method, &path, body).await?;
    Ok(done(
        &c,
        &format!("/campanhas/{id}"),
        campaign_action_toast(&action),
    ))
}

/// The toast after a campaign action went through.
fn campaign_action_toast(action: &str) -> &'static str {
    match action {
        "higienizar" => "Higienização dos contatos iniciada.",
        "validar" => "Campanha validada.",
        "aprovar" => "Campanha aprovada.",
        "disparar" => "Disparo iniciado.",
        "pausar" => "Campanha pausada.",
        "retomar" => "Campanha retomada.",
        "cancelar" => "Campanha cancelada; os contatos que faltavam não serão enviados.",
        _ => "Feito.",
    }
}

#[derive(Debug, Deserialize)]
pub(super) struct DispatchForm {
    habilitado: String,
}

/// `POST /configuracoes/disparo`: the `DISPARO_ENABLED` switch (`PUT /api/settings/dispatch`,
/// Admin).
pub(super) async fn set_dispatch(
    c: Caller,
    WebForm(f): WebForm<DispatchForm>,
) -> Result<Response, WebError> {
    c.json(
        Method::PUT,
        "/api/settings/dispatch",
        Some(json!({"habilitado": f.habilitado == "true"})),
    )
    .await?;
    let toast = if f.habilitado == "true" {
        "Disparos ligados."
    } else {
        "Disparos desligados: nenhuma campanha envia até serem ligados."
    };
    Ok(done(&c, "/campanhas", toast))
}

// ---- tasks -------------------------------------------------------------------------------

/// The kanban's columns, in order, with their titles.
const COLUMNS: &[(&str, &str)] = &[
    ("aberto", "Aberto"),
    ("em_andamento", "Em andamento"),
    ("aguardando", "Aguardando"),
    ("resolvido", "Resolvido"),
];

#[derive(Template)]
#[template(path = "tarefas.html")]
struct TasksPage {
    me: Me,
    board: BoardView,
}

#[derive(Template)]
#[template(path = "quadro.html")]
struct BoardFragment {
    board: BoardView,
}

/// The board's columns in order.
struct BoardView {
    columns: Vec<(String, String, Vec<Task>)>,
}

impl BoardView {
    fn of(mut b: Board) -> Self {
        Self {
            columns: COLUMNS
                .iter()
                .map(|(k, t)| {
                    (
                        k.to_string(),
                        t.to_string(),
                        b.colunas.remove(*k).unwrap_or_default(),
                    )
                })
                .collect(),
        }
    }

    /// The columns a card may move to: `(key, title, "selected" or "")`.
    fn options(&self, current: &str) -> Vec<(&'static str, &'static str, &'static str)> {
        COLUMNS
            .iter()
            .map(|(k, t)| (*k, *t, if *k == current { "selected" } else { "" }))
            .collect()
    }
}

/// `GET /tarefas`: the kanban board.
pub(super) async fn tasks(c: Caller) -> Result<Response, WebError> {
    let me: Me = c.data("/api/me").await?;
    let board = BoardView::of(c.data("/api/tasks").await?);
    render(&TasksPage { me, board })
}

#[derive(Debug, Deserialize)]
pub(super) struct TaskForm {
    titulo: String,
    descricao: Option<String>,
    prioridade: Option<String>,
}

/// `POST /tarefas`: `POST /api/tasks`; the board again (htmx) or the page.
pub(super) async fn create_task(
    c: Caller,
    WebForm(f): WebForm<TaskForm>,
) -> Result<Response, WebError> {
    c.json(
        Method::POST,
        "/api/tasks",
        Some(json!({"titulo": f.titulo, "descricao": f.descricao.unwrap_or_default(), "prioridade": opt_text(&f.prioridade)})),
    )
    .await?;
    if !c.htmx {
        return Ok(done(&c, "/tarefas", "Tarefa criada."));
    }
    let board = BoardView::of(c.data("/api/tasks").await?);
    render(&BoardFragment { board })
}

#[derive(Debug, Deserialize)]
pub(super) struct MoveForm {
    status: String,
    posicao: Option<String>,
}

/// `POST /tarefas/{id}/mover`: the task in another column (`PUT /api/tasks/{id}` with its
/// fields as read); the board again.
pub(super) async fn move_task(
    c: Caller,
    WebPath(id): WebPath<i64>,
    WebForm(f): WebForm<MoveForm>,
) -> Result<Response, WebError> {
    let current = c
        .json(Method::GET, &format!("/api/tasks/{id}"), None)
        .await?;
    let t = &current["data"];
    let mut body = serde_json::Map::new();
    for k in [
        "titulo",
        "descricao",
        "prioridade",
        "responsavel_id",
        "bm_id",
        "waba_id",
        "numero_id",
        "campanha_id",
    ] {
        body.insert(k.into(), t[k].clone());
    }
    body.insert("status".into(), json!(f.status));
    if let Some(p) = opt_id(&f.posicao) {
        body.insert("posicao".into(), json!(p));
    }
    c.json(
        Method::PUT,
        &format!("/api/tasks/{id}"),
        Some(Value::Object(body)),
    )
    .await?;
    let board = BoardView::of(c.data("/api/tasks").await?);
    render(&BoardFragment { board })
}

// ---- logs, audit, wiki -------------------------------------------------------------------

#[derive(Template)]
#[template(path = "webhook_logs.html")]
struct LogsPage {
    me: Me,
    logs: Envelope<Vec<WebhookLog>>,
    tipo: String,
    /// The account's numbers in scope: the provider's id → phone.
    phones: std::collections::BTreeMap<String, String>,
    /// The account's clients in scope: id → name.
    clients: std::collections::BTreeMap<i64, String>,
}

impl LogsPage {
    /// A client's name, or that it is outside the reader's scope (a client linked to a BM
    /// the reader does not see is not listed to it).
    fn client(&self, id: &i64) -> String {
        self.clients
            .get(id)
            .cloned()
            .unwrap_or_else(|| "um cliente fora do seu escopo".into())
    }
}

#[derive(Debug, Deserialize)]
pub(super) struct LogsQuery {
    tipo: Option<String>,
    cursor: Option<String>,
}

/// `GET /webhook-logs`: every verification and event the provider sent, with signature and
/// forwarding status (spec "Events").
pub(super) async fn webhook_logs(
    c: Caller,
    Query(lq): Query<LogsQuery>,
) -> Result<Response, WebError> {
    let me: Me = c.data("/api/me").await?;
    let tipo = opt_text(&lq.tipo).unwrap_or_default();
    let mut path = "/api/webhook-logs?limit=50".to_string();
    if !tipo.is_empty() {
        path.push_str(&format!("&tipo={}", q(&tipo)));
    }
    if let Some(cur) = opt_text(&lq.cursor) {
        path.push_str(&format!("&cursor={}", q(&cur)));
    }
    let logs: Envelope<Vec<WebhookLog>> = c.get(&path).await?;
    // Phones instead of provider ids where the reader may list the numbers.
    let numbers: Vec<Number> = c.data("/api/phone-numbers").await.unwrap_or_default();
    let phones = numbers
        .into_iter()
        .filter_map(|n| n.phone_number_id.map(|id| (id, n.telefone)))
        .collect();
    let clients: Vec<Client> = c.data("/api/clientes").await.unwrap_or_default();
    render(&LogsPage {
        me,
        logs,
        tipo,
        phones,
        clients: clients.into_iter().map(|c| (c.id, c.nome)).collect(),
    })
}

#[derive(Template)]
#[template(path = "aviso.html")]
struct NoticeFragment {
    message: String,
}

/// `POST /webhook-logs/{id}/reenviar`: `POST /api/webhook-logs/{id}/reforward`.
pub(super) async fn reforward(c: Caller, WebPath(id): WebPath<i64>) -> Result<Response, WebError> {
    let v = c
        .json(
            Method::POST,
            &format!("/api/webhook-logs/{id}/reforward"),
            None,
        )
        .await?;
    render(&NoticeFragment {
        message: format!(
            "Reencaminhado: {} entrega(s) na fila.",
            v["data"]["queued"].as_i64().unwrap_or(0)
        ),
    })
}

#[derive(Template)]
#[template(path = "auditoria.html")]
struct AuditPage {
    me: Me,
    lines: Envelope<Vec<AuditLine>>,
    autor: String,
    recurso: String,
    /// The filters as a query string (`autor=…&recurso=…`), for the next page's link.
    query: String,
}

impl AuditPage {
    /// The kinds of record the page filters by: `(recurso, label, "selected" or "")`.
    fn resources(&self) -> Vec<(&'static str, &'static str, &'static str)> {
        [
            ("campaigns", "campanhas"),
            ("phone-numbers", "números (painel)"),
            ("channels", "números (API)"),
            ("business-managers", "BMs"),
            ("wabas", "WABAs"),
            ("clientes", "clientes"),
            ("users", "usuários"),
            ("templates", "templates"),
            ("tasks", "tarefas"),
            ("wiki", "wiki"),
            ("messages", "mensagens"),
            ("groups", "grupos"),
        ]
        .into_iter()
        .map(|(k, l)| (k, l, if self.recurso == k { "selected" } else { "" }))
        .collect()
    }
}

#[derive(Debug, Deserialize)]
pub(super) struct AuditQuery {
    autor: Option<String>,
    recurso: Option<String>,
    cursor: Option<String>,
}

/// `GET /auditoria`: the account's audit log (`GET /api/audit-log`, Admin), each line as an
/// action ("aprovou a campanha 3"), filtered by author and kind of record (issue 47 item 10).
pub(super) async fn audit(c: Caller, Query(aq): Query<AuditQuery>) -> Result<Response, WebError> {
    let me: Me = c.data("/api/me").await?;
    let autor = opt_text(&aq.autor).unwrap_or_default();
    let recurso = opt_text(&aq.recurso).unwrap_or_default();
    let mut query = Vec::new();
    if !autor.is_empty() {
        query.push(format!("autor={}", q(&autor)));
    }
    if !recurso.is_empty() {
        query.push(format!("recurso={}", q(&recurso)));
    }
    let query = query.join("&");
    let mut path = format!("/api/audit-log?limit=100&{query}");
    if let Some(cur) = opt_text(&aq.cursor) {
        path.push_str(&format!("&cursor={}", q(&cur)));
    }
    let lines: Envelope<Vec<AuditLine>> = c.get(&path).await?;
    render(&AuditPage {
        me,
        lines,
        autor,
        recurso,
        query,
    })
}

#[derive(Template)]
#[template(path = "envios.html")]
struct ClientSendsPage {
    me: Me,
    client: String,
    numbers: Vec<Number>,
    sends: Envelope<Vec<ClientSend>>,
    numero: Option<i64>,
    status: String,
    /// The filters as a query string, for the next page's link.
    query: String,
}

impl ClientSendsPage {
    fn phone(&self, id: &i64) -> String {
        phone_of(&self.numbers, *id)
    }

    /// The statuses a filter may pick: `(status, "selected" or "")`.
    fn statuses(&self) -> Vec<(&'static str, &'static str)> {
        ["queued", "sending", "sent", "delivered", "read", "failed"]
            .into_iter()
            .map(|s| (s, if self.status == s { "selected" } else { "" }))
            .collect()
    }

    /// Whether the filter picked the number `id`.
    fn picked(&self, id: &i64) -> bool {
        self.numero == Some(*id)
    }
}

#[derive(Debug, Deserialize)]
pub(super) struct ClientSendsQuery {
    numero: Option<String>,
    status: Option<String>,
    cursor: Option<String>,
}

/// `GET /envios`: a Client user's own page (issue 47 item 7): the messages its client's numbers
/// sent (`GET /api/client/sends`), by number and status, a page at a time.
pub(super) async fn client_sends(
    c: Caller,
    Query(sq): Query<ClientSendsQuery>,
) -> Result<Response, WebError> {
    let me: Me = c.data("/api/me").await?;
    let context: ClientContext = c.data("/api/client/context").await?;
    let numero = opt_text(&sq.numero).and_then(|n| n.parse::<i64>().ok());
    let status = opt_text(&sq.status).unwrap_or_default();
    let mut query = Vec::new();
    if let Some(n) = numero {
        query.push(format!("numero_id={n}"));
    }
    if !status.is_empty() {
        query.push(format!("status={}", q(&status)));
    }
    let query = query.join("&");
    let mut path = format!("/api/client/sends?limit=50&{query}");
    if let Some(cur) = opt_text(&sq.cursor) {
        path.push_str(&format!("&cursor={}", q(&cur)));
    }
    let sends: Envelope<Vec<ClientSend>> = c.get(&path).await?;
    render(&ClientSendsPage {
        me,
        client: context.cliente.nome,
        numbers: context.numeros,
        sends,
        numero,
        status,
        query: query.replace("numero_id=", "numero="),
    })
}

#[derive(Template)]
#[template(path = "cluster.html")]
struct ClusterPage {
    me: Me,
    view: ClusterView,
}

/// `GET /cluster`: the nodes and the account's cells (`GET /api/cluster`, Admin; issue 52).
pub(super) async fn cluster(c: Caller) -> Result<Response, WebError> {
    let me: Me = c.data("/api/me").await?;
    let view: ClusterView = c.data("/api/cluster").await?;
    render(&ClusterPage { me, view })
}

#[derive(Template)]
#[template(path = "wiki.html")]
struct WikiListPage {
    me: Me,
    pages: Vec<WikiEntry>,
}

/// `GET /wiki`.
pub(super) async fn wiki(c: Caller) -> Result<Response, WebError> {
    let me: Me = c.data("/api/me").await?;
    let pages: Vec<WikiEntry> = c.data("/api/wiki?limit=200").await?;
    render(&WikiListPage { me, pages })
}

#[derive(Template)]
#[template(path = "wiki_pagina.html")]
struct WikiShowPage {
    me: Me,
    page: WikiPage,
    html: String,
    /// The page's slug as addressed.
    slug: String,
}

/// The wiki editor's form (issue 47 item 6).
#[derive(Debug, Deserialize)]
pub(super) struct WikiForm {
    title: String,
    #[serde(default)]
    content: String,
    visibility: Option<String>,
}

impl WikiForm {
    fn body(&self) -> Value {
        json!({
            "title": self.title.trim(),
            "content": self.content,
            "visibility": opt_text(&self.visibility).unwrap_or_else(|| "private".into()),
        })
    }
}

/// `POST /wiki`: `POST /api/wiki`; to the new page.
pub(super) async fn create_wiki(
    c: Caller,
    WebForm(f): WebForm<WikiForm>,
) -> Result<Response, WebError> {
    let v = c.json(Method::POST, "/api/wiki", Some(f.body())).await?;
    let slug = v["data"]["slug"].as_str().unwrap_or_default();
    Ok(done(&c, &format!("/wiki/{}", q(slug)), "Página criada."))
}

/// `POST /wiki/{slug}/editar`: `PUT /api/wiki/{id}` of the page at `slug`; to the page (its
/// slug follows a new title).
pub(super) async fn update_wiki(
    c: Caller,
    WebPath(slug): WebPath<String>,
    WebForm(f): WebForm<WikiForm>,
) -> Result<Response, WebError> {
    let page: WikiPage = c.data(&format!("/api/wiki/{}", q(&slug))).await?;
    let v = c
        .json(
            Method::PUT,
            &format!("/api/wiki/{}", page.id),
            Some(f.body()),
        )
        .await?;
    let slug = v["data"]["slug"].as_str().unwrap_or(&slug).to_string();
    Ok(done(&c, &format!("/wiki/{}", q(&slug)), "Página salva."))
}

#[derive(Debug, Deserialize)]
pub(super) struct PreviewForm {
    #[serde(default)]
    content: String,
}

/// `POST /wiki/previa`: the editor's Markdown as the page will show it (the same sanitizing
/// renderer as the page and the public page), for htmx to swap in.
pub(super) async fn wiki_preview(
    c: Caller,
    WebForm(f): WebForm<PreviewForm>,
) -> Result<Response, WebError> {
    // Only for a session (the renderer is the page's own; nothing is read or written).
    let _: Me = c.data("/api/me").await?;
    Ok(Html(crate::routes::wiki::markdown_html(&f.content)).into_response())
}

/// `GET /wiki/{slug}`: the page's Markdown as sanitized HTML (the public page's renderer).
pub(super) async fn wiki_page(
    c: Caller,
    WebPath(slug): WebPath<String>,
) -> Result<Response, WebError> {
    let me: Me = c.data("/api/me").await?;
    let page: WikiPage = c.data(&format!("/api/wiki/{}", q(&slug))).await?;
    let html = crate::routes::wiki::markdown_html(&page.content);
    render(&WikiShowPage {
        me,
        page,
        html,
        slug,
    })
}
