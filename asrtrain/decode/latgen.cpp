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
// ctypes; asrtrain/decode/latgen.py drives it.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <limits>
#include <queue>
#include <unordered_map>
#include <vector>

namespace {

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

// ---------------------------------------------------------------- the search

class Search {
 public:
  Search(const FstState* states, int64_t num_states, const FstArc* arcs, int32_t start,
         const Config& cfg)
      : S_(states), A_(arcs), start_(start), cfg_(cfg), state2tok_(num_states, -1) {}

  // Decode T frames of per-frame costs (cost(t, ilabel) = costs[t * ncol + col[ilabel]]).
  // Returns 0, or 2 when no token survived at some frame.
  int decode(const float* ll, int32_t T, int32_t D, const int32_t* col, int32_t ncol,
             float acwt) {
    reset();
    frame_cost_.assign(ncol, kInf);
    init_decoding();
    for (int32_t t = 0; t < T; ++t) {
      if (t % cfg_.prune_interval == 0) prune_active_tokens(cfg_.lattice_beam * cfg_.prune_scale);
      const float* row = ll + static_cast<int64_t>(t) * D;
      for (int32_t k = 1; k < ncol; ++k) frame_cost_[k] = col[k] >= 0 ? -acwt * row[col[k]] : kInf;
      float cutoff = process_emitting(t);
      process_nonemitting(cutoff);
      if (cur_states_.empty()) { failed_ = true; return 2; }
      order_frame(frame_plus_one());
    }
    finalize();
    return 0;
  }

  bool reached_final() const { return !final_costs_.empty(); }
  int64_t tokens_created() const { return tokens_created_; }

  // Tokens → raw lattice states (frame order, topological within a frame).
  int raw_lattice(RawLattice* raw) {
    int32_t nframes = static_cast<int32_t>(active_.size());
    std::vector<int32_t> order, tok_state(tp_.items.size(), -1);
    std::vector<int32_t> frame_of_state;
    for (int32_t f = 0; f < nframes; ++f) {
      if (!topsort_frame(f, &order)) return 3;
      for (int32_t t : order) { tok_state[t] = static_cast<int32_t>(frame_of_state.size()); frame_of_state.push_back(f); }
    }
    size_t n = frame_of_state.size();
    raw->first.assign(n + 1, 0);
    raw->il.clear(); raw->ol.clear(); raw->dst.clear(); raw->g.clear(); raw->a.clear();
    raw->final_g.assign(n, kInf);
    std::vector<int32_t> state_tok(n);
    for (size_t t = 0; t < tok_state.size(); ++t) if (tok_state[t] >= 0) state_tok[tok_state[t]] = static_cast<int32_t>(t);
    for (size_t s = 0; s < n; ++s) {
      int32_t t = state_tok[s], f = frame_of_state[s];
      for (int32_t l = tp_.items[t].links; l >= 0; l = lp_.items[l].next) {
        const Link& L = lp_.items[l];
        float off = L.ilabel != 0 ? cost_offsets_[f] : 0.0f;
        raw->il.push_back(L.ilabel); raw->ol.push_back(L.olabel);
        raw->dst.push_back(tok_state[L.next_tok]);
        raw->g.push_back(L.graph_cost); raw->a.push_back(L.acoustic_cost - off);
      }
      raw->first[s + 1] = static_cast<int64_t>(raw->il.size());
      if (f == nframes - 1) {
        if (final_costs_.empty()) {
          raw->final_g[s] = 0.0f;
        } else {
          auto it = final_costs_.find(t);
          if (it != final_costs_.end()) raw->final_g[s] = it->second;
        }
      }
    }
    return 0;
  }

 private:
  const FstState* S_;
  const FstArc* A_;
  int32_t start_;
  Config cfg_;
  Pool<Token> tp_;
  Pool<Link> lp_;
  std::vector<FrameToks> active_;
  std::vector<int32_t> state2tok_, cur_states_, queue_;
  std::vector<std::pair<int32_t, int32_t>> prev_;
  std::vector<float> cost_offsets_, tmp_, frame_cost_;
  std::vector<int32_t> toks_, order_, indeg_;
  std::unordered_map<int32_t, float> final_costs_;
  float final_best_cost_ = 0.0f;
  bool failed_ = false;
  int64_t tokens_created_ = 0;

  void reset() {
    for (int32_t s : cur_states_) state2tok_[s] = -1;
    cur_states_.clear();
    tp_.clear(); lp_.clear(); active_.clear(); cost_offsets_.clear(); final_costs_.clear();
    failed_ = false; tokens_created_ = 0;
  }

