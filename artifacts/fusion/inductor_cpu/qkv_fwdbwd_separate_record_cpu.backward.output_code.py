# AOT ID: ['11_backward']
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


cpp_fused__to_copy__unsafe_view_add_div_expand_mul_neg_pow_select_select_backward_slice_sum_unsqueeze_view_0 = async_compile.cpp_pybinding(['at::BFloat16*', 'at::BFloat16*', 'const at::BFloat16*', 'const float*', 'const float*', 'const at::BFloat16*', 'const float*', 'const float*', 'const float*', 'const float*', 'const at::BFloat16*', 'const float*', 'const at::BFloat16*', 'const at::BFloat16*', 'float*', 'float*', 'float*', 'float*', 'float*', 'float*', 'at::BFloat16*', 'at::BFloat16*', 'at::BFloat16*', 'at::BFloat16*', 'float*'], r'''
#include <torch/csrc/inductor/cpp_prefix.h>
extern "C"  void  kernel(at::BFloat16* in_out_ptr0,
                       at::BFloat16* in_out_ptr1,
                       const at::BFloat16* in_ptr0,
                       const float* in_ptr1,
                       const float* in_ptr2,
                       const at::BFloat16* in_ptr3,
                       const float* in_ptr4,
                       const float* in_ptr6,
                       const float* in_ptr7,
                       const float* in_ptr9,
                       const at::BFloat16* in_ptr10,
                       const float* in_ptr11,
                       const at::BFloat16* in_ptr12,
                       const at::BFloat16* in_ptr13,
                       float* out_ptr0,
                       float* out_ptr1,
                       float* out_ptr2,
                       float* out_ptr3,
                       float* out_ptr4,
                       float* out_ptr5,
                       at::BFloat16* out_ptr6,
                       at::BFloat16* out_ptr7,
                       at::BFloat16* out_ptr8,
                       at::BFloat16* out_ptr9,
                       float* out_ptr10)
{
    std::atomic<int> inductor_cpu_integer_div_error{0};
    inductor_cpu_integer_div_error_flag = &inductor_cpu_integer_div_error;
    auto in_ptr5 = in_out_ptr0;
    auto in_ptr8 = in_out_ptr1;
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
                            auto tmp0 = at::vec::Vectorized<at::BFloat16>::loadu(in_ptr0 + static_cast<int64_t>(64L + x2 + 128L*x1 + 768L*x0), static_cast<int64_t>(16));
                            auto tmp3 = at::vec::VectorizedN<float,2>::loadu(in_ptr1 + static_cast<int64_t>(x2 + 64L*x0), static_cast<int64_t>(16));
                            auto tmp5 = at::vec::Vectorized<at::BFloat16>::loadu(in_ptr0 + static_cast<int64_t>(x2 + 128L*x1 + 768L*x0), static_cast<int64_t>(16));
                            auto tmp7 = at::vec::VectorizedN<float,2>::loadu(in_ptr2 + static_cast<int64_t>(x2 + 64L*x0), static_cast<int64_t>(16));
                            auto tmp13 = at::vec::Vectorized<at::BFloat16>::loadu(in_ptr3 + static_cast<int64_t>(64L + x2 + 128L*x1 + 768L*x0), static_cast<int64_t>(16));
                            auto tmp17 = at::vec::Vectorized<at::BFloat16>::loadu(in_ptr3 + static_cast<int64_t>(x2 + 128L*x1 + 768L*x0), static_cast<int64_t>(16));
                            auto tmp1 = at::vec::convert<float,2,at::BFloat16,1>(tmp0);
                            auto tmp2 = tmp1.neg();
                            auto tmp4 = tmp2 * tmp3;
                            auto tmp6 = at::vec::convert<float,2,at::BFloat16,1>(tmp5);
                            auto tmp8 = tmp6 * tmp7;
                            auto tmp9 = tmp4 + tmp8;
                            auto tmp10 = tmp1 * tmp7;
                            auto tmp11 = tmp6 * tmp3;
                            auto tmp12 = tmp10 + tmp11;
                            auto tmp14 = at::vec::convert<float,2,at::BFloat16,1>(tmp13);
                            auto tmp15 = tmp14.neg();
                            auto tmp16 = tmp15 * tmp3;
                            auto tmp18 = at::vec::convert<float,2,at::BFloat16,1>(tmp17);
                            auto tmp19 = tmp18 * tmp7;
                            auto tmp20 = tmp16 + tmp19;
                            auto tmp21 = tmp14 * tmp7;
                            auto tmp22 = tmp18 * tmp3;
                            auto tmp23 = tmp21 + tmp22;
                            tmp9.store(out_ptr0 + static_cast<int64_t>(x2 + 128L*x1 + 768L*x0));
                            tmp12.store(out_ptr1 + static_cast<int64_t>(x2 + 128L*x1 + 768L*x0));
                            tmp20.store(out_ptr2 + static_cast<int64_t>(x2 + 128L*x1 + 768L*x0));
                            tmp23.store(out_ptr3 + static_cast<int64_t>(x2 + 128L*x1 + 768L*x0));
                        }
                    }
                }
            }
        }
    }
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
                            auto tmp0 = at::vec::VectorizedN<float,2>::loadu(in_ptr4 + static_cast<int64_t>(x1 + 128L*x0), static_cast<int64_t>(16));
                            auto tmp2 = at::vec::Vectorized<at::BFloat16>::loadu(in_ptr5 + static_cast<int64_t>(x1 + 128L*x0), static_cast<int64_t>(16));
                            auto tmp1 = at::vec::convert<at::BFloat16,1,float,2>(tmp0);
                            auto tmp3 = at::vec::convert<float,2,at::BFloat16,1>(tmp2);
                            auto tmp4 = tmp0 * tmp3;
                            tmp_acc0_vec = tmp_acc0_vec + tmp4;
                        }
                    }
                }
                tmp_acc0 = tmp_acc0 + at::vec::vec_reduce_all<float, 2>([](at::vec::Vectorized<float>& x, at::vec::Vectorized<float>& y) { return x + y; }, tmp_acc0_vec);
                out_ptr4[static_cast<int64_t>(x0)] = static_cast<float>(tmp_acc0);
            }
            for(int64_t x1=static_cast<int64_t>(0L); x1<static_cast<int64_t>(128L); x1+=static_cast<int64_t>(16L))
            {
                {
                    if(C10_LIKELY(x1 >= static_cast<int64_t>(0) && x1 < static_cast<int64_t>(128L)))
                    {
                        auto tmp0 = at::vec::VectorizedN<float,2>::loadu(in_ptr4 + static_cast<int64_t>(x1 + 128L*x0), static_cast<int64_t>(16));
                        auto tmp2 = in_ptr6[static_cast<int64_t>(x0)];
                        auto tmp5 = out_ptr4[static_cast<int64_t>(x0)];
                        auto tmp13 = at::vec::Vectorized<at::BFloat16>::loadu(in_out_ptr0 + static_cast<int64_t>(x1 + 128L*x0), static_cast<int64_t>(16));
                        auto tmp1 = at::vec::convert<at::BFloat16,1,float,2>(tmp0);
                        auto tmp3 = at::vec::VectorizedN<float,2>(tmp2);
                        auto tmp4 = tmp0 * tmp3;
                        auto tmp6 = static_cast<float>(-0.5);
                        auto tmp7 = float(tmp5 * tmp6);
                        auto tmp8 = float(tmp2 * tmp2);
                        auto tmp9 = float(tmp8 * tmp2);
                        auto tmp10 = float(tmp7 * tmp9);
                        auto tmp11 = static_cast<float>(128.0);
                        auto tmp12 = tmp10 / tmp11;
                        auto tmp14 = at::vec::convert<float,2,at::BFloat16,1>(tmp13);
                        auto tmp15 = static_cast<float>(2.0);
                        auto tmp16 = at::vec::VectorizedN<float,2>(tmp15);
                        auto tmp17 = tmp14 * tmp16;
                        auto tmp18 = at::vec::VectorizedN<float,2>(tmp12);
                        auto tmp19 = tmp18 * tmp17;
                        auto tmp20 = tmp4 + tmp19;
                        auto tmp21 = at::vec::convert<at::BFloat16,1,float,2>(tmp20);
                        tmp21.store(in_out_ptr0 + static_cast<int64_t>(x1 + 128L*x0), static_cast<int64_t>(16));
                    }
                }
            }
        }
    }
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
                            auto tmp0 = at::vec::VectorizedN<float,2>::loadu(in_ptr7 + static_cast<int64_t>(x1 + 128L*x0), static_cast<int64_t>(16));
                            auto tmp2 = at::vec::Vectorized<at::BFloat16>::loadu(in_ptr8 + static_cast<int64_t>(x1 + 128L*x0), static_cast<int64_t>(16));
                            auto tmp1 = at::vec::convert<at::BFloat16,1,float,2>(tmp0);
                            auto tmp3 = at::vec::convert<float,2,at::BFloat16,1>(tmp2);
                            auto tmp4 = tmp0 * tmp3;
                            tmp_acc0_vec = tmp_acc0_vec + tmp4;
                        }
                    }
                }
                tmp_acc0 = tmp_acc0 + at::vec::vec_reduce_all<float, 2>([](at::vec::Vectorized<float>& x, at::vec::Vectorized<float>& y) { return x + y; }, tmp_acc0_vec);
                out_ptr5[static_cast<int64_t>(x0)] = static_cast<float>(tmp_acc0);
            }
            for(int64_t x1=static_cast<int64_t>(0L); x1<static_cast<int64_t>(128L); x1+=static_cast<int64_t>(16L))
            {
                {
                    if(C10_LIKELY(x1 >= static_cast<int64_t>(0) && x1 < static_cast<int64_t>(128L)))
                    {
                        auto tmp0 = at::vec::VectorizedN<float,2>::loadu(in_ptr7 + static_cast<int64_t>(x1 + 128L*x0), static_cast<int64_t>(16));
                        auto tmp2 = in_ptr9[static_cast<int64_t>(x0)];
                        auto tmp5 = out_ptr5[static_cast<int64_t>(x0)];
                        auto tmp13 = at::vec::Vectorized<at::BFloat16>::loadu(in_out_ptr1 + static_cast<int64_t>(x1 + 128L*x0), static_cast<int64_t>(16));
                        auto tmp1 = at::vec::convert<at::BFloat16,1,float,2>(tmp0);
                        auto tmp3 = at::vec::VectorizedN<float,2>(tmp2);
                        auto tmp4 = tmp0 * tmp3;
                        auto tmp6 = static_cast<float>(-0.5);
                        auto tmp7 = float(tmp5 * tmp6);
                        auto tmp8 = float(tmp2 * tmp2);
                        auto tmp9 = float(tmp8 * tmp2);
                        auto tmp10 = float(tmp7 * tmp9);
                        auto tmp11 = static_cast<float>(128.0);
                        auto tmp12 = tmp10 / tmp11;
                        auto tmp14 = at::vec::convert<float,2,at::BFloat16,1>(tmp13);
                        auto tmp15 = static_cast<float>(2.0);
                        auto tmp16 = at::vec::VectorizedN<float,2>(tmp15);
                        auto tmp17 = tmp14 * tmp16;
                        auto tmp18 = at::vec::VectorizedN<float,2>(tmp12);
                        auto tmp19 = tmp18 * tmp17;
                        auto tmp20 = tmp4 + tmp19;
                        auto tmp21 = at::vec::convert<at::BFloat16,1,float,2>(tmp20);
                        tmp21.store(in_out_ptr1 + static_cast<int64_t>(x1 + 128L*x0), static_cast<int64_t>(16));
                    }
                }
            }
        }
    }
    {
        {
            float tmp_acc0 = 0;
            at::vec::VectorizedN<float,2> tmp_acc0_vec = at::vec::VectorizedN<float,2>(0);
            at::vec::VectorizedN<float,2> masked_tmp_acc0_vec = at::vec::VectorizedN<float,2>(0);
            float tmp_acc1 = 0;
            at::vec::VectorizedN<float,2> tmp_acc1_vec = at::vec::VectorizedN<float,2>(0);
            at::vec::VectorizedN<float,2> masked_tmp_acc1_vec = at::vec::VectorizedN<float,2>(0);
            CascadeSumHelper<float, 4096> scalar_cascade_helper0(static_cast<int64_t>(1572864L));
            CascadeSumHelper<at::vec::VectorizedN<float,2>, 4096> cascade_helper0(static_cast<int64_t>(98304L));
            CascadeSumHelper<at::vec::VectorizedN<float,2>, 4096> masked_cascade_helper0(static_cast<int64_t>(0L));
            CascadeSumHelper<float, 4096> scalar_cascade_helper1(static_cast<int64_t>(1572864L));
            CascadeSumHelper<at::vec::VectorizedN<float,2>, 4096> cascade_helper1(static_cast<int64_t>(98304L));
            CascadeSumHelper<at::vec::VectorizedN<float,2>, 4096> masked_cascade_helper1(static_cast<int64_t>(0L));
            for(int64_t x0=static_cast<int64_t>(0L); x0<static_cast<int64_t>(1572864L); x0+=static_cast<int64_t>(16L))
            {
                {
                    if(C10_LIKELY(x0 >= static_cast<int64_t>(0) && x0 < static_cast<int64_t>(1572864L)))
                    {
                        auto tmp0 = at::vec::Vectorized<at::BFloat16>::loadu(in_ptr10 + static_cast<int64_t>(x0), static_cast<int64_t>(16));
                        auto tmp2 = in_ptr11[static_cast<int64_t>(1L)];
                        auto tmp7 = in_ptr11[static_cast<int64_t>(0L)];
                        auto tmp12 = at::vec::Vectorized<at::BFloat16>::loadu(in_ptr12 + static_cast<int64_t>(x0), static_cast<int64_t>(16));
                        auto tmp15 = at::vec::Vectorized<at::BFloat16>::loadu(in_ptr13 + static_cast<int64_t>(x0), static_cast<int64_t>(16));
                        auto tmp1 = at::vec::convert<float,2,at::BFloat16,1>(tmp0);
                        auto tmp3 = c10::convert<float>(tmp2);
                        auto tmp4 = at::vec::VectorizedN<float,2>(tmp3);
                        auto tmp5 = tmp1 * tmp4;
                        auto tmp6 = at::vec::convert<at::BFloat16,1,float,2>(tmp5);
                        auto tmp8 = c10::convert<float>(tmp7);
                        auto tmp9 = at::vec::VectorizedN<float,2>(tmp8);
                        auto tmp10 = tmp1 * tmp9;
                        auto tmp11 = at::vec::convert<at::BFloat16,1,float,2>(tmp10);
                        auto tmp13 = at::vec::convert<float,2,at::BFloat16,1>(tmp12);
                        auto tmp14 = tmp1 * tmp13;
                        auto tmp16 = at::vec::convert<float,2,at::BFloat16,1>(tmp15);
                        auto tmp17 = tmp1 * tmp16;
                        tmp6.store(out_ptr6 + static_cast<int64_t>(x0), static_cast<int64_t>(16));
                        tmp11.store(out_ptr7 + static_cast<int64_t>(x0), static_cast<int64_t>(16));
                        tmp_acc0_vec = cascade_sum_combine(tmp14, &cascade_helper0);
                        tmp_acc1_vec = cascade_sum_combine(tmp17, &cascade_helper1);
                    }
                }
            }
            tmp_acc0 = cascade_sum_final(&scalar_cascade_helper0);
            tmp_acc0_vec = cascade_sum_final(&cascade_helper0);
            masked_tmp_acc0_vec = cascade_sum_final(&masked_cascade_helper0);
            tmp_acc1 = cascade_sum_final(&scalar_cascade_helper1);
            tmp_acc1_vec = cascade_sum_final(&cascade_helper1);
            masked_tmp_acc1_vec = cascade_sum_final(&masked_cascade_helper1);
            tmp_acc0 = tmp_acc0 + at::vec::vec_reduce_all<float, 2>([](at::vec::Vectorized<float>& x, at::vec::Vectorized<float>& y) { return x + y; }, tmp_acc0_vec + masked_tmp_acc0_vec);
            out_ptr8[static_cast<int64_t>(0L)] = static_cast<at::BFloat16>(tmp_acc0);
            tmp_acc1 = tmp_acc1 + at::vec::vec_reduce_all<float, 2>([](at::vec::Vectorized<float>& x, at::vec::Vectorized<float>& y) { return x + y; }, tmp_acc1_vec + masked_tmp_acc1_vec);
            out_ptr9[static_cast<int64_t>(0L)] = static_cast<at::BFloat16>(tmp_acc1);
        }
    }
    {
        for(int64_t x0=static_cast<int64_t>(0L); x0<static_cast<int64_t>(2L); x0+=static_cast<int64_t>(8L))
        {
            {
                if(C10_LIKELY(x0 >= static_cast<int64_t>(0L) && x0 < static_cast<int64_t>(2L)))
                {
                    for (int64_t x0_tail = static_cast<int64_t>(0L);x0_tail < static_cast<int64_t>(2L); x0_tail++)
                    {
                        auto tmp4 = out_ptr8[static_cast<int64_t>(0L)];
                        auto tmp10 = out_ptr9[static_cast<int64_t>(0L)];
                        auto tmp0 = x0_tail;
                        auto tmp1 = c10::convert<int32_t>(tmp0);
                        auto tmp2 = static_cast<int32_t>(1);
                        auto tmp3 = tmp1 == tmp2;
                        auto tmp5 = c10::convert<float>(tmp4);
                        auto tmp6 = static_cast<float>(0.0);
                        auto tmp7 = tmp3 ? tmp5 : tmp6;
                        auto tmp8 = static_cast<int32_t>(0);
                        auto tmp9 = tmp1 == tmp8;
                        auto tmp11 = c10::convert<float>(tmp10);
                        auto tmp12 = tmp9 ? tmp11 : tmp6;
                        auto tmp13 = float(tmp7 + tmp12);
                        out_ptr10[static_cast<int64_t>(x0_tail)] = tmp13;
                    }
                }
            }
        }
    }
    inductor_cpu_integer_div_error_flag = nullptr;
    inductor_cpu_throw_if_integer_div_error(inductor_cpu_integer_div_error);
}
''')


