//! The one `template` object of a send (issue 55, D-127): `POST /messages` of the account
//! API and of the public sender, `POST /groups/{id}/messages` and MCP's `send_template` read
//! the same shape, each surface adding only its own fields (`dry_run`, the number).

use crate::error::ApiError;
use serde::Deserialize;

/// A template and its values: a library template by `id`, or a template by `name` (with
/// `language`); filled with `vars` (the library template's var_map columns, `{"nome": "Ana"}`)
/// or with `params` (body parameters in order) and the header, button and coupon values, not
/// both. By `name` with `vars`, the template must be in the library. Errors (422):
/// `ambiguous_template`, `required`, `invalid_template_name`, `invalid_language`,
/// `invalid_param`, `invalid_media_type`, `invalid_header_media`.
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"name": "pedido_enviado", "language": "pt_BR", "params": ["Ana", "4521"]}))]
pub struct TemplateIn {
    /// A library template's id…
    id: Option<i64>,
    /// …or a template's name at the provider.
    #[schema(pattern = "^[a-z0-9_]+$")]
    name: Option<String>,
    /// Locale of a template by name (`pt_BR` by default; the public sender: the only one
    /// approved on the user's numbers, else `pt_BR`).
    #[schema(pattern = "^[A-Za-z_-]{1,16}$")]
    language: Option<String>,
    /// Values by column of the library template's var_map (not with `params`).
    #[serde(default)]
    vars: std::collections::BTreeMap<String, String>,
    /// Body parameters in order, 1 to 1,024 characters each.
    #[serde(default)]
    params: Vec<String>,
    /// Suffix of the dynamic URL button.
    button_param: Option<String>,
    /// The variable of a text header (D-071).
    header_param: Option<String>,
    /// Header media of an image, video or document header: `{type, link}` or `{type, id}`
    /// (an id from `POST /media` at the provider; D-071).
    header_media: Option<HeaderMediaIn>,
    /// Code of a copy-code button (D-071).
    coupon_code: Option<String>,
}

/// `template.header_media`: `{type: image|video|document, link | id}`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct HeaderMediaIn {
    /// `image`, `video` or `document`.
    #[serde(rename = "type")]
    kind: String,
    /// Public http(s) URL.
    link: Option<String>,
    /// A media id at the provider.
    id: Option<String>,
}

impl TemplateIn {
    /// The object with only these values: a deprecated shape read into the one shape (a
    /// group send's `template_id` + `params`, the public sender's `template` name,
    /// `language`, `variables`, `image_url`, `button_variable`).
    pub fn legacy(
        id: Option<i64>,
        name: Option<String>,
        language: Option<String>,
        params: Vec<String>,
        image_url: Option<String>,
        button_param: Option<String>,
    ) -> TemplateIn {
        TemplateIn {
            id,
            name,
            language,
            params,
            button_param,
            header_media: image_url
                .filter(|u| !u.trim().is_empty())
                .map(|link| HeaderMediaIn {
                    kind: "image".into(),
                    link: Some(link),
                    id: None,
                }),
            ..Default::default()
        }
    }

    /// The header media's link, if any (for the SSRF guard's check where a surface makes
    /// one).
    pub fn media_link(&self) -> Option<&str> {
        self.header_media.as_ref().and_then(|m| m.link.as_deref())
    }

    /// The checked object ([`engine::send::template_ref`]).
    pub fn into_ref(self) -> Result<engine::send::TemplateRef, ApiError> {
        Ok(engine::send::template_ref(engine::send::TemplateFields {
            id: self.id,
            name: self.name,
            language: self.language,
            vars: self.vars,
            params: self.params,
            header_param: self.header_param,
            header_media: self.header_media.map(|m| (m.kind, m.link, m.id)),
            button_param: self.button_param,
            coupon_code: self.coupon_code,
        })?)
    }
}

/// `Deprecation` (RFC 9745) on the answer to a request in a deprecated shape: the date the
/// one shape replaced it (2026-11-29), as `@<seconds since the epoch>`. Old shapes keep
/// working for the life of `/v1` (CHANGELOG.md, versioning policy).
pub fn mark_deprecated(mut resp: axum::response::Response) -> axum::response::Response {
    resp.headers_mut().insert(
        "deprecation",
        axum::http::HeaderValue::from_static(DEPRECATED_SINCE),
    );
    resp
}

/// 2026-11-29T00:00:00Z as RFC 9745 writes it.
pub const DEPRECATED_SINCE: &str = "@1795910400";

/// Whether a JSON body's top-level object passes `test` (a deprecated field's presence);
/// `false` for a body that is not a JSON object.
pub fn body_has(
    body: &[u8],
    test: impl Fn(&serde_json::Map<String, serde_json::Value>) -> bool,
) -> bool {
    serde_json::from_slice::<serde_json::Map<String, serde_json::Value>>(body)
        .is_ok_and(|m| test(&m))
}
