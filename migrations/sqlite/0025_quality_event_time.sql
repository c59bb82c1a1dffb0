-- When the provider sent the quality reading a number holds (its webhook entry's `time`, ms;
-- issue 46): an older `phone_number_quality_update` that arrives later is not applied.
ALTER TABLE channels ADD COLUMN quality_event_at BIGINT;
