//! Account-level operations: registering numbers on a WABA, BM payment checks and syncs,
//! approved templates at the provider, and the overview / WABA / BM views (spec "WABAs, BMs,
//! overview, linking numbers").

use crate::Services;
use actors::cluster::Control;
use actors::error::ActorError;
use actors::protocol::ChannelSnapshot;
use engine::channel::{ChannelStatus, HealthCode, Tone};
use engine::ids::{AccountId, ChannelId};
use engine::phone::Phone;
use engine::{Secret, ValidationError};
use provider::ErrorKind;
use rand::Rng;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use storage::bms::{BmRecord, WabaRecord};
use storage::channels::{ChannelRecord, NewChannel};

/// `POST /wabas/{waba}/numbers` input.
#[derive(Debug, Clone)]
pub struct AddNumber {
    /// National number: area code + 8 or 9 digits, without the country code.
    pub phone: String,
    /// Display name, at least 3 characters.
    pub verified_name: String,
    /// Country calling code (default `55`).
    pub cc: String,
    /// `SMS` (default), `VOICE` or `NONE` (ask for the code later).
    pub method: String,
    /// Join the sending group of the number that lent the credential (D-037).
    pub same_group: bool,
}

/// `POST /wabas/{waba}/numbers` result.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct AddedNumber {
    /// pt-BR summary.
    pub message: String,
    /// The new channel (status PENDING until registered).
    pub channel_id: i64,
    /// Digits with country code.
    pub phone: String,
    /// Whether a code was requested now.
    pub code_requested: bool,
    /// The WABA's BM, when known.
    pub bm_id: Option<i64>,
}

/// `POST /channels/{id}/verify-code` result.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct CodeVerified {
    /// True when the number is registered and sending.
    pub active: bool,
    /// True when the number has two-step verification: finish with `POST /register` and
    /// its 6-digit PIN.
    pub pin_required: bool,
    /// pt-BR summary.
    pub message: String,
}

/// Validates a Brazilian national number (spec: area code plus 8 or 9 digits, no 55).
pub fn parse_national(cc: &str, phone: &str) -> Result<String, ValidationError> {
    let digits: String = phone.chars().filter(char::is_ascii_digit).collect();
    if phone
        .chars()
        .any(|c| !(c.is_ascii_digit() || " -().".contains(c)))
    {
        return Err(ValidationError::new(
            "invalid_phone",
            "phone",
            "`phone` deve ter só dígitos: DDD e número, sem o 55.",
        ));
    }
    if cc == "55" {
        let area_ok = digits.len() >= 2
            && digits[..2]
                .parse::<u32>()
                .is_ok_and(|a| (11..=99).contains(&a) && a % 10 != 0);
        if !(10..=11).contains(&digits.len()) || !area_ok {
            return Err(ValidationError::new(
                "invalid_phone",
                "phone",
                "`phone` deve ser DDD + número de 8 ou 9 dígitos, sem o 55 (por exemplo 11988887777).",
            ));
        }
    } else if !(6..=13).contains(&digits.len()) {
        return Err(ValidationError::new(
            "invalid_phone",
            "phone",
            "`phone` deve ter de 6 a 13 dígitos, sem o código do país.",
        ));
    }
    Ok(digits)
}

fn random_pin() -> Secret {
    let mut rng = rand::thread_rng();
    Secret::new(
        (0..6)
            .map(|_| char::from(b'0' + rng.gen_range(0..10u8)))
            .collect::<String>(),
    )
}

/// A WABA as `GET /wabas` shows it.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct WabaView {
    /// The provider's WABA id.
    pub id: String,
    /// Name.
    pub name: String,
    /// Its BM `{id, name}`.
    pub bm: Option<BmRef>,
    /// A number of the account in this WABA has a working credential (it can add numbers).
    pub has_credential: bool,
    /// `ok`, `restricted`, `banned`, `violation`.
    pub standing: String,
    /// `good`, `attention` or `bad`: the worst of its numbers and its standing.
    #[schema(pattern = "^(good|attention|bad)$")]
    pub health: String,
    /// The library's templates in this WABA by status (`approved`, `pending`, …), each
    /// counted once (issue 17).
    pub layouts_by_status: BTreeMap<String, i64>,
    /// The provider's reason the last time adding a number failed.
    pub last_upload_failure: Option<String>,
    /// Its numbers with their health.
    pub numbers: Vec<NumberHealth>,
}

/// Numbers summary of the overview.
#[derive(Debug, Clone, Default, Serialize, utoipa::ToSchema)]
pub struct NumbersSummary {
    /// All numbers.
    pub total: i64,
    /// Tone ok.
    pub good: i64,
    /// Tone attention.
    pub attention: i64,
    /// Tone bad.
    pub bad: i64,
    /// Count per health code.
    pub by_code: BTreeMap<String, i64>,
}

/// One item of `needs_action`.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct NeedsAction {
    /// `number`, `waba`, `bm` or `alert` (the provider's `account_alerts`, D-074).
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// Id of the record (channel id, provider WABA id, BM id).
    pub id: String,
    /// Its name.
    pub name: String,
    /// pt-BR label.
    pub label: String,
    /// Stable code.
    pub code: String,
    /// What to do.
    pub next_action: Option<String>,
    #[serde(skip)]
    rank: HealthCode,
}

