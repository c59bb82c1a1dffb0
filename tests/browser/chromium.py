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
