# AOT ID: ['9_inference']
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

aten = torch.ops.aten
inductor_ops = torch.ops.inductor
_quantized = torch.ops._quantized
assert_size_stride = torch._C._dynamo.guards.assert_size_stride
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


cpp_fused__to_copy_0 = async_compile.cpp_pybinding(['const float*', 'at::BFloat16*'], r'''
#include <torch/csrc/inductor/cpp_prefix.h>
extern "C"  void  kernel(const float* in_ptr0,
                       at::BFloat16* out_ptr0)
{
    std::atomic<int> inductor_cpu_integer_div_error{0};
    inductor_cpu_integer_div_error_flag = &inductor_cpu_integer_div_error;
    {
        for(int64_t x0=static_cast<int64_t>(0L); x0<static_cast<int64_t>(589824L); x0+=static_cast<int64_t>(16L))
        {
            {
                if(C10_LIKELY(x0 >= static_cast<int64_t>(0) && x0 < static_cast<int64_t>(589824L)))
                {
                    auto tmp0 = at::vec::VectorizedN<float,2>::loadu(in_ptr0 + static_cast<int64_t>(x0), static_cast<int64_t>(16));
                    auto tmp1 = at::vec::convert<at::BFloat16,1,float,2>(tmp0);
                    tmp1.store(out_ptr0 + static_cast<int64_t>(x0), static_cast<int64_t>(16));
                }
            }
        }
    }
    inductor_cpu_integer_div_error_flag = nullptr;
    inductor_cpu_throw_if_integer_div_error(inductor_cpu_integer_div_error);
}
''')


cpp_fused__to_copy__unsafe_view_mean_pow_view_1 = async_compile.cpp_pybinding(['const at::BFloat16*', 'const float*', 'float*', 'at::BFloat16*'], r'''
#include <torch/csrc/inductor/cpp_prefix.h>
extern "C"  void  kernel(const at::BFloat16* in_ptr0,
                       const float* in_ptr1,
                       float* out_ptr0,
                       at::BFloat16* out_ptr1)
{
    std::atomic<int> inductor_cpu_integer_div_error{0};
    inductor_cpu_integer_div_error_flag = &inductor_cpu_integer_div_error;
    {
        #pragma GCC ivdep
        for(int64_t x0=static_cast<int64_t>(0L); x0<static_cast<int64_t>(12288L); x0+=static_cast<int64_t>(1L))
        {
            {
                float tmp_acc0 = 0;
                at::vec::VectorizedN<float,2> tmp_acc0_vec = at::vec::VectorizedN<float,2>(0);
                for(int64_t x1=static_cast<int64_t>(0L); x1<static_cast<int64_t>(128L); x1+=static_cast<int64_t>(16L))
                {
                    {
                        if(C10_LIKELY(x1 >= static_cast<int64_t>(0) && x1 < static_cast<int64_t>(128L)))
                        {
                            auto tmp0 = at::vec::Vectorized<at::BFloat16>::loadu(in_ptr0 + static_cast<int64_t>(x1 + 128L*x0), static_cast<int64_t>(16));
                            auto tmp1 = at::vec::convert<float,2,at::BFloat16,1>(tmp0);
                            auto tmp2 = tmp1 * tmp1;
                            tmp_acc0_vec = tmp_acc0_vec + tmp2;
                        }
                    }
                }
                tmp_acc0 = tmp_acc0 + at::vec::vec_reduce_all<float, 2>([](at::vec::Vectorized<float>& x, at::vec::Vectorized<float>& y) { return x + y; }, tmp_acc0_vec);
                out_ptr0[static_cast<int64_t>(x0)] = static_cast<float>(tmp_acc0);
            }
        }
    }
    {
        for(int64_t x0=static_cast<int64_t>(0L); x0<static_cast<int64_t>(589824L); x0+=static_cast<int64_t>(16L))
        {
            {
                if(C10_LIKELY(x0 >= static_cast<int64_t>(0) && x0 < static_cast<int64_t>(589824L)))
                {
                    auto tmp0 = at::vec::VectorizedN<float,2>::loadu(in_ptr1 + static_cast<int64_t>(x0), static_cast<int64_t>(16));
                    auto tmp1 = at::vec::convert<at::BFloat16,1,float,2>(tmp0);
                    tmp1.store(out_ptr1 + static_cast<int64_t>(x0), static_cast<int64_t>(16));
                }
            }
        }
    }
    inductor_cpu_integer_div_error_flag = nullptr;
    inductor_cpu_throw_if_integer_div_error(inductor_cpu_integer_div_error);
}
''')


