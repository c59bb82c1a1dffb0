//! Message templates at the simulator (PROVIDER.md §6): create with the provider's validation
//! rules, review (PENDING → APPROVED after `template_review_ms`, unless the control API decides
//! first), list, read, delete; every status change emits `message_template_status_update`.

use super::node::{authenticate, graph_error, resolve, unknown_node, Node};
use super::state::Template;
use super::webhooks::EmissionKind;
use super::Inner;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use base64::Engine;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::Arc;

fn invalid(details: &str, subcode: Option<i64>) -> Response {
    graph_error(
        StatusCode::BAD_REQUEST,
        100,
        "Invalid parameter",
        Some(details),
        subcode,
    )
}

fn waba_of(
    inner: &Inner,
    headers: &HeaderMap,
    query: &HashMap<String, String>,
    node: &str,
) -> Result<String, Response> {
    let business = authenticate(inner, headers, query)?;
    match resolve(inner, &business, node) {
        Some(Node::Waba) => Ok(node.to_string()),
        _ => Err(unknown_node(node)),
    }
}

/// A media header's `example.header_handle` must be a finished resumable upload of the
/// business (D-058), of the header's kind (an IMAGE header, an image): the provider refuses
/// any other string.
fn check_header_handle(inner: &Inner, business: &str, components: &Value) -> Result<(), String> {
    let Some(header) = components.as_array().and_then(|cs| {
        cs.iter().find(|c| {
            c["type"]
                .as_str()
                .is_some_and(|t| t.eq_ignore_ascii_case("HEADER"))
        })
    }) else {
        return Ok(());
    };
    let format = header["format"]
        .as_str()
        .unwrap_or("TEXT")
        .to_ascii_uppercase();
    let wanted = match format.as_str() {
        "IMAGE" => "image/",
        "VIDEO" => "video/",
        "DOCUMENT" => "application/",
        _ => return Ok(()),
    };
    let handle = header["example"]["header_handle"][0]
        .as_str()
        .unwrap_or_default();
    match inner.uploads.get(handle) {
        Some(u) if u.business_id == business && u.bytes.is_some() => {
            if u.file_type.starts_with(wanted) {
                Ok(())
            } else {
                Err(format!(
                    "The {format} header's example is a {}.",
                    u.file_type
                ))
            }
        }
        _ => Err("example.header_handle is not a valid upload handle.".into()),
    }
}