  int32_t frame_plus_one() const { return static_cast<int32_t>(active_.size()) - 1; }

  // FindOrAddToken: the token of `state` on the newest frame; *changed if new or cheaper.
  int32_t find_or_add(int32_t state, float tot_cost, bool* changed) {
    int32_t t = state2tok_[state];
    if (t < 0) {
      t = tp_.alloc();
      Token& tok = tp_.items[t];
      tok.tot_cost = tot_cost; tok.extra_cost = 0.0f; tok.links = -1;
      tok.next = active_.back().toks; tok.state = state;
      active_.back().toks = t;
      state2tok_[state] = t;
      cur_states_.push_back(state);
      ++tokens_created_;
      if (changed) *changed = true;
    } else if (tp_.items[t].tot_cost > tot_cost) {
      tp_.items[t].tot_cost = tot_cost;
      if (changed) *changed = true;
    } else if (changed) {
      *changed = false;
    }
    return t;
  }

  void add_link(int32_t tok, int32_t next_tok, int32_t il, int32_t ol, float g, float a) {
    int32_t l = lp_.alloc();
    Link& L = lp_.items[l];
    L.next_tok = next_tok; L.ilabel = il; L.olabel = ol; L.graph_cost = g; L.acoustic_cost = a;
    L.next = tp_.items[tok].links;
    tp_.items[tok].links = l;
  }

  void delete_links(int32_t tok) {
    for (int32_t l = tp_.items[tok].links; l >= 0;) { int32_t nx = lp_.items[l].next; lp_.release(l); l = nx; }
    tp_.items[tok].links = -1;
  }

  void init_decoding() {
    active_.emplace_back();
    find_or_add(start_, 0.0f, nullptr);
    process_nonemitting(cfg_.beam);
    order_frame(0);
  }

  // Once a frame's epsilon links are all made, order its token list so that a token
  // comes after every token of the frame it links to: the pruning then gets each
  // token's extra cost in one pass (Kaldi's loops until nothing changes). An epsilon
  // cycle leaves the frame unordered, and its pruning loops as Kaldi's.
  void order_frame(int32_t f) {
    toks_.clear();
    for (int32_t t = active_[f].toks; t >= 0; t = tp_.items[t].next) toks_.push_back(t);
    if (indeg_.size() < tp_.items.size()) indeg_.resize(tp_.items.size(), 0);
    for (int32_t t : toks_)
      for (int32_t l = tp_.items[t].links; l >= 0; l = lp_.items[l].next)
        if (lp_.items[l].ilabel == 0) ++indeg_[lp_.items[l].next_tok];
    order_.clear();
    for (int32_t t : toks_) if (indeg_[t] == 0) order_.push_back(t);
    for (size_t i = 0; i < order_.size(); ++i)  // Kahn: sources first
      for (int32_t l = tp_.items[order_[i]].links; l >= 0; l = lp_.items[l].next)
        if (lp_.items[l].ilabel == 0 && --indeg_[lp_.items[l].next_tok] == 0)
          order_.push_back(lp_.items[l].next_tok);
    for (int32_t t : toks_) indeg_[t] = 0;
    if (order_.size() != toks_.size()) return;
    int32_t head = -1;  // the list runs sinks first: the reverse of Kahn's order
    for (int32_t t : order_) { tp_.items[t].next = head; head = t; }
    active_[f].toks = head;
    active_[f].ordered = true;
  }

  // GetCutoff over the previous frame's tokens (prev_), as Kaldi's.
  float get_cutoff(float* adaptive_beam, int32_t* best_tok, int32_t* best_state) {
    float best = kInf;
    tmp_.clear();
    for (auto& st : prev_) {
      float w = tp_.items[st.second].tot_cost;
      tmp_.push_back(w);
      if (w < best) { best = w; *best_tok = st.second; *best_state = st.first; }
    }
    float beam_cutoff = best + cfg_.beam, min_active_cutoff = kInf, max_active_cutoff = kInf;
    size_t max_active = static_cast<size_t>(cfg_.max_active), min_active = static_cast<size_t>(cfg_.min_active);
    if (tmp_.size() > max_active) {
      std::nth_element(tmp_.begin(), tmp_.begin() + max_active, tmp_.end());
      max_active_cutoff = tmp_[max_active];
    }
    if (max_active_cutoff < beam_cutoff) {
      *adaptive_beam = max_active_cutoff - best + cfg_.beam_delta;
      return max_active_cutoff;
    }
    if (tmp_.size() > min_active) {
      if (min_active == 0) {
        min_active_cutoff = best;
      } else {
        std::nth_element(tmp_.begin(), tmp_.begin() + min_active,
                         tmp_.size() > max_active ? tmp_.begin() + max_active : tmp_.end());
        min_active_cutoff = tmp_[min_active];
      }
    }
    if (min_active_cutoff > beam_cutoff) {
      *adaptive_beam = min_active_cutoff - best + cfg_.beam_delta;
      return min_active_cutoff;
    }
    *adaptive_beam = cfg_.beam;
    return beam_cutoff;
  }

