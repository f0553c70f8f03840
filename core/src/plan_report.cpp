// plan_json and the registry-completeness check.
#include "bufferlab/core/plan_report.h"

#include <set>

#include "bufferlab/core/checked.h"

namespace bufferlab {

std::vector<std::pair<const char*, uint64_t>> sub_layout_entries(const SubLayoutParams& p) {
  return {{"m_pad", p.m_pad},
          {"k_max", p.k_max},
          {"R", p.R},
          {"max_blocks", p.max_blocks},
          {"pos_streams", p.pos_streams},
          {"moe_scratch", p.moe_scratch},
          {"meta_base", p.meta_base},
          {"logits_tokens", p.logits_tokens},
          {"splitk_splits", p.splitk_splits},
          {"splitk_slots", p.splitk_slots},
          {"gdn_chunks", p.gdn_chunks},
          {"ssd_chunks", p.mamba2_chunks}};
}

nlohmann::json plan_json(const BufferSizes& sizes, const Layout& layout, const PlanContext& ctx) {
  nlohmann::json buffers = nlohmann::json::array();
  for (const auto& info : kBufferRegistry) {
    const uint64_t bytes = sizes.bytes(info.id);
    const LayoutEntry e = layout.entry(info.id);
    nlohmann::json b = {{"name", info.name},
                        {"bytes", bytes},
                        {"offset", nullptr},
                        {"element", to_string(info.element)},
                        {"doc", info.doc}};
    if (!e.is_null()) b["offset"] = e.offset;
    buffers.push_back(std::move(b));
  }
  nlohmann::json sub_layout = nlohmann::json::object();
  for (const auto& [key, value] : sub_layout_entries(sizes.params)) sub_layout[key] = value;
  return {
      {"model", ctx.model},
      {"run_shape",
       {{"max_batch_tokens", ctx.shape.max_batch_tokens},
        {"max_seq_len", ctx.shape.max_seq_len},
        {"kv_block_size", ctx.shape.kv_block_size},
        {"max_batch_size", ctx.shape.max_batch_size}}},
      {"target",
       {{"name", ctx.target.name},
        {"sm_count", ctx.target.sm_count},
        {"splitk", ctx.target.splitk_string()},
        {"q2_dequant", ctx.target.q2_dequant},
        {"q2_mmq", ctx.target.q2_mmq}}},
      {"sizing", sizes.sizing.to_string()},
      {"alignment", layout.alignment()},
      {"redzone", layout.redzone()},
      {"sub_layout", sub_layout},
      {"buffers", buffers},
      {"total_bytes", sizes.total_bytes()},
      {"arena_bytes", layout.arena_bytes()},
  };
}

std::vector<std::string> registry_gaps(const BufferSizes& sizes, const Layout& layout,
                                       const nlohmann::json& plan) {
  std::vector<std::string> gaps;
  std::set<std::string> in_layout, in_json;
  for (const auto& e : layout.entries()) in_layout.insert(std::string(buffer_name(e.id)));
  if (plan.contains("buffers"))
    for (const auto& b : plan["buffers"]) in_json.insert(b.value("name", ""));

  Size field_sum = 0;
  for (const auto& info : kBufferRegistry) {
    const std::string name(info.name);
    const uint64_t bytes = sizes.bytes(info.id);
    field_sum += bytes;
    if (!in_layout.count(name)) gaps.push_back(name + ": missing from the layout");
    if (!in_json.count(name)) gaps.push_back(name + ": missing from the plan JSON");
    if (layout.entry(info.id).bytes != bytes && in_layout.count(name))
      gaps.push_back(name + ": layout holds " + std::to_string(layout.entry(info.id).bytes) +
                     " bytes, BufferSizes says " + std::to_string(bytes));
  }
  if (sizes.total_bytes() != field_sum.value())
    gaps.push_back("total_bytes() = " + std::to_string(sizes.total_bytes()) +
                   " but the fields sum to " + std::to_string(field_sum.value()));
  if (layout.allocated_bytes() != field_sum.value())
    gaps.push_back("the layout allocates " + std::to_string(layout.allocated_bytes()) +
                   " bytes but the fields sum to " + std::to_string(field_sum.value()));
  return gaps;
}

}  // namespace bufferlab
