"""The forward rows of the parity checks (jaxgpt_tools.parity.checks): the record's model at its own
shapes, and each lineage preset's forward, jaxgpt against torch_ref from the same weights (fp32
logits, loss and every gradient; the preset's own bf16 policy's eval logits and loss)."""

from __future__ import annotations

import numpy as np

from jaxgpt_tools.common.machine import torch_threads
from jaxgpt_tools.parity.measures import (
    Result,
    draw_zero_matrices,
    gradient_gaps,
    lineage_model_config,
    perturb_parameters,
    torch_forward,
    torch_model_config,
)
from jaxgpt_tools.parity.record_code_columns import lineage_column, not_filled, record_column

RECORD_SHAPE_SEQ_LEN = 1024  # 8 blocks: windows 5 (long) and 2 (short) both cut keys off
RECORD_SHAPE_WINDOW = 5


def _jax_loss_logits_grads(graph, params, inputs: np.ndarray, targets: np.ndarray, window: int):
    """jaxgpt's eval-mode (loss, (T, Vp) fp32 logits, {name: gradient}) of one (T,) sequence."""
    import jax
    import jax.numpy as jnp

    @jax.jit
    def loss_logits_grads(params, ids, target_ids):
        def loss_fn(p):
            model = graph.bind(p)
            return model(ids, target_ids, window, train=False), model.logits(ids, window)
        (loss, logits), grads = jax.value_and_grad(loss_fn, has_aux=True)(params)
        return loss, logits[0].astype(jnp.float32), grads

    return loss_logits_grads(params, jnp.asarray(inputs)[None], jnp.asarray(targets)[None])


def check_record_shape_fp32() -> Result:
    """The record preset's model (D 768, 6 heads of 128, 12 layers, vocab 50257 padded to 50304)
    in fp32 at T = 1024: logits, loss and every parameter's gradient from the same weights.

    Weights: torch_ref's record init with its zero matrices (c_proj, lm_head) drawn like the
    others, so every gradient carries signal. jaxgpt runs the dense attention backend (one
    masked softmax; the blocked backend's equality with it is tests/test_attention.py's), which
    compiles faster at this size.
    """
    import jax.numpy as jnp
    import torch
    from flax import nnx

    from jaxgpt import model as jax_model
    from jaxgpt import params as params_lib
    from jaxgpt.config import replace
    from jaxgpt.presets import get_preset
    from jaxgpt.run import convert
    from jaxgpt.testing import document_layout
    from torch_ref import loop as torch_train

    config = replace(get_preset("record").model, dtype_policy="fp32", attention_backend="dense")
    tokens = document_layout("record_like", RECORD_SHAPE_SEQ_LEN + 1, vocab_size=config.vocab_size,
                             eot_id=config.eot_id, seed=0)
    inputs, targets = tokens[:-1], tokens[1:]
    torch_gpt = torch_train.build_model(torch_model_config(config), RECORD_SHAPE_SEQ_LEN, 0, None, torch.device("cpu"))
    draw_zero_matrices(torch_gpt)
    captured: dict = {}

    def keep_logits(_module, _inputs, output) -> None:  # returns None: the output stays in the graph
        captured["logits"] = output.detach()

    hook = torch_gpt.lm_head.register_forward_hook(keep_logits)
    torch_loss = torch_gpt(torch.from_numpy(inputs), torch.from_numpy(targets.astype(np.int64)), RECORD_SHAPE_WINDOW)
    torch_loss.backward()
    hook.remove()
    torch_logits = captured["logits"][0].numpy()
    torch_grads = {name: p.grad.numpy() for name, p in torch_gpt.named_parameters() if p.grad is not None}
    params = {name: jnp.asarray(value) for name, value in convert.torch_state_dict_to_params(torch_gpt.state_dict(), config).items()}
    del torch_gpt  # 1.1 GB of weights, now in `params`; the gradients live on in torch_grads

    graph, _ = params_lib.ModelGraph.split(nnx.eval_shape(lambda: jax_model.GPT(config, rngs=nnx.Rngs(0))))
    loss, logits, jax_grads = _jax_loss_logits_grads(graph, params, inputs, targets, RECORD_SHAPE_WINDOW)
    del params
    logits_abs = float(np.abs(np.asarray(logits) - torch_logits).max())
    logits_rel = logits_abs / float(np.abs(torch_logits).max())
    loss_rel = abs(float(loss) - float(torch_loss)) / float(torch_loss)
    same_names, zeros_agree, worst = gradient_gaps(torch_grads, jax_grads)
    del jax_grads
    (matrix_rel, matrix_name), (scalar_rel, scalar_name) = worst["matrix"], worst["scalar"]
    passed = (same_names and zeros_agree and logits_rel < 1e-5 and loss_rel < 1e-6
              and matrix_rel < 1e-4 and scalar_rel < 1e-3)
    return Result(
        "Record shapes (D 768, 6 heads, 12 layers, vocab 50304), fp32, T 1024, window 5", logits_abs,
        max(logits_rel, loss_rel, matrix_rel, scalar_rel),
        "logits max|diff| < 1e-5 of max|logit|; loss rel < 1e-6; gradients max|diff| < 1e-4 of max|grad| for "
        "matrices, < 1e-3 for the scalars (exact zeros zero in both)",
        "fp32 end to end: only summation order and libm ulps differ (~1e-7 per op), compounded over 12 layers "
        "and 768- to 3072-long dot products and through the chain rule; a scalar's gradient is one sum of "
        "T x D = 786k products that largely cancel, so its rounding is larger relative to the result",
        passed, f"logits {logits_rel:.1e} of scale, loss {loss_rel:.1e}, worst matrix gradient {matrix_rel:.1e} "
        f"({matrix_name}), worst scalar gradient {scalar_rel:.1e} ({scalar_name})", record_code=not_filled("record_shape"),
    )


