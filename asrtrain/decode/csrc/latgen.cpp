// Lattice generation on HCLG: Kaldi's LatticeFasterDecoder and DeterminizeLatticePruned,
// written again over OpenFst's ConstFst arrays (no OpenFst, no Kaldi: neither library's
// Python bindings expose a lattice-faster search with lattices; see DESIGN.md "Lattices").
//
// The search follows lattice-faster-decoder.cc: tokens per frame with forward links,
// beam + max-active + min-active cutoffs with an adaptive beam, per-frame cost offsets,
// PruneForwardLinks / PruneTokensForFrame every prune_interval frames at
// lattice_beam * prune_scale, and the final pruning with final costs. The raw lattice
// (tokens, topologically sorted per frame) is then determinized on its words in the
// lattice semiring (weight pair graph/acoustic, string of input labels), keeping for
// each word sequence its best alignment, pruned at lattice_beam with exact
// best-completion costs (A* order): Kaldi's CompactLattice. A plain C interface for
// ctypes; asrtrain/decode/latgen.py drives it. types.h, search.h and determinize.h
// hold the parts; this file the C interface.

#include <cstdint>
#include <cstring>
#include <ctime>

#include "determinize.h"
#include "search.h"
#include "types.h"

namespace {

using namespace latgen;

struct Handle {
  Search search;
  Determinizer det;
  Config cfg;
  RawLattice raw;
  Compact lat;
  Handle(const FstState* s, int64_t n, const FstArc* a, int32_t start, const Config& c)
      : search(s, n, a, start, c), cfg(c) {}
};

}  // namespace

extern "C" {

void* lg_new(const void* states, int64_t num_states, const void* arcs, int32_t start,
             float beam, int32_t max_active, int32_t min_active, float beam_delta,
             float lattice_beam, int32_t prune_interval, float prune_scale,
             int32_t det_max_states) {
  Config c{beam, beam_delta, lattice_beam, prune_scale, max_active, min_active, prune_interval,
           det_max_states};
  return new Handle(static_cast<const FstState*>(states), num_states,
                    static_cast<const FstArc*>(arcs), start, c);
}

void lg_free(void* h) { delete static_cast<Handle*>(h); }

// 0 ok; 2 no surviving token; 3 epsilon cycle in the graph; 4 determinization blew up.
// stats: reached_final, raw states, raw arcs, tokens created, beam reductions, out states,
// out arcs, out input labels, microseconds of CPU in the search and in determinization.
int lg_decode(void* hp, const float* ll, int32_t T, int32_t D, const int32_t* col, int32_t ncol,
              float acwt, int64_t* stats) {
  Handle* h = static_cast<Handle*>(hp);
  h->lat.clear();
  std::clock_t c0 = std::clock();
  int rc = h->search.decode(ll, T, D, col, ncol, acwt);
  if (rc != 0) return rc;
  rc = h->search.raw_lattice(&h->raw);
  if (rc != 0) return rc;
  std::clock_t c1 = std::clock();
  int32_t reductions = 0;
  rc = h->det.run(h->raw, h->cfg.lattice_beam, h->cfg.det_max_states, acwt, &h->lat, &reductions);
  std::clock_t c2 = std::clock();
  stats[8] = static_cast<int64_t>((c1 - c0) * 1.0e6 / CLOCKS_PER_SEC);
  stats[9] = static_cast<int64_t>((c2 - c1) * 1.0e6 / CLOCKS_PER_SEC);
  stats[0] = h->search.reached_final() ? 1 : 0;
  stats[1] = static_cast<int64_t>(h->raw.num_states());
  stats[2] = static_cast<int64_t>(h->raw.il.size());
  stats[3] = h->search.tokens_created();
  stats[4] = reductions;
  stats[5] = static_cast<int64_t>(h->lat.final_g.size());
  stats[6] = static_cast<int64_t>(h->lat.src.size());
  stats[7] = static_cast<int64_t>(h->lat.ilabels.size());
  return rc;
}

int64_t lg_final_ilabels(void* hp) { return static_cast<int64_t>(static_cast<Handle*>(hp)->lat.final_ilabels.size()); }

void lg_copy(void* hp, int32_t* src, int32_t* dst, int32_t* word, float* g, float* a,
             int32_t* ilabels, int32_t* offsets, float* fg, float* fa, int32_t* filabels,
             int32_t* foffsets) {
  const Compact& L = static_cast<Handle*>(hp)->lat;
  auto cp = [](auto* to, const auto& v) { if (!v.empty()) std::memcpy(to, v.data(), v.size() * sizeof(v[0])); };
  cp(src, L.src); cp(dst, L.dst); cp(word, L.word); cp(g, L.g); cp(a, L.a);
  cp(ilabels, L.ilabels); cp(offsets, L.offsets); cp(fg, L.final_g); cp(fa, L.final_a);
  cp(filabels, L.final_ilabels); cp(foffsets, L.final_offsets);
}

}  // extern "C"
