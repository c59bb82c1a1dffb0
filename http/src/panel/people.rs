//! Panel users (Admin), clients, tasks, and the account's templates and wiki pages seen from
//! the panel (the account API's handlers, one implementation).

use super::PanelUser;
use crate::envelope::{Data, List, Page};
use crate::error::ApiError;
use crate::extract::{present, ApiJson, Auth, IdPath};
use crate::routes::wiki::WikiPageOut;
use crate::AppState;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::Json;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use services::panel::TaskView;
use services::panel::{ClientView, UserChange, UserInput, UserView};
use services::templates::TemplateView;
use storage::panel::TaskFields;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_users, create_user))
        .routes(routes!(get_user, update_user, delete_user))
        .routes(routes!(list_api_tokens, create_api_token, revoke_api_token))
        .routes(routes!(list_clients, create_client))
        .routes(routes!(get_client, update_client, delete_client))
        .routes(routes!(rotate_client_secret))
        .routes(routes!(list_tasks, create_task))
        .routes(routes!(get_task, update_task, delete_task))
        .routes(routes!(list_templates, create_template))
        .routes(routes!(get_template, update_template, delete_template))
        .routes(routes!(submit_template))
        .routes(routes!(sync_template))
        .routes(routes!(reactivate_template))
        .merge(
            OpenApiRouter::new()
                .routes(routes!(template_header_example))
                .layer(axum::extract::DefaultBodyLimit::max(
                    services::panel::PHOTO_MAX_BYTES + 64 * 1024,
                )),
        )
        .routes(routes!(list_wiki, create_wiki))
        .routes(routes!(get_wiki, update_wiki, delete_wiki))
}

// ---- users ---------------------------------------------------------------------------

/// `POST /api/users` body. `bms` narrows a staff user to those BMs (empty: all);
/// `cliente_id` is the client of a Client user (required for that role).
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct UserIn {
    /// `local@domain.tld`, 254 bytes at most (stored trimmed and lowercase).
    #[schema(pattern = r"^\s*[^@\s]+@[^@\s.][^@\s]*\.[^@\s]*[^@\s.]\s*$")]
    email: String,
    /// Not blank.
    #[schema(pattern = r"\S")]
    name: String,
    /// `Admin`, `Operador` or `Client`.
    #[schema(pattern = "^(Admin|Operador|Client)$")]
    role: String,
    /// `active` (default) or `disabled`.
    #[schema(pattern = "^(active|disabled)$")]
    status: Option<String>,
    /// 10 characters at least, 256 bytes at most, not one character repeated.
    #[schema(min_length = 10, max_length = 256)]
    password: String,
    cliente_id: Option<i64>,
    #[serde(default)]
    bms: Vec<i64>,
}

/// `PUT /api/users/{id}` body: only the fields sent change.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct UserPatchIn {
    /// `local@domain.tld`, 254 bytes at most.
    #[schema(pattern = r"^\s*[^@\s]+@[^@\s.][^@\s]*\.[^@\s]*[^@\s.]\s*$")]
    email: Option<String>,
    /// Not blank.
    #[schema(pattern = r"\S")]
    name: Option<String>,
    /// `Admin`, `Operador` or `Client`.
    #[schema(pattern = "^(Admin|Operador|Client)$")]
    role: Option<String>,
    /// `active` or `disabled`.
    #[schema(pattern = "^(active|disabled)$")]
    status: Option<String>,
    /// 10 characters at least, 256 bytes at most, not one character repeated.
    #[schema(min_length = 10, max_length = 256)]
    password: Option<String>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<i64>)]
    cliente_id: Option<Option<i64>>,
    bms: Option<Vec<i64>>,
}

#[utoipa::path(get, operation_id = "panel_users_list", summary = "Lista os usuários do painel", path = "/users", tag = "Usuários",
    responses((status = 200, description = "Usuários da conta (Admin)", body = List<UserView>)))]
pub(crate) async fn list_users(
    State(state): State<AppState>,
    me: PanelUser,
) -> Result<Json<List<UserView>>, ApiError> {
    let users = state.services.store().list_users(me.account_id()).await?;
    Ok(List::json(
        users
            .iter()
            .map(|u| UserView::of(u, &me.account_slug))
            .collect(),
    ))
}

#[utoipa::path(post, operation_id = "panel_users_create", summary = "Cria um usuário do painel", path = "/users", tag = "Usuários", request_body = UserIn,
    responses((status = 201, description = "Usuário criado (a senha nunca volta)", body = Data<UserView>)))]
