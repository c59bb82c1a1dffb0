//! The panel's provider webhook receiver (`/api/webhooks/provider`, spec `panel-api.md`
//! "Events", issue 21, D-061, issue 46, D-099): each change of a call is checked against the
//! secret of its owner in each account — the app secret of the BM that owns the number (or
//! the WABA, for a WABA-level change), else the number's own app secret, else the deployment's
//! `PROVIDER_APP_SECRET` — and a number-level change belongs to a number only when the entry
//! is that number's WABA. Only a verified change is applied (through the one ingest path),
//! forwarded to its number's client and logged as `valida`; anything else is refused (401
//! when nothing in the call verifies) and logged as an excerpt. The account API's receivers
//! (`/webhooks/messaging`, `/webhooks/messaging/{id}`) log and forward the same way after
//! their own ingest (issue 47 item 2). Every call is logged but the routine ones: status
//! reports only, all verified and applied, none forwarded — counted in
//! `disparo_provider_calls_unlogged_total` (D-117).

use crate::Services;
use actors::ActorError;
use engine::Secret;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use storage::forwarding::{Forward, NewProviderLog, NumberOwner, WabaOwner};

/// What the provider is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Receipt {
    /// 200: at least one change verified; those were applied and forwarded.
    Accepted,
    /// 401: no change of the call verifies with its owner's secret.
    InvalidSignature,
    /// 400: signed with the deployment's app secret, but not a provider payload.
    BadPayload,
}

/// What the log keeps of a body nobody signed: its first 512 bytes (anyone may post to the
/// receiver; only verified calls keep their whole body, for the retention period).
fn excerpt(raw: &str) -> String {
    let mut end = raw.len().min(512);
    while !raw.is_char_boundary(end) {
        end -= 1;
    }
    raw[..end].to_string()
}

/// One change of a call, as the receiver routes it.
struct Change {
    /// The entry's id: the WABA the provider says the change is of.
    waba: String,
    /// The entry's `time`.
    time: Value,
    /// The provider's `field`.
    field: String,
    /// The change as received.
    change: Value,
    /// `value.metadata.phone_number_id` of a number-level change.
    number: Option<String>,
}

/// The parts of a provider payload the receiver routes by.
struct Skim {
    object: Value,
    changes: Vec<Change>,
}

/// The most distinct WABAs and numbers one call may name. The provider sends one entry per
/// WABA, whose numbers are a few dozen at most; a body naming more is not looked up (each
/// name costs an owner lookup before any signature is known: an unsigned caller must not
/// buy thousands of queries with one request) and is treated as no provider payload.
const MAX_NAMED: usize = 256;

/// The parts of `body` the receiver routes by, or `None` when it is not a provider payload
/// (or names more than [`MAX_NAMED`] WABAs and numbers).
fn skim(body: &[u8]) -> Option<Skim> {
    let v: Value = serde_json::from_slice(body).ok()?;
    let mut changes = Vec::new();
    for entry in v.get("entry")?.as_array()? {
        let waba = entry.get("id")?.as_str()?.to_string();
        let time = entry.get("time").cloned().unwrap_or(Value::Null);
        for change in entry.get("changes")?.as_array()? {
            let field = change.get("field")?.as_str()?.to_string();
            let number = change
                .get("value")
                .and_then(|v| v.get("metadata"))
                .and_then(|m| m.get("phone_number_id"))
                .and_then(Value::as_str)
                .map(str::to_string);
            changes.push(Change {
                waba: waba.clone(),
                time: time.clone(),
                field,
                change: change.clone(),
                number,
            });
        }
    }
    let named: BTreeSet<&str> = changes
        .iter()
        .flat_map(|c| std::iter::once(c.waba.as_str()).chain(c.number.as_deref()))
        .collect();
    if named.len() > MAX_NAMED {
        return None;
    }
    Some(Skim {
        object: v.get("object").cloned().unwrap_or(Value::Null),
        changes,
    })
}

/// The distinct values of one part of the call's changes.
fn distinct<'a>(skim: &'a Skim, part: impl Fn(&'a Change) -> Option<&'a String>) -> Vec<String> {
    skim.changes
        .iter()
        .filter_map(part)
        .cloned()
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect()
}

/// Which of the candidate secrets sign the body (`HMAC-SHA256`, PROVIDER.md §8.2), by value;
/// each distinct secret hashes the body once (owners often share their BM's).
fn signing(body: &[u8], header: Option<&str>, candidates: Vec<Secret>) -> HashMap<String, bool> {
    let mut out = HashMap::new();
    for secret in candidates {
        if out.contains_key(secret.expose()) {
            continue;
        }
        let ok = header.is_some_and(|h| provider::signature::verify(secret.expose(), body, h));
        out.insert(secret.expose().to_string(), ok);
    }
    out
}

