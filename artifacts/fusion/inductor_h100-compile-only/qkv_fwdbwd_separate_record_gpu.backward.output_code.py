# AOT ID: ['7_backward']
from ctypes import c_void_p, c_long, c_int
import torch
import math
import random
import os
import tempfile
from math import inf, nan
from cmath import nanj
from torch._inductor.hooks import run_intermediate_hooks
from torch._inductor.utils import maybe_profile
from torch._inductor.codegen.memory_planning import _align as align
from torch import device, empty_strided
from torch._inductor.async_compile import AsyncCompile
from torch._inductor.select_algorithm import extern_kernels
from torch._C._dynamo.guards import copy_if_misaligned
import triton
import triton.language as tl
from torch._inductor.runtime.triton_heuristics import start_graph, end_graph
from torch._C import _cuda_getCurrentRawStream as get_raw_stream

aten = torch.ops.aten
inductor_ops = torch.ops.inductor
_quantized = torch.ops._quantized
assert_size_stride = torch._C._dynamo.guards.assert_size_stride
assert_size_stride_grouped = torch._C._dynamo.guards.assert_size_stride_grouped
assert_alignment = torch._C._dynamo.guards.assert_alignment
empty_strided_cpu = torch._C._dynamo.guards._empty_strided_cpu
empty_strided_cpu_pinned = torch._C._dynamo.guards._empty_strided_cpu_pinned
empty_strided_cuda = torch._C._dynamo.guards._empty_strided_cuda
empty_strided_xpu = torch._C._dynamo.guards._empty_strided_xpu
empty_strided_mtia = torch._C._dynamo.guards._empty_strided_mtia
reinterpret_tensor = torch._C._dynamo.guards._reinterpret_tensor
alloc_from_pool = torch.ops.inductor._alloc_from_pool
async_compile = AsyncCompile()
empty_strided_p2p = torch._C._distributed_c10d._SymmetricMemory.empty_strided_p2p