/// The account overview.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct Overview {
    /// Numbers by health.
    pub numbers: NumbersSummary,
    /// BMs by situation: `{total, good, payment_problem}`.
    pub bms: BTreeMap<String, i64>,
    /// WABAs with no number in the account.
    pub wabas_without_number: Vec<String>,
    /// WABAs with no working credential.
    pub wabas_without_credential: Vec<String>,
    /// What needs action, worst first.
    pub needs_action: Vec<NeedsAction>,
}

impl Services {
    fn lending_channel(&self, channels: &[ChannelRecord]) -> Option<ChannelRecord> {
        channels.iter().find(|c| c.credential_valid).cloned()
    }

    /// A BM of the account, its channels, and the credentials of one whose token works (the
    /// BM's numbers share the business token).
    pub(crate) async fn bm_credential(
        &self,
        account_id: i64,
        bm_id: i64,
    ) -> Result<
        (
            BmRecord,
            Vec<ChannelRecord>,
            storage::channels::ChannelSecrets,
        ),
        ActorError,
    > {
        let store = &self.shared().store;
        let bm = store.bm(account_id, bm_id).await?;
        let channels = store.channels_of_bm(bm_id).await?;
        // The BM's own system-user token (the panel's) first; else a number's that works.
        let own = store.bm_secrets(bm_id).await?;
        if let Some(access_token) = own.access_token {
            let app_secret = match own.app_secret {
                Some(s) => Some(s),
                None => match self.lending_channel(&channels) {
                    Some(l) => store.channel_secrets(l.id).await?.app_secret,
                    None => None,
                },
            };
            return Ok((
                bm,
                channels,
                storage::channels::ChannelSecrets {
                    access_token,
                    app_secret,
                },
            ));
        }
        let lender = self
            .lending_channel(&channels)
            .ok_or(ActorError::CredentialRefused(
                "nenhum número deste BM tem credencial válida e o BM não tem access_token".into(),
            ))?;
        let secrets = store.channel_secrets(lender.id).await?;
        Ok((bm, channels, secrets))
    }

    /// Adds a number to a WABA of the account with the credential of a number already in it,
    /// requests the code (unless `method` is `NONE`) and records the channel as PENDING.
    pub async fn add_number(
        &self,
        account_id: i64,
        waba_id: &str,
        req: AddNumber,
    ) -> Result<AddedNumber, ActorError> {
        let store = &self.shared().store;
        let channels = store.channels_of_waba(account_id, waba_id).await?;
        let waba = store.waba_by_provider_id(account_id, waba_id).await.ok();
        if channels.is_empty() && waba.is_none() {
            return Err(ActorError::NotFound);
        }
        let (method, national) = check_new_number(&req)?;
        let Some(lender) = self.lending_channel(&channels) else {
            return Err(ValidationError::new(
                "no_credential",
                "waba",
                "Nenhum número desta WABA tem uma credencial válida para criar números (has_credential false).",
            )
            .into());
        };
        let secrets = store.channel_secrets(lender.id).await?;
        let token = secrets.access_token.expose();
        let added = self
            .shared()
            .graph
            .add_phone_number(token, waba_id, &req.cc, &national, req.verified_name.trim())
            .await;
        // The WABA shows the provider's reason while adding numbers fails.
        if let Some(w) = &waba {
            let failure = added.as_ref().err().map(|e| e.reason());
            let _ = store
                .set_waba_upload_failure(w.id, failure.as_deref())
                .await;
        }
        let phone_number_id = added?;
        let phone = format!("{}{}", req.cc, national);
        let record = store
            .insert_channel(&NewChannel {
                account_id,
                name: req.verified_name.trim().to_string(),
                phone: phone.clone(),
                phone_number_id: phone_number_id.clone(),
                waba_id: waba_id.to_string(),
                verified_name: req.verified_name.trim().to_string(),
                status: ChannelStatus::Pending.as_str().to_string(),
                quality: "UNKNOWN".into(),
                tier: lender.tier.clone(),
                access_token: secrets.access_token.clone(),
                app_secret: secrets.app_secret.clone(),
                verify_token: crate::connect::random_verify_token(),
                bm_id: lender.bm_id,
            })
            .await?;
        // `same_group`: the new number joins the lender's sending group (D-037).
        let group = lender.group_id.filter(|_| req.same_group);
        if let Some(group_id) = group {
            store
                .set_channels_group(&[record.id], Some(group_id))
                .await?;
        }
        self.start_channel(record.id).await?;
        self.replicate_in_background(account_id, record.id);
        if let Some(group_id) = group {
            self.refresh_group(group_id).await;
        }
        if method != "NONE" {
            self.first_code(token, record.id, &phone_number_id, &method)
                .await?;
        }
        Ok(added_number(record.id, phone, &method, lender.bm_id))
    }

    /// Asks the provider for a new number's first verification code; a refusal says which
    /// channel the number now is, so the code can be asked again.
    async fn first_code(
        &self,
        token: &str,
        channel_id: i64,
        phone_number_id: &str,
        method: &str,
    ) -> Result<(), ActorError> {
        let graph = &self.shared().graph;
        match graph
            .request_code(token, phone_number_id, method, "pt_BR")
            .await
        {
            Ok(_) => Ok(()),
            // The number exists now: say which channel it is, so the code can be asked
            // again with POST /channels/{id}/request-code.
            Err(e) => {
                let context = format!("número criado (canal {channel_id}; peça o código de novo com POST /channels/{channel_id}/request-code), mas o envio do código falhou");
                let extra = serde_json::json!({"channel_id": channel_id});
                Err(ActorError::from(e).with_provider_context(&context, extra))
            }
        }
    }

