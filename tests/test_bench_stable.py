"""The bench's stable timings (evals/bench/stable.py): test durations in command output are fixed, the
rest of the output and the environment are untouched."""

from __future__ import annotations

import sys

from clover.evals.bench.stable import FIXED, FIXED_ADDRESS, StableTimings, stable_output
from clover.tools.environment import LocalEnvironment


def test_durations_are_fixed_and_nothing_else_changes():
    assert (
        stable_output("==== 2 failed, 3 passed in 0.52s ====") == f"==== 2 failed, 3 passed in {FIXED} ===="
    )
    assert stable_output("1 passed in 61.20s (0:01:01)") == f"1 passed in {FIXED}"
    assert stable_output("Ran 3 tests in 0.001s\n\nOK") == f"Ran 3 tests in {FIXED}\n\nOK"
    assert stable_output("1 error in 0.10s") == f"1 error in {FIXED}"
    for same in (
        "def f(s): return s  # called in 2s",
        "took 3.5s",
        "passed in review",
        "x = 1\n",
        "mask 0x7fce64",
    ):
        assert stable_output(same) == same


def test_object_addresses_are_fixed():
    line = "E    +    where item_count = <cart.Cart object at 0x7fce64784f50>.item_count"
    assert (
        stable_output(line)
        == f"E    +    where item_count = <cart.Cart object at {FIXED_ADDRESS}>.item_count"
    )


def test_a_real_pytest_run_reads_the_same_twice(tmp_path):
    (tmp_path / "test_a.py").write_text(
        "import time\n\nclass C:\n    pass\n\ndef test_a():\n    time.sleep(0.02)\n\ndef test_b():\n    "
        "assert C() is None\n"
    )
    env = StableTimings(LocalEnvironment(str(tmp_path), timeout=60))
    command = f"{sys.executable} -m pytest -q -p no:cacheprovider test_a.py"
    first, second = env.execute(command), env.execute(command)
    assert f"1 failed, 1 passed in {FIXED}" in first.output and f"object at {FIXED_ADDRESS}>" in first.output
    assert first.output == second.output
    assert env.root == str(tmp_path.resolve())  # everything else is the wrapped environment's
    assert env.read_file("test_a.py").startswith(b"import time")
    env.on_output = print  # attributes set on the wrapper land on the wrapped environment
    assert env._env.on_output is print
