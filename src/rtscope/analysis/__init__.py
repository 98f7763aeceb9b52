"""Analysis: what the numbers of a stored run are, computed in one place.

`threads` splits a multi-thread latency run into its threads (and CPUs) and
merges their histograms by one rule, so that every command and the report
show the same figures for the same run.
"""
