"""Clicks through the web panel in a real browser (Debian's Chromium driven by Playwright), as
operators would: an Admin logs in, sees the dashboard (its KPIs change without a reload when a
task is opened elsewhere), syncs a BM, creates a client and the Operador and Client users,
uploads a CSV campaign and sees the preview of its rows; the Operador sees the hygiene result,
approves, watches the progress reach 100 % live and exports the sends; moves a task on the
kanban; reads the webhook logs; logs out. A Client is refused the campaign. A revoked session
returns to the login page. Every page visited passes axe-core's accessibility check and fits a
phone's width.

Usage: python3 panel.py '<JSON: base, admin_email, password, out_dir>'. Prints one JSON line
with what it saw; on a failure saves a screenshot and the page's HTML under out_dir and exits
non-zero."""

import json
import os
import re
import sys
import urllib.request

from chromium import run_capturing
from steps import await_approval_stage, expect_toast, reload
from playwright.sync_api import expect

CFG = json.loads(sys.argv[1])
BASE = CFG["base"]
OUT = CFG["out_dir"]
PASSWORD = CFG["password"]
AXE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "node_modules", "axe-core", "axe.min.js")
# axe-core's rule sets for WCAG 2 A and AA: labels on inputs, names on buttons and links,
# landmarks, language, titles, contrast.
AXE_TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "best-practice"]

CSV = (
    "telefone;Nome completo;cidade\n"
    "+55 11 97770-0001;Ana;Recife\n"
    "5511977700002;Bruno Ávila;São José\n"
    "(55) 11 97770-0003;Carla;Olinda\n"
    "5511977700004;Davi;Recife\n"
    "12345;Curto;Recife\n"
    # Excel's blank row and two repeats of earlier numbers: dropped, and the campaign says so.
    ";;\n"
    "5511977700002;Bruno de novo;Recife\n"
    "+55 (11) 97770-0001;Ana;Recife\n"
)

seen = {"axe": {}, "phone_width": {}}
# A real 1×1 PNG (the builder previews it before submit).
TINY_PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489"
    "0000000d49444154789c63506838f01f00048402608a409ecd0000000049454e44ae426082"
)
# The Operador's password after the Admin resets it in the users page.
OLGA_PASSWORD = "nova-senha-da-olga-2026"


