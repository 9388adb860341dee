"""Built-in model functions and the lookup of `model: name | module:function`.

Layer 0 (contracts): may import `errors`, `spec` and `system`; the built-in model functions
import TensorFlow/Keras inside their bodies only.
"""
from __future__ import annotations

import importlib
from collections.abc import Callable

from tpuestimator.errors import ConfigError

BUILTIN = {
    "cnn": "tpuestimator.models.cnn:cnn",
    "image_classifier": "tpuestimator.models.image_classifier:image_classifier",
    "linear": "tpuestimator.models.tabular:linear",
    "mlp": "tpuestimator.models.tabular:mlp",
}


def resolve_model_fn(name: str | Callable) -> Callable:
    """Returns the model function named by a built-in name or 'module:function'.

    Raises:
      ConfigError: naming `model` when the name is unknown or cannot be imported.
    """
    if callable(name):
        return name
    target = BUILTIN.get(name, name)
    if ":" not in target:
        raise ConfigError("model", name, "a built-in model (" + ", ".join(sorted(BUILTIN)) + ") or 'module:function'")
    module_name, _, attr = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        builtin = ", ".join(sorted(BUILTIN))
        if getattr(exc, "name", None) == module_name:
            fix = (f"a built-in model ({builtin}) or 'module:function' whose module can be imported: no module "
                   f"`{module_name}` was found; put the folder holding {module_name.replace('.', '/')}.py on "
                   "PYTHONPATH (or run from that folder)")
        else:
            fix = f"a module `{module_name}` that imports without error (importing it failed: {exc})"
        raise ConfigError("model", name, fix) from None
    fn = getattr(module, attr, None)
    if not callable(fn):
        defined = sorted(k for k, v in vars(module).items() if callable(v) and not k.startswith("_")
                         and getattr(v, "__module__", None) == module.__name__)
        raise ConfigError("model", name, f"a function `{attr}` defined in module `{module_name}` (it defines: "
                          f"{', '.join(defined) or 'no functions'})")
    return fn
