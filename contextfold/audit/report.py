"""The audit report: one self-contained HTML file (inline CSS, SVG and a little JS; no network).

Pure: :class:`~contextfold.audit.models.RunAudit` in, an HTML string out.

Long runs stay usable and the file stays linear in turns:

- every turn is a collapsed ``<details>`` section; a small script pages them
  (``PAGE_SIZE`` per page, a jump-to-turn box, a filter for turns with
  changes or repairs); without JavaScript all sections are simply listed;
- per-turn lists are capped (``MAX_ROWS`` selected fragments: the required
  ones and the largest, in layer order; the largest ``MAX_EXCLUDED``
  per exclusion reason, as their summary says: ``manifest`` lists the newest
  first; ``MAX_DIFF`` per change list) with the remainder
  counted, because the number of dropped history fragments grows with the
  run and would make the file quadratic otherwise (the full lists are in
  ``contextfold manifest --json``);
- the run-level charts draw one path per series;
- only the newest ``DETAILED_TURNS`` turns carry their tables (selected, excluded, changes):
  an older turn's section keeps its headline, budget bar and change counts and names the
  command that shows it in full. A 3,683-turn run's report was 90 MB with every turn in
  full (headless Chromium took 29 s and 1.25 GB to load it).
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterable, Sequence
from html import escape
from typing import Any

from contextfold.audit.charts import LAYER_COLORS, layers_chart, prefix_chart, usage_chart
from contextfold.audit.effects import describe
from contextfold.audit.models import RunAudit, TurnAudit, unbuilt_answer
from contextfold.audit.text import visible
from contextfold.domain.manifest import ContextManifest

__all__ = ["DETAILED_TURNS", "MAX_DIFF", "MAX_EXCLUDED", "MAX_ROWS", "PAGE_SIZE", "prefix_pairs_text",
           "prefix_stability_text", "render_report"]

PAGE_SIZE = 50
MAX_ROWS = 60
MAX_EXCLUDED = 20
MAX_DIFF = 25
DETAILED_TURNS = 400
"""The newest turns whose sections carry their tables (see the module docstring)."""

_CSS = """
:root{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;color:#222;background:#fafafa}
body{max-width:1100px;margin:0 auto;padding:16px 24px}
h1{font-size:1.4em;margin:.2em 0}h2{font-size:1.1em;margin:1.2em 0 .4em}
code{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:.9em}
.banner{padding:8px 12px;border-radius:6px;font-weight:600}
.banner.ok{background:#e3f4e1;color:#1d5e1a}.banner.bad{background:#fde2e1;color:#8a1c17}
dl.summary{display:grid;grid-template-columns:max-content 1fr;gap:4px 16px}dl.summary dt{font-weight:600}
dl.summary dd{margin:0}
.chart{width:100%;height:auto;background:#fff;border:1px solid #ddd;border-radius:6px}
.chart text{font-size:11px;fill:#555}.chart .axis{stroke:#999}
.chart .budget{fill:none;stroke:#222;stroke-dasharray:4 3;stroke-width:1.5}
.chart .estimated{fill:none;stroke:#4e79a7;stroke-width:2}
.chart .observed{fill:none;stroke:#e15759;stroke-width:2}
.chart circle.obs{fill:#e15759}.chart circle.est{fill:#4e79a7}
.strip .reused{fill:#59a14f}.strip .changed{fill:#f28e2b}.strip .first{fill:#bbb}
.legend{display:flex;flex-wrap:wrap;gap:4px 12px;font-size:.85em;margin:4px 0}
.legend i{display:inline-block;width:10px;height:10px;margin-right:4px;border-radius:2px}
table{border-collapse:collapse;width:100%;font-size:.85em;margin:4px 0}
th,td{text-align:left;padding:2px 6px;border-bottom:1px solid #eee;vertical-align:top}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
details.turn{background:#fff;border:1px solid #ddd;border-radius:6px;margin:6px 0;padding:4px 10px}
details.turn>summary{cursor:pointer;font-weight:600}
.tag{display:inline-block;font-size:.75em;padding:0 6px;border-radius:8px;background:#eee;margin-left:4px}
.tag.warn{background:#ffe3c2}.tag.bad{background:#fde2e1}
.bar{display:flex;height:22px;border-radius:4px;overflow:hidden;border:1px solid #ccc;margin:6px 0}
.seg{height:100%}.seg.free{background:repeating-linear-gradient(45deg,#fff,#fff 4px,#eee 4px,#eee 8px)}
.seg.reserve{background:#555}.seg.calibration{background:#c9a227}.seg.framing{background:#ccc}
.more{color:#777;font-style:italic}
#pager{display:flex;gap:8px;align-items:center;margin:8px 0;flex-wrap:wrap}
.hidden{display:none}
"""

_JS = """
(function(){
  var PAGE=@PAGE@;
  var all=Array.prototype.slice.call(document.querySelectorAll('details.turn'));
  var pager=document.getElementById('pager');
  if(!pager||!all.length){return;}
  pager.classList.remove('hidden');
  var filter=document.getElementById('turn-filter');
  var info=document.getElementById('page-info');
  // a long run opens on the page of its first turn shown in full (the older ones are compact)
  var page=Math.floor(Number(document.getElementById('turns').getAttribute('data-first-detailed')||0)/PAGE);
  function visible(){
    var f=filter.value;
    return all.filter(function(d){return f==='all'||d.getAttribute('data-'+f)==='true';});
  }
  function show(){
    var v=visible();var pages=Math.max(1,Math.ceil(v.length/PAGE));
    if(page>=pages){page=pages-1;}if(page<0){page=0;}
    all.forEach(function(d){d.classList.add('hidden');});
    v.slice(page*PAGE,(page+1)*PAGE).forEach(function(d){d.classList.remove('hidden');});
    info.textContent='page '+(page+1)+' of '+pages+' ('+v.length+' turns)';
  }
  function go(turn){
    filter.value='all';var i=all.findIndex(function(d){return d.getAttribute('data-turn')===String(turn);});
    if(i<0){return;}page=Math.floor(i/PAGE);show();all[i].open=true;all[i].scrollIntoView();
  }
  document.getElementById('prev').addEventListener('click',function(){page--;show();});
  document.getElementById('next').addEventListener('click',function(){page++;show();});
  filter.addEventListener('change',function(){page=0;show();});
  document.getElementById('jump').addEventListener('change',function(e){go(e.target.value);});
  show();
  var m=/^#turn-(\\d+)$/.exec(location.hash);if(m){go(m[1]);}
})();
""".replace("@PAGE@", str(PAGE_SIZE))


_CSP = ("default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'; "
        f"script-src 'sha256-{base64.b64encode(hashlib.sha256(_JS.encode()).digest()).decode()}'")
"""The report runs its own pager script and nothing else: content is escaped, and should an
escape ever be missed, a script it smuggled in (inline, ``on*=`` handler, ``javascript:`` URL) or
a fetch it starts is refused by the browser."""


def _e(value: object) -> str:
    """Markup escaped, and control/format characters shown as escapes: a bidi override in a tool
    name or source would otherwise reorder the rest of its line on screen."""
    return escape(visible(value), quote=True)


def _capped(items: list[Any], cap: int) -> tuple[list[Any], int]:
    return items[:cap], max(0, len(items) - cap)


def _more(hidden: int, what: str) -> str:
    return f'<p class="more">… {hidden} more {what} (see <code>contextfold manifest --json</code>)</p>' \
        if hidden else ""


def _legend() -> str:
    items = [f'<span><i style="background:{c}"></i>{name}</span>' for name, c in LAYER_COLORS.items()]
    items += ['<span><i class="seg framing"></i>framing</span>',
              '<span><i class="seg free"></i>unused budget</span>',
              '<span><i class="seg calibration"></i>calibration margin</span>',
              '<span><i class="seg reserve"></i>reserve</span>']
    return f'<div class="legend">{"".join(items)}</div>'


def _layer_class(name: str) -> str:
    """The CSS class of a layer's segment: ``layer-<name>`` for a layer the builder has, and
    ``layer-other`` for any other name. A record's ``layer_tokens`` keys come from the log (an
    imported events file can hold any), and a class attribute takes a token, not text to escape."""
    return f"layer-{name}" if name in LAYER_COLORS else "layer-other"


def budget_bar(m: ContextManifest) -> str:
    """The window as a stacked bar: each layer, framing, unused budget, calibration margin, reserve.

    Every layer name is escaped: it is the key of a record's ``layer_tokens``, which an imported
    events file sets (a ``"><meta http-equiv="refresh" ...>`` key was written into the page)."""
    window = max(1, m.window_tokens)
    segs: list[tuple[str, str, int]] = [(_layer_class(k), k, v) for k, v in m.layer_tokens.items() if v > 0]
    framing = m.selected_tokens - sum(m.layer_tokens.values())
    base = m.calibration.base_budget if m.calibration else m.window_tokens - m.reserved_output_tokens
    segs += [("framing", "framing", framing), ("free", "free", max(0, m.budget_tokens - m.selected_tokens)),
             ("calibration", "calibration", max(0, base - m.budget_tokens)),
             ("reserve", "reserve", m.reserved_output_tokens)]
    spans = []
    for cls, name, tokens in segs:
        if tokens <= 0:
            continue
        color = f"background:{LAYER_COLORS[name]};" if name in LAYER_COLORS else ""
        spans.append(f'<span class="seg {cls}" data-layer="{_e(name)}" data-tokens="{tokens}" '
                     f'style="{color}width:{100 * tokens / window:.3f}%" '
                     f'title="{_e(name)}: {tokens} tokens"></span>')
    return f'<div class="bar" data-window="{m.window_tokens}">{"".join(spans)}</div>'


def _selected_table(m: ContextManifest) -> str:
    frags = list(m.fragments)
    keep = {f.id for f in sorted(frags, key=lambda f: (not f.required, -f.tokens, f.id))[:MAX_ROWS]}
    rows = [f for f in frags if f.id in keep]
    hidden = len(frags) - len(rows)
    body = "".join(
        f'<tr data-id="{_e(f.id)}"><td><code>{_e(f.id)}</code></td><td>{_e(f.layer)}</td>'
        f'<td>{_e(f.kind)}</td>'
        f'<td>{_e(f.trust)}</td><td><code>{_e(f.source_ref)}</code></td><td class="num">{f.tokens}</td>'
        f'<td>{"yes" if f.truncated else ""}</td><td>{_e(f.selection_reason)}</td></tr>' for f in rows)
    return (f'<h4>Selected ({len(m.fragments)} fragments, {m.selected_tokens} tokens)</h4>'
            '<table class="selected"><thead><tr><th>id</th><th>L</th><th>kind</th><th>trust</th>'
            '<th>source</th><th class="num">tokens</th><th>truncated</th><th>reason</th></tr></thead>'
            f'<tbody>{body}</tbody></table>'
            f'{_more(hidden, "smaller selected fragments (" + str(_small_tokens(frags, keep)) + " tokens)")}')


def _small_tokens(frags: list[Any], keep: set[str]) -> int:
    return sum(f.tokens for f in frags if f.id not in keep)


def _excluded(m: ContextManifest) -> str:
    groups: dict[str, list[Any]] = {}
    for e in m.excluded_items:
        groups.setdefault(e.reason, []).append(e)
    if not groups:
        return "<h4>Excluded: nothing</h4>"
    out = [f"<h4>Excluded ({len(m.excluded_items)})</h4>"]
    for reason in sorted(groups):
        items = sorted(groups[reason], key=lambda e: (-e.tokens, e.id))
        rows, hidden = _capped(items, MAX_EXCLUDED)
        body = "".join(
            f'<tr data-id="{_e(e.id)}"><td><code>{_e(e.id)}</code></td><td>{_e(e.kind)}</td>'
            f'<td><code>{_e(e.source_ref)}</code></td><td class="num">{e.tokens}</td>'
            f'<td>{_e(e.replaced_by or "")}</td><td>{_e(e.detail)}</td></tr>' for e in rows)
        out.append(f'<details class="excluded" data-reason="{_e(reason)}" data-count="{len(items)}">'
                   f'<summary>{_e(reason)}: {len(items)} ({sum(e.tokens for e in items)} tokens'
                   f'{", largest first" if len(items) > 1 else ""})</summary>'
                   '<table><thead><tr><th>id</th><th>kind</th><th>source</th><th class="num">tokens</th>'
                   f'<th>replaced by</th><th>detail</th></tr></thead><tbody>{body}</tbody></table>'
                   f'{_more(hidden, _e(reason))}</details>')
    return "".join(out)


def _diff(t: TurnAudit) -> str:
    d = t.diff
    if d is None:
        return "<h4>Changes: first audited turn</h4>"

    def lst(key: str, fmt: Any) -> str:
        items, hidden = _capped(list(d[key]), MAX_DIFF)
        if not items:
            return ""
        lis = "".join(f"<li>{fmt(x)}</li>" for x in items)
        return (f'<div class="change" data-change="{key}" data-count="{len(d[key])}"><b>{key}</b> '
                f'({len(d[key])})<ul>{lis}</ul>{_more(hidden, key)}</div>')

    def head(x: dict[str, Any]) -> str:
        return f"<code>{_e(x['id'])}</code> {_e(x['kind'])} {x['tokens']} — {_e(x['reason'])}"

    parts = [
        lst("entered", head),
        lst("left", lambda x: head(x)
            + (f" → <code>{_e(x['replaced_by'])}</code>" if x["replaced_by"] else "")
            + (f" ({_e(x['detail'])})" if x["detail"] else "")),
        lst("truncated", lambda x: f"<code>{_e(x['id'])}</code> {x['before']} → {x['after']} tokens"
            + (" (already truncated before)" if x["was_truncated"] else "")),
        lst("restored", lambda x: f"<code>{_e(x['id'])}</code> {x['before']} → {x['after']} tokens, "
            "whole again (truncated before)"),
        lst("replaced",
            lambda x: f"<code>{_e(x['id'])}</code> → <code>{_e(x['by'])}</code> ({_e(x['reason'])})"),
    ]
    tools = ""
    if d["tools_entered"] or d["tools_left"]:
        tools = (f"<p>tools exposed: +{_e(', '.join(d['tools_entered']) or '-')} "
                 f"−{_e(', '.join(d['tools_left']) or '-')}</p>")
    body = "".join(parts) + tools
    return f"<h4>Changes since turn {d['from_turn']}</h4>" + (body or "<p>no fragment changes</p>")


def _older(t: TurnAudit, run_id: str) -> str:
    """An older turn's body: its change counts and where its tables are."""
    d = t.diff
    counts = "" if d is None else ", ".join(
        f"{key} {len(d[key])}" for key in ("entered", "left", "truncated", "restored") if d[key])
    since = ("first audited turn" if d is None
             else f"since turn {d['from_turn']}: {counts or 'no fragment changes'}")
    return (f'<p class="older">changes {since}. Tables of the newest {DETAILED_TURNS} turns only: '
            f"<code>contextfold audit {_e(run_id)} --turn {t.turn}</code> shows this one in full.</p>")


def _turn(t: TurnAudit, run_id: str = "", detailed: bool = True) -> str:
    m = t.manifest
    tags = [f'<span class="tag">{_e(t.source)}</span>']
    if t.records > 1:  # built again (e.g. after a compaction): `diff/why --record` show the others
        tags.append(f'<span class="tag records" data-records="{t.records}">{t.records} records, '
                    "the first shown</span>")
    if t.prefix_changed:
        tags.append('<span class="tag warn">prefix changed</span>')
    if t.config_changed:
        tags.append('<span class="tag warn">config changed</span>')
    repairs = len(t.repairs) + len(t.build_notes)
    if repairs:
        tags.append(f'<span class="tag bad">{repairs} repairs</span>')
    if t.compactions:
        tags.append(f'<span class="tag">{len(t.compactions)} compaction</span>')
    changed = bool(t.diff and (t.diff["entered"] or t.diff["left"] or t.diff["truncated"]
                               or t.diff["restored"]))
    prefix = ("first turn" if t.prefix_changed is None else "CHANGED" if t.prefix_changed else "re-used")
    lines = [
        f"<p>{_e(m.provider)} · model {_e(m.model or 'none in the body')} · encoding {_e(m.encoding)} · "
        f"window {m.window_tokens} · "
        f"reserve {m.reserved_output_tokens} · budget {m.budget_tokens} · log position {m.log_version}</p>",
        f'<p>stable-prefix cache key <code class="cache-key">{_e(m.cache_key[:16])}</code> '
        f'(<span class="prefix-state">{prefix}</span>) · request <code>{_e(m.request_hash[:16])}</code> · '
        f"config <code>{_e(m.config_hash[:16])}</code></p>",
    ]
    if m.calibration is not None:
        c = m.calibration
        lines.append(f'<p class="calibration" data-correction="{c.correction}">calibration: estimate '
                     f"{m.selected_tokens} × correction {c.correction} (p{int(c.quantile * 100)} of "
                     f"{c.samples} observations; last: turn {c.last_turn} estimated {c.last_estimated}, "
                     f"observed {c.last_observed}) = {round(m.selected_tokens * c.correction)} "
                     f"≤ {c.base_budget}</p>")
    if t.usage is not None:
        u = t.usage
        lines.append(f'<p class="usage" data-observed="{u.input_tokens}">provider reported: input '
                     f"{u.input_tokens} (cached {u.cached_tokens}), output {u.output_tokens}; estimate was "
                     f"{u.estimated_tokens} (×{u.input_tokens / max(1, u.estimated_tokens):.3f})"
                     + ("" if u.record_position is None or u.estimated_tokens == m.selected_tokens else
                        f" for the request recorded at position {u.record_position}") + "</p>")
    repair_items = [f"<li>{_e(r.kind)} <code>{_e(r.call_id)}</code> at position {r.position}: "
                    f"{_e(r.reason)}</li>" for r in t.repairs]
    repair_items += [f"<li>build: <code>{_e(r)}</code></li>" for r in t.build_notes]
    if repair_items:
        lines.append(f'<h4>Protocol repairs</h4><ul class="repairs">{"".join(repair_items)}</ul>')
    if t.compactions:
        lines.append("<h4>Compactions</h4><ul>" + "".join(
            f"<li>position {c.position}: {_e(c.strategy)} by {_e(c.summarizer)} covers "
            f"{c.covers_from}–{c.covers_to}</li>" for c in t.compactions) + "</ul>")
    if m.tools:
        lines.append(f"<p>tools exposed ({len(m.tools)}, {m.tool_tokens} tokens): "
                     + ", ".join(f"<code>{_e(x.name)}</code>" for x in m.tools) + "</p>")
    return (
        f'<details class="turn" id="turn-{t.turn}" data-turn="{t.turn}" data-selected="{m.selected_tokens}" '
        f'data-budget="{m.budget_tokens}" data-window="{m.window_tokens}" '
        f'data-reserve="{m.reserved_output_tokens}" data-fragments="{len(m.fragments)}" '
        f'data-prefix-changed="{str(bool(t.prefix_changed)).lower()}" '
        f'data-changes="{str(changed).lower()}" data-repairs="{str(repairs > 0).lower()}">'
        f"<summary>Turn {t.turn} · {m.selected_tokens} / {m.budget_tokens} tokens · {len(m.fragments)} "
        f"fragments · {len(m.excluded_items)} excluded{''.join(tags)}</summary>"
        + (f"{budget_bar(m)}{''.join(lines)}{_diff(t)}{_selected_table(m)}{_excluded(m)}</details>"
           if detailed else f"{budget_bar(m)}{_older(t, run_id)}</details>"))


def _summary(a: RunAudit) -> str:
    s = a.summary
    rows = [
        ("turns", f"{s.turns} ({s.recorded_turns} recorded, {s.rebuilt_turns} rebuilt from the log)"),
        ("prefix stability", f'<span id="prefix-reused" data-reused="{s.prefix_reused}">{s.prefix_reused} of '
                             f"{s.prefix_compared} turns re-used the previous stable prefix</span> "
                             + _e(prefix_stability_text(s.prefix_pairs))
                             + (f"; changed at turns {_turn_list(s.prefix_changed_turns)}"
                                if s.prefix_changed_turns else "")),
        ("tool schemas", f'<span id="tool-answer">{_e(s.tool_schema_answer)}</span>'),
        ("retrieval vs history", f'<span id="retrieval-answer">{_e(s.retrieval_answer)}</span>'),
        *([("turns not rebuilt", f'<span id="unbuilt" data-count="{len(a.unbuilt)}">'
            f"{_e(unbuilt_answer(a.unbuilt))}</span>")] if a.unbuilt else []),
        ("protocol repairs", str(s.repairs)),
        ("compactions", str(s.compactions) + _effects(a)),
        ("builder config", "unchanged across turns" if not s.config_changed_turns else
         f"changed at turns {_turn_list(s.config_changed_turns)}"),
        ("usage calibration", "no provider usage observed" if not s.usage_turns else
         f"{s.usage_turns} turns with provider usage; latest correction "
         f"{s.latest_correction if s.latest_correction is not None else 'none yet'}"),
    ]
    return '<dl class="summary">' + "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in rows) + "</dl>"


def _effects(a: RunAudit) -> str:
    """Each compaction's turns before and after it (tokens, repeated calls, failed results)."""
    if not a.compaction_effects:
        return ""
    return (f'<ul id="compaction-effects" data-count="{len(a.compaction_effects)}">'
            + "".join(f"<li>{_e(describe(e))}</li>" for e in a.compaction_effects) + "</ul>")


PAIR_GROUPS_SHOWN = 10
"""Groups of compared turns the prefix line names before it counts the rest."""


def prefix_pairs_text(pairs: Sequence[tuple[int, int]], shown: int = PAIR_GROUPS_SHOWN) -> str:
    """Which turns the prefix check compared, in ranges: ``compared turns 2-6 with 1-5`` (each with
    the turn before), ``turns 3-6 with 1-4`` (a run built for two providers in turn: each with its
    provider's latest), ``5 with 3``. Why: "5 of 5 turns re-used the previous prefix" did not say
    previous to what, nor that a turn was compared with its provider's latest earlier turn, not
    the turn before. A group is later turns in a row, each the same distance after its earlier one;
    past ``shown`` groups the rest is counted (a long run built for alternating providers: one
    group; a few hundred provider switches: as many groups)."""
    if not pairs:
        return "no turn had an earlier turn built for its provider to compare with"
    groups: list[list[tuple[int, int]]] = []
    for earlier, later in pairs:
        last = groups[-1][-1] if groups else None
        if last is not None and later == last[1] + 1 and later - earlier == last[1] - last[0]:
            groups[-1].append((earlier, later))
        else:
            groups.append([(earlier, later)])

    def said(group: list[tuple[int, int]]) -> str:
        (a, b), (c, d) = group[0], group[-1]
        return f"{b} with {a}" if len(group) == 1 else f"{b}-{d} with {a}-{c}"

    text = ", ".join(said(g) for g in groups[:shown])
    rest = sum(len(g) for g in groups[shown:])
    single = len(groups) == 1 and len(groups[0]) == 1
    more = f" and {rest} more pair{'s' if rest != 1 else ''} (audit --json lists every one)" if rest else ""
    return f"compared turn{'' if single else 's'} {text}{more}"


def prefix_stability_text(pairs: Sequence[tuple[int, int]]) -> str:
    """The parenthesis after "N of M turns re-used the previous prefix": the pairs compared, and
    what was compared (the stable-prefix cache keys)."""
    if not pairs:
        return f"({prefix_pairs_text(pairs)})"
    return f"({prefix_pairs_text(pairs)}: each turn's cache key with its provider's latest earlier turn's)"


def _turn_list(turns: Iterable[int], cap: int = 20) -> str:
    items = list(turns)
    text = ", ".join(str(t) for t in items[:cap])
    return text + (f" … (+{len(items) - cap})" if len(items) > cap else "")


def _largest(a: RunAudit) -> str:
    rows = "".join(
        f'<tr><td><code>{_e(f["id"])}</code></td><td>{_e(f["kind"])}</td><td><code>{_e(f["source_ref"])}</code>'
        f'</td><td class="num">{f["tokens"]}</td><td class="num">{f["turn"]}</td>'
        f'<td>{"yes" if f["truncated"] else ""}</td></tr>' for f in a.summary.largest_fragments)
    return ('<table id="largest"><thead><tr><th>id</th><th>kind</th><th>source</th><th class="num">tokens'
            f'</th><th class="num">turn</th><th>truncated</th></tr></thead><tbody>{rows}</tbody></table>')


def _older_note(audit: RunAudit, older: int) -> str:
    if older == 0:
        return ""
    return (f'<p class="more" id="older-note">The newest {DETAILED_TURNS} of {len(audit.turns)} turns show '
            f"their tables; the {older} older ones show their change counts (the charts above cover "
            "every turn).</p>")


def render_report(audit: RunAudit) -> str:
    """The whole report as one HTML document."""
    i = audit.integrity
    integrity = (f"log integrity: ok — {i.events} events, blake3 hash chain intact"
                 + (f", head {i.head}" if i.head else "") if i.ok else
                 f"log integrity: BROKEN at position {i.first_bad_position}: {i.reason}")
    older = max(0, len(audit.turns) - DETAILED_TURNS)  # the turns before the first shown in full
    usage = usage_chart(audit.turns)
    usage_block = ("<h2>Estimated vs observed input tokens</h2>"
                   '<div class="legend"><span><i style="background:#4e79a7"></i>estimated (tiktoken)</span>'
                   f'<span><i style="background:#e15759"></i>observed (provider)</span></div>{usage}'
                   if usage else "")
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{_e(_CSP)}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>contextfold audit · {_e(audit.run_id)}</title><style>{_CSS}</style></head><body>"
        f"<header><h1>What the model saw: run <code>{_e(audit.run_id)}</code></h1>"
        f'<p id="integrity" class="banner {"ok" if i.ok else "bad"}" data-ok="{str(i.ok).lower()}" '
        f'data-events="{i.events}">{_e(integrity)}</p></header>'
        f'<section id="summary"><h2>Summary</h2>{_summary(audit)}</section>'
        f'<section id="run-view"><h2>Tokens per layer across turns</h2>{_legend()}{layers_chart(audit.turns)}'
        f"<h2>Prefix stability</h2>{prefix_chart(audit.turns)}{usage_block}"
        f"<h2>Largest fragments</h2>{_largest(audit)}</section>"
        f'<section id="turns" data-first-detailed="{older}">'
        f"<h2>Turns</h2>{_legend()}"
        '<nav id="pager" class="hidden"><button id="prev" type="button">◀ previous</button>'
        '<span id="page-info"></span><button id="next" type="button">next ▶</button>'
        '<label>show <select id="turn-filter"><option value="all">all turns</option>'
        '<option value="changes">turns with changes</option><option value="repairs">turns with repairs'
        '</option><option value="prefix-changed">prefix changed</option></select></label>'
        '<label>jump to turn <input id="jump" type="number" min="1"></label></nav>'
        + _older_note(audit, older)
        + "".join(_turn(t, audit.run_id, i >= older) for i, t in enumerate(audit.turns))
        + f"</section><script>{_JS}</script></body></html>\n")
