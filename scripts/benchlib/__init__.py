"""scripts/bench's code, by concern (the entry point and its usage stay in scripts/bench).

common     errors, log, the timed runner, the API client, mount namespaces, /proc, stats
peers      the roots of hutch, bubblewrap, crun/runc (OCI) and podman
hotpath    run, create, exec, rm, CLI start, the API round trip, wake
image      --image rows, pulls, an image's disk
snapshots  --snapshots rows (snapshot, create from it, fork)
executor   --executor's POST /run
workspace  --changes and the workspace files rows
streams    --streams and the memory of idle sandboxes
density    --density
ports      --ports
bindings   --bindings
egress     --egress-log
baseline   --baseline A/B
report     the table, the density table, the raw JSON
main       argument parsing and the order of the groups
"""
