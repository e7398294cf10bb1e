"""Mutants of the optimizers and schedules: Adam's and Muon's constants, Newton-Schulz, the
momentum lerps, the learning-rate cooldown, the momentum warmup, the window schedules and the FP8 head."""

from __future__ import annotations

from jaxgpt_tools.mutants import targets as t
from jaxgpt_tools.mutants.mutant import Mutant, both, jaxgpt_only

JCONFIG, TCONFIG = "jaxgpt/config.py", "torch_ref/config.py"
JMUON, TMUON = "jaxgpt/muon.py", "torch_ref/muon.py"
JSCHED, TSCHED = "jaxgpt/schedules.py", "torch_ref/schedules.py"


def config_pair(id: str, meaning: str, snippet: str, replacement: str, targets: tuple[str, ...]) -> Mutant:
    """A default of OptimConfig or ModelConfig misread alike in both frameworks' configs (the same line in each)."""
    return both(id, meaning, (JCONFIG, snippet, replacement), (TCONFIG, snippet, replacement), targets)


OPTIM_CONSTANTS: tuple[Mutant, ...] = (
    jaxgpt_only("adam-b1", "Adam beta1 0.8 read as 0.9 (jaxgpt)", JCONFIG, "adam_b1: float = 0.8", "adam_b1: float = 0.9",
                (t.CONFIG_PARITY,)),
    config_pair("adam-b1-both", "Adam beta1 0.8 read as 0.9 in both frameworks", "adam_b1: float = 0.8",
                "adam_b1: float = 0.9", (t.RECORD_OPTIMIZER_20,)),
    config_pair("adam-b2-both", "Adam beta2 0.95 read as 0.99 in both frameworks", "adam_b2: float = 0.95",
                "adam_b2: float = 0.99", (t.RECORD_OPTIMIZER_20,)),
    config_pair("adam-eps-both", "Adam eps 1e-10 read as 1e-8 in both frameworks", "adam_eps: float = 1e-10",
                "adam_eps: float = 1e-8", (t.RECORD_OPTIMIZER_20,)),
    config_pair("muon-lr-both", "Muon lr 0.05 read as 0.04 in both frameworks", "muon_lr: float = 0.05",
                "muon_lr: float = 0.04", (t.RECORD_OPTIMIZER_20,)),
    jaxgpt_only("embed-lr", "embedding lr 0.6 read as 0.3 (jaxgpt)", JCONFIG, "embed_lr: float = 0.6", "embed_lr: float = 0.3",
                (t.CONFIG_PARITY,)),
    config_pair("head-lr-both", "lm_head lr 0.008 read as 0.006 in both frameworks", "head_lr: float = 0.008",
                "head_lr: float = 0.006", (t.RECORD_OPTIMIZER_20,)),
    config_pair("cooldown-frac-both", "LR cooldown fraction 0.4 read as 0.45 in both frameworks",
                "cooldown_frac: float = 0.4", "cooldown_frac: float = 0.45", (t.RECORD_OPTIMIZER_20, t.SCHEDULES)),
    config_pair("final-lr-both", "final LR fraction 0.1 read as 0.0 in both frameworks", "final_lr_frac: float = 0.1",
                "final_lr_frac: float = 0.0", (t.RECORD_OPTIMIZER_20, t.SCHEDULES)),
    config_pair("momentum-start-both", "Muon momentum warmup from 0.9 instead of 0.85 in both frameworks",
                "muon_momentum_start: float = 0.85", "muon_momentum_start: float = 0.9", (t.RECORD_OPTIMIZER_20,)),
    jaxgpt_only("momentum-warmup-steps", "Muon momentum warmup over 250 steps instead of 300 (jaxgpt)", JCONFIG,
                "muon_momentum_warmup_steps: int = 300", "muon_momentum_warmup_steps: int = 250", (t.CONFIG_PARITY,)),
    both("fp8-grad-scale-both", "the FP8 head's gradient scale 2^29 read as 2^28 in both frameworks",
         (JCONFIG, "RECORD_FP8_GRAD_SCALE = 2.0**29", "RECORD_FP8_GRAD_SCALE = 2.0**28"),
         (TCONFIG, "RECORD_FP8_GRAD_SCALE = 2.0**29", "RECORD_FP8_GRAD_SCALE = 2.0**28"), ("tests/test_fp8.py", t.CONFIG)),
    jaxgpt_only("fp8-w-scale", "the FP8 head's weight scale 32 read as 16 (jaxgpt)", "jaxgpt/fp8.py", "W_SCALE = 32.0",
                "W_SCALE = 16.0", (t.FP8_PARITY, "tests/test_fp8.py")),
    jaxgpt_only("fp8-dx-no-bf16", "the FP8 head's input gradient left in fp32 (its bf16 cast missing, jaxgpt)",
                "jaxgpt/fp8.py", "dx = (dx * (1.0 / (grad_scale * W_SCALE))).astype(jnp.bfloat16)",
                "dx = dx * (1.0 / (grad_scale * W_SCALE))", ("tests/test_fp8.py", t.FP8_PARITY)),
)

