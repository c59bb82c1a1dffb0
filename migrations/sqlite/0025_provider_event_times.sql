-- When the provider sent the state a record holds (its webhook entry's `time`, ms; issue 46):
-- an older event that arrives later is not applied. A number's quality, a WABA's standing
-- (`account_update`), a template's status on a number (`message_template_status_update`).
ALTER TABLE channels ADD COLUMN quality_event_at BIGINT;
ALTER TABLE wabas ADD COLUMN standing_event_at BIGINT;
ALTER TABLE template_channels ADD COLUMN status_event_at BIGINT;
