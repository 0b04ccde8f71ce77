"""``--executor ray`` of controls, triangle and gauge-sweep on a local two-worker Ray cluster:
the same JSON as the serial run, bit for bit (timings aside), and every result in the driver's
cache afterwards. The workers keep their own cache, as on another machine, so everything the
driver reads has come back from them."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from landscape.cli import main
from landscape.errors import LandscapeError
from landscape.experiments import RunContext, TriangleOptions, triangle
from landscape.experiments.barriers.controls import ControlsOptions, controls_table
from landscape.experiments.gauge.runner import GaugeOptions, gauge_sweep
from landscape.experiments.sweeps import Call, run
from landscape.store.cache import Cache

TIMES = {"seconds", "matching_seconds", "eval_seconds"}  # how long it took, not what was measured

TRIANGLE = ["triangle", "mlp-digits", "--seeds", "0", "1", "2", "--resolution", "4"]
GAUGE = ["gauge-sweep", "mlp-digits", "--seed", "0", "--draws", "2", "--steps", "0", "10",
         "--trajectory-steps", "20", "--trajectory-every", "10"]  # fmt: skip
# learned matching rounds differently when B's parameters come in another order: a checkpoint
# trained by one task must reach the next in the order a serial run holds it in
CONTROLS = {"controls": ("real", "barely-trained"), "points": 5,
            "rows": (("naive", "perm"), ("weight", "orth"), ("learned", "perm"))}  # fmt: skip


def _reads_only(kind: str, inputs: dict[str, Any], cache: Cache) -> tuple[Any, bool]:
    entry = cache.get(kind, cache.key(kind, inputs))
    assert entry is not None, f"this process computed a {kind} entry itself"
    return entry, True


class DiskOnly(Cache):
    """The driver's cache, read-only: anything not in it fails the test."""

    def get_or_compute(self, kind: str, inputs: dict[str, Any], compute: Any) -> Any:
        return _reads_only(kind, inputs, self)


def _measured(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _measured(v) for k, v in obj.items() if k not in TIMES}
    if isinstance(obj, list):
        return [_measured(v) for v in obj]
    return obj


@pytest.fixture(scope="module")
def workers(tmp_path_factory) -> Path:
    """A local Ray cluster of two workers whose cache is not the driver's (its folder)."""
    ray = pytest.importorskip("ray")
    root = tmp_path_factory.mktemp("workers")
    env = {"LANDSCAPE_CACHE": str(root), "LANDSCAPE_THREADS": "1"}
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": env})  # fmt: skip
    yield root
    ray.shutdown()


def _cli(argv: list[str], cache: Path, capsys, monkeypatch, reads_only: bool = False
         ) -> dict[str, Any]:  # fmt: skip
    monkeypatch.setenv("LANDSCAPE_CACHE", str(cache))
    with monkeypatch.context() as m:
        if reads_only:
            m.setattr(Cache, "get_or_compute", lambda self, kind, inputs, compute:
                      _reads_only(kind, inputs, self))  # fmt: skip
        code = main([*argv, "--json", "--threads", "1"])
    assert code == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


@pytest.mark.slow
@pytest.mark.parametrize("argv", [
    pytest.param([*TRIANGLE, "--method", "weight", "--group", "orth"], id="triangle-edges"),
    pytest.param([*TRIANGLE, "--method", "learned", "--group", "orth", "--joint"],
                 id="triangle-joint"),
    pytest.param(GAUGE, id="gauge-sweep"),
])  # fmt: skip
def test_ray_gives_the_serial_json(argv, workers, tmp_path, capsys, monkeypatch):
    serial = _cli(argv, tmp_path / "serial", capsys, monkeypatch)
    driver = tmp_path / "driver"
    # the driver only reads: every alignment, grid and draw came back from the workers
    distributed = _cli([*argv, "--executor", "ray"], driver, capsys, monkeypatch,
                       reads_only=True)  # fmt: skip
    assert json.dumps(_measured(distributed)) == json.dumps(_measured(serial))
    # a rerun on this machine reads every result from its cache, without Ray
    if argv[0] == "triangle":
        method, group = argv[argv.index("--method") + 1], argv[argv.index("--group") + 1]
        again = triangle("mlp-digits", (0, 1, 2), method, group,
                         TriangleOptions(resolution=4, joint="--joint" in argv),
                         context=RunContext(cache=DiskOnly(driver)))  # fmt: skip
        assert again.pop("cached") and not distributed.pop("cached") and not serial.pop("cached")
    else:
        again = gauge_sweep("mlp-digits", 0, GaugeOptions(draws=2, steps_grid=(0, 10),
                                                          trajectory_steps=20, trajectory_every=10),
                            context=RunContext(cache=DiskOnly(driver)))  # fmt: skip
        assert again == distributed
    assert json.dumps(_measured(again)) == json.dumps(_measured(serial))


