//! What the pages read of the panel API's answers (`data` of `/api/…`): only the fields a page
//! shows, so a renamed field fails the page's test instead of showing blanks. Shapes are the
//! API's (spec `panel-api.md`, the panel's OpenAPI document at `/api/openapi.json`).

use serde::Deserialize;
use serde_json::Value;
use std::collections::BTreeMap;

/// `GET /api/me`.
#[derive(Debug, Clone, Deserialize)]
pub struct Me {
    pub name: String,
    pub email: String,
    /// `Admin`, `Operador` or `Client`.
    pub role: String,
    /// The account's slug.
    pub account: String,
}

impl Me {
    /// Admin or Operador.
    pub fn staff(&self) -> bool {
        self.role == "Admin" || self.role == "Operador"
    }

    /// Admin.
    pub fn admin(&self) -> bool {
        self.role == "Admin"
    }
}

/// Counts by a label (`{"GREEN": 3}`).
pub type Counts = BTreeMap<String, i64>;

/// `GET /api/dashboard`.
#[derive(Debug, Clone, Deserialize)]
pub struct Dashboard {
    pub alertas: AlertCounts,
    pub bms: BmKpis,
    pub wabas: WabaKpis,
    pub numeros: NumberKpis,
    pub tarefas_abertas: TaskKpis,
}

/// Alerts by severity.
#[derive(Debug, Clone, Deserialize)]
pub struct AlertCounts {
    pub critica: i64,
    pub atencao: i64,
}

/// BMs by health.
#[derive(Debug, Clone, Deserialize)]
pub struct BmKpis {
    pub total: i64,
    pub por_saude: Counts,
}

/// WABAs by standing.
#[derive(Debug, Clone, Deserialize)]
pub struct WabaKpis {
    pub total: i64,
    pub por_situacao: Counts,
}

/// Open tasks by priority.
#[derive(Debug, Clone, Deserialize)]
pub struct TaskKpis {
    pub total: i64,
    pub por_prioridade: Counts,
}

/// The numbers' KPIs.
#[derive(Debug, Clone, Deserialize)]
pub struct NumberKpis {
    pub total: i64,
    pub perto_do_limite: i64,
    pub por_qualidade: Counts,
    pub por_saude: Counts,
    pub por_tier: Counts,
}

/// `GET /api/alertas` item.
#[derive(Debug, Clone, Deserialize)]
pub struct Alert {
    /// `critica` or `atencao`.
    pub severidade: String,
    /// `bm`, `waba`, `numero`, `template`.
    pub tipo: String,
    pub id: i64,
    pub nome: String,
    pub codigo: String,
    pub mensagem: String,
    pub proxima_acao: Option<String>,
}

impl Alert {
    /// What to do, in the panel's words: a number's health code's action
    /// ([`super::glossary::health_action`]), else the API's text with its field names as
    /// labels.
    pub fn next_step(&self) -> Option<String> {
        if self.tipo == "numero" {
            return super::glossary::health_action(&self.codigo).map(str::to_string);
        }
        self.proxima_acao.as_deref().map(super::glossary::message)
    }

    /// The page that shows the record at fault.
    pub fn link(&self) -> String {
        match self.tipo.as_str() {
            "template" => "/templates".into(),
            "bm" => format!("/inventario#bm-{}", self.id),
            "waba" => format!("/inventario#waba-{}", self.id),
            _ => format!("/inventario#numero-{}", self.id),
        }
    }
}

/// `GET /api/business-managers` item.
#[derive(Debug, Clone, Deserialize)]
pub struct Bm {
    pub id: i64,
    pub nome: String,
    pub id_provider: Option<String>,
    pub health_status: String,
    pub last_sync_at: Option<String>,
    pub tier: Option<String>,
    pub verificacao: Option<String>,
    pub cliente: Option<String>,
    pub wabas: Vec<Waba>,
    #[serde(default)]
    pub cliente_id: Option<i64>,
    #[serde(default)]
    pub app_id: Option<String>,
    /// Whether a system-user token is kept (never the token).
    #[serde(default)]
    pub has_access_token: bool,
    /// Whether an app secret is kept (never the secret).
    #[serde(default)]
    pub has_app_secret: bool,
}