/// The checks the provider makes when a template is created (§6.2); the first problem found.
pub(crate) fn check_components(category: &str, components: &Value) -> Result<usize, String> {
    let Some(list) = components.as_array() else {
        return Err("components must be an array".into());
    };
    let of_type = |t: &'static str| {
        list.iter().filter(move |c| {
            c["type"]
                .as_str()
                .is_some_and(|x| x.eq_ignore_ascii_case(t))
        })
    };
    if of_type("BODY").count() != 1 {
        return Err("A template needs exactly one BODY component".into());
    }
    let body = of_type("BODY").next().expect("counted");
    let text = body["text"].as_str().unwrap_or_default();
    if let Some(p) = engine::template::body_problems(text).first() {
        return Err(p.provider_text().into());
    }
    let sorted_len = engine::template::parameter_count(text);
    let sorted: Vec<u32> = (1..=sorted_len as u32).collect();
    if !sorted.is_empty() {
        let examples = body["example"]["body_text"][0]
            .as_array()
            .map(Vec::len)
            .unwrap_or(0);
        if examples != sorted.len() {
            return Err(format!(
                "BODY has {} variables but example.body_text gives {examples} values",
                sorted.len()
            ));
        }
    }
    if of_type("HEADER").count() > 1
        || of_type("FOOTER").count() > 1
        || of_type("BUTTONS").count() > 1
    {
        return Err("At most one HEADER, FOOTER and BUTTONS component".into());
    }
    if let Some(h) = of_type("HEADER").next() {
        match h["format"]
            .as_str()
            .unwrap_or("TEXT")
            .to_ascii_uppercase()
            .as_str()
        {
            "TEXT" => {
                let t = h["text"].as_str().unwrap_or_default();
                if t.is_empty() || t.chars().count() > 60 {
                    return Err("HEADER text must have 1 to 60 characters".into());
                }
                let n = engine::template::parameter_count(t);
                if n > 1 {
                    return Err("HEADER text may have at most one variable".into());
                }
                if n == 1
                    && h["example"]["header_text"]
                        .as_array()
                        .is_none_or(|a| a.is_empty())
                {
                    return Err("HEADER variable needs example.header_text".into());
                }
            }
            "IMAGE" | "VIDEO" | "DOCUMENT" => {
                if h["example"]["header_handle"]
                    .as_array()
                    .is_none_or(|a| a.is_empty())
                {
                    return Err("A media HEADER needs example.header_handle".into());
                }
            }
            "LOCATION" => {}
            other => return Err(format!("Unknown HEADER format {other}")),
        }
    }
    if let Some(f) = of_type("FOOTER").next() {
        let t = f["text"].as_str().unwrap_or_default();
        if t.chars().count() > 60 || !engine::template::positional_variables(t).is_empty() {
            return Err("FOOTER text must have at most 60 characters and no variables".into());
        }
    }
    if let Some(b) = of_type("BUTTONS").next() {
        let buttons = b["buttons"].as_array().cloned().unwrap_or_default();
        if buttons.is_empty() || buttons.len() > 10 {
            return Err("BUTTONS needs 1 to 10 buttons".into());
        }
        let mut urls = 0;
        for button in &buttons {
            let kind = button["type"]
                .as_str()
                .unwrap_or_default()
                .to_ascii_uppercase();
            let t = button["text"].as_str().unwrap_or_default();
            if kind != "OTP" && kind != "COPY_CODE" && (t.is_empty() || t.chars().count() > 25) {
                return Err("Button text must have 1 to 25 characters".into());
            }
            if kind == "URL" {
                urls += 1;
                let url = button["url"].as_str().unwrap_or_default();
                let n = engine::template::parameter_count(url);
                if n > 1 || (n == 1 && !url.trim_end().ends_with("{{1}}")) {
                    return Err(
                        "A URL button may have one variable, {{1}}, at the end of the URL".into(),
                    );
                }
                if n == 1 && button["example"].as_array().is_none_or(|a| a.is_empty()) {
                    return Err("A URL button with a variable needs an example".into());
                }
            }
        }
        if urls > 2 {
            return Err("At most two URL buttons".into());
        }
    }
    if category == "AUTHENTICATION" && of_type("BUTTONS").next().is_none() {
        return Err("AUTHENTICATION templates need an OTP button".into());
    }
    Ok(sorted.len())
}

/// Why the provider refuses a template send's parameters (PROVIDER.md §2.4, §7.1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SendProblem {
    /// A component's parameter count differs from the template's variables: 132000.
    Count(String),
    /// A parameter the template needs is absent: 131008 (132018 from v23.0).
    Missing(String),
    /// A parameter's type does not match the template (a header media of another kind, text
    /// for a media header, a button of another sub-type): 132012 (132018 from v23.0).
    Format(String),
}

impl SendProblem {
    /// `(code, message, details)` as the provider answers at API version `major` ("since v23.0,
    /// send-time template-component parameter problems are reported as 132018", §2.4; a body
    /// count mismatch keeps 132000, D-071).
    pub(crate) fn answer(&self, major: u32) -> (i64, &'static str, String) {
        match self {
            SendProblem::Count(d) => (
                132000,
                "(#132000) Number of parameters does not match the expected number of params",
                d.clone(),
            ),
            SendProblem::Missing(d) | SendProblem::Format(d) if major >= 23 => (
                132018,
                "(#132018) There was an issue with the parameters in your template.",
                d.clone(),
            ),
            SendProblem::Missing(d) => {
                (131008, "(#131008) Required parameter is missing", d.clone())
            }
            SendProblem::Format(d) => (
                132012,
                "(#132012) Parameter format does not match format in the created template",
                d.clone(),
            ),
        }
    }
}

