//! Template text rules shared by sends and the template library.

/// The positional variables `{{n}}` found in `text`, in order of appearance, as numbers.
/// Malformed placeholders (`{{x}}`, `{{ }}`) are not variables and are skipped.
pub fn positional_variables(text: &str) -> Vec<u32> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        let after = &rest[start + 2..];
        match after.find("}}") {
            Some(end) => {
                if let Ok(n) = after[..end].trim().parse::<u32>() {
                    out.push(n);
                }
                rest = &after[end + 2..];
            }
            None => break,
        }
    }
    out
}

/// How many distinct positional variables `text` has: the count of body parameters a send must
/// give (the provider answers 132000 otherwise, PROVIDER.md §2.4).
pub fn parameter_count(text: &str) -> usize {
    let mut vars = positional_variables(text);
    vars.sort_unstable();
    vars.dedup();
    vars.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each `{{n}}` takes its value; `{{1}}` never eats into `{{10}}`; a variable without a
    /// value stays as typed.
    #[test]
    fn fills_the_text_a_contact_reads() {
        let params: Vec<String> = (1..=10).map(|i| format!("v{i}")).collect();
        assert_eq!(fill_text("{{1}}-{{10}}-{{2}}", &params), "v1-v10-v2");
        assert_eq!(fill_text("Olá {{1}}, {{2}}", &params[..1]), "Olá v1, {{2}}");
    }

    #[test]
    fn finds_positional_variables_in_order() {
        assert_eq!(
            positional_variables("Olá {{1}}, seu código é {{2}}."),
            vec![1, 2]
        );
        assert_eq!(positional_variables("{{2}} e {{1}} e {{2}}"), vec![2, 1, 2]);
        assert_eq!(positional_variables("sem variáveis"), Vec::<u32>::new());
        assert_eq!(positional_variables("{{nome}} {{ 3 }} {{4"), vec![3]);
        assert_eq!(parameter_count("{{2}} e {{1}} e {{2}}"), 2);
    }
}

/// A problem of a template body, by the provider's rules (PROVIDER.md §6.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyProblem {
    /// No text.
    Empty,
    /// More than 1024 characters.
    TooLong,
    /// Variables are not `{{1}}`, `{{2}}`… in order without gaps.
    NotSequential,
    /// The body starts or ends with a variable.
    VariableAtEdge,
    /// Two variables stand next to each other.
    AdjacentVariables,
}

impl BodyProblem {
    /// Stable code.
    pub fn code(self) -> &'static str {
        match self {
            BodyProblem::Empty => "body_empty",
            BodyProblem::TooLong => "body_too_long",
            BodyProblem::NotSequential => "variables_not_sequential",
            BodyProblem::VariableAtEdge => "variable_at_edge",
            BodyProblem::AdjacentVariables => "adjacent_variables",
        }
    }

    /// The provider's wording (English), as its error details say it.
    pub fn provider_text(self) -> &'static str {
        match self {
            BodyProblem::Empty => "BODY text is required",
            BodyProblem::TooLong => "BODY text is longer than 1024 characters",
            BodyProblem::NotSequential => {
                "Variables must be numbered {{1}}, {{2}}… in order, without gaps"
            }
            BodyProblem::VariableAtEdge => {
                "Variables can't be at the start or end of the template body"
            }
            BodyProblem::AdjacentVariables => "A variable can't be next to another variable",
        }
    }

    /// pt-BR text for operators.
    pub fn label(self) -> &'static str {
        match self {
            BodyProblem::Empty => "O corpo do template está vazio.",
            BodyProblem::TooLong => "O corpo passa de 1024 caracteres.",
            BodyProblem::NotSequential => {
                "As variáveis devem ser {{1}}, {{2}}… em ordem, sem pular números."
            }
            BodyProblem::VariableAtEdge => {
                "O corpo não pode começar nem terminar com uma variável."
            }
            BodyProblem::AdjacentVariables => "Uma variável não pode ficar colada em outra.",
        }
    }
}

