//! The operator panel's services (spec `panel-api.md`, issue 19): login and panel users, the
//! inventory of BMs, WABAs, numbers and clients (the very records the account API serves,
//! D-054), profile pictures, the dashboard, alerts and the full state. Every read takes the
//! caller's scope and applies it in storage; a record outside it is [`ActorError::NotFound`].

use crate::connect::ConnectOfficial;
use crate::Services;
use actors::error::ActorError;
use actors::protocol::ChannelSnapshot;
use engine::channel::Tone;
use engine::ids::{AccountId, CampaignId, ChannelId};
use engine::panel::{Role, Scope, UserStatus};
use engine::Secret;
use serde::Serialize;
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap};
use storage::bms::{BmRecord, WabaRecord};
use storage::channels::ChannelRecord;
use storage::panel::{
    BmFields, ClientRecord, CreatedSession, NewUser, TaskRecord, UserPatch, UserRecord,
};
use storage::templates::{NewTemplate, TemplateChannelState};

/// Largest profile picture accepted, bytes (the provider's image limit, PROVIDER.md §3).
pub const PHOTO_MAX_BYTES: usize = 5 * 1024 * 1024;

/// A panel user as the API shows it (never its password).
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct UserView {
    /// Id.
    pub id: i64,
    /// E-mail.
    pub email: String,
    /// Name.
    pub name: String,
    /// `Admin`, `Operador`, `Client`.
    #[schema(value_type = engine::panel::Role)]
    pub role: String,
    /// `active`, `disabled`.
    #[schema(value_type = engine::panel::UserStatus)]
    pub status: String,
    /// Scope: `{bms: [ids]}` (staff; empty = all) or `{cliente_id}` (Client).
    pub scope: UserScope,
    /// The account's slug.
    pub account: String,
    /// Created (ISO 8601).
    pub created_at: String,
}

/// What a panel user sees (`UserView.scope`).
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[serde(untagged)]
pub enum UserScope {
    /// A Client: its client's records only.
    Client {
        /// The client it belongs to (always present, null until one is linked).
        #[schema(required = true)]
        cliente_id: Option<i64>,
    },
    /// Admin and Operador: these BMs (empty: every BM of the account).
    Staff {
        /// BM ids.
        bms: Vec<i64>,
    },
}

/// A BM's totals in the panel's inventory (`PanelBm.resumo`).
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct BmSummary {
    /// WABAs in scope.
    pub wabas: usize,
    /// Numbers in scope.
    pub numeros: usize,
    /// Numbers by quality rating (`GREEN`, `YELLOW`, `RED`, `UNKNOWN`…).
    pub por_qualidade: BTreeMap<String, i64>,
    /// Numbers by health tone (`ok`, `atencao`, `critico`).
    pub por_saude: BTreeMap<String, i64>,
}

/// How many records a client is linked to (`ClientView.vinculos`).
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct ClientLinks {
    /// BMs.
    pub bms: i64,
    /// WABAs.
    pub wabas: i64,
    /// Numbers linked directly.
    pub numeros: i64,
}

impl UserView {
    /// The view of a record.
    pub fn of(u: &UserRecord, account_slug: &str) -> Self {
        Self {
            id: u.id,
            email: u.email.clone(),
            name: u.name.clone(),
            role: u.role.clone(),
            status: u.status.clone(),
            scope: if u.role == "Client" {
                UserScope::Client {
                    cliente_id: u.client_id,
                }
            } else {
                UserScope::Staff {
                    bms: u.bm_scope.clone(),
                }
            },
            account: account_slug.to_string(),
            created_at: actors::time::iso(u.created_at),
        }
    }
}

/// Input of a panel user's creation.
#[derive(Debug, Clone)]
pub struct UserInput {
    /// E-mail.
    pub email: String,
    /// Name.
    pub name: String,
    /// Role wire name.
    pub role: String,
    /// Status (default `active`).
    pub status: Option<String>,
    /// Password (clear; hashed here).
    pub password: String,
    /// Client of a Client user.
    pub client_id: Option<i64>,
    /// BMs of a scoped staff user.
    pub bm_ids: Vec<i64>,
}

/// A change to a panel user; `None` keeps.
#[derive(Debug, Clone, Default)]
pub struct UserChange {
    /// E-mail.
    pub email: Option<String>,
    /// Name.
    pub name: Option<String>,
    /// Role.
    pub role: Option<String>,
    /// Status.
    pub status: Option<String>,
    /// New password.
    pub password: Option<String>,
    /// Client (`Some(None)` clears).
    pub client_id: Option<Option<i64>>,
    /// BM scope.
    pub bm_ids: Option<Vec<i64>>,
    /// The session making the change: kept when the password changes, every other session
    /// of the user ends (issue 46).
    pub keep_session: Option<i64>,
}

/// A number as the panel shows it: the channel record with its live health.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct NumberView {
    /// Channel id (the same id `GET /api/v1/channels` shows).
    pub id: i64,
    /// Provider phone number id.
    pub phone_number_id: String,
    /// Digits with country code.
    pub telefone: String,
    /// Operator's display name.
    pub nome_exibicao: String,
    /// Provider's verified name.
    pub verified_name: String,
    /// `WORKING`, `PENDING`, `DISCONNECTED` (from the provider).
    #[schema(value_type = engine::channel::ChannelStatus)]
    pub status: String,
    /// Quality rating (from the provider).
    #[schema(value_type = engine::channel::Quality)]
    pub qualidade: String,
    /// Tier (from the provider).
    pub tier: Option<String>,
    /// Provider WABA id.
    pub waba_id: String,
    /// BM id.
    pub bm_id: Option<i64>,
    /// Its own client.
    pub cliente_id: Option<i64>,
    /// The client its events go to: its own, else its WABA's, else its BM's.
    pub cliente_efetivo_id: Option<i64>,
    /// Profile picture URL at the provider.
    pub foto_url: Option<String>,
    /// Live health: code, label, tone, limit_24h, sent_24h, available.
    pub health: engine::channel::Health,
}

/// A WABA as the panel shows it.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct PanelWaba {
    /// disparo id.
    pub id: i64,
    /// Provider WABA id.
    pub id_provider: String,
    /// Name.
    pub nome: String,
    /// Operator status `ativa`/`inativa` (D-056).
    pub status: String,
    /// Provider standing `ok`/`restricted`/`banned` (not editable).
    pub standing: String,
    /// Standing detail.
    pub standing_detail: Option<String>,
    /// BM id.
    pub bm_id: Option<i64>,
    /// Client.
    pub cliente_id: Option<i64>,
    /// Its numbers in the caller's scope.
    pub numeros: Vec<NumberView>,
}

/// A BM as the panel shows it (never its token or secret).
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct PanelBm {
    /// disparo id.
    pub id: i64,
    /// Name.
    pub nome: String,
    /// Client id.
    pub cliente_id: Option<i64>,
    /// Client name.
    pub cliente: Option<String>,
    /// Provider Business ID (null until given).
    pub id_provider: Option<String>,
    /// App id.
    pub app_id: Option<String>,
    /// Whether a system-user token is stored.
    pub has_access_token: bool,
    /// Whether an app secret is stored.
    pub has_app_secret: bool,
    /// `ok`, `banido`, `restrito`, `pagamento_pendente`, `credencial_invalida`,
    /// `nao_sincronizado` (D-055).
    pub health_status: String,
    /// Business verification (from the provider).
    pub verificacao: Option<String>,
    /// Portfolio tier (from the provider).
    pub tier: Option<String>,
    /// Payment `ok` / `pendente`.
    pub pagamento: String,
    /// Last sync (ISO 8601).
    pub last_sync_at: Option<String>,
    /// Its WABAs with their numbers (in scope).
    pub wabas: Vec<PanelWaba>,
    /// Totals of the BM.
    pub resumo: BmSummary,
}

/// A client as the panel shows it.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct ClientView {
    /// Id.
    pub id: i64,
    /// Name.
    pub nome: String,
    /// CNPJ digits.
    pub documento: Option<String>,
    /// Webhook URL.
    pub webhook_url: Option<String>,
    /// How many records it is linked to.
    pub vinculos: ClientLinks,
    /// Created (ISO 8601).
    pub created_at: String,
}

impl ClientView {
    /// The view of a record.
    pub fn of(c: &ClientRecord) -> Self {
        Self {
            id: c.id,
            nome: c.name.clone(),
            documento: c.document.clone(),
            webhook_url: c.webhook_url.clone(),
            vinculos: ClientLinks {
                bms: c.bms,
                wabas: c.wabas,
                numeros: c.numbers,
            },
            created_at: actors::time::iso(c.created_at),
        }
    }
}

/// Filters of the BM list (spec: `busca`, `status`, `qualidade`).
#[derive(Debug, Clone, Default)]
pub struct BmFilter {
    /// Text in the name, client or Business ID (case-insensitive).
    pub busca: Option<String>,
    /// The BM's `health_status`.
    pub status: Option<String>,
    /// BMs with at least one number of this quality.
    pub qualidade: Option<String>,
}

/// Input of a BM's creation or update (spec "BM").
#[derive(Debug, Clone, Default)]
pub struct BmInput {
    /// Name.
    pub name: String,
    /// Client by name (created when missing).
    pub client_name: Option<String>,
    /// Client by id.
    pub client_id: Option<i64>,
    /// Business ID.
    pub provider_business_id: Option<String>,
    /// App id.
    pub app_id: Option<String>,
    /// System-user token (`None` or blank keeps the stored one).
    pub access_token: Option<Secret>,
    /// App secret (`None` or blank keeps the stored one).
    pub app_secret: Option<Secret>,
}

/// Input of a WABA's registration.
#[derive(Debug, Clone)]
pub struct WabaInput {
    /// Provider WABA id.
    pub provider_waba_id: String,
    /// BM (disparo id).
    pub bm_id: i64,
    /// Name (default the provider's).
    pub name: Option<String>,
    /// Client.
    pub client_id: Option<i64>,
}