    /// Asks the provider to send the verification code (`SMS` or `VOICE`).
    pub async fn request_code(
        &self,
        account_id: i64,
        channel_id: i64,
        method: &str,
    ) -> Result<String, ActorError> {
        let method = method.to_ascii_uppercase();
        if !["SMS", "VOICE"].contains(&method.as_str()) {
            return Err(ValidationError::new(
                "invalid_method",
                "method",
                "`method` deve ser SMS ou VOICE.",
            )
            .into());
        }
        let (record, token) = self.channel_with_token(account_id, channel_id).await?;
        self.shared()
            .graph
            .request_code(token.expose(), &record.phone_number_id, &method, "pt_BR")
            .await?;
        Ok(format!("Código solicitado por {method}."))
    }

    /// Verifies the code; when the number has no two-step PIN, registers it at once with a
    /// generated PIN (stored sealed) and activates it.
    pub async fn verify_code(
        &self,
        account_id: i64,
        channel_id: i64,
        code: &str,
    ) -> Result<CodeVerified, ActorError> {
        let digits: String = code.chars().filter(char::is_ascii_digit).collect();
        if digits.len() != 6 {
            return Err(
                ValidationError::new("invalid_code", "code", "`code` deve ter 6 dígitos.").into(),
            );
        }
        let (record, token) = self.channel_with_token(account_id, channel_id).await?;
        let graph = &self.shared().graph;
        graph
            .verify_code(token.expose(), &record.phone_number_id, &digits)
            .await
            .map_err(operator_mistake)?;
        let number = graph
            .phone_number(token.expose(), &record.phone_number_id)
            .await?;
        if number.is_pin_enabled == Some(true) {
            return Ok(CodeVerified {
                active: false,
                pin_required: true,
                message: "Código confirmado. Este número tem verificação em duas etapas: conclua com POST /register e o PIN de 6 dígitos.".into(),
            });
        }
        let pin = random_pin();
        graph
            .register(token.expose(), &record.phone_number_id, pin.expose())
            .await?;
        self.shared()
            .store
            .set_channel_pin(channel_id, &pin)
            .await?;
        self.activate(account_id, channel_id).await?;
        Ok(CodeVerified {
            active: true,
            pin_required: false,
            message: "Código confirmado e número registrado.".into(),
        })
    }

    /// Registers the number with its 6-digit PIN and activates it.
    pub async fn register(
        &self,
        account_id: i64,
        channel_id: i64,
        pin: &str,
    ) -> Result<ChannelSnapshot, ActorError> {
        if pin.len() != 6 || !pin.bytes().all(|b| b.is_ascii_digit()) {
            return Err(ValidationError::new(
                "invalid_pin",
                "pin",
                "O PIN deve ter exatamente 6 dígitos.",
            )
            .into());
        }
        let (record, token) = self.channel_with_token(account_id, channel_id).await?;
        self.shared()
            .graph
            .register(token.expose(), &record.phone_number_id, pin)
            .await
            .map_err(operator_mistake)?;
        self.shared()
            .store
            .set_channel_pin(channel_id, &Secret::new(pin))
            .await?;
        self.activate(account_id, channel_id).await
    }

    async fn activate(
        &self,
        account_id: i64,
        channel_id: i64,
    ) -> Result<ChannelSnapshot, ActorError> {
        self.sync_channel(account_id, channel_id).await
    }

    /// Approved templates of the number at the provider (`GET /channels/{id}/templates`).
    pub async fn provider_templates(
        &self,
        account_id: i64,
        channel_id: i64,
    ) -> Result<Vec<provider::wire::TemplateInfo>, ActorError> {
        let (record, token) = self.channel_with_token(account_id, channel_id).await?;
        if !record.official {
            return self.alternative_templates(&record).await;
        }
        let all = self
            .shared()
            .graph
            .list_templates(token.expose(), &record.waba_id)
            .await?;
        Ok(all.into_iter().filter(|t| t.status == "APPROVED").collect())
    }

    /// Checks the BM's payment at the provider (the WABA's `health_status` reports payment
    /// problems as error 141006); when paid, the BM's numbers locked by payment are released at
    /// once. Returns the BM and whether it is paid.
    pub async fn payment_check_bm(
        &self,
        account_id: i64,
        bm_id: i64,
    ) -> Result<(BmRecord, bool), ActorError> {
        let store = &self.shared().store;
        let (_, channels, secrets) = self.bm_credential(account_id, bm_id).await?;
        let token = secrets.access_token;
        let mut paid = true;
        let wabas: Vec<String> = {
            let mut w: Vec<String> = channels.iter().map(|c| c.waba_id.clone()).collect();
            w.sort();
            w.dedup();
            w
        };
        for waba_id in wabas {
            let waba = self.shared().graph.waba(token.expose(), &waba_id).await?;
            if waba.health_error_codes().contains(&141006) {
                paid = false;
            }
        }
        store.set_bm_payment(bm_id, paid).await?;
        if paid {
            for c in &channels {
                store.set_channel_payment_lock(c.id, None).await?;
                if let Err(e) = self.notify_channel(c.id, Control::PaymentReleased).await {
                    tracing::warn!(channel_id = c.id, error = %e, "payment release not told");
                }
            }
        }
        Ok((store.bm(account_id, bm_id).await?, paid))
    }

