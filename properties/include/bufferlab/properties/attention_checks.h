// The bit-exact invariance properties of attention (docs/spec/attention.md §4, the issue's
// "bit for bit" list; ops/attention.h pins the reductions), each one body over any Backend so
// the CPU property suite and the kernel tests (cuda-sim) share it. Every body runs the harness
// (oracle/attention_harness.h) on a case and on its transformation and returns "" when every
// compared bit agrees, else the first difference ("what [row, col]: a vs b").
//
// Each takes `plant`: true runs the planted-bug twin instead — the comparison made with inputs
// that really differ in a way the property forbids — and its result must be non-empty (the
// check can fail). The twin of each body is named next to it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bufferlab/core/backend.h"
#include "bufferlab/oracle/attention_harness.h"
#include "bufferlab/oracle/attention_inputs.h"

namespace bufferlab::gen {

// "" or the first element whose bits differ, as "what[row, col]: 0x.. vs 0x..".
std::string attn_bits_differ(const std::vector<uint16_t>& a, const std::vector<uint16_t>& b,
                             uint64_t cols, const std::string& what);
std::string attn_bits_differ(const std::vector<float>& a, const std::vector<float>& b,
                             uint64_t cols, const std::string& what);

// Rows [r0, r0 + n) of a row-major [·, cols] vector.
template <class T>
std::vector<T> attn_rows(const std::vector<T>& v, uint64_t cols, uint64_t r0, uint64_t n) {
  return std::vector<T>(v.begin() + static_cast<std::ptrdiff_t>(r0 * cols),
                        v.begin() + static_cast<std::ptrdiff_t>((r0 + n) * cols));
}

// Prefill in two chunks, [0, a) then [a, L) with the first chunk's cache, equals one shot (Q
// copy, K/V scratch, core output, gated output, the final cache). Twin: the second chunk starts
// from the cache WITHOUT the first chunk's keys.
std::string attn_chunk_invariance(Backend& b, const oracle::AttnCase& c, uint64_t a, bool plant);
// Every prefill stream and every live decode row of a pass equals it run alone (decode: output,
// partials, gated). Twin: the lone run of stream 0 (or decode row 0) has its own token's V
// changed.
std::string attn_alone_invariance(Backend& b, const oracle::AttnCase& c, bool plant);
// Renumbering the physical blocks (cache contents moved, tables and slots rewritten) changes no
// output bit, and the caches agree through the renumbering. Twin: the cache contents moved
// but the tables and slots kept (the logical block used as the physical one).
std::string attn_block_numbering_invariance(Backend& b, const oracle::AttnCase& c, uint64_t seed,
                                            bool plant);
// Decode at the same R with only the first n rows live: those rows' outputs (and partials) keep
// their bits. Twin: row 0's own V changed in the smaller batch.
std::string attn_live_batch_invariance(Backend& b, const oracle::AttnCase& c, uint64_t n,
                                       bool plant);
// Keys outside every row's causal or sliding range set to NaN change no bit of any row that
// cannot see them: cached prefix keys below every window (sliding), and the last token of each
// prefill stream (K and V) for the rows before it. Twin: NaN in the K of each sequence's first
// key of the pass, which its own row always sees.
std::string attn_invisible_keys_invariance(Backend& b, const oracle::AttnCase& c, bool plant);
// The prefill tokens decoded (one decode row each, same qkv row, positions and block table, on
// the cache the prefill left) write the same K and V bits into the cache, and — one split —
// the same output bits (the Q staged by the decode core equals the Q copy). Twin: the decode
// rows get positions + 1.
std::string attn_staged_equals_decoded(Backend& b, const oracle::AttnCase& c, bool plant);
// MRoPE with t = h = w (pattern equal) equals the same config with 1-D RoPE, bit for bit.
// Twin: the MRoPE case's positions with t ≠ h ≠ w (pattern distinct). `spec`: an MRoPE config.
std::string attn_mrope_equal_is_1d(Backend& b, const oracle::AttnCaseSpec& spec, uint64_t seed,
                                   bool plant);
// Without qk_norm, the dimensions ≥ rotary_dim of every staged Q and K head (Q copy, K scratch,
// decode-written cache keys) are the qkv bits. Twin: the rotated dimensions are checked too (at
// a position > 0 the first pair turns by that many radians).
std::string attn_rotary_pass_through(Backend& b, const oracle::AttnCase& c, bool plant);
// Decode padding rows read nothing and write zeros: with rows [n, live) made padding, NaN in
// every cache block their metadata addresses (and no live row owns) changes no live row's bit;
// padding rows' outputs are +0 (one split) or partial slots o = +0, m = −inf, l = +0 (split-K),
// and their merged rows +0. Twin: the NaN goes into live row 0's blocks (its cached prefix).
std::string attn_padding_rows(Backend& b, const oracle::AttnCase& c, uint64_t n, bool plant);

}  // namespace bufferlab::gen
