//! Channels (connected numbers): quality rating, messaging tier, status and the health object.

use serde::{Deserialize, Serialize};

pub mod machine;
pub mod watch;

pub use machine::{Channel, Effect, Input, Limits};

/// A number's quality rating as the provider reports it (`quality_rating`, PROVIDER.md §4.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "UPPERCASE")]
pub enum Quality {
    /// High quality.
    Green,
    /// Medium quality: sends go on, the operator should look.
    Yellow,
    /// Low quality: business-initiated sends stop (spec item 10).
    Red,
    /// Not rated yet (`UNKNOWN` or `NA` at the provider).
    Unknown,
}

impl Quality {
    /// Parses the provider's value; `NA`, `UNKNOWN` and anything unexpected read as
    /// [`Quality::Unknown`].
    pub fn parse(s: &str) -> Self {
        match s.to_ascii_uppercase().as_str() {
            "GREEN" | "HIGH" => Quality::Green,
            "YELLOW" | "MEDIUM" => Quality::Yellow,
            "RED" | "LOW" => Quality::Red,
            _ => Quality::Unknown,
        }
    }

    /// The stored and wire form (`GREEN`, `YELLOW`, `RED`, `UNKNOWN`).
    pub fn as_str(self) -> &'static str {
        match self {
            Quality::Green => "GREEN",
            Quality::Yellow => "YELLOW",
            Quality::Red => "RED",
            Quality::Unknown => "UNKNOWN",
        }
    }

    /// Short pt-BR display label (`quality_label`).
    pub fn label(self) -> &'static str {
        match self {
            Quality::Green => "Alta",
            Quality::Yellow => "Média",
            Quality::Red => "Baixa",
            Quality::Unknown => "Sem avaliação",
        }
    }
}

/// A messaging limit tier: how many unique users may receive business-initiated messages in a
/// rolling 24 h (PROVIDER.md §10.2). Kept as the provider's string (`TIER_250`, `TIER_2K`,
/// `TIER_UNLIMITED`, legacy `TIER_1K`…).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Tier(String);

impl Tier {
    /// The tier new portfolios start with since 2025-10-07 (250 unique users per 24 h).
    pub fn initial() -> Self {
        Tier("TIER_250".into())
    }

    /// Parses a provider tier string; anything not of the form `TIER_<n>`, `TIER_<n>K` or
    /// `TIER_UNLIMITED` gives `None`. `TIER_NOT_SET` gives `None` too (no tier known).
    pub fn parse(s: &str) -> Option<Self> {
        let up = s.trim().to_ascii_uppercase();
        let tier = Tier(up);
        (tier.as_str() == "TIER_UNLIMITED" || tier.limit_24h().is_some()).then_some(tier)
    }

    /// The provider's string.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Unique business-initiated recipients allowed per rolling 24 h; `None` means unlimited.
    pub fn limit_24h(&self) -> Option<i64> {
        let rest = self.0.strip_prefix("TIER_")?;
        if rest == "UNLIMITED" {
            return None;
        }
        let (digits, mult) = match rest.strip_suffix('K') {
            Some(d) => (d, 1000),
            None => (rest, 1),
        };
        digits
            .parse::<i64>()
            .ok()
            .filter(|n| *n > 0)
            .map(|n| n * mult)
    }
}

/// A channel's connection status (spec: `WORKING` for a connected number).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "UPPERCASE")]
pub enum ChannelStatus {
    /// Connected and able to send.
    Working,
    /// Created on a WABA, registration (code, PIN) not finished.
    Pending,
    /// Disconnected at the provider (deregistered, deleted, banned number).
    Disconnected,
}

