// QSA indexer descriptors: region offsets from §4.8's 2048-row slab, extents from the slab's
// rows and the indexer dimensions — never from BufferSizes.
#include "bufferlab/core/ops/qsa.h"

#include <string>
#include <utility>

#include "bufferlab/core/checked.h"
#include "bufferlab/core/error.h"
#include "params_text.h"

namespace bufferlab {
namespace {

TensorRef region(uint64_t offset, std::vector<uint64_t> shape, DType t) {
  return TensorRef{Space::arena, BufferId::qsa_select_scratch, offset, std::move(shape), t};
}

using detail::kv;

}  // namespace

QsaScratchLayout QsaScratchLayout::make(const ModelConfig& c, uint64_t max_seq_len) {
  if (c.index_topk == 0 || c.index_compress_ratio == 0)
    throw Error("QSA selection scratch needs index_topk > 0 and index_compress_ratio > 0 (got " +
                std::to_string(c.index_topk) + ", " + std::to_string(c.index_compress_ratio) + ")");
  QsaScratchLayout l;
  l.n_heads = c.index_n_heads;
  l.head_dim = c.index_head_dim;
  l.ratio = c.index_compress_ratio;
  l.qk_width = ((Size(l.n_heads) + 1) * l.head_dim).value();
  l.score_width = cdiv(max_seq_len, l.ratio);
  l.list_width = c.index_topk / l.ratio;
  const Size slab = kSlabRows;
  l.qk_offset = 0;
  l.q_post_offset = (slab * l.qk_width * 2).value();
  l.scores_offset = (Size(l.q_post_offset) + slab * l.n_heads * l.head_dim * 4).value();
  l.lists_offset = (Size(l.scores_offset) + slab * l.score_width * 4).value();
  l.bytes = (Size(l.lists_offset) + slab * l.list_width * 4).value();
  return l;
}

QsaIndexerOp QsaIndexerOp::make(const ModelConfig& config, Stage stage, uint64_t max_seq_len,
                                const PrefillLaunch& launch, std::vector<Access> meta) {
  const QsaScratchLayout l = QsaScratchLayout::make(config, max_seq_len);
  if (launch.rows == 0 || launch.rows > QsaScratchLayout::kSlabRows)
    throw Error("qsa indexer: a slab holds 1.." + std::to_string(QsaScratchLayout::kSlabRows) +
                " rows, got " + std::to_string(launch.rows));
  QsaIndexerOp op;
  op.dims = Shape{stage, launch, config.hidden_size, l};
  op.meta = std::move(meta);
  const uint64_t rows = launch.rows;
  const TensorRef qk = region(l.qk_offset, {rows, l.qk_width}, DType::bf16);
  const TensorRef q_post = region(l.q_post_offset, {rows, l.n_heads, l.head_dim}, DType::f32);
  const TensorRef scores = region(l.scores_offset, {rows, l.score_width}, DType::f32);
  const TensorRef lists = region(l.lists_offset, {rows, l.list_width}, DType::i32);
  const auto pool = [](std::vector<uint64_t> shape) {
    return TensorRef{Space::weights, BufferId::hidden_states, 0, std::move(shape), DType::bf16};
  };
  switch (stage) {
    case Stage::qk: {
      // The indexer reads the sub-block input rows of the slab (pass rows after the decode part).
      const uint64_t row = (Size(launch.decode_rows) + launch.row0).value();
      op.in = TensorRef{Space::arena,
                        BufferId::norm_output,
                        (Size(row) * config.hidden_size * 2).value(),
                        {rows, config.hidden_size},
                        DType::bf16};
      op.out = qk;
      op.weights = pool({l.qk_width, config.hidden_size});
      op.reads_weights = true;
      break;
    }
    case Stage::prep:
      op.in = qk;
      op.out = q_post;
      break;
    case Stage::score:
      op.in = q_post;
      op.out = scores;
      op.weights = pool({l.score_width, l.head_dim});
      op.reads_weights = true;
      break;
    case Stage::topk:
      op.in = scores;
      op.out = lists;
      break;
  }
  return op;
}

std::string QsaIndexerOp::name() const {
  switch (dims.stage) {
    case Stage::qk:
      return "qsa_qk";
    case Stage::prep:
      return "qsa_prep";
    case Stage::score:
      return "qsa_score";
    case Stage::topk:
      return "qsa_topk";
  }
  return "qsa";
}

std::string QsaIndexerOp::params() const {
  const PrefillLaunch& p = dims.launch;
  const QsaScratchLayout& l = dims.layout;
  return name() + "(" + kv("decode_rows", p.decode_rows) + "," + kv("t", p.tokens) + "," +
         kv("row0", p.row0) + "," + kv("rows", p.rows) + "," + kv("h", dims.hidden) + "," +
         kv("nh", l.n_heads) + "," + kv("ihd", l.head_dim) + "," + kv("ratio", l.ratio) + "," +
         kv("score_width", l.score_width) + "," + kv("list_width", l.list_width) + ")";
}

std::vector<Access> QsaIndexerOp::accesses() const {
  static constexpr const char* kValues[] = {attn_value::norm, attn_value::qsa_qk,
                                            attn_value::qsa_q_post, attn_value::qsa_scores,
                                            attn_value::qsa_lists};
  const auto i = static_cast<size_t>(dims.stage);
  std::vector<Access> acc{{in, AccessKind::read, kValues[i]}};
  if (reads_weights) acc.push_back({weights, AccessKind::read});
  acc.insert(acc.end(), meta.begin(), meta.end());
  acc.push_back({out, AccessKind::write, kValues[i + 1]});
  return acc;
}

}  // namespace bufferlab
