//! The panel's provider webhook receiver (issue 21, D-061): each client's signing secret, the
//! forwarding lanes (a `webhook_subscriptions` row per client and number, `client_id` set,
//! delivered by the account webhooks' dispatcher), and the log of every call the provider made.

use crate::panel::{channel_in_scope, log_in_scope};
use crate::{now_ms, Result, StorageError, Store};
use engine::panel::Scope;
use engine::Secret;
use sqlx::any::AnyRow;
use sqlx::Row;

/// A BM that owns a WABA named by a provider call, with its app secret (opened).
#[derive(Debug, Clone)]
pub struct WabaOwner {
    /// Account.
    pub account_id: i64,
    /// Provider WABA id.
    pub waba_id: String,
    /// BM id, when the WABA has one.
    pub bm_id: Option<i64>,
    /// The secret that must sign a WABA-level change for this account (issue 46, D-099): the
    /// BM's app secret when registered, else the app secret of the account's lowest number
    /// in that WABA; `None` when neither is (the deployment's `PROVIDER_APP_SECRET` then).
    pub app_secret: Option<Secret>,
    /// The WABA's client (its own, else its BM's), when it has a webhook URL.
    pub client_id: Option<i64>,
    /// The account's lowest number in that WABA (the lane of WABA-level events).
    pub first_channel: Option<i64>,
}

/// A number named by a provider call, with the client its events go to.
#[derive(Debug, Clone)]
pub struct NumberOwner {
    /// Account.
    pub account_id: i64,
    /// Channel id.
    pub channel_id: i64,
    /// Provider phone number id.
    pub phone_number_id: String,
    /// Provider WABA id.
    pub waba_id: String,
    /// The number's client: its own, else its WABA's, else its BM's (D-061), when it has a
    /// webhook URL.
    pub client_id: Option<i64>,
    /// The secret that must sign a change of this number (issue 46, D-099): the app secret
    /// of the BM that owns the number (its own BM, else its WABA's), else the number's own
    /// app secret; `None` when neither is registered (the deployment's `PROVIDER_APP_SECRET`
    /// then).
    pub app_secret: Option<Secret>,
}

/// One forward to write: a client, the number's lane, the provider's field and the payload.
#[derive(Debug, Clone)]
pub struct Forward {
    /// Account.
    pub account_id: i64,
    /// Client.
    pub client_id: i64,
    /// The lane's number.
    pub channel_id: i64,
    /// Provider phone number id (null for a WABA-level event).
    pub phone_number_id: Option<String>,
    /// The provider's `field` (`messages`, `account_update`…): the envelope's `event`.
    pub field: String,
    /// The provider's entry with only this number's changes.
    pub payload: serde_json::Value,
}

/// A log line to write for one account (or none, when no account knows the call).
#[derive(Debug, Clone, Default)]
pub struct NewProviderLog {
    /// Account (None: the call named nothing known, or a handshake).
    pub account_id: Option<i64>,
    /// `evento` or `verificacao`.
    pub kind: String,
    /// `valida`, `invalida`, `sem_validacao`.
    pub signature: String,
    /// What the provider was answered.
    pub http_status: u16,
    /// Whether the events were applied.
    pub applied: bool,
    /// WABAs named.
    pub waba_ids: Vec<String>,
    /// Numbers named.
    pub phone_number_ids: Vec<String>,
    /// Fields (`messages`, `account_update`…).
    pub fields: Vec<String>,
    /// A note (why unvalidated, invalid…).
    pub detail: Option<String>,
    /// The body (kept for the retention period).
    pub body: Option<String>,
}

/// A delivery of a forward as the log shows it.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct ForwardStatus {
    /// Delivery id.
    pub id: i64,
    /// Client.
    pub client_id: Option<i64>,
    /// Provider phone number id.
    pub phone_number_id: Option<String>,
    /// `delivered`, `retrying` (pending after a failed attempt), `pending`, `failed`.
    pub status: String,
    /// Attempts made.
    pub attempts: i64,
    /// Last HTTP status.
    pub last_status_code: Option<i64>,
    /// Last error.
    pub last_error: Option<String>,
}