impl ChannelStatus {
    /// The stored and wire form.
    pub fn as_str(self) -> &'static str {
        match self {
            ChannelStatus::Working => "WORKING",
            ChannelStatus::Pending => "PENDING",
            ChannelStatus::Disconnected => "DISCONNECTED",
        }
    }

    /// Parses the stored form; unknown values read as disconnected.
    pub fn parse(s: &str) -> Self {
        match s {
            "WORKING" => ChannelStatus::Working,
            "PENDING" => ChannelStatus::Pending,
            _ => ChannelStatus::Disconnected,
        }
    }
}

/// A WABA's standing after `account_update` events (PROVIDER.md §9.7).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum WabaStanding {
    /// No restriction known.
    #[default]
    Ok,
    /// `ACCOUNT_RESTRICTION` (e.g. business-initiated messaging restricted).
    Restricted,
    /// `DISABLED_UPDATE` with `waba_ban_state` `DISABLE` or `SCHEDULE_FOR_DISABLE`.
    Banned,
    /// `ACCOUNT_VIOLATION`: the provider found a policy violation (`violation_info`); sends go
    /// on, a restriction or a ban may follow (PROVIDER.md §9.7; D-074).
    Violation,
}

/// The overall tone of a health object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Tone {
    /// Operating normally.
    Ok,
    /// Operating, but an operator should act.
    Attention,
    /// Not operating (or business-initiated sends refused).
    Bad,
}

/// The stable machine identifiers of a channel's health (`health.code`). Integrators automate on
/// these; labels may change, codes do not. Declared worst first: [`HealthCode::worst`] picks by
/// this order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum HealthCode {
    /// `waba_banida`: the WABA is disabled (or scheduled to be) by the provider.
    WabaBanned,
    /// `credencial_invalida`: the stored access token was refused by the provider.
    CredentialInvalid,
    /// `desconectado`: the number is not connected at the provider.
    Disconnected,
    /// `qualidade_red`: quality RED; business-initiated sends are refused.
    QualityRed,
    /// `pagamento_bloqueado`: the provider reported a payment problem (131042).
    PaymentLocked,
    /// `waba_restrita`: the WABA has a messaging restriction.
    WabaRestricted,
    /// `limite_24h_esgotado`: no headroom left in the rolling 24 h.
    LimitExhausted,
    /// `limite_diario_atingido`: the number's daily campaign cap (or warm-up cap) is reached;
    /// it takes no campaign work until the next local day unless an owner or admin authorizes
    /// more (spec "States and transitions"; API sends go on).
    DailyCapReached,
    /// `qualidade_yellow`: quality YELLOW.
    QualityYellow,
    /// `violacao_de_politica`: the WABA received an `ACCOUNT_VIOLATION` (D-074).
    PolicyViolation,
    /// `template_qualidade_baixa`: a template approved on this number has RED quality
    /// (`message_template_quality_update`; D-074) — the provider may pause it.
    TemplateQualityRed,
    /// `template_ausente`: a template meant for this number is not usable on it — rejected,
    /// paused, disabled or failed there, or inherited (`auto_replicate`) and never received
    /// (issue 17; D-126 narrowed it to templates meant for the number).
    TemplateMissing,
    /// `provedor_alternativo`: a number of an alternative provider, referenced only (spec
    /// "What the service does" item 11, D-034); tone `ok`, no limits, disparo does not send
    /// through it.
    AlternativeProvider,
    /// `ok`: operating.
    Ok,
}

/// In the OpenAPI documents `HealthCode` is the string enum of its stable identifiers
/// ([`HealthCode::as_str`]), as `health.code` carries them (D-079).
impl utoipa::PartialSchema for HealthCode {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        crate::string_enum_schema(
            HealthCode::ALL.iter().map(|c| c.as_str()),
            "Identificador estável da saúde do número (README \"Health codes\"); a automação usa este, não o rótulo.",
        )
    }
}

impl utoipa::ToSchema for HealthCode {}