cpp_fused__to_copy__unsafe_view_add_mean_mul_pow_rsqrt_split_sub_unsqueeze_view_2 = async_compile.cpp_pybinding(['const at::BFloat16*', 'const at::BFloat16*', 'const float*', 'const float*', 'const float*', 'const float*', 'const float*', 'const float*', 'float*', 'float*', 'float*', 'float*', 'float*', 'at::BFloat16*', 'at::BFloat16*', 'at::BFloat16*'], r'''
#include <torch/csrc/inductor/cpp_prefix.h>
extern "C"  void  kernel(const at::BFloat16* in_ptr0,
                       const at::BFloat16* in_ptr1,
                       const float* in_ptr2,
                       const float* in_ptr3,
                       const float* in_ptr4,
                       const float* in_ptr5,
                       const float* in_ptr6,
                       const float* in_ptr7,
                       float* out_ptr0,
                       float* out_ptr1,
                       float* out_ptr2,
                       float* out_ptr3,
                       float* out_ptr4,
                       at::BFloat16* out_ptr5,
                       at::BFloat16* out_ptr6,
                       at::BFloat16* out_ptr7)
{
    std::atomic<int> inductor_cpu_integer_div_error{0};
    inductor_cpu_integer_div_error_flag = &inductor_cpu_integer_div_error;
    {
        #pragma GCC ivdep
        for(int64_t x0=static_cast<int64_t>(0L); x0<static_cast<int64_t>(12288L); x0+=static_cast<int64_t>(1L))
        {
            {
                float tmp_acc0 = 0;
                at::vec::VectorizedN<float,2> tmp_acc0_vec = at::vec::VectorizedN<float,2>(0);
                for(int64_t x1=static_cast<int64_t>(0L); x1<static_cast<int64_t>(128L); x1+=static_cast<int64_t>(16L))
                {
                    {
                        if(C10_LIKELY(x1 >= static_cast<int64_t>(0) && x1 < static_cast<int64_t>(128L)))
                        {
                            auto tmp0 = at::vec::Vectorized<at::BFloat16>::loadu(in_ptr0 + static_cast<int64_t>(x1 + 128L*x0), static_cast<int64_t>(16));
                            auto tmp1 = at::vec::convert<float,2,at::BFloat16,1>(tmp0);
                            auto tmp2 = tmp1 * tmp1;
                            tmp_acc0_vec = tmp_acc0_vec + tmp2;
                        }
                    }
                }
                tmp_acc0 = tmp_acc0 + at::vec::vec_reduce_all<float, 2>([](at::vec::Vectorized<float>& x, at::vec::Vectorized<float>& y) { return x + y; }, tmp_acc0_vec);
                out_ptr0[static_cast<int64_t>(x0)] = static_cast<float>(tmp_acc0);
            }
        }
    }
    {
        #pragma GCC ivdep
        for(int64_t x0=static_cast<int64_t>(0L); x0<static_cast<int64_t>(2048L); x0+=static_cast<int64_t>(1L))
        {
            #pragma GCC ivdep
            for(int64_t x1=static_cast<int64_t>(0L); x1<static_cast<int64_t>(6L); x1+=static_cast<int64_t>(1L))
            {
                for(int64_t x2=static_cast<int64_t>(0L); x2<static_cast<int64_t>(64L); x2+=static_cast<int64_t>(16L))
                {
                    {
                        if(C10_LIKELY(x2 >= static_cast<int64_t>(0) && x2 < static_cast<int64_t>(64L)))
                        {
                            auto tmp0 = at::vec::Vectorized<at::BFloat16>::loadu(in_ptr1 + static_cast<int64_t>(x2 + 128L*x1 + 768L*x0), static_cast<int64_t>(16));
                            auto tmp2 = in_ptr2[static_cast<int64_t>(x1 + 6L*x0)];
                            auto tmp11 = at::vec::VectorizedN<float,2>::loadu(in_ptr3 + static_cast<int64_t>(x2 + 64L*x0), static_cast<int64_t>(16));
                            auto tmp13 = at::vec::Vectorized<at::BFloat16>::loadu(in_ptr1 + static_cast<int64_t>(64L + x2 + 128L*x1 + 768L*x0), static_cast<int64_t>(16));
                            auto tmp17 = at::vec::VectorizedN<float,2>::loadu(in_ptr4 + static_cast<int64_t>(x2 + 64L*x0), static_cast<int64_t>(16));
                            auto tmp23 = at::vec::Vectorized<at::BFloat16>::loadu(in_ptr0 + static_cast<int64_t>(x2 + 128L*x1 + 768L*x0), static_cast<int64_t>(16));
                            auto tmp25 = out_ptr0[static_cast<int64_t>(x1 + 6L*x0)];
                            auto tmp33 = at::vec::Vectorized<at::BFloat16>::loadu(in_ptr0 + static_cast<int64_t>(64L + x2 + 128L*x1 + 768L*x0), static_cast<int64_t>(16));
                            auto tmp1 = at::vec::convert<float,2,at::BFloat16,1>(tmp0);
                            auto tmp3 = static_cast<float>(128.0);
                            auto tmp4 = tmp2 / tmp3;
                            auto tmp5 = static_cast<float>(1.1920928955078125e-07);
                            auto tmp6 = float(tmp4 + tmp5);
                            auto tmp7 = 1 / std::sqrt(tmp6);
                            auto tmp8 = at::vec::VectorizedN<float,2>(tmp7);
                            auto tmp9 = tmp1 * tmp8;
                            auto tmp10 = at::vec::convert<at::BFloat16,1,float,2>(tmp9);
                            auto tmp12 = tmp9 * tmp11;
                            auto tmp14 = at::vec::convert<float,2,at::BFloat16,1>(tmp13);
                            auto tmp15 = tmp14 * tmp8;
                            auto tmp16 = at::vec::convert<at::BFloat16,1,float,2>(tmp15);
                            auto tmp18 = tmp15 * tmp17;
                            auto tmp19 = tmp12 + tmp18;
                            auto tmp20 = tmp15 * tmp11;
                            auto tmp21 = tmp9 * tmp17;
                            auto tmp22 = tmp20 - tmp21;
                            auto tmp24 = at::vec::convert<float,2,at::BFloat16,1>(tmp23);
                            auto tmp26 = tmp25 / tmp3;
                            auto tmp27 = float(tmp26 + tmp5);
                            auto tmp28 = 1 / std::sqrt(tmp27);
                            auto tmp29 = at::vec::VectorizedN<float,2>(tmp28);
                            auto tmp30 = tmp24 * tmp29;
                            auto tmp31 = at::vec::convert<at::BFloat16,1,float,2>(tmp30);
                            auto tmp32 = tmp30 * tmp11;
                            auto tmp34 = at::vec::convert<float,2,at::BFloat16,1>(tmp33);
                            auto tmp35 = tmp34 * tmp29;
                            auto tmp36 = at::vec::convert<at::BFloat16,1,float,2>(tmp35);
                            auto tmp37 = tmp35 * tmp17;
                            auto tmp38 = tmp32 + tmp37;
                            auto tmp39 = tmp35 * tmp11;
                            auto tmp40 = tmp30 * tmp17;
                            auto tmp41 = tmp39 - tmp40;
                            tmp19.store(out_ptr1 + static_cast<int64_t>(x2 + 128L*x1 + 768L*x0));
                            tmp22.store(out_ptr2 + static_cast<int64_t>(x2 + 128L*x1 + 768L*x0));
                            tmp38.store(out_ptr3 + static_cast<int64_t>(x2 + 128L*x1 + 768L*x0));
                            tmp41.store(out_ptr4 + static_cast<int64_t>(x2 + 128L*x1 + 768L*x0));
                        }
                    }
                }
            }
        }
    }
    {
        for(int64_t x0=static_cast<int64_t>(0L); x0<static_cast<int64_t>(1572864L); x0+=static_cast<int64_t>(16L))
        {
            {
                if(C10_LIKELY(x0 >= static_cast<int64_t>(0) && x0 < static_cast<int64_t>(1572864L)))
                {
                    auto tmp0 = at::vec::VectorizedN<float,2>::loadu(in_ptr5 + static_cast<int64_t>(x0), static_cast<int64_t>(16));
                    auto tmp1 = at::vec::convert<at::BFloat16,1,float,2>(tmp0);
                    tmp1.store(out_ptr5 + static_cast<int64_t>(x0), static_cast<int64_t>(16));
                }
            }
        }
    }
    {
        for(int64_t x0=static_cast<int64_t>(0L); x0<static_cast<int64_t>(1572864L); x0+=static_cast<int64_t>(16L))
        {
            {
                if(C10_LIKELY(x0 >= static_cast<int64_t>(0) && x0 < static_cast<int64_t>(1572864L)))
                {
                    auto tmp0 = at::vec::VectorizedN<float,2>::loadu(in_ptr6 + static_cast<int64_t>(x0), static_cast<int64_t>(16));
                    auto tmp1 = at::vec::convert<at::BFloat16,1,float,2>(tmp0);
                    tmp1.store(out_ptr6 + static_cast<int64_t>(x0), static_cast<int64_t>(16));
                }
            }
        }
    }
    {
        for(int64_t x0=static_cast<int64_t>(0L); x0<static_cast<int64_t>(589824L); x0+=static_cast<int64_t>(16L))
        {
            {
                if(C10_LIKELY(x0 >= static_cast<int64_t>(0) && x0 < static_cast<int64_t>(589824L)))
                {
                    auto tmp0 = at::vec::VectorizedN<float,2>::loadu(in_ptr7 + static_cast<int64_t>(x0), static_cast<int64_t>(16));
                    auto tmp1 = at::vec::convert<at::BFloat16,1,float,2>(tmp0);
                    tmp1.store(out_ptr7 + static_cast<int64_t>(x0), static_cast<int64_t>(16));
                }
            }
        }
    }
    inductor_cpu_integer_div_error_flag = nullptr;
    inductor_cpu_throw_if_integer_div_error(inductor_cpu_integer_div_error);
}
''')


