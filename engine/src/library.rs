//! The template library's rules: what an operator must fix before the provider would accept a
//! template (`problems`), how `provider_name` is derived, and how a `var_map` turns audience
//! columns into send parameters (spec "Template (library)").

use crate::template::{body_problems, parameter_count, positional_variables};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A button of a library template: `{type, text, url?, example?, phone_number?}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Button {
    /// `url`, `quick_reply` or `phone_number` (case-insensitive).
    #[serde(rename = "type")]
    pub kind: String,
    /// Label, 1 to 25 characters (else a `problem`).
    pub text: String,
    /// URL (url buttons), may end with `{{1}}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Example value of the URL variable (required when the URL has one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub example: Option<String>,
    /// Phone number (phone_number buttons).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phone_number: Option<String>,
}

/// A `var_map` entry: the audience column that fills a variable, and a default
/// (`{"field": "nome", "default": "cliente"}`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct VarBinding {
    /// Audience column name.
    pub field: String,
    /// Used when the column is absent or empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<String>,
}

/// A library template's state on one number (its copy in the number's WABA), decision D-026.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum TemplateStatus {
    /// Submitted; the provider has not decided (or it is in appeal).
    Pending,
    /// Usable for sends.
    Approved,
    /// Refused by the provider (`rejection_reason` says why).
    Rejected,
    /// Paused by the provider for low quality.
    Paused,
    /// Disabled by the provider.
    Disabled,
    /// The submission failed (our call or the provider's answer).
    Failed,
    /// Deleted at the provider.
    Deleted,
}

impl TemplateStatus {
    /// The stored and wire form.
    pub fn as_str(self) -> &'static str {
        match self {
            TemplateStatus::Pending => "pending",
            TemplateStatus::Approved => "approved",
            TemplateStatus::Rejected => "rejected",
            TemplateStatus::Paused => "paused",
            TemplateStatus::Disabled => "disabled",
            TemplateStatus::Failed => "failed",
            TemplateStatus::Deleted => "deleted",
        }
    }

    /// Parses the stored form.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "pending" => TemplateStatus::Pending,
            "approved" => TemplateStatus::Approved,
            "rejected" => TemplateStatus::Rejected,
            "paused" => TemplateStatus::Paused,
            "disabled" => TemplateStatus::Disabled,
            "failed" => TemplateStatus::Failed,
            "deleted" => TemplateStatus::Deleted,
            _ => return None,
        })
    }

    /// The library status for a provider status or `message_template_status_update` event
    /// (PROVIDER.md §6, §9.4; D-026): `None` for one that does not change the state
    /// (`FLAGGED`, an unknown event).
    pub fn from_provider(provider: &str) -> Option<Self> {
        Some(match provider.to_ascii_uppercase().as_str() {
            "APPROVED" | "REINSTATED" | "UNPAUSED" => TemplateStatus::Approved,
            "PENDING" | "IN_APPEAL" => TemplateStatus::Pending,
            "REJECTED" => TemplateStatus::Rejected,
            "PAUSED" => TemplateStatus::Paused,
            "DISABLED" => TemplateStatus::Disabled,
            "DELETED" | "PENDING_DELETION" => TemplateStatus::Deleted,
            _ => return None,
        })
    }
}

impl std::fmt::Display for TemplateStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A var_map: `"1".."n"` for body variables, `"btn:0"` for the URL button's suffix,
/// `"header:1"` for the variable of a text header (D-071).
pub type VarMap = BTreeMap<String, VarBinding>;

/// A template as the library holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Draft {
    /// Name at the provider.
    pub provider_name: String,
    /// `marketing`, `utility`, `authentication`.
    pub category: String,
    /// Locale.
    pub language: String,
    /// Body with `{{n}}`.
    pub body: String,
    /// Text header.
    pub header_text: Option<String>,
    /// Media header's kind (`IMAGE`… in the provider's `HEADER.format`), instead of a text
    /// header.
    pub header_media: Option<crate::template::HeaderMedia>,
    /// Whether the media header's example was given: the provider approves a media header
    /// only with one (`example.header_handle`, PROVIDER.md §6.2).
    pub header_example: bool,
    /// Footer.
    pub footer_text: Option<String>,
    /// Buttons.
    pub buttons: Vec<Button>,
    /// Variable bindings.
    pub var_map: VarMap,
}