    /// `POST /channels/{id}/payment-check`: the payment check of the channel's BM.
    pub async fn payment_check_channel(
        &self,
        account_id: i64,
        channel_id: i64,
    ) -> Result<bool, ActorError> {
        let record = self
            .shared()
            .store
            .channel(AccountId(account_id), ChannelId(channel_id))
            .await?;
        let bm_id = match record.bm_id {
            Some(b) => b,
            None => {
                let token = self
                    .shared()
                    .store
                    .channel_secrets(channel_id)
                    .await?
                    .access_token;
                let bm = self
                    .learn_waba(account_id, token.expose(), &record.waba_id)
                    .await
                    .ok_or(ActorError::NotFound)?;
                self.shared().store.set_channel_bm(channel_id, bm).await?;
                bm
            }
        };
        Ok(self.payment_check_bm(account_id, bm_id).await?.1)
    }

    /// Re-reads a BM at the provider: its WABAs and their numbers. Numbers new at the
    /// provider become channels (with the BM's credential); channels whose number vanished
    /// are listed and marked DISCONNECTED. Also refreshes payment and tier.
    pub async fn sync_bm(&self, account_id: i64, bm_id: i64) -> Result<BmSyncResult, ActorError> {
        let store = &self.shared().store;
        let (bm, channels, secrets) = self.bm_credential(account_id, bm_id).await?;
        let Some(business_id) = bm.provider_id().map(str::to_string) else {
            return Err(ActorError::Rejected {
                code: "bm_sem_id_provider",
                message: "Informe o id_provider (Business ID) do BM antes de sincronizar.".into(),
                details: serde_json::json!({"field": "id_provider"}),
            });
        };
        let token = secrets.access_token.expose().to_string();
        let wabas = self.owned_wabas(bm_id, &token, &business_id).await?;
        let verification = match self.shared().graph.business(&token, &business_id).await {
            Ok(b) => b.verification_status,
            Err(e) => {
                tracing::warn!(bm_id, error = %e, "could not read the business node");
                None
            }
        };
        let sync = BmSync {
            account_id,
            bm_id,
            token: &token,
            channels: &channels,
            secrets: &secrets,
        };
        let mut found = Found::default();
        for w in &wabas {
            self.sync_waba(&sync, w, &mut found).await?;
        }
        let missing = self.mark_missing(&channels, &found.seen).await?;
        store
            .set_bm_synced(bm_id, found.tier.as_deref(), verification.as_deref())
            .await?;
        // Existing numbers are re-read too: quality, tier, status and name.
        for c in channels
            .iter()
            .filter(|c| found.seen.contains(&c.phone_number_id))
        {
            if let Err(e) = self.sync_channel(account_id, c.id).await {
                tracing::warn!(channel_id = c.id, error = %e, "number not refreshed by the BM sync");
            }
        }
        let (bm, paid) = self.payment_check_bm(account_id, bm_id).await?;
        let health = self.bm_health(&bm).await?;
        store.set_bm_health(bm_id, health, None).await?;
        if let Some(tier) = bm.tier.as_deref().and_then(engine::channel::Tier::parse) {
            self.apply_bm_limit(bm_id, &tier).await?;
        }
        Ok(BmSyncResult {
            created_numbers: found.created,
            missing_numbers: missing,
            bm_id,
            good: paid && health == "ok",
            health_status: health.to_string(),
            wabas: found.wabas,
            templates_imported: found.templates_imported,
            photos: found.photos,
        })
    }

