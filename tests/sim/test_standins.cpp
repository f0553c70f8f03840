// The simulator's library stand-ins called directly through the shims: cublasGemmEx against
// its stated summation order (bit for bit) and a double reference (within the FP32
// accumulation bound), every argument check, and cub::DeviceRadixSort::SortPairs's query,
// stability, bit range and DoubleBuffer contract.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <utility>
#include <vector>

#include "bufferlab/core/number_formats.h"
#include "bufferlab/cuda_sim/cub_shim.h"
#include "bufferlab/cuda_sim/cublas_shim.h"
#include "findings.h"

namespace bufferlab::sim::device {
namespace {

// The stand-in reported its refused range as an out-of-bounds finding naming the operand.
void expect_out_of_bounds(const std::string& operand) {
  const std::vector<Finding> findings = take_findings();
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings[0].check, Check::out_of_bounds);
  EXPECT_EQ(findings[0].kernel, operand);
}

// One simulated device allocation holding a copy of host bytes.
class DeviceBytes {
 public:
  explicit DeviceBytes(size_t bytes) : bytes_(bytes) {
    EXPECT_EQ(cudaMalloc(&p_, bytes), cudaSuccess);
  }
  template <class T>
  explicit DeviceBytes(const std::vector<T>& host) : DeviceBytes(host.size() * sizeof(T)) {
    upload(host);
  }
  ~DeviceBytes() { cudaFree(p_); }
  DeviceBytes(const DeviceBytes&) = delete;
  DeviceBytes& operator=(const DeviceBytes&) = delete;

  template <class T>
  T* as() const {
    return static_cast<T*>(p_);
  }
  template <class T>
  void upload(const std::vector<T>& host) {
    ASSERT_EQ(cudaMemcpy(p_, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice),
              cudaSuccess);
  }
  template <class T>
  std::vector<T> download() const {
    std::vector<T> host(bytes_ / sizeof(T));
    EXPECT_EQ(cudaMemcpy(host.data(), p_, bytes_, cudaMemcpyDeviceToHost), cudaSuccess);
    return host;
  }

 private:
  void* p_ = nullptr;
  size_t bytes_ = 0;
};

// ---- GEMM references ----

// A column-major matrix on the host, FP32 values (BF16 operands hold BF16-exact values).
struct HostMatrix {
  int rows = 0, cols = 0, ld = 0;
  std::vector<float> v;
  float at(int r, int c) const { return v[static_cast<size_t>(r + c * ld)]; }
};

HostMatrix random_matrix(int rows, int cols, int ld, bool bf16_exact, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  HostMatrix m{rows, cols, ld, std::vector<float>(static_cast<size_t>(ld) * cols)};
  for (float& x : m.v) x = bf16_exact ? round_to_bf16(dist(rng)) : dist(rng);
  return m;
}

std::vector<uint16_t> to_bf16(const std::vector<float>& v) {
  std::vector<uint16_t> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = f32_to_bf16_bits(v[i]);
  return out;
}

float op_at(const HostMatrix& x, bool trans, int r, int c) {
  return trans ? x.at(c, r) : x.at(r, c);
}

float rounded_product(float a, float b) {
  const volatile float p = a * b;  // the stand-in's order: product rounded, never fused
  return p;
}

// The stand-in's stated order, written independently: FP32 sum over p = 0..k-1 from 0.0f.
float stated_order(const HostMatrix& a, bool ta, const HostMatrix& b, bool tb, int i, int j, int k,
                   float alpha, float beta, float c_old) {
  float acc = 0.0f;
  for (int p = 0; p < k; ++p) acc = acc + rounded_product(op_at(a, ta, i, p), op_at(b, tb, p, j));
  float r = rounded_product(alpha, acc);
  if (beta != 0.0f) r = r + rounded_product(beta, c_old);
  return r;
}

struct DoubleRef {
  double value = 0;
  double magnitude = 0;  // Σ|a·b|, the scale of the FP32 accumulation error
};

DoubleRef double_ref(const HostMatrix& a, bool ta, const HostMatrix& b, bool tb, int i, int j,
                     int k) {
  DoubleRef r;
  for (int p = 0; p < k; ++p) {
    const double prod = double(op_at(a, ta, i, p)) * double(op_at(b, tb, p, j));
    r.value += prod;
    r.magnitude += std::fabs(prod);
  }
  return r;
}

struct TypeRow {
  cudaDataType ab;
  cudaDataType c;
};

struct GemmCase {
  cublasOperation_t ta, tb;
  TypeRow types;
};

class GemmFixture : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(cublasCreate(&handle_), CUBLAS_STATUS_SUCCESS); }
  void TearDown() override { EXPECT_EQ(cublasDestroy(handle_), CUBLAS_STATUS_SUCCESS); }
  cublasHandle_t handle_ = nullptr;
};