# kernel path: <inductor cache>/4a/c4abrhu7dn43voywfrio4fqlv7i6z4b53wargjjdn5msn3ol74cu.py
# Topologically Sorted Source Nodes: [convert_element_type_17, slice_1, slice_2, neg, getitem_3, mul_12, getitem_2, mul_13, mul_14, add_5, mul_15, add_6, cat_2, convert_element_type_18, convert_element_type_19, linear_1, k, rms_norm_1, mul_16, mul_17, sum_1, div, mul_18, sub_2, mul_19, convert_element_type_21, convert_element_type_22, slice_3, slice_4, neg_1, mul_20, mul_21, mul_22, add_7, mul_23, add_8, cat_3, convert_element_type_23, convert_element_type_24, linear, q, rms_norm, mul_24, mul_25, sum_2, div_1, mul_26, sub_3, mul_27, convert_element_type_26], Original ATen: [aten._to_copy, aten.slice, aten.neg, aten.unsqueeze, aten.mul, aten.add, aten.cat, aten._fused_rms_norm_backward, aten._unsafe_view, aten.view, aten._fused_rms_norm]
# Source node to ATen node mapping:
#   add_5 => add_5
#   add_6 => add_6
#   add_7 => add_7
#   add_8 => add_8
#   cat_2 => cat_2
#   cat_3 => cat_3
#   convert_element_type_17 => convert_element_type_17
#   convert_element_type_18 => convert_element_type_18
#   convert_element_type_19 => convert_element_type_19
#   convert_element_type_21 => convert_element_type_21
#   convert_element_type_22 => convert_element_type_22
#   convert_element_type_23 => convert_element_type_23
#   convert_element_type_24 => convert_element_type_24
#   convert_element_type_26 => convert_element_type_26
#   div => div
#   div_1 => div_1
#   getitem_2 => unsqueeze, unsqueeze_1
#   getitem_3 => unsqueeze_2, unsqueeze_3
#   k => view_5
#   linear => view_1
#   linear_1 => view_4
#   mul_12 => mul_12
#   mul_13 => mul_13
#   mul_14 => mul_14
#   mul_15 => mul_15
#   mul_16 => mul_16
#   mul_17 => mul_17
#   mul_18 => mul_18
#   mul_19 => mul_19
#   mul_20 => mul_20
#   mul_21 => mul_21
#   mul_22 => mul_22
#   mul_23 => mul_23
#   mul_24 => mul_24
#   mul_25 => mul_25
#   mul_26 => mul_26
#   mul_27 => mul_27
#   neg => neg
#   neg_1 => neg_1
#   q => view_2
#   rms_norm => convert_element_type_9
#   rms_norm_1 => convert_element_type_13
#   slice_1 => slice_1
#   slice_2 => slice_2
#   slice_3 => slice_3
#   slice_4 => slice_4
#   sub_2 => sub_2
#   sub_3 => sub_3
#   sum_1 => sum_1
#   sum_2 => sum_2
# Graph fragment:
#   %tangents_2 : Tensor "bf16[1, 65536, 6, 128][50331648, 768, 128, 1]cuda:0" = PlaceHolder[target=tangents_2]
#   %primals_8 : Tensor "f32[65536, 64][64, 1]cuda:0" = PlaceHolder[target=primals_8]
#   %primals_7 : Tensor "f32[65536, 64][64, 1]cuda:0" = PlaceHolder[target=primals_7]
#   %tangents_1 : Tensor "bf16[1, 65536, 6, 128][50331648, 768, 128, 1]cuda:0" = PlaceHolder[target=tangents_1]
#   %mm_1 : Tensor "bf16[65536, 768][768, 1]cuda:0" = PlaceHolder[target=mm_1]
#   %rsqrt_1 : Tensor "f32[1, 65536, 6, 1][393216, 6, 1, 1]cuda:0" = PlaceHolder[target=rsqrt_1]
#   %convert_element_type_18 : Tensor "bf16[1, 65536, 6, 128][50331648, 768, 128, 1]cuda:0" = PlaceHolder[target=convert_element_type_18]
#   %sum_1 : Tensor "f32[1, 65536, 6, 1][393216, 6, 1, 393216]cuda:0" = PlaceHolder[target=sum_1]
#   %mm : Tensor "bf16[65536, 768][768, 1]cuda:0" = PlaceHolder[target=mm]
#   %rsqrt : Tensor "f32[1, 65536, 6, 1][393216, 6, 1, 1]cuda:0" = PlaceHolder[target=rsqrt]
#   %convert_element_type_23 : Tensor "bf16[1, 65536, 6, 128][50331648, 768, 128, 1]cuda:0" = PlaceHolder[target=convert_element_type_23]
#   %sum_2 : Tensor "f32[1, 65536, 6, 1][393216, 6, 1, 393216]cuda:0" = PlaceHolder[target=sum_2]
#   %convert_element_type_17 : Tensor "f32[1, 65536, 6, 128][50331648, 768, 128, 1]cuda:0"[num_users=2] = call_function[target=torch.ops.prims.convert_element_type.default](args = (%tangents_2, torch.float32), kwargs = {})
#   %slice_1 : Tensor "f32[1, 65536, 6, 64][50331648, 768, 128, 1]cuda:0"[num_users=2] = call_function[target=torch.ops.aten.slice.Tensor](args = (%convert_element_type_17, 3, 0, 64), kwargs = {})
#   %slice_2 : Tensor "f32[1, 65536, 6, 64][50331648, 768, 128, 1]cuda:0"[num_users=2] = call_function[target=torch.ops.aten.slice.Tensor](args = (%convert_element_type_17, 3, 64, 128), kwargs = {})
#   %neg : Tensor "f32[1, 65536, 6, 64][25165824, 384, 64, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.neg.default](args = (%slice_2,), kwargs = {})
#   %unsqueeze_2 : Tensor "f32[1, 65536, 64][4194304, 64, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.unsqueeze.default](args = (%primals_8, 0), kwargs = {})
#   %unsqueeze_3 : Tensor "f32[1, 65536, 1, 64][4194304, 64, 64, 1]cuda:0"[num_users=4] = call_function[target=torch.ops.aten.unsqueeze.default](args = (%unsqueeze_2, 2), kwargs = {})
#   %mul_12 : Tensor "f32[1, 65536, 6, 64][25165824, 384, 64, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%neg, %unsqueeze_3), kwargs = {})
#   %unsqueeze : Tensor "f32[1, 65536, 64][4194304, 64, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.unsqueeze.default](args = (%primals_7, 0), kwargs = {})
#   %unsqueeze_1 : Tensor "f32[1, 65536, 1, 64][4194304, 64, 64, 1]cuda:0"[num_users=4] = call_function[target=torch.ops.aten.unsqueeze.default](args = (%unsqueeze, 2), kwargs = {})
#   %mul_13 : Tensor "f32[1, 65536, 6, 64][25165824, 384, 64, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%slice_2, %unsqueeze_1), kwargs = {})
#   %mul_14 : Tensor "f32[1, 65536, 6, 64][25165824, 384, 64, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%slice_1, %unsqueeze_3), kwargs = {})
#   %add_5 : Tensor "f32[1, 65536, 6, 64][25165824, 384, 64, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.add.Tensor](args = (%mul_13, %mul_14), kwargs = {})
#   %mul_15 : Tensor "f32[1, 65536, 6, 64][25165824, 384, 64, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%slice_1, %unsqueeze_1), kwargs = {})
#   %add_6 : Tensor "f32[1, 65536, 6, 64][25165824, 384, 64, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.add.Tensor](args = (%mul_12, %mul_15), kwargs = {})
#   %cat_2 : Tensor "f32[1, 65536, 6, 128][50331648, 768, 128, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.cat.default](args = ([%add_6, %add_5], 3), kwargs = {})
#   %convert_element_type_18 : Tensor "bf16[1, 65536, 6, 128][50331648, 768, 128, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.prims.convert_element_type.default](args = (%cat_2, torch.bfloat16), kwargs = {})
#   %convert_element_type_19 : Tensor "f32[1, 65536, 6, 128][50331648, 768, 128, 1]cuda:0"[num_users=2] = call_function[target=torch.ops.prims.convert_element_type.default](args = (%convert_element_type_18, torch.float32), kwargs = {})
#   %view_4 : Tensor "bf16[1, 65536, 768][50331648, 768, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.reshape.default](args = (%mm_1, [1, 65536, 768]), kwargs = {})
#   %view_5 : Tensor "bf16[1, 65536, 6, 128][50331648, 768, 128, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.reshape.default](args = (%view_4, [1, 65536, 6, -1]), kwargs = {})
#   %convert_element_type_13 : Tensor "f32[1, 65536, 6, 128][50331648, 768, 128, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.prims.convert_element_type.default](args = (%view_5, torch.float32), kwargs = {})
#   %mul_16 : Tensor "f32[1, 65536, 6, 128][50331648, 768, 128, 1]cuda:0"[num_users=2] = call_function[target=torch.ops.aten.mul.Tensor](args = (%convert_element_type_13, %rsqrt_1), kwargs = {})
#   %mul_17 : Tensor "f32[1, 65536, 6, 128][50331648, 768, 128, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%mul_16, %convert_element_type_19), kwargs = {})
#   %sum_1 : Tensor "f32[1, 65536, 6, 1][393216, 6, 1, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.sum.dim_IntList](args = (%mul_17, [3], True), kwargs = {})
#   %div : Tensor "f32[1, 65536, 6, 128][50331648, 768, 128, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.div.Tensor](args = (%mul_16, 128), kwargs = {})
#   %mul_18 : Tensor "f32[1, 65536, 6, 128][50331648, 768, 128, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%div, %sum_1), kwargs = {})
#   %sub_2 : Tensor "f32[1, 65536, 6, 128][50331648, 768, 128, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.sub.Tensor](args = (%convert_element_type_19, %mul_18), kwargs = {})
#   %mul_19 : Tensor "f32[1, 65536, 6, 128][50331648, 768, 128, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%sub_2, %rsqrt_1), kwargs = {})
#   %convert_element_type_21 : Tensor "bf16[1, 65536, 6, 128][50331648, 768, 128, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.prims.convert_element_type.default](args = (%mul_19, torch.bfloat16), kwargs = {})
#   %convert_element_type_22 : Tensor "f32[1, 65536, 6, 128][50331648, 768, 128, 1]cuda:0"[num_users=2] = call_function[target=torch.ops.prims.convert_element_type.default](args = (%tangents_1, torch.float32), kwargs = {})
#   %slice_3 : Tensor "f32[1, 65536, 6, 64][50331648, 768, 128, 1]cuda:0"[num_users=2] = call_function[target=torch.ops.aten.slice.Tensor](args = (%convert_element_type_22, 3, 0, 64), kwargs = {})
#   %slice_4 : Tensor "f32[1, 65536, 6, 64][50331648, 768, 128, 1]cuda:0"[num_users=2] = call_function[target=torch.ops.aten.slice.Tensor](args = (%convert_element_type_22, 3, 64, 128), kwargs = {})
#   %neg_1 : Tensor "f32[1, 65536, 6, 64][25165824, 384, 64, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.neg.default](args = (%slice_4,), kwargs = {})
#   %mul_20 : Tensor "f32[1, 65536, 6, 64][25165824, 384, 64, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%neg_1, %unsqueeze_3), kwargs = {})
#   %mul_21 : Tensor "f32[1, 65536, 6, 64][25165824, 384, 64, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%slice_4, %unsqueeze_1), kwargs = {})
#   %mul_22 : Tensor "f32[1, 65536, 6, 64][25165824, 384, 64, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%slice_3, %unsqueeze_3), kwargs = {})
#   %add_7 : Tensor "f32[1, 65536, 6, 64][25165824, 384, 64, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.add.Tensor](args = (%mul_21, %mul_22), kwargs = {})
#   %mul_23 : Tensor "f32[1, 65536, 6, 64][25165824, 384, 64, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%slice_3, %unsqueeze_1), kwargs = {})
#   %add_8 : Tensor "f32[1, 65536, 6, 64][25165824, 384, 64, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.add.Tensor](args = (%mul_20, %mul_23), kwargs = {})
#   %cat_3 : Tensor "f32[1, 65536, 6, 128][50331648, 768, 128, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.cat.default](args = ([%add_8, %add_7], 3), kwargs = {})
#   %convert_element_type_23 : Tensor "bf16[1, 65536, 6, 128][50331648, 768, 128, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.prims.convert_element_type.default](args = (%cat_3, torch.bfloat16), kwargs = {})
#   %convert_element_type_24 : Tensor "f32[1, 65536, 6, 128][50331648, 768, 128, 1]cuda:0"[num_users=2] = call_function[target=torch.ops.prims.convert_element_type.default](args = (%convert_element_type_23, torch.float32), kwargs = {})
#   %view_1 : Tensor "bf16[1, 65536, 768][50331648, 768, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.reshape.default](args = (%mm, [1, 65536, 768]), kwargs = {})
#   %view_2 : Tensor "bf16[1, 65536, 6, 128][50331648, 768, 128, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.reshape.default](args = (%view_1, [1, 65536, 6, -1]), kwargs = {})
#   %convert_element_type_9 : Tensor "f32[1, 65536, 6, 128][50331648, 768, 128, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.prims.convert_element_type.default](args = (%view_2, torch.float32), kwargs = {})
#   %mul_24 : Tensor "f32[1, 65536, 6, 128][50331648, 768, 128, 1]cuda:0"[num_users=2] = call_function[target=torch.ops.aten.mul.Tensor](args = (%convert_element_type_9, %rsqrt), kwargs = {})
#   %mul_25 : Tensor "f32[1, 65536, 6, 128][50331648, 768, 128, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%mul_24, %convert_element_type_24), kwargs = {})
#   %sum_2 : Tensor "f32[1, 65536, 6, 1][393216, 6, 1, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.sum.dim_IntList](args = (%mul_25, [3], True), kwargs = {})
#   %div_1 : Tensor "f32[1, 65536, 6, 128][50331648, 768, 128, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.div.Tensor](args = (%mul_24, 128), kwargs = {})
#   %mul_26 : Tensor "f32[1, 65536, 6, 128][50331648, 768, 128, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%div_1, %sum_2), kwargs = {})
#   %sub_3 : Tensor "f32[1, 65536, 6, 128][50331648, 768, 128, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.sub.Tensor](args = (%convert_element_type_24, %mul_26), kwargs = {})
#   %mul_27 : Tensor "f32[1, 65536, 6, 128][50331648, 768, 128, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%sub_3, %rsqrt), kwargs = {})
#   %convert_element_type_26 : Tensor "bf16[1, 65536, 6, 128][50331648, 768, 128, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.prims.convert_element_type.default](args = (%mul_27, torch.bfloat16), kwargs = {})
#   return %convert_element_type_18,%convert_element_type_23,%sum_1,%convert_element_type_21,%sum_2,%convert_element_type_26
triton_per_fused__fused_rms_norm__fused_rms_norm_backward__to_copy__unsafe_view_add_cat_mul_neg_slice_unsqueeze_view_0 = async_compile.triton('triton_per_fused__fused_rms_norm__fused_rms_norm_backward__to_copy__unsafe_view_add_cat_mul_neg_slice_unsqueeze_view_0', '''
import triton
import triton.language as tl

from torch._inductor.runtime import triton_helpers, triton_heuristics
from torch._inductor.runtime.triton_helpers import libdevice, math as tl_math
from torch._inductor.runtime.hints import AutotuneHint, ReductionHint, TileHint, DeviceProperties
triton_helpers.set_driver_to_gpu()

@triton_heuristics.persistent_reduction(
    size_hints={'x': 524288, 'r0_': 128},
    reduction_hint=ReductionHint.INNER,
    filename=__file__,
    triton_meta={'signature': {'in_out_ptr0': '*bf16', 'in_out_ptr1': '*bf16', 'in_ptr0': '*bf16', 'in_ptr1': '*fp32', 'in_ptr2': '*fp32', 'in_ptr3': '*bf16', 'in_ptr4': '*bf16', 'in_ptr5': '*fp32', 'in_ptr6': '*bf16', 'in_ptr7': '*fp32', 'xnumel': 'i32', 'r0_numel': 'i32', 'XBLOCK': 'constexpr'}, 'device': DeviceProperties(type='cuda', index=0, multi_processor_count=132, cc=90, major=9, regs_per_multiprocessor=65536, max_threads_per_multi_processor=2048, max_threads_per_block=1024, warp_size=32), 'constants': {}, 'native_matmul': False, 'enable_fp_fusion': True, 'launch_pdl': False, 'disable_ftz': False, 'configs': [{(0,): [['tt.divisibility', 16]], (1,): [['tt.divisibility', 16]], (2,): [['tt.divisibility', 16]], (3,): [['tt.divisibility', 16]], (4,): [['tt.divisibility', 16]], (5,): [['tt.divisibility', 16]], (6,): [['tt.divisibility', 16]], (7,): [['tt.divisibility', 16]], (8,): [['tt.divisibility', 16]], (9,): [['tt.divisibility', 16]], (10,): [['tt.divisibility', 16]], (11,): [['tt.divisibility', 16]]}]},
    inductor_meta={'grid_type': 'Grid1D', 'kernel_name': 'triton_per_fused__fused_rms_norm__fused_rms_norm_backward__to_copy__unsafe_view_add_cat_mul_neg_slice_unsqueeze_view_0', 'mutated_arg_names': ['in_out_ptr0', 'in_out_ptr1'], 'optimize_mem': True, 'no_x_dim': None, 'atomic_add_found': False, 'num_load': 16, 'num_store': 2, 'num_reduction': 2, 'autotune_hints': set(), 'tiling_scores': {'x': 3145728, 'r0_': 1275068416}, 'backend_hash': '6391665CC2F0352C28A1562DF47BC332AB156A9FECD5CDBDF1B74F873D5CEE3D', 'assert_indirect_indexing': True, 'autotune_local_cache': True, 'autotune_pointwise': True, 'autotune_remote_cache': None, 'force_disable_caches': False, 'dynamic_scale_rblock': True, 'incremental_autotune': False, 'max_autotune': False, 'max_autotune_pointwise': False, 'min_split_scan_rblock': 256, 'spill_threshold': 16, 'store_cubin': False, 'deterministic': False, 'batch_invariant': False, 'force_filter_reduction_configs': False, 'mix_order_reduction_allow_multi_stages': True, 'dynamic_disable_pipelining': True, 'are_deterministic_algorithms_enabled': False}
)
@triton.jit
def triton_per_fused__fused_rms_norm__fused_rms_norm_backward__to_copy__unsafe_view_add_cat_mul_neg_slice_unsqueeze_view_0(in_out_ptr0, in_out_ptr1, in_ptr0, in_ptr1, in_ptr2, in_ptr3, in_ptr4, in_ptr5, in_ptr6, in_ptr7, xnumel, r0_numel, XBLOCK : tl.constexpr):
    xnumel = 393216
    r0_numel = 128
    R0_BLOCK: tl.constexpr = 128
    rnumel = r0_numel
    RBLOCK: tl.constexpr = R0_BLOCK
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:, None]
    xmask = tl.full([XBLOCK], True, tl.int1)[:, None]
    r0_index = tl.arange(0, R0_BLOCK)[None, :]
    r0_offset = 0
    r0_mask = tl.full([R0_BLOCK], True, tl.int1)[None, :]
    roffset = r0_offset
    rindex = r0_index
    r0_2 = r0_index
    x3 = xindex
    x1 = xindex // 6
    tmp56 = tl.load(in_ptr4 + (r0_2 + 128*x3), None, eviction_policy='evict_first').to(tl.float32)
    tmp58 = tl.load(in_ptr5 + (x3), None, eviction_policy='evict_last')
    tmp71 = tl.load(in_ptr6 + (r0_2 + 128*x3), None, eviction_policy='evict_first').to(tl.float32)
    tmp73 = tl.load(in_ptr7 + (x3), None, eviction_policy='evict_last')
    tmp0 = (r0_2).to(tl.int32)
    tmp1 = tl.full([1, 1], 0, tl.int64)
    tmp2 = tmp0 >= tmp1
    tmp3 = (r0_2).to(tl.int64)
    tmp4 = (tmp3).to(tl.int64)
    tmp5 = tl.full([1, 1], 64, tl.int64)
    tmp6 = tmp4 < tmp5
    tmp7 = tl.load(in_ptr0 + (64 + 128*x3 + (r0_2)), tmp6, eviction_policy='evict_last', other=0.0).to(tl.float32)
    tmp8 = tmp7.to(tl.float32)
    tmp9 = -tmp8
    tmp10 = tl.load(in_ptr1 + (64*x1 + (r0_2)), tmp6, eviction_policy='evict_last', other=0.0)
    tmp11 = tmp9 * tmp10
    tmp12 = tl.load(in_ptr0 + (128*x3 + (r0_2)), tmp6, eviction_policy='evict_last', other=0.0).to(tl.float32)
    tmp13 = tmp12.to(tl.float32)
    tmp14 = tl.load(in_ptr2 + (64*x1 + (r0_2)), tmp6, eviction_policy='evict_last', other=0.0)
    tmp15 = tmp13 * tmp14
    tmp16 = tmp11 + tmp15
    tmp17 = tl.full(tmp16.shape, 0.0, tmp16.dtype)
    tmp18 = tl.where(tmp6, tmp16, tmp17)
    tmp19 = tmp0 >= tmp5
    tmp20 = tl.full([1, 1], 128, tl.int64)
    tmp21 = tmp0 < tmp20
    tmp22 = tl.load(in_ptr0 + (64 + 128*x3 + ((-64) + r0_2)), tmp19, eviction_policy='evict_last', other=0.0).to(tl.float32)
    tmp23 = tmp22.to(tl.float32)
    tmp24 = tl.load(in_ptr2 + (64*x1 + ((-64) + r0_2)), tmp19, eviction_policy='evict_last', other=0.0)
    tmp25 = tmp23 * tmp24
    tmp26 = tl.load(in_ptr0 + (128*x3 + ((-64) + r0_2)), tmp19, eviction_policy='evict_last', other=0.0).to(tl.float32)
    tmp27 = tmp26.to(tl.float32)
    tmp28 = tl.load(in_ptr1 + (64*x1 + ((-64) + r0_2)), tmp19, eviction_policy='evict_last', other=0.0)
    tmp29 = tmp27 * tmp28
    tmp30 = tmp25 + tmp29
    tmp31 = tl.full(tmp30.shape, 0.0, tmp30.dtype)
    tmp32 = tl.where(tmp19, tmp30, tmp31)
    tmp33 = tl.where(tmp6, tmp18, tmp32)
    tmp34 = tmp33.to(tl.float32)
    tmp35 = tl.load(in_ptr3 + (64 + 128*x3 + (r0_2)), tmp6, eviction_policy='evict_last', other=0.0).to(tl.float32)
    tmp36 = tmp35.to(tl.float32)
    tmp37 = -tmp36
    tmp38 = tmp37 * tmp10
    tmp39 = tl.load(in_ptr3 + (128*x3 + (r0_2)), tmp6, eviction_policy='evict_last', other=0.0).to(tl.float32)
    tmp40 = tmp39.to(tl.float32)
    tmp41 = tmp40 * tmp14
    tmp42 = tmp38 + tmp41
    tmp43 = tl.full(tmp42.shape, 0.0, tmp42.dtype)
    tmp44 = tl.where(tmp6, tmp42, tmp43)
    tmp45 = tl.load(in_ptr3 + (64 + 128*x3 + ((-64) + r0_2)), tmp19, eviction_policy='evict_last', other=0.0).to(tl.float32)
    tmp46 = tmp45.to(tl.float32)
    tmp47 = tmp46 * tmp24
    tmp48 = tl.load(in_ptr3 + (128*x3 + ((-64) + r0_2)), tmp19, eviction_policy='evict_last', other=0.0).to(tl.float32)
    tmp49 = tmp48.to(tl.float32)
    tmp50 = tmp49 * tmp28
    tmp51 = tmp47 + tmp50
    tmp52 = tl.full(tmp51.shape, 0.0, tmp51.dtype)
    tmp53 = tl.where(tmp19, tmp51, tmp52)
    tmp54 = tl.where(tmp6, tmp44, tmp53)
    tmp55 = tmp54.to(tl.float32)
    tmp57 = tmp56.to(tl.float32)
    tmp59 = tmp57 * tmp58
    tmp60 = tmp34.to(tl.float32)
    tmp61 = tmp59 * tmp60
    tmp62 = tl.broadcast_to(tmp61, [XBLOCK, R0_BLOCK])
    tmp64 = tl.sum(tmp62, 1)[:, None].to(tl.float32)
    tmp65 = tl.full([1, 1], 0.0078125, tl.float32)
    tmp66 = tmp59 * tmp65
    tmp67 = tmp66 * tmp64
    tmp68 = tmp60 - tmp67
    tmp69 = tmp68 * tmp58
    tmp70 = tmp69.to(tl.float32)
    tmp72 = tmp71.to(tl.float32)
    tmp74 = tmp72 * tmp73
    tmp75 = tmp55.to(tl.float32)
    tmp76 = tmp74 * tmp75
    tmp77 = tl.broadcast_to(tmp76, [XBLOCK, R0_BLOCK])
    tmp79 = tl.sum(tmp77, 1)[:, None].to(tl.float32)
    tmp80 = tmp74 * tmp65
    tmp81 = tmp80 * tmp79
    tmp82 = tmp75 - tmp81
    tmp83 = tmp82 * tmp73
    tmp84 = tmp83.to(tl.float32)
    tl.store(in_out_ptr0 + (r0_2 + 128*x3), tmp70, None)
    tl.store(in_out_ptr1 + (r0_2 + 128*x3), tmp84, None)
''', device_str='cuda')