/// The values of the BM form (`bm_form.html`): empty for a new BM, a BM's own to edit it;
/// never a secret, only whether one is kept.
#[derive(Debug, Clone, Default)]
pub struct BmFormView {
    /// Distinguishes the form's element ids (`nova`, or the BM's id).
    pub key: String,
    pub nome: String,
    pub cliente_id: Option<i64>,
    pub id_provider: String,
    pub app_id: String,
    pub has_access_token: bool,
    pub has_app_secret: bool,
}

impl BmFormView {
    /// A new BM's form.
    pub fn empty() -> Self {
        BmFormView {
            key: "nova".into(),
            ..Default::default()
        }
    }

    /// `bm`'s form.
    pub fn of(bm: &Bm) -> Self {
        BmFormView {
            key: bm.id.to_string(),
            nome: bm.nome.clone(),
            cliente_id: bm.cliente_id,
            id_provider: bm.id_provider.clone().unwrap_or_default(),
            app_id: bm.app_id.clone().unwrap_or_default(),
            has_access_token: bm.has_access_token,
            has_app_secret: bm.has_app_secret,
        }
    }

    /// Whether `client` is the BM's client.
    pub fn has_client(&self, client: &i64) -> bool {
        self.cliente_id == Some(*client)
    }

    /// The placeholder of a secret's field: says when one is kept.
    pub fn kept(&self, has: &bool) -> &'static str {
        if *has {
            "guardado; em branco mantém"
        } else {
            ""
        }
    }
}

/// A WABA of a BM.
#[derive(Debug, Clone, Deserialize)]
pub struct Waba {
    pub id: i64,
    pub id_provider: String,
    pub nome: Option<String>,
    pub status: String,
    pub numeros: Vec<Number>,
}

/// A number of a WABA (`GET /api/phone-numbers` item).
#[derive(Debug, Clone, Deserialize)]
pub struct Number {
    pub id: i64,
    pub nome_exibicao: Option<String>,
    pub telefone: String,
    pub qualidade: String,
    pub tier: Option<String>,
    pub status: String,
    pub foto_url: Option<String>,
    pub cliente_id: Option<i64>,
    pub health: Health,
    /// The provider's id of the number (`GET /api/phone-numbers`; absent in a BM's tree).
    #[serde(default)]
    pub phone_number_id: Option<String>,
}

impl Number {
    /// Whether `client` is the number's own client.
    pub fn has_client(&self, client: &i64) -> bool {
        self.cliente_id == Some(*client)
    }
}

/// A number's health (limit, headroom, next action).
#[derive(Debug, Clone, Deserialize)]
pub struct Health {
    pub available: i64,
    pub code: String,
    pub label: String,
    pub limit_24h: i64,
    pub sent_24h: i64,
    pub tone: String,
}

impl Health {
    /// Sent in 24 h as a share of the limit, percent (0–100).
    pub fn used_pct(&self) -> i64 {
        pct(self.sent_24h, self.limit_24h)
    }
}

/// `part` of `whole`, percent, 0–100.
pub fn pct(part: i64, whole: i64) -> i64 {
    if whole <= 0 {
        0
    } else {
        (part.saturating_mul(100) / whole).clamp(0, 100)
    }
}

/// `GET /api/clientes` item.
#[derive(Debug, Clone, Deserialize)]
pub struct Client {
    pub id: i64,
    pub nome: String,
    pub documento: Option<String>,
    pub webhook_url: Option<String>,
    pub vinculos: Links,
}

/// What a client is linked to.
#[derive(Debug, Clone, Deserialize)]
pub struct Links {
    pub bms: i64,
    pub wabas: i64,
    pub numeros: i64,
}

