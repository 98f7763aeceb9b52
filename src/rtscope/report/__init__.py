"""Reports of stored runs: one self-contained HTML file, static figures, and tables.

    model.build(store, runs, ...)   what the report shows, computed once
    html.write(report, path)        the offline HTML page (plotly embedded; template.py holds its template)
    figures.write(report, dir)      PNG + SVG figures (matplotlib)
    tables.write(report, dir)       Markdown, LaTeX and CSV tables
    lab                             the monitoring views and the fleet's worst-case table
    paper_view                      a study experiment's own table (published beside measured) and its claims
    junit.write(set, gate, path)    `compare --junit` (and `reproduce --junit`: write_claims): JUnit XML, atomic

It may import the figures, the experiment layer (an experiment's record), the analysis, the store and the leaf
modules; only the user interfaces import it.
"""
