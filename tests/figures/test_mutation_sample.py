"""The suite's bounded mutation run: a tenth of the mutants (those numbered ...7) of the
modules whose guarantees the docs cite, in a scratch copy of the tree, against their unit
tests. It fails when the sample's kill rate falls below the floor the full run sets
(docs/testing.md has the full table and its command); ``OW_MUTATION_SAMPLE=3`` draws another
tenth."""

from __future__ import annotations

import os

import pytest

from tests.mutation.run import run, table

pytestmark = pytest.mark.slow

# A tenth of each module's mutants; a twentieth of the scheduler's (each runs many tests).
SAMPLES = {
    "policies": "7",
    "policies.builtin": "7",
    "policies.preemption": "7",
    "policies.stats": "7",
    "invoker.scheduler.calls": "[13579]7",
    "invoker.scheduler.cores": "[13579]7",
    "invoker.scheduler.groups": "[13579]7",
    "invoker.scheduler.preemption": "[13579]7",
    "invoker.scheduler.node": "[13579]7",
    "invoker.offsets": "7",
    "whisk.supervisor": "7",
    "containers.placement": "7",
}
# Killed / (killed + survived) over the sample. On 2026-12-05 it was 87 of 89 (97.8 %; the
# ...3 tenth: 108 of 112, 96.4 %), 66 of 82 (80 %) on 2026-12-02; the floor leaves room for
# new code's first mutants: raise it as survivors are killed.
FLOOR = 0.9


@pytest.mark.timeout(1200)
def test_a_sample_of_the_cores_mutants_is_killed(tmp_path):
    digit = os.environ.get("OW_MUTATION_SAMPLE", "7")
    samples = {m: s.replace("7", digit) for m, s in SAMPLES.items()}
    tallies = run(tmp_path, samples, timeout_s=1100)
    killed = sum(t.killed for t in tallies.values())
    judged = killed + sum(t.survived for t in tallies.values())
    assert judged >= 40, f"too few mutants sampled:\n{table(tallies)}"
    assert killed / judged >= FLOOR, (
        f"{killed} of {judged} sampled mutants killed, under {FLOOR:.0%}; `mutmut show NAME` "
        f"in {tmp_path} prints one; the survivors: `mutmut results` there\n{table(tallies)}"
    )