/// Whether an applied call was routine: status reports only (no inbound message, no change of
/// a number, WABA or template, nothing ignored). Routine calls are the bulk of a campaign's
/// traffic (several per message sent); they are logged only when something of them is
/// forwarded or refused (D-117).
fn is_routine(report: &actors::ingest::IngestReport) -> bool {
    report.inbound == 0
        && report.quality_updates == 0
        && report.account_updates == 0
        && report.template_updates == 0
        && report.field_updates == 0
        && report.ignored == 0
}

/// What [`Services::judge`] found.
enum Judgment {
    /// Not a provider payload.
    Unreadable,
    /// Read, with who owns what.
    Judged(Judged),
}

/// A call read and judged: its changes, and each account's share of them.
struct Judged {
    skim: Skim,
    shares: BTreeMap<i64, AccountShare>,
}

/// One account's share of a call: its changes that verified (with their forwards) and those
/// that did not.
#[derive(Default)]
struct AccountShare {
    verified: usize,
    refused: usize,
    forwards: Vec<Forward>,
}

/// One owner of a change: its account, whether its secret signs the call, and its lane (the
/// client and the number its forward goes through), when it has a client.
type Owned = (i64, bool, Option<(i64, i64)>);

/// Who owns what a call names, and whether each owner's secret signs it.
struct Owners {
    wabas: Vec<WabaOwner>,
    numbers: Vec<NumberOwner>,
    /// Secret value → whether it signs the body.
    signs: HashMap<String, bool>,
    /// `PROVIDER_APP_SECRET`, for owners without a secret of their own.
    fallback: Option<Secret>,
}

impl Owners {
    fn verifies(&self, own: Option<&Secret>) -> bool {
        own.or(self.fallback.as_ref())
            .and_then(|s| self.signs.get(s.expose()))
            .copied()
            .unwrap_or(false)
    }

    /// Each account's share of the call: a change counts for the accounts that own its
    /// number (in the entry's WABA) or, WABA-level, its WABA; it verifies only with that
    /// owner's secret, and only a verified change is forwarded.
    fn shares(&self, skim: &Skim) -> BTreeMap<i64, AccountShare> {
        let mut shares: BTreeMap<i64, AccountShare> = BTreeMap::new();
        for c in &skim.changes {
            let owned: Vec<Owned> = match &c.number {
                Some(pnid) => self
                    .numbers
                    .iter()
                    .filter(|n| &n.phone_number_id == pnid && n.waba_id == c.waba)
                    .map(|n| {
                        let lane = n.client_id.map(|cl| (cl, n.channel_id));
                        (n.account_id, self.verifies(n.app_secret.as_ref()), lane)
                    })
                    .collect(),
                None => self
                    .wabas
                    .iter()
                    .filter(|w| w.waba_id == c.waba)
                    .map(|w| {
                        let lane = w.client_id.zip(w.first_channel);
                        (w.account_id, self.verifies(w.app_secret.as_ref()), lane)
                    })
                    .collect(),
            };
            for (account, verified, lane) in owned {
                let share = shares.entry(account).or_default();
                if !verified {
                    share.refused += 1;
                    continue;
                }
                share.verified += 1;
                if let Some((client, channel)) = lane {
                    add_forward(&mut share.forwards, account, client, channel, skim, c);
                }
            }
        }
        // Accounts named only through a number of another WABA: refused there too.
        for n in &self.numbers {
            shares.entry(n.account_id).or_default();
        }
        shares
    }
}

/// Adds a verified change to the forward of its client, number, field, WABA and entry time
/// (the provider's entry with only that number's changes, in order).
fn add_forward(
    forwards: &mut Vec<Forward>,
    account_id: i64,
    client_id: i64,
    channel_id: i64,
    skim: &Skim,
    c: &Change,
) {
    let same = |f: &Forward| {
        f.client_id == client_id
            && f.channel_id == channel_id
            && f.phone_number_id == c.number
            && f.field == c.field
            && f.payload["entry"][0]["id"] == c.waba.as_str()
            && f.payload["entry"][0]["time"] == c.time
    };
    match forwards.iter_mut().find(|f| same(f)) {
        Some(f) => {
            if let Some(changes) = f.payload["entry"][0]["changes"].as_array_mut() {
                changes.push(c.change.clone());
            }
        }
        None => forwards.push(Forward {
            account_id,
            client_id,
            channel_id,
            phone_number_id: c.number.clone(),
            field: c.field.clone(),
            payload: json!({"object": skim.object, "entry": [{"id": c.waba, "time": c.time, "changes": [c.change]}]}),
        }),
    }
}