/// `GET /api/users` item.
#[derive(Debug, Clone, Deserialize)]
pub struct User {
    pub id: i64,
    pub name: String,
    pub email: String,
    pub role: String,
    pub status: String,
    /// `{bms: [ids]}` (staff; empty: every BM) or `{cliente_id}` (Client).
    #[serde(default)]
    pub scope: Value,
}

impl User {
    /// Admin or Operador (a BM scope applies).
    pub fn staff(&self) -> bool {
        self.role == "Admin" || self.role == "Operador"
    }

    /// Whether the BM `id` is in the user's scope list (an empty list means every BM).
    pub fn has_bm(&self, id: &i64) -> bool {
        self.scope["bms"]
            .as_array()
            .is_some_and(|b| b.iter().any(|x| x.as_i64() == Some(*id)))
    }

    /// The roles a user may be given: `(role, "selected" or "")`.
    pub fn role_options(&self) -> Vec<(&'static str, &'static str)> {
        ["Admin", "Operador", "Client"]
            .into_iter()
            .map(|r| (r, if self.role == r { "selected" } else { "" }))
            .collect()
    }
}

/// `GET /api/templates` item.
#[derive(Debug, Clone, Deserialize)]
pub struct TemplateView {
    pub id: i64,
    pub name: String,
    pub category: String,
    pub language: String,
    pub body: String,
    pub header_text: Option<String>,
    /// `text`, `image`, `video`, `document`; `None` without a header.
    #[serde(default)]
    pub header_type: Option<String>,
    pub footer_text: Option<String>,
    pub channels: Vec<TemplateChannel>,
    /// What the provider would refuse (`engine::library::problems`), shown before a submit.
    #[serde(default)]
    pub problems: Vec<TemplateProblem>,
    /// `[{type, text, url?, phone_number?}]`.
    #[serde(default)]
    pub buttons: Vec<TemplateButton>,
}

/// A template's problem.
#[derive(Debug, Clone, Deserialize)]
pub struct TemplateProblem {
    pub message: String,
}

/// A template's button.
#[derive(Debug, Clone, Deserialize)]
pub struct TemplateButton {
    pub text: String,
}

/// A template's state on one number.
#[derive(Debug, Clone, Deserialize)]
pub struct TemplateChannel {
    pub channel_id: i64,
    pub status: String,
    pub quality: Option<String>,
    pub rejection_reason: Option<String>,
}

/// A campaign (`GET /api/campaigns/{id}`).
#[derive(Debug, Clone, Deserialize)]
pub struct Campaign {
    pub id: i64,
    pub nome: String,
    /// `rascunho`, `higienizando`, `falha_higienizacao`, `aguardando_aprovacao`, `aprovada`,
    /// `em_andamento`, `pausada`, `concluida`, `cancelada`.
    pub status: String,
    pub contatos: ContactCounts,
    pub higienizacao: Hygiene,
    pub motivo_pausa: Option<String>,
    pub retida: bool,
    pub created_at: String,
    #[serde(default)]
    pub started_at: Option<String>,
    /// Whether the reader may approve it (the API's answer; absent: no).
    #[serde(default)]
    pub pode_aprovar: Option<bool>,
    /// What the CSV import dropped (absent from an older gateway: nothing).
    #[serde(default)]
    pub descartados: Option<Dropped>,
}

/// Rows a campaign's CSV import dropped.
#[derive(Debug, Clone, Deserialize)]
pub struct Dropped {
    pub duplicados: i64,
    pub em_branco: i64,
}

impl Campaign {
    /// The status as operators read it ([`super::glossary::campaign_status`]).
    pub fn status_label(&self) -> String {
        super::glossary::campaign_status(&self.status)
    }

    /// Whether the reader may approve it (the API applies the two-person rule).
    pub fn may_approve(&self) -> bool {
        self.pode_aprovar == Some(true)
    }

