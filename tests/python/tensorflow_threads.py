"""TensorFlow's thread pools in the test processes: idle threads sleep instead of spinning.

An idle thread of TensorFlow's pools (the CPU device's intra-op pool, the inter-op pool) spins
a while for the next op before it sleeps. On a dedicated machine that saves a wake-up; with
more busy processes than cores (pytest's workers, the CLI runs forked for them) the spins take
the cores the other processes were waiting for. Whole runs of the suite on 2 cores, 2026-12-05
(scripts/test.sh): 3 workers with spinning took 460 s and 875 CPU s, beside a run of 2 workers
in 376 s and 639 CPU s; without it, 3 workers took 312-393 s and 595-751 CPU s, alternating
with 2 workers (spinning) in 333-424 s and 568-726 CPU s: 3 workers were faster in each of 4
pairs, by 0.5-9%. With 2 workers the setting made no consistent difference (11 in-process
files, 4 runs each way, alternating).

The setting is ConfigProto's `experimental.disable_thread_spinning`. TensorFlow 2 has no public
call for it once eager execution is on (`tf.config.threading` sets the pools' sizes only), so
`stop_thread_spinning` puts it into the eager context's config before the runtime starts; a
fork of a process that did so (fork_python.py's runs) starts its runtime with it too. It changes
when threads sleep, never what an op computes. Tests of the product's own runtime set-up run in
fresh processes (`sys.executable`), which keep TensorFlow's default.
"""
from __future__ import annotations

import logging

log = logging.getLogger(__name__)


def stop_thread_spinning() -> bool:
    """Sets `disable_thread_spinning` in this process's eager context, before its runtime starts.
    False (and a warning) where this TensorFlow keeps the context's config elsewhere:
    test_fork_python.py's test of the setting then fails, the rest of the suite runs as before."""
    from tensorflow.core.protobuf import config_pb2
    from tensorflow.python.eager import context

    ctx = context.context()
    if not hasattr(ctx, "_config") or getattr(ctx, "_context_handle", None) is not None:
        log.warning("TensorFlow's thread pools keep spinning: this TensorFlow's eager context has no "
                    "_config to set, or its runtime has started already")
        return False
    config = config_pb2.ConfigProto()
    if ctx._config is not None:
        config.CopyFrom(ctx._config)
    config.experimental.disable_thread_spinning = True
    ctx._config = config
    return True