/// Every problem of a template body by the provider's rules.
pub fn body_problems(text: &str) -> Vec<BodyProblem> {
    let mut out = Vec::new();
    if text.trim().is_empty() {
        out.push(BodyProblem::Empty);
        return out;
    }
    if text.chars().count() > 1024 {
        out.push(BodyProblem::TooLong);
    }
    let vars = positional_variables(text);
    let mut sorted = vars.clone();
    sorted.sort_unstable();
    sorted.dedup();
    if sorted.iter().enumerate().any(|(i, v)| *v as usize != i + 1) {
        out.push(BodyProblem::NotSequential);
    }
    let trimmed = text.trim();
    if !vars.is_empty() && (trimmed.starts_with("{{") || trimmed.ends_with("}}")) {
        out.push(BodyProblem::VariableAtEdge);
    }
    if has_adjacent_variables(text) {
        out.push(BodyProblem::AdjacentVariables);
    }
    out
}

/// Whether two variables stand next to each other with only spaces between them.
fn has_adjacent_variables(text: &str) -> bool {
    let mut last_end: Option<usize> = None;
    let mut offset = 0;
    while let Some(start) = text[offset..].find("{{") {
        let abs_start = offset + start;
        let Some(end) = text[abs_start..].find("}}") else {
            break;
        };
        if let Some(prev) = last_end {
            if text[prev..abs_start].trim().is_empty() {
                return true;
            }
        }
        last_end = Some(abs_start + end + 2);
        offset = abs_start + end + 2;
    }
    false
}

#[cfg(test)]
mod body_tests {
    use super::*;

    #[test]
    fn body_rules() {
        assert!(body_problems("Olá {{1}}, pedido {{2}} saiu.").is_empty());
        assert_eq!(body_problems(""), vec![BodyProblem::Empty]);
        assert_eq!(
            body_problems("Olá {{1}} e {{3}}."),
            vec![BodyProblem::NotSequential]
        );
        assert_eq!(
            body_problems("{{1}}, oi."),
            vec![BodyProblem::VariableAtEdge]
        );
        assert_eq!(
            body_problems("Oi {{1}} {{2}} tudo?"),
            vec![BodyProblem::AdjacentVariables]
        );
        assert!(body_problems(&"a".repeat(1025)).contains(&BodyProblem::TooLong));
    }
}

/// The format of a template's header (PROVIDER.md §2.4, §6.2: one header, `format` declared at
/// creation; a send's header parameter must match it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeaderLayout {
    /// `TEXT`, with 0 or 1 variable and the creation example of that variable.
    Text {
        /// Count of `{{n}}` in the header text (0 or 1).
        variables: usize,
        /// `example.header_text[0]`, sent when no value is given.
        example: Option<String>,
    },
    /// `IMAGE`, `VIDEO` or `DOCUMENT`: every send carries the media (by link or uploaded id).
    Media(HeaderMedia),
    /// `LOCATION`: every send carries a location.
    Location,
}

/// `text` with each positional variable `{{n}}` replaced by `params[n - 1]` (those without a
/// value stay as typed): what a contact reads, for previews and a message's stored text.
pub fn fill_text(text: &str, params: &[String]) -> String {
    let mut out = text.to_string();
    for (i, p) in params.iter().enumerate() {
        out = out.replace(&format!("{{{{{}}}}}", i + 1), p);
    }
    out
}

/// The media kinds a template header can declare.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum HeaderMedia {
    /// `IMAGE`.
    Image,
    /// `VIDEO`.
    Video,
    /// `DOCUMENT`.
    Document,
}

impl HeaderMedia {
    /// `image`, `video`, `document`: the parameter type a send uses.
    pub fn as_str(self) -> &'static str {
        match self {
            HeaderMedia::Image => "image",
            HeaderMedia::Video => "video",
            HeaderMedia::Document => "document",
        }
    }

    /// From a header `format` or a parameter type, case-insensitive.
    pub fn parse(s: &str) -> Option<Self> {
        match s.to_ascii_lowercase().as_str() {
            "image" => Some(HeaderMedia::Image),
            "video" => Some(HeaderMedia::Video),
            "document" => Some(HeaderMedia::Document),
            _ => None,
        }
    }
}

