"""Config files: YAML and TOML load into option names; bad files are one-line errors."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from asrtrain.core.config import load_config, write_config
from asrtrain.core.errors import ConfigError


def test_yaml_and_toml_keys_are_normalised(tmp_path: Path) -> None:
    y = tmp_path / "c.yaml"
    y.write_text("batch-size: 8\n--lr: 0.5\n")
    t = tmp_path / "c.toml"
    t.write_text('batch_size = 8\nlr = 0.5\nname = "x"\n')
    assert load_config(y) == {"batch_size": 8, "lr": 0.5}
    assert load_config(t) == {"batch_size": 8, "lr": 0.5, "name": "x"}


def test_malformed_file_names_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("a: [1, 2\n")
    with pytest.raises(ConfigError, match=r"bad\.yaml: not valid YAML"):
        load_config(bad)
    listy = tmp_path / "list.yaml"
    listy.write_text("- 1\n- 2\n")
    with pytest.raises(ConfigError, match="mapping"):
        load_config(listy)


def test_written_config_loads_back(tmp_path: Path) -> None:
    params = {"out": tmp_path / "x", "streams": ("a", "b"), "lr": 0.1, "config": "ignored"}
    write_config(tmp_path / "run.yaml", params)
    back = yaml.safe_load((tmp_path / "run.yaml").read_text())
    assert back == {"out": str(tmp_path / "x"), "streams": ["a", "b"], "lr": 0.1}
    assert load_config(tmp_path / "run.yaml")["lr"] == 0.1
