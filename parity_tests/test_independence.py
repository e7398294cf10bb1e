"""The packages' boundaries. torch_ref stands alone: in a fresh interpreter where jax, jaxgpt,
flax, optax and orbax cannot be imported, every torch_ref module imports and a tiny model trains
one step. jaxgpt imports neither torch nor torch_ref nor jaxgpt_tools."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]

_BLOCKED = ("jax", "jaxlib", "jaxgpt", "flax", "optax", "orbax")

# Runs in the child: a meta-path finder refuses the blocked packages before any import.
_CHILD = f"""
import importlib.abc, sys
BLOCKED = {_BLOCKED!r}
class Refuse(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ImportError(f"{{name}} is blocked: torch_ref must stand alone")
sys.meta_path.insert(0, Refuse())

import torch
import torch_ref.config as cfg
from torch_ref import data, fp8, masks, model, muon, optim, presets, train

preset = presets.tiny_preset()
m = preset.model
torch.manual_seed(0)
gpt = model.GPT(m.vocab_size, m.num_layers, m.num_heads, m.model_dim, value_embed_slots=m.value_embed_slots,
                long_window_layers=m.long_window_layers, attention_free_layers=m.attention_free_layers)
optimizers = optim.build_optimizers(gpt, preset.optim)
inputs = torch.randint(0, m.vocab_size, (256,), dtype=torch.int32)
inputs[0] = cfg.EOT_ID
targets = torch.roll(inputs, -1).to(torch.int64)
before = [p.detach().clone() for p in gpt.parameters()]
loss = gpt(inputs, targets, 2)
loss.backward()
for opt in optimizers:
    opt.step()
changed = sum(not torch.equal(a, p) for a, p in zip(before, gpt.parameters()))
assert torch.isfinite(loss), loss
assert changed == len(before), (changed, len(before))
loaded = sorted(n for n in sys.modules if n.split(".")[0] in BLOCKED)
assert not loaded, loaded
print("ok", float(loss), changed)
"""


@pytest.mark.slow
def test_torch_ref_trains_with_jax_unimportable():
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-c", _CHILD], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    status, loss, changed = done.stdout.split()
    assert status == "ok" and 9.0 < float(loss) < 12.0  # ~ln(50257) = 10.8 at a fresh init
    assert int(changed) > 0


def test_no_torch_ref_source_names_jaxgpt_outside_comments_and_docstrings():
    """The acceptance grep `grep -rn jaxgpt torch_ref/` may only find prose, never an import."""
    for path in sorted((REPO_ROOT / "torch_ref").glob("*.py")):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("#", 1)[0].strip()
            assert not code.startswith(("import jax", "from jax", "import flax", "from flax", "import optax",
                                        "from optax", "import orbax", "from orbax")), f"{path.name}:{number}: {line}"


# jaxgpt needs neither torch (an extra: convert and checkpoint import it only to read or write a
# record `.pt`) nor torch_ref, nor the tools package built on it: every module imports without them.
_JAXGPT_CHILD = """
import importlib, importlib.abc, pkgutil, sys
BLOCKED = ("torch", "torch_ref", "jaxgpt_tools")
class Refuse(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ImportError(f"{name} is blocked: jaxgpt must import without it")
sys.meta_path.insert(0, Refuse())

import jaxgpt
names = sorted(info.name for info in pkgutil.walk_packages(jaxgpt.__path__, "jaxgpt."))
for name in names:
    importlib.import_module(name)
print(len(names))
"""


@pytest.mark.slow  # imports every jaxgpt module (jax, flax, optax, orbax) in a fresh interpreter
def test_every_jaxgpt_module_imports_without_torch_torch_ref_or_the_tools():
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    done = subprocess.run([sys.executable, "-c", _JAXGPT_CHILD], cwd=REPO_ROOT, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert int(done.stdout.split()[-1]) >= 25  # every module of the package was imported
