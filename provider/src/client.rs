//! A typed Graph API client (PROVIDER.md §1–§6). One instance is shared by every channel: the
//! access token is a per-call argument, never client state.

use crate::error::{GraphErrorEnvelope, ProviderError};
use crate::wire::{
    AccessToken, CreateTemplate, DebugToken, DebugTokenData, IdResponse, MediaInfo, Page,
    PhoneNumber, SendMessageRequest, SendMessageResponse, Success, TemplateCreated, TemplateInfo,
    Waba, PHONE_NUMBER_FIELDS,
};
use serde::de::DeserializeOwned;
use std::time::Duration;

/// Where and how to reach the provider.
#[derive(Debug, Clone)]
pub struct GraphConfig {
    /// Base URL without version, e.g. `https://graph.facebook.com` (setting
    /// `PROVIDER_BASE_URL`).
    pub base_url: String,
    /// Version path segment, e.g. `v25.0` (setting `PROVIDER_API_VERSION`).
    pub api_version: String,
    /// Timeout of one call, connect included.
    pub timeout: Duration,
}

impl Default for GraphConfig {
    /// `https://graph.facebook.com`, `v25.0`, 30 s.
    fn default() -> Self {
        Self {
            base_url: "https://graph.facebook.com".into(),
            api_version: "v25.0".into(),
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
    /// Builds a client with a keep-alive connection pool (HTTP/1.1: one connection per call in
    /// flight).
    pub fn new(config: GraphConfig) -> Self {
        let http = reqwest::Client::builder()
            .timeout(config.timeout)
            .connect_timeout(Duration::from_secs(5).min(config.timeout))
            // No cap on idle connections (they close after 90 s idle): each number's send
            // window keeps its connections busy, and a cap below the windows' sum made sends
            // open and close connections all the time (256 for 10 numbers × 64: 3,000 connects
            // in a 10,000-message campaign).
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

    async fn get_json<T: DeserializeOwned>(
        &self,
        token: &str,
        path: &str,
        query: &[(&str, &str)],
    ) -> Result<T, ProviderError> {
        self.execute(
            self.http
                .get(self.url(path))
                .query(query)
                .bearer_auth(token),
        )
        .await
    }

    async fn post_json<T: DeserializeOwned>(
        &self,
        token: &str,
        path: &str,
        body: &serde_json::Value,
    ) -> Result<T, ProviderError> {
        self.execute(self.http.post(self.url(path)).bearer_auth(token).json(body))
            .await
    }

    /// Follows `paging.next` (by the `after` cursor) until the last page; at most `max_pages`.
    async fn all_pages<T: DeserializeOwned>(
        &self,
        token: &str,
        path: &str,
        max_pages: usize,
    ) -> Result<Vec<T>, ProviderError> {
        let mut out = Vec::new();
        let mut after: Option<String> = None;
        for _ in 0..max_pages {
            let mut query = vec![("limit", "100".to_string())];
            if let Some(a) = &after {
                query.push(("after", a.clone()));
            }
            let q: Vec<(&str, &str)> = query.iter().map(|(k, v)| (*k, v.as_str())).collect();
            let page: Page<T> = self.get_json(token, path, &q).await?;
            out.extend(page.data);
            match page
                .paging
                .filter(|p| p.next.is_some())
                .and_then(|p| p.cursors)
                .and_then(|c| c.after)
            {
                Some(a) => after = Some(a),
                None => break,
            }
        }
        Ok(out)
    }

    /// Adds a number to a WABA (§4.2 step 1): `cc` is the country calling code, `phone_number`
    /// the number with or without it. Returns the new (unverified) phone number id.
    pub async fn add_phone_number(
        &self,
        token: &str,
        waba_id: &str,
        cc: &str,
        phone_number: &str,
        verified_name: &str,
    ) -> Result<String, ProviderError> {
        let body = serde_json::json!({"cc": cc, "phone_number": phone_number, "verified_name": verified_name});
        let r: IdResponse = self
            .post_json(token, &format!("{waba_id}/phone_numbers"), &body)
            .await?;
        Ok(r.id)
    }

    /// Asks the provider to send a verification code by `SMS` or `VOICE` (§4.2 step 2).
    pub async fn request_code(
        &self,
        token: &str,
        phone_number_id: &str,
        method: &str,
        language: &str,
    ) -> Result<Success, ProviderError> {
        let body = serde_json::json!({"code_method": method, "language": language});
        self.post_json(token, &format!("{phone_number_id}/request_code"), &body)
            .await
    }

    /// Verifies the received code (digits, hyphen optional) (§4.2 step 3).
    pub async fn verify_code(
        &self,
        token: &str,
        phone_number_id: &str,
        code: &str,
    ) -> Result<Success, ProviderError> {
        let body = serde_json::json!({"code": code.replace('-', "")});
        self.post_json(token, &format!("{phone_number_id}/verify_code"), &body)
            .await
    }

    /// Registers the number for Cloud API messaging with its 6-digit PIN (§4.2 step 4).
    /// Errors: 133005 when two-step verification is on and the PIN differs.
    pub async fn register(
        &self,
        token: &str,
        phone_number_id: &str,
        pin: &str,
    ) -> Result<Success, ProviderError> {
        let body = serde_json::json!({"messaging_product": "whatsapp", "pin": pin});
        self.post_json(token, &format!("{phone_number_id}/register"), &body)
            .await
    }

    /// Deregisters the number.
    pub async fn deregister(
        &self,
        token: &str,
        phone_number_id: &str,
    ) -> Result<Success, ProviderError> {
        self.post_json(
            token,
            &format!("{phone_number_id}/deregister"),
            &serde_json::json!({}),
        )
        .await
    }

    /// Sets or changes the two-step verification PIN.
    pub async fn set_pin(
        &self,
        token: &str,
        phone_number_id: &str,
        pin: &str,
    ) -> Result<Success, ProviderError> {
        self.post_json(token, phone_number_id, &serde_json::json!({"pin": pin}))
            .await
    }

    /// Every number of a WABA (§5.2), following the pages.
    pub async fn waba_phone_numbers(
        &self,
        token: &str,
        waba_id: &str,
    ) -> Result<Vec<PhoneNumber>, ProviderError> {
        self.all_pages(token, &format!("{waba_id}/phone_numbers"), 50)
            .await
    }

    /// Reads a WABA (§5.1).
    pub async fn waba(&self, token: &str, waba_id: &str) -> Result<Waba, ProviderError> {
        let fields = "id,name,timezone_id,message_template_namespace,account_review_status,business_verification_status,health_status,whatsapp_business_manager_messaging_limit,owner_business_info";
        self.get_json(token, waba_id, &[("fields", fields)]).await
    }

    /// Subscribes this app to the WABA's webhooks (§5.3).
    pub async fn subscribe_app(
        &self,
        token: &str,
        waba_id: &str,
    ) -> Result<Success, ProviderError> {
        self.post_json(
            token,
            &format!("{waba_id}/subscribed_apps"),
            &serde_json::json!({}),
        )
        .await
    }

    /// The apps subscribed to the WABA's webhooks (§5.3): `[{whatsapp_business_api_data: {id,
    /// link, name}, override_callback_uri?}]`.
    pub async fn subscribed_apps(
        &self,
        token: &str,
        waba_id: &str,
    ) -> Result<Vec<serde_json::Value>, ProviderError> {
        let r: serde_json::Value = self
            .get_json(token, &format!("{waba_id}/subscribed_apps"), &[])
            .await?;
        Ok(r["data"].as_array().cloned().unwrap_or_default())
    }

    /// Every WABA the business owns (§5.4), following the pages.
    pub async fn owned_wabas(
        &self,
        token: &str,
        business_id: &str,
    ) -> Result<Vec<Waba>, ProviderError> {
        self.all_pages(
            token,
            &format!("{business_id}/owned_whatsapp_business_accounts"),
            50,
        )
        .await
    }

    /// Describes `input_token` (validity, scopes, the WABAs it reaches) (§5.5); `caller` is a
    /// valid token or the app token `<app_id>|<app_secret>`.
    pub async fn debug_token(
        &self,
        caller: &str,
        input_token: &str,
    ) -> Result<DebugTokenData, ProviderError> {
        let r: DebugToken = self
            .get_json(caller, "debug_token", &[("input_token", input_token)])
            .await?;
        Ok(r.data)
    }

    /// Reads a business portfolio: name and verification status (§5.4; Graph's
    /// `Business` node).
    pub async fn business(
        &self,
        token: &str,
        business_id: &str,
    ) -> Result<crate::wire::Business, ProviderError> {
        self.get_json(
            token,
            business_id,
            &[("fields", "id,name,verification_status")],
        )
        .await
    }

    /// Reads a number's business profile (`GET /{phone_number_id}/whatsapp_business_profile`,
    /// Meta's "Business Profiles" reference; not in PROVIDER.md, D-058): the first entry of
    /// `data`.
    pub async fn business_profile(
        &self,
        token: &str,
        phone_number_id: &str,
    ) -> Result<crate::wire::BusinessProfile, ProviderError> {
        let r: crate::wire::BusinessProfiles = self
            .get_json(
                token,
                &format!("{phone_number_id}/whatsapp_business_profile"),
                &[(
                    "fields",
                    "about,description,profile_picture_url,websites,vertical",
                )],
            )
            .await?;
        r.data
            .into_iter()
            .next()
            .ok_or_else(|| ProviderError::Decode("business profile without data".into()))
    }

    /// Uploads a file through the app's resumable upload (D-058): a session on the app
    /// (`POST /{app_id}/uploads?file_length&file_type&file_name` → `{id: "upload:…"}`), the
    /// bytes to it (`POST /{upload_id}` with `file_offset: 0` → `{h}`). Returns the handle a
    /// profile picture or a template's media header example (`header_handle`) names.
    pub async fn upload_handle(
        &self,
        token: &str,
        app_id: &str,
        bytes: Vec<u8>,
        mime_type: &str,
        file_name: &str,
    ) -> Result<String, ProviderError> {
        let length = bytes.len().to_string();
        let session: IdResponse = self
            .execute(
                self.http
                    .post(self.url(&format!("{app_id}/uploads")))
                    .query(&[
                        ("file_length", length.as_str()),
                        ("file_type", mime_type),
                        ("file_name", file_name),
                    ])
                    .bearer_auth(token),
            )
            .await?;
        let handle: crate::wire::UploadHandle = self
            .execute(
                self.http
                    .post(self.url(&session.id))
                    .header(reqwest::header::AUTHORIZATION, format!("OAuth {token}"))
                    .header("file_offset", "0")
                    .body(bytes),
            )
            .await?;
        Ok(handle.h)
    }

    /// Sets a number's profile picture (D-058): the bytes through [`Self::upload_handle`],
    /// then `POST /{phone_number_id}/whatsapp_business_profile {messaging_product,
    /// profile_picture_handle}`.
    pub async fn set_profile_picture(
        &self,
        token: &str,
        app_id: &str,
        phone_number_id: &str,
        bytes: Vec<u8>,
        mime_type: &str,
    ) -> Result<(), ProviderError> {
        let handle = self
            .upload_handle(token, app_id, bytes, mime_type, "profile")
            .await?;
        let _: Success = self
            .post_json(
                token,
                &format!("{phone_number_id}/whatsapp_business_profile"),
                &serde_json::json!({"messaging_product": "whatsapp", "profile_picture_handle": handle}),
            )
            .await?;
        Ok(())
    }

    /// Exchanges an Embedded Signup code for a business token (§5.6).
    pub async fn exchange_code(
        &self,
        app_id: &str,
        app_secret: &str,
        code: &str,
    ) -> Result<AccessToken, ProviderError> {
        let req = self.http.get(self.url("oauth/access_token")).query(&[
            ("client_id", app_id),
            ("client_secret", app_secret),
            ("code", code),
        ]);
        self.execute(req).await
    }

    /// Uploads a file (§3); returns the media id (valid 30 days).
    pub async fn upload_media(
        &self,
        token: &str,
        phone_number_id: &str,
        bytes: Vec<u8>,
        mime_type: &str,
        file_name: &str,
    ) -> Result<String, ProviderError> {
        let part = reqwest::multipart::Part::bytes(bytes)
            .file_name(file_name.to_string())
            .mime_str(mime_type)
            .map_err(|e| ProviderError::Decode(format!("invalid MIME type: {e}")))?;
        let form = reqwest::multipart::Form::new()
            .text("messaging_product", "whatsapp")
            .text("type", mime_type.to_string())
            .part("file", part);
        let req = self
            .http
            .post(self.url(&format!("{phone_number_id}/media")))
            .bearer_auth(token)
            .multipart(form);
        let r: IdResponse = self.execute(req).await?;
        Ok(r.id)
    }

    /// Looks up a media id's download URL (valid 5 minutes), type, hash and size (§3).
    pub async fn media_info(
        &self,
        token: &str,
        media_id: &str,
    ) -> Result<MediaInfo, ProviderError> {
        self.get_json(token, media_id, &[]).await
    }

    /// Downloads media from a URL returned by [`GraphClient::media_info`], with the same
    /// bearer token (§3); returns the bytes and their MIME type. At most `max_bytes` are read.
    pub async fn download_media(
        &self,
        token: &str,
        url: &str,
        max_bytes: usize,
    ) -> Result<(bytes::Bytes, String), ProviderError> {
        let resp = self
            .http
            .get(url)
            .bearer_auth(token)
            .send()
            .await
            .map_err(map_transport)?;
        let status = resp.status();
        if !status.is_success() {
            return Err(ProviderError::Http {
                status: status.as_u16(),
                body: String::new(),
            });
        }
        if resp
            .content_length()
            .is_some_and(|n| n as usize > max_bytes)
        {
            return Err(ProviderError::Decode(format!(
                "media larger than {max_bytes} bytes"
            )));
        }
        let mime = resp
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("application/octet-stream")
            .to_string();
        let bytes = resp.bytes().await.map_err(map_transport)?;
        if bytes.len() > max_bytes {
            return Err(ProviderError::Decode(format!(
                "media larger than {max_bytes} bytes"
            )));
        }
        Ok((bytes, mime))
    }

    /// Downloads media as a stream (for files up to 100 MB that should not sit in memory):
    /// returns the MIME type, the length when known, and the body chunks.
    pub async fn download_media_stream(
        &self,
        token: &str,
        url: &str,
    ) -> Result<
        (
            String,
            Option<u64>,
            futures::stream::BoxStream<'static, Result<bytes::Bytes, std::io::Error>>,
        ),
        ProviderError,
    > {
        use futures::StreamExt;
        let resp = self
            .http
            .get(url)
            .bearer_auth(token)
            .send()
            .await
            .map_err(map_transport)?;
        let status = resp.status();
        if !status.is_success() {
            return Err(ProviderError::Http {
                status: status.as_u16(),
                body: String::new(),
            });
        }
        let mime = resp
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("application/octet-stream")
            .to_string();
        let len = resp.content_length();
        let stream = resp
            .bytes_stream()
            .map(|r| r.map_err(std::io::Error::other))
            .boxed();
        Ok((mime, len, stream))
    }

    /// Deletes an uploaded media id.
    pub async fn delete_media(
        &self,
        token: &str,
        media_id: &str,
    ) -> Result<Success, ProviderError> {
        self.execute(self.http.delete(self.url(media_id)).bearer_auth(token))
            .await
    }

    /// Creates a template in a WABA (§6.2); it starts `PENDING` until reviewed.
    pub async fn create_template(
        &self,
        token: &str,
        waba_id: &str,
        template: &CreateTemplate,
    ) -> Result<TemplateCreated, ProviderError> {
        let body =
            serde_json::to_value(template).map_err(|e| ProviderError::Decode(e.to_string()))?;
        self.post_json(token, &format!("{waba_id}/message_templates"), &body)
            .await
    }

    /// Edits a template (§6.3): `POST /{template_id}` with the new `components` (a full
    /// replacement) and, unless approved, a new `category`. The provider allows it for
    /// `APPROVED`, `REJECTED` and `PAUSED` templates, an approved one once per 24 h and 10
    /// times per 30 days; the template is reviewed again. Errors: the Graph error (code 100)
    /// when it refuses.
    pub async fn edit_template(
        &self,
        token: &str,
        template_id: &str,
        category: Option<&str>,
        components: &[serde_json::Value],
    ) -> Result<Success, ProviderError> {
        let mut body = serde_json::json!({ "components": components });
        if let Some(c) = category {
            body["category"] = serde_json::json!(c);
        }
        self.post_json(token, template_id, &body).await
    }

    /// Every template of a WABA with its status (§6.1), following the pages.
    pub async fn list_templates(
        &self,
        token: &str,
        waba_id: &str,
    ) -> Result<Vec<TemplateInfo>, ProviderError> {
        self.all_pages(token, &format!("{waba_id}/message_templates"), 100)
            .await
    }

    /// Deletes a template by name (every language), or one language version with `hsm_id`
    /// (§6.3).
    pub async fn delete_template(
        &self,
        token: &str,
        waba_id: &str,
        name: &str,
        hsm_id: Option<&str>,
    ) -> Result<Success, ProviderError> {
        let mut query = vec![("name", name)];
        if let Some(id) = hsm_id {
            query.push(("hsm_id", id));
        }
        let req = self
            .http
            .delete(self.url(&format!("{waba_id}/message_templates")))
            .query(&query)
            .bearer_auth(token);
        self.execute(req).await
    }

    /// Runs a request and decodes either the success body or the Graph error envelope.
    pub(crate) async fn execute<T: DeserializeOwned>(
        &self,
        req: reqwest::RequestBuilder,
    ) -> Result<T, ProviderError> {
        let request = req
            .build()
            .map_err(|e| ProviderError::Request(e.to_string()))?;
        let op = operation(request.url());
        let started = std::time::Instant::now();
        let result = self.execute_built(request).await;
        call_histogram(op).record(started.elapsed().as_secs_f64());
        if let Err(e) = &result {
            let code = match e {
                ProviderError::Graph { error, .. } => error.code.to_string(),
                ProviderError::Http { status, .. } => format!("http_{status}"),
                ProviderError::Timeout => "timeout".into(),
                ProviderError::Request(_) => "request".into(),
                _ => "transport".into(),
            };
            metrics::counter!("disparo_provider_errors_total", "code" => code).increment(1);
        }
        result
    }

    async fn execute_built<T: DeserializeOwned>(
        &self,
        request: reqwest::Request,
    ) -> Result<T, ProviderError> {
        let resp = self.http.execute(request).await.map_err(map_transport)?;
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

/// The `disparo_provider_call_seconds{op}` handle of an operation, registered once per
/// process (a registry lookup per call showed in dispatch). The recorder must be installed
/// before the first call (`http::install_metrics` runs first in `Application::build`).
fn call_histogram(op: &'static str) -> &'static metrics::Histogram {
    static HANDLES: std::sync::OnceLock<Vec<(&'static str, metrics::Histogram)>> =
        std::sync::OnceLock::new();
    let handles = HANDLES.get_or_init(|| {
        EDGES
            .iter()
            .copied()
            .chain(["node"])
            .map(|op| {
                (
                    op,
                    metrics::histogram!("disparo_provider_call_seconds", "op" => op),
                )
            })
            .collect()
    });
    &handles
        .iter()
        .find(|(o, _)| *o == op)
        .unwrap_or(&handles[handles.len() - 1])
        .1
}

/// The edges a Graph call's label names; any other path is a `node` read.
const EDGES: [&str; 14] = [
    "uploads",
    "whatsapp_business_profile",
    "messages",
    "media",
    "message_templates",
    "phone_numbers",
    "register",
    "deregister",
    "request_code",
    "verify_code",
    "subscribed_apps",
    "owned_whatsapp_business_accounts",
    "access_token",
    "debug_token",
];

/// The metric label of a Graph call: the path's last segment when it names an edge
/// (`messages`, `media`, `message_templates`, `phone_numbers`, `register`…), `node` for a
/// read of an object by id. Bounded: ids never become labels.
fn operation(url: &reqwest::Url) -> &'static str {
    let last = url
        .path_segments()
        .and_then(|mut s| s.next_back())
        .unwrap_or_default();
    EDGES.into_iter().find(|e| *e == last).unwrap_or("node")
}

fn map_transport(e: reqwest::Error) -> ProviderError {
    if e.is_timeout() {
        ProviderError::Timeout
    } else {
        // reqwest's Display carries no credentials (the token is a header).
        ProviderError::Transport(e.to_string())
    }
}
