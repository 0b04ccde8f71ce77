"""``--option KEY=VALUE``: any setting a matching method declares, typed from its declaration,
on the commands that take a method's settings; the learned flags are its aliases."""

from __future__ import annotations

import dataclasses
import json
import re

import pytest

import landscape.cli as cli
from landscape.cli.parser import build_parser
from landscape.cli.running import matching_settings
from landscape.matching import METHODS_BY_NAME

BARRIER = ["barrier", "mlp-digits", "--seeds", "0", "1", "--points", "3"]


@pytest.fixture
def _stores(tmp_path, monkeypatch):
    monkeypatch.setenv("LANDSCAPE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("LANDSCAPE_FAMILIES", str(tmp_path / "families"))


def settings(*argv: str) -> dict:
    return matching_settings(build_parser().parse_args(list(argv)))


@pytest.fixture
def heard(monkeypatch):
    """The settings each run of a method is given (the method's entry swapped for one that
    records them and runs the real one)."""
    seen: list = []
    for name, entry in list(METHODS_BY_NAME.items()):

        def run(*args, _real=entry.run, **kwargs):
            seen.append(args[4])  # (cfg, a, b, group, options)
            return _real(*args, **kwargs)

        monkeypatch.setitem(METHODS_BY_NAME, name, dataclasses.replace(entry, run=run))
    return seen


def test_an_option_reaches_the_method_typed_from_its_declaration(capsys, _stores, heard):
    argv = [*BARRIER, "--method", "weight", "--group", "perm", "--json"]
    assert cli.main([*argv, "--option", "max_rounds=2", "--option", "within_heads=false"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["options"] == {"max_rounds": 2, "within_heads": False}
    (options,) = heard
    assert (options.max_rounds, options.within_heads, options.tol) == (2, False, 1e-4)
    # the method's default said explicitly is the default's run: the cached entry
    assert cli.main([*argv, "--option", "max_rounds=50"]) == 0
    default = json.loads(capsys.readouterr().out)
    assert "options" not in default and default["cache_key"] != out["cache_key"]
    assert heard[-1].max_rounds == 50


# a setting of each method that has any, said away from its default, as the run must see it
SAID = {"activation": ("batch=64", "batch", 64), "weight": ("tol=0.01", "tol", 0.01),
        "learned": ("steps=2", "steps", 2)}  # fmt: skip


def test_every_method_with_settings_has_one_said_here():
    assert {m.name for m in METHODS_BY_NAME.values() if m.declared()} == set(SAID)


@pytest.mark.parametrize("method", list(SAID))
def test_an_option_reaches_every_method(capsys, _stores, heard, method):
    text, name, value = SAID[method]
    argv = [*BARRIER, "--method", method, "--group", "perm", "--option", text, "--json"]
    assert cli.main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["options"] == {name: value} and out["aligns"] is True
    mine = [o for o in heard if isinstance(o, METHODS_BY_NAME[method].options)]
    assert mine and getattr(mine[-1], name) == value


@pytest.mark.parametrize("method", list(METHODS_BY_NAME))
def test_option_help_lists_the_methods_declared_settings(capsys, heard, method):
    assert cli.main([*BARRIER, "--method", method, "--option", "help"]) == 0
    out = capsys.readouterr().out
    declared = METHODS_BY_NAME[method].declared()
    assert f"(--method {method})" in out
    for s in declared:
        line = next(x for x in out.splitlines() if x.split()[:1] == [s.name])
        assert s.kind() in line and s.help in line
    if not declared:
        assert "has no settings" in out
    assert heard == []  # listed, not run


def test_options_of_every_method_are_typed_and_the_learned_flags_are_aliases():
    assert settings(*BARRIER, "--method", "activation", "--option", "batch=64", "--option",
                    "drop_first=yes") == {"batch": 64, "drop_first": True}  # fmt: skip
    assert settings(*BARRIER, "--method", "weight", "--option", "tol=1e-6") == {"tol": 1e-6}
    learned = [*BARRIER, "--method", "learned"]
    assert settings(*learned, "--option", "steps=3", "--option", "batch_size=none",
                    "--option", "lam=u(0.2,0.8)") == {"steps": 3, "batch_size": None,
                                               "lam": "u(0.2,0.8)"}  # fmt: skip
    assert settings(*learned, "--option", "steps=3") == settings(*learned, "--learned-steps", "3")
    assert settings(*learned, "--option", "lr=0.1") == {}  # the default, left out
    # the table's learned rows take them too (it has no --method)
    table = ["table", "mlp-digits", "--option", "eval_every=5"]
    assert settings(*table) == {"eval_every": 5}
    for command in (["curve", "mlp-digits", "--seeds", "0", "1"],
                    ["kv-sharing", "llama-shakespeare-d128"],
                    ["merges", "mlp-digits", "--seeds", "0", "1"],
                    ["curvature", "mlp-digits", "--seeds", "0", "1"]):  # fmt: skip
        assert settings(*command, "--method", "weight", "--option", "max_rounds=7") == {
            "max_rounds": 7}  # fmt: skip


@pytest.mark.parametrize(
    "extra,match",
    [
        pytest.param(["--method", "weight", "--option", "rounds=3"],
                     "--option: unknown setting 'rounds' of weight matching; its settings: "
                     "max_rounds, tol, within_heads", id="unknown-key"),
        pytest.param(["--method", "naive", "--option", "steps=3"],
                     "unknown setting 'steps' of .*; its settings: none", id="naive-has-none"),
        pytest.param(["--method", "weight", "--option", "steps=3"],
                     "unknown setting 'steps' of weight matching; its settings: max_rounds, tol, "
                     "within_heads; 'steps' is a setting of learned matching \\(--method "
                     "learned\\)", id="another-methods-key"),
        pytest.param(["--method", "learned", "--option", "max_rounds=3"],
                     "its settings: init, lam, steps, .*; 'max_rounds' is a setting of weight "
                     "matching", id="weights-key-to-learned"),
        pytest.param(["--method", "weight", "--option", "max_rounds=many"],
                     "bad value 'many' for the setting 'max_rounds' of weight matching: expected "
                     "a whole number, default 50", id="not-a-number"),
        pytest.param(["--method", "weight", "--option", "within_heads=maybe"],
                     "expected a flag \\(true or false\\), default True", id="not-a-flag"),
        pytest.param(["--method", "weight", "--option", "tol=nan"], "expected a finite number",
                     id="nan"),
        pytest.param(["--method", "learned", "--option", "steps=0"],
                     "--option steps=0: must be at least 1", id="learned-bound"),
        pytest.param(["--method", "learned", "--option", "init=random"],
                     "--option init=random: expected one of weight, identity", id="learned-init"),
        pytest.param(["--method", "learned", "--learned-steps", "3", "--option", "steps=4"],
                     "--learned-steps and --option steps set one setting", id="said-twice"),
        pytest.param(["--method", "weight", "--option", "tol=1", "--option", "tol=2"],
                     "--option tol: given twice", id="key-twice"),
        pytest.param(["--method", "learned", "--option", "space=circuits"],
                     "--option space: learned matching's space is the merge space",
                     id="learned-space"),
    ],
)  # fmt: skip
def test_a_bad_option_is_refused_in_one_line_before_work(capsys, _stores, heard, extra, match):
    assert cli.main([*BARRIER, *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("landscape: error:"), err
    assert re.search(match, err), err
    assert heard == []  # refused before any matching


@pytest.mark.parametrize("value", ["steps", "=3", " steps=3"])
def test_an_option_that_is_not_key_equals_value_is_refused_by_the_parser(capsys, heard, value):
    assert cli.main([*BARRIER, "--option", value]) == 2
    assert "argument --option: expected KEY=VALUE" in capsys.readouterr().err
    assert heard == []
