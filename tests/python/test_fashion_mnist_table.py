"""docs/MIGRATING.md's Fashion-MNIST table (issue 31, item 4): tpuestimator against the TF1
TPUEstimator program on the same records, as benchmarks/bench_fashion_mnist.py's last full run
measured them, with context rows.

The page's block must be what the benchmark writes from the result it keeps
(benchmarks/results/fashion_mnist.json): a page edited by hand, or a result rerun without the
page, fails here. The nearest-class-mean row, the one context figure the benchmark computes, is
checked against numpy on Debian's IDX files read here with gzip (not the product's IDX reader).
"""
from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]
BENCH = REPO / "benchmarks"
RESULT = BENCH / "results" / "fashion_mnist.json"
MIGRATING = REPO / "docs" / "MIGRATING.md"
DEBIAN_DIR = Path("/usr/share/datasets/fashion-mnist")


@pytest.fixture(scope="module")
def bench():
    sys.path.insert(0, str(BENCH))
    try:
        import bench_fashion_mnist
    finally:
        sys.path.remove(str(BENCH))
    return bench_fashion_mnist


def _block(text: str, begin: str, end: str) -> str:
    assert text.count(begin) == 1 and text.count(end) == 1, "the page needs one pair of the table's markers"
    return text[text.index(begin):text.index(end) + len(end)]


def _idx(name: str) -> np.ndarray:
    raw = gzip.decompress((DEBIAN_DIR / f"{name}.gz").read_bytes())
    ndim = raw[3]
    dims = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(raw, np.uint8, offset=4 + 4 * ndim).reshape(dims)


def test_the_migrating_pages_table_is_the_benchmarks_last_full_run(bench):
    result = json.loads(RESULT.read_text())
    assert not result["smoke"], "the kept result is a smoke run's"
    peers = result["results"]["peers"]
    assert {"tf1", "tpuestimator"} <= set(peers), sorted(peers)
    assert result["results"]["workload"]["test_images"] == 10000
    page = MIGRATING.read_text()
    block = _block(page, bench.MIGRATING_BEGIN, bench.MIGRATING_END)
    assert block == bench.migrating_block(result)
    # the rows carry the result's figures, the TF1 program's first
    rows = [line for line in block.splitlines() if line.startswith("| ") and not line.startswith("| program")]
    assert rows[0].startswith("| the TF1 program") and f"**{peers['tf1']['accuracy']:.4f}**" in rows[0]
    assert f"**{peers['tpuestimator']['accuracy']:.4f}**" in rows[1]
    assert any(line.startswith("| 2 Conv+pooling (TensorFlow's layers tutorial)") and "| 0.916 |" in line
               for line in rows)


def test_the_nearest_class_mean_row_is_numpys_on_the_debian_files(bench):
    if not (DEBIAN_DIR / "t10k-labels-idx1-ubyte.gz").is_file():
        pytest.skip("Fashion-MNIST is not installed: apt-get install dataset-fashion-mnist "
                    "(scripts/setup_system.sh datasets)")
    x, y = _idx("train-images-idx3-ubyte").reshape(60000, -1), _idx("train-labels-idx1-ubyte")
    t, ty = _idx("t10k-images-idx3-ubyte").reshape(10000, -1).astype(np.float64), _idx("t10k-labels-idx1-ubyte")
    means = np.stack([x[y == c].mean(axis=0, dtype=np.float64) for c in range(10)])
    distances = np.stack([((t - m) ** 2).sum(axis=1) for m in means], axis=1)
    expected = float((distances.argmin(axis=1) == ty).mean())
    assert 0.6 < expected < 0.75  # what a class-mean template gets on this dataset
    result = json.loads(RESULT.read_text())["results"]["baselines"]
    assert result["nearest_class_mean"] == pytest.approx(expected, abs=1e-12)
    assert result["nearest_class_mean_train_images"] == 60000
    assert f"| {expected:.4f} |" in _block(MIGRATING.read_text(), bench.MIGRATING_BEGIN, bench.MIGRATING_END)
    # the benchmark's own function on the same arrays
    assert bench.nearest_class_mean(x, y, t, ty) == pytest.approx(expected, abs=1e-12)
