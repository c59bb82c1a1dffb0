"""The integrator's flow through a client generated from the account API's document by a
generator no one here wrote (openapi-python-client, pinned in tests/requirements.txt): connect a
number, create and submit a template, create a campaign, add recipients, start it, read its
stats and the report.

Usage: python3 client_flow.py '<JSON: base, token, out_dir, phone_number_id, waba_id,
access_token, app_secret>'. Prints one JSON line with what it saw; exits non-zero on a failed
expectation."""

import importlib
import json
import os
import subprocess
import sys
import time
import urllib.request

CFG = json.loads(sys.argv[1])
BASE = CFG["base"]
OUT = CFG["out_dir"]


def generate():
    """The client, generated from the live document."""
    os.makedirs(OUT, exist_ok=True)
    doc = os.path.join(OUT, "openapi.json")
    with urllib.request.urlopen(BASE + "/api/v1/openapi.json", timeout=20) as r, open(doc, "wb") as f:
        f.write(r.read())
    target = os.path.join(OUT, "disparo_client")
    subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from openapi_python_client.cli import app; sys.argv[0] = 'openapi-python-client'; app()",
            "generate",
            "--path",
            doc,
            "--meta",
            "none",
            "--output-path",
            target,
            "--overwrite",
        ],
        check=True,
        stdout=sys.stderr,
    )
    sys.path.insert(0, OUT)
    return importlib.import_module("disparo_client")


def operation(pkg, op_id):
    """The generated module of an operation, whatever tag folder it landed in."""
    api = os.path.join(OUT, "disparo_client", "api")
    for tag in os.listdir(api):
        if os.path.exists(os.path.join(api, tag, op_id + ".py")):
            return importlib.import_module(f"disparo_client.api.{tag}.{op_id}")
    raise AssertionError(f"no generated operation {op_id}")


def data(resp, status):
    assert resp.status_code == status, (resp.status_code, resp.content)
    parsed = resp.parsed
    assert parsed is not None, resp.content
    return parsed.data


def main():
    pkg = generate()
    from disparo_client import AuthenticatedClient
    from disparo_client import models as m

    client = AuthenticatedClient(base_url=BASE + "/api/v1", token=CFG["token"])
    seen = {}

    # Connect a number.
    connect = operation(pkg, "channels_connect")
    channel = data(
        connect.sync_detailed(
            client=client,
            body=m.ConnectOfficialIn(
                phone_number_id=CFG["phone_number_id"],
                waba_id=CFG["waba_id"],
                access_token=CFG["access_token"],
                app_secret=CFG["app_secret"],
                name="Loja pelo cliente gerado",
            ),
        ),
        201,
    )
    channel_id = channel.id
    seen["channel"] = channel_id

    # Create a template and submit it to the number; the provider approves it.
    create = operation(pkg, "templates_create")
    template = data(
        create.sync_detailed(
            client=client,
            body=m.TemplateCreateIn(name="Oferta gerada", body="Olá {{1}}, sua oferta chegou.", category="marketing", language="pt_BR"),
        ),
        201,
    )
    # Typed models: the document names every field (issue 18).
    template_id = template.id
    submit = operation(pkg, "templates_submit")
    data(submit.sync_detailed(id=template_id, client=client, body=m.ChannelsIn(channels=[channel_id])), 200)
    listing = operation(pkg, "templates_list")
    for _ in range(100):
        page = data(listing.sync_detailed(client=client), 200)
        mine = [t for t in page if t.id == template_id][0]
        states = [c.status for c in mine.channels]
        if states == ["approved"]:
            break
        time.sleep(0.1)
    assert states == ["approved"], states
    seen["template"] = mine.name

    # A campaign on that number, its recipients, started.
    campaign = data(
        operation(pkg, "campaigns_create").sync_detailed(
            client=client,
            body=m.CampaignIn(
                name="Oferta de dezembro",
                template_id=template_id,
                channels=[m.ChannelWeight(channel_id=channel_id)],
                var_map=m.CampaignInVarMapType0.from_dict({"1": {"field": "nome"}}),
            ),
        ),
        201,
    )
    campaign_id = campaign.id
    added = data(
        operation(pkg, "campaigns_recipients").sync_detailed(
            id=campaign_id,
            client=client,
            body=m.RecipientsIn(
                recipients=[
                    m.RecipientInput(phone="5511966660001", vars_=m.RecipientInputVars.from_dict({"nome": "Ana"})),
                    m.RecipientInput(phone="5511966660002", vars_=m.RecipientInputVars.from_dict({"nome": "Bia"})),
                    m.RecipientInput(phone="123", vars_=m.RecipientInputVars.from_dict({"nome": "Curto"})),
                ]
            ),
        ),
        201,
    )
    assert added.added == 2 and len(added.invalid) == 1, added
    assert added.invalid[0].index == 2 and added.invalid[0].phone == "123", added.invalid
    data(operation(pkg, "campaigns_start").sync_detailed(id=campaign_id, client=client), 200)

    # Its stats until it is done, then the report.
    read = operation(pkg, "campaigns_read")
    for _ in range(200):
        c = data(read.sync_detailed(id=campaign_id, client=client), 200)
        if c.state == m.CampaignState.COMPLETED:
            break
        time.sleep(0.1)
    assert c.state == m.CampaignState.COMPLETED, c
    seen["stats"] = c.stats.to_dict()
    report = data(operation(pkg, "reports_campaigns").sync_detailed(client=client), 200)
    row = [r for r in report if r.campaign_id == campaign_id][0]
    seen["report"] = row.to_dict()
    print(json.dumps(seen))


if __name__ == "__main__":
    main()
