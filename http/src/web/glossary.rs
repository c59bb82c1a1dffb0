//! One glossary for the pages (issue 47 item 9): every code the panel shows a person — a
//! number's status, quality rating and tier, a BM's health, a WABA's status, a template's
//! status, category and rejection reason, a contact's hygiene result, a send's status, a
//! forwarding's state, a task's priority — as one pt-BR label, and every time in the panel's
//! time zone. The API keeps its codes (automation reads those); only what a person reads is
//! translated here, in one place. A code this glossary does not know is shown without its
//! underscores rather than as a raw identifier.
//!
//! Times: America/Sao_Paulo (UTC−03:00, no daylight saving since 2019), the zone the
//! guardrails' local days and the reports' dates already use (D-038, D-131).

use chrono::{DateTime, FixedOffset, NaiveDateTime, TimeZone, Utc};

/// The panel's time zone: America/Sao_Paulo, UTC−03:00 (D-131).
fn zone() -> FixedOffset {
    FixedOffset::west_opt(3 * 3600).expect("−03:00 is a valid offset")
}

/// A code this glossary does not know, readable: `limite_24h` → `limite 24h`; a text (it has
/// spaces) is shown as given.
fn unknown(code: &str) -> String {
    if code.contains(char::is_whitespace) {
        code.to_string()
    } else {
        code.replace('_', " ").to_lowercase()
    }
}

/// Looks `code` up in `table` (exact, then case-insensitive); else [`unknown`].
fn look_up(table: &[(&str, &str)], code: &str) -> String {
    table
        .iter()
        .find(|(k, _)| *k == code)
        .or_else(|| table.iter().find(|(k, _)| k.eq_ignore_ascii_case(code)))
        .map_or_else(|| unknown(code), |(_, v)| (*v).to_string())
}

/// A quality rating (`GREEN`, `YELLOW`, `RED`, `UNKNOWN`; PROVIDER.md §10.1).
pub fn quality(code: &str) -> String {
    look_up(
        &[
            ("GREEN", "alta"),
            ("YELLOW", "média"),
            ("RED", "baixa"),
            ("UNKNOWN", "sem avaliação"),
            ("NA", "sem avaliação"),
        ],
        code,
    )
}

/// A messaging limit tier (`TIER_250`, `TIER_2K`, `TIER_UNLIMITED`; PROVIDER.md §10.2): how
/// many unique contacts may receive business-initiated messages in 24 h.
pub fn tier(code: &str) -> String {
    match engine::channel::Tier::parse(code) {
        Some(t) => match t.limit_24h() {
            Some(n) => format!("{} contatos/24 h", thousands(n)),
            None => "contatos ilimitados/24 h".into(),
        },
        None if code == "desconhecido" || code.is_empty() => "tier não lido".into(),
        None => unknown(code),
    }
}

/// A client's document as people write it: 14 digits as a CNPJ (`11.222.333/0001-81`), 11 as
/// a CPF (`123.456.789-09`); anything else as stored.
pub fn document(stored: &str) -> String {
    let d: Vec<char> = stored.chars().collect();
    let all_digits = d.iter().all(char::is_ascii_digit);
    let part = |a: usize, b: usize| d[a..b].iter().collect::<String>();
    match d.len() {
        14 if all_digits => format!(
            "{}.{}.{}/{}-{}",
            part(0, 2),
            part(2, 5),
            part(5, 8),
            part(8, 12),
            part(12, 14)
        ),
        11 if all_digits => format!(
            "{}.{}.{}-{}",
            part(0, 3),
            part(3, 6),
            part(6, 9),
            part(9, 11)
        ),
        _ => stored.to_string(),
    }
}

/// `1000` → `1.000` (pt-BR digit grouping).
pub fn thousands(n: i64) -> String {
    let digits = n.unsigned_abs().to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push('.');
        }
        out.push(c);
    }
    if n < 0 {
        format!("-{out}")
    } else {
        out
    }
}