# ---------------------------------------------------------------------------------------------
# The lineage presets (#8 UntieEmbed, #9 ShortcutsTweaks, #15 UNetValueEmbedsTweaks, #18 SoftCap):
# each preset's switches at 12 layers (its own per-layer patterns), 64 wide, 2 heads of 32, over
# a 1000-token vocabulary (EOT 999, head and tables padded to 1024), T = 512 (4 blocks).

LINEAGE_CHECKED = ("untie-embed", "shortcuts", "unet-value-embeds", "softcap")
LINEAGE_SEQ_LEN = 512
# The window each forward gets: 2 of 4 blocks, or #15's 192 tokens (an odd multiple of 64, where
# its token and block bounds alternate within a block; LINEAGE.md 5.4).
LINEAGE_WINDOW = {"document_blocks": 2, "document_tokens": 192, "causal": 0}


def _lineage_pair(config):
    """(torch_ref GPT in eval mode, jaxgpt params {name: array}, jaxgpt graph) with the same
    weights: torch_ref's seeded init, every parameter perturbed (no path silent), then the
    config's dtype policy applied on both sides."""
    import jax.numpy as jnp
    import torch
    from flax import nnx

    from jaxgpt import model as jax_model
    from jaxgpt import params as params_lib
    from jaxgpt.run import convert
    from torch_ref import model as torch_model

    torch.manual_seed(0)
    torch_gpt = torch_model.GPT.from_config(config, attention="sdpa", fp8_head=False)
    perturb_parameters(torch_gpt, 0)
    torch_model.apply_dtype_policy(torch_gpt, config.dtype_policy)
    torch_gpt.eval()
    graph, abstract = params_lib.ModelGraph.split(nnx.eval_shape(lambda: jax_model.GPT(config, rngs=nnx.Rngs(0))))
    params = {name: jnp.asarray(value).astype(abstract[name].dtype)
              for name, value in convert.torch_state_dict_to_params(torch_gpt.state_dict(), config).items()}
    return torch_gpt, params, graph


def _lineage_tokens(config):
    from jaxgpt.testing import document_layout

    tokens = document_layout("record_like", LINEAGE_SEQ_LEN + 1, vocab_size=config.vocab_size, eot_id=config.eot_id, seed=3)
    return tokens[:-1], tokens[1:]