    /// The WABAs a BM owns at the provider; a refused token marks the BM
    /// `credencial_invalida` and answers `CredentialRefused`.
    async fn owned_wabas(
        &self,
        bm_id: i64,
        token: &str,
        business_id: &str,
    ) -> Result<Vec<provider::wire::Waba>, ActorError> {
        match self.shared().graph.owned_wabas(token, business_id).await {
            Ok(w) => Ok(w),
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::InvalidCredential | ErrorKind::PermissionDenied
                ) =>
            {
                self.shared()
                    .store
                    .set_bm_health(bm_id, "credencial_invalida", None)
                    .await?;
                Err(ActorError::CredentialRefused(e.reason()))
            }
            Err(e) => Err(e.into()),
        }
    }

    /// One WABA of a BM sync: its tier and standing as the provider lists its numbers, the
    /// numbers not yet connected adopted as channels, its templates imported and its numbers'
    /// profile pictures read.
    async fn sync_waba(
        &self,
        sync: &BmSync<'_>,
        w: &provider::wire::Waba,
        found: &mut Found,
    ) -> Result<(), ActorError> {
        let (store, graph) = (&self.shared().store, &self.shared().graph);
        let detail = graph.waba(sync.token, &w.id).await?;
        found.tier = found
            .tier
            .take()
            .or(detail.whatsapp_business_manager_messaging_limit.clone());
        let waba = store
            .upsert_waba(sync.account_id, Some(sync.bm_id), &w.id, &w.name)
            .await?;
        let listed = graph.waba_phone_numbers(sync.token, &w.id).await?;
        self.standing_from_listing(sync.account_id, &waba, &listed)
            .await?;
        found.wabas.push(SyncedWaba {
            id_provider: w.id.clone(),
            nome: w.name.clone(),
            numeros: listed.len(),
        });
        let ids: Vec<String> = listed.iter().map(|n| n.id.clone()).collect();
        for n in listed {
            found.seen.insert(n.id.clone());
            if sync.channels.iter().any(|c| c.phone_number_id == n.id) {
                continue;
            }
            if let Some(adopted) = self.adopt_number(sync, &w.id, &n).await? {
                found.created.push(adopted);
            }
        }
        // With all of the WABA's numbers as channels: its templates and profile pictures.
        found.templates_imported += self
            .import_templates(sync.account_id, sync.token, &w.id)
            .await?;
        found.photos += self.read_photos(sync, &ids).await?;
        Ok(())
    }

    /// A WABA's standing as its numbers' provider `status` tells it (PROVIDER.md §4.1): a
    /// BANNED or RESTRICTED number, or back to ok when a sync had set it; applied to the
    /// WABA's running numbers (a webhook may have said it first).
    async fn standing_from_listing(
        &self,
        account_id: i64,
        waba: &storage::bms::WabaRecord,
        listed: &[provider::wire::PhoneNumber],
    ) -> Result<(), ActorError> {
        let any = |s: &str| listed.iter().any(|n| n.status.as_deref() == Some(s));
        let standing = if any("BANNED") {
            Some(("banned", engine::channel::WabaStanding::Banned))
        } else if any("RESTRICTED") {
            Some(("restricted", engine::channel::WabaStanding::Restricted))
        } else if waba.standing != "ok" && waba.standing_detail.as_deref() == Some(SYNC_DETAIL) {
            Some(("ok", engine::channel::WabaStanding::Ok))
        } else {
            None
        };
        if let Some((name, live)) = standing.filter(|(n, _)| *n != waba.standing) {
            let detail = (name != "ok").then_some(SYNC_DETAIL);
            // A reading at the provider is as new as it gets: stamped now.
            self.shared()
                .store
                .set_waba_standing(waba.id, name, detail, self.shared().now_ms())
                .await?;
            self.notify_waba(account_id, &waba.provider_waba_id, Control::Standing(live))
                .await;
        }
        Ok(())
    }

    /// A number the provider lists under a WABA of the BM, stored as a channel with the BM's
    /// credential, started and given the library's templates; `None` when it is connected in
    /// another account.
    async fn adopt_number(
        &self,
        sync: &BmSync<'_>,
        waba_id: &str,
        n: &provider::wire::PhoneNumber,
    ) -> Result<Option<SyncedNumber>, ActorError> {
        let store = &self.shared().store;
        let display = n.display_phone_number.clone().unwrap_or_default();
        let status = match n.status.as_deref() {
            None | Some("CONNECTED") => ChannelStatus::Working,
            Some("PENDING") | Some("UNVERIFIED") => ChannelStatus::Pending,
            Some(_) => ChannelStatus::Disconnected,
        };
        let new = NewChannel {
            account_id: sync.account_id,
            name: n.verified_name.clone().unwrap_or_default(),
            phone: Phone::from_provider_display(&display).as_str().to_string(),
            phone_number_id: n.id.clone(),
            waba_id: waba_id.to_string(),
            verified_name: n.verified_name.clone().unwrap_or_default(),
            status: status.as_str().to_string(),
            quality: engine::channel::Quality::parse(
                n.quality_rating.as_deref().unwrap_or("UNKNOWN"),
            )
            .as_str()
            .to_string(),
            tier: n.tier().map(str::to_string),
            access_token: sync.secrets.access_token.clone(),
            app_secret: sync.secrets.app_secret.clone(),
            verify_token: crate::connect::random_verify_token(),
            bm_id: Some(sync.bm_id),
        };
        let rec = match store.insert_channel(&new).await {
            Ok(r) => r,
            Err(storage::StorageError::Conflict(_)) => return Ok(None), // another account's
            Err(e) => return Err(e.into()),
        };
        store
            .set_channel_throughput(rec.id, i64::from(n.throughput_mps()))
            .await?;
        self.start_channel(rec.id).await?;
        self.replicate_in_background(sync.account_id, rec.id);
        Ok(Some(SyncedNumber {
            channel_id: rec.id,
            phone: rec.phone.clone(),
            phone_number_id: rec.phone_number_id.clone(),
        }))
    }

    /// The profile pictures of the numbers `ids` read at the provider and stored where they
    /// changed; how many numbers have one.
    async fn read_photos(&self, sync: &BmSync<'_>, ids: &[String]) -> Result<usize, ActorError> {
        let store = &self.shared().store;
        let mut photos = 0;
        for id in ids {
            let Ok(p) = self.shared().graph.business_profile(sync.token, id).await else {
                continue;
            };
            if let Some(c) = store
                .channel_by_phone_number_id(sync.account_id, id)
                .await?
            {
                if c.photo_url != p.profile_picture_url {
                    store
                        .set_channel_photo(c.id, p.profile_picture_url.as_deref())
                        .await?;
                }
                photos += usize::from(p.profile_picture_url.is_some());
            }
        }
        Ok(photos)
    }

    /// The BM's numbers the provider no longer lists (`seen` holds those it lists): each
    /// marked disconnected and its actor told to re-read it.
    async fn mark_missing(
        &self,
        channels: &[storage::channels::ChannelRecord],
        seen: &std::collections::HashSet<String>,
    ) -> Result<Vec<SyncedNumber>, ActorError> {
        let mut missing = Vec::new();
        for c in channels
            .iter()
            .filter(|c| !seen.contains(&c.phone_number_id))
        {
            missing.push(SyncedNumber {
                channel_id: c.id,
                phone: c.phone.clone(),
                phone_number_id: c.phone_number_id.clone(),
            });
            self.shared()
                .store
                .set_channel_status(c.id, ChannelStatus::Disconnected.as_str())
                .await?;
            if self.notify_channel(c.id, Control::Reload).await.is_err() {
                tracing::warn!(channel_id = c.id, "could not reload a vanished channel");
            }
        }
        Ok(missing)
    }

    /// The account overview: numbers by health, BMs, WABAs without number or credential, and
    /// what needs action, worst first.
    pub async fn overview(&self, account_id: i64) -> Result<Overview, ActorError> {
        let snapshots = self.list_channels(account_id).await?;
        let store = &self.shared().store;
        let bms = store.list_bms(account_id).await?;
        let wabas = store.list_wabas(account_id).await?;
        let (numbers, mut needs) = numbers_summary(&snapshots);
        needs.extend(wabas.iter().filter_map(waba_need));
        needs.extend(bms.iter().filter(|b| !b.payment_ok).map(bm_need));
        // The provider's `account_alerts` still active (D-074), ranked by severity.
        let alerts = store.active_provider_alerts(account_id, 50).await?;
        needs.extend(alerts.iter().map(alert_need));
        // Worst first; a WABA before its numbers for the same code.
        needs.sort_by_key(|n| (n.rank, n.kind != "waba", n.kind != "bm"));
        let mut by_waba: HashMap<&str, Vec<&ChannelSnapshot>> = HashMap::new();
        for s in &snapshots {
            by_waba
                .entry(s.record.waba_id.as_str())
                .or_default()
                .push(s);
        }
        let mut bm_summary = BTreeMap::new();
        let good = bms.iter().filter(|b| b.payment_ok).count() as i64;
        bm_summary.insert("total".to_string(), bms.len() as i64);
        bm_summary.insert("good".to_string(), good);
        bm_summary.insert("payment_problem".to_string(), bms.len() as i64 - good);
        let ids = |keep: &dyn Fn(&&storage::bms::WabaRecord) -> bool| -> Vec<String> {
            wabas
                .iter()
                .filter(keep)
                .map(|w| w.provider_waba_id.clone())
                .collect()
        };
        Ok(Overview {
            numbers,
            bms: bm_summary,
            wabas_without_number: ids(&|w| !by_waba.contains_key(w.provider_waba_id.as_str())),
            wabas_without_credential: ids(&|w| {
                !by_waba
                    .get(w.provider_waba_id.as_str())
                    .is_some_and(|cs| cs.iter().any(|c| c.record.credential_valid))
            }),
            needs_action: needs,
        })
    }

    /// The account's WABAs with their BM, credential, standing and numbers' health;
    /// `health` filters by `good`, `attention` or `bad`.
    pub async fn wabas(
        &self,
        account_id: i64,
        health: Option<&str>,
    ) -> Result<Vec<WabaView>, ActorError> {
        let snapshots = self.list_channels(account_id).await?;
        let bms: HashMap<i64, BmRecord> = self
            .shared()
            .store
            .list_bms(account_id)
            .await?
            .into_iter()
            .map(|b| (b.id, b))
            .collect();
        let wabas = self.shared().store.list_wabas(account_id).await?;
        let mut layouts: HashMap<String, BTreeMap<String, i64>> = HashMap::new();
        for (waba, status, n) in self.shared().store.layouts_by_waba(account_id).await? {
            layouts.entry(waba).or_default().insert(status, n);
        }
        let mut out = Vec::new();
        for w in wabas {
            let mine: Vec<&ChannelSnapshot> = snapshots
                .iter()
                .filter(|s| s.record.waba_id == w.provider_waba_id)
                .collect();
            let mut view = waba_view(&w, w.bm_id.and_then(|id| bms.get(&id)), &mine);
            view.layouts_by_status = layouts.remove(&w.provider_waba_id).unwrap_or_default();
            if health.is_none_or(|h| h == view.health) {
                out.push(view);
            }
        }
        Ok(out)
    }

    /// A BM with its payment, sending headroom and numbers.
    pub async fn bm_view(&self, account_id: i64, bm_id: i64) -> Result<BmView, ActorError> {
        let bm = self.shared().store.bm(account_id, bm_id).await?;
        let snapshots: Vec<ChannelSnapshot> = self
            .list_channels(account_id)
            .await?
            .into_iter()
            .filter(|s| s.record.bm_id == Some(bm_id))
            .collect();
        let counter = self.shared().bm_counter(bm_id).await?;
        let now = self.shared().now_ms();
        let engine::limits::LimitReading {
            used: sent,
            available,
            limit,
        } = counter.with(|c| c.reading(now));
        let banned = self
            .shared()
            .store
            .list_wabas(account_id)
            .await?
            .iter()
            .any(|w| w.bm_id == Some(bm_id) && w.standing == "banned");
        Ok(BmView {
            id: bm.id,
            good: bm.payment_ok && !banned,
            verification: bm
                .verification_status
                .clone()
                .unwrap_or_else(|| "unknown".into()),
            payment: if bm.payment_ok { "ok" } else { "pending" },
            sending: BmSending {
                limit_24h: limit.unwrap_or(-1),
                sent_24h: sent,
                available: available.unwrap_or(-1),
            },
            numbers: snapshots.iter().map(|s| number_json(&s)).collect(),
            last_sync_at: bm.last_sync_at.map(actors::time::iso),
            name: bm.name,
            provider_business_id: bm.provider_business_id,
            tier: bm.tier,
        })
    }
}