pub(crate) async fn create_user(
    State(state): State<AppState>,
    me: PanelUser,
    ApiJson(b): ApiJson<UserIn>,
) -> Result<(StatusCode, Json<Data<UserView>>), ApiError> {
    let user = state
        .services
        .create_user(
            me.account_id(),
            UserInput {
                email: b.email,
                name: b.name,
                role: b.role,
                status: b.status,
                password: b.password,
                client_id: b.cliente_id,
                bm_ids: b.bms,
            },
        )
        .await?;
    Ok((
        StatusCode::CREATED,
        Data::json(UserView::of(&user, &me.account_slug)),
    ))
}

#[utoipa::path(get, operation_id = "panel_users_get", summary = "Lê um usuário do painel", path = "/users/{id}", tag = "Usuários",
    params(("id" = i64, Path, description = "Id do usuário")),
    responses((status = 200, description = "Usuário", body = Data<UserView>)))]
pub(crate) async fn get_user(
    State(state): State<AppState>,
    me: PanelUser,
    IdPath(id): IdPath,
) -> Result<Json<Data<UserView>>, ApiError> {
    let u = state.services.store().user(me.account_id(), id).await?;
    Ok(Data::json(UserView::of(&u, &me.account_slug)))
}

#[utoipa::path(put, operation_id = "panel_users_update", summary = "Altera um usuário do painel", path = "/users/{id}", tag = "Usuários",
    params(("id" = i64, Path, description = "Id do usuário")), request_body = UserPatchIn,
    responses((status = 200, description = "Usuário alterado; desativado, suas sessões param na hora", body = Data<UserView>)))]
pub(crate) async fn update_user(
    State(state): State<AppState>,
    me: PanelUser,
    IdPath(id): IdPath,
    ApiJson(b): ApiJson<UserPatchIn>,
) -> Result<Json<Data<UserView>>, ApiError> {
    let u = state
        .services
        .update_user(
            me.account_id(),
            id,
            UserChange {
                email: b.email,
                name: b.name,
                role: b.role,
                status: b.status,
                password: b.password,
                client_id: b.cliente_id,
                bm_ids: b.bms,
                keep_session: Some(me.session_id),
            },
        )
        .await?;
    Ok(Data::json(UserView::of(&u, &me.account_slug)))
}

#[utoipa::path(delete, operation_id = "panel_users_delete", summary = "Remove um usuário do painel", path = "/users/{id}", tag = "Usuários",
    params(("id" = i64, Path, description = "Id do usuário")),
    responses((status = 200, description = "Usuário removido", body = Data<crate::envelope::Deleted>)))]
pub(crate) async fn delete_user(
    State(state): State<AppState>,
    me: PanelUser,
    IdPath(id): IdPath,
) -> Result<Json<Data<crate::envelope::Deleted>>, ApiError> {
    state.services.delete_user(me.account_id(), id).await?;
    Ok(crate::envelope::Deleted::json(id))
}

// ---- public sender tokens ----------------------------------------------------------

/// A user's public-sender token (never its value but at creation).
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct SenderTokenOut {
    /// Id.
    id: i64,
    /// Its user.
    user_id: i64,
    /// The value's first characters (`pub_…`).
    prefix: String,
    /// When it was made (ISO 8601).
    created_at: String,
    /// When it stopped working; null while it works.
    revoked_at: Option<String>,
    /// The value: only in the creation answer.
    #[serde(skip_serializing_if = "Option::is_none")]
    token: Option<String>,
}

fn sender_token_json(t: &storage::sender::SenderTokenRecord) -> SenderTokenOut {
    SenderTokenOut {
        id: t.id,
        user_id: t.user_id,
        prefix: t.prefix.clone(),
        created_at: actors::time::iso(t.created_at),
        revoked_at: t.revoked_at.map(actors::time::iso),
        token: None,
    }
}

/// `DELETE /api/users/{id}/api-token`'s answer.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct SenderTokenRevokedOut {
    /// The user.
    user_id: i64,
    /// Always true.
    revoked: bool,
}

/// A client as created or changed: with its forwards' signing secret when it was just made
/// (shown once).
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ClientOut {
    /// The client.
    #[serde(flatten)]
    client: ClientView,
    /// The secret that signs its forwarded events (Standard Webhooks `webhook-signature`, and
    /// the legacy `X-Svc-Signature`): only when it was
    /// just made.
    #[serde(skip_serializing_if = "Option::is_none")]
    webhook_secret: Option<String>,
}