MUON: tuple[Mutant, ...] = (
    jaxgpt_only("ns-coeff-a", "Newton-Schulz a 3.4445 read as 3.4454 (jaxgpt)", JMUON,
                "NS_COEFFICIENTS: tuple[float, float, float] = (3.4445, -4.7750, 2.0315)",
                "NS_COEFFICIENTS: tuple[float, float, float] = (3.4454, -4.7750, 2.0315)", (t.NS_PARITY,)),
    both("ns-coeff-c-both", "Newton-Schulz c 2.0315 read as 2.0351 in both frameworks",
         (JMUON, "(3.4445, -4.7750, 2.0315)", "(3.4445, -4.7750, 2.0351)"),
         (TMUON, "(3.4445, -4.7750, 2.0315)", "(3.4445, -4.7750, 2.0351)"), (t.RECORD_OPTIMIZER_20,)),
    jaxgpt_only("ns-norm-eps", "Newton-Schulz normalises by |G| + 1e-3 instead of 1e-7 (jaxgpt)", JMUON,
                "NS_NORM_EPS = 1e-7", "NS_NORM_EPS = 1e-3", (t.NS_PARITY, t.NS_EDGES)),
    jaxgpt_only("ns-poly-order", "Newton-Schulz X <- aX + X B instead of B X (jaxgpt)", JMUON,
                "return rnd(rnd(a * X) + matmul(B, X))", "return rnd(rnd(a * X) + matmul(X, B))", (t.NS_PARITY,)),
    jaxgpt_only("ns-square-transposed", "Newton-Schulz transposes square matrices too (>= for >, jaxgpt)", JMUON,
                "tall = X.shape[-2] > X.shape[-1]", "tall = X.shape[-2] >= X.shape[-1]", (t.NS_PARITY,)),
    both("update-scale-inverted-both", "Muon's shape scale sqrt(max(1, cols / rows)) in both frameworks",
         (JMUON, "return math.sqrt(max(1.0, rows / cols))", "return math.sqrt(max(1.0, cols / rows))"),
         (TMUON, "return max(1.0, shape[-2] / shape[-1]) ** 0.5", "return max(1.0, shape[-1] / shape[-2]) ** 0.5"),
         (t.RECORD_OPTIMIZER_20,)),
    jaxgpt_only("nesterov-lerp-order", "Nesterov lerp(buf, g, m) instead of lerp(g, buf, m) (jaxgpt)", JMUON,
                "direction = torch_lerp(g, buf, m) if nesterov else buf",
                "direction = torch_lerp(buf, g, m) if nesterov else buf", (t.OPTIM_PARITY_10,)),
    both("nesterov-lerp-order-both", "Nesterov lerp with its ends swapped in both frameworks",
         (JMUON, "direction = torch_lerp(g, buf, m) if nesterov else buf", "direction = torch_lerp(buf, g, m) if nesterov else buf"),
         (TMUON, 'direction = grad.lerp(buf, momentum) if group["nesterov"] else buf',
          'direction = buf.lerp(grad, momentum) if group["nesterov"] else buf'), (t.RECORD_OPTIMIZER_20,)),
    jaxgpt_only("momentum-buffer-weight", "momentum buffer lerp(buf, g, m) instead of 1 - m (jaxgpt)", JMUON,
                "buf = torch_lerp(buf, g, one_minus_m)", "buf = torch_lerp(buf, g, m)", (t.OPTIM_PARITY_10,)),
    jaxgpt_only("sgd-nesterov-sign", "#8/#9's SGD Nesterov u = g - m B (jaxgpt)", JMUON,
                "direction = g + m * buf if nesterov else buf", "direction = g - m * buf if nesterov else buf",
                ("parity_tests/test_optim_parity.py::test_lineage_sgd_momentum_and_chain_newton_schulz_match_torch_ref",)),
)

