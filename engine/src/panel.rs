//! The operator panel's rules (spec `panel-api.md`, issue 19): roles, user status, scope,
//! session tokens, the Brazilian company tax id (CNPJ), passwords and the task board.

use crate::ValidationError;
use serde::{Deserialize, Serialize};

/// A panel user's role (spec "Authentication" item 4; on the wire as the spec writes them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
pub enum Role {
    /// Everything, including users and public-sender tokens.
    Admin,
    /// The inventory, campaigns (approve, dispatch), tasks and wiki; not users.
    Operador,
    /// A client's own view: reads the numbers, WABAs and BMs linked to its client.
    Client,
}

impl Role {
    /// Every role, in the order of the role matrix.
    pub const ALL: [Role; 3] = [Role::Admin, Role::Operador, Role::Client];

    /// The wire name (`Admin`, `Operador`, `Client`).
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Admin => "Admin",
            Role::Operador => "Operador",
            Role::Client => "Client",
        }
    }

    /// Parses the wire name (exact, as the spec writes it).
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|r| r.as_str() == s)
    }

    /// Admin and Operador: the staff roles, scoped by BMs.
    pub fn is_staff(self) -> bool {
        matches!(self, Role::Admin | Role::Operador)
    }
}

/// Whether a panel user may log in (`active`) or not (`disabled`: sessions stop at once).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum UserStatus {
    /// May log in.
    Active,
    /// May not log in; existing sessions answer 401.
    Disabled,
}

impl UserStatus {
    /// Wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            UserStatus::Active => "active",
            UserStatus::Disabled => "disabled",
        }
    }

    /// Parses the wire name.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "active" => Some(UserStatus::Active),
            "disabled" => Some(UserStatus::Disabled),
            _ => None,
        }
    }
}

/// What a panel user may see (issue 19): staff see the account's BMs listed (all when the list
/// is empty) and what hangs from them; a Client user sees the records linked to its client.
/// Applied in the storage queries; a record outside the scope answers 404.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// Admin or Operador: these BM ids (disparo ids); empty = every BM of the account.
    Bms(Vec<i64>),
    /// Client: this client id.
    Client(i64),
}

impl Scope {
    /// Whether the scope is the whole account.
    pub fn is_all(&self) -> bool {
        matches!(self, Scope::Bms(b) if b.is_empty())
    }
}

/// Session tokens start with this prefix (`ses_` + 40 URL-safe characters), distinct from
/// account tokens (`svc_`).
pub const SESSION_PREFIX: &str = "ses_";

/// Whether `value` has the shape of a session token (a cheap pre-check before a lookup).
pub fn looks_like_session(value: &str) -> bool {
    value
        .strip_prefix(SESSION_PREFIX)
        .is_some_and(|rest| rest.len() == 40 && rest.bytes().all(|b| b.is_ascii_alphanumeric()))
}

/// Shortest password accepted, characters.
pub const PASSWORD_MIN_CHARS: usize = 10;
/// Longest password accepted, bytes (Argon2 takes any length; this bounds the work).
pub const PASSWORD_MAX_BYTES: usize = 256;

/// Checks a new password: 10 characters at least, 256 bytes at most, not all the same
/// character.
pub fn check_password(p: &str) -> Result<(), ValidationError> {
    let chars = p.chars().count();
    if chars < PASSWORD_MIN_CHARS || p.len() > PASSWORD_MAX_BYTES {
        return Err(ValidationError::new(
            "senha_fraca",
            "password",
            format!(
                "A senha deve ter de {PASSWORD_MIN_CHARS} caracteres a {PASSWORD_MAX_BYTES} bytes."
            ),
        ));
    }
    let first = p.chars().next();
    if p.chars().all(|c| Some(c) == first) {
        return Err(ValidationError::new(
            "senha_fraca",
            "password",
            "A senha não pode repetir um único caractere.",
        ));
    }
    Ok(())
}

/// Normalises an e-mail for storage and lookup (trimmed, lowercase) and checks its shape
/// (`local@domain.tld`, 254 bytes at most).
pub fn normalize_email(e: &str) -> Result<String, ValidationError> {
    let e = e.trim().to_lowercase();
    let ok = e.len() <= 254
        && e.split_once('@').is_some_and(|(local, domain)| {
            !local.is_empty()
                && domain.contains('.')
                && !domain.starts_with('.')
                && !domain.ends_with('.')
                && !e.contains(char::is_whitespace)
                && !domain.contains('@')
        });
    if ok {
        Ok(e)
    } else {
        Err(ValidationError::new(
            "email_invalido",
            "email",
            "`email` deve ser um endereço de e-mail válido.",
        ))
    }
}

/// Validates a CNPJ (Brazilian company tax id): 14 digits, punctuation `.`, `/`, `-`
/// allowed, both check digits verified (modulo 11 with weights 5…2,9…2 and 6…2,9…2), not all
/// digits equal. Returns the 14 digits.
pub fn validate_cnpj(input: &str) -> Result<String, ValidationError> {
    let bad = || {
        ValidationError::new(
            "cnpj_invalido",
            "documento",
            "`documento` deve ser um CNPJ válido (14 dígitos com os dígitos verificadores corretos).",
        )
    };
    if input
        .chars()
        .any(|c| !(c.is_ascii_digit() || ".-/ ".contains(c)))
    {
        return Err(bad());
    }
    let d: Vec<u32> = input.chars().filter_map(|c| c.to_digit(10)).collect();
    if d.len() != 14 || d.iter().all(|x| *x == d[0]) {
        return Err(bad());
    }
    let check = |n: usize| -> u32 {
        let weights: Vec<u32> = if n == 12 {
            vec![5, 4, 3, 2, 9, 8, 7, 6, 5, 4, 3, 2]
        } else {
            vec![6, 5, 4, 3, 2, 9, 8, 7, 6, 5, 4, 3, 2]
        };
        let sum: u32 = d[..n].iter().zip(&weights).map(|(a, b)| a * b).sum();
        let r = sum % 11;
        if r < 2 {
            0
        } else {
            11 - r
        }
    };
    if check(12) != d[12] || check(13) != d[13] {
        return Err(bad());
    }
    Ok(d.iter().map(|x| char::from(b'0' + *x as u8)).collect())
}

