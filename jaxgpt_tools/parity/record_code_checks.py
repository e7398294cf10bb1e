"""The lineage presets against each record's own code (jaxgpt_tools.parity.record_code): the
setting of the rows and the record's-code column of docs/PARITY.md (through
jaxgpt_tools.parity.checks), run by parity_tests/test_record_code.py. The rows:
`record_code_forward` (logits, loss, gradients), `record_code_training` (a few steps of the
record's own optimizers and schedules); the column of the other rows: `record_code_columns`.

Setting: width 64, 2 heads of 32, over a 1000-token vocabulary whose last token is the EOT (head
and #8-#18's tables padded to 1024), T = 384 (3 blocks), all fp32; 12 layers for #18 and #20,
whose code hard-wires the record's per-layer patterns (the value-embedding list, layer 7, #20's
long/short mask list), 4 for #8, #9 and #15, whose code takes any even count (#15's value chunks
then mirror as 0, 1, 1, 0), which keeps the compile of jaxgpt's step short. One initial state, in
the record's own names: its own init with every parameter perturbed
(`parity.measures.perturb_parameters`: the zero-initialised projections and head included), so
that no gradient is zero by structure. jaxgpt runs the preset with the dense attention backend
(one masked softmax, the fastest to compile; the blocked backend's equality with it is
tests/test_attention*.py's); torch_ref runs SDPA with its explicit mask.
"""

from __future__ import annotations

import functools

import numpy as np

from jaxgpt_tools.parity import record_code as rc

EOT = 999
LAYERS = {"untie-embed": 4, "shortcuts": 4, "unet-value-embeds": 4, "softcap": 12, "record": 12}
SEQ_LEN = 384
# Two windows per record as its forward takes them (#8/#9 have none: plain causal attention over
# each row): #15's token windows (odd multiples of 64, where its token and block bounds
# alternate inside a block), #18's block window, #20's W_long (W_short = W // 2, 0 at W 1).
WINDOWS = {"untie-embed": (None,), "shortcuts": (None,), "unet-value-embeds": (192, 320), "softcap": (1, 2),
           "record": (1, 3)}
# The forward rows' sequences: where each document starts (its EOT) among the SEQ_LEN input
# positions of 3 blocks. The first: one document over blocks 0 and 1 whole (a full block for the
# records' lists) and into block 2, then three inside block 2 (300..339, a one-token document at
# 340, 341..383). The second: a document across the edge of blocks 0 and 1 (45..129), one that
# starts and ends inside block 1 (130..169), one ending on its last token (170..255), one starting
# on a block edge (256) and a one-token document on the last position.
FORWARD_DOCUMENT_STARTS = {"full blocks, documents inside the last block": (0, 300, 340, 341),
                           "documents across, inside and on block edges": (0, 45, 130, 170, 256, 383)}


def dims(name: str) -> rc.Dims:
    """The dims record `name`'s GPT is built with here."""
    return rc.Dims(vocab_size=1000, num_layers=LAYERS[name], num_heads=2, model_dim=64)