  float process_emitting(int32_t frame) {
    prev_.clear();
    for (int32_t s : cur_states_) { prev_.emplace_back(s, state2tok_[s]); state2tok_[s] = -1; }
    cur_states_.clear();
    active_.emplace_back();
    float adaptive_beam = cfg_.beam;
    int32_t best_tok = -1, best_state = -1;
    float cur_cutoff = get_cutoff(&adaptive_beam, &best_tok, &best_state);
    float next_cutoff = kInf, cost_offset = 0.0f;
    if (best_tok >= 0) {
      float tc = tp_.items[best_tok].tot_cost;
      cost_offset = -tc;
      const FstState& st = S_[best_state];
      for (uint32_t i = 0; i < st.narcs; ++i) {
        const FstArc& arc = A_[st.pos + i];
        if (arc.il == 0) continue;
        float w = arc.w + cost_offset + frame_cost_[arc.il] + tc;
        if (w + adaptive_beam < next_cutoff) next_cutoff = w + adaptive_beam;
      }
    }
    cost_offsets_.resize(frame + 1, 0.0f);
    cost_offsets_[frame] = cost_offset;
    for (auto& sv : prev_) {
      int32_t tok = sv.second;
      float cur_cost = tp_.items[tok].tot_cost;
      if (cur_cost > cur_cutoff) continue;
      const FstState& st = S_[sv.first];
      for (uint32_t i = 0; i < st.narcs; ++i) {
        const FstArc& arc = A_[st.pos + i];
        if (arc.il == 0) continue;
        float ac = cost_offset + frame_cost_[arc.il], tot = cur_cost + ac + arc.w;
        if (tot >= next_cutoff) continue;
        if (tot + adaptive_beam < next_cutoff) next_cutoff = tot + adaptive_beam;
        int32_t nt = find_or_add(arc.dst, tot, nullptr);
        // a link already lattice_beam worse than the best way into its token is pruned by
        // the next PruneForwardLinks whatever happens (extra costs are >= 0): not made
        if (tot - tp_.items[nt].tot_cost > cfg_.lattice_beam) continue;
        add_link(tok, nt, arc.il, arc.ol, arc.w, ac);
      }
    }
    return next_cutoff;
  }

  void process_nonemitting(float cutoff) {
    queue_.clear();
    for (int32_t s : cur_states_) if (S_[s].nieps != 0) queue_.push_back(s);
    while (!queue_.empty()) {
      int32_t s = queue_.back();
      queue_.pop_back();
      int32_t tok = state2tok_[s];
      float cur_cost = tp_.items[tok].tot_cost;
      if (cur_cost >= cutoff) continue;
      delete_links(tok);
      const FstState& st = S_[s];
      for (uint32_t i = 0; i < st.narcs; ++i) {
        const FstArc& arc = A_[st.pos + i];
        if (arc.il != 0) continue;
        float tot = cur_cost + arc.w;
        if (tot < cutoff) {
          bool changed = false;
          int32_t nt = find_or_add(arc.dst, tot, &changed);
          if (tot - tp_.items[nt].tot_cost <= cfg_.lattice_beam) add_link(tok, nt, 0, arc.ol, arc.w, 0.0f);
          if (changed && S_[arc.dst].nieps != 0) queue_.push_back(arc.dst);
        }
      }
    }
  }

  // PruneForwardLinks: extra costs of frame f's tokens from frame f+1's (and frame f's,
  // through epsilon links); links worse than lattice_beam removed.
  void prune_forward_links(int32_t f, bool* extra_changed, bool* links_pruned, float delta) {
    bool changed = true;
    while (changed) {
      changed = false;
      for (int32_t t = active_[f].toks; t >= 0; t = tp_.items[t].next) {
        float tok_extra = kInf;
        prune_links_of(t, &tok_extra, links_pruned);
        Token& tok = tp_.items[t];
        if (std::fabs(tok_extra - tok.extra_cost) > delta) changed = true;
        tok.extra_cost = tok_extra;
      }
      if (changed) *extra_changed = true;
      if (active_[f].ordered) break;  // one pass gave every token its final extra cost
    }
  }