/// Checks a template send's components against the template's layout like the provider:
/// the header the template declares (its variable, or media of its format), the body's
/// parameter count and types, each button's parameter by `index` and `sub_type` (a dynamic
/// URL needs its suffix, a copy-code button its `coupon_code`).
pub(crate) fn check_send(
    layout: &engine::template::Layout,
    sent: &crate::wire::TemplatePayload,
) -> Result<(), SendProblem> {
    use crate::wire::Parameter;
    use engine::template::{ButtonLayout, HeaderLayout};
    let of = |kind: &'static str| {
        sent.components
            .iter()
            .filter(move |c| c.kind.eq_ignore_ascii_case(kind))
    };
    // Header.
    let headers: Vec<_> = of("header").collect();
    if headers.len() > 1 {
        return Err(SendProblem::Count(
            "header: more than one header component".into(),
        ));
    }
    let header = headers.first().map(|c| c.parameters.as_slice());
    match (&layout.header, header) {
        (Some(HeaderLayout::Text { variables, .. }), h) => {
            let given = h.map_or(0, <[Parameter]>::len);
            if *variables > 0 && given == 0 {
                return Err(SendProblem::Missing(
                    "header: the parameter of the header text is required".into(),
                ));
            }
            if given != *variables {
                return Err(SendProblem::Count(format!(
                    "header: number of localizable_params ({given}) does not match the expected number of params ({variables})"
                )));
            }
            if let Some(p) = h.and_then(<[Parameter]>::first) {
                if !matches!(p, Parameter::Text { .. }) {
                    return Err(SendProblem::Format(
                        "header: the template's header format is TEXT".into(),
                    ));
                }
            }
        }
        (Some(HeaderLayout::Media(kind)), None) => {
            return Err(SendProblem::Missing(format!(
                "header: a {} parameter is required",
                kind.as_str()
            )))
        }
        (Some(HeaderLayout::Media(kind)), Some(params)) => {
            let [p] = params else {
                return Err(SendProblem::Count(format!(
                    "header: number of localizable_params ({}) does not match the expected number of params (1)",
                    params.len()
                )));
            };
            let (given, media) = match p {
                Parameter::Image { image } => ("image", image),
                Parameter::Video { video } => ("video", video),
                Parameter::Document { document } => ("document", document),
                _ => {
                    return Err(SendProblem::Format(format!(
                        "header: the template's header format is {}",
                        kind.as_str().to_ascii_uppercase()
                    )))
                }
            };
            if given != kind.as_str() {
                return Err(SendProblem::Format(format!(
                    "header: expected {}, got {given}",
                    kind.as_str()
                )));
            }
            if media.id.is_some() == media.link.is_some() {
                return Err(SendProblem::Missing(format!(
                    "header: {given} needs exactly one of id or link"
                )));
            }
        }
        (Some(HeaderLayout::Location), None) => {
            return Err(SendProblem::Missing(
                "header: a location parameter is required".into(),
            ))
        }
        (Some(HeaderLayout::Location), Some(_)) => {}
        (None, Some(params)) => {
            return Err(SendProblem::Count(format!(
                "header: number of localizable_params ({}) does not match the expected number of params (0)",
                params.len()
            )))
        }
        (None, None) => {}
    }
    // Body.
    let given = sent.body_parameter_count();
    if given != layout.body_variables {
        return Err(SendProblem::Count(format!(
            "body: number of localizable_params ({given}) does not match the expected number of params ({})",
            layout.body_variables
        )));
    }
    for c in of("body") {
        if c.parameters.iter().any(|p| {
            !matches!(
                p,
                Parameter::Text { .. } | Parameter::Currency { .. } | Parameter::DateTime { .. }
            )
        }) {
            return Err(SendProblem::Format(
                "body: parameters must be text, currency or date_time".into(),
            ));
        }
    }
    // Buttons.
    let mut seen = vec![false; layout.buttons.len()];
    for c in of("button") {
        let index = c.index.as_deref().and_then(|i| i.parse::<usize>().ok());
        let Some(i) = index.filter(|i| *i < layout.buttons.len()) else {
            return Err(SendProblem::Count(format!(
                "buttons: the template has no button at index {}",
                c.index.as_deref().unwrap_or("(none)")
            )));
        };
        let sub = c
            .sub_type
            .as_deref()
            .unwrap_or_default()
            .to_ascii_lowercase();
        let ok = match (&layout.buttons[i], sub.as_str(), c.parameters.as_slice()) {
            (ButtonLayout::Url { dynamic: true, .. }, "url", [Parameter::Text { .. }]) => true,
            (ButtonLayout::QuickReply { .. }, "quick_reply", [Parameter::Payload { .. }]) => true,
            (ButtonLayout::CopyCode { .. }, "copy_code", [Parameter::CouponCode { .. }]) => true,
            (ButtonLayout::Other(k), s, _) => k.eq_ignore_ascii_case(s),
            _ => false,
        };
        if !ok {
            return Err(SendProblem::Format(format!(
                "buttons: parameter of button {i} does not match the template's button (sub_type {sub})"
            )));
        }
        seen[i] = true;
    }
    for (i, b) in layout.buttons.iter().enumerate() {
        let needs = matches!(
            b,
            ButtonLayout::Url { dynamic: true, .. } | ButtonLayout::CopyCode { .. }
        );
        if needs && !seen[i] {
            return Err(SendProblem::Missing(format!(
                "buttons: the parameter of button {i} is required"
            )));
        }
    }
    Ok(())
}