# kernel path: <inductor cache>/uc/cucsi7v35dcntikiwvjrox4nza7vbktgsw76wtqmsaoa7lyj7iy5.py
# Topologically Sorted Source Nodes: [getitem_1, mul_28, view_as, mul_29, sum_3, getitem, mul_30, linear_2, v, mul_31, sum_4, view_11, view_12], Original ATen: [aten.select, aten.mul, aten.view, aten.sum, aten._unsafe_view]
# Source node to ATen node mapping:
#   getitem => select
#   getitem_1 => select_1
#   linear_2 => view_7
#   mul_28 => mul_28
#   mul_29 => mul_29
#   mul_30 => mul_30
#   mul_31 => mul_31
#   sum_3 => sum_3
#   sum_4 => sum_4
#   v => view_8
#   view_11 => view_11
#   view_12 => view_12
#   view_as => view_9
# Graph fragment:
#   %tangents_3 : Tensor "bf16[1, 65536, 6, 128][50331648, 768, 128, 1]cuda:0" = PlaceHolder[target=tangents_3]
#   %primals_5 : Tensor "bf16[65536, 768][768, 1]cuda:0" = PlaceHolder[target=primals_5]
#   %mm_2 : Tensor "bf16[65536, 768][768, 1]cuda:0" = PlaceHolder[target=mm_2]
#   %primals_6 : Tensor "f32[2][1]cuda:0" = PlaceHolder[target=primals_6]
#   %select_1 : Tensor "f32[][]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.select.int](args = (%primals_6, 0, 1), kwargs = {})
#   %mul_28 : Tensor "bf16[1, 65536, 6, 128][50331648, 768, 128, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%tangents_3, %select_1), kwargs = {})
#   %view_9 : Tensor "bf16[1, 65536, 6, 128][50331648, 768, 128, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.reshape.default](args = (%primals_5, [1, 65536, 6, 128]), kwargs = {})
#   %mul_29 : Tensor "bf16[1, 65536, 6, 128][50331648, 768, 128, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%tangents_3, %view_9), kwargs = {})
#   %sum_3 : Tensor "bf16[][]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.sum.default](args = (%mul_29,), kwargs = {})
#   %select : Tensor "f32[][]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.select.int](args = (%primals_6, 0, 0), kwargs = {})
#   %mul_30 : Tensor "bf16[1, 65536, 6, 128][50331648, 768, 128, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%tangents_3, %select), kwargs = {})
#   %view_7 : Tensor "bf16[1, 65536, 768][50331648, 768, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.reshape.default](args = (%mm_2, [1, 65536, 768]), kwargs = {})
#   %view_8 : Tensor "bf16[1, 65536, 6, 128][50331648, 768, 128, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.reshape.default](args = (%view_7, [1, 65536, 6, -1]), kwargs = {})
#   %mul_31 : Tensor "bf16[1, 65536, 6, 128][50331648, 768, 128, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%tangents_3, %view_8), kwargs = {})
#   %sum_4 : Tensor "bf16[][]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.sum.default](args = (%mul_31,), kwargs = {})
#   %view_11 : Tensor "bf16[1, 65536, 768][50331648, 768, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.reshape.default](args = (%mul_30, [1, 65536, 768]), kwargs = {})
#   %view_12 : Tensor "bf16[65536, 768][768, 1]cuda:0"[num_users=2] = call_function[target=torch.ops.aten.reshape.default](args = (%view_11, [65536, 768]), kwargs = {})
#   return %buf5,%buf9,%view_12,%mul_28
triton_red_fused__unsafe_view_mul_select_sum_view_1 = async_compile.triton('triton_red_fused__unsafe_view_mul_select_sum_view_1', '''
import triton
import triton.language as tl

from torch._inductor.runtime import triton_helpers, triton_heuristics
from torch._inductor.runtime.triton_helpers import libdevice, math as tl_math
from torch._inductor.runtime.hints import AutotuneHint, ReductionHint, TileHint, DeviceProperties
triton_helpers.set_driver_to_gpu()

@triton_heuristics.reduction(
    size_hints={'x': 512, 'r0_': 131072},
    reduction_hint=ReductionHint.INNER,
    filename=__file__,
    triton_meta={'signature': {'in_ptr0': '*bf16', 'in_ptr1': '*bf16', 'in_ptr2': '*bf16', 'in_ptr3': '*fp32', 'out_ptr0': '*fp32', 'out_ptr1': '*fp32', 'out_ptr2': '*bf16', 'out_ptr3': '*bf16', 'xnumel': 'i32', 'r0_numel': 'i32', 'XBLOCK': 'constexpr', 'R0_BLOCK': 'constexpr'}, 'device': DeviceProperties(type='cuda', index=0, multi_processor_count=132, cc=90, major=9, regs_per_multiprocessor=65536, max_threads_per_multi_processor=2048, max_threads_per_block=1024, warp_size=32), 'constants': {}, 'native_matmul': False, 'enable_fp_fusion': True, 'launch_pdl': False, 'disable_ftz': False, 'configs': [{(0,): [['tt.divisibility', 16]], (1,): [['tt.divisibility', 16]], (2,): [['tt.divisibility', 16]], (3,): [['tt.divisibility', 16]], (4,): [['tt.divisibility', 16]], (5,): [['tt.divisibility', 16]], (6,): [['tt.divisibility', 16]], (7,): [['tt.divisibility', 16]], (8,): [['tt.divisibility', 16]], (9,): [['tt.divisibility', 16]]}]},
    inductor_meta={'grid_type': 'Grid1D', 'kernel_name': 'triton_red_fused__unsafe_view_mul_select_sum_view_1', 'mutated_arg_names': [], 'optimize_mem': True, 'no_x_dim': False, 'atomic_add_found': False, 'num_load': 5, 'num_store': 4, 'num_reduction': 2, 'autotune_hints': set(), 'tiling_scores': {'x': 8192, 'r0_': 704643072}, 'backend_hash': '6391665CC2F0352C28A1562DF47BC332AB156A9FECD5CDBDF1B74F873D5CEE3D', 'assert_indirect_indexing': True, 'autotune_local_cache': True, 'autotune_pointwise': True, 'autotune_remote_cache': None, 'force_disable_caches': False, 'dynamic_scale_rblock': True, 'incremental_autotune': False, 'max_autotune': False, 'max_autotune_pointwise': False, 'min_split_scan_rblock': 256, 'spill_threshold': 16, 'store_cubin': False, 'deterministic': False, 'batch_invariant': False, 'force_filter_reduction_configs': False, 'mix_order_reduction_allow_multi_stages': True, 'dynamic_disable_pipelining': True, 'are_deterministic_algorithms_enabled': False}
)
@triton.jit
def triton_red_fused__unsafe_view_mul_select_sum_view_1(in_ptr0, in_ptr1, in_ptr2, in_ptr3, out_ptr0, out_ptr1, out_ptr2, out_ptr3, xnumel, r0_numel, XBLOCK : tl.constexpr, R0_BLOCK : tl.constexpr):
    xnumel = 512
    r0_numel = 98304
    rnumel = r0_numel
    RBLOCK: tl.constexpr = R0_BLOCK
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:, None]
    xmask = xindex < xnumel
    r0_base = tl.arange(0, R0_BLOCK)[None, :]
    rbase = r0_base
    x0 = xindex
    _tmp4 = tl.full([XBLOCK, R0_BLOCK], 0, tl.float32)
    _tmp9 = tl.full([XBLOCK, R0_BLOCK], 0, tl.float32)
    tmp11 = tl.load(in_ptr3 + (0))
    tmp12 = tl.broadcast_to(tmp11, [1, 1])
    tmp15 = tl.load(in_ptr3 + (1))
    tmp16 = tl.broadcast_to(tmp15, [1, 1])
    for r0_offset in tl.range(0, r0_numel, R0_BLOCK):
        r0_index = r0_offset + r0_base
        r0_mask = r0_index < r0_numel
        roffset = r0_offset
        rindex = r0_index
        r0_1 = r0_index
        tmp0 = tl.load(in_ptr0 + (r0_1 + 98304*x0), r0_mask & xmask, eviction_policy='evict_first', other=0.0).to(tl.float32)
        tmp1 = tl.load(in_ptr1 + (r0_1 + 98304*x0), r0_mask & xmask, eviction_policy='evict_first', other=0.0).to(tl.float32)
        tmp6 = tl.load(in_ptr2 + (r0_1 + 98304*x0), r0_mask & xmask, eviction_policy='evict_first', other=0.0).to(tl.float32)
        tmp2 = tmp0 * tmp1
        tmp3 = tl.broadcast_to(tmp2, [XBLOCK, R0_BLOCK])
        tmp5 = _tmp4 + tmp3
        _tmp4 = tl.where(r0_mask & xmask, tmp5, _tmp4)
        tmp7 = tmp0 * tmp6
        tmp8 = tl.broadcast_to(tmp7, [XBLOCK, R0_BLOCK])
        tmp10 = _tmp9 + tmp8
        _tmp9 = tl.where(r0_mask & xmask, tmp10, _tmp9)
        tmp13 = tmp12.to(tl.float32)
        tmp14 = tmp0 * tmp13
        tmp17 = tmp16.to(tl.float32)
        tmp18 = tmp0 * tmp17
        tl.store(out_ptr2 + (r0_1 + 98304*x0), tmp14, r0_mask & xmask)
        tl.store(out_ptr3 + (r0_1 + 98304*x0), tmp18, r0_mask & xmask)
    tmp4 = tl.sum(_tmp4, 1)[:, None]
    tmp9 = tl.sum(_tmp9, 1)[:, None]
    tl.store(out_ptr0 + (x0), tmp4, xmask)
    tl.store(out_ptr1 + (x0), tmp9, xmask)
''', device_str='cuda')