  void prune_links_of(int32_t t, float* tok_extra, bool* links_pruned) {
    int32_t prev = -1;
    const float tot_cost = tp_.items[t].tot_cost;
    for (int32_t l = tp_.items[t].links; l >= 0;) {
      const Link& L = lp_.items[l];
      const Token& nt = tp_.items[L.next_tok];
      float link_extra = nt.extra_cost + ((tot_cost + L.acoustic_cost + L.graph_cost) - nt.tot_cost);
      int32_t nx = L.next;
      if (link_extra > cfg_.lattice_beam) {
        if (prev < 0) tp_.items[t].links = nx; else lp_.items[prev].next = nx;
        lp_.release(l);
        *links_pruned = true;
      } else {
        if (link_extra < 0.0f) link_extra = 0.0f;
        if (link_extra < *tok_extra) *tok_extra = link_extra;
        prev = l;
      }
      l = nx;
    }
  }

  void prune_tokens_for_frame(int32_t f) {
    int32_t prev = -1;
    for (int32_t t = active_[f].toks; t >= 0;) {
      int32_t nx = tp_.items[t].next;
      if (tp_.items[t].extra_cost == kInf) {
        delete_links(t);
        if (prev < 0) active_[f].toks = nx; else tp_.items[prev].next = nx;
        tp_.release(t);
      } else {
        prev = t;
      }
      t = nx;
    }
  }

  void prune_active_tokens(float delta) {
    int32_t cur = frame_plus_one();
    for (int32_t f = cur - 1; f >= 0; --f) {
      if (active_[f].prune_links) {
        bool extra_changed = false, links_pruned = false;
        prune_forward_links(f, &extra_changed, &links_pruned, delta);
        if (extra_changed && f > 0) active_[f - 1].prune_links = true;
        if (links_pruned) active_[f].prune_toks = true;
        active_[f].prune_links = false;
      }
      if (f + 1 < cur && active_[f + 1].prune_toks) {
        prune_tokens_for_frame(f + 1);
        active_[f + 1].prune_toks = false;
      }
    }
  }

  // ComputeFinalCosts + PruneForwardLinksFinal + the last pruning of FinalizeDecoding.
  void finalize() {
    int32_t last = frame_plus_one();
    float best = kInf, best_with_final = kInf;
    for (int32_t t = active_[last].toks; t >= 0; t = tp_.items[t].next) {
      const Token& tok = tp_.items[t];
      float fc = S_[tok.state].final_w;
      best = std::min(best, tok.tot_cost);
      best_with_final = std::min(best_with_final, tok.tot_cost + fc);
      if (fc != kInf) final_costs_[t] = fc;
    }
    final_best_cost_ = best_with_final != kInf ? best_with_final : best;
    for (int32_t s : cur_states_) state2tok_[s] = -1;
    cur_states_.clear();
    bool changed = true;
    while (changed) {
      changed = false;
      for (int32_t t = active_[last].toks; t >= 0; t = tp_.items[t].next) {
        float fc = 0.0f;
        if (!final_costs_.empty()) {
          auto it = final_costs_.find(t);
          fc = it != final_costs_.end() ? it->second : kInf;
        }
        float tok_extra = tp_.items[t].tot_cost + fc - final_best_cost_;
        bool pruned = false;
        prune_links_of(t, &tok_extra, &pruned);
        if (tok_extra > cfg_.lattice_beam) tok_extra = kInf;
        Token& tok = tp_.items[t];
        float old = tok.extra_cost;
        bool same = (old == tok_extra) || (std::fabs(old - tok_extra) <= 1.0e-5f);
        if (!same) changed = true;
        tok.extra_cost = tok_extra;
      }
      if (active_[last].ordered) break;
    }
    for (int32_t f = last - 1; f >= 0; --f) {
      bool b1 = false, b2 = false;
      prune_forward_links(f, &b1, &b2, 0.0f);
      prune_tokens_for_frame(f + 1);
    }
    prune_tokens_for_frame(0);
    // a token whose extra cost stayed inf only through final costs is gone; drop final
    // costs of tokens that were pruned
    for (auto it = final_costs_.begin(); it != final_costs_.end();) {
      if (tp_.items[it->first].extra_cost == kInf) it = final_costs_.erase(it); else ++it;
    }
  }