@pytest.mark.slow
def test_ray_controls_give_the_serial_table(workers, tmp_path):
    """Controls through the library: the command line has no option for fewer controls, and
    two (one trained in 20 steps) keep the test short. The trained one reaches its rows as
    trained (a serial run that trains it uses it so)."""
    serial = controls_table("mlp-digits", 1, ControlsOptions(**CONTROLS),
                            context=RunContext(cache=Cache(tmp_path / "serial"), threads=1))
    # the driver only reads: the trained variant and every barrier came back from the workers
    distributed = controls_table("mlp-digits", 1, ControlsOptions(executor="ray", **CONTROLS),
                                 context=RunContext(cache=DiskOnly(tmp_path / "driver"),
                                                    threads=1))  # fmt: skip
    assert json.dumps(_measured(distributed)) == json.dumps(_measured(serial))
    assert any(meta.get("variant") == "early"
               for _, meta in Cache(tmp_path / "driver").metas("checkpoint"))  # fmt: skip


def _fails(*, cache: Cache) -> None:
    raise LandscapeError("no such thing")


@pytest.mark.slow
def test_a_unit_that_fails_on_a_worker_is_one_line_naming_it(workers, tmp_path):
    with pytest.raises(LandscapeError, match="the unit under test failed on a Ray worker: "
                                             "no such thing"):  # fmt: skip
        run([Call(_fails, what="the unit under test")], Cache(tmp_path))


@pytest.mark.parametrize("argv", [
    ["controls", "mlp-digits"], TRIANGLE, GAUGE,
])  # fmt: skip
def test_without_ray_the_flag_says_how_to_install_it(argv, capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("LANDSCAPE_CACHE", str(tmp_path))
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray fails
    assert main([*argv, "--executor", "ray"]) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if "error" in line]
    assert len(errors) == 1 and "pip install 'landscape[ray]'" in errors[0]
    assert main([*argv, "--address", "auto"]) == 2
    assert "use it with --executor ray" in capsys.readouterr().err


def _closed_port() -> int:
    """A local port nothing listens at (bound, then released)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("argv", [
    ["gauge-sweep", "mlp-digits", "--parts", "table"], ["controls", "mlp-digits"], TRIANGLE,
])  # fmt: skip
def test_an_address_nothing_answers_at_is_one_line_at_once(argv, capsys, monkeypatch, tmp_path):
    """Formerly Ray retried for minutes with a warning every few seconds before its error."""
    import time

    pytest.importorskip("ray")
    monkeypatch.setenv("LANDSCAPE_CACHE", str(tmp_path))
    address = f"127.0.0.1:{_closed_port()}"
    t0 = time.perf_counter()
    assert main([*argv, "--executor", "ray", "--address", address]) == 2
    assert time.perf_counter() - t0 < 30
    err = [line.strip() for line in capsys.readouterr().err.splitlines()]
    bars = [line for line in err if "%|" in line]  # the command's own progress bar, at 0%
    said = [line for line in err if line and line not in bars]
    assert all(line.startswith("landscape: ") for line in said), said  # nothing from Ray
    err = said
    errors = [line for line in err if line.startswith("landscape: error:")]
    assert len(errors) == 1 and address in errors[0] and "--address" in errors[0], err


@pytest.mark.parametrize("address,fragment", [
    ("127.0.0.1", "host:port"), ("127.0.0.1:99999", "host:port"), ("ray://", "host:port"),
    ("no-such-host.invalid:6379", "no-such-host.invalid:6379"),
])  # fmt: skip
def test_an_address_that_is_not_one_is_refused_in_one_line(address, fragment):
    from landscape.experiments.sweeps import check_executor

    pytest.importorskip("ray")
    with pytest.raises(LandscapeError, match=fragment.replace(".", r"\.")) as err:
        check_executor("ray", address)
    assert "\n" not in str(err.value)