impl Services {
    /// Runs CPU work on a provider body on the blocking pool, holding one of the ingest's
    /// slots (one per core) as `ingest_provider_webhook` does.
    async fn on_ingest_pool<T: Send + 'static>(
        &self,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, ActorError> {
        let _slot = self
            .shared()
            .ingest_slots
            .acquire()
            .await
            .map_err(|_| ActorError::Unavailable)?;
        tokio::task::spawn_blocking(work)
            .await
            .map_err(|_| ActorError::Unavailable)
    }

    /// `GET /api/webhooks/provider`: the handshake, logged as `verificacao`; answers the
    /// challenge when the token matches `PROVIDER_WEBHOOK_VERIFY_TOKEN` (constant time).
    pub async fn provider_handshake(
        &self,
        mode: Option<&str>,
        token: Option<&str>,
        challenge: Option<String>,
    ) -> Option<String> {
        let expected = self
            .shared()
            .config
            .provider_webhook_verify_token
            .as_deref();
        let ok = matches!((mode, token, expected), (Some("subscribe"), Some(given), Some(want))
            if !want.is_empty() && engine::secret::constant_time_eq(given.as_bytes(), want.as_bytes()))
            && challenge.is_some();
        let log = NewProviderLog {
            account_id: None,
            kind: "verificacao".into(),
            signature: if ok { "valida" } else { "invalida" }.into(),
            http_status: if ok { 200 } else { 403 },
            detail: (!ok)
                .then(|| "hub.verify_token não confere (ou faltam hub.mode/hub.challenge)".into()),
            ..NewProviderLog::default()
        };
        if let Err(e) = self.shared().store.record_provider_call(&[log], &[]).await {
            tracing::error!(error = %e, "could not log a provider handshake");
        }
        ok.then_some(challenge).flatten()
    }

    /// `POST /api/webhooks/provider`: see the module's doc. Errors: storage failures only
    /// (a refused call is a [`Receipt`]).
    pub async fn receive_provider_webhook(
        &self,
        body: bytes::Bytes,
        signature: Option<&str>,
    ) -> Result<Receipt, ActorError> {
        let raw = String::from_utf8_lossy(&body).into_owned();
        let Judgment::Judged(judged) = self.judge(&body, signature, None).await? else {
            return self.refuse_unreadable(body, signature, &raw).await;
        };
        let any_valid = judged.shares.values().any(|s| s.verified > 0);
        let (applied, apply_note, routine) = if any_valid {
            self.apply_verified(body.clone(), signature).await?
        } else {
            (false, None, false)
        };
        let status = if any_valid { 200 } else { 401 };
        self.record_call(judged, &raw, status, applied, apply_note, routine)
            .await?;
        Ok(if any_valid {
            Receipt::Accepted
        } else {
            Receipt::InvalidSignature
        })
    }

    /// `POST /webhooks/messaging` and `/webhooks/messaging/{channel_id}` (the account API's
    /// receivers, `route` the latter's channel): applied through the one ingest path as
    /// before (its answer and errors unchanged: [`actors::Runtime::ingest_provider_webhook`]),
    /// then logged and forwarded to each number's client exactly as the panel's receiver
    /// does, so an event reaches the log and the client whichever URL the provider app posts
    /// to (issue 47 item 2, D-117). A log or forward that cannot be written is an error
    /// (503): the provider sends the call again, and applying it twice changes nothing.
    pub async fn receive_account_webhook(
        &self,
        route: Option<i64>,
        body: bytes::Bytes,
        signature: Option<&str>,
    ) -> Result<actors::ingest::IngestReport, ActorError> {
        let result = self
            .ingest_provider_webhook(route, body.clone(), signature)
            .await;
        let (status, applied, note) = match &result {
            Ok(_) => (200, true, None),
            Err(ActorError::InvalidSignature) => (401, false, None),
            Err(ActorError::BadPayload(d)) => (400, false, Some(format!("não aplicado: {d}"))),
            Err(ActorError::NotFound) => (404, false, None),
            // Not answered by the call's content (busy, storage): the provider retries and
            // the retry is logged.
            Err(_) => return result,
        };
        // A routine call (only status reports, all applied) whose numbers have no client to
        // forward to is neither logged nor forwarded: found with one lookup of the numbers
        // the ingest read, no second reading of the body and no hashing (D-117, D-145).
        let mut numbers = None;
        let routine = matches!(&result, Ok(r) if is_routine(r));
        if let Some(report) = result.as_ref().ok().filter(|_| routine) {
            let owners = self
                .shared()
                .store
                .number_owners(&report.phone_number_ids)
                .await?;
            if owners.iter().all(|n| n.client_id.is_none()) {
                metrics::counter!("disparo_provider_calls_unlogged_total").increment(1);
                return result;
            }
            numbers = Some(owners);
        }
        let raw = String::from_utf8_lossy(&body).into_owned();
        match self.judge(&body, signature, numbers).await? {
            Judgment::Judged(judged) => {
                self.record_call(judged, &raw, status, applied, note, routine)
                    .await?
            }
            Judgment::Unreadable => self.log_unreadable(status, &raw).await?,
        }
        result
    }

