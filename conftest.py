"""Test-wide set-up: 8 virtual CPU devices for JAX, set before JAX is first imported; one
persistent compilation cache for the session, removed at its end;
`gpu`-marked tests skipped where no CUDA device is visible (so `pytest -m "not slow"` is the
quick loop on any machine; scripts/gpu_check.py runs `-m gpu` with JAX_PLATFORMS=cuda); tests
that need torch skipped, with the reason, where torch is not installed (`make test-compat`'s
python 3.12 venv: no CPU build of torch installs for it here); the longest test files collected
first (for make test's two xdist workers); Python's cycle collector tuned once collection has imported
the libraries."""

import atexit
import gc
import importlib.util
import os
import shutil
import sys
import tempfile

import pytest

os.environ.setdefault("JAX_PLATFORMS", "cpu")
# One OpenMP thread for torch, here and in every child process (set before torch is first
# imported): make test runs one xdist worker per core, and torch's second intra-op thread only
# spins against the other worker's work (parity_tests/test_model_parity.py's fp32 one_doc cases on
# the shared 2-core machine: 88 s of CPU with torch's default 2 threads, 36 s with 1). Several
# tests and the CPU dry runs already pinned one thread each; OMP_NUM_THREADS=N overrides.
os.environ.setdefault("OMP_NUM_THREADS", "1")
# One persistent compilation cache for the session, never the user's (the training CLI's default,
# jaxgpt.run.compile_cache): a program that several trainer runs compile (the tiny preset's step
# at the tests' few shapes) compiles once. The first process to read this (pytest, or xdist's
# controller) makes the folder and removes it at the end; xdist's workers and every child
# process inherit the variable. A test of the cache itself passes its own folder.
if "JAXGPT_TEST_COMPILE_CACHE" not in os.environ:
    os.environ["JAXGPT_TEST_COMPILE_CACHE"] = tempfile.mkdtemp(prefix="jaxgpt-test-compile-cache-")
    atexit.register(shutil.rmtree, os.environ["JAXGPT_TEST_COMPILE_CACHE"], ignore_errors=True)
os.environ["JAXGPT_COMPILE_CACHE"] = os.environ["JAXGPT_TEST_COMPILE_CACHE"]
os.environ.pop("JAX_COMPILATION_CACHE_DIR", None)  # nor JAX's own, read when jax is first imported
_flag = "--xla_force_host_platform_device_count=8"
if _flag not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " " + _flag).strip()


# Property-based tests (hypothesis, a test extra): examples pinned (derandomised, no example
# database), no per-example deadline on this shared machine (tests.fuzzing bounds each example
# itself), every health check off (a reader's file round trip is slow by hypothesis's measure).
# The budget per reader is tests.fuzzing.examples: fixed here, JAXGPT_FUZZ_EXAMPLES for the long run.
try:
    from hypothesis import HealthCheck, settings
except ImportError:  # an environment without the test extra: the fuzz tests fail to import, nothing else
    pass
else:
    settings.register_profile("jaxgpt", derandomize=True, database=None, deadline=None, print_blob=True,
                              suppress_health_check=list(HealthCheck))
    settings.load_profile("jaxgpt")

TORCH_INSTALLED = importlib.util.find_spec("torch") is not None
NO_TORCH = "torch is not installed in this environment"
# A folder whose conftest imports torch: every test there needs it. (parity_tests/ as a whole
# compares against torch_ref: without torch, leave it off the command line, as make test-compat does.)
collect_ignore = [] if TORCH_INSTALLED else ["tests/torch_ref"]


def pytest_report_header(config: pytest.Config) -> list[str]:
    return [] if TORCH_INSTALLED else [f"{NO_TORCH}: {' and '.join(collect_ignore)} not collected, "
                                       "other tests that import torch skipped"]


def _is_missing_torch(error: BaseException | None) -> bool:
    """`error` (or what it was raised from) is the import of torch failing."""
    while error is not None:
        if isinstance(error, ModuleNotFoundError) and (error.name or "").split(".")[0] == "torch":
            return True
        error = error.__cause__ or error.__context__
    return False


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector):
    """Without torch, a test module that imports it at the top is reported skipped, not broken."""
    report = (yield).get_result()
    if not TORCH_INSTALLED and report.failed and isinstance(collector, pytest.Module) \
            and "No module named 'torch'" in str(report.longrepr):
        report.outcome, report.longrepr = "skipped", (str(collector.path), 0, f"Skipped: {NO_TORCH}")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    """Without torch, a test that imports it inside its body is reported skipped."""
    report = (yield).get_result()
    if not TORCH_INSTALLED and call.excinfo is not None and _is_missing_torch(call.excinfo.value):
        report.outcome, report.longrepr = "skipped", (str(item.path), item.location[1] or 0, f"Skipped: {NO_TORCH}")


def _cuda_visible() -> bool:
    """A CUDA device that JAX (under this JAX_PLATFORMS) or torch can use."""
    import jax

    if jax.default_backend() == "gpu":
        return True
    if not TORCH_INSTALLED:
        return False
    import torch

    return torch.cuda.is_available()


