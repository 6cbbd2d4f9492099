// Conversions between the element types commtool's kernels move and the float, double and int
// they compute in. The built-in types convert with a cast; half and bfloat16 take the rounding
// intrinsics of cuda_fp16.h and cuda_bf16.h (round to nearest even), named once here so that
// every kernel rounds the same way.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace commtool::cuda {

template <typename T>
__device__ inline float to_float(T x) {
  return static_cast<float>(x);
}
template <>
__device__ inline float to_float<__half>(__half x) {
  return __half2float(x);
}
template <>
__device__ inline float to_float<__nv_bfloat16>(__nv_bfloat16 x) {
  return __bfloat162float(x);
}

// Every 16-bit float is exactly a float, so widening through float loses nothing.
template <typename T>
__device__ inline double to_double(T x) {
  return static_cast<double>(x);
}
template <>
__device__ inline double to_double<__half>(__half x) {
  return static_cast<double>(to_float(x));
}
template <>
__device__ inline double to_double<__nv_bfloat16>(__nv_bfloat16 x) {
  return static_cast<double>(to_float(x));
}

template <typename T>
__device__ inline T from_float(float x) {
  return static_cast<T>(x);
}
template <>
__device__ inline __half from_float<__half>(float x) {
  return __float2half_rn(x);
}
template <>
__device__ inline __nv_bfloat16 from_float<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}

template <typename T>
__device__ inline T from_int(int v) {
  return static_cast<T>(v);
}
template <>
__device__ inline __half from_int<__half>(int v) {
  return __int2half_rn(v);
}
template <>
__device__ inline __nv_bfloat16 from_int<__nv_bfloat16>(int v) {
  return __int2bfloat16_rn(v);
}

}  // namespace commtool::cuda