/// A number's connection status (`WORKING`, `PENDING`, `DISCONNECTED`; the provider's own
/// `CONNECTED`, `FLAGGED`… where a record keeps it).
pub fn number_status(code: &str) -> String {
    look_up(
        &[
            ("WORKING", "conectado"),
            ("CONNECTED", "conectado"),
            ("PENDING", "registro pendente"),
            ("DISCONNECTED", "desconectado"),
            ("FLAGGED", "sinalizado pelo provedor"),
            ("RESTRICTED", "restrito"),
            ("BANNED", "banido"),
            ("DELETED", "excluído"),
            ("MIGRATED", "migrado"),
            ("RATE_LIMITED", "limitado pelo provedor"),
            ("UNVERIFIED", "não verificado"),
        ],
        code,
    )
}

/// A BM's health (`engine::panel::bm_health`).
pub fn bm_health(code: &str) -> String {
    look_up(
        &[
            ("ok", "em dia"),
            ("banido", "banida"),
            ("credencial_invalida", "credencial inválida"),
            ("pagamento_pendente", "pagamento pendente"),
            ("restrito", "restrita"),
            ("nao_sincronizado", "não sincronizada"),
        ],
        code,
    )
}

/// A business verification status (the provider's `business_verification_status`).
pub fn verification(code: &str) -> String {
    look_up(
        &[
            ("verified", "verificada"),
            ("unverified", "não verificada"),
            ("not_verified", "não verificada"),
            ("pending", "em análise"),
            ("pending_submission", "envio pendente"),
            ("pending_need_more_info", "pendente: mais informações"),
            ("failed", "recusada"),
            ("rejected", "recusada"),
            ("revoked", "revogada"),
            ("expired", "expirada"),
        ],
        code,
    )
}

/// A WABA's operator status (`ativa`/`inativa`, D-056) or provider standing (`ok`,
/// `restricted`, `banned`, `violation`).
pub fn waba_status(code: &str) -> String {
    look_up(
        &[
            ("ativa", "ativa"),
            ("inativa", "inativa"),
            ("ok", "em dia"),
            ("restricted", "restrita"),
            ("banned", "banida"),
            ("violation", "violação de política"),
        ],
        code,
    )
}

/// A number's health tone (`ok`, `atencao`, `critico`).
pub fn tone(code: &str) -> String {
    look_up(
        &[
            ("ok", "em dia"),
            ("atencao", "atenção"),
            ("critico", "crítico"),
        ],
        code,
    )
}

/// A number's health code (`engine::channel::HealthCode`): its own label.
pub fn health(code: &str) -> String {
    engine::channel::HealthCode::ALL
        .iter()
        .find(|c| c.as_str() == code)
        .map_or_else(|| unknown(code), |c| c.label().to_lowercase())
}

/// What an operator does about a health code, in the panel's words (the API's `next_action`
/// names its routes; a person reads the panel's screens).
pub fn health_action(code: &str) -> Option<&'static str> {
    use engine::channel::HealthCode as H;
    let c = H::ALL.iter().find(|c| c.as_str() == code)?;
    Some(match c {
        H::WabaBanned => "Abra uma contestação no gerenciador do WhatsApp e use outro número.",
        H::CredentialInvalid => "Atualize o token de acesso da BM e sincronize de novo.",
        H::Disconnected => "Registre o número de novo no provedor (código e PIN).",
        H::QualityRed => "Pause as campanhas e revise o conteúdo: envios iniciados pela empresa estão bloqueados.",
        H::PaymentLocked => "Regularize a forma de pagamento da BM no provedor e sincronize.",
        H::WabaRestricted => "Veja a restrição no gerenciador do WhatsApp; só respostas dentro da janela de 24 h saem.",
        H::LimitExhausted => "Espere a janela de 24 h liberar contatos ou use outro número.",
        H::DailyCapReached => "O teto diário de campanha renova à meia-noite; aumente-o nos guardrails se quiser.",
        H::QualityYellow => "Reduza o volume e revise o conteúdo antes que a qualidade caia.",
        H::PolicyViolation => "Veja a violação no gerenciador do WhatsApp e corrija o conteúdo.",
        H::TemplateQualityRed => "Revise o template com qualidade baixa ou troque-o.",
        H::TemplateMissing => "Envie o template a este número na página Templates.",
        H::AlternativeProvider | H::Ok => return None,
    })
}

