-- The template library and each template's state per number.
CREATE TABLE templates (
    id BIGSERIAL PRIMARY KEY,
    account_id BIGINT NOT NULL REFERENCES accounts (id),
    name TEXT NOT NULL,
    provider_name TEXT NOT NULL,
    kind TEXT NOT NULL DEFAULT 'official',
    category TEXT NOT NULL,
    language TEXT NOT NULL,
    body TEXT NOT NULL,
    header_type TEXT,
    header_text TEXT,
    footer_text TEXT,
    has_media_header BIGINT NOT NULL DEFAULT 0,
    buttons TEXT NOT NULL,
    var_map TEXT NOT NULL,
    problems TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    UNIQUE (account_id, provider_name, language)
);

CREATE TABLE template_channels (
    id BIGSERIAL PRIMARY KEY,
    account_id BIGINT NOT NULL REFERENCES accounts (id),
    template_id BIGINT NOT NULL REFERENCES templates (id),
    channel_id BIGINT NOT NULL REFERENCES channels (id),
    waba_id TEXT NOT NULL,
    provider_name TEXT NOT NULL,
    provider_template_id TEXT,
    version BIGINT NOT NULL DEFAULT 1,
    status TEXT NOT NULL,
    rejection_reason TEXT,
    updated_at BIGINT NOT NULL,
    UNIQUE (template_id, channel_id)
);
CREATE INDEX template_channels_provider ON template_channels (provider_template_id);
CREATE INDEX template_channels_waba ON template_channels (waba_id, provider_name);
