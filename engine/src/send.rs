//! The rules of a 1:1 send's request before any number is involved: who it is for and what
//! it carries (spec "Sending messages"; PROVIDER.md §2.2). The HTTP layer reads the body and
//! calls these; the number's own rules (window, health, limits) are [`crate::channel::Channel`]'s.

use crate::phone::Phone;
use crate::template::{GivenMedia, HeaderMedia};
use crate::ValidationError;

/// Longest free text the provider accepts, in characters (PROVIDER.md §2.2).
pub const MAX_TEXT: usize = 4096;

/// Longest media caption and template parameter, in characters.
pub const MAX_CAPTION: usize = 1024;

/// The recipient: `to` or `chat_id` (a WhatsApp chat id such as `5511…@c.us`), exactly one.
///
/// Errors: `ambiguous_recipient` with both, `required` with neither, `invalid_phone`.
pub fn recipient(to: Option<&str>, chat_id: Option<&str>) -> Result<Phone, ValidationError> {
    match (to, chat_id) {
        (Some(to), None) => Phone::parse("to", to),
        (None, Some(chat)) => Phone::parse("chat_id", chat),
        (Some(_), Some(_)) => Err(ValidationError::new(
            "ambiguous_recipient",
            "to",
            "Informe `to` ou `chat_id`, não os dois.",
        )),
        (None, None) => Err(ValidationError::new(
            "required",
            "to",
            "Informe o destinatário em `to` (ou `chat_id`).",
        )),
    }
}

/// A caption goes with media only, up to [`MAX_CAPTION`] characters.
pub fn caption(caption: Option<&str>, with_media: bool) -> Result<(), ValidationError> {
    match caption {
        Some(c) if !with_media || c.chars().count() > MAX_CAPTION => Err(ValidationError::new(
            "invalid_caption",
            "caption",
            "`caption` acompanha `media` e tem até 1024 caracteres.",
        )),
        _ => Ok(()),
    }
}

/// A media URL is a public http(s) URL (where it may point is the SSRF guard's to decide).
pub fn media_url(url: &str) -> Result<(), ValidationError> {
    match url.starts_with("http://") || url.starts_with("https://") {
        true => Ok(()),
        false => Err(ValidationError::new(
            "invalid_media_url",
            "media.url",
            "`media.url` deve ser uma URL pública http(s).",
        )),
    }
}

/// Free text has 1 to [`MAX_TEXT`] characters.
pub fn text(text: &str) -> Result<(), ValidationError> {
    let n = text.chars().count();
    match n == 0 || n > MAX_TEXT {
        true => Err(ValidationError::new(
            "invalid_text",
            "text",
            format!("`text` deve ter de 1 a {MAX_TEXT} caracteres."),
        )),
        false => Ok(()),
    }
}

/// A template's name at the provider: required, `^[a-z0-9_]+$`.
pub fn template_name(name: Option<&str>) -> Result<&str, ValidationError> {
    let Some(name) = name else {
        return Err(ValidationError::new(
            "required",
            "template.name",
            "Informe `template.name` (ou `template.id` de um template da biblioteca).",
        ));
    };
    let valid = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    match valid {
        true => Ok(name),
        false => Err(ValidationError::new(
            "invalid_template_name",
            "template.name",
            "`template.name` deve seguir ^[a-z0-9_]+$ (o nome do template no provedor).",
        )),
    }
}

/// A template's locale (`pt_BR` when not given): up to 16 letters, `_` or `-`.
pub fn language(language: Option<String>) -> Result<String, ValidationError> {
    let language = language.unwrap_or_else(|| "pt_BR".into());
    let valid = !language.is_empty()
        && language.len() <= 16
        && language
            .bytes()
            .all(|b| b.is_ascii_alphabetic() || b == b'_' || b == b'-');
    match valid {
        true => Ok(language),
        false => Err(ValidationError::new(
            "invalid_language",
            "template.language",
            "`template.language` deve ser um código como pt_BR ou en_US.",
        )),
    }
}

/// Body parameters have 1 to [`MAX_CAPTION`] characters each (not blank).
pub fn params(params: &[String]) -> Result<(), ValidationError> {
    match params
        .iter()
        .position(|p| p.trim().is_empty() || p.chars().count() > MAX_CAPTION)
    {
        Some(i) => Err(ValidationError::new(
            "invalid_param",
            "template.params",
            format!("`template.params[{i}]` deve ter de 1 a 1024 caracteres."),
        )),
        None => Ok(()),
    }
}

