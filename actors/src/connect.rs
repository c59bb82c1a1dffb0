//! Connecting an official (Cloud API) channel: the credential is validated at the provider
//! before anything is stored.

use crate::error::ActorError;
use crate::supervisor::SupervisorMsg;
use crate::Runtime;
use engine::channel::{ChannelStatus, Quality, Tier};
use engine::phone::Phone;
use engine::Secret;
use provider::ErrorKind;
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

impl Runtime {
    /// Validates the credential by reading the number at the provider, stores the channel
    /// (secrets sealed) and starts its actor.
    ///
    /// Errors: [`ActorError::CredentialRefused`] when the provider refuses the token or does
    /// not know the number (nothing is stored); [`ActorError::ProviderRefused`] when the
    /// provider is unreachable or failing; [`ActorError::Conflict`] when the number is already
    /// connected.
    pub async fn connect_official(
        &self,
        account_id: i64,
        req: ConnectOfficial,
    ) -> Result<(ChannelRecord, Verification), ActorError> {
        let shared = &self.shared;
        let number = shared
            .graph
            .phone_number(req.access_token.expose(), &req.phone_number_id)
            .await
            .map_err(|e| match e.kind() {
                ErrorKind::InvalidCredential
                | ErrorKind::PermissionDenied
                | ErrorKind::InvalidRequest => ActorError::CredentialRefused(e.reason()),
                _ => ActorError::from(e),
            })?;
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
        };
        let record = shared.store.insert_channel(&new).await?;
        self.start_channel(record.id).await?;
        Ok((
            record,
            Verification {
                ok: true,
                display_phone_number: display,
                verified_name,
            },
        ))
    }

    /// Starts (or confirms running) the actor of a stored channel.
    pub async fn start_channel(&self, channel_id: i64) -> Result<(), ActorError> {
        let res = self
            .supervisor
            .call(
                |r| SupervisorMsg::Start(channel_id, r),
                Some(self.shared.config.call_timeout),
            )
            .await
            .map_err(|_| ActorError::Unavailable)?;
        match crate::call_result(res)? {
            Ok(()) => Ok(()),
            Err(e) => {
                tracing::error!(channel_id, error = e, "channel actor did not start");
                Err(ActorError::Unavailable)
            }
        }
    }
}