impl HealthCode {
    /// Every code, worst first.
    pub const ALL: [HealthCode; 14] = [
        HealthCode::WabaBanned,
        HealthCode::CredentialInvalid,
        HealthCode::Disconnected,
        HealthCode::QualityRed,
        HealthCode::PaymentLocked,
        HealthCode::WabaRestricted,
        HealthCode::LimitExhausted,
        HealthCode::DailyCapReached,
        HealthCode::QualityYellow,
        HealthCode::PolicyViolation,
        HealthCode::TemplateQualityRed,
        HealthCode::TemplateMissing,
        HealthCode::AlternativeProvider,
        HealthCode::Ok,
    ];

    /// The stable identifier.
    pub fn as_str(self) -> &'static str {
        match self {
            HealthCode::WabaBanned => "waba_banida",
            HealthCode::CredentialInvalid => "credencial_invalida",
            HealthCode::Disconnected => "desconectado",
            HealthCode::QualityRed => "qualidade_red",
            HealthCode::PaymentLocked => "pagamento_bloqueado",
            HealthCode::WabaRestricted => "waba_restrita",
            HealthCode::LimitExhausted => "limite_24h_esgotado",
            HealthCode::DailyCapReached => "limite_diario_atingido",
            HealthCode::QualityYellow => "qualidade_yellow",
            HealthCode::PolicyViolation => "violacao_de_politica",
            HealthCode::TemplateQualityRed => "template_qualidade_baixa",
            HealthCode::TemplateMissing => "template_ausente",
            HealthCode::AlternativeProvider => "provedor_alternativo",
            HealthCode::Ok => "ok",
        }
    }

    /// The tone the code gives the health object.
    pub fn tone(self) -> Tone {
        match self {
            HealthCode::WabaBanned
            | HealthCode::CredentialInvalid
            | HealthCode::Disconnected
            | HealthCode::QualityRed
            | HealthCode::PaymentLocked => Tone::Bad,
            HealthCode::WabaRestricted
            | HealthCode::LimitExhausted
            | HealthCode::DailyCapReached
            | HealthCode::QualityYellow
            | HealthCode::PolicyViolation
            | HealthCode::TemplateQualityRed
            | HealthCode::TemplateMissing => Tone::Attention,
            HealthCode::AlternativeProvider | HealthCode::Ok => Tone::Ok,
        }
    }

    /// Short pt-BR label.
    pub fn label(self) -> &'static str {
        match self {
            HealthCode::WabaBanned => "WABA banida",
            HealthCode::CredentialInvalid => "Credencial inválida",
            HealthCode::Disconnected => "Desconectado",
            HealthCode::QualityRed => "Qualidade baixa",
            HealthCode::PaymentLocked => "Pagamento pendente",
            HealthCode::WabaRestricted => "WABA restrita",
            HealthCode::LimitExhausted => "Limite de 24 h esgotado",
            HealthCode::DailyCapReached => "Limite diário de campanha atingido",
            HealthCode::QualityYellow => "Qualidade média",
            HealthCode::PolicyViolation => "Violação de política",
            HealthCode::TemplateQualityRed => "Template com qualidade baixa",
            HealthCode::TemplateMissing => "Template ausente",
            HealthCode::AlternativeProvider => "Provedor alternativo",
            HealthCode::Ok => "Operando",
        }
    }

    /// The recommended action in pt-BR, `None` when nothing is needed.
    pub fn next_action(self) -> Option<&'static str> {
        Some(match self {
            HealthCode::WabaBanned => "Abra uma contestação no gerenciador do WhatsApp e use outro número.",
            HealthCode::CredentialInvalid => "Atualize o access token em PATCH /channels/{id}/official.",
            HealthCode::Disconnected => "Registre o número novamente (request-code, verify-code, register).",
            HealthCode::QualityRed => "Pause campanhas e revise o conteúdo; envios iniciados pela empresa estão bloqueados.",
            HealthCode::PaymentLocked => "Regularize o pagamento e chame POST /bms/{id}/payment-check.",
            HealthCode::WabaRestricted => "Veja a restrição no gerenciador do WhatsApp; envios podem ser recusados.",
            HealthCode::LimitExhausted => "Aguarde a janela de 24 h liberar ou use outro número.",
            HealthCode::DailyCapReached => "O número volta às campanhas amanhã (00:00, horário de Brasília); um admin pode liberar mais envios hoje em POST /channels/{id}/guardrails/authorize.",
            HealthCode::QualityYellow => "Reduza o volume e revise os templates antes que a qualidade caia.",
            HealthCode::PolicyViolation => "Revise o conteúdo enviado pela WABA: o provedor registrou uma violação de política (veja GET /wabas) e pode restringir ou banir.",
            HealthCode::TemplateQualityRed => "Revise o template de qualidade baixa (GET /templates) antes que o provedor o pause; prefira outro template nas campanhas.",
            HealthCode::TemplateMissing => "Envie o template ao número com POST /templates/{id}/channels.",
            HealthCode::AlternativeProvider => "Envios por este número são feitos no provedor alternativo; o disparo só relê os templates do remetente (POST /channels/{id}/sync).",
            HealthCode::Ok => return None,
        })
    }
}

