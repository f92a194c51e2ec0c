"""Call-sequence generation: counts, uniform window, seeded determinism, function mix."""

from __future__ import annotations

from collections import Counter

import pytest

from sebs_wrappers.scenario import call_count, split_counts, uniform_calls

ACTIONS = ["a", "b", "c"]
PARAMS = {"a": {"x": 1}, "b": {}, "c": {"y": [1]}}


def gen(**kw):
    base = dict(intensity=120, cores=2, window_s=60.0, seed=7, repetition=0)
    return uniform_calls(ACTIONS, PARAMS, **{**base, **kw})


def test_counts_follow_intensity_cores_and_window() -> None:
    assert call_count(120, 2, 60) == 240  # N = I * C for the paper's 60 s window
    assert call_count(30, 18, 60) == 540
    assert call_count(120, 2, 15) == 60  # same rate in a shorter window
    assert len(gen()) == 240
    assert len(gen(intensity=30, cores=4)) == 120


def test_times_are_sorted_inside_the_window_and_spread() -> None:
    calls = gen(window_s=10.0, intensity=600)
    times = [c.t for c in calls]
    assert times == sorted(times)
    assert all(0.0 <= t < 10.0 for t in times)
    # uniform: every second of the window gets a share (expected 20 of 200)
    per_second = Counter(int(t) for t in times)
    assert set(per_second) == set(range(10))
    assert all(8 <= n <= 35 for n in per_second.values())
    assert [c.seq for c in calls] == list(range(len(calls)))


def test_seeded_determinism_and_variation() -> None:
    assert gen() == gen()
    assert [c.t for c in gen()] != [c.t for c in gen(repetition=1)]
    assert [c.t for c in gen()] != [c.t for c in gen(seed=8)]
    assert [c.action for c in gen()] != [c.action for c in gen(repetition=1)]


def test_equal_mix_and_params_attached() -> None:
    calls = gen()
    assert Counter(c.action for c in calls) == {"a": 80, "b": 80, "c": 80}
    assert all(c.params == PARAMS[c.action] for c in calls)
    calls[0].params["mutated"] = True
    assert "mutated" not in PARAMS[calls[0].action]


def test_weighted_mix() -> None:
    calls = gen(weights=[2, 1, 1])
    assert Counter(c.action for c in calls) == {"a": 120, "b": 60, "c": 60}


@pytest.mark.parametrize(
    ("n", "weights", "expected"),
    [
        (10, [1, 1, 1], [4, 3, 3]),
        (7, [1, 0], [7, 0]),
        (0, [1, 2], [0, 0]),
        (5, [1, 1, 2], [1, 1, 3]),
    ],
)
def test_split_counts(n: int, weights: list[float], expected: list[int]) -> None:
    assert split_counts(n, weights) == expected


def test_bad_input() -> None:
    with pytest.raises(ValueError):
        split_counts(3, [0, 0])
    with pytest.raises(ValueError):
        uniform_calls([], {}, intensity=1, cores=1)
    with pytest.raises(ValueError):
        gen(window_s=0)


# --- policy labels: POLICY[+preempt][@CORES] (the live capacity point: fc@1 openwhisk@2) ---


def experiment_config(*argv: str):
    import argparse

    from sebs_wrappers import experiment

    parser = argparse.ArgumentParser()
    experiment.add_arguments(parser)
    return experiment.config_from_args(parser.parse_args(list(argv)))


@pytest.mark.parametrize(
    ("label", "policy", "preempt", "cores"),
    [
        ("fc", "fc", False, None),
        ("sept+preempt", "sept", True, None),
        ("fc@1", "fc", False, 1),
        ("openwhisk@2", "openwhisk", False, 2),
        ("fc+preempt@3", "fc", True, 3),
    ],
)
def test_a_label_names_policy_preemption_and_cores(
    label: str, policy: str, preempt: bool, cores: int | None
) -> None:
    from sebs_wrappers.labels import PolicyLabel, parse_label

    parsed = parse_label(label)
    assert parsed == PolicyLabel(policy, preempt, cores)
    assert str(parsed) == label  # labels name result rows and run directories as written


@pytest.mark.parametrize("label", ["fc@0", "fc@", "fc@x", "@2", "fc@1+preempt", "fc@1@2", ""])
def test_malformed_labels_are_refused(label: str) -> None:
    from sebs_wrappers.labels import parse_label

    with pytest.raises(ValueError):
        parse_label(label)


def test_each_label_gets_its_own_cores_on_the_same_calls(tmp_path) -> None:
    """FC on one action core against the baseline on two: the platforms differ only in
    their cores (and policy); the call sequence is made for --cores, the same for both."""
    from sebs_wrappers.experiment import make_platform, platform_cores

    cfg = experiment_config(
        "--policies", "fc@1", "openwhisk@2", "sept", "--cores", "2", "--out", str(tmp_path)
    )
    assert cfg.policies == ["fc@1", "openwhisk@2", "sept"] and cfg.cores == 2
    assert [platform_cores(cfg, p) for p in cfg.policies] == [1, 2, 2]
    argv = {p: make_platform(cfg, p).proc.argv for p in cfg.policies}
    for label, policy, cores in (("fc@1", "fc", "1"), ("openwhisk@2", "openwhisk", "2")):
        assert argv[label][argv[label].index("--policy") + 1] == policy
        assert argv[label][argv[label].index("--action-cores") + 1] == cores
        assert "--preempt" not in argv[label]
        assert argv[label][argv[label].index("--state-dir") + 1].endswith(f"platform-{label}")


def test_preempt_flag_and_bad_labels_with_cores() -> None:
    cfg = experiment_config("--policies", "fc@1", "openwhisk@2", "--preempt")
    assert cfg.policies == ["fc+preempt@1", "openwhisk+preempt@2"]
    from sebs_wrappers.experiment import make_platform

    argv = make_platform(cfg, "fc+preempt@1").proc.argv
    assert "--preempt" in argv and argv[argv.index("--action-cores") + 1] == "1"
    with pytest.raises(ValueError, match="fc@0"):
        experiment_config("--policies", "fc@0")
    with pytest.raises(ValueError, match="unknown policy"):
        experiment_config("--policies", "fcc@1")


def test_ratios_are_taken_against_the_baseline_label_that_ran() -> None:
    from sebs_wrappers.labels import baseline_label

    assert baseline_label(["fc@1", "openwhisk@2", "fc"]) == "openwhisk@2"
    assert baseline_label(["openwhisk@2", "openwhisk", "fc"]) == "openwhisk"
    assert baseline_label(["openwhisk+preempt", "fc"]) == "openwhisk"  # none ran: no ratios
