"""`tpuestimator train ARGS` whose chief holds its write of the model dir's config.yaml open
until worker 1 has begun its job (test_cluster_multiworker.py).

The chief writes config.yaml atomically (`tpuestimator.system.io`: a hidden temp file renamed over
it). Here the rename waits until worker 1's job has opened its output.log (in its scratch
run record) and a little longer: worker 1 then runs its start-of-job steps while the chief's
temp file exists, as it may on a loaded machine. A worker that removed "leftovers" in the
shared model dir deleted the chief's temp file and the chief died renaming it."""
import glob
import os
import sys
import tempfile
import time

from tpuestimator.cli import main
from tpuestimator.core.cluster_task import task_role

WAIT_S = 180        # worker 1 never started its job: give up holding (the test then fails elsewhere)
AFTER_START_S = 3   # worker 1's steps between opening output.log and training (no TensorFlow call)

rename = os.replace


def held_rename(src, dst, *args, **kwargs):
    if os.path.basename(str(dst)) == "config.yaml" and task_role().is_chief:
        started = os.path.join(tempfile.gettempdir(), "tpuestimator-*-worker1-job", "runs", "*", "output.log")
        deadline = time.monotonic() + WAIT_S
        while not glob.glob(started) and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(AFTER_START_S)
    return rename(src, dst, *args, **kwargs)


os.replace = held_rename
sys.exit(main(sys.argv[1:]))
