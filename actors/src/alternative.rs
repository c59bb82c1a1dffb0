//! Numbers of an alternative provider as the runtime meets them (decision D-034): no actor
//! and no sends, a live view with the `provedor_alternativo` health. Registering them and
//! reading their templates is `services::alternative`.

use crate::error::ActorError;
use crate::protocol::ChannelSnapshot;
use crate::Runtime;
use engine::channel::Health;
use engine::ids::{AccountId, ChannelId};
use serde_json::json;
use storage::channels::ChannelRecord;

/// The refusal of a send through a number of an alternative provider (422
/// `provedor_alternativo`).
pub fn send_refused(record: &ChannelRecord) -> ActorError {
    ActorError::Rejected {
        code: "provedor_alternativo",
        message: format!(
            "O número {} é atendido pelo provedor alternativo {}: o disparo só referencia o número (templates e URL de notificação) e não envia por ele. Envie pelo provedor ou use um número oficial.",
            record.id, record.engine
        ),
        details: json!({"channel_id": record.id, "engine": record.engine}),
    }
}

/// The live view of a number of an alternative provider: its record and the
/// `provedor_alternativo` health.
pub fn snapshot(record: ChannelRecord) -> ChannelSnapshot {
    ChannelSnapshot {
        record,
        health: Health::alternative_provider(),
    }
}

impl Runtime {
    /// A channel of the account that has no actor because it is a number of an alternative
    /// provider; `NotFound` for anything else.
    pub async fn alternative_record(
        &self,
        account_id: i64,
        channel_id: i64,
    ) -> Result<ChannelRecord, ActorError> {
        match self
            .shared
            .store
            .channel(AccountId(account_id), ChannelId(channel_id))
            .await
        {
            Ok(r) if !r.official => Ok(r),
            Ok(_) | Err(storage::StorageError::NotFound) => Err(ActorError::NotFound),
            Err(e) => Err(e.into()),
        }
    }
}
