-- The example image of a template's media header (issue 47 item 6): the provider approves a
-- media header only with an example, uploaded to it (resumable upload) at each submission.
ALTER TABLE templates ADD COLUMN header_example_mime TEXT;
ALTER TABLE templates ADD COLUMN header_example BLOB;