/// A button of a template as a send sees it (PROVIDER.md §2.4).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ButtonLayout {
    /// `URL`; `dynamic` when the URL ends with `{{1}}` (a send gives the suffix), with the
    /// creation example of the suffix.
    Url {
        /// The URL has a variable.
        dynamic: bool,
        /// `example[0]` of the button: the full example URL or the suffix.
        example: Option<String>,
    },
    /// `QUICK_REPLY` with its label (a send may give a `payload`; the label is the default).
    QuickReply {
        /// The button's text.
        text: String,
    },
    /// `COPY_CODE`: every send gives the `coupon_code`; `example` is the creation example.
    CopyCode {
        /// `example` of the button.
        example: Option<String>,
    },
    /// Any other button (`PHONE_NUMBER`, `OTP`, `FLOW`, `CATALOG`…): takes no parameter here.
    Other(String),
}

/// What a template needs at send time, derived from its components as the provider holds
/// them (`HEADER`/`BODY`/`BUTTONS`, PROVIDER.md §6.1): the sender fills a send from it and the
/// simulator checks a send against it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Layout {
    /// The header, when the template has one.
    pub header: Option<HeaderLayout>,
    /// Count of distinct `{{n}}` in the body.
    pub body_variables: usize,
    /// The buttons in order (a send's button `index` is the position here).
    pub buttons: Vec<ButtonLayout>,
}

impl Layout {
    /// Reads the components of a template (provider shape: `[{type, format?, text?, example?,
    /// buttons?}]`, types and formats case-insensitive). Unknown parts are ignored.
    pub fn from_components(components: &serde_json::Value) -> Layout {
        let mut layout = Layout::default();
        let list = components.as_array().map(Vec::as_slice).unwrap_or_default();
        let kind = |c: &serde_json::Value| {
            c.get("type")
                .and_then(serde_json::Value::as_str)
                .unwrap_or_default()
                .to_ascii_uppercase()
        };
        for c in list {
            match kind(c).as_str() {
                "HEADER" => {
                    let format = c
                        .get("format")
                        .and_then(serde_json::Value::as_str)
                        .unwrap_or("TEXT")
                        .to_ascii_uppercase();
                    layout.header = Some(match format.as_str() {
                        "LOCATION" => HeaderLayout::Location,
                        f => match HeaderMedia::parse(f) {
                            Some(m) => HeaderLayout::Media(m),
                            None => HeaderLayout::Text {
                                variables: parameter_count(
                                    c.get("text")
                                        .and_then(serde_json::Value::as_str)
                                        .unwrap_or_default(),
                                ),
                                example: c["example"]["header_text"][0]
                                    .as_str()
                                    .map(str::to_string),
                            },
                        },
                    });
                }
                "BODY" => {
                    layout.body_variables = parameter_count(
                        c.get("text")
                            .and_then(serde_json::Value::as_str)
                            .unwrap_or_default(),
                    );
                }
                "BUTTONS" => {
                    for b in c["buttons"]
                        .as_array()
                        .map(Vec::as_slice)
                        .unwrap_or_default()
                    {
                        let example = match &b["example"] {
                            serde_json::Value::Array(a) => {
                                a.first().and_then(|e| e.as_str()).map(str::to_string)
                            }
                            serde_json::Value::String(s) => Some(s.clone()),
                            _ => None,
                        };
                        layout.buttons.push(match kind(b).as_str() {
                            "URL" => ButtonLayout::Url {
                                dynamic: b["url"]
                                    .as_str()
                                    .is_some_and(|u| !positional_variables(u).is_empty()),
                                example,
                            },
                            "QUICK_REPLY" => ButtonLayout::QuickReply {
                                text: b["text"].as_str().unwrap_or_default().to_string(),
                            },
                            "COPY_CODE" => ButtonLayout::CopyCode { example },
                            other => ButtonLayout::Other(other.to_string()),
                        });
                    }
                }
                _ => {}
            }
        }
        layout
    }