/// `POST /api/clientes/{id}/webhook-secret`'s answer.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ClientSecretOut {
    /// The client.
    id: i64,
    /// The new secret, shown only here.
    webhook_secret: String,
}

#[utoipa::path(post, operation_id = "panel_users_api_token_create", summary = "Gera o token de remetente público do usuário", path = "/users/{id}/api-token", tag = "Usuários",
    params(("id" = i64, Path, description = "Id do usuário")),
    responses((status = 201, description = "`data`: `{token: \"pub_…\", prefix, created_at}`; o token aparece só aqui e o anterior do usuário deixa de valer", body = Data<SenderTokenOut>)))]
pub(crate) async fn create_api_token(
    State(state): State<AppState>,
    me: PanelUser,
    IdPath(id): IdPath,
) -> Result<(StatusCode, Json<Data<SenderTokenOut>>), ApiError> {
    let (value, record) = state
        .services
        .store()
        .rotate_sender_token(me.account_id(), id, me.user.id)
        .await?;
    let mut data = sender_token_json(&record);
    data.token = Some(value.expose().to_string());
    Ok((StatusCode::CREATED, Data::json(data)))
}

#[utoipa::path(get, operation_id = "panel_users_api_token_list", summary = "Lista os tokens de remetente público do usuário", path = "/users/{id}/api-token", tag = "Usuários",
    params(("id" = i64, Path, description = "Id do usuário")),
    responses((status = 200, description = "Tokens do remetente público do usuário (prefixo, criação, revogação), o mais novo primeiro", body = List<SenderTokenOut>)))]
pub(crate) async fn list_api_tokens(
    State(state): State<AppState>,
    me: PanelUser,
    IdPath(id): IdPath,
) -> Result<Json<List<SenderTokenOut>>, ApiError> {
    let store = state.services.store();
    store.user(me.account_id(), id).await?;
    let tokens = store.sender_tokens(me.account_id(), id).await?;
    Ok(List::json(tokens.iter().map(sender_token_json).collect()))
}

#[utoipa::path(delete, operation_id = "panel_users_api_token_revoke", summary = "Revoga o token de remetente público do usuário", path = "/users/{id}/api-token", tag = "Usuários",
    params(("id" = i64, Path, description = "Id do usuário")),
    responses((status = 200, description = "O token ativo do usuário deixa de valer", body = Data<SenderTokenRevokedOut>)))]
pub(crate) async fn revoke_api_token(
    State(state): State<AppState>,
    me: PanelUser,
    IdPath(id): IdPath,
) -> Result<Json<Data<SenderTokenRevokedOut>>, ApiError> {
    state
        .services
        .store()
        .revoke_sender_token(me.account_id(), id)
        .await?;
    Ok(Data::json(SenderTokenRevokedOut {
        user_id: id,
        revoked: true,
    }))
}

// ---- clients -------------------------------------------------------------------------

/// `POST /api/clientes` and `PUT /api/clientes/{id}` body (spec "Client").
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ClientIn {
    nome: String,
    /// CNPJ (check digits verified); punctuation allowed.
    documento: Option<String>,
    /// Where the events of the client's numbers go (checked by the SSRF guard).
    webhook_url: Option<String>,
}

/// A client, with its forwards' signing secret when it was just made (shown once).
fn client_json(c: &storage::panel::ClientRecord, secret: Option<engine::Secret>) -> ClientOut {
    ClientOut {
        client: ClientView::of(c),
        webhook_secret: secret.map(|s| s.expose().to_string()),
    }
}

#[utoipa::path(post, operation_id = "panel_clients_rotate_secret", summary = "Gera um novo segredo de webhook do cliente", path = "/clientes/{id}/webhook-secret", tag = "Clientes",
    params(("id" = i64, Path, description = "Id do cliente")),
    responses((status = 200, description = "`data`: `{webhook_secret}`, o novo segredo que assina os eventos encaminhados (`webhook-signature` do Standard Webhooks e o antigo `X-Svc-Signature`); aparece só aqui e vale na hora", body = Data<ClientSecretOut>)))]
pub(crate) async fn rotate_client_secret(
    State(state): State<AppState>,
    me: PanelUser,
    IdPath(id): IdPath,
) -> Result<Json<Data<ClientSecretOut>>, ApiError> {
    let secret = state
        .services
        .rotate_client_secret(me.account_id(), &me.scope(), id)
        .await?;
    Ok(Data::json(ClientSecretOut {
        id,
        webhook_secret: secret.expose().to_string(),
    }))
}