# kernel path: <inductor cache>/at/catmtrdyw4b5mupghjxo6c5maa6jtg6zmhuccqyjbmd7ma5h7jiu.py
# Topologically Sorted Source Nodes: [view_as, mul_29, sum_3], Original ATen: [aten.view, aten.mul, aten.sum]
# Source node to ATen node mapping:
#   mul_29 => mul_29
#   sum_3 => sum_3
#   view_as => view_9
# Graph fragment:
#   %buf5 : Tensor "f32[512][1]cuda:0" = PlaceHolder[target=buf5]
#   %view_9 : Tensor "bf16[1, 65536, 6, 128][50331648, 768, 128, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.reshape.default](args = (%primals_5, [1, 65536, 6, 128]), kwargs = {})
#   %mul_29 : Tensor "bf16[1, 65536, 6, 128][50331648, 768, 128, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%tangents_3, %view_9), kwargs = {})
#   %sum_3 : Tensor "bf16[][]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.sum.default](args = (%mul_29,), kwargs = {})
#   return %sum_3
triton_per_fused_mul_sum_view_2 = async_compile.triton('triton_per_fused_mul_sum_view_2', '''
import triton
import triton.language as tl

from torch._inductor.runtime import triton_helpers, triton_heuristics
from torch._inductor.runtime.triton_helpers import libdevice, math as tl_math
from torch._inductor.runtime.hints import AutotuneHint, ReductionHint, TileHint, DeviceProperties
triton_helpers.set_driver_to_gpu()

@triton_heuristics.persistent_reduction(
    size_hints={'x': 1, 'r0_': 512},
    reduction_hint=ReductionHint.INNER,
    filename=__file__,
    triton_meta={'signature': {'in_ptr0': '*fp32', 'out_ptr0': '*bf16', 'xnumel': 'constexpr', 'r0_numel': 'i32', 'XBLOCK': 'constexpr'}, 'device': DeviceProperties(type='cuda', index=0, multi_processor_count=132, cc=90, major=9, regs_per_multiprocessor=65536, max_threads_per_multi_processor=2048, max_threads_per_block=1024, warp_size=32), 'constants': {'xnumel': 1}, 'native_matmul': False, 'enable_fp_fusion': True, 'launch_pdl': False, 'disable_ftz': False, 'configs': [{(0,): [['tt.divisibility', 16]], (1,): [['tt.divisibility', 16]], (3,): [['tt.divisibility', 16]]}]},
    inductor_meta={'grid_type': 'Grid1D', 'kernel_name': 'triton_per_fused_mul_sum_view_2', 'mutated_arg_names': [], 'optimize_mem': True, 'no_x_dim': None, 'atomic_add_found': False, 'num_load': 1, 'num_store': 1, 'num_reduction': 1, 'autotune_hints': set(), 'tiling_scores': {'r0_': 2048}, 'backend_hash': '6391665CC2F0352C28A1562DF47BC332AB156A9FECD5CDBDF1B74F873D5CEE3D', 'assert_indirect_indexing': True, 'autotune_local_cache': True, 'autotune_pointwise': True, 'autotune_remote_cache': None, 'force_disable_caches': False, 'dynamic_scale_rblock': True, 'incremental_autotune': False, 'max_autotune': False, 'max_autotune_pointwise': False, 'min_split_scan_rblock': 256, 'spill_threshold': 16, 'store_cubin': False, 'deterministic': False, 'batch_invariant': False, 'force_filter_reduction_configs': False, 'mix_order_reduction_allow_multi_stages': True, 'dynamic_disable_pipelining': True, 'are_deterministic_algorithms_enabled': False}
)
@triton.jit
def triton_per_fused_mul_sum_view_2(in_ptr0, out_ptr0, xnumel, r0_numel, XBLOCK : tl.constexpr):
    xnumel = 1
    r0_numel = 512
    R0_BLOCK: tl.constexpr = 512
    rnumel = r0_numel
    RBLOCK: tl.constexpr = R0_BLOCK
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:, None]
    xmask = tl.full([XBLOCK], True, tl.int1)[:, None]
    r0_index = tl.arange(0, R0_BLOCK)[None, :]
    r0_offset = 0
    r0_mask = tl.full([R0_BLOCK], True, tl.int1)[None, :]
    roffset = r0_offset
    rindex = r0_index
    r0_0 = r0_index
    tmp0 = tl.load(in_ptr0 + (r0_0), None, eviction_policy='evict_first')
    tmp1 = tl.broadcast_to(tmp0, [XBLOCK, R0_BLOCK])
    tmp3 = tl.sum(tmp1, 1)[:, None].to(tl.float32)
    tl.store(out_ptr0 + (tl.full([1, 1], 0, tl.int32).broadcast_to(XBLOCK, 1)), tmp3, None)
''', device_str='cuda')


