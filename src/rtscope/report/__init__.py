"""Reports of stored runs: one self-contained HTML file, static figures, and tables.

    model.build(store, runs, ...)   what the report shows, computed once
    html.write(report, path)        the offline HTML page (plotly embedded; template.py holds its template)
    figures.write(report, dir)      PNG + SVG figures (matplotlib)
    tables.write(report, dir)       Markdown, LaTeX and CSV tables
    lab                             the monitoring views and the fleet's worst-case table
    junit.write(set, gate, path)    `compare --junit`: JUnit XML of a gated comparison, written atomically

It may import the figures, the experiment layer (an experiment's record), the analysis, the store and the leaf
modules; only the user interfaces import it.
"""
