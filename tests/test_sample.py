"""Incremental decoding with a key/value cache, and `python -m jaxgpt.sample`."""

from __future__ import annotations

import json
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from jaxgpt import decode, sample
from jaxgpt import loss as loss_lib
from jaxgpt import params as params_lib
from jaxgpt.config import EOT_ID, ModelConfig, Preset, TrainConfig
from jaxgpt.config_json import config_to_json
from jaxgpt.corpus.tokenizer import GPT2BPE, ByteGPT2
from jaxgpt.data import DataPosition, write_shard
from jaxgpt.run import checkpoint, convert

# 16-token blocks keep the sequences short while the window (2 blocks, short window 1) and
# the documents still cut through them. Four layers keep every per-layer feature of the
# record (value-embedding slots, long and short windows, a layer without attention, U-net
# skips) at a third of the compile time of twelve.
SMALL = dict(model_dim=64, num_heads=2, block_size=16, rope_max_len=256, max_window_blocks=4, num_layers=4,
             value_embed_slots=(0, 1, None, 0), long_window_layers=(0, 3), attention_free_layers=(2,))


def random_params(config: ModelConfig, seed: int = 0) -> dict[str, np.ndarray]:
    """Every parameter random (the init's zero head and projections would hide errors):
    matrices N(0, 1/fan_in) so that activations keep their scale through the layers,
    embeddings N(0, 1), scalars N(0.5, 0.25^2)."""
    shapes = params_lib.param_shapes(config)
    keys = jax.random.split(jax.random.key(seed), len(shapes))
    params = {}
    for key, (name, s) in zip(keys, sorted(shapes.items())):
        normal = np.asarray(jax.random.normal(key, s.shape, jnp.float32))
        if "embed" in name:
            value = normal
        elif len(s.shape) >= 2:
            value = normal / np.sqrt(s.shape[-1])
        else:
            value = 0.5 + 0.25 * normal
        params[name] = value.astype(s.dtype)
    return params


def token_stream(vocab: int, eot: int, length: int, seed: int = 1) -> np.ndarray:
    """Random ids with EOTs at the start and at a few places inside (several documents)."""
    ids = np.random.default_rng(seed).integers(0, eot, size=length)
    ids[[i for i in (0, 21, 40, 77) if i < length]] = eot
    return ids.astype(np.int32)


def full_and_cached_logits(config: ModelConfig, ids: np.ndarray, window: int, chunk: int):
    """Logits of `ids` from one full forward pass and from decoding `chunk` tokens at a time."""
    model = convert.model_from_params(random_params(config), config)
    padded = np.pad(ids, (0, -len(ids) % config.block_size))  # the full pass needs whole blocks
    # Jitted, as the decoding step below is (run eagerly, each op would compile a program of its own).
    full_logits = jax.jit(lambda ids: model.logits(ids, window))
    full = np.asarray(full_logits(jnp.asarray(padded)[None]), np.float32)[0, : len(ids)]
    decode.init_cache(model, batch=1, max_len=len(ids))
    graphdef, params, cache = nnx.split(model, nnx.Param, nnx.Cache)

    @jax.jit
    def step(cache, piece):
        decoder = nnx.merge(graphdef, params, cache)
        return nnx.state(decoder, nnx.Cache), decode.logits(decoder, piece[None], window)[0]

    pieces = []
    for i in range(0, len(ids), chunk):
        cache, logits = step(cache, jnp.asarray(ids[i : i + chunk]))
        pieces.append(np.asarray(logits, np.float32))
    return full, np.concatenate(pieces)


@pytest.mark.slow
@pytest.mark.parametrize("chunk", [1, 7])
def test_cached_logits_equal_full_forward_fp32(chunk: int) -> None:
    config = ModelConfig(vocab_size=300, eot_id=299, dtype_policy="fp32", **SMALL)
    ids = token_stream(300, 299, 90)  # 6 blocks of 16, 4 documents
    full, cached = full_and_cached_logits(config, ids, window=2, chunk=chunk)
    scale = np.abs(full).max()
    assert scale > 1.0  # random weights: the logits are far from the init's zeros
    # fp32 throughout; only the summation order over keys differs (S cached slots vs T).
    np.testing.assert_allclose(cached, full, rtol=0, atol=1e-5 * scale)  # measured 5e-7 * scale