def check_lineage_forward(name: str) -> Result:
    """One lineage preset: fp32 logits, loss and every gradient, and its own bf16 policy's eval
    logits and loss, jaxgpt against torch_ref from the same weights."""
    import jax
    import jax.numpy as jnp

    fp32 = lineage_model_config(name, "fp32")
    window = LINEAGE_WINDOW[fp32.lineage.attention_mask]
    inputs, targets = _lineage_tokens(fp32)
    torch_gpt, params, graph = _lineage_pair(fp32)
    with torch_threads(1):
        torch_loss, torch_logits, torch_grads = torch_forward(torch_gpt, inputs, targets, window, backward=True)

    loss, logits, jax_grads = _jax_loss_logits_grads(graph, params, inputs, targets, window)
    record_code, record_ok = record_column(
        lineage_column, name, torch_gpt.state_dict(), inputs, targets, None if fp32.lineage.attention_mask == "causal" else window,
        {"jaxgpt": (float(loss), np.asarray(logits), jax_grads), "torch_ref": (torch_loss, torch_logits, torch_grads)})
    logits_rel = float(np.abs(np.asarray(logits) - torch_logits).max() / np.abs(torch_logits).max())
    loss_rel = abs(float(loss) - torch_loss) / torch_loss
    same_names, zeros_agree, worst = gradient_gaps(torch_grads, jax_grads)
    (matrix_rel, matrix_name), (scalar_rel, scalar_name) = worst["matrix"], worst["scalar"]

    own = lineage_model_config(name)  # the preset's bf16 policy, eval mode (no FP8 head in #8-#18)
    torch_own, own_params, own_graph = _lineage_pair(own)
    with torch_threads(1):
        torch_own_loss, torch_own_logits, _ = torch_forward(torch_own, inputs, targets, window, backward=False)
    own_fn = jax.jit(lambda p, ids, t: (own_graph.bind(p)(ids, t, window, train=False),
                                        own_graph.bind(p).logits(ids, window)[0].astype(jnp.float32)))
    own_loss, own_logits = own_fn(own_params, jnp.asarray(inputs)[None], jnp.asarray(targets)[None])
    own_logits_rel = float(np.abs(np.asarray(own_logits) - torch_own_logits).max() / np.abs(torch_own_logits).max())
    own_loss_rel = abs(float(own_loss) - torch_own_loss) / torch_own_loss

    passed = (same_names and zeros_agree and logits_rel < 1e-5 and loss_rel < 1e-6 and matrix_rel < 1e-4
              and scalar_rel < 1e-3 and own_logits_rel < 3e-2 and own_loss_rel < 2e-4 and record_ok)
    return Result(
        f"Lineage {name}: fp32 logits, loss, gradients; {own.dtype_policy} eval logits and loss (12 layers, D 64, T 512)",
        float(np.abs(np.asarray(logits) - torch_logits).max()), max(logits_rel, loss_rel, matrix_rel, scalar_rel),
        "fp32: logits < 1e-5 of max|logit|, loss rel < 1e-6, gradients < 1e-4 (matrices) / 1e-3 (scalars) of "
        "max|grad|, exact zeros zero in both; bf16 policy: logits < 3e-2 of max|logit|, loss rel < 2e-4",
        "fp32: summation order and libm ulps only (the record's rows above); bf16: 8-bit mantissas rounded "
        "after every op by eager torch and once per fused chain by XLA, compounded over 12 layers (as the "
        "record's bf16 row)",
        passed, f"fp32 logits {logits_rel:.1e}, loss {loss_rel:.1e}, worst matrix gradient {matrix_rel:.1e} "
        f"({matrix_name}), worst scalar gradient {scalar_rel:.1e} ({scalar_name}); {own.dtype_policy} logits "
        f"{own_logits_rel:.1e}, loss {own_loss_rel:.1e}",
        record_code=f"fp32 part {record_code}; {own.dtype_policy} part not filled: the record's bf16 run needs CUDA "
        "(autocast's CUDA op lists, FlexAttention's bf16 kernels)",
    )
