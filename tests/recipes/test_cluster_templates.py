"""The cluster job templates plan the right job: each template runs for real, under bash,
with its launcher (srun, mpirun, mpiexec) replaced by a shim on PATH that gives the
command the environment of one rank -- the way that launcher would -- and adds
``--dry-run``. The test then reads ``asrtrain train``'s plan (world, groups, ring) and
the rank's placement (rank, local rank, master address) from the environment it got.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CLUSTER = ROOT / "scripts" / "cluster"
VENV_BIN = Path(sys.executable).parent

# Each shim: RANK_UNDER_TEST picks the rank; the environment the command sees is dumped to
# $SHIM_ENV_OUT (NUL-separated NAME=value) before `asrtrain ... --dry-run` is exec'd.
_DUMP = 'env -0 > "$SHIM_ENV_OUT"'

# srun inside a batch job: every task inherits the job's environment (--export=ALL) and
# gets SLURM_PROCID / SLURM_LOCALID; the job gives SLURM_NTASKS etc. With
# --ntasks-per-node=1 (torchrun mode) the task is the node.
SRUN = f"""#!/usr/bin/env bash
per=${{SLURM_NTASKS_PER_NODE%%(*}}
while [[ "$1" == -* ]]; do
  if [ "$1" = --ntasks-per-node=1 ]; then per=1; export SLURM_NTASKS=$SLURM_JOB_NUM_NODES; fi
  shift
done
export SLURM_PROCID=$RANK_UNDER_TEST SLURM_LOCALID=$((RANK_UNDER_TEST % per))
[ "$1" = torchrun ] || {_DUMP}
exec "$@" --dry-run
"""

# Open MPI's mpirun: a remote rank sees only what -x exports, plus OMPI_COMM_WORLD_*.
MPIRUN = f"""#!/usr/bin/env bash
np=1; ppr=1; keep=()
while [[ "$1" == -* ]]; do
  case "$1" in
    -np|-n) np=$2; shift 2 ;;
    --map-by) ppr=$(echo "$2" | sed -E 's/^ppr:([0-9]+):node$/\\1/'); shift 2 ;;
    -x) if [[ "$2" == *=* ]]; then keep+=("$2"); else keep+=("$2=${{!2}}"); fi; shift 2 ;;
    *) echo "mpirun shim: unexpected option $1" >&2; exit 2 ;;
  esac
done
exec env -i "${{keep[@]}}" OMPI_COMM_WORLD_RANK=$RANK_UNDER_TEST OMPI_COMM_WORLD_SIZE=$np \\
  OMPI_COMM_WORLD_LOCAL_RANK=$((RANK_UNDER_TEST % ppr)) OMPI_COMM_WORLD_LOCAL_SIZE=$ppr \\
  SHIM_ENV_OUT=$SHIM_ENV_OUT bash -c '{_DUMP}; exec "$@" --dry-run' shim "$@"
"""

# MPICH's mpiexec (Hydra): the environment is passed on, -genv adds to it, PMI_* per rank.
MPIEXEC = f"""#!/usr/bin/env bash
np=1; ppn=1
while [[ "$1" == -* ]]; do
  case "$1" in
    -n|-np) np=$2; shift 2 ;;
    -ppn) ppn=$2; shift 2 ;;
    -hosts) export SHIM_HOSTS=$2; shift 2 ;;
    -genv) export "$2=$3"; shift 3 ;;
    *) echo "mpiexec shim: unexpected option $1" >&2; exit 2 ;;
  esac
done
export PMI_RANK=$RANK_UNDER_TEST PMI_SIZE=$np MPI_LOCALRANKID=$((RANK_UNDER_TEST % ppn)) MPI_LOCALNRANKS=$ppn
{_DUMP}
exec "$@" --dry-run
"""

# torchrun (one per node, started by srun): node rank from srun's task, workers numbered
# node-major; with c10d rendezvous the store lives at --rdzv-endpoint.
TORCHRUN = f"""#!/usr/bin/env bash
while [[ "$1" == --* ]]; do
  case "$1" in
    --nnodes) nnodes=$2 ;; --nproc-per-node) nper=$2 ;; --rdzv-endpoint) endpoint=$2 ;;
    --rdzv-backend|--rdzv-id) ;;
    *) echo "torchrun shim: unexpected option $1" >&2; exit 2 ;;
  esac
  shift 2
