"""Clusters on existing engines: a local TF_CONFIG cluster of `tpuestimator train` processes
(`local_cluster`), Kubernetes manifests (`kubernetes`), the side-car evaluator task
(`sidecar`) and what each task of a cluster does (`tasks`). TensorFlow does the distribution;
this package only starts processes and reads TF_CONFIG.

Layer 8: may import every layer below, jobs included; never commands.
"""