#[utoipa::path(get, operation_id = "panel_clients_list", summary = "Lista os clientes", path = "/clientes", tag = "Clientes",
    responses((status = 200, description = "Clientes com contagem de vínculos (BMs, WABAs, números); um usuário Client vê o seu", body = List<ClientView>)))]
pub(crate) async fn list_clients(
    State(state): State<AppState>,
    me: PanelUser,
) -> Result<Json<List<ClientView>>, ApiError> {
    let clients = state
        .services
        .store()
        .list_clients(me.account_id(), &me.scope())
        .await?;
    Ok(List::json(clients.iter().map(ClientView::of).collect()))
}

#[utoipa::path(post, operation_id = "panel_clients_create", summary = "Cria um cliente", path = "/clientes", tag = "Clientes", request_body = ClientIn,
    responses((status = 201, description = "Cliente criado", body = Data<ClientOut>)))]
pub(crate) async fn create_client(
    State(state): State<AppState>,
    me: PanelUser,
    ApiJson(b): ApiJson<ClientIn>,
) -> Result<(StatusCode, Json<Data<ClientOut>>), ApiError> {
    if !me.scope().is_all() {
        return Err(ApiError::Forbidden(
            "Seu usuário vê só alguns BMs; um Admin cria clientes novos e os vincula a um BM, WABA ou número do seu escopo."
                .into(),
        ));
    }
    let (c, secret) = state
        .services
        .save_client(
            me.account_id(),
            &me.scope(),
            None,
            &b.nome,
            b.documento.as_deref(),
            b.webhook_url.as_deref(),
        )
        .await?;
    Ok((StatusCode::CREATED, Data::json(client_json(&c, secret))))
}

#[utoipa::path(get, operation_id = "panel_clients_get", summary = "Lê um cliente", path = "/clientes/{id}", tag = "Clientes",
    params(("id" = i64, Path, description = "Id do cliente")),
    responses((status = 200, description = "Cliente", body = Data<ClientView>)))]
pub(crate) async fn get_client(
    State(state): State<AppState>,
    me: PanelUser,
    IdPath(id): IdPath,
) -> Result<Json<Data<ClientView>>, ApiError> {
    let found = state
        .services
        .store()
        .scoped_client(me.account_id(), &me.scope(), id)
        .await?;
    Ok(Data::json(ClientView::of(&found)))
}

#[utoipa::path(put, operation_id = "panel_clients_update", summary = "Altera um cliente", path = "/clientes/{id}", tag = "Clientes",
    params(("id" = i64, Path, description = "Id do cliente")), request_body = ClientIn,
    responses((status = 200, description = "Cliente alterado", body = Data<ClientOut>)))]
pub(crate) async fn update_client(
    State(state): State<AppState>,
    me: PanelUser,
    IdPath(id): IdPath,
    ApiJson(b): ApiJson<ClientIn>,
) -> Result<Json<Data<ClientOut>>, ApiError> {
    let (c, secret) = state
        .services
        .save_client(
            me.account_id(),
            &me.scope(),
            Some(id),
            &b.nome,
            b.documento.as_deref(),
            b.webhook_url.as_deref(),
        )
        .await?;
    Ok(Data::json(client_json(&c, secret)))
}

#[utoipa::path(delete, operation_id = "panel_clients_delete", summary = "Remove um cliente", path = "/clientes/{id}", tag = "Clientes",
    params(("id" = i64, Path, description = "Id do cliente")),
    responses((status = 200, description = "Cliente removido; os vínculos de BMs, WABAs e números são desfeitos", body = Data<crate::envelope::Deleted>)))]
pub(crate) async fn delete_client(
    State(state): State<AppState>,
    me: PanelUser,
    IdPath(id): IdPath,
) -> Result<Json<Data<crate::envelope::Deleted>>, ApiError> {
    state
        .services
        .delete_client(me.account_id(), &me.scope(), id)
        .await?;
    Ok(crate::envelope::Deleted::json(id))
}

// ---- tasks ---------------------------------------------------------------------------