/// Input of a number's registration.
#[derive(Debug, Clone)]
pub struct NumberInput {
    /// Provider phone number id.
    pub phone_number_id: String,
    /// WABA (disparo id).
    pub waba_id: i64,
    /// Display name (default the provider's verified name).
    pub display_name: Option<String>,
    /// Client.
    pub client_id: Option<i64>,
}

/// The risk KPIs of `GET /api/dashboard`, in the caller's scope.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct Dashboard {
    /// BMs by health (D-055).
    pub bms: DashboardBms,
    /// WABAs by standing.
    pub wabas: DashboardWabas,
    /// Numbers by quality, tier and health.
    pub numeros: DashboardNumbers,
    /// Open tasks by priority (staff only; zero for a Client).
    pub tarefas_abertas: DashboardTasks,
    /// Active alerts by severity.
    pub alertas: DashboardAlerts,
}

/// BMs of the dashboard.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct DashboardBms {
    /// BMs in scope.
    pub total: usize,
    /// Count per health (`ok`, `banido`, `restrito`, `pagamento_pendente`…).
    pub por_saude: BTreeMap<String, i64>,
}

/// WABAs of the dashboard.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct DashboardWabas {
    /// WABAs in scope.
    pub total: usize,
    /// Count per standing (`ok`, `restricted`, `banned`, `violation`).
    pub por_situacao: BTreeMap<String, i64>,
}

/// Numbers of the dashboard.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct DashboardNumbers {
    /// Numbers in scope.
    pub total: usize,
    /// Count per quality rating.
    pub por_qualidade: BTreeMap<String, i64>,
    /// Count per messaging tier (`desconhecido` when not read yet).
    pub por_tier: BTreeMap<String, i64>,
    /// Count per health tone (`ok`, `atencao`, `critico`).
    pub por_saude: BTreeMap<String, i64>,
    /// Numbers with 10 % or less of their 24 h limit left.
    pub perto_do_limite: i64,
}

/// Open tasks of the dashboard.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct DashboardTasks {
    /// Tasks not `resolvido`.
    pub total: i64,
    /// Count per priority.
    pub por_prioridade: BTreeMap<String, i64>,
}

/// Active alerts of the dashboard.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct DashboardAlerts {
    /// Sends stopped.
    pub critica: usize,
    /// Act soon.
    pub atencao: usize,
}

/// Everything the panel shows in the caller's scope (`GET /api/state`).
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct PanelState {
    /// The logged-in user.
    pub user: UserView,
    /// BMs with their WABAs and numbers.
    pub bms: Vec<PanelBm>,
    /// WABAs with their numbers.
    pub wabas: Vec<PanelWaba>,
    /// Numbers with their live health.
    pub numeros: Vec<NumberView>,
    /// Clients.
    pub clientes: Vec<ClientView>,
    /// The library (a Client sees the templates of its numbers).
    pub templates: Vec<crate::templates::TemplateView>,
    /// The newest 200 campaigns (staff only).
    pub campanhas: Vec<CampaignSummary>,
    /// The task board (staff only).
    pub tarefas: Vec<TaskView>,
    /// The account's users (Admin), else the caller.
    pub usuarios: Vec<UserView>,
}

/// A campaign in the panel's state: `{id, nome, status, created_at}`.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct CampaignSummary {
    /// Id.
    pub id: i64,
    /// Name.
    pub nome: String,
    /// Its engine state.
    #[schema(value_type = engine::campaign::CampaignState)]
    pub status: String,
    /// Created (ISO 8601).
    pub created_at: String,
}

/// Sends per hour per number (`GET /api/dashboard/envios-por-hora`).
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct HourlySends {
    /// Each hour's start (ISO 8601, UTC), oldest first, ending with the current hour.
    pub horas: Vec<String>,
    /// One line per number the caller may see.
    pub numeros: Vec<HourlyNumber>,
}

/// One number's sends per hour.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct HourlyNumber {
    /// The number's (channel's) id.
    pub id: i64,
    /// Its phone, digits.
    pub telefone: String,
    /// Sends accepted by the provider in each hour of [`HourlySends::horas`].
    pub por_hora: Vec<i64>,
    /// Their sum.
    pub total: i64,
}

/// One active alert (`GET /api/alertas`).
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct Alert {
    /// `critica` (sends stopped) or `atencao` (act soon).
    #[schema(pattern = "^(critica|atencao)$")]
    pub severidade: &'static str,
    /// `bm`, `waba`, `numero`, `template`.
    pub tipo: &'static str,
    /// The record's id (BM, WABA, channel or template id).
    pub id: i64,
    /// Its name.
    pub nome: String,
    /// Stable code (`waba_banida`, `qualidade_red`, `template_rejeitado`…).
    pub codigo: String,
    /// pt-BR text.
    pub mensagem: String,
    /// What to do.
    pub proxima_acao: Option<String>,
}

fn rejected(code: &'static str, field: &str, message: impl Into<String>) -> ActorError {
    ActorError::Rejected {
        code,
        message: message.into(),
        details: json!({ "field": field }),
    }
}

/// Maps the panel's storage conflicts to clear 422s.
fn panel_conflict(e: storage::StorageError) -> ActorError {
    match e {
        storage::StorageError::Conflict(what) => match what.as_str() {
            "email" => rejected(
                "email_em_uso",
                "email",
                "Já existe um usuário com este e-mail nesta conta.",
            ),
            "last_admin" => rejected(
                "ultimo_admin",
                "role",
                "A conta precisa de pelo menos um Admin ativo: promova outro usuário antes.",
            ),
            "name" => rejected("cliente_existente", "nome", "Já existe um cliente com este nome."),
            "client_users" => rejected(
                "cliente_com_usuarios",
                "id",
                "Há usuários do papel Client ligados a este cliente: remova-os ou mude o cliente deles antes.",
            ),
            "id_provider" => rejected(
                "bm_existente",
                "id_provider",
                "Já existe um BM com este id_provider nesta conta.",
            ),
            "waba_numbers" => rejected(
                "waba_com_numeros",
                "id",
                "A WABA ainda tem números: remova-os antes.",
            ),
            "number_history" => rejected(
                "numero_com_historico",
                "id",
                "O número tem mensagens ou campanhas e fica no inventário para preservar o histórico (D-057).",
            ),
            _ => ActorError::Conflict(what),
        },
        other => other.into(),
    }
}

fn argon2() -> argon2::Argon2<'static> {
    argon2::Argon2::default()
}

/// Hashes a password with Argon2id (default parameters: 19 MiB, 2 passes) on the blocking pool.
pub async fn hash_password(password: String) -> Result<String, ActorError> {
    tokio::task::spawn_blocking(move || {
        use argon2::password_hash::{rand_core::OsRng, PasswordHasher, SaltString};
        let salt = SaltString::generate(&mut OsRng);
        argon2()
            .hash_password(password.as_bytes(), &salt)
            .map(|h| h.to_string())
            .map_err(|e| ActorError::Storage(storage::StorageError::Corrupt(e.to_string())))
    })
    .await
    .map_err(|_| ActorError::Unavailable)?
}

/// Checks a password against a stored hash on the blocking pool; a hash that does not parse
/// never matches.
async fn verify_password(password: String, hash: String) -> bool {
    tokio::task::spawn_blocking(move || {
        use argon2::password_hash::{PasswordHash, PasswordVerifier};
        PasswordHash::new(&hash)
            .map(|h| argon2().verify_password(password.as_bytes(), &h).is_ok())
            .unwrap_or(false)
    })
    .await
    .unwrap_or(false)
}

/// A hash no password matches, computed once: an unknown e-mail costs the same work as a wrong
/// password, so timing does not tell which e-mails exist.
async fn decoy_hash() -> String {
    static DECOY: tokio::sync::OnceCell<String> = tokio::sync::OnceCell::const_new();
    DECOY
        .get_or_init(|| async {
            hash_password("decoy-password-never-used".into())
                .await
                .unwrap_or_default()
        })
        .await
        .clone()
}

async fn check_user_links(
    store: &storage::Store,
    account_id: i64,
    role: Role,
    client_id: Option<i64>,
    bm_ids: &[i64],
) -> Result<(), ActorError> {
    match role {
        Role::Client => {
            let Some(c) = client_id else {
                return Err(rejected(
                    "cliente_obrigatorio",
                    "cliente_id",
                    "Um usuário do papel Client precisa de `cliente_id`.",
                ));
            };
            store.client(account_id, c).await.map_err(|_| {
                rejected(
                    "cliente_invalido",
                    "cliente_id",
                    "`cliente_id` não é um cliente desta conta.",
                )
            })?;
        }
        Role::Admin | Role::Operador => {
            let known: Vec<i64> = store
                .list_bms(account_id)
                .await?
                .iter()
                .map(|b| b.id)
                .collect();
            if let Some(bad) = bm_ids.iter().find(|b| !known.contains(b)) {
                return Err(rejected(
                    "bm_invalido",
                    "bms",
                    format!("O BM {bad} não é desta conta."),
                ));
            }
        }
    }
    Ok(())
}

