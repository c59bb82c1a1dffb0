-- Campaign reports (D-036): the detail report walks a campaign's recipients in id order.
CREATE INDEX campaign_recipients_campaign_id ON campaign_recipients (campaign_id, id);
