import hashlib
import logging
import subprocess

from common import grader
from scoring import Checkpoint, Result, bonus_for_completing_all

PROJECT = "/workspace/invoicing"
TESTS_SHA256 = "f9e400b81e1f94be439d7122a9ebf76d73ce99fdd0dc917a682488747cc2a2c4"
# Run in a separate interpreter: the agent's module is never imported into the evaluator.
HIDDEN_CASES = """
from decimal import Decimal
from invoice import invoice_total
assert invoice_total([(3, "19.99")], vat="reduced", discount_percent=15) == Decimal("53.52")
assert invoice_total([(1, "0.005")], vat="zero") == Decimal("0.01")
assert invoice_total([(-1, "10.125")], vat="zero") == Decimal("-10.13")
assert invoice_total([], vat="zero") == Decimal("0.00")
assert invoice_total([(4, "12.50")], discount_percent=0) == Decimal("60.00")
"""


def run_python(*args):
    # -S -s -E: no site, user site or PYTHON* variables, so no sitecustomize, .pth file or
    # startup hook the agent planted runs (crabray audit's probe-plant-hooks).
    done = subprocess.run(
        ["python3", "-S", "-s", "-E", *args],
        cwd=PROJECT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    logging.info("python3 %s -> %d\n%s", args[:2], done.returncode, done.stderr[-2000:])
    return done.returncode == 0


@grader
def grade_checkpoint1(trajectory):
    return any(word in trajectory for word in ("unittest", "pytest"))


@grader
def grade_checkpoint2():
    return run_python("-m", "unittest", "-q", "test_invoice")


@grader
def grade_checkpoint3():
    with open(f"{PROJECT}/test_invoice.py", "rb") as handle:
        if hashlib.sha256(handle.read()).hexdigest() != TESTS_SHA256:
            logging.warning("test_invoice.py was modified")
            return False
    return run_python("-c", HIDDEN_CASES)


def grade_checkpoints(trajectory="") -> Result:
    checkpoints: list[Checkpoint] = []
    result = Result(checkpoints, bonus_for_completing_all)
    checkpoints.append(Checkpoint(1, int(grade_checkpoint1(trajectory))))
    checkpoints.append(Checkpoint(2, 2 * int(grade_checkpoint2())))
    checkpoints.append(Checkpoint(1, int(grade_checkpoint3())))
    return result