/// Creates a panel user of the account: checks the e-mail, role, status, name and password,
/// that a Client user names a client of the account and a staff user's BMs are the account's,
/// then stores it with an Argon2id hash (`disparo user create` and `POST /api/users`).
pub async fn create_user(
    store: &storage::Store,
    account_id: i64,
    input: UserInput,
) -> Result<UserRecord, ActorError> {
    let email = engine::panel::normalize_email(&input.email)?;
    let role = Role::parse(&input.role).ok_or_else(|| {
        rejected(
            "papel_invalido",
            "role",
            "`role` deve ser Admin, Operador ou Client.",
        )
    })?;
    let status = match input.status.as_deref() {
        None => UserStatus::Active,
        Some(s) => UserStatus::parse(s).ok_or_else(|| {
            rejected(
                "status_invalido",
                "status",
                "`status` deve ser active ou disabled.",
            )
        })?,
    };
    if input.name.trim().is_empty() {
        return Err(rejected(
            "nome_obrigatorio",
            "name",
            "`name` é obrigatório.",
        ));
    }
    engine::panel::check_password(&input.password)?;
    check_user_links(store, account_id, role, input.client_id, &input.bm_ids).await?;
    let hash = hash_password(input.password).await?;
    store
        .insert_user(&NewUser {
            account_id,
            email,
            name: input.name.trim().to_string(),
            role: role.as_str().into(),
            status: status.as_str().into(),
            password_hash: hash,
            client_id: if role == Role::Client {
                input.client_id
            } else {
                None
            },
            bm_scope: if role == Role::Client {
                Vec::new()
            } else {
                input.bm_ids
            },
        })
        .await
        .map_err(panel_conflict)
}

fn bm_health_of(bm: &BmRecord, wabas: &[&WabaRecord]) -> &'static str {
    engine::panel::bm_health(
        bm.payment_ok,
        wabas.iter().map(|w| w.standing.as_str()),
        bm.health_status.as_deref(),
        bm.last_sync_at.is_some(),
    )
}

fn effective_client(
    c: &ChannelRecord,
    wabas: &HashMap<&str, &WabaRecord>,
    bms: &HashMap<i64, &BmRecord>,
) -> Option<i64> {
    c.client_id
        .or_else(|| wabas.get(c.waba_id.as_str()).and_then(|w| w.client_id))
        .or_else(|| c.bm_id.and_then(|b| bms.get(&b)).and_then(|b| b.client_id))
}

impl Services {
    // ---- sessions and users ----------------------------------------------------------

    /// `POST /api/login`: checks the pair and opens a session of `ttl_ms`. Unknown e-mail,
    /// wrong password and disabled user are one answer ([`ActorError::NotFound`]), after the
    /// same Argon2 work.
    pub async fn login(
        &self,
        email: &str,
        password: &str,
        ttl_ms: i64,
    ) -> Result<(CreatedSession, UserRecord, String), ActorError> {
        let store = &self.shared().store;
        let email = email.trim().to_lowercase();
        // An e-mail is unique per account (issue 46): the first active user of the e-mail
        // whose password matches, in id order.
        let found = store.user_for_login(&email).await?;
        if found.is_empty() {
            verify_password(password.to_string(), decoy_hash().await).await;
            return Err(ActorError::NotFound);
        }
        let mut matched = None;
        for (u, hash) in found {
            if verify_password(password.to_string(), hash).await
                && u.status == UserStatus::Active.as_str()
            {
                matched = Some(u);
                break;
            }
        }
        let Some(user) = matched else {
            return Err(ActorError::NotFound);
        };
        let session = store.create_session(user.id, ttl_ms).await?;
        let slug = store
            .authenticate_session(session.token.expose(), ttl_ms)
            .await?
            .map(|s| s.account_slug)
            .unwrap_or_default();
        Ok((session, user, slug))
    }

    /// Creates a panel user of the account (Argon2id hash; e-mail unique): [`create_user`].
    pub async fn create_user(
        &self,
        account_id: i64,
        input: UserInput,
    ) -> Result<UserRecord, ActorError> {
        create_user(&self.shared().store, account_id, input).await
    }

    /// Changes a panel user; refuses leaving the account without an active Admin.
    pub async fn update_user(
        &self,
        account_id: i64,
        id: i64,
        change: UserChange,
    ) -> Result<UserRecord, ActorError> {
        let store = &self.shared().store;
        let current = store.user(account_id, id).await?;
        let email = change
            .email
            .as_deref()
            .map(engine::panel::normalize_email)
            .transpose()?;
        let role = match change.role.as_deref() {
            None => Role::parse(&current.role).unwrap_or(Role::Client),
            Some(r) => Role::parse(r).ok_or_else(|| {
                rejected(
                    "papel_invalido",
                    "role",
                    "`role` deve ser Admin, Operador ou Client.",
                )
            })?,
        };
        if let Some(s) = change.status.as_deref() {
            UserStatus::parse(s).ok_or_else(|| {
                rejected(
                    "status_invalido",
                    "status",
                    "`status` deve ser active ou disabled.",
                )
            })?;
        }
        if change.name.as_deref().is_some_and(|n| n.trim().is_empty()) {
            return Err(rejected(
                "nome_obrigatorio",
                "name",
                "`name` não pode ficar vazio.",
            ));
        }
        let client_id = change.client_id.unwrap_or(current.client_id);
        let bm_ids = change
            .bm_ids
            .clone()
            .unwrap_or_else(|| current.bm_scope.clone());
        check_user_links(store, account_id, role, client_id, &bm_ids).await?;
        let password_hash = match change.password {
            Some(p) => {
                engine::panel::check_password(&p)?;
                Some(hash_password(p).await?)
            }
            None => None,
        };
        store
            .update_user(
                account_id,
                id,
                &UserPatch {
                    email,
                    name: change.name.map(|n| n.trim().to_string()),
                    role: Some(role.as_str().into()),
                    status: change.status,
                    client_id: Some(if role == Role::Client {
                        client_id
                    } else {
                        None
                    }),
                    bm_scope: Some(if role == Role::Client {
                        Vec::new()
                    } else {
                        bm_ids
                    }),
                    password_hash,
                    keep_session: change.keep_session,
                },
            )
            .await
            .map_err(panel_conflict)
    }

    /// Removes a panel user (not the account's last active Admin).
    pub async fn delete_user(&self, account_id: i64, id: i64) -> Result<(), ActorError> {
        self.shared()
            .store
            .delete_user(account_id, id)
            .await
            .map_err(panel_conflict)
    }

    // ---- clients ---------------------------------------------------------------------

    /// Creates (`id` None) or updates a client in `scope` (issue 46: a BM-scoped staff user
    /// changes only a client of its BMs, NotFound otherwise; creating is for unscoped staff,
    /// the caller maps that 403): the CNPJ's check digits are verified and the webhook URL
    /// passes the SSRF guard (D-042) before anything is stored. The first time a client gets
    /// a webhook URL its forwards' signing secret is made and returned (once).
    pub async fn save_client(
        &self,
        account_id: i64,
        scope: &Scope,
        id: Option<i64>,
        name: &str,
        document: Option<&str>,
        webhook_url: Option<&str>,
    ) -> Result<(ClientRecord, Option<Secret>), ActorError> {
        let name = name.trim();
        if name.is_empty() || name.chars().count() > 200 {
            return Err(rejected(
                "nome_obrigatorio",
                "nome",
                "`nome` é obrigatório (até 200 caracteres).",
            ));
        }
        let document = match document.map(str::trim).filter(|d| !d.is_empty()) {
            Some(d) => Some(engine::panel::validate_cnpj(d)?),
            None => None,
        };
        if let Some(id) = id {
            self.shared()
                .store
                .scoped_client(account_id, scope, id)
                .await?;
        }
        let webhook_url = webhook_url.map(str::trim).filter(|u| !u.is_empty());
        if let Some(u) = webhook_url {
            self.shared()
                .guard
                .check_url(u)
                .map_err(|refusal| ActorError::Rejected {
                    code: refusal.code(),
                    message: format!(
                        "`webhook_url` recusada: {}",
                        actors::outbound::refusal_message(&refusal)
                    ),
                    details: json!({"field": "webhook_url"}),
                })?;
        }
        let store = &self.shared().store;
        let client = store
            .save_client(account_id, id, name, document.as_deref(), webhook_url)
            .await
            .map_err(panel_conflict)?;
        // The first webhook URL brings the client's signing secret, shown once (D-061).
        let secret = match webhook_url {
            Some(_) if !store.client_has_webhook_secret(client.id).await? => Some(
                store
                    .rotate_client_webhook_secret(account_id, client.id)
                    .await?,
            ),
            _ => None,
        };
        Ok((client, secret))
    }

    /// Removes a client in `scope` (links are cleared; refused while Client users belong to
    /// it).
    pub async fn delete_client(
        &self,
        account_id: i64,
        scope: &Scope,
        id: i64,
    ) -> Result<(), ActorError> {
        let store = &self.shared().store;
        store.scoped_client(account_id, scope, id).await?;
        store
            .delete_client(account_id, id)
            .await
            .map_err(panel_conflict)
    }

    /// A new signing secret for the forwards of a client in `scope`, returned once.
    pub async fn rotate_client_secret(
        &self,
        account_id: i64,
        scope: &Scope,
        id: i64,
    ) -> Result<Secret, ActorError> {
        let store = &self.shared().store;
        store.scoped_client(account_id, scope, id).await?;
        Ok(store.rotate_client_webhook_secret(account_id, id).await?)
    }

    /// The client a BM, WABA or number is linked to: by id, or (a BM) by name, created when
    /// missing. A scoped staff user links only a client in its scope or one linked to
    /// nothing yet (issue 46): linking never opens another BM's client.
    async fn resolve_client(
        &self,
        account_id: i64,
        scope: &Scope,
        client_id: Option<i64>,
        client_name: Option<&str>,
    ) -> Result<Option<i64>, ActorError> {
        let store = &self.shared().store;
        let client = match (
            client_id,
            client_name.map(str::trim).filter(|n| !n.is_empty()),
        ) {
            (Some(id), _) => store.client(account_id, id).await.ok(),
            (None, Some(n)) => Some(store.client_by_name_or_create(account_id, n).await?),
            (None, None) => return Ok(None),
        };
        let reachable = match &client {
            None => false,
            Some(c) if scope.is_all() || c.bms + c.wabas + c.numbers == 0 => true,
            Some(c) => store.scoped_client(account_id, scope, c.id).await.is_ok(),
        };
        if !reachable {
            return Err(rejected(
                "cliente_invalido",
                "cliente_id",
                "`cliente_id` não é um cliente desta conta ao seu alcance.",
            ));
        }
        Ok(client.map(|c| c.id))
    }

