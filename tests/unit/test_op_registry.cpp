// The op registry (core/op_registry.h): the kernel mutants and the ops they change, the
// static / kernel split of the mutants, the generated mutant error text, and the refusal of a
// descriptor without a kernel (named op, backend and params()).
#include <gtest/gtest.h>

#include <string>
#include <variant>
#include <vector>

#include "bufferlab/core/backend.h"
#include "bufferlab/core/buffer_sizes.h"
#include "bufferlab/core/layout.h"
#include "bufferlab/core/op_registry.h"
#include "bufferlab/cpu/cpu_backend.h"

namespace bufferlab {
namespace {

std::vector<std::string> methods_changed_by(Mutant m) {
  std::vector<std::string> out;
  for (const OpInfo& op : ops_changed_by(m)) out.emplace_back(op.method);
  return out;
}

TEST(OpRegistry, EveryKernelMutantChangesExactlyItsOp) {
  using V = std::vector<std::string>;
  EXPECT_EQ(methods_changed_by(Mutant::B14), V{"moe_router"});
  EXPECT_EQ(methods_changed_by(Mutant::M_TIE), V{"moe_topk"});
  EXPECT_EQ(methods_changed_by(Mutant::M_GROUP), V{"moe_topk"});
  EXPECT_EQ(methods_changed_by(Mutant::B13), V{"mhc_post"});
  EXPECT_EQ(methods_changed_by(Mutant::M_SKCOL), V{"mhc_pre"});
  EXPECT_EQ(methods_changed_by(Mutant::M_GDNCARRY), V{"gdn_chunk"});
  EXPECT_EQ(methods_changed_by(Mutant::M_SSDSTATE), V{"mamba2_chunk"});
  EXPECT_EQ(methods_changed_by(Mutant::M_SKORDER), V{"mhc_pre"});
  // The attention mutants change the kernels whose code they alter (docs/spec/bug-catalogue.md).
  EXPECT_EQ(methods_changed_by(Mutant::M_CAUSAL), (V{"attn_prefill", "attn_decode"}));
  EXPECT_EQ(methods_changed_by(Mutant::M_GQA), (V{"attn_prefill", "attn_decode"}));
  EXPECT_EQ(methods_changed_by(Mutant::M_MERGE), V{"splitk_merge"});
  EXPECT_EQ(methods_changed_by(Mutant::M_BLOCK), (V{"attn_prefill", "attn_decode"}));
  EXPECT_EQ(methods_changed_by(Mutant::M_MROPE),
            (V{"attn_stage", "attn_cache_write", "attn_decode"}));
  EXPECT_EQ(methods_changed_by(Mutant::M_SINK), (V{"attn_prefill", "attn_decode", "splitk_merge"}));
  EXPECT_TRUE(methods_changed_by(Mutant::B8).empty());
  EXPECT_TRUE(methods_changed_by(Mutant::none).empty());
}

TEST(OpRegistry, StaticMutantsAreExactlyTheNonKernelOnes) {
  for (Mutant m : all_mutants()) {
    const bool kernel = m == Mutant::B13 || m == Mutant::B14 || m == Mutant::M_TIE ||
                        m == Mutant::M_SKCOL || m == Mutant::M_GDNCARRY ||
                        m == Mutant::M_SSDSTATE || m == Mutant::M_GROUP || m == Mutant::M_SKORDER ||
                        m == Mutant::M_CAUSAL || m == Mutant::M_GQA || m == Mutant::M_MERGE ||
                        m == Mutant::M_BLOCK || m == Mutant::M_MROPE || m == Mutant::M_SINK;
    EXPECT_EQ(is_kernel_mutant(m), kernel) << to_string(m);
    EXPECT_EQ(Backend::is_backend_mutant(m), kernel) << to_string(m);
    EXPECT_EQ(is_static_mutant(m), !kernel) << to_string(m);
  }
  EXPECT_TRUE(Backend::is_backend_mutant(Mutant::none));
  EXPECT_FALSE(is_static_mutant(Mutant::none));
}

TEST(OpRegistry, MutantErrorListsTheKernelMutantsInCatalogueOrder) {
  EXPECT_EQ(kernel_mutant_list(),
            "B13, B14, M-TIE, M-SKCOL, M-GDNCARRY, M-SSDSTATE, M-GROUP, M-SKORDER, M-CAUSAL, "
            "M-GQA, M-MERGE, M-BLOCK, M-MROPE, M-SINK");
  auto backend = make_cpu_backend();
  try {
    backend->set_kernel_mutant(Mutant::B8);
    FAIL() << "B8 accepted as a kernel mutant";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "mutant B8 is not a kernel mutant of this backend (kernel mutants: B13, B14, "
                 "M-TIE, M-SKCOL, M-GDNCARRY, M-SSDSTATE, M-GROUP, M-SKORDER, M-CAUSAL, M-GQA, "
                 "M-MERGE, M-BLOCK, M-MROPE, M-SINK)");
  }
}

TEST(OpRegistry, EveryDescriptorIsAnAlternativeInRegistryOrder) {
  EXPECT_EQ(std::variant_size_v<OpDescriptor>, kNumOps);
  EXPECT_TRUE((std::is_same_v<std::variant_alternative_t<0, OpDescriptor>, FusedAddRmsNormOp>));
  EXPECT_EQ(kOpRegistry.front().type, "FusedAddRmsNormOp");
}

TEST(OpRegistry, ADescriptorWithoutAKernelIsRefusedByName) {
  auto backend = make_cpu_backend();
  const Workspace ws = backend->allocate(Layout::build(BufferSizes{}), 0);
  const MlaAttnOp mla{};
  try {
    backend->execute(ws, mla);
    FAIL() << "MlaAttnOp executed without a kernel";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "cpu backend has no kernel for MlaAttnOp (Backend::mla_attn): " + mla.params());
  }
  int planned = 0;
  for (const OpInfo& op : kOpRegistry) planned += op.status == OpStatus::planned ? 1 : 0;
  EXPECT_EQ(planned, 11);
}

}  // namespace
}  // namespace bufferlab