  // Tokens of frame f in an order where epsilon links go forwards (Kahn, creation order).
  bool topsort_frame(int32_t f, std::vector<int32_t>* order) {
    std::vector<int32_t> toks;
    for (int32_t t = active_[f].toks; t >= 0; t = tp_.items[t].next) toks.push_back(t);
    std::reverse(toks.begin(), toks.end());  // creation order
    std::unordered_map<int32_t, int32_t> indeg;
    for (int32_t t : toks) indeg[t] = 0;
    for (int32_t t : toks)
      for (int32_t l = tp_.items[t].links; l >= 0; l = lp_.items[l].next)
        if (lp_.items[l].ilabel == 0) ++indeg[lp_.items[l].next_tok];
    order->clear();
    std::vector<int32_t> stack;
    for (auto it = toks.rbegin(); it != toks.rend(); ++it) if (indeg[*it] == 0) stack.push_back(*it);
    while (!stack.empty()) {
      int32_t t = stack.back();
      stack.pop_back();
      order->push_back(t);
      for (int32_t l = tp_.items[t].links; l >= 0; l = lp_.items[l].next)
        if (lp_.items[l].ilabel == 0 && --indeg[lp_.items[l].next_tok] == 0) stack.push_back(lp_.items[l].next_tok);
    }
    return order->size() == toks.size();  // false: an epsilon cycle among the frame's tokens
  }
};

// ---------------------------------------------------------------- determinization

// Strings of input labels as a trie: a string is a node id, 0 the empty string.
class Strings {
 public:
  Strings() { clear(); }
  void clear() { parent_.assign(1, -1); label_.assign(1, 0); len_.assign(1, 0); child_.clear(); }
  int32_t append(int32_t s, int32_t label) {
    uint64_t key = (static_cast<uint64_t>(static_cast<uint32_t>(s)) << 32) | static_cast<uint32_t>(label);
    auto it = child_.find(key);
    if (it != child_.end()) return it->second;
    int32_t id = static_cast<int32_t>(parent_.size());
    parent_.push_back(s); label_.push_back(label); len_.push_back(len_[s] + 1);
    child_.emplace(key, id);
    return id;
  }
  int32_t len(int32_t s) const { return len_[s]; }
  int32_t ancestor(int32_t s, int32_t length) const { while (len_[s] > length) s = parent_[s]; return s; }
  int32_t parent(int32_t s) const { return parent_[s]; }
  // labels of s after its first `skip` labels, in order
  void suffix(int32_t s, int32_t skip, std::vector<int32_t>* out) const {
    out->clear();
    while (len_[s] > skip) { out->push_back(label_[s]); s = parent_[s]; }
    std::reverse(out->begin(), out->end());
  }
  int32_t from(int32_t base, const std::vector<int32_t>& labels) {
    for (int32_t x : labels) base = append(base, x);
    return base;
  }
  size_t size() const { return parent_.size(); }

 private:
  std::vector<int32_t> parent_, label_, len_;
  std::unordered_map<uint64_t, int32_t> child_;
};

struct Elem { int32_t state, str; double g, a; };

class Determinizer {
 public:
  // Returns 0, or 4 when the output grew past max_states even at the narrowest beam.
  int run(const RawLattice& raw, float beam, int32_t max_states, float acwt, Compact* out,
          int32_t* beam_reductions) {
    raw_ = &raw;
    backward_costs();
    *beam_reductions = 0;
    for (;;) {
      if (attempt(beam, max_states)) break;
      ++*beam_reductions;
      beam *= 0.75f;
      if (beam < 0.01f) return 4;
    }
    emit(acwt, out);
    return 0;
  }

 private:
  const RawLattice* raw_ = nullptr;
  std::vector<double> beta_;
  Strings strings_;
  // output states: pre-closure subsets (normalized)
  std::vector<int64_t> sub_first_;
  std::vector<Elem> sub_elems_;
  std::vector<double> fwd_;
  std::vector<char> done_;
  std::unordered_multimap<uint64_t, int32_t> index_;
  struct OutArc { int32_t src, dst, word, str; double g, a; };
  std::vector<OutArc> arcs_;
  std::vector<double> fin_g_, fin_a_;
  std::vector<int32_t> fin_str_;
  std::vector<int32_t> pos_;  // raw state → index in closure, -1
  std::vector<int32_t> labels_, anc_, labels2_;