done
local=$((TORCHRUN_LOCAL_UNDER_TEST))
export RANK=$((SLURM_PROCID * nper + local)) WORLD_SIZE=$((nnodes * nper)) LOCAL_RANK=$local \\
  LOCAL_WORLD_SIZE=$nper MASTER_ADDR=${{endpoint%:*}} MASTER_PORT=${{endpoint##*:}}
{_DUMP}
script=$1; shift
exec python3 "$script" "$@"
"""

# Slurm's scontrol show hostnames LIST: the test's expansion of the job's node list.
SCONTROL = """#!/usr/bin/env bash
[ "$1 $2" = "show hostnames" ] || { echo "scontrol shim: unexpected $*" >&2; exit 2; }
printf '%s\\n' $SHIM_HOSTNAMES
"""

SHIMS = {"srun": SRUN, "mpirun": MPIRUN, "mpiexec": MPIEXEC, "torchrun": TORCHRUN, "scontrol": SCONTROL}


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A job's working directory with data/archives/{train,dev}.h5 and the launcher shims."""
    spec = importlib.util.spec_from_file_location("train_conftest", ROOT / "tests" / "train" / "conftest.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    root = tmp_path_factory.mktemp("cluster_job")
    (root / "data" / "archives").mkdir(parents=True)
    mod.write_learnable_archive(root / "data" / "archives" / "train.h5", 6, seed=0)
    mod.write_learnable_archive(root / "data" / "archives" / "dev.h5", 3, seed=1)
    (root / "bin").mkdir()
    for name, text in SHIMS.items():
        (root / "bin" / name).write_text(text)
        (root / "bin" / name).chmod(0o755)
    return root


def edit_block(template: Path, out: Path, **values: str) -> Path:
    """The template with the lines of its edit block set as a user would (NAME=value)."""
    text = template.read_text()
    for name, value in values.items():
        text, n = re.subn(rf"^{name}=.*$", f"{name}={value}", text, count=1, flags=re.M)
        assert n == 1, f"{template.name} has no {name}= line to edit"
    out.write_text(text)
    return out


def run_template(script: Path, workdir: Path, rank: int, env: dict[str, str]) -> tuple[dict, dict]:
    """Run the job script as rank ``rank``; return (the plan's rows, that rank's environment)."""
    dump = workdir / f"env.{script.name}.{rank}.json"
    dump.unlink(missing_ok=True)
    base = {k: v for k, v in os.environ.items()
            if not re.match(r"(SLURM_|OMPI_|PMI_|MPI_|LSB_|RANK$|WORLD_SIZE$|MASTER_)", k)}
    full = {**base, **env, "PATH": f"{workdir / 'bin'}:{VENV_BIN}:{base.get('PATH', '/usr/bin:/bin')}",
            "HOME": str(workdir), "RANK_UNDER_TEST": str(rank), "SHIM_ENV_OUT": str(dump),
            "COLUMNS": "3000"}
    proc = subprocess.run(["bash", str(script)], cwd=workdir, env=full, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    rows: dict[str, str] = {}
    key = ""
    for line in proc.stdout.splitlines():  # rich's table; a long value wraps onto rows with no key
        cells = [c.strip() for c in line.split("│")]
        if len(cells) == 4:
            key = cells[1] or key
            rows[key] = f"{rows.get(key, '')} {cells[2]}".strip()
    assert "learners" in rows, proc.stdout
    env_seen = dict(item.split("=", 1) for item in dump.read_text().split("\0") if "=" in item)
    return rows, env_seen


def value(rows: dict, key: str):
    return ast.literal_eval(rows[key])


def placement(env: dict):
    from asrtrain.distributed.launch import detect

    return detect(env)


def test_slurm_srun_plans_64_learners_as_16_nodes_of_4(workdir: Path, tmp_path: Path) -> None:
    script = edit_block(CLUSTER / "slurm_train.sbatch", tmp_path / "job.sbatch", EPOCHS="2")
    job_env = {"SLURM_JOB_ID": "4242", "SLURM_JOB_NAME": "asrtrain", "SLURM_NTASKS": "64",
               "SLURM_NTASKS_PER_NODE": "4", "SLURM_JOB_NUM_NODES": "16", "SLURM_NNODES": "16",
               "SLURM_JOB_NODELIST": "gpu[01-16]", "SLURM_CPUS_PER_TASK": "8"}
    rows, env = run_template(script, workdir, rank=13, env=job_env)
    assert rows["launcher"] == "slurm" and rows["strategy"] == "h-adpsgd"
    assert value(rows, "learners") == 64 and value(rows, "local_learners") == 4
    assert value(rows, "super_learner_size") == 4
    assert value(rows, "super_learners") == {k: [4 * k + i for i in range(4)] for k in range(16)}
    assert value(rows, "ring") == list(range(16))
    assert value(rows, "effective_batch") == 2560 and value(rows, "batch_per_learner") == 40
    assert value(rows, "epochs") == 2
    place = placement(env)
    assert (place.rank, place.world_size, place.local_rank) == (13, 64, 1)
    assert place.master_addr == "gpu01" and place.master_port == 12000 + 4242
    assert env["OMP_NUM_THREADS"] == "8"  # the template gives each learner its task's cores


def test_lsf_mpirun_plans_from_lsb_hosts(workdir: Path, tmp_path: Path) -> None:
    script = edit_block(CLUSTER / "lsf_train.bsub", tmp_path / "job.bsub", PER_NODE="2", BATCH="64")
    hosts = " ".join(h for n in range(1, 5) for h in [f"node{n}"] * 2)  # LSF lists a host per slot
    rows, env = run_template(script, workdir, rank=6, env={"LSB_JOBID": "99", "LSB_HOSTS": hosts,
                                                            "LSB_DJOB_NUMPROC": "8"})
    assert rows["launcher"] == "openmpi" and rows["strategy"] == "h-adpsgd"
    assert value(rows, "learners") == 8 and value(rows, "local_learners") == 2
    assert value(rows, "super_learners") == {0: [0, 1], 1: [2, 3], 2: [4, 5], 3: [6, 7]}
    assert value(rows, "ring") == [0, 1, 2, 3]
    assert value(rows, "rounds")[:2] == [[[0, 1], [2, 3]], [[0, 3], [1, 2]]]
    assert value(rows, "batch_per_learner") == 8 and value(rows, "super_learner_batch") == 16
    place = placement(env)
    assert (place.rank, place.world_size, place.local_rank, place.local_world_size) == (6, 8, 0, 2)
    assert place.master_addr == "node1" and place.master_port == 29500
    assert env["OMP_NUM_THREADS"] == "1"


def test_mpiexec_plans_groups_of_ppn_on_the_host_list(workdir: Path, tmp_path: Path) -> None:
    script = edit_block(CLUSTER / "mpiexec_train.sh", tmp_path / "job.sh", NP="6", PER_NODE="3",
                        HOSTS="hostA,hostB", STRATEGY="h-adpsgd", BATCH="60")
    rows, env = run_template(script, workdir, rank=4, env={})
    assert rows["launcher"] == "mpich" and rows["strategy"] == "h-adpsgd"
    assert value(rows, "learners") == 6 and value(rows, "local_learners") == 3
    assert value(rows, "super_learners") == {0: [0, 1, 2], 1: [3, 4, 5]}
    assert value(rows, "ring") == [0, 1]
    assert value(rows, "batch_per_learner") == 10 and value(rows, "effective_batch") == 60
    place = placement(env)
    assert (place.rank, place.world_size, place.local_rank, place.local_world_size) == (4, 6, 1, 3)
    assert place.master_addr == "hostA" and place.master_port == 29500


def test_mpiexec_template_defaults_plan_adpsgd_on_one_host(workdir: Path) -> None:
    rows, env = run_template(CLUSTER / "mpiexec_train.sh", workdir, rank=0, env={})
    assert rows["strategy"] == "adpsgd" and value(rows, "learners") == 4
    assert value(rows, "super_learner_size") == 1  # ADPSGD: every learner gossips on its own
    assert value(rows, "ring") == [0, 1, 2, 3]
    assert placement(env).master_addr == "localhost"


JOBS = {  # template -> (the job environment of a 2-node job with 2 learners each)
    "slurm_train.sbatch": {"SLURM_JOB_ID": "7", "SLURM_NTASKS": "4", "SLURM_NTASKS_PER_NODE": "2",
                           "SLURM_JOB_NUM_NODES": "2", "SLURM_JOB_NODELIST": "cn[8-9]"},
    "lsf_train.bsub": {"LSB_JOBID": "7", "LSB_HOSTS": "cn8 cn8 cn9 cn9", "LSB_DJOB_NUMPROC": "4"},
    "mpiexec_train.sh": {},
}


@pytest.mark.parametrize("template,strategy", [("slurm_train.sbatch", "adpsgd"), ("lsf_train.bsub", "ssgd"),
                                               ("mpiexec_train.sh", "ssgd")])
def test_templates_plan_flat_strategies(workdir: Path, tmp_path: Path, template: str, strategy: str) -> None:
    """--group-size is H-ADPSGD's: the templates must not pass it to SSGD or ADPSGD."""
    edits = {"STRATEGY": strategy, "BATCH": "64"}
    if template == "mpiexec_train.sh":
        edits.update(NP="4", PER_NODE="2", HOSTS="cn8,cn9")
    if template == "lsf_train.bsub":
        edits["PER_NODE"] = "2"
    script = edit_block(CLUSTER / template, tmp_path / template, **edits)
    rows, env = run_template(script, workdir, rank=3, env=JOBS[template])
    assert rows["strategy"] == strategy and value(rows, "learners") == 4
    # SSGD: all learners form one synchronous group; ADPSGD: every learner gossips alone
    assert value(rows, "super_learner_size") == {"ssgd": 4, "adpsgd": 1}[strategy]
    assert value(rows, "batch_per_learner") == 16
    place = placement(env)
    assert (place.rank, place.local_rank, place.master_addr) == (3, 1, "cn8")


def test_slurm_torchrun_plans_nodes_times_gpus(workdir: Path, tmp_path: Path) -> None:
    """LAUNCHER=torchrun: srun starts one torchrun per node, each with a worker per GPU."""
    script = edit_block(CLUSTER / "slurm_train.sbatch", tmp_path / "job.sbatch", LAUNCHER="torchrun")
    job_env = {"SLURM_JOB_ID": "4242", "SLURM_NTASKS": "64", "SLURM_NTASKS_PER_NODE": "4",
               "SLURM_JOB_NUM_NODES": "16", "SLURM_JOB_NODELIST": "gpu[01-16]",
               "SHIM_HOSTNAMES": " ".join(f"gpu{i:02d}" for i in range(1, 17)),
               "TORCHRUN_LOCAL_UNDER_TEST": "2"}
    rows, env = run_template(script, workdir, rank=5, env=job_env)  # node 6 (gpu06), worker 2
    assert rows["launcher"] == "torchrun" and rows["strategy"] == "h-adpsgd"
    assert value(rows, "learners") == 64 and value(rows, "super_learner_size") == 4
    assert value(rows, "super_learners")[5] == [20, 21, 22, 23]
    place = placement(env)
    assert (place.rank, place.world_size, place.local_rank, place.local_world_size) == (22, 64, 2, 4)
    assert (place.master_addr, place.master_port) == ("gpu01", 29500)


@pytest.mark.parametrize("elastic", ["false", "true"])
def test_slurm_template_requeues_a_preempted_job(tmp_path: Path, elastic: str) -> None:
    """srun ends with asrtrain's preemption status (75): the script requeues the job and keeps the status."""
    script = edit_block(CLUSTER / "slurm_train.sbatch", tmp_path / "job.sbatch", STRATEGY="adpsgd", ELASTIC=elastic)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "calls"
    for name, status in (("srun", 75), ("scontrol", 0)):
        (bin_dir / name).write_text(f'#!/usr/bin/env bash\necho "{name} $*" >> "{calls}"\nexit {status}\n')
        (bin_dir / name).chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    env.update(PATH=f"{bin_dir}:{env['PATH']}", HOME=str(tmp_path), SLURM_JOB_ID="77", SLURM_NTASKS_PER_NODE="4")
    proc = subprocess.run(["bash", str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 75, proc.stderr
    srun, scontrol = calls.read_text().splitlines()
    assert "--save-every 30" in srun and ("--elastic" in srun) == (elastic == "true")
    assert f"--kill-on-bad-exit={0 if elastic == 'true' else 1}" in srun
    assert scontrol == "scontrol requeue 77"
    assert "#SBATCH --requeue" in script.read_text() and "#SBATCH --signal=USR1@300" in script.read_text()
