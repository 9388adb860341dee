"""A pandas data frame into a canned model: feature columns inferred, trained, predicted.

Run from anywhere: python examples/python/tables_pandas.py [OUT_DIR]
"""
import sys

import numpy as np
import pandas as pd

from tpuestimator.tables import predict_table, train_table

rng = np.random.default_rng(0)
n = 400
houses = pd.DataFrame({
    "rooms": rng.integers(1, 7, n),
    "area": rng.normal(90, 25, n).round(1),
    "district": rng.choice(["north", "south", "centre"], n),
    "garden": rng.random(n) > 0.6,
})
houses["price"] = (50 + 2.1 * houses.area + 12 * houses.rooms + 40 * (houses.district == "centre")
                   + 15 * houses.garden + rng.normal(0, 10, n)).round(1)
houses.loc[::37, "area"] = np.nan  # a few missing areas: imputed with the training mean

result = train_table(houses, label="price", model="wide_and_deep", missing={"area": "mean"},
                     out_dir=sys.argv[1] if len(sys.argv) > 1 else "models/houses",
                     config={"train": {"max_steps": 600}, "params": {"hidden_units": [32, 16]}})
print({k: round(v, 3) for k, v in result.metrics.items() if k in ("rmse", "mae", "r2")})
new = pd.DataFrame({"rooms": [3, 5], "area": [80.0, None], "district": ["centre", "harbour"],
                    "garden": [True, False]})  # "harbour" was never seen: the out-of-vocabulary bucket
print(predict_table(result.export_dir, new)["prediction"])