@pytest.mark.slow
def test_cached_logits_follow_the_window_and_documents() -> None:
    # Same prefix, different windows: the cache must apply the window, not just causality.
    config = ModelConfig(vocab_size=300, eot_id=299, dtype_policy="fp32", **SMALL)
    ids = token_stream(300, 299, 90)
    _, narrow = full_and_cached_logits(config, ids, window=1, chunk=1)
    _, wide = full_and_cached_logits(config, ids, window=4, chunk=1)
    np.testing.assert_allclose(narrow[:16], wide[:16], atol=1e-5 * np.abs(wide).max())  # first block: same keys
    assert np.abs(narrow[80:] - wide[80:]).max() > 1e-3  # later blocks: window 1 sees fewer keys


@pytest.mark.slow
def test_cached_logits_equal_full_forward_bf16() -> None:
    config = ModelConfig(vocab_size=300, eot_id=299, dtype_policy="record", **SMALL)
    ids = token_stream(300, 299, 64)
    full, cached = full_and_cached_logits(config, ids, window=2, chunk=1)
    # bf16 activations: both passes jitted, so the same math rounded at the same points, but
    # GEMMs of other shapes (1 cached token against 64) may round a bf16 output one ulp (2^-8
    # relative) differently, and that propagates: the bound allows a few such ulps of the largest
    # logits. Measured 7e-6 * max (AVX-512, and with XLA held to AVX2 code); an eager full pass,
    # rounding after every op, gave 1.2e-2.
    np.testing.assert_allclose(cached, full, rtol=0, atol=3e-2 * np.abs(full).max())


@pytest.mark.slow
def test_greedy_sampler_matches_argmax_of_full_forward() -> None:
    config = ModelConfig(vocab_size=300, eot_id=299, dtype_policy="fp32", **SMALL)
    params = random_params(config, seed=3)
    prompt = [299, 5, 17, 42]
    sampler = sample.Sampler(params, config, window_blocks=2, max_len=len(prompt) + 12, temperature=0.0)
    generated = sample.generate(sampler, prompt, 12, seed=0, eot_id=299)
    model = convert.model_from_params(params, config)
    full_logits = jax.jit(lambda ids: model.logits(ids[None], 2)[0])
    sequence = list(prompt)
    for _ in range(len(generated)):  # greedy decoding by re-running the whole prefix
        padded = np.pad(np.array(sequence, np.int32), (0, 32 - len(sequence)))  # one shape: one compile
        capped = np.asarray(loss_lib.soft_cap(full_logits(jnp.asarray(padded))[len(sequence) - 1], 30.0, 7.5))
        sequence.append(int(np.argmax(capped[:300])))
    assert generated == sequence[len(prompt):]
    assert sampler.length == len(prompt) + len(generated) - 1  # the last draw is not fed back
    assert sampler._step._cache_size() == 1  # prompt and generation share one compiled step


def test_top_k_and_temperature() -> None:
    logits = jnp.array([0.0, 3.0, 1.0, 2.0, 50.0], jnp.float32)  # id 4 is padding (vocab 4)
    pick = lambda key, t, k: int(sample.pick_token(logits, key, t, vocab_size=4, top_k=k, cap=30.0, cap_temperature=7.5))  # noqa: E731
    keys = jax.random.split(jax.random.key(0), 200)
    assert pick(keys[0], 0.0, None) == 1  # greedy, never the padding id
    assert {pick(k, 1.0, 2) for k in keys} == {1, 3}  # top-2 only
    assert {pick(k, 5.0, None) for k in keys} == {0, 1, 2, 3}


# ---------------------------------------------------------------------------- the command