/// One problem: where, a stable code, and what to do, in pt-BR.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Problem {
    /// Field (`body`, `buttons[0].url`, `var_map.2`…).
    pub field: String,
    /// Stable code.
    pub code: String,
    /// pt-BR explanation.
    pub message: String,
}

fn problem(field: impl Into<String>, code: &str, message: impl Into<String>) -> Problem {
    Problem {
        field: field.into(),
        code: code.into(),
        message: message.into(),
    }
}

/// Whether `name` is a valid provider template name (`^[a-z0-9_]+$`, ≤ 512).
pub fn valid_provider_name(name: &str) -> bool {
    (1..=512).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

/// A provider name derived from a library name: accents folded, lowercase, runs of other
/// characters as one `_` ("Promoção de Natal!" → `promocao_de_natal`).
pub fn provider_name_from(name: &str) -> String {
    let mut out = String::new();
    for c in name.chars().flat_map(fold).flat_map(char::to_lowercase) {
        if c.is_ascii_alphanumeric() {
            out.push(c);
        } else if !out.ends_with('_') && !out.is_empty() {
            out.push('_');
        }
    }
    let trimmed = out.trim_end_matches('_').to_string();
    if trimmed.is_empty() {
        "template".into()
    } else {
        trimmed.chars().take(512).collect()
    }
}

/// Folds the Latin accents of Portuguese and Spanish to ASCII.
pub fn fold(c: char) -> Option<char> {
    Some(match c {
        'á' | 'à' | 'â' | 'ã' | 'ä' => 'a',
        'Á' | 'À' | 'Â' | 'Ã' | 'Ä' => 'A',
        'é' | 'è' | 'ê' | 'ë' => 'e',
        'É' | 'È' | 'Ê' | 'Ë' => 'E',
        'í' | 'ì' | 'î' | 'ï' => 'i',
        'Í' | 'Ì' | 'Î' | 'Ï' => 'I',
        'ó' | 'ò' | 'ô' | 'õ' | 'ö' => 'o',
        'Ó' | 'Ò' | 'Ô' | 'Õ' | 'Ö' => 'O',
        'ú' | 'ù' | 'û' | 'ü' => 'u',
        'Ú' | 'Ù' | 'Û' | 'Ü' => 'U',
        'ç' => 'c',
        'Ç' => 'C',
        'ñ' => 'n',
        'Ñ' => 'N',
        other => other,
    })
}

/// The problem code of a media header without its example.
pub const HEADER_EXAMPLE_MISSING: &str = "header_example_missing";

/// Every problem of a draft, by the provider's rules (PROVIDER.md §6.2) and the var_map's.
pub fn problems(d: &Draft) -> Vec<Problem> {
    let mut out = Vec::new();
    if !valid_provider_name(&d.provider_name) {
        out.push(problem(
            "provider_name",
            "invalid_provider_name",
            "`provider_name` deve seguir ^[a-z0-9_]+$ (até 512).",
        ));
    }
    if !["marketing", "utility", "authentication"].contains(&d.category.as_str()) {
        out.push(problem(
            "category",
            "invalid_category",
            "`category` deve ser marketing, utility ou authentication.",
        ));
    }
    let lang_ok = {
        let (l, r) = d
            .language
            .split_once('_')
            .map(|(a, b)| (a, Some(b)))
            .unwrap_or((d.language.as_str(), None));
        (2..=3).contains(&l.len())
            && l.bytes().all(|b| b.is_ascii_lowercase())
            && r.is_none_or(|r| r.len() == 2 && r.bytes().all(|b| b.is_ascii_uppercase()))
    };
    if !lang_ok {
        out.push(problem(
            "language",
            "invalid_language",
            "`language` deve ser um código como pt_BR ou en_US.",
        ));
    }
    for p in body_problems(&d.body) {
        out.push(problem("body", p.code(), p.label()));
    }
    if let Some(h) = &d.header_text {
        if h.chars().count() > 60 {
            out.push(problem(
                "header_text",
                "header_too_long",
                "O cabeçalho passa de 60 caracteres.",
            ));
        }
        if parameter_count(h) > 1 {
            out.push(problem(
                "header_text",
                "header_variables",
                "O cabeçalho pode ter no máximo uma variável.",
            ));
        }
    }
    if d.header_media.is_some() && d.header_text.is_some() {
        out.push(problem(
            "header_text",
            "header_conflict",
            "O cabeçalho é de texto ou de mídia, não os dois.",
        ));
    }
    if d.header_media.is_some() && !d.header_example {
        out.push(problem(
            "header_example",
            HEADER_EXAMPLE_MISSING,
            "Envie a imagem de exemplo do cabeçalho (JPEG ou PNG até 5 MB): o provedor só aprova um cabeçalho de mídia com um exemplo.",
        ));
    }
    if let Some(f) = &d.footer_text {
        if f.chars().count() > 60 {
            out.push(problem(
                "footer_text",
                "footer_too_long",
                "O rodapé passa de 60 caracteres.",
            ));
        }
        if !positional_variables(f).is_empty() {
            out.push(problem(
                "footer_text",
                "footer_variables",
                "O rodapé não pode ter variáveis.",
            ));
        }
    }
    if d.buttons.len() > 10 {
        out.push(problem(
            "buttons",
            "too_many_buttons",
            "No máximo 10 botões.",
        ));
    }
    let mut urls = 0;
    let mut url_var_at_0 = false;
    for (i, b) in d.buttons.iter().enumerate() {
        let kind = b.kind.to_ascii_lowercase();
        if kind != "copy_code" && (b.text.is_empty() || b.text.chars().count() > 25) {
            out.push(problem(
                format!("buttons[{i}].text"),
                "button_text",
                "O texto do botão deve ter de 1 a 25 caracteres.",
            ));
        }
        match kind.as_str() {
            "url" => {
                urls += 1;
                let url = b.url.clone().unwrap_or_default();
                if !(url.starts_with("https://") || url.starts_with("http://")) {
                    out.push(problem(
                        format!("buttons[{i}].url"),
                        "button_url",
                        "O botão de URL precisa de uma URL http(s).",
                    ));
                }
                let n = parameter_count(&url);
                if n > 1 || (n == 1 && !url.trim_end().ends_with("{{1}}")) {
                    out.push(problem(
                        format!("buttons[{i}].url"),
                        "button_url_variable",
                        "A URL pode ter só uma variável, {{1}}, no fim.",
                    ));
                }
                if n == 1 {
                    if i == 0 {
                        url_var_at_0 = true;
                    }
                    if b.example.as_deref().is_none_or(str::is_empty) {
                        out.push(problem(
                            format!("buttons[{i}].example"),
                            "button_example_missing",
                            "Botão de URL com variável precisa de `example`.",
                        ));
                    }
                }
            }
            "quick_reply" => {}
            "copy_code" => {
                if b.example.as_deref().is_none_or(str::is_empty) {
                    out.push(problem(
                        format!("buttons[{i}].example"),
                        "button_example_missing",
                        "Botão de copiar código precisa de `example` (o código de exemplo).",
                    ));
                }
            }
            "phone_number" => {
                if b.phone_number.as_deref().is_none_or(str::is_empty) {
                    out.push(problem(
                        format!("buttons[{i}].phone_number"),
                        "button_phone",
                        "Botão de telefone precisa de `phone_number`.",
                    ));
                }
            }
            _ => out.push(problem(
                format!("buttons[{i}].type"),
                "button_type",
                "`type` do botão deve ser url, quick_reply, phone_number ou copy_code.",
            )),
        }
    }
    if urls > 2 {
        out.push(problem(
            "buttons",
            "too_many_url_buttons",
            "No máximo 2 botões de URL.",
        ));
    }
    let body_vars = parameter_count(&d.body);
    let header_vars = d.header_text.as_deref().map_or(0, parameter_count);
    for (key, binding) in &d.var_map {
        if key == HEADER_KEY {
            if header_vars != 1 {
                out.push(problem(
                    "var_map.header:1",
                    "var_map_header",
                    "`header:1` só vale quando o cabeçalho de texto tem a variável {{1}}.",
                ));
            }
        } else if key == "btn:0" {
            if !url_var_at_0 {
                out.push(problem(
                    "var_map.btn:0",
                    "var_map_button",
                    "`btn:0` só vale quando o primeiro botão é de URL com variável.",
                ));
            }
        } else {
            match key.parse::<usize>() {
                Ok(n) if (1..=body_vars).contains(&n) => {}
                _ => out.push(problem(
                    format!("var_map.{key}"),
                    "var_map_unknown_variable",
                    format!("A variável {{{{{key}}}}} não existe no corpo."),
                )),
            }
        }
        if binding.field.trim().is_empty() {
            out.push(problem(
                format!("var_map.{key}"),
                "var_map_field",
                "Cada entrada do var_map precisa de `field`.",
            ));
        }
    }
    out
}

/// The var_map key of a text header's variable (D-071).
pub const HEADER_KEY: &str = "header:1";

/// Fills the send parameters from an audience row: body variables `1..n`, the URL button
/// suffix (`btn:0`) and the header variable (`header:1`); what the var_map does not bind is
/// left to the layout's examples ([`crate::template::Layout::fill`]). A variable whose column
/// is absent or empty takes the default; without a default it is reported in the error list
/// (column names).
pub fn render(
    body: &str,
    var_map: &VarMap,
    row: &BTreeMap<String, String>,
) -> Result<crate::template::Given, Vec<String>> {
    let n = parameter_count(body);
    let mut params = Vec::with_capacity(n);
    let mut missing = Vec::new();
    let value = |key: &str, missing: &mut Vec<String>| -> Option<String> {
        let binding = var_map.get(key)?;
        match row.get(&binding.field).filter(|v| !v.trim().is_empty()) {
            Some(v) => Some(v.clone()),
            None => match &binding.default {
                Some(d) => Some(d.clone()),
                None => {
                    missing.push(binding.field.clone());
                    None
                }
            },
        }
    };
    for i in 1..=n {
        let key = i.to_string();
        if !var_map.contains_key(&key) {
            missing.push(format!("{{{{{i}}}}}"));
            continue;
        }
        if let Some(v) = value(&key, &mut missing) {
            params.push(v);
        }
    }
    let button = value("btn:0", &mut missing);
    let header = value(HEADER_KEY, &mut missing);
    if missing.is_empty() {
        Ok(crate::template::Given {
            body: params,
            header_text: header,
            url_suffix: button,
            ..Default::default()
        })
    } else {
        Err(missing)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// D-026: the provider's statuses and events map onto the library's states; each state
    /// reads back from its stored form; the wire form is the stored one.
    #[test]
    fn template_states_from_the_provider_and_back() {
        let table = [
            ("APPROVED", Some(TemplateStatus::Approved)),
            ("reinstated", Some(TemplateStatus::Approved)),
            ("UNPAUSED", Some(TemplateStatus::Approved)),
            ("IN_APPEAL", Some(TemplateStatus::Pending)),
            ("REJECTED", Some(TemplateStatus::Rejected)),
            ("PAUSED", Some(TemplateStatus::Paused)),
            ("DISABLED", Some(TemplateStatus::Disabled)),
            ("PENDING_DELETION", Some(TemplateStatus::Deleted)),
            ("FLAGGED", None),
            ("", None),
        ];
        for (provider, want) in table {
            assert_eq!(TemplateStatus::from_provider(provider), want, "{provider}");
        }
        for s in [
            TemplateStatus::Pending,
            TemplateStatus::Approved,
            TemplateStatus::Rejected,
            TemplateStatus::Paused,
            TemplateStatus::Disabled,
            TemplateStatus::Failed,
            TemplateStatus::Deleted,
        ] {
            assert_eq!(TemplateStatus::parse(s.as_str()), Some(s));
            assert_eq!(serde_json::to_value(s).unwrap(), s.as_str());
        }
        assert_eq!(TemplateStatus::parse("APPROVED"), None, "stored forms only");
    }

    fn draft(body: &str) -> Draft {
        Draft {
            provider_name: "promo_natal".into(),
            category: "marketing".into(),
            language: "pt_BR".into(),
            body: body.into(),
            header_text: None,
            header_media: None,
            header_example: false,
            footer_text: None,
            buttons: vec![],
            var_map: VarMap::new(),
        }
    }

    /// A media header needs its example, and is never also a text header (PROVIDER.md §6.2).
    #[test]
    fn a_media_header_needs_its_example() {
        let codes =
            |d: &Draft| -> Vec<String> { problems(d).into_iter().map(|p| p.code).collect() };
        let mut d = draft("Olá, seu pedido saiu.");
        d.header_media = Some(crate::template::HeaderMedia::Image);
        assert_eq!(codes(&d), vec!["header_example_missing"]);
        d.header_example = true;
        assert!(codes(&d).is_empty());
        d.header_text = Some("Oferta".into());
        assert_eq!(codes(&d), vec!["header_conflict"]);
    }

    #[test]
    fn provider_names_are_derived_from_names() {
        assert_eq!(
            provider_name_from("Promoção de Natal!"),
            "promocao_de_natal"
        );
        assert_eq!(provider_name_from("  Ação -- 2026 "), "acao_2026");
        assert_eq!(provider_name_from("!!!"), "template");
    }

    #[test]
    fn every_problem_is_listed() {
        assert!(problems(&draft("Olá {{1}}, tudo bem?")).is_empty());
        let mut d = draft("{{1}} {{2}}");
        d.provider_name = "Promo Natal".into();
        d.footer_text = Some("Rodapé {{1}}".into());
        d.buttons = vec![Button {
            kind: "url".into(),
            text: "Ver".into(),
            url: Some("https://x.com/{{1}}".into()),
            example: None,
            phone_number: None,
        }];
        d.var_map.insert(
            "3".into(),
            VarBinding {
                field: "nome".into(),
                default: None,
            },
        );
        let codes: Vec<String> = problems(&d).into_iter().map(|p| p.code).collect();
        for c in [
            "invalid_provider_name",
            "variable_at_edge",
            "adjacent_variables",
            "footer_variables",
            "button_example_missing",
            "var_map_unknown_variable",
        ] {
            assert!(codes.contains(&c.to_string()), "{c} in {codes:?}");
        }
    }

    #[test]
    fn rendering_takes_columns_then_defaults() {
        let mut vm = VarMap::new();
        vm.insert(
            "1".into(),
            VarBinding {
                field: "nome".into(),
                default: None,
            },
        );
        vm.insert(
            "2".into(),
            VarBinding {
                field: "cupom".into(),
                default: Some("BEMVINDO".into()),
            },
        );
        vm.insert(
            "btn:0".into(),
            VarBinding {
                field: "pedido".into(),
                default: None,
            },
        );
        let row: BTreeMap<String, String> = [
            ("nome".into(), "Ana".into()),
            ("pedido".into(), "A1".into()),
        ]
        .into();
        let given = render("Oi {{1}}, cupom {{2}}.", &vm, &row).unwrap();
        assert_eq!(given.body, vec!["Ana".to_string(), "BEMVINDO".into()]);
        assert_eq!(given.url_suffix.as_deref(), Some("A1"));
        assert_eq!(given.header_text, None);
        let row: BTreeMap<String, String> = [("pedido".into(), "A1".into())].into();
        assert_eq!(
            render("Oi {{1}}, cupom {{2}}.", &vm, &row),
            Err(vec!["nome".into()])
        );
    }
}
