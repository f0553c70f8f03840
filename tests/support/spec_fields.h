// The 41 fields of docs/spec/buffers.md §3, in order — copied from the spec by hand, so tests
// check the registry and its consumers against the spec rather than against themselves.
#pragma once

#include <string>
#include <vector>

namespace bufferlab::testing {

inline const std::vector<std::string> kSpecFields = {
    "hidden_states",      "residual",      "norm_output",      "qkv_output",
    "attn_output",        "gate_logits",   "gate_logits_f32",  "moe_router_in_f32",
    "moe_output",         "logits",        "ssm_qkvz",         "ssm_ba",
    "ssm_deinterleaved",  "ssm_gates",     "ssm_conv_out_f32", "scratch",
    "expert_gate_out",    "expert_up_out", "expert_down_out",  "splitk_workspace",
    "gdn_fla_scratch",    "ssd_scratch",   "o_latent",         "norm_unit_w",
    "hc_streams",         "hc_post",       "hc_comb",          "hc_lowrank_scratch",
    "qsa_select_scratch", "token_ids",     "ffn_act_q8",       "ffn_act_a",
    "ffn_act_scale",      "fp8_act",       "fp8_act_scale",    "lora_xa",
    "lora_delta",         "lora_hact",     "lora_seq_slot",    "q2_dequant_scratch",
    "q2_act_q8"};

}  // namespace bufferlab::testing
