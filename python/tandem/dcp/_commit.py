"""The atomic commit of a DCP save, and what an unfinished save reports
(docs/dcp_integrity.md, "Layout of a save").

A save with collectives writes into ``<checkpoint>.tandem-partial`` (the staging
directory) with progress records for the report of an unfinished save:
``.tandem-save.json`` (the coordinator's, once the plan is made: the world size) and
``__<rank>.done.json`` (each rank's, once its data files are complete). The commit removes
them and moves the directory under the checkpoint's name, ``.metadata`` last, so a
directory under that name either holds a finished save or has no ``.metadata``.

Not thread-safe for one directory (one save at a time, as in DCP).
"""

import errno
import json
import os
import re

STAGING_SUFFIX = ".tandem-partial"
PLAN_RECORD = ".tandem-save.json"
METADATA = ".metadata"
_DATA_FILE = re.compile(r"__(\d+)_\d+\.distcp$")
_DONE_RECORD = re.compile(r"__(\d+)\.done\.json$")
_RANK_METADATA = re.compile(r"__\d+\.metadata$")


def staging_path(target):
    """The staging directory of checkpoint directory ``target`` (a ``pathlib.Path``)."""
    return target.with_name(target.name + STAGING_SUFFIX)


def _write_json(path, doc):
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f)
    os.replace(tmp, path)


def _fsync_dir(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def start(staging, world_size):
    """Empties ``staging`` (files a save cut short left there) and writes the plan record.
    The coordinator calls it after every rank created the directory and before any rank
    writes data (DCP's global planning step)."""
    os.makedirs(staging, exist_ok=True)
    for name in os.listdir(staging):
        os.unlink(os.path.join(staging, name))
    _write_json(os.path.join(staging, PLAN_RECORD), {"world_size": world_size})


def rank_done(staging, rank, files):
    """Records that ``rank`` finished writing its data ``files``."""
    _write_json(os.path.join(staging, f"__{rank}.done.json"),
                {"rank": rank, "files": sorted(files)})


def commit(staging, target, sync):
    """Moves the finished save in ``staging`` to ``target``: with one rename where
    ``target`` is missing or empty, else file by file with ``.metadata`` last, after
    removing the earlier checkpoint's ``.metadata`` first. With ``sync``, fsyncs the
    directories involved."""
    for name in os.listdir(staging):
        if name == PLAN_RECORD or _DONE_RECORD.match(name):
            os.unlink(os.path.join(staging, name))
    if os.path.isdir(target):
        # The earlier checkpoint's .metadata goes first: until the last rename below, the
        # directory then reads as an unfinished save, never as a mix of two saves.
        old = [n for n in (METADATA, METADATA + ".crc32c") if os.path.exists(os.path.join(target, n))]
        old += [n for n in os.listdir(target) if _DATA_FILE.match(n)]
        for name in old:
            os.unlink(os.path.join(target, name))
    try:
        os.rename(staging, target)  # atomic: target is missing or an empty directory
    except OSError as e:
        if e.errno not in (errno.ENOTEMPTY, errno.EEXIST):
            raise
        # Other files live in target: move ours in, .metadata last (the commit point).
        for name in sorted(os.listdir(staging), key=lambda n: (n == METADATA, n)):
            os.replace(os.path.join(staging, name), os.path.join(target, name))
        os.rmdir(staging)
    if sync:
        _fsync_dir(target)
        _fsync_dir(os.path.dirname(os.path.abspath(target)))


def _ranks(names, pattern):
    return sorted({int(m.group(1)) for m in map(pattern.match, names) if m})


def _list(ranks):
    return ", ".join(map(str, ranks)) if ranks else "none"


def _describe_staging(staging):
    """What the staging directory ``staging`` says about its save."""
    names = os.listdir(staging)
    if METADATA in names:
        return (f"{staging} holds a save that finished writing but whose move to the "
                "checkpoint's name was interrupted")
    try:
        with open(os.path.join(staging, PLAN_RECORD)) as f:
            world = json.load(f)["world_size"]
    except (OSError, ValueError, KeyError, TypeError):
        world = None
    done = _ranks(names, _DONE_RECORD)
    if isinstance(world, int) and world > 0:
        missing = [r for r in range(world) if r not in done]
        if not missing:
            return (f"{staging} holds its unfinished save by {world} ranks: every rank "
                    f"finished writing its data, but the save stopped before its "
                    f"{METADATA} was written")
        return (f"{staging} holds its unfinished save by {world} ranks: rank(s) "
                f"{_list(done)} finished writing their data, rank(s) {_list(missing)} did not")
    return (f"{staging} holds an unfinished save (data files of rank(s) "
            f"{_list(_ranks(names, _DATA_FILE))}, no record of its plan)")


def describe_missing(path, metadata_name):
    """Why directory ``path`` has no ``metadata_name``, or None when nothing there or
    beside it suggests a save (no directory, no data files, no staging directory)."""
    path = os.fspath(path)
    staging = path + STAGING_SUFFIX
    data = []
    if os.path.isdir(path):
        names = os.listdir(path)
        if path.endswith(STAGING_SUFFIX) or PLAN_RECORD in names:
            return f"checkpoint {path} is a staging directory: " + _describe_staging(path)
        local = sorted(n for n in names if _RANK_METADATA.match(n))
        if metadata_name == METADATA and local:
            return (f"checkpoint {path} has no {METADATA} but {', '.join(local)}: it was "
                    "saved without collectives, and this load asked for the global metadata")
        data = _ranks(names, _DATA_FILE)
        what = f"checkpoint {path} has no {metadata_name}"
        if data:
            what += (f", so its save did not finish (data files of rank(s) {_list(data)} are "
                     "there)")
    elif os.path.isdir(staging):
        what = f"checkpoint {path} does not exist"
    else:
        return None
    if os.path.isdir(staging):
        what += "; " + _describe_staging(staging)
    elif not data:
        return None
    return what