/// What the health of a channel is computed from. Filled by the channel's actor from its live
/// state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealthInput {
    /// Connection status.
    pub status: ChannelStatus,
    /// Quality rating.
    pub quality: Quality,
    /// Whether the last use of the access token succeeded.
    pub credential_valid: bool,
    /// Whether sends are locked by a payment problem.
    pub payment_locked: bool,
    /// The WABA's standing.
    pub waba: WabaStanding,
    /// The 24 h limit in unique business-initiated recipients; `None` = unlimited.
    pub limit_24h: Option<i64>,
    /// Unique business-initiated recipients in the rolling 24 h.
    pub sent_24h: i64,
    /// Headroom granted by others (e.g. the BM's shared limit); `None` = no further bound.
    pub external_available: Option<i64>,
    /// A library template is not approved on this number.
    pub template_missing: bool,
    /// A template approved on the number has RED quality (D-074).
    pub template_quality_red: bool,
    /// The number is in warm-up.
    pub warming_up: bool,
    /// The daily campaign cap (or warm-up cap) is reached for today.
    pub daily_cap_reached: bool,
    /// The name of the sending group the channel belongs to, empty when none.
    pub group: String,
}

/// The health object of the spec (`health` on a channel). Deserialize: it travels between
/// nodes in cluster mode (issue 52).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Health {
    /// True when the tone is `ok`.
    pub good: bool,
    /// `ok`, `attention` or `bad`.
    pub tone: Tone,
    /// Short pt-BR label; may change over time.
    pub label: String,
    /// Stable machine identifier ([`HealthCode::as_str`]).
    #[schema(value_type = HealthCode)]
    pub code: String,
    /// Recommended action, or null.
    pub next_action: Option<String>,
    /// Sending group name, empty when none.
    pub group: String,
    /// Limit over 24 h in unique recipients; `-1` means unlimited.
    pub limit_24h: i64,
    /// Unique business-initiated recipients in the last 24 h.
    pub sent_24h: i64,
    /// Remaining headroom now; `-1` means unlimited.
    pub available: i64,
}

impl Health {
    /// A health object of one code with no counters (a number whose live state could not be
    /// read answers [`HealthCode::Disconnected`] this way).
    pub fn of_code(code: HealthCode) -> Health {
        Health {
            good: code.tone() == Tone::Ok,
            tone: code.tone(),
            label: code.label().into(),
            code: code.as_str().into(),
            next_action: code.next_action().map(str::to_string),
            group: String::new(),
            limit_24h: 0,
            sent_24h: 0,
            available: 0,
        }
    }

    /// The health of a number of an alternative provider (D-034): `provedor_alternativo`,
    /// tone `ok`, no limit known to disparo (`limit_24h` and `available` 0: disparo sends
    /// nothing through it).
    pub fn alternative_provider() -> Health {
        Health::of_code(HealthCode::AlternativeProvider)
    }
}

