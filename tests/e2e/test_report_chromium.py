"""The audit report renders in real headless Chromium, driven over the Chrome DevTools protocol.

A tiny CDP client over ``websockets`` (sync API): start Chromium with a fresh
profile and ``--remote-debugging-port=0``, read the port from the profile's
``DevToolsActivePort``, open the report from a local file, collect console
errors and exceptions, read numbers from the DOM, save a screenshot under
``test-artifacts/``. Without Chromium the test skips with the reason; with
``CI=true`` it fails instead.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from contextfold.api import Run, open_store
from contextfold.audit import report
from contextfold.audit.data import RunAudit, audit_run
from contextfold.audit.report import PAGE_SIZE, render_report
from contextfold.cli_demo import sample_events
from tests.conftest import REPO
from tests.unit.test_audit_report import make_synthetic_run

if TYPE_CHECKING:
    from websockets.sync.client import ClientConnection

ARTIFACTS = REPO / "test-artifacts"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars",
         "--remote-debugging-port=0", "--window-size=1200,900"]


def _chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        reason = "chromium is not installed (apt-get install -y chromium); .ci/run installs it"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    return path


class Cdp:
    """One page target: send commands, keep every event for later inspection."""

    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws
        self.next_id = 0
        self.events: list[dict[str, Any]] = []

    def send(self, method: str, **params: Any) -> dict[str, Any]:
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv(timeout=60))
            if msg.get("id") == self.next_id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return dict(msg.get("result", {}))
            self.events.append(msg)

    def wait_event(self, method: str) -> dict[str, Any]:
        for i, ev in enumerate(self.events):
            if ev.get("method") == method:
                return self.events.pop(i)
        while True:
            msg = json.loads(self.ws.recv(timeout=60))
            if msg.get("method") == method:
                return dict(msg)
            self.events.append(msg)

    def eval(self, expression: str) -> Any:
        result = self.send("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def errors(self) -> list[str]:
        out = []
        for ev in self.events:
            method, params = ev.get("method"), ev.get("params", {})
            if method == "Runtime.exceptionThrown":
                out.append(json.dumps(params.get("exceptionDetails", {}))[:500])
            elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                out.append(json.dumps(params.get("args", []))[:500])
            elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
                out.append(params["entry"].get("text", "")[:500])
        return out


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    exe = _chromium()
    profile = tmp_path_factory.mktemp("chromium-profile")
    proc = subprocess.Popen([exe, *FLAGS, f"--user-data-dir={profile}", "about:blank"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    port_file = profile / "DevToolsActivePort"
    deadline = time.monotonic() + 60  # startup wait, not an assertion about speed
    while not port_file.exists() or not port_file.read_text().strip():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"chromium did not start (exit {proc.poll()})")
        time.sleep(0.1)
    port = int(port_file.read_text().split()[0])
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()


@contextlib.contextmanager
def _open(browser: str, html_path: Path) -> Iterator[Cdp]:
    """A new tab on ``html_path`` (a local file), loaded, with console and log collection on."""
    from websockets.sync.client import connect

    req = urllib.request.Request(f"{browser}/json/new?about:blank", method="PUT")
    with urllib.request.urlopen(req, timeout=30) as resp:
        target = json.loads(resp.read())
    with connect(target["webSocketDebuggerUrl"], max_size=None, open_timeout=30) as ws:
        cdp = Cdp(ws)
        for domain in ("Page", "Runtime", "Log"):
            cdp.send(f"{domain}.enable")
        _viewport(cdp, 900)
        cdp.send("Page.navigate", url=html_path.as_uri())
        cdp.wait_event("Page.loadEventFired")
        yield cdp


def _viewport(cdp: Cdp, height: int) -> None:
    cdp.send("Emulation.setDeviceMetricsOverride", width=1200, height=height, deviceScaleFactor=1,
             mobile=False)


def _screenshot(cdp: Cdp, name: str) -> Path:
    _viewport(cdp, int(cdp.eval("Math.min(document.documentElement.scrollHeight, 6000)")))
    shot = cdp.send("Page.captureScreenshot", format="png")
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / name
    path.write_bytes(base64.b64decode(shot["data"]))
    return path


def _check_common(cdp: Cdp, audit: RunAudit) -> None:
    assert cdp.errors() == []
    n = len(audit.turns)
    assert cdp.eval("document.querySelectorAll('details.turn').length") == n
    assert cdp.eval("document.getElementById('integrity').dataset.ok") == "true"
    assert cdp.eval("document.getElementById('layers-chart').dataset.turns") == str(n)
    assert cdp.eval("document.querySelectorAll('#layers-chart path.layer').length") == 8
    # the chart's areas are really drawn (non-empty boxes), not just present in the markup
    assert cdp.eval("Array.from(document.querySelectorAll('#layers-chart path.layer'))"
                    ".some(p => p.getBBox().height > 1)")
    last = audit.turns[-1].manifest
    bar = cdp.eval(f"""Array.from(document.querySelectorAll('#turn-{last.turn} .bar .seg'))
                      .map(s => [s.dataset.layer, Number(s.dataset.tokens)])""")
    segs = dict(bar)
    for layer, tokens in last.layer_tokens.items():
        assert segs.get(layer, 0) == tokens
    assert segs["reserve"] == last.reserved_output_tokens
    assert sum(segs.values()) == last.window_tokens
    summary = cdp.eval(f"document.querySelector('#turn-{last.turn} > summary').textContent")
    assert f"{last.selected_tokens} / {last.budget_tokens} tokens" in summary
    reused = cdp.eval("document.getElementById('prefix-reused').dataset.reused")
    assert reused == str(audit.summary.prefix_reused)
    # every label of the charts lies inside its chart (a six-digit axis label once ran off the left)
    assert cdp.eval("Array.from(document.querySelectorAll('svg.chart text')).every(t => t.getBBox().x >= 0)")


def _sample_run(tmp_path: Path) -> Run:
    run = open_store(f"sqlite:///{tmp_path / 'sample.db'}").run("demo-fix-invoice")
    run.append(sample_events(), expected_version=0)
    m = run.build("anthropic", window=16_000, reserve=2_000).manifest
    run.observe_usage(m.turn, round(m.selected_tokens * 1.13), cached_tokens=1200, output_tokens=300)
    return run


def test_sample_run_report_in_chromium(browser: str, tmp_path: Path) -> None:
    audit = audit_run(_sample_run(tmp_path))
    path = tmp_path / "sample.html"
    path.write_text(render_report(audit), encoding="utf-8")
    with _open(browser, path) as cdp:
        _check_sample(cdp, audit)


def _check_sample(cdp: Cdp, audit: RunAudit) -> None:
    _check_common(cdp, audit)
    assert cdp.eval("document.getElementById('usage-chart').dataset.points") == "1"
    observed = cdp.eval("Number(document.querySelector('#usage-chart circle.obs').dataset.observed)")
    assert observed == audit.turns[-1].usage.input_tokens  # type: ignore[union-attr]
    # open the last turn (as a person would) and read its selected fragments
    last = audit.turns[-1].turn
    cdp.eval(f"document.getElementById('turn-{last}').open = true")
    rows = cdp.eval(f"document.querySelectorAll('#turn-{last} table.selected tbody tr').length")
    assert rows == len(audit.turns[-1].manifest.fragments)
    shot = _screenshot(cdp, "audit-report-sample.png")
    assert shot.stat().st_size > 10_000
    assert cdp.errors() == []


def test_200_turn_report_in_chromium(browser: str, tmp_path: Path) -> None:
    run = open_store(f"sqlite:///{tmp_path / 'long.db'}").run("synthetic-200")
    make_synthetic_run(run, 200, usage_ratio=1.1, record_from=181)
    audit = audit_run(run)
    assert audit.summary.recorded_turns == 20 and audit.summary.rebuilt_turns == 180
    path = tmp_path / "long.html"
    path.write_text(render_report(audit), encoding="utf-8")
    with _open(browser, path) as cdp:
        _check_long(cdp, audit)
    # a run longer than the turns shown in full opens on the page of the first of those
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(report, "DETAILED_TURNS", 2 * PAGE_SIZE)
        path.write_text(render_report(audit), encoding="utf-8")
    with _open(browser, path) as cdp:
        assert cdp.errors() == []
        shown = cdp.eval("Array.from(document.querySelectorAll('details.turn')).filter(d => d.offsetParent)"
                         ".map(d => Number(d.dataset.turn))")
        assert shown == list(range(101, 101 + PAGE_SIZE))
        assert cdp.eval("document.getElementById('page-info').textContent") == "page 3 of 4 (200 turns)"
        assert cdp.eval("document.querySelectorAll('#turn-100 table.selected').length") == 0
        assert cdp.eval("document.querySelectorAll('#turn-101 table.selected').length") == 1


def _check_long(cdp: Cdp, audit: RunAudit) -> None:
    _check_common(cdp, audit)
    # paginated: one page of turns is displayed, the pager says how many pages
    shown = cdp.eval("Array.from(document.querySelectorAll('details.turn')).filter(d => d.offsetParent)"
                     ".map(d => Number(d.dataset.turn))")
    assert shown == list(range(1, PAGE_SIZE + 1))
    pages = -(-200 // PAGE_SIZE)
    assert cdp.eval("document.getElementById('page-info').textContent") == f"page 1 of {pages} (200 turns)"
    cdp.eval("document.getElementById('next').click()")
    first_on_page_2 = cdp.eval("Array.from(document.querySelectorAll('details.turn'))"
                               ".find(d => d.offsetParent).dataset.turn")
    assert first_on_page_2 == str(PAGE_SIZE + 1)
    # filter: turns with protocol repairs (a lost result every 25 turns)
    cdp.eval("const f = document.getElementById('turn-filter'); f.value = 'repairs';"
             "f.dispatchEvent(new Event('change'))")
    with_repairs = cdp.eval("Array.from(document.querySelectorAll('details.turn'))"
                            ".filter(d => d.offsetParent).map(d => Number(d.dataset.turn))")
    assert with_repairs == [t.turn for t in audit.turns if t.repairs or t.build_notes]
    # no build ran before turn 181, so that build logged every call the run had moved past as lost
    assert with_repairs == [181]
    lost = cdp.eval("Array.from(document.querySelectorAll('#turn-181 ul.repairs li code'))"
                    ".map(c => c.textContent)")
    assert lost == [f"c{i}" for i in range(25, 176, 25)]
    assert audit.summary.repairs == 7
    # jump to a turn near the end: its page is shown and it is open
    cdp.eval("const j = document.getElementById('jump'); j.value = '190';"
             "j.dispatchEvent(new Event('change'))")
    assert cdp.eval("document.getElementById('turn-190').open && !!document.getElementById('turn-190')"
                    ".offsetParent")
    points = cdp.eval("Array.from(document.querySelectorAll('#usage-chart circle.obs'))"
                      ".map(c => [Number(c.dataset.turn), Number(c.dataset.observed)])")
    assert points == [[t.turn, t.usage.input_tokens] for t in audit.turns if t.usage]
    assert len(points) == 20
    assert cdp.eval("document.querySelectorAll('#prefix-chart rect').length") == 200
    cdp.eval("document.getElementById('turn-filter').value = 'all';"
             "document.getElementById('turn-filter').dispatchEvent(new Event('change'));"
             "document.getElementById('turn-200').scrollIntoView(); window.scrollTo(0, 0)")
    _screenshot(cdp, "audit-report-200-turns.png")
    assert cdp.errors() == []