std::unique_ptr<DeviceBytes> upload_as(const HostMatrix& m, cudaDataType t) {
  if (t == CUDA_R_16BF) return std::make_unique<DeviceBytes>(to_bf16(m.v));
  return std::make_unique<DeviceBytes>(m.v);
}

std::vector<float> download_as(const DeviceBytes& d, cudaDataType t) {
  if (t == CUDA_R_32F) return d.download<float>();
  std::vector<float> out;
  for (uint16_t b : d.download<uint16_t>()) out.push_back(bf16_bits_to_f32(b));
  return out;
}

// Runs one GEMM through the stand-in and checks every C element against both references.
void check_gemm(cublasHandle_t h, const GemmCase& gc, float alpha, float beta) {
  const int m = 5, n = 4, k = 37;
  const bool ta = gc.ta != CUBLAS_OP_N, tb = gc.tb != CUBLAS_OP_N;  // C is T for real types
  const bool bf16 = gc.types.ab == CUDA_R_16BF;
  std::mt19937 rng(1234 + 7 * gc.ta + 3 * gc.tb + gc.types.c);
  // Stored shapes with padded leading dimensions, so a wrong ld shows.
  const HostMatrix a =
      ta ? random_matrix(k, m, k + 3, bf16, rng) : random_matrix(m, k, m + 2, bf16, rng);
  const HostMatrix b =
      tb ? random_matrix(n, k, n + 1, bf16, rng) : random_matrix(k, n, k + 5, bf16, rng);
  const bool c_bf16 = gc.types.c == CUDA_R_16BF;
  const HostMatrix c0 = random_matrix(m, n, m + 4, c_bf16, rng);
  auto da = upload_as(a, gc.types.ab), db = upload_as(b, gc.types.ab);
  auto dc = upload_as(c0, gc.types.c);
  ASSERT_EQ(cublasGemmEx(h, gc.ta, gc.tb, m, n, k, &alpha, da->as<void>(), gc.types.ab, a.ld,
                         db->as<void>(), gc.types.ab, b.ld, &beta, dc->as<void>(), gc.types.c,
                         c0.ld, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
            CUBLAS_STATUS_SUCCESS);
  const std::vector<float> got = download_as(*dc, gc.types.c);
  for (int j = 0; j < n; ++j) {
    for (int i = m; i < c0.ld; ++i)  // padding rows of C are never written
      EXPECT_EQ(got[i + j * c0.ld], c0.at(i, j)) << "padding " << i << "," << j;
    for (int i = 0; i < m; ++i) {
      const float old = c0.at(i, j);
      float want = stated_order(a, ta, b, tb, i, j, k, alpha, beta, old);
      if (c_bf16) want = round_to_bf16(want);
      const float g = got[i + j * c0.ld];
      EXPECT_EQ(g, want) << "element " << i << "," << j;
      const DoubleRef r = double_ref(a, ta, b, tb, i, j, k);
      const double exact = double(alpha) * r.value + double(beta) * old;
      double bound =
          (k + 2) * std::ldexp(1.0, -23) * (std::fabs(alpha) * r.magnitude + std::fabs(beta * old));
      if (c_bf16) bound += std::fabs(exact) * std::ldexp(1.0, -8) * 1.01;
      EXPECT_LE(std::fabs(g - exact), bound) << "element " << i << "," << j;
    }
  }
}

const TypeRow kRows[] = {
    {CUDA_R_16BF, CUDA_R_16BF}, {CUDA_R_16BF, CUDA_R_32F}, {CUDA_R_32F, CUDA_R_32F}};
const cublasOperation_t kOps[] = {CUBLAS_OP_N, CUBLAS_OP_T};

TEST_F(GemmFixture, EveryTransposeAndTypeRowMatchesTheStatedOrderAndTheDoubleReference) {
  for (const TypeRow& row : kRows)
    for (cublasOperation_t ta : kOps)
      for (cublasOperation_t tb : kOps) {
        SCOPED_TRACE(testing::Message()
                     << "ab " << row.ab << " c " << row.c << " ta " << ta << " tb " << tb);
        check_gemm(handle_, {ta, tb, row}, 1.0f, 0.0f);
        check_gemm(handle_, {ta, tb, row}, -0.75f, 1.5f);
      }
}

TEST_F(GemmFixture, OpCIsOpTForRealTypes) {
  check_gemm(handle_, {CUBLAS_OP_C, CUBLAS_OP_C, {CUDA_R_32F, CUDA_R_32F}}, 1.0f, 0.5f);
}

TEST_F(GemmFixture, BetaZeroDoesNotReadC) {
  const int m = 2, n = 2, k = 3;
  const std::vector<float> a(m * k, 1.0f), b(k * n, 2.0f);
  const std::vector<float> nan_c(m * n, std::numeric_limits<float>::quiet_NaN());
  DeviceBytes da(a), db(b), dc(nan_c);
  const float alpha = 1.0f, beta = 0.0f;
  ASSERT_EQ(cublasGemmEx(handle_, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &alpha, da.as<void>(),
                         CUDA_R_32F, m, db.as<void>(), CUDA_R_32F, k, &beta, dc.as<void>(),
                         CUDA_R_32F, m, CUBLAS_COMPUTE_32F_PEDANTIC, CUBLAS_GEMM_DEFAULT),
            CUBLAS_STATUS_SUCCESS);
  for (float v : dc.download<float>()) EXPECT_EQ(v, 6.0f);
}

TEST_F(GemmFixture, DevicePointerModeReadsTheScalarsFromDeviceMemory) {
  const int m = 1, n = 1, k = 2;
  DeviceBytes da(std::vector<float>{1.0f, 2.0f}), db(std::vector<float>{3.0f, 4.0f});
  DeviceBytes dc(std::vector<float>{10.0f});
  DeviceBytes scalars(std::vector<float>{2.0f, 0.5f});
  ASSERT_EQ(cublasSetPointerMode(handle_, CUBLAS_POINTER_MODE_DEVICE), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(
      cublasGemmEx(handle_, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, scalars.as<float>(), da.as<void>(),
                   CUDA_R_32F, k, db.as<void>(), CUDA_R_32F, k, scalars.as<float>() + 1,
                   dc.as<void>(), CUDA_R_32F, m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
      CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(dc.download<float>()[0], 2.0f * 11.0f + 0.5f * 10.0f);
}

TEST_F(GemmFixture, EmptyProblemsTouchNothing) {
  const float alpha = 1.0f, beta = 0.0f;
  for (int mn : {0, 1}) {
    EXPECT_EQ(cublasGemmEx(handle_, CUBLAS_OP_N, CUBLAS_OP_N, mn, 1 - mn, 4, &alpha, nullptr,
                           CUDA_R_32F, 1, nullptr, CUDA_R_32F, 4, &beta, nullptr, CUDA_R_32F, 1,
                           CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
              CUBLAS_STATUS_SUCCESS);
  }
  // k == 0: C = beta·C without reading A or B.
  DeviceBytes dc(std::vector<float>{3.0f});
  const float half = 0.5f;
  EXPECT_EQ(cublasGemmEx(handle_, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 0, &alpha, nullptr, CUDA_R_32F, 1,
                         nullptr, CUDA_R_32F, 1, &half, dc.as<void>(), CUDA_R_32F, 1,
                         CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(dc.download<float>()[0], 1.5f);
}

// One call's arguments, valid by default: a 3×2 result from (T: A stored 4×3) · (N: B 4×2).
struct Args {
  cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  int m = 3, n = 2, k = 4, lda = 4, ldb = 4, ldc = 3;
  cudaDataType at = CUDA_R_16BF, bt = CUDA_R_16BF, ct = CUDA_R_16BF;
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  cublasGemmAlgo_t algo = CUBLAS_GEMM_DEFAULT;
};

class GemmValidation : public GemmFixture {
 protected:
  // Buffers large enough for every variation below (16 floats each), C filled with a marker.
  DeviceBytes a_{std::vector<float>(16, 1.0f)}, b_{std::vector<float>(16, 1.0f)};
  DeviceBytes c_{std::vector<float>(16, -7.0f)};

  cublasStatus_t call(const Args& x) {
    const float alpha = 1.0f, beta = 0.0f;
    return cublasGemmEx(handle_, x.ta, x.tb, x.m, x.n, x.k, &alpha, a_.as<void>(), x.at, x.lda,
                        b_.as<void>(), x.bt, x.ldb, &beta, c_.as<void>(), x.ct, x.ldc, x.compute,
                        x.algo);
  }
  void expect_c_untouched() {
    for (float v : c_.download<float>()) EXPECT_EQ(v, -7.0f);
  }
};

TEST_F(GemmValidation, TheDefaultArgumentsAreValid) {
  EXPECT_EQ(call(Args{}), CUBLAS_STATUS_SUCCESS);
}

TEST_F(GemmValidation, InvalidValuesAreRejectedBeforeMemoryIsTouched) {
  std::vector<Args> bad(11);
  bad[0].m = -1;
  bad[1].n = -1;
  bad[2].k = -1;
  bad[3].lda = 3;           // T: A stored k×m, needs lda ≥ k = 4
  bad[4].ta = CUBLAS_OP_N;  // N: A stored m×k needs lda ≥ m = 3 — valid; make it 2
  bad[4].lda = 2;
  bad[5].ldb = 3;           // N: B stored k×n, needs ldb ≥ k = 4
  bad[6].tb = CUBLAS_OP_T;  // T: B stored n×k, needs ldb ≥ n = 2
  bad[6].ldb = 1;
  bad[7].ldc = 2;  // ldc ≥ m = 3
  bad[8].ta = static_cast<cublasOperation_t>(7);
  bad[9].m = 0;  // ldc ≥ max(1, m) even when m == 0
  bad[9].ldc = 0;
  bad[10].lda = 0;
  bad[10].k = 0;  // T with k == 0: lda ≥ max(1, 0)
  for (size_t i = 0; i < bad.size(); ++i) EXPECT_EQ(call(bad[i]), CUBLAS_STATUS_INVALID_VALUE) << i;
  expect_c_untouched();
}

TEST_F(GemmValidation, UndocumentedTypeRowsAreNotSupported) {
  std::vector<Args> bad(6);
  bad[0].at = bad[0].bt = CUDA_R_32F;  // FP32·FP32 → BF16: no such row in cuBLAS's table
  bad[1].bt = CUDA_R_32F;              // mixed A/B
  bad[2].at = bad[2].bt = bad[2].ct = CUDA_R_16F;
  bad[3].compute = CUBLAS_COMPUTE_32F_FAST_16BF;
  bad[4].ct = CUDA_R_64F;
  bad[5].algo = static_cast<cublasGemmAlgo_t>(3);
  for (size_t i = 0; i < bad.size(); ++i) EXPECT_EQ(call(bad[i]), CUBLAS_STATUS_NOT_SUPPORTED) << i;
  expect_c_untouched();
}

TEST_F(GemmValidation, AnOperandPastItsAllocationIsInvalidAndNothingIsComputed) {
  Args x;
  x.lda = 16;  // A spans 16·2 + 4 BF16 elements = 72 bytes of a 64-byte allocation
  EXPECT_EQ(call(x), CUBLAS_STATUS_INVALID_VALUE);
  expect_out_of_bounds("cublasGemmEx A");
  expect_c_untouched();
  Args y;
  y.ct = CUDA_R_32F;
  y.ldc = 14;  // C spans 14 + 3 floats = 68 bytes
  EXPECT_EQ(call(y), CUBLAS_STATUS_INVALID_VALUE);
  expect_out_of_bounds("cublasGemmEx C");
  expect_c_untouched();
}

TEST_F(GemmValidation, NullScalarsAreInvalid) {
  const float one = 1.0f;
  EXPECT_EQ(cublasGemmEx(handle_, CUBLAS_OP_T, CUBLAS_OP_N, 3, 2, 4, nullptr, a_.as<void>(),
                         CUDA_R_16BF, 4, b_.as<void>(), CUDA_R_16BF, 4, &one, c_.as<void>(),
                         CUDA_R_16BF, 3, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
            CUBLAS_STATUS_INVALID_VALUE);
  expect_c_untouched();
}

// ---- Handle calls ----

TEST(CublasHandle, NullAndDestroyedHandlesAreNotInitialized) {
  EXPECT_EQ(cublasCreate(nullptr), CUBLAS_STATUS_INVALID_VALUE);
  cublasHandle_t h = nullptr;
  ASSERT_EQ(cublasCreate(&h), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasDestroy(h), CUBLAS_STATUS_SUCCESS);
  for (cublasHandle_t bad : {static_cast<cublasHandle_t>(nullptr), h}) {
    EXPECT_EQ(cublasDestroy(bad), CUBLAS_STATUS_NOT_INITIALIZED);
    EXPECT_EQ(cublasSetStream(bad, nullptr), CUBLAS_STATUS_NOT_INITIALIZED);
    EXPECT_EQ(cublasSetWorkspace(bad, nullptr, 0), CUBLAS_STATUS_NOT_INITIALIZED);
    EXPECT_EQ(cublasSetPointerMode(bad, CUBLAS_POINTER_MODE_HOST), CUBLAS_STATUS_NOT_INITIALIZED);
    EXPECT_EQ(cublasSetAtomicsMode(bad, CUBLAS_ATOMICS_NOT_ALLOWED), CUBLAS_STATUS_NOT_INITIALIZED);
    EXPECT_EQ(cublasSetMathMode(bad, CUBLAS_DEFAULT_MATH), CUBLAS_STATUS_NOT_INITIALIZED);
    const float one = 1.0f;
    EXPECT_EQ(cublasGemmEx(bad, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, &one, nullptr, CUDA_R_32F, 1,
                           nullptr, CUDA_R_32F, 1, &one, nullptr, CUDA_R_32F, 1, CUBLAS_COMPUTE_32F,
                           CUBLAS_GEMM_DEFAULT),
              CUBLAS_STATUS_NOT_INITIALIZED);
  }
}

TEST_F(GemmFixture, ModesAcceptTheirValuesOnly) {
  EXPECT_EQ(cublasSetPointerMode(handle_, static_cast<cublasPointerMode_t>(2)),
            CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(cublasSetAtomicsMode(handle_, static_cast<cublasAtomicsMode_t>(2)),
            CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(cublasSetAtomicsMode(handle_, CUBLAS_ATOMICS_ALLOWED), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasSetMathMode(handle_, CUBLAS_PEDANTIC_MATH), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasSetMathMode(handle_, static_cast<cublasMath_t>(
                                           CUBLAS_DEFAULT_MATH |
                                           CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasSetMathMode(handle_, static_cast<cublasMath_t>(5)), CUBLAS_STATUS_INVALID_VALUE);
}

TEST_F(GemmFixture, TheWorkspaceMustBeAlignedDeviceMemoryInsideOneAllocation) {
  DeviceBytes ws(4096);
  ASSERT_EQ(reinterpret_cast<uintptr_t>(ws.as<void>()) % 256, 0u);  // cudaMalloc's alignment
  EXPECT_EQ(cublasSetWorkspace(handle_, ws.as<void>(), 4096), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasSetWorkspace(handle_, ws.as<void>(), 4097), CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(cublasSetWorkspace(handle_, ws.as<char>() + 4, 256), CUBLAS_STATUS_INVALID_VALUE);
  std::vector<char> host(512);
  EXPECT_EQ(cublasSetWorkspace(handle_, host.data(), host.size()), CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(cublasSetWorkspace(handle_, nullptr, 0), CUBLAS_STATUS_SUCCESS);
}

TEST(CublasStatus, NamesAndStringsAreCublas) {
  EXPECT_STREQ(cublasGetStatusName(CUBLAS_STATUS_INVALID_VALUE), "CUBLAS_STATUS_INVALID_VALUE");
  EXPECT_STREQ(cublasGetStatusName(CUBLAS_STATUS_NOT_SUPPORTED), "CUBLAS_STATUS_NOT_SUPPORTED");
  EXPECT_STREQ(cublasGetStatusName(CUBLAS_STATUS_SUCCESS), "CUBLAS_STATUS_SUCCESS");
  for (int s : {0, 1, 3, 7, 8, 11, 13, 14, 15}) {
    const auto status = static_cast<cublasStatus_t>(s);
    EXPECT_STRNE(cublasGetStatusName(status), "CUBLAS_STATUS_UNKNOWN") << s;
    EXPECT_GT(std::strlen(cublasGetStatusString(status)), 10u) << s;
  }
  EXPECT_STREQ(cublasGetStatusName(static_cast<cublasStatus_t>(99)), "CUBLAS_STATUS_UNKNOWN");
}

// ---- Radix sort ----

size_t query(int n, int end_bit) {
  cub::DoubleBuffer<uint32_t> keys, values;
  size_t bytes = 0;
  EXPECT_EQ(cub::DeviceRadixSort::SortPairs(nullptr, bytes, keys, values, n, 0, end_bit),
            cudaSuccess);
  return bytes;
}

TEST(CubSortPairs, TheQueryIsDeterministicAndGrowsWithTheItemCount) {
  EXPECT_GT(query(0, 8), 0u);
  EXPECT_EQ(query(1000, 8), query(1000, 8));
  EXPECT_LE(query(1000, 8), query(1001, 8));
  EXPECT_GE(query(1 << 20, 32), size_t{4} << 20);
}

TEST(CubSortPairs, InvalidArgumentsAreRejected) {
  cub::DoubleBuffer<uint32_t> keys, values;
  size_t bytes = 0;
  EXPECT_EQ(cub::sort_pairs_u32(nullptr, bytes, keys, values, -1, 0, 8, nullptr),
            cudaErrorInvalidValue);
  const std::vector<std::pair<int, int>> bad_bits = {{-1, 8}, {4, 4}, {5, 4}, {0, 33}};
  for (auto [b, e] : bad_bits)
    EXPECT_EQ(cub::sort_pairs_u32(nullptr, bytes, keys, values, 10, b, e, nullptr),
              cudaErrorInvalidValue)
        << b << "," << e;
}

// Four item buffers and a temporary area, keys[0]/values[0] holding the input.
struct SortRig {
  int n;
  DeviceBytes k0, k1, v0, v1, temp;
  SortRig(const std::vector<uint32_t>& keys, int end_bit)
      : n(static_cast<int>(keys.size())),
        k0(keys),
        k1(keys.size() * 4),
        v0(iota(keys.size())),
        v1(keys.size() * 4),
        temp(query(n, end_bit)) {}
  static std::vector<uint32_t> iota(size_t n) {
    std::vector<uint32_t> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint32_t>(i);
    return v;
  }
};

std::vector<uint32_t> download_current(const cub::DoubleBuffer<uint32_t>& b, const SortRig& r) {
  const DeviceBytes& d = b.Current() == r.k0.as<uint32_t>()   ? r.k0
                         : b.Current() == r.k1.as<uint32_t>() ? r.k1
                         : b.Current() == r.v0.as<uint32_t>() ? r.v0
                                                              : r.v1;
  return d.download<uint32_t>();
}

void check_sort(const std::vector<uint32_t>& input, int begin_bit, int end_bit) {
  SortRig rig(input, end_bit);
  cub::DoubleBuffer<uint32_t> keys(rig.k0.as<uint32_t>(), rig.k1.as<uint32_t>());
  cub::DoubleBuffer<uint32_t> values(rig.v0.as<uint32_t>(), rig.v1.as<uint32_t>());
  size_t bytes = query(rig.n, end_bit);
  ASSERT_EQ(cub::DeviceRadixSort::SortPairs(rig.temp.as<void>(), bytes, keys, values, rig.n,
                                            begin_bit, end_bit),
            cudaSuccess);
  // The reference: a stable sort of the indices by the key's bits [begin_bit, end_bit).
  const uint64_t mask = ((uint64_t{1} << (end_bit - begin_bit)) - 1) << begin_bit;
  std::vector<uint32_t> order = SortRig::iota(input.size());
  std::stable_sort(order.begin(), order.end(),
                   [&](uint32_t a, uint32_t b) { return (input[a] & mask) < (input[b] & mask); });
  const std::vector<uint32_t> got_keys = download_current(keys, rig);
  const std::vector<uint32_t> got_values = download_current(values, rig);
  for (size_t i = 0; i < order.size(); ++i) {
    ASSERT_EQ(got_values[i], order[i]) << i;       // stability: equal keys keep input order
    ASSERT_EQ(got_keys[i], input[order[i]]) << i;  // whole keys travel, not just the bits
  }
  // The stand-in's documented landing buffer: one flip per 8-bit pass.
  const int passes = (end_bit - begin_bit + 7) / 8;
  EXPECT_EQ(keys.selector, passes & 1);
  EXPECT_EQ(values.selector, passes & 1);
}

std::vector<uint32_t> random_keys(size_t n, uint32_t mod, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint32_t> k(n);
  for (uint32_t& x : k) x = static_cast<uint32_t>(rng()) % mod;
  return k;
}

TEST(CubSortPairs, SortsStablyOnTheRequestedBits) {
  check_sort(random_keys(1000, 20, 1), 0, 5);            // one pass, many duplicates
  check_sort(random_keys(777, 1u << 16, 2), 0, 16);      // two passes: back in buffer 0
  check_sort(random_keys(500, 0xFFFFFFFFu, 3), 4, 12);   // bits outside are ignored
  check_sort(random_keys(300, 0xFFFFFFFFu, 4), 0, 32);   // four passes
  check_sort(random_keys(257, 0xFFFFFFFFu, 5), 31, 32);  // the top bit alone
  check_sort({5}, 0, 3);
}

TEST(CubSortPairs, TooLittleTemporaryStorageIsInvalid) {
  SortRig rig(random_keys(64, 8, 6), 3);
  cub::DoubleBuffer<uint32_t> keys(rig.k0.as<uint32_t>(), rig.k1.as<uint32_t>());
  cub::DoubleBuffer<uint32_t> values(rig.v0.as<uint32_t>(), rig.v1.as<uint32_t>());
  size_t bytes = query(64, 3) - 1;
  EXPECT_EQ(cub::sort_pairs_u32(rig.temp.as<void>(), bytes, keys, values, 64, 0, 3, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(keys.selector, 0);
}

TEST(CubSortPairs, ABufferShorterThanTheItemsIsRejectedUntouched) {
  const std::vector<uint32_t> input = random_keys(64, 8, 7);
  SortRig rig(input, 3);
  DeviceBytes short_values(std::vector<uint32_t>(32, 9));
  cub::DoubleBuffer<uint32_t> keys(rig.k0.as<uint32_t>(), rig.k1.as<uint32_t>());
  cub::DoubleBuffer<uint32_t> values(rig.v0.as<uint32_t>(), short_values.as<uint32_t>());
  size_t bytes = query(64, 3);
  EXPECT_NE(cub::sort_pairs_u32(rig.temp.as<void>(), bytes, keys, values, 64, 0, 3, nullptr),
            cudaSuccess);
  expect_out_of_bounds("cub::DeviceRadixSort values");
  EXPECT_EQ(keys.selector, 0);
  EXPECT_EQ(rig.k0.download<uint32_t>(), input);
  EXPECT_EQ(short_values.download<uint32_t>(), std::vector<uint32_t>(32, 9));
}

TEST(CubSortPairs, OverlappingBuffersAreInvalid) {
  SortRig rig(random_keys(16, 8, 8), 3);
  cub::DoubleBuffer<uint32_t> keys(rig.k0.as<uint32_t>(), rig.k0.as<uint32_t>());
  cub::DoubleBuffer<uint32_t> values(rig.v0.as<uint32_t>(), rig.v1.as<uint32_t>());
  size_t bytes = query(16, 3);
  EXPECT_EQ(cub::sort_pairs_u32(rig.temp.as<void>(), bytes, keys, values, 16, 0, 3, nullptr),
            cudaErrorInvalidValue);
}

}  // namespace
}  // namespace bufferlab::sim::device