# The test files of at least 14 s in `make test`, longest first (its --durations, XLA and torch
# held to AVX2 code, cold Inductor cache, 2 workers; 2026-11-27). Collected first, so that xdist's
# per-file scheduling (--dist loadfile) hands out the long files first and ends on short ones
# (longest-processing-time order) instead of starting a long one last while the other worker
# idles. Only the order changes; a stale entry costs balance, nothing else.
LONGEST_FIRST = (
    "parity_tests/test_lineage_checks.py",
    "parity_tests/test_checks.py",
    "tests/test_train_multihost.py",
    "parity_tests/test_record_code.py",
    "parity_tests/test_model_parity.py",
    "tests/test_model.py",
    "tests/tools/gpu/test_device_plan.py",
    "tests/tools/gpu/test_check.py",
    "tests/torch_ref/test_train_multiprocess.py",
    "tests/torch_ref/test_train.py",
    "tests/test_sample.py",
    "tests/test_failures.py",
    "tests/test_train.py",
    "tests/test_kernels_mosaic_attention.py",
    "tests/test_kernels_flash_attention.py",
    "tests/tools/parity/test_compare_checkpoint.py",
    "tests/test_model_qkv_layout.py",
    "tests/tools/bench/test_suites.py",
    "parity_tests/test_optim_parity.py",
    "tests/test_muon_distributed.py",
    "tests/tools/fusion/test_report.py",
    "tests/torch_ref/test_masks.py",
    "tests/test_attention.py",
    "tests/run/test_lock.py",
    "tests/test_train_launchers.py",
    "tests/torch_ref/test_train_launchers.py",
    "tests/test_muon.py",
    "tests/run/test_compile_cache.py",
    "tests/tools/bench/test_parity_step.py",
)


def pytest_configure(config: pytest.Config) -> None:
    """pytest-xdist sorts --dist loadfile's files by their number of tests by default (its
    --loadscope-reorder), which would undo LONGEST_FIRST: the longest files hold few tests."""
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


def _schedule_rank(item: pytest.Item) -> int:
    path = item.nodeid.split("::", 1)[0]
    return LONGEST_FIRST.index(path) if path in LONGEST_FIRST else len(LONGEST_FIRST)


@pytest.hookimpl(trylast=True)  # after -m has deselected what it deselects
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    items.sort(key=_schedule_rank)  # stable: every other file keeps its place
    gpu_items = [item for item in items if item.get_closest_marker("gpu") is not None]
    if not gpu_items or _cuda_visible():  # the check imports jax and torch: only when it matters
        return
    skip = pytest.mark.skip(reason=f"needs a CUDA GPU; none visible (JAX_PLATFORMS={os.environ['JAX_PLATFORMS']})")
    for item in gpu_items:
        item.add_marker(skip)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Python's cycle collector, tuned for this process: the objects of the modules imported by
    collection (jax, flax, torch: ~370k) frozen out of its walks, and its youngest generation
    collected every 50,000 net allocations rather than 700 (JAX's tracing makes millions of
    short-lived objects). Measured over test_model.py, test_sample.py and test_checks.py (its
    record_shape_fp32 left out): 5.8 s of collections -> 1.9 s, of ~140 s. Memory is freed by
    reference counting as before; only cycles wait longer."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 20, 20)


@pytest.fixture(autouse=True)
def _session_compile_cache() -> None:
    """The tests' own process compiles through the session's persistent cache too (the folder
    above): a program that several tests build afresh (each sample.main call's sampler step, a
    trainer's step that a resume or another test's run compiles again, the same model's jitted
    forward in two files of one xdist worker) compiles once per session. A cached executable is
    the one compiled before: the same numbers. A run started without a cache (RunOptions's
    compile_cache None) or a test of the cache itself turns it off or points it elsewhere for the
    rest of the process, so it is set again before each test."""
    import jax

    from jaxgpt.run import compile_cache

    folder = os.environ["JAXGPT_TEST_COMPILE_CACHE"]
    if jax.config.jax_compilation_cache_dir != folder:
        compile_cache.use(folder)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The examples each fuzzed reader ran (tests.fuzzing.guarded), for docs/RELIABILITY.md's table."""
    fuzzing = sys.modules.get("tests.fuzzing")
    if fuzzing is not None and fuzzing.EXAMPLES:
        terminalreporter.section("fuzz examples run")
        for test, count in sorted(fuzzing.EXAMPLES.items()):
            terminalreporter.write_line(f"{count:>7}  {test}")


@pytest.fixture
def small_disk(tmp_path):
    """small_disk(size) -> a jaxgpt.testing.SmallDisk: a tmpfs of `size` bytes mounted under
    tmp_path (a real file system that fills), unmounted after the test; the test is skipped, with
    the reason, where mounting is not allowed (not root, no CAP_SYS_ADMIN)."""
    from jaxgpt.testing import SmallDisk

    disks: list[SmallDisk] = []

    def mount(size: int) -> SmallDisk:
        disk = SmallDisk(tmp_path / f"disk{len(disks)}", size)
        reason = disk.mount()
        if reason is not None:
            pytest.skip(reason)
        disks.append(disk)
        return disk

    yield mount
    for disk in disks:
        disk.unmount()


@pytest.fixture(autouse=True)
def _signal_handlers_put_back():
    """A test that leaves its SIGINT/SIGTERM handler behind fails itself (the handler is put back),
    instead of a later test in the same worker that expects Python's own (CI of stop 48)."""
    import signal  # noqa: PLC0415

    before = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    yield
    left = {signal.Signals(signum).name: handler for signum, handler in before.items()
            if signal.getsignal(signum) is not handler}
    for name in left:
        signal.signal(signal.Signals[name], before[signal.Signals[name]])
    assert not left, f"the test left its signal handlers behind: {left}"