    // ---- BMs -------------------------------------------------------------------------

    /// Proves a BM's credential at the provider: the token must read the business's WABAs
    /// (`GET /{business_id}/owned_whatsapp_business_accounts`); a refusal is 422 `bm_invalido`
    /// and nothing is stored.
    async fn prove_bm(&self, business_id: &str, token: &Secret) -> Result<(), ActorError> {
        match self.shared().graph.owned_wabas(token.expose(), business_id).await {
            Ok(_) => Ok(()),
            Err(e)
                if matches!(
                    e.kind(),
                    provider::ErrorKind::InvalidCredential
                        | provider::ErrorKind::PermissionDenied
                        | provider::ErrorKind::InvalidRequest
                ) =>
            {
                Err(ActorError::Rejected {
                    code: "bm_invalido",
                    message: format!(
                        "O provedor não confirmou o BM {business_id} com este access_token: {}. Informe o Business ID do BM e um token de usuário do sistema com acesso a ele.",
                        e.reason()
                    ),
                    details: json!({"field": "id_provider"}),
                })
            }
            Err(e) => Err(e.into()),
        }
    }

    async fn bm_fields(
        &self,
        account_id: i64,
        scope: &Scope,
        input: BmInput,
        current: Option<&BmRecord>,
    ) -> Result<BmFields, ActorError> {
        let name = input.name.trim().to_string();
        if name.is_empty() || name.chars().count() > 200 {
            return Err(rejected(
                "nome_obrigatorio",
                "nome",
                "`nome` é obrigatório (até 200 caracteres).",
            ));
        }
        let client_id = self
            .resolve_client(
                account_id,
                scope,
                input.client_id,
                input.client_name.as_deref(),
            )
            .await?;
        if current.is_none() && client_id.is_none() {
            return Err(rejected(
                "cliente_obrigatorio",
                "cliente",
                "Informe `cliente` (nome do cliente) ou `cliente_id`.",
            ));
        }
        let provider_business_id = input
            .provider_business_id
            .map(|p| p.trim().to_string())
            .filter(|p| !p.is_empty());
        if let Some(p) = &provider_business_id {
            if !(5..=32).contains(&p.len()) || !p.bytes().all(|b| b.is_ascii_digit()) {
                return Err(rejected(
                    "id_provider_invalido",
                    "id_provider",
                    "`id_provider` deve ser o Business ID numérico do provedor.",
                ));
            }
        }
        let blank = |s: Option<Secret>| s.filter(|s| !s.expose().trim().is_empty());
        let access_token = blank(input.access_token);
        let app_secret = blank(input.app_secret);
        // A credential is proven against the Business ID it will be used with.
        let business = provider_business_id
            .clone()
            .or_else(|| current.and_then(|b| b.provider_id().map(str::to_string)));
        let token_to_prove = match (&access_token, current) {
            (Some(t), _) => Some(t.clone()),
            (None, Some(b)) if provider_business_id.is_some() && b.has_token => {
                self.shared().store.bm_secrets(b.id).await?.access_token
            }
            _ => None,
        };
        if let (Some(b), Some(t)) = (&business, &token_to_prove) {
            self.prove_bm(b, t).await?;
        }
        Ok(BmFields {
            name,
            client_id: client_id.or(current.and_then(|b| b.client_id)),
            provider_business_id,
            app_id: input
                .app_id
                .map(|a| a.trim().to_string())
                .filter(|a| !a.is_empty()),
            access_token,
            app_secret,
        })
    }

    /// `POST /api/business-managers`: a BM of the account, its credential proven at the
    /// provider when a Business ID and a token are given. A scoped staff user cannot create
    /// BMs (the new one would be outside their scope): 403 is the caller's to map.
    pub async fn panel_create_bm(
        &self,
        account_id: i64,
        input: BmInput,
    ) -> Result<PanelBm, ActorError> {
        let fields = self
            .bm_fields(account_id, &Scope::Bms(Vec::new()), input, None)
            .await?;
        let bm = self
            .shared()
            .store
            .insert_panel_bm(account_id, &fields)
            .await
            .map_err(panel_conflict)?;
        self.panel_bm(account_id, &Scope::Bms(Vec::new()), bm.id)
            .await
    }

    /// `PUT /api/business-managers/{id}`: blank token or secret keep the stored ones.
    pub async fn panel_update_bm(
        &self,
        account_id: i64,
        scope: &Scope,
        id: i64,
        input: BmInput,
    ) -> Result<PanelBm, ActorError> {
        let current = self.shared().store.scoped_bm(account_id, scope, id).await?;
        let fields = self
            .bm_fields(account_id, scope, input, Some(&current))
            .await?;
        self.shared()
            .store
            .update_panel_bm(account_id, id, &fields)
            .await
            .map_err(panel_conflict)?;
        self.panel_bm(account_id, scope, id).await
    }

    /// `DELETE /api/business-managers/{id}`: refused (422 `campanha_em_andamento`) while a
    /// campaign runs on its numbers; its WABAs and numbers stay, unlinked.
    pub async fn panel_delete_bm(
        &self,
        account_id: i64,
        scope: &Scope,
        id: i64,
    ) -> Result<(), ActorError> {
        let store = &self.shared().store;
        store.scoped_bm(account_id, scope, id).await?;
        let channels: Vec<i64> = store
            .channels_of_bm(id)
            .await?
            .iter()
            .map(|c| c.id)
            .collect();
        if store.campaign_running_on(&channels).await? {
            return Err(rejected(
                "campanha_em_andamento",
                "id",
                "Há campanha em andamento (ou agendada) nos números deste BM: pause ou cancele antes de remover.",
            ));
        }
        store.delete_bm(account_id, id).await?;
        self.shared().bm_counters.remove(&id);
        Ok(())
    }

    /// `POST /api/business-managers/{id}/sync`: the account API's BM sync (one
    /// implementation), for a BM in the caller's scope.
    pub async fn panel_sync_bm(
        &self,
        account_id: i64,
        scope: &Scope,
        id: i64,
    ) -> Result<(crate::accounts::BmSyncResult, PanelBm), ActorError> {
        self.shared().store.scoped_bm(account_id, scope, id).await?;
        let result = self.sync_bm(account_id, id).await?;
        Ok((result, self.panel_bm(account_id, scope, id).await?))
    }