SCHEDULES: tuple[Mutant, ...] = (
    jaxgpt_only("cooldown-quadratic", "the LR cooldown quadratic in the remaining fraction (jaxgpt)", JSCHED,
                "w = min(remaining / cooldown_frac, 1.0)", "w = min(remaining / cooldown_frac, 1.0) ** 2",
                (t.SCHEDULE_PARITY, t.SCHEDULES)),
    both("cooldown-quadratic-both", "the LR cooldown quadratic in both frameworks",
         (JSCHED, "w = min(remaining / cooldown_frac, 1.0)", "w = min(remaining / cooldown_frac, 1.0) ** 2"),
         (TSCHED, "w = min(remaining / cooldown_frac, 1.0)", "w = min(remaining / cooldown_frac, 1.0) ** 2"),
         (t.SCHEDULES, t.RECORD_OPTIMIZER_20)),
    jaxgpt_only("whole-steps-off-by-one", "#8-#15's whole-step cooldown one step early: (steps - s - 1) / K (jaxgpt)",
                JSCHED, "w = min((total_steps - step) / cooldown_steps, 1.0)",
                "w = min((total_steps - step - 1) / cooldown_steps, 1.0)", (t.CONFIG_PARITY,)),
    both("whole-steps-off-by-one-both", "the whole-step cooldown one step early in both frameworks",
         (JSCHED, "w = min((total_steps - step) / cooldown_steps, 1.0)", "w = min((total_steps - step - 1) / cooldown_steps, 1.0)"),
         (TSCHED, "w = min((total_steps - step) / cooldown_steps, 1.0)", "w = min((total_steps - step - 1) / cooldown_steps, 1.0)"),
         (f"{t.RECORD_OPTIMIZER}[untie-embed]", f"{t.RECORD_CODE}[untie-embed-training]")),
    jaxgpt_only("momentum-warmup-shift", "the momentum warmup one step ahead: (step + 1) / warmup (jaxgpt)", JSCHED,
                "frac = min(step / warmup_steps, 1) if warmup_steps else 1",
                "frac = min((step + 1) / warmup_steps, 1) if warmup_steps else 1", (t.SCHEDULE_PARITY, t.SCHEDULES)),
    both("momentum-warmup-shift-both", "the momentum warmup one step ahead in both frameworks",
         (JSCHED, "frac = min(step / warmup_steps, 1) if warmup_steps else 1",
          "frac = min((step + 1) / warmup_steps, 1) if warmup_steps else 1"),
         (TSCHED, "frac = min(step / warmup_steps, 1) if warmup_steps else 1",
          "frac = min((step + 1) / warmup_steps, 1) if warmup_steps else 1"), (t.SCHEDULES, t.RECORD_OPTIMIZER_20)),
    jaxgpt_only("window-floor", "Sub3Min's window schedule with floor instead of ceil (jaxgpt)", JSCHED,
                "long_blocks = max(1, math.ceil(tokens / block_size))", "long_blocks = max(1, math.floor(tokens / block_size))",
                (t.CONFIG_PARITY, t.SCHEDULES)),
    both("window-floor-both", "Sub3Min's window schedule with floor in both frameworks",
         (JSCHED, "long_blocks = max(1, math.ceil(tokens / block_size))", "long_blocks = max(1, math.floor(tokens / block_size))"),
         (TSCHED, "long_blocks = max(1, math.ceil(tokens / block_size))", "long_blocks = max(1, math.floor(tokens / block_size))"),
         (t.SCHEDULES, t.RECORD_TRAINING)),
    jaxgpt_only("floor-schedule-start", "#18's window schedule without its one-block start (jaxgpt)", JSCHED,
                "return int(((1 - x) * block_size + x * (block_size + max_tokens)) // block_size)",
                "return int((x * (block_size + max_tokens)) // block_size)", (t.CONFIG_PARITY,)),
    jaxgpt_only("token-window-start", "#15's token window without its 64-token start (jaxgpt)", JSCHED,
                "TOKEN_WINDOW_STEP * int((TOKEN_WINDOW_STEP + max_tokens * step / total_steps) // TOKEN_WINDOW_STEP)",
                "TOKEN_WINDOW_STEP * int((max_tokens * step / total_steps) // TOKEN_WINDOW_STEP)", (t.CONFIG_PARITY,)),
)

OPTIM_MUTANTS: tuple[Mutant, ...] = OPTIM_CONSTANTS + MUON + SCHEDULES