def api(method, path, token, body=None):
    """The panel API, straight (as another operator's tool would call it)."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(BASE + path, data=data, method=method)
    req.add_header("Authorization", "Bearer " + token)
    req.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(req, timeout=20) as r:
        return json.loads(r.read() or b"null")


def api_login(email):
    req = urllib.request.Request(
        BASE + "/api/login",
        data=json.dumps({"email": email, "password": PASSWORD}).encode(),
        method="POST",
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=20) as r:
        return json.loads(r.read())["data"]["token"]


# What a person must never read on a page (issue 47 item 9): a code instead of its label, a
# time in ISO UTC, an API route, an environment variable. Users' own data (template names,
# secrets shown once, wiki text, a template's body) is taken out before looking.
RAW_WORDS = [
    (re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}"), "ISO time"),
    (re.compile(r"\b[a-z]+(?:_[a-z0-9]+)+\b"), "code"),
    (re.compile(r"\b[A-Z]{2,}(?:_[A-Z0-9]+)+\b"), "code"),
    (
        re.compile(
            r"\b(?:GREEN|YELLOW|RED|UNKNOWN|WORKING|CONNECTED|DISCONNECTED|PENDING|APPROVED"
            r"|REJECTED|PAUSED|MARKETING|UTILITY|AUTHENTICATION|approved|pending|rejected"
            r"|delivered|failed|queued|skipped|retrying|valid|invalid|unknown|verified)\b"
        ),
        "code",
    ),
    (re.compile(r"\b(?:GET|POST|PATCH|PUT|DELETE) /"), "API route"),
]
USER_DATA = ".segredo, .previa, .conteudo-wiki, .template h2, #c-template, pre.payload, .mensagem"


def check_words(page, name):
    """No code, ISO time or route in what the page shows (issue 47 item 9)."""
    text = page.evaluate(
        """sel => { const b = document.body.cloneNode(true);
                    b.querySelectorAll(sel).forEach(e => e.remove());
                    b.querySelectorAll('select').forEach(s => s.replaceWith(
                        [...s.options].map(o => o.text).join(' | ')));
                    return b.innerText; }""",
        USER_DATA,
    )
    found = sorted({(kind, m.group(0)) for rx, kind in RAW_WORDS for m in rx.finditer(text)})
    assert not found, f"{name}: shows {found}"
    seen.setdefault("words_checked", []).append(name)


def check_page(page, name):
    """axe-core on the page as it is (no violation allowed), then the page at a phone's width
    (no horizontal scroll of the page itself), then its words ([`check_words`])."""
    check_words(page, name)
    page.add_script_tag(path=AXE)
    result = page.evaluate(
        "tags => axe.run(document, {runOnly: {type: 'tag', values: tags}})", AXE_TAGS
    )
    violations = [
        {"id": v["id"], "impact": v["impact"], "nodes": [n["target"] for n in v["nodes"]][:5]}
        for v in result["violations"]
    ]
    assert not violations, f"{name}: accessibility violations: {json.dumps(violations)}"
    seen["axe"][name] = len(result["passes"])
    # The pages as the README shows them (docs/screenshots, copied from a run's out_dir).
    page.screenshot(path=os.path.join(OUT, f"{name}.png"), full_page=True)
    size = page.viewport_size
    page.set_viewport_size({"width": 390, "height": 844})
    overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
    # The menu folds behind its button on a phone, and opens with it (issue 47 item 11).
    button = page.locator("#abrir-menu")
    if button.count():
        expect(page.locator("#menu-principal")).to_be_hidden()
        button.click()
        expect(page.locator("#menu-principal")).to_be_visible()
        expect(button).to_have_attribute("aria-expanded", "true")
        button.click()
        expect(page.locator("#menu-principal")).to_be_hidden()
        seen.setdefault("phone_menu", []).append(name)
    # The numbers' quality, health and next step stay in view, no sideways scroll.
    if name == "inventario":
        page.screenshot(path=os.path.join(OUT, "inventario-celular.png"), full_page=True)
        for cls in ["qualidade", "saude", "proximo-passo"]:
            box = page.locator(f"td.{cls}").first.bounding_box()
            assert box and box["x"] >= 0 and box["x"] + box["width"] <= 390, (cls, box)
        seen["phone_cards"] = True
    page.set_viewport_size(size)
    assert overflow <= 0, f"{name}: {overflow}px wider than a phone"
    seen["phone_width"][name] = True


def login(page, email, password=PASSWORD):
    page.goto(BASE + "/login")
    page.get_by_label("E-mail").fill(email)
    page.get_by_label("Senha").fill(password)
    page.get_by_role("button", name="Entrar").click()
    page.wait_for_url(BASE + "/")
    expect(page.get_by_role("heading", name="Painel", exact=True)).to_be_visible()


def logout(page):
    page.get_by_role("button", name="Sair").click()
    page.wait_for_url(BASE + "/login")


def run(page, context):
    admin = CFG["admin_email"]
    # The login page, then a wrong password: the API's message.
    page.goto(BASE + "/")
    page.wait_for_url(BASE + "/login")
    check_page(page, "login")
    page.get_by_label("E-mail").fill(admin)
    page.get_by_label("Senha").fill("senha-errada-123")
    page.get_by_role("button", name="Entrar").click()
    expect(page.get_by_role("alert")).to_be_visible()
    seen["wrong_password"] = page.get_by_role("alert").inner_text()

    # Dashboard: KPIs, and a task opened elsewhere shows up without a reload (SSE).
    login(page, admin)
    check_page(page, "dashboard")
    kpi = page.locator("#kpis article", has_text="Tarefas abertas").locator(".kpi")
    before = int(kpi.inner_text())
    token = api_login(admin)
    api("POST", "/api/tasks", token, {"titulo": "Conferir qualidade do número", "prioridade": "alta"})
    expect(kpi).to_have_text(str(before + 1), timeout=15000)
    seen["dashboard_live"] = True

    # Inventory: sync the BM.
    page.get_by_role("link", name="Inventário").click()
    page.wait_for_url(BASE + "/inventario")
    check_page(page, "inventario")
    page.get_by_role("button", name=re.compile("Sincronizar agora")).first.click()
    expect(page.get_by_role("status").filter(has_text="Sincronizado")).to_be_visible(timeout=15000)
    seen["synced"] = page.get_by_role("status").filter(has_text="Sincronizado").inner_text()

    # A client with a webhook URL: its secret is shown once.
    page.get_by_role("link", name="Clientes").click()
    page.get_by_label("Nome").fill("Loja Centro")
    page.get_by_label("URL do webhook").fill("https://loja-centro.example/webhook")
    page.get_by_role("button", name="Criar cliente").click()
    expect(page.locator(".segredo code")).to_contain_text("whsec_")
    first_secret = page.locator(".segredo code").inner_text()
    check_page(page, "clientes")
    # Its secret rotated: a new one, shown in place.
    page.get_by_role("button", name="Gerar novo segredo do webhook de Loja Centro").click()
    expect(page.locator("td .segredo code")).to_contain_text("whsec_")
    assert page.locator("td .segredo code").inner_text() != first_secret
    seen["client_secret"] = page.locator("td .segredo code").inner_text()
    # Edited (document and webhook URL) and, for a second client, removed (issue 47 item 6).
    page.get_by_text("Editar Loja Centro").click()
    edit_form = page.locator("form.editar-cliente").first
    edit_form.get_by_label("Documento (CNPJ)").fill("11.222.333/0001-81")
    edit_form.get_by_label("URL do webhook").fill(CFG["client_webhook"])
    edit_form.get_by_role("button", name="Salvar cliente").click()
    expect(page.get_by_role("cell", name=CFG["client_webhook"])).to_be_visible()
    expect(page.get_by_role("cell", name="11.222.333/0001-81")).to_be_visible()
    page.locator("#t-novo-cliente + form").get_by_label("Nome").fill("Loja Temporária")
    page.get_by_role("button", name="Criar cliente").click()
    expect(page.get_by_role("cell", name="Loja Temporária", exact=True)).to_be_visible()
    page.get_by_text("Editar Loja Temporária").click()
    page.get_by_role("button", name="Remover o cliente Loja Temporária").click()
    expect(page.get_by_role("cell", name="Loja Temporária", exact=True)).to_have_count(0)
    seen["client_edited"] = True

    # The inventory again: a number linked to the client, its profile photo sent to the provider.
    page.get_by_role("link", name="Inventário").click()
    page.locator("tr.editar summary").first.click()
    editor = page.locator("tr.editar").first
    editor.get_by_label("Cliente").select_option(label="Loja Centro")
    editor.get_by_role("button", name="Salvar", exact=True).click()
    page.wait_for_url(re.compile(r"/inventario#numero-\d+$"))
    page.locator("tr.editar summary").first.click()
    expect(page.locator("tr.editar").first.get_by_label("Cliente")).to_have_value(re.compile(r"\d+"))
    # Its guardrails, loaded when the editor opens, saved in place.
    guard = page.locator("tr.editar").first.locator(".guardrails")
    expect(guard).to_contain_text("Guardrails")
    guard.get_by_label(re.compile("Teto diário")).fill("5000")
    guard.get_by_role("button", name="Salvar guardrails").click()
    expect(page.locator("tr.editar").first.get_by_role("status")).to_have_text("Guardrails salvos.")
    expect(page.locator("tr.editar").first.get_by_label(re.compile("Teto diário"))).to_have_value("5000")
    png = b"\x89PNG\r\n\x1a\n" + bytes(i % 251 for i in range(2048))
    page.locator("tr.editar").first.get_by_label(re.compile("Foto do perfil")).set_input_files(
        files=[{"name": "foto.png", "mimeType": "image/png", "buffer": png}]
    )
    page.locator("tr.editar").first.get_by_role("button", name="Enviar foto ao provedor").click()
    page.wait_for_url(re.compile(r"/inventario#numero-\d+$"))
    expect(page.locator("img.foto").first).to_be_attached()
    seen["photo"] = page.locator("img.foto").first.get_attribute("src")
    # A BM created in the panel, then renamed (issue 47 item 6); its secret is never shown.
    page.locator("details.nova-bm summary").click()
    new_bm = page.locator("#form-nova-bm")
    new_bm.get_by_label("Nome da BM").fill("BM Loja Centro")
    new_bm.get_by_label("Cliente", exact=True).select_option(label="Loja Centro")
    new_bm.get_by_label("App secret").fill("segredo-do-app-123")
    new_bm.get_by_role("button", name="Cadastrar BM").click()
    page.wait_for_url(re.compile(r"/inventario#bm-\d+$"))
    card = page.locator("article.bm", has_text="BM Loja Centro")
    expect(card).to_be_visible()
    card.locator("details.editar-bm summary").click()
    secret = card.get_by_label("App secret")
    expect(secret).to_have_value("")
    expect(secret).to_have_attribute("placeholder", "guardado; em branco mantém")
    card.get_by_label("Nome da BM").fill("BM Loja Centro (matriz)")
    card.get_by_role("button", name="Salvar BM").click()
    expect(page.locator("article.bm h2", has_text="BM Loja Centro (matriz)")).to_be_visible()
    assert "segredo-do-app-123" not in page.content()
    seen["bm_created"] = page.url

    # The Operador and the Client users.
    page.get_by_role("link", name="Usuários").click()
    check_page(page, "usuarios")
    for name, email, role, client in [
        ("Olga Operadora", "olga@painel.test", "Operador", None),
        ("Carlos Cliente", "carlos@painel.test", "Client", "Loja Centro"),
    ]:
        page.get_by_label("Nome").fill(name)
        page.get_by_label("E-mail").fill(email)
        page.get_by_label("Papel", exact=True).select_option(role)
        if client:
            page.get_by_label("Cliente (para o papel Client)").select_option(label=client)
        page.get_by_label("Senha inicial").fill(PASSWORD)
        page.get_by_role("button", name="Criar usuário").click()
        expect_toast(page, "Usuário criado.")
        expect(page.get_by_role("cell", name=email, exact=True)).to_be_visible()
    # The Operador's token for the public sender, shown once.
    page.get_by_role("button", name="Gerar token do remetente público de Olga Operadora").click()
    expect(page.locator(".segredo code")).to_contain_text("pub_")
    # The Operador's scope (the provider's two BMs, not the one made above) and a new
    # password (issue 47 item 6).
    page.locator("summary", has_text="Escopo e senha de Olga Operadora").click()
    access = page.locator("form.acesso").filter(
        has=page.get_by_role("button", name="Salvar escopo e senha de Olga Operadora")
    )
    for box in access.locator("input[name=bms]").all():
        label = access.locator(f"label[for='{box.get_attribute('id')}']").inner_text()
        if label.startswith("Disparo Sim"):
            box.check()
    access.get_by_label(re.compile("^Nova senha")).fill(OLGA_PASSWORD)
    access.get_by_role("button", name="Salvar escopo e senha de Olga Operadora").click()
    expect(access.get_by_text("Acesso alterado.")).to_be_visible()
    seen["olga_scope_set"] = True

    # Templates: the library with a preview.
    page.get_by_role("link", name="Templates").click()
    check_page(page, "templates")
    page.get_by_role("button", name="Sincronizar status").first.click()
    expect(page.get_by_role("status").filter(has_text="Status relido")).to_be_visible()
    expect(page.locator(".previa .texto").first).not_to_contain_text("{{")
    # A template built in the panel (issue 47 item 6): previewed as typed, created and
    # submitted to a number; then one the provider would refuse, shown before any submit.
    page.locator("details.novo-template summary").click()
    page.get_by_label(re.compile(r"^Nome \(min")).fill("aviso_entrega")
    page.get_by_label("Categoria").select_option("UTILITY")
    page.get_by_label("Cabeçalho em texto (opcional)").fill("Pedido a caminho")
    page.get_by_label(re.compile("^Corpo")).fill("Olá {{1}}, seu pedido saiu para {{2}}.")
    page.get_by_label(re.compile("^Colunas que preenchem")).fill("nome,cidade")
    page.get_by_label("Rodapé (opcional)").fill("Loja Centro")
    page.get_by_label("Tipo do botão 1").select_option("url")
    page.get_by_label("Texto do botão 1").fill("Rastrear")
    page.get_by_label("Link ou telefone do botão 1").fill("https://loja.example/rastreio")
    preview = page.locator("#tpl-previa")
    expect(preview).to_contain_text("Olá [nome], seu pedido saiu para [cidade].")
    expect(preview.locator(".botao")).to_have_text("Rastrear")
    page.locator("#form-template input[name=numeros]").first.check()
    page.get_by_role("button", name="Criar template").click()
    page.wait_for_url(re.compile(r"/templates#template-\d+$"))
    expect_toast(page, "Template criado e submetido ao provedor.")
    built = page.locator("article.template", has=page.locator("h2", has_text="aviso_entrega"))
    expect(built.locator(".balao .botao")).to_have_text("Rastrear")
    seen["template_built"] = built.locator("ul li").first.inner_text()
    # Submitted to every number from its card: the card reads its status again in place
    # (issue 47 item 8), one line per number, without a reload.
    expect(built.locator("ul li")).to_have_count(1)
    built.get_by_role("button", name="Submeter aos números").click()
    expect(built.get_by_role("status")).to_contain_text("Enviado ao provedor")
    expect(built.locator("ul li")).to_have_count(2)
    seen["template_submitted_everywhere"] = built.locator("ul li").all_inner_texts()
    page.locator("details.novo-template summary").click()
    page.get_by_label(re.compile(r"^Nome \(min")).fill("aviso_rastreio")
    page.get_by_label(re.compile("^Corpo")).fill("Seu pedido está a caminho.")
    page.get_by_label("Tipo do botão 1").select_option("url")
    page.get_by_label("Texto do botão 1").fill("Rastrear")
    page.get_by_label("Link ou telefone do botão 1").fill("https://loja.example/r/{{1}}")
    page.get_by_role("button", name="Criar template").click()
    page.wait_for_url(re.compile(r"/templates#template-\d+$"))
    refused = page.locator("article.template", has=page.locator("h2", has_text="aviso_rastreio"))
    expect(refused.locator(".problemas")).to_contain_text("O provedor recusaria")
    seen["template_problems"] = refused.locator(".problemas li").all_inner_texts()
    # An image header (issue 47 item 6): refused in place without its example image, then
    # built with it (previewed before submit) and submitted to a number.
    page.locator("details.novo-template summary").click()
    page.get_by_label(re.compile(r"^Nome \(min")).fill("oferta_com_foto")
    page.get_by_label("Cabeçalho", exact=True).select_option("image")
    expect(page.get_by_label("Cabeçalho em texto (opcional)")).to_be_hidden()
    page.get_by_label(re.compile("^Corpo")).fill("Chegou a coleção de verão, {{1}}.")
    page.get_by_label(re.compile("^Colunas que preenchem")).fill("nome")
    page.locator("#form-template input[name=numeros]").first.check()
    page.get_by_role("button", name="Criar template").click()
    expect(page.locator("#avisos [role=alert]")).to_contain_text("imagem de exemplo")
    image_input = page.get_by_label(re.compile("^Imagem de exemplo do cabeçalho"))
    expect(image_input).to_have_attribute("aria-invalid", "true")
    expect(image_input).to_be_focused()
    image_input.set_input_files(files=[{"name": "verao.png", "mimeType": "image/png", "buffer": TINY_PNG}])
    expect(page.locator("#tpl-previa img.cabecalho")).to_be_visible()
    expect(page.locator("#form-template input[name=numeros]").first).to_be_checked()
    page.get_by_role("button", name="Criar template").click()
    page.wait_for_url(re.compile(r"/templates#template-\d+$"))
    expect_toast(page, "Template criado e submetido ao provedor.")
    photo = page.locator("article.template", has=page.locator("h2", has_text="oferta_com_foto"))
    expect(photo.locator(".cabecalho-midia")).to_contain_text("imagem do cabeçalho")
    expect(photo.locator(".problemas")).to_have_count(0)
    expect(photo.locator("ul li")).to_have_count(1)
    seen["image_template"] = photo.locator("ul li").first.inner_text()

    # The wiki: Markdown rendered, scripts removed.
    page.get_by_role("link", name="Wiki").click()
    page.get_by_role("link", name="Como aquecer um número").click()
    expect(page.locator("article strong", has_text="um passo por dia")).to_be_visible()
    assert page.locator("article script").count() == 0
    check_page(page, "wiki")
    # A page written in the panel with a Markdown preview, then edited (issue 47 item 6).
    page.get_by_role("link", name="Wiki").click()
    page.locator("details.nova-pagina summary").click()
    page.get_by_label("Título").fill("Roteiro do plantão")
    page.get_by_label("Conteúdo (Markdown)").fill("# Plantão\n\n- **Verificar** a qualidade\n\n<script>alert(2)</script>")
    page.get_by_role("button", name="Pré-visualizar").click()
    expect(page.locator("#wiki-previa-nova strong")).to_have_text("Verificar")
    assert page.locator("#wiki-previa-nova script").count() == 0
    page.get_by_label("Visibilidade").select_option("public")
    page.get_by_role("button", name="Criar página").click()
    page.wait_for_url(re.compile(r"/wiki/roteiro-do-plantao$"))
    expect(page.get_by_role("heading", name="Roteiro do plantão")).to_be_visible()
    page.locator("details.editar-pagina summary").click()
    expect(page.get_by_label("Visibilidade")).to_have_value("public")
    page.get_by_label("Conteúdo (Markdown)").fill("# Plantão\n\n- **Conferir** os alertas")
    page.get_by_role("button", name="Salvar página").click()
    expect(page.locator(".conteudo-wiki strong")).to_have_text("Conferir")
    reload(page)
    expect(page.locator(".conteudo-wiki strong")).to_have_text("Conferir")
    seen["wiki_written"] = page.url

    # A CSV campaign: the first rows previewed, the columns mapped, sent to hygiene.
    page.get_by_role("link", name="Campanhas").click()
    page.wait_for_url(BASE + "/campanhas")
    check_page(page, "campanhas")
    # The dispatch switch (DISPARO_ENABLED), off and on again.
    page.get_by_role("button", name="Suspender disparos").click()
    expect(page.get_by_text("Disparos suspensos")).to_be_visible()
    page.get_by_role("button", name="Habilitar disparos").click()
    expect(page.get_by_text("Disparos habilitados")).to_be_visible()
    page.get_by_label("Nome", exact=True).fill("Natal no navegador")
    page.get_by_label("Template", exact=True).select_option(label=CFG["template_label"])
    page.get_by_label(re.compile("Arquivo CSV")).set_input_files(
        # Saved as Excel in Portuguese saves "CSV (separado por vírgulas)": Windows-1252.
        files=[{"name": "contatos.csv", "mimeType": "text/csv", "buffer": CSV.encode("cp1252")}]
    )
    expect(page.locator("#previa-tabela")).to_contain_text("Bruno Ávila")
    expect(page.locator("#previa-tabela")).to_contain_text("São José")
    expect(page.locator("#previa-codificacao")).to_contain_text("Windows-1252")
    seen["preview_rows"] = page.locator("#previa-tabela tbody tr").count()
    page.get_by_label("Coluna do número").select_option("telefone")
    page.get_by_label("Coluna do nome").select_option("Nome completo")
    # The variables are chosen among the CSV's columns (issue 47: the name column chosen as
    # a variable used to make every contact invalid); the name column goes as `nome`.
    for i, column in enumerate(CFG["variables"].split(",")):
        page.get_by_role("button", name="Adicionar variável").click()
        page.get_by_label("Variável {{%d}}" % (i + 1)).select_option(column)
    expect(page.locator("#variaveis-valor")).to_have_value(
        ",".join("nome" if c == "Nome completo" else c.lower() for c in CFG["variables"].split(","))
    )
    # Sent without a number ticked: refused in place (issue 47 item 5), the numbers' field
    # marked and focused, the file, name and mapping kept.
    page.get_by_role("button", name="Enviar para higienização").click()
    expect(page.locator("#avisos [role=alert]")).to_contain_text("números")
    first_box = page.locator("input[name=numeros]").first
    expect(first_box).to_have_attribute("aria-invalid", "true")
    expect(first_box).to_be_focused()
    assert page.evaluate("document.getElementById('arquivo').files.length") == 1
    expect(page.get_by_label("Nome", exact=True)).to_have_value("Natal no navegador")
    expect(page.get_by_label("Coluna do nome")).to_have_value("Nome completo")
    seen["refused_in_place"] = page.locator("#avisos [role=alert]").inner_text()
    for box in page.locator("input[name=numeros]").all():
        box.check()
    page.get_by_role("button", name="Enviar para higienização").click()
    page.wait_for_url(re.compile(BASE + r"/campanhas/\d+$"))
    campaign_url = page.url
    logout(page)

    # The Operador: hygiene result, approval, live progress to 100 %, export.
    login(page, "olga@painel.test", OLGA_PASSWORD)
    page.goto(campaign_url)
    await_approval_stage(page)
    hygiene = page.locator("#higiene").inner_text()
    assert "4 válidos" in hygiene and "1 inválidos" in hygiene, hygiene
    expect(page.get_by_role("cell", name="formato de número inválido")).to_be_visible()
    seen["hygiene"] = hygiene
    seen["dropped"] = page.locator("#descartados").inner_text()
    check_page(page, "campanha")
    # A test send: the first contact's message, to the Operador's own phone (issue 47 item 10).
    page.get_by_label(re.compile("^Envio de teste")).fill("+55 11 97770-0099")
    page.get_by_role("button", name="Enviar teste").click()
    expect(page.locator("#teste-resultado")).to_contain_text("Teste enviado para 5511977700099")
    seen["test_send"] = page.locator("#teste-resultado").inner_text()
    page.get_by_role("button", name="Aprovar e disparar").click()
    page.wait_for_load_state()
    # No reload from here: the SSE stream moves the bar.
    expect(page.locator("#pct")).to_have_text("100 %", timeout=60000)
    # Finished: the page draws itself again for the new status (no more Pausar/Cancelar).
    expect(page.locator("#status")).to_have_text("Concluída", timeout=30000)
    expect(page.get_by_role("button", name="Cancelar")).to_have_count(0)
    expect(page.locator("#barra-total")).to_have_attribute("value", "100")
    seen["progress"] = page.locator("#progresso p").first.inner_text()
    with page.expect_download() as dl:
        page.get_by_role("button", name="Exportar CSV").click()
    path = dl.value.path()
    with open(path, encoding="utf-8") as f:
        exported = f.read()
    rows = [line for line in exported.splitlines() if line.strip()]
    assert len(rows) == 5, exported  # the header and the four valid contacts
    assert "5511977700002" in exported, exported
    seen["export_rows"] = len(rows) - 1

    # The kanban: a new task, dragged to "Em andamento", stays there.
    page.get_by_role("link", name="Tarefas").click()
    page.get_by_label("Título").fill("Trocar foto do número")
    page.get_by_role("button", name="Criar tarefa").click()
    card = page.locator("article.cartao", has_text="Trocar foto do número")
    expect(card).to_be_visible()
    check_page(page, "tarefas")
    page.evaluate("window.scrollTo(0, 0)")
    card.drag_to(page.locator("section[data-coluna=em_andamento] h2"))
    moved = page.locator("section[data-coluna=em_andamento] article.cartao", has_text="Trocar foto do número")
    expect(moved).to_be_visible()
    reload(page)
    expect(moved).to_be_visible()
    seen["task_moved"] = True

    # The webhook logs: the provider's events, signature checked.
    page.get_by_role("link", name="Webhooks").click()
    page.wait_for_url(BASE + "/webhook-logs")
    rows = page.locator("#logs tbody tr")
    expect(rows.first).to_be_visible()
    expect(page.locator("#logs .assinatura-valida").first).to_have_text("válida")
    seen["webhook_log_rows"] = rows.count()
    seen["webhook_numbers"] = page.locator("#logs tbody tr td:nth-child(5)").all_inner_texts()
    # A line's details: each forward to the client (name, state, attempts) and the payload.
    details = page.locator("details.detalhe-log", has=page.locator("p.entrega")).first
    details.locator("summary").click()
    # Olga sees two of the three BMs; Loja Centro is also linked to the third, so it is not
    # hers to name.
    expect(details.locator("p.entrega").first).to_contain_text("um cliente fora do seu escopo")
    expect(details.locator("p.entrega").first).to_contain_text("tentativa")
    seen["forward_line"] = details.locator("p.entrega").first.inner_text()
    seen["payload_shown"] = details.locator("pre.payload").count()
    page.get_by_role("button", name=re.compile("Reencaminhar o evento")).first.click()
    expect(page.get_by_role("status").filter(has_text="Reencaminhado")).to_be_visible()
    check_page(page, "webhook-logs")
    logout(page)
    # Logged out: the panel sends to the login page.
    page.goto(BASE + "/inventario")
    page.wait_for_url(re.compile(BASE + "/login"))

    # The Client: no campaigns in the menu, and refused the campaign itself.
    login(page, "carlos@painel.test")
    expect(page.get_by_role("link", name="Campanhas")).to_have_count(0)
    page.goto(campaign_url)
    expect(page.get_by_role("alert")).to_contain_text("papel")
    seen["client_refused"] = page.get_by_role("alert").inner_text()
    # Its own page (issue 47 item 7): the messages its numbers sent, nothing internal.
    page.goto(BASE + "/")
    expect(page.locator("#kpis")).not_to_contain_text("Tarefas abertas")
    page.get_by_role("link", name="Meus envios").click()
    page.wait_for_url(BASE + "/envios")
    expect(page.locator("#envios tbody tr").first).to_be_visible()
    check_page(page, "envios")
    seen["client_sends"] = page.locator("#envios tbody tr td:nth-child(3)").all_inner_texts()
    page.get_by_label("Status").select_option("read")
    page.get_by_role("button", name="Filtrar").click()
    page.wait_for_url(re.compile(r"/envios\?.*status=read"))
    seen["client_sends_read"] = page.locator("#envios tbody tr td:nth-child(5)").all_inner_texts()
    page.get_by_role("link", name="Inventário").click()
    page.wait_for_url(BASE + "/inventario")
    inventory = page.locator("#conteudo").inner_text()
    assert "Business ID" not in inventory and "Próximo passo" not in inventory, inventory
    seen["client_inventory_numbers"] = page.locator("td.qualidade").count()
    logout(page)

    # Back as Admin: the chart counts the campaign's sends; the audit log names who did what.
    login(page, admin)
    # The campaign's four sends and the test send.
    expect(page.locator("svg.grafico-horas")).to_have_attribute("aria-label", re.compile(r": 5 no total"))
    seen["chart_bars"] = page.locator("svg.grafico-horas rect").count()
    page.screenshot(path=os.path.join(OUT, "dashboard.png"), full_page=True)
    page.get_by_role("link", name="Auditoria").click()
    # Each line an action, filtered by who and by kind of record (issue 47 item 10).
    expect(page.get_by_role("cell", name=re.compile(r"^criou uma tarefa$")).first).to_be_visible()
    page.get_by_label(re.compile("^Quem")).fill("olga")
    page.get_by_label("Sobre").select_option("campaigns")
    page.get_by_role("button", name="Filtrar").click()
    page.wait_for_url(re.compile(r"/auditoria\?autor=olga&recurso=campaigns"))
    approved = page.get_by_role("cell", name=re.compile(r"^aprovou a campanha \d+$"))
    expect(approved).to_be_visible()
    who = page.locator("#auditoria tbody tr td:nth-child(2)").all_inner_texts()
    assert who and all("olga@painel.test" in w for w in who), who
    seen["audit_filtered"] = page.locator("#auditoria tbody tr td:nth-child(3)").all_inner_texts()
    reload(page)
    expect(approved).to_be_visible()
    check_page(page, "auditoria")
    # The cluster view: this gateway is one process (no NATS_URL); it says so after a reload.
    page.get_by_role("link", name="Cluster").click()
    expect(page.get_by_role("heading", name="Cluster")).to_be_visible()
    expect(page.locator("#conteudo")).to_contain_text("um processo só")
    reload(page)
    expect(page.locator("#conteudo")).to_contain_text("um processo só")
    check_page(page, "cluster")
    page.get_by_role("link", name="Painel").click()

    # A BM of another business, created in the panel with its provider ids and token, then
    # synced: its WABA and number arrive (issue 47, "Done when").
    page.get_by_role("link", name="Inventário").click()
    page.locator("details.nova-bm summary").click()
    new_bm = page.locator("#form-nova-bm")
    third = CFG["third_bm"]
    new_bm.get_by_label("Nome da BM").fill("BM Filial Norte")
    new_bm.get_by_label("Cliente", exact=True).select_option(label="Loja Centro")
    new_bm.get_by_label("Business ID (do provedor)").fill(third["business_id"])
    new_bm.get_by_label("App ID").fill(third["app_id"])
    new_bm.get_by_label("Token do usuário do sistema").fill(third["access_token"])
    new_bm.get_by_label("App secret").fill(third["app_secret"])
    new_bm.get_by_role("button", name="Cadastrar BM").click()
    page.wait_for_url(re.compile(r"/inventario#bm-\d+$"))
    expect_toast(page, "BM cadastrada.")
    card = page.locator("article.bm", has_text="BM Filial Norte")
    card.get_by_role("button", name=re.compile("Sincronizar agora")).click()
    expect(page.get_by_role("status").filter(has_text="Sincronizado")).to_contain_text("1 número(s) novo(s)", timeout=15000)
    expect_toast(page, "1 número(s) novo(s)")
    reload(page)
    expect(page.locator("#conteudo")).to_contain_text(third["display_phone"])
    assert third["access_token"] not in page.content()
    assert third["app_secret"] not in page.content()
    seen["third_bm"] = page.locator("article.bm", has_text="BM Filial Norte").locator("h2").inner_text()

    # A session revoked elsewhere returns to the login page.
    cookie = [c for c in context.cookies() if c["name"] == "disparo_sessao"][0]
    assert cookie["httpOnly"] and cookie["sameSite"] == "Lax", cookie
    api("POST", "/api/logout", cookie["value"])
    page.get_by_role("link", name="Inventário").click()
    page.wait_for_url(re.compile(r"/login\?expirada=1"))
    expect(page.get_by_role("alert")).to_contain_text("expirou")
    seen["expired"] = True


def main():
    run_capturing(
        run,
        OUT,
        {"accept_downloads": True, "bypass_csp": True, "viewport": {"width": 1280, "height": 900}},
    )
    print(json.dumps(seen))


if __name__ == "__main__":
    main()