# kernel path: <inductor cache>/xo/cxow7hxzely2mz4z2nx5c67ujjfs53n4nljjonlmyjl23ux3lpas.py
# Topologically Sorted Source Nodes: [convert_element_type_27, full_default, convert_element_type_28, add_9], Original ATen: [aten._to_copy, aten.select_backward, aten.add]
# Source node to ATen node mapping:
#   add_9 => add_9
#   convert_element_type_27 => convert_element_type_27
#   convert_element_type_28 => convert_element_type_28
#   full_default => full_default
# Graph fragment:
#   %sum_3 : Tensor "bf16[][]cuda:0" = PlaceHolder[target=sum_3]
#   %sum_4 : Tensor "bf16[][]cuda:0" = PlaceHolder[target=sum_4]
#   %convert_element_type_27 : Tensor "f32[][]cuda:0"[num_users=1] = call_function[target=torch.ops.prims.convert_element_type.default](args = (%sum_3, torch.float32), kwargs = {})
#   %full_default : Tensor "f32[2][1]cuda:0"[num_users=2] = call_function[target=torch.ops.aten.full.default](args = ([2], 0), kwargs = {dtype: torch.float32, layout: torch.strided, device: cuda:0, pin_memory: False})
#   %select_scatter_default : Tensor "f32[2][1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.select_scatter.default](args = (%full_default, %convert_element_type_27, 0, 1), kwargs = {})
#   %convert_element_type_28 : Tensor "f32[][]cuda:0"[num_users=1] = call_function[target=torch.ops.prims.convert_element_type.default](args = (%sum_4, torch.float32), kwargs = {})
#   %select_scatter_default_1 : Tensor "f32[2][1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.select_scatter.default](args = (%full_default, %convert_element_type_28, 0, 0), kwargs = {})
#   %add_9 : Tensor "f32[2][1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.add.Tensor](args = (%select_scatter_default, %select_scatter_default_1), kwargs = {})
#   return %add_9
triton_poi_fused__to_copy_add_select_backward_3 = async_compile.triton('triton_poi_fused__to_copy_add_select_backward_3', '''
import triton
import triton.language as tl

from torch._inductor.runtime import triton_helpers, triton_heuristics
from torch._inductor.runtime.triton_helpers import libdevice, math as tl_math
from torch._inductor.runtime.hints import AutotuneHint, ReductionHint, TileHint, DeviceProperties
triton_helpers.set_driver_to_gpu()

@triton_heuristics.pointwise(
    size_hints={'x': 2}, 
    filename=__file__,
    triton_meta={'signature': {'in_ptr0': '*bf16', 'in_ptr1': '*bf16', 'out_ptr0': '*fp32', 'xnumel': 'i32', 'XBLOCK': 'constexpr'}, 'device': DeviceProperties(type='cuda', index=0, multi_processor_count=132, cc=90, major=9, regs_per_multiprocessor=65536, max_threads_per_multi_processor=2048, max_threads_per_block=1024, warp_size=32), 'constants': {}, 'native_matmul': False, 'enable_fp_fusion': True, 'launch_pdl': False, 'disable_ftz': False, 'configs': [{(0,): [['tt.divisibility', 16]], (1,): [['tt.divisibility', 16]], (2,): [['tt.divisibility', 16]]}]},
    inductor_meta={'grid_type': 'Grid1D', 'kernel_name': 'triton_poi_fused__to_copy_add_select_backward_3', 'mutated_arg_names': [], 'optimize_mem': True, 'no_x_dim': False, 'atomic_add_found': False, 'num_load': 2, 'num_store': 1, 'num_reduction': 0, 'autotune_hints': set(), 'tiling_scores': {'x': 4}, 'backend_hash': '6391665CC2F0352C28A1562DF47BC332AB156A9FECD5CDBDF1B74F873D5CEE3D', 'assert_indirect_indexing': True, 'autotune_local_cache': True, 'autotune_pointwise': True, 'autotune_remote_cache': None, 'force_disable_caches': False, 'dynamic_scale_rblock': True, 'incremental_autotune': False, 'max_autotune': False, 'max_autotune_pointwise': False, 'min_split_scan_rblock': 256, 'spill_threshold': 16, 'store_cubin': False, 'deterministic': False, 'batch_invariant': False, 'force_filter_reduction_configs': False, 'mix_order_reduction_allow_multi_stages': True, 'dynamic_disable_pipelining': True, 'are_deterministic_algorithms_enabled': False},
    min_elem_per_thread=0
)
@triton.jit
def triton_poi_fused__to_copy_add_select_backward_3(in_ptr0, in_ptr1, out_ptr0, xnumel, XBLOCK : tl.constexpr):
    xnumel = 2
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:]
    xmask = xindex < xnumel
    x0 = xindex
    tmp3 = tl.load(in_ptr0 + (0)).to(tl.float32)
    tmp4 = tl.broadcast_to(tmp3, [XBLOCK])
    tmp10 = tl.load(in_ptr1 + (0)).to(tl.float32)
    tmp11 = tl.broadcast_to(tmp10, [XBLOCK])
    tmp0 = (x0).to(tl.int32)
    tmp1 = tl.full([1], 1, tl.int32)
    tmp2 = tmp0 == tmp1
    tmp5 = tmp4.to(tl.float32)
    tmp6 = tl.full([1], 0.0, tl.float32)
    tmp7 = tl.where(tmp2, tmp5, tmp6)
    tmp8 = tl.full([1], 0, tl.int32)
    tmp9 = tmp0 == tmp8
    tmp12 = tmp11.to(tl.float32)
    tmp13 = tl.where(tmp9, tmp12, tmp6)
    tmp14 = tmp7 + tmp13
    tl.store(out_ptr0 + (x0), tmp14, xmask)
''', device_str='cuda')