/// A template's status on a number (ours in lowercase, the provider's in uppercase).
pub fn template_status(code: &str) -> String {
    look_up(
        &[
            ("approved", "aprovado"),
            ("pending", "em análise"),
            ("rejected", "rejeitado"),
            ("paused", "pausado"),
            ("disabled", "desativado"),
            ("deleted", "excluído"),
            ("failed", "falhou ao enviar"),
            ("in_appeal", "em recurso"),
            ("pending_deletion", "exclusão pendente"),
            ("limit_exceeded", "limite de templates excedido"),
            ("archived", "arquivado"),
            ("draft", "rascunho"),
        ],
        code,
    )
}

/// A template's category (PROVIDER.md §8).
pub fn template_category(code: &str) -> String {
    look_up(
        &[
            ("MARKETING", "marketing"),
            ("UTILITY", "utilidade"),
            ("AUTHENTICATION", "autenticação"),
        ],
        code,
    )
}

/// A template header's media kind (`image`, `video`, `document`; PROVIDER.md §6.2).
pub fn header_media(code: &str) -> String {
    look_up(
        &[
            ("image", "imagem"),
            ("video", "vídeo"),
            ("document", "documento"),
            ("text", "texto"),
        ],
        code,
    )
}

/// Why the provider rejected a template (its `rejected_reason`).
pub fn rejection_reason(code: &str) -> String {
    look_up(
        &[
            ("ABUSIVE_CONTENT", "conteúdo abusivo"),
            ("INVALID_FORMAT", "formato inválido"),
            ("INCORRECT_CATEGORY", "categoria incorreta"),
            (
                "TAG_CONTENT_MISMATCH",
                "conteúdo não corresponde à categoria",
            ),
            ("PROMOTIONAL", "conteúdo promocional"),
            ("SCAM", "suspeita de golpe"),
            ("NONE", "sem motivo informado"),
        ],
        code,
    )
}

/// A contact's hygiene result (`valid`, `invalid`, `unknown`, `pending`) or its reason
/// (`sem_whatsapp`, `formato_invalido`…).
pub fn hygiene(code: &str) -> String {
    look_up(
        &[
            ("valid", "válido"),
            ("invalid", "inválido"),
            ("unknown", "não verificado"),
            ("pending", "pendente"),
            ("sem_whatsapp", "sem WhatsApp"),
            ("formato_invalido", "formato de número inválido"),
            ("duplicado", "duplicado"),
        ],
        code,
    )
}

/// A forwarding's state to a client (a webhook log line's `encaminhamento`, or one delivery's
/// status).
pub fn forwarding(code: &str) -> String {
    look_up(
        &[
            ("nao_encaminhado", "não encaminhado"),
            ("encaminhado", "encaminhado"),
            ("pendente", "pendente"),
            ("falhou", "falhou"),
            ("delivered", "entregue"),
            ("pending", "pendente"),
            ("retrying", "tentando de novo"),
            ("failed", "falhou"),
        ],
        code,
    )
}

/// A webhook log line's kind and signature (`evento`, `verificacao`; `valida`, `invalida`…).
pub fn webhook(code: &str) -> String {
    look_up(
        &[
            ("evento", "evento"),
            ("verificacao", "verificação"),
            ("valida", "válida"),
            ("invalida", "inválida"),
            ("ausente", "ausente"),
            ("nao_verificada", "não verificada"),
            ("sem_segredo", "sem app secret"),
        ],
        code,
    )
}

/// A field of the provider's webhooks (PROVIDER.md §6: `messages`,
/// `message_template_status_update`…).
pub fn webhook_field(code: &str) -> String {
    look_up(
        &[
            ("messages", "mensagens e status"),
            ("message_template_status_update", "status de template"),
            ("message_template_quality_update", "qualidade de template"),
            ("message_template_components_update", "conteúdo de template"),
            ("template_category_update", "categoria de template"),
            ("phone_number_quality_update", "qualidade do número"),
            ("phone_number_name_update", "nome de exibição"),
            ("account_update", "conta"),
            ("account_review_update", "análise da conta"),
            ("account_alerts", "alertas da conta"),
            ("business_capability_update", "capacidade da empresa"),
            ("business_status_update", "situação da empresa"),
            ("security", "segurança"),
            ("user_preferences", "preferências do contato"),
            ("history", "histórico"),
            ("smb_message_echoes", "mensagens do app"),
            ("smb_app_state_sync", "contatos do app"),
            ("flows", "flows"),
            ("payment_configuration_update", "configuração de pagamento"),
        ],
        code,
    )
}

