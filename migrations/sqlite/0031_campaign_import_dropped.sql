-- What a panel campaign's CSV import dropped (issue 47 item 10): rows whose number repeats an
-- earlier row's (the first one stays) and blank rows. Shown on the campaign's page.
ALTER TABLE campaigns ADD COLUMN import_duplicates BIGINT NOT NULL DEFAULT 0;
ALTER TABLE campaigns ADD COLUMN import_blank BIGINT NOT NULL DEFAULT 0;
