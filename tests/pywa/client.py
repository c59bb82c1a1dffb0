#!/usr/bin/env python3
"""Drives the provider simulator with pywa (PyPI, pinned in tests/requirements.txt), a real
third-party WhatsApp Cloud API client, and prints one JSON object describing what happened.

    python3 tests/pywa/client.py SIM_BASE_URL TOKEN PHONE_NUMBER_ID WABA_ID APP_SECRET PORT

The simulator must POST its webhooks to http://127.0.0.1:<webhook_port>/ (its --webhook-url, or
PUT /_sim/config). This script:

1. builds a `pywa.WhatsApp` client whose Graph calls go to the simulator (pywa hard-codes
   https://graph.facebook.com/v{api_version}; its documented `session=` parameter takes an
   httpx.Client, and that client's transport sends graph.facebook.com requests to the
   simulator), and serves the webhook with a stdlib threaded http.server that hands every
   POST's raw body and X-Hub-Signature-256 to pywa (`webhook_update_validator`, then
   `webhook_update_handler`), so signature checks and parsing are pywa's own; pywa handlers
   record what they see. One forged POST (wrong signature) checks that pywa refuses it;
2. creates a template with pywa (TEXT header {{1}}, BODY {{1}} {{2}}, FOOTER, a dynamic URL
   button and a QUICK_REPLY button), approves it through /_sim, and sends it with every
   parameter;
3. opens the 24 h window with /_sim/inbound, then sends a text, an image by link and an image
   uploaded with pywa (a PNG made here);
4. reads the number with pywa;
5. sends the template without its URL button parameter;
6. waits (at most 15 s) for the statuses and the inbound message to reach the handlers.

Output keys: sends {step: wamid} and errors {step: {code, message, details?, subcode?,
http_status}} (a send is in one of the two); statuses {step: [status...]} and statuses_by_id
{wamid: [{status, tracker, error_code?, pricing_category?}]}, as pywa's on_message_status saw
them; inbound [{id, from, user_id, name, type, text}] from on_message; incomplete_template
{accepted, id | code}; bad_signature {http_status, refused_by_pywa, handler_called}; phone (the
number's fields as pywa parsed them) and phone_read_with; template, template_updates, media_id,
media_url, handshake; webhooks (POSTs received, events in them vs events the handlers got, and
each POST's shape) and pywa_log (pywa's warnings, e.g. updates it failed to build); unexpected.

Environment: PYWA_API_VERSION, the Graph version pywa calls (default 25.0).

Exit status: 0 when every step ran (refusals by the simulator are data, recorded with their
codes), 1 when something unexpected was raised (also recorded in "unexpected"), 2 on bad usage.
"""

from __future__ import annotations

import json
import logging
import os
import struct
import sys
import threading
import time
import traceback
import urllib.error
import urllib.parse
import urllib.request
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pywa
from pywa import WhatsApp
from pywa.errors import WhatsAppError
from pywa.types import Message, MessageStatus, RawUpdate
from pywa.types.templates import (
    BodyText,
    Buttons,
    FooterText,
    HeaderText,
    QuickReplyButton,
    Template,
    TemplateCategory,
    TemplateLanguage,
    TemplateStatusUpdate,
    URLButton,
)

# pywa's default (26.0) is newer than the simulator's newest version (v25.0). The refusal
# codes of template parameters depend on the version (e.g. 131008 before v23.0, 132018 after),
# so a caller may choose it.
API_VERSION = os.environ.get("PYWA_API_VERSION", "25.0")
VERIFY_TOKEN = "pywa-verify"
RECIPIENT = "5511988887777"
WAIT_S = 15.0
# Non-ASCII on purpose: the provider signs the \u-escaped body, pywa must verify that.
INBOUND_TEXT = "Olá, cadê meu pedido?"


class ToSimulator(httpx.BaseTransport):
    """Sends requests addressed to graph.facebook.com to the simulator (plain HTTP), keeping
    path, query, headers and body exactly as pywa built them."""

    def __init__(self, base_url: str):
        self._base = httpx.URL(base_url.rstrip("/"))
        self._inner = httpx.HTTPTransport()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.host == "graph.facebook.com":
            url = request.url.copy_with(
                scheme=self._base.scheme,
                host=self._base.host,
                port=self._base.port,
                raw_path=self._base.raw_path.rstrip(b"/") + request.url.raw_path,
            )
            headers = request.headers.copy()
            headers["host"] = url.netloc.decode("ascii")
            request = httpx.Request(
                request.method,
                url,
                headers=headers,
                stream=request.stream,
                extensions=request.extensions,
            )
        return self._inner.handle_request(request)

    def close(self) -> None:
        self._inner.close()


