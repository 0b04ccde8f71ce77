"""Temperature calibration along the line: the fitted inverse temperature is the cross-entropy's
minimiser, a calibrated barrier rescales each model's logits by it (accuracy unchanged), and the
plain barrier's cache key does not move."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from landscape.experiments import barrier
from landscape.experiments.barriers.request import calibration_split, seeds_request
from landscape.experiments.evaluation import fit_temperature, mix
from landscape.models import forward
from landscape.sources import Source
from landscape.sources.zoo import available_seeds


def test_the_fitted_temperature_is_the_minimiser_of_the_cross_entropy():
    # two classes at logits (0, 1) everywhere, class 1 in a fraction p of rows: the best β
    # makes softmax(β·z)₁ = p, so β = log(p / (1 − p))
    for p in (0.6, 0.9, 0.99):
        n = 1000
        y = (torch.arange(n) < round(p * n)).long()
        z = torch.tensor([[0.0, 1.0]]).expand(n, 2)
        assert fit_temperature(z, y) == pytest.approx(math.log(p / (1 - p)), rel=1e-9)
    # random logits: the derivative vanishes there and neighbours are no better
    g = torch.Generator().manual_seed(0)
    z = 3 * torch.randn(500, 7, generator=g, dtype=torch.float64)
    y = torch.randint(0, 7, (500,), generator=g)
    beta = fit_temperature(z, y)

    def f(b):
        return F.cross_entropy(b * z, y).item()

    assert f(beta) <= min(f(beta * 1.01), f(beta * 0.99))
    assert 0 < beta < 1  # labels unrelated to the logits: cool them down


@pytest.fixture
def cache_env(tmp_path, monkeypatch):
    monkeypatch.setenv("LANDSCAPE_CACHE", str(tmp_path / "cache"))
    if len(available_seeds("mlp-digits")) < 2:
        pytest.skip("needs two mlp-digits seeds")


def test_a_calibrated_line_rescales_each_model_by_its_fitted_temperature(cache_env):
    plain = barrier("mlp-digits", (0, 1), "naive", "perm", points=5)
    cal = barrier("mlp-digits", (0, 1), "naive", "perm", points=5, calibrate=True)
    assert cal["calibrated"] and len(cal["temperatures"]) == 5 and "calibrated" not in plain
    assert cal["accuracy"] == plain["accuracy"]  # a positive scale keeps every argmax
    # λ = 0.5 by hand: the midpoint's temperature fitted on A's training slice, its test loss
    src = Source("mlp-digits", 0)
    a, b = src.load(), Source("mlp-digits", 1).load()
    data = src.data_of(a)
    mid = {k: v[0] for k, v in mix([a.params, b.params], torch.tensor([[0.5, 0.5]])).items()}
    calib = calibration_split(data)
    beta = fit_temperature(forward(a.cfg, mid, calib.inputs), calib.targets)
    assert cal["temperatures"][2] == pytest.approx(beta, rel=1e-6)
    test = data.evaluation("test")
    loss = F.cross_entropy(beta * forward(a.cfg, mid, test.inputs).double(), test.targets).item()
    assert cal["loss"][2] == pytest.approx(loss, rel=1e-5)
    assert cal["loss"][2] != pytest.approx(plain["loss"][2], rel=1e-3)


def test_the_plain_request_keeps_its_cache_key(cache_env):
    src = Source("mlp-digits", 0)
    a, b = src.load(), Source("mlp-digits", 1).load()
    data = src.data_of(a)
    plain = seeds_request("mlp-digits", (0, 1), "naive", "perm").key(a, b, data)
    cal = seeds_request("mlp-digits", (0, 1), "naive", "perm", calibrate=True).key(a, b, data)
    assert "calibrate" not in plain and cal == {**plain, "calibrate": cal["calibrate"]}


def test_the_command_line_calibrates_on_request(cache_env, capsys):
    import json

    from landscape.cli import main

    assert main(["barrier", "mlp-digits", "--seeds", "0", "1", "--method", "naive",
                 "--points", "3", "--calibrate", "--json"]) == 0  # fmt: skip
    r = json.loads(capsys.readouterr().out)
    assert r["calibrated"] and len(r["temperatures"]) == 3