    /// When it should finish at the pace so far: `~ 12 min (às 14:35)`, from the sends settled
    /// since it started and those still to go; `None` when nothing is running or nothing has
    /// settled yet. `now` is the reading's instant.
    pub fn eta(&self, report: &Report, now: &chrono::DateTime<chrono::Utc>) -> Option<String> {
        let now = *now;
        if self.status != "em_andamento" {
            return None;
        }
        let started = chrono::DateTime::parse_from_rfc3339(self.started_at.as_deref()?).ok()?;
        let elapsed_ms = (now - started.with_timezone(&chrono::Utc)).num_milliseconds();
        let settled = report.enviados + report.falhas + report.ignorados;
        let left = (report.liberados - settled).max(0);
        if settled <= 0 || elapsed_ms <= 0 || left == 0 {
            return None;
        }
        let left_ms = (left as f64 * elapsed_ms as f64 / settled as f64) as i64;
        let at = now + chrono::Duration::milliseconds(left_ms);
        let span = match left_ms / 1000 {
            s if s < 60 => "menos de 1 min".to_string(),
            s if s < 3600 => format!("{} min", s / 60),
            s => format!("{} h {} min", s / 3600, (s % 3600) / 60),
        };
        Some(format!(
            "~ {span} (às {})",
            super::glossary::time(&at.to_rfc3339())
                .split(' ')
                .nth(1)
                .unwrap_or("")
        ))
    }

    /// Why it is paused, as operators read it.
    /// Why it is paused, as one sentence that begins "Pausada" (a reason that already says
    /// "pausada por …" is not prefixed again).
    pub fn pause_text(&self) -> Option<String> {
        let reason = super::glossary::pause_reason(self.motivo_pausa.as_deref()?);
        let mut chars = reason.chars();
        Some(match reason.to_lowercase().starts_with("pausada") {
            true => chars
                .next()
                .map(|c| c.to_uppercase().chain(chars).collect())
                .unwrap_or_default(),
            false => format!("Pausada: {reason}"),
        })
    }

    /// Whether it can still change (progress is streamed while it can).
    pub fn live(&self) -> bool {
        !matches!(self.status.as_str(), "concluida" | "cancelada")
    }
}

/// The contacts' hygiene counts.
#[derive(Debug, Clone, Deserialize)]
pub struct ContactCounts {
    pub total: i64,
    pub validos: i64,
    pub invalidos: i64,
    pub pendentes: i64,
    pub desconhecidos: i64,
}

/// The hygiene job.
#[derive(Debug, Clone, Deserialize)]
pub struct Hygiene {
    pub erro: Option<String>,
}

/// `GET /api/campaigns/{id}/report`.
#[derive(Debug, Clone, Deserialize)]
pub struct Report {
    pub liberados: i64,
    pub na_fila: i64,
    pub enviados: i64,
    pub entregues: i64,
    pub lidos: i64,
    pub falhas: i64,
    pub ignorados: i64,
    pub por_numero: Vec<NumberProgress>,
}

impl Report {
    /// Settled (sent, failed or skipped) out of those released, percent.
    pub fn done_pct(&self) -> i64 {
        pct(self.enviados + self.falhas + self.ignorados, self.liberados)
    }

    /// Delivered (or read) out of sent, percent.
    pub fn delivery_pct(&self) -> i64 {
        pct(self.entregues, self.enviados)
    }

    /// Read out of sent, percent.
    pub fn read_pct(&self) -> i64 {
        pct(self.lidos, self.enviados)
    }

    /// Failed out of attempted (sent or failed), percent.
    pub fn failure_pct(&self) -> i64 {
        pct(self.falhas, self.enviados + self.falhas)
    }
}

/// One number's share of a campaign.
#[derive(Debug, Clone, Deserialize)]
pub struct NumberProgress {
    pub channel_id: i64,
    pub sent: i64,
    pub delivered: i64,
    pub read: i64,
    pub failed: i64,
}