  // Kaldi's Compare on (weight, string): lower graph+acoustic, then lower graph, then the
  // shorter string, then the lexicographically larger one. True if (g1, a1, s1) is better.
  bool better(double g1, double a1, int32_t s1, double g2, double a2, int32_t s2) {
    double f1 = g1 + a1, f2 = g2 + a2;
    if (f1 != f2) return f1 < f2;
    if (g1 != g2) return g1 < g2;
    if (s1 == s2) return false;
    int32_t l1 = strings_.len(s1), l2 = strings_.len(s2);
    if (l1 != l2) return l1 < l2;
    strings_.suffix(s1, 0, &labels_);
    strings_.suffix(s2, 0, &labels2_);
    return labels_ > labels2_;
  }

  void backward_costs() {
    const RawLattice& r = *raw_;
    size_t n = r.num_states();
    beta_.assign(n, kDInf);
    for (size_t s = n; s-- > 0;) {
      double b = r.final_g[s];
      for (int64_t i = r.first[s]; i < r.first[s + 1]; ++i)
        b = std::min(b, static_cast<double>(r.g[i]) + r.a[i] + beta_[r.dst[i]]);
      beta_[s] = b;
    }
    pos_.assign(n, -1);
  }

  static uint64_t hash_subset(const Elem* e, size_t n) {
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; ++i) {
      h = (h ^ static_cast<uint32_t>(e[i].state)) * 1099511628211ULL;
      h = (h ^ static_cast<uint32_t>(e[i].str)) * 1099511628211ULL;
    }
    return h;
  }

  int32_t find_subset(const std::vector<Elem>& sub, uint64_t h) {
    auto range = index_.equal_range(h);
    for (auto it = range.first; it != range.second; ++it) {
      int32_t o = it->second;
      int64_t b = sub_first_[o], e = sub_first_[o + 1];
      if (static_cast<size_t>(e - b) != sub.size()) continue;
      bool same = true;
      for (size_t i = 0; i < sub.size() && same; ++i) {
        const Elem& x = sub_elems_[b + i];
        const Elem& y = sub[i];
        same = x.state == y.state && x.str == y.str && std::fabs(x.g - y.g) <= 1.0 / 1024 &&
               std::fabs(x.a - y.a) <= 1.0 / 1024;
      }
      if (same) return o;
    }
    return -1;
  }

  int32_t add_subset(const std::vector<Elem>& sub, uint64_t h, double fwd) {
    int32_t o = static_cast<int32_t>(fwd_.size());
    sub_elems_.insert(sub_elems_.end(), sub.begin(), sub.end());
    sub_first_.push_back(static_cast<int64_t>(sub_elems_.size()));
    fwd_.push_back(fwd);
    done_.push_back(0);
    fin_g_.push_back(kDInf); fin_a_.push_back(0.0); fin_str_.push_back(0);
    index_.emplace(h, o);
    return o;
  }

  // Every raw state reachable from the subset's elements by word-epsilon arcs, each with
  // its best (weight, string); kept: states with word arcs or final.
  void closure(int32_t o, std::vector<Elem>* out) {
    const RawLattice& r = *raw_;
    out->clear();
    std::priority_queue<int32_t, std::vector<int32_t>, std::greater<int32_t>> heap;
    for (int64_t i = sub_first_[o]; i < sub_first_[o + 1]; ++i) {
      pos_[sub_elems_[i].state] = static_cast<int32_t>(out->size());
      out->push_back(sub_elems_[i]);
      heap.push(sub_elems_[i].state);
    }
    int32_t last = -1;
    while (!heap.empty()) {
      int32_t s = heap.top();
      heap.pop();
      if (s == last) continue;
      last = s;
      Elem e = (*out)[pos_[s]];
      for (int64_t i = r.first[s]; i < r.first[s + 1]; ++i) {
        if (r.ol[i] != 0) continue;
        double g = e.g + r.g[i], a = e.a + r.a[i];
        int32_t str = r.il[i] != 0 ? strings_.append(e.str, r.il[i]) : e.str;
        int32_t d = r.dst[i];
        if (pos_[d] < 0) {
          pos_[d] = static_cast<int32_t>(out->size());
          out->push_back(Elem{d, str, g, a});
          heap.push(d);
        } else {
          Elem& x = (*out)[pos_[d]];
          if (better(g, a, str, x.g, x.a, x.str)) { x.g = g; x.a = a; x.str = str; }
        }
      }
    }
    size_t k = 0;
    for (size_t i = 0; i < out->size(); ++i) {
      const Elem& e = (*out)[i];
      pos_[e.state] = -1;
      bool keep = r.final_g[e.state] != kInf;
      for (int64_t j = r.first[e.state]; j < r.first[e.state + 1] && !keep; ++j) keep = r.ol[j] != 0;
      if (keep) (*out)[k++] = e;
    }
    out->resize(k);
  }