/// A log line with its forwards.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct ProviderLog {
    /// Id.
    pub id: i64,
    /// `evento` or `verificacao`.
    pub tipo: String,
    /// Received, ms (the HTTP layer renders it as ISO 8601).
    #[serde(skip)]
    pub received_at: i64,
    /// `valida`, `invalida`, `sem_validacao`.
    pub assinatura: String,
    /// Answer to the provider.
    pub http_status: i64,
    /// Applied to the numbers.
    pub aplicado: bool,
    /// WABA ids the event names.
    #[schema(value_type = Vec<String>)]
    pub wabas: serde_json::Value,
    /// Phone number ids the event names.
    #[schema(value_type = Vec<String>)]
    pub numeros: serde_json::Value,
    /// The provider's `field`s in it (`messages`, `account_update`…).
    #[schema(value_type = Vec<String>)]
    pub campos: serde_json::Value,
    /// Note.
    pub detalhe: Option<String>,
    /// The body, while retained.
    pub corpo: Option<String>,
    /// `encaminhado`, `pendente`, `falhou`, `nao_encaminhado`.
    pub encaminhamento: String,
    /// Its forwards.
    pub entregas: Vec<ForwardStatus>,
}

/// Filters of the log.
#[derive(Debug, Clone, Default)]
pub struct LogFilter {
    /// `evento` or `verificacao`.
    pub kind: Option<String>,
    /// A number named.
    pub phone_number_id: Option<String>,
    /// A client forwarded to.
    pub client_id: Option<i64>,
    /// Signature status.
    pub signature: Option<String>,
    /// Received at or after, ms.
    pub since: Option<i64>,
    /// Received before, ms.
    pub until: Option<i64>,
    /// Lines with an id below this (the cursor).
    pub before_id: Option<i64>,
    /// Page size.
    pub limit: i64,
}

fn ids_json(v: &[String]) -> String {
    serde_json::to_string(v).unwrap_or_else(|_| "[]".into())
}

fn read_log(r: &AnyRow) -> Result<ProviderLog> {
    let parse = |col: &str| -> Result<serde_json::Value> {
        let s: String = r.try_get(col)?;
        serde_json::from_str(&s).map_err(|e| StorageError::Corrupt(e.to_string()))
    };
    Ok(ProviderLog {
        id: r.try_get("id")?,
        tipo: r.try_get("kind")?,
        received_at: r.try_get("received_at")?,
        assinatura: r.try_get("signature")?,
        http_status: r.try_get("http_status")?,
        aplicado: r.try_get::<i64, _>("applied")? != 0,
        wabas: parse("waba_ids")?,
        numeros: parse("phone_number_ids")?,
        campos: parse("fields")?,
        detalhe: r.try_get("detail")?,
        corpo: r.try_get("body")?,
        encaminhamento: String::new(),
        entregas: Vec::new(),
    })
}

impl Store {
    /// A new signing secret for a client's forwards (`whsec_…`), sealed; the value is
    /// returned once. NotFound outside the account.
    pub async fn rotate_client_webhook_secret(
        &self,
        account_id: i64,
        client_id: i64,
    ) -> Result<Secret> {
        let secret = crate::webhooks::new_signing_secret();
        let n = sqlx::query(
            "UPDATE clients SET webhook_secret_enc = $3 WHERE id = $1 AND account_id = $2",
        )
        .bind(client_id)
        .bind(account_id)
        .bind(
            self.cipher
                .seal(&secret, "clients", "webhook_secret_enc", client_id),
        )
        .execute(&self.writer)
        .await?
        .rows_affected();
        if n == 0 {
            return Err(StorageError::NotFound);
        }
        Ok(secret)
    }

    /// Whether the client has a signing secret.
    pub async fn client_has_webhook_secret(&self, client_id: i64) -> Result<bool> {
        Ok(
            sqlx::query("SELECT id FROM clients WHERE id = $1 AND webhook_secret_enc IS NOT NULL")
                .bind(client_id)
                .fetch_optional(&self.pool)
                .await?
                .is_some(),
        )
    }