    /// The BM's health from its payment, its WABAs' standing and its last sync (D-055).
    pub(crate) async fn bm_health(&self, bm: &BmRecord) -> Result<&'static str, ActorError> {
        let wabas = self.shared().store.list_wabas(bm.account_id).await?;
        let mine: Vec<&WabaRecord> = wabas.iter().filter(|w| w.bm_id == Some(bm.id)).collect();
        Ok(engine::panel::bm_health(
            bm.payment_ok,
            mine.iter().map(|w| w.standing.as_str()),
            None,
            true,
        ))
    }

    /// The live state of `channels` at once (a number whose actor does not answer reads
    /// `desconectado`), with the stored panel fields.
    pub(crate) async fn snapshots(
        &self,
        account_id: i64,
        channels: &[ChannelRecord],
    ) -> Vec<ChannelSnapshot> {
        let all = futures::future::join_all(
            channels
                .iter()
                .map(|c| self.snapshot(AccountId(account_id), ChannelId(c.id))),
        )
        .await;
        all.into_iter()
            .zip(channels)
            .map(|(s, c)| {
                // The stored record (the panel's fields: client, photo, name) with the live
                // state the actor holds (quality, tier, status, credential).
                s.map(|live| {
                    let mut record = c.clone();
                    record.quality = live.record.quality;
                    record.tier = live.record.tier;
                    record.status = live.record.status;
                    record.credential_valid = live.record.credential_valid;
                    ChannelSnapshot {
                        record,
                        health: live.health,
                    }
                })
                .unwrap_or_else(|_| ChannelSnapshot {
                    record: c.clone(),
                    health: engine::channel::Health::of_code(
                        engine::channel::HealthCode::Disconnected,
                    ),
                })
            })
            .collect()
    }

    /// Everything the panel's inventory views need, in scope: BMs, WABAs, numbers with live
    /// health.
    async fn inventory(
        &self,
        account_id: i64,
        scope: &Scope,
    ) -> Result<(Vec<BmRecord>, Vec<WabaRecord>, Vec<ChannelSnapshot>), ActorError> {
        let store = &self.shared().store;
        let bms = store.scoped_bms(account_id, scope).await?;
        let wabas = store.scoped_wabas(account_id, scope).await?;
        let channels = store.scoped_channels(account_id, scope).await?;
        let snaps = self.snapshots(account_id, &channels).await;
        Ok((bms, wabas, snaps))
    }

    fn number_views(
        snaps: &[ChannelSnapshot],
        wabas: &[WabaRecord],
        bms: &[BmRecord],
    ) -> Vec<NumberView> {
        let wmap: HashMap<&str, &WabaRecord> = wabas
            .iter()
            .map(|w| (w.provider_waba_id.as_str(), w))
            .collect();
        let bmap: HashMap<i64, &BmRecord> = bms.iter().map(|b| (b.id, b)).collect();
        snaps
            .iter()
            .map(|s| {
                let c = &s.record;
                NumberView {
                    id: c.id,
                    phone_number_id: c.phone_number_id.clone(),
                    telefone: c.phone.clone(),
                    nome_exibicao: c.name.clone(),
                    verified_name: c.verified_name.clone(),
                    status: c.status.clone(),
                    qualidade: c.quality.clone(),
                    tier: c.tier.clone(),
                    waba_id: c.waba_id.clone(),
                    bm_id: c.bm_id,
                    cliente_id: c.client_id,
                    cliente_efetivo_id: effective_client(c, &wmap, &bmap),
                    foto_url: c.photo_url.clone(),
                    health: s.health.clone(),
                }
            })
            .collect()
    }

    fn bm_views(
        bms: &[BmRecord],
        wabas: &[WabaRecord],
        numbers: &[NumberView],
        clients: &HashMap<i64, String>,
    ) -> Vec<PanelBm> {
        bms.iter()
            .map(|b| {
                let mine: Vec<&WabaRecord> =
                    wabas.iter().filter(|w| w.bm_id == Some(b.id)).collect();
                let waba_views: Vec<PanelWaba> = mine
                    .iter()
                    .map(|w| PanelWaba {
                        id: w.id,
                        id_provider: w.provider_waba_id.clone(),
                        nome: w.name.clone(),
                        status: w.status.clone(),
                        standing: w.standing.clone(),
                        standing_detail: w.standing_detail.clone(),
                        bm_id: w.bm_id,
                        cliente_id: w.client_id,
                        numeros: numbers
                            .iter()
                            .filter(|n| n.waba_id == w.provider_waba_id)
                            .cloned()
                            .collect(),
                    })
                    .collect();
                let nums: Vec<&NumberView> =
                    numbers.iter().filter(|n| n.bm_id == Some(b.id)).collect();
                let mut by_quality: BTreeMap<String, i64> = BTreeMap::new();
                let mut by_health: BTreeMap<String, i64> = BTreeMap::new();
                for n in &nums {
                    *by_quality.entry(n.qualidade.clone()).or_default() += 1;
                    *by_health
                        .entry(
                            match n.health.tone {
                                Tone::Ok => "ok",
                                Tone::Attention => "atencao",
                                Tone::Bad => "critico",
                            }
                            .to_string(),
                        )
                        .or_default() += 1;
                }
                PanelBm {
                    id: b.id,
                    nome: b.name.clone(),
                    cliente_id: b.client_id,
                    cliente: b.client_id.and_then(|c| clients.get(&c).cloned()),
                    id_provider: b.provider_id().map(str::to_string),
                    app_id: b.app_id.clone(),
                    has_access_token: b.has_token,
                    has_app_secret: b.has_app_secret,
                    health_status: bm_health_of(b, &mine).to_string(),
                    verificacao: b.verification_status.clone(),
                    tier: b.tier.clone(),
                    pagamento: if b.payment_ok { "ok" } else { "pendente" }.into(),
                    last_sync_at: b.last_sync_at.map(actors::time::iso),
                    resumo: BmSummary {
                        wabas: waba_views.len(),
                        numeros: nums.len(),
                        por_qualidade: by_quality,
                        por_saude: by_health,
                    },
                    wabas: waba_views,
                }
            })
            .collect()
    }

    async fn client_names(&self, account_id: i64) -> Result<HashMap<i64, String>, ActorError> {
        Ok(self
            .shared()
            .store
            .list_clients(account_id, &Scope::Bms(Vec::new()))
            .await?
            .into_iter()
            .map(|c| (c.id, c.name))
            .collect())
    }

    /// `GET /api/business-managers`: the BMs in scope with their WABAs, numbers and summary.
    pub async fn panel_bms(
        &self,
        account_id: i64,
        scope: &Scope,
        filter: &BmFilter,
    ) -> Result<Vec<PanelBm>, ActorError> {
        let (bms, wabas, snaps) = self.inventory(account_id, scope).await?;
        let numbers = Self::number_views(&snaps, &wabas, &bms);
        let clients = self.client_names(account_id).await?;
        let busca = filter.busca.as_deref().map(str::to_lowercase);
        Ok(Self::bm_views(&bms, &wabas, &numbers, &clients)
            .into_iter()
            .filter(|b| {
                busca.as_deref().is_none_or(|q| {
                    b.nome.to_lowercase().contains(q)
                        || b.cliente
                            .as_deref()
                            .is_some_and(|c| c.to_lowercase().contains(q))
                        || b.id_provider.as_deref().is_some_and(|p| p.contains(q))
                })
            })
            .filter(|b| {
                filter
                    .status
                    .as_deref()
                    .is_none_or(|s| b.health_status == s)
            })
            .filter(|b| {
                filter.qualidade.as_deref().is_none_or(|q| {
                    b.wabas
                        .iter()
                        .flat_map(|w| &w.numeros)
                        .any(|n| n.qualidade.eq_ignore_ascii_case(q))
                })
            })
            .collect())
    }

    /// One BM in scope.
    pub async fn panel_bm(
        &self,
        account_id: i64,
        scope: &Scope,
        id: i64,
    ) -> Result<PanelBm, ActorError> {
        let store = &self.shared().store;
        let bm = store.scoped_bm(account_id, scope, id).await?;
        let wabas: Vec<WabaRecord> = store
            .scoped_wabas(account_id, scope)
            .await?
            .into_iter()
            .filter(|w| w.bm_id == Some(id))
            .collect();
        let channels: Vec<ChannelRecord> = store
            .scoped_channels(account_id, scope)
            .await?
            .into_iter()
            .filter(|c| c.bm_id == Some(id))
            .collect();
        let snaps = self.snapshots(account_id, &channels).await;
        let bms = vec![bm];
        let numbers = Self::number_views(&snaps, &wabas, &bms);
        let clients = self.client_names(account_id).await?;
        Self::bm_views(&bms, &wabas, &numbers, &clients)
            .pop()
            .ok_or(ActorError::NotFound)
    }

    // ---- WABAs -----------------------------------------------------------------------

    fn waba_view(w: &WabaRecord, numbers: Vec<NumberView>) -> PanelWaba {
        PanelWaba {
            id: w.id,
            id_provider: w.provider_waba_id.clone(),
            nome: w.name.clone(),
            status: w.status.clone(),
            standing: w.standing.clone(),
            standing_detail: w.standing_detail.clone(),
            bm_id: w.bm_id,
            cliente_id: w.client_id,
            numeros: numbers,
        }
    }

    /// One WABA in scope with its numbers.
    pub async fn panel_waba(
        &self,
        account_id: i64,
        scope: &Scope,
        id: i64,
    ) -> Result<PanelWaba, ActorError> {
        let store = &self.shared().store;
        let w = store.scoped_waba(account_id, scope, id).await?;
        let channels: Vec<ChannelRecord> = store
            .scoped_channels(account_id, scope)
            .await?
            .into_iter()
            .filter(|c| c.waba_id == w.provider_waba_id)
            .collect();
        let snaps = self.snapshots(account_id, &channels).await;
        let bms = store
            .scoped_bms(account_id, &Scope::Bms(Vec::new()))
            .await?;
        let numbers = Self::number_views(&snaps, std::slice::from_ref(&w), &bms);
        Ok(Self::waba_view(&w, numbers))
    }

    /// `POST /api/wabas`: registers a WABA of a BM in scope; the BM's credential must list it
    /// among the business's WABAs at the provider (422 `waba_invalida` otherwise).
    pub async fn panel_create_waba(
        &self,
        account_id: i64,
        scope: &Scope,
        input: WabaInput,
    ) -> Result<PanelWaba, ActorError> {
        let store = &self.shared().store;
        let bm = store
            .scoped_bm(account_id, scope, input.bm_id)
            .await
            .map_err(|_| {
                rejected(
                    "bm_invalido",
                    "bm_id",
                    "`bm_id` não é um BM ao seu alcance nesta conta.",
                )
            })?;
        let client_id = self
            .resolve_client(account_id, scope, input.client_id, None)
            .await?;
        let (_, _, secrets) = self.bm_credential(account_id, bm.id).await?;
        let business = bm.provider_id().ok_or_else(|| {
            rejected(
                "bm_sem_id_provider",
                "bm_id",
                "Informe o id_provider (Business ID) do BM antes.",
            )
        })?;
        let owned = self
            .shared()
            .graph
            .owned_wabas(secrets.access_token.expose(), business)
            .await
            .map_err(ActorError::from)?;
        let Some(found) = owned.iter().find(|w| w.id == input.provider_waba_id) else {
            return Err(ActorError::Rejected {
                code: "waba_invalida",
                message: format!(
                    "A WABA {} não pertence ao BM {} segundo o provedor.",
                    input.provider_waba_id, business
                ),
                details: json!({"field": "id_provider"}),
            });
        };
        let name = input
            .name
            .filter(|n| !n.trim().is_empty())
            .unwrap_or_else(|| found.name.clone());
        let w = store
            .upsert_waba(account_id, Some(bm.id), &found.id, &name)
            .await?;
        let w = store
            .update_waba_panel(
                account_id,
                w.id,
                None,
                Some(client_id.or(w.client_id)),
                Some(&name),
            )
            .await?;
        Ok(Self::waba_view(&w, Vec::new()))
    }

    /// `PUT /api/wabas/{id}`: the operator's `status` (`ativa`/`inativa`), `cliente_id` and
    /// name.
    pub async fn panel_update_waba(
        &self,
        account_id: i64,
        scope: &Scope,
        id: i64,
        status: Option<String>,
        client_id: Option<Option<i64>>,
        name: Option<String>,
    ) -> Result<PanelWaba, ActorError> {
        let store = &self.shared().store;
        store.scoped_waba(account_id, scope, id).await?;
        if let Some(s) = &status {
            if !engine::panel::WABA_STATUSES.contains(&s.as_str()) {
                return Err(rejected("status_invalido", "status", "`status` da WABA deve ser ativa ou inativa; a situação no provedor (standing) vem da sincronização."));
            }
        }
        if let Some(Some(c)) = client_id {
            self.resolve_client(account_id, scope, Some(c), None)
                .await?;
        }
        if name.as_deref().is_some_and(|n| n.trim().is_empty()) {
            return Err(rejected(
                "nome_obrigatorio",
                "nome",
                "`nome` não pode ficar vazio.",
            ));
        }
        store
            .update_waba_panel(
                account_id,
                id,
                status.as_deref(),
                client_id,
                name.as_deref().map(str::trim),
            )
            .await?;
        self.panel_waba(account_id, scope, id).await
    }

    /// `DELETE /api/wabas/{id}`: only a WABA without numbers.
    pub async fn panel_delete_waba(
        &self,
        account_id: i64,
        scope: &Scope,
        id: i64,
    ) -> Result<(), ActorError> {
        self.shared()
            .store
            .scoped_waba(account_id, scope, id)
            .await?;
        self.shared()
            .store
            .delete_waba(account_id, id)
            .await
            .map_err(panel_conflict)
    }

    // ---- numbers ---------------------------------------------------------------------

    /// One number in scope.
    pub async fn panel_number(
        &self,
        account_id: i64,
        scope: &Scope,
        id: i64,
    ) -> Result<NumberView, ActorError> {
        let store = &self.shared().store;
        let c = store.scoped_channel(account_id, scope, id).await?;
        let snaps = self.snapshots(account_id, std::slice::from_ref(&c)).await;
        let wabas = store.list_wabas(account_id).await?;
        let bms = store.list_bms(account_id).await?;
        Self::number_views(&snaps, &wabas, &bms)
            .pop()
            .ok_or(ActorError::NotFound)
    }

    /// `POST /api/phone-numbers`: connects a number of a WABA in scope with its BM's
    /// credential — the account API's connection (the provider proves the number is in the
    /// WABA); it becomes a channel with its actor.
    pub async fn panel_create_number(
        &self,
        account_id: i64,
        scope: &Scope,
        input: NumberInput,
    ) -> Result<NumberView, ActorError> {
        let store = &self.shared().store;
        let waba = store
            .scoped_waba(account_id, scope, input.waba_id)
            .await
            .map_err(|_| {
                rejected(
                    "waba_invalida",
                    "waba_id",
                    "`waba_id` não é uma WABA ao seu alcance nesta conta.",
                )
            })?;
        let Some(bm_id) = waba.bm_id else {
            return Err(rejected(
                "waba_sem_bm",
                "waba_id",
                "A WABA não tem BM com credencial: cadastre o BM e sincronize antes.",
            ));
        };
        let client_id = self
            .resolve_client(account_id, scope, input.client_id, None)
            .await?;
        let (_, _, secrets) = self.bm_credential(account_id, bm_id).await?;
        let pnid = input.phone_number_id.trim().to_string();
        let connected = self
            .connect_official(
                account_id,
                ConnectOfficial {
                    name: input.display_name.filter(|n| !n.trim().is_empty()),
                    phone_number_id: pnid.clone(),
                    waba_id: waba.provider_waba_id.clone(),
                    access_token: secrets.access_token,
                    app_secret: secrets.app_secret,
                    verify_token: None,
                },
            )
            .await;
        let (record, _) = match connected {
            // The BM's own credential cannot read the number: it is not the BM's.
            Err(ActorError::CredentialRefused(why)) => {
                return Err(ActorError::Rejected {
                    code: "waba_invalida",
                    message: format!(
                    "O número {pnid} não foi confirmado na WABA {} com a credencial do BM: {why}",
                    waba.provider_waba_id
                ),
                    details: json!({"field": "phone_number_id"}),
                })
            }
            other => other?,
        };
        if client_id.is_some() {
            store
                .update_channel_panel(account_id, record.id, None, Some(client_id))
                .await?;
        }
        self.panel_number(account_id, scope, record.id).await
    }

    /// `PUT /api/phone-numbers/{id}`: `nome_exibicao` and `cliente_id`.
    pub async fn panel_update_number(
        &self,
        account_id: i64,
        scope: &Scope,
        id: i64,
        display_name: Option<String>,
        client_id: Option<Option<i64>>,
    ) -> Result<NumberView, ActorError> {
        let store = &self.shared().store;
        store.scoped_channel(account_id, scope, id).await?;
        if display_name
            .as_deref()
            .is_some_and(|n| n.trim().is_empty() || n.chars().count() > 200)
        {
            return Err(rejected(
                "invalid_name",
                "nome_exibicao",
                "`nome_exibicao` deve ter de 1 a 200 caracteres.",
            ));
        }
        if let Some(Some(c)) = client_id {
            self.resolve_client(account_id, scope, Some(c), None)
                .await?;
        }
        store
            .update_channel_panel(
                account_id,
                id,
                display_name.as_deref().map(str::trim),
                client_id,
            )
            .await?;
        if let Err(e) = self
            .notify_channel(id, actors::cluster::Control::Reload)
            .await
        {
            tracing::warn!(channel_id = id, error = %e, "number not told to read its record again");
        }
        self.panel_number(account_id, scope, id).await
    }

    /// `DELETE /api/phone-numbers/{id}`: stops the number's actor and removes it, unless it
    /// has history (422 `numero_com_historico`, D-057).
    pub async fn panel_delete_number(
        &self,
        account_id: i64,
        scope: &Scope,
        id: i64,
    ) -> Result<(), ActorError> {
        let store = &self.shared().store;
        store.scoped_channel(account_id, scope, id).await?;
        if store.campaign_running_on(&[id]).await? {
            return Err(rejected(
                "campanha_em_andamento",
                "id",
                "Há campanha em andamento neste número.",
            ));
        }
        // Refuse before stopping anything.
        let history = store.delete_channel_check(id).await?;
        if history {
            return Err(panel_conflict(storage::StorageError::Conflict(
                "number_history".into(),
            )));
        }
        self.retire_channel(AccountId(account_id), ChannelId(id))
            .await?;
        store
            .delete_channel(AccountId(account_id), ChannelId(id))
            .await
            .map_err(panel_conflict)
    }

    /// `POST /api/phone-numbers/{id}/foto`: sets the number's profile picture at the provider
    /// (JPEG or PNG, checked by its magic bytes, at most 5 MB) with its BM's app id, then reads
    /// the profile back for the picture's URL.
    pub async fn panel_number_photo(
        &self,
        account_id: i64,
        scope: &Scope,
        id: i64,
        bytes: Vec<u8>,
    ) -> Result<NumberView, ActorError> {
        let store = &self.shared().store;
        let c = store.scoped_channel(account_id, scope, id).await?;
        if bytes.is_empty() || bytes.len() > PHOTO_MAX_BYTES {
            return Err(rejected(
                "foto_invalida",
                "foto",
                "A foto deve ter até 5 MB.",
            ));
        }
        let Some(mime) = engine::media::image_mime(&bytes) else {
            return Err(rejected(
                "foto_invalida",
                "foto",
                "A foto deve ser JPEG ou PNG.",
            ));
        };
        let bm_id = c.bm_id.ok_or_else(|| {
            rejected(
                "numero_sem_bm",
                "id",
                "O número não tem BM cadastrado com app_id.",
            )
        })?;
        let bm = store.bm(account_id, bm_id).await?;
        let app_id = bm.app_id.clone().ok_or_else(|| {
            rejected(
                "bm_sem_app_id",
                "app_id",
                "Informe o app_id do BM para enviar fotos de perfil.",
            )
        })?;
        let (_, token) = self.channel_with_token(account_id, id).await?;
        let graph = &self.shared().graph;
        graph
            .set_profile_picture(token.expose(), &app_id, &c.phone_number_id, bytes, mime)
            .await?;
        let url = graph
            .business_profile(token.expose(), &c.phone_number_id)
            .await?
            .profile_picture_url;
        store.set_channel_photo(id, url.as_deref()).await?;
        self.panel_number(account_id, scope, id).await
    }

    // ---- templates from the provider -------------------------------------------------

    /// Brings a WABA's templates at the provider into the library and onto the account's
    /// numbers of that WABA (status as the provider reports it). A template the library does
    /// not know is added with the provider's text; a number already on a later version keeps
    /// it. Returns how many library templates or number links were new.
    pub(crate) async fn import_templates(
        &self,
        account_id: i64,
        token: &str,
        waba_id: &str,
    ) -> Result<usize, ActorError> {
        let store = &self.shared().store;
        let listed = self.shared().graph.list_templates(token, waba_id).await?;
        let channels = store.channels_of_waba(account_id, waba_id).await?;
        let mut new = 0;
        for t in listed {
            let lib = match store
                .template_by_provider_name(account_id, &t.name, &t.language)
                .await?
            {
                Some(r) => r,
                None => {
                    new += 1;
                    match store
                        .insert_template(&imported_template(account_id, &t))
                        .await
                    {
                        Ok(r) => r,
                        Err(storage::StorageError::Conflict(_)) => continue,
                        Err(e) => return Err(e.into()),
                    }
                }
            };
            let rows = store.template_channels(lib.id).await?;
            let status = engine::library::TemplateStatus::from_provider(&t.status)
                .unwrap_or(engine::library::TemplateStatus::Pending);
            for c in &channels {
                match rows.iter().find(|r| r.channel_id == c.id) {
                    Some(r) if r.provider_name != t.name => continue,
                    Some(r) if r.status == status => continue,
                    Some(_) => {}
                    None => new += 1,
                }
                store
                    .upsert_template_channel(
                        account_id,
                        lib.id,
                        c.id,
                        TemplateChannelState {
                            waba_id,
                            provider_name: &t.name,
                            provider_template_id: Some(&t.id),
                            version: 1,
                            status,
                            rejection_reason: None,
                        },
                    )
                    .await?;
            }
        }
        Ok(new)
    }

    // ---- dashboard, alerts, state ----------------------------------------------------

    /// `GET /api/alertas`: the active alerts in scope, `critica` first, derived from the live
    /// health of numbers, WABAs' standing, BMs' health and templates rejected or paused.
    pub async fn panel_alerts(
        &self,
        account_id: i64,
        scope: &Scope,
    ) -> Result<Vec<Alert>, ActorError> {
        let (bms, wabas, snaps) = self.inventory(account_id, scope).await?;
        self.alerts_of(account_id, &bms, &wabas, &snaps).await
    }

    async fn alerts_of(
        &self,
        account_id: i64,
        bms: &[BmRecord],
        wabas: &[WabaRecord],
        snaps: &[ChannelSnapshot],
    ) -> Result<Vec<Alert>, ActorError> {
        let store = &self.shared().store;
        let mut out: Vec<Alert> = bms.iter().filter_map(|b| bm_alert(b, wabas)).collect();
        let unvalidated = store
            .unvalidated_wabas_since(account_id, self.shared().now_ms() - engine::DAY_MS)
            .await?;
        out.extend(
            bms.iter()
                .filter(|b| !b.has_app_secret)
                .filter(|b| {
                    wabas
                        .iter()
                        .any(|w| w.bm_id == Some(b.id) && unvalidated.contains(&w.provider_waba_id))
                })
                .map(unvalidated_alert),
        );
        out.extend(wabas.iter().filter_map(waba_alert));
        out.extend(snaps.iter().filter_map(number_alert));
        let in_scope: std::collections::HashSet<i64> = snaps.iter().map(|s| s.record.id).collect();
        let templates: HashMap<i64, String> = store
            .list_templates(account_id)
            .await?
            .into_iter()
            .map(|t| (t.id, t.name))
            .collect();
        let rows = store.account_template_channels(account_id).await?;
        out.extend(
            rows.iter()
                .filter(|r| in_scope.contains(&r.channel_id))
                .filter_map(|r| template_alert(r, &templates)),
        );
        out.sort_by_key(|a| (a.severidade != "critica", a.tipo != "bm", a.tipo != "waba"));
        Ok(out)
    }

    /// Outbound messages the provider accepted, per number in `scope` and hour, over the last
    /// `hours` hours ending with the current one (`GET /api/dashboard/envios-por-hora`, the web
    /// panel's chart). Hours without sends count 0.
    pub async fn panel_sends_per_hour(
        &self,
        account_id: i64,
        scope: &Scope,
        hours: i64,
    ) -> Result<HourlySends, ActorError> {
        const HOUR_MS: i64 = 3_600_000;
        let store = &self.shared().store;
        let channels = store.scoped_channels(account_id, scope).await?;
        let current = self.shared().now_ms() / HOUR_MS * HOUR_MS;
        let first = current - (hours - 1) * HOUR_MS;
        let rows = store.sends_per_hour(account_id, first).await?;
        let numeros = channels
            .iter()
            .map(|c| {
                let mut per_hour = vec![0; hours as usize];
                for (channel, hour, n) in &rows {
                    if *channel == c.id && *hour >= first && *hour <= current {
                        per_hour[((hour - first) / HOUR_MS) as usize] += n;
                    }
                }
                HourlyNumber {
                    id: c.id,
                    telefone: c.phone.clone(),
                    total: per_hour.iter().sum(),
                    por_hora: per_hour,
                }
            })
            .collect();
        Ok(HourlySends {
            horas: (0..hours)
                .map(|h| actors::time::iso(first + h * HOUR_MS))
                .collect(),
            numeros,
        })
    }

    /// `GET /api/dashboard`: risk KPIs in scope (D-059 gives the shape).
    pub async fn panel_dashboard(
        &self,
        account_id: i64,
        scope: &Scope,
        with_tasks: bool,
    ) -> Result<Dashboard, ActorError> {
        let (bms, wabas, snaps) = self.inventory(account_id, scope).await?;
        let mut bm_health: BTreeMap<String, i64> = BTreeMap::new();
        for b in &bms {
            let mine: Vec<&WabaRecord> = wabas.iter().filter(|w| w.bm_id == Some(b.id)).collect();
            *bm_health
                .entry(bm_health_of(b, &mine).to_string())
                .or_default() += 1;
        }
        let mut standing: BTreeMap<String, i64> = BTreeMap::new();
        for w in &wabas {
            *standing.entry(w.standing.clone()).or_default() += 1;
        }
        let alerts = self.alerts_of(account_id, &bms, &wabas, &snaps).await?;
        let mut tickets: BTreeMap<String, i64> = BTreeMap::new();
        let mut open = 0;
        if with_tasks {
            for t in self.shared().store.list_tasks(account_id).await? {
                if t.status != "resolvido" {
                    open += 1;
                    *tickets.entry(t.priority).or_default() += 1;
                }
            }
        }
        Ok(Dashboard {
            bms: DashboardBms {
                total: bms.len(),
                por_saude: bm_health,
            },
            wabas: DashboardWabas {
                total: wabas.len(),
                por_situacao: standing,
            },
            numeros: numbers_dashboard(&snaps),
            tarefas_abertas: DashboardTasks {
                total: open,
                por_prioridade: tickets,
            },
            alertas: DashboardAlerts {
                critica: alerts.iter().filter(|a| a.severidade == "critica").count(),
                atencao: alerts.iter().filter(|a| a.severidade == "atencao").count(),
            },
        })
    }

    /// `GET /api/state`: the whole state in scope for a front end: BMs (with WABAs and
    /// numbers), clients, templates, campaigns, tasks and users (users: Admin sees all, others
    /// themselves; tasks and campaigns: staff).
    pub async fn panel_state(
        &self,
        account_id: i64,
        scope: &Scope,
        me: &UserRecord,
        account_slug: &str,
    ) -> Result<PanelState, ActorError> {
        let store = &self.shared().store;
        let (bms, wabas, snaps) = self.inventory(account_id, scope).await?;
        let numbers = Self::number_views(&snaps, &wabas, &bms);
        let clients = store.list_clients(account_id, scope).await?;
        let names: HashMap<i64, String> = self.client_names(account_id).await?;
        let bm_views = Self::bm_views(&bms, &wabas, &numbers, &names);
        let waba_views: Vec<PanelWaba> = wabas
            .iter()
            .map(|w| {
                Self::waba_view(
                    w,
                    numbers
                        .iter()
                        .filter(|n| n.waba_id == w.provider_waba_id)
                        .cloned()
                        .collect(),
                )
            })
            .collect();
        let in_scope: std::collections::HashSet<i64> = numbers.iter().map(|n| n.id).collect();
        let staff = me.role != "Client";
        let templates: Vec<_> = self
            .list_library(account_id)
            .await?
            .into_iter()
            .filter(|t| staff || t.channels.iter().any(|c| in_scope.contains(&c.channel_id)))
            .collect();
        let (campaigns, tasks) = match staff {
            true => self.staff_lists(account_id).await?,
            false => (Vec::new(), Vec::new()),
        };
        let users: Vec<UserView> = if me.role == "Admin" {
            store
                .list_users(account_id)
                .await?
                .iter()
                .map(|u| UserView::of(u, account_slug))
                .collect()
        } else {
            vec![UserView::of(me, account_slug)]
        };
        Ok(PanelState {
            user: UserView::of(me, account_slug),
            bms: bm_views,
            wabas: waba_views,
            numeros: numbers,
            clientes: clients.iter().map(ClientView::of).collect(),
            templates,
            campanhas: campaigns,
            tarefas: tasks,
            usuarios: users,
        })
    }

    /// What only staff see in the panel's state: the latest 200 campaigns and the tasks.
    async fn staff_lists(
        &self,
        account_id: i64,
    ) -> Result<(Vec<CampaignSummary>, Vec<TaskView>), ActorError> {
        let store = &self.shared().store;
        let campaigns = store
            .campaign_summaries(account_id, 200)
            .await?
            .into_iter()
            .map(|(id, nome, status, at)| CampaignSummary {
                id,
                nome,
                status,
                created_at: actors::time::iso(at),
            })
            .collect();
        let tasks = store
            .list_tasks(account_id)
            .await?
            .iter()
            .map(task_json)
            .collect();
        Ok((campaigns, tasks))
    }

    // ---- tasks -----------------------------------------------------------------------

    /// Checks that a task's links name records of the account (in the caller's scope).
    pub async fn check_task_links(
        &self,
        account_id: i64,
        scope: &Scope,
        f: &storage::panel::TaskFields,
    ) -> Result<(), ActorError> {
        let store = &self.shared().store;
        engine::panel::check_task_status(&f.status)?;
        engine::panel::check_task_priority(&f.priority)?;
        if f.title.trim().is_empty() || f.title.chars().count() > 300 {
            return Err(rejected(
                "titulo_obrigatorio",
                "titulo",
                "`titulo` é obrigatório (até 300 caracteres).",
            ));
        }
        let bad = |field: &str| {
            rejected(
                "vinculo_invalido",
                field,
                format!("`{field}` não é um registro ao seu alcance nesta conta."),
            )
        };
        if let Some(id) = f.bm_id {
            store
                .scoped_bm(account_id, scope, id)
                .await
                .map_err(|_| bad("bm_id"))?;
        }
        if let Some(id) = f.waba_id {
            store
                .scoped_waba(account_id, scope, id)
                .await
                .map_err(|_| bad("waba_id"))?;
        }
        if let Some(id) = f.channel_id {
            store
                .scoped_channel(account_id, scope, id)
                .await
                .map_err(|_| bad("numero_id"))?;
        }
        if let Some(id) = f.campaign_id {
            if !store
                .campaign_exists(AccountId(account_id), CampaignId(id))
                .await?
            {
                return Err(bad("campanha_id"));
            }
        }
        if let Some(id) = f.assignee_id {
            store
                .user(account_id, id)
                .await
                .map_err(|_| bad("responsavel_id"))?;
        }
        Ok(())
    }
}

