"""Jobs: what a command does from a config to its results.

`job` (train: config -> Estimator + hooks -> train_and_evaluate -> exports -> run record),
`model_dir_jobs` (evaluate or export a trained model dir), `export_jobs` (offline evaluation
and batch prediction from an export), `tune` (a grid of trainings), `from_config` (config ->
Estimator and input functions), `preflight` (what a job checks before it writes anything),
`check` (TPU readiness), and what a job holds or undoes around its run: the model-dir rule
(`modeldir`), its lock (`model_dir_lock`), signal handling (`interrupts`), a killed run's
temporaries (`leftovers`), the run's log (`logcapture`).

Layer 7: may import every layer below (contracts, core, data, runs, hooks, debug, serving);
never cluster or commands.
"""
