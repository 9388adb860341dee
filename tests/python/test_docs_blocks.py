"""The guide pages' shell and Python blocks run as written (issue 32, item 4).

Each test reads its block from the page at test time (so an edit to the page is what gets
tested), applies only the substitutions in SUBSTITUTIONS below (each must still match the page,
or the test fails instead of quietly running something else), and runs it: shell blocks in a
scratch folder laid out as the page assumes, their plain `tpuestimator ARGS` and
`python SCRIPT.py ARGS` lines (quoted words, globs and the test's variables allowed) in the
test process, through the CLI's main() or as `python` runs a script (a child process would
import TensorFlow again, ~5-7 CPU s a line), and every other line in one `bash` kept for the
whole block (`run_block`); Python blocks in process.
Outcomes are checked (an export that answers, a run recorded, a bundle that replays, the printed
lines the page promises), not only exit statuses.

Every `tpuestimator` (and `saved_model_cli`) the bash lines call is this checkout's, through a
two-line shim on PATH (`python -m tpuestimator "$@"` with the test's Python).

One small digits model (20 steps, the getting-started commands) is trained once per module and
the deploying blocks run against it. The configs the tests lay out for the pages (digits.yaml,
job.yaml: the digits example) train 20 steps; job.yaml (scaling-out.md's and data.md's) also
has `export.enabled: false`, as no block that trains it uses an export.
"""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
STEPS = 20   # every training on the pages, shortened to this many steps
CLUSTER_STEPS = 2   # scaling-out.md's multi-worker cluster: fewer still (SUBSTITUTIONS)

# What differs from the page, per page: (text on the page, what the test runs instead, why).
# Every `old` must occur in the block it is applied to.
SUBSTITUTIONS: dict[str, list[tuple[str, str, str]]] = {
    "getting-started-python.md:commands": [
        ('pip install -e ".[cpu]"', "true", "pip installs from the network; the shim runs this checkout"),
        ("tpuestimator example digits --out digits        # config + data",
         "tpuestimator example digits --out digits; sed -i 's/max_steps: 1500/max_steps: 20/' digits/digits.yaml",
         "the example config's 1,500 training steps -> 20"),
        ("train.max_steps=3000", "train.max_steps=40", "3,000 steps -> 40 (20 more than the first training)"),
        ("export/final/1500", "export/final/20", "the export's step folder follows the shorter training"),
        ("tpuestimator tensorboard                        # TensorBoard on the runs folder",
         "set -m; tpuestimator tensorboard > tensorboard.out & SERVER=$!; started 'http://' tensorboard.out\n"
         "fetch \"$(grep -o 'http://127.0.0.1:[0-9]*/' tensorboard.out)\"; ctrl_c; cat tensorboard.out",
         "it serves until Ctrl-C: started, its page fetched, then sent SIGINT"),
    ],
    "getting-started-python.md:python": [
        ('"train.max_steps=500"', '"train.max_steps=20"', "500 steps -> 20"),
        ("max_steps=1000", "max_steps=20", "1,000 steps -> 20"),
    ],
    "deploying.md:saved_model_cli": [
        ("export/final/1500", "export/final/20", "the export's step folder follows the shorter training"),
    ],
    "deploying.md:tflite": [
        ("--representative-batches 10", "--representative-batches 2", "10 calibration batches -> 2"),
    ],
    "tuning.md:cli": [
        ("train.max_steps=300", "train.max_steps=20 --set export.enabled=false",
         "300 steps -> 20 (digits.yaml's own 1,500 are 20 here too); no exports: the runs are compared on their "
         "evaluations"),
    ],
    "debugging.md:diverge": [
        ("--set run.model_dir=models/job   # exit status 1", "--set run.model_dir=models/job || test $? = 1",
         "the training's exit status 1 is what the page promises; the script goes on"),
    ],
    "scaling-out.md:service": [
        ("tpuestimator data serve --dispatcher 5050 --workers 2      # a local dispatcher + 2 workers; Ctrl-C stops them",
         "set -m; tpuestimator data serve --dispatcher 5050 --workers 2 > serve.out & SERVER=$!; "
         "started 'tf.data service at' serve.out",
         "it serves until Ctrl-C (in its own terminal on the page): started in the background, stopped after the training"),
        ("tpuestimator train job.yaml --set data.service=grpc://localhost:5050",
         "tpuestimator train job.yaml --set data.service=grpc://localhost:5050\nctrl_c; cat serve.out", "then Ctrl-C"),
        ("5050", "$PORT", "a free port, not 5050, which another test or program may hold"),
    ],
    "scaling-out.md:cluster": [
        ("--set run.strategy=multi_worker", f"--set run.strategy=multi_worker --set train.max_steps={CLUSTER_STEPS}",
         f"job.yaml's 20 steps -> {CLUSTER_STEPS} for the two multi-worker workers: each step is an all-reduce "
         "between the two processes (~0.25 CPU s a step here); two steps show it synchronising"),
        ("--set run.strategy=parameter_server --model-dir models/job",
         "--set run.strategy=parameter_server --model-dir models/job-ps",
         "the two lines are alternatives: the second trains into a folder of its own"),
    ],
    "scaling-out.md:by_hand": [
        ("127.0.0.1:2222", "127.0.0.1:'$PORT_CHIEF'", "free ports, not 2222-2225, which another test or program may hold"),
        ("127.0.0.1:2223", "127.0.0.1:'$PORT_WORKER0'", "a free port"),
        ("127.0.0.1:2224", "127.0.0.1:'$PORT_WORKER1'", "a free port"),
        ("127.0.0.1:2225", "127.0.0.1:'$PORT_PS'", "a free port"),
        ('0}}"  tpuestimator train job.yaml --set run.strategy=parameter_server',
         '0}}"  tpuestimator train job.yaml --set run.strategy=parameter_server\n'
         'for task in $(jobs -p); do wait "$task"; done',
         "then the shell waits for the three background tasks, which stop by themselves once the chief is done "
         "(a failed one fails the script)"),
    ],
    "data.md:commands": [
        ("tpuestimator data write table.csv data/ ", "tpuestimator data write table.csv data-table/ ",
         "the lines are alternatives writing into data/: the second, third and fifth write folders of their own"),
        ("tpuestimator data write train-images-idx3-ubyte.gz data/ ",
         "tpuestimator data write train-images-idx3-ubyte.gz data-idx/ ", "a folder of its own"),
        ("tpuestimator data write photos/ data/ --beam", "tpuestimator data write photos/ data-beam/ --beam",
         "a folder of its own"),
        ("tpuestimator example fashion_mnist --out fashion ", "tpuestimator example fashion_mnist --out fashion --limit 600 ",
         "60,000 training images -> the first 600"),
        ("tpuestimator data serve --dispatcher 5050 --workers 2                  # a local tf.data service: "
         "data.service=grpc://localhost:5050",
         "set -m; tpuestimator data serve --dispatcher $PORT --workers 2 > serve.out & SERVER=$!; "
         "started 'tf.data service at' serve.out; ctrl_c; cat serve.out",
         "it serves until Ctrl-C, on a free port: started in the background, then sent SIGINT"),
        ("models/job/debug/nonfinite-step-1200", "models/job/debug/nonfinite-step-*",
         "the NaN stop of the test's diverging training (learning rate 1e10) is at its own step, not 1200"),
    ],
    "getting-started-r.md:install": [
        ("R CMD build . ", "R CMD build --no-build-vignettes . ",
         "the vignettes train models when built; tests/testthat and pkgdown's build run them"),
    ],
    "MIGRATING.md:fashion": [
        ("tpuestimator example fashion_mnist --out fashion ", "tpuestimator example fashion_mnist --out fashion --limit 600 ",
         "60,000 training images -> the first 600 (and 100 test images)"),
        ("--train_steps 3000", "--train_steps 20", "3,000 steps -> 20"),
    ],
    "tuning.md:python": [
        ('"train.max_steps=300"', '"train.max_steps=20", "export.enabled=false"',
         "300 steps -> 20; no exports: `best` is chosen by evaluation loss"),
    ],
}