/// A number a BM sync created or found gone (`BmSyncResult`).
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct SyncedNumber {
    /// The channel.
    pub channel_id: i64,
    /// Its phone (digits with country code).
    pub phone: String,
    /// The provider's phone number id.
    pub phone_number_id: String,
}

/// A WABA a BM sync found at the provider (`BmSyncResult.wabas`).
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct SyncedWaba {
    /// The WABA's id at the provider.
    pub id_provider: String,
    /// Its name.
    pub nome: String,
    /// How many numbers the provider lists on it.
    pub numeros: usize,
}

/// What `POST /bms/{id}/sync` found.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct BmSyncResult {
    /// Numbers at the provider that became channels.
    pub created_numbers: Vec<SyncedNumber>,
    /// Channels whose number is gone at the provider (now disconnected).
    pub missing_numbers: Vec<SyncedNumber>,
    /// The BM.
    pub bm_id: i64,
    /// Payment ok and nothing banned.
    pub good: bool,
    /// The BM's health after the sync (D-055): `ok`, `banido`, `restrito`,
    /// `pagamento_pendente`, `credencial_invalida`.
    pub health_status: String,
    /// The WABAs found.
    pub wabas: Vec<SyncedWaba>,
    /// Templates of the WABAs that were new to the library or to a number.
    pub templates_imported: usize,
    /// Numbers with a profile picture at the provider.
    pub photos: usize,
}

