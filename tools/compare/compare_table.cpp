// The compare table (compare_table.h): one entry per `bufferlab compare` op.
#include "compare/compare_table.h"

#include <algorithm>

#include <fmt/format.h>

#include "bufferlab/core/op_registry.h"
#include "bufferlab/core/ops/attention.h"
#include "bufferlab/core/ops/embedding.h"
#include "bufferlab/core/ops/ffn.h"
#include "bufferlab/core/ops/fused_add_rmsnorm.h"
#include "bufferlab/core/ops/gdn.h"
#include "bufferlab/core/ops/mamba2.h"
#include "bufferlab/core/ops/mhc.h"
#include "bufferlab/core/ops/moe.h"

namespace bufferlab::cli {
namespace {

// A chain stage naming a real descriptor type (a typo fails to compile).
#define BUFFERLAB_STAGE(Type, stage) \
  ChainStage { (static_cast<void>(sizeof(Type)), #Type), stage }

constexpr ChainStage kRmsNormChain[] = {BUFFERLAB_STAGE(FusedAddRmsNormOp, "")};
constexpr ChainStage kRouterChain[] = {BUFFERLAB_STAGE(MoeRouterOp, "")};
constexpr ChainStage kTopKChain[] = {BUFFERLAB_STAGE(MoeRouterOp, ""),
                                     BUFFERLAB_STAGE(MoeTopKOp, "")};
constexpr ChainStage kExpertsChain[] = {
    BUFFERLAB_STAGE(MoeGatherOp, ""),         BUFFERLAB_STAGE(MoeExpertGemmOp, "gate"),
    BUFFERLAB_STAGE(MoeExpertGemmOp, "up"),   BUFFERLAB_STAGE(SwigluOp, ""),
    BUFFERLAB_STAGE(MoeExpertGemmOp, "down"), BUFFERLAB_STAGE(MoeCombineOp, "")};
constexpr ChainStage kLmHeadChain[] = {BUFFERLAB_STAGE(LmHeadOp, "")};
constexpr ChainStage kMhcPreChain[] = {BUFFERLAB_STAGE(MhcPreOp, "")};
constexpr ChainStage kMhcPostChain[] = {BUFFERLAB_STAGE(MhcPostOp, "")};
constexpr ChainStage kMhcHeadChain[] = {BUFFERLAB_STAGE(MhcHeadOp, "")};
constexpr ChainStage kMhcExpandChain[] = {BUFFERLAB_STAGE(MhcExpandOp, "")};
constexpr ChainStage kMhcLowRankChain[] = {
    BUFFERLAB_STAGE(MhcLowRankSplitOp, "norm"),     BUFFERLAB_STAGE(MhcLowRankSplitOp, "down"),
    BUFFERLAB_STAGE(MhcLowRankSplitOp, "collapse"), BUFFERLAB_STAGE(MhcLowRankSlabOp, "norm"),
    BUFFERLAB_STAGE(MhcLowRankSlabOp, "down"),      BUFFERLAB_STAGE(MhcLowRankSlabOp, "inject"),
    BUFFERLAB_STAGE(MhcLowRankSlabOp, "up"),        BUFFERLAB_STAGE(MhcLowRankSlabOp, "collapse")};
constexpr ChainStage kGdnChain[] = {
    BUFFERLAB_STAGE(GdnConvOp, ""),        BUFFERLAB_STAGE(GdnGatesOp, ""),
    BUFFERLAB_STAGE(GdnChunkOp, "wu"),     BUFFERLAB_STAGE(GdnChunkOp, "state"),
    BUFFERLAB_STAGE(GdnChunkOp, "output"), BUFFERLAB_STAGE(GdnRecurrentOp, ""),
    BUFFERLAB_STAGE(GdnGatedNormOp, "")};
constexpr ChainStage kMamba2Chain[] = {
    BUFFERLAB_STAGE(Mamba2ConvOp, ""),      BUFFERLAB_STAGE(Mamba2ChunkOp, "cumsum"),
    BUFFERLAB_STAGE(Mamba2ChunkOp, "bmm"),  BUFFERLAB_STAGE(Mamba2ChunkOp, "scan"),
    BUFFERLAB_STAGE(Mamba2RecurrentOp, ""), BUFFERLAB_STAGE(Mamba2GatedNormOp, "")};

constexpr ChainStage kAttnPrefillChain[] = {
    BUFFERLAB_STAGE(AttnStageOp, "q_copy"),    BUFFERLAB_STAGE(AttnStageOp, "k_scratch"),
    BUFFERLAB_STAGE(AttnStageOp, "v_scratch"), BUFFERLAB_STAGE(AttnCacheWriteOp, "scratch"),
    BUFFERLAB_STAGE(AttnPrefillOp, ""),        BUFFERLAB_STAGE(AttnGateOp, "")};
constexpr ChainStage kAttnDecodeChain[] = {
    BUFFERLAB_STAGE(AttnCacheWriteOp, "qkv"), BUFFERLAB_STAGE(AttnDecodeOp, ""),
    BUFFERLAB_STAGE(SplitKMergeOp, ""), BUFFERLAB_STAGE(AttnGateOp, "")};

#undef BUFFERLAB_STAGE

constexpr Mutant kGdnSizingMutants[] = {Mutant::B15};

constexpr uint32_t kRoutingOptions = kOptRouterPath | kOptPattern | kOptHash;
constexpr uint32_t kSsmOptions = kOptSequences | kOptSsmPath | kOptZeroState;

constexpr CompareOpEntry kCompareOps[] = {
    {"rmsnorm",
     nullptr,
     kRmsNormChain,
     kOptVariant,
     {},
     NumericFamily::none,
     "fused residual add + RMSNorm, y = r * rsqrt(mean(r^2) + eps) * (1 + w)"},
    {"router",
     compare_router,
     kRouterChain,
     kRoutingOptions,
     {},
     NumericFamily::routing,
     "router GEMM logits = x Wg^T on --path (MoE models)"},
    {"topk",
     compare_topk,
     kTopKChain,
     kRoutingOptions,
     {},
     NumericFamily::routing,
     "router -> top-k selection on --path: ids + weights in scratch, judged on the\n"
     "stored logits (tie-stability bounds, exact ties to the lower index) and, for the\n"
     "chain, against the oracle keys of the exact logits of the router's stored inputs;\n"
     "prints the first token whose selection differs from the oracle's"},
    {"experts",
     compare_experts,
     kExpertsChain,
     0,
     {},
     NumericFamily::experts,
     "routed experts: gather -> gate -> up -> SwiGLU -> down -> combine on seeded\n"
     "routing, every stage judged on its stored inputs (only the selected experts get\n"
     "weights)"},
    {"lm-head",
     compare_lm_head,
     kLmHeadChain,
     0,
     {},
     NumericFamily::none,
     "LM head: logits rows = x W_vocab^T (one row per token)"},
    {"hc-pre",
     compare_mhc_pre,
     kMhcPreChain,
     kOptLogitRange | kOptStreamValues | kOptMhcEps,
     {},
     NumericFamily::mhc,
     "mHC pre step, Sinkhorn form: post, comb (Sinkhorn) and the block input (mHC models\n"
     "with hc_lowrank = 0); comb logits of spread --logit-range"},
    {"hc-post",
     compare_mhc_post,
     kMhcPostChain,
     kOptLogitRange | kOptStreamValues,
     {},
     NumericFamily::mhc,
     "mHC post step, in place on hc_streams (Sinkhorn or low-rank form)"},
    {"hc-head",
     compare_mhc_head,
     kMhcHeadChain,
     kOptStreamValues | kOptMhcEps,
     {},
     NumericFamily::mhc,
     "mHC head before the final norm: hidden_states = sum_i pre_i x_i"},
    {"hc-expand",
     compare_mhc_expand,
     kMhcExpandChain,
     0,
     {},
     NumericFamily::mhc,
     "mHC expand: every stream = the embedding row (exact)"},
    {"hc-lowrank",
     compare_mhc_lowrank,
     kMhcLowRankChain,
     kOptStreamValues | kOptLowRankPath,
     {},
     NumericFamily::mhc,
     "mHC low-rank pre step (hc_lowrank > 0), stage by stage: norm -> down -> collapse\n"
     "(split path, T <= 64) or norm -> down -> inject -> up -> collapse in slabs of\n"
     "<= 2048 rows (slab GEMM path, T > 64); --path split|slab forces one (split: T <= 64)"},
    {"gdn", compare_gdn, kGdnChain, kSsmOptions | kOptAlpha | kOptBeta | kOptParallelKeys,
     kGdnSizingMutants, NumericFamily::gdn,
     "Gated DeltaNet (GDN models): conv1d -> gates -> chunked core wu -> state -> output\n"
     "(kd = vd = 128) or the token recurrence -> gated norm, over --streams N\n"
     "co-dispatched sequences of --tokens each, every stage judged on its stored inputs"},
    {"ssd",
     compare_mamba2,
     kMamba2Chain,
     kSsmOptions | kOptDt,
     {},
     NumericFamily::ssd,
     "Mamba-2 (Mamba models): conv1d -> chunked SSD cumsum -> bmm -> scan per sequence\n"
     "(one after another) or the recurrence -> gated norm"},
    {"attn-prefill",
     compare_attn_prefill,
     kAttnPrefillChain,
     kOptSequences | kOptContext | kOptChunk | kOptLayer,
     {},
     NumericFamily::attention,
     "grouped-query attention prefill (full/sliding layers): Q copy, K, V scratch\n"
     "(qk_norm + RoPE) -> cache write -> varlen core over the --context keys cached in\n"
     "the paged KV cache and the chunk -> gate, --streams N sequences of --tokens each,\n"
     "--chunk C: in chunks of C tokens; every stage judged on its stored inputs"},
    {"attn-decode",
     compare_attn_decode,
     kAttnDecodeChain,
     kOptContext | kOptLayer,
     {},
     NumericFamily::attention,
     "grouped-query attention decode: --tokens decode rows of --context cached keys each:\n"
     "cache write (qk_norm + RoPE on the qkv rows) -> core (split-K + merge, or one\n"
     "split) -> gate; every stage judged on its stored inputs"},
};

constexpr NumericFamilyInfo kNumericFamilies[] = {
    {NumericFamily::routing, "routing", "routing"},
    {NumericFamily::experts, "experts", "expert"},
    {NumericFamily::mhc, "mhc", "mHC"},
    {NumericFamily::gdn, "gdn", "GDN"},
    {NumericFamily::ssd, "ssd", "SSD"},
    {NumericFamily::attention, "attention", "attention"},
};

// "a, b and c".
std::string and_list(const std::vector<std::string_view>& items) {
  std::string s;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) s += i + 1 == items.size() ? " and " : ", ";
    s += items[i];
  }
  return s;
}

}  // namespace

bool CompareOpEntry::changes_kernels(Mutant m) const {
  for (const ChainStage& stage : chain)
    for (const OpInfo& op : kOpRegistry)
      if (op.type == stage.op && op.changed_by(m)) return true;
  return false;
}

std::vector<Mutant> CompareOpEntry::kernel_mutants() const {
  std::vector<Mutant> out;
#define BUFFERLAB_KERNEL_MUTANT_OF_CHAIN(name) \
  if (changes_kernels(Mutant::name)) out.push_back(Mutant::name);
  BUFFERLAB_MUTANTS(BUFFERLAB_KERNEL_MUTANT_OF_CHAIN)
#undef BUFFERLAB_KERNEL_MUTANT_OF_CHAIN
  return out;
}

bool CompareOpEntry::accepts(Mutant m) const {
  return changes_kernels(m) || std::ranges::find(sizing_mutants, m) != sizing_mutants.end();
}

std::span<const CompareOpEntry> compare_ops() { return kCompareOps; }

const CompareOpEntry* find_compare_op(std::string_view name) {
  for (const CompareOpEntry& e : kCompareOps)
    if (e.name == name) return &e;
  return nullptr;
}

std::string compare_op_names(std::string_view separator) {
  std::string s;
  for (const CompareOpEntry& e : kCompareOps) {
    if (!s.empty()) s += separator;
    s += e.name;
  }
  return s;
}

std::string compare_ops_reading(uint32_t options) {
  std::vector<std::string_view> names;
  for (const CompareOpEntry& e : kCompareOps)
    if ((e.options & options) != 0) names.push_back(e.name);
  return and_list(names);
}

std::string compare_ops_help() {
  // The help lines start past the longest op name.
  size_t width = 0;
  for (const CompareOpEntry& e : kCompareOps) width = std::max(width, e.name.size());
  const std::string indent(width + 3, ' ');
  std::string s = "ops:\n";
  for (const CompareOpEntry& e : kCompareOps) {
    std::string help(e.help);
    for (size_t at = help.find('\n'); at != std::string::npos; at = help.find('\n', at + 1))
      help.replace(at, 1, "\n" + indent);
    s += fmt::format("  {:<{}} {}\n", e.name, width, help);
  }
  return s;
}

std::span<const NumericFamilyInfo> numeric_families() { return kNumericFamilies; }

const NumericFamilyInfo* find_numeric_family(std::string_view name) {
  for (const NumericFamilyInfo& f : kNumericFamilies)
    if (f.name == name) return &f;
  return nullptr;
}

std::vector<Mutant> compare_kernel_mutants() {
  std::vector<Mutant> out;
  for (const NumericFamilyInfo& f : kNumericFamilies) {
    std::vector<Mutant> family;
    for (const CompareOpEntry& e : kCompareOps)
      if (e.family == f.family)
        for (Mutant m : e.kernel_mutants())
          if (std::ranges::find(family, m) == family.end()) family.push_back(m);
    std::ranges::sort(family);
    out.insert(out.end(), family.begin(), family.end());
  }
  return out;
}

NumericFamily family_of_kernel_mutant(Mutant m) {
  for (const CompareOpEntry& e : kCompareOps)
    if (e.changes_kernels(m)) return e.family;
  return NumericFamily::none;
}

std::string compare_ops_accepting(Mutant m) {
  std::string s;
  for (const CompareOpEntry& e : kCompareOps)
    if (e.accepts(m)) s += (s.empty() ? "" : ", ") + std::string(e.name);
  return s;
}

}  // namespace bufferlab::cli