/// Headroom left: the smaller of the own limit minus use and the external bound; `None` means
/// unlimited.
pub fn available(limit_24h: Option<i64>, sent_24h: i64, external: Option<i64>) -> Option<i64> {
    let own = limit_24h.map(|l| (l - sent_24h).max(0));
    match (own, external) {
        (Some(a), Some(b)) => Some(a.min(b.max(0))),
        (Some(a), None) => Some(a),
        (None, Some(b)) => Some(b.max(0)),
        (None, None) => None,
    }
}

impl HealthCode {
    /// Every code that applies to `input`, worst first; `[Ok]` when none does.
    pub fn all_for(input: &HealthInput) -> Vec<HealthCode> {
        let avail = available(input.limit_24h, input.sent_24h, input.external_available);
        let mut codes: Vec<HealthCode> = [
            (input.waba == WabaStanding::Banned, HealthCode::WabaBanned),
            (!input.credential_valid, HealthCode::CredentialInvalid),
            (
                input.status != ChannelStatus::Working,
                HealthCode::Disconnected,
            ),
            (input.quality == Quality::Red, HealthCode::QualityRed),
            (input.payment_locked, HealthCode::PaymentLocked),
            (
                input.waba == WabaStanding::Restricted,
                HealthCode::WabaRestricted,
            ),
            (avail == Some(0), HealthCode::LimitExhausted),
            (input.daily_cap_reached, HealthCode::DailyCapReached),
            (input.quality == Quality::Yellow, HealthCode::QualityYellow),
            (
                input.waba == WabaStanding::Violation,
                HealthCode::PolicyViolation,
            ),
            (input.template_quality_red, HealthCode::TemplateQualityRed),
            (input.template_missing, HealthCode::TemplateMissing),
        ]
        .into_iter()
        .filter_map(|(applies, code)| applies.then_some(code))
        .collect();
        codes.sort();
        if codes.is_empty() {
            codes.push(HealthCode::Ok);
        }
        codes
    }

    /// The worst code that applies to `input`.
    pub fn worst(input: &HealthInput) -> HealthCode {
        Self::all_for(input)[0]
    }
}

/// The `next_action` of a working number in warm-up.
pub const WARMUP_ACTION: &str = "Número em aquecimento: o limite diário de campanha sobe a cada dia (veja GET /channels/{id}/guardrails).";

/// Computes the health object of a channel.
pub fn health(input: &HealthInput) -> Health {
    let code = HealthCode::worst(input);
    let tone = code.tone();
    Health {
        good: tone == Tone::Ok,
        tone,
        label: code.label().to_string(),
        code: code.as_str().to_string(),
        // A number in warm-up operates (the spec: a fully working number reads as operating);
        // its reduced campaign cap is in the guardrails, and said here (D-031, issue 17).
        next_action: match (code, input.warming_up) {
            (HealthCode::Ok, true) => Some(WARMUP_ACTION.to_string()),
            _ => code.next_action().map(str::to_string),
        },
        group: input.group.clone(),
        limit_24h: input.limit_24h.unwrap_or(-1),
        sent_24h: input.sent_24h,
        available: available(input.limit_24h, input.sent_24h, input.external_available)
            .unwrap_or(-1),
    }
}