# Shell functions the substituted lines call (defined before the page's lines run).
PRELUDE = r"""
set -euo pipefail
started() {   # $1: a pattern, $2: the output file of the server $SERVER: waits until it prints the pattern
  for _ in $(seq 1200); do
    grep -q "$1" "$2" && return 0
    kill -0 "$SERVER" 2>/dev/null || { cat "$2"; return 1; }
    sleep 0.5
  done
  return 1
}
fetch() { python -c 'import sys, urllib.request; print("fetched", urllib.request.urlopen(sys.argv[1], timeout=60).status)' "$1"; }
ctrl_c() { kill -INT "$SERVER"; wait "$SERVER"; }   # what Ctrl-C sends; the server's exit status is the script's
"""


def page_block(page: str, first: str, lang: str = "bash") -> tuple[int, str]:
    """(line, text) of the ```lang block of docs/`page` (or README.md) whose first line starts with `first`."""
    path = REPO / page if page == "README.md" else DOCS / page
    lines = path.read_text().splitlines()
    found = []
    for i, line in enumerate(lines):
        if line == f"```{lang}" and lines[i + 1].startswith(first):
            end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
            found.append((i + 2, "\n".join(lines[i + 1:end]) + "\n"))
    assert len(found) == 1, f"{page}: expected one ```{lang} block starting {first!r}, found {len(found)}"
    return found[0]


def as_run(key: str, text: str) -> str:
    """The block with its SUBSTITUTIONS applied; each must match."""
    for old, new, why in SUBSTITUTIONS[key]:
        assert old in text, f"{key}: the page no longer has {old!r} ({why}): update SUBSTITUTIONS"
        text = text.replace(old, new)
    return text


def shims(folder: Path, python: str = sys.executable) -> dict:
    """An environment whose `tpuestimator`, `saved_model_cli` and `python` are this checkout's, run
    by `python` (this Python, or conftest's forked_python: processes of their own without their
    TensorFlow import, for the pages whose commands start servers and cluster tasks)."""
    bin_dir = folder / ".bin"
    bin_dir.mkdir(exist_ok=True)
    # `python` too: a symlink would lose the virtualenv (Python finds it beside the path it was run by)
    for name, module in (("tpuestimator", "-m tpuestimator"), ("python", ""),
                         ("saved_model_cli", "-m tensorflow.python.tools.saved_model_cli")):
        (bin_dir / name).write_text(f'#!/bin/sh\nexec "{python}" {module} "$@"\n')
        (bin_dir / name).chmod(0o755)
    env = dict(os.environ)
    env["PATH"] = f"{bin_dir}{os.pathsep}{env['PATH']}"
    env["PYTHONPATH"] = str(REPO / "python") + os.pathsep + env.get("PYTHONPATH", "")
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    return env