    /// Fills a send from what the caller gave: the body parameters as given; the header's
    /// variable from `given.header_text`, else the creation example; a media header from
    /// `given.header_media` (none given: no header, the provider refuses the send — the
    /// caller's mistake shows); each dynamic URL button's suffix from `given.url_suffix`
    /// (the spec's `button_param` / var_map `btn:0`), else the suffix of the creation example
    /// (spec "Template (library)": "Without a btn:0 entry the link is sent with the example
    /// from the layout"); each quick reply's payload from its label; each copy-code button's
    /// code from `given.coupon_code`, else its example.
    pub fn fill(&self, given: &Given) -> Filled {
        let header = match &self.header {
            Some(HeaderLayout::Text { variables, example }) if *variables > 0 => given
                .header_text
                .clone()
                .or_else(|| example.clone())
                .map(HeaderValue::Text),
            Some(HeaderLayout::Media(kind)) => {
                given.header_media.as_ref().map(|m| HeaderValue::Media {
                    kind: *kind,
                    link: m.link.clone(),
                    id: m.id.clone(),
                })
            }
            _ => None,
        };
        let mut buttons = Vec::new();
        let mut url_given = given.url_suffix.clone();
        for (i, b) in self.buttons.iter().enumerate() {
            match b {
                ButtonLayout::Url {
                    dynamic: true,
                    example,
                } => {
                    let suffix = url_given
                        .take()
                        .or_else(|| example.as_deref().map(url_example_suffix));
                    if let Some(s) = suffix {
                        buttons.push((i, ButtonValue::UrlSuffix(s)));
                    }
                }
                ButtonLayout::QuickReply { text } => {
                    buttons.push((i, ButtonValue::Payload(text.clone())));
                }
                ButtonLayout::CopyCode { example } => {
                    if let Some(code) = given.coupon_code.clone().or_else(|| example.clone()) {
                        buttons.push((i, ButtonValue::CouponCode(code)));
                    }
                }
                _ => {}
            }
        }
        Filled {
            header,
            body: given.body.clone(),
            buttons,
        }
    }

    /// Fills a send when disparo does not hold the template's layout (sent by name): exactly
    /// what the caller gave, a URL suffix as button 0 (spec: `button_param`).
    pub fn unknown(given: &Given) -> Filled {
        Filled {
            header: given
                .header_media
                .as_ref()
                .map(|m| HeaderValue::Media {
                    kind: m.kind,
                    link: m.link.clone(),
                    id: m.id.clone(),
                })
                .or_else(|| given.header_text.clone().map(HeaderValue::Text)),
            body: given.body.clone(),
            buttons: given
                .url_suffix
                .clone()
                .map(|s| vec![(0, ButtonValue::UrlSuffix(s))])
                .unwrap_or_default(),
        }
    }
}

/// The suffix part of a URL button's creation example: the provider's examples are either the
/// full URL (`https://loja.example/pedido/A1`) or the suffix alone; a full URL keeps its last
/// path segment.
fn url_example_suffix(example: &str) -> String {
    if example.contains("://") {
        example
            .trim_end_matches('/')
            .rsplit('/')
            .next()
            .unwrap_or(example)
            .to_string()
    } else {
        example.to_string()
    }
}

/// Media given for a template header: a public link or an uploaded media id.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct GivenMedia {
    /// The kind the caller means (used when the layout is unknown).
    pub kind: HeaderMedia,
    /// Public HTTP(S) URL the provider fetches.
    pub link: Option<String>,
    /// Uploaded media id.
    pub id: Option<String>,
}

/// What a caller gave for a template send (spec send `template`, the public sender's
/// `variables`/`image_url`/`button_variable`, a var_map rendered from audience columns).
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct Given {
    /// Positional body parameters.
    pub body: Vec<String>,
    /// The header text variable (var_map `header:1`).
    pub header_text: Option<String>,
    /// Header media.
    pub header_media: Option<GivenMedia>,
    /// Suffix of the dynamic URL button (`button_param`, var_map `btn:0`).
    pub url_suffix: Option<String>,
    /// Code of a copy-code button.
    pub coupon_code: Option<String>,
}