/// `POST /api/tasks` and `PUT /api/tasks/{id}` body (D-059). `status` is the board's column
/// (`aberto`, `em_andamento`, `aguardando`, `resolvido`), `posicao` the place in it (from 0;
/// default the end); links name records in the caller's scope.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct TaskIn {
    titulo: String,
    #[serde(default)]
    descricao: String,
    /// Default `aberto`.
    status: Option<String>,
    /// `baixa`, `media` (default), `alta`, `urgente`.
    prioridade: Option<String>,
    posicao: Option<i64>,
    responsavel_id: Option<i64>,
    bm_id: Option<i64>,
    waba_id: Option<i64>,
    numero_id: Option<i64>,
    campanha_id: Option<i64>,
}

impl TaskIn {
    fn fields(self) -> TaskFields {
        TaskFields {
            title: self.titulo.trim().to_string(),
            description: self.descricao,
            status: self.status.unwrap_or_else(|| "aberto".into()),
            priority: self.prioridade.unwrap_or_else(|| "media".into()),
            position: self.posicao,
            assignee_id: self.responsavel_id,
            bm_id: self.bm_id,
            waba_id: self.waba_id,
            channel_id: self.numero_id,
            campaign_id: self.campanha_id,
        }
    }
}

#[utoipa::path(get, operation_id = "panel_tasks_list", summary = "Lista as tarefas do quadro por coluna", path = "/tasks", tag = "Tarefas",
    responses((status = 200, description = "Tarefas por coluna e posição: `{colunas: {aberto: […], …}, tarefas: […]}`", body = Data<TaskBoardOut>)))]
pub(crate) async fn list_tasks(
    State(state): State<AppState>,
    me: PanelUser,
) -> Result<Json<Data<TaskBoardOut>>, ApiError> {
    let tasks = state.services.store().list_tasks(me.account_id()).await?;
    let column = |status: &str| {
        tasks
            .iter()
            .filter(|t| t.status == status)
            .map(services::panel::task_json)
            .collect()
    };
    Ok(Data::json(TaskBoardOut {
        colunas: TaskColumnsOut {
            aberto: column("aberto"),
            em_andamento: column("em_andamento"),
            aguardando: column("aguardando"),
            resolvido: column("resolvido"),
        },
        tarefas: tasks.iter().map(services::panel::task_json).collect(),
    }))
}

/// The task board: each column's tasks in order, and every task.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct TaskBoardOut {
    /// The columns, in the board's order (`engine::panel::TASK_STATUSES`).
    colunas: TaskColumnsOut,
    /// Every task.
    tarefas: Vec<TaskView>,
}

/// The board's columns, each with its tasks by position.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct TaskColumnsOut {
    /// Open.
    aberto: Vec<TaskView>,
    /// In progress.
    em_andamento: Vec<TaskView>,
    /// Waiting.
    aguardando: Vec<TaskView>,
    /// Solved.
    resolvido: Vec<TaskView>,
}

#[utoipa::path(post, operation_id = "panel_tasks_create", summary = "Cria uma tarefa", path = "/tasks", tag = "Tarefas", request_body = TaskIn,
    responses((status = 201, description = "Tarefa criada", body = Data<TaskView>)))]
pub(crate) async fn create_task(
    State(state): State<AppState>,
    me: PanelUser,
    ApiJson(b): ApiJson<TaskIn>,
) -> Result<(StatusCode, Json<Data<TaskView>>), ApiError> {
    let f = b.fields();
    state
        .services
        .check_task_links(me.account_id(), &me.scope(), &f)
        .await?;
    let t = state
        .services
        .store()
        .save_task(me.account_id(), None, &f, me.user.id)
        .await?;
    Ok((
        StatusCode::CREATED,
        Data::json(services::panel::task_json(&t)),
    ))
}

#[utoipa::path(get, operation_id = "panel_tasks_get", summary = "Lê uma tarefa", path = "/tasks/{id}", tag = "Tarefas",
    params(("id" = i64, Path, description = "Id da tarefa")),
    responses((status = 200, description = "Tarefa", body = Data<TaskView>)))]
pub(crate) async fn get_task(
    State(state): State<AppState>,
    me: PanelUser,
    IdPath(id): IdPath,
) -> Result<Json<Data<TaskView>>, ApiError> {
    let t = state.services.store().task(me.account_id(), id).await?;
    Ok(Data::json(services::panel::task_json(&t)))
}

#[utoipa::path(put, operation_id = "panel_tasks_update", summary = "Altera ou move uma tarefa no quadro", path = "/tasks/{id}", tag = "Tarefas",
    params(("id" = i64, Path, description = "Id da tarefa")), request_body = TaskIn,
    responses((status = 200, description = "Tarefa alterada ou movida (coluna e posição); a coluna é renumerada", body = Data<TaskView>)))]
