//! Control routes that make the simulator emit the provider's other webhook fields (issue 16):
//! `business_capability_update`, `message_template_quality_update`,
//! `template_category_update`, `phone_number_name_update`, `account_alerts` and
//! `user_preferences`, in the shapes of PROVIDER.md §9.6–§9.7, signed like every webhook.

use super::webhooks::EmissionKind;
use super::Inner;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::Arc;

/// The routes (merged into the control API).
pub(crate) fn routes() -> Router<Arc<Inner>> {
    Router::new()
        .route("/_sim/wabas/{id}/capability", post(post_capability))
        .route("/_sim/wabas/{id}/alert", post(post_alert))
        .route("/_sim/templates/{id}/quality", post(post_template_quality))
        .route(
            "/_sim/templates/{id}/category",
            post(post_template_category),
        )
        .route("/_sim/numbers/{id}/name", post(post_name))
        .route("/_sim/numbers/{id}/preferences", post(post_preferences))
}

fn error(status: StatusCode, message: String) -> Response {
    (status, Json(json!({"message": message}))).into_response()
}

fn emit(
    inner: &Inner,
    business: &str,
    waba: String,
    field: &'static str,
    value: Value,
) -> Response {
    if !inner.emit_now(
        business,
        waba,
        EmissionKind::Change {
            field,
            value: value.clone(),
        },
    ) {
        return error(StatusCode::NOT_FOUND, "business not found".into());
    }
    Json(json!({"data": value})).into_response()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Capability {
    max_daily_conversations_per_business: i64,
    max_phone_numbers_per_business: Option<i64>,
}

/// `POST /_sim/wabas/{id}/capability` `{max_daily_conversations_per_business (-1 unlimited),
/// max_phone_numbers_per_business?}`: emits `business_capability_update`.
async fn post_capability(
    State(inner): State<Arc<Inner>>,
    Path(id): Path<String>,
    Json(req): Json<Capability>,
) -> Response {
    let Some(business) = inner.wabas.get(&id).map(|w| w.business_id.clone()) else {
        return error(StatusCode::NOT_FOUND, "waba not found".into());
    };
    let mut value =
        json!({"max_daily_conversations_per_business": req.max_daily_conversations_per_business});
    if let Some(n) = req.max_phone_numbers_per_business {
        value["max_phone_numbers_per_business"] = json!(n);
    }
    emit(&inner, &business, id, "business_capability_update", value)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Alert {
    #[serde(default)]
    severity: Option<String>,
    #[serde(default)]
    status: Option<String>,
    #[serde(rename = "type", default)]
    kind: Option<String>,
    #[serde(default)]
    description: Option<String>,
}

/// `POST /_sim/wabas/{id}/alert` `{severity?, status?, type?, description?}`: emits
/// `account_alerts` about the WABA.
async fn post_alert(
    State(inner): State<Arc<Inner>>,
    Path(id): Path<String>,
    Json(req): Json<Alert>,
) -> Response {
    let Some(business) = inner.wabas.get(&id).map(|w| w.business_id.clone()) else {
        return error(StatusCode::NOT_FOUND, "waba not found".into());
    };
    let value = json!({
        "entity_type": "WABA",
        "entity_id": id,
        "alert_info": {
            "alert_severity": req.severity.unwrap_or_else(|| "WARNING".into()),
            "alert_status": req.status.unwrap_or_else(|| "ACTIVE".into()),
            "alert_type": req.kind.unwrap_or_else(|| "INCREASED_CAPABILITIES_ELIGIBILITY_DEFERRED".into()),
            "alert_description": req.description.unwrap_or_else(|| "Your business is not eligible for increased messaging limits yet.".into()),
        }
    });
    emit(&inner, &business, id, "account_alerts", value)
}

/// The WABA, business, name, language and category of a template, by id.
fn template_of(inner: &Inner, id: &str) -> Option<(String, String, String, String, String)> {
    inner.wabas.iter().find_map(|w| {
        w.templates.iter().find(|t| t.id == id).map(|t| {
            (
                w.id.clone(),
                w.business_id.clone(),
                t.name.clone(),
                t.language.clone(),
                t.category.clone(),
            )
        })
    })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TemplateQuality {
    quality: String,
    previous: Option<String>,
}

/// `POST /_sim/templates/{id}/quality` `{quality: GREEN|YELLOW|RED|UNKNOWN, previous?}`: emits
/// `message_template_quality_update` (§9.6; the template id a JSON integer).
async fn post_template_quality(
    State(inner): State<Arc<Inner>>,
    Path(id): Path<String>,
    Json(req): Json<TemplateQuality>,
) -> Response {
    let quality = req.quality.to_ascii_uppercase();
    if !["GREEN", "YELLOW", "RED", "UNKNOWN"].contains(&quality.as_str()) {
        return error(
            StatusCode::BAD_REQUEST,
            "quality must be GREEN, YELLOW, RED or UNKNOWN".into(),
        );
    }
    let Some((waba, business, name, language, _)) = template_of(&inner, &id) else {
        return error(StatusCode::NOT_FOUND, "template not found".into());
    };
    let value = json!({
        "previous_quality_score": req.previous.unwrap_or_else(|| "GREEN".into()).to_ascii_uppercase(),
        "new_quality_score": quality,
        "message_template_id": id.parse::<i64>().map(Value::from).unwrap_or(Value::String(id.clone())),
        "message_template_name": name,
        "message_template_language": language,
    });
    emit(
        &inner,
        &business,
        waba,
        "message_template_quality_update",
        value,
    )
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TemplateCategory {
    category: String,
}

/// `POST /_sim/templates/{id}/category` `{category}`: the provider recategorises the template
/// (it keeps the new category) and emits `template_category_update`.
async fn post_template_category(
    State(inner): State<Arc<Inner>>,
    Path(id): Path<String>,
    Json(req): Json<TemplateCategory>,
) -> Response {
    let category = req.category.to_ascii_uppercase();
    if !["MARKETING", "UTILITY", "AUTHENTICATION"].contains(&category.as_str()) {
        return error(
            StatusCode::BAD_REQUEST,
            "category must be MARKETING, UTILITY or AUTHENTICATION".into(),
        );
    }
    let Some((waba, business, name, language, previous)) = template_of(&inner, &id) else {
        return error(StatusCode::NOT_FOUND, "template not found".into());
    };
    if let Some(mut w) = inner.wabas.get_mut(&waba) {
        if let Some(t) = w.templates.iter_mut().find(|t| t.id == id) {
            t.category = category.clone();
        }
    }
    let value = json!({
        "message_template_id": id.parse::<i64>().map(Value::from).unwrap_or(Value::String(id.clone())),
        "message_template_name": name,
        "message_template_language": language,
        "previous_category": previous,
        "new_category": category,
    });
    emit(&inner, &business, waba, "template_category_update", value)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NameUpdate {
    name: String,
    decision: Option<String>,
    rejection_reason: Option<String>,
}

/// `POST /_sim/numbers/{id}/name` `{name, decision? (APPROVED), rejection_reason?}`: an
/// approved name becomes the number's verified name; emits `phone_number_name_update`.
async fn post_name(
    State(inner): State<Arc<Inner>>,
    Path(id): Path<String>,
    Json(req): Json<NameUpdate>,
) -> Response {
    let decision = req
        .decision
        .unwrap_or_else(|| "APPROVED".into())
        .to_ascii_uppercase();
    let Some(mut n) = inner.numbers.get_mut(&id) else {
        return error(StatusCode::NOT_FOUND, "number not found".into());
    };
    if decision == "APPROVED" {
        n.verified_name = req.name.clone();
    }
    let (business, waba, display) = (
        n.business_id.clone(),
        n.waba_id.clone(),
        n.display_phone_number.clone(),
    );
    drop(n);
    let mut value = json!({
        "display_phone_number": display.chars().filter(char::is_ascii_digit).collect::<String>(),
        "decision": decision,
        "requested_verified_name": req.name,
    });
    if let Some(r) = req.rejection_reason {
        value["rejection_reason"] = json!(r);
    }
    emit(&inner, &business, waba, "phone_number_name_update", value)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Preferences {
    from: String,
    value: String,
}

/// `POST /_sim/numbers/{id}/preferences` `{from, value: stop|resume}`: the user stops (or
/// resumes) marketing messages from the business; emits `user_preferences`.
async fn post_preferences(
    State(inner): State<Arc<Inner>>,
    Path(id): Path<String>,
    Json(req): Json<Preferences>,
) -> Response {
    let value = req.value.to_ascii_lowercase();
    if !["stop", "resume"].contains(&value.as_str()) {
        return error(
            StatusCode::BAD_REQUEST,
            "value must be stop or resume".into(),
        );
    }
    let Some(n) = inner.numbers.get(&id) else {
        return error(StatusCode::NOT_FOUND, "number not found".into());
    };
    let (business, waba, display) = (
        n.business_id.clone(),
        n.waba_id.clone(),
        n.display_phone_number.clone(),
    );
    drop(n);
    let from: String = req.from.chars().filter(char::is_ascii_digit).collect();
    let detail = if value == "stop" {
        "User requested to stop marketing messages"
    } else {
        "User requested to resume marketing messages"
    };
    let body = json!({
        "messaging_product": "whatsapp",
        "metadata": {"display_phone_number": display.chars().filter(char::is_ascii_digit).collect::<String>(), "phone_number_id": id},
        "contacts": [{"wa_id": from, "user_id": super::webhooks::bsuid(&from)}],
        "user_preferences": [{"wa_id": from, "detail": detail, "category": "marketing_messages", "value": value, "timestamp": super::now_ms() / 1000}]
    });
    emit(&inner, &business, waba, "user_preferences", body)
}
