// Shared types of the lattice generator: OpenFst's ConstFst records, the options, the
// raw (state-level) lattice and the determinized one. Included by latgen.cpp only.

#pragma once

#include <cstdint>
#include <limits>
#include <vector>

namespace latgen {

const float kInf = std::numeric_limits<float>::infinity();
const double kDInf = std::numeric_limits<double>::infinity();

#pragma pack(push, 1)
struct FstState { float final_w; uint32_t pos, narcs, nieps, noeps; };
struct FstArc { int32_t il, ol; float w; int32_t dst; };
#pragma pack(pop)
static_assert(sizeof(FstState) == 20, "ConstFst state record");
static_assert(sizeof(FstArc) == 16, "ConstFst arc record");

struct Config {
  float beam, beam_delta, lattice_beam, prune_scale;
  int32_t max_active, min_active, prune_interval, det_max_states;
};

struct Token { float tot_cost, extra_cost; int32_t links, next, state; };
struct Link { int32_t next_tok, ilabel, olabel; float graph_cost, acoustic_cost; int32_t next; };

template <class T> struct Pool {
  std::vector<T> items;
  std::vector<int32_t> free_ids;
  int32_t alloc() {
    if (!free_ids.empty()) { int32_t i = free_ids.back(); free_ids.pop_back(); return i; }
    items.emplace_back();
    return static_cast<int32_t>(items.size() - 1);
  }
  void release(int32_t i) { free_ids.push_back(i); }
  void clear() { items.clear(); free_ids.clear(); }
};

struct FrameToks { int32_t toks = -1; bool prune_links = true, prune_toks = true, ordered = false; };

// The raw lattice: states = surviving tokens in topological order, arcs in CSR.
struct RawLattice {
  std::vector<int64_t> first;  // [n+1]
  std::vector<int32_t> il, ol, dst;
  std::vector<float> g, a;
  std::vector<float> final_g;  // inf where not final
  size_t num_states() const { return final_g.size(); }
};

// The determinized lattice (CompactLattice) as the arrays of WordLattice.
struct Compact {
  std::vector<int32_t> src, dst, word, ilabels, offsets, final_ilabels, final_offsets;
  std::vector<float> g, a, final_g, final_a;
  void clear() { *this = Compact(); }
};

}  // namespace latgen