class Record:
    """What the handlers, the webhook server and the steps saw; read under `lock`."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.statuses: dict[str, list[dict]] = {}
        self.inbound: list[dict] = []
        self.template_updates: list[dict] = []
        self.raw_updates = 0
        self.posts: list[dict] = []
        self.pywa_log: list[dict] = []


REC = Record()


class PywaLog(logging.Handler):
    """Keeps pywa's warnings and errors: when it cannot build an update from a webhook it logs
    the exception (and calls no handler) instead of raising."""

    def emit(self, record: logging.LogRecord) -> None:
        item = {"level": record.levelname, "message": record.getMessage()}
        if record.exc_info and record.exc_info[1] is not None:
            item["exception"] = repr(record.exc_info[1])
        with REC.lock:
            REC.pywa_log.append(item)


def events_in(body: bytes) -> dict:
    """Counts what one webhook POST carries (to see what pywa, which reads only the first
    entry / change / status / message of a POST, may have left out)."""
    try:
        doc = json.loads(body)
    except ValueError:
        return {"json": False}
    out = {"entries": 0, "changes": 0, "statuses": [], "messages": [], "fields": []}
    for entry in doc.get("entry", []):
        out["entries"] += 1
        for change in entry.get("changes", []):
            out["changes"] += 1
            out["fields"].append(change.get("field"))
            value = change.get("value", {})
            for s in value.get("statuses", []):
                out["statuses"].append([s.get("id"), s.get("status")])
            for m in value.get("messages", []):
                out["messages"].append(m.get("id"))
    return out


def make_webhook_server(wa: WhatsApp, port: int) -> ThreadingHTTPServer:
    class Hook(BaseHTTPRequestHandler):
        def log_message(self, *_):  # keep stdout for the JSON and stderr quiet
            pass

        def answer(self, text: str, status: int) -> None:
            data = (text or "").encode()
            self.send_response(status)
            self.send_header("content-type", "text/plain")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            q = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
            text, status = wa.webhook_challenge_handler(
                vt=q.get("hub.verify_token", [None])[0],
                ch=q.get("hub.challenge", [None])[0],
            )
            self.answer(text, status)

        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("content-length") or 0))
            sig = self.headers.get("X-Hub-Signature-256")
            refused = wa.webhook_update_validator(body, sig)
            if refused is not None:
                text, status = refused
            else:
                text, status = wa.webhook_update_handler(body)
            with REC.lock:
                REC.posts.append(
                    {
                        "forged": self.headers.get("X-Test-Forged") == "1",
                        "status": status,
                        "answer": text,
                        "signature_refused": refused is not None,
                        **events_in(body),
                    }
                )
            self.answer(text, status)

    server = ThreadingHTTPServer(("127.0.0.1", port), Hook)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def register_handlers(wa: WhatsApp) -> None:
    @wa.on_message()
    def on_message(_: WhatsApp, msg: Message) -> None:
        with REC.lock:
            REC.inbound.append(
                {
                    "id": msg.id,
                    "from": msg.from_user.wa_id,
                    "user_id": msg.from_user.bsuid,
                    "name": msg.from_user.name,
                    "type": str(msg.type),
                    "text": msg.text,
                }
            )

    @wa.on_message_status()
    def on_status(_: WhatsApp, st: MessageStatus) -> None:
        item = {"status": str(st.status), "tracker": st.tracker}
        if st.error is not None:
            item["error_code"] = st.error.code
        if st.pricing is not None:
            item["pricing_category"] = str(st.pricing.category)
        with REC.lock:
            REC.statuses.setdefault(st.id, []).append(item)

    @wa.on_template_status_update()
    def on_template(_: WhatsApp, up: TemplateStatusUpdate) -> None:
        with REC.lock:
            REC.template_updates.append(
                {"template_id": up.template_id, "status": str(up.new_status)}
            )

    @wa.on_raw_update()
    def on_raw(_: WhatsApp, __: RawUpdate) -> None:
        with REC.lock:
            REC.raw_updates += 1


def png_1x1() -> bytes:
    """A valid 1x1 RGB PNG."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data))
            + kind
            + data
            + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
        )

    ihdr = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    idat = zlib.compress(b"\x00\xff\x80\x00")
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", ihdr)
        + chunk(b"IDAT", idat)
        + chunk(b"IEND", b"")
    )


