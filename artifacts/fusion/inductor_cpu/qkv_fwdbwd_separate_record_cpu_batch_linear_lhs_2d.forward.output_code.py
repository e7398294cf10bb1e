# AOT ID: ['19_forward']
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


cpp_fused__to_copy_0 = async_compile.cpp_pybinding(['const float*', 'const float*', 'const float*', 'at::BFloat16*', 'at::BFloat16*', 'at::BFloat16*'], r'''
#include <torch/csrc/inductor/cpp_prefix.h>
extern "C"  void  kernel(const float* in_ptr0,
                       const float* in_ptr1,
                       const float* in_ptr2,
                       at::BFloat16* out_ptr0,
                       at::BFloat16* out_ptr1,
                       at::BFloat16* out_ptr2)
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
    {
        for(int64_t x0=static_cast<int64_t>(0L); x0<static_cast<int64_t>(589824L); x0+=static_cast<int64_t>(16L))
        {
            {
                if(C10_LIKELY(x0 >= static_cast<int64_t>(0) && x0 < static_cast<int64_t>(589824L)))
                {
                    auto tmp0 = at::vec::VectorizedN<float,2>::loadu(in_ptr2 + static_cast<int64_t>(x0), static_cast<int64_t>(16));
                    auto tmp1 = at::vec::convert<at::BFloat16,1,float,2>(tmp0);
                    tmp1.store(out_ptr2 + static_cast<int64_t>(x0), static_cast<int64_t>(16));
                }
            }
        }
    }
    inductor_cpu_integer_div_error_flag = nullptr;
    inductor_cpu_throw_if_integer_div_error(inductor_cpu_integer_div_error);
}
''')