/// A task's priority (`engine::panel::TASK_PRIORITIES`).
pub fn priority(code: &str) -> String {
    look_up(
        &[
            ("baixa", "baixa"),
            ("media", "média"),
            ("alta", "alta"),
            ("urgente", "urgente"),
        ],
        code,
    )
}

/// Why today's campaign cap is what it is (`daily_cap`, `warmup`).
pub fn cap_source(code: &str) -> String {
    look_up(
        &[
            ("daily_cap", "teto diário"),
            ("warmup", "aquecimento"),
            ("none", "sem teto"),
        ],
        code,
    )
}

/// A panel campaign's status (D-062, `engine::panel_campaign::PanelStatus`).
pub fn campaign_status(code: &str) -> String {
    look_up(
        &[
            ("rascunho", "Rascunho"),
            ("higienizando", "Higienizando"),
            ("falha_higienizacao", "Falha na higienização"),
            ("aguardando_aprovacao", "Aguardando aprovação"),
            ("aprovada", "Aprovada"),
            ("retida", "Retida (disparos suspensos na conta)"),
            ("agendada", "Agendada"),
            ("em_andamento", "Em andamento"),
            ("pausada", "Pausada"),
            ("concluida", "Concluída"),
            ("cancelada", "Cancelada"),
        ],
        code,
    )
}

/// A campaign send's status (`queued`, `sending`, `sent`, `delivered`, `read`, `failed`,
/// `skipped`).
pub fn send_status(code: &str) -> String {
    look_up(
        &[
            ("queued", "na fila"),
            ("sending", "enviando"),
            ("sent", "enviada"),
            ("delivered", "entregue"),
            ("read", "lida"),
            ("failed", "falhou"),
            ("skipped", "ignorada"),
        ],
        code,
    )
}

/// Why a campaign is paused: a health code of its numbers, an operator's pause, or a text
/// (`Nenhum número disponível (3: qualidade_red)`, its health codes as their labels).
pub fn pause_reason(code: &str) -> String {
    if engine::channel::HealthCode::ALL
        .iter()
        .any(|c| c.as_str() == code)
    {
        return health(code);
    }
    if code.contains(char::is_whitespace) {
        return with_health_labels(code);
    }
    look_up(
        &[
            ("manual", "pausada por um operador"),
            ("operator", "pausada por um operador"),
            ("sem_numero", "nenhum número disponível"),
            ("no_channel", "nenhum número disponível"),
            ("no_channels", "nenhum número disponível"),
            ("throughput", "o provedor limitou a vazão"),
            ("rate_limited", "o provedor limitou a vazão"),
        ],
        code,
    )
}

