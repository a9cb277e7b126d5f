// Lattice determinization: Kaldi's DeterminizeLatticePruned on the raw lattice, each
// word sequence once with its best alignment. Included by latgen.cpp only.

#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <queue>
#include <unordered_map>
#include <vector>

#include "types.h"

namespace latgen {

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
  // its best (weight, string); kept: states with word arcs or final. A state whose best path
  // through it costs more than `cutoff` is not entered (Kaldi's pruned determinization does
  // the same): no path within the beam passes it, and without this a closure spans every
  // frame to the utterance's end, each element dragging a string as long (quadratic in T).
  void closure(int32_t o, double cutoff, std::vector<Elem>* out) {
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
        int32_t d = r.dst[i];
        if (fwd_[o] + g + a + beta_[d] > cutoff) continue;
        int32_t str = r.il[i] != 0 ? strings_.append(e.str, r.il[i]) : e.str;
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
      closure(o, cutoff, &clos);
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
          double g = x.g + raw_->g[j], a = x.a + raw_->a[j];
          if (F + g + a + beta_[raw_->dst[j]] > cutoff) continue;  // as in closure
          int32_t str = raw_->il[j] != 0 ? strings_.append(x.str, raw_->il[j]) : x.str;
          sub.push_back(Elem{raw_->dst[j], str, g, a});
        }
        b = e;
        if (sub.empty()) continue;
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

}  // namespace latgen
