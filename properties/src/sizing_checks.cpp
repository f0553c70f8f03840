// Bodies of the sizing/layout properties (see sizing_checks.h).
#include "bufferlab/properties/sizing_checks.h"

#include <algorithm>
#include <string>

#include "bufferlab/core/plan_report.h"

namespace bufferlab::checks {
namespace {

std::string name(BufferId id) { return std::string(buffer_name(id)); }

// Expected "null when 0" per docs/spec/buffers.md §3, from the config alone: returns true when the
// field is a null-when-0 field whose feature is off. Fields not listed are never null.
bool expected_null(BufferId id, const ModelConfig& c, const Target& t) {
  const bool moe = c.num_experts > 0;
  const bool lora = c.adapter_max_rank > 0;
  switch (id) {
    case BufferId::gdn_fla_scratch:
      return !(c.linear_num_value_heads > 0 && c.linear_key_head_dim == 128 &&
               c.linear_value_head_dim == 128);
    case BufferId::ssd_scratch:
      return !(c.mamba_num_heads > 0 && c.ssm_state_size > 0);
    case BufferId::ffn_act_q8:
    case BufferId::ffn_act_a:
    case BufferId::ffn_act_scale:
      return moe;
    case BufferId::lora_xa:
    case BufferId::lora_delta:
    case BufferId::lora_seq_slot:
      return !lora;
    case BufferId::lora_hact:
      // m·intermediate_size·2: also 0 for an adapter on a model without a dense FFN width.
      return !lora || c.intermediate_size == 0;
    case BufferId::q2_dequant_scratch:
      return !t.q2_dequant;
    case BufferId::q2_act_q8:
      return !t.q2_mmq;
    default:
      return false;
  }
}

}  // namespace

Violations layout_disjoint_and_aligned(const std::vector<LayoutEntry>& entries, uint64_t alignment,
                                       uint64_t redzone, uint64_t arena_bytes) {
  Violations v;
  std::vector<LayoutEntry> placed;
  for (const auto& e : entries) {
    if (e.is_null()) continue;
    if (e.offset % alignment != 0)
      v.push_back(name(e.id) + " at offset " + std::to_string(e.offset) + " is not aligned to " +
                  std::to_string(alignment));
    if (e.end() + redzone > arena_bytes)
      v.push_back(name(e.id) + " ends at " + std::to_string(e.end() + redzone) +
                  " past the arena of " + std::to_string(arena_bytes) + " bytes");
    placed.push_back(e);
  }
  std::sort(placed.begin(), placed.end(),
            [](const LayoutEntry& a, const LayoutEntry& b) { return a.offset < b.offset; });
  for (size_t i = 1; i < placed.size(); ++i) {
    const auto& a = placed[i - 1];
    const auto& b = placed[i];
    if (a.end() + redzone > b.offset)
      v.push_back(name(a.id) + " [" + std::to_string(a.offset) + ", " +
                  std::to_string(a.end() + redzone) + ") overlaps " + name(b.id) + " at " +
                  std::to_string(b.offset));
  }
  return v;
}

Violations null_fields_as_specified(const ModelConfig& c, const Target& t, const BufferSizes& s) {
  Violations v;
  for (const auto& info : kBufferRegistry) {
    const bool null = s.bytes(info.id) == 0;
    const bool want_null = expected_null(info.id, c, t);
    if (null && !want_null) v.push_back(name(info.id) + " is 0 bytes but must be > 0");
    if (!null && want_null)
      v.push_back(name(info.id) + " has " + std::to_string(s.bytes(info.id)) +
                  " bytes but its feature is off (null when 0)");
  }
  return v;
}

Violations ledger_complete(const BufferSizes& s, const Layout& layout) {
  return registry_gaps(s, layout, plan_json(s, layout, PlanContext{}));
}

Violations sizes_not_decreasing(const BufferSizes& smaller, const BufferSizes& larger) {
  Violations v;
  for (const auto& info : kBufferRegistry) {
    const uint64_t a = smaller.bytes(info.id), b = larger.bytes(info.id);
    if (b < a)
      v.push_back(name(info.id) + " shrank from " + std::to_string(a) + " to " + std::to_string(b) +
                  " bytes as the run shape grew");
  }
  return v;
}

Violations arena_independent_of_layers(const Layout& a, const Layout& b) {
  if (a.arena_bytes() == b.arena_bytes()) return {};
  Violations v{"arena_bytes changed with num_hidden_layers: " + std::to_string(a.arena_bytes()) +
               " vs " + std::to_string(b.arena_bytes())};
  for (const auto& e : a.entries())
    if (b.entry(e.id).bytes != e.bytes)
      v.push_back(name(e.id) + ": " + std::to_string(e.bytes) + " vs " +
                  std::to_string(b.entry(e.id).bytes));
  return v;
}

namespace {

void append(Violations& all, const std::string& check, const Violations& found) {
  for (const auto& v : found) all.push_back(check + ": " + v);
}

}  // namespace

ModelConfig with_num_hidden_layers(ModelConfig c, uint64_t layers) {
  if (!c.layer_types.empty()) {
    std::vector<LayerType> types;
    for (uint64_t i = 0; i < layers; ++i) types.push_back(c.layer_types[i % c.layer_types.size()]);
    c.layer_types = std::move(types);
  }
  c.num_hidden_layers = layers;
  return c;
}

Violations sizing_case(const ModelConfig& config, const RunShape& shape, const Target& target,
                       Sizing sizing) {
  Violations all;
  const auto sizes = BufferSizes::from_config(config, shape, target, sizing);
  const auto layout = Layout::build(sizes);
  append(all, "layout",
         layout_disjoint_and_aligned(layout.entries(), layout.alignment(), layout.redzone(),
                                     layout.arena_bytes()));
  append(all, "null-fields", null_fields_as_specified(config, target, sizes));
  append(all, "ledger", ledger_complete(sizes, layout));
  const auto deeper = with_num_hidden_layers(config, config.num_hidden_layers * 2 + 1);
  append(all, "layers",
         arena_independent_of_layers(
             layout, Layout::build(BufferSizes::from_config(deeper, shape, target, sizing))));
  RunShape grown = shape;
  grown.max_batch_tokens += 1;
  append(all, "monotone-m",
         sizes_not_decreasing(sizes, BufferSizes::from_config(config, grown, target, sizing)));
  return all;
}

}  // namespace bufferlab::checks