# A line the shell only splits into words: `tpuestimator ARGS` or `python SCRIPT.py ARGS`, its
# words plain, quoted ('...' or "...") or globs, `$NAME` only of a variable the script is given
# (not one it sets), and no other shell syntax (pipes, redirects, `&`, `;`, substitutions...)
# outside a comment; it may end in `|| test $? = N` (exit status N is then fine too).
_NOT_PLAIN = set("|&;<>`(){}\\!~")
_ALSO_FINE = re.compile(r"^(?P<line>.*?)\s*\|\|\s*test \$\? = (?P<status>\d+)\s*$")
_VARIABLE = re.compile(r"\$(?:(?P<name>[A-Za-z_][A-Za-z0-9_]*)|\{(?P<braced>[A-Za-z_][A-Za-z0-9_]*)\})")


def _words(code: str, variables: dict) -> list[tuple[str, str | None]] | None:
    """The words bash splits `code` into, each (its text, its glob pattern when an unquoted `*`,
    `?` or `[` makes it one); None when `code` needs the shell for more than that."""
    import glob

    words: list[tuple[str, str | None]] = []
    text = pattern = quote = ""
    in_word = is_glob = False
    i = 0
    while i < len(code):
        ch = code[i]
        i += 1
        if ch == "$" and quote != "'":
            found = _VARIABLE.match(code, i - 1)
            name = found and (found["name"] or found["braced"])
            if not name or name not in variables:
                return None
            value = variables[name]
            if not quote and re.search(r"[\s*?\[]", value):     # bash would split or glob it
                return None
            text, pattern, in_word, i = text + value, pattern + glob.escape(value), True, found.end()
        elif quote == "'" or quote == '"':
            if ch == quote:
                quote = ""
            elif quote == '"' and ch in "`\\!":
                return None
            else:
                text, pattern = text + ch, pattern + glob.escape(ch)
        elif ch.isspace():
            if in_word:
                words.append((text, pattern if is_glob else None))
            text = pattern = ""
            in_word = is_glob = False
        elif ch == "#" and not in_word:
            break                                                # a comment
        elif ch in _NOT_PLAIN:
            return None
        else:
            in_word = True
            if ch in "'\"":
                quote = ch
            else:
                is_glob = is_glob or ch in "*?["
                text, pattern = text + ch, pattern + ch
    if quote:
        return None
    if in_word:
        words.append((text, pattern if is_glob else None))
    return words


def _plain_line(line: str, variables: dict) -> tuple[list[tuple[str, str | None]], set[int]] | None:
    """A plain line's words and the exit statuses it may end with, else None."""
    statuses = {0}
    also = _ALSO_FINE.match(line)
    if also:
        line, statuses = also["line"], {0, int(also["status"])}
    words = _words(line, variables)
    if not words or any(pattern is not None for _, pattern in words[:2]):
        return None
    if words[0][0] == "tpuestimator" or (words[0][0] == "python" and len(words) > 1 and words[1][0].endswith(".py")):
        return words, statuses
    return None


def _expand(words: list[tuple[str, str | None]], cwd: Path) -> list[str]:
    """The words as bash passes them on: a glob replaced by its matches, sorted (the glob itself
    when nothing matches)."""
    import glob

    out: list[str] = []
    for text, pattern in words:
        out.extend(sorted(glob.glob(pattern, root_dir=cwd)) or [text] if pattern is not None else [text])
    return out


def _run_in_process(args: list[str], cwd: Path) -> tuple[int, str, str]:
    """`tpuestimator ARGS` through the CLI's main(), or `python SCRIPT.py ARGS` as `python` runs
    a script (`__main__`, its folder first on sys.path), in this process (it has imported
    TensorFlow once; a child process would pay its ~5-7 CPU s import again): (status, stdout,
    stderr), the log lines on stderr as the CLI's own logging setup writes them."""
    import contextlib
    import io
    import logging
    import runpy

    from tpuestimator.cli import main

    out, err = io.StringIO(), io.StringIO()
    handler = logging.StreamHandler(err)
    handler.setFormatter(logging.Formatter("%(message)s"))
    root = logging.getLogger()
    level, handlers, before = root.level, list(root.handlers), os.getcwd()
    argv, path = list(sys.argv), list(sys.path)
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                if args[0] == "tpuestimator":
                    status = main(args[1:])
                else:
                    script = str(cwd / args[1])
                    sys.argv[:] = args[1:]
                    sys.path.insert(0, os.path.dirname(script))
                    runpy.run_path(script, run_name="__main__")
                    status = 0
            except SystemExit as stop:    # argparse's exits, sys.exit()
                status = stop.code if isinstance(stop.code, int) else 1 if stop.code else 0
    finally:
        os.chdir(before)
        sys.argv[:], sys.path[:] = argv, path
        root.handlers[:] = handlers       # and what a script's logging.basicConfig() added
        root.setLevel(level)
    return int(status or 0), out.getvalue(), err.getvalue()


