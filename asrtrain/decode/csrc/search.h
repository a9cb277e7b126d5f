// The search: Kaldi's LatticeFasterDecoder (lattice-faster-decoder.cc) over the
// ConstFst arrays, ending in the raw lattice. Included by latgen.cpp only.

#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "types.h"

namespace latgen {

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

}  // namespace latgen