/// `GET /api/campaigns/{id}/contacts` item.
#[derive(Debug, Clone, Deserialize)]
pub struct Contact {
    pub numero: String,
    pub nome: Option<String>,
    /// `valid`, `invalid`, `unknown`, `pending`.
    pub higienizacao: String,
    pub motivo: Option<String>,
}

/// `GET /api/campaigns/{id}/sends` item.
#[derive(Debug, Clone, Deserialize)]
pub struct SendLine {
    pub numero: String,
    pub nome: Option<String>,
    pub numero_envio: Option<String>,
    /// Tolerated missing or null (an older gateway answered `null` for waiting sends).
    #[serde(default)]
    pub status: Option<String>,
    pub erro: Option<Value>,
    pub enviado_em: Option<String>,
}

impl SendLine {
    /// The send's status in Portuguese (`—` when the answer had none).
    pub fn status_text(&self) -> String {
        self.status
            .as_deref()
            .map_or_else(|| "—".into(), super::glossary::send_status)
    }

    /// The provider's error as operators read it (`131026: Message undeliverable`), or empty.
    pub fn error_text(&self) -> String {
        match &self.erro {
            None | Some(Value::Null) => String::new(),
            Some(Value::String(s)) => s.clone(),
            Some(v) => {
                let code = v
                    .get("code")
                    .map(|c| c.to_string().trim_matches('"').to_string());
                let text = v
                    .get("message")
                    .or_else(|| v.get("title"))
                    .and_then(Value::as_str)
                    .map(str::to_string);
                match (code, text) {
                    (Some(c), Some(t)) => format!("{c}: {t}"),
                    (Some(c), None) => c,
                    (None, Some(t)) => t,
                    (None, None) => v.to_string(),
                }
            }
        }
    }
}

/// `GET /api/client/context`: what a Client user's page needs of it.
#[derive(Debug, Clone, Deserialize)]
pub struct ClientContext {
    pub cliente: ClientName,
    pub numeros: Vec<Number>,
}

/// A client's name.
#[derive(Debug, Clone, Deserialize)]
pub struct ClientName {
    pub nome: String,
}

/// `GET /api/client/sends` item: a message a number of the client sent.
#[derive(Debug, Clone, Deserialize)]
pub struct ClientSend {
    pub to: String,
    pub channel_id: i64,
    pub status: String,
    #[serde(default)]
    pub template: Option<TemplateName>,
    #[serde(default)]
    pub preview_text: Option<String>,
    #[serde(default)]
    pub text: Option<String>,
    pub created_at: String,
    #[serde(default)]
    pub error: Option<SendError>,
}

/// A template a message used.
#[derive(Debug, Clone, Deserialize)]
pub struct TemplateName {
    pub name: String,
}

/// The provider's error on a failed message.
#[derive(Debug, Clone, Deserialize)]
pub struct SendError {
    pub code: Option<i64>,
    pub title: Option<String>,
}

impl ClientSend {
    /// What was sent, shortened: the rendered text, else the template's name.
    pub fn what(&self) -> String {
        let text = self
            .preview_text
            .as_deref()
            .or(self.text.as_deref())
            .map(str::to_string)
            .or_else(|| self.template.as_ref().map(|t| format!("modelo {}", t.name)))
            .unwrap_or_default();
        if text.chars().count() > 80 {
            format!("{}…", text.chars().take(80).collect::<String>())
        } else {
            text
        }
    }

    /// The provider's error as the client reads it (`131026: Message undeliverable`), or empty.
    pub fn error_text(&self) -> String {
        match &self.error {
            None => String::new(),
            Some(e) => match (e.code, e.title.as_deref()) {
                (Some(c), Some(t)) => format!("{c}: {t}"),
                (Some(c), None) => c.to_string(),
                (None, Some(t)) => t.to_string(),
                (None, None) => String::new(),
            },
        }
    }
}

/// `GET /api/settings/dispatch`.
#[derive(Debug, Clone, Deserialize)]
pub struct DispatchSetting {
    pub habilitado: bool,
}