pub(crate) async fn update_task(
    State(state): State<AppState>,
    me: PanelUser,
    IdPath(id): IdPath,
    ApiJson(b): ApiJson<TaskIn>,
) -> Result<Json<Data<TaskView>>, ApiError> {
    let store = state.services.store();
    store.task(me.account_id(), id).await?;
    let f = b.fields();
    state
        .services
        .check_task_links(me.account_id(), &me.scope(), &f)
        .await?;
    let t = store
        .save_task(me.account_id(), Some(id), &f, me.user.id)
        .await?;
    Ok(Data::json(services::panel::task_json(&t)))
}

#[utoipa::path(delete, operation_id = "panel_tasks_delete", summary = "Remove uma tarefa", path = "/tasks/{id}", tag = "Tarefas",
    params(("id" = i64, Path, description = "Id da tarefa")),
    responses((status = 200, description = "Tarefa removida", body = Data<crate::envelope::Deleted>)))]
pub(crate) async fn delete_task(
    State(state): State<AppState>,
    me: PanelUser,
    IdPath(id): IdPath,
) -> Result<Json<Data<crate::envelope::Deleted>>, ApiError> {
    state
        .services
        .store()
        .delete_task(me.account_id(), id)
        .await?;
    Ok(crate::envelope::Deleted::json(id))
}

// ---- templates (the account's library) -----------------------------------------------

#[utoipa::path(get, operation_id = "panel_templates_list", summary = "Lista os templates da biblioteca da conta", path = "/templates", tag = "Templates",
    params(crate::extract::PageQuery),
    responses((status = 200, description = "A biblioteca da conta (a mesma de /api/v1/templates) com status por número; `has_more`, `next_cursor`", body = Page<TemplateView>)))]
pub(crate) async fn list_templates(
    state: State<AppState>,
    auth: Auth,
    q: Result<
        axum::extract::Query<crate::extract::PageQuery>,
        axum::extract::rejection::QueryRejection,
    >,
) -> Result<Json<Page<TemplateView>>, ApiError> {
    crate::routes::templates::library(state, auth, q).await
}

#[utoipa::path(post, operation_id = "panel_templates_create", summary = "Cria um template na biblioteca", path = "/templates", tag = "Templates",
    request_body = crate::routes::templates::CreateIn,
    responses((status = 201, description = "Template criado na biblioteca da conta", body = Data<TemplateView>)))]
pub(crate) async fn create_template(
    state: State<AppState>,
    auth: Auth,
    body: ApiJson<crate::routes::templates::CreateIn>,
) -> Result<(StatusCode, Json<Data<TemplateView>>), ApiError> {
    crate::routes::templates::create(state, auth, body).await
}

#[utoipa::path(put, operation_id = "panel_templates_header_example", summary = "Envia a imagem de exemplo do cabeçalho do template", path = "/templates/{id}/header-example", tag = "Templates",
    params(("id" = i64, Path, description = "Id do template")),
    request_body(content = crate::routes::templates::HeaderExampleForm, content_type = "multipart/form-data"),
    responses((status = 200, description = "O template, com a imagem de exemplo guardada (como `PUT /api/v1/templates/{id}/header-example`)", body = Data<TemplateView>)))]
pub(crate) async fn template_header_example(
    state: State<AppState>,
    auth: Auth,
    id: IdPath,
    multipart: Result<axum::extract::Multipart, axum::extract::multipart::MultipartRejection>,
) -> Result<Json<Data<TemplateView>>, ApiError> {
    crate::routes::templates::header_example(state, auth, id, multipart).await
}

#[utoipa::path(post, operation_id = "panel_templates_submit", summary = "Submete o template ao provedor nos números", path = "/templates/{id}/submit", tag = "Templates",
    params(("id" = i64, Path, description = "Id do template")),
    request_body(content = crate::routes::templates::ChannelsIn, description = "`channels`: os números (todos os da conta sem corpo)"),
    responses((status = 200, description = "Submetido ao provedor nos números (como `POST /api/v1/templates/{id}/submit`)", body = Data<TemplateView>)))]
pub(crate) async fn submit_template(
    state: State<AppState>,
    auth: Auth,
    id: IdPath,
    headers: axum::http::HeaderMap,
    body: bytes::Bytes,
) -> Result<Json<Data<TemplateView>>, ApiError> {
    crate::routes::templates::submit(state, auth, id, headers, body).await
}

