//! Alternative providers (spec "What the service does" item 11; decision D-034): numbers
//! served by another provider are referenced only. disparo reads their sender's templates and
//! gives the provider a notification URL; it does not send through them.
//!
//! A provider is one implementation of [`AlternativeProvider`] in its own module, found by
//! its engine name with [`by_engine`]; adding a second provider is a new module and one line
//! in [`PROVIDERS`]. The first one is [`D360`] (360dialog, whose hosted Cloud API answers
//! templates at `GET /v1/configs/templates` with the `D360-API-KEY` header).

use crate::error::ProviderError;
use crate::wire::TemplateInfo;
use futures::future::BoxFuture;
use serde::Deserialize;
use std::time::Duration;

/// What disparo asks of an alternative provider.
pub trait AlternativeProvider: Send + Sync {
    /// The engine name stored on the channel (`channels.engine`), e.g. `360dialog`.
    fn engine(&self) -> &'static str;

    /// Where its API lives when the channel names no other base URL.
    fn default_base_url(&self) -> &'static str;

    /// The sender's templates, every status (the caller filters). Errors: the provider's
    /// answer as [`ProviderError::Http`] (401/403: the key is refused), transport errors and
    /// timeouts as for the Graph API, [`ProviderError::Decode`] for an unreadable answer.
    fn templates<'a>(
        &'a self,
        http: &'a reqwest::Client,
        base_url: &'a str,
        api_key: &'a str,
    ) -> BoxFuture<'a, Result<Vec<TemplateInfo>, ProviderError>>;
}

/// Every alternative provider disparo knows.
pub static PROVIDERS: &[&dyn AlternativeProvider] = &[&D360];

/// The provider of an engine name (ASCII case-insensitive).
pub fn by_engine(engine: &str) -> Option<&'static dyn AlternativeProvider> {
    PROVIDERS
        .iter()
        .copied()
        .find(|p| p.engine().eq_ignore_ascii_case(engine))
}

/// The engine names disparo knows, for error messages.
pub fn engines() -> Vec<&'static str> {
    PROVIDERS.iter().map(|p| p.engine()).collect()
}

/// 360dialog's hosted Cloud API: `GET {base}/v1/configs/templates`, header
/// `D360-API-KEY: <key>`, answer `{"waba_templates": [{name, language, status, category,
/// components…}], "count", "total", "offset", "limit"…}`; statuses come in lower case.
pub struct D360;

/// Page size asked of 360dialog.
const D360_PAGE: usize = 1000;

#[derive(Debug, Deserialize)]
struct D360Templates {
    #[serde(default)]
    waba_templates: Vec<D360Template>,
    #[serde(default)]
    total: Option<usize>,
}

#[derive(Debug, Deserialize)]
struct D360Template {
    #[serde(default)]
    id: Option<String>,
    name: String,
    language: String,
    status: String,
    #[serde(default)]
    category: String,
    #[serde(default)]
    components: serde_json::Value,
}

impl AlternativeProvider for D360 {
    fn engine(&self) -> &'static str {
        "360dialog"
    }

    fn default_base_url(&self) -> &'static str {
        "https://waba-v2.360dialog.io"
    }

    fn templates<'a>(
        &'a self,
        http: &'a reqwest::Client,
        base_url: &'a str,
        api_key: &'a str,
    ) -> BoxFuture<'a, Result<Vec<TemplateInfo>, ProviderError>> {
        Box::pin(async move {
            let mut out = Vec::new();
            loop {
                let url = format!(
                    "{}/v1/configs/templates?limit={D360_PAGE}&offset={}",
                    base_url.trim_end_matches('/'),
                    out.len()
                );
                let resp = http
                    .get(&url)
                    .header("D360-API-KEY", api_key)
                    .timeout(Duration::from_secs(15))
                    .send()
                    .await
                    .map_err(|e| {
                        if e.is_timeout() {
                            ProviderError::Timeout
                        } else if e.is_builder() {
                            // A key that cannot go in a header: never sent, the caller's fault.
                            ProviderError::Request(e.without_url().to_string())
                        } else {
                            ProviderError::Transport(e.without_url().to_string())
                        }
                    })?;
                let status = resp.status().as_u16();
                let body = resp
                    .bytes()
                    .await
                    .map_err(|e| ProviderError::Transport(e.without_url().to_string()))?;
                if !(200..300).contains(&status) {
                    return Err(ProviderError::Http {
                        status,
                        body: String::from_utf8_lossy(&body[..body.len().min(200)]).into(),
                    });
                }
                let page: D360Templates = serde_json::from_slice(&body)
                    .map_err(|e| ProviderError::Decode(e.to_string()))?;
                let n = page.waba_templates.len();
                out.extend(page.waba_templates.into_iter().map(|t| TemplateInfo {
                    id: t.id.unwrap_or_default(),
                    name: t.name,
                    language: t.language,
                    status: t.status.to_ascii_uppercase(),
                    category: t.category.to_ascii_uppercase(),
                    parameter_format: None,
                    components: t.components,
                }));
                let done = n < D360_PAGE || page.total.is_some_and(|t| out.len() >= t);
                if done {
                    return Ok(out);
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engines_are_found_by_name() {
        assert_eq!(
            by_engine("360DIALOG").map(|p| p.engine()),
            Some("360dialog")
        );
        assert!(by_engine("cloud_api").is_none());
        assert_eq!(engines(), vec!["360dialog"]);
    }
}