/// `GET /api/tasks`.
#[derive(Debug, Clone, Deserialize)]
pub struct Board {
    pub colunas: BTreeMap<String, Vec<Task>>,
}

/// A task.
#[derive(Debug, Clone, Deserialize)]
pub struct Task {
    pub id: i64,
    pub titulo: String,
    pub descricao: String,
    pub prioridade: String,
}

/// `GET /api/webhook-logs` item.
#[derive(Debug, Clone, Deserialize)]
pub struct WebhookLog {
    pub id: i64,
    pub tipo: String,
    pub received_at: String,
    pub assinatura: String,
    pub http_status: i64,
    pub campos: Value,
    pub numeros: Value,
    pub detalhe: Option<String>,
    pub encaminhamento: String,
    pub entregas: Vec<Forward>,
    /// The provider's body as received, while it is retained.
    #[serde(default)]
    pub corpo: Option<String>,
}

/// One forward of a webhook log line to a client.
#[derive(Debug, Clone, Deserialize)]
pub struct Forward {
    pub client_id: Option<i64>,
    /// `delivered`, `retrying`, `pending`, `failed`.
    pub status: String,
    pub attempts: i64,
    pub last_status_code: Option<i64>,
    pub last_error: Option<String>,
}

impl WebhookLog {
    /// The JSON list of a log field as `a, b`, each item through `word`.
    fn list_with(v: &Value, word: impl Fn(&str) -> String) -> String {
        v.as_array()
            .map(|a| {
                a.iter()
                    .map(|x| x.as_str().map_or_else(|| x.to_string(), &word))
                    .collect::<Vec<_>>()
                    .join(", ")
            })
            .unwrap_or_default()
    }

    /// The body as received, indented when it is JSON.
    pub fn body_text(&self) -> Option<String> {
        let raw = self.corpo.as_deref()?;
        Some(
            serde_json::from_str::<Value>(raw)
                .ok()
                .and_then(|v| serde_json::to_string_pretty(&v).ok())
                .unwrap_or_else(|| raw.to_string()),
        )
    }

    /// The webhook's fields as people read them (`status de template`).
    pub fn fields_text(&self) -> String {
        Self::list_with(&self.campos, super::glossary::webhook_field)
    }

    /// The numbers the event named, by phone where the account has them (`phones`: the
    /// provider's id → phone), else by the provider's id.
    pub fn numbers_text(&self, phones: &BTreeMap<String, String>) -> String {
        Self::list_with(&self.numeros, |id| {
            phones.get(id).cloned().unwrap_or_else(|| id.to_string())
        })
    }
}

/// `GET /api/audit-log` item.
#[derive(Debug, Clone, Deserialize)]
pub struct AuditLine {
    pub token_name: String,
    pub action: String,
    pub target: String,
    pub at: String,
}

/// `GET /api/cluster` (issue 52); every field but `modo` may be missing (one node).
#[derive(Debug, Clone, Deserialize)]
pub struct ClusterView {
    pub modo: String,
    #[serde(default)]
    pub no: Option<String>,
    #[serde(default)]
    pub ttl_lease_ms: Option<i64>,
    #[serde(default)]
    pub rodada_ha_ms: Option<i64>,
    #[serde(default)]
    pub nos: Vec<ClusterNode>,
    #[serde(default)]
    pub celulas: Vec<ClusterCell>,
}

/// A node of [`ClusterView`].
#[derive(Debug, Clone, Deserialize)]
pub struct ClusterNode {
    pub nome: String,
    #[serde(default)]
    pub celulas: i64,
    #[serde(default)]
    pub numeros: i64,
    #[serde(default)]
    pub este: bool,
}

/// A cell of [`ClusterView`].
#[derive(Debug, Clone, Deserialize)]
pub struct ClusterCell {
    pub chave: String,
    #[serde(default)]
    pub no: Option<String>,
    #[serde(default)]
    pub epoca: i64,
    #[serde(default)]
    pub ha_ms: i64,
    #[serde(default)]
    pub expira_em_ms: i64,
    #[serde(default)]
    pub numeros: Vec<i64>,
}

