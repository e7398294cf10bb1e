"""Fuzzed: record-format `.pt` loading, everywhere jaxgpt reads one: `--init-from`
(convert.init_preset, then the parameters the trainer builds), the sampler
(jaxgpt.sample.load_checkpoint) and scripts/compare_checkpoint.py (its reading, up to the
models, which are stubbed here). Inputs: a valid 12-layer, 16-wide record file damaged at the
byte level (tests.fuzzing.damaged), and valid torch files whose payload has one item replaced
or deleted anywhere (tests.fuzzing.mutated): tensors of other shapes and dtypes, expanded
tensors claiming 10^12 elements over 4 bytes, absurd widths, non-tensors.

Property: the file's parameters, exactly as stored (and, for a damaged valid file, exactly the
valid file's: a flipped bit in a tensor is found by the zip's CRC-32, runkit.convert.zip_damage), in
the shapes of the model they describe;
or ValueError / FileNotFoundError naming the file in one line; nothing else raised, no hang,
no allocation beyond the file's size (a tensor is never copied before every shape fits).
"""

from __future__ import annotations

import io

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jaxgpt import config as cfg
from jaxgpt import model as model_lib
from jaxgpt import params as params_lib
from jaxgpt import presets, sample
from jaxgpt.run import convert
from tests import fuzzing

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.fuzz
MODEL = cfg.replace(cfg.ModelConfig(), vocab_size=256, eot_id=0, model_dim=16, num_heads=1, dtype_policy="fp32")
PRESET = cfg.replace(presets.get_preset("tiny"), model=MODEL)


def record_file(state_dict: dict) -> bytes:
    buffer = io.BytesIO()
    torch.save({"model": state_dict}, buffer)
    return buffer.getvalue()


@pytest.fixture(scope="module")
def valid():
    """The state dict of GPT(MODEL) as the record's torch file holds it, and that file's bytes."""
    from flax import nnx  # noqa: PLC0415

    _, params = params_lib.ModelGraph.split(model_lib.GPT(MODEL, rngs=nnx.Rngs(0)))
    state_dict = convert.params_to_torch_state_dict({name: np.asarray(v) for name, v in params.items()})
    return state_dict, record_file(state_dict)


TENSORS = st.one_of(
    st.lists(st.integers(0, 40), min_size=0, max_size=3).map(lambda shape: torch.zeros(shape)),
    st.sampled_from([torch.zeros(1).expand(10**6, 10**6), torch.zeros(1, 100_000), torch.zeros(100_000, 1),
                     torch.zeros(3, 3, dtype=torch.int64), torch.zeros(2, dtype=torch.complex64), torch.zeros(0, 16),
                     torch.zeros(256, 16, dtype=torch.bfloat16), torch.full((256, 16), float("nan"))]),
)
VALUES = st.one_of(TENSORS, fuzzing.json_values())


def inputs(valid_state: dict, valid_bytes: bytes):
    """(bytes, whether they are the valid file's bytes damaged: a read must then give the valid
    weights, or none; a valid file of another payload must read as that payload)."""
    payload = {"model": valid_state}
    structured = fuzzing.mutated(payload, VALUES).map(lambda changed: (_saved(changed), False))
    return st.one_of(fuzzing.damaged(valid_bytes).map(lambda raw: (raw, True)), structured)


def _saved(payload) -> bytes:
    buffer = io.BytesIO()
    torch.save(payload, buffer)
    return buffer.getvalue()


def stored(path) -> dict | None:
    """The state dict the file holds as torch reads it (the oracle of a successful read)."""
    try:
        return torch.load(path, map_location="cpu", weights_only=True)["model"]
    except Exception:  # noqa: BLE001 - the readers must refuse what torch cannot read
        return None


def check(read, path, original: dict | None) -> None:
    """`read(path)` returns (config, {record name: array}) equal to the file's tensors (and to
    `original`'s, when given) in the config's shapes, or refuses naming the file."""
    with fuzzing.guarded():
        try:
            config, params = read(path)
        except (ValueError, FileNotFoundError) as error:
            assert fuzzing.names_file(error, path) and "\n" not in str(error).strip(), error
            return
    params_lib.check_param_shapes(params, convert._shapes(config), "the inferred model")
    for expected in (stored(path), original):
        if expected is not None:
            state = convert.to_qkv_layout(convert.to_model_names(expected), config.qkv_layout)
            for name, value in params.items():
                np.testing.assert_array_equal(np.asarray(value), convert._to_numpy(state[name]), err_msg=name)


def read_init_from(path):
    preset, state_dict = convert.init_preset(PRESET, path)
    return preset.model, convert.torch_state_dict_to_params(state_dict, preset.model)


def read_sampler(path):
    loaded = sample.load_checkpoint(path, head_dim=16)
    return loaded.config, loaded.params


class Built(Exception):
    """compare_checkpoint reached its models: what it read (the stub of the models)."""


def read_compare(path, tokens, monkeypatch):
    from jaxgpt_tools.parity import compare_checkpoint  # noqa: PLC0415

    def stub(state_dict, config, window, *rest):
        raise Built(config, state_dict)

    monkeypatch.setattr(compare_checkpoint, "TorchModel", stub)
    try:
        compare_checkpoint.compare(path, tokens, window_blocks=1, head_dim=16, eot_id=0, seq_len=128)
    except Built as built:
        config, state_dict = built.args
        return config, convert.torch_state_dict_to_params(state_dict, config)
    raise AssertionError("compare returned without building its models")


@pytest.fixture(scope="module")
def tokens(tmp_path_factory):
    from jaxgpt import data  # noqa: PLC0415

    path = tmp_path_factory.mktemp("tokens") / "t_val_000000.bin"
    data.write_shard(path, np.arange(300) % 256)
    return path


@pytest.mark.parametrize("reader", ["init_from", "sampler", "compare"])
def test_record_file_readers_on_damaged_and_mutated_files(valid, tokens, tmp_path, monkeypatch, reader):
    path = tmp_path / "model.pt"
    read = {"init_from": read_init_from, "sampler": read_sampler,
            "compare": lambda p: read_compare(p, tokens, monkeypatch)}[reader]

    @settings(max_examples=fuzzing.examples(30))
    @given(given_input=inputs(*valid))
    def property_holds(given_input):
        raw, damaged_bytes = given_input
        path.write_bytes(raw)
        check(read, path, valid[0] if damaged_bytes else None)

    property_holds()


def test_the_valid_file_reads_in_every_reader(valid, tokens, tmp_path, monkeypatch):
    """The fuzzed readers' success path is reached: the undamaged file loads (the sampler
    refuses it only for its vocabulary: the record's EOT id 50256 does not fit 256 rows)."""
    path = tmp_path / "model.pt"
    path.write_bytes(valid[1])
    for read in (read_init_from, lambda p: read_compare(p, tokens, monkeypatch)):
        config, params = read(path)
        assert (config.model_dim, config.vocab_size, config.num_layers) == (16, 256, 12) and params
    with pytest.raises(ValueError, match="--checkpoint: .*model.pt: embed.weight has 256 rows, too few"):
        read_sampler(path)