    /// Every account's WABA rows with these provider ids, with the secret that signs their
    /// changes ([`WabaOwner::app_secret`]).
    pub async fn waba_owners(&self, waba_ids: &[String]) -> Result<Vec<WabaOwner>> {
        let mut out = Vec::new();
        for waba in waba_ids {
            let rows = sqlx::query(
                "SELECT w.account_id, w.provider_waba_id, w.bm_id, b.app_secret_enc, \
                   (SELECT cl.id FROM clients cl WHERE cl.id = COALESCE(w.client_id, b.client_id) AND cl.webhook_url IS NOT NULL) AS client_id, \
                   (SELECT MIN(c.id) FROM channels c WHERE c.account_id = w.account_id AND c.waba_id = w.provider_waba_id) AS first_channel \
                 FROM wabas w LEFT JOIN bms b ON b.id = w.bm_id WHERE w.provider_waba_id = $1",
            )
            .bind(waba)
            .fetch_all(&self.pool)
            .await?;
            for r in rows {
                let bm_id: Option<i64> = r.try_get("bm_id")?;
                let first_channel: Option<i64> = r.try_get("first_channel")?;
                let app_secret = match self.open_bm_secret(bm_id, r.try_get("app_secret_enc")?)? {
                    Some(s) => Some(s),
                    None => match first_channel {
                        Some(c) => self.channel_app_secret(c).await?,
                        None => None,
                    },
                };
                out.push(WabaOwner {
                    account_id: r.try_get("account_id")?,
                    waba_id: r.try_get("provider_waba_id")?,
                    bm_id,
                    app_secret,
                    client_id: r.try_get("client_id")?,
                    first_channel,
                });
            }
        }
        Ok(out)
    }

    /// A BM's sealed app secret, opened.
    fn open_bm_secret(&self, bm_id: Option<i64>, sealed: Option<String>) -> Result<Option<Secret>> {
        match (bm_id, sealed) {
            (Some(id), Some(s)) => Ok(Some(self.cipher.open(&s, "bms", "app_secret_enc", id)?)),
            _ => Ok(None),
        }
    }