fn valid_language(l: &str) -> bool {
    let (lang, region) = match l.split_once('_') {
        Some((a, b)) => (a, Some(b)),
        None => (l, None),
    };
    (2..=3).contains(&lang.len())
        && lang.bytes().all(|b| b.is_ascii_lowercase())
        && region.is_none_or(|r| r.len() == 2 && r.bytes().all(|b| b.is_ascii_uppercase()))
}

pub(crate) async fn create(
    State(inner): State<Arc<Inner>>,
    Path((_, node)): Path<(String, String)>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let waba_id = match waba_of(&inner, &headers, &query, &node) {
        Ok(w) => w,
        Err(r) => return r,
    };
    let Ok(req) = serde_json::from_slice::<Value>(&body) else {
        return invalid("The request body is not valid JSON.", None);
    };
    let name = req["name"].as_str().unwrap_or_default();
    if name.is_empty()
        || name.len() > 512
        || !name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
    {
        return invalid(
            "Template name may only contain lowercase letters, numbers and underscores (max 512).",
            None,
        );
    }
    let language = req["language"].as_str().unwrap_or_default();
    if !valid_language(language) {
        return invalid(&format!("Unsupported language code: {language}"), None);
    }
    let category = req["category"]
        .as_str()
        .unwrap_or_default()
        .to_ascii_uppercase();
    if !["MARKETING", "UTILITY", "AUTHENTICATION"].contains(&category.as_str()) {
        return invalid(
            "category must be MARKETING, UTILITY or AUTHENTICATION.",
            None,
        );
    }
    let components = req.get("components").cloned().unwrap_or(Value::Null);
    if let Err(reason) = check_components(&category, &components) {
        return invalid(&reason, Some(2388043));
    }
    let business = match authenticate(&inner, &headers, &query) {
        Ok(b) => b,
        Err(r) => return r,
    };
    if let Err(reason) = check_header_handle(&inner, &business, &components) {
        return invalid(&reason, Some(2388043));
    }
    let layout = engine::template::Layout::from_components(&components);
    let Some(mut waba) = inner.wabas.get_mut(&waba_id) else {
        return unknown_node(&node);
    };
    if waba
        .templates
        .iter()
        .any(|t| t.name == name && t.language == language)
    {
        return graph_error(
            StatusCode::BAD_REQUEST,
            100,
            "Invalid parameter",
            Some("Content in This Language Already Exists"),
            Some(2388024),
        );
    }
    let id = inner.digits(16);
    waba.templates.push(Template {
        id: id.clone(),
        name: name.to_string(),
        language: language.to_string(),
        category: category.clone(),
        status: "PENDING".into(),
        components,
        layout,
        edits: Vec::new(),
    });
    drop(waba);
    let review = inner.cfg.template_review_ms;
    let (inner2, id2) = (inner.clone(), id.clone());
    tokio::spawn(async move {
        tokio::time::sleep(std::time::Duration::from_millis(review)).await;
        set_status(&inner2, &id2, "APPROVED", None, true);
    });
    Json(json!({"id": id, "status": "PENDING", "category": category})).into_response()
}

