"""Canned table models, each a classifier or a regressor by the data's task (the premade
Estimators `LinearClassifier`/`LinearRegressor`, `DNNClassifier`/`DNNRegressor` and
`DNNLinearCombinedClassifier`/`Regressor`):

- `linear`: a weighted sum: one weight row per category of each non-numeric column (a one-hot
  times a matrix, looked up as an embedding of width `outputs`) plus a dense layer on numerics.
- `dnn`: the columns encoded (one-hot or embedding per column, numerics as they are) ->
  `hidden_units` dense layers (ReLU, optional `batch_norm`, `dropout`) -> the head.
- `wide_and_deep`: the linear model on the wide columns (`part: wide|both`: one-hots and
  crosses) plus the dnn on the deep ones (`part: deep|both`: embeddings and numerics), their
  outputs summed; each part trained by its own optimizer (`linear_optimizer`, default Ftrl, and
  `optimizer`) as DNNLinearCombined did.

`l2_regularization` (`linear` and the wide part of `wide_and_deep`; default 0): adds
`l2_regularization * sum(w**2)` over the linear weights (not the bias) to the loss, which is a
mean over the batch; scikit-learn's `LogisticRegression(C=c)` on n training rows is
`l2_regularization = 1 / (2 * c * n)`.

The model receives the numbers of `models.table_preprocessing` (float32 numerics, int32 indices); the
export's signatures take raw values (the preprocessing is its `serving_preprocess`). `linear`
on data that is no table is the plain `tabular.linear`.

Each model parses its params dict once into its typed params (`models.params.LinearParams`,
`DNNParams`, `WideAndDeepParams`: the defaults and the checks) and reads them by attribute.
"""
from __future__ import annotations

import logging

from tpuestimator.errors import ConfigError
from tpuestimator.models import tabular
from tpuestimator.models.column_spec import ColumnSpec
from tpuestimator.models.feature_columns import input_name
from tpuestimator.models.heads import head_spec
from tpuestimator.models.params import CannedParams, DNNParams, LinearParams, WideAndDeepParams

log = logging.getLogger(__name__)
_TOLD_EMPTY_PART: set = set()

def _inputs(params: CannedParams):
    import keras

    # keyed by input name, as `table_preprocessing` hands the model its features
    return {input_name(name): keras.Input(shape=(), dtype="float32" if c.type == "numeric" else "int32",
                                          name=input_name(name)) for name, c in params.feature_columns.items()}


def _serving(params: CannedParams) -> dict:
    import tensorflow as tf

    from tpuestimator.models.table_preprocessing import preprocessor_for

    columns = params.feature_columns
    inputs = {name: tf.TensorSpec([], tf.as_dtype(c.dtype), name=input_name(name))
              for name, c in columns.items() if c.stored}
    return {"serving_inputs": inputs, "serving_preprocess": preprocessor_for(columns)}


def _optimizer(kind: str, learning_rate: float):
    """The Keras optimizer `kind` (one of `models.params.OPTIMIZERS`, checked when parsed)."""
    import keras

    makers = {"adam": keras.optimizers.Adam, "sgd": keras.optimizers.SGD, "adagrad": keras.optimizers.Adagrad,
              "ftrl": keras.optimizers.Ftrl, "rmsprop": keras.optimizers.RMSprop}
    return makers[kind](learning_rate=float(learning_rate))


def _l2(params: LinearParams | WideAndDeepParams):
    """The L2 penalty of the linear weights (`l2_regularization`), or None."""
    import keras

    value = params.l2_regularization
    return keras.regularizers.L2(float(value)) if value else None


def _wide_logits(inputs, columns, units: int, names, name: str, l2=None):
    """The linear part: sum of per-category weight rows plus a dense layer on numerics; `l2`
    penalizes those weights (not the bias)."""
    import keras

    terms = []
    numerics = [keras.ops.expand_dims(inputs[input_name(n)], -1) for n in names if columns[n].type == "numeric"]
    if numerics:
        x = numerics[0] if len(numerics) == 1 else keras.layers.Concatenate(name=f"{name}_numeric")(numerics)
        terms.append(keras.layers.Dense(units, kernel_regularizer=l2, name=f"{name}_numeric_weights")(x))
    for n in names:
        if columns[n].type != "numeric":
            terms.append(keras.layers.Embedding(columns[n].cardinality, units, embeddings_initializer="zeros",
                                                embeddings_regularizer=l2,
                                                name=f"{name}_{input_name(n)}_weights")(inputs[input_name(n)]))
    if not terms:
        raise ConfigError("data.feature_columns", sorted(columns), "at least one column in the model's part")
    out = terms[0] if len(terms) == 1 else keras.layers.Add(name=f"{name}_sum")(terms)
    if not numerics:  # the bias (the dense layer on numerics holds one otherwise)
        out = _Bias(units, name=f"{name}_bias")(out)
    return out


def _Bias(units, name):
    import keras

    class Bias(keras.layers.Layer):
        def build(self, input_shape):
            self.bias = self.add_weight(shape=(units,), initializer="zeros", name="bias")

        def call(self, x):
            return x + self.bias

    return Bias(name=name)


