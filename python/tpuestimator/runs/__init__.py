"""Run records in tfruns's format (docs/RUN_FORMAT.md).

Writing: `RunRecorder` (one run folder per training). Reading: `ls_runs`, `latest_run`,
`run_info`, `resolve_run`, `clean_runs`. Checking: `check_run_dir`. Reports:
`write_run_report`, `write_compare_report`. Nothing here imports TensorFlow.

Layer 3: may import the contracts, `core` (the hook protocol) and `data`; never hooks,
debug, serving, jobs, cluster or commands.
"""
from tpuestimator.runs.clean import clean_runs
from tpuestimator.runs.naming import create_run_dir, format_run_name, is_run_dir, list_run_dirs
from tpuestimator.runs.query import latest_run, ls_runs
from tpuestimator.runs.reading import RunNotFoundError, resolve_run, run_info
from tpuestimator.runs.record import RunRecorder
from tpuestimator.runs.report import write_compare_report, write_run_report
from tpuestimator.runs.validate import check_run_dir, check_runs_dir
from tpuestimator.runs.values import flatten_flags

__all__ = [
    "RunNotFoundError",
    "RunRecorder",
    "check_run_dir",
    "check_runs_dir",
    "clean_runs",
    "create_run_dir",
    "flatten_flags",
    "format_run_name",
    "is_run_dir",
    "latest_run",
    "list_run_dirs",
    "ls_runs",
    "resolve_run",
    "run_info",
    "write_compare_report",
    "write_run_report",
]