cpp_fused__to_copy_1 = async_compile.cpp_pybinding(['const at::BFloat16*', 'float*'], r'''
#include <torch/csrc/inductor/cpp_prefix.h>
extern "C"  void  kernel(const at::BFloat16* in_ptr0,
                       float* out_ptr0)
{
    std::atomic<int> inductor_cpu_integer_div_error{0};
    inductor_cpu_integer_div_error_flag = &inductor_cpu_integer_div_error;
    {
        for(int64_t x0=static_cast<int64_t>(0L); x0<static_cast<int64_t>(589824L); x0+=static_cast<int64_t>(16L))
        {
            {
                if(C10_LIKELY(x0 >= static_cast<int64_t>(0) && x0 < static_cast<int64_t>(589824L)))
                {
                    auto tmp0 = at::vec::Vectorized<at::BFloat16>::loadu(in_ptr0 + static_cast<int64_t>(x0), static_cast<int64_t>(16));
                    auto tmp1 = at::vec::convert<float,2,at::BFloat16,1>(tmp0);
                    tmp1.store(out_ptr0 + static_cast<int64_t>(x0));
                }
            }
        }
    }
    inductor_cpu_integer_div_error_flag = nullptr;
    inductor_cpu_throw_if_integer_div_error(inductor_cpu_integer_div_error);
}
''')