/// The standing detail of a WABA whose ban or restriction was read by a sync (a later sync
/// that finds it clear may clear it; one a webhook set waits for the webhook's reinstatement).
const SYNC_DETAIL: &str = "status do número no provedor (sincronização)";

/// A number of a WABA or BM with its live health.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct NumberHealth {
    /// The channel.
    pub channel_id: i64,
    /// Digits with country code.
    pub phone: String,
    /// Display name.
    pub name: String,
    /// `WORKING`, `PENDING` or `DISCONNECTED`.
    #[schema(value_type = engine::channel::ChannelStatus)]
    pub status: String,
    /// Live health.
    pub health: engine::channel::Health,
}

fn number_json(s: &&ChannelSnapshot) -> NumberHealth {
    NumberHealth {
        channel_id: s.record.id,
        phone: s.record.phone.clone(),
        name: s.record.name.clone(),
        status: s.record.status.clone(),
        health: s.health.clone(),
    }
}

/// A BM named in a record: `{id, name}`.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct BmRef {
    /// The BM's id in disparo.
    pub id: i64,
    /// Its name.
    pub name: String,
}

/// A BM as `GET /bms/{id}` shows it (spec "Account overview, WABA, BM").
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct BmView {
    /// Id in disparo.
    pub id: i64,
    /// Name.
    pub name: String,
    /// The provider's Business ID.
    pub provider_business_id: String,
    /// Payment in order and no WABA banned.
    pub good: bool,
    /// The provider's business verification (`verified`, `unknown`…).
    pub verification: String,
    /// `ok` or `pending`.
    #[schema(pattern = "^(ok|pending)$")]
    pub payment: &'static str,
    /// The BM's messaging tier (shared by its numbers), when known.
    pub tier: Option<String>,
    /// The BM's shared 24 h counter.
    pub sending: BmSending,
    /// Its numbers with their health.
    pub numbers: Vec<NumberHealth>,
    /// When it was last read from the provider (ISO 8601).
    pub last_sync_at: Option<String>,
}

/// A BM's shared 24 h sending counter.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct BmSending {
    /// Unique recipients per 24 h; `-1`: unlimited.
    pub limit_24h: i64,
    /// Unique business-initiated recipients in the last 24 h.
    pub sent_24h: i64,
    /// Headroom now; `-1`: unlimited.
    pub available: i64,
}

fn waba_view(w: &WabaRecord, bm: Option<&BmRecord>, numbers: &[&ChannelSnapshot]) -> WabaView {
    let worst = numbers
        .iter()
        .map(|s| s.health.tone)
        .max_by_key(|t| match t {
            Tone::Ok => 0,
            Tone::Attention => 1,
            Tone::Bad => 2,
        });
    let health = match (w.standing.as_str(), worst) {
        ("banned", _) | (_, Some(Tone::Bad)) => "bad",
        ("restricted", _) | (_, Some(Tone::Attention)) | (_, None) => "attention",
        _ => "good",
    };
    WabaView {
        id: w.provider_waba_id.clone(),
        name: w.name.clone(),
        bm: bm.map(|b| BmRef {
            id: b.id,
            name: b.name.clone(),
        }),
        has_credential: numbers.iter().any(|s| s.record.credential_valid),
        standing: w.standing.clone(),
        health: health.to_string(),
        layouts_by_status: BTreeMap::new(),
        last_upload_failure: w.last_upload_failure.clone(),
        numbers: numbers.iter().map(number_json).collect(),
    }
}

/// A provider refusal of a verification code or PIN that is the operator's mistake (a wrong or
/// unrequested code 136025, a wrong PIN or a step out of order: the registration kind) is 422
/// with the provider's reason, not a 502 a client would retry as an outage (issue 17); other
/// refusals stay as they are.
fn operator_mistake(e: provider::ProviderError) -> ActorError {
    let code = e.code();
    let (ours, what) = match (code, e.kind()) {
        (Some(136025), _) => ("invalid_code", "o código de verificação"),
        (_, provider::ErrorKind::Registration) => ("registro_recusado", "o registro do número"),
        _ => return e.into(),
    };
    ActorError::Rejected {
        code: ours,
        message: format!("O provedor recusou {what}: {}", e.reason()),
        details: serde_json::json!({"provider_code": code}),
    }
}

/// What one BM sync works with: the account, the BM, its token, its numbers already connected
/// and their credential.
struct BmSync<'a> {
    account_id: i64,
    bm_id: i64,
    token: &'a str,
    channels: &'a [storage::channels::ChannelRecord],
    secrets: &'a storage::channels::ChannelSecrets,
}