# kernel path: <inductor cache>/ia/ciadlqyyjuefmdnj56kloi6awe2bzj3ngvjbfb7hog2tez4an2wu.py
# Topologically Sorted Source Nodes: [convert_element_type_33], Original ATen: [aten._to_copy]
# Source node to ATen node mapping:
#   convert_element_type_33 => convert_element_type_33
# Graph fragment:
#   %mm_3 : Tensor "bf16[768, 768][768, 1]cuda:0" = PlaceHolder[target=mm_3]
#   %convert_element_type_33 : Tensor "f32[768, 768][768, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.prims.convert_element_type.default](args = (%mm_3, torch.float32), kwargs = {})
#   return %convert_element_type_33
triton_poi_fused__to_copy_4 = async_compile.triton('triton_poi_fused__to_copy_4', '''
import triton
import triton.language as tl

from torch._inductor.runtime import triton_helpers, triton_heuristics
from torch._inductor.runtime.triton_helpers import libdevice, math as tl_math
from torch._inductor.runtime.hints import AutotuneHint, ReductionHint, TileHint, DeviceProperties
triton_helpers.set_driver_to_gpu()

@triton_heuristics.pointwise(
    size_hints={'x': 1048576}, 
    filename=__file__,
    triton_meta={'signature': {'in_ptr0': '*bf16', 'out_ptr0': '*fp32', 'xnumel': 'i32', 'XBLOCK': 'constexpr'}, 'device': DeviceProperties(type='cuda', index=0, multi_processor_count=132, cc=90, major=9, regs_per_multiprocessor=65536, max_threads_per_multi_processor=2048, max_threads_per_block=1024, warp_size=32), 'constants': {}, 'native_matmul': False, 'enable_fp_fusion': True, 'launch_pdl': False, 'disable_ftz': False, 'configs': [{(0,): [['tt.divisibility', 16]], (1,): [['tt.divisibility', 16]], (2,): [['tt.divisibility', 16]]}]},
    inductor_meta={'grid_type': 'Grid1D', 'kernel_name': 'triton_poi_fused__to_copy_4', 'mutated_arg_names': [], 'optimize_mem': True, 'no_x_dim': False, 'atomic_add_found': False, 'num_load': 1, 'num_store': 1, 'num_reduction': 0, 'autotune_hints': set(), 'tiling_scores': {'x': 5898240}, 'backend_hash': '6391665CC2F0352C28A1562DF47BC332AB156A9FECD5CDBDF1B74F873D5CEE3D', 'assert_indirect_indexing': True, 'autotune_local_cache': True, 'autotune_pointwise': True, 'autotune_remote_cache': None, 'force_disable_caches': False, 'dynamic_scale_rblock': True, 'incremental_autotune': False, 'max_autotune': False, 'max_autotune_pointwise': False, 'min_split_scan_rblock': 256, 'spill_threshold': 16, 'store_cubin': False, 'deterministic': False, 'batch_invariant': False, 'force_filter_reduction_configs': False, 'mix_order_reduction_allow_multi_stages': True, 'dynamic_disable_pipelining': True, 'are_deterministic_algorithms_enabled': False},
    min_elem_per_thread=0
)
@triton.jit
def triton_poi_fused__to_copy_4(in_ptr0, out_ptr0, xnumel, XBLOCK : tl.constexpr):
    xnumel = 589824
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:]
    xmask = tl.full([XBLOCK], True, tl.int1)[:]
    x0 = xindex
    tmp0 = tl.load(in_ptr0 + (x0), None).to(tl.float32)
    tmp1 = tmp0.to(tl.float32)
    tl.store(out_ptr0 + (x0), tmp1, None)
''', device_str='cuda')