/// Moves a template to `status` and emits `message_template_status_update`. With
/// `only_if_pending`, nothing happens unless it is still PENDING (the review timer).
/// Returns false when the template does not exist.
pub(crate) fn set_status(
    inner: &Inner,
    template_id: &str,
    status: &str,
    reason: Option<&str>,
    only_if_pending: bool,
) -> bool {
    let mut found = None;
    for mut w in inner.wabas.iter_mut() {
        let waba_id = w.id.clone();
        let business = w.business_id.clone();
        if let Some(t) = w.templates.iter_mut().find(|t| t.id == template_id) {
            if only_if_pending && t.status != "PENDING" {
                return true;
            }
            if ["APPROVED", "REJECTED", "PAUSED", "DISABLED", "PENDING"].contains(&status) {
                t.status = status.to_string();
            }
            if status == "REINSTATED" || status == "UNPAUSED" {
                t.status = "APPROVED".into();
            }
            found = Some((waba_id, business, t.clone()));
            break;
        }
    }
    let Some((waba_id, business, t)) = found else {
        return false;
    };
    let reason = reason.map(str::to_string).unwrap_or_else(|| {
        if status == "REJECTED" {
            "INVALID_FORMAT".into()
        } else {
            "NONE".into()
        }
    });
    let mut value = json!({
        "event": status,
        "message_template_id": t.id.parse::<i64>().unwrap_or_default(),
        "message_template_name": t.name,
        "message_template_language": t.language,
        "reason": reason,
        "message_template_category": t.category,
    });
    match status {
        "REJECTED" if reason == "INVALID_FORMAT" => {
            value["rejection_info"] = json!({"reason": "The template format is invalid.", "recommendation": "Review the variables and examples."});
        }
        "PAUSED" => {
            value["other_info"] = json!({"title": "FIRST_PAUSE", "description": "Your message template has been paused for 3 hours due to low quality."})
        }
        "DISABLED" => value["disable_info"] = json!({"disable_date": "today"}),
        _ => {}
    }
    inner.emit_now(
        &business,
        waba_id,
        EmissionKind::Change {
            field: "message_template_status_update",
            value,
        },
    );
    true
}

fn template_json(t: &Template) -> Value {
    json!({
        "name": t.name,
        "parameter_format": "POSITIONAL",
        "components": t.components,
        "language": t.language,
        "status": t.status,
        "category": t.category,
        "id": t.id,
    })
}

pub(crate) fn get_one(inner: &Inner, waba_id: &str, id: &str) -> Response {
    let found = inner
        .wabas
        .get(waba_id)
        .and_then(|w| w.templates.iter().find(|t| t.id == id).cloned());
    match found {
        Some(t) => Json(template_json(&t)).into_response(),
        None => unknown_node(id),
    }
}