/// A template's header media: `image`, `video` or `document`, by an http(s) `link` or an
/// uploaded `id`, exactly one of the two (blank counts as absent).
pub fn header_media(
    kind: &str,
    link: Option<String>,
    id: Option<String>,
) -> Result<GivenMedia, ValidationError> {
    let Some(kind) = HeaderMedia::parse(kind) else {
        return Err(ValidationError::new(
            "invalid_media_type",
            "template.header_media.type",
            "`template.header_media.type` deve ser image, video ou document.",
        ));
    };
    let link = link.filter(|l| !l.trim().is_empty());
    let id = id.filter(|i| !i.trim().is_empty());
    if link.is_some() == id.is_some() {
        return Err(ValidationError::new(
            "invalid_header_media",
            "template.header_media",
            "Informe `link` ou `id` em `template.header_media`, um dos dois.",
        ));
    }
    if link
        .as_deref()
        .is_some_and(|l| !(l.starts_with("https://") || l.starts_with("http://")))
    {
        return Err(ValidationError::new(
            "invalid_url",
            "template.header_media.link",
            "`template.header_media.link` deve ser uma URL http(s).",
        ));
    }
    Ok(GivenMedia { kind, link, id })
}

/// A send's `template` object as read off the wire: the one shape of the account API's
/// `POST /messages`, `POST /groups/{id}/messages`, the public sender and MCP's
/// `send_template` (issue 55, D-127). Blank strings count as absent.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TemplateFields {
    /// A library template's id…
    pub id: Option<i64>,
    /// …or a template's name at the provider (`^[a-z0-9_]+$`).
    pub name: Option<String>,
    /// The locale of a template by name (each surface has its default).
    pub language: Option<String>,
    /// Values of a library template's var_map, by column (`{"nome": "Ana"}`).
    pub vars: std::collections::BTreeMap<String, String>,
    /// Body parameters in order, 1 to 1,024 characters each.
    pub params: Vec<String>,
    /// The variable of a text header.
    pub header_param: Option<String>,
    /// Header media: `(type, link, id)`, `type` image, video or document.
    pub header_media: Option<(String, Option<String>, Option<String>)>,
    /// Suffix of the dynamic URL button.
    pub button_param: Option<String>,
    /// Code of a copy-code button.
    pub coupon_code: Option<String>,
}

/// Which template a send names.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum TemplateChoice {
    /// A library template by id.
    Id(i64),
    /// A template by name, in `language` or the surface's default.
    Name {
        /// Name at the provider.
        name: String,
        /// Locale, when given.
        language: Option<String>,
    },
}

/// What a send fills its template with.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum TemplateValues {
    /// Values by column, rendered through the library template's var_map.
    Vars(std::collections::BTreeMap<String, String>),
    /// The parameters as given (body in order, header, button, coupon).
    Given(crate::template::Given),
}

/// A checked `template` object: which template and its values.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TemplateRef {
    /// The template.
    pub choice: TemplateChoice,
    /// Its values.
    pub values: TemplateValues,
}

