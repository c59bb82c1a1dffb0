//! The account API's numbers as records: listing them (with their live health), a
//! message's media, a number's receiver verify token.

use crate::Services;
use actors::protocol::ChannelSnapshot;
use actors::{alternative, ActorError};
use engine::ids::{AccountId, ChannelId};

impl Services {
    /// The live state of every channel of the account, oldest first.
    pub async fn list_channels(&self, account_id: i64) -> Result<Vec<ChannelSnapshot>, ActorError> {
        let records = self.shared().store.list_channels(account_id).await?;
        let snapshots = futures::future::join_all(records.into_iter().map(|r| async move {
            if r.official {
                self.snapshot(AccountId(account_id), ChannelId(r.id)).await
            } else {
                Ok(alternative::snapshot(r))
            }
        }))
        .await;
        snapshots.into_iter().collect()
    }

    /// A keyset page of the account's channels in id order (issue 17): up to `limit` live
    /// states after the id `after` that `keep` accepts (filters on live state read further
    /// pages until the page is full or the channels end).
    pub async fn channels_page(
        &self,
        account_id: i64,
        after: Option<i64>,
        limit: usize,
        keep: impl Fn(&ChannelSnapshot) -> bool,
    ) -> Result<Vec<ChannelSnapshot>, ActorError> {
        let mut out = Vec::new();
        let mut after = after;
        loop {
            let chunk = (limit.max(1) as i64).clamp(50, 500);
            let records = self
                .shared()
                .store
                .list_channels_page(account_id, after, chunk)
                .await?;
            let n = records.len() as i64;
            after = records.last().map(|r| r.id).or(after);
            let snapshots = futures::future::join_all(records.into_iter().map(|r| async move {
                if r.official {
                    self.snapshot(AccountId(account_id), ChannelId(r.id)).await
                } else {
                    Ok(alternative::snapshot(r))
                }
            }))
            .await;
            for s in snapshots {
                let s = s?;
                if keep(&s) {
                    out.push(s);
                    if out.len() >= limit {
                        return Ok(out);
                    }
                }
            }
            if n < chunk {
                return Ok(out);
            }
        }
    }

    /// The verify token of a channel's own receiver, when it runs.
    pub fn channel_verify_token(&self, channel_id: i64) -> Option<String> {
        self.shared()
            .registry
            .get(channel_id)
            .map(|e| e.verify_token.clone())
    }

    /// `GET /messages/{id}/media`: the file of an inbound message, streamed from the provider
    /// with the channel's token. Returns the MIME type, the length when known, and the body.
    #[allow(clippy::type_complexity)]
    pub async fn message_media(
        &self,
        account_id: i64,
        message_id: i64,
    ) -> Result<
        (
            String,
            Option<u64>,
            futures::stream::BoxStream<'static, Result<bytes::Bytes, std::io::Error>>,
        ),
        ActorError,
    > {
        let store = &self.shared().store;
        let message = store.message(account_id, message_id).await?;
        let media_id = message
            .media
            .as_ref()
            .and_then(|m| m.get("provider_media_id"))
            .and_then(|v| v.as_str())
            .ok_or(ActorError::NotFound)?
            .to_string();
        let token = store
            .channel_secrets(message.channel_id)
            .await?
            .access_token;
        let info = self
            .shared()
            .graph
            .media_info(token.expose(), &media_id)
            .await?;
        Ok(self
            .shared()
            .graph
            .download_media_stream(token.expose(), &info.url)
            .await?)
    }
}
