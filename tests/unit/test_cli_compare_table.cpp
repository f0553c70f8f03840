// The compare table (tools/compare/compare_table.h), in-process: the op names the CLI lists,
// the mutant -> op map `compare` refuses by, the kernel mutants in the order the help and the
// errors list them, and the `fuzz --numeric` families with the mutants each one runs.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "compare/compare_table.h"

namespace {

using namespace bufferlab;
using namespace bufferlab::cli;

TEST(CliCompareTable, OpNamesInTheOrderTheCliListsThem) {
  EXPECT_EQ(compare_op_names(", "),
            "rmsnorm, router, topk, experts, lm-head, hc-pre, hc-post, hc-head, hc-expand, "
            "hc-lowrank, gdn, ssd, attn-prefill, attn-decode");
  std::set<std::string_view> names;
  for (const CompareOpEntry& e : compare_ops()) {
    EXPECT_TRUE(names.insert(e.name).second) << e.name;
    EXPECT_FALSE(e.chain.empty()) << e.name;
    EXPECT_EQ(find_compare_op(e.name), &e);
    // Only rmsnorm is run by cmd_compare.cpp itself.
    EXPECT_EQ(e.runner == nullptr, e.name == "rmsnorm") << e.name;
  }
  EXPECT_EQ(find_compare_op("softmax"), nullptr);
}

TEST(CliCompareTable, MutantToOpMap) {
  EXPECT_EQ(compare_ops_accepting(Mutant::B14), "router, topk");
  EXPECT_EQ(compare_ops_accepting(Mutant::M_TIE), "topk");
  EXPECT_EQ(compare_ops_accepting(Mutant::B13), "hc-post");
  EXPECT_EQ(compare_ops_accepting(Mutant::M_SKCOL), "hc-pre");
  EXPECT_EQ(compare_ops_accepting(Mutant::M_SKORDER), "hc-pre");
  EXPECT_EQ(compare_ops_accepting(Mutant::M_GDNCARRY), "gdn");
  EXPECT_EQ(compare_ops_accepting(Mutant::B15), "gdn");
  EXPECT_EQ(compare_ops_accepting(Mutant::M_SSDSTATE), "ssd");
  // The attention mutants: the chains whose kernels they change.
  for (Mutant m :
       {Mutant::M_CAUSAL, Mutant::M_GQA, Mutant::M_BLOCK, Mutant::M_MROPE, Mutant::M_SINK})
    EXPECT_EQ(compare_ops_accepting(m), "attn-prefill, attn-decode") << to_string(m);
  EXPECT_EQ(compare_ops_accepting(Mutant::M_MERGE), "attn-decode");
  for (Mutant m : {Mutant::B1, Mutant::B4, Mutant::B9, Mutant::B12})
    EXPECT_EQ(compare_ops_accepting(m), "") << to_string(m);
}

TEST(CliCompareTable, KernelMutantsByFamilyThenMutantOrder) {
  const std::vector<Mutant> expected{
      Mutant::B14,       Mutant::M_TIE,      Mutant::M_GROUP,    Mutant::B13,      Mutant::M_SKCOL,
      Mutant::M_SKORDER, Mutant::M_GDNCARRY, Mutant::M_SSDSTATE, Mutant::M_CAUSAL, Mutant::M_GQA,
      Mutant::M_MERGE,   Mutant::M_BLOCK,    Mutant::M_MROPE,    Mutant::M_SINK};
  EXPECT_EQ(compare_kernel_mutants(), expected);
}

TEST(CliCompareTable, NumericFamiliesAndTheirMutants) {
  std::string names;
  for (const NumericFamilyInfo& f : numeric_families())
    names += (names.empty() ? "" : ", ") + std::string(f.name);
  EXPECT_EQ(names, "routing, experts, mhc, gdn, ssd, attention");
  EXPECT_EQ(family_of_kernel_mutant(Mutant::B14), NumericFamily::routing);
  EXPECT_EQ(family_of_kernel_mutant(Mutant::M_TIE), NumericFamily::routing);
  EXPECT_EQ(family_of_kernel_mutant(Mutant::B13), NumericFamily::mhc);
  EXPECT_EQ(family_of_kernel_mutant(Mutant::M_SKCOL), NumericFamily::mhc);
  EXPECT_EQ(family_of_kernel_mutant(Mutant::M_SKORDER), NumericFamily::mhc);
  EXPECT_EQ(family_of_kernel_mutant(Mutant::M_GDNCARRY), NumericFamily::gdn);
  EXPECT_EQ(family_of_kernel_mutant(Mutant::M_SSDSTATE), NumericFamily::ssd);
  EXPECT_EQ(family_of_kernel_mutant(Mutant::B15), NumericFamily::none);  // a sizing mutant
}

TEST(CliCompareTable, OptionReadersNameTheOpsInTheErrors) {
  EXPECT_EQ(compare_ops_reading(kOptLogitRange), "hc-pre and hc-post");
  EXPECT_EQ(compare_ops_reading(kOptStreamValues), "hc-pre, hc-post, hc-head and hc-lowrank");
  EXPECT_EQ(compare_ops_reading(kOptMhcEps), "hc-pre and hc-head");
  EXPECT_EQ(compare_ops_reading(kOptRouterPath | kOptLowRankPath), "router, topk and hc-lowrank");
  EXPECT_EQ(compare_ops_reading(kOptZeroState), "gdn and ssd");
  EXPECT_EQ(compare_ops_reading(kOptDt), "ssd");
}

}  // namespace