def gpt2_vocab_config() -> ModelConfig:
    """The record's layers and GPT-2's vocabulary (so that a .pt of it loads and the GPT-2
    tokenizers fit) at width 32."""
    return ModelConfig(model_dim=32, num_heads=1)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An orbax checkpoint directory as training writes it, its val shards' meta.json naming
    GPT-2 BPE, and the same weights as a record-format .pt."""
    root = tmp_path_factory.mktemp("run")
    shards = root / "shards"
    shards.mkdir()
    write_shard(shards / "s_val_000000.bin", np.full(300, EOT_ID, np.uint16))  # only its folder is used
    (shards / "meta.json").write_text(json.dumps({"encoding": "gpt2"}))
    config = gpt2_vocab_config()
    preset = Preset(model=config, train=TrainConfig(val_files=str(shards / "s_val_*.bin"), steps=8,
                                                    seq_len=128, batch_tokens=128, window_max_tokens=256))
    params = random_params(config)
    saver = checkpoint.Checkpointer(root / "ckpt", async_save=False)
    state = {"params": {k: jnp.asarray(v) for k, v in params.items()}, "opt_state": (jnp.zeros(3),)}
    saver.save(8, state, data_position=DataPosition().to_dict(), config=config_to_json(preset))
    saver.close()
    checkpoint.export_torch(params, root / "model.pt")
    return root


@pytest.mark.slow
def test_cli_samples_from_an_orbax_run(run_dir: Path, capsys: pytest.CaptureFixture) -> None:
    loaded = sample.load_checkpoint(run_dir / "ckpt")
    assert loaded.window_blocks == 2 and loaded.shards_meta == run_dir / "shards" / "meta.json"
    args = ["--checkpoint", str(run_dir / "ckpt"), "--prompt", "def ", "--max-new-tokens", "20", "--seed", "1"]
    assert sample.main(args) == 0
    first = capsys.readouterr().out
    assert first.startswith("def ") and len(first) > len("def ")
    assert sample.main(args) == 0 and capsys.readouterr().out == first  # same seed, same text
    assert sample.main(args[:-1] + ["2"]) == 0 and capsys.readouterr().out != first


@pytest.mark.slow
def test_cli_samples_from_a_torch_file(run_dir: Path, capsys: pytest.CaptureFixture) -> None:
    args = ["--checkpoint", str(run_dir / "model.pt"), "--head-dim", "32",
            "--max-new-tokens", "5", "--temperature", "0", "--window-blocks", "2"]
    assert sample.main(args) == 0
    greedy_pt = capsys.readouterr().out
    orbax_args = ["--checkpoint", str(run_dir / "ckpt"), "--max-new-tokens", "5", "--temperature", "0"]
    assert sample.main(orbax_args) == 0
    assert capsys.readouterr().out == greedy_pt  # same weights, same window, same greedy text


@pytest.mark.slow
def test_cli_errors(run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert sample.main(["--checkpoint", str(tmp_path / "nope")]) == 1
    assert "checkpoint not found" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert sample.main(["--checkpoint", str(tmp_path / "empty")]) == 1
    assert "no checkpoint found" in capsys.readouterr().err
    too_long = ["--checkpoint", str(run_dir / "ckpt"), "--prompt", " x" * 9, "--max-new-tokens", str(65536 - 9)]
    assert sample.main(too_long) == 1  # each " x" is one GPT-2 token; the EOT makes 65537 positions
    assert "prompt too long: 10 tokens (EOT included) + --max-new-tokens 65527 exceed the model's 65536" in capsys.readouterr().err
    loaded_gpt2_vocab = sample.load_checkpoint(run_dir / "ckpt")
    small_vocab = ModelConfig(vocab_size=300, eot_id=299, **SMALL)
    loaded = sample.LoadedModel(random_params(small_vocab), small_vocab, 1, None)
    with pytest.raises(ValueError, match="vocabulary mismatch: the model has 300 token rows"):
        sample.choose_tokenizer(loaded, "gpt2-bytes", None)
    assert isinstance(sample.choose_tokenizer(sample.load_checkpoint(run_dir / "ckpt"), None, None), GPT2BPE)
    assert isinstance(sample.choose_tokenizer(loaded_gpt2_vocab, "gpt2-bytes", None), ByteGPT2)