/// `text` with each health code in it (a whole word with an underscore) as its label.
fn with_health_labels(text: &str) -> String {
    static CODE: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    let re =
        CODE.get_or_init(|| regex::Regex::new(r"\b[a-z0-9]+(?:_[a-z0-9]+)+\b").expect("valid"));
    re.replace_all(text, |c: &regex::Captures<'_>| health(&c[0]))
        .into_owned()
}

/// A record kind of an API path's first segment: `(gender article, noun)`.
fn record_noun(segment: &str) -> Option<(&'static str, &'static str)> {
    Some(match segment {
        "campaigns" => ("a", "campanha"),
        "business-managers" | "bms" => ("o", "BM"),
        "wabas" => ("a", "WABA"),
        "phone-numbers" | "channels" | "numbers" => ("o", "número"),
        "clientes" => ("o", "cliente"),
        "users" => ("o", "usuário"),
        "tasks" => ("a", "tarefa"),
        "templates" => ("o", "template"),
        "wiki" => ("a", "página da wiki"),
        "groups" => ("o", "grupo"),
        "messages" => ("a", "mensagem"),
        "webhooks" => ("o", "webhook"),
        "webhook-logs" => ("o", "registro de webhook"),
        "tokens" => ("o", "token"),
        "media" => ("a", "mídia"),
        "contacts" => ("o", "contato"),
        _ => return None,
    })
}

/// What an action segment of a path did (`approve` → `aprovou`), by method where it matters.
fn action_verb(method: &str, segment: &str) -> Option<&'static str> {
    Some(match (method, segment) {
        (_, "approve") => "aprovou",
        (_, "dispatch") => "disparou",
        (_, "hygiene") => "enviou à higienização",
        (_, "validate") => "validou a higienização de",
        (_, "test-send") => "fez um envio de teste de",
        (_, "import") => "importou",
        (_, "pause") => "pausou",
        (_, "resume") => "retomou",
        (_, "start") => "iniciou",
        (_, "cancel") => "cancelou",
        (_, "sync") => "sincronizou",
        (_, "submit") => "submeteu aos números",
        (_, "reactivate") => "reativou",
        (_, "foto") | (_, "photo") => "enviou a foto de",
        (_, "guardrails") => "alterou os guardrails de",
        (_, "webhook-secret") => "gerou novo segredo do webhook de",
        ("DELETE", "api-token") => "revogou o token do remetente de",
        (_, "api-token") => "gerou o token do remetente de",
        (_, "reenviar") | (_, "redeliver") | (_, "replay") => "reencaminhou",
        (_, "messages") => "enviou mensagem por",
        (_, "authorize") => "autorizou envios extras de",
        (_, "official") => "alterou as credenciais de",
        _ => return None,
    })
}

/// An audit line's action as a sentence (issue 47 item 10): `POST /api/campaigns/{id}/approve`
/// on `/api/campaigns/3/approve` reads `aprovou a campanha 3`; `POST /api/tasks` reads
/// `criou uma tarefa`. A path this does not know is named by its method and segments, never
/// as a route.
pub fn audit_action(action: &str, target: &str) -> String {
    let (method, route) = action.split_once(' ').unwrap_or(("", action));
    let strip = |p: &'static str, s: &str| -> Vec<String> {
        let s = s.strip_prefix(p).unwrap_or(s);
        s.split('/')
            .filter(|x| !x.is_empty())
            .map(str::to_string)
            .collect()
    };
    let prefix = if route.starts_with("/api/v1/") {
        "/api/v1"
    } else {
        "/api"
    };
    let (r, t) = (strip(prefix, route), strip(prefix, target));
    match r.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
        ["login"] => return "entrou no painel".into(),
        ["logout"] => return "saiu do painel".into(),
        ["settings", "dispatch"] => return "ligou ou desligou os disparos da conta".into(),
        _ => {}
    }
    let Some(first) = r.first() else {
        return unknown(action);
    };
    let noun = record_noun(first);
    let id = r
        .get(1)
        .filter(|x| x.starts_with('{'))
        .and_then(|_| t.get(1))
        .cloned();
    let step = r.iter().skip(2).rev().find(|x| !x.starts_with('{'));
    let (gender, word) = noun.unwrap_or(("o", ""));
    let word = if word.is_empty() {
        unknown(&first.replace('-', "_"))
    } else {
        word.to_string()
    };
    let record = match &id {
        Some(id) => format!("{gender} {word} {id}"),
        None if step.is_some() => format!("{gender}s {word}s"),
        None => format!("{} {word}", if gender == "a" { "uma" } else { "um" }),
    };
    let verb = match step {
        Some(s) => action_verb(method, s).map_or_else(
            || format!("{} ({})", by_method(method), unknown(&s.replace('-', "_"))),
            str::to_string,
        ),
        None if first == "messages" && method == "POST" => "enviou".to_string(),
        None => by_method(method).to_string(),
    };
    // "de o usuário" reads "do usuário".
    format!("{verb} {record}")
        .replace(" de o ", " do ")
        .replace(" de a ", " da ")
        .replace(" de os ", " dos ")
        .replace(" de as ", " das ")
}

