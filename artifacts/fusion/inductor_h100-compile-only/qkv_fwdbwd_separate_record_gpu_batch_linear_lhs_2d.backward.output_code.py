# AOT ID: ['1_backward']
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


# kernel path: <inductor cache>/kx/ckxilrjnppcopsxzrts5ffsb3lfjes2gcehck34yzcnrd27h4e37.py
# Topologically Sorted Source Nodes: [convert_element_type_13, slice_1, slice_2, neg, getitem_3, mul_12, getitem_2, mul_13, mul_14, add_5, mul_15, add_6, cat_3, convert_element_type_14, convert_element_type_15, rms_norm_1, mul_16, mul_17, sum_1, div, mul_18, sub_2, mul_19, convert_element_type_17, convert_element_type_18, slice_3, slice_4, neg_1, mul_20, mul_21, mul_22, add_7, mul_23, add_8, cat_4, convert_element_type_19, convert_element_type_20, rms_norm, mul_24, mul_25, sum_2, div_1, mul_26, sub_3, mul_27, convert_element_type_22, getitem, mul_30, view_6, view_7, view_8, cat_5], Original ATen: [aten._to_copy, aten.slice, aten.neg, aten.unsqueeze, aten.mul, aten.add, aten.cat, aten._fused_rms_norm_backward, aten._fused_rms_norm, aten.select, aten.view]
# Source node to ATen node mapping:
#   add_5 => add_5
#   add_6 => add_6
#   add_7 => add_7
#   add_8 => add_8
#   cat_3 => cat_3
#   cat_4 => cat_4
#   cat_5 => cat_5
#   convert_element_type_13 => convert_element_type_13
#   convert_element_type_14 => convert_element_type_14
#   convert_element_type_15 => convert_element_type_15
#   convert_element_type_17 => convert_element_type_17
#   convert_element_type_18 => convert_element_type_18
#   convert_element_type_19 => convert_element_type_19
#   convert_element_type_20 => convert_element_type_20
#   convert_element_type_22 => convert_element_type_22
#   div => div
#   div_1 => div_1
#   getitem => select
#   getitem_2 => unsqueeze, unsqueeze_1
#   getitem_3 => unsqueeze_2, unsqueeze_3
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
#   mul_30 => mul_30
#   neg => neg
#   neg_1 => neg_1
#   rms_norm => convert_element_type_5
#   rms_norm_1 => convert_element_type_9
#   slice_1 => slice_1
#   slice_2 => slice_2
#   slice_3 => slice_3
#   slice_4 => slice_4
#   sub_2 => sub_2
#   sub_3 => sub_3
#   sum_1 => sum_1
#   sum_2 => sum_2
#   view_6 => view_6
#   view_7 => view_7
#   view_8 => view_8
# Graph fragment:
#   %tangents_2 : Tensor "bf16[1, 65536, 6, 128][50331648, 768, 128, 1]cuda:0" = PlaceHolder[target=tangents_2]
#   %primals_8 : Tensor "f32[65536, 64][64, 1]cuda:0" = PlaceHolder[target=primals_8]
#   %primals_7 : Tensor "f32[65536, 64][64, 1]cuda:0" = PlaceHolder[target=primals_7]
#   %tangents_1 : Tensor "bf16[1, 65536, 6, 128][50331648, 768, 128, 1]cuda:0" = PlaceHolder[target=tangents_1]
#   %view_1 : Tensor "bf16[1, 65536, 6, 128][150994944, 2304, 128, 1]cuda:0" = PlaceHolder[target=view_1]
#   %rsqrt_1 : Tensor "f32[1, 65536, 6, 1][393216, 6, 1, 1]cuda:0" = PlaceHolder[target=rsqrt_1]
#   %convert_element_type_14 : Tensor "bf16[1, 65536, 6, 128][50331648, 768, 128, 1]cuda:0" = PlaceHolder[target=convert_element_type_14]
#   %view_2 : Tensor "bf16[1, 65536, 6, 128][150994944, 2304, 128, 1]cuda:0" = PlaceHolder[target=view_2]
#   %rsqrt : Tensor "f32[1, 65536, 6, 1][393216, 6, 1, 1]cuda:0" = PlaceHolder[target=rsqrt]
#   %convert_element_type_19 : Tensor "bf16[1, 65536, 6, 128][50331648, 768, 128, 1]cuda:0" = PlaceHolder[target=convert_element_type_19]
#   %sum_2 : Tensor "f32[1, 65536, 6, 1][393216, 6, 1, 393216]cuda:0" = PlaceHolder[target=sum_2]
#   %convert_element_type_13 : Tensor "f32[1, 65536, 6, 128][50331648, 768, 128, 1]cuda:0"[num_users=2] = call_function[target=torch.ops.prims.convert_element_type.default](args = (%tangents_2, torch.float32), kwargs = {})
#   %slice_1 : Tensor "f32[1, 65536, 6, 64][50331648, 768, 128, 1]cuda:0"[num_users=2] = call_function[target=torch.ops.aten.slice.Tensor](args = (%convert_element_type_13, 3, 0, 64), kwargs = {})
#   %slice_2 : Tensor "f32[1, 65536, 6, 64][50331648, 768, 128, 1]cuda:0"[num_users=2] = call_function[target=torch.ops.aten.slice.Tensor](args = (%convert_element_type_13, 3, 64, 128), kwargs = {})
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
#   %cat_3 : Tensor "f32[1, 65536, 6, 128][50331648, 768, 128, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.cat.default](args = ([%add_6, %add_5], 3), kwargs = {})
#   %convert_element_type_14 : Tensor "bf16[1, 65536, 6, 128][50331648, 768, 128, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.prims.convert_element_type.default](args = (%cat_3, torch.bfloat16), kwargs = {})
#   %convert_element_type_15 : Tensor "f32[1, 65536, 6, 128][50331648, 768, 128, 1]cuda:0"[num_users=2] = call_function[target=torch.ops.prims.convert_element_type.default](args = (%convert_element_type_14, torch.float32), kwargs = {})
#   %convert_element_type_9 : Tensor "f32[1, 65536, 6, 128][50331648, 768, 128, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.prims.convert_element_type.default](args = (%view_1, torch.float32), kwargs = {})
#   %mul_16 : Tensor "f32[1, 65536, 6, 128][50331648, 768, 128, 1]cuda:0"[num_users=2] = call_function[target=torch.ops.aten.mul.Tensor](args = (%convert_element_type_9, %rsqrt_1), kwargs = {})
#   %mul_17 : Tensor "f32[1, 65536, 6, 128][50331648, 768, 128, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%mul_16, %convert_element_type_15), kwargs = {})
#   %sum_1 : Tensor "f32[1, 65536, 6, 1][393216, 6, 1, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.sum.dim_IntList](args = (%mul_17, [3], True), kwargs = {})
#   %div : Tensor "f32[1, 65536, 6, 128][50331648, 768, 128, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.div.Tensor](args = (%mul_16, 128), kwargs = {})
#   %mul_18 : Tensor "f32[1, 65536, 6, 128][50331648, 768, 128, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%div, %sum_1), kwargs = {})
#   %sub_2 : Tensor "f32[1, 65536, 6, 128][50331648, 768, 128, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.sub.Tensor](args = (%convert_element_type_15, %mul_18), kwargs = {})
#   %mul_19 : Tensor "f32[1, 65536, 6, 128][50331648, 768, 128, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%sub_2, %rsqrt_1), kwargs = {})
#   %convert_element_type_17 : Tensor "bf16[1, 65536, 6, 128][50331648, 768, 128, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.prims.convert_element_type.default](args = (%mul_19, torch.bfloat16), kwargs = {})
#   %convert_element_type_18 : Tensor "f32[1, 65536, 6, 128][50331648, 768, 128, 1]cuda:0"[num_users=2] = call_function[target=torch.ops.prims.convert_element_type.default](args = (%tangents_1, torch.float32), kwargs = {})
#   %slice_3 : Tensor "f32[1, 65536, 6, 64][50331648, 768, 128, 1]cuda:0"[num_users=2] = call_function[target=torch.ops.aten.slice.Tensor](args = (%convert_element_type_18, 3, 0, 64), kwargs = {})
#   %slice_4 : Tensor "f32[1, 65536, 6, 64][50331648, 768, 128, 1]cuda:0"[num_users=2] = call_function[target=torch.ops.aten.slice.Tensor](args = (%convert_element_type_18, 3, 64, 128), kwargs = {})
#   %neg_1 : Tensor "f32[1, 65536, 6, 64][25165824, 384, 64, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.neg.default](args = (%slice_4,), kwargs = {})
#   %mul_20 : Tensor "f32[1, 65536, 6, 64][25165824, 384, 64, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%neg_1, %unsqueeze_3), kwargs = {})
#   %mul_21 : Tensor "f32[1, 65536, 6, 64][25165824, 384, 64, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%slice_4, %unsqueeze_1), kwargs = {})
#   %mul_22 : Tensor "f32[1, 65536, 6, 64][25165824, 384, 64, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%slice_3, %unsqueeze_3), kwargs = {})
#   %add_7 : Tensor "f32[1, 65536, 6, 64][25165824, 384, 64, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.add.Tensor](args = (%mul_21, %mul_22), kwargs = {})
#   %mul_23 : Tensor "f32[1, 65536, 6, 64][25165824, 384, 64, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%slice_3, %unsqueeze_1), kwargs = {})
#   %add_8 : Tensor "f32[1, 65536, 6, 64][25165824, 384, 64, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.add.Tensor](args = (%mul_20, %mul_23), kwargs = {})
#   %cat_4 : Tensor "f32[1, 65536, 6, 128][50331648, 768, 128, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.cat.default](args = ([%add_8, %add_7], 3), kwargs = {})
#   %convert_element_type_19 : Tensor "bf16[1, 65536, 6, 128][50331648, 768, 128, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.prims.convert_element_type.default](args = (%cat_4, torch.bfloat16), kwargs = {})
#   %convert_element_type_20 : Tensor "f32[1, 65536, 6, 128][50331648, 768, 128, 1]cuda:0"[num_users=2] = call_function[target=torch.ops.prims.convert_element_type.default](args = (%convert_element_type_19, torch.float32), kwargs = {})
#   %convert_element_type_5 : Tensor "f32[1, 65536, 6, 128][50331648, 768, 128, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.prims.convert_element_type.default](args = (%view_2, torch.float32), kwargs = {})
#   %mul_24 : Tensor "f32[1, 65536, 6, 128][50331648, 768, 128, 1]cuda:0"[num_users=2] = call_function[target=torch.ops.aten.mul.Tensor](args = (%convert_element_type_5, %rsqrt), kwargs = {})
#   %mul_25 : Tensor "f32[1, 65536, 6, 128][50331648, 768, 128, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%mul_24, %convert_element_type_20), kwargs = {})
#   %sum_2 : Tensor "f32[1, 65536, 6, 1][393216, 6, 1, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.sum.dim_IntList](args = (%mul_25, [3], True), kwargs = {})
#   %div_1 : Tensor "f32[1, 65536, 6, 128][50331648, 768, 128, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.div.Tensor](args = (%mul_24, 128), kwargs = {})
#   %mul_26 : Tensor "f32[1, 65536, 6, 128][50331648, 768, 128, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%div_1, %sum_2), kwargs = {})
#   %sub_3 : Tensor "f32[1, 65536, 6, 128][50331648, 768, 128, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.sub.Tensor](args = (%convert_element_type_20, %mul_26), kwargs = {})
#   %mul_27 : Tensor "f32[1, 65536, 6, 128][50331648, 768, 128, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%sub_3, %rsqrt), kwargs = {})
#   %convert_element_type_22 : Tensor "bf16[1, 65536, 6, 128][50331648, 768, 128, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.prims.convert_element_type.default](args = (%mul_27, torch.bfloat16), kwargs = {})
#   %select : Tensor "f32[][]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.select.int](args = (%primals_5, 0, 0), kwargs = {})
#   %mul_30 : Tensor "bf16[1, 65536, 6, 128][50331648, 768, 128, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%tangents_3, %select), kwargs = {})
#   %view_6 : Tensor "bf16[65536, 768][768, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.reshape.default](args = (%mul_30, [65536, 768]), kwargs = {})
#   %view_7 : Tensor "bf16[65536, 768][768, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.reshape.default](args = (%convert_element_type_22, [65536, 768]), kwargs = {})
#   %view_8 : Tensor "bf16[65536, 768][768, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.reshape.default](args = (%convert_element_type_17, [65536, 768]), kwargs = {})
#   %cat_5 : Tensor "bf16[65536, 2304][2304, 1]cuda:0"[num_users=2] = call_function[target=torch.ops.aten.cat.default](args = ([%view_7, %view_8, %view_6], 1), kwargs = {})
#   return %convert_element_type_14,%convert_element_type_19,%sum_1,%sum_2,%buf12
triton_per_fused__fused_rms_norm__fused_rms_norm_backward__to_copy_add_cat_mul_neg_select_slice_unsqueeze_view_0 = async_compile.triton('triton_per_fused__fused_rms_norm__fused_rms_norm_backward__to_copy_add_cat_mul_neg_select_slice_unsqueeze_view_0', '''
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
    triton_meta={'signature': {'in_ptr0': '*bf16', 'in_ptr1': '*fp32', 'in_ptr2': '*fp32', 'in_ptr3': '*bf16', 'in_ptr4': '*bf16', 'in_ptr5': '*fp32', 'in_ptr6': '*bf16', 'in_ptr7': '*fp32', 'out_ptr0': '*bf16', 'out_ptr2': '*fp32', 'out_ptr4': '*bf16', 'xnumel': 'i32', 'r0_numel': 'i32', 'XBLOCK': 'constexpr'}, 'device': DeviceProperties(type='cuda', index=0, multi_processor_count=132, cc=90, major=9, regs_per_multiprocessor=65536, max_threads_per_multi_processor=2048, max_threads_per_block=1024, warp_size=32), 'constants': {}, 'native_matmul': False, 'enable_fp_fusion': True, 'launch_pdl': False, 'disable_ftz': False, 'configs': [{(0,): [['tt.divisibility', 16]], (1,): [['tt.divisibility', 16]], (2,): [['tt.divisibility', 16]], (3,): [['tt.divisibility', 16]], (4,): [['tt.divisibility', 16]], (5,): [['tt.divisibility', 16]], (6,): [['tt.divisibility', 16]], (7,): [['tt.divisibility', 16]], (8,): [['tt.divisibility', 16]], (9,): [['tt.divisibility', 16]], (10,): [['tt.divisibility', 16]], (11,): [['tt.divisibility', 16]], (12,): [['tt.divisibility', 16]]}]},
    inductor_meta={'grid_type': 'Grid1D', 'kernel_name': 'triton_per_fused__fused_rms_norm__fused_rms_norm_backward__to_copy_add_cat_mul_neg_select_slice_unsqueeze_view_0', 'mutated_arg_names': [], 'optimize_mem': True, 'no_x_dim': None, 'atomic_add_found': False, 'num_load': 16, 'num_store': 3, 'num_reduction': 2, 'autotune_hints': set(), 'tiling_scores': {'x': 6291456, 'r0_': 1174405120}, 'backend_hash': '6391665CC2F0352C28A1562DF47BC332AB156A9FECD5CDBDF1B74F873D5CEE3D', 'assert_indirect_indexing': True, 'autotune_local_cache': True, 'autotune_pointwise': True, 'autotune_remote_cache': None, 'force_disable_caches': False, 'dynamic_scale_rblock': True, 'incremental_autotune': False, 'max_autotune': False, 'max_autotune_pointwise': False, 'min_split_scan_rblock': 256, 'spill_threshold': 16, 'store_cubin': False, 'deterministic': False, 'batch_invariant': False, 'force_filter_reduction_configs': False, 'mix_order_reduction_allow_multi_stages': True, 'dynamic_disable_pipelining': True, 'are_deterministic_algorithms_enabled': False}
)
@triton.jit
def triton_per_fused__fused_rms_norm__fused_rms_norm_backward__to_copy_add_cat_mul_neg_select_slice_unsqueeze_view_0(in_ptr0, in_ptr1, in_ptr2, in_ptr3, in_ptr4, in_ptr5, in_ptr6, in_ptr7, out_ptr0, out_ptr2, out_ptr4, xnumel, r0_numel, XBLOCK : tl.constexpr):
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
    x0 = (xindex % 6)
    tmp56 = tl.load(in_ptr4 + (r0_2 + 128*x0 + 2304*x1), None, eviction_policy='evict_first').to(tl.float32)
    tmp58 = tl.load(in_ptr5 + (x3), None, eviction_policy='evict_last')
    tmp65 = tl.load(in_ptr6 + (r0_2 + 128*x0 + 2304*x1), None, eviction_policy='evict_first').to(tl.float32)
    tmp67 = tl.load(in_ptr7 + (x3), None, eviction_policy='evict_last')
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
    tmp66 = tmp65.to(tl.float32)
    tmp68 = tmp66 * tmp67
    tmp69 = tmp55.to(tl.float32)
    tmp70 = tmp68 * tmp69
    tmp71 = tl.broadcast_to(tmp70, [XBLOCK, R0_BLOCK])
    tmp73 = tl.sum(tmp71, 1)[:, None].to(tl.float32)
    tmp74 = tl.full([1, 1], 0.0078125, tl.float32)
    tmp75 = tmp68 * tmp74
    tmp76 = tmp75 * tmp73
    tmp77 = tmp69 - tmp76
    tmp78 = tmp77 * tmp67
    tmp79 = tmp78.to(tl.float32)
    tl.store(out_ptr0 + (r0_2 + 128*x3), tmp34, None)
    tl.store(out_ptr4 + (2304*(x3 // 6) + (((r0_2 + 128*x3) % 768))), tmp79, None)
    tl.store(out_ptr2 + (x3), tmp64, None)
''', device_str='cuda')


