//! Connecting an official (Cloud API) channel: the credential is validated at the provider
//! before anything is stored.

use crate::Services;
use actors::cluster::wire::ChannelAsk;
use actors::error::ActorError;
use actors::protocol::ChannelSnapshot;
use engine::channel::{ChannelStatus, Quality, Tier};
use engine::ids::{AccountId, ChannelId};
use engine::phone::Phone;
use engine::Secret;
use provider::{ErrorKind, ProviderError};
use rand::Rng;
use storage::channels::{ChannelRecord, NewChannel};

/// `POST /channels/official` input (spec "Official channel configuration").
#[derive(Debug, Clone)]
pub struct ConnectOfficial {
    /// Display name; default the provider's verified name.
    pub name: Option<String>,
    /// Provider phone number id.
    pub phone_number_id: String,
    /// Provider WABA id.
    pub waba_id: String,
    /// Access token (system-user or business token).
    pub access_token: Secret,
    /// App secret that signs this number's webhooks; default `PROVIDER_APP_SECRET`.
    pub app_secret: Option<Secret>,
    /// Verify token of the channel's receiver; default a random one.
    pub verify_token: Option<String>,
}

/// The `verification` block of the answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verification {
    /// True: the provider answered with the number.
    pub ok: bool,
    /// The WABA is subscribed to the app's webhooks (it was, or disparo subscribed it now;
    /// false when the provider refused: no webhook of the number would arrive).
    pub subscribed: bool,
    /// The provider's display number.
    pub display_phone_number: String,
    /// The provider's verified name.
    pub verified_name: String,
}

/// A random verify token (32 URL-safe characters).
pub fn random_verify_token() -> String {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    let mut rng = rand::thread_rng();
    (0..32)
        .map(|_| char::from(ALPHABET[rng.gen_range(0..ALPHABET.len())]))
        .collect()
}

impl Services {
    /// Validates the credential by reading the number at the provider, stores the channel
    /// (secrets sealed) and starts its actor.
    ///
    /// Errors: [`ActorError::CredentialRefused`] when the provider refuses the token or does
    /// not know the number (nothing is stored); 422 `waba_invalida` when the WABA given does
    /// not list the number for this token ([`Services::prove_waba`]); [`ActorError::ProviderRefused`] when the
    /// provider is unreachable or failing; [`ActorError::Conflict`] when the number is already
    /// connected.
    pub async fn connect_official(
        &self,
        account_id: i64,
        req: ConnectOfficial,
    ) -> Result<(ChannelRecord, Verification), ActorError> {
        // Before any provider call: the ids become Graph path segments.
        engine::ids::check_provider_node_id("phone_number_id", &req.phone_number_id)?;
        engine::ids::check_provider_node_id("waba_id", &req.waba_id)?;
        let shared = &self.shared();
        let number = shared
            .graph
            .phone_number(req.access_token.expose(), &req.phone_number_id)
            .await
            .map_err(token_check_error)?;
        self.prove_waba(
            req.access_token.expose(),
            &req.waba_id,
            &req.phone_number_id,
        )
        .await?;
        let subscribed = self
            .ensure_subscribed(req.access_token.expose(), &req.waba_id)
            .await;
        let display = number.display_phone_number.clone().unwrap_or_default();
        let verified_name = number.verified_name.clone().unwrap_or_default();
        let status = match number.status.as_deref() {
            None | Some("CONNECTED") => ChannelStatus::Working,
            Some("PENDING") | Some("UNVERIFIED") => ChannelStatus::Pending,
            Some(_) => ChannelStatus::Disconnected,
        };
        let tier = number
            .tier()
            .and_then(Tier::parse)
            .map(|t| t.as_str().to_string());
        let bm_id = self
            .learn_waba(account_id, req.access_token.expose(), &req.waba_id)
            .await;
        let new = NewChannel {
            account_id,
            name: req
                .name
                .filter(|n| !n.trim().is_empty())
                .unwrap_or_else(|| verified_name.clone()),
            phone: Phone::from_provider_display(&display).as_str().to_string(),
            phone_number_id: req.phone_number_id,
            waba_id: req.waba_id,
            verified_name: verified_name.clone(),
            status: status.as_str().to_string(),
            quality: Quality::parse(number.quality_rating.as_deref().unwrap_or("UNKNOWN"))
                .as_str()
                .to_string(),
            tier,
            access_token: req.access_token,
            app_secret: req.app_secret,
            verify_token: req
                .verify_token
                .filter(|v| !v.is_empty())
                .unwrap_or_else(random_verify_token),
            bm_id,
        };
        let record = shared.store.insert_channel(&new).await?;
        // Read before the actor starts: it paces campaign sends at it (issue 25).
        shared
            .store
            .set_channel_throughput(record.id, i64::from(number.throughput_mps()))
            .await?;
        self.start_channel(record.id).await?;
        self.replicate_in_background(account_id, record.id);
        Ok((
            record,
            Verification {
                ok: true,
                subscribed,
                display_phone_number: display,
                verified_name,
            },
        ))
    }
}