def model_config(name: str, dtype_policy: str = "fp32"):
    """The preset's ModelConfig at dims(name), `dtype_policy` ("fp32"; "preset": the preset's own;
    "preset_eager": the preset's own with the eager reading of what its run compiled, the
    soft-cap on bf16 logits rounded after each op, as the record's code runs on the CPU), dense
    attention, unchunked loss; at 4 layers the per-layer patterns as the record's code builds them
    (#15's chunks min(i, L-1-i), one window for every layer, no layer without attention)."""
    from jaxgpt import config as cfg
    from jaxgpt import presets

    model, size = presets.get_preset(name).model, dims(name)
    policy = model.dtype_policy if dtype_policy in ("preset", "preset_eager") else dtype_policy
    if dtype_policy == "preset_eager":
        model = cfg.with_fields(model, soft_cap_rounding="per_op")
    patterns = {}
    if size.num_layers != model.num_layers:
        layers = size.num_layers
        chunks = model.lineage.value_embed_layout == "chunks" and model.num_value_embeds
        patterns = dict(value_embed_slots=tuple(min(i, layers - 1 - i) if chunks else None for i in range(layers)),
                        long_window_layers=tuple(range(layers)), attention_free_layers=())
    return cfg.replace(model, vocab_size=size.vocab_size, eot_id=EOT, num_layers=size.num_layers, num_heads=size.num_heads,
                       model_dim=size.model_dim, dtype_policy=policy, attention_backend="dense", loss_chunk_tokens=None,
                       max_window_blocks=SEQ_LEN // 128, **patterns)


@functools.cache
def initial_state(name: str) -> dict:
    """The shared initial state in record `name`'s own names: its own init under
    torch.manual_seed(0), every parameter perturbed (its buffers, #15's bf16 inv_freq, as built)."""
    import torch

    from jaxgpt_tools.parity.measures import perturb_parameters

    torch.manual_seed(0)
    model = rc.build_model(rc.load(name, EOT), dims(name))
    perturb_parameters(model, 0)
    return {key: value.detach().clone() for key, value in model.state_dict().items()}


def tokens(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(inputs, targets) int32 (SEQ_LEN,) of a record-like document layout (EOT = 999)."""
    from jaxgpt.testing import document_layout

    stream = document_layout("record_like", SEQ_LEN + 1, vocab_size=1000, eot_id=EOT, seed=seed)
    return stream[:-1].astype(np.int32), stream[1:].astype(np.int32)


def documents_tokens(starts: tuple[int, ...], seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(inputs, targets) int32 (SEQ_LEN,): random tokens below the EOT, with the EOT (= 999) at
    the input positions `starts` (each opens a document) and nowhere else."""
    from jaxgpt.testing import document_layout

    stream = document_layout("one_doc", SEQ_LEN + 1, vocab_size=1000, eot_id=EOT, seed=seed)
    stream[list(starts)] = EOT
    return stream[:-1].astype(np.int32), stream[1:].astype(np.int32)


def record_batch(name: str, inputs: np.ndarray, targets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(S, T) sequences as record `name`'s forward takes one batch: all rows for #8/#9, else the
    first sequence alone."""
    return (inputs, targets) if name in rc.ROWS else (inputs[0], targets[0])


# ---------------------------------------------------------------------------------------------
# The two frameworks on the record's state


def torch_ref_model(name: str, state: dict, dtype_policy: str = "fp32"):
    """torch_ref's GPT of the preset (SDPA, eval mode) under `dtype_policy` (model_config's)
    holding `state` (record names), each tensor cast to the model's dtype."""
    from torch_ref import model as torch_model
    from torch_ref.run import convert as torch_convert

    config = model_config(name, dtype_policy)
    gpt = torch_model.apply_dtype_policy(torch_model.GPT.from_config(config, attention="sdpa", fp8_head=False),
                                         config.dtype_policy)
    torch_convert.load_record_state_dict(gpt, state)
    return gpt.eval()


def jax_params(name: str, state: dict, dtype_policy: str = "fp32") -> dict:
    """jaxgpt's parameters of the preset under `dtype_policy` (model_config's) from `state`
    (record names, through jaxgpt.run.convert), each cast to the model's own dtype."""
    import jax.numpy as jnp

    from jaxgpt import params as params_lib
    from jaxgpt.run import convert

    config = model_config(name, dtype_policy)
    shapes = params_lib.param_shapes(config)
    converted = convert.torch_state_dict_to_params(convert.to_model_names(state), config)
    return {key: jnp.asarray(np.asarray(value, np.float32)).astype(shapes[key].dtype) for key, value in converted.items()}


@functools.cache
def jax_loss_logits_grads(name: str, dtype_policy: str = "fp32"):
    """A jitted (params, ids (1, T), targets (1, T), window int32) -> (loss, logits (T, Vp) in the
    activations' dtype, grads) of the preset's GPT under `dtype_policy` (model_config's). The loss
    is capped_cross_entropy of the model's logits over the N tokens / N: GPT.__call__'s own
    computation without chunks, from one forward."""
    import jax
    from flax import nnx

    from jaxgpt import loss as loss_lib
    from jaxgpt import model as jax_model
    from jaxgpt import params as params_lib

    config = model_config(name, dtype_policy)
    graph, _ = params_lib.ModelGraph.split(nnx.eval_shape(lambda: jax_model.GPT(config, rngs=nnx.Rngs(0))))

    def loss_fn(params, ids, targets, window):
        logits = graph.bind(params).logits(ids, window)
        flat = logits.reshape(-1, logits.shape[-1])
        loss = loss_lib.capped_cross_entropy(flat, targets.reshape(-1), cap=config.logit_cap,
                                              temperature=config.logit_cap_temperature, cap_kind=config.lineage.soft_cap,
                                              cap_rounding=config.lineage.soft_cap_rounding) / flat.shape[0]
        return loss, flat

    @jax.jit
    def run(params, ids, targets, window):
        (loss, logits), grads = jax.value_and_grad(loss_fn, has_aux=True)(params, ids, targets, window)
        return loss, logits, grads

    return run


def framework_window(name: str, window: int | None) -> int:
    """The window value both frameworks take for the record's (0 where the preset has none)."""
    return 0 if window is None else window


def label(name: str) -> str:
    """The record's number and name, as the rows name it."""
    return f"#{rc.RECORD_LOGS[name].number} {name}"
