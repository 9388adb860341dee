"""What the operating system gives every layer: atomic files (`io`), a full disk recognised in
its three forms (`diskspace`), whether a process still runs (`processes`), the crash tests'
fault points (`faults`), the project's graph code kept from AutoGraph (`graph_code.as_written`)
and a quiet TensorFlow import with the CLI's logging (`console`).

Layer 0 (with `errors`, `config`, `schema`, `spec` and `models`): imports nothing of
tpuestimator but `errors`, and no TensorFlow at import time.
"""
