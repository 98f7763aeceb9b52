"""The jinja2 template of the HTML report (rendered with autoescape on, see html.py).

Kept in a Python module so that it ships inside every build of the package. STYLE, TABLES (jinja2 macros,
loaded as "tables.html") and DRAW_PLOTS are shared with `rtscope serve`'s pages, which show the same tables and
plots.
"""

STYLE = r'''  body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0 auto; max-width: 1200px;
         padding: 0 1.5rem 3rem; color: #1a1a1a; line-height: 1.45; }
  h1 { margin-top: 1.5rem; } h2 { border-bottom: 1px solid #ddd; padding-bottom: .2rem; margin-top: 2.5rem; }
  table { border-collapse: collapse; margin: .8rem 0 1.2rem; font-size: .9rem; }
  th, td { padding: .25rem .6rem; border-bottom: 1px solid #e4e4e4; text-align: right; vertical-align: top; }
  th { background: #f6f6f6; } td.l, th.l { text-align: left; }
  .better { color: #11772d; font-weight: 600; } .worse { color: #b3161b; font-weight: 600; }
  .no-significant-difference { color: #666; } .not-tested { color: #8a6d00; }
  .plot { width: 100%; min-height: 360px; } figure { margin: 1rem 0 2rem; }
  figcaption, .note { color: #555; font-size: .85rem; } .warn { color: #8a6d00; }
  figcaption { white-space: pre-line; }
  #rts-errors { display: none; background: #fde8e8; border: 1px solid #b3161b; padding: .6rem 1rem; }
  code { background: #f3f3f3; padding: 0 .2rem; }
  tr.differs td { background: #fff6dc; }
  .pub { color: #777; } table caption { text-align: left; font-weight: 600; padding: .2rem 0; }
'''

TABLES = r'''{% macro machines_table(machines) %}
{# one column per machine (a fleet's boards side by side), the rows where they differ marked #}
<table class="machines">
  <tr><th class="l">{% if machines|length > 1 %}<span class="note">≠: differs</span>{% endif %}</th>
  {% for e in machines %}<th class="l">machine{% if machines|length > 1 %} {{ loop.index }}{% endif %}: runs {{ e.runs_text }}</th>{% endfor %}</tr>
  {% for row in machine_rows(machines) %}
  <tr{% if row.differs %} class="differs"{% endif %}><td class="l">{{ row.field }}{% if row.differs %} ≠{% endif %}</td>{% for v in row.values %}<td class="l">{{ v }}</td>{% endfor %}</tr>
  {% endfor %}
</table>
{% for e in machines %}{% set i = loop.index %}{% for w in e.warnings %}
<p class="note warn">warning{% if machines|length > 1 %} (machine {{ i }}){% endif %}: {{ w }}</p>
{% endfor %}{% endfor %}
{% endmacro %}

{% macro stats_tables(stats_tables) %}
{% for tb in stats_tables %}
<table>
  <tr><th class="l">configuration</th><th class="l">runs</th>{% for h in tb.heads %}<th>{{ h }}</th>{% endfor %}</tr>
  {% for row in tb.rows %}
  <tr><td class="l" title="{{ row.full }}">{{ row.label }}</td><td class="l">{{ row.runs }}</td>{% for c in row.cells %}<td>{{ c }}</td>{% endfor %}</tr>
  {% endfor %}
</table>
{% endfor %}
{% endmacro %}

{% macro why_table(why_table) %}
{% if why_table %}
<table>
  <caption>Share of the excess above the {{ why_table.reference }} of the explained samples per cause kind
  (µs per sample in parentheses); what no cause covers is unexplained.</caption>
  <tr><th class="l">configuration</th><th>{{ why_table.reference }} (µs)</th><th>samples</th>{% for k in why_table.kinds %}<th>{{ k }}</th>{% endfor %}</tr>
  {% for row in why_table.rows %}
  <tr><td class="l">{{ row.label }}</td><td>{{ row.reference }}</td><td>{{ row.samples }}</td>{% for c in row.cells %}<td>{{ c }}</td>{% endfor %}</tr>
  {% endfor %}
</table>
{% endif %}
{% endmacro %}

{% macro comparison_table(comparisons) %}
<table>
  <tr><th class="l">configuration</th><th class="l">metric</th><th>baseline</th><th>value</th><th>change</th>
      <th>95% CI of difference</th><th>p</th><th>p (Holm)</th><th class="l">verdict</th></tr>
  {% for k in comparisons %}
  {% for row in k.rows %}
  <tr>
    {% if loop.first %}
    <td class="l" rowspan="{{ k.rows|length }}"><strong>{{ k.label }}</strong><br>vs {{ k.baseline }}<br>
      <span class="note">{{ k.runs }} runs; values in {{ k.unit }}<br>Cliff's δ {{ k.delta }}</span></td>
    {% endif %}
    <td class="l">{{ row.metric }}</td><td>{{ row.baseline }}</td><td>{{ row.value }}</td><td>{{ row.change }}</td>
    <td>{{ row.ci }}</td><td>{{ row.p }}</td><td>{{ row.p_holm }}</td>
    <td class="l {{ row.css }}"{% if row.why %} title="{{ row.why }}"{% endif %}>{{ row.verdict }}{% if row.why %}<br><span class="note">{{ row.why }}</span>{% endif %}</td>
  </tr>
  {% endfor %}
  {% endfor %}
</table>
{% for k in comparisons %}{% for n in k.notes %}<p class="note">{{ k.label }}: {{ n }}</p>{% endfor %}{% endfor %}
{% endmacro %}
'''