pub(crate) async fn list(
    State(inner): State<Arc<Inner>>,
    Path((_, node)): Path<(String, String)>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    let waba_id = match waba_of(&inner, &headers, &query, &node) {
        Ok(w) => w,
        Err(r) => return r,
    };
    let all: Vec<Template> = inner
        .wabas
        .get(&waba_id)
        .map(|w| w.templates.clone())
        .unwrap_or_default();
    let filtered: Vec<&Template> = all
        .iter()
        .filter(|t| {
            query
                .get("status")
                .is_none_or(|s| s.eq_ignore_ascii_case(&t.status))
        })
        .filter(|t| {
            query
                .get("name")
                .is_none_or(|n| t.name.contains(n.as_str()))
        })
        .collect();
    let b64 = base64::engine::general_purpose::STANDARD;
    let start = query
        .get("after")
        .and_then(|a| b64.decode(a).ok())
        .and_then(|b| String::from_utf8(b).ok())
        .and_then(|s| s.parse::<usize>().ok())
        .unwrap_or(0);
    let limit = query
        .get("limit")
        .and_then(|l| l.parse::<usize>().ok())
        .unwrap_or(25)
        .clamp(1, 100);
    let page: Vec<Value> = filtered
        .iter()
        .skip(start)
        .take(limit)
        .map(|t| template_json(t))
        .collect();
    let end = start + page.len();
    let mut paging = json!({"cursors": {"before": b64.encode(start.to_string()), "after": b64.encode(end.saturating_sub(1).max(start).to_string())}});
    if end < filtered.len() {
        paging["cursors"]["after"] = json!(b64.encode(end.to_string()));
        paging["next"] = json!(format!(
            "?limit={limit}&after={}",
            b64.encode(end.to_string())
        ));
    }
    Json(json!({"data": page, "paging": paging})).into_response()
}

/// `POST /{template_id}` `{category?, components?}` (PROVIDER.md §6.3): edits a template of
/// one of the caller's WABAs. Only `APPROVED`, `REJECTED` and `PAUSED` templates; an approved
/// one at most once per 24 h and 10 times per 30 days, and never into another category. The
/// components replace the old ones (checked as at creation); the template goes back to
/// `PENDING` and is reviewed again (the review timer, then `message_template_status_update`).
/// Answers `{"success": true}`.
pub(crate) fn edit(inner: &Arc<Inner>, waba_id: &str, template_id: &str, body: &[u8]) -> Response {
    let Ok(req) = serde_json::from_slice::<Value>(body) else {
        return invalid("The request body is not valid JSON.", None);
    };
    let Some(mut waba) = inner.wabas.get_mut(waba_id) else {
        return unknown_node(template_id);
    };
    let business_id = waba.business_id.clone();
    let Some(t) = waba.templates.iter_mut().find(|t| t.id == template_id) else {
        return unknown_node(template_id);
    };
    if !["APPROVED", "REJECTED", "PAUSED"].contains(&t.status.as_str()) {
        return invalid(
            &format!("A template with status {} can't be edited.", t.status),
            None,
        );
    }
    let category = match req.get("category").and_then(Value::as_str) {
        Some(c) => c.to_ascii_uppercase(),
        None => t.category.clone(),
    };
    if !["MARKETING", "UTILITY", "AUTHENTICATION"].contains(&category.as_str()) {
        return invalid(
            "category must be MARKETING, UTILITY or AUTHENTICATION.",
            None,
        );
    }
    let now = super::now_ms();
    if t.status == "APPROVED" {
        if category != t.category {
            return invalid(
                "The category of an approved template can't be changed.",
                None,
            );
        }
        const DAY: i64 = 24 * 3600 * 1000;
        let last_day = t.edits.iter().filter(|&&e| now - e < DAY).count();
        let last_month = t.edits.iter().filter(|&&e| now - e < 30 * DAY).count();
        if last_day >= 1 || last_month >= 10 {
            return invalid(
                "An approved template can be edited once per 24 hours and 10 times per 30 days.",
                None,
            );
        }
    }
    let components = match req.get("components") {
        Some(c) => c.clone(),
        None => t.components.clone(),
    };
    if let Err(reason) = check_components(&category, &components) {
        return invalid(&reason, Some(2388043));
    }
    if req.get("components").is_some() {
        if let Err(reason) = check_header_handle(inner, &business_id, &components) {
            return invalid(&reason, Some(2388043));
        }
    }
    t.category = category;
    t.layout = engine::template::Layout::from_components(&components);
    t.components = components;
    t.status = "PENDING".into();
    t.edits.push(now);
    let id = t.id.clone();
    drop(waba);
    let review = inner.cfg.template_review_ms;
    let inner2 = inner.clone();
    tokio::spawn(async move {
        tokio::time::sleep(std::time::Duration::from_millis(review)).await;
        set_status(&inner2, &id, "APPROVED", None, true);
    });
    Json(json!({"success": true})).into_response()
}

