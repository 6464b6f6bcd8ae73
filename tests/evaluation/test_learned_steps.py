"""The step screen's learned reader is trained on what the repository holds: the
steps corpus's dev split and the everyday talk of the other corpora's dev splits,
nothing of calibration or heldout (evaluation.learn)."""

from __future__ import annotations

from pathlib import Path

import pytest

from coachbus.learned import digest, shipped
from coachbus.safety.steps import CATALOGUE
from evaluation import learn

pytestmark = pytest.mark.unit

DATA = Path(__file__).resolve().parents[1] / "data" / "eval"


def test_the_shipped_reader_was_trained_on_the_dev_split_as_it_is() -> None:
    model = shipped("steps")
    assert model is not None
    source = (DATA / "steps" / "dev.jsonl").read_text(encoding="utf-8")
    talk = learn.everyday_negatives(DATA)
    stale = "coachbus/content/learned/steps.json is stale: run `coachbus eval steps --train`"
    assert model.trained_on["digest"] == digest(source), stale
    assert model.trained_on["everyday_digest"] == digest("\n".join(talk)), stale
    assert model.trained_on["split"] == "dev"
    assert set(model.labels) == set(CATALOGUE)


def test_everyday_talk_comes_from_one_split_only() -> None:
    dev = set(learn.everyday(DATA, "dev"))
    held = set(learn.everyday(DATA, "heldout"))
    assert dev and held
    assert set(learn.everyday_negatives(DATA)) <= dev


def test_train_refuses_every_corpus_but_steps_and_every_split_but_dev(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from evaluation import cli

    assert cli.main(["steps", "--train", "--split", "heldout", "--data", str(DATA)]) == 2
    assert cli.main(["patterns", "--train", "--data", str(DATA)]) == 2
    assert "dev split only" in capsys.readouterr().err
