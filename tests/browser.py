"""Pages in a real browser for the tests: a folder served on localhost, and headless
Chromium (Debian's /usr/bin/chromium, driven by the playwright package; never a browser
that playwright downloads).

    with serve(folder) as base_url, browser_page() as page:
        failures = local_failures(page, base_url)
        page.goto(base_url + "index.html")
        assert not failures

Where the browser or playwright is missing the test is skipped, except under CI
(``TREEIMP_CI=1``, set by .ci/run), where it fails with what is missing.
"""

import contextlib
import functools
import http.server
import os
import shutil
import threading
from pathlib import Path

import pytest

CHROMIUM = os.environ.get("TREEIMP_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]


def in_ci():
    """True when the test run is the project's CI (.ci/run exports TREEIMP_CI=1)."""
    return os.environ.get("TREEIMP_CI", "") not in ("", "0")


def unavailable(reason):
    """Skip the calling test because ``reason``; in CI fail it instead, so that a missing
    browser or package is never a silent pass."""
    if in_ci():
        pytest.fail(f"{reason} (required in CI: .ci/run installs it)", pytrace=False)
    pytest.skip(reason)


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 - the base class's signature
        pass


@contextlib.contextmanager
def serve(folder):
    """Serve ``folder`` over HTTP on 127.0.0.1 (a free port) from a thread; yields the
    base URL, ending in "/"."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ValueError(f"serve: {folder} is not a folder")
    handler = functools.partial(_QuietHandler, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


@contextlib.contextmanager
def browser_page(*, offline=True):
    """A fresh page of headless Chromium. With ``offline`` (the default) every request
    that does not go to 127.0.0.1 or localhost is aborted, so a test never depends on the
    network (a page's CDN scripts simply fail)."""
    if not (os.path.isfile(CHROMIUM) and os.access(CHROMIUM, os.X_OK)):
        found = shutil.which("chromium")
        unavailable(f"no Chromium at {CHROMIUM}"
                    + (f" (there is one at {found}: set TREEIMP_CHROMIUM)" if found else
                       " (Debian: apt-get install chromium)"))
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        unavailable("the playwright package is not installed (pip install '.[docs]')")
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS,
                                     headless=True)
        try:
            page = browser.new_page()
            if offline:
                page.route("**/*", lambda route: route.continue_()
                           if _is_local(route.request.url) else route.abort())
            yield page
        finally:
            browser.close()


def _is_local(url):
    return url.startswith(("http://127.0.0.1", "http://localhost", "data:", "about:",
                           "blob:"))


def local_failures(page, base_url):
    """A list that fills with every request to ``base_url`` that fails in ``page`` or is
    answered with a status >= 400, as "STATUS URL" (or "failed URL: reason")."""
    failures = []

    def on_response(response):
        if response.url.startswith(base_url) and response.status >= 400:
            failures.append(f"{response.status} {response.url}")

    def on_failed(request):
        if request.url.startswith(base_url):
            failures.append(f"failed {request.url}: {request.failure}")

    page.on("response", on_response)
    page.on("requestfailed", on_failed)
    return failures