/// Whether business-initiated sends (templates, starting a conversation) are allowed: refused
/// for quality RED, a banned WABA or a payment lock (spec item 10). Replies inside an open
/// 24-hour window stay allowed.
pub fn business_initiated_allowed(input: &HealthInput) -> Result<(), HealthCode> {
    for code in HealthCode::all_for(input) {
        if matches!(
            code,
            HealthCode::WabaBanned
                | HealthCode::CredentialInvalid
                | HealthCode::Disconnected
                | HealthCode::QualityRed
                | HealthCode::PaymentLocked
        ) {
            return Err(code);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn working() -> HealthInput {
        HealthInput {
            status: ChannelStatus::Working,
            quality: Quality::Green,
            credential_valid: true,
            payment_locked: false,
            waba: WabaStanding::Ok,
            limit_24h: Some(250),
            sent_24h: 10,
            external_available: None,
            template_missing: false,
            template_quality_red: false,
            warming_up: false,
            daily_cap_reached: false,
            group: String::new(),
        }
    }

    #[test]
    fn tiers_give_their_24h_limits() {
        for (s, want) in [
            ("TIER_50", Some(50)),
            ("TIER_250", Some(250)),
            ("TIER_1K", Some(1000)),
            ("TIER_2K", Some(2000)),
            ("tier_10k", Some(10_000)),
            ("TIER_100K", Some(100_000)),
        ] {
            assert_eq!(Tier::parse(s).unwrap().limit_24h(), want, "{s}");
        }
        assert_eq!(Tier::parse("TIER_UNLIMITED").unwrap().limit_24h(), None);
        assert!(Tier::parse("TIER_NOT_SET").is_none());
        assert!(Tier::parse("GOLD").is_none());
    }

    #[test]
    fn a_working_green_number_is_ok_with_its_headroom() {
        let h = health(&working());
        assert!(h.good);
        assert_eq!(h.code, "ok");
        assert_eq!(h.available, 240);
        assert_eq!(h.next_action, None);
        let warming = health(&HealthInput {
            warming_up: true,
            ..working()
        });
        assert_eq!((warming.code.as_str(), warming.good), ("ok", true));
        assert_eq!(warming.next_action.as_deref(), Some(WARMUP_ACTION));
    }

    #[test]
    fn the_worst_code_wins() {
        let mut input = working();
        input.quality = Quality::Yellow;
        assert_eq!(health(&input).code, "qualidade_yellow");
        input.warming_up = true;
        assert_eq!(health(&input).code, "qualidade_yellow");
        assert_ne!(health(&input).next_action.as_deref(), Some(WARMUP_ACTION));
        input.daily_cap_reached = true;
        assert_eq!(health(&input).code, "limite_diario_atingido");
        assert_eq!(health(&input).tone, Tone::Attention);
        assert!(
            business_initiated_allowed(&input).is_ok(),
            "the campaign cap does not stop API sends"
        );
        input.sent_24h = 250;
        assert_eq!(health(&input).code, "limite_24h_esgotado");
        input.quality = Quality::Red;
        assert_eq!(health(&input).code, "qualidade_red");
        assert_eq!(health(&input).tone, Tone::Bad);
        input.waba = WabaStanding::Banned;
        assert_eq!(health(&input).code, "waba_banida");
    }

    #[test]
    fn headroom_is_the_smaller_of_own_and_shared() {
        assert_eq!(available(Some(250), 10, Some(100)), Some(100));
        assert_eq!(available(Some(250), 200, Some(100)), Some(50));
        assert_eq!(available(None, 10, Some(5)), Some(5));
        assert_eq!(available(None, 10, None), None);
        assert_eq!(available(Some(10), 20, None), Some(0));
    }

    #[test]
    fn red_refuses_business_initiated_sends_and_yellow_does_not() {
        let mut input = working();
        assert!(business_initiated_allowed(&input).is_ok());
        input.quality = Quality::Yellow;
        assert!(business_initiated_allowed(&input).is_ok());
        input.quality = Quality::Red;
        assert_eq!(
            business_initiated_allowed(&input),
            Err(HealthCode::QualityRed)
        );
    }

    #[test]
    fn codes_are_unique_and_ordered_worst_first() {
        let mut seen = std::collections::HashSet::new();
        for w in HealthCode::ALL.windows(2) {
            assert!(w[0] < w[1]);
        }
        for c in HealthCode::ALL {
            assert!(seen.insert(c.as_str()));
        }
    }
}