pub(crate) async fn delete(
    State(inner): State<Arc<Inner>>,
    Path((_, node)): Path<(String, String)>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    let waba_id = match waba_of(&inner, &headers, &query, &node) {
        Ok(w) => w,
        Err(r) => return r,
    };
    let Some(name) = query.get("name").filter(|n| !n.is_empty()) else {
        return invalid("The parameter name is required.", None);
    };
    let Some(mut waba) = inner.wabas.get_mut(&waba_id) else {
        return unknown_node(&node);
    };
    let hsm_id = query.get("hsm_id");
    let matches = |t: &Template| t.name == *name && hsm_id.is_none_or(|h| *h == t.id);
    if !waba.templates.iter().any(matches) {
        return invalid(
            &format!("Message template \"{name}\" not found."),
            Some(2593002),
        );
    }
    if waba
        .templates
        .iter()
        .any(|t| matches(t) && t.status == "DISABLED")
    {
        return invalid("Disabled templates can't be deleted.", None);
    }
    waba.templates.retain(|t| !matches(t));
    Json(json!({"success": true})).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(text: &str, examples: &[&str]) -> Value {
        json!([{"type": "BODY", "text": text, "example": {"body_text": [examples]}}])
    }

    #[test]
    fn the_provider_rules_for_template_bodies() {
        assert_eq!(
            check_components(
                "MARKETING",
                &body("Olá {{1}}, seu pedido {{2}} saiu.", &["Ana", "12"])
            ),
            Ok(2)
        );
        assert!(
            check_components(
                "MARKETING",
                &body("Olá {{1}}, seu pedido {{3}} saiu.", &["Ana", "12"])
            )
            .is_err(),
            "gap"
        );
        assert!(
            check_components("MARKETING", &body("{{1}}, seu pedido saiu.", &["Ana"])).is_err(),
            "starts with a variable"
        );
        assert!(
            check_components("MARKETING", &body("Seu pedido saiu {{1}}", &["Ana"])).is_err(),
            "ends with a variable"
        );
        assert!(
            check_components("MARKETING", &body("Olá {{1}} {{2}} tudo bem?", &["a", "b"])).is_err(),
            "adjacent"
        );
        assert!(
            check_components("MARKETING", &body("Olá {{1}}, tudo bem?", &[])).is_err(),
            "missing example"
        );
        assert!(
            check_components("MARKETING", &body(&"a".repeat(1025), &[])).is_err(),
            "too long"
        );
        let url_no_example = json!([{"type": "BODY", "text": "Oi"}, {"type": "BUTTONS", "buttons": [{"type": "URL", "text": "Ver", "url": "https://x.com/{{1}}"}]}]);
        assert!(check_components("MARKETING", &url_no_example).is_err());
        let url_ok = json!([{"type": "BODY", "text": "Oi"}, {"type": "BUTTONS", "buttons": [{"type": "URL", "text": "Ver", "url": "https://x.com/{{1}}", "example": ["abc"]}]}]);
        assert_eq!(check_components("MARKETING", &url_ok), Ok(0));
    }

    #[test]
    fn language_codes() {
        assert!(valid_language("pt_BR") && valid_language("en") && valid_language("en_US"));
        assert!(!valid_language("pt-br") && !valid_language("") && !valid_language("portuguese"));
    }
}
