.PHONY: main test bench fixtures
main:       ## train, evaluate, export and record the digits example
	bash scripts/main.sh
test:       ## every test: pytest and testthat
	bash scripts/test.sh
bench:      ## regenerate benchmarks/README.md figures
	bash scripts/setup_python.sh dev && .venv/bin/python benchmarks/run_all.py
fixtures:   ## regenerate tests/fixtures and the bundled digits data
	.venv/bin/python tests/fixtures/make_fixtures.py && .venv/bin/python scripts/make_digits.py