/// A header parameter of a send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeaderValue {
    /// `{"type":"text","text":…}`.
    Text(String),
    /// `{"type":"image"|"video"|"document", <kind>: {link|id}}`.
    Media {
        /// The kind.
        kind: HeaderMedia,
        /// Public URL.
        link: Option<String>,
        /// Uploaded media id.
        id: Option<String>,
    },
}

/// A button parameter of a send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ButtonValue {
    /// `sub_type: url`, `{"type":"text","text": suffix}`.
    UrlSuffix(String),
    /// `sub_type: quick_reply`, `{"type":"payload","payload":…}`.
    Payload(String),
    /// `sub_type: copy_code`, `{"type":"coupon_code","coupon_code":…}`.
    CouponCode(String),
}

/// Every component parameter of one template send, complete for its layout.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Filled {
    /// The header parameter.
    pub header: Option<HeaderValue>,
    /// The body parameters.
    pub body: Vec<String>,
    /// `(index, value)` per button that takes a parameter.
    pub buttons: Vec<(usize, ButtonValue)>,
}

#[cfg(test)]
mod layout_tests {
    use super::*;
    use serde_json::json;

    fn sample() -> Layout {
        Layout::from_components(&json!([
            {"type": "HEADER", "format": "TEXT", "text": "Pedido {{1}}", "example": {"header_text": ["A1"]}},
            {"type": "BODY", "text": "Olá {{1}}, seu pedido {{2}} saiu."},
            {"type": "BUTTONS", "buttons": [
                {"type": "URL", "text": "Ver", "url": "https://loja.example/p/{{1}}", "example": ["https://loja.example/p/A1"]},
                {"type": "QUICK_REPLY", "text": "Parar"},
                {"type": "COPY_CODE", "example": "PROMO10"},
                {"type": "PHONE_NUMBER", "text": "Ligar", "phone_number": "+5511999999999"}
            ]}
        ]))
    }

    #[test]
    fn layouts_are_read_from_provider_components() {
        let l = sample();
        assert_eq!(
            l.header,
            Some(HeaderLayout::Text {
                variables: 1,
                example: Some("A1".into())
            })
        );
        assert_eq!(l.body_variables, 2);
        assert_eq!(l.buttons.len(), 4);
        assert!(matches!(
            l.buttons[0],
            ButtonLayout::Url { dynamic: true, .. }
        ));
        let media = Layout::from_components(
            &json!([{"type": "header", "format": "image"}, {"type": "body", "text": "Oi"}]),
        );
        assert_eq!(media.header, Some(HeaderLayout::Media(HeaderMedia::Image)));
    }

    #[test]
    fn every_component_is_filled_with_examples_as_fallback() {
        let l = sample();
        let f = l.fill(&Given {
            body: vec!["Ana".into(), "42".into()],
            ..Given::default()
        });
        assert_eq!(f.header, Some(HeaderValue::Text("A1".into())));
        assert_eq!(
            f.buttons,
            vec![
                (0, ButtonValue::UrlSuffix("A1".into())),
                (1, ButtonValue::Payload("Parar".into())),
                (2, ButtonValue::CouponCode("PROMO10".into())),
            ]
        );
        let f = l.fill(&Given {
            body: vec!["Ana".into(), "42".into()],
            header_text: Some("B2".into()),
            url_suffix: Some("B2".into()),
            coupon_code: Some("NATAL".into()),
            ..Given::default()
        });
        assert_eq!(f.header, Some(HeaderValue::Text("B2".into())));
        assert_eq!(f.buttons[0], (0, ButtonValue::UrlSuffix("B2".into())));
        assert_eq!(f.buttons[2], (2, ButtonValue::CouponCode("NATAL".into())));
        // A static text header takes no parameter.
        let plain = Layout::from_components(
            &json!([{"type": "HEADER", "format": "TEXT", "text": "Oi"}, {"type": "BODY", "text": "x"}]),
        );
        assert_eq!(plain.fill(&Given::default()).header, None);
    }
}
