"""pytest plugin for scripts/pyopencl-suite.sh: ends a hung test.

pytest-timeout needs the GIL to act, and a test deadlocked inside an OpenCL
call can hold it (pyopencl does not release it around every call), so the
whole worker freezes. faulthandler's watchdog is a C thread that needs no
GIL: it dumps the stacks and exits the worker, which pytest-xdist reports as
a failed test ("worker crashed") and replaces.
"""

import faulthandler
import os
import sys

import pytest

TIMEOUT = float(os.environ.get("PYOPENCL_SUITE_HARD_TIMEOUT", "360"))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    faulthandler.dump_traceback_later(TIMEOUT, exit=True, file=sys.stderr)
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()
