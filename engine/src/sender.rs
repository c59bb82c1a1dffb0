//! The public sender's choice of a number (spec `panel-api.md` "Public v1", issue 22, D-060):
//! among the numbers a user's token may send from, the eligible ones — template approved,
//! the WABA in use, healthy (quality not RED, WABA not banned or restricted, credential
//! valid, connected, payment fine), headroom left in its 24 h limit and its BM's — and of
//! those the one that last wrote to the contact (the conversation stays on one number), else
//! the one with the most headroom.

use serde::Serialize;

/// What the sender knows of one number when it chooses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// Channel id.
    pub channel_id: i64,
    /// The template is approved on this number.
    pub template_approved: bool,
    /// The operator keeps the number's WABA in use (`ativa`, D-056).
    pub waba_active: bool,
    /// The number's health code ([`crate::channel::HealthCode::as_str`]).
    pub health_code: String,
    /// Headroom now in unique recipients (the smaller of its own and its BM's); `None` =
    /// unlimited.
    pub available: Option<i64>,
    /// When this number last wrote to the contact (ms), if it ever did.
    pub last_wrote_at: Option<i64>,
}

/// Why a number was not chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Skip {
    /// The template is not approved on it.
    TemplateNotApproved,
    /// Its WABA is marked `inativa` by the operator.
    WabaInactive,
    /// Its health stops business-initiated sends (the code says which).
    Unhealthy,
    /// No headroom left in the rolling 24 h (its own or its BM's).
    NoHeadroom,
}

impl Skip {
    /// pt-BR reason.
    pub fn label(self) -> &'static str {
        match self {
            Skip::TemplateNotApproved => "template não aprovado neste número",
            Skip::WabaInactive => "WABA marcada como inativa",
            Skip::Unhealthy => "saúde do número impede envios iniciados pela empresa",
            Skip::NoHeadroom => "sem folga no limite de 24 horas",
        }
    }
}

/// Health codes that stop a business-initiated send from a number (the `bad` tone and a
/// WABA restriction).
const BLOCKING: [&str; 7] = [
    "waba_banida",
    "credencial_invalida",
    "desconectado",
    "qualidade_red",
    "pagamento_bloqueado",
    "waba_restrita",
    "provedor_alternativo",
];

/// Why `c` cannot send now, if it cannot.
pub fn skip_reason(c: &Candidate) -> Option<Skip> {
    if !c.template_approved {
        Some(Skip::TemplateNotApproved)
    } else if !c.waba_active {
        Some(Skip::WabaInactive)
    } else if BLOCKING.contains(&c.health_code.as_str()) {
        Some(Skip::Unhealthy)
    } else if c.available.is_some_and(|a| a <= 0) || c.health_code == "limite_24h_esgotado" {
        Some(Skip::NoHeadroom)
    } else {
        None
    }
}

/// The chosen channel, or every candidate with its reason when none is eligible (and
/// `only_headroom` true when headroom alone is missing: the caller answers 429, else 422).
pub fn choose(candidates: &[Candidate]) -> Result<i64, (Vec<(i64, Skip)>, bool)> {
    let eligible: Vec<&Candidate> = candidates
        .iter()
        .filter(|c| skip_reason(c).is_none())
        .collect();
    if let Some(sticky) = eligible
        .iter()
        .filter(|c| c.last_wrote_at.is_some())
        .max_by_key(|c| (c.last_wrote_at, -c.channel_id))
    {
        return Ok(sticky.channel_id);
    }
    if let Some(best) = eligible
        .iter()
        .max_by_key(|c| (c.available.unwrap_or(i64::MAX), -c.channel_id))
    {
        return Ok(best.channel_id);
    }
    let reasons: Vec<(i64, Skip)> = candidates
        .iter()
        .filter_map(|c| skip_reason(c).map(|r| (c.channel_id, r)))
        .collect();
    let only_headroom = !reasons.is_empty() && reasons.iter().all(|(_, r)| *r == Skip::NoHeadroom);
    Err((reasons, only_headroom))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(id: i64, code: &str, available: Option<i64>, last: Option<i64>) -> Candidate {
        Candidate {
            channel_id: id,
            template_approved: true,
            waba_active: true,
            health_code: code.into(),
            available,
            last_wrote_at: last,
        }
    }

    #[test]
    fn most_headroom_then_sticky() {
        let cands = vec![
            c(1, "ok", Some(10), None),
            c(2, "ok", Some(200), None),
            c(3, "qualidade_yellow", None, None),
        ];
        assert_eq!(choose(&cands), Ok(3), "unlimited first");
        let cands = vec![c(1, "ok", Some(10), Some(5)), c(2, "ok", Some(200), None)];
        assert_eq!(
            choose(&cands),
            Ok(1),
            "the number that wrote to the contact"
        );
        let cands = vec![
            c(1, "qualidade_red", Some(10), Some(5)),
            c(2, "ok", Some(200), None),
        ];
        assert_eq!(choose(&cands), Ok(2), "not sticky to a RED number");
    }

    #[test]
    fn reasons_and_headroom() {
        let mut missing = c(1, "ok", Some(10), None);
        missing.template_approved = false;
        let cands = vec![
            missing,
            c(2, "qualidade_red", Some(5), None),
            c(3, "ok", Some(0), None),
        ];
        let (reasons, only_headroom) = choose(&cands).unwrap_err();
        assert_eq!(
            reasons,
            vec![
                (1, Skip::TemplateNotApproved),
                (2, Skip::Unhealthy),
                (3, Skip::NoHeadroom)
            ]
        );
        assert!(!only_headroom);
        let (_, only_headroom) = choose(&[c(3, "limite_24h_esgotado", Some(0), None)]).unwrap_err();
        assert!(only_headroom);
        assert!(choose(&[]).unwrap_err().0.is_empty());
    }
}