DRAW_PLOTS = r'''/* Draw each plot div from its JSON block (id + "-spec"); count them in body[data-plots-drawn]. */
function rtsDrawPlots(divs) {
  var drawn = 0;
  document.body.setAttribute("data-plots-drawn", "0");
  document.body.setAttribute("data-js-errors", String(window.rtsErrors.length));
  if (!divs.length) { return; }
  if (typeof Plotly === "undefined") { window.rtsReportError("plotly.js did not load"); return; }
  divs.forEach(function (div) {
    try {
      var spec = JSON.parse(document.getElementById(div.id + "-spec").textContent);
      Plotly.newPlot(div, spec.data, spec.layout, {responsive: true, displaylogo: false, typesetMath: false}).then(function () {
        drawn += 1;
        document.body.setAttribute("data-plots-drawn", String(drawn));
      }, function (err) { window.rtsReportError(div.id + ": " + err); });
    } catch (err) {
      div.textContent = "This plot could not be drawn: " + err;
      window.rtsReportError(div.id + ": " + err);
    }
  });
}
'''

TEMPLATE = r'''{% import "tables.html" as m %}<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="rtscope {{ version }}">
<title>{{ r.title }}</title>
<style>
{{ style|safe }}
</style>
<script>
  /* Any script error or failed plot is shown on the page and kept in body[data-js-errors]. */
  window.rtsErrors = [];
  window.rtsReportError = function (msg) {
    window.rtsErrors.push(String(msg));
    var box = document.getElementById("rts-errors");
    if (box) { box.style.display = "block"; box.textContent = "Report error: " + window.rtsErrors.join("; "); }
    if (document.body) { document.body.setAttribute("data-js-errors", String(window.rtsErrors.length)); }
  };
  window.addEventListener("error", function (e) { window.rtsReportError(e.message || "script error"); });
</script>
<script type="application/octet-stream" id="rts-plotly-gz">{{ plotly_gz }}</script>
</head>
<body data-plots="{{ plots|length }}" data-plots-drawn="0" data-js-errors="0">
<div id="rts-errors" role="alert"></div>
<h1>{{ r.title }}</h1>
<p>rtscope {{ version }} report, generated {{ r.generated_at }}: {{ r.runs|length }} runs in
{{ configurations }} configuration{{ "" if configurations == 1 else "s" }} ({{ r.selection }}).
Times are shown in µs; percentiles use {{ percentile_definition }}; variance uses n−1.</p>
{% for x in r.experiments %}
<p class="experiment"><b>experiment {{ x.id }}: {{ x.name }}</b>{% if x.description %}: {{ x.description }}{% endif %}
{% if x.tags %}<br>tags: {% for t in x.tags %}<span class="tag">{{ t }}</span>{{ ", " if not loop.last }}{% endfor %}{% endif %}
<br><span class="note">started {{ x.created_at }}, {{ x.status }}</span></p>
{% endfor %}

{% if paper %}{% set v = paper.view %}
<h2 id="paper">The study's view: {{ v.spec }}</h2>
<p>Published figures (<span class="pub">grey, in brackets</span>) beside the measured ones{% if v.source %}, from
{{ v.source }}{% endif %}. Published on: {{ v.hardware }}; measured on: {{ v.machine }}. Published absolute
figures come from other hardware: they are shown, never tested; the claims below test what can be.
Measured figures pool the runs of a configuration, as the study's tables did.</p>
{% for tb in v.tables %}
<table class="paper">
  <caption>{{ tb.title }}</caption>
  <tr><th class="l">{{ tb.row_head }}</th><th class="l">runs</th>{% for h in tb.heads %}<th>{{ h }}</th>{% endfor %}</tr>
  {% for row in tb.rows %}
  <tr><td class="l">{{ row.label }}</td><td class="l">{{ row.runs }}</td>{% for m, p in row.cells %}<td>{{ m }}{% if p %} <span class="pub">({{ p }})</span>{% endif %}</td>{% endfor %}</tr>
  {% endfor %}
</table>
{% endfor %}
{% for p in paper.histograms %}
<figure><div class="plot" id="{{ p.id }}"></div><figcaption>{{ p.caption }}</figcaption></figure>
{% endfor %}
{% if paper.claims %}
<h3 id="claims">Claims</h3>
<table class="claims">
  <tr><th class="l">claim</th><th class="l">metric</th><th class="l">expect</th><th>published</th>
  <th>measured (baseline → cell)</th><th>runs</th><th>95% interval</th><th class="l">verdict</th></tr>
  {% for c in paper.claims %}
  <tr><td class="l"><b>{{ c.id }}</b>: {{ c.text }}{% if c.source %} <span class="note">({{ c.source }})</span>{% endif %}</td>
  <td class="l">{{ c.metric }}</td><td class="l">{{ c.expect }}</td><td>{{ c.published }}</td><td>{{ c.measured }}</td>
  <td>{{ c.runs }}</td><td>{{ c.interval }}</td>
  <td class="l {{ c.css }}">{{ c.verdict }}{% if c.why %}<br><span class="note">{{ c.why }}</span>{% endif %}</td></tr>
  {% endfor %}
</table>
<p class="note">Judged as <code>rtscope reproduce</code> judges stored runs (docs/reproduction.md): lower/higher by
{{ paper.evidence }}; same by two one-sided tests within the margin; Holm over {{ paper.tested }}
such claims, α = {{ v.alpha }}; ratio and below from the 95% interval.</p>
{% endif %}
{% endif %}

<h2 id="machines">Machines</h2>
{{ m.machines_table(machines) }}

{% if fleet %}
<h2 id="fleet">Fleet: the worst case per target</h2>
<table>
  <tr><th class="l">target</th><th class="l">kernel</th><th class="l">preemption</th><th class="l">board / CPU</th>
  <th class="l">accelerator</th><th>runs</th><th>latency samples</th><th>worst MAX (µs)</th><th>worst p99.99 (µs)</th></tr>
  {% for f in fleet %}
  <tr><td class="l">{{ f.target }}</td><td class="l">{{ f.kernel }}</td><td class="l">{{ f.preemption }}</td>
  <td class="l">{{ f.machine }}</td><td class="l">{{ f.accelerator }}</td><td>{{ f.runs }}</td><td>{{ f.n }}</td>
  <td>{{ f.max }}</td><td>{{ f.p9999 }}</td></tr>
  {% endfor %}
</table>
<p class="note">Worst case over each target's timer runs. A VM under TCG (accelerator tcg) measures QEMU's
emulator, not its kernel.</p>
{% endif %}

{% if tunes %}
<h2 id="tune">Tune: the search and its proof</h2>
{% for tu in tunes %}
<h3>{{ tu.title }}</h3>
<p>Best configuration proven: <b>{{ tu.best }}</b>; baseline: {{ tu.baseline }}. The race ended because
{{ tu.race_ended }}.{% if tu.importance %} Knobs that mattered (Optuna's importance): {{ tu.importance }}.{% endif %}</p>
{% for why in tu.dropped_from_space %}<p class="note warn">left out of the search: {{ why }}</p>{% endfor %}
<figure><div class="plot" id="{{ tu.plot.id }}"></div><figcaption>{{ tu.plot.caption }}</figcaption></figure>
<table>
  <tr><th class="l">metric</th><th>baseline ({{ tu.unit }})</th><th>{{ tu.compared }} ({{ tu.unit }})</th><th>change</th>
  <th>95% CI of the difference</th><th>p (Holm)</th><th class="l">verdict</th></tr>
  {% for r in tu.rows %}
  <tr><td class="l">{{ r.metric }}</td><td>{{ r.baseline }}</td><td>{{ r.value }}</td><td>{{ r.change }}</td>
  <td>{{ r.ci }}</td><td>{{ r.p }}</td><td class="l">{{ r.verdict }}</td></tr>
  {% endfor %}
</table>
<p class="note">The confirmation: fresh interleaved runs of the race's winner, its runner-up and the baseline;
only these runs decide the verdict.</p>
<table>
  <tr><th>candidate</th><th class="l">origin</th><th class="l">settings</th><th>race runs</th><th>goal ({{ tu.unit }})</th>
  <th class="l">fate</th></tr>
  {% for c in tu.candidates %}
  <tr><td>{{ c.number }}</td><td class="l">{{ c.origin }}</td><td class="l">{{ c.settings }}</td><td>{{ c.runs }}</td>
  <td>{{ c.value }}</td><td class="l">{{ c.fate }}</td></tr>
  {% endfor %}
</table>
{% endfor %}
{% endif %}

{% if monitoring %}
<h2 id="monitoring">Long-term monitoring</h2>
{% for m in monitoring %}
<h3>{{ m.title }}</h3>
{% for p in m.plots %}
<figure><div class="plot" id="{{ p.id }}"></div>{% if p.caption %}<figcaption>{{ p.caption }}</figcaption>{% endif %}</figure>
{% endfor %}
{% endfor %}
{% endif %}

{% if stats_tables %}
<h2 id="statistics">Statistics per configuration</h2>
<p class="note">Repetitions (runs of one configuration) are pooled; AVG = mean, MAX = maximum, VAR = variance,
STDEV = standard deviation.</p>
{{ m.stats_tables(stats_tables) }}
{% endif %}

{% if comparisons %}
<h2 id="comparisons">Comparisons against {{ baseline }}</h2>
<p class="note">Lower is better. The run is the unit: each value is the mean of the per-run values of that
metric, and every metric is tested with a {{ run_test }}; p-values are Holm-corrected over every test in this
section (α = {{ alpha }}); the interval is the 95% interval of the difference (value − baseline).
Cliff's δ of the whole distribution (descriptive) (negligible &lt; 0.147 &lt; small &lt; 0.33 &lt; medium &lt; 0.474 &lt; large).</p>
{{ m.comparison_table(comparisons) }}
{% for label, why in unmatched %}<p class="note warn">not compared: {{ label }}: {{ why }}</p>{% endfor %}
{% for w in warnings %}<p class="note warn">warning: {{ w }}</p>{% endfor %}
{% endif %}

{% if why %}
<h2 id="why">Why: the causes of the worst samples</h2>
<p class="note">Runs measured with setting <code>explain</code> (docs/explain.md): what the sample's CPU did
instead (interrupts, softirqs, other threads) or, on the BEAM, the measuring process's garbage collections and
times scheduled out.</p>
{{ m.why_table(why_table) }}
{% for p in why %}
<figure><div class="plot" id="{{ p.id }}"></div>{% if p.caption %}<figcaption>{{ p.caption }}</figcaption>{% endif %}</figure>
{% endfor %}
{% endif %}

{% if groups %}
<h2 id="distributions">Distributions</h2>
{% for g in groups %}
<h3>{{ g.title }}</h3>
{% for p in g.plots %}
<figure><div class="plot" id="{{ p.id }}"></div>{% if p.caption %}<figcaption>{{ p.caption }}</figcaption>{% endif %}</figure>
{% endfor %}
{% for n in g.notes %}<p class="note">{{ n }}</p>{% endfor %}
{% endfor %}
{% endif %}

{% if series %}
<h2 id="time-series">Samples in measurement order</h2>
<p class="note">The first run of each configuration{% if any_gc %}; GC events (a minor GC count that increments,
or else a heap size that drops) are marked{% endif %}.</p>
{% for p in series %}
<figure><div class="plot" id="{{ p.id }}"></div><figcaption>{{ p.caption }}</figcaption></figure>
{% endfor %}
{% if series_omitted %}<p class="note">{{ series_omitted }} more configurations not drawn.</p>{% endif %}
{% endif %}

{% if task %}
<h2 id="task-memory">Memory per task</h2>
<figure><div class="plot" id="{{ task.plot.id }}"></div><figcaption>{{ task.plot.caption }}</figcaption></figure>
<table>
  <tr><th class="l">task model</th><th class="l">runs</th><th>points</th><th>slope ({{ task.unit }}/task)</th>
      <th>intercept ({{ task.unit }})</th><th>r</th><th>r²</th></tr>
  {% for row in task.rows %}
  <tr><td class="l">{{ row.label }}</td><td class="l">{{ row.runs }}</td><td>{{ row.n }}</td><td>{{ row.slope }}</td>
      <td>{{ row.intercept }}</td><td>{{ row.r }}</td><td>{{ row.r2 }}</td></tr>
  {% endfor %}
</table>
{% for row in task.rows %}{% if row.problem %}<p class="note warn">{{ row.label }}: {{ row.problem }}</p>{% endif %}{% endfor %}
{% endif %}

{% if r.notes %}
<h2 id="notes">Notes</h2>
<ul>{% for n in r.notes %}<li class="note">{{ n }}</li>{% endfor %}</ul>
{% endif %}

{% for p in plots %}
<script type="application/json" id="{{ p.id }}-spec">{{ p.json|safe }}</script>
{% endfor %}
<script>
(function () {
  function drawAll() { rtsDrawPlots(document.querySelectorAll("div.plot")); }
  {{ draw_plots|safe }}
  /* plotly.js travels gzip-compressed (a fifth of its size): unpack it, run it, then draw. */
  var packed = document.getElementById("rts-plotly-gz");
  if (typeof DecompressionStream === "undefined") {
    window.rtsReportError("this browser cannot unpack the embedded plotly.js (it needs DecompressionStream: " +
                          "Chrome or Edge 80, Firefox 113, Safari 16.4 or newer); the tables are complete");
    return;
  }
  var text = atob(packed.textContent.trim()), bytes = new Uint8Array(text.length);
  for (var i = 0; i < text.length; i++) { bytes[i] = text.charCodeAt(i); }
  new Response(new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"))).text().then(function (code) {
    var script = document.createElement("script");
    script.textContent = code;
    document.head.appendChild(script);
    drawAll();
  }, function (err) { window.rtsReportError("plotly.js could not be unpacked: " + err); });
})();
</script>
</body>
</html>
'''
