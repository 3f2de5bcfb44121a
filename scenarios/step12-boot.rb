# puma-plus config for scenarios/step12-2core.yaml under pp-bench (PUMA_PLUS_CONFIG=this file):
# a worker takes 1 s in on_worker_boot, as a Rails worker reconnecting its database and caches
# would, so a fork costs the dead time the scenario's `machine.boot` models. A standby worker
# pays it before it parks; an activation does not.
on_worker_boot { sleep 1 }