# kernel path: <inductor cache>/lo/clo6afn4nxpfrzbk4tf7kbccj6nscuyxc4guag6psmmheyvmnv6w.py
# Topologically Sorted Source Nodes: [convert_element_type_15, rms_norm_1, mul_16, div, mul_18, sub_2, mul_19, convert_element_type_17, convert_element_type_20, rms_norm, mul_24, div_1, mul_26, sub_3, mul_27, convert_element_type_22, getitem_1, mul_28, view_as, mul_29, sum_3, getitem, mul_30, mul_31, sum_4, view_6, view_7, view_8, cat_5], Original ATen: [aten._fused_rms_norm_backward, aten._fused_rms_norm, aten.select, aten.mul, aten.view, aten.sum, aten.cat]
# Source node to ATen node mapping:
#   cat_5 => cat_5
#   convert_element_type_15 => convert_element_type_15
#   convert_element_type_17 => convert_element_type_17
#   convert_element_type_20 => convert_element_type_20
#   convert_element_type_22 => convert_element_type_22
#   div => div
#   div_1 => div_1
#   getitem => select
#   getitem_1 => select_1
#   mul_16 => mul_16
#   mul_18 => mul_18
#   mul_19 => mul_19
#   mul_24 => mul_24
#   mul_26 => mul_26
#   mul_27 => mul_27
#   mul_28 => mul_28
#   mul_29 => mul_29
#   mul_30 => mul_30
#   mul_31 => mul_31
#   rms_norm => convert_element_type_5
#   rms_norm_1 => convert_element_type_9
#   sub_2 => sub_2
#   sub_3 => sub_3
#   sum_3 => sum_3
#   sum_4 => sum_4
#   view_6 => view_6
#   view_7 => view_7
#   view_8 => view_8
#   view_as => view_4
# Graph fragment:
#   %tangents_3 : Tensor "bf16[1, 65536, 6, 128][50331648, 768, 128, 1]cuda:0" = PlaceHolder[target=tangents_3]
#   %primals_6 : Tensor "bf16[65536, 768][768, 1]cuda:0" = PlaceHolder[target=primals_6]
#   %view_3 : Tensor "bf16[1, 65536, 6, 128][150994944, 2304, 128, 1]cuda:0" = PlaceHolder[target=view_3]
#   %primals_5 : Tensor "f32[2][1]cuda:0" = PlaceHolder[target=primals_5]
#   %convert_element_type_15 : Tensor "f32[1, 65536, 6, 128][50331648, 768, 128, 1]cuda:0"[num_users=2] = call_function[target=torch.ops.prims.convert_element_type.default](args = (%convert_element_type_14, torch.float32), kwargs = {})
#   %convert_element_type_9 : Tensor "f32[1, 65536, 6, 128][50331648, 768, 128, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.prims.convert_element_type.default](args = (%view_1, torch.float32), kwargs = {})
#   %mul_16 : Tensor "f32[1, 65536, 6, 128][50331648, 768, 128, 1]cuda:0"[num_users=2] = call_function[target=torch.ops.aten.mul.Tensor](args = (%convert_element_type_9, %rsqrt_1), kwargs = {})
#   %div : Tensor "f32[1, 65536, 6, 128][50331648, 768, 128, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.div.Tensor](args = (%mul_16, 128), kwargs = {})
#   %mul_18 : Tensor "f32[1, 65536, 6, 128][50331648, 768, 128, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%div, %sum_1), kwargs = {})
#   %sub_2 : Tensor "f32[1, 65536, 6, 128][50331648, 768, 128, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.sub.Tensor](args = (%convert_element_type_15, %mul_18), kwargs = {})
#   %mul_19 : Tensor "f32[1, 65536, 6, 128][50331648, 768, 128, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%sub_2, %rsqrt_1), kwargs = {})
#   %convert_element_type_17 : Tensor "bf16[1, 65536, 6, 128][50331648, 768, 128, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.prims.convert_element_type.default](args = (%mul_19, torch.bfloat16), kwargs = {})
#   %convert_element_type_20 : Tensor "f32[1, 65536, 6, 128][50331648, 768, 128, 1]cuda:0"[num_users=2] = call_function[target=torch.ops.prims.convert_element_type.default](args = (%convert_element_type_19, torch.float32), kwargs = {})
#   %convert_element_type_5 : Tensor "f32[1, 65536, 6, 128][50331648, 768, 128, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.prims.convert_element_type.default](args = (%view_2, torch.float32), kwargs = {})
#   %mul_24 : Tensor "f32[1, 65536, 6, 128][50331648, 768, 128, 1]cuda:0"[num_users=2] = call_function[target=torch.ops.aten.mul.Tensor](args = (%convert_element_type_5, %rsqrt), kwargs = {})
#   %div_1 : Tensor "f32[1, 65536, 6, 128][50331648, 768, 128, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.div.Tensor](args = (%mul_24, 128), kwargs = {})
#   %mul_26 : Tensor "f32[1, 65536, 6, 128][50331648, 768, 128, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%div_1, %sum_2), kwargs = {})
#   %sub_3 : Tensor "f32[1, 65536, 6, 128][50331648, 768, 128, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.sub.Tensor](args = (%convert_element_type_20, %mul_26), kwargs = {})
#   %mul_27 : Tensor "f32[1, 65536, 6, 128][50331648, 768, 128, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%sub_3, %rsqrt), kwargs = {})
#   %convert_element_type_22 : Tensor "bf16[1, 65536, 6, 128][50331648, 768, 128, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.prims.convert_element_type.default](args = (%mul_27, torch.bfloat16), kwargs = {})
#   %select_1 : Tensor "f32[][]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.select.int](args = (%primals_5, 0, 1), kwargs = {})
#   %mul_28 : Tensor "bf16[1, 65536, 6, 128][50331648, 768, 128, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%tangents_3, %select_1), kwargs = {})
#   %view_4 : Tensor "bf16[1, 65536, 6, 128][50331648, 768, 128, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.reshape.default](args = (%primals_6, [1, 65536, 6, 128]), kwargs = {})
#   %mul_29 : Tensor "bf16[1, 65536, 6, 128][50331648, 768, 128, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%tangents_3, %view_4), kwargs = {})
#   %sum_3 : Tensor "bf16[][]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.sum.default](args = (%mul_29,), kwargs = {})
#   %select : Tensor "f32[][]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.select.int](args = (%primals_5, 0, 0), kwargs = {})
#   %mul_30 : Tensor "bf16[1, 65536, 6, 128][50331648, 768, 128, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%tangents_3, %select), kwargs = {})
#   %mul_31 : Tensor "bf16[1, 65536, 6, 128][50331648, 768, 128, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%tangents_3, %view_3), kwargs = {})
#   %sum_4 : Tensor "bf16[][]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.sum.default](args = (%mul_31,), kwargs = {})
#   %view_6 : Tensor "bf16[65536, 768][768, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.reshape.default](args = (%mul_30, [65536, 768]), kwargs = {})
#   %view_7 : Tensor "bf16[65536, 768][768, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.reshape.default](args = (%convert_element_type_22, [65536, 768]), kwargs = {})
#   %view_8 : Tensor "bf16[65536, 768][768, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.reshape.default](args = (%convert_element_type_17, [65536, 768]), kwargs = {})
#   %cat_5 : Tensor "bf16[65536, 2304][2304, 1]cuda:0"[num_users=2] = call_function[target=torch.ops.aten.cat.default](args = ([%view_7, %view_8, %view_6], 1), kwargs = {})
#   return %buf5,%buf9,%buf14,%mul_28
triton_red_fused__fused_rms_norm__fused_rms_norm_backward_cat_mul_select_sum_view_1 = async_compile.triton('triton_red_fused__fused_rms_norm__fused_rms_norm_backward_cat_mul_select_sum_view_1', '''
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
    inductor_meta={'grid_type': 'Grid1D', 'kernel_name': 'triton_red_fused__fused_rms_norm__fused_rms_norm_backward_cat_mul_select_sum_view_1', 'mutated_arg_names': [], 'optimize_mem': True, 'no_x_dim': False, 'atomic_add_found': False, 'num_load': 5, 'num_store': 4, 'num_reduction': 2, 'autotune_hints': set(), 'tiling_scores': {'x': 8192, 'r0_': 704643072}, 'backend_hash': '6391665CC2F0352C28A1562DF47BC332AB156A9FECD5CDBDF1B74F873D5CEE3D', 'assert_indirect_indexing': True, 'autotune_local_cache': True, 'autotune_pointwise': True, 'autotune_remote_cache': None, 'force_disable_caches': False, 'dynamic_scale_rblock': True, 'incremental_autotune': False, 'max_autotune': False, 'max_autotune_pointwise': False, 'min_split_scan_rblock': 256, 'spill_threshold': 16, 'store_cubin': False, 'deterministic': False, 'batch_invariant': False, 'force_filter_reduction_configs': False, 'mix_order_reduction_allow_multi_stages': True, 'dynamic_disable_pipelining': True, 'are_deterministic_algorithms_enabled': False}
)
@triton.jit
def triton_red_fused__fused_rms_norm__fused_rms_norm_backward_cat_mul_select_sum_view_1(in_ptr0, in_ptr1, in_ptr2, in_ptr3, out_ptr0, out_ptr1, out_ptr2, out_ptr3, xnumel, r0_numel, XBLOCK : tl.constexpr, R0_BLOCK : tl.constexpr):
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
        tmp6 = tl.load(in_ptr2 + (2304*(r0_1 // 768) + 294912*x0 + ((r0_1 % 768))), r0_mask & xmask, eviction_policy='evict_first', other=0.0).to(tl.float32)
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
        tl.store(out_ptr2 + (2304*(r0_1 // 768) + 294912*x0 + ((r0_1 % 768))), tmp14, r0_mask & xmask)
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
#   view_as => view_4
# Graph fragment:
#   %buf5 : Tensor "f32[512][1]cuda:0" = PlaceHolder[target=buf5]
#   %view_4 : Tensor "bf16[1, 65536, 6, 128][50331648, 768, 128, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.reshape.default](args = (%primals_6, [1, 65536, 6, 128]), kwargs = {})
#   %mul_29 : Tensor "bf16[1, 65536, 6, 128][50331648, 768, 128, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%tangents_3, %view_4), kwargs = {})
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
# Topologically Sorted Source Nodes: [convert_element_type_23, full_default, convert_element_type_24, add_9], Original ATen: [aten._to_copy, aten.select_backward, aten.add]
# Source node to ATen node mapping:
#   add_9 => add_9
#   convert_element_type_23 => convert_element_type_23
#   convert_element_type_24 => convert_element_type_24
#   full_default => full_default
# Graph fragment:
#   %sum_3 : Tensor "bf16[][]cuda:0" = PlaceHolder[target=sum_3]
#   %sum_4 : Tensor "bf16[][]cuda:0" = PlaceHolder[target=sum_4]
#   %convert_element_type_23 : Tensor "f32[][]cuda:0"[num_users=1] = call_function[target=torch.ops.prims.convert_element_type.default](args = (%sum_3, torch.float32), kwargs = {})
#   %full_default : Tensor "f32[2][1]cuda:0"[num_users=2] = call_function[target=torch.ops.aten.full.default](args = ([2], 0), kwargs = {dtype: torch.float32, layout: torch.strided, device: cuda:0, pin_memory: False})
#   %select_scatter_default : Tensor "f32[2][1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.select_scatter.default](args = (%full_default, %convert_element_type_23, 0, 1), kwargs = {})
#   %convert_element_type_24 : Tensor "f32[][]cuda:0"[num_users=1] = call_function[target=torch.ops.prims.convert_element_type.default](args = (%sum_4, torch.float32), kwargs = {})
#   %select_scatter_default_1 : Tensor "f32[2][1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.select_scatter.default](args = (%full_default, %convert_element_type_24, 0, 0), kwargs = {})
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


# kernel path: <inductor cache>/pr/cprkvphjzwkk5pjuhtpsc467pxugamabgf27b3thfjizxcryedhp.py
# Topologically Sorted Source Nodes: [convert_element_type_15, rms_norm_1, mul_16, div, mul_18, sub_2, mul_19, convert_element_type_17, convert_element_type_20, rms_norm, mul_24, div_1, mul_26, sub_3, mul_27, convert_element_type_22, getitem, mul_30, view_6, view_7, view_8, cat_5], Original ATen: [aten._fused_rms_norm_backward, aten._fused_rms_norm, aten.select, aten.mul, aten.view, aten.cat]
# Source node to ATen node mapping:
#   cat_5 => cat_5
#   convert_element_type_15 => convert_element_type_15
#   convert_element_type_17 => convert_element_type_17
#   convert_element_type_20 => convert_element_type_20
#   convert_element_type_22 => convert_element_type_22
#   div => div
#   div_1 => div_1
#   getitem => select
#   mul_16 => mul_16
#   mul_18 => mul_18
#   mul_19 => mul_19
#   mul_24 => mul_24
#   mul_26 => mul_26
#   mul_27 => mul_27
#   mul_30 => mul_30
#   rms_norm => convert_element_type_5
#   rms_norm_1 => convert_element_type_9
#   sub_2 => sub_2
#   sub_3 => sub_3
#   view_6 => view_6
#   view_7 => view_7
#   view_8 => view_8
# Graph fragment:
#   %convert_element_type_14 : Tensor "bf16[1, 65536, 6, 128][50331648, 768, 128, 1]cuda:0" = PlaceHolder[target=convert_element_type_14]
#   %view_1 : Tensor "bf16[1, 65536, 6, 128][150994944, 2304, 128, 1]cuda:0" = PlaceHolder[target=view_1]
#   %rsqrt_1 : Tensor "f32[1, 65536, 6, 1][393216, 6, 1, 1]cuda:0" = PlaceHolder[target=rsqrt_1]
#   %sum_1 : Tensor "f32[1, 65536, 6, 1][393216, 6, 1, 393216]cuda:0" = PlaceHolder[target=sum_1]
#   %convert_element_type_15 : Tensor "f32[1, 65536, 6, 128][50331648, 768, 128, 1]cuda:0"[num_users=2] = call_function[target=torch.ops.prims.convert_element_type.default](args = (%convert_element_type_14, torch.float32), kwargs = {})
#   %convert_element_type_9 : Tensor "f32[1, 65536, 6, 128][50331648, 768, 128, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.prims.convert_element_type.default](args = (%view_1, torch.float32), kwargs = {})
#   %mul_16 : Tensor "f32[1, 65536, 6, 128][50331648, 768, 128, 1]cuda:0"[num_users=2] = call_function[target=torch.ops.aten.mul.Tensor](args = (%convert_element_type_9, %rsqrt_1), kwargs = {})
#   %div : Tensor "f32[1, 65536, 6, 128][50331648, 768, 128, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.div.Tensor](args = (%mul_16, 128), kwargs = {})
#   %mul_18 : Tensor "f32[1, 65536, 6, 128][50331648, 768, 128, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%div, %sum_1), kwargs = {})
#   %sub_2 : Tensor "f32[1, 65536, 6, 128][50331648, 768, 128, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.sub.Tensor](args = (%convert_element_type_15, %mul_18), kwargs = {})
#   %mul_19 : Tensor "f32[1, 65536, 6, 128][50331648, 768, 128, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%sub_2, %rsqrt_1), kwargs = {})
#   %convert_element_type_17 : Tensor "bf16[1, 65536, 6, 128][50331648, 768, 128, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.prims.convert_element_type.default](args = (%mul_19, torch.bfloat16), kwargs = {})
#   %convert_element_type_20 : Tensor "f32[1, 65536, 6, 128][50331648, 768, 128, 1]cuda:0"[num_users=2] = call_function[target=torch.ops.prims.convert_element_type.default](args = (%convert_element_type_19, torch.float32), kwargs = {})
#   %convert_element_type_5 : Tensor "f32[1, 65536, 6, 128][50331648, 768, 128, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.prims.convert_element_type.default](args = (%view_2, torch.float32), kwargs = {})
#   %mul_24 : Tensor "f32[1, 65536, 6, 128][50331648, 768, 128, 1]cuda:0"[num_users=2] = call_function[target=torch.ops.aten.mul.Tensor](args = (%convert_element_type_5, %rsqrt), kwargs = {})
#   %div_1 : Tensor "f32[1, 65536, 6, 128][50331648, 768, 128, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.div.Tensor](args = (%mul_24, 128), kwargs = {})
#   %mul_26 : Tensor "f32[1, 65536, 6, 128][50331648, 768, 128, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%div_1, %sum_2), kwargs = {})
#   %sub_3 : Tensor "f32[1, 65536, 6, 128][50331648, 768, 128, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.sub.Tensor](args = (%convert_element_type_20, %mul_26), kwargs = {})
#   %mul_27 : Tensor "f32[1, 65536, 6, 128][50331648, 768, 128, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%sub_3, %rsqrt), kwargs = {})
#   %convert_element_type_22 : Tensor "bf16[1, 65536, 6, 128][50331648, 768, 128, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.prims.convert_element_type.default](args = (%mul_27, torch.bfloat16), kwargs = {})
#   %select : Tensor "f32[][]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.select.int](args = (%primals_5, 0, 0), kwargs = {})
#   %mul_30 : Tensor "bf16[1, 65536, 6, 128][50331648, 768, 128, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%tangents_3, %select), kwargs = {})
#   %view_6 : Tensor "bf16[65536, 768][768, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.reshape.default](args = (%mul_30, [65536, 768]), kwargs = {})
#   %view_7 : Tensor "bf16[65536, 768][768, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.reshape.default](args = (%convert_element_type_22, [65536, 768]), kwargs = {})
#   %view_8 : Tensor "bf16[65536, 768][768, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.reshape.default](args = (%convert_element_type_17, [65536, 768]), kwargs = {})
#   %cat_5 : Tensor "bf16[65536, 2304][2304, 1]cuda:0"[num_users=2] = call_function[target=torch.ops.aten.cat.default](args = ([%view_7, %view_8, %view_6], 1), kwargs = {})
#   return %buf13
triton_poi_fused__fused_rms_norm__fused_rms_norm_backward_cat_mul_select_view_4 = async_compile.triton('triton_poi_fused__fused_rms_norm__fused_rms_norm_backward_cat_mul_select_view_4', '''
import triton
import triton.language as tl

from torch._inductor.runtime import triton_helpers, triton_heuristics
from torch._inductor.runtime.triton_helpers import libdevice, math as tl_math
from torch._inductor.runtime.hints import AutotuneHint, ReductionHint, TileHint, DeviceProperties
triton_helpers.set_driver_to_gpu()

@triton_heuristics.pointwise(
    size_hints={'x': 67108864}, 
    filename=__file__,
    triton_meta={'signature': {'in_ptr0': '*bf16', 'in_ptr1': '*bf16', 'in_ptr2': '*fp32', 'in_ptr3': '*fp32', 'out_ptr0': '*bf16', 'xnumel': 'i32', 'XBLOCK': 'constexpr'}, 'device': DeviceProperties(type='cuda', index=0, multi_processor_count=132, cc=90, major=9, regs_per_multiprocessor=65536, max_threads_per_multi_processor=2048, max_threads_per_block=1024, warp_size=32), 'constants': {}, 'native_matmul': False, 'enable_fp_fusion': True, 'launch_pdl': False, 'disable_ftz': False, 'configs': [{(0,): [['tt.divisibility', 16]], (1,): [['tt.divisibility', 16]], (2,): [['tt.divisibility', 16]], (3,): [['tt.divisibility', 16]], (4,): [['tt.divisibility', 16]], (5,): [['tt.divisibility', 16]]}]},
    inductor_meta={'grid_type': 'Grid1D', 'kernel_name': 'triton_poi_fused__fused_rms_norm__fused_rms_norm_backward_cat_mul_select_view_4', 'mutated_arg_names': [], 'optimize_mem': True, 'no_x_dim': False, 'atomic_add_found': False, 'num_load': 4, 'num_store': 1, 'num_reduction': 0, 'autotune_hints': set(), 'tiling_scores': {'x': 405798912}, 'backend_hash': '6391665CC2F0352C28A1562DF47BC332AB156A9FECD5CDBDF1B74F873D5CEE3D', 'assert_indirect_indexing': True, 'autotune_local_cache': True, 'autotune_pointwise': True, 'autotune_remote_cache': None, 'force_disable_caches': False, 'dynamic_scale_rblock': True, 'incremental_autotune': False, 'max_autotune': False, 'max_autotune_pointwise': False, 'min_split_scan_rblock': 256, 'spill_threshold': 16, 'store_cubin': False, 'deterministic': False, 'batch_invariant': False, 'force_filter_reduction_configs': False, 'mix_order_reduction_allow_multi_stages': True, 'dynamic_disable_pipelining': True, 'are_deterministic_algorithms_enabled': False},
    min_elem_per_thread=0
)
@triton.jit
def triton_poi_fused__fused_rms_norm__fused_rms_norm_backward_cat_mul_select_view_4(in_ptr0, in_ptr1, in_ptr2, in_ptr3, out_ptr0, xnumel, XBLOCK : tl.constexpr):
    xnumel = 50331648
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:]
    xmask = tl.full([XBLOCK], True, tl.int1)[:]
    x2 = xindex
    x0 = (xindex % 128)
    x1 = xindex // 128
    tmp0 = tl.load(in_ptr0 + (x2), None).to(tl.float32)
    tmp2 = tl.load(in_ptr1 + (2304*(x1 // 6) + (((x0 + 128*x1) % 768))), None).to(tl.float32)
    tmp4 = tl.load(in_ptr2 + (x1), None, eviction_policy='evict_last')
    tmp8 = tl.load(in_ptr3 + (x1), None, eviction_policy='evict_last')
    tmp1 = tmp0.to(tl.float32)
    tmp3 = tmp2.to(tl.float32)
    tmp5 = tmp3 * tmp4
    tmp6 = tl.full([1], 0.0078125, tl.float32)
    tmp7 = tmp5 * tmp6
    tmp9 = tmp7 * tmp8
    tmp10 = tmp1 - tmp9
    tmp11 = tmp10 * tmp4
    tmp12 = tmp11.to(tl.float32)
    tl.store(out_ptr0 + (2304*(x1 // 6) + (((x0 + 128*x1) % 768))), tmp12, None)
''', device_str='cuda')


# kernel path: <inductor cache>/7z/c7zfhgji5ohbxvcezajf4jq6arrm2su4wrcbfhpbqpq2bgl3vien.py
# Topologically Sorted Source Nodes: [slice_7, convert_element_type_29], Original ATen: [aten.slice, aten._to_copy]
# Source node to ATen node mapping:
#   convert_element_type_29 => convert_element_type_29
#   slice_7 => slice_7
# Graph fragment:
#   %mm_1 : Tensor "bf16[2304, 768][768, 1]cuda:0" = PlaceHolder[target=mm_1]
#   %slice_7 : Tensor "bf16[768, 768][768, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.slice.Tensor](args = (%mm_1, 0, 1536, 2304), kwargs = {})
#   %convert_element_type_29 : Tensor "f32[768, 768][768, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.prims.convert_element_type.default](args = (%slice_7, torch.float32), kwargs = {})
#   return %convert_element_type_29
triton_poi_fused__to_copy_slice_5 = async_compile.triton('triton_poi_fused__to_copy_slice_5', '''
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
    inductor_meta={'grid_type': 'Grid1D', 'kernel_name': 'triton_poi_fused__to_copy_slice_5', 'mutated_arg_names': [], 'optimize_mem': True, 'no_x_dim': False, 'atomic_add_found': False, 'num_load': 1, 'num_store': 1, 'num_reduction': 0, 'autotune_hints': set(), 'tiling_scores': {'x': 5898240}, 'backend_hash': '6391665CC2F0352C28A1562DF47BC332AB156A9FECD5CDBDF1B74F873D5CEE3D', 'assert_indirect_indexing': True, 'autotune_local_cache': True, 'autotune_pointwise': True, 'autotune_remote_cache': None, 'force_disable_caches': False, 'dynamic_scale_rblock': True, 'incremental_autotune': False, 'max_autotune': False, 'max_autotune_pointwise': False, 'min_split_scan_rblock': 256, 'spill_threshold': 16, 'store_cubin': False, 'deterministic': False, 'batch_invariant': False, 'force_filter_reduction_configs': False, 'mix_order_reduction_allow_multi_stages': True, 'dynamic_disable_pipelining': True, 'are_deterministic_algorithms_enabled': False},
    min_elem_per_thread=0
)
@triton.jit
def triton_poi_fused__to_copy_slice_5(in_ptr0, out_ptr0, xnumel, XBLOCK : tl.constexpr):
    xnumel = 589824
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:]
    xmask = tl.full([XBLOCK], True, tl.int1)[:]
    x0 = xindex
    tmp0 = tl.load(in_ptr0 + (1179648 + x0), None).to(tl.float32)
    tmp1 = tmp0.to(tl.float32)
    tl.store(out_ptr0 + (x0), tmp1, None)
''', device_str='cuda')


# kernel path: <inductor cache>/e7/ce72gketkoxv2cnoqoofvw4tjmufcfn57e34rshl5dvh2np2w36k.py
# Topologically Sorted Source Nodes: [slice_6, convert_element_type_30], Original ATen: [aten.slice, aten._to_copy]
# Source node to ATen node mapping:
#   convert_element_type_30 => convert_element_type_30
#   slice_6 => slice_6
# Graph fragment:
#   %mm_1 : Tensor "bf16[2304, 768][768, 1]cuda:0" = PlaceHolder[target=mm_1]
#   %slice_6 : Tensor "bf16[768, 768][768, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.slice.Tensor](args = (%mm_1, 0, 768, 1536), kwargs = {})
#   %convert_element_type_30 : Tensor "f32[768, 768][768, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.prims.convert_element_type.default](args = (%slice_6, torch.float32), kwargs = {})
#   return %convert_element_type_30
triton_poi_fused__to_copy_slice_6 = async_compile.triton('triton_poi_fused__to_copy_slice_6', '''
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
    inductor_meta={'grid_type': 'Grid1D', 'kernel_name': 'triton_poi_fused__to_copy_slice_6', 'mutated_arg_names': [], 'optimize_mem': True, 'no_x_dim': False, 'atomic_add_found': False, 'num_load': 1, 'num_store': 1, 'num_reduction': 0, 'autotune_hints': set(), 'tiling_scores': {'x': 5898240}, 'backend_hash': '6391665CC2F0352C28A1562DF47BC332AB156A9FECD5CDBDF1B74F873D5CEE3D', 'assert_indirect_indexing': True, 'autotune_local_cache': True, 'autotune_pointwise': True, 'autotune_remote_cache': None, 'force_disable_caches': False, 'dynamic_scale_rblock': True, 'incremental_autotune': False, 'max_autotune': False, 'max_autotune_pointwise': False, 'min_split_scan_rblock': 256, 'spill_threshold': 16, 'store_cubin': False, 'deterministic': False, 'batch_invariant': False, 'force_filter_reduction_configs': False, 'mix_order_reduction_allow_multi_stages': True, 'dynamic_disable_pipelining': True, 'are_deterministic_algorithms_enabled': False},
    min_elem_per_thread=0
)
@triton.jit
def triton_poi_fused__to_copy_slice_6(in_ptr0, out_ptr0, xnumel, XBLOCK : tl.constexpr):
    xnumel = 589824
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:]
    xmask = tl.full([XBLOCK], True, tl.int1)[:]
    x0 = xindex
    tmp0 = tl.load(in_ptr0 + (589824 + x0), None).to(tl.float32)
    tmp1 = tmp0.to(tl.float32)
    tl.store(out_ptr0 + (x0), tmp1, None)
''', device_str='cuda')


# kernel path: <inductor cache>/3k/c3kgidytjz5qv4eka2jkvjacmxrz5fiytzwwkcq3ytlt7gw7ldit.py
# Topologically Sorted Source Nodes: [slice_5, convert_element_type_31], Original ATen: [aten.slice, aten._to_copy]
# Source node to ATen node mapping:
#   convert_element_type_31 => convert_element_type_31
#   slice_5 => slice_5
# Graph fragment:
#   %mm_1 : Tensor "bf16[2304, 768][768, 1]cuda:0" = PlaceHolder[target=mm_1]
#   %slice_5 : Tensor "bf16[768, 768][768, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.slice.Tensor](args = (%mm_1, 0, 0, 768), kwargs = {})
#   %convert_element_type_31 : Tensor "f32[768, 768][768, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.prims.convert_element_type.default](args = (%slice_5, torch.float32), kwargs = {})
#   return %convert_element_type_31
triton_poi_fused__to_copy_slice_7 = async_compile.triton('triton_poi_fused__to_copy_slice_7', '''
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
    inductor_meta={'grid_type': 'Grid1D', 'kernel_name': 'triton_poi_fused__to_copy_slice_7', 'mutated_arg_names': [], 'optimize_mem': True, 'no_x_dim': False, 'atomic_add_found': False, 'num_load': 1, 'num_store': 1, 'num_reduction': 0, 'autotune_hints': set(), 'tiling_scores': {'x': 5898240}, 'backend_hash': '6391665CC2F0352C28A1562DF47BC332AB156A9FECD5CDBDF1B74F873D5CEE3D', 'assert_indirect_indexing': True, 'autotune_local_cache': True, 'autotune_pointwise': True, 'autotune_remote_cache': None, 'force_disable_caches': False, 'dynamic_scale_rblock': True, 'incremental_autotune': False, 'max_autotune': False, 'max_autotune_pointwise': False, 'min_split_scan_rblock': 256, 'spill_threshold': 16, 'store_cubin': False, 'deterministic': False, 'batch_invariant': False, 'force_filter_reduction_configs': False, 'mix_order_reduction_allow_multi_stages': True, 'dynamic_disable_pipelining': True, 'are_deterministic_algorithms_enabled': False},
    min_elem_per_thread=0
)
@triton.jit
def triton_poi_fused__to_copy_slice_7(in_ptr0, out_ptr0, xnumel, XBLOCK : tl.constexpr):
    xnumel = 589824
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:]
    xmask = tl.full([XBLOCK], True, tl.int1)[:]
    x0 = xindex
    tmp0 = tl.load(in_ptr0 + (x0), None).to(tl.float32)
    tmp1 = tmp0.to(tl.float32)
    tl.store(out_ptr0 + (x0), tmp1, None)
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
        primals_5, primals_6, primals_7, primals_8, view, view_1, view_2, view_3, rsqrt, rsqrt_1, permute_3, tangents_1, tangents_2, tangents_3 = args
        args.clear()
        assert_size_stride_grouped((tangents_2, primals_8, primals_7, tangents_1, view_1, rsqrt_1, view_2, rsqrt), ((1, 65536, 6, 128), (65536, 64), (65536, 64), (1, 65536, 6, 128), (1, 65536, 6, 128), (1, 65536, 6, 1), (1, 65536, 6, 128), (1, 65536, 6, 1)), ((50331648, 768, 128, 1), (64, 1), (64, 1), (50331648, 768, 128, 1), (150994944, 2304, 128, 1), (393216, 6, 1, 1), (150994944, 2304, 128, 1), (393216, 6, 1, 1)), 'input')
        with torch.cuda._DeviceGuard(0):
            torch.cuda.set_device(0)
            tangents_2 = copy_if_misaligned(tangents_2)
            tangents_1 = copy_if_misaligned(tangents_1)
            buf0 = empty_strided_cuda((1, 65536, 6, 128), (50331648, 768, 128, 1), torch.bfloat16)
            buf1 = empty_strided_cuda((1, 65536, 6, 1), (393216, 6, 1, 393216), torch.float32)
            buf15 = empty_strided_cuda((65536, 2304), (2304, 1), torch.bfloat16)
            buf12 = reinterpret_tensor(buf15, (65536, 768), (2304, 1), 0)  # alias
            # Topologically Sorted Source Nodes: [convert_element_type_13, slice_1, slice_2, neg, getitem_3, mul_12, getitem_2, mul_13, mul_14, add_5, mul_15, add_6, cat_3, convert_element_type_14, convert_element_type_15, rms_norm_1, mul_16, mul_17, sum_1, div, mul_18, sub_2, mul_19, convert_element_type_17, convert_element_type_18, slice_3, slice_4, neg_1, mul_20, mul_21, mul_22, add_7, mul_23, add_8, cat_4, convert_element_type_19, convert_element_type_20, rms_norm, mul_24, mul_25, sum_2, div_1, mul_26, sub_3, mul_27, convert_element_type_22, getitem, mul_30, view_6, view_7, view_8, cat_5], Original ATen: [aten._to_copy, aten.slice, aten.neg, aten.unsqueeze, aten.mul, aten.add, aten.cat, aten._fused_rms_norm_backward, aten._fused_rms_norm, aten.select, aten.view]
            raw_stream0 = get_raw_stream(0)
            triton_per_fused__fused_rms_norm__fused_rms_norm_backward__to_copy_add_cat_mul_neg_select_slice_unsqueeze_view_0.run(tangents_2, primals_8, primals_7, tangents_1, view_1, rsqrt_1, view_2, rsqrt, buf0, buf1, buf12, 393216, 128, stream=raw_stream0)
            del primals_7
            del primals_8
            del rsqrt
            del tangents_1
            del tangents_2
            del view_2
            assert_size_stride_grouped((tangents_3, primals_6, view_3, primals_5), ((1, 65536, 6, 128), (65536, 768), (1, 65536, 6, 128), (2, )), ((50331648, 768, 128, 1), (768, 1), (150994944, 2304, 128, 1), (1, )), 'input')
            tangents_3 = copy_if_misaligned(tangents_3)
            buf5 = empty_strided_cuda((512, ), (1, ), torch.float32)
            buf9 = empty_strided_cuda((512, ), (1, ), torch.float32)
            buf14 = reinterpret_tensor(buf15, (65536, 768), (2304, 1), 1536)  # alias
            buf7 = empty_strided_cuda((1, 65536, 6, 128), (50331648, 768, 128, 1), torch.bfloat16)
            # Topologically Sorted Source Nodes: [convert_element_type_15, rms_norm_1, mul_16, div, mul_18, sub_2, mul_19, convert_element_type_17, convert_element_type_20, rms_norm, mul_24, div_1, mul_26, sub_3, mul_27, convert_element_type_22, getitem_1, mul_28, view_as, mul_29, sum_3, getitem, mul_30, mul_31, sum_4, view_6, view_7, view_8, cat_5], Original ATen: [aten._fused_rms_norm_backward, aten._fused_rms_norm, aten.select, aten.mul, aten.view, aten.sum, aten.cat]
            raw_stream0 = get_raw_stream(0)
            triton_red_fused__fused_rms_norm__fused_rms_norm_backward_cat_mul_select_sum_view_1.run(tangents_3, primals_6, view_3, primals_5, buf5, buf9, buf14, buf7, 512, 98304, stream=raw_stream0)
            del primals_5
            del primals_6
            del tangents_3
            del view_3
            buf6 = empty_strided_cuda((), (), torch.bfloat16)
            # Topologically Sorted Source Nodes: [view_as, mul_29, sum_3], Original ATen: [aten.view, aten.mul, aten.sum]
            raw_stream0 = get_raw_stream(0)
            triton_per_fused_mul_sum_view_2.run(buf5, buf6, 1, 512, stream=raw_stream0)
            del buf5
            buf10 = empty_strided_cuda((), (), torch.bfloat16)
            # Topologically Sorted Source Nodes: [mul_31, sum_4], Original ATen: [aten.mul, aten.sum]
            raw_stream0 = get_raw_stream(0)
            triton_per_fused_mul_sum_view_2.run(buf9, buf10, 1, 512, stream=raw_stream0)
            del buf9
            buf11 = empty_strided_cuda((2, ), (1, ), torch.float32)
            # Topologically Sorted Source Nodes: [convert_element_type_23, full_default, convert_element_type_24, add_9], Original ATen: [aten._to_copy, aten.select_backward, aten.add]
            raw_stream0 = get_raw_stream(0)
            triton_poi_fused__to_copy_add_select_backward_3.run(buf6, buf10, buf11, 2, stream=raw_stream0)
            del buf10
            del buf6
            buf13 = reinterpret_tensor(buf15, (65536, 768), (2304, 1), 768)  # alias
            # Topologically Sorted Source Nodes: [convert_element_type_15, rms_norm_1, mul_16, div, mul_18, sub_2, mul_19, convert_element_type_17, convert_element_type_20, rms_norm, mul_24, div_1, mul_26, sub_3, mul_27, convert_element_type_22, getitem, mul_30, view_6, view_7, view_8, cat_5], Original ATen: [aten._fused_rms_norm_backward, aten._fused_rms_norm, aten.select, aten.mul, aten.view, aten.cat]
            raw_stream0 = get_raw_stream(0)
            triton_poi_fused__fused_rms_norm__fused_rms_norm_backward_cat_mul_select_view_4.run(buf0, view_1, rsqrt_1, buf1, buf13, 50331648, stream=raw_stream0)
            del buf0
            del buf1
            del rsqrt_1
            del view_1
            assert_size_stride(view, (65536, 768), (768, 1), 'input')
            del buf12
            del buf13
            del buf14
            buf16 = empty_strided_cuda((2304, 768), (768, 1), torch.bfloat16)
            # Topologically Sorted Source Nodes: [permute_1, mm_1], Original ATen: [aten.t, aten.mm]
            extern_kernels.mm(reinterpret_tensor(buf15, (2304, 65536), (1, 2304), 0), view, out=buf16)
            del view
            assert_size_stride(permute_3, (2304, 768), (768, 1), 'input')
            buf17 = empty_strided_cuda((65536, 768), (768, 1), torch.bfloat16)
            # Topologically Sorted Source Nodes: [mm_2], Original ATen: [aten.mm]
            extern_kernels.mm(buf15, permute_3, out=buf17)
            del buf15
            del permute_3
            buf18 = empty_strided_cuda((768, 768), (768, 1), torch.float32)
            # Topologically Sorted Source Nodes: [slice_7, convert_element_type_29], Original ATen: [aten.slice, aten._to_copy]
            raw_stream0 = get_raw_stream(0)
            triton_poi_fused__to_copy_slice_5.run(buf16, buf18, 589824, stream=raw_stream0)
            buf19 = empty_strided_cuda((768, 768), (768, 1), torch.float32)
            # Topologically Sorted Source Nodes: [slice_6, convert_element_type_30], Original ATen: [aten.slice, aten._to_copy]
            raw_stream0 = get_raw_stream(0)
            triton_poi_fused__to_copy_slice_6.run(buf16, buf19, 589824, stream=raw_stream0)
            buf20 = empty_strided_cuda((768, 768), (768, 1), torch.float32)
            # Topologically Sorted Source Nodes: [slice_5, convert_element_type_31], Original ATen: [aten.slice, aten._to_copy]
            raw_stream0 = get_raw_stream(0)
            triton_poi_fused__to_copy_slice_7.run(buf16, buf20, 589824, stream=raw_stream0)
            del buf16
        return (reinterpret_tensor(buf17, (1, 65536, 768), (50331648, 768, 1), 0), buf20, buf19, buf18, buf11, reinterpret_tensor(buf7, (65536, 768), (768, 1), 0), None, None, )

