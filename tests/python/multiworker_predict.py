"""One worker of a 2-worker MultiWorkerMirroredStrategy cluster (test_multiworker_predict.py):
TF_CONFIG from the environment; trains 6 steps in step with the other worker, then predicts 101
examples (not a multiple of the global batch: the last one is padded). Prints one line
`RESULT {json}`: the class ids and probabilities `Estimator.predict` yielded here."""
import json
import sys

from helpers import array_input_fn, make_data
from tpuestimator.core.estimator import Estimator, RunConfig

model_dir = sys.argv[1]
x, y = make_data(101)
config = RunConfig(model_dir=model_dir, strategy="multi_worker", train_batch_size=16, eval_batch_size=16,
                   predict_batch_size=16, iterations_per_loop=3, save_checkpoints_steps=6, seed=3)
est = Estimator("linear", config, {"num_classes": 3, "learning_rate": 0.05})
est.train(array_input_fn(x, y), max_steps=6)
rows = list(est.predict(array_input_fn(x, y)))
print("RESULT " + json.dumps({"class_id": [int(r["class_id"]) for r in rows],
                              "probabilities": [[float(p) for p in r["probabilities"]] for r in rows],
                              "replicas": est.num_replicas}), flush=True)
