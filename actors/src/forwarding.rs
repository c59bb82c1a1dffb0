//! The panel's provider webhook receiver (`/api/webhooks/provider`, spec `panel-api.md`
//! "Events", issue 21, D-061): the signature is checked against the app secret of the BM that
//! owns each WABA named; a valid call is applied through the one ingest path and forwarded, per
//! number, to the client of that number; a call for BMs without an app secret is forwarded
//! unvalidated (the spec) and not applied; an invalid one is neither. Every call is logged.

use crate::error::ActorError;
use crate::Runtime;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use storage::forwarding::{Forward, NewProviderLog, NumberOwner, WabaOwner};

/// What the provider is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Receipt {
    /// 200: applied (or unvalidated) and forwarded.
    Accepted,
    /// 401: no known secret signs it.
    InvalidSignature,
    /// 400: signed, but not a provider payload.
    BadPayload,
}

/// What the log keeps of a body nobody signed: its first 512 bytes (anyone may post to the
/// receiver; only signed or forwarded calls keep their whole body, for the retention period).
fn excerpt(raw: &str) -> String {
    let mut end = raw.len().min(512);
    while !raw.is_char_boundary(end) {
        end -= 1;
    }
    raw[..end].to_string()
}

/// The parts of a provider payload the receiver routes by.
struct Skim {
    object: Value,
    /// (WABA id, entry time, field, change, phone number id of a number-level change).
    changes: Vec<(String, Value, String, Value, Option<String>)>,
}

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
            changes.push((waba.clone(), time.clone(), field, change.clone(), number));
        }
    }
    Some(Skim {
        object: v.get("object").cloned().unwrap_or(Value::Null),
        changes,
    })
}

impl Runtime {
    /// Runs CPU work on a provider body on the blocking pool, holding one of the ingest's
    /// slots (one per core) as `ingest_provider_webhook` does.
    async fn on_ingest_pool<T: Send + 'static>(
        &self,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, ActorError> {
        let _slot = self
            .shared
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
        let expected = self.shared.config.provider_webhook_verify_token.as_deref();
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
        if let Err(e) = self.shared.store.record_provider_call(&[log], &[]).await {
            tracing::error!(error = %e, "could not log a provider handshake");
        }
        ok.then_some(challenge).flatten()
    }