cpp_fused__unsafe_view_add_mul_select_view_3 = async_compile.cpp_pybinding(['at::BFloat16*', 'const float*', 'const at::BFloat16*'], r'''
#include <torch/csrc/inductor/cpp_prefix.h>
extern "C"  void  kernel(at::BFloat16* in_out_ptr0,
                       const float* in_ptr0,
                       const at::BFloat16* in_ptr1)
{
    std::atomic<int> inductor_cpu_integer_div_error{0};
    inductor_cpu_integer_div_error_flag = &inductor_cpu_integer_div_error;
    {
        for(int64_t x0=static_cast<int64_t>(0L); x0<static_cast<int64_t>(1572864L); x0+=static_cast<int64_t>(16L))
        {
            {
                if(C10_LIKELY(x0 >= static_cast<int64_t>(0) && x0 < static_cast<int64_t>(1572864L)))
                {
                    auto tmp0 = in_ptr0[static_cast<int64_t>(0L)];
                    auto tmp2 = at::vec::Vectorized<at::BFloat16>::loadu(in_out_ptr0 + static_cast<int64_t>(x0), static_cast<int64_t>(16));
                    auto tmp6 = in_ptr0[static_cast<int64_t>(1L)];
                    auto tmp8 = at::vec::Vectorized<at::BFloat16>::loadu(in_ptr1 + static_cast<int64_t>(x0), static_cast<int64_t>(16));
                    auto tmp1 = c10::convert<float>(tmp0);
                    auto tmp3 = at::vec::convert<float,2,at::BFloat16,1>(tmp2);
                    auto tmp4 = at::vec::VectorizedN<float,2>(tmp1);
                    auto tmp5 = tmp4 * tmp3;
                    auto tmp7 = c10::convert<float>(tmp6);
                    auto tmp9 = at::vec::convert<float,2,at::BFloat16,1>(tmp8);
                    auto tmp10 = at::vec::VectorizedN<float,2>(tmp7);
                    auto tmp11 = tmp10 * tmp9;
                    auto tmp12 = tmp5 + tmp11;
                    auto tmp13 = at::vec::convert<at::BFloat16,1,float,2>(tmp12);
                    tmp13.store(in_out_ptr0 + static_cast<int64_t>(x0), static_cast<int64_t>(16));
                }
            }
        }
    }
    inductor_cpu_integer_div_error_flag = nullptr;
    inductor_cpu_throw_if_integer_div_error(inductor_cpu_integer_div_error);
}
''')


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
        arg0_1, arg1_1, arg2_1, arg3_1, arg4_1, arg5_1, arg6_1, arg7_1 = args
        args.clear()
        assert_size_stride(arg1_1, (768, 768), (768, 1), 'input')
        buf0 = empty_strided_cpu((768, 768), (768, 1), torch.bfloat16)
        assert_size_stride(arg0_1, (1, 2048, 768), (1572864, 768, 1), 'input')
        cpp_fused__to_copy_0(arg1_1, buf0)
        del arg1_1
        buf1 = empty_strided_cpu((2048, 768), (768, 1), torch.bfloat16)
        # Topologically Sorted Source Nodes: [linear, type_as], Original ATen: [aten.view, aten._to_copy, aten.t, aten.mm]
        extern_kernels.mm(reinterpret_tensor(arg0_1, (2048, 768), (768, 1), 0), reinterpret_tensor(buf0, (768, 768), (1, 768), 0), out=buf1)
        buf2 = empty_strided_cpu((1, 2048, 6, 1), (12288, 6, 1, 12288), torch.float32)
        assert_size_stride(arg2_1, (768, 768), (768, 1), 'input')
        buf3 = buf0; del buf0  # reuse
        cpp_fused__to_copy__unsafe_view_mean_pow_view_1(buf1, arg2_1, buf2, buf3)
        del arg2_1
        buf4 = empty_strided_cpu((2048, 768), (768, 1), torch.bfloat16)
        # Topologically Sorted Source Nodes: [linear_1, type_as_1], Original ATen: [aten.view, aten._to_copy, aten.t, aten.mm]
        extern_kernels.mm(reinterpret_tensor(arg0_1, (2048, 768), (768, 1), 0), reinterpret_tensor(buf3, (768, 768), (1, 768), 0), out=buf4)
        del buf3
        buf5 = empty_strided_cpu((1, 2048, 6, 1), (12288, 6, 1, 12288), torch.float32)
        assert_size_stride(arg6_1, (2048, 64), (64, 1), 'input')
        assert_size_stride(arg7_1, (2048, 64), (64, 1), 'input')
        buf8 = empty_strided_cpu((1, 2048, 6, 128), (1572864, 768, 128, 1), torch.float32)
        buf6 = reinterpret_tensor(buf8, (1, 2048, 6, 64), (1572864, 768, 128, 1), 0)  # alias
        buf7 = reinterpret_tensor(buf8, (1, 2048, 6, 64), (1572864, 768, 128, 1), 64)  # alias
        buf12 = empty_strided_cpu((1, 2048, 6, 128), (1572864, 768, 128, 1), torch.float32)
        buf10 = reinterpret_tensor(buf12, (1, 2048, 6, 64), (1572864, 768, 128, 1), 0)  # alias
        buf11 = reinterpret_tensor(buf12, (1, 2048, 6, 64), (1572864, 768, 128, 1), 64)  # alias
        buf9 = empty_strided_cpu((1, 2048, 6, 128), (1572864, 768, 128, 1), torch.bfloat16)
        buf13 = empty_strided_cpu((1, 2048, 6, 128), (1572864, 768, 128, 1), torch.bfloat16)
        assert_size_stride(arg3_1, (768, 768), (768, 1), 'input')
        buf14 = empty_strided_cpu((768, 768), (768, 1), torch.bfloat16)
        cpp_fused__to_copy__unsafe_view_add_mean_mul_pow_rsqrt_split_sub_unsqueeze_view_2(buf4, buf1, buf2, arg6_1, arg7_1, buf8, buf12, arg3_1, buf5, buf6, buf7, buf10, buf11, buf9, buf13, buf14)
        del arg3_1
        del arg6_1
        del arg7_1
        del buf1
        del buf10
        del buf11
        del buf12
        del buf2
        del buf5
        del buf6
        del buf7
        del buf8
        buf15 = buf4; del buf4  # reuse
        # Topologically Sorted Source Nodes: [linear_2, type_as_2], Original ATen: [aten.view, aten._to_copy, aten.t, aten.mm]
        extern_kernels.mm(reinterpret_tensor(arg0_1, (2048, 768), (768, 1), 0), reinterpret_tensor(buf14, (768, 768), (1, 768), 0), out=buf15)
        del arg0_1
        del buf14
        assert_size_stride(arg5_1, (2, ), (1, ), 'input')
        assert_size_stride(arg4_1, (2048, 768), (768, 1), 'input')
        buf16 = reinterpret_tensor(buf15, (1, 2048, 6, 128), (1572864, 768, 128, 1), 0); del buf15  # reuse
        cpp_fused__unsafe_view_add_mul_select_view_3(buf16, arg5_1, arg4_1)
        del arg4_1
        del arg5_1
        return (buf9, buf13, buf16, )