    /// Reads a call (on the ingest's pool) and finds who owns what it names and whether each
    /// owner's secret signs it. `numbers`: the owners of the numbers it names, when the
    /// caller already looked them up (the same [`Store::number_owners`] of the same ids).
    ///
    /// [`Store::number_owners`]: storage::Store::number_owners
    async fn judge(
        &self,
        body: &bytes::Bytes,
        signature: Option<&str>,
        numbers: Option<Vec<NumberOwner>>,
    ) -> Result<Judgment, ActorError> {
        let read = body.clone();
        let Some(skim) = self.on_ingest_pool(move || skim(&read)).await? else {
            return Ok(Judgment::Unreadable);
        };
        let numbers = match numbers {
            Some(n) => n,
            None => {
                self.shared()
                    .store
                    .number_owners(&distinct(&skim, |c| c.number.as_ref()))
                    .await?
            }
        };
        let owners = self.owners_of(&skim, numbers, body, signature).await?;
        let shares = owners.shares(&skim);
        Ok(Judgment::Judged(Judged { skim, shares }))
    }

    /// Writes a judged call's log lines (one per account it names, `status` as answered) and
    /// the forwards of its verified changes; wakes the outbox when there are forwards. A
    /// `routine` call (only status reports, all applied) that every owner verified and none
    /// forwards is counted, not logged (D-117).
    async fn record_call(
        &self,
        judged: Judged,
        raw: &str,
        status: u16,
        applied: bool,
        apply_note: Option<String>,
        routine: bool,
    ) -> Result<(), ActorError> {
        let Judged { skim, shares } = judged;
        let quiet = routine
            && !shares.is_empty()
            && shares
                .values()
                .all(|s| s.refused == 0 && s.forwards.is_empty());
        if quiet {
            metrics::counter!("disparo_provider_calls_unlogged_total").increment(1);
            return Ok(());
        }
        let named = (
            distinct(&skim, |c| Some(&c.waba)),
            distinct(&skim, |c| c.number.as_ref()),
            distinct(&skim, |c| Some(&c.field)),
        );
        let mut logs = Vec::new();
        let mut forwards = Vec::new();
        for (account, share) in shares {
            let valid = share.verified > 0;
            let detail = match (valid, share.refused) {
                (false, _) => Some("assinatura não confere com o app secret de quem tem estas WABAs e números nesta conta: nem aplicado, nem encaminhado".to_string()),
                (true, 0) => apply_note.clone(),
                (true, n) => Some(format!("{n} alteração(ões) sem assinatura válida do dono nesta conta: não aplicadas nem encaminhadas")),
            };
            logs.push(NewProviderLog {
                account_id: Some(account),
                kind: "evento".into(),
                signature: if valid { "valida" } else { "invalida" }.into(),
                http_status: status,
                applied: applied && valid,
                waba_ids: named.0.clone(),
                phone_number_ids: named.1.clone(),
                fields: named.2.clone(),
                detail,
                body: Some(if valid { raw.to_string() } else { excerpt(raw) }),
            });
            forwards.extend(share.forwards);
        }
        if logs.is_empty() {
            logs.push(NewProviderLog {
                kind: "evento".into(),
                signature: "invalida".into(),
                http_status: status,
                waba_ids: named.0,
                phone_number_ids: named.1,
                fields: named.2,
                detail: Some(
                    "nenhuma WABA ou número conhecido: nenhum segredo para validar".into(),
                ),
                body: Some(excerpt(raw)),
                ..NewProviderLog::default()
            });
        }
        self.shared()
            .store
            .record_provider_call(&logs, &forwards)
            .await?;
        if !forwards.is_empty() {
            self.wake_dispatcher();
        }
        Ok(())
    }