  // Normalize a subset in place: subtract its best weight and the strings' common prefix,
  // which become the output arc's weight and string.
  void normalize(std::vector<Elem>* sub, double* g, double* a, int32_t* prefix) {
    std::sort(sub->begin(), sub->end(), [](const Elem& x, const Elem& y) { return x.state < y.state; });
    size_t k = 0;  // one element per state: the best
    for (size_t i = 0; i < sub->size(); ++i) {
      if (k > 0 && (*sub)[k - 1].state == (*sub)[i].state) {
        Elem& x = (*sub)[k - 1];
        const Elem& y = (*sub)[i];
        if (better(y.g, y.a, y.str, x.g, x.a, x.str)) x = y;
      } else {
        (*sub)[k++] = (*sub)[i];
      }
    }
    sub->resize(k);
    const Elem* best = &(*sub)[0];
    int32_t minlen = strings_.len((*sub)[0].str);
    for (const Elem& e : *sub) {
      if (better(e.g, e.a, e.str, best->g, best->a, best->str)) best = &e;
      minlen = std::min(minlen, strings_.len(e.str));
    }
    *g = best->g; *a = best->a;
    anc_.clear();
    for (const Elem& e : *sub) anc_.push_back(strings_.ancestor(e.str, minlen));
    for (;;) {  // all at the same length: step up together until they meet
      bool all = true;
      for (int32_t x : anc_) if (x != anc_[0]) { all = false; break; }
      if (all) break;
      for (int32_t& x : anc_) x = strings_.parent(x);
    }
    int32_t p = anc_[0];
    *prefix = p;
    int32_t plen = strings_.len(p);
    for (Elem& e : *sub) {
      e.g -= *g; e.a -= *a;
      if (plen > 0) { strings_.suffix(e.str, plen, &labels_); e.str = strings_.from(0, labels_); }
    }
  }

  double completion(const std::vector<Elem>& sub) const {
    double h = kDInf;
    for (const Elem& e : sub) h = std::min(h, e.g + e.a + beta_[e.state]);
    return h;
  }

  bool attempt(float beam, int32_t max_states) {
    strings_.clear();
    sub_first_.assign(1, 0); sub_elems_.clear(); fwd_.clear(); done_.clear(); index_.clear();
    arcs_.clear(); fin_g_.clear(); fin_a_.clear(); fin_str_.clear();
    if (raw_->num_states() == 0 || beta_[0] == kDInf) return true;
    double cutoff = beta_[0] + beam + 1e-4 * (1.0 + std::fabs(beta_[0]));
    using Item = std::pair<double, int32_t>;
    std::priority_queue<Item, std::vector<Item>, std::greater<Item>> pq;
    std::vector<Elem> start{Elem{0, 0, 0.0, 0.0}};
    add_subset(start, hash_subset(start.data(), 1), 0.0);
    pq.emplace(beta_[0], 0);
    std::vector<Elem> clos, sub;
    std::vector<std::pair<int32_t, std::pair<int32_t, int64_t>>> trans;  // (word, (elem, arc))
    while (!pq.empty()) {
      int32_t o = pq.top().second;
      pq.pop();
      if (done_[o]) continue;
      done_[o] = 1;
      if (static_cast<int64_t>(fwd_.size()) > max_states) return false;
      double F = fwd_[o];
      closure(o, &clos);
      final_weight(o, clos, F, cutoff);
      trans.clear();
      for (size_t i = 0; i < clos.size(); ++i)
        for (int64_t j = raw_->first[clos[i].state]; j < raw_->first[clos[i].state + 1]; ++j)
          if (raw_->ol[j] != 0) trans.push_back({raw_->ol[j], {static_cast<int32_t>(i), j}});
      std::sort(trans.begin(), trans.end());
      for (size_t b = 0; b < trans.size();) {
        size_t e = b;
        int32_t word = trans[b].first;
        sub.clear();
        for (; e < trans.size() && trans[e].first == word; ++e) {
          const Elem& x = clos[trans[e].second.first];
          int64_t j = trans[e].second.second;
          int32_t str = raw_->il[j] != 0 ? strings_.append(x.str, raw_->il[j]) : x.str;
          sub.push_back(Elem{raw_->dst[j], str, x.g + raw_->g[j], x.a + raw_->a[j]});
        }
        b = e;
        double g, a;
        int32_t prefix;
        normalize(&sub, &g, &a, &prefix);
        double f2 = F + g + a;
        double h = completion(sub);
        if (f2 + h > cutoff) continue;
        uint64_t hs = hash_subset(sub.data(), sub.size());
        int32_t o2 = find_subset(sub, hs);
        if (o2 < 0) {
          o2 = add_subset(sub, hs, f2);
          pq.emplace(f2 + h, o2);
        } else if (f2 < fwd_[o2]) {
          fwd_[o2] = f2;
          if (!done_[o2]) pq.emplace(f2 + h, o2);
        }
        arcs_.push_back(OutArc{o, o2, word, prefix, g, a});
      }
    }
    return true;
  }