/// `PATCH /channels/{id}/official`: the fields to change; `None` (or a blank secret) keeps the
/// stored value.
#[derive(Debug, Clone, Default)]
pub struct UpdateOfficial {
    /// New display name.
    pub name: Option<String>,
    /// New access token (re-validated at the provider before it is stored).
    pub access_token: Option<Secret>,
    /// New app secret.
    pub app_secret: Option<Secret>,
    /// New verify token.
    pub verify_token: Option<String>,
}

/// `POST /channels/embedded-signup` input: what the Embedded Signup popup hands the front end
/// (spec "Authentication" 6–8; PROVIDER.md §5.6).
#[derive(Debug, Clone)]
pub struct CompleteSignup {
    /// The code of the `FB.login` callback (single use, short-lived).
    pub code: Secret,
    /// The WABA the customer shared.
    pub waba_id: String,
    /// The number the customer chose.
    pub phone_number_id: String,
    /// Display name; default the provider's verified name.
    pub name: Option<String>,
    /// 6-digit PIN to register the number with; default a random one, kept sealed.
    pub pin: Option<Secret>,
}

/// How registering the number after embedded signup went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Registration {
    /// The provider registered the number.
    pub ok: bool,
    /// pt-BR: what happened and, on failure, what to do.
    pub message: String,
}

/// What the embedded-signup front end needs (`GET /signup/config`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignupConfig {
    /// `PROVIDER_APP_ID`.
    pub app_id: Option<String>,
    /// `PROVIDER_CONFIG_ID`.
    pub config_id: Option<String>,
    /// Whether signup can complete here (app id and secret configured).
    pub available: bool,
}

impl Services {
    /// The embedded-signup settings the front end opens the popup with.
    pub fn signup_config(&self) -> SignupConfig {
        let c = &self.shared().config;
        SignupConfig {
            app_id: c.app_id.clone(),
            config_id: c.config_id.clone(),
            available: c.app_id.is_some() && c.app_secret.is_some(),
        }
    }

    /// Completes embedded signup: exchanges the code for the business token with the app id
    /// and secret (PROVIDER.md §5.6), connects the number like `POST /channels/official` (the
    /// WABA proven, subscribed to the app, the token sealed), then registers the number with
    /// the PIN given or a random one (kept sealed; D-072).
    ///
    /// Errors: 422 `cadastro_indisponivel` without `PROVIDER_APP_ID`/`PROVIDER_APP_SECRET`;
    /// 422 `invalid_code` when the provider refuses the code (used, expired, another app's);
    /// then the errors of [`Services::connect_official`]. A failed registration keeps the
    /// channel and says so in [`Registration`].
    pub async fn complete_signup(
        &self,
        account_id: i64,
        req: CompleteSignup,
    ) -> Result<(ChannelRecord, Verification, Registration), ActorError> {
        let c = &self.shared().config;
        let (Some(app_id), Some(app_secret)) = (c.app_id.clone(), c.app_secret.clone()) else {
            return Err(ActorError::Rejected {
                code: "cadastro_indisponivel",
                message: "O cadastro incorporado não está configurado: defina PROVIDER_APP_ID e PROVIDER_APP_SECRET.".into(),
                details: serde_json::json!({}),
            });
        };
        let pin = signup_pin(req.pin)?;
        let token = self
            .shared()
            .graph
            .exchange_code(&app_id, app_secret.expose(), req.code.expose())
            .await
            .map_err(|e| match e.kind() {
                ErrorKind::Transient | ErrorKind::RateLimited => ActorError::from(e),
                _ => ActorError::Rejected {
                    code: "invalid_code",
                    message: format!(
                        "O provedor recusou o código do cadastro incorporado ({}). Refaça o cadastro: o código vale uma vez e por pouco tempo.",
                        e.reason()
                    ),
                    details: serde_json::json!({"provider_code": e.code()}),
                },
            })?;
        let token = Secret::new(token.access_token);
        let (record, verification) = self
            .connect_official(
                account_id,
                ConnectOfficial {
                    name: req.name,
                    phone_number_id: req.phone_number_id,
                    waba_id: req.waba_id,
                    access_token: token.clone(),
                    app_secret: None,
                    verify_token: None,
                },
            )
            .await?;
        let registration = self
            .register_after_signup(account_id, &record, &token, &pin)
            .await?;
        Ok((record, verification, registration))
    }