runner = Runner(partitions=[])
call = runner.call
recursively_apply_fns = runner.recursively_apply_fns


def get_args():
    from torch._dynamo.testing import rand_strided
    arg0_1 = rand_strided((1, 2048, 768), (1572864, 768, 1), device='cpu', dtype=torch.bfloat16)
    arg1_1 = rand_strided((768, 768), (768, 1), device='cpu', dtype=torch.float32)
    arg2_1 = rand_strided((768, 768), (768, 1), device='cpu', dtype=torch.float32)
    arg3_1 = rand_strided((768, 768), (768, 1), device='cpu', dtype=torch.float32)
    arg4_1 = rand_strided((2048, 768), (768, 1), device='cpu', dtype=torch.bfloat16)
    arg5_1 = rand_strided((2, ), (1, ), device='cpu', dtype=torch.float32)
    arg6_1 = rand_strided((2048, 64), (64, 1), device='cpu', dtype=torch.float32)
    arg7_1 = rand_strided((2048, 64), (64, 1), device='cpu', dtype=torch.float32)
    return [arg0_1, arg1_1, arg2_1, arg3_1, arg4_1, arg5_1, arg6_1, arg7_1]


def benchmark_compiled_module(args, times=10, repeat=10):
    from torch._inductor.utils import print_performance
    fn = lambda: call(list(args))
    return print_performance(fn, times=times, repeat=repeat, device='cpu')


if __name__ == "__main__":
    from torch._inductor.wrapper_benchmark import compiled_module_main
    args = get_args()
    compiled_module_main('None', lambda times, repeat: benchmark_compiled_module(args, times=times, repeat=repeat))