/// A task as the panel shows it.
pub fn task_json(t: &TaskRecord) -> TaskView {
    TaskView {
        id: t.id,
        titulo: t.title.clone(),
        descricao: t.description.clone(),
        status: t.status.clone(),
        prioridade: t.priority.clone(),
        posicao: t.position,
        responsavel_id: t.assignee_id,
        bm_id: t.bm_id,
        waba_id: t.waba_id,
        numero_id: t.channel_id,
        campanha_id: t.campaign_id,
        criado_por: t.created_by,
        created_at: actors::time::iso(t.created_at),
        updated_at: actors::time::iso(t.updated_at),
    }
}

/// A support task of the board (D-059), as the panel shows it.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct TaskView {
    /// Id.
    pub id: i64,
    /// Title.
    pub titulo: String,
    /// Description.
    pub descricao: String,
    /// The board's column: `aberto`, `em_andamento`, `aguardando`, `resolvido`.
    #[schema(pattern = "^(aberto|em_andamento|aguardando|resolvido)$")]
    pub status: String,
    /// `baixa`, `media`, `alta`, `urgente`.
    #[schema(pattern = "^(baixa|media|alta|urgente)$")]
    pub prioridade: String,
    /// Place in its column, from 0.
    pub posicao: i64,
    /// The user it is assigned to.
    pub responsavel_id: Option<i64>,
    /// A linked BM.
    pub bm_id: Option<i64>,
    /// A linked WABA.
    pub waba_id: Option<i64>,
    /// A linked number.
    pub numero_id: Option<i64>,
    /// A linked campaign.
    pub campanha_id: Option<i64>,
    /// Who created it.
    pub criado_por: Option<i64>,
    /// Created (ISO 8601).
    pub created_at: String,
    /// Changed (ISO 8601).
    pub updated_at: String,
}