# kernel path: <inductor cache>/i5/ci5kl47ely37nlhcqiirq3hsb7gqn7hdyvdou5jddso3tdf3tlgt.py
# Topologically Sorted Source Nodes: [view_13, view_16, add_10, view_19, add_11], Original ATen: [aten.view, aten.add]
# Source node to ATen node mapping:
#   add_10 => add_10
#   add_11 => add_11
#   view_13 => view_13
#   view_16 => view_16
#   view_19 => view_19
# Graph fragment:
#   %mm_4 : Tensor "bf16[65536, 768][768, 1]cuda:0" = PlaceHolder[target=mm_4]
#   %mm_6 : Tensor "bf16[65536, 768][768, 1]cuda:0" = PlaceHolder[target=mm_6]
#   %mm_8 : Tensor "bf16[65536, 768][768, 1]cuda:0" = PlaceHolder[target=mm_8]
#   %view_13 : Tensor "bf16[1, 65536, 768][50331648, 768, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.reshape.default](args = (%mm_4, [1, 65536, 768]), kwargs = {})
#   %view_16 : Tensor "bf16[1, 65536, 768][50331648, 768, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.reshape.default](args = (%mm_6, [1, 65536, 768]), kwargs = {})
#   %add_10 : Tensor "bf16[1, 65536, 768][50331648, 768, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.add.Tensor](args = (%view_13, %view_16), kwargs = {})
#   %view_19 : Tensor "bf16[1, 65536, 768][50331648, 768, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.reshape.default](args = (%mm_8, [1, 65536, 768]), kwargs = {})
#   %add_11 : Tensor "bf16[1, 65536, 768][50331648, 768, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.add.Tensor](args = (%add_10, %view_19), kwargs = {})
#   return %add_11
triton_poi_fused_add_view_5 = async_compile.triton('triton_poi_fused_add_view_5', '''
import triton
import triton.language as tl

from torch._inductor.runtime import triton_helpers, triton_heuristics
from torch._inductor.runtime.triton_helpers import libdevice, math as tl_math
from torch._inductor.runtime.hints import AutotuneHint, ReductionHint, TileHint, DeviceProperties
triton_helpers.set_driver_to_gpu()

@triton_heuristics.pointwise(
    size_hints={'x': 67108864}, 
    filename=__file__,
    triton_meta={'signature': {'in_out_ptr0': '*bf16', 'in_ptr0': '*bf16', 'in_ptr1': '*bf16', 'xnumel': 'i32', 'XBLOCK': 'constexpr'}, 'device': DeviceProperties(type='cuda', index=0, multi_processor_count=132, cc=90, major=9, regs_per_multiprocessor=65536, max_threads_per_multi_processor=2048, max_threads_per_block=1024, warp_size=32), 'constants': {}, 'native_matmul': False, 'enable_fp_fusion': True, 'launch_pdl': False, 'disable_ftz': False, 'configs': [{(0,): [['tt.divisibility', 16]], (1,): [['tt.divisibility', 16]], (2,): [['tt.divisibility', 16]], (3,): [['tt.divisibility', 16]]}]},
    inductor_meta={'grid_type': 'Grid1D', 'kernel_name': 'triton_poi_fused_add_view_5', 'mutated_arg_names': ['in_out_ptr0'], 'optimize_mem': True, 'no_x_dim': False, 'atomic_add_found': False, 'num_load': 3, 'num_store': 1, 'num_reduction': 0, 'autotune_hints': set(), 'tiling_scores': {'x': 503316480}, 'backend_hash': '6391665CC2F0352C28A1562DF47BC332AB156A9FECD5CDBDF1B74F873D5CEE3D', 'assert_indirect_indexing': True, 'autotune_local_cache': True, 'autotune_pointwise': True, 'autotune_remote_cache': None, 'force_disable_caches': False, 'dynamic_scale_rblock': True, 'incremental_autotune': False, 'max_autotune': False, 'max_autotune_pointwise': False, 'min_split_scan_rblock': 256, 'spill_threshold': 16, 'store_cubin': False, 'deterministic': False, 'batch_invariant': False, 'force_filter_reduction_configs': False, 'mix_order_reduction_allow_multi_stages': True, 'dynamic_disable_pipelining': True, 'are_deterministic_algorithms_enabled': False},
    min_elem_per_thread=0
)
@triton.jit
def triton_poi_fused_add_view_5(in_out_ptr0, in_ptr0, in_ptr1, xnumel, XBLOCK : tl.constexpr):
    xnumel = 50331648
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:]
    xmask = tl.full([XBLOCK], True, tl.int1)[:]
    x0 = xindex
    tmp0 = tl.load(in_out_ptr0 + (x0), None).to(tl.float32)
    tmp1 = tl.load(in_ptr0 + (x0), None).to(tl.float32)
    tmp3 = tl.load(in_ptr1 + (x0), None).to(tl.float32)
    tmp2 = tmp0 + tmp1
    tmp4 = tmp2 + tmp3
    tl.store(in_out_ptr0 + (x0), tmp4, None)
''', device_str='cuda')


async_compile.wait(globals())
del async_compile