cpp_fused__to_copy_add_view_2 = async_compile.cpp_pybinding(['at::BFloat16*', 'const at::BFloat16*', 'const at::BFloat16*', 'const at::BFloat16*', 'float*'], r'''
#include <torch/csrc/inductor/cpp_prefix.h>
extern "C"  void  kernel(at::BFloat16* in_out_ptr0,
                       const at::BFloat16* in_ptr0,
                       const at::BFloat16* in_ptr1,
                       const at::BFloat16* in_ptr2,
                       float* out_ptr0)
{
    std::atomic<int> inductor_cpu_integer_div_error{0};
    inductor_cpu_integer_div_error_flag = &inductor_cpu_integer_div_error;
    {
        for(int64_t x0=static_cast<int64_t>(0L); x0<static_cast<int64_t>(1572864L); x0+=static_cast<int64_t>(16L))
        {
            {
                if(C10_LIKELY(x0 >= static_cast<int64_t>(0) && x0 < static_cast<int64_t>(1572864L)))
                {
                    auto tmp0 = at::vec::Vectorized<at::BFloat16>::loadu(in_out_ptr0 + static_cast<int64_t>(x0), static_cast<int64_t>(16));
                    auto tmp2 = at::vec::Vectorized<at::BFloat16>::loadu(in_ptr0 + static_cast<int64_t>(x0), static_cast<int64_t>(16));
                    auto tmp5 = at::vec::Vectorized<at::BFloat16>::loadu(in_ptr1 + static_cast<int64_t>(x0), static_cast<int64_t>(16));
                    auto tmp1 = at::vec::convert<float,2,at::BFloat16,1>(tmp0);
                    auto tmp3 = at::vec::convert<float,2,at::BFloat16,1>(tmp2);
                    auto tmp4 = tmp1 + tmp3;
                    auto tmp6 = at::vec::convert<float,2,at::BFloat16,1>(tmp5);
                    auto tmp7 = tmp4 + tmp6;
                    auto tmp8 = at::vec::convert<at::BFloat16,1,float,2>(tmp7);
                    tmp8.store(in_out_ptr0 + static_cast<int64_t>(x0), static_cast<int64_t>(16));
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
                    auto tmp0 = at::vec::Vectorized<at::BFloat16>::loadu(in_ptr2 + static_cast<int64_t>(x0), static_cast<int64_t>(16));
                    auto tmp1 = at::vec::convert<float,2,at::BFloat16,1>(tmp0);
                    tmp1.store(out_ptr0 + static_cast<int64_t>(x0));
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
        primals_5, primals_6, primals_7, primals_8, view, mm, mm_1, mm_2, rsqrt, rsqrt_1, permute_5, permute_9, permute_13, tangents_1, tangents_2, tangents_3 = args
        args.clear()
        assert_size_stride(tangents_2, (1, 2048, 6, 128), (1572864, 768, 128, 1), 'input')
        assert_size_stride(primals_8, (2048, 64), (64, 1), 'input')
        assert_size_stride(primals_7, (2048, 64), (64, 1), 'input')
        assert_size_stride(tangents_1, (1, 2048, 6, 128), (1572864, 768, 128, 1), 'input')
        buf2 = empty_strided_cpu((1, 2048, 6, 128), (1572864, 768, 128, 1), torch.float32)
        buf0 = reinterpret_tensor(buf2, (1, 2048, 6, 64), (1572864, 768, 128, 1), 0)  # alias
        buf1 = reinterpret_tensor(buf2, (1, 2048, 6, 64), (1572864, 768, 128, 1), 64)  # alias
        buf6 = empty_strided_cpu((1, 2048, 6, 128), (1572864, 768, 128, 1), torch.float32)
        buf4 = reinterpret_tensor(buf6, (1, 2048, 6, 64), (1572864, 768, 128, 1), 0)  # alias
        buf5 = reinterpret_tensor(buf6, (1, 2048, 6, 64), (1572864, 768, 128, 1), 64)  # alias
        assert_size_stride(mm_1, (2048, 768), (768, 1), 'input')
        assert_size_stride(rsqrt_1, (1, 2048, 6, 1), (12288, 6, 1, 1), 'input')
        buf3 = empty_strided_cpu((1, 2048, 6, 1), (12288, 6, 1, 12288), torch.float32)
        buf16 = reinterpret_tensor(mm_1, (1, 2048, 6, 128), (1572864, 768, 128, 1), 0); del mm_1  # reuse
        assert_size_stride(mm, (2048, 768), (768, 1), 'input')
        assert_size_stride(rsqrt, (1, 2048, 6, 1), (12288, 6, 1, 1), 'input')
        buf7 = empty_strided_cpu((1, 2048, 6, 1), (12288, 6, 1, 12288), torch.float32)
        buf20 = reinterpret_tensor(mm, (1, 2048, 6, 128), (1572864, 768, 128, 1), 0); del mm  # reuse
        assert_size_stride(tangents_3, (1, 2048, 6, 128), (1572864, 768, 128, 1), 'input')
        assert_size_stride(primals_6, (2, ), (1, ), 'input')
        assert_size_stride(primals_5, (2048, 768), (768, 1), 'input')
        assert_size_stride(mm_2, (2048, 768), (768, 1), 'input')
        buf9 = empty_strided_cpu((1, 2048, 6, 128), (1572864, 768, 128, 1), torch.bfloat16)
        buf12 = empty_strided_cpu((2048, 768), (768, 1), torch.bfloat16)
        buf8 = empty_strided_cpu((), (), torch.bfloat16)
        buf10 = empty_strided_cpu((), (), torch.bfloat16)
        buf11 = empty_strided_cpu((2, ), (1, ), torch.float32)
        assert_size_stride(view, (2048, 768), (768, 1), 'input')
        cpp_fused__to_copy__unsafe_view_add_div_expand_mul_neg_pow_select_select_backward_slice_sum_unsqueeze_view_0(buf16, buf20, tangents_2, primals_8, primals_7, tangents_1, buf2, rsqrt_1, buf6, rsqrt, tangents_3, primals_6, primals_5, mm_2, buf0, buf1, buf4, buf5, buf3, buf7, buf9, buf12, buf8, buf10, buf11)
        del buf0
        del buf1
        del buf10
        del buf2
        del buf3
        del buf4
        del buf5
        del buf6
        del buf7
        del buf8
        del mm_2
        del primals_5
        del primals_6
        del primals_7
        del primals_8
        del rsqrt
        del rsqrt_1
        del tangents_1
        del tangents_2
        del tangents_3
        buf13 = empty_strided_cpu((768, 768), (768, 1), torch.bfloat16)
        # Topologically Sorted Source Nodes: [permute_3, mm_3], Original ATen: [aten.t, aten.mm]
        extern_kernels.mm(reinterpret_tensor(buf12, (768, 2048), (1, 768), 0), view, out=buf13)
        assert_size_stride(permute_5, (768, 768), (768, 1), 'input')
        buf14 = empty_strided_cpu((2048, 768), (768, 1), torch.bfloat16)
        # Topologically Sorted Source Nodes: [mm_4], Original ATen: [aten.mm]
        extern_kernels.mm(buf12, permute_5, out=buf14)
        del permute_5
        buf15 = empty_strided_cpu((768, 768), (768, 1), torch.float32)
        cpp_fused__to_copy_1(buf13, buf15)
        buf17 = buf13; del buf13  # reuse
        # Topologically Sorted Source Nodes: [convert_element_type_18, convert_element_type_19, linear_1, k, rms_norm_1, mul_17, pow_3, mul_18, mul_19, expand, div, pow_4, mul_20, mul_21, add_7, convert_element_type_20, view_14, view_15, permute_7, mm_5], Original ATen: [aten._to_copy, aten._unsafe_view, aten.view, aten.mul, aten.pow, aten.expand, aten.div, aten.add, aten.t, aten.mm]
        extern_kernels.mm(reinterpret_tensor(buf16, (768, 2048), (1, 768), 0), view, out=buf17)
        assert_size_stride(permute_9, (768, 768), (768, 1), 'input')
        buf18 = buf12; del buf12  # reuse
        # Topologically Sorted Source Nodes: [convert_element_type_18, convert_element_type_19, linear_1, k, rms_norm_1, mul_17, pow_3, mul_18, mul_19, expand, div, pow_4, mul_20, mul_21, add_7, convert_element_type_20, view_14, view_15, mm_6], Original ATen: [aten._to_copy, aten._unsafe_view, aten.view, aten.mul, aten.pow, aten.expand, aten.div, aten.add, aten.mm]
        extern_kernels.mm(reinterpret_tensor(buf16, (2048, 768), (768, 1), 0), permute_9, out=buf18)
        del buf16
        del permute_9
        buf19 = empty_strided_cpu((768, 768), (768, 1), torch.float32)
        cpp_fused__to_copy_1(buf17, buf19)
        buf21 = buf17; del buf17  # reuse
        # Topologically Sorted Source Nodes: [convert_element_type_22, convert_element_type_23, linear, q, rms_norm, mul_27, pow_5, mul_28, mul_29, expand_1, div_1, pow_6, mul_30, mul_31, add_10, convert_element_type_24, view_17, view_18, permute_11, mm_7], Original ATen: [aten._to_copy, aten._unsafe_view, aten.view, aten.mul, aten.pow, aten.expand, aten.div, aten.add, aten.t, aten.mm]
        extern_kernels.mm(reinterpret_tensor(buf20, (768, 2048), (1, 768), 0), view, out=buf21)
        del view
        assert_size_stride(permute_13, (768, 768), (768, 1), 'input')
        buf22 = empty_strided_cpu((2048, 768), (768, 1), torch.bfloat16)
        # Topologically Sorted Source Nodes: [convert_element_type_22, convert_element_type_23, linear, q, rms_norm, mul_27, pow_5, mul_28, mul_29, expand_1, div_1, pow_6, mul_30, mul_31, add_10, convert_element_type_24, view_17, view_18, mm_8], Original ATen: [aten._to_copy, aten._unsafe_view, aten.view, aten.mul, aten.pow, aten.expand, aten.div, aten.add, aten.mm]
        extern_kernels.mm(reinterpret_tensor(buf20, (2048, 768), (768, 1), 0), permute_13, out=buf22)
        del buf20
        del permute_13
        buf23 = reinterpret_tensor(buf14, (1, 2048, 768), (1572864, 768, 1), 0); del buf14  # reuse
        buf24 = empty_strided_cpu((768, 768), (768, 1), torch.float32)
        cpp_fused__to_copy_add_view_2(buf23, buf18, buf22, buf21, buf24)
        return (buf23, buf24, buf19, buf15, reinterpret_tensor(buf9, (2048, 768), (768, 1), 0), buf11, None, None, )

runner = Runner(partitions=[])
call = runner.call
recursively_apply_fns = runner.recursively_apply_fns


def get_args():
    from torch._dynamo.testing import rand_strided
    primals_5 = rand_strided((2048, 768), (768, 1), device='cpu', dtype=torch.bfloat16)
    primals_6 = rand_strided((2, ), (1, ), device='cpu', dtype=torch.float32)
    primals_7 = rand_strided((2048, 64), (64, 1), device='cpu', dtype=torch.float32)
    primals_8 = rand_strided((2048, 64), (64, 1), device='cpu', dtype=torch.float32)
    view = rand_strided((2048, 768), (768, 1), device='cpu', dtype=torch.bfloat16)
    mm = rand_strided((2048, 768), (768, 1), device='cpu', dtype=torch.bfloat16)
    mm_1 = rand_strided((2048, 768), (768, 1), device='cpu', dtype=torch.bfloat16)
    mm_2 = rand_strided((2048, 768), (768, 1), device='cpu', dtype=torch.bfloat16)
    rsqrt = rand_strided((1, 2048, 6, 1), (12288, 6, 1, 1), device='cpu', dtype=torch.float32)
    rsqrt_1 = rand_strided((1, 2048, 6, 1), (12288, 6, 1, 1), device='cpu', dtype=torch.float32)
    permute_5 = rand_strided((768, 768), (768, 1), device='cpu', dtype=torch.bfloat16)
    permute_9 = rand_strided((768, 768), (768, 1), device='cpu', dtype=torch.bfloat16)
    permute_13 = rand_strided((768, 768), (768, 1), device='cpu', dtype=torch.bfloat16)
    tangents_1 = rand_strided((1, 2048, 6, 128), (1572864, 768, 128, 1), device='cpu', dtype=torch.bfloat16)
    tangents_2 = rand_strided((1, 2048, 6, 128), (1572864, 768, 128, 1), device='cpu', dtype=torch.bfloat16)
    tangents_3 = rand_strided((1, 2048, 6, 128), (1572864, 768, 128, 1), device='cpu', dtype=torch.bfloat16)
    return [primals_5, primals_6, primals_7, primals_8, view, mm, mm_1, mm_2, rsqrt, rsqrt_1, permute_5, permute_9, permute_13, tangents_1, tangents_2, tangents_3]


def benchmark_compiled_module(args, times=10, repeat=10):
    from torch._inductor.utils import print_performance
    fn = lambda: call(list(args))
    return print_performance(fn, times=times, repeat=repeat, device='cpu')


if __name__ == "__main__":
    from torch._inductor.wrapper_benchmark import compiled_module_main
    args = get_args()
    compiled_module_main('None', lambda times, repeat: benchmark_compiled_module(args, times=times, repeat=repeat))
