"""The lineage layer in PyTorch (docs/spec/LINEAGE.md; mirrors jaxgpt.lineage module for module):
the four earlier records' (#8, #9, #15, #18) ways of computing what Sub3Min computes, each a small
named function or value, one module per concept, chosen ONCE from a config's lineage switches;
the record's modules take the chosen functions and values and never read a switch.

  windows      a step's attention masks by mask kind, the window the metrics record
  values       an attention layer's value mixing and its scalars (`lambdas`, #9's `lamb`, none)
  block_input  a block's input mixing and its `lambdas` (the record's; none before #9)
  skips        the U-net's plan and `skip_weights` (the record's; none before #11)
  numerics     RMSNorm's eps rule, the linear init bound, rotary, soft-cap, FP8 head, tables
  variants     `model_variants(ModelConfig) -> ModelVariants`: all of the model's, resolved once
  optim        `optim_variants(OptimConfig) -> OptimVariants`: Muon's momentum and NS step, the cooldown
  stream       `stream_variants(TrainConfig) -> StreamVariants`: the window schedule, the data stream

Variants that have parameters create them under the record's names (`init_params`), so the
state dict is the same whichever module builds it.
"""

from torch_ref.lineage.block_input import BLOCK_INPUTS, BlockInput
from torch_ref.lineage.optim import OptimVariants, optim_variants
from torch_ref.lineage.skips import SkipStep
from torch_ref.lineage.stream import StreamVariants, stream_variants
from torch_ref.lineage.values import VALUE_MIXINGS, ValueMixing, value_mixing
from torch_ref.lineage.variants import ModelVariants, model_variants
from torch_ref.lineage.windows import MASKS, logged_window

__all__ = [
    "BLOCK_INPUTS", "MASKS", "VALUE_MIXINGS", "BlockInput", "ModelVariants", "OptimVariants", "SkipStep",
    "StreamVariants", "ValueMixing", "logged_window", "model_variants", "optim_variants", "stream_variants",
    "value_mixing",
]
