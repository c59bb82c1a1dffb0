-- Templates that follow the numbers (issue 17): with auto_replicate a library template is
-- submitted to every number added to or connected in the account, and health raises
-- template_ausente while it is missing on one.
ALTER TABLE templates ADD COLUMN auto_replicate INTEGER NOT NULL DEFAULT 1;
