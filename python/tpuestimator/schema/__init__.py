"""The config schema (`config.schema.json`): every field, its type, description and default,
read by `tpuestimator.config` in Python and by the R package. Data only: imports nothing.
"""