    /// Registers a number just connected by embedded signup with its PIN (stored when it
    /// worked, then the number read again); a refusal is reported, not an error: the number
    /// stays connected and can be registered later.
    async fn register_after_signup(
        &self,
        account_id: i64,
        record: &ChannelRecord,
        token: &Secret,
        pin: &Secret,
    ) -> Result<Registration, ActorError> {
        let registration = match self
            .shared()
            .graph
            .register(token.expose(), &record.phone_number_id, pin.expose())
            .await
        {
            Ok(_) => {
                self.shared().store.set_channel_pin(record.id, pin).await?;
                let _ = self.sync_channel(account_id, record.id).await;
                Registration {
                    ok: true,
                    message: "Número registrado no provedor.".into(),
                }
            }
            Err(e) => {
                tracing::warn!(channel = record.id, code = ?e.code(), "registering after embedded signup failed");
                Registration {
                    ok: false,
                    message: format!(
                        "O número foi conectado, mas o registro falhou ({}). Registre com `POST /channels/{}/register` e o PIN de duas etapas do número.",
                        e.reason(),
                        record.id
                    ),
                }
            }
        };
        Ok(registration)
    }

    /// Subscribes the app to the WABA's webhooks unless it is already (PROVIDER.md §5.3: "a
    /// partner must subscribe each customer WABA"); with `PROVIDER_APP_ID` set, an app of
    /// another id does not count. A refusal is logged and answered `false`: the number is
    /// connected anyway, its webhooks would not arrive until the WABA is subscribed.
    pub(crate) async fn ensure_subscribed(&self, token: &str, waba_id: &str) -> bool {
        let graph = &self.shared().graph;
        let ours = |apps: &[serde_json::Value]| {
            apps.iter().any(|a| match &self.shared().config.app_id {
                Some(id) => a["whatsapp_business_api_data"]["id"].as_str() == Some(id),
                None => true,
            })
        };
        match graph.subscribed_apps(token, waba_id).await {
            Ok(apps) if ours(&apps) => return true,
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(waba = waba_id, code = ?e.code(), "reading subscribed apps failed")
            }
        }
        match graph.subscribe_app(token, waba_id).await {
            Ok(_) => true,
            Err(e) => {
                tracing::warn!(waba = waba_id, code = ?e.code(), "subscribing the app to the WABA failed");
                false
            }
        }
    }

    /// Proves at the provider that the number belongs to the WABA and that the token reaches
    /// that WABA: the number must be listed by `GET /{waba_id}/phone_numbers` with this token
    /// (PROVIDER.md §5.2). An account may never claim a WABA it cannot prove (issue 15).
    ///
    /// Errors: 422 `waba_invalida` when the provider refuses the WABA to this token (code 100
    /// subcode 33, 200…) or does not list the number in it; the provider's error when it is
    /// unreachable or failing.
    pub(crate) async fn prove_waba(
        &self,
        token: &str,
        waba_id: &str,
        phone_number_id: &str,
    ) -> Result<(), ActorError> {
        let refused = |why: String| {
            ActorError::Rejected {
            code: "waba_invalida",
            message: format!(
                "O número {phone_number_id} não pôde ser confirmado na WABA {waba_id} com este token: {why}. Informe a WABA a que o número pertence e um token com acesso a ela."
            ),
            details: serde_json::json!({"waba_id": waba_id, "phone_number_id": phone_number_id}),
        }
        };
        let numbers = self
            .shared()
            .graph
            .waba_phone_numbers(token, waba_id)
            .await
            .map_err(|e| match e.kind() {
                ErrorKind::InvalidCredential
                | ErrorKind::PermissionDenied
                | ErrorKind::InvalidRequest => refused(e.reason()),
                _ => ActorError::from(e),
            })?;
        if numbers.iter().any(|n| n.id == phone_number_id) {
            Ok(())
        } else {
            Err(refused("a WABA não lista esse número".into()))
        }
    }

    /// Reads a WABA at the provider and records it and its BM (owner business) in the
    /// account; returns the BM id. Failures are logged and give `None`: a channel can run
    /// without knowing its BM (decision D-020).
    pub(crate) async fn learn_waba(
        &self,
        account_id: i64,
        token: &str,
        waba_id: &str,
    ) -> Option<i64> {
        let shared = &self.shared();
        let waba = match shared.graph.waba(token, waba_id).await {
            Ok(w) => w,
            Err(e) => {
                tracing::warn!(waba_id, error = %e, "could not read the WABA; its BM stays unknown");
                return None;
            }
        };
        let bm = match &waba.owner_business_info {
            Some(owner) => shared
                .store
                .upsert_bm(
                    account_id,
                    &owner.id,
                    &owner.name,
                    waba.whatsapp_business_manager_messaging_limit.as_deref(),
                )
                .await
                .ok(),
            None => None,
        };
        let bm_id = bm.map(|b| b.id);
        // The business verification status (issue 17: a BM learnt here no longer reads
        // `unknown` until a sync); a refusal leaves it as it was.
        if let (Some(id), Some(owner)) = (bm_id, &waba.owner_business_info) {
            match shared.graph.business(token, &owner.id).await {
                Ok(b) => {
                    if let Some(v) = b.verification_status {
                        if let Err(e) = shared.store.set_bm_verification(id, &v).await {
                            tracing::error!(bm_id = id, error = %e, "could not record the verification");
                        }
                    }
                }
                Err(e) => {
                    tracing::warn!(bm_id = id, error = %e, "could not read the business node")
                }
            }
        }
        if let Err(e) = shared
            .store
            .upsert_waba(account_id, bm_id, waba_id, &waba.name)
            .await
        {
            tracing::error!(waba_id, error = %e, "could not record the WABA");
        }
        bm_id
    }

    /// Updates a channel's credentials: a new access token is validated at the provider
    /// first (nothing changes when it is refused); blank secrets keep the stored ones.
    pub async fn update_official(
        &self,
        account_id: i64,
        channel_id: i64,
        req: UpdateOfficial,
    ) -> Result<ChannelSnapshot, ActorError> {
        let record = self
            .shared()
            .store
            .channel(AccountId(account_id), ChannelId(channel_id))
            .await?;
        if !record.official {
            return Err(ActorError::Rejected {
                code: "not_official",
                message: "Este número é de um provedor alternativo; não tem configuração oficial."
                    .into(),
                details: serde_json::json!({"engine": record.engine}),
            });
        }
        if let Some(token) = &req.access_token {
            self.shared()
                .graph
                .phone_number(token.expose(), &record.phone_number_id)
                .await
                .map_err(token_check_error)?;
            self.prove_waba(token.expose(), &record.waba_id, &record.phone_number_id)
                .await?;
        }
        self.shared()
            .store
            .update_channel_credentials(
                channel_id,
                req.name.as_deref().filter(|n| !n.trim().is_empty()),
                req.access_token.as_ref(),
                req.app_secret.as_ref(),
                req.verify_token.as_deref().filter(|v| !v.is_empty()),
            )
            .await?;
        if record.bm_id.is_none() {
            if let Some(token) = &req.access_token {
                if let Some(bm) = self
                    .learn_waba(account_id, token.expose(), &record.waba_id)
                    .await
                {
                    self.shared().store.set_channel_bm(channel_id, bm).await?;
                }
            }
        }
        let located = self
            .locate(AccountId(account_id), ChannelId(channel_id))
            .await?;
        self.ask_snapshot(&located, ChannelAsk::Reload).await
    }

    /// Re-reads the number at the provider (`POST /channels/{id}/sync` and `/verify`).
    pub async fn sync_channel(
        &self,
        account_id: i64,
        channel_id: i64,
    ) -> Result<ChannelSnapshot, ActorError> {
        let located = match self
            .locate(AccountId(account_id), ChannelId(channel_id))
            .await
        {
            Ok(l) => l,
            // A number of an alternative provider: its sender's templates are read again.
            Err(ActorError::NotFound) => {
                let record = self.alternative_record(account_id, channel_id).await?;
                return self.sync_alternative(record).await;
            }
            Err(e) => return Err(e),
        };
        self.ask_snapshot(&located, ChannelAsk::Sync).await
    }
}

/// The error of a provider call that checks a token an operator just gave: a token the
/// provider refuses, or one without access to the number, is the operator's to fix
/// ([`ActorError::CredentialRefused`], 422); anything else is the provider's.
fn token_check_error(e: ProviderError) -> ActorError {
    match e.kind() {
        ErrorKind::InvalidCredential | ErrorKind::PermissionDenied | ErrorKind::InvalidRequest => {
            ActorError::CredentialRefused(e.reason())
        }
        _ => ActorError::from(e),
    }
}

/// The two-step PIN of a number registered by embedded signup: the one given (6 digits), else
/// a random one.
///
/// Errors: `invalid_pin`.
fn signup_pin(pin: Option<Secret>) -> Result<Secret, ActorError> {
    match pin {
        Some(p) if p.expose().len() == 6 && p.expose().bytes().all(|b| b.is_ascii_digit()) => Ok(p),
        Some(_) => Err(engine::ValidationError::new(
            "invalid_pin",
            "pin",
            "O PIN deve ter exatamente 6 dígitos.",
        )
        .into()),
        None => Ok(Secret::new(format!(
            "{:06}",
            rand::thread_rng().gen_range(0..1_000_000)
        ))),
    }
}