cpp_fused__to_copy_add_mean_mul_pow_rsqrt_select_split_split_with_sizes_sub_unsqueeze_view_1 = async_compile.cpp_pybinding(['float*', 'float*', 'const at::BFloat16*', 'const float*', 'const float*', 'const float*', 'const float*', 'const float*', 'const at::BFloat16*', 'float*', 'float*', 'float*', 'float*', 'at::BFloat16*', 'at::BFloat16*', 'at::BFloat16*'], r'''
#include <torch/csrc/inductor/cpp_prefix.h>
extern "C"  void  kernel(float* in_out_ptr0,
                       float* in_out_ptr1,
                       const at::BFloat16* in_ptr0,
                       const float* in_ptr1,
                       const float* in_ptr2,
                       const float* in_ptr3,
                       const float* in_ptr4,
                       const float* in_ptr5,
                       const at::BFloat16* in_ptr6,
                       float* out_ptr2,
                       float* out_ptr3,
                       float* out_ptr4,
                       float* out_ptr5,
                       at::BFloat16* out_ptr6,
                       at::BFloat16* out_ptr7,
                       at::BFloat16* out_ptr8)
{
    std::atomic<int> inductor_cpu_integer_div_error{0};
    inductor_cpu_integer_div_error_flag = &inductor_cpu_integer_div_error;
    auto out_ptr0 = in_out_ptr0;
    auto out_ptr1 = in_out_ptr1;
    {
        #pragma GCC ivdep
        for(int64_t x0=static_cast<int64_t>(0L); x0<static_cast<int64_t>(2048L); x0+=static_cast<int64_t>(1L))
        {
            #pragma GCC ivdep
            for(int64_t x1=static_cast<int64_t>(0L); x1<static_cast<int64_t>(6L); x1+=static_cast<int64_t>(1L))
            {
                {
                    float tmp_acc0 = 0;
                    at::vec::VectorizedN<float,2> tmp_acc0_vec = at::vec::VectorizedN<float,2>(0);
                    for(int64_t x2=static_cast<int64_t>(0L); x2<static_cast<int64_t>(128L); x2+=static_cast<int64_t>(16L))
                    {
                        {
                            if(C10_LIKELY(x2 >= static_cast<int64_t>(0) && x2 < static_cast<int64_t>(128L)))
                            {
                                auto tmp0 = at::vec::Vectorized<at::BFloat16>::loadu(in_ptr0 + static_cast<int64_t>(x2 + 128L*x1 + 2304L*x0), static_cast<int64_t>(16));
                                auto tmp1 = at::vec::convert<float,2,at::BFloat16,1>(tmp0);
                                auto tmp2 = tmp1 * tmp1;
                                tmp_acc0_vec = tmp_acc0_vec + tmp2;
                            }
                        }
                    }
                    tmp_acc0 = tmp_acc0 + at::vec::vec_reduce_all<float, 2>([](at::vec::Vectorized<float>& x, at::vec::Vectorized<float>& y) { return x + y; }, tmp_acc0_vec);
                    out_ptr0[static_cast<int64_t>(x1 + 6L*x0)] = static_cast<float>(tmp_acc0);
                }
            }
        }
    }
    {
        for(int64_t x0=static_cast<int64_t>(0L); x0<static_cast<int64_t>(12288L); x0+=static_cast<int64_t>(8L))
        {
            {
                if(C10_LIKELY(x0 >= static_cast<int64_t>(0) && x0 < static_cast<int64_t>(12288L)))
                {
                    auto tmp0 = at::vec::Vectorized<float>::loadu(out_ptr0 + static_cast<int64_t>(x0), static_cast<int64_t>(8));
                    auto tmp1 = static_cast<float>(128.0);
                    auto tmp2 = at::vec::Vectorized<float>(tmp1);
                    auto tmp3 = tmp0 / tmp2;
                    auto tmp4 = static_cast<float>(1.1920928955078125e-07);
                    auto tmp5 = at::vec::Vectorized<float>(tmp4);
                    auto tmp6 = tmp3 + tmp5;
                    auto tmp7 = tmp6.rsqrt();
                    tmp7.store(in_out_ptr0 + static_cast<int64_t>(x0));
                }
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
                {
                    float tmp_acc0 = 0;
                    at::vec::VectorizedN<float,2> tmp_acc0_vec = at::vec::VectorizedN<float,2>(0);
                    for(int64_t x2=static_cast<int64_t>(0L); x2<static_cast<int64_t>(128L); x2+=static_cast<int64_t>(16L))
                    {
                        {
                            if(C10_LIKELY(x2 >= static_cast<int64_t>(0) && x2 < static_cast<int64_t>(128L)))
                            {
                                auto tmp0 = at::vec::Vectorized<at::BFloat16>::loadu(in_ptr0 + static_cast<int64_t>(768L + x2 + 128L*x1 + 2304L*x0), static_cast<int64_t>(16));
                                auto tmp1 = at::vec::convert<float,2,at::BFloat16,1>(tmp0);
                                auto tmp2 = tmp1 * tmp1;
                                tmp_acc0_vec = tmp_acc0_vec + tmp2;
                            }
                        }
                    }
                    tmp_acc0 = tmp_acc0 + at::vec::vec_reduce_all<float, 2>([](at::vec::Vectorized<float>& x, at::vec::Vectorized<float>& y) { return x + y; }, tmp_acc0_vec);
                    out_ptr1[static_cast<int64_t>(x1 + 6L*x0)] = static_cast<float>(tmp_acc0);
                }
            }
        }
    }
    {
        for(int64_t x0=static_cast<int64_t>(0L); x0<static_cast<int64_t>(12288L); x0+=static_cast<int64_t>(8L))
        {
            {
                if(C10_LIKELY(x0 >= static_cast<int64_t>(0) && x0 < static_cast<int64_t>(12288L)))
                {
                    auto tmp0 = at::vec::Vectorized<float>::loadu(out_ptr1 + static_cast<int64_t>(x0), static_cast<int64_t>(8));
                    auto tmp1 = static_cast<float>(128.0);
                    auto tmp2 = at::vec::Vectorized<float>(tmp1);
                    auto tmp3 = tmp0 / tmp2;
                    auto tmp4 = static_cast<float>(1.1920928955078125e-07);
                    auto tmp5 = at::vec::Vectorized<float>(tmp4);
                    auto tmp6 = tmp3 + tmp5;
                    auto tmp7 = tmp6.rsqrt();
                    tmp7.store(in_out_ptr1 + static_cast<int64_t>(x0));
                }
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
                            auto tmp0 = at::vec::Vectorized<at::BFloat16>::loadu(in_ptr0 + static_cast<int64_t>(x2 + 128L*x1 + 2304L*x0), static_cast<int64_t>(16));
                            auto tmp2 = in_out_ptr0[static_cast<int64_t>(x1 + 6L*x0)];
                            auto tmp6 = at::vec::VectorizedN<float,2>::loadu(in_ptr1 + static_cast<int64_t>(x2 + 64L*x0), static_cast<int64_t>(16));
                            auto tmp8 = at::vec::Vectorized<at::BFloat16>::loadu(in_ptr0 + static_cast<int64_t>(64L + x2 + 128L*x1 + 2304L*x0), static_cast<int64_t>(16));
                            auto tmp12 = at::vec::VectorizedN<float,2>::loadu(in_ptr2 + static_cast<int64_t>(x2 + 64L*x0), static_cast<int64_t>(16));
                            auto tmp18 = at::vec::Vectorized<at::BFloat16>::loadu(in_ptr0 + static_cast<int64_t>(768L + x2 + 128L*x1 + 2304L*x0), static_cast<int64_t>(16));
                            auto tmp20 = in_out_ptr1[static_cast<int64_t>(x1 + 6L*x0)];
                            auto tmp25 = at::vec::Vectorized<at::BFloat16>::loadu(in_ptr0 + static_cast<int64_t>(832L + x2 + 128L*x1 + 2304L*x0), static_cast<int64_t>(16));
                            auto tmp1 = at::vec::convert<float,2,at::BFloat16,1>(tmp0);
                            auto tmp3 = at::vec::VectorizedN<float,2>(tmp2);
                            auto tmp4 = tmp1 * tmp3;
                            auto tmp5 = at::vec::convert<at::BFloat16,1,float,2>(tmp4);
                            auto tmp7 = tmp4 * tmp6;
                            auto tmp9 = at::vec::convert<float,2,at::BFloat16,1>(tmp8);
                            auto tmp10 = tmp9 * tmp3;
                            auto tmp11 = at::vec::convert<at::BFloat16,1,float,2>(tmp10);
                            auto tmp13 = tmp10 * tmp12;
                            auto tmp14 = tmp7 + tmp13;
                            auto tmp15 = tmp10 * tmp6;
                            auto tmp16 = tmp4 * tmp12;
                            auto tmp17 = tmp15 - tmp16;
                            auto tmp19 = at::vec::convert<float,2,at::BFloat16,1>(tmp18);
                            auto tmp21 = at::vec::VectorizedN<float,2>(tmp20);
                            auto tmp22 = tmp19 * tmp21;
                            auto tmp23 = at::vec::convert<at::BFloat16,1,float,2>(tmp22);
                            auto tmp24 = tmp22 * tmp6;
                            auto tmp26 = at::vec::convert<float,2,at::BFloat16,1>(tmp25);
                            auto tmp27 = tmp26 * tmp21;
                            auto tmp28 = at::vec::convert<at::BFloat16,1,float,2>(tmp27);
                            auto tmp29 = tmp27 * tmp12;
                            auto tmp30 = tmp24 + tmp29;
                            auto tmp31 = tmp27 * tmp6;
                            auto tmp32 = tmp22 * tmp12;
                            auto tmp33 = tmp31 - tmp32;
                            tmp14.store(out_ptr2 + static_cast<int64_t>(x2 + 128L*x1 + 768L*x0));
                            tmp17.store(out_ptr3 + static_cast<int64_t>(x2 + 128L*x1 + 768L*x0));
                            tmp30.store(out_ptr4 + static_cast<int64_t>(x2 + 128L*x1 + 768L*x0));
                            tmp33.store(out_ptr5 + static_cast<int64_t>(x2 + 128L*x1 + 768L*x0));
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
                    auto tmp0 = at::vec::VectorizedN<float,2>::loadu(in_ptr3 + static_cast<int64_t>(x0), static_cast<int64_t>(16));
                    auto tmp1 = at::vec::convert<at::BFloat16,1,float,2>(tmp0);
                    tmp1.store(out_ptr6 + static_cast<int64_t>(x0), static_cast<int64_t>(16));
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
                    auto tmp0 = at::vec::VectorizedN<float,2>::loadu(in_ptr4 + static_cast<int64_t>(x0), static_cast<int64_t>(16));
                    auto tmp1 = at::vec::convert<at::BFloat16,1,float,2>(tmp0);
                    tmp1.store(out_ptr7 + static_cast<int64_t>(x0), static_cast<int64_t>(16));
                }
            }
        }
    }
    {
        #pragma GCC ivdep
        for(int64_t x0=static_cast<int64_t>(0L); x0<static_cast<int64_t>(2048L); x0+=static_cast<int64_t>(1L))
        {
            for(int64_t x1=static_cast<int64_t>(0L); x1<static_cast<int64_t>(768L); x1+=static_cast<int64_t>(16L))
            {
                {
                    if(C10_LIKELY(x1 >= static_cast<int64_t>(0) && x1 < static_cast<int64_t>(768L)))
                    {
                        auto tmp0 = in_ptr5[static_cast<int64_t>(0L)];
                        auto tmp2 = at::vec::Vectorized<at::BFloat16>::loadu(in_ptr0 + static_cast<int64_t>(1536L + x1 + 2304L*x0), static_cast<int64_t>(16));
                        auto tmp6 = in_ptr5[static_cast<int64_t>(1L)];
                        auto tmp8 = at::vec::Vectorized<at::BFloat16>::loadu(in_ptr6 + static_cast<int64_t>(x1 + 768L*x0), static_cast<int64_t>(16));
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
                        tmp13.store(out_ptr8 + static_cast<int64_t>(x1 + 768L*x0), static_cast<int64_t>(16));
                    }
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
        primals_1, primals_2, primals_3, primals_4, primals_5, primals_6, primals_7, primals_8 = args
        args.clear()
        assert_size_stride(primals_2, (768, 768), (768, 1), 'input')
        buf3 = empty_strided_cpu((2304, 768), (768, 1), torch.bfloat16)
        buf0 = reinterpret_tensor(buf3, (768, 768), (768, 1), 0)  # alias
        assert_size_stride(primals_3, (768, 768), (768, 1), 'input')
        buf1 = reinterpret_tensor(buf3, (768, 768), (768, 1), 589824)  # alias
        assert_size_stride(primals_4, (768, 768), (768, 1), 'input')
        buf2 = reinterpret_tensor(buf3, (768, 768), (768, 1), 1179648)  # alias
        assert_size_stride(primals_1, (1, 2048, 768), (1572864, 768, 1), 'input')
        cpp_fused__to_copy_0(primals_2, primals_3, primals_4, buf0, buf1, buf2)
        del primals_2
        del primals_3
        del primals_4
        buf4 = empty_strided_cpu((2048, 2304), (2304, 1), torch.bfloat16)
        # Topologically Sorted Source Nodes: [reshape, transpose, mm], Original ATen: [aten.view, aten.transpose, aten.mm]
        extern_kernels.mm(reinterpret_tensor(primals_1, (2048, 768), (768, 1), 0), reinterpret_tensor(buf3, (768, 2304), (1, 768), 0), out=buf4)
        buf6 = empty_strided_cpu((1, 2048, 6, 1), (12288, 6, 1, 12288), torch.float32)
        buf7 = reinterpret_tensor(buf6, (1, 2048, 6, 1), (12288, 6, 1, 1), 0); del buf6  # reuse
        buf12 = empty_strided_cpu((1, 2048, 6, 1), (12288, 6, 1, 12288), torch.float32)
        buf13 = reinterpret_tensor(buf12, (1, 2048, 6, 1), (12288, 6, 1, 1), 0); del buf12  # reuse
        assert_size_stride(primals_7, (2048, 64), (64, 1), 'input')
        assert_size_stride(primals_8, (2048, 64), (64, 1), 'input')
        buf10 = empty_strided_cpu((1, 2048, 6, 128), (1572864, 768, 128, 1), torch.float32)
        buf8 = reinterpret_tensor(buf10, (1, 2048, 6, 64), (1572864, 768, 128, 1), 0)  # alias
        buf9 = reinterpret_tensor(buf10, (1, 2048, 6, 64), (1572864, 768, 128, 1), 64)  # alias
        buf16 = empty_strided_cpu((1, 2048, 6, 128), (1572864, 768, 128, 1), torch.float32)
        buf14 = reinterpret_tensor(buf16, (1, 2048, 6, 64), (1572864, 768, 128, 1), 0)  # alias
        buf15 = reinterpret_tensor(buf16, (1, 2048, 6, 64), (1572864, 768, 128, 1), 64)  # alias
        buf11 = empty_strided_cpu((1, 2048, 6, 128), (1572864, 768, 128, 1), torch.bfloat16)
        buf17 = empty_strided_cpu((1, 2048, 6, 128), (1572864, 768, 128, 1), torch.bfloat16)
        assert_size_stride(primals_5, (2, ), (1, ), 'input')
        assert_size_stride(primals_6, (2048, 768), (768, 1), 'input')
        buf5 = empty_strided_cpu((1, 2048, 6, 128), (1572864, 768, 128, 1), torch.bfloat16)
        cpp_fused__to_copy_add_mean_mul_pow_rsqrt_select_split_split_with_sizes_sub_unsqueeze_view_1(buf7, buf13, buf4, primals_7, primals_8, buf10, buf16, primals_5, primals_6, buf8, buf9, buf14, buf15, buf11, buf17, buf5)
        return (buf11, buf17, buf5, primals_5, primals_6, primals_7, primals_8, reinterpret_tensor(primals_1, (2048, 768), (768, 1), 0), reinterpret_tensor(buf4, (1, 2048, 6, 128), (4718592, 2304, 128, 1), 768), reinterpret_tensor(buf4, (1, 2048, 6, 128), (4718592, 2304, 128, 1), 0), reinterpret_tensor(buf4, (1, 2048, 6, 128), (4718592, 2304, 128, 1), 1536), buf7, buf13, buf3, )

runner = Runner(partitions=[])
call = runner.call
recursively_apply_fns = runner.recursively_apply_fns


def get_args():
    from torch._dynamo.testing import rand_strided
    primals_1 = rand_strided((1, 2048, 768), (1572864, 768, 1), device='cpu', dtype=torch.bfloat16)
    primals_2 = rand_strided((768, 768), (768, 1), device='cpu', dtype=torch.float32)
    primals_3 = rand_strided((768, 768), (768, 1), device='cpu', dtype=torch.float32)
    primals_4 = rand_strided((768, 768), (768, 1), device='cpu', dtype=torch.float32)
    primals_5 = rand_strided((2, ), (1, ), device='cpu', dtype=torch.float32)
    primals_6 = rand_strided((2048, 768), (768, 1), device='cpu', dtype=torch.bfloat16)
    primals_7 = rand_strided((2048, 64), (64, 1), device='cpu', dtype=torch.float32)
    primals_8 = rand_strided((2048, 64), (64, 1), device='cpu', dtype=torch.float32)
    return [primals_1, primals_2, primals_3, primals_4, primals_5, primals_6, primals_7, primals_8]


def benchmark_compiled_module(args, times=10, repeat=10):
    from torch._inductor.utils import print_performance
    fn = lambda: call(list(args))
    return print_performance(fn, times=times, repeat=repeat, device='cpu')


if __name__ == "__main__":
    from torch._inductor.wrapper_benchmark import compiled_module_main
    args = get_args()
    compiled_module_main('None', lambda times, repeat: benchmark_compiled_module(args, times=times, repeat=repeat))