/// A library template for one the provider holds and the library does not (a WABA's import):
/// its texts and buttons read from the provider's components; without a var_map.
fn imported_template(account_id: i64, t: &provider::wire::TemplateInfo) -> NewTemplate {
    let text = |kind: &str| {
        t.components.as_array().and_then(|cs| {
            cs.iter()
                .find(|c| c.get("type").and_then(Value::as_str) == Some(kind))
                .and_then(|c| c.get("text").and_then(Value::as_str))
                .map(str::to_string)
        })
    };
    NewTemplate {
        account_id,
        name: t.name.clone(),
        provider_name: t.name.clone(),
        category: t.category.to_ascii_lowercase(),
        language: t.language.clone(),
        body: text("BODY").unwrap_or_default(),
        header_text: text("HEADER"),
        header_media: imported_header_media(&t.components),
        footer_text: text("FOOTER"),
        buttons: imported_buttons(&t.components),
        var_map: json!({}),
        problems: json!([]),
        // Imported from one WABA: it follows new numbers only when an operator says so
        // (D-066).
        auto_replicate: false,
    }
}

/// The media format of an imported template's header (`image`, `video`, `document`), D-071.
fn imported_header_media(components: &Value) -> Option<String> {
    components.as_array()?.iter().find_map(|c| {
        let is_header = c["type"]
            .as_str()
            .is_some_and(|t| t.eq_ignore_ascii_case("HEADER"));
        let format = c["format"].as_str()?;
        is_header
            .then(|| engine::template::HeaderMedia::parse(format))
            .flatten()
            .map(|m| m.as_str().to_string())
    })
}

