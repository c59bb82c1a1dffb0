"""Debian's Chromium as the browser tests launch it: headless, no sandbox (root in CI), and no
background networking (this machine's network is closed; Chromium's own update, sync and
component checks would be refused at every start)."""

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def launch(playwright):
    """A Chromium browser from the Playwright handle `playwright`."""
    return playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)


def run_capturing(run, out_dir, context_args):
    """Runs `run(page, context)` in a fresh Chromium context made with `context_args`,
    accepting every dialog; a page error fails it; on any failure saves `falha.png` and
    `falha.html` under `out_dir` before re-raising."""
    import os

    from playwright.sync_api import sync_playwright

    os.makedirs(out_dir, exist_ok=True)
    with sync_playwright() as p:
        browser = launch(p)
        context = browser.new_context(**context_args)
        page = context.new_page()
        page.on("dialog", lambda d: d.accept())
        errors = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        try:
            run(page, context)
            assert not errors, f"page errors: {errors}"
        except BaseException:
            page.screenshot(path=os.path.join(out_dir, "falha.png"), full_page=True)
            with open(os.path.join(out_dir, "falha.html"), "w", encoding="utf-8") as f:
                f.write(page.content())
            raise
        finally:
            browser.close()