  void final_weight(int32_t o, const std::vector<Elem>& clos, double F, double cutoff) {
    const RawLattice& r = *raw_;
    double bg = kDInf, ba = 0.0;
    int32_t bs = 0;
    for (const Elem& e : clos) {
      float fg = r.final_g[e.state];
      if (fg == kInf) continue;
      double g = e.g + fg;
      if (bg == kDInf || better(g, e.a, e.str, bg, ba, bs)) { bg = g; ba = e.a; bs = e.str; }
    }
    if (bg != kDInf && F + bg + ba <= cutoff) { fin_g_[o] = bg; fin_a_[o] = ba; fin_str_[o] = bs; }
  }

  // Keep states on a complete path, number them topologically, unscale acoustic costs.
  void emit(float acwt, Compact* out) {
    out->clear();
    out->offsets.push_back(0);
    out->final_offsets.push_back(0);
    size_t n = fwd_.size();
    std::vector<std::vector<int32_t>> outgoing(n), incoming(n);
    for (size_t i = 0; i < arcs_.size(); ++i) { outgoing[arcs_[i].src].push_back(static_cast<int32_t>(i)); incoming[arcs_[i].dst].push_back(static_cast<int32_t>(i)); }
    std::vector<char> coacc(n, 0);
    std::vector<int32_t> stack;
    for (size_t s = 0; s < n; ++s) if (fin_g_[s] != kDInf) { coacc[s] = 1; stack.push_back(static_cast<int32_t>(s)); }
    while (!stack.empty()) {
      int32_t s = stack.back(); stack.pop_back();
      for (int32_t i : incoming[s]) if (!coacc[arcs_[i].src]) { coacc[arcs_[i].src] = 1; stack.push_back(arcs_[i].src); }
    }
    if (n == 0 || !coacc[0]) return;
    std::vector<int32_t> indeg(n, 0), id(n, -1), order;
    for (const OutArc& x : arcs_) if (coacc[x.src] && coacc[x.dst]) ++indeg[x.dst];
    stack.assign(1, 0);
    while (!stack.empty()) {  // Kahn from the start; every kept state is reached from it
      int32_t s = stack.back(); stack.pop_back();
      id[s] = static_cast<int32_t>(order.size());
      order.push_back(s);
      for (auto it = outgoing[s].rbegin(); it != outgoing[s].rend(); ++it) {
        const OutArc& x = arcs_[*it];
        if (coacc[x.dst] && --indeg[x.dst] == 0) stack.push_back(x.dst);
      }
    }
    double inv = 1.0 / acwt;
    for (int32_t s : order) {
      for (int32_t i : outgoing[s]) {
        const OutArc& x = arcs_[i];
        if (!coacc[x.dst]) continue;
        out->src.push_back(id[s]); out->dst.push_back(id[x.dst]); out->word.push_back(x.word);
        out->g.push_back(static_cast<float>(x.g)); out->a.push_back(static_cast<float>(x.a * inv));
        strings_.suffix(x.str, 0, &labels_);
        out->ilabels.insert(out->ilabels.end(), labels_.begin(), labels_.end());
        out->offsets.push_back(static_cast<int32_t>(out->ilabels.size()));
      }
    }
    for (int32_t s : order) {
      bool fin = fin_g_[s] != kDInf;
      out->final_g.push_back(fin ? static_cast<float>(fin_g_[s]) : kInf);
      out->final_a.push_back(fin ? static_cast<float>(fin_a_[s] * inv) : 0.0f);
      if (fin) { strings_.suffix(fin_str_[s], 0, &labels_); out->final_ilabels.insert(out->final_ilabels.end(), labels_.begin(), labels_.end()); }
      out->final_offsets.push_back(static_cast<int32_t>(out->final_ilabels.size()));
    }
  }
};

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