runner = Runner(partitions=[])
call = runner.call
recursively_apply_fns = runner.recursively_apply_fns


def get_args():
    from torch._dynamo.testing import rand_strided
    _shared_storage_5 = rand_strided((150994944,), (1,), device='cuda:0', dtype=torch.bfloat16)
    primals_5 = rand_strided((2, ), (1, ), device='cuda:0', dtype=torch.float32)
    primals_6 = rand_strided((65536, 768), (768, 1), device='cuda:0', dtype=torch.bfloat16)
    primals_7 = rand_strided((65536, 64), (64, 1), device='cuda:0', dtype=torch.float32)
    primals_8 = rand_strided((65536, 64), (64, 1), device='cuda:0', dtype=torch.float32)
    view = rand_strided((65536, 768), (768, 1), device='cuda:0', dtype=torch.bfloat16)
    view_1 = torch.as_strided(_shared_storage_5, (1, 65536, 6, 128), (150994944, 2304, 128, 1))
    view_2 = torch.as_strided(_shared_storage_5, (1, 65536, 6, 128), (150994944, 2304, 128, 1))
    view_3 = torch.as_strided(_shared_storage_5, (1, 65536, 6, 128), (150994944, 2304, 128, 1))
    rsqrt = rand_strided((1, 65536, 6, 1), (393216, 6, 1, 1), device='cuda:0', dtype=torch.float32)
    rsqrt_1 = rand_strided((1, 65536, 6, 1), (393216, 6, 1, 1), device='cuda:0', dtype=torch.float32)
    permute_3 = rand_strided((2304, 768), (768, 1), device='cuda:0', dtype=torch.bfloat16)
    tangents_1 = rand_strided((1, 65536, 6, 128), (50331648, 768, 128, 1), device='cuda:0', dtype=torch.bfloat16)
    tangents_2 = rand_strided((1, 65536, 6, 128), (50331648, 768, 128, 1), device='cuda:0', dtype=torch.bfloat16)
    tangents_3 = rand_strided((1, 65536, 6, 128), (50331648, 768, 128, 1), device='cuda:0', dtype=torch.bfloat16)
    return [primals_5, primals_6, primals_7, primals_8, view, view_1, view_2, view_3, rsqrt, rsqrt_1, permute_3, tangents_1, tangents_2, tangents_3]


def benchmark_compiled_module(args, times=10, repeat=10):
    from torch._inductor.utils import print_performance
    fn = lambda: call(list(args))
    return print_performance(fn, times=times, repeat=repeat, device='cuda')


if __name__ == "__main__":
    from torch._inductor.wrapper_benchmark import compiled_module_main
    args = get_args()
    compiled_module_main('None', lambda times, repeat: benchmark_compiled_module(args, times=times, repeat=repeat))
