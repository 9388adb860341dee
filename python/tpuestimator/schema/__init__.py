"""The schemas both languages read, as data files (this package imports nothing):
`config.schema.json` (every config field, its type, description and default; read by
`tpuestimator.config` and by the R package) and `run_columns.json` (the columns of a runs
listing and their types; read by `tpuestimator.runs.columns` only: R's `tpu_ls_runs()` gets the
typed columns through the bridge, `tpuestimator.runs.frames`).
"""