    /// A body that is not a provider payload: 400 when the deployment's app secret signs it
    /// (the provider's mistake), else 401 (a forgery); logged as an excerpt without account.
    async fn refuse_unreadable(
        &self,
        body: bytes::Bytes,
        signature: Option<&str>,
        raw: &str,
    ) -> Result<Receipt, ActorError> {
        let fallback: Vec<Secret> = self.shared().config.app_secret.iter().cloned().collect();
        let header = signature.map(str::to_string);
        let signs = self
            .on_ingest_pool(move || signing(&body, header.as_deref(), fallback))
            .await?;
        let signed = signs.values().any(|ok| *ok);
        self.log_unreadable(if signed { 400 } else { 401 }, raw)
            .await?;
        Ok(if signed {
            Receipt::BadPayload
        } else {
            Receipt::InvalidSignature
        })
    }

    /// Logs a body that is not a provider payload (answered `status`): an excerpt, no
    /// account; `valida` only for the 400 of a body the deployment's app secret signed.
    async fn log_unreadable(&self, status: u16, raw: &str) -> Result<(), ActorError> {
        let log = NewProviderLog {
            kind: "evento".into(),
            signature: if status == 400 { "valida" } else { "invalida" }.into(),
            http_status: status,
            detail: Some("corpo que não é um webhook do provedor".into()),
            body: Some(excerpt(raw)),
            ..NewProviderLog::default()
        };
        self.shared()
            .store
            .record_provider_call(&[log], &[])
            .await?;
        Ok(())
    }

    /// The owners of what the call names, with which of their secrets sign it.
    async fn owners_of(
        &self,
        skim: &Skim,
        numbers: Vec<NumberOwner>,
        body: &bytes::Bytes,
        signature: Option<&str>,
    ) -> Result<Owners, ActorError> {
        let wabas = self
            .shared()
            .store
            .waba_owners(&distinct(skim, |c| Some(&c.waba)))
            .await?;
        let fallback = self.shared().config.app_secret.clone();
        let candidates: Vec<Secret> = wabas
            .iter()
            .filter_map(|w| w.app_secret.clone())
            .chain(numbers.iter().filter_map(|n| n.app_secret.clone()))
            .chain(fallback.clone())
            .collect();
        let (signed, header) = (body.clone(), signature.map(str::to_string));
        let signs = self
            .on_ingest_pool(move || signing(&signed, header.as_deref(), candidates))
            .await?;
        Ok(Owners {
            wabas,
            numbers,
            signs,
            fallback,
        })
    }

    /// Applies a call with verified changes through the one ingest path (which checks each
    /// number's own secret again). Returns whether it applied, a note when it did not, and
    /// whether it was routine ([`is_routine`]).
    async fn apply_verified(
        &self,
        body: bytes::Bytes,
        signature: Option<&str>,
    ) -> Result<(bool, Option<String>, bool), ActorError> {
        match self.ingest_provider_webhook(None, body, signature).await {
            Ok(report) => Ok((true, None, is_routine(&report))),
            Err(ActorError::InvalidSignature) => Ok((
                false,
                Some(
                    "assinatura válida para o BM, mas os números não a reconhecem: não aplicado"
                        .into(),
                ),
                false,
            )),
            Err(ActorError::BadPayload(d)) => {
                Ok((false, Some(format!("não aplicado: {d}")), false))
            }
            Err(e) => Err(e),
        }
    }
}

impl Services {
    /// `POST /api/webhook-logs/{id}/reforward`: the line's forwards to numbers in `scope`
    /// queued again; how many. NotFound for a line outside the scope (issue 46).
    pub async fn reforward(
        &self,
        account_id: i64,
        scope: &engine::panel::Scope,
        log_id: i64,
    ) -> Result<u64, ActorError> {
        let n = self
            .shared()
            .store
            .reforward(account_id, scope, log_id)
            .await?;
        if n > 0 {
            self.wake_dispatcher();
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(numbers: usize) -> Vec<u8> {
        let changes: Vec<Value> = (0..numbers)
            .map(|i| json!({"field": "messages", "value": {"metadata": {"phone_number_id": format!("{i}")}}}))
            .collect();
        json!({"object": "whatsapp_business_account", "entry": [{"id": "waba", "time": 1, "changes": changes}]})
            .to_string()
            .into_bytes()
    }

    /// A call naming a few numbers is read; one naming hundreds (each an owner lookup before
    /// any signature is known) is not.
    #[test]
    fn a_call_naming_too_many_numbers_is_not_looked_up() {
        let few = skim(&call(3)).expect("a provider call");
        assert_eq!(few.changes.len(), 3);
        assert!(skim(&call(MAX_NAMED - 1)).is_some());
        assert!(skim(&call(MAX_NAMED)).is_none(), "the WABA counts too");
        assert!(skim(&call(5_000)).is_none());
        assert!(skim(b"not json").is_none());
    }
}