/// The columns of the task board (kanban), in order.
pub const TASK_STATUSES: [&str; 4] = ["aberto", "em_andamento", "aguardando", "resolvido"];
/// Task priorities, lowest first.
pub const TASK_PRIORITIES: [&str; 4] = ["baixa", "media", "alta", "urgente"];

/// Checks a task column.
pub fn check_task_status(s: &str) -> Result<(), ValidationError> {
    if TASK_STATUSES.contains(&s) {
        Ok(())
    } else {
        Err(ValidationError::new(
            "status_invalido",
            "status",
            format!("`status` deve ser um de: {}.", TASK_STATUSES.join(", ")),
        ))
    }
}

/// Checks a task priority.
pub fn check_task_priority(s: &str) -> Result<(), ValidationError> {
    if TASK_PRIORITIES.contains(&s) {
        Ok(())
    } else {
        Err(ValidationError::new(
            "prioridade_invalida",
            "prioridade",
            format!(
                "`prioridade` deve ser uma de: {}.",
                TASK_PRIORITIES.join(", ")
            ),
        ))
    }
}

/// The operator's status of a WABA (D-056): `ativa` (in use) or `inativa` (kept in the
/// inventory, not offered for new sends). The provider's standing (ok, restricted, banned) is
/// separate and never editable by hand.
pub const WABA_STATUSES: [&str; 2] = ["ativa", "inativa"];

/// A BM's `health_status` (D-055), worst first: `banido` when one of its WABAs is banned,
/// `credencial_invalida` when its last sync had its token refused (`stored`), `pagamento_pendente`
/// when the provider reports a payment problem, `restrito` when a WABA is restricted, `ok`
/// after a sync, `nao_sincronizado` before the first one. Standings are the WABAs' (`ok`,
/// `restricted`, `banned`), live from webhooks and syncs.
pub fn bm_health<'a>(
    payment_ok: bool,
    standings: impl IntoIterator<Item = &'a str>,
    stored: Option<&str>,
    synced: bool,
) -> &'static str {
    let standings: Vec<&str> = standings.into_iter().collect();
    if standings.contains(&"banned") {
        "banido"
    } else if stored == Some("credencial_invalida") {
        "credencial_invalida"
    } else if !payment_ok {
        "pagamento_pendente"
    } else if standings.contains(&"restricted") {
        "restrito"
    } else if synced {
        "ok"
    } else {
        "nao_sincronizado"
    }
}

/// Test sends of one panel campaign in any 24 h (issue 46): a test proves the template, not
/// the audience.
pub const TEST_SENDS_PER_CAMPAIGN_PER_DAY: i64 = 5;

/// Test sends of one panel user, over every campaign, in any 24 h (issue 46).
pub const TEST_SENDS_PER_USER_PER_DAY: i64 = 20;

#[cfg(test)]
mod tests {
    #[test]
    fn bm_health_worst_first() {
        use super::bm_health;
        assert_eq!(bm_health(true, ["ok", "banned"], None, true), "banido");
        assert_eq!(
            bm_health(false, ["restricted"], None, true),
            "pagamento_pendente"
        );
        assert_eq!(bm_health(true, ["restricted"], None, true), "restrito");
        assert_eq!(
            bm_health(true, ["ok"], Some("credencial_invalida"), true),
            "credencial_invalida"
        );
        assert_eq!(bm_health(true, [], None, false), "nao_sincronizado");
        assert_eq!(bm_health(true, ["ok"], Some("ok"), true), "ok");
    }

    use super::*;

    #[test]
    fn cnpj_check_digits() {
        assert_eq!(
            validate_cnpj("11.222.333/0001-81").unwrap(),
            "11222333000181"
        );
        assert_eq!(validate_cnpj("11222333000181").unwrap(), "11222333000181");
        assert!(validate_cnpj("11.222.333/0001-82").is_err());
        assert!(validate_cnpj("11.222.333/0001-91").is_err());
        assert!(validate_cnpj("00000000000000").is_err());
        assert!(validate_cnpj("1122233300018").is_err());
        assert!(validate_cnpj("11a22233300018").is_err());
        // A known public CNPJ (Banco do Brasil).
        assert!(validate_cnpj("00.000.000/0001-91").is_ok());
    }

    #[test]
    fn roles_and_tokens() {
        assert_eq!(Role::parse("Operador"), Some(Role::Operador));
        assert_eq!(Role::parse("admin"), None);
        assert!(looks_like_session(&format!("ses_{}", "a".repeat(40))));
        assert!(!looks_like_session(
            "svc_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
        ));
    }

    #[test]
    fn passwords_and_emails() {
        assert!(check_password("curta").is_err());
        assert!(check_password("aaaaaaaaaaaa").is_err());
        assert!(check_password("uma senha boa").is_ok());
        assert_eq!(
            normalize_email(" Ana@Exemplo.com.br ").unwrap(),
            "ana@exemplo.com.br"
        );
        assert!(normalize_email("ana@").is_err());
        assert!(normalize_email("ana@exemplo").is_err());
    }
}
