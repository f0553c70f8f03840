// Which fields the config generator ties together, and why (issue 15: "the generators vary
// independently every field the validation lets vary independently").
//
// The test draws a fixed-seed sample of generated configs and scans it for relations that
// hold in EVERY draw, of three forms between the integer (and boolean) fields of ModelConfig:
//   presence  "A > 0 => B > 0"      (A and B of different mechanisms, see kMechanism)
//   divides   "B | A"               (whenever B > 0; B > 1 somewhere A > 0)
//   sum       "A = B + C"           (whenever B, C > 0)
// The set found must equal kRemainingTies below: a tie silently added to the generator shows
// up as a new relation, a tie removed (or a reason that no longer holds) as a missing one.
// Presence ties inside one mechanism (the GDN fields are drawn together, or none) are not
// scanned: a mechanism's fields without its switch are read by no op (docs/spec/buffers.md
// §5), and validation pairs most of them (§1).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <rapidcheck.h>

#include "bufferlab/properties/generators.h"

namespace bufferlab {
namespace {

struct Tie {
  const char* relation;  // as the scan prints it
  const char* reason;
};

// Every tie the generator keeps. Each is either a validation rule of docs/spec/buffers.md §1
// (the generator draws the quotient instead of rejecting draws) or a stated choice.
const std::vector<Tie> kRemainingTies = {
    {"num_key_value_heads | num_attention_heads", "validation: nq % nkv == 0 (§1)"},
    {"o_groups | num_attention_heads", "validation: o_groups > 0 with nq % o_groups != 0 (§1)"},
    {"linear_num_key_heads | linear_num_value_heads", "validation: nv % nk == 0 (§1)"},
    {"n_groups | mamba_num_heads", "validation: mamba_num_heads % max(n_groups, 1) == 0 (§1)"},
    {"index_compress_ratio | index_topk",
     "validation: index_topk % index_compress_ratio == 0 when the ratio is > 0 (§1)"},
    {"router_groups | num_experts",
     "validation: num_experts % router_groups == 0 when router_groups > 1 (docs/spec/numerics.md "
     "§2)"},
};

// The mechanism each field belongs to; presence ties are scanned only across mechanisms.
const std::map<std::string, std::string> kMechanism = {
    {"hidden_size", "base"},
    {"intermediate_size", "base"},
    {"vocab_size", "base"},
    {"num_hidden_layers", "base"},
    {"num_attention_heads", "attention"},
    {"num_key_value_heads", "attention"},
    {"head_dim", "attention"},
    {"attn_gated", "attention"},
    {"sliding_window", "attention"},
    {"rope_original_max_position", "attention"},
    {"rope_interleaved", "attention"},
    {"rope_truncate", "attention"},
    {"qk_norm", "attention"},
    {"attn_sinks", "attention"},
    {"full_attention_interval", "gdn"},
    {"linear_num_key_heads", "gdn"},
    {"linear_key_head_dim", "gdn"},
    {"linear_num_value_heads", "gdn"},
    {"linear_value_head_dim", "gdn"},
    {"linear_conv_kernel_dim", "gdn"},
    {"num_experts", "moe"},
    {"num_experts_per_tok", "moe"},
    {"moe_intermediate_size", "moe"},
    {"shared_expert_intermediate_size", "moe"},
    {"zero_expert_num", "moe"},
    {"moe_latent_size", "moe"},
    {"num_hash_layers", "moe"},
    {"router_groups", "moe"},
    {"router_topk_groups", "moe"},
    {"first_k_dense", "moe"},
    {"moe_layer_freq", "moe"},
    {"norm_topk_prob", "moe"},
    {"use_routing_bias", "moe"},
    {"mamba_num_heads", "mamba"},
    {"mamba_head_dim", "mamba"},
    {"ssm_state_size", "mamba"},
    {"n_groups", "mamba"},
    {"conv_kernel", "mamba"},
    {"kv_lora_rank", "mla"},
    {"q_lora_rank", "mla"},
    {"qk_rope_head_dim", "mla"},
    {"qk_nope_head_dim", "mla"},
    {"v_head_dim", "mla"},
    {"o_groups", "grouped_o"},
    {"o_lora_rank", "grouped_o"},
    {"hc_mult", "mhc"},
    {"hc_sinkhorn_iters", "mhc"},
    {"hc_lowrank", "mhc"},
    {"index_n_heads", "indexer"},
    {"index_head_dim", "indexer"},
    {"index_topk", "indexer"},
    {"index_compress_ratio", "indexer"},
    {"adapter_max_rank", "lora"},
    {"mrope_interleaved", "mrope"},
};

struct Field {
  std::string name;
  bool is_bool;
};

std::vector<Field> fields() {
  std::vector<Field> out;
#define BUFFERLAB_TIE_INT(name, def) out.push_back({#name, false});
#define BUFFERLAB_TIE_BOOL(name, def) out.push_back({#name, true});
  BUFFERLAB_CONFIG_INT_FIELDS(BUFFERLAB_TIE_INT)
  BUFFERLAB_CONFIG_BOOL_FIELDS(BUFFERLAB_TIE_BOOL)
#undef BUFFERLAB_TIE_BOOL
#undef BUFFERLAB_TIE_INT
  return out;
}

std::vector<uint64_t> values(const ModelConfig& c) {
  std::vector<uint64_t> out;
#define BUFFERLAB_TIE_VALUE(name, def) out.push_back(static_cast<uint64_t>(c.name));
  BUFFERLAB_CONFIG_INT_FIELDS(BUFFERLAB_TIE_VALUE)
  BUFFERLAB_CONFIG_BOOL_FIELDS(BUFFERLAB_TIE_VALUE)
#undef BUFFERLAB_TIE_VALUE
  return out;
}

// A fixed-seed sample of the generator (the nominal size, as the property tests draw).
std::vector<std::vector<uint64_t>> sample(size_t n) {
  std::vector<std::vector<uint64_t>> out;
  const rc::Gen<ModelConfig> g = gen::valid_config();
  for (size_t i = 0; i < n; ++i)
    out.push_back(values(g(rc::Random(0x7135 + i), rc::kNominalSize).value()));
  return out;
}

// Every relation of the three forms that holds in every draw and is not trivially true.
std::set<std::string> relations_found(const std::vector<std::vector<uint64_t>>& draws) {
  const std::vector<Field> f = fields();
  const size_t n = f.size();
  std::set<std::string> found;
  for (size_t a = 0; a < n; ++a) {
    for (size_t b = 0; b < n; ++b) {
      if (a == b) continue;
      // presence, across mechanisms
      if (kMechanism.at(f[a].name) != kMechanism.at(f[b].name)) {
        bool holds = true, a_on = false, b_off = false;
        for (const auto& d : draws) {
          a_on = a_on || d[a] > 0;
          b_off = b_off || d[b] == 0;
          if (d[a] > 0 && d[b] == 0) holds = false;
        }
        if (holds && a_on && b_off) found.insert(f[a].name + " > 0 => " + f[b].name + " > 0");
      }
      // divides
      if (!f[a].is_bool && !f[b].is_bool) {
        bool holds = true, nontrivial = false;
        for (const auto& d : draws) {
          if (d[b] == 0) continue;
          if (d[a] % d[b] != 0) holds = false;
          if (d[a] > 0 && d[b] > 1) nontrivial = true;
        }
        if (holds && nontrivial) found.insert(f[b].name + " | " + f[a].name);
      }
    }
  }
  // sum
  for (size_t a = 0; a < n; ++a) {
    if (f[a].is_bool) continue;
    for (size_t b = 0; b < n; ++b) {
      if (b == a || f[b].is_bool) continue;
      for (size_t c = b + 1; c < n; ++c) {
        if (c == a || f[c].is_bool) continue;
        bool holds = true, nontrivial = false;
        for (const auto& d : draws) {
          if (d[b] == 0 || d[c] == 0) continue;
          nontrivial = true;
          if (d[a] != d[b] + d[c]) {
            holds = false;
            break;
          }
        }
        if (holds && nontrivial) found.insert(f[a].name + " = " + f[b].name + " + " + f[c].name);
      }
    }
  }
  return found;
}

TEST(GeneratorTies, EveryFieldHasAMechanism) {
  for (const Field& f : fields()) EXPECT_EQ(kMechanism.count(f.name), 1u) << f.name;
}

TEST(GeneratorTies, TheTiesFoundAreExactlyTheListedOnes) {
  const std::set<std::string> found = relations_found(sample(3000));
  std::set<std::string> listed;
  for (const Tie& t : kRemainingTies) listed.insert(t.relation);
  for (const std::string& r : found)
    EXPECT_EQ(listed.count(r), 1u) << "a tie the list does not state (add it with a reason, or "
                                      "untie it in properties/src/generators.cpp): "
                                   << r;
  for (const std::string& r : listed)
    EXPECT_EQ(found.count(r), 1u) << "a listed tie the generator no longer keeps: " << r;
}

// The scan can see the tie issue 15 removed: MLA's head_dim = nope + rope, planted on the
// sample as the old generator drew it.
TEST(GeneratorTies, TheScanSeesThePlantedMlaHeadDimTie) {
  std::vector<std::vector<uint64_t>> draws = sample(3000);
  const std::vector<Field> f = fields();
  auto index = [&](const std::string& name) {
    return static_cast<size_t>(
        std::find_if(f.begin(), f.end(), [&](const Field& x) { return x.name == name; }) -
        f.begin());
  };
  const size_t hd = index("head_dim"), nope = index("qk_nope_head_dim"),
               rope = index("qk_rope_head_dim"), kvl = index("kv_lora_rank");
  for (auto& d : draws)
    if (d[kvl] > 0) d[hd] = d[nope] + d[rope];
  const std::set<std::string> found = relations_found(draws);
  EXPECT_EQ(found.count("head_dim = qk_rope_head_dim + qk_nope_head_dim"), 1u);
  EXPECT_EQ(relations_found(sample(3000)).count("head_dim = qk_rope_head_dim + qk_nope_head_dim"),
            0u);
}

}  // namespace
}  // namespace bufferlab
