"""A big campaign followed through reloads (issue 47, "Done when"): an Operador imports a
330-row CSV saved by Excel in Portuguese (Windows-1252, accents, repeated numbers and blank
rows), maps its columns, sends it to hygiene and sees it validated; an Admin approves it; the
campaign page is reloaded while it dispatches, after a pause, after the resume and after a
cancel, and each time reads whole with the actions of its status. At 390 px too.

Usage: python3 campaign_day.py '<JSON: base, maker, checker, password, template_label,
out_dir>'. Prints one JSON line with what it saw; on a failure saves a screenshot and the
page's HTML under out_dir and exits non-zero."""

import json
import os
import re
import sys

from chromium import run_capturing
from steps import await_approval_stage, expect_toast, reload
from playwright.sync_api import expect

CFG = json.loads(sys.argv[1])
BASE = CFG["base"]
OUT = CFG["out_dir"]
CITIES = ["São Paulo", "Belém", "Maceió", "Florianópolis", "Goiânia", "Ribeirão Preto"]
NAMES = ["Ângela", "João", "Conceição", "Lúcia", "Inês", "Sebastião", "Marília", "Otávio"]

seen = {"reloads": {}}


def csv_bytes():
    """330 data rows: 300 distinct numbers, 20 repeats of earlier ones, 10 blank rows, in
    Windows-1252 with `;` (Excel's "CSV (separado por vírgulas)" in Portuguese)."""
    lines = ["telefone;Nome completo;cidade"]
    for i in range(300):
        lines.append(f"+55 11 9{7000_0000 + i:08d};{NAMES[i % len(NAMES)]} {i};{CITIES[i % len(CITIES)]}")
        if i % 15 == 14:
            j = i - 7
            lines.append(f"5511{9_7000_0000 + j:09d};{NAMES[j % len(NAMES)]} de novo;{CITIES[0]}")
        if i % 30 == 29:
            lines.append(";;")
    return ("\r\n".join(lines) + "\r\n").encode("cp1252")


def login(page, email):
    page.goto(BASE + "/login")
    page.get_by_label("E-mail").fill(email)
    page.get_by_label("Senha").fill(CFG["password"])
    page.get_by_role("button", name="Entrar").click()
    page.wait_for_url(BASE + "/")


def logout(page):
    page.get_by_role("button", name="Sair").click()
    page.wait_for_url(BASE + "/login")


def readable(page, name, status, buttons, absent):
    """The campaign page after a reload: its name, `status`, the `buttons` of that status and
    none of the `absent` ones, the progress and the sends table; also at a phone's width."""
    reload(page)
    expect(page.get_by_role("heading", name="Natal 330")).to_be_visible()
    expect(page.locator("#status")).to_have_text(status)
    for b in buttons:
        expect(page.get_by_role("button", name=b, exact=True)).to_be_visible()
    for b in absent:
        expect(page.get_by_role("button", name=b, exact=True)).to_have_count(0)
    expect(page.locator("#barra-total")).to_be_attached()
    assert "não pôde ser lida" not in page.content()
    page.set_viewport_size({"width": 390, "height": 844})
    overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
    page.set_viewport_size({"width": 1280, "height": 900})
    assert overflow <= 0, f"{name}: {overflow}px wider than a phone"
    seen["reloads"][name] = {
        "status": page.locator("#status").inner_text(),
        "progress": page.locator("#progresso p").first.inner_text(),
        "send_rows": page.locator("table tbody tr").count(),
    }
    page.screenshot(path=os.path.join(OUT, f"campanha-{name}.png"), full_page=True)


def run(page):
    login(page, CFG["maker"])
    page.goto(BASE + "/campanhas")
    page.get_by_label("Nome", exact=True).fill("Natal 330")
    page.get_by_label("Template", exact=True).select_option(label=CFG["template_label"])
    for box in page.locator("input[name=numeros]").all():
        box.check()
    page.get_by_label(re.compile("Arquivo CSV")).set_input_files(
        files=[{"name": "contatos natal.csv", "mimeType": "text/csv", "buffer": csv_bytes()}]
    )
    expect(page.locator("#previa-codificacao")).to_contain_text("Windows-1252")
    expect(page.locator("#previa-tabela")).to_contain_text("São Paulo")
    page.get_by_label("Coluna do número").select_option("telefone")
    page.get_by_label("Coluna do nome").select_option("Nome completo")
    for i, column in enumerate(["Nome completo", "cidade"]):
        page.get_by_role("button", name="Adicionar variável").click()
        page.get_by_label("Variável {{%d}}" % (i + 1)).select_option(column)
    page.get_by_role("button", name="Enviar para higienização").click()
    page.wait_for_url(re.compile(BASE + r"/campanhas/\d+$"))
    expect_toast(page, "Campanha importada")
    seen["campaign_url"] = page.url
    await_approval_stage(page)
    seen["hygiene"] = page.locator("#higiene").inner_text()
    seen["dropped"] = page.locator("#descartados").inner_text()
    # Any contact's message before approving (issue 47 item 10): the number as the CSV has it.
    page.get_by_label(re.compile("^Prévia por contato")).fill("+55 11 970000005")
    page.get_by_role("button", name="Ver prévia").click()
    expect(page.locator("#previa-contato .texto")).to_have_text("Olá Sebastião 5, o Natal chegou em Ribeirão Preto.")
    seen["preview_typed"] = page.locator("#previa-contato .texto").inner_text()
    # The maker cannot approve: the page says so instead of offering the button.
    expect(page.get_by_role("button", name="Aprovar e disparar")).to_have_count(0)
    expect(page.locator("#aprovacao")).to_be_visible()
    logout(page)

    login(page, CFG["checker"])
    page.goto(seen["campaign_url"])
    page.get_by_role("button", name="Aprovar e disparar").click()
    expect(page.locator("#status")).to_have_text("Em andamento", timeout=20000)
    readable(page, "disparando", "Em andamento", ["Pausar", "Cancelar"], ["Retomar"])
    # A row of the sends table opens its contact's message.
    row = page.locator("table tbody tr").nth(3)
    row.get_by_role("button", name="Prévia").click()
    expect(page.locator("#previa-contato .texto")).to_contain_text("o Natal chegou em")
    seen["preview_row"] = [row.locator("td").first.inner_text(), page.locator("#previa-contato").inner_text()]
    page.get_by_role("button", name="Pausar", exact=True).click()
    expect(page.locator("#status")).to_have_text("Pausada", timeout=20000)
    expect_toast(page, "Campanha pausada.")
    readable(page, "pausada", "Pausada", ["Retomar", "Cancelar"], ["Pausar"])
    page.get_by_role("button", name="Retomar", exact=True).click()
    expect(page.locator("#status")).to_have_text("Em andamento", timeout=20000)
    readable(page, "retomada", "Em andamento", ["Pausar", "Cancelar"], ["Retomar"])
    page.get_by_role("button", name="Cancelar", exact=True).click()
    expect(page.locator("#status")).to_have_text("Cancelada", timeout=20000)
    readable(page, "cancelada", "Cancelada", [], ["Pausar", "Retomar", "Cancelar"])
    expect(page.get_by_role("button", name="Exportar CSV")).to_be_visible()


def main():
    run_capturing(lambda page, _context: run(page), OUT, {"viewport": {"width": 1280, "height": 900}})
    print(json.dumps(seen))


if __name__ == "__main__":
    main()
