"""Fuzzed: torch_ref's readers of record-format and resume `.pt` files: `--init-from`
(convert.load_checkpoint_state, preflight.run_preset, train.build_model) and `--resume`
(checkpoint.read_resume, preflight.run_preset with its saved config, checkpoint.restore into the
run's model, optimizers and LR schedulers). Inputs: a valid 12-layer, 16-wide file damaged at the
byte level (tests.fuzzing.damaged), and valid torch files whose payload has one item replaced
or deleted anywhere (tests.fuzzing.mutated): tensors of other shapes and dtypes, expanded
tensors claiming 10^12 elements over 4 bytes, absurd widths, non-tensors, any JSON-like value.

Property: the run gets exactly the file's weights (and, resumed, its step and data position; for
a damaged valid file, exactly the valid file's: a flipped bit in a tensor is found by the zip's
CRC-32, runkit.convert.zip_damage),
or one ValueError / FileNotFoundError line naming the file; nothing else raised, no hang, no
allocation beyond the file's size (every shape is checked on the meta device first).
"""

from __future__ import annotations

import dataclasses
import io

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from tests import fuzzing
from torch_ref import config as cfg
from torch_ref import presets
from torch_ref import train as train_lib
from torch_ref.optim import build_lr_schedulers, build_optimizers, optimizer_step
from torch_ref.run import checkpoint as ckpt
from torch_ref.run import convert, preflight
from torch_ref.run.cli import RunOptions

pytestmark = [pytest.mark.fuzz, pytest.mark.usefixtures("one_thread")]
TINY = presets.get_preset("tiny")
PRESET = dataclasses.replace(TINY, model=cfg.replace(TINY.model, vocab_size=256, eot_id=0, model_dim=16, num_heads=1,
                                                     dtype_policy="fp32"),
                             train=cfg.replace(TINY.train, steps=4, seq_len=128, batch_tokens=128))
TENSORS = st.one_of(
    st.lists(st.integers(0, 40), min_size=0, max_size=3).map(lambda shape: torch.zeros(shape)),
    st.sampled_from([torch.zeros(1).expand(10**6, 10**6), torch.zeros(1, 100_000), torch.zeros(100_000, 1),
                     torch.zeros(3, 3, dtype=torch.int64), torch.zeros(2, dtype=torch.complex64), torch.zeros(0, 16),
                     torch.zeros(256, 16, dtype=torch.bfloat16), torch.full((256, 16), float("nan"))]),
)
VALUES = st.one_of(TENSORS, fuzzing.json_values(), st.just(torch.zeros(1).expand(10**6, 10**6)))


def saved_bytes(payload) -> bytes:
    buffer = io.BytesIO()
    torch.save(payload, buffer)
    return buffer.getvalue()


def new_run():
    """A fresh model, its optimizers and LR schedulers, as train.train builds them."""
    model = train_lib.build_model(PRESET.model, PRESET.train.batch_tokens, 0, None, torch.device("cpu"))
    optimizers = build_optimizers(model, PRESET.optim)
    return model, optimizers, build_lr_schedulers(optimizers, PRESET.train.steps, PRESET.optim)


@pytest.fixture(scope="module")
def resume_payload():
    """The checkpoint of a run after one update (optimizer states and schedulers included)."""
    model, optimizers, schedulers = new_run()
    tokens = torch.arange(129) % 256
    loss = train_lib.forward_backward(model, tokens[:-1], tokens[1:], 128, 1)
    assert torch.isfinite(loss)
    optimizer_step(model, optimizers, schedulers, 0, PRESET.optim)
    return ckpt.checkpoint_payload(model, optimizers, schedulers, 1, (0, 128), PRESET, None, batches=1)


def inputs(payload: dict):
    """(bytes, whether they are the valid file's bytes damaged: a read must then give the valid
    file's content, or none; a valid file of another payload must read as that payload)."""
    return st.one_of(fuzzing.damaged(saved_bytes(payload)).map(lambda raw: (raw, True)),
                     fuzzing.mutated(payload, VALUES).map(lambda changed: (saved_bytes(changed), False)))


def refused(error: BaseException, path) -> None:
    assert isinstance(error, (ValueError, FileNotFoundError)), f"{type(error).__name__}: {error}"
    lines = str(error).strip().splitlines()
    assert fuzzing.names_file(Exception(lines[0]), path), error
    # One line, or the documented list of a changed config (checkpoint.refuse_config_change).
    assert len(lines) == 1 or lines[0].endswith("differing fields (saved -> now):"), error


ORIGINAL: dict = {}  # the valid payload of the test running: what a damaged copy must read as, if at all


def stored(path) -> dict:
    return ORIGINAL.get("payload") or torch.load(path, map_location="cpu", weights_only=True)


def read_init_from(path) -> None:
    options = RunOptions(init_from=str(path), head_dim=16)
    state = convert.load_checkpoint_state(options.init_from)
    preset = preflight.run_preset(PRESET, options, state, None, None)
    model = train_lib.build_model(preset.model, 128, 0, state, torch.device("cpu"))
    for name, value in stored(path)["model"].items():
        torch.testing.assert_close(model.state_dict()[name], value.float(), rtol=0, atol=0, equal_nan=True, msg=name)


def read_resume(path) -> None:
    options = RunOptions(resume=str(path))
    resumed, resume_path = ckpt.read_resume(options)
    preflight.run_preset(PRESET, options, None, resumed, resume_path)
    model, optimizers, schedulers = new_run()
    step, position, served = ckpt.restore(model, optimizers, schedulers, resumed, resume_path)
    file = stored(path)
    assert (step, position[1], served) == (file["step"], file["data_position"]["pos"], file["data_position"].get("batches", 0))
    for name, value in file["model"].items():
        torch.testing.assert_close(model.state_dict()[name], value, rtol=0, atol=0, equal_nan=True, msg=name)


@pytest.mark.parametrize("reader", ["init_from", "resume"])
def test_torch_ref_checkpoint_readers_on_damaged_and_mutated_files(resume_payload, tmp_path, reader):
    path = tmp_path / "1.pt"
    payload = {"model": resume_payload["model"]} if reader == "init_from" else resume_payload
    read = read_init_from if reader == "init_from" else read_resume

    @settings(max_examples=fuzzing.examples(25))
    @given(given_input=inputs(payload))
    def property_holds(given_input):
        raw, damaged_bytes = given_input
        path.write_bytes(raw)
        ORIGINAL["payload"] = payload if damaged_bytes else None
        with fuzzing.guarded():
            try:
                read(path)
            except (ValueError, FileNotFoundError, TypeError, KeyError, RuntimeError, AttributeError,
                    IndexError) as error:
                refused(error, path)

    property_holds()


def test_the_valid_files_read(resume_payload, tmp_path):
    path = tmp_path / "1.pt"
    path.write_bytes(saved_bytes(resume_payload))
    read_resume(path)
    read_init_from(path)