/// `GET /api/wiki` item.
#[derive(Debug, Clone, Deserialize)]
pub struct WikiEntry {
    pub slug: String,
    pub title: String,
}

/// `GET /api/wiki/{slug}`.
#[derive(Debug, Clone, Deserialize)]
pub struct WikiPage {
    #[serde(default)]
    pub id: i64,
    pub title: String,
    /// Markdown.
    pub content: String,
    pub updated_at: String,
    /// `private` or `public`.
    #[serde(default)]
    pub visibility: String,
}

impl WikiPage {
    /// Whether the page is public.
    pub fn public(&self) -> bool {
        self.visibility == "public"
    }
}

/// `GET /api/dashboard/envios-por-hora`.
#[derive(Debug, Clone, Deserialize)]
pub struct HourlySends {
    /// Each hour's start (ISO 8601, UTC).
    pub horas: Vec<String>,
    pub numeros: Vec<HourlyNumber>,
}

/// One number's sends per hour.
#[derive(Debug, Clone, Deserialize)]
pub struct HourlyNumber {
    pub telefone: String,
    pub por_hora: Vec<i64>,
    pub total: i64,
}

/// One bar segment of a stacked chart, in the SVG's units.
#[derive(Debug, Clone)]
pub struct Bar {
    pub x: i64,
    pub y: i64,
    pub w: i64,
    pub h: i64,
    /// `s0`…`s7`: the number's colour.
    pub class: String,
    /// What a pointer shows (`<title>`).
    pub title: String,
}

/// Sends per hour per number as a stacked bar chart (server-rendered SVG, 720 × 200).
#[derive(Debug, Clone)]
pub struct SendsChart {
    pub bars: Vec<Bar>,
    /// `(phone, class, total)` per number.
    pub legend: Vec<(String, String, i64)>,
    /// Hour labels: `(x, "HHh")`, every 3 hours.
    pub labels: Vec<(i64, String)>,
    /// The tallest hour's sends.
    pub max: i64,
    /// All sends in the period.
    pub total: i64,
}

impl SendsChart {
    /// Chart height available to the bars.
    const PLOT: i64 = 170;

    pub fn of(h: &HourlySends) -> Self {
        let hours = h.horas.len().max(1) as i64;
        let slot = 720 / hours;
        let per_hour: Vec<i64> = (0..hours as usize)
            .map(|i| {
                h.numeros
                    .iter()
                    .map(|n| n.por_hora.get(i).copied().unwrap_or(0))
                    .sum()
            })
            .collect();
        let max = per_hour.iter().copied().max().unwrap_or(0);
        let mut bars = Vec::new();
        for (i, hour) in h.horas.iter().enumerate() {
            let mut top = Self::PLOT;
            for (k, n) in h.numeros.iter().enumerate() {
                let v = n.por_hora.get(i).copied().unwrap_or(0);
                if v == 0 || max == 0 {
                    continue;
                }
                let height = (v * Self::PLOT / max).max(1);
                top -= height;
                bars.push(Bar {
                    x: i as i64 * slot + 2,
                    y: top,
                    w: (slot - 4).max(1),
                    h: height,
                    class: format!("s{}", k % 8),
                    title: format!("{} às {}: {v} envio(s)", n.telefone, hour_label(hour)),
                });
            }
        }
        let labels = h
            .horas
            .iter()
            .enumerate()
            .filter(|(i, _)| i % 3 == 0)
            .map(|(i, hour)| (i as i64 * slot + 2, hour_label(hour)))
            .collect();
        Self {
            bars,
            legend: h
                .numeros
                .iter()
                .enumerate()
                .map(|(k, n)| (n.telefone.clone(), format!("s{}", k % 8), n.total))
                .collect(),
            labels,
            max,
            total: h.numeros.iter().map(|n| n.total).sum(),
        }
    }
}