#[utoipa::path(post, operation_id = "panel_templates_sync", summary = "Sincroniza o status do template com o provedor", path = "/templates/{id}/sync", tag = "Templates",
    params(("id" = i64, Path, description = "Id do template")),
    responses((status = 200, description = "Status e qualidade relidos do provedor: `{synced_channels}`", body = Data<crate::routes::templates::SyncedOut>)))]
pub(crate) async fn sync_template(
    state: State<AppState>,
    auth: Auth,
    id: IdPath,
) -> Result<Json<Data<crate::routes::templates::SyncedOut>>, ApiError> {
    crate::routes::templates::sync(state, auth, id).await
}

#[utoipa::path(post, operation_id = "panel_templates_reactivate", summary = "Reativa o template no número com uma nova versão", path = "/templates/{id}/channels/{channel_id}/reactivate", tag = "Templates",
    params(("id" = i64, Path, description = "Id do template"), ("channel_id" = i64, Path, description = "Id do número")),
    responses((status = 200, description = "Nova versão enviada para aprovação: `{nome, message}`", body = Data<crate::routes::templates::ReactivatedOut>)))]
pub(crate) async fn reactivate_template(
    state: State<AppState>,
    auth: Auth,
    path: axum::extract::Path<(String, String)>,
) -> Result<Json<Data<crate::routes::templates::ReactivatedOut>>, ApiError> {
    crate::routes::templates::reactivate(state, auth, path).await
}

#[utoipa::path(get, operation_id = "panel_templates_get", summary = "Lê um template com o status por número", path = "/templates/{id}", tag = "Templates",
    params(("id" = i64, Path, description = "Id do template")),
    responses((status = 200, description = "Template com status e qualidade por número", body = Data<TemplateView>)))]
pub(crate) async fn get_template(
    State(state): State<AppState>,
    auth: Auth,
    IdPath(id): IdPath,
) -> Result<Json<Data<TemplateView>>, ApiError> {
    Ok(Data::json(
        state.services.template_view(auth.account_id(), id).await?,
    ))
}

/// `PUT /api/templates/{id}` body: a template never submitted is edited; `status` comes from
/// the provider and is refused.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[schema(as = PanelTemplatePatch)]
#[serde(deny_unknown_fields)]
pub(crate) struct TemplatePatchIn {
    name: Option<String>,
    category: Option<String>,
    body: Option<String>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>)]
    header_text: Option<Option<String>>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>)]
    footer_text: Option<Option<String>>,
    /// Variable bindings (`var_map` of the account API).
    #[schema(value_type = Option<std::collections::BTreeMap<String, engine::library::VarBinding>>)]
    variables: Option<engine::library::VarMap>,
    /// Submit it by itself to every number later added or connected.
    auto_replicate: Option<bool>,
    /// Refused: the provider decides it.
    #[schema(value_type = Option<String>)]
    status: Option<Value>,
}

#[utoipa::path(put, operation_id = "panel_templates_update", summary = "Altera um template", path = "/templates/{id}", tag = "Templates",
    params(("id" = i64, Path, description = "Id do template")), request_body = TemplatePatchIn,
    responses((status = 200, description = "Template alterado; já enviado, editado no provedor como ele permite ou em nova versão (`edits` por WABA)", body = Data<crate::routes::templates::TemplateEditedOut>)))]
pub(crate) async fn update_template(
    State(state): State<AppState>,
    auth: Auth,
    IdPath(id): IdPath,
    ApiJson(b): ApiJson<TemplatePatchIn>,
) -> Result<Json<Data<crate::routes::templates::TemplateEditedOut>>, ApiError> {
    if b.status.is_some() {
        return Err(ApiError::invalid(
            "status",
            "campo_do_provedor",
            "O status do template vem do provedor e não é editável.",
        ));
    }
    let (view, edits) = state
        .services
        .edit_template(
            auth.account_id(),
            id,
            services::templates::TemplatePatch {
                name: b.name,
                category: b.category,
                body: b.body,
                header_text: b.header_text,
                footer_text: b.footer_text,
                var_map: b.variables,
                buttons: None,
                auto_replicate: b.auto_replicate,
            },
        )
        .await?;
    Ok(Data::json(crate::routes::templates::TemplateEditedOut {
        template: view,
        edits,
    }))
}

