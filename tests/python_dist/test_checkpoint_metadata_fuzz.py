"""A mutation run over the metadata JSON of checkpoint files (the manifest's metadata
string, where tandem.torch keeps param_groups: Note [Checkpoint metadata] in
python/tandem/torch/_state.py), through the real load path: a file is written with the mutated
metadata (valid CRCs, so the mutation reaches the parser) and loaded.

Mutations: one bit of every byte flipped in turn (where the result is still UTF-8, as
the format requires), and every value of the document replaced by values of other types
and ranges, or removed. Every load must succeed or raise ValueError/TypeError naming the
checkpoint, and a refused load must leave the optimizer unchanged.
"""

import json
import warnings

import pytest

torch = pytest.importorskip("torch")
import tandem._C  # noqa: E402
import tandem.torch  # noqa: E402
from tandem.torch import _state  # noqa: E402

if not tandem._C.has_checkpoint:
    pytest.skip("tandem._C built without the checkpoint library", allow_module_level=True)

REPLACEMENTS = [None, True, -1, 0, 7, 2 ** 64, 1e308, -0.5, "x", [], {}, [1, 2, 3], {"a": 1}]


def _optimizer(seed=0):
    torch.manual_seed(seed)
    a, b, c = (torch.nn.Parameter(torch.randn(n)) for n in (40, 7, 3))
    opt = tandem.torch.AdamW([{"params": [a, b]}, {"params": [c], "lr": 3e-3,
                                                     "weight_decay": 0.0}],
                             lr=1e-2, weight_decay=0.1)
    for p in (a, b, c):
        p.grad = torch.randn_like(p)
    opt.step()
    return opt, (a, b, c)


def _paths(value, prefix=()):
    """Every path to a value in a JSON document."""
    yield prefix
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _paths(v, prefix + (i,))


def _replaced(doc, path, new):
    doc = json.loads(json.dumps(doc))
    if not path:
        return new
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    if new is _REMOVE:
        del parent[path[-1]]
    else:
        parent[path[-1]] = new
    return doc


_REMOVE = object()


def _snapshot(opt, params):
    return ([p.detach().clone() for p in params], json.dumps(opt.param_groups, default=str),
            {k: v.clone() if torch.is_tensor(v) else v
             for s in opt.state_dict()["state"].values() for k, v in s.items()})


def _same(a, b):
    return (all(torch.equal(x, y) for x, y in zip(a[0], b[0])) and a[1] == b[1]
            and a[2].keys() == b[2].keys()
            and all(torch.equal(a[2][k], b[2][k]) if torch.is_tensor(a[2][k])
                    else a[2][k] == b[2][k] for k in a[2]))


def test_mutated_metadata_json_loads_or_is_refused_cleanly(tmp_path):
    source, _ = _optimizer()
    text = _state._metadata(source)
    doc = json.loads(text)
    mutants = []
    raw = text.encode()
    for i in range(len(raw)):
        b = bytearray(raw)
        b[i] ^= 1 << (i % 8)
        try:
            mutants.append(b.decode())
        except UnicodeDecodeError:
            continue
    for path in _paths(doc):
        for new in REPLACEMENTS + ([_REMOVE] if path else []):
            mutants.append(json.dumps(_replaced(doc, path, new)))
    target, params = _optimizer(seed=1)
    path = tmp_path / "m.tckpt"
    outcomes = {"loaded": 0, "refused": 0}
    bad = []
    for m in mutants:
        source._core.engine.save_checkpoint(str(path), "none", False, m)
        before = _snapshot(target, params)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                target.load_checkpoint(path)
            outcomes["loaded"] += 1
            target, params = _optimizer(seed=1)  # a fresh one for the next mutant
        except (ValueError, TypeError) as e:
            outcomes["refused"] += 1
            if str(path) not in str(e) or not _same(before, _snapshot(target, params)):
                bad.append((m, f"{type(e).__name__}: {e}"))
        except Exception as e:  # noqa: BLE001: anything else is a finding
            bad.append((m, f"{type(e).__name__}: {e}"))
    print(f"metadata mutants: {len(mutants)}: {outcomes}")
    assert not bad, bad[:5]
    assert outcomes["refused"] > 0 and outcomes["loaded"] > 0