/// `2026-11-25T14:00:00Z` → `11h` (the panel's time zone, [`super::glossary::hour`]).
fn hour_label(iso: &str) -> String {
    super::glossary::hour(iso)
}

/// `POST /api/templates/{id}/…` answers the pages read nothing from but their message.
pub fn template_notice(action: &str, v: &Value) -> String {
    match action {
        "sincronizar" => format!(
            "Status relido do provedor em {} número(s).",
            v["data"]["synced_channels"].as_i64().unwrap_or(0)
        ),
        "reativar" => v["data"]["message"]
            .as_str()
            .unwrap_or("Nova versão enviada para aprovação.")
            .to_string(),
        _ => "Enviado ao provedor para aprovação.".into(),
    }
}

/// `GET /api/phone-numbers/{id}/guardrails`.
#[derive(Debug, Clone, Deserialize)]
pub struct Guardrails {
    /// Campaign sends per local day; `None`: no cap of our own.
    pub daily_cap: Option<i64>,
    /// Least ms between two campaign sends.
    pub cadence_ms: i64,
    pub warmup: bool,
    pub today: GuardrailsToday,
    pub backoff_until: Option<String>,
}

/// Today's campaign limit of a number.
#[derive(Debug, Clone, Deserialize)]
pub struct GuardrailsToday {
    pub cap: Option<i64>,
    pub cap_source: Option<String>,
    pub warmup_day: Option<i64>,
    pub sent: i64,
    pub remaining: Option<i64>,
    pub resets_at: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn campaign(status: &str, started_at: Option<&str>) -> Campaign {
        serde_json::from_value(serde_json::json!({
            "id": 1, "nome": "c", "status": status,
            "contatos": {"total": 0, "validos": 0, "invalidos": 0, "pendentes": 0, "desconhecidos": 0},
            "higienizacao": {"erro": null}, "motivo_pausa": null, "retida": false,
            "created_at": "2026-11-28T12:00:00Z", "started_at": started_at,
        }))
        .unwrap()
    }

    fn report(liberados: i64, enviados: i64) -> Report {
        serde_json::from_value(serde_json::json!({
            "liberados": liberados, "na_fila": liberados - enviados, "enviados": enviados,
            "entregues": 0, "lidos": 0, "falhas": 0, "ignorados": 0, "por_numero": [],
        }))
        .unwrap()
    }

    /// The pause notice is one sentence: a reason that already says "pausada por…" is not
    /// prefixed with "Pausada:" again.
    #[test]
    fn a_pause_reason_reads_once() {
        let with = |reason: &str| {
            let mut c = campaign("pausada", None);
            c.motivo_pausa = Some(reason.to_string());
            c.pause_text().unwrap()
        };
        assert_eq!(with("manual"), "Pausada por um operador");
        assert_eq!(with("sem_numero"), "Pausada: nenhum número disponível");
        assert!(!with("Pausada por qualidade_red").starts_with("Pausada: Pausada"));
        assert_eq!(campaign("pausada", None).pause_text(), None);
    }

    #[test]
    fn the_eta_follows_the_pace_so_far() {
        let now = chrono::DateTime::parse_from_rfc3339("2026-11-28T12:10:00Z")
            .unwrap()
            .with_timezone(&chrono::Utc);
        let running = campaign("em_andamento", Some("2026-11-28T12:00:00Z"));
        // 100 of 400 in 10 min: 30 min to go, at 09:40 local (12:40 UTC).
        assert_eq!(
            running.eta(&report(400, 100), &now).as_deref(),
            Some("~ 30 min (às 09:40)")
        );
        assert_eq!(running.eta(&report(400, 0), &now), None);
        assert_eq!(running.eta(&report(400, 400), &now), None);
        assert_eq!(
            campaign("pausada", Some("2026-11-28T12:00:00Z")).eta(&report(400, 100), &now),
            None
        );
        assert_eq!(
            campaign("em_andamento", None).eta(&report(400, 100), &now),
            None
        );
    }
}
