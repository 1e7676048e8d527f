"""One node, many ranks: the host CPUs and the pinned-memory budget of this process's
optimizer when several ranks share a node (include/tandem/node.h states the policy;
docs/node_sharing.md explains it). torchrun's LOCAL_RANK and LOCAL_WORLD_SIZE say which
rank this is; without them "auto" restricts nothing. Every refusal is a ValueError
naming the option or the variable."""

import os

from tandem import _C
from tandem._core.options import is_int


def local_ranks():
    """(local_rank, local_world_size) from LOCAL_RANK / LOCAL_WORLD_SIZE; (0, 1) when
    either is absent."""
    rank, world = os.environ.get("LOCAL_RANK"), os.environ.get("LOCAL_WORLD_SIZE")
    if rank is None or world is None:
        return 0, 1
    try:
        rank, world = int(rank), int(world)
    except ValueError:
        raise ValueError("LOCAL_RANK=%r / LOCAL_WORLD_SIZE=%r are not integers"
                         % (os.environ["LOCAL_RANK"], os.environ["LOCAL_WORLD_SIZE"])) from None
    if world < 1 or not 0 <= rank < world:
        raise ValueError("LOCAL_RANK=%d is not in [0, LOCAL_WORLD_SIZE=%d)" % (rank, world))
    return rank, world


def gpu_bus_ids(device, rank, world):
    """The PCI bus id of each local rank's GPU, assuming rank r drives cuda:r (the usual
    torchrun layout: every process sees every GPU and uses its local rank's). [] (every
    GPU unknown: the ranks split all cores) when that does not hold or torch does not
    report bus ids."""
    if device is None or device.type != "cuda":
        return []
    import torch
    if device.index != rank or torch.cuda.device_count() < world:
        return []
    ids = []
    for r in range(world):
        props = torch.cuda.get_device_properties(r)
        bus = getattr(props, "pci_bus_id", None)
        if bus is None:
            return []
        ids.append("%04x:%02x:%02x.0" % (getattr(props, "pci_domain_id", 0), bus,
                                         getattr(props, "pci_device_id", 0)))
    return ids


def host_cpus(value, device=None):
    """The host_cpus option as a sorted list of CPU ids ([]: no restriction).
    "auto": this rank's share of the node's cores (RankCpus) when LOCAL_WORLD_SIZE > 1,
    else []; None: []; a list of CPU ids: those (each in os.sched_getaffinity(0), once)."""
    if isinstance(value, str) and value == "auto":
        rank, world = local_ranks()
        if world == 1:
            return []
        return list(_C.rank_cpus(rank, world, gpu_bus_ids(device, rank, world)))
    if value is None:
        return []
    if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
        raise ValueError("host_cpus must be 'auto', None or a list of CPU ids, got %r"
                         % (value,))
    cpus = list(value)
    if not cpus:
        raise ValueError("host_cpus is an empty list: pass None for no restriction")
    allowed = os.sched_getaffinity(0)
    for c in cpus:
        if not is_int(c) or c < 0:
            raise ValueError("host_cpus: %r is not a CPU id (an integer >= 0)" % (c,))
        if c not in allowed:
            raise ValueError("host_cpus: CPU %d is not in this process's CPU affinity %s"
                             % (c, sorted(allowed)))
    if len(set(cpus)) != len(cpus):
        raise ValueError("host_cpus: a CPU is given twice in %r" % (cpus,))
    return sorted(int(c) for c in cpus)


def pinned_budget(value):
    """The pinned_budget option in bytes (0: no limit). "auto": this rank's share of the
    node's budget (TANDEM_NODE_PINNED_BUDGET, else half of MemTotal) when
    LOCAL_WORLD_SIZE > 1, else 0; None: 0; an int >= 0: bytes; a str: a size with a
    unit ("64GiB", "200GB")."""
    if isinstance(value, str) and value == "auto":
        _, world = local_ranks()
        return _C.pinned_budget(world) if world > 1 else 0
    if value is None:
        return 0
    if is_int(value):
        if value < 0:
            raise ValueError("pinned_budget must be >= 0 bytes (0: no limit), got %d" % value)
        return int(value)
    if isinstance(value, str):
        try:
            return _C.parse_byte_size(value)
        except ValueError as e:
            raise ValueError("pinned_budget: %s" % e) from None
    raise ValueError("pinned_budget must be 'auto', None, bytes (an int) or a size such as "
                     "'64GiB', got %r" % (value,))