def sim_post(base: str, path: str, doc: dict) -> tuple[int, object]:
    """A control-API call (/_sim/...), outside pywa."""
    req = urllib.request.Request(
        base.rstrip("/") + path,
        data=json.dumps(doc).encode(),
        headers={"content-type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace")


def api_error(e: WhatsAppError) -> dict:
    out = {"code": e.code, "message": e.message}
    if e.details:
        out["details"] = e.details
    if e.subcode:
        out["subcode"] = e.subcode
    if e.raw_response is not None:
        out["http_status"] = e.raw_response.status_code
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 7:
        print("usage:" + __doc__.split("\n\n")[1].strip().removeprefix("python3"),
              file=sys.stderr)
        return 2
    base, token, phone_id, waba_id, app_secret, port = argv[1:]
    port = int(port)

    log = PywaLog(level=logging.WARNING)
    logging.getLogger("pywa").addHandler(log)
    logging.getLogger("pywa").setLevel(logging.WARNING)

    out: dict = {
        "pywa_version": pywa.__version__,
        "api_version": API_VERSION,
        "recipient": RECIPIENT,
        "sends": {},
        "errors": {},
        "unexpected": [],
    }

    def step(name: str, fn):
        """Runs one step: a WhatsAppError is the simulator's answer (recorded under errors),
        anything else is unexpected."""
        try:
            return fn()
        except WhatsAppError as e:
            out["errors"][name] = api_error(e)
        except Exception as e:  # noqa: BLE001 - recorded and turned into the exit status
            out["unexpected"].append(
                {"step": name, "error": repr(e), "trace": traceback.format_exc(limit=6)}
            )
        return None

    session = httpx.Client(transport=ToSimulator(base), timeout=15.0)
    wa = WhatsApp(
        phone_id=phone_id,
        token=token,
        session=session,
        api_version=API_VERSION,
        waba_id=waba_id,
        app_secret=app_secret,
        verify_token=VERIFY_TOKEN,
        validate_updates=True,
    )
    register_handlers(wa)
    server = make_webhook_server(wa, port)
    hook = f"http://127.0.0.1:{port}/"

    # The verification handshake, as the provider would do it when the callback is saved.
    try:
        with urllib.request.urlopen(
            hook + "?hub.mode=subscribe&hub.verify_token="
            + VERIFY_TOKEN + "&hub.challenge=1158201444", timeout=5
        ) as r:
            out["handshake"] = {"status": r.status, "body": r.read().decode()}
    except Exception as e:  # noqa: BLE001
        out["unexpected"].append({"step": "handshake", "error": repr(e)})

    # 1. A forged POST: valid shape, wrong signature. pywa must refuse it (and call no handler).
    forged_id = "wamid.FORGED" + str(int(time.time() * 1000))
    forged = json.dumps(
        {
            "object": "whatsapp_business_account",
            "entry": [{"id": waba_id, "changes": [{"field": "messages", "value": {
                "messaging_product": "whatsapp",
                "metadata": {"display_phone_number": "0", "phone_number_id": phone_id},
                "contacts": [{"profile": {"name": "X"}, "wa_id": "5511900000000",
                              "user_id": "BR.1"}],
                "messages": [{"from": "5511900000000", "id": forged_id,
                              "timestamp": str(int(time.time())), "type": "text",
                              "text": {"body": "forged"}}]}}]}],
        }
    ).encode()
    req = urllib.request.Request(
        hook,
        data=forged,
        headers={
            "content-type": "application/json",
            "X-Hub-Signature-256": "sha256=" + "0" * 64,
            "X-Test-Forged": "1",
        },
        method="POST",
    )
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            forged_status = r.status
    except urllib.error.HTTPError as e:
        forged_status = e.code

    # 2. The template, created with pywa and approved through the control API.
    name = f"pedido_pywa_{int(time.time() * 1000)}"
    header = HeaderText("Pedido {{1}}", "123")
    body = BodyText("Olá {{1}}, seu pedido está {{2}}.", "Ana", "a caminho")
    url_button = URLButton(
        text="Ver pedido",
        url="https://loja.example/pedido/{{1}}",
        example="https://loja.example/pedido/123",
    )
    stop_button = QuickReplyButton(text="Parar")
    template = Template(
        name=name,
        language=TemplateLanguage.PORTUGUESE_BR,
        category=TemplateCategory.UTILITY,
        components=[
            header,
            body,
            FooterText(text="Loja"),
            Buttons(buttons=[url_button, stop_button]),
        ],
    )
    out["template"] = {"name": name, "language": "pt_BR"}
    created = step("create_template", lambda: wa.create_template(template))
    if created is not None:
        out["template"].update({"id": created.id, "created_status": str(created.status),
                                "category": str(created.category)})
        status, answer = sim_post(
            base, f"/_sim/templates/{created.id}/status", {"status": "APPROVED"}
        )
        out["template"]["approve"] = {"status": status}
        if status >= 300:
            out["template"]["approve"]["answer"] = answer
        details = step("get_template", lambda: wa.get_template(created.id))
        if details is not None:
            out["template"]["status_read"] = str(details.status)

    # 3. Open the window (the recipient writes first), then the sends.
    status, answer = sim_post(
        base,
        "/_sim/inbound",
        {"phone_number_id": phone_id, "from": RECIPIENT, "text": INBOUND_TEXT,
         "name": "Ana Lúcia"},
    )
    out["inbound_trigger"] = {"status": status, "id": (answer or {}).get("data", {}).get("id")
                              if isinstance(answer, dict) else answer}

    def sent(key: str, fn) -> None:
        r = step(key, fn)
        if r is not None:
            out["sends"][key] = r.id

    if created is not None:
        sent("template", lambda: wa.send_template(
            to=RECIPIENT,
            template=template,  # pywa checks the parameters against it before sending
            params=[
                header.params("98765"),
                body.params("Ana", "a caminho"),
                url_button.params(url_variable="98765", index=0),
                stop_button.params(callback_data="parar", index=1),
            ],
            tracker="t-template",
        ))
    sent("text", lambda: wa.send_message(to=RECIPIENT, text="Seu pedido saiu.",
                                         tracker="t-text"))
    sent("image_link", lambda: wa.send_image(
        to=RECIPIENT, image="https://loja.example/foto.png", caption="por link",
        tracker="t-image-link"))
    media = step("upload_media", lambda: wa.upload_media(
        media=png_1x1(), mime_type="image/png", filename="pixel.png"))
    if media is not None:
        out["media_id"] = media.id
        sent("image_id", lambda: wa.send_image(to=RECIPIENT, image=media.id,
                                               caption="por id", tracker="t-image-id"))
        url = step("get_media_url", lambda: wa.get_media_url(media.id))
        if url is not None:
            out["media_url"] = {"mime_type": url.mime_type, "file_size": url.file_size,
                                "sha256": url.sha256}
            data = step("get_media_bytes", lambda: wa.get_media_bytes(url=url.url))
            if data is not None:
                out["media_url"]["downloaded_matches"] = data == png_1x1()

    # 4. The number's fields, as pywa reads them.
    # get_business_phone_number asks for every field pywa knows; when that is refused, the
    # WABA's number list (GET /{waba_id}/phone_numbers, pywa's get_business_phone_numbers).
    number = step("get_business_phone_number", lambda: wa.get_business_phone_number())
    out["phone_read_with"] = "get_business_phone_number"
    if number is None:
        out["phone_read_with"] = "get_business_phone_numbers"
        numbers = step("get_business_phone_numbers",
                       lambda: list(wa.get_business_phone_numbers()))
        number = next((n for n in numbers or [] if n.id == phone_id), None)
    if number is not None:
        out["phone"] = {k: getattr(number, k) for k in (
            "id", "display_phone_number", "verified_name", "quality_rating", "status",
            "name_status", "code_verification_status", "platform_type", "throughput",
            "account_mode", "is_pin_enabled", "is_on_biz_app",
            "whatsapp_business_manager_messaging_limit", "health_status")}

    # 5. The template without its URL button parameter. Sent by name and language: with
    # `template=` pywa itself refuses it before any request (recorded too).
    incomplete = [
        header.params("98765"),
        body.params("Ana", "a caminho"),
        stop_button.params(callback_data="parar", index=1),
    ]
    try:
        wa.send_template(to=RECIPIENT, template=template, params=list(incomplete))
        out["incomplete_local_check"] = "not refused by pywa"
    except ValueError as e:
        out["incomplete_local_check"] = str(e)
    if created is not None:
        sent("template_incomplete", lambda: wa.send_template(
            to=RECIPIENT, name=name, language=TemplateLanguage.PORTUGUESE_BR,
            params=incomplete, tracker="t-template-incomplete"))

    if "template_incomplete" in out["sends"]:
        out["incomplete_template"] = {"accepted": True, "id": out["sends"]["template_incomplete"]}
    elif "template_incomplete" in out["errors"]:
        out["incomplete_template"] = {"accepted": False,
                                      "code": out["errors"]["template_incomplete"]["code"]}

    # 6. Wait for sent + delivered of every accepted send and for the inbound message.
    trigger_id = out["inbound_trigger"].get("id")

    def done() -> bool:
        with REC.lock:
            for wamid in out["sends"].values():
                seen = {s["status"] for s in REC.statuses.get(wamid, [])}
                if not ({"sent", "delivered"} <= seen or "failed" in seen):
                    return False
            return any(m["id"] == trigger_id for m in REC.inbound)

    start = time.monotonic()
    while time.monotonic() - start < WAIT_S and not done():
        time.sleep(0.1)
    out["waited_s"] = round(time.monotonic() - start, 1)
    time.sleep(0.5)  # let a read status or a retry that is already on its way land

    server.shutdown()
    with REC.lock:
        forged_post = next((p for p in REC.posts if p["forged"]), None)
        out["bad_signature"] = {
            "http_status": forged_status,
            "refused_by_pywa": bool(forged_post and forged_post["signature_refused"]),
            "handler_called": any(m["id"] == forged_id for m in REC.inbound),
        }
        out["statuses"] = {
            key: [s["status"] for s in REC.statuses.get(wamid, [])]
            for key, wamid in out["sends"].items()
        }
        out["statuses_by_id"] = {
            wamid: REC.statuses[wamid] for wamid in sorted(REC.statuses)
        }
        out["inbound"] = [dict(m) for m in REC.inbound]
        out["template_updates"] = list(REC.template_updates)
        real = [p for p in REC.posts if not p["forged"]]
        posted_statuses = [s for p in real for s in p.get("statuses", [])]
        posted_messages = [m for p in real for m in p.get("messages", [])]
        out["webhooks"] = {
            "posts": len(real),
            "refused_signature": sum(p["signature_refused"] for p in real),
            "answers": sorted({p["status"] for p in real}),
            "pywa_raw_updates": REC.raw_updates,
            "statuses_in_posts": len(posted_statuses),
            "statuses_seen_by_handlers": sum(len(v) for v in REC.statuses.values()),
            "messages_in_posts": len(posted_messages),
            "messages_seen_by_handlers": len(REC.inbound),
            # per POST: its changes' fields, then how many statuses / messages it carried
            "shapes": [
                "+".join(p.get("fields") or ["?"])
                + f" s={len(p.get('statuses', []))} m={len(p.get('messages', []))}"
                for p in real
            ],
            "posts_with_several_events": sum(
                1 for p in real
                if p.get("entries", 0) > 1 or p.get("changes", 0) > 1
                or len(p.get("statuses", [])) + len(p.get("messages", [])) > 1
            ),
        }
        # pywa's own log lines about updates it could not build (deduplicated).
        seen, problems = set(), []
        for item in REC.pywa_log:
            k = (item["message"].split("]", 1)[-1].strip(), item.get("exception"))
            if k not in seen:
                seen.add(k)
                problems.append(item)
        out["pywa_log"] = problems
    session.close()
    print(json.dumps(out, ensure_ascii=False, default=str, sort_keys=True))
    return 1 if out["unexpected"] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