    /// `POST /api/webhooks/provider`.
    pub async fn receive_provider_webhook(
        &self,
        body: bytes::Bytes,
        signature: Option<&str>,
    ) -> Result<Receipt, ActorError> {
        let store = &self.shared.store;
        let raw = String::from_utf8_lossy(&body).into_owned();
        // Reading the body (up to 2 MB) and hashing it per BM are CPU work: on the blocking
        // pool, as many at once as the ingest allows (one per core).
        let read = body.clone();
        let skimmed = self.on_ingest_pool(move || skim(&read)).await?;
        let Some(skim) = skimmed else {
            // Not a provider payload: logged without an account, refused.
            let log = NewProviderLog {
                kind: "evento".into(),
                signature: "invalida".into(),
                http_status: 400,
                detail: Some("corpo que não é um webhook do provedor".into()),
                body: Some(excerpt(&raw)),
                ..NewProviderLog::default()
            };
            store.record_provider_call(&[log], &[]).await?;
            return Ok(Receipt::BadPayload);
        };
        let wabas: Vec<String> = skim
            .changes
            .iter()
            .map(|c| c.0.clone())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let numbers: Vec<String> = skim
            .changes
            .iter()
            .filter_map(|c| c.4.clone())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let fields: Vec<String> = skim
            .changes
            .iter()
            .map(|c| c.2.clone())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let owners = store.waba_owners(&wabas).await?;
        // Per account: does a BM of it with an app secret sign the body?
        let secrets: Vec<(i64, Option<engine::Secret>)> = owners
            .iter()
            .map(|o| (o.account_id, o.app_secret.clone()))
            .collect();
        let (signed, header) = (body.clone(), signature.map(str::to_string));
        let verdict = self
            .on_ingest_pool(move || {
                let mut verdict: BTreeMap<i64, &'static str> = BTreeMap::new();
                for (account, secret) in &secrets {
                    let v = match (secret, &header) {
                        (Some(secret), Some(h))
                            if provider::signature::verify(secret.expose(), &signed, h) =>
                        {
                            "valida"
                        }
                        (Some(_), _) => "invalida",
                        (None, _) => "sem_validacao",
                    };
                    let e = verdict.entry(*account).or_insert(v);
                    // One signing BM is enough for the account; an invalid one outranks
                    // "unvalidated".
                    if v == "valida" || (v == "invalida" && *e == "sem_validacao") {
                        *e = v;
                    }
                }
                verdict
            })
            .await?;
        let any_valid = verdict.values().any(|v| *v == "valida");
        let mut applied = false;
        let mut apply_note = None;
        if any_valid {
            match self
                .ingest_provider_webhook(None, body.clone(), signature)
                .await
            {
                Ok(_) => applied = true,
                Err(ActorError::InvalidSignature) => apply_note = Some(
                    "assinatura válida para o BM, mas os números não a reconhecem: não aplicado"
                        .to_string(),
                ),
                Err(ActorError::BadPayload(d)) => apply_note = Some(format!("não aplicado: {d}")),
                Err(e) => return Err(e),
            }
        }
        let number_owners = store.number_owners(&numbers).await?;
        let mut logs = Vec::new();
        let mut forwards = Vec::new();
        let accounts: BTreeSet<i64> = verdict
            .keys()
            .copied()
            .chain(number_owners.iter().map(|n| n.account_id))
            .collect();
        for account in &accounts {
            let v = verdict.get(account).copied().unwrap_or("sem_validacao");
            let forward = v != "invalida";
            if forward {
                forwards.extend(forwards_for(*account, &skim, &owners, &number_owners));
            }
            logs.push(NewProviderLog {
                account_id: Some(*account),
                kind: "evento".into(),
                signature: v.into(),
                http_status: if any_valid || v != "invalida" { 200 } else { 401 },
                applied: applied && v == "valida",
                waba_ids: wabas.clone(),
                phone_number_ids: numbers.clone(),
                fields: fields.clone(),
                detail: match v {
                    "sem_validacao" => Some("BM sem app secret cadastrado: encaminhado sem validação e não aplicado".into()),
                    "invalida" => Some("assinatura não confere com o app secret do BM: nem aplicado, nem encaminhado".into()),
                    _ => apply_note.clone(),
                },
                body: Some(if v == "invalida" { excerpt(&raw) } else { raw.clone() }),
            });
        }
        let refused = !any_valid
            && verdict.values().any(|v| *v == "invalida")
            && !verdict.values().any(|v| *v == "sem_validacao");
        if accounts.is_empty() {
            logs.push(NewProviderLog {
                kind: "evento".into(),
                signature: "invalida".into(),
                http_status: 401,
                waba_ids: wabas,
                phone_number_ids: numbers,
                fields,
                detail: Some("nenhuma WABA conhecida: nenhum segredo para validar".into()),
                body: Some(excerpt(&raw)),
                ..NewProviderLog::default()
            });
            store.record_provider_call(&logs, &[]).await?;
            return Ok(Receipt::InvalidSignature);
        }
        if refused {
            store.record_provider_call(&logs, &[]).await?;
            return Ok(Receipt::InvalidSignature);
        }
        store.record_provider_call(&logs, &forwards).await?;
        if !forwards.is_empty() {
            self.wake_dispatcher();
        }
        Ok(Receipt::Accepted)
    }
}

impl Runtime {
    /// `POST /api/webhook-logs/{id}/reforward`: the line's forwards queued again; how many.
    pub async fn reforward(&self, account_id: i64, log_id: i64) -> Result<u64, ActorError> {
        let n = self.shared.store.reforward(account_id, log_id).await?;
        if n > 0 {
            self.wake_dispatcher();
        }
        Ok(n)
    }
}

/// A forward's identity: client, lane's channel, phone number id, field, WABA, entry time.
type GroupKey = (i64, i64, Option<String>, String, String, Value);

/// The forwards of one account: each number-level change to its number's client (the entry
/// with only that number's changes), each WABA-level change to the WABA's client.
fn forwards_for(
    account: i64,
    skim: &Skim,
    wabas: &[WabaOwner],
    numbers: &[NumberOwner],
) -> Vec<Forward> {
    // (client, channel, phone number id, field, waba, time) → changes, in order.
    let mut groups: Vec<(GroupKey, Vec<Value>)> = Vec::new();
    for (waba, time, field, change, number) in &skim.changes {
        let target = match number {
            Some(pnid) => numbers
                .iter()
                .find(|n| n.account_id == account && &n.phone_number_id == pnid)
                .and_then(|n| n.client_id.map(|c| (c, n.channel_id))),
            None => wabas
                .iter()
                .find(|w| w.account_id == account && &w.waba_id == waba)
                .and_then(|w| Some((w.client_id?, w.first_channel?))),
        };
        let Some((client, channel)) = target else {
            continue;
        };
        let key = (
            client,
            channel,
            number.clone(),
            field.clone(),
            waba.clone(),
            time.clone(),
        );
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, changes)) => changes.push(change.clone()),
            None => groups.push((key, vec![change.clone()])),
        }
    }
    groups
        .into_iter()
        .map(|((client_id, channel_id, phone_number_id, field, waba, time), changes)| Forward {
            account_id: account,
            client_id,
            channel_id,
            phone_number_id,
            field,
            payload: json!({"object": skim.object, "entry": [{"id": waba, "time": time, "changes": changes}]}),
        })
        .collect()
}