class _Shell:
    """One `bash` for all the shell lines of a block, kept between them (the variables they
    set, the jobs they leave running), which it reads a step at a time from a pipe; `run` gives
    the output of each. A failing line ends it, as `set -e` does."""

    def __init__(self, cwd: Path, env: dict, deadline: float):
        import tempfile

        self.deadline = deadline
        self.out, self.err = tempfile.TemporaryFile(), tempfile.TemporaryFile()
        self.read_at = [0, 0]
        steps, self.steps = os.pipe()
        self.done, done = os.pipe()
        # each step `eval`ed with the two pipes closed (the jobs it starts do not hold them),
        # then one byte on `done`; bash ends when the pipe of steps closes
        loop = (f'while IFS= read -r -d "" _docs_step <&{steps}; do eval "$_docs_step" {steps}<&- {done}>&-; '
                f"printf . >&{done}; done\n")
        # as from a terminal: a test run started in the background of a script (`cmd &`) has SIGINT
        # ignored, which the page's Ctrl-C-stopped servers would inherit and keep
        self.proc = subprocess.Popen(["bash", "-c", PRELUDE + loop], cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                                     stdout=self.out, stderr=self.err, pass_fds=(steps, done),
                                     preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        os.close(steps)
        os.close(done)

    def output(self) -> tuple[str, str]:
        """What bash wrote since the last call (read without moving bash's own file offsets)."""
        texts = []
        for k, file in enumerate((self.out, self.err)):
            size = os.fstat(file.fileno()).st_size
            texts.append(os.pread(file.fileno(), size - self.read_at[k], self.read_at[k]).decode(errors="replace"))
            self.read_at[k] = size
        return texts[0], texts[1]

    def run(self, step: str) -> tuple[int | None, str, str]:
        """Runs `step`: (None when it succeeded, else bash's exit status; stdout; stderr)."""
        import select
        import time

        os.write(self.steps, step.encode() + b"\0")
        while True:
            ready, _, _ = select.select([self.done], [], [], max(0.0, self.deadline - time.monotonic()))
            if not ready:
                self.proc.kill()
                self.proc.wait()
                return -9, *self.output()
            if os.read(self.done, 1):
                return None, *self.output()
            return self.proc.wait(), *self.output()          # the pipe ended: bash exited

    def close(self, failed: bool) -> tuple[int, str, str]:
        """Ends bash, after stopping the jobs it left running when the block failed: (its exit
        status, what it wrote last)."""
        import time

        if failed and self.proc.poll() is None:
            os.write(self.steps, b"kill $(jobs -p) 2>/dev/null; exit 0\0")
        os.close(self.steps)
        try:
            status = self.proc.wait(timeout=max(1.0, self.deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            self.proc.kill()
            status = self.proc.wait()
        out, err = self.output()
        os.close(self.done)
        self.out.close()
        self.err.close()
        return status, out, err


def run_block(script: str, cwd: Path, env: dict, timeout: int = 900) -> subprocess.CompletedProcess:
    """The script as `bash` runs it, with its plain lines (`_plain_line`: `tpuestimator ARGS`,
    `python SCRIPT.py ARGS`) run in this process (`_run_in_process`) and the other lines, in
    order, in one bash kept for the whole script (`_Shell`). A script that changes the folder or
    the environment the plain lines would run in (`cd`, `export`) runs in one bash, whole. Any
    line's failure stops it, as `set -e` does."""
    import time

    lines, pending = [], ""
    for line in script.splitlines():        # a continued line (`\\` at its end) joins the next
        pending += line
        if pending.endswith("\\"):
            pending = pending[:-1]
            continue
        lines.append(pending)
        pending = ""
    if re.search(r"^\s*(cd|pushd|popd|export|source|\.|set\s+-a|declare|typeset)\s", "\n".join(lines), re.M):
        return run_bash(script, cwd, env, timeout)
    # the variables a plain line may use: the environment's, unless the script sets them
    variables = {name: value for name, value in env.items()
                 if not re.search(rf"(^|[\s;&|(]){re.escape(name)}=", script, re.M)}
    steps: list = []                         # a plain line's (words, statuses), or the shell lines between them
    heredoc = None
    for line in lines:
        plain = None if heredoc else _plain_line(line, variables)
        if heredoc and line.strip() == heredoc:
            heredoc = None
        elif not heredoc and (opened := re.search(r"<<-?\s*['\"]?(\w+)['\"]?", line)):
            heredoc = opened[1]             # the lines up to its delimiter are the shell's
        if plain is not None:
            steps.append(plain)
        elif steps and isinstance(steps[-1], str):
            steps[-1] += line + "\n"
        else:
            steps.append(line + "\n")
    stdout, stderr = [], []
    shell, bash_status, failed = None, 0, True
    try:
        for step in steps:
            if isinstance(step, str):
                shell = shell or _Shell(cwd, env, time.monotonic() + timeout)
                status, out, err = shell.run(step)
                stdout.append(out)
                stderr.append(err)
                assert status is None, f"exit {status}\n{''.join(stdout)[-4000:]}\n{''.join(stderr)[-6000:]}"
                continue
            words, statuses = step
            args = _expand(words, cwd)
            status, out, err = _run_in_process(args, cwd)
            stdout.append(out)
            stderr.append(err)
            assert status in statuses, f"{' '.join(args)}: exit {status}\n{''.join(stdout)[-4000:]}\n{''.join(stderr)[-6000:]}"
        failed = False
    finally:
        if shell is not None:
            bash_status, out, err = shell.close(failed)
            stdout.append(out)
            stderr.append(err)
    assert bash_status == 0, f"bash: exit {bash_status}\n{''.join(stdout)[-4000:]}\n{''.join(stderr)[-6000:]}"
    return subprocess.CompletedProcess(["bash"], 0, "".join(stdout), "".join(stderr))


def run_bash(script: str, cwd: Path, env: dict, timeout: int = 900) -> subprocess.CompletedProcess:
    # as from a terminal: a test run started in the background of a script (`cmd &`) has SIGINT
    # ignored, which the page's Ctrl-C-stopped servers would inherit and keep
    proc = subprocess.run(["bash", "-c", PRELUDE + script], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout[-4000:]}\n{proc.stderr[-6000:]}"
    return proc


@pytest.fixture(scope="module")
def quickstart(tmp_path_factory, forked_python):
    """docs/getting-started-python.md's commands, run in one bash in an empty folder. The lines
    run in bash (TensorBoard until Ctrl-C; saved_model_cli in the deploying test) start forks of
    forked_python's server (TensorBoard through the CLI's `[sys.executable, ...]`), ~3.5 CPU s
    of TensorFlow import each, measuring nothing."""
    root = tmp_path_factory.mktemp("quickstart")
    env = shims(root, forked_python)
    _, block = page_block("getting-started-python.md", 'pip install -e ".[cpu]"')
    proc = run_block(as_run("getting-started-python.md:commands", block), root, env)
    return root, env, proc


@pytest.mark.slow
def test_the_getting_started_commands_run_and_readme_repeats_them(quickstart):
    """Every line of the getting-started commands (README.md's Python quick start is some of them,
    in the same order): the example, two trainings (the second resumes to 40 steps), an exact
    evaluation, a TFLite file, three predictions, the TPU-readiness check, the two runs listed and
    TensorBoard serving them until Ctrl-C."""
    root, _, proc = quickstart
    _, long = page_block("getting-started-python.md", 'pip install -e ".[cpu]"')
    _, short = page_block("README.md", 'pip install -e ".[cpu]"')
    long_lines, short_lines = long.splitlines(), short.splitlines()
    assert len(short_lines) >= 4 and [line for line in long_lines if line in short_lines] == short_lines
    out = proc.stdout
    model = root / "models" / "digits"
    assert (model / "ckpt-40.index").exists() and (model / "export" / "final" / "20" / "saved_model.pb").exists()
    assert (model / "export" / "final" / "40" / "saved_model.pb").exists()
    assert "num_examples   360" in out                                    # evaluate: every eval example once
    assert len(list(model.glob("export/**/*.tflite"))) + len(list(model.glob("*.tflite"))) >= 1
    predictions = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert len(predictions) == 3 and all(0 <= p["class_id"] < 10 for p in predictions), out[-3000:]
    runs = sorted(p.name for p in (root / "runs").iterdir() if p.is_dir() and not p.name.startswith("."))
    assert len(runs) >= 2 and all(run in out for run in runs[:2])          # runs ls lists them
    assert "fetched 200" in out and "Stopping TensorBoard." in out


@pytest.mark.slow
def test_the_deploying_pages_saved_model_cli_and_tflite_blocks_run(quickstart):
    """docs/deploying.md: saved_model_cli lists the three signatures of the export; the four
    TFLite conversions each leave their file (float32, dynamic, float16, int8)."""
    root, env, _ = quickstart
    _, cli = page_block("deploying.md", "saved_model_cli show")
    _, tflite = page_block("deploying.md", "tpuestimator export models/digits --format tflite")
    proc = run_block(as_run("deploying.md:saved_model_cli", cli) + as_run("deploying.md:tflite", tflite), root, env)
    for signature in ("serving_default", "image_bytes", "features"):
        assert f"signature_def['{signature}']" in proc.stdout, proc.stdout[-3000:]
    names = {p.name for p in root.rglob("*.tflite")}
    for mode in ("", "-dynamic", "-float16", "-int8"):
        assert f"model-40{mode}.tflite" in names, names


@pytest.mark.slow
def test_the_python_quick_start_and_estimator_api_blocks_run(tmp_path, monkeypatch):
    """README.md's Python block (the first lines of docs/getting-started-python.md's) runs
    run_job on the digits example; the page's Estimator lines then train, evaluate, predict
    and export with `input_fn`s the page leaves to the user (given here: the digits records)."""
    from tpuestimator.cli import main
    from tpuestimator.config import load_config
    from tpuestimator.jobs.from_config import input_fn_for

    _, readme = page_block("README.md", "import tpuestimator as te", "python")
    _, page = page_block("getting-started-python.md", "import tpuestimator as te", "python")
    assert page.startswith(readme)
    monkeypatch.chdir(tmp_path)
    assert main(["example", "digits", "--out", "digits"]) == 0
    cfg = load_config("digits/digits.yaml")
    scope = {"input_fn": input_fn_for(cfg, "train"), "eval_input_fn": input_fn_for(cfg, "eval")}
    exec(as_run("getting-started-python.md:python", page), scope)  # noqa: S102 (the page's lines)
    result = scope["result"]
    assert result.metrics["global_step"] == 20 and Path(result.export_dir, "saved_model.pb").exists()
    assert Path(result.run_dir, "tfruns.d", "evaluation.json").exists()
    metrics = scope["metrics"]
    assert metrics["global_step"] == 20 and metrics["num_examples"] == 360
    predictions = list(scope["est"].predict(scope["eval_input_fn"]))
    assert len(predictions) == 360 and set(predictions[0]) >= {"probabilities", "class_id"}
    np.testing.assert_allclose(predictions[0]["probabilities"].sum(), 1.0, rtol=1e-5)
    assert list((tmp_path / "export").glob("*/saved_model.pb"))


@pytest.fixture
def digits_here(tmp_path):
    """The digits example's files in the working folder, as tuning.md assumes (digits.yaml here)."""
    from tpuestimator.cli import main

    assert main(["example", "digits", "--out", str(tmp_path)]) == 0
    yaml = tmp_path / "digits.yaml"
    yaml.write_text(yaml.read_text().replace("max_steps: 1500", f"max_steps: {STEPS}"))
    return tmp_path


@pytest.mark.slow
def test_the_tuning_pages_cli_block_runs_and_lists_the_runs(digits_here):
    """docs/tuning.md's commands: three learning rates, then half of a 2x2 grid, then the runs
    best first and the two latest side by side."""
    _, block = page_block("tuning.md", "tpuestimator tune digits.yaml")
    proc = run_block(as_run("tuning.md:cli", block), digits_here, shims(digits_here))
    runs = [p for p in (digits_here / "runs").iterdir() if p.is_dir() and not p.name.startswith(".")]
    assert len(runs) == 5, proc.stdout[-3000:]
    flags = [json.loads((p / "tfruns.d" / "flags.json").read_text()) for p in runs]
    rates = [f["learning_rate"] for f in flags]
    assert rates.count(1e-2) == 1 and set(rates) <= {1e-3, 3e-3, 1e-2}, flags      # 3 rates, then 2 of 4 points
    assert all(f["train.max_steps"] == STEPS for f in flags), flags
    losses = {p.name: json.loads((p / "tfruns.d" / "evaluation.json").read_text())["loss"] for p in runs}
    lines = proc.stdout.splitlines()
    # `runs ls` (after the tunings' own tables): the five runs, one a line, lowest eval_loss first
    start = [i for i in range(len(lines) - 4) if all(lines[i + k].split(" ", 1)[0] in losses for k in range(5))][-1]
    listed = [lines[start + k].split(" ", 1)[0] for k in range(5)]
    assert set(listed) == set(losses) and [losses[n] for n in listed] == sorted(losses.values()), (listed, losses)
    latest = sorted(losses)[-2:]                                          # `runs compare`: the two latest
    assert all(name in "\n".join(lines[start + 5:]) for name in latest), "\n".join(lines[start + 5:])


@pytest.mark.slow
def test_the_tuning_pages_python_block_runs(digits_here, monkeypatch):
    """docs/tuning.md's Python block: three runs, and `best` is the one with the lowest eval loss."""
    monkeypatch.chdir(digits_here)
    _, block = page_block("tuning.md", "from tpuestimator.runs import ls_runs", "python")
    scope: dict = {}
    exec(as_run("tuning.md:python", block), scope)  # noqa: S102 (the page's lines)
    runs = [p for p in (digits_here / "runs").iterdir() if p.is_dir() and not p.name.startswith(".")]
    assert len(runs) == 3
    losses = {p.name: json.loads((p / "tfruns.d" / "evaluation.json").read_text())["loss"] for p in runs}
    best = scope["best"]
    assert Path(best["run_dir"]).name == min(losses, key=losses.get)


@pytest.mark.slow
def test_the_debugging_pages_blocks_run(tmp_path, monkeypatch):
    """docs/debugging.md, its blocks in page order: a training at learning rate 1e10 stops with
    exit status 1, a report and a bundle; the replay names the op and its source line; the
    page's `debug` section (appended to digits.yaml) dumps exactly steps 5-7, logs the watched
    output three times and profiles; `debug dump` counts the three steps; the Python block's
    replay finds the report's step and its summary the three dumped steps."""
    _, diverge = page_block("debugging.md", "tpuestimator example digits --out digits")
    _, section = page_block("debugging.md", "debug:", "yaml")
    _, dumped = page_block("debugging.md", "tpuestimator train digits/digits.yaml --set train.max_steps=12")
    _, python = page_block("debugging.md", "import glob", "python")
    script = (as_run("debugging.md:diverge", diverge)
              + f"cat >> digits/digits.yaml <<'END_OF_PAGE_YAML'\n{section}END_OF_PAGE_YAML\n" + dumped)
    proc = run_block(script, tmp_path, shims(tmp_path))
    out, err = proc.stdout, proc.stderr
    (report_dir,) = (tmp_path / "models" / "job" / "debug").glob("nonfinite-step-*")
    report = json.loads((report_dir / "report.json").read_text())
    first = report["first_nonfinite"]["step"]
    assert f"step {first}" in out and "tpuestimator debug replay" in out            # cat report.txt
    assert "NaN or Inf" in err and re.search(r"op type: +\w+", out) and re.search(r"source: +\S+\.py:\d+", out)
    watched = [line for line in err.splitlines() if "watch | step:" in line and "probabilities [" in line]
    assert len(watched) == 3, err[-3000:]
    assert re.search(r"executions: +\d+ \(3 train-loop calls\)", out), out[-2000:]
    assert list((tmp_path / "runs").glob("*/logs/plugins/profile/*")), "no profile written"
    monkeypatch.chdir(tmp_path)
    scope: dict = {}
    exec(python, scope)  # noqa: S102 (the page's lines, as written)
    assert scope["result"]["reproduced"] and scope["result"]["step"] == first
    assert scope["result"]["op"]["source"]["line"] > 0
    assert scope["summary"]["loop_executions"] == 3 and scope["summary"]["nonfinite"] == []


@pytest.fixture
def job_here(tmp_path):
    """The digits example as `job.yaml` in the working folder (scaling-out.md's `job.yaml`), 20
    steps and no export (what the pages do with job.yaml is train it; an export is ~1-2 CPU s
    in each of a cluster's training processes)."""
    from tpuestimator.cli import main

    assert main(["example", "digits", "--out", str(tmp_path)]) == 0
    text = (tmp_path / "digits.yaml").read_text().replace("max_steps: 1500", f"max_steps: {STEPS}")
    assert "\nexport:\n" in text
    text = text.replace("\nexport:\n", "\nexport:\n  enabled: false\n")
    (tmp_path / "job.yaml").write_text(text.replace("name: digits", "name: job"))
    (tmp_path / "digits.yaml").unlink()
    return tmp_path


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.slow
@pytest.mark.real_process
def test_the_scaling_out_pages_tf_data_service_block_runs(job_here, forked_python):
    """docs/scaling-out.md: `data serve` starts a dispatcher and two workers, the training reads
    its input from them, and Ctrl-C stops the service cleanly."""
    _, block = page_block("scaling-out.md", "tpuestimator data serve --dispatcher")
    env = dict(shims(job_here, forked_python), PORT=str(_free_port()))
    proc = run_block(as_run("scaling-out.md:service", block), job_here, env)
    assert f"tf.data service at grpc://localhost:{env['PORT']} with 2 worker(s)" in proc.stdout, proc.stdout
    assert "tf.data service stopped" in proc.stdout
    model = job_here / "models" / "job"
    assert (model / f"ckpt-{STEPS}.index").exists()
    config = (model / "config.yaml").read_text()
    assert f"grpc://localhost:{env['PORT']}" in config


@pytest.mark.slow
@pytest.mark.real_process
def test_the_scaling_out_pages_local_cluster_block_runs(job_here, forked_python, monkeypatch):
    """docs/scaling-out.md: two multi-worker workers train models/job; two workers, a parameter
    server and a side-car evaluator train models/job-ps, the evaluator recording evaluations."""
    _, block = page_block("scaling-out.md", "tpuestimator cluster --workers 2 job.yaml")
    # the `tpuestimator cluster` lines run in this process (run_block), their tasks are the
    # product's [sys.executable, ...]: forked_python for this block, as if the page's commands ran
    # with it (7 tasks, each a process of its own without its TensorFlow import; conftest.py)
    with monkeypatch.context() as patched:
        patched.setattr(sys, "executable", forked_python)
        run_block(as_run("scaling-out.md:cluster", block), job_here, shims(job_here, forked_python))
    for model, steps in (("job", CLUSTER_STEPS), ("job-ps", STEPS)):
        assert (job_here / "models" / model / f"ckpt-{steps}.index").exists(), model
    assert list((job_here / "models" / "job-ps" / "eval_sidecar").iterdir())


@pytest.mark.slow
@pytest.mark.real_process
def test_the_scaling_out_pages_hand_made_parameter_server_cluster_block_runs(job_here, forked_python):
    """docs/scaling-out.md, one shell per task by hand: a ps, two workers and the chief (four
    processes) train models/job to its last step with parameter servers; the three background
    tasks stop by themselves once the chief is done, and both workers ran steps."""
    from tpuestimator.runs import run_info

    _, block = page_block("scaling-out.md", "CLUSTER=")
    env = dict(shims(job_here, forked_python), PORT_CHIEF=str(_free_port()), PORT_WORKER0=str(_free_port()),
               PORT_WORKER1=str(_free_port()), PORT_PS=str(_free_port()))
    assert len({env[k] for k in ("PORT_CHIEF", "PORT_WORKER0", "PORT_WORKER1", "PORT_PS")}) == 4
    proc = run_block(as_run("scaling-out.md:by_hand", block), job_here, env, timeout=600)
    model = job_here / "models" / "job"
    assert (model / f"ckpt-{STEPS}.index").exists(), proc.stderr[-4000:]
    assert proc.stderr.count("the chief has finished; stopping") == 3, proc.stderr[-4000:]
    (run,) = [p for p in (job_here / "runs").iterdir() if p.is_dir() and not p.name.startswith(".")]
    info = run_info(str(run))
    properties = info["properties"]
    assert info["status"] == "completed" and properties["strategy"] == "parameter_server", info
    by_worker = dict(pair.split(":") for pair in properties["ps_steps_by_worker"].split(","))
    assert set(by_worker) == {"0", "1"} and all(int(n) > 0 for n in by_worker.values()), properties
    assert sum(int(n) for n in by_worker.values()) == STEPS


def _png_folder(root: Path) -> None:
    """photos/<class>/*.png: three classes of six 8x8 colour images."""
    import tensorflow as tf

    rng = np.random.default_rng(0)
    for name in ("cat", "dog", "owl"):
        (root / "photos" / name).mkdir(parents=True)
        for i in range(6):
            pixels = rng.integers(0, 256, size=(8, 8, 3), dtype=np.uint8)
            (root / "photos" / name / f"{i}.png").write_bytes(tf.io.encode_png(pixels).numpy())


def _idx_pair(root: Path, n: int = 12) -> None:
    """train-images-idx3-ubyte.gz and train-labels-idx1-ubyte.gz: n 28x28 images, labels 0..9."""
    import gzip
    import struct

    rng = np.random.default_rng(1)
    images = rng.integers(0, 256, size=(n, 28, 28), dtype=np.uint8)
    labels = (np.arange(n) % 10).astype(np.uint8)
    (root / "train-images-idx3-ubyte.gz").write_bytes(gzip.compress(struct.pack(">IIII", 0x803, n, 28, 28) + images.tobytes()))
    (root / "train-labels-idx1-ubyte.gz").write_bytes(gzip.compress(struct.pack(">II", 0x801, n) + labels.tobytes()))


@pytest.mark.slow
@pytest.mark.real_process
def test_the_data_pages_commands_run_on_small_inputs(job_here, forked_python):
    """docs/data.md's commands, each on an input made here: an image folder (3 classes of 6 PNGs)
    split into 4 training shards and an eval split, a CSV table, an MNIST IDX pair, Fashion-MNIST's
    first 600 images, the image folder again through Beam's DirectRunner; then inspect, bench,
    a tf.data service started and stopped, the replay of a NaN stop and a run's HTML report."""
    from tpuestimator.cli import main

    if not Path("/usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz").is_file():
        pytest.skip("Fashion-MNIST is not installed: apt-get install dataset-fashion-mnist "
                    "(scripts/setup_system.sh datasets)")
    root = job_here
    _png_folder(root)
    _idx_pair(root)
    rows = ["sepal_length,petal_length,species"] + [f"{5 + i / 10},{1 + (i % 3)},{['setosa', 'virginica'][i % 2]}"
                                                    for i in range(20)]
    (root / "table.csv").write_text("\n".join(rows) + "\n")
    # the NaN stop the page's `debug replay` line replays (debugging.md's diverging training)
    cwd = os.getcwd()
    os.chdir(root)
    try:
        assert main(["train", "job.yaml", "--set", "model=mlp", "--set", "params.optimizer=sgd",
                     "--set", "params.learning_rate=1e10", "--set", "train.iterations_per_loop=2",
                     "--set", "train.save_checkpoints_steps=2"]) == 1
    finally:
        os.chdir(cwd)
    _, block = page_block("data.md", "tpuestimator data write photos/ data/")
    env = dict(shims(root, forked_python), PORT=str(_free_port()))   # `data serve`: a fork
    proc = run_block(as_run("data.md:commands", block), root, env)
    out = proc.stdout
    assert sorted(p.name for p in (root / "data").glob("train-*.tfrecord")) == [
        f"train-{i:05d}-of-00004.tfrecord" for i in range(4)]
    assert list((root / "data").glob("eval-*.tfrecord")), sorted(p.name for p in (root / "data").iterdir())
    for folder in ("data", "data-table", "data-idx", "data-beam"):
        assert (root / folder / "manifest.json").exists(), folder
    manifests = {folder: json.loads((root / folder / "manifest.json").read_text())
                 for folder in ("data", "data-table", "data-idx", "data-beam")}
    for folder in ("data", "data-beam"):                 # 18 images of 3 classes, a fifth held out
        splits, vocabulary = manifests[folder]["splits"], manifests[folder]["vocabulary"]
        assert vocabulary == ["cat", "dog", "owl"] and splits["train"]["count"] + splits["eval"]["count"] == 18, splits
        assert 0 < splits["eval"]["count"] < splits["train"]["count"], splits
    table = manifests["data-table"]
    assert table["label"] == "species" and sum(split["count"] for split in table["splits"].values()) == 20, table
    assert manifests["data-idx"]["format"] == "mnist" and manifests["data-idx"]["splits"]["train"]["count"] == 12
    assert list((root / "fashion").rglob("*.yaml")) and list((root / "fashion").rglob("*.tfrecord"))
    assert "records/s" in out, out[-3000:]
    assert f"tf.data service at grpc://localhost:{env['PORT']} with 2 worker(s)" in out and "tf.data service stopped" in out
    assert re.search(r"op type: +\w+", out), out[-3000:]
    assert "<html" in (root / "report.html").read_text()[:2000].lower()


@pytest.mark.slow
def test_the_migrating_pages_fashion_mnist_block_runs(tmp_path):
    """docs/MIGRATING.md: the fashion_mnist example's records, then the ported TF1 mnist_tpu.py
    (run from a clone's root, as on the page) trains, evaluates every test image once and predicts."""
    if not Path("/usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz").is_file():
        pytest.skip("Fashion-MNIST is not installed: apt-get install dataset-fashion-mnist "
                    "(scripts/setup_system.sh datasets)")
    _, block = page_block("MIGRATING.md", "tpuestimator example fashion_mnist --out fashion")
    (tmp_path / "examples").symlink_to(REPO / "examples")
    proc = run_block(as_run("MIGRATING.md:fashion", block), tmp_path, shims(tmp_path))
    assert "'global_step': 20" in proc.stdout and "'num_examples': 100" in proc.stdout, proc.stdout[-3000:]
    assert (tmp_path / "models" / "mnist_fashion" / "ckpt-20.index").exists()


def test_every_substitution_matches_its_page():
    """A page edit that removes a substituted text fails here first (cheaply), naming it."""
    blocks = {
        "getting-started-python.md:commands": ("getting-started-python.md", 'pip install -e ".[cpu]"', "bash"),
        "getting-started-python.md:python": ("getting-started-python.md", "import tpuestimator as te", "python"),
        "deploying.md:saved_model_cli": ("deploying.md", "saved_model_cli show", "bash"),
        "deploying.md:tflite": ("deploying.md", "tpuestimator export models/digits --format tflite", "bash"),
        "tuning.md:cli": ("tuning.md", "tpuestimator tune digits.yaml", "bash"),
        "tuning.md:python": ("tuning.md", "from tpuestimator.runs import ls_runs", "python"),
        "debugging.md:diverge": ("debugging.md", "tpuestimator example digits --out digits", "bash"),
        "scaling-out.md:service": ("scaling-out.md", "tpuestimator data serve --dispatcher", "bash"),
        "scaling-out.md:cluster": ("scaling-out.md", "tpuestimator cluster --workers 2 job.yaml", "bash"),
        "MIGRATING.md:fashion": ("MIGRATING.md", "tpuestimator example fashion_mnist --out fashion", "bash"),
        "scaling-out.md:by_hand": ("scaling-out.md", "CLUSTER=", "bash"),
        "data.md:commands": ("data.md", "tpuestimator data write photos/ data/", "bash"),
        "getting-started-r.md:install": ("getting-started-r.md", "R CMD INSTALL .", "bash"),
    }
    assert set(blocks) <= set(SUBSTITUTIONS)
    for key, (page, first, lang) in blocks.items():
        as_run(key, page_block(page, first, lang)[1])