/// A write's verb by its method.
fn by_method(method: &str) -> &'static str {
    match method {
        "POST" => "criou",
        "PUT" | "PATCH" => "alterou",
        "DELETE" => "removeu",
        _ => "mexeu em",
    }
}

/// A field of a form or of the API, as its screen names it (for the API's messages shown on
/// a page: "`daily_cap` deve ser…" reads "«teto diário» deve ser…").
pub fn field(name: &str) -> String {
    look_up(
        &[
            ("daily_cap", "teto diário"),
            ("cadence_ms", "cadência"),
            ("warmup", "aquecimento"),
            ("nome", "nome"),
            ("name", "nome"),
            ("webhook_url", "URL do webhook"),
            ("email", "e-mail"),
            ("password", "senha"),
            ("role", "papel"),
            ("documento", "documento"),
            ("cliente_id", "cliente"),
            ("nome_exibicao", "nome de exibição"),
            ("numeros", "números"),
            ("variaveis", "variáveis"),
            ("coluna_numero", "coluna do número"),
            ("coluna_nome", "coluna do nome"),
            ("template_id", "template"),
            ("volume", "volume"),
            ("body", "corpo"),
            ("category", "categoria"),
            ("language", "idioma"),
            ("app_secret", "app secret"),
            ("access_token", "token de acesso"),
            ("business_id", "Business ID"),
            ("app_id", "App ID"),
            ("titulo", "título"),
            ("descricao", "descrição"),
            ("prioridade", "prioridade"),
            ("content", "conteúdo"),
            ("title", "título"),
        ],
        name,
    )
}

/// An API message as a person reads it on a page: each `` `identifier` `` becomes its
/// field's label in quotes.
pub fn message(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find('`') {
        let Some(len) = rest[start + 1..].find('`') else {
            break;
        };
        out.push_str(&rest[..start]);
        let name = &rest[start + 1..start + 1 + len];
        out.push('«');
        out.push_str(&field(name));
        out.push('»');
        rest = &rest[start + 2 + len..];
    }
    out.push_str(rest);
    out
}

/// An instant as the panel shows it: `28/11/2026 14:03` in America/Sao_Paulo. Takes RFC 3339
/// (`2026-11-28T17:03:00Z`, any offset) or a zone-less `YYYY-MM-DD HH:MM:SS` (UTC); anything
/// else is shown as given; empty stays empty.
pub fn time(text: &str) -> String {
    let parsed = DateTime::parse_from_rfc3339(text.trim())
        .map(|t| t.with_timezone(&Utc))
        .ok()
        .or_else(|| {
            NaiveDateTime::parse_from_str(text.trim(), "%Y-%m-%d %H:%M:%S")
                .ok()
                .map(|n| Utc.from_utc_datetime(&n))
        });
    match parsed {
        Some(t) => t
            .with_timezone(&zone())
            .format("%d/%m/%Y %H:%M")
            .to_string(),
        None => text.to_string(),
    }
}