/// An imported template's buttons as the library holds them (`type` lower case, the URL
/// example kept), so its sends are completed from them (D-071).
fn imported_buttons(components: &Value) -> Value {
    let buttons = components
        .as_array()
        .and_then(|cs| {
            cs.iter().find(|c| {
                c["type"]
                    .as_str()
                    .is_some_and(|t| t.eq_ignore_ascii_case("BUTTONS"))
            })
        })
        .and_then(|c| c["buttons"].as_array().cloned())
        .unwrap_or_default();
    Value::Array(
        buttons
            .iter()
            .map(|b| {
                let example = match &b["example"] {
                    Value::Array(a) => a.first().cloned().unwrap_or(Value::Null),
                    other => other.clone(),
                };
                let mut out = json!({
                    "type": b["type"].as_str().unwrap_or_default().to_ascii_lowercase(),
                    "text": b["text"].as_str().unwrap_or_default(),
                });
                for (k, v) in [
                    ("url", b["url"].clone()),
                    ("phone_number", b["phone_number"].clone()),
                    ("example", example),
                ] {
                    if !v.is_null() {
                        out[k] = v;
                    }
                }
                out
            })
            .collect(),
    )
}

/// The dashboard's count of numbers: by quality, tier and health tone, and how many are near
/// their 24 h limit (10 % or less left; an unlimited one never is).
fn numbers_dashboard(snaps: &[ChannelSnapshot]) -> DashboardNumbers {
    let mut quality: BTreeMap<String, i64> = BTreeMap::new();
    let mut tiers: BTreeMap<String, i64> = BTreeMap::new();
    let mut tone: BTreeMap<String, i64> = BTreeMap::new();
    let mut near = 0;
    for s in snaps {
        *quality.entry(s.record.quality.clone()).or_default() += 1;
        *tiers
            .entry(
                s.record
                    .tier
                    .clone()
                    .unwrap_or_else(|| "desconhecido".into()),
            )
            .or_default() += 1;
        *tone
            .entry(
                match s.health.tone {
                    Tone::Ok => "ok",
                    Tone::Attention => "atencao",
                    Tone::Bad => "critico",
                }
                .to_string(),
            )
            .or_default() += 1;
        // Near the limit: 10 % of the 24 h limit or less left (unlimited never is).
        if s.health.limit_24h > 0 && s.health.available * 10 <= s.health.limit_24h {
            near += 1;
        }
    }
    DashboardNumbers {
        total: snaps.len(),
        por_qualidade: quality,
        por_tier: tiers,
        por_saude: tone,
        perto_do_limite: near,
    }
}

/// A BM's alert from its health (banned WABA, payment, credential, restriction); none when ok.
fn bm_alert(b: &BmRecord, wabas: &[WabaRecord]) -> Option<Alert> {
    let mine: Vec<&WabaRecord> = wabas.iter().filter(|w| w.bm_id == Some(b.id)).collect();
    let health = bm_health_of(b, &mine);
    let (sev, msg, next) = match health {
        "banido" => (
            "critica",
            "Uma WABA deste BM está banida pelo provedor.",
            "Abra recurso no provedor; os números da WABA não enviam.",
        ),
        "pagamento_pendente" => (
            "critica",
            "O provedor aponta problema no método de pagamento do BM.",
            "Atualize o pagamento no Business Manager e rode a verificação de pagamento.",
        ),
        "credencial_invalida" => (
            "critica",
            "O token de acesso do BM foi recusado pelo provedor na última sincronização.",
            "Gere um novo token de usuário do sistema e atualize o BM.",
        ),
        "restrito" => (
            "atencao",
            "Uma WABA deste BM tem restrição de envio.",
            "Veja a restrição no provedor e reduza envios iniciados pela empresa.",
        ),
        _ => return None,
    };
    Some(Alert {
        severidade: sev,
        tipo: "bm",
        id: b.id,
        nome: b.name.clone(),
        codigo: health.to_string(),
        mensagem: msg.to_string(),
        proxima_acao: Some(next.to_string()),
    })
}

/// The alert of a BM without an app secret whose WABAs got webhooks nobody could verify in
/// the last 24 h.
fn unvalidated_alert(b: &BmRecord) -> Alert {
    Alert {
        severidade: "atencao",
        tipo: "bm",
        id: b.id,
        nome: b.name.clone(),
        codigo: "webhook_sem_validacao".into(),
        mensagem: "Webhooks para WABAs deste BM chegaram nas últimas 24 h sem uma assinatura que o app secret da instalação confirme (o BM não tem app secret próprio): recusados, nem aplicados nem encaminhados.".into(),
        proxima_acao: Some("Cadastre o app secret do BM.".into()),
    }
}

/// A banned or restricted WABA's alert.
fn waba_alert(w: &WabaRecord) -> Option<Alert> {
    let (sev, code, msg) = match w.standing.as_str() {
        "banned" => ("critica", "waba_banida", "WABA banida pelo provedor."),
        "restricted" => ("atencao", "waba_restrita", "WABA com restrição de envio."),
        _ => return None,
    };
    Some(Alert {
        severidade: sev,
        tipo: "waba",
        id: w.id,
        nome: w.name.clone(),
        codigo: code.into(),
        mensagem: match &w.standing_detail {
            Some(d) => format!("{msg} ({d})"),
            None => msg.into(),
        },
        proxima_acao: None,
    })
}

/// A number's alert from its live health; none when ok.
fn number_alert(s: &ChannelSnapshot) -> Option<Alert> {
    let sev = match s.health.tone {
        Tone::Bad => "critica",
        Tone::Attention => "atencao",
        Tone::Ok => return None,
    };
    Some(Alert {
        severidade: sev,
        tipo: "numero",
        id: s.record.id,
        nome: format!("{} ({})", s.record.name, s.record.phone),
        codigo: s.health.code.clone(),
        mensagem: s.health.label.clone(),
        proxima_acao: s.health.next_action.clone(),
    })
}

/// A template's alert on one number: rejected, paused or disabled by the provider.
fn template_alert(
    r: &storage::templates::TemplateChannel,
    names: &HashMap<i64, String>,
) -> Option<Alert> {
    let (code, msg) = match r.status.as_str() {
        "rejected" => ("template_rejeitado", "Template rejeitado pelo provedor"),
        "paused" => ("template_pausado", "Template pausado pelo provedor"),
        "disabled" => ("template_desativado", "Template desativado pelo provedor"),
        _ => return None,
    };
    Some(Alert {
        severidade: "atencao",
        tipo: "template",
        id: r.template_id,
        nome: names.get(&r.template_id).cloned().unwrap_or_default(),
        codigo: code.into(),
        mensagem: match &r.rejection_reason {
            Some(why) => format!("{msg} no número {}: {why}", r.channel_id),
            None => format!("{msg} no número {}.", r.channel_id),
        },
        proxima_acao: Some("Corrija o template e reenvie, ou reative como nova versão.".into()),
    })
}
