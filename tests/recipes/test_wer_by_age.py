"""recipes/speechocean762/local/wer_by_age.py: each group's errors over its own words, at the
setting the decode's dev pick names."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "recipes/speechocean762/local/wer_by_age.py"


def test_groups_count_their_own_errors_at_the_dev_picked_setting(tmp_path: Path) -> None:
    data = tmp_path / "test"
    data.mkdir()
    (data / "text").write_text("c1 a b c d\nt1 a b\na1 a b c d e\n")
    (data / "utt2spk").write_text("c1 kid\nt1 teen\na1 grown\n")
    (tmp_path / "spk2age").write_text("kid 8\nteen 15\ngrown 30\n")
    decode = tmp_path / "decode"
    (decode / "hyp").mkdir(parents=True)
    (decode / "score").mkdir()
    (decode / "score" / "dev_picked.json").write_text(json.dumps({"picked": {"name": "9_0.5"}}))
    (decode / "hyp" / "9_0.5.txt").write_text("c1 a b c x\na1 a b x d\n")  # t1 has no hypothesis
    (decode / "hyp" / "4_0.0.txt").write_text("c1 a b c d\nt1 a b\na1 a b c d e\n")  # another setting's
    out = subprocess.run([sys.executable, str(SCRIPT), str(data), str(tmp_path / "spk2age"), f"s={decode}"],
                         check=True, capture_output=True, text=True).stdout
    assert "children (to 12) 1, teenagers (13-17) 1, adults (18+) 1" in out
    line = out.splitlines()[-1]
    assert "children (to 12) 25.00% (4 words)" in line      # one substitution in 4
    assert "teenagers (13-17) 100.00% (2 words)" in line    # no hypothesis: both deleted
    assert "adults (18+) 40.00% (5 words)" in line          # a substitution and a deletion in 5
    assert line.endswith("all 45.45%")                      # 5 errors in 11 words
