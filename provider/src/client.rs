//! A typed Graph API client (PROVIDER.md §1–§6). One instance is shared by every channel: the
//! access token is a per-call argument, never client state.

use crate::error::{GraphErrorEnvelope, ProviderError};
use crate::wire::{PhoneNumber, SendMessageRequest, SendMessageResponse, PHONE_NUMBER_FIELDS};
use serde::de::DeserializeOwned;
use std::time::Duration;

/// Where and how to reach the provider.
#[derive(Debug, Clone)]
pub struct GraphConfig {
    /// Base URL without version, e.g. `https://graph.facebook.com` (setting
    /// `PROVIDER_BASE_URL`).
    pub base_url: String,
    /// Version path segment, e.g. `v21.0` (setting `PROVIDER_API_VERSION`).
    pub api_version: String,
    /// Timeout of one call, connect included.
    pub timeout: Duration,
}

impl Default for GraphConfig {
    /// `https://graph.facebook.com`, `v21.0`, 30 s.
    fn default() -> Self {
        Self {
            base_url: "https://graph.facebook.com".into(),
            api_version: "v21.0".into(),
            timeout: Duration::from_secs(30),
        }
    }
}

/// The Graph API client. Cheap to clone (the HTTP pool is shared).
#[derive(Debug, Clone)]
pub struct GraphClient {
    http: reqwest::Client,
    config: GraphConfig,
}

impl GraphClient {
    /// Builds a client with a keep-alive connection pool.
    pub fn new(config: GraphConfig) -> Self {
        let http = reqwest::Client::builder()
            .timeout(config.timeout)
            .connect_timeout(Duration::from_secs(5).min(config.timeout))
            .pool_max_idle_per_host(256)
            .tcp_nodelay(true)
            .user_agent(concat!("disparo/", env!("CARGO_PKG_VERSION")))
            .build()
            .expect("reqwest client builds with static settings");
        Self { http, config }
    }

    /// The configuration.
    pub fn config(&self) -> &GraphConfig {
        &self.config
    }

    /// `{base}/{version}/{path}`.
    pub fn url(&self, path: &str) -> String {
        format!(
            "{}/{}/{}",
            self.config.base_url.trim_end_matches('/'),
            self.config.api_version,
            path.trim_start_matches('/')
        )
    }

    /// Reads a phone number's fields (§4.1): display number, verified name, quality, tiers,
    /// throughput, status, name status, code verification status. Also the way disparo
    /// validates a credential: a bad token answers 190.
    pub async fn phone_number(
        &self,
        token: &str,
        phone_number_id: &str,
    ) -> Result<PhoneNumber, ProviderError> {
        let req = self
            .http
            .get(self.url(phone_number_id))
            .query(&[("fields", PHONE_NUMBER_FIELDS)])
            .bearer_auth(token);
        self.execute(req).await
    }

    /// Sends a message (§2). A success only means *accepted*; delivery arrives by webhook.
    pub async fn send_message(
        &self,
        token: &str,
        phone_number_id: &str,
        body: &SendMessageRequest,
    ) -> Result<SendMessageResponse, ProviderError> {
        let req = self
            .http
            .post(self.url(&format!("{phone_number_id}/messages")))
            .bearer_auth(token)
            .json(body);
        self.execute(req).await
    }

    /// Runs a request and decodes either the success body or the Graph error envelope.
    pub(crate) async fn execute<T: DeserializeOwned>(
        &self,
        req: reqwest::RequestBuilder,
    ) -> Result<T, ProviderError> {
        let resp = req.send().await.map_err(map_transport)?;
        let status = resp.status();
        let retry_after_s = resp
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok());
        let bytes = resp.bytes().await.map_err(map_transport)?;
        if status.is_success() {
            return serde_json::from_slice(&bytes)
                .map_err(|e| ProviderError::Decode(e.to_string()));
        }
        match serde_json::from_slice::<GraphErrorEnvelope>(&bytes) {
            Ok(env) => Err(ProviderError::Graph {
                status: status.as_u16(),
                error: env.error,
                retry_after_s,
            }),
            Err(_) => Err(ProviderError::Http {
                status: status.as_u16(),
                body: String::from_utf8_lossy(&bytes[..bytes.len().min(200)]).into_owned(),
            }),
        }
    }
}

fn map_transport(e: reqwest::Error) -> ProviderError {
    if e.is_timeout() {
        ProviderError::Timeout
    } else {
        // reqwest's Display carries no credentials (the token is a header).
        ProviderError::Transport(e.to_string())
    }
}