class Runner:
    def __init__(self, partitions):
        self.partitions = partitions

    def recursively_apply_fns(self, fns):
        new_callables = []
        for fn, c in zip(fns, self.partitions):
            new_callables.append(fn(c))
        self.partitions = new_callables

    def call(self, args):
        primals_5, primals_6, primals_7, primals_8, view, mm, mm_1, mm_2, rsqrt, rsqrt_1, permute_5, permute_9, permute_13, tangents_1, tangents_2, tangents_3 = args
        args.clear()
        assert_size_stride_grouped((tangents_2, primals_8, primals_7, tangents_1, mm_1, rsqrt_1, mm, rsqrt), ((1, 65536, 6, 128), (65536, 64), (65536, 64), (1, 65536, 6, 128), (65536, 768), (1, 65536, 6, 1), (65536, 768), (1, 65536, 6, 1)), ((50331648, 768, 128, 1), (64, 1), (64, 1), (50331648, 768, 128, 1), (768, 1), (393216, 6, 1, 1), (768, 1), (393216, 6, 1, 1)), 'input')
        with torch.cuda._DeviceGuard(0):
            torch.cuda.set_device(0)
            tangents_2 = copy_if_misaligned(tangents_2)
            tangents_1 = copy_if_misaligned(tangents_1)
            buf0 = empty_strided_cuda((1, 65536, 6, 128), (50331648, 768, 128, 1), torch.bfloat16)
            buf2 = empty_strided_cuda((1, 65536, 6, 128), (50331648, 768, 128, 1), torch.bfloat16)
            buf16 = buf0; del buf0  # reuse
            buf20 = buf2; del buf2  # reuse
            # Topologically Sorted Source Nodes: [convert_element_type_17, slice_1, slice_2, neg, getitem_3, mul_12, getitem_2, mul_13, mul_14, add_5, mul_15, add_6, cat_2, convert_element_type_18, convert_element_type_19, linear_1, k, rms_norm_1, mul_16, mul_17, sum_1, div, mul_18, sub_2, mul_19, convert_element_type_21, convert_element_type_22, slice_3, slice_4, neg_1, mul_20, mul_21, mul_22, add_7, mul_23, add_8, cat_3, convert_element_type_23, convert_element_type_24, linear, q, rms_norm, mul_24, mul_25, sum_2, div_1, mul_26, sub_3, mul_27, convert_element_type_26], Original ATen: [aten._to_copy, aten.slice, aten.neg, aten.unsqueeze, aten.mul, aten.add, aten.cat, aten._fused_rms_norm_backward, aten._unsafe_view, aten.view, aten._fused_rms_norm]
            raw_stream0 = get_raw_stream(0)
            triton_per_fused__fused_rms_norm__fused_rms_norm_backward__to_copy__unsafe_view_add_cat_mul_neg_slice_unsqueeze_view_0.run(buf16, buf20, tangents_2, primals_8, primals_7, tangents_1, mm_1, rsqrt_1, mm, rsqrt, 393216, 128, stream=raw_stream0)
            del mm
            del mm_1
            del primals_7
            del primals_8
            del rsqrt
            del rsqrt_1
            del tangents_1
            del tangents_2
            assert_size_stride_grouped((tangents_3, primals_5, mm_2, primals_6), ((1, 65536, 6, 128), (65536, 768), (65536, 768), (2, )), ((50331648, 768, 128, 1), (768, 1), (768, 1), (1, )), 'input')
            tangents_3 = copy_if_misaligned(tangents_3)
            buf5 = empty_strided_cuda((512, ), (1, ), torch.float32)
            buf9 = empty_strided_cuda((512, ), (1, ), torch.float32)
            buf12 = empty_strided_cuda((65536, 768), (768, 1), torch.bfloat16)
            buf7 = empty_strided_cuda((1, 65536, 6, 128), (50331648, 768, 128, 1), torch.bfloat16)
            # Topologically Sorted Source Nodes: [getitem_1, mul_28, view_as, mul_29, sum_3, getitem, mul_30, linear_2, v, mul_31, sum_4, view_11, view_12], Original ATen: [aten.select, aten.mul, aten.view, aten.sum, aten._unsafe_view]
            raw_stream0 = get_raw_stream(0)
            triton_red_fused__unsafe_view_mul_select_sum_view_1.run(tangents_3, primals_5, mm_2, primals_6, buf5, buf9, buf12, buf7, 512, 98304, stream=raw_stream0)
            del mm_2
            del primals_5
            del primals_6
            del tangents_3
            buf6 = empty_strided_cuda((), (), torch.bfloat16)
            # Topologically Sorted Source Nodes: [view_as, mul_29, sum_3], Original ATen: [aten.view, aten.mul, aten.sum]
            raw_stream0 = get_raw_stream(0)
            triton_per_fused_mul_sum_view_2.run(buf5, buf6, 1, 512, stream=raw_stream0)
            del buf5
            buf10 = empty_strided_cuda((), (), torch.bfloat16)
            # Topologically Sorted Source Nodes: [linear_2, v, mul_31, sum_4], Original ATen: [aten._unsafe_view, aten.view, aten.mul, aten.sum]
            raw_stream0 = get_raw_stream(0)
            triton_per_fused_mul_sum_view_2.run(buf9, buf10, 1, 512, stream=raw_stream0)
            del buf9
            buf11 = empty_strided_cuda((2, ), (1, ), torch.float32)
            # Topologically Sorted Source Nodes: [convert_element_type_27, full_default, convert_element_type_28, add_9], Original ATen: [aten._to_copy, aten.select_backward, aten.add]
            raw_stream0 = get_raw_stream(0)
            triton_poi_fused__to_copy_add_select_backward_3.run(buf6, buf10, buf11, 2, stream=raw_stream0)
            del buf10
            del buf6
            assert_size_stride(view, (65536, 768), (768, 1), 'input')
            buf13 = empty_strided_cuda((768, 768), (768, 1), torch.bfloat16)
            # Topologically Sorted Source Nodes: [permute_3, mm_3], Original ATen: [aten.t, aten.mm]
            extern_kernels.mm(reinterpret_tensor(buf12, (768, 65536), (1, 768), 0), view, out=buf13)
            assert_size_stride(permute_5, (768, 768), (768, 1), 'input')
            buf14 = empty_strided_cuda((65536, 768), (768, 1), torch.bfloat16)
            # Topologically Sorted Source Nodes: [mm_4], Original ATen: [aten.mm]
            extern_kernels.mm(buf12, permute_5, out=buf14)
            del permute_5
            buf15 = empty_strided_cuda((768, 768), (768, 1), torch.float32)
            # Topologically Sorted Source Nodes: [convert_element_type_33], Original ATen: [aten._to_copy]
            raw_stream0 = get_raw_stream(0)
            triton_poi_fused__to_copy_4.run(buf13, buf15, 589824, stream=raw_stream0)
            buf17 = buf13; del buf13  # reuse
            # Topologically Sorted Source Nodes: [convert_element_type_19, linear_1, k, rms_norm_1, mul_16, div, mul_18, sub_2, mul_19, convert_element_type_21, view_14, view_15, permute_7, mm_5], Original ATen: [aten._fused_rms_norm_backward, aten._unsafe_view, aten.view, aten._fused_rms_norm, aten.t, aten.mm]
            extern_kernels.mm(reinterpret_tensor(buf16, (768, 65536), (1, 768), 0), view, out=buf17)
            assert_size_stride(permute_9, (768, 768), (768, 1), 'input')
            buf18 = buf12; del buf12  # reuse
            # Topologically Sorted Source Nodes: [convert_element_type_19, linear_1, k, rms_norm_1, mul_16, div, mul_18, sub_2, mul_19, convert_element_type_21, view_14, view_15, mm_6], Original ATen: [aten._fused_rms_norm_backward, aten._unsafe_view, aten.view, aten._fused_rms_norm, aten.mm]
            extern_kernels.mm(reinterpret_tensor(buf16, (65536, 768), (768, 1), 0), permute_9, out=buf18)
            del permute_9
            buf19 = empty_strided_cuda((768, 768), (768, 1), torch.float32)
            # Topologically Sorted Source Nodes: [convert_element_type_38], Original ATen: [aten._to_copy]
            raw_stream0 = get_raw_stream(0)
            triton_poi_fused__to_copy_4.run(buf17, buf19, 589824, stream=raw_stream0)
            buf21 = buf17; del buf17  # reuse
            # Topologically Sorted Source Nodes: [convert_element_type_24, linear, q, rms_norm, mul_24, div_1, mul_26, sub_3, mul_27, convert_element_type_26, view_17, view_18, permute_11, mm_7], Original ATen: [aten._fused_rms_norm_backward, aten._unsafe_view, aten.view, aten._fused_rms_norm, aten.t, aten.mm]
            extern_kernels.mm(reinterpret_tensor(buf20, (768, 65536), (1, 768), 0), view, out=buf21)
            del view
            assert_size_stride(permute_13, (768, 768), (768, 1), 'input')
            buf22 = reinterpret_tensor(buf16, (65536, 768), (768, 1), 0); del buf16  # reuse
            # Topologically Sorted Source Nodes: [convert_element_type_24, linear, q, rms_norm, mul_24, div_1, mul_26, sub_3, mul_27, convert_element_type_26, view_17, view_18, mm_8], Original ATen: [aten._fused_rms_norm_backward, aten._unsafe_view, aten.view, aten._fused_rms_norm, aten.mm]
            extern_kernels.mm(reinterpret_tensor(buf20, (65536, 768), (768, 1), 0), permute_13, out=buf22)
            del buf20
            del permute_13
            buf23 = reinterpret_tensor(buf14, (1, 65536, 768), (50331648, 768, 1), 0); del buf14  # reuse
            # Topologically Sorted Source Nodes: [view_13, view_16, add_10, view_19, add_11], Original ATen: [aten.view, aten.add]
            raw_stream0 = get_raw_stream(0)
            triton_poi_fused_add_view_5.run(buf23, buf18, buf22, 50331648, stream=raw_stream0)
            del buf18
            del buf22
            buf24 = empty_strided_cuda((768, 768), (768, 1), torch.float32)
            # Topologically Sorted Source Nodes: [convert_element_type_43], Original ATen: [aten._to_copy]
            raw_stream0 = get_raw_stream(0)
            triton_poi_fused__to_copy_4.run(buf21, buf24, 589824, stream=raw_stream0)
            del buf21
        return (buf23, buf24, buf19, buf15, reinterpret_tensor(buf7, (65536, 768), (768, 1), 0), buf11, None, None, )

runner = Runner(partitions=[])
call = runner.call
recursively_apply_fns = runner.recursively_apply_fns


def get_args():
    from torch._dynamo.testing import rand_strided
    primals_5 = rand_strided((65536, 768), (768, 1), device='cuda:0', dtype=torch.bfloat16)
    primals_6 = rand_strided((2, ), (1, ), device='cuda:0', dtype=torch.float32)
    primals_7 = rand_strided((65536, 64), (64, 1), device='cuda:0', dtype=torch.float32)
    primals_8 = rand_strided((65536, 64), (64, 1), device='cuda:0', dtype=torch.float32)
    view = rand_strided((65536, 768), (768, 1), device='cuda:0', dtype=torch.bfloat16)
    mm = rand_strided((65536, 768), (768, 1), device='cuda:0', dtype=torch.bfloat16)
    mm_1 = rand_strided((65536, 768), (768, 1), device='cuda:0', dtype=torch.bfloat16)
    mm_2 = rand_strided((65536, 768), (768, 1), device='cuda:0', dtype=torch.bfloat16)
    rsqrt = rand_strided((1, 65536, 6, 1), (393216, 6, 1, 1), device='cuda:0', dtype=torch.float32)
    rsqrt_1 = rand_strided((1, 65536, 6, 1), (393216, 6, 1, 1), device='cuda:0', dtype=torch.float32)
    permute_5 = rand_strided((768, 768), (768, 1), device='cuda:0', dtype=torch.bfloat16)
    permute_9 = rand_strided((768, 768), (768, 1), device='cuda:0', dtype=torch.bfloat16)
    permute_13 = rand_strided((768, 768), (768, 1), device='cuda:0', dtype=torch.bfloat16)
    tangents_1 = rand_strided((1, 65536, 6, 128), (50331648, 768, 128, 1), device='cuda:0', dtype=torch.bfloat16)
    tangents_2 = rand_strided((1, 65536, 6, 128), (50331648, 768, 128, 1), device='cuda:0', dtype=torch.bfloat16)
    tangents_3 = rand_strided((1, 65536, 6, 128), (50331648, 768, 128, 1), device='cuda:0', dtype=torch.bfloat16)
    return [primals_5, primals_6, primals_7, primals_8, view, mm, mm_1, mm_2, rsqrt, rsqrt_1, permute_5, permute_9, permute_13, tangents_1, tangents_2, tangents_3]


def benchmark_compiled_module(args, times=10, repeat=10):
    from torch._inductor.utils import print_performance
    fn = lambda: call(list(args))
    return print_performance(fn, times=times, repeat=repeat, device='cuda')


if __name__ == "__main__":
    from torch._inductor.wrapper_benchmark import compiled_module_main
    args = get_args()
    compiled_module_main('None', lambda times, repeat: benchmark_compiled_module(args, times=times, repeat=repeat))