/// Checks a `template` object: exactly one of `id` and `name` (`ambiguous_template`,
/// `required`), a valid name and language (`invalid_template_name`, `invalid_language`),
/// `vars` or the parameters, not both (`ambiguous_template`), each parameter 1 to 1,024
/// characters (`invalid_param`), header media as [`header_media`] checks it.
pub fn template_ref(f: TemplateFields) -> Result<TemplateRef, ValidationError> {
    let blank = |v: Option<String>| v.filter(|s| !s.trim().is_empty());
    let (name, language) = (blank(f.name), blank(f.language));
    let choice = match (f.id, name) {
        (Some(_), Some(_)) => {
            return Err(ValidationError::new(
                "ambiguous_template",
                "template",
                "Informe `template.id` ou `template.name`, não os dois.",
            ))
        }
        (Some(id), None) => TemplateChoice::Id(id),
        (None, name) => {
            let name = template_name(name.as_deref())?.to_string();
            let language = match language {
                Some(l) => Some(self::language(Some(l))?),
                None => None,
            };
            TemplateChoice::Name { name, language }
        }
    };
    let header_text = blank(f.header_param);
    let url_suffix = f.button_param.filter(|b| !b.is_empty());
    let coupon_code = blank(f.coupon_code);
    let given_any = !f.params.is_empty()
        || header_text.is_some()
        || f.header_media.is_some()
        || url_suffix.is_some()
        || coupon_code.is_some();
    if !f.vars.is_empty() && given_any {
        return Err(ValidationError::new(
            "ambiguous_template",
            "template.vars",
            "Informe `template.vars` (as colunas do template) ou `template.params` e os demais valores, não os dois.",
        ));
    }
    if !f.vars.is_empty() {
        return Ok(TemplateRef {
            choice,
            values: TemplateValues::Vars(f.vars),
        });
    }
    params(&f.params)?;
    let header_media = match f.header_media {
        None => None,
        Some((kind, link, id)) => Some(header_media(&kind, link, id)?),
    };
    Ok(TemplateRef {
        choice,
        values: TemplateValues::Given(crate::template::Given {
            body: f.params,
            header_text,
            header_media,
            url_suffix,
            coupon_code,
        }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_template_object_names_one_template_and_one_kind_of_values() {
        let by_id = template_ref(TemplateFields {
            id: Some(7),
            params: vec!["Ana".into()],
            ..Default::default()
        })
        .unwrap();
        assert_eq!(by_id.choice, TemplateChoice::Id(7));
        assert!(matches!(by_id.values, TemplateValues::Given(ref g) if g.body == ["Ana"]));
        let by_name = template_ref(TemplateFields {
            name: Some("pedido".into()),
            vars: [("nome".to_string(), "Ana".to_string())].into(),
            ..Default::default()
        })
        .unwrap();
        assert_eq!(
            by_name.choice,
            TemplateChoice::Name {
                name: "pedido".into(),
                language: None
            }
        );
        assert!(matches!(by_name.values, TemplateValues::Vars(_)));
        let code = |f: TemplateFields| template_ref(f).unwrap_err().code;
        assert_eq!(
            code(TemplateFields {
                id: Some(7),
                name: Some("pedido".into()),
                ..Default::default()
            }),
            "ambiguous_template"
        );
        assert_eq!(code(TemplateFields::default()), "required");
        assert_eq!(
            code(TemplateFields {
                id: Some(7),
                vars: [("nome".to_string(), "Ana".to_string())].into(),
                button_param: Some("x".into()),
                ..Default::default()
            }),
            "ambiguous_template"
        );
        assert_eq!(
            code(TemplateFields {
                name: Some("Pedido".into()),
                ..Default::default()
            }),
            "invalid_template_name"
        );
        assert_eq!(
            code(TemplateFields {
                id: Some(7),
                params: vec![" ".into()],
                ..Default::default()
            }),
            "invalid_param"
        );
    }

    #[test]
    fn requests_are_checked_field_by_field() {
        assert_eq!(
            recipient(Some("+55 11 99999-0001"), None).unwrap().as_str(),
            "5511999990001"
        );
        assert_eq!(
            recipient(None, Some("5511999990001@c.us"))
                .unwrap()
                .as_str(),
            "5511999990001"
        );
        assert_eq!(
            recipient(Some("1"), Some("2")).unwrap_err().code,
            "ambiguous_recipient"
        );
        assert_eq!(recipient(None, None).unwrap_err().code, "required");
        assert!(caption(Some("a"), false).is_err());
        assert!(caption(Some(&"a".repeat(1025)), true).is_err());
        assert!(caption(Some("a"), true).is_ok() && caption(None, false).is_ok());
        assert!(media_url("ftp://x").is_err() && media_url("https://x/a.png").is_ok());
        assert!(text("").is_err() && text(&"é".repeat(MAX_TEXT)).is_ok());
        assert!(text(&"a".repeat(MAX_TEXT + 1)).is_err());
        assert_eq!(template_name(None).unwrap_err().code, "required");
        assert_eq!(
            template_name(Some("Promo")).unwrap_err().code,
            "invalid_template_name"
        );
        assert_eq!(template_name(Some("promo_1")), Ok("promo_1"));
        assert_eq!(language(None).unwrap(), "pt_BR");
        assert!(language(Some("pt BR".into())).is_err());
        assert_eq!(
            params(&["a".into(), " ".into()]).unwrap_err().message,
            "`template.params[1]` deve ter de 1 a 1024 caracteres."
        );
        assert!(header_media("audio", Some("https://x".into()), None).is_err());
        assert!(header_media("image", Some("https://x".into()), Some("1".into())).is_err());
        assert!(header_media("image", Some(" ".into()), None).is_err());
        assert!(header_media("image", Some("file:///etc".into()), None).is_err());
        assert!(header_media("document", None, Some("123".into())).is_ok());
    }
}