def _deep_input(inputs, columns, names, name: str):
    """The dnn part's input: numerics as they are, one-hots and embeddings, concatenated."""
    import keras

    parts = []
    for n in names:
        c = columns[n]
        if c.type == "numeric":
            parts.append(keras.ops.expand_dims(inputs[input_name(n)], -1))
        elif c.encoding == "embedding":
            parts.append(keras.layers.Embedding(c.cardinality, int(c.embedding_dim),
                                                name=f"{name}_{input_name(n)}_embedding")(inputs[input_name(n)]))
        else:
            parts.append(keras.ops.one_hot(inputs[input_name(n)], c.cardinality))
    if not parts:
        raise ConfigError("data.feature_columns", sorted(columns), "at least one column in the dnn part")
    return parts[0] if len(parts) == 1 else keras.layers.Concatenate(name=f"{name}_inputs")(parts)


def _dnn_tower(x, params: DNNParams, name: str):
    import keras

    dropout = params.dropout
    for i, units in enumerate(params.hidden_units):
        x = keras.layers.Dense(units, name=f"{name}_hidden_{i}")(x)
        if params.batch_norm:
            x = keras.layers.BatchNormalization(name=f"{name}_batch_norm_{i}")(x)
        x = keras.layers.Activation("relu")(x)
        if dropout:
            x = keras.layers.Dropout(dropout, name=f"{name}_dropout_{i}")(x)
    return x


def linear(params: dict):
    """Linear / logistic regression on a table's columns (on other numeric data: `tabular.linear`)."""
    import keras

    if not CannedParams.on_table(params):
        return tabular.linear(params)
    p = LinearParams.from_params(params)
    columns = p.feature_columns
    inputs = _inputs(p)
    out = _wide_logits(inputs, columns, p.units(), list(columns), "linear", _l2(p))
    model = keras.Model(inputs, out, name="linear")
    return head_spec(p, model, _optimizer(p.optimizer, p.learning_rate), **_serving(p))


def dnn(params: dict):
    """A feed-forward network on a table's columns: `hidden_units`, `dropout`, `batch_norm`."""
    import keras

    p = DNNParams.from_params(params)
    columns = p.feature_columns
    inputs = _inputs(p)
    x = _dnn_tower(_deep_input(inputs, columns, list(columns), "dnn"), p, "dnn")
    out = keras.layers.Dense(p.units(), dtype="float32", name="outputs")(x)
    model = keras.Model(inputs, out, name="dnn")
    return head_spec(p, model, _optimizer(p.optimizer, p.learning_rate), **_serving(p))


def wide_and_deep(params: dict):
    """The linear model on the wide columns plus the dnn on the deep ones, summed; two optimizers."""
    import keras

    p = WideAndDeepParams.from_params(params)
    columns = p.feature_columns
    inputs = _inputs(p)
    wide_names, deep_names = wide_and_deep_parts(columns)
    units = p.units()
    wide = _wide_logits(inputs, columns, units, wide_names, "wide", _l2(p))
    deep = keras.layers.Dense(units, dtype="float32", name="deep_outputs")(
        _dnn_tower(_deep_input(inputs, columns, deep_names, "deep"), p, "deep"))
    out = keras.layers.Add(name="outputs")([wide, deep])
    model = keras.Model(inputs, out, name="wide_and_deep")
    optimizer = part_optimizers(wide=_optimizer(p.linear_optimizer, p.linear_learning_rate),
                                deep=_optimizer(p.optimizer, p.learning_rate), wide_prefix="wide_")
    return head_spec(p, model, optimizer, **_serving(p))


def wide_and_deep_parts(columns: dict[str, ColumnSpec]) -> tuple[list[str], list[str]]:
    """(wide columns, deep columns) of `wide_and_deep`: by each column's `part`; when one part
    would get no column (an all-numeric table has nothing for the wide part), every column goes
    into both, as DNNLinearCombined accepted an empty part, with one info line saying so."""
    wide = [n for n, c in columns.items() if c.model_part in ("wide", "both")]
    deep = [n for n, c in columns.items() if c.model_part in ("deep", "both") and c.stored]
    empty = "wide" if not wide else ("deep" if not deep else None)
    if empty is None:
        return wide, deep
    told = (empty, tuple(columns))
    if told not in _TOLD_EMPTY_PART:  # the model is built for training, evaluation and export: one line
        _TOLD_EMPTY_PART.add(told)
        log.info("wide_and_deep: no column is in the %s part (part: %s or both), so every column goes into both parts "
                 "(set data.feature_columns.<column>.part to choose).", empty, empty)
    return list(columns), [n for n, c in columns.items() if c.stored]


def part_optimizers(*, wide, deep, wide_prefix: str):
    """Two Keras optimizers, one per part of a model (variables whose layer name starts with
    `wide_prefix` go to `wide`, the rest to `deep`), with the interface the Estimator uses:
    `build`, `apply_gradients`, `variables`, `learning_rate` (the deep optimizer's); a
    `tf.Module`, so checkpoints hold both optimizers' state."""
    import tensorflow as tf

    class PartOptimizers(tf.Module):
        def __init__(self):
            super().__init__(name="part_optimizers")
            self.wide, self.deep = wide, deep

        def is_wide(self, variable) -> bool:
            return variable.path.split("/")[0].startswith(wide_prefix)

        def build(self, variables):
            variables = list(variables)
            self.wide.build([v for v in variables if self.is_wide(v)])
            self.deep.build([v for v in variables if not self.is_wide(v)])

        def apply_gradients(self, grads_and_vars):
            pairs = list(grads_and_vars)
            self.wide.apply_gradients([(g, v) for g, v in pairs if self.is_wide(v)])
            self.deep.apply_gradients([(g, v) for g, v in pairs if not self.is_wide(v)])

        @property
        def variables(self):
            return [*self.wide.variables, *self.deep.variables]

        @property
        def learning_rate(self):
            return self.deep.learning_rate

    return PartOptimizers()