#[utoipa::path(delete, operation_id = "panel_templates_delete", summary = "Remove o template da biblioteca e do provedor", path = "/templates/{id}", tag = "Templates",
    params(("id" = i64, Path, description = "Id do template")),
    responses((status = 200, description = "Removido da biblioteca e do provedor", body = Data<crate::envelope::Deleted>)))]
pub(crate) async fn delete_template(
    state: State<AppState>,
    auth: Auth,
    id: IdPath,
) -> Result<Json<Data<crate::envelope::Deleted>>, ApiError> {
    crate::routes::templates::delete(state, auth, id).await
}

// ---- wiki (the account's pages) ------------------------------------------------------

#[utoipa::path(get, operation_id = "panel_wiki_list", summary = "Lista as páginas da wiki", path = "/wiki", tag = "Wiki",
    params(crate::routes::wiki::ListQuery),
    responses((status = 200, description = "Páginas da conta (as mesmas de /api/v1/wiki), sem conteúdo", body = Page<WikiPageOut>)))]
pub(crate) async fn list_wiki(
    state: State<AppState>,
    auth: Auth,
    me: PanelUser,
    q: Result<Query<crate::routes::wiki::ListQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<Page<WikiPageOut>>, ApiError> {
    // A Client user reads the public pages only (issue 46): private ones are the staff's.
    let q = match (q, me.role) {
        (Ok(Query(mut q)), engine::panel::Role::Client) => {
            q.visibility = Some("public".into());
            Ok(Query(q))
        }
        (q, _) => q,
    };
    crate::routes::wiki::list(state, auth, q).await
}

#[utoipa::path(post, operation_id = "panel_wiki_create", summary = "Cria uma página da wiki", path = "/wiki", tag = "Wiki",
    request_body = crate::routes::wiki::CreateIn,
    responses((status = 201, description = "Página criada", body = Data<WikiPageOut>)))]
pub(crate) async fn create_wiki(
    state: State<AppState>,
    auth: Auth,
    body: ApiJson<crate::routes::wiki::CreateIn>,
) -> Result<(StatusCode, Json<Data<WikiPageOut>>), ApiError> {
    crate::routes::wiki::create(state, auth, body).await
}

#[utoipa::path(get, operation_id = "panel_wiki_get", summary = "Lê uma página da wiki", path = "/wiki/{key}", tag = "Wiki",
    params(("key" = String, Path, description = "Slug da página")),
    responses((status = 200, description = "Página com o conteúdo Markdown", body = Data<WikiPageOut>)))]
pub(crate) async fn get_wiki(
    State(state): State<AppState>,
    auth: Auth,
    me: PanelUser,
    Path(slug): Path<String>,
) -> Result<Json<Data<WikiPageOut>>, ApiError> {
    let page = state
        .services
        .store()
        .wiki_page_by_slug(auth.account_id(), &slug)
        .await?;
    if me.role == engine::panel::Role::Client && page.visibility != "public" {
        return Err(ApiError::NotFound);
    }
    Ok(Data::json(crate::routes::wiki::page_json(
        &page,
        &state.config.public_url,
        &auth.0.account_slug,
        true,
    )))
}

#[utoipa::path(put, operation_id = "panel_wiki_update", summary = "Altera uma página da wiki", path = "/wiki/{key}", tag = "Wiki",
    params(("key" = i64, Path, description = "Id da página")), request_body = crate::routes::wiki::UpdateIn,
    responses((status = 200, description = "Página alterada (só os campos enviados)", body = Data<WikiPageOut>)))]
pub(crate) async fn update_wiki(
    state: State<AppState>,
    auth: Auth,
    id: IdPath,
    body: ApiJson<crate::routes::wiki::UpdateIn>,
) -> Result<Json<Data<WikiPageOut>>, ApiError> {
    crate::routes::wiki::update(state, auth, id, body).await
}

#[utoipa::path(delete, operation_id = "panel_wiki_delete", summary = "Remove uma página da wiki", path = "/wiki/{key}", tag = "Wiki",
    params(("key" = i64, Path, description = "Id da página")),
    responses((status = 200, description = "Página removida", body = Data<crate::envelope::Deleted>)))]
pub(crate) async fn delete_wiki(
    state: State<AppState>,
    auth: Auth,
    id: IdPath,
) -> Result<Json<Data<crate::envelope::Deleted>>, ApiError> {
    crate::routes::wiki::remove(state, auth, id).await
}
