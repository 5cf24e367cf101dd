"""torchx.components.structured_arg: the --name and -j arguments of the dist components,
parsed as TorchX documents them."""
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from torchx import _muster, specs

__getattr__ = _muster.missing_attr("torchx.components.structured_arg")


@dataclass
class StructuredNameArgument:
    """--name as EXPERIMENT/RUN, EXPERIMENT/, /RUN or RUN."""

    experiment_name: str
    run_name: str

    def __str__(self) -> str:
        return "%s/%s" % (self.experiment_name or "", self.run_name)

    @staticmethod
    def parse_from(
        name: str,
        m: Optional[str] = None,
        script: Optional[str] = None,
        default_experiment_name: str = "default-experiment",
    ) -> "StructuredNameArgument":
        """Splits name at its first '/'. An empty run is the module's last part (m) or the
        script's stem; an empty experiment is default_experiment_name. Exactly one of m and
        script must be given (ValueError)."""
        if not m and not script:
            raise ValueError(
                "No main module or script specified. Specify either a main module or a script path"
            )
        if m and script:
            raise ValueError(
                "Both main module and script set. Specify exactly one of: main module or script"
            )
        experiment, sep, run = name.partition("/")
        if not sep:
            experiment, run = "", name
        if not run:
            run = m.rpartition(".")[2] if m else Path(script or "").stem
        return StructuredNameArgument(experiment or default_experiment_name, run)


@dataclass
class StructuredJArgument:
    """-j as NNODESxNPROC_PER_NODE, or NNODES alone on a GPU host (NPROC = its GPU count)."""

    nnodes: int
    nproc_per_node: int

    def __str__(self) -> str:
        return "%dx%d" % (self.nnodes, self.nproc_per_node)

    @staticmethod
    def parse_from(h: str, j: str) -> "StructuredJArgument":
        """-j with the named resource h: NPROC defaults to h's GPU count (ValueError when it
        has none); a NPROC other than that count is allowed with a warning."""
        parts = j.split("x")
        gpus = specs.named_resources[h].gpu
        if len(parts) == 1:
            nnodes = int(parts[0])
            if gpus <= 0:
                raise ValueError(
                    "nproc_per_node cannot be inferred from GPU count. `%s` is not a GPU "
                    "instance. You must specify `-j $NNODESx$NPROCS_PER_NODE` (e.g. `-j %dx8`)"
                    % (h, nnodes)
                )
            return StructuredJArgument(nnodes, gpus)
        if len(parts) == 2:
            nnodes, nproc = int(parts[0]), int(parts[1])
            if nproc != gpus:
                warnings.warn(
                    "In `-j %s` you specified nproc_per_node=%d which does not equal the number "
                    "of GPUs on a %s: %d" % (j, nproc, h, gpus)
                )
            return StructuredJArgument(nnodes, nproc)
        raise ValueError(
            "Invalid format for `-j $NNODESx$NPROCS_PER_NODE` (e.g. `-j 1x8`). Given: %s" % j
        )