/// What a BM sync found so far, WABA by WABA.
#[derive(Default)]
struct Found {
    /// Phone number ids the provider lists.
    seen: std::collections::HashSet<String>,
    /// Numbers adopted as channels.
    created: Vec<SyncedNumber>,
    /// The BM's tier, from its first WABA that reports one.
    tier: Option<String>,
    /// Each WABA's report.
    wabas: Vec<SyncedWaba>,
    /// Templates imported.
    templates_imported: usize,
    /// Numbers with a profile picture.
    photos: usize,
}

/// The numbers by health, and one line of "needs action" per number that is not ok.
fn numbers_summary(snapshots: &[ChannelSnapshot]) -> (NumbersSummary, Vec<NeedsAction>) {
    let mut numbers = NumbersSummary::default();
    let mut needs = Vec::new();
    for s in snapshots {
        numbers.total += 1;
        match s.health.tone {
            Tone::Ok => numbers.good += 1,
            Tone::Attention => numbers.attention += 1,
            Tone::Bad => numbers.bad += 1,
        }
        *numbers.by_code.entry(s.health.code.clone()).or_default() += 1;
        if s.health.tone != Tone::Ok {
            let rank = HealthCode::ALL
                .into_iter()
                .find(|c| c.as_str() == s.health.code)
                .unwrap_or(HealthCode::Ok);
            needs.push(NeedsAction {
                kind: "number",
                id: s.record.id.to_string(),
                name: format!("{} ({})", s.record.name, s.record.phone),
                label: s.health.label.clone(),
                code: s.health.code.clone(),
                next_action: s.health.next_action.clone(),
                rank,
            });
        }
    }
    (numbers, needs)
}

/// The "needs action" line of a banned, restricted or policy-flagged WABA.
fn waba_need(w: &storage::bms::WabaRecord) -> Option<NeedsAction> {
    let code = match w.standing.as_str() {
        "banned" => HealthCode::WabaBanned,
        "restricted" => HealthCode::WabaRestricted,
        "violation" => HealthCode::PolicyViolation,
        _ => return None,
    };
    Some(NeedsAction {
        kind: "waba",
        id: w.provider_waba_id.clone(),
        name: w.name.clone(),
        label: match (code, w.standing_detail.as_deref()) {
            (HealthCode::PolicyViolation, Some(kind)) => format!("{} ({kind})", code.label()),
            _ => code.label().into(),
        },
        code: code.as_str().into(),
        next_action: code.next_action().map(str::to_string),
        rank: code,
    })
}

/// The "needs action" line of a BM whose payment method fails.
fn bm_need(b: &storage::bms::BmRecord) -> NeedsAction {
    let code = HealthCode::PaymentLocked;
    NeedsAction {
        kind: "bm",
        id: b.id.to_string(),
        name: b.name.clone(),
        label: code.label().into(),
        code: code.as_str().into(),
        next_action: code.next_action().map(str::to_string),
        rank: code,
    }
}

/// The "needs action" line of an active provider alert (D-074), ranked by its severity.
fn alert_need(a: &storage::provider_fields::ProviderAlert) -> NeedsAction {
    let rank = match a.severity.to_ascii_uppercase().as_str() {
        "CRITICAL" => HealthCode::WabaRestricted,
        "WARNING" => HealthCode::PolicyViolation,
        _ => HealthCode::TemplateMissing,
    };
    NeedsAction {
        kind: "alert",
        id: a.entity_id.clone(),
        name: format!("{} {}", a.entity_type, a.entity_id),
        label: if a.description.is_empty() {
            a.alert_type.clone()
        } else {
            a.description.clone()
        },
        code: a.alert_type.to_ascii_lowercase(),
        next_action: Some(format!(
            "Alerta {} do provedor ({}): veja o gerenciador do WhatsApp da WABA {}.",
            a.severity.to_ascii_lowercase(),
            a.alert_type,
            a.waba_id
        )),
        rank,
    }
}

/// A new number's own fields: its code method (`SMS`, `VOICE` or `NONE`, upper-cased) and its
/// national number. Errors: 422 `invalid_method`, `invalid_verified_name` (under 3
/// characters) or the phone's.
fn check_new_number(req: &AddNumber) -> Result<(String, String), ActorError> {
    let method = req.method.to_ascii_uppercase();
    if !["SMS", "VOICE", "NONE"].contains(&method.as_str()) {
        return Err(ValidationError::new(
            "invalid_method",
            "method",
            "`method` deve ser SMS, VOICE ou NONE.",
        )
        .into());
    }
    if req.verified_name.trim().chars().count() < 3 {
        return Err(ValidationError::new(
            "invalid_verified_name",
            "verified_name",
            "`verified_name` deve ter ao menos 3 caracteres.",
        )
        .into());
    }
    Ok((method, parse_national(&req.cc, &req.phone)?))
}

/// The answer to adding a number: its channel, and what to do next (confirm the code sent by
/// `method`, or ask for one when `method` is `NONE`).
fn added_number(channel_id: i64, phone: String, method: &str, bm_id: Option<i64>) -> AddedNumber {
    let code_requested = method != "NONE";
    AddedNumber {
        message: if code_requested {
            format!("Número criado; código enviado por {method}. Confirme com POST /channels/{channel_id}/verify-code.")
        } else {
            format!("Número criado; peça o código com POST /channels/{channel_id}/request-code.")
        },
        channel_id,
        phone,
        code_requested,
        bm_id,
    }
}
