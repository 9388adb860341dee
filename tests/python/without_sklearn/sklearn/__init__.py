"""First on PYTHONPATH of the tests' CLI and cluster processes (`helpers.without_sklearn`):
scikit-learn is a dev extra the tests use for their own answers, not part of the core install,
and Keras imports it whenever it can (`keras.wrappers`), 1-1.5 CPU s of each process's start.
Here it cannot, as for a user of the core install."""
raise ImportError("scikit-learn is hidden from the tests' CLI processes, as in the core install "
                  "(tests/python/without_sklearn)")