    /// A number's own app secret, opened.
    async fn channel_app_secret(&self, channel_id: i64) -> Result<Option<Secret>> {
        match self.channel_secrets(channel_id).await {
            Ok(s) => Ok(s.app_secret),
            Err(StorageError::NotFound) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Every account's numbers with these provider ids, with their effective client and the
    /// secret that signs their changes ([`NumberOwner::app_secret`]).
    pub async fn number_owners(&self, phone_number_ids: &[String]) -> Result<Vec<NumberOwner>> {
        let mut out = Vec::new();
        for pnid in phone_number_ids {
            let rows = sqlx::query(
                "SELECT c.id, c.account_id, c.phone_number_id, c.waba_id, c.app_secret_enc, b.id AS bm_id, b.app_secret_enc AS bm_secret, \
                   (SELECT cl.id FROM clients cl WHERE cl.id = COALESCE(c.client_id, w.client_id, b.client_id) AND cl.webhook_url IS NOT NULL) AS client_id \
                 FROM channels c LEFT JOIN wabas w ON w.account_id = c.account_id AND w.provider_waba_id = c.waba_id \
                 LEFT JOIN bms b ON b.id = COALESCE(c.bm_id, w.bm_id) AND b.account_id = c.account_id WHERE c.phone_number_id = $1",
            )
            .bind(pnid)
            .fetch_all(&self.pool)
            .await?;
            for r in rows {
                let channel_id: i64 = r.try_get("id")?;
                let own: Option<String> = r.try_get("app_secret_enc")?;
                let app_secret =
                    match self.open_bm_secret(r.try_get("bm_id")?, r.try_get("bm_secret")?)? {
                        Some(s) => Some(s),
                        None => own
                            .map(|s| {
                                self.cipher
                                    .open(&s, "channels", "app_secret_enc", channel_id)
                            })
                            .transpose()?,
                    };
                out.push(NumberOwner {
                    account_id: r.try_get("account_id")?,
                    channel_id,
                    phone_number_id: r.try_get("phone_number_id")?,
                    waba_id: r.try_get("waba_id")?,
                    client_id: r.try_get("client_id")?,
                    app_secret,
                });
            }
        }
        Ok(out)
    }

    /// Writes a provider call's log lines and its forwards in one transaction: each forward
    /// goes to its client's lane for its number (created on first use), attached to the log
    /// line of its account. Returns the log ids (one per line, in order).
    pub async fn record_provider_call(
        &self,
        logs: &[NewProviderLog],
        forwards: &[Forward],
    ) -> Result<Vec<i64>> {
        let now = now_ms();
        let mut tx = self.begin_write().await?;
        let mut ids = Vec::with_capacity(logs.len());
        for l in logs {
            let id: i64 = sqlx::query(
                "INSERT INTO provider_webhook_logs (account_id, kind, received_at, signature, http_status, applied, waba_ids, phone_number_ids, fields, detail, body) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) RETURNING id",
            )
            .bind(l.account_id)
            .bind(&l.kind)
            .bind(now)
            .bind(&l.signature)
            .bind(l.http_status as i64)
            .bind(l.applied as i64)
            .bind(ids_json(&l.waba_ids))
            .bind(ids_json(&l.phone_number_ids))
            .bind(ids_json(&l.fields))
            .bind(l.detail.as_deref())
            .bind(l.body.as_deref())
            .fetch_one(&mut *tx)
            .await?
            .try_get("id")?;
            ids.push(id);
        }
        for f in forwards {
            let log_id = logs
                .iter()
                .position(|l| l.account_id == Some(f.account_id))
                .map(|i| ids[i]);
            let lane = lane_tx(&mut tx, f.account_id, f.client_id, f.channel_id).await?;
            sqlx::query(
                "INSERT INTO webhook_deliveries (account_id, subscription_id, event, channel, data, status, attempts, next_attempt_at, created_at, log_id, order_key) \
                 VALUES ($1, $2, $3, $4, $5, 'pending', 0, $6, $6, $7, $8)",
            )
            .bind(f.account_id)
            .bind(lane)
            .bind(&f.field)
            .bind(serde_json::json!({"provider_phone_number_id": f.phone_number_id}).to_string())
            .bind(f.payload.to_string())
            .bind(now)
            .bind(log_id)
            .bind(engine::webhook::order_key(&f.field, &f.payload))
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(ids)
    }

    /// Queues a log line's forwards again (new deliveries with the same payloads, to the
    /// clients' lanes): only a line in `scope`, and only the lanes of numbers in it (issue
    /// 46). Returns how many. NotFound outside the account or the scope.
    pub async fn reforward(&self, account_id: i64, scope: &Scope, log_id: i64) -> Result<u64> {
        let mut tx = self.begin_write().await?;
        let visible = format!(
            "SELECT l.id FROM provider_webhook_logs l WHERE l.id = $1 AND l.account_id = $2 AND {}",
            log_in_scope(scope)
        );
        let exists = sqlx::query(&visible)
            .bind(log_id)
            .bind(account_id)
            .fetch_optional(&mut *tx)
            .await?;
        if exists.is_none() {
            return Err(StorageError::NotFound);
        }
        let now = now_ms();
        let sql = format!(
            "INSERT INTO webhook_deliveries (account_id, subscription_id, event, channel, data, status, attempts, next_attempt_at, created_at, log_id, order_key) \
             SELECT account_id, subscription_id, event, channel, data, 'pending', 0, $3, $3, log_id, order_key FROM webhook_deliveries \
             WHERE log_id = $1 AND account_id = $2 AND id IN (SELECT MIN(id) FROM webhook_deliveries WHERE log_id = $1 GROUP BY subscription_id, data) \
             AND subscription_id IN (SELECT s.id FROM webhook_subscriptions s JOIN channels c ON c.id = s.channel_id WHERE c.account_id = $2 AND {})",
            channel_in_scope(scope)
        );
        let n = sqlx::query(&sql)
            .bind(log_id)
            .bind(account_id)
            .bind(now)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        tx.commit().await?;
        Ok(n)
    }

    /// The log, newest first: the account's lines and the handshakes (no account), filtered,
    /// in `scope` (issue 46): a BM-scoped reader sees the lines that name a WABA or number of
    /// its BMs, the body only when everything the line names is its own, and only the
    /// forwards of its numbers.
    pub async fn provider_logs(
        &self,
        account_id: i64,
        scope: &Scope,
        f: &LogFilter,
    ) -> Result<Vec<ProviderLog>> {
        let mut conds = vec![
            "(l.account_id = $1 OR (l.account_id IS NULL AND l.kind = 'verificacao'))".to_string(),
            log_in_scope(scope),
        ];
        let mut binds: Vec<String> = Vec::new();
        let mut ints: Vec<i64> = Vec::new();
        let mut next = 2;
        // Text filters bound as text, numbers inlined (they are i64).
        if let Some(k) = &f.kind {
            conds.push(format!("l.kind = ${next}"));
            binds.push(k.clone());
            next += 1;
        }
        if let Some(s) = &f.signature {
            conds.push(format!("l.signature = ${next}"));
            binds.push(s.clone());
            next += 1;
        }
        if let Some(p) = &f.phone_number_id {
            conds.push(format!("l.phone_number_ids LIKE ${next}"));
            binds.push(format!("%\"{}\"%", p.replace(['%', '_', '"'], "")));
        }
        if let Some(c) = f.client_id {
            conds.push(format!(
                "EXISTS (SELECT 1 FROM webhook_deliveries d JOIN webhook_subscriptions s ON s.id = d.subscription_id WHERE d.log_id = l.id AND s.client_id = {c})"
            ));
        }
        if let Some(t) = f.since {
            conds.push(format!("l.received_at >= {t}"));
        }
        if let Some(t) = f.until {
            conds.push(format!("l.received_at < {t}"));
        }
        if let Some(b) = f.before_id {
            conds.push(format!("l.id < {b}"));
        }
        ints.push(f.limit.clamp(1, 200));
        let sql = format!(
            "SELECT l.id, l.kind, l.received_at, l.signature, l.http_status, l.applied, l.waba_ids, l.phone_number_ids, l.fields, l.detail, l.body \
             FROM provider_webhook_logs l WHERE {} ORDER BY l.id DESC LIMIT {}",
            conds.join(" AND "),
            ints[0]
        );
        let mut q = sqlx::query(&sql).bind(account_id);
        for b in &binds {
            q = q.bind(b.clone());
        }
        let mut logs: Vec<ProviderLog> = q
            .fetch_all(&self.pool)
            .await?
            .iter()
            .map(read_log)
            .collect::<Result<_>>()?;
        for l in &mut logs {
            let rows = sqlx::query(
                "SELECT d.id, s.client_id, d.channel, d.status, d.attempts, d.last_status_code, d.last_error FROM webhook_deliveries d \
                 JOIN webhook_subscriptions s ON s.id = d.subscription_id WHERE d.log_id = $1 ORDER BY d.id",
            )
            .bind(l.id)
            .fetch_all(&self.pool)
            .await?;
            for r in rows {
                let status: String = r.try_get("status")?;
                let attempts: i64 = r.try_get("attempts")?;
                let channel: String = r.try_get("channel")?;
                let channel: serde_json::Value = serde_json::from_str(&channel).unwrap_or_default();
                l.entregas.push(ForwardStatus {
                    id: r.try_get("id")?,
                    client_id: r.try_get("client_id")?,
                    phone_number_id: channel
                        .get("provider_phone_number_id")
                        .and_then(|v| v.as_str())
                        .map(str::to_string),
                    status: if status == "pending" && attempts > 0 {
                        "retrying".into()
                    } else {
                        status
                    },
                    attempts,
                    last_status_code: r.try_get("last_status_code")?,
                    last_error: r.try_get("last_error")?,
                });
            }
            l.encaminhamento = if l.entregas.is_empty() {
                "nao_encaminhado"
            } else if l.entregas.iter().all(|d| d.status == "delivered") {
                "encaminhado"
            } else if l.entregas.iter().any(|d| d.status == "failed") {
                "falhou"
            } else {
                "pendente"
            }
            .into();
        }
        if !scope.is_all() {
            self.narrow_logs(account_id, scope, &mut logs).await?;
        }
        Ok(logs)
    }

    /// Takes out of each line what a scoped reader may not see: the body of a line that
    /// names something outside the scope, the forwards of numbers outside it.
    async fn narrow_logs(
        &self,
        account_id: i64,
        scope: &Scope,
        logs: &mut [ProviderLog],
    ) -> Result<()> {
        let numbers: Vec<String> = self
            .scoped_channels(account_id, scope)
            .await?
            .into_iter()
            .map(|c| c.phone_number_id)
            .collect();
        let wabas: Vec<String> = self
            .scoped_wabas(account_id, scope)
            .await?
            .into_iter()
            .map(|w| w.provider_waba_id)
            .collect();
        let all_in = |named: &serde_json::Value, set: &[String]| {
            named.as_array().is_none_or(|a| {
                a.iter()
                    .all(|v| v.as_str().is_some_and(|s| set.iter().any(|x| x == s)))
            })
        };
        for l in logs {
            let own = all_in(&l.numeros, &numbers) && all_in(&l.wabas, &wabas);
            if !own {
                l.corpo = None;
            }
            l.entregas.retain(|d| match &d.phone_number_id {
                Some(p) => numbers.contains(p),
                None => own,
            });
        }
        Ok(())
    }

    /// WABAs named by calls of the account that did not verify since `since` (ms): logged
    /// `invalida`, or `sem_validacao` by versions before D-099.
    pub async fn unvalidated_wabas_since(
        &self,
        account_id: i64,
        since: i64,
    ) -> Result<Vec<String>> {
        let rows = sqlx::query(
            "SELECT waba_ids FROM provider_webhook_logs WHERE account_id = $1 AND signature IN ('sem_validacao', 'invalida') AND kind = 'evento' AND received_at >= $2",
        )
        .bind(account_id)
        .bind(since)
        .fetch_all(&self.pool)
        .await?;
        let mut out: Vec<String> = Vec::new();
        for r in rows {
            let ids: String = r.try_get("waba_ids")?;
            for id in serde_json::from_str::<Vec<String>>(&ids).unwrap_or_default() {
                if !out.contains(&id) {
                    out.push(id);
                }
            }
        }
        Ok(out)
    }

    /// Drops the bodies of log lines received before `before` (ms); the lines stay.
    pub async fn purge_provider_log_bodies(&self, before: i64) -> Result<u64> {
        Ok(sqlx::query("UPDATE provider_webhook_logs SET body = NULL WHERE received_at < $1 AND body IS NOT NULL")
            .bind(before)
            .execute(&self.writer)
            .await?
            .rows_affected())
    }
}

/// The lane of a client for a number (created on first use).
async fn lane_tx(
    tx: &mut sqlx::Transaction<'static, sqlx::Any>,
    account_id: i64,
    client_id: i64,
    channel_id: i64,
) -> Result<i64> {
    if let Some(r) =
        sqlx::query("SELECT id FROM webhook_subscriptions WHERE client_id = $1 AND channel_id = $2")
            .bind(client_id)
            .bind(channel_id)
            .fetch_optional(&mut **tx)
            .await?
    {
        return Ok(r.try_get("id")?);
    }
    let id: i64 = sqlx::query(
        "INSERT INTO webhook_subscriptions (account_id, channel_id, url, events, secret_enc, active, created_at, client_id) VALUES ($1, $2, '', '[]', '', 1, $3, $4) RETURNING id",
    )
    .bind(account_id)
    .bind(channel_id)
    .bind(now_ms())
    .bind(client_id)
    .fetch_one(&mut **tx)
    .await?
    .try_get("id")?;
    Ok(id)
}
