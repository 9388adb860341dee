"""The core: the Estimator (the TPUEstimator-shaped facade), its outer training loop
(`controller`), replica steps (`steps`), device loops (`loops`), `TrainingState`,
checkpoints, eval padding (`batching`), strategies (`devices`, `cluster_task`: this
process's TF_CONFIG role), the hook protocol (`hooks`), early stopping (`stopping`),
`train_and_evaluate` (`training`), the SavedModel's signatures (`signatures`), exact resume
of the input (`input_position`), what an input function declares (`input_fn.InputFn`) and
TensorFlow work-arounds.

Layer 1: may import `errors`, `config`, `spec`, `models` and `system`; never data, runs,
hooks, debug, serving, jobs, cluster or commands (tests/python/test_architecture.py).
"""