/// An hour's start (RFC 3339) as a chart label: `14h`, local.
pub fn hour(text: &str) -> String {
    DateTime::parse_from_rfc3339(text.trim())
        .map(|t| t.with_timezone(&zone()).format("%Hh").to_string())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_read_as_words() {
        assert_eq!(quality("GREEN"), "alta");
        assert_eq!(quality("red"), "baixa");
        assert_eq!(tier("TIER_250"), "250 contatos/24 h");
        assert_eq!(tier("TIER_100K"), "100.000 contatos/24 h");
        assert_eq!(tier("TIER_UNLIMITED"), "contatos ilimitados/24 h");
        assert_eq!(number_status("WORKING"), "conectado");
        assert_eq!(template_status("APPROVED"), "aprovado");
        assert_eq!(health("qualidade_red"), "qualidade baixa");
        assert_eq!(hygiene("sem_whatsapp"), "sem WhatsApp");
        assert_eq!(forwarding("nao_encaminhado"), "não encaminhado");
        assert_eq!(cap_source("daily_cap"), "teto diário");
        // Unknown: readable, never the raw identifier.
        assert_eq!(bm_health("algo_novo"), "algo novo");
        assert_eq!(
            pause_reason("Nenhum número disponível (1: qualidade_red, 2: limite_24h_esgotado)"),
            "Nenhum número disponível (1: qualidade baixa, 2: limite de 24 h esgotado)"
        );
        assert_eq!(
            hygiene("faltam valores para: Nome"),
            "faltam valores para: Nome"
        );
    }

    #[test]
    fn every_closed_set_the_pages_show_has_labels() {
        for s in crate::panel::campaigns::SEND_STATUSES {
            assert_ne!(send_status(s), unknown(s), "{s}");
        }
        for p in engine::panel::TASK_PRIORITIES {
            assert!(!priority(p).contains('_'), "{p}");
        }
        for t in ["GREEN", "YELLOW", "RED", "UNKNOWN"] {
            assert_ne!(quality(t), unknown(t), "{t}");
        }
        for s in ["WORKING", "PENDING", "DISCONNECTED"] {
            assert_ne!(number_status(s), unknown(s), "{s}");
        }
        for s in [
            "ok",
            "banido",
            "credencial_invalida",
            "pagamento_pendente",
            "restrito",
            "nao_sincronizado",
        ] {
            assert!(!bm_health(s).contains('_'), "{s}");
        }
    }

    #[test]
    fn every_health_code_has_a_label_and_no_route_in_its_action() {
        for c in engine::channel::HealthCode::ALL {
            assert!(!health(c.as_str()).contains('_'), "{c:?}");
            if let Some(a) = health_action(c.as_str()) {
                assert!(!a.contains('/') && !a.contains('_'), "{a}");
            }
        }
    }

    #[test]
    fn audit_lines_read_as_actions() {
        let a = |action: &str, target: &str| audit_action(action, target);
        assert_eq!(
            a(
                "POST /api/campaigns/{id}/approve",
                "/api/campaigns/3/approve"
            ),
            "aprovou a campanha 3"
        );
        assert_eq!(a("POST /api/tasks", "/api/tasks"), "criou uma tarefa");
        assert_eq!(
            a("PUT /api/tasks/{id}", "/api/tasks/7"),
            "alterou a tarefa 7"
        );
        assert_eq!(
            a("DELETE /api/users/{id}/api-token", "/api/users/2/api-token"),
            "revogou o token do remetente do usuário 2"
        );
        assert_eq!(
            a(
                "POST /api/v1/campaigns/{id}/pause",
                "/api/v1/campaigns/9/pause"
            ),
            "pausou a campanha 9"
        );
        assert_eq!(
            a("POST /api/v1/messages", "/api/v1/messages"),
            "enviou uma mensagem"
        );
        assert_eq!(a("POST /api/login", "/api/login"), "entrou no painel");
        assert_eq!(
            a(
                "POST /api/v1/coisas/{id}/fazer_algo",
                "/api/v1/coisas/4/fazer_algo"
            ),
            "criou (fazer algo) o coisas 4"
        );
    }

    #[test]
    fn messages_name_fields_by_their_labels() {
        assert_eq!(
            message("`daily_cap` deve ser ≥ 1; `cadence_ms` também."),
            "«teto diário» deve ser ≥ 1; «cadência» também."
        );
        assert_eq!(message("sem crase `aberta"), "sem crase `aberta");
    }

    #[test]
    fn times_are_local() {
        assert_eq!(time("2026-11-28T17:03:00Z"), "28/11/2026 14:03");
        assert_eq!(time("2026-11-28T17:03:00.123+00:00"), "28/11/2026 14:03");
        assert_eq!(time("2026-11-28 02:00:00"), "27/11/2026 23:00");
        assert_eq!(time("ontem"), "ontem");
        assert_eq!(hour("2026-11-25T14:00:00Z"), "11h");
        assert_eq!(thousands(1_234_567), "1.234.567");
        assert_eq!(document("11222333000181"), "11.222.333/0001-81");
        assert_eq!(document("12345678909"), "123.456.789-09");
        assert_eq!(document("ABC-1"), "ABC-1");
    }
}
