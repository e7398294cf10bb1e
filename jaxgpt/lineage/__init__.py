"""The lineage layer (docs/spec/LINEAGE.md): the four earlier records' (#8, #9, #15, #18) ways of
computing what Sub3Min computes, each a small named function or value, one module per concept,
chosen ONCE from a config's lineage switches; the record's modules take the chosen functions and
values and never read a switch.

  windows      a step's attention windows by mask, document ids, the backend a mask allows, the
               window the metrics record
  values       an attention layer's value mixing and its scalars (`lambdas`, #9's `lamb`, none)
  block_input  a block's input mixing and its `lambdas` (the record's; none before #9)
  skips        the U-net's plan and `skip_weights` (the record's; none before #11)
  numerics     RMSNorm's eps rule, the linear init bound, rotary, soft-cap, FP8 head, value tables
  variants     `model_variants(ModelConfig) -> ModelVariants`: all of the model's, resolved once
  optim        `optim_variants(OptimConfig) -> OptimVariants`: Muon's momentum and NS step, the cooldown
  stream       `stream_variants(TrainConfig) -> StreamVariants`: the window schedule, the data stream

Variants that have parameters create them under the record's names (`init_params`), so the
parameter tree is the same whichever module builds it.
"""

from jaxgpt.lineage.block_input import BLOCK_INPUTS, BlockInput
from jaxgpt.lineage.optim import OptimVariants, optim_variants
from jaxgpt.lineage.skips import SkipStep, skip_plan
from jaxgpt.lineage.stream import StreamVariants, stream_variants
from jaxgpt.lineage.values import VALUE_MIXINGS, ValueMixing, value_mixing
from jaxgpt.lineage.variants import ModelVariants, model_variants
from jaxgpt.lineage.windows import DOCUMENT_IDS, WINDOWS, attention_backend, logged_window

__all__ = [
    "BLOCK_INPUTS", "DOCUMENT_IDS", "VALUE_MIXINGS", "WINDOWS", "BlockInput", "ModelVariants", "OptimVariants",
    "SkipStep", "StreamVariants", "ValueMixing", "attention_backend", "logged_window", "model_variants",
    "optim_variants", "skip_plan", "stream_variants", "value_mixing",
]
