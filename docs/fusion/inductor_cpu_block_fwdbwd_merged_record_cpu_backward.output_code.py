# AOT ID: ['6_backward']
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


cpp_fused__to_copy__unsafe_view_mul_pow_relu_scalar_tensor_threshold_backward_view_0 = async_compile.cpp_pybinding(['at::BFloat16*', 'const at::BFloat16*', 'const at::BFloat16*', 'float*'], r'''
#include <torch/csrc/inductor/cpp_prefix.h>
extern "C"  void  kernel(at::BFloat16* in_out_ptr0,
                       const at::BFloat16* in_ptr0,
                       const at::BFloat16* in_ptr1,
                       float* out_ptr0)
{
    std::atomic<int> inductor_cpu_integer_div_error{0};
    inductor_cpu_integer_div_error_flag = &inductor_cpu_integer_div_error;
    {
        for(int64_t x0=static_cast<int64_t>(0L); x0<static_cast<int64_t>(2359296L); x0+=static_cast<int64_t>(16L))
        {
            {
                if(C10_LIKELY(x0 >= static_cast<int64_t>(0) && x0 < static_cast<int64_t>(2359296L)))
                {
                    auto tmp0 = at::vec::Vectorized<at::BFloat16>::loadu(in_ptr0 + static_cast<int64_t>(x0), static_cast<int64_t>(16));
                    auto tmp1 = at::vec::convert<float,2,at::BFloat16,1>(tmp0);
                    tmp1.store(out_ptr0 + static_cast<int64_t>(x0));
                }
            }
        }
    }
    {
        for(int64_t x0=static_cast<int64_t>(0L); x0<static_cast<int64_t>(6291456L); x0+=static_cast<int64_t>(16L))
        {
            {
                if(C10_LIKELY(x0 >= static_cast<int64_t>(0) && x0 < static_cast<int64_t>(6291456L)))
                {
                    auto tmp0 = at::vec::Vectorized<at::BFloat16>::loadu(in_out_ptr0 + static_cast<int64_t>(x0), static_cast<int64_t>(16));
                    auto tmp6 = at::vec::Vectorized<at::BFloat16>::loadu(in_ptr1 + static_cast<int64_t>(x0), static_cast<int64_t>(16));
                    auto tmp1 = at::vec::convert<float,2,at::BFloat16,1>(tmp0);
                    auto tmp2 = at::vec::clamp_min(tmp1, decltype(tmp1)(0));
                    auto tmp3 = static_cast<float>(0.0);
                    auto tmp4 = at::vec::VectorizedN<float,2>(tmp3);
                    auto tmp5 = at::vec::VecMask<float,2>(tmp2 <= tmp4);
                    auto tmp7 = at::vec::convert<float,2,at::BFloat16,1>(tmp6);
                    auto tmp8 = static_cast<float>(2.0);
                    auto tmp9 = at::vec::VectorizedN<float,2>(tmp8);
                    auto tmp10 = tmp2 * tmp9;
                    auto tmp11 = tmp7 * tmp10;
                    auto tmp12 = decltype(tmp4)::blendv(tmp11, tmp4, tmp5.template cast<float,2>());
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


cpp_fused__to_copy_add_div_expand_mul_pow_sum_view_1 = async_compile.cpp_pybinding(['at::BFloat16*', 'const at::BFloat16*', 'const at::BFloat16*', 'const at::BFloat16*', 'const float*', 'float*', 'float*'], r'''
#include <torch/csrc/inductor/cpp_prefix.h>
extern "C"  void  kernel(at::BFloat16* in_out_ptr0,
                       const at::BFloat16* in_ptr0,
                       const at::BFloat16* in_ptr2,
                       const at::BFloat16* in_ptr3,
                       const float* in_ptr4,
                       float* out_ptr0,
                       float* out_ptr1)
{
    std::atomic<int> inductor_cpu_integer_div_error{0};
    inductor_cpu_integer_div_error_flag = &inductor_cpu_integer_div_error;
    auto in_ptr1 = in_out_ptr0;
    {
        for(int64_t x0=static_cast<int64_t>(0L); x0<static_cast<int64_t>(2359296L); x0+=static_cast<int64_t>(16L))
        {
            {
                if(C10_LIKELY(x0 >= static_cast<int64_t>(0) && x0 < static_cast<int64_t>(2359296L)))
                {
                    auto tmp0 = at::vec::Vectorized<at::BFloat16>::loadu(in_ptr0 + static_cast<int64_t>(x0), static_cast<int64_t>(16));
                    auto tmp1 = at::vec::convert<float,2,at::BFloat16,1>(tmp0);
                    tmp1.store(out_ptr0 + static_cast<int64_t>(x0));
                }
            }
        }
    }
    {
        #pragma GCC ivdep
        for(int64_t x0=static_cast<int64_t>(0L); x0<static_cast<int64_t>(2048L); x0+=static_cast<int64_t>(1L))
        {
            {
                float tmp_acc0 = 0;
                at::vec::VectorizedN<float,2> tmp_acc0_vec = at::vec::VectorizedN<float,2>(0);
                for(int64_t x1=static_cast<int64_t>(0L); x1<static_cast<int64_t>(768L); x1+=static_cast<int64_t>(16L))
                {
                    {
                        if(C10_LIKELY(x1 >= static_cast<int64_t>(0) && x1 < static_cast<int64_t>(768L)))
                        {
                            auto tmp0 = at::vec::Vectorized<at::BFloat16>::loadu(in_ptr1 + static_cast<int64_t>(x1 + 768L*x0), static_cast<int64_t>(16));
                            auto tmp2 = at::vec::Vectorized<at::BFloat16>::loadu(in_ptr2 + static_cast<int64_t>(x1 + 768L*x0), static_cast<int64_t>(16));
                            auto tmp1 = at::vec::convert<float,2,at::BFloat16,1>(tmp0);
                            auto tmp3 = at::vec::convert<float,2,at::BFloat16,1>(tmp2);
                            auto tmp4 = tmp1 * tmp3;
                            tmp_acc0_vec = tmp_acc0_vec + tmp4;
                        }
                    }
                }
                tmp_acc0 = tmp_acc0 + at::vec::vec_reduce_all<float, 2>([](at::vec::Vectorized<float>& x, at::vec::Vectorized<float>& y) { return x + y; }, tmp_acc0_vec);
                out_ptr1[static_cast<int64_t>(x0)] = static_cast<float>(tmp_acc0);
            }
            for(int64_t x1=static_cast<int64_t>(0L); x1<static_cast<int64_t>(768L); x1+=static_cast<int64_t>(16L))
            {
                {
                    if(C10_LIKELY(x1 >= static_cast<int64_t>(0) && x1 < static_cast<int64_t>(768L)))
                    {
                        auto tmp0 = at::vec::Vectorized<at::BFloat16>::loadu(in_ptr3 + static_cast<int64_t>(x1 + 768L*x0), static_cast<int64_t>(16));
                        auto tmp2 = at::vec::Vectorized<at::BFloat16>::loadu(in_out_ptr0 + static_cast<int64_t>(x1 + 768L*x0), static_cast<int64_t>(16));
                        auto tmp4 = in_ptr4[static_cast<int64_t>(x0)];
                        auto tmp7 = out_ptr1[static_cast<int64_t>(x0)];
                        auto tmp15 = at::vec::Vectorized<at::BFloat16>::loadu(in_ptr2 + static_cast<int64_t>(x1 + 768L*x0), static_cast<int64_t>(16));
                        auto tmp1 = at::vec::convert<float,2,at::BFloat16,1>(tmp0);
                        auto tmp3 = at::vec::convert<float,2,at::BFloat16,1>(tmp2);
                        auto tmp5 = at::vec::VectorizedN<float,2>(tmp4);
                        auto tmp6 = tmp3 * tmp5;
                        auto tmp8 = static_cast<float>(-0.5);
                        auto tmp9 = float(tmp7 * tmp8);
                        auto tmp10 = float(tmp4 * tmp4);
                        auto tmp11 = float(tmp10 * tmp4);
                        auto tmp12 = float(tmp9 * tmp11);
                        auto tmp13 = static_cast<float>(768.0);
                        auto tmp14 = tmp12 / tmp13;
                        auto tmp16 = at::vec::convert<float,2,at::BFloat16,1>(tmp15);
                        auto tmp17 = static_cast<float>(2.0);
                        auto tmp18 = at::vec::VectorizedN<float,2>(tmp17);
                        auto tmp19 = tmp16 * tmp18;
                        auto tmp20 = at::vec::VectorizedN<float,2>(tmp14);
                        auto tmp21 = tmp20 * tmp19;
                        auto tmp22 = tmp6 + tmp21;
                        auto tmp23 = (tmp22);
                        auto tmp24 = tmp1 + tmp23;
                        auto tmp25 = at::vec::convert<at::BFloat16,1,float,2>(tmp24);
                        tmp25.store(in_out_ptr0 + static_cast<int64_t>(x1 + 768L*x0), static_cast<int64_t>(16));
                    }
                }
            }
        }
    }
    inductor_cpu_integer_div_error_flag = nullptr;
    inductor_cpu_throw_if_integer_div_error(inductor_cpu_integer_div_error);
}
''')


cpp_fused__scaled_dot_product_flash_attention_for_cpu_backward__to_copy_transpose_view_2 = async_compile.cpp_pybinding(['const at::BFloat16*', 'const float*', 'float*', 'float*'], r'''
#include <torch/csrc/inductor/cpp_prefix.h>
extern "C"  void  kernel(const at::BFloat16* in_ptr0,
                       const float* in_ptr1,
                       float* out_ptr0,
                       float* out_ptr1)
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
    {
        for(int64_t x0=static_cast<int64_t>(0L); x0<static_cast<int64_t>(6L); x0+=static_cast<int64_t>(8L))
        {
            for(int64_t x1=static_cast<int64_t>(0L); x1<static_cast<int64_t>(2048L); x1+=static_cast<int64_t>(8L))
            {
                {
                    if(C10_LIKELY(x0 >= static_cast<int64_t>(0L) && x0 < static_cast<int64_t>(6L) && x1 >= static_cast<int64_t>(0) && x1 < static_cast<int64_t>(2048L)))
                    {
                        alignas(std::max(std::size_t(8), alignof(float))) float tmp0[8*8];
                        transpose_mxn<float,static_cast<int64_t>(8),static_cast<int64_t>(6L),false>(in_ptr1 + static_cast<int64_t>(x0 + 6L*x1), static_cast<int64_t>(6L), tmp0, static_cast<int64_t>(8));
                        for (long x0_inner = 0; x0_inner < static_cast<int64_t>(6L); x0_inner++)
                        {
                            auto tmp1 = at::vec::Vectorized<float>::loadu(tmp0 + static_cast<int64_t>(8L*x0_inner), static_cast<int64_t>(8));
                            tmp1.store(out_ptr1 + static_cast<int64_t>(x1 + 2048L*x0 + 2048L*x0_inner));
                        }
                    }
                }
            }
        }
    }
    inductor_cpu_integer_div_error_flag = nullptr;
    inductor_cpu_throw_if_integer_div_error(inductor_cpu_integer_div_error);
}
''')


cpp_fused__to_copy__unsafe_view_add_div_expand_mul_neg_pow_select_select_backward_slice_split_sum_transpose_unsqueeze_view_3 = async_compile.cpp_pybinding(['const at::BFloat16*', 'const float*', 'const float*', 'const at::BFloat16*', 'const float*', 'const at::BFloat16*', 'const float*', 'const float*', 'const float*', 'const at::BFloat16*', 'const at::BFloat16*', 'const float*', 'float*', 'float*', 'float*', 'float*', 'float*', 'at::BFloat16*', 'float*', 'at::BFloat16*', 'at::BFloat16*', 'at::BFloat16*', 'at::BFloat16*', 'at::BFloat16*', 'float*'], r'''
#include <torch/csrc/inductor/cpp_prefix.h>
extern "C"  void  kernel(const at::BFloat16* in_ptr0,
                       const float* in_ptr1,
                       const float* in_ptr2,
                       const at::BFloat16* in_ptr3,
                       const float* in_ptr4,
                       const at::BFloat16* in_ptr5,
                       const float* in_ptr6,
                       const float* in_ptr7,
                       const float* in_ptr8,
                       const at::BFloat16* in_ptr9,
                       const at::BFloat16* in_ptr10,
                       const float* in_ptr11,
                       float* out_ptr0,
                       float* out_ptr1,
                       float* out_ptr2,
                       float* out_ptr3,
                       float* out_ptr4,
                       at::BFloat16* out_ptr5,
                       float* out_ptr6,
                       at::BFloat16* out_ptr7,
                       at::BFloat16* out_ptr8,
                       at::BFloat16* out_ptr9,
                       at::BFloat16* out_ptr10,
                       at::BFloat16* out_ptr11,
                       float* out_ptr12)
{
    std::atomic<int> inductor_cpu_integer_div_error{0};
    inductor_cpu_integer_div_error_flag = &inductor_cpu_integer_div_error;
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
                                auto tmp0 = at::vec::VectorizedN<float,2>::loadu(in_ptr4 + static_cast<int64_t>(x2 + 128L*x1 + 768L*x0), static_cast<int64_t>(16));
                                auto tmp2 = at::vec::Vectorized<at::BFloat16>::loadu(in_ptr5 + static_cast<int64_t>(768L + x2 + 128L*x1 + 2304L*x0), static_cast<int64_t>(16));
                                auto tmp1 = at::vec::convert<at::BFloat16,1,float,2>(tmp0);
                                auto tmp3 = at::vec::convert<float,2,at::BFloat16,1>(tmp2);
                                auto tmp4 = tmp0 * tmp3;
                                tmp_acc0_vec = tmp_acc0_vec + tmp4;
                            }
                        }
                    }
                    tmp_acc0 = tmp_acc0 + at::vec::vec_reduce_all<float, 2>([](at::vec::Vectorized<float>& x, at::vec::Vectorized<float>& y) { return x + y; }, tmp_acc0_vec);
                    out_ptr4[static_cast<int64_t>(x1 + 6L*x0)] = static_cast<float>(tmp_acc0);
                }
                for(int64_t x2=static_cast<int64_t>(0L); x2<static_cast<int64_t>(128L); x2+=static_cast<int64_t>(16L))
                {
                    {
                        if(C10_LIKELY(x2 >= static_cast<int64_t>(0) && x2 < static_cast<int64_t>(128L)))
                        {
                            auto tmp0 = at::vec::VectorizedN<float,2>::loadu(in_ptr4 + static_cast<int64_t>(x2 + 128L*x1 + 768L*x0), static_cast<int64_t>(16));
                            auto tmp2 = in_ptr6[static_cast<int64_t>(x1 + 6L*x0)];
                            auto tmp5 = out_ptr4[static_cast<int64_t>(x1 + 6L*x0)];
                            auto tmp13 = at::vec::Vectorized<at::BFloat16>::loadu(in_ptr5 + static_cast<int64_t>(768L + x2 + 128L*x1 + 2304L*x0), static_cast<int64_t>(16));
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
                            tmp21.store(out_ptr5 + static_cast<int64_t>(x2 + 128L*x1 + 2304L*x0), static_cast<int64_t>(16));
                        }
                    }
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
                                auto tmp0 = at::vec::VectorizedN<float,2>::loadu(in_ptr7 + static_cast<int64_t>(x2 + 128L*x1 + 768L*x0), static_cast<int64_t>(16));
                                auto tmp2 = at::vec::Vectorized<at::BFloat16>::loadu(in_ptr5 + static_cast<int64_t>(x2 + 128L*x1 + 2304L*x0), static_cast<int64_t>(16));
                                auto tmp1 = at::vec::convert<at::BFloat16,1,float,2>(tmp0);
                                auto tmp3 = at::vec::convert<float,2,at::BFloat16,1>(tmp2);
                                auto tmp4 = tmp0 * tmp3;
                                tmp_acc0_vec = tmp_acc0_vec + tmp4;
                            }
                        }
                    }
                    tmp_acc0 = tmp_acc0 + at::vec::vec_reduce_all<float, 2>([](at::vec::Vectorized<float>& x, at::vec::Vectorized<float>& y) { return x + y; }, tmp_acc0_vec);
                    out_ptr6[static_cast<int64_t>(x1 + 6L*x0)] = static_cast<float>(tmp_acc0);
                }
                for(int64_t x2=static_cast<int64_t>(0L); x2<static_cast<int64_t>(128L); x2+=static_cast<int64_t>(16L))
                {
                    {
                        if(C10_LIKELY(x2 >= static_cast<int64_t>(0) && x2 < static_cast<int64_t>(128L)))
                        {
                            auto tmp0 = at::vec::VectorizedN<float,2>::loadu(in_ptr7 + static_cast<int64_t>(x2 + 128L*x1 + 768L*x0), static_cast<int64_t>(16));
                            auto tmp2 = in_ptr8[static_cast<int64_t>(x1 + 6L*x0)];
                            auto tmp5 = out_ptr6[static_cast<int64_t>(x1 + 6L*x0)];
                            auto tmp13 = at::vec::Vectorized<at::BFloat16>::loadu(in_ptr5 + static_cast<int64_t>(x2 + 128L*x1 + 2304L*x0), static_cast<int64_t>(16));
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
                            tmp21.store(out_ptr7 + static_cast<int64_t>(x2 + 128L*x1 + 2304L*x0), static_cast<int64_t>(16));
                        }
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
            CascadeSumHelper<float, 4096> scalar_cascade_helper0(static_cast<int64_t>(1572864L));
            CascadeSumHelper<at::vec::VectorizedN<float,2>, 4096> cascade_helper0(static_cast<int64_t>(98304L));
            CascadeSumHelper<at::vec::VectorizedN<float,2>, 4096> masked_cascade_helper0(static_cast<int64_t>(0L));
            for(int64_t x0=static_cast<int64_t>(0L); x0<static_cast<int64_t>(1572864L); x0+=static_cast<int64_t>(16L))
            {
                {
                    if(C10_LIKELY(x0 >= static_cast<int64_t>(0) && x0 < static_cast<int64_t>(1572864L)))
                    {
                        auto tmp0 = at::vec::Vectorized<at::BFloat16>::loadu(in_ptr9 + static_cast<int64_t>(x0), static_cast<int64_t>(16));
                        auto tmp2 = at::vec::Vectorized<at::BFloat16>::loadu(in_ptr10 + static_cast<int64_t>(x0), static_cast<int64_t>(16));
                        auto tmp1 = at::vec::convert<float,2,at::BFloat16,1>(tmp0);
                        auto tmp3 = at::vec::convert<float,2,at::BFloat16,1>(tmp2);
                        auto tmp4 = tmp1 * tmp3;
                        tmp_acc0_vec = cascade_sum_combine(tmp4, &cascade_helper0);
                    }
                }
            }
            tmp_acc0 = cascade_sum_final(&scalar_cascade_helper0);
            tmp_acc0_vec = cascade_sum_final(&cascade_helper0);
            masked_tmp_acc0_vec = cascade_sum_final(&masked_cascade_helper0);
            tmp_acc0 = tmp_acc0 + at::vec::vec_reduce_all<float, 2>([](at::vec::Vectorized<float>& x, at::vec::Vectorized<float>& y) { return x + y; }, tmp_acc0_vec + masked_tmp_acc0_vec);
            out_ptr8[static_cast<int64_t>(0L)] = static_cast<at::BFloat16>(tmp_acc0);
        }
    }
    {
        {
            float tmp_acc0 = 0;
            at::vec::VectorizedN<float,2> tmp_acc0_vec = at::vec::VectorizedN<float,2>(0);
            at::vec::VectorizedN<float,2> masked_tmp_acc0_vec = at::vec::VectorizedN<float,2>(0);
            CascadeSumHelper<float, 4096> scalar_cascade_helper0(static_cast<int64_t>(1572864L));
            CascadeSumHelper<at::vec::VectorizedN<float,2>, 4096> cascade_helper0(static_cast<int64_t>(98304L));
            CascadeSumHelper<at::vec::VectorizedN<float,2>, 4096> masked_cascade_helper0(static_cast<int64_t>(0L));
            for(int64_t x0=static_cast<int64_t>(0L); x0<static_cast<int64_t>(2048L); x0+=static_cast<int64_t>(1L))
            {
                for(int64_t x1=static_cast<int64_t>(0L); x1<static_cast<int64_t>(768L); x1+=static_cast<int64_t>(16L))
                {
                    {
                        if(C10_LIKELY(x1 >= static_cast<int64_t>(0) && x1 < static_cast<int64_t>(768L)))
                        {
                            auto tmp0 = at::vec::Vectorized<at::BFloat16>::loadu(in_ptr9 + static_cast<int64_t>(x1 + 768L*x0), static_cast<int64_t>(16));
                            auto tmp2 = in_ptr11[static_cast<int64_t>(1L)];
                            auto tmp7 = in_ptr11[static_cast<int64_t>(0L)];
                            auto tmp12 = at::vec::Vectorized<at::BFloat16>::loadu(in_ptr5 + static_cast<int64_t>(1536L + x1 + 2304L*x0), static_cast<int64_t>(16));
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
                            tmp6.store(out_ptr9 + static_cast<int64_t>(x1 + 768L*x0), static_cast<int64_t>(16));
                            tmp11.store(out_ptr10 + static_cast<int64_t>(x1 + 2304L*x0), static_cast<int64_t>(16));
                            tmp_acc0_vec = cascade_sum_combine(tmp14, &cascade_helper0);
                        }
                    }
                }
            }
            tmp_acc0 = cascade_sum_final(&scalar_cascade_helper0);
            tmp_acc0_vec = cascade_sum_final(&cascade_helper0);
            masked_tmp_acc0_vec = cascade_sum_final(&masked_cascade_helper0);
            tmp_acc0 = tmp_acc0 + at::vec::vec_reduce_all<float, 2>([](at::vec::Vectorized<float>& x, at::vec::Vectorized<float>& y) { return x + y; }, tmp_acc0_vec + masked_tmp_acc0_vec);
            out_ptr11[static_cast<int64_t>(0L)] = static_cast<at::BFloat16>(tmp_acc0);
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
                        auto tmp10 = out_ptr11[static_cast<int64_t>(0L)];
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
                        out_ptr12[static_cast<int64_t>(x0_tail)] = tmp13;
                    }
                }
            }
        }
    }
    inductor_cpu_integer_div_error_flag = nullptr;
    inductor_cpu_throw_if_integer_div_error(inductor_cpu_integer_div_error);
}
''')


cpp_fused__to_copy_add_div_expand_mul_pow_select_select_backward_sum_view_4 = async_compile.cpp_pybinding(['at::BFloat16*', 'const at::BFloat16*', 'const at::BFloat16*', 'const float*', 'const at::BFloat16*', 'const at::BFloat16*', 'const float*', 'float*', 'float*', 'at::BFloat16*', 'at::BFloat16*', 'at::BFloat16*', 'at::BFloat16*', 'float*'], r'''
#include <torch/csrc/inductor/cpp_prefix.h>
extern "C"  void  kernel(at::BFloat16* in_out_ptr0,
                       const at::BFloat16* in_ptr0,
                       const at::BFloat16* in_ptr1,
                       const float* in_ptr2,
                       const at::BFloat16* in_ptr3,
                       const at::BFloat16* in_ptr4,
                       const float* in_ptr5,
                       float* out_ptr0,
                       float* out_ptr1,
                       at::BFloat16* out_ptr2,
                       at::BFloat16* out_ptr3,
                       at::BFloat16* out_ptr4,
                       at::BFloat16* out_ptr5,
                       float* out_ptr6)
{
    std::atomic<int> inductor_cpu_integer_div_error{0};
    inductor_cpu_integer_div_error_flag = &inductor_cpu_integer_div_error;
    {
        for(int64_t x0=static_cast<int64_t>(0L); x0<static_cast<int64_t>(1769472L); x0+=static_cast<int64_t>(16L))
        {
            {
                if(C10_LIKELY(x0 >= static_cast<int64_t>(0) && x0 < static_cast<int64_t>(1769472L)))
                {
                    auto tmp0 = at::vec::Vectorized<at::BFloat16>::loadu(in_ptr0 + static_cast<int64_t>(x0), static_cast<int64_t>(16));
                    auto tmp1 = at::vec::convert<float,2,at::BFloat16,1>(tmp0);
                    tmp1.store(out_ptr0 + static_cast<int64_t>(x0));
                }
            }
        }
    }
    {
        #pragma GCC ivdep
        for(int64_t x0=static_cast<int64_t>(0L); x0<static_cast<int64_t>(2048L); x0+=static_cast<int64_t>(1L))
        {
            {
                float tmp_acc0 = 0;
                at::vec::VectorizedN<float,2> tmp_acc0_vec = at::vec::VectorizedN<float,2>(0);
                for(int64_t x1=static_cast<int64_t>(0L); x1<static_cast<int64_t>(768L); x1+=static_cast<int64_t>(16L))
                {
                    {
                        if(C10_LIKELY(x1 >= static_cast<int64_t>(0) && x1 < static_cast<int64_t>(768L)))
                        {
                            auto tmp0 = at::vec::Vectorized<at::BFloat16>::loadu(in_ptr1 + static_cast<int64_t>(x1 + 768L*x0), static_cast<int64_t>(16));
                            auto tmp2 = in_ptr2[static_cast<int64_t>(0L)];
                            auto tmp4 = at::vec::Vectorized<at::BFloat16>::loadu(in_ptr3 + static_cast<int64_t>(x1 + 768L*x0), static_cast<int64_t>(16));
                            auto tmp8 = in_ptr2[static_cast<int64_t>(1L)];
                            auto tmp10 = at::vec::Vectorized<at::BFloat16>::loadu(in_ptr4 + static_cast<int64_t>(x1 + 768L*x0), static_cast<int64_t>(16));
                            auto tmp1 = at::vec::convert<float,2,at::BFloat16,1>(tmp0);
                            auto tmp3 = c10::convert<float>(tmp2);
                            auto tmp5 = at::vec::convert<float,2,at::BFloat16,1>(tmp4);
                            auto tmp6 = at::vec::VectorizedN<float,2>(tmp3);
                            auto tmp7 = tmp6 * tmp5;
                            auto tmp9 = c10::convert<float>(tmp8);
                            auto tmp11 = at::vec::convert<float,2,at::BFloat16,1>(tmp10);
                            auto tmp12 = at::vec::VectorizedN<float,2>(tmp9);
                            auto tmp13 = tmp12 * tmp11;
                            auto tmp14 = tmp7 + tmp13;
                            auto tmp15 = (tmp14);
                            auto tmp16 = tmp1 * tmp15;
                            tmp_acc0_vec = tmp_acc0_vec + tmp16;
                        }
                    }
                }
                tmp_acc0 = tmp_acc0 + at::vec::vec_reduce_all<float, 2>([](at::vec::Vectorized<float>& x, at::vec::Vectorized<float>& y) { return x + y; }, tmp_acc0_vec);
                out_ptr1[static_cast<int64_t>(x0)] = static_cast<float>(tmp_acc0);
            }
            for(int64_t x1=static_cast<int64_t>(0L); x1<static_cast<int64_t>(768L); x1+=static_cast<int64_t>(16L))
            {
                {
                    if(C10_LIKELY(x1 >= static_cast<int64_t>(0) && x1 < static_cast<int64_t>(768L)))
                    {
                        auto tmp0 = at::vec::Vectorized<at::BFloat16>::loadu(in_out_ptr0 + static_cast<int64_t>(x1 + 768L*x0), static_cast<int64_t>(16));
                        auto tmp2 = at::vec::Vectorized<at::BFloat16>::loadu(in_ptr1 + static_cast<int64_t>(x1 + 768L*x0), static_cast<int64_t>(16));
                        auto tmp4 = in_ptr5[static_cast<int64_t>(x0)];
                        auto tmp7 = out_ptr1[static_cast<int64_t>(x0)];
                        auto tmp15 = in_ptr2[static_cast<int64_t>(0L)];
                        auto tmp17 = at::vec::Vectorized<at::BFloat16>::loadu(in_ptr3 + static_cast<int64_t>(x1 + 768L*x0), static_cast<int64_t>(16));
                        auto tmp21 = in_ptr2[static_cast<int64_t>(1L)];
                        auto tmp23 = at::vec::Vectorized<at::BFloat16>::loadu(in_ptr4 + static_cast<int64_t>(x1 + 768L*x0), static_cast<int64_t>(16));
                        auto tmp1 = at::vec::convert<float,2,at::BFloat16,1>(tmp0);
                        auto tmp3 = at::vec::convert<float,2,at::BFloat16,1>(tmp2);
                        auto tmp5 = at::vec::VectorizedN<float,2>(tmp4);
                        auto tmp6 = tmp3 * tmp5;
                        auto tmp8 = static_cast<float>(-0.5);
                        auto tmp9 = float(tmp7 * tmp8);
                        auto tmp10 = float(tmp4 * tmp4);
                        auto tmp11 = float(tmp10 * tmp4);
                        auto tmp12 = float(tmp9 * tmp11);
                        auto tmp13 = static_cast<float>(768.0);
                        auto tmp14 = tmp12 / tmp13;
                        auto tmp16 = c10::convert<float>(tmp15);
                        auto tmp18 = at::vec::convert<float,2,at::BFloat16,1>(tmp17);
                        auto tmp19 = at::vec::VectorizedN<float,2>(tmp16);
                        auto tmp20 = tmp19 * tmp18;
                        auto tmp22 = c10::convert<float>(tmp21);
                        auto tmp24 = at::vec::convert<float,2,at::BFloat16,1>(tmp23);
                        auto tmp25 = at::vec::VectorizedN<float,2>(tmp22);
                        auto tmp26 = tmp25 * tmp24;
                        auto tmp27 = tmp20 + tmp26;
                        auto tmp28 = (tmp27);
                        auto tmp29 = static_cast<float>(2.0);
                        auto tmp30 = at::vec::VectorizedN<float,2>(tmp29);
                        auto tmp31 = tmp28 * tmp30;
                        auto tmp32 = at::vec::VectorizedN<float,2>(tmp14);
                        auto tmp33 = tmp32 * tmp31;
                        auto tmp34 = tmp6 + tmp33;
                        auto tmp35 = (tmp34);
                        auto tmp36 = tmp1 + tmp35;
                        auto tmp37 = at::vec::convert<at::BFloat16,1,float,2>(tmp36);
                        auto tmp38 = tmp36 * tmp25;
                        auto tmp39 = at::vec::convert<at::BFloat16,1,float,2>(tmp38);
                        auto tmp40 = tmp36 * tmp19;
                        auto tmp41 = at::vec::convert<at::BFloat16,1,float,2>(tmp40);
                        tmp37.store(in_out_ptr0 + static_cast<int64_t>(x1 + 768L*x0), static_cast<int64_t>(16));
                        tmp39.store(out_ptr2 + static_cast<int64_t>(x1 + 768L*x0), static_cast<int64_t>(16));
                        tmp41.store(out_ptr3 + static_cast<int64_t>(x1 + 768L*x0), static_cast<int64_t>(16));
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
                        auto tmp0 = at::vec::Vectorized<at::BFloat16>::loadu(in_out_ptr0 + static_cast<int64_t>(x0), static_cast<int64_t>(16));
                        auto tmp2 = at::vec::Vectorized<at::BFloat16>::loadu(in_ptr4 + static_cast<int64_t>(x0), static_cast<int64_t>(16));
                        auto tmp5 = at::vec::Vectorized<at::BFloat16>::loadu(in_ptr3 + static_cast<int64_t>(x0), static_cast<int64_t>(16));
                        auto tmp1 = at::vec::convert<float,2,at::BFloat16,1>(tmp0);
                        auto tmp3 = at::vec::convert<float,2,at::BFloat16,1>(tmp2);
                        auto tmp4 = tmp1 * tmp3;
                        auto tmp6 = at::vec::convert<float,2,at::BFloat16,1>(tmp5);
                        auto tmp7 = tmp1 * tmp6;
                        tmp_acc0_vec = cascade_sum_combine(tmp4, &cascade_helper0);
                        tmp_acc1_vec = cascade_sum_combine(tmp7, &cascade_helper1);
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
            out_ptr4[static_cast<int64_t>(0L)] = static_cast<at::BFloat16>(tmp_acc0);
            tmp_acc1 = tmp_acc1 + at::vec::vec_reduce_all<float, 2>([](at::vec::Vectorized<float>& x, at::vec::Vectorized<float>& y) { return x + y; }, tmp_acc1_vec + masked_tmp_acc1_vec);
            out_ptr5[static_cast<int64_t>(0L)] = static_cast<at::BFloat16>(tmp_acc1);
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
                        auto tmp4 = out_ptr4[static_cast<int64_t>(0L)];
                        auto tmp10 = out_ptr5[static_cast<int64_t>(0L)];
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
                        out_ptr6[static_cast<int64_t>(x0_tail)] = tmp13;
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
        primals_1, primals_2, primals_3, primals_5, primals_6, primals_7, primals_8, rsqrt, view_1, mm, rsqrt_1, rsqrt_2, permute_1, permute_2, permute_3, where, getitem_7, getitem_8, add_7, rsqrt_3, view_8, mm_2, view_10, permute_10, permute_14, permute_18, permute_26, tangents_1 = args
        args.clear()
        assert_size_stride(tangents_1, (1, 2048, 768), (1572864, 768, 1), 'input')
        assert_size_stride(view_10, (2048, 3072), (3072, 1), 'input')
        buf0 = empty_strided_cpu((768, 3072), (3072, 1), torch.bfloat16)
        # Topologically Sorted Source Nodes: [view_12, permute_8, mm_4], Original ATen: [aten.view, aten.t, aten.mm]
        extern_kernels.mm(reinterpret_tensor(tangents_1, (768, 2048), (1, 768), 0), view_10, out=buf0)
        del view_10
        assert_size_stride(permute_10, (768, 3072), (3072, 1), 'input')
        buf1 = empty_strided_cpu((2048, 3072), (3072, 1), torch.bfloat16)
        # Topologically Sorted Source Nodes: [view_12, mm_5], Original ATen: [aten.view, aten.mm]
        extern_kernels.mm(reinterpret_tensor(tangents_1, (2048, 768), (768, 1), 0), permute_10, out=buf1)
        del permute_10
        buf2 = empty_strided_cpu((768, 3072), (3072, 1), torch.float32)
        assert_size_stride(mm_2, (2048, 3072), (3072, 1), 'input')
        buf3 = reinterpret_tensor(mm_2, (1, 2048, 3072), (6291456, 3072, 1), 0); del mm_2  # reuse
        assert_size_stride(view_8, (2048, 768), (768, 1), 'input')
        cpp_fused__to_copy__unsafe_view_mul_pow_relu_scalar_tensor_threshold_backward_view_0(buf3, buf0, buf1, buf2)
        del buf1
        buf4 = reinterpret_tensor(buf0, (3072, 768), (768, 1), 0); del buf0  # reuse
        # Topologically Sorted Source Nodes: [view_13, linear_2, relu, pow_6, mul_16, mul_17, le, y, where_1, view_14, permute_12, mm_6], Original ATen: [aten.view, aten._unsafe_view, aten.relu, aten.pow, aten.mul, aten.threshold_backward, aten.scalar_tensor, aten.t, aten.mm]
        extern_kernels.mm(reinterpret_tensor(buf3, (3072, 2048), (1, 3072), 0), view_8, out=buf4)
        del view_8
        assert_size_stride(permute_14, (3072, 768), (768, 1), 'input')
        buf5 = empty_strided_cpu((2048, 768), (768, 1), torch.bfloat16)
        # Topologically Sorted Source Nodes: [view_13, linear_2, relu, pow_6, mul_16, mul_17, le, y, where_1, view_14, mm_7], Original ATen: [aten.view, aten._unsafe_view, aten.relu, aten.pow, aten.mul, aten.threshold_backward, aten.scalar_tensor, aten.mm]
        extern_kernels.mm(reinterpret_tensor(buf3, (2048, 3072), (3072, 1), 0), permute_14, out=buf5)
        del buf3
        del permute_14
        buf6 = empty_strided_cpu((3072, 768), (768, 1), torch.float32)
        assert_size_stride(add_7, (1, 2048, 768), (1572864, 768, 1), 'input')
        assert_size_stride(rsqrt_3, (1, 2048, 1), (2048, 1, 1), 'input')
        buf7 = empty_strided_cpu((1, 2048, 1), (2048, 1, 2048), torch.float32)
        buf8 = reinterpret_tensor(buf5, (1, 2048, 768), (1572864, 768, 1), 0); del buf5  # reuse
        assert_size_stride(getitem_7, (1, 6, 2048, 128), (1572864, 128, 768, 1), 'input')
        cpp_fused__to_copy_add_div_expand_mul_pow_sum_view_1(buf8, buf4, add_7, tangents_1, rsqrt_3, buf6, buf7)
        del add_7
        del buf4
        del rsqrt_3
        del tangents_1
        buf9 = empty_strided_cpu((768, 768), (768, 1), torch.bfloat16)
        # Topologically Sorted Source Nodes: [view_16, permute_16, transpose_3, y_1, linear_1, mm_8], Original ATen: [aten.view, aten.t, aten.transpose, aten.mm]
        extern_kernels.mm(reinterpret_tensor(buf8, (768, 2048), (1, 768), 0), reinterpret_tensor(getitem_7, (2048, 768), (768, 1), 0), out=buf9)
        assert_size_stride(permute_18, (768, 768), (768, 1), 'input')
        buf10 = empty_strided_cpu((2048, 768), (768, 1), torch.bfloat16)
        # Topologically Sorted Source Nodes: [view_16, mm_9], Original ATen: [aten.view, aten.mm]
        extern_kernels.mm(reinterpret_tensor(buf8, (2048, 768), (768, 1), 0), permute_18, out=buf10)
        del permute_18
        buf11 = empty_strided_cpu((768, 768), (768, 1), torch.float32)
        assert_size_stride(getitem_8, (1, 6, 2048), (12288, 1, 6), 'input')
        buf12 = empty_strided_cpu((1, 6, 2048), (12288, 2048, 1), torch.float32)
        assert_size_stride(permute_1, (1, 6, 2048, 128), (1572864, 128, 768, 1), 'input')
        assert_size_stride(permute_2, (1, 6, 2048, 128), (1572864, 128, 768, 1), 'input')
        assert_size_stride(permute_3, (1, 6, 2048, 128), (1572864, 128, 768, 1), 'input')
        assert_size_stride(where, (2048, 2048), (2048, 1), 'input')
        cpp_fused__scaled_dot_product_flash_attention_for_cpu_backward__to_copy_transpose_view_2(buf9, getitem_8, buf11, buf12)
        del buf9
        del getitem_8
        # Topologically Sorted Source Nodes: [view_17, view_18, permute_20, _scaled_dot_product_flash_attention_for_cpu_backward], Original ATen: [aten.view, aten.transpose, aten._scaled_dot_product_flash_attention_for_cpu_backward]
        buf13 = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward.default(reinterpret_tensor(buf10, (1, 6, 2048, 128), (1572864, 128, 768, 1), 0), permute_1, permute_2, permute_3, getitem_7, buf12, 0.0, False, attn_mask=where, scale=0.12)
        del getitem_7
        del permute_1
        del permute_2
        del permute_3
        del where
        buf14 = buf13[0]
        assert_size_stride(buf14, (1, 6, 2048, 128), (1572864, 128, 768, 1), 'torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward.default')
        # buffer buf14 (op: torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward.default) is assumed to be not aligned
        buf15 = buf13[1]
        assert_size_stride(buf15, (1, 6, 2048, 128), (1572864, 128, 768, 1), 'torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward.default')
        # buffer buf15 (op: torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward.default) is assumed to be not aligned
        buf16 = buf13[2]
        assert_size_stride(buf16, (1, 6, 2048, 128), (1572864, 128, 768, 1), 'torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward.default')
        # buffer buf16 (op: torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward.default) is assumed to be not aligned
        del buf13
        assert_size_stride(primals_8, (2048, 64), (64, 1), 'input')
        assert_size_stride(primals_7, (2048, 64), (64, 1), 'input')
        buf19 = empty_strided_cpu((1, 2048, 6, 128), (1572864, 768, 128, 1), torch.float32)
        buf17 = reinterpret_tensor(buf19, (1, 2048, 6, 64), (1572864, 768, 128, 1), 0)  # alias
        buf18 = reinterpret_tensor(buf19, (1, 2048, 6, 64), (1572864, 768, 128, 1), 64)  # alias
        buf23 = empty_strided_cpu((1, 2048, 6, 128), (1572864, 768, 128, 1), torch.float32)
        buf21 = reinterpret_tensor(buf23, (1, 2048, 6, 64), (1572864, 768, 128, 1), 0)  # alias
        buf22 = reinterpret_tensor(buf23, (1, 2048, 6, 64), (1572864, 768, 128, 1), 64)  # alias
        assert_size_stride(mm, (2048, 2304), (2304, 1), 'input')
        assert_size_stride(rsqrt_2, (1, 2048, 6, 1), (12288, 6, 1, 1), 'input')
        buf20 = reinterpret_tensor(buf12, (1, 2048, 6, 1), (12288, 6, 1, 12288), 0); del buf12  # reuse
        buf32 = empty_strided_cpu((1, 2048, 18, 128), (4718592, 2304, 128, 1), torch.bfloat16)
        buf30 = reinterpret_tensor(buf32, (1, 2048, 6, 128), (4718592, 2304, 128, 1), 768)  # alias
        assert_size_stride(rsqrt_1, (1, 2048, 6, 1), (12288, 6, 1, 1), 'input')
        buf24 = empty_strided_cpu((1, 2048, 6, 1), (12288, 6, 1, 12288), torch.float32)
        buf29 = reinterpret_tensor(buf32, (1, 2048, 6, 128), (4718592, 2304, 128, 1), 0)  # alias
        assert_size_stride(primals_5, (2048, 768), (768, 1), 'input')
        buf25 = empty_strided_cpu((), (), torch.bfloat16)
        assert_size_stride(primals_6, (2, ), (1, ), 'input')
        buf26 = reinterpret_tensor(buf10, (1, 2048, 6, 128), (1572864, 768, 128, 1), 0); del buf10  # reuse
        buf31 = reinterpret_tensor(buf32, (1, 2048, 6, 128), (4718592, 2304, 128, 1), 1536)  # alias
        buf27 = empty_strided_cpu((), (), torch.bfloat16)
        buf28 = empty_strided_cpu((2, ), (1, ), torch.float32)
        assert_size_stride(view_1, (2048, 768), (768, 1), 'input')
        cpp_fused__to_copy__unsafe_view_add_div_expand_mul_neg_pow_select_select_backward_slice_split_sum_transpose_unsqueeze_view_3(buf15, primals_8, primals_7, buf14, buf19, mm, rsqrt_2, buf23, rsqrt_1, buf16, primals_5, primals_6, buf17, buf18, buf21, buf22, buf20, buf30, buf24, buf29, buf25, buf26, buf31, buf27, buf28)
        del buf14
        del buf15
        del buf16
        del buf17
        del buf18
        del buf19
        del buf20
        del buf21
        del buf22
        del buf23
        del buf24
        del buf29
        del buf30
        del buf31
        del mm
        del primals_5
        del primals_6
        del primals_7
        del primals_8
        del rsqrt_1
        del rsqrt_2
        buf33 = empty_strided_cpu((2304, 768), (768, 1), torch.bfloat16)
        # Topologically Sorted Source Nodes: [view_20, view_21, permute_24, mm_10], Original ATen: [aten.view, aten.t, aten.mm]
        extern_kernels.mm(reinterpret_tensor(buf32, (2304, 2048), (1, 2304), 0), view_1, out=buf33)
        del view_1
        assert_size_stride(permute_26, (2304, 768), (768, 1), 'input')
        buf34 = empty_strided_cpu((2048, 768), (768, 1), torch.bfloat16)
        # Topologically Sorted Source Nodes: [view_20, view_21, mm_11], Original ATen: [aten.view, aten.mm]
        extern_kernels.mm(reinterpret_tensor(buf32, (2048, 2304), (2304, 1), 0), permute_26, out=buf34)
        del buf32
        del permute_26
        buf35 = empty_strided_cpu((2304, 768), (768, 1), torch.float32)
        assert_size_stride(primals_1, (2, ), (1, ), 'input')
        assert_size_stride(primals_2, (1, 2048, 768), (1572864, 768, 1), 'input')
        assert_size_stride(primals_3, (1, 2048, 768), (1572864, 768, 1), 'input')
        assert_size_stride(rsqrt, (1, 2048, 1), (2048, 1, 1), 'input')
        buf36 = buf7; del buf7  # reuse
        buf37 = buf8; del buf8  # reuse
        buf38 = empty_strided_cpu((1, 2048, 768), (1572864, 768, 1), torch.bfloat16)
        buf40 = empty_strided_cpu((1, 2048, 768), (1572864, 768, 1), torch.bfloat16)
        buf39 = buf27; del buf27  # reuse
        buf41 = buf25; del buf25  # reuse
        buf42 = empty_strided_cpu((2, ), (1, ), torch.float32)
        cpp_fused__to_copy_add_div_expand_mul_pow_select_select_backward_sum_view_4(buf37, buf33, buf34, primals_1, primals_2, primals_3, rsqrt, buf35, buf36, buf38, buf40, buf39, buf41, buf42)
        del buf33
        del buf34
        del buf36
        del buf37
        del buf39
        del buf41
        del primals_1
        del primals_2
        del primals_3
        del rsqrt
        return (buf42, buf40, buf38, reinterpret_tensor(buf35, (3, 768, 768), (589824, 768, 1), 0), reinterpret_tensor(buf26, (2048, 768), (768, 1), 0), buf28, None, None, None, buf11, buf6, buf2, )

runner = Runner(partitions=[])
call = runner.call
recursively_apply_fns = runner.recursively_apply_fns


def get_args():
    from torch._dynamo.testing import rand_strided
    primals_1 = rand_strided((2, ), (1, ), device='cpu', dtype=torch.float32)
    primals_2 = rand_strided((1, 2048, 768), (1572864, 768, 1), device='cpu', dtype=torch.bfloat16)
    primals_3 = rand_strided((1, 2048, 768), (1572864, 768, 1), device='cpu', dtype=torch.bfloat16)
    primals_5 = rand_strided((2048, 768), (768, 1), device='cpu', dtype=torch.bfloat16)
    primals_6 = rand_strided((2, ), (1, ), device='cpu', dtype=torch.float32)
    primals_7 = rand_strided((2048, 64), (64, 1), device='cpu', dtype=torch.float32)
    primals_8 = rand_strided((2048, 64), (64, 1), device='cpu', dtype=torch.float32)
    rsqrt = rand_strided((1, 2048, 1), (2048, 1, 1), device='cpu', dtype=torch.float32)
    view_1 = rand_strided((2048, 768), (768, 1), device='cpu', dtype=torch.bfloat16)
    mm = rand_strided((2048, 2304), (2304, 1), device='cpu', dtype=torch.bfloat16)
    rsqrt_1 = rand_strided((1, 2048, 6, 1), (12288, 6, 1, 1), device='cpu', dtype=torch.float32)
    rsqrt_2 = rand_strided((1, 2048, 6, 1), (12288, 6, 1, 1), device='cpu', dtype=torch.float32)
    permute_1 = rand_strided((1, 6, 2048, 128), (1572864, 128, 768, 1), device='cpu', dtype=torch.bfloat16)
    permute_2 = rand_strided((1, 6, 2048, 128), (1572864, 128, 768, 1), device='cpu', dtype=torch.bfloat16)
    permute_3 = rand_strided((1, 6, 2048, 128), (1572864, 128, 768, 1), device='cpu', dtype=torch.bfloat16)
    where = rand_strided((2048, 2048), (2048, 1), device='cpu', dtype=torch.bfloat16)
    getitem_7 = rand_strided((1, 6, 2048, 128), (1572864, 128, 768, 1), device='cpu', dtype=torch.bfloat16)
    getitem_8 = rand_strided((1, 6, 2048), (12288, 1, 6), device='cpu', dtype=torch.float32)
    add_7 = rand_strided((1, 2048, 768), (1572864, 768, 1), device='cpu', dtype=torch.bfloat16)
    rsqrt_3 = rand_strided((1, 2048, 1), (2048, 1, 1), device='cpu', dtype=torch.float32)
    view_8 = rand_strided((2048, 768), (768, 1), device='cpu', dtype=torch.bfloat16)
    mm_2 = rand_strided((2048, 3072), (3072, 1), device='cpu', dtype=torch.bfloat16)
    view_10 = rand_strided((2048, 3072), (3072, 1), device='cpu', dtype=torch.bfloat16)
    permute_10 = rand_strided((768, 3072), (3072, 1), device='cpu', dtype=torch.bfloat16)
    permute_14 = rand_strided((3072, 768), (768, 1), device='cpu', dtype=torch.bfloat16)
    permute_18 = rand_strided((768, 768), (768, 1), device='cpu', dtype=torch.bfloat16)
    permute_26 = rand_strided((2304, 768), (768, 1), device='cpu', dtype=torch.bfloat16)
    tangents_1 = rand_strided((1, 2048, 768), (1572864, 768, 1), device='cpu', dtype=torch.bfloat16)
    return [primals_1, primals_2, primals_3, primals_5, primals_6, primals_7, primals_8, rsqrt, view_1, mm, rsqrt_1, rsqrt_2, permute_1, permute_2, permute_3, where, getitem_7, getitem_8, add_7, rsqrt_3, view_8, mm_2, view_10, permute_10, permute_14, permute_18, permute_26, tangents_1]


def benchmark_compiled_module(args, times=10, repeat=10):
    from torch._inductor.utils import print_performance
    fn = lambda: call(list(args))
    return print_performance(fn, times=times, repeat=repeat, device='cpu')


if __name__ == "__main__":
    from torch._inductor.wrapper_benchmark import compiled_module_main
    args = get_args()
    compiled_module_main('None', lambda times, repeat: benchmark_compiled_module(args, times=times, repeat=repeat))
